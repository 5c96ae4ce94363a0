// Dense matrix multiply for the CPU kernels (mm, bmm, addmm, linear, convolution).
//
// C[m, n] += alpha * sum_k A[m, k] * B[k, n], GotoBLAS/BLIS style: B is packed into
// KCxNC panels, A into MCxKC blocks, and a register-blocked micro-kernel computes one
// MRxNR tile of C per call. A and B are read through row and column strides, so
// transposed operands (linear's weight, transposed convolution) need no copy; C is
// row-major with leading dimension ldc. float uses an AVX-512 8x32 micro-kernel when the CPU
// has AVX-512F, else an AVX2/FMA 6x16 one (checked at run time: binaries stay portable
// x86-64), else a portable one the compiler vectorises for SSE2; the AVX-512 and AVX2 kernels
// give the same bits. double and int64 use portable micro-kernels (double also gets an AVX2
// build).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "graph/int4.h"

namespace etc::rt::kernels {

enum class FloatKernel { kPortable, kAvx2, kAvx512 };

// A right operand B held as weight-only quantized integers (or 16-bit floats, below) and
// dequantized as its panels are packed (a program's dequantization steps before a matrix
// product, which the load planner gives the product instead: load_plan.h). Element (k, n), n
// counted from col0:
//   v = float(q[n * q_n + k * q_k]);  v = v - zero[z(k, n)];  v = v * scale[s(k, n)]
// in float32, each step rounded as the elementwise kernels round it, so the product has the
// bits of running the steps and then the GEMM. An absent zero or scale skips that step. An
// operand's offset is (n / n_group) * n_stride + (k / k_group) * k_stride: one value per
// output channel, per group of k_group inputs, or per element.
struct DequantB {
  struct Operand {
    const float* data = nullptr;
    // Or int8 values (a zero point the program widens with its own _to_copy: exact).
    const int8_t* data_i8 = nullptr;
    // Or 4-bit values two a byte in rows of i4_size values (graph/int4.h), widened the same
    // way; element i is value i % i4_size of row i / i4_size.
    const uint8_t* data_i4 = nullptr;
    int64_t i4_size = 0;
    int64_t n_stride = 0, n_group = 1, k_stride = 0, k_group = 1;
    // When set, the same values arranged for the 4-bit row kernels (arrange_row_operands:
    // rows in 16s, lanes_groups groups along K), read a vector at a time instead of gathered.
    const float* lanes = nullptr;
    int64_t lanes_groups = 0;
    bool present() const { return data != nullptr || data_i8 != nullptr || data_i4 != nullptr; }
    // Element i, widened to float (read once per group: the division is not per value).
    float at(int64_t i) const {
      if (data != nullptr) return data[i];
      if (data_i8 != nullptr) return static_cast<float>(data_i8[i]);
      const int64_t row = i / i4_size;
      return static_cast<float>(
          int4::at(data_i4 + row * int4::row_bytes(i4_size), i - row * i4_size));
    }
  };
  const int8_t* q = nullptr;
  // Or 4-bit values two a byte (etc::unpack_int4's layout, graph/int4.h): element (k, n) is
  // value k of the packed row at q4 + n * q4_row. Only that layout (q_k == 1).
  const uint8_t* q4 = nullptr;
  int64_t q4_row = 0;
  // Or 16-bit floats (bf16, or fp16 with `float16`), widened exactly as they are packed, with
  // no zero point and no scale: a bf16/fp16 right operand read in its own dtype instead of
  // converted whole to a float32 copy first. q_n and q_k are their strides.
  const uint16_t* bits16 = nullptr;
  bool float16 = false;
  // Or float32 values in panels (with panel > 0 only): a float32 weight etc's export stored in
  // panels for a decode step, read in place.
  const float* f32 = nullptr;
  int64_t q_n = 0, q_k = 0;
  // With panel > 0 (int8 q, bits16 or f32, q_n == 1, q_k == panel, a multiple of 16): B stored in
  // panels of `panel` columns, each its K rows of `panel` values, panel_stride values apart
  // (the layout etc's CPU export gives a decode step's weights: docs/pte-format.md), so that
  // a pass over a few panels reads each front to back. Element (k, n) is value
  // (n / panel) * panel_stride + k * panel + n % panel.
  int64_t panel = 0, panel_stride = 0;
  // The offset in q, bits16 or f32 of element (k, n), n counted from col0.
  int64_t offset(int64_t k, int64_t n) const {
    n += col0;
    if (panel > 0) return (n / panel) * panel_stride + k * q_k + n % panel;
    return n * q_n + k * q_k;
  }
  // Columns from n (counted from col0) on that lie in n's panel (all when not in panels).
  int64_t panel_left(int64_t n) const {
    return panel > 0 ? panel - (n + col0) % panel : std::numeric_limits<int64_t>::max();
  }
  Operand zero, scale;
  // The program's steps ran in bf16 or fp16 (a 16-bit model's dequantization): each value is
  // rounded to that dtype after the last step, as the elementwise kernel rounds it. Only where
  // the steps before are exact in it (the load planner checks): widening int8 values, and
  // subtracting integer zero points.
  enum class Round16 : uint8_t { kNone, kBFloat16, kFloat16 };
  Round16 round16 = Round16::kNone;
  // Every dequantized value is known finite and zero or a normal float (the scales and zero
  // points are finite, each nonzero scale at least FLT_MIN): the CPU's own bf16 conversion
  // then rounds as the elementwise kernel does.
  bool normal_values = false;
  // Every zero point is an integer of magnitude at most 2^20, or there is none (the load
  // planner checks): q - z is then (2^23 + (q + 8)) - (2^23 + 8 + z) exactly, which lets the
  // 4-bit kernels widen a nibble by setting a float's low mantissa bits instead of converting.
  bool integer_zero = false;
  int64_t col0 = 0;
  // The same operand from column `cols` on.
  DequantB shifted(int64_t cols) const {
    DequantB d = *this;
    d.col0 += cols;
    return d;
  }
};

// For a 4-bit weight stored [N, K] (q4, k x n): its zero point's and scale's values arranged
// once (at load) for the kernels that dequantize a decode step's or a short prompt's weight
// in registers, which then read a vector of them at a time instead of gathering it: per 16
// rows of the weight and group of k_group inputs along K, 16 floats in the order those
// kernels hold the rows in their lanes. Fills the vectors (which must outlive d's use) and
// points d's operands at them; leaves an operand that varies within 16 rows' group (n_group
// > 1) as it is.
void arrange_row_operands(DequantB& d, int64_t k, int64_t n, std::vector<float>& zero_lanes,
                          std::vector<float>& scale_lanes);

template <typename T>
struct MatrixRef {
  const T* data;
  int64_t row_stride;  // elements between A[i, k] and A[i + 1, k]
  int64_t col_stride;  // elements between A[i, k] and A[i, k + 1]
  // When set (a right operand B only): row i starts at data + row_offsets[i] instead of
  // data + i * row_stride (a convolution's column matrix read straight from the padded
  // input: row (c, i, j) is the input shifted by that tap).
  const int64_t* row_offsets = nullptr;
  // When set with row_offsets (a left operand A only): A[i, k] = data[row_offsets[i] +
  // col_offsets[k]], strides unused (a convolution's transposed column matrix gathered from
  // the padded input: row i an output position, column k a tap).
  const int64_t* col_offsets = nullptr;
  // When set (a float right operand B only): B's elements come from it; data is unused.
  const DequantB* dequant = nullptr;
};

void gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
          float* c, int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, double alpha, MatrixRef<double> a, MatrixRef<double> b,
          double* c, int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, int64_t alpha, MatrixRef<int64_t> a,
          MatrixRef<int64_t> b, int64_t* c, int64_t ldc);

