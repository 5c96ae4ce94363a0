// Convolution (stride, padding, dilation, groups, depthwise, 1x1, transposed) against direct
// double loops; its epilogues and packed weights against the plain kernel; its forms and
// errors (the faster algorithms and the choice among them: conv_algorithms_test.cpp; pooling
// and upsampling: pool_resize_test.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "kernels/conv_test_util.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/conv_algorithm.h"
#include "runtime/kernels/gemm.h"

namespace etc::rt::test {
namespace {

const ConvCase kConvCases[] = {
    // n cin h  w  cout kh kw sh sw ph pw dh dw g  transposed oph opw bias
    {2, 3, 8, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},    // 3x3 same padding
    {1, 2, 11, 9, 4, 5, 5, 2, 2, 0, 0, 1, 1, 1, false, 0, 0, false},  // stride 2
    {1, 3, 12, 10, 2, 3, 2, 1, 2, 2, 1, 2, 3, 1, false, 0, 0, true},  // dilation, mixed
    {2, 4, 6, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, 0, 0, true},    // groups 2
    {1, 4, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 4, false, 0, 0, true},    // depthwise x2, stride 2
    {2, 5, 7, 8, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5, false, 0, 0, false},   // depthwise stride 1
    {1, 3, 7, 6, 3, 5, 3, 1, 3, 2, 0, 2, 1, 3, false, 0, 0, true},    // depthwise dilated
    {2, 16, 5, 7, 12, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},  // 1x1 pointwise
    {1, 6, 7, 7, 4, 1, 1, 2, 2, 0, 0, 1, 1, 2, false, 0, 0, false},   // 1x1 stride 2, groups
    {1, 3, 4, 4, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1, true, 0, 0, true},     // transposed
    {2, 4, 5, 3, 6, 3, 3, 2, 2, 1, 1, 1, 1, 2, true, 1, 1, true},     // transposed s2 groups
    {1, 2, 3, 4, 2, 2, 3, 3, 2, 1, 0, 2, 1, 1, true, 2, 1, false},    // transposed dilated
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},    // 1x1x1x1
    {1, 40, 9, 9, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},  // GEMM edge tiles
    // Depthwise as MobileNets run it: every strip width (8..32 columns and past 32), row
    // bands with a short last band, stride phases, padding wider than the kernel's reach.
    {1, 6, 7, 7, 6, 5, 5, 1, 1, 2, 2, 1, 1, 6, false, 0, 0, true},     // 5x5 on 7x7
    {2, 5, 14, 14, 5, 5, 5, 2, 2, 2, 2, 1, 1, 5, false, 0, 0, true},   // 5x5 s2 -> 7x7
    {1, 3, 19, 45, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, false, 0, 0, true},   // 45 = 32 + 13 columns
    {1, 4, 30, 71, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, false, 0, 0, false},  // s2, 36 columns
    {1, 2, 17, 26, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2, false, 0, 0, true},   // 26 columns (3 chunks)
    {1, 3, 11, 23, 6, 3, 5, 3, 3, 3, 1, 2, 2, 3, false, 0, 0, true},   // x2, s3, dilated
    {1, 2, 6, 4, 2, 3, 3, 1, 1, 4, 4, 1, 1, 2, false, 0, 0, true},     // padding past the taps
    // 1x1 on 1x1 planes (squeeze-excitation): images as rows against the packed weights.
    {3, 40, 1, 1, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},
    {1, 300, 1, 1, 70, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},
    // Stride 1 with packed weights reads the column matrix from the padded input: dilation,
    // no padding, and six row bands in parallel (42x42: past Winograd's 400 tiles).
    {1, 4, 11, 12, 6, 3, 3, 1, 1, 2, 1, 2, 1, 1, false, 0, 0, true},
    {2, 5, 8, 9, 7, 3, 2, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},
    {1, 64, 42, 42, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
    // More rows (output channels) than columns: the GEMM splits rows in units of 24, a part
    // starting inside a block of the packed weights.
    {1, 300, 7, 7, 200, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},
    // Pointwise on at most 64 positions: of one image, the transposed input is the column
    // matrix (no bias: rows start from zero); of two images, gathered from the input.
    {1, 20, 3, 5, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},
    {2, 24, 4, 5, 36, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},
    // At most 32 output positions in all (Silero VAD's frames): positions as rows against
    // the transposed packed weights, the column matrix built transposed (im2row): a 1x3
    // kernel over 1x4 planes of 4 images, stride 2, an STFT-like 256-wide kernel of stride
    // 128, dilation 2 with padding, and a single position.
    {4, 129, 1, 4, 128, 1, 3, 1, 1, 0, 1, 1, 1, 1, false, 0, 0, true},
    {4, 64, 1, 4, 64, 1, 3, 1, 2, 0, 1, 1, 1, 1, false, 0, 0, false},
    {4, 1, 1, 832, 40, 1, 256, 1, 128, 0, 0, 1, 1, 1, false, 0, 0, false},
    {2, 5, 5, 5, 7, 2, 3, 1, 1, 1, 1, 2, 2, 1, false, 0, 0, true},
    {1, 9, 3, 3, 5, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},
    // RGB first layers (few input channels: a direct loop, 4 output channels x 16 columns per
    // strip): mobilenet_v3's 3 -> 16 3x3 stride 2 on an odd plane (a 3-column last strip),
    // 3 -> 14 (a last block of 2 channels) 5x5 with dilation 2, and 4 -> 16 7x7 stride 3.
    {2, 3, 37, 45, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, true},
    {1, 3, 20, 33, 14, 5, 5, 1, 1, 3, 2, 2, 2, 1, false, 0, 0, false},
    {1, 4, 29, 40, 16, 7, 7, 3, 3, 3, 3, 1, 1, 1, false, 0, 0, true},
    {1, 3, 53, 71, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, true},   // 3 -> 32 (AVX-512)
    {1, 3, 16, 18, 27, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, false},  // 27: a part block
    // Strided convolutions of packed weights read the column matrix from the padded input
    // split into stride phases: 3x3 stride 2 on odd and even planes, resnet18's 7x7 stride-2
    // first layer (3 -> 40: past the direct loop), stride 3 with dilation 2 (taps in every
    // phase), mixed strides and padding, and a 1x1 stride 2 (one phase read of four).
    {1, 8, 15, 13, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, true},
    {2, 6, 14, 16, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, false},
    {1, 3, 37, 30, 40, 7, 7, 2, 2, 3, 3, 1, 1, 1, false, 0, 0, true},
    {1, 5, 23, 19, 7, 3, 3, 3, 3, 2, 1, 2, 2, 1, false, 0, 0, true},
    {1, 7, 12, 17, 11, 2, 3, 1, 2, 0, 1, 1, 1, 1, false, 0, 0, true},
    {1, 9, 11, 10, 13, 1, 1, 2, 2, 0, 0, 1, 1, 1, false, 0, 0, true},
};

TEST_CASE("convolution variants against a direct loop") {
  uint32_t seed = 200;
  // float32 also with the vector builds forced down (AVX2 on an AVX-512 CPU, portable).
  const std::pair<DType, kernels::GemmIsa> runs[] = {
      {DType::kFloat32, kernels::GemmIsa::kAuto},
      {DType::kFloat64, kernels::GemmIsa::kAuto},
      {DType::kFloat16, kernels::GemmIsa::kAuto},
      {DType::kInt64, kernels::GemmIsa::kAuto},  // integers in [-1, 1]: exact
      {DType::kFloat32, kernels::GemmIsa::kAvx2},
      {DType::kFloat32, kernels::GemmIsa::kPortable}};
  for (const auto& [dt, isa] : runs) {
    const IsaScope scope(isa);
    int index = 0;
    for (const ConvCase& k : kConvCases) {
      INFO(dtype_name(dt) << " isa " << static_cast<int>(isa) << " case " << index++);
      const auto [oh, ow] = out_size(k);
      Sizes ws = k.transposed ? Sizes{k.c_in, k.c_out / k.groups, k.kh, k.kw}
                              : Sizes{k.c_out, k.c_in / k.groups, k.kh, k.kw};
      for (const char* name : {"aten::convolution.out", "aten::convolution.default"}) {
        Call c(name);
        Value* x = c.random(dt, {k.n, k.c_in, k.h, k.w}, seed++);
        Value* w = c.random(dt, ws, seed++);
        Value* b = k.bias ? c.random(dt, {k.c_out}, seed++) : c.none();
        Value* out = c.out(dt, {k.n, k.c_out, oh, ow});
        REQUIRE(c.run({x, w, b, c.ints({k.sh, k.sw}), c.ints({k.ph, k.pw}), c.ints({k.dh, k.dw}),
                       c.b(k.transposed), c.ints({k.oph, k.opw}), c.i(k.groups)},
                      {out})
                    .ok());
        std::vector<double> bv = k.bias ? read(b) : std::vector<double>{};
        Tolerance tol = tolerance_for(dt);
        const double taps = static_cast<double>(k.c_in * k.kh * k.kw);
        tol.atol += (dt == DType::kFloat64 ? 1e-15 : 2e-7) * taps * 4;
        if (dt == DType::kFloat16) tol.atol += 3e-3;
        require_close(read(out), conv_ref(k, read(x), read(w), bv, oh, ow), tol);
      }
    }
  }
}

TEST_CASE("a convolution's epilogue gives the bits of the instructions it stands for") {
  // conv -> y; clamp(y, -0.3, 0.5) -> y; add(skip, y) -> y; u = y * 0.75; u = u / 3;
  // y = y - u; relu(y) -> y: as instructions (each its own kernel, whole) and as one
  // convolution with that epilogue, for every case and vector build.
  uint32_t seed = 700;
  const float inf = std::numeric_limits<float>::infinity();
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    int index = 0;
    for (const ConvCase& k : kConvCases) {
      INFO("isa " << static_cast<int>(isa) << " case " << index++);
      const auto [oh, ow] = out_size(k);
      const Sizes ws = k.transposed ? Sizes{k.c_in, k.c_out / k.groups, k.kh, k.kw}
                                    : Sizes{k.c_out, k.c_in / k.groups, k.kh, k.kw};
      const Sizes os{k.n, k.c_out, oh, ow};
      Call c("aten::convolution.out");
      Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
      Value* w = c.random(DType::kFloat32, ws, seed++);
      Value* b = k.bias ? c.random(DType::kFloat32, {k.c_out}, seed++) : c.none();
      Value* skip = c.random(DType::kFloat32, os, seed++);
      const std::initializer_list<Value*> args{x,
                                               w,
                                               b,
                                               c.ints({k.sh, k.sw}),
                                               c.ints({k.ph, k.pw}),
                                               c.ints({k.dh, k.dw}),
                                               c.b(k.transposed),
                                               c.ints({k.oph, k.opw}),
                                               c.i(k.groups)};
      // The instructions.
      Value* y = c.out(DType::kFloat32, os);
      Value* u = c.out(DType::kFloat32, os);
      REQUIRE(c.run(args, {y}).ok());
      Call clamp("aten::clamp.out"), add("aten::add.out"), mul("aten::mul.Scalar_out"),
          div("aten::div.Scalar_out"), sub("aten::sub.out"), relu("aten::relu.out");
      REQUIRE(clamp.run({y, clamp.d(-0.3), clamp.d(0.5)}, {y}).ok());
      REQUIRE(add.run({skip, y, add.i(1)}, {y}).ok());
      REQUIRE(mul.run({y, mul.d(0.75)}, {u}).ok());
      REQUIRE(div.run({u, div.i(3)}, {u}).ok());
      REQUIRE(sub.run({y, u, sub.i(1)}, {y}).ok());
      REQUIRE(relu.run({y}, {y}).ok());
      // One convolution with the epilogue.
      Value* fy = c.out(DType::kFloat32, os);
      Value* fu = c.out(DType::kFloat32, os);
      using Kind = Epilogue::Op::Kind;
      const TensorView *ty = &fy->tensor, *tu = &fu->tensor;
      Epilogue e;
      e.ops = {{Kind::kClamp, ty, nullptr, 0, -0.3f, 0.5f, ty},
               {Kind::kAdd, &skip->tensor, ty, 0, 0, 0, ty},
               {Kind::kMul, ty, nullptr, 0.75f, 0, 0, tu},
               {Kind::kDiv, tu, nullptr, 3.0f, 0, 0, tu},
               {Kind::kSub, ty, tu, 0, 0, 0, ty},
               {Kind::kClamp, ty, nullptr, 0, 0.0f, inf, ty}};
      c.set_epilogue(&e);
      REQUIRE(c.run(args, {fy}).ok());
      const size_t bytes = static_cast<size_t>(y->tensor.nbytes());
      REQUIRE(std::memcmp(y->tensor.data, fy->tensor.data, bytes) == 0);
      REQUIRE(std::memcmp(u->tensor.data, fu->tensor.data, bytes) == 0);
    }
  }
}

TEST_CASE("activation epilogues run in registers, with the bits of their instructions") {
  // The chains Method::load keeps as one Epilogue::Activation (relu in place, relu6 into a
  // second tensor, hardswish both ways round, hardsigmoid into a second tensor and in place, a
  // residual add in place, an add then relu, SiLU, GELU into a second tensor and in place)
  // after convolutions on each path that runs them by tiles or ranges: pointwise on the GEMM
  // (two K blocks, edge tiles, two images), a first layer of few input channels (16 and 24
  // outputs, its out NCHW, and channels-last as in a chain), a depthwise layer, a 3x3 layer, a
  // layer oneDNN runs where it is built. The input holds NaN, infinities and zeros of both
  // signs; every vector build.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad, groups;
  };
  const Case cases[] = {{1, 300, 9, 11, 20, 1, 1, 0, 1},  {2, 16, 14, 14, 72, 1, 1, 0, 1},
                        {1, 3, 37, 45, 16, 3, 2, 1, 1},   {1, 3, 37, 45, 24, 3, 2, 1, 1},
                        {1, 24, 14, 14, 24, 5, 1, 2, 24}, {1, 8, 10, 10, 12, 3, 1, 1, 1},
                        {1, 64, 14, 14, 64, 3, 1, 1, 1}};
  using Kind = Epilogue::Op::Kind;
  using Act = Epilogue::Activation::Kind;
  // x: the convolution's out, t: a second tensor, e: a tensor from outside.
  struct Chain {
    const char* name;
    Act kind;
    std::vector<std::tuple<Kind, char, char, float, float, float, char>>
        ops;  // a, b, s, lo, hi, out
  };
  const std::vector<Chain> chains = {
      {"relu in place", Act::kClamp, {{Kind::kClamp, 'x', 0, 0, 0.0f, inf, 'x'}}},
      {"relu6 into t", Act::kClamp, {{Kind::kClamp, 'x', 0, 0, 0.0f, 6.0f, 't'}}},
      {"hardswish, divide then multiply",
       Act::kHardSwishDivMul,
       {{Kind::kAdd, 'x', 0, 3.0f, 0, 0, 't'},
        {Kind::kClamp, 't', 0, 0, 0.0f, 6.0f, 't'},
        {Kind::kDiv, 't', 0, 6.0f, 0, 0, 't'},
        {Kind::kMul, 'x', 't', 0, 0, 0, 't'}}},
      {"hardswish, multiply then divide",
       Act::kHardSwishMulDiv,
       {{Kind::kAdd, 'x', 0, 3.0f, 0, 0, 't'},
        {Kind::kClamp, 't', 0, 0, 0.0f, 6.0f, 't'},
        {Kind::kMul, 't', 'x', 0, 0, 0, 't'},
        {Kind::kDiv, 't', 0, 6.0f, 0, 0, 't'}}},
      {"hardsigmoid",
       Act::kHardSigmoid,
       {{Kind::kAdd, 'x', 0, 3.0f, 0, 0, 't'},
        {Kind::kClamp, 't', 0, 0, 0.0f, 6.0f, 't'},
        {Kind::kDiv, 't', 0, 6.0f, 0, 0, 't'}}},
      {"hardsigmoid in place",
       Act::kHardSigmoid,
       {{Kind::kAdd, 'x', 0, 3.0f, 0, 0, 'x'},
        {Kind::kClamp, 'x', 0, 0, 0.0f, 6.0f, 'x'},
        {Kind::kDiv, 'x', 0, 6.0f, 0, 0, 'x'}}},
      {"residual add in place", Act::kAddTensor, {{Kind::kAdd, 'e', 'x', 0, 0, 0, 'x'}}},
      {"add then relu into t",
       Act::kAddTensorClamp,
       {{Kind::kAdd, 'x', 'e', 0, 0, 0, 't'}, {Kind::kClamp, 't', 0, 0, 0.0f, inf, 't'}}},
      // torch's silu as etc emits it: sigmoid, then the product with the out.
      {"silu (sigmoid, x * t) into t",
       Act::kSiLU,
       {{Kind::kSigmoid, 'x', 0, 0, 0, 0, 't'}, {Kind::kMul, 'x', 't', 0, 0, 0, 't'}}},
      {"silu (sigmoid, t * x) into t",
       Act::kSiLU,
       {{Kind::kSigmoid, 'x', 0, 0, 0, 0, 't'}, {Kind::kMul, 't', 'x', 0, 0, 0, 't'}}},
      {"gelu into t", Act::kGeluErf, {{Kind::kGeluErf, 'x', 0, 0, 0, 0, 't'}}},
      {"gelu in place", Act::kGeluErf, {{Kind::kGeluErf, 'x', 0, 0, 0, 0, 'x'}}},
  };
  uint32_t seed = 1700;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    for (const Case& k : cases) {
      const int64_t oh = (k.h + 2 * k.pad - k.k) / k.stride + 1;
      const int64_t ow = (k.w + 2 * k.pad - k.k) / k.stride + 1;
      const Sizes os{k.n, k.c_out, oh, ow};
      Call c("aten::convolution.out");
      c.keep_state(uint64_t{1} << 1);
      Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++, -3, 3);
      float* xd = static_cast<float*>(x->tensor.data);
      const int64_t xn = x->tensor.numel();
      xd[xn / 3] = nan;
      xd[xn / 2] = inf;
      xd[xn - 5] = -inf;
      xd[7] = -0.0f;
      Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in / k.groups, k.k, k.k}, seed++, -2, 2);
      Value* b = c.random(DType::kFloat32, {k.c_out}, seed++);
      // A bias of -0 and weights of 0 for channel 0: a plane of zeros, signs kept.
      static_cast<float*>(b->tensor.data)[0] = -0.0f;
      std::fill_n(static_cast<float*>(w->tensor.data), k.c_in / k.groups * k.k * k.k, 0.0f);
      Value* e = c.random(DType::kFloat32, os, seed++, -4, 4);
      const std::vector<Value*> args = conv2d_inputs(c, x, w, b, k.stride, k.pad, k.groups);
      // A first layer's out may also be channels-last (its only kernel for that layout).
      const bool first_layer =
          k.c_in <= 4 && k.groups == 1 && k.c_out <= kernels::few_input_channels_max_outputs();
      for (const bool channels_last : {false, true}) {
        for (const Chain& chain : chains) {
          if (channels_last && !first_layer) continue;
          INFO("isa " << static_cast<int>(isa) << ", " << k.c_in << " -> " << k.c_out << " " << k.k
                      << "x" << k.k << " on " << k.h << "x" << k.w << ", " << chain.name
                      << (channels_last ? ", out channels-last" : ""));
          // Op by op (no Activation) and as one: the same outs, bit for bit (NaN for NaN).
          auto run = [&](bool as_activation, bool out_unread) {
            Value* y = c.out(DType::kFloat32, os);
            Value* t = c.out(DType::kFloat32, os);
            auto tensor = [&](char role) -> const TensorView* {
              return role == 'x' ? &y->tensor : role == 't' ? &t->tensor : &e->tensor;
            };
            Epilogue ep;
            for (const auto& [kind, a, bb, s, lo, hi, out] : chain.ops)
              ep.ops.push_back(
                  {kind, tensor(a), bb == 0 ? nullptr : tensor(bb), s, lo, hi, tensor(out)});
            if (as_activation) {
              ep.activation = kernels::match_activation(ep, y->tensor);
              REQUIRE(ep.activation.has_value());
              CHECK(ep.activation->kind == chain.kind);
              ep.out_unread = out_unread;
            }
            c.set_epilogue(&ep);
            c.set_channels_last(channels_last ? uint64_t{1} << 9 : 0);
            REQUIRE(c.run(args, {y}).ok());
            c.set_epilogue(nullptr);
            c.set_channels_last(0);
            return std::pair{read(y), read(t)};
          };
          const auto [y_ops, t_ops] = run(false, false);
          const auto [y_act, t_act] = run(true, false);
          REQUIRE(same_bits(y_act, y_ops));
          if (std::get<6>(chain.ops.back()) == 't') {
            REQUIRE(same_bits(t_act, t_ops));
            // Nothing reads the out after the chain: the kernel may keep it to itself.
            const auto [y_unread, t_unread] = run(true, true);
            REQUIRE(same_bits(t_unread, t_ops));
          }
        }
      }
    }
  }
}

