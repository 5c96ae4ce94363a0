// aten::_int_mm: uint8 or int8 [M, K] by int8 [K, N], int32 sums — the integer product of
// torchao's Int8DynamicActivationInt8WeightConfig, whose programs add 128 to each quantized
// activation (uint8, as x86's VNNI multiplies it) and subtract 128 times each column's sum
// afterwards. The sums are exact integers, so every path gives ATen's bits; they wrap as
// ATen's int32 accumulators do past 2^31 (computed in uint32 here, where wrapping is defined).
//
// AVX-512 VNNI: B repacked in panels of 64 columns, groups of 4 rows (pack_b4; once, at the
// first call, when B is a constant), then vpdpbusd multiplies 4 bytes of a row of A by each
// column's 4 at once, 4 rows of A by a panel's 64 columns a tile; an int8 A is taken as A + 128
// (unsigned) with 128 times B's column sums subtracted. Elsewhere a row of int32 accumulators
// per row of A, B's rows added in order.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/op_checks.h"
#include "runtime/kernels/parallel.h"
#include "support/file_io.h"

namespace etc::rt::kernels {
namespace {

// C rows [r0, r1) = A rows by B, portable: acc[j] += a[i, p] * b[p, j] for p in order.
template <typename A>
void int_mm_rows_portable(const A* a, const int8_t* b, uint32_t* c, int64_t r0, int64_t r1,
                          int64_t k, int64_t n) {
  for (int64_t i = r0; i < r1; ++i) {
    uint32_t* row = c + i * n;
    std::fill_n(row, n, 0u);
    for (int64_t p = 0; p < k; ++p) {
      const uint32_t av = static_cast<uint32_t>(static_cast<int32_t>(a[i * k + p]));
      if (av == 0) continue;
      const int8_t* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += av * static_cast<uint32_t>(static_cast<int32_t>(brow[j]));
    }
  }
}

constexpr int64_t kTileRows = 4, kTileVecs = 4;  // a VNNI tile: 4 rows by 64 columns

constexpr int64_t kPanel = 16 * kTileVecs;  // a tile's columns: B is packed in panels of them

// B [K, N] in panels of kPanel columns, each panel's groups of 4 rows in order:
// packed[((j / kPanel) * groups + p / 4) * 4 * kPanel + 4 * (j % kPanel) + p % 4], groups =
// ceil(K / 4), zero past K and past N. A tile reads its panel front to back (B stored [K, N]
// would put each group of a tile's columns a row of B apart: N = 32000 is 125 KiB, a page or
// more per group, which neither the TLB nor the hardware's prefetch follows). 16 columns of
// 4 rows at a time are interleaved by byte, then by pair of bytes (SSE2: every x86-64).
void pack_b4(const int8_t* b, int64_t k, int64_t n, int8_t* packed) {
  const int64_t groups = (k + 3) / 4, panels = (n + kPanel - 1) / kPanel;
  parallel_for(groups, 16, [&](int64_t g0, int64_t g1) {
    alignas(16) int8_t zeros[16] = {};
    alignas(16) int8_t part[4][16];
    for (int64_t g = g0; g < g1; ++g) {
      const int8_t* rows[4];
      for (int64_t q = 0; q < 4; ++q)
        rows[q] = 4 * g + q < k ? b + (4 * g + q) * n : nullptr;
      for (int64_t panel = 0; panel < panels; ++panel) {
        int8_t* out = packed + (panel * groups + g) * 4 * kPanel;
        for (int64_t c = 0; c < kPanel; c += 16) {
          const int64_t j = panel * kPanel + c, left = n - j;
          __m128i r[4];
          for (int64_t q = 0; q < 4; ++q) {
            const int8_t* src = rows[q] == nullptr || left <= 0 ? zeros : rows[q] + j;
            if (rows[q] != nullptr && left > 0 && left < 16) {
              std::memset(part[q], 0, sizeof(part[q]));
              std::memcpy(part[q], src, static_cast<size_t>(left));
              src = part[q];
            }
            r[q] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
          }
          const __m128i lo01 = _mm_unpacklo_epi8(r[0], r[1]), hi01 = _mm_unpackhi_epi8(r[0], r[1]);
          const __m128i lo23 = _mm_unpacklo_epi8(r[2], r[3]), hi23 = _mm_unpackhi_epi8(r[2], r[3]);
          auto* o = reinterpret_cast<__m128i*>(out + 4 * c);
          _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(lo01, lo23));
          _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(lo01, lo23));
          _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(hi01, hi23));
          _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(hi01, hi23));
        }
      }
    }
  });
}

