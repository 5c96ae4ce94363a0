// 2-d convolution (NCHW; groups, stride, padding, dilation, transposed) and pooling
// (max with indices, average, adaptive average).
//
// Convolution is a GEMM per (image, group): out_g[Cout_g, OH*OW] += W_g @ col, with a
// 1x1/stride-1 fast path that multiplies the input directly and a direct loop for depthwise
// convolutions (one input channel per group, where a GEMM would have M = 1). With constant
// weights the column matrix is never built: the GEMM reads it from the padded input split
// into stride phases, or (few output positions) gathers its transpose from the padded input.
// Transposed convolution is GEMM + col2im. float16/bfloat16 compute in float32.
#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::kernels {
namespace {

// The range [lo, hi) of output positions o whose input position o*stride + offset lies in
// [0, size): lets the inner loops run without bounds checks.
void valid_range(int64_t offset, int64_t stride, int64_t size, int64_t count, int64_t* lo,
                 int64_t* hi) {
  *lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last = size - 1 - offset;  // largest o*stride allowed
  *hi = last < 0 ? 0 : std::min(count, last / stride + 1);
  if (*hi < *lo) *hi = *lo;
}

// Output rows [oh0, oh1) of the column matrix:
// col[(c*KH + i)*KW + j, (oh - oh0)*OW + ow] = x[c, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
// (0 outside the input).
template <typename G>
void im2col(const G* x, int64_t channels, const ConvGeometry& g, int64_t oh0, int64_t oh1, G* col) {
  const int64_t plane = (oh1 - oh0) * g.ow;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        G* dst = col + ((c * g.kh + i) * g.kw + j) * plane;
        const int64_t off_w = j * g.dil[1] - g.pad[1];
        int64_t lo, hi;
        valid_range(off_w, g.stride[1], g.w, g.ow, &lo, &hi);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          G* d = dst + (oh - oh0) * g.ow;
          const int64_t ih = oh * g.stride[0] - g.pad[0] + i * g.dil[0];
          if (ih < 0 || ih >= g.h) {
            std::fill_n(d, g.ow, G(0));
            continue;
          }
          const G* row = x + (c * g.h + ih) * g.w;
          std::fill_n(d, lo, G(0));
          if (g.stride[1] == 1) {
            for (int64_t ow = lo; ow < hi; ++ow)
              d[ow] = row[ow + off_w];
          } else {
            for (int64_t ow = lo; ow < hi; ++ow)
              d[ow] = row[ow * g.stride[1] + off_w];
          }
          std::fill(d + hi, d + g.ow, G(0));
        }
      }
    }
  }
}

// y[co, oh*sh - ph + i*dh, ow*sw - pw + j*dw] += col[(co*KH + i)*KW + j, ih*W + iw] (the
// adjoint of im2col, with the input and output roles of a transposed convolution).
template <typename G>
void col2im(const G* col, int64_t channels, const ConvGeometry& g, G* y) {
  const int64_t plane = g.h * g.w;
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j) {
        const G* src = col + ((c * g.kh + i) * g.kw + j) * plane;
        const int64_t off_w = j * g.dil[1] - g.pad[1];
        int64_t lo, hi;
        valid_range(off_w, g.stride[1], g.ow, g.w, &lo, &hi);
        for (int64_t ih = 0; ih < g.h; ++ih) {
          const int64_t oh = ih * g.stride[0] - g.pad[0] + i * g.dil[0];
          if (oh < 0 || oh >= g.oh) continue;
          const G* s = src + ih * g.w;
          G* row = y + (c * g.oh + oh) * g.ow;
          for (int64_t iw = lo; iw < hi; ++iw)
            row[iw * g.stride[1] + off_w] += s[iw];
        }
      }
    }
  }
}

// Depthwise: output channel co of group gi reads only input channel gi. Output row by
// output row, in a private accumulator row (read-modify-writes straight into the output can
// stall on false store-to-load dependencies with the input rows). For each kernel row, the
// output columns where every tap of that row lands inside the input (the interior) take all
// kw taps in one pass — unrolled for the common 3- and 5-wide kernels at stride 1, so short
// rows are not dominated by per-tap loop overhead; the border columns go tap by tap.
template <typename G, int KW>
inline void depthwise_interior_s1(G* __restrict d, const G* __restrict row, const G* w, int64_t dil,
                                  int64_t lo, int64_t hi) {
  G wv[KW];
  for (int j = 0; j < KW; ++j)
    wv[j] = w[j];
  for (int64_t ow = lo; ow < hi; ++ow) {
    G sum = d[ow];
    for (int j = 0; j < KW; ++j)
      sum += wv[j] * row[ow + j * dil];
    d[ow] = sum;
  }
}

template <typename G>
void depthwise(const G* __restrict x, const G* __restrict weight, const ConvGeometry& g,
               int64_t cout_g, G* __restrict y) {
  const int64_t sw = g.stride[1], dw = g.dil[1];
  // Valid output columns per tap column j: [lo[j], hi[j]).
  std::vector<int64_t> lo(static_cast<size_t>(g.kw)), hi(static_cast<size_t>(g.kw));
  for (int64_t j = 0; j < g.kw; ++j)
    valid_range(j * dw - g.pad[1], sw, g.w, g.ow, &lo[j], &hi[j]);
  // Interior: every tap column valid (the first tap bounds from below, the last from above).
  const int64_t in_lo = lo[0], in_hi = std::max(lo[0], hi[g.kw - 1]);
  std::vector<G> acc(static_cast<size_t>(g.ow));
  for (int64_t co = 0; co < cout_g; ++co) {
    G* yc = y + co * g.oh * g.ow;
    const G* wc = weight + co * g.kh * g.kw;
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      G* __restrict d = acc.data();
      std::copy_n(yc + oh * g.ow, g.ow, d);
      for (int64_t i = 0; i < g.kh; ++i) {
        const int64_t ih = oh * g.stride[0] - g.pad[0] + i * g.dil[0];
        if (ih < 0 || ih >= g.h) continue;
        const G* xrow = x + ih * g.w;
        const G* wrow = wc + i * g.kw;
        // Border columns, tap by tap.
        for (int64_t j = 0; j < g.kw; ++j) {
          const G wv = wrow[j];
          const int64_t off = j * dw - g.pad[1];
          for (int64_t ow = lo[j]; ow < std::min(hi[j], in_lo); ++ow)
            d[ow] += wv * xrow[ow * sw + off];
          for (int64_t ow = std::max(lo[j], in_hi); ow < hi[j]; ++ow)
            d[ow] += wv * xrow[ow * sw + off];
        }
        if (in_lo >= in_hi) continue;
        // Interior columns, all taps of this kernel row together.
        const G* row0 = xrow - g.pad[1];  // row0[ow * sw + j * dw] is tap j of column ow
        if (sw == 1 && g.kw == 3) {
          depthwise_interior_s1<G, 3>(d, row0, wrow, dw, in_lo, in_hi);
        } else if (sw == 1 && g.kw == 5) {
          depthwise_interior_s1<G, 5>(d, row0, wrow, dw, in_lo, in_hi);
        } else {
          for (int64_t j = 0; j < g.kw; ++j) {
            const G wv = wrow[j];
            const G* __restrict r = row0 + j * dw;
            if (sw == 1) {
              for (int64_t ow = in_lo; ow < in_hi; ++ow)
                d[ow] += wv * r[ow];
            } else if (sw == 2) {
              for (int64_t ow = in_lo; ow < in_hi; ++ow)
                d[ow] += wv * r[2 * ow];
            } else {
              for (int64_t ow = in_lo; ow < in_hi; ++ow)
                d[ow] += wv * r[ow * sw];
            }
          }
        }
      }
      std::copy_n(d, g.ow, yc + oh * g.ow);
    }
  }
}

