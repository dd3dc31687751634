#!/usr/bin/env bash
# Accuracy check: single-process training on Fashion-MNIST must reach
#   mlp >= 0.87 test accuracy within 5 epochs, cnn >= 0.90 within 10 epochs
# (batch 64, SGD lr 0.01 momentum 0.9, seed 1). A model passes when any epoch up to the limit
# reaches its threshold; the script prints every epoch and exits non-zero on a miss.
#   scripts/check_accuracy.sh [--models "mlp cnn"] [--intra-op-threads T]
# Takes a few minutes on 2 cores (cnn dominates). Builds the release preset first.
set -euo pipefail
cd "$(dirname "$0")/.."
models="mlp cnn" threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="$2"; shift 2 ;;
    --intra-op-threads) threads="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "check_accuracy: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
scripts/build.sh release >/dev/null
status=0
for m in $models; do
  case "$m" in
    mlp) epochs=5 threshold=0.87 ;;
    cnn) epochs=10 threshold=0.90 ;;
    *) echo "check_accuracy: no threshold for model '$m'" >&2; exit 2 ;;
  esac
  echo "=== $m: $epochs epochs, need test accuracy >= $threshold"
  out=$(build/release/bin/towerps-bench train --model "$m" --batch 64 --epochs "$epochs" \
          --intra-op-threads "$threads" --json)  # progress lines go to stderr
  accs=$(sed -n 's/.*"test_accuracy":\[\([^]]*\)\].*/\1/p' <<<"$out")
  best=$(tr ',' '\n' <<<"$accs" | sort -g | tail -1)
  first=$(tr ',' '\n' <<<"$accs" | awk -v t="$threshold" '$1 >= t { print NR; exit }')
  if [ -n "$first" ]; then
    echo "PASS $m: test accuracy $best (>= $threshold first at epoch $first of $epochs)"
  else
    echo "FAIL $m: best test accuracy $best < $threshold in $epochs epochs"
    status=1
  fi
done
exit $status