// A constant B packed once (the first call) and kept in the instruction's state, with 128
// times each column's sum for an int8 A (what its offset subtracts).
struct PackedIntMmWeights final : KernelState {
  struct Key {
    const void* data;
    int64_t k, n;
    bool signed_a;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  std::vector<int8_t> packed;
  std::vector<int32_t> sums128;
};

// 128 times each column's sum of B [K, N], modulo 2^32 (ATen's int32 sums wrap).
std::vector<int32_t> column_sums128(const int8_t* b, int64_t k, int64_t n, int64_t n_pad) {
  std::vector<uint32_t> sums(static_cast<size_t>(n_pad), 0u);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      sums[static_cast<size_t>(j)] +=
          128u * static_cast<uint32_t>(static_cast<int32_t>(b[p * n + j]));
    }
  }
  return std::vector<int32_t>(sums.begin(), sums.end());
}

// One group of 4 inputs: row r's 4 bytes (words[r]) against each column's 4 at bg.
template <int64_t kRows, int64_t kVecs>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void vnni_group(
    __m512i (&acc)[kRows][kVecs], const int8_t* bg, const uint32_t* words) {
  __m512i bv[kVecs];
#pragma GCC unroll 4
  for (int64_t v = 0; v < kVecs; ++v)
    bv[v] = _mm512_loadu_si512(bg + 64 * v);
#pragma GCC unroll 4
  for (int64_t r = 0; r < kRows; ++r) {
    const __m512i av = _mm512_set1_epi32(static_cast<int>(words[r]));
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVecs; ++v)
      acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], av, bv[v]);
  }
}

// Rows [i0, i0 + kRows) of C by VNNI for the columns [j0, j0 + 16 * kVecs): a's bytes (uint8,
// row i at a + i * k) against the packed B. offset[j] is subtracted from every sum (128 times
// column j's sum for an int8 A; null for a uint8 A: nothing).
template <int64_t kRows, int64_t kVecs>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void vnni_tile(const uint8_t* a, int64_t k,
                                                                      const int8_t* packed,
                                                                      int64_t i0, int64_t j0,
                                                                      const int32_t* offset,
                                                                      uint32_t* c, int64_t n) {
  __m512i acc[kRows][kVecs];
#pragma GCC unroll 4
  for (int64_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVecs; ++v)
      acc[r][v] = _mm512_setzero_si512();
  }
  const int64_t groups = (k + 3) / 4;
  const int8_t* bcols = packed + (j0 / kPanel) * groups * 4 * kPanel;  // the tile's panel
  const int64_t full = k / 4;
  const uint8_t* rows = a + i0 * k;
  for (int64_t g = 0; g < full; ++g) {
    uint32_t words[kRows];
#pragma GCC unroll 4
    for (int64_t r = 0; r < kRows; ++r)
      std::memcpy(&words[r], rows + r * k + 4 * g, 4);
    vnni_group<kRows, kVecs>(acc, bcols + g * 4 * kPanel, words);
  }
  if (k % 4 != 0) {  // the last inputs, zero past K (as B's packed rows are)
    uint32_t words[kRows] = {};
    for (int64_t r = 0; r < kRows; ++r)
      std::memcpy(&words[r], rows + r * k + 4 * full, static_cast<size_t>(k % 4));
    vnni_group<kRows, kVecs>(acc, bcols + full * 4 * kPanel, words);
  }
#pragma GCC unroll 4
  for (int64_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int64_t v = 0; v < kVecs; ++v) {
      const int64_t j = j0 + 16 * v;
      if (j >= n) break;
      const __mmask16 mask =
          n - j >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
      const __m512i off =
          offset != nullptr ? _mm512_maskz_loadu_epi32(mask, offset + j) : _mm512_setzero_si512();
      _mm512_mask_storeu_epi32(c + (i0 + r) * n + j, mask, _mm512_sub_epi32(acc[r][v], off));
    }
  }
}

template <int64_t kRows>
void vnni_rows(const uint8_t* a, int64_t k, const int8_t* packed, int64_t i0, int64_t j0,
               const int32_t* offset, uint32_t* c, int64_t n) {
  const int64_t vecs = std::min<int64_t>(kTileVecs, (n - j0 + 15) / 16);
  switch (vecs) {
    case 1:
      return vnni_tile<kRows, 1>(a, k, packed, i0, j0, offset, c, n);
    case 2:
      return vnni_tile<kRows, 2>(a, k, packed, i0, j0, offset, c, n);
    case 3:
      return vnni_tile<kRows, 3>(a, k, packed, i0, j0, offset, c, n);
    default:
      return vnni_tile<kRows, 4>(a, k, packed, i0, j0, offset, c, n);
  }
}

