// 16 x 16 float transposes in AVX-512 registers and 8 x 8 ones in AVX2 registers, shared by
// the kernels that change layout between NCHW planes and channels side by side (the depthwise
// channel blocks, the channels-last copies around oneDNN's convolutions, the first layer's
// channels-last out, the copy-out of 1x1 layers computed position by position). Callers check
// the CPU first (gemm_float_kernel()), or call transpose_tile, which takes the build to use.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// r[i][j] <- r[j][i] for 16 vectors of 16 floats. (GCC 12 takes the shuffles'
// _mm512_undefined_ps() pass-through for an uninitialised read: -Wmaybe-uninitialized is off
// for this function and its callers' inlined copies.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,fma"))) inline void transpose16(__m512 (&r)[16]) {
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
__attribute__((target("avx512f,fma"))) inline __mmask16 first_lanes(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // transpose16's shuffles (above)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// dst[j * dst_ld + i] = src[i * src_ld + j] (+ add[j] when `add` is given) for i < rows and
// j < cols, both at most 16: one tile of a layout change between [C, P] planes and [P, C]
// channels-last rows. Lanes outside the tile are neither read nor written.
__attribute__((target("avx512f,fma"))) inline void transpose_tile_avx512(
    const float* src, int64_t src_ld, int64_t rows, int64_t cols, float* dst, int64_t dst_ld,
    const float* add = nullptr) {
  __m512 r[16];
  const __mmask16 along_cols = first_lanes(cols), along_rows = first_lanes(rows);
  for (int64_t i = 0; i < 16; ++i)
    r[i] = _mm512_maskz_loadu_ps(i < rows ? along_cols : __mmask16(0), src + i * src_ld);
  transpose16(r);
  for (int64_t j = 0; j < cols; ++j) {
    const __m512 v = add != nullptr ? _mm512_add_ps(r[j], _mm512_set1_ps(add[j])) : r[j];
    _mm512_mask_storeu_ps(dst + j * dst_ld, along_rows, v);
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// transpose_tile_avx512 for rows, cols <= 8 in AVX2 registers.
__attribute__((target("avx2"))) inline void transpose_tile8_avx2(const float* src, int64_t src_ld,
                                                                 int64_t rows, int64_t cols,
                                                                 float* dst, int64_t dst_ld,
                                                                 const float* add) {
  __m256 r[8];
  const __m256i along_cols = first_lanes8(cols);
  for (int64_t i = 0; i < 8; ++i) {
    r[i] = i >= rows   ? _mm256_setzero_ps()
           : cols == 8 ? _mm256_loadu_ps(src + i * src_ld)
                       : _mm256_maskload_ps(src + i * src_ld, along_cols);
  }
  transpose8(r);
  const __m256i along_rows = first_lanes8(rows);
  for (int64_t j = 0; j < cols; ++j) {
    const __m256 v = add != nullptr ? _mm256_add_ps(r[j], _mm256_set1_ps(add[j])) : r[j];
    if (rows == 8) {
      _mm256_storeu_ps(dst + j * dst_ld, v);
    } else {
      _mm256_maskstore_ps(dst + j * dst_ld, along_rows, v);
    }
  }
}

// transpose_tile_avx512 as four 8 x 8 tiles in AVX2 registers.
__attribute__((target("avx2"))) inline void transpose_tile_avx2(const float* src, int64_t src_ld,
                                                                int64_t rows, int64_t cols,
                                                                float* dst, int64_t dst_ld,
                                                                const float* add = nullptr) {
  for (int64_t i = 0; i < rows; i += 8) {
    for (int64_t j = 0; j < cols; j += 8) {
      transpose_tile8_avx2(src + i * src_ld + j, src_ld, rows - i < 8 ? rows - i : 8,
                           cols - j < 8 ? cols - j : 8, dst + j * dst_ld + i, dst_ld,
                           add != nullptr ? add + j : nullptr);
    }
  }
}

// transpose_tile_avx512 through registers of the build `isa` names (gemm_float_kernel()),
// element by element on CPUs without AVX2. Every build gives the same bits.
inline void transpose_tile(FloatKernel isa, const float* src, int64_t src_ld, int64_t rows,
                           int64_t cols, float* dst, int64_t dst_ld, const float* add = nullptr) {
  switch (isa) {
    case FloatKernel::kAvx512:
      return transpose_tile_avx512(src, src_ld, rows, cols, dst, dst_ld, add);
    case FloatKernel::kAvx2:
      return transpose_tile_avx2(src, src_ld, rows, cols, dst, dst_ld, add);
    case FloatKernel::kPortable:
      break;
  }
  for (int64_t j = 0; j < cols; ++j) {
    const float a = add != nullptr ? add[j] : 0.0f;
    for (int64_t i = 0; i < rows; ++i)
      dst[j * dst_ld + i] = add != nullptr ? src[i * src_ld + j] + a : src[i * src_ld + j];
  }
}

}  // namespace etc::rt::kernels
