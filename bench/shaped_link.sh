#!/usr/bin/env bash
# End-to-end compressed all-reduce between "hosts" in network namespaces joined by links
# shaped to 100 Mbit/s with tbf (netem is not available on the dev VMs).
#
#   sudo bench/shaped_link.sh [N=2] [MiB=64]
#   env: BIN (default build/cc/bench/compressed_allreduce_bench, else build/release/...),
#        RATE (100mbit), ITERS (3), CODECS (float32,float32@ring,qint8:bucket=512,topk:density=0.01;
#        "@algo" forces the dense all-reduce algorithm; speedups vs the fastest float32 row),
#        OUT (a Markdown file to append the results to; its plot, speed-up and wire bytes
#        per codec for every table in it, is redrawn next to it as .png)
#
# Topology: a switch namespace trib_sw with a bridge; host i is namespace trib_h<i> with
# 10.77.0.<i+1>/24 on a veth whose two ends are both shaped (tbf rate $RATE burst 32kbit
# latency 400ms): each host has a 100 Mbit/s full-duplex link into the switch, as with a
# real NIC. Each host runs one compressed_allreduce_bench rank; they meet through a
# rendezvous directory. Everything created here is removed on exit (trap), whatever happens.
set -euo pipefail

N=${1:-2}
MIB=${2:-64}
RATE=${RATE:-100mbit}
ITERS=${ITERS:-3}
CODECS=${CODECS:-float32,float32@ring,qint8:bucket=512,topk:density=0.01}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [[ -z "${BIN:-}" ]]; then
  BIN=$ROOT/build/cc/bench/compressed_allreduce_bench
  [[ -x $BIN ]] || BIN=$ROOT/build/release/bench/compressed_allreduce_bench
fi
[[ -x $BIN ]] || { echo "shaped_link.sh: no bench binary at $BIN (build compressed_allreduce_bench)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "shaped_link.sh: needs root (ip netns, tc)" >&2; exit 1; }

source "$ROOT/bench/shaped_bridge.sh"
PREFIX=trib$$
RDV=$(mktemp -d)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  done
  bridge_down
  rm -rf "$RDV"
}
trap cleanup EXIT INT TERM

bridge_up "$PREFIX" "$N" 10.77.0 "$RATE"

LOG0=$RDV/rank0.out
source "$ROOT/bench/netns_ranks.sh"
netns_ranks shaped_link.sh "$BIN" "$RDV" BRIDGE_HOSTS BRIDGE_ADDRS --mib "$MIB" --iters "$ITERS" --codecs "$CODECS"
{
  echo "$N ranks, $MIB MiB float32 all-reduce (avg), links shaped to $RATE (tbf burst 32kbit latency 400ms), $ITERS timed iterations after 1 warm-up, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  cat "$LOG0"
} | if [[ -n "${OUT:-}" ]]; then tee -a "$OUT"; else cat; fi
if [[ -n "${OUT:-}" ]]; then "$ROOT/bench/plots/plot_results.py" shaped "$OUT"; fi
