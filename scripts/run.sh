#!/usr/bin/env bash
# The run command: installs what it needs, builds the server, the CLI and the demo, starts the
# server (data under ./data, gRPC on 127.0.0.1:50051, Prometheus metrics on 127.0.0.1:9464),
# and runs the demo client against it. The server keeps running afterwards for you to try the
# CLI; Ctrl-C stops it (gracefully). With --exit (or no terminal) it stops after the demo.
#   scripts/run.sh [--exit]
set -euo pipefail
cd "$(dirname "$0")/.."

LISTEN=${LISTEN:-127.0.0.1:50051}
METRICS=${METRICS:-127.0.0.1:9464}
DATA_DIR=${DATA_DIR:-./data}

bash scripts/setup.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target streamlearn-server streamlearn streamlearn-demo

"$build/server/streamlearn-server" --listen "$LISTEN" --metrics "$METRICS" --data_dir "$DATA_DIR" &
server=$!
stop() { kill -TERM "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
trap stop EXIT INT TERM

for _ in $(seq 1 100); do
  if "$build/client/streamlearn" --server "$LISTEN" list > /dev/null 2>&1; then break; fi
  if ! kill -0 "$server" 2>/dev/null; then echo "server exited; see its log above" >&2; exit 1; fi
  sleep 0.1
done

"$build/client/streamlearn-demo" --server "$LISTEN"

cat <<MSG

The server is running on $LISTEN (metrics: http://$METRICS/metrics). Try:
  $build/client/streamlearn --server $LISTEN list
  $build/client/streamlearn --server $LISTEN describe demo
  $build/client/streamlearn --server $LISTEN query demo --q "$(printf '0.1,%.0s' $(seq 1 15))0.1"
  $build/client/streamlearn --server $LISTEN audit verify demo --public-key $DATA_DIR/audit.pub
  $build/client/streamlearn --server $LISTEN snapshot demo
Everything acknowledged is in $DATA_DIR: stop the server (even with kill -9), start it again,
and describe shows the same state digests.
MSG
if [ "${1:-}" != "--exit" ] && [ -t 0 ]; then
  echo "Ctrl-C stops the server."
  wait "$server"
fi
