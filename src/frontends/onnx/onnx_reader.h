// Imports ONNX models (opsets 7-17 of the default domain) into the etc graph IR.
//
// The model is parsed with the protobuf classes generated from Debian's onnx.proto. Each
// ONNX node becomes one or more ATen-named IR nodes (Gemm -> linear or addmm, Conv with
// asymmetric pads -> constant_pad_nd + convolution, ...). Shapes are static: symbolic input
// dims take their values from OnnxImportOptions::input_shapes (`--input-shape`), and
// shape-computing subgraphs (Shape -> Gather -> Concat -> Reshape, ...) are evaluated at
// import time. Initializers become constants; external data files are mapped.
//
// Errors name the file, the place in the model ("/graph/node/12", "/graph/initializer/3")
// and the ONNX node; ops the importer cannot convert are all listed at once with their
// counts and node names before anything is converted.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "support/status.h"

namespace etc {

struct OnnxImportOptions {
  // Static shapes for graph inputs with symbolic or unknown dims (`--input-shape x=1x3x48x192`).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // A sequence input NAME of n tensors is n program inputs NAME.0 ... NAME.(n-1): their
  // shapes here (none: an empty sequence). Optional inputs named here are absent (None).
  std::set<std::string> absent_inputs;
};

// Whether `path` names an ONNX model (by extension, case-insensitive ".onnx").
bool is_onnx_path(const std::string& path);

Result<Graph> load_onnx_file(const std::string& path, const OnnxImportOptions& options = {});
// `file` is used in diagnostics; `base_dir` resolves external data.
Result<Graph> parse_onnx_model(std::span<const uint8_t> bytes, const std::string& file,
                               const std::string& base_dir, const OnnxImportOptions& options);

// Parses "NAME=1x3x48x192" (a `--input-shape` value).
Result<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& text);

// A tensor stored as a serialized TensorProto (the reference data of ONNX's node tests).
struct OnnxTensor {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;  // little-endian, row-major
};
Result<OnnxTensor> load_onnx_tensor_file(const std::string& path);
// The same from the bytes of a TensorProto (`path` names where they came from).
Result<OnnxTensor> parse_onnx_tensor(std::span<const uint8_t> bytes, const std::string& path);

// The ONNX op types (default domain) the importer converts, sorted. Some have limits
// (constant-only inputs, modes) that are checked per node.
std::vector<std::string> supported_onnx_ops();

}  // namespace etc
