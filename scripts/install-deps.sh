#!/usr/bin/env bash
# Installs the Debian packages etc needs to build and test, and only those that are
# missing. Idempotent: a second run changes nothing and does not touch the network.
# Never downloads anything outside Debian's package archive.
#
# Usage: scripts/install-deps.sh [--check]   (--check: report only, install nothing)
set -euo pipefail

check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

# Build tools and libraries, each a Debian package name.
packages=(
  build-essential
  cmake
  ninja-build
  ccache
  pkg-config
  libflatbuffers-dev
  flatbuffers-compiler
  libcli11-dev
  nlohmann-json3-dev
  libspdlog-dev
  libfmt-dev
  catch2
  llvm-14-tools
  clang-format
  clang-tidy
  python3
  python3-numpy
  clang-14
  libclang-rt-14-dev
  libonnx-dev
  libprotobuf-dev
  protobuf-compiler
  libonnx-testdata
  unzip
  libminizip-dev
  libdnnl-dev
)
# The Python references (ExecuTorch, PyTorch, ONNX Runtime) go into a virtual environment
# under the cache (scripts/python-env.sh), which needs Python's venv module.
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  packages+=(python3 python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} Debian packages are present."
elif ((check_only)); then
  echo "install-deps: missing packages: ${missing[*]}"
  exit 1
else
  echo "install-deps: installing missing packages: ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: installed ${#missing[@]} package(s)."
fi

# The CUDA toolkit is optional and not a Debian package we install: it is detected only.
nvcc_path=$(command -v nvcc || true)
[[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]] && nvcc_path=/usr/local/cuda/bin/nvcc
if [[ -n "$nvcc_path" ]]; then
  ver=$("$nvcc_path" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  echo "install-deps: CUDA toolkit found ($nvcc_path, release ${ver:-unknown}): the CUDA delegate and runtime will be built."
else
  echo "install-deps: no CUDA toolkit found (no nvcc on PATH or in /usr/local/cuda/bin):"
  echo "              etc will be built CPU-only; --target cuda exports still work, running on CUDA will not."
fi
