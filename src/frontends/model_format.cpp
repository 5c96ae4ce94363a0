#include "frontends/model_format.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

namespace etc {

namespace {
bool has_extension(const std::string& path, std::string_view ext) {
  if (path.size() < ext.size()) return false;
  return std::equal(ext.rbegin(), ext.rend(), path.rbegin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
}
}  // namespace

std::string_view model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGraphJson:
      return "etc.graph";
    case ModelFormat::kOnnx:
      return "ONNX model";
    case ModelFormat::kTorchExport:
      return "torch.export program";
  }
  return "?";
}

Result<ModelFormat> detect_model_format(const std::string& path) {
  std::error_code ec;
  std::ifstream in;
  if (std::filesystem::is_regular_file(path, ec)) in.open(path, std::ios::binary);
  if (!in.is_open() || !in) {
    // Missing, unreadable or not a file: the reader the extension names says so.
    if (has_extension(path, ".onnx")) return ModelFormat::kOnnx;
    if (has_extension(path, ".pt2")) return ModelFormat::kTorchExport;
    return ModelFormat::kGraphJson;
  }
  char head[64] = {};
  in.read(head, sizeof head);
  auto n = static_cast<size_t>(in.gcount());
  // A zip archive: a local file header, or the end record of an empty archive.
  if (n >= 4 && head[0] == 'P' && head[1] == 'K' &&
      ((head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6))) {
    return ModelFormat::kTorchExport;
  }
  size_t i = 0;
  if (n >= 3 && static_cast<uint8_t>(head[0]) == 0xEF && static_cast<uint8_t>(head[1]) == 0xBB &&
      static_cast<uint8_t>(head[2]) == 0xBF) {
    i = 3;  // UTF-8 byte order mark
  }
  while (i < n && std::isspace(static_cast<unsigned char>(head[i])))
    ++i;
  if (i < n && head[i] == '{') return ModelFormat::kGraphJson;
  // ONNX's ModelProto starts with ir_version (field 1, varint: tag 0x08) as every exporter
  // writes it.
  if (n >= 1 && head[0] == 0x08) return ModelFormat::kOnnx;
  if (has_extension(path, ".onnx")) return ModelFormat::kOnnx;
  if (has_extension(path, ".pt2")) return ModelFormat::kTorchExport;
  if (has_extension(path, ".json")) return ModelFormat::kGraphJson;
  return invalid_input(
      "cannot tell what kind of model this is: not a zip archive (torch.export .pt2), not JSON "
      "(etc.graph), not an ONNX ModelProto, and the extension is none of .pt2, .json, .onnx",
      Location{.file = path, .byte_offset = 0});
}

}  // namespace etc
