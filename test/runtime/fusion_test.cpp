// Epilogue fusion end to end: memory planning puts an activation's or residual add's out over
// its input where the input dies there, and rt::Method runs the elementwise instructions
// after a convolution as its epilogue. The fused method must give the unfused method's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <tuple>

#include "format/pte_reader.h"
#include "runtime/fusion_test_util.h"
#include "runtime/kernels/parallel.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

ValueId conv_s(Graph& g, const std::string& name, ValueId x, ValueId w, ArgValue b, int64_t stride,
               int64_t pad, int64_t groups, TensorSpec out) {
  return node(g, OpKind::Convolution, name,
              {{"input", x},
               {"weight", w},
               {"bias", b},
               {"stride", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad}},
               {"dilation", std::vector<int64_t>{1, 1}},
               {"transposed", false},
               {"output_padding", std::vector<int64_t>{0, 0}},
               {"groups", groups}},
              std::move(out));
}

ValueId conv(Graph& g, const std::string& name, ValueId x, ValueId w, ArgValue b, int64_t pad,
             int64_t groups, TensorSpec out) {
  return conv_s(g, name, x, w, std::move(b), 1, pad, groups, std::move(out));
}

// x -> conv 3x3 -> relu -> r; r -> depthwise 3x3 -> d; add(d, r) -> hardtanh(-0.5, 0.5)
// -> neg -> y. With `reread`, the relu's input is read again by the add (so the relu cannot
// be planned in place, nor fused).
Graph block(bool reread) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 3, 9, 7}));
  ValueId c1 = conv(g, "c1", x, constant(g, "w1", {4, 3, 3, 3}, 1), constant(g, "b1", {4}, 2), 1, 1,
                    spec({1, 4, 9, 7}));
  ValueId r = node(g, OpKind::Relu, "r", {{"self", c1}}, spec({1, 4, 9, 7}));
  ValueId d = conv(g, "d", r, constant(g, "w2", {4, 1, 3, 3}, 3), std::monostate{}, 1, 4,
                   spec({1, 4, 9, 7}));
  ValueId a = node(g, OpKind::AddTensor, "a", {{"self", reread ? c1 : r}, {"other", d}},
                   spec({1, 4, 9, 7}));
  ValueId h =
      node(g, OpKind::Hardtanh, "h",
           {{"self", a}, {"min_val", Scalar{-0.5}}, {"max_val", Scalar{0.5}}}, spec({1, 4, 9, 7}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", h}}, spec({1, 4, 9, 7}));
  g.set_outputs({y});
  return g;
}

TEST_CASE("in-place activations and residual adds run as the convolution's epilogue") {
  Graph g = block(false);
  const pte::File f = export_graph(g);
  const Run fused = run(f, true), plain = run(f, false);
  CHECK(rows(fused.profile) ==
        std::vector<std::string>{"aten::convolution.out + aten::add.out + aten::hardtanh.out",
                                 "aten::convolution.out + aten::relu.out", "aten::neg.out"});
  CHECK(rows(plain.profile) == std::vector<std::string>{"aten::add.out", "aten::convolution.out",
                                                        "aten::hardtanh.out", "aten::neg.out",
                                                        "aten::relu.out"});
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  // Not trivially equal: the clamp and the relu did something.
  CHECK(*std::max_element(plain.y.begin(), plain.y.end()) == 0.5f);
}

// The steps a planner was handed, and whether it was asked to fuse (a captureless planner).
std::vector<std::string> g_planned;
bool g_fuse_asked = false;
void recording_planner(rt::LoadPlanView& m) {
  g_fuse_asked = m.fuse;
  for (const rt::MethodStep& s : m.steps)
    g_planned.push_back(s.name + (s.calls(OpKind::Convolution) ? " (convolution)" : ""));
}

TEST_CASE("the load plan is the kernel registry's: Method runs what its planner decided") {
  Graph g = block(false);
  const pte::File f = export_graph(g);
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  // The CPU kernels' planner, installed by register_cpu_kernels.
  rt::RuntimeEnv env = runtime->env();
  Result<std::unique_ptr<rt::Method>> planned = rt::Method::load(f, 0, env);
  REQUIRE(planned.ok());
  const std::string with = (*planned)->describe_plan();
  CHECK(with.find("aten::convolution.out + aten::relu.out epilogue=1 activation=0") !=
        std::string::npos);
  CHECK(with.find("aten::relu.out fused") != std::string::npos);
  // Another planner sees every step, in order, with its operator; Method fuses nothing itself.
  rt::OperatorRegistry ops = runtime->operators;
  ops.set_load_planner(&recording_planner);
  env.operators = &ops;
  g_planned.clear();
  Result<std::unique_ptr<rt::Method>> recorded = rt::Method::load(f, 0, env);
  REQUIRE(recorded.ok());
  CHECK(g_fuse_asked);
  CHECK(g_planned ==
        std::vector<std::string>{"aten::convolution.out (convolution)", "aten::relu.out",
                                 "aten::convolution.out (convolution)", "aten::add.out",
                                 "aten::hardtanh.out", "aten::neg.out"});
  CHECK((*recorded)->describe_plan().find("epilogue") == std::string::npos);
  CHECK((*recorded)->describe_plan().find("fused") == std::string::npos);
  // No planner: every instruction as written, with the planned method's bits.
  ops.set_load_planner(nullptr);
  Result<std::unique_ptr<rt::Method>> plain = rt::Method::load(f, 0, env);
  REQUIRE(plain.ok());
  CHECK((*plain)->describe_plan().find("epilogue") == std::string::npos);
  std::vector<float> x(3 * 9 * 7);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::cos(static_cast<float>(i));
  for (auto* m : {planned->get(), plain->get()})
    REQUIRE((m->set_input(0, x.data(), x.size() * 4).ok() && m->execute().ok()));
  const rt::TensorView &a = (*planned)->output(0), &b = (*plain)->output(0);
  REQUIRE(a.nbytes() == b.nbytes());
  CHECK(std::memcmp(a.data, b.data, static_cast<size_t>(a.nbytes())) == 0);
}

TEST_CASE("an activation whose input is read again keeps its own out, also when fused") {
  Graph g = block(true);
  const pte::File f = export_graph(g);
  // c1 is read by the add after the relu: the relu is not planned in place ...
  NodeId relu, conv1;
  for (NodeId id : g.order()) {
    if (g.node(id).name == "r") relu = id;
    if (g.node(id).name == "c1") conv1 = id;
  }
  const TensorSpec& r = g.value(g.node(relu).outputs[0]).spec;
  const TensorSpec& c1 = g.value(g.node(conv1).outputs[0]).spec;
  CHECK(r.mem_offset != c1.mem_offset);
  // ... but still runs as the convolution's epilogue, writing its own out; c1 stays whole
  // for the add, which the depthwise convolution takes with the hardtanh.
  const Run fused = run(f, true), plain = run(f, false);
  CHECK(rows(fused.profile) ==
        std::vector<std::string>{"aten::convolution.out + aten::add.out + aten::hardtanh.out",
                                 "aten::convolution.out + aten::relu.out", "aten::neg.out"});
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
}

TEST_CASE("a decomposed hardswish after a convolution runs as its epilogue") {
  // a -> neg -> x -> conv -> t; u = t + 3; u = clamp(u, 0, 6); u = u / 6; h = t * u;
  // y = neg(h). u is new memory (t is read again by the mul), which the plan may put where x
  // was (x dies at the convolution): the chain then waits for the whole convolution.
  Graph g;
  ValueId a = g.add_input("a", spec({1, 3, 9, 7}));
  ValueId x = node(g, OpKind::Neg, "x", {{"self", a}}, spec({1, 3, 9, 7}));
  ValueId t = conv(g, "t", x, constant(g, "w", {3, 3, 3, 3}, 5), constant(g, "b", {3}, 6), 1, 1,
                   spec({1, 3, 9, 7}));
  ValueId u1 = node(g, OpKind::AddScalar, "u1", {{"self", t}, {"other", Scalar{int64_t{3}}}},
                    spec({1, 3, 9, 7}));
  ValueId u2 = node(g, OpKind::Clamp, "u2",
                    {{"self", u1}, {"min", Scalar{int64_t{0}}}, {"max", Scalar{int64_t{6}}}},
                    spec({1, 3, 9, 7}));
  ValueId u3 = node(g, OpKind::DivScalar, "u3", {{"self", u2}, {"other", Scalar{int64_t{6}}}},
                    spec({1, 3, 9, 7}));
  ValueId h = node(g, OpKind::MulTensor, "h", {{"self", t}, {"other", u3}}, spec({1, 3, 9, 7}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", h}}, spec({1, 3, 9, 7}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const Run fused = run(f, true), plain = run(f, false);
  CHECK(rows(fused.profile) ==
        std::vector<std::string>{"aten::convolution.out + aten::add.Scalar_out + aten::clamp.out "
                                 "+ aten::div.Scalar_out + aten::mul.out",
                                 "aten::neg.out"});
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  CHECK(*std::min_element(plain.y.begin(), plain.y.end()) < -0.5f);  // the chain did work
}

TEST_CASE("a silu after a convolution runs as its epilogue, with the unfused bits") {
  // x -> conv -> t; h = silu(t), which export decomposes into sigmoid and mul (ExecuTorch's
  // portable library has no silu.out); y = neg(h). A 3x3 layer of 16 channels on 12x10 (the
  // GEMM path, tile by tile) and a depthwise one; inputs large enough for the sigmoid to
  // saturate both ways.
  for (const int64_t groups : {int64_t{1}, int64_t{16}}) {
    Graph g;
    ValueId a = g.add_input("a", spec({1, 16, 12, 10}));
    ValueId x = node(g, OpKind::Neg, "x", {{"self", a}}, spec({1, 16, 12, 10}));
    ValueId t = conv(g, "t", x, constant(g, "w", {16, 16 / groups, 3, 3}, 7),
                     constant(g, "b", {16}, 8), 1, groups, spec({1, 16, 12, 10}));
    ValueId h = node(g, OpKind::Silu, "h", {{"self", t}}, spec({1, 16, 12, 10}));
    ValueId y = node(g, OpKind::Neg, "y", {{"self", h}}, spec({1, 16, 12, 10}));
    g.set_outputs({y});
    const pte::File f = export_graph(g);
    const Run fused = run(f, true, 16 * 12 * 10), plain = run(f, false, 16 * 12 * 10);
    INFO("groups " << groups);
    CHECK(rows(fused.profile) ==
          std::vector<std::string>{"aten::convolution.out + aten::sigmoid.out + aten::mul.out",
                                   "aten::neg.out"});
    CHECK(rows(plain.profile) == std::vector<std::string>{"aten::convolution.out", "aten::mul.out",
                                                          "aten::neg.out", "aten::sigmoid.out"});
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
    // silu(v) = v * sigmoid(v) >= -0.279: y = -silu <= 0.279, and some are far below.
    CHECK(*std::max_element(plain.y.begin(), plain.y.end()) <= 0.2785f);
    CHECK(*std::min_element(plain.y.begin(), plain.y.end()) < -1.0f);
  }
}

TEST_CASE("a Winograd convolution's epilogue writes over its input only once it is read") {
  // x -> neg -> conv 3x3 (16 -> 48, Winograd on etc's own kernels) -> silu -> neg -> y. The
  // silu's sigmoid writes a tensor the planner may lay over the convolution's input (dead
  // after it): the epilogue must wait for the whole input, which Winograd reads a block of
  // tile rows (40x40: two blocks) or an image (two of 20x20) at a time.
  for (const std::vector<int64_t>& in :
       {std::vector<int64_t>{1, 16, 40, 40}, std::vector<int64_t>{2, 16, 20, 20}}) {
    CAPTURE(in);
    std::vector<int64_t> out_sizes = in;
    out_sizes[1] = 48;
    Graph g;
    ValueId a = g.add_input("a", spec(in));
    ValueId x = node(g, OpKind::Neg, "x", {{"self", a}}, spec(in));
    ValueId t = conv(g, "t", x, constant(g, "w", {48, 16, 3, 3}, 71), constant(g, "b", {48}, 72), 1,
                     1, spec(out_sizes));
    ValueId h = node(g, OpKind::Silu, "h", {{"self", t}}, spec(out_sizes));
    g.set_outputs({node(g, OpKind::Neg, "y", {{"self", h}}, spec(out_sizes))});
    const pte::File f = export_graph(g);
    const rt::test::OnednnScope scope(false);
    const size_t numel = static_cast<size_t>(in[0] * in[1] * in[2] * in[3]);
    const Run fused = run(f, true, numel), plain = run(f, false, numel);
    CHECK(rows(fused.profile) ==
          std::vector<std::string>{"aten::convolution.out + aten::sigmoid.out + aten::mul.out",
                                   "aten::neg.out"});
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
}

TEST_CASE("a relu after a batch norm runs as its epilogue, with the unfused bits") {
  // a -> neg -> x -> batch norm (inference, not after a convolution: not folded) -> relu ->
  // conv 3x3 -> y: densenet's pre-activation. The relu runs on each range of planes the batch
  // norm writes.
  Graph g;
  ValueId a = g.add_input("a", spec({2, 8, 12, 10}));
  ValueId x = node(g, OpKind::Neg, "x", {{"self", a}}, spec({2, 8, 12, 10}));
  auto positive = [&](const std::string& name, uint32_t seed) {
    TensorSpec v = spec({8});
    std::string bytes(32, '\0');
    for (int k = 0; k < 8; ++k) {
      const float f = 0.5f + 0.1f * static_cast<float>((seed * 7 + k * 3) % 10);
      std::memcpy(bytes.data() + 4 * k, &f, 4);
    }
    v.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
    return g.add_constant(name, std::move(v));
  };
  Result<std::vector<ArgValue>> bound =
      bind_args(OpKind::NativeBatchNormNoTraining, {{"input", x},
                                                    {"weight", constant(g, "gamma", {8}, 21)},
                                                    {"bias", constant(g, "beta", {8}, 22)},
                                                    {"running_mean", constant(g, "mean", {8}, 23)},
                                                    {"running_var", positive("var", 24)},
                                                    {"momentum", 0.1},
                                                    {"eps", 1e-5}});
  REQUIRE(bound.ok());
  NodeId bn = g.add_node(OpKind::NativeBatchNormNoTraining, "bn", std::move(bound).value(),
                         {"bn0", "bn1", "bn2"}, {spec({2, 8, 12, 10}), spec({0}), spec({0})});
  ValueId r = node(g, OpKind::Relu, "r", {{"self", g.node(bn).outputs[0]}}, spec({2, 8, 12, 10}));
  ValueId y = conv(g, "y", r, constant(g, "w", {8, 8, 3, 3}, 25), constant(g, "b", {8}, 26), 1, 1,
                   spec({2, 8, 12, 10}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  for (const int threads : {1, 2}) {
    INFO("threads " << threads);
    rt::kernels::set_num_threads(threads);
    const Run fused = run(f, true, 2 * 8 * 12 * 10), plain = run(f, false, 2 * 8 * 12 * 10);
    CHECK(
        rows(fused.profile) ==
        std::vector<std::string>{"aten::_native_batch_norm_legit_no_training.out + aten::relu.out",
                                 "aten::convolution.out", "aten::neg.out"});
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
  rt::kernels::set_num_threads(0);
}

TEST_CASE("a hardswish kernel leaves its out unwritten only where nothing reads it after") {
  // x -> conv -> t; u = hardswish(t) as its four instructions; then neg(u), or neg(u +
  // neg(t)), which reads t after the chain. A 1x1 convolution (the GEMM's tiles) and a first layer
  // of three input channels (its strips): where t is read again it must hold the convolution's
  // values; either way the bits of the unfused program.
  struct Case {
    const char* name;
    int64_t c_in, c_out, k, stride, pad, hw;
  };
  for (const Case& k : {Case{"1x1", 16, 24, 1, 1, 0, 12}, Case{"first layer", 3, 8, 3, 2, 1, 20}}) {
    for (bool reread : {false, true}) {
      INFO(k.name << (reread ? ", t read after the chain" : ""));
      const int64_t oh = (k.hw + 2 * k.pad - k.k) / k.stride + 1;
      const TensorSpec o = spec({1, k.c_out, oh, oh});
      Graph g;
      ValueId x = g.add_input("x", spec({1, k.c_in, k.hw, k.hw}));
      ValueId t = conv_s(g, "t", x, constant(g, "w", {k.c_out, k.c_in, k.k, k.k}, 61),
                         constant(g, "b", {k.c_out}, 62), k.stride, k.pad, 1, o);
      ValueId u1 =
          node(g, OpKind::AddScalar, "u1", {{"self", t}, {"other", Scalar{int64_t{3}}}}, o);
      ValueId u2 = node(g, OpKind::Hardtanh, "u2",
                        {{"self", u1}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}}, o);
      ValueId u3 =
          node(g, OpKind::DivScalar, "u3", {{"self", u2}, {"other", Scalar{int64_t{6}}}}, o);
      ValueId h = node(g, OpKind::MulTensor, "h", {{"self", t}, {"other", u3}}, o);
      ValueId last = h;
      if (reread) {
        ValueId n = node(g, OpKind::Neg, "n", {{"self", t}}, o);
        last = node(g, OpKind::AddTensor, "s", {{"self", h}, {"other", n}}, o);
      }
      ValueId y = node(g, OpKind::Neg, "y", {{"self", last}}, o);
      // x read at the end too: no out of the chain over it, so the chain runs tile by tile.
      ValueId keep = node(g, OpKind::Neg, "keep", {{"self", x}}, spec({1, k.c_in, k.hw, k.hw}));
      g.set_outputs({y, keep});
      const pte::File f = export_graph(g);
      const size_t numel = static_cast<size_t>(k.c_in * k.hw * k.hw);
      const Run fused = run(f, true, numel), plain = run(f, false, numel);
      const std::vector<std::string> names = rows(fused.profile);
      CHECK(std::count(names.begin(), names.end(),
                       "aten::convolution.out + aten::add.Scalar_out + aten::hardtanh.out + "
                       "aten::div.Scalar_out + aten::mul.out") == 1);
      REQUIRE(fused.y.size() == plain.y.size());
      CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
      CHECK(*std::min_element(plain.y.begin(), plain.y.end()) < -0.5f);  // the chain did work
    }
  }
}

TEST_CASE("a matrix product's bias row and residual add run as its epilogue") {
  // x [1, 24, 40] -> view [24, 40] -> mm with w [40, 48] -> view [1, 24, 48] -> + bias [48]
  // (broadcast along the rows) -> + skip [1, 24, 48] -> hardtanh -> neg: the adds and the
  // hardtanh run after the mm, the bits of the instructions.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 24, 40}));
  ValueId v = node(g, OpKind::View, "v", {{"self", x}, {"size", std::vector<int64_t>{24, 40}}},
                   spec({24, 40}));
  ValueId m = node(g, OpKind::Mm, "m", {{"self", v}, {"mat2", constant(g, "w", {40, 48}, 51)}},
                   spec({24, 48}));
  ValueId u = node(g, OpKind::View, "u", {{"self", m}, {"size", std::vector<int64_t>{1, 24, 48}}},
                   spec({1, 24, 48}));
  ValueId b = node(g, OpKind::AddTensor, "b",
                   {{"self", u}, {"other", constant(g, "bias", {48}, 52)}}, spec({1, 24, 48}));
  ValueId r =
      node(g, OpKind::AddTensor, "r",
           {{"self", constant(g, "skip", {1, 24, 48}, 53)}, {"other", b}}, spec({1, 24, 48}));
  ValueId h =
      node(g, OpKind::Hardtanh, "h",
           {{"self", r}, {"min_val", Scalar{-0.5}}, {"max_val", Scalar{0.5}}}, spec({1, 24, 48}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", h}}, spec({1, 24, 48}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, 24 * 40), plain = run(f, false, 24 * 40);
  CHECK(rows(fused.profile) == std::vector<std::string>{"aten::mm.out + aten::add.out + "
                                                        "aten::add.out + aten::hardtanh.out",
                                                        "aten::neg.out"});
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  CHECK(*std::max_element(plain.y.begin(), plain.y.end()) > 0.1f);
  CHECK(*std::min_element(plain.y.begin(), plain.y.end()) < -0.1f);
}

TEST_CASE("a linear layer's GELU and residual add run as its addmm's epilogue, same bits") {
  // x [1, 24, 40] -> view -> addmm(bias [48], x, w [40, 48]) -> view [1, 24, 48] -> gelu
  // (erf) -> + skip -> neg: ConvNeXt's and the transformers' MLP. The tanh form stays a step.
  for (const std::string approx : {"none", "tanh"}) {
    INFO(approx);
    Graph g;
    ValueId x = g.add_input("x", spec({1, 24, 40}));
    ValueId v = node(g, OpKind::View, "v", {{"self", x}, {"size", std::vector<int64_t>{24, 40}}},
                     spec({24, 40}));
    ValueId m = node(g, OpKind::Addmm, "m",
                     {{"self", constant(g, "bias", {48}, 52)},
                      {"mat1", v},
                      {"mat2", constant(g, "w", {40, 48}, 51)}},
                     spec({24, 48}));
    ValueId u = node(g, OpKind::View, "u", {{"self", m}, {"size", std::vector<int64_t>{1, 24, 48}}},
                     spec({1, 24, 48}));
    ValueId a =
        node(g, OpKind::Gelu, "a", {{"self", u}, {"approximate", approx}}, spec({1, 24, 48}));
    ValueId r =
        node(g, OpKind::AddTensor, "r",
             {{"self", a}, {"other", constant(g, "skip", {1, 24, 48}, 53)}}, spec({1, 24, 48}));
    ValueId y = node(g, OpKind::Neg, "y", {{"self", r}}, spec({1, 24, 48}));
    g.set_outputs({y});
    const pte::File f = export_graph(g);
    const Run fused = run(f, true, 24 * 40), plain = run(f, false, 24 * 40);
    CHECK(rows(fused.profile) ==
          (approx == "none"
               ? std::vector<std::string>{"aten::addmm.out + aten::gelu.out + aten::add.out",
                                          "aten::neg.out"}
               : std::vector<std::string>{"aten::add.out", "aten::addmm.out", "aten::gelu.out",
                                          "aten::neg.out"}));
    REQUIRE(fused.y.size() == plain.y.size());
    CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  }
}

// q [2, 100, 16] (the input) -> bmm with k^T [2, 16, 90] -> * 0.3 -> softmax over the last
// dim (viewed [2, 1, 100, 90] as a head dim would) -> bmm with v [2, 90, 24] -> neg. With
// `read_scores`, the softmax's out is a method output too.
Graph attention(bool read_scores, int64_t l = 100) {
  Graph g;
  ValueId q = g.add_input("q", spec({2, l, 16}));
  ValueId s = node(g, OpKind::Bmm, "qk",
                   {{"self", q}, {"mat2", constant(g, "kt", {2, 16, 90}, 61)}}, spec({2, l, 90}));
  ValueId c =
      node(g, OpKind::MulScalar, "c", {{"self", s}, {"other", Scalar{0.3}}}, spec({2, l, 90}));
  ValueId h = node(g, OpKind::View, "h", {{"self", c}, {"size", std::vector<int64_t>{2, 1, l, 90}}},
                   spec({2, 1, l, 90}));
  ValueId p =
      node(g, OpKind::Softmax, "p", {{"self", h}, {"dim", int64_t{-1}}, {"half_to_float", false}},
           spec({2, 1, l, 90}));
  ValueId pv = node(g, OpKind::View, "pv", {{"self", p}, {"size", std::vector<int64_t>{2, l, 90}}},
                    spec({2, l, 90}));
  ValueId o = node(g, OpKind::Bmm, "o", {{"self", pv}, {"mat2", constant(g, "v", {2, 90, 24}, 62)}},
                   spec({2, l, 24}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", o}}, spec({2, l, 24}));
  g.set_outputs(read_scores ? std::vector<ValueId>{y, p} : std::vector<ValueId>{y});
  return g;
}

TEST_CASE("an attention's four instructions run as one, a block of query rows at a time") {
  // 100 query rows: a block of 64 and a partial one. The fused method gives the unfused bits.
  Graph g = attention(false);
  const pte::File f = export_graph(g);
  const Run fused = run(f, true, 2 * 100 * 16), plain = run(f, false, 2 * 100 * 16);
  CHECK(rows(fused.profile) ==
        std::vector<std::string>{"aten::bmm.out + aten::mul.Scalar_out + aten::_softmax.out + "
                                 "aten::bmm.out",
                                 "aten::neg.out"});
  REQUIRE(fused.y.size() == plain.y.size());
  CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
  CHECK(*std::max_element(plain.y.begin(), plain.y.end()) > 0.1f);
  // A last block of 3 rows and of 1 (the GEMM's few-row kernels over the packed panels); on
  // one thread too, where one thread's blocks span both batches (each packs its own K^T, V).
  for (const int64_t l : {int64_t{67}, int64_t{65}}) {
    for (const int threads : {0, 1}) {
      INFO(l << " query rows, threads " << threads << " (0: the default)");
      Graph gl = attention(false, l);
      const pte::File fl = export_graph(gl);
      rt::kernels::set_num_threads(threads);
      const Run fused_l = run(fl, true, 2 * l * 16);
      rt::kernels::set_num_threads(0);
      const Run plain_l = run(fl, false, 2 * l * 16);
      REQUIRE(fused_l.y.size() == plain_l.y.size());
      CHECK(std::memcmp(fused_l.y.data(), plain_l.y.data(), fused_l.y.size() * 4) == 0);
    }
  }
  // Scores a caller reads stay an instruction's.
  Graph h = attention(true);
  const pte::File fh = export_graph(h);
  const Run kept = run(fh, true, 2 * 100 * 16);
  const std::vector<std::string> names = rows(kept.profile);
  CHECK(std::find(names.begin(), names.end(), "aten::_softmax.out") != names.end());
}

// max_pool2d_with_indices(x, 3x3, stride 2, padding 1) into `out` sizes: (values, indices).
std::pair<ValueId, ValueId> max_pool_3x3_s2(Graph& g, ValueId x, std::vector<int64_t> out,
                                            const std::string& name = "p") {
  Result<std::vector<ArgValue>> bound =
      bind_args(OpKind::MaxPool2dWithIndices, {{"self", x},
                                               {"kernel_size", std::vector<int64_t>{3, 3}},
                                               {"stride", std::vector<int64_t>{2, 2}},
                                               {"padding", std::vector<int64_t>{1, 1}}});
  REQUIRE(bound.ok());
  const bool first = name == "p";  // the values of the single pooling are "v" and "i"
  NodeId p = g.add_node(OpKind::MaxPool2dWithIndices, name, std::move(bound).value(),
                        {first ? "v" : name + "_v", first ? "i" : name + "_i"},
                        {spec(out), TensorSpec::make(DType::kInt64, out)});
  return {g.node(p).outputs[0], g.node(p).outputs[1]};
}

// x -> max_pool2d_with_indices(3x3, stride 2, padding 1) -> (v, i) -> neg(v); i a graph
// output or not.
Graph pool(bool indices_out) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 2, 9, 7}));
  const auto [v, i] = max_pool_3x3_s2(g, x, {1, 2, 5, 4});
  ValueId y = node(g, OpKind::Neg, "y", {{"self", v}}, spec({1, 2, 5, 4}));
  g.set_outputs(indices_out ? std::vector<ValueId>{y, i} : std::vector<ValueId>{y});
  return g;
}

TEST_CASE("max pooling leaves indices nothing reads unwritten, and writes those a caller sees") {
  for (bool indices_out : {false, true}) {
    INFO("indices are a graph output: " << indices_out);
    Graph g = pool(indices_out);
    const pte::File f = export_graph(g);
    auto runtime = std::move(rt::make_cpu_runtime()).value();
    Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, runtime->env());
    REQUIRE(m.ok());
    std::vector<float> x(2 * 9 * 7);
    for (size_t k = 0; k < x.size(); ++k)
      x[k] = std::cos(static_cast<float>(k) * 0.7f);
    REQUIRE((*m)->set_input(0, x.data(), x.size() * 4).ok());
    // Mark the indices' memory, to see whether the kernel writes it.
    const rt::TensorView* idx = nullptr;
    for (const rt::Value& v : (*m)->values()) {
      if (v.is_tensor() && v.tensor.dtype == DType::kInt64) idx = &v.tensor;
    }
    REQUIRE(idx != nullptr);
    std::fill_n(static_cast<int64_t*>(idx->data), 40, int64_t{-7});
    REQUIRE((*m)->execute().ok());
    const int64_t* got = static_cast<const int64_t*>(idx->data);
    // The maxima are right either way: y = -max over each window.
    const float* y = static_cast<const float*>((*m)->output(0).data);
    for (int64_t c = 0; c < 2; ++c) {
      for (int64_t oh = 0; oh < 5; ++oh) {
        for (int64_t ow = 0; ow < 4; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          int64_t at = -1;
          for (int64_t ih = oh * 2 - 1; ih <= oh * 2 + 1; ++ih) {
            for (int64_t iw = ow * 2 - 1; iw <= ow * 2 + 1; ++iw) {
              if (ih < 0 || ih >= 9 || iw < 0 || iw >= 7) continue;
              if (x[static_cast<size_t>((c * 9 + ih) * 7 + iw)] > best) {
                best = x[static_cast<size_t>((c * 9 + ih) * 7 + iw)];
                at = ih * 7 + iw;
              }
            }
          }
          const int64_t o = (c * 5 + oh) * 4 + ow;
          REQUIRE(y[o] == -best);
          REQUIRE(got[o] == (indices_out ? at : -7));
        }
      }
    }
  }
}

TEST_CASE("poolings whose unread indices share bytes leave them all unwritten") {
  // x -> pool -> neg -> pool -> neg -> y: each pooling's indices die where they are written,
  // and a plan may give both the same bytes (googlenet's 13 poolings share theirs, and each
  // computed its indices only because another pooling wrote over them). Here the program is
  // made to share them: the second indices placed over the first's. A pooling writing there
  // reads nothing: both stay unwritten.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 8, 9, 7}));
  ValueId v1 = max_pool_3x3_s2(g, x, {1, 8, 5, 4}, "p1").first;
  ValueId n1 = node(g, OpKind::Neg, "n1", {{"self", v1}}, spec({1, 8, 5, 4}));
  ValueId v2 = max_pool_3x3_s2(g, n1, {1, 8, 3, 2}, "p2").first;
  ValueId y = node(g, OpKind::Neg, "y", {{"self", v2}}, spec({1, 8, 3, 2}));
  g.set_outputs({y});
  pte::File f = export_graph(g);
  std::vector<pte::Tensor*> planned_indices;
  for (pte::EValue& v : f.program.plans[0].values) {
    if (v.kind == pte::ValueKind::kTensor && v.tensor.scalar_type == 4 && v.tensor.allocation)
      planned_indices.push_back(&v.tensor);  // int64 (ScalarType 4), planned
  }
  REQUIRE(planned_indices.size() == 2);
  planned_indices[1]->allocation = planned_indices[0]->allocation;  // dead apart: valid
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, runtime->env());
  REQUIRE(m.ok());
  std::vector<const rt::TensorView*> indices;
  for (const rt::Value& v : (*m)->values()) {
    if (v.is_tensor() && v.tensor.dtype == DType::kInt64 && v.tensor.data != nullptr)
      indices.push_back(&v.tensor);
  }
  REQUIRE(indices.size() == 2);
  const auto* a0 = static_cast<const char*>(indices[0]->data);
  const auto* b0 = static_cast<const char*>(indices[1]->data);
  REQUIRE((a0 < b0 + indices[1]->nbytes() && b0 < a0 + indices[0]->nbytes()));  // shared bytes
  std::vector<float> xv(8 * 9 * 7);
  for (size_t k = 0; k < xv.size(); ++k)
    xv[k] = std::sin(static_cast<float>(k) * 1.3f);
  REQUIRE((*m)->set_input(0, xv.data(), xv.size() * 4).ok());
  for (const rt::TensorView* t : indices)
    std::fill_n(static_cast<int64_t*>(t->data), t->numel(), int64_t{-7});
  REQUIRE((*m)->execute().ok());
  for (const rt::TensorView* t : indices) {
    const auto* got = static_cast<const int64_t*>(t->data);
    CHECK(std::all_of(got, got + t->numel(), [](int64_t v) { return v == -7; }));
  }
  // The values: pool(-pool(x)) by hand.
  auto pool_ref = [](const std::vector<float>& in, int64_t h, int64_t w, int64_t oh_n,
                     int64_t ow_n) {
    std::vector<float> out;
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow) {
          float best = -std::numeric_limits<float>::infinity();
          for (int64_t ih = oh * 2 - 1; ih <= oh * 2 + 1; ++ih)
            for (int64_t iw = ow * 2 - 1; iw <= ow * 2 + 1; ++iw)
              if (ih >= 0 && ih < h && iw >= 0 && iw < w)
                best = std::max(best, in[static_cast<size_t>((c * h + ih) * w + iw)]);
          out.push_back(best);
        }
    return out;
  };
  std::vector<float> p1 = pool_ref(xv, 9, 7, 5, 4);
  for (float& v : p1)
    v = -v;
  const std::vector<float> p2 = pool_ref(p1, 5, 4, 3, 2);
  const float* yv = static_cast<const float*>((*m)->output(0).data);
  for (size_t k = 0; k < p2.size(); ++k)
    CHECK(yv[k] == -p2[k]);
}

// ---- Channels-last chains (Method::plan_channels_last) -----------------------------------

// mean over H and W of x [1, channels, H, W], kept 4-d: "y".
ValueId global_mean(Graph& g, ValueId x, int64_t channels) {
  return node(g, OpKind::MeanDim, "y",
              {{"self", x}, {"dim", std::vector<int64_t>{2, 3}}, {"keepdim", true}},
              spec({1, channels, 1, 1}));
}

// x -> conv 3x3 (16 -> 48) -> relu -> r1 -> depthwise 3x3 -> relu6 -> r2 -> conv 1x1 -> + r1
// -> s -> conv 3x3 stride 2 (48 -> 16) -> t -> mean over H, W -> y. With `side_reader`, r1 is
// also read by a neg (a second output), which is not a convolution.
Graph inverted_residual(bool side_reader) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {48, 16, 3, 3}, 11),
                      constant(g, "b1", {48}, 12), 1, 1, 1, spec({1, 48, 40, 40}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 48, 40, 40}));
  ValueId dw = conv_s(g, "dw", r1, constant(g, "w2", {48, 1, 3, 3}, 13),
                      constant(g, "b2", {48}, 14), 1, 1, 48, spec({1, 48, 40, 40}));
  ValueId r2 = node(g, OpKind::Hardtanh, "r2",
                    {{"self", dw}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 48, 40, 40}));
  ValueId pw = conv_s(g, "pw", r2, constant(g, "w3", {48, 48, 1, 1}, 15), std::monostate{}, 1, 0, 1,
                      spec({1, 48, 40, 40}));
  ValueId s = node(g, OpKind::AddTensor, "s", {{"self", pw}, {"other", r1}}, spec({1, 48, 40, 40}));
  ValueId t = conv_s(g, "t", s, constant(g, "w4", {16, 48, 3, 3}, 16), constant(g, "b4", {16}, 17),
                     2, 1, 1, spec({1, 16, 20, 20}));
  ValueId y = global_mean(g, t, 16);
  if (side_reader) {
    ValueId n = node(g, OpKind::Neg, "n", {{"self", r1}}, spec({1, 48, 40, 40}));
    g.set_outputs({y, n});
  } else {
    g.set_outputs({y});
  }
  return g;
}

