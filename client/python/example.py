#!/usr/bin/python3
"""A first streamlearn program in Python: create a model, stream events into it, query it.

Install the package first (docs/CLIENT.md, "Python"), then run this against a server:

    pip install ./client/python                 # Debian without PyPI: see docs/CLIENT.md
    python3 client/python/example.py --server localhost:50051

From a repository checkout without installing, --proto-dir builds the package's stubs into
a temporary directory first, as `pip install` would:

    /usr/bin/python3 client/python/example.py --server localhost:50051 --proto-dir proto

Exit status: 0 on success, 1 if the server refused anything, 2 on bad usage / setup.
"""

import argparse
import atexit
import os
import random
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(message: str, code: int = 1) -> None:
    """Prints `error: message` to stderr and exits with `code`."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def import_streamlearn(proto_dir):
    """The installed package; with proto_dir, a temporary build of the one beside this file."""
    # This file sits beside the package's sources, which hold no generated stubs: never
    # import those by accident.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
    if proto_dir is not None:
        sys.dont_write_bytecode = True  # nothing written beside the sources
        sys.path.insert(0, HERE)
        import build_stubs
        sys.path.pop(0)
        build = tempfile.mkdtemp(prefix="streamlearn-example-")
        atexit.register(shutil.rmtree, build, True)
        shutil.copytree(os.path.join(HERE, "streamlearn"), os.path.join(build, "streamlearn"),
                        ignore=shutil.ignore_patterns("_proto", "__pycache__"))
        try:
            build_stubs.generate(proto_dir, os.path.join(build, "streamlearn", "_proto"))
        except build_stubs.StubError as e:
            fail(f"{e} (pass --proto-dir)", 2)
        sys.path.insert(0, build)
    try:
        import streamlearn
    except ImportError as e:
        fail(f"cannot import streamlearn ({e}): install it with `pip install ./client/python` "
             "(docs/CLIENT.md, \"Python\"), or run from the repository with --proto-dir proto", 2)
    return streamlearn


def main() -> None:
    """Create (or reuse) a model, ingest 100 events, query; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051", help="host:port of a server")
    parser.add_argument("--model", default="pyexample", help="model to create or reuse")
    parser.add_argument("--routing-key", default="py", help="routing key of the events")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic events")
    parser.add_argument("--proto-dir", help="run without installing: build the stubs from "
                        "this directory of .proto files")
    args = parser.parse_args()
    streamlearn = import_streamlearn(args.proto_dir)
    errors = streamlearn.errors
    d, d_v = 8, 2

    try:
        with streamlearn.Client(args.server) as client:
            # 1. A model with an SAU part: keys of dimension d, values of dimension d_v.
            try:
                info = client.create_model(args.model, sau={"d": d, "d_v": d_v, "r": 128})
                print(f"created model {args.model!r}: d={d} d_v={d_v} r=128, "
                      f"W {info.w_digest[:16]}")
            except errors.AlreadyExists:
                info = client.describe(args.model)
                if (info.spec.sau.d, info.spec.sau.d_v) != (d, d_v):
                    fail(f"model {args.model!r} exists with other dimensions; use --model")
                print(f"reusing model {args.model!r}")

            # 2. Stream 100 events (t, k, v). t must increase within a shard, so a reused
            #    model continues after the shard's last t.
            shard = client.shard_of(args.model, args.routing_key)
            last_t = max((s.last_t for s in info.shards if s.shard == shard), default=0)
            rng = random.Random(args.seed)
            events = [(last_t + i, [rng.gauss(0, 1) for _ in range(d)],
                       [rng.gauss(0, 1) for _ in range(d_v)]) for i in range(1, 101)]
            stats = client.ingest(args.model, events, routing_key=args.routing_key,
                                  batch_size=25)
            ack = stats.shards[shard].last_ack
            print(f"ingested 100 events: {stats.applied} applied, {stats.duplicates} "
                  f"duplicates, {stats.batches_acked} batches, shard {shard}, version "
                  f"{ack.ver_sau}, last margin {ack.last.margin:.4g}")

            # 3. Query at a probe vector, reading our own writes (min_version).
            answer = client.query(args.model, [rng.gauss(0, 1) for _ in range(d)],
                                  routing_key=args.routing_key, path="correctness",
                                  min_version=ack.ver_sau)
    except errors.StreamlearnError as e:   # e.code, e.message; NotFound, InvalidArgument, ...
        fail(str(e))

    y_hat = ", ".join(f"{y:.6g}" for y in answer.y_hat)
    print(f"query (correctness path): y_hat [{y_hat}] den {answer.den:.6g} "
          f"rj_gap {answer.rj_gap:.4g} version {answer.ver_sau} events {answer.events}")
    print("ok")


if __name__ == "__main__":
    main()
