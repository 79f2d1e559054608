#!/usr/bin/env bash
# Runtime fallback between real networks: N agents, each in its own network namespace with
# two interfaces, one on network A (10.81.0.0/24, the preferred data path) and one on
# network B (10.82.0.0/24, the standby path and the control plane). The agents train the
# soak workload (every step's sum checked against a reference) over TCP, A's address first,
# in the default configuration: no --failover flag (two data addresses turn it on). Mid-run, agent 1's interface on A goes down: its pairs stall (packets
# vanish, nothing fails), move to the standby path within the stall timeout, and resume
# the step where it stood. Every step stays correct and agreed, no view changes (epoch 1
# throughout: nobody failed, a link did), the move is logged naming both members and both
# paths, and agent 1's /metrics counts it (tributary_link_fallbacks_total) and shows
# its peers on tcp-standby (tributary_peer_transport).
#
# With `return`, network A comes back under agent 1 once it has moved: its pairs probe A,
# find it answering, and move back up to it (logged "tcp-standby -> tcp (recovered",
# counted in tributary_link_recoveries_total), every step still correct, epoch 1 throughout.
#
# With `shm`, the agents run over shared memory (--transport auto: one machine, one
# /dev/shm; --failover, which a shared-memory group runs without by default), their pulse
# connections over A; the cut kills agent 1's connections on A
# (`ss -K`: the kernel aborts them and resets the peers' ends), so its shared-memory paths
# fail with an error and their pairs move to the standby TCP path: "path shm -> tcp-standby".
#
# With `flap`, network A goes down and comes back under agent 1 three times while it
# trains: each time its pairs move down to B within the stall timeout and back up to A once
# probes are answered, every step correct, epoch 1 throughout.
#
# With `three`, there is a network C (10.83.0.0/24) too, which carries the control plane,
# and every agent gives three data addresses: each pair has three paths [A, B, C]. A goes
# down under agent 1, then, once its pairs moved to B, B goes down too: they move on to C
# ("path tcp-standby -> tcp-standby-2"), every step correct, epoch 1 throughout.
#
# With `reset`, agent 1's connections on A are killed (`ss -K`: an error at both ends, not a
# stall) while A itself stays up: its pairs move to B at once, both ends of each re-dial A
# in the background (the same handshake), put the new connection in, probe it and move
# back up ("tcp-standby -> tcp"), every step correct, epoch 1 throughout; `tributary status`
# shows each pair's path, path list and moves as the agents report them.
#
# With `resetall`, every data connection of agent 1 is killed at once, on A and on B (`ss
# -K`; its control connection to the coordinator on B is spared): each of its pairs has no
# path left and, rather than fail (a new view for every member), waits for a new connection
# ("every path failed ...; waiting up to 1000 ms for a new connection"), finds by a knock
# that the peer is alive, re-dials, and goes on where the first new connection is ("the
# pair goes on there"), every step correct, epoch 1 throughout.
#
# With `kill`, the last agent is also killed (kill -9) at the moment A goes down: a path
# failing while a peer dies still ends in the member-failure protocol (its pairs lose both
# paths at once), and the survivors train on in a new view, every step correct and agreed.
#
# With `late`, networks A, B and C as with `three`, but agent 1's port on B's switch is down
# when the agents start (packets to and from it vanish, so every dial over B waits out its
# 1 s attempt): the group's standby path (B first, then C as its fallback address) does not
# connect within half the stall timeout of the view's start (logged), each pair
# re-dials it in the background and puts the new connection in ("path tcp-standby
# reconnected"); then B's port comes up and A goes down under agent 1: its pairs move to the
# standby path ("tcp -> tcp-standby", not on to tcp-standby-2), every step correct, epoch 1
# throughout.
#
#   failover_netns_test.sh TRIBUTARY_BIN [N [kill|return|flap|shm|three|reset|resetall|late]]   # STEPS, COUNT (floats per all-reduce)
#                                                     # from the environment
#
# Needs root and network namespaces; otherwise exits 77 (skipped) saying why.
set -euo pipefail

BIN=$1
N=${2:-3}
MODE=${3:-cut}
source "$(dirname "$0")/../netns_preflight.sh"
netns_preflight

P=tf$$
SW=${P}_sw
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

