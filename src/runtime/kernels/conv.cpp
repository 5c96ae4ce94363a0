// 2-d convolution (NCHW; groups, stride, padding, dilation, transposed). Pooling and
// resizing are in pool_resize.cpp.
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
#include "runtime/kernels/conv_algorithm.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_transpose.h"
#include "support/checked_math.h"

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

// etc's NHWC Winograd on x into y (each NHWC or NCHW), its transformed weights made at the
// first call and kept in `state` (keyed by the weight's bytes): the NCHW path and the
// channels-last chains both run it.
void run_winograd_nhwc(std::unique_ptr<KernelState>& state, const void* weight_key, const float* w,
                       const float* bias, const ConvGeometry& g, const float* x, bool x_nhwc,
                       float* y, bool y_nhwc, const Epilogue* epilogue) {
  const WinogradNhwcWeights& packed = cached_kernel_state<WinogradNhwcWeights>(
      state, {weight_key, g.c_out, g.c_in},
      [&] { return WinogradNhwcWeights::make(w, g.c_out, g.c_in); });
  winograd_nhwc_f32(x, x_nhwc, packed, bias, g, y, y_nhwc, epilogue);
}

// Convolutions with at most this many output positions (images x plane) in all multiply them
// as rows against the transposed weights.
constexpr int64_t kPositionsAsRows = 64;

// One plane of an input channel xc (H x W), zero-padded by g.pad and split by stride
// (sh, sw): plane[r][q] = padded[r * sh + a][q * sw + b] (0 past the padded input), hq x wq
// values. With stride (1, 1) and phase (0, 0): the padded plane itself.
void fill_phase_plane(const float* xc, const ConvGeometry& g, int64_t sh, int64_t sw, int64_t a,
                      int64_t b, int64_t hq, int64_t wq, float* plane) {
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

// acc += col^T @ W^T, col^T gathered from the zero-padded input (positions_as_rows_f32).
void positions_gathered(const float* x, const PackedB& wt, const ConvGeometry& g, float* acc) {
  const int64_t out_plane = g.oh * g.ow, kdim = wt.depth();
  const int64_t rows = g.batch * out_plane;
  const int64_t hp = g.h + 2 * g.pad[0], wp = g.w + 2 * g.pad[1], plane = hp * wp;
  Buffer<float> padded(g.batch * g.c_in * plane);
  for (int64_t c = 0; c < g.batch * g.c_in; ++c)
    fill_phase_plane(x + c * g.h * g.w, g, 1, 1, 0, 0, hp, wp, padded.data() + c * plane);
  std::vector<int64_t> row_offsets(static_cast<size_t>(rows)), col_offsets;
  col_offsets.reserve(static_cast<size_t>(kdim));
  for (int64_t n = 0, r = 0; n < g.batch; ++n) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      for (int64_t ow = 0; ow < g.ow; ++ow, ++r) {
        row_offsets[static_cast<size_t>(r)] =
            n * g.c_in * plane + oh * g.stride[0] * wp + ow * g.stride[1];
      }
    }
  }
  for (int64_t c = 0; c < g.c_in; ++c) {
    for (int64_t i = 0; i < g.kh; ++i) {
      for (int64_t j = 0; j < g.kw; ++j)
        col_offsets.push_back(c * plane + i * g.dil[0] * wp + j * g.dil[1]);
    }
  }
  gemm_packed(rows, 1.0f,
              MatrixRef<float>{padded.data(), 0, 0, row_offsets.data(), col_offsets.data()}, wt,
              acc, g.c_out);
}

