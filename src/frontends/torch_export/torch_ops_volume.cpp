// Volumetric (3-D) ops as 2-D ops over the depth slices: conv3d as kd 2-D convolutions of
// the slices each kernel plane meets, summed; conv_transpose3d as kd transposed 2-D ones,
// each added at the output depths its plane reaches; avg_pool3d as 2-D window sums of every
// slice, summed over each depth window and divided by the 3-D window's count (which
// factorizes per dim); adaptive_avg_pool3d as 2-D adaptive means, averaged over each depth
// range; max_pool3d as 2-D max pools of every slice, combined over each depth window. The
// depth is folded into the batch for the 2-D op.
#include <algorithm>

#include "frontends/torch_export/torch_ops.h"
#include "support/checked_math.h"

namespace etc::torch_import {
namespace {

// [N, C, D, H, W] <-> [N * D, C, H, W] (the depth folded into the batch).
Result<ValueId> fold_depth(TorchNode& n, ValueId x) {
  const std::vector<int64_t> s = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(
      x, n.emit(OpKind::Permute, {{"self", x}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  return n.emit(OpKind::Reshape,
                {{"self", x}, {"shape", std::vector<int64_t>{s[0] * s[2], s[1], s[3], s[4]}}});
}
Result<ValueId> unfold_depth(TorchNode& n, ValueId y, int64_t batch, int64_t depth) {
  const std::vector<int64_t> s = n.sizes(y);
  ETC_ASSIGN_OR_RETURN(
      y, n.emit(OpKind::Reshape,
                {{"self", y}, {"shape", std::vector<int64_t>{batch, depth, s[1], s[2], s[3]}}}));
  return n.emit(OpKind::Permute, {{"self", y}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}});
}

// A 4-D input (no batch) gains a batch of 1; `batched` says whether to take it off after.
Result<ValueId> with_batch(TorchNode& n, ValueId x, bool& batched) {
  const size_t rank = n.sizes(x).size();
  if (rank != 4 && rank != 5) {
    return n.invalid("a 3-D pool takes [C, D, H, W] or [N, C, D, H, W], not " +
                     shape_to_string(n.sizes(x)));
  }
  batched = rank == 5;
  if (batched) return x;
  return n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", int64_t{0}}});
}

// Along one dim of `size`: each output window's [start, end) over the padded dim (clipped to
// size + pad, as ATen's pools do) and its count with or without the padding.
struct Window1d {
  std::vector<int64_t> start, end, with_pad, inside;
};
Window1d windows_1d(int64_t size, int64_t out, int64_t k, int64_t s, int64_t p) {
  Window1d w;
  for (int64_t o = 0; o < out; ++o) {
    int64_t a = o * s - p;
    int64_t b = std::min(a + k, size + p);
    w.with_pad.push_back(b - a);
    a = std::max<int64_t>(a, 0);
    b = std::min(b, size);
    w.start.push_back(a);
    w.end.push_back(b);
    w.inside.push_back(b - a);
  }
  return w;
}

// ATen's pooled size: (size + 2 pad - span) / stride + 1, rounded up with ceil_mode unless the
// last window would start past the input and its left padding; 0 when the window does not
// fit, an error when the arithmetic leaves int64.
Result<int64_t> pooled_size(TorchNode& n, int64_t size, int64_t k, int64_t dilation, int64_t s,
                            int64_t p, bool ceil_mode) {
  const std::optional<SlidingWindow> win = sliding_window(size, k, p, s, dilation, ceil_mode);
  if (!win) return n.invalid("the pooling window's extent or padding overflows a 64-bit size");
  return win->count;
}

// The depth slices [start, end) of x [N, C, D, ...] reduced by `op` (sum or mean), one per
// window, concatenated along the depth.
Result<ValueId> reduce_depth_windows(TorchNode& n, ValueId x, const std::vector<int64_t>& start,
                                     const std::vector<int64_t>& end, OpKind op) {
  std::vector<ValueId> parts;
  for (size_t i = 0; i < start.size(); ++i) {
    ETC_ASSIGN_OR_RETURN(ValueId slab, n.emit(OpKind::SliceTensor, {{"self", x},
                                                                    {"dim", int64_t{2}},
                                                                    {"start", start[i]},
                                                                    {"end", end[i]},
                                                                    {"step", int64_t{1}}}));
    ETC_ASSIGN_OR_RETURN(ValueId r, n.emit(op, {{"self", slab},
                                                {"dim", std::vector<int64_t>{2}},
                                                {"keepdim", true},
                                                {"dtype", std::monostate{}}}));
    parts.push_back(r);
  }
  if (parts.size() == 1) return parts[0];
  return n.emit(OpKind::Cat, {{"tensors", parts}, {"dim", int64_t{2}}});
}

// avg_pool3d(self, kernel_size, stride=[], padding=0, ceil_mode, count_include_pad,
// divisor_override).
Status convert_avg_pool3d(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding", std::vector<int64_t>{0}));
  ETC_ASSIGN_OR_RETURN(bool ceil_mode, n.bool_arg("ceil_mode", false));
  ETC_ASSIGN_OR_RETURN(bool count_pad, n.bool_arg("count_include_pad", true));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> divisor, n.optional_int("divisor_override"));
  auto three = [](std::vector<int64_t>& v) {
    if (v.size() == 1) v.assign(3, v[0]);
    return v.size() == 3;
  };
  if (s.empty()) s = k;
  if (!three(k) || !three(s) || !three(p))
    return n.invalid("kernel_size, stride and padding take 1 or 3 values each");
  for (int i = 0; i < 3; ++i) {
    if (k[i] <= 0 || s[i] <= 0 || p[i] < 0 || p[i] > k[i] / 2)
      return n.invalid("kernel and stride must be positive, padding at most half the kernel");
  }
  if (divisor && *divisor == 0) return n.invalid("divisor_override must not be zero");
  const DType dt = n.dtype(x);
  if (!dtype_is_float(dt) && dt != DType::kInt64)
    return n.invalid("avg_pool3d takes a floating-point or int64 tensor");
  bool batched = true;
  ETC_ASSIGN_OR_RETURN(x, with_batch(n, x, batched));
  const std::vector<int64_t> in = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(const int64_t od, pooled_size(n, in[2], k[0], 1, s[0], p[0], ceil_mode));
  ETC_ASSIGN_OR_RETURN(const int64_t oh, pooled_size(n, in[3], k[1], 1, s[1], p[1], ceil_mode));
  ETC_ASSIGN_OR_RETURN(const int64_t ow, pooled_size(n, in[4], k[2], 1, s[2], p[2], ceil_mode));
  if (od <= 0 || oh <= 0 || ow <= 0) return n.invalid("the pooled output is empty");
  // Window sums of every depth slice (divisor 1), then summed over each depth window.
  ETC_ASSIGN_OR_RETURN(ValueId flat, fold_depth(n, x));
  ETC_ASSIGN_OR_RETURN(ValueId sums,
                       n.emit(OpKind::AvgPool2d, {{"self", flat},
                                                  {"kernel_size", std::vector<int64_t>{k[1], k[2]}},
                                                  {"stride", std::vector<int64_t>{s[1], s[2]}},
                                                  {"padding", std::vector<int64_t>{p[1], p[2]}},
                                                  {"ceil_mode", ceil_mode},
                                                  {"count_include_pad", true},
                                                  {"divisor_override", int64_t{1}}}));
  ETC_ASSIGN_OR_RETURN(sums, unfold_depth(n, sums, in[0], in[2]));
  const Window1d wd = windows_1d(in[2], od, k[0], s[0], p[0]);
  ETC_ASSIGN_OR_RETURN(ValueId total,
                       reduce_depth_windows(n, sums, wd.start, wd.end, OpKind::SumDimIntList));
  // The divisor of each output position: the override, or the 3-D window's count.
  const Window1d wh = windows_1d(in[3], oh, k[1], s[1], p[1]);
  const Window1d ww = windows_1d(in[4], ow, k[2], s[2], p[2]);
  KnownTensor count{dt, {od, oh, ow}, {}};
  for (int64_t a = 0; a < od; ++a) {
    for (int64_t b = 0; b < oh; ++b) {
      for (int64_t c = 0; c < ow; ++c) {
        const int64_t cnt = divisor     ? *divisor
                            : count_pad ? wd.with_pad[a] * wh.with_pad[b] * ww.with_pad[c]
                                        : wd.inside[a] * wh.inside[b] * ww.inside[c];
        count.v.push_back(static_cast<double>(cnt));
      }
    }
  }
  ValueId out;
  if (dt == DType::kInt64) {
    ETC_ASSIGN_OR_RETURN(out,
                         n.emit(OpKind::DivTensorMode, {{"self", total},
                                                        {"other", n.constant(count)},
                                                        {"rounding_mode", std::string("trunc")}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        out, n.emit(OpKind::DivTensor, {{"self", total}, {"other", n.constant(count)}}));
  }
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::SqueezeDim, {{"self", out}, {"dim", int64_t{0}}}));
  }
  return n.set_output(0, out);
}

// adaptive_avg_pool3d / _adaptive_avg_pool3d(self, output_size): 2-D adaptive means of every
// depth slice, averaged over each output depth's range [floor(i D / O), ceil((i + 1) D / O)).
Status convert_adaptive_avg_pool3d(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("output_size"));
  if (size.size() == 1) size.assign(3, size[0]);
  if (size.size() != 3 || size[0] <= 0 || size[1] <= 0 || size[2] <= 0)
    return n.invalid("output_size takes 1 or 3 positive sizes");
  if (!dtype_is_float(n.dtype(x)))
    return n.invalid("adaptive_avg_pool3d takes a floating-point tensor");
  bool batched = true;
  ETC_ASSIGN_OR_RETURN(x, with_batch(n, x, batched));
  const std::vector<int64_t> in = n.sizes(x);
  if (in[2] <= 0) return n.invalid("adaptive_avg_pool3d of an empty depth");
  ETC_ASSIGN_OR_RETURN(ValueId flat, fold_depth(n, x));
  ETC_ASSIGN_OR_RETURN(
      ValueId means,
      n.emit(OpKind::AdaptiveAvgPool2d,
             {{"self", flat}, {"output_size", std::vector<int64_t>{size[1], size[2]}}}));
  ETC_ASSIGN_OR_RETURN(means, unfold_depth(n, means, in[0], in[2]));
  std::vector<int64_t> start, end;
  for (int64_t i = 0; i < size[0]; ++i) {
    start.push_back(i * in[2] / size[0]);
    end.push_back(((i + 1) * in[2] + size[0] - 1) / size[0]);
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, reduce_depth_windows(n, means, start, end, OpKind::MeanDim));
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::SqueezeDim, {{"self", out}, {"dim", int64_t{0}}}));
  }
  return n.set_output(0, out);
}

