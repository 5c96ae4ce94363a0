#include "export/export.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "export/emitter.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "graph/verifier.h"
#include "passes/dynamic_shapes.h"
#include "support/file_io.h"

namespace etc {

Result<DynamicPoints> dynamic_points(const std::string& model, const ImportRequest& request) {
  DynamicPoints p;
  ImportRequest probe;
  probe.input_shapes = request.input_shapes;
  ETC_ASSIGN_OR_RETURN(std::vector<ModelSymbol> symbols, model_symbols(model, probe));
  constexpr int64_t kMaxBound = int64_t{1} << 20;
  std::map<std::string, int64_t> second, third;
  for (const ModelSymbol& s : symbols) {
    std::string inputs;
    for (const std::string& i : s.inputs)
      inputs += (inputs.empty() ? "" : ", ") + i;
    if (s.max < 0 || s.max > kMaxBound) {
      return Status(ErrorCode::kUnsupported,
                    "symbol " + s.name + " (inputs " + inputs + ") has no upper bound" +
                        (s.max > kMaxBound ? " below 2^20" : "") +
                        ": export with dynamic_shapes Dim(max=...) or fix the sizes with "
                        "--input-shape");
    }
    p.upper[s.name] = s.max;
    second[s.name] = std::max(s.min, s.max - 1);
    third[s.name] = s.min;
    p.text += (p.text.empty() ? "" : ", ") + s.name + " in [" + std::to_string(s.min) + ", " +
              std::to_string(s.max) + "] (" + inputs + ")";
  }
  if (!symbols.empty()) {
    if (second != p.upper) p.others.push_back(second);
    if (third != p.upper && third != second) p.others.push_back(third);
  }
  return p;
}

namespace {

Result<Graph> import_at(const ExportRequest& request, const std::map<std::string, int64_t>& point) {
  ImportRequest r = request.import;
  r.symbol_values = point;
  return import_model(request.model, r);
}

// More copies than the request allows: the error lists each copy and why it is there.
Status check_copies(const ExportReport& report, int64_t max_copies) {
  if (max_copies < 0 || static_cast<int64_t>(report.copies.size()) <= max_copies) return Status();
  Status s = invalid_input("the program needs " + std::to_string(report.copies.size()) +
                           " host<->device copies per inference, more than --max-copies " +
                           std::to_string(max_copies));
  for (const ExportReport::Copy& c : report.copies) {
    s.add_related(invalid_input(c.kind + " '" + c.source + "' -> '" + c.copy + "' (" +
                                std::to_string(c.bytes) + " bytes): " + c.cause));
  }
  return s;
}

}  // namespace

Result<ExportResult> export_model(const ExportRequest& request) {
  PassRegistry registry = make_pass_registry();
  ETC_ASSIGN_OR_RETURN(Pipeline pipeline, parse_pipeline(request.passes, registry));
  ETC_ASSIGN_OR_RETURN(DynamicPoints dyn, dynamic_points(request.model, request.import));
  const std::vector<std::map<std::string, int64_t>>& points = dyn.others;
  // With dynamic dims the plan waits until every build agrees on what is dynamic.
  Pipeline before_planning = pipeline;
  const bool planned = std::find(pipeline.passes.begin(), pipeline.passes.end(), "plan-memory") !=
                       pipeline.passes.end();
  if (!points.empty()) std::erase(before_planning.passes, std::string("plan-memory"));

  ExportResult result;
  result.dynamic_dims = dyn.text;
  if (request.progress) request.progress("import");
  ETC_ASSIGN_OR_RETURN(Graph graph, import_at(request, dyn.upper));
  // The other sizes: compared with the upper bound after import (so that partitioning keeps
  // the dynamic work on the host) and again after the passes.
  std::vector<Graph> others;
  std::string sizes;
  std::vector<Graph*> builds{&graph};
  if (!points.empty()) {
    for (const auto& [name, value] : dyn.upper)
      sizes += (sizes.empty() ? "" : ", ") + name + " = " + std::to_string(value);
    for (const auto& point : points) {
      ETC_ASSIGN_OR_RETURN(Graph g, import_at(request, point));
      for (const auto& [name, value] : point)
        sizes += " / " + std::to_string(value);
      others.push_back(std::move(g));
    }
    for (Graph& g : others)
      builds.push_back(&g);
    ETC_RETURN_IF_ERROR(mark_dynamic_shapes(builds, dyn.text)
                            .add_context("while importing " + request.model + " with " + sizes));
  }

  // Passes must not choose by a size the dynamic dims change (each build must compile alike).
  ExportOptions options = request.options;
  options.dynamic_shapes = !points.empty();
  PassContext context{options, result.report};
  PipelineRunOptions run_options = request.run;
  if (request.progress) run_options.before_pass = request.progress;
#ifndef NDEBUG
  run_options.verify_each = true;  // debug builds always verify after every pass
#endif
  Result<PipelineResult> run = run_pipeline(graph, points.empty() ? pipeline : before_planning,
                                            registry, context, run_options);
  if (!run.ok())
    return std::move(run).take_status().add_context("while compiling " + request.model);
  result.ir_dumps = run->ir_dumps;
  if (request.run.time_passes) result.timing_table = run->timing_table();
  if (!points.empty()) {
    for (Graph& g : others) {
      ExportReport ignored;
      PassContext ctx{options, ignored};
      Result<PipelineResult> r =
          run_pipeline(g, before_planning, registry, ctx, PipelineRunOptions{});
      if (!r.ok()) {
        return std::move(r).take_status().add_context("while compiling " + request.model +
                                                      " with its dynamic dims at other sizes");
      }
    }
    ETC_RETURN_IF_ERROR(mark_dynamic_shapes(builds, dyn.text)
                            .add_context("while exporting " + request.model + " with " + sizes));
    ETC_RETURN_IF_ERROR_CTX(verify_graph(graph), "after marking the dynamic dims");
    if (planned) {
      Pipeline plan{{"plan-memory"}};
      Result<PipelineResult> r = run_pipeline(graph, plan, registry, context, PipelineRunOptions{});
      if (!r.ok())
        return std::move(r).take_status().add_context("while compiling " + request.model);
    }
  }
  ETC_RETURN_IF_ERROR(check_copies(result.report, request.max_copies));
  if (request.progress) request.progress("emit");
  ETC_ASSIGN_OR_RETURN(result.program, emit_program(graph));
  return result;
}

Result<uint64_t> write_program(const ExportResult& result, const std::string& path) {
  auto reads_back = [&path](const std::string& written) -> Status {
    ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(written));
    Result<pte::File> check = read_pte(blob, path);
    if (!check.ok()) {
      return internal_error("the program etc produced does not read back: " +
                            check.status().to_string());
    }
    return Status();
  };
  return write_pte_file(result.program, path, reads_back);
}

}  // namespace etc
