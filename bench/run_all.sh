#!/usr/bin/env bash
# Builds every benchmark in bench/ (Release) and runs each one with the flags the results in
# bench/RESULTS.md were taken with, writing into OUT_DIR:
#   machine.txt      nproc, CPU model, compiler, commit
#   <name>.json      Google Benchmark JSON (--benchmark_out), median/mean/stddev/cv aggregates
#   <name>.txt       the console output, with the ratio table at its end
#
# Usage: bench/run_all.sh OUT_DIR [--core-only] [--only=NAME] [extra Google Benchmark flags...]
#   --core-only   build and run only core_*_bench (no gRPC server needed)
#   --only=NAME   build and run only bench/NAME.cc (e.g. --only=rpc_sau_bench)
# Environment: CORE_BUILD_DIR (default <repo>/build-bench, configured with
#   STREAMLEARN_CORE_ONLY=ON), FULL_BUILD_DIR (default <repo>/build-bench-full),
#   REPETITIONS (default 5), JOBS (ninja -j, default 2).
# Only the benchmark targets are built. Expect ~2.5 min for core_sau_bench (of which ~25 s
# builds the 10^6-event query fixture and ~15 s the state-bytes table) and ~1 min for
# rpc_sau_bench on 2 cores; ~1.5 min for core_audit_bench, ~0.5 min for rpc_durability_bench
# and ~2.5 min for persistence_bench (it writes ~0.6 GB under $TMPDIR per 10^6-event
# repetition and removes it at the end); ~1 min each for core_fuse_bench and rpc_fuse_bench
# (bench/RESULTS.md, "Fuse"); ~3 min for cluster_bench, which needs Debian's nats-server
# (scripts/setup.sh), builds streamlearn-server beside it and runs its takeover measurement
# (12 kill -9's) before the Google Benchmark cases (bench/RESULTS.md, "Cluster mode"); ~20 s
# for core_train_bench. The end-to-end training benchmark is a script of its own,
# bench/train_e2e.sh (bench/RESULTS.md, "Training on the VW-style stream").
set -euo pipefail

usage() { sed -n '2,23p' "$0" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
OUT_DIR=$1
shift
CORE_ONLY=0
ONLY=""
EXTRA=()
for arg in "$@"; do
  case "$arg" in
    --core-only) CORE_ONLY=1 ;;
    --only=*) ONLY=${arg#--only=} ;;
    -h|--help) usage ;;
    *) EXTRA+=("$arg") ;;
  esac
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
CORE_BUILD_DIR=${CORE_BUILD_DIR:-$REPO/build-bench}
FULL_BUILD_DIR=${FULL_BUILD_DIR:-$REPO/build-bench-full}
REPETITIONS=${REPETITIONS:-5}
JOBS=${JOBS:-2}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)

CORE_BENCHES=()
OTHER_BENCHES=()
for src in "$REPO"/bench/*_bench.cc; do
  name=$(basename "$src" .cc)
  [[ -z $ONLY || $name == "$ONLY" ]] || continue
  if [[ $name == core_* ]]; then CORE_BENCHES+=("$name"); else OTHER_BENCHES+=("$name"); fi
done

{
  echo "date:      $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit:    $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "nproc:     $(nproc)"
  echo "cpu:       $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "compiler:  $(${CXX:-c++} --version | head -1)"
  echo "build:     Release (-O3 -DNDEBUG -ffp-contract=off; -mavx2 -mfma if the host has them)"
  echo "load:      $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT_DIR/machine.txt"
cat "$OUT_DIR/machine.txt"

[[ -z $ONLY || -f $REPO/bench/$ONLY.cc ]] || { echo "no bench/$ONLY.cc" >&2; exit 2; }

FLAGS=(--benchmark_repetitions="$REPETITIONS" --benchmark_report_aggregates_only=true
       --benchmark_enable_random_interleaving=true --benchmark_out_format=json)

run() {  # run BUILD_DIR NAME
  local bin=$1/bench/$2
  echo "== $2"
  "$bin" "${FLAGS[@]}" --benchmark_out="$OUT_DIR/$2.json" ${EXTRA[@]+"${EXTRA[@]}"} \
    | tee "$OUT_DIR/$2.txt"
}

if [[ ${#CORE_BENCHES[@]} -gt 0 ]]; then
  cmake -S "$REPO" -B "$CORE_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTREAMLEARN_CORE_ONLY=ON -DSTREAMLEARN_BUILD_TESTS=OFF > /dev/null
  ninja -C "$CORE_BUILD_DIR" -j "$JOBS" "${CORE_BENCHES[@]}"
fi
if [[ $CORE_ONLY -eq 0 && ${#OTHER_BENCHES[@]} -gt 0 ]]; then
  cmake -S "$REPO" -B "$FULL_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DSTREAMLEARN_BUILD_TESTS=OFF > /dev/null
  ninja -C "$FULL_BUILD_DIR" -j "$JOBS" "${OTHER_BENCHES[@]}"
fi

for name in "${CORE_BENCHES[@]}"; do run "$CORE_BUILD_DIR" "$name"; done
if [[ $CORE_ONLY -eq 0 ]]; then
  for name in "${OTHER_BENCHES[@]}"; do run "$FULL_BUILD_DIR" "$name"; done
fi
echo "raw outputs in $OUT_DIR"
