"""decode_cpu: token-by-token decoding of a Llama-shaped language model on the CPU, etc against
PyTorch eager and ExecuTorch+XNNPACK on the same exported program, in one run.

  decode_cpu.py ETC [--variants fp32,bf16,int8,int4,8da4w] [--threads 1,2] [--steps N]
                [--rounds R] [--layers L] [--hidden H] [--max-cache N] [--work DIR]
  decode_cpu.py et-run PTE PROMPT.npy STEPS THREADS      (ExecuTorch's side, one process)

The model: transformers' LlamaForCausalLM from a config (random weights, seed 0; default
hidden 512, 8 layers, 8 query / 4 key-value heads of 64, MLP 1536, 32000-token vocabulary:
57M parameters, 114 MB in bf16, so a token reads the weights from memory, not from the
cache), exported with transformers' ExecuTorch recipe (a static KV cache of 128 rows, or
--max-cache rows: each step's attention reads all of them, masked; input_ids [1, 1] and
cache_position [1]). Variants, torchao (pinned) as ExecuTorch's
language-model exports use it:
  fp32, bf16    the whole model cast
  int8          bf16; Int8WeightOnlyConfig (linear layers), IntxWeightOnlyConfig(int8,
                PerAxis(0)) (the embedding)
  int4          bf16; IntxWeightOnlyConfig(int4, PerGroup(128)) (linear layers, embedding)
  8da4w         fp32; Int8DynamicActivationIntxWeightConfig(int4, PerGroup(128)) on the
                linear layers, the form ExecuTorch's XNNPACK backend runs int4 weights in
                (activations quantized to int8 per row at run time); the embedding fp32
  w8a8          bf16; Int8DynamicActivationInt8WeightConfig (linear layers: int8 weights,
                activations quantized to int8 per row at run time, aten._int_mm),
                IntxWeightOnlyConfig(int8, PerAxis(0)) (the embedding); not in the default
                list
ExecuTorch's to_executorch refuses torchao.dequantize_affine outside a pattern XNNPACK takes
(no out variant), so it cannot lower the weight-only variants; its column says so.
Each engine decodes an 8-token prompt (one token per call) then STEPS greedy tokens; the
figure is the median time of a generated token's call. etc: `etc export --target cpu`, `etc
run --prompt --steps --json`; eager: transformers' static-cache wrapper of the quantized
module; ExecuTorch: to_edge_transform_and_lower(XnnpackPartitioner()) of the same exported
program, Runtime's method.execute per token (the ops XNNPACK leaves to portable kernels are
listed). The engines alternate within each round; a ratio is the median over the rounds of
etc / reference. "GB/s" is the bytes a token reads (the .pte's weights less the embedding
table, of which a token reads one row) over etc's time per token, against a plain copy's
bandwidth measured in the same run (read + write). Generated ids are compared: engines that
agree print "same" (bf16 and quantized programs may part where two logits tie within
rounding).
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_bandwidth import copy_bandwidth  # noqa: E402

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCH_LOGS", "-all")
PROMPT = 8


def et_run(pte, prompt_path, steps, threads):
    """ExecuTorch: greedy decoding through the program, per-token times of the decode calls."""
    import torch
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime
    portable_lib._unsafe_reset_threadpool(threads)
    torch.set_num_threads(threads)
    method = Runtime.get().load_program(pte).load_method("forward")
    prompt = np.load(prompt_path).tolist()
    tokens, times = list(prompt), []
    for pos in range(len(prompt) + steps - 1):
        ids, cache_pos = torch.tensor([[tokens[pos]]]), torch.tensor([pos])
        start = time.perf_counter()
        logits = method.execute([ids, cache_pos])[0]
        elapsed = time.perf_counter() - start
        if pos >= len(prompt) - 1:
            tokens.append(int(logits[0, -1].float().argmax()))
            if pos >= len(prompt):
                times.append(elapsed * 1e3)
    print(json.dumps({"decode_median_ms": statistics.median(times),
                      "generated_ids": tokens[len(prompt):]}))


def build(args, variant):
    import torch
    import torch.nn as nn
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    config = AutoConfig.for_model(
        "llama", vocab_size=32000, hidden_size=args.hidden, intermediate_size=3 * args.hidden,
        num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
        num_key_value_heads=max(1, args.hidden // 128), head_dim=64,
        max_position_embeddings=args.max_cache, initializer_range=0.02)
    model = AutoModelForCausalLM.from_config(config).eval()
    model = model.to(torch.float32 if variant in ("fp32", "8da4w") else torch.bfloat16)
    if variant in ("int8", "int4", "8da4w", "w8a8"):
        from torchao.quantization import (Int8DynamicActivationInt8WeightConfig,
                                          Int8DynamicActivationIntxWeightConfig,
                                          Int8WeightOnlyConfig, IntxWeightOnlyConfig, quantize_)
        from torchao.quantization.granularity import PerAxis, PerGroup
        if variant in ("int8", "w8a8"):
            embedding = IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
            linear = (Int8WeightOnlyConfig() if variant == "int8" else
                      Int8DynamicActivationInt8WeightConfig())
        elif variant == "int4":
            embedding = linear = IntxWeightOnlyConfig(weight_dtype=torch.int4,
                                                      granularity=PerGroup(128))
        else:
            embedding, linear = None, Int8DynamicActivationIntxWeightConfig(
                weight_dtype=torch.int4, weight_granularity=PerGroup(128))
        if embedding:
            quantize_(model, embedding, filter_fn=lambda m, fqn: isinstance(m, nn.Embedding))
        quantize_(model, linear)
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": 1, "max_cache_len": args.max_cache}
    return model


def eager_decode(model, prompt, steps, threads):
    import torch
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache
    torch.set_num_threads(threads)
    max_cache = model.generation_config.cache_config["max_cache_len"]
    wrapper = TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=max_cache)
    tokens, times = list(prompt), []
    with torch.no_grad():
        for pos in range(len(prompt) + steps - 1):
            start = time.perf_counter()
            logits = wrapper(input_ids=torch.tensor([[tokens[pos]]]),
                             cache_position=torch.tensor([pos]))
            elapsed = time.perf_counter() - start
            if pos >= len(prompt) - 1:
                tokens.append(int(logits[0, -1].float().argmax()))
                if pos >= len(prompt):
                    times.append(elapsed * 1e3)
    return statistics.median(times), tokens[len(prompt):]


def portable_ops(pte_path):
    """The ops of an ExecuTorch program that run outside the delegate, counted."""
    from executorch.exir._serialize import _program
    program = _program.deserialize_pte_binary(open(pte_path, "rb").read())
    program = getattr(program, "program", program)
    plan = program.execution_plan[0]
    counts = collections.Counter()
    for chain in plan.chains:
        for ins in chain.instructions:
            if type(ins.instr_args).__name__ == "KernelCall":
                op = plan.operators[ins.instr_args.op_index]
                counts[op.name + ("." + op.overload if op.overload else "")] += 1
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("etc")
    ap.add_argument("--variants", default="fp32,bf16,int8,int4,8da4w")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--max-cache", type=int, default=128, help="the static KV cache's rows")
    ap.add_argument("--work", help="keep the programs in this folder (default: a temporary one)")
    args = ap.parse_args()
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from transformers.integrations.executorch import convert_and_export_with_cache

    bandwidth = copy_bandwidth()
    print(f"plain copy: {bandwidth:.1f} GB/s (256 MiB, read + write); torch {torch.__version__}; "
          f"prompt {PROMPT} tokens, {args.steps} generated, {args.rounds} rounds", flush=True)
    rows, notes = [], []
    work = args.work or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    prompt = (np.arange(PROMPT) * 997 % 31000 + 3).astype(np.int64)
    np.save(os.path.join(work, "prompt.npy"), prompt)
    for variant in args.variants.split(","):
        model = build(args, variant)
        with torch.no_grad():
            ep = convert_and_export_with_cache(model)
        pt2, pte, xnn = (os.path.join(work, variant + s) for s in (".pt2", ".pte", ".xnn.pte"))
        torch.export.save(ep, pt2)
        start = time.perf_counter()
        r = subprocess.run([args.etc, "export", pt2, "-o", pte, "--target", "cpu"],
                           capture_output=True, text=True)
        etc_export_s = time.perf_counter() - start
        if r.returncode:
            print(f"{variant}: etc export failed: {r.stderr[-500:]}")
            continue
        start = time.perf_counter()
        try:
            lowered = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
            with open(xnn, "wb") as f:
                f.write(lowered.to_executorch().buffer)
            et_error = None
            left = portable_ops(xnn)
        except Exception as e:  # noqa: BLE001 - reported in the table
            # The first line that says something (SpecViolationError's message starts with a
            # newline: an empty error read as none).
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            et_error, left = (lines or [type(e).__name__])[0][:120], {}
        et_export_s = time.perf_counter() - start
        # The embedding table's bytes as etc stores them (int4 two values a byte).
        emb_bytes = {"fp32": 4, "bf16": 2, "int8": 1, "int4": 0.5, "8da4w": 4, "w8a8": 1}[variant] * \
            model.config.vocab_size * model.config.hidden_size
        token_bytes = os.path.getsize(pte) - emb_bytes
        for threads in [int(t) for t in args.threads.split(",")]:
            ratios = collections.defaultdict(list)
            times = collections.defaultdict(list)
            ids = {}
            for _ in range(args.rounds):
                r = subprocess.run([args.etc, "run", pte, "--device", "cpu", "--threads",
                                    str(threads), "--warmup", "1", "--iterations", "1",
                                    "--prompt", os.path.join(work, "prompt.npy"), "--steps",
                                    str(args.steps), "--json"], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"decode_cpu: etc run {pte} exited {r.returncode}: {r.stderr[-500:]}")
                out = json.loads(r.stdout)
                etc_ms = out["timing_ms"]["decode_median"]
                ids["etc"] = out["generated_ids"]
                eager_ms, ids["eager"] = eager_decode(model, prompt.tolist(), args.steps, threads)
                times["etc"].append(etc_ms)
                times["eager"].append(eager_ms)
                ratios["eager"].append(etc_ms / eager_ms)
                if et_error:
                    continue
                r = subprocess.run([sys.executable, __file__, "et-run", xnn,
                                    os.path.join(work, "prompt.npy"), str(args.steps),
                                    str(threads)], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"decode_cpu: ExecuTorch's run of {xnn} exited {r.returncode}: "
                             f"{r.stderr[-500:]}")
                et = json.loads(r.stdout.strip().splitlines()[-1])
                ids["executorch"] = et["generated_ids"]
                times["executorch"].append(et["decode_median_ms"])
                ratios["executorch"].append(etc_ms / et["decode_median_ms"])
            med = {k: statistics.median(v) for k, v in times.items()}
            med.setdefault("executorch", float("nan"))
            ratios.setdefault("executorch", [float("nan")])
            gbs = token_bytes / (med["etc"] * 1e-3) / 1e9
            same = ("same" if ids["etc"] == ids["eager"] == ids.get("executorch", ids["etc"]) else
                    "etc=eager" if ids["etc"] == ids["eager"] else
                    "etc=ET" if ids["etc"] == ids.get("executorch") else "differ")
            rows.append((variant, threads, med["etc"], med["eager"], med["executorch"],
                         statistics.median(ratios["eager"]),
                         statistics.median(ratios["executorch"]), gbs, gbs / bandwidth, same))
            print("%-6s %3d  etc %8.2f ms  eager %8.2f  ExecuTorch+XNNPACK %8.2f  %s" % (
                variant, threads, med["etc"], med["eager"], med["executorch"], same), flush=True)
        notes.append((variant, os.path.getsize(pte), 0 if et_error else os.path.getsize(xnn),
                      etc_export_s,
                      et_export_s, left, et_error))
    print()
    print("| model | threads | etc ms/token | eager ms (etc / it) | ExecuTorch+XNNPACK ms (etc / it)"
          " | etc tokens/s | etc GB/s (of copy) | ids |")
    print("|---|---|---|---|---|---|---|---|")
    for (v, t, e, p, x, rp, rx, gbs, frac, same) in rows:
        et = "cannot lower (below)" if x != x else f"{x:.2f} ({rx:.2f})"
        print(f"| {v} | {t} | {e:.2f} | {p:.2f} ({rp:.2f}) | {et} | {1e3 / e:.0f} "
              f"| {gbs:.1f} ({frac:.0%}) | {same} |")
    print()
    print("| model | etc .pte MB | ExecuTorch .pte MB | etc export s | ExecuTorch lowering s "
          "| ops ExecuTorch runs outside XNNPACK |")
    print("|---|---|---|---|---|---|")
    for (v, size, xsize, es, xs, left, err) in notes:
        ops = ", ".join(f"{k} x{n}" for k, n in sorted(left.items())) or "none"
        if err:
            print(f"| {v} | {size / 1e6:.1f} | - | {es:.2f} | - | cannot lower: {err} |")
        else:
            print(f"| {v} | {size / 1e6:.1f} | {xsize / 1e6:.1f} | {es:.2f} | {xs:.1f} | {ops} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "et-run":
        et_run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
