"""Weight-only quantized linear layers on the CPU: etc against PyTorch eager, in one run.

    weight_only.py ETC WORKDIR

For torchao's Int8WeightOnlyConfig (int8, a scale per output channel) and
IntxWeightOnlyConfig(int4, PerGroup(32)) (int4 values held in int8, a zero point and scale per
group of 32 inputs), a bias-free nn.Linear of K inputs and N outputs is quantized, exported
(torch.export) and run on M rows (M = 1: a decode step; M = 8: a short prompt); "bf16" is the
same layer unquantized in bf16 (weights, input, output), as bf16 models run; "w8a8" is
Int8DynamicActivationInt8WeightConfig (int8 weights, each input row quantized to int8 at run
time and the integers multiplied by aten._int_mm: not weight-only, but the int8 path torchao
offers for CPUs). CONFIGS=bf16,int8 (names as printed, comma-separated) runs only those:
- etc: `etc export --target cpu`, then `etc run` (median over its timed iterations), with the
  load planner's fused dequantization (the product reads the int8 weight while packing it) and
  with --no-fusion (every step of the program as written: the weight widened to float32
  first);
- PyTorch eager: the quantized module itself (torchao's kernels), median of the same count;
both at 1 and 2 threads. Prints ms per call, the ratios, the weight bytes read per call as
GB/s, a plain memory copy's bandwidth measured here in the same run, and each output's
largest error against eager relative to the largest output.
"""
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
from torchao.quantization import (Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig,
                                  IntxWeightOnlyConfig, quantize_)
from torchao.quantization.granularity import PerGroup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_bandwidth import copy_bandwidth  # noqa: E402

ETC, WORK = sys.argv[1], sys.argv[2]
ITERS = int(os.environ.get("ITERATIONS", "20"))
SIZES = [(2048, 2048), (4096, 4096)]
ROWS = [1, 8]
CONFIGS = {
    "int8": lambda: Int8WeightOnlyConfig(),
    "int4 g32": lambda: IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
    # Not quantized: the layer in bf16 (weights, input and output), as bf16 models run.
    "bf16": None,
    "w8a8": lambda: Int8DynamicActivationInt8WeightConfig(),
}


def etc_ms(pte, x_path, threads, fusion):
    args = [ETC, "run", pte, "--device", "cpu", "--threads", str(threads), "--input",
            "0=" + x_path, "--warmup", "3", "--iterations", str(ITERS), "--json",
            "--output-dir", os.path.join(WORK, "out")]
    if not fusion:
        args.append("--no-fusion")
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    got = np.load(os.path.join(WORK, "out", "output_0.npy"))
    return json.loads(out)["timing_ms"]["compute_median"], got


def eager_ms(model, x, threads):
    torch.set_num_threads(threads)
    with torch.no_grad():
        for _ in range(3):
            model(x)
        times = []
        for _ in range(ITERS):
            t = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    os.makedirs(WORK, exist_ok=True)
    bw = copy_bandwidth()
    print(f"plain copy: {bw:.1f} GB/s (256 MiB, read + write); torch {torch.__version__}; "
          f"{ITERS} timed calls each")
    print(f"{'config':9} {'K x N':>11} {'M':>2} {'thr':>3} {'etc ms':>8} {'no-fusion':>9} "
          f"{'eager ms':>8} {'etc/eager':>9} {'fused gain':>10} {'etc GB/s':>8} {'max err':>8}")
    only = [c for c in os.environ.get("CONFIGS", "").split(",") if c]
    for name, config in CONFIGS.items():
        if only and name not in only:
            continue
        for k, n in SIZES:
            torch.manual_seed(0)
            model = nn.Sequential(nn.Linear(k, n, bias=False)).eval()
            dtype = torch.float32
            if config is None:
                dtype = torch.bfloat16
                model = model.to(dtype)
            else:
                quantize_(model, config())
            for m in ROWS:
                x = torch.randn(m, k).to(dtype)
                tag = f"{name.replace(' ', '_')}_{k}x{n}_m{m}"
                pt2, pte = os.path.join(WORK, tag + ".pt2"), os.path.join(WORK, tag + ".pte")
                x_path = os.path.join(WORK, tag + ".x.npy")
                np.save(x_path, x.float().numpy())  # etc run rounds a float32 .npy to bf16
                torch.export.save(torch.export.export(model, (x,)), pt2)
                subprocess.run([ETC, "export", pt2, "-o", pte, "--target", "cpu"], check=True,
                               capture_output=True)
                with torch.no_grad():
                    want = model(x).float().numpy()
                for threads in (1, 2):
                    fused, got = etc_ms(pte, x_path, threads, True)
                    plain, got_plain = etc_ms(pte, x_path, threads, False)
                    same = np.array_equal(got, got_plain)
                    # A decode step over 4-bit weights sums by table lookup in its own order
                    # on AVX-512 (docs/torch-export.md): its bits may differ, within float32's
                    # rounding of the unfused sum; anything else must be the unfused bits.
                    lookup = name.startswith("int4") and m == 1
                    near = np.allclose(got, got_plain, rtol=1e-5,
                                       atol=1e-5 * float(np.abs(got_plain).max()))
                    eager = eager_ms(model, x, threads)
                    err = float(np.abs(got - want).max() / np.abs(want).max())
                    # The weight's bytes read per call (int4: two values a byte, as etc's
                    # export stores them).
                    per_value = 2 if config is None else 0.5 if name.startswith("int4") else 1
                    gbs = k * n * per_value / (fused * 1e-3) / 1e9
                    print(f"{name:9} {f'{k}x{n}':>11} {m:>2} {threads:>3} {fused:8.3f} {plain:9.3f} "
                          f"{eager:8.3f} {fused / eager:9.2f} {plain / fused:9.1f}x {gbs:8.1f} "
                          f"{err:8.1e}" +
                          ("" if same else "  own sum order (table lookup)" if lookup and near
                           else "  FUSED BITS DIFFER"))


main()
