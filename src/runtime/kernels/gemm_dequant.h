// The GEMM's path for a quantized right operand (DequantB with int8 values, or 4-bit values two
// a byte): each value dequantized as the panels are packed, with the program's steps in their
// order (the bits of the unfused program; a decode step's table lookup sums in its own order:
// row4_lut_avx512). 16-bit operands go to gemm_wide16.h. Internal to gemm.cpp (and its tests).
#pragma once

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// The kc x nc block of B at (p0, j0) into NR-column panels, as pack_b lays them out, each
// value dequantized; isa: the micro-kernel the panels are for (and the SIMD the packing uses).
void pack_dequant(FloatKernel isa, const DequantB& d, int64_t p0, int64_t j0, int64_t kc,
                  int64_t nc, int64_t nr, float* dst);

// One row of A (a decode step) times an int8 or 4-bit weight stored [N, K] (q or q4, q_k
// == 1): whether row_in_registers_avx512 takes this operand for a product of depth k in K
// blocks of kc_block (AVX-512; values in whole dwords: k and the blocks multiples of 8 (4-bit)
// or 4 (int8); a zero point and a scale per row or per group of such a multiple; float32 or
// bf16 steps).
bool row_in_registers_applies(FloatKernel isa, const DequantB& d, int64_t k, int64_t kc_block);
// C[j, j + cols) (cols <= 32) = alpha * acc + (init ? *init : C), acc the sum over the K block
// [pc, pc + kc) of A[p] (a[p * a_step], p from 0) times B's dequantized values: the bits of
// pack_dequant's 32-column panel then row_kernel_f32_avx512, with the values of 16 weight
// rows gathered a dword at a time and dequantized in registers, straight into the
// multiply-adds (no panel in memory, no transpose).
void row_in_registers_avx512(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols,
                             const float* a, int64_t a_step, float* c, float alpha,
                             const float* init);

// One row of A times a 4-bit weight stored [N, K] (q4, q_k == 1) by table lookup (AVX-512):
// the 16 values a nibble stands for in a weight row's group are dequantized once (the
// program's steps, its bf16 rounding) into a register, which a permutation indexes by the
// nibbles themselves, 16 inputs at a time. Each column's sum runs in 16 lanes, each lane over
// its own inputs in order, the lanes then added in a fixed order: not the bits of the unfused
// product (inputs added in order), the same at any thread count. row4_lut_block: the inputs it
// reads of a row at a time (128, 64 or 32: k, and the groups of a zero point and a scale per
// row or per group, multiples of it; float32 or bf16 steps), 0 where it does not apply.
int64_t row4_lut_block(FloatKernel isa, const DequantB& d, int64_t k);
// How row4_lut_arrange laid A's row out: float32 values, or (a bf16 program whose row holds
// bf16 values, normal or zero, blocks of 128, on a CPU with AVX512_BF16) bf16 pairs that
// vdpbf16ps multiplies by the table's values two at a time, half the instructions again
// (each lane's multiply-adds still rounded one at a time; subnormal products flushed).
enum class LutRow { kFloat, kBf16Pairs };
// A's k values (a[p * a_step]) in the order row4_lut_avx512 reads them into out (k floats'
// room): float32, per block of inputs p, for i below block / 16, the 16 inputs p + (block /
// 16) l + i; or bf16 pairs (the kernel's comment).
LutRow row4_lut_arrange(const DequantB& d, int64_t k, int64_t block, const float* a, int64_t a_step,
                        float* out);
// C[j, j + cols) = alpha * (A's row . weight rows) + (init ? *init : C), over the whole depth.
void row4_lut_avx512(const DequantB& d, int64_t k, int64_t block, LutRow form, int64_t j,
                     int64_t cols, const float* a_arranged, float* c, float alpha,
                     const float* init);

// Rows of A at most for rows_in_registers_avx512 (a short prompt).
inline constexpr int64_t kRowsInRegisters = 8;
// The same for m <= kRowsInRegisters rows of A (row r at a + r * a_rs, its columns a_cs
// apart; C's at c + r * ldc; init, when set, one value per row), each dequantized value shared
// by the rows: whether it takes this operand (4-bit values in blocks of 32 inputs: k, the K
// blocks and the operands' groups multiples of 32), and the product of one K block.
bool rows_in_registers_applies(FloatKernel isa, const DequantB& d, int64_t k, int64_t kc_block);
void rows_in_registers_avx512(const DequantB& d, int64_t pc, int64_t kc, int64_t j, int64_t cols,
                              int64_t m, const float* a, int64_t a_rs, int64_t a_cs, float* c,
                              int64_t ldc, float alpha, const float* init);

}  // namespace etc::rt::kernels
