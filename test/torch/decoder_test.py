"""Decoders with state, token by token: etc against PyTorch eager and ExecuTorch's runtime.

For every model of scripts/make-decoder-fixtures.py, in both forms (model.pt2: in-place
buffer writes; model.core.pt2: buffers_to_mutate):
  - `etc export --target cpu`, then `etc run --prompt --steps`: the generated ids equal
    PyTorch eager's, the logits of every call and the last call's other outputs (a call
    counter held in state) match;
  - the program's state is what ExecuTorch writes: planned tensors with their initial value
    in the mutable data segment (`etc inspect --format json`), and ExecuTorch's runtime
    loads etc's program and generates the same ids, first-step logits equal;
  - `--target cuda:0` partitions around the state and, run on the CPU runtime, gives the same
    ids (the delegate reads the cache through copies);
  - grouped-query attention with each kind of mask (the gqa_* single-call models) matches
    PyTorch;
  - bad calls exit 1 with a clear message: a prompt of floats, a sequence past the cache,
    generation on a program without state; `--steps` without `--prompt` is a usage error (2).

  decoder_test.py ETC FIXTURES
"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

warnings.filterwarnings("ignore")
etc, fixtures = sys.argv[1], sys.argv[2]
failures = 0


def check(ok, label, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + label + (f": {detail}" if detail else ""))
    if not ok:
        failures += 1


def run(*args):
    return subprocess.run([etc, *args], capture_output=True, text=True)


def executorch_generate(pte, prompt, steps, extra, whole_prompt=False):
    """ExecuTorch's runtime generating with etc's program: the prompt one token per call, or
    (a dynamic-bound program) in one call."""
    import torch
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    ids, rows = [], []
    if whole_prompt:
        out = method.execute([torch.tensor([prompt]), torch.arange(len(prompt)), *extra])
        rows += list(out[0].reshape(-1, out[0].shape[-1]).numpy().copy())
        ids.append(int(rows[-1].argmax()))
    pos = len(prompt) if whole_prompt else 0
    token = ids[-1] if whole_prompt else prompt[0]
    while pos < len(prompt) + steps - 1:
        out = method.execute([torch.tensor([[token]]), torch.tensor([pos]), *extra])
        row = out[0].reshape(-1, out[0].shape[-1])[-1].numpy().copy()
        rows.append(row)
        if pos + 1 < len(prompt):
            token = prompt[pos + 1]
        else:
            token = int(row.argmax())
            ids.append(token)
        pos += 1
    return ids, np.stack(rows)


with tempfile.TemporaryDirectory() as tmp:
    for name in sorted(n for n in os.listdir(fixtures) if os.path.isdir(os.path.join(fixtures, n))):
        d = os.path.join(fixtures, name)
        meta = json.load(open(os.path.join(d, "meta.json")))
        if meta.get("single"):  # one call: grouped-query attention with a kind of mask
            inputs = sorted(f for f in os.listdir(d) if f.startswith("input_"))
            want = np.load(os.path.join(d, "expected_0.npy"))
            for form in ["model", "model.core"]:
                pte = os.path.join(tmp, f"{name}.{form}.pte")
                r = run("export", os.path.join(d, form + ".pt2"), "-o", pte, "--target", "cpu")
                args = [a for f in inputs for a in ("--input", f"{f[6:-4]}={os.path.join(d, f)}")]
                r2 = run("run", pte, "--device", "cpu", "--output-dir", pte + ".out", *args) \
                    if r.returncode == 0 else r
                if r2.returncode != 0:
                    check(False, f"{name} ({form}) exports and runs", (r.stderr + r2.stderr).strip())
                    continue
                got = np.load(os.path.join(pte + ".out", "output_0.npy"))
                err = float(np.abs(got - want).max()) if got.shape == want.shape else np.inf
                check(err <= 1e-5, f"{name} ({form}) matches PyTorch", f"max abs error {err:.3g}")
            continue
        steps = meta["steps"]
        prompt = np.load(os.path.join(d, "prompt.npy")).tolist()
        want_ids = np.load(os.path.join(d, "expected_ids.npy"))
        want_logits = np.load(os.path.join(d, "expected_logits.npy"))
        extra_files = sorted(f for f in os.listdir(d) if f.startswith("input_"))
        extra_args = []
        for f in extra_files:
            extra_args += ["--input", f"{f[6:-4]}={os.path.join(d, f)}"]
        tol = 1e-4 * max(1.0, float(np.abs(want_logits).max()))
        for form in ["model", "model.core"]:
            label = f"{name} ({form})"
            pte = os.path.join(tmp, f"{name}.{form}.pte")
            r = run("export", os.path.join(d, form + ".pt2"), "-o", pte, "--target", "cpu")
            if r.returncode != 0:
                check(False, f"{label} exports", r.stderr.strip())
                continue
            out = os.path.join(tmp, f"out.{name}.{form}")
            r = run("run", pte, "--device", "cpu", "--prompt", os.path.join(d, "prompt.npy"),
                    "--steps", str(steps), "--output-dir", out, *extra_args)
            if r.returncode != 0:
                check(False, f"{label} generates", r.stderr.strip())
                continue
            ids = np.load(os.path.join(out, "generated_ids.npy"))
            logits = np.load(os.path.join(out, "logits.npy"))
            check(ids.tolist() == want_ids.tolist(), f"{label}: {steps} greedy ids equal PyTorch eager's",
                  f"etc {ids.tolist()} eager {want_ids.tolist()}")
            bound = meta.get("sequence_bound")
            if bound:  # exported once; the whole prompt in one call
                check(f"after a {len(prompt)}-token prompt" in r.stdout and "(1 calls)" in r.stdout,
                      f"{label}: the prompt of {len(prompt)} tokens is one call (sequence dynamic in [1, {bound}])",
                      r.stdout.strip().splitlines()[-1])
            err = float(np.abs(logits - want_logits).max()) if logits.shape == want_logits.shape else np.inf
            check(err <= tol, f"{label}: logits of all {len(want_logits)} calls match",
                  f"max abs error {err:.3g} (tolerance {tol:.3g})")
            k = 1
            while os.path.exists(os.path.join(d, f"expected_out{k}.npy")):
                want = np.load(os.path.join(d, f"expected_out{k}.npy"))[-1]
                got = np.load(os.path.join(out, f"output_{k}.npy"))
                check(np.array_equal(got, want), f"{label}: output {k} after the last call (state)",
                      f"etc {got.tolist()} eager {want.tolist()}")
                k += 1

            # The state as ExecuTorch writes it: planned, its initial value in the mutable
            # segment, or named (ExtraTensorInfo's fully qualified name) when it starts as zeros,
            # as a KV cache does (no zeros in the file).
            dump = json.loads(run("inspect", pte, "--format", "json").stdout)
            plan = dump["plans"][0]
            states = [v for v in plan["values"] if v.get("type") == "Tensor" and
                      ("initial_state" in v or "fully_qualified_name" in v)]
            check(len(states) == len(meta["buffers_to_mutate"]),
                  f"{label}: every mutated buffer is planned state (an initial value, or zeros)",
                  f"{len(states)} state tensors, {len(meta['buffers_to_mutate'])} buffers mutated")
            check(all("allocation" in v for v in states), f"{label}: state tensors are planned")

            # ExecuTorch's runtime on etc's program.
            import torch
            extra = [torch.from_numpy(np.load(os.path.join(d, f))) for f in extra_files]
            try:
                et_ids, et_rows = executorch_generate(pte, prompt, steps, extra,
                                                      whole_prompt=bool(meta.get("sequence_bound")))
                first = float(np.abs(et_rows[0] - want_logits[0]).max())
                check(first <= tol and et_ids == want_ids.tolist(),
                      f"{label}: ExecuTorch's runtime runs etc's program: same ids, first-step logits",
                      f"first-step max abs error {first:.3g}, ids {et_ids}")
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                check(False, f"{label}: ExecuTorch's runtime runs etc's program", repr(e))

            # Partitioned for a GPU, run on the CPU runtime (host memory standing in for the
            # device's): the same tokens, and the state after the last call.
            cuda = os.path.join(tmp, f"{name}.{form}.cuda.pte")
            report = cuda + ".report.json"
            r = run("export", os.path.join(d, form + ".pt2"), "-o", cuda, "--target", "cuda:0",
                    "--report", report)
            r2 = run("run", cuda, "--device", "cpu", "--prompt", os.path.join(d, "prompt.npy"),
                     "--steps", str(steps), "--output-dir", out + ".cuda", *extra_args)
            ok = r.returncode == 0 and r2.returncode == 0
            got = np.load(os.path.join(out + ".cuda", "generated_ids.npy")).tolist() if ok else None
            check(ok and got == want_ids.tolist(), f"{label}: --target cuda:0 program, same ids",
                  (r.stderr + r2.stderr).strip() if not ok else "")
            k = 1
            while ok and os.path.exists(os.path.join(d, f"expected_out{k}.npy")):
                want = np.load(os.path.join(d, f"expected_out{k}.npy"))[-1]
                got = np.load(os.path.join(out + ".cuda", f"output_{k}.npy"))
                check(np.array_equal(got, want),
                      f"{label}: --target cuda:0 program, output {k} after the last call (state)",
                      f"etc {got.tolist()} eager {want.tolist()}")
                k += 1
            # Every op is delegated (the dynamic-bound ones too: the delegate resizes them) and
            # every mutated buffer stays on the GPU: updated in place, never copied.
            if ok:
                rep = json.load(open(report))
                check(rep["ops"]["delegated"] == rep["ops"]["total"] and
                      len(rep["partitions"]) <= 2,
                      f"{label}: --target cuda:0 delegates every op",
                      f"{rep['ops']['delegated']} of {rep['ops']['total']} in "
                      f"{len(rep['partitions'])} partitions; host: {rep['ops']['host'][:3]}")
                on_device = {b["value"] for b in rep["boundary"]
                             if b["reason"].startswith("state updated in place")}
                state_copies = [c for c in rep["copies"]["list"] if c["source"] in on_device or
                                "state" in c["cause"]]
                dump = json.loads(run("inspect", cuda, "--format", "json").stdout)
                device_states = [v for v in dump["plans"][0]["values"]
                                 if v.get("type") == "Tensor" and v.get("device") == "cuda:0" and
                                 ("initial_state" in v or "fully_qualified_name" in v)]
                check(len(on_device) == len(meta["buffers_to_mutate"]) and not state_copies and
                      len(device_states) == len(on_device),
                      f"{label}: --target cuda:0 keeps every mutated buffer on the GPU, no copies",
                      f"{sorted(on_device)} on the device, {len(device_states)} planned there; "
                      f"state copies {state_copies}")

    # Bad calls, on the Llama-style decoder.
    d = os.path.join(fixtures, "llama_decoder")
    pte = os.path.join(tmp, "llama_decoder.model.core.pte")
    floats = os.path.join(tmp, "floats.npy")
    np.save(floats, np.array([1.0, 2.0], np.float32))
    r = run("run", pte, "--prompt", floats, "--steps", "2")
    check(r.returncode == 1 and "the prompt must be int64 or int32 token ids" in r.stderr,
          "a prompt of floats: exit 1, named", r.stderr.strip())
    cache = json.load(open(os.path.join(d, "meta.json")))["buffers"]["layers.0.attn.k_cache"][2]
    long = os.path.join(tmp, "long.npy")
    np.save(long, np.arange(cache - 2, dtype=np.int64) % 100)
    r = run("run", pte, "--prompt", long, "--steps", "8")
    check(r.returncode == 1 and f"at position {cache}" in r.stderr and "out of range" in r.stderr,
          "a sequence past the cache: exit 1 at the first position past it", r.stderr.strip())
    r = run("run", pte, "--steps", "2")
    check(r.returncode == 2 and "--steps needs --prompt" in r.stderr, "--steps without --prompt: exit 2",
          r.stderr.strip())
    r = run("run", pte, "--prompt", os.path.join(d, "prompt.npy"), "--steps", "2", "--input",
            "0=" + floats)
    check(r.returncode == 2 and "come from --prompt" in r.stderr, "--input for the token ids: exit 2",
          r.stderr.strip())

    # The dynamic-bound decoder: inputs past the bound, and a prompt longer than it.
    d = os.path.join(fixtures, "llama_decoder_dynamic")
    pte = os.path.join(tmp, "llama_decoder_dynamic.model.pte")
    bound = json.load(open(os.path.join(d, "meta.json")))["sequence_bound"]
    big_ids, big_pos = os.path.join(tmp, "big_ids.npy"), os.path.join(tmp, "big_pos.npy")
    np.save(big_ids, np.zeros((1, bound + 1), np.int64))
    np.save(big_pos, np.arange(bound + 1, dtype=np.int64))
    r = run("run", pte, "--device", "cpu", "--input", "0=" + big_ids, "--input", "1=" + big_pos)
    check(r.returncode == 1 and f"int64[1, {bound}] or smaller (dynamic-bound)" in r.stderr,
          f"a call of {bound + 1} tokens, past the bound: exit 1, named", r.stderr.strip())
    small_ids, small_pos = os.path.join(tmp, "small_ids.npy"), os.path.join(tmp, "small_pos.npy")
    np.save(small_ids, np.array([[1, 17, 342]], np.int64))
    np.save(small_pos, np.arange(3, dtype=np.int64))
    r = run("run", pte, "--device", "cpu", "--input", "0=" + small_ids, "--input", "1=" + small_pos,
            "--output-dir", os.path.join(tmp, "small"))
    got = np.load(os.path.join(tmp, "small", "output_0.npy")) if r.returncode == 0 else None
    want = np.load(os.path.join(d, "expected_logits.npy"))[:3]
    check(got is not None and got.shape == (1, 3, want.shape[1]) and
          float(np.abs(got[0] - want).max()) <= 1e-4 * max(1.0, float(np.abs(want).max())),
          "etc run with a 3-token input: output [1, 3, vocab], PyTorch's logits", r.stderr.strip())
    # --input-shape on one input fixes the symbol for every input it sizes: a static program.
    fixed = os.path.join(tmp, "fixed.pte")
    r = run("export", os.path.join(d, "model.pt2"), "-o", fixed, "--target", "cpu",
            "--input-shape", "input_pos=7")
    dump = json.loads(run("inspect", fixed, "--format", "json").stdout) if r.returncode == 0 else None
    sizes = [dump["plans"][0]["values"][i]["sizes"] for i in dump["plans"][0]["inputs"]] if dump else None
    check(sizes == [[1, 7], [7]] and "dynamic dims" not in r.stderr,
          "--input-shape input_pos=7 fixes the tokens' length too (static)", str(sizes) + r.stderr.strip())
    # ExecuTorch's own program for the dynamic decoder (to_edge -> to_executorch: sym_size,
    # et_view, mutable buffers without initial values) generates in etc as in PyTorch.
    import torch
    from executorch.exir import to_edge
    et_pte = os.path.join(tmp, "et_dynamic.pte")
    with open(et_pte, "wb") as f:
        f.write(to_edge(torch.export.load(os.path.join(d, "model.pt2"))).to_executorch().buffer)
    out = os.path.join(tmp, "et_dynamic.out")
    r = run("run", et_pte, "--device", "cpu", "--prompt", os.path.join(d, "prompt.npy"),
            "--steps", "24", "--output-dir", out)
    ok = r.returncode == 0 and "(1 calls)" in r.stdout
    if ok:
        ids = np.load(os.path.join(out, "generated_ids.npy"))
        err = float(np.abs(np.load(os.path.join(out, "logits.npy")) -
                           np.load(os.path.join(d, "expected_logits.npy"))).max())
        ok = ids.tolist() == np.load(os.path.join(d, "expected_ids.npy")).tolist() and err <= 1e-4
    check(ok, "ExecuTorch's own dynamic decoder program generates in etc (prompt in one call): "
          "PyTorch's ids and logits", (r.stdout + r.stderr).strip().splitlines()[-1] if not ok else "")
    long = os.path.join(tmp, "long_prompt.npy")
    np.save(long, (np.arange(bound + 20) * 7 % 1000).astype(np.int64))
    r = run("run", pte, "--device", "cpu", "--prompt", long, "--steps", "4")
    check(r.returncode == 0 and "(2 calls)" in r.stdout,
          f"a prompt of {bound + 20} tokens goes in calls of at most {bound}", (r.stdout + r.stderr).strip())

print(f"decoder_test: {failures} failure(s)")
sys.exit(1 if failures else 0)
