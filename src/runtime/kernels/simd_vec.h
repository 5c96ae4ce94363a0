// GCC's vector types for CPU kernels written once over them and built for each ISA (each
// build a function with its own target attribute): the compiler keeps a Vec16 in one zmm
// register (AVX-512), a Vec8 in one ymm (AVX2, AVX-512) or two xmm (the portable build).
// Loads and stores go through memcpy: any alignment, no aliasing questions.
#pragma once

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

}  // namespace etc::rt::kernels
