// Export as a library call: a model file in, a .pte program out. This is what `etc export`
// runs (apps/etc only parses its arguments and prints), and what benches, tests and other
// front ends call.
//
//   ExportRequest request;
//   request.model = "resnet18.pt2";
//   request.options.target = Device{DeviceType::kCUDA, 0};
//   ETC_ASSIGN_OR_RETURN(ExportResult result, export_model(request));
//   ETC_ASSIGN_OR_RETURN(uint64_t bytes, write_program(result, "resnet18.pte"));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "export/export_pipeline.h"
#include "format/pte_model.h"
#include "frontends/frontends.h"
#include "passes/pass.h"
#include "passes/pass_manager.h"
#include "passes/report.h"
#include "support/status.h"

namespace etc {

struct ExportRequest {
  std::string model;      // a file: etc.graph JSON, ONNX or a torch.export archive
  ImportRequest import;   // input shapes for symbolic dims
  ExportOptions options;  // target, IO device, partitioning, memory planning
  std::string passes = kDefaultExportPipeline;
  PipelineRunOptions run;   // verify after each pass, IR dumps, pass timing
  int64_t max_copies = -1;  // refuse programs with more host<->device copies; -1: no limit
  // Called as the export moves on: "import", each pass's name, "emit" (a front end shows it
  // as progress; the Python package draws a bar on a terminal).
  std::function<void(const std::string& stage)> progress;
};

struct ExportResult {
  pte::File program;
  ExportReport report;
  std::string ir_dumps;      // what run.print_ir_after asked for, in order
  std::string timing_table;  // run.time_passes' table, or empty
  // The bounded dynamic dims, "s27 in [1, 128] (tokens, input_pos)", or empty when every
  // size is fixed.
  std::string dynamic_dims;
};

// Imports, compiles and emits. Errors are located (the model file, the node, the pass) and
// carry the CLI's exit-code category.
Result<ExportResult> export_model(const ExportRequest& request);

// Writes the program atomically (weights streamed from their mapped files) and reads it back:
// never a file etc itself cannot read. Returns the size written.
Result<uint64_t> write_program(const ExportResult& result, const std::string& path);

// A torch.export program's bounded dynamic dims: compiled at the upper bound and at up to two
// other sizes in range, and what moves between them becomes dynamic (passes/dynamic_shapes.h).
struct DynamicPoints {
  std::map<std::string, int64_t> upper;                // every symbol at its upper bound
  std::vector<std::map<std::string, int64_t>> others;  // max - 1 and min, where distinct
  std::string text;                                    // "s27 in [1, 128] (tokens, input_pos)"
};
Result<DynamicPoints> dynamic_points(const std::string& model, const ImportRequest& request);

}  // namespace etc