// y = bias (0 when null) + conv(x) for one group, output positions as rows: row n*OH*OW + p
// of col^T is output position p of image n (its im2col column), multiplied by the
// transposed weights `wt` ([C_in*KH*KW, C_out] panels); each row starts from the bias and
// takes every K block in order (the bits of the GEMM over columns). col^T is never built:
// a pointwise convolution of one image reads it as its input transposed; otherwise the GEMM
// gathers its panels from the padded input (MatrixRef::col_offsets), row (n, oh, ow) at
// offset n*C*Hp*Wp + oh*SH*Wp + ow*SW, column (c, i, j) at c*Hp*Wp + i*DH*Wp + j*DW.
void positions_as_rows_f32(const float* x, const PackedB& wt, const float* bias,
                           const ConvGeometry& g, float* y, const Epilogue* epilogue) {
  const int64_t out_plane = g.oh * g.ow;
  const int64_t rows = g.batch * out_plane;
  Buffer<float> acc(rows * g.c_out);
  for (int64_t r = 0; r < rows; ++r) {
    float* a = acc.data() + r * g.c_out;
    if (bias != nullptr) {
      std::copy_n(bias, g.c_out, a);
    } else {
      std::fill_n(a, g.c_out, 0.0f);
    }
  }
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                         g.pad[0] == 0 && g.pad[1] == 0;
  if (pointwise && g.batch == 1) {
    // The column matrix is the input itself, transposed: col^T[p, c] = x[c * plane + p]
    // (MR positions of one channel side by side: a contiguous copy into each packed panel).
    gemm_packed(rows, 1.0f, MatrixRef<float>{x, 1, out_plane}, wt, acc.data(), g.c_out);
  } else {
    positions_gathered(x, wt, g, acc.data());
  }
  // acc^T into y by blocks of 16 output channels across threads (16x16 tiles through
  // registers), then each block's epilogue while it is in cache (done serially, the copy and
  // the epilogue kept mobilenet_v3_small's 1x1 layers on 7x7 from gaining on a second thread).
  const FloatKernel isa = gemm_float_kernel();
  const int64_t blocks = (g.c_out + 15) / 16;
  parallel_for(g.batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, co0 = t % blocks * 16;
      const int64_t cn = std::min<int64_t>(16, g.c_out - co0);
      const float* an = acc.data() + n * out_plane * g.c_out;
      float* yn = y + n * g.c_out * out_plane;
      for (int64_t p0 = 0; p0 < out_plane; p0 += 16) {
        transpose_tile(isa, an + p0 * g.c_out + co0, g.c_out, std::min<int64_t>(16, out_plane - p0),
                       cn, yn + co0 * out_plane + p0, out_plane);
      }
      if (epilogue != nullptr) {
        const int64_t at = (n * g.c_out + co0) * out_plane;
        apply_epilogue(*epilogue, at, at + cn * out_plane);
      }
    }
  });
}

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
  // state: constant float32 weights (the caller passes it only then).
  ConvCall call{transposed, std::is_same_v<G, float> ? DType::kFloat32 : DType::kFloat64,
                state != nullptr, false, onednn_conv_enabled()};
  ConvAlgorithm algorithm = choose_conv_algorithm(g, call);
  const bool is_depthwise = algorithm == ConvAlgorithm::kDepthwise;
  if constexpr (std::is_same_v<G, float>) {
    if (is_depthwise) {  // writes every output, bias included
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      const bool by_channel = epilogue != nullptr && !epilogue->after_inputs;
      const float* packed = nullptr;
      if (const int64_t lanes = depthwise_block_lanes(g, cout_g); lanes > 0 && state != nullptr) {
        packed =
            cached_kernel_state<DepthwiseWeights>(*state, {weight.data, g.c_out, kk, lanes}, [&] {
              auto fresh = std::make_unique<DepthwiseWeights>();
              fresh->packed = pack_depthwise_weights(w, g.c_out, kk, lanes);
              return fresh;
            }).packed.data();
      }
      depthwise_conv_f32(x, w, rb ? rb->data() : nullptr, g, cout_g, y,
                         by_channel ? epilogue : nullptr, packed);
      if (epilogue != nullptr && !by_channel) apply_epilogue_whole(*epilogue, out.numel());
      wy.finish();
      return;
    }
  }
  if constexpr (std::is_same_v<G, float>) {
    // Few input channels into few output channels (an RGB first layer of a MobileNet or of
    // the PP-OCR models): a direct loop with output channels in registers.
    if (algorithm == ConvAlgorithm::kFewInputChannels) {
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      // The input is copied whole before any output row is written: the epilogue goes by
      // rows even where its outs lie over the input.
      few_input_channels_conv_f32(x, w, rb ? rb->data() : nullptr, g, y, epilogue);
      wy.finish();
      return;
    }
    // 3x3 stride-1 layers: Winograd on NHWC copies of the input and the out (the kernel of
    // the channels-last chains, conv_winograd_nhwc.cpp), the epilogue on the out after.
    if (algorithm == ConvAlgorithm::kWinogradNhwc) {
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      run_winograd_nhwc(*state, weight.data, w, rb ? rb->data() : nullptr, g, x, false, y, false,
                        epilogue);
      wy.finish();
      return;
    }
  }
