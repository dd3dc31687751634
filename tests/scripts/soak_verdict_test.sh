#!/usr/bin/env bash
# towerps-bench soak judges what it measures: against a fake launcher (fake_soak_launcher.sh)
# whose processes keep a flat RSS it passes, whose processes grow it fails with exit status 1
# naming the process, and a job that dies early is an error naming it. A few seconds each.
# Usage: soak_verdict_test.sh BIN_DIR
set -euo pipefail
bench="$1/towerps-bench"
fake="$(cd "$(dirname "$0")" && pwd)/fake_soak_launcher.sh"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
soak() {  # NAME, then environment assignments for the fake launcher
  local name="$1"; shift
  set +e
  env "$@" timeout 120 "$bench" soak --minutes 0.1 --sample-interval-ms 500 \
    --launcher-bin "$fake" --run-dir "$out/$name" > "$out/$name.out" 2>&1
  rc=$?
  set -e
}

soak flat FAKE_SOAK_GROW_KIB=0
[ "$rc" = 0 ] || fail "flat RSS: exit $rc, expected 0: $(cat "$out/flat.out")"
grep -q '^soak: PASS: ' "$out/flat.out" || fail "no PASS line: $(cat "$out/flat.out")"

soak grows FAKE_SOAK_GROW_KIB=256
[ "$rc" = 1 ] || fail "growing RSS: exit $rc, expected 1: $(cat "$out/grows.out")"
grep -Eq '^soak: FAIL: largest RSS growth after warm-up is \+[0-9.]+% \((ps|worker):[01]\), above --max-growth 1%' \
  "$out/grows.out" || fail "no FAIL line naming a process: $(cat "$out/grows.out")"

soak dies FAKE_SOAK_FAIL_AFTER=2
[ "$rc" = 1 ] || fail "job that dies: exit $rc, expected 1: $(cat "$out/dies.out")"
grep -q "before the soak's time was up" "$out/dies.out" ||
  fail "no error for the dead job: $(cat "$out/dies.out")"
grep -q "worker:1 failed" "$out/dies.out" || fail "the launcher's last lines are missing"
echo "soak_verdict_test: OK"
