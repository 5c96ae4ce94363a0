#!/usr/bin/env python3
"""The model zoos of scripts/make-zoo.py through etc, counted: each model in both forms
(model.pt2, the default export; model.core.pt2, after run_decompositions()) is exported with
--target cpu, run with `etc run`, and compared with PyTorch eager; the --target cuda:0 export
is made too and must delegate every op.

  zoo_test.py ETC ZOO [--family F ...] [--table FILE.md] [--min-pass FAMILY=N ...] [NAME ...]

A model with one input (torchvision's, transformers' encoders) is run on it and its output
compared with eager's; a decoder (transformers' causal LMs, with a static KV cache) generates
with `etc run --prompt prompt.npy --steps STEPS`: its greedy ids must be the eager wrapper's,
and its logits of every call must match eager's within the same tolerance.

A model ends in one of:
  pass         exported, run, and within tolerance of PyTorch eager (|etc - torch| <=
               RTOL |torch| + ATOL max|torch|, RTOL = ATOL = 1e-4: random weights, up to ~10^4
               products per output summed in another order than ATen's; a decoder: the same
               greedy ids, and its logits within that tolerance)
  missing ops  etc refused it at import naming operators it does not have (listed)
  unsupported  etc refused it for another named reason (shown)
  not exported PyTorch itself could not export the model (shown; not counted)
  FAIL         anything else: a crash, a wrong result (for a decoder: the first step whose
               id differs, and eager's margin between its top two logits there), a cuda:0
               export that leaves work on the host -- always a failure of this test
The summary gives pass/total per family and every missing operator with the models that
need it. Exit status 1 on any FAIL, or when a family passes fewer models than --min-pass
(the count recorded in test/torch/zoo_test.sh), else 0.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

RTOL = ATOL = 1e-4
FORMS = [("default", "model.pt2"), ("core", "model.core.pt2")]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def missing_ops(text):
    """The operator names of an "etc cannot import" error, or None for another error."""
    if "cannot import" not in text and "unsupported op" not in text:
        return None
    ops = re.findall(r"^\s+(aten\.[\w.]+|[\w]+\.[\w.]+) x\d+", text, re.M)
    ops += re.findall(r"unsupported op '([^']+)'", text)
    return sorted(set(ops)) or None


def within(got, want):
    """(ok, max abs error, scale) of got against want under the zoo's tolerance."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    err = np.abs(got - want)
    bad = err > RTOL * np.abs(want) + ATOL * scale
    ok = bool(np.all(np.isfinite(got) == np.isfinite(want)) and not np.any(bad))
    return ok, float(np.max(err)) if err.size else 0.0, scale


def compare_output(etc, d, cpu, work):
    """(status, detail) of a one-input model's etc run against PyTorch eager's output."""
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    r = run([etc, "run", cpu, "--device", "cpu", "--input", "0=" + os.path.join(d, "input_0.npy"),
             "--output-dir", out_dir])
    if r.returncode != 0:
        return "FAIL", f"etc run exited {r.returncode}: {(r.stdout + r.stderr)[-500:]}"
    got = np.load(os.path.join(out_dir, "output_0.npy"))
    want = np.load(os.path.join(d, "expected_0.npy"))
    if got.shape != want.shape:
        return "FAIL", f"output shape {list(got.shape)}, PyTorch {list(want.shape)}"
    ok, err, scale = within(got, want)
    if not ok:
        return "FAIL", f"max abs error {err:.3g} (scale {scale:.3g})"
    return "pass", f"max abs error {err:.2g} (scale {scale:.2g})"


def compare_generation(etc, d, cpu, work, meta):
    """(status, detail) of a decoder's greedy generation in etc against the eager wrapper's."""
    out_dir = os.path.join(work, "gen")
    steps = meta["steps"]
    r = run([etc, "run", cpu, "--device", "cpu", "--prompt", os.path.join(d, "prompt.npy"),
             "--steps", str(steps), "--output-dir", out_dir])
    if r.returncode != 0:
        return "FAIL", (f"etc run --prompt --steps {steps} exited {r.returncode}: "
                        f"{(r.stdout + r.stderr)[-500:]}")
    ids = np.load(os.path.join(out_dir, "generated_ids.npy")).reshape(-1).tolist()
    want_ids = np.load(os.path.join(d, "expected_ids.npy")).tolist()
    logits = np.load(os.path.join(out_dir, "logits.npy"))
    want = np.load(os.path.join(d, "expected_logits.npy"))
    if logits.shape != want.shape:
        return "FAIL", f"logits {list(logits.shape)}, PyTorch {list(want.shape)}"
    prompt = len(want) - steps + 1  # calls before the first generated id
    if ids != want_ids:
        k = next((i for i in range(min(len(ids), len(want_ids))) if ids[i] != want_ids[i]),
                 min(len(ids), len(want_ids)))
        row = want[prompt - 1 + k] if prompt - 1 + k < len(want) else None
        margin = float(np.diff(np.sort(row)[-2:])[0]) if row is not None else float("nan")
        _, err, scale = within(logits[:prompt + k], want[:prompt + k])
        also = ("; PyTorch running the exported program differs from eager too"
                if meta.get("exported_program_ids_match") is False else "")
        return "FAIL", (f"greedy ids differ from step {k + 1} of {steps}: etc {ids} eager "
                        f"{want_ids} (eager's top-two margin there {margin:.3g}; logits of "
                        f"calls 1-{prompt + k}, through that step's: max abs error {err:.3g}, "
                        f"scale {scale:.3g}{also})")
    ok, err, scale = within(logits, want)
    if not ok:
        return "FAIL", (f"{steps} greedy ids equal eager's, but the logits differ: max abs error "
                        f"{err:.3g} (scale {scale:.3g})")
    return "pass", (f"{steps} greedy ids = eager's; logits max abs error {err:.2g} "
                    f"(scale {scale:.2g})")


