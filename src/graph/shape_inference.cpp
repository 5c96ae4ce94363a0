// Shape and dtype inference for every op in ops.def, following ATen's semantics.
// Each function reads its arguments through InferContext (already kind-checked against
// the schema) and either appends one TensorType per output or returns a located error.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "support/checked_math.h"

namespace etc::infer {
namespace {

using Sizes = std::vector<int64_t>;

std::string str(const Sizes& s) {
  return shape_to_string(s);
}

// ATen's result_type over tensors (ranked by "has dims" vs zero-dim) and scalars.
DType result_type(std::initializer_list<const TensorSpec*> tensors,
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

Status broadcast(const InferContext& ctx, std::string_view arg, const Sizes& a, const Sizes& b,
                 Sizes* out) {
  auto r = broadcast_shapes(a, b);
  if (!r) {
    return ctx.error(arg, "shapes " + str(a) + " and " + str(b) + " cannot be broadcast together");
  }
  *out = std::move(*r);
  return Status();
}

Status require_rank(const InferContext& ctx, std::string_view arg, const TensorSpec& t,
                    std::initializer_list<size_t> ranks) {
  if (std::find(ranks.begin(), ranks.end(), t.rank()) != ranks.end()) return Status();
  std::string want;
  for (size_t r : ranks)
    want += (want.empty() ? "" : " or ") + std::to_string(r);
  return ctx.error(arg, "expected a tensor of rank " + want + ", got " + t.type_string());
}

Status require_float(const InferContext& ctx, std::string_view arg, const TensorSpec& t) {
  if (dtype_is_float(t.dtype)) return Status();
  return ctx.error(arg, "expected a floating-point tensor, got " + t.type_string());
}

Status require_same_dtype(const InferContext& ctx, std::string_view arg, const TensorSpec& t,
                          DType want) {
  if (t.dtype == want) return Status();
  return ctx.error(arg,
                   "expected dtype " + std::string(dtype_name(want)) + ", got " + t.type_string());
}

// Reduction dims: None or [] means all dims; duplicates are errors.
Status reduce(const InferContext& ctx, const TensorSpec& self, const std::vector<int64_t>* dims,
              bool keepdim, Sizes* out) {
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
Result<int64_t> pooled_size(const InferContext& ctx, int64_t in, int64_t k, int64_t pad,
                            int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t span = dilation * (k - 1) + 1;
  int64_t num = in + 2 * pad - span;
  if (num < 0) {
    return ctx.error("kernel_size", "kernel of extent " + std::to_string(span) +
                                        " does not fit an input of size " + std::to_string(in) +
                                        " with padding " + std::to_string(pad));
  }
  int64_t out = (num + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  // A last window that starts inside the right padding is dropped (ATen).
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

Result<std::vector<int64_t>> pair_arg(const InferContext& ctx, std::string_view arg,
                                      const std::vector<int64_t>& v, int64_t fallback,
                                      bool allow_empty) {
  if (v.empty() && allow_empty) return std::vector<int64_t>{fallback, fallback};
  if (v.size() == 1) return std::vector<int64_t>{v[0], v[0]};
  if (v.size() != 2) {
    return ctx.error(arg, "expected 1 or 2 values, got " + std::to_string(v.size()));
  }
  return v;
}

Status pool2d(const InferContext& ctx, std::vector<TensorType>& out, bool with_dilation) {
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
    if (p[i] < 0 || p[i] * 2 > k[i]) {
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

Status view_like(const InferContext& ctx, std::string_view arg, std::vector<TensorType>& out) {
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

Status creation(const InferContext& ctx, DType dtype, std::vector<TensorType>& out) {
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

}  // namespace

// ---- Elementwise ----------------------------------------------------------------------

Status infer_binary(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("other");
  Sizes sizes;
  ETC_RETURN_IF_ERROR(broadcast(ctx, "other", a.sizes, b.sizes, &sizes));
  out.push_back({result_type({&a, &b}), sizes});
  return Status();
}

// The binary math ops (binary_math.def), by kind.
// Comparisons and logical ops: bool, broadcast.
Status infer_compare(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("other");
  Sizes sizes;
  ETC_RETURN_IF_ERROR(broadcast(ctx, "other", a.sizes, b.sizes, &sizes));
  out.push_back({DType::kBool, sizes});
  return Status();
}

Status infer_logical(const InferContext& ctx, std::vector<TensorType>& out) {
  return infer_compare(ctx, out);
}

// Bitwise ops: the result type, integers and bool only.
Status require_integral(const InferContext& ctx, const TensorType& t) {
  if (!dtype_is_float(t.dtype)) return Status();
  return ctx.error("expected integer or bool operands, got a " + std::string(dtype_name(t.dtype)) +
                   " result");
}

Status infer_bitwise(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary(ctx, out));
  return require_integral(ctx, out[0]);
}

Status infer_bitwise_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary_scalar(ctx, out));
  return require_integral(ctx, out[0]);
}

// maximum, minimum, fmod, remainder: the result type, numbers only.
Status require_number(const InferContext& ctx, const TensorType& t) {
  if (t.dtype != DType::kBool) return Status();
  return ctx.error("expected numeric operands, got bool");
}

Status infer_arith(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary(ctx, out));
  return require_number(ctx, out[0]);
}

Status infer_arith_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary_scalar(ctx, out));
  return require_number(ctx, out[0]);
}

// pow.Tensor_Tensor(self, exponent).
Status infer_pow_tensor(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("exponent");
  Sizes sizes;
  ETC_RETURN_IF_ERROR(broadcast(ctx, "exponent", a.sizes, b.sizes, &sizes));
  out.push_back({result_type({&a, &b}), sizes});
  return require_number(ctx, out[0]);
}

// atan2: the result type, integers and bool giving float32.
Status infer_atan2(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary(ctx, out));
  if (!dtype_is_float(out[0].dtype)) out[0].dtype = DType::kFloat32;
  return Status();
}

Status infer_div(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary(ctx, out));
  if (!dtype_is_float(out[0].dtype)) out[0].dtype = DType::kFloat32;  // true division
  return Status();
}

Status infer_binary_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  out.push_back({result_type({&a}, {ctx.scalar("other")}), a.sizes});
  return Status();
}

