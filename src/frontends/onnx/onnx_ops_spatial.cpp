// ONNX's spatial ops -> IR: Conv and ConvTranspose, MaxPool and AveragePool (with ONNX's
// auto_pad and asymmetric pads), the global pools, and Resize/Upsample.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"
#include "support/checked_math.h"

namespace etc::onnx_import {
namespace {

constexpr ArgValue kNone = std::monostate{};

// ---- Convolution and pooling --------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pad_begin, pad_end;
  std::string auto_pad = "NOTSET";  // SAME_* left for ConvTranspose to resolve
};

// Kernel, strides, dilations and pads (auto_pad resolved) of a conv or pool over the
// spatial dims `spatial` of the input.
Result<Window> window(NodeCtx& ctx, const std::vector<int64_t>& spatial,
                      std::vector<int64_t> kernel, bool transposed = false) {
  const size_t n = spatial.size();
  Window w;
  ETC_ASSIGN_OR_RETURN(w.kernel, ctx.attr_ints("kernel_shape", kernel));
  ETC_ASSIGN_OR_RETURN(w.strides, ctx.attr_ints("strides", std::vector<int64_t>(n, 1)));
  ETC_ASSIGN_OR_RETURN(w.dilations, ctx.attr_ints("dilations", std::vector<int64_t>(n, 1)));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> pads,
                       ctx.attr_ints("pads", std::vector<int64_t>(2 * n, 0)));
  ETC_ASSIGN_OR_RETURN(std::string auto_pad, ctx.attr_string("auto_pad", "NOTSET"));
  if (w.kernel.size() != n || w.strides.size() != n || w.dilations.size() != n ||
      pads.size() != 2 * n) {
    return ctx.invalid(
        "kernel_shape, strides, dilations and pads must have one entry per spatial "
        "dim (" +
        std::to_string(n) + ", pads twice that)");
  }
  for (size_t i = 0; i < n; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0 || pads[i] < 0 ||
        pads[n + i] < 0) {
      return ctx.invalid(
          "kernel_shape, strides and dilations must be positive and pads non-negative");
    }
  }
  w.pad_begin.assign(pads.begin(), pads.begin() + static_cast<int64_t>(n));
  w.pad_end.assign(pads.begin() + static_cast<int64_t>(n), pads.end());
  if (auto_pad == "NOTSET") return w;
  if (auto_pad == "VALID") {
    std::fill(w.pad_begin.begin(), w.pad_begin.end(), 0);
    std::fill(w.pad_end.begin(), w.pad_end.end(), 0);
    return w;
  }
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return ctx.invalid("auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" +
                       auto_pad + "'");
  }
  if (transposed) {
    // Resolved by the caller, which knows output_shape and output_padding.
    w.auto_pad = auto_pad;
    return w;
  }
  for (size_t i = 0; i < n; ++i) {
    // The output keeps ceil(in / stride) positions; the pads make up what its windows
    // reach beyond the input, (out - 1) * stride + (k - 1) * dilation + 1 - in.
    const int64_t out = spatial[i] / w.strides[i] + (spatial[i] % w.strides[i] != 0 ? 1 : 0);
    const std::optional<int64_t> reach = transposed_window_extent(
        out, w.kernel[i], 0, w.strides[i], w.dilations[i], /*output_padding=*/0);
    if (!reach) return ctx.invalid("the window's extent overflows a 64-bit size");
    const int64_t total = std::max<int64_t>(0, *reach - spatial[i]);
    int64_t small = total / 2, large = total - small;
    w.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : large;
    w.pad_end[i] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return w;
}

// Pads the spatial dims of `x` (NC + spatial) explicitly.
Result<ValueId> pad_spatial(NodeCtx& ctx, ValueId x, const Window& w, double value) {
  std::vector<int64_t> pad;
  for (size_t i = w.pad_begin.size(); i-- > 0;) {
    pad.push_back(w.pad_begin[i]);
    pad.push_back(w.pad_end[i]);
  }
  return ctx.emit(OpKind::ConstantPadNd, {{"self", x}, {"pad", pad}, {"value", Scalar{value}}});
}

bool symmetric(const Window& w) {
  return w.pad_begin == w.pad_end;
}

// A 1-d op runs as the 2-d op over [N, C, 1, L].
Result<ValueId> to_2d(NodeCtx& ctx, ValueId x, const std::vector<int64_t>& shape) {
  return reshape(ctx, x, {shape[0], shape[1], 1, shape[2]});
}
void window_to_2d(Window& w) {
  w.kernel.insert(w.kernel.begin(), 1);
  w.strides.insert(w.strides.begin(), 1);
  w.dilations.insert(w.dilations.begin(), 1);
  w.pad_begin.insert(w.pad_begin.begin(), 0);
  w.pad_end.insert(w.pad_end.begin(), 0);
}

