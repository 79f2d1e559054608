#!/usr/bin/env bash
# Issue 30's device run, in one call of at most 8 minutes on a GPU machine, from the
# repository root, with build/gpu-carry carried (gpu/carry.sh made it here). Steps, each
# bounded by what is left of the budget:
#   1. build the Python extensions against that machine's Python and torch (gpu/device_build:
#      tributary._tributary and the torch backend, on the carried runtime);
#   2. the CUDA tests of the torch backend (tests/python/test_cuda.py: every collective on
#      CUDA tensors, stream order, DDP on cuda:0 at world sizes 2 and 4 against the CPU job);
#   3. DDP step time, tributary vs gloo, the same CUDA job at world sizes 2 and 4
#      (gpu/ddp_step_time.py);
#   4. the CUDA IPC all-reduce across processes, 2 and 4 ranks on the one GPU, with an
#      injected IPC failure (bench/gpu_ipc_bench.cc);
#   5. gpu_test, compute-sanitizer memcheck and racecheck on a subset (gpu/run_on_device.sh).
# (The torch backend's checks first: the kernels have run_on_device.sh of their own.)
# Writes to $OUT (at most 8 files come back): summary.md (a table of the steps and the key
# lines), device.txt, build.log, gpu_test.log, sanitizer.log, test_cuda.log, ddp_step_time.md,
# gpu_ipc.md.
# Without a GPU (the rehearsal here) every step runs that can: the build, gpu_test (its tests
# skip), the CUDA tests (skipped, with their reason), the step-time script on CPU tensors.
#   OUT=/tmp/x TRIBUTARY_DEVICE_PYTHON=.venv/bin/python bash gpu/device_check.sh   # rehearsal
# Knobs: TRIBUTARY_DEVICE_PYTHON (default /opt/torch/.venv/bin/python3, else python3),
# BUDGET_S (default 470), JOBS (default: the cores).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=${OUT:-/tmp/tributary-device-check}
mkdir -p "$out"
carry=build/gpu-carry
python=${TRIBUTARY_DEVICE_PYTHON:-/opt/torch/.venv/bin/python3}
[[ -x $python ]] || python=$(command -v python3)
python=$(cd "$(dirname "$python")" && pwd)/$(basename "$python")  # absolute, links kept (a venv)
budget=${BUDGET_S:-470}
start=$SECONDS
jobs=${JOBS:-$(nproc)}
summary=$out/summary.md
rows=()

left() { echo $((budget - (SECONDS - start))); }
# bounded CAP NAME LOG CMD...: runs CMD with at most CAP seconds (or what is left, less 10),
# its output appended to LOG, and records a summary row.
bounded() {
  local cap=$1 name=$2 log=$3
  shift 3
  local limit t0 rc
  limit=$(left)
  limit=$((limit - 10))
  ((limit > cap)) && limit=$cap
  if ((limit < 15)); then
    rows+=("| $name | not run: the budget is spent | |")
    echo "### $name: not run, the budget is spent" | tee -a "$log"
    return 1
  fi
  t0=$SECONDS
  echo "### $name (at most ${limit} s): $*" >> "$log"
  timeout --kill-after=5 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  local verdict="rc=$rc"
  ((rc == 124 || rc == 137)) && verdict="timed out after ${limit} s"
  rows+=("| $name | $verdict | $((SECONDS - t0)) s |")
  echo "$name: $verdict ($((SECONDS - t0)) s)"
  return $rc
}

device_line=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
  head -1)
device_line=${device_line:-no GPU (no nvidia-smi)}
{
  echo "device: $device_line"
  echo "date: $(date -u)"
  echo "host: $(uname -srm)"
  echo "python: $python ($("$python" --version 2>&1))"
  "$python" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" 2>&1
  command -v nvcc >/dev/null && nvcc --version | tail -1
  cmake --version | head -1
  ninja --version
} > "$out/facts.tmp" 2>&1
cat "$out/facts.tmp"
have_gpu=$("$python" -c "import torch; print(int(torch.cuda.is_available()))" 2>/dev/null || echo 0)

if [[ ! -f $carry/libtributary_runtime.so ]]; then
  echo "missing $carry/libtributary_runtime.so: run gpu/carry.sh here and carry build/gpu-carry" |
    tee "$summary"
  exit 2
fi
source gpu/carried_libs.sh
carried_libs "$carry" | tee -a "$out/facts.tmp"

# 1. The Python extensions, against this machine's Python and torch.
build=build/device
bounded 200 "build the Python extensions (gpu/device_build)" "$out/build.log" \
  bash -c "cmake -S gpu/device_build -B $build -G Ninja -DPython3_EXECUTABLE=$python \
             \$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) &&
           ninja -C $build -j$jobs"
built=$?
tail -3 "$out/build.log"
export PYTHONPATH=$root/$build/python
export TRIBUTARY_BIN=$root/$carry/tributary

