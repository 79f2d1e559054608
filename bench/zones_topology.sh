# Sourced by bench/zones_link.sh and tests/integration/zones_netns_test.sh: zones of
# "hosts" in network namespaces, unshaped inside a zone, joined through one router
# namespace whose links to the zones are shaped with tbf (netem is not available on the
# dev VMs; tbf and htb are).
#
#   zones_up PREFIX "3 3" RATE     # zone sizes; RATE e.g. 100mbit
#   zones_down                     # removes everything zones_up made (call it from a trap)
#
# Topology, for zone z (0-based) of size k:
#   namespace ${PREFIX}_z${z}      a bridge br0 (the zone's switch)
#   namespace ${PREFIX}_z${z}h${i} host i of zone z: eth0 = 10.80.z.(i+1)/24 on the
#                                  bridge (unshaped veth), default route 10.80.z.254
#   namespace ${PREFIX}_r          the router: eth${z} = 10.80.z.254/24 on zone z's bridge,
#                                  forwarding on; both ends of that veth shaped to RATE
#                                  (tbf burst 32kbit latency 400ms, as bench/shaped_link.sh)
# So every byte between two zones crosses two shaped links, one per zone (a zone's uplink,
# RATE each way). Traffic into zone z is counted at the router's eth${z} (zones_tx_bytes).
# Sets ZONES_HOSTS (namespaces in zone order), ZONES_ADDRS (their addresses), ZONES_OF
# (each host's zone index) and ZONES_ROUTER (the router namespace; 10.80.0.254 etc.).

ZONES_CREATED=()

zones_shape() {  # namespace device rate
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$3" burst 32kbit latency 400ms
}

zones_up() {
  local prefix=$1 sizes=($2) rate=$3
  ZONES_ROUTER=${prefix}_r
  ZONES_HOSTS=()
  ZONES_ADDRS=()
  ZONES_OF=()
  ip netns add "$ZONES_ROUTER"
  ZONES_CREATED+=("$ZONES_ROUTER")
  ip netns exec "$ZONES_ROUTER" ip link set lo up
  ip netns exec "$ZONES_ROUTER" sysctl -qw net.ipv4.ip_forward=1
  local z i
  for ((z = 0; z < ${#sizes[@]}; z++)); do
    local sw=${prefix}_z$z
    ip netns add "$sw"
    ZONES_CREATED+=("$sw")
    ip netns exec "$sw" ip link add br0 type bridge
    ip netns exec "$sw" ip link set br0 up
    # The zone's uplink: router eth$z <-> bridge port up$z, shaped at both ends.
    ip link add "${prefix}r$z" type veth peer name "${prefix}u$z"
    ip link set "${prefix}r$z" netns "$ZONES_ROUTER"
    ip link set "${prefix}u$z" netns "$sw"
    ip netns exec "$ZONES_ROUTER" ip link set "${prefix}r$z" name "eth$z"
    ip netns exec "$ZONES_ROUTER" ip addr add "10.80.$z.254/24" dev "eth$z"
    ip netns exec "$ZONES_ROUTER" ip link set "eth$z" up
    ip netns exec "$sw" ip link set "${prefix}u$z" master br0
    ip netns exec "$sw" ip link set "${prefix}u$z" up
    zones_shape "$ZONES_ROUTER" "eth$z" "$rate"
    zones_shape "$sw" "${prefix}u$z" "$rate"
    for ((i = 0; i < ${sizes[z]}; i++)); do
      local h=${prefix}_z${z}h$i
      ip netns add "$h"
      ZONES_CREATED+=("$h")
      ip link add "${prefix}h$z.$i" type veth peer name "${prefix}p$z.$i"
      ip link set "${prefix}h$z.$i" netns "$h"
      ip link set "${prefix}p$z.$i" netns "$sw"
      ip netns exec "$h" ip link set "${prefix}h$z.$i" name eth0
      ip netns exec "$h" ip addr add "10.80.$z.$((i + 1))/24" dev eth0
      ip netns exec "$h" ip link set eth0 up
      ip netns exec "$h" ip link set lo up
      ip netns exec "$h" ip route add default via "10.80.$z.254"
      ip netns exec "$sw" ip link set "${prefix}p$z.$i" master br0
      ip netns exec "$sw" ip link set "${prefix}p$z.$i" up
      ZONES_HOSTS+=("$h")
      ZONES_ADDRS+=("10.80.$z.$((i + 1))")
      ZONES_OF+=("$z")
    done
  done
}

# Bytes the router has sent into zone z (everything that crossed into it), from its
# interface counters.
zones_tx_bytes() {
  ip netns exec "$ZONES_ROUTER" cat "/sys/class/net/eth$1/statistics/tx_bytes"
}

zones_down() {
  local ns
  for ns in "${ZONES_CREATED[@]:-}"; do
    [[ -n $ns ]] && ip netns del "$ns" 2>/dev/null || true
  done
  ZONES_CREATED=()
}
