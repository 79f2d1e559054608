# Sourced by the script tests that build network namespaces (tests/failover, tests/zones,
# tests/tls): exits 77 (ctest's SKIP_RETURN_CODE) saying why when this machine cannot run
# them: not root, no ip(8), a tool missing, or no permission to create a namespace.
#
#   netns_preflight [TOOL "why"]...   # e.g. netns_preflight tc "no tc(8) (iproute2)"

skip() { echo "SKIPPED: $*"; exit 77; }

netns_preflight() {
  [[ $(id -u) -eq 0 ]] || skip "needs root for ip netns"
  command -v ip >/dev/null || skip "no ip(8) (iproute2)"
  while (($# >= 2)); do
    command -v "$1" >/dev/null || skip "$2"
    shift 2
  done
  local probe=tprobe$$
  ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace here"
  ip netns del "$probe"
}