struct ChainRun {
  std::vector<float> y;
  size_t channels_last = 0;
};

// `nan_at`: input elements set to NaN.
ChainRun run_chain(const pte::File& f, bool onednn, int threads, size_t input_numel = 16 * 40 * 40,
                   const std::vector<size_t>& nan_at = {}) {
  const rt::test::OnednnScope scope(onednn);
  struct Threads {  // the default count again at the end, also when a REQUIRE fails
    explicit Threads(int n) { rt::kernels::set_num_threads(n); }
    ~Threads() { rt::kernels::set_num_threads(0); }
  } thread_count(threads);
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, runtime->env());
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  std::vector<float> x(input_numel);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i : nan_at)
    x.at(i) = std::numeric_limits<float>::quiet_NaN();
  for (int call = 0; call < 2; ++call) {  // twice: the same state, the same bits
    REQUIRE((*m)->set_input(0, x.data(), x.size() * 4).ok());
    const Status st = (*m)->execute();
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  const rt::TensorView& y = (*m)->output(0);
  ChainRun out;
  out.y.assign(static_cast<const float*>(y.data), static_cast<const float*>(y.data) + y.numel());
  out.channels_last = (*m)->channels_last_convolutions();
  return out;
}

// Runs `f` on etc's own kernels (NCHW everywhere) and with oneDNN at 1 and at 3 threads:
// with oneDNN built in, `channels_last` steps run channels-last (none without it); the same
// bits at both thread counts; etc's own kernels within rounding; not all zero. Returns the
// run on etc's own kernels.
ChainRun check_chain(const pte::File& f, size_t channels_last, size_t input_numel = 16 * 40 * 40) {
  const ChainRun own = run_chain(f, false, 1, input_numel);
  CHECK(own.channels_last == 0);
  const ChainRun one = run_chain(f, true, 1, input_numel);
  const ChainRun three = run_chain(f, true, 3, input_numel);
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == channels_last);
#else
  (void)channels_last;
  CHECK(one.channels_last == 0);
