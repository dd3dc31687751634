#!/usr/bin/env bash
# Runs bench/pslite/pslite_store.cc, the ps-lite embedding store that `towerps-bench sparse` is
# compared with (docs/PERFORMANCE.md): a scheduler, one server and one worker on loopback, for
# STEPS steps, and waits for all three, so that `/usr/bin/time` on this script reads the CPU of
# every process. The first run builds ps-lite and the store in BUILD_DIR (Debian's protobuf and
# ZeroMQ: apt-get install libprotobuf-dev protobuf-compiler libzmq3-dev).
#
#   bench/pslite/run.sh --pslite-dir DIR [--build-dir /tmp/towerps-pslite] [--steps 3000]
#                       [--port 9091] [--timeout 600]
#
# A process still running after --timeout seconds is killed, and the run fails.
#
# DIR is a checkout of https://github.com/dmlc/ps-lite (measured: 15b8adf). ps-lite is not a
# dependency of TowerPS: nothing of it is vendored or built by CMake.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
pslite="" build="/tmp/towerps-pslite" steps=3000 port=9091 limit=600
usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --pslite-dir) pslite="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --timeout) limit="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
[[ -n "$pslite" ]] || { echo "run.sh: --pslite-dir is required (a checkout of dmlc/ps-lite); see --help" >&2; exit 2; }
[[ -f "$pslite/include/ps/ps.h" ]] || { echo "run.sh: $pslite has no include/ps/ps.h: not a ps-lite checkout" >&2; exit 2; }
for n in "--steps $steps" "--port $port" "--timeout $limit"; do
  [[ "${n#* }" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: $n: give a positive whole number" >&2; exit 2; }
done
for tool in protoc g++ pkg-config; do
  command -v "$tool" > /dev/null || { echo "run.sh: $tool not found; apt-get install protobuf-compiler g++ pkg-config" >&2; exit 2; }
done

store="$build/pslite_store"
if [[ ! -x "$store" || "$here/pslite_store.cc" -nt "$store" ]]; then
  echo "run.sh: building ps-lite and the store in $build" >&2
  mkdir -p "$build/gen"
  protoc --proto_path="$pslite/src" --cpp_out="$build/gen" "$pslite/src/meta.proto"
  flags=(-std=c++17 -O3 -DNDEBUG -w -I"$pslite/include" -I"$pslite/src" -I"$build/gen" -I"$repo")
  objs=()
  for src in "$pslite"/src/*.cc "$build/gen/meta.pb.cc"; do
    obj="$build/$(basename "${src%.cc}").o"
    g++ "${flags[@]}" -c "$src" -o "$obj"
    objs+=("$obj")
  done
  read -ra libs <<< "$(pkg-config --libs libzmq protobuf)"
  g++ "${flags[@]}" "$here/pslite_store.cc" "${objs[@]}" -o "$store" "${libs[@]}" -pthread
fi

export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port"
export DMLC_INTERFACE=lo DMLC_NODE_HOST=127.0.0.1
pids=()
trap 'kill "${pids[@]}" 2> /dev/null || true' EXIT
for role in scheduler server worker; do
  DMLC_ROLE=$role timeout "$limit" "$store" "$steps" & pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
trap - EXIT
exit "$status"
