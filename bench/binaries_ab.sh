#!/usr/bin/env bash
# Two or more builds of `tributary` against each other: `tributary bench` with each binary
# in turn for -r rounds per group size, the order of the binaries rotated every round (so
# none always runs first, or right after another's load), and the medians of the time
# column per size with their ratios to the first binary (< 1: faster), plus the per-round
# ratios (this VM moves single cells by tens of percent: only what repeats counts).
# Prints the load average before and after, and the raw rows.
#
# Usage: bench/binaries_ab.sh [-t tcp] [-n "2 4 8"] [-b 65536] [-e 16777216] [-f 4]
#        [-i 30] [-r 5] NAME=PATH NAME=PATH [NAME=PATH ...]
#   e.g. bench/binaries_ab.sh -r 7 before=/tmp/tributary_main after=build/release/cli/tributary
set -euo pipefail

transport=tcp
sizes_n="2 4 8"
begin=65536
end=16777216
factor=4
iters=30
rounds=5
while [[ $# -gt 0 && $1 == -* ]]; do
  case "$1" in
    -t) transport="$2"; shift 2 ;;
    -n) sizes_n="$2"; shift 2 ;;
    -b) begin="$2"; shift 2 ;;
    -e) end="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -i) iters="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown flag $1" >&2; exit 2 ;;
  esac
done
if [[ $# -lt 2 ]]; then
  echo "give at least two NAME=PATH binaries" >&2
  exit 2
fi
names=()
paths=()
for arg in "$@"; do
  names+=("${arg%%=*}")
  paths+=("${arg#*=}")
  [[ -x ${arg#*=} ]] || { echo "not an executable: ${arg#*=}" >&2; exit 2; }
done

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
echo "load before: $(cat /proc/loadavg)"
k=${#names[@]}
for ((r = 1; r <= rounds; r++)); do
  for n in $sizes_n; do
    for ((j = 0; j < k; j++)); do
      m=$(((j + r) % k))
      timeout 600 "${paths[$m]}" bench --np "$n" -b "$begin" -e "$end" -f "$factor" \
        --iters "$iters" --transport "$transport" 2>/dev/null |
        awk -v r="$r" -v n="$n" -v m="${names[$m]}" '!/^#/ && NF > 5 {print r, n, m, $1, $5, $6, $9}' >>"$raw"
    done
  done
done
echo "load after: $(cat /proc/loadavg)"
echo
python3 - "$raw" "$(IFS=,; echo "${names[*]}")" <<'EOF'
import collections, statistics, sys
times = collections.defaultdict(list)
algo = {}
wrong = 0
for line in open(sys.argv[1]):
    r, n, m, s, a, t, w = line.split()
    times[(int(n), int(s), m)].append(float(t))
    algo.setdefault((int(n), int(s)), a)
    wrong += int(w)
names = sys.argv[2].split(",")
base = names[0]
size = lambda b: f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print("| N | size | algo | " + " | ".join(f"{m} µs" for m in names) + " | "
      + " | ".join(f"{m}/{base}" for m in names[1:]) + " | per-round " + ", ".join(names[1:]) + " |")
print("|---|---|---|" + "---|" * (2 * len(names)))
for (n, s) in sorted(algo):
    med = {m: statistics.median(times[(n, s, m)]) for m in names}
    rounds = "; ".join(" ".join(f"{x / y:.2f}" for x, y in zip(times[(n, s, m)], times[(n, s, base)]))
                       for m in names[1:])
    print(f"| {n} | {size(s)} | {algo[(n, s)]} | " + " | ".join(f"{med[m]:.1f}" for m in names)
          + " | " + " | ".join(f"{med[m] / med[base]:.2f}" for m in names[1:]) + f" | {rounds} |")
print(f"\nwrong elements over every run: {wrong}")
EOF
echo
echo "raw rows (round N binary bytes algo time_us wrong):"
cat "$raw"