TEST_CASE("only chains that are one activation or residual add become an Activation") {
  using Kind = Epilogue::Op::Kind;
  const float inf = std::numeric_limits<float>::infinity();
  Call c("aten::convolution.out");
  Value* y = c.out(DType::kFloat32, {1, 2, 3, 3});
  Value* t = c.out(DType::kFloat32, {1, 2, 3, 3});
  Value* u = c.out(DType::kFloat32, {1, 2, 3, 3});
  Value* e = c.random(DType::kFloat32, {1, 2, 3, 3}, 5);
  Value* f = c.random(DType::kFloat32, {1, 2, 3, 3}, 6);
  const TensorView *x = &y->tensor, *tt = &t->tensor, *uu = &u->tensor;
  auto match = [&](std::vector<Epilogue::Op> ops) {
    Epilogue ep;
    ep.ops = std::move(ops);
    return kernels::match_activation(ep, *x).has_value();
  };
  CHECK(match({{Kind::kClamp, x, nullptr, 0, 0.0f, inf, x}}));
  // Hardswish in place: the product would read x's memory after the add wrote over it.
  CHECK_FALSE(match({{Kind::kAdd, x, nullptr, 3, 0, 0, x},
                     {Kind::kClamp, x, nullptr, 0, 0, 6, x},
                     {Kind::kDiv, x, nullptr, 6, 0, 0, x},
                     {Kind::kMul, x, x, 0, 0, 0, x}}));
  // Two regions written.
  CHECK_FALSE(
      match({{Kind::kAdd, x, nullptr, 3, 0, 0, tt}, {Kind::kClamp, tt, nullptr, 0, 0, 6, uu}}));
  // Two tensors from outside; a subtraction; a scalar multiply.
  CHECK_FALSE(
      match({{Kind::kAdd, x, &e->tensor, 0, 0, 0, tt}, {Kind::kAdd, tt, &f->tensor, 0, 0, 0, tt}}));
  CHECK_FALSE(match({{Kind::kSub, x, &e->tensor, 0, 0, 0, tt}}));
  CHECK_FALSE(match({{Kind::kMul, x, nullptr, 0.5f, 0, 0, tt}}));
  // A broadcast row.
  Epilogue::Op row{Kind::kAdd, x, &e->tensor, 0, 0, 0, tt};
  row.b_period = 3;
  CHECK_FALSE(match({row}));
  // SiLU whose sigmoid wrote over the out: the product would read the sigmoid, not x.
  CHECK_FALSE(match({{Kind::kSigmoid, x, nullptr, 0, 0, 0, x}, {Kind::kMul, x, x, 0, 0, 0, x}}));
  CHECK(match({{Kind::kSigmoid, x, nullptr, 0, 0, 0, tt}, {Kind::kMul, x, tt, 0, 0, 0, tt}}));
  // A sigmoid alone is no activation.
  CHECK_FALSE(match({{Kind::kSigmoid, x, nullptr, 0, 0, 0, tt}}));
  // hardsigmoid without its division is no activation either.
  CHECK_FALSE(
      match({{Kind::kAdd, x, nullptr, 3, 0, 0, tt}, {Kind::kClamp, tt, nullptr, 0, 0, 6, tt}}));
}

