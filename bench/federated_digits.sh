#!/usr/bin/env bash
# Federated averaging of the demo's digits MLP (cli/federated_workload.h) with every member
# on time against runs where a share of the members, drawn at random each round, misses
# the round's deadline: `tributary demo --federated` (a coordinator and N agent processes
# on this machine), seeds interleaved. Prints one row per run and the median accuracy of
# each setting.
#
#   bench/federated_digits.sh     env: BIN (build/release/cli/tributary), N (8),
#                                 SEEDS ("1 2 3"), LATE ("0 0.25"), ROUNDS (40),
#                                 DEADLINE_MS (300)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
N=${N:-8}
SEEDS=${SEEDS:-1 2 3}
LATE=${LATE:-0 0.25}
ROUNDS=${ROUNDS:-40}
DEADLINE_MS=${DEADLINE_MS:-300}
[[ -x $BIN ]] || { echo "federated_digits.sh: no tributary binary at $BIN" >&2; exit 1; }

LOG=$(mktemp -d)
trap 'rm -rf "$LOG"' EXIT
declare -A ACC
printf '%5s %6s %9s %9s %11s %8s\n' seed late accuracy seconds late_rounds agree
for seed in $SEEDS; do
  for late in $LATE; do
    out=$LOG/run_${seed}_${late}.txt
    if ! "$BIN" demo --federated --workers "$N" --rounds "$ROUNDS" --seed "$seed" \
        --late-fraction "$late" --round-deadline-ms "$DEADLINE_MS" --timeout-s 600 \
        >"$out" 2>&1; then
      echo "federated_digits.sh: seed $seed late $late failed:" >&2
      tail -20 "$out" >&2
      exit 1
    fi
    summary=$(grep '^summary: ' "$out")
    acc=$(sed -E 's/.*test accuracy ([0-9.]+)%.*/\1/' <<<"$summary")
    secs=$(sed -E 's/.* in ([0-9.]+) s,.*/\1/' <<<"$summary")
    late_rounds=$(grep '^final: params sha256' "$out" | sed -E 's/.* late ([0-9]+)$/\1/' |
                  awk '{s += $1} END {print s}')
    agree=$(grep -c 'hold bitwise-identical parameters' "$out" || true)
    printf '%5s %6s %8s%% %9s %11s %8s\n' "$seed" "$late" "$acc" "$secs" "$late_rounds" \
      "$([[ $agree == 1 ]] && echo yes || echo NO)"
    ACC[$late]+="$acc "
  done
done
echo
printf '%6s %16s\n' late median_accuracy
for late in $LATE; do
  median=$(tr ' ' '\n' <<<"${ACC[$late]}" | grep -v '^$' | sort -n |
           awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  printf '%6s %15s%%\n' "$late" "$median"
done
