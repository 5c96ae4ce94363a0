// Packed, cache-blocked GEMM with register-blocked micro-kernels (see gemm.h).
#include "runtime/kernels/gemm.h"

#include "runtime/kernels/gemm_dequant.h"
#include "runtime/kernels/gemm_kernels.h"
#include "runtime/kernels/gemm_transposed.h"
#include "runtime/kernels/gemm_wide16.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_transpose.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace etc::rt::kernels {
namespace {

// Blocking: an MCxKC block of A stays in L2, a KCxNR sliver of B in L1 while the
// micro-kernel sweeps it, and the KCxNC panel of B in L3. MC and NC are multiples of every
// MR and NR used below.
constexpr int64_t kMC = 144;
constexpr int64_t kKC = kGemmKBlock;
constexpr int64_t kNC = 4064;

// The rows a tile starts from when a GEMM overwrites C without row values (at least MR).
constexpr float kZeroRows[16] = {};

// Per-thread packing buffers, 64-byte aligned, grown on demand and reused across calls
// (a model runs many small GEMMs; allocating per call would show in the profile).
template <typename T>
T* scratch(int slot, int64_t count) {
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
    ~Block() { std::free(p); }
  };
  thread_local Block blocks[2];
  Block& b = blocks[slot];
  size_t want = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
  if (b.bytes < want) {
    std::free(b.p);
    b.p = std::aligned_alloc(64, want);
    b.bytes = b.p != nullptr ? want : 0;
  }
  return static_cast<T*>(b.p);
}

// One 8-row panel of the AVX-512 micro-kernel from `rows` (<= 8) rows of contiguous floats
// `ld` apart: 8 x 8 blocks transposed in registers (the scalar loop stored one float at a
// time, a twelfth of a Whisper encoder's time), rows past the last zero.
__attribute__((target("avx2"))) void pack_a_panel8_avx2(const float* src, int64_t ld, int64_t rows,
                                                        int64_t kc, float* __restrict dst) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 r[8];
    for (int64_t i = 0; i < 8; ++i)
      r[i] = i < rows ? _mm256_loadu_ps(src + i * ld + p) : _mm256_setzero_ps();
    transpose8(r);
    for (int64_t j = 0; j < 8; ++j)
      _mm256_storeu_ps(dst + (p + j) * 8, r[j]);
  }
  for (; p < kc; ++p) {
    for (int64_t i = 0; i < 8; ++i)
      dst[p * 8 + i] = i < rows ? src[i * ld + p] : 0.0f;
  }
}

// Packs the mc x kc block of A at (i0, p0) as consecutive MR-row panels, each stored k-major
// (MR values per k), zero-padding the last panel.
template <typename T>
void pack_a(MatrixRef<T> a, int64_t i0, int64_t p0, int64_t mc, int64_t kc, int64_t mr,
            T* __restrict dst) {
  if (a.col_offsets != nullptr) {  // gathered: A[i, k] = data[row_offsets[i] + col_offsets[k]]
    for (int64_t ir = 0; ir < mc; ir += mr) {
      const int64_t rows = std::min(mr, mc - ir);
      const int64_t* ro = a.row_offsets + i0 + ir;
      for (int64_t p = 0; p < kc; ++p) {
        const T* base = a.data + a.col_offsets[p0 + p];
        T* d = dst + p * mr;
        if (mr == 8 && rows == 8) {  // the AVX-512 panels: a compile-time count
          for (int i = 0; i < 8; ++i)
            d[i] = base[ro[i]];
          continue;
        }
        for (int64_t i = 0; i < rows; ++i)
          d[i] = base[ro[i]];
        for (int64_t i = rows; i < mr; ++i)
          d[i] = T(0);
      }
      dst += mr * kc;
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int64_t rows = std::min(mr, mc - ir);
    const T* src = a.data + (i0 + ir) * a.row_stride + p0 * a.col_stride;
    if constexpr (std::is_same_v<T, float>) {
      // Row-major A on the AVX-512 panels (MR = 8 only there, on a CPU with AVX2).
      if (mr == 8 && a.col_stride == 1) {
        pack_a_panel8_avx2(src, a.row_stride, rows, kc, dst);
        dst += mr * kc;
        continue;
      }
    }
    if (a.row_stride == 1 && rows == mr) {  // column-major A: MR contiguous values per k
      for (int64_t p = 0; p < kc; ++p)
        std::memcpy(dst + p * mr, src + p * a.col_stride, mr * sizeof(T));
    } else {
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = src + i * a.row_stride;
        for (int64_t p = 0; p < kc; ++p)
          dst[p * mr + i] = row[p * a.col_stride];
      }
      for (int64_t i = rows; i < mr; ++i) {
        for (int64_t p = 0; p < kc; ++p)
          dst[p * mr + i] = T(0);
      }
    }
    dst += mr * kc;
  }
}

