// Tensor element types, their names in graph JSON and safetensors, their ExecuTorch
// ScalarType numbers, and ATen's type promotion rules.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>

namespace etc {

enum class DType : uint8_t {
#define ETC_DTYPE(e, name, st, bytes, kind) e,
#include "graph/dtypes.def"
#undef ETC_DTYPE
};

enum class DTypeKind : uint8_t { kBool, kInt, kFloat };

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// The comma-separated list of valid names, for error messages.
std::string_view dtype_names();
int64_t dtype_size(DType t);
DTypeKind dtype_kind(DType t);
inline bool dtype_is_float(DType t) {
  return dtype_kind(t) == DTypeKind::kFloat;
}
inline bool dtype_is_integral(DType t) {
  return dtype_kind(t) != DTypeKind::kFloat;
}
// ExecuTorch's ScalarType enum value (schema/scalar_type.fbs).
int8_t dtype_to_scalar_type(DType t);
std::optional<DType> dtype_from_scalar_type(int scalar_type);
// safetensors' dtype strings ("F32", "BF16", "I64", "BOOL", ...).
std::optional<DType> dtype_from_safetensors(std::string_view name);
std::string_view dtype_safetensors_name(DType t);

// Reads one element of type `t` at `p` as a double (float16/bfloat16 widened exactly).
double load_as_double(DType t, const void* p);

// Writes `v` as one element of floating dtype `t` at `p` (rounded to nearest even for
// float16/bfloat16/float32).
void store_float_as(DType t, double v, void* p);

// Reads one element of type `t` at `p` as an int64: integers exactly, bool as 0/1, floats
// truncated toward zero (NaN and infinities 0, beyond +-9.2e18 saturated).
int64_t load_as_int64(DType t, const void* p);

// Writes `v` as one element of type `t` at `p`: integers wrap as a C++ cast would (two's
// complement truncation), bool is v != 0, floats round to nearest.
void store_int_as(DType t, int64_t v, void* p);

// The ONNX/ATen cast of one element from `from` at `in` to `to` at `out`: to bool is != 0,
// float to integer truncates toward zero (NaN 0, beyond int64 INT64_MIN, as x86 converts:
// defined where C++ and ATen leave it undefined), integer to integer wraps, to float rounds to
// nearest.
void convert_element(DType from, const void* in, DType to, void* out);

// ATen's promote_types for two tensor dtypes: bool < integers < floats; within integers
// the wider signed type (uint8 with int8 gives int16); float16 with bfloat16 gives float32.
DType promote_types(DType a, DType b);

// One operand of ATen's result_type: a tensor with dims, a zero-dim tensor, or a Python
// number (an int is int64, a float float32, a bool bool).
struct TypeOperand {
  enum class Rank : uint8_t { kDims, kZeroDim, kNumber };
  DType dtype;
  Rank rank;
};
// ATen's result_type: the dtype an op computes in. Zero-dim tensors can only lift the
// category (bool < integer < float) of the tensors with dims, numbers only that of both.
DType result_type(std::span<const TypeOperand> operands);
inline DType result_type(std::initializer_list<TypeOperand> operands) {
  return result_type(std::span<const TypeOperand>(operands.begin(), operands.size()));
}

}  // namespace etc
