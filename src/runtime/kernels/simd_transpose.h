// 16 x 16 float transposes in AVX-512 registers and 8 x 8 ones in AVX2 registers, shared by
// the kernels that change layout between NCHW planes and channels side by side (the depthwise
// channel blocks, the channels-last copies around oneDNN's convolutions, the first layer's
// channels-last out). Callers check the CPU first (gemm_float_kernel()).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace etc::rt::kernels {

// r[i][j] <- r[j][i] for 16 vectors of 16 floats. (GCC 12 takes the shuffles'
// _mm512_undefined_ps() pass-through for an uninitialised read: -Wmaybe-uninitialized is off
// for this function and its callers' inlined copies.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 16; i += 8) {
    for (int k = 0; k < 4; ++k) {
      t[i + k] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0x88);
      t[i + k + 4] = _mm512_shuffle_f32x4(r[i + k], r[i + k + 4], 0xdd);
    }
  }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[k + 8], 0xdd);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// r[i][j] <- r[j][i] for 8 vectors of 8 floats.
__attribute__((target("avx2"))) inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // Per 128-bit half: rows i..i+3 of columns k (low half) and k + 4 (high half).
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x20);
    t[k + 4] = _mm256_permute2f128_ps(r[k], r[k + 4], 0x31);
  }
  for (int k = 0; k < 8; ++k)
    r[k] = t[k];
}

// The mask of the first min(n, 8) lanes, for AVX2's masked loads and stores.
__attribute__((target("avx2"))) inline __m256i first_lanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n < 8 ? n : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The mask of the first min(n, 16) lanes.
__attribute__((target("avx512f"))) inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // transpose16's shuffles (above)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// Channels [c0, c0 + cn) x positions [p0, p0 + pn) of x [C, P] (`plane` floats per channel)
// into out [P, C] (`channels` floats per position); cn, pn <= 16.
__attribute__((target("avx512f"))) inline void tile_to_channels_last_avx512(
    const float* x, int64_t channels, int64_t plane, int64_t c0, int64_t cn, int64_t p0, int64_t pn,
    float* out) {
  __m512 r[16];
  const __mmask16 along_p = first_lanes(pn), along_c = first_lanes(cn);
  for (int64_t k = 0; k < 16; ++k)
    r[k] = _mm512_maskz_loadu_ps(k < cn ? along_p : __mmask16(0), x + (c0 + k) * plane + p0);
  transpose16(r);
  for (int64_t j = 0; j < pn; ++j)
    _mm512_mask_storeu_ps(out + (p0 + j) * channels + c0, along_c, r[j]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace etc::rt::kernels
