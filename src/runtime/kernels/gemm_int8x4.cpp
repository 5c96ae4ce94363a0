// gemm_int8x4 (gemm_int8x4.h): int8 activation rows times 4-bit weights, the group sums in
// integers. With u = qw + 8 (the nibble with its top bit flipped: 0..15, unsigned) the
// kernels compute dp = sum over the group of u * qx, then
//   S = dp - (8 + zw) * sum(qx) - zx * (sum(qw) - group * zw)
// which is sum (qx - zx) * (qw - zw) exactly; the per-row and per-group constants are the
// Int4Weight's c1 and c2, prepared at load.
#include "runtime/kernels/gemm_int8x4.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "graph/int4.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::kernels {
namespace {

// The activations are laid out for the weights' bytes: per chunk of 128 inputs, 64 bytes of
// the even inputs (byte j: input 2j, whose weight is byte j's low nibble) then 64 of the odd
// ones (its high nibble), zero past k.
constexpr int64_t kChunk = 128;

// Whether `g` is a group size the kernels take: one or several groups fill a chunk, or a
// group is whole chunks.
bool group_fits(int64_t g) {
  return g == 32 || g == 64 || (g % kChunk == 0 && g <= kInt8x4MaxGroup);
}

// dp over `len` bytes of a weight row (2 * len inputs) against a chunk's even and odd
// activation bytes at the same offsets.
inline int32_t dot_run_portable(const uint8_t* bytes, const int8_t* even, const int8_t* odd,
                                int64_t len) {
  int32_t dp = 0;
  for (int64_t j = 0; j < len; ++j) {
    const int32_t lo = static_cast<int32_t>((bytes[j] & 0x0Fu) ^ 0x08u);
    const int32_t hi = static_cast<int32_t>((bytes[j] >> 4) ^ 0x08u);
    dp += lo * even[j] + hi * odd[j];
  }
  return dp;
}

// The same in AVX2 registers for len a multiple of 16: each byte's nibbles (top bits flipped:
// 0..15) times the activation bytes by vpmaddubsw (unsigned by signed, in pairs: at most
// 2 * 15 * 128 in magnitude, no saturation), the low and high nibbles' pairs added in 16 bits
// (at most 7680), then widened to 32 by vpmaddwd. Exact, as the portable loop.
__attribute__((target("avx2"))) inline int32_t dot_run_avx2(const uint8_t* bytes,
                                                            const int8_t* even, const int8_t* odd,
                                                            int64_t len) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x88)), low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc = _mm256_setzero_si256();
  int64_t j = 0;
  for (; j + 32 <= len; j += 32) {
    const __m256i x =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes + j)), flip);
    const __m256i lo = _mm256_and_si256(x, low);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low);
    const __m256i pairs = _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(even + j))),
        _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(odd + j))));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
  }
  __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  for (; j + 16 <= len; j += 16) {
    const __m128i x = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + j)),
                                    _mm256_castsi256_si128(flip));
    const __m128i lo = _mm_and_si128(x, _mm256_castsi256_si128(low));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm256_castsi256_si128(low));
    const __m128i pairs = _mm_add_epi16(
        _mm_maddubs_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + j))),
        _mm_maddubs_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd + j))));
    sum = _mm_add_epi32(sum, _mm_madd_epi16(pairs, _mm256_castsi256_si128(ones)));
  }
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4E));
  sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xB1));
  return _mm_cvtsi128_si32(sum) + dot_run_portable(bytes + j, even + j, odd + j, len - j);
}

// Per row and group, dp over the group's bytes by Dot (a group lies in one chunk or is whole
// chunks: its bytes in runs of at most 64, each a multiple of 16), then the float steps of
// the vector build. Rows [n0, n1). Inlined into a portable build and an AVX2 one: the builds
// for CPUs without AVX-512 VNNI.
template <int32_t (*Dot)(const uint8_t*, const int8_t*, const int8_t*, int64_t)>
__attribute__((always_inline)) inline void rows_any(const Int8x4Rows& a, const Int4Weight& w,
                                                    int64_t n0, int64_t n1, float alpha, float* c,
                                                    int64_t ldc) {
  const int64_t groups = w.groups(), half = w.group / 2;
  for (int64_t r = 0; r < a.m; ++r) {
    const int8_t* xa = a.bytes.data() + r * a.chunks * kChunk;
    const int32_t* sums = a.sums.data() + r * groups;
    const int32_t zx = a.zero[static_cast<size_t>(r)];
    for (int64_t n = n0; n < n1; ++n) {
      const uint8_t* row = w.q4 + n * w.row_bytes;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        int32_t dp = 0;
        for (int64_t b = g * half; b < (g + 1) * half;) {
          const int64_t chunk = b / 64, j0 = b % 64,
                        len = std::min<int64_t>(64 - j0, (g + 1) * half - b);
          const int8_t* even = xa + chunk * kChunk + j0;
          dp += Dot(row + b, even, even + 64, len);
          b += len;
        }
        const size_t at = w.at(n, g);
        const int32_t s = dp - w.c1[at] * sums[g] - zx * w.c2[at];
        acc = std::fma(w.scale[at], static_cast<float>(s), acc);
      }
      float& out = c[r * ldc + n];
      out = std::fma(alpha, acc * a.scale[static_cast<size_t>(r)], out);
    }
  }
}

