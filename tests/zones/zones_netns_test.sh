#!/usr/bin/env bash
# Real agents in network namespaces, in zones joined by shaped links (bench/
# zones_topology.sh: unshaped inside a zone, each zone's uplink through a router namespace
# tbf-shaped to 100 Mbit/s both ways), over TCP.
#
#   zones_netns_test.sh TRIBUTARY_BIN check     # every collective x dtype correct, zones 2+3+2,
#                                               # hierarchical forced, then the cost model's choice
#   zones_netns_test.sh TRIBUTARY_BIN tls       # the check with --tls cross-zone: TLS on the
#                                               # pairs between zones only
#   zones_netns_test.sh TRIBUTARY_BIN faults    # training with --wan-codec qint8 through kill -9
#                                               # inside a zone, kill -9 and SIGSTOP of a zone's
#                                               # last member, SIGSTOP inside a zone: survivors
#                                               # hold identical parameters
#
# Needs root and network namespaces; otherwise exits 77 (skipped) saying why.
set -euo pipefail

BIN=$1
MODE=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/tests/netns_preflight.sh"
netns_preflight tc "no tc(8) (iproute2)"
source "$ROOT/bench/zones_topology.sh"

PREFIX=tn$$
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; done
  zones_down
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
fail() {
  echo "FAILED: $*" >&2
  for f in "$WORK"/*.err; do [[ -f $f ]] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}

export TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
SIZES=${SIZES:-2 3 2}
zones_up "$PREFIX" "$SIZES" 100mbit
N=${#ZONES_HOSTS[@]}

# Starts a coordinator in the router namespace; sets ENDPOINT.
start_coordinator() {
  local ready=$WORK/coordinator.endpoint
  rm -f "$ready"
  ip netns exec "$ZONES_ROUTER" "$BIN" coordinator --bind tcp://10.80.0.254:0 --world-size "$N" \
    --ready-file "$ready" "$@" >"$WORK/coordinator.out" 2>"$WORK/coordinator.err" &
  COORDINATOR=$!
  PIDS+=("$COORDINATOR")
  for ((t = 0; t < 200; t++)); do
    [[ -s $ready ]] && break
    sleep 0.05
  done
  [[ -s $ready ]] || fail "the coordinator did not bind"
  ENDPOINT=$(cat "$ready")
}

# agent i with extra flags; its pid in AGENT_PID[i].
declare -A AGENT_PID
start_agent() {
  local i=$1
  shift
  ip netns exec "${ZONES_HOSTS[i]}" "$BIN" agent --coordinator "$ENDPOINT" \
    --zone "zone-${ZONES_OF[i]}" --host "${ZONES_HOSTS[i]}" --bind-host "${ZONES_ADDRS[i]}" \
    --transport tcp --wan-mbps 100 "$@" >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
  AGENT_PID[$i]=$!
  PIDS+=($!)
}

stop_coordinator() {
  kill "$COORDINATOR" 2>/dev/null || true
  wait "$COORDINATOR" 2>/dev/null || true
}

run_check() {  # extra agent flags
  start_coordinator
  for ((i = 0; i < N; i++)); do start_agent "$i" --workload check "$@"; done
  for ((i = 0; i < N; i++)); do
    wait "${AGENT_PID[$i]}" || fail "agent $i ($*) exited with $?"
  done
  grep -q "collective cases correct on $N ranks" "$WORK"/agent*.out || fail "no check summary ($*)"
  grep -h "collective cases correct" "$WORK"/agent*.out
  # The data plane went over TCP between the namespaces' addresses.
  grep -q "over tcp" "$WORK/agent0.err" || fail "agent 0 logged no TCP path"
  stop_coordinator
}

# Resumes a member that stopped itself (SIGSTOP) once it is stopped, 3 s later.
resume_when_stopped() {
  local pid=$1
  ( for ((t = 0; t < 1200; t++)); do
      if [[ $(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) == T ]]; then
        sleep 3
        kill -CONT "$pid" 2>/dev/null
        exit 0
      fi
      sleep 0.1
    done ) &
  PIDS+=($!)
}

case $MODE in
  check)
    run_check --algorithm hierarchical
    run_check  # the cost model's choice, from --wan-mbps 100
    grep -q "in 3 zone(s) runs hierarchical (cost model)" "$WORK"/agent*.err ||
      fail "the cost model never chose hierarchical across the zones"
    echo "PASSED: every collective correct over zones [$SIZES], hierarchical and auto"
    ;;
  tls)
    run_check --tls cross-zone
    # Agent 0 (zone 0, with agent 1) encrypts its links to the other zones' members only: in
    # the first view, which holds every agent (as the agents leave at the end, one slow to
    # finish its last collective may run it again in a smaller view, with fewer links).
    line=$(grep -h "epoch 1: TLS 1.3" "$WORK/agent0.err" | head -1) ||
      fail "agent 0 logged no TLS link in view 1"
    peers=$(grep -o "rank [0-9]* at" <<<"$line" | wc -l)
    [[ $peers -eq $((N - 2)) ]] || fail "agent 0 runs TLS with $peers peers, not the $((N - 2)) outside its zone: $line"
    grep -q "${ZONES_ADDRS[1]}:" <<<"$line" && fail "agent 0 encrypts its link inside its zone: $line"
    echo "PASSED: every collective correct over zones [$SIZES] with TLS between zones ($line)"
    ;;
  faults)
    # Zones 2 + 3 + 2. Zone 0: agent 0 killed (inside the zone), then agent 1, by then the
    # zone's last member, stopped. Zone 1: agent 2 stopped (inside). Zone 2: agent 6, its
    # zone's last member once agent 5 is killed, killed too.
    [[ $SIZES == "2 3 2" ]] || fail "the fault scenario is written for zones 2 3 2"
    start_coordinator
    TRAIN=(--workload train --epochs 40 --step-delay-ms 20 --wan-codec qint8)
    start_agent 0 "${TRAIN[@]}" --kill-at 30
    start_agent 1 "${TRAIN[@]}" --stop-at 90
    start_agent 2 "${TRAIN[@]}" --stop-at 60
    start_agent 3 "${TRAIN[@]}"
    start_agent 4 "${TRAIN[@]}"
    start_agent 5 "${TRAIN[@]}" --kill-at 45
    start_agent 6 "${TRAIN[@]}" --kill-at 120
    resume_when_stopped "${AGENT_PID[1]}"
    resume_when_stopped "${AGENT_PID[2]}"
    for i in 1 2 3 4; do
      wait "${AGENT_PID[$i]}" || fail "surviving agent $i exited with $?"
    done
    for i in 0 5 6; do
      if wait "${AGENT_PID[$i]}"; then fail "agent $i was to be killed but exited 0"; fi
    done
    finals=$(grep -h "^final: params sha256" "$WORK"/agent{1,2,3,4}.out | awk '{print $4}' | sort -u)
    [[ $(cat "$WORK"/agent{1,2,3,4}.out | grep -c "^final: params sha256") -eq 4 ]] ||
      fail "not every survivor finished"
    [[ $(wc -l <<<"$finals") -eq 1 ]] || fail "survivors disagree: $finals"
    for i in 1 2; do  # the stopped members were detected, evicted, and came back
      grep -q "evicted at step" "$WORK/agent$i.err" || fail "agent $i was not evicted while stopped"
    done
    summary=$(grep -h "^summary" "$WORK"/agent{1,2,3,4}.out) || fail "no survivor printed a summary"
    echo "$summary"
    # qint8 across the zones: the compressed bytes are a fraction of float32's.
    grep -q "wire ratio 1.0x" <<<"$summary" && fail "the all-reduce did not run with qint8 across zones"
    echo "PASSED: 4 survivors over zones [$SIZES] hold identical parameters ($finals)"
    ;;
  *) fail "unknown mode $MODE" ;;
esac
