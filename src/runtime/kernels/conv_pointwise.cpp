// A 1x1 float convolution of channels-last tensors (see conv.h): out[r, :] = bias + x[r, :] @
// W^T for every position r, the positions the rows of a product whose columns are the output
// channels. Two loops: outs of 16 channels or more by panels of 16 output channels with the
// rows outer (below); fewer (8-channel outs on 112x112 planes: a 16-wide panel would be half
// empty) by 8-lane vectors, 12 positions at once.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
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

// Rows [r0, r1), every column of an out of fewer than 16 channels: by 8-lane vectors, the
// second moved back to end at the last column (it computes some columns again: the same sums,
// the same bits), so that no store is a partial vector's lane by lane; an out of fewer than 8
// channels lane by lane.
__attribute__((always_inline)) inline void rows_narrow(const float* x, int64_t c_in,
                                                       const float* wt, int64_t npad,
                                                       const float* bias, float* y, int64_t c_out,
                                                       int64_t r0, int64_t r1) {
  if (c_out < 8) {
    rows_of<Vec8, 1, 12, true>(x, c_in, wt, npad, bias, 0, c_out, y, c_out, r0, r1);
    return;
  }
  rows_of<Vec8, 1, 12>(x, c_in, wt, npad, bias, 0, 8, y, c_out, r0, r1);
  if (c_out > 8) rows_of<Vec8, 1, 12>(x, c_in, wt, npad, bias, c_out - 8, 8, y, c_out, r0, r1);
}

using RowsFn = void (*)(const float*, int64_t, const float*, int64_t, const float*, float*, int64_t,
                        int64_t, int64_t);

