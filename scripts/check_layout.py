#!/usr/bin/env python3
"""The house rules of the source tree's dependency graph, checked on its #include lines.

  core/             includes nothing from server/ or client/, and no gRPC, RocksDB, Prometheus
                    or protobuf header (the math and data structures stand alone);
  core/common/      includes nothing from the rest of core/ (the client library links it alone);
  server/storage/   includes no gRPC or Prometheus header and nothing from server/ outside it
                    (durability is a library of its own: the CLI links it without the server);
  server/cluster/   includes no gRPC or Prometheus header and from server/ only storage/ and
                    cluster/ (the control plane: leases and balance);
  server/           includes RocksDB headers only inside server/storage/, and NATS headers only
                    inside server/storage/ (the one NATS client);
  client/           includes from server/ only server/storage/ (the offline replay);
  client/lib/       includes from core/ only core/common/ and core/lmu/feature.h.

Prints every violation as path:line: rule, and exits 1 if there is one.
  scripts/check_layout.py [ROOT]
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]')

RULES = [
    # (files under, forbidden include pattern, allowed exception pattern or None, rule text)
    ("core/", r"^(server|client)/", None, "core/ includes nothing from server/ or client/"),
    ("core/", r"^(grpc|grpcpp|rocksdb|prometheus|google/protobuf)/|\.pb\.h$", None,
     "core/ includes no gRPC, RocksDB, Prometheus or protobuf header"),
    ("core/common/", r"^core/(?!common/)", None, "core/common/ includes only core/common/"),
    ("server/storage/", r"^(grpc|grpcpp|prometheus)/|\.grpc\.pb\.h$", None,
     "server/storage/ includes no gRPC or Prometheus header"),
    ("server/storage/", r"^server/(?!storage/)", None,
     "server/storage/ includes nothing from server/ outside it"),
    ("server/cluster/", r"^(grpc|grpcpp|prometheus)/|\.grpc\.pb\.h$", None,
     "server/cluster/ includes no gRPC or Prometheus header"),
    ("server/cluster/", r"^server/(?!storage/|cluster/)", None,
     "server/cluster/ includes from server/ only storage/ and cluster/"),
    ("server/", r"^rocksdb/", r"^server/storage/", "RocksDB headers only inside server/storage/"),
    ("server/", r"^nats/|^nats\.h$", r"^server/storage/", "NATS headers only inside server/storage/"),
    ("client/", r"^server/(?!storage/)", None, "client/ includes from server/ only server/storage/"),
    ("client/lib/", r"^core/(?!common/|lmu/feature\.h$)", None,
     "client/lib/ includes from core/ only core/common/ and core/lmu/feature.h"),
]


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = 0
    checked = 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc") or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("build", ".")):
            continue
        checked += 1
        for no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            inc = m.group(1)
            for under, forbidden, allowed_in, text in RULES:
                if not rel.startswith(under) or not re.search(forbidden, inc):
                    continue
                if allowed_in is not None and re.search(allowed_in, rel):
                    continue
                print(f"{rel}:{no}: includes {inc}: {text}")
                bad += 1
    print(f"checked {checked} files: {bad} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