TEST_CASE("constant convolution weights are packed once and give the same bits") {
  const OnednnScope etc_kernels(false);  // etc's own packing (oneDNN's: its own test)
  uint32_t seed = 900;
  int index = 0;
  for (const ConvCase& k : kConvCases) {
    INFO("case " << index++);
    if (k.transposed) continue;
    const auto [oh, ow] = out_size(k);
    Call c("aten::convolution.out");
    Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
    Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in / k.groups, k.kh, k.kw}, seed++);
    Value* w2 = c.random(DType::kFloat32, {k.c_out, k.c_in / k.groups, k.kh, k.kw}, seed++);
    Value* b = k.bias ? c.random(DType::kFloat32, {k.c_out}, seed++) : c.none();
    auto run = [&](Value* weight) {
      Value* out = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
      REQUIRE(c.run({x, weight, b, c.ints({k.sh, k.sw}), c.ints({k.ph, k.pw}), c.ints({k.dh, k.dw}),
                     c.b(false), c.ints({0, 0}), c.i(k.groups)},
                    {out})
                  .ok());
      return read(out);
    };
    const std::vector<double> plain = run(w), plain2 = run(w2);
    c.keep_state(uint64_t{1} << 1);  // the weight is a constant
    // Winograd (constant weights only) rounds otherwise than the GEMM: there its own packing
    // is compared with itself below.
    const kernels::ConvGeometry g{k.n,          k.c_in,       k.h,         k.w, k.c_out,
                                  k.kh,         k.kw,         oh,          ow,  k.groups,
                                  {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}};
    const kernels::ConvAlgorithm chosen =
        kernels::choose_conv_algorithm(g, {false, DType::kFloat32, true, false, false});
    if (chosen == kernels::ConvAlgorithm::kWinograd ||
        chosen == kernels::ConvAlgorithm::kWinogradNhwc) {
      const std::vector<double> first = run(w), first2 = run(w2);
      CHECK(run(w) == first);
      CHECK(run(w2) == first2);
      CHECK(first != first2);
      continue;
    }
    CHECK(run(w) == plain);  // packs
    const bool pointwise =
        k.kh == 1 && k.kw == 1 && k.sh == 1 && k.sw == 1 && k.ph == 0 && k.pw == 0;
    // The direct depthwise loop (one input channel, a channel multiplier of at most 4)
    // keeps no packed weights, except in channel blocks (one output per input channel, on an
    // AVX2 or AVX-512 build); one input channel feeding many outputs is a GEMM.
    const bool depthwise = k.c_in / k.groups == 1 && k.c_out / k.groups <= 4 && !pointwise;
    const bool channel_blocks = depthwise && k.c_out == k.c_in &&
                                kernels::gemm_float_kernel() != kernels::FloatKernel::kPortable;
    // Few input channels into few outputs (a first layer) run a direct loop: no packing.
    const bool few_inputs = k.groups == 1 && k.c_in <= 4 &&
                            k.c_out <= kernels::few_input_channels_max_outputs() && k.kh <= 7 &&
                            k.kw <= 7;
    CHECK((c.state() != nullptr) == (channel_blocks || !(depthwise || few_inputs)));
    CHECK(run(w) == plain);    // uses the packed weights
    CHECK(run(w2) == plain2);  // other weights: packed again, not the stale ones
  }
}

