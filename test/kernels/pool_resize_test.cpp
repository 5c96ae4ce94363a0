// Pooling (max with indices, avg, adaptive avg, channels-last max) and upsampling (bilinear,
// nearest) against direct loops and PyTorch's values.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  const int64_t num = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (num + (ceil_mode ? s - 1 : 0)) / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

struct PoolCase {
  Sizes input;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil_mode;
  bool default_stride;  // pass stride=[] (= kernel size)
};

const PoolCase kPoolCases[] = {
    {{2, 3, 9, 8}, 3, 3, 2, 2, 1, 1, 1, 1, false, false},
    {{1, 2, 9, 8}, 3, 3, 2, 2, 1, 1, 1, 1, true, false},     // ceil_mode
    {{1, 2, 10, 11}, 3, 2, 1, 2, 1, 1, 2, 3, false, false},  // dilation
    {{3, 7, 7}, 2, 2, 2, 2, 0, 0, 1, 1, false, true},        // rank 3, default stride
    {{1, 1, 7, 7}, 2, 2, 2, 2, 1, 0, 1, 1, true, true},      // ceil with padding
    {{1, 2, 5, 6}, 4, 3, 3, 2, 2, 1, 1, 1, true, false},
    // Rows wide enough for the vector loops (8 outputs at a time, strides 1 and 2, and the
    // scalar rest): resnet18's 3x3 stride-2 pool on an odd width, a 3x3 stride-1 one, 2x2.
    {{1, 2, 9, 45}, 3, 3, 2, 2, 1, 1, 1, 1, false, false},
    {{1, 2, 6, 37}, 3, 3, 1, 1, 1, 1, 1, 1, false, false},
    {{1, 1, 5, 40}, 2, 2, 2, 2, 0, 0, 1, 1, false, true},
};

TEST_CASE("max_pool2d of channels-last tensors gives the NCHW kernel's bits") {
  // In a channels-last chain (input and out [N, H, W, C] in memory, sizes still NCHW), every
  // 4-d pooling case, with NaN, -inf and zeros of both signs among the values (the first of
  // equal values wins; NaN wins), over 19 channels (a vector and a rest), over 2, 24 and 56
  // (one to four vectors, the last under a mask), and over 64 and 131 (the kernel's blocks of
  // 64 channels in registers, then a rest of 3).
  const double specials[] = {NAN, -INFINITY, 0.0, -0.0};
  int index = 0;
  for (const PoolCase& k : kPoolCases) {
    if (k.input.size() != 4) continue;
    for (const int64_t channels :
         {int64_t{19}, int64_t{2}, int64_t{24}, int64_t{56}, int64_t{64}, int64_t{131}}) {
      INFO("case " << index << " channels " << channels);
      const Sizes in{k.input[0], channels, k.input[2], k.input[3]};
      const int64_t oh = pooled(in[2], k.kh, k.sh, k.ph, k.dh, k.ceil_mode);
      const int64_t ow = pooled(in[3], k.kw, k.sw, k.pw, k.dw, k.ceil_mode);
      std::vector<double> xv(static_cast<size_t>(numel(in)));
      std::mt19937 gen(static_cast<uint32_t>(500 + index));
      std::uniform_real_distribution<double> dist(-1, 1);
      for (double& v : xv)
        v = gen() % 7 == 0 ? specials[gen() % 4] : dist(gen);
      // The same values channels-last: element (n, c, h, w) at ((n * H + h) * W + w) * C + c.
      std::vector<double> xt(xv.size());
      for (int64_t n = 0; n < in[0]; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t h = 0; h < in[2]; ++h)
            for (int64_t w = 0; w < in[3]; ++w)
              xt[static_cast<size_t>(((n * in[2] + h) * in[3] + w) * channels + c)] =
                  xv[static_cast<size_t>(((n * channels + c) * in[2] + h) * in[3] + w)];
      auto run = [&](const std::vector<double>& data, bool channels_last) {
        Call c("aten::max_pool2d.default");
        Value* x = c.tensor(DType::kFloat32, in, data);
        Value* out = c.out(DType::kFloat32, {in[0], channels, oh, ow});
        c.set_channels_last(channels_last ? (uint64_t{1} | (uint64_t{1} << 6)) : 0);
        REQUIRE(
            c.run({x, c.ints({k.kh, k.kw}), k.default_stride ? c.ints({}) : c.ints({k.sh, k.sw}),
                   c.ints({k.ph, k.pw}), c.ints({k.dh, k.dw}), c.b(k.ceil_mode)},
                  {out})
                .ok());
        return read(out);
      };
      const std::vector<double> nchw = run(xv, false), nhwc = run(xt, true);
      for (int64_t n = 0; n < in[0]; ++n)
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t p = 0; p < oh * ow; ++p) {
            const double a = nchw[static_cast<size_t>((n * channels + c) * oh * ow + p)];
            const double b = nhwc[static_cast<size_t>((n * oh * ow + p) * channels + c)];
            REQUIRE(std::memcmp(&a, &b, sizeof a) == 0);
          }
    }
    ++index;
  }
  // Indices, or one side only channels-last: an internal error (the load never asks that).
  Call c("aten::max_pool2d_with_indices.out");
  Value* x = c.random(DType::kFloat32, {1, 2, 6, 6}, 3);
  c.set_channels_last(uint64_t{1} | (uint64_t{1} << 6));
  const Status st =
      c.run({x, c.ints({2, 2}), c.ints({2, 2}), c.ints({0, 0}), c.ints({1, 1}), c.b(false)},
            {c.out(DType::kFloat32, {1, 2, 3, 3}), c.out(DType::kInt64, {1, 2, 3, 3})});
  CHECK(st.code() == ErrorCode::kInternal);
  CHECK(st.message().find("channels-last pooling") != std::string::npos);
}