# The switch namespace: a bridge per network; the coordinator lives here, on the last.
NETS="A B"
THREE=$([[ $MODE == three || $MODE == late ]] && echo 1 || echo 0)
[[ $THREE == 1 ]] && NETS="A B C"
CTL=$([[ $THREE == 1 ]] && echo 83 || echo 82)
CTL_NET=$([[ $THREE == 1 ]] && echo C || echo B)
octet_of() { case $1 in A) echo 81 ;; B) echo 82 ;; C) echo 83 ;; esac; }
ip netns add "$SW"
CREATED+=("$SW")
ip -n "$SW" link set lo up
for net in $NETS; do
  ip -n "$SW" link add "br$net" type bridge
  ip -n "$SW" link set "br$net" up
done
ip -n "$SW" addr add "10.$CTL.0.254/24" dev "br$CTL_NET"
for ((i = 0; i < N; i++)); do
  h=${P}_h$i
  ip netns add "$h"
  CREATED+=("$h")
  ip -n "$h" link set lo up
  for net in $NETS; do
    octet=$(octet_of "$net")
    ip link add "${P}$net$i" type veth peer name "${P}$net${i}s"
    ip link set "${P}$net$i" netns "$h"
    ip link set "${P}$net${i}s" netns "$SW"
    ip -n "$h" link set "${P}$net$i" name "eth$net"
    ip -n "$h" addr add "10.$octet.0.$((i + 1))/24" dev "eth$net"
    ip -n "$h" link set "eth$net" up
    ip -n "$SW" link set "${P}$net${i}s" master "br$net"
    ip -n "$SW" link set "${P}$net${i}s" up
  done
done

export TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
ip netns exec "$SW" "$BIN" coordinator --bind "tcp://10.$CTL.0.254:0" --world-size "$N" \
  --ready-file "$WORK/endpoint" >"$WORK/coordinator.out" 2>"$WORK/coordinator.err" &
PIDS+=($!)
for ((t = 0; t < 200; t++)); do
  [[ -s $WORK/endpoint ]] && break
  sleep 0.05
done
[[ -s $WORK/endpoint ]] || fail "the coordinator did not bind"
ENDPOINT=$(cat "$WORK/endpoint")

if [[ $MODE == late ]]; then
  ip -n "$SW" link set "${P}B1s" down
  echo "agent 1's port on network B down before the agents start"
fi
STEPS=${STEPS:-$(case $MODE in return | three | reset | resetall | late) echo 400 ;; flap) echo 900 ;; *) echo 120 ;; esac)}
PRIMARY=tcp
if [[ $MODE == shm ]]; then
  PRIMARY=shm
fi
COUNT=${COUNT:-65536}
STALL_MS=1000
declare -a AGENT
for ((i = 0; i < N; i++)); do
  ip netns exec "${P}_h$i" "$BIN" agent --coordinator "$ENDPOINT" --host "h$i" \
    --bind-host 0.0.0.0 --data-address "10.81.0.$((i + 1))" --data-address "10.82.0.$((i + 1))" \
    $([[ $THREE == 1 ]] && echo --data-address "10.83.0.$((i + 1))") \
    --transport "$([[ $MODE == shm ]] && echo auto || echo tcp)" $([[ $MODE == shm ]] && echo --failover) --stall-timeout-ms "$STALL_MS" --metrics 127.0.0.1:9464 \
    --workload soak --soak-count "$COUNT" --soak-steps "$STEPS" --soak-delay-ms 20 \
    >"$WORK/agent$i.out" 2>"$WORK/agent$i.err" &
  AGENT[i]=$!
  PIDS+=($!)
done

# Once every agent committed a sixth of its steps, network A goes away under agent 1.
CUT_AT=$((STEPS / 6))
for ((t = 0; t < 1200; t++)); do
  done_all=1
  for ((i = 0; i < N; i++)); do
    [[ $(grep -c "^soak step" "$WORK/agent$i.out" 2>/dev/null || true) -ge $CUT_AT ]] || done_all=0
  done
  [[ $done_all == 1 ]] && break
  sleep 0.05