// A 3-d convolution as 2-d ones, one per kernel depth kd, over the depth slices as a batch
// (`w`'s pads resolved; negative transposed pads extend the output). Conv: output depth od
// sums the 2-d convolutions of the (padded) input slice od * stride + kd * dilation by
// W[:, :, kd]. ConvTranspose: input slice id's 2-d transposed convolution by W[:, :, kd]
// adds into output depth id * stride + kd * dilation (index_put, accumulating), and the pads
// are cropped from the full output after. The bias is added last.
Result<ValueId> convolve_3d(NodeCtx& ctx, ValueId x, ValueId wt, std::optional<ValueId> bias,
                            bool transposed, const Window& w, const std::vector<int64_t>& out_pad,
                            int64_t group) {
  const std::vector<int64_t> xs = ctx.sizes_of(x), ws = ctx.sizes_of(wt);
  const int64_t n = xs[0], depth = xs[2], kd_count = ws[2];
  const int64_t stride = w.strides[0], dil = w.dilations[0];
  const std::vector<int64_t> stride2{w.strides[1], w.strides[2]},
      dil2{w.dilations[1], w.dilations[2]};
  if (!transposed) {
    ETC_ASSIGN_OR_RETURN(x, pad_spatial(ctx, x, w, 0.0));
  }
  const std::vector<int64_t> ps = ctx.sizes_of(x);  // [N, C, D, H, W], padded for Conv
  ETC_ASSIGN_OR_RETURN(ValueId slices, permute(ctx, x, {2, 0, 1, 3, 4}));  // [D, N, C, H, W]
  const int64_t out_depth = transposed
                                ? (depth - 1) * stride + (kd_count - 1) * dil + 1 + out_pad[0]
                                : (ps[2] - (kd_count - 1) * dil - 1) / stride + 1;
  const int64_t steps = transposed ? depth : out_depth;
  if (steps <= 0) return ctx.invalid("the convolution's output would be empty");
  std::optional<ValueId> acc;
  for (int64_t kd = 0; kd < kd_count; ++kd) {
    ETC_ASSIGN_OR_RETURN(ValueId wk, ctx.emit(OpKind::SelectInt,
                                              {{"self", wt}, {"dim", int64_t{2}}, {"index", kd}}));
    ValueId in = slices;
    if (!transposed) {
      // The input slices output depth od reads at this kd.
      std::vector<int64_t> at(static_cast<size_t>(out_depth));
      for (int64_t od = 0; od < out_depth; ++od)
        at[static_cast<size_t>(od)] = od * stride + kd * dil;
      ValueId idx = ctx.add_constant(host_from_ints(DType::kInt64, {out_depth}, at));
      ETC_ASSIGN_OR_RETURN(in,
                           ctx.emit(OpKind::IndexTensor,
                                    {{"self", slices}, {"indices", std::vector<ValueId>{idx}}}));
    }
    ETC_ASSIGN_OR_RETURN(in, reshape(ctx, in, {steps * n, ps[1], ps[3], ps[4]}));
    ETC_ASSIGN_OR_RETURN(ValueId y,
                         ctx.emit(OpKind::Convolution,
                                  {{"input", in},
                                   {"weight", wk},
                                   {"bias", kNone},
                                   {"stride", stride2},
                                   {"padding", std::vector<int64_t>{0, 0}},
                                   {"dilation", dil2},
                                   {"transposed", transposed},
                                   {"output_padding", std::vector<int64_t>{out_pad[1], out_pad[2]}},
                                   {"groups", group}}));
    const std::vector<int64_t> ys = ctx.sizes_of(y);
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {steps, n, ys[1], ys[2], ys[3]}));
    if (!transposed) {
      if (acc) {
        ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddTensor, {{"self", *acc}, {"other", y}}));
      }
      acc = y;
      continue;
    }
    if (!acc) {
      ETC_ASSIGN_OR_RETURN(
          acc, ctx.emit(OpKind::Zeros,
                        {{"size", std::vector<int64_t>{out_depth, n, ys[1], ys[2], ys[3]}},
                         {"dtype", ctx.dtype(0)}}));
    }
    std::vector<int64_t> at(static_cast<size_t>(depth));
    for (int64_t id = 0; id < depth; ++id)
      at[static_cast<size_t>(id)] = id * stride + kd * dil;
    ValueId idx = ctx.add_constant(host_from_ints(DType::kInt64, {depth}, at));
    ETC_ASSIGN_OR_RETURN(acc, ctx.emit(OpKind::IndexPut, {{"self", *acc},
                                                          {"indices", std::vector<ValueId>{idx}},
                                                          {"values", y},
                                                          {"accumulate", true}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, permute(ctx, *acc, {1, 2, 0, 3, 4}));  // [N, C, D, H, W]
  if (transposed) {
    // Crop the pads (negative ones add zeros).
    std::vector<int64_t> pad;
    for (size_t i = w.pad_begin.size(); i-- > 0;)
      pad.insert(pad.end(), {-w.pad_begin[i], -w.pad_end[i]});
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::ConstantPadNd, {{"self", y}, {"pad", pad}, {"value", Scalar{0.0}}}));
  }
  if (bias) {
    ETC_ASSIGN_OR_RETURN(ValueId b, reshape(ctx, *bias, {1, ctx.sizes_of(y)[1], 1, 1, 1}));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddTensor, {{"self", y}, {"other", b}}));
  }
  return y;
}

}  // namespace

Status convert_conv(NodeCtx& ctx, bool transposed) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer convolution");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId wt, ctx.input(1));
  std::optional<ValueId> bias;
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(bias, ctx.input(2));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, convolve(ctx, x, wt, bias, transposed));
  return ctx.set_output(0, y);
}

Result<ValueId> convolve(NodeCtx& ctx, ValueId x, ValueId wt, std::optional<ValueId> bias_value,
                         bool transposed) {
  const std::vector<int64_t> xs = ctx.sizes_of(x), ws = ctx.sizes_of(wt);
  if (xs.size() != 3 && xs.size() != 4 && xs.size() != 5) {
    return ctx.unsupported("input of rank " + std::to_string(xs.size()) +
                           " (1-d, 2-d and 3-d convolutions only)");
  }
  if (ws.size() != xs.size()) return ctx.invalid("W must have the rank of X");
  const std::vector<int64_t> spatial(xs.begin() + 2, xs.end());
  ETC_ASSIGN_OR_RETURN(
      Window w, window(ctx, spatial, std::vector<int64_t>(ws.begin() + 2, ws.end()), transposed));
  if (w.kernel != std::vector<int64_t>(ws.begin() + 2, ws.end())) {
    return ctx.invalid("kernel_shape " + shape_to_string(w.kernel) + " does not match W " +
                       shape_to_string(ws));
  }
  ETC_ASSIGN_OR_RETURN(int64_t group, ctx.attr_int("group", 1));
  std::vector<int64_t> out_pad(spatial.size(), 0);
  if (transposed) {
    ETC_ASSIGN_OR_RETURN(out_pad, ctx.attr_ints("output_padding", out_pad));
    if (out_pad.size() != spatial.size())
      return ctx.invalid("output_padding needs one entry per spatial dim");
    std::optional<std::vector<int64_t>> target;
    if (ctx.attr("output_shape")) {
      ETC_ASSIGN_OR_RETURN(target, ctx.attr_ints("output_shape", std::nullopt));
      if (target->size() == spatial.size() + 2) target->erase(target->begin(), target->begin() + 2);
      if (target->size() != spatial.size())
        return ctx.invalid("output_shape needs one entry per spatial dim");
    } else if (w.auto_pad != "NOTSET") {
      target = spatial;
      for (size_t i = 0; i < spatial.size(); ++i) {
        const std::optional<int64_t> scaled = checked_mul(spatial[i], w.strides[i]);
        if (!scaled) return ctx.invalid("the transposed output size overflows a 64-bit size");
        (*target)[i] = *scaled;
      }
    }
    if (target) {
      for (size_t i = 0; i < spatial.size(); ++i) {
        const std::optional<int64_t> full = transposed_window_extent(
            spatial[i], w.kernel[i], 0, w.strides[i], w.dilations[i], out_pad[i]);
        const std::optional<int64_t> difference =
            full ? checked_sub(*full, (*target)[i]) : std::nullopt;
        if (!difference)
          return ctx.invalid("the transposed window's extent overflows a 64-bit size");
        const int64_t total = *difference;
        // ONNX's rule: SAME_UPPER puts the larger half at the end, otherwise at the start
        // (halves rounded down, so a negative total, an output_shape larger than the full
        // output, extends it with zeros (plus the bias) at the end, or with SAME_UPPER at
        // the start).
        const int64_t small = total / 2 - (total < 0 && total % 2 != 0 ? 1 : 0);  // floor
        const int64_t large = total - small;
        w.pad_begin[i] = w.auto_pad == "SAME_UPPER" ? small : large;
        w.pad_end[i] = w.auto_pad == "SAME_UPPER" ? large : small;
      }
    }
  }
  if (xs.size() == 5) return convolve_3d(ctx, x, wt, bias_value, transposed, w, out_pad, group);
  ArgValue bias = kNone;
  bool extended = false;  // negative pads: the bias is added after the zeros are
  for (size_t i = 0; i < w.pad_begin.size(); ++i)
    extended = extended || w.pad_begin[i] < 0 || w.pad_end[i] < 0;
  if (bias_value && !extended) bias = *bias_value;
  const bool one_d = xs.size() == 3;
  if (one_d) {
    ETC_ASSIGN_OR_RETURN(x, to_2d(ctx, x, xs));
    ETC_ASSIGN_OR_RETURN(wt, reshape(ctx, wt, {ws[0], ws[1], 1, ws[2]}));
    window_to_2d(w);
    out_pad.insert(out_pad.begin(), 0);
  }
  std::vector<int64_t> padding = w.pad_begin;
  const bool asym = !symmetric(w) || extended;
  if (asym) {
    std::fill(padding.begin(), padding.end(), 0);
    if (!transposed) {
      ETC_ASSIGN_OR_RETURN(x, pad_spatial(ctx, x, w, 0.0));
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Convolution, {{"input", x},
                                                                 {"weight", wt},
                                                                 {"bias", bias},
                                                                 {"stride", w.strides},
                                                                 {"padding", padding},
                                                                 {"dilation", w.dilations},
                                                                 {"transposed", transposed},
                                                                 {"output_padding", out_pad},
                                                                 {"groups", group}}));
  if (extended) {
    // Crop the positive pads and add zeros for the negative ones, then add the bias.
    std::vector<int64_t> pad;
    for (size_t i = w.pad_begin.size(); i-- > 0;)
      pad.insert(pad.end(), {-w.pad_begin[i], -w.pad_end[i]});
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::ConstantPadNd, {{"self", y}, {"pad", pad}, {"value", Scalar{0.0}}}));
    if (bias_value) {
      ValueId b = *bias_value;
      std::vector<int64_t> view(ctx.sizes_of(y).size(), 1);
      view[1] = ctx.sizes_of(y)[1];
      ETC_ASSIGN_OR_RETURN(b, reshape(ctx, b, view));
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddTensor, {{"self", y}, {"other", b}}));
    }
  } else if (asym && transposed) {
    // Crop the (asymmetric) padding from the full transposed output.
    for (size_t i = 0; i < w.pad_begin.size(); ++i) {
      if (w.pad_begin[i] == 0 && w.pad_end[i] == 0) continue;
      const int64_t dim = static_cast<int64_t>(i) + 2;
      const int64_t size = ctx.sizes_of(y)[static_cast<size_t>(dim)];
      if (w.pad_begin[i] + w.pad_end[i] >= size) return ctx.invalid("pads remove the whole output");
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::SliceTensor, {{"self", y},
                                                             {"dim", dim},
                                                             {"start", w.pad_begin[i]},
                                                             {"end", size - w.pad_end[i]},
                                                             {"step", int64_t{1}}}));
    }
  }
  if (one_d) {
    std::vector<int64_t> s = ctx.sizes_of(y);
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {s[0], s[1], s[3]}));
  }
  return y;
}

