#include "backends/cuda/runtime/cuda_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cuda/runtime/cuda_op_util.h"

namespace etc::cuda {
namespace {

using namespace ops;  // NOLINT: the helpers of cuda_op_util.h
using rt::KernelContext;
using rt::TensorView;
using rt::Value;
using rt::kernels::check_args;
using rt::kernels::out_arg;
using rt::kernels::tensor_arg;

// ---- Elementwise -------------------------------------------------------------------------

using Binary = rt::kernels::ArithOp;

Status binary(KernelContext& ctx, std::span<Value*> args, Binary op, bool scalar_other) {
  const bool has_alpha = op == Binary::kAdd || op == Binary::kSub;
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(rt::kernels::check_arith(ctx, args, op, scalar_other));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, has_alpha ? 3 : 2);
  const k::MapOp kop = op == Binary::kAdd   ? k::MapOp::kAdd
                       : op == Binary::kSub ? k::MapOp::kSub
                       : op == Binary::kMul ? k::MapOp::kMul
                                            : k::MapOp::kDiv;
  MapBuilder m(ctx, kop, out);
  m.p.a = m.broadcast(self);
  if (scalar_other) {
    m.p.b_is_scalar = true;
    m.p.scalar = scalar_of(*args[1], out.dtype);
  } else {
    m.p.b = m.broadcast(tensor_arg(args, 1));
  }
  if (has_alpha) m.p.alpha = scalar_of(*args[2], out.dtype);
  return m.run();
}

Status add_tensor(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kAdd, false);
}
Status sub_tensor(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kSub, false);
}
Status mul_tensor(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kMul, false);
}
Status div_tensor(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kDiv, false);
}
Status add_scalar(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kAdd, true);
}
Status sub_scalar(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kSub, true);
}
Status mul_scalar(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kMul, true);
}
Status div_scalar(KernelContext& c, std::span<Value*> a) {
  return binary(c, a, Binary::kDiv, true);
}

Status pow_tensor_scalar(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(rt::kernels::check_pow_tensor_scalar(ctx, args));
  MapBuilder m(ctx, k::MapOp::kPow, out);
  m.p.a = m.broadcast(self);
  m.p.scalar = scalar_of(*args[1], out.dtype);
  return m.run();
}

Status where_self(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& cond = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_RETURN_IF_ERROR(rt::kernels::check_where(ctx, args));
  MapBuilder m(ctx, k::MapOp::kWhere, out);
  m.p.a = m.broadcast(cond);
  m.p.b = m.broadcast(tensor_arg(args, 1));
  m.p.c = m.broadcast(tensor_arg(args, 2));
  return m.run();
}

Status eq_scalar(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, DType::kBool));
  MapBuilder m(ctx, k::MapOp::kEqScalar, out);
  m.p.a = m.broadcast(self);
  m.p.scalar_is_float = args[1]->kind == Value::Kind::kDouble;
  m.p.scalar.d = args[1]->scalar_as_double();
  m.p.scalar.i = m.p.scalar_is_float ? 0 : args[1]->scalar_as_int();
  return m.run();
}

Status logical_not(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 1);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, DType::kBool));
  MapBuilder m(ctx, k::MapOp::kLogicalNot, out);
  m.p.a = m.broadcast(self);
  return m.run();
}

bool float_only(k::MapOp op) {
  return op != k::MapOp::kNeg && op != k::MapOp::kRelu && op != k::MapOp::kClamp;
}

Status run_unary(KernelContext& ctx, k::MapOp op, const TensorView& self, TensorView& out,
                 const Value* lo = nullptr, const Value* hi = nullptr) {
  ETC_RETURN_IF_ERROR(rt::kernels::check_unary_map(ctx, self, out, float_only(op)));
  MapBuilder m(ctx, op, out);
  m.p.a = m.broadcast(self);
  if (lo != nullptr) {
    m.p.has_lo = true;
    m.p.lo = scalar_of(*lo, out.dtype);
  }
  if (hi != nullptr) {
    m.p.has_hi = true;
    m.p.hi = scalar_of(*hi, out.dtype);
  }
  return m.run();
}

template <k::MapOp kOp>
Status unary(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return run_unary(ctx, kOp, tensor_arg(args, 0), out_arg(args, 1));
}

Status clamp(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(rt::kernels::check_clamp(ctx, args));
  return run_unary(ctx, k::MapOp::kClamp, tensor_arg(args, 0), out_arg(args, 3),
                   args[1]->is_none() ? nullptr : args[1], args[2]->is_none() ? nullptr : args[2]);
}

Status hardtanh(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return run_unary(ctx, k::MapOp::kClamp, tensor_arg(args, 0), out_arg(args, 3), args[1], args[2]);
}

Status gelu(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::GeluApprox approx, rt::kernels::check_gelu(ctx, args));
  return run_unary(
      ctx, approx == rt::kernels::GeluApprox::kErf ? k::MapOp::kGeluErf : k::MapOp::kGeluTanh,
      tensor_arg(args, 0), out_arg(args, 2));
}

