// ONNX's shape and layout ops: Reshape, Flatten, Squeeze and Unsqueeze (views), Transpose,
// Concat, Split, Slice, Gather, Expand and Pad, as IR ops (or evaluated at export time where
// every input is known then).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"
#include "frontends/onnx/onnx_shapes.h"

namespace etc::onnx_import {
namespace {

using Args = std::initializer_list<std::pair<std::string_view, ArgValue>>;

// ---- Shape and layout ---------------------------------------------------------------------

Status convert_view(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, view_shape(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, reshape(ctx, x, shape));
  return ctx.set_output(0, y);
}

Status convert_transpose(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transpose_perm(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, permute(ctx, x, perm));
  return ctx.set_output(0, y);
}

Status convert_concat(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", std::nullopt));
  std::vector<ValueId> parts;
  int first = -1;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (first < 0) first = i;
    ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
    parts.push_back(v);
  }
  if (parts.empty()) return ctx.invalid("needs at least one input");
  const int64_t r = ctx.rank(first);
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::Cat, {{"tensors", parts}, {"dim", ctx.wrap_axis(axis, r)}}));
  return ctx.set_output(0, y);
}

Status convert_split(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  const int64_t dim = ctx.shape(0)[axis];
  std::vector<int64_t> split;
  if (ctx.opset() < 13) {
    ETC_ASSIGN_OR_RETURN(split, ctx.attr_ints("split", std::vector<int64_t>{}));
  } else if (ctx.has_input(1)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "split"));
    split = t->ints();
  }
  const int64_t n = ctx.num_outputs();
  if (split.empty() && ctx.opset() >= 18) {
    // Opset 18: num_outputs parts of ceil(dim / n), the last one smaller if need be.
    ETC_ASSIGN_OR_RETURN(int64_t parts, ctx.attr_int("num_outputs", n));
    if (parts != n || n <= 0 || dim < n) {
      return ctx.invalid("num_outputs " + std::to_string(parts) + " does not match the node's " +
                         std::to_string(n) + " outputs for dim " + std::to_string(axis) +
                         " of size " + std::to_string(dim));
    }
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i)
      split.push_back(std::min(chunk, dim - i * chunk));
    if (split.back() <= 0) {
      return ctx.invalid("dim " + std::to_string(axis) + " of size " + std::to_string(dim) +
                         " does not split into " + std::to_string(n) + " non-empty parts");
    }
  }
  if (split.empty()) {
    if (n == 0 || dim % n != 0) {
      return ctx.invalid("dim " + std::to_string(axis) + " of size " + std::to_string(dim) +
                         " does not split into " + std::to_string(n) + " equal parts");
    }
    split.assign(static_cast<size_t>(n), dim / n);
  }
  if (static_cast<int64_t>(split.size()) != n) {
    return ctx.invalid("split has " + std::to_string(split.size()) + " entries for " +
                       std::to_string(n) + " outputs");
  }
  if (std::accumulate(split.begin(), split.end(), int64_t{0}) != dim ||
      std::any_of(split.begin(), split.end(), [](int64_t v) { return v < 0; })) {
    return ctx.invalid("split " + shape_to_string(split) + " does not add up to dim " +
                       std::to_string(axis) + " of size " + std::to_string(dim));
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  int64_t start = 0;
  for (int i = 0; i < n; ++i) {
    ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::SliceTensor, {{"self", x},
                                                                   {"dim", axis},
                                                                   {"start", start},
                                                                   {"end", start + split[i]},
                                                                   {"step", int64_t{1}}}));
    ETC_RETURN_IF_ERROR(ctx.set_output(i, y));
    start += split[i];
  }
  return Status();
}

Status convert_slice(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(std::vector<SliceAxis> axes, slice_axes(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.input(0));
  bool any = false;
  for (const SliceAxis& a : axes) {
    const int64_t dim = ctx.shape(0)[a.axis];
    if (a.step < 0) {
      // ATen's slice steps forward only: the positions taken, as a constant index.
      std::vector<int64_t> idx(static_cast<size_t>(a.length));
      for (int64_t i = 0; i < a.length; ++i)
        idx[static_cast<size_t>(i)] = a.start + i * a.step;
      std::vector<ValueId> indices(static_cast<size_t>(a.axis));
      indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {a.length}, idx)));
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::IndexTensor, {{"self", y}, {"indices", indices}}));
      any = true;
      continue;
    }
    if (a.start == 0 && a.step == 1 && a.length == dim) continue;
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::SliceTensor, {{"self", y},
                                                           {"dim", a.axis},
                                                           {"start", a.start},
                                                           {"end", a.start + a.length * a.step},
                                                           {"step", a.step}}));
    any = true;
  }
  if (!any) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Clone, {{"self", y}}));
  }
  return ctx.set_output(0, y);
}

