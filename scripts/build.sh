#!/usr/bin/env bash
# Configures and builds one CMake preset: scripts/build.sh [release|debug|asan|cpu|tsa]
# Binaries land in build/<preset>/bin/.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
case "$preset" in
  release|debug|asan|cpu|tsa) ;;
  *) echo "build: unknown preset '$preset'; use release, debug, asan, cpu or tsa" >&2; exit 2 ;;
esac
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