void rows_portable(const Int8x4Rows& a, const Int4Weight& w, int64_t n0, int64_t n1, float alpha,
                   float* c, int64_t ldc) {
  rows_any<dot_run_portable>(a, w, n0, n1, alpha, c, ldc);
}

__attribute__((target("avx2,fma"))) void rows_avx2(const Int8x4Rows& a, const Int4Weight& w,
                                                   int64_t n0, int64_t n1, float alpha, float* c,
                                                   int64_t ldc) {
  rows_any<dot_run_avx2>(a, w, n0, n1, alpha, c, ldc);
}

// The AVX-512 VNNI build over tiles of 16 weight rows: each row's chunk of 64 bytes split
// into its low and high nibbles (u as bytes), multiplied by the chunk's even and odd
// activation bytes into that row's 16 dword accumulators (vpdpbusd: four products a lane).
// Where groups end, the 16 rows' accumulators are summed per 128-bit lane (32 inputs) and
// transposed into one vector per quarter of the chunk, lane j holding row n0 + j; the group
// sums then take the float steps for the 16 rows at once.
__attribute__((target("avx512f,avx512bw,avx512vnni,fma"))) void tile_vnni(const Int8x4Rows& a,
                                                                          const Int4Weight& w,
                                                                          int64_t n0, int64_t rows,
                                                                          float alpha, float* c,
                                                                          int64_t ldc) {
  const __mmask16 valid = static_cast<__mmask16>((1u << rows) - 1);
  // Row n0 + j's bytes at first + j * stride; rows past the weight are not read (their loads
  // masked off, which never faults).
  const uint8_t* first = w.q4 + n0 * w.row_bytes;
  const int64_t stride = w.row_bytes;
  const __m512i flip = _mm512_set1_epi8(0x08), low = _mm512_set1_epi8(0x0F);
  const int64_t groups = w.groups();
  // Groups a chunk holds (1 when a group is one or more chunks), and chunks per group.
  const int64_t per_chunk = std::max<int64_t>(1, kChunk / w.group);
  const int64_t chunks_per_group = std::max<int64_t>(1, w.group / kChunk);
  for (int64_t r = 0; r < a.m; ++r) {
    const int8_t* xa = a.bytes.data() + r * a.chunks * kChunk;
    const int32_t* sums = a.sums.data() + r * groups;
    const __m512i zx = _mm512_set1_epi32(a.zero[static_cast<size_t>(r)]);
    __m512 acc_f = _mm512_setzero_ps();
    __m512i acc[16];
    for (__m512i& v : acc)
      v = _mm512_setzero_si512();
    for (int64_t ch = 0; ch < a.chunks; ++ch) {
      const int64_t bytes = std::min<int64_t>(64, (w.k - ch * kChunk) / 2);
      const __mmask64 load = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
      const __m512i even = _mm512_loadu_si512(xa + ch * kChunk);
      const __m512i odd = _mm512_loadu_si512(xa + ch * kChunk + 64);
      const uint8_t* at = first + ch * 64;
      for (int64_t j = 0; j < 16; ++j) {
        // The next tile's line of this chunk (its rows are 16 short streams the hardware's
        // prefetchers do not follow; past the weight's end a prefetch is harmless).
        if (r == 0)
          _mm_prefetch(reinterpret_cast<const char*>(at + (16 + j) * stride), _MM_HINT_T0);
        const __m512i v = _mm512_maskz_loadu_epi8(j < rows ? load : 0, at + j * stride);
        // (v ^ 8) & 15 per nibble: 0xF0 ^ 0xCC then & 0xAA.
        const __m512i lo = _mm512_ternarylogic_epi32(v, flip, low, 0x28);
        const __m512i hi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v, 4), flip, low, 0x28);
        acc[j] = _mm512_dpbusd_epi32(acc[j], lo, even);
        acc[j] = _mm512_dpbusd_epi32(acc[j], hi, odd);
      }
      if ((ch + 1) % chunks_per_group != 0) continue;
      // Rows 4i..4i+3 into quad[i]: each 128-bit lane the four rows' sums over its 32 inputs.
      __m512i quad[4];
      for (int64_t i = 0; i < 4; ++i) {
        const __m512i* p = acc + 4 * i;
        const __m512i ab =
            _mm512_add_epi32(_mm512_unpacklo_epi32(p[0], p[1]), _mm512_unpackhi_epi32(p[0], p[1]));
        const __m512i cd =
            _mm512_add_epi32(_mm512_unpacklo_epi32(p[2], p[3]), _mm512_unpackhi_epi32(p[2], p[3]));
        quad[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
      }
      // part[q]: lane j the sum of row n0 + j over the chunk's inputs [32q, 32q + 32).
      const __m512i t0 = _mm512_shuffle_i32x4(quad[0], quad[1], 0x44);
      const __m512i t1 = _mm512_shuffle_i32x4(quad[0], quad[1], 0xEE);
      const __m512i t2 = _mm512_shuffle_i32x4(quad[2], quad[3], 0x44);
      const __m512i t3 = _mm512_shuffle_i32x4(quad[2], quad[3], 0xEE);
      const __m512i part[4] = {
          _mm512_shuffle_i32x4(t0, t2, 0x88), _mm512_shuffle_i32x4(t0, t2, 0xDD),
          _mm512_shuffle_i32x4(t1, t3, 0x88), _mm512_shuffle_i32x4(t1, t3, 0xDD)};
      // The groups that end here, in order.
      const int64_t g0 = w.group >= kChunk ? (ch + 1) / chunks_per_group - 1 : ch * per_chunk;
      for (int64_t i = 0; i < per_chunk && g0 + i < groups; ++i) {
        __m512i dp;
        if (w.group == 32) {
          dp = part[i];
        } else if (w.group == 64) {
          dp = _mm512_add_epi32(part[2 * i], part[2 * i + 1]);
        } else {
          dp = _mm512_add_epi32(_mm512_add_epi32(part[0], part[1]),
                                _mm512_add_epi32(part[2], part[3]));
        }
        const int64_t g = g0 + i;
        const size_t at = w.at(n0, g);
        const __m512i c1 = _mm512_maskz_loadu_epi32(valid, w.c1.data() + at);
        const __m512i c2 = _mm512_maskz_loadu_epi32(valid, w.c2.data() + at);
        const __m512 sw = _mm512_maskz_loadu_ps(valid, w.scale.data() + at);
        const __m512i s = _mm512_sub_epi32(
            _mm512_sub_epi32(dp, _mm512_mullo_epi32(c1, _mm512_set1_epi32(sums[g]))),
            _mm512_mullo_epi32(zx, c2));
        acc_f = _mm512_fmadd_ps(sw, _mm512_cvtepi32_ps(s), acc_f);
      }
      for (__m512i& v : acc)
        v = _mm512_setzero_si512();
    }
    float* out = c + r * ldc + n0;
    const __m512 prev = _mm512_maskz_loadu_ps(valid, out);
    const __m512 y = _mm512_mul_ps(acc_f, _mm512_set1_ps(a.scale[static_cast<size_t>(r)]));
    _mm512_mask_storeu_ps(out, valid, _mm512_fmadd_ps(_mm512_set1_ps(alpha), y, prev));
  }
}