// The GEMM's K block: every element of C sums each block of kGemmKBlock values along K from
// zero, in order, then adds the sum to C (to the bias, for the first). Kernels that must give
// the GEMM's bits (pointwise_nhwc_f32) sum the same blocks.
inline constexpr int64_t kGemmKBlock = 256;

// The most rows of A for which gemm reads a 16-bit B stored [K, N] in place on AVX-512 (a
// decode step's or a short prompt's product); more rows pack B's panels.
inline constexpr int64_t kWide16Rows = 8;

// The most rows of A for which gemm reads a B stored transposed (a [N, K] matrix read as K^T,
// float32 or 16-bit floats) in place with the AVX-512 kernels, each 16 x 16 block of B loaded
// and transposed once for all the rows; more rows (or AVX2) pack B's panels.
inline constexpr int64_t kTransposedBRows = 4;

// A float left operand packed once into the blocks gemm would pack on every call (a
// convolution's constant weights); gemm_packed then skips that work. Results are identical
// to gemm's on the same operands, bit for bit: the same blocks, micro-kernel and order.
class PackedA {
 public:
  static std::shared_ptr<const PackedA> pack(int64_t m, int64_t k, MatrixRef<float> a);
  int64_t rows() const { return m_; }
  int64_t depth() const { return k_; }
  FloatKernel kernel() const { return kernel_; }
  // Block (k block pc / kKC, row block ic / kMC), as pack_a lays it out.
  const float* block(int64_t pc, int64_t ic) const;

 private:
  int64_t m_ = 0, k_ = 0;
  FloatKernel kernel_ = FloatKernel::kPortable;
  int64_t row_blocks_ = 0;
  std::unique_ptr<float, void (*)(void*)> data_{nullptr, nullptr};
  std::vector<int64_t> offsets_;  // per (k block, row block)
};

