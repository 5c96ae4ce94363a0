#!/usr/bin/env python3
"""torch_eager: the example models in PyTorch eager mode on the same GPU, for comparison with
`etc run --device cuda` (scripts/device-check.sh puts both side by side).

Each examples/*.json graph is interpreted op by op with torch.ops.aten.<name>.<overload>
(the IR's op names and argument names are ATen's), constants loaded from the example's
safetensors file (parsed here, so only torch is needed). Inputs are uniform(-1, 1) like
`etc run`'s random inputs. Timing per iteration, median of ITERATIONS after WARMUP:
  h2d      copying the inputs from (pageable) host memory to the GPU,
  compute  the eager forward pass with inputs already on the GPU (synchronised),
  d2h      copying the outputs back.
Prints one JSON object per model on stdout. Exit 77 when torch or a GPU is missing.

Usage: torch_eager.py EXAMPLES_DIR [MODEL...]   (env WARMUP=20, ITERATIONS=100)"""
import json
import os
import struct
import sys
import time

try:
    import torch
except ImportError:
    print("torch_eager: PyTorch is not installed", file=sys.stderr)
    sys.exit(77)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "float64": torch.float64, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
          "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16}
ST_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
             "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool, "I8": torch.int8, "U8": torch.uint8,
             "I16": torch.int16}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        buf = bytearray(data[base + lo:base + hi])
        t = torch.frombuffer(buf, dtype=ST_DTYPES[info["dtype"]]) if hi > lo else \
            torch.empty(0, dtype=ST_DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"])
    return out


def build(graph, folder, device):
    values = {}
    files = {}
    for c in graph.get("constants", []):
        if "safetensors" in c:
            st = c["safetensors"]
            if st["file"] not in files:
                files[st["file"]] = load_safetensors(os.path.join(folder, st["file"]))
            t = files[st["file"]][st["tensor"]]
        elif "values" in c:
            t = torch.tensor(c["values"], dtype=DTYPES[c["dtype"]]).reshape(c["shape"])
        else:
            raise SystemExit("torch_eager: constant %s: base64 data is not supported" % c["name"])
        values[c["name"]] = t.to(device)
    nodes = []
    for n in graph["nodes"]:
        name, overload = n["op"][len("aten."):].rsplit(".", 1)
        fn = getattr(getattr(torch.ops.aten, name), overload)
        nodes.append((fn, n["args"], n["outputs"]))
    return values, nodes


def arg(v, values):
    if isinstance(v, str):
        if v in values:
            return values[v]
        if v in DTYPES:
            return DTYPES[v]
        return v
    if isinstance(v, list):
        return [arg(x, values) for x in v]
    return v


def forward(graph, values, nodes, inputs):
    env = dict(values)
    env.update(inputs)
    for fn, args, outs in nodes:
        kwargs = {k: arg(v, env) for k, v in args.items()}
        r = fn(**kwargs)
        if isinstance(r, (tuple, list)):
            for o, t in zip(outs, r):
                env[o] = t
        else:
            env[outs[0]] = r
    return [env[o] for o in graph["outputs"]]


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    if not torch.cuda.is_available():
        print("torch_eager: no GPU visible to PyTorch", file=sys.stderr)
        sys.exit(77)
    folder = sys.argv[1]
    models = sys.argv[2:] or ["mlp", "cnn", "transformer_block"]
    warmup = int(os.environ.get("WARMUP", "20"))
    iterations = int(os.environ.get("ITERATIONS", "100"))
    dev = torch.device("cuda:0")
    for model in models:
        graph = json.load(open(os.path.join(folder, model + ".json")))
        values, nodes = build(graph, folder, dev)
        host = {i["name"]: (torch.rand(i["shape"], dtype=torch.float32) * 2 - 1).to(DTYPES[i["dtype"]])
                for i in graph["inputs"]}
        h2d, compute, d2h = [], [], []
        with torch.inference_mode():
            for it in range(warmup + iterations):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                inputs = {k: v.to(dev) for k, v in host.items()}
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                outs = forward(graph, values, nodes, inputs)
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                _ = [o.cpu() for o in outs]
                t3 = time.perf_counter()
                if it >= warmup:
                    h2d.append(t1 - t0)
                    compute.append(t2 - t1)
                    d2h.append(t3 - t2)
        print(json.dumps({"model": model, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                          "h2d_ms": median(h2d) * 1e3, "compute_ms": median(compute) * 1e3,
                          "d2h_ms": median(d2h) * 1e3, "iterations": iterations}))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
