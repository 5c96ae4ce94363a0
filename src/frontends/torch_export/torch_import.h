// Imports PyTorch programs saved by torch.export.save (`.pt2` archives, PyTorch's "PT2
// Archive Spec") into the etc graph IR, with no Python.
//
// The archive is a zip read with minizip from the mapped file; weights stored uncompressed
// stay in the mapping (constants point into it). The program (`models/<name>.json`, the
// serialized ExportedProgram, schema 8.x) is read with nlohmann/json. Parameters, buffers
// and lifted constants become constants; user inputs stay inputs in signature order;
// outputs keep their names. Both dialects users save import: the default export (TRAINING:
// aten.linear, aten.conv2d, aten.scaled_dot_product_attention, ...) and Core ATen after
// run_decompositions(). Ops are mapped onto the IR's ATen ops or decomposed at import;
// values known at export time (arange, full, masks built from them) are computed here and
// become constants.
//
// Errors name the archive and entry (`model.pt2!model/models/model.json`), the JSON pointer
// and the node; unsupported ops are all listed at once, with the Python source line each
// came from when the node records it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "support/file_io.h"
#include "support/status.h"

namespace etc {

struct TorchImportOptions {
  // Sizes for inputs with symbolic dims (`--input-shape x=1x128`), checked against the
  // program's range constraints.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // A value for each symbol of the inputs not in input_shapes (one point of a bounded
  // dynamic export: the importer builds the program with the dims at these sizes).
  std::map<std::string, int64_t> symbol_values;
};

// A symbol of the program's user inputs (a dim exported with dynamic_shapes) that
// input_shapes does not fix, with its range constraint (max -1: unbounded).
struct TorchSymbol {
  std::string name;
  int64_t min = 0, max = -1;
  std::vector<std::string> inputs;  // the inputs it sizes
};
Result<std::vector<TorchSymbol>> torch_export_input_symbols(const std::string& path,
                                                            const TorchImportOptions& options);

Result<Graph> load_torch_export_file(const std::string& path,
                                     const TorchImportOptions& options = {});
// `file` names the archive in diagnostics.
Result<Graph> parse_torch_export(std::shared_ptr<const Blob> archive, const std::string& file,
                                 const TorchImportOptions& options = {});

// The ATen targets the importer converts ("aten.linear.default"), sorted.
std::vector<std::string> supported_torch_ops();

}  // namespace etc
