// Test helpers for runtime tests on graphs built with the Graph API: adding a node, and a
// Graph through the default export pipeline (CPU target, verified after every pass),
// emitted, written and read back as a .pte, as `etc export` and a loader see it.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "export/emitter.h"
#include "export/export_pipeline.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "graph/verifier.h"

namespace etc::testing {

// Appends node `name` (op with these named arguments, one output of `out`'s spec, named as
// the node) and returns its output.
inline ValueId add_op(Graph& g, OpKind op, const std::string& name,
                      std::initializer_list<std::pair<std::string_view, ArgValue>> args,
                      TensorSpec out) {
  Result<std::vector<ArgValue>> bound = bind_args(op, args);
  INFO(bound.status().to_string());
  REQUIRE(bound.ok());
  NodeId id = g.add_node(op, name, std::move(bound).value(), {name}, {std::move(out)});
  return g.node(id).outputs[0];
}

// `target`: where delegates go (the CPU: none); `report` (may be null) receives the export's;
// `pipeline`: the passes, as `etc export --passes` takes them.
inline pte::File export_graph(Graph& g, const std::string& file_name = "test.pte",
                              Device target = Device{}, ExportReport* report_out = nullptr,
                              const char* pipeline = kDefaultExportPipeline) {
  REQUIRE(verify_graph(g).ok());
  PassRegistry r = make_pass_registry();
  ExportOptions options;
  options.target = target;
  ExportReport report;
  PassContext ctx{options, report};
  Result<PipelineResult> ran = run_pipeline(g, *parse_pipeline(pipeline, r), r, ctx,
                                            PipelineRunOptions{.verify_each = true});
  INFO(ran.status().to_string());
  REQUIRE(ran.ok());
  if (report_out != nullptr) *report_out = report;
  Result<pte::File> emitted = emit_program(g);
  INFO(emitted.status().to_string());
  REQUIRE(emitted.ok());
  Result<pte::File> f = read_pte(make_blob(*write_pte(*emitted)), file_name);
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  return std::move(f).value();
}

}  // namespace etc::testing
