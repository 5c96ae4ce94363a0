// The torch.export op table: each ATen target of the default export (TRAINING) and of Core
// ATen (after run_decompositions) mapped onto the IR's ATen ops, decomposed, or evaluated
// at export time when every input is known then. Attention, indexing and state writes (the
// decoder ops) are in torch_ops_attention.cpp.
#include <cmath>

#include "frontends/torch_export/torch_node.h"
#include "frontends/torch_export/torch_ops.h"
#include "graph/binary_math.h"
#include "graph/unary_math.h"

namespace etc::torch_import {

Status check_known_size(TorchNode& n, const std::vector<int64_t>& shape) {
  if (!known_numel(shape)) {
    return n.unsupported("a tensor of " + shape_to_string(shape) +
                         " computed at export time is too large (or has a negative dim)");
  }
  return Status();
}

Status cast_to(TorchNode& n, DType to) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  if (to == n.dtype(x)) return n.set_output(0, x);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::ToCopy, {{"self", x}, {"dtype", to}}));
  return n.set_output(0, out);
}

namespace {

// A number argument as a 0-d known tensor (for evaluating tensor-scalar ops).
KnownTensor scalar_known(const Scalar& s) {
  DType d = s.is_float() ? DType::kFloat32 : s.is_bool() ? DType::kBool : DType::kInt64;
  return KnownTensor{d, {}, {s.to_double()}};
}

// ATen's result dtype of a binary op on a tensor of dtype `a` and an operand of dtype `b`
// (`b_is_number`: a Python number, which only lifts the category: int tensor * 0.5 is
// float32).
DType result_dtype(DType a, DType b, bool b_is_number) {
  if (!b_is_number) return promote_types(a, b);
  if (dtype_is_float(b) && !dtype_is_float(a)) return DType::kFloat32;
  if (!dtype_is_float(b) && b != DType::kBool && a == DType::kBool) return DType::kInt64;
  return a;
}

// ---- Elementwise -----------------------------------------------------------------------------

// self <op> other, where other is a tensor or a number; alpha scales other (add, sub).
Converter binary(OpKind tensor_op, OpKind scalar_op, bool has_alpha, bool in_place = false) {
  return [=](TorchNode& n) -> Status {
    if (!n.is_tensor("self") && n.is_tensor("other")) {
      // A number on the left (Core ATen writes `1.0 - x` as sub.Tensor(1.0, x)): a 0-d
      // constant of the result's dtype.
      ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("self"));
      ETC_ASSIGN_OR_RETURN(const Entry* other, n.entry("other"));
      KnownTensor lhs = scalar_known(s);
      DType out = result_dtype(other->dtype, lhs.dtype, true);
      if (tensor_op == OpKind::DivTensor && !dtype_is_float(out)) out = DType::kFloat32;
      lhs.dtype = out;
      Scalar alpha{int64_t{1}};
      if (has_alpha) {
        ETC_ASSIGN_OR_RETURN(alpha, n.scalar("alpha", Scalar{int64_t{1}}));
      }
      ValueId x = n.constant(lhs);
      ETC_ASSIGN_OR_RETURN(ValueId y, n.tensor("other"));
      ValueId r;
      if (has_alpha) {
        ETC_ASSIGN_OR_RETURN(r, n.emit(tensor_op, {{"self", x}, {"other", y}, {"alpha", alpha}}));
      } else {
        ETC_ASSIGN_OR_RETURN(r, n.emit(tensor_op, {{"self", x}, {"other", y}}));
      }
      return n.set_output(0, r);
    }
    Scalar alpha{int64_t{1}};
    if (has_alpha) {
      ETC_ASSIGN_OR_RETURN(alpha, n.scalar("alpha", Scalar{int64_t{1}}));
    }
    double a = alpha.to_double();
    bool other_tensor = n.is_tensor("other");
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ValueId out;
    if (other_tensor) {
      ETC_ASSIGN_OR_RETURN(ValueId y, n.tensor("other"));
      if (has_alpha) {
        ETC_ASSIGN_OR_RETURN(out, n.emit(tensor_op, {{"self", x}, {"other", y}, {"alpha", alpha}}));
      } else {
        ETC_ASSIGN_OR_RETURN(out, n.emit(tensor_op, {{"self", x}, {"other", y}}));
      }
    } else {
      ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("other"));
      if (has_alpha) {
        Scalar scaled = a == 1.0 ? s : Scalar{s.to_double() * a};
        ETC_ASSIGN_OR_RETURN(out, n.emit(scalar_op, {{"self", x}, {"other", scaled}}));
      } else {
        ETC_ASSIGN_OR_RETURN(out, n.emit(scalar_op, {{"self", x}, {"other", s}}));
      }
    }
    if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", out));
    return n.set_output(0, out);
  };
}

// other - alpha * self (rsub.Scalar: `1.0 - x`).
Status convert_rsub(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar other, n.scalar("other"));
  ETC_ASSIGN_OR_RETURN(Scalar alpha, n.scalar("alpha", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  Scalar neg_alpha = alpha.is_float() ? Scalar{-alpha.to_double()}
                                      : Scalar{-static_cast<int64_t>(alpha.to_double())};
  ETC_ASSIGN_OR_RETURN(ValueId scaled,
                       n.emit(OpKind::MulScalar, {{"self", x}, {"other", neg_alpha}}));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::AddScalar, {{"self", scaled}, {"other", other}}));
  return n.set_output(0, out);
}

