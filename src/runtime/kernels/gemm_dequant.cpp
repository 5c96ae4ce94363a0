// The GEMM's quantized right operands (DequantB with int8 or 4-bit values): dequantized into
// the packed panels as they are packed, never as a float copy of the whole weight. The
// arithmetic is the program's own dequantization steps, in their order, so the product has the
// bits of running those steps and then the float32 GEMM (a bf16/fp16 program's steps rounded
// to its dtype: DequantB::round16).
#include "runtime/kernels/gemm_dequant.h"

#include <immintrin.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>
#include <vector>

#include "graph/int4.h"
#include "runtime/kernels/gemm_wide16.h"
#include "runtime/kernels/simd_transpose.h"
#include "support/half.h"

namespace etc::rt::kernels {
namespace {

// out[i] = dequantized q[i] for a run of values that share one zero point and one scale
// (null: that step skipped). Each variant is a plain loop the compiler vectorises; the
// operations are DequantB's, in its order.
void dequant_run(const int8_t* __restrict q, int64_t count, const float* zero, const float* scale,
                 float* __restrict out) {
  if (zero != nullptr && scale != nullptr) {
    const float z = *zero, s = *scale;
    for (int64_t i = 0; i < count; ++i)
      out[i] = (static_cast<float>(q[i]) - z) * s;
  } else if (zero != nullptr) {
    const float z = *zero;
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(q[i]) - z;
  } else if (scale != nullptr) {
    const float s = *scale;
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(q[i]) * s;
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<float>(q[i]);
  }
}

// dequant_run in AVX-512 and AVX2 registers: 16 (8) int8 values widened to int32, converted
// exactly to float, then the subtraction and the multiplication as separate instructions
// (no fused multiply-add: the scalar loop's roundings).
__attribute__((target("avx512f,fma"))) void dequant_run_avx512(const int8_t* q, int64_t count,
                                                               const float* zero,
                                                               const float* scale, float* out) {
  const __m512 z = _mm512_set1_ps(zero != nullptr ? *zero : 0.0f);
  const __m512 sc = _mm512_set1_ps(scale != nullptr ? *scale : 1.0f);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512 v = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i))));
    if (zero != nullptr) v = _mm512_sub_ps(v, z);
    if (scale != nullptr) v = _mm512_mul_ps(v, sc);
    _mm512_storeu_ps(out + i, v);
  }
  dequant_run(q + i, count - i, zero, scale, out + i);
}

__attribute__((target("avx2"))) void dequant_run_avx2(const int8_t* q, int64_t count,
                                                      const float* zero, const float* scale,
                                                      float* out) {
  const __m256 z = _mm256_set1_ps(zero != nullptr ? *zero : 0.0f);
  const __m256 sc = _mm256_set1_ps(scale != nullptr ? *scale : 1.0f);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 v = _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i))));
    if (zero != nullptr) v = _mm256_sub_ps(v, z);
    if (scale != nullptr) v = _mm256_mul_ps(v, sc);
    _mm256_storeu_ps(out + i, v);
  }
  dequant_run(q + i, count - i, zero, scale, out + i);
}

// dequant_run over 4-bit values: values [from, from + count) of a packed row (graph/int4.h),
// unpacked a stretch at a time.
void dequant_run4(const uint8_t* row, int64_t from, int64_t count, const float* zero,
                  const float* scale, float* out) {
  int8_t values[256];
  for (int64_t i = 0; i < count; i += 256) {
    const int64_t len = std::min<int64_t>(256, count - i);
    int4::unpack(row, from + i, len, values);
    dequant_run(values, len, zero, scale, out + i);
  }
}

// The 16 (8) 4-bit values of 8 (4) bytes in order, each sign-extended to a byte: the low
// nibbles and the high ones interleaved, then (x ^ 8) - 8.
inline __m128i nibbles_to_bytes(__m128i v) {
  const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  const __m128i x =
      _mm_unpacklo_epi8(_mm_and_si128(v, low), _mm_and_si128(_mm_srli_epi16(v, 4), low));
  return _mm_sub_epi8(_mm_xor_si128(x, eight), eight);
}

// 16 int8 values widened into `to` as dequant_run_avx512 widens them (zero and scale: which
// steps run).
__attribute__((target("avx512f,fma"))) inline void widen16_avx512(__m128i bytes, __m512 z,
                                                                  __m512 sc, const float* zero,
                                                                  const float* scale, float* to) {
  __m512 v = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
  if (zero != nullptr) v = _mm512_sub_ps(v, z);
  if (scale != nullptr) v = _mm512_mul_ps(v, sc);
  _mm512_storeu_ps(to, v);
}

// dequant_run4 in AVX-512 and AVX2 registers: the values widened as dequant_run_avx512's
// (the same instructions after the nibbles become bytes: the same bits).
__attribute__((target("avx512f,fma"))) void dequant_run4_avx512(const uint8_t* row, int64_t from,
                                                                int64_t count, const float* zero,
                                                                const float* scale, float* out) {
  int64_t i = 0;
  if ((from & 1) != 0 && count > 0) {
    dequant_run4(row, from, 1, zero, scale, out);
    i = 1;
  }
  const __m512 z = _mm512_set1_ps(zero != nullptr ? *zero : 0.0f);
  const __m512 sc = _mm512_set1_ps(scale != nullptr ? *scale : 1.0f);

  const uint8_t* b = row + ((from + i) >> 1);
  const __m128i low = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (; i + 32 <= count; i += 32, b += 16) {  // 32 values from 16 bytes
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m128i lo = _mm_and_si128(v, low), hi = _mm_and_si128(_mm_srli_epi16(v, 4), low);
    widen16_avx512(_mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), eight), eight), z, sc,
                   zero, scale, out + i);
    widen16_avx512(_mm_sub_epi8(_mm_xor_si128(_mm_unpackhi_epi8(lo, hi), eight), eight), z, sc,
                   zero, scale, out + i + 16);
  }
  for (; i + 16 <= count; i += 16, b += 8) {
    widen16_avx512(nibbles_to_bytes(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b))), z, sc,
                   zero, scale, out + i);
  }
  if (i < count) dequant_run4(row, from + i, count - i, zero, scale, out + i);
}

