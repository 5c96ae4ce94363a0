// mm, bmm, addmm and linear against a naive double triple loop, on shapes that are not
// multiples of the GEMM's register and cache blocks, with both the AVX2 and the portable
// micro-kernels.
#include <cmath>
#include <cstring>
#include <random>
#include <string_view>

#include "graph/int4.h"
#include "graph/ops.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemm_dequant.h"
#include "runtime/kernels/parallel.h"
#include "support/half.h"

namespace etc::rt::test {
namespace {

using kernels::GemmIsa;

// c[b, i, j] = sum_k a[b, i, k] * bt(b, k, j), with bt reading B through strides.
std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b,
                               int64_t batch, int64_t m, int64_t n, int64_t k,
                               bool b_transposed = false) {
  std::vector<double> c(static_cast<size_t>(batch * m * n), 0.0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          double bv = b_transposed ? b[(bi * n + j) * k + p] : b[(bi * k + p) * n + j];
          s += a[(bi * m + i) * k + p] * bv;
        }
        c[(bi * m + i) * n + j] = s;
      }
    }
  }
  return c;
}

// GEMM results accumulate k products: allow for k roundings of the compute type on top of
// the final rounding to the out dtype (inputs are in [-1, 1]).
Tolerance gemm_tolerance(DType dt, int64_t k) {
  Tolerance t = tolerance_for(dt);
  const double eps = dt == DType::kFloat64 ? 1e-15 : dtype_is_float(dt) ? 1.2e-7 : 0;
  t.atol += eps * static_cast<double>(k) * 4;
  if (dt == DType::kFloat16 || dt == DType::kBFloat16) t.atol += t.rtol * 2;
  return t;
}

struct Shape {
  int64_t m, n, k;
};

const Shape kShapes[] = {{1, 1, 1},    {7, 13, 5},   {65, 129, 33}, {6, 16, 8},  {12, 32, 300},
                         {150, 20, 7}, {3, 4100, 5}, {1, 50, 40},   {40, 1, 50}, {17, 19, 257}};

double range(DType dt) {
  return dtype_is_float(dt) ? 1 : 6;
}

TEST_CASE("mm over shapes and dtypes, both micro-kernels") {
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                     DType::kInt32, DType::kInt64}) {
      for (const Shape& s : kShapes) {
        if (dt != DType::kFloat32 && s.n > 1000) continue;
        INFO("isa " << static_cast<int>(isa) << " " << dtype_name(dt) << " m=" << s.m
                    << " n=" << s.n << " k=" << s.k);
        for (const char* name : {"aten::mm.out", "aten::mm.default"}) {
          Call c(name);
          Value* a = c.random(dt, {s.m, s.k}, 101, -range(dt), range(dt));
          Value* b = c.random(dt, {s.k, s.n}, 102, -range(dt), range(dt));
          Value* out = c.out(dt, {s.m, s.n});
          REQUIRE(c.run({a, b}, {out}).ok());
          require_close(read(out), matmul_ref(read(a), read(b), 1, s.m, s.n, s.k),
                        gemm_tolerance(dt, s.k));
        }
      }
    }
  }
}

TEST_CASE("the AVX-512 and AVX2 float micro-kernels give the same bits") {
  // Same accumulation order and fused multiply-adds per element; tiles of different sizes
  // (8x32 and 6x16) put the edges in different places, which must not show.
  INFO("float micro-kernel under kAuto: " << kernels::gemm_float_kernel_name());
  struct Mnk {
    int64_t m, n, k;
  };
  for (Mnk s :
       {Mnk{1, 1, 1}, Mnk{7, 33, 300}, Mnk{64, 280, 576}, Mnk{145, 4100, 3}, Mnk{9, 17, 513}}) {
    INFO(s.m << "x" << s.n << "x" << s.k);
    Call c("aten::mm.out");
    Value* a = c.random(DType::kFloat32, {s.m, s.k}, 501);
    Value* b = c.random(DType::kFloat32, {s.k, s.n}, 502);
    auto run = [&](GemmIsa isa) {
      IsaScope guard(isa);
      Value* out = c.out(DType::kFloat32, {s.m, s.n});
      REQUIRE(c.run({a, b}, {out}).ok());
      return read(out);
    };
    CHECK(run(GemmIsa::kAuto) == run(GemmIsa::kAvx2));
  }
}

// How many of `got` (dt's values) differ from the float32 values `wide` rounded to dt.
size_t differ_from_rounded(const std::vector<double>& got, const std::vector<double>& wide,
                           DType dt) {
  size_t differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float w = static_cast<float>(wide[i]);
    const float rounded = dt == DType::kBFloat16 ? bfloat16_to_float(float_to_bfloat16(w))
                                                 : half_to_float(float_to_half(w));
    differ += got[i] != static_cast<double>(rounded) ? 1 : 0;
  }
  return differ;
}

TEST_CASE("16-bit right operands are widened as they are packed, with float32's bits") {
  // A bf16/fp16 B is read in its own dtype and widened into the GEMM's panels (never copied
  // whole to float32 first): the product is the float32 product of the widened values,
  // rounded once to the out dtype. Shapes: a decode step's one row (the one-row path, K over
  // several blocks), a short prompt, a parallel split over N, a transposed weight (linear).
  struct Case {
    const char* op;
    Sizes a, b;
    bool bias = false;
  };
  // One-row cases: a [K, N] weight (mm) takes one_row_w16, a [N, K] one (linear) the panels;
  // 45 outputs (= 32 + 13 = 2 x 16 + 13) cut the panels and vectors short, 700 inputs end K
  // blocks inside 16 values (256 + 256 + 188), a bias starts the rows; 1000 outputs take
  // AVX-512's groups of 384 columns in registers twice, then 232 (14 x 16 + 8).
  const Case cases[] = {{"aten::mm.out", {1, 700}, {700, 300}},
                        {"aten::mm.out", {1, 700}, {700, 45}},
                        {"aten::mm.out", {1, 300}, {300, 1000}},
                        {"aten::mm.out", {8, 300}, {300, 70}},
                        {"aten::mm.out", {70, 130}, {130, 2100}},
                        {"aten::linear.default", {3, 520}, {33, 520}},
                        {"aten::linear.default", {1, 96}, {2048, 96}},
                        {"aten::linear.default", {1, 700}, {45, 700}},
                        {"aten::linear.default", {1, 700}, {45, 700}, true},
                        {"aten::bmm.out", {3, 9, 40}, {3, 40, 17}}};
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      for (const Case& k : cases) {
        INFO("isa " << static_cast<int>(isa) << " " << dtype_name(dt) << " " << k.op << " "
                    << shape_to_string(k.a) << " x " << shape_to_string(k.b));
        const bool linear = std::string(k.op) == "aten::linear.default";
        Sizes out_sizes = k.a;
        out_sizes.back() = linear ? k.b[0] : k.b.back();
        Call c(k.op);
        Value* a = c.random(dt, k.a, 151);
        Value* b = c.random(dt, k.b, 152);
        Value* out = c.out(dt, out_sizes);
        Value* bias = k.bias ? c.random(dt, {k.b[0]}, 153) : c.none();
        REQUIRE((linear ? c.run({a, b, bias}, {out}) : c.run({a, b}, {out})).ok());
        // The float32 product of the same (exactly widened) values, rounded to dt.
        Call f(k.op);
        Value* fa = f.tensor(DType::kFloat32, k.a, read(a));
        Value* fb = f.tensor(DType::kFloat32, k.b, read(b));
        Value* fbias = k.bias ? f.tensor(DType::kFloat32, {k.b[0]}, read(bias)) : f.none();
        Value* fout = f.out(DType::kFloat32, out_sizes);
        REQUIRE((linear ? f.run({fa, fb, fbias}, {fout}) : f.run({fa, fb}, {fout})).ok());
        const std::vector<double> got = read(out), wide = read(fout);
        REQUIRE(got.size() == wide.size());
        CHECK(differ_from_rounded(got, wide, dt) == 0);
      }
    }
  }
}

