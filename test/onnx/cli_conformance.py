#!/usr/bin/env python3
"""ONNX's node tests through etc's command line: what a user gets with `etc export` and
`etc run` on the tests' own files, beside the in-process runner (conformance.cpp).

  cli_conformance.py ETC DATA_DIR [--jobs N] [--verbose] [--min-passed N]

For each test folder of DATA_DIR (libonnx-testdata's node/ or an older set): `etc export
model.onnx --target cpu` with --input-shape for every input (a sequence's elements as
NAME.0, NAME.1, ...; an absent optional one as --absent-input NAME), `etc run --device cpu`
on every test_data_set_* with the inputs written as .npy, and each output compared with the
test's as the runner compares (float32: rtol 1e-3, atol 1e-5, as numpy.isclose; float64 atol
1e-7; float16 and bfloat16 rtol 1e-2, atol 1e-3, bfloat16 outputs coming back as float32;
other types exactly; NaN matches NaN).
Where etc refuses because an input must be known at export time, that input is baked into
the model as an initializer and the export retried, as the runner does: first the inputs
etc's error names ("(input N, 'NAME')"), one at a time; then inputs 1..; then all inputs.
A test ends passed, refused (`etc export` exits 1 with its located error -- the exit status
does not tell unsupported from invalid, so --verbose lists the reasons to read -- or test data
this script cannot read), mismatched (wrong values, shapes or
types, or `etc run` failing on the test's inputs) or crashed (any other exit status, a
signal, a timeout).
Exit status 0 when nothing mismatched or crashed and (with --min-passed) enough passed.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

TIMEOUT_S = 120

# Tests whose stored outputs disagree with their own model (the same list as the runner's
# wrong_reference_data() in conformance.cpp): a mismatch of these is counted as refused with
# the reason, never as passed.
_LIKE = "input 'like' has shape [1] in the data, [3, 4] in the model"
WRONG_REFERENCE_DATA = {
    "test_adam_multiple": "the outputs were generated with epsilon=1e-2, which the node does "
                          "not set (the default is 1e-6)",
    "test_castlike_BFLOAT16_to_FLOAT": _LIKE,
    "test_castlike_BFLOAT16_to_FLOAT_expanded": _LIKE,
    "test_castlike_FLOAT_to_BFLOAT16": _LIKE,
    "test_castlike_FLOAT_to_BFLOAT16_expanded": _LIKE,
}


def to_array(t, declared=None):
    """A TensorProto as NumPy; bfloat16 (which onnx may give as its uint16 bit patterns, and
    ONNX 1.12's test data stores as uint16 where the model declares bfloat16) as float32."""
    a = numpy_helper.to_array(t)
    if onnx.TensorProto.BFLOAT16 in (t.data_type, declared):
        if a.dtype == np.uint16:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        else:
            a = a.astype(np.float32)
    return a


def load_value(path, type_proto):
    """A test value: ('tensor', array) | ('seq', [arrays]) | ('absent', None)."""
    data = open(path, "rb").read()
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return "seq", [to_array(t) for t in s.tensor_values]
    if kind == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        if o.elem_type == onnx.OptionalProto.TENSOR:
            return "tensor", to_array(o.tensor_value)
        if o.elem_type == onnx.OptionalProto.SEQUENCE:
            return "seq", [to_array(t) for t in o.sequence_value.tensor_values]
        return "absent", None
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return "tensor", to_array(t, type_proto.tensor_type.elem_type if kind == "tensor_type" else None)


def shape_spec(a):
    return "scalar" if a.ndim == 0 else "x".join(str(d) for d in a.shape)


def values_of(set_dir, prefix, types):
    out = []
    for i, t in enumerate(types):
        p = os.path.join(set_dir, f"{prefix}_{i}.pb")
        if not os.path.exists(p):
            break
        out.append(load_value(p, t))
    return out


def same(got, want, declared):
    """None when `got` matches `want` (as the runner compares: float32 rtol 1e-3 atol 1e-5,
    float64 atol 1e-7, float16 and bfloat16 rtol 1e-2 atol 1e-3; others exactly)."""
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind == "f":
        half = declared in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
        rtol = 1e-2 if half else 1e-3
        atol = 1e-3 if half else 1e-7 if declared == onnx.TensorProto.DOUBLE else 1e-5
        w = want.astype(np.float64)
        g = got.astype(np.float64)
        if not np.all(np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)):
            return f"values differ by up to {np.nanmax(np.abs(g - w)):.3g}"
        return None
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if not np.array_equal(got, want):
        return "values differ"
    return None


def run(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=TIMEOUT_S)
        return r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        return -999, "timed out"


def classify_error(code, stage):
    """An export that exits 1 is etc declining the model with a located error (the CLI's
    exit status does not tell unsupported from invalid); a run that fails on the test's own
    inputs, or any other status, is not."""
    if code == 1 and stage == "export":
        return "refused"
    if code in (1, 2, 3, 4):
        return "mismatched"
    return "crashed"


def first_error(text, code):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    for i, l in enumerate(lines):
        if "error:" in l:
            return " ".join(lines[i:i + 2]) if l.endswith(":") else l
    return lines[-1] if lines else f"exit {code}"