// C is overwritten instead of accumulated into: C[i, j] = rows[i] (0 when rows is null) +
// alpha * sum — the bits of filling C with rows first and accumulating, without reading C
// (a convolution's bias, written with the output).
struct GemmInit {
  const float* rows = nullptr;
  // Or one value per column (not with rows): C[i, j] = cols[j] + alpha * sum, the bits of
  // filling C with the row cols first and accumulating (a linear layer's bias). Each tile
  // is filled as its first K block starts, while it is in cache: no pass over C before.
  const float* cols = nullptr;
  // When set: called on each micro-tile of C once its last K block is in, while it is in L1
  // (rows x cols of C at `tile`, row pitch ldc; its values at src, row pitch src_ld): a
  // convolution's or a linear layer's epilogue (TileEpilogue). A product of a few rows calls
  // it on its rows' block of columns instead (gemm_packed).
  void (*tile_done)(const void* ctx, const float* src, int64_t src_ld, const float* tile,
                    int64_t ldc, int64_t rows, int64_t cols) = nullptr;
  const void* tile_ctx = nullptr;
  // With tile_done, where all of K is one block: each tile goes to a scratch tile (src), not
  // to C, which is left unwritten (nothing reads C after its epilogue).
  bool tile_scratch = false;
};

void gemm_packed(const PackedA& a, int64_t n, float alpha, MatrixRef<float> b, float* c,
                 int64_t ldc, const GemmInit* init = nullptr);

// The same for a constant right operand (a linear layer's weights): its K x N panels.
class PackedB {
 public:
  static std::shared_ptr<const PackedB> pack(int64_t k, int64_t n, MatrixRef<float> b);
  int64_t depth() const { return k_; }
  int64_t cols() const { return n_; }
  FloatKernel kernel() const { return kernel_; }
  // The panels of k block pc / kKC from column j (a multiple of the panel width) on.
  const float* panels(int64_t pc, int64_t j) const;

 private:
  int64_t k_ = 0, n_ = 0, nr_ = 0, padded_n_ = 0;
  FloatKernel kernel_ = FloatKernel::kPortable;
  std::unique_ptr<float, void (*)(void*)> data_{nullptr, nullptr};
};

// With `init`, C is overwritten as gemm_packed(PackedA) does (not read).
void gemm_packed(int64_t m, float alpha, MatrixRef<float> a, const PackedB& b, float* c,
                 int64_t ldc, const GemmInit* init = nullptr);

// Which micro-kernels gemm uses: kAuto takes the best the CPU has (AVX-512, AVX2/FMA,
// portable); tests force kAvx2 and kPortable to cover CPUs without AVX-512 or AVX2.
enum class GemmIsa { kAuto, kPortable, kAvx2 };
void set_gemm_isa(GemmIsa isa);
// The cap that $ETC_MAX_ISA asks for ("avx512": none, "avx2", "portable"), read once when the
// first kernel runs, so that one machine can measure and test the builds an AVX2-only or an
// older x86-64 CPU runs. nullopt: not a valid name. env_max_isa: nullopt when unset or empty.
std::optional<GemmIsa> parse_max_isa(std::string_view name);
std::optional<GemmIsa> env_max_isa();
// The float micro-kernel the next gemm runs (other float kernels pick their vector builds
// by it, so set_gemm_isa covers them too).
FloatKernel gemm_float_kernel();
// True when the next float gemm will run the AVX2/FMA or the AVX-512 micro-kernel.
bool gemm_uses_avx2();
// Whether the integer products (gemm_int8x4, _int_mm) run their AVX-512 VNNI builds now: the
// CPU has AVX-512 VNNI and $ETC_MAX_ISA or set_gemm_isa does not cap the kernels below
// AVX-512 (else their portable or AVX2 loops).
bool uses_vnni();
// Of a kernel's builds (one function per ISA, each compiled with its target attribute), the
// one for the micro-kernel the next gemm runs: chosen per call, so that $ETC_MAX_ISA and
// set_gemm_isa reach every kernel that goes through it.
template <typename Fn>
Fn* isa_build(Fn* avx512, Fn* avx2, Fn* portable) {
  switch (gemm_float_kernel()) {
    case FloatKernel::kAvx512:
      return avx512;
    case FloatKernel::kAvx2:
      return avx2;
    case FloatKernel::kPortable:
      break;
  }
  return portable;
}
// The float micro-kernel the next gemm runs, for reports: "AVX-512 8x32", "AVX2/FMA 6x16"
// or "portable 4x8".
const char* gemm_float_kernel_name();

}  // namespace etc::rt::kernels
