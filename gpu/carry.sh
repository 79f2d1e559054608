#!/usr/bin/env bash
# Builds the GPU test and bench binaries here and puts what a GPU machine needs into
# build/gpu-carry (ignored by git, ~10 MB): gpu_test, gpu_bench and a copy of libzstd
# (the only shared library they need beyond libc, libm and libstdc++; the CUDA runtime is
# linked statically). Run on the device with gpu/run_on_device.sh; docs/gpu.md has the call.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRIBUTARY_GPU_BUILD:-$root/build/gpu}
carry=$root/build/gpu-carry
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
ninja -C "$build" -j"${JOBS:-2}" gpu_test gpu_bench
rm -rf "$carry"
mkdir -p "$carry/lib"
cp "$build/tests/gpu/gpu_test" "$build/bench/gpu_bench" "$carry/"
zstd_lib=$(ldd "$carry/gpu_test" | awk '/libzstd/ {print $3}')
if [[ -n $zstd_lib ]]; then cp -L "$zstd_lib" "$carry/lib/"; fi
du -sh "$carry"
echo "carry: build/gpu-carry   command: bash gpu/run_on_device.sh"
