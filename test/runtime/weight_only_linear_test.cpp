// etc::weight_only_linear end to end: the export makes one op of a CUDA delegate's
// weight-only chain (passes/fuse_weight_only.h), and the CPU runtime - which runs a CUDA
// program's delegates with the CPU kernels where no GPU is - gives the chain's bits for it.
// The CUDA kernel is checked against this CPU kernel by the device check's op cases
// (test/cuda/op_cases.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/fusion_test_util.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

// The default pipeline without fuse-weight-only: the chain's steps run as they are.
std::string unfused_pipeline() {
  std::string p = kDefaultExportPipeline;
  const std::string pass = "fuse-weight-only,";
  p.erase(p.find(pass), pass.size());
  return p;
}

enum class Product { kLinear, kMm, kAddmm, kBmm };
enum class Zero { kNone, kSameDType, kInt8 };

// torchao's chain as its programs hold it: q (int8 constant of values in [-8, 7] for a 4-bit
// weight, which pack-int4-weights stores two a byte) -> _to_copy -> sub zero point -> mul
// scale -> view [N, K] (grouped) -> the product, x [3, K].
struct Layer {
  DType dt = DType::kFloat32;
  Product product = Product::kLinear;
  bool int4 = true;
  Zero zero = Zero::kSameDType;
  int64_t n = 48, k = 256, group = 32;  // group == k: one group a row, rank-2 chain
  bool bias = false;
  bool weight_read_elsewhere = false;  // the dequantized weight is an output too
  int64_t expand_n = 0;  // kBmm: the expand's last dim (0: n), > n broadcasting an n of 1
};

TensorSpec spec_of(DType dt, std::vector<int64_t> sizes) {
  return TensorSpec::make(dt, std::move(sizes));
}

Graph layer_graph(const Layer& c) {
  Graph g;
  const bool grouped = c.group != c.k;
  const std::vector<int64_t> shape =
      grouped ? std::vector<int64_t>{c.n, c.k / c.group, c.group} : std::vector<int64_t>{c.n, c.k};
  const std::vector<int64_t> per =
      grouped ? std::vector<int64_t>{c.n, c.k / c.group, 1} : std::vector<int64_t>{c.n, 1};
  const bool batched = c.product == Product::kBmm;
  ValueId x = g.add_input(
      "x", spec_of(c.dt, batched ? std::vector<int64_t>{1, 3, c.k} : std::vector<int64_t>{3, c.k}));
  ValueId q = int8_constant(g, "q", shape, c.int4 ? -8 : -128, c.int4 ? 7 : 127, 71);
  ValueId v = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", c.dt}}, spec_of(c.dt, shape));
  if (c.zero != Zero::kNone) {
    // Zero points that are not integers: the subtraction rounds in a 16-bit dtype.
    ValueId zp =
        c.zero == Zero::kInt8
            ? node(g, OpKind::ToCopy, "zpw",
                   {{"self", int8_constant(g, "zp", per, -8, 7, 72)}, {"dtype", c.dt}},
                   spec_of(c.dt, per))
            : constant_of(g, "zp", c.dt, per, [](int64_t i) {
                return static_cast<float>(i % 7) - 3.0f + 0.37f * static_cast<float>(i % 3);
              });
    v = node(g, OpKind::SubTensor, "z", {{"self", v}, {"other", zp}}, spec_of(c.dt, shape));
  }
  ValueId scale = constant_of(g, "scale", c.dt, per, [](int64_t i) {
    return 0.0123f + 0.0031f * static_cast<float>(i % 11);
  });
  v = node(g, OpKind::MulTensor, "d", {{"self", v}, {"other", scale}}, spec_of(c.dt, shape));
  if (grouped) {
    v = node(g, OpKind::View, "v", {{"self", v}, {"size", std::vector<int64_t>{c.n, c.k}}},
             spec_of(c.dt, {c.n, c.k}));
  }
  ArgValue bias = std::monostate();
  if (c.bias) {
    bias = constant_of(g, "b", c.dt, {c.n},
                       [](int64_t i) { return 0.25f * static_cast<float>(i % 5); });
  }
  ValueId y;
  const int64_t out_n = c.expand_n > 0 ? c.expand_n : c.n;
  const TensorSpec out =
      spec_of(c.dt, batched ? std::vector<int64_t>{1, 3, out_n} : std::vector<int64_t>{3, c.n});
  if (c.product == Product::kLinear) {
    y = node(g, OpKind::Linear, "y", {{"input", x}, {"weight", v}, {"bias", bias}}, out);
  } else {
    ValueId t = node(g, OpKind::Permute, "t", {{"self", v}, {"dims", std::vector<int64_t>{1, 0}}},
                     spec_of(c.dt, {c.k, c.n}));
    if (c.product == Product::kMm) {
      y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", t}}, out);
    } else if (c.product == Product::kAddmm) {
      y = node(g, OpKind::Addmm, "y", {{"self", bias}, {"mat1", x}, {"mat2", t}}, out);
    } else {
      // matmul as PyTorch decomposes it for a batch of rows: bmm by the broadcast weight.
      ValueId e =
          node(g, OpKind::Expand, "e", {{"self", t}, {"size", std::vector<int64_t>{1, c.k, out_n}}},
               spec_of(c.dt, {1, c.k, out_n}));
      y = node(g, OpKind::Bmm, "y", {{"self", x}, {"mat2", e}}, out);
    }
  }
  g.set_outputs(c.weight_read_elsewhere ? std::vector<ValueId>{y, v} : std::vector<ValueId>{y});
  return g;
}

