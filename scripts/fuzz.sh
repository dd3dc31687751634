#!/usr/bin/env bash
# Builds the fuzz preset (clang-14, libFuzzer, ASan + UBSan) and runs every harness of tests/fuzz.
#   scripts/fuzz.sh [SECONDS]        each harness for SECONDS (default 60)
#   scripts/fuzz.sh --runs N         each harness for N executions (the docs/SECURITY.md record)
#   scripts/fuzz.sh --only NAME ...  only the named harness (repeatable; e.g. --only message)
#   scripts/fuzz.sh --jobs N         N harnesses at a time (default: the number of cores)
# Each harness starts from a temporary copy of its seeds (tests/fuzz/corpus/<harness>/; the repo
# is never written). A finding (crash, sanitizer report, broken invariant, timeout, leak, OOM)
# is kept under build/fuzz/findings/<harness>/, with the log in build/fuzz/logs/, and makes the
# script exit 1 after the other harnesses ran. Reproduce one: build/fuzz/bin/<harness>_fuzzer FILE
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
runs=""
only=()
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    --jobs)
      [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: --jobs wants a positive count, not '$2'" >&2; exit 2; }
      jobs="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    [0-9]*) seconds="$1"; shift ;;
    *) echo "fuzz: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# harness:max_len (bytes). Small enough for speed, large enough for the seeds and their growth.
harnesses=(
  message:2048 checkpoint:1024 idx:512 cifar10:10000 npy:512 criteo:1024
  hostfile:512 cluster_spec:512 config:1024 straggler:128 towers:128 worker_args:1024
)

scripts/setup.sh
scripts/build.sh fuzz

bin=build/fuzz/bin
findings=build/fuzz/findings
logs=build/fuzz/logs
mkdir -p "$findings" "$logs"
work=$(mktemp -d "${TMPDIR:-/tmp}/towerps-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"

if [ -n "$runs" ]; then
  # Bounded all the same: a harness that cannot reach N runs in 30 minutes fails.
  budget=(-runs="$runs" -max_total_time=1800)
  limit=1800
  echo "=== fuzz: $runs executions per harness"
else
  budget=(-max_total_time="$seconds")
  limit=$seconds
  echo "=== fuzz: $seconds s per harness"
fi
echo "=== fuzz: $jobs harnesses at a time"
printf '%-14s %12s %9s %16s  %s\n' harness executions seconds "corpus (files)" result

# run_harness NAME MAX_LEN: fuzzes one harness; its table row goes to $work/NAME.row, and
# $work/NAME.failed exists when it failed.
run_harness() {
  local name=$1 max_len=$2
  local corpus="$work/$name"
  mkdir -p "$corpus" "$findings/$name"
  cp tests/fuzz/corpus/"$name"/* "$corpus"/
  local dict=()
  if [ -f "tests/fuzz/$name.dict" ]; then dict=(-dict="tests/fuzz/$name.dict"); fi
  local log="$logs/$name.log"
  local start rc=0
  start=$(date +%s.%N)
  # -timeout: one input taking over 10 s is a finding; timeout(1) bounds the whole run.
  timeout --signal=KILL $((limit + 300)) \
    "$bin/${name}_fuzzer" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/$name/" "${dict[@]}" "${budget[@]}" \
    "$corpus" >"$log" 2>&1 || rc=$?
  local elapsed execs files result=ok cause=""
  elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  files=$(ls "$corpus" | wc -l)
  if [ "$rc" -ne 0 ]; then
    # libFuzzer names the input it kept: "Test unit written to <file>".
    local found
    found=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    if [ -n "$found" ]; then
      result="FINDING: $found (log: $log)"
      # Its cause is printed under the row too: CI keeps only what is printed.
      cause=$(grep -E -m 3 "runtime error|ERROR: [A-Za-z]+Sanitizer|ERROR: libFuzzer|FUZZ_CHECK" \
        "$log" | sed 's/^/    /' || true)
    else
      result="FAILED with exit code $rc (log: $log)"
    fi
  elif [ -n "$runs" ] && [ "${execs:-0}" -lt "$runs" ]; then
    result="FAILED: only ${execs:-0} of $runs executions in the time bound (log: $log)"
    rc=1
  fi
  {
    printf '%-14s %12s %9s %16s  %s\n' "$name" "${execs:-?}" "$elapsed" "$files" "$result"
    if [ -n "$cause" ]; then echo "$cause"; fi
  } >"$work/$name.row"
  if [ "$rc" -ne 0 ]; then touch "$work/$name.failed"; fi
}

# Up to $jobs harnesses at a time; the rows come out in the list's order once all are done.
names=()
for entry in "${harnesses[@]}"; do
  name=${entry%%:*}
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $name "* ]]; then continue; fi
  names+=("$name")
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_harness "$name" "${entry##*:}" &
done
wait
failed=()
for name in "${names[@]}"; do
  if [ ! -e "$work/$name.row" ]; then
    printf '%-14s %12s %9s %16s  %s\n' "$name" "?" "?" "?" "FAILED: its runner stopped early"
    touch "$work/$name.failed"
  else
    cat "$work/$name.row"
  fi
  if [ -e "$work/$name.failed" ]; then failed+=("$name"); fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "=== fuzz: findings or failures in: ${failed[*]}" >&2
  exit 1
fi
echo "=== fuzz: every harness ran without a finding"
