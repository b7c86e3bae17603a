"""Python values -> request messages: vectors, sparse x, events and samples.

Vectors are any iterables of numbers (lists, tuples, numpy arrays: a numpy array is read with
its ``tolist()``, so numpy is never imported here). A sparse x is a mapping ``{id: value}`` or
an iterable of ``(id, value)`` pairs; ids are integers in [0, 2**64). Bad shapes or types
raise TypeError / ValueError before anything is sent; dimensions and finiteness are the
server's to check (it names the event, the field and the index).
"""

from typing import Any, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from google.protobuf import json_format

from .pb import admin_pb2, fuse_pb2, lmu_pb2, sau_pb2

Vector = Union[Sequence[float], Any]           # a sequence or a numpy array
Sparse = Union[Mapping[int, float], Iterable[Tuple[int, float]]]

_ID_LIMIT = 1 << 64


def vector(value: Vector, what: str) -> List[float]:
    """A flat list of floats from a sequence or a 1-D numpy array."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if isinstance(value, (int, float)):
        raise TypeError(f"{what}: expected a sequence of numbers, got a single number")
    try:
        return [float(x) for x in value]
    except TypeError as e:
        raise TypeError(f"{what}: expected a flat sequence of numbers ({e})") from None


def targets(value: Union[float, Vector], what: str = "y") -> List[float]:
    """y: a sequence of numbers, or one number (a model with m = 1)."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if isinstance(value, (int, float)):
        return [float(value)]
    return vector(value, what)


def feature_id(value: Any, what: str) -> int:
    """An id as an int in [0, 2**64); ValueError naming `what` otherwise."""
    i = int(value)
    if i != value or not 0 <= i < _ID_LIMIT:
        raise ValueError(f"{what}: feature ids are integers in [0, 2**64), got {value!r}")
    return i


def sparse(x: Optional[Sparse] = None, ids: Optional[Iterable[int]] = None,
           vals: Optional[Iterable[float]] = None, what: str = "x") -> Tuple[List[int],
                                                                            List[float]]:
    """(ids, vals) from x (a mapping or (id, value) pairs) or from ids and vals given apart."""
    if x is not None:
        if ids is not None or vals is not None:
            raise TypeError(f"{what}: give x, or ids and vals, not both")
        pairs = x.items() if isinstance(x, Mapping) else x
        out_ids, out_vals = [], []
        for n, pair in enumerate(pairs):
            try:
                i, v = pair
            except (TypeError, ValueError):
                raise TypeError(f"{what}[{n}]: expected an (id, value) pair, got {pair!r}") \
                    from None
            out_ids.append(feature_id(i, f"{what}[{n}] id"))
            out_vals.append(float(v))
        return out_ids, out_vals
    if ids is None or vals is None:
        raise TypeError(f"{what}: give x (a dict or (id, value) pairs), or both ids and vals")
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return ([feature_id(i, f"{what} ids[{n}]") for n, i in enumerate(ids)],
            vector(vals, f"{what} vals"))


def _fields(item: Any, names: Sequence[str], what: str) -> List[Any]:
    """The values of `names` from a dict (missing: None) or a tuple (in that order)."""
    if isinstance(item, Mapping):
        unknown = set(item) - set(names) - {"routing_key", "ids", "vals"}
        if unknown:
            raise TypeError(f"{what}: unknown keys {sorted(unknown)}; expected {list(names)}")
        return [item.get(n) for n in names]
    if isinstance(item, (tuple, list)):
        if not len(names) - 2 <= len(item) <= len(names):
            raise TypeError(f"{what}: expected a tuple {tuple(names)}, got {len(item)} items")
        return list(item) + [None] * (len(names) - len(item))
    raise TypeError(f"{what}: expected a message, a dict or a tuple, got {type(item).__name__}")


def event(item: Any, what: str = "event") -> "sau_pb2.Event":
    """An SAU Event from an Event, a dict {t, k, v} or a tuple (t, k, v)."""
    if isinstance(item, sau_pb2.Event):
        return item
    t, k, v = _fields(item, ("t", "k", "v"), what)[:3]
    if t is None or k is None or v is None:
        raise TypeError(f"{what}: t, k and v are required")
    return sau_pb2.Event(t=int(t), k=vector(k, f"{what} k"), v=vector(v, f"{what} v"))


