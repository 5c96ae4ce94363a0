// The delegate's reduction, normalisation and scan kernels (see cuda_kernels.h for what each
// computes): sum / mean / amax / amin / prod / any, var, argmax / argmin (max.dim / min.dim),
// sort and topk, softmax and log_softmax, layer, group and batch norm, cumsum. Like
// cuda_kernels.cu, written for obvious equivalence with the CPU reference kernels: the same
// compute types and NaN rules, one block per output, row or lane (reductions to few outputs:
// a block per chunk of each output, then a block per output). Results do not depend on the
// order in which threads run: block reductions combine in a fixed tree, sorts order by a
// total order, and no kernel uses atomics.
#include <cstdint>
#include <type_traits>
#include <utility>

#include "backends/cuda/runtime/cuda_kernel_util.cuh"
#include "backends/cuda/runtime/cuda_kernels.h"
#include "support/wrapping_math.h"

namespace etc::cuda::kernels {
namespace {

// ---- Block reductions ------------------------------------------------------------------

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. `identity` fills the lanes of the last step that have no warp behind them.
template <typename T, typename F>
__device__ T block_reduce(T v, F f, T identity, T* shared) {
  for (int o = 16; o > 0; o /= 2)
    v = f(v, __shfl_down_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // shared may still be read from a previous reduction
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  if (warp == 0) {
    v = lane < warps ? shared[lane] : identity;
    for (int o = 16; o > 0; o /= 2)
      v = f(v, __shfl_down_sync(0xffffffffu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
// any: 1 once any element is non-zero (NaN counts, as in ATen).
struct AnyNonzero {
  template <typename T>
  __device__ T operator()(T a, T v) const {
    return (a != T(0) || v != T(0)) ? T(1) : T(0);
  }
};
// amax with NaN propagation: (v > a || v != v) ? v : a, as the CPU reduction.
struct MaxNan {
  template <typename T>
  __device__ T operator()(T a, T v) const {
    return (v > a || v != v) ? v : a;
  }
};

// amin likewise: (v < a || v != v) ? v : a.
struct MinNan {
  template <typename T>
  __device__ T operator()(T a, T v) const {
    return (v < a || v != v) ? v : a;
  }
};
// prod: integers wrap in two's complement, as the CPU reduction.
struct Mul {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, int64_t>) {
      return wrapping_mul(a, b);
    } else {
      return a * b;
    }
  }
};

__device__ __forceinline__ int64_t decompose(int64_t i, const Shape& s, const int64_t* strides) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    off += (i % s.sizes[d]) * strides[d];
    i /= s.sizes[d];
  }
  return off;
}

// Reduces the reduced elements [begin, end) of the output whose first element is at `base`
// over the block; every thread gets the result.
template <typename Acc, typename F>
__device__ Acc reduce_range(const ReduceArgs& p, int64_t base, int64_t begin, int64_t end, Acc init,
                            F f, Acc* shared) {
  Acc acc = init;
  for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
    const int64_t at = base + decompose(r, p.reduced, p.reduced_strides);
    Acc v;
    if constexpr (std::is_same_v<Acc, int64_t>) {
      v = load_int(p.in, p.in_type, at);
    } else {
      v = static_cast<Acc>(load_double(p.in, p.in_type, at));
    }
    acc = f(acc, v);
  }
  return block_reduce(acc, f, init, shared);
}

// Writes output o from its accumulator (a mean divides by the count).
template <typename Acc>
__device__ void store_reduced(const ReduceArgs& p, int64_t o, int64_t count, Acc acc) {
  if constexpr (std::is_same_v<Acc, int64_t>) {
    store_int(p.out, p.out_type, o, acc);
  } else {
    if (p.op == ReduceOp::kMean) acc /= static_cast<Acc>(count);
    store_double(p.out, p.out_type, o, static_cast<double>(acc));
  }
}

// One block per output element; the block's threads stride over the reduced elements.
template <typename Acc, typename F>
__global__ void reduce_kernel(ReduceArgs p, int64_t outputs, int64_t count, Acc init, F f) {
  __shared__ Acc shared[32];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = decompose(o, p.kept, p.kept_strides);
    const Acc acc = reduce_range(p, base, 0, count, init, f, shared);
    if (threadIdx.x == 0) store_reduced(p, o, count, acc);
  }
}

// Split reduction, first step: block b takes output b / splits and its chunk b % splits
// (kReduceChunk consecutive reduced elements, the last one shorter) into partial[b].
template <typename Acc, typename F>
__global__ void reduce_partial_kernel(ReduceArgs p, int64_t outputs, int64_t count, int64_t splits,
                                      Acc init, F f, Acc* partial) {
  __shared__ Acc shared[32];
  for (int64_t b = blockIdx.x; b < outputs * splits; b += gridDim.x) {
    const int64_t o = b / splits, s = b % splits;
    const int64_t begin = s * kReduceChunk;
    const int64_t end = begin + kReduceChunk < count ? begin + kReduceChunk : count;
    const Acc acc =
        reduce_range(p, decompose(o, p.kept, p.kept_strides), begin, end, init, f, shared);
    if (threadIdx.x == 0) partial[b] = acc;
  }
}

// Second step: one block per output combines its partials in a fixed tree.
template <typename Acc, typename F>
__global__ void reduce_final_kernel(ReduceArgs p, int64_t outputs, int64_t count, int64_t splits,
                                    Acc init, F f, const Acc* partial) {
  __shared__ Acc shared[32];
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    Acc acc = init;
    for (int64_t s = threadIdx.x; s < splits; s += blockDim.x)
      acc = f(acc, partial[o * splits + s]);
    acc = block_reduce(acc, f, init, shared);
    if (threadIdx.x == 0) store_reduced(p, o, count, acc);
  }
}

