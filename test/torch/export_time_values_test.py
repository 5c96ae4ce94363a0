#!/usr/bin/env python3
"""Values known at export time, evaluated by the one constant evaluator (the CPU kernels).

Programs build tensors from nothing but sizes and numbers: a causal mask from arange and a
comparison, a rotary-style table from cos/sin of positions, an additive bias from where,
int64 offsets past 2^53, a boolean SDPA mask. etc's importer evaluates each op over such
known values with the runtime's CPU kernel while importing (consteval/evaluate.h), so
- every output equals PyTorch eager's (both export forms: the default and
  run_decompositions());
- none of the ops that only build those values is left in the program (its operator list
  holds no arange, comparison, cos/sin or where; only the ops over the input);
- int64 arithmetic on known values is exact past 2^53 (2^60 * k + 1), as a kernel computes
  it and a double would not;
- a known integer division by zero is an error at export that says where and what, exit 1,
  no output file.

  export_time_values_test.py ETC      (run with the reference environment's python)
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F


class CausalScores(torch.nn.Module):
    """Attention scores with a causal mask and positions built from arange."""

    def forward(self, x):
        n = x.shape[1]
        i = torch.arange(n)
        allowed = i[:, None] >= i[None, :]
        bias = torch.where(allowed, 0.0, float("-inf"))
        pos = torch.arange(n, dtype=torch.float32) * 0.37
        table = torch.cat([torch.cos(pos), torch.sin(pos)]).reshape(2, n).t()
        scores = x @ x.transpose(-1, -2) + bias
        return scores.softmax(-1), x[..., :2] * table


class BigOffsets(torch.nn.Module):
    """int64 values past 2^53: exact in a kernel, not in a double."""

    def forward(self, x):
        offsets = torch.arange(4) * (2 ** 60) + 1
        return (x + offsets,)


class BoolMaskSdpa(torch.nn.Module):
    """SDPA with a known boolean mask (a row of it all False): the importer reads the mask's
    values to decide whether a fully masked row needs the safe-softmax guard."""

    def forward(self, q):
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        mask[0] = False
        return (F.scaled_dot_product_attention(q, q, q, attn_mask=mask),)


class KnownDivByZero(torch.nn.Module):
    def forward(self, x):
        d = torch.arange(3) - 1  # [-1, 0, 1]
        return (x + torch.div(torch.arange(3), d, rounding_mode="floor"),)


# The operators a program may hold (what the input flows through); anything else is a value
# the importer should have evaluated.
CASES = [
    ("causal mask and a rotary-style table", CausalScores(), torch.randn(2, 5, 4),
     {"bmm", "mm", "add", "_softmax", "mul", "slice_copy", "expand_copy", "view_copy",
      "permute_copy", "clone", "transpose_copy", "_to_copy", "select_copy"}),
    ("int64 offsets past 2^53", BigOffsets(), torch.arange(4) * 3, {"add"}),
    ("SDPA with a known boolean mask", BoolMaskSdpa(), torch.randn(1, 2, 4, 8),
     {"bmm", "mm", "add", "mul", "_softmax", "view_copy", "expand_copy", "permute_copy",
      "clone", "transpose_copy", "eq", "logical_not", "any", "where", "_to_copy"}),
]


def operators(etc, pte):
    r = subprocess.run([etc, "inspect", pte, "--format", "json"], capture_output=True,
                       text=True, check=True)
    names = json.loads(r.stdout)["plans"][0]["operators"]
    return {n.split("::")[1].split(".")[0] for n in names}


def main():
    etc = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for i, (label, module, example, allowed) in enumerate(CASES):
            for form in ["default", "core"]:
                name = "%s [%s]" % (label, form)
                ep = torch.export.export(module, (example,))
                if form == "core":
                    ep = ep.run_decompositions()
                path = os.path.join(d, "m%d%s.pt2" % (i, form))
                torch.export.save(ep, path)
                pte = os.path.join(d, "m%d%s.pte" % (i, form))
                r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append("%s: export: %s" % (name, r.stderr.strip()))
                    continue
                left = operators(etc, pte) - allowed
                if left:
                    failures.append("%s: ops that only build known values are left in the "
                                    "program: %s" % (name, sorted(left)))
                xin = os.path.join(d, "x%d.npy" % i)
                np.save(xin, example.numpy())
                out = os.path.join(d, "out%d%s" % (i, form))
                r = subprocess.run([etc, "run", pte, "--input", "0=" + xin, "--output-dir", out],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    failures.append("%s: run: %s" % (name, r.stderr.strip()))
                    continue
                with torch.no_grad():
                    want = module(example.clone())
                for j, w in enumerate(want):
                    got = np.load(os.path.join(out, "output_%d.npy" % j))
                    w = w.numpy()
                    if w.dtype.kind in "iub":
                        ok = got.dtype == w.dtype and np.array_equal(got, w)
                    else:
                        ok = got.shape == w.shape and np.allclose(got, w, rtol=1e-5, atol=1e-6)
                    if not ok:
                        failures.append("%s: output %d differs from eager:\n%s\nvs\n%s" %
                                        (name, j, got, w))
                print("ok: %s" % name, flush=True)

        path = os.path.join(d, "div0.pt2")
        torch.export.save(torch.export.export(KnownDivByZero(), (torch.arange(3),)), path)
        pte = os.path.join(d, "div0.pte")
        r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                           capture_output=True, text=True)
        if (r.returncode != 1 or "integer division by zero" not in r.stderr
                or "at export time" not in r.stderr or os.path.exists(pte)):
            failures.append("a known integer division by zero: expected exit 1 naming it and no "
                            "output, got exit %d: %s" % (r.returncode, r.stderr.strip()))
        else:
            print("ok: a known integer division by zero is refused at export: %s"
                  % r.stderr.strip().splitlines()[0], flush=True)

    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
