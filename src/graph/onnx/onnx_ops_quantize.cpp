// ONNX's linear quantization -> IR, in float arithmetic: QuantizeLinear is
// clamp(round(x / scale) + zero_point) cast to the 8-bit type (round half to even, as ONNX
// and ATen round), DequantizeLinear (x - zero_point) * scale, and DynamicQuantizeLinear
// finds uint8's scale and zero point from the input's range first.
#include <string>

#include "graph/onnx/node_context.h"
#include "graph/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

// Scale or zero point input i viewed to broadcast against input 0: a scalar as is, a 1-d
// per-axis one along `axis`, cast to float32.
Result<ValueId> quant_param(NodeCtx& ctx, int i, int64_t axis) {
  ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
  if (ctx.dtype(i) != DType::kFloat32) {
    ETC_ASSIGN_OR_RETURN(v, ctx.emit(OpKind::ToCopy, {{"self", v}, {"dtype", DType::kFloat32}}));
  }
  const std::vector<int64_t>& s = ctx.shape(i);
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  if (n == 1) return v;
  const int64_t r = ctx.rank(0);
  // The axis matters only here (a scalar scale needs none, whatever the rank).
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  if (s.size() != 1 || s[0] != ctx.shape(0)[static_cast<size_t>(axis)]) {
    return ctx.invalid("input " + std::to_string(i) + " of shape " + shape_to_string(s) +
                       " is neither a scalar nor one value per index of axis " +
                       std::to_string(axis));
  }
  std::vector<int64_t> view(static_cast<size_t>(r), 1);
  view[static_cast<size_t>(axis)] = s[0];
  return reshape(ctx, v, view);
}

Result<int64_t> quant_axis(NodeCtx& ctx) {
  return ctx.attr_int("axis", 1);
}

// round(x / scale) + zero_point, saturated to `to` and cast.
Result<ValueId> quantize(NodeCtx& ctx, ValueId x, ValueId scale, std::optional<ValueId> zp,
                         DType to) {
  ETC_ASSIGN_OR_RETURN(ValueId q, ctx.emit(OpKind::DivTensor, {{"self", x}, {"other", scale}}));
  ETC_ASSIGN_OR_RETURN(q, ctx.emit(OpKind::Round, {{"self", q}}));
  if (zp) {
    ETC_ASSIGN_OR_RETURN(q, ctx.emit(OpKind::AddTensor, {{"self", q}, {"other", *zp}}));
  }
  const double lo = to == DType::kUInt8 ? 0 : -128, hi = to == DType::kUInt8 ? 255 : 127;
  ETC_ASSIGN_OR_RETURN(
      q, ctx.emit(OpKind::Clamp, {{"self", q}, {"min", Scalar{lo}}, {"max", Scalar{hi}}}));
  return ctx.emit(OpKind::ToCopy, {{"self", q}, {"dtype", to}});
}

}  // namespace

// QuantizeLinear(x, y_scale, y_zero_point?; axis=1): to y_zero_point's type (uint8 without).
Status convert_quantize_linear(NodeCtx& ctx) {
  if (ctx.dtype(0) != DType::kFloat32) return ctx.unsupported("inputs other than float32");
  const DType to = ctx.has_input(2) ? ctx.dtype(2) : DType::kUInt8;
  if (to != DType::kUInt8 && to != DType::kInt8)
    return ctx.unsupported("quantizing to " + std::string(dtype_name(to)) + " (uint8 and int8)");
  ETC_ASSIGN_OR_RETURN(int64_t axis, quant_axis(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId scale, quant_param(ctx, 1, axis));
  std::optional<ValueId> zp;
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(zp, quant_param(ctx, 2, axis));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, quantize(ctx, x, scale, zp, to));
  return ctx.set_output(0, y);
}

// DequantizeLinear(x, x_scale, x_zero_point?; axis=1): (x - zero_point) * scale in float32.
Status convert_dequantize_linear(NodeCtx& ctx) {
  const DType dt = ctx.dtype(0);
  if (dt != DType::kUInt8 && dt != DType::kInt8 && dt != DType::kInt32)
    return ctx.unsupported("dequantizing " + std::string(dtype_name(dt)) + " (uint8, int8, int32)");
  if (ctx.dtype(1) != DType::kFloat32) return ctx.unsupported("scales other than float32");
  ETC_ASSIGN_OR_RETURN(int64_t axis, quant_axis(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kFloat32}}));
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(ValueId zp, quant_param(ctx, 2, axis));
    ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", zp}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId scale, quant_param(ctx, 1, axis));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", scale}}));
  return ctx.set_output(0, y);
}

// DynamicQuantizeLinear(x) -> y (uint8), y_scale, y_zero_point: the range [min(0, min x),
// max(0, max x)] mapped onto [0, 255].
Status convert_dynamic_quantize_linear(NodeCtx& ctx) {
  if (ctx.dtype(0) != DType::kFloat32) return ctx.unsupported("inputs other than float32");
  const int64_t r = ctx.rank(0);
  std::vector<int64_t> all;
  for (int64_t d = 0; d < r; ++d)
    all.push_back(d);
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId hi,
                       ctx.emit(OpKind::Amax, {{"self", x}, {"dim", all}, {"keepdim", false}}));
  ETC_ASSIGN_OR_RETURN(ValueId lo,
                       ctx.emit(OpKind::Amin, {{"self", x}, {"dim", all}, {"keepdim", false}}));
  ETC_ASSIGN_OR_RETURN(hi, ctx.emit(OpKind::Clamp, {{"self", hi}, {"min", Scalar{0.0}}}));
  ETC_ASSIGN_OR_RETURN(lo, ctx.emit(OpKind::Clamp, {{"self", lo}, {"max", Scalar{0.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId range, ctx.emit(OpKind::SubTensor, {{"self", hi}, {"other", lo}}));
  ETC_ASSIGN_OR_RETURN(ValueId scale,
                       ctx.emit(OpKind::DivScalar, {{"self", range}, {"other", Scalar{255.0}}}));
  // zero point: saturate(round(0 - min / scale)).
  ETC_ASSIGN_OR_RETURN(ValueId zpf, ctx.emit(OpKind::DivTensor, {{"self", lo}, {"other", scale}}));
  ETC_ASSIGN_OR_RETURN(zpf, ctx.emit(OpKind::Neg, {{"self", zpf}}));
  ETC_ASSIGN_OR_RETURN(zpf, ctx.emit(OpKind::Round, {{"self", zpf}}));
  ETC_ASSIGN_OR_RETURN(
      zpf, ctx.emit(OpKind::Clamp, {{"self", zpf}, {"min", Scalar{0.0}}, {"max", Scalar{255.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, quantize(ctx, x, scale, zpf, DType::kUInt8));
  ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  if (ctx.has_output(1)) ETC_RETURN_IF_ERROR(ctx.set_output(1, scale));
  if (ctx.has_output(2)) {
    ETC_ASSIGN_OR_RETURN(ValueId zp,
                         ctx.emit(OpKind::ToCopy, {{"self", zpf}, {"dtype", DType::kUInt8}}));
    ETC_RETURN_IF_ERROR(ctx.set_output(2, zp));
  }
  return Status();
}

}  // namespace etc::onnx_import