// One packed B panel of the vector micro-kernels from rows of contiguous floats: row p is
// src + offsets[p] (with offsets) or src + p * stride, its first `cols` values valid, the
// rest of the panel's NR zero. Vector loads and stores of a compile-time width: a per-row
// memcpy call (what GCC makes of a copy of run-time length) cost a fifth of a 64-channel
// convolution's GEMM.
__attribute__((target("avx512f,fma"))) void pack_panel_32_avx512(const float* src, int64_t stride,
                                                                 const int64_t* offsets, int64_t kc,
                                                                 int64_t cols,
                                                                 float* __restrict dst) {
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32  ? __mmask16(0xFFFF)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1)
                                   : 0;
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = offsets != nullptr ? src + offsets[p] : src + p * stride;
    _mm512_storeu_ps(dst + p * 32, _mm512_maskz_loadu_ps(m0, row));
    _mm512_storeu_ps(dst + p * 32 + 16, _mm512_maskz_loadu_ps(m1, row + 16));
  }
}

__attribute__((target("avx2,fma"))) void pack_panel_16_avx2(const float* src, int64_t stride,
                                                            const int64_t* offsets, int64_t kc,
                                                            int64_t cols, float* __restrict dst) {
  alignas(32) static constexpr int32_t kLanes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                     8, 9, 10, 11, 12, 13, 14, 15};
  const __m256i n = _mm256_set1_epi32(static_cast<int32_t>(cols));
  const __m256i m0 = _mm256_cmpgt_epi32(n, _mm256_load_si256((const __m256i*)kLanes));
  const __m256i m1 = _mm256_cmpgt_epi32(n, _mm256_load_si256((const __m256i*)(kLanes + 8)));
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = offsets != nullptr ? src + offsets[p] : src + p * stride;
    if (cols >= 16) {
      _mm256_storeu_ps(dst + p * 16, _mm256_loadu_ps(row));
      _mm256_storeu_ps(dst + p * 16 + 8, _mm256_loadu_ps(row + 8));
    } else {
      _mm256_storeu_ps(dst + p * 16, _mm256_maskload_ps(row, m0));
      _mm256_storeu_ps(dst + p * 16 + 8, _mm256_maskload_ps(row + 8, m1));
    }
  }
}