Status infer_div_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(infer_binary_scalar(ctx, out));
  if (!dtype_is_float(out[0].dtype)) out[0].dtype = DType::kFloat32;
  return Status();
}

// div.Tensor_mode / div.Scalar_mode: true division without a mode (integers give float32),
// else the result type (integers stay integers), numbers only.
Status infer_div_mode(const InferContext& ctx, std::vector<TensorType>& out) {
  const std::string* mode = ctx.optional_string("rounding_mode");
  if (mode != nullptr && *mode != "trunc" && *mode != "floor") {
    return ctx.error("rounding_mode", "expected None, 'trunc' or 'floor', got '" + *mode + "'");
  }
  const bool scalar = ctx.optional_tensor("other") == nullptr;
  if (mode == nullptr) return scalar ? infer_div_scalar(ctx, out) : infer_div(ctx, out);
  ETC_RETURN_IF_ERROR(scalar ? infer_binary_scalar(ctx, out) : infer_binary(ctx, out));
  return require_number(ctx, out[0]);
}

Status infer_pow_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  out.push_back({result_type({&a}, {ctx.scalar("exponent")}), a.sizes});
  return Status();
}

Status infer_where(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& c = ctx.tensor("condition");
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("other");
  if (c.dtype != DType::kBool && c.dtype != DType::kUInt8) {
    return ctx.error("condition", "expected a bool condition, got " + c.type_string());
  }
  Sizes ab, sizes;
  ETC_RETURN_IF_ERROR(broadcast(ctx, "other", a.sizes, b.sizes, &ab));
  ETC_RETURN_IF_ERROR(broadcast(ctx, "condition", c.sizes, ab, &sizes));
  out.push_back({result_type({&a, &b}), sizes});
  return Status();
}

Status infer_unary_same(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  out.push_back({a.dtype, a.sizes});
  return Status();
}

// eq.Scalar and logical_not: a bool tensor of the input's shape.
Status infer_compare_scalar(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  out.push_back({DType::kBool, a.sizes});
  return Status();
}

Status infer_logical_not(const InferContext& ctx, std::vector<TensorType>& out) {
  return infer_compare_scalar(ctx, out);
}

Status infer_unary_float(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  out.push_back({dtype_is_float(a.dtype) ? a.dtype : DType::kFloat32, a.sizes});
  return Status();
}

// abs, floor, ...: the input's dtype; ATen has no bool kernels for them.
Status infer_unary_numeric(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  if (a.dtype == DType::kBool)
    return ctx.error("self", "expected a numeric tensor, got " + a.type_string());
  return infer_unary_same(ctx, out);
}

// bitwise_not: integers and bool.
Status infer_unary_integral(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  if (dtype_is_float(a.dtype))
    return ctx.error("self", "expected an integer or bool tensor, got " + a.type_string());
  return infer_unary_same(ctx, out);
}

// isnan, isinf: a bool tensor of the input's shape.
Status infer_unary_predicate(const InferContext& ctx, std::vector<TensorType>& out) {
  return infer_compare_scalar(ctx, out);
}

Status infer_unary_float_only(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", ctx.tensor("self")));
  return infer_unary_same(ctx, out);
}

Status infer_gelu(const InferContext& ctx, std::vector<TensorType>& out) {
  const std::string& approx = ctx.string_arg("approximate");
  if (approx != "none" && approx != "tanh") {
    return ctx.error("approximate", "expected 'none' or 'tanh', got '" + approx + "'");
  }
  return infer_unary_float_only(ctx, out);
}

// ---- Linear algebra ---------------------------------------------------------------------

Status infer_mm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("mat2");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", a, {2}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "mat2", b, {2}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "mat2", b, a.dtype));
  if (a.sizes[1] != b.sizes[0]) {
    return ctx.error("mat2", "cannot multiply " + a.type_string() + " by " + b.type_string() +
                                 " (inner dimensions " + std::to_string(a.sizes[1]) + " and " +
                                 std::to_string(b.sizes[0]) + " differ)");
  }
  out.push_back({a.dtype, {a.sizes[0], b.sizes[1]}});
  return Status();
}

// linalg_det: [..., n, n] floating point -> [...].
Status infer_linalg_det(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("A");
  ETC_RETURN_IF_ERROR(require_float(ctx, "A", a));
  if (a.rank() < 2 || a.sizes[a.rank() - 1] != a.sizes[a.rank() - 2]) {
    return ctx.error("A", "expected square matrices [..., n, n], got " + a.type_string());
  }
  out.push_back({a.dtype, Sizes(a.sizes.begin(), a.sizes.end() - 2)});
  return Status();
}

