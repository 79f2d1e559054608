#!/usr/bin/env bash
# Installs the Debian 12 packages Tributary builds, tests and benchmarks with, when missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev
  libcli11-dev libasio-dev libzmq3-dev cppzmq-dev libzstd-dev zlib1g-dev libssl-dev
  # ISA-L: the data plane's CRC-32C
  libisal-dev
  protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev prometheus
  # replicated coordinators: etcd (the tests and `demo --ha` start their own), its JSON
  # gateway spoken over libcurl, JSON parsing
  etcd-server libcurl4-openssl-dev nlohmann-json3-dev
  libgloo-dev openmpi-bin libopenmpi-dev iperf3
  # the RDMA verbs transport (transport/rdma_*): built when libibverbs is found; rdma-core
  # brings ibv_devices / ibv_devinfo to see what a machine has
  libibverbs-dev rdma-core
  iproute2 procps python3
  # the TLS capture test (tests/tls) records a veth; the TLS unit tests make their
  # throwaway CA and certificates with the openssl command
  tcpdump openssl
  # fuzz targets (tests/fuzz): clang and libFuzzer's runtime; the project itself builds with GCC
  clang libclang-rt-dev
  # dashboards and plots: the console test's browser, Debian's python3 modules the test
  # and plot scripts import, a font for both to render text with
  chromium python3-yaml python3-matplotlib fonts-dejavu-core
  # the Python package and the torch.distributed backend: Debian's python3 with its headers
  # and venv module; torch, numpy and pytest come from PyPI into .venv
  # (scripts/python_env.sh, which scripts/test.sh runs)
  python3-dev python3-venv pybind11-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tributary: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
