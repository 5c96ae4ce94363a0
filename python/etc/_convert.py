"""Arrays across the boundary: what callers pass in, what etc hands back.

Inputs go to the native module as they are when they already are C-contiguous arrays of a
dtype etc has (NumPy arrays through the buffer protocol, torch tensors and anything else with
``__dlpack__`` through DLPack): etc reads them in place, and the only copy is the program's
own (into its planned input memory, as ExecuTorch's runtime does). Anything else is made into
such an array first, and counted (``Module.stats()["conversions"]``).

Outputs come back as NumPy arrays that own their memory (copied once from the program's);
when the inputs were torch tensors they are handed out as torch tensors sharing that memory.
NumPy has no bfloat16: a bfloat16 output becomes a float32 array (exactly), or a
torch.bfloat16 tensor for torch callers.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def torch_module() -> Any:
    """torch, if the caller has imported it (etc never imports torch itself to run)."""
    return sys.modules.get("torch")


def is_torch_tensor(x: Any) -> bool:
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def as_input(x: Any) -> tuple[Any, bool]:
    """``x`` as an array the native module reads in place, and whether that took a conversion."""
    if is_torch_tensor(x):
        t = x.detach()
        if t.is_contiguous():
            return t, False
        return t.contiguous(), True
    if isinstance(x, np.ndarray):
        if x.flags.c_contiguous and x.flags.aligned:
            return x, False
        return np.ascontiguousarray(x), True
    if hasattr(x, "__dlpack__"):
        return x, False
    return np.ascontiguousarray(np.asarray(x)), True


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) widened exactly to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def as_output(a: np.ndarray, dtype: str, want_torch: bool) -> Any:
    """An output array in the kind the caller used."""
    if want_torch:
        torch = torch_module()
        if dtype == "bfloat16":
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)
    if dtype == "bfloat16":
        return bf16_bits_to_float32(a)
    return a