TEST_CASE("a 16-bit addmm over a few rows gives float32's bits, beta and alpha included") {
  // One row over a [K, N] weight takes the row-by-row path (one_row_w16), more the tile
  // kernels: C starts from the bias scaled by beta and takes alpha times the sums in both.
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
      for (int64_t m : {1, 5, 8}) {
        INFO("isa " << static_cast<int>(isa) << " " << dtype_name(dt) << " m=" << m);
        Call c("aten::addmm.out");
        Value* bias = c.random(dt, {45}, 161);
        Value* a = c.random(dt, {m, 600}, 162);
        Value* b = c.random(dt, {600, 45}, 163);
        Value* out = c.out(dt, {m, 45});
        REQUIRE(c.run({bias, a, b, c.d(0.5), c.d(-2)}, {out}).ok());
        Call f("aten::addmm.out");
        Value* fout = f.out(DType::kFloat32, {m, 45});
        REQUIRE(f.run({f.tensor(DType::kFloat32, {45}, read(bias)),
                       f.tensor(DType::kFloat32, {m, 600}, read(a)),
                       f.tensor(DType::kFloat32, {600, 45}, read(b)), f.d(0.5), f.d(-2)},
                      {fout})
                    .ok());
        const std::vector<double> got = read(out), wide = read(fout);
        CHECK(differ_from_rounded(got, wide, dt) == 0);
      }
    }
  }
}

TEST_CASE("mm with empty dims") {
  for (const Shape& s : {Shape{0, 3, 4}, Shape{3, 0, 4}, Shape{3, 4, 0}}) {
    Call c("aten::mm.out");
    Value* a = c.random(DType::kFloat32, {s.m, s.k}, 1);
    Value* b = c.random(DType::kFloat32, {s.k, s.n}, 2);
    Value* out = c.out(DType::kFloat32, {s.m, s.n});
    REQUIRE(c.run({a, b}, {out}).ok());
    // k = 0: a sum of nothing is 0.
    require_close(read(out), std::vector<double>(static_cast<size_t>(s.m * s.n), 0.0),
                  DType::kFloat32);
  }
}

TEST_CASE("bmm") {
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64}) {
      for (const Shape& s : {Shape{7, 13, 5}, Shape{1, 1, 1}, Shape{33, 17, 65}}) {
        for (int64_t batch : {1, 3, 0}) {
          INFO(dtype_name(dt) << " batch " << batch << " m=" << s.m << " n=" << s.n
                              << " k=" << s.k);
          Call c("aten::bmm.out");
          Value* a = c.random(dt, {batch, s.m, s.k}, 111, -range(dt), range(dt));
          Value* b = c.random(dt, {batch, s.k, s.n}, 112, -range(dt), range(dt));
          Value* out = c.out(dt, {batch, s.m, s.n});
          REQUIRE(c.run({a, b}, {out}).ok());
          require_close(read(out), matmul_ref(read(a), read(b), batch, s.m, s.n, s.k),
                        gemm_tolerance(dt, s.k));
        }
      }
    }
  }
  Call c("aten::bmm.default");
  Value* a = c.random(DType::kFloat32, {2, 3, 4}, 1);
  Value* b = c.random(DType::kFloat32, {3, 4, 5}, 2);
  CHECK(c.run({a, b}, {c.out(DType::kFloat32, {2, 3, 5})}).message() ==
        "aten::bmm.default: batch sizes differ: self [2, 3, 4], mat2 [3, 4, 5]");
}

TEST_CASE("addmm broadcasts self and applies beta and alpha") {
  const Shape s{65, 33, 129};
  const Sizes bias_shapes[] = {{s.n}, {s.m, s.n}, {1, s.n}, {s.m, 1}, {}};
  struct Coef {
    double beta, alpha;
  };
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kBFloat16}) {
      for (const Sizes& bs : bias_shapes) {
        for (Coef co : {Coef{1, 1}, Coef{0.5, -2}, Coef{0, 1}}) {
          INFO(dtype_name(dt) << " bias " << shape_to_string(bs) << " beta " << co.beta << " alpha "
                              << co.alpha);
          for (const char* name : {"aten::addmm.out", "aten::addmm.default"}) {
            Call c(name);
            Value* bias = c.random(dt, bs, 121);
            Value* a = c.random(dt, {s.m, s.k}, 122);
            Value* b = c.random(dt, {s.k, s.n}, 123);
            Value* out = c.out(dt, {s.m, s.n});
            REQUIRE(c.run({bias, a, b, c.d(co.beta), c.d(co.alpha)}, {out}).ok());
            std::vector<double> want = matmul_ref(read(a), read(b), 1, s.m, s.n, s.k);
            std::vector<double> bv = read(bias);
            for (size_t i = 0; i < want.size(); ++i) {
              Sizes idx = unravel(static_cast<int64_t>(i), {s.m, s.n});
              want[i] = co.beta * bv[broadcast_index(idx, bs)] + co.alpha * want[i];
            }
            require_close(read(out), want, gemm_tolerance(dt, s.k * 2));
          }
        }
      }
    }
  }
  // beta = 0 ignores self, even NaN.
  Call c("aten::addmm.out");
  Value* bias = c.tensor(DType::kFloat32, {2}, {NAN, INFINITY});
  Value* a = c.tensor(DType::kFloat32, {1, 1}, {2});
  Value* b = c.tensor(DType::kFloat32, {1, 2}, {3, 4});
  Value* out = c.out(DType::kFloat32, {1, 2});
  REQUIRE(c.run({bias, a, b, c.i(0), c.i(1)}, {out}).ok());
  require_close(read(out), {6, 8}, DType::kFloat32);
  // Integer addmm.
  Call ci("aten::addmm.out");
  Value* ib = ci.tensor(DType::kInt64, {2}, {10, 20});
  Value* ia = ci.tensor(DType::kInt64, {1, 2}, {1, 2});
  Value* im = ci.tensor(DType::kInt64, {2, 2}, {3, 4, 5, 6});
  Value* io = ci.out(DType::kInt64, {1, 2});
  REQUIRE(ci.run({ib, ia, im, ci.i(2), ci.i(3)}, {io}).ok());
  require_close(read(io), {2 * 10 + 3 * 13, 2 * 20 + 3 * 16}, DType::kInt64);
  CHECK(ci.run({ib, ia, im, ci.d(0.5), ci.i(3)}, {io}).message() ==
        "aten::addmm.out: beta and alpha must be integers for an out of dtype int64");
  Value* bad = ci.tensor(DType::kInt64, {3}, {1, 2, 3});
  CHECK(ci.run({bad, ia, im, ci.i(1), ci.i(1)}, {io}).message() ==
        "aten::addmm.out: self [3] does not broadcast to [1, 2]");
}

TEST_CASE("linear multiplies by the transposed weight and adds the bias") {
  struct Case {
    Sizes input;
    int64_t out_features;
    bool bias;
  };
  const Case cases[] = {{{2, 3, 33}, 17, true}, {{33}, 65, true},  {{129, 7}, 13, false},
                        {{1, 1}, 1, true},      {{0, 5}, 3, true}, {{4, 0}, 3, true},
                        {{5, 300}, 40, false}};
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kFloat64}) {
      for (const Case& k : cases) {
        INFO(dtype_name(dt) << " input " << shape_to_string(k.input) << " -> " << k.out_features);
        Call c("aten::linear.default");
        const int64_t in = k.input.back();
        Value* x = c.random(dt, k.input, 131);
        Value* w = c.random(dt, {k.out_features, in}, 132);
        Value* b = k.bias ? c.random(dt, {k.out_features}, 133) : c.none();
        Sizes os = k.input;
        os.back() = k.out_features;
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, w, b}, {out}).ok());
        const int64_t m = numel(os) / k.out_features;
        std::vector<double> want = matmul_ref(read(x), read(w), 1, m, k.out_features, in, true);
        if (k.bias) {
          std::vector<double> bv = read(b);
          for (size_t i = 0; i < want.size(); ++i)
            want[i] += bv[i % bv.size()];
        }
        require_close(read(out), want, gemm_tolerance(dt, in + 1));
      }
    }
  }
  Call c("aten::linear.default");
  Value* x = c.random(DType::kFloat32, {2, 3}, 1);
  Value* w = c.random(DType::kFloat32, {4, 5}, 2);
  CHECK(c.run({x, w, c.none()}, {c.out(DType::kFloat32, {2, 4})}).message() ==
        "aten::linear.default: input [2, 3] has 3 features but weight [4, 5] expects 5");
}

