// Tensors whose values the torch.export importer knows at export time: results of
// arange/full/scalar_tensor, *_like of a static shape, and elementwise and view ops over
// them (the causal masks PyTorch's decompositions build). Elements are held as doubles,
// rounded to the dtype after every op (exact for integers up to 2^53, as float32 rounds for
// float32), and become IR constants when a runtime op reads them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"

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

KnownTensor known_full(DType dtype, std::vector<int64_t> shape, double value);
// Broadcasting elementwise op; nullopt when the shapes do not broadcast.
std::optional<KnownTensor> known_binary(const KnownTensor& a, const KnownTensor& b, DType out,
                                        const std::function<double(double, double)>& f);
KnownTensor known_unary(const KnownTensor& a, DType out, const std::function<double(double)>& f);
std::optional<KnownTensor> known_where(const KnownTensor& c, const KnownTensor& a,
                                       const KnownTensor& b, DType out);
KnownTensor known_reshape(const KnownTensor& a, std::vector<int64_t> shape);
KnownTensor known_permute(const KnownTensor& a, const std::vector<int64_t>& dims);
KnownTensor known_expand(const KnownTensor& a, const std::vector<int64_t>& shape);
KnownTensor known_slice(const KnownTensor& a, int64_t dim, int64_t start, int64_t end,
                        int64_t step);
KnownTensor known_cat(const std::vector<const KnownTensor*>& parts, int64_t dim);

}  // namespace etc::torch_import
