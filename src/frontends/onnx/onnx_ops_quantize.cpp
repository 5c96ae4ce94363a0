// ONNX's linear quantization -> IR, in float arithmetic: QuantizeLinear is
// clamp(round(x / scale) + zero_point) cast to the 8-bit type (round half to even, as ONNX
// and ATen round), DequantizeLinear (x - zero_point) * scale, and DynamicQuantizeLinear
// finds uint8's scale and zero point from the input's range first. MatMulInteger and
// ConvInteger are exact integer products of the inputs less their zero points (int32
// matrix products; int64 convolutions); QLinearMatMul and QLinearConv requantize those
// with the scales, as ONNX's reference does.
#include <string>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

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

// Whether the zero point (input i) is given and not known to be all zeros: ONNX Runtime's
// quantizer writes symmetric int8 weights with zero points of 0, whose subtraction would
// cost a pass over the widened weight on every run.
bool nonzero_zero_point(NodeCtx& ctx, int i) {
  if (!ctx.has_input(i)) return false;
  const HostTensor* zp = ctx.constant(i);
  if (zp == nullptr) return true;
  for (int64_t v : zp->ints()) {
    if (v != 0) return true;
  }
  return false;
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
    ETC_ASSIGN_OR_RETURN(ValueId z, quant_param(ctx, 2, axis));  // checked even when zero
    if (nonzero_zero_point(ctx, 2)) zp = z;
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
    ETC_ASSIGN_OR_RETURN(ValueId zp, quant_param(ctx, 2, axis));  // checked even when zero
    if (nonzero_zero_point(ctx, 2)) {
      ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", zp}}));
    }
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

// ---- Integer and quantized matrix products and convolutions --------------------------------

namespace {

// Input i (a zero point or scale) shaped to broadcast against a rank-`rank` operand whose
// dim `dim` it may follow: a single value as a 0-d tensor, or a 1-d tensor of `size` values
// along `dim` (dim < 0: only a single value is allowed), cast to `dtype`.
Result<ValueId> param_along(NodeCtx& ctx, int i, int64_t rank, int64_t dim, int64_t size,
                            DType dtype, const std::string& what) {
  ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
  const std::vector<int64_t>& s = ctx.shape(i);
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  if (ctx.dtype(i) != dtype) {
    ETC_ASSIGN_OR_RETURN(v, ctx.emit(OpKind::ToCopy, {{"self", v}, {"dtype", dtype}}));
  }
  if (n == 1 && s.size() <= 1) return reshape(ctx, v, {});
  if (dim < 0 || s.size() != 1 || s[0] != size) {
    return ctx.invalid(what + " (input " + std::to_string(i) + ") of shape " + shape_to_string(s) +
                       " must be a scalar" +
                       (dim < 0 ? std::string() : " or have " + std::to_string(size) + " values"));
  }
  std::vector<int64_t> view(static_cast<size_t>(rank), 1);
  view[static_cast<size_t>(dim)] = size;
  return reshape(ctx, v, view);
}

// Input `in` (8-bit integers) as `acc` minus its zero point (input `zp`, if given), which
// may follow dim `dim` of the input.
Result<ValueId> centred(NodeCtx& ctx, int in, int zp, int64_t dim, DType acc,
                        const std::string& what) {
  const DType t = ctx.dtype(in);
  if (t != DType::kUInt8 && t != DType::kInt8) {
    return ctx.unsupported("input " + std::to_string(in) + " of type " +
                           std::string(dtype_name(t)) + " (uint8 and int8)");
  }
  ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(in));
  ETC_ASSIGN_OR_RETURN(v, ctx.emit(OpKind::ToCopy, {{"self", v}, {"dtype", acc}}));
  if (!ctx.has_input(zp)) return v;
  if (ctx.dtype(zp) != t) {
    return ctx.invalid(what + " (input " + std::to_string(zp) + ") must have input " +
                       std::to_string(in) + "'s type");
  }
  const int64_t r = ctx.rank(in);
  const int64_t size = dim >= 0 && dim < r ? ctx.shape(in)[static_cast<size_t>(dim)] : 0;
  ETC_ASSIGN_OR_RETURN(ValueId z, param_along(ctx, zp, r, dim < r ? dim : -1, size, acc, what));
  return ctx.emit(OpKind::SubTensor, {{"self", v}, {"other", z}});
}

// QLinear*'s output: round(acc * multiplier) + y_zero_point (input `zp`), saturated to its
// 8-bit type, as ONNX's reference computes it (the int32 accumulator times the float32
// multiplier, in float64).
Result<ValueId> requantize(NodeCtx& ctx, ValueId acc, ValueId multiplier, int zp) {
  const DType to = ctx.has_input(zp) ? ctx.dtype(zp) : DType::kUInt8;
  if (to != DType::kUInt8 && to != DType::kInt8)
    return ctx.unsupported("y_zero_point of type " + std::string(dtype_name(to)));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::ToCopy, {{"self", acc}, {"dtype", DType::kFloat64}}));
  ETC_ASSIGN_OR_RETURN(
      multiplier, ctx.emit(OpKind::ToCopy, {{"self", multiplier}, {"dtype", DType::kFloat64}}));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::MulTensor, {{"self", y}, {"other", multiplier}}));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Round, {{"self", y}}));
  if (ctx.has_input(zp)) {
    ETC_ASSIGN_OR_RETURN(ValueId z,
                         param_along(ctx, zp, 0, -1, 0, DType::kFloat64, "y_zero_point"));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddTensor, {{"self", y}, {"other", z}}));
  }
  const double lo = to == DType::kUInt8 ? 0 : -128, hi = to == DType::kUInt8 ? 255 : 127;
  ETC_ASSIGN_OR_RETURN(
      y, ctx.emit(OpKind::Clamp, {{"self", y}, {"min", Scalar{lo}}, {"max", Scalar{hi}}}));
  return ctx.emit(OpKind::ToCopy, {{"self", y}, {"dtype", to}});
}

