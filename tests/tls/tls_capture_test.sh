#!/usr/bin/env bash
# Is a gradient readable on the wire? Two agent processes (tls_pattern_agent: a real Worker
# each, joined through a real coordinator) in two network namespaces joined by a veth
# all-reduce a 4 MiB buffer of the 16-byte pattern "GRADIENT-PATTERN" while tcpdump records
# the veth. Cases:
#   --tls off                          the pattern IS in the capture (the test can fail)
#   --tls all                          it is not, and the agents logged TLS 1.3
#   --tls cross-zone, zones a and b    it is not
#   --tls cross-zone, one zone         it is (same zone: plaintext by design)
#
#   tls_capture_test.sh TRIBUTARY_BIN PATTERN_AGENT_BIN
#
# Needs root, network namespaces and tcpdump; otherwise exits 77 (skipped) saying why.
set -euo pipefail

BIN=$1
AGENT=$2
source "$(dirname "$0")/../netns_preflight.sh"
netns_preflight tcpdump "no tcpdump (scripts/deps.sh installs it)"

NS_A=tta$$
NS_B=ttb$$
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]:-}"; do [[ -n $pid ]] && kill -9 "$pid" 2>/dev/null || true; done
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
fail() {
  echo "FAILED: $*" >&2
  for f in "$WORK"/*.err; do [[ -f $f ]] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
  exit 1
}

ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add ttva$$ netns "$NS_A" type veth peer name ttvb$$ netns "$NS_B"
ip -n "$NS_A" addr add 10.91.0.1/24 dev ttva$$
ip -n "$NS_B" addr add 10.91.0.2/24 dev ttvb$$
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set ttva$$ up
ip -n "$NS_B" link set ttvb$$ up

export TRIBUTARY_SECRET=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n')
PATTERN=GRADIENT-PATTERN

# run_case NAME TLS_MODE ZONE_A ZONE_B: the capture in $WORK/NAME.pcap
run_case() {
  local name=$1 mode=$2 zone_a=$3 zone_b=$4
  local ready=$WORK/$name.endpoint pcap=$WORK/$name.pcap
  ip netns exec "$NS_A" tcpdump -i ttva$$ -s 0 -U -w "$pcap" tcp 2>"$WORK/$name.tcpdump.err" &
  local dump=$!
  PIDS+=("$dump")
  for ((t = 0; t < 100; t++)); do
    grep -q "listening on" "$WORK/$name.tcpdump.err" 2>/dev/null && break
    sleep 0.05
  done
  ip netns exec "$NS_A" "$BIN" coordinator --bind tcp://10.91.0.1:0 --world-size 2 \
    --ready-file "$ready" >"$WORK/$name.coordinator.out" 2>"$WORK/$name.coordinator.err" &
  local coordinator=$!
  PIDS+=("$coordinator")
  for ((t = 0; t < 200; t++)); do
    [[ -s $ready ]] && break
    sleep 0.05
  done
  [[ -s $ready ]] || fail "$name: the coordinator did not bind"
  local endpoint
  endpoint=$(cat "$ready")
  ip netns exec "$NS_A" timeout 120 "$AGENT" "$endpoint" 10.91.0.1 "$zone_a" "$mode" \
    >"$WORK/$name.a.out" 2>"$WORK/$name.a.err" &
  local a=$!
  ip netns exec "$NS_B" timeout 120 "$AGENT" "$endpoint" 10.91.0.2 "$zone_b" "$mode" \
    >"$WORK/$name.b.out" 2>"$WORK/$name.b.err" &
  local b=$!
  PIDS+=("$a" "$b")
  wait "$a" || fail "$name: agent a exited with $?"
  wait "$b" || fail "$name: agent b exited with $?"
  grep -q "pattern all-reduce ok" "$WORK/$name.a.out" || fail "$name: agent a did not finish"
  kill "$coordinator" 2>/dev/null || true
  wait "$coordinator" 2>/dev/null || true
  sleep 0.2  # tcpdump -U writes each packet as it comes; give the last ones a moment
  kill -INT "$dump" 2>/dev/null || true
  wait "$dump" 2>/dev/null || true
  local bytes
  bytes=$(stat -c %s "$pcap")
  # Each agent sends at least half its 4 MiB three times: a capture much smaller missed it.
  ((bytes > 4000000)) || fail "$name: the capture holds only $bytes bytes"
  echo "$name: captured $bytes bytes"
}

found() { grep -a -F -c "$PATTERN" "$1" || true; }

run_case plain off zone-a zone-a
n=$(found "$WORK/plain.pcap")
((n > 0)) || fail "--tls off: the pattern is not in the capture, so this test cannot see plaintext"
echo "--tls off: the pattern appears in $n captured lines (plaintext, as expected)"

run_case all all zone-a zone-a
n=$(found "$WORK/all.pcap")
((n == 0)) || fail "--tls all: the pattern appears $n times in the capture"
grep -q "TLS 1.3" "$WORK/all.a.err" || fail "--tls all: agent a logged no TLS 1.3 link"
echo "--tls all: the pattern is absent from the capture"

run_case cross cross-zone zone-a zone-b
n=$(found "$WORK/cross.pcap")
((n == 0)) || fail "--tls cross-zone across zones: the pattern appears $n times in the capture"
echo "--tls cross-zone (zones a, b): the pattern is absent from the capture"

run_case same cross-zone zone-a zone-a
n=$(found "$WORK/same.pcap")
((n > 0)) || fail "--tls cross-zone inside one zone: expected plaintext, the pattern is absent"
echo "--tls cross-zone (one zone): plaintext inside the zone, as documented"
echo "PASSED: the gradient pattern crosses the veth only where TLS is off"