namespace {

// The lowest value of `dtype`: what max pooling pads with.
double lowest_of(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return 0;
    case DType::kInt8:
      return std::numeric_limits<int8_t>::lowest();
    case DType::kInt16:
      return std::numeric_limits<int16_t>::lowest();
    case DType::kInt32:
      return std::numeric_limits<int32_t>::lowest();
    case DType::kInt64:
      return static_cast<double>(std::numeric_limits<int64_t>::lowest());
    default:
      return -std::numeric_limits<double>::infinity();
  }
}

// Max (is_max) or average pooling of the [N, C, H, W] tensor `x` over the 2-d window `w`.
// ATen pads at most half the kernel on each side, symmetrically; anything else is an
// explicit pad (the lowest value for max pooling, or zeros counted in the average).
Result<ValueId> pool_2d(NodeCtx& ctx, ValueId x, const Window& w, bool is_max, bool ceil_mode,
                        bool count_include_pad) {
  bool direct = symmetric(w);
  for (size_t i = 0; i < w.kernel.size(); ++i)
    direct = direct && w.pad_begin[i] * 2 <= w.kernel[i];
  std::vector<int64_t> padding = w.pad_begin;
  const DType dtype = ctx.dtype(0);  // x is input 0, maybe reshaped
  // Average pooling that counts only the input: the padded sum over the padded count,
  // both as averages of the same windows (a constant of ones in place of the input).
  std::optional<ValueId> count;
  if (!direct) {
    if (!is_max && !count_include_pad) {
      std::vector<int64_t> plane = ctx.sizes_of(x);
      plane[0] = plane[1] = 1;
      int64_t n = 1;
      for (int64_t d : plane)
        n *= d;
      ValueId ones = ctx.add_constant(
          host_from_doubles(dtype, plane, std::vector<double>(static_cast<size_t>(n), 1.0)));
      ETC_ASSIGN_OR_RETURN(ValueId padded, pad_spatial(ctx, ones, w, 0.0));
      ETC_ASSIGN_OR_RETURN(count,
                           ctx.emit(OpKind::AvgPool2d, {{"self", padded},
                                                        {"kernel_size", w.kernel},
                                                        {"stride", w.strides},
                                                        {"padding", std::vector<int64_t>{0, 0}},
                                                        {"ceil_mode", ceil_mode},
                                                        {"count_include_pad", true}}));
      count_include_pad = true;
    }
    ETC_ASSIGN_OR_RETURN(x, pad_spatial(ctx, x, w, is_max ? lowest_of(dtype) : 0.0));
    std::fill(padding.begin(), padding.end(), 0);
  }
  if (is_max) {
    return ctx.emit(OpKind::MaxPool2d, {{"self", x},
                                        {"kernel_size", w.kernel},
                                        {"stride", w.strides},
                                        {"padding", padding},
                                        {"dilation", w.dilations},
                                        {"ceil_mode", ceil_mode}});
  }
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::AvgPool2d, {{"self", x},
                                                    {"kernel_size", w.kernel},
                                                    {"stride", w.strides},
                                                    {"padding", padding},
                                                    {"ceil_mode", ceil_mode},
                                                    {"count_include_pad", count_include_pad}}));
  if (count) return ctx.emit(OpKind::DivTensor, {{"self", y}, {"other", *count}});
  return y;
}

constexpr size_t kTrivialDim = ~size_t{0};

// A 2-d window of dims `d0` and `d1` of `w` (kTrivialDim: a dim of size 1, no stride).
Window window_of_dims(const Window& w, size_t d0, size_t d1) {
  Window s;
  for (size_t d : {d0, d1}) {
    const bool t = d == kTrivialDim;
    s.kernel.push_back(t ? 1 : w.kernel[d]);
    s.strides.push_back(t ? 1 : w.strides[d]);
    s.dilations.push_back(t ? 1 : w.dilations[d]);
    s.pad_begin.push_back(t ? 0 : w.pad_begin[d]);
    s.pad_end.push_back(t ? 0 : w.pad_end[d]);
  }
  return s;
}

}  // namespace

