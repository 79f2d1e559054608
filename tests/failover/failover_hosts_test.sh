#!/usr/bin/env bash
# Transports per pair in one group: four agents on two "hosts", two on each
# (tests/support/two_hosts.sh: a network namespace and a /dev/shm of its own per host, so
# the agents on one host can map each other's segments and nobody else's: their
# shared-memory keys differ across hosts, as on two machines). The agents train the soak workload (every step's sum checked against a
# reference) in the default configuration (no flag): the group mixes transports, shared
# memory between the agents of a host and TCP across hosts, one link over both. Every
# agent's "data paths" line names shared memory for its neighbour and TCP for the others;
# every step is correct and agreed, in epoch 1 throughout; `tributary status` shows each pair
# on its path (shm inside a host, tcp across).
#
# With `cut` (and --failover), host 0's pair loses its shared memory mid-run (its
# connections to the agents' main data ports killed at both ends, `ss -K`: the doorbell and
# the TCP path's): the pair moves to TCP (its TCP path re-dialled, or the standby) without a
# view change; the other host's pair stays on shared memory.
#
# With `kill`, an agent of the second host is killed (kill -9) mid-run: the survivors train
# on in a new view in which the last agent of that host is alone there (its pairs all on TCP,
# the first host's pair still on shared memory), every step correct and agreed.
#
#   failover_hosts_test.sh TRIBUTARY_BIN [plain|cut|kill]   # STEPS, COUNT from the environment
#
# Needs root, network and mount namespaces; otherwise exits 77 (skipped) saying why.
set -euo pipefail

BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: nsenter -m starts at /
MODE=${2:-plain}
source "$(dirname "$0")/../netns_preflight.sh"
source "$(dirname "$0")/../support/two_hosts.sh"
netns_preflight unshare "no unshare(1) (util-linux)" nsenter "no nsenter(1) (util-linux)"
unshare -m --propagation private sh -c 'mount -t tmpfs tmpfs /dev/shm' 2>/dev/null ||
  skip "cannot mount a /dev/shm of its own in a mount namespace here"

