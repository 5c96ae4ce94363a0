#!/usr/bin/env python3
"""In-place writes through views, as the default torch.export program keeps them
(`y[:, 1:3] = v`, `y[0].mul_(2)`, `y.t()[1].add_(1)`, a slice of a view zeroed, narrow,
movedim): etc carries each write through to the tensors viewed (torch_node.cpp,
TorchNode::write) and must match PyTorch eager. What it cannot carry is refused by name,
never computed from old values: a view read (by a node, as an output or through an in-place
op's result) after a later write to its base, and writes into views etc does not invert
(diagonal, split). Copies that look like views (contiguous / reshape of a transposed
tensor) stay copies. out= forms and resize_ write their argument, and refuse to write a program
input that is read again; resize_ refuses to grow a tensor (its new elements would be
uninitialised). Batch norm in training mode normalises by the batch's statistics.

  view_writes_test.py ETC      (run with the reference environment's python)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


class Writes(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        y[:, 1:3] = 0.5
        y[0].mul_(2)
        y.t()[1].add_(1)
        y.view(-1)[2:5].zero_()
        y.narrow(1, 4, 2).mul_(3)
        y.movedim(0, 1)[5].sub_(1)
        m = torch.zeros(4, 6)
        m[1, 2:4] = x[0, :2]
        m.unsqueeze(0)[0, 3].fill_(7)
        return y, m


class Copies(torch.nn.Module):
    def forward(self, x):
        x2 = x * 2
        y = x2.t().contiguous()
        y.add_(1)
        z = x2.t().reshape(-1)
        z.mul_(0)
        return x2, y, z


class StaleRead(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        row = y[0]
        y.add_(1)
        return row * 2  # PyTorch reads the added values through the view


class StaleOutput(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        row = y[0]
        y.add_(1)
        return row


class StaleInPlaceResult(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        r = y[0].relu_()
        y.mul_(2)
        return r + 0


class DiagonalWrite(torch.nn.Module):
    def forward(self, x):
        m = x.clone()
        m.diagonal().fill_(0)
        return m


class SplitWrite(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        a, b = y.split(2)
        a.zero_()
        return y


class OutArgument(torch.nn.Module):
    """out= writes (atan2.out, add.out into a wider dtype), read afterwards."""

    def forward(self, x):
        buf = torch.empty(4, 6)
        torch.atan2(x, x * 2, out=buf)
        wide = torch.zeros(4, 6, dtype=torch.float64)
        torch.add(x, buf, out=wide)
        return buf * 2, wide


class OutInput(torch.nn.Module):
    """out= into the program's input, which a later node reads: etc cannot update an input."""

    def forward(self, x):
        torch.atan2(x, x * 2, out=x)
        return x + 1


class Resize(torch.nn.Module):
    """resize_ to fewer elements: the first ones, row-major, in the new shape."""

    def forward(self, x):
        y = x * 2
        y.resize_(3, 5)
        return (y + 1,)


class ResizeGrows(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.resize_(5, 6)
        return y


class BatchNormTraining(torch.nn.Module):
    """Batch norm in training mode: the batch's statistics; the running ones are updated in
    place (dropped: nothing reads them) or, in the Core ATen form, written to the buffers."""

    def __init__(self, core):
        super().__init__()
        self.core = core
        self.norm = torch.nn.BatchNorm1d(6)
        self.train()

    def forward(self, x):
        return (self.norm(x * 2) + 1,)


CASES = [
    ("writes through views", Writes(), None),
    ("copies that look like views", Copies(), None),
    ("a view read after a write to its base", StaleRead(), "made before an in-place write to it"),
    ("a stale view as the output", StaleOutput(), "made before an in-place write to it"),
    ("an in-place result on a view read after a write to the base", StaleInPlaceResult(),
     "made before an in-place write to it"),
    ("a write into a diagonal", DiagonalWrite(), "a aten.diagonal.default view"),
    ("a write into a split", SplitWrite(), "a aten.split.Tensor view"),
    ("out= arguments", OutArgument(), None),
    ("out= into an input read again", OutInput(), "out is a program input that is read again"),
    ("resize_ to fewer elements", Resize(), None),
    ("resize_ to more elements", ResizeGrows(), "resize_ grows self from 24 to 30 elements"),
    ("batch norm in training mode", BatchNormTraining(False), None),
    ("batch norm in training mode, Core ATen", BatchNormTraining(True), None),
]


def main():
    etc = sys.argv[1]
    failures = []
    x = torch.randn(4, 6)
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), x.numpy())
        for i, (label, module, refusal) in enumerate(CASES):
            path = os.path.join(d, "m%d.pt2" % i)
            ep = torch.export.export(module, (x.clone(),))
            if getattr(module, "core", False):
                ep = ep.run_decompositions()
            torch.export.save(ep, path)
            pte = os.path.join(d, "m%d.pte" % i)
            r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                               capture_output=True, text=True)
            if refusal is not None:
                if r.returncode != 1 or refusal not in r.stderr:
                    failures.append("%s: exit %d, %s" % (label, r.returncode, r.stderr.strip()))
                continue
            if r.returncode != 0:
                failures.append("%s: export: %s" % (label, r.stderr.strip()))
                continue
            out = os.path.join(d, "out%d" % i)
            r = subprocess.run([etc, "run", pte, "--input", "0=" + os.path.join(d, "x.npy"),
                                "--output-dir", out], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append("%s: run: %s" % (label, r.stderr.strip()))
                continue
            with torch.no_grad():
                want = module(x.clone())
            for k, w in enumerate(want):
                got = np.load(os.path.join(out, "output_%d.npy" % k))
                if not np.allclose(got, w.numpy(), rtol=1e-5, atol=1e-5):
                    failures.append("%s: output %d differs from PyTorch eager" % (label, k))
    for f in failures:
        print("FAIL " + f)
    print("view writes: %d cases, %s" % (len(CASES), "ok" if not failures else
                                         "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