TEST_CASE("max_pool2d_with_indices and max_pool2d") {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32, DType::kInt64,
                   DType::kUInt8}) {
    int index = 0;
    for (const PoolCase& k : kPoolCases) {
      INFO(dtype_name(dt) << " case " << index++);
      const size_t r = k.input.size();
      const int64_t h = k.input[r - 2], w = k.input[r - 1];
      const int64_t oh = pooled(h, k.kh, k.sh, k.ph, k.dh, k.ceil_mode);
      const int64_t ow = pooled(w, k.kw, k.sw, k.pw, k.dw, k.ceil_mode);
      Sizes os = k.input;
      os[r - 2] = oh;
      os[r - 1] = ow;
      Call c("aten::max_pool2d_with_indices.out");
      const double lo = dt == DType::kUInt8 ? 0 : dtype_is_float(dt) ? -1 : -50;
      Value* x = c.random(dt, k.input, 300 + index, lo, dtype_is_float(dt) ? 1 : 50);
      Value* out = c.out(dt, os);
      Value* idx = c.out(DType::kInt64, os);
      std::initializer_list<Value*> args = {x,
                                            c.ints({k.kh, k.kw}),
                                            k.default_stride ? c.ints({}) : c.ints({k.sh, k.sw}),
                                            c.ints({k.ph, k.pw}),
                                            c.ints({k.dh, k.dw}),
                                            c.b(k.ceil_mode)};
      REQUIRE(c.run(args, {out, idx}).ok());
      std::vector<double> xv = read(x), want(static_cast<size_t>(numel(os))), want_idx(want.size());
      const int64_t planes = numel(os) / (oh * ow);
      for (int64_t p = 0; p < planes; ++p) {
        for (int64_t i = 0; i < oh; ++i) {
          for (int64_t j = 0; j < ow; ++j) {
            double best = -std::numeric_limits<double>::infinity();
            int64_t bi = -1;
            for (int64_t a = 0; a < k.kh; ++a) {
              for (int64_t b = 0; b < k.kw; ++b) {
                const int64_t ih = i * k.sh - k.ph + a * k.dh, iw = j * k.sw - k.pw + b * k.dw;
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                const double v = xv[(p * h + ih) * w + iw];
                if (bi < 0 || v > best) {
                  best = v;
                  bi = ih * w + iw;
                }
              }
            }
            want[(p * oh + i) * ow + j] = best;
            want_idx[(p * oh + i) * ow + j] = static_cast<double>(bi);
          }
        }
      }
      require_close(read(out), want, dt);
      require_close(read(idx), want_idx, DType::kInt64);

      Call m("aten::max_pool2d.default");
      Value* out2 = m.out(dt, os);
      std::initializer_list<Value*> args2 = {x,
                                             m.ints({k.kh, k.kw}),
                                             k.default_stride ? m.ints({}) : m.ints({k.sh, k.sw}),
                                             m.ints({k.ph, k.pw}),
                                             m.ints({k.dh, k.dw}),
                                             m.b(k.ceil_mode)};
      REQUIRE(m.run(args2, {out2}).ok());
      require_close(read(out2), want, dt);
    }
  }
}

