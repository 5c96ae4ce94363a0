// Shared by the convolution kernels (conv_pool.cpp) and their specialised loops.
#pragma once

#include <array>
#include <cstdint>

#include "runtime/kernel.h"

namespace etc::rt::kernels {

// One 2-d convolution's sizes (NCHW input, [C_out, C_in / groups, KH, KW] weight).
struct ConvGeometry {
  int64_t batch, c_in, h, w;
  int64_t c_out, kh, kw;
  int64_t oh, ow;
  int64_t groups;
  std::array<int64_t, 2> stride, pad, dil;
};

// A depthwise float convolution (one input channel per group, cout_g output channels per
// group) of every image: y[n, c] = bias[c] (0 when bias is null) + sum over the taps of
// w[c, 0, i, j] * x[n, c / cout_g, ...], then the epilogue (may be null) per channel while
// it is in cache. Each input plane is copied once into zero-padded rows, split into stride
// phases, so every tap of an output row reads a contiguous run and the rows go through
// vector registers whatever the plane's width; output channels run in parallel. Per output:
// bias, then the taps in (row, column) order with fused multiply-adds (the AVX2 and AVX-512
// builds agree bit for bit; the portable build rounds the products). A direct loop over
// three input channels (an RGB first layer) was measured slower than im2col + GEMM.
void depthwise_conv_f32(const float* x, const float* w, const float* bias, const ConvGeometry& g,
                        int64_t cout_g, float* y, const Epilogue* epilogue);

}  // namespace etc::rt::kernels
