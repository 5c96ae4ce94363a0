#!/usr/bin/env python3
"""PT2E-quantized programs (the quantization flow ExecuTorch documents for its CPU backends):
prepare_pt2e / convert_pt2e with ExecuTorch's XNNPACKQuantizer, then torch.export. The
program holds quantized_decomposed.quantize_per_tensor / dequantize_per_tensor around each
quantized op and dequantize_per_channel (or, with fold_quantize=False, quantize_per_channel)
on int8 weights. etc imports each as PyTorch's reference arithmetic, in both export forms
(the default one and run_decompositions(), which keeps these ops), so

- every output matches the converted model run in eager: the same quantization grid, an
  element at most one output quantum away where a float sum rounds differently before a
  quantize (and at most 1% of the elements differ at all); a float output within 1e-5 of
  its largest element;
- dynamic quantization (is_dynamic=True: choose_qparams.tensor picks each call's activation
  scale and zero point, the .tensor overloads use them) matches on inputs of very different
  ranges;
- torchao's affine primitives called directly (choose_qparams_affine ASYMMETRIC and
  SYMMETRIC, per row, per group, per column with keepdim, int8 and uint8; quantize_affine;
  dequantize_affine) give eager's bits exactly;
- a large int8 weight stays int8 in the .pte (dequantized at run time, not stored as float);
- a quantized dtype etc does not take (int4 via torch.int8 bounds [-8, 7] is fine; uint16 is
  not) is refused at import with the op's name.

  pt2e_quantized_test.py ETC      (run with the reference environment's python)
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (  # noqa: E402
    XNNPACKQuantizer, get_symmetric_quantization_config)
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: E402


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(16)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.relu(self.conv2(y))
        y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
        return self.fc(y)


class Mlp(torch.nn.Module):
    """A 128x64 weight (8192 int8 elements: kept packed in the program)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 16)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x))) + x[:, :16]


def quantize(module, example, per_channel, fold_quantize=True, dynamic=False):
    torch.manual_seed(0)
    m = module.eval()
    for p in m.modules():
        if isinstance(p, torch.nn.BatchNorm2d):
            p.running_mean.uniform_(-0.2, 0.2)
            p.running_var.uniform_(0.5, 1.5)
    graph = torch.export.export(m, (example,)).module()
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic))
    prepared = prepare_pt2e(graph, quantizer)
    for _ in range(4):
        prepared(torch.randn_like(example))
    return convert_pt2e(prepared, fold_quantize=fold_quantize)


class AffineDirect(torch.nn.Module):
    """torchao's affine primitives called directly: parameters per block of the input, the
    input quantized and dequantized with them."""

    def __init__(self, mapping, block, dtype=torch.int8, qmin=-128, qmax=127, keepdim=False):
        super().__init__()
        self.args = (mapping, block, dtype, qmin, qmax, keepdim)

    def forward(self, x):
        mapping, block, dtype, qmin, qmax, keepdim = self.args
        s, z = torch.ops.torchao.choose_qparams_affine(x, mapping, block, dtype, qmin, qmax,
                                                       None, None, None, keepdim)
        q = torch.ops.torchao.quantize_affine(x, block, s, z, dtype, qmin, qmax)
        return torch.ops.torchao.dequantize_affine(q, block, s, z, dtype, qmin, qmax)


def run(etc, d, name, converted, example, inputs, failures, expect_int8=None, exact=False):
    """Both export forms: the default one and run_decompositions() (PT2E's ops stay)."""
    ep = torch.export.export(converted, (example,))
    run_form(etc, d, name, ep, converted, inputs, failures, expect_int8, exact)
    run_form(etc, d, name + "_core", ep.run_decompositions(), converted, inputs, failures,
             expect_int8, exact)


