"""Typed errors of the streamlearn client.

Every error the server returns becomes a ``StreamlearnError`` subclass named after its gRPC
status code, carrying the code, the server's message and a dict of context:

    try:
        client.describe("nope")
    except streamlearn.errors.NotFound as e:
        print(e.code, e.message)        # StatusCode.NOT_FOUND model 'nope' not found

A batch of a stream that the server refuses in its ack (the stream goes on) is a
``BatchRejected`` that is also the subclass of its code, so ``except InvalidArgument`` catches
both a refused unary call and a refused batch:

    except streamlearn.errors.BatchRejected as e:
        print(e.batch_index, e.code, e.message)   # 3 StatusCode.INVALID_ARGUMENT event 0 ...

Errors the client detects in its arguments before anything is sent (a vector that is not
numbers, a negative feature id) are plain ``TypeError`` / ``ValueError``; a token the client
will not send in clear (no TLS, a host that is not loopback) is a ``TokenInClear``, both a
``ValueError`` and a ``FailedPrecondition`` (the C++ client's code for it).

The server's refusals of a caller (docs/SECURITY.md): ``Unauthenticated`` for a missing or
unknown token (or client certificate), ``PermissionDenied`` for a role that does not allow the
call or a model name outside the caller's tenant.
"""

from typing import Any, Dict, Mapping, Optional, Type

import grpc

__all__ = [
    "StreamlearnError", "BatchRejected", "Cancelled", "Unknown", "InvalidArgument",
    "DeadlineExceeded", "NotFound", "AlreadyExists", "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable",
    "DataLoss", "Unauthenticated", "TokenInClear", "from_rpc_error", "from_status",
    "batch_rejected", "is_retryable",
]

_CODE_BY_NUMBER: Dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


