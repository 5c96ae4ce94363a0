#include "frontends/onnx/onnx_shapes.h"

#include <algorithm>
#include <set>

namespace etc::onnx_import {

Result<std::optional<std::vector<int64_t>>> axes_of(NodeCtx& ctx, int64_t input_since_opset) {
  if (ctx.opset() < input_since_opset) {
    if (ctx.attr("axes") == nullptr) return std::optional<std::vector<int64_t>>();
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attr_ints("axes", std::nullopt));
    return std::optional<std::vector<int64_t>>(std::move(axes));
  }
  if (!ctx.has_input(1)) return std::optional<std::vector<int64_t>>();
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "axes"));
  return std::optional<std::vector<int64_t>>(t->ints());
}

namespace {

Result<std::vector<int64_t>> normalized_axes(NodeCtx& ctx, std::vector<int64_t> axes,
                                             int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t& a : axes) {
    ETC_RETURN_IF_ERROR(ctx.check_axis(a, rank, "axis"));
    a = ctx.wrap_axis(a, rank);
    if (!seen.insert(a).second) return ctx.invalid("axis " + std::to_string(a) + " is repeated");
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

}  // namespace

Result<std::vector<int64_t>> view_shape(NodeCtx& ctx) {
  const std::vector<int64_t>& in = ctx.shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  const std::string& op = ctx.op_type();
  if (op == "Reshape") {
    std::vector<int64_t> target;
    if (ctx.opset() < 5) {
      ETC_ASSIGN_OR_RETURN(target, ctx.attr_ints("shape", std::nullopt));
    } else {
      ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "the target shape"));
      target = t->ints();
    }
    ETC_ASSIGN_OR_RETURN(int64_t allowzero, ctx.attr_int("allowzero", 0));
    int64_t known = 1, infer_at = -1;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == 0 && allowzero == 0) {
        if (static_cast<int64_t>(i) >= r) {
          return ctx.invalid("target shape " + shape_to_string(target) + " copies dim " +
                             std::to_string(i) + " of a rank-" + std::to_string(r) + " input");
        }
        target[i] = in[i];
      }
      if (target[i] == -1) {
        if (infer_at >= 0) return ctx.invalid("target shape has more than one -1");
        infer_at = static_cast<int64_t>(i);
      } else if (target[i] < 0) {
        return ctx.invalid("invalid dim " + std::to_string(target[i]) + " in target shape");
      } else {
        known *= target[i];
      }
    }
    int64_t numel = 1;
    for (int64_t d : in)
      numel *= d;
    if (infer_at >= 0) {
      if (known == 0 || numel % known != 0) {
        return ctx.invalid("cannot reshape " + shape_to_string(in) + " to " +
                           shape_to_string(target));
      }
      target[infer_at] = numel / known;
    } else if (known != numel) {
      return ctx.invalid("cannot reshape " + shape_to_string(in) + " (" + std::to_string(numel) +
                         " elements) to " + shape_to_string(target));
    }
    return target;
  }
  if (op == "Flatten") {
    ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 1));
    if (axis < -r || axis > r) {
      return ctx.invalid("axis " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(r));
    }
    if (axis < 0) axis += r;
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d)
      (d < axis ? a : b) *= in[d];
    return std::vector<int64_t>{a, b};
  }
  if (op == "Squeeze") {
    ETC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_of(ctx, 13));
    std::vector<int64_t> out;
    if (!axes) {
      for (int64_t d : in) {
        if (d != 1) out.push_back(d);
      }
      return out;
    }
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> ax, normalized_axes(ctx, *axes, r));
    for (int64_t d = 0; d < r; ++d) {
      if (std::binary_search(ax.begin(), ax.end(), d)) {
        if (in[d] != 1) {
          return ctx.invalid("cannot squeeze dim " + std::to_string(d) + " of size " +
                             std::to_string(in[d]));
        }
      } else {
        out.push_back(in[d]);
      }
    }
    return out;
  }
  if (op == "Unsqueeze") {
    ETC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_of(ctx, 13));
    if (!axes) return ctx.invalid("axes are required");
    const int64_t out_rank = r + static_cast<int64_t>(axes->size());
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> ax, normalized_axes(ctx, *axes, out_rank));
    std::vector<int64_t> out;
    size_t k = 0;
    for (int64_t d = 0; d < out_rank; ++d) {
      if (std::binary_search(ax.begin(), ax.end(), d)) {
        out.push_back(1);
      } else {
        out.push_back(in[k++]);
      }
    }
    return out;
  }
  return internal_error("view_shape: unexpected op " + op);
}

