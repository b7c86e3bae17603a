"""The streamlearn Python package's routing in a real small cluster (docs/CLUSTER.md): one
nats-server with JetStream and three streamlearn servers sharing their keys.

- Calls go to the shards' owners: while the shard map stays the same, no server forwards
  anything (their streamlearn_forwarded_total metric does not move), whereas a client with
  routing off makes its one server forward (the observable works).
- A session streams SAU batches through a kill -9 of a shard's owner: every batch ends
  acknowledged OK, for each shard the events applied plus the duplicates account for every
  event sent, and a final query per shard (read-your-writes) sees every event sent to it.

Run by ctest (python.Cluster) with the python of the venv python.Install made:
    VENV/bin/python tests/python/test_cluster.py --server_binary PATH --nats_server PATH
Every wait is for a condition with a generous deadline. STREAMLEARN_TEST_SEED sets the random
inputs' seed (printed).
"""

import os
import shutil
import subprocess
import sys
import unittest
from typing import Dict, List

import harness

import streamlearn
from streamlearn import errors

D, DV = 4, 2
SERVERS = ("s1", "s2", "s3")


class Node:
    def __init__(self, server_id: str, process: harness.ServerProcess, address: str,
                 metrics_port: int) -> None:
        self.id = server_id
        self.process = process
        self.address = address
        self.metrics_port = metrics_port

    def forwarded(self) -> float:
        """streamlearn_forwarded_total over every method but GetModel (describe asks the
        owners of the shards served elsewhere by design)."""
        text = harness.scrape(self.metrics_port)
        return sum(float(s["value"])
                   for s in harness.metric_samples(text, "streamlearn_forwarded_total")
                   if s.get("method") != "GetModel")


