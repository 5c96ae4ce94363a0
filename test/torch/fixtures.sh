#!/usr/bin/env bash
# The PyTorch programs of scripts/make-torch-fixtures.py (each model as model.pt2 and
# model.core.pt2 with its inputs and PyTorch eager's outputs), made once with the pinned
# reference environment (scripts/python-env.sh) and cached; prints their folder. The cache
# key is the generator's SHA-256 (with the layers it imports, scripts/fixture_layers.py) and
# the environment's stamp. Messages go to stderr; a
# failure exits 1 (the tests that need them fail, they are not skipped).
#   fixtures.sh [LINK [GENERATOR]]   also links LINK to the folder (for CTest's fixture
#   setup); GENERATOR is another script of scripts/ (make-decoder-fixtures.py), cached apart
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
generator=${2:-make-torch-fixtures.py}
py=$("$ROOT/scripts/python-env.sh") || { echo "torch fixtures: no Python reference environment" >&2; exit 1; }
key=$({ sha256sum "$ROOT/scripts/$generator" "$ROOT/scripts/fixture_layers.py" | cut -d' ' -f1;
       cat "$(dirname "$(dirname "$py")")/.etc-stamp"; } |
      sha256sum | cut -c1-16)
name=${generator#make-}
cache="${ETC_CACHE_DIR:-$HOME/.cache/etc}/${name%.py}"  # torch-fixtures, decoder-fixtures
dir="$cache/$key"
if [[ ! -f "$dir/.complete" ]]; then
  mkdir -p "$cache"
  exec 9>"$cache/.lock"
  flock 9
  if [[ ! -f "$dir/.complete" ]]; then
    rm -rf "$dir.tmp"
    echo "torch fixtures: exporting the models with PyTorch into $dir" >&2
    if ! "$py" "$ROOT/scripts/$generator" "$dir.tmp" >&2; then
      rm -rf "$dir.tmp"
      echo "torch fixtures: PyTorch could not export the fixture models" >&2
      exit 1
    fi
    touch "$dir.tmp/.complete"
    rm -rf "$dir"
    mv "$dir.tmp" "$dir"
  fi
fi
if [[ -n "${1:-}" ]]; then
  ln -sfn "$dir" "$1"
  echo "PyTorch programs at $1 -> $dir:" >&2
  ls "$dir" >&2
fi
echo "$dir"
