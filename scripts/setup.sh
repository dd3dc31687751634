#!/usr/bin/env bash
# Installs TowerPS's build and test dependencies from Debian packages. Idempotent: when every
# package is present it changes nothing and needs no network. Runs apt-get as root (or via sudo).
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,3p' "$0" | sed 's/^# //'; exit 0 ;;
  "") ;;
  *) echo "setup: unknown argument '$1'; it takes none (see --help)" >&2; exit 2 ;;
esac

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang-14 libfuzzer-14-dev lld
  libzmq3-dev cppzmq-dev libsodium-dev
  capnproto libcapnp-dev
  libboost-program-options-dev
  nlohmann-json3-dev
  googletest libgtest-dev
  zlib1g-dev libzip-dev
  librocksdb-dev rocksdb-tools
  libopenblas-dev libdnnl-dev ocl-icd-opencl-dev
  libgoogle-perftools-dev
  dataset-fashion-mnist
  openmpi-bin
  slurm-wlm munge
  openssh-client openssh-server iproute2
  python3 python3-numpy python3-matplotlib
  python3-dev pybind11-dev python3-torch
  universal-ctags
  python3-protobuf python3-crc32c
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root, or install them with: apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