// max_pool3d / max_pool3d_with_indices(self, kernel_size, stride=[], padding=0, dilation=1,
// ceil_mode): 2-D max pools (with indices) of every depth slice, then for each output depth
// the kd slices of its window combined in order. ATen's loop takes a value that is greater
// than the maximum so far or NaN, so a depth's pooled value replaces the running one under
// the same rule (the 2-D pools apply it within a slice), and the index is the 3-D position
// d * H * W + h * W + w. A window depth in the padding repeats the nearest depth inside the
// window, which changes neither value nor index.
Converter max_pool3d(bool with_indices) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride", std::vector<int64_t>{}));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding", std::vector<int64_t>{0}));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dl, n.ints("dilation", std::vector<int64_t>{1}));
    ETC_ASSIGN_OR_RETURN(bool ceil_mode, n.bool_arg("ceil_mode", false));
    auto three = [](std::vector<int64_t>& v) {
      if (v.size() == 1) v.assign(3, v[0]);
      return v.size() == 3;
    };
    if (s.empty()) s = k;
    if (!three(k) || !three(s) || !three(p) || !three(dl))
      return n.invalid("kernel_size, stride, padding and dilation take 1 or 3 values each");
    for (int i = 0; i < 3; ++i) {
      if (k[i] <= 0 || s[i] <= 0 || dl[i] <= 0 || p[i] < 0 || p[i] > k[i] / 2) {
        return n.invalid(
            "kernel, stride and dilation must be positive, padding at most half "
            "the kernel");
      }
    }
    const bool indices = with_indices && n.output_used(1);
    bool batched = true;
    ETC_ASSIGN_OR_RETURN(x, with_batch(n, x, batched));
    const std::vector<int64_t> in = n.sizes(x);
    const int64_t depth = in[2];
    ETC_ASSIGN_OR_RETURN(const int64_t od,
                         pooled_size(n, depth, k[0], dl[0], s[0], p[0], ceil_mode));
    if (od <= 0 || depth <= 0) return n.invalid("the pooled output is empty");
    ETC_ASSIGN_OR_RETURN(ValueId flat, fold_depth(n, x));
    ETC_ASSIGN_OR_RETURN(ValueId vals,
                         n.emit(indices ? OpKind::MaxPool2dWithIndices : OpKind::MaxPool2d,
                                {{"self", flat},
                                 {"kernel_size", std::vector<int64_t>{k[1], k[2]}},
                                 {"stride", std::vector<int64_t>{s[1], s[2]}},
                                 {"padding", std::vector<int64_t>{p[1], p[2]}},
                                 {"dilation", std::vector<int64_t>{dl[1], dl[2]}},
                                 {"ceil_mode", ceil_mode}}));
    const ValueId idx2d = indices ? n.last_outputs()[1] : ValueId();
    ETC_ASSIGN_OR_RETURN(vals, unfold_depth(n, vals, in[0], depth));
    ValueId idx;
    if (indices) {
      // The slice's 2-D index plus its depth's offset d * H * W.
      ETC_ASSIGN_OR_RETURN(idx, unfold_depth(n, idx2d, in[0], depth));
      std::vector<int64_t> offset(static_cast<size_t>(depth));
      for (int64_t d = 0; d < depth; ++d)
        offset[static_cast<size_t>(d)] = d * in[3] * in[4];
      ETC_ASSIGN_OR_RETURN(
          idx, n.emit(OpKind::AddTensor, {{"self", idx},
                                          {"other", index_constant(n, {1, 1, depth, 1, 1}, offset)},
                                          {"alpha", Scalar{int64_t{1}}}}));
    }
    // depth_at[j][o]: the depth that kernel plane j reads for output depth o (the window's
    // nearest depth inside the input where the plane falls in the padding).
    auto depth_of = [&](int64_t o, int64_t j) {
      const int64_t first = o * s[0] - p[0];
      int64_t d = first + j * dl[0];
      if (d >= 0 && d < depth) return d;
      int64_t lo = 0, hi = k[0] - 1;  // the planes inside the input
      while (first + lo * dl[0] < 0)
        ++lo;
      while (first + hi * dl[0] >= depth)
        --hi;
      return first + (d < 0 ? lo : hi) * dl[0];
    };
    ValueId best, where;
    for (int64_t j = 0; j < k[0]; ++j) {
      std::vector<int64_t> at;
      for (int64_t o = 0; o < od; ++o)
        at.push_back(depth_of(o, j));
      std::vector<ValueId> pick{ValueId(), ValueId(), index_constant(n, {od}, at)};
      ETC_ASSIGN_OR_RETURN(ValueId v,
                           n.emit(OpKind::IndexTensor, {{"self", vals}, {"indices", pick}}));
      ValueId i;
      if (indices) {
        ETC_ASSIGN_OR_RETURN(i, n.emit(OpKind::IndexTensor, {{"self", idx}, {"indices", pick}}));
      }
      if (j == 0) {
        best = v;
        where = i;
        continue;
      }
      ETC_ASSIGN_OR_RETURN(ValueId greater,
                           n.emit(OpKind::GtTensor, {{"self", v}, {"other", best}}));
      ETC_ASSIGN_OR_RETURN(ValueId nan, n.emit(OpKind::Isnan, {{"self", v}}));
      ETC_ASSIGN_OR_RETURN(ValueId take,
                           n.emit(OpKind::LogicalOr, {{"self", greater}, {"other", nan}}));
      ETC_ASSIGN_OR_RETURN(
          best, n.emit(OpKind::WhereSelf, {{"condition", take}, {"self", v}, {"other", best}}));
      if (indices) {
        ETC_ASSIGN_OR_RETURN(
            where, n.emit(OpKind::WhereSelf, {{"condition", take}, {"self", i}, {"other", where}}));
      }
    }
    if (!batched) {
      ETC_ASSIGN_OR_RETURN(best, n.emit(OpKind::SqueezeDim, {{"self", best}, {"dim", int64_t{0}}}));
      if (indices) {
        ETC_ASSIGN_OR_RETURN(where,
                             n.emit(OpKind::SqueezeDim, {{"self", where}, {"dim", int64_t{0}}}));
      }
    }
    ETC_RETURN_IF_ERROR(n.set_output(0, best));
    if (indices) ETC_RETURN_IF_ERROR(n.set_output(1, where));
    return Status();
  };
}

}  // namespace