// Packs the kc x nc block of B at (p0, j0) as consecutive NR-column panels, each stored
// k-major (NR values per k), zero-padding the last panel.
template <typename T>
void pack_b(MatrixRef<T> b, int64_t p0, int64_t j0, int64_t kc, int64_t nc, int64_t nr,
            T* __restrict dst) {
  if constexpr (std::is_same_v<T, float>) {
    if (b.dequant != nullptr) {
      pack_dequant(gemm_float_kernel(), *b.dequant, p0, j0, kc, nc, nr, dst);
      return;
    }
    // Contiguous columns into the AVX-512 or AVX2 panels (nr says which micro-kernel, and
    // so that the CPU has its instructions).
    if (b.col_stride == 1 && (nr == 32 || nr == 16)) {
      const int64_t* offsets = b.row_offsets != nullptr ? b.row_offsets + p0 : nullptr;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const int64_t cols = std::min(nr, nc - jr);
        const float* src =
            offsets != nullptr ? b.data + j0 + jr : b.data + p0 * b.row_stride + j0 + jr;
        if (nr == 32) {
          pack_panel_32_avx512(src, b.row_stride, offsets, kc, cols, dst);
        } else {
          pack_panel_16_avx2(src, b.row_stride, offsets, kc, cols, dst);
        }
        dst += nr * kc;
      }
      return;
    }
    // B^T row-major (B's columns contiguous: a product by K^T read from K itself) into the
    // panels by 16 x 16 transposes through registers: the same values in the same places.
    if (b.row_stride == 1 && b.row_offsets == nullptr && (nr == 32 || nr == 16)) {
      const FloatKernel isa = nr == 32 ? FloatKernel::kAvx512 : FloatKernel::kAvx2;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const int64_t cols = std::min(nr, nc - jr);
        const float* src = b.data + p0 + (j0 + jr) * b.col_stride;
        for (int64_t j = 0; j < cols; j += 16) {
          for (int64_t p = 0; p < kc; p += 16) {
            transpose_tile(isa, src + j * b.col_stride + p, b.col_stride,
                           std::min<int64_t>(16, cols - j), std::min<int64_t>(16, kc - p),
                           dst + p * nr + j, nr);
          }
        }
        for (int64_t p = 0; p < kc; ++p)
          std::fill(dst + p * nr + cols, dst + p * nr + nr, 0.0f);
        dst += nr * kc;
      }
      return;
    }
  }
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min(nr, nc - jr);
    if (b.row_offsets != nullptr) {  // rows anywhere, each NR contiguous values per k
      const T* base = b.data + (j0 + jr) * b.col_stride;
      for (int64_t p = 0; p < kc; ++p) {
        const T* row = base + b.row_offsets[p0 + p];
        T* d = dst + p * nr;
        if (b.col_stride == 1) {
          std::copy_n(row, cols, d);
        } else {
          for (int64_t j = 0; j < cols; ++j)
            d[j] = row[j * b.col_stride];
        }
        std::fill(d + cols, d + nr, T(0));
      }
      dst += nr * kc;
      continue;
    }
    const T* src = b.data + p0 * b.row_stride + (j0 + jr) * b.col_stride;
    if (b.col_stride == 1 && cols == nr) {  // row-major B: NR contiguous values per k
      // A compile-time size lets the copy become a few vector moves.
      if (nr == 8) {
        for (int64_t p = 0; p < kc; ++p)
          std::memcpy(dst + p * 8, src + p * b.row_stride, 8 * sizeof(T));
      } else {
        for (int64_t p = 0; p < kc; ++p)
          std::memcpy(dst + p * nr, src + p * b.row_stride, nr * sizeof(T));
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const T* col = src + j * b.col_stride;
        for (int64_t p = 0; p < kc; ++p)
          dst[p * nr + j] = col[p * b.row_stride];
      }
      for (int64_t j = cols; j < nr; ++j) {
        for (int64_t p = 0; p < kc; ++p)
          dst[p * nr + j] = T(0);
      }
    }
    dst += nr * kc;
  }
}

