#!/usr/bin/env bash
# The bundled examples are reproducible: examples/generate.py regenerates every file byte
# for byte, and every example validates.
# Usage: examples_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
python3 "$src/examples/generate.py" "$tmp" || { echo "FAIL: generate.py failed"; exit 1; }
for f in "$tmp"/*; do
  name=$(basename "$f")
  if ! cmp -s "$f" "$src/examples/$name"; then
    echo "FAIL: examples/$name differs from what generate.py writes (run examples/generate.py and commit)"
    status=1
  else
    echo "ok: examples/$name is reproducible"
  fi
done
for model in "$src"/examples/*.json; do
  if "$etc" validate "$model" >/dev/null; then
    echo "ok: $(basename "$model") validates"
  else
    echo "FAIL: $(basename "$model") does not validate"
    status=1
  fi
done
exit $status