// A convolution's weights packed for the GEMM, per group, made at the first call when the
// weights are a constant of the program and kept with the instruction.
struct PackedConvWeights final : KernelState {
  struct Key {
    const void* weight;
    int64_t groups, rows, depth;
    bool vector_shaped;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  std::vector<std::shared_ptr<const PackedA>> per_group;
  // A 1x1 convolution of 1x1 planes (a squeeze-excitation block, a pooled head), or any
  // convolution with a handful of output positions in all: the transposed weights as B
  // panels, output positions as rows, instead.
  std::shared_ptr<const PackedB> transposed;
};

// The epilogue over the whole out (n elements), split across threads: for the paths that
// cannot run it range by range as they go.
void apply_epilogue_whole(const Epilogue& e, int64_t n) {
  parallel_for(n, int64_t{1} << 14,
               [&](int64_t begin, int64_t end) { apply_epilogue(e, begin, end); });
}

// Convolutions with at most this many output positions (images x plane) in all multiply them
// as rows against the transposed weights.
constexpr int64_t kPositionsAsRows = 64;

// y = bias (0 when null) + conv(x) for one group, output positions as rows: row n*OH*OW + p
// of col^T is output position p of image n (its im2col column), multiplied by the
// transposed weights `wt` ([C_in*KH*KW, C_out] panels); each row starts from the bias and
// takes every K block in order (the bits of the GEMM over columns). col^T is never built:
// the GEMM gathers its panels from the padded input (MatrixRef::col_offsets), row (n, oh, ow)
// at offset n*C*Hp*Wp + oh*SH*Wp + ow*SW, column (c, i, j) at c*Hp*Wp + i*DH*Wp + j*DW.
void positions_as_rows_f32(const float* x, const PackedB& wt, const float* bias,
                           const ConvGeometry& g, float* y) {
  const int64_t out_plane = g.oh * g.ow, kdim = wt.depth();
  const int64_t rows = g.batch * out_plane;
  const int64_t hp = g.h + 2 * g.pad[0], wp = g.w + 2 * g.pad[1], plane = hp * wp;
  Buffer<float> padded(g.batch * g.c_in * plane), acc(rows * g.c_out);
  for (int64_t c = 0; c < g.batch * g.c_in; ++c) {
    float* dst = padded.data() + c * plane;
    std::fill_n(dst, g.pad[0] * wp, 0.0f);
    for (int64_t ih = 0; ih < g.h; ++ih) {
      float* row = dst + (ih + g.pad[0]) * wp;
      std::fill_n(row, g.pad[1], 0.0f);
      std::copy_n(x + (c * g.h + ih) * g.w, g.w, row + g.pad[1]);
      std::fill_n(row + g.pad[1] + g.w, g.pad[1], 0.0f);
    }
    std::fill_n(dst + (g.h + g.pad[0]) * wp, g.pad[0] * wp, 0.0f);
  }
  std::vector<int64_t> row_offsets(static_cast<size_t>(rows)), col_offsets;
  col_offsets.reserve(static_cast<size_t>(kdim));
  for (int64_t n = 0, r = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow, ++r)
        row_offsets[static_cast<size_t>(r)] =
            n * g.c_in * plane + oh * g.stride[0] * wp + ow * g.stride[1];
    }
  }
  for (int64_t c = 0; c < g.c_in; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j)
        col_offsets.push_back(c * plane + i * g.dil[0] * wp + j * g.dil[1]);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* a = acc.data() + r * g.c_out;
    if (bias != nullptr) {
      std::copy_n(bias, g.c_out, a);
    } else {
      std::fill_n(a, g.c_out, 0.0f);
    }
  }
  gemm_packed(rows, 1.0f,
              MatrixRef<float>{padded.data(), 0, 0, row_offsets.data(), col_offsets.data()}, wt,
              acc.data(), g.c_out);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t co = 0; co < g.c_out; ++co) {
      for (int64_t p = 0; p < out_plane; ++p)
        y[(n * g.c_out + co) * out_plane + p] = acc.data()[(n * out_plane + p) * g.c_out + co];
    }
  }
}

// Convolutions from at most this many input channels (into at most
// few_input_channels_max_outputs()) run the direct loop of few_input_channels_conv_f32.
constexpr int64_t kFewInputChannels = 4;

