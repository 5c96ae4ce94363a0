// ONNX's ops whose output sizes depend on the data -> the IR's onnx:: ops of the same
// meaning: NonZero, NonMaxSuppression and Unique. Their outputs are planned at an upper
// bound and marked dynamic-bound; the kernels resize them. The importer takes such
// outputs only as graph outputs (no IR op consumes a size that is known only at run time).
#include <string>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

// A scalar (or one-element) input known at export time, as a double; `fallback` when the
// input is absent.
Result<double> scalar_param(NodeCtx& ctx, int i, const std::string& what, double fallback) {
  if (!ctx.has_input(i)) return fallback;
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(i, what));
  const std::vector<double> v = t->doubles();
  if (v.size() != 1)
    return ctx.invalid(what + " (input " + std::to_string(i) + ") must hold one value");
  return v[0];
}

}  // namespace

// NonZero(X) -> [rank, count] int64: the indices of X's non-zero elements, column by column.
Status convert_non_zero(NodeCtx& ctx) {
  if (ctx.rank(0) == 0) return ctx.unsupported("a 0-d input");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::OnnxNonZero, {{"self", x}}));
  ctx.mark_dynamic_bound(y);
  return ctx.set_output(0, y);
}

// NonMaxSuppression(boxes, scores, max_output_boxes_per_class?, iou_threshold?,
// score_threshold?; center_point_box) -> [count, 3] int64 (batch, class, box); the three
// parameters must be known at export time.
Status convert_non_max_suppression(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0)) || ctx.dtype(1) != ctx.dtype(0))
    return ctx.unsupported("boxes and scores must have one floating-point type");
  ETC_ASSIGN_OR_RETURN(double max_out, scalar_param(ctx, 2, "max_output_boxes_per_class", 0));
  ETC_ASSIGN_OR_RETURN(double iou, scalar_param(ctx, 3, "iou_threshold", 0));
  ArgValue score = std::monostate{};
  if (ctx.has_input(4)) {
    ETC_ASSIGN_OR_RETURN(double s, scalar_param(ctx, 4, "score_threshold", 0));
    score = s;
  }
  ETC_ASSIGN_OR_RETURN(int64_t center, ctx.attr_int("center_point_box", 0));
  if (center != 0 && center != 1) return ctx.invalid("center_point_box must be 0 or 1");
  if (max_out < 0) return ctx.invalid("max_output_boxes_per_class must not be negative");
  ETC_ASSIGN_OR_RETURN(ValueId boxes, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId scores, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::OnnxNonMaxSuppression,
                                {{"boxes", boxes},
                                 {"scores", scores},
                                 {"max_output_boxes_per_class", static_cast<int64_t>(max_out)},
                                 {"iou_threshold", iou},
                                 {"score_threshold", score},
                                 {"center_point_box", center != 0}}));
  ctx.mark_dynamic_bound(y);
  return ctx.set_output(0, y);
}

// Unique(X; axis?, sorted=1) -> Y, indices, inverse_indices, counts.
Status convert_unique(NodeCtx& ctx) {
  ArgValue axis = std::monostate{};
  if (ctx.attr("axis")) {
    ETC_ASSIGN_OR_RETURN(int64_t a, ctx.attr_int("axis", std::nullopt));
    ETC_RETURN_IF_ERROR(ctx.check_axis(a, ctx.rank(0), "axis"));
    axis = ctx.wrap_axis(a, ctx.rank(0));
  }
  ETC_ASSIGN_OR_RETURN(int64_t sorted, ctx.attr_int("sorted", 1));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::OnnxUnique,
                                           {{"self", x}, {"axis", axis}, {"sorted", sorted != 0}}));
  const std::vector<ValueId> outs = ctx.last_outputs();
  for (int i = 0; i < 4; ++i) {
    if (i != 2) ctx.mark_dynamic_bound(outs[static_cast<size_t>(i)]);
    ETC_RETURN_IF_ERROR(ctx.set_output(i, outs[static_cast<size_t>(i)]));
  }
  (void)y;
  return Status();
}

}  // namespace etc::onnx_import