// A tensor compared with a number (eq.Scalar: PyTorch's safe softmax).
Converter compare_scalar(OpKind op) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("other"));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", x}, {"other", s}}));
    return n.set_output(0, out);
  };
}

// The binary math ops of binary_math.def: `self` a tensor or (pow.Scalar) a number, the
// other operand a tensor or a number: the op of the table, with a number on the left as a
// 0-d constant of the operands' dtype (values known at export time are evaluated by emit()).
// `mode` is div's rounding mode, passed on to the DivTensorMode / DivScalarMode ops.
Converter binary_math_op(OpKind tensor_op, std::optional<OpKind> scalar_op,
                         std::optional<std::string> mode = std::nullopt) {
  return [=](TorchNode& n) -> Status {
    const std::string other_name = n.has("exponent") ? "exponent" : "other";
    // The operands as entries, or as numbers.
    auto operand = [&](const std::string& arg, std::optional<Scalar>* number,
                       const Entry** entry) -> Status {
      if (n.is_tensor(arg)) {
        ETC_ASSIGN_OR_RETURN(*entry, n.entry(arg));
        return Status();
      }
      ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar(arg));
      *number = s;
      return Status();
    };
    std::optional<Scalar> self_number, other_number;
    const Entry* self = nullptr;
    const Entry* other = nullptr;
    ETC_RETURN_IF_ERROR(operand("self", &self_number, &self));
    ETC_RETURN_IF_ERROR(operand(other_name, &other_number, &other));
    if (self == nullptr && other == nullptr) return n.invalid("two numbers, no tensor");
    // The result's dtype: ATen's result type of the operands, then the kind's rule.
    DType common = self && other ? promote_types(self->dtype, other->dtype)
                   : self ? result_dtype(self->dtype, scalar_known(*other_number).dtype, true)
                          : result_dtype(other->dtype, scalar_known(*self_number).dtype, true);
    if (self && other && (self->shape.empty() != other->shape.empty())) {
      // A zero-dim tensor only lifts the category (ATen's result_type).
      const Entry* dims = self->shape.empty() ? other : self;
      const Entry* zero = self->shape.empty() ? self : other;
      common = result_dtype(dims->dtype, zero->dtype, true);
    }
    ValueId x;
    if (self) {
      ETC_ASSIGN_OR_RETURN(x, n.tensor("self"));
    } else {  // a number on the left: a 0-d constant of the operands' type (ATen's
              // result type: pow(5, int32 tensor) is int32)
      KnownTensor lhs = scalar_known(*self_number);
      lhs.dtype = common;
      x = n.constant(lhs);
    }
    ValueId out;
    if (mode) {
      ValueId y;
      if (other) {
        ETC_ASSIGN_OR_RETURN(y, n.tensor(other_name));
      }
      ETC_ASSIGN_OR_RETURN(
          out, other ? n.emit(tensor_op, {{"self", x}, {"other", y}, {"rounding_mode", *mode}})
                     : n.emit(*scalar_op,
                              {{"self", x}, {"other", *other_number}, {"rounding_mode", *mode}}));
    } else if (other) {
      ETC_ASSIGN_OR_RETURN(ValueId y, n.tensor(other_name));
      ETC_ASSIGN_OR_RETURN(
          out, n.emit(tensor_op, {{"self", x}, {op_info(tensor_op).schema.args[1].name, y}}));
    } else if (scalar_op) {
      ETC_ASSIGN_OR_RETURN(out, n.emit(*scalar_op, {{"self", x}, {"other", *other_number}}));
    } else {
      ETC_ASSIGN_OR_RETURN(out, n.emit(tensor_op, {{"self", x},
                                                   {op_info(tensor_op).schema.args[1].name,
                                                    n.constant(scalar_known(*other_number))}}));
    }
    return n.set_output(0, out);
  };
}

// div.Tensor_mode / div.Scalar_mode: without a rounding mode, div.Tensor; else the
// truncating or flooring division.
Status convert_div_mode(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(std::string mode, n.string_arg("rounding_mode", std::string()));
  static const Converter kTrue = binary(OpKind::DivTensor, OpKind::DivScalar, false);
  static const Converter kTrunc =
      binary_math_op(OpKind::DivTensorMode, OpKind::DivScalarMode, "trunc");
  static const Converter kFloor =
      binary_math_op(OpKind::DivTensorMode, OpKind::DivScalarMode, "floor");
  if (mode.empty()) return kTrue(n);
  if (mode == "trunc") return kTrunc(n);
  if (mode == "floor") return kFloor(n);
  return n.invalid("rounding_mode must be None, 'trunc' or 'floor', got '" + mode + "'");
}

Status convert_logical_not(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::LogicalNot, {{"self", x}}));
  return n.set_output(0, out);
}

Status convert_any_dim(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::AnyDim, {{"self", x}, {"dim", dim}, {"keepdim", keepdim}}));
  return n.set_output(0, out);
}

Converter unary(OpKind op, bool in_place = false) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", x}}));
    if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", out));
    return n.set_output(0, out);
  };
}

// The unary math ops of unary_math.def (values known at export time are evaluated by
// emit(); dtypes the op does not take are left to its inference to refuse).
Converter unary_math_op(OpKind op) {
  return [op](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", x}}));
    return n.set_output(0, out);
  };
}