template <typename G>
void conv_typed(const ConvGeometry& g, bool transposed, const TensorView& input,
                const TensorView& weight, const TensorView* bias, TensorView& out,
                std::unique_ptr<KernelState>* state, const Epilogue* epilogue) {
  ReadAs<G> rx(input), rw(weight);
  WriteAs<G> wy(out);
  const G* x = rx.data();
  const G* w = rw.data();
  G* y = wy.data();
  const int64_t out_plane = g.oh * g.ow;
  const int64_t in_plane = g.h * g.w;
  const int64_t cin_g = g.c_in / g.groups;
  const int64_t cout_g = g.c_out / g.groups;
  const int64_t kk = g.kh * g.kw;
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                         g.pad[0] == 0 && g.pad[1] == 0;
  // The direct loop is for depthwise convolutions, where a GEMM would have M = cout_g of 1
  // (or a small channel multiplier); one input channel feeding many outputs (an STFT as a
  // convolution: 1 -> 258 channels, a 256-wide kernel) is a proper GEMM.
  const bool is_depthwise = !transposed && cin_g == 1 && cout_g <= 4 && !pointwise;
  if constexpr (std::is_same_v<G, float>) {
    if (is_depthwise) {  // writes every output, bias included
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      const bool by_channel = epilogue != nullptr && !epilogue->after_inputs;
      depthwise_conv_f32(x, w, rb ? rb->data() : nullptr, g, cout_g, y,
                         by_channel ? epilogue : nullptr);
      if (epilogue != nullptr && !by_channel) apply_epilogue_whole(*epilogue, out.numel());
      wy.finish();
      return;
    }
  }
  if constexpr (std::is_same_v<G, float>) {
    // Few input channels into few output channels (an RGB first layer of a MobileNet or of
    // the PP-OCR models): a direct loop with output channels in registers.
    if (!transposed && g.groups == 1 && g.c_in <= kFewInputChannels &&
        g.c_out <= few_input_channels_max_outputs() && g.kh <= 7 && g.kw <= 7) {
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      // The input is copied whole before any output row is written: the epilogue goes by
      // rows even where its outs lie over the input.
      few_input_channels_conv_f32(x, w, rb ? rb->data() : nullptr, g, y, epilogue);
      wy.finish();
      return;
    }
  }
  if constexpr (std::is_same_v<G, float>) {
    // 3x3 stride-1 convolutions of constant weights: Winograd F(2x2, 3x3) where it was
    // measured faster than im2col + GEMM (resnet18 on this Zen 5, 1 thread: 20% on the 28x28
    // and 14x14 layers, 196 and 49 tiles): enough tiles for the 16 GEMMs' columns, not so
    // many that the transformed tiles stream from memory (56x56: 784 tiles, no faster; 7x7: 16
    // tiles, 5% slower).
    const int64_t tiles = ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
    if (state != nullptr && !transposed && g.groups == 1 && g.kh == 3 && g.kw == 3 &&
        g.stride[0] == 1 && g.stride[1] == 1 && g.dil[0] == 1 && g.dil[1] == 1 && g.c_in >= 16 &&
        tiles >= 32 && tiles <= 400) {
      const WinogradWeights& wg = cached_kernel_state<WinogradWeights>(
          *state, {weight.data, g.c_out, g.c_in},
          [&] { return WinogradWeights::make(w, g.c_out, g.c_in); });
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      // The input is read whole before any output is written: the epilogue may go channel by
      // channel even where its outs overlap the input.
      winograd_conv_f32(x, wg, rb ? rb->data() : nullptr, g, y, epilogue, wg.scratch);
      wy.finish();
      return;
    }
  }
  // The epilogue (float32 outs only) goes band by band where the loops below allow, else
  // over the whole out at the end.
  // After the whole convolution when an out of the epilogue overlaps an input.
  const bool epilogue_on =
      epilogue != nullptr && std::is_same_v<G, float> && !transposed && !epilogue->after_inputs;
  const bool epilogue_at_end = epilogue != nullptr && std::is_same_v<G, float> && !epilogue_on;
  // The epilogue on output rows [oh0, oh0 + rows) of channels [c0, c1) of the group whose
  // output starts at yg, while they are still in cache.
  auto epilogue_rows = [&](const G* yg, int64_t c0, int64_t c1, int64_t oh0, int64_t rows) {
    for (int64_t c = c0; epilogue_on && c < c1; ++c) {
      const int64_t at = (yg - y) + c * out_plane + oh0 * g.ow;
      apply_epilogue(*epilogue, at, at + rows * g.ow);
    }
  };
  // One row per image against the weights: out[n, :] = W @ x[n, :] as x[n, :] @ W^T.
  const bool vector_shaped = pointwise && in_plane == 1 && g.groups == 1 && g.batch <= 4;
  // A handful of output positions in all (a streaming model's frames: Silero VAD's layers have
  // 4-16): the GEMM's column panels would mostly be empty, so the positions are the rows,
  // against the transposed weights (out^T = col^T @ W^T), whose panels the outputs fill.
  const bool positions_as_rows = std::is_same_v<G, float> && state != nullptr && !transposed &&
                                 !is_depthwise && !vector_shaped && g.groups == 1 &&
                                 g.batch * out_plane <= kPositionsAsRows;
  // Packed float weights (a constant) on the GEMM paths that write each output once: the
  // first K block writes the bias with the sum (GemmInit), so the output is neither filled
  // first nor read back.
  const bool gemm_writes_bias = std::is_same_v<G, float> && state != nullptr && !transposed &&
                                !is_depthwise && !vector_shaped && !positions_as_rows &&
                                !(g.batch > 1 && out_plane < 64);
  // Convolutions of packed weights (except pointwise ones, whose column matrix is the input)
  // read their column matrix from the padded input split into stride phases (below); the
  // output is written by the band copies.
  const bool implicit_im2col = gemm_writes_bias && !pointwise;
  std::optional<ReadAs<G>> rb;
  if (bias != nullptr) rb.emplace(*bias);
  // Otherwise start from the bias (or zero); the GEMMs and loops below accumulate (positions
  // as rows start their transposed accumulator from it instead).
  if (!gemm_writes_bias && !positions_as_rows) {
    if (bias != nullptr) {
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t c = 0; c < g.c_out; ++c)
          std::fill_n(y + (n * g.c_out + c) * out_plane, out_plane, rb->data()[c]);
      }
    } else {
      std::fill_n(y, out.numel(), G(0));
    }
  }
  if (!transposed) {
    // Constant float weights: packed once, then every call skips packing them.
    const int64_t kdim = cin_g * kk;
    const PackedConvWeights* packed = nullptr;
    if constexpr (std::is_same_v<G, float>) {
      if (state != nullptr && !is_depthwise) {
        const bool rows_vs_weights = vector_shaped || positions_as_rows;
        packed = &cached_kernel_state<PackedConvWeights>(
            *state, {weight.data, g.groups, cout_g, kdim, rows_vs_weights}, [&] {
              auto fresh = std::make_unique<PackedConvWeights>();
              if (rows_vs_weights) {  // W^T [kdim, cout]: W read with swapped strides
                fresh->transposed = PackedB::pack(kdim, cout_g, MatrixRef<float>{w, 1, kdim});
                return fresh;
              }
              for (int64_t gi = 0; gi < g.groups; ++gi) {
                fresh->per_group.push_back(
                    PackedA::pack(cout_g, kdim, MatrixRef<float>{w + gi * cout_g * kdim, kdim, 1}));
              }
              return fresh;
            });
      }
    }
    // C_g[cout_g, n] += W_g @ B for group gi, from the packed weights when there are some.
    auto multiply = [&](int64_t gi, int64_t n, const G* b, G* c, int64_t ldc = -1) {
      if (ldc < 0) ldc = out_plane;
      if constexpr (std::is_same_v<G, float>) {
        if (packed != nullptr) {
          const GemmInit init{rb ? rb->data() + gi * cout_g : nullptr};
          gemm_packed(*packed->per_group[static_cast<size_t>(gi)], n, 1.0f,
                      MatrixRef<float>{b, n, 1}, c, ldc, gemm_writes_bias ? &init : nullptr);
          return;
        }
      }
      gemm(cout_g, n, kdim, G(1), MatrixRef<G>{w + gi * cout_g * kdim, kdim, 1},
           MatrixRef<G>{b, n, 1}, c, ldc);
    };
    // The column matrix is built a band of output rows at a time, so that it stays in L2
    // (~512 KiB) between im2col and the GEMM instead of streaming through memory.
    const int64_t band = std::clamp<int64_t>(
        std::max<int64_t>((int64_t{1} << 17) / std::max<int64_t>(kdim * g.ow, 1),
                          (256 + g.ow - 1) / g.ow),
        1, std::max<int64_t>(g.oh, 1));
    const int64_t bands = (g.oh + band - 1) / band;
    if (packed != nullptr && packed->transposed != nullptr && positions_as_rows) {
      if constexpr (std::is_same_v<G, float>) {
        positions_as_rows_f32(x, *packed->transposed, rb ? rb->data() : nullptr, g, y);
      }
      if (epilogue_on) apply_epilogue(*epilogue, 0, out.numel());
    } else if (packed != nullptr && packed->transposed != nullptr) {
      if constexpr (std::is_same_v<G, float>) {
        gemm_packed(g.batch, 1.0f, MatrixRef<float>{x, g.c_in, 1}, *packed->transposed, y, g.c_out);
      }
      if (epilogue_on) apply_epilogue(*epilogue, 0, out.numel());
    } else if (is_depthwise) {  // double
      // Channels in parallel (each output channel is one thread's).
      parallel_for(g.batch * g.groups, 4, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t n = t / g.groups, gi = t % g.groups;
          depthwise(x + (n * g.c_in + gi * cin_g) * in_plane, w + gi * cout_g * cin_g * kk, g,
                    cout_g, y + (n * g.c_out + gi * cout_g) * out_plane);
        }
      });
    } else if (g.batch > 1 && out_plane < 64) {
      // Tiny planes of several images (a streaming model's frames: Silero VAD's are 1-5
      // columns): the images' columns side by side in one GEMM per group, whose 32-column
      // panels one image alone would mostly leave empty. Each output starts from the bias
      // and takes the same K blocks in the same order: the bits of one GEMM per image.
      const int64_t cols = g.batch * out_plane;
      Buffer<G> one(kdim * out_plane), col(kdim * cols), acc(cout_g * cols);
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        for (int64_t n = 0; n < g.batch; ++n) {
          im2col(x + (n * g.c_in + gi * cin_g) * in_plane, cin_g, g, 0, g.oh, one.data());
          for (int64_t r = 0; r < kdim; ++r)
            std::copy_n(one.data() + r * out_plane, out_plane,
                        col.data() + r * cols + n * out_plane);
          for (int64_t co = 0; co < cout_g; ++co)
            std::copy_n(y + (n * g.c_out + gi * cout_g + co) * out_plane, out_plane,
                        acc.data() + co * cols + n * out_plane);
        }
        multiply(gi, cols, col.data(), acc.data(), cols);
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t co = 0; co < cout_g; ++co)
            std::copy_n(acc.data() + co * cols + n * out_plane, out_plane,
                        y + (n * g.c_out + gi * cout_g + co) * out_plane);
        }
      }
      if (epilogue_on) apply_epilogue(*epilogue, 0, out.numel());
    } else {
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t gi = 0; gi < g.groups; ++gi) {
          const G* xg = x + (n * g.c_in + gi * cin_g) * in_plane;
          G* yg = y + (n * g.c_out + gi * cout_g) * out_plane;
          if (pointwise) {  // the GEMM splits its own work across threads
            multiply(gi, out_plane, xg, yg);
            if (epilogue_on) {
              parallel_for(cout_g, 16,
                           [&](int64_t c0, int64_t c1) { epilogue_rows(yg, c0, c1, 0, g.oh); });
            }
            continue;
          }
          // Packed weights: the column matrix is never built. The input is padded once and
          // split into stride phases (plane (c, a, b) holds the padded input's rows a, a + SH,
          // ... and columns b, b + SW, ...: Hq x Wq values; for stride 1 the padded input
          // itself). Row (c, i, j) of the column matrix over output rows [oh0, oh1) is then
          // the phase plane (c, i*dh % SH, j*dw % SW) from offset (oh0 + i*dh / SH) * Wq +
          // j*dw / SW, at columns (oh - oh0) * Wq + ow: the GEMM packs B straight from it
          // (MatrixRef::row_offsets) into a result with the row pitch Wq, whose OW valid
          // columns per row are copied out. The same values as im2col's, the same sums.
          if (implicit_im2col) {
            if constexpr (std::is_same_v<G, float>) {
              const int64_t sh = g.stride[0], sw = g.stride[1];
              const int64_t hp = g.h + 2 * g.pad[0], wp = g.w + 2 * g.pad[1];
              const int64_t hq = (hp + sh - 1) / sh, wq = (wp + sw - 1) / sw;
              const int64_t phase_plane = hq * wq;
              std::optional<Buffer<float>> padded;
              const float* xp = xg;
              if (g.pad[0] != 0 || g.pad[1] != 0 || sh != 1 || sw != 1) {
                // Only the phases some tap reads are filled (a 1x1 stride-2 convolution reads
                // one of four).
                std::vector<char> used(static_cast<size_t>(sh * sw), 0);
                for (int64_t i = 0; i < g.kh; ++i) {
                  for (int64_t j = 0; j < g.kw; ++j)
                    used[static_cast<size_t>((i * g.dil[0]) % sh * sw + (j * g.dil[1]) % sw)] = 1;
                }
                padded.emplace(cin_g * sh * sw * phase_plane);
                float* dst = padded->data();
                parallel_for(cin_g, 4, [&](int64_t c0, int64_t c1) {
                  for (int64_t c = c0; c < c1; ++c) {
                    const float* xc = xg + c * g.h * g.w;
                    for (int64_t ph = 0; ph < sh * sw; ++ph) {
                      if (used[static_cast<size_t>(ph)] == 0) continue;
                      const int64_t a = ph / sw, b = ph % sw;
                      float* plane = dst + (c * sh * sw + ph) * phase_plane;
                      for (int64_t r = 0; r < hq; ++r) {
                        float* row = plane + r * wq;
                        const int64_t ih = r * sh + a - g.pad[0];
                        if (ih < 0 || ih >= g.h) {
                          std::fill_n(row, wq, 0.0f);
                          continue;
                        }
                        const float* src = xc + ih * g.w;
                        if (sw == 1) {
                          std::fill_n(row, g.pad[1], 0.0f);
                          std::copy_n(src, g.w, row + g.pad[1]);
                          std::fill_n(row + g.pad[1] + g.w, wq - g.pad[1] - g.w, 0.0f);
                          continue;
                        }
                        for (int64_t q = 0; q < wq; ++q) {
                          const int64_t iw = q * sw + b - g.pad[1];
                          row[q] = iw >= 0 && iw < g.w ? src[iw] : 0.0f;
                        }
                      }
                    }
                  }
                });
                xp = dst;
              }
              std::vector<int64_t> offsets(static_cast<size_t>(kdim));
              for (int64_t c = 0, r = 0; c < cin_g; ++c) {
                for (int64_t i = 0; i < g.kh; ++i) {
                  for (int64_t j = 0; j < g.kw; ++j, ++r) {
                    const int64_t di = i * g.dil[0], dj = j * g.dil[1];
                    offsets[static_cast<size_t>(r)] =
                        (c * sh * sw + di % sh * sw + dj % sw) * phase_plane + di / sh * wq +
                        dj / sw;
                  }
                }
              }
              const GemmInit init{rb ? rb->data() + gi * cout_g : nullptr};
              // Band bi: the GEMM into `tmp`, then the valid columns and the epilogue.
              auto run_band = [&](int64_t bi, Buffer<float>& tmp, bool split) {
                const int64_t oh0 = bi * band, oh1 = std::min(g.oh, oh0 + band);
                const int64_t cols = (oh1 - oh0 - 1) * wq + g.ow;
                gemm_packed(*packed->per_group[static_cast<size_t>(gi)], cols, 1.0f,
                            MatrixRef<float>{xp + oh0 * wq, 0, 1, offsets.data()}, tmp.data(), cols,
                            &init);
                auto rows = [&](int64_t c0, int64_t c1) {
                  for (int64_t c = c0; c < c1; ++c) {
                    for (int64_t oh = oh0; oh < oh1; ++oh)
                      std::copy_n(tmp.data() + c * cols + (oh - oh0) * wq, g.ow,
                                  yg + c * out_plane + oh * g.ow);
                    epilogue_rows(yg, c, c + 1, oh0, oh1 - oh0);
                  }
                };
                if (split) {
                  parallel_for(cout_g, 8, rows);
                } else {
                  rows(0, cout_g);
                }
              };
              const int64_t tmp_floats = cout_g * ((band - 1) * wq + g.ow);
              if (bands < 2 * num_threads() && num_threads() > 1) {
                Buffer<float> tmp(tmp_floats);
                for (int64_t bi = 0; bi < bands; ++bi)
                  run_band(bi, tmp, true);
              } else {
                parallel_for(bands, 1, [&](int64_t b0, int64_t b1) {
                  Buffer<float> tmp(tmp_floats);
                  for (int64_t bi = b0; bi < b1; ++bi)
                    run_band(bi, tmp, false);
                });
              }
            }
            continue;
          }
          // Few bands (a small plane: resnet18's 14x14 and 7x7 layers are one band): band by
          // band, with im2col split over channels and the GEMM over its own rows or columns,
          // so that every thread has work.
          if (bands < 2 * num_threads() && num_threads() > 1) {
            Buffer<G> col(kdim * band * g.ow);
            for (int64_t bi = 0; bi < bands; ++bi) {
              const int64_t oh0 = bi * band, oh1 = std::min(g.oh, oh0 + band);
              const int64_t cols = (oh1 - oh0) * g.ow;
              parallel_for(cin_g, 1, [&](int64_t c0, int64_t c1) {
                im2col(xg + c0 * in_plane, c1 - c0, g, oh0, oh1, col.data() + c0 * kk * cols);
              });
              multiply(gi, cols, col.data(), yg + oh0 * g.ow);
              if (epilogue_on) {
                parallel_for(cout_g, 16, [&](int64_t c0, int64_t c1) {
                  epilogue_rows(yg, c0, c1, oh0, oh1 - oh0);
                });
              }
            }
            continue;
          }
          // Bands of output rows in parallel, each thread with its own column matrix.
          parallel_for(bands, 1, [&](int64_t b0, int64_t b1) {
            Buffer<G> col(kdim * band * g.ow);
            for (int64_t bi = b0; bi < b1; ++bi) {
              const int64_t oh0 = bi * band, oh1 = std::min(g.oh, oh0 + band);
              const int64_t cols = (oh1 - oh0) * g.ow;
              im2col(xg, cin_g, g, oh0, oh1, col.data());
              multiply(gi, cols, col.data(), yg + oh0 * g.ow);
              epilogue_rows(yg, 0, cout_g, oh0, oh1 - oh0);
            }
          });
        }
      }
    }
  } else {
    // weight [Cin, Cout_g, KH, KW]: col[Cout_g*KH*KW, H*W] = W_g^T @ x_g, then col2im.
    Buffer<G> col(cout_g * kk * in_plane);
    for (int64_t n = 0; n < g.batch; ++n) {
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const G* xg = x + (n * g.c_in + gi * cin_g) * in_plane;
        const G* wg = w + gi * cin_g * cout_g * kk;
        G* yg = y + (n * g.c_out + gi * cout_g) * out_plane;
        std::fill_n(col.data(), cout_g * kk * in_plane, G(0));
        gemm(cout_g * kk, in_plane, cin_g, G(1), MatrixRef<G>{wg, 1, cout_g * kk},
             MatrixRef<G>{xg, in_plane, 1}, col.data(), in_plane);
        col2im(col.data(), cout_g, g, yg);
      }
    }
  }
  if (epilogue_at_end) apply_epilogue_whole(*epilogue, out.numel());
  wy.finish();
}

