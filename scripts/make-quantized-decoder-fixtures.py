"""A weight-only quantized decoder for the GPU check: scripts/make-decoder-fixtures.py's
Llama-style decoder (float32, MLP width 768) with torchao's
IntxWeightOnlyConfig(int4, PerGroup(32)) on its linear layers (which a CUDA delegate runs as
etc::weight_only_linear over the packed weights) and its token embedding. Written as make-decoder-fixtures.py writes
its decoders (model.pt2, prompt.npy, expected_ids.npy: PyTorch eager's greedy ids, meta.json
with the step count), for scripts/export-decoders.sh.

    make-quantized-decoder-fixtures.py OUT

(Cached by test/torch/fixtures.sh under this script's hash: a change to the decoder in
make-decoder-fixtures.py that should reach this fixture needs a change here too.)
"""
import importlib.util
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PROMPT, STEPS = [1, 17, 342, 99, 5, 811], 24


def decoders():
    spec = importlib.util.spec_from_file_location(
        "make_decoder_fixtures", os.path.join(HERE, "make-decoder-fixtures.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(fixtures):
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup
    torch.manual_seed(0)
    model = fixtures.LlamaDecoder(hidden=768).eval()  # 768: a multiple of the groups
    # The linear layers and the token embedding, as ExecuTorch's llama recipe quantizes them
    # (and as the device check's carry, under 50 MiB, prefers).
    quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)),
              filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear, torch.nn.Embedding)))
    return model


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    fixtures = decoders()
    out = os.path.join(argv[1], "llama_decoder_int4")
    os.makedirs(out, exist_ok=True)
    with torch.no_grad():
        ep = torch.export.export(build(fixtures), (torch.tensor([[PROMPT[0]]]), torch.tensor([0])))
        # Export ran the model once (its cache written): eager starts from a fresh one.
        ids, _, _ = fixtures.generate(build(fixtures), PROMPT, STEPS, [])
    torch.export.save(ep, os.path.join(out, "model.pt2"))
    np.save(os.path.join(out, "prompt.npy"), np.array(PROMPT, dtype=np.int64))
    np.save(os.path.join(out, "expected_ids.npy"), np.array(ids, dtype=np.int64))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"name": "llama_decoder_int4", "torch": torch.__version__, "steps": STEPS,
                   "prompt_tokens": len(PROMPT)}, f, indent=1, sort_keys=True)
        f.write("\n")
    print("make-quantized-decoder-fixtures: llama_decoder_int4", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