Status infer_addmm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& bias = ctx.tensor("self");
  const TensorSpec& a = ctx.tensor("mat1");
  const TensorSpec& b = ctx.tensor("mat2");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "mat1", a, {2}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "mat2", b, {2}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "mat2", b, a.dtype));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "self", bias, a.dtype));
  if (a.sizes[1] != b.sizes[0]) {
    return ctx.error("mat2", "cannot multiply " + a.type_string() + " by " + b.type_string() +
                                 " (inner dimensions " + std::to_string(a.sizes[1]) + " and " +
                                 std::to_string(b.sizes[0]) + " differ)");
  }
  Sizes mn{a.sizes[0], b.sizes[1]};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(broadcast(ctx, "self", bias.sizes, mn, &sizes));
  if (sizes != mn) {
    return ctx.error("self", "bias " + bias.type_string() + " does not broadcast to " + str(mn));
  }
  out.push_back({a.dtype, mn});
  return Status();
}

Status infer_bmm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("mat2");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", a, {3}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "mat2", b, {3}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "mat2", b, a.dtype));
  if (a.sizes[0] != b.sizes[0]) {
    return ctx.error("mat2", "batch sizes differ: " + a.type_string() + " and " + b.type_string());
  }
  if (a.sizes[2] != b.sizes[1]) {
    return ctx.error("mat2", "cannot multiply " + a.type_string() + " by " + b.type_string() +
                                 " (inner dimensions " + std::to_string(a.sizes[2]) + " and " +
                                 std::to_string(b.sizes[1]) + " differ)");
  }
  out.push_back({a.dtype, {a.sizes[0], a.sizes[1], b.sizes[2]}});
  return Status();
}

Status infer_linear(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& w = ctx.tensor("weight");
  if (x.rank() < 1)
    return ctx.error("input", "expected a tensor of rank 1 or more, got " + x.type_string());
  ETC_RETURN_IF_ERROR(require_rank(ctx, "weight", w, {2}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "weight", w, x.dtype));
  if (x.sizes.back() != w.sizes[1]) {
    return ctx.error("weight", "input " + x.type_string() + " has " +
                                   std::to_string(x.sizes.back()) + " features but weight " +
                                   w.type_string() + " expects " + std::to_string(w.sizes[1]));
  }
  Sizes sizes = x.sizes;
  sizes.back() = w.sizes[0];
  if (const TensorSpec* b = ctx.optional_tensor("bias")) {
    ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "bias", *b, x.dtype));
    auto r = broadcast_shapes(b->sizes, sizes);
    if (!r || *r != sizes) {
      return ctx.error("bias", "bias " + b->type_string() + " does not broadcast to " + str(sizes));
    }
  }
  out.push_back({x.dtype, sizes});
  return Status();
}

// ---- Convolution and pooling ----------------------------------------------------------

Status infer_convolution(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& w = ctx.tensor("weight");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "weight", w, {4}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "weight", w, x.dtype));
  bool transposed = ctx.bool_arg("transposed");
  int64_t groups = ctx.int_arg("groups");
  if (groups <= 0)
    return ctx.error("groups", "groups must be positive, got " + std::to_string(groups));
  ETC_ASSIGN_OR_RETURN(auto stride, pair_arg(ctx, "stride", ctx.int_list("stride"), 1, false));
  ETC_ASSIGN_OR_RETURN(auto pad, pair_arg(ctx, "padding", ctx.int_list("padding"), 0, false));
  ETC_ASSIGN_OR_RETURN(auto dil, pair_arg(ctx, "dilation", ctx.int_list("dilation"), 1, false));
  ETC_ASSIGN_OR_RETURN(auto opad,
                       pair_arg(ctx, "output_padding", ctx.int_list("output_padding"), 0, true));
  for (int i = 0; i < 2; ++i) {
    if (stride[i] <= 0) return ctx.error("stride", "stride must be positive");
    if (dil[i] <= 0) return ctx.error("dilation", "dilation must be positive");
    if (pad[i] < 0) return ctx.error("padding", "padding must not be negative");
    if (opad[i] < 0 || (opad[i] > 0 && !transposed)) {
      return ctx.error("output_padding", "output_padding must be 0 unless transposed");
    }
  }
  int64_t c_in = x.sizes[1];
  int64_t c_out = 0;
  if (!transposed) {
    if (w.sizes[0] % groups != 0) {
      return ctx.error("weight", "out channels " + std::to_string(w.sizes[0]) +
                                     " are not divisible by groups " + std::to_string(groups));
    }
    if (w.sizes[1] * groups != c_in) {
      return ctx.error("weight", "weight " + w.type_string() +
                                     " with groups=" + std::to_string(groups) + " expects " +
                                     std::to_string(w.sizes[1] * groups) +
                                     " input channels, but input " + x.type_string() + " has " +
                                     std::to_string(c_in));
    }
    c_out = w.sizes[0];
  } else {
    if (w.sizes[0] != c_in) {
      return ctx.error("weight", "transposed weight " + w.type_string() + " expects " +
                                     std::to_string(w.sizes[0]) + " input channels, but input " +
                                     x.type_string() + " has " + std::to_string(c_in));
    }
    if (c_in % groups != 0) {
      return ctx.error("groups", "input channels " + std::to_string(c_in) +
                                     " are not divisible by groups " + std::to_string(groups));
    }
    c_out = w.sizes[1] * groups;
  }
  if (const TensorSpec* b = ctx.optional_tensor("bias")) {
    if (b->rank() != 1 || b->sizes[0] != c_out) {
      return ctx.error("bias", "expected bias of shape [" + std::to_string(c_out) + "], got " +
                                   b->type_string());
    }
  }
  Sizes sizes{x.sizes[0], c_out, 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t in = x.sizes[2 + i];
    int64_t k = w.sizes[2 + i];
    int64_t o = 0;
    if (!transposed) {
      int64_t span = dil[i] * (k - 1) + 1;
      if (in + 2 * pad[i] < span) {
        return ctx.error("weight", "kernel of extent " + std::to_string(span) +
                                       " is larger than the padded input (" +
                                       std::to_string(in + 2 * pad[i]) + ")");
      }
      o = (in + 2 * pad[i] - span) / stride[i] + 1;
    } else {
      o = (in - 1) * stride[i] - 2 * pad[i] + dil[i] * (k - 1) + opad[i] + 1;
      if (o <= 0) return ctx.error("padding", "transposed convolution output would be empty");
    }
    sizes[2 + i] = o;
  }
  out.push_back({x.dtype, sizes});
  return Status();
}