// state: the instruction's state when B is a constant (packed once and kept), else null
// (packed for this call).
void int_mm_vnni(const TensorView& a, const int8_t* b, int64_t m, int64_t k, int64_t n, uint32_t* c,
                 std::unique_ptr<KernelState>* state) {
  const int64_t n_pad = (n + kPanel - 1) / kPanel * kPanel;
  auto pack = [&] {
    auto w = std::make_unique<PackedIntMmWeights>();
    w->packed.resize(static_cast<size_t>((k + 3) / 4 * 4 * n_pad));
    pack_b4(b, k, n, w->packed.data());
    if (a.dtype == DType::kInt8) w->sums128 = column_sums128(b, k, n, n_pad);
    return w;
  };
  std::unique_ptr<PackedIntMmWeights> own;
  const PackedIntMmWeights* w = nullptr;
  if (state != nullptr) {
    w = &cached_kernel_state<PackedIntMmWeights>(*state, {b, k, n, a.dtype == DType::kInt8}, [&] {
      auto fresh = pack();
      // The packed copy serves from now on: a mapped program's pages need not stay.
      release_pages(b, static_cast<size_t>(k * n));
      return fresh;
    });
  } else {
    own = pack();
    w = own.get();
  }
  const int8_t* packed = w->packed.data();
  // An int8 A: a + 128 as uint8, and 128 times each column's sum subtracted (exact, modulo
  // 2^32 as ATen's sums).
  const int32_t* offset = nullptr;
  const uint8_t* au = a.data_as<const uint8_t>();
  Buffer<uint8_t> shifted;
  if (a.dtype == DType::kInt8) {
    shifted = Buffer<uint8_t>(m * k);
    const int8_t* as = a.data_as<const int8_t>();
    for (int64_t i = 0; i < m * k; ++i)
      shifted[i] = static_cast<uint8_t>(static_cast<int32_t>(as[i]) + 128);
    au = shifted.data();
    offset = w->sums128.data();
  }
  const int64_t col_tiles = n_pad / kPanel;
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows;
  parallel_for(row_tiles * col_tiles, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      // Column tiles outer: a tile's B panel serves every row tile in turn.
      const int64_t j0 = (t / row_tiles) * kPanel, i0 = (t % row_tiles) * kTileRows;
      const int64_t rows = std::min(kTileRows, m - i0);
      switch (rows) {
        case 1:
          vnni_rows<1>(au, k, packed, i0, j0, offset, c, n);
          break;
        case 2:
          vnni_rows<2>(au, k, packed, i0, j0, offset, c, n);
          break;
        case 3:
          vnni_rows<3>(au, k, packed, i0, j0, offset, c, n);
          break;
        default:
          vnni_rows<4>(au, k, packed, i0, j0, offset, c, n);
          break;
      }
    }
  });
}

Status int_mm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const MatmulShape s, check_int_mm(ctx, args));
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 2);
  if (out.numel() == 0) return Status();
  auto* c = out.data_as<uint32_t>();
  const int8_t* bp = b.data_as<const int8_t>();
  if (s.k > 0 && uses_vnni()) {
    int_mm_vnni(a, bp, s.m, s.k, s.n, c,
                ctx.state != nullptr && ctx.is_constant(1) ? ctx.state : nullptr);
    return Status();
  }
  parallel_for(s.m, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, s.k * s.n)),
               [&](int64_t r0, int64_t r1) {
                 if (a.dtype == DType::kUInt8) {
                   int_mm_rows_portable(a.data_as<const uint8_t>(), bp, c, r0, r1, s.k, s.n);
                 } else {
                   int_mm_rows_portable(a.data_as<const int8_t>(), bp, c, r0, r1, s.k, s.n);
                 }
               });
  return Status();
}

}  // namespace

Result<MatmulShape> check_int_mm(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.error("self and mat2 must be matrices, got " + shape_str(a.sizes) + " and " +
                     shape_str(b.sizes));
  }
  if (a.dtype != DType::kUInt8 && a.dtype != DType::kInt8) {
    return ctx.error("self has dtype " + std::string(dtype_name(a.dtype)) +
                     ", expected uint8 or int8");
  }
  if (b.dtype != DType::kInt8)
    return ctx.error("mat2 has dtype " + std::string(dtype_name(b.dtype)) + ", expected int8");
  if (a.sizes[1] != b.sizes[0]) {
    return ctx.error("cannot multiply " + shape_str(a.sizes) + " by " + shape_str(b.sizes) +
                     " (inner dimensions differ)");
  }
  const MatmulShape s{1, a.sizes[0], b.sizes[1], a.sizes[1]};
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out_arg(args, 2), std::vector<int64_t>{s.m, s.n}, DType::kInt32));
  return s;
}

Status register_int_mm_kernels(OperatorRegistry& r) {
  return r.add(OpKind::IntMm, int_mm_kernel);
}

}  // namespace etc::rt::kernels