unsigned threads_for(int64_t count) {
  unsigned t = 32;
  while (t < 256 && t < count)
    t *= 2;
  return t;
}

// Queues the reduction of every output, split in two steps when reduce_splits() says so.
template <typename Acc, typename F>
void queue_reduce(const ReduceArgs& p, int64_t outputs, int64_t count, Acc init, F f, void* scratch,
                  cudaStream_t stream) {
  const int64_t splits = reduce_splits(outputs, count);
  const auto cap = [](int64_t n) { return static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16); };
  if (splits == 1) {
    reduce_kernel<Acc><<<cap(outputs), threads_for(count), 0, stream>>>(p, outputs, count, init, f);
    return;
  }
  auto* partial = static_cast<Acc*>(scratch);
  reduce_partial_kernel<Acc>
      <<<cap(outputs * splits), kThreads, 0, stream>>>(p, outputs, count, splits, init, f, partial);
  reduce_final_kernel<Acc><<<cap(outputs), threads_for(splits), 0, stream>>>(
      p, outputs, count, splits, init, f, partial);
}

// ---- var ------------------------------------------------------------------------------

// One block per output element: the mean in double, then the sum of squared deviations from
// it in double (the CPU kernel's two passes), divided by max(count - correction, 0).
__global__ void var_kernel(ReduceArgs p, int64_t outputs, int64_t count, double correction) {
  __shared__ double shared[32];
  const double n = static_cast<double>(count);
  const double d = n - correction;
  const double divisor = d < 0.0 ? 0.0 : d;  // std::max(d, 0.0), as the CPU kernel
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const int64_t base = decompose(o, p.kept, p.kept_strides);
    double s = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x)
      s += load_double(p.in, p.in_type, base + decompose(r, p.reduced, p.reduced_strides));
    const double mean = block_reduce(s, Add{}, 0.0, shared) / n;
    double m2 = 0;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
      const double x =
          load_double(p.in, p.in_type, base + decompose(r, p.reduced, p.reduced_strides)) - mean;
      m2 += x * x;
    }
    m2 = block_reduce(m2, Add{}, 0.0, shared);
    if (threadIdx.x == 0) store_double(p.out, p.out_type, o, m2 / divisor);
  }
}

// ---- Index reductions: argmax / argmin, max.dim / min.dim ------------------------------

// Copies element `from` of `src` to element `to` of `dst` (both of type t), bit for bit.
__device__ __forceinline__ void copy_element(const void* src, int64_t from, void* dst, int64_t to,
                                             Elem t) {
  switch (t) {
    case Elem::kI64:
      static_cast<uint64_t*>(dst)[to] = static_cast<const uint64_t*>(src)[from];
      break;
    case Elem::kF32:
    case Elem::kI32:
      static_cast<uint32_t*>(dst)[to] = static_cast<const uint32_t*>(src)[from];
      break;
    case Elem::kF16:
    case Elem::kBF16:
    case Elem::kI16:
      static_cast<uint16_t*>(dst)[to] = static_cast<const uint16_t*>(src)[from];
      break;
    case Elem::kBool:
    case Elem::kU8:
    case Elem::kI8:
      static_cast<uint8_t*>(dst)[to] = static_cast<const uint8_t*>(src)[from];
      break;
  }
}

