"""The installed streamlearn package, without a server: where it was installed from, the
stubs generated at build time (package-relative imports, every .proto), the routing function,
the typed errors and the conversion of Python values.

Run by ctest (python.Package) with the python of the venv python.Install made:
    VENV/bin/python tests/python/test_package.py [unittest args]
"""

import glob
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import unittest

import harness

import grpc
import streamlearn
from streamlearn import _convert, errors
from streamlearn.pb import admin_pb2, lmu_pb2, sau_pb2

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))


class FakeArray:
    """Quacks like a 1-D numpy array as far as the client cares (tolist, no numpy needed)."""

    def __init__(self, values):
        self._values = list(values)

    def tolist(self):
        return list(self._values)


class InstalledPackageTest(unittest.TestCase):
    def test_it_comes_from_the_venv_with_its_generated_stubs(self) -> None:
        package = os.path.dirname(streamlearn.__file__)
        self.assertTrue(package.startswith(sys.prefix), package)
        # Not the source tree's package (a build directory may sit inside the checkout).
        self.assertFalse(package.startswith(os.path.join(SOURCE, "client", "python")), package)
        generated = os.path.join(package, "_proto")
        for proto in glob.glob(os.path.join(SOURCE, "proto", "*.proto")):
            stem = os.path.splitext(os.path.basename(proto))[0]
            for module in (f"{stem}_pb2.py", f"{stem}_pb2_grpc.py"):
                path = os.path.join(generated, module)
                self.assertTrue(os.path.exists(path), path)
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                self.assertIsNone(re.search(r"^import \w+_pb2", text, re.MULTILINE), path)
        self.assertEqual(importlib.metadata.version("streamlearn"), streamlearn.__version__)
        requires = " ".join(importlib.metadata.requires("streamlearn") or [])
        self.assertIn("grpcio", requires)
        self.assertIn("protobuf", requires)

    def test_it_imports_anywhere_without_protoc(self) -> None:
        result = subprocess.run(
            [sys.executable, "-c", "import streamlearn.pb, streamlearn; "
             "print(streamlearn.pb.sau_pb2.Event(t=1).t)"],
            cwd="/", env={"PATH": ""}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertEqual(result.stdout.strip(), "1")

    def test_the_stub_generator_rewrites_imports_and_picks_its_tool(self) -> None:
        sys.path.insert(0, os.path.join(SOURCE, "client", "python"))
        try:
            import build_stubs
        finally:
            sys.path.pop(0)
        scratch = harness.temp_dir("streamlearn-py-stubs-")
        self.addCleanup(shutil.rmtree, scratch, True)
        path = os.path.join(scratch, "x_pb2.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write("import grpc\nimport common_pb2 as common__pb2\nimport sau_pb2\n")
        self.assertEqual(build_stubs.make_relative(path), 2)
        with open(path, encoding="utf-8") as f:
            self.assertEqual(f.read(), "import grpc\nfrom . import common_pb2 as common__pb2\n"
                                       "from . import sau_pb2\n")
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = ""
        try:
            try:
                import grpc_tools  # noqa: F401
                name, argv = build_stubs._generator_command("OUT", "PROTO")
                self.assertEqual(name, "grpc_tools")
                self.assertIn("--grpc_python_out=OUT", argv)
            except ImportError:
                with self.assertRaises(build_stubs.StubError):
                    build_stubs._generator_command("OUT", "PROTO")
        finally:
            os.environ["PATH"] = old_path
        with self.assertRaises(build_stubs.StubError):
            build_stubs.proto_files(os.path.dirname(path))


class RoutingTest(unittest.TestCase):
    def test_shard_is_be64_of_sha256_mod_shards(self) -> None:
        rng = harness.rng(1)
        for _ in range(500):
            key = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 40)))
            shards = rng.randrange(1, 1025)
            digest = hashlib.sha256(key).digest()
            expected = sum(b << (8 * (7 - i)) for i, b in enumerate(digest[:8])) % shards
            self.assertEqual(streamlearn.shard_for(key, shards), expected)
        self.assertEqual(streamlearn.shard_for("é", 97), streamlearn.shard_for(b"\xc3\xa9", 97))
        self.assertEqual(streamlearn.routing_hash(b""),
                         int.from_bytes(hashlib.sha256(b"").digest()[:8], "big"))
        with self.assertRaises(ValueError):
            streamlearn.shard_for("k", 0)
        with self.assertRaises(TypeError):
            streamlearn.shard_for(7, 3)


