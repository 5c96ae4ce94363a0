// amax/sum/mean over dims, softmax/log_softmax, layer norm and inference batch norm against
// double references.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

// Reduces `x` over `dims` (empty = all) with `f` starting from `init`; `finish` gets the
// accumulated value and the element count.
std::vector<double> reduce_ref(const std::vector<double>& x, const Sizes& sizes,
                               std::vector<int64_t> dims, bool keepdim, double init,
                               const std::function<double(double, double)>& f,
                               const std::function<double(double, int64_t)>& finish,
                               Sizes* out_sizes) {
  const auto rank = static_cast<int64_t>(sizes.size());
  std::vector<bool> red(sizes.size(), dims.empty());
  for (int64_t d : dims) {
    if (rank > 0) red[static_cast<size_t>(d < 0 ? d + rank : d)] = true;
  }
  out_sizes->clear();
  Sizes kept;
  int64_t count = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!red[d]) {
      out_sizes->push_back(sizes[d]);
      kept.push_back(sizes[d]);
    } else {
      if (keepdim) out_sizes->push_back(1);
      count *= sizes[d];
    }
  }
  std::vector<double> acc(static_cast<size_t>(numel(kept)), init);
  for (size_t i = 0; i < x.size(); ++i) {
    Sizes idx = unravel(static_cast<int64_t>(i), sizes);
    int64_t o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (!red[d]) o = o * sizes[d] + idx[d];
    }
    acc[static_cast<size_t>(o)] = f(acc[static_cast<size_t>(o)], x[i]);
  }
  for (double& a : acc)
    a = finish(a, count);
  return acc;
}

struct DimCase {
  Sizes sizes;
  std::vector<int64_t> dims;
};

const DimCase kDimCases[] = {
    {{3, 4, 5}, {}},
    {{3, 4, 5}, {0}},
    {{3, 4, 5}, {-1}},
    {{3, 4, 5}, {0, 2}},
    {{3, 4, 5}, {1}},
    {{2, 3, 4, 5}, {1, 3}},
    {{7}, {0}},
    {{}, {}},
    {{4, 1, 6}, {2, 0}},
    {{300}, {0}},
    // Global average pools (trailing contiguous dims, float32: eight partial sums).
    {{2, 6, 7, 7}, {2, 3}},
    {{2, 3, 13, 3}, {3, 2}},
    {{1, 2, 3, 5}, {1, 2, 3}},
};

TEST_CASE("any.dim: non-zero anywhere along the dim, NaN counts, false when empty") {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kUInt8, DType::kBool}) {
    for (int64_t dim : {0, 1, -1}) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " dim " << dim << " keepdim " << keepdim);
        Call c("aten::any.out");
        // Mostly zeros, so that some rows have no non-zero element.
        Value* x = c.random(dt, {3, 5}, 610, 0, 1);
        std::vector<double> xv = read(x);
        for (size_t i = 0; i < xv.size(); i += 2)
          xv[i] = 0;
        x = c.tensor(dt, {3, 5}, xv);
        Sizes os;
        std::vector<double> want = reduce_ref(
            xv, {3, 5}, {dim}, keepdim, 0.0,
            [](double a, double v) { return (a != 0 || v != 0) ? 1.0 : 0.0; },
            [](double a, int64_t) { return a; }, &os);
        DType od = dt == DType::kUInt8 ? DType::kUInt8 : DType::kBool;
        Value* out = c.out(od, os);
        REQUIRE(c.run({x, c.i(dim), c.b(keepdim)}, {out}).ok());
        require_close(read(out), want, od);
      }
    }
  }
  Call c("aten::any.dim");
  Value* x = c.tensor(DType::kFloat32, {2, 2}, {0, NAN, -0.0, 0});
  Value* out = c.out(DType::kBool, {2});
  REQUIRE(c.run({x, c.i(1), c.b(false)}, {out}).ok());
  require_close(read(out), {1, 0}, DType::kBool);
  Value* e = c.tensor(DType::kFloat32, {2, 0}, {});
  Value* eo = c.out(DType::kBool, {2});
  REQUIRE(c.run({e, c.i(1), c.b(false)}, {eo}).ok());
  require_close(read(eo), {0, 0}, DType::kBool);
  CHECK(c.run({x, c.i(1), c.b(false)}, {c.out(DType::kFloat32, {2})}).message().find("dtype") !=
        std::string::npos);
}

