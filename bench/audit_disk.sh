#!/usr/bin/env bash
# The audit chain's disk use per 10^6 SAU events, without and with the archive
# (docs/AUDIT.md, "Bounded storage: archive segments"; figures in bench/RESULTS.md).
#
#   bench/audit_disk.sh [BUILD_DIR] [EVENTS]     # defaults: build, 1000000
#
# Two runs of a real server on a fresh data directory each: one with --audit_live_records=0
# (every record stays in RocksDB, as before the archive), one with the defaults (2^18 records
# live, segments of 2^16). Each ingests the same EVENTS events (d = 16, d_v = 4, one shard),
# takes a snapshot (which archives) and stops the server; then it reports the bytes of db/
# and of audit-archive/. Disk use is a size, not a time: one run of each is the measurement.
set -euo pipefail
BUILD=${1:-build}
EVENTS=${2:-1000000}
SERVER="$BUILD/server/streamlearn-server"
CLI="$BUILD/client/streamlearn"
WORK=$(mktemp -d)
trap 'kill "${PID:-0}" 2> /dev/null || true; rm -rf "$WORK"' EXIT

/usr/bin/python3 - "$EVENTS" > "$WORK/events.csv" << 'EOF'
import random, sys
n = int(sys.argv[1])
rng = random.Random(7)
d, dv = 16, 4
out = sys.stdout
out.write(",".join(["t"] + [f"k{i}" for i in range(d)] + [f"v{i}" for i in range(dv)]) + "\n")
for t in range(1, n + 1):
    out.write(",".join([str(t)] + [f"{rng.gauss(0, 0.25):.6f}" for _ in range(d + dv)]) + "\n")
EOF

port=$((20000 + RANDOM % 20000))
run() {  # name, extra server flags...
  local name=$1; shift
  local dir="$WORK/$name"
  "$SERVER" --listen "127.0.0.1:$port" --metrics "" --data_dir "$dir" \
    --snapshot_interval 0 --snapshot_every_steps 0 "$@" > "$WORK/$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do "$CLI" --server "127.0.0.1:$port" health > /dev/null 2>&1 && break; sleep 0.1; done
  "$CLI" --server "127.0.0.1:$port" create --name disk --d 16 --dv 4 --r 64 > /dev/null
  "$CLI" --server "127.0.0.1:$port" ingest disk "$WORK/events.csv" --batch 1000 > /dev/null
  "$CLI" --server "127.0.0.1:$port" snapshot disk > /dev/null
  kill -TERM "$PID"; wait "$PID" || true
  local db archive
  db=$(du -sb "$dir/db" | cut -f1)
  archive=$(du -sb "$dir/audit-archive" 2> /dev/null | cut -f1 || echo 0)
  printf '%-10s db/ %12d bytes   audit-archive/ %12d bytes   total %12d   (%s)\n' \
    "$name" "$db" "${archive:-0}" $((db + ${archive:-0})) "$*"
  grep -ho "[0-9]* record(s) archived in [0-9.]* s" "$WORK/$name.log" | sed 's/^/           /' || true
  port=$((port + 1))
}
echo "audit disk use for $EVENTS SAU events (d=16, d_v=4, r=64, one shard)"
run before --audit_live_records=0
run after
