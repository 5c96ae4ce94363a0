#!/usr/bin/env python3
"""QDQ quantized models through etc, against ONNX Runtime on the same inputs.

  qdq_models_test.py ETC MODELS_DIR [NAME ...]

MODELS_DIR holds scripts/make-qdq-models.py's models (test/torch/fixtures.sh caches them):
torchvision's resnet18 and mobilenet_v2 quantized by ONNX Runtime's own tool
(quantize_static, QDQ format, uint8 activations, int8 weights), per-channel (NAME.pc.onnx) and
per-tensor (NAME.pt.onnx). Each is exported with --target cpu and --target cuda:0, run with
`etc run --device cpu` on INPUTS seeded standard-normal images, and compared with ONNX
Runtime's CPU EP (1 thread, default graph optimisations: its QLinearConv integer kernels).

Tolerance. Quantized models legitimately differ by rounding: ONNX Runtime fuses each
DequantizeLinear -> Conv -> QuantizeLinear into an integer convolution with a fixed-point
requantisation, etc computes the float Conv of the dequantized values and quantizes its
result; a value near a rounding boundary lands on the neighbouring 8-bit step in one and not
the other, and that step travels on through the network. The yardstick is ONNX Runtime
against itself: the same model run with its graph optimisations off (ORT_DISABLE_ALL: the
QDQ graph computed as written, in float) differs from its default run by the same kind of
rounding. etc must be as close to ONNX Runtime's default run as that:
  max |etc - ort| <= 1.5 x max |ort - ort_unfused| (over all inputs, at least 2 output steps)
  mean |etc - ort| <= 1.5 x mean |ort - ort_unfused|
and the top-1 class must agree wherever ONNX Runtime's top-2 margin exceeds that max bound
(closer logits may swap by rounding; with random weights many are close). The output step is
the scale of the DequantizeLinear producing the graph output.

Packing: the --target cpu program of a quantized model must be at most 0.3 times the size of
the float model's program (its int8 weights stay int8 in the .pte).

Exit status: 0 when every model matches, 1 otherwise (each failure is listed).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort

MODELS = ["resnet18", "mobilenet_v2"]
FORMS = [("pc", "per-channel"), ("pt", "per-tensor")]
INPUTS = 4
SLACK = 1.5
MIN_STEPS = 2.0
MAX_SIZE_RATIO = 0.3


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def output_step(path):
    """The quantisation step of the graph's output: the scale of its DequantizeLinear."""
    g = onnx.load(path, load_external_data=False).graph
    inits = {t.name: t for t in g.initializer}
    out = g.output[0].name
    for n in g.node:
        if out in n.output and n.op_type == "DequantizeLinear":
            return float(onnx.numpy_helper.to_array(inits[n.input[1]]).max())
    raise SystemExit(f"{path}: the output is not produced by a DequantizeLinear")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    etc, models = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or MODELS
    failures = []
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1, 3, 224, 224), dtype=np.float32) for _ in range(INPUTS)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    with tempfile.TemporaryDirectory() as work:
        files = []
        for i, x in enumerate(inputs):
            files.append(os.path.join(work, f"input_{i}.npy"))
            np.save(files[-1], x)
        for name in names:
            float_pte = os.path.join(work, f"{name}.pte")
            r = run([etc, "export", os.path.join(models, f"{name}.onnx"), "--target", "cpu", "-o", float_pte])
            if r.returncode != 0:
                failures.append(f"{name}: etc export of the float model:\n{r.stdout}")
                continue
            for tag, form in FORMS:
                model = os.path.join(models, f"{name}.{tag}.onnx")
                label = f"{name} ({form})"
                step = output_step(model)
                sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                want = [sess.run(None, {"x": x})[0].astype(np.float64) for x in inputs]
                so_unfused = ort.SessionOptions()
                so_unfused.intra_op_num_threads = 1
                so_unfused.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                sess = ort.InferenceSession(model, so_unfused, providers=["CPUExecutionProvider"])
                unfused = [np.abs(sess.run(None, {"x": x})[0] - w) for x, w in zip(inputs, want)]
                max_bound = max(SLACK * max(float(u.max()) for u in unfused), MIN_STEPS * step)
                mean_bound = SLACK * max(float(u.mean()) for u in unfused)
                decided = [np.diff(np.sort(w.ravel())[-2:])[0] > max_bound for w in want]
                for target in ("cpu", "cuda:0"):
                    pte = os.path.join(work, f"{name}.{tag}.{target[:3]}.pte")
                    r = run([etc, "export", model, "--target", target, "-o", pte])
                    if r.returncode != 0:
                        failures.append(f"{label}: etc export --target {target}:\n{r.stdout}")
                        continue
                    worst, mean_err, top1 = 0.0, 0.0, 0
                    top1_miss = 0
                    for i, f in enumerate(files):
                        out = os.path.join(work, f"out_{name}_{tag}_{target[:3]}_{i}")
                        r = run([etc, "run", pte, "--device", "cpu", "--input", f"x={f}", "--output-dir", out])
                        if r.returncode != 0:
                            failures.append(f"{label}: etc run ({target} export):\n{r.stdout}")
                            break
                        got = np.load(os.path.join(out, "output_0.npy"))
                        if got.shape != want[i].shape:
                            failures.append(f"{label}: etc gives {got.shape}, ONNX Runtime {want[i].shape}")
                            break
                        err = np.abs(got.astype(np.float64) - want[i])
                        worst = max(worst, float(err.max()))
                        mean_err = max(mean_err, float(err.mean()))
                        same = got.argmax() == want[i].argmax()
                        top1 += int(same)
                        top1_miss += int(decided[i] and not same)
                    else:
                        ratio = ""
                        if target == "cpu":
                            size_ratio = os.path.getsize(pte) / os.path.getsize(float_pte)
                            ratio = f", program {size_ratio:.3f} x the float model's"
                            if size_ratio > MAX_SIZE_RATIO:
                                failures.append(f"{label}: the program is {size_ratio:.3f} x the float "
                                                f"model's (at most {MAX_SIZE_RATIO}): weights not packed")
                        ok = worst <= max_bound and mean_err <= mean_bound and top1_miss == 0
                        print(f"{'ok' if ok else 'FAIL'}: {label}, {target} export: max |etc - ort| "
                              f"{worst:.4f} ({worst / step:.1f} steps of {step:.3g}; bound "
                              f"{max_bound:.4f}), mean {mean_err:.4f} (bound {mean_bound:.4f}), "
                              f"top-1 agrees {top1}/{len(files)} ({sum(decided)} decided){ratio}")
                        if not ok:
                            failures.append(f"{label} ({target} export) differs from ONNX Runtime")
    for f in failures:
        print("FAIL:", f)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("all QDQ models match ONNX Runtime")
    return 0


if __name__ == "__main__":
    sys.exit(main())