TEST_CASE("constant matmul weights are packed once and give the same bits") {
  // Shapes around the blocking: k over one K block, n over one N block, both threads' splits.
  struct Shape {
    int64_t m, k, n;
  };
  // m <= 4 takes the row kernels on packed panels (a batch-1 linear layer), under both the
  // AVX-512 and the AVX2 panels: same bits as the micro-kernels.
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2})
    for (Shape s :
         {Shape{24, 384, 1536}, Shape{3, 700, 37}, Shape{130, 257, 4100}, Shape{1, 5, 1},
          Shape{1, 1280, 1000}, Shape{2, 300, 200}, Shape{4, 513, 129}, Shape{3, 64, 520}}) {
      IsaScope guard(isa);
      INFO(s.m << "x" << s.k << "x" << s.n << " isa " << static_cast<int>(isa));
      // full_bias: addmm with a bias of out's sizes, which fills C before the products
      // instead of starting each tile.
      for (const auto& [op, full_bias] : {std::pair<const char*, bool>{"aten::addmm.out", false},
                                          {"aten::addmm.out", true},
                                          {"aten::mm.out", false},
                                          {"aten::linear.default", false}}) {
        INFO(op << (full_bias ? " [m, n] bias" : ""));
        const std::string name = op;
        const bool linear = name == "aten::linear.default", addmm = name == "aten::addmm.out";
        Call c(op);
        Value* a = c.random(DType::kFloat32, {s.m, s.k}, 71);
        const Sizes ws = linear ? Sizes{s.n, s.k} : Sizes{s.k, s.n};
        Value* w = c.random(DType::kFloat32, ws, 72);
        Value* w2 = c.random(DType::kFloat32, ws, 73);
        // addmm's bias a row [1, n] (or [m, n]) with beta 0.5 (the GEMM starts from the scaled
        // row).
        Value* bias = c.random(DType::kFloat32,
                               full_bias ? Sizes{s.m, s.n}
                               : addmm   ? Sizes{1, s.n}
                                         : Sizes{s.n},
                               74);
        auto run = [&](Value* weight) {
          Value* out = c.out(DType::kFloat32, {s.m, s.n});
          Status st = addmm    ? c.run({bias, a, weight, c.d(0.5), c.d(0.5)}, {out})
                      : linear ? c.run({a, weight, bias}, {out})
                               : c.run({a, weight}, {out});
          REQUIRE(st.ok());
          return read(out);
        };
        const std::vector<double> plain = run(w), plain2 = run(w2);
        c.keep_state(uint64_t{1} << (addmm ? 2 : 1));  // the weight is a constant
        CHECK(run(w) == plain);                        // packs
        CHECK(c.state() != nullptr);
        CHECK(run(w) == plain);    // uses the packed panels
        CHECK(run(w2) == plain2);  // other weights: packed again
      }
    }
}

TEST_CASE("a quantized right operand gives the bits of the GEMM on its dequantized values") {
  // B[k, n] = (float(q) - zero) * scale, dequantized as B is packed (DequantB), against the
  // same GEMM over B materialised with the same float operations: both layouts of q, operands
  // per output channel, per group of inputs (32, and 24: groups that straddle a K block) and
  // per element, float and int8 zero points, shapes off every block size, two threads' split.
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> qd(-128, 127);
  std::uniform_real_distribution<float> fd(-2, 2);
  struct Case {
    int64_t m, k, n;
    bool q_nk;      // q stored [N, K] (torchao's), else [K, N]
    int64_t group;  // inputs per zero/scale group; 0: one per output channel; -1: none
    bool int8_zero;
  };
  const Case cases[] = {
      {1, 256, 96, true, 32, false},  {3, 520, 70, true, 24, true},   {8, 300, 33, false, 0, false},
      {5, 64, 300, false, -1, false}, {2, 1000, 130, true, 0, false}, {1, 96, 1030, true, 32, true},
      {17, 257, 40, false, 1, false}, {4, 512, 600, true, 32, true},  // split by columns
  };
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    int index = 0;
    for (const Case& c : cases) {
      INFO("isa " << static_cast<int>(isa) << " case " << index++);
      std::vector<int8_t> q(static_cast<size_t>(c.k * c.n));
      for (int8_t& v : q)
        v = static_cast<int8_t>(qd(rng));
      const int64_t groups = c.group > 0 ? (c.k + c.group - 1) / c.group : 1;
      std::vector<float> zero(static_cast<size_t>(c.n * groups)),
          scale(static_cast<size_t>(c.n * groups));
      std::vector<int8_t> zero8(zero.size());
      for (size_t i = 0; i < zero.size(); ++i) {
        zero8[i] = static_cast<int8_t>(qd(rng) / 16);
        zero[i] = c.int8_zero ? static_cast<float>(zero8[i]) : fd(rng);
        scale[i] = fd(rng) / 64;
      }
      kernels::DequantB d;
      d.q = q.data();
      d.q_n = c.q_nk ? c.k : 1;
      d.q_k = c.q_nk ? 1 : c.n;
      if (c.group >= 0) {
        for (kernels::DequantB::Operand* o : {&d.zero, &d.scale}) {
          o->n_stride = groups;
          o->k_stride = c.group > 0 ? 1 : 0;
          o->k_group = c.group > 0 ? c.group : 1;
        }
        d.scale.data = scale.data();
        if (c.int8_zero) {
          d.zero.data_i8 = zero8.data();
        } else {
          d.zero.data = zero.data();
        }
      }
      // B materialised as the program's steps compute it.
      std::vector<float> b(static_cast<size_t>(c.k * c.n));
      for (int64_t kk = 0; kk < c.k; ++kk) {
        for (int64_t nn = 0; nn < c.n; ++nn) {
          float v = static_cast<float>(q[static_cast<size_t>(nn * d.q_n + kk * d.q_k)]);
          if (c.group >= 0) {
            const size_t at = static_cast<size_t>(nn * groups + (c.group > 0 ? kk / c.group : 0));
            v = v - zero[at];
            v = v * scale[at];
          }
          b[static_cast<size_t>(kk * c.n + nn)] = v;
        }
      }
      std::vector<float> a(static_cast<size_t>(c.m * c.k));
      for (float& v : a)
        v = fd(rng);
      std::vector<float> want(static_cast<size_t>(c.m * c.n), 0.0f), got = want;
      kernels::gemm(c.m, c.n, c.k, 1.0f, kernels::MatrixRef<float>{a.data(), c.k, 1},
                    kernels::MatrixRef<float>{b.data(), c.n, 1}, want.data(), c.n);
      kernels::MatrixRef<float> quantized{nullptr, 0, 0};
      quantized.dequant = &d;
      kernels::gemm(c.m, c.n, c.k, 1.0f, kernels::MatrixRef<float>{a.data(), c.k, 1}, quantized,
                    got.data(), c.n);
      REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
    }
  }
}

