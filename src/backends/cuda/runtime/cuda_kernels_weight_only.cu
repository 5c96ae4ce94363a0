// etc::weight_only_linear's kernels (graph/weight_only.h states the value): a product over
// rows that reads the packed weight itself, and the weight dequantized whole for cuBLAS. And
// aten::_int_mm, the integer product of dynamically quantized activations by int8 weights.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/runtime/cuda_kernel_util.cuh"
#include "backends/cuda/runtime/cuda_kernels.h"
#include "graph/int4.h"

namespace etc::cuda::kernels {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 4;
// Values a lane takes at a time along K: 4 bytes of a 4-bit row, 8 of an int8 row.
constexpr int kChunk = 8;

// Value c of row `row` of the weight, widened (exact: -128..127).
__device__ __forceinline__ float weight_value(const WeightOnlyArgs& a, const uint8_t* row,
                                              int64_t c) {
  if (!a.int4) return static_cast<float>(reinterpret_cast<const int8_t*>(row)[c]);
  return static_cast<float>(int4::at(row, c));
}

// The chain's steps on one value, each rounded to the model's dtype: R(R(q - zero) * scale).
// T: the model's element type, a template constant where the caller has one (the GEMV's
// instantiations), so that every load, rounding and store of it compiles to its own code
// instead of a switch over every dtype.
template <Elem T>
__device__ __forceinline__ float dequantize(const WeightOnlyArgs& a, float q, float zero,
                                            float scale) {
  const float v = a.zero != nullptr ? round_to(T, q - zero) : q;
  return round_to(T, v * scale);
}

// The zero point of group g: int8 or of the model's type.
template <Elem T>
__device__ __forceinline__ float zero_at(const WeightOnlyArgs& a, int64_t g) {
  if (a.zero == nullptr) return 0.0f;
  if (a.zero_type == Elem::kI8) return static_cast<float>(static_cast<const int8_t*>(a.zero)[g]);
  return load_float(a.zero, T, g);
}

__device__ __forceinline__ int64_t weight_row_bytes(const WeightOnlyArgs& a) {
  return a.int4 ? int4::row_bytes(a.k) : a.k;
}

__device__ __forceinline__ const uint8_t* weight_row(const WeightOnlyArgs& a, int64_t r) {
  return static_cast<const uint8_t*>(a.weight) + r * weight_row_bytes(a);
}

// The bytes of the 8 values of a row from c (a multiple of kChunk, c + 8 <= k): one 4-byte
// load of a 4-bit row (into .x) or one 8-byte load of an int8 row where the row's bytes are
// aligned for it (`aligned`), byte loads otherwise.
__device__ __forceinline__ uint2 load_chunk(const WeightOnlyArgs& a, const uint8_t* row, int64_t c,
                                            bool aligned) {
  uint2 bits{0, 0};
  if (a.int4) {
    if (aligned) {
      bits.x = *reinterpret_cast<const uint32_t*>(row + c / 2);
    } else {
      for (int i = 0; i < 4; ++i)
        bits.x |= static_cast<uint32_t>(row[c / 2 + i]) << (8 * i);
    }
  } else if (aligned) {
    bits = *reinterpret_cast<const uint2*>(row + c);
  } else {
    for (int i = 0; i < 4; ++i) {
      bits.x |= static_cast<uint32_t>(row[c + i]) << (8 * i);
      bits.y |= static_cast<uint32_t>(row[c + 4 + i]) << (8 * i);
    }
  }
  return bits;
}

// The 8 values load_chunk read, widened (value i: nibble i of .x, low nibble first, or byte
// i of .x then .y).
__device__ __forceinline__ void widen_chunk(const WeightOnlyArgs& a, uint2 bits, float q[kChunk]) {
  if (a.int4) {
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      q[i] = static_cast<float>(static_cast<int>(((bits.x >> (4 * i)) & 0x0Fu) ^ 0x08u) - 8);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const uint32_t word = i < 4 ? bits.x : bits.y;
      q[i] = static_cast<float>(static_cast<int8_t>((word >> (8 * (i % 4))) & 0xFFu));
    }
  }
}

// acc[r] += the input's rows times the chunk at c of column col's weight row (its bytes in
// `bits`), each value dequantized by the chain's steps.
template <Elem T>
__device__ __forceinline__ void accumulate_chunk(const WeightOnlyArgs& a, int64_t col,
                                                 int64_t groups, int64_t c, bool chunk_in_group,
                                                 uint2 bits, float acc[kWeightOnlyGemvRows]) {
  float q[kChunk];
  widen_chunk(a, bits, q);
  float w[kChunk];
  if (chunk_in_group) {
    const int64_t g = col * groups + c / a.group_size;
    const float zero = zero_at<T>(a, g);
    const float scale = load_float(a.scale, T, g);
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      w[i] = dequantize<T>(a, q[i], zero, scale);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const int64_t g = col * groups + (c + i) / a.group_size;
      w[i] = dequantize<T>(a, q[i], zero_at<T>(a, g), load_float(a.scale, T, g));
    }
  }
