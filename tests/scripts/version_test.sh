#!/usr/bin/env bash
# --version on every binary: "<name> <project() version> (git <revision>)", exit 0.
# Usage: version_test.sh BIN_DIR VERSION
set -euo pipefail
bin="$1" version="$2"
for b in towerps-server towerps-worker towerps-launch towerps-bench; do
  out="$("$bin/$b" --version)"
  if ! [[ "$out" =~ ^$b\ ${version//./\\.}\ \(git\ [0-9a-z.-]+\)$ ]]; then
    echo "FAIL: $b --version printed '$out', expected '$b $version (git <revision>)'" >&2
    exit 1
  fi
  echo "$out"
done