__attribute__((target("avx512f,fma"))) void rows_avx512(const float* x, int64_t c_in,
                                                        const float* wt, int64_t npad,
                                                        const float* bias, float* y, int64_t c_out,
                                                        int64_t r0, int64_t r1) {
  rows_narrow(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}
__attribute__((target("avx2,fma"))) void rows_avx2(const float* x, int64_t c_in, const float* wt,
                                                   int64_t npad, const float* bias, float* y,
                                                   int64_t c_out, int64_t r0, int64_t r1) {
  rows_narrow(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}
void rows_portable(const float* x, int64_t c_in, const float* wt, int64_t npad, const float* bias,
                   float* y, int64_t c_out, int64_t r0, int64_t r1) {
  rows_narrow(x, c_in, wt, npad, bias, y, c_out, r0, r1);
}

// ---- Outs of 16 channels or more: panels of 16 output channels, rows outer. ----
//
// The weights are packed by panels of 16 output channels, [panel][c_in][16] (zero past
// C_out), so that the layer reads them front to back. A tile is P rows by one panel; the
// rows go outer and every panel inner (the order of XNNPACK's GEMM): the P rows of x stay in
// L1, the weights stream through in order (from memory the first time, from L2 after), and
// the out is written by P sequential streams. In the models the weights and the out come
// cold from other layers: in that state this order ran mobilenet_v2's 1x1 layers 10-30%
// faster than oneDNN's brgconv_1x1 and than the chunks of columns above (docs/benchmarks.md,
// "What the CPU kernels' knobs change"). Weights of more than kWeightBlock bytes go by blocks
// of panels, each block over every row, so that a block stays in L2 while the rows pass.
constexpr int64_t kWeightBlock = int64_t{256} << 10;

// Where a tile's values go once its last K block is summed. kStore: the out (y), the epilogue
// (if any) after, on the rectangle. Else the chain Epilogue::Activation stands for, in
// registers before the store, into its result t (the out itself, or a tensor that takes the
// out's place where nothing reads the out after: Epilogue::out_unread): kClamp min(max(v, lo),
// hi) (NaN kept, as the clamp kernel), kAdd v + e, kAddClamp clamp(v + e), e the residual
// tensor at the out's offsets, and hardswish's two orders, v * (clamp(v + add) / div) and
// (v * clamp(v + add)) / div. The same ops in the same order as TileEpilogue's: the same
// bits.
enum class Finish { kStore, kClamp, kAdd, kAddClamp, kHardSwishDivMul, kHardSwishMulDiv };

struct PanelOut {
  float* y;        // the out, row 0 of the tile
  float* t;        // the chain's result, row 0 of the tile (Finish other than kStore)
  const float* e;  // the residual, row 0 of the tile (kAdd, kAddClamp)
  float lo, hi, add, div;
};

template <typename V>
__attribute__((always_inline)) inline V clamp_v(V v, float lo, float hi) {
  const V l = V{} + lo, h = V{} + hi;
  v = v < l ? l : v;     // std::max(v, lo)
  return h < v ? h : v;  // std::min(v, hi)
}

template <Finish F, typename V>
__attribute__((always_inline)) inline V finish_v(V v, const PanelOut& o, int64_t at) {
  if constexpr (F == Finish::kAdd || F == Finish::kAddClamp) v = v + load_v<V>(o.e + at);
  if constexpr (F == Finish::kClamp || F == Finish::kAddClamp) v = clamp_v(v, o.lo, o.hi);
  if constexpr (F == Finish::kHardSwishDivMul) v = v * (clamp_v(v + o.add, o.lo, o.hi) / o.div);
  if constexpr (F == Finish::kHardSwishMulDiv) v = (v * clamp_v(v + o.add, o.lo, o.hi)) / o.div;
  return v;
}

template <Finish F>
__attribute__((always_inline)) inline float finish_1(float v, const PanelOut& o, int64_t at) {
  auto clamp = [&o](float u) { return std::min(std::max(u, o.lo), o.hi); };
  if constexpr (F == Finish::kAdd || F == Finish::kAddClamp) v = v + o.e[at];
  if constexpr (F == Finish::kClamp || F == Finish::kAddClamp) v = clamp(v);
  if constexpr (F == Finish::kHardSwishDivMul) v = v * (clamp(v + o.add) / o.div);
  if constexpr (F == Finish::kHardSwishMulDiv) v = (v * clamp(v + o.add)) / o.div;
  return v;
}

// One tile: rows [0, P) of x into the panel at `panel`, NV vectors of V wide: the columns [j0,
// j0 + NV * lanes) of the out, all below c_out but where kTail (the last panel, of C_out not a
// multiple of 16: 8-lane vectors, as many as reach c_out, the last stored lane by lane if
// short). Per output: each K block's multiply-adds from zero in order, then added to the bias
// (the first block) or to the out, as tile() above; after the last block, F.
template <typename V, int NV, int P, bool kTail, Finish F>
__attribute__((always_inline)) inline void panel_tile(const float* x, int64_t c_in,
                                                      const float* panel, const float* bias,
                                                      int64_t j0, const PanelOut& o,
                                                      int64_t c_out) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  for (int64_t k0 = 0; k0 < c_in; k0 += kKBlock) {
    const int64_t k1 = std::min(c_in, k0 + kKBlock);
    const bool last = k1 == c_in;
    V acc[P][NV];
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v)
        acc[p][v] = V{};
    }
    multiply_add_rows<V, NV, P>(x, c_in, panel, 16, k0, k1, acc);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      float* yp = o.y + p * c_out;
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) {
        const int64_t c = j0 + v * kL;
        const int64_t at = p * c_out + c;
        if constexpr (kTail) {
          const int64_t n = c_out - c;  // > 0
          if (n < kL) {
            for (int64_t i = 0; i < n; ++i) {
              const float r = (k0 == 0 ? bias[c + i] : yp[c + i]) + acc[p][v][i];
              if (F != Finish::kStore && last) {
                o.t[at + i] = finish_1<F>(r, o, at + i);
              } else {
                yp[c + i] = r;
              }
            }
            continue;
          }
        }
        const V r = (k0 == 0 ? load_v<V>(bias + c) : load_v<V>(yp + c)) + acc[p][v];
        if constexpr (F != Finish::kStore) {
          if (last) {
            store_v(o.t + at, finish_v<F>(r, o, at));
            continue;
          }
        }
        store_v(yp + c, r);
      }
    }
  }
}