class ClusterRoutingTest(unittest.TestCase):
    nodes: List[Node]

    @classmethod
    def setUpClass(cls) -> None:
        args = harness.ARGS
        if not os.access(args.nats_server, os.X_OK):
            raise AssertionError(f"nats-server {args.nats_server!r} is missing: the cluster "
                                 "tests need Debian's nats-server (scripts/setup.sh)")
        cls.dir = harness.temp_dir("streamlearn-py-cluster-")
        print(f"[python cluster] logs in {cls.dir}", file=sys.stderr, flush=True)
        cls.nats = harness.NatsServer(args.nats_server, cls.dir)
        keys = os.path.join(cls.dir, "keys")
        subprocess.run([args.server_binary, "--init_keys", keys], check=True,
                       stdout=subprocess.DEVNULL)
        cls.nodes = []
        pending = {server_id: 0 for server_id in SERVERS}
        for attempt in range(5):  # a port taken between free_port() and the server's bind
            started = {}
            for server_id in [s for s, done in pending.items() if not done]:
                port, metrics = harness.free_port(), harness.free_port()
                flags = [f"--cluster={cls.nats.url}", "--cluster_replicas=1",
                         f"--server_id={server_id}", f"--listen=127.0.0.1:{port}",
                         f"--advertise=127.0.0.1:{port}", "--lease_ttl=2s", "--data_dir=",
                         f"--metrics=127.0.0.1:{metrics}",
                         f"--audit_key_file={keys}/audit.key",
                         f"--lmu_secret_file={keys}/lmu.secret"]
                log = os.path.join(cls.dir, f"{server_id}-{attempt}.log")
                started[server_id] = (harness.ServerProcess(args.server_binary, flags, log),
                                      port, metrics)
            for server_id, (process, port, metrics) in started.items():
                if process.wait_for_port() == port:
                    cls.nodes.append(Node(server_id, process, f"127.0.0.1:{port}", metrics))
                    pending[server_id] = 1
                else:
                    process.kill()
            if all(pending.values()):
                break
        else:
            cls.tearDownClass()
            raise AssertionError("the servers did not start; logs in " + cls.dir)
        cls.nodes.sort(key=lambda n: n.id)
        cls.rng = harness.rng()

    @classmethod
    def tearDownClass(cls) -> None:
        for node in cls.nodes:
            node.process.kill()
        cls.nats.kill()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def live(self) -> List[Node]:
        return [n for n in self.nodes if n.process.alive()]

    def logs(self) -> str:
        out = []
        for node in self.nodes:
            out.append(f"--- {node.id} ---\n{node.process.log()[-3000:]}")
        return "\n".join(out)

    def await_served(self, client: streamlearn.Client, model: str, shards: int,
                     min_owners: int) -> Dict[int, str]:
        """Waits until every shard of `model` has a live owner and at least min_owners
        servers own shards; returns shard -> owner address."""
        live = {n.address for n in self.live()}

        def served():
            try:
                response = client.shard_map(model)
            except errors.StreamlearnError:
                return None
            owners = {o.shard: o.address for o in response.shards if o.owner}
            if len(owners) == shards and set(owners.values()) <= live and \
                    len(set(owners.values())) >= min_owners:
                return owners
            return None

        try:
            return harness.wait_for(served, f"every shard of {model} served", 120.0, 0.1)
        except AssertionError:
            raise AssertionError(f"not every shard of {model} is served\n{self.logs()}")

    def keys_per_shard(self, client: streamlearn.Client, model: str, shards: int
                       ) -> Dict[int, str]:
        keys: Dict[int, str] = {}
        n = 0
        while len(keys) < shards:
            key = f"k{n}-{self.rng.getrandbits(32):x}"
            keys.setdefault(client.shard_of(model, key), key)
            n += 1
        return keys

    def vec(self, n: int) -> List[float]:
        return [self.rng.gauss(0.0, 1.0) for _ in range(n)]

    def test_a_calls_go_to_the_owners(self) -> None:
        model, shards = "py_routed", 6
        with streamlearn.Client(self.nodes[0].address) as client:
            client.create_model(model, shards=shards, sau={"d": D, "d_v": DV, "r": 16})
            self.await_served(client, model, shards, min_owners=len(SERVERS))
            keys = self.keys_per_shard(client, model, shards)
            t = 0
            for attempt in range(10):
                before_map = [(o.shard, o.owner, o.epoch)
                              for o in client.shard_map(model).shards]
                before = [n.forwarded() for n in self.nodes]
                with client.ingest_session(model, batch_size=4) as session:
                    for shard, key in keys.items():
                        for _ in range(3):
                            t += 1
                            session.send_event(t, self.vec(D), self.vec(DV), routing_key=key)
                            # t increases per shard too: every shard gets increasing t.
                for shard, key in keys.items():
                    answer = client.query(model, self.vec(D), routing_key=key)
                    self.assertEqual(answer.shard, shard)
                    self.assertEqual(client.audit_head(model, shard).shards, shards)
                self.assertEqual(session.stats.rejected, 0)
                after = [n.forwarded() for n in self.nodes]
                after_map = [(o.shard, o.owner, o.epoch)
                             for o in client.shard_map(model).shards]
                if before_map == after_map:
                    self.assertEqual(after, before, f"forwarded while the map was current:\n"
                                     f"{before_map}")
                    break
                print(f"the shard map changed during attempt {attempt}; again",
                      file=sys.stderr)
            else:
                self.fail("the shard map never stayed the same for one round of calls")

            # The observable works: through one server without routing, it forwards.
            owners = {o.shard: o.address for o in client.shard_map(model).shards}
            entry = self.nodes[0]
            foreign = [s for s, a in owners.items() if a != entry.address]
            self.assertTrue(foreign, owners)
            before = entry.forwarded()
            with streamlearn.Client(entry.address, routing=False) as plain:
                def forwarded() -> bool:
                    answer = plain.query(model, self.vec(D), routing_key=keys[foreign[0]])
                    self.assertEqual(answer.shard, foreign[0])
                    return entry.forwarded() > before
                harness.wait_for(forwarded, "the entry server to forward a query", 60.0, 0.2)

    def test_b_a_session_streams_through_a_kill_of_an_owner(self) -> None:
        model, shards, batch, rounds = "py_failover", 6, 5, 24
        with streamlearn.Client(self.nodes[0].address, retry_timeout=150.0) as client:
            client.create_model(model, shards=shards, sau={"d": D, "d_v": DV, "r": 16})
            self.await_served(client, model, shards, min_owners=len(SERVERS))
            keys = self.keys_per_shard(client, model, shards)
            victim = None
            sent = {shard: 0 for shard in keys}
            results: Dict[int, streamlearn.BatchResult] = {}
            duplicate_finals = []

            def on_ack(result: streamlearn.BatchResult) -> None:
                if result.index in results:
                    duplicate_finals.append(result.index)
                results[result.index] = result

            session = client.ingest_session(model, batch_size=batch, window=16,
                                            on_ack=on_ack, raise_on_reject=False)
            with session:
                for r in range(rounds):
                    if r == 6:
                        session.flush()            # some batches acknowledged before ...
                    if r == 8:
                        # ... and this round's to the owner of shard 0 wait unanswered ...
                        owners = {o.shard: o.address for o in client.shard_map(model).shards}
                        victim = next(n for n in self.nodes if n.address == owners[0])
                        victim.process.pause()
                    for shard, key in keys.items():
                        events = []
                        for _ in range(batch):
                            sent[shard] += 1
                            events.append((sent[shard], self.vec(D), self.vec(DV)))
                        session.send(events, routing_key=key)
                    if r == 8:
                        print(f"kill -9 {victim.id} (owner of shard 0, {owners})",
                              file=sys.stderr, flush=True)
                        victim.process.kill()      # ... unacknowledged when it dies
            stats = session.stats
            print(f"session: {stats.batches_sent} batches, {stats.applied} applied, "
                  f"{stats.duplicates} duplicates, {stats.resends} resends, "
                  f"{stats.stream_failures} stream failures", file=sys.stderr)
            self.assertEqual(duplicate_finals, [])
            self.assertEqual(sorted(results), list(range(rounds * shards)))
            bad = [(i, str(r.error)) for i, r in results.items() if not r.ok]
            self.assertEqual(bad, [])
            self.assertEqual(stats.rejected, 0)
            self.assertGreaterEqual(stats.resends, 1, "the batches to the killed owner")
            for shard, count in sent.items():
                totals = stats.shards[shard]
                self.assertEqual(totals.applied + totals.duplicates, count, f"shard {shard}")
                answer = client.query(model, self.vec(D), routing_key=keys[shard],
                                      min_version=totals.last_ack.ver_sau)
                self.assertEqual(answer.shard, shard)
                self.assertEqual(answer.events, count, f"shard {shard}: events lost")
            harness.wait_for(
                lambda: victim.address not in {o.address for o in client.shard_map(model).shards},
                "the map to name other owners for the killed server's shards", 60.0)


if __name__ == "__main__":
    args = harness.parse_args()
    unittest.main(argv=args.unittest_argv, verbosity=2)
