// Shape and dtype inference for every op in ops.def, following ATen's semantics.
// Each function reads its arguments through InferContext (already kind-checked against
// the schema) and either appends one TensorType per output or returns a located error.
// The ops are split by kind: elementwise, linear algebra, type conversion, indexing and
// creation here; convolution and pooling, reductions and normalisation, shape and layout in
// shape_inference_{spatial,reduce,layout}.cpp; shared helpers in shape_inference_helpers.h.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/int4.h"
#include "graph/shape_inference_helpers.h"
#include "graph/weight_only.h"

namespace etc::infer {

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

// _int_mm: uint8 or int8 [M, K] by int8 [K, N] -> int32 [M, N] (ATen's CPU kernel's dtypes).
Status infer_int_mm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& a = ctx.tensor("self");
  const TensorSpec& b = ctx.tensor("mat2");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", a, {2}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "mat2", b, {2}));
  if (a.dtype != DType::kUInt8 && a.dtype != DType::kInt8)
    return ctx.error("self", "expected a uint8 or int8 matrix, got " + a.type_string());
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "mat2", b, DType::kInt8));
  if (a.sizes[1] != b.sizes[0]) {
    return ctx.error("mat2", "cannot multiply " + a.type_string() + " by " + b.type_string() +
                                 " (inner dimensions " + std::to_string(a.sizes[1]) + " and " +
                                 std::to_string(b.sizes[0]) + " differ)");
  }
  out.push_back({DType::kInt32, {a.sizes[0], b.sizes[1]}});
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

// etc::weight_only_linear: graph/weight_only.h's rule; out is input's leading dims then N.
Status infer_weight_only_linear(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& w = ctx.tensor("weight");
  const TensorSpec& scale = ctx.tensor("scale");
  const TensorSpec* zero = ctx.optional_tensor("zero_point");
  const TensorSpec* bias = ctx.optional_tensor("bias");
  weight_only::Geometry g;
  if (std::optional<weight_only::Problem> p =
          weight_only::check_tensors(x, w, scale, zero, ctx.int_arg("group_size"), bias, &g))
    return ctx.error(p->arg, p->message);
  Sizes sizes = x.sizes;
  sizes.back() = g.n;
  out.push_back({x.dtype, sizes});
  return Status();
}

// ---- Type conversion, indexing and creation ------------------------------------------

Status infer_to_copy(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  out.push_back({ctx.dtype_arg("dtype").value_or(self.dtype), self.sizes});
  return Status();
}

// etc::unpack_int4: uint8 [..., ceil(size / 2)] -> int8 [..., size].
Status infer_unpack_int4(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& packed = ctx.tensor("packed");
  if (packed.dtype != DType::kUInt8) {
    return ctx.error("packed",
                     "expected uint8 (two 4-bit values a byte), got " + packed.type_string());
  }
  if (packed.rank() == 0) return ctx.error("packed", "expected a tensor of rank 1 or more");
  const int64_t size = ctx.int_arg("size");
  if (size < 0 || int4::row_bytes(size) != packed.sizes.back()) {
    return ctx.error("size", std::to_string(size) + " values do not pack into the last dim of " +
                                 packed.type_string() + " (ceil(size / 2) bytes)");
  }
  Sizes sizes = packed.sizes;
  sizes.back() = size;
  out.push_back({DType::kInt8, sizes});
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
