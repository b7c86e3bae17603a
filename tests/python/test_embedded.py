"""The streamlearn Python package against one real embedded server (a child process on a port
of its choosing, a data directory in a temporary directory, metrics off).

Run by ctest (python.Embedded) with the python of the venv python.Install made:
    VENV/bin/python tests/python/test_embedded.py --server_binary PATH [unittest args]
STREAMLEARN_TEST_SEED sets the random inputs' seed (printed).
"""

import os
import shutil
import threading
import unittest

import harness

import grpc
import streamlearn
from streamlearn import errors
from streamlearn.pb import admin_pb2, sau_pb2

D, DV = 4, 2


class EmbeddedServerTest(unittest.TestCase):
    server: harness.ServerProcess
    client: streamlearn.Client
    address: str

    @classmethod
    def setUpClass(cls) -> None:
        cls.dir = harness.temp_dir("streamlearn-py-embedded-")
        cls.server = harness.ServerProcess(
            harness.ARGS.server_binary,
            ["--data_dir=" + os.path.join(cls.dir, "data"), "--max_batch=1000"],
            os.path.join(cls.dir, "server.log"))
        port = cls.server.wait_for_port()
        if port <= 0:
            raise AssertionError("the server did not start:\n" + cls.server.log())
        cls.address = f"127.0.0.1:{port}"
        cls.client = streamlearn.Client(cls.address, timeout=30.0)
        cls.rng = harness.rng()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.server.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def vec(self, n: int) -> list:
        return [self.rng.gauss(0.0, 1.0) for _ in range(n)]

    # --- models -----------------------------------------------------------------------------

    def test_create_describe_list_and_their_errors(self) -> None:
        info = self.client.create_model("py_models", shards=3,
                                        sau={"d": D, "d_v": DV, "r": 16, "gamma": 0.95},
                                        lmu={})
        self.assertEqual(info.spec.name, "py_models")
        self.assertEqual(info.spec.shards, 3)
        self.assertAlmostEqual(info.spec.sau.gamma, 0.95)
        self.assertTrue(info.spec.HasField("lmu"))
        self.assertEqual(info.spec.lmu.m, 1)          # a default filled in
        # The same from a dict in ModelSpec's JSON form (lowerCamelCase too).
        other = self.client.create_model({"name": "py_models_json", "sau": {"d": D, "dV": 1,
                                                                            "r": 8}})
        self.assertEqual(other.spec.sau.d_v, 1)
        self.assertFalse(other.spec.HasField("lmu"))
        described = self.client.describe("py_models")
        self.assertEqual(described.spec, info.spec)
        self.assertEqual(len(described.shards), 3)
        names = {m.spec.name for m in self.client.list_models()}
        self.assertTrue({"py_models", "py_models_json"} <= names, names)
        smap = self.client.shard_map("py_models")
        self.assertFalse(smap.cluster)
        self.assertEqual(sorted(o.shard for o in smap.shards), [0, 1, 2])
        self.assertEqual(streamlearn.to_dict(described)["spec"]["name"], "py_models")

        with self.assertRaises(errors.AlreadyExists) as e:
            self.client.create_model("py_models", sau={"d": D, "d_v": DV, "r": 16})
        self.assertEqual(e.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertIn("py_models", e.exception.message)
        with self.assertRaises(errors.InvalidArgument) as e:
            self.client.create_model("py_bad", sau={"d": 0, "d_v": 1, "r": 16})
        self.assertIn("sau.d", e.exception.message)
        with self.assertRaises(ValueError):
            self.client.create_model("py_bad", sau={"no_such_field": 1})
        with self.assertRaises(errors.NotFound) as e:
            self.client.describe("py_nope")
        self.assertIsInstance(e.exception, errors.StreamlearnError)
        self.assertEqual(e.exception.details["method"], "Admin.GetModel")
        self.assertTrue(str(e.exception).startswith("NOT_FOUND: "), str(e.exception))
        for call in (lambda: self.client.query("py_nope", [0.0] * D),
                     lambda: self.client.predict("py_nope", {1: 1.0}),
                     lambda: self.client.shard_map("py_nope"),
                     lambda: self.client.audit_head("py_nope"),
                     lambda: self.client.ingest_session("py_nope"),
                     lambda: self.client.ingest("py_nope", [(1, [0.0] * D, [0.0] * DV)])):
            with self.assertRaises(errors.NotFound):
                call()

    # --- SAU --------------------------------------------------------------------------------

    def test_ingest_then_query_reads_its_writes(self) -> None:
        self.client.create_model("py_sau", shards=2, sau={"d": D, "d_v": DV, "r": 32})
        events = [(t, self.vec(D), self.vec(DV)) for t in range(1, 201)]
        results = []
        stats = self.client.ingest("py_sau", events, routing_key="user-7", batch_size=50,
                                   on_ack=results.append)
        shard = self.client.shard_of("py_sau", "user-7")
        self.assertEqual((stats.batches_sent, stats.batches_acked), (4, 4))
        self.assertEqual((stats.applied, stats.duplicates, stats.rejected), (200, 0, 0))
        self.assertEqual([r.index for r in results], [0, 1, 2, 3])   # each final ack once
        self.assertTrue(all(r.ok and r.shard == shard and r.attempts == 1 for r in results))
        version = stats.shards[shard].last_ack.ver_sau
        answer = self.client.query("py_sau", self.vec(D), routing_key="user-7",
                                   path="correctness", min_version=version)
        self.assertEqual(len(answer.y_hat), DV)
        self.assertEqual(answer.shard, shard)
        self.assertEqual(answer.events, 200)
        self.assertGreaterEqual(answer.ver_sau, version)
        with self.assertRaises(errors.FailedPrecondition):
            self.client.query("py_sau", self.vec(D), routing_key="user-7",
                              min_version=version + 1000)
        with self.assertRaises(errors.InvalidArgument):
            self.client.query("py_sau", self.vec(D + 1), routing_key="user-7")
        with self.assertRaises(ValueError):
            self.client.query("py_sau", self.vec(D), path="fastest")

        # Resent events are duplicates, never applied twice.
        again = self.client.ingest("py_sau", events[150:], routing_key="user-7")
        self.assertEqual((again.applied, again.duplicates), (0, 50))
        self.assertEqual(again.shards[shard].last_ack.duplicate_t[0], 151)

    def test_ridge_and_vla_engines_recall_their_bindings(self) -> None:
        # Unit keys along the axes, each bound to its own value: both engines read each back.
        d = 8
        keys = [[1.0 if j == i else 0.0 for j in range(d)] for i in range(6)]
        values = [[float(i), -float(i)] for i in range(6)]
        for engine in ("ridge", "vla"):
            with self.subTest(engine=engine):
                model = f"py_{engine}"
                info = self.client.create_model(model, sau={"d": d, "d_v": 2, "engine": engine})
                self.assertEqual(admin_pb2.Engine.Name(info.spec.sau.engine),
                                 f"ENGINE_{engine.upper()}")
                events = [(t + 1, k, v) for t, (k, v) in enumerate(zip(keys, values))]
                stats = self.client.ingest(model, events)
                self.assertEqual(stats.applied, 6)
                for k, v in zip(keys, values):
                    y = self.client.query(model, k).y_hat
                    self.assertAlmostEqual(y[0], v[0], delta=0.02)
                    self.assertAlmostEqual(y[1], v[1], delta=0.02)
                answer = self.client.query(model, keys[0])
                if engine == "ridge":
                    self.assertGreaterEqual(answer.condition, 1.0)
                else:
                    self.assertGreater(answer.s_norm, 0.0)
        with self.assertRaises(errors.InvalidArgument):
            self.client.create_model("py_mixed", sau={"d": d, "d_v": 2, "engine": "ridge",
                                                      "r": 16})

    def test_session_batches_per_shard_and_rejects_a_wrong_dimension(self) -> None:
        self.client.create_model("py_session", shards=3, sau={"d": D, "d_v": DV, "r": 16})
        results = []
        session = self.client.ingest_session("py_session", batch_size=10, window=4,
                                             on_ack=results.append, raise_on_reject=False)
        with session:
            for t in range(1, 26):
                session.send_event(t, self.vec(D), self.vec(DV), routing_key="a")
            session.send([sau_pb2.Event(t=100, k=self.vec(D + 1), v=self.vec(DV))],
                         routing_key="a")                          # wrong dimension
            session.send([{"t": 101, "k": self.vec(D), "v": self.vec(DV)}], routing_key="a")
        stats = session.stats
        # 10 + 10 buffered, the 5 left flushed before the explicit batch, then 2 more.
        self.assertEqual(stats.batches_sent, 5)
        self.assertEqual([r.size for r in results], [10, 10, 5, 1, 1])
        self.assertEqual((stats.applied, stats.rejected), (26, 1))
        rejected = session.rejected[0]
        self.assertIsInstance(rejected, errors.BatchRejected)
        self.assertIsInstance(rejected, errors.InvalidArgument)
        self.assertEqual(rejected.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(rejected.batch_index, 3)
        self.assertEqual(rejected.status[0], 3)
        self.assertIn("k has 5 values", rejected.message)
        self.assertEqual(results[3].error, rejected)

        # raise_on_reject (the default): flush/close raise it; the convenience method too.
        with self.assertRaises(errors.InvalidArgument) as e:
            self.client.ingest("py_session", [(200, self.vec(D), self.vec(DV + 1))],
                               routing_key="a")
        self.assertIsInstance(e.exception, errors.BatchRejected)
        self.assertEqual(e.exception.batch_index, 0)
        self.assertEqual(e.exception.details["stats"].rejected, 1)
        # A model without an LMU part refuses LMU batches in-band.
        with self.assertRaises(errors.FailedPrecondition):
            self.client.update("py_session", [(1, {1: 1.0}, 1.0)])

    def test_shards_computed_by_the_client_equal_the_acks(self) -> None:
        self.client.create_model("py_routing", shards=7, sau={"d": D, "d_v": DV, "r": 16})
        keys = [f"key-{self.rng.getrandbits(48):x}" for _ in range(300)] + ["", "é", "\x00"]
        acked = {}
        with self.client.ingest_session(
                "py_routing", batch_size=1, window=32,
                on_ack=lambda r: acked.__setitem__(r.routing_key, r.ack.shard)) as s:
            for t, key in enumerate(keys, start=1):
                s.send_event(t, self.vec(D), self.vec(DV), routing_key=key)
        self.assertEqual(len(acked), len(keys))
        for key in keys:
            b = key.encode("utf-8")
            self.assertEqual(acked[b], streamlearn.shard_for(key, 7), key)
            self.assertEqual(acked[b], self.client.shard_of("py_routing", b), key)
        self.assertEqual(len(set(acked.values())), 7)

    def test_a_paused_server_is_waited_out_by_resending(self) -> None:
        self.client.create_model("py_paused", sau={"d": D, "d_v": DV, "r": 16})
        events = [(t, self.vec(D), self.vec(DV)) for t in range(1, 31)]
        session = self.client.ingest_session("py_paused", batch_size=10, ack_timeout=1.0)
        resumed = threading.Event()

        def resume_after_a_stream_failure() -> None:
            harness.wait_for(lambda: session.stats.stream_failures >= 1,
                             "the session to give up on the paused server's stream", 120.0)
            self.server.resume()
            resumed.set()

        self.client.shard_map("py_paused")   # cached: the map is not asked of a paused server
        self.addCleanup(self.server.resume)
        self.server.pause()  # returns once the server has stopped, not when it is signalled
        watcher = threading.Thread(target=resume_after_a_stream_failure, daemon=True)
        watcher.start()
        with session:
            session.send(events)          # three batches; no ack until the server runs
        watcher.join()
        self.assertTrue(resumed.is_set())
        stats = session.stats
        self.assertGreaterEqual(stats.resends, 1)
        self.assertEqual((stats.batches_acked, stats.rejected), (3, 0))
        self.assertEqual(stats.applied + stats.duplicates, 30)
        self.assertEqual(self.client.query("py_paused", self.vec(D)).events, 30)

    # --- LMU and Fuse -----------------------------------------------------------------------

    def test_update_then_predict(self) -> None:
        self.client.create_model("py_lmu", shards=2, lmu={"lr": 0.1})
        samples = []
        for t in range(1, 301):
            x = {self.rng.randrange(20): 1.0, 100 + self.rng.randrange(5): 0.5}
            samples.append({"t": t, "x": x, "y": sum(x.values())})
        stats = self.client.update("py_lmu", samples, routing_key="u", batch_size=64)
        self.assertEqual((stats.applied, stats.rejected), (300, 0))
        shard = self.client.shard_of("py_lmu", "u")
        ack = stats.shards[shard].last_ack
        answer = self.client.predict("py_lmu", [(3, 1.0), (101, 0.5)], routing_key="u")
        self.assertEqual(answer.shard, shard)
        self.assertEqual(len(answer.y_hat), 1)
        self.assertEqual((answer.ver_base, answer.ver_delta), (ack.ver_base, ack.ver_delta))
        same = self.client.predict("py_lmu", ids=[3, 101], vals=[1.0, 0.5], routing_key="u")
        self.assertEqual(list(same.y_hat), list(answer.y_hat))
        with self.assertRaises(errors.InvalidArgument):
            self.client.predict("py_lmu", {}, routing_key="u")
        # Several samples in one call: each gets what predict gives it alone.
        xs = [{3: 1.0, 101: 0.5}, [(7, -2.0)], {3: 0.25, 9999: 1.0, 5: 1.5}]
        many = self.client.predict_many("py_lmu", xs, routing_key="u")
        self.assertEqual(many, [list(self.client.predict("py_lmu", x, routing_key="u").y_hat)
                                for x in xs])
        self.assertEqual(self.client.predict_many("py_lmu", [], routing_key="u"), [])
        with self.assertRaises(errors.InvalidArgument) as e:
            self.client.predict_many("py_lmu", [{3: 1.0}, {}], routing_key="u")
        self.assertIn("sample 1: x is empty", str(e.exception))
        with self.assertRaises(ValueError):
            self.client.predict("py_lmu", {-1: 1.0})
        with self.assertRaises(errors.FailedPrecondition):
            self.client.query("py_lmu", [0.0] * D)

    def test_samples_in_columns_learn_what_the_same_samples_as_messages_do(self) -> None:
        for name in ("py_rows", "py_columns"):
            self.client.create_model(name, lmu={"lr": 0.05})
        t, counts, ids, vals, y, samples = [], [], [], [], [], []
        for i in range(1, 501):
            x = [(self.rng.randrange(50), 1.0), (1000 + self.rng.randrange(9), 1.0)]
            target = self.rng.random()
            t.append(i)
            counts.append(len(x))
            ids.extend(f for f, _ in x)
            vals.extend(v for _, v in x)
            y.append(target)
            samples.append({"t": i, "x": x, "y": target})
        rows = self.client.update("py_rows", samples, batch_size=128)
        with self.client.update_session("py_columns", batch_size=128) as session:
            sent = session.send_columns(t, counts, ids, y)  # vals left out: all 1.0
        self.assertEqual(len(sent), 4)  # 500 samples in batches of 128
        self.assertEqual((session.stats.applied, rows.applied), (500, 500))
        probe = [(3, 1.0), (1004, 1.0)]
        self.assertEqual(self.client.predict("py_columns", probe).y_hat,
                         self.client.predict("py_rows", probe).y_hat)
        digests = [self.client.describe(m).lmu_shards[0].state_digest
                   for m in ("py_rows", "py_columns")]
        self.assertEqual(digests[0], digests[1])
        # Columns that do not fit together fail before anything is sent; the server names a
        # bad value as it does in a message.
        with self.client.update_session("py_columns", batch_size=1) as session:
            self.assertEqual(session.send_columns([], [], [], []), [])
            with self.assertRaises(ValueError):
                session.send_columns([600], [2], [1], [0.5])
            with self.assertRaises(ValueError):
                session.send_columns([600], [1], [1], [0.5], vals=[1.0, 2.0])
            with self.assertRaises(TypeError):  # an id must be an integer, not 1.5
                session.send_columns([600], [1], [1.5], [0.5])
            with self.assertRaises(ValueError):  # the second batch's id is out of range...
                session.send_columns([600, 601], [1, 1], [1, -1], [0.5, 0.5])
            self.assertEqual(session.stats.batches_sent, 0)  # ... so not even the first went
            with self.assertRaises(errors.BatchRejected) as rejected:
                session.send_columns([600], [1], [1], [0.5], vals=[float("nan")])
                session.flush()
            self.assertIn("x[0]", str(rejected.exception))

    def test_learn_then_fuse_predict(self) -> None:
        info = self.client.create_model(
            "py_fuse", shards=2,
            fuse={"pattern": "FUSE_PATTERN_META_LINEAR", "sau": {"d": D, "r": 16},
                  "lmu": {"delta_buckets": 256, "lambda_max": 1, "margin": 64,
                          "inline_rebuild": True}})
        self.assertEqual(info.spec.fuse.sau.d_v, 1)   # takes lmu.m
        samples = [(t, {t % 7: 1.0}, self.vec(D), [self.rng.gauss(0.0, 1.0)])
                   for t in range(1, 121)]
        results = []
        stats = self.client.learn("py_fuse", samples, routing_key="f", batch_size=40,
                                  on_ack=results.append)
        self.assertEqual((stats.applied, stats.rejected), (120, 0))
        self.assertEqual(sum(len(r.ack.predictions) for r in results), 120)
        answer = self.client.fuse_predict("py_fuse", {1: 1.0}, self.vec(D), routing_key="f")
        self.assertEqual(len(answer.y_hat), 1)
        self.assertEqual(answer.shard, self.client.shard_of("py_fuse", "f"))
        self.assertEqual(answer.ver_sau, 120)
        with self.assertRaises(errors.FailedPrecondition):   # a fused model has no SAU part
            self.client.query("py_fuse", self.vec(D), routing_key="f")
        with self.assertRaises(errors.InvalidArgument):
            self.client.fuse_predict("py_fuse", {1: 1.0}, self.vec(D + 2), routing_key="f")
        with self.assertRaises(errors.InvalidArgument):
            self.client.learn("py_fuse", [(500, {1: 1.0}, self.vec(D), [1.0, 2.0])],
                              routing_key="f")

    # --- audit and snapshots ----------------------------------------------------------------

    def test_audit_head_read_append_and_snapshot(self) -> None:
        self.client.create_model("py_audit", shards=2, sau={"d": D, "d_v": DV, "r": 16})
        self.client.ingest("py_audit", [(t, self.vec(D), self.vec(DV)) for t in range(1, 41)],
                           routing_key="a", batch_size=8)
        shard = self.client.shard_of("py_audit", "a")
        head = self.client.audit_head("py_audit", shard)
        self.assertEqual(head.shards, 2)
        self.assertTrue(head.durable)
        self.assertGreater(head.next_index, 5)
        reader = self.client.audit_read("py_audit", shard)
        records = list(reader)
        self.assertEqual([r.index for r in records], list(range(head.next_index)))
        self.assertEqual(reader.head_next_index, head.next_index)
        self.assertEqual(records[-1].envelope()["merkle_curr"], head.merkle_curr)
        genesis = records[0].envelope()["body"]
        self.assertEqual((genesis["kind"], genesis["model"], genesis["shard"]),
                         ("genesis", "py_audit", shard))
        some = list(self.client.audit_read("py_audit", shard, from_index=2, limit=3))
        self.assertEqual([r.index for r in some], [2, 3, 4])

        appended = self.client.audit_append("py_audit", shard, {"note": "from python"})
        self.assertEqual(appended.index, head.next_index)
        if appended.next_index == appended.index + 1:   # no checkpoint followed it
            self.assertEqual(self.client.audit_head("py_audit", shard).merkle_curr,
                             appended.merkle_curr)
        with self.assertRaises(errors.InvalidArgument):
            self.client.audit_append("py_audit", shard, '{"note": }')
        with self.assertRaises(errors.InvalidArgument):
            self.client.audit_append("py_audit", 9, {})
        after = self.client.audit_head("py_audit", shard)
        self.assertEqual(after.next_index, appended.next_index)   # refusals left no trace

        snap = self.client.snapshot("py_audit")
        self.assertEqual(sorted((s.shard, s.part) for s in snap.shards),
                         [(0, "sau"), (1, "sau")])
        self.assertTrue(any(s.taken for s in snap.shards))

    def test_tree_heads_and_proofs_check_out_in_python(self) -> None:
        # streamlearn.merkle is a second implementation of RFC 6962/9162 beside the server's:
        # the roots, paths and consistency proofs the server gives must check out here.
        from streamlearn import merkle
        self.client.create_model("py_tree", sau={"d": D, "d_v": DV, "r": 16})
        self.client.ingest("py_tree", [(t, self.vec(D), self.vec(DV)) for t in range(1, 30)],
                           batch_size=4)
        pem = self.client.audit_head("py_tree").public_key_pem
        old_note = self.client.audit_tree_head("py_tree").note
        old = merkle.open_tree_head(old_note, pem)
        self.assertEqual(old.origin, "streamlearn.audit/py_tree/0")
        lines = [r.line for r in self.client.audit_read("py_tree")]
        self.assertEqual(old.size, len(lines))
        self.assertEqual(merkle.root_of(lines), old.root)
        for index in range(old.size):
            self.assertEqual(self.client.audit_prove("py_tree", index, old_note, pem),
                             lines[index])
        self.client.ingest("py_tree", [(t, self.vec(D), self.vec(DV)) for t in range(30, 50)],
                           batch_size=7)
        new_note = self.client.audit_tree_head("py_tree").note
        new = merkle.open_tree_head(new_note, pem)
        self.assertGreater(new.size, old.size)
        self.client.audit_check_consistency("py_tree", old_note, new_note, pem)
        for first in range(1, new.size + 1):
            proof = self.client.audit_consistency_proof("py_tree", first, new.size)
            head = merkle.open_tree_head(
                self.client.audit_tree_head("py_tree", size=first).note, pem)
            merkle.verify_consistency(head, new, proof.hashes)

        # Altered: a proof hash, the line, the head's root (its signature then fails).
        proof = self.client.audit_inclusion_proof("py_tree", 3, new.size)
        bad = list(proof.hashes)
        bad[0] = ("0" if bad[0][0] != "0" else "1") + bad[0][1:]
        with self.assertRaises(merkle.ProofError):
            merkle.verify_inclusion(proof.line, 3, new, bad)
        with self.assertRaises(merkle.ProofError):
            merkle.verify_inclusion(proof.line + " ", 3, new, proof.hashes)
        with self.assertRaises(merkle.ProofError):
            merkle.verify_inclusion(proof.line, 4, new, proof.hashes)
        origin, size, root = new_note.split("\n")[:3]
        forged = new_note.replace(root, ("A" if root[0] != "A" else "B") + root[1:], 1)
        with self.assertRaises(merkle.ProofError):
            merkle.open_tree_head(forged, pem)
        with self.assertRaises(merkle.ProofError):   # another chain's head
            self.client.audit_prove("py_audit_other", 0, new_note, pem)
        c = self.client.audit_consistency_proof("py_tree", old.size, new.size)
        with self.assertRaises(merkle.ProofError):
            merkle.verify_consistency(old, new, list(c.hashes)[1:])
        with self.assertRaises(errors.OutOfRange):
            self.client.audit_inclusion_proof("py_tree", new.size + 100, new.size)
        with self.assertRaises(errors.InvalidArgument):
            self.client.audit_consistency_proof("py_tree", 0, new.size)

    # --- inputs and connections -------------------------------------------------------------

    def test_numpy_arrays_are_accepted_when_numpy_is_there(self) -> None:
        try:
            import numpy as np
        except ImportError:
            self.skipTest("numpy is not installed (optional)")
        self.client.create_model("py_numpy", sau={"d": D, "d_v": DV, "r": 16}, lmu={})
        k = np.ones((50, D)) * 0.1
        v = np.zeros((50, DV))
        stats = self.client.ingest("py_numpy", zip(np.arange(1, 51), k, v))
        self.assertEqual(stats.applied, 50)
        self.assertEqual(len(self.client.query("py_numpy", np.full(D, 0.2)).y_hat), DV)
        self.client.update("py_numpy", [(1, {np.uint64(5): np.float64(1.0)}, np.array([1.0]))])

    def test_bad_inputs_fail_before_sending(self) -> None:
        self.client.create_model("py_inputs", sau={"d": D, "d_v": DV, "r": 16})
        with self.assertRaises(TypeError):
            self.client.query("py_inputs", 1.0)
        with self.assertRaises(TypeError):
            self.client.ingest("py_inputs", [(1, [0.0] * D)])
        with self.assertRaises(TypeError):
            self.client.ingest("py_inputs", [{"t": 1, "k": [0.0] * D, "value": [0.0]}])
        with self.assertRaises(TypeError):
            self.client.query("py_inputs", [0.0] * D, routing_key=7)

    def test_health(self) -> None:
        self.assertTrue(self.client.healthy())
        self.assertTrue(self.client.healthy(address=self.address))
        with self.assertRaises(errors.NotFound):
            self.client.healthy("no.such.service")

    def test_an_unreachable_server_is_unavailable(self) -> None:
        port = harness.free_port()
        with self.assertRaises(errors.Unavailable) as e:
            streamlearn.Client(f"127.0.0.1:{port}", connect_timeout=0.5)
        self.assertIn(str(port), e.exception.message)
        # Lazy connection: the first call fails after retry_timeout, with UNAVAILABLE.
        with streamlearn.Client(f"127.0.0.1:{port}", connect_timeout=None,
                                retry_timeout=0.3) as lazy:
            with self.assertRaises(errors.Unavailable):
                lazy.list_models()
        # The live server among dead seeds is found.
        with streamlearn.Client([f"127.0.0.1:{port}", self.address]) as both:
            self.assertEqual(both.addresses[0], self.address)
            self.assertIsInstance(both.list_models(), list)


if __name__ == "__main__":
    args = harness.parse_args()
    unittest.main(argv=args.unittest_argv, verbosity=2)
