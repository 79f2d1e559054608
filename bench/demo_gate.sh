#!/usr/bin/env bash
# The convergence gate run on the demo as shipped: `tributary demo` (a coordinator and 4
# worker processes over TCP) for every codec the CLI accepts, with its defaults, on IID and
# label-sorted shards, 5 seeds each; prints each run's test accuracy and, per codec and
# sharding, the mean and worst seed against float32 on the same seeds, with the gate of
# tests/compression/compressed_convergence_test.cc (mean >= float32's - 1 point and worst
# seed >= float32's worst - 1 point).
#
#   bench/demo_gate.sh [seed...]          default seeds: 11 12 13 14 15
#   env: BIN (build/release/cli/tributary), CODECS (space-separated specs), OUT (append the
#        Markdown table to this file)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
[[ -x $BIN ]] || { echo "demo_gate.sh: no tributary binary at $BIN" >&2; exit 1; }
SEEDS=("$@")
[[ ${#SEEDS[@]} -gt 0 ]] || SEEDS=(11 12 13 14 15)
CODECS=${CODECS:-float32 float16 bfloat16 qint8 qint4 sign topk powersgd topk:density=0.001}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

for shards in iid label-sorted; do
  flag=()
  [[ $shards == label-sorted ]] && flag=(--label-sorted)
  for codec in $CODECS; do
    for seed in "${SEEDS[@]}"; do
      out=$TMP/run.out
      if ! "$BIN" demo --no-faults --codec "$codec" --seed "$seed" "${flag[@]}" --print-every 1000 \
          --timeout-s 300 >"$out" 2>&1; then
        echo "demo_gate.sh: demo failed: --codec $codec --seed $seed $shards" >&2
        tail -20 "$out" >&2
        exit 1
      fi
      acc=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$out" | head -1)
      [[ -n $acc ]] || { echo "demo_gate.sh: no summary for $codec seed $seed" >&2; exit 1; }
      echo "$shards $codec $seed $acc" | tee -a "$TMP/runs"
    done
  done
done

{
  echo "demo as shipped (\`tributary demo\`, 4 workers), seeds ${SEEDS[*]}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| codec | shards | per seed | mean | worst | gate (vs float32) |"
  echo "|---|---|---|---:|---:|---|"
  awk '
    { key = $2 " " $1; acc[key] = acc[key] " " $4; sum[key] += $4; n[key]++
      if (!(key in worst) || $4 < worst[key]) worst[key] = $4
      if (!($1 in seen)) { seen[$1] = 1; shards[++ns] = $1 }
      if (!($2 in cseen)) { cseen[$2] = 1; codecs[++nc] = $2 } }
    END {
      for (s = 1; s <= ns; s++) {
        base = "float32 " shards[s]; bm = sum[base] / n[base]; bw = worst[base]
        for (c = 1; c <= nc; c++) {
          key = codecs[c] " " shards[s]; m = sum[key] / n[key]
          gate = (codecs[c] == "float32") ? "baseline" : ((m >= bm - 1 && worst[key] >= bw - 1) ? "pass" : "FAIL")
          printf "| `%s` | %s |%s | %.2f%% | %.2f%% | %s |\n", codecs[c], shards[s], acc[key], m, worst[key], gate
        }
      }
    }' "$TMP/runs"
} | if [[ -n "${OUT:-}" ]]; then tee -a "$OUT"; else cat; fi
