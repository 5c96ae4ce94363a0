// ONNX op -> IR converters. Each converter reads its node through NodeCtx and emits ATen
// ops; opset-dependent rules (attributes that became inputs, changed defaults) are handled
// here, per op. The spatial ops (convolution, pooling, resizing) are in
// onnx_ops_spatial.cpp, normalisation and reductions in onnx_ops_norm_reduce.cpp, and so on
// (onnx_converters.h); this file has the elementwise and matrix ops and the table of all
// converters.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string_view>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"
#include "frontends/onnx/onnx_shapes.h"

namespace etc::onnx_import {

Result<ValueId> reshape(NodeCtx& ctx, ValueId v, std::vector<int64_t> shape) {
  return ctx.emit(OpKind::Reshape, {{"self", v}, {"shape", std::move(shape)}});
}

Result<ValueId> permute(NodeCtx& ctx, ValueId v, std::vector<int64_t> dims) {
  return ctx.emit(OpKind::Permute, {{"self", v}, {"dims", std::move(dims)}});
}

Scalar scalar_of(DType dtype, double v) {
  if (dtype_is_float(dtype)) return Scalar{v};
  if (dtype == DType::kBool) return Scalar{v != 0};
  return Scalar{static_cast<int64_t>(v)};
}

Result<ValueId> flip(NodeCtx& ctx, ValueId v, int64_t axis, int64_t size) {
  std::vector<int64_t> rev(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i)
    rev[static_cast<size_t>(i)] = size - 1 - i;
  std::vector<ValueId> indices(static_cast<size_t>(axis));
  indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {size}, rev)));
  return ctx.emit(OpKind::IndexTensor, {{"self", v}, {"indices", indices}});
}

ValueId arange_along(NodeCtx& ctx, int64_t n, int64_t axis, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1), v(static_cast<size_t>(n));
  shape[static_cast<size_t>(axis)] = n;
  std::iota(v.begin(), v.end(), int64_t{0});
  return ctx.add_constant(host_from_ints(DType::kInt64, shape, v));
}

ValueId scalar_constant(NodeCtx& ctx, DType dtype, double v) {
  return ctx.add_constant(host_from_doubles(dtype, {}, {v}));
}

Result<ValueId> matmul(NodeCtx& ctx, ValueId a, std::vector<int64_t> sa, ValueId b,
                       std::vector<int64_t> sb) {
  if (sa.empty() || sb.empty()) return ctx.invalid("MatMul inputs must have rank 1 or more");
  const bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) {
    sa.insert(sa.begin(), 1);
    ETC_ASSIGN_OR_RETURN(a, reshape(ctx, a, sa));
  }
  if (b_vec) {
    sb.push_back(1);
    ETC_ASSIGN_OR_RETURN(b, reshape(ctx, b, sb));
  }
  const int64_t m = sa[sa.size() - 2], k = sa.back(), k2 = sb[sb.size() - 2], n = sb.back();
  if (k != k2) {
    return ctx.invalid("cannot multiply " + shape_to_string(sa) + " by " + shape_to_string(sb) +
                       " (inner dimensions " + std::to_string(k) + " and " + std::to_string(k2) +
                       " differ)");
  }
  std::vector<int64_t> batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  std::optional<std::vector<int64_t>> batch = broadcast_shapes(batch_a, batch_b);
  if (!batch) {
    return ctx.invalid("batch dims " + shape_to_string(batch_a) + " and " +
                       shape_to_string(batch_b) + " do not broadcast");
  }
  int64_t nb = 1;
  for (int64_t d : *batch)
    nb *= d;
  ValueId out;
  if (batch_b.empty() ||
      std::all_of(batch_b.begin(), batch_b.end(), [](int64_t d) { return d == 1; })) {
    // [..., M, K] x [K, N]: one GEMM over all rows of A.
    if (!batch_b.empty()) {
      ETC_ASSIGN_OR_RETURN(b, reshape(ctx, b, {k, n}));
    }
    std::vector<int64_t> full_a = *batch;
    full_a.push_back(m);
    full_a.push_back(k);
    if (batch_a != *batch) {
      ETC_ASSIGN_OR_RETURN(a, ctx.emit(OpKind::Expand, {{"self", a}, {"size", full_a}}));
    }
    ETC_ASSIGN_OR_RETURN(ValueId a2, reshape(ctx, a, {nb * m, k}));
    ETC_ASSIGN_OR_RETURN(out, ctx.emit(OpKind::Mm, {{"self", a2}, {"mat2", b}}));
  } else {
    std::vector<int64_t> full_a = *batch, full_b = *batch;
    full_a.insert(full_a.end(), {m, k});
    full_b.insert(full_b.end(), {k, n});
    if (batch_a != *batch) {
      ETC_ASSIGN_OR_RETURN(a, ctx.emit(OpKind::Expand, {{"self", a}, {"size", full_a}}));
    }
    if (batch_b != *batch) {
      ETC_ASSIGN_OR_RETURN(b, ctx.emit(OpKind::Expand, {{"self", b}, {"size", full_b}}));
    }
    ETC_ASSIGN_OR_RETURN(ValueId a3, reshape(ctx, a, {nb, m, k}));
    ETC_ASSIGN_OR_RETURN(ValueId b3, reshape(ctx, b, {nb, k, n}));
    ETC_ASSIGN_OR_RETURN(out, ctx.emit(OpKind::Bmm, {{"self", a3}, {"mat2", b3}}));
  }
  std::vector<int64_t> shape = *batch;
  if (!a_vec) shape.push_back(m);
  if (!b_vec) shape.push_back(n);
  return reshape(ctx, out, shape);
}

