#!/usr/bin/env bash
# Long libFuzzer runs, one target at a time, at the lowest CPU priority, recorded in
# bench/results/fuzz_<date>.md: the command, executions, coverage (edges and features
# libFuzzer reports at the end), corpus size, time and crashes. What a run found is
# merged (minimised) into the checked-in corpus, tests/fuzz/corpus/<target>/.
#
#   bench/fuzz_long.sh                     # every target, 10,000,000 executions each
#   bench/fuzz_long.sh -n 1000000 frame    # one target, fewer executions
#   bench/fuzz_long.sh -t 60               # every target, at most 60 s each
#
# Needs the fuzz build (cmake/TributaryFuzz.cmake: build/release/fuzz/). A crash stops the
# script with the reproducer's path; the table row says so.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FUZZ_DIR=${FUZZ_DIR:-$ROOT/build/release/fuzz}
RUNS=10000000
SECONDS_FLAG=""
while [[ "${1:-}" == "-n" || "${1:-}" == "-t" ]]; do
  if [[ "$1" == "-n" ]]; then RUNS=$2; else SECONDS_FLAG="-max_total_time=$2"; fi
  shift 2
done
TARGETS=${*:-"frame data_handshake join_handshake control_codec journal codec membership"}
OUT="$ROOT/bench/results/fuzz_$(date -u +%Y-%m-%d).md"
WORK="$ROOT/build/fuzz_long"
mkdir -p "$WORK"

if [[ ! -f "$OUT" ]]; then
  cat >"$OUT" <<EOF
# Long fuzzing runs, $(date -u +%Y-%m-%d)

\`bench/fuzz_long.sh\` on this machine ($(nproc) cores, shared; \`nice -n 19\`), clang $(clang++ -dumpversion 2>/dev/null || echo '?'),
libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer (tests/fuzz/CMakeLists.txt).
Each run starts from the checked-in corpus and writes new inputs to a scratch folder,
merged afterwards into \`tests/fuzz/corpus/<target>/\`. Coverage: \`cov\` = code edges,
\`ft\` = features, as libFuzzer's final line reports them.

| target | command | executions | exec/s | cov | ft | corpus | seconds | crashes |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
EOF
fi

for t in $TARGETS; do
  bin="$FUZZ_DIR/${t}_fuzzer"
  [[ -x "$bin" ]] || { echo "no $bin: build the fuzz targets first" >&2; exit 1; }
  scratch="$WORK/$t"
  rm -rf "$scratch" && mkdir -p "$scratch"
  log="$WORK/$t.log"
  cmd="nice -n 19 ${t}_fuzzer -runs=$RUNS ${SECONDS_FLAG:+$SECONDS_FLAG }-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 <scratch> tests/fuzz/corpus/$t"
  echo "fuzzing $t: $RUNS executions" >&2
  start=$(date +%s)
  status=0
  (cd "$WORK" && nice -n 19 "$bin" -runs="$RUNS" $SECONDS_FLAG -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$WORK/$t-" "$scratch" "$ROOT/tests/fuzz/corpus/$t") \
    >"$log" 2>&1 || status=$?
  seconds=$(($(date +%s) - start))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | awk '{print $2}' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | awk '{print $2}' | tail -1)
  last=$(grep -E '(DONE|NEW|REDUCE|pulse|INITED) +cov:' "$log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=0
  if [[ $status -ne 0 ]]; then
    crashes=1
  fi
  # Merge what this run found into the checked-in corpus (minimised: only inputs that add
  # coverage are kept).
  nice -n 19 "$bin" -merge=1 "$ROOT/tests/fuzz/corpus/$t" "$scratch" >>"$log" 2>&1 || true
  corpus=$(find "$ROOT/tests/fuzz/corpus/$t" -type f | wc -l)
  echo "| $t | \`$cmd\` | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $corpus | $seconds | $crashes |" >>"$OUT"
  if [[ $crashes -ne 0 ]]; then
    echo "$t crashed (exit $status): see $log and $WORK/$t-*" >&2
    exit 1
  fi
done
echo "wrote $OUT" >&2