Converter hardtanh(bool in_place) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(Scalar lo, n.scalar("min_val", Scalar{-1.0}));
    ETC_ASSIGN_OR_RETURN(Scalar hi, n.scalar("max_val", Scalar{1.0}));
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(OpKind::Hardtanh, {{"self", x}, {"min_val", lo}, {"max_val", hi}}));
    if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", out));
    return n.set_output(0, out);
  };
}

// clamp(min, max), clamp_min(min), clamp_max(max).
Converter clamp(bool has_min, bool has_max) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    if (n.is_tensor("min") || n.is_tensor("max")) {
      // Tensor bounds (clamp.Tensor): maximum with min, then minimum with max (NaN stays).
      ValueId v = x;
      if (has_min && n.is_tensor("min")) {
        ETC_ASSIGN_OR_RETURN(ValueId lo_t, n.tensor("min"));
        ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Maximum, {{"self", v}, {"other", lo_t}}));
      }
      if (has_max && n.is_tensor("max")) {
        ETC_ASSIGN_OR_RETURN(ValueId hi_t, n.tensor("max"));
        ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Minimum, {{"self", v}, {"other", hi_t}}));
      }
      if ((has_min && n.has("min") && !n.is_tensor("min")) ||
          (has_max && n.has("max") && !n.is_tensor("max")))
        return n.unsupported("a tensor bound with a number bound");
      return n.set_output(0, v);
    }
    std::optional<Scalar> lo, hi;
    if (has_min) {
      ETC_ASSIGN_OR_RETURN(lo, n.optional_scalar("min"));
    }
    if (has_max) {
      ETC_ASSIGN_OR_RETURN(hi, n.optional_scalar("max"));
    }
    ArgValue lo_arg = lo ? ArgValue(*lo) : ArgValue(std::monostate{});
    ArgValue hi_arg = hi ? ArgValue(*hi) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(OpKind::Clamp, {{"self", x}, {"min", lo_arg}, {"max", hi_arg}}));
    return n.set_output(0, out);
  };
}

// leaky_relu(x, slope): where(x > 0, x, x * slope), ATen's formula (NaN stays NaN).
Status convert_leaky_relu(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(Scalar slope, n.scalar("negative_slope", Scalar{0.01}));
  ETC_ASSIGN_OR_RETURN(ValueId pos,
                       n.emit(OpKind::GtScalar, {{"self", x}, {"other", Scalar{int64_t{0}}}}));
  ETC_ASSIGN_OR_RETURN(ValueId neg, n.emit(OpKind::MulScalar, {{"self", x}, {"other", slope}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::WhereSelf, {{"condition", pos}, {"self", x}, {"other", neg}}));
  return n.set_output(0, out);
}

// elu(x, alpha, scale, input_scale): x <= 0 ? expm1(x * input_scale) * (alpha * scale)
// : x * scale, ATen's formula.
Status emit_elu(TorchNode& n, Scalar alpha, Scalar scale, Scalar input_scale) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const Scalar negcoef{alpha.to_double() * scale.to_double()};
  ETC_ASSIGN_OR_RETURN(ValueId xs,
                       n.emit(OpKind::MulScalar, {{"self", x}, {"other", input_scale}}));
  ETC_ASSIGN_OR_RETURN(ValueId e, n.emit(OpKind::Expm1, {{"self", xs}}));
  ETC_ASSIGN_OR_RETURN(ValueId neg, n.emit(OpKind::MulScalar, {{"self", e}, {"other", negcoef}}));
  ETC_ASSIGN_OR_RETURN(ValueId pos, n.emit(OpKind::MulScalar, {{"self", x}, {"other", scale}}));
  ETC_ASSIGN_OR_RETURN(ValueId le,
                       n.emit(OpKind::LeScalar, {{"self", x}, {"other", Scalar{int64_t{0}}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::WhereSelf, {{"condition", le}, {"self", neg}, {"other", pos}}));
  return n.set_output(0, out);
}

Status convert_elu(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar alpha, n.scalar("alpha", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(Scalar scale, n.scalar("scale", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(Scalar input_scale, n.scalar("input_scale", Scalar{int64_t{1}}));
  return emit_elu(n, alpha, scale, input_scale);
}

// selu(x): elu with ATen's SELU constants.
Status convert_selu(TorchNode& n) {
  return emit_elu(n, Scalar{1.6732632423543772848170429916717},
                  Scalar{1.0507009873554804934193349852946}, Scalar{int64_t{1}});
}

Status convert_gelu(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::string approx, n.string_arg("approximate", "none"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Gelu, {{"self", x}, {"approximate", approx}}));
  return n.set_output(0, out);
}

Status convert_pow(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar e, n.scalar("exponent"));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::PowTensorScalar, {{"self", x}, {"exponent", e}}));
  return n.set_output(0, out);
}

// where.Scalar (`torch.where(c, 0.0, float("-inf"))`): both numbers, 0-d constants of
// their result type (ATen's for two numbers: float32, the default dtype, when either is a
// float; else int64 when either is an int; else bool).
Status convert_where_numbers(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar a, n.scalar("self"));
  ETC_ASSIGN_OR_RETURN(Scalar b, n.scalar("other"));
  const DType d = a.is_float() || b.is_float() ? DType::kFloat32
                  : a.is_bool() && b.is_bool() ? DType::kBool
                                               : DType::kInt64;
  ETC_ASSIGN_OR_RETURN(ValueId cv, n.tensor("condition"));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::WhereSelf, {{"condition", cv},
                                 {"self", n.constant(known_full(d, {}, a.to_double()))},
                                 {"other", n.constant(known_full(d, {}, b.to_double()))}}));
  return n.set_output(0, out);
}

