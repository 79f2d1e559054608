#!/usr/bin/env bash
# Compare Tributary's all-reduce with Open MPI and Gloo on this machine, in the
# same run, measured the nccl-tests way (see docs/DESIGN "Performance"), plus
# iperf3 on loopback as the link baseline.
#
#   bench/compare.sh                 # R=3, N in 2 4 8, 4 KiB .. 256 MiB
#   bench/compare.sh --quick         # R=1, 4 KiB .. 16 MiB (smoke check)
#   bench/compare.sh --np "4" -e 1M  # restrict
#   bench/compare.sh --shm           # same host, shared memory: Tributary shm vs
#                                    # Open MPI vader vs Tributary TCP
#
# Each repetition runs, interleaved: iperf3 (one way, --bidir, 4 streams at
# once for the machine's loopback capacity), then for each N
# and each size band: Open MPI, Gloo (all its algorithms), Tributary (if
# build/release/tributary exists; skipped with a note otherwise). Every process
# runs under `timeout`. Raw logs go to build/compare/runs/<stamp>/; the medians
# over repetitions go to bench/results/compare[_quick]_<date>.md, and their plot
# (busbw vs size per library and N, bench/plots/plot_results.py) next to it as .png.
#
# Sizes are split in two bands so big messages do not get small-message
# iteration counts: <= 1 MiB uses --iters/--warmup, larger sizes use
# --large-iters/--large-warmup. Every system gets the same counts.
set -euo pipefail

ORIG_ARGS="$*"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR="$ROOT/build/compare"
TRIBUTARY_BIN=${TRIBUTARY_BIN:-$ROOT/build/release/cli/tributary}

REPS=3
NPS="2 4 8"
MIN_BYTES=4096
MAX_BYTES=$((256 << 20))
FACTOR=16
ITERS=20
WARMUP=5
LARGE_ITERS=5
LARGE_WARMUP=2
BAND_SPLIT=$((1 << 20))  # sizes <= this are "small"
# api_ring (gloo::allreduce RING) is left out by default: on this machine it
# intermittently stalls for 0.5-18 s per call at >= 1 MiB, N >= 4, which alone
# blows the runtime budget. Ask for it with --gloo-algos.
GLOO_ALGOS="ring,ring_chunk,halving_dbl,bcube,api_bcube"
IPERF_SECS=3
TIMEOUT_SMALL=120
TIMEOUT_LARGE=900
QUICK=0
SHM=0
OUT=""
BUILD=1

usage() {
  sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  cat <<EOF
Options:
  --quick              R=1, sizes up to 16 MiB, iperf3 2 s
  --shm                shared-memory comparison: Open MPI with --mca btl vader,self,
                       Tributary --transport shm and --transport tcp; no Gloo, no iperf3
  -r, --reps R         repetitions (default $REPS)
  --np "LIST"          world sizes (default "$NPS")
  -b, -e, -f           min bytes, max bytes, factor (K/M/G suffixes; default 4K 256M 16)
  --iters N, --warmup N            small band (default $ITERS, $WARMUP)
  --large-iters N, --large-warmup N  sizes > 1 MiB (default $LARGE_ITERS, $LARGE_WARMUP)
  --gloo-algos a,b     from ring,ring_chunk,halving_dbl,bcube,api_ring,api_bcube
                       (default all but api_ring)
  --iperf-secs S       iperf3 duration per test (default $IPERF_SECS)
  --timeout-small S, --timeout-large S   per launch (default $TIMEOUT_SMALL, $TIMEOUT_LARGE)
  --out FILE           results file (default bench/results/compare[_quick]_<date>.md)
  --no-build           use the binaries already in build/compare
Env: TRIBUTARY_BIN (default build/release/cli/tributary)
EOF
}

to_bytes() {  # 4K / 16M / 1G / 4096 -> bytes
  local v=$1
  case $v in
    *[kK]) echo $(( ${v%?} << 10 )) ;;
    *[mM]) echo $(( ${v%?} << 20 )) ;;
    *[gG]) echo $(( ${v%?} << 30 )) ;;
    *) echo $(( v )) ;;
  esac
}