// a_scale * b_scale / y_scale (float32 scales of inputs ia, ib, iy), each a scalar or
// following dim `da` / `db` of a rank-`rank` result of sizes `sizes`.
Result<ValueId> multiplier(NodeCtx& ctx, int ia, int64_t da, int ib, int64_t db, int iy,
                           int64_t rank, const std::vector<int64_t>& sizes) {
  for (int i : {ia, ib, iy}) {
    if (ctx.dtype(i) != DType::kFloat32) return ctx.unsupported("scales other than float32");
  }
  auto size_of = [&](int64_t d) { return d >= 0 ? sizes[static_cast<size_t>(d)] : 0; };
  ETC_ASSIGN_OR_RETURN(ValueId a, param_along(ctx, ia, rank, da, size_of(da), DType::kFloat32,
                                              "input " + std::to_string(ia) + "'s scale"));
  ETC_ASSIGN_OR_RETURN(ValueId b, param_along(ctx, ib, rank, db, size_of(db), DType::kFloat32,
                                              "input " + std::to_string(ib) + "'s scale"));
  ETC_ASSIGN_OR_RETURN(ValueId y, param_along(ctx, iy, 0, -1, 0, DType::kFloat32, "y_scale"));
  ETC_ASSIGN_OR_RETURN(ValueId m, ctx.emit(OpKind::MulTensor, {{"self", a}, {"other", b}}));
  return ctx.emit(OpKind::DivTensor, {{"self", m}, {"other", y}});
}

// (A - a_zero_point) @ (B - b_zero_point) in int32; A's zero point may be per row (its
// dim -2), B's per column (its last dim).
Result<ValueId> integer_matmul(NodeCtx& ctx, int ia, int iazp, int ib, int ibzp) {
  if (ctx.rank(ia) < 2 || ctx.rank(ib) < 2)
    return ctx.unsupported("matrix products of vectors (rank-1 inputs)");
  ETC_ASSIGN_OR_RETURN(ValueId a,
                       centred(ctx, ia, iazp, ctx.rank(ia) - 2, DType::kInt32, "A's zero point"));
  ETC_ASSIGN_OR_RETURN(ValueId b,
                       centred(ctx, ib, ibzp, ctx.rank(ib) - 1, DType::kInt32, "B's zero point"));
  return matmul(ctx, a, ctx.shape(ia), b, ctx.shape(ib));
}

// (x - x_zero_point) convolved with (w - w_zero_point), exactly, in int64 (w's zero point
// may be per output channel); bias (int32) added.
Result<ValueId> integer_conv(NodeCtx& ctx, int ix, int ixzp, int iw, int iwzp, int ibias) {
  ETC_ASSIGN_OR_RETURN(ValueId x, centred(ctx, ix, ixzp, -1, DType::kInt64, "x_zero_point"));
  ETC_ASSIGN_OR_RETURN(ValueId w, centred(ctx, iw, iwzp, 0, DType::kInt64, "w_zero_point"));
  std::optional<ValueId> bias;
  if (ibias >= 0 && ctx.has_input(ibias)) {
    if (ctx.dtype(ibias) != DType::kInt32) return ctx.invalid("B must be int32");
    ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(ibias));
    ETC_ASSIGN_OR_RETURN(bias, ctx.emit(OpKind::ToCopy, {{"self", b}, {"dtype", DType::kInt64}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, convolve(ctx, x, w, bias, false));
  return ctx.emit(OpKind::ToCopy, {{"self", y}, {"dtype", DType::kInt32}});
}

}  // namespace

// MatMulInteger(A, B, a_zero_point?, b_zero_point?) -> int32.
Status convert_matmul_integer(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId y, integer_matmul(ctx, 0, 2, 1, 3));
  return ctx.set_output(0, y);
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?; Conv's attributes) -> int32.
Status convert_conv_integer(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId y, integer_conv(ctx, 0, 2, 1, 3, -1));
  return ctx.set_output(0, y);
}

// QLinearMatMul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point).
Status convert_qlinear_matmul(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId acc, integer_matmul(ctx, 0, 2, 3, 5));
  const std::vector<int64_t> sizes = ctx.sizes_of(acc);
  const int64_t r = static_cast<int64_t>(sizes.size());
  ETC_ASSIGN_OR_RETURN(ValueId m, multiplier(ctx, 1, r - 2, 4, r - 1, 6, r, sizes));
  ETC_ASSIGN_OR_RETURN(ValueId y, requantize(ctx, acc, m, 7));
  return ctx.set_output(0, y);
}

// QLinearConv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point,
// B?; Conv's attributes): w's scale and zero point may be per output channel.
Status convert_qlinear_conv(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId acc, integer_conv(ctx, 0, 2, 3, 5, 8));
  const std::vector<int64_t> sizes = ctx.sizes_of(acc);
  const int64_t r = static_cast<int64_t>(sizes.size());
  ETC_ASSIGN_OR_RETURN(ValueId m, multiplier(ctx, 1, -1, 4, 1, 6, r, sizes));
  ETC_ASSIGN_OR_RETURN(ValueId y, requantize(ctx, acc, m, 7));
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
