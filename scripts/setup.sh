#!/usr/bin/env bash
# Installs every Debian package that the build, the tests, the benchmarks and the demo need,
# plus any package named as an argument (scripts/flake-hunt.sh adds stress-ng).
# Idempotent: when everything is already installed it checks with dpkg and returns in well
# under a second, without touching the network.
set -euo pipefail

# What building the server and the CLI needs (tests and benchmarks off): `setup.sh --build`
# installs only these (deploy/Dockerfile's build stage).
BUILD_PACKAGES=(
  build-essential cmake ninja-build pkg-config ca-certificates lld
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev librocksdb-dev libssl-dev
  prometheus-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcmph-dev libnats-dev
  zlib1g-dev libjemalloc-dev libdragonbox-dev
)
if [ "${1:-}" = "--build" ]; then
  shift
  PACKAGES=("${BUILD_PACKAGES[@]}" "$@")
else
PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  clang git
  # libFuzzer and clang's sanitizer runtimes (scripts/fuzz.sh): only recommended by clang
  libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-grpcio python3-protobuf python3-grpc-tools python3-cryptography
  prometheus python3-yaml
  nats-server
  # the deployment checks: the Kubernetes API models (schema of every rendered object), the
  # compose file's validator, and pip to install the Python client package from its directory
  python3-kubernetes docker-compose python3-pip python3-setuptools python3-wheel
  python3-venv
  # the experiment protocol's plots (bench/experiments/plot.py)
  python3-matplotlib
  "$@"
)
# kubectl renders the kustomize overlays (`kubectl kustomize`). Debian's is the package
# kubernetes-client; a machine that has a kubectl from another source keeps it (the overlays
# are written for both the kustomize of Debian's kubectl 1.20 and current ones).
if ! command -v kubectl > /dev/null 2>&1; then PACKAGES+=(kubernetes-client); fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# The prometheus package (promtool and prometheus, for the deploy tests, which start their own
# Prometheus) and the nats-server package (the cluster tests start their own NATS servers)
# start their daemons when installed, through an init script or a systemd unit. While apt-get
# runs, a policy-rc.d that denies every start is in place (unless one exists already, as in
# Debian's container images); on a host run by systemd the units are then disabled, so they do
# not start at boot either.
daemons=()
for d in prometheus nats-server; do
  if [[ " ${missing[*]} " == *" $d "* ]]; then daemons+=("$d"); fi
done
policy=/usr/sbin/policy-rc.d
if [ ${#daemons[@]} -gt 0 ] && [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/setup.sh: no service starts while packages install\nexit 101\n' \
    | $SUDO tee "$policy" > /dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi

$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if [ ${#daemons[@]} -gt 0 ] && [ -d /run/systemd/system ]; then
  for d in "${daemons[@]}"; do
    $SUDO systemctl disable --now "$d.service" > /dev/null 2>&1 || true
  done
fi
echo "setup: done"
