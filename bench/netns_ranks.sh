# Sourced by bench/shaped_link.sh and bench/zones_link.sh: runs one
# compressed_allreduce_bench rank per network namespace and waits for all of them.
#
#   netns_ranks WHO BIN RDV NAMESPACES ADDRESSES [bench args...]
#     NAMESPACES, ADDRESSES: names of arrays (rank i runs in ${NAMESPACES[i]}, binds
#     ${ADDRESSES[i]}); RDV: the rendezvous directory, where rank<i>.out/.err land.
#     On a failed rank: prints every rank's stderr, prefixed with WHO, and exits 1.
#     Appends the pids to PIDS while they run (for the caller's cleanup trap).
netns_ranks() {
  local who=$1 bin=$2 rdv=$3
  local -n nss=$4 addrs=$5
  shift 5
  local n=${#nss[@]} i pid status=0
  local started=()
  for ((i = 0; i < n; i++)); do
    ip netns exec "${nss[i]}" "$bin" --rank "$i" --size "$n" --rendezvous "$rdv" \
      --bind "${addrs[i]}" "$@" >"$rdv/rank$i.out" 2>"$rdv/rank$i.err" &
    started+=($!)
    PIDS+=($!)
  done
  for pid in "${started[@]}"; do wait "$pid" || status=1; done
  PIDS=()
  if [[ $status -ne 0 ]]; then
    echo "$who: a rank failed:" >&2
    cat "$rdv"/rank*.err >&2
    exit 1
  fi
}