Status convert_pool(NodeCtx& ctx, bool is_max) {
  const std::vector<int64_t> xs = ctx.shape(0);
  const DType dtype = ctx.dtype(0);
  if (dtype == DType::kBool || (!is_max && !dtype_is_float(dtype)))
    return ctx.unsupported(std::string(dtype_name(dtype)) + " inputs");
  if (xs.size() < 3 || xs.size() > 5) {
    return ctx.unsupported("input of rank " + std::to_string(xs.size()) +
                           " (1-d, 2-d and 3-d pooling only)");
  }
  const bool indices = is_max && ctx.has_output(1);
  ETC_ASSIGN_OR_RETURN(int64_t storage_order, ctx.attr_int("storage_order", 0));
  if (storage_order != 0 && storage_order != 1) return ctx.invalid("storage_order must be 0 or 1");
  const std::vector<int64_t> spatial(xs.begin() + 2, xs.end());
  ETC_ASSIGN_OR_RETURN(Window w, window(ctx, spatial, {}));
  ETC_ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.attr_int("ceil_mode", 0));
  ETC_ASSIGN_OR_RETURN(int64_t count_include_pad, ctx.attr_int("count_include_pad", 0));
  if (!is_max && ctx.attr("dilations")) {
    for (int64_t d : w.dilations) {
      if (d != 1) return ctx.unsupported("dilated average pooling");
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  if (xs.size() == 5) {
    // A box window is separable: pool each [H, W] plane, then along D over [D, H' * W'].
    // Counts separate too (the window's in-bounds part is a product of intervals), so
    // this is exact for every pad and count_include_pad.
    if (indices) return ctx.unsupported("Indices of 3-d max pooling");
    ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, {xs[0], xs[1] * xs[2], xs[3], xs[4]}));
    ETC_ASSIGN_OR_RETURN(ValueId hw, pool_2d(ctx, x, window_of_dims(w, 1, 2), is_max,
                                             ceil_mode != 0, count_include_pad != 0));
    const std::vector<int64_t> s = ctx.sizes_of(hw);
    ETC_ASSIGN_OR_RETURN(hw, reshape(ctx, hw, {xs[0], xs[1], xs[2], s[2] * s[3]}));
    ETC_ASSIGN_OR_RETURN(ValueId y, pool_2d(ctx, hw, window_of_dims(w, 0, kTrivialDim), is_max,
                                            ceil_mode != 0, count_include_pad != 0));
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {xs[0], xs[1], ctx.sizes_of(y)[2], s[2], s[3]}));
    return ctx.set_output(0, y);
  }
  const bool one_d = xs.size() == 3;
  if (one_d) {
    ETC_ASSIGN_OR_RETURN(x, to_2d(ctx, x, xs));
    window_to_2d(w);
  }
  ValueId y;
  if (indices) {
    bool direct = symmetric(w);
    for (size_t i = 0; i < w.kernel.size(); ++i)
      direct = direct && w.pad_begin[i] * 2 <= w.kernel[i];
    if (!direct) return ctx.unsupported("Indices with asymmetric or large pads");
    // ATen's indices count within each [H, W] plane; ONNX's over the whole tensor.
    ETC_ASSIGN_OR_RETURN(y,
                         ctx.emit(OpKind::MaxPool2dWithIndices, {{"self", x},
                                                                 {"kernel_size", w.kernel},
                                                                 {"stride", w.strides},
                                                                 {"padding", w.pad_begin},
                                                                 {"dilation", w.dilations},
                                                                 {"ceil_mode", ceil_mode != 0}}));
    ValueId idx = ctx.last_outputs()[1];
    const std::vector<int64_t> s4 = ctx.sizes_of(x);
    if (storage_order == 1) {
      // Column-major within the plane: h * W + w -> w * H + h.
      ETC_ASSIGN_OR_RETURN(
          ValueId h, ctx.emit(OpKind::DivScalarMode, {{"self", idx},
                                                      {"other", Scalar{s4[3]}},
                                                      {"rounding_mode", std::string("floor")}}));
      ETC_ASSIGN_OR_RETURN(ValueId wpos, ctx.emit(OpKind::RemainderScalar,
                                                  {{"self", idx}, {"other", Scalar{s4[3]}}}));
      ETC_ASSIGN_OR_RETURN(wpos,
                           ctx.emit(OpKind::MulScalar, {{"self", wpos}, {"other", Scalar{s4[2]}}}));
      ETC_ASSIGN_OR_RETURN(idx, ctx.emit(OpKind::AddTensor, {{"self", wpos}, {"other", h}}));
    }
    std::vector<int64_t> offsets(static_cast<size_t>(s4[0] * s4[1]));
    for (size_t i = 0; i < offsets.size(); ++i)
      offsets[i] = static_cast<int64_t>(i) * s4[2] * s4[3];
    ValueId base = ctx.add_constant(host_from_ints(DType::kInt64, {s4[0], s4[1], 1, 1}, offsets));
    ETC_ASSIGN_OR_RETURN(idx, ctx.emit(OpKind::AddTensor, {{"self", idx}, {"other", base}}));
    if (one_d) {
      std::vector<int64_t> s = ctx.sizes_of(idx);
      ETC_ASSIGN_OR_RETURN(idx, reshape(ctx, idx, {s[0], s[1], s[3]}));
    }
    ETC_RETURN_IF_ERROR(ctx.set_output(1, idx));
  } else {
    ETC_ASSIGN_OR_RETURN(y, pool_2d(ctx, x, w, is_max, ceil_mode != 0, count_include_pad != 0));
  }
  if (one_d) {
    std::vector<int64_t> s = ctx.sizes_of(y);
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {s[0], s[1], s[3]}));
  }
  return ctx.set_output(0, y);
}

// MaxUnpool(X, I, output_shape?; kernel_shape, pads, strides): zeros of the output shape
// with X's values put at I (indices over the whole output tensor, as MaxPool gives them):
// index_put on the flattened output.
Status convert_max_unpool(NodeCtx& ctx) {
  const std::vector<int64_t> xs = ctx.shape(0);
  if (xs.size() < 3) return ctx.invalid("X must have rank 3 or more (N, C, spatial...)");
  if (ctx.shape(1) != xs) return ctx.invalid("I must have X's shape");
  if (ctx.dtype(1) != DType::kInt64) return ctx.invalid("I must be int64");
  const std::vector<int64_t> spatial(xs.begin() + 2, xs.end());
  ETC_ASSIGN_OR_RETURN(Window w, window(ctx, spatial, {}));
  // The indices count over the shape the pooling came from; a larger output_shape
  // extends each spatial dim at its end (ONNX's reference places the values the same).
  std::vector<int64_t> out = xs, full = xs;
  for (size_t i = 0; i < spatial.size(); ++i) {
    out[i + 2] = (spatial[i] - 1) * w.strides[i] + w.kernel[i] - w.pad_begin[i] - w.pad_end[i];
    if (out[i + 2] <= 0)
      return ctx.invalid("the unpooled shape " + shape_to_string(out) + " is empty");
  }
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(2, "output_shape"));
    full = t->ints();
    if (full.size() != xs.size() || full[0] != xs[0] || full[1] != xs[1]) {
      return ctx.invalid("output_shape " + shape_to_string(full) + " does not fit X " +
                         shape_to_string(xs));
    }
    for (size_t d = 2; d < full.size(); ++d) {
      if (full[d] < out[d]) {
        return ctx.unsupported("output_shape " + shape_to_string(full) +
                               " smaller than the unpooled shape " + shape_to_string(out));
      }
    }
  } else {
    full = out;
  }
  int64_t n = 1, m = 1;
  for (int64_t d : out)
    n *= d;
  for (int64_t d : xs)
    m *= d;
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, {m}));
  ETC_ASSIGN_OR_RETURN(idx, reshape(ctx, idx, {m}));
  ETC_ASSIGN_OR_RETURN(ValueId zeros, ctx.emit(OpKind::Zeros, {{"size", std::vector<int64_t>{n}},
                                                               {"dtype", ctx.dtype(0)}}));
  std::vector<ValueId> indices{idx};
  ETC_ASSIGN_OR_RETURN(
      ValueId y,
      ctx.emit(OpKind::IndexPut,
               {{"self", zeros}, {"indices", indices}, {"values", x}, {"accumulate", false}}));
  ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, out));
  if (full != out) {
    std::vector<int64_t> pad;
    for (size_t d = full.size(); d-- > 2;)
      pad.insert(pad.end(), {0, full[d] - out[d]});
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::ConstantPadNd, {{"self", y}, {"pad", pad}, {"value", Scalar{0.0}}}));
  }
  return ctx.set_output(0, y);
}