Status infer_max_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  return pool2d(ctx, out, /*with_dilation=*/true);
}

Status infer_max_pool2d_with_indices(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(pool2d(ctx, out, /*with_dilation=*/true));
  out.push_back({DType::kInt64, out[0].sizes});
  return Status();
}

Status infer_avg_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  if (auto d = ctx.optional_int("divisor_override"); d && *d == 0) {
    return ctx.error("divisor_override", "divisor must not be zero");
  }
  return pool2d(ctx, out, /*with_dilation=*/false);
}

// Output size: output_size, or floor(input * scale) per spatial dim; exactly one is given.
Status infer_upsample2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const Sizes* os = ctx.optional_int_list("output_size");
  const std::vector<double>* scales = ctx.optional_float_list("scale_factors");
  if ((os == nullptr) == (scales == nullptr)) {
    return ctx.error("output_size", "exactly one of output_size and scale_factors must be given");
  }
  Sizes sizes = x.sizes;
  for (size_t i = 0; i < 2; ++i) {
    int64_t v;
    if (os != nullptr) {
      if (os->size() != 2) return ctx.error("output_size", "expected two sizes, got " + str(*os));
      v = (*os)[i];
    } else {
      if (scales->size() != 2 || !((*scales)[i] > 0) || !std::isfinite((*scales)[i])) {
        return ctx.error("scale_factors", "expected two positive scale factors");
      }
      v = static_cast<int64_t>(std::floor(static_cast<double>(x.sizes[2 + i]) * (*scales)[i]));
    }
    if (v <= 0) return ctx.error(os ? "output_size" : "scale_factors", "the output would be empty");
    sizes[2 + i] = v;
  }
  out.push_back({x.dtype, sizes});
  return Status();
}

// grid_sampler_2d: input [N, C, H, W], grid [N, H_out, W_out, 2] -> [N, C, H_out, W_out];
// interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection.
Status infer_grid_sampler_2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& grid = ctx.tensor("grid");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "grid", grid, {4}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "grid", grid, x.dtype));
  if (grid.sizes[0] != x.sizes[0] || grid.sizes[3] != 2) {
    return ctx.error("grid", "expected a grid of [" + std::to_string(x.sizes[0]) +
                                 ", H_out, W_out, 2] for input " + x.type_string() + ", got " +
                                 grid.type_string());
  }
  const int64_t mode = ctx.int_arg("interpolation_mode"), pad = ctx.int_arg("padding_mode");
  if (mode < 0 || mode > 2) {
    return ctx.error(
        "interpolation_mode",
        "expected 0 (bilinear), 1 (nearest) or 2 (bicubic), got " + std::to_string(mode));
  }
  if (pad < 0 || pad > 2) {
    return ctx.error("padding_mode", "expected 0 (zeros), 1 (border) or 2 (reflection), got " +
                                         std::to_string(pad));
  }
  out.push_back({x.dtype, {x.sizes[0], x.sizes[1], grid.sizes[1], grid.sizes[2]}});
  return Status();
}

// onnx::non_zero: [rank, numel] int64 at most (one column per non-zero element).
Status infer_onnx_non_zero(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "expected a tensor of rank 1 or more");
  out.push_back({DType::kInt64, {static_cast<int64_t>(self.rank()), self.numel()}});
  return Status();
}

// onnx::non_max_suppression: boxes [B, S, 4], scores [B, C, S] -> [B * C * min(max, S), 3]
// int64 at most (batch, class, box of each selected box).
Status infer_onnx_non_max_suppression(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& boxes = ctx.tensor("boxes");
  const TensorSpec& scores = ctx.tensor("scores");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "boxes", boxes, {3}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "scores", scores, {3}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "boxes", boxes));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "scores", scores, boxes.dtype));
  if (boxes.sizes[2] != 4 || scores.sizes[0] != boxes.sizes[0] ||
      scores.sizes[2] != boxes.sizes[1]) {
    return ctx.error("scores", "expected boxes [B, S, 4] and scores [B, C, S], got " +
                                   boxes.type_string() + " and " + scores.type_string());
  }
  const int64_t max = ctx.int_arg("max_output_boxes_per_class");
  if (max < 0) return ctx.error("max_output_boxes_per_class", "must not be negative");
  const int64_t per_class = std::min(max, boxes.sizes[1]);
  out.push_back({DType::kInt64, {scores.sizes[0] * scores.sizes[1] * per_class, 3}});
  return Status();
}

