#include "runtime/kernels/conv_algorithm.h"

namespace etc::rt::kernels {
namespace {

// Multiply-adds of one call.
int64_t macs(const ConvGeometry& g) {
  return g.batch * g.oh * g.ow * g.c_out * (g.c_in / g.groups) * g.kh * g.kw;
}

bool pointwise(const ConvGeometry& g) {
  return g.kh == 1 && g.kw == 1 && g.stride[0] == 1 && g.stride[1] == 1 && g.pad[0] == 0 &&
         g.pad[1] == 0;
}

// oneDNN for an NCHW call: the input is copied to channels-last and the out back, so it pays
// where the multiply-adds outweigh the copies and its fixed cost per call. Not 1x1 layers,
// which etc's GEMM multiplies straight from the NCHW input (resnet18's 1x1 stride-2 layers
// and mobilenet_v2's pointwise layers ran slower on oneDNN), and not small ones (Silero VAD's
// layers of about a million multiply-adds each) - except pointwise layers on planes of at
// most kPointwisePlane positions, where etc's GEMM has few rows and the copies are small
// (mobilenet_v2's and mobilenet_v3's last stages; on 14x14 and larger planes the copies made
// it slower). docs/benchmarks.md ("What the CPU kernels' knobs change") has the measurements
// behind every threshold here.
constexpr int64_t kOnednnMinMacs = int64_t{1} << 23;
constexpr int64_t kPointwisePlane = 64;
constexpr int64_t kOnednnPointwiseMinMacs = int64_t{1} << 20;

bool onednn_for_nchw(const ConvGeometry& g) {
  const int64_t plane = g.oh * g.ow;
  if (g.groups != 1) return false;
  if (g.kh * g.kw > 1) return macs(g) >= kOnednnMinMacs;
  return pointwise(g) && plane <= kPointwisePlane && macs(g) >= kOnednnPointwiseMinMacs;
}

// oneDNN in a channels-last chain, where no layout copy is made: any layer but 1x1 layers of
// fewer than 16 input channels (etc's GEMM wins there: PP-OCR's 12 -> 96), ungrouped 1x1
// layers under 512 K multiply-adds and other ungrouped layers under 1 M (densenet121's 3x3
// 128 -> 32 layers on 7x7, 1.8 M: 79 us a call on etc's own kernels, 50 on oneDNN in the
// chain). The 1x1 threshold was 2 M while squeeze-and-excitation blocks broke the chains
// (mobilenet_v3_small's 16 -> 16 and 24 -> 88 layers then ran slower on oneDNN, each between
// layout copies); with the chains through those blocks, 512 K took mobilenet_v3_small from
// 1.97 to 1.78 ms and mnasnet0_5 from 2.91 to 2.82 at 1 thread (Zen 4, alternating rounds),
// regnet_x_400mf 9.16 -> 8.60, the other zoo models even. Grouped layers of any width: the
// depthwise layers of 8-24 channels (the PP-OCR classifier's, mnasnet0_5's first blocks) were
// left out while the 1x1 layers around them broke the chain and each paid layout copies;
// with those on kPointwiseNhwc, oneDNN runs them in about half the time of etc's channel
// blocks, with the same bits (mnasnet0_5's 16 channels of 112x112: 0.11 -> 0.075 ms, 24 by
// stride 2: 0.10 -> 0.044; the classifier 0.53 -> 0.47 ms, where the 1x1 layers on oneDNN
// too took 0.50).
constexpr int64_t kChainMinMacs = int64_t{1} << 19;
constexpr int64_t kChainMinMacsSpatial = int64_t{1} << 20;

bool onednn_in_chain(const ConvGeometry& g) {
  if (g.kh * g.kw == 1 && g.c_in < 16) return false;
  if (g.groups > 1) return true;
  return macs(g) >= (g.kh * g.kw == 1 ? kChainMinMacs : kChainMinMacsSpatial);
}

// Winograd F(2x2, 3x3) where it was measured faster than im2col + GEMM (resnet18's 28x28 and
// 14x14 layers, 196 and 49 tiles): enough tiles for the 16 GEMMs' columns, not so many that
// the transformed tiles stream from memory (56x56, 784 tiles: no faster; 7x7, 16 tiles:
// slower).
bool winograd(const ConvGeometry& g) {
  const int64_t tiles = ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
  return g.groups == 1 && g.kh == 3 && g.kw == 3 && g.stride[0] == 1 && g.stride[1] == 1 &&
         g.dil[0] == 1 && g.dil[1] == 1 && g.c_in >= 16 && tiles >= 32 && tiles <= 400;
}

// etc's Winograd F(2x2, 3x3) on NHWC tensors, ahead of oneDNN's direct kernel: 2.25x fewer
// multiply-adds, which took each 3x3 stride-1 layer of resnet18, googlenet, squeezenet1_1
// and densenet121 in their channels-last chains from 1.25x to 1.9x faster at 1 thread (Zen
// 4; resnet18 33.7 -> 23.3 ms), except densenet's 128 -> 32 on 7x7 (16 tiles, 0.9x: with 32
// outputs a tile's products are few beside its transforms). So: at least 32 tiles, or 64
// outputs. Outside a chain too, through NHWC copies (as oneDNN's NCHW calls): PP-OCR det's
// 96 -> 24 layers on 64x80 and 32x40, outside every chain, 2.6-2.75 -> 1.83-1.86 ms and
// 0.65-0.68 -> 0.46 (the model 14.6 -> 12.8 ms).
bool winograd_nhwc_pays(const ConvGeometry& g) {
  const int64_t tiles = ((g.oh + 1) / 2) * ((g.ow + 1) / 2);
  return winograd_nhwc_shape(g) && (tiles >= 32 || g.c_out >= 64);
}

}  // namespace

ConvAlgorithm choose_conv_algorithm(const ConvGeometry& g, const ConvCall& call) {
  if (call.dtype == DType::kInt64) return ConvAlgorithm::kDirectInt64;
  const bool f32 = call.dtype == DType::kFloat32;
  const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
  if (call.channels_last) {
    if (f32 && !call.transposed && call.constant_weights) {
      if (winograd_nhwc_pays(g)) return ConvAlgorithm::kWinogradNhwc;
      if (call.onednn && onednn_in_chain(g)) return ConvAlgorithm::kOnednn;
      // What oneDNN leaves: small 1x1 layers (mnasnet0_5's 16 -> 8 and 8 -> 24 on 112x112,
      // the PP-OCR classifier's), which would otherwise break the chain into NCHW runs with
      // layout copies at each border.
      if (pointwise(g) && g.groups == 1) return ConvAlgorithm::kPointwiseNhwc;
    }
    ConvCall nchw = call;
    nchw.channels_last = nchw.onednn = false;  // outside a chain: etc's own kernels
    return choose_conv_algorithm(g, nchw);
  }
  // Depthwise (and small channel multipliers), where a GEMM would have M = cout_g of 1. One
  // input channel feeding many outputs (an STFT as a convolution: 1 -> 258 channels) is a
  // proper GEMM.
  if (!call.transposed && cin_g == 1 && cout_g <= 4 && !pointwise(g))
    return ConvAlgorithm::kDepthwise;
  if (f32 && !call.transposed && few_input_channels_conv(g))
    return ConvAlgorithm::kFewInputChannels;
  if (f32 && !call.transposed && call.constant_weights && winograd_nhwc_pays(g))
    return ConvAlgorithm::kWinogradNhwc;
  if (f32 && !call.transposed && call.constant_weights && call.onednn && onednn_for_nchw(g))
    return ConvAlgorithm::kOnednn;
  if (f32 && !call.transposed && call.constant_weights && winograd(g))
    return ConvAlgorithm::kWinograd;
  return ConvAlgorithm::kGemm;
}

bool chain_algorithm(ConvAlgorithm a) {
  return a == ConvAlgorithm::kOnednn || a == ConvAlgorithm::kPointwiseNhwc ||
         a == ConvAlgorithm::kWinogradNhwc;
}

const char* conv_algorithm_name(ConvAlgorithm a) {
  switch (a) {
    case ConvAlgorithm::kDepthwise:
      return "depthwise";
    case ConvAlgorithm::kFewInputChannels:
      return "few-input-channels";
    case ConvAlgorithm::kOnednn:
      return "onednn";
    case ConvAlgorithm::kWinograd:
      return "winograd";
    case ConvAlgorithm::kGemm:
      return "gemm";
    case ConvAlgorithm::kDirectInt64:
      return "direct-int64";
    case ConvAlgorithm::kPointwiseNhwc:
      return "pointwise-nhwc";
    case ConvAlgorithm::kWinogradNhwc:
      return "winograd-nhwc";
  }
  return "?";
}

}  // namespace etc::rt::kernels
