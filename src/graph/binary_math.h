// The binary math of binary_math.def as C++: one struct per function with its Kind and its
// value, usable on the host and in CUDA device code (header-only).
//   binary_math::Lt::apply(x, y)      x < y in x's type
//   binary_math::Lt::kKind            Kind::kCompare
// Consumers that need the op list include binary_math.def with their own ETC_BINARY_FN and
// ETC_BINARY_OP.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "support/wrapping_math.h"  // ETC_HOST_DEVICE, wrapping_mul

namespace etc::binary_math {

// Which dtypes a function takes, what it computes in and gives (binary_math.def explains).
enum class Kind : uint8_t { kCompare, kLogical, kBitwise, kArith, kFloat };
// Whether an op's other operand is a tensor (broadcast) or a number.
enum class Form : uint8_t { kTensor, kScalar };

namespace binary {

// max / min that propagate NaN from either side, as ATen's maximum / minimum.
template <typename T>
ETC_HOST_DEVICE T maximum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
    if (y != y) return y;
  }
  return x < y ? y : x;
}
template <typename T>
ETC_HOST_DEVICE T minimum(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) return x;
    if (y != y) return y;
  }
  return y < x ? y : x;
}

// C's fmod (the sign of x). Integer division by zero is refused by the kernels before they
// compute; here it gives 0, as does the lowest integer by -1 (never a trap).
template <typename T>
ETC_HOST_DEVICE T fmod(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(x, y);
  } else {
    return (y == 0 || y == T(-1)) ? T(0) : static_cast<T>(x % y);
  }
}

// Python's remainder (the sign of y), as ATen's.
template <typename T>
ETC_HOST_DEVICE T remainder(T x, T y) {
  const T r = binary::fmod(x, y);
  return (r != T(0) && ((r < T(0)) != (y < T(0)))) ? static_cast<T>(r + y) : r;
}

// Division rounded toward zero (div with rounding_mode="trunc"): floats trunc(x / y) as
// ATen's; integers C's quotient (by zero: 0, refused by the kernels; the lowest by -1 wraps).
template <typename T>
ETC_HOST_DEVICE T div_trunc(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::trunc(x / y);
  } else {
    if (y == 0) return T(0);
    if (y == T(-1)) return wrapping_neg(x);
    return static_cast<T>(x / y);
  }
}

// Division rounded toward negative infinity (rounding_mode="floor", Python's //), as ATen's
// div_floor: floats from fmod so that x == y * q + fmod(x, y) holds exactly, the quotient
// rounded to the nearest integer; by zero x / y (inf or NaN); integers floored.
template <typename T>
ETC_HOST_DEVICE T div_floor(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (y == T(0)) return x / y;
    const T mod = std::fmod(x, y);
    T div = (x - mod) / y;
    if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), x / y);
    T floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
    return floordiv;
  } else {
    if (y == 0) return T(0);
    if (y == T(-1)) return wrapping_neg(x);
    const T q = static_cast<T>(x / y);
    return ((x % y) != 0 && ((x < 0) != (y < 0))) ? static_cast<T>(q - 1) : q;
  }
}

// x ** y; integers by repeated squaring, wrapping as ATen's (a negative exponent is refused
// by the kernels; here it gives what integer division would: 1 / x truncated).
template <typename T>
ETC_HOST_DEVICE T pow(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(x, y);
  } else if constexpr (std::is_same_v<T, bool>) {
    return x || !y;
  } else {
    if (y < 0) return x == 1 ? T(1) : x == T(-1) ? ((y & 1) ? T(-1) : T(1)) : T(0);
    T result = 1, base = x;
    for (T e = y; e > 0; e >>= 1) {
      if (e & 1) result = wrapping_mul(result, base);
      base = wrapping_mul(base, base);
    }
    return result;
  }
}

}  // namespace binary

#define ETC_BINARY_FN(fn, kind, expr)             \
  struct fn {                                     \
    static constexpr Kind kKind = Kind::kind;     \
    template <typename T>                         \
    ETC_HOST_DEVICE static auto apply(T x, T y) { \
      return expr;                                \
    }                                             \
  };
#define ETC_BINARY_OP(op, fn, form, onnx)
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN

}  // namespace etc::binary_math
