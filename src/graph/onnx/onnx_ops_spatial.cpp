// ONNX's spatial ops -> IR: Conv and ConvTranspose, MaxPool and AveragePool (with ONNX's
// auto_pad and asymmetric pads), the global pools, and Resize/Upsample.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "graph/onnx/node_context.h"
#include "graph/onnx/onnx_converters.h"

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
    int64_t out = (spatial[i] + w.strides[i] - 1) / w.strides[i];
    int64_t total = std::max<int64_t>(
        0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - spatial[i]);
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

}  // namespace

Status convert_conv(NodeCtx& ctx, bool transposed) {
  const std::vector<int64_t> xs = ctx.shape(0), ws = ctx.shape(1);
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer convolution");
  if (xs.size() != 3 && xs.size() != 4) {
    return ctx.unsupported("input of rank " + std::to_string(xs.size()) +
                           " (1-d and 2-d convolutions only)");
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
      for (size_t i = 0; i < spatial.size(); ++i)
        (*target)[i] *= w.strides[i];
    }
    if (target) {
      for (size_t i = 0; i < spatial.size(); ++i) {
        int64_t total = w.strides[i] * (spatial[i] - 1) + out_pad[i] +
                        (w.kernel[i] - 1) * w.dilations[i] + 1 - (*target)[i];
        if (total < 0)
          return ctx.unsupported("an output_shape larger than the full transposed output");
        // ONNX's rule: SAME_UPPER puts the larger half at the end, otherwise at the start.
        const int64_t small = total / 2, large = total - small;
        w.pad_begin[i] = w.auto_pad == "SAME_UPPER" ? small : large;
        w.pad_end[i] = w.auto_pad == "SAME_UPPER" ? large : small;
      }
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId wt, ctx.input(1));
  ArgValue bias = kNone;
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(bias, ctx.input(2));
  }
  const bool one_d = xs.size() == 3;
  if (one_d) {
    ETC_ASSIGN_OR_RETURN(x, to_2d(ctx, x, xs));
    ETC_ASSIGN_OR_RETURN(wt, reshape(ctx, wt, {ws[0], ws[1], 1, ws[2]}));
    window_to_2d(w);
    out_pad.insert(out_pad.begin(), 0);
  }
  std::vector<int64_t> padding = w.pad_begin;
  const bool asym = !symmetric(w);
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
  if (asym && transposed) {
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
  return ctx.set_output(0, y);
}

Status convert_pool(NodeCtx& ctx, bool is_max) {
  const std::vector<int64_t> xs = ctx.shape(0);
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  if (xs.size() != 3 && xs.size() != 4) {
    return ctx.unsupported("input of rank " + std::to_string(xs.size()) +
                           " (1-d and 2-d pooling only)");
  }
  if (is_max) ETC_RETURN_IF_ERROR(ctx.require_no_output(1, "Indices"));
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
  const bool one_d = xs.size() == 3;
  if (one_d) {
    ETC_ASSIGN_OR_RETURN(x, to_2d(ctx, x, xs));
    window_to_2d(w);
  }
  // ATen pads at most half the kernel on each side, symmetrically; anything else is an
  // explicit pad (with -inf for max pooling, or zeros counted in the average).
  bool direct = symmetric(w);
  for (size_t i = 0; i < w.kernel.size(); ++i)
    direct = direct && w.pad_begin[i] * 2 <= w.kernel[i];
  std::vector<int64_t> padding = w.pad_begin;
  if (!direct) {
    if (!is_max && !count_include_pad) {
      return ctx.unsupported(
          "average pooling with asymmetric or large pads and count_include_pad=0");
    }
    ETC_ASSIGN_OR_RETURN(
        x, pad_spatial(ctx, x, w, is_max ? -std::numeric_limits<double>::infinity() : 0.0));
    std::fill(padding.begin(), padding.end(), 0);
  }
  ValueId y;
  if (is_max) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::MaxPool2d, {{"self", x},
                                                         {"kernel_size", w.kernel},
                                                         {"stride", w.strides},
                                                         {"padding", padding},
                                                         {"dilation", w.dilations},
                                                         {"ceil_mode", ceil_mode != 0}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::AvgPool2d, {{"self", x},
                                        {"kernel_size", w.kernel},
                                        {"stride", w.strides},
                                        {"padding", padding},
                                        {"ceil_mode", ceil_mode != 0},
                                        {"count_include_pad", count_include_pad != 0}}));
  }
  if (one_d) {
    std::vector<int64_t> s = ctx.sizes_of(y);
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {s[0], s[1], s[3]}));
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

