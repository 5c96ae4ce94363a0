// Dense matrix multiply for the CPU kernels (mm, bmm, addmm, linear, convolution).
//
// C[m, n] += alpha * sum_k A[m, k] * B[k, n], GotoBLAS/BLIS style: B is packed into
// KCxNC panels, A into MCxKC blocks, and a register-blocked micro-kernel computes one
// MRxNR tile of C per call. A and B are read through row and column strides, so
// transposed operands (linear's weight, transposed convolution) need no copy; C is
// row-major with leading dimension ldc. float uses an AVX2/FMA 6x16 micro-kernel when the
// CPU has those instructions (checked at run time: binaries stay portable x86-64),
// else a portable one the compiler vectorises for SSE2; double and int64 use portable
// micro-kernels (double also gets an AVX2 build).
#pragma once

#include <cstdint>

namespace etc::rt::kernels {

template <typename T>
struct MatrixRef {
  const T* data;
  int64_t row_stride;  // elements between A[i, k] and A[i + 1, k]
  int64_t col_stride;  // elements between A[i, k] and A[i, k + 1]
};

void gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
          float* c, int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, double alpha, MatrixRef<double> a, MatrixRef<double> b,
          double* c, int64_t ldc);
void gemm(int64_t m, int64_t n, int64_t k, int64_t alpha, MatrixRef<int64_t> a,
          MatrixRef<int64_t> b, int64_t* c, int64_t ldc);

// Which micro-kernels gemm uses. Tests force kPortable to cover CPUs without AVX2.
enum class GemmIsa { kAuto, kPortable };
void set_gemm_isa(GemmIsa isa);
// True when the next float gemm will run the AVX2/FMA micro-kernel.
bool gemm_uses_avx2();

}  // namespace etc::rt::kernels
