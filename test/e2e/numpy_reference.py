#!/usr/bin/python3
"""An independent reference for etc: evaluates an etc.graph JSON model with NumPy.

Written from the ATen op definitions, sharing no code with etc, so `etc run` outputs can be
checked against it. Reads weights from the model's safetensors files / inline values.

Usage: numpy_reference.py MODEL.json OUT_DIR [INPUT.npy ...]
Writes OUT_DIR/output_<i>.npy for each graph output (float64 results cast to the output dtype).
"""
import base64
import json
import math
import os
import struct
import sys

import numpy as np

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
          "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}
ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32,
             "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"])
    return out


def conv2d(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = x[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dil[0]:i * dil[0] + stride[0] * oh:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * ow:stride[1]]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def pool2d(x, k, s, p, reduce, count_include_pad=True):
    s = s or k
    pad_val = -np.inf if reduce == "max" else 0.0
    xp = np.pad(x, ((0, 0),) * (x.ndim - 2) + ((p[0], p[0]), (p[1], p[1])), constant_values=pad_val)
    oh = (x.shape[-2] + 2 * p[0] - k[0]) // s[0] + 1
    ow = (x.shape[-1] + 2 * p[1] - k[1]) // s[1] + 1
    windows = np.stack([xp[..., i:i + s[0] * oh:s[0], j:j + s[1] * ow:s[1]] for i in range(k[0]) for j in range(k[1])])
    return windows.max(axis=0) if reduce == "max" else windows.mean(axis=0)


def gelu(x, approximate):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def pair(v):
    return list(v) * 2 if len(v) == 1 else list(v)


def run(op, a):
    t = lambda k: a[k]  # noqa: E731
    if op == "aten.linear.default":
        y = t("input") @ t("weight").T
        return [y + t("bias") if a.get("bias") is not None else y]
    if op == "aten.addmm.default":
        return [a.get("beta", 1) * t("self") + a.get("alpha", 1) * (t("mat1") @ t("mat2"))]
    if op in ("aten.mm.default", "aten.bmm.default"):
        return [t("self") @ t("mat2")]
    if op == "aten.relu.default":
        return [np.maximum(t("self"), 0)]
    if op == "aten.silu.default":
        return [t("self") / (1 + np.exp(-t("self")))]
    if op == "aten.sigmoid.default":
        return [1 / (1 + np.exp(-t("self")))]
    if op == "aten.neg.default":
        return [-t("self")]
    if op == "aten.hardswish.default":
        x = t("self")
        return [x * np.clip(x + 3, 0, 6) / 6]
    if op == "aten.gelu.default":
        return [gelu(t("self"), a.get("approximate", "none"))]
    if op in ("aten._softmax.default", "aten._log_softmax.default"):
        x = t("self")
        e = np.exp(x - x.max(axis=a["dim"], keepdims=True))
        sm = e / e.sum(axis=a["dim"], keepdims=True)
        return [sm if "log" not in op else np.log(sm)]
    if op == "aten.add.Tensor":
        return [t("self") + a.get("alpha", 1) * t("other")]
    if op == "aten.mul.Tensor":
        return [t("self") * t("other")]
    if op == "aten.mul.Scalar":
        return [t("self") * a["other"]]
    if op == "aten.convolution.default":
        assert not a["transposed"]
        return [conv2d(t("input"), t("weight"), a.get("bias"), pair(a["stride"]), pair(a["padding"]),
                       pair(a["dilation"]), a["groups"])]
    if op == "aten._native_batch_norm_legit_no_training.default":
        x = t("input")
        shape = (1, -1) + (1,) * (x.ndim - 2)
        y = (x - t("running_mean").reshape(shape)) / np.sqrt(t("running_var").reshape(shape) + a["eps"])
        return [y * t("weight").reshape(shape) + t("bias").reshape(shape), None, None]
    if op == "aten.native_layer_norm.default":
        x = t("input")
        axes = tuple(range(x.ndim - len(a["normalized_shape"]), x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        var = x.var(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(var + a["eps"])
        if a.get("weight") is not None:
            y = y * t("weight")
        if a.get("bias") is not None:
            y = y + t("bias")
        return [y, mean, 1 / np.sqrt(var + a["eps"])]
    if op == "aten.max_pool2d.default":
        return [pool2d(t("self"), pair(a["kernel_size"]), pair(a.get("stride", []) or a["kernel_size"]),
                       pair(a.get("padding", [0])), "max")]
    if op == "aten.avg_pool2d.default":
        return [pool2d(t("self"), pair(a["kernel_size"]), pair(a.get("stride", []) or a["kernel_size"]),
                       pair(a.get("padding", [0])), "avg")]
    if op == "aten.mean.dim":
        return [t("self").mean(axis=tuple(a["dim"]), keepdims=a.get("keepdim", False))]
    if op in ("aten.view.default", "aten.reshape.default"):
        return [t("self").reshape(a.get("size", a.get("shape")))]
    if op == "aten.permute.default":
        return [np.transpose(t("self"), a["dims"])]
    if op == "aten.transpose.int":
        return [np.swapaxes(t("self"), a["dim0"], a["dim1"])]
    raise NotImplementedError(op)


def main():
    model_path, out_dir, input_paths = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(model_path) as f:
        g = json.load(f)
    base = os.path.dirname(model_path)
    env = {}
    for i, inp in enumerate(g["inputs"]):
        env[inp["name"]] = np.load(input_paths[i]).astype(np.float64)
    files = {}
    for c in g.get("constants", []):
        dt = DTYPES[c["dtype"]]
        if "values" in c:
            v = np.array(c["values"], dtype=dt)
        elif "data" in c:
            v = np.frombuffer(base64.b64decode(c["data"]), dtype=dt)
        else:
            ref = c["safetensors"]
            path = os.path.join(base, ref["file"])
            files.setdefault(path, load_safetensors(path))
            v = files[path][ref.get("tensor", c["name"])]
        env[c["name"]] = v.reshape(c["shape"]).astype(np.float64)
    for node in g["nodes"]:  # the examples list nodes in dependency order
        args = {k: (env[v] if isinstance(v, str) and v in env else v) for k, v in node["args"].items()}
        outs = run(node["op"], args)
        for name, value in zip(node["outputs"], outs):
            env[name if isinstance(name, str) else name["name"]] = value
    os.makedirs(out_dir, exist_ok=True)
    for i, name in enumerate(g["outputs"]):
        np.save(os.path.join(out_dir, "output_%d.npy" % i), np.asarray(env[name], dtype=np.float32))


if __name__ == "__main__":
    main()