// Whether element (v, i) beats the best so far (bv, bi) as the CPU kernel's scan decides: a NaN
// beats every number, else the greater (kMax) or smaller value; between equal values (or two
// NaNs) the lower index. bi < 0: no best yet. A total order, so every reduction tree gives the
// CPU kernel's answer.
template <typename C>
__device__ __forceinline__ bool beats(C v, int64_t i, C bv, int64_t bi, bool max) {
  if (i < 0) return false;
  if (bi < 0) return true;
  const bool nan = v != v, best_nan = bv != bv;
  if (nan || best_nan) return nan && (!best_nan || i < bi);
  if (v == bv) return i < bi;
  return max ? v > bv : v < bv;
}

constexpr int kArgThreads = 256;

// One block per lane of [outer, len, inner]: each thread scans its strided share of the lane,
// then the block reduces the (value, index) pairs in shared memory. C: float for float
// inputs, int64 for integers and bool (the CPU kernel's compute types).
template <typename C>
__global__ void __launch_bounds__(kArgThreads)
    arg_extreme_kernel(const void* in, Elem type, int64_t lanes, int64_t len, int64_t inner,
                       bool max, void* values, int64_t* indices) {
  __shared__ C best[kArgThreads];
  __shared__ int64_t best_at[kArgThreads];
  const unsigned t = threadIdx.x;
  for (int64_t lane = blockIdx.x; lane < lanes; lane += gridDim.x) {
    const int64_t base = lane / inner * len * inner + lane % inner;
    C bv{};
    int64_t bi = -1;
    for (int64_t j = t; j < len; j += blockDim.x) {
      C v;
      if constexpr (std::is_same_v<C, float>) {
        v = load_float(in, type, base + j * inner);
      } else {
        v = load_int(in, type, base + j * inner);
      }
      if (beats(v, j, bv, bi, max)) {
        bv = v;
        bi = j;
      }
    }
    best[t] = bv;
    best_at[t] = bi;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {  // blockDim.x is a power of two
      if (t < s && beats(best[t + s], best_at[t + s], best[t], best_at[t], max)) {
        best[t] = best[t + s];
        best_at[t] = best_at[t + s];
      }
      __syncthreads();
    }
    if (t == 0) {
      indices[lane] = best_at[0];
      if (values != nullptr) copy_element(in, base + best_at[0] * inner, values, lane, type);
    }
    __syncthreads();  // best / best_at are rewritten for the next lane
  }
}

// ---- sort / topk ---------------------------------------------------------------------------

// Elements one block sorts in shared memory (a power of two: 32 KiB of keys and indices),
// and its threads.
constexpr int kSortTile = 2048;
constexpr int kSortThreads = 512;

// The sort key of element i: an unsigned integer whose order is the CPU kernel's ascending
// order (numbers by value, -0.0 equal to 0.0, every NaN above +inf and equal to the others),
// complemented for descending. Equal keys are ordered by index, which makes the order total:
// any correct sort of (key, index) pairs is the CPU kernel's stable sort.
__device__ __forceinline__ uint64_t sort_key(const void* p, Elem t, int64_t i, bool descending) {
  constexpr uint64_t kSign = uint64_t{1} << 63;
  uint64_t key;
  if (is_float(t)) {
    double v = load_double(p, t, i);  // exact for every float type
    if (v != v) {
      key = ~uint64_t{0};
    } else {
      if (v == 0.0) v = 0.0;  // -0.0 sorts as 0.0
      const auto bits = static_cast<uint64_t>(__double_as_longlong(v));
      key = (bits & kSign) != 0 ? ~bits : bits | kSign;
    }
  } else {
    key = static_cast<uint64_t>(load_int(p, t, i)) ^ kSign;
  }
  return descending ? ~key : key;
}

__device__ __forceinline__ bool pair_less(uint64_t ka, int64_t ia, uint64_t kb, int64_t ib) {
  return ka < kb || (ka == kb && ia < ib);
}