done
[[ $done_all == 1 ]] || fail "the agents did not reach step $CUT_AT"
if [[ $MODE == late ]]; then
  grep -q "the standby path tcp-standby did not connect at the view's start" "$WORK/agent1.err" ||
    fail "agent 1 did not log its standby over B missing at the start"
  ip -n "$SW" link set "${P}B1s" up
  echo "agent 1's port on network B up at step $(grep -c '^soak step' "$WORK/agent1.out")"
  # Every pair of agent 1 re-dials B and puts the new connection in.
  for ((t = 0; t < 400; t++)); do
    [[ $(grep -c "to rank .*: path tcp-standby reconnected" "$WORK/agent1.err" || true) -ge $((N - 1)) ]] && break
    kill -0 "${AGENT[1]}" 2>/dev/null || fail "agent 1 ended before its standby over B came up"
    sleep 0.05
  done
  [[ $(grep -c "to rank .*: path tcp-standby reconnected" "$WORK/agent1.err" || true) -ge $((N - 1)) ]] ||
    fail "agent 1's pairs did not all reconnect over B: $(grep -c 'path tcp-standby reconnected' "$WORK/agent1.err" || true) of $((N - 1))"
  echo "agent 1's pairs reconnected over B at step $(grep -c '^soak step' "$WORK/agent1.out")"
fi
if [[ $MODE == shm || $MODE == reset ]]; then
  ip netns exec "${P}_h1" ss -K dst 10.81.0.0/24 >/dev/null
elif [[ $MODE == resetall ]]; then
  ip netns exec "${P}_h1" ss -K "dst 10.81.0.0/24 or ( dst 10.82.0.0/24 and not dst 10.82.0.254 )" >/dev/null
else
  ip -n "${P}_h1" link set ethA down
fi
CUT=$(date +%s.%N)
echo "$(case $MODE in shm | reset) echo "agent 1's connections on A killed" ;; resetall) echo "agent 1's data connections on A and B killed" ;; *) echo "network A down under agent 1" ;; esac) at step $(grep -c '^soak step' "$WORK/agent1.out")"
LAST=$N
if [[ $MODE == kill ]]; then
  kill -9 "${AGENT[N - 1]}"
  echo "agent $((N - 1)) killed"
  wait "${AGENT[N - 1]}" 2>/dev/null || true
  LAST=$((N - 1))
fi

# Agent 1's metrics while it trains on (they sync every 64 collectives).
SCRAPED=$WORK/agent1.metrics
# (Not with `reset`: its pairs are back on A before a scrape could show them on B.)
if [[ $MODE != kill && $MODE != reset && $MODE != resetall ]] && command -v curl >/dev/null; then
  while kill -0 "${AGENT[1]}" 2>/dev/null; do
    ip netns exec "${P}_h1" curl -s --max-time 1 http://127.0.0.1:9464/metrics >"$SCRAPED.new" || true
    if grep -q "^tributary_link_fallbacks_total{.*from=\"$PRIMARY\".*to=\"tcp-standby\"" "$SCRAPED.new"; then
      mv "$SCRAPED.new" "$SCRAPED"
      break
    fi
    sleep 0.1
  done
fi
if [[ $MODE == three ]]; then
  for ((t = 0; t < 600; t++)); do
    grep -q "path tcp -> tcp-standby" "$WORK/agent1.err" && break
    kill -0 "${AGENT[1]}" 2>/dev/null || fail "agent 1 ended before it moved to the standby path"
    sleep 0.05
  done
  ip -n "${P}_h1" link set ethB down
  echo "network B down under agent 1 at step $(grep -c '^soak step' "$WORK/agent1.out")"
fi
if [[ $MODE == return ]]; then
  # Wait for the move (the metrics above need curl; the log does not), then bring A back.
  for ((t = 0; t < 600; t++)); do
    grep -q "path tcp -> tcp-standby" "$WORK/agent1.err" && break
    kill -0 "${AGENT[1]}" 2>/dev/null || fail "agent 1 ended before it moved to the standby path"
    sleep 0.05
  done
  ip -n "${P}_h1" link set ethA up
  UP=$(date +%s.%N)
  echo "network A back up under agent 1 at step $(grep -c '^soak step' "$WORK/agent1.out")"
  RECOVERED=$WORK/agent1.recovered.metrics
  while kill -0 "${AGENT[1]}" 2>/dev/null; do
    if command -v curl >/dev/null; then
      ip netns exec "${P}_h1" curl -s --max-time 1 http://127.0.0.1:9464/metrics >"$RECOVERED.new" || true
      if grep -q '^tributary_link_recoveries_total{.*from="tcp-standby".*to="tcp"' "$RECOVERED.new"; then
        mv "$RECOVERED.new" "$RECOVERED"
        break
      fi
    elif grep -q "path tcp-standby -> tcp" "$WORK/agent1.err"; then
      break
    fi
    sleep 0.1
  done