TEST_CASE("max_pool2d propagates NaN and errors on bad padding") {
  Call c("aten::max_pool2d_with_indices.out");
  Value* x = c.tensor(DType::kFloat32, {1, 1, 2, 2}, {1, NAN, 3, 2});
  Value* out = c.out(DType::kFloat32, {1, 1, 1, 1});
  Value* idx = c.out(DType::kInt64, {1, 1, 1, 1});
  REQUIRE(c.run({x, c.ints({2, 2}), c.ints({}), c.ints({0}), c.ints({1}), c.b(false)}, {out, idx})
              .ok());
  CHECK(std::isnan(read(out)[0]));
  CHECK(read(idx)[0] == 1);
  CHECK(c.run({x, c.ints({2, 2}), c.ints({}), c.ints({2}), c.ints({1}), c.b(false)}, {out, idx})
            .message() ==
        "aten::max_pool2d_with_indices.out: padding must be between 0 and half the kernel size, "
        "got 2");
  CHECK(c.run({x, c.ints({2, 2}), c.ints({}), c.ints({0}), c.ints({1}), c.b(false)},
              {out, c.out(DType::kInt32, {1, 1, 1, 1})})
            .message() ==
        "aten::max_pool2d_with_indices.out: indices has dtype int32, expected int64");
}

