// ONNX normalisation and reductions -> IR: BatchNormalization (inference and training
// mode), LayerNormalization, Softmax and LogSoftmax (both axis rules), the Reduce* family,
// ArgMax/ArgMin, CumSum and TopK.
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

constexpr ArgValue kNone = std::monostate{};

// BatchNormalization with training_mode=1 (opset 14+): normalised by the batch's own
// mean and (biased) variance over every dim but C; outputs 1 and 2 are the running
// statistics moved towards them, mean * momentum + batch_mean * (1 - momentum).
Status batch_norm_training(NodeCtx& ctx, float eps, float momentum) {
  const int64_t r = ctx.rank(0);
  if (r < 2) return ctx.invalid("X must have rank 2 or more (N, C, ...)");
  const int64_t c = ctx.shape(0)[1];
  for (int i = 1; i < 5; ++i) {
    if (ctx.dtype(i) != ctx.dtype(0)) {
      return ctx.unsupported("scale, B, mean and var of a type other than X's");
    }
    if (ctx.shape(i) != std::vector<int64_t>{c}) {
      return ctx.invalid("input " + std::to_string(i) + " must have shape [C] = [" +
                         std::to_string(c) + "]");
    }
  }
  std::vector<int64_t> dims{0}, per_channel(static_cast<size_t>(r), 1);
  for (int64_t d = 2; d < r; ++d)
    dims.push_back(d);
  per_channel[1] = c;
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId mean,
                       ctx.emit(OpKind::MeanDim, {{"self", x}, {"dim", dims}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId var,
      ctx.emit(OpKind::VarCorrection,
               {{"self", x}, {"dim", dims}, {"correction", Scalar{0.0}}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(ValueId centred,
                       ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", mean}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId denom, ctx.emit(OpKind::AddScalar, {{"self", var}, {"other", Scalar{double(eps)}}}));
  ETC_ASSIGN_OR_RETURN(denom, ctx.emit(OpKind::Rsqrt, {{"self", denom}}));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::MulTensor, {{"self", centred}, {"other", denom}}));
  ETC_ASSIGN_OR_RETURN(ValueId scale, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(scale, reshape(ctx, scale, per_channel));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::MulTensor, {{"self", y}, {"other", scale}}));
  ETC_ASSIGN_OR_RETURN(ValueId bias, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(bias, reshape(ctx, bias, per_channel));
  ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddTensor, {{"self", y}, {"other", bias}}));
  ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  // running = running * momentum + batch * (1 - momentum)
  auto running = [&](int out, int in, ValueId batch) -> Status {
    if (!ctx.has_output(out)) return Status();
    ETC_ASSIGN_OR_RETURN(batch, reshape(ctx, batch, {c}));
    ETC_ASSIGN_OR_RETURN(ValueId old, ctx.input(in));
    ETC_ASSIGN_OR_RETURN(
        old, ctx.emit(OpKind::MulScalar, {{"self", old}, {"other", Scalar{double(momentum)}}}));
    ETC_ASSIGN_OR_RETURN(
        batch,
        ctx.emit(OpKind::MulScalar, {{"self", batch}, {"other", Scalar{1.0 - double(momentum)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId v, ctx.emit(OpKind::AddTensor, {{"self", old}, {"other", batch}}));
    return ctx.set_output(out, v);
  };
  ETC_RETURN_IF_ERROR(running(1, 3, mean));
  ETC_RETURN_IF_ERROR(running(2, 4, var));
  for (int i = 3; i < 5; ++i)
    ETC_RETURN_IF_ERROR(ctx.require_no_output(i, "saved statistics"));
  return Status();
}

Status convert_batch_norm(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(float eps, ctx.attr_float("epsilon", 1e-5f));
  ETC_ASSIGN_OR_RETURN(float momentum, ctx.attr_float("momentum", 0.9f));
  ETC_ASSIGN_OR_RETURN(int64_t training, ctx.attr_int("training_mode", 0));
  if (training) return batch_norm_training(ctx, eps, momentum);
  if (ctx.opset() < 9) {
    ETC_ASSIGN_OR_RETURN(int64_t spatial, ctx.attr_int("spatial", 1));
    if (!spatial) return ctx.unsupported("spatial=0");
  }
  for (int i = 1; i < 5; ++i)
    ETC_RETURN_IF_ERROR(ctx.require_no_output(i, "training statistics"));
  for (int i = 1; i < 5; ++i) {
    if (ctx.dtype(i) != ctx.dtype(0)) {
      return ctx.unsupported("scale, B, mean and var of a type other than X's");
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId scale, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(ValueId mean, ctx.input(3));
  ETC_ASSIGN_OR_RETURN(ValueId var, ctx.input(4));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::NativeBatchNormNoTraining, {{"input", x},
                                                              {"weight", scale},
                                                              {"bias", b},
                                                              {"running_mean", mean},
                                                              {"running_var", var},
                                                              {"momentum", double(1.0f - momentum)},
                                                              {"eps", double(eps)}}));
  return ctx.set_output(0, y);
}

Status convert_layer_norm(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", -1));
  ETC_ASSIGN_OR_RETURN(float eps, ctx.attr_float("epsilon", 1e-5f));
  ETC_ASSIGN_OR_RETURN(int64_t stash, ctx.attr_int("stash_type", 1));
  if (stash != 1) return ctx.unsupported("stash_type other than 1 (float)");
  const int64_t r = ctx.rank(0);
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  std::vector<int64_t> normalized(ctx.shape(0).begin() + axis, ctx.shape(0).end());
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ArgValue weight = kNone, bias = kNone;
  for (int i : {1, 2}) {
    if (!ctx.has_input(i)) continue;
    if (ctx.shape(i) != normalized) {
      return ctx.unsupported(std::string(i == 1 ? "Scale" : "B") + " of shape " +
                             shape_to_string(ctx.shape(i)) + " (only the normalized shape " +
                             shape_to_string(normalized) + ")");
    }
    ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
    (i == 1 ? weight : bias) = v;
  }
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::NativeLayerNorm, {{"input", x},
                                                          {"normalized_shape", normalized},
                                                          {"weight", weight},
                                                          {"bias", bias},
                                                          {"eps", double(eps)}}));
  // ATen's mean and rstd have ONNX's Mean and InvStdDev shapes (reduced dims kept as 1).
  std::vector<ValueId> outs = ctx.last_outputs();
  ETC_RETURN_IF_ERROR(ctx.set_output(1, outs[1]));
  ETC_RETURN_IF_ERROR(ctx.set_output(2, outs[2]));
  return ctx.set_output(0, y);
}

Converter softmax(bool log) {
  return [log](NodeCtx& ctx) -> Status {
    if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
    const int64_t r = ctx.rank(0);
    ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1));
    if (r == 0) return ctx.invalid("input must have rank 1 or more");
    ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
    axis = ctx.wrap_axis(axis, r);
    const OpKind op = log ? OpKind::LogSoftmax : OpKind::Softmax;
    ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
    ValueId y;
    if (ctx.opset() < 13 && axis != r - 1) {
      // Before opset 13 the input is viewed as a matrix [prod(dims < axis), prod(rest)].
      int64_t a = 1, b = 1;
      for (int64_t d = 0; d < r; ++d)
        (d < axis ? a : b) *= ctx.shape(0)[d];
      ETC_ASSIGN_OR_RETURN(ValueId x2, reshape(ctx, x, {a, b}));
      ETC_ASSIGN_OR_RETURN(
          ValueId y2, ctx.emit(op, {{"self", x2}, {"dim", int64_t{1}}, {"half_to_float", false}}));
      ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y2, ctx.shape(0)));
    } else {
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(op, {{"self", x}, {"dim", axis}, {"half_to_float", false}}));
    }
    return ctx.set_output(0, y);
  };
}