fi
if [[ $MODE == reset ]]; then
  # `tributary status` shows what the agents report of their pairs: the path each is on,
  # its path list, and its moves (down to B and back up to A) with the last one's cause.
  STATUS=$WORK/status.txt
  for ((t = 0; t < 100; t++)); do
    ip netns exec "$SW" "$BIN" status --coordinator "$ENDPOINT" >"$STATUS.new" 2>&1 || true
    if grep -q "tcp 10.81.0.*(agent; paths tcp>tcp-standby; [0-9]* moves, last tcp-standby -> tcp (" "$STATUS.new"; then
      mv "$STATUS.new" "$STATUS"
      break
    fi
    kill -0 "${AGENT[1]}" 2>/dev/null || break
    sleep 0.1
  done
  # Agent 1's /metrics (synced at each move) count its new connections.
  while command -v curl >/dev/null && kill -0 "${AGENT[1]}" 2>/dev/null; do
    ip netns exec "${P}_h1" curl -s --max-time 1 http://127.0.0.1:9464/metrics >"$WORK/agent1.reconnects" || true
    grep -qE '^tributary_link_reconnects_total [1-9]' "$WORK/agent1.reconnects" && break
    sleep 0.1
  done
fi
if [[ $MODE == flap ]]; then
  # Down (already), up, down, up, down, up: each time wait for agent 1 to move (a new move
  # line, whichever of its pairs logs it first).
  FLAPS=3
  moves() { grep -c "to rank .*: path $1" "$WORK/agent1.err" || true; }
  # Until agent 1 logs more than $2 moves matching $1, then a pause of $3 s for its other
  # pairs to follow; prints the new count.
  next_move() {
    for ((t = 0; t < 600; t++)); do
      [[ $(moves "$1") -gt $2 ]] && break
      kill -0 "${AGENT[1]}" 2>/dev/null || fail "agent 1 ended before move $k ($1)"
      sleep 0.05
    done
    [[ $(moves "$1") -gt $2 ]] || fail "agent 1 did not move ($1) a ${k}th time"
    sleep "$3"
    moves "$1"
  }
  down_seen=0
  up_seen=0
  for ((k = 1; k <= FLAPS; k++)); do
    down_seen=$(next_move "tcp -> tcp-standby" "$down_seen" 0.3)
    ip -n "${P}_h1" link set ethA up
    echo "flap $k: network A back up under agent 1 at step $(grep -c '^soak step' "$WORK/agent1.out")"
    up_seen=$(next_move "tcp-standby -> tcp " "$up_seen" 0.6)  # probes every 250 ms
    [[ $k -lt $FLAPS ]] || break
    ip -n "${P}_h1" link set ethA down
    echo "flap $k: network A down again under agent 1 at step $(grep -c '^soak step' "$WORK/agent1.out")"
  done
  echo "agent 1 logged $(moves "tcp -> tcp-standby") moves down and $(moves "tcp-standby -> tcp ") back up"
fi
for ((i = 0; i < LAST; i++)); do
  wait "${AGENT[i]}" || fail "agent $i exited with $?"
done
if [[ $MODE == kill ]]; then
  # The survivors: every step correct, the same sums, the dead member gone in a new view.
  for ((i = 0; i < LAST; i++)); do
    steps=$(grep -c "^soak step" "$WORK/agent$i.out" || true)
    [[ $steps -ge $STEPS ]] || fail "survivor $i committed $steps of $STEPS steps"
    grep -q "^soak step.* WRONG" "$WORK/agent$i.out" && fail "survivor $i committed a wrong sum"
    grep "^soak step" "$WORK/agent$i.out" | tail -1 | grep -q " view 1 " &&
      fail "survivor $i never left view 1 after a member died"
  done
  sums=$(for ((i = 0; i < LAST; i++)); do grep "^soak step" "$WORK/agent$i.out" | awk '{print $3, $(NF - 1)}'; done | sort -u | wc -l)
  [[ $sums -eq $STEPS ]] || fail "the survivors disagree on some step ($sums distinct sums, $STEPS steps)"
  echo "PASSED: $N agents, A cut under agent 1 as agent $((N - 1)) died: $LAST survivors agree on $STEPS correct steps"
  exit 0
