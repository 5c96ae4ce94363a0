// The quantized_decomposed ops that PT2E quantization (prepare_pt2e / convert_pt2e with
// ExecuTorch's XNNPACKQuantizer, torchao's quantizers) leaves in a program: quantize and
// dequantize per tensor and per channel. Each becomes the elementwise ops of PyTorch's own
// reference implementation (torch/ao/quantization/fx/_decomposed.py), in its order and
// dtypes, so that etc computes what eager computes for the converted model: quantizing is
// round(x * (1 / scale)) + zero_point clamped to [quant_min, quant_max] and cast, and
// dequantizing (q - zero_point) * scale. The int8 weights stay int8 in the program.
#include <cmath>
#include <cstdint>

#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {
namespace {

// The bounds of a quantized dtype (torchao's _get_and_check_qmin_qmax when none are given).
Result<std::pair<int64_t, int64_t>> dtype_bounds(TorchNode& n, DType d) {
  switch (d) {
    case DType::kInt8:
      return std::pair<int64_t, int64_t>{-128, 127};
    case DType::kUInt8:
      return std::pair<int64_t, int64_t>{0, 255};
    case DType::kInt16:
      return std::pair<int64_t, int64_t>{-32768, 32767};
    case DType::kInt32:
      return std::pair<int64_t, int64_t>{INT32_MIN, INT32_MAX};
    default:
      return n.unsupported("quantized dtype " + std::string(dtype_name(d)) +
                           " (etc takes int8, uint8, int16 and int32)");
  }
}

// An integer dtype etc quantizes to, and a range [quant_min, quant_max] inside its bounds.
Status check_quantized(TorchNode& n, DType dtype, int64_t quant_min, int64_t quant_max) {
  ETC_ASSIGN_OR_RETURN(auto bounds, dtype_bounds(n, dtype));
  if (quant_min < bounds.first || quant_max > bounds.second || quant_min > quant_max) {
    return n.invalid("quant_min " + std::to_string(quant_min) + " and quant_max " +
                     std::to_string(quant_max) + " are not a range of " +
                     std::string(dtype_name(dtype)));
  }
  return Status();
}

struct QuantArgs {
  int64_t quant_min = 0, quant_max = 0;
  DType dtype = DType::kInt8;
};

Result<QuantArgs> quant_args(TorchNode& n) {
  QuantArgs a;
  ETC_ASSIGN_OR_RETURN(a.quant_min, n.int_arg("quant_min"));
  ETC_ASSIGN_OR_RETURN(a.quant_max, n.int_arg("quant_max"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> dtype, n.dtype_arg("dtype"));
  if (!dtype) return n.invalid("dtype is required");
  a.dtype = *dtype;
  ETC_RETURN_IF_ERROR(check_quantized(n, a.dtype, a.quant_min, a.quant_max));
  return a;
}

// The float input as float32 (PyTorch's reference casts float16 and bfloat16 up).
Result<ValueId> float_input(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  const DType d = n.dtype(x);
  if (d == DType::kFloat32) return x;
  if (d != DType::kFloat16 && d != DType::kBFloat16) {
    return n.invalid("the input is " + std::string(dtype_name(d)) +
                     "; quantizing takes float32, float16 or bfloat16");
  }
  return n.emit(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kFloat32}});
}

// clamp(r + zero_point, quant_min, quant_max).to(dtype), where r is the rounded, scaled
// input; zero_point a number or a tensor broadcasting with r.
Result<ValueId> finish_quantize(TorchNode& n, ValueId r, const ArgValue& zero_point,
                                const QuantArgs& a) {
  ValueId v = r;
  if (const auto* z = std::get_if<ValueId>(&zero_point)) {
    ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::AddTensor, {{"self", v}, {"other", *z}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        v, n.emit(OpKind::AddScalar, {{"self", v}, {"other", std::get<Scalar>(zero_point)}}));
  }
  ETC_ASSIGN_OR_RETURN(
      v, n.emit(OpKind::Clamp,
                {{"self", v}, {"min", Scalar{a.quant_min}}, {"max", Scalar{a.quant_max}}}));
  return n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", a.dtype}});
}

