// The load planner's weight-only dequantization end to end: a program's steps that widen a
// quantized constant weight (int8, or 4-bit values two a byte) into a matrix product's right
// operand are given to the product, which dequantizes as it packs (or, for a few rows on
// AVX-512, in registers). The fused method must give the unfused method's bits, in float32,
// bf16 and fp16.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>

#include "runtime/fusion_test_util.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

TEST_CASE("a weight-only int4 layer dequantizes its weight inside the product, same bits") {
  for (const bool int8_zero : {false, true}) {
    INFO("int8 zero point " << int8_zero);
    const Int4Linear c{int8_zero ? 512 : 128, int8_zero ? 512 : 256, int8_zero, false};
    Graph g = int4_linear(c);
    // The constants' bytes, before the export's passes rewrite the graph.
    const auto bytes = [&](const char* name) {
      std::optional<ValueId> id = g.find_value(name);
      REQUIRE(id.has_value());
      std::span<const uint8_t> b = g.value(*id).spec.constant.bytes();
      return std::vector<uint8_t>(b.begin(), b.end());
    };
    const std::vector<uint8_t> q = bytes("q"), zp = bytes("zp"), sc = bytes("scale");
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(4 * c.k);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    // The export stores q's 4-bit values two a byte (pack-int4-weights): the product reads
    // the nibbles, and the unpacking joins the chain.
    CHECK(rows(fused.profile) ==
          std::vector<std::string>{int8_zero ? "aten::mm.out + etc::unpack_int4.out + "
                                               "aten::_to_copy.out + aten::_to_copy.out + "
                                               "aten::sub.out + aten::mul.out + "
                                               "aten::permute_copy.out"
                                             : "aten::mm.out + etc::unpack_int4.out + "
                                               "aten::_to_copy.out + aten::sub.out + "
                                               "aten::mul.out + aten::permute_copy.out"});
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
    // And what it computes: y[m, n] = sum_k x[m, k] * (q[n, k] - zp[n, k / 32]) * s[n, k / 32].
    auto f32 = [](const std::vector<uint8_t>& b, size_t i) {
      float v;
      std::memcpy(&v, b.data() + 4 * i, 4);
      return v;
    };
    double worst = 0;
    for (int64_t m = 0; m < 4; ++m) {
      for (int64_t n = 0; n < c.n; ++n) {
        double want = 0;
        for (int64_t k = 0; k < c.k; ++k) {
          const size_t grp = static_cast<size_t>(n * (c.k / 32) + k / 32);
          const double zero =
              int8_zero ? static_cast<int8_t>(zp[grp]) : static_cast<double>(f32(zp, grp));
          const double w =
              (static_cast<int8_t>(q[static_cast<size_t>(n * c.k + k)]) - zero) * f32(sc, grp);
          want += std::sin(static_cast<float>(m * c.k + k)) * 2 * w;
        }
        worst = std::max(worst, std::abs(want - fused.y[static_cast<size_t>(m * c.n + n)]));
      }
    }
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("4-bit weights and zero points stay packed and the product reads their nibbles") {
  // q [N, K] and a zero point per element [N, K], both int8 of values in [-8, 7] (stored two
  // a byte by the export), a scale per row; K odd too (rows of K values, the last byte of
  // each half used), and over several of the GEMM's K blocks.
  for (const int64_t k : {int64_t{256}, int64_t{255}, int64_t{601}}) {
    INFO("K " << k);
    const int64_t n = 96;
    Graph g;
    ValueId x = g.add_input("x", spec({4, k}));
    ValueId q = int8_constant(g, "q", {n, k}, -8, 7, 91);
    ValueId zp = int8_constant(g, "zp", {n, k}, -8, 7, 92);
    const std::span<const uint8_t> qb = g.value(q).spec.constant.bytes();
    const std::vector<int8_t> qv(qb.begin(), qb.end());
    const std::span<const uint8_t> zb = g.value(zp).spec.constant.bytes();
    const std::vector<int8_t> zv(zb.begin(), zb.end());
    ValueId w =
        node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", DType::kFloat32}}, spec({n, k}));
    ValueId zw =
        node(g, OpKind::ToCopy, "zw", {{"self", zp}, {"dtype", DType::kFloat32}}, spec({n, k}));
    ValueId z = node(g, OpKind::SubTensor, "z", {{"self", w}, {"other", zw}}, spec({n, k}));
    ValueId scale = constant(g, "scale", {n, 1}, 93);
    const std::span<const uint8_t> sb = g.value(scale).spec.constant.bytes();
    std::vector<float> sv(static_cast<size_t>(n));
    std::memcpy(sv.data(), sb.data(), sv.size() * 4);
    ValueId d = node(g, OpKind::MulTensor, "d", {{"self", z}, {"other", scale}}, spec({n, k}));
    ValueId t = node(g, OpKind::Permute, "t", {{"self", d}, {"dims", std::vector<int64_t>{1, 0}}},
                     spec({k, n}));
    ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", t}}, spec({4, n}));
    g.set_outputs({y});
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(4 * k);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    CHECK(rows(fused.profile) ==
          std::vector<std::string>{"aten::mm.out + etc::unpack_int4.out + aten::_to_copy.out + "
                                   "etc::unpack_int4.out + aten::_to_copy.out + aten::sub.out + "
                                   "aten::mul.out + aten::permute_copy.out"});
    const std::vector<std::string> unfused = rows(plain.profile);
    CHECK(std::count(unfused.begin(), unfused.end(), std::string("etc::unpack_int4.out")) == 1);
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
    // y[m, n] = sum_k x[m, k] * (q[n, k] - zp[n, k]) * s[n]: the bytes the export packed.
    double worst = 0;
    for (int64_t m = 0; m < 4; ++m) {
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t c = 0; c < k; ++c) {
          const size_t e = static_cast<size_t>(j * k + c);
          want += std::sin(static_cast<float>(m * k + c)) * 2 *
                  ((static_cast<double>(qv[e]) - zv[e]) * sv[static_cast<size_t>(j)]);
        }
        worst = std::max(worst, std::abs(want - fused.y[static_cast<size_t>(m * n + j)]));
      }
    }
    CHECK(worst < 1e-3);
  }
}

