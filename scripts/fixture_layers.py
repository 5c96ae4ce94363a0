"""What the fixture generators share (make-torch-fixtures.py, make-decoder-fixtures.py):
Llama-style RMSNorm, the rotary embedding's rotate_half, and two helpers. A change here
regenerates both fixture sets (test/torch/fixtures.sh hashes this file with the generator)."""
import collections

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def op_counts(ep):
    """Call counts per target of an ExportedProgram's graph, sorted by target."""
    counts = collections.Counter()
    for node in ep.graph.nodes:
        if node.op == "call_function":
            counts[str(node.target)] += 1
    return dict(sorted(counts.items()))


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
