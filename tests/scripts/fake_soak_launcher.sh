#!/usr/bin/env bash
# Stands in for towerps-launch in soak_verdict_test.sh: lists three processes (python3, not
# TowerPS) in <--run-dir>/processes.txt as towerps-launch does, each adding FAKE_SOAK_GROW_KIB
# KiB of touched memory every 100 ms (0: flat). Exits 143 on SIGTERM as towerps-launch does;
# with FAKE_SOAK_FAIL_AFTER=S it instead fails on its own after S seconds.
set -u
run_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --run-dir) run_dir="$2"; shift 2 ;;
    *) shift ;;
  esac
done
mkdir -p "$run_dir"
pids=()
for i in 1 2 3; do
  python3 -c '
import sys, time
grow, keep = int(sys.argv[1]), []
open(sys.argv[2], "w").close()  # started: from here on its memory is steady
while True:
    if grow:
        keep.append(b"x" * (grow * 1024))
    time.sleep(0.1)
' "${FAKE_SOAK_GROW_KIB:-0}" "$run_dir/started.$i" &
  pids+=("$!")
done
# The processes are listed once their interpreters run, as a job's are once they start: an
# interpreter that is slow to start (a version manager's shim in front of python3) must not
# count as growth after the soak's warm-up. Bounded: 30 s.
for _ in $(seq 300); do
  [ -f "$run_dir/started.1" ] && [ -f "$run_dir/started.2" ] && [ -f "$run_dir/started.3" ] && break
  sleep 0.1
done
printf 'ps 0 pid %s log -\nworker 0 pid %s log -\nworker 1 pid %s log -\n' "${pids[@]}" \
  > "$run_dir/processes.txt"
stop() { kill "${pids[@]}" 2>/dev/null; wait; exit "$1"; }
trap 'stop 143' TERM
trap 'stop 130' INT
if [ "${FAKE_SOAK_FAIL_AFTER:-0}" != 0 ]; then
  sleep "$FAKE_SOAK_FAIL_AFTER"
  echo "fake job: worker:1 failed"
  stop 1
fi
while :; do sleep 0.1; done