Converter global_pool(bool is_max) {
  return [is_max](NodeCtx& ctx) -> Status {
    if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
    if (ctx.rank(0) < 3) return ctx.invalid("X must have rank 3 or more (N, C, spatial...)");
    std::vector<int64_t> dims;
    for (int64_t d = 2; d < ctx.rank(0); ++d)
      dims.push_back(d);
    ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
    ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(is_max ? OpKind::Amax : OpKind::MeanDim,
                                             {{"self", x}, {"dim", dims}, {"keepdim", true}}));
    return ctx.set_output(0, y);
  };
}

namespace {

// ONNX's resize coefficients for one output position of one axis.
struct ResizeSpec {
  std::string mode, ctm, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// Where output position `o` of an axis resized from `in` to `out` (scale `scale`) samples
// the input, per coordinate_transformation_mode (roi: tf_crop_and_resize's [start, end]).
double source_coordinate(const ResizeSpec& r, int64_t o, int64_t in, int64_t out, double scale,
                         double roi_start, double roi_end) {
  const double x = static_cast<double>(o);
  // ONNX's reference divides by the unrounded output length in * scale.
  const double out_len = scale * static_cast<double>(in);
  if (r.ctm == "align_corners") return out_len == 1 ? 0 : x * (in - 1) / (out_len - 1);
  if (r.ctm == "asymmetric") return x / scale;
  if (r.ctm == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (r.ctm == "pytorch_half_pixel") return out_len == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (r.ctm == "tf_crop_and_resize") {
    const double span = (roi_end - roi_start) * (in - 1);
    return roi_start * (in - 1) + (out == 1 ? span / 2 : x * span / (out - 1));
  }
  return (x + 0.5) / scale - 0.5;  // half_pixel
}

// The taps (input positions, unclamped) and weights of the interpolation at source
// coordinate x: the reference's nearest neighbours of x, with ratio 1 at whole numbers.
void resize_taps(const ResizeSpec& r, double x, std::vector<int64_t>* taps,
                 std::vector<double>* weights) {
  auto f = static_cast<int64_t>(std::floor(x));
  double t = x - static_cast<double>(f);
  if (t == 0) {
    f -= 1;
    t = 1;
  }
  taps->clear();
  weights->clear();
  if (r.mode == "nearest") {
    bool up = t == 1;
    if (t != 1) {
      if (r.nearest == "round_prefer_ceil") {
        up = t >= 0.5;
      } else if (r.nearest == "floor") {
        up = false;
      } else if (r.nearest == "ceil") {
        up = true;
      } else {
        up = t > 0.5;  // round_prefer_floor
      }
    }
    taps->push_back(up ? f + 1 : f);
    weights->push_back(1);
  } else if (r.mode == "linear") {
    *taps = {f, f + 1};
    *weights = {1 - t, t};
  } else {  // cubic
    const double a = r.cubic_a, s = 1 - t;
    *taps = {f - 1, f, f + 1, f + 2};
    *weights = {((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a,
                ((a + 2) * t - (a + 3)) * t * t + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
  }
}

// Resizes axis `d` of `x` (shape `shape`, updated) to `out`: nearest by index.Tensor with a
// constant index, linear and cubic as a product with a constant [in, out] interpolation
// matrix along the axis; positions outside tf_crop_and_resize's roi take the
// extrapolation value.
Result<ValueId> resize_axis(NodeCtx& ctx, const ResizeSpec& r, ValueId x,
                            std::vector<int64_t>& shape, int64_t d, int64_t out, double scale,
                            double roi_start, double roi_end) {
  const auto rank = static_cast<int64_t>(shape.size());
  const int64_t in = shape[static_cast<size_t>(d)];
  const DType dt = ctx.dtype(0);
  std::vector<double> matrix(static_cast<size_t>(in * out), 0.0);  // [in, out]
  std::vector<int64_t> nearest(static_cast<size_t>(out), 0), outside(static_cast<size_t>(out), 0);
  bool any_outside = false;
  std::vector<int64_t> taps;
  std::vector<double> weights;
  for (int64_t o = 0; o < out; ++o) {
    const double src = source_coordinate(r, o, in, out, scale, roi_start, roi_end);
    if (r.ctm == "tf_crop_and_resize" && (src < 0 || src > static_cast<double>(in - 1))) {
      outside[static_cast<size_t>(o)] = 1;
      any_outside = true;
      continue;
    }
    resize_taps(r, src, &taps, &weights);
    if (r.exclude_outside) {
      double sum = 0;
      for (size_t j = 0; j < taps.size(); ++j) {
        if (taps[j] < 0 || taps[j] >= in) weights[j] = 0;
        sum += weights[j];
      }
      for (double& w : weights)
        w /= sum;
    }
    for (size_t j = 0; j < taps.size(); ++j) {
      const int64_t i = std::clamp<int64_t>(taps[j], 0, in - 1);
      matrix[static_cast<size_t>(i * out + o)] += weights[j];
      nearest[static_cast<size_t>(o)] = i;
    }
  }
  ValueId y;
  if (r.mode == "nearest") {
    std::vector<ValueId> indices(static_cast<size_t>(d));
    indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {out}, nearest)));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  } else {
    std::vector<int64_t> perm, moved;
    for (int64_t k = 0; k < rank; ++k) {
      if (k != d) perm.push_back(k);
    }
    perm.push_back(d);
    int64_t rows = 1;
    for (int64_t k : perm) {
      if (k != d) rows *= shape[static_cast<size_t>(k)];
      moved.push_back(k == d ? out : shape[static_cast<size_t>(k)]);
    }
    ValueId v = x;
    if (d != rank - 1) {
      ETC_ASSIGN_OR_RETURN(v, permute(ctx, v, perm));
    }
    ETC_ASSIGN_OR_RETURN(v, reshape(ctx, v, {rows, in}));
    ValueId w = ctx.add_constant(host_from_doubles(dt, {in, out}, matrix));
    ETC_ASSIGN_OR_RETURN(v, ctx.emit(OpKind::Mm, {{"self", v}, {"mat2", w}}));
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, v, moved));
    if (d != rank - 1) {
      std::vector<int64_t> back(static_cast<size_t>(rank));
      for (int64_t k = 0; k < rank; ++k)
        back[static_cast<size_t>(perm[static_cast<size_t>(k)])] = k;
      ETC_ASSIGN_OR_RETURN(y, permute(ctx, y, back));
    }
  }
  if (any_outside) {
    std::vector<int64_t> mshape(static_cast<size_t>(rank), 1);
    mshape[static_cast<size_t>(d)] = out;
    ValueId mask = ctx.add_constant(host_from_ints(DType::kBool, mshape, outside));
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::WhereSelf, {{"condition", mask},
                                        {"self", scalar_constant(ctx, dt, r.extrapolation)},
                                        {"other", y}}));
  }
  shape[static_cast<size_t>(d)] = out;
  return y;
}

}  // namespace

