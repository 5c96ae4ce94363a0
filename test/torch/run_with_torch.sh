#!/usr/bin/env bash
# Runs a Python test of this folder with the pinned reference environment's Python
# (scripts/python-env.sh installs it once, cached).
# Usage: run_with_torch.sh SCRIPT ARGS...   (SCRIPT: a file name in test/torch)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$ROOT/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
script=$1
shift
exec "$py" "$ROOT/test/torch/$script" "$@"