TEST_CASE("int4 and int8 layers of float32, bf16 and fp16 models dequantize inside the product") {
  // torchao's weight-only layers in the model's dtype, each step rounded to it ((q - zp) *
  // scale is rounded after the multiplication in bf16/fp16: the product of an integer and a
  // 16-bit scale has more bits than the dtype holds). The product must give every value the
  // steps' rounding, or its bits differ from the unfused program's. One row (a decode step:
  // 4-bit weights widened in registers on AVX-512) and four; N = 40 leaves a part panel, K
  // = 512 takes two K blocks.
  const int64_t n = 40, k = 512, groups = k / 32;
  for (const DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (const int64_t m : {int64_t{1}, int64_t{4}}) {
      // int4 with zero points, int8 per row, fractional zero points, int4 with a subnormal
      // scale (where the CPU's bf16 conversion would differ: the exact rounding instead).
      for (const int form : {0, 1, 2, 3}) {
        if (form == 2 && dt == DType::kFloat32) continue;  // float32 takes any zero point
        INFO(dtype_name(dt) << ", " << m << " row(s), form " << form);
        const auto sp = [&](std::vector<int64_t> sizes) {
          return TensorSpec::make(dt, std::move(sizes));
        };
        Graph g;
        ValueId x = g.add_input("x", sp({m, k}));
        const bool int4 = form != 1;
        // int4: [N, K / 32, 32] (groups of 32); int8: [N, K].
        const std::vector<int64_t> q_sizes =
            int4 ? std::vector<int64_t>{n, groups, 32} : std::vector<int64_t>{n, k};
        ValueId q = int4 ? int8_constant(g, "q", q_sizes, -8, 7, 71)
                         : int8_constant(g, "q", q_sizes, -128, 127, 72);
        ValueId w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", dt}}, sp(q_sizes));
        if (int4) {
          // Integer zero points (torchao's), or ones with a fraction, which a 16-bit product
          // cannot take (q - zp would need rounding too): that chain stays as written.
          ValueId zp = constant_of(g, "zp", dt, {n, groups, 1}, [&](int64_t i) {
            return static_cast<float>(i % 15 - 7) + (form == 2 ? 0.375f : 0.0f);
          });
          w = node(g, OpKind::SubTensor, "z", {{"self", w}, {"other", zp}}, sp({n, groups, 32}));
        }
        const std::vector<int64_t> scale_sizes =
            int4 ? std::vector<int64_t>{n, groups, 1} : std::vector<int64_t>{n, 1};
        ValueId scale = constant_of(g, "scale", dt, scale_sizes, [&](int64_t i) {
          if (form == 3 && i == 5) return 1e-40f;
          return 0.01f + 0.37f * std::fabs(std::sin(static_cast<float>(i) * 1.7f));
        });
        if (!int4) {  // int8: a scale per row
          w = node(g, OpKind::MulTensor, "d", {{"self", w}, {"other", scale}}, sp({n, k}));
        } else {
          ValueId d =
              node(g, OpKind::MulTensor, "d", {{"self", w}, {"other", scale}}, sp({n, groups, 32}));
          w = node(g, OpKind::View, "v", {{"self", d}, {"size", std::vector<int64_t>{n, k}}},
                   sp({n, k}));
        }
        ValueId t = node(g, OpKind::Permute, "t",
                         {{"self", w}, {"dims", std::vector<int64_t>{1, 0}}}, sp({k, n}));
        ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", t}}, sp({m, n}));
        g.set_outputs({y});
        // q's values, before the export packs them.
        const std::span<const uint8_t> q_bytes = g.value(q).spec.constant.bytes();
        const std::vector<int8_t> qv(q_bytes.begin(), q_bytes.end());
        const pte::File f = export_graph(g);
        rt::Method::Profile fused_profile, plain_profile;
        const std::vector<uint8_t> fused = run_as(f, true, dt, m * k, &fused_profile);
        const std::vector<uint8_t> plain = run_as(f, false, dt, m * k, &plain_profile);
        const std::vector<std::string> want =
            form == 0 || form == 3 ? std::vector<std::string>{"aten::mm.out + etc::unpack_int4.out + "
                                                   "aten::_to_copy.out + aten::sub.out + "
                                                   "aten::mul.out + aten::permute_copy.out"}
            : form == 1 ? std::vector<std::string>{"aten::mm.out + aten::_to_copy.out + "
                                                   "aten::mul.out + aten::permute_copy.out"}
                        : rows(plain_profile);
        CHECK(rows(fused_profile) == want);
        REQUIRE(fused.size() == plain.size());
        if (m > 1 || !int4 || dt == DType::kFloat16) {
          CHECK(fused == plain);
          continue;
        }
        // A decode step over 4-bit weights sums by table lookup on AVX-512, its own order
        // (gemm_dequant.h, row4_lut_avx512; matmul_test checks each value it reads): within
        // float32's bound of the unfused sum, |x| <= 2 and |w| <= (|q| + 7) * 0.38, then
        // rounded to the dtype.
        int64_t outside = 0;
        for (int64_t j = 0; j < n; ++j) {
          double magnitude = 0;
          for (int64_t c = 0; c < k; ++c)
            magnitude += 2 * (std::abs(qv[static_cast<size_t>(j * k + c)]) + 7) * 0.38;
          const auto value = [&](const std::vector<uint8_t>& y) {
            if (dt == DType::kFloat32) {
              float v;
              std::memcpy(&v, y.data() + 4 * j, 4);
              return static_cast<double>(v);
            }
            uint16_t b;
            std::memcpy(&b, y.data() + 2 * j, 2);
            return static_cast<double>(bfloat16_to_float(b));
          };
          const double a = value(fused), b = value(plain);
          const double ulp = dt == DType::kFloat32 ? 0x1p-23 : 0x1p-7;
          const double bound = 2 * (k + 6) * 0x1p-24 * magnitude + std::abs(b) * ulp;
          outside += std::abs(a - b) > bound ? 1 : 0;
        }
        CHECK(outside == 0);
      }
    }
  }
}

