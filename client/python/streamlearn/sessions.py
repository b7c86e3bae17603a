"""Batch sessions: SAU.Ingest, LMU.Update and Fuse.Learn over pipelined, routed bidi streams.

A session sends batches (one request each: a routing key and 1..batch_size items) to the
owner of each batch's shard, one bidi stream per owner address, with up to `window` batches
awaiting their ack. The server answers every batch with one ack in order; a batch it refuses
carries the status in its ack (nothing of it applied) and the stream goes on.

    with client.ingest_session("quotes", batch_size=256) as s:
        for t, k, v in events:
            s.send_event(t, k, v, routing_key="user-7")   # batched per shard
    print(s.stats.applied, s.stats.duplicates, s.stats.resends)

Failures (docs/CLUSTER.md, "Routing"): an ack with a retryable status (UNAVAILABLE, ABORTED),
a broken stream, or a stream whose oldest unacknowledged batch has waited longer than
`ack_timeout` (a paused server) makes the session cancel that stream, collect every batch sent
on it without a final ack (in the order they were sent), refresh the shard map, back off
(50 ms doubling to 1 s) and resend them to their (new) owners before any new batch. Resending
is safe: items whose `t` is not new for the shard come back as duplicates, never applied twice.
While a shard has batches awaiting an ack on a stream, its new batches go on that stream, so a
shard's batches are applied in the order they were sent. After `retry_timeout` without any
batch reaching its final ack the session gives up with the last error.

resend=False turns resending off, for callers that keep their own ledger of unacknowledged
batches: a retryable in-band status is then final (a BatchRejected), and a stream that breaks
or times out ends the session with its error.

A batch's final ack is OK, or a permanent refusal (any other code: INVALID_ARGUMENT,
NOT_FOUND, FAILED_PRECONDITION, ...), which is reported, not retried. Each batch's final ack is
reported once: to `on_ack` (called on the caller's thread, inside send/flush/close), in
`stats`, and a refusal as a BatchRejected raised by the next flush()/close() (with
raise_on_reject, the default) and kept in `rejected`.

Thread safety: a session is used by one thread at a time.
"""

import collections
import operator
import queue
import time
from dataclasses import dataclass, field
from typing import (Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple,
                    Union)

import grpc

from . import _convert, errors
from .pb import lmu_pb2
from ._streams import END, INGEST, LEARN, UPDATE, Batch, Kind, Stream
from .routing import Backoff, key_bytes, shard_for

__all__ = ["ShardTotals", "SessionStats", "BatchResult", "IngestSession", "UpdateSession",
           "LearnSession"]

_OK = 0
_RETRYABLE = (grpc.StatusCode.UNAVAILABLE.value[0], grpc.StatusCode.ABORTED.value[0])
# A stream that ends with one of these is not retried: the session fails with the error.
_PERMANENT_STREAM_ERRORS = (
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAUTHENTICATED)


@dataclass
class ShardTotals:
    """What the final acks of one shard's batches said."""
    batches: int = 0          # batches with a final ack
    items: int = 0            # items in those batches
    applied: int = 0
    duplicates: int = 0       # items whose t was not new (len of duplicate_t)
    rejected: int = 0         # batches refused
    last_ack: Any = None      # the last OK ack (its versions: ver_sau, ver_base, ...)


@dataclass
class SessionStats:
    """A session's counters (all batches with their final ack, unless said otherwise)."""
    batches_sent: int = 0     # batches handed to send (each counted once)
    items_sent: int = 0
    batches_acked: int = 0    # batches with a final ack (OK or refused)
    applied: int = 0
    duplicates: int = 0
    rejected: int = 0         # batches refused (BatchRejected)
    resends: int = 0          # batch sends beyond the first (after a failure)
    stream_failures: int = 0  # streams cancelled after a failure
    streams_opened: int = 0
    shards: Dict[int, ShardTotals] = field(default_factory=dict)

    @property
    def in_flight(self) -> int:
        """Batches sent and not finally acknowledged."""
        return self.batches_sent - self.batches_acked