__attribute__((target("avx2"))) void dequant_run4_avx2(const uint8_t* row, int64_t from,
                                                       int64_t count, const float* zero,
                                                       const float* scale, float* out) {
  int64_t i = 0;
  if ((from & 1) != 0 && count > 0) {
    dequant_run4(row, from, 1, zero, scale, out);
    i = 1;
  }
  const __m256 z = _mm256_set1_ps(zero != nullptr ? *zero : 0.0f);
  const __m256 sc = _mm256_set1_ps(scale != nullptr ? *scale : 1.0f);
  for (const uint8_t* b = row + ((from + i) >> 1); i + 8 <= count; i += 8, b += 4) {
    int32_t four;
    std::memcpy(&four, b, 4);
    const __m128i bytes = nibbles_to_bytes(_mm_cvtsi32_si128(four));
    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
    if (zero != nullptr) v = _mm256_sub_ps(v, z);
    if (scale != nullptr) v = _mm256_mul_ps(v, sc);
    _mm256_storeu_ps(out + i, v);
  }
  if (i < count) dequant_run4(row, from + i, count - i, zero, scale, out + i);
}

// v[0, count) rounded to bf16 or fp16 and widened back: the values a 16-bit elementwise kernel
// stores (round to nearest even, a NaN made the quiet NaN of its sign: support/half.h).
void round16_run(DequantB::Round16 to, float* v, int64_t count) {
  if (to == DequantB::Round16::kBFloat16) {
    for (int64_t i = 0; i < count; ++i) {  // a plain loop the compiler vectorises
      uint32_t b;
      std::memcpy(&b, v + i, 4);
      const uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
      const uint32_t r =
          (b & 0x7fffffffu) > 0x7f800000u ? (b & 0x80000000u) | 0x7fc00000u : rounded;
      std::memcpy(v + i, &r, 4);
    }
  } else if (to == DequantB::Round16::kFloat16) {
    for (int64_t i = 0; i < count; ++i)
      v[i] = half_to_float(float_to_half(v[i]));
  }
}

// An operand's values along k for one column: the offset moves by k_stride every k_group
// values of k (no division per value).
class OperandCursor {
 public:
  OperandCursor(const DequantB::Operand& o, int64_t n, int64_t k0) : o_(o) {
    if (!o.present()) return;
    at_ = (n / o.n_group) * o.n_stride + (k0 / o.k_group) * o.k_stride;
    left_ = o.k_stride != 0 ? o.k_group - k0 % o.k_group : INT64_MAX;
  }
  bool present() const { return o_.present(); }
  // Values of k left with the current value.
  int64_t left() const { return left_; }
  float value() const { return o_.at(at_); }
  void advance(int64_t count) {
    if (!o_.present() || o_.k_stride == 0) return;
    left_ -= count;
    if (left_ == 0) {
      at_ += o_.k_stride;
      left_ = o_.k_group;
    }
  }

 private:
  const DequantB::Operand& o_;
  int64_t at_ = 0, left_ = INT64_MAX;
};

// An operand's value for column n and input k, in `slot` (null when the step is skipped).
const float* dequant_operand(const DequantB::Operand& o, int64_t n, int64_t k, float& slot) {
  if (!o.present()) return nullptr;
  const int64_t at = (n / o.n_group) * o.n_stride + (k / o.k_group) * o.k_stride;
  slot = o.at(at);
  return &slot;
}

// The kc x nc block of a quantized B at (p0, j0) into NR-column panels, as pack_b lays them
// out. A weight stored [N, K] (q_k == 1, torchao's layout) is dequantized a column of B (a
// row of the weight) at a time, in runs that share a group's zero point and scale, into
// scratch, then transposed into the panel; one stored [K, N] a row of B at a time, its
// operands gathered per column first.
}  // namespace

void pack_dequant(FloatKernel isa, const DequantB& d, int64_t p0, int64_t j0, int64_t kc,
                  int64_t nc, int64_t nr, float* __restrict dst) {
  if (d.bits16 != nullptr || d.f32 != nullptr) return pack_widened(isa, d, p0, j0, kc, nc, nr, dst);
  thread_local std::vector<float> rows;
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min(nr, nc - jr), n0 = d.col0 + j0 + jr;
    if (d.q_k == 1) {
      rows.resize(static_cast<size_t>(nr * kc));
      const auto run = isa == FloatKernel::kAvx512 ? dequant_run_avx512
                       : isa == FloatKernel::kAvx2 ? dequant_run_avx2
                                                   : dequant_run;
      const auto run4 = isa == FloatKernel::kAvx512 ? dequant_run4_avx512
                        : isa == FloatKernel::kAvx2 ? dequant_run4_avx2
                                                    : dequant_run4;
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t n = n0 + j;
        // int8 values from k = p0 on, or a packed 4-bit row.
        const int8_t* q = d.q4 != nullptr ? nullptr : d.q + n * d.q_n + p0;
        const uint8_t* row4 = d.q4 != nullptr ? d.q4 + n * d.q4_row : nullptr;
        OperandCursor zero(d.zero, n, p0), scale(d.scale, n, p0);
        // Runs end where either operand's group ends.
        for (int64_t p = 0; p < kc;) {
          const int64_t len = std::min({kc - p, zero.left(), scale.left()});
          float z = 0, sc = 0;
          if (zero.present()) z = zero.value();
          if (scale.present()) sc = scale.value();
          const float* zp = zero.present() ? &z : nullptr;
          const float* sp = scale.present() ? &sc : nullptr;
          if (row4 != nullptr) {
            run4(row4, p0 + p, len, zp, sp, rows.data() + j * kc + p);
          } else {
            run(q + p, len, zp, sp, rows.data() + j * kc + p);
          }
          zero.advance(len);
          scale.advance(len);
          p += len;
        }
        round16_run(d.round16, rows.data() + j * kc, kc);
      }
      for (int64_t j = 0; j < cols; j += 16) {  // tiles of at most 16 x 16
        for (int64_t p = 0; p < kc; p += 16) {
          transpose_tile(isa, rows.data() + j * kc + p, kc, std::min<int64_t>(16, cols - j),
                         std::min<int64_t>(16, kc - p), dst + p * nr + j, nr);
        }
      }
    } else {
      // A row of B at a time: its values contiguous when q_n is 1; the operands of the row's
      // columns gathered first (they change with k's group).
      float zrow[64], srow[64];
      int8_t qrow[64];  // a row's values gathered from panels
      const bool has_zero = d.zero.present(), has_scale = d.scale.present();
      for (int64_t p = 0; p < kc; ++p) {
        const int64_t k = p0 + p;
        float* out = dst + p * nr;
        if (d.panel > 0) {
          // In panels: the row's values in runs, each within a panel.
          int8_t* q = qrow;
          for (int64_t j = 0; j < cols;) {
            const int64_t n = j0 + jr + j, len = std::min(cols - j, d.panel_left(n));
            std::memcpy(q + j, d.q + d.offset(k, n), static_cast<size_t>(len));
            j += len;
          }
        }
        const int8_t* q = d.panel > 0 ? qrow : d.q + k * d.q_k + n0 * d.q_n;
        const int64_t q_n = d.panel > 0 ? 1 : d.q_n;
        if (!has_zero && !has_scale && q_n == 1) {
          dequant_run(q, cols, nullptr, nullptr, out);
          continue;
        }
        for (int64_t j = 0; j < cols; ++j) {
          float z = 0, sc = 1;
          dequant_operand(d.zero, n0 + j, k, z);
          dequant_operand(d.scale, n0 + j, k, sc);
          zrow[j] = z;
          srow[j] = sc;
        }
        for (int64_t j = 0; j < cols; ++j) {
          float v = static_cast<float>(q[j * q_n]);
          if (has_zero) v = v - zrow[j];
          if (has_scale) v = v * srow[j];
          out[j] = v;
        }
        round16_run(d.round16, out, cols);
      }
    }
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t j = cols; j < nr; ++j)
        dst[p * nr + j] = 0.0f;
    }
    dst += nr * kc;
  }
}