Status convolution_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args,
                                 {{"input", Arg::kTensor},
                                  {"weight", Arg::kTensor},
                                  {"bias", Arg::kOptTensor},
                                  {"stride", Arg::kIntList},
                                  {"padding", Arg::kIntList},
                                  {"dilation", Arg::kIntList},
                                  {"transposed", Arg::kBool},
                                  {"output_padding", Arg::kIntList},
                                  {"groups", Arg::kInt}},
                                 {"out"}));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  const bool transposed = args[6]->b;
  const int64_t groups = args[8]->i;
  TensorView& out = out_arg(args, 9);
  if (x.rank() == 3 && w.rank() == 3 && out.rank() == 3) {
    // 1-d (ExecuTorch's programs for Conv1d): the same data as [N, C, 1, L] with a
    // [O, I, 1, K] kernel; one stride/padding/dilation becomes (1|0|1, value).
    std::vector<Value> copies(args.size());
    std::vector<Value*> ptrs(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      copies[i] = *args[i];
      ptrs[i] = &copies[i];
    }
    for (size_t t : {size_t{0}, size_t{1}, size_t{9}, args.size() - 1}) {
      if (copies[t].kind == Value::Kind::kTensor && copies[t].tensor.rank() == 3) {
        copies[t].tensor.sizes.insert(copies[t].tensor.sizes.begin() + 2, 1);
      }
    }
    const int64_t lead[] = {1, 0, 1, 0};  // stride, padding, dilation, output_padding
    const size_t list_args[] = {3, 4, 5, 7};
    for (int k = 0; k < 4; ++k) {
      std::vector<int64_t>& v = copies[list_args[k]].ints;
      if (v.size() != 1) {
        return ctx.error(
            "a 1-d convolution takes one value for stride, padding, dilation and "
            "output_padding");
      }
      v.insert(v.begin(), lead[k]);
    }
    return convolution_kernel(ctx, ptrs);
  }
  if (x.rank() != 4 || w.rank() != 4) {
    return ctx.error("only 1-d and 2-d convolutions are supported: input " + shape_str(x.sizes) +
                     " and weight " + shape_str(w.sizes) + " must both have rank 3 or 4");
  }
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  if (w.dtype != x.dtype || (bias != nullptr && bias->dtype != x.dtype)) {
    return ctx.error("weight and bias must have the input's dtype " +
                     std::string(dtype_name(x.dtype)));
  }
  if (groups <= 0) return ctx.error("groups must be positive, got " + std::to_string(groups));
  ETC_ASSIGN_OR_RETURN(auto stride, pair_arg(ctx, "stride", args[3]->ints, 1, false));
  ETC_ASSIGN_OR_RETURN(auto pad, pair_arg(ctx, "padding", args[4]->ints, 0, false));
  ETC_ASSIGN_OR_RETURN(auto dil, pair_arg(ctx, "dilation", args[5]->ints, 1, false));
  ETC_ASSIGN_OR_RETURN(auto opad, pair_arg(ctx, "output_padding", args[7]->ints, 0, true));
  for (int i = 0; i < 2; ++i) {
    if (stride[i] <= 0) return ctx.error("stride must be positive");
    if (dil[i] <= 0) return ctx.error("dilation must be positive");
    if (pad[i] < 0) return ctx.error("padding must not be negative");
    if (opad[i] < 0 || (opad[i] > 0 && !transposed)) {
      return ctx.error("output_padding must be 0 unless transposed");
    }
  }
  ConvGeometry g{x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3], 0,   w.sizes[2], w.sizes[3],
                 0,          0,          groups,     stride,     pad, dil};
  if (!transposed) {
    if (w.sizes[0] % groups != 0 || w.sizes[1] * groups != g.c_in) {
      return ctx.error("weight " + shape_str(w.sizes) + " with groups=" + std::to_string(groups) +
                       " does not fit input " + shape_str(x.sizes));
    }
    g.c_out = w.sizes[0];
  } else {
    if (w.sizes[0] != g.c_in || g.c_in % groups != 0) {
      return ctx.error("transposed weight " + shape_str(w.sizes) + " with groups=" +
                       std::to_string(groups) + " does not fit input " + shape_str(x.sizes));
    }
    g.c_out = w.sizes[1] * groups;
  }
  if (bias != nullptr && (bias->rank() != 1 || bias->sizes[0] != g.c_out)) {
    return ctx.error("bias must have shape [" + std::to_string(g.c_out) + "], got " +
                     shape_str(bias->sizes));
  }
  int64_t spatial[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t in = x.sizes[2 + i];
    const int64_t k = w.sizes[2 + i];
    if (!transposed) {
      const int64_t span = dil[i] * (k - 1) + 1;
      if (in + 2 * pad[i] < span) {
        return ctx.error("kernel of extent " + std::to_string(span) +
                         " is larger than the padded input (" + std::to_string(in + 2 * pad[i]) +
                         ")");
      }
      spatial[i] = (in + 2 * pad[i] - span) / stride[i] + 1;
    } else {
      spatial[i] = (in - 1) * stride[i] - 2 * pad[i] + dil[i] * (k - 1) + opad[i] + 1;
      if (spatial[i] <= 0) return ctx.error("transposed convolution output would be empty");
    }
  }
  g.oh = spatial[0];
  g.ow = spatial[1];
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, std::vector<int64_t>{g.batch, g.c_out, g.oh, g.ow}, x.dtype));
  if (out.numel() == 0) return Status();
  // The weights are packed once when they are a constant of the program.
  std::unique_ptr<KernelState>* state =
      ctx.state != nullptr && ctx.is_constant(1) && w.dtype == DType::kFloat32 ? ctx.state
                                                                               : nullptr;
  if (x.dtype == DType::kFloat64) {
    conv_typed<double>(g, transposed, x, w, bias, out, nullptr, nullptr);
  } else {
    conv_typed<float>(g, transposed, x, w, bias, out, state,
                      out.dtype == DType::kFloat32 ? ctx.epilogue : nullptr);
  }
  return Status();
}

