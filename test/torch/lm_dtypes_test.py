"""Language models in the forms they ship in, token by token, against PyTorch eager in the
same dtype: bf16, fp16, and torchao's weight-only int8 and int4 on a bf16 model.

    lm_dtypes_test.py ETC [MODEL[:VARIANT] ...]     (none: every model in every variant)

Models (random weights from fixed seeds, nothing downloaded):
  fixture_llama  scripts/make-decoder-fixtures.py's Llama-style decoder (hidden 256, GQA 8/2,
                 RoPE, RMSNorm, SiLU MLP, the KV cache in buffers), torch.export.export
  hf_llama, hf_qwen2
                 transformers' LlamaForCausalLM and Qwen2ForCausalLM (hidden 256, GQA 8/2,
                 2 layers, scripts/make-zoo.py's vocabulary), through transformers' ExecuTorch
                 wrapper (a static cache)
Variants: bf16 and fp16 (the whole model cast); on the bf16 model, torchao's weight-only
configs as language models are quantized for ExecuTorch, the linear layers and the token
embedding alike: int8 (Int8WeightOnlyConfig for the linear layers: int8 and a scale per
output row; IntxWeightOnlyConfig(int8, PerAxis(0)) for the embedding), int4 (IntxWeightOnly-
Config(int4, PerGroup(128)) for both) and int4_g32 (PerGroup(32)); and w8a8, torchao's
Int8DynamicActivationInt8WeightConfig for the linear layers (each activation row quantized to
int8 at run time, the integers multiplied by aten._int_mm), the embedding int8 as above.

For each model and variant, with an 8-token prompt and 32 generated tokens:
  - `etc export --target cpu` and `--target cuda:0`; the cuda:0 program delegates every op
    (w8a8: every op but the add of each activation's int8 zero point, which the CUDA
    elementwise kernels do not take);
  - teacher-forced: etc fed eager's tokens (the prompt, then eager's generated ids) gives the
    logits of every call within TOL[dtype] of eager's (w8a8: or within eager's own distance
    from float32, which quantizing each activation to int8 widens to 1-7%, with etc at least
    half as far from float32 as eager: its activations quantized too), relative to the
    call's largest logit
    (bf16 3e-2, about 8 of bf16's ulps at the largest logit; fp16 3e-3, about 6 of fp16's:
    eager itself is 1-4% (bf16) from the float32 answer on these models). And etc is as
    close as eager to the exact answer: both are compared with the same model run in float32
    on the same (dequantized) weights, and etc's largest error may not exceed 1.5x eager's
    (attention whose scores were rounded to bf16 was 1.6x);
  - free-running (`etc run --prompt --steps 32`, the cuda:0 program too, run by the CPU
    runtime): the same 32 greedy ids as eager, or, where they part, eager's own top-two
    margin at that step is within the tolerance band (2 TOL of the largest logit: bf16
    rounding decides between the two, in eager as in etc) -- reported with the step;
  - the .pte sizes: int8 at most 0.55x and int4 (group 128) at most 0.30x the bf16 program.
"""
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import torch
import torch.nn as nn

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMPT, STEPS, MAX_CACHE = 8, 32, 64
TOL = {torch.bfloat16: 3e-2, torch.float16: 3e-3}
ACCURACY_RATIO = 1.5
failures = 0


def check(ok, what, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what + (f": {detail}" if detail else ""), flush=True)
    failures += 0 if ok else 1


def load_script(name):
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"),
                                                  os.path.join(ROOT, "scripts", name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the models: each a builder of a fresh module (same seed, same weights) and a stepper ----

class HfStep:
    """transformers' static-cache wrapper: the exported program and eager's calls."""

    def __init__(self, model):
        from transformers.integrations.executorch import TorchExportableModuleWithStaticCache
        model.generation_config.cache_implementation = "static"
        model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": MAX_CACHE}
        self.model = model
        self.wrapper = TorchExportableModuleWithStaticCache(model, batch_size=1,
                                                            max_cache_len=MAX_CACHE)

    def export(self):
        from transformers.integrations.executorch import convert_and_export_with_cache
        return convert_and_export_with_cache(self.model)

    def __call__(self, token, pos):
        return self.wrapper(input_ids=torch.tensor([[token]]), cache_position=torch.tensor([pos]))


class FixtureStep:
    def __init__(self, model):
        self.model = model

    def export(self):
        return torch.export.export(self.model, (torch.tensor([[1]]), torch.tensor([0])))

    def __call__(self, token, pos):
        return self.model(torch.tensor([[token]]), torch.tensor([pos]))


# Wide enough for groups of 128 (the zoo's tiny configs are 64 wide).
HF_SIZE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
               num_attention_heads=8, num_key_value_heads=2, head_dim=32)


def hf_builder(model_type):
    zoo = load_script("make-zoo")
    from transformers import AutoConfig, AutoModelForCausalLM

    def build():
        torch.manual_seed(0)
        config = AutoConfig.for_model(model_type, **zoo.DECODER_BASE, **HF_SIZE)
        return AutoModelForCausalLM.from_config(config).eval()
    return build, HfStep, zoo.VOCAB


