// Elementwise kernels against naive double references: broadcasting, alpha, mixed dtypes,
// scalar forms, pow, where, unary ops and activations, empty tensors.
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "graph/ops.h"
#include "graph/unary_math.h"
#include "kernels/kernel_test_util.h"
#include "runtime/kernels/kernel_util.h"

namespace etc::rt::test {
namespace {

using BinaryRef = std::function<double(double, double)>;

// out = ref(a, b) with numpy broadcasting, then stored as out_dtype.
std::vector<double> broadcast_ref(const std::vector<double>& a, const Sizes& as,
                                  const std::vector<double>& b, const Sizes& bs,
                                  const Sizes& out_sizes, DType out_dtype, const BinaryRef& f) {
  std::vector<double> out(static_cast<size_t>(numel(out_sizes)));
  for (size_t i = 0; i < out.size(); ++i) {
    Sizes idx = unravel(static_cast<int64_t>(i), out_sizes);
    out[i] = cast_to(out_dtype, f(a[broadcast_index(idx, as)], b[broadcast_index(idx, bs)]));
  }
  return out;
}

struct ShapePair {
  Sizes a, b;
};

const ShapePair kShapes[] = {
    {{2, 3, 4}, {2, 3, 4}},  // no broadcasting
    {{2, 3, 4}, {4}},        // trailing vector
    {{2, 1, 4}, {3, 1}},     // both sides broadcast
    {{1}, {5, 1, 2}},        // lower rank on the left
    {{}, {3}},               // zero-dim
    {{4, 5}, {4, 1}},        // column broadcast
    {{0, 3}, {3}},           // empty
    {{4, 1}, {1, 0}},        // empty after broadcasting
    {{3, 2, 1, 5}, {2, 7, 1}},
};

bool unsigned_range(DType t) {
  return t == DType::kUInt8 || t == DType::kBool;
}

TEST_CASE("round is half to even, as nearbyint, for float and double") {
  for (float x : {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.49999997f, 3.7f, -3.7f, 8388607.5f, 4194304.5f,
                  8388608.0f, 1e10f, -1e10f, 0.0f, -0.0f, 1e-30f}) {
    INFO(x);
    CHECK(std::signbit(unary_math::math::round(x)) == std::signbit(std::nearbyint(x)));
    CHECK(unary_math::math::round(x) == std::nearbyint(x));
  }
  for (double x : {0.5, 2.5, -1.5, 4503599627370495.5, 1e300, -0.3}) {
    INFO(x);
    CHECK(unary_math::math::round(x) == std::nearbyint(x));
  }
  CHECK(std::isnan(unary_math::math::round(std::nanf(""))));
  CHECK(std::isinf(unary_math::math::round(-INFINITY)));
}

TEST_CASE("integer add, sub, mul and neg wrap in two's complement, as ATen's do") {
  // Computed unsigned: no undefined behaviour (UBSan in make test-sanitize checks it).
  const double lo = static_cast<double>(INT64_MIN);
  Call a("aten::add.out");
  Value* big = a.tensor(DType::kInt64, {2}, {9.2e18, -9.2e18});
  Value* out = a.out(DType::kInt64, {2});
  REQUIRE(a.run({big, big, a.i(1)}, {out}).ok());
  const int64_t* o = static_cast<const int64_t*>(out->tensor.data);
  CHECK(o[0] == static_cast<int64_t>(uint64_t{9200000000000000000} * 2));
  CHECK(o[1] == static_cast<int64_t>(uint64_t{0} - uint64_t{9200000000000000000} * 2));
  Call n("aten::neg.out");
  Value* m = n.tensor(DType::kInt64, {1}, {lo});
  Value* no = n.out(DType::kInt64, {1});
  REQUIRE(n.run({m}, {no}).ok());
  CHECK(static_cast<const int64_t*>(no->tensor.data)[0] == INT64_MIN);
  Call mul("aten::mul.out");
  Value* x = mul.tensor(DType::kInt64, {1}, {static_cast<double>(int64_t{1} << 62)});
  Value* mo = mul.out(DType::kInt64, {1});
  REQUIRE(mul.run({x, mul.tensor(DType::kInt64, {1}, {4})}, {mo}).ok());
  CHECK(static_cast<const int64_t*>(mo->tensor.data)[0] == 0);  // 2^64 wraps to 0
}

TEST_CASE("add/sub/mul/div.out broadcast over dtypes") {
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                          DType::kInt32,   DType::kInt64,   DType::kInt8,    DType::kUInt8,
                          DType::kInt16,   DType::kBool};
  struct Op {
    const char* name;
    BinaryRef f;
    bool has_alpha;
  };
  const Op ops[] = {
      {"aten::add.out", [](double x, double y) { return x + y; }, true},
      {"aten::sub.out", [](double x, double y) { return x - y; }, true},
      {"aten::mul.out", [](double x, double y) { return x * y; }, false},
      {"aten::div.out", [](double x, double y) { return x / y; }, false},
  };
  uint32_t seed = 1;
  for (const Op& op : ops) {
    for (DType dt : dtypes) {
      if (dt == DType::kBool && std::string(op.name) == "aten::sub.out") continue;
      for (const ShapePair& sp : kShapes) {
        INFO(op.name << " " << dtype_name(dt) << " " << shape_to_string(sp.a) << " "
                     << shape_to_string(sp.b));
        const bool div = std::string(op.name) == "aten::div.out";
        const DType out_dt = div && !dtype_is_float(dt) ? DType::kFloat32 : dt;
        Call c(op.name);
        const double hi = dtype_is_float(dt) ? 1 : 20;
        const double lo = unsigned_range(dt) ? 0 : -hi;
        Value* a = c.random(dt, sp.a, seed++, lo, hi);
        // Keep divisors away from zero.
        Value* b = div ? c.random(dt, sp.b, seed++, 1, dtype_is_float(dt) ? 2 : 9)
                       : c.random(dt, sp.b, seed++, lo, hi);
        Sizes os = *broadcast_shapes(sp.a, sp.b);
        Value* out = c.out(out_dt, os);
        Status s = op.has_alpha ? c.run({a, b, c.i(1)}, {out}) : c.run({a, b}, {out});
        REQUIRE(s.ok());
        require_close(read(out), broadcast_ref(read(a), sp.a, read(b), sp.b, os, out_dt, op.f),
                      out_dt);
      }
    }
  }
}

TEST_CASE("add and sub apply alpha") {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt32}) {
    for (const char* name : {"aten::add.out", "aten::sub.out", "aten::add.Tensor"}) {
      INFO(name << " " << dtype_name(dt));
      Call c(name);
      Sizes as{3, 4}, bs{4};
      Value* a = c.random(dt, as, 11, -9, 9);
      Value* b = c.random(dt, bs, 12, -9, 9);
      Value* alpha = dtype_is_float(dt) ? c.d(0.5) : c.i(-3);
      const double al = dtype_is_float(dt) ? 0.5 : -3;
      Value* out = c.out(dt, as);
      REQUIRE(c.run({a, b, alpha}, {out}).ok());
      const double sign = std::string(name) == "aten::sub.out" ? -1 : 1;
      require_close(read(out),
                    broadcast_ref(read(a), as, read(b), bs, as, dt,
                                  [&](double x, double y) { return x + sign * al * y; }),
                    dt);
    }
  }
  Call c("aten::add.out");
  Value* a = c.random(DType::kInt32, {2}, 1, -5, 5);
  CHECK(c.run({a, a, c.d(0.5)}, {c.out(DType::kInt32, {2})}).message() ==
        "aten::add.out: alpha 0.500000 must be an integer for an out of dtype int32");
}

