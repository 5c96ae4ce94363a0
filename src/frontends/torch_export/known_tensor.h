// Tensors whose values the torch.export importer knows at export time: the results of
// arange/full/scalar_tensor and *_like of a static shape (made here, from numbers), and of
// any op over known tensors, which TorchNode::emit evaluates with the one constant evaluator
// (consteval/evaluate.h, the CPU kernels) instead of emitting a node. A converter reads a
// known value's elements (as doubles: exact for integers up to 2^53); it becomes an IR
// constant when an op reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/tensor_spec.h"

namespace etc::torch_import {

// Known tensors larger than this are not evaluated at export time.
inline constexpr int64_t kMaxKnownElements = int64_t{1} << 24;

struct KnownTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<double> v;  // row-major

  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  // The elements in `dtype`'s little-endian bytes.
  std::string bytes() const;
};

// Rounds `x` to a value of `dtype` (integers truncate toward zero and wrap as a cast would,
// bool is x != 0, floats round to nearest).
double round_to(DType dtype, double x);
// Numel of `shape`, or nullopt when it overflows or exceeds kMaxKnownElements.
std::optional<int64_t> known_numel(const std::vector<int64_t>& shape);

// The elements of a constant's bytes (a value the importer computed).
KnownTensor known_from_constant(const TensorSpec& spec);

KnownTensor known_full(DType dtype, std::vector<int64_t> shape, double value);

}  // namespace etc::torch_import
