#!/usr/bin/env python3
"""Writes the decoder programs etc's state (KV cache) and generation support is tested on.

Each model keeps state in registered buffers, as ExecuTorch's LLM exports do, and is called
once per token: forward(tokens [1, 1], input_pos [1], *extra) -> (logits, ...). For each,
into OUT/NAME/:
  model.pt2         torch.export.export(...) (the training dialect: in-place index_copy_ /
                    add_ on the buffers)
  model.core.pt2    after ep.run_decompositions() (functional index_put / add, the buffers
                    listed in the signature's buffers_to_mutate)
  prompt.npy        the prompt's token ids (int64 [n])
  input_<i>.npy     extra inputs held for every call (i >= 2; the encoder output)
  expected_ids.npy  PyTorch eager's greedy ids for STEPS tokens, prompt fed one token per call
  expected_logits.npy  the logits of every position ([n + STEPS - 1, vocab]: the prompt's
                    positions, then each generated token's)
  expected_out<k>.npy  output k (k >= 1) after every call, stacked (the call counter)
  meta.json         config, steps, the PyTorch version, each form's op counts

and, for the single-call attention models (gqa_*: grouped-query SDPA with each kind of
mask), input_<i>.npy, expected_0.npy and meta.json {"single": true}.

Random weights from fixed seeds; nothing is downloaded.

  make-decoder-fixtures.py OUT [NAME ...]     (no NAME: every model)
"""
import collections
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fixture_layers import RMSNorm, as_tuple, op_counts, rotate_half  # noqa: E402


# ---- A Llama-style decoder: GQA, RoPE, RMSNorm, SiLU MLP, KV cache in buffers --------------

class CachedAttention(nn.Module):
    """Self-attention over a static KV cache [1, kv_heads, max_seq, head_dim]; the new keys and
    values go to row input_pos (index_copy_, as ExecuTorch's llama KV cache writes them)."""

    def __init__(self, dim, heads, kv_heads, max_seq):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, kv_heads, max_seq, self.hd))
        self.register_buffer("v_cache", torch.zeros(1, kv_heads, max_seq, self.hd))

    def forward(self, x, pos, cos, sin, mask):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.heads, self.hd).transpose(1, 2)
        k = self.wk(x).view(b, n, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(x).view(b, n, self.kv_heads, self.hd).transpose(1, 2)
        if cos is not None:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask,
                                           enable_gqa=self.heads != self.kv_heads)
        return self.wo(a.transpose(1, 2).reshape(b, n, -1))


class LlamaLayer(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden, max_seq):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = CachedAttention(dim, heads, kv_heads, max_seq)
        self.mlp_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x, pos, cos, sin, mask):
        x = x + self.attn(self.attn_norm(x), pos, cos, sin, mask)
        h = self.mlp_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class LlamaDecoder(nn.Module):
    def __init__(self, vocab=1024, dim=256, layers=2, heads=8, kv_heads=2, hidden=688,
                 max_seq=256, theta=10000.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            [LlamaLayer(dim, heads, kv_heads, hidden, max_seq) for _ in range(layers)])
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        hd = dim // heads
        inv = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
        angles = torch.outer(torch.arange(max_seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)),
                             persistent=False)

    def forward(self, tokens, input_pos):
        x = self.embed(tokens)
        cos, sin = self.rope_cos[input_pos], self.rope_sin[input_pos]
        mask = self.causal[input_pos]
        for layer in self.layers:
            x = layer(x, input_pos, cos, sin, mask)
        return self.output(self.norm(x))


# ---- A Whisper-style decoder step: self-attention cache, cross-attention, a call counter ----

