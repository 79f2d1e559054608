#!/usr/bin/env bash
# What the failover link costs when nothing fails: `tributary bench` with and without
# --failover, interleaved (plain, failover, plain, ...) for -r rounds per transport and
# group size, and the ratio of the medians of the time column per size (> 1: failover
# slower). Prints the load average before and after; nccl-tests style rows per round in
# the raw section.
#
# With --before PATH (another build's binary), its --failover runs interleave too, for a
# before/after of the protocol on the same machine and load.
#
# Usage: bench/failover_cost.sh [-t "tcp shm"] [-n "2 4"] [-b 4096] [-e 16777216] [-f 16]
#        [-i 20] [-r 3] [--tributary PATH] [--before PATH] [--out FILE]
set -euo pipefail

transports="tcp shm"
sizes_n="2 4"
begin=4096
end=16777216
factor=16
iters=20
rounds=3
bin=build/release/cli/tributary
before=""
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -t) transports="$2"; shift 2 ;;
    -n) sizes_n="$2"; shift 2 ;;
    -b) begin="$2"; shift 2 ;;
    -e) end="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -i) iters="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    --tributary) bin="$2"; shift 2 ;;
    --before) before="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "failover_cost.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$bin" ]] || { echo "failover_cost.sh: no binary at $bin (build first)" >&2; exit 2; }

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
  for t in $transports; do
    for n in $sizes_n; do
      # Alternate which mode goes first, so neither always runs on a warmer machine.
      if ((r % 2)); then modes="plain failover"; else modes="failover plain"; fi
      [[ -n $before ]] && modes="$modes before"
      for m in $modes; do
        flag="--failover"
        run=$bin
        [[ $m == plain ]] && flag="--no-failover"
        [[ $m == before ]] && run=$before
        timeout 600 "$run" bench --np "$n" -b "$begin" -e "$end" -f "$factor" --iters "$iters" \
          --transport "$t" $flag 2>/dev/null |
          awk -v r="$r" -v t="$t" -v n="$n" -v m="$m" \
            '!/^#/ && NF >= 10 { print r, t, n, m, $1, $5, $6, $9 }' >>"$raw"
      done
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

report() {
  echo "# failover on vs off: \`tributary bench\` time per all-reduce, medians of $rounds interleaved rounds"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load before $load_before, after $load_after;" \
    "iters $iters per size"
  echo
  if [[ -n $before ]]; then
    echo "| transport | N | size | algo | plain us | failover us | ratio | before: failover us | ratio | wrong |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
  else
    echo "| transport | N | size | algo | plain us | failover us | ratio | wrong |"
    echo "|---|---|---|---|---|---|---|---|"
  fi
  python3 - "$raw" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r, t, n, m, size, algo, us, wrong = line.split()
    key = (t, int(n), int(size))
    d = rows.setdefault(key, {"plain": [], "failover": [], "before": [], "algo": algo, "wrong": 0})
    d[m].append(float(us))
    d["wrong"] += int(wrong)
for (t, n, size), d in sorted(rows.items()):
    if not d["plain"] or not d["failover"]:
        continue
    p, f = statistics.median(d["plain"]), statistics.median(d["failover"])
    name = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
    extra = ""
    if d["before"]:
        b = statistics.median(d["before"])
        extra = f" {b:.1f} | {b / p:.2f} |"
    print(f"| {t} | {n} | {name} | {d['algo']} | {p:.1f} | {f:.1f} | {f / p:.2f} |{extra} {d['wrong']} |")
EOF
  echo
  echo "Raw (round transport N mode size algo time_us wrong):"
  echo
  echo '```'
  cat "$raw"
  echo '```'
}
if [[ -n "$out" ]]; then report | tee "$out"; else report; fi
