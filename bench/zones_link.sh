#!/usr/bin/env bash
# Flat vs hierarchical all-reduce across zones joined by one shaped link.
#
#   sudo bench/zones_link.sh [ZONE SIZES="3 3"] [MiB=64]
#   env: BIN (build/release/bench/compressed_allreduce_bench), RATE (100mbit), ITERS (3),
#        ROWS (float32@ring,float32@hierarchical,float32@hierarchical+qint8), OUT (a
#        Markdown file to append the table to)
#
# Topology (bench/zones_topology.sh): each zone a bridge, unshaped; the zones joined
# through a router namespace, each zone's uplink shaped to RATE both ways with tbf. One
# compressed_allreduce_bench rank per host namespace over real TCP, --zones giving each its
# zone. Each row is its own launch, so the router's counters (bytes it sent into each zone)
# before and after give the bytes that crossed zones per all-reduce (all runs: warm-up,
# timed, and the bench's barriers and checks, which are a few KiB).
#
# The floor is the bytes that must cross divided by the rate: the uncompressed vector once
# each way for hierarchical (64 MiB), 2(n-1)/n of it for the flat ring, the qint8 payload
# (1 byte per element plus a 4-byte scale per 512) for hierarchical+qint8.
set -euo pipefail

SIZES=${1:-3 3}
MIB=${2:-64}
RATE=${RATE:-100mbit}
ITERS=${ITERS:-3}
ROWS=${ROWS:-float32@ring,float32@hierarchical,float32@hierarchical+qint8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/build/release/bench/compressed_allreduce_bench}
[[ -x $BIN ]] || { echo "zones_link.sh: no bench binary at $BIN (build compressed_allreduce_bench)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "zones_link.sh: needs root (ip netns, tc)" >&2; exit 1; }
source "$ROOT/bench/zones_topology.sh"
source "$ROOT/bench/netns_ranks.sh"

PREFIX=tz$$
RDV=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill "$pid" 2>/dev/null || true; done
  zones_down
  rm -rf "$RDV"
}
trap cleanup EXIT INT TERM

zones_up "$PREFIX" "$SIZES" "$RATE"
N=${#ZONES_HOSTS[@]}
Z=$(wc -w <<<"$SIZES")
ZLIST=$(IFS=,; echo "${ZONES_OF[*]}")
RUNS=$((ITERS + 1))

crossed() {
  local total=0 z
  for ((z = 0; z < Z; z++)); do total=$((total + $(zones_tx_bytes "$z"))); done
  echo "$total"
}

RESULTS=()
IFS=, read -ra ROW_LIST <<<"$ROWS"
for row in "${ROW_LIST[@]}"; do
  rm -rf "$RDV"/* "$RDV"/.r* 2>/dev/null || true
  before=$(crossed)
  netns_ranks "zones_link.sh ($row)" "$BIN" "$RDV" ZONES_HOSTS ZONES_ADDRS \
    --mib "$MIB" --iters "$ITERS" --codecs "$row" --zones "$ZLIST"
  after=$(crossed)
  line=$(grep '^| ' "$RDV/rank0.out" | tail -1)
  RESULTS+=("$row|$((after - before))|$line")
done

python3 - "$MIB" "$N" "$Z" "$RATE" "$RUNS" "$SIZES" "$(cut -d' ' -f1-3 /proc/loadavg)" "${RESULTS[@]}" <<'PY' | if [[ -n "${OUT:-}" ]]; then tee -a "$OUT"; else cat; fi
import re, sys
mib, n, z, rate, runs, sizes, load = sys.argv[1:8]
mib, n, z, runs = float(mib), int(n), int(z), int(runs)
m = re.match(r"([\d.]+)\s*([kmg]?)bit", rate.lower())
bps = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
vec = mib * 1024 * 1024
shards = min(int(s) for s in sizes.split())
def must_cross(row):  # bytes each way across one zone boundary (2 zones)
    if "+qint8" in row:
        elems = vec / 4
        return elems + 4 * elems / 512 + 24 * shards
    if "@hierarchical" in row:
        return vec * 2 * (z - 1) / z
    return vec * 2 * (n - 1) / n
print(f"zones {sizes} ({n} ranks), {mib:.0f} MiB float32 all-reduce (avg), each zone's uplink "
      f"shaped to {rate} both ways (tbf burst 32kbit latency 400ms), {runs - 1} timed runs after "
      f"1 warm-up, load average {load}")
print()
print("| row | time (s) | floor (s) | time / floor | speed-up vs flat ring | crossed zones per "
      "all-reduce, measured (MiB) | must cross (MiB) | #wrong | rel. L2 error |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
flat = None
for r in sys.argv[8:]:
    row, crossed, line = r.split("|", 2)
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    t = float(cells[3]); wrong = cells[7]; err = cells[8]
    if "@ring" in row and flat is None: flat = t
    per_dir = must_cross(row)
    floor = per_dir * 8 / bps
    measured = int(crossed) / runs / 1048576
    print(f"| {row} | {t:.3f} | {floor:.3f} | {t / floor:.2f} | "
          f"{(flat / t) if flat else float('nan'):.2f}x | {measured:.1f} | "
          f"{2 * per_dir * (z - 1) / 1048576:.1f} | {wrong} | {err} |")
PY
