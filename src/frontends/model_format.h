// Which reader a model file needs, told by its content (zip magic for a torch.export
// archive, JSON for etc.graph, a protobuf ModelProto for ONNX) and, where the content is not
// conclusive, by its extension.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace etc {

enum class ModelFormat { kGraphJson, kOnnx, kTorchExport };

// What `etc validate` calls the kind: "etc.graph", "ONNX model", "torch.export program".
std::string_view model_format_name(ModelFormat f);
Result<ModelFormat> detect_model_format(const std::string& path);

}  // namespace etc
