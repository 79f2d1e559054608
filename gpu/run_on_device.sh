#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with build/gpu-carry carried (made
# here by gpu/carry.sh). Writes everything under $OUT: device.txt, gpu_test.log,
# gpu_bench.md, sanitizer.log. Arguments go to gpu_bench.
#   bash gpu/run_on_device.sh                 # tests, bench, memcheck on a subset
#   SKIP_TESTS=1 bash gpu/run_on_device.sh    # bench only
set -uo pipefail
out=${OUT:-/tmp/tributary-gpu-out}
mkdir -p "$out"
carry=build/gpu-carry
export LD_LIBRARY_PATH=$PWD/$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  date -u
  ldd "$carry/gpu_test"
} 2>&1 | tee "$out/device.txt"
test_rc=skipped
if [[ -z ${SKIP_TESTS:-} ]]; then
  "$carry/gpu_test" 2>&1 | tee "$out/gpu_test.log"
  test_rc=${PIPESTATUS[0]}
fi
"$carry/gpu_bench" "$@" 2>&1 | tee "$out/gpu_bench.md"
bench_rc=${PIPESTATUS[0]}
if [[ -z ${SKIP_TESTS:-} ]] && command -v compute-sanitizer >/dev/null; then
  timeout 300 compute-sanitizer --tool memcheck --leak-check full "$carry/gpu_test" \
    --gtest_filter='GpuQInt.MisalignedPointers*:GpuQInt.TinyBuckets*:GpuQInt.NonFinite*:GpuTopK.Ties*:GpuTopK.RejectsBad*:GpuReduce.AllHalf*:GpuStaging.*' \
    > "$out/sanitizer.log" 2>&1
  echo "compute-sanitizer rc=$? (tail of $out/sanitizer.log):"
  tail -5 "$out/sanitizer.log"
fi
echo "gpu_test rc=$test_rc gpu_bench rc=$bench_rc"
