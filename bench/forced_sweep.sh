#!/usr/bin/env bash
# Every all-reduce algorithm forced in turn beside the automatic choice, agents as
# processes (`tributary bench`), interleaved rounds: round r runs auto, ring, tree, double
# tree, halving-doubling and direct at each N before the next round starts, so the load of
# the machine falls on every algorithm alike; each round starts one further along that list
# (round 2 with ring, ...), since the first run after a change of N ran measurably slower at
# small sizes (the last run's processes still leaving). Prints one row per size and run:
#   transport round ranks algorithm bytes microseconds algorithm_run model_microseconds
# (algorithm_run: what auto picked, or the forced one). tests/algorithms/data/ keeps such a
# table for the cost model's choice test; bench/results/cost_model_*.md reads one.
#
#   bench/forced_sweep.sh [-t tcp|shm] [-n "2 4 8"] [-r rounds] [-b 4K] [-e 64M] [-i iters]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${TRIBUTARY_BIN:-$root/build/release/cli/tributary}
transport=tcp ranks="2 4 8" rounds=3 begin=4K end=64M iters=8
while getopts "t:n:r:b:e:i:" opt; do
  case $opt in
    t) transport=$OPTARG ;;
    n) ranks=$OPTARG ;;
    r) rounds=$OPTARG ;;
    b) begin=$OPTARG ;;
    e) end=$OPTARG ;;
    i) iters=$OPTARG ;;
    *) echo "usage: $0 [-t tcp|shm] [-n \"2 4 8\"] [-r rounds] [-b 4K] [-e 64M] [-i iters]" >&2
       exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "no $bin: build first (scripts/build.sh release)" >&2; exit 1; }
echo "# $(date -u +%FT%TZ) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); transport $transport"
for round in $(seq 1 "$rounds"); do
  for n in $ranks; do
    order=(auto ring tree double_tree halving_doubling direct)
    for k in "${!order[@]}"; do
      algorithm=${order[$(((k + round - 1) % ${#order[@]}))]}
      forced=()
      [[ $algorithm == auto ]] || forced=(--algorithm "$algorithm")
      # A run that fails or hangs costs its rows, not the sweep (the bench has its own
      # deadlines; the timeout is the last resort).
      timeout 600 "$bin" bench --np "$n" -b "$begin" -e "$end" -f 4 --iters "$iters" --warmup 2 \
        --transport "$transport" "${forced[@]}" 2>/dev/null |
        awk -v t="$transport" -v r="$round" -v n="$n" -v a="$algorithm" \
          '!/^#/ && NF >= 10 {print t, r, n, a, $1, $6, $5, $10}' || true
    done
  done
done
echo "# $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
