#!/usr/bin/env bash
# scripts/package.sh on this build: the tarball holds the binaries and their non-system
# libraries (not the C library, not the CUDA stack), and, unpacked elsewhere with a bare
# environment, its binaries resolve their libraries from the bundle and run a short job.
# Usage: package_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/scripts/package.sh" --no-build --build-dir "$build" --out "$work/t.tar.gz"
listing="$(tar tzf "$work/t.tar.gz")"
for f in bin/towerps-server bin/towerps-worker bin/towerps-launch bin/towerps-bench env.sh \
         lib/libzmq.so.5 lib/libcapnp- lib/libboost_program_options lib/libopenblas.so.0; do
  grep -q "/$f" <<< "$listing" || fail "the tarball lacks $f"
done
for f in lib/libc.so.6 lib/libm.so.6 lib/libcudart lib/libcublas lib/libcudnn lib/libcuda.so; do
  if grep -q "/$f" <<< "$listing"; then fail "the tarball bundles $f, which must come from the node"; fi
done

mkdir -p "$work/elsewhere"
tar -C "$work/elsewhere" -xzf "$work/t.tar.gz"
home="$(ls -d "$work"/elsewhere/towerps-*)"
resolved="$(env -i PATH=/usr/bin:/bin bash -c ". '$home/env.sh' && ldd '$home/bin/towerps-worker'")"
grep -q "libzmq.so.5 => $home/lib/libzmq.so.5" <<< "$resolved" ||
  fail "libzmq does not resolve from the bundle: $(grep libzmq <<< "$resolved")"
grep -q "libopenblas.so.0 => $home/lib/" <<< "$resolved" || fail "OpenBLAS not from the bundle"

# The unpacked launcher finds its sibling binaries (nothing else is on PATH) and runs a job.
out="$(cd "$work" && env -i PATH=/usr/bin:/bin HOME="$work" bash -c \
  ". '$home/env.sh' && towerps-launch --servers 1 --workers 1 --model mlp --max-steps 5 \
   --run-dir '$work/run'" 2>&1)" || fail "the bundled job failed: $out"
grep -q "test accuracy" <<< "$out" || fail "no accuracy from the bundled job: $out"
# --tests takes the GPU verification's list and bundles exactly those test binaries; a name with
# no binary is refused.
"$src/scripts/package.sh" --no-build --build-dir "$build" --out "$work/g.tar.gz" \
  --tests "$("$src/scripts/gpu_verify.sh" --tests)" > /dev/null
got="$(tar tzf "$work/g.tar.gz" | grep "/tests/." | sed 's|.*/tests/||' | sort | tr '\n' ',')"
want="$("$src/scripts/gpu_verify.sh" --tests | tr ',' '\n' | sort | tr '\n' ',')"
[ "$got" = "$want" ] || fail "--tests bundled '$got', not '$want'"
if err="$("$src/scripts/package.sh" --no-build --build-dir "$build" --out "$work/x.tar.gz" \
            --tests nope_test 2>&1)"; then
  fail "--tests nope_test succeeded"
fi
grep -q "no test binary .*nope_test" <<< "$err" || fail "unclear error for --tests nope_test: $err"
# The C++ runtime goes to lib/compat, off the loader path on a node whose own is as new (this
# one), so that newer programs sharing the environment (a PyTorch) keep theirs.
grep -q "/lib/compat/libstdc++.so.6" <<< "$listing" || fail "libstdc++ is not in lib/compat"
if grep -q "/lib/libstdc++" <<< "$listing"; then fail "libstdc++ is on the bundle's lib/"; fi
grep -q "libstdc++.so.6 => /\(usr/\)\?lib" <<< "$resolved" ||
  fail "libstdc++ does not resolve from the node: $(grep libstdc <<< "$resolved")"
# --with-python (where the build has the extension): the session library, the pure-Python
# modules and the kit; python/build_extension.sh builds the extension there, for this Python,
# and it imports with env.sh's PYTHONPATH.
if grep -q "^build python/towerps/_towerps" "$build/build.ninja"; then
  "$src/scripts/package.sh" --no-build --build-dir "$build" --out "$work/p.tar.gz" \
    --with-python > /dev/null
  mkdir -p "$work/py"
  tar -C "$work/py" -xzf "$work/p.tar.gz"
  phome="$(ls -d "$work"/py/towerps-*)"
  for f in lib/libtowerps_session.so python/towerps/torch.py python/kit/module.cc \
           python/kit/include/python/session.h python/kit/include/capnp/message.h; do
    [ -f "$phome/$f" ] || fail "--with-python lacks $f"
  done
  rm -f "$phome"/python/towerps/_towerps*.so
  built="$(env -i PATH=/usr/bin:/bin PYTHON=/usr/bin/python3 bash "$phome/python/build_extension.sh" 2>&1)" ||
    fail "build_extension.sh failed: $built"
  imported="$(cd "$work" && env -i PATH=/usr/bin:/bin bash -c ". '$phome/env.sh' &&
    /usr/bin/python3 -c 'from towerps import _towerps; print(_towerps.__file__)'" 2>&1)" ||
    fail "the extension the kit built does not import: $imported"
  grep -q "^$phome/python/towerps/_towerps" <<< "$imported" || fail "imported $imported"
fi
echo "package_test: OK"
