#!/usr/bin/env python3
"""In-place writes through views, as the default torch.export program keeps them
(`y[:, 1:3] = v`, `y[0].mul_(2)`, `y.t()[1].add_(1)`, a slice of a view zeroed): etc carries
each write through to the tensors viewed (torch_node.cpp, TorchNode::write) and must match
PyTorch eager; a view read after a later write to its base -- which PyTorch reads through
the view, new values and all -- is refused by name, never computed from old values.

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
        m = torch.zeros(4, 6)
        m[1, 2:4] = x[0, :2]
        m.unsqueeze(0)[0, 3].fill_(7)
        return y, m


class StaleRead(torch.nn.Module):
    def forward(self, x):
        y = x.clone()
        row = y[0]
        y.add_(1)
        return row * 2  # PyTorch reads the added values through the view


def export(module, x, path):
    ep = torch.export.export(module, (x,))
    torch.export.save(ep, path)


def main():
    etc = sys.argv[1]
    failures = []
    x = torch.randn(4, 6)
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), x.numpy())
        export(Writes(), x, os.path.join(d, "writes.pt2"))
        want = Writes()(x)
        r = subprocess.run([etc, "export", os.path.join(d, "writes.pt2"), "-o",
                            os.path.join(d, "w.pte"), "--target", "cpu"], capture_output=True,
                           text=True)
        if r.returncode != 0:
            failures.append("export of the writes: " + r.stderr)
        else:
            r = subprocess.run([etc, "run", os.path.join(d, "w.pte"), "--input",
                                "0=" + os.path.join(d, "x.npy"), "--output-dir", d],
                               capture_output=True, text=True)
            if r.returncode != 0:
                failures.append("run of the writes: " + r.stderr)
            for i, w in enumerate(want):
                got = np.load(os.path.join(d, "output_%d.npy" % i)) if r.returncode == 0 else None
                if got is None or not np.allclose(got, w.numpy(), rtol=1e-6, atol=1e-6):
                    failures.append("output %d differs from PyTorch eager" % i)
        export(StaleRead(), x, os.path.join(d, "stale.pt2"))
        r = subprocess.run([etc, "validate", os.path.join(d, "stale.pt2")], capture_output=True,
                           text=True)
        if r.returncode != 1 or "made before an in-place write to it" not in r.stderr:
            failures.append("the stale view read: exit %d, %s" % (r.returncode, r.stderr.strip()))
    for f in failures:
        print("FAIL " + f)
    print("view writes: %s" % ("ok" if not failures else "%d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
