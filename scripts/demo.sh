#!/usr/bin/env bash
# scripts/demo.sh [towerps-launch options]: installs the packages, builds release, runs the job.
# The main job: towerps-launch with its defaults, i.e. 1 parameter server and 2 workers training
# the mlp on Fashion-MNIST in sync mode for 5 epochs. Extra arguments go to towerps-launch
# (e.g. scripts/demo.sh --model cnn --epochs 10). Ends by printing the test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help)
    sed -n '2,5p' "$0" | sed 's/^# //'
    if [ -x build/release/bin/towerps-launch ]; then
      echo; build/release/bin/towerps-launch --help
    else
      echo "(towerps-launch's own options: build/release/bin/towerps-launch --help, once built)"
    fi
    exit 0 ;;
esac
scripts/setup.sh
scripts/build.sh release
summary="$(mktemp -t towerps-summary.XXXXXX.json)"
build/release/bin/towerps-launch --log-every 200 --summary-out "$summary" "$@"
python3 - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
acc = "diverged" if s["test_accuracy"] is None else "%.4f" % s["test_accuracy"]
def count(n, noun):
    return "%d %s%s" % (n, noun, "" if n == 1 else "s")
print("test accuracy: %s (%s mode, %s, %s, %g epochs, %.1f s)"
      % (acc, s["mode"], count(s["workers"], "worker"), count(s["servers"], "server"),
         s["epochs"], s["train_seconds"]))
PY
rm -f "$summary"
