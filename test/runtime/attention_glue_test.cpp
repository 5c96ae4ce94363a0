// The load planner's fusions of an attention step's glue end to end. Copies into a bmm's right
// operand (copied_operand.h): a decoder's attention step makes K^T and V from its KV cache with
// expand_copy (grouped-query heads), _to_copy (a bf16/fp16 cache widened) and transpose_copy
// (K^T); the bmm reads the cache through strides instead. PyTorch's safe softmax
// (safe_softmax.h): the softmax writes the where's out, zeros in fully masked rows. Both with
// the unfused method's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/fusion_test_util.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

// attention(q, K, V) without the softmax: y = (q @ K^T) @ V per head, K and V both the cache
// (x rounded to `cache`, or x itself for float32) [1, 2, s, d], each repeated for `rep`
// query heads. With `k_read`, the widened K (or the expanded one, for float32) is also read
// by another step: it must be written, and only the transpose joins the bmm.
struct Attention {
  DType cache = DType::kBFloat16;
  int64_t s = 40, d = 24, rep = 2;
  bool k_read = false;
  int64_t rows = 1;  // query rows: 1 for a decode step, more for a prefill
};

Graph attention(const Attention& c) {
  const int64_t hk = 2, b = hk * c.rep;
  Graph g;
  ValueId x = g.add_input("x", spec({1, hk, c.s, c.d}));
  const bool wide = c.cache != DType::kFloat32;
  ValueId kv = wide ? node(g, OpKind::ToCopy, "kv", {{"self", x}, {"dtype", c.cache}},
                           TensorSpec::make(c.cache, {1, hk, c.s, c.d}))
                    : x;
  // One head's matrices [b, s, d] in float32, as the program makes them from the cache.
  auto heads = [&](const std::string& name) {
    ValueId e = kv;
    if (c.rep > 1) {
      ValueId v5 = node(g, OpKind::View, name + "_v5",
                        {{"self", kv}, {"size", std::vector<int64_t>{1, hk, 1, c.s, c.d}}},
                        TensorSpec::make(c.cache, {1, hk, 1, c.s, c.d}));
      ValueId ex = node(g, OpKind::Expand, name + "_ex",
                        {{"self", v5}, {"size", std::vector<int64_t>{1, hk, c.rep, c.s, c.d}}},
                        TensorSpec::make(c.cache, {1, hk, c.rep, c.s, c.d}));
      e = node(g, OpKind::View, name + "_v4",
               {{"self", ex}, {"size", std::vector<int64_t>{1, b, c.s, c.d}}},
               TensorSpec::make(c.cache, {1, b, c.s, c.d}));
    }
    if (wide) {
      e = node(g, OpKind::ToCopy, name + "_f32", {{"self", e}, {"dtype", DType::kFloat32}},
               spec({1, b, c.s, c.d}));
    }
    return e;
  };
  ValueId k4 = heads("k");
  ValueId k3 =
      node(g, OpKind::View, "k3", {{"self", k4}, {"size", std::vector<int64_t>{b, c.s, c.d}}},
           spec({b, c.s, c.d}));
  ValueId kt =
      node(g, OpKind::TransposeInt, "kt",
           {{"self", k3}, {"dim0", int64_t{1}}, {"dim1", int64_t{2}}}, spec({b, c.d, c.s}));
  ValueId q = constant(g, "q", {b, c.rows, c.d}, 71);
  ValueId scores =
      node(g, OpKind::Bmm, "scores", {{"self", q}, {"mat2", kt}}, spec({b, c.rows, c.s}));
  ValueId v4 = heads("v");
  ValueId v3 =
      node(g, OpKind::View, "v3", {{"self", v4}, {"size", std::vector<int64_t>{b, c.s, c.d}}},
           spec({b, c.s, c.d}));
  ValueId y = node(g, OpKind::Bmm, "y", {{"self", scores}, {"mat2", v3}}, spec({b, c.rows, c.d}));
  if (c.k_read) {
    // K's float32 values also summed into the output: the copy stays. The cache is read again
    // at the end too, so that no step's out lies over it (as a decoder's cache, which no
    // other tensor shares).
    ValueId k_sum = node(g, OpKind::SumDimIntList, "k_sum",
                         {{"self", k3}, {"dim", std::vector<int64_t>{1}}, {"keepdim", true}},
                         spec({b, 1, c.d}));
    ValueId kv_f32 = wide
                         ? node(g, OpKind::ToCopy, "kv_f32",
                                {{"self", kv}, {"dtype", DType::kFloat32}}, spec({1, hk, c.s, c.d}))
                         : kv;
    ValueId kv_sum =
        node(g, OpKind::SumDimIntList, "kv_sum",
             {{"self", kv_f32}, {"dim", std::vector<int64_t>{1, 2}}, {"keepdim", false}},
             spec({1, c.d}));
    y = node(g, OpKind::AddTensor, "y_k", {{"self", y}, {"other", k_sum}}, spec({b, c.rows, c.d}));
    y = node(g, OpKind::AddTensor, "y_kv", {{"self", y}, {"other", kv_sum}},
             spec({b, c.rows, c.d}));
  }
  g.set_outputs({y});
  return g;
}