SIZE_FLAGS_SET=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) QUICK=1; shift ;;
    --shm) SHM=1; shift ;;
    -r|--reps) REPS=$2; shift 2 ;;
    --np) NPS=$2; shift 2 ;;
    -b) MIN_BYTES=$(to_bytes "$2"); SIZE_FLAGS_SET=1; shift 2 ;;
    -e) MAX_BYTES=$(to_bytes "$2"); SIZE_FLAGS_SET=1; shift 2 ;;
    -f) FACTOR=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --large-iters) LARGE_ITERS=$2; shift 2 ;;
    --large-warmup) LARGE_WARMUP=$2; shift 2 ;;
    --gloo-algos) GLOO_ALGOS=$2; shift 2 ;;
    --iperf-secs) IPERF_SECS=$2; shift 2 ;;
    --timeout-small) TIMEOUT_SMALL=$2; shift 2 ;;
    --timeout-large) TIMEOUT_LARGE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ $QUICK == 1 ]]; then
  REPS=1
  IPERF_SECS=2
  [[ $SIZE_FLAGS_SET == 1 ]] || MAX_BYTES=$((16 << 20))
fi

STAMP=$(date +%Y%m%d_%H%M%S)
DATE=$(date +%Y-%m-%d)
if [[ -z $OUT ]]; then
  if [[ $SHM == 1 ]]; then OUT="$ROOT/bench/results/compare_shm_$DATE.md"
  elif [[ $QUICK == 1 ]]; then OUT="$ROOT/bench/results/compare_quick_$DATE.md"
  else OUT="$ROOT/bench/results/compare_$DATE.md"; fi
fi
RUN_DIR="$BUILD_DIR/runs/$STAMP"
mkdir -p "$RUN_DIR" "$(dirname "$OUT")"
META="$RUN_DIR/meta.txt"
note() { echo "compare.sh: $*" >&2; echo "note: $*" >>"$META"; }

# ---- build (nice'd, one job: the machine is shared) ----
if [[ $BUILD == 1 ]]; then
  nice cmake -S "$ROOT/bench/compare" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  nice cmake --build "$BUILD_DIR" -j1
fi
MPI_BENCH="$BUILD_DIR/mpi_allreduce_bench"
GLOO_BENCH="$BUILD_DIR/gloo_allreduce_bench"

# ---- size bands: geometric sub-sweeps of -b..-e by -f ----
BANDS=()  # "min max iters warmup timeout"
small_max=0; large_min=0
for ((s = MIN_BYTES; s <= MAX_BYTES; s *= FACTOR)); do
  if ((s <= BAND_SPLIT)); then small_max=$s
  elif ((large_min == 0)); then large_min=$s; fi
done
((small_max > 0)) && BANDS+=("$MIN_BYTES $small_max $ITERS $WARMUP $TIMEOUT_SMALL")
((large_min > 0)) && BANDS+=("$large_min $MAX_BYTES $LARGE_ITERS $LARGE_WARMUP $TIMEOUT_LARGE")

MPI_ARGS=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl tcp,self
          --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
MPI_BTL=tcp
if [[ $SHM == 1 ]]; then
  MPI_ARGS=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl vader,self
            --mca oob_tcp_if_include lo)
  MPI_BTL=vader
fi

{
  echo "command: bench/compare.sh $ORIG_ARGS"
  echo "mode: $([[ $QUICK == 1 ]] && echo quick || echo full)$([[ $SHM == 1 ]] && echo ", shared memory"), repetitions=$REPS, np=[$NPS]"
  echo "sizes: $MIN_BYTES..$MAX_BYTES x$FACTOR; <=1 MiB: iters=$ITERS warmup=$WARMUP; >1 MiB: iters=$LARGE_ITERS warmup=$LARGE_WARMUP"
  echo "host: $(nproc) cores, $(uname -r), $(free -g | awk '/Mem:/{print $2}') GiB RAM"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); cpu pressure: $(head -1 /proc/pressure/cpu 2>/dev/null || echo n/a)"
  echo "versions: $(mpirun --version 2>/dev/null | head -1); gloo $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo '?'); $(iperf3 --version | head -1)"
  echo "openmpi flags: ${MPI_ARGS[*]}"
  echo "raw logs: ${RUN_DIR#"$ROOT"/}"
} >"$META"