#endif
  REQUIRE(one.y.size() == own.y.size());
  CHECK(std::memcmp(one.y.data(), three.y.data(), one.y.size() * 4) == 0);
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(one.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
  CHECK(*std::max_element(own.y.begin(), own.y.end()) > 0.1f);
  return own;
}

TEST_CASE("tensors only oneDNN convolutions read stay channels-last between them") {
  Graph g = inverted_residual(false);
  // c1, dw and pw write channels-last (the residual add joins pw to c1); dw, pw and t read it;
  // t writes channels-last too, for the mean over H and W, which reads either layout.
  check_chain(export_graph(g), 5);
}

TEST_CASE("a first layer of few input channels writes a chain's first tensor channels-last") {
  // x [1, 3, 128, 128] -> conv 3x3 stride 2 (3 -> 32) -> relu6 -> depthwise 3x3 -> relu ->
  // conv 1x1 (32 -> 32) -> mean. The first layer runs etc's direct loop and writes its out
  // (and relu6's) channels-last for the depthwise layer.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 3, 128, 128}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {32, 3, 3, 3}, 31), constant(g, "b1", {32}, 32),
                      2, 1, 1, spec({1, 32, 64, 64}));
  ValueId r1 = node(g, OpKind::Hardtanh, "r1",
                    {{"self", c1}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 32, 64, 64}));
  ValueId dw = conv_s(g, "dw", r1, constant(g, "w2", {32, 1, 3, 3}, 33),
                      constant(g, "b2", {32}, 34), 1, 1, 32, spec({1, 32, 64, 64}));
  ValueId r2 = node(g, OpKind::Relu, "r2", {{"self", dw}}, spec({1, 32, 64, 64}));
  ValueId pw = conv_s(g, "pw", r2, constant(g, "w3", {32, 32, 1, 1}, 35), std::monostate{}, 1, 0, 1,
                      spec({1, 32, 64, 64}));
  ValueId y = global_mean(g, pw, 32);
  g.set_outputs({y});
  // c1 writes channels-last, dw reads and writes, pw reads (and writes, for the mean).
  check_chain(export_graph(g), 4, 3 * 128 * 128);
}