TEST_CASE("convolution single-value and empty-batch forms") {
  // stride/padding/dilation given as one value apply to both dims.
  Call c("aten::convolution.out");
  Value* x = c.random(DType::kFloat32, {1, 2, 6, 6}, 1);
  Value* w = c.random(DType::kFloat32, {3, 2, 3, 3}, 2);
  Value* out = c.out(DType::kFloat32, {1, 3, 3, 3});
  REQUIRE(
      c.run({x, w, c.none(), c.ints({2}), c.ints({1}), c.ints({1}), c.b(false), c.ints({}), c.i(1)},
            {out})
          .ok());
  ConvCase k{1, 2, 6, 6, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, false};
  require_close(read(out), conv_ref(k, read(x), read(w), {}, 3, 3), Tolerance{1e-5, 1e-5});

  Value* e = c.random(DType::kFloat32, {0, 2, 6, 6}, 3);
  REQUIRE(c.run({e, w, c.none(), c.ints({1}), c.ints({0}), c.ints({1}), c.b(false), c.ints({0}),
                 c.i(1)},
                {c.out(DType::kFloat32, {0, 3, 4, 4})})
              .ok());
}

TEST_CASE("1-d convolution (ExecuTorch's programs for Conv1d) as a 2-d one of height 1") {
  Call c("aten::convolution.out");
  Value* x = c.random(DType::kFloat32, {2, 4, 11}, 7);
  Value* w = c.random(DType::kFloat32, {6, 2, 3}, 8);
  Value* b = c.random(DType::kFloat32, {6}, 9);
  // stride 2, padding 1, dilation 2, groups 2: out length (11 + 2 - 4 - 1) / 2 + 1 = 5.
  Value* out = c.out(DType::kFloat32, {2, 6, 5});
  REQUIRE(c.run({x, w, b, c.ints({2}), c.ints({1}), c.ints({2}), c.b(false), c.ints({0}), c.i(2)},
                {out})
              .ok());
  ConvCase k{2, 4, 1, 11, 6, 1, 3, 1, 2, 0, 1, 1, 2, 2, false, 0, 0, true};
  require_close(read(out), conv_ref(k, read(x), read(w), read(b), 1, 5), Tolerance{1e-5, 1e-5});
  CHECK(c.run({x, w, b, c.ints({2, 2}), c.ints({1}), c.ints({2}), c.b(false), c.ints({0}), c.i(2)},
              {c.out(DType::kFloat32, {2, 6, 5})})
            .message()
            .find("a 1-d convolution takes one value") != std::string::npos);
}