TEST_CASE("a decode step over 4-bit weights: each value the steps', the sums within float32's") {
  // One row of A times a 4-bit weight stored [N, K], which AVX-512 reads by table lookup
  // (row4_lut_avx512): each column's sum runs in 16 lanes, not in the inputs' order, so it is
  // not the bits of the unfused product. A one-hot row reads one dequantized value alone:
  // every value of every column must be the program's steps' ((float(q) - zero) * scale,
  // rounded to bf16 where the steps are). A random row's sums must lie within float32's error
  // bound of the exact sum of those values, alpha and C's values included, with the same bits
  // at 1 and 3 threads (the columns split).
  using kernels::DequantB;
  struct Case {
    int64_t k, n, group;  // group 0: a zero point and a scale per row
    bool zero, int8_zero;
    DequantB::Round16 round;
    bool normal;    // DequantB::normal_values: the CPU's bf16 conversion, else exact rounding
    int64_t block;  // the inputs the kernel reads of a row at a time
    int64_t zero_group = -1;  // the zero point's own group (0: per row), -1: group's
  };
  constexpr auto kBf16 = DequantB::Round16::kBFloat16, kNone = DequantB::Round16::kNone;
  const Case cases[] = {
      {256, 40, 128, true, true, kBf16, true, 128},
      {512, 33, 64, true, false, kBf16, false, 64},
      {160, 17, 32, true, true, kNone, false, 32},
      {384, 8, 0, false, false, kBf16, true, 128},
      {96, 5, 32, false, false, kNone, false, 32},
      {1024, 70, 256, true, false, kBf16, true, 128},
      // Groups of their own: zero points per row or per 96 inputs, scales per 64.
      {384, 12, 64, true, true, kBf16, true, 64, 0},
      {384, 9, 64, true, false, kNone, false, 32, 96},
  };
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> nibble(-8, 7), zd(-8, 7);
  std::uniform_real_distribution<float> fd(-1, 1), sd(0.001f, 0.05f);
  for (const Case& c : cases) {
    INFO("k " << c.k << " n " << c.n << " group " << c.group << " block " << c.block);
    const bool bf16 = c.round == kBf16;
    const int64_t groups = c.group > 0 ? c.k / c.group : 1;
    const int64_t zero_group = c.zero_group < 0 ? c.group : c.zero_group;
    const int64_t zero_groups = zero_group > 0 ? c.k / zero_group : 1;
    std::vector<int8_t> q(static_cast<size_t>(c.n * c.k));
    for (int8_t& v : q)
      v = static_cast<int8_t>(nibble(rng));
    std::vector<uint8_t> q4(static_cast<size_t>(c.n * int4::row_bytes(c.k)));
    for (int64_t r = 0; r < c.n; ++r)
      int4::pack(q.data() + r * c.k, c.k, q4.data() + r * int4::row_bytes(c.k));
    std::vector<float> zero(static_cast<size_t>(c.n * zero_groups)),
        scale(static_cast<size_t>(c.n * groups));
    std::vector<int8_t> zero8(zero.size());
    for (size_t i = 0; i < zero.size(); ++i) {
      zero8[i] = static_cast<int8_t>(zd(rng));
      // A bf16 program's zero points are integers (the steps exact in bf16), its scales bf16.
      zero[i] = c.int8_zero || bf16 ? static_cast<float>(zero8[i]) : 4 * fd(rng);
    }
    for (size_t i = 0; i < scale.size(); ++i) {
      scale[i] = sd(rng) * (i % 3 == 0 ? -1.0f : 1.0f);
      if (bf16) scale[i] = bfloat16_to_float(float_to_bfloat16(scale[i]));
    }
    DequantB d;
    d.q4 = q4.data();
    d.q4_row = int4::row_bytes(c.k);
    d.q_k = 1;
    d.q_n = c.k;
    d.round16 = c.round;
    d.normal_values = c.normal;
    d.integer_zero = c.int8_zero || bf16;
    for (DequantB::Operand* o : {&d.zero, &d.scale}) {
      if (o == &d.zero && !c.zero) continue;
      const int64_t gr = o == &d.zero ? zero_group : c.group;
      o->n_stride = o == &d.zero ? zero_groups : groups;
      o->k_stride = gr > 0 ? 1 : 0;
      o->k_group = gr > 0 ? gr : 1;
    }
    d.scale.data = scale.data();
    if (c.zero && c.int8_zero) d.zero.data_i8 = zero8.data();
    if (c.zero && !c.int8_zero) d.zero.data = zero.data();
    std::vector<float> zero_lanes, scale_lanes;
    kernels::arrange_row_operands(d, c.k, c.n, zero_lanes, scale_lanes);
    CHECK(kernels::row4_lut_block(kernels::FloatKernel::kAvx512, d, c.k) == c.block);
    // The weight's values as the program's steps compute them, [N, K].
    std::vector<float> w(q.size());
    for (int64_t nn = 0; nn < c.n; ++nn) {
      for (int64_t kk = 0; kk < c.k; ++kk) {
        const size_t at = static_cast<size_t>(nn * groups + (c.group > 0 ? kk / c.group : 0));
        const size_t zat =
            static_cast<size_t>(nn * zero_groups + (zero_group > 0 ? kk / zero_group : 0));
        float v = static_cast<float>(q[static_cast<size_t>(nn * c.k + kk)]);
        if (c.zero) v = v - zero[zat];
        v = v * scale[at];
        if (bf16) v = bfloat16_to_float(float_to_bfloat16(v));
        w[static_cast<size_t>(nn * c.k + kk)] = v;
      }
    }
    kernels::MatrixRef<float> b{nullptr, 0, 0};
    b.dequant = &d;
    // One-hot rows: each value alone.
    std::vector<float> a(static_cast<size_t>(c.k), 0.0f), y(static_cast<size_t>(c.n));
    int64_t wrong = 0;
    for (int64_t kk = 0; kk < c.k; ++kk) {
      a[static_cast<size_t>(kk)] = 1.0f;
      std::fill(y.begin(), y.end(), 0.0f);
      kernels::gemm(1, c.n, c.k, 1.0f, kernels::MatrixRef<float>{a.data(), c.k, 1}, b, y.data(),
                    c.n);
      for (int64_t nn = 0; nn < c.n; ++nn)
        wrong += y[static_cast<size_t>(nn)] != w[static_cast<size_t>(nn * c.k + kk)] ? 1 : 0;
      a[static_cast<size_t>(kk)] = 0.0f;
    }
    CHECK(wrong == 0);
    // Random rows, alpha 0.5 over C's values: float32 values, and in a bf16 program bf16
    // ones (which the kernel multiplies two at a time with vdpbf16ps where the CPU has it),
    // with and without a subnormal among them (which it leaves to the float32 form).
    std::vector<float> c0(y.size());
    for (float& v : c0)
      v = fd(rng);
    for (const int row_form : {0, 1, 2}) {
      if (row_form > 0 && !bf16) continue;
      INFO("row form " << row_form);
      for (float& v : a)
        v = row_form > 0 ? bfloat16_to_float(float_to_bfloat16(fd(rng))) : fd(rng);
      if (row_form == 2) a[static_cast<size_t>(c.k / 3)] = 1e-39f;
      std::vector<float> arranged(static_cast<size_t>(c.k));
      const bool pairs_cpu =
          __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw");
      CHECK((kernels::row4_lut_arrange(d, c.k, c.block, a.data(), 1, arranged.data()) ==
             kernels::LutRow::kBf16Pairs) ==
            (row_form == 1 && c.normal && c.block == 128 && pairs_cpu));
      std::vector<float> first;
      for (const int threads : {1, 3}) {
        kernels::set_num_threads(threads);
        y = c0;
        kernels::gemm(1, c.n, c.k, 0.5f, kernels::MatrixRef<float>{a.data(), c.k, 1}, b, y.data(),
                      c.n);
        if (first.empty()) first = y;
      }
      kernels::set_num_threads(0);
      CHECK(std::memcmp(first.data(), y.data(), y.size() * 4) == 0);
      int64_t outside = 0;
      for (int64_t nn = 0; nn < c.n; ++nn) {
        double exact = 0, magnitude = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double t =
              double{a[static_cast<size_t>(kk)]} * w[static_cast<size_t>(nn * c.k + kk)];
          exact += t;
          magnitude += std::abs(t);
        }
        const double want = 0.5 * exact + c0[static_cast<size_t>(nn)];
        // k / 16 products a lane, four rounds adding the lanes, the final multiply-add.
        const double bound = (static_cast<double>(c.k) / 16 + 6) * 0x1p-24 * 0.5 * magnitude +
                             std::abs(want) * 0x1p-23;
        outside += std::abs(y[static_cast<size_t>(nn)] - want) > bound ? 1 : 0;
      }
      CHECK(outside == 0);
    }
  }
}