bool row_in_registers_applies(FloatKernel isa, const DequantB& d, int64_t k, int64_t kc_block) {
  if (isa != FloatKernel::kAvx512 || d.q_k != 1 || d.bits16 != nullptr || d.f32 != nullptr ||
      d.round16 == DequantB::Round16::kFloat16)
    return false;
  // Whole dwords: 8 values of 4 bits, or 4 of 8. Gather offsets are int32: 32 rows of the
  // weight from the panel's first.
  const int64_t per_dword = d.q4 != nullptr ? 8 : 4;
  const int64_t row_bytes = d.q4 != nullptr ? d.q4_row : d.q_n;
  if ((d.q4 == nullptr && d.q == nullptr) || k % per_dword != 0 || kc_block % per_dword != 0 ||
      row_bytes <= 0 || row_bytes > (int64_t{1} << 25))
    return false;
  for (const DequantB::Operand* o : {&d.zero, &d.scale}) {
    if (o->present() && (o->n_group != 1 || (o->k_stride != 0 && o->k_group % per_dword != 0)))
      return false;
  }
  return true;
}

namespace {

// The order of load_rows_transposed's lanes: lane l holds weight row lane_row(l) of the 16 (a
// 4x4 transpose, its own inverse).
constexpr int lane_row(int l) {
  return 4 * (l % 4) + l / 4;
}

// The weight row of each lane: 0, 1, ..., 15 (gathered rows), or lane_row's order.
__attribute__((target("avx512f,fma"))) inline __m512i lane_rows(bool transposed) {
  if (!transposed) return _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  return _mm512_set_epi32(lane_row(15), lane_row(14), lane_row(13), lane_row(12), lane_row(11),
                          lane_row(10), lane_row(9), lane_row(8), lane_row(7), lane_row(6),
                          lane_row(5), lane_row(4), lane_row(3), lane_row(2), lane_row(1),
                          lane_row(0));
}

// The operand's values of weight rows n0 + (lane's row) at input k, rows past `rows` 0; the
// lanes in row order, or in lane_row's (`transposed`).
__attribute__((target("avx512f,fma"))) __m512 operand_lanes(const DequantB::Operand& o, int64_t n0,
                                                            int64_t rows, int64_t k,
                                                            bool transposed = false) {
  if (transposed && o.lanes != nullptr && n0 % 16 == 0) {  // arranged at load: one load
    if (rows <= 0) return _mm512_setzero_ps();             // a half past the weight's last row
    const int64_t g = o.k_stride != 0 ? k / o.k_group : 0;
    return _mm512_loadu_ps(o.lanes + ((n0 / 16) * o.lanes_groups + g) * 16);
  }
  const int64_t kk = o.k_stride != 0 ? (k / o.k_group) * o.k_stride : 0;
  if (o.data != nullptr && o.n_stride < (int64_t{1} << 26)) {  // float values: one gather
    const __m512i row = lane_rows(transposed);
    const __mmask16 valid = _mm512_cmplt_epi32_mask(row, _mm512_set1_epi32(static_cast<int>(rows)));
    const __m512i at = _mm512_mullo_epi32(row, _mm512_set1_epi32(static_cast<int>(o.n_stride)));
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, at, o.data + n0 * o.n_stride + kk,
                                    4);
  }
  alignas(64) float v[16] = {};
  // 4-bit values a row of the operand per weight row (a zero point per group): element kk of
  // packed row n, found without Operand::at's division.
  const bool packed_rows = o.data_i4 != nullptr && o.n_stride == o.i4_size && kk < o.i4_size;
  for (int l = 0; l < 16; ++l) {
    const int64_t r = transposed ? lane_row(l) : l;
    if (r >= rows) continue;
    v[l] = packed_rows
               ? static_cast<float>(int4::at(o.data_i4 + (n0 + r) * int4::row_bytes(o.i4_size), kk))
               : o.at((n0 + r) * o.n_stride + kk);
  }
  return _mm512_load_ps(v);
}

// round16_run's bf16 rounding of 16 lanes.
__attribute__((target("avx512f,fma"))) inline __m512 round_bf16_lanes(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(b, _mm512_set1_epi32(0x7fff)), lsb),
                       _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i quiet =
      _mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(static_cast<int>(0x80000000u))),
                      _mm512_set1_epi32(0x7fc00000));
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, quiet));
}

