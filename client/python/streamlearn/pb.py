"""The protobuf messages and gRPC stubs of proto/*.proto (package ``streamlearn.v1``).

They are generated when the package is built (setup.py), into ``streamlearn._proto``, and
re-exported here (all but two: ``journal`` is the servers' stored form, not the API, and
``health`` (grpc.health.v1) would clash in protobuf's descriptor pool with the modules of
grpcio-health-checking, which a program may import too):

    from streamlearn.pb import sau_pb2
    event = sau_pb2.Event(t=1, k=[0.1, 0.2], v=[1.0])
"""

try:
    from ._proto import (admin_pb2, admin_pb2_grpc, audit_pb2, audit_pb2_grpc, common_pb2,
                         fuse_pb2, fuse_pb2_grpc, lmu_pb2, lmu_pb2_grpc, sau_pb2,
                         sau_pb2_grpc)
except ImportError as e:  # pragma: no cover - a source checkout that was never built
    raise ImportError(
        "streamlearn's generated protobuf modules (streamlearn._proto) are missing: they are "
        "made when the package is built; install it with "
        "`pip install ./client/python` (Debian without PyPI: in a venv made with "
        "--system-site-packages, `pip install --no-build-isolation ./client/python`)") from e

__all__ = ["admin_pb2", "admin_pb2_grpc", "audit_pb2", "audit_pb2_grpc", "common_pb2",
           "fuse_pb2", "fuse_pb2_grpc", "lmu_pb2", "lmu_pb2_grpc", "sau_pb2", "sau_pb2_grpc"]