TEST_CASE("max_pool2d's vector rows take NaN as the scalar loop does") {
  // Rows with NaNs here and there: max_pool2d (no indices: the vector loops) gives the bits
  // of max_pool2d_with_indices (the scalar loop), NaN wherever a window holds one. Rows of
  // more than 64 outputs (150: AVX-512's row kernel, groups of 16 along a row) and of fewer
  // (53, 14, 7: the -inf-bordered plane, four rows at a time; five planes of seven rows leave
  // a remainder), top and bottom rows padded; the ETC_MAX_ISA tests run it on AVX2 and
  // portable code too.
  for (const auto& [stride, w] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 150}, {2, 150}, {1, 53}, {2, 53}, {1, 14}, {2, 14}, {1, 7}, {2, 7}}) {
    INFO("stride " << stride << ", width " << w);
    const int64_t h = 7, planes = w < 16 ? 5 : 1;
    std::vector<double> xv(static_cast<size_t>(planes * h * w));
    std::mt19937 gen(static_cast<uint32_t>(40 + stride));
    std::uniform_real_distribution<double> dist(-1, 1);
    // NaNs, -inf (which the AVX-512 rows also read for the padding) and zeros of both signs
    // (the first of equal values wins: the sign shows which).
    const double specials[] = {NAN, -INFINITY, 0.0, -0.0};
    for (double& v : xv)
      v = gen() % 9 == 0 ? specials[gen() % 4] : dist(gen);
    Call c("aten::max_pool2d_with_indices.out");
    Value* x = c.tensor(DType::kFloat32, {1, planes, h, w}, xv);
    const int64_t oh = (h + 2 - 3) / stride + 1, ow = (w + 2 - 3) / stride + 1;
    Value* out = c.out(DType::kFloat32, {1, planes, oh, ow});
    Value* idx = c.out(DType::kInt64, {1, planes, oh, ow});
    REQUIRE(c.run({x, c.ints({3, 3}), c.ints({stride, stride}), c.ints({1, 1}), c.ints({1, 1}),
                   c.b(false)},
                  {out, idx})
                .ok());
    Call m("aten::max_pool2d.default");
    Value* x2 = m.tensor(DType::kFloat32, {1, planes, h, w}, xv);
    Value* out2 = m.out(DType::kFloat32, {1, planes, oh, ow});
    REQUIRE(m.run({x2, m.ints({3, 3}), m.ints({stride, stride}), m.ints({1, 1}), m.ints({1, 1}),
                   m.b(false)},
                  {out2})
                .ok());
    const std::vector<double> with_indices = read(out), plain = read(out2);
    int nans = 0;
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          bool has_nan = false;
          for (int64_t a = 0; a < 3; ++a) {
            for (int64_t b = 0; b < 3; ++b) {
              const int64_t ih = i * stride - 1 + a, iw = j * stride - 1 + b;
              if (ih >= 0 && ih < h && iw >= 0 && iw < w)
                has_nan |= std::isnan(xv[static_cast<size_t>((pl * h + ih) * w + iw)]);
            }
          }
          const size_t o = static_cast<size_t>((pl * oh + i) * ow + j);
          INFO("plane " << pl << ", output " << i << ", " << j);
          CHECK(std::isnan(plain[o]) == has_nan);
          CHECK(std::isnan(with_indices[o]) == has_nan);
          if (!has_nan) {
            CHECK(plain[o] == with_indices[o]);
            CHECK(std::signbit(plain[o]) == std::signbit(with_indices[o]));
          }
          nans += has_nan ? 1 : 0;
        }
      }
    }
    CHECK(nans > 5);  // the NaN rule is exercised in every case
  }
}

