// ONNX's activations and normalisations that are short compositions of IR ops: the ELU
// family, Softplus, Softsign, ThresholdedRelu, Shrink, IsInf, CastLike, and
// InstanceNormalization (native_group_norm with a group per channel),
// MeanVarianceNormalization and LRN.
#include <limits>
#include <string>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

Status require_float(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) {
    return ctx.unsupported("input type " + std::string(dtype_name(ctx.dtype(0))) +
                           " (floating-point types only)");
  }
  return Status();
}

Result<ValueId> mul_scalar(NodeCtx& ctx, ValueId v, double s) {
  return ctx.emit(OpKind::MulScalar, {{"self", v}, {"other", Scalar{s}}});
}

}  // namespace

// Elu: x > 0 ? x : alpha * (exp(x) - 1); Celu: the same of x / alpha, times alpha; Selu:
// gamma times Elu with its own alpha.
Status convert_elu(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  const std::string& op = ctx.op_type();
  const double default_alpha = op == "Selu" ? 1.67326319217681884765625 : 1.0;
  ETC_ASSIGN_OR_RETURN(float alpha_f, ctx.attr_float("alpha", static_cast<float>(default_alpha)));
  const double alpha = alpha_f;
  if (op == "Celu" && alpha == 0) return ctx.invalid("alpha must not be 0");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId inner = x;
  if (op == "Celu") {
    ETC_ASSIGN_OR_RETURN(inner, mul_scalar(ctx, x, 1.0 / alpha));
  }
  ETC_ASSIGN_OR_RETURN(ValueId em1, ctx.emit(OpKind::Expm1, {{"self", inner}}));
  ETC_ASSIGN_OR_RETURN(ValueId neg, mul_scalar(ctx, em1, alpha));
  ETC_ASSIGN_OR_RETURN(ValueId pos,
                       ctx.emit(OpKind::GtScalar, {{"self", x}, {"other", Scalar{0.0}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", pos}, {"self", x}, {"other", neg}}));
  if (op == "Selu") {
    ETC_ASSIGN_OR_RETURN(float gamma, ctx.attr_float("gamma", 1.05070102214813232421875f));
    ETC_ASSIGN_OR_RETURN(y, mul_scalar(ctx, y, gamma));
  }
  return ctx.set_output(0, y);
}

// Softplus: log(exp(x) + 1).
Status convert_softplus(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId e, ctx.emit(OpKind::Exp, {{"self", x}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Log1p, {{"self", e}}));
  return ctx.set_output(0, y);
}

// Softsign: x / (1 + |x|).
Status convert_softsign(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId a, ctx.emit(OpKind::Abs, {{"self", x}}));
  ETC_ASSIGN_OR_RETURN(ValueId d,
                       ctx.emit(OpKind::AddScalar, {{"self", a}, {"other", Scalar{1.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::DivTensor, {{"self", x}, {"other", d}}));
  return ctx.set_output(0, y);
}

// ThresholdedRelu: x > alpha ? x : 0.
Status convert_thresholded_relu(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 1.0f));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId keep,
                       ctx.emit(OpKind::GtScalar, {{"self", x}, {"other", Scalar{double(alpha)}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", keep},
                                              {"self", x},
                                              {"other", scalar_constant(ctx, ctx.dtype(0), 0)}}));
  return ctx.set_output(0, y);
}

// Shrink: x < -lambd ? x + bias : x > lambd ? x - bias : 0.
Status convert_shrink(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  ETC_ASSIGN_OR_RETURN(float lambd, ctx.attr_float("lambd", 0.5f));
  ETC_ASSIGN_OR_RETURN(float bias, ctx.attr_float("bias", 0.0f));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(
      ValueId low, ctx.emit(OpKind::LtScalar, {{"self", x}, {"other", Scalar{-double(lambd)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId high,
                       ctx.emit(OpKind::GtScalar, {{"self", x}, {"other", Scalar{double(lambd)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId up,
                       ctx.emit(OpKind::AddScalar, {{"self", x}, {"other", Scalar{double(bias)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId down,
                       ctx.emit(OpKind::SubScalar, {{"self", x}, {"other", Scalar{double(bias)}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", high},
                                              {"self", down},
                                              {"other", scalar_constant(ctx, ctx.dtype(0), 0)}}));
  ETC_ASSIGN_OR_RETURN(
      y, ctx.emit(OpKind::WhereSelf, {{"condition", low}, {"self", up}, {"other", y}}));
  return ctx.set_output(0, y);
}

// IsInf(x; detect_positive=1, detect_negative=1): isinf, or x == +inf / -inf.
Status convert_is_inf(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  ETC_ASSIGN_OR_RETURN(int64_t pos, ctx.attr_int("detect_positive", 1));
  ETC_ASSIGN_OR_RETURN(int64_t neg, ctx.attr_int("detect_negative", 1));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  if (pos && neg) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Isinf, {{"self", x}}));
  } else if (pos || neg) {
    const double inf = std::numeric_limits<double>::infinity();
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::EqScalar, {{"self", x}, {"other", Scalar{pos ? inf : -inf}}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::FullLike,
                    {{"self", x}, {"fill_value", Scalar{false}}, {"dtype", DType::kBool}}));
  }
  return ctx.set_output(0, y);
}

// CastLike(x, like): Cast to like's type.
Status convert_cast_like(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::ToCopy, {{"self", x}, {"dtype", ctx.dtype(1)}}));
  return ctx.set_output(0, y);
}

// InstanceNormalization(x [N, C, ...], scale [C], B [C]; epsilon): native_group_norm with
// one group per channel.
Status convert_instance_norm(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  const std::vector<int64_t>& s = ctx.shape(0);
  if (s.size() < 3) return ctx.invalid("input must have rank 3 or more (N, C, spatial dims)");
  const int64_t n = s[0], c = s[1];
  int64_t hw = 1;
  for (size_t d = 2; d < s.size(); ++d)
    hw *= s[d];
  for (int i : {1, 2}) {
    if (ctx.shape(i) != std::vector<int64_t>{c})
      return ctx.invalid(std::string(i == 1 ? "scale" : "B") + " must have shape [C]");
    if (ctx.dtype(i) != ctx.dtype(0)) return ctx.invalid("scale and B must have the input's type");
  }
  ETC_ASSIGN_OR_RETURN(float eps, ctx.attr_float("epsilon", 1e-5f));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId scale, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId bias, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::NativeGroupNorm, {{"input", x},
                                                                     {"weight", scale},
                                                                     {"bias", bias},
                                                                     {"N", n},
                                                                     {"C", c},
                                                                     {"HxW", hw},
                                                                     {"group", c},
                                                                     {"eps", double(eps)}}));
  return ctx.set_output(0, y);
}

// MeanVarianceNormalization(x; axes=[0, 2, 3]): (x - mean) / sqrt(var + 1e-9), mean and
// (biased) variance over axes.
Status convert_mean_variance_norm(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  const int64_t r = ctx.rank(0);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> axes,
                       ctx.attr_ints("axes", std::vector<int64_t>{0, 2, 3}));
  for (int64_t& a : axes) {
    ETC_RETURN_IF_ERROR(ctx.check_axis(a, r, "axes"));
    a = ctx.wrap_axis(a, r);
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId mean,
                       ctx.emit(OpKind::MeanDim, {{"self", x}, {"dim", axes}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(ValueId centered,
                       ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", mean}}));
  ETC_ASSIGN_OR_RETURN(ValueId sq,
                       ctx.emit(OpKind::MulTensor, {{"self", centered}, {"other", centered}}));
  ETC_ASSIGN_OR_RETURN(ValueId var,
                       ctx.emit(OpKind::MeanDim, {{"self", sq}, {"dim", axes}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(var, ctx.emit(OpKind::AddScalar, {{"self", var}, {"other", Scalar{1e-9}}}));
  ETC_ASSIGN_OR_RETURN(ValueId sd, ctx.emit(OpKind::Sqrt, {{"self", var}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::DivTensor, {{"self", centered}, {"other", sd}}));
  return ctx.set_output(0, y);
}

// LRN(x [N, C, ...]; size, alpha, beta, bias): x / (bias + alpha / size * the sum of x² over
// the size channels around each)^beta. The window sum is an avg_pool2d of x² viewed as
// [N, 1, C, rest] with the channels zero-padded (floor((size-1)/2) before, the rest after).
Status convert_lrn(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(require_float(ctx));
  const std::vector<int64_t>& s = ctx.shape(0);
  if (s.size() < 3) return ctx.invalid("input must have rank 3 or more (N, C, spatial dims)");
  ETC_ASSIGN_OR_RETURN(int64_t size, ctx.attr_int("size", std::nullopt));
  if (size < 1 || size > 2 * s[1] + 1)
    return ctx.invalid("size must lie in [1, 2 * C + 1], got " + std::to_string(size));
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 1e-4f));
  ETC_ASSIGN_OR_RETURN(float beta, ctx.attr_float("beta", 0.75f));
  ETC_ASSIGN_OR_RETURN(float bias, ctx.attr_float("bias", 1.0f));
  int64_t rest = 1;
  for (size_t d = 2; d < s.size(); ++d)
    rest *= s[d];
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId sq, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", x}}));
  ETC_ASSIGN_OR_RETURN(sq, reshape(ctx, sq, {s[0], 1, s[1], rest}));
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  ETC_ASSIGN_OR_RETURN(
      sq, ctx.emit(OpKind::ConstantPadNd, {{"self", sq},
                                           {"pad", std::vector<int64_t>{0, 0, before, after}},
                                           {"value", Scalar{0.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId mean,
                       ctx.emit(OpKind::AvgPool2d, {{"self", sq},
                                                    {"kernel_size", std::vector<int64_t>{size, 1}},
                                                    {"stride", std::vector<int64_t>{1, 1}},
                                                    {"padding", std::vector<int64_t>{0, 0}},
                                                    {"ceil_mode", false},
                                                    {"count_include_pad", true}}));
  ETC_ASSIGN_OR_RETURN(mean, reshape(ctx, mean, s));
  ETC_ASSIGN_OR_RETURN(ValueId base, mul_scalar(ctx, mean, alpha));
  ETC_ASSIGN_OR_RETURN(
      base, ctx.emit(OpKind::AddScalar, {{"self", base}, {"other", Scalar{double(bias)}}}));
  ETC_ASSIGN_OR_RETURN(base, ctx.emit(OpKind::PowTensorScalar,
                                      {{"self", base}, {"exponent", Scalar{double(beta)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::DivTensor, {{"self", x}, {"other", base}}));
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