#if ETC_WITH_ONEDNN
  if constexpr (std::is_same_v<G, float>) {
    // oneDNN's JIT convolutions where it has one (conv_onednn.cpp).
    if (algorithm == ConvAlgorithm::kOnednn) {
      const OnednnConv::Key key{weight.data, g.c_in, g.c_out, g.kh,    g.kw,
                                g.stride,    g.pad,  g.dil,   g.groups};
      const OnednnConv& dnn =
          cached_kernel_state<OnednnConv>(*state, key, [&] { return OnednnConv::make(w, g, key); });
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      if (dnn.run(x, rb ? rb->data() : nullptr, g, y, epilogue)) {
        wy.finish();
        return;
      }
      // No JIT kernel for this shape: etc's own, keeping their state beside oneDNN's.
      state = &dnn.fallback;
      call.onednn = false;
      algorithm = choose_conv_algorithm(g, call);
    }
  }
#endif
  if constexpr (std::is_same_v<G, float>) {
    // 3x3 stride-1 convolutions of constant weights: Winograd F(2x2, 3x3).
    if (algorithm == ConvAlgorithm::kWinograd) {
      const WinogradWeights& wg = cached_kernel_state<WinogradWeights>(
          *state, {weight.data, g.c_out, g.c_in},
          [&] { return WinogradWeights::make(w, g.c_out, g.c_in); });
      std::optional<ReadAs<G>> rb;
      if (bias != nullptr) rb.emplace(*bias);
      // The input is read a block of tile rows (and an image) at a time, after the blocks
      // before are written: where an out of the epilogue lies over the input, the epilogue
      // waits for the whole out.
      const bool by_block = epilogue != nullptr && !epilogue->after_inputs;
      winograd_conv_f32(x, wg, rb ? rb->data() : nullptr, g, y, by_block ? epilogue : nullptr,
                        wg.scratch);
      if (epilogue != nullptr && !by_block) apply_epilogue_whole(*epilogue, out.numel());
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
    // `tiles`: the epilogue to run on each tile of C as the GEMM finishes it.
    auto multiply = [&](int64_t gi, int64_t n, const G* b, G* c, int64_t ldc = -1,
                        const TileEpilogue* tiles = nullptr) {
      if (ldc < 0) ldc = out_plane;
      if constexpr (std::is_same_v<G, float>) {
        if (packed != nullptr) {
          GemmInit init{rb ? rb->data() + gi * cout_g : nullptr};
          if (tiles != nullptr) tiles->run_on_tiles_of(init);
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
        positions_as_rows_f32(x, *packed->transposed, rb ? rb->data() : nullptr, g, y,
                              epilogue_on ? epilogue : nullptr);
      }
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
          for (int64_t r = 0; r < kdim; ++r) {
            std::copy_n(one.data() + r * out_plane, out_plane,
                        col.data() + r * cols + n * out_plane);
          }
          for (int64_t co = 0; co < cout_g; ++co) {
            std::copy_n(y + (n * g.c_out + gi * cout_g + co) * out_plane, out_plane,
                        acc.data() + co * cols + n * out_plane);
          }
        }
        multiply(gi, cols, col.data(), acc.data(), cols);
        for (int64_t n = 0; n < g.batch; ++n) {
          for (int64_t co = 0; co < cout_g; ++co) {
            std::copy_n(acc.data() + co * cols + n * out_plane, out_plane,
                        y + (n * g.c_out + gi * cout_g + co) * out_plane);
          }
        }
      }
      if (epilogue_on) apply_epilogue(*epilogue, 0, out.numel());
    } else {
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t gi = 0; gi < g.groups; ++gi) {
          const G* xg = x + (n * g.c_in + gi * cin_g) * in_plane;
          G* yg = y + (n * g.c_out + gi * cout_g) * out_plane;
          if (pointwise) {  // the GEMM splits its own work across threads
            // The epilogue on each tile as the GEMM writes it, where the chain allows (else a
            // pass over the out after it: channels across threads).
            std::optional<TileEpilogue> tiles;
            if constexpr (std::is_same_v<G, float>) {
              if (epilogue_on && packed != nullptr && gemm_writes_bias)
                tiles = TileEpilogue::make(*epilogue);
            }
            multiply(gi, out_plane, xg, yg, -1, tiles ? &*tiles : nullptr);
            if (epilogue_on && !tiles) {
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
                      fill_phase_plane(xc, g, sh, sw, ph / sw, ph % sw, hq, wq,
                                       dst + (c * sh * sw + ph) * phase_plane);
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
                    for (int64_t oh = oh0; oh < oh1; ++oh) {
                      std::copy_n(tmp.data() + c * cols + (oh - oh0) * wq, g.ow,
                                  yg + c * out_plane + oh * g.ow);
                    }
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
              if (bands < int64_t{2} * num_threads() && num_threads() > 1) {
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
          if (bands < int64_t{2} * num_threads() && num_threads() > 1) {
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

}  // namespace

void to_channels_last(const float* x, int64_t channels, int64_t plane, float* out) {
  constexpr int64_t kBlock = 64;
  const FloatKernel isa = gemm_float_kernel();
  parallel_for((plane + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t q0 = b0 * kBlock; q0 < std::min(plane, b1 * kBlock); q0 += kBlock) {
      for (int64_t c0 = 0; c0 < channels; c0 += 16) {
        const int64_t cn = std::min<int64_t>(16, channels - c0);
        for (int64_t p0 = q0; p0 < std::min(plane, q0 + kBlock); p0 += 16) {
          const int64_t pn = std::min<int64_t>(16, plane - p0);
          transpose_tile(isa, x + c0 * plane + p0, plane, cn, pn, out + p0 * channels + c0,
                         channels);
        }
      }
    }
  });
}

void from_channels_last(const float* x, int64_t channels, int64_t plane, float* out) {
  constexpr int64_t kBlock = 16;
  const FloatKernel isa = gemm_float_kernel();
  parallel_for((channels + kBlock - 1) / kBlock, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t c0 = b0 * kBlock; c0 < std::min(channels, b1 * kBlock); c0 += kBlock) {
      const int64_t cn = std::min(kBlock, channels - c0);
      for (int64_t p0 = 0; p0 < plane; p0 += kBlock) {
        transpose_tile(isa, x + p0 * channels + c0, channels, std::min(kBlock, plane - p0), cn,
                       out + c0 * plane + p0, plane);
      }
    }
  });
}

Result<ConvGeometry> check_convolution(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  const bool transposed = args[6]->b;
  const int64_t groups = args[8]->i;
  if (x.rank() != 4 || w.rank() != 4) {
    return ctx.error("only 1-d and 2-d convolutions are supported: input " + shape_str(x.sizes) +
                     " and weight " + shape_str(w.sizes) + " must both have rank 3 or 4");
  }
  if (!dtype_is_float(x.dtype) && x.dtype != DType::kInt64) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype or int64");
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
    if (w.sizes[0] % groups != 0 || checked_mul(w.sizes[1], groups) != g.c_in) {
      return ctx.error("weight " + shape_str(w.sizes) + " with groups=" + std::to_string(groups) +
                       " does not fit input " + shape_str(x.sizes));
    }
    g.c_out = w.sizes[0];
  } else {
    const std::optional<int64_t> c_out = checked_mul(w.sizes[1], groups);
    if (w.sizes[0] != g.c_in || g.c_in % groups != 0 || !c_out) {
      return ctx.error("transposed weight " + shape_str(w.sizes) + " with groups=" +
                       std::to_string(groups) + " does not fit input " + shape_str(x.sizes));
    }
    g.c_out = *c_out;
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
      const std::optional<SlidingWindow> win = sliding_window(in, k, pad[i], stride[i], dil[i]);
      if (!win) return ctx.error("kernel extent or padding overflows a 64-bit size");
      if (win->count == 0) {
        return ctx.error("kernel of extent " + std::to_string(win->span) +
                         " is larger than the padded input (" + std::to_string(win->padded) + ")");
      }
      spatial[i] = win->count;
    } else {
      const std::optional<int64_t> o =
          transposed_window_extent(in, k, pad[i], stride[i], dil[i], opad[i]);
      if (!o) return ctx.error("transposed convolution output size overflows a 64-bit size");
      if (*o <= 0) return ctx.error("transposed convolution output would be empty");
      spatial[i] = *o;
    }
  }
  g.oh = spatial[0];
  g.ow = spatial[1];
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 9),
                                std::vector<int64_t>{g.batch, g.c_out, g.oh, g.ow}, x.dtype));
  return g;
}