// Gather with indices known only at run time (token ids into an embedding table): index.Tensor
// with the indices at `axis` — ONNX's Gather is exactly that advanced indexing, negative
// indices included.
Status gather_at_run_time(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
  if (r == 0) return ctx.invalid("cannot gather from a 0-d tensor");
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  if (ctx.dtype(1) != DType::kInt64 && ctx.dtype(1) != DType::kInt32)
    return ctx.invalid("indices must be int64 or int32");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  std::vector<ValueId> indices(static_cast<size_t>(axis));
  indices.push_back(idx);
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return ctx.set_output(0, y);
}

Status convert_gather(NodeCtx& ctx) {
  if (ctx.constant(1) == nullptr) return gather_at_run_time(ctx);
  ETC_ASSIGN_OR_RETURN(GatherPlan plan, gather_plan(ctx));
  const std::vector<int64_t> in = ctx.shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  if (plan.indices_shape.empty()) {
    ETC_ASSIGN_OR_RETURN(
        y,
        ctx.emit(OpKind::SelectInt, {{"self", x}, {"dim", plan.axis}, {"index", plan.indices[0]}}));
    return ctx.set_output(0, y);
  }
  // Contiguous 1-d indices are a slice.
  bool range = plan.indices_shape.size() == 1 && !plan.indices.empty();
  for (size_t i = 1; range && i < plan.indices.size(); ++i)
    range = plan.indices[i] == plan.indices[i - 1] + 1;
  if (range) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::SliceTensor, {{"self", x},
                                                           {"dim", plan.axis},
                                                           {"start", plan.indices.front()},
                                                           {"end", plan.indices.back() + 1},
                                                           {"step", int64_t{1}}}));
    return ctx.set_output(0, y);
  }
  // General case: move the axis first, view as rows, embedding, and move the index dims back.
  std::vector<int64_t> perm{plan.axis};
  std::vector<int64_t> rest_shape;
  for (int64_t d = 0; d < r; ++d) {
    if (d != plan.axis) {
      perm.push_back(d);
      rest_shape.push_back(in[d]);
    }
  }
  int64_t rest = 1;
  for (int64_t d : rest_shape)
    rest *= d;
  ValueId rows = x;
  if (plan.axis != 0) {
    ETC_ASSIGN_OR_RETURN(rows, permute(ctx, x, perm));
  }
  ETC_ASSIGN_OR_RETURN(rows, reshape(ctx, rows, {in[plan.axis], rest}));
  ValueId idx = ctx.add_constant(host_from_ints(DType::kInt64, plan.indices_shape, plan.indices));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Embedding, {{"weight", rows}, {"indices", idx}}));
  std::vector<int64_t> shape = plan.indices_shape;
  shape.insert(shape.end(), rest_shape.begin(), rest_shape.end());
  ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, shape));
  if (plan.axis != 0) {
    // [idx..., before..., after...] -> [before..., idx..., after...]
    const int64_t q = static_cast<int64_t>(plan.indices_shape.size());
    std::vector<int64_t> back;
    for (int64_t d = 0; d < plan.axis; ++d)
      back.push_back(q + d);
    for (int64_t d = 0; d < q; ++d)
      back.push_back(d);
    for (int64_t d = q + plan.axis; d < static_cast<int64_t>(shape.size()); ++d)
      back.push_back(d);
    ETC_ASSIGN_OR_RETURN(y, permute(ctx, y, back));
  }
  return ctx.set_output(0, y);
}

Status convert_expand(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, expand_shape(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ValueId y;
  if (shape == ctx.shape(0)) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Clone, {{"self", x}}));
  } else {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Expand, {{"self", x}, {"size", shape}}));
  }
  return ctx.set_output(0, y);
}