def run_form(etc, d, name, ep, converted, inputs, failures, expect_int8, exact):
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    scales = [n.args[1] for n in ep.graph.nodes
              if str(n.target) == "quantized_decomposed.dequantize_per_tensor.default"]
    path = os.path.join(d, name + ".pt2")
    torch.export.save(ep, path)
    pte = os.path.join(d, name + ".pte")
    r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        failures.append("%s: export: %s" % (name, r.stderr.strip()))
        return
    if expect_int8 is not None:
        r = subprocess.run([etc, "inspect", pte, "--format", "json"], capture_output=True,
                           text=True, check=True)
        plan = json.loads(r.stdout)["plans"][0]
        int8 = [v for v in plan["values"]
                if v.get("type") == "Tensor" and v.get("constant") and v.get("dtype") == "int8"
                and int(np.prod(v.get("sizes", []))) == expect_int8]
        if not int8:
            failures.append("%s: no int8 constant of %d elements in the program (the weight "
                            "was not kept packed)" % (name, expect_int8))
    step = max(scales) if scales else 0.0
    for k, x in enumerate(inputs):
        xin = os.path.join(d, "%s_x%d.npy" % (name, k))
        np.save(xin, x.numpy())
        out = os.path.join(d, "%s_out%d" % (name, k))
        r = subprocess.run([etc, "run", pte, "--input", "0=" + xin, "--output-dir", out],
                           capture_output=True, text=True)
        if r.returncode != 0:
            failures.append("%s, input %d: run: %s" % (name, k, r.stderr.strip()))
            continue
        with torch.no_grad():
            want = converted(x).numpy()
        got = np.load(os.path.join(out, "output_0.npy"))
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        off = float((diff > 0).mean())
        # An output on a quantization grid (static): at most one step away, for at most 1% of
        # the elements. A float output (dynamic: the products' sums are not requantized): the
        # float32 rounding of a sum in another order, far below one activation quantum.
        on_grid = step > 0 and diff.max() <= 1.01 * step and off <= 0.01
        float_close = step == 0 and diff.max() <= 1e-5 * float(np.abs(want).max()) and not exact
        on_grid = on_grid or (exact and diff.max() == 0)
        if got.shape != want.shape or not (on_grid or float_close):
            failures.append("%s, input %d: max |etc - eager| %.3g (output step %.3g), %.2f%% of "
                            "elements differ" % (name, k, diff.max(), step, 100 * off))
        else:
            print("ok: %s, input %d: %.2f%% of elements one step away (step %.3g); ops %s"
                  % (name, k, 100 * off, step,
                     sorted(t.split(".")[1] for t in targets if t.startswith(("quantized", "torchao"))))
                  , flush=True)


def main():
    etc = sys.argv[1]
    failures = []
    torch.manual_seed(1)
    cnn_x = torch.randn(2, 3, 16, 16)
    mlp_x = torch.randn(4, 64)
    with tempfile.TemporaryDirectory() as d:
        for per_channel in (True, False):
            tag = "per_channel" if per_channel else "per_tensor"
            run(etc, d, "cnn_" + tag, quantize(SmallCnn(), cnn_x, per_channel), cnn_x,
                [torch.randn(2, 3, 16, 16) for _ in range(3)], failures)
            run(etc, d, "mlp_" + tag, quantize(Mlp(), mlp_x, per_channel), mlp_x,
                [torch.randn(4, 64) for _ in range(3)], failures, expect_int8=128 * 64)
        # Weights left float with a quantize_per_channel before their dequantize.
        run(etc, d, "mlp_unfolded", quantize(Mlp(), mlp_x, True, fold_quantize=False), mlp_x,
            [torch.randn(4, 64)], failures)

        # Dynamic quantization: each call chooses its activations' scale and zero point
        # (choose_qparams.tensor, then the .tensor overloads); inputs of different ranges.
        run(etc, d, "mlp_dynamic", quantize(Mlp(), mlp_x, True, dynamic=True), mlp_x,
            [torch.randn(4, 64) * s for s in (0.1, 1.0, 30.0)] + [torch.rand(4, 64) + 1],
            failures)

        # torchao's primitives themselves, both mappings, blocks along each dim, keepdim,
        # uint8: the same elementwise ops as eager, so the same bits.
        import torchao.quantization.quant_primitives  # noqa: F401  (registers torch.ops.torchao)
        x3 = torch.randn(2, 8, 64)
        for label, module in (
                ("affine_asym_rows", AffineDirect("ASYMMETRIC", [1, 1, 64])),
                ("affine_sym_groups", AffineDirect("SYMMETRIC", [1, 1, 16])),
                ("affine_sym_cols_keepdim", AffineDirect("SYMMETRIC", [2, 8, 1], keepdim=True)),
                ("affine_asym_uint8", AffineDirect("ASYMMETRIC", [1, 8, 64], torch.uint8, 0, 255))):
            run(etc, d, label, module, x3, [torch.randn(2, 8, 64) * 3, torch.rand(2, 8, 64)],
                failures, exact=True)

        # A quantized dtype etc does not take: refused by name, no output file.
        class U16(torch.nn.Module):
            def forward(self, x):
                q = torch.ops.quantized_decomposed.quantize_per_tensor(
                    x, 0.1, 0, 0, 65535, torch.uint16)
                return torch.ops.quantized_decomposed.dequantize_per_tensor(
                    q, 0.1, 0, 0, 65535, torch.uint16)
        path = os.path.join(d, "u16.pt2")
        try:
            torch.export.save(torch.export.export(U16(), (mlp_x,)), path)
        except Exception as e:  # noqa: BLE001
            print("skip: uint16 quantize does not export in this PyTorch: %s" % e)
        else:
            pte = os.path.join(d, "u16.pte")
            r = subprocess.run([etc, "export", path, "-o", pte, "--target", "cpu"],
                               capture_output=True, text=True)
            if (r.returncode != 1 or "quantize_per_tensor" not in r.stderr
                    or "uint16" not in r.stderr or os.path.exists(pte)):
                failures.append("uint16: expected exit 1 naming the op and the dtype, got exit %d:"
                                " %s" % (r.returncode, r.stderr.strip()))
            else:
                print("ok: uint16 refused: %s" % r.stderr.strip().splitlines()[0], flush=True)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