TEST_CASE("a weight in panels gives the bits of the same weight stored [K, N]") {
  // etc's CPU export stores a decode step's 16-bit and int8 weights (and float32 ones of
  // products of at most 8 rows) in panels of 64 columns (DequantB::panel); the product must
  // read them as the [K, N] layout (float32: as the float32 product itself), bit for bit: a
  // decode step (one row: AVX-512's 384 columns in registers, AVX2's row of accumulators), a
  // short prompt (the tile kernel), a long one (the packed panels); K over several blocks,
  // columns split across threads, panels of 32, 64 and 128.
  std::mt19937 rng(91);
  std::uniform_int_distribution<int> qd(-128, 127);
  std::uniform_real_distribution<float> fd(-1, 1);
  struct Case {
    int64_t m, k, n, panel;
  };
  const Case cases[] = {{1, 700, 448, 64},  {1, 96, 1024, 64},  {1, 300, 96, 32},
                        {1, 513, 384, 128}, {3, 700, 192, 64},  {8, 260, 448, 64},
                        {9, 300, 320, 64},  {40, 129, 256, 64}, {70, 600, 640, 128}};
  for (int threads : {1, 3}) {
    const ThreadsScope scope(threads);
    for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
      IsaScope guard(isa);
      for (const Case& c : cases) {
        for (int kind = 0; kind < 4; ++kind) {  // bf16, fp16, int8, float32
          INFO("threads " << threads << " isa " << static_cast<int>(isa) << " m=" << c.m << " k="
                          << c.k << " n=" << c.n << " panel " << c.panel << " kind " << kind);
          // The weight [K, N] and the same values in panels.
          std::vector<uint16_t> w16(static_cast<size_t>(c.k * c.n)), p16(w16.size());
          std::vector<int8_t> w8(w16.size()), p8(w16.size());
          std::vector<float> wf(w16.size()), pf(w16.size());
          for (size_t i = 0; i < w16.size(); ++i) {
            w16[i] = kind == 1 ? float_to_half(fd(rng)) : float_to_bfloat16(fd(rng));
            w8[i] = static_cast<int8_t>(qd(rng));
            wf[i] = fd(rng);
          }
          for (int64_t kk = 0; kk < c.k; ++kk) {
            for (int64_t nn = 0; nn < c.n; ++nn) {
              const size_t from = static_cast<size_t>(kk * c.n + nn);
              const size_t to =
                  static_cast<size_t>((nn / c.panel) * c.k * c.panel + kk * c.panel + nn % c.panel);
              p16[to] = w16[from];
              p8[to] = w8[from];
              pf[to] = wf[from];
            }
          }
          kernels::DequantB rows, panels;
          if (kind == 3) {
            panels.f32 = pf.data();  // against the float32 product over [K, N] itself
          } else if (kind == 2) {
            rows.q = w8.data();
            panels.q = p8.data();
          } else {
            rows.bits16 = w16.data();
            panels.bits16 = p16.data();
            rows.float16 = panels.float16 = kind == 1;
          }
          rows.q_n = 1;
          rows.q_k = c.n;
          panels.q_n = 1;
          panels.q_k = c.panel;
          panels.panel = c.panel;
          panels.panel_stride = c.k * c.panel;
          std::vector<float> a(static_cast<size_t>(c.m * c.k));
          for (float& v : a)
            v = fd(rng);
          std::vector<float> want(static_cast<size_t>(c.m * c.n), 0.5f), got = want;
          kernels::MatrixRef<float> b_rows{nullptr, 0, 0}, b_panels{nullptr, 0, 0};
          b_rows.dequant = &rows;
          if (kind == 3) b_rows = kernels::MatrixRef<float>{wf.data(), c.n, 1};
          b_panels.dequant = &panels;
          kernels::gemm(c.m, c.n, c.k, 1.5f, kernels::MatrixRef<float>{a.data(), c.k, 1}, b_rows,
                        want.data(), c.n);
          kernels::gemm(c.m, c.n, c.k, 1.5f, kernels::MatrixRef<float>{a.data(), c.k, 1}, b_panels,
                        got.data(), c.n);
          REQUIRE(std::memcmp(got.data(), want.data(), got.size() * 4) == 0);
          // And the values are the product's: against double sums of the widened weight.
          for (int64_t i = 0; i < c.m; i += std::max<int64_t>(1, c.m / 3)) {
            for (int64_t j = 0; j < c.n; j += 7) {
              double s = 0;
              for (int64_t kk = 0; kk < c.k; ++kk) {
                const size_t at = static_cast<size_t>(kk * c.n + j);
                const double wv = kind == 3   ? wf[at]
                                  : kind == 2 ? w8[at]
                                  : kind == 1 ? half_to_float(w16[at])
                                              : bfloat16_to_float(w16[at]);
                s += static_cast<double>(a[static_cast<size_t>(i * c.k + kk)]) * wv;
              }
              const double expect = 0.5 + 1.5 * s;
              REQUIRE(std::fabs(got[static_cast<size_t>(i * c.n + j)] - expect) <=
                      1e-4 * (kind == 2 ? 128 : 1) * static_cast<double>(c.k));
            }
          }
        }
      }
    }
  }
}

// count floats drawn uniformly from [-1, 1).
std::vector<float> uniform_floats(std::mt19937& rng, int64_t count) {
  std::uniform_real_distribution<float> fd(-1, 1);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v)
    x = fd(rng);
  return v;
}

TEST_CASE("a product by packed panels that overwrites C gives the bits of zeroing it first") {
  // gemm_packed(PackedB) with a GemmInit (C not read: the fused attention's scores and
  // outputs; a linear layer's bias row) against C filled with zeros (or the rows' values, or
  // the row of column values) and accumulated into: 1, 3 (the few-row kernels), 8, 37 and
  // 150 rows (two row blocks); K of one block and of three; 4100 columns (two column blocks
  // at 1 thread); alpha 1 and 0.125. At 3 threads, 37 x 600 x 70 and larger split by columns
  // (the column values shift with them).
  std::mt19937 rng(93);
  for (const int threads : {1, 3})
    for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
      IsaScope guard(isa);
      const ThreadsScope count(threads);
      for (const int64_t m : {int64_t{1}, int64_t{3}, int64_t{8}, int64_t{37}, int64_t{150}}) {
        for (auto [k, n] : {std::pair<int64_t, int64_t>{64, 150}, {600, 70}, {16, 4100}}) {
          for (const float alpha : {1.0f, 0.125f}) {
            INFO("threads " << threads << " isa " << static_cast<int>(isa) << " m " << m << " k "
                            << k << " n " << n << " alpha " << alpha);
            const std::vector<float> a = uniform_floats(rng, m * k), b = uniform_floats(rng, k * n);
            const std::vector<float> rows = uniform_floats(rng, m), cols = uniform_floats(rng, n);
            const auto packed =
                kernels::PackedB::pack(k, n, kernels::MatrixRef<float>{b.data(), n, 1});
            const kernels::MatrixRef<float> ar{a.data(), k, 1};
            for (const char* from : {"zero", "rows", "cols"}) {
              INFO(from);
              const std::string_view f = from;
              std::vector<float> want(static_cast<size_t>(m * n));
              for (int64_t i = 0; i < m; ++i) {
                if (f == "cols") {
                  std::copy(cols.begin(), cols.end(), want.begin() + i * n);
                } else {
                  std::fill_n(want.begin() + i * n, n,
                              f == "rows" ? rows[static_cast<size_t>(i)] : 0.0f);
                }
              }
              kernels::gemm_packed(m, alpha, ar, *packed, want.data(), n);
              std::vector<float> got(static_cast<size_t>(m * n), std::nanf(""));
              kernels::GemmInit init;
              init.rows = f == "rows" ? rows.data() : nullptr;
              init.cols = f == "cols" ? cols.data() : nullptr;
              kernels::gemm_packed(m, alpha, ar, *packed, got.data(), n, &init);
              REQUIRE(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
            }
          }
        }
      }
    }
}

