#!/usr/bin/env bash
# Builds the GPU test and bench binaries here and puts what a GPU machine needs into
# build/gpu-carry (ignored by git, ~10 MB): gpu_test, gpu_bench and a copy of every shared
# library they need beyond glibc and the compiler's runtime (libzstd, and libisal when core's
# CRC-32C is linked in; the CUDA runtime is linked statically). Run on the device with gpu/run_on_device.sh; docs/gpu.md has the call.
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
ldd "$carry/gpu_test" "$carry/gpu_bench" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$carry/lib/"; done
du -sh "$carry"
echo "carry: build/gpu-carry   command: bash gpu/run_on_device.sh"