// where.self, and where.ScalarOther / where.ScalarSelf (the default export's
// `torch.where(c, x, 0.0)`): the number a 0-d constant of the result type (ATen's: the
// tensor's dtype unless the number lifts its category).
Status convert_where_scalar(TorchNode& n) {
  const bool self_number = !n.is_tensor("self");
  if (self_number && !n.is_tensor("other")) return convert_where_numbers(n);
  const char* tensor_arg = self_number ? "other" : "self";
  ETC_ASSIGN_OR_RETURN(const Entry* t, n.entry(tensor_arg));
  ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar(self_number ? "self" : "other"));
  KnownTensor number = scalar_known(s);
  number.dtype = result_dtype(t->dtype, number.dtype, true);
  ETC_ASSIGN_OR_RETURN(ValueId cv, n.tensor("condition"));
  ETC_ASSIGN_OR_RETURN(ValueId tv, n.tensor(tensor_arg));
  if (n.dtype(tv) != number.dtype) {
    ETC_ASSIGN_OR_RETURN(tv, n.emit(OpKind::ToCopy, {{"self", tv}, {"dtype", number.dtype}}));
  }
  const ValueId nv = n.constant(number);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::WhereSelf, {{"condition", cv},
                                                               {"self", self_number ? nv : tv},
                                                               {"other", self_number ? tv : nv}}));
  return n.set_output(0, out);
}

Status convert_where(TorchNode& n) {
  if (!n.is_tensor("self") || !n.is_tensor("other")) return convert_where_scalar(n);
  ETC_ASSIGN_OR_RETURN(ValueId cv, n.tensor("condition"));
  ETC_ASSIGN_OR_RETURN(ValueId av, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId bv, n.tensor("other"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::WhereSelf, {{"condition", cv}, {"self", av}, {"other", bv}}));
  return n.set_output(0, out);
}

// ---- Creation (known at export time) ---------------------------------------------------------

Result<DType> creation_dtype(TorchNode& n, DType fallback) {
  ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
  return d.value_or(fallback);
}

Status convert_arange(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar end, n.scalar("end"));
  ETC_ASSIGN_OR_RETURN(Scalar start, n.scalar("start", Scalar{int64_t{0}}));
  ETC_ASSIGN_OR_RETURN(Scalar step, n.scalar("step", Scalar{int64_t{1}}));
  bool is_float = start.is_float() || end.is_float() || step.is_float();
  ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, is_float ? DType::kFloat32 : DType::kInt64));
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0.0 || !std::isfinite(s) || !std::isfinite(e) || !std::isfinite(st)) {
    return n.invalid("arange needs finite bounds and a non-zero step");
  }
  double count = std::ceil((e - s) / st);
  if (count < 0) count = 0;
  if (count > static_cast<double>(kMaxKnownElements)) return check_known_size(n, {-1});
  KnownTensor t{d, {static_cast<int64_t>(count)}, {}};
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
    t.v.push_back(round_to(d, s + st * static_cast<double>(i)));
  return n.set_known_output(0, std::move(t));
}

// full/zeros/ones (a size argument) and their *_like forms (the shape of `self`).
Converter fill(std::optional<double> value, bool like) {
  return [=](TorchNode& n) -> Status {
    std::vector<int64_t> shape;
    DType fallback = DType::kFloat32;
    if (like) {
      ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
      shape = self->shape;
      fallback = self->dtype;
    } else {
      ETC_ASSIGN_OR_RETURN(shape, n.ints("size"));
    }
    double v = 0.0;
    if (value) {
      v = *value;
    } else {
      ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("fill_value"));
      v = s.to_double();
      if (!like)
        fallback = s.is_float() ? DType::kFloat32 : s.is_bool() ? DType::kBool : DType::kInt64;
    }
    ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, fallback));
    if (like && n.dynamic_build()) {
      // In a bounded dynamic build the shape of a run-time tensor may move: full_like stays
      // an op (fold-constants folds it where the shape is static).
      ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
      if (!self->known) {
        ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
        Scalar fill = dtype_is_float(d)   ? Scalar{v}
                      : d == DType::kBool ? Scalar{v != 0.0}
                                          : Scalar{static_cast<int64_t>(v)};
        ETC_ASSIGN_OR_RETURN(
            ValueId out,
            n.emit(OpKind::FullLike, {{"self", x}, {"fill_value", fill}, {"dtype", d}}));
        return n.set_output(0, out);
      }
    }
    ETC_RETURN_IF_ERROR(check_known_size(n, shape));
    return n.set_known_output(0, known_full(d, shape, v));
  };
}

// rand/randn(size) and randperm(n): numbers drawn at run time, never known at export time
// (one generator per instruction: runtime/kernels/random.cpp). A generator argument (the
// .generator overloads) is not imported.
Converter random_op(OpKind op) {
  return [op](TorchNode& n) -> Status {
    ValueId out;
    if (op == OpKind::Randperm) {
      ETC_ASSIGN_OR_RETURN(int64_t count, n.int_arg("n"));
      ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, DType::kInt64));
      ETC_ASSIGN_OR_RETURN(out, n.emit(op, {{"n", count}, {"dtype", d}}));
    } else {
      ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints("size"));
      ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, DType::kFloat32));
      ETC_ASSIGN_OR_RETURN(out, n.emit(op, {{"size", shape}, {"dtype", d}}));
    }
    return n.set_output(0, out);
  };
}

