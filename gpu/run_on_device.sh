#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, with build/gpu-carry carried (made
# here by gpu/carry.sh). Writes everything under $OUT: device.txt, gpu_test.log,
# gpu_bench.md, sanitizer.log. Arguments go to gpu_bench. gpu/device_check.sh calls it with
# SKIP_BENCH=1 RACECHECK=1.
#   bash gpu/run_on_device.sh                 # tests, bench, memcheck on a subset
#   SKIP_TESTS=1 bash gpu/run_on_device.sh    # bench only
#   SKIP_BENCH=1 bash gpu/run_on_device.sh    # tests and memcheck only
#   RACECHECK=1 ...                           # racecheck on the same subset too
# SANITIZER_TIMEOUT (seconds, default 300) bounds each compute-sanitizer run.
set -uo pipefail
out=${OUT:-/tmp/tributary-gpu-out}
mkdir -p "$out"
carry=build/gpu-carry
source "$(dirname "$0")/carried_libs.sh"
carried_libs "$carry"
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
bench_rc=skipped
if [[ -z ${SKIP_BENCH:-} ]]; then
  "$carry/gpu_bench" "$@" 2>&1 | tee "$out/gpu_bench.md"
  bench_rc=${PIPESTATUS[0]}
fi
subset='GpuQInt.MisalignedPointers*:GpuQInt.TinyBuckets*:GpuQInt.NonFinite*:GpuTopK.Ties*:GpuTopK.RejectsBad*:GpuReduce.AllHalf*:GpuStaging.*'
if [[ -z ${SKIP_TESTS:-} ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "compute-sanitizer skipped: no GPU (nvidia-smi -L fails)" | tee "$out/sanitizer.log"
elif [[ -z ${SKIP_TESTS:-} ]] && command -v compute-sanitizer >/dev/null; then
  tools=(memcheck)
  [[ -n ${RACECHECK:-} ]] && tools+=(racecheck)
  : > "$out/sanitizer.log"
  for tool in "${tools[@]}"; do
    extra=()
    [[ $tool == memcheck ]] && extra=(--leak-check full)
    echo "=== compute-sanitizer --tool $tool" >> "$out/sanitizer.log"
    timeout "${SANITIZER_TIMEOUT:-300}" compute-sanitizer --tool "$tool" "${extra[@]}" \
      "$carry/gpu_test" --gtest_filter="$subset" >> "$out/sanitizer.log" 2>&1
    echo "compute-sanitizer $tool rc=$? (tail of $out/sanitizer.log):"
    tail -3 "$out/sanitizer.log"
  done
fi
echo "gpu_test rc=$test_rc gpu_bench rc=$bench_rc"
