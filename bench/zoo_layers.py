"""zoo_layers: where a zoo model's time goes, layer by layer, in etc and in the references'
own profilers (issue 39: "compare etc run --profile with the reference's own profile").

For each model of bench/zoo_cpu.py (prepared there, or here with its code, in the same WORK
folder), at T threads, per-layer medians over RUNS calls from each engine's own timing:
  - etc: `etc run --profile-shapes --profile-runs RUNS`: a row per operator and argument
    shapes (a convolution's row includes the epilogue it runs: its activation, residual add);
  - ONNX Runtime: its profiler (SessionOptions.enable_profiling), each node's median;
  - ExecuTorch+XNNPACK: ETDump (the wheel's XNNPACK delegate reports each operator), each
    operator's median.
Convolutions are matched by their input and weight shapes (etc's rows, ONNX Runtime's Conv
nodes); XNNPACK's operators carry no shapes, so its convolutions (XNNPACK runs 1x1 layers as
"Fully Connected") are matched to ONNX Runtime's Conv nodes in execution order, where both
have the same count. Everything else is summed by kind per engine (ONNX Runtime's and
XNNPACK's activations that etc runs inside its convolutions' epilogues show up there).

  bench/zoo_cpu.sh ETC --layers [--models a,b] [--threads 1] [--runs 40] [--size 224]
  (zoo_cpu.py ETC WORK --layers ...; or zoo_layers.py ETC WORK ...)

Prints markdown: per model, the layers by etc's time with each reference's, then the other
ops by kind, then the totals (each the sum of its rows' medians, and each engine's median
time of a whole call for comparison).
"""

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import zoo_cpu  # noqa: E402  (the zoo's models and their preparation)

ROW = re.compile(r"^\s+([0-9.]+) ms\s+[0-9.]+%\s+(\d+) x  (.*?)(?: [0-9.e+-]+ GFLOP/s)?$")
SHAPES = re.compile(r"\[([0-9, ]*)\]")


def shape_key(x, w):
    return "x".join(map(str, x)) + " * " + "x".join(map(str, w))


def linear_key(k, n):
    return f"linear {k} -> {n}"


def round16(v):
    return (v + 15) // 16 * 16


def match_conv(x, w, etc_dims):
    """The etc layer an ONNX Runtime Conv node is: the same shapes, or the same but for the
    channels ONNX Runtime pads to 16 for its blocked layout (24 -> 32)."""
    key = shape_key(x, w)
    if key in etc_dims:
        return key
    best = None
    for k, (ex, ew) in etc_dims.items():
        if (len(ex) != 4 or len(ew) != 4 or ex[0] != x[0] or ex[2:] != x[2:] or ew[2:] != w[2:]
                or (ew[1] == 1) != (w[1] == 1)):
            continue
        if ex[1] <= x[1] <= round16(ex[1]) and ew[0] <= w[0] <= round16(ew[0]):
            pad = x[1] - ex[1] + w[0] - ew[0]
            if best is None or pad < best[0]:
                best = (pad, k)
    return best[1] if best else key


def etc_profile(etc, d, threads, runs):
    """etc's rows: (conv key or None, op label, calls, ms of all its calls)."""
    r = subprocess.run([etc, "run", os.path.join(d, "etc.pte"), "--device", "cpu", "--threads",
                        str(threads), "--input", "0=" + os.path.join(d, "input_0.npy"),
                        "--warmup", "5", "--iterations", "20", "--json", "--profile-shapes",
                        "--profile-runs", str(runs)], capture_output=True, text=True)
    if r.returncode != 0:
        lines = r.stderr.strip().splitlines()
        raise RuntimeError(f"etc run failed (exit {r.returncode}): {lines[-1] if lines else '?'}")
    call_ms = json.loads(r.stdout)["timing_ms"]["compute_median"]
    rows = []
    for line in r.stderr.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        ms, calls, name = float(m.group(1)), int(m.group(2)), m.group(3)
        op = name.split(" [")[0]
        key = dims = None
        shapes = [[int(v) for v in s.split(",") if v.strip()] for s in SHAPES.findall(name)]
        if op.startswith("aten::convolution.out"):
            dims = (shapes[0], shapes[1])
            key = shape_key(*dims)
        elif op.startswith("aten::addmm.out") and len(shapes) >= 3 and len(shapes[1]) == 2:
            k, w = shapes[1][1], shapes[2]
            key = linear_key(k, w[1] if w[0] == k else w[0])
        rows.append((key, dims, op, calls, ms))
    return rows, call_ms