// The same with the CPU's bf16 conversion (AVX512_BF16: round to nearest even, one
// instruction), for values known finite and normal or zero: the conversion treats denormals
// as zero and quiets NaNs otherwise than float_to_bfloat16.
__attribute__((target("avx512f,avx512bf16,fma"))) inline __m512 round_bf16_native(__m512 v) {
  const __m256bh narrowed = _mm512_cvtneps_pbh(v);
  __m256i h;  // the same 32 bytes as integers (a copy the compiler elides)
  std::memcpy(&h, &narrowed, sizeof(h));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

bool cpu_has_avx512bf16() {
  static const bool kHas = __builtin_cpu_supports("avx512bf16");
  return kHas;
}

enum class Rounding { kNone, kBf16, kBf16Native };

// Widened values v through dequant_run's steps, in its order: minus the zero points, times
// the scales, rounded as the program's dtype rounds (none for float32).
template <Rounding kRound>
__attribute__((target("avx512f,avx512bf16,fma"))) inline __m512 dequant_lanes(
    __m512 v, bool has_zero, __m512 zero, bool has_scale, __m512 scale) {
  if (has_zero) v = _mm512_sub_ps(v, zero);
  if (has_scale) v = _mm512_mul_ps(v, scale);
  if constexpr (kRound == Rounding::kBf16) {
    v = round_bf16_lanes(v);
  } else if constexpr (kRound == Rounding::kBf16Native) {
    v = round_bf16_native(v);
  }
  return v;
}

// f.template operator()<R>() with R the rounding d's values need.
template <typename F>
void with_rounding(const DequantB& d, F&& f) {
  if (d.round16 == DequantB::Round16::kNone) {
    f.template operator()<Rounding::kNone>();
  } else if (d.normal_values && cpu_has_avx512bf16()) {
    f.template operator()<Rounding::kBf16Native>();
  } else {
    f.template operator()<Rounding::kBf16>();
  }
}

// row_in_registers_avx512 for `bits`-bit values (4 or 8) and one rounding.
template <int kBits, Rounding kRound>
__attribute__((target("avx512f,avx512bf16,fma"))) void row_in_registers(
    const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols, const float* a,
    int64_t a_step, float* c, float alpha, const float* init) {
  constexpr int kPerDword = 32 / kBits;
  const int64_t n0 = d.col0 + j;
  const int64_t rows0 = std::min<int64_t>(16, cols), rows1 = std::max<int64_t>(0, cols - 16);
  const __mmask16 m0 = static_cast<__mmask16>((1u << rows0) - 1);
  const __mmask16 m1 = static_cast<__mmask16>((1u << rows1) - 1);
  // Byte offsets of the 32 rows' dwords from row n0's; lanes past `cols` are not gathered.
  const int64_t row_stride = kBits == 4 ? d.q4_row : d.q_n;
  const __m512i lane = lane_rows(false);
  const __m512i row_bytes = _mm512_set1_epi32(static_cast<int>(row_stride));
  const __m512i idx0 = _mm512_mullo_epi32(lane, row_bytes);
  const __m512i idx1 = _mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(16)), row_bytes);
  const bool has_zero = d.zero.present(), has_scale = d.scale.present();
  __m512 z0 = _mm512_setzero_ps(), z1 = z0, s0 = _mm512_set1_ps(1.0f), s1 = s0;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  const uint8_t* rows =
      kBits == 4 ? d.q4 + n0 * d.q4_row : reinterpret_cast<const uint8_t*>(d.q + n0 * d.q_n);
  const __m128i shift_right = _mm_cvtsi32_si128(32 - kBits);
  for (int64_t p = 0; p < kc; p += kPerDword) {
    const int64_t k = pc + p;
    // A group's zero points and scales, for each of the 32 rows, when it starts.
    if (has_zero && (p == 0 || (d.zero.k_stride != 0 && k % d.zero.k_group == 0))) {
      z0 = operand_lanes(d.zero, n0, rows0, k);
      if (rows1 > 0) z1 = operand_lanes(d.zero, n0 + 16, rows1, k);
    }
    if (has_scale && (p == 0 || (d.scale.k_stride != 0 && k % d.scale.k_group == 0))) {
      s0 = operand_lanes(d.scale, n0, rows0, k);
      if (rows1 > 0) s1 = operand_lanes(d.scale, n0 + 16, rows1, k);
    }
    // Values k .. k + kPerDword - 1 of each row: one dword, value i in bits [i * kBits, (i + 1)
    // * kBits) (graph/int4.h's nibble order; int8 in memory order).
    const uint8_t* base = rows + k * kBits / 8;
    const __m512i g0 = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m0, idx0, base, 1);
    const __m512i g1 = rows1 > 0
                           ? _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m1, idx1, base, 1)
                           : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int i = 0; i < kPerDword; ++i) {
      const __m512 av = _mm512_set1_ps(a[(p + i) * a_step]);
      const __m128i shift_left = _mm_cvtsi32_si128(32 - kBits * (i + 1));
      // Sign-extended values, widened exactly, then dequantized.
      const __m512 v0 = dequant_lanes<kRound>(
          _mm512_cvtepi32_ps(_mm512_sra_epi32(_mm512_sll_epi32(g0, shift_left), shift_right)),
          has_zero, z0, has_scale, s0);
      const __m512 v1 = dequant_lanes<kRound>(
          _mm512_cvtepi32_ps(_mm512_sra_epi32(_mm512_sll_epi32(g1, shift_left), shift_right)),
          has_zero, z1, has_scale, s1);
      acc0 = _mm512_fmadd_ps(av, v0, acc0);
      acc1 = _mm512_fmadd_ps(av, v1, acc1);
    }
  }
  // row_kernel_f32_avx512's store.
  const __m512 al = _mm512_set1_ps(alpha);
  const __m512 c0 = init != nullptr ? _mm512_set1_ps(*init) : _mm512_maskz_loadu_ps(m0, c);
  const __m512 c1 = init != nullptr ? _mm512_set1_ps(*init) : _mm512_maskz_loadu_ps(m1, c + 16);
  _mm512_mask_storeu_ps(c, m0, _mm512_fmadd_ps(al, acc0, c0));
  _mm512_mask_storeu_ps(c + 16, m1, _mm512_fmadd_ps(al, acc1, c1));
}