// Resize (opset 10+) and Upsample (opset 7-9). PyTorch's cases of NCHW inputs become
// upsample_nearest2d / upsample_bilinear2d; every other mode, coordinate transformation
// and rank is resized one axis at a time with constant indices or interpolation matrices.
Status convert_resize(NodeCtx& ctx) {
  const bool upsample = ctx.op_type() == "Upsample";
  const int64_t rank = ctx.rank(0);
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ResizeSpec spec;
  ETC_ASSIGN_OR_RETURN(spec.mode, ctx.attr_string("mode", "nearest"));
  if (spec.mode == "bilinear") spec.mode = "linear";  // Upsample-7's name
  spec.ctm = "asymmetric";
  spec.nearest = "floor";
  if (!upsample && ctx.opset() >= 11) {
    ETC_ASSIGN_OR_RETURN(spec.ctm, ctx.attr_string("coordinate_transformation_mode", "half_pixel"));
    ETC_ASSIGN_OR_RETURN(spec.nearest, ctx.attr_string("nearest_mode", "round_prefer_floor"));
    ETC_ASSIGN_OR_RETURN(int64_t exclude, ctx.attr_int("exclude_outside", 0));
    spec.exclude_outside = exclude != 0;
    ETC_ASSIGN_OR_RETURN(float a, ctx.attr_float("cubic_coeff_a", -0.75f));
    spec.cubic_a = a;
    ETC_ASSIGN_OR_RETURN(float e, ctx.attr_float("extrapolation_value", 0.0f));
    spec.extrapolation = e;
  }
  if (spec.mode != "nearest" && spec.mode != "linear" && spec.mode != "cubic")
    return ctx.unsupported("mode '" + spec.mode + "' (nearest, linear and cubic only)");
  static const char* kTransforms[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kTransforms), std::end(kTransforms), spec.ctm) == std::end(kTransforms))
    return ctx.unsupported("coordinate_transformation_mode '" + spec.ctm + "'");
  static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(std::begin(kNearest), std::end(kNearest), spec.nearest) == std::end(kNearest))
    return ctx.invalid("nearest_mode '" + spec.nearest + "' is not one of ONNX's");
  std::optional<std::vector<int64_t>> axes;  // opset 18: scales/sizes for these axes only
  if (!upsample && ctx.opset() >= 18) {
    ETC_ASSIGN_OR_RETURN(int64_t antialias, ctx.attr_int("antialias", 0));
    if (antialias) return ctx.unsupported("antialias=1");
    ETC_ASSIGN_OR_RETURN(std::string policy,
                         ctx.attr_string("keep_aspect_ratio_policy", "stretch"));
    if (policy != "stretch") return ctx.unsupported("keep_aspect_ratio_policy '" + policy + "'");
    if (ctx.attr("axes")) {
      ETC_ASSIGN_OR_RETURN(std::vector<int64_t> a, ctx.attr_ints("axes", std::nullopt));
      for (int64_t& d : a) {
        ETC_RETURN_IF_ERROR(ctx.check_axis(d, rank, "axes"));
        d = ctx.wrap_axis(d, rank);
      }
      axes = std::move(a);
    }
  }
  std::optional<std::vector<double>> scales;
  std::optional<std::vector<int64_t>> sizes;
  if (upsample && ctx.opset() < 9) {
    ETC_ASSIGN_OR_RETURN(std::vector<float> f, ctx.attr_floats("scales"));
    scales = std::vector<double>(f.begin(), f.end());
  } else {
    const int scales_at = upsample || ctx.opset() < 11 ? 1 : 2;
    if (ctx.has_input(scales_at)) {
      ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(scales_at, "scales"));
      if (t->numel() > 0) scales = t->doubles();
    }
    if (!upsample && ctx.opset() >= 11 && ctx.has_input(3)) {
      ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(3, "sizes"));
      if (t->numel() > 0) sizes = t->ints();
    }
  }
  if (scales.has_value() == sizes.has_value())
    return ctx.invalid("exactly one of scales and sizes must be given");
  const std::vector<int64_t>& in = ctx.shape(0);
  const auto r = static_cast<size_t>(rank);
  if (axes) {  // spread over all dims: 1 / the input's size elsewhere
    const size_t given = scales ? scales->size() : sizes->size();
    if (given != axes->size()) {
      return ctx.invalid(std::string(scales ? "scales" : "sizes") + " has " +
                         std::to_string(given) + " entries for " + std::to_string(axes->size()) +
                         " axes");
    }
    std::vector<double> full_scales(r, 1.0);
    std::vector<int64_t> full_sizes(in.begin(), in.end());
    for (size_t i = 0; i < axes->size(); ++i) {
      const auto d = static_cast<size_t>((*axes)[i]);
      if (scales) full_scales[d] = (*scales)[i];
      if (sizes) full_sizes[d] = (*sizes)[i];
    }
    if (scales) scales = full_scales;
    if (sizes) sizes = full_sizes;
  }
  if ((scales ? scales->size() : sizes->size()) != r) {
    return ctx.invalid(std::string(scales ? "scales" : "sizes") + " must have " +
                       std::to_string(r) + " entries (one per input dim)");
  }
  std::vector<double> roi_start(r, 0.0), roi_end(r, 1.0);
  if (spec.ctm == "tf_crop_and_resize") {
    if (axes) return ctx.unsupported("tf_crop_and_resize with axes");
    ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "roi"));
    std::vector<double> roi = t->doubles();
    if (roi.size() != 2 * r) return ctx.invalid("roi must have 2 entries per input dim");
    for (size_t d = 0; d < r; ++d) {
      roi_start[d] = roi[d];
      roi_end[d] = roi[r + d];
    }
  }
  // Per dim: the output size and the scale the coordinate transforms divide by.
  std::vector<int64_t> out(r);
  std::vector<double> scale(r);
  for (size_t d = 0; d < r; ++d) {
    if (scales) {
      scale[d] = (*scales)[d];
      if (!(scale[d] > 0)) return ctx.invalid("scales must be positive");
      out[d] = static_cast<int64_t>(
          std::floor(static_cast<double>(in[d]) * (roi_end[d] - roi_start[d]) * scale[d]));
    } else {
      out[d] = (*sizes)[d];
      if (out[d] <= 0 || in[d] <= 0) return ctx.invalid("sizes and input dims must be positive");
      scale[d] = static_cast<double>(out[d]) / static_cast<double>(in[d]);
    }
  }
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == in[d] && scale[d] == 1) continue;
    if (in[d] <= 0 || out[d] <= 0) {
      return ctx.invalid("dim " + std::to_string(d) + " resizes from " + std::to_string(in[d]) +
                         " to " + std::to_string(out[d]) + " (both must be positive)");
    }
    // The interpolation matrix is in x out; 2^26 entries (256 MiB as float32) at most.
    if (out[d] > (int64_t{1} << 26) / in[d]) {
      return ctx.unsupported("resizing dim " + std::to_string(d) + " from " +
                             std::to_string(in[d]) + " to " + std::to_string(out[d]) +
                             " (over 2^26 interpolation weights)");
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  // PyTorch's own cases: the spatial dims of NCHW, N and C kept.
  const bool nchw = rank == 4 && out[0] == in[0] && out[1] == in[1] && scale[0] == 1 &&
                    scale[1] == 1 && !spec.exclude_outside;
  ArgValue out_size = kNone, factors = kNone;
  if (scales) {
    factors = std::vector<double>{scale[2 % r], scale[3 % r]};
  } else {
    out_size = std::vector<int64_t>{out[2 % r], out[3 % r]};
  }
  bool aten = false;
  if (nchw && spec.mode == "nearest" && spec.ctm == "asymmetric" && spec.nearest == "floor") {
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::UpsampleNearest2d,
                    {{"input", x}, {"output_size", out_size}, {"scale_factors", factors}}));
    aten = true;
  } else if (nchw && spec.mode == "linear") {
    bool align = false, ok = true;
    if (spec.ctm == "align_corners") {
      align = true;
      // ONNX divides by the unrounded in * scale; ATen's align_corners by the output size.
      for (size_t d : {size_t{2}, size_t{3}})
        ok = ok && in[d] * scale[d] == static_cast<double>(out[d]);
      out_size = std::vector<int64_t>{out[2], out[3]};
      factors = kNone;
    } else if (spec.ctm == "pytorch_half_pixel") {
      ok = out[2] > 1 && out[3] > 1;
    } else {
      ok = spec.ctm == "half_pixel";
    }
    if (ok) {
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::UpsampleBilinear2d, {{"input", x},
                                                                    {"output_size", out_size},
                                                                    {"align_corners", align},
                                                                    {"scale_factors", factors}}));
      aten = true;
    }
  }
  if (!aten) {
    std::vector<int64_t> shape = in;
    y = x;
    for (size_t d = 0; d < r; ++d) {
      if (out[d] == in[d] && scale[d] == 1 && spec.ctm != "tf_crop_and_resize") continue;
      ETC_ASSIGN_OR_RETURN(y, resize_axis(ctx, spec, y, shape, static_cast<int64_t>(d), out[d],
                                          scale[d], roi_start[d], roi_end[d]));
    }
    if (y == x) {
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Clone, {{"self", x}}));
    }
  }
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import