Status convert_scalar_tensor(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("s"));
  ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, DType::kFloat32));
  return n.set_known_output(0, known_full(d, {}, s.to_double()));
}

// ---- Views and data movement -----------------------------------------------------------------

Result<std::vector<int64_t>> resolve_shape(TorchNode& n, std::vector<int64_t> shape,
                                           int64_t numel) {
  int64_t known_prod = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return n.invalid("size " + shape_to_string(shape) + " has a negative dim");
    } else {
      known_prod *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known_prod == 0 || numel % known_prod != 0) {
      return n.invalid("cannot view " + std::to_string(numel) + " elements as " +
                       shape_to_string(shape));
    }
    shape[infer] = numel / known_prod;
  }
  return shape;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t p = 1;
  for (int64_t d : shape)
    p *= d;
  return p;
}

// view, reshape, _unsafe_view: the size argument is `size` or `shape`.
Converter reshape_like(const char* size_arg) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints(size_arg));
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    // A -1 is resolved here: a dynamic export marks its one dynamic entry -1 itself.
    ETC_ASSIGN_OR_RETURN(shape, resolve_shape(n, shape, numel_of(n.sizes(x))));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", x}, {"shape", shape}}));
    return n.set_output(0, out);
  };
}

Status convert_flatten(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  auto rank = static_cast<int64_t>(in.size());
  ETC_ASSIGN_OR_RETURN(int64_t s, n.int_arg("start_dim", 0));
  ETC_ASSIGN_OR_RETURN(int64_t e, n.int_arg("end_dim", -1));
  ETC_ASSIGN_OR_RETURN(s, n.wrap_dim(s, rank, "start_dim"));
  ETC_ASSIGN_OR_RETURN(e, n.wrap_dim(e, rank, "end_dim"));
  if (s > e) return n.invalid("start_dim must not be after end_dim");
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < s; ++i)
    shape.push_back(in[i]);
  int64_t p = 1;
  for (int64_t i = s; i <= e && i < rank; ++i)
    p *= in[i];
  shape.push_back(p);
  for (int64_t i = e + 1; i < rank; ++i)
    shape.push_back(in[i]);
  if (rank == 0) shape = {1};
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", x}, {"shape", shape}}));
  return n.set_output(0, out);
}

Status convert_permute(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.ints("dims"));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Permute, {{"self", x}, {"dims", dims}}));
  return n.set_output(0, out);
}

Status convert_transpose(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t a, n.int_arg("dim0"));
  ETC_ASSIGN_OR_RETURN(int64_t b, n.int_arg("dim1"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::TransposeInt, {{"self", x}, {"dim0", a}, {"dim1", b}}));
  return n.set_output(0, out);
}

Status convert_t(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  if (n.sizes(x).size() < 2) return n.set_output(0, x);
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::TransposeInt, {{"self", x}, {"dim0", int64_t{0}}, {"dim1", int64_t{1}}}));
  return n.set_output(0, out);
}

Status convert_unsqueeze(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", dim}}));
  return n.set_output(0, out);
}

Status convert_squeeze(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ValueId out;
  if (n.has("dim")) {
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.ints("dim"));
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::SqueezeDims, {{"self", x}, {"dim", dims}}));
  } else {
    std::vector<int64_t> dims;
    for (size_t i = 0; i < n.sizes(x).size(); ++i)
      if (n.sizes(x)[i] == 1) dims.push_back(static_cast<int64_t>(i));
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::SqueezeDims, {{"self", x}, {"dim", dims}}));
  }
  return n.set_output(0, out);
}

Status convert_expand(TorchNode& n) {
  std::vector<int64_t> size;
  if (n.target() == "aten.expand_as.default") {
    ETC_ASSIGN_OR_RETURN(const Entry* other, n.entry("other"));
    size = other->shape;
  } else {
    ETC_ASSIGN_OR_RETURN(size, n.ints("size"));
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Expand, {{"self", x}, {"size", size}}));
  return n.set_output(0, out);
}

Status convert_slice(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim", 0));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> start, n.optional_int("start"));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> end, n.optional_int("end"));
  ETC_ASSIGN_OR_RETURN(int64_t step, n.int_arg("step", 1));
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ArgValue s = start ? ArgValue(*start) : ArgValue(std::monostate{});
  ArgValue e = end ? ArgValue(*end) : ArgValue(std::monostate{});
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::SliceTensor,
                          {{"self", x}, {"dim", dim}, {"start", s}, {"end", e}, {"step", step}}));
  return n.set_output(0, out);
}

Status convert_select(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(int64_t index, n.int_arg("index"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::SelectInt, {{"self", x}, {"dim", dim}, {"index", index}}));
  return n.set_output(0, out);
}

Status convert_cat(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim", 0));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> xs, n.tensors("tensors"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Cat, {{"tensors", xs}, {"dim", dim}}));
  return n.set_output(0, out);
}

// clone, alias, contiguous, detach, lift_fresh_copy, dropout in inference: the value itself.
Converter identity(const char* arg = "self") {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry(arg));
    if (self->known && !self->value) return n.set_known_output(0, *self->known);
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor(arg));
    return n.set_output(0, x);
  };
}

