#!/usr/bin/env python3
"""torch_decode: PyTorch eager's side of bench/decoder_vs_eager.sh.

Builds a decoder of scripts/make-decoder-fixtures.py (or llama_decoder_int4, of
scripts/make-quantized-decoder-fixtures.py) with the fixture's seed (the weights etc's export
holds), then times greedy generation as `etc run --prompt --steps` runs it: the
prompt one token per call, then STEPS tokens, each fed back in, the KV cache in the module's
buffers; torch.no_grad(), THREADS intra-op threads. Prints one JSON object: the ids, the
prompt's total ms and the median/min ms of the decode calls.

With --whole-prompt the prompt is one call (the decoder exported with a dynamic sequence).
With --device cuda the module, its cache and the inputs live on the GPU (each call's time
includes torch.cuda.synchronize(), as `etc run` synchronises after each call).
With --repeat N the generation runs N times (the cache rows are rewritten from position 0, so
every run computes the same): prefill is the median, decode times are pooled.

Usage: torch_decode.py [--whole-prompt] [--repeat N] [--device cpu|cuda] NAME PROMPT.npy STEPS
       THREADS [EXTRA.npy...]"""
import importlib.util
import json
import os
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np
import torch


def main(argv):
    whole = "--whole-prompt" in argv
    argv = [a for a in argv if a != "--whole-prompt"]
    repeat = 1
    if "--repeat" in argv:
        k = argv.index("--repeat")
        repeat = int(argv[k + 1])
        del argv[k:k + 2]
    device = "cpu"
    if "--device" in argv:
        k = argv.index("--device")
        device = argv[k + 1]
        del argv[k:k + 2]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    name, prompt_path, steps, threads = argv[1], argv[2], int(argv[3]), int(argv[4])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "fixtures", os.path.join(root, "scripts", "make-decoder-fixtures.py"))
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    if name == "llama_decoder_int4":  # torchao's int4 weight-only layers (needs torchao)
        spec = importlib.util.spec_from_file_location(
            "quantized", os.path.join(root, "scripts", "make-quantized-decoder-fixtures.py"))
        quantized = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(quantized)
        model = quantized.build(fixtures).to(device)
    else:
        model = fixtures.MODELS[name][0]().eval().to(device)
    extra = [torch.from_numpy(np.load(p)).to(device) for p in argv[5:]]

    def t(values):
        return torch.tensor(values, device=device)

    prompt = np.load(prompt_path).reshape(-1).tolist()
    prefills, decode = [], []
    with torch.no_grad():  # one untimed call first, as etc's --warmup does
        model(t([prompt[:1]]), t([0]), *extra)
        sync()
        for _ in range(repeat):
            ids, prefill = [], 0.0
            token = prompt[0]
            if whole:
                start = time.perf_counter()
                out = model(t([prompt]), torch.arange(len(prompt), device=device), *extra)
                sync()
                prefill = time.perf_counter() - start
                logits = out[0] if isinstance(out, tuple) else out
                ids.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
                token = ids[-1]
            for pos in range(len(prompt) if whole else 0, len(prompt) + steps - 1):
                tokens, positions = t([[token]]), t([pos])
                start = time.perf_counter()
                out = model(tokens, positions, *extra)
                sync()
                elapsed = time.perf_counter() - start
                logits = out[0] if isinstance(out, tuple) else out
                row = logits.reshape(-1, logits.shape[-1])[-1]
                if pos < len(prompt):
                    prefill += elapsed
                else:
                    decode.append(elapsed)
                if pos + 1 < len(prompt):
                    token = prompt[pos + 1]
                else:
                    token = int(row.argmax())
                    ids.append(token)
            prefills.append(prefill)
    prefill = statistics.median(prefills)
    print(json.dumps({"generated_ids": ids, "prefill_ms": prefill * 1e3,
                      "decode_median_ms": statistics.median(decode) * 1e3,
                      "decode_min_ms": min(decode) * 1e3}))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