class WhisperStep(nn.Module):
    """One decoder step over an encoder output given as input: learned positions, LayerNorm,
    multi-head self-attention over its cache, cross-attention to the encoder output, GELU MLP.
    A second kind of state: `calls`, an int64 counter every call increments (written back by
    a copy at the end, not in place)."""

    def __init__(self, vocab=512, dim=128, heads=4, layers=2, max_seq=64, enc_len=24):
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.embed = nn.Embedding(vocab, dim)
        self.pos_embed = nn.Parameter(0.02 * torch.randn(max_seq, dim))
        self.self_norm = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.self_attn = nn.ModuleList(
            [CachedAttention(dim, heads, heads, max_seq) for _ in range(layers)])
        self.cross_norm = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.cross_q = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.cross_kv = nn.ModuleList([nn.Linear(dim, 2 * dim) for _ in range(layers)])
        self.cross_o = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])
        self.mlp_norm = nn.ModuleList([nn.LayerNorm(dim) for _ in range(layers)])
        self.mlp = nn.ModuleList([nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                                nn.Linear(4 * dim, dim)) for _ in range(layers)])
        self.final_norm = nn.LayerNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("causal", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)),
                             persistent=False)
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, tokens, input_pos, encoder_out):
        b, n = tokens.shape
        x = self.embed(tokens) + self.pos_embed[input_pos]
        mask = self.causal[input_pos]
        t = encoder_out.shape[1]
        for i in range(len(self.self_attn)):
            x = x + self.self_attn[i](self.self_norm[i](x), input_pos, None, None, mask)
            q = self.cross_q[i](self.cross_norm[i](x)).view(b, n, self.heads, self.hd).transpose(1, 2)
            k, v = self.cross_kv[i](encoder_out).view(b, t, 2, self.heads, self.hd).unbind(2)
            a = F.scaled_dot_product_attention(q, k.transpose(1, 2), v.transpose(1, 2))
            x = x + self.cross_o[i](a.transpose(1, 2).reshape(b, n, -1))
            x = x + self.mlp[i](self.mlp_norm[i](x))
        self.calls.add_(1)
        return self.output(self.final_norm(x)), self.calls + 0


class GqaAttention(nn.Module):
    """SDPA with enable_gqa (8 query heads over 2 key/value heads) and a mask of each shape
    etc treats differently: none (causal), [L, S], [1, 1, L, S], and one per head."""

    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def forward(self, q, k, v, *mask):
        if self.mask == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[0], enable_gqa=True)


def gqa_inputs(mask):
    q, k, v = torch.randn(1, 8, 5, 16), torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16)
    shapes = {"causal": None, "mask_2d": (5, 7), "mask_4d": (1, 1, 5, 7), "mask_per_head": (1, 8, 5, 7)}
    if shapes[mask] is None:
        return (q, k, v)
    m = torch.rand(shapes[mask]) > 0.3
    if mask == "mask_2d":
        m = torch.where(m, 0.0, -1e4)  # an additive float mask
    return (q, k, v, m)


# Single calls (no state): each input, PyTorch's output, compared once.
SINGLE = collections.OrderedDict(
    (f"gqa_{m}", (lambda m=m: GqaAttention(m), lambda m=m: gqa_inputs(m)))
    for m in ["causal", "mask_2d", "mask_4d", "mask_per_head"])


MODELS = collections.OrderedDict([
    # name: (constructor, prompt, steps, extra inputs, sequence bound)
    ("llama_decoder", (LlamaDecoder, [1, 17, 342, 99, 5, 811], 24, lambda: [], None)),
    # The same decoder with the sequence length dynamic in [1, 128] (dynamic_shapes): etc
    # exports it once, and a prompt goes in one call.
    ("llama_decoder_dynamic", (LlamaDecoder, [1, 17, 342, 99, 5, 811], 24, lambda: [], 128)),
    ("whisper_step", (WhisperStep, [2, 7], 12, lambda: [torch.randn(1, 24, 128)], None)),
])


