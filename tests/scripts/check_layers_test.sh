#!/usr/bin/env bash
# scripts/check_layers.sh on small trees of its own: a clean one passes, and each kind of breach
# fails naming the file: an include up a floor, an include into another room of the same floor,
# a file in no room, a file over 500 lines, a function over 80 lines.
# Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

make_tree() {  # a tree of one file per floor, with the real floor table
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree/docs" "$tmp/tree/common" "$tmp/tree/ps" "$tmp/tree/kernels" "$tmp/tree/launch"
  cp "$src/docs/ARCHITECTURE.md" "$tmp/tree/docs/"
  printf '#include "common/status.h"\nint A();\n' > "$tmp/tree/common/a.h"
  printf '#include "common/a.h"\nint B() { return A(); }\n' > "$tmp/tree/ps/b.cc"
  printf '#include "common/a.h"\nint K() { return A(); }\n' > "$tmp/tree/kernels/k.cc"
  printf '#include "ps/b.h"\nint L();\n' > "$tmp/tree/launch/l.h"
}
expect() {  # expect PASS|FAIL TEXT: runs the check on the tree
  local want="$1" text="$2" out code=0
  out="$(bash "$src/scripts/check_layers.sh" --root "$tmp/tree" --no-exceptions 2>&1)" || code=$?
  if [ "$want" = PASS ] && [ "$code" -ne 0 ]; then
    echo "FAIL: a clean tree was refused (exit $code):"; echo "$out"; exit 1
  fi
  if [ "$want" = FAIL ] && { [ "$code" -ne 1 ] || ! grep -qF -- "$text" <<<"$out"; }; then
    echo "FAIL: expected exit 1 naming '$text', got exit $code:"; echo "$out"; exit 1
  fi
  echo "ok: $want ${text:-clean tree}"
}

make_tree
expect PASS ""

make_tree
printf '#include "launch/l.h"\n' >> "$tmp/tree/ps/b.cc"
expect FAIL "ps/b.cc:3: launch/l.h goes up a floor"

make_tree
printf '#include "kernels/k.h"\n' >> "$tmp/tree/ps/b.cc"
expect FAIL "ps/b.cc:3: kernels/k.h goes into another room of its floor"

make_tree
mkdir -p "$tmp/tree/stray" && printf 'int S();\n' > "$tmp/tree/stray/s.h"
expect FAIL "stray/s.h has no floor"

make_tree
for i in $(seq 1 501); do echo "// line $i"; done > "$tmp/tree/ps/long.cc"
expect FAIL "lines ps/long.cc: 501 lines, over 500"

make_tree
{ echo "int Long() {"; echo "  int x = 0;"; for i in $(seq 1 80); do echo "  x += $i;"; done
  echo "  return x;"; echo "}"; } > "$tmp/tree/ps/fn.cc"
expect FAIL "function ps/fn.cc:Long: 84 lines"

echo "check_layers_test: every breach was refused"
