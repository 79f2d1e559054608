#!/usr/bin/env bash
# What a kill -9 costs the survivors when the ring order is measured (docs/algorithms.md,
# "Ordering the ring"), for two builds side by side: 5 agents, each with its own host label
# (so every view of 4 or more is ordered by measured pair bandwidth), agent i in namespace
# i % 2 of a tbf-shaped bridge (bench/shaped_bridge.sh), `--workload soak` with a ring
# all-reduce per step. Once agent 4 has printed step $KILL_AT it is killed (kill -9); the
# survivors move to a view of 4. Each row: agent 0's longest step (the one the failure fell
# in: detection, the new view, its links, the probe, the ring order, the re-run) minus its
# median step, and the step's line.
#
#   sudo BEFORE=/path/to/old/tributary bench/ring_order_recovery.sh
#        env: BIN (build/release/cli/tributary), BEFORE (required), RATE (100mbit),
#             COUNT (65536 floats per step), STEPS (40), KILL_AT (20), REPS (5, interleaved)
set -euo pipefail

RATE=${RATE:-100mbit}
COUNT=${COUNT:-65536}
STEPS=${STEPS:-40}
KILL_AT=${KILL_AT:-20}
REPS=${REPS:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
BEFORE=${BEFORE:?set BEFORE to the tributary binary to compare with}
source "$ROOT/bench/shaped_bridge.sh"
PREFIX=trc$$
agents_bridge_up ring_order_recovery.sh "$PREFIX" 2 10.81.0 "$RATE" "$BIN" "$BEFORE"

# Each stdout line with the time it was read ($EPOCHREALTIME: no fork per line).
stamp() { while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done; }

run() {  # label binary
  local label=$1 bin=$2 i ns t
  rm -f "$WORK"/agent*
  bridge_coordinator "$bin" 5
  local agents=()
  for ((i = 0; i < 5; i++)); do
    ns=$((i % 2))
    (ip netns exec "${PREFIX}_h$ns" timeout 300 "$bin" agent --coordinator "$ENDPOINT" \
      --host "n$i" --bind-host "10.81.0.$((ns + 1))" --transport tcp --workload soak \
      --soak-count "$COUNT" --soak-steps "$STEPS" --algorithm ring \
      2>"$WORK/agent$i.err" | stamp >"$WORK/agent$i.out") &
    agents+=($!)
    PIDS+=($!)
    sleep 0.3
  done
  for ((t = 0; t < 3000; t++)); do
    grep -q "soak step $KILL_AT " "$WORK/agent4.out" 2>/dev/null && break
    sleep 0.01
  done
  pkill -9 -f -- "--host n4 " || echo "$label: no agent 4 to kill" >&2
  local failed=0
  for pid in "${agents[@]:0:4}"; do wait "$pid" || failed=1; done
  wait "${agents[4]}" 2>/dev/null || true
  kill "$COORDINATOR" 2>/dev/null || true
  wait "$COORDINATOR" 2>/dev/null || true
  if ((failed)); then
    echo "| $label | FAILED | | | |"
    tail -3 "$WORK"/agent0.err >&2
    return
  fi
  python3 - "$label" "$WORK/agent0.out" <<'PY'
import re, statistics, sys
label, path = sys.argv[1], sys.argv[2]
t = {}
for line in open(path):
    m = re.match(r'([\d.]+) soak step (\d+) view (\d+) .* attempts (\d+) .* (ok|WRONG)$', line)
    if m:
        t[int(m.group(2))] = (float(m.group(1)), m.group(3), m.group(4), m.group(5))
steps = sorted(t)
deltas = {s: t[s][0] - t[s - 1][0] for s in steps if s - 1 in t}
k = max(deltas, key=deltas.get)
med = statistics.median(deltas.values())
wrong = sum(1 for s in steps if t[s][3] != 'ok')
print(f"| {label} | {(deltas[k] - med) * 1e3:.0f} | {med * 1e3:.0f} | step {k}: view {t[k][1]}, "
      f"attempts {t[k][2]} | {len(steps)} steps, {wrong} WRONG |")
PY
}

echo "# 5 agents (labels n0..n4) in 2 namespaces, links shaped to $RATE (tbf), soak of $COUNT floats, ring; agent 4 killed after step $KILL_AT; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| build | extra ms (longest step - median) | median step ms | longest step | agent 0 |"
echo "| --- | ---: | ---: | --- | --- |"
for ((rep = 1; rep <= REPS; rep++)); do
  run "before" "$BEFORE"
  run "after" "$BIN"
done
