#!/usr/bin/env bash
# scripts/check_layers.sh on small trees of its own: a clean one passes, and each kind of breach
# fails naming the file: an include up a floor, an include into another room of the same floor,
# a file in no room, a file over 500 lines, a C++ or Python function over 80 lines, and the client
# library including the server, a class whose methods are spread over more than two files or
# over two that pass 500 lines together, and one name for two types in one namespace.
# Usage: check_layers_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

make_tree() {  # a tree of one file per floor, with the real floor table
  rm -rf "$tmp/tree"
  mkdir -p "$tmp/tree/docs" "$tmp/tree/common" "$tmp/tree/job" "$tmp/tree/kernels" \
    "$tmp/tree/ps/client" "$tmp/tree/ps/server" "$tmp/tree/launch"
  cp "$src/docs/ARCHITECTURE.md" "$tmp/tree/docs/"
  printf '#include "common/status.h"\nint A();\n' > "$tmp/tree/common/a.h"
  printf '#include "common/a.h"\nint J() { return A(); }\n' > "$tmp/tree/job/j.cc"
  printf '#include "common/a.h"\nint K() { return A(); }\n' > "$tmp/tree/kernels/k.cc"
  printf '#include "job/j.h"\nint B() { return A(); }\n' > "$tmp/tree/ps/server/b.cc"
  printf '#include "job/j.h"\nint C() { return A(); }\n' > "$tmp/tree/ps/client/c.cc"
  printf '#include "ps/server/b.h"\nint L();\n' > "$tmp/tree/launch/l.h"
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
printf '#include "launch/l.h"\n' >> "$tmp/tree/ps/server/b.cc"
expect FAIL "ps/server/b.cc:3: launch/l.h goes up a floor"

make_tree
printf '#include "kernels/k.h"\n' >> "$tmp/tree/job/j.cc"
expect FAIL "job/j.cc:3: kernels/k.h goes into another room of its floor"

make_tree  # the client library includes nothing of the server
printf '#include "ps/server/b.h"\n' >> "$tmp/tree/ps/client/c.cc"
expect FAIL "ps/client/c.cc:3: ps/server/b.h goes into another room of its floor"

make_tree
mkdir -p "$tmp/tree/stray" && printf 'int S();\n' > "$tmp/tree/stray/s.h"
expect FAIL "stray/s.h has no floor"

make_tree
for i in $(seq 1 501); do echo "// line $i"; done > "$tmp/tree/ps/server/long.cc"
expect FAIL "lines ps/server/long.cc: 501 lines, over 500"

make_tree
{ echo "int Long() {"; echo "  int x = 0;"; for i in $(seq 1 80); do echo "  x += $i;"; done
  echo "  return x;"; echo "}"; } > "$tmp/tree/ps/server/fn.cc"
expect FAIL "function ps/server/fn.cc:Long: 84 lines"

make_tree
{ echo "def long():"; echo "    x = 0"; for i in $(seq 1 80); do echo "    x += $i"; done
  echo "    return x"; } > "$tmp/tree/ps/server/tool.py"
expect FAIL "function ps/server/tool.py:long: 83 lines"

make_tree  # one class's methods over three files
for part in a b c; do
  printf 'namespace x {\nvoid Big::%s() {}\n}\n' "$part" > "$tmp/tree/ps/server/big_$part.cc"
done
expect FAIL "class x::Big: its methods are defined in 3 files"

make_tree  # one class over two files of 300 lines each: counted as one file of 600
for part in a b; do
  { printf 'namespace x {\nvoid Split::%s() {}\n}\n' "$part"
    for i in $(seq 1 297); do echo "// line $i"; done; } > "$tmp/tree/ps/server/split_$part.cc"
done
expect FAIL "class x::Split: its files (ps/server/split_a.cc, ps/server/split_b.cc) have 600 lines"

make_tree  # one name for two types in one namespace, in two rooms (an ODR violation)
printf 'namespace x {\nstruct Twin {\n  int a;\n};\n}\n' > "$tmp/tree/job/twin.h"
printf 'namespace x {\nstruct Twin {\n  float b;\n};\n}\n' > "$tmp/tree/ps/server/twin.h"
expect FAIL "type x::Twin: defined in 2 files (job/twin.h, ps/server/twin.h)"
make_tree  # the same name in anonymous namespaces is each file's own
printf 'namespace {\nstruct Own {\n  int a;\n};\n}\n' > "$tmp/tree/job/own.cc"
printf 'namespace {\nstruct Own {\n  float b;\n};\n}\n' > "$tmp/tree/ps/server/own.cc"
expect PASS ""

echo "check_layers_test: every breach was refused"
