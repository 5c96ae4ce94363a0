#!/usr/bin/env bash
# Programs written by ExecuTorch itself (test/executorch/et_ref.py fixtures), made once with
# the pinned reference environment (scripts/python-env.sh) and cached; prints their folder.
# The cache key is the generator's SHA-256 and the environment's stamp, so a change to either
# makes them anew. Messages go to stderr; a failure exits 1 (tests that need them fail).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
py=$("$ROOT/scripts/python-env.sh") || { echo "fixtures: no Python reference environment" >&2; exit 1; }
key=$({ sha256sum "$ROOT/test/executorch/et_ref.py" | cut -d' ' -f1; cat "$(dirname "$(dirname "$py")")/.etc-stamp"; } |
      sha256sum | cut -c1-16)
cache="${ETC_CACHE_DIR:-$HOME/.cache/etc}/executorch-fixtures"
dir="$cache/$key"
if [[ -f "$dir/cases.txt" ]]; then echo "$dir"; exit 0; fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [[ -f "$dir/cases.txt" ]]; then echo "$dir"; exit 0; fi
rm -rf "$dir.tmp"
if ! "$py" "$ROOT/test/executorch/et_ref.py" fixtures "$dir.tmp" >&2; then
  rm -rf "$dir.tmp"
  echo "fixtures: ExecuTorch could not export the fixture programs" >&2
  exit 1
fi
mv "$dir.tmp" "$dir"
echo "$dir"