fi
for ((i = 0; i < N; i++)); do
  steps=$(grep -c "^soak step" "$WORK/agent$i.out" || true)
  [[ $steps -ge $STEPS ]] || fail "agent $i committed $steps of $STEPS steps"
  grep -q "^soak step.* WRONG" "$WORK/agent$i.out" && fail "agent $i committed a wrong sum"
  # Epoch 1 throughout: the link changed, the membership did not.
  grep "^soak step" "$WORK/agent$i.out" | grep -qv " view 1 " &&
    fail "agent $i saw a view change: $(grep '^soak step' "$WORK/agent$i.out" | grep -v ' view 1 ' | head -1)"
done
# Every agent committed the same sums.
sums=$(for ((i = 0; i < N; i++)); do grep "^soak step" "$WORK/agent$i.out" | awk '{print $3, $NF == "ok" ? $(NF - 1) : "x"}'; done | sort -u | wc -l)
[[ $sums -eq $STEPS ]] || fail "the agents disagree on some step ($sums distinct step sums for $STEPS steps)"
if [[ $MODE == resetall ]]; then
  # Agent 1's pairs waited for a new connection instead of failing, and went on.
  grep -q "rank .* to rank .*: every path failed (the last: .*); waiting up to $STALL_MS ms for a new connection" "$WORK/agent1.err" ||
    fail "agent 1 logged no pair waiting for a new connection"
  grep -q "rank .* to rank .*: path tcp\(-standby\)\? reconnected; the pair goes on there" "$WORK/agent1.err" ||
    fail "agent 1 logged no pair going on over a new connection"
  grep -q " is gone" "$WORK"/agent*.err && fail "a knock found a live agent gone: $(grep -h -m1 ' is gone' "$WORK"/agent*.err)"
  grep -q "no new connection within" "$WORK"/agent*.err && fail "a pair waited out its grace: $(grep -h -m1 'no new connection within' "$WORK"/agent*.err)"
  grep -h "every path failed\|the pair goes on there" "$WORK/agent1.err" | head -4
  on=$(grep -h "the pair goes on there" "$WORK/agent1.err" | awk '{print $1}' | sort | tail -1)
  echo "last pair of agent 1 going on $(awk -v a="$CUT" -v b="$(date -d "$on" +%s.%N)" 'BEGIN {printf "%.0f", (b - a) * 1000}') ms after the cut"
else
  # Agent 1 moved its pairs from A (tcp) to B (tcp-standby), naming both ends and paths.
  grep -q "rank .* to rank .*: path $PRIMARY -> tcp-standby" "$WORK/agent1.err" ||
    fail "agent 1 logged no move from $PRIMARY to the standby path"
  grep -h "path $PRIMARY -> tcp-standby" "$WORK"/agent*.err | head -4
  # From the cut to agent 1's first move (its log's clock is this machine's).
  first=$(grep -h "path $PRIMARY -> tcp-standby" "$WORK/agent1.err" | awk '{print $1}' | sort | head -1)
  moved=$(date -d "$first" +%s.%N)
  echo "first move $(awk -v a="$CUT" -v b="$moved" 'BEGIN {printf "%.0f", (b - a) * 1000}') ms after the cut (stall timeout $STALL_MS ms)"
fi
if [[ $MODE == three ]]; then
  grep -q "rank .* to rank .*: path tcp-standby -> tcp-standby-2" "$WORK/agent1.err" ||
    fail "agent 1 never moved on to network C after B went down too"
  grep -h "path tcp-standby -> tcp-standby-2" "$WORK"/agent*.err | head -4
fi
if [[ $MODE == late ]]; then
  grep -q "rank .* to rank .*: path tcp -> tcp-standby (" "$WORK/agent1.err" ||
    fail "agent 1's pairs did not move to tcp-standby, the standby that connected late"
  grep -q "path tcp -> tcp-standby-2" "$WORK/agent1.err" &&
    fail "agent 1 skipped B for C: $(grep -m1 'path tcp -> tcp-standby-2' "$WORK/agent1.err")"
  grep -h "path tcp-standby reconnected" "$WORK/agent1.err" | head -2