// ReduceL2 is sqrt(sum(x * x)) and ReduceSumSquare sum(x * x) (PyTorch exports the 2-norm,
// as in all-MiniLM-L6-v2's normalisation, as ReduceL2); ReduceL1 sum(|x|), ReduceLogSum
// log(sum(x)), ReduceLogSumExp m + log(sum(exp(x - m))) with m the maximum (kept finite).
enum class Reduce { kMean, kSum, kMax, kMin, kProd, kL2, kSumSquare, kL1, kLogSum, kLogSumExp };

Converter reduce(Reduce kind) {
  return [kind](NodeCtx& ctx) -> Status {
    // ReduceMax / Min / Prod keep integer dtypes; the sums and means of etc take floats.
    const bool any_dtype = kind == Reduce::kMax || kind == Reduce::kMin || kind == Reduce::kProd;
    if (!any_dtype && !dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
    if (ctx.dtype(0) == DType::kBool) return ctx.unsupported("bool inputs");
    const int64_t r = ctx.rank(0);
    ETC_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attr_int("keepdims", 1));
    ETC_ASSIGN_OR_RETURN(int64_t noop, ctx.attr_int("noop_with_empty_axes", 0));
    ETC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes,
                         axes_of(ctx, kind == Reduce::kSum ? 13 : 18));
    const bool squares = kind == Reduce::kL2 || kind == Reduce::kSumSquare;
    const bool summed =
        squares || kind == Reduce::kL1 || kind == Reduce::kLogSum || kind == Reduce::kLogSumExp;
    ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
    if (!axes || axes->empty()) {
      if (noop) {
        ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Clone, {{"self", x}}));
        return ctx.set_output(0, y);
      }
      axes = std::vector<int64_t>();
      for (int64_t d = 0; d < r; ++d)
        axes->push_back(d);
    }
    for (int64_t& a : *axes) {
      ETC_RETURN_IF_ERROR(ctx.check_axis(a, r, "axis"));
      a = ctx.wrap_axis(a, r);
    }
    if (r == 0) {
      if (summed) return ctx.unsupported("a rank-0 input");
      ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Clone, {{"self", x}}));
      return ctx.set_output(0, y);
    }
    if (kind == Reduce::kProd) {
      // One dim at a time, from the last (the dims before it keep their numbers), in the
      // input's dtype as ONNX keeps it.
      ValueId y = x;
      std::vector<int64_t> sorted = *axes;
      std::sort(sorted.rbegin(), sorted.rend());
      sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
      for (int64_t a : sorted) {
        ETC_ASSIGN_OR_RETURN(
            y, ctx.emit(
                   OpKind::ProdDimInt,
                   {{"self", y}, {"dim", a}, {"keepdim", keepdims != 0}, {"dtype", ctx.dtype(0)}}));
      }
      return ctx.set_output(0, y);
    }
    const OpKind op = kind == Reduce::kMean  ? OpKind::MeanDim
                      : kind == Reduce::kMax ? OpKind::Amax
                      : kind == Reduce::kMin ? OpKind::Amin
                                             : OpKind::SumDimIntList;
    if (squares) {
      ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", x}}));
    } else if (kind == Reduce::kL1) {
      ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::Abs, {{"self", x}}));
    }
    if (kind == Reduce::kLogSumExp) {
      // The maximum (0 where it is infinite, so that all -inf stays -inf) taken out before
      // exp and added back after log.
      ETC_ASSIGN_OR_RETURN(
          ValueId m, ctx.emit(OpKind::Amax, {{"self", x}, {"dim", *axes}, {"keepdim", true}}));
      ETC_ASSIGN_OR_RETURN(ValueId inf, ctx.emit(OpKind::Isinf, {{"self", m}}));
      ETC_ASSIGN_OR_RETURN(
          m, ctx.emit(OpKind::WhereSelf, {{"condition", inf},
                                          {"self", scalar_constant(ctx, ctx.dtype(0), 0)},
                                          {"other", m}}));
      ETC_ASSIGN_OR_RETURN(ValueId d, ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", m}}));
      ETC_ASSIGN_OR_RETURN(ValueId e, ctx.emit(OpKind::Exp, {{"self", d}}));
      ETC_ASSIGN_OR_RETURN(ValueId s, ctx.emit(OpKind::SumDimIntList,
                                               {{"self", e}, {"dim", *axes}, {"keepdim", true}}));
      ETC_ASSIGN_OR_RETURN(ValueId l, ctx.emit(OpKind::Log, {{"self", s}}));
      ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::AddTensor, {{"self", l}, {"other", m}}));
      if (!keepdims) {
        ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::SqueezeDims, {{"self", y}, {"dim", *axes}}));
      }
      return ctx.set_output(0, y);
    }
    ETC_ASSIGN_OR_RETURN(ValueId y,
                         ctx.emit(op, {{"self", x}, {"dim", *axes}, {"keepdim", keepdims != 0}}));
    if (kind == Reduce::kL2) {
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Sqrt, {{"self", y}}));
    } else if (kind == Reduce::kLogSum) {
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Log, {{"self", y}}));
    }
    return ctx.set_output(0, y);
  };
}