namespace etc::onnx_import {

// GridSample(X [N, C, H, W], grid [N, H_out, W_out, 2]; mode, padding_mode, align_corners):
// ATen's grid_sampler_2d, which ONNX's op follows (opset 20 renames the modes linear and
// cubic and allows more spatial dims; etc takes two).
Status convert_grid_sample(NodeCtx& ctx) {
  if (ctx.rank(0) != 4)
    return ctx.unsupported("X of rank " + std::to_string(ctx.rank(0)) + " (2 spatial dims only)");
  if (!dtype_is_float(ctx.dtype(0)))
    return ctx.unsupported(std::string(dtype_name(ctx.dtype(0))) + " inputs");
  if (ctx.rank(1) != 4 || ctx.shape(1)[0] != ctx.shape(0)[0] || ctx.shape(1)[3] != 2) {
    return ctx.invalid("grid must have shape [N, H_out, W_out, 2] for X " +
                       shape_to_string(ctx.shape(0)) + ", got " + shape_to_string(ctx.shape(1)));
  }
  Result<std::string> mode = ctx.attr_string("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  if (!mode.ok()) return mode.status();
  Result<std::string> padding = ctx.attr_string("padding_mode", "zeros");
  if (!padding.ok()) return padding.status();
  ETC_ASSIGN_OR_RETURN(int64_t align, ctx.attr_int("align_corners", 0));
  int64_t m;
  if (*mode == "bilinear" || *mode == "linear") {
    m = 0;
  } else if (*mode == "nearest") {
    m = 1;
  } else if (*mode == "bicubic" || *mode == "cubic") {
    m = 2;
  } else {
    return ctx.invalid("mode must be linear (bilinear), nearest or cubic (bicubic), got '" + *mode +
                       "'");
  }
  int64_t p;
  if (*padding == "zeros") {
    p = 0;
  } else if (*padding == "border") {
    p = 1;
  } else if (*padding == "reflection") {
    p = 2;
  } else {
    return ctx.invalid("padding_mode must be zeros, border or reflection, got '" + *padding + "'");
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId grid, ctx.input(1));
  if (ctx.dtype(1) != ctx.dtype(0)) {
    ETC_ASSIGN_OR_RETURN(grid, ctx.emit(OpKind::ToCopy, {{"self", grid}, {"dtype", ctx.dtype(0)}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::GridSampler2d, {{"input", x},
                                                                   {"grid", grid},
                                                                   {"interpolation_mode", m},
                                                                   {"padding_mode", p},
                                                                   {"align_corners", align != 0}}));
  return ctx.set_output(0, y);
}

namespace {

// RoiAlign's sampling along one axis (y: rows, x: columns) as a matrix per region,
// [R, out, size]: row p averages the bilinear weights of the bin's `grid` samples over the
// `size` input positions. Samples outside [-1, size] weigh nothing; the others are clamped
// into [0, size - 1], as ONNX Runtime and ONNX's reference do. `start` and `extent` ([R, 1])
// are the regions' first coordinate and length along the axis.
Result<ValueId> roi_axis_weights(NodeCtx& ctx, ValueId start, ValueId extent, int64_t out,
                                 int64_t grid, int64_t size) {
  const int64_t samples = out * grid;
  std::vector<double> offsets(static_cast<size_t>(samples));
  for (int64_t p = 0; p < out; ++p) {
    for (int64_t i = 0; i < grid; ++i) {
      offsets[static_cast<size_t>(p * grid + i)] =
          static_cast<double>(p) + (static_cast<double>(i) + 0.5) / static_cast<double>(grid);
    }
  }
  ValueId c = ctx.add_constant(host_from_doubles(DType::kFloat32, {1, samples}, offsets));
  // The sample coordinates, [R, samples]: start + bin * (p + (i + 0.5) / grid).
  ETC_ASSIGN_OR_RETURN(
      ValueId bin,
      ctx.emit(OpKind::DivScalar, {{"self", extent}, {"other", Scalar{static_cast<double>(out)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId at, ctx.emit(OpKind::MulTensor, {{"self", bin}, {"other", c}}));
  ETC_ASSIGN_OR_RETURN(at, ctx.emit(OpKind::AddTensor, {{"self", at}, {"other", start}}));
  ETC_ASSIGN_OR_RETURN(ValueId ge,
                       ctx.emit(OpKind::GeScalar, {{"self", at}, {"other", Scalar{-1.0}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId le,
      ctx.emit(OpKind::LeScalar, {{"self", at}, {"other", Scalar{static_cast<double>(size)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId inside, ctx.emit(OpKind::LogicalAnd, {{"self", ge}, {"other", le}}));
  ETC_ASSIGN_OR_RETURN(inside,
                       ctx.emit(OpKind::ToCopy, {{"self", inside}, {"dtype", DType::kFloat32}}));
  ETC_ASSIGN_OR_RETURN(at,
                       ctx.emit(OpKind::Clamp, {{"self", at},
                                                {"min", Scalar{0.0}},
                                                {"max", Scalar{static_cast<double>(size - 1)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId low, ctx.emit(OpKind::Floor, {{"self", at}}));
  ETC_ASSIGN_OR_RETURN(ValueId high,
                       ctx.emit(OpKind::AddScalar, {{"self", low}, {"other", Scalar{1.0}}}));
  ETC_ASSIGN_OR_RETURN(
      high,
      ctx.emit(OpKind::Clamp, {{"self", high}, {"max", Scalar{static_cast<double>(size - 1)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId w_high, ctx.emit(OpKind::SubTensor, {{"self", at}, {"other", low}}));
  ETC_ASSIGN_OR_RETURN(w_high, ctx.emit(OpKind::MulTensor, {{"self", w_high}, {"other", inside}}));
  ETC_ASSIGN_OR_RETURN(ValueId w_low,
                       ctx.emit(OpKind::SubTensor, {{"self", inside}, {"other", w_high}}));
  // One-hot rows of the two neighbours, weighted: [R, samples, size].
  std::vector<double> positions(static_cast<size_t>(size));
  std::iota(positions.begin(), positions.end(), 0.0);
  ValueId ar = ctx.add_constant(host_from_doubles(DType::kFloat32, {1, 1, size}, positions));
  auto weighted = [&](ValueId index, ValueId weight) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(ValueId i3,
                         ctx.emit(OpKind::Unsqueeze, {{"self", index}, {"dim", int64_t{2}}}));
    ETC_ASSIGN_OR_RETURN(ValueId hot, ctx.emit(OpKind::EqTensor, {{"self", i3}, {"other", ar}}));
    ETC_ASSIGN_OR_RETURN(hot,
                         ctx.emit(OpKind::ToCopy, {{"self", hot}, {"dtype", DType::kFloat32}}));
    ETC_ASSIGN_OR_RETURN(ValueId w3,
                         ctx.emit(OpKind::Unsqueeze, {{"self", weight}, {"dim", int64_t{2}}}));
    return ctx.emit(OpKind::MulTensor, {{"self", hot}, {"other", w3}});
  };
  ETC_ASSIGN_OR_RETURN(ValueId a, weighted(low, w_low));
  ETC_ASSIGN_OR_RETURN(ValueId b, weighted(high, w_high));
  ETC_ASSIGN_OR_RETURN(ValueId m, ctx.emit(OpKind::AddTensor, {{"self", a}, {"other", b}}));
  const int64_t r = ctx.sizes_of(m)[0];
  ETC_ASSIGN_OR_RETURN(m, reshape(ctx, m, {r, out, grid, size}));
  return ctx.emit(OpKind::SumDimIntList,
                  {{"self", m}, {"dim", std::vector<int64_t>{2}}, {"keepdim", false}});
}

}  // namespace

// RoiAlign(X [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R]; mode avg,
// output_height, output_width, sampling_ratio, spatial_scale, coordinate_transformation_mode):
// bilinear sampling is separable, so each region's output is Wy [out_h, H] @ X[b] [H, W] @
// Wx^T [W, out_w] with the averaged sampling weights of each axis (roi_axis_weights),
// computed from the regions at run time; X[b] is index.Tensor of the batch indices.
Status convert_roi_align(NodeCtx& ctx) {
  if (ctx.dtype(0) != DType::kFloat32 || ctx.dtype(1) != DType::kFloat32) {
    return ctx.unsupported("X and rois of type " + std::string(dtype_name(ctx.dtype(0))) +
                           " (float32 only)");
  }
  if (ctx.rank(0) != 4) return ctx.invalid("X must be [N, C, H, W]");
  if (ctx.rank(1) != 2 || ctx.shape(1)[1] != 4) return ctx.invalid("rois must be [R, 4]");
  const int64_t regions = ctx.shape(1)[0];
  if (ctx.shape(2) != std::vector<int64_t>{regions})
    return ctx.invalid("batch_indices must be [R], one per region");
  if (ctx.dtype(2) != DType::kInt64 && ctx.dtype(2) != DType::kInt32)
    return ctx.invalid("batch_indices must be integers");
  ETC_ASSIGN_OR_RETURN(std::string mode, ctx.attr_string("mode", "avg"));
  if (mode != "avg") return ctx.unsupported("mode '" + mode + "' (only 'avg')");
  // Opset 10 has no attribute and means what opset 16 calls output_half_pixel.
  ETC_ASSIGN_OR_RETURN(std::string transform,
                       ctx.attr_string("coordinate_transformation_mode",
                                       ctx.opset() < 16 ? "output_half_pixel" : "half_pixel"));
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return ctx.invalid("coordinate_transformation_mode '" + transform + "'");
  const bool half_pixel = transform == "half_pixel";
  ETC_ASSIGN_OR_RETURN(int64_t out_h, ctx.attr_int("output_height", 1));
  ETC_ASSIGN_OR_RETURN(int64_t out_w, ctx.attr_int("output_width", 1));
  ETC_ASSIGN_OR_RETURN(int64_t ratio, ctx.attr_int("sampling_ratio", 0));
  ETC_ASSIGN_OR_RETURN(float scale, ctx.attr_float("spatial_scale", 1.0f));
  if (out_h < 1 || out_w < 1) return ctx.invalid("output_height and output_width must be positive");
  if (ratio <= 0) {
    return ctx.unsupported(
        "sampling_ratio 0 (samples per bin that follow each region's size, known only at run "
        "time); etc needs a fixed sampling_ratio");
  }
  const int64_t height = ctx.shape(0)[2], width = ctx.shape(0)[3];
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId rois, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId batch, ctx.input(2));
  // Region corners in input coordinates, [R, 1] each.
  std::vector<ValueId> corner;
  for (int64_t j = 0; j < 4; ++j) {
    ETC_ASSIGN_OR_RETURN(ValueId c, ctx.emit(OpKind::SelectInt,
                                             {{"self", rois}, {"dim", int64_t{1}}, {"index", j}}));
    ETC_ASSIGN_OR_RETURN(c, ctx.emit(OpKind::MulScalar,
                                     {{"self", c}, {"other", Scalar{static_cast<double>(scale)}}}));
    if (half_pixel) {
      ETC_ASSIGN_OR_RETURN(c, ctx.emit(OpKind::SubScalar, {{"self", c}, {"other", Scalar{0.5}}}));
    }
    ETC_ASSIGN_OR_RETURN(c, reshape(ctx, c, {regions, 1}));
    corner.push_back(c);
  }
  auto extent = [&](ValueId start, ValueId end) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(ValueId e, ctx.emit(OpKind::SubTensor, {{"self", end}, {"other", start}}));
    if (half_pixel) return e;
    return ctx.emit(OpKind::Clamp, {{"self", e}, {"min", Scalar{1.0}}});  // at least one pixel
  };
  ETC_ASSIGN_OR_RETURN(ValueId ext_w, extent(corner[0], corner[2]));
  ETC_ASSIGN_OR_RETURN(ValueId ext_h, extent(corner[1], corner[3]));
  ETC_ASSIGN_OR_RETURN(ValueId wy, roi_axis_weights(ctx, corner[1], ext_h, out_h, ratio, height));
  ETC_ASSIGN_OR_RETURN(ValueId wx, roi_axis_weights(ctx, corner[0], ext_w, out_w, ratio, width));
  const int64_t channels = ctx.shape(0)[1];
  ETC_ASSIGN_OR_RETURN(
      ValueId xb,
      ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", std::vector<ValueId>{batch}}}));
  ETC_ASSIGN_OR_RETURN(wy, reshape(ctx, wy, {regions, 1, out_h, height}));
  ETC_ASSIGN_OR_RETURN(ValueId wxt, permute(ctx, wx, {0, 2, 1}));
  ETC_ASSIGN_OR_RETURN(wxt, reshape(ctx, wxt, {regions, 1, width, out_w}));
  ETC_ASSIGN_OR_RETURN(ValueId rows, matmul(ctx, wy, {regions, 1, out_h, height}, xb,
                                            {regions, channels, height, width}));
  ETC_ASSIGN_OR_RETURN(ValueId y, matmul(ctx, rows, {regions, channels, out_h, width}, wxt,
                                         {regions, 1, width, out_w}));
  ETC_ASSIGN_OR_RETURN(
      y, ctx.emit(OpKind::DivScalar,
                  {{"self", y}, {"other", Scalar{static_cast<double>(ratio * ratio)}}}));
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
