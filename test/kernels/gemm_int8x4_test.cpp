// gemm_int8x4: int8 activation rows times 4-bit weights with the group sums in integers
// (ExecuTorch's 8da4w products). Each ISA build against a reference written here from the
// header's definition: the exact integer sum of (qx - zx) * (qw - zw) per group, then the
// float steps in their order. The bits must be the reference's on every ISA.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "graph/int4.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemm_int8x4.h"
#include "runtime/kernels/parallel.h"

namespace etc {
namespace {

using rt::kernels::DequantB;
using rt::kernels::GemmIsa;

struct Case {
  int64_t m = 1, n = 1, k = 32;
  // The zero points' and scales' group along K (0: one per row), and whether there is a zero
  // point at all.
  int64_t group = 0;
  bool zero = true;
};

// The weight's values, zero points and scales, and the rows' values, zero points and scales.
struct Operands {
  std::vector<int8_t> qw;     // [n, k]
  std::vector<uint8_t> q4;    // qw two a byte
  std::vector<float> zw, sw;  // [n, groups]
  std::vector<int8_t> qx;     // [m, k]
  std::vector<int32_t> zx;
  std::vector<float> sx, c0;  // sx [m]; C's values before [m, n]
};

Operands make(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t groups = c.group == 0 ? 1 : c.k / c.group;
  Operands o;
  std::uniform_int_distribution<int> nibble(-8, 7), byte(-128, 127), zero(-8, 7), zx(-128, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), bias(-1, 1);
  for (int64_t i = 0; i < c.n * c.k; ++i)
    o.qw.push_back(static_cast<int8_t>(nibble(rng)));
  o.q4.resize(static_cast<size_t>(c.n * int4::row_bytes(c.k)));
  for (int64_t r = 0; r < c.n; ++r)
    int4::pack(o.qw.data() + r * c.k, c.k, o.q4.data() + r * int4::row_bytes(c.k));
  for (int64_t i = 0; i < c.n * groups; ++i) {
    // Some zero points far outside the values' range (the sums' largest terms).
    o.zw.push_back(static_cast<float>(i % 7 == 0 ? 128 * (i % 2 == 0 ? 1 : -1) : zero(rng)));
    o.sw.push_back(scale(rng));
  }
  for (int64_t i = 0; i < c.m * c.k; ++i)
    o.qx.push_back(static_cast<int8_t>(byte(rng)));
  for (int64_t r = 0; r < c.m; ++r) {
    o.zx.push_back(r == 0 ? -rt::kernels::kInt8x4MaxZero : zx(rng));
    o.sx.push_back(scale(rng));
  }
  for (int64_t i = 0; i < c.m * c.n; ++i)
    o.c0.push_back(bias(rng));
  return o;
}

DequantB dequant(const Case& c, const Operands& o) {
  DequantB d;
  d.q4 = o.q4.data();
  d.q4_row = int4::row_bytes(c.k);
  d.q_k = 1;
  d.q_n = c.k;
  const int64_t groups = c.group == 0 ? 1 : c.k / c.group;
  for (auto [operand, values] : {std::pair{&d.zero, &o.zw}, std::pair{&d.scale, &o.sw}}) {
    if (operand == &d.zero && !c.zero) continue;
    operand->data = values->data();
    operand->n_stride = groups;
    operand->k_stride = c.group == 0 ? 0 : 1;
    operand->k_group = c.group == 0 ? 1 : c.group;
  }
  return d;
}

// The header's definition, in its order, from the unpacked values. The sums are int64 here
// (the kernels' int32 must not overflow).
std::vector<float> reference(const Case& c, const Operands& o, float alpha, int64_t group) {
  std::vector<float> y = o.c0;
  const int64_t per = c.group == 0 ? c.k : c.group;  // the operands' own group
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t n = 0; n < c.n; ++n) {
      float acc = 0;
      for (int64_t g0 = 0; g0 < c.k; g0 += group) {
        const size_t at = static_cast<size_t>(n * (c.k / per) + g0 / per);
        const int64_t zw = c.zero ? static_cast<int64_t>(o.zw[at]) : 0;
        int64_t s = 0;
        for (int64_t k = g0; k < g0 + group; ++k) {
          s += (int64_t{o.qx[static_cast<size_t>(r * c.k + k)]} - o.zx[static_cast<size_t>(r)]) *
               (int64_t{o.qw[static_cast<size_t>(n * c.k + k)]} - zw);
        }
        REQUIRE(std::abs(s) < (int64_t{1} << 31));
        acc = std::fma(o.sw[at], static_cast<float>(s), acc);
      }
      float& out = y[static_cast<size_t>(r * c.n + n)];
      out = std::fma(alpha, acc * o.sx[static_cast<size_t>(r)], out);
    }
  }
  return y;
}