// Reflect and edge padding, one dim at a time: the border elements are gathered with a
// constant index (index.Tensor; reflect: x[p], ..., x[1] before and x[n-2], ... after; edge:
// x[0] and x[n-1] repeated) and concatenated around the input.
Status pad_by_gathering(NodeCtx& ctx, const std::vector<int64_t>& pads, bool reflect) {
  const int64_t r = ctx.rank(0);
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  std::vector<int64_t> shape = ctx.shape(0);
  for (int64_t d = 0; d < r; ++d) {
    const int64_t before = pads[static_cast<size_t>(d)], after = pads[static_cast<size_t>(r + d)];
    if (before == 0 && after == 0) continue;
    const int64_t n = shape[static_cast<size_t>(d)];
    if (before < 0 || after < 0) return ctx.unsupported("negative pads with a non-constant mode");
    if (reflect ? (before >= n || after >= n) : n == 0) {
      return ctx.invalid("pads " + std::to_string(before) + ", " + std::to_string(after) +
                         " are too large for dim " + std::to_string(d) + " of size " +
                         std::to_string(n) + (reflect ? " (reflect needs pads < size)" : ""));
    }
    std::vector<ValueId> parts;
    auto gather = [&](std::vector<int64_t> idx) -> Status {
      std::vector<ValueId> indices(static_cast<size_t>(d));
      const auto count = static_cast<int64_t>(idx.size());
      indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {count}, idx)));
      ETC_ASSIGN_OR_RETURN(ValueId g,
                           ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
      // index.Tensor puts the indexed dim where it was (one index): the part lines up.
      parts.push_back(g);
      return Status();
    };
    std::vector<int64_t> idx;
    for (int64_t k = before; k >= 1; --k)
      idx.push_back(reflect ? k : 0);
    if (!idx.empty()) ETC_RETURN_IF_ERROR(gather(idx));
    parts.push_back(x);
    idx.clear();
    for (int64_t k = 1; k <= after; ++k)
      idx.push_back(reflect ? n - 1 - k : n - 1);
    if (!idx.empty()) ETC_RETURN_IF_ERROR(gather(idx));
    ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::Cat, {{"tensors", parts}, {"dim", d}}));
    shape[static_cast<size_t>(d)] = n + before + after;
  }
  return ctx.set_output(0, x);
}

Status convert_pad(NodeCtx& ctx) {
  Result<std::string> mode = ctx.attr_string("mode", "constant");
  if (!mode.ok()) return mode.status();
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge")
    return ctx.unsupported("mode '" + *mode + "' (only 'constant', 'reflect' and 'edge')");
  const int64_t r = ctx.rank(0);
  std::vector<int64_t> pads;
  double value = 0;
  if (ctx.opset() < 11) {
    ETC_ASSIGN_OR_RETURN(pads, ctx.attr_ints(ctx.opset() < 2 ? "paddings" : "pads", std::nullopt));
    ETC_ASSIGN_OR_RETURN(float v, ctx.attr_float("value", 0.0f));
    value = v;
  } else {
    ETC_ASSIGN_OR_RETURN(const HostTensor* p, ctx.require_constant(1, "pads"));
    pads = p->ints();
    if (ctx.has_input(2)) {
      ETC_ASSIGN_OR_RETURN(const HostTensor* v, ctx.require_constant(2, "constant_value"));
      if (v->numel() != 1) return ctx.invalid("constant_value must hold one value");
      value = v->doubles()[0];
    }
    if (ctx.has_input(3)) {
      // Opset 18: pads holds (begin..., end...) for these axes only; the others get 0.
      ETC_ASSIGN_OR_RETURN(const HostTensor* a, ctx.require_constant(3, "axes"));
      std::vector<int64_t> axes = a->ints();
      if (pads.size() != 2 * axes.size()) {
        return ctx.invalid("pads has " + std::to_string(pads.size()) + " entries for " +
                           std::to_string(axes.size()) + " axes");
      }
      std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        ETC_RETURN_IF_ERROR(ctx.check_axis(axes[i], r, "axes"));
        const int64_t d = ctx.wrap_axis(axes[i], r);
        full[static_cast<size_t>(d)] = pads[i];
        full[static_cast<size_t>(r + d)] = pads[axes.size() + i];
      }
      pads = std::move(full);
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * r) {
    return ctx.invalid("pads has " + std::to_string(pads.size()) + " entries, rank " +
                       std::to_string(r) + " needs " + std::to_string(2 * r));
  }
  if (*mode != "constant") return pad_by_gathering(ctx, pads, *mode == "reflect");
  // ONNX: [x1_begin, x2_begin, ..., x1_end, ...]; ATen: last dim first, (begin, end) pairs.
  std::vector<int64_t> aten;
  for (int64_t d = r; d-- > 0;) {
    aten.push_back(pads[d]);
    aten.push_back(pads[r + d]);
  }
  while (aten.size() > 2 && aten[aten.size() - 1] == 0 && aten[aten.size() - 2] == 0)
    aten.resize(aten.size() - 2);
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::ConstantPadNd,
                          {{"self", x}, {"pad", aten}, {"value", scalar_of(ctx.dtype(0), value)}}));
  return ctx.set_output(0, y);
}

// Gelu (opset 20): approximate 'none' (erf) or 'tanh', as ATen's gelu.
}  // namespace

void add_layout_converters(std::map<std::string, Converter>& table) {
  table["Concat"] = convert_concat;
  table["Expand"] = convert_expand;
  table["Flatten"] = convert_view;
  table["Gather"] = convert_gather;
  table["Pad"] = convert_pad;
  table["Reshape"] = convert_view;
  table["Slice"] = convert_slice;
  table["Split"] = convert_split;
  table["Squeeze"] = convert_view;
  table["Transpose"] = convert_transpose;
  table["Unsqueeze"] = convert_view;
}

}  // namespace etc::onnx_import