// Dropout in training mode, as ATen's native_dropout: a mask drawn at run time, each element
// kept with probability 1 - p (a uniform draw below 1 - p, one generator per rand
// instruction), and the output input * mask * scale with scale 1 / (1 - p) (0 when p = 1),
// multiplied in that order as ATen does. Returns {output, mask (bool)}.
Result<std::pair<ValueId, ValueId>> emit_dropout_train(TorchNode& n, ValueId x, double p) {
  if (!(p >= 0.0 && p <= 1.0))
    return n.invalid("dropout probability must be in [0, 1], got " + std::to_string(p));
  if (!dtype_is_float(n.dtype(x))) {
    return n.unsupported("dropout in training mode of a " + std::string(dtype_name(n.dtype(x))) +
                         " tensor (ATen takes floating-point tensors)");
  }
  const double keep = 1.0 - p;
  ETC_ASSIGN_OR_RETURN(ValueId draw,
                       n.emit(OpKind::Rand, {{"size", n.sizes(x)}, {"dtype", DType::kFloat32}}));
  ETC_ASSIGN_OR_RETURN(ValueId mask,
                       n.emit(OpKind::LtScalar, {{"self", draw}, {"other", Scalar{keep}}}));
  ETC_ASSIGN_OR_RETURN(ValueId kept, n.emit(OpKind::MulTensor, {{"self", x}, {"other", mask}}));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::MulScalar,
                              {{"self", kept}, {"other", Scalar{keep == 0.0 ? 0.0 : 1.0 / keep}}}));
  return std::pair{out, mask};
}

// dropout(input, p, train) / dropout_(self, p, train): the input itself in inference.
Status convert_dropout(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(bool train, n.bool_arg("train"));
  const bool in_place = n.has("self");
  const char* arg = in_place ? "self" : "input";
  ETC_ASSIGN_OR_RETURN(double p, n.float_arg("p"));
  if (!train || p == 0.0) return identity(arg)(n);
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor(arg));
  ETC_ASSIGN_OR_RETURN(auto drop, emit_dropout_train(n, x, p));
  if (in_place) ETC_RETURN_IF_ERROR(n.rebind(arg, drop.first));
  return n.set_output(0, drop.first);
}

Status convert_to_copy(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
  return cast_to(n, d.value_or(self->dtype));
}

// new_zeros / new_ones / new_full / new_empty(self, size, fill_value?, *, dtype): a tensor of
// `size` in self's dtype unless dtype says otherwise.
Converter new_fill(std::optional<double> value) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints("size"));
    double v = value.value_or(0.0);
    if (!value) {
      ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("fill_value"));
      v = s.to_double();
    }
    ETC_ASSIGN_OR_RETURN(DType d, creation_dtype(n, self->dtype));
    ETC_RETURN_IF_ERROR(check_known_size(n, shape));
    return n.set_known_output(0, known_full(d, shape, v));
  };
}

// fill.Scalar(self, value): self's shape and dtype, every element value.
Status convert_fill_scalar(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(Scalar v, n.scalar("value"));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::FullLike, {{"self", x}, {"fill_value", v}, {"dtype", n.dtype(x)}}));
  return n.set_output(0, out);
}

// native_dropout(input, p, train) -> (output, mask): in inference (or with p = 0) the input
// and an all-true mask; in training as emit_dropout_train.
Status convert_native_dropout(TorchNode& n) {
  // train=None means training, as in ATen.
  ETC_ASSIGN_OR_RETURN(bool train, n.bool_arg("train", true));
  ETC_ASSIGN_OR_RETURN(double p, n.float_arg("p"));
  ETC_ASSIGN_OR_RETURN(const Entry* x, n.entry("input"));
  const std::vector<int64_t> shape = x->shape;
  ETC_ASSIGN_OR_RETURN(ValueId v, n.tensor("input"));
  if (train && p > 0.0) {
    ETC_ASSIGN_OR_RETURN(auto drop, emit_dropout_train(n, v, p));
    ETC_RETURN_IF_ERROR(n.set_output(0, drop.first));
    return n.num_outputs() > 1 ? n.set_output(1, drop.second) : Status();
  }
  ETC_RETURN_IF_ERROR(n.set_output(0, v));
  if (n.num_outputs() > 1 && n.output_used(1)) {
    ETC_RETURN_IF_ERROR(check_known_size(n, shape));
    ETC_RETURN_IF_ERROR(n.set_known_output(1, known_full(DType::kBool, shape, 1.0)));
  }
  return Status();
}

Status convert_noop(TorchNode&) {
  return Status();
}

}  // namespace

std::optional<std::string> torch_refusal(const std::string& target) {
  auto starts = [&](std::string_view p) { return target.rfind(p, 0) == 0; };
  if (starts("aten.fft_") || starts("aten._fft_") || starts("aten.stft.") ||
      starts("aten.istft.") || starts("aten.view_as_complex.") || starts("aten.view_as_real.") ||
      starts("aten.complex.") || starts("aten.polar.")) {
    return "complex numbers: etc's tensors have no complex dtype (an FFT's spectrum is complex); "
           "compute the transform outside the exported program, or as real-valued products "
           "(a DFT matrix)";
  }
  if (target == "aten.item.default" || target == "aten._local_scalar_dense.default") {
    return "a number read from tensor data at run time (Tensor.item()) and used as a Python "
           "number: etc fixes every number at export; keep the value a tensor (x.reshape(()) "
           "or torch.where instead of x.item())";
  }
  return std::nullopt;
}

