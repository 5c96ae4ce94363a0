// Shared by the convolution kernels (conv.cpp) and their specialised loops.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"  // ConvGeometry

namespace etc::rt::kernels {

// Any kernel's epilogue chain as one activation or residual add, for the load planner to keep
// with it (Epilogue::activation; defined in kernel_util.cpp): a clamp (relu, hardtanh,
// clamp); x + a clamped, then divided (hardsigmoid) and then maybe multiplied by x, the last
// two either way round (hardswish); x plus a tensor, then maybe a clamp. x: the kernel's out
// `y`. nullopt for any other chain and for chains that broadcast a row.
std::optional<Epilogue::Activation> match_activation(const Epilogue& e, const TensorView& y);

// A depthwise float convolution (one input channel per group, cout_g output channels per
// group) of every image: y[n, c] = bias[c] (0 when bias is null) + sum over the taps of
// w[c, 0, i, j] * x[n, c / cout_g, ...], then the epilogue (may be null) per channel while
// it is in cache. Each input plane is copied once into zero-padded rows, split into stride
// phases, so every tap of an output row reads a contiguous run and the rows go through
// vector registers whatever the plane's width; output channels run in parallel. On AVX-512
// and AVX2 CPUs, one output per input channel goes 16 (AVX2: 8) channels side by side
// instead (the input transposed to channels-last and the output back; past 28x28 outputs in
// bands of rows). Per output: bias, then the taps in (row, column) order with fused
// multiply-adds (the AVX2 and AVX-512 builds agree bit for bit; the portable build rounds the
// products).
// `packed`: w as pack_depthwise_weights lays it out for depthwise_block_lanes(g, cout_g) lanes
// (a constant's, made once), or null to pack it in the call.
void depthwise_conv_f32(const float* x, const float* w, const float* bias, const ConvGeometry& g,
                        int64_t cout_g, float* y, const Epilogue* epilogue,
                        const float* packed = nullptr);

// etc's own kernel for a 1x1 layer of a channels-last chain (ConvAlgorithm::kPointwiseNhwc):
// x is [N, H, W, C_in] and y [N, H, W, C_out], and so are the epilogue's tensors. Each output
// is the sum the NCHW GEMM computes for it, in the same order with the same roundings: the
// same bits in either layout.
// The layer's constant weight [C_out, C_in, 1, 1] (stride 1, no padding, one group),
// transposed once ([C_in][C_out rounded up to 16], zero past C_out) and kept with the
// instruction.
struct PointwiseNhwcWeights final : KernelState {
  struct Key {
    const void* weight;
    int64_t c_out, c_in;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  int64_t c_in = 0, c_out = 0, npad = 0;
  std::vector<float> wt;
  static PointwiseNhwcWeights pack(const float* w, int64_t c_out, int64_t c_in);
};

// y[r, :] = bias (0 when null) + x[r, :] @ W^T for the `rows` positions (N * H * W), each
// output's multiply-adds over blocks of 256 inputs in order, as the GEMM sums them, then the
// epilogue (may be null) on each span of rows while it is in cache. Rows split across
// threads.
void pointwise_nhwc_f32(const float* x, const PointwiseNhwcWeights& w, const float* bias,
                        int64_t rows, float* y, const Epilogue* epilogue);

// The channels side by side in the vector build depthwise_conv_f32 runs for this layer (16 or
// 8), or 0 where it goes plane by plane.
int64_t depthwise_block_lanes(const ConvGeometry& g, int64_t cout_g);
// Weights of `taps` per output channel (depthwise [C, 1, KH, KW]; a first layer's [C, Cin,
// KH, KW] too) by blocks of `lanes` channels, tap-major within a block ([blocks][taps][lanes]),
// zero past the last channel.
std::vector<float> pack_depthwise_weights(const float* w, int64_t c_out, int64_t taps,
                                          int64_t lanes);

// A constant's depthwise weights so packed, kept with the instruction (they were packed per
// call: a fifth of mobilenet_v3_small's 576-channel 5x5 layer).
struct DepthwiseWeights final : KernelState {
  struct Key {
    const void* weight;
    int64_t c_out, taps, lanes;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  std::vector<float> packed;
};

// A float convolution of one group with few input channels (an RGB first layer: K = C_in x
// KH x KW is too short for a GEMM to run well, and its column matrix is the largest of the
// network): y = bias + conv(x), then the epilogue (may be null; its outs may lie over the
// input, which is read whole first) on each band of output rows, while it is in cache. The
// input planes are padded and split into stride phases once, before any output; each
// output row goes in strips of 16 (32) columns for 4 (8) output channels at a time, every tap in
// registers (8 channels x 16 lanes on AVX-512), output rows in parallel. Per output: bias,
// then the taps in (channel, row, column) order with fused multiply-adds (the AVX2 and
// AVX-512 builds agree; the portable build rounds the products).
// With out_nhwc, y is channels-last ([N, OH, OW, C_out]; the epilogue's tensors too): the
// same values in that layout (a first layer whose out a channels-last chain reads), the
// vectors along the output channels instead. Of column stride 1 or 2, that loop reads the
// input in place as it goes, with no padded planes (not read whole first: an epilogue whose
// outs lie over the input runs on the whole out after); of a larger column stride, through
// the planes as above.
void few_input_channels_conv_f32(const float* x, const float* w, const float* bias,
                                 const ConvGeometry& g, float* y, const Epilogue* epilogue,
                                 bool out_nhwc = false);
// The most output channels for which the direct loop beats im2col + GEMM with the float
// kernels in use: 32 with AVX-512 (8 channels x 16 lanes per strip: mobilenet_v2's 3 -> 32),
// 24 with AVX2 (shufflenet's 3 -> 24 on a Zen 1: 1.2-1.5 -> 0.84-1.03 ms NCHW, 0.77-0.92 ->
// 0.61-0.69 ms channels-last, three 8-wide vectors a position; mobilenet_v2's 3 -> 32 ran
// 0.48 ms against the GEMM's 0.44, and four vectors a position leave registers for two
// positions only), else 16. resnet18's 3 -> 64 7x7 stays on the GEMM.
int64_t few_input_channels_max_outputs();
// Whether a (not transposed) convolution runs few_input_channels_conv_f32: one group, at most 4
// input channels, at most few_input_channels_max_outputs() outputs, a kernel of at most 7x7.
bool few_input_channels_conv(const ConvGeometry& g);

// A float convolution through oneDNN (conv_onednn.cpp, in builds with ETC_WITH_ONEDNN), for
// constant weights: made once per shape (the weights reordered into oneDNN's format, one
// primitive per band of output rows or channels), then run(): the input copied to
// channels-last, the bands spread over etc's threads (each on one thread: oneDNN's OpenMP is
// never used), the output copied back to NCHW with the bias, then the epilogue (may be null)
// per channel; or, in a channels-last chain, any of that skipped, with a clamp activation
// (relu, relu6) run by the primitive as it stores each output (Clamp). Grouped convolutions
// (depthwise) only in chains. The bands depend on the shape (one band on one thread); oneDNN
// computes each output alike in any band, so the result does not depend on the thread count.
// `implementation` is oneDNN's name for its kernel; empty when oneDNN has no JIT kernel for the
// shape on this CPU (or $ETC_ONEDNN=0), and then run() returns false and etc's own kernels run,
// keeping their state in `fallback`. Input sizes (a program of dynamic shapes) each get their
// primitives at their first call; the last kMaxPlans are kept.
struct OnednnConv final : KernelState {
  struct Key {
    const void* weight;
    int64_t c_in, c_out, kh, kw;
    std::array<int64_t, 2> stride, pad, dil;
    int64_t groups;
    bool operator==(const Key&) const = default;
  };
  struct Impl;  // the primitives for one input size (conv_onednn.cpp)
  // The weights reordered into oneDNN's formats, shared by the plans that use the same
  // format (conv_onednn.cpp).
  struct WeightCache;
  static constexpr size_t kMaxPlans = 4;
  Key key{};
  std::string implementation;  // for the input size of the first call
  mutable std::unique_ptr<KernelState> fallback;
  OnednnConv();
  ~OnednnConv() override;
  // w: the constant weights, read again for each new input size.
  static std::unique_ptr<OnednnConv> make(const float* w, const ConvGeometry& g, const Key& key);
  // in_nhwc / out_nhwc: x / y hold their tensors channels-last ([N, H, W, C]) already, set by
  // the method's channels-last chains (kernels/load_plan.h); no copy on that side.
  bool run(const float* x, const float* bias, const ConvGeometry& g, float* y,
           const Epilogue* epilogue, bool in_nhwc = false, bool out_nhwc = false) const;
  // A clamp (relu, relu6, hardtanh) the primitive applies to each output as it stores it (a
  // oneDNN post-op), in a channels-last chain. oneDNN's clip is max then min with the bound
  // second: NaN becomes lo (as in XNNPACK's clamps) and -0 becomes +0 where lo is 0, where
  // etc's own Epilogue keeps both.
  struct Clamp {
    float lo = 0, hi = 0;
    bool operator==(const Clamp&) const = default;
  };
  // The primitives for g's input size and this out (their bands empty: no JIT kernel), made
  // at the first call that needs them; one band when etc runs on one thread.
  const Impl& plan_for(const ConvGeometry& g, bool out_nhwc, bool with_bias,
                       std::optional<Clamp> clamp = std::nullopt) const;