std::optional<ConvGeometry> float_conv2d_geometry(std::span<Value* const> args) {
  if (args.size() < 10) return std::nullopt;
  for (size_t i : {size_t{0}, size_t{1}, size_t{9}}) {
    if (!args[i]->is_tensor() || args[i]->tensor.dtype != DType::kFloat32 ||
        args[i]->tensor.rank() != 4)
      return std::nullopt;
  }
  if (!args[2]->is_none() && (!args[2]->is_tensor() || args[2]->tensor.dtype != DType::kFloat32))
    return std::nullopt;
  for (size_t i : {size_t{3}, size_t{4}, size_t{5}}) {
    if (args[i]->kind != Value::Kind::kIntList || args[i]->ints.size() != 2) return std::nullopt;
  }
  if (args[6]->kind != Value::Kind::kBool || args[6]->b || args[8]->kind != Value::Kind::kInt)
    return std::nullopt;
  const TensorView& x = args[0]->tensor;
  const TensorView& w = args[1]->tensor;
  const TensorView& y = args[9]->tensor;
  const int64_t groups = args[8]->i;
  ConvGeometry g{x.sizes[0], x.sizes[1], x.sizes[2], x.sizes[3], w.sizes[0], w.sizes[2], w.sizes[3],
                 y.sizes[2], y.sizes[3], groups,     {},         {},         {}};
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = args[3]->ints[i];
    g.pad[i] = args[4]->ints[i];
    g.dil[i] = args[5]->ints[i];
    if (g.stride[i] < 1 || g.pad[i] < 0 || g.dil[i] < 1) return std::nullopt;
  }
  const std::optional<int64_t> weight_c_in = checked_mul(w.sizes[1], groups);
  if (groups < 1 || g.c_in % groups != 0 || weight_c_in != g.c_in || g.c_out % groups != 0 ||
      y.sizes[0] != g.batch || y.sizes[1] != g.c_out)
    return std::nullopt;
  const std::optional<SlidingWindow> rows =
      sliding_window(g.h, g.kh, g.pad[0], g.stride[0], g.dil[0]);
  const std::optional<SlidingWindow> cols =
      sliding_window(g.w, g.kw, g.pad[1], g.stride[1], g.dil[1]);
  if (!rows || !cols || rows->count == 0 || cols->count == 0 || g.oh != rows->count ||
      g.ow != cols->count)
    return std::nullopt;
  return g;
}

