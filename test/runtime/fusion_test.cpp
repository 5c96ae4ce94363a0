// Epilogue fusion end to end: memory planning puts an activation's or residual add's out over
// its input where the input dies there, and rt::Method runs the elementwise instructions
// after a convolution as its epilogue. The fused method must give the unfused method's bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "format/pte_reader.h"
#include "runtime/fusion_test_util.h"
#include "runtime/kernels/parallel.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

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

TEST_CASE("a linear layer's GELU or residual add runs on each GEMM tile it finishes, same bits") {
  // x [m, k] -> addmm(bias [520], x, w [k, 520]) or mm(x, w) -> gelu or + skip -> neg. On a
  // constant weight the GEMM runs the chain on each tile of C as it finishes it (its last K
  // block in): a few rows (the row kernels' column blocks), one and two row blocks, one and
  // two K blocks, a last tile of part width, the columns split across threads.
  constexpr int64_t kN = 520;
  for (const int64_t m : {3, 50, 150}) {
    for (const int64_t k : {40, 300}) {
      for (const std::string chain : {"addmm gelu", "mm gelu", "addmm add"}) {
        INFO("m " << m << ", k " << k << ": " << chain);
        Graph g;
        ValueId x = g.add_input("x", spec({m, k}));
        ValueId w = constant(g, "w", {k, kN}, 71);
        ValueId p = chain == "mm gelu"
                        ? node(g, OpKind::Mm, "p", {{"self", x}, {"mat2", w}}, spec({m, kN}))
                        : node(g, OpKind::Addmm, "p",
                               {{"self", constant(g, "bias", {kN}, 72)}, {"mat1", x}, {"mat2", w}},
                               spec({m, kN}));
        ValueId a =
            chain == "addmm add"
                ? node(g, OpKind::AddTensor, "a",
                       {{"self", p}, {"other", constant(g, "skip", {m, kN}, 73)}}, spec({m, kN}))
                : node(g, OpKind::Gelu, "a", {{"self", p}, {"approximate", "none"}}, spec({m, kN}));
        ValueId y = node(g, OpKind::Neg, "y", {{"self", a}}, spec({m, kN}));
        g.set_outputs({y});
        const pte::File f = export_graph(g);
        const Run plain = run(f, false, static_cast<size_t>(m * k));
        for (const int threads : {1, 3}) {
          INFO(threads << " thread(s)");
          const rt::test::ThreadsScope scope(threads);
          const Run fused = run(f, true, static_cast<size_t>(m * k));
          const std::string product = chain == "mm gelu" ? "aten::mm.out" : "aten::addmm.out";
          const std::string activation = chain == "addmm add" ? "aten::add.out" : "aten::gelu.out";
          CHECK(rows(fused.profile) ==
                std::vector<std::string>{product + " + " + activation, "aten::neg.out"});
          REQUIRE(fused.y.size() == plain.y.size());
          CHECK(std::memcmp(fused.y.data(), plain.y.data(), fused.y.size() * 4) == 0);
        }
        // Not a copy of the product: GELU and the residual add change every value.
        CHECK(plain.y[0] != 0.0f);
      }
    }
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
