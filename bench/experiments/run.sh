#!/usr/bin/env bash
# The seeds' experiment protocol in one command (docs/EXPERIMENTS.md):
#
#   bench/experiments/run.sh [--quick] [--seed N] [--binary PATH] OUT
#
# runs the experiments program against the core library (no server), writes every CSV and
# run.json into OUT, draws the PNGs next to them (bench/experiments/plot.py, matplotlib), and in
# quick mode checks them (bench/experiments/check_quick.py). The program comes from --binary, or
# from $BUILD_DIR (default: build) after building its target there. The base seed is --seed,
# else $STREAMLEARN_EXPERIMENTS_SEED, else 1 (every run's seed derives from it; run.json lists
# how). Full mode takes a few minutes on 2 cores, quick mode seconds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
quick=() seed=() binary="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=(--quick) ;;
    --seed) seed=(--seed "$2"); shift ;;
    --binary) binary="$2"; shift ;;
    -h|--help) sed -n "2,11p" "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "run.sh: one output directory only" >&2; exit 2; }; out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || { sed -n "2,11p" "$0" >&2; exit 2; }
if [ -z "$binary" ]; then
  build="${BUILD_DIR:-$repo/build}"
  [ -f "$build/CMakeCache.txt" ] || {
    echo "run.sh: no build in $build (see the README's build step, or set BUILD_DIR)" >&2; exit 1; }
  cmake --build "$build" --target experiments
  binary="$build/bench/experiments"
fi
commit="$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [ "$commit" != unknown ] && [ -n "$(git -C "$repo" status --porcelain 2>/dev/null)" ]; then
  commit="$commit+changes"
fi
if [ ${#seed[@]} -eq 0 ] && [ -n "${STREAMLEARN_EXPERIMENTS_SEED:-}" ]; then
  seed=(--seed "$STREAMLEARN_EXPERIMENTS_SEED")
fi
mkdir -p "$out"
start=$SECONDS
"$binary" --out "$out" --build_info "$commit" "${quick[@]}" "${seed[@]}"
/usr/bin/python3 "$here/plot.py" "$out"
# The traced run's audit stream, checked as a third party would: the CLI's one-pass verifier
# with the public key alone. Skipped (said so) where the CLI is not built (a core-only build).
cli="$(dirname "$binary")/../client/streamlearn"
if [ -x "$cli" ]; then
  "$cli" audit verify --file "$out/audit.jsonl" --public-key "$out/audit_public.pem" \
    > "$out/audit_verify.txt" 2>&1 || { cat "$out/audit_verify.txt" >&2; exit 1; }
  tail -1 "$out/audit_verify.txt"
else
  echo "run.sh: no streamlearn CLI beside the program; the audit stream is not verified" >&2
fi
if [ ${#quick[@]} -gt 0 ]; then
  /usr/bin/python3 "$here/check_quick.py" "$out"
fi
echo "run.sh: done in $((SECONDS - start)) s; CSVs, run.json and PNGs in $out"
