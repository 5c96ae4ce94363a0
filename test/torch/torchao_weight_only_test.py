"""torchao's weight-only int8 and intx import, keep their weights int8, run as PyTorch does.

    torchao_weight_only_test.py ETC [LIBETC_EXECUTORCH_AUTOREGISTER]

A Linear and a small decoder-style block (RMS norm, q/k/v/o projections, causal attention,
a SiLU-gated MLP) are quantized with torchao's quantize_ and each config below, and
exported in both forms (torch.export.export, and .run_decompositions()):
Int8WeightOnlyConfig() (an Int8Tensor: int8 and a scale per row),
IntxWeightOnlyConfig(int4, PerGroup(32)) and IntxWeightOnlyConfig(int8, PerAxis(0)) (an
IntxUnpackedToInt8Tensor: int8 values, a scale and zero point per group, dequantized by
torchao.dequantize_affine), and Int8DynamicActivationIntxWeightConfig(int4, PerGroup(32))
(ExecuTorch's 8da4w: the same weights, each activation row quantized to int8 at run time by
torchao.choose_qparams_affine and quantize_affine), and Int8DynamicActivationInt8WeightConfig
(an Int8Tensor whose program quantizes each activation row to int8 at run time and multiplies
the integers with aten._int_mm; also per tensor and asymmetric). Under the last, a value one
ulp away before an activation's quantization can round to the neighbouring int8 step: eager's
own block output moves by up to 2.7e-3 of its largest value when its input moves by an ulp,
so the block's bound there is 5e-3, about twice that (etc measured 1.2e-3; the Linear, whose
input is the test's, is bit for bit; ExecuTorch's portable div.Scalar_out multiplies by the
divisor's float reciprocal, which puts the activations' scales an ulp off ATen's: its runtime
takes the same 5e-3, measured 1.8e-3). For each:
- `etc export --target cpu` and `--target cuda:0` succeed;
- the .pte is at most 0.55x (int8) or 0.22x (int4, stored two values a byte by the
  pack-int4-weights pass, group 32: a float32 scale and zero point per 32 values; 0.24x for
  8da4w, whose program also quantizes activations) the .pte etc writes for the same model
  unquantized (float32): the weights stay packed and are widened at run time;
- `etc run --device cpu` matches PyTorch eager of the quantized model (max abs error at most
  1e-4 of the output's largest magnitude; the Linear under Int8DynamicActivationInt8WeightConfig
  bit for bit: its integer product is exact), and so does ExecuTorch's runtime running the
  same .pte: with the wheel's kernels and, for the one op they lack (etc::unpack_int4.out),
  etc's kernel library loaded into the process (LIBETC_EXECUTORCH_AUTOREGISTER, which
  registers only what is missing); and the program exported without packing
  (--passes without pack-int4-weights) on the wheel's kernels alone (not for
  Int8DynamicActivationInt8WeightConfig, whose aten::_int_mm.out the wheel's kernels lack).
- the `--target cuda:0` program runs the linear layers of the weight-only configs as one
  etc::weight_only_linear each (fuse-weight-only; 8da4w keeps its steps), and run with `--device cpu` (its delegate on the CPU kernels, the reference the GPU
  is checked against) matches PyTorch eager as the CPU program does;
- A bf16 model (the form language models ship in) quantized with int8 per channel and int4
  in groups of 128: the .pte at most 0.55x and 0.30x the bf16 model's, matching eager in
  bf16 within bf16's rounding (2e-2 of the largest output).
The dequantized weight itself (weight.dequantize()) equals torchao's bit for bit.
A model quantized with a torchao config etc does not import (Float8WeightOnlyConfig) is
refused, the error naming what it found.
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from executorch.runtime import Runtime
from torchao.quantization import (Float8WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig,
                                  Int8DynamicActivationIntxWeightConfig, Int8WeightOnlyConfig,
                                  IntxWeightOnlyConfig, quantize_)
from torchao.quantization.granularity import PerAxis, PerGroup, PerTensor
from torchao.quantization.quant_primitives import MappingType

failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok: " if ok else "FAIL: ") + what + ("" if ok else ": " + detail))
    failures += 0 if ok else 1


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 128)

    def forward(self, x):
        return self.fc(x)


class Block(nn.Module):
    """One pre-norm decoder layer (no KV cache): attention and a gated MLP, no biases."""

    def __init__(self, d=128, heads=4, ff=256):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.RMSNorm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.norm2 = nn.RMSNorm(d)
        self.gate = nn.Linear(d, ff, bias=False)
        self.up = nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (p(h).view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Dequantized(nn.Module):
    """The quantized weight itself, dequantized (plus a zero input): element by element."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 128)

    def forward(self, x):
        return self.fc.weight.dequantize() + x


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