Result<GatherPlan> gather_plan(NodeCtx& ctx) {
  GatherPlan plan;
  const std::vector<int64_t>& in = ctx.shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
  if (r == 0) return ctx.invalid("cannot gather from a 0-d tensor");
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  plan.axis = ctx.wrap_axis(axis, r);
  ETC_ASSIGN_OR_RETURN(const HostTensor* idx, ctx.require_constant(1, "indices"));
  if (dtype_is_float(idx->dtype)) return ctx.invalid("indices must be integers");
  plan.indices = idx->ints();
  plan.indices_shape = idx->shape;
  const int64_t n = in[plan.axis];
  for (int64_t& k : plan.indices) {
    if (k < -n || k >= n) {
      return ctx.invalid("index " + std::to_string(k) + " is out of range for dim " +
                         std::to_string(plan.axis) + " of size " + std::to_string(n));
    }
    if (k < 0) k += n;
  }
  plan.out_shape.assign(in.begin(), in.begin() + plan.axis);
  plan.out_shape.insert(plan.out_shape.end(), idx->shape.begin(), idx->shape.end());
  plan.out_shape.insert(plan.out_shape.end(), in.begin() + plan.axis + 1, in.end());
  return plan;
}

Result<std::vector<SliceAxis>> slice_axes(NodeCtx& ctx) {
  const std::vector<int64_t>& in = ctx.shape(0);
  const int64_t r = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    ETC_ASSIGN_OR_RETURN(starts, ctx.attr_ints("starts", std::nullopt));
    ETC_ASSIGN_OR_RETURN(ends, ctx.attr_ints("ends", std::nullopt));
    ETC_ASSIGN_OR_RETURN(axes, ctx.attr_ints("axes", std::vector<int64_t>{}));
  } else {
    ETC_ASSIGN_OR_RETURN(const HostTensor* s, ctx.require_constant(1, "starts"));
    ETC_ASSIGN_OR_RETURN(const HostTensor* e, ctx.require_constant(2, "ends"));
    starts = s->ints();
    ends = e->ints();
    if (ctx.has_input(3)) {
      ETC_ASSIGN_OR_RETURN(const HostTensor* a, ctx.require_constant(3, "axes"));
      axes = a->ints();
    }
    if (ctx.has_input(4)) {
      ETC_ASSIGN_OR_RETURN(const HostTensor* st, ctx.require_constant(4, "steps"));
      steps = st->ints();
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() ||
      steps.size() != starts.size()) {
    return ctx.invalid("starts, ends, axes and steps must have the same length");
  }
  std::vector<SliceAxis> out;
  std::set<int64_t> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    ETC_RETURN_IF_ERROR(ctx.check_axis(axes[i], r, "axis"));
    const int64_t a = ctx.wrap_axis(axes[i], r);
    if (!seen.insert(a).second) return ctx.invalid("axis " + std::to_string(a) + " is repeated");
    const int64_t dim = in[a], step = steps[i];
    if (step == 0) return ctx.invalid("step must not be zero");
    int64_t s = starts[i], e = ends[i];
    // Saturate large magnitudes first (INT64_MAX is the usual "to the end").
    s = std::clamp<int64_t>(s, -(int64_t{1} << 62), int64_t{1} << 62);
    e = std::clamp<int64_t>(e, -(int64_t{1} << 62), int64_t{1} << 62);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t len;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      len = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      len = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    out.push_back(SliceAxis{a, s, step, len});
  }
  return out;
}

Result<std::vector<int64_t>> transpose_perm(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  std::vector<int64_t> rev;
  for (int64_t d = r - 1; d >= 0; --d)
    rev.push_back(d);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.attr_ints("perm", rev));
  if (static_cast<int64_t>(perm.size()) != r) {
    return ctx.invalid("perm " + shape_to_string(perm) + " does not fit rank " + std::to_string(r));
  }
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (int64_t& p : perm) {
    ETC_RETURN_IF_ERROR(ctx.check_axis(p, r, "perm entry"));
    p = ctx.wrap_axis(p, r);
    if (seen[p]) return ctx.invalid("perm " + shape_to_string(perm) + " is not a permutation");
    seen[p] = true;
  }
  return perm;
}

Result<std::vector<int64_t>> expand_shape(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "the shape"));
  std::vector<int64_t> target = t->ints();
  for (int64_t d : target) {
    if (d < 0) return ctx.invalid("negative dim in shape " + shape_to_string(target));
  }
  std::optional<std::vector<int64_t>> out = broadcast_shapes(ctx.shape(0), target);
  if (!out) {
    return ctx.invalid("input " + shape_to_string(ctx.shape(0)) + " does not broadcast with " +
                       shape_to_string(target));
  }
  return *out;
}

}  // namespace etc::onnx_import
