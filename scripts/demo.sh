#!/usr/bin/env bash
# The main job: installs dependencies, builds the release preset, and runs it.
# Until training lands, the main job is the transport benchmark: TowerPS messages (Cap'n Proto
# header + zero-copy tensor frame) against raw ZeroMQ over tcp loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh release
build/release/bin/towerps-bench transport --bytes $((1 << 20)) --seconds 2 "$@"
