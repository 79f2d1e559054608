#!/usr/bin/env bash
# Installs the Debian 12 packages Tributary needs, when missing, by group:
#   scripts/deps.sh            everything: build, demo, tests, benchmarks (scripts/test.sh)
#   scripts/deps.sh demo       what building `tributary` and running the demo need
#                              (scripts/demo.sh): a much shorter first run
#   scripts/deps.sh demo ha    ... and etcd, for `demo --ha`
set -euo pipefail

# Configuring the tree and building the `tributary` binary; the demo's plot.
demo=(
  build-essential cmake ninja-build ccache pkg-config
  # the configure step reads the tests' CMake files too, which need GoogleTest
  libgtest-dev libgmock-dev
  libcli11-dev libasio-dev libzmq3-dev cppzmq-dev libzstd-dev zlib1g-dev libssl-dev
  # ISA-L: the data plane's CRC-32C
  libisal-dev
  protobuf-compiler libprotobuf-dev
  prometheus-cpp-dev
  # the replicated coordinators' etcd client: its JSON gateway over libcurl, JSON parsing
  libcurl4-openssl-dev nlohmann-json3-dev
  # the RDMA verbs transport (transport/rdma_*): built when libibverbs is found; rdma-core
  # brings ibv_devices / ibv_devinfo to see what a machine has
  libibverbs-dev rdma-core
  iproute2 procps python3
  # the demo's plot of loss and accuracy (cli/demo_plot.py), and a font to label it
  python3-matplotlib fonts-dejavu-core
)
# `demo --ha`, and the tests and `demo --ha` start their own etcd.
ha=(etcd-server)
# Tests, benchmarks and comparisons.
tests=(
  prometheus
  libgloo-dev openmpi-bin libopenmpi-dev iperf3
  # the TLS capture test (tests/tls) records a veth; the TLS unit tests make their
  # throwaway CA and certificates with the openssl command
  tcpdump openssl
  # fuzz targets (tests/fuzz): clang and libFuzzer's runtime; the project itself builds with GCC
  clang libclang-rt-dev
  # dashboards and plots: the console test's browser, Debian's python3 modules the test
  # and plot scripts import
  chromium python3-yaml
  # `tributary status --watch` is tested in a tmux pane
  tmux
  # the Python package and the torch.distributed backend: Debian's python3 headers and
  # pybind11; torch, numpy and pytest come from PyPI into .venv (scripts/python_env.sh, which
  # scripts/test.sh runs)
  python3-dev pybind11-dev
  # venvs from PyPI: the torch backend's (scripts/python_env.sh) and the Kubernetes
  # manifests' test (tests/deploy/make_venv.sh, run by ctest as the fixture deploy_venv)
  python3-venv
)

groups=("$@")
((${#groups[@]})) || groups=(demo ha tests)
packages=()
for g in "${groups[@]}"; do
  case $g in
    demo) packages+=("${demo[@]}") ;;
    ha) packages+=("${ha[@]}") ;;
    tests) packages+=("${demo[@]}" "${ha[@]}" "${tests[@]}") ;;
    *) echo "scripts/deps.sh: unknown group '$g' (demo, ha, tests; none: all)" >&2; exit 2 ;;
  esac
done

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
