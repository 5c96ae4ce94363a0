// Device helpers shared by the delegate's kernel files (cuda_kernels.cu,
// cuda_kernels_reduce.cu): the grid-stride loop and its grid size, and element loads and
// stores with ATen's conversion rules (as the CPU kernels' convert()). Only nvcc compiles
// this header; private to src/backends/cuda/runtime.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>

#include "backends/cuda/runtime/cuda_kernels.h"

namespace etc::cuda::kernels {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements.
inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks);
}

// The most elements a grid-stride loop may count with a 32-bit index: its last step past
// the end (index + blockDim * gridDim, up to grid_for's cap) must not overflow int32.
constexpr int64_t kMaxInt32Loop = INT32_MAX - int64_t{65535} * 8 * kThreads;

#define ETC_GRID_STRIDE(i, n)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

// ---- Element conversion (ATen's rules, as the CPU kernels' convert()) ------------------

// float -> int64: truncation toward zero, NaN gives 0, out-of-range values saturate.
__device__ __forceinline__ int64_t float_to_i64(double v) {
  if (v != v) return 0;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  return static_cast<int64_t>(v);
}

__device__ __forceinline__ bool is_float(Elem t) {
  return t == Elem::kF32 || t == Elem::kF16 || t == Elem::kBF16;
}

// Loads element i of p (type t) as double, exactly.
__device__ __forceinline__ double load_double(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::kF32:
      return static_cast<const float*>(p)[i];
    case Elem::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Elem::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Elem::kI32:
      return static_cast<double>(static_cast<const int32_t*>(p)[i]);
    case Elem::kI64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case Elem::kBool:
      return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
    case Elem::kU8:
      return static_cast<const uint8_t*>(p)[i];
    case Elem::kI8:
      return static_cast<const int8_t*>(p)[i];
    case Elem::kI16:
      return static_cast<const int16_t*>(p)[i];
  }
  return 0;
}

__device__ __forceinline__ int64_t load_int(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::kI32:
      return static_cast<const int32_t*>(p)[i];
    case Elem::kI64:
      return static_cast<const int64_t*>(p)[i];
    case Elem::kBool:
      return static_cast<const uint8_t*>(p)[i] != 0 ? 1 : 0;
    case Elem::kU8:
      return static_cast<const uint8_t*>(p)[i];
    case Elem::kI8:
      return static_cast<const int8_t*>(p)[i];
    case Elem::kI16:
      return static_cast<const int16_t*>(p)[i];
    default:
      return float_to_i64(load_double(p, t, i));
  }
}

__device__ __forceinline__ float load_float(const void* p, Elem t, int64_t i) {
  switch (t) {
    case Elem::kF32:
      return static_cast<const float*>(p)[i];
    case Elem::kF16:
      return __half2float(static_cast<const __half*>(p)[i]);
    case Elem::kBF16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Elem::kI64:  // int64 -> float rounds once, as static_cast<float>(int64) on the CPU
      return static_cast<float>(static_cast<const int64_t*>(p)[i]);
    default:
      return static_cast<float>(load_double(p, t, i));
  }
}

// Rounds a float to the precision of storage type t (the CPU kernels convert every input
// to the out's dtype before computing).
__device__ __forceinline__ float round_to(Elem t, float v) {
  if (t == Elem::kF16) return __half2float(__float2half_rn(v));
  if (t == Elem::kBF16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

__device__ __forceinline__ void store_int_bits(void* p, Elem t, int64_t i, int64_t v) {
  switch (t) {
    case Elem::kI32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v);
      break;
    case Elem::kI64:
      static_cast<int64_t*>(p)[i] = v;
      break;
    case Elem::kBool:
      static_cast<uint8_t*>(p)[i] = v != 0;
      break;
    case Elem::kU8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
      break;
    case Elem::kI8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v);
      break;
    case Elem::kI16:
      static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v);
      break;
    default:
      break;
  }
}

__device__ __forceinline__ void store_float(void* p, Elem t, int64_t i, float v) {
  switch (t) {
    case Elem::kF32:
      static_cast<float*>(p)[i] = v;
      break;
    case Elem::kF16:
      static_cast<__half*>(p)[i] = __float2half_rn(v);
      break;
    case Elem::kBF16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
      break;
    case Elem::kBool:
      static_cast<uint8_t*>(p)[i] = v != 0.0f;
      break;
    default:
      store_int_bits(p, t, i, float_to_i64(v));
  }
}

__device__ __forceinline__ void store_double(void* p, Elem t, int64_t i, double v) {
  if (is_float(t)) {
    store_float(p, t, i, static_cast<float>(v));
  } else if (t == Elem::kBool) {
    static_cast<uint8_t*>(p)[i] = v != 0.0;
  } else {
    store_int_bits(p, t, i, float_to_i64(v));
  }
}

__device__ __forceinline__ void store_int(void* p, Elem t, int64_t i, int64_t v) {
  if (is_float(t)) {
    store_float(p, t, i, static_cast<float>(v));
  } else {
    store_int_bits(p, t, i, v);
  }
}

// Compute-type dispatch: C is float (floating outs) or int64_t (integer and bool outs).
template <typename C>
__device__ __forceinline__ C load_as(const void* p, Elem t, int64_t i, Elem out_type);
template <>
__device__ __forceinline__ float load_as<float>(const void* p, Elem t, int64_t i, Elem out_type) {
  float v = load_float(p, t, i);
  return t == out_type ? v : round_to(out_type, v);
}
template <>
__device__ __forceinline__ int64_t load_as<int64_t>(const void* p, Elem t, int64_t i, Elem) {
  return load_int(p, t, i);
}
__device__ __forceinline__ void store_as(void* p, Elem t, int64_t i, float v) {
  store_float(p, t, i, v);
}
__device__ __forceinline__ void store_as(void* p, Elem t, int64_t i, int64_t v) {
  store_int(p, t, i, v);
}

}  // namespace etc::cuda::kernels
