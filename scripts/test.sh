#!/usr/bin/env bash
# The test command: installs dependencies, checks the tree's floors (scripts/check_layers.sh),
# builds, and runs the whole suite with CTest.
#   scripts/test.sh                  release suite and the installed-library check
#                                    (scripts/check_example.sh), the asan suite (clang-14: ASan,
#                                    UBSan and -Werror=thread-safety in one build), then every
#                                    libFuzzer harness for 10 s (fuzz: scripts/fuzz.sh 10)
#   scripts/test.sh --presets "cpu"  only the named presets (tsa: the thread-safety build alone,
#                                    compiled, not run; fuzz: the fuzzing step)
# GPU tests skip, saying why, on machines without an NVIDIA GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

presets="release asan fuzz"
while [ $# -gt 0 ]; do
  case "$1" in
    --presets) presets="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "test: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Each stage's wall time, printed as it ends and summed up at the end (CI allows 90 minutes; the
# suite aims at 50 on 2 cores).
timings=()
stage_start=$SECONDS
stage_done() {
  local took=$((SECONDS - stage_start))
  timings+=("$(printf '  %-28s %5d s' "$1" "$took")")
  echo "=== test: $1 took $took s"
  stage_start=$SECONDS
}

scripts/setup.sh
stage_done "setup"
echo "=== test: the tree's floors, file and function sizes (scripts/check_layers.sh)"
scripts/check_layers.sh
stage_done "floors"
for preset in $presets; do
  if [ "$preset" = fuzz ]; then
    echo "=== test: fuzzing every harness for 10 s (scripts/fuzz.sh)"
    scripts/fuzz.sh 10
    stage_done "fuzz (build and run)"
    continue
  fi
  echo "=== test: building preset '$preset'"
  scripts/build.sh "$preset"
  stage_done "$preset build"
  if [ "$preset" = tsa ]; then
    echo "=== test: the clang -Werror=thread-safety build passed (a build check; asan runs it too)"
    continue
  fi
  echo "=== test: running preset '$preset'"
  junit="build/$preset/ctest-junit.xml"
  ctest --preset "$preset" --output-on-failure -j "$(nproc)" --timeout 900 --output-junit "$PWD/$junit"
  stage_done "$preset tests"
  # Skipped tests, each with the reason it gave (GTEST_SKIP's message).
  python3 - "$junit" <<'PY'
import sys
import xml.etree.ElementTree as ET
skipped = []
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if case.find("skipped") is None:
        continue
    out = (case.findtext("system-out") or "").splitlines()
    why = next((out[i + 1] for i, l in enumerate(out[:-1]) if l.endswith(": Skipped")), "?")
    skipped.append(f"  {case.get('name')}: {why.strip()}")
print(f"=== test: {len(skipped)} skipped" + (":" if skipped else ""))
print("\n".join(skipped))
PY
  # The library as a user gets it: installed, and an out-of-tree project built against it.
  if [ "$preset" = release ]; then
    scripts/check_example.sh "build/$preset"
    stage_done "installed-library check"
  fi
done
echo "=== test: passed in $SECONDS s:"
printf '%s\n' "${timings[@]}"
