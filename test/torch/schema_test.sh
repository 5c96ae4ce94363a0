#!/usr/bin/env bash
# The op table's schemas against the pinned PyTorch's (test/torch/schema_test.py, in the
# reference environment).
# Usage: schema_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
py=$("$src/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
exec "$py" "$src/test/torch/schema_test.py" "$etc"
