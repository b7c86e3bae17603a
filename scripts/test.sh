#!/usr/bin/env bash
# The test command: installs what it needs, builds everything (Release) and runs every test with
# ctest, then builds the core with AddressSanitizer + UBSan and runs its unit tests again.
#   scripts/test.sh              # both passes
#   SKIP_SANITIZE=1 scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

jobs=$(nproc)
build=${BUILD_DIR:-build}
echo "== build ($build, Release)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTREAMLEARN_BUILD_TESTS=ON \
  -DSTREAMLEARN_BUILD_BENCH=ON > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j "$jobs"

echo "== tests"
ctest --test-dir "$build" --output-on-failure -j "$jobs"

if [ -z "${SKIP_SANITIZE:-}" ]; then
  echo "== core unit tests under AddressSanitizer + UBSan"
  san=${build}-asan
  cmake -S . -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSTREAMLEARN_CORE_ONLY=ON \
    -DSTREAMLEARN_SANITIZE=ON -DSTREAMLEARN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_DEBUG="-g -O1" \
    > "$san.configure.log" 2>&1 \
    || { cat "$san.configure.log"; exit 1; }
  cmake --build "$san" -j "$jobs"
  ctest --test-dir "$san" --output-on-failure -j "$jobs"
fi
