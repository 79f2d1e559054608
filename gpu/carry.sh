#!/usr/bin/env bash
# Builds here what a GPU machine runs but cannot build (it has no package registry), and puts
# it into build/gpu-carry (ignored by git; ~35 MB):
#  - gpu_test, gpu_bench (the kernels' tests and bench; the CUDA runtime is linked statically),
#    gpu_ipc_bench (the CUDA IPC all-reduce across processes, with its injected failure);
#  - libtributary_runtime.so (the agent runtime the Python extensions load) and the
#    `tributary` binary (the Python tests start a coordinator with it): gpu/device_check.sh
#    compiles the Python extensions there against them (gpu/device_build);
#  - lib/: a copy of every shared library these need beyond glibc and the compiler's runtime
#    (ZeroMQ, protobuf, OpenSSL, ISA-L, zstd, curl, prometheus-cpp and what they need); the
#    device scripts put on the library path only those the GPU machine lacks.
# Run on the device with gpu/device_check.sh (everything) or gpu/run_on_device.sh (kernels);
# docs/gpu.md has the calls.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TRIBUTARY_GPU_BUILD:-$root/build/gpu}
carry=$root/build/gpu-carry
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
ninja -C "$build" -j"${JOBS:-2}" gpu_test gpu_bench gpu_ipc_bench tributary_python_runtime tributary
rm -rf "$carry"
mkdir -p "$carry/lib"
cp "$build/tests/gpu/gpu_test" "$build/bench/gpu_bench" "$build/bench/gpu_ipc_bench" "$build/cli/tributary" \
   "$build/python/tributary/libtributary_runtime.so" "$carry/"
ldd "$carry/gpu_test" "$carry/gpu_bench" "$carry/gpu_ipc_bench" "$carry/tributary" "$carry/libtributary_runtime.so" |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$carry/lib/"; done
strip --strip-unneeded "$carry"/gpu_test "$carry"/gpu_bench "$carry"/gpu_ipc_bench "$carry"/tributary \
  "$carry"/libtributary_runtime.so 2>/dev/null || true
du -sh "$carry"
echo "carry: build/gpu-carry   command: bash gpu/device_check.sh (docs/gpu.md)"
