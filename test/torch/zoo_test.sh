#!/usr/bin/env bash
# CTest wrapper: the model zoo (scripts/make-zoo.py, --set ci) through etc against PyTorch
# eager (test/torch/zoo_test.py), with the reference environment's Python. Fails when a
# family passes fewer models than recorded here (raise the number when a model starts to
# pass; docs/zoo.md has the table).
# Usage: zoo_test.sh ETC ZOO_DIR
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$ROOT/scripts/python-env.sh")
exec "$py" "$ROOT/test/torch/zoo_test.py" "$1" "$2" --min-pass torchvision=24
