"""The wire side of a batch session: one bidi stream to one address, its batches awaiting
acks in order, and what differs between SAU.Ingest, LMU.Update and Fuse.Learn.

Thread safety: a Stream is driven by its session's thread; its reader thread only posts
(stream id, ack, error) to the session's queue.
"""

import collections
import queue
import threading
import time
from typing import Any, Callable, Deque, List, Tuple

import grpc

from . import _convert
from .pb import fuse_pb2, fuse_pb2_grpc, lmu_pb2, lmu_pb2_grpc, sau_pb2, sau_pb2_grpc

END = object()  # ends a stream's request iterator; also posted when a stream ends cleanly


class Batch:
    """One batch of a session: its request, its routing key and shard, how often it was sent
    and when last."""

    __slots__ = ("index", "key", "shard", "request", "size", "attempts", "sent_at")

    def __init__(self, index: int, key: bytes, shard: int, request: Any, size: int) -> None:
        self.index = index
        self.key = key
        self.shard = shard
        self.request = request
        self.size = size
        self.attempts = 0
        self.sent_at = 0.0


class Stream:
    """One bidi stream to one address: its requests, its batches awaiting acks (in order)
    and a reader thread that posts (stream id, ack, error) to the session's queue."""

    def __init__(self, sid: int, address: str, open_call: Callable[[Any], Any],
                 events: "queue.Queue[Tuple[int, Any, Any]]") -> None:
        self.sid = sid
        self.address = address
        self.requests: "queue.Queue[Any]" = queue.Queue()
        self.inflight: Deque[Batch] = collections.deque()
        self.dead = False
        self.call = open_call(iter(self.requests.get, END))
        self._events = events
        self.reader = threading.Thread(target=self._read, name=f"streamlearn-acks-{sid}",
                                       daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """The reader thread: every ack, then the end (END) or the error."""
        try:
            for ack in self.call:
                self._events.put((self.sid, ack, None))
            self._events.put((self.sid, None, END))
        except grpc.RpcError as e:
            self._events.put((self.sid, None, e))
        except Exception as e:  # noqa: BLE001 - reported to the session, never lost
            self._events.put((self.sid, None, e))

    def send(self, batch: Batch) -> None:
        """Writes `batch` on the stream; it awaits its ack behind those sent before."""
        batch.attempts += 1
        batch.sent_at = time.monotonic()
        self.inflight.append(batch)
        self.requests.put(batch.request)

    def half_close(self) -> None:
        """No more requests; the server ends the stream after the last ack."""
        self.requests.put(END)

    def cancel(self) -> None:
        """Cancels the call at once; its late acks are ignored by the session."""
        self.dead = True
        self.call.cancel()
        self.requests.put(END)


class Kind:
    """What differs between the three stream RPCs."""

    def __init__(self, method: str, stub: Any, rpc: str, request: Any,
                 convert: Callable[[Any, str], Any], duplicates: str = "duplicate_t") -> None:
        self.method = method
        self.stub = stub
        self.rpc = rpc
        self.request = request
        self.convert = convert
        self.duplicates = duplicates

    def open(self, channel: grpc.Channel, requests: Any) -> Any:
        """Starts the RPC on `channel`, reading requests from the iterator `requests`."""
        return getattr(self.stub(channel), self.rpc)(requests)

    def make_request(self, model: bytes, key: bytes, items: List[Any]) -> Any:
        """The request of one batch."""
        field_name = "events" if self.request is sau_pb2.IngestRequest else "samples"
        return self.request(model=model, routing_key=key, **{field_name: items})


INGEST = Kind("SAU.Ingest", sau_pb2_grpc.SAUStub, "Ingest", sau_pb2.IngestRequest,
              _convert.event)
UPDATE = Kind("LMU.Update", lmu_pb2_grpc.LMUStub, "Update", lmu_pb2.UpdateRequest,
              _convert.sample)
LEARN = Kind("Fuse.Learn", fuse_pb2_grpc.FuseStub, "Learn", fuse_pb2.LearnRequest,
             _convert.fuse_sample)
