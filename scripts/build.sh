#!/usr/bin/env bash
# Configures and builds one CMake preset: scripts/build.sh [release|debug|asan|cpu|tsa|fuzz]
# Binaries land in build/<preset>/bin/ (fuzz: only the libFuzzer harnesses, for scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
case "$preset" in
  -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
  release|debug|asan|cpu|tsa|fuzz) ;;
  *) echo "build: unknown preset '$preset'; use release, debug, asan, cpu, tsa or fuzz" >&2; exit 2 ;;
esac
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