// Rows [r0, r1) by panels [p0, p1): the panels by blocks of at most kWeightBlock bytes, each
// block over the rows P at a time (the rows past the last whole tile one by one); with
// Finish::kStore, each tile-row's rectangle through the epilogue (`tiles`, may be null) once
// every panel of the block has written it.
template <typename V, int P, int Rows, Finish F>
__attribute__((always_inline)) inline void panel_block_rows(const float* x, int64_t c_in,
                                                            const float* panels, const float* bias,
                                                            const PanelOut& o, int64_t c_out,
                                                            int64_t r, int64_t b0, int64_t b1,
                                                            const TileEpilogue* tiles) {
  const int64_t whole = c_out / 16;  // panels of 16 existing columns
  const int64_t full_end = std::min(b1, whole);
  PanelOut row = o;
  row.y += r * c_out;
  row.t += r * c_out;
  if (row.e != nullptr) row.e += r * c_out;
  const float* xr = x + r * c_in;
  constexpr int kVP = static_cast<int>(16 * sizeof(float) / sizeof(V));  // vectors a panel row
  for (int64_t pi = b0; pi < full_end; ++pi) {
    panel_tile<V, kVP, Rows, false, F>(xr, c_in, panels + pi * c_in * 16, bias, pi * 16, row,
                                       c_out);
  }
  if (b1 > whole) {  // the last panel's c_out % 16 columns by 8-lane vectors
    const float* last = panels + whole * c_in * 16;
    if (c_out % 16 <= 8) {
      panel_tile<Vec8, 1, Rows, true, F>(xr, c_in, last, bias, whole * 16, row, c_out);
    } else {
      panel_tile<Vec8, 2, Rows, true, F>(xr, c_in, last, bias, whole * 16, row, c_out);
    }
  }
  if (F == Finish::kStore && tiles != nullptr)
    tiles->run(row.y + b0 * 16, c_out, Rows, std::min(c_out, b1 * 16) - b0 * 16);
}

template <typename V, int P, Finish F>
__attribute__((always_inline)) inline void panel_rows(const float* x, int64_t c_in,
                                                      const float* panels, const float* bias,
                                                      const PanelOut& o, int64_t c_out, int64_t r0,
                                                      int64_t r1, int64_t p0, int64_t p1,
                                                      const TileEpilogue* tiles) {
  const int64_t per_block = std::max<int64_t>(1, kWeightBlock / (c_in * 16 * 4));
  for (int64_t b0 = p0; b0 < p1; b0 += per_block) {
    const int64_t b1 = std::min(p1, b0 + per_block);
    int64_t r = r0;
    for (; r + P <= r1; r += P)
      panel_block_rows<V, P, P, F>(x, c_in, panels, bias, o, c_out, r, b0, b1, tiles);
    for (; r < r1; ++r)
      panel_block_rows<V, P, 1, F>(x, c_in, panels, bias, o, c_out, r, b0, b1, tiles);
  }
}