// The ops of the graph's one CUDA delegate, in order.
std::vector<std::string> delegate_ops(const Graph& g) {
  std::vector<std::string> ops;
  for (NodeId id : g.order()) {
    const Node& call = g.node(id);
    if (call.op != OpKind::DelegateCall) continue;
    for (NodeId s : call.delegate->graph->order())
      ops.emplace_back(op_info(call.delegate->graph->node(s).op).name);
  }
  return ops;
}

float to_float(DType dt, const uint8_t* p) {
  if (dt == DType::kFloat32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return dt == DType::kBFloat16 ? bfloat16_to_float(b) : half_to_float(b);
}

TEST_CASE("a CUDA delegate's weight-only chain runs as one etc::weight_only_linear, same bits") {
  struct Named {
    const char* what;
    Layer layer;
  };
  std::vector<Named> cases;
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    Layer l;
    l.dt = dt;
    cases.push_back({"4-bit, grouped, zero point of the model's dtype, linear", l});
    l.product = Product::kMm;
    l.zero = Zero::kInt8;
    cases.push_back({"4-bit, int8 zero point widened by its own _to_copy, mm of a permute", l});
    l.product = Product::kAddmm;
    l.bias = true;
    l.int4 = false;
    l.zero = Zero::kNone;
    l.group = l.k;
    cases.push_back({"int8 per row, no zero point, addmm with a bias", l});
    l.product = Product::kLinear;
    l.int4 = true;
    l.zero = Zero::kSameDType;
    l.k = 255;
    l.group = 255;
    cases.push_back({"4-bit rows of an odd length, linear with a bias", l});
    l.product = Product::kBmm;
    l.bias = false;
    l.k = 128;
    l.group = 64;
    l.zero = Zero::kInt8;
    cases.push_back({"4-bit, grouped, bmm by the weight expanded over a batch", l});
  }
  for (const Named& c : cases) {
    const Layer& l = c.layer;
    INFO(c.what << ", " << dtype_name(l.dt));
    Graph fused_g = layer_graph(l), plain_g = layer_graph(l);
    const Device cuda{DeviceType::kCUDA, 0};
    const pte::File fused = testing::export_graph(fused_g, "fused.pte", cuda);
    const pte::File plain =
        testing::export_graph(plain_g, "plain.pte", cuda, nullptr, unfused_pipeline().c_str());
    CHECK(delegate_ops(fused_g) == std::vector<std::string>{"etc.weight_only_linear.default"});
    CHECK(delegate_ops(plain_g).size() >= 4);
    const size_t numel = static_cast<size_t>(3 * l.k);
    const std::vector<uint8_t> a = run_as(fused, true, l.dt, numel, nullptr);
    const std::vector<uint8_t> b = run_as(plain, true, l.dt, numel, nullptr);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
    // And the value, recomputed here from the rule: y = x @ w^T + b, w = (q - zero) * scale.
    Graph ref = layer_graph(l);
    auto bytes = [&](const char* name) {
      return ref.value(*ref.find_value(name)).spec.constant.bytes();
    };
    const std::span<const uint8_t> q = bytes("q"), scale = bytes("scale");
    const size_t es = dtype_size(l.dt);
    double worst = 0, largest = 0;
    for (int64_t m = 0; m < 3; ++m) {
      for (int64_t j = 0; j < l.n; ++j) {
        double want = l.bias ? to_float(l.dt, bytes("b").data() + j * es) : 0;
        for (int64_t kk = 0; kk < l.k; ++kk) {
          const int64_t grp = j * (l.k / l.group) + kk / l.group;
          double zero = 0;
          if (l.zero == Zero::kInt8)
            zero = static_cast<int8_t>(bytes("zp")[static_cast<size_t>(grp)]);
          if (l.zero == Zero::kSameDType) zero = to_float(l.dt, bytes("zp").data() + grp * es);
          const double w = (static_cast<int8_t>(q[static_cast<size_t>(j * l.k + kk)]) - zero) *
                           to_float(l.dt, scale.data() + grp * es);
          float xv = std::sin(static_cast<float>(m * l.k + kk)) * 2;
          if (l.dt == DType::kBFloat16) xv = bfloat16_to_float(float_to_bfloat16(xv));
          if (l.dt == DType::kFloat16) xv = half_to_float(float_to_half(xv));
          want += xv * w;
        }
        const double got = to_float(l.dt, a.data() + static_cast<size_t>(m * l.n + j) * es);
        worst = std::max(worst, std::abs(got - want));
        largest = std::max(largest, std::abs(want));
      }
    }
    CHECK(worst <= (l.dt == DType::kFloat32 ? 1e-5 : 2e-2) * largest);
  }
}

