#!/usr/bin/env bash
# Where an all-reduce's CPU time goes: `perf record` (timer sampling: this machine has no
# hardware counters) over `tributary bench` for each (transport, N, size), every rank's
# samples summed, sorted into what they were doing:
#   copy       memmove/memcpy in user space (ring copies in and out, staging)
#   reduce     the reduction kernels (core/reduce.h)
#   crc        CRC-32C of the frames (ISA-L)
#   kernel-io  the kernel moving socket bytes (TCP/IP, copies to and from user)
#   wait       sleeping, yielding, polling, waking (poll, futex, sched_yield, eventfd)
#   faults     page faults and mapping (first touch of buffers and rings)
#   runtime    the rest of Tributary's own code (links, algorithms, bookkeeping)
#   other      everything else (startup, the check pass, libc)
# Shares are of all samples of the run, so a column that grows when another shrinks is
# that share taking over the time. Startup and the bench's check pass are in `other`; long
# runs (--iters) make them small.
#
#   bench/profile_allreduce.sh [-t "shm tcp"] [-n "2 4 8"] [-s "1M 16M"] [-i ITERS] [-o OUT.md]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${TRIBUTARY_BIN:-$ROOT/build/release/cli/tributary}
TRANSPORTS="shm tcp"
NPS="2 4 8"
SIZES="1M 16M"
ITERS=""
OUT=""
while getopts "t:n:s:i:o:" opt; do
  case $opt in
    t) TRANSPORTS=$OPTARG ;;
    n) NPS=$OPTARG ;;
    s) SIZES=$OPTARG ;;
    i) ITERS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    *) sed -n '2,17p' "$0" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "profile_allreduce.sh: needs perf (linux-perf)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

bytes() {
  local v=$1
  case $v in
    *K) echo $((${v%K} << 10)) ;; *M) echo $((${v%M} << 20)) ;; *) echo "$v" ;;
  esac
}

classify() {  # perf report lines "pct dso symbol" -> "category pct"
  awk '
    {
      pct = $1; sub("%", "", pct); dso = $2; sym = ""
      for (i = 4; i <= NF; ++i) sym = sym " " $i
      c = "other"
      if (sym ~ /mem(move|cpy|set)/ && dso ~ /libc/) c = "copy"
      else if (sym ~ /(to|into)_[a-z]+_(f|i|u|bf|f16)[0-9]*|reduce_to|reduce_into/) c = "reduce"
      else if (sym ~ /crc32|crc_|isal/ || dso ~ /isal/) c = "crc"
      else if (dso ~ /kernel/ && sym ~ /tcp_|skb|sock|copy_user|copy_to_user|copy_from_user|_copy_|ip_|inet_|loopback|net_rx|__netif|dev_|csum|rep_movs/) c = "kernel-io"
      else if (sym ~ /poll|futex|sched_yield|schedule|finish_task_switch|eventfd|pause|nanosleep|wake_up|ep_|select|__x64_sys_ppoll|idle|try_to_wake|enqueue_task|dequeue_task|update_curr|pick_next/) c = "wait"
      else if (sym ~ /fault|folio|page|pte|mmap|munmap|tlb|unmap|shmem|memcg|zap_|lru/) c = "faults"
      else if (dso ~ /tributary/) c = "runtime"
      total[c] += pct
    }
    END { for (k in total) printf "%s %.1f\n", k, total[k] }'
}

rows=()
for t in $TRANSPORTS; do
  for n in $NPS; do
    for s in $SIZES; do
      b=$(bytes "$s")
      # About 2 GiB through the collective, so the timed loop outweighs start-up and the
      # bench's check pass (they land in `other`).
      iters=${ITERS:-$(((2 << 30) / b))}
      data=$TMP/perf.$t.$n.$s
      line=$(perf record -q -F 999 -o "$data" -- "$BIN" bench --np "$n" -b "$b" -e "$b" \
               --iters "$iters" --warmup 5 --transport "$t" 2>/dev/null | awk '$1 ~ /^[0-9]+$/ {print $5, $6; exit}')
      algo=${line% *}
      us=${line#* }
      perf report -i "$data" --no-children --sort dso,symbol -g none 2>/dev/null |
        grep -v '^#' | grep '%' | classify >"$TMP/c"
      get() { awk -v k="$1" '$1 == k {print $2}' "$TMP/c"; }
      rows+=("| $t | $n | $s | $algo | $us | $(get copy) | $(get reduce) | $(get crc) | $(get kernel-io) | $(get wait) | $(get faults) | $(get runtime) | $(get other) |")
      echo "${rows[-1]}" >&2
    done
  done
done
table=$(printf '%s\n' "| transport | N | size | algorithm | time µs | copy % | reduce % | crc % | kernel-io % | wait % | faults % | runtime % | other % |" \
  "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" "${rows[@]}")
echo "$table"
if [ -n "$OUT" ]; then
  { echo "# Where the all-reduce's CPU time goes"
    echo
    echo "Command: \`bench/profile_allreduce.sh -t \"$TRANSPORTS\" -n \"$NPS\" -s \"$SIZES\"\`, $(nproc) cores, load before/after: see below."
    echo
    echo "$table"
    echo
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$OUT"
fi