class StreamlearnError(Exception):
    """An error from a streamlearn server (or from reaching one).

    Attributes:
      code: the grpc.StatusCode.
      message: the server's message (what the CLI prints after ``error: CODE:``).
      details: context as a dict: ``method`` (e.g. "SAU.Query") and ``address`` (the server
        asked) when known; for a rejected batch ``batch_index``, ``model``, ``routing_key``,
        ``shard`` and ``size``; ``status_details`` (bytes of a google.rpc.Status) when the
        server attached rich details.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 details: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message
        self.details: Dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code.name})"


def _define(name: str, code: grpc.StatusCode, doc: str) -> Type[StreamlearnError]:
    """The StreamlearnError subclass of one code."""
    return type(name, (StreamlearnError,), {"code": code, "__doc__": doc,
                                            "__module__": __name__})


Cancelled = _define("Cancelled", grpc.StatusCode.CANCELLED, "The call was cancelled.")
Unknown = _define("Unknown", grpc.StatusCode.UNKNOWN, "An error of unknown kind.")
InvalidArgument = _define("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT,
                          "A bad argument: the message names the field, index and range.")
DeadlineExceeded = _define("DeadlineExceeded", grpc.StatusCode.DEADLINE_EXCEEDED,
                           "No answer within the call's timeout.")
NotFound = _define("NotFound", grpc.StatusCode.NOT_FOUND, "An unknown model.")
AlreadyExists = _define("AlreadyExists", grpc.StatusCode.ALREADY_EXISTS,
                        "A model of that name exists already.")
PermissionDenied = _define("PermissionDenied", grpc.StatusCode.PERMISSION_DENIED,
                           "The caller may not do this.")
ResourceExhausted = _define("ResourceExhausted", grpc.StatusCode.RESOURCE_EXHAUSTED,
                            "A limit was hit (e.g. a request larger than max_message_bytes).")
FailedPrecondition = _define("FailedPrecondition", grpc.StatusCode.FAILED_PRECONDITION,
                             "The model or shard is not in a state for this call (no such "
                             "part, older than min_version, ...).")
Aborted = _define("Aborted", grpc.StatusCode.ABORTED,
                  "The operation was aborted (e.g. a fenced write); retrying may succeed.")
OutOfRange = _define("OutOfRange", grpc.StatusCode.OUT_OF_RANGE, "A value out of range.")
Unimplemented = _define("Unimplemented", grpc.StatusCode.UNIMPLEMENTED,
                        "The server does not implement this call.")
Internal = _define("Internal", grpc.StatusCode.INTERNAL,
                   "An internal error (also: an ack from another shard than the key's).")
Unavailable = _define("Unavailable", grpc.StatusCode.UNAVAILABLE,
                      "No server could answer (down, shutting down, NOT-OWNER during a "
                      "takeover); the client retries these until retry_timeout.")
DataLoss = _define("DataLoss", grpc.StatusCode.DATA_LOSS, "Unrecoverable data loss.")
Unauthenticated = _define("Unauthenticated", grpc.StatusCode.UNAUTHENTICATED,
                          "The caller is not authenticated.")

_CLASS_BY_CODE: Dict[grpc.StatusCode, Type[StreamlearnError]] = {
    cls.code: cls for cls in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
                              AlreadyExists, PermissionDenied, ResourceExhausted,
                              FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
                              Unavailable, DataLoss, Unauthenticated)
}


class TokenInClear(FailedPrecondition, ValueError):  # type: ignore[misc, valid-type]
    """A token the client refuses to send: over plaintext to a host that is not loopback
    (anyone on the network could read it). Raised by Client() before anything is sent; use
    TLS (tls=True, tls_ca=...) or a loopback address. details["address"] names the host."""


class BatchRejected(StreamlearnError):
    """A batch of an Ingest, Update or Learn stream that the server refused in its ack
    (nothing of it was applied; the stream went on). The instance is also of the class of its
    code (``InvalidArgument``, ``NotFound``, ``FailedPrecondition``, ...).

    Attributes (besides those of StreamlearnError):
      batch_index: the batch's index in its session (0, 1, ... in the order of sending).
      status: the in-band status as the pair (code number, message).
    """

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 details: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message, code, details)
        self.batch_index: int = int(self.details.get("batch_index", -1))
        self.status = (self.code.value[0], message)

    def __str__(self) -> str:
        return f"rejected batch {self.batch_index}: {self.code.name}: {self.message}"


_BATCH_CLASS: Dict[grpc.StatusCode, Type[BatchRejected]] = {}


def _batch_class(code: grpc.StatusCode) -> Type[BatchRejected]:
    """The class of a batch refused with `code`: BatchRejected and the code's class (made once
    per code)."""
    cls = _BATCH_CLASS.get(code)
    if cls is None:
        base = _CLASS_BY_CODE.get(code, Unknown)
        cls = type(f"{base.__name__}BatchRejected", (BatchRejected, base),
                   {"code": code, "__module__": __name__,
                    "__doc__": f"A batch refused with {code.name}."})
        _BATCH_CLASS[code] = cls
    return cls


def code_of(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a status code number (an unknown number: UNKNOWN)."""
    return _CODE_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)


def from_status(code: grpc.StatusCode, message: str,
                details: Optional[Mapping[str, Any]] = None) -> StreamlearnError:
    """The typed error of a status. REQUIRES: code is not OK."""
    return _CLASS_BY_CODE.get(code, Unknown)(message, code, details)


def batch_rejected(number: int, message: str,
                   details: Optional[Mapping[str, Any]] = None) -> BatchRejected:
    """The error of a batch whose ack carries the in-band status (number, message)."""
    code = code_of(number)
    return _batch_class(code)(message, code, details)


def from_rpc_error(error: grpc.RpcError, **details: Any) -> StreamlearnError:
    """The typed error of a failed call; `details` adds context (method, address)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    trailing = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == "grpc-status-details-bin":
            details["status_details"] = value
    return from_status(code, message or "", details)


def is_retryable(error: StreamlearnError) -> bool:
    """True for an error a retry can cure: UNAVAILABLE (a server down or shutting down, a
    connection failure, NOT-OWNER during a takeover) and, for a batch, ABORTED (a fenced
    write)."""
    return error.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)
