// A 1x1 float convolution of channels-last tensors (see conv.h): out[r, :] = bias + x[r, :] @
// W^T for every position r, the positions the rows of a product whose columns are the output
// channels. The layers it runs are the small ones oneDNN leaves in a chain (8-24 channels on
// 112x112 and 56x56 planes): a GEMM's 32-column micro-tile would be mostly empty there, so the
// columns go in chunks of one to four vectors, as many positions as the registers hold at once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_vec.h"

namespace etc::rt::kernels {
namespace {

// The GEMM's K block: each block's sum starts from zero and is added to the out (the bias for
// the first), so the sums are the GEMM's, bit for bit.
constexpr int64_t kKBlock = kGemmKBlock;
// Rows a thread's part is a multiple of (of every tile's row count below), and rows whose
// epilogue runs together, while they are in cache.
constexpr int64_t kRowUnit = 48;

// P rows from row 0 of x (c_in apart) into columns [j0, j0 + NV * lanes) of y (c_out apart);
// kPartial: only the first `cols` of them exist (an out of fewer than 8 channels), stored lane
// by lane. Per output: the multiply-adds over each K block from zero in order, then added to
// the bias (the first block) or to the out.
template <typename V, int NV, int P, bool kPartial = false>
__attribute__((always_inline)) inline void tile(const float* x, int64_t c_in, const float* wt,
                                                int64_t npad, const float* bias, int64_t j0,
                                                int64_t cols, float* y, int64_t c_out) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  for (int64_t k0 = 0; k0 < c_in; k0 += kKBlock) {
    const int64_t k1 = std::min(c_in, k0 + kKBlock);
    V acc[P][NV];
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[p][v] = V{};
    }
    multiply_add_rows<V, NV, P>(x, c_in, wt + j0, npad, k0, k1, acc);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      float* yp = y + p * c_out + j0;
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        const int64_t c = v * kL;
        if constexpr (kPartial) {
          V base = load_v<V>(bias + j0 + c);
          if (k0 > 0) {
            for (int64_t i = 0; i < cols; ++i)
              base[i] = yp[c + i];
          }
          const V r = base + acc[p][v];
          for (int64_t i = 0; i < cols; ++i)
            yp[c + i] = r[i];
        } else {
          const V r = (k0 == 0 ? load_v<V>(bias + j0 + c) : load_v<V>(yp + c)) + acc[p][v];
          std::memcpy(yp + c, &r, sizeof r);
        }
      }
    }
  }
}

// Rows [r0, r1) for the columns [j0, j0 + NV * lanes): P rows at a time, then one.
template <typename V, int NV, int P, bool kPartial = false>
__attribute__((always_inline)) inline void rows_of(const float* x, int64_t c_in, const float* wt,
                                                   int64_t npad, const float* bias, int64_t j0,
                                                   int64_t cols, float* y, int64_t c_out,
                                                   int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + P <= r1; r += P)
    tile<V, NV, P, kPartial>(x + r * c_in, c_in, wt, npad, bias, j0, cols, y + r * c_out, c_out);
  for (; r < r1; ++r)
    tile<V, NV, 1, kPartial>(x + r * c_in, c_in, wt, npad, bias, j0, cols, y + r * c_out, c_out);
}

// Rows [r0, r1), every column: the whole vectors in chunks of up to four (AVX-512: 64
// columns) or two (8-lane builds: 16 registers), with as many rows per tile as leave the
// accumulators, the chunk's weights and the broadcast row value in registers; then the
// columns left (fewer than a vector) by 8-lane vectors, the last moved back to end at the last
// column where there are 8 (it computes some columns again: the same sums, the same bits),
// so that no store is a partial vector's lane by lane (mnasnet's 24 columns: 16 + 8).
template <typename V>
__attribute__((always_inline)) inline void rows_all_columns(const float* x, int64_t c_in,
                                                            const float* wt, int64_t npad,
                                                            const float* bias, float* y,
                                                            int64_t c_out, int64_t r0, int64_t r1) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  constexpr bool kWide = kL == 16;
  constexpr int64_t kChunk = (kWide ? 4 : 2) * kL;
  const int64_t whole = c_out / kL * kL;
  for (int64_t j0 = 0; j0 < whole; j0 += kChunk) {
    const int64_t cols = std::min(kChunk, whole - j0);
    const int64_t vectors = cols / kL;
    if (vectors == 1) {
      rows_of<V, 1, 12>(x, c_in, wt, npad, bias, j0, cols, y, c_out, r0, r1);
    } else if (vectors == 2) {
      rows_of<V, 2, kWide ? 12 : 6>(x, c_in, wt, npad, bias, j0, cols, y, c_out, r0, r1);
    } else if constexpr (kWide) {
      if (vectors == 3) {
        rows_of<V, 3, 8>(x, c_in, wt, npad, bias, j0, cols, y, c_out, r0, r1);
      } else {
        rows_of<V, 4, 6>(x, c_in, wt, npad, bias, j0, cols, y, c_out, r0, r1);
      }
    }
  }
  if (c_out < 8) {  // an out of fewer than 8 channels: stored lane by lane
    rows_of<Vec8, 1, 12, true>(x, c_in, wt, npad, bias, 0, c_out, y, c_out, r0, r1);
    return;
  }
  for (int64_t c = whole; c < c_out; c += 8) {
    const int64_t start = std::min(c, c_out - 8);
    rows_of<Vec8, 1, 12>(x, c_in, wt, npad, bias, start, 8, y, c_out, r0, r1);
  }
}

using RowsFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, float*, int64_t,
                        int64_t, int64_t);

__attribute__((target("avx512f,fma"))) void rows_avx512(const float* x, int64_t c_in,
                                                        const float* wt, int64_t npad,
                                                        const float* bias, float* y, int64_t c_out,
                                                        int64_t r0, int64_t r1) {
  rows_all_columns<Vec16>(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}
__attribute__((target("avx2,fma"))) void rows_avx2(const float* x, int64_t c_in, const float* wt,
                                                   int64_t npad, const float* bias, float* y,
                                                   int64_t c_out, int64_t r0, int64_t r1) {
  rows_all_columns<Vec8>(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}
void rows_portable(const float* x, int64_t c_in, const float* wt, int64_t npad, const float* bias,
                   float* y, int64_t c_out, int64_t r0, int64_t r1) {
  rows_all_columns<Vec8>(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}

}  // namespace

PointwiseNhwcWeights PointwiseNhwcWeights::pack(const float* w, int64_t c_out, int64_t c_in) {
  PointwiseNhwcWeights p;
  p.c_in = c_in;
  p.c_out = c_out;
  p.npad = (c_out + 15) / 16 * 16;
  p.wt.assign(static_cast<size_t>(c_in * p.npad), 0.0f);
  for (int64_t co = 0; co < c_out; ++co) {
    for (int64_t ci = 0; ci < c_in; ++ci)
      p.wt[static_cast<size_t>(ci * p.npad + co)] = w[co * c_in + ci];
  }
  return p;
}

void pointwise_nhwc_f32(const float* x, const PointwiseNhwcWeights& w, const float* bias,
                        int64_t rows, float* y, const Epilogue* epilogue) {
  RowsFn run = isa_build(rows_avx512, rows_avx2, rows_portable);
  const int64_t c_in = w.c_in, c_out = w.c_out;
  // The bias (or zero) to the packed weights' width: the tiles read whole vectors of it.
  std::vector<float> padded(static_cast<size_t>(w.npad), 0.0f);
  if (bias != nullptr) std::copy_n(bias, c_out, padded.begin());
  // The epilogue on each span of rows as soon as it is written (about 4 K floats, in L1),
  // unless an out of it lies over the input (then on the whole out after).
  const bool by_rows = epilogue != nullptr && !epilogue->after_inputs;
  const int64_t span = std::max<int64_t>(1, 4096 / (kRowUnit * c_out)) * kRowUnit;
  const int64_t units = (rows + kRowUnit - 1) / kRowUnit;
  // At least ~64 K multiply-adds a thread's part.
  const int64_t grain =
      std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, kRowUnit * c_in * c_out));
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    const int64_t end = std::min(rows, u1 * kRowUnit);
    for (int64_t r0 = u0 * kRowUnit; r0 < end; r0 += span) {
      const int64_t r1 = std::min(end, r0 + span);
      run(x, c_in, w.wt.data(), w.npad, padded.data(), y, c_out, r0, r1);
      if (by_rows) apply_epilogue(*epilogue, r0 * c_out, r1 * c_out);
    }
  });
  if (epilogue != nullptr && !by_rows) apply_epilogue_whole(*epilogue, rows * c_out);
}

}  // namespace etc::rt::kernels
