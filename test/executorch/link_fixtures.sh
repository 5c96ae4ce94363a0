#!/usr/bin/env bash
# CTest fixture setup: makes (or finds in the cache) the programs ExecuTorch writes and
# links them at LINK for the tests that read them. Usage: link_fixtures.sh LINK
set -euo pipefail
dir=$("$(dirname "$0")/fixtures.sh")
ln -sfn "$dir" "$1"
echo "ExecuTorch-written programs at $1 -> $dir:"
cat "$dir/cases.txt"