// Element j of lane `lane` of the result gets element i of the input lane: the value (bit
// for bit) and its index.
__device__ __forceinline__ void sort_emit(const SortArgs& p, int64_t lane, int64_t j, int64_t i) {
  const int64_t o = lane / p.inner, r = lane % p.inner;
  const int64_t to = (o * p.k + j) * p.inner + r;
  copy_element(p.in, (o * p.len + i) * p.inner + r, p.values, to, p.type);
  p.indices[to] = i;
}

// Sorts `size` (a power of two) pairs in shared memory ascending: a bitonic network, each
// step one compare-exchange per pair of elements, the block's threads striding over the
// pairs.
__device__ void bitonic_sort(uint64_t* keys, int64_t* at, int size) {
  for (int k = 2; k <= size; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int t = threadIdx.x; t < size / 2; t += blockDim.x) {
        const int i = 2 * t - (t & (j - 1));  // the lower element of pair t (bit j clear)
        const int partner = i + j;
        const bool up = (i & k) == 0;  // this run of k elements ends ascending
        if (pair_less(keys[partner], at[partner], keys[i], at[i]) == up) {
          const uint64_t kk = keys[i];
          keys[i] = keys[partner];
          keys[partner] = kk;
          const int64_t ii = at[i];
          at[i] = at[partner];
          at[partner] = ii;
        }
      }
      __syncthreads();
    }
  }
}

// One block per tile of kSortTile elements of a lane (`tiles` per lane): the tile's (key,
// index) pairs sorted in shared memory, padded to `size` with pairs above every element.
// With keys_out null the lane is one tile and its first k go to the outputs; otherwise the
// sorted tile goes to keys_out / at_out ([lane, len], for the merge passes).
__global__ void __launch_bounds__(kSortThreads)
    sort_tile_kernel(SortArgs p, int64_t lanes, int64_t tiles, int size, uint64_t* keys_out,
                     int64_t* at_out) {
  __shared__ uint64_t keys[kSortTile];
  __shared__ int64_t at[kSortTile];
  for (int64_t tile = blockIdx.x; tile < lanes * tiles; tile += gridDim.x) {
    const int64_t lane = tile / tiles, first = tile % tiles * kSortTile;
    const int64_t n = p.len - first < size ? p.len - first : size;
    const int64_t base = lane / p.inner * p.len * p.inner + lane % p.inner;
    for (int i = threadIdx.x; i < size; i += blockDim.x) {
      if (i < n) {
        keys[i] = sort_key(p.in, p.type, base + (first + i) * p.inner, p.descending);
        at[i] = first + i;
      } else {
        keys[i] = ~uint64_t{0};
        at[i] = INT64_MAX;
      }
    }
    __syncthreads();
    bitonic_sort(keys, at, size);
    if (keys_out == nullptr) {
      for (int64_t j = threadIdx.x; j < p.k; j += blockDim.x)
        sort_emit(p, lane, j, at[j]);
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        keys_out[lane * p.len + first + i] = keys[i];
        at_out[lane * p.len + first + i] = at[i];
      }
    }
    __syncthreads();  // keys / at are rewritten for the next tile
  }
}