TEST_CASE("small 1x1 layers stay in a chain on etc's own channels-last kernel") {
  // mnasnet0_5's first blocks, small: x [1, 3, 128, 128] -> conv 3x3 stride 2 (3 -> 16) ->
  // relu -> depthwise 3x3 (16) -> relu -> conv 1x1 (16 -> 8) -> conv 1x1 (8 -> 24) -> relu ->
  // depthwise 3x3 stride 2 (24) -> relu -> conv 1x1 (24 -> 16) -> mean. The 8 -> 24 layer
  // (fewer than 16 inputs) and the 24 -> 16 one (393 K multiply-adds) are too small for
  // oneDNN: etc's kernel runs them channels-last (kPointwiseNhwc), so the depthwise layers
  // of 16 and 24 channels between them run on oneDNN in the chain too. Every convolution
  // and the mean read or write channels-last.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 3, 128, 128}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {16, 3, 3, 3}, 61), constant(g, "b1", {16}, 62),
                      2, 1, 1, spec({1, 16, 64, 64}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 16, 64, 64}));
  ValueId dw1 = conv_s(g, "dw1", r1, constant(g, "w2", {16, 1, 3, 3}, 63),
                       constant(g, "b2", {16}, 64), 1, 1, 16, spec({1, 16, 64, 64}));
  ValueId r2 = node(g, OpKind::Relu, "r2", {{"self", dw1}}, spec({1, 16, 64, 64}));
  ValueId p1 = conv_s(g, "p1", r2, constant(g, "w3", {8, 16, 1, 1}, 65), constant(g, "b3", {8}, 66),
                      1, 0, 1, spec({1, 8, 64, 64}));
  ValueId p2 = conv_s(g, "p2", p1, constant(g, "w4", {24, 8, 1, 1}, 67),
                      constant(g, "b4", {24}, 68), 1, 0, 1, spec({1, 24, 64, 64}));
  ValueId r3 = node(g, OpKind::Relu, "r3", {{"self", p2}}, spec({1, 24, 64, 64}));
  ValueId dw2 = conv_s(g, "dw2", r3, constant(g, "w5", {24, 1, 3, 3}, 69),
                       constant(g, "b5", {24}, 70), 2, 1, 24, spec({1, 24, 32, 32}));
  ValueId r4 = node(g, OpKind::Relu, "r4", {{"self", dw2}}, spec({1, 24, 32, 32}));
  ValueId p3 = conv_s(g, "p3", r4, constant(g, "w6", {16, 24, 1, 1}, 71),
                      constant(g, "b6", {16}, 72), 1, 0, 1, spec({1, 16, 32, 32}));
  ValueId y = global_mean(g, p3, 16);
  g.set_outputs({y});
  check_chain(export_graph(g), 7, 3 * 128 * 128);
}