// 16 bytes (32 4-bit values) of each of 16 rows as four vectors of a dword per row: vector d
// holds dword d of row lane_row(l) in lane l. Four rows to a register, then two rounds of
// unpacking (no gather).
__attribute__((target("avx512f,fma"))) inline void load_rows_transposed(
    const uint8_t* const rows[16], __m512i out[4]) {
  __m512i quad[4];
  for (int64_t j = 0; j < 4; ++j) {
    __m512i q =
        _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * j])));
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * j + 1])),
                           1);
    q = _mm512_inserti32x4(q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * j + 2])),
                           2);
    quad[j] = _mm512_inserti32x4(
        q, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 * j + 3])), 3);
  }
  const __m512i t0 = _mm512_unpacklo_epi32(quad[0], quad[1]);
  const __m512i t1 = _mm512_unpackhi_epi32(quad[0], quad[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(quad[2], quad[3]);
  const __m512i t3 = _mm512_unpackhi_epi32(quad[2], quad[3]);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

// The lanes of paired_round's two products back in row order: out vector h (weight rows
// 16h .. 16h + 15, in row order) from permutex2var(even, index, odd).
__attribute__((target("avx512f,fma"))) inline __m512i paired_order(int h) {
  alignas(64) int32_t v[16];
  for (int j = 0; j < 16; ++j) {
    const int l = lane_row(j);  // half h's lane that holds row 16h + j
    v[j] = (l % 2 != 0 ? 16 : 0) + 8 * h + l / 2;
  }
  return _mm512_load_si512(v);
}

// row_in_registers for 4-bit values in blocks of 32 inputs (k, the K blocks and the operands'
// groups multiples of 32): each weight row's 16 bytes loaded and transposed in registers
// instead of gathered. The lanes hold the weight rows in lane_row's order until the store.
// Up to kARows rows of A (m of them: row r at a + r * a_rs, C's at c + r * ldc, init[r])
// share each dequantized value: a short prompt dequantizes the weight once, not per row.
// kMagic (DequantB::integer_zero): each nibble, its top bit flipped (q + 8, 0..15), becomes
// the low mantissa bits of 2^23, so that subtracting 2^23 + 8 + z gives q - z exactly (one
// logic instruction instead of two shifts and a conversion; the same values). With the CPU's
// bf16 conversion, the two halves' values are rounded together (one instruction for 32) and
// widened as their even and odd 16-bit words: the accumulators then hold the rows in
// paired_order's order.
template <Rounding kRound, int64_t kARows, bool kMagic>
__attribute__((target("avx512f,avx512bf16,fma"))) void row4_blocked(
    const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols, int64_t m, const float* a,
    int64_t a_rs, int64_t a_cs, float* c, int64_t ldc, float alpha, const float* init) {
  constexpr bool kPaired = kRound == Rounding::kBf16Native;
  static const uint8_t kZeros[16] = {};
  const int64_t n0 = d.col0 + j;
  const int64_t rows_in[2] = {std::min<int64_t>(16, cols), std::max<int64_t>(0, cols - 16)};
  const bool has_zero = d.zero.present(), has_scale = d.scale.present();
  // 2^23 + 8: the widened nibble's offset (kMagic).
  const __m512 offset = _mm512_set1_ps(8388616.0f);
  __m512 z[2] = {kMagic ? offset : _mm512_setzero_ps(), kMagic ? offset : _mm512_setzero_ps()};
  __m512 sc[2] = {_mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f)};
  // kPaired: [r][0] the even 16-bit words' rows, [r][1] the odd ones'; else the two halves.
  __m512 acc[kARows][2];
  for (auto& row : acc)
    row[0] = row[1] = _mm512_setzero_ps();
  const uint8_t* rows[2][16];
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t r = 0; r < 16; ++r)
      rows[h][r] = 16 * h + r < cols ? d.q4 + (n0 + 16 * h + r) * d.q4_row + pc / 2 : kZeros;
  }
  const __m512i flip = _mm512_set1_epi32(static_cast<int>(0x88888888u));
  const __m512i nibble = _mm512_set1_epi32(0x0F), magic = _mm512_set1_epi32(0x4B000000);
  const __m512i high_words = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  constexpr int64_t kHalves = 2;  // the second over zero rows when cols <= 16 (the last panel)
  for (int64_t p = 0; p < kc; p += 32) {
    const int64_t k = pc + p;
    for (int64_t h = 0; h < kHalves; ++h) {
      if (has_zero && (p == 0 || (d.zero.k_stride != 0 && k % d.zero.k_group == 0))) {
        z[h] = operand_lanes(d.zero, n0 + 16 * h, rows_in[h], k, true);
        if constexpr (kMagic) z[h] = _mm512_add_ps(z[h], offset);  // exact: |z| <= 2^20
      }
      if (has_scale && (p == 0 || (d.scale.k_stride != 0 && k % d.scale.k_group == 0)))
        sc[h] = operand_lanes(d.scale, n0 + 16 * h, rows_in[h], k, true);
    }
    // The next panel's 32 rows, a line of each per 4 blocks (8 rows a block): the rows of
    // one panel are 32 short streams, which the hardware's prefetchers do not follow far
    // enough ahead for a decode step, whose weight comes from memory. (A prefetch past the
    // weight's end is harmless.)
    for (int64_t r = (p / 32) % 4 * 8, e = r + 8; r < e; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(d.q4 + (n0 + 32 + r) * d.q4_row + (k & ~127) / 2),
                   _MM_HINT_T0);
    }
    __m512i dw[2][4];
    for (int64_t h = 0; h < kHalves; ++h) {
      load_rows_transposed(rows[h], dw[h]);
      for (const uint8_t*& row : rows[h]) {
        if (row != kZeros) row += 16;
      }
      if constexpr (kMagic) {
        for (__m512i& v : dw[h])
          v = _mm512_xor_si512(v, flip);
      }
    }
    for (int64_t q = 0; q < 4; ++q) {
#pragma GCC unroll 8
      for (int64_t i = 0; i < 8; ++i) {
        __m512 v[kHalves];
        for (int64_t h = 0; h < kHalves; ++h) {
          // Value 8q + i of each row, widened exactly, less its zero point, times its scale.
          if constexpr (kMagic) {
            // (x & 15) | 0x4B000000: 0xF0 & 0xCC | 0xAA.
            const __m512i x =
                i == 0 ? dw[h][q] : _mm512_srli_epi32(dw[h][q], static_cast<unsigned>(4 * i));
            v[h] = _mm512_sub_ps(
                _mm512_castsi512_ps(_mm512_ternarylogic_epi32(x, nibble, magic, 0xEA)), z[h]);
            if (has_scale) v[h] = _mm512_mul_ps(v[h], sc[h]);
            if constexpr (kRound == Rounding::kBf16) v[h] = round_bf16_lanes(v[h]);
          } else {
            v[h] =
                dequant_lanes < kPaired
                    ? Rounding::kNone
                    : kRound >
                          (_mm512_cvtepi32_ps(_mm512_srai_epi32(
                               _mm512_slli_epi32(dw[h][q], static_cast<unsigned>(28 - 4 * i)), 28)),
                           has_zero, z[h], has_scale, sc[h]);
          }
        }
        if constexpr (kPaired) {
          // Both halves rounded to bf16 at once: words 0-15 the first half's, 16-31 the
          // second's; the even words widened by a shift, the odd ones by clearing the low.
          const __m512bh both = _mm512_cvtne2ps_pbh(v[1], v[0]);
          __m512i w;
          std::memcpy(&w, &both, sizeof(w));
          v[0] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
          v[1] = _mm512_castsi512_ps(_mm512_and_si512(w, high_words));
        }
        const int64_t at = (p + 8 * q + i) * a_cs;
#pragma GCC unroll 8
        for (int64_t r = 0; r < kARows; ++r) {
          if (r < m) {
            const __m512 av = _mm512_set1_ps(a[r * a_rs + at]);
            acc[r][0] = _mm512_fmadd_ps(av, v[0], acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, v[1], acc[r][1]);
          }
        }
      }
    }
  }
  // Back to row order, then row_kernel_f32_avx512's store (the tile kernel's, per row).
  const __m512i order = lane_rows(true);
  const __m512i paired[2] = {paired_order(0), paired_order(1)};
  const __m512 al = _mm512_set1_ps(alpha);
  for (int64_t r = 0; r < std::min(m, kARows); ++r) {
    for (int64_t h = 0; h < kHalves; ++h) {
      const __mmask16 mask = static_cast<__mmask16>((1u << rows_in[h]) - 1);
      float* out = c + r * ldc + 16 * h;
      const __m512 c0 =
          init != nullptr ? _mm512_set1_ps(init[r]) : _mm512_maskz_loadu_ps(mask, out);
      const __m512 sum = kPaired ? _mm512_permutex2var_ps(acc[r][0], paired[h], acc[r][1])
                                 : _mm512_permutexvar_ps(order, acc[r][h]);
      _mm512_mask_storeu_ps(out, mask, _mm512_fmadd_ps(al, sum, c0));
    }
  }
}

