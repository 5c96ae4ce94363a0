#!/usr/bin/env python3
"""Regenerates the example models in this folder: graph JSON plus safetensors weights.

Weights come from a fixed-seed xorshift generator (no numpy, no downloads), so running
this script again reproduces every byte. The test "examples: regenerate byte-identical"
checks that.

Usage: examples/generate.py [OUT_DIR]   (default: the folder this script is in)
"""
import json
import math
import os
import struct
import sys


class Rng:
    """xorshift64*: tiny, deterministic, good enough for example weights."""

    def __init__(self, seed):
        self.state = seed or 0x9E3779B97F4A7C15

    def next_u64(self):
        x = self.state
        x ^= (x >> 12) & 0xFFFFFFFFFFFFFFFF
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27) & 0xFFFFFFFFFFFFFFFF
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def uniform(self, lo, hi):
        return lo + (hi - lo) * ((self.next_u64() >> 11) / float(1 << 53))


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


class Weights:
    """Collects float32 tensors and writes them as one safetensors file."""

    def __init__(self, seed):
        self.rng = Rng(seed)
        self.tensors = {}

    def uniform(self, name, shape, bound):
        self.tensors[name] = (shape, [self.rng.uniform(-bound, bound) for _ in range(numel(shape))])
        return name

    def kaiming(self, name, shape, fan_in):
        return self.uniform(name, shape, 1.0 / math.sqrt(fan_in))

    def const(self, name, shape, value):
        self.tensors[name] = (shape, [value] * numel(shape))
        return name

    def positive(self, name, shape, lo, hi):
        self.tensors[name] = (shape, [self.rng.uniform(lo, hi) for _ in range(numel(shape))])
        return name

    def safetensors_bytes(self):
        header = {}
        data = b""
        for name in sorted(self.tensors):
            shape, values = self.tensors[name]
            blob = struct.pack("<%df" % len(values), *values)
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
            data += blob
        text = json.dumps(header, separators=(",", ":"), sort_keys=True)
        text += " " * ((8 - (8 + len(text)) % 8) % 8)
        return struct.pack("<Q", len(text)) + text.encode() + data

    def constants(self, file):
        return [
            {"name": name, "dtype": "float32", "shape": shape, "safetensors": {"file": file, "tensor": name}}
            for name, (shape, _) in sorted(self.tensors.items())
        ]


def node(name, op, args, outputs):
    return {"name": name, "op": op, "args": args, "outputs": outputs}


def graph(name, description, inputs, constants, nodes, outputs):
    return {
        "format": "etc.graph",
        "version": 1,
        "name": name,
        "description": description,
        "inputs": inputs,
        "constants": constants,
        "nodes": nodes,
        "outputs": outputs,
    }


def mlp():
    w = Weights(seed=1)
    nodes = [
        node("fc1", "aten.linear.default",
             {"input": "x", "weight": w.kaiming("fc1.weight", [128, 64], 64),
              "bias": w.kaiming("fc1.bias", [128], 64)}, ["h1"]),
        node("act1", "aten.relu.default", {"self": "h1"}, ["a1"]),
        # addmm(bias, input, weight^T): the form ExecuTorch lowers linear to.
        node("fc2", "aten.addmm.default",
             {"self": w.kaiming("fc2.bias", [64], 128), "mat1": "a1",
              "mat2": w.kaiming("fc2.weight_t", [128, 64], 128)}, ["h2"]),
        node("act2", "aten.silu.default", {"self": "h2"}, ["a2"]),
        node("fc3", "aten.linear.default",
             {"input": "a2", "weight": w.kaiming("fc3.weight", [10, 64], 64),
              "bias": w.kaiming("fc3.bias", [10], 64)}, ["logits"]),
        node("softmax", "aten._softmax.default", {"self": "logits", "dim": 1, "half_to_float": False}, ["probs"]),
    ]
    g = graph("mlp", "A 3-layer perceptron: 64 -> 128 -> 64 -> 10 with relu, silu and softmax.",
              [{"name": "x", "dtype": "float32", "shape": [2, 64]}], w.constants("mlp.safetensors"), nodes,
              ["probs"])
    return g, w


