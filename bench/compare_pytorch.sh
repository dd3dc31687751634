#!/usr/bin/env bash
# Side-by-side CPU training throughput: towerps-bench train vs bench/pytorch_baseline.py, same
# model, batch, optimizer, data and thread count, run back to back (the machine is shared, so each
# triple is run `rounds` times, alternating, and the best of each is kept). PyTorch runs twice:
# with OpenBLAS limited to T threads (the fair comparison), and with only torch.set_num_threads(T)
# (OpenBLAS then uses every core for Linear layers).
#   bench/compare_pytorch.sh [--seconds S] [--rounds R] [--models "mlp cnn"] [--threads "1 2"]
#                            [--batch B]
# Prints a Markdown table: model, threads, TowerPS, PyTorch (BLAS pinned), ratio, PyTorch
# (BLAS unpinned), ratio; examples/s.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=8 rounds=2 models="mlp cnn" threads="1 2" batch=64
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
    *) echo "compare_pytorch: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bench=build/release/bin/towerps-bench
[ -x "$bench" ] || { echo "compare_pytorch: build first: scripts/build.sh release" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null ||
  { echo "compare_pytorch: needs python3-torch (apt-get install -y python3-torch)" >&2; exit 1; }

# Both sides run the OpenBLAS kernels TowerPS picks for this CPU (kernels/cpu/blas_kernels.h).
coretype=$("$bench" blas --json | sed -n 's/.*"coretype":"\([^"]*\)".*/\1/p')
if [ -n "$coretype" ] && [ -z "${OPENBLAS_CORETYPE+set}" ]; then export OPENBLAS_CORETYPE="$coretype"; fi
echo "both sides: $("$bench" blas)" >&2

eps() { sed -n 's/.*"examples_per_sec": *\([0-9.]*\).*/\1/p'; }
best() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b ? a : b) }'; }

echo "| model | batch | threads | TowerPS | PyTorch, OpenBLAS at T threads | ratio | PyTorch, OpenBLAS default | ratio |"
echo "|---|---|---|---|---|---|---|---|"
for m in $models; do
  for t in $threads; do
    ours=0 theirs=0 unpinned=0
    for _ in $(seq "$rounds"); do
      o=$("$bench" train --model "$m" --batch "$batch" --intra-op-threads "$t" \
            --seconds "$seconds" --json 2>/dev/null | eps)
      p=$(/usr/bin/python3 bench/pytorch_baseline.py --model "$m" --batch "$batch" \
            --threads "$t" --seconds "$seconds" --json 2>/dev/null | eps)
      u=$(/usr/bin/python3 bench/pytorch_baseline.py --model "$m" --batch "$batch" \
            --threads "$t" --blas-threads 0 --seconds "$seconds" --json 2>/dev/null | eps)
      ours=$(best "$ours" "$o") theirs=$(best "$theirs" "$p") unpinned=$(best "$unpinned" "$u")
      echo "  $m t=$t: towerps $o, pytorch $p, pytorch (OpenBLAS default) $u" >&2
    done
    ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    ratio_u=$(awk -v a="$ours" -v b="$unpinned" 'BEGIN { printf "%.2f", a / b }')
    echo "| $m | $batch | $t | $ours | $theirs | $ratio | $unpinned | $ratio_u |"
  done
done