// row4_blocked with kMagic where d's zero points allow it.
template <Rounding kRound, int64_t kARows>
void row4_blocked_for(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols, int64_t m,
                      const float* a, int64_t a_rs, int64_t a_cs, float* c, int64_t ldc,
                      float alpha, const float* init) {
  if (d.integer_zero) {
    row4_blocked<kRound, kARows, true>(d, pc, kc, j, cols, m, a, a_rs, a_cs, c, ldc, alpha, init);
  } else {
    row4_blocked<kRound, kARows, false>(d, pc, kc, j, cols, m, a, a_rs, a_cs, c, ldc, alpha, init);
  }
}

// Whether row4_blocked takes the block at pc of kc inputs.
bool row4_blocks(const DequantB& d, int64_t pc, int64_t kc) {
  if (d.q4 == nullptr || pc % 32 != 0 || kc % 32 != 0) return false;
  for (const DequantB::Operand* o : {&d.zero, &d.scale}) {
    if (o->present() && o->k_stride != 0 && o->k_group % 32 != 0) return false;
  }
  return true;
}

template <int kBits>
void row_in_registers_bits(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols,
                           const float* a, int64_t a_step, float* c, float alpha,
                           const float* init) {
  with_rounding(d, [&]<Rounding kRound>() {
    if (kBits == 4 && row4_blocks(d, pc, kc)) {
      row4_blocked_for<kRound, 1>(d, pc, kc, j, cols, 1, a, 0, a_step, c, 0, alpha, init);
    } else {
      row_in_registers<kBits, kRound>(d, pc, kc, j, cols, a, a_step, c, alpha, init);
    }
  });
}

// A zero point's or scale's values for weight row n, a group (16 floats) apart: its place in
// the lanes arrange_row_operands laid out (lane_row's order, 16 rows to a vector).
inline const float* row_operand(const DequantB::Operand& o, int64_t n) {
  return o.lanes + (n / 16) * o.lanes_groups * 16 + lane_row(static_cast<int>(n % 16));
}

// The 16 values a nibble can stand for in a group of a weight row, with that group's zero
// point z and scale s, dequantized by the program's steps in their order (dequant_run's, then
// round16_run's rounding): lane u the value of nibble u (u < 8: q = u; else q = u - 16).
template <Rounding kRound>
__attribute__((target("avx512f,avx512bf16,fma"))) inline __m512 nibble_table(const float* z,
                                                                             const float* s) {
  __m512 v = _mm512_set_ps(-1, -2, -3, -4, -5, -6, -7, -8, 7, 6, 5, 4, 3, 2, 1, 0);
  if (z != nullptr) v = _mm512_sub_ps(v, _mm512_set1_ps(*z));
  if (s != nullptr) v = _mm512_mul_ps(v, _mm512_set1_ps(*s));
  if constexpr (kRound == Rounding::kBf16) {
    v = round_bf16_lanes(v);
  } else if constexpr (kRound == Rounding::kBf16Native) {
    v = round_bf16_native(v);
  }
  return v;
}

constexpr int64_t kLutRows = 4;  // weight rows (columns of C) at a time

// What the table kernels share. The inputs one table serves: both operands' groups are whole
// runs of them (k when both are per row).
inline int64_t lut_group(const DequantB& d, int64_t k) {
  int64_t group = k;
  for (const DequantB::Operand* o : {&d.zero, &d.scale}) {
    if (o->present() && o->k_stride != 0) group = std::gcd(group, o->k_group);
  }
  return group;
}

// Where each of a tile's weight rows n0 .. n0 + rows - 1 starts: its nibbles, zero points and
// scales (null when absent; rows past the last repeat it).
inline void lut_tile(const DequantB& d, int64_t n0, int64_t rows, const uint8_t** row,
                     const float** zero, const float** scale) {
  for (int64_t t = 0; t < kLutRows; ++t) {
    const int64_t n = n0 + std::min(t, rows - 1);
    row[t] = d.q4 + n * d.q4_row;
    zero[t] = d.zero.present() ? row_operand(d.zero, n) : nullptr;
    scale[t] = d.scale.present() ? row_operand(d.scale, n) : nullptr;
  }
}

// How many weight rows ahead of a tile the table kernels fetch: whole tiles, at least 2 KiB
// of the weight ahead (a tile of 512 inputs is 1 KiB). Each block fetches each row's line at
// its offset there, so that the tile that far on is in the cache when its turn comes: the
// hardware's prefetch does not follow a tile's rows, each a short stream of its own (without
// it a [1536 -> 512] layer of a decode step ran at 0.6 the rate of the [512 -> 1536] ones).
inline int64_t lut_rows_ahead(const DequantB& d) {
  constexpr int64_t kBytesAhead = 2048;
  const int64_t tile_bytes = kLutRows * d.q4_row;
  return kLutRows * std::max<int64_t>(1, (kBytesAhead + tile_bytes - 1) / tile_bytes);
}
inline void fetch_rows_ahead(const uint8_t* const* row, int64_t bytes_on) {
  for (int64_t t = 0; t < kLutRows; ++t)
    _mm_prefetch(reinterpret_cast<const char*>(row[t] + bytes_on), _MM_HINT_T0);
}

// The offset of the group at input p in an operand's arranged lanes: 16 floats a group, with
// `per` inputs a group (0: one value per row, lut_per_group's).
inline int64_t lut_group_at(int64_t per, int64_t p) {
  return per != 0 ? 16 * (p / per) : 0;
}
inline int64_t lut_per_group(const DequantB::Operand& o) {
  return o.present() && o.k_stride != 0 ? o.k_group : 0;
}

// C[t] = alpha * (the lanes of acc[t] added in a fixed order) + (init ? *init : C[t]).
__attribute__((target("avx512f,fma"))) inline void store_lane_sums(const __m512* acc, int64_t rows,
                                                                   float* c, float alpha,
                                                                   const float* init) {
  for (int64_t t = 0; t < rows; ++t)
    c[t] = std::fmaf(alpha, _mm512_reduce_add_ps(acc[t]), init != nullptr ? *init : c[t]);
}