TEST_CASE("tiles of fewer rows than the micro-kernel's give the bits of full tiles") {
  // C's last rows (m not a multiple of MR: 6 rows on AVX2, 8 on AVX-512) run kernels that
  // multiply only those rows. Each m from 1 to 23 against the first m rows of a 24-row
  // product (whole tiles on every ISA): K of one block and of three (the later blocks add to
  // C), N with a partial last panel; accumulating into C, and overwriting it from row values
  // or from zero (GemmInit, on panels packed once).
  std::mt19937 rng(97);
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (auto [k, n] : {std::pair<int64_t, int64_t>{40, 37}, {600, 80}}) {
      const int64_t big = 24;
      const std::vector<float> a = uniform_floats(rng, big * k), b = uniform_floats(rng, k * n);
      const std::vector<float> rows = uniform_floats(rng, big);
      const kernels::MatrixRef<float> ar{a.data(), k, 1}, br{b.data(), n, 1};
      const auto packed = kernels::PackedB::pack(k, n, br);
      std::vector<float> all(static_cast<size_t>(big * n), 0.5f), all_rows(all.size());
      kernels::gemm(big, n, k, 0.75f, ar, br, all.data(), n);
      kernels::GemmInit init;
      init.rows = rows.data();
      kernels::gemm_packed(big, 0.75f, ar, *packed, all_rows.data(), n, &init);
      for (int64_t m = 1; m < big; ++m) {
        INFO("isa " << static_cast<int>(isa) << " m " << m << " k " << k << " n " << n);
        const auto bytes = static_cast<size_t>(m * n) * 4;
        std::vector<float> got(static_cast<size_t>(m * n), 0.5f);
        kernels::gemm(m, n, k, 0.75f, ar, br, got.data(), n);
        REQUIRE(std::memcmp(got.data(), all.data(), bytes) == 0);
        std::fill(got.begin(), got.end(), std::nanf(""));
        kernels::gemm_packed(m, 0.75f, ar, *packed, got.data(), n, &init);
        REQUIRE(std::memcmp(got.data(), all_rows.data(), bytes) == 0);
      }
    }
  }
}

TEST_CASE("a one-row product gives the bits of that row in a many-row product") {
  // gemm's one-row path (no A packing, B read in place) against the tile kernels' rows: K over
  // several K blocks, N over partial panels and N blocks; B row-major, strided (packed), and
  // packed once (PackedB).
  std::mt19937 rng(91);
  std::uniform_real_distribution<float> fd(-1, 1);
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2, GemmIsa::kPortable}) {
    IsaScope guard(isa);
    for (auto [k, n] : {std::pair<int64_t, int64_t>{700, 77}, {64, 1100}, {300, 33}}) {
      INFO("isa " << static_cast<int>(isa) << " k " << k << " n " << n);
      const int64_t m = 5;
      std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
      for (float& v : a)
        v = fd(rng);
      for (float& v : b)
        v = fd(rng);
      const auto packed = kernels::PackedB::pack(k, n, kernels::MatrixRef<float>{b.data(), n, 1});
      for (const bool transposed_b : {false, true}) {
        // B^T stored [N, K]: read with swapped strides (packed per call).
        std::vector<float> bt(b.size());
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < n; ++j)
            bt[static_cast<size_t>(j * k + i)] = b[static_cast<size_t>(i * n + j)];
        const kernels::MatrixRef<float> bref = transposed_b
                                                   ? kernels::MatrixRef<float>{bt.data(), 1, k}
                                                   : kernels::MatrixRef<float>{b.data(), n, 1};
        std::vector<float> all(static_cast<size_t>(m * n), 0.5f);
        kernels::gemm(m, n, k, 0.75f, kernels::MatrixRef<float>{a.data(), k, 1}, bref, all.data(),
                      n);
        for (int64_t r = 0; r < m; ++r) {
          std::vector<float> one(static_cast<size_t>(n), 0.5f), one_packed = one;
          kernels::gemm(1, n, k, 0.75f, kernels::MatrixRef<float>{a.data() + r * k, k, 1}, bref,
                        one.data(), n);
          REQUIRE(std::memcmp(one.data(), all.data() + r * n, static_cast<size_t>(n) * 4) == 0);
          kernels::gemm_packed(1, 0.75f, kernels::MatrixRef<float>{a.data() + r * k, k, 1}, *packed,
                               one_packed.data(), n);
          REQUIRE(std::memcmp(one_packed.data(), all.data() + r * n, static_cast<size_t>(n) * 4) ==
                  0);
        }
      }
    }
  }
}