// The signed 4-bit values of each byte, summed (the low nibble's and the high one's).
const std::array<int8_t, 256>& nibble_sums() {
  static const std::array<int8_t, 256> kSums = [] {
    std::array<int8_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b)
      t[b] = static_cast<int8_t>(int4::widen(b) + int4::widen(b >> 4));
    return t;
  }();
  return kSums;
}

}  // namespace

bool uses_vnni() {
  static const bool kHas = __builtin_cpu_supports("avx512f") &&
                           __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vnni");
  return kHas && gemm_float_kernel() == FloatKernel::kAvx512;
}

std::optional<Int4Weight> prepare_int4_weight(const DequantB& d, int64_t k, int64_t n) {
  if (d.q4 == nullptr || d.q_k != 1 || d.bits16 != nullptr ||
      d.round16 != DequantB::Round16::kNone || k <= 0 || n <= 0 || k % 32 != 0 ||
      d.q4_row != int4::row_bytes(k))
    return std::nullopt;
  // The inputs' groups the operands share: every group of an operand that varies along K is a
  // whole number of them.
  int64_t shared = k;
  for (const DequantB::Operand* o : {&d.zero, &d.scale}) {
    if (!o->present() || o->k_stride == 0) continue;
    if (o->k_group <= 0) return std::nullopt;
    shared = std::gcd(shared, o->k_group);
  }
  int64_t group = 0;
  for (const int64_t g : {shared, int64_t{1024}, int64_t{512}, int64_t{256}, int64_t{128},
                          int64_t{64}, int64_t{32}}) {
    if (shared % g == 0 && group_fits(g)) {
      group = g;
      break;
    }
  }
  if (group == 0) return std::nullopt;
  Int4Weight w;
  w.q4 = d.q4 + d.col0 * d.q4_row;  // the weight's rows from column col0 on
  w.row_bytes = d.q4_row;
  w.n = n;
  w.k = k;
  w.group = group;
  const int64_t groups = k / group;
  const size_t total = static_cast<size_t>((n + 15) / 16 * 16 * groups);
  w.c1.assign(total, 0);
  w.c2.assign(total, 0);
  w.scale.assign(total, 0.0f);
  const std::array<int8_t, 256>& sums = nibble_sums();
  for (int64_t row = 0; row < n; ++row) {
    const int64_t col = d.col0 + row;
    const uint8_t* bytes = w.q4 + row * w.row_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t k0 = g * group;
      auto value = [&](const DequantB::Operand& o, float absent) {
        if (!o.present()) return absent;
        return o.at((col / o.n_group) * o.n_stride + (k0 / o.k_group) * o.k_stride);
      };
      const float zero = value(d.zero, 0.0f), scale = value(d.scale, 1.0f);
      if (!(zero == std::nearbyint(zero) && std::fabs(zero) <= 128.0f)) return std::nullopt;
      int32_t sum = 0;
      for (int64_t b = k0 / 2; b < (k0 + group) / 2; ++b)
        sum += sums[bytes[b]];
      const int32_t zw = static_cast<int32_t>(zero);
      const size_t at = w.at(row, g);
      w.c1[at] = 8 + zw;
      w.c2[at] = sum - static_cast<int32_t>(group) * zw;
      w.scale[at] = scale;
    }
  }
  return w;
}