namespace {

using Args = std::initializer_list<std::pair<std::string_view, ArgValue>>;
constexpr ArgValue kNone = std::monostate{};

// The single value of a constant with one element.
std::optional<double> single_value(const HostTensor* t) {
  if (t == nullptr || t->numel() != 1) return std::nullopt;
  return t->doubles()[0];
}

// The one element of a known tensor as a Scalar of `dtype`'s kind, exactly (an int64 past
// 2^53 is not rounded through a double).
std::optional<Scalar> single_scalar(const HostTensor* t, DType dtype) {
  if (t == nullptr || t->numel() != 1) return std::nullopt;
  if (dtype_is_float(dtype)) return Scalar{t->doubles()[0]};
  if (dtype == DType::kBool) return Scalar{t->ints()[0] != 0};
  return Scalar{t->ints()[0]};
}

Status alias(NodeCtx& ctx, int out, int in) {
  ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(in));
  return ctx.set_output(out, v);
}

// ---- Elementwise ------------------------------------------------------------------------

Converter unary(OpKind op, bool float_only = true) {
  return [op, float_only](NodeCtx& ctx) -> Status {
    if (float_only && !dtype_is_float(ctx.dtype(0))) {
      return ctx.unsupported("input type " + std::string(dtype_name(ctx.dtype(0))) +
                             " (floating-point types only)");
    }
    ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
    ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(op, {{"self", x}}));
    return ctx.set_output(0, y);
  };
}

enum class Bin { kAdd, kSub, kMul, kDiv };

Result<ValueId> binary_values(NodeCtx& ctx, Bin op, int ia, int ib) {
  const DType dt = ctx.dtype(ia);
  if (ctx.dtype(ib) != dt) {
    return ctx.invalid("inputs have different types (" + std::string(dtype_name(dt)) + " and " +
                       std::string(dtype_name(ctx.dtype(ib))) + ")");
  }
  if (dt == DType::kBool) return ctx.unsupported("bool inputs");
  // ONNX divides integers as C does: truncated (div with rounding_mode "trunc").
  const bool int_div = op == Bin::kDiv && !dtype_is_float(dt);
  std::optional<std::vector<int64_t>> shape = broadcast_shapes(ctx.shape(ia), ctx.shape(ib));
  if (!shape) {
    return ctx.invalid("shapes " + shape_to_string(ctx.shape(ia)) + " and " +
                       shape_to_string(ctx.shape(ib)) + " do not broadcast");
  }
  // A scalar constant operand becomes an ATen Scalar argument.
  if (std::optional<Scalar> c = single_scalar(ctx.constant(ib), dt); c && *shape == ctx.shape(ia)) {
    ETC_ASSIGN_OR_RETURN(ValueId a, ctx.input(ia));
    const Scalar& s = *c;
    switch (op) {
      case Bin::kAdd:
        return ctx.emit(OpKind::AddScalar, {{"self", a}, {"other", s}});
      case Bin::kSub:
        return ctx.emit(OpKind::SubScalar, {{"self", a}, {"other", s}});
      case Bin::kMul:
        return ctx.emit(OpKind::MulScalar, {{"self", a}, {"other", s}});
      case Bin::kDiv:
        if (int_div) {
          return ctx.emit(OpKind::DivScalarMode,
                          {{"self", a}, {"other", s}, {"rounding_mode", std::string("trunc")}});
        }
        return ctx.emit(OpKind::DivScalar, {{"self", a}, {"other", s}});
    }
  }
  if (std::optional<Scalar> c = single_scalar(ctx.constant(ia), dt);
      c && *shape == ctx.shape(ib) && (op == Bin::kAdd || op == Bin::kMul)) {
    ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(ib));
    const Scalar& s = *c;
    return ctx.emit(op == Bin::kAdd ? OpKind::AddScalar : OpKind::MulScalar,
                    {{"self", b}, {"other", s}});
  }
  ETC_ASSIGN_OR_RETURN(ValueId a, ctx.input(ia));
  ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(ib));
  switch (op) {
    case Bin::kAdd:
      return ctx.emit(OpKind::AddTensor, {{"self", a}, {"other", b}});
    case Bin::kSub:
      return ctx.emit(OpKind::SubTensor, {{"self", a}, {"other", b}});
    case Bin::kMul:
      return ctx.emit(OpKind::MulTensor, {{"self", a}, {"other", b}});
    case Bin::kDiv:
      if (int_div) {
        return ctx.emit(OpKind::DivTensorMode,
                        {{"self", a}, {"other", b}, {"rounding_mode", std::string("trunc")}});
      }
      return ctx.emit(OpKind::DivTensor, {{"self", a}, {"other", b}});
  }
  return internal_error("unreachable");
}

