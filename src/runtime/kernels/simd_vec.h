// GCC's vector types for CPU kernels written once over them and built for each ISA (each
// build a function with its own target attribute): the compiler keeps a Vec16 in one zmm
// register (AVX-512), a Vec8 in one ymm (AVX2, AVX-512) or two xmm (the portable build).
// Loads and stores go through memcpy: any alignment, no aliasing questions.
#pragma once

#include <cstdint>
#include <cstring>

namespace etc::rt::kernels {

typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec8 __attribute__((vector_size(32)));

template <typename V>
__attribute__((always_inline)) inline V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename V>
__attribute__((always_inline)) inline void store_v(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// acc[p][q] += a[p * lda + k] * b[k * ldb + q * lanes + lane] for k in [k0, k1), in order,
// each one fused multiply-add (the kernels build with -ffp-contract=fast): P rows of a by NV
// vectors of b's columns, the inner loop of kernels that must sum as the GEMM does
// (pointwise_nhwc_f32, winograd_nhwc_f32).
template <typename V, int NV, int P>
__attribute__((always_inline)) inline void multiply_add_rows(const float* a, int64_t lda,
                                                             const float* b, int64_t ldb,
                                                             int64_t k0, int64_t k1,
                                                             V (&acc)[P][NV]) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  for (int64_t k = k0; k < k1; ++k) {
    V w[NV];
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q)
      w[q] = load_v<V>(b + k * ldb + q * kL);
#pragma GCC unroll 16
    for (int p = 0; p < P; ++p) {
      const float xb = a[p * lda + k];  // in every lane
#pragma GCC unroll 4
      for (int q = 0; q < NV; ++q)
        acc[p][q] = xb * w[q] + acc[p][q];
    }
  }
}

}  // namespace etc::rt::kernels