// ---- Pooling -------------------------------------------------------------------------

struct PoolParams {
  std::array<int64_t, 2> kernel, stride, pad, dil;
  bool ceil_mode = false;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t planes = 0;  // N*C (or C for a rank-3 input)
  std::vector<int64_t> out_sizes;
};

// ATen's pooling_output_shape.
Result<int64_t> pooled_size(const KernelContext& ctx, int64_t in, int64_t k, int64_t pad,
                            int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t span = dilation * (k - 1) + 1;
  const int64_t num = in + 2 * pad - span;
  if (num < 0) {
    return ctx.error("kernel of extent " + std::to_string(span) +
                     " does not fit an input of size " + std::to_string(in) + " with padding " +
                     std::to_string(pad));
  }
  int64_t out = (num + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  // A last window that starts inside the right padding is dropped.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Result<PoolParams> pool_params(const KernelContext& ctx, const TensorView& self,
                               const Value& kernel, const Value& stride, const Value& padding,
                               const Value* dilation, bool ceil_mode) {
  if (self.rank() != 3 && self.rank() != 4) {
    return ctx.error("self must have rank 3 or 4, got " + shape_str(self.sizes));
  }
  PoolParams p;
  ETC_ASSIGN_OR_RETURN(p.kernel, pair_arg(ctx, "kernel_size", kernel.ints, 0, false));
  ETC_ASSIGN_OR_RETURN(p.stride, pair_arg(ctx, "stride", stride.ints, 0, true));
  if (stride.ints.empty()) p.stride = p.kernel;  // stride=[] means the kernel size
  ETC_ASSIGN_OR_RETURN(p.pad, pair_arg(ctx, "padding", padding.ints, 0, false));
  p.dil = {1, 1};
  if (dilation != nullptr) {
    ETC_ASSIGN_OR_RETURN(p.dil, pair_arg(ctx, "dilation", dilation->ints, 1, false));
  }
  for (int i = 0; i < 2; ++i) {
    if (p.kernel[i] <= 0) return ctx.error("kernel_size must be positive");
    if (p.stride[i] <= 0) return ctx.error("stride must be positive");
    if (p.dil[i] <= 0) return ctx.error("dilation must be positive");
    if (p.pad[i] < 0 || p.pad[i] * 2 > p.kernel[i]) {
      return ctx.error("padding must be between 0 and half the kernel size, got " +
                       std::to_string(p.pad[i]));
    }
  }
  p.ceil_mode = ceil_mode;
  const size_t r = self.rank();
  p.in_h = self.sizes[r - 2];
  p.in_w = self.sizes[r - 1];
  ETC_ASSIGN_OR_RETURN(
      p.out_h, pooled_size(ctx, p.in_h, p.kernel[0], p.pad[0], p.stride[0], p.dil[0], ceil_mode));
  ETC_ASSIGN_OR_RETURN(
      p.out_w, pooled_size(ctx, p.in_w, p.kernel[1], p.pad[1], p.stride[1], p.dil[1], ceil_mode));
  p.planes = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    p.planes *= self.sizes[d];
  p.out_sizes = self.sizes;
  p.out_sizes[r - 2] = p.out_h;
  p.out_sizes[r - 1] = p.out_w;
  return p;
}

// One output element: the window's largest value (NaN wins, as in PyTorch) and its flat
// index in the plane; the first of equal values is kept.
template <typename C>
inline bool max_pool_takes(C v, C best, bool have) {
  if constexpr (std::is_floating_point_v<C>) return !have | (v > best) | (v != v);
  return !have | (v > best);
}

// c ? a : b on the bits, without a branch (which tap wins is data: a branch mispredicts).
template <typename T>
inline T select_bits(bool c, T a, T b) {
  using U =
      std::conditional_t<sizeof(T) == 8, uint64_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t,
                                            std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(c));
  const U r = static_cast<U>((ua & mask) | (ub & static_cast<U>(~mask)));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// 8 consecutive outputs of one tap row: src[0], src[stride], ... for stride 1 or 2 (stride
// 2 loads 16 values and keeps the even ones; lane 7 of the second load, one past the last
// value used, is masked off unless `whole`).
__attribute__((target("avx2"))) inline __m256 tap_values_avx2(const float* src, int64_t stride,
                                                              bool whole) {
  if (stride == 1) return _mm256_loadu_ps(src);
  const __m256i mask =
      whole ? _mm256_set1_epi32(-1) : _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
  const __m256 even = _mm256_shuffle_ps(_mm256_loadu_ps(src), _mm256_maskload_ps(src + 8, mask),
                                        _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
}

// A row of float32 max-pool outputs without indices whose windows lie inside the input
// across (rows[i] + j * dw + o * stride: the window's rows inside the input, in order; stride
// 1 or 2; count >= 8), 8 outputs at a time with every tap in registers: each output takes
// its taps in the scalar loop's order with its comparison (the larger or a NaN value wins),
// so the same bits. The last 8 outputs overlap the previous ones where count is not a
// multiple of 8 (computed twice, the same values).
__attribute__((target("avx2"))) void max_pool_row_f32_avx2(const float* const* rows, int64_t nrows,
                                                           int64_t kw, int64_t dw, int64_t stride,
                                                           int64_t count, float* out) {
  for (int64_t o = 0; o < count; o += 8) {
    const int64_t at = std::min(o, count - 8);
    const bool whole = at + 8 < count;
    __m256 best = tap_values_avx2(rows[0] + at * stride, stride, whole);
    for (int64_t i = 0; i < nrows; ++i) {
      for (int64_t j = i == 0 ? 1 : 0; j < kw; ++j) {
        const __m256 v = tap_values_avx2(rows[i] + j * dw + at * stride, stride, whole);
        const __m256 take =
            _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        best = _mm256_blendv_ps(best, v, take);
      }
    }
    _mm256_storeu_ps(out + at, best);
  }
}

// One tap across a row of outputs: best[o] and index[o] (may be null) take src[o * stride]
// when it is larger or NaN, or unconditionally for the window's first tap. No output depends
// on another, so the loop pipelines (and vectorises without indices).
template <typename T>
void pool_row_tap(const T* __restrict src, int64_t stride, int64_t count, T* __restrict best,
                  int64_t* __restrict index, int64_t idx0, bool first) {
  if (first) {
    for (int64_t o = 0; o < count; ++o)
      best[o] = src[o * stride];
    if (index != nullptr) {
      for (int64_t o = 0; o < count; ++o)
        index[o] = idx0 + o * stride;
    }
    return;
  }
  if (index == nullptr) {
    for (int64_t o = 0; o < count; ++o) {
      const T v = src[o * stride];
      best[o] = select_bits(max_pool_takes<T>(v, best[o], true), v, best[o]);
    }
    return;
  }
  for (int64_t o = 0; o < count; ++o) {
    const T v = src[o * stride];
    const bool take = max_pool_takes<T>(v, best[o], true);
    best[o] = select_bits(take, v, best[o]);
    index[o] = select_bits(take, idx0 + o * stride, index[o]);
  }
}

template <typename T>
void max_pool_typed(const PoolParams& p, const TensorView& self, TensorView& out,
                    int64_t* indices) {
  using C = ComputeT<T>;
  const T* x = self.data_as<const T>();
  T* y = out.data_as<T>();
  const int64_t in_plane = p.in_h * p.in_w;
  const int64_t out_plane = p.out_h * p.out_w;
  // Output (pl, oh, ow) over its window, bounds-checked: padding counts as -inf (skipped).
  auto one_output = [&](const T* xp, int64_t pl, int64_t oh, int64_t ow) {
    const int64_t h0 = oh * p.stride[0] - p.pad[0], w0 = ow * p.stride[1] - p.pad[1];
    C best{};
    int64_t best_index = -1;
    for (int64_t i = 0; i < p.kernel[0]; ++i) {
      const int64_t ih = h0 + i * p.dil[0];
      if (ih < 0 || ih >= p.in_h) continue;
      for (int64_t j = 0; j < p.kernel[1]; ++j) {
        const int64_t iw = w0 + j * p.dil[1];
        if (iw < 0 || iw >= p.in_w) continue;
        const int64_t idx = ih * p.in_w + iw;
        const C v = convert<C>(xp[idx]);
        if (max_pool_takes(v, best, best_index >= 0)) {
          best = v;
          best_index = idx;
        }
      }
    }
    if (best_index < 0) {  // no tap inside (impossible with pad <= kernel / 2)
      best = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                         : std::numeric_limits<C>::lowest();
    }
    const int64_t o = pl * out_plane + oh * p.out_w + ow;
    y[o] = convert<T>(best);
    if (indices != nullptr) indices[o] = best_index;
  };
  // Row oh of plane pl. Outputs [lo, hi) of a row whose windows lie inside the input go a
  // tap at a time across the row (pool_row_tap), so that no output waits on the previous
  // tap's comparison; the rest take the bounds-checked path.
  auto one_row = [&](int64_t pl, int64_t oh) {
    const T* xp = x + pl * in_plane;
    const int64_t h0 = oh * p.stride[0] - p.pad[0];
    int64_t lo = 0, hi = 0;
    if constexpr (std::is_same_v<T, C>) {
      // The window's rows inside the input, [i0, i1): a row of padding is no tap (-inf), so
      // the top and bottom output rows skip theirs and go the same way.
      int64_t i0 = 0, i1 = p.kernel[0];
      while (i0 < i1 && h0 + i0 * p.dil[0] < 0)
        ++i0;
      while (i1 > i0 && h0 + (i1 - 1) * p.dil[0] >= p.in_h)
        --i1;
      if (i0 < i1) {
        lo = std::min(p.out_w, (p.pad[1] + p.stride[1] - 1) / p.stride[1]);
        hi = p.out_w;
        while (hi > lo &&
               (hi - 1) * p.stride[1] - p.pad[1] + (p.kernel[1] - 1) * p.dil[1] >= p.in_w)
          --hi;
        T* yr = y + pl * out_plane + oh * p.out_w;
        int64_t* ir = indices != nullptr ? indices + pl * out_plane + oh * p.out_w : nullptr;
        if constexpr (std::is_same_v<T, float>) {
          if (ir == nullptr && hi - lo >= 8 && (p.stride[1] == 1 || p.stride[1] == 2) &&
              i1 - i0 <= 16 && gemm_uses_avx2()) {
            const float* rows[16];
            for (int64_t i = i0; i < i1; ++i)
              rows[i - i0] = xp + (h0 + i * p.dil[0]) * p.in_w - p.pad[1] + lo * p.stride[1];
            max_pool_row_f32_avx2(rows, i1 - i0, p.kernel[1], p.dil[1], p.stride[1], hi - lo,
                                  yr + lo);
            i1 = i0;  // done: no taps left for the loop below
          }
        }
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            const int64_t first =
                (h0 + i * p.dil[0]) * p.in_w + j * p.dil[1] - p.pad[1] + lo * p.stride[1];
            pool_row_tap<T>(xp + first, p.stride[1], hi - lo, yr + lo,
                            ir == nullptr ? nullptr : ir + lo, first, i == i0 && j == 0);
          }
        }
      }
    }
    for (int64_t ow = 0; ow < lo; ++ow)
      one_output(xp, pl, oh, ow);
    for (int64_t ow = std::max(lo, hi); ow < p.out_w; ++ow)
      one_output(xp, pl, oh, ow);
  };
  // Planes (channels) in parallel: each output element is one thread's, computed as serially.
  parallel_for(p.planes, 1, [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl)
      for (int64_t oh = 0; oh < p.out_h; ++oh)
        one_row(pl, oh);
  });
}

