"""Layers the fixture generators share (make-torch-fixtures.py, make-decoder-fixtures.py):
Llama-style RMSNorm and the rotary embedding's rotate_half. A change here regenerates both
fixture sets (test/torch/fixtures.sh hashes this file with the generator)."""
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
