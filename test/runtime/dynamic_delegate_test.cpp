// Dynamic-bound tensors through a CUDA delegate: a graph built at three sizes of a dim is
// marked (mark_dynamic_shapes), compiled for cuda:0 (the delegate takes the dynamic work),
// compared again after the passes, planned at the bound and run on the CPU runtime (host
// memory standing in for the device's, the reference delegate) at several sizes: each call's
// outputs have that call's sizes and values.
#include <catch2/catch.hpp>

#include <cstring>

#include "export/emitter.h"
#include "export/export_pipeline.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "graph/verifier.h"
#include "passes/dynamic_shapes.h"
#include "runtime/export_graph.h"
#include "runtime/method.h"
#include "runtime/runtime_env.h"

namespace etc {
namespace {

// x [1, s, 8] -> view [1, s, 2, 4] -> relu -> expand [3, s, 2, 4] -> slice of dim 1 to its
// end -> mul by 2: every step resizes with s.
Graph build(int64_t s) {
  Graph g;
  ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {1, s, 8}));
  ValueId v = testing::add_op(g, OpKind::View, "v",
                              {{"self", x}, {"size", std::vector<int64_t>{1, s, 2, 4}}},
                              TensorSpec::make(DType::kFloat32, {1, s, 2, 4}));
  ValueId r = testing::add_op(g, OpKind::Relu, "r", {{"self", v}},
                              TensorSpec::make(DType::kFloat32, {1, s, 2, 4}));
  ValueId e = testing::add_op(g, OpKind::Expand, "e",
                              {{"self", r}, {"size", std::vector<int64_t>{3, s, 2, 4}}},
                              TensorSpec::make(DType::kFloat32, {3, s, 2, 4}));
  ValueId sl =
      testing::add_op(g, OpKind::SliceTensor, "sl",
                      {{"self", e}, {"dim", int64_t{1}}, {"start", int64_t{0}}, {"end", s}},
                      TensorSpec::make(DType::kFloat32, {3, s, 2, 4}));
  ValueId y = testing::add_op(g, OpKind::MulScalar, "y", {{"self", sl}, {"other", Scalar{2.0}}},
                              TensorSpec::make(DType::kFloat32, {3, s, 2, 4}));
  g.set_outputs({y});
  return g;
}

TEST_CASE("a CUDA delegate takes dynamic-bound work and runs it at each call's sizes") {
  Graph a = build(16), b = build(15), c = build(1);
  std::vector<Graph*> all{&a, &b, &c};
  REQUIRE(mark_dynamic_shapes(all, "s in [1, 16]").ok());
  PassRegistry registry = make_pass_registry();
  Pipeline pipeline = *parse_pipeline(kDefaultExportPipeline, registry);
  std::erase(pipeline.passes, std::string("plan-memory"));
  ExportOptions options;
  options.target = Device{DeviceType::kCUDA, 0};
  ExportReport report;
  for (Graph* g : all) {
    PassContext ctx{options, report};
    Result<PipelineResult> ran =
        run_pipeline(*g, pipeline, registry, ctx, PipelineRunOptions{.verify_each = true});
    INFO(ran.status().to_string());
    REQUIRE(ran.ok());
  }
  Status again = mark_dynamic_shapes(all, "s in [1, 16]");
  INFO(again.to_string());
  REQUIRE(again.ok());
  REQUIRE(verify_graph(a).ok());
  PassContext ctx{options, report};
  REQUIRE(run_pipeline(a, *parse_pipeline("plan-memory", registry), registry, ctx, {}).ok());
  // One delegate with every op; its inside is dynamic-bound like its boundary.
  const Node* call = nullptr;
  for (NodeId id : a.order()) {
    if (a.node(id).op == OpKind::DelegateCall) call = &a.node(id);
  }
  REQUIRE(call != nullptr);
  const Graph& sub = *call->delegate->graph;
  CHECK(sub.order().size() == 4);  // view, relu, expand, mul: the whole-dim slice is removed
  for (NodeId id : sub.order())
    CHECK(sub.value(sub.node(id).outputs[0]).spec.dynamism == ShapeDynamism::kDynamicBound);
  CHECK(a.value(call->outputs[0]).spec.dynamism == ShapeDynamism::kDynamicBound);

  Result<pte::File> emitted = emit_program(a);
  REQUIRE(emitted.ok());
  Result<pte::File> f = read_pte(make_blob(*write_pte(*emitted)), "dynamic.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  std::unique_ptr<rt::OwnedRuntime> runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> loaded = rt::Method::load(*f, 0, runtime->env());
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  rt::Method& m = **loaded;
  for (int64_t s : {5, 16, 1, 7}) {
    std::vector<float> x(static_cast<size_t>(s * 8));
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(i) * (i % 3 == 0 ? -1.0f : 1.0f);
    const std::vector<int64_t> sizes{1, s, 8};
    REQUIRE(m.set_input(0, x.data(), x.size() * 4, sizes).ok());
    Status run = m.execute();
    INFO(run.to_string());
    REQUIRE(run.ok());
    const rt::TensorView& y = m.output(0);
    CHECK(y.sizes == std::vector<int64_t>{3, s, 2, 4});
    REQUIRE(y.numel() == 3 * s * 8);
    std::vector<float> got(static_cast<size_t>(y.numel()));
    std::memcpy(got.data(), y.data, got.size() * 4);
    for (int64_t rep = 0; rep < 3; ++rep) {
      for (size_t i = 0; i < x.size(); ++i)
        CHECK(got[static_cast<size_t>(rep) * x.size() + i] == 2 * std::max(x[i], 0.0f));
    }
  }
  std::vector<float> big(17 * 8);
  const std::vector<int64_t> past{1, 17, 8};
  Status refused = m.set_input(0, big.data(), big.size() * 4, past);
  CHECK_FALSE(refused.ok());
  CHECK(refused.to_string().find("past its bound") != std::string::npos);
}

}  // namespace
}  // namespace etc
