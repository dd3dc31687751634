#!/usr/bin/env bash
# Keeps the tree's floors: fails (exit 1, naming each breach) when
#   - an #include goes up a floor, or sideways into another room of the same floor, by the floor
#     table in docs/ARCHITECTURE.md (between <!-- floors --> and <!-- /floors -->);
#   - a source file has no floor there;
#   - a non-test source file passes 500 lines;
#   - a function passes 80 lines (Universal Ctags gives each C++ function's start and end; Python's
#     own parser each Python function's, in *.py files and scripts whose first line names python);
#   - a class's methods are defined in more than two .cc files, or in two whose lines together
#     pass 500 (a class is one concept: split a second concept out into a class of its own, not
#     its methods over files; a class split across files counts as one file);
#   - two files define a type (class, struct, union or enum) of one name in one named namespace:
#     an ODR violation, which compiles and links, and whose inline members the program keeps
#     one of (a unity build made a .npy reader's destructor run an exporter's type's).
# tests/ and examples/ are outside the floors. The exceptions below are the known breaches, each
# with its reason; one that no longer happens is an error too, so the list only shrinks.
#
#   scripts/check_layers.sh [--root DIR] [--no-exceptions]
#     DIR: the tree to check (default: this checkout); --no-exceptions: check it against an empty
#     list (tests/scripts/check_layers_test.sh checks small trees of its own that way)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
use_exceptions=1
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root="$(cd "$2" && pwd)"; shift 2 ;;
    --no-exceptions) use_exceptions=0; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "check_layers: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

ctags_bin="$(command -v ctags-universal || command -v ctags || true)"
if [ -z "$ctags_bin" ] || ! "$ctags_bin" --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "check_layers: Universal Ctags is needed (apt-get install universal-ctags)" >&2
  exit 2
fi

# Known breaches: "kind path[:function]" then " | " and the reason. kind: lines or function.
exceptions=$(cat <<'EOF'
function bench/soak_bench.cc:RunSoak | the soak's job start, sampling loop and verdict in one reading; split it when it next changes
function common/internal/raw_ceiling.cc:RawZmqEchoThroughput | a raw-ZeroMQ ceiling written as one plain socket program, to be read line by line beside TowerPS's path
EOF
)
[ "$use_exceptions" = 1 ] || exceptions=""

CTAGS="$ctags_bin" EXCEPTIONS="$exceptions" python3 - "$root" <<'PY'
import os, re, subprocess, sys

root = sys.argv[1]
MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 80
SOURCES = (".h", ".cc", ".cu", ".cuh")
OUTSIDE = ("tests/", "examples/", "build/", ".git/")

def fail(msg):
    print("check_layers: " + msg, file=sys.stderr)
    sys.exit(2)

# The floor table: "| N | `room`, `room` | what lives there |", lowest floor first or not.
arch = os.path.join(root, "docs/ARCHITECTURE.md")
text = open(arch).read()
m = re.search(r"<!-- floors -->(.*?)<!-- /floors -->", text, re.S)
if not m:
    fail(f"{arch} has no floor table between <!-- floors --> and <!-- /floors -->")
rooms = {}  # path prefix (a folder ending in /, or a file) -> floor
for line in m.group(1).splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) < 2 or not cells[0].isdigit():
        continue
    for room in re.findall(r"`([^`]+)`", cells[1]):
        rooms[room] = int(cells[0])
if not rooms:
    fail(f"the floor table in {arch} lists no rooms")

def room_of(path):
    best = None
    for r in rooms:
        if (path == r or (r.endswith("/") and path.startswith(r))) and (best is None or len(r) > len(best)):
            best = r
    return best

sources = []
for dirpath, dirnames, files in os.walk(root):
    rel_dir = os.path.relpath(dirpath, root)
    rel_dir = "" if rel_dir == "." else rel_dir + "/"
    dirnames[:] = [d for d in dirnames if not (rel_dir + d + "/").startswith(OUTSIDE)]
    for f in files:
        if f.endswith(SOURCES):
            sources.append(rel_dir + f)
sources.sort()

# Public headers are included as "towerps/x.h" from <lib>/include/towerps/.
public = {}
for s in sources:
    if "/include/towerps/" in s:
        public["towerps/" + s.split("/include/towerps/", 1)[1]] = s