// ArgMax / ArgMin(axis=0, keepdims=1, select_last_index=0): int64 indices, the first of
// equal extremes; with select_last_index=1 the last: n - 1 - the first index in the input
// reversed along the axis.
Converter arg_extreme(OpKind op) {
  return [op](NodeCtx& ctx) -> Status {
    ETC_ASSIGN_OR_RETURN(int64_t last, ctx.attr_int("select_last_index", 0));
    const int64_t r = ctx.rank(0);
    ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
    ETC_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attr_int("keepdims", 1));
    ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r == 0 ? 1 : r, "axis"));
    axis = ctx.wrap_axis(axis, r == 0 ? 1 : r);
    ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
    const bool reversed = last != 0 && r > 0;
    const int64_t n = r > 0 ? ctx.shape(0)[static_cast<size_t>(axis)] : 1;
    if (reversed) {
      ETC_ASSIGN_OR_RETURN(x, flip(ctx, x, axis, n));
    }
    ETC_ASSIGN_OR_RETURN(ValueId y,
                         ctx.emit(op, {{"self", x}, {"dim", axis}, {"keepdim", keepdims != 0}}));
    if (reversed) {
      ETC_ASSIGN_OR_RETURN(
          y, ctx.emit(OpKind::MulScalar, {{"self", y}, {"other", Scalar{int64_t{-1}}}}));
      ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::AddScalar, {{"self", y}, {"other", Scalar{n - 1}}}));
    }
    return ctx.set_output(0, y);
  };
}

