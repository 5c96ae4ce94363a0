// Every frontend behind one call. A model file's format is told by its content
// (model_format.h); the registry below says, for each format, how to import it and which of
// its sizes the file leaves open. The export library (export/export.h), `etc validate` and
// any other front end import through here, never through one importer by name.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "frontends/model_format.h"
#include "graph/graph.h"
#include "support/status.h"

namespace etc {

struct ImportRequest {
  // Sizes for inputs with symbolic dims (`--input-shape NAME=AxBxC`); ONNX and torch.export.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // ONNX: optional graph inputs given as absent (`--absent-input NAME`).
  std::set<std::string> absent_inputs;
  // torch.export: a value for each symbol the input shapes leave open (one point of a
  // bounded dynamic export).
  std::map<std::string, int64_t> symbol_values;
};

// A size the file leaves open after the request's input shapes: a torch.export symbol with
// its range constraint (max -1: unbounded) and the inputs it sizes.
struct ModelSymbol {
  std::string name;
  int64_t min = 0, max = -1;
  std::vector<std::string> inputs;
};

struct Frontend {
  ModelFormat format;
  Result<Graph> (*import)(const std::string& path, const ImportRequest& request);
  // nullptr where the format has no open sizes beyond what input_shapes fixes.
  Result<std::vector<ModelSymbol>> (*symbols)(const std::string& path,
                                              const ImportRequest& request);
  bool takes_input_shapes;  // whether input_shapes applies to the format
};

// The registry: one entry per format.
std::span<const Frontend> frontends();

// Parses `--input-shape` arguments ("x=1x3x48x192", "t=scalar"); a name given twice is an
// error.
Result<std::map<std::string, std::vector<int64_t>>> parse_input_shapes(
    const std::vector<std::string>& specs);

// Detects the format of `path` and imports it; `format_out`, when given, receives the format.
Result<Graph> import_model(const std::string& path, const ImportRequest& request,
                           ModelFormat* format_out = nullptr);

// The open sizes of the model at `path` (empty for formats without).
Result<std::vector<ModelSymbol>> model_symbols(const std::string& path,
                                               const ImportRequest& request);

}  // namespace etc
