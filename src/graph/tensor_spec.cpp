#include "graph/tensor_spec.h"

namespace etc {

TensorSpec TensorSpec::make(DType dtype, std::vector<int64_t> sizes) {
  TensorSpec s;
  s.dtype = dtype;
  s.dim_order = contiguous_dim_order(sizes.size());
  s.sizes = std::move(sizes);
  return s;
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : sizes)
    n *= d;
  return n;
}

int64_t TensorSpec::nbytes() const {
  return numel() * dtype_size(dtype);
}

std::string TensorSpec::type_string() const {
  return std::string(dtype_name(dtype)) + shape_to_string(sizes);
}

std::vector<uint8_t> contiguous_dim_order(size_t rank) {
  std::vector<uint8_t> order(rank);
  for (size_t i = 0; i < rank; ++i)
    order[i] = static_cast<uint8_t>(i);
  return order;
}

std::string shape_to_string(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(sizes[i]);
  }
  return s + "]";
}

}  // namespace etc