@dataclass
class BatchResult:
    """One batch's final ack, as given to on_ack."""
    index: int                # 0, 1, ... in the order of sending
    routing_key: bytes
    shard: int
    size: int                 # items in the batch
    ack: Any                  # IngestAck / UpdateAck / LearnAck (the protobuf message)
    error: Optional[errors.BatchRejected]   # None when the batch was accepted
    attempts: int             # how often it was sent (1 + resends)

    @property
    def ok(self) -> bool:
        """True when the batch was accepted."""
        return self.error is None


class _BatchSession:
    """The engine shared by IngestSession, UpdateSession and LearnSession (see the module
    docstring). Opened by Client.ingest_session / update_session / learn_session."""

    def __init__(self, client: Any, kind: Kind, model: str, *, routing_key: Any = "default",
                 batch_size: int = 256, window: int = 64, ack_timeout: float = 20.0,
                 retry_timeout: Optional[float] = None,
                 on_ack: Optional[Callable[[BatchResult], None]] = None,
                 raise_on_reject: bool = True, resend: bool = True) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self._client = client
        self._router = client._router
        self._kind = kind
        self.model = model
        self._model = key_bytes(model)
        self._default_key = key_bytes(routing_key)
        self.batch_size = batch_size
        self.window = window
        self.ack_timeout = ack_timeout
        self.retry_timeout = client.retry_timeout if retry_timeout is None else retry_timeout
        self.on_ack = on_ack
        self.raise_on_reject = raise_on_reject
        self.resend = resend
        self.shards = client._shard_count(self._model)  # NotFound for an unknown model
        self.stats = SessionStats()
        self.rejected: List[errors.BatchRejected] = []
        self._unraised: List[errors.BatchRejected] = []
        self._events: "queue.Queue[Tuple[int, Any, Any]]" = queue.Queue()
        self._streams: Dict[str, Stream] = {}        # live streams by address
        self._by_sid: Dict[int, Stream] = {}
        self._shard_stream: Dict[int, Stream] = {}   # shard -> the stream its batches are on
        self._resend: List[Batch] = []               # in send order
        self._resend_at = 0.0
        self._backoff = Backoff()
        self._progress_at = time.monotonic()
        self._last_error: Optional[errors.StreamlearnError] = None
        self._failed: Optional[errors.StreamlearnError] = None
        self._in_flight = 0
        self._next_index = 0
        self._next_sid = 0
        self._buffers: Dict[int, Tuple[bytes, List[Any]]] = {}  # shard -> (key, items)
        self._done: Deque[BatchResult] = collections.deque()
        self._closed = False

    # --- public -----------------------------------------------------------------------------

    def shard_of(self, routing_key: Any) -> int:
        """The shard of `routing_key` in this session's model."""
        return shard_for(routing_key, self.shards)

    def send(self, items: Iterable[Any], routing_key: Any = None) -> List[int]:
        """Sends `items` (messages, dicts or tuples; see the session class) as batches of at
        most batch_size for `routing_key` (default: the session's), after any items buffered
        by the single-item method for the same shard. Blocks while `window` batches await
        their acks. Returns the indices of the batches sent."""
        key = self._default_key if routing_key is None else key_bytes(routing_key)
        shard = shard_for(key, self.shards)
        converted = [self._kind.convert(item, f"item {n}") for n, item in enumerate(items)]
        self._flush_buffer(shard)
        indices = []
        for start in range(0, len(converted), self.batch_size):
            indices.append(self._submit(key, shard, converted[start:start + self.batch_size]))
        return indices

    def _add(self, item: Any, routing_key: Any) -> None:
        """Buffers one converted item for its shard; a full buffer is sent as a batch. Items
        of one shard are sent in the order given: a new routing key for a shard first sends
        what is buffered for it."""
        if self._closed:
            raise errors.FailedPrecondition("the session is closed",
                                            grpc.StatusCode.FAILED_PRECONDITION)
        key = self._default_key if routing_key is None else key_bytes(routing_key)
        shard = shard_for(key, self.shards)
        buffered = self._buffers.get(shard)
        if buffered is not None and buffered[0] != key:
            self._flush_buffer(shard)
            buffered = None
        if buffered is None:
            buffered = (key, [])
            self._buffers[shard] = buffered
        buffered[1].append(item)
        if len(buffered[1]) >= self.batch_size:
            self._flush_buffer(shard)

    def flush(self) -> SessionStats:
        """Sends every buffered item and waits until every batch sent has its final ack.
        Raises the first BatchRejected not raised yet (raise_on_reject), or the error the
        session gave up with. Returns the stats."""
        for shard in list(self._buffers):
            self._flush_buffer(shard)
        while self._in_flight > 0:
            self._pump(0.25)
        self._deliver()
        self._raise_rejections()
        return self.stats

    def close(self) -> SessionStats:
        """flush(), then ends the streams. Idempotent."""
        if self._closed:
            return self.stats
        try:
            return self.flush()
        finally:
            self._shutdown(cancel=False)

    def abort(self) -> None:
        """Cancels every stream without waiting; unacknowledged batches are abandoned (a
        resend of them later is safe)."""
        self._shutdown(cancel=True)

    def __enter__(self) -> "_BatchSession":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # --- sending ----------------------------------------------------------------------------

    def _flush_buffer(self, shard: int) -> None:
        """Sends what is buffered for `shard` as one batch."""
        buffered = self._buffers.pop(shard, None)
        if buffered is not None and buffered[1]:
            self._submit(buffered[0], shard, buffered[1])

    def _submit(self, key: bytes, shard: int, items: List[Any]) -> int:
        """Sends a new batch (after any resends, within the window); its index."""
        return self._submit_request(key, shard, self._kind.make_request(self._model, key, items),
                                    len(items))

    def _submit_request(self, key: bytes, shard: int, request: Any, size: int) -> int:
        """Sends a new batch of `size` items, already a request; its index."""
        if self._closed:
            raise errors.FailedPrecondition("the session is closed",
                                            grpc.StatusCode.FAILED_PRECONDITION)
        # Resends go before any new batch; at most `window` batches await acks.
        while self._resend or self._in_flight >= self.window:
            self._pump(0.25)
        batch = Batch(self._next_index, key, shard, request, size)
        self._next_index += 1
        if self._in_flight == 0:
            self._progress_at = time.monotonic()
        self._in_flight += 1
        self.stats.batches_sent += 1
        self.stats.items_sent += batch.size
        self._dispatch(batch)
        self._deliver()
        return batch.index

    def _dispatch(self, batch: Batch) -> None:
        """Puts `batch` on the stream of its shard's in-flight batches, else on the stream to
        its shard's owner (opened if needed)."""
        stream = self._shard_stream.get(batch.shard)
        if stream is None or stream.dead:
            try:
                address = self._router.address_for(self._model, batch.shard)
            except errors.StreamlearnError:
                address = self._router.preferred()
            stream = self._streams.get(address)
            if stream is None:
                stream = self._open(address)
            self._shard_stream[batch.shard] = stream
        if batch.attempts > 0:
            self.stats.resends += 1
        stream.send(batch)

    def _open(self, address: str) -> Stream:
        """A new stream to `address`."""
        self._next_sid += 1
        kind = self._kind
        channel = self._router.channel(address)
        stream = Stream(self._next_sid, address, lambda reqs: kind.open(channel, reqs),
                         self._events)
        self._streams[address] = stream
        self._by_sid[stream.sid] = stream
        self.stats.streams_opened += 1
        return stream

    # --- receiving --------------------------------------------------------------------------

    def _pump(self, timeout: float) -> None:
        """Handles acks and stream ends (waiting up to `timeout` for one), ack timeouts, due
        resends and the give-up deadline; delivers final acks."""
        if self._failed is not None:
            raise self._failed
        now = time.monotonic()
        wait = timeout
        if self._resend:
            wait = min(wait, max(0.0, self._resend_at - now))
        try:
            event = self._events.get(timeout=wait)
        except queue.Empty:
            event = None
        while event is not None:
            self._handle(*event)
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                event = None
        now = time.monotonic()
        for stream in list(self._streams.values()):
            if stream.inflight and now - stream.inflight[0].sent_at > self.ack_timeout:
                first = stream.inflight[0]
                self._fail_stream(stream, errors.Unavailable(
                    f"no ack for batch {first.index} from {stream.address} within "
                    f"{self.ack_timeout:g} s", grpc.StatusCode.UNAVAILABLE,
                    {"method": self._kind.method, "address": stream.address}))
        if self._resend and time.monotonic() >= self._resend_at:
            self._do_resends()
        if self._in_flight > 0 and time.monotonic() - self._progress_at > self.retry_timeout:
            self._give_up()
        self._deliver()

    def _handle(self, sid: int, ack: Any, error: Any) -> None:
        """One event of a stream: an ack (matched to its oldest batch), or its end."""
        stream = self._by_sid.get(sid)
        if stream is None or stream.dead:
            return  # a cancelled stream's late news: its batches are resent already
        if ack is None:
            if not stream.inflight:
                self._forget(stream)
                if error is not END:
                    self._router.invalidate(self._model)
                return
            if error is END:
                err: errors.StreamlearnError = errors.Unavailable(
                    f"the stream to {stream.address} ended with "
                    f"{len(stream.inflight)} batches unacknowledged",
                    grpc.StatusCode.UNAVAILABLE)
            elif isinstance(error, grpc.RpcError):
                err = errors.from_rpc_error(error, method=self._kind.method,
                                            address=stream.address)
                if err.code in _PERMANENT_STREAM_ERRORS:
                    # e.g. RESOURCE_EXHAUSTED: a request above max_message_bytes ends the
                    # stream; sending it again cannot succeed.
                    self._fail_stream(stream, err)
                    self._failed = err
                    self._shutdown(cancel=True)
                    raise err
            else:
                err = errors.Unknown(f"reading acks from {stream.address}: {error!r}",
                                     grpc.StatusCode.UNKNOWN)
            self._fail_stream(stream, err)
            return
        if not stream.inflight:
            self._fail_stream(stream, errors.Internal(
                f"{stream.address} sent an ack for no batch", grpc.StatusCode.INTERNAL))
            return
        batch = stream.inflight.popleft()
        code = ack.status.code
        if code in _RETRYABLE and self.resend:
            stream.inflight.appendleft(batch)
            self._fail_stream(stream, errors.batch_rejected(code, ack.status.message,
                                                            self._context(batch, stream)))
            return
        rejection = None
        if code != _OK:
            rejection = errors.batch_rejected(code, ack.status.message,
                                              self._context(batch, stream))
        elif ack.shard != batch.shard:
            rejection = errors.batch_rejected(
                grpc.StatusCode.INTERNAL.value[0],
                f"routing mismatch: the ack is from shard {ack.shard}, the routing key's "
                f"shard is {batch.shard}", self._context(batch, stream))
        if not any(b.shard == batch.shard for b in stream.inflight):
            if self._shard_stream.get(batch.shard) is stream:
                del self._shard_stream[batch.shard]
        self._finish(batch, ack, rejection)

    def _context(self, batch: Batch, stream: Stream) -> Dict[str, Any]:
        """A rejection's details."""
        return {"method": self._kind.method, "address": stream.address,
                "batch_index": batch.index, "model": self.model,
                "routing_key": batch.key, "shard": batch.shard, "size": batch.size}

    def _finish(self, batch: Batch, ack: Any, rejection: Optional[errors.BatchRejected]
                ) -> None:
        """Records a batch's final ack (OK or refused) for stats, on_ack and raising."""
        self._in_flight -= 1
        self._progress_at = time.monotonic()
        self._backoff.reset()
        s = self.stats
        totals = s.shards.setdefault(batch.shard, ShardTotals())
        s.batches_acked += 1
        totals.batches += 1
        totals.items += batch.size
        if rejection is None:
            duplicates = len(getattr(ack, self._kind.duplicates))
            s.applied += ack.applied
            s.duplicates += duplicates
            totals.applied += ack.applied
            totals.duplicates += duplicates
            totals.last_ack = ack
        else:
            s.rejected += 1
            totals.rejected += 1
            self.rejected.append(rejection)
            self._unraised.append(rejection)
        self._done.append(BatchResult(batch.index, batch.key, batch.shard, batch.size, ack,
                                      rejection, batch.attempts))

    def _forget(self, stream: Stream) -> None:
        """Drops `stream` from the session's tables."""
        if self._streams.get(stream.address) is stream:
            del self._streams[stream.address]
        self._by_sid.pop(stream.sid, None)
        for shard in [s for s, st in self._shard_stream.items() if st is stream]:
            del self._shard_stream[shard]

    def _fail_stream(self, stream: Stream, error: errors.StreamlearnError) -> None:
        """Cancels `stream`; its unacknowledged batches are resent after a back-off."""
        stream.cancel()
        self._forget(stream)
        batches = list(stream.inflight)
        stream.inflight.clear()
        self.stats.stream_failures += 1
        self._last_error = error
        self._router.invalidate(self._model)
        self._router.demote(stream.address)
        if batches and not self.resend:
            error.details["unacknowledged_batches"] = self._in_flight
            self._failed = error
            self._shutdown(cancel=True)
            raise error
        if batches:
            self._resend = sorted(self._resend + batches, key=lambda b: b.index)
            self._resend_at = time.monotonic() + self._backoff.next()

    def _do_resends(self) -> None:
        """Sends the collected batches again, in order, to their owners now."""
        batches, self._resend = self._resend, []
        try:
            self._router.refresh(self._model)
        except errors.StreamlearnError:
            pass  # address_for falls back to a known server
        for batch in batches:
            self._dispatch(batch)

    def _give_up(self) -> None:
        """retry_timeout passed without progress: ends the session with the last error."""
        error = self._last_error or errors.DeadlineExceeded(
            "no batch was acknowledged", grpc.StatusCode.DEADLINE_EXCEEDED)
        error.details.setdefault("gave_up_after_seconds", self.retry_timeout)
        error.details["unacknowledged_batches"] = self._in_flight
        self._failed = error
        self._shutdown(cancel=True)
        raise error

    def _deliver(self) -> None:
        """Calls on_ack with each final ack not delivered yet, in order."""
        while self._done:
            result = self._done.popleft()
            if self.on_ack is not None:
                self.on_ack(result)

    def _raise_rejections(self) -> None:
        """Raises the first rejection not raised yet (raise_on_reject)."""
        if self._unraised and self.raise_on_reject:
            first = self._unraised[0]
            self._unraised.clear()
            raise first
        self._unraised.clear()

    def _shutdown(self, cancel: bool) -> None:
        """Ends every stream: half-closes them (cancel: cancels them) and waits for their
        readers."""
        if self._closed:
            return
        self._closed = True
        streams = list(self._by_sid.values())
        for stream in streams:
            if cancel:
                stream.cancel()
            else:
                stream.half_close()
        deadline = time.monotonic() + 5.0
        for stream in streams:
            stream.reader.join(max(0.0, deadline - time.monotonic()))
            if stream.reader.is_alive():
                stream.cancel()
        self._streams.clear()
        self._by_sid.clear()
        self._shard_stream.clear()


