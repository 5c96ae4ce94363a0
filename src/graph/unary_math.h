// The unary math ops of unary_math.def as C++: one struct per op with its Kind and its
// function, usable on the host and in CUDA device code (header-only, no etc dependencies).
//   unary_math::Sin::apply(x)          sin(x) in x's type
//   unary_math::Sin::kKind             Kind::kFloat
// Consumers that need the list itself include unary_math.def with their own ETC_UNARY_MATH.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "support/wrapping_math.h"  // ETC_HOST_DEVICE, wrapping_neg

namespace etc::unary_math {

// Which dtypes an op takes and what it computes in (unary_math.def explains each).
enum class Kind : uint8_t { kFloat, kNumeric, kAny, kIntegral, kPredicate };

namespace math {

// |x|; integers wrap as ATen's do (abs of the lowest int64 is itself), and -0.0 gives +0.0.
template <typename T>
ETC_HOST_DEVICE T abs(T x) {
  if constexpr (std::is_integral_v<T>) {
    return x < 0 ? wrapping_neg(x) : x;
  } else {
    return std::fabs(x);
  }
}

// Rounding is the identity on integers; round() rounds half to even, as ATen's.
template <typename T>
ETC_HOST_DEVICE T ceil(T x) {
  if constexpr (std::is_integral_v<T>) {
    return x;
  } else {
    return std::ceil(x);
  }
}
template <typename T>
ETC_HOST_DEVICE T floor(T x) {
  if constexpr (std::is_integral_v<T>) {
    return x;
  } else {
    return std::floor(x);
  }
}
// Half to even. On the host, float and double add and take away 2^23 (2^52), the size from
// which every value is an integer: the addition rounds to an integer in the default rounding
// mode, as nearbyint does, without a library call (so the loop vectorises; quantizing models
// rounds every activation).
template <typename T>
ETC_HOST_DEVICE T round(T x) {
  if constexpr (std::is_integral_v<T>) {
    return x;
  } else {
#if !defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      constexpr T kIntegral = std::is_same_v<T, float> ? T(0x1p23) : T(0x1p52);
      const T a = std::fabs(x);
      if (!(a < kIntegral)) return x;  // already an integer, or NaN / inf
      return std::copysign((a + kIntegral) - kIntegral, x);
    }
#endif
    return std::nearbyint(x);
  }
}
template <typename T>
ETC_HOST_DEVICE T trunc(T x) {
  if constexpr (std::is_integral_v<T>) {
    return x;
  } else {
    return std::trunc(x);
  }
}

// -1, 0 or 1 (ATen's (0 < x) - (x < 0): NaN and -0.0 give +0.0); a bool is itself.
template <typename T>
ETC_HOST_DEVICE T sign(T x) {
  if constexpr (std::is_same_v<T, bool>) {
    return x;
  } else {
    return static_cast<T>(static_cast<int>(T(0) < x) - static_cast<int>(x < T(0)));
  }
}

// ~x on integers, logical not on bool.
template <typename T>
ETC_HOST_DEVICE T bitwise_not(T x) {
  if constexpr (std::is_same_v<T, bool>) {
    return !x;
  } else {
    return static_cast<T>(~x);
  }
}

template <typename T>
ETC_HOST_DEVICE bool is_nan(T x) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isnan(x);
  }
}
template <typename T>
ETC_HOST_DEVICE bool is_inf(T x) {
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else {
    return std::isinf(x);
  }
}

}  // namespace math

#define ETC_UNARY_MATH(op, kind, onnx, expr)  \
  struct op {                                 \
    static constexpr Kind kKind = Kind::kind; \
    template <typename T>                     \
    ETC_HOST_DEVICE static auto apply(T x) {  \
      return expr;                            \
    }                                         \
  };
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH

}  // namespace etc::unary_math