// gemm_blocked for one row of A (a decode step's matrix-vector product): the same K and N
// blocks and the same per-element arithmetic as the tile kernels (row_kernel_f32_*), so the
// same bits, without packing A and without the tile's other rows. B is read in place where
// its rows are contiguous, else packed (or dequantized) a block at a time as gemm_blocked
// packs it. nr: the panel width of the ISA's tile kernel (32: AVX-512, 16: AVX2).
void gemm_one_row(int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
                  float* c, const PackedB* packed_b_all, int64_t col0, const GemmInit* init,
                  int64_t row0, int64_t nr) {
  const auto row = nr == 32 ? row_kernel_f32_avx512 : row_kernel_f32_avx2;
  const bool direct = packed_b_all == nullptr && b.dequant == nullptr && b.row_offsets == nullptr &&
                      b.col_stride == 1;
  float* scratch_b =
      packed_b_all != nullptr || direct
          ? nullptr
          : scratch<float>(1, std::min(kNC, (n + nr - 1) / nr * nr) * std::min(kKC, k));
  if (b.dequant != nullptr) {
    // A quantized B a panel at a time, through every K block before the next panel: the
    // panel's weight rows are read in order (a [N, K] weight's rows are a page apart: K
    // blocks outer would revisit each row after all the others). Each element of C still takes
    // its K blocks in order: the same bits.
    // 4-bit weights on AVX-512 are read by table lookup, each value dequantized as the steps
    // do but each column summed in 16 lanes: the one case of a decode step with its own bits,
    // not the unfused product's (gemm_dequant.h). Other int8 and 4-bit weights on AVX-512
    // skip the panel: dequantized in registers (the same bits).
    if (const int64_t block = nr == 32 ? row4_lut_block(gemm_float_kernel(), *b.dequant, k) : 0;
        block > 0) {
      float* arranged = scratch<float>(0, k);
      const LutRow form = row4_lut_arrange(*b.dequant, k, block, a.data, a.col_stride, arranged);
      const float* row_init =
          init != nullptr ? (init->rows != nullptr ? init->rows + row0 : kZeroRows) : nullptr;
      row4_lut_avx512(*b.dequant, k, block, form, 0, n, arranged, c, alpha, row_init);
      return;
    }
    const bool in_registers =
        nr == 32 && row_in_registers_applies(gemm_float_kernel(), *b.dequant, k, kKC);
    for (int64_t j = 0; j < n; j += nr) {
      const int64_t cols = std::min(nr, n - j);
      for (int64_t pc = 0; pc < k; pc += kKC) {
        const int64_t kc = std::min(kKC, k - pc);
        const float* tile_init = nullptr;
        if (init != nullptr && pc == 0)
          tile_init = init->rows != nullptr ? init->rows + row0 : kZeroRows;
        if (in_registers) {
          row_in_registers_avx512(*b.dequant, pc, kc, j, cols, a.data + pc * a.col_stride,
                                  a.col_stride, c + j, alpha, tile_init);
          continue;
        }
        pack_dequant(gemm_float_kernel(), *b.dequant, pc, j, kc, cols, nr, scratch_b);
        row(kc, a.data + pc * a.col_stride, a.col_stride, scratch_b, nr, c + j, alpha, cols,
            tile_init);
      }
    }
    return;
  }
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const float* panels = nullptr;
      if (packed_b_all != nullptr) {
        panels = packed_b_all->panels(pc, col0 + jc);
      } else if (!direct) {
        pack_b(b, pc, jc, kc, nc, nr, scratch_b);
        panels = scratch_b;
      }
      const float* tile_init = nullptr;
      if (init != nullptr && pc == 0)
        tile_init = init->rows != nullptr ? init->rows + row0 : kZeroRows;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const float* bp =
            panels != nullptr ? panels + jr * kc : b.data + pc * b.row_stride + jc + jr;
        row(kc, a.data + pc * a.col_stride, a.col_stride, bp, panels != nullptr ? nr : b.row_stride,
            c + jc + jr, alpha, std::min(nr, nc - jr), tile_init);
      }
    }
  }
}

// Asks for the mr x nr tile of C at c (pitch ldc) to be brought into L1 for writing, before
// its micro-kernel runs: read and written once per K block at the kernel's end, C's rows
// otherwise arrive one miss after another there (a product whose C outgrows L2, convnext's
// 3136 x 384: 35-40 -> 42 GFLOP/s on the Zen 1).
template <typename T>
void prefetch_tile(const T* c, int64_t ldc, int64_t mr, int64_t nr) {
  for (int64_t i = 0; i < mr; ++i) {
    const char* row = reinterpret_cast<const char*>(c + i * ldc);
    const int64_t bytes = nr * static_cast<int64_t>(sizeof(T));
    for (int64_t at = 0; at < bytes; at += 64)
      __builtin_prefetch(row + at, 1, 3);
    __builtin_prefetch(row + bytes - 1, 1, 3);
  }
}

// C[i, j] = cols[j] for the rows x n block of C at c (pitch ldc): a GemmInit's column values
// where a path takes row values only (and then accumulates).
void fill_from_cols(const float* cols, int64_t rows, int64_t n, float* c, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(c + i * ldc, cols, static_cast<size_t>(n) * sizeof(float));
}

// The row values the first K block of a path that takes row values only starts C from
// (rows counted from row0; null: accumulate). With column values, the m x n block of C at c
// is filled with them first and accumulated into.
const float* first_rows(const GemmInit* init, int64_t row0, int64_t m, int64_t n, float* c,
                        int64_t ldc) {
  if (init == nullptr) return nullptr;
  if (init->cols != nullptr) {
    fill_from_cols(init->cols, m, n, c, ldc);
    return nullptr;
  }
  return init->rows != nullptr ? init->rows + row0 : kZeroRows;
}

