"""Every dtype etc can produce, read back by NumPy itself.

    npy_dtypes_test.py ETC

A program returns its float32 input converted to each dtype etc has (torch.export, then
`etc export --target cpu` and `etc run --output-dir`); NumPy loads every output_<i>.npy and
it must hold what PyTorch computes: the same dtype (bfloat16, which NumPy lacks, as float32:
every bfloat16 value exactly) and the same values. Then a bfloat16 input fed a float32 .npy:
etc rounds it to nearest even, as PyTorch does, and says so once on stderr.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.float32, torch.float64, torch.bool, torch.bfloat16]
failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else ": " + detail))
    failures += 0 if ok else 1


class Casts(torch.nn.Module):
    def forward(self, x):
        return tuple(x.to(d) for d in DTYPES)


class Bf16Identity(torch.nn.Module):
    def forward(self, x):
        return x * 1


def export(module, args, path):
    torch.export.save(torch.export.export(module, args), path)


def main():
    etc = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        # Values every dtype can hold after the cast, with ties for the rounding of the
        # narrow floats (1 + 2^-8 is halfway between two bfloat16 values).
        x = torch.tensor([[0.0, 1.0, -1.0, 2.5], [100.0, 1.0 + 2.0 ** -8, 3.0, 7.0]])
        export(Casts(), (x,), os.path.join(tmp, "casts.pt2"))
        np.save(os.path.join(tmp, "x.npy"), x.numpy())
        subprocess.run([etc, "export", os.path.join(tmp, "casts.pt2"), "-o",
                        os.path.join(tmp, "casts.pte"), "--target", "cpu"], check=True,
                       capture_output=True)
        out = os.path.join(tmp, "out")
        subprocess.run([etc, "run", os.path.join(tmp, "casts.pte"), "--device", "cpu", "--input",
                        "0=" + os.path.join(tmp, "x.npy"), "--output-dir", out], check=True,
                       capture_output=True)
        for i, d in enumerate(DTYPES):
            want = x.to(d)
            want_np = want.float().numpy() if d == torch.bfloat16 else want.numpy()
            try:
                got = np.load(os.path.join(out, "output_%d.npy" % i))
            except Exception as e:  # NumPy refusing the file is the failure this test is for
                check(False, "%s output reads back with NumPy" % d, repr(e))
                continue
            check(got.dtype == want_np.dtype and got.shape == want_np.shape and
                  np.array_equal(got, want_np),
                  "%s output reads back with NumPy, %s, the values PyTorch computes" %
                  (d, want_np.dtype), "got %s %s, want %s" % (got.dtype, got.tolist(),
                                                             want_np.tolist()))

        # A bfloat16 input from a float32 .npy.
        xb = x.to(torch.bfloat16)
        export(Bf16Identity(), (xb,), os.path.join(tmp, "bf16.pt2"))
        subprocess.run([etc, "export", os.path.join(tmp, "bf16.pt2"), "-o",
                        os.path.join(tmp, "bf16.pte"), "--target", "cpu"], check=True,
                       capture_output=True)
        r = subprocess.run([etc, "run", os.path.join(tmp, "bf16.pte"), "--device", "cpu",
                            "--input", "0=" + os.path.join(tmp, "x.npy"), "--output-dir",
                            os.path.join(tmp, "bf")], capture_output=True, text=True)
        check(r.returncode == 0, "a float32 .npy feeds a bfloat16 input", r.stderr.strip())
        if r.returncode == 0:
            check(r.stderr.count("rounded to bfloat16") == 1,
                  "the rounding is said once on stderr", r.stderr.strip())
            got = np.load(os.path.join(tmp, "bf", "output_0.npy"))
            check(np.array_equal(got, xb.float().numpy()),
                  "rounded to nearest even, as PyTorch rounds",
                  "got %s, want %s" % (got.tolist(), xb.float().tolist()))
    if failures:
        print("%d failure(s)" % failures)
        sys.exit(1)


if __name__ == "__main__":
    main()
