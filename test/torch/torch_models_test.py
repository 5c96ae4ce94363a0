#!/usr/bin/env python3
"""PyTorch programs through etc: each fixture of scripts/make-torch-fixtures.py, in both forms
(model.pt2: the default export; model.core.pt2: after run_decompositions()), is exported
with --target cpu and --target cuda:0, run with `etc run --device cpu`, and compared with
PyTorch eager's outputs.

  torch_models_test.py ETC FIXTURES [--table FILE.md] [NAME ...]

Tolerance (float32): |etc - torch| <= RTOL * |torch| + ATOL * max|torch| elementwise, with
RTOL = ATOL = 1e-4: relative to each element and to the output's scale (the networks here
accumulate up to ~10^4 products per output in a different order than ATen's kernels).
Integer outputs must be equal. The cuda:0 export must delegate every op but those the
fixture declares host-only (meta "cuda_host_ops": index_put with accumulate=True), put every
delegate input and output on cuda:0, and copy only the program's inputs in and its outputs
out. On a machine with a CUDA device the cuda:0 export also runs
with `--device cuda --verify`.

PyTorch's own ONNX export of the torchvision models and MiniLM (model.onnx, opset 18+) runs
in ONNX Runtime (from PyPI) and in etc (--target cpu and cuda:0, run on the CPU) on the same
inputs; etc must match ONNX Runtime within |etc - ort| <= 1e-4 + 1e-3 |ort| (the real-model
tolerance of test/onnx/models_test.sh).

ExecuTorch's runtime (from PyPI, program verification InternalConsistency) also loads and
runs each --target cpu export; its outputs must match etc's within the same tolerance, except
an output the fixture declares a known ExecuTorch defect for (meta "executorch_deviations":
output index -> the defect), which must still differ, and a program calling an operator the
fixture declares ExecuTorch's kernel library lacks (meta "executorch_missing_kernels"), which
it must still lack. The
other way round, etc runs ExecuTorch's own program for each model (model.et.pte: to_edge ->
to_executorch, portable operators) and must match PyTorch eager within the same tolerance,
programs with bounded dynamic shapes included (run at the example's sizes, under the bound),
except a program the fixture declares calls an operator ExecuTorch's kernel library lacks
(meta "executorch_program_missing"; it must still lack it).
A model exported with dynamic_shapes is also exported by etc without --input-shape (a bounded
dynamic program, planned at the upper bound) and run at the example's sizes.

Exit status: 0 when every model matches, 1 otherwise (each failure is listed).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ATOL = 1e-4
RTOL = 1e-4
FORMS = [("default", "model.pt2"), ("core", "model.core.pt2")]


def run(cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def compare(got, want):
    """(max abs difference, whether it is within the tolerance of `want`'s scale)."""
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = float(np.abs(want.astype(np.float64)).max(initial=0.0))
    # NaN compares false: a NaN where the reference has a number (or the reverse) is a
    # mismatch; NaN where the reference has NaN is not.
    bad = (diff > RTOL * np.abs(want.astype(np.float64)) + ATOL * scale) | (np.isnan(got) != np.isnan(want))
    return float(np.nanmax(diff, initial=0.0)), bad


def executorch_outputs(pte, input_files):
    """ExecuTorch's runtime on an etc-written program: its outputs, or an error string."""
    import torch
    from executorch.runtime import Runtime, Verification
    try:
        program = Runtime.get().load_program(pte, verification=Verification.InternalConsistency)
        method = program.load_method("forward")
        outs = method.execute([torch.from_numpy(np.load(f)) for f in input_files])
        return [o.detach().numpy() for o in outs]
    except Exception as e:  # ExecuTorch refusing etc's program is a finding, not a crash
        return f"{type(e).__name__}: {e}"


def executorch_operator_names():
    """The operators ExecuTorch's kernel library (its Python runtime's) registers."""
    from executorch.extension.pybindings import portable_lib
    return set(portable_lib._get_operator_names())


def check_executorch_program(etc, d, meta, inputs, expected, work, failures):
    """etc runs ExecuTorch's program for the model; returns the max abs error or a note."""
    name = meta["name"]
    if meta.get("executorch_refuses"):
        return f"not exported by ExecuTorch: {meta['executorch_refuses']}"
    missing = meta.get("executorch_program_missing", [])
    if missing:
        have = sorted(executorch_operator_names() & set(missing))
        if have:
            failures.append(f"{name}: ExecuTorch's kernel library now registers {have}: drop "
                            "them from EXECUTORCH_PROGRAM_MISSING (make-torch-fixtures.py)")
            return "FAIL"
        return f"not run: it calls {', '.join(missing)}, which ExecuTorch's kernel library lacks"
    pte = os.path.join(d, "model.et.pte")
    out_dir = os.path.join(work, f"{name}.et.out")
    cmd = [etc, "run", pte, "--device", "cpu", "--output-dir", out_dir]
    for i, f in enumerate(inputs):
        cmd += ["--input", f"{i}={os.path.join(d, f)}"]
    r = run(cmd)
    if r.returncode != 0:
        failures.append(f"{name}: etc cannot run ExecuTorch's program (exit {r.returncode}):\n{r.stdout}")
        return "FAIL"
    worst = 0.0
    for i, want in enumerate(expected):
        got = np.load(os.path.join(out_dir, f"output_{i}.npy"))
        if got.shape != want.shape:
            failures.append(f"{name}: ExecuTorch's program in etc: output {i} is {got.shape}")
            return "FAIL"
        err, bad = compare(got, want)
        worst = max(worst, err)
        if bad.any():
            failures.append(f"{name}: ExecuTorch's program in etc differs from PyTorch by up to "
                            f"{err:.3g}")
            return "FAIL"
    return worst


def program_summary(etc, pte):
    """Planned bytes and, per kernel operator, the argument counts its calls use."""
    r = run([etc, "inspect", pte, "--format", "json"])
    if r.returncode != 0:
        return None
    plan = json.loads(r.stdout)["plans"][0]
    args = {}
    for ins in plan["instructions"]:
        if ins["kind"] == "kernel":
            args.setdefault(ins["op"], set()).add(len(ins["args"]))
    return sum(b["size"] for b in plan["buffers"]), args


def compare_with_executorch_program(etc, et_pte, etc_pte, tag, failures):
    """etc's CPU program against ExecuTorch's for the same archive: planned bytes never
    above ExecuTorch's, and every operator both call takes the same arguments (ExecuTorch's
    kernel-argument convention). Returns a one-line summary."""
    ours, theirs = program_summary(etc, etc_pte), program_summary(etc, et_pte)
    if ours is None or theirs is None:
        failures.append(f"{tag}: etc inspect cannot read the programs")
        return "unreadable"
    (our_bytes, our_ops), (their_bytes, their_ops) = ours, theirs
    if our_bytes > their_bytes:
        failures.append(f"{tag}: etc plans {our_bytes} bytes, ExecuTorch {their_bytes}")
    shared = sorted(set(our_ops) & set(their_ops))
    for op in shared:
        if our_ops[op] != their_ops[op]:
            failures.append(f"{tag}: {op} takes {sorted(our_ops[op])} arguments in etc's "
                            f"program, {sorted(their_ops[op])} in ExecuTorch's")
    return (f"planned {our_bytes} vs ExecuTorch's {their_bytes} bytes; {len(shared)} shared "
            f"operators, same arguments; only ExecuTorch's: "
            f"{len(set(their_ops) - set(our_ops))}, only etc's: {len(set(our_ops) - set(their_ops))}")


def check_onnx(etc, d, name, inputs, expected, work, failures):
    """PyTorch's ONNX export of the model: ONNX Runtime and etc on the same inputs (as
    test/onnx/models_test.sh compares the PyPI models), for --target cpu and cuda:0."""
    import onnxruntime as ort
    model = os.path.join(d, "model.onnx")
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(os.path.join(d, f)) for i, f in zip(session.get_inputs(), inputs)}
    want = session.run(None, feeds)
    opset = next(o.version for o in __import__("onnx").load(model, load_external_data=False).opset_import
                 if o.domain in ("", "ai.onnx"))
    for target in ["cpu", "cuda:0"]:
        tag = f"{name} (PyTorch's ONNX export, opset {opset}, --target {target})"
        pte = os.path.join(work, f"{name}.onnx.{target.replace(':', '')}.pte")
        out = pte + ".out"
        r = run([etc, "export", model, "-o", pte, "--target", target])
        cmd = [etc, "run", pte, "--device", "cpu", "--output-dir", out]
        for i, f in enumerate(inputs):
            cmd += ["--input", f"{i}={os.path.join(d, f)}"]
        r2 = run(cmd) if r.returncode == 0 else r
        if r2.returncode != 0:
            failures.append(f"{tag}: exit {r2.returncode}:\n{r2.stdout}")
            print(f"FAIL {tag}: {r2.stdout.strip()}", flush=True)
            continue
        worst, ok = 0.0, True
        for i, w in enumerate(want):
            got = np.load(os.path.join(out, f"output_{i}.npy"))
            if got.shape != w.shape:
                ok = False
                failures.append(f"{tag}: output {i} is {got.shape}, ONNX Runtime's {w.shape}")
                continue
            err = np.abs(got.astype(np.float64) - w)
            worst = max(worst, float(err.max(initial=0.0)))
            if not np.all(err <= 1e-4 + 1e-3 * np.abs(w)):
                ok = False
                failures.append(f"{tag}: output {i} differs from ONNX Runtime by {float(err.max()):.3g}")
        # The same model from PyTorch: ONNX Runtime agrees with PyTorch eager too.
        ort_vs_torch = max(float(np.abs(w - e).max(initial=0.0)) for w, e in zip(want, expected))
        print(f"{'ok  ' if ok else 'FAIL'} {tag}: max abs err from ONNX Runtime {worst:.3g} "
              f"(ONNX Runtime from PyTorch eager {ort_vs_torch:.3g})", flush=True)