TEST_CASE("convolution errors") {
  Call c("aten::convolution.out");
  Value* x = c.random(DType::kFloat32, {1, 4, 5, 5}, 1);
  Value* w = c.random(DType::kFloat32, {6, 2, 3, 3}, 2);
  auto run = [&](Value* weight, int64_t groups, const Sizes& out_sizes) {
    return c.run({x, weight, c.none(), c.ints({1, 1}), c.ints({0, 0}), c.ints({1, 1}), c.b(false),
                  c.ints({0, 0}), c.i(groups)},
                 {c.out(DType::kFloat32, out_sizes)});
  };
  CHECK(run(w, 2, {1, 6, 4, 4}).message() ==
        "aten::convolution.out: out has shape [1, 6, 4, 4], expected [1, 6, 3, 3]");
  CHECK(run(w, 1, {1, 6, 3, 3}).message() ==
        "aten::convolution.out: weight [6, 2, 3, 3] with groups=1 does not fit input [1, 4, 5, "
        "5]");
  Value* big = c.random(DType::kFloat32, {6, 2, 7, 7}, 3);
  CHECK(run(big, 2, {1, 6, 1, 1}).message() ==
        "aten::convolution.out: kernel of extent 7 is larger than the padded input (5)");
  Value* xi = c.random(DType::kInt32, {1, 1, 2, 2}, 4, -3, 3);
  Value* wi = c.random(DType::kInt32, {1, 1, 1, 1}, 5, -3, 3);
  CHECK(c.run({xi, wi, c.none(), c.ints({1}), c.ints({0}), c.ints({1}), c.b(false), c.ints({0}),
               c.i(1)},
              {c.out(DType::kInt32, {1, 1, 2, 2})})
            .message() ==
        "aten::convolution.out: input has dtype int32, expected a floating-point dtype or "
        "int64");
}

