"""streamlearn: the Python client of a streamlearn service (docs/CLIENT.md, "Python").

    import streamlearn

    with streamlearn.Client("localhost:50051") as client:
        client.create_model("quotes", sau={"d": 4, "d_v": 1, "r": 64})
        stats = client.ingest("quotes", [(t, [0.1 * t, 0.2, 0.3, 0.4], [1.0])
                                         for t in range(1, 101)])
        print(stats.applied, list(client.query("quotes", [0.1, 0.2, 0.3, 0.4]).y_hat))

- ``Client``: unary calls, sessions, audit; routes each call to its shard's owner; a bearer
  token, TLS and mTLS (``Client(address, token=..., tls_ca=..., tls_cert=..., tls_key=...)``).
- ``IngestSession``, ``UpdateSession``, ``LearnSession``: pipelined batch streams.
- ``errors``: ``StreamlearnError`` and one subclass per gRPC code; ``BatchRejected``.
- ``shard_for(routing_key, shards)``: the server's routing function.
- ``pb``: the generated protobuf messages (``streamlearn.pb.sau_pb2``, ...).
"""

from google.protobuf import json_format as _json_format

from . import errors, merkle, pb
from .client import AuditReader, AuditRecord, Client
from .errors import BatchRejected, StreamlearnError
from .routing import routing_hash, shard_for
from .sessions import (BatchResult, IngestSession, LearnSession, SessionStats, ShardTotals,
                       UpdateSession)

__version__ = "0.1.0"

__all__ = ["Client", "IngestSession", "UpdateSession", "LearnSession", "SessionStats",
           "ShardTotals", "BatchResult", "AuditRecord", "AuditReader", "StreamlearnError",
           "BatchRejected", "errors", "merkle", "pb", "shard_for", "routing_hash", "to_dict",
           "__version__"]


def to_dict(message) -> dict:
    """A protobuf message (ModelInfo, QueryResponse, an ack, ...) as a plain dict with the
    proto field names. Note that proto JSON writes 64-bit integers as strings."""
    return _json_format.MessageToDict(message, preserving_proto_field_name=True)