// The value the cache holds for x[i] = 2 sin(i).
double cached(DType dt, int64_t i) {
  const float v = std::sin(static_cast<float>(i)) * 2;
  if (dt == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(v));
  if (dt == DType::kFloat16) return half_to_float(float_to_half(v));
  return v;
}

TEST_CASE("a bmm reads K^T and V from the KV cache instead of their copies, same bits") {
  // Decode steps (one query row), and prefills (several rows, K over more than one of the
  // GEMM's K blocks): the packed paths.
  const Attention cases[] = {{DType::kBFloat16, 40, 24, 2},
                             {DType::kFloat16, 40, 24, 2},
                             {DType::kFloat32, 40, 24, 2},
                             {DType::kBFloat16, 130, 64, 4},
                             {DType::kBFloat16, 33, 17, 1},
                             {DType::kFloat32, 130, 64, 1},
                             {DType::kBFloat16, 300, 272, 2, false, 5},
                             {DType::kFloat32, 300, 272, 1, false, 3}};
  for (const Attention& c : cases) {
    INFO(dtype_name(c.cache) << " s " << c.s << " d " << c.d << " rep " << c.rep << " rows "
                             << c.rows);
    Graph g = attention(c);
    const std::span<const uint8_t> qb = g.value(*g.find_value("q")).spec.constant.bytes();
    std::vector<float> q(qb.size() / 4);
    std::memcpy(q.data(), qb.data(), qb.size());
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(2 * c.s * c.d);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    // The copies joined the products: none of them runs.
    const std::string widen = c.cache != DType::kFloat32 ? " + aten::_to_copy.out" : "";
    const std::string expand = c.rep > 1 ? " + aten::expand_copy.out" : "";
    std::string v_row = "aten::bmm.out";
    v_row += expand;
    v_row += widen;
    const std::string k_row = v_row + " + aten::transpose_copy.int_out";
    const std::vector<std::string> names = rows(fused.profile);
    CHECK(std::count(names.begin(), names.end(), k_row) == 1);
    CHECK(std::count(names.begin(), names.end(), v_row) == 1);
    for (const char* copy :
         {"aten::expand_copy.out", "aten::transpose_copy.int_out", "aten::_to_copy.out"}) {
      const bool cache_cast =
          std::string(copy) == "aten::_to_copy.out" && c.cache != DType::kFloat32;
      CHECK(std::count(names.begin(), names.end(), copy) == (cache_cast ? 1 : 0));
    }
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
    // y[h, r, e] = sum_j (sum_t q[h, r, t] K[j, t]) V[j, e], K = V = the cache's head h / rep.
    const int64_t b = 2 * c.rep;
    double worst = 0, largest = 0;
    for (int64_t h = 0; h < b; ++h) {
      const int64_t base = (h / c.rep) * c.s * c.d;
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t e = 0; e < c.d; ++e) {
          double want = 0;
          for (int64_t j = 0; j < c.s; ++j) {
            double score = 0;
            for (int64_t t = 0; t < c.d; ++t) {
              score += q[static_cast<size_t>((h * c.rows + r) * c.d + t)] *
                       cached(c.cache, base + j * c.d + t);
            }
            want += score * cached(c.cache, base + j * c.d + e);
          }
          largest = std::max(largest, std::abs(want));
          const size_t at = static_cast<size_t>((h * c.rows + r) * c.d + e);
          worst = std::max(worst, std::abs(want - fused.y[at]));
        }
      }
    }
    CHECK(worst <= 1e-5 * largest);
  }
}

