// ONNX's ai.onnx.preview.training optimizers -> IR: one update step of Adagrad, Adam and
// Momentum (standard or Nesterov) for each optimized tensor, elementwise, following ONNX's
// reference. R (learning rate) and T (update count) are 0-d run-time tensors; the bias
// corrections that depend on T > 0 are selected with where.
#include <string>
#include <vector>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

// An optimizer node's inputs R, T, then `per_tensor` groups of n tensors (X..., G..., ...)
// and its `outputs_per_tensor` groups of n outputs.
struct Optimizer {
  int64_t n = 0;
  DType dtype = DType::kFloat32;
  ValueId r;      // R in the tensors' dtype
  ValueId t;      // T in the tensors' dtype
  ValueId t_pos;  // T > 0 (bool)
};

Result<Optimizer> optimizer_inputs(NodeCtx& ctx, int per_tensor, int outputs_per_tensor) {
  Optimizer o;
  const int tensors = ctx.num_inputs() - 2;
  if (tensors < per_tensor || tensors % per_tensor != 0) {
    return ctx.invalid("expects R, T and " + std::to_string(per_tensor) +
                       " inputs per optimized tensor, got " + std::to_string(ctx.num_inputs()) +
                       " inputs");
  }
  o.n = tensors / per_tensor;
  if (ctx.num_outputs() != outputs_per_tensor * o.n) {
    return ctx.invalid("expects " + std::to_string(outputs_per_tensor * o.n) + " outputs for " +
                       std::to_string(o.n) + " optimized tensor(s), got " +
                       std::to_string(ctx.num_outputs()));
  }
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.missing_input_error(i);
  }
  if (!dtype_is_float(ctx.dtype(0)) || ctx.rank(0) != 0)
    return ctx.invalid("R must be a floating-point scalar");
  if (ctx.dtype(1) != DType::kInt64 || ctx.rank(1) != 0)
    return ctx.invalid("T must be an int64 scalar");
  o.dtype = ctx.dtype(2);
  if (o.dtype != DType::kFloat32 && o.dtype != DType::kFloat64)
    return ctx.unsupported("optimized tensors of type " + std::string(dtype_name(o.dtype)));
  for (int64_t k = 0; k < o.n; ++k) {
    for (int g = 0; g < per_tensor; ++g) {
      const int i = 2 + static_cast<int>(g * o.n + k);
      if (ctx.dtype(i) != o.dtype || ctx.shape(i) != ctx.shape(2 + static_cast<int>(k))) {
        return ctx.invalid("input " + std::to_string(i) + " must have the type and shape of X" +
                           std::to_string(k + 1) + " (input " + std::to_string(2 + k) + ")");
      }
    }
  }
  ETC_ASSIGN_OR_RETURN(o.r, ctx.input(0));
  if (ctx.dtype(0) != o.dtype) {
    ETC_ASSIGN_OR_RETURN(o.r, ctx.emit(OpKind::ToCopy, {{"self", o.r}, {"dtype", o.dtype}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId t, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(o.t_pos,
                       ctx.emit(OpKind::GtScalar, {{"self", t}, {"other", Scalar{int64_t{0}}}}));
  ETC_ASSIGN_OR_RETURN(o.t, ctx.emit(OpKind::ToCopy, {{"self", t}, {"dtype", o.dtype}}));
  return o;
}

// Input `group` (0: X, 1: G, ...) of optimized tensor k.
Result<ValueId> group_input(NodeCtx& ctx, const Optimizer& o, int group, int64_t k) {
  return ctx.input(2 + static_cast<int>(group * o.n + k));
}

Status group_output(NodeCtx& ctx, const Optimizer& o, int group, int64_t k, ValueId v) {
  return ctx.set_output(static_cast<int>(group * o.n + k), v);
}

// norm_coefficient * X + G.
Result<ValueId> regularized(NodeCtx& ctx, ValueId x, ValueId g, float norm) {
  ETC_ASSIGN_OR_RETURN(ValueId nx,
                       ctx.emit(OpKind::MulScalar, {{"self", x}, {"other", Scalar{double(norm)}}}));
  return ctx.emit(OpKind::AddTensor, {{"self", nx}, {"other", g}});
}

// Adagrad(R, T, X..., G..., H...) -> X_new..., H_new...:
//   r = R / (1 + T * decay_factor), g = norm_coefficient * X + G, H_new = H + g * g,
//   X_new = X - r * g / (sqrt(H_new) + epsilon).
Status convert_adagrad(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(float decay, ctx.attr_float("decay_factor", 0.0f));
  ETC_ASSIGN_OR_RETURN(float eps, ctx.attr_float("epsilon", 1e-6f));
  ETC_ASSIGN_OR_RETURN(float norm, ctx.attr_float("norm_coefficient", 0.0f));
  ETC_ASSIGN_OR_RETURN(Optimizer o, optimizer_inputs(ctx, 3, 2));
  ETC_ASSIGN_OR_RETURN(
      ValueId d, ctx.emit(OpKind::MulScalar, {{"self", o.t}, {"other", Scalar{double(decay)}}}));
  ETC_ASSIGN_OR_RETURN(d, ctx.emit(OpKind::AddScalar, {{"self", d}, {"other", Scalar{1.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId r, ctx.emit(OpKind::DivTensor, {{"self", o.r}, {"other", d}}));
  for (int64_t k = 0; k < o.n; ++k) {
    ETC_ASSIGN_OR_RETURN(ValueId x, group_input(ctx, o, 0, k));
    ETC_ASSIGN_OR_RETURN(ValueId g, group_input(ctx, o, 1, k));
    ETC_ASSIGN_OR_RETURN(ValueId h, group_input(ctx, o, 2, k));
    ETC_ASSIGN_OR_RETURN(g, regularized(ctx, x, g, norm));
    ETC_ASSIGN_OR_RETURN(ValueId gg, ctx.emit(OpKind::MulTensor, {{"self", g}, {"other", g}}));
    ETC_ASSIGN_OR_RETURN(ValueId h_new, ctx.emit(OpKind::AddTensor, {{"self", h}, {"other", gg}}));
    ETC_ASSIGN_OR_RETURN(ValueId denom, ctx.emit(OpKind::Sqrt, {{"self", h_new}}));
    ETC_ASSIGN_OR_RETURN(
        denom, ctx.emit(OpKind::AddScalar, {{"self", denom}, {"other", Scalar{double(eps)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId step, ctx.emit(OpKind::MulTensor, {{"self", g}, {"other", r}}));
    ETC_ASSIGN_OR_RETURN(step, ctx.emit(OpKind::DivTensor, {{"self", step}, {"other", denom}}));
    ETC_ASSIGN_OR_RETURN(ValueId x_new,
                         ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", step}}));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 0, k, x_new));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 1, k, h_new));
  }
  return Status();
}

// base ** T as a tensor of the optimizer's dtype.
Result<ValueId> power_of_t(NodeCtx& ctx, const Optimizer& o, float base) {
  return ctx.emit(OpKind::PowTensorTensor,
                  {{"self", scalar_constant(ctx, o.dtype, double(base))}, {"exponent", o.t}});
}

// Adam(R, T, X..., G..., V..., H...) -> X_new..., V_new..., H_new...:
//   g = norm_coefficient * X + G, V_new = alpha * V + (1 - alpha) * g,
//   H_new = beta * H + (1 - beta) * g * g,
//   r = T > 0 ? R * sqrt(1 - beta ** T) / (1 - alpha ** T) : R,
//   X_new = (1 - norm_coefficient_post) * (X - r * V_new / (sqrt(H_new) + epsilon)).
Status convert_adam(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", 0.9f));
  ETC_ASSIGN_OR_RETURN(float beta, ctx.attr_float("beta", 0.999f));
  ETC_ASSIGN_OR_RETURN(float eps, ctx.attr_float("epsilon", 1e-6f));
  ETC_ASSIGN_OR_RETURN(float norm, ctx.attr_float("norm_coefficient", 0.0f));
  ETC_ASSIGN_OR_RETURN(float post, ctx.attr_float("norm_coefficient_post", 0.0f));
  ETC_ASSIGN_OR_RETURN(Optimizer o, optimizer_inputs(ctx, 4, 3));
  // The bias-corrected rate (T = 0 divides by zero in the branch where does not take).
  ETC_ASSIGN_OR_RETURN(ValueId bt, power_of_t(ctx, o, beta));
  ETC_ASSIGN_OR_RETURN(ValueId at, power_of_t(ctx, o, alpha));
  ETC_ASSIGN_OR_RETURN(bt, ctx.emit(OpKind::MulScalar, {{"self", bt}, {"other", Scalar{-1.0}}}));
  ETC_ASSIGN_OR_RETURN(bt, ctx.emit(OpKind::AddScalar, {{"self", bt}, {"other", Scalar{1.0}}}));
  ETC_ASSIGN_OR_RETURN(bt, ctx.emit(OpKind::Sqrt, {{"self", bt}}));
  ETC_ASSIGN_OR_RETURN(at, ctx.emit(OpKind::MulScalar, {{"self", at}, {"other", Scalar{-1.0}}}));
  ETC_ASSIGN_OR_RETURN(at, ctx.emit(OpKind::AddScalar, {{"self", at}, {"other", Scalar{1.0}}}));
  ETC_ASSIGN_OR_RETURN(ValueId rc, ctx.emit(OpKind::MulTensor, {{"self", o.r}, {"other", bt}}));
  ETC_ASSIGN_OR_RETURN(rc, ctx.emit(OpKind::DivTensor, {{"self", rc}, {"other", at}}));
  ETC_ASSIGN_OR_RETURN(ValueId r, ctx.emit(OpKind::WhereSelf,
                                           {{"condition", o.t_pos}, {"self", rc}, {"other", o.r}}));
  for (int64_t k = 0; k < o.n; ++k) {
    ETC_ASSIGN_OR_RETURN(ValueId x, group_input(ctx, o, 0, k));
    ETC_ASSIGN_OR_RETURN(ValueId g, group_input(ctx, o, 1, k));
    ETC_ASSIGN_OR_RETURN(ValueId v, group_input(ctx, o, 2, k));
    ETC_ASSIGN_OR_RETURN(ValueId h, group_input(ctx, o, 3, k));
    ETC_ASSIGN_OR_RETURN(g, regularized(ctx, x, g, norm));
    ETC_ASSIGN_OR_RETURN(
        v, ctx.emit(OpKind::MulScalar, {{"self", v}, {"other", Scalar{double(alpha)}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId gv,
        ctx.emit(OpKind::MulScalar, {{"self", g}, {"other", Scalar{1.0 - double(alpha)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId v_new, ctx.emit(OpKind::AddTensor, {{"self", v}, {"other", gv}}));
    ETC_ASSIGN_OR_RETURN(ValueId gg, ctx.emit(OpKind::MulTensor, {{"self", g}, {"other", g}}));
    ETC_ASSIGN_OR_RETURN(
        gg, ctx.emit(OpKind::MulScalar, {{"self", gg}, {"other", Scalar{1.0 - double(beta)}}}));
    ETC_ASSIGN_OR_RETURN(
        h, ctx.emit(OpKind::MulScalar, {{"self", h}, {"other", Scalar{double(beta)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId h_new, ctx.emit(OpKind::AddTensor, {{"self", h}, {"other", gg}}));
    ETC_ASSIGN_OR_RETURN(ValueId denom, ctx.emit(OpKind::Sqrt, {{"self", h_new}}));
    ETC_ASSIGN_OR_RETURN(
        denom, ctx.emit(OpKind::AddScalar, {{"self", denom}, {"other", Scalar{double(eps)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId step,
                         ctx.emit(OpKind::DivTensor, {{"self", v_new}, {"other", denom}}));
    ETC_ASSIGN_OR_RETURN(step, ctx.emit(OpKind::MulTensor, {{"self", step}, {"other", r}}));
    ETC_ASSIGN_OR_RETURN(ValueId x_new,
                         ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", step}}));
    if (post != 0.0f) {
      ETC_ASSIGN_OR_RETURN(
          x_new,
          ctx.emit(OpKind::MulScalar, {{"self", x_new}, {"other", Scalar{1.0 - double(post)}}}));
    }
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 0, k, x_new));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 1, k, v_new));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 2, k, h_new));
  }
  return Status();
}

// Momentum(R, T, X..., G..., V...) -> X_new..., V_new...: g = norm_coefficient * X + G,
// V_new = alpha * V + (T > 0 ? beta : 1) * g; X_new = X - R * V_new (mode "standard") or
// X - R * (g + alpha * V_new) ("nesterov").
Status convert_momentum(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(float alpha, ctx.attr_float("alpha", std::nullopt));
  ETC_ASSIGN_OR_RETURN(float beta, ctx.attr_float("beta", std::nullopt));
  ETC_ASSIGN_OR_RETURN(float norm, ctx.attr_float("norm_coefficient", std::nullopt));
  // (Not ETC_ASSIGN_OR_RETURN: GCC 12 then warns of a maybe-uninitialized string.)
  Result<std::string> mode_attr = ctx.attr_string("mode", std::nullopt);
  if (!mode_attr.ok()) return mode_attr.status();
  const bool nesterov = *mode_attr == "nesterov";
  if (!nesterov && *mode_attr != "standard")
    return ctx.invalid("mode must be 'standard' or 'nesterov', got '" + *mode_attr + "'");
  ETC_ASSIGN_OR_RETURN(Optimizer o, optimizer_inputs(ctx, 3, 2));
  ETC_ASSIGN_OR_RETURN(
      ValueId b, ctx.emit(OpKind::WhereSelf, {{"condition", o.t_pos},
                                              {"self", scalar_constant(ctx, o.dtype, double(beta))},
                                              {"other", scalar_constant(ctx, o.dtype, 1.0)}}));
  for (int64_t k = 0; k < o.n; ++k) {
    ETC_ASSIGN_OR_RETURN(ValueId x, group_input(ctx, o, 0, k));
    ETC_ASSIGN_OR_RETURN(ValueId g, group_input(ctx, o, 1, k));
    ETC_ASSIGN_OR_RETURN(ValueId v, group_input(ctx, o, 2, k));
    ETC_ASSIGN_OR_RETURN(g, regularized(ctx, x, g, norm));
    ETC_ASSIGN_OR_RETURN(
        v, ctx.emit(OpKind::MulScalar, {{"self", v}, {"other", Scalar{double(alpha)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId bg, ctx.emit(OpKind::MulTensor, {{"self", g}, {"other", b}}));
    ETC_ASSIGN_OR_RETURN(ValueId v_new, ctx.emit(OpKind::AddTensor, {{"self", v}, {"other", bg}}));
    ValueId dir = v_new;
    if (nesterov) {
      ETC_ASSIGN_OR_RETURN(
          dir, ctx.emit(OpKind::MulScalar, {{"self", v_new}, {"other", Scalar{double(alpha)}}}));
      ETC_ASSIGN_OR_RETURN(dir, ctx.emit(OpKind::AddTensor, {{"self", g}, {"other", dir}}));
    }
    ETC_ASSIGN_OR_RETURN(ValueId step,
                         ctx.emit(OpKind::MulTensor, {{"self", dir}, {"other", o.r}}));
    ETC_ASSIGN_OR_RETURN(ValueId x_new,
                         ctx.emit(OpKind::SubTensor, {{"self", x}, {"other", step}}));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 0, k, x_new));
    ETC_RETURN_IF_ERROR(group_output(ctx, o, 1, k, v_new));
  }
  return Status();
}

}  // namespace

void add_training_converters(std::map<std::string, Converter>& table) {
  const std::string domain = "ai.onnx.preview.training::";
  table[domain + "Adagrad"] = convert_adagrad;
  table[domain + "Adam"] = convert_adam;
  table[domain + "Momentum"] = convert_momentum;
}

}  // namespace etc::onnx_import
