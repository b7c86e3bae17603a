#!/usr/bin/env bash
# The test command: installs what it needs, builds everything (Release) and runs every test with
# ctest; then builds everything again with clang, whose -Wthread-safety checks the lock
# annotations (core/common/mutex.h; a violation fails the build), and runs the core unit tests
# of that build; then builds the core with AddressSanitizer + UBSan and runs its unit tests
# again. Every pass always runs and reports; the last lines summarise them, and the command
# fails if any failed.
#   scripts/test.sh              # all three passes
#   SKIP_CLANG=1 SKIP_SANITIZE=1 scripts/test.sh
# Every test has a ctest timeout (tests/CMakeLists.txt); randomised tests print their seed and
# take it from the environment (the variable is named where the seed is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS

bash scripts/setup.sh

jobs=$(nproc)
build=${BUILD_DIR:-build}
summary=()
failed=0

# ctest with a JUnit report; records the pass's summary line and whether it failed. Arguments
# after the build directory go to ctest (e.g. -R '^core\.').
run_ctest() {
  local name=$1 dir=$2
  shift 2
  local report="$dir/ctest-report.xml"
  rm -f "$report"
  local rc=0
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --output-junit "$(realpath "$dir")/ctest-report.xml" "$@" || rc=$?
  if [ -f "$report" ]; then
    local line
    line=$(/usr/bin/python3 scripts/ctest_summary.py "$name" "$report") || rc=1
    summary+=("$line")
    /usr/bin/python3 scripts/ctest_summary.py --failures "$report"
  else
    summary+=("$name: ctest wrote no report (exit $rc)")
  fi
  if [ "$rc" -ne 0 ]; then failed=1; fi
}

echo "== build ($build, Release)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMLEARN_BUILD_TESTS=ON \
  -DSTREAMLEARN_BUILD_BENCH=ON > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"

echo "== tests"
run_ctest release "$build"

if [ -z "${SKIP_CLANG:-}" ]; then
  echo "== clang build with -Wthread-safety (lock annotations), core unit tests"
  clang_build=${build}-clang
  clang_start=$SECONDS
  if cmake -S . -B "$clang_build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DSTREAMLEARN_THREAD_SAFETY=ON \
       -DSTREAMLEARN_BUILD_TESTS=ON -DSTREAMLEARN_BUILD_BENCH=ON \
       > "$clang_build.configure.log" 2>&1; then
    if cmake --build "$clang_build" -j "$jobs"; then
      run_ctest clang "$clang_build" -R '^core\.'
    else
      summary+=("clang: the build failed (a -Wthread-safety error names the member and its mutex)")
      failed=1
    fi
  else
    cat "$clang_build.configure.log"
    summary+=("clang: cmake could not configure the clang build")
    failed=1
  fi
  echo "== clang pass: $((SECONDS - clang_start)) s"
fi

if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== core unit tests under AddressSanitizer + UBSan"
  san=${build}-asan
  cmake -S . -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTREAMLEARN_CORE_ONLY=ON \
    -DSTREAMLEARN_SANITIZE=ON -DSTREAMLEARN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
    > "$san.configure.log" 2>&1 \
    || { cat "$san.configure.log"; exit 1; }
  if cmake --build "$san" -j "$jobs"; then
    run_ctest asan-ubsan "$san"
  else
    summary+=("asan-ubsan: the build failed")
    failed=1
  fi
fi

echo "== summary ($(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s)"
total_passed=0 total_failed=0 total_skipped=0
for line in "${summary[@]}"; do
  echo "$line"
  if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped ]]; then
    total_passed=$((total_passed + BASH_REMATCH[1]))
    total_failed=$((total_failed + BASH_REMATCH[2]))
    total_skipped=$((total_skipped + BASH_REMATCH[3]))
  fi
done
echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$failed"