class ErrorsTest(unittest.TestCase):
    def test_one_class_per_code(self) -> None:
        for code, cls in [(grpc.StatusCode.NOT_FOUND, errors.NotFound),
                          (grpc.StatusCode.INVALID_ARGUMENT, errors.InvalidArgument),
                          (grpc.StatusCode.ALREADY_EXISTS, errors.AlreadyExists),
                          (grpc.StatusCode.FAILED_PRECONDITION, errors.FailedPrecondition),
                          (grpc.StatusCode.UNAVAILABLE, errors.Unavailable),
                          (grpc.StatusCode.RESOURCE_EXHAUSTED, errors.ResourceExhausted),
                          (grpc.StatusCode.PERMISSION_DENIED, errors.PermissionDenied),
                          (grpc.StatusCode.UNAUTHENTICATED, errors.Unauthenticated),
                          (grpc.StatusCode.DEADLINE_EXCEEDED, errors.DeadlineExceeded),
                          (grpc.StatusCode.ABORTED, errors.Aborted),
                          (grpc.StatusCode.INTERNAL, errors.Internal)]:
            e = errors.from_status(code, "m", {"method": "X"})
            self.assertIs(type(e), cls)
            self.assertIsInstance(e, errors.StreamlearnError)
            self.assertEqual((e.code, e.message, e.details), (code, "m", {"method": "X"}))
            self.assertEqual(str(e), f"{code.name}: m")

    def test_a_rejected_batch_is_also_its_code(self) -> None:
        e = errors.batch_rejected(9, "model 'x' has no sau part", {"batch_index": 4})
        self.assertIsInstance(e, errors.BatchRejected)
        self.assertIsInstance(e, errors.FailedPrecondition)
        self.assertEqual((e.batch_index, e.status), (4, (9, "model 'x' has no sau part")))
        self.assertEqual(errors.batch_rejected(99, "?").code, grpc.StatusCode.UNKNOWN)

    def test_an_rpc_error_converts(self) -> None:
        class FakeRpcError(grpc.RpcError):
            def code(self):
                return grpc.StatusCode.NOT_FOUND

            def details(self):
                return "model 'nope' not found"

            def trailing_metadata(self):
                return (("grpc-status-details-bin", b"\x08\x05"),)

        e = errors.from_rpc_error(FakeRpcError(), method="Admin.GetModel", address="h:1")
        self.assertIsInstance(e, errors.NotFound)
        self.assertEqual(e.details, {"method": "Admin.GetModel", "address": "h:1",
                                     "status_details": b"\x08\x05"})


class ConvertTest(unittest.TestCase):
    def test_vectors_and_sparse_x(self) -> None:
        self.assertEqual(_convert.vector(FakeArray([1, 2.5]), "q"), [1.0, 2.5])
        self.assertEqual(_convert.vector((1, 2), "q"), [1.0, 2.0])
        with self.assertRaises(TypeError):
            _convert.vector(FakeArray([[1.0, 2.0]]), "q")         # 2-D
        self.assertEqual(_convert.targets(0.5), [0.5])
        self.assertEqual(_convert.sparse({3: 1, 2**64 - 1: 0.5}), ([3, 2**64 - 1], [1.0, 0.5]))
        self.assertEqual(_convert.sparse([(3, 1.0), (3, 2.0)]), ([3, 3], [1.0, 2.0]))
        self.assertEqual(_convert.sparse(ids=FakeArray([1, 2]), vals=FakeArray([0.1, 0.2])),
                         ([1, 2], [0.1, 0.2]))
        for bad in ({2**64: 1.0}, {-1: 1.0}, {1.5: 1.0}):
            with self.assertRaises(ValueError):
                _convert.sparse(bad)
        with self.assertRaises(TypeError):
            _convert.sparse([1, 2])
        with self.assertRaises(TypeError):
            _convert.sparse({1: 1.0}, ids=[1], vals=[1.0])

    def test_events_and_samples(self) -> None:
        e = _convert.event({"t": 3, "k": [1, 2], "v": FakeArray([3]), "routing_key": "a"})
        self.assertEqual(e, sau_pb2.Event(t=3, k=[1.0, 2.0], v=[3.0]))
        self.assertEqual(_convert.event((3, [1, 2], [3])), e)
        s = _convert.sample((5, {7: 1.0}, 2.0, 0.1))
        self.assertEqual(s, lmu_pb2.Sample(t=5, ids=[7], vals=[1.0], y=[2.0], lr=0.1))
        self.assertFalse(s.HasField("l2"))
        self.assertEqual(_convert.sample({"t": 5, "ids": [7], "vals": [1.0], "y": [2.0],
                                          "lr": 0.1}), s)
        f = _convert.fuse_sample((1, {1: 1.0}, [0.1, 0.2], 0.5))
        self.assertEqual((list(f.q), list(f.y)), ([0.1, 0.2], [0.5]))
        with self.assertRaises(TypeError):
            _convert.event((1, [1.0]))
        with self.assertRaises(TypeError):
            _convert.event({"t": 1, "k": [1.0], "value": [1.0]})

    def test_model_specs(self) -> None:
        spec = _convert.model_spec("m", shards=2, sau={"d": 8, "d_v": 2, "r": 128}, lmu={})
        self.assertEqual((spec.name, spec.shards, spec.sau.d_v), ("m", 2, 2))
        self.assertTrue(spec.HasField("lmu"))
        self.assertFalse(spec.HasField("fuse"))
        self.assertEqual(_convert.model_spec({"name": "m", "shards": 2,
                                              "sau": {"d": 8, "dV": 2, "r": 128},
                                              "lmu": {}}), spec)
        self.assertEqual(_convert.model_spec(spec, name="n").name, "n")
        fused = _convert.model_spec(name="f", fuse={"pattern": "FUSE_PATTERN_LINEAR_AS_GATE"})
        self.assertEqual(fused.fuse.pattern, admin_pb2.FUSE_PATTERN_LINEAR_AS_GATE)
        with self.assertRaises(ValueError):
            _convert.model_spec("m", sau={"dd": 1})


if __name__ == "__main__":
    args = harness.parse_args()
    unittest.main(argv=args.unittest_argv, verbosity=2)