def fixture_builder():
    fixtures = load_script("make-decoder-fixtures")

    def build():
        torch.manual_seed(0)
        return fixtures.LlamaDecoder(hidden=768).eval()  # 768: a multiple of the groups
    return build, FixtureStep, 1024


MODELS = {"fixture_llama": fixture_builder, "hf_llama": lambda: hf_builder("llama"),
          "hf_qwen2": lambda: hf_builder("qwen2")}
VARIANTS = ["bf16", "fp16", "int8", "int4", "int4_g32", "w8a8"]
WEIGHT_ONLY = ("int8", "int4", "int4_g32")
QUANTIZED = WEIGHT_ONLY + ("w8a8",)


def quantize(model, variant):
    from torchao.quantization import (Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig,
                                      IntxWeightOnlyConfig, quantize_)
    from torchao.quantization.granularity import PerAxis, PerGroup
    if variant in ("int8", "w8a8"):
        linear = (Int8WeightOnlyConfig() if variant == "int8" else
                  Int8DynamicActivationInt8WeightConfig())
        embedding = IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    else:
        group = PerGroup(32 if variant == "int4_g32" else 128)
        linear = embedding = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=group)
    quantize_(model, embedding, filter_fn=lambda m, fqn: isinstance(m, nn.Embedding))
    quantize_(model, linear)
    return model


def make(build, variant, exact=False):
    """The model in `variant`; exact: the same weights (dequantized) in float32."""
    dtype = torch.float16 if variant == "fp16" else torch.bfloat16
    model = build().to(dtype)
    if variant in QUANTIZED:
        model = quantize(model, variant)
    if exact:
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)) and hasattr(m.weight, "dequantize"):
                m.weight = nn.Parameter(m.weight.dequantize().float(), requires_grad=False)
        model = model.float()
    return model


def logits_of(step, tokens):
    """Eager's logits of every call (float32 [len(tokens), vocab]), one token per call."""
    rows = []
    with torch.no_grad():
        for pos, token in enumerate(tokens):
            rows.append(step(token, pos)[0, -1].float().numpy().copy())
    return np.stack(rows)


def greedy(step, prompt):
    tokens, rows = list(prompt), []
    with torch.no_grad():
        for pos in range(PROMPT + STEPS - 1):
            row = step(tokens[pos], pos)[0, -1].float()
            rows.append(row.numpy().copy())
            if pos >= PROMPT - 1:
                tokens.append(int(row.argmax()))
    return tokens[PROMPT:], np.stack(rows)


def etc_run(etc, pte, prompt_file, steps, out):
    r = subprocess.run([etc, "run", pte, "--device", "cpu", "--prompt", prompt_file, "--steps",
                        str(steps), "--output-dir", out], capture_output=True, text=True)
    if r.returncode != 0:
        return None, None, f"etc run exited {r.returncode}: {(r.stdout + r.stderr)[-600:]}"
    return (np.load(os.path.join(out, "generated_ids.npy")).reshape(-1).tolist(),
            np.load(os.path.join(out, "logits.npy")).astype(np.float32), "")


def row_errors(got, want):
    """Each call's largest |got - want| over that call's largest |want|."""
    return np.max(np.abs(got.astype(np.float64) - want), axis=1) / np.max(np.abs(want), axis=1)