TEST_CASE("a few rows by a transposed B give the bits of those rows in a many-row product") {
  // B stored [N, K] (K^T read from K: the query heads that share a cache head go as the rows
  // of one product), in float32, bf16 and fp16: 1 to 4 rows, whose path loads and transposes
  // B's values once for all of them, against the same rows of a 9-row product (the tile
  // kernels over packed panels). K over several K blocks, N over partial panels.
  std::mt19937 rng(92);
  std::uniform_real_distribution<float> fd(-1, 1);
  for (GemmIsa isa : {GemmIsa::kAuto, GemmIsa::kAvx2}) {
    IsaScope guard(isa);
    for (auto [k, n] : {std::pair<int64_t, int64_t>{700, 77}, {64, 1100}, {17, 40}}) {
      const int64_t all_rows = 9;
      std::vector<float> a(static_cast<size_t>(all_rows * k)), bt(static_cast<size_t>(n * k));
      for (float& v : a)
        v = fd(rng);
      for (float& v : bt)
        v = fd(rng);
      std::vector<uint16_t> bt16(bt.size()), bt_half(bt.size());
      for (size_t i = 0; i < bt.size(); ++i) {
        bt16[i] = float_to_bfloat16(bt[i]);
        bt_half[i] = float_to_half(bt[i]);
      }
      for (int form = 0; form < 3; ++form) {
        INFO("isa " << static_cast<int>(isa) << " k " << k << " n " << n << " form " << form);
        kernels::DequantB d;
        d.bits16 = form == 1 ? bt16.data() : bt_half.data();
        d.float16 = form == 2;
        d.q_n = k;
        d.q_k = 1;
        kernels::MatrixRef<float> bref{bt.data(), 1, k};
        if (form > 0) {
          bref = kernels::MatrixRef<float>{nullptr, 0, 0};
          bref.dequant = &d;
        }
        std::vector<float> all(static_cast<size_t>(all_rows * n), 0.5f);
        kernels::gemm(all_rows, n, k, 0.75f, kernels::MatrixRef<float>{a.data(), k, 1}, bref,
                      all.data(), n);
        for (int64_t m = 1; m <= 4; ++m) {
          for (int64_t r0 : {int64_t{0}, all_rows - m}) {
            std::vector<float> few(static_cast<size_t>(m * n), 0.5f);
            kernels::gemm(m, n, k, 0.75f, kernels::MatrixRef<float>{a.data() + r0 * k, k, 1}, bref,
                          few.data(), n);
            REQUIRE(std::memcmp(few.data(), all.data() + r0 * n, few.size() * 4) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("matmul errors") {
  Call c("aten::mm.out");
  Value* a = c.random(DType::kFloat32, {2, 3}, 1);
  Value* b = c.random(DType::kFloat32, {4, 5}, 2);
  CHECK(c.run({a, b}, {c.out(DType::kFloat32, {2, 5})}).message() ==
        "aten::mm.out: cannot multiply [2, 3] by [4, 5] (inner dimensions differ)");
  Value* h = c.random(DType::kFloat16, {3, 5}, 2);
  CHECK(c.run({a, h}, {c.out(DType::kFloat32, {2, 5})}).message() ==
        "aten::mm.out: mat2 has dtype float16, expected float32 (the dtype of self)");
  Value* v = c.random(DType::kFloat32, {3}, 2);
  CHECK(c.run({a, v}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::mm.out: mat2 must have rank 2, got [3]");
  Value* bb = c.random(DType::kBool, {2, 2}, 3, 0, 1);
  CHECK(c.run({bb, bb}, {c.out(DType::kBool, {2, 2})}).message() ==
        "aten::mm.out: out has dtype bool, expected a numeric dtype (not bool)");
}

// check_linear and check_addmm: the errors the CUDA kernels give too.
TEST_CASE("linear and addmm argument errors") {
  Call l("aten::linear.default");
  Value* x0 = l.random(DType::kFloat32, {}, 1);
  Value* w = l.random(DType::kFloat32, {3, 1}, 2);
  CHECK(l.run({x0, w, l.none()}, {l.out(DType::kFloat32, {3})}).message() ==
        "aten::linear.default: input must have rank 1 or more, got []");
  Value* x = l.random(DType::kFloat32, {2, 1}, 3);
  Value* bias = l.random(DType::kFloat32, {2}, 4);
  CHECK(l.run({x, w, bias}, {l.out(DType::kFloat32, {2, 3})}).message() ==
        "aten::linear.default: bias [2] does not broadcast to [2, 3]");
  Call a("aten::addmm.out");
  Value* m1 = a.random(DType::kFloat32, {2, 3}, 5);
  Value* m2 = a.random(DType::kFloat32, {3, 4}, 6);
  Value* b16 = a.random(DType::kFloat16, {4}, 7);
  CHECK(a.run({b16, m1, m2, a.i(1), a.i(1)}, {a.out(DType::kFloat32, {2, 4})}).message() ==
        "aten::addmm.out: self has dtype float16, expected float32 (the dtype of mat1)");
}

}  // namespace
}  // namespace etc::rt::test

namespace etc::rt::test {
namespace {

// etc::weight_only_linear (graph/weight_only.h) against its rule computed here: w[n, k] =
// R(R(q - zero) * scale) per group, out = input @ w^T + bias summed in float, rounded once.
// Zero points that are small integers take the GEMM that reads the packed weight; others
// (in a 16-bit model) the per-step reference; float32 either way.
TEST_CASE("weight_only_linear computes its rule's value, on both CPU paths") {
  struct Case {
    DType dt;
    bool int4;
    int64_t k, group;
    bool integer_zero, int8_zero, bias;
  };
  for (const Case& cs : {Case{DType::kFloat32, true, 64, 32, false, false, true},
                         Case{DType::kBFloat16, true, 64, 16, true, false, false},
                         Case{DType::kBFloat16, true, 64, 16, false, false, true},
                         Case{DType::kFloat16, false, 48, 48, false, true, false},
                         Case{DType::kFloat16, true, 15, 5, false, false, true},
                         Case{DType::kFloat32, false, 40, 8, true, false, false}}) {
    INFO(dtype_name(cs.dt) << (cs.int4 ? " int4" : " int8") << " K " << cs.k << " group "
                           << cs.group << " integer zero " << cs.integer_zero << " int8 zero "
                           << cs.int8_zero);
    const int64_t m = 3, n = 5, groups = cs.k / cs.group;
    auto round = [&](double v) {
      const auto f = static_cast<float>(v);
      if (cs.dt == DType::kBFloat16)
        return static_cast<double>(bfloat16_to_float(float_to_bfloat16(f)));
      if (cs.dt == DType::kFloat16) return static_cast<double>(half_to_float(float_to_half(f)));
      return static_cast<double>(f);
    };
    std::vector<double> x, q, scale, zero, bias;
    for (int64_t i = 0; i < m * cs.k; ++i)
      x.push_back(round(std::sin(static_cast<double>(i)) * 1.7));
    for (int64_t i = 0; i < n * cs.k; ++i)
      q.push_back(cs.int4 ? static_cast<double>((i * 7) % 16 - 8)
                          : static_cast<double>((i * 37) % 256 - 128));
    for (int64_t i = 0; i < n * groups; ++i) {
      scale.push_back(round(0.013 + 0.0071 * static_cast<double>(i % 9)));
      zero.push_back(cs.int8_zero || cs.integer_zero ? static_cast<double>(i % 7 - 3)
                                                     : round(static_cast<double>(i % 5) - 2.31));
    }
    for (int64_t j = 0; j < n; ++j)
      bias.push_back(round(0.5 - 0.25 * static_cast<double>(j)));
    // The weight's bytes: int8 values, or two 4-bit values a byte (graph/int4.h).
    std::vector<double> w_bytes;
    if (cs.int4) {
      const int64_t row = int4::row_bytes(cs.k);
      for (int64_t j = 0; j < n; ++j) {
        std::vector<int8_t> values(static_cast<size_t>(cs.k));
        for (int64_t c = 0; c < cs.k; ++c)
          values[static_cast<size_t>(c)] =
              static_cast<int8_t>(q[static_cast<size_t>(j * cs.k + c)]);
        std::vector<uint8_t> packed(static_cast<size_t>(row));
        int4::pack(values.data(), cs.k, packed.data());
        for (uint8_t b : packed)
          w_bytes.push_back(b);
      }
    } else {
      w_bytes = q;
    }
    Call c("etc::weight_only_linear.out");
    Value* xv = c.tensor(cs.dt, {m, cs.k}, x);
    Value* wv = cs.int4 ? c.tensor(DType::kUInt8, {n, int4::row_bytes(cs.k)}, w_bytes)
                        : c.tensor(DType::kInt8, {n, cs.k}, w_bytes);
    Value* sv = c.tensor(cs.dt, {n, groups}, scale);
    Value* zv = c.tensor(cs.int8_zero ? DType::kInt8 : cs.dt, {n, groups}, zero);
    Value* bv = cs.bias ? c.tensor(cs.dt, {n}, bias) : c.none();
    Value* out = c.out(cs.dt, {m, n});
    const Status s = c.run({xv, wv, sv, c.i(cs.group), zv, bv}, {out});
    INFO(s.to_string());
    REQUIRE(s.ok());
    const std::vector<double> got = read(out);
    double worst = 0, largest = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double want = cs.bias ? bias[static_cast<size_t>(j)] : 0;
        for (int64_t kk = 0; kk < cs.k; ++kk) {
          const size_t g = static_cast<size_t>(j * groups + kk / cs.group);
          const double w = round(round(q[static_cast<size_t>(j * cs.k + kk)] - zero[g]) * scale[g]);
          want += x[static_cast<size_t>(i * cs.k + kk)] * w;
        }
        worst = std::max(worst, std::abs(got[static_cast<size_t>(i * n + j)] - round(want)));
        largest = std::max(largest, std::abs(want));
      }
    }
    // One rounding of the output to the dtype, and float32 sums.
    CHECK(worst <= (cs.dt == DType::kFloat32   ? 1e-6
                    : cs.dt == DType::kFloat16 ? 1e-3
                                               : 8e-3) *
                       std::max(largest, 1.0));
  }
}

TEST_CASE("weight_only_linear's bad calls are errors that say what is wrong") {
  Call c("etc::weight_only_linear.out");
  Value* x = c.tensor(DType::kFloat32, {2, 64}, std::vector<double>(128, 0.5));
  Value* w = c.tensor(DType::kUInt8, {4, 32}, std::vector<double>(128, 17));
  Value* s = c.tensor(DType::kFloat32, {4, 2}, std::vector<double>(8, 0.1));
  CHECK(c.run({x, w, s, c.i(32), c.none(), c.none()}, {c.out(DType::kFloat32, {2, 5})}).message() ==
        "etc::weight_only_linear.out: out has shape [2, 5], expected [2, 4]");
  CHECK(c.run({x, w, s, c.i(24), c.none(), c.none()}, {c.out(DType::kFloat32, {2, 4})}).message() ==
        "etc::weight_only_linear.out: group_size: 24 does not divide the 64 input features");
  Value* s3 = c.tensor(DType::kFloat32, {4, 3}, std::vector<double>(12, 0.1));
  CHECK(
      c.run({x, w, s3, c.i(32), c.none(), c.none()}, {c.out(DType::kFloat32, {2, 4})}).message() ==
      "etc::weight_only_linear.out: scale: expected [4, 2] (out features, groups), got [4, 3]");
  Value* z = c.tensor(DType::kInt32, {4, 2}, std::vector<double>(8, 1));
  CHECK(c.run({x, w, s, c.i(32), z, c.none()}, {c.out(DType::kFloat32, {2, 4})}).message() ==
        "etc::weight_only_linear.out: zero_point: expected int8 or float32 (the input's dtype), "
        "got int32");
}

}  // namespace
}  // namespace etc::rt::test

namespace etc::rt::test {
namespace {

// aten::_int_mm: uint8 or int8 [M, K] by int8 [K, N], int32 sums — exact integers, so every
// path (AVX-512 VNNI over B repacked in panels of 64 columns and groups of 4 rows, the portable
// loop) must give the sums computed here, modulo 2^32 as ATen's int32 sums wrap: at every edge
// of the VNNI tiles (rows past 4; tiles of 1 to 4 vectors of 16 columns, the last one partial;
// K past a multiple of 4 by 1, 2 and 3), on several threads, and with B a program constant
// (packed at the first call and kept: a second call on other rows must use it right).
std::vector<double> int_mm_reference(const std::vector<double>& a, const std::vector<double>& b,
                                     int64_t m, int64_t k, int64_t n) {
  std::vector<double> want;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      uint32_t sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += static_cast<uint32_t>(static_cast<int64_t>(a[static_cast<size_t>(i * k + p)])) *
               static_cast<uint32_t>(static_cast<int64_t>(b[static_cast<size_t>(p * n + j)]));
      }
      want.push_back(static_cast<double>(static_cast<int32_t>(sum)));
    }
  }
  return want;
}

TEST_CASE("_int_mm gives the exact integer product on every path") {
  struct Case {
    int64_t m, k, n;
  };
  for (DType a_dtype : {DType::kUInt8, DType::kInt8}) {
    for (const Case& cs : {Case{1, 32, 16}, Case{3, 7, 5}, Case{5, 256, 130}, Case{9, 1, 64},
                           Case{4, 13, 67}, Case{2, 0, 3}, Case{1, 6, 20}, Case{6, 70, 40},
                           Case{8, 9, 50}, Case{3, 4, 100}, Case{2, 10, 178}}) {
      for (kernels::GemmIsa isa : {kernels::GemmIsa::kAuto, kernels::GemmIsa::kPortable}) {
        for (int threads : {1, 3}) {
          for (bool constant_b : {false, true}) {
            IsaScope isa_scope(isa);
            ThreadsScope threads_scope(threads);
            INFO(dtype_name(a_dtype) << " m " << cs.m << " k " << cs.k << " n " << cs.n << " isa "
                                     << static_cast<int>(isa) << " threads " << threads
                                     << " constant B " << constant_b);
            Call c("aten::_int_mm.out");
            if (constant_b) c.keep_state(uint64_t{1} << 1);
            const bool u = a_dtype == DType::kUInt8;
            std::vector<double> b;
            for (int64_t i = 0; i < cs.k * cs.n; ++i)
              b.push_back(static_cast<double>((i * 61 + 128) % 256 - 128));
            Value* bv = c.tensor(DType::kInt8, {cs.k, cs.n}, b);
            // Two calls on other rows and the same B (with a constant B, the packed copy kept).
            for (int call = 0; call < 2; ++call) {
              std::vector<double> a;
              for (int64_t i = 0; i < cs.m * cs.k; ++i) {  // the extremes included
                const int64_t v = (i * 97 + 255 + 31 * call) % 256;
                a.push_back(static_cast<double>(u ? v : v - 128));
              }
              Value* out = c.out(DType::kInt32, {cs.m, cs.n});
              const Status s = c.run({c.tensor(a_dtype, {cs.m, cs.k}, a), bv}, {out});
              INFO(s.to_string() << " call " << call);
              REQUIRE(s.ok());
              CHECK(read(out) == int_mm_reference(a, b, cs.m, cs.k, cs.n));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("_int_mm's sums wrap as ATen's int32 sums do") {
  // 70000 products of 255 by 127 (or 140000 of -128 by -128) pass 2^31: the int32 result
  // wraps to a negative value.
  const int64_t m = 1, n = 17;
  for (DType a_dtype : {DType::kUInt8, DType::kInt8}) {
    const int64_t k = a_dtype == DType::kUInt8 ? 70000 : 140000;
    for (kernels::GemmIsa isa : {kernels::GemmIsa::kAuto, kernels::GemmIsa::kPortable}) {
      IsaScope isa_scope(isa);
      INFO(dtype_name(a_dtype) << " isa " << static_cast<int>(isa));
      Call c("aten::_int_mm.out");
      const std::vector<double> a(static_cast<size_t>(m * k),
                                  a_dtype == DType::kUInt8 ? 255.0 : -128.0);
      std::vector<double> b(static_cast<size_t>(k * n));
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = a_dtype == DType::kUInt8 ? 127.0 : -128.0;
      Value* out = c.out(DType::kInt32, {m, n});
      REQUIRE(c.run({c.tensor(a_dtype, {m, k}, a), c.tensor(DType::kInt8, {k, n}, b)}, {out}).ok());
      const std::vector<double> want = int_mm_reference(a, b, m, k, n);
      CHECK(want[0] < 0);  // wrapped past 2^31
      CHECK(read(out) == want);
    }
  }
}

TEST_CASE("_int_mm's bad calls are errors that say what is wrong") {
  Call c("aten::_int_mm.out");
  Value* a = c.tensor(DType::kUInt8, {2, 8}, std::vector<double>(16, 3));
  Value* b = c.tensor(DType::kInt8, {8, 4}, std::vector<double>(32, -2));
  CHECK(c.run({a, b}, {c.out(DType::kInt32, {2, 5})}).message() ==
        "aten::_int_mm.out: out has shape [2, 5], expected [2, 4]");
  CHECK(c.run({a, b}, {c.out(DType::kFloat32, {2, 4})}).message().find("int32") !=
        std::string::npos);
  Value* f = c.tensor(DType::kFloat32, {2, 8}, std::vector<double>(16, 3));
  CHECK(c.run({f, b}, {c.out(DType::kInt32, {2, 4})}).message() ==
        "aten::_int_mm.out: self has dtype float32, expected uint8 or int8");
  Value* ub = c.tensor(DType::kUInt8, {8, 4}, std::vector<double>(32, 2));
  CHECK(c.run({a, ub}, {c.out(DType::kInt32, {2, 4})}).message() ==
        "aten::_int_mm.out: mat2 has dtype uint8, expected int8");
  Value* b7 = c.tensor(DType::kInt8, {7, 4}, std::vector<double>(28, 1));
  CHECK(c.run({a, b7}, {c.out(DType::kInt32, {2, 4})}).message() ==
        "aten::_int_mm.out: cannot multiply [2, 8] by [7, 4] (inner dimensions differ)");
}

}  // namespace
}  // namespace etc::rt::test
