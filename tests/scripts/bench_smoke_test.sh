#!/usr/bin/env bash
# Each towerps-bench subcommand runs briefly and reports positive figures in its JSON (the
# benchmarks themselves are for measuring; this only keeps their code paths working, under the
# sanitizers too). Usage: bench_smoke_test.sh BIN_DIR
set -euo pipefail
bench="$1/towerps-bench"
fail() { echo "FAIL: $*" >&2; exit 1; }
positive() {  # JSON, field...
  local json="$1"; shift
  for f in "$@"; do
    v="$(sed -n "s/.*\"$f\": *\([0-9.e+-]*\).*/\1/p" <<< "$json")"
    awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }' || fail "$f is '$v' in $json"
  done
}
positive "$("$bench" transport --bytes 65536 --seconds 0.3 --json 2>/dev/null | tail -1)" \
  raw_zmq_gbps towerps_gbps ratio
ps_json="$("$bench" ps --chunk-bytes 65536 --chunks 4 --seconds 0.3 --json 2>/dev/null | tail -1)"
positive "$ps_json" goodput_gbps raw_zmq_gbps raw_zmq_echo_gbps echo_ratio round_ms server_update_ms
# The servers' update time is part of a round: it cannot exceed it.
field() { sed -n "s/.*\"$2\": *\([0-9.e+-]*\).*/\1/p" <<< "$1"; }
awk -v u="$(field "$ps_json" server_update_ms)" -v r="$(field "$ps_json" round_ms)" \
  'BEGIN { exit !(u + 0 < r + 0) }' || fail "server_update_ms exceeds round_ms in $ps_json"
# Far more chunks in flight than the raw echo's window: it once hung for good here.
positive "$(timeout 120 "$bench" ps --chunk-bytes 65536 --chunks 200 --seconds 0.3 --json 2>/dev/null |
  tail -1)" goodput_gbps raw_zmq_echo_gbps echo_ratio
positive "$("$bench" train --model mlp --seconds 0.3 --json 2>/dev/null | tail -1)" examples_per_sec
# Embedding rows by id, over both paths, and the table pushed whole: a step moves no more than
# 1.1x the ideal bytes (ids and rows once each way). Steps, not a time: the bytes of the step in
# flight at the measurement's ends (about half a step's) must weigh little, and 0.3 s under ASan
# on a busy machine gave 9 steps and 1.15x. 200, not 40: 40 steps took 35 ms on a fast machine,
# where the server's CPU, read from /proc in 10 ms ticks, could read 0.
sparse="$("$bench" sparse --unique-ids 2048 --ids 100000 --steps 200 --transport both --json \
  2>/dev/null)"
while read -r line; do
  positive "$line" rows_per_sec step_ms table_rows bytes_over_ideal client_cpu_s_per_million_rows
  # Each server's CPU per million rows, the one server's here.
  awk -v c="$(sed -n 's/.*"server_cpu_s_per_million_rows": *\[\([0-9.e+-]*\)\].*/\1/p' <<< "$line")" \
    'BEGIN { exit !(c + 0 > 0) }' || fail "no server CPU per million rows in $line"
  awk -v b="$(field "$line" bytes_over_ideal)" 'BEGIN { exit !(b + 0 <= 1.1) }' ||
    fail "a step moves over 1.1x the ideal bytes in $line"
done <<< "$sparse"
[ "$(wc -l <<< "$sparse")" -eq 2 ] || fail "sparse --transport both printed: $sparse"
positive "$("$bench" sparse --dense --ids 20000 --unique-ids 512 --seconds 0.3 --json 2>/dev/null |
  tail -1)" rows_per_sec
# The disk tier against the table in memory (--vs-memory): the tier run holds rows on disk and
# reads some of them there; the memory run has none.
tier="$("$bench" sparse --table-storage rocksdb --table-memory-mb 0.5 --vs-memory --ids 100000 \
  --unique-ids 2048 --seconds 0.5 --json 2>/dev/null)"
[ "$(wc -l <<< "$tier")" -eq 2 ] || fail "sparse --vs-memory printed: $tier"
positive "$(head -1 <<< "$tier")" rows_per_sec rows_on_disk disk_reads_per_step disk_writes_per_step
awk -v h="$(field "$(head -1 <<< "$tier")" memory_hit_rate)" 'BEGIN { exit !(h > 0 && h < 1) }' ||
  fail "the tier's memory hit rate is not in (0, 1): $tier"