TEST_CASE("binary ops convert mixed input dtypes to the out dtype") {
  struct Case {
    DType a, b, out;
  };
  const Case cases[] = {
      {DType::kInt32, DType::kInt64, DType::kInt64},
      {DType::kUInt8, DType::kInt8, DType::kInt16},
      {DType::kFloat16, DType::kFloat32, DType::kFloat32},
      {DType::kBool, DType::kInt32, DType::kInt32},
      {DType::kInt32, DType::kFloat32, DType::kFloat32},
      {DType::kBFloat16, DType::kFloat16, DType::kFloat32},
  };
  for (const Case& k : cases) {
    for (const char* name : {"aten::add.out", "aten::mul.out"}) {
      INFO(name << " " << dtype_name(k.a) << " " << dtype_name(k.b) << " -> " << dtype_name(k.out));
      Call c(name);
      Sizes as{2, 3}, bs{3};
      Value* a = c.random(k.a, as, 21, k.a == DType::kUInt8 ? 0 : -9, 9);
      Value* b = c.random(k.b, bs, 22, -9, 9);
      Value* out = c.out(k.out, as);
      const bool add = std::string(name) == "aten::add.out";
      REQUIRE((add ? c.run({a, b, c.i(1)}, {out}) : c.run({a, b}, {out})).ok());
      require_close(read(out),
                    broadcast_ref(read(a), as, read(b), bs, as, k.out,
                                  [&](double x, double y) { return add ? x + y : x * y; }),
                    k.out);
    }
  }
  // Integer true division gives float32.
  Call c("aten::div.Tensor");
  Value* a = c.tensor(DType::kInt64, {4}, {7, -7, 1, 0});
  Value* b = c.tensor(DType::kInt64, {4}, {2, 2, 3, 5});
  Value* out = c.out(DType::kFloat32, {4});
  REQUIRE(c.run({a, b}, {out}).ok());
  require_close(read(out), {3.5, -3.5, 1.0 / 3, 0}, DType::kFloat32);
  CHECK(c.run({a, b}, {c.out(DType::kInt64, {4})}).message() ==
        "aten::div.Tensor: out has dtype int64, expected a floating-point dtype (div is true "
        "division)");
}