def _column(values: Any, kind: Callable[[Any], Any]) -> List[Any]:
    """A column as a flat list of Python numbers, from a list, a tuple or a numpy array (of
    any shape: an n x m array of targets is read row by row). An integer column takes
    integers only (operator.index: 1.5 or 2.0 is a TypeError, not truncated)."""
    if hasattr(values, "ravel"):
        values = values.ravel()
    if hasattr(values, "tolist"):
        values = values.tolist()
    if kind is int:
        return [operator.index(v) for v in values]
    return [kind(v) for v in values]


class IngestSession(_BatchSession):
    """SAU.Ingest batches of events. An event is a ``sau_pb2.Event``, a dict
    ``{"t": .., "k": [..], "v": [..]}`` or a tuple ``(t, k, v)``; k has length d, v d_v."""

    def __init__(self, client: Any, model: str, **options: Any) -> None:
        super().__init__(client, INGEST, model, **options)

    def send_event(self, t: int, k: Sequence[float], v: Sequence[float],
                   routing_key: Any = None) -> None:
        """Adds one event; it is sent in a batch of its shard when batch_size are buffered
        (or at flush())."""
        self._add(_convert.event((t, k, v)), routing_key)


class UpdateSession(_BatchSession):
    """LMU.Update batches of samples. A sample is an ``lmu_pb2.Sample``, a dict
    ``{"t", "x" (or "ids" and "vals"), "y", "lr", "l2"}`` or a tuple ``(t, x, y)``; x is a
    dict {id: value} or (id, value) pairs; y has m values (a number when m = 1)."""

    def __init__(self, client: Any, model: str, **options: Any) -> None:
        super().__init__(client, UPDATE, model, **options)

    def send_sample(self, t: int, x: Any, y: Union[float, Sequence[float]],
                    routing_key: Any = None, lr: Optional[float] = None,
                    l2: Optional[float] = None) -> None:
        """Adds one sample (lr / l2 override the model's for it); sent as send_event is."""
        self._add(_convert.sample({"t": t, "x": x, "y": y, "lr": lr, "l2": l2}), routing_key)

    def send_columns(self, t: Sequence[int], counts: Sequence[int], ids: Sequence[int],
                     y: Sequence[float], vals: Optional[Sequence[float]] = None,
                     lr: Optional[Sequence[float]] = None, l2: Optional[Sequence[float]] = None,
                     routing_key: Any = None) -> List[int]:
        """Sends samples given in columns (lmu.proto SampleColumns, docs/LMU_API.md
        "Columns"): sample i has t[i], the next counts[i] ids (and vals), and y[i*m:(i+1)*m].
        vals None: every value is 1.0 (none are sent). lr / l2: None, or one override per
        sample (NaN: the model's). Lists, tuples or numpy arrays. Cheaper than a message per
        sample for the client and the server; the samples go in batches of at most
        batch_size, in columns, after any samples buffered for the same shard. Returns the
        indices of the batches sent."""
        t, counts, ids = _column(t, int), _column(counts, int), _column(ids, int)
        y = _column(y, float)
        vals = None if vals is None else _column(vals, float)
        lr = None if lr is None else _column(lr, float)
        l2 = None if l2 is None else _column(l2, float)
        n = len(t)
        if n == 0 and not (counts or ids or y):
            return []
        if len(counts) != n:
            raise ValueError(f"counts has {len(counts)} values for {n} samples")
        if any(c < 0 for c in counts):
            raise ValueError("counts must be >= 0")
        if sum(counts) != len(ids):
            raise ValueError(f"the counts add up to {sum(counts)} features but ids has "
                             f"{len(ids)} values")
        if vals is not None and len(vals) != len(ids):
            raise ValueError(f"vals has {len(vals)} values but ids has {len(ids)}")
        if n == 0 or len(y) % n != 0:
            raise ValueError(f"y has {len(y)} values for {n} samples; give m per sample")
        m = len(y) // n
        for name, column in (("lr", lr), ("l2", l2)):
            if column is not None and len(column) != n:
                raise ValueError(f"{name} has {len(column)} values; give None or one per sample")
        key = self._default_key if routing_key is None else key_bytes(routing_key)
        shard = shard_for(key, self.shards)
        # Every batch is built before the first is sent: a value out of range (a negative id,
        # one of 2^64 or more) raises here, with nothing sent.
        batches = []
        at = 0  # the first id of the batch
        for start in range(0, n, self.batch_size):
            end = min(n, start + self.batch_size)
            features = sum(counts[start:end])
            columns = lmu_pb2.SampleColumns(t=t[start:end], counts=counts[start:end],
                                            ids=ids[at:at + features], y=y[start * m:end * m])
            if vals is not None:
                columns.vals.extend(vals[at:at + features])
            if lr is not None:
                columns.lr.extend(lr[start:end])
            if l2 is not None:
                columns.l2.extend(l2[start:end])
            at += features
            batches.append((lmu_pb2.UpdateRequest(model=self._model, routing_key=key,
                                                  columns=columns), end - start))
        self._flush_buffer(shard)
        return [self._submit_request(key, shard, request, size) for request, size in batches]


class LearnSession(_BatchSession):
    """Fuse.Learn batches of fused samples. A sample is a ``fuse_pb2.FuseSample``, a dict
    ``{"t", "x" (or "ids" and "vals"), "q", "y"}`` or a tuple ``(t, x, q, y)``."""

    def __init__(self, client: Any, model: str, **options: Any) -> None:
        super().__init__(client, LEARN, model, **options)

    def send_sample(self, t: int, x: Any, q: Sequence[float],
                    y: Union[float, Sequence[float]], routing_key: Any = None) -> None:
        """Adds one fused sample; sent as IngestSession.send_event is."""
        self._add(_convert.fuse_sample((t, x, q, y)), routing_key)
