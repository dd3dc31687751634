#!/usr/bin/env bash
# Puts the towerps Python package into a bundle that scripts/package.sh --with-python is making,
# so that a node whose Python differs from this machine's (another version, a virtualenv with its
# own PyTorch) can build the extension itself:
#
#   scripts/python_kit.sh BUILD_DIR BUNDLE_ROOT
#
# It writes, under BUNDLE_ROOT:
#   lib/libtowerps_session.so   the session (python/session.h) and everything it links, as one
#                               library (the build's archives, whole; their shared libraries are
#                               bundled by package.sh like the binaries')
#   python/towerps/*.py         the pure-Python modules
#   python/kit/                 python/module.cc and every header it includes that the node may
#                               lack: this tree's, the generated Cap'n Proto header, and the
#                               Cap'n Proto, KJ and nlohmann-json headers
#   python/build_extension.sh   run on the node: compiles module.cc for its python3 (g++, the
#                               Python headers and pybind11 must be there) into python/towerps/
# The extension built here, for this machine's Python, goes in too when there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:?usage: scripts/python_kit.sh BUILD_DIR BUNDLE_ROOT}"
root="${2:?usage: scripts/python_kit.sh BUILD_DIR BUNDLE_ROOT}"
ninja_file="$build_dir/build.ninja"
if ! grep -q "^build python/towerps/_towerps" "$ninja_file" 2>/dev/null; then
  echo "python_kit: $build_dir has no towerps extension target; configure it with pybind11-dev" \
       "and python3-dev installed (scripts/setup.sh)" >&2
  exit 1
fi
mkdir -p "$root/lib" "$root/python/towerps" "$root/python/kit/include"

# 1. The session library: the extension's own link line (CMake's), with this tree's archives
#    taken whole, since module.cc calls into them directly too.
link="$(awk '/^build python\/towerps\/_towerps/{f=1} f && /LINK_LIBRARIES/{sub(/^ *LINK_LIBRARIES = /, ""); print; exit}' \
        "$ninja_file")"
archives=()
shared=()
for item in $link; do
  case "$item" in
    lib/libtowerps_*.a) archives+=("$build_dir/$item") ;;
    -Wl,-rpath,*) ;;
    *) shared+=("$item") ;;
  esac
done
g++ -shared -o "$root/lib/libtowerps_session.so" -Wl,-soname,libtowerps_session.so \
  -Wl,--whole-archive "${archives[@]}" -Wl,--no-whole-archive "${shared[@]}" -Wl,-rpath,'$ORIGIN'
strip --strip-unneeded "$root/lib/libtowerps_session.so"

# 2. The headers module.cc includes, from the compile command CMake used for it, each put under
#    kit/include at the path it is included by.
command="$(python3 - "$build_dir/compile_commands.json" <<'PY'
import json, shlex, sys
for c in json.load(open(sys.argv[1])):
    if c["file"].endswith("python/module.cc"):
        args = shlex.split(c["command"])
        keep, skip = [], False
        for a in args:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c"):
                skip = True
                continue
            keep.append(a)
        print(shlex.join(keep + ["-M", c["file"]]))
        break
PY
)"
if [ -z "$command" ]; then echo "python_kit: module.cc is not in compile_commands.json" >&2; exit 1; fi
src="$PWD"
build_abs="$(cd "$build_dir" && pwd)"
(cd "$build_dir" && eval "$command") | tr ' \\' '\n\n' | grep -v ':$' | grep -v '^$' |
while read -r header; do
  case "$header" in
    "$src/python/module.cc") continue ;;
    "$build_abs"/*) rel="${header#"$build_abs"/}" ;;
    "$src"/worker/include/*) rel="${header#"$src"/worker/include/}" ;;
    "$src"/common/include/*) rel="${header#"$src"/common/include/}" ;;
    "$src"/*) rel="${header#"$src"/}" ;;
    /usr/include/capnp/* | /usr/include/kj/* | /usr/include/nlohmann/*) rel="${header#/usr/include/}" ;;
    *) continue ;;  # the C and C++ libraries, Python and pybind11: the node's own
  esac
  mkdir -p "$root/python/kit/include/$(dirname "$rel")"
  cp "$header" "$root/python/kit/include/$rel"
done
cp python/module.cc "$root/python/kit/"
cp python/towerps/*.py "$root/python/towerps/"
cp "$build_dir"/python/towerps/_towerps*.so "$root/python/towerps/" 2>/dev/null || true

cat > "$root/python/build_extension.sh" <<'EOF'
#!/usr/bin/env bash
# Builds towerps._towerps for this node's python3 (or $PYTHON) from the kit beside this script,
# against ../lib/libtowerps_session.so. Needs g++ (C++20), the Python headers and pybind11
# (`pip install pybind11` or the distribution's package). Takes a minute or so: one file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-python3}"
include="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
if [ ! -f "$include/Python.h" ]; then
  echo "build_extension: $include/Python.h is missing: install the Python headers" \
       "(python3-dev, or the same version's -dev package) for $("$py" -c 'import sys; print(sys.executable)')" >&2
  exit 1
fi
# pybind11's headers: the Python package's, else a distribution's (Debian's pybind11-dev).
pybind="$("$py" -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null)" ||
  pybind=/usr/include
if [ ! -f "$pybind/pybind11/pybind11.h" ]; then
  echo "build_extension: no pybind11 headers: pip install pybind11 (or apt-get install" \
       "pybind11-dev)" >&2
  exit 1
fi
pybind_flags=()
if [ "$pybind" != /usr/include ]; then pybind_flags=(-isystem "$pybind"); fi  # include_next
suffix="$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
out="$here/towerps/_towerps$suffix"
# $CXX, then the first of these that compiles it: GCC 13 and later reject the Cap'n Proto 0.9
# headers in C++20 (P2468's rewritten ==), which GCC 12 and clang accept (an H200 node with
# Ubuntu 24.04 had g++ 13 as g++, and g++-12 and clang++-16 beside it).
compilers="${CXX:-} g++ g++-12 g++-11 clang++ clang++-18 clang++-17 clang++-16 clang++-14"
for cxx in $compilers; do
  command -v "$cxx" > /dev/null || continue
  if "$cxx" -std=c++20 -O2 -DNDEBUG -fPIC -shared -fvisibility=hidden \
       -I"$here/kit/include" -isystem "$include" "${pybind_flags[@]}" "$here/kit/module.cc" \
       -o "$out" -L"$here/../lib" -ltowerps_session -Wl,-rpath,'$ORIGIN/../../lib'; then
    echo "build_extension: $out (with $cxx)"
    exit 0
  fi
  echo "build_extension: $cxx could not build it; trying the next compiler" >&2
done
echo "build_extension: no compiler here builds the extension (tried:$compilers); install g++-12" \
     "or clang, or set CXX to a C++20 compiler that accepts Cap'n Proto 0.9's headers" >&2
exit 1
EOF
chmod +x "$root/python/build_extension.sh"
echo "python_kit: lib/libtowerps_session.so ($(du -h "$root/lib/libtowerps_session.so" | cut -f1))," \
     "python/towerps, python/kit ($(find "$root/python/kit" -type f | wc -l) files)"