// One merge pass over every lane: sorted runs of `width` pairs, merged two by two into runs
// of 2 * width. Each pair goes to its rank in the merged run: its position in its own run plus
// the number of pairs of the other run that come before it (a binary search; the pairs are
// distinct, so the ranks are too).
__global__ void sort_merge_kernel(const uint64_t* keys, const int64_t* at, uint64_t* keys_out,
                                  int64_t* at_out, int64_t lanes, int64_t len, int64_t width) {
  ETC_GRID_STRIDE(g, lanes * len) {
    const int64_t row = g / len * len, pos = g % len;
    const int64_t run = pos / width;
    const int64_t merged = (run & ~int64_t{1}) * width;  // where the merged pair of runs starts
    const int64_t other = (run ^ 1) * width;             // the run this one merges with
    const uint64_t key = keys[g];
    const int64_t i = at[g];
    int64_t before = 0;
    if (other < len) {
      int64_t lo = other, hi = other + width < len ? other + width : len;
      while (lo < hi) {  // the first pair of the other run not before this one
        const int64_t mid = lo + (hi - lo) / 2;
        if (pair_less(keys[row + mid], at[row + mid], key, i)) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      before = lo - other;
    }
    const int64_t to = row + merged + (pos - run * width) + before;
    keys_out[to] = key;
    at_out[to] = i;
  }
}

// The first k of each sorted lane ([lane, len] indices) into the outputs.
__global__ void sort_emit_kernel(SortArgs p, const int64_t* at, int64_t lanes) {
  ETC_GRID_STRIDE(g, lanes * p.k) {
    const int64_t lane = g / p.k, j = g % p.k;
    sort_emit(p, lane, j, at[lane * p.len + j]);
  }
}

// ---- Softmax, layer norm ---------------------------------------------------------------

// One block per (outer, inner) row of length len with stride inner.
__global__ void softmax_kernel(const void* in, void* out, Elem type, int64_t outer, int64_t len,
                               int64_t inner, bool log) {
  __shared__ float shared[32];
  for (int64_t row = blockIdx.x; row < outer * inner; row += gridDim.x) {
    const int64_t o = row / inner, j = row % inner;
    const int64_t base = o * len * inner + j;
    float mx = -INFINITY;
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x) {
      const float v = load_float(in, type, base + d * inner);
      mx = v > mx ? v : mx;
    }
    // The CPU keeps the first NaN-free maximum: `x > mx ? x : mx` ignores NaN. Same here.
    mx = block_reduce(
        mx, [](float a, float b) { return b > a ? b : a; }, -INFINITY, shared);
    float sum = 0;
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x)
      sum += expf(load_float(in, type, base + d * inner) - mx);
    sum = block_reduce(sum, Add{}, 0.0f, shared);
    const float lse = mx + logf(sum);
    const float inv = 1.0f / sum;
    for (int64_t d = threadIdx.x; d < len; d += blockDim.x) {
      const float x = load_float(in, type, base + d * inner);
      store_float(out, type, base + d * inner, log ? x - lse : expf(x - mx) * inv);
    }
  }
}

__global__ void layer_norm_kernel(const void* x, const void* weight, const void* bias, void* y,
                                  void* mean, void* rstd, Elem type, int64_t rows, int64_t cols,
                                  double eps) {
  __shared__ double shared[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * cols;
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      s += load_float(x, type, base + j);
    s = block_reduce(s, Add{}, 0.0, shared);
    const double mu = s / static_cast<double>(cols);
    double v = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = static_cast<double>(load_float(x, type, base + j)) - mu;
      v += d * d;
    }
    v = block_reduce(v, Add{}, 0.0, shared);
    const double inv = 1.0 / sqrt(v / static_cast<double>(cols) + eps);  // biased variance
    const float m = static_cast<float>(mu), rs = static_cast<float>(inv);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const float w = weight ? load_float(weight, type, j) : 1.0f;
      const float b = bias ? load_float(bias, type, j) : 0.0f;
      store_float(y, type, base + j, (load_float(x, type, base + j) - m) * rs * w + b);
    }
    if (threadIdx.x == 0) {
      store_float(mean, type, r, m);
      store_float(rstd, type, r, rs);
    }
  }
}

__global__ void batch_norm_kernel(const void* x, const void* weight, const void* bias,
                                  const void* rmean, const void* rvar, Elem pt, void* y, Elem type,
                                  int64_t total, int64_t c, int64_t inner, double eps) {
  ETC_GRID_STRIDE(i, total) {
    const int64_t ch = (i / inner) % c;
    const double w = weight ? load_double(weight, pt, ch) : 1.0;
    const double b = bias ? load_double(bias, pt, ch) : 0.0;
    const double s = w / sqrt(load_double(rvar, pt, ch) + eps);
    const float scale = static_cast<float>(s);
    const float shift = static_cast<float>(b - load_double(rmean, pt, ch) * s);
    store_float(y, type, i, load_float(x, type, i) * scale + shift);
  }
}

__global__ void cumsum_kernel(const void* in, Elem in_type, void* out, Elem out_type, int64_t lanes,
                              int64_t len, int64_t inner, bool integer) {
  ETC_GRID_STRIDE(lane, lanes) {
    const int64_t base = lane / inner * len * inner + lane % inner;
    if (integer) {
      int64_t s = 0;
      for (int64_t j = 0; j < len; ++j) {
        s = wrapping_add(s, load_int(in, in_type, base + j * inner));
        store_int(out, out_type, base + j * inner, s);
      }
    } else {
      double s = 0.0;
      for (int64_t j = 0; j < len; ++j) {
        s += load_double(in, in_type, base + j * inner);
        store_double(out, out_type, base + j * inner, s);
      }
    }
  }
}