TEST_CASE("random attention shapes: the fused copies give the unfused bits") {
  // Sizes down to 1 (a cache of one row, a head of one value), several query rows, every
  // dtype, grouped heads or not, the copy also read elsewhere or not: whatever the planner
  // takes into the bmm, the bytes must be the program's.
  std::mt19937 rng(2026);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const DType dtypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};
  for (int trial = 0; trial < 40; ++trial) {
    Attention c;
    c.cache = dtypes[pick(0, 2)];
    c.s = pick(1, 70);
    c.d = pick(1, 40);
    c.rep = pick(1, 3);
    c.rows = pick(1, 6);
    c.k_read = pick(0, 3) == 0;
    INFO("trial " << trial << ": " << dtype_name(c.cache) << " s " << c.s << " d " << c.d << " rep "
                  << c.rep << " rows " << c.rows << " k_read " << c.k_read);
    Graph g = attention(c);
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(2 * c.s * c.d);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
}

TEST_CASE("a copy another step also reads is made, and only the copies after it join the bmm") {
  for (const DType dt : {DType::kBFloat16, DType::kFloat32}) {
    INFO(dtype_name(dt));
    Attention c;
    c.cache = dt;
    c.k_read = true;
    Graph g = attention(c);
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(2 * c.s * c.d);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    const std::vector<std::string> names = rows(fused.profile);
    // K's last shared copy (the widening, or the expand for float32) runs; the transpose
    // after it joins its bmm; V's copies all join theirs.
    CHECK(std::count(names.begin(), names.end(), "aten::bmm.out + aten::transpose_copy.int_out") ==
          1);
    const std::string v_row = dt == DType::kFloat32
                                  ? "aten::bmm.out + aten::expand_copy.out"
                                  : "aten::bmm.out + aten::expand_copy.out + aten::_to_copy.out";
    CHECK(std::count(names.begin(), names.end(), v_row) == 1);
    CHECK(std::count(names.begin(), names.end(), "aten::expand_copy.out") == 1);
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
}

TEST_CASE("an expand within the matrices, or a transpose of other dims, stays a copy") {
  // K [2, s, 1] expanded to [2, s, d] (each row one value repeated): the transpose joins the
  // bmm, reading the expanded copy. V, the same copy read as [s, 2, d] with its dims 0 and 1
  // swapped: no matrix of the bmm's operand is one of the source's.
  const int64_t s = 24, d = 16;
  Graph g;
  ValueId x = g.add_input("x", spec({2, s, 1}));
  ValueId ex = node(g, OpKind::Expand, "ex", {{"self", x}, {"size", std::vector<int64_t>{2, s, d}}},
                    spec({2, s, d}));
  ValueId kt = node(g, OpKind::TransposeInt, "kt",
                    {{"self", ex}, {"dim0", int64_t{1}}, {"dim1", int64_t{2}}}, spec({2, d, s}));
  ValueId q = constant(g, "q", {2, 1, d}, 72);
  ValueId scores = node(g, OpKind::Bmm, "scores", {{"self", q}, {"mat2", kt}}, spec({2, 1, s}));
  ValueId w = node(g, OpKind::View, "w", {{"self", ex}, {"size", std::vector<int64_t>{s, 2, d}}},
                   spec({s, 2, d}));
  ValueId vt = node(g, OpKind::TransposeInt, "vt",
                    {{"self", w}, {"dim0", int64_t{0}}, {"dim1", int64_t{1}}}, spec({2, s, d}));
  ValueId y = node(g, OpKind::Bmm, "y", {{"self", scores}, {"mat2", vt}}, spec({2, 1, d}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, static_cast<size_t>(2 * s)), plain = run(f, false, 2 * s);
  const std::vector<std::string> names = rows(fused.profile);
  CHECK(std::count(names.begin(), names.end(), "aten::bmm.out + aten::transpose_copy.int_out") ==
        1);
  CHECK(std::count(names.begin(), names.end(), "aten::expand_copy.out") == 1);
  CHECK(std::count(names.begin(), names.end(), "aten::transpose_copy.int_out") == 1);
  CHECK(std::count(names.begin(), names.end(), "aten::bmm.out") == 1);
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

// softmax(s) over the last dim as torch.export writes _safe_softmax: eq(s, -inf),
// logical_not, any(-1, keepdim), where(any, softmax, 0). s = x + mask, the mask's rows of
// [rows, len] -inf where `masked(row, col)`. With `reread`, the any's out is read again after
// the where (it must be computed). With `planned`, the where's out is read by one more step
// (planned memory, not the caller's).
struct SafeSoftmaxGraph {
  int64_t rows = 6, len = 37;
  bool reread = false, planned = false;
};

Graph safe_softmax(const SafeSoftmaxGraph& c, const std::function<bool(int64_t, int64_t)>& masked) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, c.rows, c.len}));
  const float inf = std::numeric_limits<float>::infinity();
  ValueId mask = constant_of(g, "mask", DType::kFloat32, {1, c.rows, c.len},
                             [&](int64_t i) { return masked(i / c.len, i % c.len) ? -inf : 0.0f; });
  ValueId s =
      node(g, OpKind::AddTensor, "s", {{"self", x}, {"other", mask}}, spec({1, c.rows, c.len}));
  ValueId sm =
      node(g, OpKind::Softmax, "sm", {{"self", s}, {"dim", int64_t{-1}}, {"half_to_float", false}},
           spec({1, c.rows, c.len}));
  const auto bools = [](std::vector<int64_t> sizes) {
    return TensorSpec::make(DType::kBool, std::move(sizes));
  };
  ValueId eq = node(g, OpKind::EqScalar, "eq",
                    {{"self", s}, {"other", Scalar{-std::numeric_limits<double>::infinity()}}},
                    bools({1, c.rows, c.len}));
  ValueId live = node(g, OpKind::LogicalNot, "live", {{"self", eq}}, bools({1, c.rows, c.len}));
  ValueId any =
      node(g, OpKind::AnyDim, "any", {{"self", live}, {"dim", int64_t{-1}}, {"keepdim", true}},
           bools({1, c.rows, 1}));
  ValueId zero = constant_of(g, "zero", DType::kFloat32, {}, [](int64_t) { return 0.0f; });
  ValueId y = node(g, OpKind::WhereSelf, "y", {{"condition", any}, {"self", sm}, {"other", zero}},
                   spec({1, c.rows, c.len}));
  if (c.planned) {
    y = node(g, OpKind::MulTensor, "y2", {{"self", y}, {"other", y}}, spec({1, c.rows, c.len}));
  }
  if (c.reread) {
    // The any's out read again after the where (which it follows): a second where.
    ValueId half = constant_of(g, "half", DType::kFloat32, {}, [](int64_t) { return 0.5f; });
    y = node(g, OpKind::WhereSelf, "y3", {{"condition", any}, {"self", y}, {"other", half}},
             spec({1, c.rows, c.len}));
  }
  g.set_outputs({y});
  return g;
}

