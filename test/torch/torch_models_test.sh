#!/usr/bin/env bash
# CTest wrapper: runs torch_models_test.py (or SCRIPT, another test of this folder) with the
# reference environment's Python.
# Usage: torch_models_test.sh ETC FIXTURES [SCRIPT]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$ROOT/scripts/python-env.sh")
exec "$py" "$ROOT/test/torch/${3:-torch_models_test.py}" "$1" "$2"