TEST_CASE("a decode step over 4-bit rows of 264 values: blocks of 32 and dwords of 8 alike") {
  // K = 264: the first K block (256) is read 32 values of 16 rows at a time, the last 8 a
  // dword a row at a time; a zero point and a scale per row; float32 and bf16.
  const int64_t n = 40, k = 264;
  for (const DType dt : {DType::kFloat32, DType::kBFloat16}) {
    INFO(dtype_name(dt));
    const auto sp = [&](std::vector<int64_t> sizes) {
      return TensorSpec::make(dt, std::move(sizes));
    };
    Graph g;
    ValueId x = g.add_input("x", sp({1, k}));
    ValueId q = int8_constant(g, "q", {n, k}, -8, 7, 81);
    ValueId w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", dt}}, sp({n, k}));
    ValueId zp =
        constant_of(g, "zp", dt, {n, 1}, [](int64_t i) { return static_cast<float>(i % 9 - 4); });
    ValueId z = node(g, OpKind::SubTensor, "z", {{"self", w}, {"other", zp}}, sp({n, k}));
    ValueId scale = constant_of(g, "scale", dt, {n, 1}, [](int64_t i) {
      return 0.02f + 0.3f * std::fabs(std::cos(static_cast<float>(i) * 0.9f));
    });
    ValueId d = node(g, OpKind::MulTensor, "d", {{"self", z}, {"other", scale}}, sp({n, k}));
    ValueId t = node(g, OpKind::Permute, "t", {{"self", d}, {"dims", std::vector<int64_t>{1, 0}}},
                     sp({k, n}));
    ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", t}}, sp({1, n}));
    g.set_outputs({y});
    const pte::File f = export_graph(g);
    rt::Method::Profile fused_profile, plain_profile;
    const std::vector<uint8_t> fused = run_as(f, true, dt, k, &fused_profile);
    const std::vector<uint8_t> plain = run_as(f, false, dt, k, &plain_profile);
    CHECK(rows(fused_profile) ==
          std::vector<std::string>{"aten::mm.out + etc::unpack_int4.out + aten::_to_copy.out + "
                                   "aten::sub.out + aten::mul.out + aten::permute_copy.out"});
    CHECK(fused == plain);
  }
}

