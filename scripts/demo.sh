#!/usr/bin/env bash
# The main job: installs dependencies, builds the release preset, and runs it.
# The main job: towerps-launch with its defaults, i.e. 1 parameter server and 2 workers training
# the mlp on Fashion-MNIST in sync mode for 5 epochs. Extra arguments go to towerps-launch
# (e.g. scripts/demo.sh --model cnn --epochs 10). Ends by printing the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
summary="$(mktemp -t towerps-summary.XXXXXX.json)"
build/release/bin/towerps-launch --log-every 200 --summary-out "$summary" "$@"
python3 - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc = "diverged" if s["test_accuracy"] is None else "%.4f" % s["test_accuracy"]
print("test accuracy: %s (%s mode, %d workers, %d servers, %d epochs, %.1f s)"
      % (acc, s["mode"], s["workers"], s["servers"], s["epochs"], s["train_seconds"]))
PY
rm -f "$summary"