def cuda_available(etc):
    out = run([etc, "--version"]).stdout
    return "CUDA support: built in" in out and "CUDA devices: none" not in out


def check_model(etc, fixtures, name, work, cuda, rows, et_rows, failures):
    d = os.path.join(fixtures, name)
    meta = json.load(open(os.path.join(d, "meta.json")))
    inputs = sorted(f for f in os.listdir(d) if f.startswith("input_"))
    expected = [np.load(os.path.join(d, f"expected_{i}.npy")) for i in range(len(meta["outputs"]))]
    xnn = os.path.join(d, "model.xnnpack.pte")
    if os.path.exists(xnn):
        # A delegate etc does not have: refused by the backend's name, exit 1.
        r = run([etc, "run", xnn, "--device", "cpu", "--seed", "1"])
        ok_xnn = r.returncode == 1 and "XnnpackBackend" in r.stdout
        if not ok_xnn:
            failures.append(f"{name}: ExecuTorch's XNNPACK program: exit {r.returncode}, expected 1 "
                            f"naming XnnpackBackend:\n{r.stdout}")
        print(f"{'ok  ' if ok_xnn else 'FAIL'} {name}: ExecuTorch's XNNPACK program refused: "
              f"{r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ''}", flush=True)
    et_result = check_executorch_program(etc, d, meta, inputs, expected, work, failures)
    print(f"{'FAIL' if et_result == 'FAIL' else 'ok  '} {name}: ExecuTorch's program "
          f"(exported in {meta.get('executorch_export_seconds', '?')} s) in etc: "
          f"{et_result if isinstance(et_result, str) else f'max abs err {et_result:.3g}'}",
          flush=True)
    et_rows.append({"model": name, "result": et_result,
                    "seconds": meta.get("executorch_export_seconds")})
    if os.path.exists(os.path.join(d, "model.onnx")):
        check_onnx(etc, d, name, inputs, expected, work, failures)
    # Programs with symbolic dims take the example inputs' sizes (and, below, stay dynamic).
    shapes = []
    if meta.get("dynamic"):
        for i in meta["inputs"]:
            shapes += ["--input-shape", i["name"] + "=" + "x".join(str(d) for d in i["shape"])]
        for form, archive in FORMS:
            tag = f"{name} ({form}, bounded dynamic)"
            pte = os.path.join(work, f"{name}.{form}.dynamic.pte")
            out = pte + ".out"
            r = run([etc, "export", os.path.join(d, archive), "-o", pte, "--target", "cpu"])
            cmd = [etc, "run", pte, "--device", "cpu", "--output-dir", out]
            for i, f in enumerate(inputs):
                cmd += ["--input", f"{i}={os.path.join(d, f)}"]
            r2 = run(cmd) if r.returncode == 0 else r
            ok = r2.returncode == 0 and "dynamic dims" in r.stdout
            err = 0.0
            for i, want in enumerate(expected if ok else []):
                got = np.load(os.path.join(out, f"output_{i}.npy"))
                if got.shape != want.shape:
                    ok = False
                    continue
                diff, bad = compare(got, want)
                err = max(err, diff)
                ok = ok and not bad.any()
            if not ok:
                failures.append(f"{tag}: {r.stdout}{r2.stdout if r2 is not r else ''}")
            print(f"{'ok  ' if ok else 'FAIL'} {tag}: exported once for every size in range, run at "
                  f"{[i['shape'] for i in meta['inputs']]}: max abs err {err:.3g}", flush=True)
    for form, archive in FORMS:
        tag = f"{name} ({form})"
        path = os.path.join(d, archive)
        cpu_pte = os.path.join(work, f"{name}.{form}.cpu.pte")
        r = run([etc, "export", path, "-o", cpu_pte, "--target", "cpu"] + shapes)
        if r.returncode != 0:
            failures.append(f"{tag}: etc export --target cpu exited {r.returncode}:\n{r.stdout}")
            continue
        out_dir = os.path.join(work, f"{name}.{form}.out")
        cmd = [etc, "run", cpu_pte, "--device", "cpu", "--output-dir", out_dir]
        for i, f in enumerate(inputs):
            cmd += ["--input", f"{i}={os.path.join(d, f)}"]
        r = run(cmd)
        if r.returncode != 0:
            failures.append(f"{tag}: etc run exited {r.returncode}:\n{r.stdout}")
            continue
        worst_abs, worst_rel, worst_scaled = 0.0, 0.0, 0.0
        ok = True
        for i, want in enumerate(expected):
            got = np.load(os.path.join(out_dir, f"output_{i}.npy"))
            if got.shape != want.shape or got.dtype != want.dtype:
                failures.append(f"{tag}: output {i} is {got.dtype}{list(got.shape)}, "
                                f"PyTorch gives {want.dtype}{list(want.shape)}")
                ok = False
                continue
            if not np.issubdtype(want.dtype, np.floating):
                if not np.array_equal(got, want):
                    failures.append(f"{tag}: integer output {i} differs from PyTorch")
                    ok = False
                continue
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            worst_abs = max(worst_abs, float(diff.max(initial=0.0)))
            rel = diff / np.maximum(np.abs(want.astype(np.float64)), 1e-6)
            worst_rel = max(worst_rel, float(rel.max(initial=0.0)))
            scale = float(np.abs(want.astype(np.float64)).max(initial=0.0))
            if scale > 0:
                worst_scaled = max(worst_scaled, float(diff.max(initial=0.0)) / scale)
            bad = (diff > RTOL * np.abs(want) + ATOL * scale) | (np.isnan(got) != np.isnan(want))
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                failures.append(f"{tag}: output {i} differs from PyTorch at {bad.sum()} of "
                                f"{bad.size} elements (first at flat index {k}: etc "
                                f"{got.flat[k]!r}, PyTorch {want.flat[k]!r})")
                ok = False

        # ExecuTorch's own runtime on etc's CPU program.
        et = executorch_outputs(cpu_pte, [os.path.join(d, f) for f in inputs])
        et_diff = None
        missing = meta.get("executorch_missing_kernels", [])
        if isinstance(et, str) and missing:
            # ExecuTorch's kernel library lacks an operator the program calls (the fixture
            # names it): it must still lack it, or the note is stale and the run must pass.
            have = executorch_operator_names()
            stale = [op for op in missing if op in have]
            if stale:
                failures.append(f"{tag}: ExecuTorch's runtime refuses etc's CPU program ({et}), "
                                f"yet it has {stale}, which the fixture says it lacks")
                ok = False
            else:
                print(f"note {tag}: ExecuTorch's runtime cannot run etc's CPU program: its kernel "
                      f"library lacks {missing}", flush=True)
        elif isinstance(et, str):
            failures.append(f"{tag}: ExecuTorch's runtime refuses etc's CPU program: {et}")
            ok = False
        elif missing:
            failures.append(f"{tag}: ExecuTorch's runtime ran etc's CPU program, yet the fixture "
                            f"says its kernel library lacks {missing}")
            ok = False
        else:
            et_diff = 0.0
            for i, want in enumerate(expected):
                got = np.load(os.path.join(out_dir, f"output_{i}.npy"))
                theirs = et[i] if i < len(et) else None
                if theirs is None or theirs.shape != got.shape:
                    failures.append(f"{tag}: ExecuTorch gives output {i} as "
                                    f"{None if theirs is None else theirs.shape}, etc {got.shape}")
                    ok = False
                    continue
                err, bad = compare(theirs, got)
                known = meta.get("executorch_deviations", {}).get(str(i))
                if known is not None:
                    # A known defect of ExecuTorch's portable kernel (etc matches PyTorch
                    # above): it must still show, or the note is stale.
                    if not bad.any():
                        failures.append(f"{tag}: output {i}: ExecuTorch now agrees; remove the "
                                        f"fixture's note ({known})")
                        ok = False
                    else:
                        print(f"note {tag}: output {i}: ExecuTorch differs by up to {err:.3g}, "
                              f"a known defect: {known}", flush=True)
                    continue
                et_diff = max(et_diff, err)
                if bad.any():
                    failures.append(f"{tag}: ExecuTorch's runtime and etc differ on output {i} "
                                    f"by up to {err:.3g}")
                    ok = False

        # ExecuTorch's own program for the same archive (the default form's); not one that
        # calls an operator no runtime has (its plan is of a program that cannot run).
        et_pte = os.path.join(d, "model.et.pte")
        if (form == FORMS[0][0] and os.path.exists(et_pte)
                and not meta.get("executorch_program_missing")):
            before = len(failures)
            line = compare_with_executorch_program(etc, et_pte, cpu_pte, tag, failures)
            print(f"{'ok  ' if len(failures) == before else 'FAIL'} {tag}: vs ExecuTorch's "
                  f"program: {line}", flush=True)

        # The cuda:0 export: everything delegated, IO on the device, minimum copies.
        cuda_pte = os.path.join(work, f"{name}.{form}.cuda.pte")
        report = os.path.join(work, f"{name}.{form}.report.json")
        r = run([etc, "export", path, "-o", cuda_pte, "--target", "cuda:0", "--report", report] + shapes)
        if r.returncode != 0:
            failures.append(f"{tag}: etc export --target cuda:0 exited {r.returncode}:\n{r.stdout}")
            continue
        rep = json.load(open(report))
        n_in, n_out = len(inputs), len(expected)
        copies = rep["copies"]
        # Only the ops the fixture declares stay on the host (meta "cuda_host_ops", with the
        # generator's reason), and all of those do.
        host_ops = sorted({h["op"] for h in rep["ops"]["host"]})
        if host_ops != sorted(meta.get("cuda_host_ops", [])):
            failures.append(f"{tag}: ops left on the host: {rep['ops']['host']} (the fixture "
                            f"declares {meta.get('cuda_host_ops', [])})")
            ok = False
        # With ops on the host between delegates, their operands cross too: the bound is for
        # programs the delegate takes whole.
        if not host_ops and (copies["h2d"] > n_in or copies["d2h"] > n_out):
            failures.append(f"{tag}: {copies['h2d']} h2d / {copies['d2h']} d2h copies for "
                            f"{n_in} inputs and {n_out} outputs")
            ok = False
        for p in rep["partitions"]:
            if p["device"] != "cuda:0":
                failures.append(f"{tag}: partition {p['delegate']} is on {p['device']}")
                ok = False
        planned = sum(b["planned_bytes"] for b in rep["memory"])
        bound = sum(b["lower_bound_bytes"] for b in rep["memory"])
        if cuda:
            cmd = [etc, "run", cuda_pte, "--device", "cuda", "--verify"]
            for i, f in enumerate(inputs):
                cmd += ["--input", f"{i}={os.path.join(d, f)}"]
            r = run(cmd)
            if r.returncode != 0:
                failures.append(f"{tag}: etc run --device cuda --verify exited {r.returncode}:\n{r.stdout}")
                ok = False
        rows.append({
            "model": name, "form": form, "ok": ok,
            "ops": rep["ops"]["total"], "delegates": len(rep["partitions"]),
            "h2d": copies["h2d"], "d2h": copies["d2h"],
            "planned": planned, "bound": bound,
            "max_abs": worst_abs, "max_rel": worst_rel, "scaled": worst_scaled, "et": et_diff,
        })
        print(f"{'ok  ' if ok else 'FAIL'} {tag}: max abs {worst_abs:.3g} "
              f"({worst_scaled:.3g} of the output's scale), max rel {worst_rel:.3g}; "
              f"ExecuTorch vs etc {'refused' if et_diff is None else format(et_diff, '.3g')}; cuda:0: {rep['ops']['total']} ops in "
              f"{len(rep['partitions'])} delegate(s), {copies['h2d']} h2d + {copies['d2h']} d2h, "
              f"{planned} bytes planned (lower bound {bound})", flush=True)


