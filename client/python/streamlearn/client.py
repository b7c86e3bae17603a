"""Client: the Python client of streamlearn servers (Admin, SAU, LMU, Fuse, Auditor).

    import streamlearn

    with streamlearn.Client("localhost:50051") as client:
        client.create_model("quotes", shards=2, sau={"d": 4, "d_v": 1, "r": 64})
        client.ingest("quotes", [(1, [0.1, 0.2, 0.3, 0.4], [1.0])], routing_key="user-7")
        answer = client.query("quotes", [0.1, 0.2, 0.3, 0.4], routing_key="user-7")
        print(list(answer.y_hat), answer.ver_sau)

What comes back: the protobuf message of the RPC where it has many fields (ModelInfo,
QueryResponse, PredictResponse, FusePredictResponse, ShardMapResponse, SnapshotResponse,
HeadResponse, AppendResponse; repeated fields behave as lists; ``streamlearn.to_dict(msg)``
makes plain dicts); plain Python values otherwise (list_models: a list of ModelInfo; shard_of:
an int; ingest/update/learn: SessionStats; audit_read: AuditRecord tuples). Errors are the
typed ``streamlearn.errors`` (NotFound, InvalidArgument, ...).

Routing (docs/CLUSTER.md, "Routing"): a call for a shard goes to the shard's owner as the
cached shard map names it (one channel per address). On UNAVAILABLE (a server down, NOT-OWNER
during a takeover) or DEADLINE_EXCEEDED (a paused server) the idempotent calls (describe,
list_models, shard_map, query, predict, fuse_predict, audit_head, audit_read, snapshot,
healthy) refresh the map from any reachable server (the seeds and every address learnt), back
off (50 ms doubling to 1 s) and retry until retry_timeout; create_model, backup and
audit_append are retried only when the request cannot have reached a server (no connection,
NOT-OWNER).

Credentials (docs/SECURITY.md): a bearer token goes on every call, unary and streaming, as
``authorization: Bearer <token>``; TLS checks the server's certificate (tls_ca), and a client
certificate (tls_cert, tls_key) is mTLS:

    client = streamlearn.Client("sl-0.example:50051", token=os.environ["TOKEN"],
                                tls_ca="ca.crt")

A tenant's principal names its models plainly ("quotes"); the server scopes them to its
tenant and answers with the plain names. Refusals are errors.Unauthenticated (no or an unknown
token) and errors.PermissionDenied (a role that does not allow the call).

Thread safety: a Client may be shared by threads; each session belongs to one thread.
"""

import json
import time
from typing import (Any, Callable, Iterable, Iterator, List, Mapping, NamedTuple, Optional,
                    Sequence, Union)

import grpc

from . import _convert, errors, merkle
from ._credentials import Credentials
from .pb import (admin_pb2, admin_pb2_grpc, audit_pb2, audit_pb2_grpc, fuse_pb2,
                 fuse_pb2_grpc, lmu_pb2, lmu_pb2_grpc, sau_pb2, sau_pb2_grpc)
from .routing import Backoff, Router, addresses_of, key_bytes, shard_for
from .sessions import IngestSession, LearnSession, SessionStats, UpdateSession, _BatchSession

__all__ = ["Client", "AuditRecord", "AuditReader"]

# The codes an idempotent call is retried on: a server down or not the owner (NOT-OWNER), and
# one that did not answer in time (a paused owner).
_RETRIED_READS = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)

_PATHS = {"stabilized": sau_pb2.READOUT_PATH_STABILIZED,
          "correctness": sau_pb2.READOUT_PATH_CORRECTNESS}


def _not_delivered(error: errors.StreamlearnError) -> bool:
    """True when an UNAVAILABLE call cannot have reached a server's handler: no connection,
    or NOT-OWNER (refused before anything was done)."""
    if error.code != grpc.StatusCode.UNAVAILABLE:
        return False
    m = error.message
    return (m.startswith("NOT-OWNER") or "failed to connect" in m.lower()
            or "connection refused" in m.lower())


class AuditRecord(NamedTuple):
    """One record of a shard's audit chain: its index and the canonical envelope line
    ``{"body":{...},"index":..,"merkle_curr":..,"merkle_prev":..}`` (docs/AUDIT.md)."""
    index: int
    line: str

    def envelope(self) -> Any:
        """The line parsed as JSON (a dict)."""
        return json.loads(self.line)