TEST_CASE("avg_pool2d with count_include_pad, ceil_mode and divisor_override") {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
    int index = 0;
    for (const PoolCase& k : kPoolCases) {
      if (k.dh != 1 || k.dw != 1) continue;  // avg_pool2d has no dilation
      for (bool include_pad : {true, false}) {
        for (std::optional<int64_t> divisor :
             {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
          INFO(dtype_name(dt) << " case " << index << " include_pad " << include_pad << " divisor "
                              << divisor.value_or(0));
          const size_t r = k.input.size();
          const int64_t h = k.input[r - 2], w = k.input[r - 1];
          const int64_t oh = pooled(h, k.kh, k.sh, k.ph, 1, k.ceil_mode);
          const int64_t ow = pooled(w, k.kw, k.sw, k.pw, 1, k.ceil_mode);
          Sizes os = k.input;
          os[r - 2] = oh;
          os[r - 1] = ow;
          for (const char* name : {"aten::avg_pool2d.out", "aten::avg_pool2d.default"}) {
            Call c(name);
            Value* x = c.random(dt, k.input, 400 + index);
            Value* out = c.out(dt, os);
            REQUIRE(
                c.run({x, c.ints({k.kh, k.kw}),
                       k.default_stride ? c.ints({}) : c.ints({k.sh, k.sw}), c.ints({k.ph, k.pw}),
                       c.b(k.ceil_mode), c.b(include_pad), divisor ? c.i(*divisor) : c.none()},
                      {out})
                    .ok());
            std::vector<double> xv = read(x), want(static_cast<size_t>(numel(os)));
            const int64_t planes = numel(os) / (oh * ow);
            for (int64_t p = 0; p < planes; ++p) {
              for (int64_t i = 0; i < oh; ++i) {
                for (int64_t j = 0; j < ow; ++j) {
                  const int64_t h0 = i * k.sh - k.ph, w0 = j * k.sw - k.pw;
                  const int64_t h1 = std::min(h0 + k.kh, h + k.ph),
                                w1 = std::min(w0 + k.kw, w + k.pw);
                  const int64_t padded = (h1 - h0) * (w1 - w0);
                  double sum = 0;
                  int64_t inside = 0;
                  for (int64_t a = std::max<int64_t>(h0, 0); a < std::min(h1, h); ++a) {
                    for (int64_t b = std::max<int64_t>(w0, 0); b < std::min(w1, w); ++b) {
                      sum += xv[(p * h + a) * w + b];
                      ++inside;
                    }
                  }
                  const double div = divisor       ? static_cast<double>(*divisor)
                                     : include_pad ? static_cast<double>(padded)
                                                   : static_cast<double>(inside);
                  want[(p * oh + i) * ow + j] = sum / div;
                }
              }
            }
            require_close(read(out), want, dt);
          }
        }
      }
      ++index;
    }
  }
  // int64, as ATen: the sum in int64 (wrapping), divided truncating toward zero; the
  // padding counts in the divisor with count_include_pad.
  Call c("aten::avg_pool2d.out");
  Value* x = c.tensor(DType::kInt64, {1, 1, 2, 4}, {-15, 0, 7, 7, 0, 0, 1, 0});
  Value* o = c.out(DType::kInt64, {1, 1, 1, 2});
  REQUIRE(
      c.run({x, c.ints({2}), c.ints({}), c.ints({0}), c.b(false), c.b(true), c.none()}, {o}).ok());
  CHECK(read(o) == std::vector<double>{-3, 3});  // -15/4 = -3.75, 15/4 = 3.75
  Value* big =
      c.tensor(DType::kInt64, {1, 1, 1, 2}, {4611686018427387904.0, 4611686018427387904.0});
  Value* o2 = c.out(DType::kInt64, {1, 1, 1, 1});
  REQUIRE(
      c.run({big, c.ints({1, 2}), c.ints({}), c.ints({0}), c.b(false), c.b(true), c.none()}, {o2})
          .ok());
  CHECK(read(o2) == std::vector<double>{-4611686018427387904.0});  // 2^63 wraps to -2^63, / 2
  Value* o3 = c.out(DType::kInt64, {1, 1, 2, 3});
  REQUIRE(c.run({x, c.ints({2}), c.ints({2}), c.ints({1}), c.b(false), c.b(true), c.none()}, {o3})
              .ok());
  // Windows of 4 positions (padding included): {-15}, {0 + 7}, {7}; {0}, {0 + 1}, {0}.
  CHECK(read(o3) == std::vector<double>{-3, 1, 1, 0, 0, 0});
  Value* i32 = c.random(DType::kInt32, {1, 1, 4, 4}, 1, -3, 3);
  CHECK(c.run({i32, c.ints({2}), c.ints({}), c.ints({0}), c.b(false), c.b(true), c.none()},
              {c.out(DType::kInt32, {1, 1, 2, 2})})
            .message() ==
        "aten::avg_pool2d.out: self has dtype int32, expected a floating-point dtype or int64");
}