// CumSum(x, axis; exclusive, reverse), in x's dtype: reverse sums run on the input
// reversed along the axis (and reverse back); exclusive sums on the input shifted by one
// (a 0 padded in front, the last element dropped), so each sum is exact, not a difference.
Status convert_cumsum(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t exclusive, ctx.attr_int("exclusive", 0));
  ETC_ASSIGN_OR_RETURN(int64_t reverse, ctx.attr_int("reverse", 0));
  ETC_ASSIGN_OR_RETURN(const HostTensor* a, ctx.require_constant(1, "axis"));
  if (a->ints().size() != 1) return ctx.invalid("axis must hold one value");
  const int64_t r = ctx.rank(0);
  int64_t axis = a->ints()[0];
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r == 0 ? 1 : r, "axis"));
  axis = ctx.wrap_axis(axis, r == 0 ? 1 : r);
  if ((exclusive != 0 || reverse != 0) && r == 0)
    return ctx.unsupported("exclusive or reverse sums of a 0-d input");
  const int64_t n = r > 0 ? ctx.shape(0)[static_cast<size_t>(axis)] : 1;
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  if (reverse != 0) {
    ETC_ASSIGN_OR_RETURN(x, flip(ctx, x, axis, n));
  }
  if (exclusive != 0) {
    // constant_pad_nd's pads run from the last dim: (0, 0) for each dim after the axis.
    std::vector<int64_t> pad(static_cast<size_t>(2 * (r - 1 - axis)), 0);
    pad.insert(pad.end(), {1, 0});
    ETC_ASSIGN_OR_RETURN(
        x, ctx.emit(OpKind::ConstantPadNd,
                    {{"self", x}, {"pad", pad}, {"value", scalar_of(ctx.dtype(0), 0)}}));
    ETC_ASSIGN_OR_RETURN(
        x,
        ctx.emit(
            OpKind::SliceTensor,
            {{"self", x}, {"dim", axis}, {"start", int64_t{0}}, {"end", n}, {"step", int64_t{1}}}));
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::Cumsum, {{"self", x}, {"dim", axis}, {"dtype", ctx.dtype(0)}}));
  if (reverse != 0) {
    ETC_ASSIGN_OR_RETURN(y, flip(ctx, y, axis, n));
  }
  return ctx.set_output(0, y);
}

// TopK(x, k; axis=-1, largest=1, sorted=1): values and int64 indices, ties by index.
Status convert_topk(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* kt, ctx.require_constant(1, "K"));
  if (kt->ints().size() != 1) return ctx.invalid("K must hold one value");
  const int64_t r = ctx.rank(0);
  if (r == 0) return ctx.invalid("input must have rank 1 or more");
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", -1));
  ETC_ASSIGN_OR_RETURN(int64_t largest, ctx.attr_int("largest", 1));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Topk, {{"self", x},
                                                          {"k", kt->ints()[0]},
                                                          {"dim", ctx.wrap_axis(axis, r)},
                                                          {"largest", largest != 0},
                                                          {"sorted", true}}));
  ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  if (ctx.has_output(1)) ETC_RETURN_IF_ERROR(ctx.set_output(1, ctx.last_outputs()[1]));
  return Status();
}

}  // namespace

void add_norm_reduce_converters(std::map<std::string, Converter>& table) {
  table["BatchNormalization"] = convert_batch_norm;
  table["ReduceL1"] = reduce(Reduce::kL1);
  table["ReduceLogSum"] = reduce(Reduce::kLogSum);
  table["ReduceLogSumExp"] = reduce(Reduce::kLogSumExp);
  table["LayerNormalization"] = convert_layer_norm;
  table["LogSoftmax"] = softmax(true);
  table["ReduceL2"] = reduce(Reduce::kL2);
  table["ReduceMax"] = reduce(Reduce::kMax);
  table["ReduceMin"] = reduce(Reduce::kMin);
  table["ReduceProd"] = reduce(Reduce::kProd);
  table["ArgMax"] = arg_extreme(OpKind::Argmax);
  table["ArgMin"] = arg_extreme(OpKind::Argmin);
  table["CumSum"] = convert_cumsum;
  table["TopK"] = convert_topk;
  table["ReduceMean"] = reduce(Reduce::kMean);
  table["ReduceSum"] = reduce(Reduce::kSum);
  table["ReduceSumSquare"] = reduce(Reduce::kSumSquare);
  table["Softmax"] = softmax(false);
}

}  // namespace etc::onnx_import