// row4_lut_avx512 for one block and rounding: kBlock inputs of 4 rows at a time, a load of
// kBlock / 2 bytes per row widened to 16 dwords (none for 128), lane l holding inputs p +
// (kBlock / 16) l + i in nibble i.
template <int64_t kBlock, Rounding kRound>
__attribute__((target("avx512f,avx512bf16,fma"))) void row4_lut(const DequantB& d, int64_t k,
                                                                int64_t j, int64_t cols,
                                                                const float* a_arranged, float* c,
                                                                float alpha, const float* init) {
  constexpr int64_t kNibbles = kBlock / 16;  // per lane
  const bool has_zero = d.zero.present(), has_scale = d.scale.present();
  const int64_t group = lut_group(d, k);
  const int64_t zero_per = lut_per_group(d.zero), scale_per = lut_per_group(d.scale);
  const int64_t ahead = lut_rows_ahead(d);
  for (int64_t t0 = 0; t0 < cols; t0 += kLutRows) {
    const int64_t rows = std::min(kLutRows, cols - t0);
    const uint8_t* row[kLutRows];
    const float *zero[kLutRows], *scale[kLutRows];
    lut_tile(d, d.col0 + j + t0, rows, row, zero, scale);
    const bool fetch = t0 + ahead + kLutRows <= cols;
    __m512 acc[kLutRows], table[kLutRows];
    for (int64_t t = 0; t < kLutRows; ++t) {
      acc[t] = _mm512_setzero_ps();
      table[t] = _mm512_setzero_ps();  // (set at p = 0)
    }
    for (int64_t p = 0, in_group = 0; p < k; p += kBlock, in_group += kBlock) {
      // A line a row holds 128 inputs of: once every 128 / kBlock blocks.
      if (fetch && p % 128 == 0) fetch_rows_ahead(row, ahead * d.q4_row + p / 2);
      if (in_group == group) in_group = 0;
      if (in_group == 0) {
        // Each operand's group at p: 16 floats a group in the arranged lanes.
        const int64_t zero_at = lut_group_at(zero_per, p), scale_at = lut_group_at(scale_per, p);
        for (int64_t t = 0; t < kLutRows; ++t) {
          table[t] = nibble_table<kRound>(has_zero ? zero[t] + zero_at : nullptr,
                                          has_scale ? scale[t] + scale_at : nullptr);
        }
      }
      const float* av = a_arranged + p;
      __m512i w[kLutRows];
      for (int64_t t = 0; t < kLutRows; ++t) {
        const uint8_t* at = row[t] + p / 2;
        if constexpr (kBlock == 128) {
          w[t] = _mm512_loadu_si512(at);
        } else if constexpr (kBlock == 64) {
          w[t] = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
        } else {
          w[t] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
        }
      }
#pragma GCC unroll 8
      for (int64_t i = 0; i < kNibbles; ++i) {
        const __m512 x = _mm512_loadu_ps(av + 16 * i);
        for (int64_t t = 0; t < kLutRows; ++t) {
          // The permutation reads each lane's low nibble: input p + kNibbles * l + i.
          const __m512i idx = i == 0 ? w[t] : _mm512_srli_epi32(w[t], static_cast<unsigned>(4 * i));
          acc[t] = _mm512_fmadd_ps(x, _mm512_permutexvar_ps(idx, table[t]), acc[t]);
        }
      }
    }
    store_lane_sums(acc, rows, c + t0, alpha, init);
  }
}

bool cpu_has_avx512bw() {
  static const bool kHas = __builtin_cpu_supports("avx512bw");
  return kHas;
}

// row4_lut for a bf16 program whose row holds bf16 values (kBf16Pairs): the table as 16 bf16
// values (twice over, so that a word's fifth index bit does not matter), indexed by vpermw, 32
// values per instruction, and multiplied by the row's bf16 pairs with vdpbf16ps (two
// multiply-adds in a lane, each rounded: the odd input's, then the even one's). Word m of a
// 64-byte load holds inputs p + 4m .. p + 4m + 3; shifted right by 4i, its low nibble is input
// p + 4m + i, and dword lane l pairs words 2l and 2l + 1.
__attribute__((target("avx512f,avx512bw,avx512bf16,fma"))) void row4_lut_pairs(
    const DequantB& d, int64_t k, int64_t j, int64_t cols, const uint16_t* a_arranged, float* c,
    float alpha, const float* init) {
  constexpr int64_t kBlock = 128;
  const bool has_zero = d.zero.present(), has_scale = d.scale.present();
  const int64_t group = lut_group(d, k);
  const int64_t zero_per = lut_per_group(d.zero), scale_per = lut_per_group(d.scale);
  const int64_t ahead = lut_rows_ahead(d);
  for (int64_t t0 = 0; t0 < cols; t0 += kLutRows) {
    const int64_t rows = std::min(kLutRows, cols - t0);
    const uint8_t* row[kLutRows];
    const float *zero[kLutRows], *scale[kLutRows];
    lut_tile(d, d.col0 + j + t0, rows, row, zero, scale);
    const bool fetch = t0 + ahead + kLutRows <= cols;
    __m512 acc[kLutRows];
    __m512i table[kLutRows];
    for (int64_t t = 0; t < kLutRows; ++t) {
      acc[t] = _mm512_setzero_ps();
      table[t] = _mm512_setzero_si512();  // (set at p = 0)
    }
    for (int64_t p = 0, in_group = 0; p < k; p += kBlock, in_group += kBlock) {
      if (fetch) fetch_rows_ahead(row, ahead * d.q4_row + p / 2);
      if (in_group == group) in_group = 0;
      if (in_group == 0) {
        const int64_t zero_at = lut_group_at(zero_per, p), scale_at = lut_group_at(scale_per, p);
        for (int64_t t = 0; t < kLutRows; ++t) {
          // Rounded to bf16 by the CPU's conversion (the values are normal or zero).
          const __m256bh rounded = _mm512_cvtneps_pbh(nibble_table<Rounding::kNone>(
              has_zero ? zero[t] + zero_at : nullptr, has_scale ? scale[t] + scale_at : nullptr));
          __m256i words;
          std::memcpy(&words, &rounded, sizeof(words));
          table[t] = _mm512_inserti64x4(_mm512_castsi256_si512(words), words, 1);
        }
      }
      const uint16_t* av = a_arranged + p;
      __m512i w[kLutRows];
      for (int64_t t = 0; t < kLutRows; ++t)
        w[t] = _mm512_loadu_si512(row[t] + p / 2);
#pragma GCC unroll 4
      for (int64_t i = 0; i < 4; ++i) {
        __m512bh x;
        const __m512i xi = _mm512_loadu_si512(av + 32 * i);
        std::memcpy(&x, &xi, sizeof(x));
        for (int64_t t = 0; t < kLutRows; ++t) {
          const __m512i idx = i == 0 ? w[t] : _mm512_srli_epi16(w[t], static_cast<unsigned>(4 * i));
          const __m512i values = _mm512_permutexvar_epi16(idx, table[t]);
          __m512bh wv;
          std::memcpy(&wv, &values, sizeof(wv));
          acc[t] = _mm512_dpbf16_ps(acc[t], x, wv);
        }
      }
    }
    store_lane_sums(acc, rows, c + t0, alpha, init);
  }
}

}  // namespace

