"""Routing: which shard a routing key belongs to, and which server owns that shard.

The shard of a key is the server's own function (core/common/routing.h):

    shard = BE64(SHA-256(routing_key)[0..8)) mod shards

``Router`` keeps what the client knows of the servers: one gRPC channel per address, the
seed addresses and every address learnt from a shard map, and per model the shard map
(``Admin.ShardMap``: each shard's owner, its address and lease epoch). A call for a shard goes
to its owner; a shard without an owner (a takeover under way), a map that cannot be read, or
a server in the embedded mode (``cluster`` false) send to the server that answered the map.
Every channel carries the client's credentials (_credentials.py: TLS, the token).

Thread safety: Router is thread-safe.
"""

import hashlib
import threading
import time
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Union

import grpc

from . import errors
from ._credentials import Credentials
from .pb import admin_pb2, admin_pb2_grpc

__all__ = ["routing_hash", "shard_for", "key_bytes", "ShardOwner", "ShardMap", "Router",
           "Backoff"]

Key = Union[str, bytes]


def key_bytes(key: Key) -> bytes:
    """A routing key or model name as bytes: a str is encoded as UTF-8."""
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode("utf-8")
    raise TypeError(f"a routing key must be str or bytes, got {type(key).__name__}")


def routing_hash(routing_key: Key) -> int:
    """BE64(SHA-256(routing_key)[0..8)): the first 8 bytes of the key's SHA-256, big-endian."""
    return int.from_bytes(hashlib.sha256(key_bytes(routing_key)).digest()[:8], "big")


def shard_for(routing_key: Key, shards: int) -> int:
    """The shard of `routing_key` in a model of `shards` shards, as the server computes it."""
    if shards <= 0:
        raise ValueError(f"shards must be positive, got {shards}")
    return routing_hash(routing_key) % shards


class ShardOwner(NamedTuple):
    """One shard's owner as a shard map names it; owner is "" during a takeover."""
    owner: str
    address: str
    epoch: int


class ShardMap(NamedTuple):
    """A model's shard map as one server saw it (Admin.ShardMap)."""
    cluster: bool           # False: the embedded mode, every shard is served by answered_by
    answered_by: str        # the address that answered
    owners: Dict[int, ShardOwner]


class Backoff:
    """Delays between retries: 50 ms, doubling up to 1 s; reset() after progress."""

    def __init__(self, initial: float = 0.05, maximum: float = 1.0) -> None:
        self._initial = initial
        self._maximum = maximum
        self._next = initial

    def next(self) -> float:
        """The delay before the next retry (and doubles the one after)."""
        delay = self._next
        self._next = min(self._next * 2.0, self._maximum)
        return delay

    def reset(self) -> None:
        """Back to the initial delay (after progress)."""
        self._next = self._initial

    def sleep(self, deadline: float) -> bool:
        """Sleeps the next delay; False (without sleeping) if that passes `deadline`
        (a time.monotonic() value)."""
        delay = self.next()
        if time.monotonic() + delay > deadline:
            return False
        time.sleep(delay)
        return True


# Channel options: reconnect quickly to a server that comes back; large answers (ListModels of
# many shards) fit.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


# What a ShardMap call answers that another server would answer alike: raised, not retried
# elsewhere (the servers of a cluster share the access policy).
_MAP_ERRORS_RAISED = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                      grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)