// check_convolution: the errors the CUDA kernel gives too.
TEST_CASE("convolution argument errors: groups, stride, dilation, padding, bias") {
  Call c("aten::convolution.out");
  Value* x = c.random(DType::kFloat32, {1, 4, 5, 5}, 1);
  Value* w = c.random(DType::kFloat32, {6, 4, 3, 3}, 2);
  auto run = [&](Value* bias, const std::vector<int64_t>& stride,
                 const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation,
                 const std::vector<int64_t>& output_padding, int64_t groups) {
    return c
        .run({x, w, bias, c.ints(stride), c.ints(padding), c.ints(dilation), c.b(false),
              c.ints(output_padding), c.i(groups)},
             {c.out(DType::kFloat32, {1, 6, 3, 3})})
        .message();
  };
  CHECK(run(c.none(), {1, 1}, {0, 0}, {1, 1}, {0, 0}, 0) ==
        "aten::convolution.out: groups must be positive, got 0");
  CHECK(run(c.none(), {1, 0}, {0, 0}, {1, 1}, {0, 0}, 1) ==
        "aten::convolution.out: stride must be positive");
  CHECK(run(c.none(), {1, 1}, {0, 0}, {0, 1}, {0, 0}, 1) ==
        "aten::convolution.out: dilation must be positive");
  CHECK(run(c.none(), {1, 1}, {0, -1}, {1, 1}, {0, 0}, 1) ==
        "aten::convolution.out: padding must not be negative");
  CHECK(run(c.none(), {1, 1}, {0, 0}, {1, 1}, {1, 0}, 1) ==
        "aten::convolution.out: output_padding must be 0 unless transposed");
  CHECK(run(c.random(DType::kFloat32, {4}, 3), {1, 1}, {0, 0}, {1, 1}, {0, 0}, 1) ==
        "aten::convolution.out: bias must have shape [6], got [4]");
  CHECK(run(c.random(DType::kFloat16, {6}, 3), {1, 1}, {0, 0}, {1, 1}, {0, 0}, 1) ==
        "aten::convolution.out: weight and bias must have the input's dtype float32");
  CHECK(run(c.random(DType::kFloat32, {6}, 3), {1, 1}, {0, 0}, {1, 1}, {0, 0}, 1).empty());
  // Paddings and dilations whose window arithmetic leaves int64 (fuzz_pte's padding first).
  CHECK(run(c.none(), {1, 1}, {5800203835558658049, 0}, {1, 1}, {0, 0}, 1) ==
        "aten::convolution.out: kernel extent or padding overflows a 64-bit size");
  CHECK(run(c.none(), {1, 1}, {0, 0}, {1, int64_t{1} << 62}, {0, 0}, 1) ==
        "aten::convolution.out: kernel extent or padding overflows a 64-bit size");
  CHECK(run(c.none(), {1, 1}, {0, 0}, {1, 1}, {0, 0}, int64_t{1} << 62) ==
        "aten::convolution.out: weight [6, 4, 3, 3] with groups=4611686018427387904 does not "
        "fit input [1, 4, 5, 5]");
  CHECK(
      c.run({x, c.random(DType::kFloat32, {4, 6, 3, 3}, 4), c.none(), c.ints({int64_t{1} << 62, 1}),
             c.ints({0, 0}), c.ints({1, 1}), c.b(true), c.ints({0, 0}), c.i(1)},
            {c.out(DType::kFloat32, {1, 6, 7, 7})})
          .message() ==
      "aten::convolution.out: transposed convolution output size overflows a 64-bit size");
}

}  // namespace
}  // namespace etc::rt::test