TEST_CASE("scalar forms of add/sub/mul/div") {
  struct Op {
    const char* name;
    bool alpha;
    std::function<double(double, double, double)> f;
  };
  const Op ops[] = {
      {"aten::add.Scalar_out", true, [](double x, double y, double al) { return x + al * y; }},
      {"aten::sub.Scalar_out", true, [](double x, double y, double al) { return x - al * y; }},
      {"aten::mul.Scalar_out", false, [](double x, double y, double) { return x * y; }},
      {"aten::div.Scalar_out", false, [](double x, double y, double) { return x / y; }},
      {"aten::add.Scalar", true, [](double x, double y, double al) { return x + al * y; }},
      {"aten::div.Scalar", false, [](double x, double y, double) { return x / y; }},
  };
  for (const Op& op : ops) {
    const bool div = std::string(op.name).find("div") != std::string::npos;
    for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32,
                     DType::kInt64, DType::kUInt8}) {
      for (bool float_scalar : {false, true}) {
        // An integer tensor with a float scalar computes in float32 (the compiler promoted).
        DType out_dt = (div || float_scalar) && !dtype_is_float(dt) ? DType::kFloat32 : dt;
        INFO(op.name << " " << dtype_name(dt) << (float_scalar ? " float scalar" : ""));
        Call c(op.name);
        Sizes s{5, 3};
        Value* a = c.random(dt, s, 31, dt == DType::kUInt8 ? 0 : -9, 9);
        Value* other = float_scalar ? c.d(2.5) : c.i(3);
        const double y = float_scalar ? 2.5 : 3;
        Value* out = c.out(out_dt, s);
        REQUIRE((op.alpha ? c.run({a, other, c.i(2)}, {out}) : c.run({a, other}, {out})).ok());
        std::vector<double> av = read(a), want(av.size());
        for (size_t i = 0; i < av.size(); ++i)
          want[i] = cast_to(out_dt, op.f(av[i], y, 2));
        require_close(read(out), want, out_dt);
      }
    }
  }
}

TEST_CASE("pow.Tensor_Scalar") {
  for (DType dt : kFloatTypes) {
    for (double e : {2.0, 0.5, 3.0, -1.5, 1.0, 0.0}) {
      INFO(dtype_name(dt) << " ^ " << e);
      Call c("aten::pow.Tensor_Scalar_out");
      Value* a = c.random(dt, {4, 5}, 41, 0.1, 3);
      Value* out = c.out(dt, {4, 5});
      REQUIRE(c.run({a, c.d(e)}, {out}).ok());
      std::vector<double> av = read(a), want(av.size());
      for (size_t i = 0; i < av.size(); ++i)
        want[i] = std::pow(av[i], e);
      Tolerance tol = tolerance_for(dt);
      if (dt == DType::kFloat32) tol.rtol = 1e-5;  // float pow is not correctly rounded
      require_close(read(out), want, tol);
    }
  }
  for (DType dt : {DType::kInt32, DType::kInt64, DType::kUInt8}) {
    Call c("aten::pow.Tensor_Scalar");
    Value* a = c.random(dt, {7}, 42, dt == DType::kUInt8 ? 0 : -6, 6);
    Value* out = c.out(dt, {7});
    REQUIRE(c.run({a, c.i(3)}, {out}).ok());
    std::vector<double> av = read(a), want(av.size());
    for (size_t i = 0; i < av.size(); ++i)
      want[i] = cast_to(dt, av[i] * av[i] * av[i]);
    require_close(read(out), want, dt);
    CHECK(c.run({a, c.i(-1)}, {out}).message() ==
          "aten::pow.Tensor_Scalar: integers to negative integer powers are not allowed "
          "(exponent -1)");
  }
}

