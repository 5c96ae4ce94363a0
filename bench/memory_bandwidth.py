"""The machine's memory bandwidth as the Python benches measure it beside their figures."""
import time

import numpy as np


def copy_bandwidth():
    """GB/s of a plain copy of 256 MiB (read + write counted once each), best of 5."""
    a = np.ones(1 << 26, dtype=np.float32)
    b = np.empty_like(a)
    best = 1e9
    for _ in range(5):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best / 1e9