// onnx::unique: Y has self's shape (flattened without an axis) with at most as many slices
// along the axis; indices and counts one per unique slice at most; inverse_indices one per
// slice of self.
Status infer_onnx_unique(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::optional<int64_t> axis = ctx.optional_int("axis");
  Sizes y{self.numel()};
  int64_t n = self.numel();
  if (axis) {
    const auto r = static_cast<int64_t>(self.rank());
    if (*axis < -r || *axis >= r)
      return ctx.error("axis", "out of range for " + self.type_string());
    const int64_t a = *axis < 0 ? *axis + r : *axis;
    y = self.sizes;
    n = self.sizes[static_cast<size_t>(a)];
  }
  out.push_back({self.dtype, y});
  out.push_back({DType::kInt64, {n}});
  out.push_back({DType::kInt64, {n}});
  out.push_back({DType::kInt64, {n}});
  return Status();
}

Status infer_adaptive_avg_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", self, {3, 4}));
  const Sizes& os = ctx.int_list("output_size");
  if (os.size() != 2 || os[0] <= 0 || os[1] <= 0) {
    return ctx.error("output_size", "expected two positive sizes, got " + str(os));
  }
  Sizes sizes = self.sizes;
  sizes[sizes.size() - 2] = os[0];
  sizes[sizes.size() - 1] = os[1];
  out.push_back({self.dtype, sizes});
  return Status();
}

// ---- Reductions and normalisation ------------------------------------------------------

Status infer_amax(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &ctx.int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_any_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::vector<int64_t> dims{ctx.int_arg("dim")};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, ctx.bool_arg("keepdim"), &sizes));
  // ATen: bool for every input but uint8, which stays uint8.
  out.push_back({self.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool, sizes});
  return Status();
}

Status infer_mean_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  DType dtype = ctx.dtype_arg("dtype").value_or(self.dtype);
  if (!dtype_is_float(dtype)) {
    return ctx.error("self",
                     "mean needs a floating-point input or dtype, got " + self.type_string());
  }
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

Status infer_sum_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  // ATen sums integers and bools in int64 unless a dtype is given.
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

// prod.dim_int: integers and bools multiply in int64 unless a dtype is given, as sum.
Status infer_prod(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  std::vector<int64_t> dims{ctx.int_arg("dim")};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

// var.correction: floats only, the input's dtype.
Status infer_var(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self));
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({self.dtype, sizes});
  return Status();
}

// One dim reduced (`dim` wrapped; a 0-d input takes 0 or -1 and stays 0-d): the sizes left.
Result<Sizes> reduce_one(const InferContext& ctx, const TensorSpec& self, int64_t dim,
                         bool keepdim) {
  std::vector<int64_t> dims{dim};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, keepdim, &sizes));
  return sizes;
}

// argmax / argmin: int64 indices; without a dim, of the flattened input (every dim reduced).
Status infer_arg_reduce(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::optional<int64_t> dim = ctx.optional_int("dim");
  Sizes sizes;
  if (dim) {
    ETC_ASSIGN_OR_RETURN(sizes, reduce_one(ctx, self, *dim, ctx.bool_arg("keepdim")));
  } else {
    ETC_RETURN_IF_ERROR(reduce(ctx, self, nullptr, ctx.bool_arg("keepdim"), &sizes));
  }
  out.push_back({DType::kInt64, sizes});
  return Status();
}

// max.dim / min.dim: the values (the input's dtype) and their int64 indices.
Status infer_max_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(Sizes sizes,
                       reduce_one(ctx, self, ctx.int_arg("dim"), ctx.bool_arg("keepdim")));
  out.push_back({self.dtype, sizes});
  out.push_back({DType::kInt64, sizes});
  return Status();
}

// cumsum: the input's sizes; integers and bools add in int64 unless a dtype is given.
Status infer_cumsum(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  out.push_back({dtype, self.sizes});
  return Status();
}

// sort: values and int64 indices of the input's sizes.
Status infer_sort(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  out.push_back({self.dtype, self.sizes});
  out.push_back({DType::kInt64, self.sizes});
  return Status();
}

// topk: k values along `dim` (0 <= k <= its size) and their int64 indices.
Status infer_topk(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  const int64_t k = ctx.int_arg("k");
  const int64_t size = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  if (k < 0 || k > size) {
    return ctx.error("k", "k " + std::to_string(k) + " is out of range for dim " +
                              std::to_string(dim) + " of size " + std::to_string(size));
  }
  Sizes sizes = self.sizes;
  if (self.rank() > 0) sizes[static_cast<size_t>(dim)] = k;
  out.push_back({self.dtype, sizes});
  out.push_back({DType::kInt64, sizes});
  return Status();
}