def check(etc, d, form, pte_file, work, meta):
    """(status, detail) of one model in one form."""
    path = os.path.join(d, pte_file)
    cpu = os.path.join(work, "cpu.pte")
    r = run([etc, "export", path, "-o", cpu, "--target", "cpu"])
    if r.returncode == 1:
        ops = missing_ops(r.stdout + r.stderr)
        if ops:
            return "missing ops", ops
        return "unsupported", (r.stdout + r.stderr).strip().splitlines()[-1][:300]
    if r.returncode != 0:
        return "FAIL", f"etc export --target cpu exited {r.returncode}: {(r.stdout + r.stderr)[-500:]}"
    if meta.get("kind") == "decoder":
        status, detail = compare_generation(etc, d, cpu, work, meta)
    else:
        status, detail = compare_output(etc, d, cpu, work)
    if status != "pass":
        return status, detail
    cuda = os.path.join(work, "cuda.pte")
    report = os.path.join(work, "report.json")
    r = run([etc, "export", path, "-o", cuda, "--target", "cuda:0", "--report", report])
    if r.returncode != 0:
        return "FAIL", f"etc export --target cuda:0 exited {r.returncode}: {(r.stdout + r.stderr)[-300:]}"
    host = json.load(open(report))["ops"]["host"]
    if host:
        return "FAIL", "cuda:0 leaves on the host: " + ", ".join(
            sorted({h["op"] + " (" + h["reason"] + ")" for h in host}))
    return "pass", detail


def main():
    p = argparse.ArgumentParser()
    p.add_argument("etc")
    p.add_argument("zoo")
    p.add_argument("--family", action="append", help="only this family (repeatable)")
    p.add_argument("--table")
    p.add_argument("--min-pass", action="append", default=[])
    p.add_argument("names", nargs="*")
    args = p.parse_intermixed_args()
    results = []  # (family, name, form, status, detail)
    families = sorted(f for f in os.listdir(args.zoo) if os.path.isdir(os.path.join(args.zoo, f))
                      and (not args.family or f in args.family))
    for family in args.family or []:
        if family not in families:
            print(f"FAIL {family}: no such family in {args.zoo}")
            return 1
    with tempfile.TemporaryDirectory() as work:
        for family in families:
            root = os.path.join(args.zoo, family)
            for name in sorted(os.listdir(root)):
                if args.names and name not in args.names:
                    continue
                d = os.path.join(root, name)
                meta = json.load(open(os.path.join(d, "meta.json")))
                if "export_error" in meta:
                    results.append((family, name, "-", "not exported", meta["export_error"]))
                    print(f"skip {family}/{name}: PyTorch: {meta['export_error']}", flush=True)
                    continue
                for form, pte_file in FORMS:
                    status, detail = check(args.etc, d, form, pte_file, work, meta)
                    results.append((family, name, form, status, detail))
                    shown = ", ".join(detail) if isinstance(detail, list) else detail
                    print(f"{status:12} {family}/{name} ({form}): {shown}", flush=True)

    # Per family: a model passes when both its forms pass.
    by_model = collections.defaultdict(list)
    for family, name, form, status, detail in results:
        by_model[(family, name)].append(status)
    counts = collections.defaultdict(lambda: [0, 0])
    for (family, name), statuses in by_model.items():
        if statuses == ["not exported"]:
            continue
        counts[family][1] += 1
        counts[family][0] += all(s == "pass" for s in statuses)
    needed = collections.defaultdict(set)
    for family, name, form, status, detail in results:
        if status == "missing ops":
            for op in detail:
                needed[op].add(name)
    failures = [r for r in results if r[3] == "FAIL"]
    print()
    for family, (passed, total) in sorted(counts.items()):
        print(f"zoo: {family}: {passed}/{total} models pass (both forms)")
    for op, models in sorted(needed.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"zoo: missing {op}: {len(models)} model(s): {', '.join(sorted(models))}")
    for f in failures:
        print(f"FAIL {f[0]}/{f[1]} ({f[2]}): {f[4]}")
    status = 1 if failures else 0
    for item in args.min_pass:
        family, n = item.split("=")
        if counts[family][0] < int(n):
            print(f"FAIL {family}: {counts[family][0]} models pass, the recorded minimum is {n}")
            status = 1
    if args.table:
        with open(args.table, "w") as f:
            f.write("| family | model | default export | Core ATen |\n|---|---|---|---|\n")
            rows = collections.defaultdict(dict)
            for family, name, form, st, detail in results:
                shown = ", ".join(detail) if isinstance(detail, list) else detail
                rows[(family, name)][form] = st if st == "pass" else f"{st}: {shown}"
            for (family, name), forms in sorted(rows.items()):
                f.write(f"| {family} | {name} | {forms.get('default', forms.get('-', ''))} | "
                        f"{forms.get('core', '')} |\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