namespace {

// An int64 convolution, direct, as ATen's CPU fallback computes it: products and sums in
// int64 wrapping on overflow (done in uint64, where wrapping is defined). Transposed, each
// input element scatters into the output windows it reaches.
void conv_int64(const ConvGeometry& g, bool transposed, const TensorView& x, const TensorView& w,
                const TensorView* bias, TensorView& out) {
  const auto* xp = x.data_as<const int64_t>();
  const auto* wp = w.data_as<const int64_t>();
  auto* yp = out.data_as<int64_t>();
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
  using U = uint64_t;
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t co = 0; co < g.c_out; ++co) {
      const U b = bias != nullptr ? static_cast<U>(bias->data_as<const int64_t>()[co]) : 0;
      for (int64_t i = 0; i < g.oh * g.ow; ++i)
        yp[(n * g.c_out + co) * g.oh * g.ow + i] = static_cast<int64_t>(b);
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      for (int64_t ci = 0; ci < cin_g; ++ci) {
        const int64_t cin = grp * cin_g + ci;
        const int64_t* plane = xp + (n * g.c_in + cin) * g.h * g.w;
        for (int64_t co = 0; co < cout_g; ++co) {
          const int64_t cout = grp * cout_g + co;
          // Weight [c_out, cin_g, kh, kw], or transposed [c_in, cout_g, kh, kw].
          const int64_t* k = transposed ? wp + (cin * cout_g + co) * g.kh * g.kw
                                        : wp + (cout * cin_g + ci) * g.kh * g.kw;
          int64_t* y = yp + (n * g.c_out + cout) * g.oh * g.ow;
          for (int64_t ky = 0; ky < g.kh; ++ky) {
            for (int64_t kx = 0; kx < g.kw; ++kx) {
              const U kv = static_cast<U>(k[ky * g.kw + kx]);
              if (!transposed) {
                for (int64_t oy = 0; oy < g.oh; ++oy) {
                  const int64_t iy = oy * g.stride[0] - g.pad[0] + ky * g.dil[0];
                  if (iy < 0 || iy >= g.h) continue;
                  for (int64_t ox = 0; ox < g.ow; ++ox) {
                    const int64_t ix = ox * g.stride[1] - g.pad[1] + kx * g.dil[1];
                    if (ix < 0 || ix >= g.w) continue;
                    int64_t& dst = y[oy * g.ow + ox];
                    dst = static_cast<int64_t>(static_cast<U>(dst) +
                                               static_cast<U>(plane[iy * g.w + ix]) * kv);
                  }
                }
              } else {
                for (int64_t iy = 0; iy < g.h; ++iy) {
                  const int64_t oy = iy * g.stride[0] - g.pad[0] + ky * g.dil[0];
                  if (oy < 0 || oy >= g.oh) continue;
                  for (int64_t ix = 0; ix < g.w; ++ix) {
                    const int64_t ox = ix * g.stride[1] - g.pad[1] + kx * g.dil[1];
                    if (ox < 0 || ox >= g.ow) continue;
                    int64_t& dst = y[oy * g.ow + ox];
                    dst = static_cast<int64_t>(static_cast<U>(dst) +
                                               static_cast<U>(plane[iy * g.w + ix]) * kv);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

// A convolution of a channels-last chain (KernelContext::channels_last_args: the input, the
// out or both held [N, H, W, C]): oneDNN and etc's Winograd read and write either layout,
// etc's own kernel for 1x1 layers NHWC only (choose_conv_algorithm says which); the load
// planner sets it only for those (and a first layer's out): anything else here is a bug.
Status channels_last_convolution(KernelContext& ctx, const ConvGeometry& g, bool transposed,
                                 const TensorView& x, const TensorView& w, const TensorView* bias,
                                 TensorView& out) {
  const bool f32 = x.dtype == DType::kFloat32 && w.dtype == DType::kFloat32 &&
                   out.dtype == DType::kFloat32 &&
                   (bias == nullptr || bias->dtype == DType::kFloat32);
  const ConvCall chain{false, DType::kFloat32, true, true, onednn_conv_enabled()};
  const bool own = f32 && !transposed && ctx.state != nullptr && ctx.is_constant(1);
  const ConvAlgorithm algorithm = choose_conv_algorithm(g, chain);
  if (own && algorithm == ConvAlgorithm::kWinogradNhwc) {
    // Either layout in and out, as oneDNN's.
    run_winograd_nhwc(*ctx.state, w.data, static_cast<const float*>(w.data),
                      bias != nullptr ? static_cast<const float*>(bias->data) : nullptr, g,
                      static_cast<const float*>(x.data), ctx.is_channels_last(0),
                      static_cast<float*>(out.data), ctx.is_channels_last(9), ctx.epilogue);
    return Status();
  }
  if (own && ctx.is_channels_last(0) && ctx.is_channels_last(9)) {
    if (algorithm == ConvAlgorithm::kPointwiseNhwc) {
      const auto* wf = static_cast<const float*>(w.data);
      const PointwiseNhwcWeights& packed =
          cached_kernel_state<PointwiseNhwcWeights>(*ctx.state, {w.data, g.c_out, g.c_in}, [&] {
            return std::make_unique<PointwiseNhwcWeights>(
                PointwiseNhwcWeights::pack(wf, g.c_out, g.c_in));
          });
      pointwise_nhwc_f32(static_cast<const float*>(x.data), packed,
                         bias != nullptr ? static_cast<const float*>(bias->data) : nullptr,
                         g.batch * g.h * g.w, static_cast<float*>(out.data), ctx.epilogue);
      return Status();
    }
  }
  // A first layer (a few NCHW input channels) into a chain: etc's direct loop, its out
  // written channels-last (mobilenet_v2's 3 -> 32, 224x224: 0.17 ms against oneDNN's 0.3).
  if (!transposed && !ctx.is_channels_last(0) && ctx.is_channels_last(9) &&
      few_input_channels_conv(g) && f32) {
    few_input_channels_conv_f32(static_cast<const float*>(x.data),
                                static_cast<const float*>(w.data),
                                bias != nullptr ? static_cast<const float*>(bias->data) : nullptr,
                                g, static_cast<float*>(out.data), ctx.epilogue, true);
    return Status();
  }
#if ETC_WITH_ONEDNN
  if (!transposed && ctx.state != nullptr && ctx.is_constant(1) && f32) {
    const OnednnConv::Key key{w.data,   g.c_in, g.c_out, g.kh,    g.kw,
                              g.stride, g.pad,  g.dil,   g.groups};
    const float* wf = static_cast<const float*>(w.data);
    const OnednnConv& dnn = cached_kernel_state<OnednnConv>(
        *ctx.state, key, [&] { return OnednnConv::make(wf, g, key); });
    if (dnn.run(static_cast<const float*>(x.data),
                bias != nullptr ? static_cast<const float*>(bias->data) : nullptr, g,
                static_cast<float*>(out.data), ctx.epilogue, ctx.is_channels_last(0),
                ctx.is_channels_last(9))) {
      return Status();
    }
  }
#else
  (void)g, (void)transposed, (void)x, (void)w, (void)bias, (void)out;
#endif
  return internal_error(std::string(ctx.op) +
                        ": a channels-last convolution found no oneDNN kernel to run it");
}

Status convolution_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  const bool transposed = args[6]->b;
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
  ETC_ASSIGN_OR_RETURN(const ConvGeometry g, check_convolution(ctx, args));
  if (out.numel() == 0) return Status();
  if (choose_conv_algorithm(g, ConvCall{transposed, x.dtype}) == ConvAlgorithm::kDirectInt64) {
    if (ctx.is_channels_last(0) || ctx.is_channels_last(9))
      return ctx.error("an int64 convolution takes contiguous (not channels-last) tensors");
    conv_int64(g, transposed, x, w, bias, out);
    return Status();
  }
  if (ctx.is_channels_last(0) || ctx.is_channels_last(9))
    return channels_last_convolution(ctx, g, transposed, x, w, bias, out);
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

}  // namespace

Status register_conv_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Convolution, convolution_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