// The unary math ops (graph/unary_math.def): the CPU kernel's dtype rules, one launch.
template <typename Op, k::UnaryMathOp kOp>
Status unary_math_op(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const rt::kernels::Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  ETC_RETURN_IF_ERROR(rt::kernels::check_unary_math(ctx, Op::kKind, self, out));
  if (out.numel() == 0) return Status();
  ETC_ASSIGN_OR_RETURN(k::Elem in_type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(k::Elem out_type, elem_of(ctx, out.dtype, "out"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_unary_math(kOp, self.data, in_type, out.data, out_type,
                                                out.numel(), dev->stream()));
  return Status();
}

// The binary math ops (graph/binary_math.def): the CPU kernel's dtype rules, one launch over
// the broadcast operands. Integer fmod, remainder and division by zero give 0 here (the CPU
// kernel refuses them; checking would read the divisor back from the device).
template <typename Fn, binary_math::Form kForm, k::BinaryMathFn kFn>
Status binary_math_op(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = args[0]->tensor;
  const TensorView* other = kForm == binary_math::Form::kTensor ? &args[1]->tensor : nullptr;
  const Value* scalar = kForm == binary_math::Form::kScalar ? args[1] : nullptr;
  TensorView& out = rt::kernels::Args(ctx, args).out();
  ETC_ASSIGN_OR_RETURN(DType compute,
                       rt::kernels::check_binary_math(ctx, Fn::kKind, self, other, scalar, out));
  if (out.numel() == 0) return Status();
  MapBuilder m(ctx, k::MapOp::kCopy, out);  // for its broadcast operands
  k::BinaryMathArgs p;
  p.fn = kFn;
  p.shape = m.p.shape;
  p.out = m.p.out;
  p.a = m.broadcast(self);
  if (other != nullptr) {
    p.b = m.broadcast(*other);
  } else {
    p.b_is_scalar = true;
    p.scalar.d = scalar->scalar_as_double();
    p.scalar.i = scalar->kind == Value::Kind::kDouble ? 0 : scalar->scalar_as_int();
  }
  ETC_RETURN_IF_ERROR(m.error);
  ETC_ASSIGN_OR_RETURN(p.compute, elem_of(ctx, compute, "the compute dtype"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_binary_math(p, dev->stream()));
  return Status();
}

// div with a rounding mode, as the CPU kernel: by the mode argument, one of three functions.
template <binary_math::Form kForm>
Status div_mode_op(KernelContext& ctx, std::span<Value*> args) {
  using rt::kernels::DivMode;
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const DivMode mode, rt::kernels::check_div_mode(ctx, args));
  switch (mode) {
    case DivMode::kTrue:
      return binary_math_op<binary_math::TrueDiv, kForm, k::BinaryMathFn::kTrueDiv>(ctx, args);
    case DivMode::kTrunc:
      return binary_math_op<binary_math::DivTrunc, kForm, k::BinaryMathFn::kDivTrunc>(ctx, args);
    case DivMode::kFloor:
      return binary_math_op<binary_math::DivFloor, kForm, k::BinaryMathFn::kDivFloor>(ctx, args);
  }
  return internal_error("div: unknown rounding mode");
}

}  // namespace

// Defined in cuda_ops_tensor.cpp (matmul, convolution, pooling, reductions, layout ops) and
// cuda_ops_index.cpp (embedding, advanced indexing, creation ops).
Status register_cuda_tensor_kernels(rt::OperatorRegistry& registry);
Status register_cuda_index_kernels(rt::OperatorRegistry& registry);

Status register_cuda_kernels(rt::OperatorRegistry& r) {
#define ETC_UNARY_MATH(op, kind, onnx, expr)                                                  \
  ETC_RETURN_IF_ERROR(r.add(OpKind::op, unary_math_op<unary_math::op, k::UnaryMathOp::k##op>, \
                            KernelForms::kFunctional));
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH
#define ETC_BINARY_FN(fn, kind, expr)
#define ETC_BINARY_OP(op, fn, form, onnx)                                                     \
  ETC_RETURN_IF_ERROR(                                                                        \
      r.add(OpKind::op,                                                                       \
            binary_math_op<binary_math::fn, binary_math::Form::form, k::BinaryMathFn::k##fn>, \
            KernelForms::kFunctional));
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivTensorMode, div_mode_op<binary_math::Form::kTensor>,
                            KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivScalarMode, div_mode_op<binary_math::Form::kScalar>,
                            KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AddTensor, add_tensor, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SubTensor, sub_tensor, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MulTensor, mul_tensor, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivTensor, div_tensor, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AddScalar, add_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SubScalar, sub_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MulScalar, mul_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivScalar, div_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::PowTensorScalar, pow_tensor_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::WhereSelf, where_self, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::EqScalar, eq_scalar, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::LogicalNot, logical_not, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Neg, unary<k::MapOp::kNeg>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Relu, unary<k::MapOp::kRelu>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Clamp, clamp, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Hardtanh, hardtanh, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Exp, unary<k::MapOp::kExp>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Log, unary<k::MapOp::kLog>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Rsqrt, unary<k::MapOp::kRsqrt>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sigmoid, unary<k::MapOp::kSigmoid>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sqrt, unary<k::MapOp::kSqrt>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Tanh, unary<k::MapOp::kTanh>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Erf, unary<k::MapOp::kErf>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Gelu, gelu, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Hardsigmoid, unary<k::MapOp::kHardsigmoid>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Hardswish, unary<k::MapOp::kHardswish>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Silu, unary<k::MapOp::kSilu>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(register_cuda_tensor_kernels(r));
  return register_cuda_index_kernels(r);
}

}  // namespace etc::cuda