# 2. The torch backend's CUDA tests.
if ((built == 0)); then
  bounded 240 "CUDA tests of the torch backend (test_cuda.py)" "$out/test_cuda.log" \
    "$python" -B -m pytest -q -p no:cacheprovider -rfEs --basetemp="$root/$build/pytest" \
    tests/python/test_cuda.py
  tail -3 "$out/test_cuda.log"
else
  rows+=("| CUDA tests of the torch backend | not run: the build failed (build.log) | |")
fi

# 3. DDP step time, tributary vs gloo (on CPU tensors, small, when there is no GPU: a
# rehearsal of the script, not a measurement).
if ((built == 0)); then
  if ((have_gpu)); then
    ddp_args=(--device cuda:0 --worlds 2 4)
  else
    ddp_args=(--device cpu --worlds 2 --width 256 --warmup 1 --steps 3)
    echo "no GPU: DDP step time rehearsed on CPU tensors (not a measurement)" > "$out/ddp_step_time.md"
  fi
  bounded 120 "DDP step time, tributary vs gloo (gpu/ddp_step_time.py ${ddp_args[*]})" \
    "$out/ddp_step_time.log" "$python" gpu/ddp_step_time.py "${ddp_args[@]}" \
    --out "$out/ddp_step_time.table"
  [[ -f $out/ddp_step_time.table ]] && cat "$out/ddp_step_time.table" >> "$out/ddp_step_time.md"
  rm -f "$out/ddp_step_time.table"
fi

# 4. The CUDA IPC all-reduce across processes on the one GPU: busbw against the staged path
# and a device-to-device copy, every size checked exact, and an injected IPC failure
# mid-collective that must complete on the staged path (bench/gpu_ipc_bench.cc). Without a
# GPU the same protocol runs over shared host memory (a rehearsal, not a measurement).
if ((have_gpu)); then
  ipc_memory=cuda
  ipc_sizes=(-b 64K -e 256M -f 4 --rounds 3 --iters 3)
else
  ipc_memory=host
  ipc_sizes=(-b 4K -e 4M -f 16 --rounds 1 --iters 1)
fi
for n in 2 4; do
  bounded 60 "CUDA IPC all-reduce, $n ranks (gpu_ipc_bench --memory $ipc_memory)" "$out/gpu_ipc.log" \
    "$carry/gpu_ipc_bench" --memory "$ipc_memory" --ranks "$n" "${ipc_sizes[@]}" --timeout-s 50
done
{
  echo "# CUDA IPC all-reduce vs the staged path ($ipc_memory memory): $device_line"
  echo '```'
  grep -vE "^### " "$out/gpu_ipc.log"
  echo '```'
} > "$out/gpu_ipc.md"

# 5. Kernels: gpu_test, compute-sanitizer (memcheck, racecheck) on a subset.
bounded 200 "gpu_test + compute-sanitizer (gpu/run_on_device.sh)" "$out/run_on_device.log" \
  env OUT="$out" SKIP_BENCH=1 RACECHECK=1 SANITIZER_TIMEOUT=60 bash gpu/run_on_device.sh

# What comes back is at most 8 files: fold the step logs that have no file of their own into
# the summary's tail.
{
  echo "# Tributary device check, $(date -u +%F): $device_line"
  echo
  grep -E '^(torch|python)' "$out/facts.tmp"
  echo
  echo "| step | result | time |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "total $((SECONDS - start)) s of a ${budget} s budget"
  echo
  echo "## Key lines"
  echo '```'
  grep -hE "^\[  (PASSED|SKIPPED) \] [0-9]+ tests?|^\[  FAILED  \]|ERROR SUMMARY|compute-sanitizer .*(rc=|skipped)|gpu_test rc=" \
    "$out/gpu_test.log" "$out/sanitizer.log" "$out/run_on_device.log" 2>/dev/null |
    awk '!seen[$0]++' | head -30
  grep -hE "passed|failed|skipped|SKIPPED|FAILED|Error" "$out/test_cuda.log" 2>/dev/null | tail -15
  grep -hE "^# injected|a rank failed|WRONG|gpu_ipc_bench rank" "$out/gpu_ipc.log" 2>/dev/null | head -12
  echo '```'
  echo
  echo "## DDP step time"
  cat "$out/ddp_step_time.md" 2>/dev/null
  echo
  echo "## Tail of the step logs without a file of their own"
  echo '```'
  tail -8 "$out/run_on_device.log" 2>/dev/null
  grep -v "^|" "$out/ddp_step_time.log" 2>/dev/null | tail -8
  echo '```'
} > "$summary"
# device.txt: this script's facts, then run_on_device.sh's (nvidia-smi, ldd of gpu_test).
{
  cat "$out/facts.tmp"
  [[ -f $out/device.txt ]] && { echo; echo "--- gpu/run_on_device.sh:"; cat "$out/device.txt"; }
} > "$out/device.tmp"
mv "$out/device.tmp" "$out/device.txt"
rm -f "$out/facts.tmp" "$out/run_on_device.log" "$out/ddp_step_time.log" "$out/gpu_bench.md" \
  "$out/gpu_ipc.log"
cat "$summary"
ls "$out"
