#include "frontends/frontends.h"

#include <utility>

#include "frontends/json/json_reader.h"
#include "frontends/onnx/onnx_reader.h"
#include "frontends/torch_export/torch_import.h"

namespace etc {
namespace {

Result<Graph> import_json(const std::string& path, const ImportRequest&) {
  return load_graph_file(path);
}

Result<Graph> import_onnx(const std::string& path, const ImportRequest& request) {
  OnnxImportOptions options;
  options.input_shapes = request.input_shapes;
  options.absent_inputs = request.absent_inputs;
  return load_onnx_file(path, options);
}

TorchImportOptions torch_options(const ImportRequest& request) {
  TorchImportOptions options;
  options.input_shapes = request.input_shapes;
  options.symbol_values = request.symbol_values;
  return options;
}

Result<Graph> import_torch(const std::string& path, const ImportRequest& request) {
  return load_torch_export_file(path, torch_options(request));
}

Result<std::vector<ModelSymbol>> torch_symbols(const std::string& path,
                                               const ImportRequest& request) {
  ETC_ASSIGN_OR_RETURN(std::vector<TorchSymbol> found,
                       torch_export_input_symbols(path, torch_options(request)));
  std::vector<ModelSymbol> symbols;
  symbols.reserve(found.size());
  for (TorchSymbol& s : found)
    symbols.push_back({std::move(s.name), s.min, s.max, std::move(s.inputs)});
  return symbols;
}

constexpr Frontend kFrontends[] = {
    {ModelFormat::kGraphJson, import_json, nullptr, false},
    {ModelFormat::kOnnx, import_onnx, nullptr, true},
    {ModelFormat::kTorchExport, import_torch, torch_symbols, true},
};

Result<const Frontend*> frontend_for(const std::string& path, ModelFormat* format_out) {
  ETC_ASSIGN_OR_RETURN(ModelFormat format, detect_model_format(path));
  if (format_out != nullptr) *format_out = format;
  for (const Frontend& f : kFrontends) {
    if (f.format == format) return &f;
  }
  return internal_error("no frontend registered for " + std::string(model_format_name(format)));
}

}  // namespace

std::span<const Frontend> frontends() {
  return kFrontends;
}

Result<std::map<std::string, std::vector<int64_t>>> parse_input_shapes(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const std::string& spec : specs) {
    ETC_ASSIGN_OR_RETURN(auto parsed, parse_input_shape(spec));
    if (!shapes.emplace(parsed.first, parsed.second).second) {
      return Status(ErrorCode::kUsage, "--input-shape given twice for '" + parsed.first + "'");
    }
  }
  return shapes;
}

Result<Graph> import_model(const std::string& path, const ImportRequest& request,
                           ModelFormat* format_out) {
  ModelFormat format{};
  ETC_ASSIGN_OR_RETURN(const Frontend* frontend, frontend_for(path, &format));
  if (format_out != nullptr) *format_out = format;
  if (!frontend->takes_input_shapes && !request.input_shapes.empty()) {
    return Status(ErrorCode::kUsage, "--input-shape applies to ONNX and torch.export models; '" +
                                         path + "' is " + std::string(model_format_name(format)) +
                                         " JSON (shapes are in the file)");
  }
  if (format != ModelFormat::kOnnx && !request.absent_inputs.empty()) {
    return Status(ErrorCode::kUsage, "--absent-input applies to ONNX models (optional inputs); '" +
                                         path + "' is " + std::string(model_format_name(format)));
  }
  return frontend->import(path, request);
}

Result<std::vector<ModelSymbol>> model_symbols(const std::string& path,
                                               const ImportRequest& request) {
  ETC_ASSIGN_OR_RETURN(const Frontend* frontend, frontend_for(path, nullptr));
  if (frontend->symbols == nullptr) return std::vector<ModelSymbol>{};
  return frontend->symbols(path, request);
}

}  // namespace etc
