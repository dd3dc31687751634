#!/usr/bin/env bash
# Builds a relocatable tarball of the TowerPS binaries for nodes that lack our build
# dependencies (GPU nodes, for instance):
#
#   scripts/package.sh [--preset release] [--build-dir DIR] [--out FILE.tar.gz] [--no-build]
#                      [--with-tests | --tests NAME,NAME...] [--with-python]
#
# The tarball holds bin/ (towerps-server, -worker, -launch, -bench), lib/ with every shared
# library they need except the C library family and the CUDA stack (runtime, cuBLAS, cuDNN,
# driver), which must come from the node, env.sh (source it: PATH and LD_LIBRARY_PATH, plus the
# CUDA libraries of a pip-installed PyTorch or nvidia-* wheel if there is one), and the sbatch
# example; --with-tests adds the test binaries in tests/ (for scripts/gpu_verify.sh), --tests only
# the named ones (a smaller bundle, for a transfer with a size limit). --with-python adds the
# towerps Python package for PyTorch workers (python/towerps; env.sh puts it on PYTHONPATH): its
# extension is built for the node's own Python by `python/build_extension.sh` in the bundle (the
# node needs g++ 12 or clang, the Python headers and pybind11; the bundle carries the rest: the
# session as lib/libtowerps_session.so and the headers module.cc includes). FILE.tar.xz is about
# 40% smaller than FILE.tar.gz. The C++ runtime goes to lib/compat, which env.sh uses only where
# the node's own is older. After
# building it, the script unpacks it elsewhere and checks that every library the
# binaries need resolves, from the bundle or, for the CUDA stack, from this machine.
set -euo pipefail
cd "$(dirname "$0")/.."

preset=release
build_dir=""
out=""
build=1
with_tests=0
test_names=""
with_python=0
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --with-tests) with_tests=1; shift ;;
    --tests) with_tests=1; test_names="$2"; shift 2 ;;
    --with-python) with_python=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown option '$1'; see scripts/package.sh --help" >&2; exit 2 ;;
  esac
done
build_dir="${build_dir:-build/$preset}"
if [ "$build" = 1 ]; then scripts/build.sh "$preset"; fi
bin_dir="$build_dir/bin"
binaries=(towerps-server towerps-worker towerps-launch towerps-bench)
for b in "${binaries[@]}"; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "package: $bin_dir/$b is missing; build first (scripts/build.sh $preset)" >&2
    exit 1
  fi
done
if grep -q "TOWERPS_SANITIZE:STRING=." "$build_dir/CMakeCache.txt" 2>/dev/null; then
  echo "package: $build_dir is a sanitizer build; package a release build" >&2
  exit 1
fi

version="$(git describe --always --dirty 2>/dev/null || echo unknown)"
name="towerps-$version-$(uname -m)"
out="${out:-dist/$name.tar.gz}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin" "$root/lib/compat" "$root/examples"

# Libraries that must come from the node: the C library family (tied to the kernel and loader)
# and the CUDA stack (tied to the driver).
system_lib='^(linux-vdso|ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so'
# The C++ runtime goes to lib/compat, which env.sh uses only on a node whose own is older: ahead
# of a newer one it would break the node's newer programs in the same environment (a PyTorch,
# or the extension python/build_extension.sh compiles there).
cxx_runtime='^(libstdc\+\+|libgcc_s)\.so'
cuda_lib='^(libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnvrtc.*|libnvJitLink|libcufft|libcurand|libcusparse|libnvidia-.*)\.so'