Status max_pool(KernelContext& ctx, std::span<Value*> args, bool with_indices) {
  const std::initializer_list<ArgSpec> inputs = {
      {"self", Arg::kTensor},     {"kernel_size", Arg::kIntList}, {"stride", Arg::kIntList},
      {"padding", Arg::kIntList}, {"dilation", Arg::kIntList},    {"ceil_mode", Arg::kBool}};
  if (with_indices) {
    ETC_RETURN_IF_ERROR(check_args(ctx, args, inputs, {"out", "indices"}));
  } else {
    ETC_RETURN_IF_ERROR(check_args(ctx, args, inputs, {"out"}));
  }
  const TensorView& self = tensor_arg(args, 0);
  if (self.dtype == DType::kBool) {
    return unsupported_dtype(ctx, "self", self.dtype, "a numeric dtype (not bool)");
  }
  ETC_ASSIGN_OR_RETURN(PoolParams p,
                       pool_params(ctx, self, *args[1], *args[2], *args[3], args[4], args[5]->b));
  TensorView& out = out_arg(args, 6);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, p.out_sizes, self.dtype));
  int64_t* indices = nullptr;
  if (with_indices) {
    TensorView& idx = out_arg(args, 7);
    ETC_RETURN_IF_ERROR(check_out(ctx, idx, p.out_sizes, DType::kInt64, "indices"));
    // Indices nothing reads (an inference program's) are not computed: a plain max.
    if (!ctx.is_unread(7)) indices = idx.data_as<int64_t>();
  }
  if (out.numel() == 0) return Status();
  visit_dtype(self.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) max_pool_typed<T>(p, self, out, indices);
  });
  return Status();
}