def main(argv):
    args = argv[1:]
    table = None
    if "--table" in args:
        k = args.index("--table")
        table = args[k + 1]
        del args[k:k + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    etc, fixtures, names = args[0], args[1], args[2:]
    if not names:
        names = sorted(n for n in os.listdir(fixtures)
                       if os.path.isfile(os.path.join(fixtures, n, "meta.json")))
    if not names:
        print(f"torch_models_test: no fixtures under {fixtures}", file=sys.stderr)
        return 1
    cuda = cuda_available(etc)
    rows, et_rows, failures = [], [], []
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            check_model(etc, fixtures, name, work, cuda, rows, et_rows, failures)
    if table:
        with open(table, "w") as f:
            f.write("| model | form | ops | delegates | copies (h2d + d2h) | planned bytes "
                    "(lower bound) | max abs err | max abs err / max abs output | max rel err (per element) "
                    "| ExecuTorch runs etc's CPU program: max abs diff from etc |\n"
                    "|---|---|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(f"| {r['model']} | {r['form']} | {r['ops']} | {r['delegates']} | "
                        f"{r['h2d']} + {r['d2h']} | {r['planned']:,} ({r['bound']:,}) | "
                        f"{r['max_abs']:.2g} | {r['scaled']:.2g} | {r['max_rel']:.2g} | "
                        f"{'refused' if r['et'] is None else format(r['et'], '.2g')} |\n")
            f.write("\n| model | ExecuTorch's program (to_edge -> to_executorch) run by etc: "
                    "max abs err from PyTorch |\n|---|---|\n")
            for r in et_rows:
                res = r["result"]
                f.write(f"| {r['model']} | {res if isinstance(res, str) else format(res, '.2g')} |\n")
    print(f"torch_models_test: {len(rows) * 1} program(s) checked, {len(failures)} failure(s)"
          + ("" if cuda else "; no CUDA device: the cuda:0 exports were not run"))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