def child(kind, d, threads, runs):
    """In its own process (thread settings): per-node medians as JSON on stdout."""
    import numpy as np

    x = np.load(os.path.join(d, "input_0.npy"))
    out = []
    if kind == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(d, "ort_profile")
        s = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
        name = s.get_inputs()[0].name
        for _ in range(5):
            s.run(None, {name: x})
        t = []
        for _ in range(runs):
            t0 = time.perf_counter()
            s.run(None, {name: x})
            t.append(time.perf_counter() - t0)
        path = s.end_profiling()
        events = json.load(open(path))
        os.remove(path)
        per = collections.OrderedDict()
        for e in events:
            if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
                continue
            a = e["args"]
            shapes = [list(v.values())[0] for v in a.get("input_type_shape", [])]
            outs = [list(v.values())[0] for v in a.get("output_type_shape", [])]
            per.setdefault(e["name"], (a.get("op_name"), shapes, outs, []))[3].append(e["dur"] / 1e3)
        for node, (op, shapes, outs, ds) in per.items():
            ds = ds[5:] if len(ds) > runs else ds  # the warm-up calls' events first
            out.append({"node": node, "op": op, "shapes": shapes, "outs": outs,
                        "ms": statistics.median(ds)})
    else:
        import torch
        from executorch.devtools import Inspector
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(threads)
        torch.set_num_threads(threads)
        m = portable_lib._load_for_executorch(os.path.join(d, "xnnpack.pte"), enable_etdump=True,
                                              debug_buffer_size=0)
        tx = torch.from_numpy(x)
        for _ in range(runs):
            m.forward([tx])
        etdump = os.path.join(d, "xnnpack.etdp")
        m.write_etdump_result_to_file(etdump)
        df = Inspector(etdump_path=etdump).to_dataframe()
        os.remove(etdump)
        t = None
        for name, raw in zip(df["event_name"], df["raw"]):
            if name == "Method::execute":
                t = raw
            elif name not in ("Method::init", "Program::load_method", "DELEGATE_CALL"):
                out.append({"node": name, "op": re.sub(r" #\d+$", "", name), "shapes": [],
                            "ms": statistics.median(raw)})
        t = [v / 1e3 for v in t] if t else [0.0]
    print(json.dumps({"nodes": out, "call_ms": statistics.median(t) * 1e3}))