// With `packed` (float only), A's blocks come from it instead of being packed here, and
// this call's rows start at row `row0` of the packed matrix (a multiple of kMC).
// With `packed_b`, B's panels come from it, this call's columns starting at its column
// `col0` (a multiple of the panel width).
// With `init` (float only), C is not read: the first K block writes C = init.rows[row] (0
// without rows) + alpha * sum, rows counted from row0; or C = init.cols[col] + alpha * sum,
// columns counted from c.
template <typename T>
void gemm_blocked(int64_t m, int64_t n, int64_t k, T alpha, MatrixRef<T> a, MatrixRef<T> b, T* c,
                  int64_t ldc, const PackedA* packed = nullptr, int64_t row0 = 0,
                  const PackedB* packed_b_all = nullptr, int64_t col0 = 0,
                  const GemmInit* init = nullptr) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  GemmConfig<T> cfg = gemm_config(T{});
  if constexpr (std::is_same_v<T, float>) {
    if (packed != nullptr) cfg = float_config(packed->kernel());
    if (packed_b_all != nullptr) cfg = float_config(packed_b_all->kernel());
    const bool plain_rows = packed == nullptr && a.col_offsets == nullptr &&
                            a.row_offsets == nullptr &&
                            (init == nullptr || init->tile_done == nullptr);
    if (plain_rows && cfg.nr != 8 && b.dequant != nullptr &&
        (b.dequant->bits16 != nullptr || b.dequant->f32 != nullptr) && b.dequant->q_n == 1 &&
        (m == 1 || (m <= kWide16Rows && cfg.nr == 32))) {
      // A decode step or a short prompt over a 16-bit [K, N] weight (or one in panels, or a
      // float32 one in panels), read in place.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      wide16_rows(cfg.nr == 32, m, n, k, kKC, alpha, a, *b.dequant, c, ldc, rows_init);
      return;
    }
    if (m > 1 && m <= kRowsInRegisters && plain_rows && cfg.nr == 32 && b.dequant != nullptr &&
        rows_in_registers_applies(gemm_float_kernel(), *b.dequant, k, kKC)) {
      // A short prompt over a 4-bit weight: each value dequantized once for all its rows.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      for (int64_t j = 0; j < n; j += 32) {
        for (int64_t pc = 0; pc < k; pc += kKC) {
          rows_in_registers_avx512(*b.dequant, pc, std::min(kKC, k - pc), j,
                                   std::min<int64_t>(32, n - j), m, a.data + pc * a.col_stride,
                                   a.row_stride, a.col_stride, c + j, ldc, alpha,
                                   pc == 0 ? rows_init : nullptr);
        }
      }
      return;
    }
    if (m <= kWide16Rows && plain_rows && cfg.nr == 32 && b.dequant != nullptr &&
        int8_row_applies(*b.dequant)) {
      // A decode step or a short prompt over an int8 [K, N] weight, read in place.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      int8_rows_avx512(m, n, k, kKC, alpha, a, *b.dequant, c, ldc, rows_init);
      return;
    }
    if (m <= kTransposedBRows && plain_rows && cfg.nr == 32 && packed_b_all == nullptr) {
      // B stored transposed (K^T read from K): one row, or the query heads that share a
      // cache head, B's values loaded and transposed once for all of them.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      if (transposed_b_product(m, n, k, kKC, alpha, a, b, c, ldc, rows_init)) return;
    }
    if (m == 1 && plain_rows && cfg.nr != 8) {
      if (init != nullptr && init->cols != nullptr) {
        fill_from_cols(init->cols, 1, n, c, ldc);  // then accumulated into
        init = nullptr;
      }
      gemm_one_row(n, k, alpha, a, b, c, packed_b_all, col0, init, row0, cfg.nr);
      return;
    }
  }
  const int64_t mc_max = std::min(kMC, (m + cfg.mr - 1) / cfg.mr * cfg.mr);
  const int64_t nc_max = std::min(kNC, (n + cfg.nr - 1) / cfg.nr * cfg.nr);
  const int64_t kc_max = std::min(kKC, k);
  T* packed_a = packed != nullptr ? nullptr : scratch<T>(0, mc_max * kc_max);
  T* scratch_b = packed_b_all != nullptr ? nullptr : scratch<T>(1, nc_max * kc_max);
  // Tiles into a scratch tile for init->tile_done where K is one block (written once, from
  // init: never read back).
  bool scratch_tiles = false;
  alignas(64) T scratch_tile[8 * 32];
  if constexpr (std::is_same_v<T, float>) {
    scratch_tiles = init != nullptr && init->tile_done != nullptr && init->tile_scratch &&
                    init->cols == nullptr && k <= kKC && cfg.mr * cfg.nr <= 8 * 32;
  }
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const T* packed_b = scratch_b;
      if constexpr (std::is_same_v<T, float>) {
        if (packed_b_all != nullptr) packed_b = packed_b_all->panels(pc, col0 + jc);
      }
      if (packed_b_all == nullptr) pack_b(b, pc, jc, kc, nc, cfg.nr, scratch_b);
      for (int64_t ic = 0; ic < m;) {
        int64_t mc = std::min(kMC, m - ic);
        const T* block = packed_a;
        if constexpr (std::is_same_v<T, float>) {
          if (packed != nullptr) {
            // Rows from row0 + ic, which may start inside a packed block (at a multiple of
            // MR): the rest of that block, its MR-row panels kc * MR floats each.
            const int64_t row = row0 + ic, within = row % kMC;
            mc = std::min(kMC - within, m - ic);
            block = packed->block(pc, row - within) + within * kc;
          }
        }
        if (packed == nullptr) pack_a(a, ic, pc, mc, kc, cfg.mr, packed_a);
        // With the kernels that ask for it (GemmConfig::prefetch_ahead), the next B panel is
        // fetched into L2 a share per tile while this one's tiles run:
        // a model's weights are not in any cache when its layer starts (vit_b_32's are 88 MB),
        // and the hardware prefetcher, which sees each panel read once and then hit in L1 for
        // the other tiles, does not run ahead of the next.
        const int64_t panel_lines = kc * cfg.nr * static_cast<int64_t>(sizeof(T)) / 64;
        const int64_t tiles = (mc + cfg.mr - 1) / cfg.mr;
        const int64_t lines_per_tile = (panel_lines + tiles - 1) / tiles;
        for (int64_t jr = 0; jr < nc; jr += cfg.nr) {
          const int64_t nr = std::min(cfg.nr, nc - jr);
          const char* next_panel =
              cfg.prefetch_ahead && jr + cfg.nr < nc
                  ? reinterpret_cast<const char*>(packed_b + (jr + cfg.nr) * kc)
                  : nullptr;
          for (int64_t ir = 0; ir < mc; ir += cfg.mr) {
            const int64_t mr = std::min(cfg.mr, mc - ir);
            if (next_panel != nullptr) {
              const int64_t line0 = ir / cfg.mr * lines_per_tile;
              const int64_t line1 = std::min(panel_lines, line0 + lines_per_tile);
              for (int64_t line = line0; line < line1; ++line)
                __builtin_prefetch(next_panel + line * 64, 0, 2);
            }
            const T* tile_init = nullptr;
            T* tile = c + (ic + ir) * ldc + jc + jr;
            if (cfg.prefetch_ahead) prefetch_tile(tile, ldc, mr, nr);
            if constexpr (std::is_same_v<T, float>) {
              if (init != nullptr && pc == 0) {
                if (init->cols != nullptr) {
                  fill_from_cols(init->cols + jc + jr, mr, nr, tile, ldc);  // then accumulated
                } else {
                  tile_init = init->rows != nullptr ? init->rows + row0 + ic + ir : kZeroRows;
                }
              }
            }
            if constexpr (std::is_same_v<T, float>) {
              if (scratch_tiles) {
                cfg.for_rows(mr)(kc, block + ir * kc, packed_b + jr * kc, scratch_tile, cfg.nr,
                                 alpha, mr, nr, tile_init);
                init->tile_done(init->tile_ctx, scratch_tile, cfg.nr, tile, ldc, mr, nr);
                continue;
              }
            }
            cfg.for_rows(mr)(kc, block + ir * kc, packed_b + jr * kc, tile, ldc, alpha, mr, nr,
                             tile_init);
            if constexpr (std::is_same_v<T, float>) {
              if (init != nullptr && init->tile_done != nullptr && pc + kc >= k)
                init->tile_done(init->tile_ctx, tile, ldc, tile, ldc, mr, nr);
            }
          }
        }
        ic += mc;
      }
    }
  }
}