for b in "${binaries[@]}"; do cp "$bin_dir/$b" "$root/bin/"; done
# The CUDA backend, which the programs load from ../lib when a GPU is asked for
# (kernels/gpu_plugin.h); absent from a build without CUDA.
plugin="$build_dir/lib/libtowerps_cuda.so"
if [ -f "$plugin" ]; then cp "$plugin" "$root/lib/"; fi
if [ "$with_tests" = 1 ]; then
  mkdir -p "$root/tests"
  if [ -n "$test_names" ]; then
    for t in ${test_names//,/ }; do
      if [ ! -x "$bin_dir/$t" ]; then echo "package: no test binary $bin_dir/$t" >&2; exit 1; fi
      cp "$bin_dir/$t" "$root/tests/"
    done
  else
    for t in "$bin_dir"/*_test; do cp "$t" "$root/tests/"; done
  fi
fi
cp launch/examples/train.sbatch "$root/examples/"
if [ "$with_python" = 1 ]; then scripts/python_kit.sh "$build_dir" "$root"; fi
missing=()
while read -r lib arrow path _; do
  [ "$arrow" = "=>" ] || continue
  if [[ "$lib" =~ $system_lib ]] || [[ "$lib" =~ $cuda_lib ]]; then continue; fi
  if [ "$path" = "not" ]; then missing+=("$lib"); continue; fi
  if [[ "$lib" =~ $cxx_runtime ]]; then cp -L "$path" "$root/lib/compat/$lib"
  else cp -L "$path" "$root/lib/$lib"; fi
done < <(for b in "$root"/bin/* "$root"/tests/* "$root"/lib/libtowerps_*.so; do
           [ -f "$b" ] && ldd "$b"; done | sort -u)
if [ ${#missing[@]} -gt 0 ]; then
  echo "package: these libraries are not found here, so they cannot be bundled: ${missing[*]}" >&2
  exit 1
fi

cat > "$root/env.sh" <<'EOF'
# Source this file: `. /path/to/towerps/env.sh`. It puts the TowerPS binaries on PATH and their
# libraries on LD_LIBRARY_PATH. The CUDA runtime, cuBLAS and cuDNN come from the node: a CUDA
# install the loader already finds (ldconfig, or set CUDA_HOME), or the lib/ folders of the
# nvidia-* pip wheels (nvidia-cudnn-cu*, nvidia-cublas-cu*, nvidia-cuda-runtime-cu*, which
# PyTorch installs), which are added here when `python3 -c 'import nvidia'` finds them.
TOWERPS_HOME="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
export TOWERPS_HOME
export PATH="$TOWERPS_HOME/bin:$PATH"
_towerps_libs="$TOWERPS_HOME/lib"
if [ -n "${CUDA_HOME:-}" ] && [ -d "$CUDA_HOME/lib64" ]; then
  _towerps_libs="$_towerps_libs:$CUDA_HOME/lib64"
fi
_towerps_wheels="$(${PYTHON:-python3} - 2>/dev/null <<'PY' || true
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
dirs = []
for root in nvidia.__path__:
    dirs += sorted(d for d in glob.glob(os.path.join(root, "*", "lib")) if os.path.isdir(d))
    if os.path.isdir(os.path.join(root, "cu13", "lib")):
        dirs.append(os.path.join(root, "cu13", "lib"))
print(":".join(dirs))
PY
)"
if [ -n "$_towerps_wheels" ]; then _towerps_libs="$_towerps_libs:$_towerps_wheels"; fi
# The bundled C++ runtime, only where the node's lacks the newest version the binaries were
# built against (then the node's newer programs must not share this environment).
_towerps_cxx="$(/sbin/ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')"
if [ -f "$TOWERPS_HOME/lib/compat/libstdc++.so.6" ] &&
   { [ -z "$_towerps_cxx" ] || ! grep -aq "$(cat "$TOWERPS_HOME/lib/compat/GLIBCXX")" "$_towerps_cxx"; }; then
  _towerps_libs="$_towerps_libs:$TOWERPS_HOME/lib/compat"
fi
export LD_LIBRARY_PATH="$_towerps_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The towerps Python package, when the bundle has it (package.sh --with-python; build its
# extension for this node's Python with python/build_extension.sh).
if [ -d "$TOWERPS_HOME/python/towerps" ]; then
  export PYTHONPATH="$TOWERPS_HOME/python${PYTHONPATH:+:$PYTHONPATH}"
fi
unset _towerps_libs _towerps_wheels _towerps_cxx
EOF

cat > "$root/README.txt" <<EOF
TowerPS $version, built on $(. /etc/os-release && echo "$PRETTY_NAME") for $(uname -m).

  . ./env.sh                       # PATH, LD_LIBRARY_PATH (and pip CUDA wheels if present)
  towerps-launch --help
  towerps-launch --servers 1 --workers 2 --model cnn --towers gpu:0 --data-dir DIR

lib/ holds every library the binaries need except the C library and the CUDA stack (CUDA
runtime, cuBLAS, cuDNN, driver), which come from the node, and libtowerps_cuda.so, the GPU
backend the binaries load from there when a GPU tower is asked for. Check with:
ldd bin/towerps-worker lib/libtowerps_cuda.so
EOF

# The newest C++ runtime version the bundled libstdc++ has (env.sh compares the node's with it).
if [ -f "$root/lib/compat/libstdc++.so.6" ]; then
  grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$root/lib/compat/libstdc++.so.6" | sort -uV | tail -1 \
    > "$root/lib/compat/GLIBCXX"
fi
mkdir -p "$(dirname "$out")"
# Compressed by the name's suffix (.tar.gz, or .tar.xz: about 40% smaller, for a transfer with
# a size limit).
XZ_OPT="${XZ_OPT:--T0}" tar -C "$stage" -caf "$out" "$name"

# Check the tarball where nothing of this tree is: every library must resolve, from the bundle
# or (the CUDA stack) from this machine.
check="$(mktemp -d)"
trap 'rm -rf "$stage" "$check"' EXIT
tar -C "$check" -xf "$out"
unresolved="$(env -i PATH=/usr/bin:/bin HOME="$HOME" bash -c \
  ". '$check/$name/env.sh' && for b in '$check/$name'/bin/* '$check/$name'/lib/*.so*; do
     ldd \"\$b\"; done" |
  grep "not found" | sort -u || true)"
if [ -n "$unresolved" ]; then
  only_cuda=1
  while read -r lib _; do [[ "$lib" =~ $cuda_lib ]] || only_cuda=0; done <<< "$unresolved"
  if [ "$only_cuda" = 0 ]; then
    echo "package: the unpacked bundle does not resolve:" >&2
    echo "$unresolved" >&2
    exit 1
  fi
  echo "package: note: the CUDA libraries are not on this machine's loader path; the node must" \
       "provide them:" $(awk '{print $1}' <<< "$unresolved")
fi
env -i PATH=/usr/bin:/bin bash -c ". '$check/$name/env.sh' && towerps-launch --help >/dev/null"
echo "package: $out ($(du -h "$out" | cut -f1)): ${#binaries[@]} binaries, $(ls "$root/lib" | wc -l)" \
     "libraries; left to the node: the C library and the CUDA stack"