[ "$(field "$(tail -1 <<< "$tier")" rows_on_disk)" = 0 ] || fail "the memory run has rows on disk"
"$bench" sparse --vs-memory >/dev/null 2>&1 && fail "--vs-memory without the tier was accepted"
# Incremental checkpoints: a delta of 200 rows of a 50,000-row table holds those rows' bytes.
ck="$("$bench" checkpoint --rows 50000 --touched 200 --deltas 2 --json 2>/dev/null)"
[ "$(field "$ck" delta_rows)" = 200 ] || fail "checkpoint: the delta holds other rows: $ck"
awk -v r="$(field "$ck" bytes_ratio)" 'BEGIN { exit !(r > 0.003 && r < 0.006) }' ||
  fail "checkpoint: a delta's bytes are not those of its rows (0.004 of the table's): $ck"
"$bench" checkpoint --touched 0 >/dev/null 2>&1 && fail "checkpoint --touched 0 was accepted"
# With a disk tier, the full checkpoint's file holds the rows in memory only (the tier is kept as
# RocksDB's checkpoint), and the chain restores every row (the bench fails otherwise).
ck="$("$bench" checkpoint --rows 50000 --touched 200 --deltas 2 --table-storage rocksdb \
  --table-memory-mb 1 --json 2>/dev/null)" || fail "checkpoint with a tier failed"
rows_in_file="$(field "$ck" full_rows_in_file)"
[ "${rows_in_file:-50000}" -lt 20000 ] || fail "checkpoint: the tier's rows were copied: $ck"
"$bench" checkpoint --table-storage disk >/dev/null 2>&1 && fail "--table-storage disk was accepted"
# The job against one process: a click model on its data, over one transport, the one process
# at the job's global batch (2 workers x 32) on the threads asked; the flags reach the job.
ctr="$(mktemp -d)"
trap 'rm -rf "$ctr"' EXIT
python3 "$(dirname "$0")/../../scripts/make_ctr_data.py" --out "$ctr" --train 4000 --test 500 \
  >/dev/null
job="$("$bench" job --model dlrm_small --dataset criteo --data-dir "$ctr" --servers 2 --steps 20 \
  --repeat 1 --transport shm --single-threads 1 --batch-size 32 --train-seconds 0.3 \
  --job-flags="--table-placement whole" --vs-flags=--bind-cores --json 2>/dev/null)" ||
  fail "job on click data failed"
positive "$job" shm_examples_per_sec single_examples_per_sec shm_over_single
# The configuration compared beside it: the same job bound to cores, its own figures.
grep -q '"vs":\[{"flags":"--bind-cores","transport":"shm","examples_per_sec":[1-9]' <<< "$job" ||
  fail "job --vs-flags: no figures of the bound job in $job"
[ "$(field "$job" single_batch)" = 64 ] && [ "$(field "$job" single_threads)" = 1 ] ||
  fail "job: the one process is not at the job's global batch on one thread: $job"
grep -q tcp_examples_per_sec <<< "$job" && fail "job --transport shm also ran over TCP: $job"
refused="$("$bench" job --model dlrm_small --dataset criteo --data-dir "$ctr" --steps 5 \
  --repeat 1 --job-flags="--table-placement sideways" 2>&1 >/dev/null)" &&
  fail "job: a bad --job-flags value was not refused by the launcher"
grep -q "table-placement=sideways is not one of" <<< "$refused" ||
  fail "job: the launcher's refusal of --job-flags is not in the error: $refused"
"$bench" job --transport udp >/dev/null 2>&1 && fail "job --transport udp was accepted"
# The servers' optimizer pass: every optimizer timed, whole and by rows, with its bits.
opt="$("$bench" optimizer --elements 1000 --updates 5 --json 2>/dev/null)"
[ "$(wc -l <<< "$opt")" -eq 4 ] || fail "optimizer printed: $opt"
while read -r line; do
  positive "$line" whole_us rows_us
  grep -q '"bits":"[0-9a-f]\{16\}"' <<< "$line" || fail "optimizer: no bits in $line"
done <<< "$opt"
echo "bench_smoke_test: OK"