TEST_CASE("Int8WeightOnlyConfig's product reads its int8 weight, the scale multiplying after") {
  // mm(x, _to_copy(W^T)) * scale: W^T int8 [K, N] (the export folded torchao's transpose).
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    INFO(dtype_name(dt));
    const int64_t n = 40, k = 200;
    auto build = [&] {
      Graph g;
      ValueId x = g.add_input("x", spec_of(dt, {3, k}));
      ValueId wt = int8_constant(g, "wt", {k, n}, -128, 127, 81);
      ValueId w = node(g, OpKind::ToCopy, "w", {{"self", wt}, {"dtype", dt}}, spec_of(dt, {k, n}));
      ValueId p = node(g, OpKind::Mm, "p", {{"self", x}, {"mat2", w}}, spec_of(dt, {3, n}));
      ValueId s = constant_of(g, "s", dt, {n},
                              [](int64_t i) { return 0.0071f * static_cast<float>(1 + i % 13); });
      ValueId y = node(g, OpKind::MulTensor, "y", {{"self", p}, {"other", s}}, spec_of(dt, {3, n}));
      g.set_outputs({y});
      return g;
    };
    Graph fused_g = build(), plain_g = build();
    const Device cuda{DeviceType::kCUDA, 0};
    const pte::File fused = testing::export_graph(fused_g, "int8wo.pte", cuda);
    const pte::File plain = testing::export_graph(plain_g, "int8wo_plain.pte", cuda, nullptr,
                                                  unfused_pipeline().c_str());
    CHECK(delegate_ops(fused_g) ==
          std::vector<std::string>{"etc.weight_only_linear.default", "aten.mul.Tensor"});
    CHECK(delegate_ops(plain_g) ==
          std::vector<std::string>{"aten._to_copy.default", "aten.mm.default", "aten.mul.Tensor"});
    const size_t numel = static_cast<size_t>(3 * k);
    const std::vector<uint8_t> a = run_as(fused, true, dt, numel, nullptr);
    const std::vector<uint8_t> b = run_as(plain, true, dt, numel, nullptr);
    REQUIRE(a.size() == b.size());
    CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
    // The weight the fused node reads is W, W^T's transpose: y[0, j] for an input of one 1 at
    // column i is W^T[i, j] times the scale.
    Graph ref = build();
    const std::span<const uint8_t> wt = ref.value(*ref.find_value("wt")).spec.constant.bytes();
    const std::span<const uint8_t> sb = ref.value(*ref.find_value("s")).spec.constant.bytes();
    double worst = 0, largest = 0;
    const size_t es = dtype_size(dt);
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t i = 0; i < k; ++i) {
        float xv = std::sin(static_cast<float>(i)) * 2;
        if (dt == DType::kBFloat16) xv = bfloat16_to_float(float_to_bfloat16(xv));
        if (dt == DType::kFloat16) xv = half_to_float(float_to_half(xv));
        want += xv * static_cast<int8_t>(wt[static_cast<size_t>(i * n + j)]);
      }
      want *= to_float(dt, sb.data() + static_cast<size_t>(j) * es);
      worst =
          std::max(worst, std::abs(to_float(dt, a.data() + static_cast<size_t>(j) * es) - want));
      largest = std::max(largest, std::abs(want));
    }
    CHECK(worst <= (dt == DType::kFloat32 ? 1e-5 : 2e-2) * largest);
  }
}

