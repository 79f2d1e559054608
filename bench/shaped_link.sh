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

PREFIX=trib$$
SW=${PREFIX}_sw
RDV=$(mktemp -d)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]:-}"; do
    [[ -n $pid ]] && kill "$pid" 2>/dev/null || true
  done
  for ((i = 0; i < N; i++)); do ip netns del "${PREFIX}_h$i" 2>/dev/null || true; done
  ip netns del "$SW" 2>/dev/null || true
  rm -rf "$RDV"
}
trap cleanup EXIT INT TERM

shape() {  # namespace device
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 32kbit latency 400ms
}

ip netns add "$SW"
ip netns exec "$SW" ip link add br0 type bridge
ip netns exec "$SW" ip link set br0 up
for ((i = 0; i < N; i++)); do
  H=${PREFIX}_h$i
  ip netns add "$H"
  ip link add "${PREFIX}h$i" type veth peer name "${PREFIX}s$i"
  ip link set "${PREFIX}h$i" netns "$H"
  ip link set "${PREFIX}s$i" netns "$SW"
  ip netns exec "$H" ip link set "${PREFIX}h$i" name eth0
  ip netns exec "$H" ip addr add "10.77.0.$((i + 1))/24" dev eth0
  ip netns exec "$H" ip link set eth0 up
  ip netns exec "$H" ip link set lo up
  ip netns exec "$SW" ip link set "${PREFIX}s$i" master br0
  ip netns exec "$SW" ip link set "${PREFIX}s$i" up
  shape "$H" eth0
  shape "$SW" "${PREFIX}s$i"
done

LOG0=$RDV/rank0.out
HOSTS=()
ADDRS=()
for ((i = 0; i < N; i++)); do
  HOSTS+=("${PREFIX}_h$i")
  ADDRS+=("10.77.0.$((i + 1))")
done
source "$ROOT/bench/netns_ranks.sh"
netns_ranks shaped_link.sh "$BIN" "$RDV" HOSTS ADDRS --mib "$MIB" --iters "$ITERS" --codecs "$CODECS"
{
  echo "$N ranks, $MIB MiB float32 all-reduce (avg), links shaped to $RATE (tbf burst 32kbit latency 400ms), $ITERS timed iterations after 1 warm-up, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  cat "$LOG0"
} | if [[ -n "${OUT:-}" ]]; then tee -a "$OUT"; else cat; fi
if [[ -n "${OUT:-}" ]]; then "$ROOT/bench/plots/plot_results.py" shaped "$OUT"; fi
