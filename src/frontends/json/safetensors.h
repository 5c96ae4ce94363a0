// Reader and writer for the safetensors weight format: an 8-byte little-endian header
// length N, N bytes of JSON ({"name": {"dtype": "F32", "shape": [...], "data_offsets":
// [begin, end]}, "__metadata__": {...}}), then the raw little-endian tensor data, with
// offsets relative to the start of the data. The file is memory-mapped; tensors are
// windows into the map, never copies.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor_spec.h"
#include "support/file_io.h"
#include "support/status.h"

namespace etc {

struct SafetensorsTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  ConstantData data;  // absolute window into the file
};

struct SafetensorsFile {
  std::string path;
  std::map<std::string, SafetensorsTensor> tensors;
};

// Validates the whole header: length within the file, JSON syntax, every entry's dtype,
// shape and offsets (inside the data section, size = numel * element size, no overlap).
// Errors carry the file and a byte offset (or the header key) of the problem.
Result<SafetensorsFile> read_safetensors(const std::string& path);
Result<SafetensorsFile> parse_safetensors(std::shared_ptr<const Blob> blob,
                                          const std::string& path);

struct SafetensorsEntryIn {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};
// Serialises tensors in the order given (header keys sorted, as the format requires for
// determinism), data aligned to 8 bytes as the reference implementation does.
std::string write_safetensors(const std::vector<SafetensorsEntryIn>& tensors);

}  // namespace etc