# ---- check that Open MPI really takes the intended path (tcp, or vader with --shm) ----
verify_mpi_transport() {
  local log="$RUN_DIR/mpi_transport_check.txt" other='component (vader|sm|smcuda)( |$)'
  [[ $MPI_BTL == vader ]] && other='component tcp( |$)'
  if timeout -k 5 60 mpirun "${MPI_ARGS[@]}" --mca btl_base_verbose 30 -np 2 \
       "$MPI_BENCH" -b 4K -e 4K -n 2 -w 1 >"$log" 2>&1 \
     && grep -q "select: init of component $MPI_BTL returned success" "$log" \
     && ! grep -qE "$other" "$log"; then
    echo "openmpi transport check: btl $MPI_BTL selected, the other not loaded (btl_base_verbose)" >>"$META"
  else
    note "openmpi transport check FAILED, see ${log#"$ROOT"/}"
  fi
}
verify_mpi_transport

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# CPU pressure (PSI "some avg10", % of time a runnable task waited for a CPU)
# and the 1-min load, sampled before every launch: the machine is shared, and
# a number measured while others compile must be recognisable as such.
sample_load() {  # what
  local psi="?"
  [[ -r /proc/pressure/cpu ]] && psi=$(sed -n 's/^some avg10=\([0-9.]*\).*/\1/p' /proc/pressure/cpu)
  echo "$1 psi_cpu_some_avg10=$psi load1=$(cut -d' ' -f1 /proc/loadavg)" >>"$RUN_DIR/load.txt"
}

# ---- runners; each writes one log whose rows the aggregator reads ----
record_failure() {  # log rc what
  echo "# FAILED rc=$2 ($3)" >>"$1"
  note "FAILED rc=$2: $3 (log ${1#"$ROOT"/})"
}

start_iperf_server() {  # log port seconds [-1]; sets IPERF_PID once it listens (5 s at most)
  timeout -k 2 "$3" iperf3 -s ${4:-} -B 127.0.0.1 -p "$2" >"$1" 2>&1 &
  IPERF_PID=$!
  for _ in $(seq 50); do
    grep -q 'Server listening' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
}

run_iperf() {  # rep
  local rep=$1 port pid
  port=$(free_port)
  start_iperf_server "$RUN_DIR/r${rep}_iperf3_server.log" "$port" $((4 * IPERF_SECS + 30))
  pid=$IPERF_PID
  timeout -k 2 $((IPERF_SECS + 15)) iperf3 -c 127.0.0.1 -p "$port" -t "$IPERF_SECS" -J \
    >"$RUN_DIR/r${rep}_iperf3_oneway.json" 2>&1 || note "iperf3 one-way failed (rep $rep)"
  timeout -k 2 $((IPERF_SECS + 15)) iperf3 -c 127.0.0.1 -p "$port" -t "$IPERF_SECS" --bidir -J \
    >"$RUN_DIR/r${rep}_iperf3_bidir.json" 2>&1 || note "iperf3 bidir failed (rep $rep)"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  run_iperf_aggregate "$rep"
}

# The machine's loopback TCP capacity: AGG_STREAMS iperf3 processes at once (each
# iperf3 is one thread), half of them each way, summed. 1 MiB writes (iperf3's
# largest): on this machine they carry 20-40% more than the default 128 KiB. Every bandwidth-optimal
# all-reduce makes each rank send 2(N-1)/N of the buffer, so N ranks together push
# N x busbw bytes/s through loopback; no system can beat this sum divided by N.
AGG_STREAMS=4
run_iperf_aggregate() {  # rep
  local rep=$1 i ports=() servers=() clients=() reverse
  for ((i = 1; i <= AGG_STREAMS; i++)); do
    ports+=("$(free_port)")
    start_iperf_server "$RUN_DIR/r${rep}_iperf3_agg_server$i.log" "${ports[-1]}" \
      $((IPERF_SECS + 30)) -1
    servers+=("$IPERF_PID")
  done
  for ((i = 1; i <= AGG_STREAMS; i++)); do
    reverse=()
    ((i % 2 == 0)) && reverse=(-R)
    timeout -k 2 $((IPERF_SECS + 15)) iperf3 -c 127.0.0.1 -p "${ports[i - 1]}" -t "$IPERF_SECS" \
      -l 1M -J "${reverse[@]}" >"$RUN_DIR/r${rep}_iperf3_agg_$i.json" 2>&1 &
    clients+=($!)
  done
  for pid in "${clients[@]}"; do wait "$pid" || note "iperf3 aggregate stream failed (rep $rep)"; done
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
}