Converter binary(Bin op) {
  return [op](NodeCtx& ctx) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId y, binary_values(ctx, op, 0, 1));
    return ctx.set_output(0, y);
  };
}

// Sum and Mean of any number of inputs.
Converter variadic_sum(bool mean) {
  return [mean](NodeCtx& ctx) -> Status {
    if (ctx.num_inputs() < 1) return ctx.invalid("needs at least one input");
    if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("non-floating-point inputs");
    ETC_ASSIGN_OR_RETURN(ValueId acc, ctx.input(0));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(i));
      ETC_ASSIGN_OR_RETURN(acc, ctx.emit(OpKind::AddTensor, {{"self", acc}, {"other", x}}));
    }
    if (mean && ctx.num_inputs() > 1) {
      ETC_ASSIGN_OR_RETURN(acc,
                           ctx.emit(OpKind::DivScalar,
                                    {{"self", acc}, {"other", Scalar{double(ctx.num_inputs())}}}));
    } else if (ctx.num_inputs() == 1) {
      ETC_ASSIGN_OR_RETURN(acc, ctx.emit(OpKind::Clone, {{"self", acc}}));
    }
    return ctx.set_output(0, acc);
  };
}

// Pow(X, Y): the result has X's type. One exponent known at export time is pow.Tensor_Scalar
// (squares and square roots take their fast paths); otherwise Y in X's type,
// pow.Tensor_Tensor.
Status convert_pow(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  std::optional<std::vector<int64_t>> shape = broadcast_shapes(ctx.shape(0), ctx.shape(1));
  if (!shape) return ctx.invalid("the base and the exponent do not broadcast");
  if (const HostTensor* exponent = ctx.constant(1);
      exponent != nullptr && dtype_is_float(ctx.dtype(0)) && *shape == ctx.shape(0)) {
    if (std::optional<double> e = single_value(exponent)) {
      ETC_ASSIGN_OR_RETURN(
          ValueId y, ctx.emit(OpKind::PowTensorScalar, {{"self", x}, {"exponent", Scalar{*e}}}));
      return ctx.set_output(0, y);
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId e, ctx.input(1));
  if (ctx.dtype(1) != ctx.dtype(0)) {
    ETC_ASSIGN_OR_RETURN(e, ctx.emit(OpKind::ToCopy, {{"self", e}, {"dtype", ctx.dtype(0)}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::PowTensorTensor, {{"self", x}, {"exponent", e}}));
  return ctx.set_output(0, y);
}

// A binary math op (binary_math.def) on two inputs of one type.
Converter binary_math(OpKind op) {
  return [op](NodeCtx& ctx) -> Status {
    if (ctx.dtype(0) != ctx.dtype(1)) {
      return ctx.invalid("inputs have different types (" + std::string(dtype_name(ctx.dtype(0))) +
                         " and " + std::string(dtype_name(ctx.dtype(1))) + ")");
    }
    ETC_ASSIGN_OR_RETURN(ValueId a, ctx.input(0));
    ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(1));
    ETC_ASSIGN_OR_RETURN(ValueId y,
                         ctx.emit(op, {{"self", a}, {op_info(op).schema.args[1].name, b}}));
    return ctx.set_output(0, y);
  };
}

// Max / Min: maximum / minimum over every input, left to right.
Converter variadic_extreme(OpKind op) {
  return [op](NodeCtx& ctx) -> Status {
    if (ctx.num_inputs() < 1) return ctx.invalid("needs at least one input");
    ETC_ASSIGN_OR_RETURN(ValueId acc, ctx.input(0));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      if (ctx.dtype(i) != ctx.dtype(0)) return ctx.invalid("inputs have different types");
      ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
      ETC_ASSIGN_OR_RETURN(acc, ctx.emit(op, {{"self", acc}, {"other", v}}));
    }
    return ctx.set_output(0, acc);
  };
}

// Mod(A, B, fmod): C's fmod when fmod=1 (floats need it), Python's remainder when 0.
Status convert_mod(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t fmod, ctx.attr_int("fmod", 0));
  if (fmod == 0 && dtype_is_float(ctx.dtype(0)))
    return ctx.invalid("Mod of floating-point inputs needs fmod=1");
  return binary_math(fmod != 0 ? OpKind::FmodTensor : OpKind::RemainderTensor)(ctx);
}

// Not: logical_not.
Status convert_not(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::LogicalNot, {{"self", x}}));
  return ctx.set_output(0, y);
}

// relu(x) - slope * relu(-x): exact (one of the two terms is zero).
Result<ValueId> leaky(NodeCtx& ctx, ValueId x, std::optional<double> alpha,
                      std::optional<ValueId> slope) {
  ETC_ASSIGN_OR_RETURN(ValueId pos, ctx.emit(OpKind::Relu, {{"self", x}}));
  ETC_ASSIGN_OR_RETURN(ValueId nx, ctx.emit(OpKind::Neg, {{"self", x}}));
  ETC_ASSIGN_OR_RETURN(ValueId neg, ctx.emit(OpKind::Relu, {{"self", nx}}));
  ValueId scaled;
  if (alpha) {
    ETC_ASSIGN_OR_RETURN(scaled,
                         ctx.emit(OpKind::MulScalar, {{"self", neg}, {"other", Scalar{*alpha}}}));
  } else {
    ETC_ASSIGN_OR_RETURN(scaled, ctx.emit(OpKind::MulTensor, {{"self", neg}, {"other", *slope}}));
  }
  return ctx.emit(OpKind::SubTensor, {{"self", pos}, {"other", scaled}});
}

