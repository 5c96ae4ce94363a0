// Small tensors the ONNX importer knows the value of at export time: initializers,
// Constant nodes and the results of shape computations evaluated during import.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/tensor_spec.h"
#include "onnx.pb.h"
#include "support/status.h"

namespace etc::onnx_import {

struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  ConstantData data;  // exactly numel * element size bytes

  int64_t numel() const;
  // Element i converted (integers exactly, floats truncated toward zero for ints()).
  std::vector<int64_t> ints() const;
  std::vector<double> doubles() const;
  TensorSpec spec() const;  // a constant spec holding `data`
};

HostTensor make_host_tensor(DType dtype, std::vector<int64_t> shape, std::string bytes);
// Elements stored as `dtype` (integers wrap as a C++ cast would, floats round to nearest).
HostTensor host_from_ints(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t>& v);
HostTensor host_from_doubles(DType dtype, std::vector<int64_t> shape, const std::vector<double>& v);

// ONNX TensorProto.DataType -> etc dtype; nullopt for types etc has no equivalent of.
std::optional<DType> dtype_from_onnx(int32_t data_type);
std::string onnx_dtype_name(int32_t data_type);

// Decodes a TensorProto (raw_data, typed fields or external data relative to `base_dir`).
// Moves raw_data out of `t`. Errors are located at `where`.
Result<HostTensor> decode_tensor(onnx::TensorProto& t, const std::string& base_dir,
                                 const Location& where);

}  // namespace etc::onnx_import