class Client:
    """A connection to one streamlearn server or a cluster of them.

    Args:
      address_or_addresses: "host:port", a comma-separated list of them, or a list: the
        seed servers. In a cluster any of them will do; the others are learnt from the
        shard maps.
      timeout: deadline in seconds of each unary call (one attempt).
      connect_timeout: the constructor waits this long for one seed to accept a connection
        (Unavailable naming the addresses otherwise); 0 or None: connect lazily.
      routing: send each call for a shard to its owner (Admin.ShardMap); False sends
        everything to one server, which forwards (one hop).
      retry_timeout: how long retryable failures (UNAVAILABLE) are retried: for a unary
        call from its start, for a session since the last batch acknowledged.
      token: a bearer token sent on every call; None (the default) takes $STREAMLEARN_TOKEN
        if set, "" sends none. A token is refused (errors.TokenInClear, a ValueError) over
        plaintext to a host that is not loopback.
      tls: connect with TLS (implied by any tls_* file), checking the server's certificate
        against tls_ca, a PEM file of CA certificates (None: the system's roots).
      tls_cert, tls_key: PEM files of a client certificate chain and its key (mTLS); both or
        neither.
      tls_server_name: the name checked in the server's certificate (None: the address's
        host), e.g. when connecting by an IP address the certificate does not name.

    Raises ValueError for credentials that do not go together, OSError naming a file that
    cannot be read, errors.Unavailable when no seed accepts a connection within
    connect_timeout (with TLS also a failed handshake: a wrong CA or server name).
    """

    def __init__(self, address_or_addresses: Union[str, Iterable[str]], *,
                 timeout: float = 30.0, connect_timeout: Optional[float] = 10.0,
                 routing: bool = True, retry_timeout: float = 60.0,
                 token: Optional[str] = None, tls: bool = False,
                 tls_ca: Optional[str] = None, tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None) -> None:
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry_timeout = retry_timeout
        credentials = Credentials.make(token=token, tls=tls, tls_ca=tls_ca, tls_cert=tls_cert,
                                       tls_key=tls_key, tls_server_name=tls_server_name)
        self._router = Router(addresses_of(address_or_addresses), routing=routing,
                              map_timeout=min(timeout, 5.0), credentials=credentials)
        self._shard_counts: dict = {}
        if connect_timeout:
            try:
                self._router.connect(connect_timeout)
            except BaseException:
                self._router.close()
                raise

    # --- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Closes every channel. Sessions opened from this client stop working."""
        self._router.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @property
    def tls(self) -> bool:
        """Whether the channels use TLS."""
        return self._router.credentials.tls

    @property
    def addresses(self) -> List[str]:
        """Every server address known: the seeds and those learnt from shard maps, the one
        currently preferred first."""
        return self._router.known()

    # --- the engine of unary calls ------------------------------------------------------------

    def _call(self, method: str, stub: Any, rpc: str, request: Any, *,
              model: Optional[bytes] = None, shard: Optional[int] = None,
              idempotent: bool = True, with_address: bool = False) -> Any:
        """One unary call, routed to the owner of (model, shard) when both are given, else
        to the preferred server; retried as the class docstring says. Returns the response
        (with_address: the pair (response, the address that answered))."""
        deadline = time.monotonic() + self.retry_timeout
        backoff = Backoff()
        while True:
            if model is not None and shard is not None:
                address = self._router.address_for(model, shard)
            else:
                address = self._router.preferred()
            try:
                response = getattr(stub(self._router.channel(address)), rpc)(
                    request, timeout=self.timeout)
                return (response, address) if with_address else response
            except grpc.RpcError as e:
                error = errors.from_rpc_error(e, method=method, address=address)
            if idempotent:
                retry = error.code in _RETRIED_READS
            else:
                retry = _not_delivered(error)
            if not retry or not backoff.sleep(deadline):
                raise error
            if not error.message.startswith("NOT-OWNER"):
                self._router.demote(address)
            if model is not None:
                self._router.invalidate(model)

    def _shard_count(self, model: bytes) -> int:
        """The model's shard count (read once with GetModel, then cached: it never changes).
        NotFound for an unknown model."""
        count = self._shard_counts.get(model)
        if count is None:
            count = self.describe(model).spec.shards or 1
            self._shard_counts[model] = count
        return count

    # --- models -------------------------------------------------------------------------------

    def create_model(self, spec: Any = None, /, **fields: Any) -> "admin_pb2.ModelInfo":
        """Creates a model; returns its ModelInfo (the effective spec, defaults filled in).

        `spec` is a ModelSpec, a dict in ModelSpec's JSON form (proto field names such as
        "d_v" or lowerCamelCase; enums by name), or the model's name; keyword arguments set
        (override) top-level fields:

            client.create_model("quotes", shards=4, sau={"d": 16, "d_v": 4, "r": 256})
            client.create_model({"name": "clicks", "lmu": {"lr": 0.05}})
            client.create_model(name="f", fuse={"sau": {"d": 8, "r": 64}, "lmu": {}})
            client.create_model("facts", sau={"d": 64, "d_v": 8, "engine": "ridge"})

        An SAU part's "engine" is "prf" (the default), "ridge" or "vla" (docs/ENGINES.md);
        the ridge and vla engines read d, d_v and their own "ridge" / "vla" dict only.

        A part is present when its dict is, even empty. Raises InvalidArgument naming the
        field and its range, AlreadyExists.
        """
        request = admin_pb2.CreateModelRequest(spec=_convert.model_spec(spec, **fields))
        return self._call("Admin.CreateModel", admin_pb2_grpc.AdminStub, "CreateModel",
                          request, idempotent=False)

    def describe(self, model: Union[str, bytes]) -> "admin_pb2.ModelInfo":
        """The model's ModelInfo: effective spec, W digest, per shard versions, counts and
        digests (SAU, LMU and Fuse parts). NotFound for an unknown model."""
        return self._call("Admin.GetModel", admin_pb2_grpc.AdminStub, "GetModel",
                          admin_pb2.GetModelRequest(name=key_bytes(model)))

    get_model = describe

    def list_models(self) -> List["admin_pb2.ModelInfo"]:
        """Every model's ModelInfo (as the answering server knows them)."""
        response = self._call("Admin.ListModels", admin_pb2_grpc.AdminStub, "ListModels",
                              admin_pb2.ListModelsRequest())
        return list(response.models)

    def shard_map(self, model: Union[str, bytes, None] = None
                  ) -> "admin_pb2.ShardMapResponse":
        """Who serves each shard (owner id, address, lease epoch; ``cluster`` false in the
        embedded mode) of `model`, or of every model, as the answering server saw it at its
        last lease round. With a model, the client's routing uses this answer from now on.
        NotFound for an unknown model."""
        name = key_bytes(model) if model is not None else b""
        response, address = self._call("Admin.ShardMap", admin_pb2_grpc.AdminStub,
                                       "ShardMap", admin_pb2.ShardMapRequest(model=name),
                                       with_address=True)
        if name:
            self._router.store_map(name, response, address)
        return response

    def shard_of(self, model: Union[str, bytes], routing_key: Union[str, bytes]) -> int:
        """The shard of `routing_key` in `model` (its shard count is read once)."""
        return shard_for(routing_key, self._shard_count(key_bytes(model)))

    def snapshot(self, model: Union[str, bytes]) -> "admin_pb2.SnapshotResponse":
        """Snapshots every part of every shard of the model now (needs a data directory).
        One ShardSnapshot per shard part: taken, its sequence number, log_seq, size, ..."""
        return self._call("Admin.Snapshot", admin_pb2_grpc.AdminStub, "Snapshot",
                          admin_pb2.SnapshotRequest(name=key_bytes(model)))

    def backup(self, name: str) -> str:
        """Writes a consistent backup on the server's machine; returns its directory
        (FailedPrecondition in the cluster mode: back up NATS instead)."""
        response = self._call("Admin.Backup", admin_pb2_grpc.AdminStub, "Backup",
                              admin_pb2.BackupRequest(name=key_bytes(name)), idempotent=False)
        return response.dir

    def healthy(self, service: str = "", address: Optional[str] = None) -> bool:
        """grpc.health.v1 Check: True when `service` is SERVING at `address` (default: the
        preferred server). "" is the process (SERVING until it drains), "streamlearn.ready"
        its readiness (the cluster mode: it holds and serves its share of the shards).
        NotFound for a service the server does not know.

        (The messages are encoded here, not imported: the generated grpc.health.v1 modules
        would clash with grpcio-health-checking's in protobuf's descriptor pool.)
        """
        name = service.encode("utf-8")
        request = (b"\x0a" + _varint(len(name)) + name) if name else b""
        if address is None:
            response = self._call("Health.Check", _HealthStub, "Check", request)
        else:  # that server about itself: not retried elsewhere
            try:
                response = _HealthStub(self._router.channel(address)).Check(
                    request, timeout=self.timeout)
            except grpc.RpcError as e:
                raise errors.from_rpc_error(e, method="Health.Check", address=address) from None
        return _health_status(response) == 1  # SERVING

    # --- reads ----------------------------------------------------------------------------

    def query(self, model: Union[str, bytes], q: Any, *,
              routing_key: Union[str, bytes] = "default", path: Union[str, int] = "stabilized",
              low_rank: bool = False, min_version: int = 0) -> "sau_pb2.QueryResponse":
        """Attention at q (length d) from the shard of `routing_key`; read-only.

        path: "stabilized" (whitened, ridge) or "correctness" (docs/SAU.md (19)), or the
        ReadoutPath number. min_version > 0: FailedPrecondition unless the shard has reached
        that version (pass an ack's ver_sau to read your own writes). Returns the
        QueryResponse (y_hat, den, rj_gap, margin, shr, ver_sau, shard, events; exact_window
        when a model keeping one answered a thin denominator from its last events; with the
        ridge engine lambda_min, lambda_max, condition, residual, jitter; with vla s_norm;
        engine names which).
        """
        if isinstance(path, str):
            if path not in _PATHS:
                raise ValueError(f"path must be one of {sorted(_PATHS)}, got {path!r}")
            path = _PATHS[path]
        name, key = key_bytes(model), key_bytes(routing_key)
        request = sau_pb2.QueryRequest(model=name, routing_key=key, q=_convert.vector(q, "q"),
                                       path=path, low_rank=low_rank, min_version=min_version)
        return self._call("SAU.Query", sau_pb2_grpc.SAUStub, "Query", request, model=name,
                          shard=self._routed_shard(name, key))

    def predict(self, model: Union[str, bytes], x: Any = None, *, ids: Any = None,
                vals: Any = None, routing_key: Union[str, bytes] = "default"
                ) -> "lmu_pb2.PredictResponse":
        """The LMU's prediction at a sparse x (a dict {id: value}, (id, value) pairs, or ids=
        and vals=) from the shard of `routing_key`; read-only. Returns the PredictResponse
        (y_hat, ver_base, ver_delta, shard, probes_p100)."""
        name, key = key_bytes(model), key_bytes(routing_key)
        ids, vals = _convert.sparse(x, ids, vals)
        request = lmu_pb2.PredictRequest(model=name, routing_key=key, ids=ids, vals=vals)
        return self._call("LMU.Predict", lmu_pb2_grpc.LMUStub, "Predict", request, model=name,
                          shard=self._routed_shard(name, key))

    def predict_many(self, model: Union[str, bytes], xs: Iterable[Any], *,
                     routing_key: Union[str, bytes] = "default") -> List[List[float]]:
        """The LMU's predictions of several samples in one call, read together from the
        shard of `routing_key` (each x as predict takes it: a dict {id: value} or (id,
        value) pairs); read-only. At most the server's max_batch samples (4096 by default).
        Returns one list of m predictions per sample, in order: each what predict(x) gives.
        """
        name, key = key_bytes(model), key_bytes(routing_key)
        ids: List[int] = []
        vals: List[float] = []
        counts: List[int] = []
        for x in xs:
            x_ids, x_vals = _convert.sparse(x, None, None)
            ids.extend(x_ids)
            vals.extend(x_vals)
            counts.append(len(x_ids))
        if not counts:
            return []
        request = lmu_pb2.PredictRequest(model=name, routing_key=key, ids=ids, vals=vals,
                                         counts=counts)
        response = self._call("LMU.Predict", lmu_pb2_grpc.LMUStub, "Predict", request,
                              model=name, shard=self._routed_shard(name, key))
        y = list(response.y_hat)
        m = len(y) // len(counts)
        return [y[i * m:(i + 1) * m] for i in range(len(counts))]

    def fuse_predict(self, model: Union[str, bytes], x: Any = None, q: Any = None, *,
                     ids: Any = None, vals: Any = None,
                     routing_key: Union[str, bytes] = "default"
                     ) -> "fuse_pb2.FusePredictResponse":
        """A fused model's prediction at (x, q) from the shard of `routing_key`; read-only:
        what the next learned sample with this (x, q) would be predicted. Returns the
        FusePredictResponse (y_hat, y_hat_sau, y_hat_lmu, gate, rj_gap, margin, den,
        versions, shard)."""
        if q is None:
            raise TypeError("fuse_predict: q is required")
        name, key = key_bytes(model), key_bytes(routing_key)
        ids, vals = _convert.sparse(x, ids, vals)
        request = fuse_pb2.FusePredictRequest(model=name, routing_key=key, ids=ids, vals=vals,
                                              q=_convert.vector(q, "q"))
        return self._call("Fuse.Predict", fuse_pb2_grpc.FuseStub, "Predict", request,
                          model=name, shard=self._routed_shard(name, key))

    def _routed_shard(self, model: bytes, key: bytes) -> Optional[int]:
        """The shard to route by; None (send to the preferred server, which answers
        NOT_FOUND itself) when the model cannot be described, or routing is off."""
        if not self._router.routing:
            return None
        try:
            return shard_for(key, self._shard_count(model))
        except errors.NotFound:
            return None

    # --- streams ----------------------------------------------------------------------------

    def ingest_session(self, model: Union[str, bytes], **options: Any) -> IngestSession:
        """A session of SAU.Ingest batches (sessions.py). Options: routing_key ("default"),
        batch_size (256), window (64 batches awaiting acks), ack_timeout (20 s),
        retry_timeout (the client's), on_ack (called with each BatchResult once),
        raise_on_reject (True), resend (True; False: a retryable status is final and a broken
        stream ends the session). NotFound for an unknown model."""
        return IngestSession(self, model, **options)

    def update_session(self, model: Union[str, bytes], **options: Any) -> UpdateSession:
        """A session of LMU.Update batches; options as ingest_session."""
        return UpdateSession(self, model, **options)

    def learn_session(self, model: Union[str, bytes], **options: Any) -> LearnSession:
        """A session of Fuse.Learn batches; options as ingest_session."""
        return LearnSession(self, model, **options)

    def ingest(self, model: Union[str, bytes], events: Iterable[Any], **options: Any
               ) -> SessionStats:
        """Streams `events` (Event messages, dicts {t, k, v[, routing_key]} or tuples
        (t, k, v)) into the model's SAU through one session and returns its totals. Events
        are batched per shard in the order given. Raises the first BatchRejected after every
        event was sent (its details["stats"] holds the totals)."""
        return self._stream(self.ingest_session(model, **options), events, _convert.event)

    def update(self, model: Union[str, bytes], samples: Iterable[Any], **options: Any
               ) -> SessionStats:
        """Streams LMU samples (Sample messages, dicts {t, x or ids/vals, y, lr, l2
        [, routing_key]} or tuples (t, x, y)); as ingest."""
        return self._stream(self.update_session(model, **options), samples, _convert.sample)

    def learn(self, model: Union[str, bytes], samples: Iterable[Any], **options: Any
              ) -> SessionStats:
        """Streams fused samples (FuseSample messages, dicts {t, x or ids/vals, q, y
        [, routing_key]} or tuples (t, x, q, y)); as ingest."""
        return self._stream(self.learn_session(model, **options), samples,
                            _convert.fuse_sample)

    @staticmethod
    def _stream(session: _BatchSession, items: Iterable[Any],
                convert: Callable[[Any, str], Any]) -> SessionStats:
        """ingest/update/learn: every item through `session`, which is closed; its stats."""
        with session:
            try:
                for n, item in enumerate(items):
                    session._add(convert(item, f"item {n}"), _convert.item_routing_key(item))
                session.close()
            except errors.BatchRejected as e:
                e.details["stats"] = session.stats
                raise
        return session.stats

    # --- audit ------------------------------------------------------------------------------

    def audit_head(self, model: Union[str, bytes], shard: int = 0) -> "audit_pb2.HeadResponse":
        """The audit chain head of one shard: next_index, merkle_curr, the checkpoint public
        key (PEM) and its fingerprint, checkpoint_every, durable, shards."""
        name = key_bytes(model)
        return self._call("Auditor.Head", audit_pb2_grpc.AuditorStub, "Head",
                          audit_pb2.HeadRequest(model=name, shard=shard), model=name,
                          shard=shard)

    def audit_read(self, model: Union[str, bytes], shard: int = 0, *, from_index: int = 0,
                   limit: int = 0) -> "AuditReader":
        """The records of one shard's chain from `from_index` (at most `limit`; 0: up to the
        head as of the call), as an iterable of AuditRecord. Verifying a chain is the C++
        CLI's job (`streamlearn audit verify`), not this client's."""
        return AuditReader(self, key_bytes(model), shard, from_index, limit)

    def audit_append(self, model: Union[str, bytes], shard: int,
                     record: Union[Mapping[str, Any], str, bytes]
                     ) -> "audit_pb2.AppendResponse":
        """Appends a client record (a dict, or JSON text of an object; at most 64 KiB and 16
        levels) to one shard's chain. A "certificate" member is checked as a Farkas
        certificate (docs/AUDIT.md); InvalidArgument if it fails. Returns index, merkle_curr
        and next_index. Not retried once it may have reached a server (a record could be
        appended twice)."""
        if isinstance(record, Mapping):
            data = json.dumps(record, separators=(",", ":"), allow_nan=False,
                              ensure_ascii=False).encode("utf-8")
        else:
            data = key_bytes(record)
        name = key_bytes(model)
        return self._call("Auditor.Append", audit_pb2_grpc.AuditorStub, "Append",
                          audit_pb2.AppendRequest(model=name, shard=shard, json=data),
                          model=name, shard=shard, idempotent=False)

    def audit_tree_head(self, model: Union[str, bytes], shard: int = 0, *, size: int = 0
                        ) -> "audit_pb2.TreeHeadResponse":
        """A signed tree head of one shard's chain: the RFC 6962 Merkle root of its first
        `size` records (0: every committed one), signed by the audit key. ``.note`` is the
        signed note to keep; streamlearn.merkle.open_tree_head checks it. Needs a server with
        a data directory (FailedPrecondition otherwise)."""
        name = key_bytes(model)
        return self._call("Auditor.TreeHead", audit_pb2_grpc.AuditorStub, "TreeHead",
                          audit_pb2.TreeHeadRequest(model=name, shard=shard, size=size),
                          model=name, shard=shard)

    def audit_inclusion_proof(self, model: Union[str, bytes], index: int, tree_size: int = 0,
                              shard: int = 0) -> "audit_pb2.InclusionProofResponse":
        """The record `index` (``.line``) and the RFC 6962 path (``.hashes``, hex) proving it
        is in the tree of `tree_size` records (0: the committed size now). The server's word
        only: check it with streamlearn.merkle.verify_inclusion, or use audit_prove."""
        name = key_bytes(model)
        return self._call("Auditor.InclusionProof", audit_pb2_grpc.AuditorStub,
                          "InclusionProof",
                          audit_pb2.InclusionProofRequest(model=name, shard=shard, index=index,
                                                          tree_size=tree_size),
                          model=name, shard=shard)

    def audit_consistency_proof(self, model: Union[str, bytes], first_size: int,
                                second_size: int = 0, shard: int = 0
                                ) -> "audit_pb2.ConsistencyProofResponse":
        """The RFC 6962 proof (``.hashes``, hex) that the tree of `second_size` records (0:
        now) extends the tree of `first_size`. Check it with
        streamlearn.merkle.verify_consistency, or use audit_check_consistency."""
        name = key_bytes(model)
        return self._call("Auditor.ConsistencyProof", audit_pb2_grpc.AuditorStub,
                          "ConsistencyProof",
                          audit_pb2.ConsistencyProofRequest(model=name, shard=shard,
                                                            first_size=first_size,
                                                            second_size=second_size),
                          model=name, shard=shard)

    def audit_prove(self, model: Union[str, bytes], index: int, tree_head: Union[str, bytes],
                    public_key_pem: Union[str, bytes], shard: int = 0) -> str:
        """Checks the signed `tree_head` under the audit key, fetches the inclusion proof of
        record `index` in that tree and checks it; returns the record's canonical line.
        streamlearn.merkle.ProofError if anything fails to check out."""
        head = merkle.open_tree_head(tree_head, public_key_pem)
        _check_origin(head, model, shard)
        proof = self.audit_inclusion_proof(model, index, head.size, shard)
        merkle.verify_inclusion(proof.line, index, head, proof.hashes)
        return proof.line

    def audit_check_consistency(self, model: Union[str, bytes], old_head: Union[str, bytes],
                                new_head: Union[str, bytes], public_key_pem: Union[str, bytes],
                                shard: int = 0) -> None:
        """Checks both signed tree heads and that the newer one's tree extends the older's
        (nothing the older one covered was changed or dropped); ProofError otherwise."""
        old = merkle.open_tree_head(old_head, public_key_pem)
        new = merkle.open_tree_head(new_head, public_key_pem)
        _check_origin(old, model, shard)
        _check_origin(new, model, shard)
        if old.size > new.size:
            old, new = new, old
        hashes: Sequence[str] = []
        if 0 < old.size < new.size:
            hashes = self.audit_consistency_proof(model, old.size, new.size, shard).hashes
        merkle.verify_consistency(old, new, hashes)


