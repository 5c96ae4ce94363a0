// Intra-op parallelism for the CPU kernels: one process-wide pool of worker threads and a
// parallel_for with a static, deterministic split. Kernels split work only where every
// output element is computed by one thread in the same order as serially (GEMM tiles,
// channels, contiguous element ranges), so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace etc::rt::kernels {

// Threads the kernels may use (>= 1). Default: $ETC_NUM_THREADS if set, else the hardware
// concurrency (at most 64).
int num_threads();
// n <= 0 restores the default. Takes effect at the next parallel_for.
void set_num_threads(int n);

// Calls fn(begin, end) on contiguous chunks covering [0, n), each at least `grain` long
// (except when n is smaller), at most num_threads() chunks; the calling thread runs one of
// them. Runs fn(0, n) directly when one chunk suffices or when called from inside another
// parallel_for. Chunk boundaries depend only on n, grain and the thread count.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace etc::rt::kernels
