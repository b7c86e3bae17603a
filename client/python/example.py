#!/usr/bin/python3
"""A minimal streamlearn client in Python (Debian's python3-grpcio / python3-protobuf).

It generates the gRPC stubs from the .proto files at run time (Debian's protoc matches
python3-protobuf 3.21), then creates a model (or reuses it if it exists), ingests 100
events over one Ingest stream, and queries the model at a probe vector.

    /usr/bin/python3 client/python/example.py --server localhost:50051 --proto-dir proto

Exit status: 0 on success, 1 if the server refused anything, 2 on bad usage / setup.
"""

import argparse
import glob
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile

GRPC_PYTHON_PLUGIN = "/usr/bin/grpc_python_plugin"


def fail(message, code=1):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def generate_stubs(proto_dir, out_dir):
    """Runs protoc on proto_dir/*.proto into out_dir and makes the modules importable."""
    protos = sorted(glob.glob(os.path.join(proto_dir, "*.proto")))
    if not protos:
        fail(f"no .proto files in {proto_dir!r} (pass --proto-dir)", 2)
    protoc = shutil.which("protoc") or "/usr/bin/protoc"
    cmd = [protoc, f"--python_out={out_dir}", f"--grpc_out={out_dir}",
           f"--plugin=protoc-gen-grpc={GRPC_PYTHON_PLUGIN}", f"-I{proto_dir}", *protos]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"protoc failed: {result.stderr.strip()}", 2)
    sys.path.insert(0, out_dir)


def shard_for(routing_key, shards):
    """The server's routing (core/common/routing.h): BE64(SHA-256(key)[0:8]) mod shards."""
    digest = hashlib.sha256(routing_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % shards


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="localhost:50051", help="host:port")
    parser.add_argument("--proto-dir", default="proto", help="directory of the .proto files")
    parser.add_argument("--model", default="pyexample", help="model to create or reuse")
    parser.add_argument("--routing-key", default="py", help="routing key of the events")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic events")
    args = parser.parse_args()

    import grpc  # noqa: E402  (after argparse so --help works without grpc)

    with tempfile.TemporaryDirectory(prefix="streamlearn-py-") as gen_dir:
        generate_stubs(args.proto_dir, gen_dir)
        import admin_pb2
        import admin_pb2_grpc
        import sau_pb2
        import sau_pb2_grpc

        channel = grpc.insecure_channel(args.server)
        try:
            grpc.channel_ready_future(channel).result(timeout=10)
        except grpc.FutureTimeoutError:
            fail(f"UNAVAILABLE: cannot connect to {args.server} within 10 s")
        admin = admin_pb2_grpc.AdminStub(channel)
        sau = sau_pb2_grpc.SAUStub(channel)
        d, d_v = 8, 2
        # Request messages carry names and routing keys as bytes (the server checks UTF-8).
        model, routing_key = args.model.encode("utf-8"), args.routing_key.encode("utf-8")

        try:
            spec = admin_pb2.ModelSpec(
                name=args.model, shards=1,
                sau=admin_pb2.SauSpec(d=d, d_v=d_v, r=128, gamma=0.99))
            try:
                info = admin.CreateModel(admin_pb2.CreateModelRequest(spec=spec), timeout=30)
                print(f"created model {args.model!r}: d={d} d_v={d_v} r=128, "
                      f"W {info.w_digest[:16]}")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise
                info = admin.GetModel(admin_pb2.GetModelRequest(name=model), timeout=30)
                if info.spec.sau.d != d or info.spec.sau.d_v != d_v:
                    fail(f"model {args.model!r} exists with other dimensions; use --model")
                print(f"reusing model {args.model!r}")

            shards = info.spec.shards or 1
            shard = shard_for(args.routing_key, shards)
            last_t = max((s.last_t for s in info.shards if s.shard == shard), default=0)

            rng = random.Random(args.seed)
            events = []
            for i in range(100):
                k = [rng.gauss(0.0, 1.0) for _ in range(d)]
                v = [rng.gauss(0.0, 1.0) for _ in range(d_v)]
                events.append(sau_pb2.Event(t=last_t + i + 1, k=k, v=v))

            def requests():
                for start in range(0, len(events), 25):
                    yield sau_pb2.IngestRequest(model=model, routing_key=routing_key,
                                                events=events[start:start + 25])

            applied, version, acks, margin = 0, 0, 0, float("nan")
            for ack in sau.Ingest(requests()):
                acks += 1
                if ack.status.code != 0:
                    fail(f"batch rejected: code {ack.status.code}: {ack.status.message}")
                if ack.shard != shard:
                    fail(f"routing mismatch: server shard {ack.shard}, computed {shard}")
                applied += ack.applied
                version = ack.ver_sau
                margin = ack.last.margin
            if acks != 4:
                fail(f"expected 4 acks (one per batch), got {acks}")
            print(f"ingested 100 events: {applied} applied, shard {shard}, version {version}, "
                  f"last margin {margin:.4g}")

            probe = [rng.gauss(0.0, 1.0) for _ in range(d)]
            answer = sau.Query(sau_pb2.QueryRequest(
                model=model, routing_key=routing_key, q=probe,
                path=sau_pb2.READOUT_PATH_CORRECTNESS, min_version=version), timeout=30)
        except grpc.RpcError as e:
            fail(f"{e.code().name}: {e.details()}")

        y_hat = ", ".join(f"{y:.6g}" for y in answer.y_hat)
        print(f"query (correctness path): y_hat [{y_hat}] den {answer.den:.6g} "
              f"rj_gap {answer.rj_gap:.4g} version {answer.ver_sau} events {answer.events}")
        if len(answer.y_hat) != d_v:
            fail(f"query returned {len(answer.y_hat)} values, expected {d_v}")
        print("ok")


if __name__ == "__main__":
    main()
