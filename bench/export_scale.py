"""Export at scale: Llama-style decoders of 852M and 1.57B parameters (random bf16
weights; scripts/make-decoder-fixtures.py's LlamaDecoder, one token a call, a 256-row KV
cache) and the smaller one with torchao's int4 weight-only config (groups of 128, the linear layers
and the token embedding), written as
torch.export archives; then `etc export` (--target cuda:0 and cpu) and ExecuTorch's own
lowering (to_edge + to_executorch, portable kernels) of the same archives, each in its own
process under /usr/bin/time: wall seconds and peak RSS against the weights' bytes.

    export_scale.py ETC WORK [--executorch-all]

ExecuTorch lowers the 852M bf16 program only (it takes 40-50 s and 3.5x the weights' bytes;
--executorch-all lowers every program)."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "decoders", os.path.join(ROOT, "scripts", "make-decoder-fixtures.py"))
decoders = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decoders)

# vocab, dim, layers, heads, kv_heads, hidden: 852M parameters (1.7 GB in bf16), and twice
# the layers (1.57B).
SIZES = {"small": dict(vocab=32000, dim=2048, layers=16, heads=16, kv_heads=4, hidden=5632),
         "large": dict(vocab=32000, dim=2048, layers=32, heads=16, kv_heads=4, hidden=5632)}


def make(work, name, cfg, int4=False):
    path = os.path.join(work, name + ".pt2")
    if os.path.exists(path):
        return path
    torch.manual_seed(0)
    with torch.no_grad():
        model = decoders.LlamaDecoder(max_seq=256, **cfg).eval().to(torch.bfloat16)
        for p in model.parameters():  # small random weights: a program, not a language model
            p.normal_(0, 0.02)
        if int4:
            from torchao.quantization import IntxWeightOnlyConfig, quantize_
            from torchao.quantization.granularity import PerGroup
            # The linear layers and the token embedding, as ExecuTorch's llama recipe
            # quantizes them (--embedding-quantize).
            quantize_(model, IntxWeightOnlyConfig(weight_dtype=torch.int4,
                                                  granularity=PerGroup(128)),
                      filter_fn=lambda m, fqn: isinstance(m, (torch.nn.Linear,
                                                              torch.nn.Embedding)))
        ep = torch.export.export(model, (torch.tensor([[1]]), torch.tensor([0])))
    torch.export.save(ep, path)
    params = sum(p.numel() for p in model.parameters())
    with open(path + ".json", "w") as f:
        json.dump({"parameters": params}, f)
    return path


def weights_bytes(pt2):
    import zipfile
    z = zipfile.ZipFile(pt2)
    return sum(i.file_size for i in z.infolist()
               if "/data/weights/" in i.filename or "/data/constants/" in i.filename)


def timed(cmd):
    """(seconds, peak RSS bytes) of a command run under /usr/bin/time, after the writes of
    the runs before have reached the disk (else their write-back slows this one's writes:
    on the 2-core VM a 1.6 GB write takes 1.7 to 11 s depending on what is still dirty)."""
    os.sync()
    t = subprocess.run(["/usr/bin/time", "-f", "%e %M"] + cmd, capture_output=True, text=True)
    if t.returncode != 0:
        sys.stderr.write(t.stdout + t.stderr)
        raise SystemExit("export_scale: %s failed" % " ".join(cmd[:3]))
    secs, kib = t.stderr.strip().splitlines()[-1].split()
    return float(secs), int(kib) * 1024


ET_LOWER = r"""
import sys, torch
from executorch.exir import to_edge
ep = torch.export.load(sys.argv[1])
prog = to_edge(ep).to_executorch()
with open(sys.argv[2], "wb") as f:
    prog.write_to_file(f)
"""


def main():
    etc, work = sys.argv[1], sys.argv[2]
    et_all = "--executorch-all" in sys.argv
    os.makedirs(work, exist_ok=True)
    sizes = {}
    programs = [("bf16", make(work, "llama_small_bf16", SIZES["small"])),
                ("int4 g128", make(work, "llama_small_int4", SIZES["small"], int4=True)),
                ("bf16", make(work, "llama_large_bf16", SIZES["large"]))]
    print("%-11s %7s %9s %-32s %8s %9s %8s %9s" % ("program", "params", "weights", "exporter",
                                                    "seconds", "peak RSS", "RSS/wts", ".pte"))
    for label, pt2 in programs:
        params = json.load(open(pt2 + ".json"))["parameters"]
        wb = weights_bytes(pt2)
        runs = [("etc --target cuda:0", [etc, "export", pt2, "-o", "OUT", "--target", "cuda:0"]),
                ("etc --target cpu", [etc, "export", pt2, "-o", "OUT", "--target", "cpu"])]
        if et_all or pt2.endswith("llama_small_bf16.pt2"):
            runs.append(("ExecuTorch to_edge+to_executorch",
                         [sys.executable, "-c", ET_LOWER, pt2, "OUT"]))
        for who, cmd in runs:
            out = os.path.join(work, "out.pte")
            cmd = [out if c == "OUT" else c for c in cmd]
            secs, rss = timed(cmd)
            size = os.path.getsize(out)
            if who == "etc --target cuda:0":
                # The floor: copying the same bytes to a new file in the same folder (no
                # export, only the write), after the same sync.
                os.sync()
                t = time.perf_counter()
                shutil.copyfile(out, out + ".copy")
                floor = time.perf_counter() - t
                os.remove(out + ".copy")
                print("%-11s %6.2fB %8.2fG %-32s %8.2f" % (
                    label, params / 1e9, wb / 2**30, "copying the .pte (the disk)", floor))
            os.remove(out)
            print("%-11s %6.2fB %8.2fG %-32s %8.2f %8.2fG %8.2fx %8.2fG" % (
                label, params / 1e9, wb / 2**30, who, secs, rss / 2**30, rss / wb, size / 2**30),
                flush=True)
            sizes[(os.path.basename(pt2), who)] = size
    for target in ("etc --target cuda:0", "etc --target cpu"):
        ratio = sizes[("llama_small_int4.pt2", target)] / sizes[("llama_small_bf16.pt2", target)]
        print("int4 g128 .pte / bf16 .pte (%s): %.3f" % (target, ratio))


main()