Status convert_leaky_relu(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 0.01f));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, leaky(ctx, x, alpha, std::nullopt));
  return ctx.set_output(0, y);
}

Status convert_prelu(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  const std::vector<int64_t>& xs = ctx.shape(0);
  // Before opset 7 (no numpy broadcasting yet), a slope of one value per channel applies
  // along dim 1, as PyTorch's and Caffe2's exports of that time meant it.
  const bool per_channel = ctx.opset() < 7 && ctx.rank(1) == 1 && xs.size() > 2 &&
                           ctx.shape(1)[0] == xs[1] && xs[1] != 1;
  std::vector<int64_t> channel_view(xs.size() - 1, 1);
  if (per_channel) channel_view[0] = xs[1];
  std::optional<std::vector<int64_t>> shape =
      broadcast_shapes(xs, per_channel ? channel_view : ctx.shape(1));
  if (!shape || *shape != xs) {
    return ctx.invalid("slope " + shape_to_string(ctx.shape(1)) + " does not broadcast to X " +
                       shape_to_string(xs));
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId slope, ctx.input(1));
  if (per_channel) {
    ETC_ASSIGN_OR_RETURN(slope, reshape(ctx, slope, channel_view));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, leaky(ctx, x, std::nullopt, slope));
  return ctx.set_output(0, y);
}

Status convert_hard_sigmoid(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 0.2f));
  ETC_ASSIGN_OR_RETURN(float beta, ctx.attr_float("beta", 0.5f));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  if (alpha == 1.0f / 6.0f && beta == 0.5f) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Hardsigmoid, {{"self", x}}));
  } else {
    // max(0, min(1, alpha * x + beta)), as ONNX defines it.
    ETC_ASSIGN_OR_RETURN(
        ValueId ax, ctx.emit(OpKind::MulScalar, {{"self", x}, {"other", Scalar{double(alpha)}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId axb, ctx.emit(OpKind::AddScalar, {{"self", ax}, {"other", Scalar{double(beta)}}}));
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::Clamp, {{"self", axb}, {"min", Scalar{0.0}}, {"max", Scalar{1.0}}}));
  }
  return ctx.set_output(0, y);
}

Status convert_clip(NodeCtx& ctx) {
  const DType dt = ctx.dtype(0);
  if (dt == DType::kBool) return ctx.unsupported("bool inputs");
  ArgValue lo = kNone, hi = kNone;
  if (ctx.opset() < 11) {
    if (ctx.attr("min")) {
      ETC_ASSIGN_OR_RETURN(float v, ctx.attr_float("min", std::nullopt));
      lo = scalar_of(dt, v);
    }
    if (ctx.attr("max")) {
      ETC_ASSIGN_OR_RETURN(float v, ctx.attr_float("max", std::nullopt));
      hi = scalar_of(dt, v);
    }
  } else {
    for (int i : {1, 2}) {
      if (!ctx.has_input(i)) continue;
      ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(i, i == 1 ? "min" : "max"));
      if (t->numel() != 1)
        return ctx.invalid(std::string(i == 1 ? "min" : "max") + " must be a scalar");
      if (t->dtype != dt) return ctx.invalid("min and max must have the input's type");
      Scalar s = dtype_is_float(dt) ? Scalar{t->doubles()[0]} : Scalar{t->ints()[0]};
      (i == 1 ? lo : hi) = s;
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  if (std::holds_alternative<std::monostate>(lo) && std::holds_alternative<std::monostate>(hi)) {
    ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Clone, {{"self", x}}));
    return ctx.set_output(0, y);
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Clamp, {{"self", x}, {"min", lo}, {"max", hi}}));
  return ctx.set_output(0, y);
}

Status convert_cast(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t to, ctx.attr_int("to", std::nullopt));
  std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(to));
  if (!dt) return ctx.unsupported("cast to " + onnx_dtype_name(static_cast<int32_t>(to)));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::ToCopy, {{"self", x}, {"dtype", *dt}}));
  return ctx.set_output(0, y);
}

Status convert_where(NodeCtx& ctx) {
  if (ctx.dtype(0) != DType::kBool) return ctx.invalid("the condition must be bool");
  ETC_ASSIGN_OR_RETURN(ValueId c, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(ValueId r,
                       ctx.emit(OpKind::WhereSelf, {{"condition", c}, {"self", x}, {"other", y}}));
  return ctx.set_output(0, r);
}

// ---- Matrix products ----------------------------------------------------------------------

Status convert_matmul(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer matrix products");
  ETC_ASSIGN_OR_RETURN(ValueId a, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId y, matmul(ctx, a, ctx.shape(0), b, ctx.shape(1)));
  return ctx.set_output(0, y);
}

// Det(X [..., n, n]) -> [...]: ATen's linalg_det.
Status convert_det(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0)))
    return ctx.unsupported(std::string(dtype_name(ctx.dtype(0))) + " inputs");
  const std::vector<int64_t>& s = ctx.shape(0);
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    return ctx.invalid("X must hold square matrices [..., n, n], got " + shape_to_string(s));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::LinalgDet, {{"A", x}}));
  return ctx.set_output(0, y);
}