__global__ void channel_affine_kernel(void* y, const void* weight, const void* bias, Elem type,
                                      int64_t total, int64_t c, int64_t inner) {
  ETC_GRID_STRIDE(i, total) {
    const int64_t ch = (i / inner) % c;
    const float w = weight ? load_float(weight, type, ch) : 1.0f;
    const float b = bias ? load_float(bias, type, ch) : 0.0f;
    store_float(y, type, i, load_float(y, type, i) * w + b);
  }
}

}  // namespace

cudaError_t launch_reduce(const ReduceArgs& p, void* scratch, cudaStream_t stream) {
  int64_t outputs = 1, count = 1;
  for (int d = 0; d < p.kept.rank; ++d)
    outputs *= p.kept.sizes[d];
  for (int d = 0; d < p.reduced.rank; ++d)
    count *= p.reduced.sizes[d];
  if (outputs == 0) return cudaSuccess;
  if (reduce_splits(outputs, count) > 1 && scratch == nullptr) return cudaErrorInvalidValue;
  const bool fl_in = p.in_type == Elem::kF32 || p.in_type == Elem::kF16 || p.in_type == Elem::kBF16;
  const auto run = [&](auto init, auto f) {
    queue_reduce(p, outputs, count, init, f, scratch, stream);
  };
  if (p.op == ReduceOp::kAny) {
    if (fl_in) {
      run(0.0, AnyNonzero{});
    } else {
      run(int64_t(0), AnyNonzero{});
    }
  } else if (p.op == ReduceOp::kAmax) {
    if (fl_in) {
      run(-static_cast<double>(INFINITY), MaxNan{});
    } else {
      run(int64_t(INT64_MIN), MaxNan{});
    }
  } else if (p.op == ReduceOp::kAmin) {
    if (fl_in) {
      run(static_cast<double>(INFINITY), MinNan{});
    } else {
      run(int64_t(INT64_MAX), MinNan{});
    }
  } else if (p.op == ReduceOp::kProd) {
    if (p.integer) {
      run(int64_t(1), Mul{});
    } else {
      run(1.0, Mul{});
    }
  } else if (p.integer) {
    run(int64_t(0), Add{});
  } else {
    run(0.0, Add{});
  }
  return cudaGetLastError();
}

