// ONNX's losses -> IR: NegativeLogLikelihoodLoss picks input[n, target[n, d...], d...] with
// index.Tensor (aranges for n and the d dims), weights it (weight[target], zero where the
// target is ignore_index) and reduces; SoftmaxCrossEntropyLoss is the same after
// _log_softmax over the classes.
#include <string>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

// NLL of log-probabilities `input` [N, C, d...] (shape `shape`) at class `target_input`.
Result<ValueId> nll(NodeCtx& ctx, ValueId input, const std::vector<int64_t>& shape,
                    int target_input, int weight_input) {
  const DType dt = ctx.dtype(0);
  if (!dtype_is_float(dt)) return ctx.unsupported("integer inputs");
  const auto r = static_cast<int64_t>(shape.size());
  if (r < 2) return ctx.invalid("input must have rank 2 or more ([N, C, d...])");
  std::vector<int64_t> tshape = shape;
  tshape.erase(tshape.begin() + 1);
  if (ctx.shape(target_input) != tshape) {
    return ctx.invalid("target " + shape_to_string(ctx.shape(target_input)) + " must have shape " +
                       shape_to_string(tshape) + " for input " + shape_to_string(shape));
  }
  if (ctx.dtype(target_input) != DType::kInt64 && ctx.dtype(target_input) != DType::kInt32)
    return ctx.invalid("target must be int64 or int32");
  const bool weighted = ctx.has_input(weight_input);
  if (weighted && (ctx.shape(weight_input) != std::vector<int64_t>{shape[1]} ||
                   ctx.dtype(weight_input) != dt)) {
    return ctx.invalid("weight must have shape [C] and the input's type");
  }
  Result<std::string> red = ctx.attr_string("reduction", "mean");
  if (!red.ok()) return red.status();
  const std::string reduction = *red;
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.invalid("reduction must be 'none', 'sum' or 'mean', got '" + reduction + "'");
  ETC_ASSIGN_OR_RETURN(ValueId target, ctx.input(target_input));
  std::optional<ValueId> keep;  // bool: target != ignore_index
  if (ctx.attr("ignore_index")) {
    ETC_ASSIGN_OR_RETURN(int64_t ignore, ctx.attr_int("ignore_index", std::nullopt));
    ETC_ASSIGN_OR_RETURN(keep,
                         ctx.emit(OpKind::NeScalar, {{"self", target}, {"other", Scalar{ignore}}}));
    // Ignored targets pick class 0 (then weigh nothing), so every index is in range.
    ETC_ASSIGN_OR_RETURN(
        target,
        ctx.emit(OpKind::WhereSelf, {{"condition", *keep},
                                     {"self", target},
                                     {"other", scalar_constant(ctx, ctx.dtype(target_input), 0)}}));
  }
  std::vector<ValueId> indices;
  for (int64_t d = 0; d < r; ++d) {
    if (d == 1) {
      indices.push_back(target);
    } else {
      const int64_t td = d == 0 ? 0 : d - 1;
      indices.push_back(arange_along(ctx, shape[static_cast<size_t>(d)], td, r - 1));
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId picked,
                       ctx.emit(OpKind::IndexTensor, {{"self", input}, {"indices", indices}}));
  ETC_ASSIGN_OR_RETURN(ValueId loss, ctx.emit(OpKind::Neg, {{"self", picked}}));
  std::optional<ValueId> w;
  if (weighted) {
    ETC_ASSIGN_OR_RETURN(ValueId weight, ctx.input(weight_input));
    std::vector<ValueId> by_class{target};
    ETC_ASSIGN_OR_RETURN(w,
                         ctx.emit(OpKind::IndexTensor, {{"self", weight}, {"indices", by_class}}));
  }
  if (keep) {
    ETC_ASSIGN_OR_RETURN(ValueId k, ctx.emit(OpKind::ToCopy, {{"self", *keep}, {"dtype", dt}}));
    if (w) {
      ETC_ASSIGN_OR_RETURN(w, ctx.emit(OpKind::MulTensor, {{"self", *w}, {"other", k}}));
    } else {
      w = k;
    }
  }
  if (w) {
    ETC_ASSIGN_OR_RETURN(loss, ctx.emit(OpKind::MulTensor, {{"self", loss}, {"other", *w}}));
  }
  if (reduction == "none") return loss;
  std::vector<int64_t> all(static_cast<size_t>(r - 1));
  for (int64_t d = 0; d < r - 1; ++d)
    all[static_cast<size_t>(d)] = d;
  if (reduction == "mean" && !w) {
    return ctx.emit(OpKind::MeanDim, {{"self", loss}, {"dim", all}, {"keepdim", false}});
  }
  ETC_ASSIGN_OR_RETURN(ValueId total, ctx.emit(OpKind::SumDimIntList,
                                               {{"self", loss}, {"dim", all}, {"keepdim", false}}));
  if (reduction == "sum") return total;
  // The weighted mean: divided by the weights taken (ignored targets weigh 0).
  ETC_ASSIGN_OR_RETURN(ValueId wsum, ctx.emit(OpKind::SumDimIntList,
                                              {{"self", *w}, {"dim", all}, {"keepdim", false}}));
  return ctx.emit(OpKind::DivTensor, {{"self", total}, {"other", wsum}});
}

}  // namespace

// NegativeLogLikelihoodLoss(input, target, weight?; ignore_index, reduction).
Status convert_nll_loss(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, nll(ctx, x, ctx.shape(0), 1, 2));
  return ctx.set_output(0, y);
}

// SoftmaxCrossEntropyLoss(scores, labels, weights?; ignore_index, reduction): outputs the
// loss and, when asked, the log-probabilities.
Status convert_softmax_cross_entropy(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  if (ctx.rank(0) < 2) return ctx.invalid("scores must have rank 2 or more ([N, C, d...])");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(
      ValueId log_prob,
      ctx.emit(OpKind::LogSoftmax, {{"self", x}, {"dim", int64_t{1}}, {"half_to_float", false}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, nll(ctx, log_prob, ctx.shape(0), 1, 2));
  ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  if (ctx.has_output(1)) ETC_RETURN_IF_ERROR(ctx.set_output(1, log_prob));
  return Status();
}

}  // namespace etc::onnx_import