// x [1, 16, 40, 40] -> conv 3x3 (16 -> 32) -> relu -> max pool 3x3 stride 2 -> p -> conv 3x3
// (32 -> 32) -> + p -> conv 3x3 -> mean (resnet18's stem and first block, small). With
// `indices_read`, the pooling's indices are a graph output.
Graph stem(bool indices_read) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {32, 16, 3, 3}, 41),
                      constant(g, "b1", {32}, 42), 1, 1, 1, spec({1, 32, 40, 40}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 32, 40, 40}));
  const auto [v, indices] = max_pool_3x3_s2(g, r1, {1, 32, 20, 20});
  ValueId c2 = conv_s(g, "c2", v, constant(g, "w2", {32, 32, 3, 3}, 43),
                      constant(g, "b2", {32}, 44), 1, 1, 1, spec({1, 32, 20, 20}));
  ValueId s = node(g, OpKind::AddTensor, "s", {{"self", c2}, {"other", v}}, spec({1, 32, 20, 20}));
  ValueId c3 = conv_s(g, "c3", s, constant(g, "w3", {32, 32, 3, 3}, 45),
                      constant(g, "b3", {32}, 46), 1, 1, 1, spec({1, 32, 20, 20}));
  ValueId y = global_mean(g, c3, 32);
  g.set_outputs(indices_read ? std::vector<ValueId>{y, indices} : std::vector<ValueId>{y});
  return g;
}

