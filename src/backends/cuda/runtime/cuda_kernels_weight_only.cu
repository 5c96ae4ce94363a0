// etc::weight_only_linear's kernels (graph/weight_only.h states the value): a product over
// rows that reads the packed weight itself, and the weight dequantized whole for cuBLAS.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/runtime/cuda_kernel_util.cuh"
#include "backends/cuda/runtime/cuda_kernels.h"

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
  const unsigned b = row[c >> 1];
  const unsigned nibble = ((c & 1) != 0 ? b >> 4 : b) & 0x0Fu;
  return static_cast<float>(static_cast<int>(nibble ^ 0x08u) - 8);
}

// The chain's steps on one value, each rounded to the model's dtype: R(R(q - zero) * scale).
__device__ __forceinline__ float dequantize(const WeightOnlyArgs& a, float q, float zero,
                                            float scale) {
  const float v = a.zero != nullptr ? round_to(a.type, q - zero) : q;
  return round_to(a.type, v * scale);
}

__device__ __forceinline__ const uint8_t* weight_row(const WeightOnlyArgs& a, int64_t r) {
  const int64_t row_bytes = a.int4 ? a.k / 2 + a.k % 2 : a.k;
  return static_cast<const uint8_t*>(a.weight) + r * row_bytes;
}

// The 8 values of a row from c (a multiple of kChunk, c + 8 <= k) as bytes: one 4-byte
// load of a 4-bit row or one 8-byte load of an int8 row where the row's bytes are aligned
// for it (`aligned`), byte loads otherwise.
__device__ __forceinline__ void load_chunk(const WeightOnlyArgs& a, const uint8_t* row, int64_t c,
                                           bool aligned, float q[kChunk]) {
  if (a.int4) {
    uint32_t bits;
    if (aligned) {
      bits = *reinterpret_cast<const uint32_t*>(row + c / 2);
    } else {
      bits = 0;
      for (int i = 0; i < 4; ++i)
        bits |= static_cast<uint32_t>(row[c / 2 + i]) << (8 * i);
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      q[i] = static_cast<float>(static_cast<int>(((bits >> (4 * i)) & 0x0Fu) ^ 0x08u) - 8);
  } else {
    uint2 bits;
    if (aligned) {
      bits = *reinterpret_cast<const uint2*>(row + c);
    } else {
      bits.x = bits.y = 0;
      for (int i = 0; i < 4; ++i) {
        bits.x |= static_cast<uint32_t>(row[c + i]) << (8 * i);
        bits.y |= static_cast<uint32_t>(row[c + 4 + i]) << (8 * i);
      }
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {
      const uint32_t word = i < 4 ? bits.x : bits.y;
      q[i] = static_cast<float>(static_cast<int8_t>((word >> (8 * (i % 4))) & 0xFFu));
    }
  }
}

// out[r, col] for every row r < a.m (at most kWeightOnlyGemvRows): one warp per output
// column, its lanes along K a chunk of 8 values at a time, so that a warp reads 128 (4-bit)
// or 256 (int8) consecutive bytes of the weight's row per step; the rows' partial sums meet
// by shuffles. Decode (one row) reads each weight byte once.
__global__ void weight_only_gemv_kernel(WeightOnlyArgs a) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
  if (col >= a.n) return;
  const uint8_t* row = weight_row(a, col);
  const int64_t groups = a.k / a.group_size;
  // Whether a chunk lies in one group, and the row's bytes allow whole-word loads.
  const bool chunk_in_group = a.group_size % kChunk == 0;
  const int64_t row_bytes = a.int4 ? a.k / 2 + a.k % 2 : a.k;
  const bool aligned =
      (reinterpret_cast<uintptr_t>(a.weight) % 8) == 0 && (row_bytes % (a.int4 ? 4 : 8)) == 0;
  float acc[kWeightOnlyGemvRows];
#pragma unroll
  for (int r = 0; r < kWeightOnlyGemvRows; ++r)
    acc[r] = 0.0f;
  const int64_t whole = a.k / kChunk * kChunk;
  for (int64_t c = static_cast<int64_t>(lane) * kChunk; c < whole; c += kWarp * kChunk) {
    float q[kChunk];
    load_chunk(a, row, c, aligned, q);
    float w[kChunk];
    if (chunk_in_group) {
      const int64_t g = col * groups + c / a.group_size;
      const float zero = a.zero != nullptr ? load_float(a.zero, a.zero_type, g) : 0.0f;
      const float scale = load_float(a.scale, a.type, g);
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        w[i] = dequantize(a, q[i], zero, scale);
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int64_t g = col * groups + (c + i) / a.group_size;
        const float zero = a.zero != nullptr ? load_float(a.zero, a.zero_type, g) : 0.0f;
        w[i] = dequantize(a, q[i], zero, load_float(a.scale, a.type, g));
      }
    }
#pragma unroll
    for (int r = 0; r < kWeightOnlyGemvRows; ++r) {
      if (r >= a.m) break;
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        acc[r] += load_float(a.input, a.type, r * a.k + c + i) * w[i];
    }
  }
  // The last k % 8 values, one a lane.
  for (int64_t c = whole + lane; c < a.k; c += kWarp) {
    const int64_t g = col * groups + c / a.group_size;
    const float zero = a.zero != nullptr ? load_float(a.zero, a.zero_type, g) : 0.0f;
    const float w = dequantize(a, weight_value(a, row, c), zero, load_float(a.scale, a.type, g));
#pragma unroll
    for (int r = 0; r < kWeightOnlyGemvRows; ++r) {
      if (r >= a.m) break;
      acc[r] += load_float(a.input, a.type, r * a.k + c) * w;
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
      if (a.bias != nullptr) v += load_float(a.bias, a.type, col);
      store_float(a.out, a.type, r * a.n + col, v);
    }
  }
}

// w[i] for i < n * k: the dequantized weight in the model's dtype (a grid-stride loop).
template <typename I>
__global__ void weight_only_dequantize_kernel(WeightOnlyArgs a, I count, void* w) {
  const I k = static_cast<I>(a.k), group_size = static_cast<I>(a.group_size);
  const I groups = k / group_size;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<I>(blockDim.x) * gridDim.x) {
    const I r = i / k, c = i - r * k;
    const I g = r * groups + c / group_size;
    const float zero = a.zero != nullptr ? load_float(a.zero, a.zero_type, g) : 0.0f;
    store_float(
        w, a.type, i,
        dequantize(a, weight_value(a, weight_row(a, r), c), zero, load_float(a.scale, a.type, g)));
  }
}

}  // namespace

cudaError_t launch_weight_only_gemv(const WeightOnlyArgs& a, cudaStream_t stream) {
  if (a.m <= 0 || a.n <= 0) return cudaSuccess;
  if (a.m > kWeightOnlyGemvRows) return cudaErrorInvalidValue;
  const int64_t blocks = (a.n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  weight_only_gemv_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * kWarp, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_weight_only_dequantize(const WeightOnlyArgs& a, void* w, cudaStream_t stream) {
  const int64_t count = a.n * a.k;
  if (count == 0) return cudaSuccess;
  if (count <= kMaxInt32Loop) {
    weight_only_dequantize_kernel<int32_t>
        <<<grid_for(count), kThreads, 0, stream>>>(a, static_cast<int32_t>(count), w);
  } else {
    weight_only_dequantize_kernel<int64_t><<<grid_for(count), kThreads, 0, stream>>>(a, count, w);
  }
  return cudaGetLastError();
}

}  // namespace etc::cuda::kernels