Status convert_resize(NodeCtx& ctx) {
  const bool upsample = ctx.op_type() == "Upsample";
  if (ctx.rank(0) != 4)
    return ctx.unsupported("inputs of rank " + std::to_string(ctx.rank(0)) + " (NCHW only)");
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(std::string mode, ctx.attr_string("mode", "nearest"));
  std::string ctm = "asymmetric", nearest = "floor";
  if (!upsample && ctx.opset() >= 11) {
    ETC_ASSIGN_OR_RETURN(ctm, ctx.attr_string("coordinate_transformation_mode", "half_pixel"));
    ETC_ASSIGN_OR_RETURN(nearest, ctx.attr_string("nearest_mode", "round_prefer_floor"));
    ETC_ASSIGN_OR_RETURN(int64_t exclude, ctx.attr_int("exclude_outside", 0));
    if (exclude) return ctx.unsupported("exclude_outside=1");
  }
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
        ETC_RETURN_IF_ERROR(ctx.check_axis(d, 4, "axes"));
        d = ctx.wrap_axis(d, 4);
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
  if (axes) {  // spread over all four dims: 1 / the input's size elsewhere
    const size_t given = scales ? scales->size() : sizes->size();
    if (given != axes->size()) {
      return ctx.invalid(std::string(scales ? "scales" : "sizes") + " has " +
                         std::to_string(given) + " entries for " + std::to_string(axes->size()) +
                         " axes");
    }
    std::vector<double> full_scales(4, 1.0);
    std::vector<int64_t> full_sizes(in.begin(), in.end());
    for (size_t i = 0; i < axes->size(); ++i) {
      const auto d = static_cast<size_t>((*axes)[i]);
      if (scales) full_scales[d] = (*scales)[i];
      if (sizes) full_sizes[d] = (*sizes)[i];
    }
    if (scales) scales = full_scales;
    if (sizes) sizes = full_sizes;
  }
  if (scales) {
    if (scales->size() != 4) return ctx.invalid("scales must have 4 entries");
    if ((*scales)[0] != 1 || (*scales)[1] != 1) return ctx.unsupported("resizing the N or C dims");
  } else {
    if (sizes->size() != 4) return ctx.invalid("sizes must have 4 entries");
    if ((*sizes)[0] != in[0] || (*sizes)[1] != in[1])
      return ctx.unsupported("resizing the N or C dims");
  }
  ArgValue out_size = kNone, factors = kNone;
  if (scales) {
    factors = std::vector<double>{(*scales)[2], (*scales)[3]};
  } else {
    out_size = std::vector<int64_t>{(*sizes)[2], (*sizes)[3]};
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  if (mode == "nearest") {
    if (ctm != "asymmetric" || nearest != "floor") {
      return ctx.unsupported("nearest resizing with coordinate_transformation_mode '" + ctm +
                             "' and nearest_mode '" + nearest +
                             "' (etc implements asymmetric + floor, PyTorch's nearest)");
    }
    ETC_ASSIGN_OR_RETURN(
        y, ctx.emit(OpKind::UpsampleNearest2d,
                    {{"input", x}, {"output_size", out_size}, {"scale_factors", factors}}));
  } else if (mode == "linear" || mode == "bilinear") {
    bool align = false;
    if (ctm == "align_corners") {
      align = true;
    } else if (ctm == "pytorch_half_pixel") {
      for (int64_t d : {2, 3}) {
        int64_t o = scales ? static_cast<int64_t>(std::floor(in[d] * (*scales)[d])) : (*sizes)[d];
        if (o <= 1) return ctx.unsupported("pytorch_half_pixel resizing to a size of 1");
      }
    } else if (ctm != "half_pixel") {
      return ctx.unsupported("linear resizing with coordinate_transformation_mode '" + ctm +
                             "' (etc implements half_pixel, pytorch_half_pixel and align_corners)");
    }
    if (align && scales) {
      // ONNX divides by the unrounded in * scale; ATen's align_corners by the output size.
      for (int d : {2, 3}) {
        if (in[d] * (*scales)[d] != std::floor(in[d] * (*scales)[d])) {
          return ctx.unsupported("align_corners resizing by a scale that gives a fractional size");
        }
      }
      out_size = std::vector<int64_t>{static_cast<int64_t>(std::floor(in[2] * (*scales)[2])),
                                      static_cast<int64_t>(std::floor(in[3] * (*scales)[3]))};
      factors = kNone;
    }
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::UpsampleBilinear2d, {{"input", x},
                                                                  {"output_size", out_size},
                                                                  {"align_corners", align},
                                                                  {"scale_factors", factors}}));
  } else {
    return ctx.unsupported("mode '" + mode + "' (nearest and linear only)");
  }
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
