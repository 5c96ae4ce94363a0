// How a 2-d convolution runs on the CPU: one choice, made in one place, from the call's
// geometry, its dtype, whether its weights are a constant of the program, the layout its
// tensors may be held in, and what this build and CPU offer. The convolution kernel
// (conv.cpp) runs what it says; the load planner (load_plan_channels_last.cpp) asks it which
// convolutions would run on oneDNN if their tensors were held channels-last.
#pragma once

#include <cstdint>

#include "graph/dtype.h"
#include "runtime/kernels/conv.h"

namespace etc::rt::kernels {

enum class ConvAlgorithm : uint8_t {
  kDepthwise,         // a direct loop per channel (depthwise_conv_f32; float64: its own loop)
  kFewInputChannels,  // a direct loop with output channels in registers (an RGB first layer)
  kOnednn,            // oneDNN's JIT kernel (OnednnConv); where it has none, choose again
                      // without oneDNN
  kWinograd,          // Winograd F(2x2, 3x3) on the constant weights, transformed once
                      // (NCHW; input channels not a multiple of 16)
  kGemm,              // im2col (the input itself when pointwise) and GEMM; + col2im transposed
  kDirectInt64,       // int64: direct sums wrapping on overflow, as ATen's CPU fallback
  // In a channels-last chain, a 1x1 layer oneDNN does not run: etc's own kernel reading and
  // writing NHWC, the positions (rows) by the transposed weights (pointwise_nhwc_f32).
  kPointwiseNhwc,
  // A 3x3 stride-1 layer: Winograd F(2x2, 3x3) on NHWC tensors (winograd_nhwc_f32), the
  // NCHW kWinograd's bits; in a channels-last chain in place, outside one through NHWC copies.
  kWinogradNhwc,
};

struct ConvCall {
  bool transposed = false;
  DType dtype = DType::kFloat32;
  // The weights are a constant of the program: packed, transformed or reordered once and kept
  // with the instruction.
  bool constant_weights = false;
  // The input and out may be held channels-last (a chain of convolutions that agree on it).
  // oneDNN reads and writes that layout, and with no layout copies to pay for it runs smaller
  // layers than for NCHW tensors: the answer is kOnednn where it may, else kPointwiseNhwc
  // (input and out both NHWC) for a 1x1 layer, else the choice among etc's own kernels for
  // NCHW tensors (the layer stays out of the chain).
  bool channels_last = false;
  // oneDNN may run it (onednn_conv_enabled(): built in and not turned off).
  bool onednn = false;
};

ConvAlgorithm choose_conv_algorithm(const ConvGeometry& g, const ConvCall& call);

// Whether `a` runs in a channels-last chain: kOnednn (input and out in either layout),
// kPointwiseNhwc or kWinogradNhwc (both NHWC).
bool chain_algorithm(ConvAlgorithm a);

const char* conv_algorithm_name(ConvAlgorithm a);

}  // namespace etc::rt::kernels
