"""The stress op cases (op_cases.py: whole integer ranges, large magnitudes, special values,
overflowing conversions) through etc's CPU kernels against PyTorch's ATen on the same inputs:
the CPU reference that the CUDA kernels are checked against must itself be right on them.

  stress_vs_torch.py ETC CASES_DIR      (run in scripts/python-env.sh's environment)

Each stress case is a one-node etc.graph model; the node's ATen op is called through
torch.ops.aten with the same arguments. Floats must match within 4 ulps of the result plus
4 ulps of the largest input, with equal infinities and NaN positions; integers and bools
exactly.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DTYPES = {"float32": torch.float32, "float16": torch.float16, "int32": torch.int32,
          "int64": torch.int64, "bool": torch.bool, "bfloat16": torch.bfloat16}


# Ops whose float32 reference is ATen's float64 result rounded to float32. ATen's vectorised
# CPU fmod and remainder compute a - trunc(a / b) * b (floor for remainder), which is NaN when
# a / b overflows float32 (5.5 mod 1e-45, 3.4e38 mod 1); C's fmod, ATen's scalar path and
# ATen's CUDA kernels are exact there (fmod's result is exact in any precision), and so is etc.
EXACT_IN_FLOAT64 = {"aten.fmod.Tensor", "aten.fmod.Scalar", "aten.remainder.Tensor",
                    "aten.remainder.Scalar"}


def aten_call(node, tensors):
    _, name, overload = node["op"].split(".")
    fn = getattr(getattr(torch.ops.aten, name), overload)
    kwargs = {}
    for k, v in node["args"].items():
        if isinstance(v, str) and v in tensors:
            kwargs[k] = tensors[v]
        elif isinstance(v, list) and v and all(x is None or (isinstance(x, str) and x in tensors)
                                               for x in v) and any(x is not None for x in v):
            kwargs[k] = [None if x is None else tensors[x] for x in v]  # Tensor[] / Tensor?[]
        elif k == "dtype" and isinstance(v, str):
            kwargs[k] = DTYPES[v]
        else:
            kwargs[k] = v
    out = fn(**kwargs)
    return out[0] if isinstance(out, (tuple, list)) else out


def same(got, want, scale):
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "f":
        g, w = got.astype(np.float64), want.astype(np.float64)
        if not np.array_equal(np.isnan(g), np.isnan(w)):
            return "NaN positions differ"
        fin = np.isfinite(w) & np.isfinite(g)
        if not np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)]):
            k = np.flatnonzero((g != w) & ~fin & ~np.isnan(w))[:3]
            return f"infinities differ at {k.tolist()}: {g.flat[k[0]]} vs {w.flat[k[0]]}"
        # Both sides round: within a few ulps of the result, and of the inputs' magnitude
        # (log_softmax of inputs near 300 loses what float32 cannot hold of x - max).
        eps = float(np.finfo(want.dtype).eps)
        rtol = 4 * eps
        atol = 4 * eps * scale + 1e-30
        err = np.abs(g[fin] - w[fin]) - rtol * np.abs(w[fin]) - atol
        if err.size and err.max() > 0:
            k = int(np.argmax(err))
            return f"max error beyond rtol {rtol}: {g[fin][k]!r} vs {w[fin][k]!r}"
        return None
    if not np.array_equal(got, want):
        k = int(np.flatnonzero(got != want)[0])
        return f"value {k}: {got.flat[k]!r} vs {want.flat[k]!r}"
    return None


def main(etc, folder):
    failures = passes = 0
    with open(os.path.join(folder, "cases.txt")) as f:
        lines = [line.strip() for line in f if line.startswith("stress_")]
    for line in lines:
        name, _, run_args = line.split("|", 2)
        graph = json.load(open(os.path.join(folder, name + ".json")))
        node = graph["nodes"][0]
        tensors = {}
        for spec in graph["inputs"]:
            path = os.path.join(folder, f"{name}.{spec['name']}.npy")
            if os.path.exists(path):
                arr = np.load(path)
            else:  # an input etc fills with its own seeded data: use the same file etc wrote
                arr = None
            tensors[spec["name"]] = arr
        with tempfile.TemporaryDirectory() as tmp:
            pte = os.path.join(tmp, "m.pte")
            subprocess.run([etc, "export", os.path.join(folder, name + ".json"), "-o", pte,
                            "--target", "cpu"], check=True, capture_output=True)
            args = [a for a in run_args.split() if a]
            missing = [k for k, v in tensors.items() if v is None]
            for k in missing:  # random data for inputs without a file, saved for torch too
                spec = next(s for s in graph["inputs"] if s["name"] == k)
                rng = np.random.default_rng(0)
                tensors[k] = rng.uniform(-1, 1, spec["shape"]).astype(spec["dtype"])
                p = os.path.join(tmp, k + ".npy")
                np.save(p, tensors[k])
                args += ["--input", f"{k}={p}"]
            r = subprocess.run([etc, "run", pte, "--device", "cpu", "--output-dir", tmp] + args,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL: {name}: etc run: {r.stderr.strip()[-300:]}")
                failures += 1
                continue
            got = np.load(os.path.join(tmp, "output_0.npy"))
        inputs = {k: torch.from_numpy(v) for k, v in tensors.items()}
        if node["op"] in EXACT_IN_FLOAT64 and all(v.dtype == torch.float32 for v in inputs.values()):
            want = aten_call(node, {k: v.double() for k, v in inputs.items()}).float()
        else:
            want = aten_call(node, inputs)
        floats = [np.abs(v[np.isfinite(v)]).max() for v in tensors.values()
                  if v.dtype.kind == "f" and np.isfinite(v).any()]
        problem = same(got, want.numpy(), max(floats, default=0.0))
        if problem:
            print(f"FAIL: {name} ({node['op']}): etc's CPU kernel and ATen differ: {problem}")
            failures += 1
        else:
            print(f"ok: {name} ({node['op']}) matches ATen")
            passes += 1
    print(f"{passes} passed, {failures} failed")
    return 1 if failures or not passes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