TEST_CASE("eq.Scalar and logical_not give bool tensors") {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt32, DType::kBool}) {
    INFO(dtype_name(dt));
    Call c("aten::eq.Scalar_out");
    Value* x = c.random(dt, {4, 6}, 620, dt == DType::kBool ? 0 : -2, dt == DType::kBool ? 1 : 2);
    std::vector<double> xv = read(x);
    if (dtype_is_float(dt)) {  // random floats are never exactly 1: plant some
      for (size_t i = 0; i < xv.size(); i += 3)
        xv[i] = 1;
      x = c.tensor(dt, {4, 6}, xv);
    }
    Value* out = c.out(DType::kBool, {4, 6});
    REQUIRE(c.run({x, c.i(1)}, {out}).ok());
    std::vector<double> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i)
      want[i] = xv[i] == 1 ? 1 : 0;
    require_close(read(out), want, DType::kBool);

    Call n("aten::logical_not.out");
    Value* nout = n.out(DType::kBool, {4, 6});
    REQUIRE(n.run({n.tensor(dt, {4, 6}, xv)}, {nout}).ok());
    for (size_t i = 0; i < xv.size(); ++i)
      want[i] = xv[i] == 0 ? 1 : 0;
    require_close(read(nout), want, DType::kBool);
  }
  // -inf (the masked scores of attention), NaN and a float scalar against integers.
  Call c("aten::eq.Scalar");
  Value* x = c.tensor(DType::kFloat32, {4}, {-INFINITY, NAN, 0, -INFINITY});
  Value* out = c.out(DType::kBool, {4});
  REQUIRE(c.run({x, c.d(-INFINITY)}, {out}).ok());
  require_close(read(out), {1, 0, 0, 1}, DType::kBool);
  Value* ints = c.tensor(DType::kInt64, {3}, {0, 1, 2});
  Value* half = c.out(DType::kBool, {3});
  REQUIRE(c.run({ints, c.d(0.5)}, {half}).ok());
  require_close(read(half), {0, 0, 0}, DType::kBool);
  CHECK(c.run({x, c.d(0)}, {c.out(DType::kFloat32, {4})}).message().find("dtype") !=
        std::string::npos);
  Call n("aten::logical_not.default");
  Value* nout = n.out(DType::kBool, {4});
  REQUIRE(n.run({n.tensor(DType::kFloat32, {4}, {NAN, 0, -0.0, 2})}, {nout}).ok());
  require_close(read(nout), {0, 1, 1, 0}, DType::kBool);
}

TEST_CASE("le.Scalar and logical_and (broadcasting) give bool tensors") {
  Call c("aten::le.Scalar_out");
  Value* x = c.tensor(DType::kInt64, {5}, {-2, -1, 0, 1, 2});
  Value* out = c.out(DType::kBool, {5});
  REQUIRE(c.run({x, c.i(0)}, {out}).ok());
  require_close(read(out), {1, 1, 1, 0, 0}, DType::kBool);
  Value* f = c.tensor(DType::kFloat32, {3}, {0.25, NAN, -INFINITY});
  Value* fout = c.out(DType::kBool, {3});
  REQUIRE(c.run({f, c.d(0.25)}, {fout}).ok());
  require_close(read(fout), {1, 0, 1}, DType::kBool);

  Call a("aten::logical_and.out");
  Value* p = a.tensor(DType::kBool, {2, 1}, {1, 0});
  Value* q = a.tensor(DType::kFloat32, {3}, {0.5, 0, NAN});
  Value* aout = a.out(DType::kBool, {2, 3});
  REQUIRE(a.run({p, q}, {aout}).ok());
  require_close(read(aout), {1, 0, 1, 0, 0, 0}, DType::kBool);
  CHECK(a.run({p, a.tensor(DType::kBool, {4}, {1, 1, 1, 1})}, {a.out(DType::kBool, {2, 4})}).ok());
  CHECK(a.run({a.tensor(DType::kBool, {3}, {1, 1, 1}), a.tensor(DType::kBool, {2}, {1, 1})},
              {a.out(DType::kBool, {3})})
            .message()
            .find("cannot be broadcast") != std::string::npos);
}