Status infer_softmax(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self));
  ETC_RETURN_IF_ERROR(
      ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())).take_status());
  bool half_to_float = ctx.bool_arg("half_to_float");
  if (half_to_float && self.dtype != DType::kFloat16) {
    return ctx.error("half_to_float",
                     "half_to_float needs a float16 input, got " + self.type_string());
  }
  out.push_back({half_to_float ? DType::kFloat32 : self.dtype, self.sizes});
  return Status();
}

Status infer_layer_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const Sizes& ns = ctx.int_list("normalized_shape");
  if (ns.empty() || ns.size() > x.rank()) {
    return ctx.error("normalized_shape",
                     "normalized_shape " + str(ns) + " does not fit input " + x.type_string());
  }
  size_t axis = x.rank() - ns.size();
  if (!std::equal(ns.begin(), ns.end(), x.sizes.begin() + static_cast<ptrdiff_t>(axis))) {
    return ctx.error("normalized_shape", "normalized_shape " + str(ns) +
                                             " does not match the trailing dims of input " +
                                             x.type_string());
  }
  for (const char* name : {"weight", "bias"}) {
    if (const TensorSpec* t = ctx.optional_tensor(name); t && t->sizes != ns) {
      return ctx.error(name, std::string(name) + " " + t->type_string() +
                                 " must have the normalized shape " + str(ns));
    }
  }
  Sizes stat(x.sizes.begin(), x.sizes.begin() + static_cast<ptrdiff_t>(axis));
  stat.resize(x.rank(), 1);
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, stat});
  out.push_back({x.dtype, stat});
  return Status();
}

// native_group_norm: input [N, C, *] with N, C and HxW (the product of the rest) as given;
// mean and rstd [N, group].
Status infer_group_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const int64_t n = ctx.int_arg("N"), c = ctx.int_arg("C"), hw = ctx.int_arg("HxW");
  const int64_t group = ctx.int_arg("group");
  if (x.rank() < 2 || x.sizes[0] != n || x.sizes[1] != c) {
    return ctx.error("input", "input " + x.type_string() + " is not [N=" + std::to_string(n) +
                                  ", C=" + std::to_string(c) + ", ...]");
  }
  int64_t rest = 1;
  for (size_t d = 2; d < x.rank(); ++d)
    rest *= x.sizes[d];
  if (rest != hw) {
    return ctx.error("HxW", "HxW " + std::to_string(hw) + " is not the product of input " +
                                x.type_string() + "'s spatial dims");
  }
  if (group <= 0 || c % group != 0) {
    return ctx.error("group", "C " + std::to_string(c) + " is not divisible into " +
                                  std::to_string(group) + " groups");
  }
  for (const char* name : {"weight", "bias"}) {
    if (const TensorSpec* t = ctx.optional_tensor(name); t && t->sizes != Sizes{c}) {
      return ctx.error(name, std::string(name) + " " + t->type_string() + " must be [" +
                                 std::to_string(c) + "]");
    }
  }
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, Sizes{n, group}});
  out.push_back({x.dtype, Sizes{n, group}});
  return Status();
}

Status infer_batch_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  if (x.rank() < 2)
    return ctx.error("input", "expected a tensor of rank 2 or more, got " + x.type_string());
  int64_t c = x.sizes[1];
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    const TensorSpec* t = ctx.optional_tensor(name);
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c)) {
      return ctx.error(name, std::string("expected shape [") + std::to_string(c) +
                                 "] (the channel count), got " + t->type_string());
    }
  }
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, {0}});  // no statistics are saved outside training
  out.push_back({x.dtype, {0}});
  return Status();
}

// ---- Shape and layout ------------------------------------------------------------------

Status infer_cat(const InferContext& ctx, std::vector<TensorType>& out) {
  std::vector<const TensorSpec*> ts = ctx.tensor_list("tensors");
  if (ts.empty()) return ctx.error("tensors", "expected at least one tensor");
  // ATen skips legacy empty 1-d tensors of shape [0].
  const TensorSpec* first = nullptr;
  for (const TensorSpec* t : ts) {
    if (!(t->rank() == 1 && t->sizes[0] == 0)) {
      first = t;
      break;
    }
  }
  if (first == nullptr) {
    out.push_back({ts[0]->dtype, {0}});
    return Status();
  }
  if (first->rank() == 0)
    return ctx.error("tensors", "cannot concatenate zero-dimensional tensors");
  ETC_ASSIGN_OR_RETURN(
      int64_t dim, ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(first->rank())));
  Sizes sizes = first->sizes;
  sizes[dim] = 0;
  DType dtype = ts[0]->dtype;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorSpec* t = ts[i];
    dtype = promote_types(dtype, t->dtype);
    if (t->rank() == 1 && t->sizes[0] == 0) continue;
    if (t->rank() != first->rank()) {
      return ctx.error("tensors", "tensor " + std::to_string(i) + " " + t->type_string() +
                                      " has a different rank than " + first->type_string());
    }
    for (size_t d = 0; d < t->rank(); ++d) {
      if (static_cast<int64_t>(d) != dim && t->sizes[d] != first->sizes[d]) {
        return ctx.error("tensors", "tensor " + std::to_string(i) + " " + t->type_string() +
                                        " differs from " + first->type_string() + " in dim " +
                                        std::to_string(d));
      }
    }
    sizes[dim] += t->sizes[dim];
  }
  out.push_back({dtype, sizes});
  return Status();
}

