#!/usr/bin/env python3
"""Sizes and values the data decides, as torch.export writes them.

- nonzero: its count is a symbol of its own (u0, in [0, numel]). etc plans the output and
  everything whose size follows it at the bound (dynamic-bound, as ExecuTorch does) and the
  kernels resize them at run time. Each program is exported once and run on inputs with no,
  some and only non-zero elements; every output must equal PyTorch eager's, in both export
  forms (the default and run_decompositions()). The symbolic arithmetic on the count
  (`_operator.mul`, `ge`, ...) and the range assertions torch.export adds for it are imported.
- An assertion the symbol's range does not imply (torch._check(n >= 2)) is refused by name:
  etc checks sizes only against their bounds at run time.
- Dropout in training mode: a mask drawn at run time; checked by its contract (each element
  0 or x / (1 - p), the mask's share near 1 - p, the mask output equal to where it kept).
- FFTs (complex tensors) and Tensor.item() are refused by name, with the reason.
- Symbolic arithmetic past int64 (an archive edited so that the count's multiplier is 2^62) is
  an error that says so, exit 1, no output file.
- And two ops the default export keeps that the Core ATen suite does not reach: diff
  (transformers' packed-sequence mask; every order, prepend/append, bool) and sum.default.

  data_dependent_test.py ETC      (run with the reference environment's python)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F


class NonzeroGather(torch.nn.Module):
    """The indices, the values they address, a sum over them, and the count as a size."""

    def forward(self, x):
        idx = torch.nonzero(x > 0.25)
        vals = x[idx[:, 0], idx[:, 1]]
        flat = idx.reshape(idx.shape[0] * 2)
        return idx, vals * 2 + 1, vals.sum(), flat.float().mean()


class NonzeroFlat(torch.nn.Module):
    def forward(self, x):
        return (torch.nonzero(x.flatten()) + 1,)


class NonzeroChecked(torch.nn.Module):
    def forward(self, x):
        idx = torch.nonzero(x)
        torch._check(idx.shape[0] >= 2)
        return (idx,)


class Dropout(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return (F.dropout(x, self.p, training=True),)


class NativeDropout(torch.nn.Module):
    def forward(self, x):
        out, mask = torch.ops.aten.native_dropout(x, 0.25, True)
        return out, mask


class Diff(torch.nn.Module):
    def forward(self, x):
        return (torch.diff(x), torch.diff(x, n=2, dim=0, prepend=x[:1], append=x[-1:]),
                torch.diff(x > 0, dim=1), torch.diff(x, n=9, dim=0), x.sum())


class Fft(torch.nn.Module):
    def forward(self, x):
        return (torch.fft.rfft(x).abs(),)


class Item(torch.nn.Module):
    def forward(self, x):
        return (x * x.max().item(),)


def inputs_for_nonzero(shape):
    """No, some and only elements above the threshold."""
    g = torch.Generator().manual_seed(7)
    some = torch.rand(*shape, generator=g)
    return [torch.zeros(*shape), some, some + 1.0]


CASES = [
    # label, module, example input, run inputs, refusal / check
    ("nonzero: indices, gathered values, a sum, the count as a size", NonzeroGather(),
     torch.rand(5, 6), inputs_for_nonzero((5, 6)), None),
    ("nonzero of a flattened tensor", NonzeroFlat(), torch.rand(24) - 0.5,
     [torch.zeros(24), torch.rand(24) - 0.5, torch.rand(24) + 1], None),
    ("a run-time check the count's range does not imply", NonzeroChecked(), torch.rand(4, 4),
     [], "asserts u0 >= 2, which u0 in [0, 16] does not imply"),
    ("dropout in training mode", Dropout(0.5), torch.randn(64, 64), [torch.randn(64, 64)],
     "dropout"),
    ("dropout in training mode, p = 1", Dropout(1.0), torch.randn(8, 8), [torch.randn(8, 8)],
     "dropout"),
    ("native_dropout in training mode", NativeDropout(), torch.randn(64, 64),
     [torch.randn(64, 64)], "dropout"),
    ("diff and sum of every element", Diff(), torch.randn(5, 6), [torch.randn(5, 6)], None),
    ("an FFT", Fft(), torch.randn(4, 16), [], "why: complex numbers"),
    ("Tensor.item()", Item(), torch.randn(4, 4), [],
     "why: a number read from tensor data at run time (Tensor.item())"),
]


def check_dropout(p, x, outs):
    """None when outs (output[, mask]) are a dropout of x with probability p."""
    out = outs[0]
    kept = out != 0
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    if not np.allclose(out[kept], (x[kept] * np.float32(scale)), rtol=1e-6, atol=0):
        return "kept elements are not x / (1 - p)"
    share = kept.mean()
    if p == 1.0 and share != 0:
        return "p = 1 kept %.3f of the elements" % share
    if p < 1.0 and abs(share - (1.0 - p)) > 0.05:
        return "kept %.3f of the elements with p = %g" % (share, p)
    if len(outs) > 1:
        mask = outs[1]
        if mask.dtype != np.bool_ or not np.array_equal(mask, kept | ((x == 0) & mask)):
            return "the mask is not where the output kept x"
    return None


def check_overflow(etc, d):
    """NonzeroGather's `idx.shape[0] * 2` made `* 2**62` in the archive: at the count's bound
    the product passes int64."""
    import json
    import zipfile
    path = os.path.join(d, "overflow.pt2")
    torch.export.save(torch.export.export(NonzeroGather(), (torch.rand(5, 6),)), path)
    edited = os.path.join(d, "overflow_edited.pt2")
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(edited, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("models/model.json"):
                program = json.loads(data)
                muls = [n for n in program["graph_module"]["graph"]["nodes"]
                        if n["target"] == "_operator.mul"]
                if len(muls) != 1:
                    return ["overflow: expected one _operator.mul, found %d" % len(muls)]
                for arg in muls[0]["inputs"]:
                    if "as_int" in arg["arg"]:
                        arg["arg"]["as_int"] = 2 ** 62
                data = json.dumps(program).encode()
            zout.writestr(item, data)
    pte = os.path.join(d, "overflow.pte")
    r = subprocess.run([etc, "export", edited, "-o", pte, "--target", "cpu"],
                       capture_output=True, text=True)
    if r.returncode != 1 or "overflows int64" not in r.stderr or os.path.exists(pte):
        return ["overflow: expected exit 1 naming the overflow and no output, got exit %d: %s"
                % (r.returncode, r.stderr.strip())]
    return []


def main():
    etc = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for i, (label, module, example, runs, expect) in enumerate(CASES):
            forms = ["default", "core"] if expect is None or expect == "dropout" else ["default"]
            for form in forms:
                name = "%s [%s]" % (label, form)
                path = os.path.join(d, "m%d%s.pt2" % (i, form))
                ep = torch.export.export(module, (example,))
                if form == "core":
                    ep = ep.run_decompositions()
                torch.export.save(ep, path)
                pte = os.path.join(d, "m%d%s.pte" % (i, form))
                r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                                   capture_output=True, text=True)
                if expect not in (None, "dropout"):
                    if r.returncode != 1 or expect not in r.stderr:
                        failures.append("%s: expected a refusal (%s), got exit %d: %s" %
                                        (name, expect, r.returncode, r.stderr.strip()))
                    if os.path.exists(pte):
                        failures.append("%s: a refused export left %s" % (name, pte))
                    continue
                if r.returncode != 0:
                    failures.append("%s: export: %s" % (name, r.stderr.strip()))
                    continue
                for k, x in enumerate(runs):
                    xin = os.path.join(d, "x%d_%d.npy" % (i, k))
                    np.save(xin, x.numpy())
                    out = os.path.join(d, "out%d%s_%d" % (i, form, k))
                    r = subprocess.run([etc, "run", pte, "--input", "0=" + xin,
                                        "--output-dir", out], capture_output=True, text=True)
                    if r.returncode != 0:
                        failures.append("%s, input %d: run: %s" % (name, k, r.stderr.strip()))
                        continue
                    with torch.no_grad():
                        want = module(x.clone())
                    got = [np.load(os.path.join(out, "output_%d.npy" % j))
                           for j in range(len(want))]
                    if expect == "dropout":
                        p = module.p if hasattr(module, "p") else 0.25
                        why = check_dropout(p, x.numpy(), got)
                        if why:
                            failures.append("%s: %s" % (name, why))
                        continue
                    for j, w in enumerate(want):
                        w = w.numpy()
                        if got[j].shape != w.shape or got[j].dtype != w.dtype:
                            failures.append("%s, input %d: output %d is %s%s, PyTorch gives %s%s"
                                            % (name, k, j, got[j].dtype, list(got[j].shape),
                                               w.dtype, list(w.shape)))
                        elif not np.allclose(got[j], w, rtol=1e-5, atol=1e-6, equal_nan=True):
                            failures.append("%s, input %d: output %d differs from PyTorch eager"
                                            % (name, k, j))
        failures += check_overflow(etc, d)
    for f in failures:
        print("FAIL " + f)
    print("data-dependent sizes and values: %d cases, %s" %
          (len(CASES), "ok" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