TEST_CASE("adaptive_avg_pool2d uses floor/ceil bin edges") {
  struct Case {
    Sizes input;
    int64_t oh, ow;
  };
  // The 1x1 cases of float32 take the global-mean path (planes summed by the vector builds,
  // several planes a thread): one plane, 80 planes of 7x7, 16 of 56x56.
  const Case cases[] = {{{2, 3, 7, 9}, 3, 4},  {{1, 2, 5, 5}, 1, 1},  {{3, 6, 4}, 4, 8},
                        {{1, 1, 10, 3}, 7, 2}, {{2, 40, 7, 7}, 1, 1}, {{1, 16, 56, 56}, 1, 1},
                        {{1, 1, 1, 1}, 1, 1}};
  for (DType dt : {DType::kFloat32, DType::kFloat16}) {
    for (const Case& k : cases) {
      for (const char* name :
           {"aten::_adaptive_avg_pool2d.out", "aten::adaptive_avg_pool2d.default"}) {
        INFO(name << " " << dtype_name(dt) << " " << shape_to_string(k.input));
        const size_t r = k.input.size();
        const int64_t h = k.input[r - 2], w = k.input[r - 1];
        Sizes os = k.input;
        os[r - 2] = k.oh;
        os[r - 1] = k.ow;
        Call c(name);
        Value* x = c.random(dt, k.input, 500);
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.ints({k.oh, k.ow})}, {out}).ok());
        std::vector<double> xv = read(x), want(static_cast<size_t>(numel(os)));
        const int64_t planes = numel(os) / (k.oh * k.ow);
        for (int64_t p = 0; p < planes; ++p) {
          for (int64_t i = 0; i < k.oh; ++i) {
            for (int64_t j = 0; j < k.ow; ++j) {
              const auto h0 = static_cast<int64_t>(std::floor(double(i * h) / k.oh));
              const auto h1 = static_cast<int64_t>(std::ceil(double((i + 1) * h) / k.oh));
              const auto w0 = static_cast<int64_t>(std::floor(double(j * w) / k.ow));
              const auto w1 = static_cast<int64_t>(std::ceil(double((j + 1) * w) / k.ow));
              double sum = 0;
              for (int64_t a = h0; a < h1; ++a) {
                for (int64_t b = w0; b < w1; ++b)
                  sum += xv[(p * h + a) * w + b];
              }
              want[(p * k.oh + i) * k.ow + j] = sum / static_cast<double>((h1 - h0) * (w1 - w0));
            }
          }
        }
        require_close(read(out), want, dt);
      }
    }
  }
}

TEST_CASE("upsample_bilinear2d matches PyTorch's values") {
  // F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False) of [[1, 2], [3, 4]].
  const std::vector<double> half_pixel = {1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5,
                                          2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0};
  // align_corners=True to 3x3.
  const std::vector<double> corners = {1.0, 1.5, 2.0, 2.0, 2.5, 3.0, 3.0, 3.5, 4.0};
  for (const char* name : {"aten::upsample_bilinear2d.vec_out", "aten::upsample_bilinear2d.vec"}) {
    INFO(name);
    {
      Call c(name);
      Value* x = c.tensor(DType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
      Value* out = c.out(DType::kFloat32, {1, 1, 4, 4});
      REQUIRE(c.run({x, c.none(), c.b(false), c.doubles({2.0, 2.0})}, {out}).ok());
      require_close(read(out), half_pixel, DType::kFloat32);
    }
    {
      Call c(name);
      Value* x = c.tensor(DType::kFloat32, {1, 1, 2, 2}, {1, 2, 3, 4});
      Value* out = c.out(DType::kFloat32, {1, 1, 3, 3});
      REQUIRE(c.run({x, c.ints({3, 3}), c.b(true), c.none()}, {out}).ok());
      require_close(read(out), corners, DType::kFloat32);
    }
  }
}

TEST_CASE("upsample_nearest2d takes floor(o / scale) or floor(o * in / out)") {
  const Sizes in{2, 3, 5, 4};
  struct Case {
    std::vector<int64_t> size;
    std::vector<double> scale;
  };
  const Case cases[] = {{{10, 8}, {}}, {{3, 7}, {}}, {{}, {2.0, 3.0}}, {{}, {0.5, 1.5}}};
  for (const Case& k : cases) {
    const int64_t oh =
        k.size.empty() ? static_cast<int64_t>(std::floor(in[2] * k.scale[0])) : k.size[0];
    const int64_t ow =
        k.size.empty() ? static_cast<int64_t>(std::floor(in[3] * k.scale[1])) : k.size[1];
    Call c("aten::upsample_nearest2d.vec_out");
    Value* x = c.random(DType::kFloat32, in, 7);
    Value* out = c.out(DType::kFloat32, {in[0], in[1], oh, ow});
    Value* size = k.size.empty() ? c.none() : c.ints(k.size);
    Value* scale = k.scale.empty() ? c.none() : c.doubles(k.scale);
    REQUIRE(c.run({x, size, scale}, {out}).ok());
    std::vector<double> xv = read(x), want;
    for (int64_t p = 0; p < in[0] * in[1]; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          int64_t si =
              k.scale.empty() ? i * in[2] / oh : static_cast<int64_t>(std::floor(i / k.scale[0]));
          int64_t sj =
              k.scale.empty() ? j * in[3] / ow : static_cast<int64_t>(std::floor(j / k.scale[1]));
          want.push_back(
              xv[(p * in[2] + std::min(si, in[2] - 1)) * in[3] + std::min(sj, in[3] - 1)]);
        }
      }
    }
    CHECK(read(out) == want);
  }
  Call c("aten::upsample_nearest2d.vec_out");
  Value* x = c.random(DType::kFloat32, in, 7);
  Value* out = c.out(DType::kFloat32, {2, 3, 10, 8});
  Status s = c.run({x, c.none(), c.none()}, {out});
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("exactly one of output_size and scale_factors") != std::string::npos);
}