// The input's dtype must be the one the op names.
Status check_input_dtype(TorchNode& n, ValueId q, DType dtype) {
  if (n.dtype(q) == dtype) return Status();
  return n.invalid("the input is " + std::string(dtype_name(n.dtype(q))) + "; dtype says " +
                   std::string(dtype_name(dtype)));
}

Result<DType> out_dtype(TorchNode& n) {
  if (!n.has("out_dtype")) return DType::kFloat32;
  ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("out_dtype"));
  const DType out = d.value_or(DType::kFloat32);
  if (!dtype_is_float(out)) {
    return n.invalid("out_dtype " + std::string(dtype_name(out)) + " is not a float dtype");
  }
  return out;
}

// A one-element tensor argument (the .tensor overloads' scale and zero point) as a 0-d
// value, so that it broadcasts as the number it stands for.
Result<ValueId> scalar_tensor(TorchNode& n, const char* arg) {
  ETC_ASSIGN_OR_RETURN(ValueId v, n.tensor(arg));
  if (n.spec(v).numel() != 1) {
    return n.invalid(std::string(arg) + " must hold one element, it has " +
                     std::to_string(n.spec(v).numel()));
  }
  return n.emit(OpKind::Reshape, {{"self", v}, {"shape", std::vector<int64_t>{}}});
}

// quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype); the .tensor
// overload takes scale and zero_point as one-element tensors (read with .item() by the
// reference: the same float32 product with the reciprocal rounded to float32).
Status convert_quantize_per_tensor(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(QuantArgs a, quant_args(n));
  ETC_ASSIGN_OR_RETURN(ValueId x, float_input(n));
  ValueId scaled;
  ArgValue zero_point;
  if (n.is_tensor("scale")) {
    ETC_ASSIGN_OR_RETURN(ValueId s, scalar_tensor(n, "scale"));
    ETC_ASSIGN_OR_RETURN(ValueId inv, n.emit(OpKind::Reciprocal, {{"self", s}}));
    if (n.dtype(inv) != DType::kFloat32) {
      ETC_ASSIGN_OR_RETURN(inv,
                           n.emit(OpKind::ToCopy, {{"self", inv}, {"dtype", DType::kFloat32}}));
    }
    ETC_ASSIGN_OR_RETURN(scaled, n.emit(OpKind::MulTensor, {{"self", x}, {"other", inv}}));
    ETC_ASSIGN_OR_RETURN(ValueId z, scalar_tensor(n, "zero_point"));
    if (dtype_is_float(n.dtype(z))) return n.invalid("zero_point must be an integer");
    ETC_ASSIGN_OR_RETURN(z, n.emit(OpKind::ToCopy, {{"self", z}, {"dtype", DType::kFloat32}}));
    zero_point = z;
  } else {
    ETC_ASSIGN_OR_RETURN(double scale, n.float_arg("scale"));
    if (!(scale > 0) || !std::isfinite(scale)) {
      return n.invalid("scale " + std::to_string(scale) + " must be positive and finite");
    }
    ETC_ASSIGN_OR_RETURN(scaled,
                         n.emit(OpKind::MulScalar, {{"self", x}, {"other", Scalar{1.0 / scale}}}));
    ETC_ASSIGN_OR_RETURN(int64_t zp, n.int_arg("zero_point"));
    zero_point = Scalar{zp};
  }
  ETC_ASSIGN_OR_RETURN(ValueId r, n.emit(OpKind::Round, {{"self", scaled}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, finish_quantize(n, r, zero_point, a));
  return n.set_output(0, out);
}

// dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, *,
// out_dtype=float32): (input.to(out_dtype) - zero_point) * scale.
Status convert_dequantize_per_tensor(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(QuantArgs a, quant_args(n));
  ETC_ASSIGN_OR_RETURN(DType out, out_dtype(n));
  ETC_ASSIGN_OR_RETURN(ValueId q, n.tensor("input"));
  ETC_RETURN_IF_ERROR(check_input_dtype(n, q, a.dtype));
  ETC_ASSIGN_OR_RETURN(ValueId d, n.emit(OpKind::ToCopy, {{"self", q}, {"dtype", out}}));
  if (n.is_tensor("scale")) {
    ETC_ASSIGN_OR_RETURN(ValueId z, scalar_tensor(n, "zero_point"));
    ETC_ASSIGN_OR_RETURN(z, n.emit(OpKind::ToCopy, {{"self", z}, {"dtype", out}}));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::SubTensor, {{"self", d}, {"other", z}}));
    ETC_ASSIGN_OR_RETURN(ValueId s, scalar_tensor(n, "scale"));
    ETC_ASSIGN_OR_RETURN(s, n.emit(OpKind::ToCopy, {{"self", s}, {"dtype", out}}));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::MulTensor, {{"self", d}, {"other", s}}));
  } else {
    ETC_ASSIGN_OR_RETURN(int64_t zp, n.int_arg("zero_point"));
    ETC_ASSIGN_OR_RETURN(double scale, n.float_arg("scale"));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::SubScalar, {{"self", d}, {"other", Scalar{zp}}}));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::MulScalar, {{"self", d}, {"other", Scalar{scale}}}));
  }
  return n.set_output(0, d);
}