TEST_CASE("amax over dims") {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kInt32, DType::kInt64,
                   DType::kUInt8, DType::kBool}) {
    for (const DimCase& k : kDimCases) {
      for (bool keepdim : {false, true}) {
        INFO(dtype_name(dt) << " " << shape_to_string(k.sizes) << " dims "
                            << shape_to_string(k.dims) << " keepdim " << keepdim);
        Call c("aten::amax.out");
        Value* x = c.random(dt, k.sizes, 600, dt == DType::kUInt8 || dt == DType::kBool ? 0 : -50,
                            dtype_is_float(dt) ? 1 : 50);
        Sizes os;
        std::vector<double> want = reduce_ref(
            read(x), k.sizes, k.dims, keepdim, -std::numeric_limits<double>::infinity(),
            [](double a, double v) { return std::max(a, v); }, [](double a, int64_t) { return a; },
            &os);
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.ints(k.dims), c.b(keepdim)}, {out}).ok());
        require_close(read(out), want, dt);
      }
    }
  }
  Call c("aten::amax.default");
  Value* x = c.tensor(DType::kFloat32, {2, 3}, {1, NAN, 2, 3, 4, 5});
  Value* out = c.out(DType::kFloat32, {2});
  REQUIRE(c.run({x, c.ints({1}), c.b(false)}, {out}).ok());
  require_close(read(out), {NAN, 5}, DType::kFloat32);
  Value* e = c.tensor(DType::kFloat32, {2, 0}, {});
  CHECK(c.run({e, c.ints({1}), c.b(false)}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::amax.default: cannot compute amax over a dim of size 0 of self [2, 0]");
  CHECK(c.run({x, c.ints({1, -1}), c.b(false)}, {out}).message() ==
        "aten::amax.default: dim 1 appears more than once");
  CHECK(c.run({x, c.ints({2}), c.b(false)}, {out}).message() ==
        "aten::amax.default: dim 2 is out of range for a tensor of rank 2");
}

TEST_CASE("sum and mean over dims") {
  for (const char* name :
       {"aten::sum.IntList_out", "aten::sum.dim_IntList", "aten::mean.out", "aten::mean.dim"}) {
    const bool mean = std::string(name).find("mean") != std::string::npos;
    for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64,
                     DType::kInt32, DType::kInt8, DType::kBool}) {
      if (mean && !dtype_is_float(dt)) continue;
      for (const DimCase& k : kDimCases) {
        for (bool keepdim : {false, true}) {
          for (bool none_dims : {false, true}) {
            if (none_dims && !k.dims.empty()) continue;
            INFO(name << " " << dtype_name(dt) << " " << shape_to_string(k.sizes) << " dims "
                      << (none_dims ? "None" : shape_to_string(k.dims)) << " keepdim " << keepdim);
            // ATen sums integers and bools in int64.
            const DType out_dt = dtype_is_float(dt) ? dt : DType::kInt64;
            Call c(name);
            Value* x = c.random(dt, k.sizes, 610, dt == DType::kBool ? 0 : -20,
                                dtype_is_float(dt) ? 1 : 20);
            Sizes os;
            std::vector<double> want = reduce_ref(
                read(x), k.sizes, k.dims, keepdim, 0, [](double a, double v) { return a + v; },
                [&](double a, int64_t n) { return mean ? a / static_cast<double>(n) : a; }, &os);
            Value* out = c.out(out_dt, os);
            REQUIRE(c.run({x, none_dims ? c.none() : c.ints(k.dims), c.b(keepdim), c.none()}, {out})
                        .ok());
            Tolerance tol = tolerance_for(out_dt);
            if (dtype_is_float(out_dt)) tol.atol *= 10;  // sums of up to 300 terms
            require_close(read(out), want, tol);
          }
        }
      }
    }
  }
}

