#!/usr/bin/env bash
# The agent's automatic all-reduce algorithm against every forced one, between "hosts" in
# network namespaces whose links are shaped to $RATE with tbf (as bench/shaped_link.sh):
# real `tributary agent --workload bench` processes and a coordinator, one agent per host.
# Rows: auto with the cost model fitted to the measured links (the default), auto with the
# default constants (--no-measure-links), then each algorithm forced. Each configuration is
# one launch; the agents' own table (rank 0's) is printed, with the measured link line.
#
#   sudo bench/shaped_agents.sh [N=4]    env: BIN (build/release/cli/tributary), RATE
#                                         (100mbit), SIZES ("-b 4096 -e 16777216 -f 16"),
#                                         ITERS (3), ALGORITHMS (ring tree double_tree
#                                         halving_doubling), EXTRA_FLAGS (given to every
#                                         agent, e.g. "--tls all"), ROWS (all; "auto": the
#                                         first row only)
set -euo pipefail

N=${1:-4}
RATE=${RATE:-100mbit}
ITERS=${ITERS:-3}
SIZES=${SIZES:--b 4096 -e 16777216 -f 16}
ALGORITHMS=${ALGORITHMS:-ring tree double_tree halving_doubling}
EXTRA_FLAGS=${EXTRA_FLAGS:-}
ROWS=${ROWS:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
source "$ROOT/bench/shaped_bridge.sh"
PREFIX=tsa$$
agents_bridge_up shaped_agents.sh "$PREFIX" "$N" 10.78.0 "$RATE" "$BIN"

# One launch: a coordinator and N agents with the given extra flags; rank 0's table.
launch() {
  local label=$1
  shift
  bridge_coordinator "$BIN" "$N"
  local agents=()
  for ((i = 0; i < N; i++)); do
    # shellcheck disable=SC2086
    ip netns exec "${PREFIX}_h$i" timeout 900 "$BIN" agent --coordinator "$ENDPOINT" \
      --host "h$i" --bind-host "10.78.0.$((i + 1))" --transport tcp --workload bench \
      $SIZES --iters "$ITERS" --warmup 1 --deadline-floor-ms 60000 --timeout-ms 600000 $EXTRA_FLAGS "$@" \
      >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
    agents+=($!)
    PIDS+=($!)
  done
  local status=0
  for pid in "${agents[@]}"; do wait "$pid" || status=1; done
  kill "$COORDINATOR" 2>/dev/null || true
  wait "$COORDINATOR" 2>/dev/null || true
  echo "## $label"
  grep -h "slowest link" "$WORK/agent0.err" | head -1 | sed 's/.*: slowest/slowest/' || true
  if [[ $status -ne 0 ]]; then
    echo "FAILED"; tail -5 "$WORK"/agent*.err
  else
    grep -hE "^ +[0-9]+ " "$WORK"/agent*.out | sort -u -k1,1n | head -20
  fi
}

echo "# $N agents, links shaped to $RATE (tbf), $ITERS timed iterations after 1 warm-up, load $(cut -d' ' -f1-3 /proc/loadavg)"
launch "auto (cost model fitted to the measured links)"
[[ $ROWS == auto ]] && exit 0
launch "auto (default constants, --no-measure-links)" --no-measure-links
for a in $ALGORITHMS; do launch "$a (forced)" --algorithm "$a"; done
