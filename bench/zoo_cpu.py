"""zoo_cpu: etc against ONNX Runtime, ExecuTorch+XNNPACK and AOTInductor on the CPU, model by
model, side by side in one run (issue 39; bench/zoo_cpu.sh runs it).

For each model - torchvision's (random weights, seed 0, one image of SIZE x SIZE) and
transformers encoders and a decoder's prefill at deployed sizes (HF_MODELS) -:
  prepare (cached in WORK/<model>/, so a second run only times):
    - torch.export.export -> model.pt2 (what every engine starts from), the input;
    - etc:       `etc export model.pt2 --target cpu`, timed (the whole process);
    - ONNX Runtime: torch.onnx.export (dynamo) of the same module -> model.onnx;
    - ExecuTorch: to_edge_transform_and_lower(XnnpackPartitioner) -> xnnpack.pte, timed;
      the ops it leaves outside the delegate (run by portable kernels) are listed;
    - AOTInductor: torch._inductor.aoti_compile_and_package -> aoti.pt2, timed;
  time (at each thread count, ROUNDS rounds, the engines alternating within a round in an
  order reversed every other round, each measurement in its own process: WARMUP untimed
  calls, then the median of ITERATIONS):
    - etc: `etc run --threads T --json`: h2d + compute + d2h medians;
    - ONNX Runtime: InferenceSession.run, intra_op_num_threads = T;
    - ExecuTorch: method.execute on xnnpack.pte, its thread pool at T (bench/executorch_runtime.py);
    - AOTInductor: the loaded package's call, torch and OpenMP at T threads.
  Each ratio is etc / reference per round, and the table shows the median of the rounds.

Prints the tables (markdown) and a summary line per reference: the median and the worst
ratio. Outputs are checked against PyTorch eager (etc and each reference) so that a fast
wrong answer cannot pass as a win.

  zoo_cpu.py ETC WORK [--models a,b,...] [--size 224] [--threads 1,2] [--rounds 3]
             [--warmup 3] [--iterations 20] [--prepare-only]
  zoo_cpu.py ETC WORK --layers [--models a,b] [--threads 1] [--runs 40]   (bench/zoo_layers.py)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TORCH_LOGS", "-all")
HERE = os.path.dirname(os.path.abspath(__file__))



# transformers models at the sizes people deploy (random weights from the config classes'
# defaults, seed 0; nothing downloaded): the encoders' last hidden state, and a decoder's
# prefill (the logits of the last position after a 64-token prompt, no cache).
HF_MODELS = {
    # BERT-base: 12 layers, hidden 768, 128 tokens.
    "bert_base": ("bert", {}, "text", 128),
    # DistilBERT-base: 6 layers, hidden 768, 128 tokens.
    "distilbert_base": ("distilbert", {}, "text", 128),
    # Whisper tiny's encoder: 4 layers, d_model 384, 30 s of 80-bin log-mel.
    "whisper_tiny_encoder": ("whisper", dict(d_model=384, encoder_layers=4, decoder_layers=4,
                                             encoder_attention_heads=6, decoder_attention_heads=6,
                                             encoder_ffn_dim=1536, decoder_ffn_dim=1536),
                             "mel", 3000),
    # SmolLM-135M's shape (Llama: 30 layers, hidden 576, 9 heads, 3 KV heads, vocab 49152).
    "llama_135m_prefill": ("llama", dict(hidden_size=576, intermediate_size=1536,
                                         num_hidden_layers=30, num_attention_heads=9,
                                         num_key_value_heads=3, vocab_size=49152,
                                         max_position_embeddings=2048, rope_theta=10000.0,
                                         tie_word_embeddings=True), "prefill", 64),
}


# torchvision's classification models, one or two per family (the zoo's CI set, as
# scripts/make-zoo.py), and two segmentation models.
DEFAULT_MODELS = [
    "resnet18", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
    "mnasnet0_5", "regnet_y_400mf", "regnet_x_400mf", "shufflenet_v2_x0_5", "squeezenet1_1",
    "densenet121", "googlenet", "resnext50_32x4d", "convnext_tiny", "vit_b_32",
    "lraspp_mobilenet_v3_large",
] + list(HF_MODELS)


def build_hf(name):
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    model_type, kwargs, kind, length = HF_MODELS[name]
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **kwargs)

    class Encoder(torch.nn.Module):  # transformers' models return a ModelOutput
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x).last_hidden_state

    class Prefill(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, use_cache=False, logits_to_keep=1).logits

    if kind == "prefill":
        model = Prefill(AutoModelForCausalLM.from_config(config))
        x = torch.randint(3, config.vocab_size, (1, length))
    elif kind == "mel":
        model = Encoder(AutoModel.from_config(config).get_encoder())
        x = torch.randn(1, config.num_mel_bins, length)
    else:
        model = Encoder(AutoModel.from_config(config))
        x = torch.randint(3, config.vocab_size, (1, length))
    return model.eval(), x


def build(name, size):
    import torch
    import torchvision

    if name in HF_MODELS:
        return build_hf(name)
    torch.manual_seed(0)
    if name in torchvision.models.list_models(module=torchvision.models.segmentation):
        inner = torchvision.models.get_model(name, weights=None, weights_backbone=None).eval()

        class Out(torch.nn.Module):  # the segmentation models return a dict
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, x):
                return self.m(x)["out"]

        model = Out(inner).eval()
    else:
        kwargs = {"image_size": size} if name.startswith("vit_") else {}
        model = torchvision.models.get_model(name, weights=None, **kwargs).eval()
    return model, torch.randn(1, 3, size, size)


def prepare(etc, name, size, work):
    import numpy as np
    import torch

    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    meta_path = os.path.join(d, "meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    if meta.get("size") != size:
        meta = {"size": size}
    model, x = build(name, size)
    if not os.path.exists(os.path.join(d, "model.pt2")) or "expected" not in meta:
        with torch.no_grad():
            ep = torch.export.export(model, (x,))
            torch.export.save(ep, os.path.join(d, "model.pt2"))
            np.save(os.path.join(d, "input_0.npy"), x.numpy())
            np.save(os.path.join(d, "expected.npy"), model(x).numpy())
        meta["expected"] = True
    x = torch.from_numpy(np.load(os.path.join(d, "input_0.npy")))
    # etc: the whole export process, best of 3.
    times = []
    for _ in range(3):
        os.sync()
        t = time.perf_counter()
        r = subprocess.run([etc, "export", os.path.join(d, "model.pt2"), "-o", os.path.join(d, "etc.pte"),
                            "--target", "cpu"], capture_output=True, text=True)
        times.append(time.perf_counter() - t)
        if r.returncode != 0:
            meta["etc_error"] = r.stderr.strip().splitlines()[-1]
            break
    meta["etc_export_s"] = min(times)
    if not os.path.exists(os.path.join(d, "model.onnx")):
        try:
            torch.onnx.export(model, (x,), os.path.join(d, "model.onnx"), dynamo=True, verbose=False)
        except Exception as e:  # noqa: BLE001 - recorded in the table
            meta["onnx_error"] = str(e).splitlines()[0][:120]
    if not os.path.exists(os.path.join(d, "xnnpack.pte")):
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        try:
            t = time.perf_counter()
            ep = torch.export.load(os.path.join(d, "model.pt2"))
            lowered = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
            prog = lowered.to_executorch()
            with open(os.path.join(d, "xnnpack.pte"), "wb") as f:
                f.write(prog.buffer)
            meta["xnnpack_lower_s"] = time.perf_counter() - t
            left = {}
            for n in lowered.exported_program().graph.nodes:
                if n.op == "call_function" and "executorch_call_delegate" not in str(n.target) \
                        and "getitem" not in str(n.target) and "alloc" not in str(n.target):
                    k = str(n.target).replace("aten.", "").replace(".default", "")
                    left[k] = left.get(k, 0) + 1
            meta["xnnpack_outside"] = left
        except Exception as e:  # noqa: BLE001
            meta["xnnpack_error"] = str(e).splitlines()[0][:120]
    if not os.path.exists(os.path.join(d, "aoti.pt2")):
        try:
            t = time.perf_counter()
            ep = torch.export.load(os.path.join(d, "model.pt2"))
            torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(d, "aoti.pt2"))
            meta["aoti_compile_s"] = time.perf_counter() - t
        except Exception as e:  # noqa: BLE001
            meta["aoti_error"] = str(e).splitlines()[0][:120]
    json.dump(meta, open(meta_path, "w"), indent=1)
    return d, meta


def run_child(kind, d, threads, warmup, iterations, etc=None):
    """One measurement in its own process: (median ms, max abs error against eager) or an error."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    if kind == "etc":
        r = subprocess.run([etc, "run", os.path.join(d, "etc.pte"), "--device", "cpu", "--threads", str(threads),
                            "--input", "0=" + os.path.join(d, "input_0.npy"), "--warmup", str(warmup),
                            "--iterations", str(iterations), "--json", "--output-dir", os.path.join(d, "etc.out")],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
        t = json.loads(r.stdout)["timing_ms"]
        import numpy as np
        got = np.load(os.path.join(d, "etc.out", "output_0.npy"))
        want = np.load(os.path.join(d, "expected.npy"))
        return (t["h2d_median"] + t["compute_median"] + t["d2h_median"],
                float(np.abs(got.astype(np.float64) - want).max())), None
    r = subprocess.run([sys.executable, __file__, "_child", kind, d, str(threads), str(warmup), str(iterations)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return None, lines[-1][:120] if lines else "failed"
    ms, err = r.stdout.strip().splitlines()[-1].split()
    return (float(ms), float(err)), None


def child(kind, d, threads, warmup, iterations):
    import numpy as np

    x = np.load(os.path.join(d, "input_0.npy"))
    want = np.load(os.path.join(d, "expected.npy"))
    if kind == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        call = lambda: s.run(None, {name: x})[0]  # noqa: E731
    elif kind == "xnnpack":
        import torch
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        portable_lib._unsafe_reset_threadpool(threads)
        torch.set_num_threads(threads)
        method = Runtime.get().load_program(os.path.join(d, "xnnpack.pte")).load_method("forward")
        args = [torch.from_numpy(x)]
        call = lambda: method.execute(args)[0].numpy()  # noqa: E731
    else:  # aoti
        import torch

        torch.set_num_threads(threads)
        runner = torch._inductor.aoti_load_package(os.path.join(d, "aoti.pt2"))
        tx = torch.from_numpy(x)

        def call():
            with torch.no_grad():
                out = runner(tx)
            return (out[0] if isinstance(out, (list, tuple)) else out).numpy()
    out = None
    for _ in range(warmup):
        out = call()
    times = []
    for _ in range(iterations):
        t = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - t)
    err = float(np.abs(np.asarray(out, np.float64) - want).max())
    print(f"{statistics.median(times) * 1e3:.4f} {err:.3g}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
        return
    if "--layers" in sys.argv:  # layer by layer against the references' profilers instead
        sys.argv.remove("--layers")
        sys.path.insert(0, HERE)
        import zoo_layers

        zoo_layers.main()
        return
    p = argparse.ArgumentParser()
    p.add_argument("etc")
    p.add_argument("work")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--prepare-only", action="store_true", help="export and compile, time nothing")
    a = p.parse_args()
    refs = ["ort", "xnnpack", "aoti"]
    label = {"ort": "ONNX Runtime", "xnnpack": "ExecuTorch+XNNPACK", "aoti": "AOTInductor"}
    prepared = []
    for name in a.models.split(","):
        t = time.perf_counter()
        d, meta = prepare(a.etc, name, a.size, a.work)
        print(f"prepared {name} ({time.perf_counter() - t:.0f} s)", file=sys.stderr, flush=True)
        prepared.append((name, d, meta))
    if a.prepare_only:
        return
    ratios = {(r, th): [] for r in refs for th in a.threads.split(",")}
    for th in [int(t) for t in a.threads.split(",")]:
        print(f"\n### {th} thread{'s' if th > 1 else ''}, {a.size}x{a.size}, median of {a.rounds} rounds\n")
        print("| model | etc ms | " + " | ".join(f"{label[r]} ms (etc / it)" for r in refs) +
              " | max abs error vs eager (etc; refs) |")
        print("|---|---|" + "---|" * len(refs) + "---|")
        for name, d, meta in prepared:
            per = {k: [] for k in ["etc"] + refs}
            errors, err_abs = {}, {}
            for rnd in range(a.rounds):
                # The order reversed every other round: on this VM's drifting speed a fixed
                # order favours whoever runs later (or earlier) in every round alike.
                order = ["etc"] + refs
                for kind in order if rnd % 2 == 0 else order[::-1]:
                    if kind in errors:
                        continue
                    res, why = run_child(kind, d, th, a.warmup, a.iterations, etc=a.etc)
                    if res is None:
                        errors[kind] = why
                    else:
                        per[kind].append(res[0])
                        err_abs[kind] = res[1]
            cells = []
            etc_ms = statistics.median(per["etc"]) if per["etc"] else None
            for r in refs:
                if not per[r] or etc_ms is None:
                    cells.append(f"— ({errors.get(r, errors.get('etc', ''))[:60]})")
                    continue
                round_ratios = [e / o for e, o in zip(per["etc"], per[r])]
                ratio = statistics.median(round_ratios)
                ratios[(r, str(th))].append((ratio, name))
                cells.append(f"{statistics.median(per[r]):.2f} ({ratio:.2f})")
            errs = "; ".join(f"{err_abs[k]:.2g}" for k in ["etc"] + refs if k in err_abs)
            etc_cell = f"{etc_ms:.2f}" if etc_ms is not None else f"— ({errors.get('etc', '')[:60]})"
            print(f"| {name} | {etc_cell} | " + " | ".join(cells) + f" | {errs} |", flush=True)
    print("\n### summary: etc / reference (median over the models; worst)\n")
    for (r, th), v in ratios.items():
        if v:
            worst = max(v)
            print(f"- {label[r]}, {th} thread(s): median {statistics.median([x for x, _ in v]):.2f}, "
                  f"worst {worst[0]:.2f} ({worst[1]}), {len(v)} models")
    print("\n### export: etc's export (process) against ExecuTorch's XNNPACK lowering and AOTInductor's "
          "compile (seconds)\n")
    print("| model | etc export | XNNPACK lowering | AOTInductor compile | ops XNNPACK leaves to portable kernels |")
    print("|---|---|---|---|---|")
    for name, d, meta in prepared:
        outside = ", ".join(f"{k} x{v}" for k, v in sorted(meta.get("xnnpack_outside", {}).items())
                            if "alloc" not in k) or "none"
        fmt = lambda k: f"{meta[k]:.2f}" if k in meta else "—"  # noqa: E731
        print(f"| {name} | {fmt('etc_export_s')} | {fmt('xnnpack_lower_s')} | {fmt('aoti_compile_s')} | {outside} |")


if __name__ == "__main__":
    main()