// A per-channel parameter (scales, zero_points: [C]) viewed to broadcast along `axis` of a
// tensor of rank `rank`.
Result<ValueId> along_axis(TorchNode& n, ValueId v, int64_t axis, int64_t rank, int64_t channels,
                           const char* what) {
  if (n.spec(v).numel() != channels) {
    return n.invalid(std::string(what) + " has " + std::to_string(n.spec(v).numel()) +
                     " elements for the " + std::to_string(channels) + " channels of axis " +
                     std::to_string(axis));
  }
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = channels;
  return n.emit(OpKind::Reshape, {{"self", v}, {"shape", shape}});
}

struct ChannelArgs {
  int64_t axis = 0;
  int64_t channels = 0;
  int64_t rank = 0;
};

Result<ChannelArgs> channel_args(TorchNode& n, ValueId x) {
  ChannelArgs c;
  c.rank = static_cast<int64_t>(n.sizes(x).size());
  ETC_ASSIGN_OR_RETURN(int64_t axis, n.int_arg("axis"));
  ETC_ASSIGN_OR_RETURN(c.axis, n.wrap_dim(axis, c.rank, "axis"));
  c.channels = n.sizes(x)[static_cast<size_t>(c.axis)];
  return c;
}

// quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype):
// clamp(round(input * (1.0 / scales)) + zero_points, quant_min, quant_max).to(dtype), the
// parameters along axis.
Status convert_quantize_per_channel(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(QuantArgs a, quant_args(n));
  ETC_ASSIGN_OR_RETURN(ValueId x, float_input(n));
  ETC_ASSIGN_OR_RETURN(ChannelArgs c, channel_args(n, x));
  ETC_ASSIGN_OR_RETURN(ValueId s, n.tensor("scales"));
  ETC_ASSIGN_OR_RETURN(s, along_axis(n, s, c.axis, c.rank, c.channels, "scales"));
  ETC_ASSIGN_OR_RETURN(ValueId inv, n.emit(OpKind::Reciprocal, {{"self", s}}));
  ETC_ASSIGN_OR_RETURN(ValueId scaled, n.emit(OpKind::MulTensor, {{"self", x}, {"other", inv}}));
  ETC_ASSIGN_OR_RETURN(ValueId r, n.emit(OpKind::Round, {{"self", scaled}}));
  ETC_ASSIGN_OR_RETURN(ValueId z, n.tensor("zero_points"));
  ETC_ASSIGN_OR_RETURN(z, along_axis(n, z, c.axis, c.rank, c.channels, "zero_points"));
  ETC_ASSIGN_OR_RETURN(ValueId out, finish_quantize(n, r, z, a));
  return n.set_output(0, out);
}

// dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, *,
// out_dtype=float32): ((input - zero_points) * scales).to(out_dtype), the parameters along
// axis (no zero points: input * scales). PyTorch subtracts in int64; with float32 scales
// and 8- or 16-bit values the difference is exact in float32 too, so etc subtracts after a
// cast to float32 (the same bits, without an int64 copy of the weight at run time; the
// form the CPU kernels dequantize inside a matrix product). Else ATen's dtypes, literally.
Status convert_dequantize_per_channel(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(QuantArgs a, quant_args(n));
  ETC_ASSIGN_OR_RETURN(DType out, out_dtype(n));
  ETC_ASSIGN_OR_RETURN(ValueId q, n.tensor("input"));
  ETC_RETURN_IF_ERROR(check_input_dtype(n, q, a.dtype));
  ETC_ASSIGN_OR_RETURN(ChannelArgs c, channel_args(n, q));
  ETC_ASSIGN_OR_RETURN(ValueId s, n.tensor("scales"));
  ETC_ASSIGN_OR_RETURN(s, along_axis(n, s, c.axis, c.rank, c.channels, "scales"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> zero_points, n.optional_tensor("zero_points"));
  const bool in_float = n.dtype(s) == DType::kFloat32 && a.dtype != DType::kInt32;
  ValueId d = q;
  if (in_float) {
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::ToCopy, {{"self", d}, {"dtype", DType::kFloat32}}));
  }
  if (zero_points) {
    ETC_ASSIGN_OR_RETURN(ValueId z,
                         along_axis(n, *zero_points, c.axis, c.rank, c.channels, "zero_points"));
    if (in_float) {
      if (dtype_is_float(n.dtype(z))) return n.invalid("zero_points must be integers");
      ETC_ASSIGN_OR_RETURN(z, n.emit(OpKind::ToCopy, {{"self", z}, {"dtype", DType::kFloat32}}));
    }
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::SubTensor, {{"self", d}, {"other", z}}));
  }
  ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::MulTensor, {{"self", d}, {"other", s}}));
  if (n.dtype(d) != out) {
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::ToCopy, {{"self", d}, {"dtype", out}}));
  }
  return n.set_output(0, d);
}

// lo = min(amin(v, dims), 0) and hi = max(amax(v, dims), 0): the range a quantization
// must hold, zero included.
Result<std::pair<ValueId, ValueId>> range_with_zero(TorchNode& n, ValueId v,
                                                    const std::vector<int64_t>& dims,
                                                    bool keepdim) {
  ETC_ASSIGN_OR_RETURN(ValueId mn,
                       n.emit(OpKind::Amin, {{"self", v}, {"dim", dims}, {"keepdim", keepdim}}));
  ETC_ASSIGN_OR_RETURN(ValueId mx,
                       n.emit(OpKind::Amax, {{"self", v}, {"dim", dims}, {"keepdim", keepdim}}));
  const ValueId zero = n.constant(known_full(n.dtype(v), {}, 0.0));
  ETC_ASSIGN_OR_RETURN(ValueId lo, n.emit(OpKind::Minimum, {{"self", mn}, {"other", zero}}));
  ETC_ASSIGN_OR_RETURN(ValueId hi, n.emit(OpKind::Maximum, {{"self", mx}, {"other", zero}}));
  return std::pair{lo, hi};
}

