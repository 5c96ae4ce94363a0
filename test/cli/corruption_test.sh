#!/usr/bin/env bash
# The corruption matrix: for our exports and ExecuTorch's fixtures, truncations at every
# 1/64th of the file, 64 single-byte and 16 multi-byte random corruptions (fixed seed).
# `etc inspect` and `etc run --device cpu` must end with a clean result or a clean error
# (exit 0, 1, 3 or 4) — never a signal, never exit 70 (internal error).
# Usage: corruption_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$etc" export "$src/examples/mlp.json" -o "$tmp/mlp.pte" >/dev/null 2>&1
"$etc" export "$src/examples/cnn.json" -o "$tmp/cnn_cpu.pte" --target cpu >/dev/null 2>&1
cp "$src/../shared/fixtures/executorch/add.pte" "$src/../shared/fixtures/executorch/module_linear_constant_buffer.pte" "$tmp/"
/usr/bin/python3 - "$tmp" <<'PY'
import os, random, sys
d = sys.argv[1]
rng = random.Random(20261130)
os.makedirs(f"{d}/bad", exist_ok=True)
for name in ["mlp.pte", "cnn_cpu.pte", "add.pte", "module_linear_constant_buffer.pte"]:
    data = open(f"{d}/{name}", "rb").read()
    stem = name[:-4]
    for i in range(64):
        open(f"{d}/bad/{stem}.trunc{i}.pte", "wb").write(data[: len(data) * i // 64])
    for i in range(64):
        b = bytearray(data)
        b[rng.randrange(len(b))] = rng.randrange(256)
        open(f"{d}/bad/{stem}.byte{i}.pte", "wb").write(bytes(b))
    for i in range(16):
        b = bytearray(data)
        for _ in range(rng.randrange(2, 32)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        open(f"{d}/bad/{stem}.multi{i}.pte", "wb").write(bytes(b))
PY
failures=0 files=0 clean_errors=0
for f in "$tmp"/bad/*.pte; do
  files=$((files + 1))
  for cmd in inspect run; do
    if [[ $cmd == run ]]; then
      timeout 20 "$etc" run "$f" --device cpu >/dev/null 2>"$tmp/err"
    else
      timeout 20 "$etc" inspect "$f" >/dev/null 2>"$tmp/err"
    fi
    rc=$?
    case $rc in
      0 | 3) ;;
      1 | 4) clean_errors=$((clean_errors + 1)) ;;
      *)
        echo "FAIL: etc $cmd $(basename "$f") exited $rc"
        head -3 "$tmp/err"
        failures=$((failures + 1))
        ;;
    esac
  done
done
echo "corruption matrix: $files files x 2 commands, $clean_errors clean errors, $failures failures"
exit $((failures > 0))