#pragma unroll
  for (int r = 0; r < kWeightOnlyGemvRows; ++r) {
    if (r >= a.m) break;
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      acc[r] += load_float(a.input, T, r * a.k + c + i) * w[i];
  }
}

// Chunks a lane loads before it computes on any of them: more of the weight in flight per
// warp (4 x 128 bytes of a 4-bit row), which a memory-bound decode step needs.
constexpr int kChunksInFlight = 4;

// out[r, col] for every row r < a.m (at most kWeightOnlyGemvRows): one warp per output
// column, its lanes along K a chunk of 8 values at a time, so that a warp reads 128 (4-bit)
// or 256 (int8) consecutive bytes of the weight's row per chunk, kChunksInFlight chunks
// loaded before they are used; the rows' partial sums meet by shuffles. Decode (one row)
// reads each weight byte once.
template <Elem T>
__global__ void weight_only_gemv_kernel(WeightOnlyArgs a) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (col >= a.n) return;
  const uint8_t* row = weight_row(a, col);
  const int64_t groups = a.k / a.group_size;
  // Whether a chunk lies in one group, and the row's bytes allow whole-word loads.
  const bool chunk_in_group = a.group_size % kChunk == 0;
  const int64_t row_bytes = weight_row_bytes(a);
  const bool aligned =
      (reinterpret_cast<uintptr_t>(a.weight) % 8) == 0 && (row_bytes % (a.int4 ? 4 : 8)) == 0;
  float acc[kWeightOnlyGemvRows];
#pragma unroll
  for (int r = 0; r < kWeightOnlyGemvRows; ++r)
    acc[r] = 0.0f;
  const int64_t whole = a.k / kChunk * kChunk;
  constexpr int64_t kStep = kWarp * kChunk;  // values a warp covers per chunk
  int64_t c = static_cast<int64_t>(lane) * kChunk;
  // While all kChunksInFlight chunks lie in the row: their loads first, then their sums
  // (named, not an array, which the compiler would put in local memory).
  static_assert(kChunksInFlight == 4, "the loop below names its chunks");
  for (; c + (kChunksInFlight - 1) * kStep < whole; c += kChunksInFlight * kStep) {
    const uint2 b0 = load_chunk(a, row, c, aligned);
    const uint2 b1 = load_chunk(a, row, c + kStep, aligned);
    const uint2 b2 = load_chunk(a, row, c + 2 * kStep, aligned);
    const uint2 b3 = load_chunk(a, row, c + 3 * kStep, aligned);
    accumulate_chunk<T>(a, col, groups, c, chunk_in_group, b0, acc);
    accumulate_chunk<T>(a, col, groups, c + kStep, chunk_in_group, b1, acc);
    accumulate_chunk<T>(a, col, groups, c + 2 * kStep, chunk_in_group, b2, acc);
    accumulate_chunk<T>(a, col, groups, c + 3 * kStep, chunk_in_group, b3, acc);
  }
  for (; c < whole; c += kStep)
    accumulate_chunk<T>(a, col, groups, c, chunk_in_group, load_chunk(a, row, c, aligned), acc);
  // The last k % 8 values, one a lane.
  for (int64_t t = whole + lane; t < a.k; t += kWarp) {
    const int64_t g = col * groups + t / a.group_size;
    const float w =
        dequantize<T>(a, weight_value(a, row, t), zero_at<T>(a, g), load_float(a.scale, T, g));
#pragma unroll
    for (int r = 0; r < kWeightOnlyGemvRows; ++r) {
      if (r >= a.m) break;
      acc[r] += load_float(a.input, T, r * a.k + t) * w;
    }
  }
#pragma unroll
  for (int r = 0; r < kWeightOnlyGemvRows; ++r) {
    if (r >= a.m) break;
    float v = acc[r];
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      v += __shfl_xor_sync(0xFFFFFFFFu, v, offset);
    if (lane == 0) {
      if (a.bias != nullptr) v += load_float(a.bias, T, col);
      store_float(a.out, T, r * a.n + col, v);
    }
  }
}

// w[i] for i < n * k: the dequantized weight in the model's dtype (a grid-stride loop).
template <Elem T, typename I>
__global__ void weight_only_dequantize_kernel(WeightOnlyArgs a, I count, void* w) {
  const I k = static_cast<I>(a.k), group_size = static_cast<I>(a.group_size);
  const I groups = k / group_size;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    const I r = i / k, c = i - r * k;
    const I g = r * groups + c / group_size;
    store_float(w, T, i,
                dequantize<T>(a, weight_value(a, weight_row(a, r), c), zero_at<T>(a, g),
                              load_float(a.scale, T, g)));
  }
}

