// Each of the convolution's faster algorithms against the plain NCHW kernels and the direct
// sum, and the choice among them (choose_conv_algorithm): the first-layer loop and the
// depthwise channel blocks, the NHWC 1x1 and Winograd kernels of the channels-last chains
// (the NCHW paths' bits), the NCHW Winograd, oneDNN (bands, post-ops, dynamic shapes).
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

TEST_CASE("a first layer into a channels-last chain writes its NCHW values channels-last") {
  // The direct loop of few input channels, its out (and the epilogue's) held [N, H, W, C]:
  // the bits of the NCHW run, transposed. Column strides 1 and 2 read the input in place
  // (strips inside a row, over its left or right edge, rows in the padding); stride 3 goes
  // through padded planes. 3 -> 32 stride 2 (two bands of output rows, the last one short),
  // 3 -> 24 (three 8-wide vectors a position on AVX2), 3 -> 13 5x5 on two images, 4 -> 8 7x7
  // stride 3, 3 -> 16 dilated by 2 (stride 2), 2 -> 16 on rows of several strips and a short
  // one, 3 -> 16 with rows and columns apart (stride (1, 2), dilation (2, 1)); every vector
  // build.
  struct Case {
    int64_t n, c_in, h, w, c_out, k, stride, pad, dil = 1, stride_w = 0, dil_w = 0;
  };
  const Case cases[] = {{1, 3, 37, 45, 32, 3, 2, 1},         {1, 3, 37, 45, 24, 3, 2, 1},
                        {2, 3, 20, 33, 13, 5, 1, 2},         {1, 4, 29, 40, 8, 7, 3, 3},
                        {1, 3, 30, 41, 16, 3, 2, 2, 2},      {1, 2, 9, 71, 16, 3, 1, 1},
                        {1, 3, 17, 50, 16, 3, 1, 1, 2, 2, 1}};
  uint32_t seed = 900;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    for (const Case& k : cases) {
      if (k.c_out > kernels::few_input_channels_max_outputs()) continue;
      INFO("isa " << static_cast<int>(isa) << " " << k.c_in << " -> " << k.c_out);
      const int64_t sw = k.stride_w > 0 ? k.stride_w : k.stride;
      const int64_t dw = k.dil_w > 0 ? k.dil_w : k.dil;
      const int64_t oh = (k.h + 2 * k.pad - k.dil * (k.k - 1) - 1) / k.stride + 1;
      const int64_t ow = (k.w + 2 * k.pad - dw * (k.k - 1) - 1) / sw + 1;
      const Sizes os{k.n, k.c_out, oh, ow};
      Call c("aten::convolution.out");
      Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
      Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in, k.k, k.k}, seed++);
      Value* b = c.random(DType::kFloat32, {k.c_out}, seed++);
      std::vector<Value*> args = conv2d_inputs(c, x, w, b, k.stride, k.pad, 1);
      args[3] = c.ints({k.stride, sw});
      args[5] = c.ints({k.dil, dw});
      // relu6 into a second tensor, as mobilenet_v2's first layer.
      auto run = [&](bool channels_last) {
        Value* y = c.out(DType::kFloat32, os);
        Value* r = c.out(DType::kFloat32, os);
        Epilogue e;
        e.ops = {{Epilogue::Op::Kind::kClamp, &y->tensor, nullptr, 0, 0.0f, 6.0f, &r->tensor}};
        c.set_epilogue(&e);
        c.set_channels_last(channels_last ? uint64_t{1} << 9 : 0);
        REQUIRE(c.run(args, {y}).ok());
        c.set_epilogue(nullptr);
        c.set_channels_last(0);
        return std::pair{read(y), read(r)};
      };
      const auto [y_nchw, r_nchw] = run(false);
      const auto [y_nhwc, r_nhwc] = run(true);
      for (int64_t n = 0; n < k.n; ++n) {
        for (int64_t co = 0; co < k.c_out; ++co) {
          for (int64_t p = 0; p < oh * ow; ++p) {
            const size_t a = static_cast<size_t>((n * k.c_out + co) * oh * ow + p);
            const size_t t = static_cast<size_t>((n * oh * ow + p) * k.c_out + co);
            REQUIRE(std::memcmp(&y_nchw[a], &y_nhwc[t], sizeof(double)) == 0);
            REQUIRE(std::memcmp(&r_nchw[a], &r_nhwc[t], sizeof(double)) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("depthwise convolutions give the same bits in channel blocks and plane by plane") {
  // One output per input channel goes 16 channels side by side on AVX-512 and 8 on AVX2; a
  // channel multiplier of 2 goes plane by plane. All take bias, then the taps in (row,
  // column) order with fused multiply-adds: equal bits, which the multiplier-2 layer shows as
  // the multiplier-1 layer over each input channel repeated twice. Partial channel blocks, two
  // images, 5x5 and dilated taps, planes of 7x7 (fewer pixels than a transpose), 14x14 by
  // stride 2, 28x28, a 40x40 plane in one band, and planes in bands of rows: 112x112 by
  // stride 2 (7 bands of 8 rows), 5x5 on 100x70 (a short last band, two images), dilation 2
  // on 90x95 (a short last band); rows of 1 to 7 pixels.
  struct Case {
    int64_t n, c, h, w, k, stride, pad, dil;
  };
  const Case cases[] = {
      {1, 20, 7, 7, 3, 1, 1, 1},     {2, 33, 28, 27, 5, 2, 2, 1},  {1, 17, 28, 28, 3, 1, 1, 1},
      {1, 5, 9, 13, 3, 1, 2, 2},     {1, 16, 3, 2, 3, 1, 1, 1},    {1, 18, 40, 40, 3, 1, 1, 1},
      {1, 17, 112, 112, 3, 2, 1, 1}, {2, 20, 100, 70, 5, 1, 2, 1}, {1, 16, 90, 95, 3, 1, 2, 2},
      {1, 9, 6, 5, 5, 1, 2, 1},      {1, 11, 13, 7, 3, 2, 1, 1}};
  uint32_t seed = 500;
  for (const Case& k : cases) {
    INFO("channels " << k.c << " plane " << k.h << "x" << k.w);
    const int64_t oh = (k.h + 2 * k.pad - k.dil * (k.k - 1) - 1) / k.stride + 1;
    const int64_t ow = (k.w + 2 * k.pad - k.dil * (k.k - 1) - 1) / k.stride + 1;
    Call c("aten::convolution.out");
    Value* x = c.random(DType::kFloat32, {k.n, k.c, k.h, k.w}, seed++);
    Value* w = c.random(DType::kFloat32, {2 * k.c, 1, k.k, k.k}, seed++);
    Value* b = c.random(DType::kFloat32, {2 * k.c}, seed++);
    // Each input channel twice: channels 2i and 2i + 1 are channel i.
    const int64_t plane = k.h * k.w;
    std::vector<double> twice(static_cast<size_t>(2 * k.n * k.c * plane));
    for (int64_t n = 0; n < k.n; ++n) {
      for (int64_t ci = 0; ci < 2 * k.c; ++ci) {
        for (int64_t f = 0; f < plane; ++f)
          twice[static_cast<size_t>((n * 2 * k.c + ci) * plane + f)] =
              static_cast<const float*>(x->tensor.data)[(n * k.c + ci / 2) * plane + f];
      }
    }
    Value* x2 = c.tensor(DType::kFloat32, {k.n, 2 * k.c, k.h, k.w}, twice);
    // groups = c over x: a multiplier of 2; groups = 2 c over x2: a multiplier of 1.
    auto run = [&](kernels::GemmIsa isa, Value* in, int64_t groups) {
      const IsaScope scope(isa);
      Value* out = c.out(DType::kFloat32, {k.n, 2 * k.c, oh, ow});
      REQUIRE(c.run({in, w, b, c.ints({k.stride, k.stride}), c.ints({k.pad, k.pad}),
                     c.ints({k.dil, k.dil}), c.b(false), c.ints({0, 0}), c.i(groups)},
                    {out})
                  .ok());
      std::vector<float> v(static_cast<size_t>(out->tensor.numel()));
      std::memcpy(v.data(), out->tensor.data, v.size() * sizeof(float));
      return v;
    };
    const std::vector<float> blocks16 = run(kernels::GemmIsa::kAuto, x2, 2 * k.c);
    const std::vector<float> blocks8 = run(kernels::GemmIsa::kAvx2, x2, 2 * k.c);
    const size_t bytes = blocks16.size() * sizeof(float);
    CHECK(std::memcmp(blocks16.data(), blocks8.data(), bytes) == 0);
    CHECK(std::memcmp(blocks16.data(), run(kernels::GemmIsa::kAuto, x, k.c).data(), bytes) == 0);
    CHECK(std::memcmp(blocks8.data(), run(kernels::GemmIsa::kAvx2, x, k.c).data(), bytes) == 0);
  }
}

// NCHW values and their NHWC copy, [n][c][p] -> [n][p][c].
std::vector<double> nhwc(const std::vector<double>& v, int64_t n, int64_t c, int64_t plane) {
  std::vector<double> t(v.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < plane; ++p)
        t[static_cast<size_t>((i * plane + p) * c + ch)] =
            v[static_cast<size_t>((i * c + ch) * plane + p)];
    }
  }
  return t;
}

// A layer of a channels-last chain: its input and a residual in both layouts, a constant
// weight and bias, and the epilogue a chain gives it (add the residual, relu6, into a second
// tensor r).
struct ChainLayer {
  Call& c;
  int64_t n, c_in, c_out, plane, out_plane, pad;
  Sizes os;
  Value *x, *x_nhwc, *w, *b, *res, *res_nhwc;

  ChainLayer(Call& call, const Sizes& xs, int64_t outs, int64_t k, int64_t padding,
             const Sizes& out_sizes, uint32_t& seed)
      : c(call),
        n(xs[0]),
        c_in(xs[1]),
        c_out(outs),
        plane(xs[2] * xs[3]),
        out_plane(out_sizes[2] * out_sizes[3]),
        pad(padding),
        os(out_sizes) {
    x = c.random(DType::kFloat32, xs, seed++, -3, 3);
    x_nhwc = c.tensor(DType::kFloat32, xs, nhwc(read(x), n, c_in, plane));
    w = c.random(DType::kFloat32, {c_out, c_in, k, k}, seed++);
    b = c.random(DType::kFloat32, {c_out}, seed++);
    res = c.random(DType::kFloat32, os, seed++);
    res_nhwc = c.tensor(DType::kFloat32, os, nhwc(read(res), n, c_out, out_plane));
    c.keep_state(uint64_t{1} << 1);  // the weight is a constant
  }

  // The layer's out and r: input and out NHWC with `channels_last`, the epilogue as one
  // activation in registers with `activation`.
  std::pair<std::vector<double>, std::vector<double>> run(bool channels_last,
                                                          bool activation) const {
    Value* y = c.out(DType::kFloat32, os);
    Value* r = c.out(DType::kFloat32, os);
    Epilogue e;
    e.ops = {{Epilogue::Op::Kind::kAdd, &y->tensor, &(channels_last ? res_nhwc : res)->tensor, 0, 0,
              0, &r->tensor},
             {Epilogue::Op::Kind::kClamp, &r->tensor, nullptr, 0, 0.0f, 6.0f, &r->tensor}};
    if (activation) {
      e.activation = kernels::match_activation(e, y->tensor);
      REQUIRE(e.activation);
    }
    c.set_epilogue(&e);
    c.set_channels_last(channels_last ? (uint64_t{1} << 0) | (uint64_t{1} << 9) : 0);
    REQUIRE(c.run(conv2d_inputs(c, channels_last ? x_nhwc : x, w, b, 1, pad, 1), {y}).ok());
    c.set_epilogue(nullptr);
    c.set_channels_last(0);
    return std::pair{read(y), read(r)};
  }

  // The NHWC runs (op by op and in registers) give the NCHW run's bits; returns the NCHW run.
  std::pair<std::vector<double>, std::vector<double>> check_layouts_agree() const {
    auto nchw_run = run(false, false);
    const std::vector<double> y_want = nhwc(nchw_run.first, n, c_out, out_plane);
    const std::vector<double> r_want = nhwc(nchw_run.second, n, c_out, out_plane);
    for (bool activation : {false, true}) {
      INFO("activation " << activation);
      const auto [y_nhwc, r_nhwc] = run(true, activation);
      REQUIRE(std::memcmp(y_nhwc.data(), y_want.data(), y_want.size() * sizeof(double)) == 0);
      REQUIRE(std::memcmp(r_nhwc.data(), r_want.data(), r_want.size() * sizeof(double)) == 0);
    }
    return nchw_run;
  }
};

TEST_CASE("1x1 layers of a channels-last chain give the NCHW GEMM's bits") {
  // etc's own kernel for the 1x1 layers oneDNN leaves in a chain (kPointwiseNhwc; with
  // oneDNN off, every 1x1 layer): input, out and the epilogue's tensors held [N, H, W, C],
  // each value the NCHW kernels' bits. Outs of 3 channels (lane by lane), 8 (one 8-lane
  // vector), 24 (16 + 8), 72 (64 + the last 8 moved back over columns computed before), 100,
  // 300 inputs (two K blocks of the GEMM's sums), row counts that leave a partial tile, two
  // images. Each with a residual add and relu6 into a second tensor, run as a chain in
  // registers (Epilogue::activation) and op by op; every vector build.
  struct Case {
    int64_t n, c_in, h, w, c_out;
  };
  const Case cases[] = {{1, 16, 13, 11, 8}, {2, 8, 9, 10, 24},  {1, 5, 7, 7, 3},
                        {1, 24, 6, 5, 72},  {1, 300, 4, 5, 40}, {1, 16, 3, 3, 100},
                        {1, 12, 64, 80, 96}};
  const OnednnScope etc_kernels(false);
  uint32_t seed = 1300;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    for (const Case& k : cases) {
      INFO("isa " << static_cast<int>(isa) << " " << k.c_in << " -> " << k.c_out << " on " << k.n
                  << " x " << k.h << "x" << k.w);
      const int64_t oh = k.h, ow = k.w;
      const kernels::ConvGeometry g{k.n, k.c_in, k.h, k.w,    k.c_out, 1,     1,
                                    oh,  ow,     1,   {1, 1}, {0, 0},  {1, 1}};
      const kernels::ConvCall chain{false, DType::kFloat32, true, true, false};
      REQUIRE(kernels::choose_conv_algorithm(g, chain) == kernels::ConvAlgorithm::kPointwiseNhwc);
      Call c("aten::convolution.out");
      const ChainLayer layer(c, {k.n, k.c_in, k.h, k.w}, k.c_out, 1, 0, {k.n, k.c_out, oh, ow},
                             seed);
      layer.check_layouts_agree();
    }
  }
}

TEST_CASE("3x3 layers of a channels-last chain give the NCHW Winograd kernel's bits") {
  // Winograd F(2x2, 3x3) on NHWC tensors (kWinogradNhwc) in a chain, and on NCHW tensors
  // through its NHWC copies, against the NCHW kernel (winograd_conv_f32): the same transforms
  // and sums, so the same bits. Odd output sizes (the last tile row and column half outside),
  // no padding, 272 inputs (two K blocks of the sums), 48, 24 and 20 outputs (a panel half
  // zero; a last vector of 8 or 4 lanes), 40x40 planes of 64 channels (several blocks of tile
  // rows, split across threads), two images; a residual add and relu6 into a second tensor,
  // in registers and op by op; every vector build.
  struct Case {
    int64_t n, c_in, h, w, c_out, pad;
  };
  const Case cases[] = {{1, 16, 12, 14, 32, 1}, {2, 32, 11, 13, 48, 1}, {1, 272, 12, 12, 16, 1},
                        {1, 16, 14, 16, 16, 0}, {1, 64, 40, 40, 64, 1}, {1, 16, 12, 14, 24, 1},
                        {2, 32, 11, 13, 20, 1}};
  const OnednnScope etc_kernels(false);
  uint32_t seed = 2300;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    for (const Case& k : cases) {
      INFO("isa " << static_cast<int>(isa) << " " << k.c_in << " -> " << k.c_out << " on " << k.n
                  << " x " << k.h << "x" << k.w << " pad " << k.pad);
      const int64_t oh = k.h + 2 * k.pad - 2, ow = k.w + 2 * k.pad - 2;
      const kernels::ConvGeometry g{k.n, k.c_in, k.h, k.w,    k.c_out,        3,     3,
                                    oh,  ow,     1,   {1, 1}, {k.pad, k.pad}, {1, 1}};
      const kernels::ConvCall chain{false, DType::kFloat32, true, true, false};
      REQUIRE(kernels::choose_conv_algorithm(g, chain) == kernels::ConvAlgorithm::kWinogradNhwc);
      kernels::ConvCall plain = chain;
      plain.channels_last = false;
      REQUIRE(kernels::choose_conv_algorithm(g, plain) == kernels::ConvAlgorithm::kWinogradNhwc);
      const Sizes xs{k.n, k.c_in, k.h, k.w};
      Call c("aten::convolution.out");
      const ChainLayer layer(c, xs, k.c_out, 3, k.pad, {k.n, k.c_out, oh, ow}, seed);
      const std::vector<double> y_nchw = layer.check_layouts_agree().first;
      Value* x = layer.x;
      Value* w = layer.w;
      Value* b = layer.b;
      // The NCHW kernel's values, bit for bit.
      {
        std::vector<float> xf(static_cast<size_t>(numel(xs))),
            wf(static_cast<size_t>(k.c_out * k.c_in * 9));
        std::vector<float> bf(static_cast<size_t>(k.c_out)), yf(y_nchw.size()), scratch;
        std::memcpy(xf.data(), x->tensor.data, xf.size() * 4);
        std::memcpy(wf.data(), w->tensor.data, wf.size() * 4);
        std::memcpy(bf.data(), b->tensor.data, bf.size() * 4);
        const auto weights = kernels::WinogradWeights::make(wf.data(), k.c_out, k.c_in);
        kernels::winograd_conv_f32(xf.data(), *weights, bf.data(), g, yf.data(), nullptr, scratch);
        for (size_t i = 0; i < yf.size(); ++i) {
          const auto want = static_cast<double>(yf[i]);
          REQUIRE(std::memcmp(&want, &y_nchw[i], sizeof want) == 0);
        }
      }
      // Winograd's own rounding: near the direct sums, not equal to them.
      const ConvCase ref{k.n,   k.c_in, k.h, k.w, k.c_out, 3,     3, 1, 1,
                         k.pad, k.pad,  1,   1,   1,       false, 0, 0, true};
      const std::vector<double> direct = conv_ref(ref, read(x), read(w), read(b), oh, ow);
      for (size_t i = 0; i < direct.size(); ++i)
        REQUIRE(std::abs(y_nchw[i] - direct[i]) <= 1e-4 * (1 + std::abs(direct[i])));
    }
  }
}

