#!/usr/bin/env bash
# CTest wrapper: runs torch_models_test.py with the reference environment's Python.
# Usage: torch_models_test.sh ETC FIXTURES
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$ROOT/scripts/python-env.sh")
exec "$py" "$ROOT/test/torch/torch_models_test.py" "$1" "$2"