cudaError_t launch_var(const ReduceArgs& p, double correction, cudaStream_t stream) {
  int64_t outputs = 1, count = 1;
  for (int d = 0; d < p.kept.rank; ++d)
    outputs *= p.kept.sizes[d];
  for (int d = 0; d < p.reduced.rank; ++d)
    count *= p.reduced.sizes[d];
  if (outputs == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(outputs < 65535 * 16 ? outputs : 65535 * 16);
  var_kernel<<<blocks, threads_for(count), 0, stream>>>(p, outputs, count, correction);
  return cudaGetLastError();
}

cudaError_t launch_arg_extreme(const void* in, Elem type, int64_t outer, int64_t len, int64_t inner,
                               bool max, void* values, int64_t* indices, cudaStream_t stream) {
  const int64_t lanes = outer * inner;
  if (lanes == 0 || len == 0) return cudaSuccess;  // the ops refuse an empty dim first
  const unsigned blocks = static_cast<unsigned>(lanes < 65535 * 16 ? lanes : 65535 * 16);
  const unsigned threads = threads_for(len);  // a power of two, at most kArgThreads
  if (type == Elem::kF32 || type == Elem::kF16 || type == Elem::kBF16) {
    arg_extreme_kernel<float>
        <<<blocks, threads, 0, stream>>>(in, type, lanes, len, inner, max, values, indices);
  } else {
    arg_extreme_kernel<int64_t>
        <<<blocks, threads, 0, stream>>>(in, type, lanes, len, inner, max, values, indices);
  }
  return cudaGetLastError();
}

size_t sort_scratch_bytes(int64_t lanes, int64_t len) {
  if (len <= kSortTile) return 0;
  // Two copies (the merge passes ping-pong) of each element's key and index.
  return static_cast<size_t>(lanes * len) * 2 * (sizeof(uint64_t) + sizeof(int64_t));
}

cudaError_t launch_sort(const SortArgs& p, void* scratch, cudaStream_t stream) {
  const int64_t lanes = p.outer * p.inner;
  if (lanes == 0 || p.k == 0) return cudaSuccess;
  const auto blocks = [](int64_t n) {
    return static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16);
  };
  if (p.len <= kSortTile) {  // one block per lane, no scratch
    int size = 1;
    while (size < p.len)
      size *= 2;
    const int threads = size / 2 < 32 ? 32 : size / 2 < kSortThreads ? size / 2 : kSortThreads;
    sort_tile_kernel<<<blocks(lanes), threads, 0, stream>>>(p, lanes, 1, size, nullptr, nullptr);
    return cudaGetLastError();
  }
  if (scratch == nullptr) return cudaErrorInvalidValue;
  const int64_t n = lanes * p.len;
  auto* keys = static_cast<uint64_t*>(scratch);
  auto* at = reinterpret_cast<int64_t*>(keys + n);
  auto* keys_next = reinterpret_cast<uint64_t*>(at + n);
  auto* at_next = reinterpret_cast<int64_t*>(keys_next + n);
  const int64_t tiles = (p.len + kSortTile - 1) / kSortTile;
  sort_tile_kernel<<<blocks(lanes * tiles), kSortThreads, 0, stream>>>(p, lanes, tiles, kSortTile,
                                                                       keys, at);
  cudaError_t status = cudaGetLastError();
  for (int64_t width = kSortTile; status == cudaSuccess && width < p.len; width *= 2) {
    sort_merge_kernel<<<grid_for(n), kThreads, 0, stream>>>(keys, at, keys_next, at_next, lanes,
                                                            p.len, width);
    status = cudaGetLastError();
    std::swap(keys, keys_next);
    std::swap(at, at_next);
  }
  if (status != cudaSuccess) return status;
  sort_emit_kernel<<<grid_for(lanes * p.k), kThreads, 0, stream>>>(p, at, lanes);
  return cudaGetLastError();
}

cudaError_t launch_softmax(const void* in, void* out, Elem type, int64_t outer, int64_t len,
                           int64_t inner, bool log, cudaStream_t stream) {
  const int64_t rows = outer * inner;
  if (rows == 0 || len == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
  softmax_kernel<<<blocks, threads_for(len), 0, stream>>>(in, out, type, outer, len, inner, log);
  return cudaGetLastError();
}

cudaError_t launch_layer_norm(const void* x, const void* weight, const void* bias, void* y,
                              void* mean, void* rstd, Elem type, int64_t rows, int64_t cols,
                              double eps, cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  const unsigned blocks = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
  layer_norm_kernel<<<blocks, threads_for(cols), 0, stream>>>(x, weight, bias, y, mean, rstd, type,
                                                              rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t launch_batch_norm(const void* x, const void* weight, const void* bias, const void* mean,
                              const void* var, Elem param_type, void* y, Elem type, int64_t n,
                              int64_t c, int64_t inner, double eps, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  batch_norm_kernel<<<grid_for(total), kThreads, 0, stream>>>(
      x, weight, bias, mean, var, param_type, y, type, total, c, inner, eps);
  return cudaGetLastError();
}

cudaError_t launch_cumsum(const void* in, Elem in_type, void* out, Elem out_type, int64_t outer,
                          int64_t len, int64_t inner, bool integer, cudaStream_t stream) {
  const int64_t lanes = outer * inner;
  if (lanes == 0 || len == 0) return cudaSuccess;
  cumsum_kernel<<<grid_for(lanes), kThreads, 0, stream>>>(in, in_type, out, out_type, lanes, len,
                                                          inner, integer);
  return cudaGetLastError();
}

cudaError_t launch_channel_affine(void* y, const void* weight, const void* bias, Elem type,
                                  int64_t n, int64_t c, int64_t inner, cudaStream_t stream) {
  const int64_t total = n * c * inner;
  if (total == 0) return cudaSuccess;
  channel_affine_kernel<<<grid_for(total), kThreads, 0, stream>>>(y, weight, bias, type, total, c,
                                                                  inner);
  return cudaGetLastError();
}

}  // namespace etc::cuda::kernels
