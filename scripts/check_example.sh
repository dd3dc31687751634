#!/usr/bin/env bash
# The library check: installs a built TowerPS into a temporary prefix, builds
# examples/custom_model and examples/recommendation out of tree against it with
# find_package(TowerPS), builds docs/API.md's code the same way (scripts/guide_snippets.py), and
# trains the first example's own model on its own dataset for 40 steps with `towerps-launch
# --worker-bin`, asserting that the training loss falls and that the launcher refuses a model and
# dataset that do not fit before starting anything; then the recommendation example's model on
# generated click logs, asserting a test AUC well above chance; then examples/pytorch with the
# installed Python package, asserting its six-line diff and 0.88 test accuracy.
#   scripts/check_example.sh [BUILD_DIR]    (default build/release; scripts/test.sh runs it)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.."
build="${1:-build/release}"
[ -x "$build/bin/towerps-launch" ] || { echo "check_example: build first: scripts/build.sh release" >&2; exit 1; }

work="$(mktemp -d /tmp/towerps-example.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

echo "=== example: cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
echo "=== example: building examples/custom_model against it (find_package(TowerPS 0.2))"
cmake -S examples/custom_model -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }

# The guide's code, built as its reader would build it (it once lacked an #include).
echo "=== example: building docs/API.md's code against it"
python3 scripts/guide_snippets.py docs/API.md "$work/guide"
cmake -S "$work/guide" -B "$work/guide/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/guide.log" 2>&1 || { cat "$work/guide.log"; exit 1; }
cmake --build "$work/guide/build" >> "$work/guide.log" 2>&1 || { cat "$work/guide.log"; exit 1; }

launch=("$prefix/bin/towerps-launch" --worker-bin "$work/build/my-worker")
echo "=== example: a mismatch is refused before any process starts"
set +e
"${launch[@]}" --model resnet20 --dataset stripes --run-dir "$work/refused" > "$work/refused.log" 2>&1
code=$?
set -e
if [ "$code" != 2 ] || ! grep -q "model resnet20 expects 3x32x32 inputs, but stripes examples are 1x28x28" "$work/refused.log" \
   || [ -e "$work/refused" ]; then
  echo "check_example: expected exit 2 naming both shapes and no run directory; got $code:" >&2
  cat "$work/refused.log" >&2
  exit 1
fi

echo "=== example: training small_resnet on stripes, 2 workers, 40 steps"
"${launch[@]}" --model small_resnet --dataset stripes --workers 2 --max-steps 40 --log-every 5 \
  --run-dir "$work/run" --metrics-out "$work/run/metrics-{rank}.jsonl" > "$work/train.log" 2>&1 \
  || { cat "$work/train.log"; exit 1; }
python3 - "$work/run/metrics-0.jsonl" <<'PY'
import json, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"]
first, last = losses[0], losses[-1]
print(f"=== example: loss {first:.4f} at the first logged step, {last:.4f} at the last")
if not (len(losses) >= 4 and last < 0.5 * first):
    sys.exit(f"check_example: the loss did not fall by half: {losses}")
PY
echo "=== example: building examples/recommendation against it"
cmake -S examples/recommendation -B "$work/rec" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/rec.log" 2>&1 || { cat "$work/rec.log"; exit 1; }
cmake --build "$work/rec" >> "$work/rec.log" 2>&1 || { cat "$work/rec.log"; exit 1; }
echo "=== example: training dlrm_cat on generated click logs, 2 workers, 2 epochs"
python3 scripts/make_ctr_data.py --out "$work/ctr" --train 20000 --test 5000 > "$work/ctr.json"
"$prefix/bin/towerps-launch" --worker-bin "$work/rec/ctr-worker" --model dlrm_cat \
  --dataset criteo --data-dir "$work/ctr" --workers 2 --epochs 2 --batch-size 128 \
  --optimizer adam --lr 0.001 --embedding-dim 8 --run-dir "$work/rec-run" \
  --summary-out "$work/rec-summary.json" > "$work/rec-train.log" 2>&1 \
  || { cat "$work/rec-train.log"; exit 1; }
python3 - "$work/rec-summary.json" "$work/ctr.json" <<'PY'
import json, sys
auc = json.load(open(sys.argv[1]))["test_auc"]
bayes = json.load(open(sys.argv[2]))["bayes_auc"]
print(f"=== example: dlrm_cat's test AUC {auc:.4f} (the generator's Bayes AUC {bayes:.4f})")
if not 0.65 < auc <= bayes + 0.01:
    sys.exit(f"check_example: dlrm_cat's AUC {auc} is not between 0.65 and the Bayes AUC {bayes}")
PY
# The PyTorch example, with the installed Python package: six lines from its plain version,
# and at least 0.88 test accuracy in sync.
echo "=== example: examples/pytorch/train.py, 2 PyTorch workers, sync, 3 epochs"
changed=$(diff examples/pytorch/train_plain.py examples/pytorch/train.py | grep -c '^>' || true)
if [ "$changed" -gt 6 ]; then
  echo "check_example: examples/pytorch/train.py differs from train_plain.py by $changed lines (at most 6)" >&2
  exit 1
fi
py=/usr/bin/python3
[ -x "$py" ] || py=python3
site="$prefix/lib/python3/dist-packages"
[ -e "$site/towerps/torch.py" ] || { echo "check_example: the towerps package was not installed under $site (TOWERPS_PYTHON)" >&2; exit 1; }
PYTHONPATH="$site" "$prefix/bin/towerps-launch" --servers 1 --workers 2 --optimizer adam \
  --lr 0.002 --run-dir "$work/pt-run" --summary-out "$work/pt-summary.json" \
  --worker-cmd "$py examples/pytorch/train.py --epochs 3" > "$work/pt-train.log" 2>&1 \
  || { cat "$work/pt-train.log"; exit 1; }
python3 - "$work/pt-summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"=== example: the PyTorch example's test accuracy {s['test_accuracy']:.4f} after {s['steps']} sync steps")
if s["test_accuracy"] < 0.88:
    sys.exit(f"check_example: the PyTorch example reached {s['test_accuracy']}, below 0.88")
PY
echo "=== example: passed"