Status infer_constant_pad_nd(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  const Sizes& pad = ctx.int_list("pad");
  if (pad.size() % 2 != 0 || pad.size() / 2 > self.rank()) {
    return ctx.error("pad", "expected an even number of pads, at most 2 per dim of " +
                                self.type_string() + ", got " + std::to_string(pad.size()));
  }
  Sizes sizes = self.sizes;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    size_t d = self.rank() - 1 - i;  // pads run from the last dim backwards
    sizes[d] += pad[2 * i] + pad[2 * i + 1];
    if (sizes[d] < 0) {
      return ctx.error("pad", "padding makes dim " + std::to_string(d) + " negative");
    }
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_expand(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  Sizes size = ctx.int_list("size");
  if (size.size() < self.rank()) {
    return ctx.error("size", "cannot expand " + self.type_string() + " to fewer dims " + str(size));
  }
  size_t lead = size.size() - self.rank();
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) return ctx.error("size", "-1 is not allowed for a new leading dim");
      continue;
    }
    int64_t have = self.sizes[i - lead];
    if (size[i] == -1) size[i] = have;
    if (have != size[i] && have != 1) {
      return ctx.error("size", "cannot expand " + self.type_string() + " to " +
                                   str(ctx.int_list("size")) + ": dim " + std::to_string(i) +
                                   " has size " + std::to_string(have));
    }
  }
  out.push_back({self.dtype, size});
  return Status();
}