int64_t row4_lut_block(FloatKernel isa, const DequantB& d, int64_t k) {
  if (isa != FloatKernel::kAvx512 || d.q4 == nullptr || d.q_k != 1 || k <= 0 ||
      d.round16 == DequantB::Round16::kFloat16)
    return 0;
  for (const int64_t block : {int64_t{128}, int64_t{64}, int64_t{32}}) {
    bool fits = k % block == 0;
    for (const DequantB::Operand* o : {&d.zero, &d.scale}) {
      // Per row or per group of whole blocks, arranged at load (arrange_row_operands).
      if (o->present())
        fits = fits && o->lanes != nullptr && (o->k_stride == 0 || o->k_group % block == 0);
    }
    if (fits) return block;
  }
  return 0;
}

LutRow row4_lut_arrange(const DequantB& d, int64_t k, int64_t block, const float* a, int64_t a_step,
                        float* out) {
  if (block == 128 && d.round16 == DequantB::Round16::kBFloat16 && d.normal_values &&
      cpu_has_avx512bf16() && cpu_has_avx512bw()) {
    // A bf16 program's row holds bf16 values: as pairs, word m of step i of a block holding
    // input p + 8 (m / 2) + 4 (m % 2) + i; a value that is not a bf16 one, or a subnormal
    // (which vdpbf16ps would take for zero), keeps the float32 form.
    auto* pairs = reinterpret_cast<uint16_t*>(out);
    bool exact = true;
    for (int64_t p = 0; p < k && exact; p += block) {
      for (int64_t i = 0; i < 4; ++i) {
        for (int64_t m = 0; m < 32; ++m) {
          uint32_t bits;
          std::memcpy(&bits, a + (p + 8 * (m / 2) + 4 * (m % 2) + i) * a_step, 4);
          const uint32_t exponent = bits & 0x7f800000u;
          exact = exact && (bits & 0xffffu) == 0 && (exponent != 0 || (bits & 0x7fffffffu) == 0) &&
                  exponent != 0x7f800000u;
          pairs[p + 32 * i + m] = static_cast<uint16_t>(bits >> 16);
        }
      }
    }
    if (exact) return LutRow::kBf16Pairs;
  }
  const int64_t nibbles = block / 16;
  for (int64_t p = 0; p < k; p += block) {
    for (int64_t i = 0; i < nibbles; ++i) {
      for (int64_t l = 0; l < 16; ++l)
        out[p + 16 * i + l] = a[(p + nibbles * l + i) * a_step];
    }
  }
  return LutRow::kFloat;
}

void row4_lut_avx512(const DequantB& d, int64_t k, int64_t block, LutRow form, int64_t j,
                     int64_t cols, const float* a_arranged, float* c, float alpha,
                     const float* init) {
  if (form == LutRow::kBf16Pairs) {
    return row4_lut_pairs(d, k, j, cols, reinterpret_cast<const uint16_t*>(a_arranged), c, alpha,
                          init);
  }
  with_rounding(d, [&]<Rounding kRound>() {
    if (block == 128) {
      row4_lut<128, kRound>(d, k, j, cols, a_arranged, c, alpha, init);
    } else if (block == 64) {
      row4_lut<64, kRound>(d, k, j, cols, a_arranged, c, alpha, init);
    } else {
      row4_lut<32, kRound>(d, k, j, cols, a_arranged, c, alpha, init);
    }
  });
}

namespace {

// arrange_row_operands for one operand: per 16 rows (h) and group (g), 16 floats at
// (h * groups + g) * 16 in lane_row's order; rows past n 0.
std::vector<float> arrange_operand_lanes(const DequantB::Operand& o, int64_t k, int64_t n,
                                         int64_t& groups) {
  groups = o.k_stride != 0 ? (k + o.k_group - 1) / o.k_group : 1;
  const int64_t halves = (n + 15) / 16;
  std::vector<float> lanes(static_cast<size_t>(halves * groups * 16), 0.0f);
  for (int64_t h = 0; h < halves; ++h) {
    for (int64_t g = 0; g < groups; ++g) {
      float* out = lanes.data() + (h * groups + g) * 16;
      const int64_t kk = o.k_stride != 0 ? g * o.k_stride : 0;
      for (int l = 0; l < 16; ++l) {
        const int64_t row = 16 * h + lane_row(l);
        if (row < n) out[l] = o.at((row / o.n_group) * o.n_stride + kk);
      }
    }
  }
  return lanes;
}

}  // namespace

void arrange_row_operands(DequantB& d, int64_t k, int64_t n, std::vector<float>& zero_lanes,
                          std::vector<float>& scale_lanes) {
  if (d.q4 == nullptr || d.q_k != 1) return;
  for (auto [o, lanes] : {std::pair{&d.zero, &zero_lanes}, std::pair{&d.scale, &scale_lanes}}) {
    if (!o->present() || o->n_group != 1) continue;
    *lanes = arrange_operand_lanes(*o, k, n, o->lanes_groups);
    o->lanes = lanes->data();
  }
}

bool rows_in_registers_applies(FloatKernel isa, const DequantB& d, int64_t k, int64_t kc_block) {
  return row_in_registers_applies(isa, d, k, kc_block) && d.q4 != nullptr && k % 32 == 0 &&
         row4_blocks(d, 0, kc_block);
}

void rows_in_registers_avx512(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols,
                              int64_t m, const float* a, int64_t a_rs, int64_t a_cs, float* c,
                              int64_t ldc, float alpha, const float* init) {
  with_rounding(d, [&]<Rounding kRound>() {
    row4_blocked_for<kRound, kRowsInRegisters>(d, pc, kc, j, cols, m, a, a_rs, a_cs, c, ldc, alpha,
                                               init);
  });
}

void row_in_registers_avx512(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols,
                             const float* a, int64_t a_step, float* c, float alpha,
                             const float* init) {
  if (d.q4 != nullptr) {
    row_in_registers_bits<4>(d, pc, kc, j, cols, a, a_step, c, alpha, init);
  } else {
    row_in_registers_bits<8>(d, pc, kc, j, cols, a, a_step, c, alpha, init);
  }
}

}  // namespace etc::rt::kernels