template <typename V, int P>
__attribute__((always_inline)) inline void panel_rows_any(const float* x, int64_t c_in,
                                                          const float* panels, const float* bias,
                                                          const PanelOut& o, Finish f,
                                                          int64_t c_out, int64_t r0, int64_t r1,
                                                          int64_t p0, int64_t p1,
                                                          const TileEpilogue* tiles) {
  switch (f) {
    case Finish::kStore:
      return panel_rows<V, P, Finish::kStore>(x, c_in, panels, bias, o, c_out, r0, r1, p0, p1,
                                              tiles);
    case Finish::kClamp:
      return panel_rows<V, P, Finish::kClamp>(x, c_in, panels, bias, o, c_out, r0, r1, p0, p1,
                                              tiles);
    case Finish::kAdd:
      return panel_rows<V, P, Finish::kAdd>(x, c_in, panels, bias, o, c_out, r0, r1, p0, p1, tiles);
    case Finish::kAddClamp:
      return panel_rows<V, P, Finish::kAddClamp>(x, c_in, panels, bias, o, c_out, r0, r1, p0, p1,
                                                 tiles);
    case Finish::kHardSwishDivMul:
      return panel_rows<V, P, Finish::kHardSwishDivMul>(x, c_in, panels, bias, o, c_out, r0, r1, p0,
                                                        p1, tiles);
    case Finish::kHardSwishMulDiv:
      return panel_rows<V, P, Finish::kHardSwishMulDiv>(x, c_in, panels, bias, o, c_out, r0, r1, p0,
                                                        p1, tiles);
  }
}

using PanelsFn = void (*)(const float*, int64_t, const float*, const float*, const PanelOut&,
                          Finish, int64_t, int64_t, int64_t, int64_t, int64_t, const TileEpilogue*);

// Rows per tile: 7 on AVX-512 (7 accumulators and the panel's vector; the zoo's planes, 7x7 to
// 112x112, are all multiples of 7), 6 with 8-lane vectors (12 accumulators of 16 registers).
constexpr int64_t kPanelRowsAvx512 = 7;
constexpr int64_t kPanelRows8 = 6;

__attribute__((target("avx512f,fma"))) void panels_avx512(const float* x, int64_t c_in,
                                                          const float* panels, const float* bias,
                                                          const PanelOut& o, Finish f,
                                                          int64_t c_out, int64_t r0, int64_t r1,
                                                          int64_t p0, int64_t p1,
                                                          const TileEpilogue* tiles) {
  panel_rows_any<Vec16, kPanelRowsAvx512>(x, c_in, panels, bias, o, f, c_out, r0, r1, p0, p1,
                                          tiles);
}
__attribute__((target("avx2,fma"))) void panels_avx2(const float* x, int64_t c_in,
                                                     const float* panels, const float* bias,
                                                     const PanelOut& o, Finish f, int64_t c_out,
                                                     int64_t r0, int64_t r1, int64_t p0, int64_t p1,
                                                     const TileEpilogue* tiles) {
  panel_rows_any<Vec8, kPanelRows8>(x, c_in, panels, bias, o, f, c_out, r0, r1, p0, p1, tiles);
}
void panels_portable(const float* x, int64_t c_in, const float* panels, const float* bias,
                     const PanelOut& o, Finish f, int64_t c_out, int64_t r0, int64_t r1, int64_t p0,
                     int64_t p1, const TileEpilogue* tiles) {
  panel_rows_any<Vec8, kPanelRows8>(x, c_in, panels, bias, o, f, c_out, r0, r1, p0, p1, tiles);
}

// The Finish that runs `e` in the tiles' registers, or kStore (then TileEpilogue or the whole
// out after). Only where the out's values need not be kept apart from the chain's result.
Finish finish_of(const Epilogue* e, PanelOut& o) {
  if (e == nullptr || !e->activation || e->after_inputs) return Finish::kStore;
  const Epilogue::Activation& a = *e->activation;
  if (a.t->data != a.x->data && !e->out_unread) return Finish::kStore;
  using Kind = Epilogue::Activation::Kind;
  Finish f = Finish::kStore;
  switch (a.kind) {
    case Kind::kClamp:
      f = Finish::kClamp;
      break;
    case Kind::kAddTensor:
      f = Finish::kAdd;
      break;
    case Kind::kAddTensorClamp:
      f = Finish::kAddClamp;
      break;
    case Kind::kHardSwishDivMul:
      f = Finish::kHardSwishDivMul;
      break;
    case Kind::kHardSwishMulDiv:
      f = Finish::kHardSwishMulDiv;
      break;
    default:
      return Finish::kStore;  // on each tile-row through TileEpilogue
  }
  o.t = static_cast<float*>(a.t->data);
  o.e = a.e != nullptr ? static_cast<const float*>(a.e->data) : nullptr;
  o.lo = a.lo;
  o.hi = a.hi;
  o.add = a.add;
  o.div = a.div;
  return f;
}

}  // namespace

