"""Run an ONNX model on ONNX Runtime's CPU execution provider (the `onnxruntime` package from
PyPI, in scripts/python-env.sh's environment) and write its inputs and outputs as .npy: the
reference side of etc's real-model tests and of bench/onnx_vs_ort.sh.

  ort_run.py MODEL.onnx --output-dir DIR [--input NAME=FILE.npy]... [--seed N]
             [--input-shape NAME=AxBxC]... [--warmup N] [--iterations N] [--threads N]
             [--graph-opt disabled|basic|extended|all]

Inputs without --input get deterministic uniform [-1, 1) data from --seed (integers: 0 or 1)
and are written as DIR/input_<name>.npy (characters outside [A-Za-z0-9._-] become '_');
outputs are DIR/output_<i>.npy. stdout is one JSON line: {"model", "inputs", "outputs",
"latency_ms": {"median", "min", "mean", "iterations", "warmup"}, "threads"}.
Exit status: 0 ok, 2 bad arguments or inputs, 1 ONNX Runtime failed.
"""

import argparse
import json
import os
import re
import sys
import time

import numpy as np

_ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def _die(message, code=2):
    print(f"ort_run: error: {message}", file=sys.stderr)
    sys.exit(code)


def _name_value(flag, text):
    k = text.rfind("=")
    if k <= 0:
        _die(f"{flag} expects NAME=VALUE, got '{text}'")
    return text[:k], text[k + 1:]


def _shape(flag, text):
    if text in ("", "scalar"):
        return []
    if not re.fullmatch(r"\d+(x\d+)*", text):
        _die(f"{flag}: bad shape '{text}' (expected e.g. 1x3x48x192)")
    return [int(d) for d in text.split("x")]


def main(argv):
    ap = argparse.ArgumentParser(prog="ort_run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--input-shape", action="append", default=[])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--graph-opt", default="all", choices=["disabled", "basic", "extended", "all"])
    a = ap.parse_args(argv)
    if a.iterations < 1 or a.warmup < 0 or a.threads < 1:
        _die("--iterations and --threads must be >= 1, --warmup >= 0")

    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = a.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = {
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[a.graph_opt]
    try:
        session = ort.InferenceSession(a.model, opts, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - ORT raises several types
        _die(f"ONNX Runtime cannot load {a.model}: {e}", 1)

    given = dict(_name_value("--input", v) for v in a.input)
    shapes = {n: _shape("--input-shape", s) for n, s in (_name_value("--input-shape", v)
                                                         for v in a.input_shape)}
    names = {i.name for i in session.get_inputs()}
    for n in list(given) + list(shapes):
        if n not in names:
            _die(f"model has no input named '{n}' (inputs: {', '.join(sorted(names))})")
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.output_dir, exist_ok=True)
    feeds, described = {}, []
    for i in session.get_inputs():
        dtype = _ORT_TYPES.get(i.type)
        if dtype is None:
            _die(f"input '{i.name}' has type {i.type}, which ort_run.py does not generate")
        if i.name in given:
            x = np.load(given[i.name])
        else:
            shape = shapes.get(i.name)
            if shape is None:
                if any(not isinstance(d, int) or d < 0 for d in i.shape):
                    _die(f"input '{i.name}' has symbolic dims {i.shape}: give --input-shape")
                shape = list(i.shape)
            if np.issubdtype(dtype, np.floating):
                x = rng.uniform(-1, 1, shape).astype(dtype)
            else:
                x = rng.integers(0, 2, shape).astype(dtype)
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", i.name)
        np.save(os.path.join(a.output_dir, f"input_{safe}.npy"), x)
        feeds[i.name] = x
        described.append({"name": i.name, "dtype": str(x.dtype), "shape": list(x.shape)})

    try:
        for _ in range(a.warmup):
            session.run(None, feeds)
        times = []
        for _ in range(a.iterations):
            t0 = time.perf_counter()
            outputs = session.run(None, feeds)
            times.append((time.perf_counter() - t0) * 1e3)
    except Exception as e:  # noqa: BLE001
        _die(f"ONNX Runtime failed to run {a.model}: {e}", 1)
    for k, o in enumerate(outputs):
        np.save(os.path.join(a.output_dir, f"output_{k}.npy"), np.asarray(o))
    r3 = lambda v: round(float(v), 3)  # noqa: E731
    print(json.dumps({
        "model": os.path.basename(a.model),
        "inputs": described,
        "outputs": [{"name": o.name, "dtype": str(np.asarray(v).dtype), "shape": list(np.shape(v))}
                    for o, v in zip(session.get_outputs(), outputs)],
        "latency_ms": {"median": r3(np.median(times)), "min": r3(min(times)),
                       "mean": r3(np.mean(times)), "iterations": len(times), "warmup": a.warmup},
        "threads": a.threads,
        "onnxruntime": ort.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