Int8x4Rows arrange_int8_rows(int64_t m, const Int8Rows& x, const Int4Weight& w) {
  Int8x4Rows a;
  a.m = m;
  a.chunks = (w.k + kChunk - 1) / kChunk;
  a.bytes.assign(static_cast<size_t>(m * a.chunks * kChunk), 0);
  a.sums.assign(static_cast<size_t>(m * w.groups()), 0);
  a.zero.assign(x.zero, x.zero + m);
  a.scale.assign(x.scale, x.scale + m);
  for (int64_t r = 0; r < m; ++r) {
    const int8_t* q = x.q + r * x.q_rs;
    int8_t* row = a.bytes.data() + r * a.chunks * kChunk;
    int32_t* sums = a.sums.data() + r * w.groups();
    for (int64_t k = 0; k < w.k; ++k) {
      row[(k / kChunk) * kChunk + (k % 2) * 64 + (k % kChunk) / 2] = q[k];
      sums[k / w.group] += q[k];
    }
  }
  return a;
}

void gemm_int8x4(const Int8x4Rows& x, const Int4Weight& w, float alpha, float* c, int64_t ldc) {
  if (x.m <= 0 || w.n <= 0) return;
  if (uses_vnni()) {
    const int64_t tiles = (w.n + 15) / 16;
    // About 64 K values of the weight per chunk of work.
    const int64_t grain = std::max<int64_t>(1, 65536 / (16 * w.k));
    parallel_for(tiles, grain, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n0 = 16 * t;
        tile_vnni(x, w, n0, std::min<int64_t>(16, w.n - n0), alpha, c, ldc);
      }
    });
    return;
  }
  const auto rows = gemm_float_kernel() == FloatKernel::kPortable ? rows_portable : rows_avx2;
  const int64_t grain = std::max<int64_t>(16, 65536 / w.k);
  parallel_for(w.n, grain, [&](int64_t n0, int64_t n1) { rows(x, w, n0, n1, alpha, c, ldc); });
}

}  // namespace etc::rt::kernels