fi
if [[ $MODE == return ]]; then
  grep -q "rank .* to rank .*: path tcp-standby -> tcp (recovered" "$WORK/agent1.err" ||
    grep -q "rank .* to rank .*: path tcp-standby -> tcp (peer moved" "$WORK/agent1.err" ||
    fail "agent 1 never moved back up to network A after it returned"
  grep -h "path tcp-standby -> tcp" "$WORK"/agent*.err | head -4
  back=$(grep -h "path tcp-standby -> tcp" "$WORK/agent1.err" | awk '{print $1}' | sort | head -1)
  echo "first move back $(awk -v a="$UP" -v b="$(date -d "$back" +%s.%N)" 'BEGIN {printf "%.0f", (b - a) * 1000}') ms after network A came back"
  if command -v curl >/dev/null; then
    [[ -s $RECOVERED ]] || fail "agent 1's /metrics never counted a recovery to tcp"
    grep -q '^tributary_peer_transport{.*transport="tcp".*} 1' "$RECOVERED" ||
      fail "agent 1's /metrics shows no peer back on tcp: $(grep peer_transport "$RECOVERED")"
    grep -E '^tributary_link_recoveries_total' "$RECOVERED"
  fi
fi
if [[ $MODE == reset ]]; then
  grep -q "rank .* to rank .*: path tcp -> tcp-standby (error" "$WORK/agent1.err" ||
    fail "agent 1 logged no move to the standby path for the error"
  grep -q "rank .* to rank .*: path tcp reconnected" "$WORK/agent1.err" ||
    fail "agent 1 never put a new connection on A in"
  grep -qE "rank .* to rank .*: path tcp-standby -> tcp \((recovered|peer moved)" "$WORK/agent1.err" ||
    fail "agent 1 never moved back up to A after the reconnect"
  grep -h "path tcp reconnected\|path tcp-standby -> tcp " "$WORK/agent1.err" | head -4
  back=$(grep -h "path tcp-standby -> tcp " "$WORK/agent1.err" | awk '{print $1}' | sort | tail -1)
  [[ -s $STATUS ]] || fail "tributary status never showed a pair back on A after its moves: $(cat "$STATUS.new")"
  sed -n '/^links/,/^$/p' "$STATUS"
  if command -v curl >/dev/null; then
    grep -qE '^tributary_link_reconnects_total [1-9]' "$WORK/agent1.reconnects" ||
      fail "agent 1's /metrics never counted a reconnect: $(cat "$WORK/agent1.reconnects")"
    grep -E '^tributary_link_(reconnects|recoveries)_total' "$WORK/agent1.reconnects"
  fi
  echo "last pair back on A $(awk -v a="$CUT" -v b="$(date -d "$back" +%s.%N)" 'BEGIN {printf "%.0f", (b - a) * 1000}') ms after the cut"
elif [[ $MODE != resetall ]] && command -v curl >/dev/null; then
  [[ -s $SCRAPED ]] || fail "agent 1's /metrics never counted a move to tcp-standby"
  grep -q '^tributary_peer_transport{.*transport="tcp-standby".*} 1' "$SCRAPED" ||
    fail "agent 1's /metrics shows no peer on tcp-standby: $(grep peer_transport "$SCRAPED")"
  grep -E '^tributary_(link_fallbacks_total|peer_transport)' "$SCRAPED"
fi
case $MODE in
  return) what="network A cut under agent 1 mid-run and brought back" ;;
  flap) what="network A down and up under agent 1 three times mid-run, moved down and back up each time" ;;
  shm) what="agent 1's shared-memory paths failed mid-run (pulse connections killed)" ;;
  three) what="networks A then B cut under agent 1 mid-run, its pairs on C" ;;
  reset) what="agent 1's connections on A reset mid-run, re-dialled, its pairs back on A" ;;
  resetall) what="every data connection of agent 1 reset at once mid-run, its pairs waiting for new ones and going on" ;;
  late) what="the standby path absent at the view's start, re-dialled, then A cut under agent 1: pairs on the standby" ;;
  *) what="network A cut under agent 1 mid-run" ;;
esac
echo "PASSED: $N agents, $what: $STEPS correct, agreed steps in epoch 1"