template <Elem T>
cudaError_t gemv_as(const WeightOnlyArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.n + kWarpsPerBlock - 1) / kWarpsPerBlock);
  weight_only_gemv_kernel<T><<<blocks, kWarpsPerBlock * kWarp, 0, stream>>>(a);
  return cudaGetLastError();
}

template <Elem T>
cudaError_t dequantize_as(const WeightOnlyArgs& a, void* w, cudaStream_t stream) {
  const int64_t count = a.n * a.k;
  if (count <= kMaxInt32Loop) {
    weight_only_dequantize_kernel<T, int32_t>
        <<<grid_for(count), kThreads, 0, stream>>>(a, static_cast<int32_t>(count), w);
  } else {
    weight_only_dequantize_kernel<T, int64_t>
        <<<grid_for(count), kThreads, 0, stream>>>(a, count, w);
  }
  return cudaGetLastError();
}

// ---- aten::_int_mm ---------------------------------------------------------------------------

constexpr int kIntMmTile = 16;  // a block's 16 x 16 outputs, one a thread

// out [m, n] (int32) = a [m, k] (uint8, or int8 with a_signed) @ b [k, n] (int8): 16 x 16
// tiles of A and B staged in shared memory, kIntMmTile values of K at a time, each thread's
// sum in uint32 (ATen's int32 sums wrap; unsigned wrapping is defined). Exact, as the CPU's.
// Block (x, y) covers columns 16x.. and rows 16y..; rows past the grid's y extent repeat by
// the grid's height.
__global__ void int_mm_kernel(const uint8_t* a, bool a_signed, const int8_t* b, int32_t* out,
                              int64_t m, int64_t k, int64_t n) {
  __shared__ int32_t as[kIntMmTile][kIntMmTile];
  __shared__ int32_t bs[kIntMmTile][kIntMmTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kIntMmTile + tx;
  for (int64_t row0 = static_cast<int64_t>(blockIdx.y) * kIntMmTile; row0 < m;
       row0 += static_cast<int64_t>(gridDim.y) * kIntMmTile) {
    const int64_t row = row0 + ty;
    uint32_t sum = 0;
    for (int64_t p0 = 0; p0 < k; p0 += kIntMmTile) {
      // Thread (tx, ty) stages A[row, p0 + tx] and B[p0 + ty, col]; zero past the edges.
      const int64_t pa = p0 + tx, pb = p0 + ty;
      int32_t av = 0, bv = 0;
      if (row < m && pa < k) {
        const uint8_t byte = a[row * k + pa];
        av =
            a_signed ? static_cast<int32_t>(static_cast<int8_t>(byte)) : static_cast<int32_t>(byte);
      }
      if (pb < k && col < n) bv = b[pb * n + col];
      as[ty][tx] = av;
      bs[ty][tx] = bv;
      __syncthreads();
#pragma unroll
      for (int q = 0; q < kIntMmTile; ++q)
        sum += static_cast<uint32_t>(as[ty][q]) * static_cast<uint32_t>(bs[q][tx]);
      __syncthreads();
    }
    if (row < m && col < n) out[row * n + col] = static_cast<int32_t>(sum);
  }
}

}  // namespace

// Each launch is instantiated for the model's element type (float32, float16 or bfloat16).
cudaError_t launch_weight_only_gemv(const WeightOnlyArgs& a, cudaStream_t stream) {
  if (a.m <= 0 || a.n <= 0) return cudaSuccess;
  if (a.m > kWeightOnlyGemvRows) return cudaErrorInvalidValue;
  switch (a.type) {
    case Elem::kF32:
      return gemv_as<Elem::kF32>(a, stream);
    case Elem::kF16:
      return gemv_as<Elem::kF16>(a, stream);
    case Elem::kBF16:
      return gemv_as<Elem::kBF16>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_weight_only_dequantize(const WeightOnlyArgs& a, void* w, cudaStream_t stream) {
  if (a.n * a.k == 0) return cudaSuccess;
  switch (a.type) {
    case Elem::kF32:
      return dequantize_as<Elem::kF32>(a, w, stream);
    case Elem::kF16:
      return dequantize_as<Elem::kF16>(a, w, stream);
    case Elem::kBF16:
      return dequantize_as<Elem::kBF16>(a, w, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t launch_int_mm(const void* a, bool a_signed, const int8_t* b, int32_t* out, int64_t m,
                          int64_t k, int64_t n, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return cudaSuccess;
  const int64_t col_tiles = (n + kIntMmTile - 1) / kIntMmTile;
  const int64_t row_tiles = (m + kIntMmTile - 1) / kIntMmTile;
  if (col_tiles > INT32_MAX) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(col_tiles),
                  static_cast<unsigned>(row_tiles < 65535 ? row_tiles : 65535));
  const dim3 block(kIntMmTile, kIntMmTile);
  int_mm_kernel<<<grid, block, 0, stream>>>(static_cast<const uint8_t*>(a), a_signed, b, out, m, k,
                                            n);
  return cudaGetLastError();
}

}  // namespace etc::cuda::kernels
