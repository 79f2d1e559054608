#!/usr/bin/env bash
# A group that spans hosts, several members on each: transports per pair (shared memory
# inside a host, TCP across; the default, "mixed"; and the same with --failover, whose link
# can move a pair, "mixed+failover") against the same group over TCP alone (--transport
# tcp, "tcp"), interleaved for -r rounds.
# The two hosts are network namespaces with a /dev/shm each (tests/support/two_hosts.sh),
# N agents split between them, their traffic across the hosts over a veth pair and a
# bridge. Prints nccl-tests style rows per round and, per size, the medians of rank 0's
# time column and their ratios to TCP alone (< 1: faster), with the load average.
#
#   bench/hosts_mixed.sh [-n "4 8"] [-b 4096] [-e 16777216] [-f 4] [-i 40] [-r 5]
#                        [--tributary PATH] [--out FILE]
# Needs root (namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."

sizes_n="4"
begin=4096
end=16777216
factor=4
iters=40
rounds=5
bin=build/release/cli/tributary
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) sizes_n="$2"; shift 2 ;;
    -b) begin="$2"; shift 2 ;;
    -e) end="$2"; shift 2 ;;
    -f) factor="$2"; shift 2 ;;
    -i) iters="$2"; shift 2 ;;
    -r) rounds="$2"; shift 2 ;;
    --tributary) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "hosts_mixed.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "hosts_mixed.sh: no binary at $bin (build first)" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[[ $(id -u) -eq 0 ]] || { echo "hosts_mixed.sh: needs root (namespaces)" >&2; exit 2; }
source tests/support/two_hosts.sh

PIDS=()
CREATED=()
work=$(mktemp -d)
cleanup() {
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; done
  for ns in "${CREATED[@]:-}"; do [[ -n $ns ]] && ip netns del "$ns" 2>/dev/null || true; done
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT INT TERM
two_hosts_up "hb$$"
export TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')

# One run: N agents, half on each host, `bench` workload; rank 0's rows to stdout.
run() {
  local n=$1 flag=$2 i pids=()
  rm -f "$work/endpoint"
  on_switch "$bin" coordinator --bind "tcp://10.84.0.254:0" --world-size "$n" \
    --ready-file "$work/endpoint" >/dev/null 2>"$work/coordinator.err" &
  local coordinator=$!
  for ((i = 0; i < 200; i++)); do
    [[ -s $work/endpoint ]] && break
    sleep 0.05
  done
  for ((i = 0; i < n; i++)); do
    on_host $((i * 2 / n)) "$bin" agent --coordinator "$(cat "$work/endpoint")" \
      --host "host$((i * 2 / n))" --bind-host 0.0.0.0 --data-address "10.84.0.$((i * 2 / n + 1))" \
      --workload bench -b "$begin" -e "$end" -f "$factor" --iters "$iters" $flag \
      >"$work/agent$i.out" 2>"$work/agent$i.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do timeout 600 tail --pid="$pid" -f /dev/null || true; done
  kill "$coordinator" 2>/dev/null || true
  wait "$coordinator" 2>/dev/null || true
  # Rank 0 prints the table (the others print nothing but logs).
  cat "$work"/agent*.out | grep -v '^#' | awk 'NF >= 10'
}

raw=$(mktemp)
trap 'cleanup; rm -f "$raw"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= rounds; r++)); do
  for n in $sizes_n; do
    if ((r % 2)); then modes="mixed failover tcp"; else modes="tcp failover mixed"; fi
    for m in $modes; do
      flag=""
      [[ $m == tcp ]] && flag="--transport tcp"
      [[ $m == failover ]] && flag="--failover"
      run "$n" "$flag" | awk -v r="$r" -v n="$n" -v m="$m" '{ print r, n, m, $1, $5, $6, $9 }' >>"$raw"
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load before $load_before, after $load_after; iters $iters per size, $rounds rounds"
  echo
  echo "| N | size | algo (mixed / tcp) | mixed us | mixed+failover us | TCP alone us | mixed / TCP | mixed+failover / TCP | wrong |"
  echo "|---|---|---|---|---|---|---|---|---|"
  awk '
    function median(list,   a, k, c, t) {
      c = split(list, a, " ")
      for (k = 1; k <= c; k++) for (t = k + 1; t <= c; t++) if (a[t] < a[k]) { x = a[k]; a[k] = a[t]; a[t] = x }
      return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
    }
    function human(b) { return b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB" }
    { key = $2 " " $4; times[key, $3] = times[key, $3] " " $6; algo[key, $3] = $5; wrong[key] += $7; keys[key] = 1 }
    END {
      for (k in keys) {
        split(k, p, " ")
        mm = median(times[k, "mixed"]); mf = median(times[k, "failover"]); mt = median(times[k, "tcp"])
        printf "%d %d | %s | %s | %s / %s | %.1f | %.1f | %.1f | %.2f | %.2f | %d |\n", p[1], p[2], p[1], human(p[2]), algo[k, "mixed"], algo[k, "tcp"], mm, mf, mt, (mt > 0 ? mm / mt : 0), (mt > 0 ? mf / mt : 0), wrong[k]
      }
    }' "$raw" | sort -k1,1n -k2,2n | cut -d' ' -f3-
  echo
  echo "Raw rows (round, N, mode, bytes, algo, time us, wrong):"
  echo
  echo '```'
  cat "$raw"
  echo '```'
} | if [[ -n $out ]]; then tee "$out"; else cat; fi
