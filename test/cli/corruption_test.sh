#!/usr/bin/env bash
# The corruption matrix: for our exports and programs ExecuTorch wrote, truncations at every
# 1/64th of the file, 64 single-byte and 16 multi-byte random corruptions (fixed seed).
# `etc inspect` and `etc run --device cpu` must end with a clean result or a clean error
# (exit 0, 1, 3 or 4) — never a signal, never exit 70 (internal error). Damaged ONNX models
# and torch.export archives go through `etc export` the same way (exit 0 or 1).
# Usage: corruption_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$etc" export "$src/examples/mlp.json" -o "$tmp/mlp.pte" >/dev/null 2>&1
"$etc" export "$src/examples/cnn.json" -o "$tmp/cnn_cpu.pte" --target cpu >/dev/null 2>&1
# Programs ExecuTorch wrote (made with ExecuTorch from PyPI, cached).
fx=$("$src/test/executorch/fixtures.sh") || { echo "FAIL: ExecuTorch's programs could not be made"; exit 1; }
cp "$fx/add.pte" "$fx/conv.pte" "$fx/inline_constants.pte" "$tmp/"
/usr/bin/python3 - "$tmp" <<'PY'
import os, random, sys
d = sys.argv[1]
rng = random.Random(20261130)
os.makedirs(f"{d}/bad", exist_ok=True)
for name in ["mlp.pte", "cnn_cpu.pte", "add.pte", "conv.pte", "inline_constants.pte"]:
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
# `etc export` of each damaged model: exit 0 or 1 (a clean error), never anything else.
# Sets $exported to the number of files tried.
export_each() {
  exported=0
  local f rc
  for f in "$@"; do
    [[ -e "$f" ]] || continue
    exported=$((exported + 1))
    timeout 20 "$etc" export "$f" -o "$tmp/out.pte" >/dev/null 2>"$tmp/err"
    rc=$?
    case $rc in
      0) ;;
      1) clean_errors=$((clean_errors + 1)) ;;
      *)
        echo "FAIL: etc export $(basename "$f") exited $rc"
        head -3 "$tmp/err"
        failures=$((failures + 1))
        ;;
    esac
  done
}
# ONNX models from libonnx-testdata (with initializers, attributes, several node kinds):
# truncations and random byte changes through `etc export` (import + compile + write).
onnx_dir=/usr/share/libonnx-testdata/data/node
for t in conv_with_strides_padding gemm_all_attributes batchnorm_example resize_upsample_scales_nearest; do
  [[ -f "$onnx_dir/test_$t/model.onnx" ]] && cp "$onnx_dir/test_$t/model.onnx" "$tmp/$t.onnx"
done
/usr/bin/python3 - "$tmp" <<'PY'
import glob, os, random, sys
d = sys.argv[1]
rng = random.Random(20261130)
os.makedirs(f"{d}/badonnx", exist_ok=True)
for path in sorted(glob.glob(f"{d}/*.onnx")):
    data = open(path, "rb").read()
    stem = os.path.basename(path)[:-5]
    for i in range(32):
        open(f"{d}/badonnx/{stem}.trunc{i}.onnx", "wb").write(data[: len(data) * i // 32])
    for i in range(48):
        b = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        open(f"{d}/badonnx/{stem}.byte{i}.onnx", "wb").write(bytes(b))
PY
export_each "$tmp"/badonnx/*.onnx
onnx_files=$exported
# torch.export archives (test/torch/programs): truncations and random byte changes of the
# archive (mostly CRC errors), and archives rezipped with valid CRCs around a damaged
# program JSON or weights config, through `etc export`.
/usr/bin/python3 - "$tmp" "$src/test/torch/programs" <<'PY'
import glob, os, random, sys, zipfile
d, programs = sys.argv[1], sys.argv[2]
rng = random.Random(20261201)
os.makedirs(f"{d}/badpt2", exist_ok=True)
for path in sorted(glob.glob(f"{programs}/*.pt2")):
    data = open(path, "rb").read()
    stem = os.path.basename(path)[:-4]
    for i in range(32):
        open(f"{d}/badpt2/{stem}.trunc{i}.pt2", "wb").write(data[: len(data) * i // 32])
    for i in range(32):
        b = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        open(f"{d}/badpt2/{stem}.byte{i}.pt2", "wb").write(bytes(b))
    entries = [(i.filename, zipfile.ZipFile(path).read(i.filename)) for i in zipfile.ZipFile(path).infolist()]
    for i in range(32):
        with zipfile.ZipFile(f"{d}/badpt2/{stem}.json{i}.pt2", "w") as z:
            for name, body in entries:
                if name.endswith((".json")) and rng.random() < 0.7:
                    b = bytearray(body)
                    for _ in range(rng.randrange(1, 6)):
                        b[rng.randrange(len(b))] = rng.choice(b'{}[]":,0123456789-eE.tfn ')
                    body = bytes(b)
                z.writestr(name, body)
PY
export_each "$tmp"/badpt2/*.pt2
pt2_files=$exported
echo "corruption matrix: $files files x 2 commands, $onnx_files ONNX models and $pt2_files torch.export archives through export, $clean_errors clean errors, $failures failures"
exit $((failures > 0))
