# Sourced: two "hosts" on one machine, for the tests and benchmarks of groups that span
# hosts. A host is a network namespace with its own address on a shared bridge
# (10.84.0.1, 10.84.0.2; the switch namespace, where a coordinator can run, has
# 10.84.0.254) and a mount namespace whose /dev/shm is a tmpfs of its own, so processes on
# one host can map each other's shared memory and nobody else's, as on two machines.
#
#   two_hosts_up PREFIX        # creates them; appends to the caller's CREATED (namespaces)
#                              # and PIDS (the holder processes) for its cleanup
#   on_host H CMD...           # execs CMD on host H (0 or 1), in both of its namespaces
#   on_switch CMD...           # execs CMD in the switch namespace
# (Both exec, so that $! of `on_host 0 CMD &` is CMD's own process, for kill -9: call them
# in the background or in a subshell.)
# Needs root, ip(8), unshare(1) and nsenter(1); the caller checks (netns_preflight).

declare -a TWO_HOSTS_HOLDER
TWO_HOSTS_SW=""

two_hosts_up() {
  local prefix=$1 h ns t
  TWO_HOSTS_SW=${prefix}_sw
  ip netns add "$TWO_HOSTS_SW"
  CREATED+=("$TWO_HOSTS_SW")
  ip -n "$TWO_HOSTS_SW" link set lo up
  # (Not "br": ip(8) reads it as "broadcast".)
  ip -n "$TWO_HOSTS_SW" link add brH type bridge
  ip -n "$TWO_HOSTS_SW" link set brH up
  ip -n "$TWO_HOSTS_SW" addr add 10.84.0.254/24 dev brH
  for h in 0 1; do
    ns=${prefix}_h$h
    ip netns add "$ns"
    CREATED+=("$ns")
    ip -n "$ns" link set lo up
    ip link add "${prefix}e$h" type veth peer name "${prefix}e${h}s"
    ip link set "${prefix}e$h" netns "$ns"
    ip link set "${prefix}e${h}s" netns "$TWO_HOSTS_SW"
    ip -n "$ns" link set "${prefix}e$h" name eth0
    ip -n "$ns" addr add "10.84.0.$((h + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$TWO_HOSTS_SW" link set "${prefix}e${h}s" master brH
    ip -n "$TWO_HOSTS_SW" link set "${prefix}e${h}s" up
    # The host's own /dev/shm, in a mount namespace that a holder process keeps alive.
    ip netns exec "$ns" unshare -m --propagation private \
      sh -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec sleep 86400' &
    TWO_HOSTS_HOLDER[h]=$!
    PIDS+=($!)
    disown "$!"  # killed at the caller's cleanup, without a "Killed" line
  done
  for h in 0 1; do
    for ((t = 0; t < 100; t++)); do
      nsenter -t "${TWO_HOSTS_HOLDER[h]}" -m sh -c \
        '[ "$(stat -c %d /dev/shm)" != "$(stat -c %d /)" ]' 2>/dev/null && break
      sleep 0.05
    done
  done
  local key0 key1
  key0=$(nsenter -t "${TWO_HOSTS_HOLDER[0]}" -m stat -c %d.%i /dev/shm)
  key1=$(nsenter -t "${TWO_HOSTS_HOLDER[1]}" -m stat -c %d.%i /dev/shm)
  if [[ $key0 == "$key1" ]]; then
    echo "two_hosts_up: both hosts' /dev/shm are the same file system ($key0)" >&2
    return 1
  fi
}

# nsenter -m starts at /: commands take absolute paths.
on_host() {
  local h=$1
  shift
  exec nsenter -t "${TWO_HOSTS_HOLDER[h]}" -m -n "$@"
}

on_switch() { exec ip netns exec "$TWO_HOSTS_SW" "$@"; }