// The asymmetric parameters of [lo, hi], as both references compute them: scale =
// (hi - lo) / (quant_max - quant_min) bounded below by eps (a number: clamp; a tensor:
// maximum with it, whose shape it then takes), zero point clamp(quant_min - round(lo /
// scale), quant_min, quant_max): in int32 when `int_zero` (PyTorch's determine_qparams casts
// the rounded value first), else in the scale's float dtype (torchao).
Result<std::pair<ValueId, ValueId>> asymmetric_qparams(TorchNode& n, ValueId lo, ValueId hi,
                                                       int64_t qmin, int64_t qmax,
                                                       const ArgValue& eps, bool int_zero) {
  ETC_ASSIGN_OR_RETURN(ValueId range, n.emit(OpKind::SubTensor, {{"self", hi}, {"other", lo}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId scale,
      n.emit(OpKind::DivScalar,
             {{"self", range}, {"other", Scalar{static_cast<double>(qmax - qmin)}}}));
  if (const auto* t = std::get_if<ValueId>(&eps)) {
    ETC_ASSIGN_OR_RETURN(scale, n.emit(OpKind::Maximum, {{"self", scale}, {"other", *t}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        scale, n.emit(OpKind::Clamp, {{"self", scale}, {"min", eps}, {"max", std::monostate{}}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId ratio, n.emit(OpKind::DivTensor, {{"self", lo}, {"other", scale}}));
  ETC_ASSIGN_OR_RETURN(ValueId zp, n.emit(OpKind::Round, {{"self", ratio}}));
  if (int_zero) {
    ETC_ASSIGN_OR_RETURN(zp, n.emit(OpKind::ToCopy, {{"self", zp}, {"dtype", DType::kInt32}}));
  }
  ETC_ASSIGN_OR_RETURN(zp, n.emit(OpKind::Neg, {{"self", zp}}));
  ETC_ASSIGN_OR_RETURN(zp, n.emit(OpKind::AddScalar, {{"self", zp}, {"other", Scalar{qmin}}}));
  ETC_ASSIGN_OR_RETURN(
      zp, n.emit(OpKind::Clamp, {{"self", zp}, {"min", Scalar{qmin}}, {"max", Scalar{qmax}}}));
  return std::pair{scale, zp};
}

// choose_qparams.tensor(input, quant_min, quant_max, eps, dtype) -> (scale, zero_point):
// dynamic quantization's parameters for the whole tensor, as PyTorch's reference
// (determine_qparams, per-tensor affine) computes them from aminmax(input): with
// lo = min(min, 0) and hi = max(max, 0), scale = max((hi - lo) / (quant_max - quant_min),
// eps) in float32, zero_point = clamp(quant_min - round(lo / scale), quant_min, quant_max);
// returned as float64 and int64 tensors of one element.
Status convert_choose_qparams(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(QuantArgs a, quant_args(n));
  ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps"));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  if (n.dtype(x) != DType::kFloat32) {
    return n.unsupported("an input of " + std::string(dtype_name(n.dtype(x))) +
                         " (etc chooses quantization parameters for float32 inputs)");
  }
  if (n.spec(x).numel() == 0) return n.unsupported("an empty input (no range to quantize)");
  std::vector<int64_t> all(n.sizes(x).size());
  for (size_t d = 0; d < all.size(); ++d)
    all[d] = static_cast<int64_t>(d);
  ETC_ASSIGN_OR_RETURN(auto range, range_with_zero(n, x, all, false));
  // eps as torch.Tensor([eps]): float32, one element (which gives the results their shape).
  const ValueId eps_t = n.constant(known_full(DType::kFloat32, {1}, eps));
  ETC_ASSIGN_OR_RETURN(auto qparams, asymmetric_qparams(n, range.first, range.second, a.quant_min,
                                                        a.quant_max, eps_t, true));
  auto [scale, zp] = qparams;
  ETC_ASSIGN_OR_RETURN(scale,
                       n.emit(OpKind::ToCopy, {{"self", scale}, {"dtype", DType::kFloat64}}));
  ETC_ASSIGN_OR_RETURN(zp, n.emit(OpKind::ToCopy, {{"self", zp}, {"dtype", DType::kInt64}}));
  ETC_RETURN_IF_ERROR(n.set_output(0, scale));
  return n.set_output(1, zp);
}

// ---- torchao's affine quantization (quant_primitives.py) ---------------------------------

// _get_reduction_params: the input viewed so that each block of block_size elements spans
// whole dims (a dim split into [size / block, block] where the block is neither 1 nor the
// dim), the dims a block reduces over, and the shape of one value per block (those dims 1).
struct Blocks {
  std::vector<int64_t> shape;      // shape_for_reduction
  std::vector<int64_t> reduced;    // reduction_dims
  std::vector<int64_t> per_block;  // shape_after_reduction
  int64_t count = 1;               // blocks
};

Result<Blocks> blocks_of(TorchNode& n, const std::vector<int64_t>& block,
                         const std::vector<int64_t>& sizes) {
  if (block.size() != sizes.size()) {
    return n.invalid("block_size has " + std::to_string(block.size()) +
                     " entries for an input of rank " + std::to_string(sizes.size()));
  }
  Blocks b;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (block[i] != sizes[i] && block[i] > 1) {
      if (sizes[i] % block[i] != 0) {
        return n.invalid("dim " + std::to_string(i) + " (" + std::to_string(sizes[i]) +
                         ") is not a multiple of its block size " + std::to_string(block[i]));
      }
      b.shape.insert(b.shape.end(), {sizes[i] / block[i], block[i]});
      b.reduced.push_back(static_cast<int64_t>(b.shape.size()) - 1);
      b.per_block.insert(b.per_block.end(), {sizes[i] / block[i], 1});
      b.count *= sizes[i] / block[i];
    } else {
      b.shape.push_back(sizes[i]);
      if (block[i] != 1) b.reduced.push_back(static_cast<int64_t>(b.shape.size()) - 1);
      b.per_block.push_back(block[i] == 1 ? sizes[i] : 1);
      b.count *= block[i] == 1 ? sizes[i] : 1;
    }
  }
  return b;
}

// A per-block parameter (scale, zero point) viewed to broadcast over the blocked input.
Result<ValueId> per_block_view(TorchNode& n, const Blocks& b, ValueId v, const char* what) {
  if (n.spec(v).numel() != b.count) {
    return n.invalid(std::string(what) + " has " + std::to_string(n.spec(v).numel()) +
                     " elements; block_size makes " + std::to_string(b.count) + " blocks");
  }
  return n.emit(OpKind::Reshape, {{"self", v}, {"shape", b.per_block}});
}

// quant_min / quant_max as given (numbers, or None for the dtype's bounds), checked.
Result<std::pair<int64_t, int64_t>> affine_bounds(TorchNode& n, DType d) {
  ETC_ASSIGN_OR_RETURN(auto bounds, dtype_bounds(n, d));
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> lo, n.optional_scalar("quant_min"));
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> hi, n.optional_scalar("quant_max"));
  if (lo) bounds.first = static_cast<int64_t>(lo->to_double());
  if (hi) bounds.second = static_cast<int64_t>(hi->to_double());
  ETC_RETURN_IF_ERROR(check_quantized(n, d, bounds.first, bounds.second));
  return bounds;
}

// torchao.dequantize_affine(input, block_size, scale, zero_point, input_dtype, quant_min,
// quant_max, output_dtype=float32), as torchao's reference computes it
// (quant_primitives._dequantize_affine_no_dtype_check): the input is viewed as blocks of
// block_size elements that share one scale and zero point, each element is
// (input.to(out) - zero_point.to(out)) * scale, and the result is viewed back and cast to
// out. quant_min and quant_max only describe the input's range (dequantizing never clamps).
Status convert_dequantize_affine(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> block, n.ints("block_size"));
  ETC_ASSIGN_OR_RETURN(ValueId scale, n.tensor("scale"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> zero_point, n.optional_tensor("zero_point"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> input_dtype, n.dtype_arg("input_dtype"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> output_dtype, n.dtype_arg("output_dtype"));
  const DType out = output_dtype.value_or(DType::kFloat32);
  if (!dtype_is_float(out)) {
    return n.unsupported("output dtype " + std::string(dtype_name(out)) +
                         " (torchao allows floats)");
  }
  if (input_dtype && *input_dtype != n.dtype(x)) {
    return n.invalid("input_dtype is " + std::string(dtype_name(*input_dtype)) + ", the input is " +
                     std::string(dtype_name(n.dtype(x))));
  }
  const std::vector<int64_t> sizes = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(Blocks b, blocks_of(n, block, sizes));
  ETC_ASSIGN_OR_RETURN(ValueId q, n.emit(OpKind::Reshape, {{"self", x}, {"shape", b.shape}}));
  ETC_ASSIGN_OR_RETURN(ValueId d, n.emit(OpKind::ToCopy, {{"self", q}, {"dtype", out}}));
  if (zero_point) {
    ETC_ASSIGN_OR_RETURN(ValueId z, per_block_view(n, b, *zero_point, "zero_point"));
    ETC_ASSIGN_OR_RETURN(z, n.emit(OpKind::ToCopy, {{"self", z}, {"dtype", out}}));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::SubTensor, {{"self", d}, {"other", z}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId s, per_block_view(n, b, scale, "scale"));
  ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::MulTensor, {{"self", d}, {"other", s}}));
  ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::Reshape, {{"self", d}, {"shape", sizes}}));
  if (n.dtype(d) != out) {
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::ToCopy, {{"self", d}, {"dtype", out}}));
  }
  return n.set_output(0, d);
}