TEST_CASE("packed 4-bit bytes that do not hold the unpacked values are not read in their place") {
  // A program (not one etc writes) whose etc::unpack_int4 reads a packed constant of one row
  // where its out has 128: the product must not take the packed bytes for the weight (it would
  // read past them); the unpacking runs, and its own check fails the call.
  Graph g = int4_linear(Int4Linear{128, 256, false, false});
  pte::File f = export_graph(g);
  bool shrunk = false;
  for (pte::EValue& v : f.program.plans[0].values) {
    if (v.kind == pte::ValueKind::kTensor &&
        v.tensor.scalar_type == dtype_to_scalar_type(DType::kUInt8) &&
        v.tensor.sizes == std::vector<int32_t>{128, 8, 16}) {  // 32 values in 16 bytes a row
      v.tensor.sizes = {1, 8, 16};
      shrunk = true;
    }
  }
  REQUIRE(shrunk);
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, runtime->env());
  REQUIRE(m.ok());
  const std::vector<float> x(4 * 256, 0.5f);
  REQUIRE((*m)->set_input(0, x.data(), x.size() * sizeof(float)).ok());
  const Status st = (*m)->execute();
  CHECK(!st.ok());
  CHECK(st.to_string().find("unpack_int4") != std::string::npos);
}

TEST_CASE("a dequantized weight something else reads is not fused into the product") {
  Graph g = int4_linear(Int4Linear{128, 256, false, true});
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, 4 * 256), plain = run(f, false, 4 * 256);
  CHECK(rows(fused.profile) == rows(plain.profile));
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

