#include "passes/pass_manager.h"

#include <catch2/catch.hpp>

#include "passes/graph_builder.h"

namespace etc {
namespace {

using testing::f32;
using testing::graph_from_json;
using testing::unary;

Result<bool> breaks_use_lists(Graph& g, PassContext&) {
  g.value(g.inputs()[0]).uses.clear();
  return true;
}

Result<bool> fails(Graph&, PassContext&) {
  return unsupported("cannot do this");
}

TEST_CASE("pipelines print and parse back") {
  PassRegistry r = make_pass_registry();
  Result<Pipeline> p = parse_pipeline(kDefaultExportPipeline, r);
  REQUIRE(p.ok());
  CHECK(p->to_string() == kDefaultExportPipeline);
  CHECK(p->passes.size() == 15);
  Result<Pipeline> spaced = parse_pipeline("dce, plan-memory", r);
  REQUIRE(spaced.ok());
  CHECK(spaced->to_string() == "dce,plan-memory");
}

TEST_CASE("unknown and empty pass names are usage errors listing the known passes") {
  PassRegistry r = make_pass_registry();
  Result<Pipeline> p = parse_pipeline("dce,no-such-pass", r);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == ErrorCode::kUsage);
  CHECK(p.status().message() ==
        "unknown pass 'no-such-pass' (known passes: dce, remove-noops, fold-constants, cse, "
        "fold-batch-norm, pack-int4-weights, gather-rows-first, partition, fuse-weight-only, "
        "decompose-host-ops, panel-weights, propagate-devices, plan-memory)");
  CHECK(parse_pipeline("dce,,dce", r).status().message() ==
        "empty pass name in pipeline 'dce,,dce'");
}

TEST_CASE("registering a pass twice fails") {
  PassRegistry r;
  REQUIRE(r.add({"x", "", &fails}).ok());
  CHECK(r.add({"x", "", &fails}).code() == ErrorCode::kInternal);
}

TEST_CASE("with --print-ir-after all dumps changed passes and marks unchanged ones") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("dead", "aten.neg.default", "a", "d") + "," +
                                unary("live", "aten.relu.default", "a", "y") + "]",
                            R"(["y"])");
  PassRegistry r = make_pass_registry();
  ExportOptions o;
  ExportReport report;
  PassContext ctx{o, report};
  PipelineRunOptions run;
  run.print_ir_after = "all";
  run.verify_each = true;
  Result<PipelineResult> res = run_pipeline(g, *parse_pipeline("dce,dce", r), r, ctx, run);
  REQUIRE(res.ok());
  CHECK(res->ir_dumps ==
        "// ----- IR after dce -----\n"
        "graph t {\n"
        "  input %0:a: float32[2, 2] cpu\n"
        "  #1 live = aten.relu.default(self=%0:a)\n"
        "      -> %2:y: float32[2, 2] cpu\n"
        "  outputs: %2:y\n"
        "}\n"
        "// ----- IR after dce (unchanged) -----\n");
  REQUIRE(res->timings.size() == 2);
  CHECK(res->timings[0].changed);
  CHECK_FALSE(res->timings[1].changed);
  CHECK(res->timing_table().find("total") != std::string::npos);
}

TEST_CASE("with --verify-each names the pass that broke the IR, failing passes name themselves") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("r", "aten.relu.default", "a", "y") + "]", R"(["y"])");
  PassRegistry r;
  REQUIRE(r.add({"breaker", "", &breaks_use_lists}).ok());
  REQUIRE(r.add({"failer", "", &fails}).ok());
  ExportOptions o;
  ExportReport report;
  PassContext ctx{o, report};
  PipelineRunOptions run;
  run.verify_each = true;
  Result<PipelineResult> res = run_pipeline(g, *parse_pipeline("breaker", r), r, ctx, run);
  REQUIRE_FALSE(res.ok());
  CHECK(res.status().code() == ErrorCode::kInternal);
  CHECK(res.status().message().rfind("the IR is invalid after pass 'breaker': ", 0) == 0);
  Result<PipelineResult> failed = run_pipeline(g, *parse_pipeline("failer", r), r, ctx, {});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().to_string() == "cannot do this\n  note: in pass 'failer'");
}

}  // namespace
}  // namespace etc