// check_max_pool2d, check_avg_pool2d, check_adaptive_avg_pool2d: the errors the CUDA kernels
// give too.
TEST_CASE("pooling argument errors") {
  Call m("aten::max_pool2d_with_indices.out");
  Value* x = m.random(DType::kFloat32, {1, 1, 4, 4}, 1);
  auto max_pool = [&](const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
    return m
        .run({x, m.ints(kernel), m.ints(stride), m.ints(padding), m.ints(dilation), m.b(false)},
             {m.out(DType::kFloat32, {1, 1, 2, 2}), m.out(DType::kInt64, {1, 1, 2, 2})})
        .message();
  };
  CHECK(max_pool({0, 2}, {}, {0}, {1}) ==
        "aten::max_pool2d_with_indices.out: kernel_size must be positive");
  CHECK(max_pool({2, 2}, {2, -1}, {0}, {1}) ==
        "aten::max_pool2d_with_indices.out: stride must be positive");
  CHECK(max_pool({2, 2}, {}, {0}, {0}) ==
        "aten::max_pool2d_with_indices.out: dilation must be positive");
  CHECK(max_pool({5, 5}, {}, {0}, {1}) ==
        "aten::max_pool2d_with_indices.out: kernel of extent 5 does not fit an input of size 4 "
        "with padding 0");
  CHECK(max_pool({3, 3}, {}, {0}, {int64_t{1} << 62}) ==
        "aten::max_pool2d_with_indices.out: kernel extent or padding overflows a 64-bit size");
  CHECK(max_pool({2, 2}, {}, {0}, {1}).empty());
  Call a("aten::avg_pool2d.out");
  CHECK(a.run({x, a.ints({2}), a.ints({}), a.ints({0}), a.b(false), a.b(true), a.i(0)},
              {a.out(DType::kFloat32, {1, 1, 2, 2})})
            .message() == "aten::avg_pool2d.out: divisor_override must not be zero");
  Call ad("aten::_adaptive_avg_pool2d.out");
  CHECK(ad.run({x, ad.ints({2, 0})}, {ad.out(DType::kFloat32, {1, 1, 2, 0})}).message() ==
        "aten::_adaptive_avg_pool2d.out: output_size must be two positive sizes, got [2, 0]");
  Value* x2 = ad.random(DType::kFloat32, {4, 4}, 2);
  CHECK(ad.run({x2, ad.ints({2, 2})}, {ad.out(DType::kFloat32, {2, 2})}).message() ==
        "aten::_adaptive_avg_pool2d.out: self must have rank 3 or 4, got [4, 4]");
}

}  // namespace
}  // namespace etc::rt::test
