#!/usr/bin/env bash
# Modes at the default rate: `towerps-launch --mode M --workers N --epochs 2` on the mlp, with
# every default (--lr 0.05, --lr-scaling share), for M in sync, async, ssp (--staleness 2) and
# softsync (--softsync-n 2) and N in 2, 4 and 8, over seeds 1-3. Prints every job's test
# accuracy and, per (M, N), the mean and its gap to sync's mean; exits 1 when a mean gap exceeds
# 0.02 or a job fails (a collapse or a NaN fails it). The table of docs/PERFORMANCE.md.
#   scripts/check_modes.sh [--workers "2 4 8"] [--seeds "1 2 3"] [--epochs 2]
# About 2.5 minutes on 2 cores (36 jobs of 2-3 s). Builds the release preset first.
set -euo pipefail
cd "$(dirname "$0")/.."
workers="2 4 8" seeds="1 2 3" epochs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "check_modes: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
scripts/build.sh release >/dev/null
work=$(mktemp -d "${TMPDIR:-/tmp}/towerps-modes.XXXXXX")
trap 'rm -rf "$work"' EXIT
status=0
printf '%-9s %7s %5s %9s\n' mode workers seed accuracy
for n in $workers; do
  for mode in sync async ssp softsync; do
    case "$mode" in
      ssp) extra=(--staleness 2) ;;
      softsync) extra=(--softsync-n 2) ;;
      *) extra=() ;;
    esac
    for seed in $seeds; do
      out="$work/$mode-$n-$seed"
      if ! build/release/bin/towerps-launch --mode "$mode" "${extra[@]}" --workers "$n" \
          --epochs "$epochs" --seed "$seed" --run-dir "$out.run" --summary-out "$out.json" \
          >"$out.log" 2>&1; then
        echo "check_modes: $mode with $n workers, seed $seed failed: $(tail -n 1 "$out.log")" >&2
        status=1
        continue
      fi
      acc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' \
              "$out.json")
      printf '%-9s %7s %5s %9s\n' "$mode" "$n" "$seed" "$acc"
      echo "$mode $n $acc" >>"$work/all"
    done
  done
done
echo
python3 - "$work/all" <<'EOF' || status=1
import collections, statistics, sys
acc = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, n, a = line.split()
    acc[(mode, int(n))].append(float(a))
print(f"{'mode':9} {'workers':>7} {'mean':>7} {'min':>7} {'max':>7} {'vs sync':>8}")
bad = []
for (mode, n), v in sorted(acc.items(), key=lambda k: (k[0][1], k[0][0] != "sync", k[0][0])):
    sync = statistics.mean(acc[("sync", n)]) if acc.get(("sync", n)) else float("nan")
    gap = statistics.mean(v) - sync
    print(f"{mode:9} {n:7} {statistics.mean(v):7.4f} {min(v):7.4f} {max(v):7.4f} {gap:+8.4f}")
    if gap < -0.02:
        bad.append(f"{mode} at {n} workers ({gap:+.4f})")
if bad:
    print("check_modes: more than 0.02 below sync: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
exit $status