TEST_CASE("a weight-only chain that is not torchao's form keeps its steps") {
  SECTION("the dequantized weight is read by something else too") {
    Layer l;
    l.weight_read_elsewhere = true;
    Graph g = layer_graph(l);
    testing::export_graph(g, "reread.pte", Device{DeviceType::kCUDA, 0});
    const std::vector<std::string> ops = delegate_ops(g);
    CHECK(std::count(ops.begin(), ops.end(), "etc.weight_only_linear.default") == 0);
    CHECK(std::count(ops.begin(), ops.end(), "aten.linear.default") == 1);
  }
  SECTION("4-bit groups of an odd size: rows of groups are not rows of K values") {
    Layer l;
    l.k = 255;
    l.group = 15;
    Graph fused_g = layer_graph(l), plain_g = layer_graph(l);
    const Device cuda{DeviceType::kCUDA, 0};
    const pte::File fused = testing::export_graph(fused_g, "odd.pte", cuda);
    const pte::File plain =
        testing::export_graph(plain_g, "odd_plain.pte", cuda, nullptr, unfused_pipeline().c_str());
    CHECK(delegate_ops(fused_g) == delegate_ops(plain_g));
    const size_t numel = static_cast<size_t>(3 * l.k);
    CHECK(run_as(fused, true, l.dt, numel, nullptr) == run_as(plain, true, l.dt, numel, nullptr));
  }
  SECTION("bmm by a weight of one output broadcast to eight: not a linear layer") {
    Layer l;
    l.product = Product::kBmm;
    l.n = 1;
    l.k = 8192;  // (n * k values: enough for pack-int4-weights)
    l.expand_n = 8;
    Graph fused_g = layer_graph(l), plain_g = layer_graph(l);
    const Device cuda{DeviceType::kCUDA, 0};
    const pte::File fused = testing::export_graph(fused_g, "broadcast.pte", cuda);
    const pte::File plain = testing::export_graph(plain_g, "broadcast_plain.pte", cuda, nullptr,
                                                  unfused_pipeline().c_str());
    CHECK(delegate_ops(fused_g) == delegate_ops(plain_g));
    const size_t numel = static_cast<size_t>(3 * l.k);
    CHECK(run_as(fused, true, l.dt, numel, nullptr) == run_as(plain, true, l.dt, numel, nullptr));
  }
  SECTION("a host program keeps the chain (ExecuTorch's portable kernels run it)") {
    Layer l;
    Graph g = layer_graph(l);
    testing::export_graph(g, "host.pte");
    for (NodeId id : g.order())
      CHECK(g.node(id).op != OpKind::WeightOnlyLinear);
  }
}

}  // namespace
}  // namespace etc