Status max_pool2d_with_indices_kernel(KernelContext& ctx, std::span<Value*> args) {
  return max_pool(ctx, args, true);
}

// The IR's max_pool2d (one output; ExecuTorch only has the with_indices out-variant).
Status max_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  return max_pool(ctx, args, false);
}

template <typename T>
void avg_pool_typed(const PoolParams& p, bool count_include_pad,
                    std::optional<int64_t> divisor_override, const TensorView& self,
                    TensorView& out) {
  const T* x = self.data_as<const T>();
  T* y = out.data_as<T>();
  const int64_t in_plane = p.in_h * p.in_w;
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        // ATen: the padded window (clipped to input + padding) sets count_include_pad's
        // divisor; the sum runs over the part inside the input.
        int64_t h0 = oh * p.stride[0] - p.pad[0];
        int64_t w0 = ow * p.stride[1] - p.pad[1];
        int64_t h1 = std::min(h0 + p.kernel[0], p.in_h + p.pad[0]);
        int64_t w1 = std::min(w0 + p.kernel[1], p.in_w + p.pad[1]);
        const int64_t padded_count = (h1 - h0) * (w1 - w0);
        h0 = std::max<int64_t>(h0, 0);
        w0 = std::max<int64_t>(w0, 0);
        h1 = std::min(h1, p.in_h);
        w1 = std::min(w1, p.in_w);
        double sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw)
            sum += convert<double>(xp[ih * p.in_w + iw]);
        }
        const int64_t divisor = divisor_override    ? *divisor_override
                                : count_include_pad ? padded_count
                                                    : (h1 - h0) * (w1 - w0);
        y[(pl * p.out_h + oh) * p.out_w + ow] = convert<T>(sum / static_cast<double>(divisor));
      }
    }
  }
}