// GEMMs below this many multiply-adds run on the calling thread: splitting them costs more
// than it saves (2^20 was tried: no better on Silero VAD, worse on MiniLM and
// mobilenet_v3_small at 2 threads).
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// Splits C across threads — by columns when it is wider than tall, else by rows — in units
// that are multiples of every micro-tile, each part a serial blocked GEMM with the thread's
// own packing buffers. Every element of C is accumulated over the same K blocks in the same
// order as serially, so the result does not depend on the thread count.
template <typename T>
void gemm_parallel(int64_t m, int64_t n, int64_t k, T alpha, MatrixRef<T> a, MatrixRef<T> b, T* c,
                   int64_t ldc, const PackedA* packed = nullptr, const PackedB* packed_b = nullptr,
                   const GemmInit* init = nullptr) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <
      double(kParallelMacs)) {
    gemm_blocked(m, n, k, alpha, a, b, c, ldc, packed, 0, packed_b, 0, init);
    return;
  }
  if (n >= m || packed_b != nullptr) {
    constexpr int64_t kUnit = 64;  // a multiple of every panel width
    parallel_for((n + kUnit - 1) / kUnit, 1, [&](int64_t u0, int64_t u1) {
      const int64_t j0 = u0 * kUnit, j1 = std::min(n, u1 * kUnit);
      MatrixRef<T> part{b.data == nullptr ? nullptr : b.data + j0 * b.col_stride, b.row_stride,
                        b.col_stride, b.row_offsets};
      DequantB dequant;  // a quantized B from column j0 on
      if (b.dequant != nullptr) {
        dequant = b.dequant->shifted(j0);
        part.dequant = &dequant;
      }
      // Column values from column j0 on, as C's part.
      GemmInit shifted;
      const GemmInit* part_init = init;
      if constexpr (std::is_same_v<T, float>) {
        if (init != nullptr && init->cols != nullptr) {
          shifted = *init;
          shifted.cols += j0;
          part_init = &shifted;
        }
      }
      gemm_blocked(m, j1 - j0, k, alpha, a, part, c + j0, ldc, packed, 0, packed_b, j0, part_init);
    });
  } else {
    // Rows in units of 24, a multiple of every MR (a part may start inside a packed A's
    // block, at a panel boundary).
    const int64_t unit = 24;
    parallel_for((m + unit - 1) / unit, 1, [&](int64_t u0, int64_t u1) {
      const int64_t i0 = u0 * unit, i1 = std::min(m, u1 * unit);
      MatrixRef<T> part =
          a.col_offsets != nullptr
              ? MatrixRef<T>{a.data, 0, 0, a.row_offsets + i0, a.col_offsets}
              : MatrixRef<T>{a.data == nullptr ? nullptr : a.data + i0 * a.row_stride, a.row_stride,
                             a.col_stride};
      gemm_blocked(i1 - i0, n, k, alpha, part, b, c + i0 * ldc, ldc, packed, i0, nullptr, 0, init);
    });
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
          float* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}