Status convert_gemm(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer matrix products");
  if (ctx.rank(0) != 2 || ctx.rank(1) != 2) return ctx.invalid("A and B must be matrices");
  ETC_ASSIGN_OR_RETURN(int64_t trans_a, ctx.attr_int("transA", 0));
  ETC_ASSIGN_OR_RETURN(int64_t trans_b, ctx.attr_int("transB", 0));
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 1.0f));
  ETC_ASSIGN_OR_RETURN(float beta, ctx.attr_float("beta", 1.0f));
  ETC_ASSIGN_OR_RETURN(ValueId a, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(1));
  if (trans_a) {
    ETC_ASSIGN_OR_RETURN(a, permute(ctx, a, {1, 0}));
  }
  const int64_t n = trans_b ? ctx.shape(1)[0] : ctx.shape(1)[1];
  const bool has_c = ctx.has_input(2) && beta != 0.0f;
  ValueId y;
  if (trans_b && alpha == 1.0f &&
      (!has_c || (beta == 1.0f && ctx.shape(2) == std::vector<int64_t>{n}))) {
    ArgValue bias = kNone;
    if (has_c) {
      ETC_ASSIGN_OR_RETURN(bias, ctx.input(2));
    }
    ETC_ASSIGN_OR_RETURN(y,
                         ctx.emit(OpKind::Linear, {{"input", a}, {"weight", b}, {"bias", bias}}));
    return ctx.set_output(0, y);
  }
  if (trans_b) {
    ETC_ASSIGN_OR_RETURN(b, permute(ctx, b, {1, 0}));
  }
  if (has_c) {
    ETC_ASSIGN_OR_RETURN(ValueId c, ctx.input(2));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Addmm, {{"self", c},
                                                     {"mat1", a},
                                                     {"mat2", b},
                                                     {"beta", Scalar{double(beta)}},
                                                     {"alpha", Scalar{double(alpha)}}}));
  } else {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Mm, {{"self", a}, {"mat2", b}}));
    if (alpha != 1.0f) {
      ETC_ASSIGN_OR_RETURN(
          y, ctx.emit(OpKind::MulScalar, {{"self", y}, {"other", Scalar{double(alpha)}}}));
    }
  }
  return ctx.set_output(0, y);
}

Status convert_gelu(NodeCtx& ctx) {
  // (A Result<std::string> checked by hand: GCC 12 misreads ETC_ASSIGN_OR_RETURN's string as
  // possibly uninitialised, as in convert_pad.)
  Result<std::string> mode = ctx.attr_string("approximate", "none");
  if (!mode.ok()) return mode.status();
  const std::string approximate = *mode;
  if (approximate != "none" && approximate != "tanh")
    return ctx.invalid("approximate must be 'none' or 'tanh', got '" + approximate + "'");
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::Gelu, {{"self", x}, {"approximate", approximate}}));
  return ctx.set_output(0, y);
}

Status convert_identity(NodeCtx& ctx) {
  if (!ctx.input_entry(0).is_tensor()) return ctx.set_output_entry(0, ctx.input_entry(0));
  if (ctx.op_type() == "Dropout") {
    if (ctx.has_input(2)) {
      // Training drops at random; with a ratio of 0 it keeps every element, as inference.
      ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(2, "training_mode"));
      if (t->numel() != 1) return ctx.invalid("training_mode must hold one value");
      if (t->ints()[0] != 0) {
        if (!ctx.has_input(1)) return ctx.unsupported("training_mode=1 with the default ratio");
        ETC_ASSIGN_OR_RETURN(const HostTensor* ratio, ctx.require_constant(1, "ratio"));
        if (ratio->numel() != 1 || ratio->doubles()[0] != 0)
          return ctx.unsupported("training_mode=1 with a ratio other than 0 (random drops)");
      }
    }
    if (ctx.has_output(1)) {
      // In inference every element is kept: the mask is all true.
      ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
      ETC_ASSIGN_OR_RETURN(ValueId mask, ctx.emit(OpKind::FullLike, {{"self", x},
                                                                     {"fill_value", Scalar{true}},
                                                                     {"dtype", DType::kBool}}));
      ETC_RETURN_IF_ERROR(ctx.set_output(1, mask));
    }
  }
  return alias(ctx, 0, 0);
}

