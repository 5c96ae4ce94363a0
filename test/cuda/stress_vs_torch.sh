#!/usr/bin/env bash
# The stress op cases (test/cuda/op_cases.py) through etc's CPU kernels against PyTorch's
# ATen (test/cuda/stress_vs_torch.py, in the pinned reference environment).
# Usage: stress_vs_torch.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=$("$src/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
python3 "$src/test/cuda/op_cases.py" "$tmp/cases" --no-big >/dev/null || { echo "FAIL: op_cases.py"; exit 1; }
"$py" "$src/test/cuda/stress_vs_torch.py" "$etc" "$tmp/cases" 2>&1 | grep -v -i "warning"
exit "${PIPESTATUS[0]}"