Status infer_permute(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  const Sizes& dims = ctx.int_list("dims");
  int64_t rank = static_cast<int64_t>(self.rank());
  if (dims.size() != self.rank()) {
    return ctx.error("dims", "expected " + std::to_string(rank) + " dims for " +
                                 self.type_string() + ", got " + std::to_string(dims.size()));
  }
  std::vector<bool> seen(self.rank(), false);
  Sizes sizes;
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(int64_t w, ctx.wrap_dim("dims", d, rank));
    if (seen[w]) return ctx.error("dims", "dim " + std::to_string(w) + " appears more than once");
    seen[w] = true;
    sizes.push_back(self.sizes[w]);
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_reshape(const InferContext& ctx, std::vector<TensorType>& out) {
  return view_like(ctx, "shape", out);
}

Status infer_view(const InferContext& ctx, std::vector<TensorType>& out) {
  return view_like(ctx, "size", out);
}

Status infer_select(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "cannot select from a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  int64_t n = self.sizes[dim];
  int64_t index = ctx.int_arg("index");
  if (index < -n || index >= n) {
    return ctx.error("index", "index " + std::to_string(index) + " is out of range for dim " +
                                  std::to_string(dim) + " of size " + std::to_string(n));
  }
  Sizes sizes = self.sizes;
  sizes.erase(sizes.begin() + dim);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_slice(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "cannot slice a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  int64_t n = self.sizes[dim];
  int64_t step = ctx.int_arg("step");
  if (step <= 0)
    return ctx.error("step", "slice step must be positive, got " + std::to_string(step));
  // ATen clamps start and end into [0, n] after wrapping negatives once.
  auto clamp_index = [n](int64_t i) {
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  };
  int64_t start = clamp_index(ctx.optional_int("start").value_or(0));
  int64_t end = clamp_index(ctx.optional_int("end").value_or(n));
  Sizes sizes = self.sizes;
  sizes[dim] = end > start ? (end - start + step - 1) / step : 0;
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_squeeze_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  Sizes sizes = self.sizes;
  if (self.rank() > 0 && sizes[dim] == 1) sizes.erase(sizes.begin() + dim);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_squeeze_dims(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  int64_t rank = static_cast<int64_t>(self.rank());
  std::vector<bool> drop(self.rank(), false);
  for (int64_t d : ctx.int_list("dim")) {
    ETC_ASSIGN_OR_RETURN(int64_t w, ctx.wrap_dim("dim", d, rank));
    if (rank > 0 && self.sizes[w] == 1) drop[w] = true;
  }
  Sizes sizes;
  for (size_t i = 0; i < self.rank(); ++i) {
    if (!drop[i]) sizes.push_back(self.sizes[i]);
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_transpose(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  int64_t rank = static_cast<int64_t>(self.rank());
  ETC_ASSIGN_OR_RETURN(int64_t d0, ctx.wrap_dim("dim0", ctx.int_arg("dim0"), rank));
  ETC_ASSIGN_OR_RETURN(int64_t d1, ctx.wrap_dim("dim1", ctx.int_arg("dim1"), rank));
  Sizes sizes = self.sizes;
  if (rank > 0) std::swap(sizes[d0], sizes[d1]);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_unsqueeze(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  // Valid dims are [-(rank+1), rank].
  ETC_ASSIGN_OR_RETURN(
      int64_t dim, ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank()) + 1));
  Sizes sizes = self.sizes;
  sizes.insert(sizes.begin() + dim, 1);
  out.push_back({self.dtype, sizes});
  return Status();
}

// ---- Type conversion, indexing and creation ------------------------------------------

Status infer_to_copy(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  out.push_back({ctx.dtype_arg("dtype").value_or(self.dtype), self.sizes});
  return Status();
}

Status infer_embedding(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& w = ctx.tensor("weight");
  const TensorSpec& idx = ctx.tensor("indices");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "weight", w, {2}));
  if (idx.dtype != DType::kInt64 && idx.dtype != DType::kInt32) {
    return ctx.error("indices", "expected int64 or int32 indices, got " + idx.type_string());
  }
  if (ctx.bool_arg("sparse")) return ctx.error("sparse", "sparse gradients are not supported");
  Sizes sizes = idx.sizes;
  sizes.push_back(w.sizes[1]);
  out.push_back({w.dtype, sizes});
  return Status();
}

// The shapes of a Tensor?[] of int64/int32 index tensors (bool masks select a data-dependent
// number of elements, which static shapes cannot hold).
Result<std::vector<std::optional<Sizes>>> index_shapes(const InferContext& ctx) {
  std::vector<std::optional<Sizes>> shapes;
  for (const TensorSpec* t : ctx.tensor_list("indices")) {
    if (t == nullptr) {
      shapes.emplace_back();
      continue;
    }
    if (t->dtype != DType::kInt64 && t->dtype != DType::kInt32) {
      return ctx.error("indices", "expected int64 or int32 index tensors, got " + t->type_string() +
                                      (t->dtype == DType::kBool
                                           ? " (a boolean mask selects a data-dependent number "
                                             "of elements; etc needs static shapes)"
                                           : ""));
    }
    shapes.emplace_back(t->sizes);
  }
  return shapes;
}

Result<IndexPlan> index_plan(const InferContext& ctx, const TensorSpec& self) {
  ETC_ASSIGN_OR_RETURN(std::vector<std::optional<Sizes>> shapes, index_shapes(ctx));
  Result<IndexPlan> p = plan_index(self.sizes, shapes);
  if (!p.ok()) return ctx.error("indices", p.status().message());
  return p;
}

Status infer_index(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(IndexPlan p, index_plan(ctx, self));
  out.push_back({self.dtype, p.result});
  return Status();
}

Status infer_index_put(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  const TensorSpec& values = ctx.tensor("values");
  ETC_ASSIGN_OR_RETURN(IndexPlan p, index_plan(ctx, self));
  if (values.dtype != self.dtype) {
    return ctx.error("values", "values are " + values.type_string() + ", self is " +
                                   self.type_string() + "; index_put needs one dtype");
  }
  auto b = broadcast_shapes(values.sizes, p.result);
  if (!b || *b != p.result) {
    return ctx.error("values", "values of shape " + str(values.sizes) +
                                   " do not broadcast to the indexed shape " + str(p.result));
  }
  out.push_back({self.dtype, self.sizes});
  return Status();
}

// full_like: self's shape (only its shape is read), in dtype or self's dtype.
Status infer_full_like(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  out.push_back({ctx.dtype_arg("dtype").value_or(self.dtype), self.sizes});
  return Status();
}

Status infer_full(const InferContext& ctx, std::vector<TensorType>& out) {
  Scalar v = ctx.scalar("fill_value");
  DType fallback = v.is_float() ? DType::kFloat32 : v.is_bool() ? DType::kBool : DType::kInt64;
  return creation(ctx, ctx.dtype_arg("dtype").value_or(fallback), out);
}

Status infer_zeros_ones(const InferContext& ctx, std::vector<TensorType>& out) {
  return creation(ctx, ctx.dtype_arg("dtype").value_or(DType::kFloat32), out);
}

// rand/randn: floats of `size` (float32 unless dtype says another float type).
Status infer_rand(const InferContext& ctx, std::vector<TensorType>& out) {
  const DType dtype = ctx.dtype_arg("dtype").value_or(DType::kFloat32);
  if (!dtype_is_float(dtype)) {
    return ctx.error("dtype",
                     "random floats need a floating dtype, got " + std::string(dtype_name(dtype)));
  }
  return creation(ctx, dtype, out);
}

namespace {
// Whether every integer 0..v is exact in `t` (floats: up to 2^mantissa bits).
bool dtype_holds_integer(DType t, int64_t v) {
  switch (t) {
    case DType::kUInt8:
      return v <= 255;
    case DType::kInt8:
      return v <= 127;
    case DType::kInt16:
      return v <= 32767;
    case DType::kInt32:
      return v <= 2147483647;
    case DType::kInt64:
      return true;
    case DType::kFloat16:
      return v <= 2048;
    case DType::kBFloat16:
      return v <= 256;
    case DType::kFloat32:
      return v <= (int64_t{1} << 24);
    case DType::kFloat64:
      return v <= (int64_t{1} << 53);
    case DType::kBool:
      return v <= 1;
  }
  return false;
}
}  // namespace

// randperm(n): a permutation of 0..n-1 (int64 unless dtype says another type that holds n).
Status infer_randperm(const InferContext& ctx, std::vector<TensorType>& out) {
  const int64_t n = ctx.int_arg("n");
  if (n < 0) return ctx.error("n", "negative n " + std::to_string(n));
  const DType dtype = ctx.dtype_arg("dtype").value_or(DType::kInt64);
  if (dtype == DType::kBool || (n > 0 && !dtype_holds_integer(dtype, n - 1))) {
    return ctx.error("dtype",
                     std::string(dtype_name(dtype)) + " cannot hold " + std::to_string(n - 1));
  }
  out.push_back({dtype, {n}});
  return Status();
}

// ---- Compiler-inserted ops -------------------------------------------------------------

Status infer_delegate_call(const InferContext& ctx, std::vector<TensorType>&) {
  // A delegate's outputs are its subgraph's outputs; infer_node_types() reads them.
  return ctx.error("the output types of a delegate call come from its subgraph");
}

}  // namespace etc::infer