PointwiseNhwcWeights PointwiseNhwcWeights::pack(const float* w, int64_t c_out, int64_t c_in) {
  PointwiseNhwcWeights p;
  p.c_in = c_in;
  p.c_out = c_out;
  p.npad = (c_out + 15) / 16 * 16;
  p.panels = c_out >= 16;
  p.wt.assign(static_cast<size_t>(c_in * p.npad), 0.0f);
  for (int64_t co = 0; co < c_out; ++co) {
    for (int64_t ci = 0; ci < c_in; ++ci) {
      const size_t at = p.panels ? static_cast<size_t>(((co / 16) * c_in + ci) * 16 + co % 16)
                                 : static_cast<size_t>(ci * p.npad + co);
      p.wt[at] = w[co * c_in + ci];
    }
  }
  return p;
}

void pointwise_nhwc_f32(const float* x, const PointwiseNhwcWeights& w, const float* bias,
                        int64_t rows, float* y, const Epilogue* epilogue) {
  const int64_t c_in = w.c_in, c_out = w.c_out;
  // The bias (or zero) to the packed weights' width: the tiles read whole vectors of it.
  std::vector<float> padded(static_cast<size_t>(w.npad), 0.0f);
  if (bias != nullptr) std::copy_n(bias, c_out, padded.begin());
  if (w.panels) {
    PanelsFn run = isa_build(panels_avx512, panels_avx2, panels_portable);
    const int64_t tile_rows =
        gemm_float_kernel() == FloatKernel::kAvx512 ? kPanelRowsAvx512 : kPanelRows8;
    // The epilogue on each tile-row's rectangle as soon as it is written (in L1) where it is
    // one activation or residual add; else over the whole out after.
    PanelOut out{y, y, nullptr, 0, 0, 0, 1};
    const Finish finish = finish_of(epilogue, out);
    const std::optional<TileEpilogue> tiles = epilogue != nullptr && finish == Finish::kStore
                                                  ? TileEpilogue::make(*epilogue)
                                                  : std::nullopt;
    const TileEpilogue* t = tiles ? &*tiles : nullptr;
    const int64_t np = w.npad / 16;
    // Split the panels where the weights outweigh the input (the 7x7 and 14x14 layers: each
    // thread reads its part of the weights, and all of the input), else the rows. Either way
    // each output is one thread's, computed alike: the same bits for any thread count.
    const int64_t threads = num_threads();
    if (threads > 1 && np >= 2 * threads && np * 16 >= rows) {
      parallel_for(np, 1, [&](int64_t p0, int64_t p1) {
        run(x, c_in, w.wt.data(), padded.data(), out, finish, c_out, 0, rows, p0, p1, t);
      });
    } else {
      const int64_t units = (rows + tile_rows - 1) / tile_rows;
      // At least ~64 K multiply-adds a thread's part.
      const int64_t grain =
          std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, tile_rows * c_in * c_out));
      parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
        run(x, c_in, w.wt.data(), padded.data(), out, finish, c_out, u0 * tile_rows,
            std::min(rows, u1 * tile_rows), 0, np, t);
      });
    }
    if (epilogue != nullptr && finish == Finish::kStore && t == nullptr)
      apply_epilogue_whole(*epilogue, rows * c_out);
    return;
  }
  RowsFn run = isa_build(rows_avx512, rows_avx2, rows_portable);
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