def test(etc, name, variant, tmp, sizes):
    build, stepper, vocab = MODELS[name]()
    label = f"{name} {variant}"
    tol = TOL[torch.float16 if variant == "fp16" else torch.bfloat16]
    work = os.path.join(tmp, f"{name}.{variant}")
    os.makedirs(work)
    pt2, cpu, cuda = (os.path.join(work, f) for f in ("model.pt2", "cpu.pte", "cuda.pte"))
    with torch.no_grad():
        torch.export.save(stepper(make(build, variant)).export(), pt2)
    prompt = torch.randint(3, vocab, (PROMPT,), generator=torch.Generator().manual_seed(1)).tolist()
    want_ids, want = greedy(stepper(make(build, variant)), prompt)
    forced = prompt + want_ids[:-1]
    exact = logits_of(stepper(make(build, variant, exact=True)), forced)

    report = os.path.join(work, "report.json")
    for target, pte in (("cpu", cpu), ("cuda:0", cuda)):
        r = subprocess.run([etc, "export", pt2, "-o", pte, "--target", target, "--report", report],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{label}: etc export --target {target}",
              (r.stdout + r.stderr)[-600:] if r.returncode else "")
        if r.returncode:
            return
    host = json.load(open(report))["ops"]["host"]
    if variant == "w8a8":
        check(host and {h["op"] for h in host} == {"aten.add.Tensor"},
              f"{label}: the cuda:0 program delegates every op but the int8 zero points' adds",
              ", ".join(sorted({h["op"] for h in host})))
    else:
        check(not host, f"{label}: the cuda:0 program delegates every op",
              ", ".join(sorted({h["op"] for h in host})))
    sizes[(name, variant)] = os.path.getsize(cpu)
    if variant in WEIGHT_ONLY:
        # The int8 and int4 linear layers run in the delegate as one etc::weight_only_linear
        # each, reading the packed weight (fuse-weight-only), not as the chain that
        # dequantizes it.
        linears = sum(isinstance(m, torch.nn.Linear) for m in make(build, variant).modules())
        r = subprocess.run([etc, "inspect", cuda], capture_output=True, text=True)
        fused = sum(int(n) for n in re.findall(r"etc::weight_only_linear\.default x(\d+)",
                                               r.stdout))
        check(fused == linears,
              f"{label}: the cuda:0 program runs its {linears} linear layers on the packed "
              f"weights", f"{fused} etc::weight_only_linear; {r.stdout[-400:]}")

    # Teacher-forced: the logits of every call on eager's tokens.
    np.save(os.path.join(work, "forced.npy"), np.array(forced, np.int64))
    _, got, err = etc_run(etc, cpu, os.path.join(work, "forced.npy"), 1, os.path.join(work, "tf"))
    check(got is not None and got.shape == want.shape, f"{label}: etc runs eager's tokens",
          err or (f"logits {list(got.shape)}, eager {list(want.shape)}" if got is not None else ""))
    if got is None or got.shape != want.shape:
        return
    vs_eager = row_errors(got, want)
    eager_exact = row_errors(want, exact).max()
    etc_exact = row_errors(got, exact).max()
    band_tol = tol  # the free-running check's band stays 2 TOL
    if variant == "w8a8":
        # Activations rounded to int8 steps at run time: a logit one bf16 ulp apart upstream
        # can round to the next step, so etc may differ from eager by as much as eager itself
        # differs from float32 on the same weights (what quantizing the activations costs).
        # That bound alone would pass a program that did not quantize its activations at
        # all (it would sit near float32): etc must be as far from float32 as eager, within
        # a factor of 2.
        tol = max(tol, float(eager_exact))
        check(etc_exact >= 0.5 * eager_exact,
              f"{label}: quantizes its activations as eager does (as far from float32)",
              f"etc {etc_exact:.2g}, eager {eager_exact:.2g}")
    check(bool(np.all(vs_eager <= tol)),
          f"{label}: every call's logits within {tol:g} of eager's (relative to the largest)",
          f"worst {vs_eager.max():.3g} at call {int(vs_eager.argmax()) + 1}" if
          np.any(vs_eager > tol) else f"worst {vs_eager.max():.2g}")
    check(etc_exact <= ACCURACY_RATIO * eager_exact,
          f"{label}: as close as eager to float32 on the same weights",
          f"etc {etc_exact:.2g}, eager {eager_exact:.2g}")

    # Free-running generation, the cpu and the cuda:0 program.
    np.save(os.path.join(work, "prompt.npy"), np.array(prompt, np.int64))
    for target, pte in (("cpu", cpu), ("cuda:0", cuda)):
        ids, logits, err = etc_run(etc, pte, os.path.join(work, "prompt.npy"), STEPS,
                                   os.path.join(work, "gen." + target))
        if ids is None:
            check(False, f"{label} ({target} program): etc generates {STEPS} tokens", err)
            continue
        k = next((i for i in range(STEPS) if ids[i] != want_ids[i]), STEPS)
        if k == STEPS:
            check(True, f"{label} ({target} program): the same {STEPS} greedy ids as eager")
            continue
        row = want[PROMPT - 1 + k]
        top = np.sort(row)[-2:]
        margin, band = float(top[1] - top[0]), 2 * band_tol * float(np.max(np.abs(row)))
        check(margin <= band,
              f"{label} ({target} program): the same greedy ids as eager through step {k}; at "
              f"step {k + 1} eager's top two logits are {margin:.3g} apart, within rounding "
              f"(band {band:.3g})" if margin <= band else
              f"{label} ({target} program): greedy ids differ from eager's at step {k + 1}",
              "" if margin <= band else
              f"eager's margin there {margin:.3g} exceeds the tolerance band {band:.3g}")


def main(argv):
    etc, wanted = argv[1], argv[2:]
    cases = [(m, v) for m in MODELS for v in VARIANTS]
    if wanted:
        cases = [(m, v) for m, v in cases if m in wanted or f"{m}:{v}" in wanted]
    sizes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, variant in cases:
            try:
                test(etc, name, variant, tmp, sizes)
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                check(False, f"{name} {variant}: ran", repr(e))
    for name in MODELS:
        base = sizes.get((name, "bf16"))
        for variant, bound in (("int8", 0.55), ("int4", 0.30)):
            if base and (name, variant) in sizes:
                ratio = sizes[(name, variant)] / base
                check(ratio <= bound, f"{name} {variant}: .pte {ratio:.2f}x the bf16 program's "
                      f"(at most {bound})")
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