TEST_CASE("an int8 weight stored [K, N] is read as int8 by the product, its scale after") {
  // Int8WeightOnlyConfig's program: mm(x, _to_copy(q [K, N])) * scale [N]. Four rows, and
  // one (a decode step: on AVX-512 the weight's rows read in place, 384 columns at a time in
  // registers; 405 columns end in a part group and a part vector, K = 300 takes two blocks).
  for (const auto& [rows_a, k, n] : {std::tuple<int64_t, int64_t, int64_t>{4, 256, 96},
                                     {1, 256, 96},
                                     {1, 300, 405},
                                     {4, 300, 405}}) {
    INFO(rows_a << " x " << k << " x " << n);
    Graph g;
    ValueId x = g.add_input("x", spec({rows_a, k}));
    ValueId q = int8_constant(g, "q", {k, n}, -128, 127, 71);
    ValueId w =
        node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", DType::kFloat32}}, spec({k, n}));
    ValueId m = node(g, OpKind::Mm, "m", {{"self", x}, {"mat2", w}}, spec({rows_a, n}));
    ValueId y = node(g, OpKind::MulTensor, "y",
                     {{"self", m}, {"other", constant(g, "scale", {n}, 72)}}, spec({rows_a, n}));
    g.set_outputs({y});
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(rows_a * k);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    // (The scaling writes the method's output: not an epilogue, which may not write caller
    // memory.)
    CHECK(rows(fused.profile) ==
          std::vector<std::string>{"aten::mm.out + aten::_to_copy.out", "aten::mul.out"});
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
}

TEST_CASE("a PT2E linear with a bias (addmm) dequantizes its per-channel weight inside") {
  // dequantize_per_channel's program: (_to_copy(q [N, K]) - zp [N, 1]) * scale [N, 1],
  // permute, addmm(bias, x, w^T, beta, alpha); beta and alpha not 1, so that both count.
  Graph g;
  ValueId x = g.add_input("x", spec({3, 192}));
  ValueId q = int8_constant(g, "q", {80, 192}, -127, 127, 81);
  ValueId w =
      node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", DType::kFloat32}}, spec({80, 192}));
  ValueId z = node(g, OpKind::SubTensor, "z",
                   {{"self", w}, {"other", constant(g, "zp", {80, 1}, 82)}}, spec({80, 192}));
  ValueId d = node(g, OpKind::MulTensor, "d",
                   {{"self", z}, {"other", constant(g, "scale", {80, 1}, 83)}}, spec({80, 192}));
  ValueId t = node(g, OpKind::Permute, "t", {{"self", d}, {"dims", std::vector<int64_t>{1, 0}}},
                   spec({192, 80}));
  ValueId y = node(g, OpKind::Addmm, "y",
                   {{"self", constant(g, "bias", {80}, 84)},
                    {"mat1", x},
                    {"mat2", t},
                    {"beta", Scalar{0.5}},
                    {"alpha", Scalar{2.0}}},
                   spec({3, 80}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, 3 * 192), plain = run(f, false, 3 * 192);
  CHECK(rows(fused.profile) ==
        std::vector<std::string>{"aten::addmm.out + aten::_to_copy.out + aten::sub.out + "
                                 "aten::mul.out + aten::permute_copy.out"});
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

// ExecuTorch's 8da4w linear layer as torchao's program computes it: each row of x [m, k]
// quantized to int8 at run time (choose_qparams_affine's asymmetric form: the row's min and
// max, a scale of their span over 255, a zero point rounded and clamped; quantize_affine's
// clamp(round(x / scale) + zero)), dequantized again ((q - zero) * scale), times a 4-bit
// weight in groups of `group` inputs dequantized the same way. With `int8_zero` the rows'
// zero points are cast to int8 and widened back (torchao's dtype); with `fractional_zero` the
// zero point is not rounded (not torchao's form: the integer product must not take it).
// With `rows_as_bias` (k == n) the product is addmm(xd, xd, w^T): its bias reads the
// dequantized rows too.
struct Da4w {
  int64_t m = 3, n = 48, k = 256, group = 32;
  bool int8_zero = true, fractional_zero = false, rows_as_bias = false;
};
Graph da4w_linear(const Da4w& c) {
  const int64_t groups = c.k / c.group;
  const auto ints = [](std::vector<int64_t> v) { return v; };
  Graph g;
  ValueId x = g.add_input("x", spec({c.m, c.k}));
  const TensorSpec row = spec({c.m, 1}), all = spec({c.m, c.k});
  ValueId mn =
      node(g, OpKind::Amin, "mn", {{"self", x}, {"dim", ints({1})}, {"keepdim", true}}, row);
  ValueId mx =
      node(g, OpKind::Amax, "mx", {{"self", x}, {"dim", ints({1})}, {"keepdim", true}}, row);
  ValueId span = node(g, OpKind::SubTensor, "span", {{"self", mx}, {"other", mn}}, row);
  ValueId sc = node(g, OpKind::DivScalar, "sc", {{"self", span}, {"other", Scalar{255.0}}}, row);
  ValueId z0 = node(g, OpKind::DivTensor, "z0", {{"self", mn}, {"other", sc}}, row);
  if (!c.fractional_zero) z0 = node(g, OpKind::Round, "z0r", {{"self", z0}}, row);
  ValueId z1 = node(g, OpKind::Neg, "z1", {{"self", z0}}, row);
  ValueId z2 =
      node(g, OpKind::AddScalar, "z2", {{"self", z1}, {"other", Scalar{int64_t{-128}}}}, row);
  ValueId zp =
      node(g, OpKind::Clamp, "zp",
           {{"self", z2}, {"min", Scalar{int64_t{-128}}}, {"max", Scalar{int64_t{127}}}}, row);
  ValueId inv = node(g, OpKind::Reciprocal, "inv", {{"self", sc}}, row);
  ValueId xs = node(g, OpKind::MulTensor, "xs", {{"self", x}, {"other", inv}}, all);
  ValueId xr = node(g, OpKind::Round, "xr", {{"self", xs}}, all);
  ValueId xz = node(g, OpKind::AddTensor, "xz", {{"self", xr}, {"other", zp}}, all);
  ValueId xc =
      node(g, OpKind::Clamp, "xc",
           {{"self", xz}, {"min", Scalar{int64_t{-128}}}, {"max", Scalar{int64_t{127}}}}, all);
  ValueId qx = node(g, OpKind::ToCopy, "qx", {{"self", xc}, {"dtype", DType::kInt8}},
                    TensorSpec::make(DType::kInt8, {c.m, c.k}));
  ValueId zx = zp;
  if (c.int8_zero) {
    ValueId zi = node(g, OpKind::ToCopy, "zi", {{"self", zp}, {"dtype", DType::kInt8}},
                      TensorSpec::make(DType::kInt8, {c.m, 1}));
    zx = node(g, OpKind::ToCopy, "zx", {{"self", zi}, {"dtype", DType::kFloat32}}, row);
  }
  ValueId xq = node(g, OpKind::ToCopy, "xq", {{"self", qx}, {"dtype", DType::kFloat32}}, all);
  ValueId xd0 = node(g, OpKind::SubTensor, "xd0", {{"self", xq}, {"other", zx}}, all);
  ValueId xd = node(g, OpKind::MulTensor, "xd", {{"self", xd0}, {"other", sc}}, all);
  // The weight: int8 values in [-8, 7] [n, groups, group] (stored two a byte by the export), a
  // zero point and a scale per group.
  const TensorSpec wspec = spec({c.n, groups, c.group});
  ValueId q = int8_constant(g, "q", {c.n, groups, c.group}, -8, 7, 91);
  ValueId w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", DType::kFloat32}}, wspec);
  ValueId wz =
      node(g, OpKind::SubTensor, "wz",
           {{"self", w},
            {"other", constant_of(g, "wzp", DType::kFloat32, {c.n, groups, 1},
                                  [](int64_t i) { return static_cast<float>(i % 5 - 2); })}},
           wspec);
  ValueId wd = node(
      g, OpKind::MulTensor, "wd",
      {{"self", wz},
       {"other", constant_of(g, "ws", DType::kFloat32, {c.n, groups, 1},
                             [](int64_t i) {
                               return 0.01f + 0.02f * std::fabs(std::sin(static_cast<float>(i)));
                             })}},
      wspec);
  ValueId v =
      node(g, OpKind::View, "v", {{"self", wd}, {"size", ints({c.n, c.k})}}, spec({c.n, c.k}));
  ValueId t =
      node(g, OpKind::Permute, "t", {{"self", v}, {"dims", ints({1, 0})}}, spec({c.k, c.n}));
  ValueId y =
      c.rows_as_bias
          ? node(g, OpKind::Addmm, "y", {{"self", xd}, {"mat1", xd}, {"mat2", t}}, spec({c.m, c.n}))
          : node(g, OpKind::Mm, "y", {{"self", xd}, {"mat2", t}}, spec({c.m, c.n}));
  g.set_outputs({y});
  return g;
}

TEST_CASE("an 8da4w layer multiplies its int8 rows by the 4-bit weight in integers") {
  // The product takes both chains: the rows' _to_copy, sub and mul (and the zero points'
  // widening) and the weight's. Its result is the group sums' exact integers combined in
  // float32, not the float steps' bits: within float rounding of them (the kernel's own test
  // checks its bits against the exact sums).
  for (const Da4w& c : {Da4w{3, 48, 256, 32, true}, Da4w{1, 40, 512, 128, false},
                        Da4w{5, 33, 384, 128, true}, Da4w{2, 20, 256, 64, true}}) {
    INFO("m " << c.m << " n " << c.n << " k " << c.k << " group " << c.group);
    Graph g = da4w_linear(c);
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(c.m * c.k);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    const std::string rows_steps = c.int8_zero ? "aten::_to_copy.out + aten::_to_copy.out + "
                                                 "aten::sub.out + aten::mul.out + "
                                               : "aten::_to_copy.out + aten::sub.out + "
                                                 "aten::mul.out + ";
    bool fused_rows = false;
    for (const std::string& name : rows(fused.profile)) {
      fused_rows = fused_rows || name == "aten::mm.out + " + rows_steps +
                                             "etc::unpack_int4.out + aten::_to_copy.out + "
                                             "aten::sub.out + aten::mul.out + "
                                             "aten::permute_copy.out";
    }
    CHECK(fused_rows);
    REQUIRE(fused.y.size() == plain.y.size());
    float largest = 0, worst = 0;
    for (size_t i = 0; i < plain.y.size(); ++i) {
      largest = std::max(largest, std::fabs(plain.y[i]));
      worst = std::max(worst, std::fabs(plain.y[i] - fused.y[i]));
    }
    CHECK(largest > 0.1f);
    CHECK(worst <= 2e-6f * largest);
  }
}

TEST_CASE("8da4w rows that another operand of the product reads stay unfused") {
  // addmm(xd, xd, w^T): the bias reads the dequantized rows, so their steps must run (the
  // weight's chain still joins the product: the float steps' bits).
  Da4w c{3, 128, 128, 32, true};
  c.rows_as_bias = true;
  Graph g = da4w_linear(c);
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, 3 * 128), plain = run(f, false, 3 * 128);
  const std::vector<std::string> names = rows(fused.profile);
  CHECK(std::find(names.begin(), names.end(),
                  "aten::addmm.out + etc::unpack_int4.out + aten::_to_copy.out + "
                  "aten::sub.out + aten::mul.out + aten::permute_copy.out") != names.end());
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

TEST_CASE("an 8da4w layer whose rows' zero points are not integers keeps the float steps' bits") {
  // The planner cannot know the zero points at load: the product sees them when it runs and,
  // finding one with a fraction, computes the rows' steps itself, each rounded as the
  // program's kernels round it.
  Graph g = da4w_linear(Da4w{3, 48, 256, 32, false, true});
  const pte::File f = export_graph(g);
  const size_t numel = size_t{3} * 256;
  const Run fused = run(f, true, numel), plain = run(f, false, numel);
  CHECK(rows(fused.profile).size() < rows(plain.profile).size());
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

TEST_CASE("weights stored in panels (16-bit, int8, float32) are read in place, same bits") {
  // The export stores a host product's bf16/fp16 weight (or an int8 one a _to_copy widens:
  // torchao's Int8WeightOnlyConfig, or a float32 one of a product of at most 8 rows) in
  // panels of 64 columns and permutes it back before the product (panel-weights); the load
  // planner gives the product the panels and skips the permute. One row (a decode step), a
  // short prompt (the tile kernel) and 20 rows (packed panels; float32 stays [K, N] there);
  // an addmm with a bias; K = 300 over two K blocks.
  const int64_t k = 300, n = 256;
  for (const DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const auto sp = [&](std::vector<int64_t> sizes) {
      return TensorSpec::make(dt, std::move(sizes));
    };
    const auto widen = [&](uint16_t bits) {
      return static_cast<double>(dt == DType::kBFloat16 ? bfloat16_to_float(bits)
                                                        : half_to_float(bits));
    };
    for (const bool int8 : {false, true}) {
      for (const bool addmm : {false, true}) {
        for (const int64_t m : {int64_t{1}, int64_t{5}, int64_t{20}}) {
          // A float32 weight goes into panels only for a few rows (8 at most): more would
          // pack them again on every call, where a constant [K, N] is packed once.
          const bool paneled = !(dt == DType::kFloat32 && !int8 && m > 8);
          INFO(dtype_name(dt) << (int8 ? ", int8" : "") << (addmm ? ", addmm" : ", mm") << ", " << m
                              << " row(s)");
          Graph g;
          ValueId x = g.add_input("x", sp({m, k}));
          ValueId w;
          std::vector<double> wv(static_cast<size_t>(k * n));  // the weight's values
          if (int8) {
            ValueId q = int8_constant(g, "q", {k, n}, -128, 127, 81);
            const std::span<const uint8_t> b = g.value(q).spec.constant.bytes();
            for (size_t i = 0; i < wv.size(); ++i)
              wv[i] = static_cast<int8_t>(b[i]);
            w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", dt}}, sp({k, n}));
          } else {
            w = constant_of(g, "w", dt, {k, n},
                            [](int64_t i) { return std::sin(static_cast<float>(i) * 0.37f); });
            const std::span<const uint8_t> b = g.value(w).spec.constant.bytes();
            for (size_t i = 0; i < wv.size(); ++i) {
              if (dt == DType::kFloat32) {
                float v;
                std::memcpy(&v, b.data() + 4 * i, 4);
                wv[i] = v;
              } else {
                uint16_t bits;
                std::memcpy(&bits, b.data() + 2 * i, 2);
                wv[i] = widen(bits);
              }
            }
          }
          ValueId bias = constant_of(g, "bias", dt, {n},
                                     [](int64_t i) { return static_cast<float>(i % 7) - 3; });
          ValueId y = addmm ? node(g, OpKind::Addmm, "y",
                                   {{"self", bias}, {"mat1", x}, {"mat2", w}}, sp({m, n}))
                            : node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", w}}, sp({m, n}));
          g.set_outputs({y});
          const pte::File f = export_graph(g);
          rt::Method::Profile fused_profile, plain_profile;
          const std::vector<uint8_t> fused = run_as(f, true, dt, m * k, &fused_profile);
          const std::vector<uint8_t> plain = run_as(f, false, dt, m * k, &plain_profile);
          // The program permutes the panels back (ExecuTorch's runtime runs that copy); the
          // planner skips it.
          const std::string product = addmm ? "aten::addmm.out" : "aten::mm.out";
          const std::vector<std::string> unfused = rows(plain_profile);
          CHECK(std::count(unfused.begin(), unfused.end(), "aten::permute_copy.out") ==
                (paneled ? 1 : 0));
          CHECK(rows(fused_profile) ==
                std::vector<std::string>{product + (paneled ? " + aten::permute_copy.out" : "") +
                                         (int8 ? " + aten::_to_copy.out" : "")});
          REQUIRE(fused.size() == plain.size());
          CHECK(fused == plain);
          // And the values: bias + x @ w, x[i] = 2 sin(i) in dt.
          double worst = 0, largest = 0;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double want = addmm ? static_cast<double>(j % 7 - 3) : 0.0;
              for (int64_t c = 0; c < k; ++c) {
                const float xv = std::sin(static_cast<float>(i * k + c)) * 2;
                const double x_dt = dt == DType::kFloat32    ? xv
                                    : dt == DType::kBFloat16 ? widen(float_to_bfloat16(xv))
                                                             : widen(float_to_half(xv));
                want += x_dt * wv[static_cast<size_t>(c * n + j)];
              }
              const size_t at = static_cast<size_t>(i * n + j);
              double got = 0;
              if (dt == DType::kFloat32) {
                float v;
                std::memcpy(&v, fused.data() + 4 * at, 4);
                got = v;
              } else {
                uint16_t bits;
                std::memcpy(&bits, fused.data() + 2 * at, 2);
                got = widen(bits);
              }
              worst = std::max(worst, std::abs(got - want));
              largest = std::max(largest, std::abs(want));
            }
          }
          const double rel = dt == DType::kBFloat16  ? 1.0 / 128
                             : dt == DType::kFloat16 ? 1.0 / 1024
                                                     : 1e-5;
          CHECK(worst <= largest * rel);
        }
      }
    }
  }
}

TEST_CASE("a weight two products read is permuted back for each, and both read the panels") {
  const int64_t k = 256, n = 320;
  const auto sp = [](std::vector<int64_t> sizes) {
    return TensorSpec::make(DType::kBFloat16, std::move(sizes));
  };
  Graph g;
  ValueId x = g.add_input("x", sp({1, k}));
  ValueId w = constant_of(g, "w", DType::kBFloat16, {k, n},
                          [](int64_t i) { return std::cos(static_cast<float>(i)); });
  ValueId y1 = node(g, OpKind::Mm, "y1", {{"self", x}, {"mat2", w}}, sp({1, n}));
  ValueId x2 = node(g, OpKind::MulScalar, "x2", {{"self", x}, {"other", Scalar{2.0}}}, sp({1, k}));
  ValueId y2 = node(g, OpKind::Mm, "y2", {{"self", x2}, {"mat2", w}}, sp({1, n}));
  ValueId y = node(g, OpKind::AddTensor, "y", {{"self", y1}, {"other", y2}}, sp({1, n}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  rt::Method::Profile fused_profile, plain_profile;
  const std::vector<uint8_t> fused = run_as(f, true, DType::kBFloat16, k, &fused_profile);
  const std::vector<uint8_t> plain = run_as(f, false, DType::kBFloat16, k, &plain_profile);
  // Both products take their own permute; nothing permutes at run time.
  CHECK(fused_profile["aten::mm.out + aten::permute_copy.out"].calls == 2);
  CHECK(fused_profile.count("aten::permute_copy.out") == 0);
  CHECK(plain_profile["aten::permute_copy.out"].calls == 2);
  CHECK(fused == plain);
}

TEST_CASE("weights the panels do not fit stay [K, N]") {
  // A weight something else reads too (here an output), columns not a multiple of 64, a
  // float32 weight of a product of 9 rows (packed once at load instead), a small one: no
  // permute in the program.
  struct Case {
    DType dt;
    int64_t k, n;
    bool also_output;
    int64_t m = 1;
  };
  for (const Case c :
       {Case{DType::kBFloat16, 300, 256, true}, Case{DType::kBFloat16, 300, 250, false},
        Case{DType::kFloat32, 300, 256, false, 9}, Case{DType::kBFloat16, 64, 256, false}}) {
    INFO(dtype_name(c.dt) << " " << c.k << "x" << c.n << (c.also_output ? ", also an output" : ""));
    const auto sp = [&](std::vector<int64_t> sizes) {
      return TensorSpec::make(c.dt, std::move(sizes));
    };
    Graph g;
    ValueId x = g.add_input("x", sp({c.m, c.k}));
    ValueId w = constant_of(g, "w", c.dt, {c.k, c.n},
                            [](int64_t i) { return std::sin(static_cast<float>(i)); });
    ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", w}}, sp({c.m, c.n}));
    if (c.also_output) {
      g.set_outputs({y, w});
    } else {
      g.set_outputs({y});
    }
    const pte::File f = export_graph(g);
    rt::Method::Profile profile;
    run_as(f, false, c.dt, static_cast<size_t>(c.m * c.k), &profile);
    CHECK(rows(profile) == std::vector<std::string>{"aten::mm.out"});
  }
  // An int8 weight whose widened values something else reads too (here an output), or that
  // is widened to float64: no permute either.
  for (const DType wide : {DType::kBFloat16, DType::kFloat64}) {
    INFO("int8 widened to " << dtype_name(wide));
    const auto sp = [&](std::vector<int64_t> sizes) {
      return TensorSpec::make(wide, std::move(sizes));
    };
    Graph g;
    ValueId x = g.add_input("x", sp({1, 300}));
    ValueId q = int8_constant(g, "q", {300, 256}, -128, 127, 5);
    ValueId w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", wide}}, sp({300, 256}));
    ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", w}}, sp({1, 256}));
    if (wide == DType::kBFloat16) {
      g.set_outputs({y, w});
    } else {
      g.set_outputs({y});
    }
    const pte::File f = export_graph(g);
    const std::vector<pte::Operator>& ops = f.program.plans.at(0).operators;
    CHECK(std::none_of(ops.begin(), ops.end(),
                       [](const pte::Operator& o) { return o.name == "aten::permute_copy"; }));
    CHECK(std::any_of(ops.begin(), ops.end(),
                      [](const pte::Operator& o) { return o.name == "aten::mm"; }));
  }
}

}  // namespace
}  // namespace etc