breaches = []
for s in sources:
    r = room_of(s)
    if r is None:
        breaches.append(f"{s} has no floor: add its folder to the floor table in docs/ARCHITECTURE.md")
        continue
    lines = open(os.path.join(root, s), errors="replace").read().splitlines()
    if len(lines) > MAX_FILE_LINES:
        breaches.append(f"lines {s} | {len(lines)} lines, over {MAX_FILE_LINES}: split it by concept")
    for n, line in enumerate(lines, 1):
        inc = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not inc:
            continue
        target = public.get(inc.group(1), inc.group(1))
        t = room_of(target)
        if t is None or t == r:
            continue  # generated headers (the schema, the build info) and the same room
        if rooms[t] >= rooms[r]:
            where = "up a floor" if rooms[t] > rooms[r] else "into another room of its floor"
            breaches.append(f"include {s}:{n} | {inc.group(1)} goes {where}: "
                            f"{r} is on floor {rooms[r]}, {t} on floor {rooms[t]}")

# Functions and types, by one run of Universal Ctags: each tag's name, file, kind, qualified
# scope ("class:x::Big", "namespace:x"), first and last line.
ctags = subprocess.run(
    [os.environ["CTAGS"], "--languages=C++", "--langmap=C++:+.cu.cuh", "--kinds-C++=fcsgu",
     "--fields=+nesKzZ", "-o", "-", *sources],
    cwd=root, capture_output=True, text=True, check=True).stdout
class_files = {}  # class -> the .cc files that define its methods
type_files = {}  # a type's qualified name -> the files that define it
for line in ctags.splitlines():
    name, path, *rest = line.split("\t")
    tag = dict(f.split(":", 1) for f in rest if ":" in f and not f.startswith("/^"))
    scope = tag.get("scope", "")
    if tag.get("kind") != "function":
        # Types in anonymous namespaces are each file's own.
        if "__anon" not in scope:
            qualified = scope.partition(":")[2] + "::" + name if scope else name
            type_files.setdefault(qualified, set()).add(path)
        continue
    if scope.startswith("class:") and path.endswith((".cc", ".cu")):
        class_files.setdefault(scope[6:], set()).add(path)
    start, end = tag.get("line"), tag.get("end")
    if start and end and int(end) - int(start) + 1 > MAX_FUNCTION_LINES:
        breaches.append(f"function {path}:{name} | {int(end) - int(start) + 1} lines "
                        f"(from line {start}), over {MAX_FUNCTION_LINES}")

MAX_CLASS_FILES = 2
for cls, files in sorted(class_files.items()):
    if len(files) > MAX_CLASS_FILES:
        breaches.append(f"class {cls} | its methods are defined in {len(files)} files "
                        f"({', '.join(sorted(files))}), over {MAX_CLASS_FILES}: a class is one "
                        "concept; give a second concept a class of its own")
    elif len(files) > 1:
        total = sum(len(open(os.path.join(root, f), errors="replace").read().splitlines())
                    for f in files)
        if total > MAX_FILE_LINES:
            breaches.append(f"class {cls} | its files ({', '.join(sorted(files))}) have {total} "
                            f"lines together, over {MAX_FILE_LINES}: a class split across files "
                            "counts as one file; give a second concept a class of its own")

for name, files in sorted(type_files.items()):
    if len(files) > 1:
        breaches.append(f"type {name} | defined in {len(files)} files ({', '.join(sorted(files))}): "
                        "one name for two types is an ODR violation; rename one")

# Python functions, by Python's own parser: the same 80 lines.
import ast
for dirpath, dirnames, files in os.walk(root):
    rel_dir = os.path.relpath(dirpath, root)
    rel_dir = "" if rel_dir == "." else rel_dir + "/"
    dirnames[:] = [d for d in dirnames if not (rel_dir + d + "/").startswith(OUTSIDE)]
    for f in files:
        path = os.path.join(dirpath, f)
        if not f.endswith(".py"):
            try:
                with open(path, "rb") as fh:
                    first = fh.readline(200)
            except OSError:
                continue
            if not (first.startswith(b"#!") and b"python" in first):
                continue
        try:
            tree = ast.parse(open(path, errors="replace").read(), filename=path)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    breaches.append(f"function {rel_dir + f}:{node.name} | {n} lines "
                                    f"(from line {node.lineno}), over {MAX_FUNCTION_LINES}")

known = {}
for line in os.environ.get("EXCEPTIONS", "").splitlines():
    if line.strip():
        key, _, why = line.partition(" | ")
        known[key.strip()] = why.strip()
found = {b.split(" | ")[0] for b in breaches}
bad = [b for b in breaches if b.split(" | ")[0] not in known]
stale = [k for k in known if k not in found]
for b in bad:
    print("check_layers: " + b.replace(" | ", ": ", 1), file=sys.stderr)
for k in stale:
    print(f"check_layers: the exception '{k}' no longer happens: remove it from the list", file=sys.stderr)
if bad or stale:
    print(f"check_layers: {len(bad)} breach(es), {len(stale)} stale exception(s)", file=sys.stderr)
    sys.exit(1)
print(f"check_layers: {len(sources)} sources on {len(set(rooms.values()))} floors; "
      f"{len(known)} listed exception(s)")
PY