def generate(model, prompt, steps, extra):
    """Greedy decoding in eager mode: the prompt one token per call, then `steps` tokens."""
    ids, logits, others = [], [], []
    token = prompt[0]
    for pos in range(len(prompt) + steps - 1):
        out = as_tuple(model(torch.tensor([[token]]), torch.tensor([pos]), *extra))
        row = out[0].reshape(-1, out[0].shape[-1])[-1]
        logits.append(row.numpy().copy())
        others.append([o.numpy().copy() for o in out[1:]])
        if pos + 1 < len(prompt):
            token = prompt[pos + 1]
        else:
            token = int(row.argmax())
            ids.append(token)
    return ids, np.stack(logits), others


def make(name, out_dir):
    ctor, prompt, steps, extra_fn, bound = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    extra = extra_fn()
    example = (torch.tensor([[prompt[0]]]), torch.tensor([0]), *extra)
    dynamic = None
    if bound:
        seq = torch.export.Dim("seq", min=1, max=bound)
        example = (torch.tensor([prompt[:3]]), torch.arange(3), *extra)
        dynamic = ({1: seq}, {0: seq}) + tuple(None for _ in extra)
    with torch.no_grad():
        ep = torch.export.export(model, example, dynamic_shapes=dynamic)
        core = ep.run_decompositions()
        # Export ran the model once (buffers mutated): start eager from fresh state.
        torch.manual_seed(0)
        model = ctor().eval()
        ids, logits, others = generate(model, prompt, steps, extra)
    os.makedirs(out_dir, exist_ok=True)
    torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
    torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
    np.save(os.path.join(out_dir, "prompt.npy"), np.array(prompt, dtype=np.int64))
    for i, t in enumerate(extra):
        np.save(os.path.join(out_dir, f"input_{i + 2}.npy"), t.numpy())
    np.save(os.path.join(out_dir, "expected_ids.npy"), np.array(ids, dtype=np.int64))
    np.save(os.path.join(out_dir, "expected_logits.npy"), logits)
    for k in range(len(others[0])):
        np.save(os.path.join(out_dir, f"expected_out{k + 1}.npy"), np.stack([o[k] for o in others]))
    buffers = {n: list(b.shape) for n, b in model.named_buffers()}
    meta = {
        "name": name,
        "torch": torch.__version__,
        "steps": steps,
        "prompt_tokens": len(prompt),
        "parameters": sum(p.numel() for p in model.parameters()),
        "buffers": buffers,
        "ops": {"model.pt2": op_counts(ep), "model.core.pt2": op_counts(core)},
        "buffers_to_mutate": dict(core.graph_signature.buffers_to_mutate),
        "sequence_bound": bound,
    }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")


def make_single(name, out_dir):
    ctor, inputs_fn = SINGLE[name]
    torch.manual_seed(0)
    model, inputs = ctor().eval(), inputs_fn()
    with torch.no_grad():
        expected = model(*inputs)
        ep = torch.export.export(model, inputs)
        core = ep.run_decompositions()
    os.makedirs(out_dir, exist_ok=True)
    torch.export.save(ep, os.path.join(out_dir, "model.pt2"))
    torch.export.save(core, os.path.join(out_dir, "model.core.pt2"))
    for i, t in enumerate(inputs):
        np.save(os.path.join(out_dir, f"input_{i}.npy"), t.numpy())
    np.save(os.path.join(out_dir, "expected_0.npy"), expected.numpy())
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump({"name": name, "single": True, "torch": torch.__version__}, f, indent=1)
        f.write("\n")


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    names = argv[2:] or list(MODELS) + list(SINGLE)
    for name in names:
        if name in SINGLE:
            continue
        if name not in MODELS:
            print(f"make-decoder-fixtures: unknown model '{name}' (known: {', '.join(MODELS)})",
                  file=sys.stderr)
            return 2
    torch.set_num_threads(1)
    for name in names:
        (make_single if name in SINGLE else make)(name, os.path.join(argv[1], name))
        print(f"make-decoder-fixtures: {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