// torchao.choose_qparams_affine(input, mapping_type, block_size, target_dtype, quant_min,
// quant_max, eps, scale_dtype, zero_point_dtype, keepdim=False) -> (scale, zero_point), as
// _choose_qparams_affine computes them per block from amin/amax of the blocked input, with
// lo = min(min, 0), hi = max(max, 0): ASYMMETRIC scale = clamp((hi - lo) / (quant_max -
// quant_min), eps), zero point clamp(quant_min - round(lo / scale)); SYMMETRIC scale =
// clamp(max(-lo, hi) / ((quant_max - quant_min) / 2), eps), zero point the range's middle.
// eps defaults to the input dtype's smallest normal; the results take scale_dtype (the
// input's) and zero_point_dtype (int32 when asymmetric).
Status convert_choose_qparams_affine(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::string mapping, n.string_arg("mapping_type", std::nullopt));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> block, n.ints("block_size"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> target, n.dtype_arg("target_dtype"));
  if (!target) return n.invalid("target_dtype is required");
  ETC_ASSIGN_OR_RETURN(auto bounds, affine_bounds(n, *target));
  const auto [qmin, qmax] = bounds;
  const DType in = n.dtype(x);
  if (!dtype_is_float(in) || in == DType::kFloat64) {
    return n.unsupported("an input of " + std::string(dtype_name(in)) +
                         " (torchao takes float32, float16 and bfloat16)");
  }
  if (mapping != "ASYMMETRIC" && mapping != "SYMMETRIC") {
    return n.unsupported("mapping_type " + mapping + " (etc takes ASYMMETRIC and SYMMETRIC)");
  }
  // eps: the input dtype's smallest normal unless given.
  double eps = in == DType::kFloat16 ? 6.103515625e-05 : 1.1754943508222875e-38;
  if (n.has("eps")) {
    ETC_ASSIGN_OR_RETURN(eps, n.float_arg("eps"));
  }
  ETC_ASSIGN_OR_RETURN(std::optional<DType> scale_dtype, n.dtype_arg("scale_dtype"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> zp_dtype, n.dtype_arg("zero_point_dtype"));
  bool keepdim = false;
  if (n.has("keepdim")) {
    ETC_ASSIGN_OR_RETURN(keepdim, n.bool_arg("keepdim", false));
  }
  ETC_ASSIGN_OR_RETURN(Blocks b, blocks_of(n, block, n.sizes(x)));
  ETC_ASSIGN_OR_RETURN(ValueId v, n.emit(OpKind::Reshape, {{"self", x}, {"shape", b.shape}}));
  ETC_ASSIGN_OR_RETURN(auto range, range_with_zero(n, v, b.reduced, keepdim));
  auto [lo, hi] = range;
  ValueId scale, zp;
  const Scalar eps_s{eps};
  if (mapping == "SYMMETRIC") {
    ETC_ASSIGN_OR_RETURN(ValueId neg, n.emit(OpKind::Neg, {{"self", lo}}));
    ETC_ASSIGN_OR_RETURN(hi, n.emit(OpKind::Maximum, {{"self", neg}, {"other", hi}}));
    ETC_ASSIGN_OR_RETURN(
        scale, n.emit(OpKind::DivScalar,
                      {{"self", hi}, {"other", Scalar{static_cast<double>(qmax - qmin) / 2}}}));
    // full_like(scale, int((quant_max + quant_min + 1) / 2)), before the clamp (its dtype).
    const auto middle = static_cast<int64_t>(static_cast<double>(qmax + qmin + 1) / 2);
    ETC_ASSIGN_OR_RETURN(
        zp, n.emit(OpKind::FullLike, {{"self", scale}, {"fill_value", Scalar{middle}}}));
    ETC_ASSIGN_OR_RETURN(
        scale, n.emit(OpKind::Clamp, {{"self", scale}, {"min", eps_s}, {"max", std::monostate{}}}));
  } else {
    ETC_ASSIGN_OR_RETURN(auto qparams, asymmetric_qparams(n, lo, hi, qmin, qmax, eps_s, false));
    scale = qparams.first;
    zp = qparams.second;
    if (!zp_dtype) zp_dtype = DType::kInt32;
  }
  const DType sd = scale_dtype.value_or(in);
  if (n.dtype(scale) != sd) {
    ETC_ASSIGN_OR_RETURN(scale, n.emit(OpKind::ToCopy, {{"self", scale}, {"dtype", sd}}));
  }
  if (zp_dtype && n.dtype(zp) != *zp_dtype) {
    ETC_ASSIGN_OR_RETURN(zp, n.emit(OpKind::ToCopy, {{"self", zp}, {"dtype", *zp_dtype}}));
  }
  ETC_RETURN_IF_ERROR(n.set_output(0, scale));
  return n.set_output(1, zp);
}

