"""A hand-written fake of a streamlearn cluster, in process, for the client's session tests:
Admin (GetModel, ShardMap) and SAU (Ingest, Query) on real gRPC servers over loopback, with
one shared state (per shard: the events applied, in order) as JetStream is for real servers.

Each fake server answers only for the shards the shared owner table gives it (others: in-band
UNAVAILABLE "NOT-OWNER: ..." for a batch, the status for a query; no forwarding), applies the
server's ordering rule (once a batch of shard X on a stream was answered UNAVAILABLE or
ABORTED, every later batch of X on that stream is answered UNAVAILABLE unapplied), and lets a
test inject faults per batch: answer a status instead, or hold the batch unanswered (a paused
server) until the stream is cancelled.

    cluster = FakeCluster(shards=4, servers=2)
    cluster.fault = lambda server, shard, events: ("status", 14, "boom") if ... else None
    client = streamlearn.Client(cluster.addresses[0])

Thread safety: FakeCluster is thread-safe (one lock).
"""

import threading
import time
from concurrent import futures
from typing import Callable, Dict, List, Optional, Tuple

import grpc

import streamlearn
from streamlearn.pb import admin_pb2, admin_pb2_grpc, sau_pb2, sau_pb2_grpc

UNAVAILABLE, ABORTED = 14, 10

# fault(server index, shard, events) -> None (go on), ("status", code, message) or ("hold",)
Fault = Callable[[int, int, List[sau_pb2.Event]], Optional[Tuple]]


class FakeCluster:
    """`servers` fake servers of one model `name` with `shards` shards."""

    def __init__(self, shards: int, servers: int, name: str = "fake") -> None:
        self.name = name
        self.shards = shards
        self.lock = threading.Lock()
        self.applied: Dict[int, List[int]] = {s: [] for s in range(shards)}  # t, in order
        self.received: List[Tuple[int, int, int]] = []  # (server, shard, first t) per batch
        self.fault: Optional[Fault] = None
        self._servers = []
        self.addresses: List[str] = []
        for i in range(servers):
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
            admin_pb2_grpc.add_AdminServicer_to_server(_Admin(self), server)
            sau_pb2_grpc.add_SAUServicer_to_server(_Sau(self, i), server)
            port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self._servers.append(server)
            self.addresses.append(f"127.0.0.1:{port}")
        self.owners: Dict[int, int] = {s: 0 for s in range(shards)}  # shard -> server index
        self.epochs: Dict[int, int] = {s: 1 for s in range(shards)}

    def move(self, shard: int, server: int) -> None:
        """Gives `shard` to `server` (a takeover: the epoch goes up)."""
        with self.lock:
            self.owners[shard] = server
            self.epochs[shard] += 1

    def stop(self) -> None:
        for server in self._servers:
            server.stop(grace=None)

    def apply(self, shard: int, events: List[sau_pb2.Event]) -> Tuple[int, List[int]]:
        """(applied, duplicate t) of a batch on the shared state. REQUIRES: lock held."""
        applied, duplicates = 0, []
        for e in events:
            last = self.applied[shard][-1] if self.applied[shard] else 0
            if e.t > last:
                self.applied[shard].append(e.t)
                applied += 1
            else:
                duplicates.append(e.t)
        return applied, duplicates


class _Admin(admin_pb2_grpc.AdminServicer):
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster

    def GetModel(self, request, context):
        if request.name.decode() != self.cluster.name:
            context.abort(grpc.StatusCode.NOT_FOUND, f"model {request.name!r} not found")
        return admin_pb2.ModelInfo(spec=admin_pb2.ModelSpec(name=self.cluster.name,
                                                            shards=self.cluster.shards))

    def ShardMap(self, request, context):
        c = self.cluster
        with c.lock:
            rows = [admin_pb2.ShardOwner(model=c.name, shard=s, owner=f"f{c.owners[s]}",
                                         address=c.addresses[c.owners[s]],
                                         epoch=c.epochs[s])
                    for s in range(c.shards)]
        return admin_pb2.ShardMapResponse(server_id="fake", cluster=True, shards=rows)


class _Sau(sau_pb2_grpc.SAUServicer):
    def __init__(self, cluster: FakeCluster, index: int) -> None:
        self.cluster = cluster
        self.index = index

    def _not_owner(self, shard: int) -> Optional[str]:
        owner = self.cluster.owners[shard]
        if owner == self.index:
            return None
        return f"NOT-OWNER: shard {shard} is served by f{owner} at {self.cluster.addresses[owner]}"

    def Ingest(self, request_iterator, context):
        c = self.cluster
        poisoned = set()  # shards answered UNAVAILABLE / ABORTED on this stream
        for request in request_iterator:
            shard = streamlearn.shard_for(request.routing_key, c.shards)
            events = list(request.events)
            fault = c.fault(self.index, shard, events) if c.fault else None
            with c.lock:
                c.received.append((self.index, shard, events[0].t))
            if fault is not None and fault[0] == "hold":
                while context.is_active():
                    time.sleep(0.01)
                return
            ack = sau_pb2.IngestAck(shard=shard)
            with c.lock:
                not_owner = self._not_owner(shard)
                if shard in poisoned:
                    ack.status.code, ack.status.message = UNAVAILABLE, "an earlier batch failed"
                elif not_owner is not None:
                    ack.status.code, ack.status.message = UNAVAILABLE, not_owner
                elif fault is not None:
                    ack.status.code, ack.status.message = fault[1], fault[2]
                else:
                    applied, duplicates = c.apply(shard, events)
                    ack.applied = applied
                    ack.duplicate_t.extend(duplicates)
                    ack.ver_sau = len(c.applied[shard])
            if ack.status.code in (UNAVAILABLE, ABORTED):
                poisoned.add(shard)
            yield ack

    def Query(self, request, context):
        c = self.cluster
        shard = streamlearn.shard_for(request.routing_key, c.shards)
        with c.lock:
            not_owner = self._not_owner(shard)
            events = len(c.applied[shard])
        if not_owner is not None:
            context.abort(grpc.StatusCode.UNAVAILABLE, not_owner)
        return sau_pb2.QueryResponse(shard=shard, events=events, ver_sau=events)
