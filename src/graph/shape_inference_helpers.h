// Helpers the shape-inference files share (shape_inference*.cpp only): broadcasting, the
// result dtype, argument checks, reductions, pooling and view sizes.
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "graph/shape_inference.h"
#include "support/checked_math.h"

namespace etc::infer {

using Sizes = std::vector<int64_t>;

inline std::string str(const Sizes& s) {
  return shape_to_string(s);
}

// ATen's result_type over tensors (ranked by "has dims" vs zero-dim) and scalars.
inline DType result_type(std::initializer_list<const TensorSpec*> tensors,
                         std::initializer_list<Scalar> scalars = {}) {
  std::vector<TypeOperand> ops;
  for (const TensorSpec* t : tensors) {
    ops.push_back(
        {t->dtype, t->rank() > 0 ? TypeOperand::Rank::kDims : TypeOperand::Rank::kZeroDim});
  }
  for (const Scalar& s : scalars) {
    DType st = s.is_float() ? DType::kFloat32 : s.is_bool() ? DType::kBool : DType::kInt64;
    ops.push_back({st, TypeOperand::Rank::kNumber});
  }
  return etc::result_type(std::span<const TypeOperand>(ops));
}

inline Status broadcast(const InferContext& ctx, std::string_view arg, const Sizes& a,
                        const Sizes& b, Sizes* out) {
  auto r = broadcast_shapes(a, b);
  if (!r) {
    return ctx.error(arg, "shapes " + str(a) + " and " + str(b) + " cannot be broadcast together");
  }
  *out = std::move(*r);
  return Status();
}

inline Status require_rank(const InferContext& ctx, std::string_view arg, const TensorSpec& t,
                           std::initializer_list<size_t> ranks) {
  if (std::find(ranks.begin(), ranks.end(), t.rank()) != ranks.end()) return Status();
  std::string want;
  for (size_t r : ranks)
    want += (want.empty() ? "" : " or ") + std::to_string(r);
  return ctx.error(arg, "expected a tensor of rank " + want + ", got " + t.type_string());
}

inline Status require_float(const InferContext& ctx, std::string_view arg, const TensorSpec& t) {
  if (dtype_is_float(t.dtype)) return Status();
  return ctx.error(arg, "expected a floating-point tensor, got " + t.type_string());
}

inline Status require_same_dtype(const InferContext& ctx, std::string_view arg, const TensorSpec& t,
                                 DType want) {
  if (t.dtype == want) return Status();
  return ctx.error(arg,
                   "expected dtype " + std::string(dtype_name(want)) + ", got " + t.type_string());
}

// Reduction dims: None or [] means all dims; duplicates are errors.
inline Status reduce(const InferContext& ctx, const TensorSpec& self,
                     const std::vector<int64_t>* dims, bool keepdim, Sizes* out) {
  int64_t rank = static_cast<int64_t>(self.rank());
  std::vector<bool> reduced(self.rank(), dims == nullptr || dims->empty());
  if (dims != nullptr) {
    for (int64_t d : *dims) {
      ETC_ASSIGN_OR_RETURN(int64_t w, ctx.wrap_dim("dim", d, rank));
      if (rank == 0) continue;
      if (reduced[w])
        return ctx.error("dim", "dim " + std::to_string(w) + " appears more than once");
      reduced[w] = true;
    }
  }
  out->clear();
  for (size_t i = 0; i < self.rank(); ++i) {
    if (!reduced[i]) {
      out->push_back(self.sizes[i]);
    } else if (keepdim) {
      out->push_back(1);
    }
  }
  return Status();
}

// Output size of one pooled/convolved spatial dim, ATen's pooling_output_shape.
inline Result<int64_t> pooled_size(const InferContext& ctx, int64_t in, int64_t k, int64_t pad,
                                   int64_t stride, int64_t dilation, bool ceil_mode) {
  const std::optional<SlidingWindow> win = sliding_window(in, k, pad, stride, dilation, ceil_mode);
  if (!win) return ctx.error("kernel_size", "kernel extent or padding overflows a 64-bit size");
  if (win->count == 0) {
    return ctx.error("kernel_size", "kernel of extent " + std::to_string(win->span) +
                                        " does not fit an input of size " + std::to_string(in) +
                                        " with padding " + std::to_string(pad));
  }
  return win->count;
}

inline Result<std::vector<int64_t>> pair_arg(const InferContext& ctx, std::string_view arg,
                                             const std::vector<int64_t>& v, int64_t fallback,
                                             bool allow_empty) {
  if (v.empty() && allow_empty) return std::vector<int64_t>{fallback, fallback};
  if (v.size() == 1) return std::vector<int64_t>{v[0], v[0]};
  if (v.size() != 2) {
    return ctx.error(arg, "expected 1 or 2 values, got " + std::to_string(v.size()));
  }
  return v;
}

inline Status pool2d(const InferContext& ctx, std::vector<TensorType>& out, bool with_dilation) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", self, {3, 4}));
  ETC_ASSIGN_OR_RETURN(auto k, pair_arg(ctx, "kernel_size", ctx.int_list("kernel_size"), 0, false));
  ETC_ASSIGN_OR_RETURN(auto s, pair_arg(ctx, "stride", ctx.int_list("stride"), -1, true));
  if (s[0] == -1) s = k;  // stride=[] means stride = kernel_size
  ETC_ASSIGN_OR_RETURN(auto p, pair_arg(ctx, "padding", ctx.int_list("padding"), 0, false));
  std::vector<int64_t> d{1, 1};
  if (with_dilation) {
    ETC_ASSIGN_OR_RETURN(d, pair_arg(ctx, "dilation", ctx.int_list("dilation"), 1, false));
  }
  for (int i = 0; i < 2; ++i) {
    if (k[i] <= 0) return ctx.error("kernel_size", "kernel size must be positive");
    if (s[i] <= 0) return ctx.error("stride", "stride must be positive");
    if (d[i] <= 0) return ctx.error("dilation", "dilation must be positive");
    if (p[i] < 0 || p[i] > k[i] / 2) {
      return ctx.error("padding", "padding must be between 0 and half the kernel size, got " +
                                      std::to_string(p[i]));
    }
  }
  bool ceil_mode = ctx.bool_arg("ceil_mode");
  Sizes sizes = self.sizes;
  size_t h = sizes.size() - 2;
  for (int i = 0; i < 2; ++i) {
    ETC_ASSIGN_OR_RETURN(sizes[h + i],
                         pooled_size(ctx, sizes[h + i], k[i], p[i], s[i], d[i], ceil_mode));
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

inline Status view_like(const InferContext& ctx, std::string_view arg,
                        std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  Sizes sizes = ctx.int_list(arg);
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (infer_at >= 0) return ctx.error(arg, "only one dimension can be -1");
      infer_at = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return ctx.error(arg, "invalid size " + std::to_string(sizes[i]));
    } else {
      auto k = checked_mul(known, sizes[i]);
      if (!k) return ctx.error(arg, "shape " + str(sizes) + " has too many elements");
      known = *k;
    }
  }
  int64_t numel = self.numel();
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      return ctx.error(arg, "shape " + str(sizes) + " is invalid for an input of " +
                                std::to_string(numel) + " elements");
    }
    sizes[infer_at] = numel / known;
  } else if (known != numel) {
    return ctx.error(arg, "shape " + str(sizes) + " has " + std::to_string(known) +
                              " elements but the input " + self.type_string() + " has " +
                              std::to_string(numel));
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

inline Status creation(const InferContext& ctx, DType dtype, std::vector<TensorType>& out) {
  const Sizes& size = ctx.int_list("size");
  for (int64_t d : size) {
    if (d < 0) return ctx.error("size", "negative size " + std::to_string(d));
  }
  if (!checked_numel(size) || !checked_mul(*checked_numel(size), dtype_size(dtype))) {
    return ctx.error("size", "shape " + str(size) + " is too large");
  }
  out.push_back({dtype, size});
  return Status();
}

}  // namespace etc::infer