 private:
  const float* weights_ = nullptr;
  mutable std::vector<std::unique_ptr<Impl>> plans_;  // by input size, most recent last
  mutable std::unique_ptr<WeightCache> weight_cache_;
};
// Whether convolutions go to oneDNN where it has a kernel: false in builds without it and when
// $ETC_ONEDNN is 0 (etc's own kernels for every convolution, for comparisons); the setter
// (tests, benchmarks) overrides both ways, but cannot turn on what was not built in.
bool onednn_conv_enabled();
void set_onednn_conv_enabled(bool on);
// For the load planner's channels-last chains (kernels/load_plan.h): the oneDNN state of this
// aten::convolution.out call (float32 constant weights; g from float_conv2d_geometry) made into
// `slot`, the instruction's state, where the kernel finds it, with its primitives for an NCHW out
// and for a channels-last one already made; whether oneDNN has a JIT kernel for both (a chain's
// convolution needs one). False in builds without oneDNN.
bool prepare_onednn_conv(std::span<Value* const> args, const ConvGeometry& g,
                         std::unique_ptr<KernelState>& slot);
// The geometry of an aten::convolution.out call (its 10 arguments) when it is a 2-d float32
// convolution, not transposed, with a constant-shaped float32 weight and out: what a
// channels-last chain may hold. Nothing otherwise.
std::optional<ConvGeometry> float_conv2d_geometry(std::span<Value* const> args);
// The oneDNN library's version ("2.6.3"); empty in builds without it.
std::string onednn_version();

// A 3x3, stride-1, undilated float convolution of one group by Winograd's F(2x2, 3x3)
// (conv_winograd.cpp): 2.25x fewer multiply-adds than im2col + GEMM, for the weights a
// program keeps constant (transformed once). Rounding differs from the direct sum by a few
// ulps of the larger terms (the transforms add and subtract neighbours), and a non-finite
// input reaches every output of the tiles whose 4x4 windows hold it (an infinity may become
// NaN there); the result does not depend on the thread count.
struct WinogradWeights final : KernelState {
  struct Key {
    const void* weight;
    int64_t c_out, c_in;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  int64_t c_out = 0, c_in = 0;
  std::shared_ptr<const PackedA> u[16];  // G g G^T per position, C_out x C_in
  mutable std::vector<float> scratch;    // the transformed input and products, reused
  static std::unique_ptr<WinogradWeights> make(const float* w, int64_t c_out, int64_t c_in);
};

// y = bias (0 when null) + conv(x), then the epilogue (may be null) per output channel.
// `scratch` holds the transformed tiles between calls.
void winograd_conv_f32(const float* x, const WinogradWeights& weights, const float* bias,
                       const ConvGeometry& g, float* y, const Epilogue* epilogue,
                       std::vector<float>& scratch);

// One image between layouts: x [C, P] -> out [P, C] (to_channels_last) and back, in tiles
// of 16 x 16 through registers, split across threads.
void to_channels_last(const float* x, int64_t channels, int64_t plane, float* out);
void from_channels_last(const float* x, int64_t channels, int64_t plane, float* out);

// The 3x3 kernels of w [C_out, C_in, 3, 3] transformed, U[xi][co][ci] = (G g G^T)[xi] for
// the 16 positions xi of a 4x4 tile, each computed in double and rounded once.
std::vector<float> winograd_weight_transform(const float* w, int64_t c_out, int64_t c_in);

// The same F(2x2, 3x3) on channels-last tensors (ConvAlgorithm::kWinogradNhwc): it computes
// on x [N, H, W, C_in] into y [N, OH, OW, C_out] (the epilogue's tensors in y's layout); an
// NCHW x (a chain's first layer, or a layer outside every chain) is copied to NHWC first, an
// NCHW y computed NHWC and then copied, as oneDNN does. Each output
// is computed from the same transformed values, summed over the input channels in the same blocks
// and order, as winograd_conv_f32 computes it: the same bits in either layout. The transformed
// weights as the products read them: [16][C_out / 32 panels (rounded up, zero past
// C_out)][C_in][32].
struct WinogradNhwcWeights final : KernelState {
  struct Key {
    const void* weight;
    int64_t c_out, c_in;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  int64_t c_out = 0, c_in = 0, npad = 0;
  std::vector<float> u;
  mutable std::vector<float> scratch;  // one block's V and M where threads share a block
  mutable std::vector<float> layout_in, layout_out;  // NHWC copies of an NCHW x or y
  static std::unique_ptr<WinogradNhwcWeights> make(const float* w, int64_t c_out, int64_t c_in);
};

// y = bias (0 when null) + conv(x), then the epilogue (may be null) on each block of output
// rows as it is written (on the whole out after, where an out of it lies over the input).
// Blocks of tile rows split across threads.
void winograd_nhwc_f32(const float* x, bool x_nhwc, const WinogradNhwcWeights& weights,
                       const float* bias, const ConvGeometry& g, float* y, bool y_nhwc,
                       const Epilogue* epilogue);

// Whether winograd_nhwc_f32 runs this layer: 3x3, stride 1, undilated, one group, input
// channels a multiple of 16 (whole vectors in its input transform).
bool winograd_nhwc_shape(const ConvGeometry& g);

}  // namespace etc::rt::kernels
