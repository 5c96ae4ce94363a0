// etc::weight_only_linear (ops.def): a linear layer whose weight is stored quantized, int8 or
// 4-bit two a byte (graph/int4.h), with a scale and an optional zero point per group of
// `group_size` inputs of each output. It is the one op a CUDA delegate runs for torchao's
// weight-only chain (unpack, _to_copy, sub, mul, reshape, linear: passes/fuse_weight_only.h),
// so that the GPU reads the packed weight instead of a float copy of it.
//
// Its value, element by element, is the chain's: with R rounding a float32 to the input's
// dtype (nothing for float32),
//   w[n, k]   = R(R(q[n, k] - zero[n, k / group_size]) * scale[n, k / group_size])
//   out[.., n] = R(sum_k input[.., k] * w[n, k] + bias[n]), the sum in float32.
// (No zero point: w = R(q * scale).)
//
// The zero point is int8 or of the input's dtype (an int8 one is widened exactly: torchao's
// programs keep large zero points int8 and widen them with their own _to_copy).
//
// This header holds the rule every part checks the same way: shape inference, the CPU
// reference kernel and the CUDA kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "graph/dtype.h"
#include "graph/int4.h"

namespace etc::weight_only {

// The sizes of one call: out is input's leading dims then n; k inputs in k / group_size groups.
struct Geometry {
  int64_t n = 0, k = 0, groups = 0, group_size = 1;
  bool int4 = false;  // weight is uint8 [n, ceil(k / 2)]: 4-bit values two a byte
};

// One tensor argument as the rule sees it.
struct Operand {
  DType dtype;
  std::span<const int64_t> sizes;
};

inline std::string sizes_str(std::span<const int64_t> sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

// The call's geometry, or the argument that breaks the rule and what is wrong with it.
struct Problem {
  const char* arg;
  std::string message;
};
inline std::optional<Problem> check(const Operand& input, const Operand& weight,
                                    const Operand& scale, const Operand* zero, int64_t group_size,
                                    const Operand* bias, Geometry* g) {
  auto same_dtype = [&](const char* arg, const Operand& o) -> std::optional<Problem> {
    if (o.dtype == input.dtype) return std::nullopt;
    return Problem{arg, std::string("expected ") + std::string(dtype_name(input.dtype)) +
                            " (the input's dtype), got " + std::string(dtype_name(o.dtype))};
  };
  if (input.dtype != DType::kFloat32 && input.dtype != DType::kFloat16 &&
      input.dtype != DType::kBFloat16)
    return Problem{"input", "expected float32, float16 or bfloat16, got " +
                                std::string(dtype_name(input.dtype))};
  if (input.sizes.empty()) return Problem{"input", "expected a tensor of rank 1 or more"};
  g->k = input.sizes.back();
  if (weight.sizes.size() != 2)
    return Problem{"weight",
                   "expected rank 2 [out features, in features], got " + sizes_str(weight.sizes)};
  g->n = weight.sizes[0];
  if (weight.dtype == DType::kUInt8) {
    g->int4 = true;
    if (weight.sizes[1] != int4::row_bytes(g->k))
      return Problem{"weight", "4-bit weight " + sizes_str(weight.sizes) + " holds rows of " +
                                   std::to_string(weight.sizes[1]) + " bytes; " +
                                   std::to_string(g->k) + " input features take " +
                                   std::to_string(int4::row_bytes(g->k))};
  } else if (weight.dtype == DType::kInt8) {
    g->int4 = false;
    if (weight.sizes[1] != g->k)
      return Problem{"weight", "weight " + sizes_str(weight.sizes) + " expects " +
                                   std::to_string(weight.sizes[1]) +
                                   " input features, the input has " + std::to_string(g->k)};
  } else {
    return Problem{"weight", "expected int8, or uint8 (4-bit values two a byte), got " +
                                 std::string(dtype_name(weight.dtype))};
  }
  if (group_size < 1 || (g->k % group_size) != 0)
    return Problem{"group_size", std::to_string(group_size) + " does not divide the " +
                                     std::to_string(g->k) + " input features"};
  g->group_size = group_size;
  g->groups = g->k / group_size;
  const int64_t per_group[2] = {g->n, g->groups};
  auto grouped = [&](const char* arg, const Operand& o) -> std::optional<Problem> {
    if (std::optional<Problem> p = same_dtype(arg, o)) return p;
    if (o.sizes.size() == 2 && o.sizes[0] == per_group[0] && o.sizes[1] == per_group[1])
      return std::nullopt;
    return Problem{arg, "expected " + sizes_str(per_group) + " (out features, groups), got " +
                            sizes_str(o.sizes)};
  };
  if (std::optional<Problem> p = grouped("scale", scale)) return p;
  if (zero != nullptr) {
    // An int8 zero point is widened exactly, as the program's own _to_copy of it would be.
    Operand z = *zero;
    if (z.dtype == DType::kInt8) z.dtype = input.dtype;
    if (std::optional<Problem> p = grouped("zero_point", z)) {
      if (zero->dtype != input.dtype && zero->dtype != DType::kInt8)
        p->message = std::string("expected int8 or ") + std::string(dtype_name(input.dtype)) +
                     " (the input's dtype), got " + std::string(dtype_name(zero->dtype));
      return p;
    }
  }
  if (bias != nullptr) {
    if (std::optional<Problem> p = same_dtype("bias", *bias)) return p;
    if (bias->sizes.size() != 1 || bias->sizes[0] != g->n)
      return Problem{"bias",
                     "expected [" + std::to_string(g->n) + "], got " + sizes_str(bias->sizes)};
  }
  return std::nullopt;
}

// check() over tensors of any type with `dtype` and `sizes` (the graph's TensorSpec, the
// runtime's TensorView); zero and bias null for None.
template <typename T>
std::optional<Problem> check_tensors(const T& input, const T& weight, const T& scale, const T* zero,
                                     int64_t group_size, const T* bias, Geometry* g) {
  auto operand = [](const T* t) {
    return t != nullptr ? std::optional<Operand>(Operand{t->dtype, t->sizes}) : std::nullopt;
  };
  const std::optional<Operand> z = operand(zero), b = operand(bias);
  return check({input.dtype, input.sizes}, {weight.dtype, weight.sizes}, {scale.dtype, scale.sizes},
               z ? &*z : nullptr, group_size, b ? &*b : nullptr, g);
}

}  // namespace etc::weight_only
