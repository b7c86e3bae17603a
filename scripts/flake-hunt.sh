#!/usr/bin/env bash
# The flake hunt: runs the whole ctest suite K times while stress-ng keeps every core busy, and
# prints each failure with its test name and the seed it ran with. A test that fails here
# asserts something the service does not guarantee (timing, scheduling) or hides a real race.
#   scripts/flake-hunt.sh [K]        # K runs (default 10) of the Release suite
#   BUILD_DIR=build scripts/flake-hunt.sh 20
# It builds the Release tree as scripts/test.sh does, then runs ctest with as many tests at
# once as scripts/test.sh's Release pass (-j 2*nproc; CTEST_JOBS overrides) beside
# `stress-ng --cpu nproc`. Exit 0 only when every run passed. Takes about K times the suite's
# time under load (the suite alone takes a few minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
bash scripts/setup.sh stress-ng

jobs=$(nproc)
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMLEARN_BUILD_TESTS=ON \
  -DSTREAMLEARN_BUILD_BENCH=ON > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"

stress-ng --cpu "$jobs" --timeout 0 --quiet &
hog=$!
trap 'kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true' EXIT
echo "flake hunt: $runs runs of the suite beside stress-ng --cpu $jobs (pid $hog)"

logs=$build/flake-hunt
rm -rf "$logs"
mkdir -p "$logs"
bad_runs=0
start=$SECONDS
for i in $(seq 1 "$runs"); do
  report=$(realpath "$logs")/run-$i.xml
  t0=$SECONDS
  rc=0
  ctest --test-dir "$build" -j "${CTEST_JOBS:-$((2 * jobs))}" --output-junit "$report" > "$logs/run-$i.log" 2>&1 || rc=$?
  line=$(/usr/bin/python3 scripts/ctest_summary.py "run $i" "$report") || rc=1
  echo "$line  ($((SECONDS - t0)) s)"
  if [ "$rc" -ne 0 ]; then
    bad_runs=$((bad_runs + 1))
    /usr/bin/python3 scripts/ctest_summary.py --failures "$report"
    echo "  (output: $logs/run-$i.log)"
  fi
done
echo "flake hunt: $runs runs in $(( (SECONDS - start) / 60 )) min; $bad_runs with failures"
[ "$bad_runs" -eq 0 ]
