#!/usr/bin/env bash
# The main job: installs dependencies, builds the release preset, and runs it.
# Until the training worker lands, the main job is the parameter-server benchmark: real
# towerps-server processes, two workers pushing gradients and pulling parameters in sync mode,
# against raw ZeroMQ measured in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
build/release/bin/towerps-bench ps --servers 1 --workers 2 --seconds 3 "$@"