TEST_CASE("int8 rows times 4-bit weights: exact group sums, the same bits on every ISA") {
  const Case cases[] = {{1, 40, 256, 128},     {3, 17, 384, 128},   {1, 33, 256, 32},
                        {2, 16, 96, 32},       {1, 50, 320, 64},    {1, 20, 512, 256},
                        {4, 31, 512, 0},       {1, 48, 2048, 1024}, {2, 24, 256, 128, false},
                        {1, 7, 160, 32, false}};
  const GemmIsa isas[] = {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    INFO("m " << c.m << " n " << c.n << " k " << c.k << " group " << c.group << " zero " << c.zero);
    const Operands o = make(c, seed++);
    const DequantB d = dequant(c, o);
    const std::optional<rt::kernels::Int4Weight> w = rt::kernels::prepare_int4_weight(d, c.k, c.n);
    REQUIRE(w.has_value());
    // The group the kernel sums over: the operands' own, or for one per row the largest
    // that divides K (at most kInt8x4MaxGroup).
    if (c.group != 0) CHECK(w->group == c.group);
    if (c.group == 0) CHECK(w->group == c.k);
    const float alpha = 0.75f;
    const std::vector<float> want = reference(c, o, alpha, w->group);
    // And the reference against the float arithmetic of the program it stands for (the
    // dequantized values' sum in double): the difference is float rounding.
    double worst = 0, largest = 0;
    for (int64_t r = 0; r < c.m; ++r) {
      for (int64_t n = 0; n < c.n; ++n) {
        double exact = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          const int64_t per = c.group == 0 ? c.k : c.group;
          const size_t at = static_cast<size_t>(n * (c.k / per) + k / per);
          const double x = (o.qx[static_cast<size_t>(r * c.k + k)] - o.zx[static_cast<size_t>(r)]) *
                           double{o.sx[static_cast<size_t>(r)]};
          const double wv = (o.qw[static_cast<size_t>(n * c.k + k)] - (c.zero ? o.zw[at] : 0.0f)) *
                            double{o.sw[at]};
          exact += x * wv;
        }
        exact = o.c0[static_cast<size_t>(r * c.n + n)] + alpha * exact;
        worst = std::max(worst, std::abs(exact - want[static_cast<size_t>(r * c.n + n)]));
        largest = std::max(largest, std::abs(exact));
      }
    }
    CHECK(worst <= 1e-5 * largest);
    for (const GemmIsa isa : isas) {
      for (const int threads : {1, 3}) {  // the columns split across threads: the same bits
        INFO("isa " << static_cast<int>(isa) << ", " << threads << " threads");
        rt::kernels::set_gemm_isa(isa);
        rt::kernels::set_num_threads(threads);
        std::vector<float> y = o.c0;
        const rt::kernels::Int8x4Rows rows = rt::kernels::arrange_int8_rows(
            c.m, rt::kernels::Int8Rows{o.qx.data(), c.k, o.zx.data(), o.sx.data()}, *w);
        rt::kernels::gemm_int8x4(rows, *w, alpha, y.data(), c.n);
        CHECK(std::memcmp(y.data(), want.data(), y.size() * sizeof(float)) == 0);
      }
    }
    rt::kernels::set_gemm_isa(GemmIsa::kAuto);
    rt::kernels::set_num_threads(0);
  }
}

TEST_CASE("4-bit weights the integer kernel cannot take are left to the float product") {
  const Case c{1, 16, 256, 32};
  Operands o = make(c, 7);
  DequantB d = dequant(c, o);
  CHECK(rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  SECTION("a zero point with a fraction") {
    o.zw[3] = 0.5f;
    CHECK(!rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  }
  SECTION("a zero point beyond 128") {
    o.zw[5] = 129;
    CHECK(!rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  }
  SECTION("groups of 16 inputs") {
    d.zero.k_group = d.scale.k_group = 16;
    CHECK(!rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  }
  SECTION("a bf16 model's steps") {
    d.round16 = DequantB::Round16::kBFloat16;
    CHECK(!rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  }
  SECTION("int8 values") {
    d.q4 = nullptr;
    d.q = o.qw.data();
    CHECK(!rt::kernels::prepare_int4_weight(d, c.k, c.n).has_value());
  }
  SECTION("groups of 96: summed by 32") {
    const Case c96{1, 16, 192, 96};
    const Operands o96 = make(c96, 8);
    const std::optional<rt::kernels::Int4Weight> w =
        rt::kernels::prepare_int4_weight(dequant(c96, o96), c96.k, c96.n);
    REQUIRE(w.has_value());
    CHECK(w->group == 32);
  }
}

}  // namespace
}  // namespace etc