// 64-byte aligned storage for `count` floats (at least one).
std::unique_ptr<float, void (*)(void*)> aligned_floats(int64_t count) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + 63) / 64 * 64;
  std::unique_ptr<float, void (*)(void*)> p(static_cast<float*>(std::aligned_alloc(64, bytes)),
                                            std::free);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

std::shared_ptr<const PackedA> PackedA::pack(int64_t m, int64_t k, MatrixRef<float> a) {
  auto p = std::shared_ptr<PackedA>(new PackedA());
  p->m_ = m;
  p->k_ = k;
  p->kernel_ = gemm_float_kernel();
  const GemmConfig<float> cfg = float_config(p->kernel_);
  p->row_blocks_ = (m + kMC - 1) / kMC;
  int64_t total = 0;
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    for (int64_t ic = 0; ic < m; ic += kMC) {
      const int64_t mc = std::min(kMC, m - ic);
      p->offsets_.push_back(total);
      total += (mc + cfg.mr - 1) / cfg.mr * cfg.mr * kc;
    }
  }
  p->data_ = aligned_floats(total);
  size_t i = 0;
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    for (int64_t ic = 0; ic < m; ic += kMC, ++i) {
      const int64_t mc = std::min(kMC, m - ic);
      pack_a(a, ic, pc, mc, kc, cfg.mr, p->data_.get() + p->offsets_[i]);
    }
  }
  return p;
}