def _x_of(item: Any, x: Any, what: str) -> Tuple[List[int], List[float]]:
    """A sample's (ids, vals): from x, or from a dict item's "ids" and "vals"."""
    if isinstance(item, Mapping) and x is None:
        return sparse(None, item.get("ids"), item.get("vals"), f"{what} x")
    return sparse(x, what=f"{what} x")


def sample(item: Any, what: str = "sample") -> "lmu_pb2.Sample":
    """An LMU Sample from a Sample, a dict {t, x (or ids and vals), y, lr, l2} or a tuple
    (t, x, y[, lr[, l2]])."""
    if isinstance(item, lmu_pb2.Sample):
        return item
    t, x, y, lr, l2 = _fields(item, ("t", "x", "y", "lr", "l2"), what)
    if t is None or y is None:
        raise TypeError(f"{what}: t, x and y are required")
    ids, vals = _x_of(item, x, what)
    s = lmu_pb2.Sample(t=int(t), ids=ids, vals=vals, y=targets(y, f"{what} y"))
    if lr is not None:
        s.lr = float(lr)
    if l2 is not None:
        s.l2 = float(l2)
    return s


def fuse_sample(item: Any, what: str = "sample") -> "fuse_pb2.FuseSample":
    """A FuseSample from a FuseSample, a dict {t, x (or ids and vals), q, y} or a tuple
    (t, x, q, y)."""
    if isinstance(item, fuse_pb2.FuseSample):
        return item
    t, x, q, y = _fields(item, ("t", "x", "q", "y"), what)
    if t is None or q is None or y is None:
        raise TypeError(f"{what}: t, x, q and y are required")
    ids, vals = _x_of(item, x, what)
    return fuse_pb2.FuseSample(t=int(t), ids=ids, vals=vals, q=vector(q, f"{what} q"),
                               y=targets(y, f"{what} y"))


def item_routing_key(item: Any) -> Optional[Any]:
    """The routing key an item carries (a dict's "routing_key"), or None."""
    if isinstance(item, Mapping):
        return item.get("routing_key")
    return None


_ENGINES = {"prf": "ENGINE_PRF", "ridge": "ENGINE_RIDGE", "vla": "ENGINE_VLA"}


def _engine_names(data: dict) -> dict:
    """Lets an SAU part name its engine "prf", "ridge" or "vla" (docs/ENGINES.md) as well as
    by the enum's name or number."""
    def fix(part: Any) -> Any:
        if isinstance(part, Mapping) and isinstance(part.get("engine"), str):
            part = dict(part)
            part["engine"] = _ENGINES.get(part["engine"], part["engine"])
        return part
    data = dict(data)
    if "sau" in data:
        data["sau"] = fix(data["sau"])
    if isinstance(data.get("fuse"), Mapping) and "sau" in data["fuse"]:
        data["fuse"] = dict(data["fuse"])
        data["fuse"]["sau"] = fix(data["fuse"]["sau"])
    return data


def model_spec(spec: Any = None, **fields: Any) -> "admin_pb2.ModelSpec":
    """A ModelSpec from a ModelSpec, a dict in its JSON form (proto field names such as d_v
    or lowerCamelCase, enums by name or number), a model name, and/or keyword fields, which
    override the dict's: model_spec("m", shards=2, sau={"d": 8, "d_v": 2, "r": 128})."""
    if isinstance(spec, admin_pb2.ModelSpec):
        if fields:
            merged = json_format.MessageToDict(spec, preserving_proto_field_name=True)
            merged.update(fields)
            return json_format.ParseDict(merged, admin_pb2.ModelSpec())
        return spec
    if spec is None:
        data = {}
    elif isinstance(spec, str):
        data = {"name": spec}
    elif isinstance(spec, Mapping):
        data = dict(spec)
    else:
        raise TypeError("spec: expected a ModelSpec, a dict in its JSON form or a model name, "
                        f"got {type(spec).__name__}")
    data.update(fields)
    data = _engine_names(data)
    try:
        return json_format.ParseDict(data, admin_pb2.ModelSpec())
    except json_format.ParseError as e:
        raise ValueError(f"spec: {e}") from None