TEST_CASE("PyTorch's safe softmax runs as one kernel, zeros in fully masked rows, same bits") {
  // Rows 1 and 4 fully masked, row 2 all but its last position, row 3 every other one.
  auto masked = [](int64_t r, int64_t c) {
    return r == 1 || r == 4 || (r == 2 && c != 36) || (r == 3 && c % 2 == 1);
  };
  for (const bool planned : {false, true}) {
    INFO("planned " << planned);
    SafeSoftmaxGraph c;
    c.planned = planned;
    Graph g = safe_softmax(c, masked);
    const pte::File f = export_graph(g);
    const size_t numel = static_cast<size_t>(c.rows * c.len);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    const std::vector<std::string> names = rows(fused.profile);
    CHECK(std::count(names.begin(), names.end(),
                     "aten::_softmax.out + aten::eq.Scalar_out + aten::logical_not.out + "
                     "aten::any.out + aten::where.self_out") == 1);
    for (const char* step : {"aten::eq.Scalar_out", "aten::any.out", "aten::where.self_out"})
      CHECK(std::count(names.begin(), names.end(), step) == 0);
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
    // What it computes: zeros in the masked rows, softmax over the live positions elsewhere.
    for (int64_t r = 0; r < c.rows; ++r) {
      INFO("row " << r);
      double total = 0;
      for (int64_t k = 0; k < c.len; ++k) {
        double v = fused.y[static_cast<size_t>(r * c.len + k)];
        if (planned) v = std::sqrt(v);
        total += v;
        if (masked(r, k)) CHECK(v == 0.0);
      }
      if (r == 1 || r == 4) {
        CHECK(total == 0.0);
      } else {
        CHECK(std::abs(total - 1.0) < 1e-5);
      }
    }
  }
}

TEST_CASE("a safe softmax whose mask another step reads keeps its steps") {
  SafeSoftmaxGraph c;
  c.reread = true;
  Graph g = safe_softmax(c, [](int64_t r, int64_t) { return r == 2; });
  const pte::File f = export_graph(g);
  const size_t numel = static_cast<size_t>(c.rows * c.len);
  const Run fused = run(f, true, numel), plain = run(f, false, numel);
  const std::vector<std::string> names = rows(fused.profile);
  CHECK(std::count(names.begin(), names.end(), "aten::_softmax.out") == 1);
  CHECK(std::count(names.begin(), names.end(), "aten::any.out") == 1);
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

}  // namespace
}  // namespace etc
