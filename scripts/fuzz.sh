#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, README.md "Fuzzing") with clang in a build
# directory of their own and runs each for a set time, one after the other, on a scratch copy
# of its seed corpus (fuzz/corpus/<target>/) with its dictionary (fuzz/dict/<target>.dict) if
# it has one. Prints, per target, the executions, executions per second and the coverage
# libFuzzer reports at the end (cov: edges, ft: features), and fails if any target crashed,
# leaked, hung or tripped a sanitizer or a FUZZ_CHECK; the input that did it is kept and its
# path printed (replay it with `build-fuzz/fuzz/fuzz_<target> <file>`).
#
#   scripts/fuzz.sh                        # every target, 60 s each
#   scripts/fuzz.sh --seconds 10 snapshot log_entry
#   scripts/fuzz.sh --list                 # the target names
#   scripts/fuzz.sh --no-build --seconds 300 rpc_sau
#
# FUZZ_BUILD_DIR (default build-fuzz) is the build directory; the scratch corpora, logs and
# kept inputs go to FUZZ_WORK_DIR (default $FUZZ_BUILD_DIR/fuzz-work), emptied at each run.
set -euo pipefail
# The rest is one block, read whole before it runs: the script may be edited during a run.
{
cd "$(dirname "$0")/.."

TARGETS=(strict_json audit_append audit_line certificate tree_head log_entry snapshot manifest
         server_config access_policy csv_events jsonl_events sample_lines
         rpc_sau rpc_lmu rpc_fuse rpc_admin)

seconds=60
build=1
selected=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --no-build) build=0; shift ;;
    --list) printf '%s\n' "${TARGETS[@]}"; exit 0 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) selected+=("$1"); shift ;;
  esac
done
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: --seconds takes a whole number >= 1" >&2
  exit 2
fi
if [ ${#selected[@]} -eq 0 ]; then selected=("${TARGETS[@]}"); fi
for t in "${selected[@]}"; do
  if [[ ! " ${TARGETS[*]} " =~ \ $t\  ]]; then
    echo "fuzz.sh: unknown target '$t' (scripts/fuzz.sh --list)" >&2
    exit 2
  fi
done

dir=${FUZZ_BUILD_DIR:-build-fuzz}
work=${FUZZ_WORK_DIR:-$dir/fuzz-work}

if [ "$build" = 1 ]; then
  echo "== fuzz build ($dir: clang, libFuzzer + ASan + UBSan)"
  build_start=$SECONDS
  # Debug keeps the asserts; -O1 and line tables only, as fuzzing builds usually are. The
  # libraries are unity builds (docs/DECISIONS.md, "Building fast enough to test"), the fuzz
  # targets' own files not.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DSTREAMLEARN_BUILD_FUZZ=ON \
    -DSTREAMLEARN_BUILD_TESTS=OFF -DSTREAMLEARN_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON \
    > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
  cmake --build "$dir" -j "$(nproc)" --target $(printf 'fuzz_%s ' "${selected[@]}")
  echo "== fuzz build: $((SECONDS - build_start)) s"
fi

rm -rf "$work"
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# One line of the table per target; `bad` collects the kept inputs.
rows=()
bad=()
failures=0
for t in "${selected[@]}"; do
  exe="$dir/fuzz/fuzz_$t"
  [ -x "$exe" ] || { echo "fuzz.sh: $exe is missing (build without --no-build)" >&2; exit 1; }
  corpus="$work/$t/corpus"
  artifacts="$work/$t/artifacts"
  log="$work/$t/fuzz.log"
  mkdir -p "$corpus" "$artifacts"
  cp fuzz/corpus/"$t"/* "$corpus"/
  args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048
        -close_fd_mask=1 -artifact_prefix="$artifacts/")
  if [ -f "fuzz/dict/$t.dict" ]; then args+=(-dict="fuzz/dict/$t.dict"); fi
  echo "== fuzz $t: $seconds s"
  rc=0
  "$exe" "${args[@]}" "$corpus" > "$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  status=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$status")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$status")
  units=$(find "$corpus" -type f | wc -l)
  result=ok
  report='ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ_CHECK failed|SUMMARY: '
  if [ "$rc" -ne 0 ] || grep -qE "$report" "$log"; then
    result="FAILED (exit $rc)"
    failures=$((failures + 1))
    # libFuzzer names the kept input in its log ("Test unit written to ...").
    kept=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log")
    if [ -n "$kept" ]; then
      while read -r k; do bad+=("$t: $k (log: $log)"); done <<< "$kept"
    else
      bad+=("$t: no input kept; see $log")
    fi
    grep -m 5 -E 'ERROR:|runtime error:|FUZZ_CHECK failed|SUMMARY:' "$log" | sed 's/^/    /' || true
  fi
  rows+=("$(printf '%-14s %5s %12s %9s %7s %8s %7s  %s' "$t" "$seconds" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$units" "$result")")
done

echo "== fuzz summary (logs, corpora and kept inputs in $work)"
printf '%-14s %5s %12s %9s %7s %8s %7s  %s\n' target s execs exec/s cov ft corpus result
printf '%s\n' "${rows[@]}"
if [ ${#bad[@]} -gt 0 ]; then
  echo "== fuzz: failures; each kept input replays with $dir/fuzz/fuzz_<target> <input>:"
  printf '  %s\n' "${bad[@]}"
fi
# The last line, in the form of scripts/test.sh's summary lines.
echo "fuzz: $((${#selected[@]} - failures)) passed, $failures failed, 0 skipped" \
  "(libFuzzer targets, $seconds s each)"
[ "$failures" -eq 0 ]
exit
}