TEST_CASE("a float global mean gives the same bits on every vector build") {
  // [2, 37, 7, 9] over (H, W): rows of 63 floats (eight partial sums and a tail), summed in
  // double by builds for AVX-512, AVX2 and any x86-64; adds only, in one order: equal bits,
  // within rounding of the double sum.
  Call c("aten::mean.out");
  Value* x = c.random(DType::kFloat32, {2, 37, 7, 9}, 88, -3, 5);
  const std::vector<double> xv = read(x);
  std::vector<std::vector<double>> got;
  for (kernels::GemmIsa isa :
       {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
    const IsaScope scope(isa);
    Value* out = c.out(DType::kFloat32, {2, 37, 1, 1});
    REQUIRE(c.run({x, c.ints({2, 3}), c.b(true), c.none()}, {out}).ok());
    got.push_back(read(out));
  }
  CHECK(got[0] == got[1]);
  CHECK(got[0] == got[2]);
  for (size_t r = 0; r < got[0].size(); ++r) {
    double sum = 0;
    for (size_t i = 0; i < 63; ++i)
      sum += xv[r * 63 + i];
    REQUIRE(std::fabs(got[0][r] - sum / 63) <= 1e-6);
  }
}

TEST_CASE("channels-last channel sums have the bits of the NCHW planes' sums") {
  // The global means of a channels-last chain (squeeze-and-excitation blocks, classifiers'
  // pools) sum each channel over the positions in float_row_sums' order: element p into
  // partial sum p % 8, the eight added pairwise. Values of mixed magnitude (1e-9 to 1e9), so
  // that a sum in any other order (position by position, say) has other bits. Channel counts
  // around the block of 16 and its tails of 4 and 1; position counts with and without a tail
  // of the eight; 1 and 3 threads; every vector build.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> mant(-1, 1);
  std::uniform_int_distribution<int> expo(-30, 30);
  for (const int64_t channels : {1, 3, 16, 21, 37, 144}) {
    for (const int64_t positions : {1, 7, 8, 49, 63}) {
      const int64_t batch = 2;
      std::vector<float> nhwc(static_cast<size_t>(batch * positions * channels));
      for (float& v : nhwc)
        v = static_cast<float>(std::ldexp(mant(rng), expo(rng)));
      std::vector<float> nchw(nhwc.size());
      for (int64_t n = 0; n < batch; ++n) {
        for (int64_t p = 0; p < positions; ++p) {
          for (int64_t c = 0; c < channels; ++c) {
            nchw[static_cast<size_t>((n * channels + c) * positions + p)] =
                nhwc[static_cast<size_t>((n * positions + p) * channels + c)];
          }
        }
      }
      std::vector<double> want(static_cast<size_t>(batch * channels));
      kernels::float_row_sums(nchw.data(), batch * channels, positions, want.data());
      // Position by position would differ (the test's own check that the data tells orders
      // apart).
      bool order_matters = false;
      for (int64_t r = 0; r < batch * channels; ++r) {
        double seq = 0;
        for (int64_t p = 0; p < positions; ++p)
          seq += static_cast<double>(nchw[static_cast<size_t>(r * positions + p)]);
        order_matters |= seq != want[static_cast<size_t>(r)];
      }
      if (positions >= 49) CHECK(order_matters);
      for (kernels::GemmIsa isa :
           {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
        for (int threads : {1, 3}) {
          const IsaScope scope(isa);
          const ThreadsScope ts(threads);
          std::vector<double> got(want.size(), -1.0);
          kernels::channels_last_sums(nhwc.data(), batch, positions, channels, got.data());
          INFO("channels " << channels << ", positions " << positions << ", isa "
                           << static_cast<int>(isa) << ", threads " << threads);
          CHECK(got == want);
        }
      }
    }
  }
}

TEST_CASE("sum and mean with a dtype argument and empty reductions") {
  Call c("aten::sum.IntList_out");
  Value* x = c.tensor(DType::kInt32, {2, 2}, {1, 2, 3, 4});
  Value* out = c.out(DType::kFloat64, {2});
  REQUIRE(c.run({x, c.ints({0}), c.b(false), c.dtype(DType::kFloat64)}, {out}).ok());
  require_close(read(out), {4, 6}, DType::kFloat64);
  CHECK(c.run({x, c.ints({0}), c.b(false), c.none()}, {out}).message() ==
        "aten::sum.IntList_out: out has dtype float64, expected int64");

  Call m("aten::mean.dim");
  Value* mo = m.out(DType::kFloat32, {});
  REQUIRE(m.run({x, m.none(), m.b(false), m.dtype(DType::kFloat32)}, {mo}).ok());
  require_close(read(mo), {2.5}, DType::kFloat32);
  CHECK(m.run({x, m.none(), m.b(false), m.none()}, {m.out(DType::kInt32, {})}).message() ==
        "aten::mean.dim: mean needs a floating-point input or dtype, got int32");

  // Reducing a dim of size 0: sum 0, mean NaN.
  Value* e = c.tensor(DType::kFloat32, {3, 0}, {});
  Value* so = c.out(DType::kFloat32, {3});
  REQUIRE(c.run({e, c.ints({1}), c.b(false), c.none()}, {so}).ok());
  require_close(read(so), {0, 0, 0}, DType::kFloat32);
  Value* mo2 = m.out(DType::kFloat32, {3});
  REQUIRE(m.run({e, m.ints({1}), m.b(false), m.none()}, {mo2}).ok());
  CHECK(std::isnan(read(mo2)[0]));
}

TEST_CASE("float softmax over long rows, masked entries and a fully masked row") {
  // Rows of 1, 8, 37, 300 and 4099 (the eight-way partial sums and their tail; the long row
  // gives the builds' bit comparison below thousands of exponentials to differ on, should one
  // build fuse a step the others round), -inf entries (a causal mask), a row that is all
  // -inf: NaN, as ATen gives, and a row far below zero (its maximum near -100: a running
  // maximum that took the tail's missing lanes for zeros would underflow every exponential).
  for (int64_t len : {1, 8, 37, 300, 4099}) {
    INFO("row length " << len);
    Call c("aten::_softmax.out");
    std::vector<double> xv(static_cast<size_t>(4 * len));
    for (size_t i = 0; i < xv.size(); ++i)
      xv[i] = std::sin(static_cast<double>(i) * 1.3) * 20;
    for (int64_t j = len / 2 + 1; j < len; ++j)
      xv[static_cast<size_t>(len + j)] = -INFINITY;  // row 1: the second half masked
    for (int64_t j = 0; j < len; ++j)
      xv[static_cast<size_t>(2 * len + j)] = -INFINITY;  // row 2: everything masked
    for (int64_t j = 0; j < len; ++j)
      xv[static_cast<size_t>(3 * len + j)] -= 120;  // row 3: all in [-140, -100]
    Value* x = c.tensor(DType::kFloat32, {4, len}, xv);
    Value* out = c.out(DType::kFloat32, {4, len});
    REQUIRE(c.run({x, c.i(-1), c.b(false)}, {out}).ok());
    const std::vector<double> got = read(out);
    // The AVX2 and the portable builds of the row loop give the same bits.
    for (kernels::GemmIsa isa : {kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
      const IsaScope scope(isa);
      Value* again = c.out(DType::kFloat32, {4, len});
      REQUIRE(c.run({x, c.i(-1), c.b(false)}, {again}).ok());
      const std::vector<double> bits = read(again);
      for (size_t i = 0; i < got.size(); ++i)
        REQUIRE((bits[i] == got[i] || (std::isnan(bits[i]) && std::isnan(got[i]))));
    }
    for (const int64_t r : {0, 1, 3}) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; ++j)
        mx = std::max(mx, xv[static_cast<size_t>(r * len + j)]);
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(xv[static_cast<size_t>(r * len + j)] - mx);
      for (int64_t j = 0; j < len; ++j) {
        const double want = std::exp(xv[static_cast<size_t>(r * len + j)] - mx) / sum;
        REQUIRE(std::fabs(got[static_cast<size_t>(r * len + j)] - want) <= 1e-6 + 1e-5 * want);
      }
    }
    for (int64_t j = 0; j < len; ++j)
      REQUIRE(std::isnan(got[static_cast<size_t>(2 * len + j)]));
  }
}

TEST_CASE("softmax's row max: in the tail past the 16 running maxima, NaN gives a NaN row") {
  // Rows of 40 (two blocks of 16 and a tail of 8): the max (95) at each position in turn -
  // a max taken without it would overflow exp(95 - max) to inf and give NaN -, and a NaN
  // anywhere makes the whole row NaN, as ATen's softmax does.
  constexpr int64_t kLen = 40;
  for (int64_t at = 0; at < kLen; at += 3) {
    INFO("max at " << at);
    Call c("aten::_softmax.out");
    std::vector<double> xv(2 * kLen, -3.0);
    xv[static_cast<size_t>(at)] = 95.0;
    xv[static_cast<size_t>(kLen + at)] = NAN;
    Value* x = c.tensor(DType::kFloat32, {2, kLen}, xv);
    Value* out = c.out(DType::kFloat32, {2, kLen});
    REQUIRE(c.run({x, c.i(-1), c.b(false)}, {out}).ok());
    const std::vector<double> got = read(out);
    for (int64_t j = 0; j < kLen; ++j) {
      const double want = j == at ? 1.0 : std::exp(-98.0);
      REQUIRE(std::fabs(got[static_cast<size_t>(j)] - want) <= 1e-6 * want + 1e-37);
      REQUIRE(std::isnan(got[static_cast<size_t>(kLen + j)]));
    }
  }
}

TEST_CASE("softmax and log_softmax over each dim") {
  const Sizes shape{3, 4, 5};
  for (const char* name : {"aten::_softmax.out", "aten::_softmax.default", "aten::_log_softmax.out",
                           "aten::_log_softmax.default"}) {
    const bool log = std::string(name).find("log") != std::string::npos;
    for (DType dt : kFloatTypes) {
      for (int64_t dim : {0, 1, 2, -1, -3}) {
        for (bool half_to_float : {false, true}) {
          if (half_to_float && dt != DType::kFloat16) continue;
          INFO(name << " " << dtype_name(dt) << " dim " << dim << " half_to_float "
                    << half_to_float);
          Call c(name);
          Value* x = c.random(dt, shape, 700, -30, 30);
          const DType out_dt = half_to_float ? DType::kFloat32 : dt;
          Value* out = c.out(out_dt, shape);
          REQUIRE(c.run({x, c.i(dim), c.b(half_to_float)}, {out}).ok());
          std::vector<double> xv = read(x), want(xv.size());
          const int64_t d = dim < 0 ? dim + 3 : dim;
          for (size_t i = 0; i < xv.size(); ++i) {
            Sizes idx = unravel(static_cast<int64_t>(i), shape);
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < shape[d]; ++j) {
              Sizes o = idx;
              o[d] = j;
              mx = std::max(mx, xv[(o[0] * 4 + o[1]) * 5 + o[2]]);
            }
            for (int64_t j = 0; j < shape[d]; ++j) {
              Sizes o = idx;
              o[d] = j;
              sum += std::exp(xv[(o[0] * 4 + o[1]) * 5 + o[2]] - mx);
            }
            want[i] = log ? xv[i] - mx - std::log(sum) : std::exp(xv[i] - mx) / sum;
          }
          Tolerance tol = tolerance_for(out_dt);
          if (out_dt == DType::kFloat32) tol = {1e-5, 1e-6};
          if (log && !half_to_float) tol.atol += dt == DType::kFloat64 ? 1e-12 : tol.rtol * 30;
          require_close(read(out), want, tol);
        }
      }
    }
  }
  Call c("aten::_softmax.out");
  Value* x = c.random(DType::kFloat32, {2}, 1);
  CHECK(c.run({x, c.i(0), c.b(true)}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::_softmax.out: half_to_float needs a float16 input, got float32");
  Value* z = c.tensor(DType::kFloat32, {}, {3});
  Value* zo = c.out(DType::kFloat32, {});
  REQUIRE(c.run({z, c.i(-1), c.b(false)}, {zo}).ok());
  require_close(read(zo), {1}, DType::kFloat32);
}

TEST_CASE("native_layer_norm returns out, mean and rstd") {
  struct Case {
    Sizes input, normalized;
    bool weight, bias;
  };
  const Case cases[] = {{{2, 3, 8}, {8}, true, true},
                        {{2, 3, 8}, {3, 8}, true, false},
                        {{5, 17}, {17}, false, true},
                        {{4}, {4}, false, false},
                        {{0, 6}, {6}, true, true}};
  for (DType dt : kFloatTypes) {
    for (const Case& k : cases) {
      for (const char* name : {"aten::native_layer_norm.out", "aten::native_layer_norm.default"}) {
        INFO(name << " " << dtype_name(dt) << " " << shape_to_string(k.input) << " over "
                  << shape_to_string(k.normalized));
        Call c(name);
        Value* x = c.random(dt, k.input, 800, -2, 3);
        Value* w = k.weight ? c.random(dt, k.normalized, 801) : c.none();
        Value* b = k.bias ? c.random(dt, k.normalized, 802) : c.none();
        const size_t axis = k.input.size() - k.normalized.size();
        Sizes stat(k.input.begin(), k.input.begin() + static_cast<ptrdiff_t>(axis));
        stat.resize(k.input.size(), 1);
        Value* out = c.out(dt, k.input);
        Value* mean = c.out(dt, stat);
        Value* rstd = c.out(dt, stat);
        const double eps = 1e-5;
        REQUIRE(c.run({x, c.ints(k.normalized), w, b, c.d(eps)}, {out, mean, rstd}).ok());
        const int64_t cols = numel(k.normalized), rows = numel(k.input) / cols;
        std::vector<double> xv = read(x), want(xv.size()), want_mean, want_rstd;
        std::vector<double> wv = k.weight ? read(w) : std::vector<double>(cols, 1.0);
        std::vector<double> bv = k.bias ? read(b) : std::vector<double>(cols, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          double mu = 0, var = 0;
          for (int64_t j = 0; j < cols; ++j)
            mu += xv[r * cols + j];
          mu /= static_cast<double>(cols);
          for (int64_t j = 0; j < cols; ++j)
            var += std::pow(xv[r * cols + j] - mu, 2);
          var /= static_cast<double>(cols);
          const double rs = 1 / std::sqrt(var + eps);
          for (int64_t j = 0; j < cols; ++j)
            want[r * cols + j] = (xv[r * cols + j] - mu) * rs * wv[j] + bv[j];
          want_mean.push_back(mu);
          want_rstd.push_back(rs);
        }
        Tolerance tol = tolerance_for(dt);
        tol.atol = std::max(tol.atol, tol.rtol * 4);
        require_close(read(out), want, tol);
        require_close(read(mean), want_mean, tol);
        require_close(read(rstd), want_rstd, tol);
      }
    }
  }
  Call c("aten::native_layer_norm.out");
  Value* x = c.random(DType::kFloat32, {2, 3}, 1);
  CHECK(c.run({x, c.ints({2}), c.none(), c.none(), c.d(1e-5)},
              {c.out(DType::kFloat32, {2, 3}), c.out(DType::kFloat32, {2, 1}),
               c.out(DType::kFloat32, {2, 1})})
            .message() ==
        "aten::native_layer_norm.out: normalized_shape [2] does not match the trailing dims of "
        "input [2, 3]");
  CHECK(c.run({x, c.ints({3}), c.none(), c.none(), c.d(1e-5)},
              {c.out(DType::kFloat32, {2, 3}), c.out(DType::kFloat32, {2}),
               c.out(DType::kFloat32, {2, 1})})
            .message() == "aten::native_layer_norm.out: out1 has shape [2], expected [2, 1]");
}

TEST_CASE("_native_batch_norm_legit_no_training normalises per channel") {
  for (DType dt : kFloatTypes) {
    for (const Sizes& shape : {Sizes{2, 3, 4, 5}, Sizes{4, 3}, Sizes{0, 3, 2}}) {
      for (bool affine : {true, false}) {
        for (const char* name : {"aten::_native_batch_norm_legit_no_training.out",
                                 "aten::_native_batch_norm_legit_no_training.default"}) {
          INFO(name << " " << dtype_name(dt) << " " << shape_to_string(shape) << " affine "
                    << affine);
          Call c(name);
          const int64_t ch = shape[1];
          Value* x = c.random(dt, shape, 900, -2, 2);
          Value* w = affine ? c.random(dt, {ch}, 901) : c.none();
          Value* b = affine ? c.random(dt, {ch}, 902) : c.none();
          Value* rm = c.random(dt, {ch}, 903);
          Value* rv = c.random(dt, {ch}, 904, 0.5, 2);
          Value* out = c.out(dt, shape);
          const double eps = 1e-3;
          REQUIRE(
              c.run({x, w, b, rm, rv, c.d(0.1), c.d(eps)}, {out, c.out(dt, {0}), c.out(dt, {0})})
                  .ok());
          std::vector<double> xv = read(x), want(xv.size()), mv = read(rm), vv = read(rv);
          std::vector<double> wv = affine ? read(w) : std::vector<double>(ch, 1.0);
          std::vector<double> bv = affine ? read(b) : std::vector<double>(ch, 0.0);
          const int64_t inner = numel(shape) == 0 ? 0 : numel(shape) / (shape[0] * ch);
          for (size_t i = 0; i < xv.size(); ++i) {
            const int64_t cc = (static_cast<int64_t>(i) / inner) % ch;
            want[i] = (xv[i] - mv[cc]) / std::sqrt(vv[cc] + eps) * wv[cc] + bv[cc];
          }
          Tolerance tol = tolerance_for(dt);
          tol.atol = std::max(tol.atol, tol.rtol * 4);
          require_close(read(out), want, tol);
        }
      }
    }
  }
  Call c("aten::_native_batch_norm_legit_no_training.out");
  Value* x = c.random(DType::kFloat32, {2, 3}, 1);
  Value* p = c.random(DType::kFloat32, {3}, 2, 0.5, 1);
  Value* bad = c.random(DType::kFloat32, {2}, 2, 0.5, 1);
  CHECK(c.run({x, c.none(), c.none(), p, bad, c.d(0.1), c.d(1e-5)},
              {c.out(DType::kFloat32, {2, 3}), c.out(DType::kFloat32, {0}),
               c.out(DType::kFloat32, {0})})
            .message() ==
        "aten::_native_batch_norm_legit_no_training.out: running_var must have shape [3] (the "
        "channel count), got [2]");
}

}  // namespace
}  // namespace etc::rt::test
