#!/usr/bin/env bash
# What TLS on data links costs (--tls all against --tls off), all-reduce busbw:
#   loopback: `tributary bench --np N --transport tcp` for N in $NPS, sizes $SIZES;
#   shaped (root): bench/shaped_agents.sh (agents in network namespaces, links tbf-shaped to
#     $RATE), the automatic algorithm's row, 2 agents.
# Each round runs both modes back to back, in alternating order, so load drifts hit both;
# the table gives the median busbw over $ROUNDS rounds per (N, size) and the ratio.
#
#   bench/tls_cost.sh [loopback|shaped|both]   env: BIN (build/release/cli/tributary),
#       ROUNDS (3), NPS ("2 4"), SIZES ("-b 4096 -e 67108864 -f 4"), ITERS (5),
#       SHAPED_SIZES ("-b 4096 -e 16777216 -f 16"), RATE (100mbit)
set -euo pipefail
WHAT=${1:-both}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
ROUNDS=${ROUNDS:-3}
NPS=${NPS:-2 4}
SIZES=${SIZES:--b 4096 -e 67108864 -f 4}
ITERS=${ITERS:-5}
SHAPED_SIZES=${SHAPED_SIZES:--b 4096 -e 16777216 -f 16}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

order() { if (($1 % 2)); then echo "all off"; else echo "off all"; fi; }

if [[ $WHAT == loopback || $WHAT == both ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for np in $NPS; do
      for tls in $(order "$r"); do
        # shellcheck disable=SC2086
        "$BIN" bench --np "$np" --transport tcp $SIZES --iters "$ITERS" --warmup 1 --tls "$tls" \
          >"$WORK/loopback_${np}_${tls}_$r.txt" 2>"$WORK/loopback_${np}_${tls}_$r.err" ||
          { echo "bench --np $np --tls $tls failed" >&2; tail -5 "$WORK/loopback_${np}_${tls}_$r.err" >&2; exit 1; }
      done
    done
  done
fi
if [[ $WHAT == shaped || $WHAT == both ]]; then
  for ((r = 1; r <= ROUNDS; r++)); do
    for tls in $(order "$r"); do
      BIN=$BIN SIZES=$SHAPED_SIZES ROWS=auto EXTRA_FLAGS="--tls $tls" \
        bash "$ROOT/bench/shaped_agents.sh" 2 >"$WORK/shaped_2_${tls}_$r.txt" 2>&1 ||
        { echo "shaped --tls $tls failed" >&2; tail -5 "$WORK/shaped_2_${tls}_$r.txt" >&2; exit 1; }
    done
  done
fi
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds; commit $(git -C "$ROOT" rev-parse --short HEAD)"
python3 - "$WORK" <<'PY'
import glob, os, re, statistics, sys
rows = {}  # (where, np, size, tls) -> [busbw]
for f in glob.glob(os.path.join(sys.argv[1], "*.txt")):
    where, np, tls, _ = os.path.basename(f)[:-4].split("_")
    for line in open(f):
        m = re.match(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)", line)
        if m:
            rows.setdefault((where, int(np), int(m.group(1)), tls), []).append(
                (float(m.group(4)), float(m.group(2)), int(m.group(5))))
keys = sorted({k[:3] for k in rows})
print("| link | N | size | busbw off (GB/s) | busbw TLS (GB/s) | TLS/off | time off (us) | time TLS (us) | runs | #wrong |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for where, np, size in keys:
    off = rows.get((where, np, size, "off"), [])
    on = rows.get((where, np, size, "all"), [])
    if not off or not on:
        continue
    bo = statistics.median(x[0] for x in off)
    bt = statistics.median(x[0] for x in on)
    to = statistics.median(x[1] for x in off)
    tt = statistics.median(x[1] for x in on)
    wrong = sum(x[2] for x in off + on)
    unit = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
    ratio = f"{bt / bo:.2f}" if bo > 0 else "-"
    print(f"| {where} | {np} | {unit} | {bo:.3f} | {bt:.3f} | {ratio} | {to:.0f} | {tt:.0f} | {len(off)}+{len(on)} | {wrong} |")
PY