def run_test(etc, test_dir, work):
    name = os.path.basename(test_dir)
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    inits = {t.name for t in model.graph.initializer}
    ins = [i for i in model.graph.input if i.name not in inits]
    outs = list(model.graph.output)
    sets = sorted(d for d in os.listdir(test_dir) if d.startswith("test_data_set_"))
    if not sets:
        return name, "mismatched", "no test_data_set_*"
    try:
        data = [(values_of(os.path.join(test_dir, s), "input", [i.type for i in ins]),
                 values_of(os.path.join(test_dir, s), "output", [o.type for o in outs])) for s in sets]
    except Exception as e:  # test data this script cannot read (strings as numpy objects...)
        return name, "refused", f"test data: {type(e).__name__}: {e}"
    inputs0 = data[0][0]

    def export(baked):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        if any(baked):
            keep = []
            for i, inp in enumerate(m.graph.input):
                j = next((k for k, x in enumerate(ins) if x.name == inp.name), None)
                if j is not None and j < len(baked) and baked[j]:
                    m.graph.initializer.append(numpy_helper.from_array(inputs0[j][1], inp.name))
                else:
                    keep.append(inp)
            del m.graph.input[:]
            m.graph.input.extend(keep)
        path = os.path.join(work, "model.onnx")
        onnx.save(m, path)
        cmd = [etc, "export", path, "--target", "cpu", "-o", os.path.join(work, "model.pte")]
        for i, (k, v) in enumerate(inputs0):
            if i < len(baked) and baked[i]:
                continue
            if k == "absent":
                cmd += ["--absent-input", ins[i].name]
            elif k == "seq":
                for e, a in enumerate(v):
                    cmd += ["--input-shape", f"{ins[i].name}.{e}={shape_spec(a)}"]
            else:
                cmd += ["--input-shape", f"{ins[i].name}={shape_spec(v)}"]
        return run(cmd)

    def needs_constants(code, text):
        return code == 1 and "known at export time" in text

    def named(text):
        for i, x in enumerate(ins):
            if f", '{x.name}')" in text:
                return i
        return None

    baked = [False] * len(ins)
    code, text = export(baked)
    if needs_constants(code, text) and len(sets) == 1 and ins:
        done = False
        i = named(text)
        while i is not None and not baked[i]:
            baked[i] = True
            code, text = export(baked)
            if code == 0 or not needs_constants(code, text):
                done = code == 0
                break
            i = named(text)
        keep = 1 if len(ins) > 1 else 0
        while not done and code != 0:
            baked = [j >= keep for j in range(len(ins))]
            code, text = export(baked)
            if code == 0 or keep == 0 or not needs_constants(code, text):
                break
            keep -= 1
    if code != 0:
        return name, classify_error(code, "export"), first_error(text, code)

    for s, (inputs, expected) in zip(sets, data):
        cmd = [etc, "run", os.path.join(work, "model.pte"), "--device", "cpu", "--output-dir",
               os.path.join(work, s)]
        for i, (k, v) in enumerate(inputs):
            if (i < len(baked) and baked[i]) or k == "absent":
                continue
            arrays = [(f"{ins[i].name}.{e}", a) for e, a in enumerate(v)] if k == "seq" else [(ins[i].name, v)]
            for n, a in arrays:
                f = os.path.join(work, f"{s}_in_{re.sub('[^A-Za-z0-9._-]', '_', n)}.npy")
                np.save(f, a)  # bfloat16 as float32, which etc run accepts
                cmd += ["--input", f"{n}={f}"]
        code, text = run(cmd)
        if code != 0:
            return name, classify_error(code, "run"), f"{s}: " + first_error(text, code)
        k_out = 0
        for o, (k, v) in enumerate(expected):
            wants = v if k == "seq" else [v]
            for w in wants:
                f = os.path.join(work, s, f"output_{k_out}.npy")
                k_out += 1
                if not os.path.exists(f):
                    return name, "mismatched", f"{s}: no output_{k_out - 1}.npy"
                why = same(np.load(f), w, outs[o].type.tensor_type.elem_type)
                if why and name in WRONG_REFERENCE_DATA:
                    return name, "refused", "stored data disagree: " + WRONG_REFERENCE_DATA[name]
                if why:
                    return name, "mismatched", f"{s}: output {o}: {why}"
    return name, "passed", "constant parameters" if any(baked) else ""


def one(args):
    etc, d = args
    with tempfile.TemporaryDirectory() as work:
        try:
            return run_test(etc, d, work)
        except Exception as e:
            return os.path.basename(d), "mismatched", f"script: {type(e).__name__}: {e}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("etc")
    ap.add_argument("data_dir")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--min-passed", type=int, default=0)
    a = ap.parse_args()
    dirs = sorted(os.path.join(a.data_dir, d) for d in os.listdir(a.data_dir)
                  if os.path.exists(os.path.join(a.data_dir, d, "model.onnx")))
    counts = {"passed": 0, "refused": 0, "mismatched": 0, "crashed": 0}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for name, outcome, why in ex.map(one, [(a.etc, d) for d in dirs]):
            counts[outcome] += 1
            if a.verbose or outcome in ("mismatched", "crashed"):
                print(f"{outcome}: {name}{': ' + why if why else ''}")
    print(f"{len(dirs)} tests: {counts['passed']} passed, {counts['refused']} refused, "
          f"{counts['mismatched']} mismatched, {counts['crashed']} crashed")
    bad = counts["mismatched"] + counts["crashed"]
    if counts["passed"] < a.min_passed:
        print(f"FAIL: {counts['passed']} passed, fewer than the recorded {a.min_passed}")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
