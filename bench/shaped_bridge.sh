# Sourced by bench/shaped_link.sh and the agent benchmarks on it (shaped_agents.sh,
# ring_order_shaped.sh, ring_order_recovery.sh): N "hosts" in network
# namespaces on one bridge, both ends of every host's veth shaped with tbf (netem is not
# available on the dev VMs; tbf and htb are).
#
#   bridge_up PREFIX N SUBNET RATE   # SUBNET e.g. 10.77.0; RATE e.g. 100mbit
#   bridge_down                      # removes everything bridge_up made (call it from a trap)
#
# Topology:
#   namespace ${PREFIX}_sw      the switch: bridge br0 = SUBNET.254/24 (a coordinator can
#                               listen there)
#   namespace ${PREFIX}_h${i}   host i: eth0 = SUBNET.(i+1)/24 on the bridge, both ends of
#                               its veth shaped to RATE (tbf burst 32kbit latency 400ms)
# Sets BRIDGE_SW (the switch namespace), BRIDGE_HOSTS (host namespaces) and BRIDGE_ADDRS
# (their addresses), in host order.
#
#   agents_bridge_up NAME PREFIX N SUBNET RATE BIN...
# What the scripts that run real agents on the bridge share: checks that each BIN is an
# executable and that this runs as root (NAME in the messages), then WORK (a temporary
# directory), PIDS (processes to kill -9 at exit; append to it), a trap that removes both
# and the bridge, bridge_up, SW (the switch namespace) and an exported TRIBUTARY_SECRET.
#
#   bridge_coordinator BIN WORLD     # after agents_bridge_up
# Starts `BIN coordinator` on the switch's address for WORLD members (output in
# $WORK/coordinator.{out,err}), adds it to PIDS and waits up to 10 s for it to bind; sets
# COORDINATOR (its pid) and ENDPOINT (where agents join).

BRIDGE_CREATED=()

bridge_shape() {  # namespace device rate
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst 32kbit latency 400ms
}

bridge_up() {
  local prefix=$1 n=$2 subnet=$3 rate=$4 i
  BRIDGE_SW=${prefix}_sw
  BRIDGE_SUBNET=$subnet
  BRIDGE_HOSTS=()
  BRIDGE_ADDRS=()
  ip netns add "$BRIDGE_SW"
  BRIDGE_CREATED+=("$BRIDGE_SW")
  ip netns exec "$BRIDGE_SW" ip link add br0 type bridge
  ip netns exec "$BRIDGE_SW" ip link set br0 up
  ip netns exec "$BRIDGE_SW" ip link set lo up
  ip netns exec "$BRIDGE_SW" ip addr add "$subnet.254/24" dev br0
  for ((i = 0; i < n; i++)); do
    local h=${prefix}_h$i
    ip netns add "$h"
    BRIDGE_CREATED+=("$h")
    ip link add "${prefix}h$i" type veth peer name "${prefix}s$i"
    ip link set "${prefix}h$i" netns "$h"
    ip link set "${prefix}s$i" netns "$BRIDGE_SW"
    ip netns exec "$h" ip link set "${prefix}h$i" name eth0
    ip netns exec "$h" ip addr add "$subnet.$((i + 1))/24" dev eth0
    ip netns exec "$h" ip link set eth0 up
    ip netns exec "$h" ip link set lo up
    ip netns exec "$BRIDGE_SW" ip link set "${prefix}s$i" master br0
    ip netns exec "$BRIDGE_SW" ip link set "${prefix}s$i" up
    bridge_shape "$h" eth0 "$rate"
    bridge_shape "$BRIDGE_SW" "${prefix}s$i" "$rate"
    BRIDGE_HOSTS+=("$h")
    BRIDGE_ADDRS+=("$subnet.$((i + 1))")
  done
}

bridge_down() {
  local ns
  for ns in "${BRIDGE_CREATED[@]:-}"; do
    [[ -n $ns ]] && ip netns del "$ns" 2>/dev/null || true
  done
  BRIDGE_CREATED=()
}

agents_bridge_up() {
  local name=$1 prefix=$2 n=$3 subnet=$4 rate=$5 bin
  shift 5
  for bin in "$@"; do
    [[ -x $bin ]] || { echo "$name: no tributary binary at $bin" >&2; exit 1; }
  done
  [[ $(id -u) -eq 0 ]] || { echo "$name: needs root (ip netns, tc)" >&2; exit 1; }
  WORK=$(mktemp -d)
  PIDS=()
  trap agents_bridge_down EXIT INT TERM
  bridge_up "$prefix" "$n" "$subnet" "$rate"
  SW=$BRIDGE_SW
  TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  export TRIBUTARY_SECRET
}

bridge_coordinator() {
  local bin=$1 world=$2 t
  rm -f "$WORK/endpoint"
  ip netns exec "$SW" "$bin" coordinator --bind "tcp://$BRIDGE_SUBNET.254:0" --world-size "$world" \
    --ready-file "$WORK/endpoint" >"$WORK/coordinator.out" 2>"$WORK/coordinator.err" &
  COORDINATOR=$!
  PIDS+=("$COORDINATOR")
  for ((t = 0; t < 200; t++)); do [[ -s $WORK/endpoint ]] && break; sleep 0.05; done
  [[ -s $WORK/endpoint ]] || { echo "the coordinator did not bind" >&2; exit 1; }
  ENDPOINT=$(cat "$WORK/endpoint")
}

agents_bridge_down() {
  local pid
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; done
  bridge_down
  rm -rf "$WORK"
}
