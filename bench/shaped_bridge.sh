# Sourced by bench/shaped_link.sh and bench/shaped_agents.sh: N "hosts" in network
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

BRIDGE_CREATED=()

bridge_shape() {  # namespace device rate
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst 32kbit latency 400ms
}

bridge_up() {
  local prefix=$1 n=$2 subnet=$3 rate=$4 i
  BRIDGE_SW=${prefix}_sw
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