void add_volume_converters(std::map<std::string, Converter>& t) {
  t["aten.max_pool3d.default"] = max_pool3d(false);
  t["aten.max_pool3d_with_indices.default"] = max_pool3d(true);
  t["aten.avg_pool3d.default"] = convert_avg_pool3d;
  t["aten.adaptive_avg_pool3d.default"] = convert_adaptive_avg_pool3d;
  t["aten._adaptive_avg_pool3d.default"] = convert_adaptive_avg_pool3d;
}

Result<ValueId> emit_conv3d(TorchNode& n, ValueId x, ValueId w, std::optional<ValueId> bias,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& dilation, int64_t groups) {
  const std::vector<int64_t> xs = n.sizes(x), ws = n.sizes(w);
  if (xs.size() != 5 || ws.size() != 5)
    return n.invalid("a 3-D convolution takes input and weight of rank 5");
  if (stride.size() != 3 || padding.size() != 3 || dilation.size() != 3)
    return n.invalid("a 3-D convolution takes 3 strides, paddings and dilations");
  for (int i = 0; i < 3; ++i) {
    if (stride[i] <= 0 || dilation[i] <= 0 || padding[i] < 0)
      return n.invalid("stride and dilation must be positive and padding not negative");
  }
  const int64_t batch = xs[0], kd = ws[2];
  const std::optional<SlidingWindow> win =
      sliding_window(xs[2], kd, padding[0], stride[0], dilation[0]);
  if (!win) return n.invalid("the kernel's depth extent or padding overflows a 64-bit size");
  if (win->count == 0) {
    return n.invalid("the kernel's depth extent " + std::to_string(win->span) +
                     " is larger than the padded input's " + std::to_string(win->padded));
  }
  const int64_t od = win->count;
  if (padding[0] != 0) {
    ETC_ASSIGN_OR_RETURN(x,
                         n.emit(OpKind::ConstantPadNd,
                                {{"self", x},
                                 {"pad", std::vector<int64_t>{0, 0, 0, 0, padding[0], padding[0]}},
                                 {"value", Scalar{0.0}}}));
  }
  std::optional<ValueId> sum;
  for (int64_t k = 0; k < kd; ++k) {
    // The depth slices kernel plane k meets: [N, C, od, H, W] -> [N * od, C, H, W].
    const int64_t start = k * dilation[0];
    ETC_ASSIGN_OR_RETURN(ValueId slab,
                         n.emit(OpKind::SliceTensor, {{"self", x},
                                                      {"dim", int64_t{2}},
                                                      {"start", start},
                                                      {"end", start + (od - 1) * stride[0] + 1},
                                                      {"step", stride[0]}}));
    ETC_ASSIGN_OR_RETURN(
        slab,
        n.emit(OpKind::Permute, {{"self", slab}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
    ETC_ASSIGN_OR_RETURN(
        slab,
        n.emit(OpKind::Reshape,
               {{"self", slab}, {"shape", std::vector<int64_t>{batch * od, xs[1], xs[3], xs[4]}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId plane, n.emit(OpKind::SelectInt, {{"self", w}, {"dim", int64_t{2}}, {"index", k}}));
    ArgValue b = (k == 0 && bias) ? ArgValue(*bias) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(
        ValueId y,
        n.emit(OpKind::Convolution, {{"input", slab},
                                     {"weight", plane},
                                     {"bias", b},
                                     {"stride", std::vector<int64_t>{stride[1], stride[2]}},
                                     {"padding", std::vector<int64_t>{padding[1], padding[2]}},
                                     {"dilation", std::vector<int64_t>{dilation[1], dilation[2]}},
                                     {"transposed", false},
                                     {"output_padding", std::vector<int64_t>{0, 0}},
                                     {"groups", groups}}));
    if (sum) {
      ETC_ASSIGN_OR_RETURN(y, n.emit(OpKind::AddTensor, {{"self", *sum}, {"other", y}}));
    }
    sum = y;
  }
  const std::vector<int64_t> ys = n.sizes(*sum);  // [N * od, O, oh, ow]
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::Reshape,
             {{"self", *sum}, {"shape", std::vector<int64_t>{batch, od, ys[1], ys[2], ys[3]}}}));
  return n.emit(OpKind::Permute, {{"self", out}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}});
}

Result<ValueId> emit_conv_transpose3d(TorchNode& n, ValueId x, ValueId w,
                                      std::optional<ValueId> bias,
                                      const std::vector<int64_t>& stride,
                                      const std::vector<int64_t>& padding,
                                      const std::vector<int64_t>& dilation,
                                      const std::vector<int64_t>& output_padding, int64_t groups) {
  const std::vector<int64_t> xs = n.sizes(x), ws = n.sizes(w);
  if (xs.size() != 5 || ws.size() != 5)
    return n.invalid("a 3-D convolution takes input and weight of rank 5");
  if (stride.size() != 3 || padding.size() != 3 || dilation.size() != 3 ||
      output_padding.size() != 3) {
    return n.invalid("a 3-D convolution takes 3 strides, paddings, dilations and output paddings");
  }
  for (int i = 0; i < 3; ++i) {
    if (stride[i] <= 0 || dilation[i] <= 0 || padding[i] < 0 || output_padding[i] < 0) {
      return n.invalid(
          "stride and dilation must be positive and padding and output padding not negative");
    }
  }
  const int64_t batch = xs[0], depth = xs[2], kd = ws[2];
  // Input slice d, through kernel plane k, lands on output depth d * stride + k * dilation
  // (before the padding is cut from both ends and output_padding added at the end).
  const std::optional<int64_t> full_extent =
      transposed_window_extent(depth, kd, 0, stride[0], dilation[0], output_padding[0]);
  const std::optional<int64_t> extent =
      transposed_window_extent(depth, kd, padding[0], stride[0], dilation[0], output_padding[0]);
  if (!full_extent || !extent)
    return n.invalid("the transposed convolution's output depth overflows a 64-bit size");
  const int64_t full = *full_extent, out_depth = *extent;
  if (out_depth <= 0) return n.invalid("the transposed convolution's output depth is empty");
  ETC_ASSIGN_OR_RETURN(
      ValueId flat,
      n.emit(OpKind::Permute, {{"self", x}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  ETC_ASSIGN_OR_RETURN(
      flat, n.emit(OpKind::Reshape,
                   {{"self", flat},
                    {"shape", std::vector<int64_t>{batch * depth, xs[1], xs[3], xs[4]}}}));
  std::optional<ValueId> acc;
  for (int64_t k = 0; k < kd; ++k) {
    ETC_ASSIGN_OR_RETURN(
        ValueId plane, n.emit(OpKind::SelectInt, {{"self", w}, {"dim", int64_t{2}}, {"index", k}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId y,
        n.emit(OpKind::Convolution,
               {{"input", flat},
                {"weight", plane},
                {"bias", std::monostate{}},
                {"stride", std::vector<int64_t>{stride[1], stride[2]}},
                {"padding", std::vector<int64_t>{padding[1], padding[2]}},
                {"dilation", std::vector<int64_t>{dilation[1], dilation[2]}},
                {"transposed", true},
                {"output_padding", std::vector<int64_t>{output_padding[1], output_padding[2]}},
                {"groups", groups}}));
    const std::vector<int64_t> ys = n.sizes(y);  // [N * D, O, oh, ow]
    ETC_ASSIGN_OR_RETURN(
        y,
        n.emit(OpKind::Reshape,
               {{"self", y}, {"shape", std::vector<int64_t>{batch, depth, ys[1], ys[2], ys[3]}}}));
    if (!acc) {
      ETC_RETURN_IF_ERROR(check_known_size(n, {batch, full, ys[1], ys[2], ys[3]}));
      acc = n.constant(known_full(n.dtype(y), {batch, full, ys[1], ys[2], ys[3]}, 0.0));
    }
    std::vector<int64_t> at;
    for (int64_t d = 0; d < depth; ++d)
      at.push_back(d * stride[0] + k * dilation[0]);
    ETC_ASSIGN_OR_RETURN(
        acc, n.emit(OpKind::IndexPut,
                    {{"self", *acc},
                     {"indices", std::vector<ValueId>{ValueId{}, index_constant(n, {depth}, at)}},
                     {"values", y},
                     {"accumulate", true}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::SliceTensor, {{"self", *acc},
                                                                 {"dim", int64_t{1}},
                                                                 {"start", padding[0]},
                                                                 {"end", padding[0] + out_depth},
                                                                 {"step", int64_t{1}}}));
  ETC_ASSIGN_OR_RETURN(
      out, n.emit(OpKind::Permute, {{"self", out}, {"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}}));
  if (bias) {
    ETC_ASSIGN_OR_RETURN(
        ValueId b,
        n.emit(OpKind::Reshape, {{"self", *bias}, {"shape", std::vector<int64_t>{-1, 1, 1, 1}}}));
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::AddTensor, {{"self", out}, {"other", b}}));
  }
  return out;
}

}  // namespace etc::torch_import