const std::map<std::string, Converter>& torch_converters() {
  static const std::map<std::string, Converter> table = [] {
    std::map<std::string, Converter> t;
    t["aten.add.Tensor"] = binary(OpKind::AddTensor, OpKind::AddScalar, true);
    t["aten.add_.Tensor"] = binary(OpKind::AddTensor, OpKind::AddScalar, true, true);
    t["aten.add.Scalar"] = binary(OpKind::AddTensor, OpKind::AddScalar, true);
    t["aten.sub.Tensor"] = binary(OpKind::SubTensor, OpKind::SubScalar, true);
    t["aten.sub.Scalar"] = binary(OpKind::SubTensor, OpKind::SubScalar, true);
    t["aten.sub_.Tensor"] = binary(OpKind::SubTensor, OpKind::SubScalar, true, true);
    t["aten.mul.Tensor"] = binary(OpKind::MulTensor, OpKind::MulScalar, false);
    t["aten.mul_.Tensor"] = binary(OpKind::MulTensor, OpKind::MulScalar, false, true);
    t["aten.mul.Scalar"] = binary(OpKind::MulTensor, OpKind::MulScalar, false);
    t["aten.div.Tensor"] = binary(OpKind::DivTensor, OpKind::DivScalar, false);
    t["aten.div.Scalar"] = binary(OpKind::DivTensor, OpKind::DivScalar, false);
    t["aten.div_.Tensor"] = binary(OpKind::DivTensor, OpKind::DivScalar, false, true);
    t["aten.div.Tensor_mode"] = convert_div_mode;
    t["aten.div.Scalar_mode"] = convert_div_mode;
    // Python's // on tensors.
    t["aten.floor_divide.default"] =
        binary_math_op(OpKind::DivTensorMode, OpKind::DivScalarMode, "floor");
    t["aten.floor_divide.Scalar"] =
        binary_math_op(OpKind::DivTensorMode, OpKind::DivScalarMode, "floor");
    t["aten.rsub.Scalar"] = convert_rsub;
    t["aten.pow.Tensor_Scalar"] = convert_pow;
    t["aten.where.self"] = convert_where;
    t["aten.where.ScalarOther"] = convert_where;
    t["aten.where.ScalarSelf"] = convert_where;
    t["aten.where.Scalar"] = convert_where;

    t["aten.eq.Scalar"] = compare_scalar(OpKind::EqScalar);
    t["aten.logical_not.default"] = convert_logical_not;
    t["aten.any.dim"] = convert_any_dim;

    t["aten.neg.default"] = unary(OpKind::Neg);
    t["aten.relu.default"] = unary(OpKind::Relu);
    t["aten.relu_.default"] = unary(OpKind::Relu, true);
    t["aten.sigmoid.default"] = unary(OpKind::Sigmoid);
    t["aten.tanh.default"] = unary(OpKind::Tanh);
    t["aten.exp.default"] = unary(OpKind::Exp);
    t["aten.log.default"] = unary(OpKind::Log);
    t["aten.sqrt.default"] = unary(OpKind::Sqrt);
    t["aten.rsqrt.default"] = unary(OpKind::Rsqrt);
    t["aten.erf.default"] = unary(OpKind::Erf);
    t["aten.silu.default"] = unary(OpKind::Silu);
    t["aten.silu_.default"] = unary(OpKind::Silu, true);
    t["aten.hardswish.default"] = unary(OpKind::Hardswish);
    t["aten.hardswish_.default"] = unary(OpKind::Hardswish, true);
    t["aten.hardsigmoid.default"] = unary(OpKind::Hardsigmoid);
    t["aten.hardsigmoid_.default"] = unary(OpKind::Hardsigmoid, true);
    t["aten.hardtanh.default"] = hardtanh(false);
    t["aten.hardtanh_.default"] = hardtanh(true);
    t["aten.clamp.default"] = clamp(true, true);
    t["aten.clamp_min.default"] = clamp(true, false);
    t["aten.clamp_max.default"] = clamp(false, true);
    t["aten.clamp.Tensor"] = clamp(true, true);
    t["aten.clamp_min.Tensor"] = clamp(true, false);
    t["aten.clamp_max.Tensor"] = clamp(false, true);
    t["aten.gelu.default"] = convert_gelu;
    t["aten.leaky_relu.default"] = convert_leaky_relu;
    t["aten.elu.default"] = convert_elu;
    t["aten.selu.default"] = convert_selu;
    // The binary math ops: each tensor form of binary_math.def by its own name; the scalar
    // forms (which Core ATen also writes with a 0-d tensor as `other`); the default export's
    // operator aliases; pow with a number as its base.
#define ETC_BINARY_FN(fn, kind, expr)
#define ETC_BINARY_OP(op, fn, form, onnx)                    \
  if (binary_math::Form::form == binary_math::Form::kTensor) \
    t[op_info(OpKind::op).name] = binary_math_op(OpKind::op, std::nullopt);
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN
    t["aten.ne.Scalar"] = binary_math_op(OpKind::NeTensor, OpKind::NeScalar);
    t["aten.lt.Scalar"] = binary_math_op(OpKind::LtTensor, OpKind::LtScalar);
    t["aten.le.Scalar"] = binary_math_op(OpKind::LeTensor, OpKind::LeScalar);
    t["aten.gt.Scalar"] = binary_math_op(OpKind::GtTensor, OpKind::GtScalar);
    t["aten.ge.Scalar"] = binary_math_op(OpKind::GeTensor, OpKind::GeScalar);
    t["aten.bitwise_and.Scalar"] =
        binary_math_op(OpKind::BitwiseAndTensor, OpKind::BitwiseAndScalar);
    t["aten.bitwise_or.Scalar"] = binary_math_op(OpKind::BitwiseOrTensor, OpKind::BitwiseOrScalar);
    t["aten.bitwise_xor.Scalar"] =
        binary_math_op(OpKind::BitwiseXorTensor, OpKind::BitwiseXorScalar);
    t["aten.fmod.Scalar"] = binary_math_op(OpKind::FmodTensor, OpKind::FmodScalar);
    t["aten.remainder.Scalar"] = binary_math_op(OpKind::RemainderTensor, OpKind::RemainderScalar);
    t["aten.__and__.Tensor"] = t["aten.bitwise_and.Tensor"];
    t["aten.__or__.Tensor"] = t["aten.bitwise_or.Tensor"];
    t["aten.__xor__.Tensor"] = t["aten.bitwise_xor.Tensor"];
    t["aten.__and__.Scalar"] = t["aten.bitwise_and.Scalar"];
    t["aten.__or__.Scalar"] = t["aten.bitwise_or.Scalar"];
    t["aten.__xor__.Scalar"] = t["aten.bitwise_xor.Scalar"];
    t["aten.pow.Scalar"] = binary_math_op(OpKind::PowTensorTensor, std::nullopt);
#define ETC_UNARY_MATH(op, kind, onnx, expr) \
  t[op_info(OpKind::op).name] = unary_math_op(OpKind::op);
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH

    t["aten.arange.default"] = convert_arange;
    t["aten.arange.start"] = convert_arange;
    t["aten.arange.start_step"] = convert_arange;
    t["aten.full.default"] = fill(std::nullopt, false);
    t["aten.zeros.default"] = fill(0.0, false);
    t["aten.rand.default"] = random_op(OpKind::Rand);
    t["aten.randn.default"] = random_op(OpKind::Randn);
    t["aten.randperm.default"] = random_op(OpKind::Randperm);
    t["aten.ones.default"] = fill(1.0, false);
    t["aten.full_like.default"] = fill(std::nullopt, true);
    t["aten.zeros_like.default"] = fill(0.0, true);
    t["aten.ones_like.default"] = fill(1.0, true);
    t["aten.scalar_tensor.default"] = convert_scalar_tensor;

    t["aten.view.default"] = reshape_like("size");
    t["aten._unsafe_view.default"] = reshape_like("size");
    t["aten.reshape.default"] = reshape_like("shape");
    t["aten.flatten.using_ints"] = convert_flatten;
    t["aten.permute.default"] = convert_permute;
    t["aten.transpose.int"] = convert_transpose;
    t["aten.t.default"] = convert_t;
    t["aten.unsqueeze.default"] = convert_unsqueeze;
    t["aten.squeeze.dim"] = convert_squeeze;
    t["aten.squeeze.dims"] = convert_squeeze;
    t["aten.squeeze.default"] = convert_squeeze;
    t["aten.expand.default"] = convert_expand;
    t["aten.expand_as.default"] = convert_expand;
    t["aten.slice.Tensor"] = convert_slice;
    t["aten.select.int"] = convert_select;
    t["aten.cat.default"] = convert_cat;
    t["aten.clone.default"] = identity();
    t["aten.alias.default"] = identity();
    t["aten.contiguous.default"] = identity();
    t["aten.detach.default"] = identity();
    t["aten.detach_.default"] = identity();
    t["aten.lift_fresh_copy.default"] = identity();
    t["aten.dropout.default"] = convert_dropout;
    t["aten.dropout_.default"] = convert_dropout;
    t["aten._to_copy.default"] = convert_to_copy;
    t["aten.to.dtype"] = convert_to_copy;
    t["aten._assert_tensor_metadata.default"] = convert_noop;
    // A tensor subclass's inner tensor (torchao's quantized weights: qdata, scale).
    t["export.access_subclass_inner_tensor.default"] = [](TorchNode& n) -> Status {
      ETC_ASSIGN_OR_RETURN(std::string attr, n.string_arg("attr", std::nullopt));
      ETC_ASSIGN_OR_RETURN(ValueId v, n.subclass_inner_tensor("src_subclass_tensor", attr));
      return n.set_output(0, v);
    };
    t["aten.new_zeros.default"] = new_fill(0.0);
    t["aten.new_ones.default"] = new_fill(1.0);
    t["aten.new_empty.default"] = new_fill(0.0);
    t["aten.new_full.default"] = new_fill(std::nullopt);
    t["aten.empty.memory_format"] = fill(0.0, false);
    t["aten.empty_strided.default"] = fill(0.0, false);
    t["aten.fill.Scalar"] = convert_fill_scalar;
    t["aten.native_dropout.default"] = convert_native_dropout;

    add_nn_converters(t);
    add_attention_converters(t);
    add_movement_converters(t);
    add_symbolic_converters(t);
    add_reduce_converters(t);
    add_position_converters(t);
    add_volume_converters(t);
    add_segment_converters(t);
    add_quantized_converters(t);
    add_composite_converters(t);
    return t;
  }();
  return table;
}

}  // namespace etc::torch_import