TEST_CASE("a first layer's epilogue may write over the layer's input (read whole first)") {
  // 4 -> 16 channels, 3x3 stride 2 on 64x64, two images: an image's input and its out both
  // hold 16384 floats. Memory planning may put an epilogue's temporary over the input once the
  // convolution is its last reader; here image 0's temporary lies over image 1's input, which
  // the direct loop must have read before the epilogue writes there: through its padded
  // planes (an NCHW out), or in place (a channels-last out: the epilogue waits for the whole
  // out).
  const Sizes xs{2, 4, 64, 64}, os{2, 16, 32, 32};
  const int64_t image = 16384;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    for (const bool channels_last : {false, true}) {
      INFO("isa " << static_cast<int>(isa) << (channels_last ? " channels-last" : " NCHW"));
      const IsaScope scope(isa);
      Call c("aten::convolution.out");
      Value* x_copy = c.random(DType::kFloat32, xs, 41);
      Value* buffer = c.out(DType::kFloat32, {3 * image});
      auto* base = static_cast<float*>(buffer->tensor.data);
      std::memcpy(base, x_copy->tensor.data, static_cast<size_t>(x_copy->tensor.nbytes()));
      Value* x = c.out(DType::kFloat32, xs);
      x->tensor.data = base;
      Value* w = c.random(DType::kFloat32, {16, 4, 3, 3}, 42);
      Value* b = c.random(DType::kFloat32, {16}, 43);
      auto args = [&](Value* input) {
        return std::vector<Value*>{
            input,          w,     b, c.ints({2, 2}), c.ints({1, 1}), c.ints({1, 1}), c.b(false),
            c.ints({0, 0}), c.i(1)};
      };
      // The instructions: y = conv(x); u = y * 0.5; y = y + u.
      Value* y = c.out(DType::kFloat32, os);
      Value* u = c.out(DType::kFloat32, os);
      std::vector<Value*> plain = args(x_copy);
      plain.push_back(y);
      plain.push_back(y);
      REQUIRE(c.run_raw(plain).ok());
      Call mul("aten::mul.Scalar_out"), add("aten::add.out");
      REQUIRE(mul.run({y, mul.d(0.5)}, {u}).ok());
      REQUIRE(add.run({y, u, add.i(1)}, {y}).ok());
      // Fused, with u's memory over the input's.
      Value* fy = c.out(DType::kFloat32, os);
      Value* fu = c.out(DType::kFloat32, os);
      fu->tensor.data = base + image;
      using Kind = Epilogue::Op::Kind;
      Epilogue e;
      e.ops = {{Kind::kMul, &fy->tensor, nullptr, 0.5f, 0, 0, &fu->tensor},
               {Kind::kAdd, &fy->tensor, &fu->tensor, 0, 0, 0, &fy->tensor}};
      e.after_inputs = true;
      c.set_epilogue(&e);
      c.set_channels_last(channels_last ? uint64_t{1} << 9 : 0);
      std::vector<Value*> fused = args(x);
      fused.push_back(fy);
      fused.push_back(fy);
      REQUIRE(c.run_raw(fused).ok());
      const auto* want = static_cast<const float*>(y->tensor.data);
      const auto* got = static_cast<const float*>(fy->tensor.data);
      const int64_t plane = 32 * 32;
      for (int64_t i = 0; i < 2 * image; ++i) {
        // Element (n, c, p) of the NCHW out; channels-last at (n, p, c).
        const int64_t n = i / image, ch = i / plane % 16, p = i % plane;
        const int64_t at = channels_last ? (n * plane + p) * 16 + ch : i;
        REQUIRE(std::memcmp(&want[i], &got[at], sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("3x3 convolutions of constant weights by Winograd F(2x2, 3x3) match the direct sum") {
  const OnednnScope etc_kernels(false);
  // Shapes in Winograd's range (16+ input channels, 32-400 tiles of 2x2 outputs): odd output
  // sizes (a last tile half outside), padding 0, 1 and 2, two images, and a fused epilogue.
  const ConvCase cases[] = {
      {1, 16, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
      {2, 20, 15, 13, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},    // 15x13: odd
      {1, 32, 19, 17, 33, 3, 3, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},  // no padding
      {1, 17, 12, 14, 5, 3, 3, 1, 1, 2, 2, 1, 1, 1, false, 0, 0, true},    // padding 2
      {1, 16, 12, 14, 5, 3, 3, 1, 1, 2, 2, 1, 1, 1, false, 0, 0, true},    // the same, NHWC
      {1, 16, 30, 30, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},    // 225 tiles: 2 blocks
  };
  uint32_t seed = 1300;
  int index = 0;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable})
    for (const ConvCase& k : cases) {
      const IsaScope scope(isa);
      INFO("isa " << static_cast<int>(isa) << " case " << index++);
      const int64_t oh = k.h + 2 * k.ph - 2, ow = k.w + 2 * k.pw - 2;
      const int64_t tiles = ((oh + 1) / 2) * ((ow + 1) / 2);
      REQUIRE(tiles >= 32);
      REQUIRE(tiles <= 400);
      Call c("aten::convolution.out");
      Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
      Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in, 3, 3}, seed++);
      Value* b = k.bias ? c.random(DType::kFloat32, {k.c_out}, seed++) : c.none();
      const std::initializer_list<Value*> args{x,
                                               w,
                                               b,
                                               c.ints({1, 1}),
                                               c.ints({k.ph, k.pw}),
                                               c.ints({1, 1}),
                                               c.b(false),
                                               c.ints({0, 0}),
                                               c.i(1)};
      c.keep_state(uint64_t{1} << 1);  // the weight is a constant: Winograd
      Value* y = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
      REQUIRE(c.run(args, {y}).ok());
      // The NCHW kernel, or (input channels in whole vectors of 16) the NHWC one through its
      // layout copies.
      if (k.c_in % 16 == 0) {
        REQUIRE(dynamic_cast<const kernels::WinogradNhwcWeights*>(c.state()) != nullptr);
      } else {
        REQUIRE(dynamic_cast<const kernels::WinogradWeights*>(c.state()) != nullptr);
      }
      const std::vector<double> want =
          conv_ref(k, read(x), read(w), k.bias ? read(b) : std::vector<double>{}, oh, ow);
      // The transforms add and subtract up to 4x4 neighbours: a few ulps of the larger terms.
      Tolerance tol = tolerance_for(DType::kFloat32);
      tol.atol += 2e-6 * static_cast<double>(k.c_in * 9);
      require_close(read(y), want, tol);
      // A second call reuses the transformed weights and the scratch: the same bits.
      Value* y2 = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
      REQUIRE(c.run(args, {y2}).ok());
      REQUIRE(std::memcmp(y->tensor.data, y2->tensor.data,
                          static_cast<size_t>(y->tensor.nbytes())) == 0);
      // With an epilogue (relu), channel by channel: relu of the plain result.
      Epilogue e;
      const TensorView* t = &y2->tensor;
      e.ops = {{Epilogue::Op::Kind::kClamp, t, nullptr, 0, 0.0f,
                std::numeric_limits<float>::infinity(), t}};
      c.set_epilogue(&e);
      REQUIRE(c.run(args, {y2}).ok());
      c.set_epilogue(nullptr);
      const float* plain = static_cast<const float*>(y->tensor.data);
      const float* fused = static_cast<const float*>(y2->tensor.data);
      for (int64_t i = 0; i < y->tensor.numel(); ++i)
        REQUIRE(fused[i] == std::max(plain[i], 0.0f));
    }
}

#if ETC_WITH_ONEDNN
TEST_CASE("convolutions through oneDNN match the direct sum, with epilogues and bands") {
  // Each is large enough for oneDNN (8 M multiply-adds; 1 M for a pointwise layer on a plane
  // of at most 64 positions): bands of output rows (weights smaller than the input), bands of
  // output channels (larger; 72 = 48 + 24: a band that is not a multiple of 16), stride 2
  // with dilation 2 and unequal padding on two images, an RGB first layer (3 input channels,
  // 64 outputs), and pointwise layers on 7x7 (mobilenet_v3's 96 -> 576; 576 -> 100 on two
  // images, a last block of 4 channels).
  const ConvCase cases[] = {
      // n cin h  w  cout kh kw sh sw ph pw dh dw g  transposed oph opw bias
      // (3x3 stride-1 layers of 24 and 120 inputs: not etc's NHWC Winograd, whole vectors of
      // 16 inputs, so oneDNN's.)
      {1, 24, 40, 40, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
      {1, 120, 11, 11, 72, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
      {2, 24, 33, 31, 40, 5, 5, 2, 2, 2, 1, 2, 2, 1, false, 0, 0, false},
      {1, 3, 64, 64, 64, 7, 7, 2, 2, 3, 3, 1, 1, 1, false, 0, 0, true},
      {1, 96, 7, 7, 576, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},
      {2, 576, 7, 7, 100, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},
  };
  const bool jit_cpu = __builtin_cpu_supports("avx2") != 0;
  const OnednnScope scope(true);
  uint32_t seed = 1700;
  int index = 0;
  for (const ConvCase& k : cases) {
    INFO("case " << index++);
    const auto [oh, ow] = out_size(k);
    const bool pointwise = k.kh == 1 && k.kw == 1;
    REQUIRE(k.n * oh * ow * k.c_out * k.c_in * k.kh * k.kw >=
            (int64_t{1} << (pointwise ? 20 : 23)));
    Call c("aten::convolution.out");
    Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
    Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in, k.kh, k.kw}, seed++);
    Value* b = k.bias ? c.random(DType::kFloat32, {k.c_out}, seed++) : c.none();
    const std::initializer_list<Value*> args{x,
                                             w,
                                             b,
                                             c.ints({k.sh, k.sw}),
                                             c.ints({k.ph, k.pw}),
                                             c.ints({k.dh, k.dw}),
                                             c.b(false),
                                             c.ints({0, 0}),
                                             c.i(1)};
    c.keep_state(uint64_t{1} << 1);  // the weight is a constant
    Value* y = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
    REQUIRE(c.run(args, {y}).ok());
    const auto* dnn = dynamic_cast<const kernels::OnednnConv*>(c.state());
    REQUIRE(dnn != nullptr);
    INFO("oneDNN kernel: " << dnn->implementation);
    // On an AVX2 (or AVX-512) CPU oneDNN has a JIT kernel for each of these shapes.
    if (jit_cpu) REQUIRE(!dnn->implementation.empty());
    const std::vector<double> want =
        conv_ref(k, read(x), read(w), k.bias ? read(b) : std::vector<double>{}, oh, ow);
    Tolerance tol = tolerance_for(DType::kFloat32);
    tol.atol += 1e-6 * static_cast<double>(k.c_in * k.kh * k.kw);
    require_close(read(y), want, tol);
    // A second call on the same state: the same bits; and again with the layout copies in
    // AVX2 registers and on their portable loops instead of AVX-512 registers.
    Value* y2 = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
    for (kernels::GemmIsa isa :
         {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
      const IsaScope isa_scope(isa);
      REQUIRE(c.run(args, {y2}).ok());
      REQUIRE(std::memcmp(y->tensor.data, y2->tensor.data,
                          static_cast<size_t>(y->tensor.nbytes())) == 0);
    }
    // The epilogue per channel: relu, then a residual add whose out is the residual itself
    // (out overlapping an operand: run after the inputs are read).
    Value* r = c.random(DType::kFloat32, {k.n, k.c_out, oh, ow}, seed++);
    const std::vector<double> residual = read(r);
    Epilogue e;
    const TensorView* t = &y2->tensor;
    e.ops = {{Epilogue::Op::Kind::kClamp, t, nullptr, 0, 0.0f,
              std::numeric_limits<float>::infinity(), t},
             {Epilogue::Op::Kind::kAdd, t, &r->tensor, 0, 0, 0, &r->tensor}};
    e.after_inputs = true;
    c.set_epilogue(&e);
    REQUIRE(c.run(args, {y2}).ok());
    c.set_epilogue(nullptr);
    const float* plain = static_cast<const float*>(y->tensor.data);
    const float* relu = static_cast<const float*>(y2->tensor.data);
    const float* sum = static_cast<const float*>(r->tensor.data);
    for (int64_t i = 0; i < y->tensor.numel(); ++i) {
      REQUIRE(relu[i] == std::max(plain[i], 0.0f));
      REQUIRE(sum[i] == relu[i] + static_cast<float>(residual[static_cast<size_t>(i)]));
    }
    // Turned off, the same call runs etc's own kernels (another state) within the tolerance.
    const OnednnScope off(false);
    Call own("aten::convolution.out");
    own.keep_state(uint64_t{1} << 1);
    Value* y3 = own.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
    REQUIRE(own.run(args, {y3}).ok());
    CHECK(dynamic_cast<const kernels::OnednnConv*>(own.state()) == nullptr);
    require_close(read(y3), want, tol);
  }
}
TEST_CASE("oneDNN convolutions keep primitives per input size (dynamic shapes)") {
  const OnednnScope scope(true);
  Call c("aten::convolution.out");
  // 24 input channels: not etc's NHWC Winograd (whole vectors of 16), so oneDNN.
  Value* w = c.random(DType::kFloat32, {48, 24, 3, 3}, 1800);
  Value* b = c.random(DType::kFloat32, {48}, 1801);
  c.keep_state(uint64_t{1} << 1);  // the weight is a constant
  const kernels::OnednnConv* first = nullptr;
  uint32_t seed = 1802;
  // 40x40, 36x30 and back to 40x40, then more sizes than are kept.
  for (int64_t size : {40, 36, 40, 44, 48, 52, 56, 40}) {
    const int64_t h = size, wd = size == 36 ? 30 : size;
    INFO("input " << h << "x" << wd);
    const ConvCase k{1, 24, h, wd, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true};
    Value* x = c.random(DType::kFloat32, {1, 24, h, wd}, seed++);
    Value* y = c.out(DType::kFloat32, {1, 48, h, wd});
    REQUIRE(c.run({x, w, b, c.ints({1, 1}), c.ints({1, 1}), c.ints({1, 1}), c.b(false),
                   c.ints({0, 0}), c.i(1)},
                  {y})
                .ok());
    const auto* dnn = dynamic_cast<const kernels::OnednnConv*>(c.state());
    REQUIRE(dnn != nullptr);
    if (first == nullptr) first = dnn;
    CHECK(dnn == first);  // one state for every size: the weights' key has no input size
    Tolerance tol = tolerance_for(DType::kFloat32);
    tol.atol += 1e-6 * 24 * 9;
    require_close(read(y), conv_ref(k, read(x), read(w), read(b), h, wd), tol);
  }
}

#endif

TEST_CASE("a convolution runs the algorithm choose_conv_algorithm names for it") {
  using kernels::ConvAlgorithm;
  // One layer for each algorithm the chooser has for float32 NCHW calls of constant weights.
  struct Layer {
    ConvCase k;
    ConvAlgorithm without_onednn, with_onednn;
  };
  const Layer layers[] = {
      // n cin h  w  cout kh kw sh sw ph pw dh dw g  transposed oph opw bias
      {{1, 32, 20, 20, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, false, 0, 0, true},  // depthwise
       ConvAlgorithm::kDepthwise,
       ConvAlgorithm::kDepthwise},
      {{1, 3, 32, 32, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, true},  // an RGB first layer
       ConvAlgorithm::kFewInputChannels,
       ConvAlgorithm::kFewInputChannels},
      {{1, 16, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},  // 64 tiles, 0.9 M MACs
       ConvAlgorithm::kWinogradNhwc,
       ConvAlgorithm::kWinogradNhwc},
      {{1, 32, 40, 40, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},  // 400 tiles, 11 M
       ConvAlgorithm::kWinogradNhwc,
       ConvAlgorithm::kWinogradNhwc},
      // 24 inputs (not whole vectors for the NHWC kernel): the NCHW Winograd; with 11 M
      // multiply-adds, oneDNN.
      {{1, 24, 16, 16, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
       ConvAlgorithm::kWinograd,
       ConvAlgorithm::kWinograd},
      {{1, 24, 40, 40, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, true},
       ConvAlgorithm::kWinograd,
       ConvAlgorithm::kOnednn},
      {{1, 16, 8, 8, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, false},  // pointwise, small
       ConvAlgorithm::kGemm,
       ConvAlgorithm::kGemm},
      {{1, 96, 7, 7, 576, 1, 1, 1, 1, 0, 0, 1, 1, 1, false, 0, 0, true},  // pointwise on 7x7
       ConvAlgorithm::kGemm,
       ConvAlgorithm::kOnednn},
      {{2, 8, 9, 9, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, false, 0, 0, true},  // stride 2
       ConvAlgorithm::kGemm,
       ConvAlgorithm::kGemm},
  };
  uint32_t seed = 2100;
  int index = 0;
  for (const bool onednn : {false, true}) {
    if (onednn && !ETC_WITH_ONEDNN) continue;
    const OnednnScope scope(onednn);
    for (const Layer& layer : layers) {
      const ConvCase& k = layer.k;
      INFO("onednn " << onednn << " layer " << index++);
      const auto [oh, ow] = out_size(k);
      const kernels::ConvGeometry g{k.n,          k.c_in,       k.h,         k.w, k.c_out,
                                    k.kh,         k.kw,         oh,          ow,  k.groups,
                                    {k.sh, k.sw}, {k.ph, k.pw}, {k.dh, k.dw}};
      const ConvAlgorithm chosen = kernels::choose_conv_algorithm(
          g, kernels::ConvCall{false, DType::kFloat32, true, false, onednn});
      CHECK(chosen == (onednn ? layer.with_onednn : layer.without_onednn));
      // Not constant weights: nothing prepared once, so neither oneDNN nor Winograd.
      const ConvAlgorithm per_call = kernels::choose_conv_algorithm(
          g, kernels::ConvCall{false, DType::kFloat32, false, false, onednn});
      CHECK(per_call != ConvAlgorithm::kOnednn);
      CHECK(per_call != ConvAlgorithm::kWinograd);
      CHECK(per_call != ConvAlgorithm::kWinogradNhwc);
      // The kernel keeps the state of the algorithm it ran, and computes the convolution.
      Call c("aten::convolution.out");
      Value* x = c.random(DType::kFloat32, {k.n, k.c_in, k.h, k.w}, seed++);
      Value* w = c.random(DType::kFloat32, {k.c_out, k.c_in / k.groups, k.kh, k.kw}, seed++);
      Value* b = k.bias ? c.random(DType::kFloat32, {k.c_out}, seed++) : c.none();
      c.keep_state(uint64_t{1} << 1);
      Value* y = c.out(DType::kFloat32, {k.n, k.c_out, oh, ow});
      REQUIRE(c.run({x, w, b, c.ints({k.sh, k.sw}), c.ints({k.ph, k.pw}), c.ints({k.dh, k.dw}),
                     c.b(false), c.ints({0, 0}), c.i(k.groups)},
                    {y})
                  .ok());
      const KernelState* state = c.state();
      switch (chosen) {
        case ConvAlgorithm::kDepthwise:  // packed weights only in channel blocks
          CHECK((state == nullptr || dynamic_cast<const kernels::DepthwiseWeights*>(state)));
          break;
        case ConvAlgorithm::kFewInputChannels:
          CHECK(state == nullptr);
          break;
        case ConvAlgorithm::kOnednn:
          CHECK(dynamic_cast<const kernels::OnednnConv*>(state) != nullptr);
          break;
        case ConvAlgorithm::kWinograd:
          CHECK(dynamic_cast<const kernels::WinogradWeights*>(state) != nullptr);
          break;
        case ConvAlgorithm::kWinogradNhwc:
          CHECK(dynamic_cast<const kernels::WinogradNhwcWeights*>(state) != nullptr);
          break;
        default:  // the GEMM's packed weights
          REQUIRE(state != nullptr);
          CHECK(dynamic_cast<const kernels::WinogradWeights*>(state) == nullptr);
          CHECK(dynamic_cast<const kernels::WinogradNhwcWeights*>(state) == nullptr);
          CHECK(dynamic_cast<const kernels::OnednnConv*>(state) == nullptr);
          CHECK(dynamic_cast<const kernels::DepthwiseWeights*>(state) == nullptr);
          break;
      }
      const std::vector<double> want =
          conv_ref(k, read(x), read(w), k.bias ? read(b) : std::vector<double>{}, oh, ow);
      Tolerance tol = tolerance_for(DType::kFloat32);
      tol.atol += 2e-6 * static_cast<double>(k.c_in / k.groups * k.kh * k.kw);
      require_close(read(y), want, tol);
    }
  }
  // The int64 convolution is ATen's direct sum whatever the geometry; a channels-last chain
  // takes oneDNN for layers too small for it on NCHW tensors, never 1x1 layers of few inputs
  // (etc's own NHWC kernel).
  // 3.6 M multiply-adds: enough for oneDNN in a chain (1 M for k x k layers, 512 K for 1x1),
  // not on NCHW tensors (8 M).
  const kernels::ConvGeometry small{1, 16, 28, 28, 32, 3, 3, 28, 28, 1, {1, 1}, {1, 1}, {1, 1}};
  CHECK(kernels::choose_conv_algorithm(small, {false, DType::kInt64, true, false, true}) ==
        ConvAlgorithm::kDirectInt64);
  CHECK(kernels::choose_conv_algorithm(small, {false, DType::kFloat32, true, false, true}) !=
        ConvAlgorithm::kOnednn);
  // In a chain, a 3x3 stride-1 layer of whole vectors of channels runs Winograd (196 tiles);
  // of 24 inputs, oneDNN.
  CHECK(kernels::choose_conv_algorithm(small, {false, DType::kFloat32, true, true, true}) ==
        ConvAlgorithm::kWinogradNhwc);
  kernels::ConvGeometry odd = small;
  odd.c_in = 24;
  CHECK(kernels::choose_conv_algorithm(odd, {false, DType::kFloat32, true, true, true}) ==
        ConvAlgorithm::kOnednn);
  const kernels::ConvGeometry few{1, 12, 64, 80, 96, 1, 1, 64, 80, 1, {1, 1}, {0, 0}, {1, 1}};
  CHECK(kernels::choose_conv_algorithm(few, {false, DType::kFloat32, true, true, true}) ==
        ConvAlgorithm::kPointwiseNhwc);
  // Outside a chain, etc's GEMM over NCHW tensors.
  CHECK(kernels::choose_conv_algorithm(few, {false, DType::kFloat32, true, false, true}) ==
        ConvAlgorithm::kGemm);
  // Depthwise layers of any width on oneDNN in a chain (mnasnet0_5's 16 of 112x112); a 3x3
  // layer too small for oneDNN runs Winograd in the chain, and with channels not whole
  // vectors leaves it (etc's NCHW kernels).
  const kernels::ConvGeometry dw{1, 16, 112, 112, 16, 3, 3, 112, 112, 16, {1, 1}, {1, 1}, {1, 1}};
  CHECK(kernels::choose_conv_algorithm(dw, {false, DType::kFloat32, true, true, true}) ==
        ConvAlgorithm::kOnednn);
  kernels::ConvGeometry dense{1, 16, 14, 14, 16, 3, 3, 14, 14, 1, {1, 1}, {1, 1}, {1, 1}};
  CHECK(kernels::choose_conv_algorithm(dense, {false, DType::kFloat32, true, true, true}) ==
        ConvAlgorithm::kWinogradNhwc);
  dense.c_in = dense.c_out = 12;
  CHECK_FALSE(kernels::chain_algorithm(
      kernels::choose_conv_algorithm(dense, {false, DType::kFloat32, true, true, true})));
  // Winograd from 32 tiles, or from 64 outputs on fewer (densenet's 128 -> 32 on 7x7, 16
  // tiles, stays on oneDNN; googlenet's 32 -> 128 there runs Winograd).
  auto winograd = [&](int64_t cin, int64_t plane, int64_t cout) {
    const kernels::ConvGeometry g{1,     cin,   plane, plane,  cout,   3,     3,
                                  plane, plane, 1,     {1, 1}, {1, 1}, {1, 1}};
    return kernels::choose_conv_algorithm(g, {false, DType::kFloat32, true, true, true}) ==
           ConvAlgorithm::kWinogradNhwc;
  };
  CHECK_FALSE(winograd(128, 7, 32));
  CHECK(winograd(32, 7, 128));
  CHECK(winograd(128, 11, 32));
  // 1x1 layers in a chain from 512 K multiply-adds (mobilenet_v3_small's 16 -> 16 on 56x56,
  // 0.8 M; on 28x28, 0.2 M), k x k layers from 1 M (densenet's 3x3 128 -> 32 on 7x7, 1.8 M; a
  // 3x3 16 -> 16 on 14x14, 0.45 M).
  const kernels::ConvCall chain{false, DType::kFloat32, true, true, true};
  auto in_chain = [&](int64_t cin, int64_t plane, int64_t cout, int64_t k) {
    const kernels::ConvGeometry g{1,     cin,   plane, plane,  cout,           k,     k,
                                  plane, plane, 1,     {1, 1}, {k / 2, k / 2}, {1, 1}};
    return kernels::choose_conv_algorithm(g, chain) == ConvAlgorithm::kOnednn;
  };
  CHECK(in_chain(16, 56, 16, 1));
  CHECK_FALSE(in_chain(16, 28, 16, 1));
  CHECK(in_chain(128, 7, 32, 3));
  CHECK_FALSE(in_chain(16, 14, 16, 3));
}

}  // namespace
}  // namespace etc::rt::test
