// Integer arithmetic that wraps in two's complement, as ATen's integer kernels do, without
// undefined behaviour: computed in the unsigned type. For floating-point types these are the
// plain operations (neg keeps -0.0). Shared by the CPU kernels and the CUDA kernels.
#pragma once

#include <type_traits>

#if defined(__CUDACC__)
#define ETC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ETC_HOST_DEVICE inline
#endif

namespace etc {

template <typename T>
ETC_HOST_DEVICE T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
ETC_HOST_DEVICE T wrapping_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}

template <typename T>
ETC_HOST_DEVICE T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

template <typename T>
ETC_HOST_DEVICE T wrapping_neg(T a) {
  if constexpr (std::is_integral_v<T>) {
    return wrapping_sub(T(0), a);  // -INT_MIN is INT_MIN
  } else {
    return -a;  // -(+0.0) is -0.0
  }
}

}  // namespace etc