// torchao.quantize_affine(input, block_size, scale, zero_point, output_dtype, quant_min,
// quant_max), as _quantize_affine_no_dtype_cast: the blocked input times 1 / scale, rounded
// half to even, plus the zero point, clamped, viewed back and cast to output_dtype.
Status convert_quantize_affine(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> block, n.ints("block_size"));
  ETC_ASSIGN_OR_RETURN(ValueId scale, n.tensor("scale"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> zero_point, n.optional_tensor("zero_point"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> out, n.dtype_arg("output_dtype"));
  if (!out) return n.invalid("output_dtype is required");
  ETC_ASSIGN_OR_RETURN(auto bounds, affine_bounds(n, *out));
  const DType in = n.dtype(x);
  if (!dtype_is_float(in) || in == DType::kFloat64) {
    return n.invalid("the input is " + std::string(dtype_name(in)) +
                     "; torchao quantizes float32, float16 and bfloat16");
  }
  const std::vector<int64_t> sizes = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(Blocks b, blocks_of(n, block, sizes));
  ETC_ASSIGN_OR_RETURN(ValueId v, n.emit(OpKind::Reshape, {{"self", x}, {"shape", b.shape}}));
  ETC_ASSIGN_OR_RETURN(ValueId s, per_block_view(n, b, scale, "scale"));
  ETC_ASSIGN_OR_RETURN(ValueId inv, n.emit(OpKind::Reciprocal, {{"self", s}}));
  ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::MulTensor, {{"self", v}, {"other", inv}}));
  ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Round, {{"self", v}}));
  if (zero_point && n.spec(*zero_point).numel() > 0) {
    ETC_ASSIGN_OR_RETURN(ValueId z, per_block_view(n, b, *zero_point, "zero_point"));
    ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::AddTensor, {{"self", v}, {"other", z}}));
  }
  ETC_ASSIGN_OR_RETURN(
      v, n.emit(OpKind::Clamp,
                {{"self", v}, {"min", Scalar{bounds.first}}, {"max", Scalar{bounds.second}}}));
  ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Reshape, {{"self", v}, {"shape", sizes}}));
  ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", *out}}));
  return n.set_output(0, v);
}

}  // namespace

void add_quantized_converters(std::map<std::string, Converter>& table) {
  table["quantized_decomposed.quantize_per_tensor.default"] = convert_quantize_per_tensor;
  table["quantized_decomposed.quantize_per_tensor.tensor"] = convert_quantize_per_tensor;
  table["quantized_decomposed.dequantize_per_tensor.default"] = convert_dequantize_per_tensor;
  table["quantized_decomposed.dequantize_per_tensor.tensor"] = convert_dequantize_per_tensor;
  table["quantized_decomposed.quantize_per_channel.default"] = convert_quantize_per_channel;
  table["quantized_decomposed.dequantize_per_channel.default"] = convert_dequantize_per_channel;
  table["quantized_decomposed.choose_qparams.tensor"] = convert_choose_qparams;
  table["torchao.dequantize_affine.default"] = convert_dequantize_affine;
  table["torchao.quantize_affine.default"] = convert_quantize_affine;
  table["torchao.choose_qparams_affine.default"] = convert_choose_qparams_affine;
}

}  // namespace etc::torch_import
