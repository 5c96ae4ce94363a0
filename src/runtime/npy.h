// NumPy .npy files (format versions 1.0-3.0): little-endian, C order, the dtypes etc has
// (bool, int8/16/32/64, uint8, float16/32/64). Used by `etc run` for inputs and outputs.
// bfloat16, which NumPy lacks, is written as float32 (every bfloat16 is a float32 exactly).
#pragma once

#include <string>
#include <vector>

#include "graph/dtype.h"
#include "support/status.h"

namespace etc::rt {

struct NpyArray {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string data;  // raw little-endian bytes, C order
};

// Errors name the file and the byte offset or header field that is wrong.
Result<NpyArray> read_npy(const std::string& path);
Result<NpyArray> parse_npy(std::string_view bytes, const std::string& path);
std::string serialize_npy(const NpyArray& array);
Status write_npy(const std::string& path, const NpyArray& array);

}  // namespace etc::rt