CONFIGS = [("int8", Int8WeightOnlyConfig, 0.55),
           ("int4g32", lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4,
                                                    granularity=PerGroup(32)), 0.22),
           ("intx8", lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8,
                                                  granularity=PerAxis(0)), 0.55),
           # ExecuTorch's 8da4w: int4 weights in groups of 32 and each activation row
           # quantized to int8 at run time (choose_qparams_affine, quantize_affine).
           ("8da4w", lambda: Int8DynamicActivationIntxWeightConfig(
               weight_dtype=torch.int4, weight_granularity=PerGroup(32)), 0.24),
           # int8 weights and each activation row quantized to int8 at run time, the
           # integers multiplied by aten._int_mm (uint8 by int8, int32 sums).
           ("w8a8", Int8DynamicActivationInt8WeightConfig, 0.55),
           ("w8a8pt", lambda: Int8DynamicActivationInt8WeightConfig(
               granularity=PerTensor(), act_mapping_type=MappingType.ASYMMETRIC), 0.55)]

# The default pipeline without the pass that packs 4-bit weights two a byte: a program the
# wheel's kernels run alone.
UNPACKED = ("dce,remove-noops,fold-constants,fold-batch-norm,dce,partition,decompose-host-ops,"
            "fold-constants,dce,propagate-devices,plan-memory")


def execute(pte, args):
    return Runtime.get().load_program(pte).load_method("forward").execute(list(args))[0]


# The configs whose linear layers the export runs in a CUDA delegate as one
# etc::weight_only_linear (passes/fuse_weight_only.h; Int8WeightOnlyConfig's scale still
# multiplies the result after). 8da4w quantizes the activations too: its program keeps its
# steps.
FUSED_ON_CUDA = ("int8", "int4g32", "intx8", "int8pc", "int4g128")


def check_cuda_program(etc, pte, model, qname, args, want, tol, tag, out, inputs):
    """The --target cuda:0 program: its linear layers fused where FUSED_ON_CUDA says, and run
    with --device cpu (the delegate on the CPU kernels: the reference the GPU is checked
    against) it matches PyTorch eager."""
    linears = sum(isinstance(m, nn.Linear) for m in model.modules())
    r = run([etc, "inspect", pte])
    fused = sum(int(n) for n in re.findall(r"etc::weight_only_linear\.default x(\d+)", r.stdout))
    expected = linears if qname in FUSED_ON_CUDA else 0
    check(fused == expected, tag + ": --target cuda:0 runs %d of %d linear layers as "
          "etc::weight_only_linear (expected %d)" % (fused, linears, expected), r.stdout)
    r = run([etc, "run", pte, "--device", "cpu", "--output-dir", out] +
            sum((["--input", "%d=%s" % (i, f)] for i, f in enumerate(inputs)), []))
    check(r.returncode == 0, tag + ": etc run of the cuda:0 program --device cpu", r.stderr)
    if r.returncode == 0:
        got = np.load(os.path.join(out, "output_0.npy")).astype(np.float32)
        err = float(np.abs(got - want).max()) / float(np.abs(want).max())
        check(got.shape == want.shape and err <= tol,
              tag + ": the cuda:0 program matches PyTorch eager (max error %.2e of the largest "
              "output)" % err)