class Router:
    """Channels, known servers and shard maps of one Client.

    seeds: the addresses the client was given (host:port). routing: False sends everything
    to the preferred server (which forwards). map_timeout: deadline of one ShardMap call.
    credentials: of every channel (None: plaintext, no token). A token that would go in
    clear to a seed raises errors.TokenInClear here; to an address learnt later, when its
    channel is made.
    """

    def __init__(self, seeds: Sequence[str], *, routing: bool = True,
                 map_timeout: float = 5.0, credentials: Optional[Credentials] = None) -> None:
        if not seeds:
            raise ValueError("at least one server address is needed")
        self.credentials = credentials or Credentials()
        for address in seeds:
            self.credentials.check_transport(address)
        self.routing = routing
        self._map_timeout = map_timeout
        self._lock = threading.Lock()
        self._known: List[str] = []          # preferred first
        self._channels: Dict[str, grpc.Channel] = {}
        self._maps: Dict[bytes, ShardMap] = {}
        for address in seeds:
            self.learn(address)
        self._closed = False

    # --- servers and channels -------------------------------------------------------------

    def learn(self, address: str) -> None:
        """Adds `address` to the known servers (at the end)."""
        if not address:
            return
        with self._lock:
            if address not in self._known:
                self._known.append(address)

    def known(self) -> List[str]:
        """Every known server address, the preferred one first."""
        with self._lock:
            return list(self._known)

    def preferred(self) -> str:
        """The server to send to when no owner is known: the last that answered."""
        with self._lock:
            return self._known[0]

    def prefer(self, address: str) -> None:
        """Makes `address` (one that just answered) the preferred server."""
        with self._lock:
            if address in self._known:
                self._known.remove(address)
            self._known.insert(0, address)

    def demote(self, address: str) -> None:
        """Moves `address` (one that just failed) to the end of the known servers."""
        with self._lock:
            if address in self._known and len(self._known) > 1:
                self._known.remove(address)
                self._known.append(address)

    def channel(self, address: str) -> grpc.Channel:
        """The channel to `address` (one per address, kept until close())."""
        with self._lock:
            if self._closed:
                raise errors.Cancelled("the client is closed", grpc.StatusCode.CANCELLED)
            ch = self._channels.get(address)
            if ch is None:
                ch = self.credentials.channel(address, _CHANNEL_OPTIONS)
                self._channels[address] = ch
            return ch

    def connect(self, timeout: float) -> str:
        """Waits until one of the known servers accepts a connection (the first to do so
        becomes preferred); Unavailable naming every address if none does within timeout
        (with TLS, also when the handshake fails: a CA that did not sign the server's
        certificate, a host name it does not name)."""
        addresses = self.known()
        futures = [(a, grpc.channel_ready_future(self.channel(a))) for a in addresses]
        deadline = time.monotonic() + timeout
        try:
            while True:
                for address, future in futures:
                    if future.done() and not future.cancelled() and future.exception() is None:
                        self.prefer(address)
                        return address
                if time.monotonic() >= deadline:
                    hint = (" (TLS: is the server's certificate signed by the CA given, for "
                            "this host name?)" if self.credentials.tls else "")
                    raise errors.Unavailable(
                        f"cannot connect to {', '.join(addresses)} within {timeout:g} s{hint}",
                        grpc.StatusCode.UNAVAILABLE, {"addresses": addresses})
                time.sleep(0.01)
        finally:
            for _, future in futures:
                future.cancel()

    def close(self) -> None:
        """Closes every channel."""
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
        for ch in channels:
            ch.close()

    # --- shard maps -----------------------------------------------------------------------

    def invalidate(self, model: bytes) -> None:
        """Forgets model's shard map: the next address_for() reads it again."""
        with self._lock:
            self._maps.pop(model, None)

    def cached_map(self, model: bytes) -> Optional[ShardMap]:
        """model's cached shard map, or None."""
        with self._lock:
            return self._maps.get(model)

    def store_map(self, model: bytes, response: "admin_pb2.ShardMapResponse",
                  answered_by: str) -> ShardMap:
        """Caches a ShardMapResponse for `model` and learns its addresses."""
        owners = {}
        for row in response.shards:
            if key_bytes(row.model) == model:
                owners[row.shard] = ShardOwner(row.owner, row.address, row.epoch)
                self.learn(row.address)
        m = ShardMap(response.cluster, answered_by, owners)
        with self._lock:
            self._maps[model] = m
        return m

    def refresh(self, model: bytes) -> Optional[ShardMap]:
        """Reads model's shard map from the first known server that answers (the preferred
        one first). NotFound / InvalidArgument / PermissionDenied / Unauthenticated from a
        server are raised; None when no server answers."""
        for address in self.known():
            try:
                response = admin_pb2_grpc.AdminStub(self.channel(address)).ShardMap(
                    admin_pb2.ShardMapRequest(model=model), timeout=self._map_timeout)
            except grpc.RpcError as e:
                code = e.code()
                if code in _MAP_ERRORS_RAISED:
                    raise errors.from_rpc_error(e, method="Admin.ShardMap",
                                                address=address) from None
                self.demote(address)
                continue
            self.prefer(address)
            return self.store_map(model, response, address)
        return None

    def address_for(self, model: bytes, shard: int) -> str:
        """Where a call for `shard` of `model` goes: its owner's address when known."""
        if not self.routing:
            return self.preferred()
        m = self.cached_map(model)
        if m is None:
            m = self.refresh(model)
        if m is None:
            return self.preferred()
        if not m.cluster:
            return m.answered_by
        owner = m.owners.get(shard)
        if owner is not None and owner.owner and owner.address:
            return owner.address
        return self.preferred()  # a takeover under way: any server forwards or says NOT-OWNER


def addresses_of(address_or_addresses: Union[str, Iterable[str]]) -> List[str]:
    """A list of addresses from one "host:port", a comma-separated list, or an iterable."""
    if isinstance(address_or_addresses, str):
        items = address_or_addresses.split(",")
    else:
        items = list(address_or_addresses)
    result = [a.strip() for a in items if a and a.strip()]
    if not result:
        raise ValueError("at least one server address (host:port) is needed")
    return result