def _check_origin(head: "merkle.TreeHead", model: Union[str, bytes], shard: int) -> None:
    """A tree head names its chain: "streamlearn.audit/[<tenant>/]<model>/<shard>"."""
    name = model.decode("utf-8") if isinstance(model, bytes) else model
    tail = f"/{name}/{shard}"
    if not head.origin.startswith("streamlearn.audit/") or not head.origin.endswith(tail):
        raise merkle.ProofError(f"the tree head is for {head.origin!r}, not model {name!r} "
                                f"shard {shard}")


class AuditReader:
    """The records of one shard's audit chain (Client.audit_read), read with Auditor.Read
    from the shard's owner; a read cut short by a failure goes on from the next record, up to
    the head as of the first answer.

    Attributes, set by the first answer: head_next_index (records up to head_next_index - 1
    are read) and head_merkle_curr (the merkle_curr the last of them must have).
    """

    def __init__(self, client: Client, model: bytes, shard: int, from_index: int,
                 limit: int) -> None:
        self._client = client
        self._model = model
        self._shard = shard
        self._from = from_index
        self._limit = limit
        self.head_next_index: Optional[int] = None
        self.head_merkle_curr: Optional[str] = None

    def __iter__(self) -> Iterator[AuditRecord]:
        client, router = self._client, self._client._router
        next_index = self._from
        end = self._from + self._limit if self._limit else None  # exclusive
        deadline = time.monotonic() + client.retry_timeout
        backoff = Backoff()
        while end is None or next_index < end:
            address = router.address_for(self._model, self._shard)
            limit = 0 if end is None else end - next_index
            request = audit_pb2.ReadRequest(model=self._model, shard=self._shard,
                                            from_index=next_index, limit=limit)
            progressed = False
            try:
                stub = audit_pb2_grpc.AuditorStub(router.channel(address))
                for chunk in stub.Read(request, timeout=client.timeout):
                    if self.head_next_index is None:
                        self.head_next_index = chunk.head_next_index
                        self.head_merkle_curr = chunk.head_merkle_curr
                        if end is None:
                            end = chunk.head_next_index
                    for record in chunk.records:
                        if end is not None and record.index >= end:
                            return
                        yield AuditRecord(record.index, record.line)
                        next_index = record.index + 1
                        progressed = True
                return
            except grpc.RpcError as e:
                error = errors.from_rpc_error(e, method="Auditor.Read", address=address)
            if progressed:
                deadline = time.monotonic() + client.retry_timeout
                backoff.reset()
            retry = error.code in _RETRIED_READS
            if not retry or not backoff.sleep(deadline):
                raise error
            router.invalidate(self._model)


def _varint(value: int) -> bytes:
    """Protobuf's base-128 varint."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _health_status(data: bytes) -> int:
    """The `status` (field 1, a varint) of an encoded HealthCheckResponse; 0 when absent."""
    i, status = 0, 0
    while i < len(data):
        tag = data[i]
        i += 1
        if tag & 7 != 0:  # only varints are expected in this message
            break
        value, shift = 0, 0
        while i < len(data):
            byte = data[i]
            i += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        if tag >> 3 == 1:
            status = value
    return status


class _HealthStub:
    """A stub of grpc.health.v1.Health with Check on raw bytes."""

    def __init__(self, channel: grpc.Channel) -> None:
        self.Check = channel.unary_unary("/grpc.health.v1.Health/Check")