def main():
    etc = sys.argv[1]
    Runtime.get()  # the wheel's runtime and kernels first: etc's library fills only gaps
    if len(sys.argv) > 2 and sys.argv[2]:
        ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
    else:
        print("note: etc's ExecuTorch kernel library was not built (a build without the "
              "ExecuTorch wheel or position-independent code): packed programs are not run "
              "by ExecuTorch's runtime here")
    with tempfile.TemporaryDirectory() as tmp:
        p = lambda name: os.path.join(tmp, name)  # noqa: E731
        for (model_name, make, shape), (qname, config, limit) in (
                (m, c) for m in (("linear", Linear, (4, 256)), ("block", Block, (2, 8, 128)))
                for c in CONFIGS):
            torch.manual_seed(0)
            model = make().eval()
            args = (torch.randn(*shape),)
            name = model_name + "_" + qname
            torch.export.save(torch.export.export(model, args), p(name + ".f32.pt2"))
            r = run([etc, "export", p(name + ".f32.pt2"), "-o", p(name + ".f32.pte"),
                     "--target", "cpu"])
            check(r.returncode == 0, "%s float32: etc export" % name, r.stderr)
            float_size = os.path.getsize(p(name + ".f32.pte"))
            quantize_(model, config())
            with torch.no_grad():
                want = model(*args).numpy()
            for i, a in enumerate(args):
                np.save(p("%s.input_%d.npy" % (name, i)), a.numpy())
            ep = torch.export.export(model, args)
            # Activations quantized at run time: rounding to int8 steps amplifies an ulp.
            run_time_quantized = qname.startswith("w8a8")
            tol = 5e-3 if run_time_quantized and model_name == "block" else 1e-4
            et_tol = 5e-3 if run_time_quantized else 1e-4
            for form, prog in (("export", ep), ("decomposed", ep.run_decompositions())):
                tag = "%s %s (%s)" % (model_name, qname, form)
                pt2 = p("%s.%s.pt2" % (name, form))
                torch.export.save(prog, pt2)
                pte = p("%s.%s.pte" % (name, form))
                r = run([etc, "export", pt2, "-o", pte, "--target", "cpu"])
                check(r.returncode == 0, tag + ": etc export --target cpu", r.stderr)
                if r.returncode != 0:
                    continue
                r = run([etc, "export", pt2, "-o", p("cuda.pte"), "--target", "cuda:0"])
                check(r.returncode == 0, tag + ": etc export --target cuda:0", r.stderr)
                if r.returncode == 0:
                    check_cuda_program(etc, p("cuda.pte"), model, qname, args, want, tol, tag,
                                       p("cuda_out"), [p("%s.input_%d.npy" % (name, i))
                                                       for i in range(len(args))])
                ratio = os.path.getsize(pte) / float_size
                check(ratio <= limit, tag + ": .pte is %.3fx the float32 one (%d / %d bytes)" %
                      (ratio, os.path.getsize(pte), float_size))
                out = p("out_%s_%s" % (name, form))
                r = run([etc, "run", pte, "--device", "cpu", "--output-dir", out] +
                        sum((["--input", "%d=%s" % (i, p("%s.input_%d.npy" % (name, i)))]
                             for i in range(len(args))), []))
                check(r.returncode == 0, tag + ": etc run --device cpu", r.stderr)
                if r.returncode != 0:
                    continue
                got = np.load(os.path.join(out, "output_0.npy"))
                err = float(np.abs(got - want).max()) / float(np.abs(want).max())
                check(got.shape == want.shape and err <= tol,
                      tag + ": matches PyTorch eager of the quantized model (max error %.2e of "
                      "the largest output)" % err, "shape %s vs %s" % (got.shape, want.shape))
                if model_name == "linear" and qname.startswith("w8a8"):
                    check(np.array_equal(got, want), tag + ": equals eager bit for bit (the "
                          "integer product is exact)", "max difference %g" %
                          np.abs(got - want).max())
                # ExecuTorch's own runtime runs the same program (packed weights: with etc's
                # unpack_int4.out), and the unpacked form on the wheel's kernels alone.
                if len(sys.argv) > 2 and sys.argv[2]:
                    et = execute(pte, args).numpy()
                    err = float(np.abs(et - want).max()) / float(np.abs(want).max())
                    check(err <= et_tol, tag + ": ExecuTorch's runtime runs it and matches too "
                          "(max error %.2e)" % err)
                if qname.startswith("w8a8"):
                    continue  # nothing packed, and the wheel has no aten::_int_mm.out
                plain = p("%s.%s.unpacked.pte" % (name, form))
                r = run([etc, "export", pt2, "-o", plain, "--target", "cpu", "--passes", UNPACKED])
                check(r.returncode == 0, tag + ": etc export without packing", r.stderr)
                if r.returncode == 0:
                    et = execute(plain, args).numpy()
                    err = float(np.abs(et - want).max()) / float(np.abs(want).max())
                    check(err <= 1e-4, tag + ": ExecuTorch's kernels alone run the unpacked form "
                          "and match (max error %.2e)" % err)

        # bf16 models, the form language models ship in: int8 per channel and int4 in groups
        # of 128 against the bf16 program's size, and eager in bf16.
        for qname, config, limit in (
                ("int8pc", lambda: IntxWeightOnlyConfig(weight_dtype=torch.int8,
                                                      granularity=PerAxis(0)), 0.55),
                ("int4g128", lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4,
                                                          granularity=PerGroup(128)), 0.30)):
            torch.manual_seed(0)
            model = Block(d=256, ff=512).eval().to(torch.bfloat16)
            x = torch.randn(2, 8, 256, dtype=torch.bfloat16)
            name = "block_bf16_" + qname
            torch.export.save(torch.export.export(model, (x,)), p(name + ".bf16.pt2"))
            r = run([etc, "export", p(name + ".bf16.pt2"), "-o", p(name + ".bf16.pte"),
                     "--target", "cpu"])
            check(r.returncode == 0, name + ": etc export of the bf16 model", r.stderr)
            quantize_(model, config())
            with torch.no_grad():
                want = model(x).float().numpy()
            pt2 = p(name + ".pt2")
            torch.export.save(torch.export.export(model, (x,)), pt2)
            pte = p(name + ".pte")
            r = run([etc, "export", pt2, "-o", pte, "--target", "cpu"])
            check(r.returncode == 0, name + ": etc export", r.stderr)
            if r.returncode != 0 or not os.path.exists(p(name + ".bf16.pte")):
                continue
            ratio = os.path.getsize(pte) / os.path.getsize(p(name + ".bf16.pte"))
            check(ratio <= limit, name + ": .pte is %.3fx the bf16 one (at most %.2fx)" %
                  (ratio, limit))
            np.save(p(name + ".x.npy"), x.float().numpy())
            out = p(name + ".out")
            r = run([etc, "run", pte, "--device", "cpu", "--output-dir", out,
                     "--input", "0=" + p(name + ".x.npy")])
            check(r.returncode == 0, name + ": etc run --device cpu", r.stderr)
            if r.returncode == 0:
                got = np.load(os.path.join(out, "output_0.npy")).astype(np.float32)
                err = float(np.abs(got - want).max()) / float(np.abs(want).max())
                check(got.shape == want.shape and err <= 2e-2,
                      name + ": matches PyTorch eager in bf16 (max error %.2e of the largest "
                      "output)" % err)
            r = run([etc, "export", pt2, "-o", p(name + ".cuda.pte"), "--target", "cuda:0"])
            check(r.returncode == 0, name + ": etc export --target cuda:0", r.stderr)
            if r.returncode == 0:
                check_cuda_program(etc, p(name + ".cuda.pte"), model, qname, (x,), want, 2e-2,
                                   name, p(name + ".cuda_out"), [p(name + ".x.npy")])

        # Quantized embeddings (ExecuTorch's llama recipe quantizes the token embedding too):
        # the program dequantizes the whole table and then looks up rows; etc's export looks
        # up the quantized rows first (gather-rows-first), so the planned memory holds the
        # rows read, not the dequantized table (1000 x 256 float32: 1 MB).
        class Embed(nn.Module):
            def __init__(self):
                super().__init__()
                self.e = nn.Embedding(1000, 256)
                self.fc = nn.Linear(256, 64, bias=False)

            def forward(self, t):
                return self.fc(self.e(t))

        for qname, config in (("int4g32", lambda: IntxWeightOnlyConfig(
                weight_dtype=torch.int4, granularity=PerGroup(32))),
                              ("int8", lambda: IntxWeightOnlyConfig(
                                  weight_dtype=torch.int8, granularity=PerAxis(0)))):
            torch.manual_seed(0)
            model = Embed().eval()
            quantize_(model, config(),
                      filter_fn=lambda m, fqn: isinstance(m, (nn.Linear, nn.Embedding)))
            t = torch.tensor([[3, 999, 0, 17, 3]])
            with torch.no_grad():
                want = model(t).numpy()
            pt2, pte = p("embed_%s.pt2" % qname), p("embed_%s.pte" % qname)
            torch.export.save(torch.export.export(model, (t,)), pt2)
            np.save(p("tokens.npy"), t.numpy())
            for target in ("cpu", "cuda:0"):
                r = run([etc, "export", pt2, "-o", pte, "--target", target])
                planned = [int(line.split()[3]) for line in r.stderr.splitlines()
                           if line.startswith("buffer ") and "bytes planned" in line]
                check(r.returncode == 0 and planned and max(planned) < 1000 * 256 * 4,
                      "embedding %s (%s): the table is not dequantized whole (planned %s "
                      "bytes)" % (qname, target, planned), r.stderr)
            r = run([etc, "export", pt2, "-o", pte, "--target", "cpu"])
            r = r if r.returncode else run([etc, "run", pte, "--device", "cpu", "--input",
                                            "0=" + p("tokens.npy"), "--output-dir",
                                            p("embed_out")])
            got = np.load(os.path.join(p("embed_out"), "output_0.npy")) if r.returncode == 0 \
                else None
            err = float(np.abs(got - want).max() / np.abs(want).max()) if got is not None else 1
            check(got is not None and err <= 1e-6,
                  "embedding %s: matches PyTorch eager (max error %.1e)" % (qname, err), r.stderr)
            if len(sys.argv) > 2 and sys.argv[2]:
                et = execute(pte, (t,)).numpy()
                err = float(np.abs(et - want).max() / np.abs(want).max())
                check(err <= 1e-6, "embedding %s: ExecuTorch's runtime runs it and matches too "
                      "(max error %.1e)" % (qname, err))

        # Dequantization element by element: etc's values are torchao's, bit for bit.
        for qname, config, _ in CONFIGS:
            torch.manual_seed(0)
            model = Dequantized().eval()
            quantize_(model, config())
            x = torch.zeros(1, 256)
            with torch.no_grad():
                want = model(x).numpy()
            torch.export.save(torch.export.export(model, (x,)), p("deq.pt2"))
            np.save(p("zeros.npy"), x.numpy())
            r = run([etc, "export", p("deq.pt2"), "-o", p("deq.pte"), "--target", "cpu"])
            r = r if r.returncode else run([etc, "run", p("deq.pte"), "--device", "cpu",
                                            "--input", "0=" + p("zeros.npy"),
                                            "--output-dir", p("deq_out")])
            got = np.load(os.path.join(p("deq_out"), "output_0.npy")) if r.returncode == 0 \
                else None
            check(got is not None and np.array_equal(got, want),
                  "%s: the dequantized weight equals torchao's bit for bit" % qname,
                  r.stderr if got is None else "max difference %g" % np.abs(got - want).max())

        # Configs etc does not import: refused, the error naming what was found.
        for cfg, expect in ((Float8WeightOnlyConfig(), "torchao.quantization.Float8Tensor"),):
            model = Linear().eval()
            quantize_(model, cfg)
            pt2 = p("unsupported.pt2")
            torch.export.save(torch.export.export(model, (torch.randn(4, 256),)), pt2)
            r = run([etc, "export", pt2, "-o", p("unsupported.pte"), "--target", "cpu"])
            check(r.returncode != 0 and expect in r.stderr and "'fc.weight'" in r.stderr and
                  not os.path.exists(p("unsupported.pte")),
                  "%s: refused, naming %s" % (type(cfg).__name__, expect), r.stderr)
    print("torchao_weight_only_test: %d failure(s)" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