TEST_CASE("where.self broadcasts condition, self and other") {
  struct Case {
    Sizes c, a, b;
  };
  const Case cases[] = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},
                        {{2, 1, 4}, {3, 1}, {4}},
                        {{4}, {}, {3, 1}},
                        {{0, 2}, {2}, {1}}};
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool}) {
    for (DType cond_dt : {DType::kBool, DType::kUInt8}) {
      for (const Case& k : cases) {
        INFO(dtype_name(dt) << " cond " << dtype_name(cond_dt) << " " << shape_to_string(k.c));
        Call c("aten::where.self_out");
        Value* cond = c.random(cond_dt, k.c, 51, 0, 1);
        Value* a = c.random(dt, k.a, 52, dt == DType::kBool ? 0 : -9, 9);
        Value* b = c.random(dt, k.b, 53, dt == DType::kBool ? 0 : -9, 9);
        Sizes os = *broadcast_shapes(k.c, *broadcast_shapes(k.a, k.b));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({cond, a, b}, {out}).ok());
        std::vector<double> cv = read(cond), av = read(a), bv = read(b), want(numel(os));
        for (size_t i = 0; i < want.size(); ++i) {
          Sizes idx = unravel(static_cast<int64_t>(i), os);
          want[i] = cv[broadcast_index(idx, k.c)] != 0 ? av[broadcast_index(idx, k.a)]
                                                       : bv[broadcast_index(idx, k.b)];
        }
        require_close(read(out), want, dt);
      }
    }
  }
  Call c("aten::where.self");
  Value* cond = c.random(DType::kFloat32, {2}, 1);
  Value* a = c.random(DType::kFloat32, {2}, 2);
  CHECK(c.run({cond, a, a}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::where.self: condition has dtype float32, expected bool or uint8");
}

double gelu_erf(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double hardsigmoid(double x) {
  return std::min(std::max(x + 3, 0.0), 6.0) / 6;
}

TEST_CASE("float unary ops and activations") {
  struct Op {
    const char* out_name;
    const char* ir_name;
    std::function<double(double)> f;
    double lo, hi;
  };
  const Op ops[] = {
      {"aten::exp.out", "aten::exp.default", [](double x) { return std::exp(x); }, -5, 5},
      {"aten::log.out", "aten::log.default", [](double x) { return std::log(x); }, 0.01, 10},
      {"aten::rsqrt.out", "aten::rsqrt.default", [](double x) { return 1 / std::sqrt(x); }, 0.01,
       10},
      {"aten::sigmoid.out", "aten::sigmoid.default",
       [](double x) { return 1 / (1 + std::exp(-x)); }, -8, 8},
      {"aten::sqrt.out", "aten::sqrt.default", [](double x) { return std::sqrt(x); }, 0, 10},
      {"aten::tanh.out", "aten::tanh.default", [](double x) { return std::tanh(x); }, -4, 4},
      {"aten::erf.out", "aten::erf.default", [](double x) { return std::erf(x); }, -3, 3},
      {nullptr, "aten::hardsigmoid.default", hardsigmoid, -5, 5},
      {nullptr, "aten::hardswish.default", [](double x) { return x * hardsigmoid(x); }, -5, 5},
      {nullptr, "aten::silu.default", [](double x) { return x / (1 + std::exp(-x)); }, -8, 8},
  };
  for (const Op& op : ops) {
    for (const char* name : {op.out_name, op.ir_name}) {
      if (name == nullptr) continue;
      for (DType dt : kFloatTypes) {
        for (const Sizes& s : {Sizes{3, 17}, Sizes{}, Sizes{0, 4}}) {
          INFO(name << " " << dtype_name(dt) << " " << shape_to_string(s));
          Call c(name);
          Value* a = c.random(dt, s, 61, op.lo, op.hi);
          Value* out = c.out(dt, s);
          REQUIRE(c.run({a}, {out}).ok());
          std::vector<double> av = read(a), want(av.size());
          for (size_t i = 0; i < av.size(); ++i)
            want[i] = op.f(av[i]);
          Tolerance tol = tolerance_for(dt);
          if (dt == DType::kFloat32) tol = {1e-5, 1e-6};  // libm float functions: a few ulp
          require_close(read(out), want, tol);
        }
      }
    }
  }
}

TEST_CASE("float unary ops take integer inputs into a float out") {
  Call c("aten::exp.out");
  Value* a = c.tensor(DType::kInt32, {3}, {0, 1, -2});
  Value* out = c.out(DType::kFloat32, {3});
  REQUIRE(c.run({a}, {out}).ok());
  require_close(read(out), {1, std::exp(1.0), std::exp(-2.0)}, DType::kFloat32);
  Call s("aten::silu.default");
  Value* i = s.tensor(DType::kInt32, {1}, {1});
  CHECK(s.run({i}, {s.out(DType::kInt32, {1})}).message() ==
        "aten::silu.default: out has dtype int32, expected a floating-point dtype");
}

TEST_CASE("gelu, none and tanh approximations") {
  for (const char* name : {"aten::gelu.out", "aten::gelu.default"}) {
    for (DType dt : kFloatTypes) {
      for (const char* approx : {"none", "tanh"}) {
        INFO(name << " " << dtype_name(dt) << " " << approx);
        Call c(name);
        Value* a = c.random(dt, {64}, 71, -5, 5);
        Value* out = c.out(dt, {64});
        REQUIRE(c.run({a, c.str(approx)}, {out}).ok());
        std::vector<double> av = read(a), want(av.size());
        for (size_t i = 0; i < av.size(); ++i)
          want[i] = std::string(approx) == "none" ? gelu_erf(av[i]) : gelu_tanh(av[i]);
        Tolerance tol = tolerance_for(dt);
        if (dt == DType::kFloat32) tol = {1e-5, 1e-6};
        require_close(read(out), want, tol);
      }
    }
  }
  Call c("aten::gelu.out");
  Value* a = c.random(DType::kFloat32, {2}, 1);
  CHECK(c.run({a, c.str("fast")}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::gelu.out: approximate must be 'none' or 'tanh', got 'fast'");
}

TEST_CASE("float gelu, sigmoid and silu on every vector build") {
  // Each loop is built for AVX-512, AVX2/FMA and any x86-64: the first two give the same bits
  // (the same fused multiply-adds), all three stay within a few ulp of libm. NaN stays NaN;
  // at +inf: gelu inf (PyTorch 2's vectorised erf gives NaN there), sigmoid 1, silu inf; at
  // -inf: gelu NaN (-inf x 0, as PyTorch), sigmoid 0, silu NaN (as PyTorch). 1001 values
  // (vector tails) over [-12, 12].
  struct Op {
    const char* name;
    std::function<double(double)> f;
    float at_inf;
    bool nan_at_minus_inf;
  };
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const Op ops[] = {
      {"aten::gelu.out", gelu_erf, kInf, true},
      {"aten::sigmoid.out", [](double x) { return 1 / (1 + std::exp(-x)); }, 1.0f, false},
      {"aten::silu.default", [](double x) { return x / (1 + std::exp(-x)); }, kInf, true}};
  for (const Op& op : ops) {
    INFO(op.name);
    Call c(op.name);
    Value* a = c.random(DType::kFloat32, {1001}, 73, -12, 12);
    auto* av = static_cast<float*>(a->tensor.data);
    av[0] = std::numeric_limits<float>::quiet_NaN();
    av[1] = kInf;
    av[2] = -kInf;
    std::vector<std::vector<float>> got;
    for (kernels::GemmIsa isa :
         {kernels::GemmIsa::kAuto, kernels::GemmIsa::kAvx2, kernels::GemmIsa::kPortable}) {
      INFO("isa " << static_cast<int>(isa));
      const IsaScope scope(isa);
      Value* out = c.out(DType::kFloat32, {1001});
      const bool gelu = std::string(op.name) == "aten::gelu.out";
      REQUIRE((gelu ? c.run({a, c.str("none")}, {out}) : c.run({a}, {out})).ok());
      const auto* ov = static_cast<const float*>(out->tensor.data);
      got.emplace_back(ov, ov + 1001);
      CHECK(std::isnan(ov[0]));
      CHECK(ov[1] == op.at_inf);
      CHECK(std::isnan(ov[2]) == op.nan_at_minus_inf);
      if (!op.nan_at_minus_inf) CHECK(ov[2] == 0.0f);
      for (size_t i = 3; i < 1001; ++i) {
        const double want = op.f(av[i]);
        REQUIRE(std::fabs(ov[i] - want) <= 1e-6 + 1e-5 * std::fabs(want));
      }
    }
    // From index 1: a NaN's sign bit is not the function's (it follows the instruction order
    // the compiler chose).
    CHECK(std::memcmp(got[0].data() + 1, got[1].data() + 1, 1000 * sizeof(float)) == 0);
  }
}

TEST_CASE("neg, relu, clamp and hardtanh over numeric dtypes") {
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                          DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64};
  for (DType dt : dtypes) {
    const double r = dtype_is_float(dt) ? 3 : 100;
    auto check = [&](const char* name, std::initializer_list<Value*> extra,
                     const std::function<double(double)>& f, Call& c) {
      INFO(name << " " << dtype_name(dt));
      Value* a = c.random(dt, {6, 7}, 81, -r, r);
      Value* out = c.out(dt, {6, 7});
      std::vector<Value*> inputs{a};
      inputs.insert(inputs.end(), extra.begin(), extra.end());
      std::vector<Value*> args = inputs;
      args.push_back(out);
      args.push_back(out);
      REQUIRE(c.run_raw(args).ok());
      std::vector<double> av = read(a), want(av.size());
      for (size_t i = 0; i < av.size(); ++i)
        want[i] = cast_to(dt, f(av[i]));
      require_close(read(out), want, dt);
    };
    const double lo = dtype_is_float(dt) ? -1.5 : -40, hi = dtype_is_float(dt) ? 0.75 : 25;
    {
      Call c("aten::neg.out");
      check(
          "neg", {}, [](double x) { return -x; }, c);
    }
    {
      Call c("aten::relu.default");
      check(
          "relu", {}, [](double x) { return x < 0 ? 0 : x; }, c);
    }
    {
      Call c("aten::clamp.out");
      Value* vlo = dtype_is_float(dt) ? c.d(lo) : c.i(static_cast<int64_t>(lo));
      Value* vhi = dtype_is_float(dt) ? c.d(hi) : c.i(static_cast<int64_t>(hi));
      check(
          "clamp both", {vlo, vhi}, [&](double x) { return std::min(std::max(x, lo), hi); }, c);
      check(
          "clamp min", {vlo, c.none()}, [&](double x) { return std::max(x, lo); }, c);
      check(
          "clamp max", {c.none(), vhi}, [&](double x) { return std::min(x, hi); }, c);
    }
    {
      Call c("aten::hardtanh.out");
      check(
          "hardtanh", {c.i(-1), c.i(1)}, [&](double x) { return std::min(std::max(x, -1.0), 1.0); },
          c);
    }
  }
  Call c("aten::clamp.default");
  Value* a = c.random(DType::kFloat32, {2}, 1);
  CHECK(c.run({a, c.none(), c.none()}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::clamp.default: at least one of 'min' or 'max' must not be None");
  Call n("aten::neg.out");
  Value* bv = n.random(DType::kBool, {2}, 1, 0, 1);
  CHECK(n.run({bv}, {n.out(DType::kBool, {2})}).message() ==
        "aten::neg.out: out has dtype bool, expected a numeric dtype (not bool)");
}

TEST_CASE("relu and clamp keep NaN and pass infinities through unbounded sides") {
  const double nan = std::nan(""), inf = INFINITY;
  Call c("aten::relu.out");
  Value* a = c.tensor(DType::kFloat32, {4}, {nan, -inf, inf, -0.5});
  Value* out = c.out(DType::kFloat32, {4});
  REQUIRE(c.run({a}, {out}).ok());
  require_close(read(out), {nan, 0, inf, 0}, DType::kFloat32);
  Call k("aten::clamp.out");
  Value* o2 = k.out(DType::kFloat32, {4});
  REQUIRE(k.run({a, k.i(-1), k.none()}, {o2}).ok());
  require_close(read(o2), {nan, -1, inf, -0.5}, DType::kFloat32);
}

TEST_CASE("elementwise shape errors") {
  Call c("aten::add.out");
  Value* a = c.random(DType::kFloat32, {2, 3}, 1);
  Value* b = c.random(DType::kFloat32, {4}, 2);
  CHECK(c.run({a, b, c.i(1)}, {c.out(DType::kFloat32, {2, 3})}).message() ==
        "aten::add.out: self [2, 3] and other [4] cannot be broadcast together");
  Value* d = c.random(DType::kFloat32, {3}, 2);
  CHECK(c.run({a, d, c.i(1)}, {c.out(DType::kFloat32, {3, 2})}).message() ==
        "aten::add.out: out has shape [3, 2], expected [2, 3]");
  Call s("aten::sub.out");
  Value* bb = s.random(DType::kBool, {2}, 1, 0, 1);
  CHECK(s.run({bb, bb, s.i(1)}, {s.out(DType::kBool, {2})}).message() ==
        "aten::sub.out: subtraction of bool tensors is not supported (out has dtype bool)");
}

TEST_CASE("a large contiguous float32 add matches the reference") {
  // Long enough for the vectorised main loop and its remainder.
  Call c("aten::add.out");
  const Sizes s{1027};
  Value* a = c.random(DType::kFloat32, s, 91);
  Value* b = c.random(DType::kFloat32, s, 92);
  Value* out = c.out(DType::kFloat32, s);
  REQUIRE(c.run({a, b, c.d(1.5)}, {out}).ok());
  require_close(read(out),
                broadcast_ref(read(a), s, read(b), s, s, DType::kFloat32,
                              [](double x, double y) { return x + 1.5 * y; }),
                DType::kFloat32);
}

}  // namespace
}  // namespace etc::rt::test

namespace etc::rt::test {
namespace {

TEST_CASE("fast_erff within 5e-7 (absolute) of libm") {
  double erf_worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.00071f) {
    erf_worst = std::max(erf_worst, std::fabs(static_cast<double>(kernels::fast_erff(x)) -
                                              std::erf(static_cast<double>(x))));
  }
  CHECK(erf_worst <= 5e-7);
  CHECK(kernels::fast_erff(0.0f) == 0.0f);
  CHECK(kernels::fast_erff(10.0f) == 1.0f);
  CHECK(kernels::fast_erff(-10.0f) == -1.0f);
  CHECK(kernels::fast_erff(-0.5f) == -kernels::fast_erff(0.5f));  // odd
}

TEST_CASE("fast_exp_nonpositive within 2e-7 (relative) of exp in double for z <= 0") {
  // Every 97th float in [-87.33, 0] (a softmax's x - max; a sigmoid's -|x|): about 11 million.
  double worst = 0;
  float worst_at = 0;
  const float lo = -87.33f;
  uint32_t lo_bits, zero_bits = 0x80000000u;  // -0
  std::memcpy(&lo_bits, &lo, 4);
  for (uint32_t b = zero_bits; b <= lo_bits; b += 97) {
    float z;
    std::memcpy(&z, &b, 4);
    const double want = std::exp(static_cast<double>(z));
    const double err =
        std::fabs(static_cast<double>(kernels::fast_exp_nonpositive(z)) - want) / want;
    if (err > worst) {
      worst = err;
      worst_at = z;
    }
  }
  INFO("worst at " << worst_at);
  CHECK(worst <= 2e-7);
  CHECK(kernels::fast_exp_nonpositive(0.0f) == 1.0f);
  CHECK(kernels::fast_exp_nonpositive(-0.0f) == 1.0f);
  CHECK(kernels::fast_exp_nonpositive(-87.4f) == 0.0f);  // below FLT_MIN: no denormals
  CHECK(kernels::fast_exp_nonpositive(-1000.0f) == 0.0f);
  CHECK(kernels::fast_exp_nonpositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(kernels::fast_exp_nonpositive(-87.3f) >= std::numeric_limits<float>::min());
  CHECK(std::isnan(kernels::fast_exp_nonpositive(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("fast_sigmoidf within 1.8e-7 (relative) of the sigmoid in double, and monotone") {
  // Every 389th float with |x| < 200 whose sigmoid is a normal float (about 11 million).
  double worst = 0;
  float worst_at = 0;
  for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 389) {
    const auto bits = static_cast<uint32_t>(b);
    float x;
    std::memcpy(&x, &bits, 4);
    if (!(std::fabs(x) < 200.0f)) continue;
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    if (want < std::numeric_limits<float>::min()) {
      CHECK(kernels::fast_sigmoidf(x) == 0.0f);  // no denormal results
      continue;
    }
    const double err = std::fabs(static_cast<double>(kernels::fast_sigmoidf(x)) - want) / want;
    if (err > worst) {
      worst = err;
      worst_at = x;
    }
  }
  INFO("worst at " << worst_at);
  CHECK(worst <= 1.8e-7);
  // Never decreasing from one float to the next, over [-90, 20] in steps of 2^-10 or finer.
  float prev = 0;
  for (float x = -90.0f; x <= 20.0f; x = std::nextafter(x + 0.0009765625f, 100.0f)) {
    const float y = kernels::fast_sigmoidf(x);
    REQUIRE(y >= prev);
    prev = y;
  }
  constexpr float kInf = std::numeric_limits<float>::infinity();
  CHECK(kernels::fast_sigmoidf(0.0f) == 0.5f);
  CHECK(kernels::fast_sigmoidf(-0.0f) == 0.5f);
  CHECK(kernels::fast_sigmoidf(kInf) == 1.0f);
  CHECK(kernels::fast_sigmoidf(-kInf) == 0.0f);
  CHECK(kernels::fast_sigmoidf(20.0f) == 1.0f);
  CHECK(kernels::fast_sigmoidf(-87.4f) == 0.0f);
  CHECK(kernels::fast_sigmoidf(-87.3f) > 0.0f);
  CHECK(std::isnan(kernels::fast_sigmoidf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(kernels::fast_sigmoidf(-std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("the AVX-512 builds fuse the multiply-adds of their vector tails too") {
  // GCC finishes a 16-wide loop with 8-wide vectors, which fuse multiply-adds only where the
  // build enables FMA's own instructions as well as AVX-512's: without, sigmoid(-3.8356...)
  // came out one ulp off in the tail (element 70 of 77), unlike the body and the AVX2 build.
  // Every length to 80, each element that value: the bits of the AVX2 build everywhere.
  const float x = -0x1.eaf4c8p+1f;  // fused and unfused roundings differ here
  std::vector<float> in(80, x), want(80), got(80);
  {
    const IsaScope scope(kernels::GemmIsa::kAvx2);
    kernels::sigmoid_floats(in.data(), want.data(), 80);
  }
  const IsaScope scope(kernels::GemmIsa::kAuto);
  if (kernels::gemm_float_kernel() != kernels::FloatKernel::kAvx512) {
    WARN("no AVX-512 on this CPU (or $ETC_MAX_ISA caps it): nothing to compare");
    return;
  }
  for (int64_t n = 1; n <= 80; ++n) {
    INFO("length " << n);
    std::fill(got.begin(), got.end(), 0.0f);
    kernels::sigmoid_floats(in.data(), got.data(), n);
    REQUIRE(std::memcmp(got.data(), want.data(), static_cast<size_t>(n) * sizeof(float)) == 0);
  }
}

// check_arith, check_div_mode: the errors the CUDA kernels give too.
TEST_CASE("div: true division into an integer out, an unknown rounding mode") {
  Call c("aten::div.out");
  Value* a = c.random(DType::kInt32, {2}, 1, 1, 5);
  CHECK(c.run({a, a}, {c.out(DType::kInt32, {2})}).message() ==
        "aten::div.out: out has dtype int32, expected a floating-point dtype (div is true "
        "division)");
  Call m("aten::div.out_mode");
  Value* x = m.random(DType::kFloat32, {2}, 2);
  CHECK(m.run({x, x, m.str("round")}, {m.out(DType::kFloat32, {2})}).message() ==
        "aten::div.out_mode: rounding_mode must be None, 'trunc' or 'floor', got 'round'");
  Value* o = m.out(DType::kFloat32, {2});
  REQUIRE(m.run({x, x, m.str("floor")}, {o}).ok());
  CHECK(read(o) == std::vector<double>{1, 1});
}

}  // namespace
}  // namespace etc::rt::test