def cnn():
    w = Weights(seed=2)

    def conv(name, x, cin, cout, k, stride, pad, groups=1):
        fan_in = cin // groups * k * k
        return node(name, "aten.convolution.default",
                    {"input": x, "weight": w.kaiming(name + ".weight", [cout, cin // groups, k, k], fan_in),
                     "bias": w.kaiming(name + ".bias", [cout], fan_in), "stride": [stride, stride],
                     "padding": [pad, pad], "dilation": [1, 1], "transposed": False, "output_padding": [0, 0],
                     "groups": groups}, [name + ".out"])

    def bn(name, x, c):
        return node(name, "aten._native_batch_norm_legit_no_training.default",
                    {"input": x, "weight": w.positive(name + ".weight", [c], 0.5, 1.5),
                     "bias": w.uniform(name + ".bias", [c], 0.1),
                     "running_mean": w.uniform(name + ".running_mean", [c], 0.1),
                     "running_var": w.positive(name + ".running_var", [c], 0.5, 2.0),
                     "momentum": 0.1, "eps": 1e-5},
                    [name + ".out", name + ".save_mean", name + ".save_invstd"])

    nodes = [
        conv("conv1", "image", 3, 16, 3, 1, 1),
        bn("bn1", "conv1.out", 16),
        node("relu1", "aten.relu.default", {"self": "bn1.out"}, ["relu1.out"]),
        node("pool1", "aten.max_pool2d.default", {"self": "relu1.out", "kernel_size": [2, 2]}, ["pool1.out"]),
        conv("dw2", "pool1.out", 16, 16, 3, 1, 1, groups=16),  # depthwise, MobileNet style
        bn("bn2", "dw2.out", 16),
        node("hswish2", "aten.hardswish.default", {"self": "bn2.out"}, ["hswish2.out"]),
        conv("pw2", "hswish2.out", 16, 32, 1, 1, 0),
        node("relu2", "aten.relu.default", {"self": "pw2.out"}, ["relu2.out"]),
        node("pool2", "aten.avg_pool2d.default", {"self": "relu2.out", "kernel_size": [2, 2]}, ["pool2.out"]),
        node("gap", "aten.mean.dim", {"self": "pool2.out", "dim": [2, 3], "keepdim": False}, ["features"]),
        node("fc", "aten.linear.default",
             {"input": "features", "weight": w.kaiming("fc.weight", [10, 32], 32),
              "bias": w.kaiming("fc.bias", [10], 32)}, ["logits"]),
        node("log_softmax", "aten._log_softmax.default", {"self": "logits", "dim": -1, "half_to_float": False},
             ["log_probs"]),
    ]
    g = graph("cnn", "A small MobileNet-style CNN: conv-bn-relu, max pool, depthwise + pointwise conv, "
                     "average pool, global mean, linear classifier.",
              [{"name": "image", "dtype": "float32", "shape": [1, 3, 32, 32]}], w.constants("cnn.safetensors"),
              nodes, ["log_probs"])
    return g, w


def transformer():
    d, heads, seq, ffn = 64, 4, 16, 128
    hd = d // heads
    w = Weights(seed=3)

    def linear(name, x, fin, fout):
        return node(name, "aten.linear.default",
                    {"input": x, "weight": w.kaiming(name + ".weight", [fout, fin], fin),
                     "bias": w.kaiming(name + ".bias", [fout], fin)}, [name + ".out"])

    def layer_norm(name, x):
        return node(name, "aten.native_layer_norm.default",
                    {"input": x, "normalized_shape": [d], "weight": w.const(name + ".weight", [d], 1.0),
                     "bias": w.const(name + ".bias", [d], 0.0), "eps": 1e-5},
                    [name + ".out", name + ".mean", name + ".rstd"])

    def heads_first(name, x):
        # [1, seq, d] -> [1, seq, heads, hd] -> [1, heads, seq, hd] -> [heads, seq, hd]
        return [
            node(name + ".split", "aten.view.default", {"self": x, "size": [1, seq, heads, hd]}, [name + ".4d"]),
            node(name + ".perm", "aten.permute.default", {"self": name + ".4d", "dims": [0, 2, 1, 3]},
                 [name + ".bhsd"]),
            node(name + ".merge", "aten.reshape.default", {"self": name + ".bhsd", "shape": [heads, seq, hd]},
                 [name + ".heads"]),
        ]

    nodes = [
        layer_norm("ln1", "x"),
        linear("q", "ln1.out", d, d),
        linear("k", "ln1.out", d, d),
        linear("v", "ln1.out", d, d),
        *heads_first("qh", "q.out"),
        *heads_first("kh", "k.out"),
        *heads_first("vh", "v.out"),
        node("kt", "aten.transpose.int", {"self": "kh.heads", "dim0": 1, "dim1": 2}, ["kt.out"]),
        node("scores", "aten.bmm.default", {"self": "qh.heads", "mat2": "kt.out"}, ["scores.out"]),
        node("scale", "aten.mul.Scalar", {"self": "scores.out", "other": 1.0 / math.sqrt(hd)}, ["scaled"]),
        node("attn", "aten._softmax.default", {"self": "scaled", "dim": -1, "half_to_float": False}, ["attn.out"]),
        node("ctx", "aten.bmm.default", {"self": "attn.out", "mat2": "vh.heads"}, ["ctx.out"]),
        node("ctx.split", "aten.view.default", {"self": "ctx.out", "size": [1, heads, seq, hd]}, ["ctx.4d"]),
        node("ctx.perm", "aten.permute.default", {"self": "ctx.4d", "dims": [0, 2, 1, 3]}, ["ctx.bshd"]),
        node("ctx.merge", "aten.reshape.default", {"self": "ctx.bshd", "shape": [1, seq, d]}, ["ctx.merged"]),
        linear("proj", "ctx.merged", d, d),
        node("res1", "aten.add.Tensor", {"self": "x", "other": "proj.out"}, ["res1.out"]),
        layer_norm("ln2", "res1.out"),
        linear("ffn1", "ln2.out", d, ffn),
        node("gelu", "aten.gelu.default", {"self": "ffn1.out", "approximate": "tanh"}, ["gelu.out"]),
        linear("ffn2", "gelu.out", ffn, d),
        node("res2", "aten.add.Tensor", {"self": "res1.out", "other": "ffn2.out"}, ["y"]),
    ]
    g = graph("transformer_block", "One pre-norm transformer encoder block: 4-head self-attention "
                                   "(d=64, seq=16) and a GELU MLP (128), with residuals.",
              [{"name": "x", "dtype": "float32", "shape": [1, seq, d]}], w.constants("transformer_block.safetensors"),
              nodes, ["y"])
    return g, w


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    for make in (mlp, cnn, transformer):
        g, w = make()
        with open(os.path.join(out, g["name"] + ".json"), "w") as f:
            json.dump(g, f, indent=2)
            f.write("\n")
        with open(os.path.join(out, g["name"] + ".safetensors"), "wb") as f:
            f.write(w.safetensors_bytes())


if __name__ == "__main__":
    main()
