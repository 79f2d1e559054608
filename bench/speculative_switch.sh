#!/usr/bin/env bash
# Where small all-reduces should stop returning without the commit round
# (WorkerConfig::speculative_max_bytes, docs/fault-tolerance.md "Where the switch is"):
# all-reduce time with the round always (--speculative-max-bytes 0), with speculation at
# every size (--speculative-max-bytes 1G: a copy of the result instead of the round), and
# with no guarantee at all (--no-agreement, the floor), over loopback TCP.
# Each round runs the three modes back to back, in rotating order, so load drifts hit all;
# the table gives the median time over $ROUNDS rounds per (N, size) and the ratios.
#
#   bench/speculative_switch.sh   env: BIN (build/release/cli/tributary), ROUNDS (3),
#       NPS ("2 4 8"), SIZES ("-b 4096 -e 4194304 -f 4"), ITERS (50), WARMUP (10)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/cli/tributary}
ROUNDS=${ROUNDS:-3}
NPS=${NPS:-2 4 8}
SIZES=${SIZES:--b 4096 -e 4194304 -f 4}
ITERS=${ITERS:-50}
WARMUP=${WARMUP:-10}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

flags() {
  case $1 in
    round) echo "--speculative-max-bytes 0" ;;
    spec) echo "--speculative-max-bytes 1G" ;;
    none) echo "--no-agreement" ;;
  esac
}
order() {
  case $(($1 % 3)) in
    0) echo "round spec none" ;;
    1) echo "spec none round" ;;
    2) echo "none round spec" ;;
  esac
}

for ((r = 1; r <= ROUNDS; r++)); do
  for np in $NPS; do
    for mode in $(order "$r"); do
      # shellcheck disable=SC2046,SC2086
      timeout -k 5 600 "$BIN" bench --np "$np" --transport tcp $SIZES --iters "$ITERS" \
        --warmup "$WARMUP" $(flags "$mode") >"$WORK/${np}_${mode}_$r.txt" 2>"$WORK/${np}_${mode}_$r.err" ||
        { echo "bench --np $np ($mode) failed" >&2; tail -5 "$WORK/${np}_${mode}_$r.err" >&2; exit 1; }
    done
  done
done
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $ITERS iterations; commit $(git -C "$ROOT" rev-parse --short HEAD)"
python3 - "$WORK" <<'PY'
import glob, os, re, statistics, sys
rows = {}  # (np, size, mode) -> [(time_us, wrong)]
for f in glob.glob(os.path.join(sys.argv[1], "*.txt")):
    np, mode, _ = os.path.basename(f)[:-4].split("_")
    for line in open(f):
        m = re.match(r"^\s+(\d+)\s+\d+\s+\S+\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)", line)
        if m:
            rows.setdefault((int(np), int(m.group(1)), mode), []).append((float(m.group(2)), int(m.group(5))))
print("| N | size | round (us) | speculative (us) | no guarantee (us) | speculative/round | runs | #wrong |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for np, size in sorted({k[:2] for k in rows}):
    med = {m: statistics.median(x[0] for x in rows.get((np, size, m), [(float("nan"), 0)])) for m in ("round", "spec", "none")}
    wrong = sum(x[1] for m in ("round", "spec", "none") for x in rows.get((np, size, m), []))
    runs = "+".join(str(len(rows.get((np, size, m), []))) for m in ("round", "spec", "none"))
    unit = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
    print(f"| {np} | {unit} | {med['round']:.0f} | {med['spec']:.0f} | {med['none']:.0f} | {med['spec'] / med['round']:.2f} | {runs} | {wrong} |")
PY