N=4
P=th$$
WORK=$(mktemp -d)
PIDS=()
CREATED=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; done
  for ns in "${CREATED[@]:-}"; do [[ -n $ns ]] && ip netns del "$ns" 2>/dev/null || true; done
  [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
fail() {
  echo "FAILED: $*" >&2
  for f in "$WORK"/*.err; do [[ -f $f ]] && { echo "--- $f" >&2; tail -25 "$f" >&2; }; done
  exit 1
}

two_hosts_up "$P" || fail "could not make the two hosts"

export TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
on_switch "$BIN" coordinator --bind "tcp://10.84.0.254:0" --world-size "$N" \
  --ready-file "$WORK/endpoint" >"$WORK/coordinator.out" 2>"$WORK/coordinator.err" &
PIDS+=($!)
for ((t = 0; t < 200; t++)); do
  [[ -s $WORK/endpoint ]] && break
  sleep 0.05
done
[[ -s $WORK/endpoint ]] || fail "the coordinator did not bind"
ENDPOINT=$(cat "$WORK/endpoint")

STEPS=${STEPS:-$([[ $MODE == plain ]] && echo 600 || echo 240)}
COUNT=${COUNT:-65536}
# Over one network a mixed group runs without failover by default (each pair on its
# transport, nothing added); `cut` asks for it, so that a pair can move.
FLAGS=$([[ $MODE == cut ]] && echo --failover || true)
declare -a AGENT
for ((i = 0; i < N; i++)); do
  h=$((i / 2))
  on_host "$h" "$BIN" agent --coordinator "$ENDPOINT" --host "host$h" \
    --bind-host 0.0.0.0 --data-address "10.84.0.$((h + 1))" \
    --workload soak --soak-count "$COUNT" --soak-steps "$STEPS" --soak-delay-ms 5 $FLAGS \
    >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
  AGENT[i]=$!
  PIDS+=($!)
done

# The first view's paths: shared memory to the agent on the same host, TCP to the others.
for ((t = 0; t < 400; t++)); do
  all=1
  for ((i = 0; i < N; i++)); do grep -q "epoch 1: member .* data paths:" "$WORK/agent$i.err" || all=0; done
  [[ $all == 1 ]] && break
  sleep 0.05
done
[[ $all == 1 ]] || fail "not every agent connected the first view"
declare -a RANK
for ((i = 0; i < N; i++)); do
  RANK[i]=$(grep -m1 "epoch 1: member .* data paths:" "$WORK/agent$i.err" | sed 's/.*(rank \([0-9]*\)) data paths.*/\1/')
done
for ((i = 0; i < N; i++)); do
  line=$(grep -m1 "epoch 1: member .* data paths:" "$WORK/agent$i.err")
  echo "agent $i (host $((i / 2)), rank ${RANK[i]}): ${line#*data paths: }"
  for ((j = 0; j < N; j++)); do
    [[ $j == "$i" ]] && continue
    want=tcp
    [[ $((j / 2)) == $((i / 2)) ]] && want=shm
    grep -q "rank ${RANK[j]} (member [0-9]*) over $want\(;\|$\)" <<<"$line" ||
      fail "agent $i: agent $j (rank ${RANK[j]}) is not over $want: $line"
  done
done

# What `tributary status` shows of the pairs, as the agents report them: the path each is
# on (shm inside a host, tcp across; one path each without failover). (Only in the plain
# mode: `kill` must land mid-run.)
STATUS=$WORK/status.txt
for ((t = 0; t < 100; t++)); do
  [[ $MODE == plain ]] || break
  (on_switch "$BIN" status --coordinator "$ENDPOINT" >"$STATUS.new" 2>&1) || true
  if grep -q "shm 10.84.0.[12]:[0-9]* (agent)" "$STATUS.new" &&
    grep -q "tcp 10.84.0.[12]:[0-9]* (agent)" "$STATUS.new"; then
    mv "$STATUS.new" "$STATUS"
    break
  fi
  kill -0 "${AGENT[0]}" 2>/dev/null || break
  sleep 0.1
done
if [[ $MODE == plain ]]; then
  [[ -s $STATUS ]] || fail "tributary status never showed pairs on shm and on tcp: $(cat "$STATUS.new")"
  sed -n '/^links/,/^$/p' "$STATUS" | head -8
fi

if [[ $MODE == cut ]]; then
  # Both agents of host 0 have their pair's TCP path up (dialled in the background).
  for ((t = 0; t < 200; t++)); do
    up=0
    for i in 0 1; do grep -q "to rank .*: path tcp reconnected" "$WORK/agent$i.err" && up=$((up + 1)); done
    [[ $up == 2 ]] && break
    sleep 0.05
  done
  [[ $up == 2 ]] || fail "host 0's pair never got its TCP path up"
  # The pair's shared memory rides on a connection to a main data port inside the host (its
  # doorbell and pulse), and so does its TCP path; the standby's goes to another listener.
  # Every connection to a main port inside host 0 is killed at both ends (ss -K): the
  # shared-memory path fails with an error and the pair moves to TCP mid-run (its TCP path,
  # re-dialled, or the standby). An agent's main listener is its first (lowest fd).
  listeners=$( (on_host 0 ss -tlnHp) 2>/dev/null |
    sed -n 's/^LISTEN .*:\([0-9]*\) .*pid=\([0-9]*\),fd=\([0-9]*\).*/\2 \3 \1/p' | sort -k1,1n -k2,2n)
  filter=""
  for port in $(awk '!seen[$1]++ {print $3}' <<<"$listeners"); do
    filter+="${filter:+ or }( src 10.84.0.1 and dst 10.84.0.1:$port )"
  done
  [[ -n $filter ]] || fail "no listener found on host 0"
  (on_host 0 ss -K state established "$filter") >/dev/null 2>&1 ||
    fail "ss -K could not kill host 0's connections to its main ports"
  echo "host 0's connections to its main data ports killed at step $(grep -c '^soak step' "$WORK/agent0.out")"
fi

LAST=$N
if [[ $MODE == kill ]]; then
  KILL_AT=$((STEPS / 6))
  for ((t = 0; t < 1200; t++)); do
    [[ $(grep -c "^soak step" "$WORK/agent3.out" 2>/dev/null || true) -ge $KILL_AT ]] && break
    sleep 0.05
  done
  kill -9 "${AGENT[3]}"
  wait "${AGENT[3]}" 2>/dev/null || true
  echo "agent 3 (host 1) killed at step $(grep -c '^soak step' "$WORK/agent0.out")"
  LAST=3
fi
for ((i = 0; i < LAST; i++)); do
  wait "${AGENT[i]}" || fail "agent $i exited with $?"
done
for ((i = 0; i < LAST; i++)); do
  steps=$(grep -c "^soak step" "$WORK/agent$i.out" || true)
  [[ $steps -ge $STEPS ]] || fail "agent $i committed $steps of $STEPS steps"
  grep -q "^soak step.* WRONG" "$WORK/agent$i.out" && fail "agent $i committed a wrong sum"
  if [[ $MODE != kill ]]; then
    grep "^soak step" "$WORK/agent$i.out" | grep -qv " view 1 " &&
      fail "agent $i saw a view change: $(grep '^soak step' "$WORK/agent$i.out" | grep -v ' view 1 ' | head -1)"
  fi
done
sums=$(for ((i = 0; i < LAST; i++)); do grep "^soak step" "$WORK/agent$i.out" | awk '{print $3, $NF == "ok" ? $(NF - 1) : "x"}'; done | sort -u | wc -l)
[[ $sums -eq $STEPS ]] || fail "the agents disagree on some step ($sums distinct step sums for $STEPS steps)"
grep -q "shared memory between those, TCP to the others" "$WORK/agent0.err" ||
  fail "agent 0 did not log that the group mixes transports"
if [[ $MODE == cut ]]; then
  grep -h "to rank .*: path shm -> tcp" "$WORK/agent0.err" "$WORK/agent1.err" | head -2 || true
  grep -q "to rank .*: path shm -> tcp[-a-z0-9]* (error" "$WORK/agent0.err" "$WORK/agent1.err" ||
    fail "host 0's pair did not move from shm to tcp for the error"
  grep -q "path shm -> tcp" "$WORK/agent2.err" "$WORK/agent3.err" &&
    fail "host 1's pair moved too: $(grep -h 'path shm -> tcp' "$WORK/agent2.err" "$WORK/agent3.err" | head -1)"
  echo "PASSED: 4 agents on 2 hosts, host 0's shared memory cut mid-run: its pair on TCP, $STEPS correct, agreed steps in epoch 1"
  exit 0
fi
if [[ $MODE == kill ]]; then
  # A later view without agent 3: agent 2 is alone on host 1 (TCP to both), agents 0 and 1
  # still share memory.
  line2=$(grep "data paths:" "$WORK/agent2.err" | grep -v "epoch 1:" | head -1)
  line0=$(grep "data paths:" "$WORK/agent0.err" | grep -v "epoch 1:" | head -1)
  echo "after the kill, agent 2: ${line2#*data paths: }"
  echo "after the kill, agent 0: ${line0#*data paths: }"
  grep -q "over shm" <<<"$line2" && fail "agent 2, alone on its host, has a pair on shared memory: $line2"
  grep -q "over shm" <<<"$line0" || fail "agent 0 lost shared memory with agent 1: $line0"
  grep "^soak step" "$WORK/agent0.out" | tail -1 | grep -q " view 1 " &&
    fail "the survivors never left view 1 after agent 3 died"
  echo "PASSED: 4 agents on 2 hosts (shared memory inside, TCP across), one killed mid-run: 3 survivors agree on $STEPS correct steps"
  exit 0
fi
echo "PASSED: 4 agents on 2 hosts, shared memory inside each and TCP across, one link: $STEPS correct, agreed steps in epoch 1"