TEST_CASE("a max pooling between oneDNN convolutions runs channels-last with them") {
  Graph plain = stem(false), indices = stem(true);
  // c1 writes channels-last, the pooling reads and writes, c2 (whose residual add reads the
  // pooling's out) reads and writes, c3 reads and writes, the mean reads.
  const ChainRun own = check_chain(export_graph(plain), 5);
  // Indices a caller reads: the pooling computes them, NCHW, and so the convolutions around it
  // (c3, after the residual add, writes channels-last for the mean).
  const ChainRun read = run_chain(export_graph(indices), true, 1);
  CHECK(read.channels_last == (ETC_WITH_ONEDNN ? 2 : 0));
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(read.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("a tensor another kernel reads stays NCHW, with the convolutions tied to it") {
  Graph g = inverted_residual(true);
  const pte::File f = export_graph(g);
  const ChainRun own = run_chain(f, false, 1), chained = run_chain(f, true, 2);
#if ETC_WITH_ONEDNN
  // r1 is read by the neg: c1 and pw (whose residual add reads r1) stay NCHW; only dw's out
  // (read by pw alone) is channels-last: dw writes it, pw reads it. t (reading the add's NCHW
  // out) writes channels-last for the mean.
  CHECK(chained.channels_last == 4);
#else
  CHECK(chained.channels_last == 0);
#endif
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(chained.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("a clamp after a oneDNN convolution is its post-op: NaN becomes the lower bound") {
  // x [1, 24, 24, 24] -> conv 3x3 (24 -> 64) -> relu6 -> conv 1x1 (64 -> 64) -> mean, with one
  // input pixel NaN. c1's outs around it are NaN. etc's own relu6 keeps NaN, and the 1x1
  // layer and the mean spread it to every channel; oneDNN's clip (its post-op on c1, whose out
  // is channels-last) makes it 0, as XNNPACK's clamps do, and every output stays finite.
  // (24 inputs: not whole vectors, so c1 runs on oneDNN, not on etc's Winograd.)
  Graph g;
  ValueId x = g.add_input("x", spec({1, 24, 24, 24}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {64, 24, 3, 3}, 51),
                      constant(g, "b1", {64}, 52), 1, 1, 1, spec({1, 64, 24, 24}));
  ValueId r1 = node(g, OpKind::Hardtanh, "r1",
                    {{"self", c1}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 64, 24, 24}));
  ValueId pw = conv_s(g, "pw", r1, constant(g, "w2", {64, 64, 1, 1}, 53),
                      constant(g, "b2", {64}, 54), 1, 0, 1, spec({1, 64, 24, 24}));
  g.set_outputs({global_mean(g, pw, 64)});
  const pte::File f = export_graph(g);
  const size_t numel = 24 * 24 * 24, nan_pixel = 5 * 24 + 7;  // channel 0, row 5, column 7
  // Finite inputs: the same values either way (within rounding), at any thread count.
  check_chain(f, 3, numel);
  const ChainRun own = run_chain(f, false, 1, numel, {nan_pixel});
  const ChainRun one = run_chain(f, true, 1, numel, {nan_pixel});
  const ChainRun three = run_chain(f, true, 3, numel, {nan_pixel});
  REQUIRE(own.y.size() == 64);
  CHECK(std::all_of(own.y.begin(), own.y.end(), [](float v) { return std::isnan(v); }));
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == 3);
  CHECK(std::all_of(one.y.begin(), one.y.end(), [](float v) { return std::isfinite(v); }));
  CHECK(std::memcmp(one.y.data(), three.y.data(), one.y.size() * 4) == 0);
#else
  CHECK(std::all_of(one.y.begin(), one.y.end(), [](float v) { return std::isnan(v); }));
  (void)three;
#endif
}

TEST_CASE("3x3 layers run etc's Winograd in a chain, with the NCHW kernel's bits") {
  // x [1, 16, 24, 24] -> conv 3x3 (16 -> 32) -> relu -> max pool 3x3 / 2 -> conv 3x3 (32 ->
  // 32) -> relu -> neg -> y: both layers on etc's Winograd in a chain, the first reading the
  // method's NCHW input, the last writing NCHW for the neg, the pooling channels-last between
  // them. On etc's NCHW kernels (oneDNN off) both run the NCHW Winograd (144 and 36 tiles):
  // the same bits, at 1 and 3 threads.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 24, 24}));
  ValueId a = conv(g, "a", x, constant(g, "wa", {32, 16, 3, 3}, 71), constant(g, "ba", {32}, 72), 1,
                   1, spec({1, 32, 24, 24}));
  ValueId r = node(g, OpKind::Relu, "r", {{"self", a}}, spec({1, 32, 24, 24}));
  const ValueId p = max_pool_3x3_s2(g, r, {1, 32, 12, 12}).first;
  ValueId b = conv(g, "b", p, constant(g, "wb", {32, 32, 3, 3}, 73), constant(g, "bb", {32}, 74), 1,
                   1, spec({1, 32, 12, 12}));
  ValueId rb = node(g, OpKind::Relu, "rb", {{"self", b}}, spec({1, 32, 12, 12}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", rb}}, spec({1, 32, 12, 12}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const ChainRun own = run_chain(f, false, 1, 16 * 24 * 24);
  const ChainRun one = run_chain(f, true, 1, 16 * 24 * 24);
  const ChainRun three = run_chain(f, true, 3, 16 * 24 * 24);
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == 3);
#endif
  REQUIRE(one.y.size() == own.y.size());
  CHECK(std::memcmp(one.y.data(), own.y.data(), own.y.size() * 4) == 0);
  CHECK(std::memcmp(three.y.data(), own.y.data(), own.y.size() * 4) == 0);
  CHECK(*std::min_element(own.y.begin(), own.y.end()) < -0.1f);
}

// x -> conv a (16 -> 32) -> relu, x -> conv b (16 -> 24); cat([a, b], `dim`) -> conv c -> mean:
// squeezenet's fire module, small. `input_item`: x is cat's first item instead of a;
// `side_reader`: the cat's out is also read by a neg (a second output).
struct CatCase {
  int64_t dim = 1;
  bool input_item = false;
  bool side_reader = false;
};

Graph cat_block(const CatCase& c) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId a = conv_s(g, "a", x, constant(g, "wa", {32, 16, 3, 3}, 21), constant(g, "ba", {32}, 22),
                     1, 1, 1, spec({1, 32, 40, 40}));
  ValueId ra = node(g, OpKind::Relu, "ra", {{"self", a}}, spec({1, 32, 40, 40}));
  ValueId b = conv_s(g, "b", x, constant(g, "wb", {24, 16, 3, 3}, 23), constant(g, "bb", {24}, 24),
                     1, 1, 1, spec({1, 24, 40, 40}));
  const ValueId first = c.input_item ? x : ra;
  const int64_t first_c = c.input_item ? 16 : 32;
  std::vector<int64_t> joined{1, first_c + 24, 40, 40};
  if (c.dim == 2) {
    b = conv_s(g, "b2", b, constant(g, "wb2", {first_c, 24, 1, 1}, 26), std::monostate{}, 1, 0, 1,
               spec({1, first_c, 40, 40}));
    joined = {1, first_c, 80, 40};
  }
  ValueId cat = node(g, OpKind::Cat, "cat",
                     {{"tensors", std::vector<ValueId>{first, b}}, {"dim", c.dim}}, spec(joined));
  ValueId conv = conv_s(g, "c", cat, constant(g, "wc", {16, joined[1], 3, 3}, 25), std::monostate{},
                        1, 1, 1, spec({1, 16, joined[2], 40}));
  ValueId y = global_mean(g, conv, 16);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", cat}}, spec(joined))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a cat along the channels of channels-last tensors runs channels-last with them") {
  // a (with its relu), b and c write or read channels-last, the cat joins each position's
  // channels item by item: the chain goes on through it.
  Graph plain = cat_block(CatCase{}), minus3 = cat_block(CatCase{-3});
  const ChainRun own = check_chain(export_graph(plain), 5);
  // -3 names the same dimension.
  const ChainRun neg = check_chain(export_graph(minus3), 5);
  CHECK(std::memcmp(own.y.data(), neg.y.data(), own.y.size() * 4) == 0);
}

TEST_CASE("a cat stays NCHW, with its items, where anything but the chain reads or writes them") {
  // An item from outside every group (the method's input), a join along the rows, and a cat
  // another kernel reads: the cat and the convolutions whose outs it joins stay NCHW.
  // c (a oneDNN 3x3 layer reading the NCHW cat) writes channels-last for the mean; along the
  // rows, b writes channels-last for b2 too, which writes its out NCHW for the cat.
  const std::pair<CatCase, size_t> cases[] = {
      {CatCase{1, true, false}, 2}, {CatCase{2, false, false}, 4}, {CatCase{1, false, true}, 2}};
  for (const auto& [c, steps] : cases) {
    CAPTURE(c.dim, c.input_item, c.side_reader);
    Graph g = cat_block(c);
    const pte::File f = export_graph(g);
    const ChainRun own = run_chain(f, false, 1), chained = run_chain(f, true, 2);
    CHECK(chained.channels_last == (ETC_WITH_ONEDNN ? steps : 0));
    REQUIRE(chained.y.size() == own.y.size());
    for (size_t i = 0; i < own.y.size(); ++i)
      CHECK(chained.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
  }
}

// x -> conv 3x3 (16 -> 48) -> silu -> a; squeeze-and-excitation: global mean of a (adaptive
// average pooling, or mean over H and W with `mean_dim`) -> conv 1x1 (48 -> 8) -> relu ->
// conv 1x1 (8 -> 48) -> sigmoid -> s; s * a (a * s with `scaled_first`) -> conv 1x1 (48 ->
// 48) -> b: efficientnet's block, small, `blocks` times (b the next block's c1 out), then a
// mean over H, W -> y. With `side_reader`, the first a is also read by a neg (a second
// output).
struct SeCase {
  bool mean_dim = false;
  bool scaled_first = false;
  bool side_reader = false;
  int blocks = 1;
};

Graph se_block(const SeCase& c) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId b = conv_s(g, "c1", x, constant(g, "w1", {48, 16, 3, 3}, 61), constant(g, "b1", {48}, 62),
                     1, 1, 1, spec({1, 48, 40, 40}));
  ValueId first_a;
  for (int k = 0; k < c.blocks; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(70 + 10 * k);
    ValueId a = node(g, OpKind::Silu, "a" + n, {{"self", b}}, spec({1, 48, 40, 40}));
    if (k == 0) first_a = a;
    ValueId m =
        c.mean_dim
            ? node(g, OpKind::MeanDim, "m" + n,
                   {{"self", a}, {"dim", std::vector<int64_t>{-1, -2}}, {"keepdim", true}},
                   spec({1, 48, 1, 1}))
            : node(g, OpKind::AdaptiveAvgPool2d, "m" + n,
                   {{"self", a}, {"output_size", std::vector<int64_t>{1, 1}}}, spec({1, 48, 1, 1}));
    ValueId q = conv_s(g, "q" + n, m, constant(g, "wq" + n, {8, 48, 1, 1}, seed),
                       constant(g, "bq" + n, {8}, seed + 1), 1, 0, 1, spec({1, 8, 1, 1}));
    ValueId qr = node(g, OpKind::Relu, "qr" + n, {{"self", q}}, spec({1, 8, 1, 1}));
    ValueId e = conv_s(g, "e" + n, qr, constant(g, "we" + n, {48, 8, 1, 1}, seed + 2),
                       constant(g, "be" + n, {48}, seed + 3), 1, 0, 1, spec({1, 48, 1, 1}));
    ValueId sc = node(g, OpKind::Sigmoid, "sc" + n, {{"self", e}}, spec({1, 48, 1, 1}));
    ValueId scaled = c.scaled_first ? node(g, OpKind::MulTensor, "mul" + n,
                                           {{"self", a}, {"other", sc}}, spec({1, 48, 40, 40}))
                                    : node(g, OpKind::MulTensor, "mul" + n,
                                           {{"self", sc}, {"other", a}}, spec({1, 48, 40, 40}));
    b = conv_s(g, "p" + n, scaled, constant(g, "wp" + n, {48, 48, 1, 1}, seed + 4),
               std::monostate{}, 1, 0, 1, spec({1, 48, 40, 40}));
  }
  ValueId y = global_mean(g, b, 48);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", first_a}}, spec({1, 48, 40, 40}))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a squeeze-and-excitation block runs channels-last between its convolutions") {
  // c1 writes channels-last (with its silu), the global mean reads it, the product by the
  // block's scales reads and writes it, p reads it (and writes it for the last mean): the
  // chain goes through the block.
  for (const SeCase& c : {SeCase{}, SeCase{true, false}, SeCase{false, true}}) {
    CAPTURE(c.mean_dim, c.scaled_first);
    Graph g = se_block(c);
    check_chain(export_graph(g), 5);
  }
  // Three blocks: the later blocks' scales (a sigmoid run as its convolution's epilogue) are
  // planned over the bytes of chain tensors dead by then, which the epilogue writes anew: the
  // chain holds (c1, then a mean, a product and a convolution per block, then the last mean).
  Graph three = se_block(SeCase{false, false, false, 3});
  check_chain(export_graph(three), 11);
  // A tensor another kernel reads: c1 and the product stay NCHW (p reads the product, and
  // writes channels-last for the last mean).
  Graph side = se_block(SeCase{false, false, true});
  const pte::File f = export_graph(side);
  const ChainRun own = run_chain(f, false, 1), chained = run_chain(f, true, 2);
  CHECK(chained.channels_last == (ETC_WITH_ONEDNN ? 2 : 0));
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(chained.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

// Inference batch norm of x ([1, c, h, w]) with positive variances, then relu (densenet's
// pre-activation): the relu's out.
ValueId batch_norm_relu(Graph& g, const std::string& name, ValueId x, int64_t c,
                        std::vector<int64_t> sizes, uint32_t seed) {
  TensorSpec var = spec({c});
  std::string bytes(static_cast<size_t>(4 * c), '\0');
  for (int64_t k = 0; k < c; ++k) {
    const float f = 0.5f + 0.1f * static_cast<float>((seed * 7 + k * 3) % 10);
    std::memcpy(bytes.data() + 4 * k, &f, 4);
  }
  var.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
  Result<std::vector<ArgValue>> bound =
      bind_args(OpKind::NativeBatchNormNoTraining,
                {{"input", x},
                 {"weight", constant(g, name + "_gamma", {c}, seed)},
                 {"bias", constant(g, name + "_beta", {c}, seed + 1)},
                 {"running_mean", constant(g, name + "_mean", {c}, seed + 2)},
                 {"running_var", g.add_constant(name + "_var", std::move(var))},
                 {"momentum", 0.1},
                 {"eps", 1e-5}});
  REQUIRE(bound.ok());
  NodeId bn = g.add_node(OpKind::NativeBatchNormNoTraining, name, std::move(bound).value(),
                         {name + "0", name + "1", name + "2"}, {spec(sizes), spec({0}), spec({0})});
  return node(g, OpKind::Relu, name + "_relu", {{"self", g.node(bn).outputs[0]}}, spec(sizes));
}

// densenet, small: x -> conv 3x3 (16 -> 32) -> f0; two dense layers, each cat(all f so far)
// -> batch norm -> relu -> conv 1x1 (-> 48) -> relu -> conv 3x3 (48 -> 16) -> f1, f2; a
// transition: cat(f0, f1, f2) -> batch norm -> relu -> conv 1x1 (64 -> 32) -> average pooling
// 2x2 -> conv 3x3 (32 -> 32) -> mean.
Graph dense_block() {
  Graph g;
  auto sized = [](int64_t c, int64_t h) { return std::vector<int64_t>{1, c, h, h}; };
  ValueId x = g.add_input("x", spec(sized(16, 40)));
  std::vector<ValueId> features{conv_s(g, "f0", x, constant(g, "w0", {32, 16, 3, 3}, 81),
                                       constant(g, "b0", {32}, 82), 1, 1, 1, spec(sized(32, 40)))};
  int64_t channels = 32;
  for (int k = 1; k <= 2; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(90 + 10 * k);
    ValueId joined = node(g, OpKind::Cat, "cat" + n, {{"tensors", features}, {"dim", int64_t{1}}},
                          spec(sized(channels, 40)));
    ValueId r = batch_norm_relu(g, "bn" + n, joined, channels, sized(channels, 40), seed);
    ValueId b = conv_s(g, "pw" + n, r, constant(g, "wp" + n, {48, channels, 1, 1}, seed + 5),
                       constant(g, "bp" + n, {48}, seed + 6), 1, 0, 1, spec(sized(48, 40)));
    ValueId br = node(g, OpKind::Relu, "pr" + n, {{"self", b}}, spec(sized(48, 40)));
    features.push_back(conv_s(g, "f" + n, br, constant(g, "wf" + n, {16, 48, 3, 3}, seed + 7),
                              std::monostate{}, 1, 1, 1, spec(sized(16, 40))));
    channels += 16;
  }
  ValueId joined = node(g, OpKind::Cat, "cat_t", {{"tensors", features}, {"dim", int64_t{1}}},
                        spec(sized(channels, 40)));
  ValueId r = batch_norm_relu(g, "bn_t", joined, channels, sized(channels, 40), 131);
  ValueId t = conv_s(g, "t", r, constant(g, "wt", {32, channels, 1, 1}, 136), std::monostate{}, 1,
                     0, 1, spec(sized(32, 40)));
  ValueId pooled = node(g, OpKind::AvgPool2d, "avg",
                        {{"self", t},
                         {"kernel_size", std::vector<int64_t>{2, 2}},
                         {"stride", std::vector<int64_t>{2, 2}}},
                        spec(sized(32, 20)));
  ValueId c = conv_s(g, "c", pooled, constant(g, "wc", {32, 32, 3, 3}, 137),
                     constant(g, "bc", {32}, 138), 1, 1, 1, spec(sized(32, 20)));
  g.set_outputs({global_mean(g, c, 32)});
  return g;
}

TEST_CASE("a dense block's batch norms, cats and average pooling run channels-last") {
  // Every step: f0, per layer its cat, batch norm (with its relu), 1x1 and 3x3 convolutions;
  // the transition's cat, batch norm, 1x1 convolution, pooling and 3x3 convolution; the mean.
  // f0 is an item of all three cats.
  Graph g = dense_block();
  check_chain(export_graph(g), 1 + 2 * 4 + 5 + 1);
}

// convnext, small: x -> conv 3x3 (16 -> 32) -> r0; `blocks` blocks, each r -> depthwise 7x7
// -> permute to [N, H, W, C] -> view [1600, 32] -> mm by [32, 32] (mixes the channels of each
// position) -> view [1, 40, 40, 32] -> permute back -> times a layer scale (`scale` sizes,
// [32, 1, 1] or [1, 32, 1, 1]) -> + r -> the next r; then a mean over H, W -> y. With
// `side_reader`, the first block's permute back is also read by a neg (a second output).
struct NextCase {
  std::vector<int64_t> scale{32, 1, 1};
  bool side_reader = false;
  int blocks = 2;
};

Graph next_block(const NextCase& c) {
  Graph g;
  const std::vector<int64_t> nchw{1, 32, 40, 40}, nhwc{1, 40, 40, 32};
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId r = conv_s(g, "stem", x, constant(g, "ws", {32, 16, 3, 3}, 151),
                     constant(g, "bs", {32}, 152), 1, 1, 1, spec(nchw));
  ValueId first_back;
  for (int k = 0; k < c.blocks; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(160 + 10 * k);
    ValueId d = conv_s(g, "dw" + n, r, constant(g, "wd" + n, {32, 1, 7, 7}, seed),
                       constant(g, "bd" + n, {32}, seed + 1), 1, 3, 32, spec(nchw));
    ValueId p = node(g, OpKind::Permute, "to" + n,
                     {{"self", d}, {"dims", std::vector<int64_t>{0, 2, 3, 1}}}, spec(nhwc));
    ValueId v = node(g, OpKind::View, "v" + n,
                     {{"self", p}, {"size", std::vector<int64_t>{1600, 32}}}, spec({1600, 32}));
    ValueId m =
        node(g, OpKind::Mm, "mm" + n,
             {{"self", v}, {"mat2", constant(g, "wm" + n, {32, 32}, seed + 2)}}, spec({1600, 32}));
    ValueId u = node(g, OpKind::View, "u" + n, {{"self", m}, {"size", nhwc}}, spec(nhwc));
    ValueId back = node(g, OpKind::Permute, "back" + n,
                        {{"self", u}, {"dims", std::vector<int64_t>{0, 3, 1, 2}}}, spec(nchw));
    if (k == 0) first_back = back;
    ValueId scaled =
        node(g, OpKind::MulTensor, "ls" + n,
             {{"self", constant(g, "gamma" + n, c.scale, seed + 3)}, {"other", back}}, spec(nchw));
    r = node(g, OpKind::AddTensor, "res" + n, {{"self", scaled}, {"other", r}}, spec(nchw));
  }
  ValueId y = global_mean(g, r, 32);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", first_back}}, spec(nchw))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a convnext block runs channels-last from one depthwise layer to the next") {
  // The stem, and per block the depthwise layer, both permutes (the first reads the chain
  // tensor's bytes as [N, H, W, C]; the second writes a chain tensor with the bytes of its
  // input), the layer scale and the residual sum; then the mean. The mm mixes each position's
  // channels, so a permute that moved the wrong bytes would change the outputs.
  for (const NextCase& c : {NextCase{}, NextCase{{1, 32, 1, 1}}}) {
    CAPTURE(c.scale);
    Graph g = next_block(c);
    check_chain(export_graph(g), 1 + 2 * 5 + 1);
  }
  // The first permute back is read by another kernel too: it stays NCHW, and with it its
  // layer scale, the sums (the residual stream is one layout), the stem and the mean. Each
  // depthwise layer still writes channels-last for its permute to [N, H, W, C].
  Graph side = next_block(NextCase{{32, 1, 1}, true});
  const pte::File f = export_graph(side);
  const ChainRun own = run_chain(f, false, 1), chained = run_chain(f, true, 2);
  CHECK(chained.channels_last == (ETC_WITH_ONEDNN ? 2 * 2 : 0));
  REQUIRE(chained.y.size() == own.y.size());
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(chained.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

// Graphs of every kind the load planner fuses: convolutions with epilogues, attention,
// pooling, int4 weight-only products, an inverted residual block and a stem.
std::vector<Graph> planned_graphs() {
  std::vector<Graph> graphs;
  graphs.push_back(block(false));
  graphs.push_back(block(true));
  graphs.push_back(attention(false));
  graphs.push_back(pool(false));
  graphs.push_back(int4_linear(Int4Linear{}));
  graphs.push_back(int4_linear(Int4Linear{64, 64, true, false}));
  graphs.push_back(inverted_residual(false));
  graphs.push_back(stem(false));
  return graphs;
}

TEST_CASE("the load planner meets tensors without memory without undefined behaviour") {
  // A program may leave a tensor unplanned and not constant: the caller binds it before
  // execute (ExecuTorch's unplanned inputs and outputs), or, in a malformed program, nothing
  // ever does. Until then it has no data, and the planner's aliasing questions meet it.
  // fuzz_pte found the epilogue's check of a convolution's input offsetting the null pointer
  // (undefined behaviour that clang's UBSan reports; GCC's does not check null offsets, so
  // test/format/regressions/unplanned_conv_input.pte, the second graph here with its input
  // unplanned, is in fuzz_pte's seed corpus too). Each graph above, with each of its planned
  // tensors in turn left without memory: the load plans, or refuses cleanly.
  std::vector<Graph> graphs = planned_graphs();
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  size_t loaded = 0, tried = 0;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const pte::File f = export_graph(graphs[gi]);
    const std::vector<pte::EValue>& values = f.program.plans[0].values;
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v].kind != pte::ValueKind::kTensor || !values[v].tensor.allocation) continue;
      INFO("graph " << gi << ", value " << v << " without memory");
      pte::File g = f;
      g.program.plans[0].values[v].tensor.allocation.reset();
      Result<std::unique_ptr<rt::Method>> m = rt::Method::load(g, 0, runtime->env());
      ++tried;
      if (m.ok()) {
        ++loaded;
        (void)(*m)->describe_plan();
      } else {
        CHECK(m.status().code() != ErrorCode::kInternal);
      }
    }
  }
  CHECK(tried > 50);
  CHECK(loaded > 0);
}

TEST_CASE("the load planner meets a kernel call without arguments without undefined behaviour") {
  // test/format/regressions/kernel_call_without_arguments.pte (fuzz_pte): a
  // constant_pad_nd.out instruction with no arguments; the channels-last planner read its
  // first argument (UBSan: a reference to element 0 of an empty vector). The load fails
  // cleanly or succeeds, never with an internal error.
  Result<pte::File> f = read_pte_file(std::string(ETC_SOURCE_DIR) +
                                      "/test/format/regressions/kernel_call_without_arguments.pte");
  REQUIRE(f.ok());
  const rt::test::OnednnScope scope(true);
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(*f, 0, runtime->env());
  if (!m.ok()) CHECK(m.status().code() != ErrorCode::kInternal);
}

TEST_CASE("window arguments at int64's ends are refused cleanly, at load and at run") {
  // fuzz_pte found the load planner's check of a convolution (float_conv2d_geometry)
  // computing in + 2 * padding past int64 for a program whose padding was 5.8e18: undefined
  // behaviour, which the sanitizer build (make test-sanitize, make fuzz) stops on. Each Int
  // value of the planned graphs above, set in turn to values at int64's ends
  // (strides, paddings, dilations, kernel sizes, groups, dims): the load plans and the run
  // computes, or either refuses with an error that is not internal.
  std::vector<Graph> graphs = planned_graphs();
  const int64_t big = int64_t{1} << 62;
  const std::vector<int64_t> extremes{std::numeric_limits<int64_t>::max(),
                                      std::numeric_limits<int64_t>::min(), big, big + 1, -big};
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  size_t tried = 0, refused = 0;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const pte::File f = export_graph(graphs[gi]);
    const std::vector<pte::EValue>& values = f.program.plans[0].values;
    for (size_t v = 0; v < values.size(); ++v) {
      if (values[v].kind != pte::ValueKind::kInt) continue;
      for (int64_t e : extremes) {
        INFO("graph " << gi << ", value " << v << " = " << e);
        pte::File g = f;
        g.program.plans[0].values[v].i = e;
        ++tried;
        Result<std::unique_ptr<rt::Method>> m = rt::Method::load(g, 0, runtime->env());
        Status s = m.status();
        if (m.ok()) {
          const rt::TensorView& x = (*m)->input(0);
          const std::vector<char> zeros(x.nbytes(), 0);
          s = (*m)->set_input(0, zeros.data(), zeros.size());
          if (s.ok()) s = (*m)->execute();
        }
        if (!s.ok()) {
          ++refused;
          CHECK(s.code() != ErrorCode::kInternal);
        }
      }
    }
  }
  CHECK(tried > 100);
  CHECK(refused > tried / 2);
}

}  // namespace
}  // namespace etc
