#!/usr/bin/env bash
# CTest wrapper: one family of the model zoo (scripts/make-zoo.py, --set ci) through etc
# against PyTorch eager (test/torch/zoo_test.py), with the reference environment's Python.
# Fails when the family passes fewer models than recorded here (raise the number when a model
# starts to pass; docs/zoo.md has the table).
# Usage: zoo_test.sh ETC ZOO_DIR FAMILY
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
case "$3" in
  torchvision) min=24 ;;   # of 24
  transformers) min=13 ;;  # of 13
  *) echo "zoo_test.sh: unknown family '$3'" >&2; exit 2 ;;
esac
py=$("$ROOT/scripts/python-env.sh")
exec "$py" "$ROOT/test/torch/zoo_test.py" "$1" "$2" --family "$3" --min-pass "$3=$min"