const float* PackedA::block(int64_t pc, int64_t ic) const {
  return data_.get() + offsets_[static_cast<size_t>((pc / kKC) * row_blocks_ + ic / kMC)];
}

void gemm_packed(const PackedA& a, int64_t n, float alpha, MatrixRef<float> b, float* c,
                 int64_t ldc, const GemmInit* init) {
  gemm_parallel(a.rows(), n, a.depth(), alpha, MatrixRef<float>{nullptr, 0, 0}, b, c, ldc, &a,
                nullptr, init);
}

std::shared_ptr<const PackedB> PackedB::pack(int64_t k, int64_t n, MatrixRef<float> b) {
  auto p = std::shared_ptr<PackedB>(new PackedB());
  p->k_ = k;
  p->n_ = n;
  p->kernel_ = gemm_float_kernel();
  const GemmConfig<float> cfg = float_config(p->kernel_);
  p->nr_ = cfg.nr;
  p->padded_n_ = (n + cfg.nr - 1) / cfg.nr * cfg.nr;
  p->data_ = aligned_floats(k * p->padded_n_);
  // Per k block, every panel across N, as pack_b lays out a block's panels.
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    pack_b(b, pc, 0, kc, n, cfg.nr, p->data_.get() + pc * p->padded_n_);
  }
  return p;
}

const float* PackedB::panels(int64_t pc, int64_t j) const {
  const int64_t kc = std::min(kKC, k_ - pc);
  return data_.get() + pc * padded_n_ + (j / nr_) * nr_ * kc;
}

void gemm_packed(int64_t m, float alpha, MatrixRef<float> a, const PackedB& b, float* c,
                 int64_t ldc, const GemmInit* init) {
  // A few rows (a batch-1 linear layer) on the AVX2 or AVX-512 panels: row kernels over
  // columns split across threads in units of four panels. They accumulate into C: an
  // overwrite fills C with the rows' values first (the first K block then adds its sum to
  // them, as the micro-kernels' init does). init->tile_done runs on each part's block of C
  // once it is done.
  if (m >= 1 && m <= 4 && b.depth() > 0 && b.kernel() != FloatKernel::kPortable &&
      a.col_offsets == nullptr) {
    if (init != nullptr && init->cols != nullptr) {
      fill_from_cols(init->cols, m, b.cols(), c, ldc);
    } else if (init != nullptr) {
      for (int64_t i = 0; i < m; ++i)
        std::fill_n(c + i * ldc, b.cols(), init->rows != nullptr ? init->rows[i] : 0.0f);
    }
    const int64_t unit = int64_t{4} * (b.kernel() == FloatKernel::kAvx512 ? 32 : 16);
    const int64_t n = b.cols();
    auto part = [&](int64_t u0, int64_t u1) {
      const int64_t j0 = u0 * unit, j1 = std::min(n, u1 * unit);
      few_rows_product(m, alpha, a, b, c, ldc, j0, j1);
      if (init != nullptr && init->tile_done != nullptr && j1 > j0)
        init->tile_done(init->tile_ctx, c + j0, ldc, c + j0, ldc, m, j1 - j0);
    };
    const int64_t units = (n + unit - 1) / unit;
    if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(b.depth()) <
        double(kParallelMacs)) {
      part(0, units);
    } else {
      parallel_for(units, 1, part);
    }
    return;
  }
  gemm_parallel(m, b.cols(), b.depth(), alpha, a, MatrixRef<float>{nullptr, 0, 0}, c, ldc, nullptr,
                &b, init);
}
void gemm(int64_t m, int64_t n, int64_t k, double alpha, MatrixRef<double> a, MatrixRef<double> b,
          double* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}
void gemm(int64_t m, int64_t n, int64_t k, int64_t alpha, MatrixRef<int64_t> a,
          MatrixRef<int64_t> b, int64_t* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}

}  // namespace etc::rt::kernels