def run_child(kind, d, threads, runs):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    r = subprocess.run([sys.executable, __file__, "_child", kind, d, str(threads), str(runs)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        raise RuntimeError(f"{kind} failed: {lines[-1] if lines else '?'}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def is_layer_ort(op):
    return op in ("Conv", "FusedConv", "Gemm")


def is_layer_xnn(op):
    return op.startswith("Convolution") or op.startswith("Fully Connected")


def fits(ort_node, xnn_op):
    """Whether an XNNPACK operator can be this ONNX Runtime layer: depthwise layers are its
    DWConv, 1x1 layers and the classifier a GEMM, others an IGEMM or GEMM (where the two
    engines run branches in other orders, the pairs disagree and nothing is matched)."""
    if ort_node["op"] == "Gemm":
        return xnn_op.endswith("GEMM") and not xnn_op.endswith("IGEMM")
    x, w = ort_node["shapes"][0], ort_node["shapes"][1]
    if w[1] == 1 and w[0] >= x[1] > 1:
        return xnn_op.endswith("DWConv")
    if w[2] * w[3] == 1:
        return xnn_op.endswith("GEMM") and not xnn_op.endswith("IGEMM")
    return xnn_op.endswith("GEMM")


def report(name, etc_rows, etc_call, ort, xnn):
    # Layers: etc's time per call of each shape; ONNX Runtime's Conv nodes by shape, in order.
    ort_layers = [n for n in ort["nodes"] if is_layer_ort(n["op"])]
    xnn_layers = [n for n in xnn["nodes"] if is_layer_xnn(n["op"])]
    ordered = len(xnn_layers) == len(ort_layers) and all(
        fits(o, x["op"]) for o, x in zip(ort_layers, xnn_layers))
    table = collections.OrderedDict()  # key -> [count, etc ms, ort ms, xnn ms, xnn kinds]
    etc_dims = {key: dims for key, dims, _, _, _ in etc_rows if dims is not None}
    for i, n in enumerate(ort_layers):
        if n["op"] == "Gemm":  # (its weights are not among the profiled inputs)
            key = linear_key(n["shapes"][0][-1], n["outs"][0][-1])
        else:
            key = match_conv(n["shapes"][0], n["shapes"][1], etc_dims)
        t = table.setdefault(key, [0, 0.0, 0.0, 0.0, set()])
        t[0] += 1
        t[2] += n["ms"]
        if ordered:
            t[3] += xnn_layers[i]["ms"]
            t[4].add(xnn_layers[i]["op"].split(" F32) ")[-1])
    etc_layer = {}
    labels = {}
    etc_other = collections.defaultdict(float)
    for key, _, op, calls, ms in etc_rows:
        if key is not None:
            etc_layer[key] = etc_layer.get(key, 0.0) + ms
            labels[key] = (op.replace("aten::convolution.out", "conv").replace("aten::", "")
                           .replace(".out", ""))
        else:
            etc_other[op.replace("aten::", "")] += ms
    print(f"\n### {name}\n")
    print("| layer (input * weight) | n | etc ms (with its epilogue) | ONNX Runtime ms | "
          "etc / ORT | XNNPACK ms | etc / XNNPACK |")
    print("|---|---|---|---|---|---|---|")
    keys = sorted(set(table) | set(etc_layer), key=lambda k: -etc_layer.get(k, 0.0))
    for k in keys:
        n, _, o, x, kinds = table.get(k, [0, 0.0, 0.0, 0.0, set()])
        e = etc_layer.get(k, 0.0)
        xs = f"{x:.3f} ({'/'.join(sorted(kinds))})" if ordered and n else "-"
        print(f"| {k} {labels.get(k, '')} | {n} | {e:.3f} | {o:.3f} | "
              f"{e / o if o else float('nan'):.2f} | {xs} | "
              f"{e / x if ordered and x else float('nan'):.2f} |")
    if not ordered:
        print(f"\n(XNNPACK's {len(xnn_layers)} convolutions do not pair with ONNX Runtime's "
              f"{len(ort_layers)} in order: not matched; its total: "
              f"{sum(n['ms'] for n in xnn_layers):.3f} ms against etc's "
              f"{sum(etc_layer.values()):.3f})")
    kinds = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for op, ms in etc_other.items():
        kinds["etc: " + op][0] += ms
    for n in ort["nodes"]:
        if not is_layer_ort(n["op"]):
            kinds["ORT: " + n["op"]][1] += n["ms"]
    for n in xnn["nodes"]:
        if not is_layer_xnn(n["op"]):
            kinds["XNNPACK: " + n["op"]][2] += n["ms"]
    print("\n| other ops | etc ms | ONNX Runtime ms | XNNPACK ms |")
    print("|---|---|---|---|")
    for k, (e, o, x) in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
        if e + o + x >= 0.005:
            print(f"| {k} | {e:.3f} | {o:.3f} | {x:.3f} |")
    se = sum(r[4] for r in etc_rows)
    so = sum(n["ms"] for n in ort["nodes"])
    sx = sum(n["ms"] for n in xnn["nodes"])
    print(f"\nSums of the rows' medians: etc {se:.3f} ms, ONNX Runtime {so:.3f}, XNNPACK {sx:.3f}; "
          f"median calls: etc {etc_call:.3f} (compute), ONNX Runtime {ort['call_ms']:.3f}, "
          f"XNNPACK {xnn['call_ms']:.3f} (method.execute).")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return
    p = argparse.ArgumentParser()
    p.add_argument("etc")
    p.add_argument("work")
    p.add_argument("--models", default="efficientnet_b0")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--size", type=int, default=224)
    a = p.parse_args()
    for name in a.models.split(","):
        d, _ = zoo_cpu.prepare(a.etc, name, a.size, a.work)
        try:
            etc_rows, etc_call = etc_profile(a.etc, d, a.threads, a.runs)
            ort = run_child("ort", d, a.threads, a.runs)
            xnn = run_child("xnnpack", d, a.threads, a.runs)
        except RuntimeError as e:  # one model's failure does not end the others
            print(f"\n### {name}\n\n{e}")
            continue
        report(name, etc_rows, etc_call, ort, xnn)


if __name__ == "__main__":
    main()