run_openmpi() {  # log np min max iters warmup timeout
  local log=$1 np=$2 rc=0
  timeout -k 5 "$7" mpirun "${MPI_ARGS[@]}" -np "$np" "$MPI_BENCH" \
    -b "$3" -e "$4" -f "$FACTOR" -n "$5" -w "$6" >"$log" 2>&1 || rc=$?
  ((rc == 0)) || record_failure "$log" "$rc" "openmpi np=$np $3..$4"
}

run_gloo() {  # log np min max iters warmup timeout
  local log=$1 np=$2 rc=0 r store pids=()
  store=$(mktemp -d "$RUN_DIR/gloo_store.XXXXXX")
  for ((r = 0; r < np; r++)); do
    local out="$log"; ((r == 0)) || out="$log.rank$r"
    timeout -k 5 "$7" "$GLOO_BENCH" --rank "$r" --size "$np" --store "$store" \
      --timeout "$7" ${GLOO_ALGOS:+--algos "$GLOO_ALGOS"} \
      -b "$3" -e "$4" -f "$FACTOR" -n "$5" -w "$6" >"$out" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  rm -rf "$store"
  if ((rc == 0)); then rm -f "$log".rank*
  else record_failure "$log" "$rc" "gloo np=$np $3..$4"; fi
}

run_tributary() {  # log np min max iters warmup timeout [transport]
  local log=$1 np=$2 rc=0 transport=(--transport tcp)
  # The loopback comparison is against Open MPI's and Gloo's TCP paths: Tributary's
  # default (auto) would pick shared memory between local processes.
  [[ -n ${8:-} ]] && transport=(--transport "$8")
  timeout -k 5 "$7" "$TRIBUTARY_BIN" bench --np "$np" -b "$3" -e "$4" -f "$FACTOR" \
    --iters "$5" --warmup "$6" --op all_reduce --dtype float32 "${transport[@]}" >"$log" 2>&1 || rc=$?
  ((rc == 0)) || record_failure "$log" "$rc" "tributary ${8:-} np=$np $3..$4"
}

# --shm: "tributary" is shared memory, "tributarytcp" the same processes' TCP path.
run_tributaryshm() { run_tributary "$@" shm; }
run_tributarytcp() { run_tributary "$@" tcp; }

SYSTEMS=(openmpi gloo)
[[ $SHM == 1 ]] && SYSTEMS=(openmpi)
if [[ -x $TRIBUTARY_BIN && $SHM == 1 ]]; then
  SYSTEMS+=(tributaryshm tributarytcp)
elif [[ -x $TRIBUTARY_BIN ]]; then
  SYSTEMS+=(tributary)
else
  note "tributary skipped: no executable at ${TRIBUTARY_BIN#"$ROOT"/} (build it, or set TRIBUTARY_BIN)"
fi

# ---- the interleaved runs ----
for ((rep = 1; rep <= REPS; rep++)); do
  if [[ $SHM == 0 ]]; then
    echo "compare.sh: repetition $rep/$REPS: iperf3" >&2
    sample_load "r${rep}_iperf3"
    run_iperf "$rep"
  fi
  for np in $NPS; do
    for band in "${BANDS[@]}"; do
      read -r bmin bmax iters warmup tmo <<<"$band"
      for sys in "${SYSTEMS[@]}"; do
        echo "compare.sh: repetition $rep/$REPS: $sys np=$np sizes $bmin..$bmax" >&2
        sample_load "r${rep}_np${np}_${sys}_${bmin}"
        # File name carries system and np too, for a bench without a header line.
        "run_$sys" "$RUN_DIR/r${rep}_np${np}_${sys}_${bmin}.log" "$np" "$bmin" "$bmax" \
          "$iters" "$warmup" "$tmo"
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$META"

AGGREGATE_MODE=()
[[ $SHM == 1 ]] && AGGREGATE_MODE=(--shm)
python3 "$ROOT/bench/compare/aggregate.py" --runs "$RUN_DIR" --out "$OUT" "${AGGREGATE_MODE[@]}"
echo "compare.sh: wrote ${OUT#"$ROOT"/} (raw logs in ${RUN_DIR#"$ROOT"/})" >&2
"$ROOT/bench/plots/plot_results.py" compare "$OUT"
