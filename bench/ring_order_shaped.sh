#!/usr/bin/env bash
# The ring's order by measured bandwidth (docs/algorithms.md, "Ordering the ring"): two
# "hosts" in network namespaces on one bridge whose links are shaped to $RATE with tbf
# (bench/shaped_bridge.sh), two agents in each; agents in one namespace reach each other
# over loopback (unshaped). Each agent has its own host label (n0..n3, as containers
# have), so the coordinator's ranks interleave the namespaces (A B A B) and the rank-order
# ring crosses between them at every hop: each namespace's uplink carries two flows.
# Rows, each one launch of `tributary agent --workload bench --algorithm ring --transport
# tcp` (rank 0's table and the measured order):
#   measured      the default: every pair measured, the ring run in the measured order
#   rank order    --no-measure-links: the interleaved rank order
#   true labels   labels A/B that name the namespaces (the coordinator groups them),
#                 --no-measure-links: the grouped order, for reference
#
#   sudo bench/ring_order_shaped.sh      env: BIN (build/release/cli/tributary), RATE
#                                        (100mbit), SIZES ("-b 1048576 -e 16777216 -f 4"),
#                                        ITERS (3), REPS (1: interleaved repetitions)
set -euo pipefail

RATE=${RATE:-100mbit}
ITERS=${ITERS:-3}
REPS=${REPS:-1}
SIZES=${SIZES:--b 1048576 -e 16777216 -f 4}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
source "$ROOT/bench/shaped_bridge.sh"
PREFIX=tro$$
agents_bridge_up ring_order_shaped.sh "$PREFIX" 2 10.79.0 "$RATE" "$BIN"

# One launch: a coordinator and 4 agents, agent i in namespace i % 2 with host label
# $1$i (or $1 plus the namespace when $2 is "namespace"); rank 0's table.
launch() {
  local label=$1 labels=$2
  shift 2
  bridge_coordinator "$BIN" 4
  local agents=() i ns host
  for ((i = 0; i < 4; i++)); do
    ns=$((i % 2))
    if [[ $labels == namespace ]]; then host="ns$ns"; else host="n$i"; fi
    # One after another: with the namespace labels the ids (the tie-break) follow i.
    # shellcheck disable=SC2086
    ip netns exec "${PREFIX}_h$ns" timeout 900 "$BIN" agent --coordinator "$ENDPOINT" \
      --host "$host" --bind-host "10.79.0.$((ns + 1))" --transport tcp --workload bench \
      --algorithm ring $SIZES --iters "$ITERS" --warmup 1 --deadline-floor-ms 60000 \
      --timeout-ms 600000 "$@" >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
    agents+=($!)
    PIDS+=($!)
    sleep 0.3
  done
  local status=0
  for pid in "${agents[@]}"; do wait "$pid" || status=1; done
  kill "$COORDINATOR" 2>/dev/null || true
  wait "$COORDINATOR" 2>/dev/null || true
  echo "## $label"
  grep -h "ring order of view" "$WORK"/agent*.err | head -1 | sed 's/.*: ring order/ring order/' || true
  grep -h "slowest link" "$WORK"/agent*.err | head -1 | sed 's/.*: slowest/slowest/' || true
  if [[ $status -ne 0 ]]; then
    echo "FAILED"; tail -5 "$WORK"/agent*.err
  else
    grep -hE "^ +[0-9]+ " "$WORK"/agent*.out | sort -u -k1,1n | head -20
  fi
}

echo "# 2 namespaces x 2 agents, links shaped to $RATE (tbf), ring all-reduce, $ITERS timed iterations after 1 warm-up, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ((rep = 1; rep <= REPS; rep++)); do
  [[ $REPS -gt 1 ]] && echo "# repetition $rep"
  launch "measured (labels n0..n3: ranks interleave the namespaces)" own
  launch "rank order (labels n0..n3, --no-measure-links)" own --no-measure-links
  launch "true labels (ns0/ns1: grouped by the coordinator, --no-measure-links)" namespace --no-measure-links
done