// BitShift(X, Y; direction) of uint8 tensors (the unsigned type etc has): in int64, X times
// (LEFT, then wrapped back to uint8 by the cast) or floor-divided by (RIGHT) 2^min(Y, 8),
// taken from a constant table; shifts of 8 or more give 0 either way.
Status convert_bit_shift(NodeCtx& ctx) {
  if (ctx.dtype(0) != DType::kUInt8 || ctx.dtype(1) != DType::kUInt8) {
    return ctx.unsupported("X and Y of type " + std::string(dtype_name(ctx.dtype(0))) + " and " +
                           std::string(dtype_name(ctx.dtype(1))) + " (uint8 only)");
  }
  ETC_ASSIGN_OR_RETURN(std::string direction, ctx.attr_string("direction", std::nullopt));
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.invalid("direction must be LEFT or RIGHT, got '" + direction + "'");
  constexpr int64_t kBits = 8;
  std::vector<int64_t> powers;
  for (int64_t k = 0; k <= kBits; ++k)
    powers.push_back(int64_t{1} << k);
  ValueId table = ctx.add_constant(host_from_ints(DType::kInt64, {kBits + 1}, powers));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::ToCopy, {{"self", y}, {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Clamp, {{"self", y}, {"max", Scalar{kBits}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId p,
      ctx.emit(OpKind::IndexTensor, {{"self", table}, {"indices", std::vector<ValueId>{y}}}));
  ValueId r;
  if (direction == "LEFT") {
    ETC_ASSIGN_OR_RETURN(r, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", p}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        r, ctx.emit(OpKind::DivTensorMode,
                    {{"self", x}, {"other", p}, {"rounding_mode", std::string("floor")}}));
  }
  ETC_ASSIGN_OR_RETURN(r, ctx.emit(OpKind::ToCopy, {{"self", r}, {"dtype", DType::kUInt8}}));
  return ctx.set_output(0, r);
}

// Resize (opset 10+) and Upsample (opset 7-9) of the two spatial dims of NCHW tensors.
Status evaluated_only(NodeCtx& ctx) {
  return ctx.unsupported(
      "only supported when all inputs are known at export time (etc has no "
      "run-time kernel for it)");
}

}  // namespace

int required_inputs(const std::string& op_type) {
  // The inputs ONNX requires of each op (the leading ones; later inputs are optional).
  // Where an old opset took an attribute instead (Reshape-1, Slice-1, Upsample-7, Resize's
  // scales), the converter checks what its opset needs.
  static const std::map<std::string, int> table = {
      {"Add", 2},
      {"And", 2},
      {"BatchNormalization", 5},
      {"Constant", 0},
      {"CastLike", 2},
      {"Compress", 2},
      {"DequantizeLinear", 2},
      {"QuantizeLinear", 2},
      {"MatMulInteger", 2},
      {"ConvInteger", 2},
      {"QLinearMatMul", 8},
      {"QLinearConv", 8},
      {"ReverseSequence", 2},
      {"Conv", 2},
      {"CumSum", 2},
      {"ConvTranspose", 2},
      {"Div", 2},
      {"Equal", 2},
      {"Expand", 2},
      {"Gather", 2},
      {"Gemm", 2},
      {"Greater", 2},
      {"GreaterOrEqual", 2},
      {"LSTM", 3},
      {"GRU", 3},
      {"RNN", 3},
      {"GatherElements", 2},
      {"GatherND", 2},
      {"GridSample", 2},
      {"LayerNormalization", 2},
      {"Less", 2},
      {"LessOrEqual", 2},
      {"MatMul", 2},
      {"MaxUnpool", 2},
      {"Mod", 2},
      {"Mul", 2},
      {"NegativeLogLikelihoodLoss", 2},
      {"OneHot", 3},
      {"NonMaxSuppression", 2},
      {"Or", 2},
      {"PRelu", 2},
      {"Pow", 2},
      {"Range", 3},
      {"MelWeightMatrix", 5},
      {"RoiAlign", 3},
      {"SequenceConstruct", 1},
      {"SequenceEmpty", 0},
      {"SequenceInsert", 2},
      {"SequenceAt", 2},
      {"SequenceMap", 1},
      {"Optional", 0},
      {"OptionalHasElement", 0},
      {"BitShift", 2},
      {"Loop", 0},  // M and cond are optional
      {"Scan", 0},  // Scan-8's sequence_lens is optional
      {"Scatter", 3},
      {"ScatterElements", 3},
      {"ScatterND", 3},
      {"SoftmaxCrossEntropyLoss", 2},
      {"Sub", 2},
      {"Where", 3},
      {"Xor", 2},
      {"TopK", 2},
      {"STFT", 2},
      {"InstanceNormalization", 3},
      {"Tile", 2},
  };
  auto it = table.find(op_type);
  return it == table.end() ? 1 : it->second;
}

bool same_since_opset1(const std::string& op_type) {
  // Left out: the binary ops with a `broadcast` attribute before opset 7 other than the
  // arithmetic ones (which refuse it), Cast (a string `to` before 6), Concat (optional axis
  // before 4), Tile (other inputs before 6), Dropout and BatchNormalization (`is_test`:
  // training by default), Split (an input before 2), Gemm, Upsample.
  static const std::set<std::string> same = {
      "Abs",           "Add",
      "ArgMax",        "ArgMin",
      "AveragePool",   "Ceil",
      "Clip",          "Constant",
      "Conv",          "Div",
      "Elu",           "Exp",
      "Flatten",       "Floor",
      "Gather",        "GlobalAveragePool",
      "GlobalMaxPool", "HardSigmoid",
      "Identity",      "InstanceNormalization",
      "LeakyRelu",     "Log",
      "LogSoftmax",    "MatMul",
      "Max",           "MaxPool",
      "Mean",          "Min",
      "Mul",           "Neg",
      "Not",           "PRelu",
      "Pad",           "Reciprocal",
      "ReduceL1",      "ReduceL2",
      "ReduceLogSum",  "ReduceLogSumExp",
      "ReduceMax",     "ReduceMean",
      "ReduceMin",     "ReduceProd",
      "ReduceSum",     "ReduceSumSquare",
      "Relu",          "Reshape",
      "Selu",          "Shape",
      "Sigmoid",       "Size",
      "Slice",         "Softmax",
      "Softplus",      "Softsign",
      "Sqrt",          "Squeeze",
      "Sub",           "Sum",
      "Tanh",          "Transpose",
      "Unsqueeze",
  };
  return same.count(op_type) != 0;
}

Status check_before_opset7(NodeCtx& ctx) {
  const std::string& op = ctx.op_type();
  const int64_t v = ctx.opset();
  // The binary ops' legacy `broadcast`: B aligned with A's trailing dims (or at `axis`),
  // the result A's shape. Where `axis` is A's rank less B's, numpy broadcasting computes
  // the same. (Gemm's `broadcast` of C is within opset 7's unidirectional broadcasting.)
  if (const onnx::AttributeProto* b = ctx.attr("broadcast"); b != nullptr && op != "Gemm") {
    if (ctx.num_inputs() != 2) return ctx.invalid("'broadcast' needs two inputs");
    const std::vector<int64_t>&sa = ctx.shape(0), &sb = ctx.shape(1);
    const auto suffix = static_cast<int64_t>(sa.size()) - static_cast<int64_t>(sb.size());
    if (b->i() != 0) {
      ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", suffix));
      std::optional<std::vector<int64_t>> shape = broadcast_shapes(sa, sb);
      if (axis != suffix || !shape || *shape != sa) {
        return ctx.unsupported("the legacy 'broadcast' of B " + shape_to_string(sb) + " onto A " +
                               shape_to_string(sa) + " at axis " + std::to_string(axis) +
                               " (etc takes B aligned with A's trailing dims)");
      }
    } else if (sa != sb) {
      return ctx.invalid("without 'broadcast', A " + shape_to_string(sa) + " and B " +
                         shape_to_string(sb) + " must have one shape");
    }
  }
  static const std::set<std::string> binary_with_broadcast = {"Pow",   "And",     "Or",  "Xor",
                                                              "Equal", "Greater", "Less"};
  bool same = same_since_opset1(op) || binary_with_broadcast.count(op) > 0 || op == "Gemm" ||
              (op == "Concat" && v >= 4) || (op == "Split" && v >= 2) || (op == "Tile" && v >= 6);
  if (op == "ConvTranspose") {
    // ConvTranspose-1's rules for output_shape and SAME pads differ from opset 11's; with
    // explicit pads it means the same.
    ETC_ASSIGN_OR_RETURN(std::string auto_pad, ctx.attr_string("auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET" || ctx.attr("output_shape")) {
      return ctx.unsupported("a model of opset " + std::to_string(v) +
                             ": ConvTranspose with auto_pad or output_shape (their rules "
                             "changed in opset 11)");
    }
    same = true;
  }
  if (op == "BatchNormalization" || op == "Dropout") {
    // `is_test` 1 is inference, all opset 7 has; the default 0 trains.
    ETC_ASSIGN_OR_RETURN(int64_t is_test, ctx.attr_int("is_test", 0));
    ETC_ASSIGN_OR_RETURN(int64_t spatial, ctx.attr_int("spatial", 1));
    if (is_test != 1 || spatial != 1) {
      return ctx.unsupported("a model of opset " + std::to_string(v) + ": " + op +
                             " in training mode (is_test=0) or with spatial=0");
    }
    same = true;
  }
  if (!same) {
    return ctx.unsupported("a model of opset " + std::to_string(v) +
                           ": before opset 7 etc converts only the op types whose meaning has "
                           "not changed since opset 1 (broadcasting and attributes differ)");
  }
  return Status();
}

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table = [] {
    std::map<std::string, Converter> t = {
        {"Add", binary(Bin::kAdd)},
        {"AveragePool", [](NodeCtx& c) { return convert_pool(c, false); }},
        {"CastLike", convert_cast_like},
        {"Compress", convert_compress},
        {"Celu", convert_elu},
        {"DepthToSpace", convert_depth_to_space},
        {"Det", convert_det},
        {"DFT", convert_dft},
        {"STFT", convert_stft},
        {"DequantizeLinear", convert_dequantize_linear},
        {"DynamicQuantizeLinear", convert_dynamic_quantize_linear},
        {"Elu", convert_elu},
        {"Einsum", convert_einsum},
        {"EyeLike", convert_eye_like},
        {"GatherElements", convert_gather_elements},
        {"GatherND", convert_gather_nd},
        {"GridSample", convert_grid_sample},
        {"GRU", convert_gru_rnn},
        {"Hardmax", convert_hardmax},
        {"InstanceNormalization", convert_instance_norm},
        {"IsInf", convert_is_inf},
        {"LRN", convert_lrn},
        {"MeanVarianceNormalization", convert_mean_variance_norm},
        {"NegativeLogLikelihoodLoss", convert_nll_loss},
        {"NonMaxSuppression", convert_non_max_suppression},
        {"NonZero", convert_non_zero},
        {"OneHot", convert_one_hot},
        {"Unique", convert_unique},
        {"QuantizeLinear", convert_quantize_linear},
        {"MatMulInteger", convert_matmul_integer},
        {"ConvInteger", convert_conv_integer},
        {"QLinearMatMul", convert_qlinear_matmul},
        {"QLinearConv", convert_qlinear_conv},
        {"ReverseSequence", convert_reverse_sequence},
        {"RNN", convert_gru_rnn},
        {"Scatter", convert_scatter_elements},
        {"ScatterElements", convert_scatter_elements},
        {"ScatterND", convert_scatter_nd},
        {"Selu", convert_elu},
        {"Shrink", convert_shrink},
        {"SoftmaxCrossEntropyLoss", convert_softmax_cross_entropy},
        {"Softplus", convert_softplus},
        {"Softsign", convert_softsign},
        {"SpaceToDepth", convert_space_to_depth},
        {"TfIdfVectorizer", convert_tfidf_vectorizer},
        {"ThresholdedRelu", convert_thresholded_relu},
        {"Tile", convert_tile},
        {"Trilu", convert_trilu},
        {"Cast", convert_cast},
        {"Clip", convert_clip},
        {"Constant", evaluated_only},
        {"ConstantOfShape", evaluated_only},
        {"Conv", [](NodeCtx& c) { return convert_conv(c, false); }},
        {"ConvTranspose", [](NodeCtx& c) { return convert_conv(c, true); }},
        {"Div", binary(Bin::kDiv)},
        {"Dropout", convert_identity},
        {"Erf", unary(OpKind::Erf)},
        {"Gelu", convert_gelu},
        {"Exp", unary(OpKind::Exp)},
        {"Gemm", convert_gemm},
        {"GlobalAveragePool", global_pool(false)},
        {"GlobalMaxPool", global_pool(true)},
        {"HardSigmoid", convert_hard_sigmoid},
        {"HardSwish", unary(OpKind::Hardswish)},
        {"Identity", convert_identity},
        {"LSTM", convert_lstm},
        {"LeakyRelu", convert_leaky_relu},
        {"Log", unary(OpKind::Log)},
        {"MatMul", convert_matmul},
        {"Max", variadic_extreme(OpKind::Maximum)},
        {"MaxPool", [](NodeCtx& c) { return convert_pool(c, true); }},
        {"MaxUnpool", convert_max_unpool},
        {"Mean", variadic_sum(true)},
        {"Min", variadic_extreme(OpKind::Minimum)},
        {"Mod", convert_mod},
        {"Mul", binary(Bin::kMul)},
        {"Neg", unary(OpKind::Neg, false)},
        {"Not", convert_not},
        {"PRelu", convert_prelu},
        {"Pow", convert_pow},
        {"Range", evaluated_only},
        {"If", convert_if},
        {"SequenceConstruct", convert_sequence_construct},
        {"SequenceEmpty", convert_sequence_empty},
        {"SequenceInsert", convert_sequence_insert},
        {"SequenceAt", convert_sequence_at},
        {"SequenceErase", convert_sequence_erase},
        {"SequenceLength", convert_sequence_length},
        {"SequenceMap", convert_sequence_map},
        {"ConcatFromSequence", convert_concat_from_sequence},
        {"SplitToSequence", convert_split_to_sequence},
        {"Optional", convert_optional},
        {"OptionalHasElement", convert_optional_has_element},
        {"OptionalGetElement", convert_optional_get_element},
        {"BitShift", convert_bit_shift},
        {"RoiAlign", convert_roi_align},
        {"Loop", convert_loop},
        {"Scan", convert_scan},
        {"HannWindow", evaluated_only},
        {"HammingWindow", evaluated_only},
        {"BlackmanWindow", evaluated_only},
        {"MelWeightMatrix", evaluated_only},
        {"Relu", unary(OpKind::Relu, false)},
        {"Resize", convert_resize},
        {"Shape", evaluated_only},
        {"Sigmoid", unary(OpKind::Sigmoid)},
        {"Size", evaluated_only},
        {"Sqrt", unary(OpKind::Sqrt)},
        {"Sub", binary(Bin::kSub)},
        {"Sum", variadic_sum(false)},
        {"Tanh", unary(OpKind::Tanh)},
        {"Upsample", convert_resize},
        {"Where", convert_where},
    };
    // The unary math ops whose ONNX op type unary_math.def names; the op's inference checks
    // the dtype.
#define ETC_UNARY_MATH(op, kind, onnx, expr) \
  if (std::string_view(onnx) != "") t[onnx] = unary(OpKind::op, false);
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH
    // The binary math ops whose ONNX op type binary_math.def names.
#define ETC_BINARY_FN(fn, kind, expr)
#define ETC_BINARY_OP(op, fn, form, onnx) \
  if (std::string_view(onnx) != "") t[onnx] = binary_math(OpKind::op);
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN
    add_layout_converters(t);
    add_norm_reduce_converters(t);
    add_training_converters(t);
    return t;
  }();
  return table;
}

}  // namespace etc::onnx_import