Status avg_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args,
                                 {{"self", Arg::kTensor},
                                  {"kernel_size", Arg::kIntList},
                                  {"stride", Arg::kIntList},
                                  {"padding", Arg::kIntList},
                                  {"ceil_mode", Arg::kBool},
                                  {"count_include_pad", Arg::kBool},
                                  {"divisor_override", Arg::kOptInt}},
                                 {"out"}));
  const TensorView& self = tensor_arg(args, 0);
  if (!dtype_is_float(self.dtype)) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  }
  std::optional<int64_t> divisor = opt_int_arg(args, 6);
  if (divisor && *divisor == 0) return ctx.error("divisor_override must not be zero");
  ETC_ASSIGN_OR_RETURN(PoolParams p,
                       pool_params(ctx, self, *args[1], *args[2], *args[3], nullptr, args[4]->b));
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, p.out_sizes, self.dtype));
  if (out.numel() == 0) return Status();
  visit_float_dtype(self.dtype,
                    [&]<typename T>() { avg_pool_typed<T>(p, args[5]->b, divisor, self, out); });
  return Status();
}

Status adaptive_avg_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(
      check_args(ctx, args, {{"self", Arg::kTensor}, {"output_size", Arg::kIntList}}, {"out"}));
  const TensorView& self = tensor_arg(args, 0);
  const std::vector<int64_t>& os = args[1]->ints;
  TensorView& out = out_arg(args, 2);
  if (self.rank() != 3 && self.rank() != 4) {
    return ctx.error("self must have rank 3 or 4, got " + shape_str(self.sizes));
  }
  if (!dtype_is_float(self.dtype)) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  }
  if (os.size() != 2 || os[0] <= 0 || os[1] <= 0) {
    return ctx.error("output_size must be two positive sizes, got " + shape_str(os));
  }
  const size_t r = self.rank();
  std::vector<int64_t> expected = self.sizes;
  expected[r - 2] = os[0];
  expected[r - 1] = os[1];
  ETC_RETURN_IF_ERROR(check_out(ctx, out, expected, self.dtype));
  if (out.numel() == 0) return Status();
  const int64_t ih = self.sizes[r - 2], iw = self.sizes[r - 1];
  const int64_t planes = self.numel() / std::max<int64_t>(ih * iw, 1);
  visit_float_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    T* y = out.data_as<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t oh = 0; oh < os[0]; ++oh) {
        // PyTorch: start = floor(i * in / out), end = ceil((i + 1) * in / out).
        const int64_t h0 = oh * ih / os[0];
        const int64_t h1 = ((oh + 1) * ih + os[0] - 1) / os[0];
        for (int64_t ow = 0; ow < os[1]; ++ow) {
          const int64_t w0 = ow * iw / os[1];
          const int64_t w1 = ((ow + 1) * iw + os[1] - 1) / os[1];
          double sum = 0;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w)
              sum += convert<double>(x[(pl * ih + h) * iw + w]);
          }
          const auto count = static_cast<double>((h1 - h0) * (w1 - w0));
          y[(pl * os[0] + oh) * os[1] + ow] = convert<T>(sum / count);
        }
      }
    }
  });
  return Status();
}

// Source coordinate of output position o along a dim resized from `in` to `out` elements.
struct ResizeAxis {
  int64_t in = 0, out = 0;
  std::optional<double> scale;  // the scale factor, when given instead of a size
  bool align_corners = false;

  // nearest ("legacy" PyTorch/ONNX asymmetric + floor): floor(o / scale).
  int64_t nearest(int64_t o) const {
    int64_t i =
        scale ? static_cast<int64_t>(std::floor(static_cast<double>(o) / *scale)) : o * in / out;
    return std::min(i, in - 1);
  }
  // bilinear: the two neighbours and the weight of the second.
  void linear(int64_t o, int64_t* i0, int64_t* i1, double* w) const {
    double src;
    if (align_corners) {
      src = out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) /
                          static_cast<double>(out - 1)
                    : 0.0;
    } else {
      const double ratio =
          scale ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
      src = std::max((static_cast<double>(o) + 0.5) * ratio - 0.5, 0.0);
    }
    *i0 = std::min(static_cast<int64_t>(src), in - 1);
    *i1 = std::min(*i0 + 1, in - 1);
    *w = std::min(src - static_cast<double>(*i0), 1.0);
  }
};

Status upsample2d(KernelContext& ctx, std::span<Value*> args, bool bilinear) {
  ETC_ASSIGN_OR_RETURN(UpsampleShape shape, check_upsample2d(ctx, args, bilinear));
  const TensorView& x = tensor_arg(args, 0);
  TensorView& out = out_arg(args, bilinear ? 4 : 3);
  if (out.numel() == 0) return Status();
  ResizeAxis ax[2];
  for (size_t i = 0; i < 2; ++i)
    ax[i] = ResizeAxis{shape.in[i], shape.out[i], shape.scale[i], shape.align_corners};
  const int64_t ih = ax[0].in, iw = ax[1].in, oh = ax[0].out, ow = ax[1].out;
  const int64_t planes = x.sizes[0] * x.sizes[1];
  visit_float_dtype(x.dtype, [&]<typename T>() {
    const T* src = x.data_as<const T>();
    T* dst = out.data_as<T>();
    if (!bilinear) {
      std::vector<int64_t> cols(static_cast<size_t>(ow));
      for (int64_t j = 0; j < ow; ++j)
        cols[j] = ax[1].nearest(j);
      for (int64_t p = 0; p < planes; ++p) {
        for (int64_t i = 0; i < oh; ++i) {
          const T* row = src + (p * ih + ax[0].nearest(i)) * iw;
          T* d = dst + (p * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j)
            d[j] = row[cols[j]];
        }
      }
      return;
    }
    std::vector<int64_t> c0(static_cast<size_t>(ow)), c1(static_cast<size_t>(ow));
    std::vector<double> cw(static_cast<size_t>(ow));
    for (int64_t j = 0; j < ow; ++j)
      ax[1].linear(j, &c0[j], &c1[j], &cw[j]);
    for (int64_t p = 0; p < planes; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        int64_t r0, r1;
        double rw;
        ax[0].linear(i, &r0, &r1, &rw);
        const T* a = src + (p * ih + r0) * iw;
        const T* b = src + (p * ih + r1) * iw;
        T* d = dst + (p * oh + i) * ow;
        for (int64_t j = 0; j < ow; ++j) {
          const double top =
              convert<double>(a[c0[j]]) * (1 - cw[j]) + convert<double>(a[c1[j]]) * cw[j];
          const double bot =
              convert<double>(b[c0[j]]) * (1 - cw[j]) + convert<double>(b[c1[j]]) * cw[j];
          d[j] = convert<T>(top * (1 - rw) + bot * rw);
        }
      }
    }
  });
  return Status();
}

}  // namespace

Status register_conv_pool_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(register_kernel(
      r, {"aten::upsample_nearest2d.vec_out", "aten::upsample_nearest2d.vec"},
      [](KernelContext& ctx, std::span<Value*> args) { return upsample2d(ctx, args, false); }));
  ETC_RETURN_IF_ERROR(register_kernel(
      r, {"aten::upsample_bilinear2d.vec_out", "aten::upsample_bilinear2d.vec"},
      [](KernelContext& ctx, std::span<Value*> args) { return upsample2d(ctx, args, true); }));
  ETC_RETURN_IF_ERROR(register_kernel(r, {"aten::convolution.out", "aten::convolution.default"},
                                      convolution_kernel));
  ETC_RETURN_IF_ERROR(register_kernel(
      r, {"aten::max_pool2d_with_indices.out", "aten::max_pool2d_with_indices.default"},
      max_pool2d_with_indices_kernel));
  ETC_RETURN_IF_ERROR(register_kernel(r, {"aten::max_pool2d.default"}, max_pool2d_kernel));
  ETC_RETURN_IF_ERROR(
      register_kernel(r, {"aten::avg_pool2d.out", "aten::avg_pool2d.default"}, avg_pool2d_kernel));
  ETC_RETURN_IF_ERROR(
      register_kernel(r, {"aten::_adaptive_avg_pool2d.out", "aten::adaptive_avg_pool2d.default"},
                      adaptive_avg_pool2d_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
