// The CUDA kernels of the delegate, as plain launch functions over POD descriptions (this
// header is shared by the nvcc-compiled kernels and the C++20 op wrappers in cuda_ops.cpp,
// which check arguments and compute shapes on the host). One kernel per op family, written
// to be obviously equivalent to the CPU reference kernels in src/runtime/kernels:
//   - elementwise (map): every unary, binary, scalar, where, pow, fill and strided copy op,
//     over an index space of up to 8 dims in which each operand has its own strides (0 where
//     broadcast), so copies of views (permute, slice, expand, cat windows) are maps too;
//   - reductions (sum, mean, amax, var) and index reductions (argmax, max.dim): one block per
//     output element;
//   - sort and topk: one block per lane, sorting in shared memory, with merge passes over
//     scratch memory for lanes longer than a block's tile;
//   - softmax / log_softmax and layer norm: one block per row;
//   - batch norm, pooling, embedding, im2col and direct convolution: one thread per output;
//   - a tiled GEMM for float16/bfloat16 (float32 GEMMs go to cuBLAS, in cuda_ops.cpp).
// Elements are loaded into a compute type (float for floating outs, int64 for integer and
// bool outs, double for float accumulations) and stored with ATen's conversion rules, as the
// CPU kernels' convert() does. Every launch returns cudaGetLastError().
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace etc::cuda::kernels {

constexpr int kMaxRank = 8;

// Element types as the kernels know them (the CUDA capability table admits no float64).
enum class Elem : int32_t { kF32, kF16, kBF16, kI32, kI64, kBool, kU8, kI8, kI16 };

// An index space: sizes of up to kMaxRank dims (rank 0 = one element).
struct Shape {
  int32_t rank = 0;
  int64_t sizes[kMaxRank] = {};
};

// One operand over a Shape: element offsets are offset + sum(index[d] * strides[d]).
struct Operand {
  void* data = nullptr;
  Elem type = Elem::kF32;
  int64_t offset = 0;
  int64_t strides[kMaxRank] = {};
};

enum class MapOp : int32_t {
  kCopy,  // out = a (with conversion)
  kFill,  // out = scalar
  kAdd,   // out = a + alpha * b   (b a tensor, or the scalar when b_is_scalar)
  kSub,   // out = a - alpha * b
  kMul,
  kDiv,
  kPow,    // out = a ** scalar
  kWhere,  // out = cond(a) ? b : c
  kNeg,
  kRelu,
  kClamp,  // lo / hi when has_lo / has_hi (hardtanh too)
  kExp,
  kLog,
  kRsqrt,
  kSigmoid,
  kSqrt,
  kTanh,
  kErf,
  kGeluErf,
  kGeluTanh,
  kHardsigmoid,
  kHardswish,
  kSilu,
  kEqScalar,    // out (bool) = a == scalar (as double when a is float or scalar_is_float)
  kLogicalNot,  // out (bool) = a == 0
};

// Scalars in both precisions: integers exactly, floats through double (as the CPU kernels).
struct Scalar {
  double d = 0;
  int64_t i = 0;
};

struct MapArgs {
  MapOp op = MapOp::kCopy;
  Shape shape;
  Operand out, a, b, c;
  bool b_is_scalar = false;
  Scalar alpha{1, 1}, scalar, lo, hi;
  bool has_lo = false, has_hi = false;
  bool scalar_is_float = false;  // kEqScalar: the scalar is a Python float
};
cudaError_t launch_map(const MapArgs& args, cudaStream_t stream);

// Whether this file's device code loads on the current device: cudaSuccess, or the driver's
// error (cudaErrorNoKernelImageForDevice when no built SASS or PTX fits it).
cudaError_t kernel_image_status();

// The unary math ops of graph/unary_math.def: out[i] = Op(in[i]) over n contiguous elements,
// computed as the CPU kernel does (float for float outs, the input first rounded to the
// out's precision; int64 for integer outs; bool for bool; predicates read float inputs as
// float and are false on integers).
enum class UnaryMathOp : int32_t {
#define ETC_UNARY_MATH(op, kind, onnx, expr) k##op,
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH
};
cudaError_t launch_unary_math(UnaryMathOp op, const void* in, Elem in_type, void* out,
                              Elem out_type, int64_t n, cudaStream_t stream);

// The binary math functions of graph/binary_math.def: out = Fn(a, b) over `shape`, a and b
// broadcast through their strides (b absent: the scalar), computed as the CPU kernel does in
// `compute` (kF32 for any float compute -- the operands first rounded to that precision,
// kF16 / kBF16 as such --, kI64 for integers, kBool for logical ops and bool operands),
// stored in the out's type (bool for comparisons and logical ops).
enum class BinaryMathFn : int32_t {
#define ETC_BINARY_FN(fn, kind, expr) k##fn,
#define ETC_BINARY_OP(op, fn, form, onnx)
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN
};
struct BinaryMathArgs {
  BinaryMathFn fn = BinaryMathFn::kEq;
  Shape shape;
  Operand out, a, b;
  bool b_is_scalar = false;
  Scalar scalar;
  Elem compute = Elem::kF32;
};
cudaError_t launch_binary_math(const BinaryMathArgs& args, cudaStream_t stream);

// sum / mean / amax / amin / prod over the dims of `in` not kept: the output index space is `kept`
// (each dim with its input stride), the reduced space `reduced` (likewise). `in` and `out` are
// contiguous memory; out element i is out.data[i].
// kAny: bool out, any element != 0. kProd of integers wraps in int64.
enum class ReduceOp : int32_t { kSum, kMean, kAmax, kAmin, kProd, kAny };
struct ReduceArgs {
  ReduceOp op = ReduceOp::kSum;
  void* in = nullptr;
  Elem in_type = Elem::kF32;
  void* out = nullptr;
  Elem out_type = Elem::kF32;
  Shape kept, reduced;
  int64_t kept_strides[kMaxRank] = {};
  int64_t reduced_strides[kMaxRank] = {};
  bool integer = false;  // accumulate in int64 (sum of integers) instead of double
};
// With few outputs and many elements each (a whole-tensor sum), one block per output would
// use a handful of SMs: each output's reduced elements are cut into reduce_splits() chunks of
// consecutive elements, one block each writes a partial to `scratch` (reduce_scratch_bytes()
// of device memory), then one block per output combines its partials. The cut depends only
// on the shapes, never on the GPU, and every step combines in a fixed order, so a result is
// the same on every run and every GPU.
cudaError_t launch_reduce(const ReduceArgs& args, void* scratch, cudaStream_t stream);

// Elements per partial of a split reduction, and the splits of one output (1: not split).
inline constexpr int64_t kReduceChunk = 16384;
inline int64_t reduce_splits(int64_t outputs, int64_t count) {
  // 1024 outputs already fill every SM of today's GPUs with one block each.
  if (outputs >= 1024 || count < 2 * kReduceChunk) return 1;
  return (count + kReduceChunk - 1) / kReduceChunk;
}
inline size_t reduce_scratch_bytes(const ReduceArgs& args) {
  int64_t outputs = 1, count = 1;
  for (int d = 0; d < args.kept.rank; ++d)
    outputs *= args.kept.sizes[d];
  for (int d = 0; d < args.reduced.rank; ++d)
    count *= args.reduced.sizes[d];
  const int64_t splits = reduce_splits(outputs, count);
  // Partials are double or int64 (8 bytes).
  return splits > 1 ? static_cast<size_t>(outputs * splits) * 8 : 0;
}

// var.correction over the dims of `args` not kept (launch_reduce's layout; args.op and
// args.integer unused): per output, one block takes the mean and then the sum of squared
// deviations from it, both in double (the CPU kernel's two passes), and stores that sum
// divided by max(count - correction, 0) in out_type.
cudaError_t launch_var(const ReduceArgs& args, double correction, cudaStream_t stream);

// argmax / argmin (and max.dim / min.dim) along the middle dim of [outer, len, inner]
// (contiguous, len >= 1), one block per lane: the index of the greatest (`max`) or least
// element -- the first NaN if there is one, else the first of the extreme values, as the CPU
// kernel -- into indices[lane], and when `values` is not null that element, copied, into
// values[lane] (of `type`). Floats compare as float, integers and bool as int64.
cudaError_t launch_arg_extreme(const void* in, Elem type, int64_t outer, int64_t len, int64_t inner,
                               bool max, void* values, int64_t* indices, cudaStream_t stream);

// sort and topk along the middle dim of [outer, len, inner] (contiguous): per lane, the first
// k elements of the CPU kernel's stable order -- ascending, or descending; NaN above every
// number, -0.0 equal to 0.0; equal elements in index order -- into `values` (of `type`, copied)
// and `indices` (int64), both [outer, k, inner]. A lane of up to 2048 elements is sorted by one
// block in shared memory; longer lanes are sorted in tiles of 2048 that merge passes join,
// in `scratch` of sort_scratch_bytes(outer * inner, len) bytes (null when that is 0).
struct SortArgs {
  const void* in = nullptr;
  Elem type = Elem::kF32;
  void* values = nullptr;
  int64_t* indices = nullptr;
  int64_t outer = 0, len = 0, inner = 1, k = 0;
  bool descending = false;
};
size_t sort_scratch_bytes(int64_t lanes, int64_t len);
cudaError_t launch_sort(const SortArgs& args, void* scratch, cudaStream_t stream);

// softmax over the middle dim of [outer, len, inner], contiguous; float compute.
cudaError_t launch_softmax(const void* in, void* out, Elem type, int64_t outer, int64_t len,
                           int64_t inner, bool log, cudaStream_t stream);

// layer norm of `rows` rows of `cols`; weight/bias may be null; mean/rstd get one value per row.
cudaError_t launch_layer_norm(const void* x, const void* weight, const void* bias, void* y,
                              void* mean, void* rstd, Elem type, int64_t rows, int64_t cols,
                              double eps, cudaStream_t stream);

// cumsum along the middle dim of [outer, len, inner] (contiguous), one thread a lane, in
// order: int64 (wrapping) for `integer`, else double, each running sum stored in out_type.
cudaError_t launch_cumsum(const void* in, Elem in_type, void* out, Elem out_type, int64_t outer,
                          int64_t len, int64_t inner, bool integer, cudaStream_t stream);

// y = y * weight[c] + bias[c] in place on [n, c, inner] (group norm's affine step); weight
// or bias may be null (1 and 0); all of `type`.
cudaError_t launch_channel_affine(void* y, const void* weight, const void* bias, Elem type,
                                  int64_t n, int64_t c, int64_t inner, cudaStream_t stream);

// y = x * scale[c] + shift[c] with scale = w / sqrt(var + eps), shift = b - mean * scale, on
// [n, c, inner]; weight/bias may be null (1 and 0). Parameters have `param_type`.
cudaError_t launch_batch_norm(const void* x, const void* weight, const void* bias, const void* mean,
                              const void* var, Elem param_type, void* y, Elem type, int64_t n,
                              int64_t c, int64_t inner, double eps, cudaStream_t stream);

struct PoolArgs {
  const void* in = nullptr;
  void* out = nullptr;
  Elem type = Elem::kF32;
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel[2] = {}, stride[2] = {}, pad[2] = {}, dil[2] = {1, 1};
  bool count_include_pad = true;
  int64_t divisor = 0;  // divisor_override, 0 = none
};
cudaError_t launch_max_pool2d(const PoolArgs& args, cudaStream_t stream);
cudaError_t launch_avg_pool2d(const PoolArgs& args, cudaStream_t stream);
// out_h/out_w are the output_size; kernel/stride/pad are unused.
cudaError_t launch_adaptive_avg_pool2d(const PoolArgs& args, cudaStream_t stream);

// upsample_nearest2d / upsample_bilinear2d with the CPU kernels' source coordinates: nearest
// floor(o / scale) (or floor(o * in / out) without a scale); bilinear half-pixel (or
// align_corners) with the lower index clamped at 0. scale_* = 0: by output size.
struct UpsampleArgs {
  const void* in = nullptr;
  void* out = nullptr;
  Elem type = Elem::kF32;
  int64_t planes = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  double scale_h = 0, scale_w = 0;
  bool bilinear = false, align_corners = false;
};
cudaError_t launch_upsample2d(const UpsampleArgs& args, cudaStream_t stream);

// etc::unpack_int4: `rows` rows of `size` signed 4-bit values, two a byte (graph/int4.h),
// into int8.
cudaError_t launch_unpack_int4(const uint8_t* packed, int64_t rows, int64_t size, int8_t* out,
                               cudaStream_t stream);

// etc::weight_only_linear (graph/weight_only.h): input [m, k] and out [m, n] of `type`, the
// weight int8 [n, k] or (int4) 4-bit rows of k values, scale and zero point (null: none)
// [n, k / group_size] and bias (null: none) [n] of `type` (the zero point: of zero_type, `type`
// or int8).
struct WeightOnlyArgs {
  const void* input = nullptr;
  const void* weight = nullptr;
  const void* scale = nullptr;
  const void* zero = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  Elem type = Elem::kF32, zero_type = Elem::kF32;
  int64_t m = 0, n = 0, k = 0, group_size = 1;
  bool int4 = false;
};
// The most rows launch_weight_only_gemv takes (a decode step's, a short prompt's); the op
// runs more as the dequantized weight, a slice at a time, and cuBLAS products.
constexpr int64_t kWeightOnlyGemvRows = 8;
// out = input @ w^T + bias, w dequantized from the packed weight as it is read, the sums in
// float32 and rounded once: one warp per output column.
cudaError_t launch_weight_only_gemv(const WeightOnlyArgs& args, cudaStream_t stream);
// w [n, k] (`type`) = the dequantized weight, each value the chain's.
cudaError_t launch_weight_only_dequantize(const WeightOnlyArgs& args, void* w, cudaStream_t stream);

// aten::_int_mm: out [m, n] (int32) = a [m, k] (uint8, or int8 with a_signed) @ b [k, n]
// (int8), the sums exact (wrapping as ATen's int32 sums).
cudaError_t launch_int_mm(const void* a, bool a_signed, const int8_t* b, int32_t* out, int64_t m,
                          int64_t k, int64_t n, cudaStream_t stream);

// out[i, :] = weight[indices[i], :]; rows outside [0, rows) give zeros and set *bad_index
// (device memory, may be null) to 1.
cudaError_t launch_embedding(const void* weight, int64_t rows, int64_t row_bytes,
                             const void* indices, bool indices_int64, int64_t n, void* out,
                             int32_t* bad_index, cudaStream_t stream);

// Advanced indexing, `self[indices]` as the CPU kernels walk it (src/runtime/kernels/
// index.cpp): the result is head dims then a trailing block of `block` elements contiguous in
// self. A head dim is either a sliced dim of self (its self stride) or a dim of the index
// tensors' broadcast shape B. Every index is read once per element; one out of
// [-size, size) skips the element (zero in a gather) and sets *bad_index (device memory,
// may be null) to 1.
struct IndexArgs {
  Shape result;  // the shape of self[indices] (head dims, then the block's dims)
  int32_t head_rank = 0;
  int64_t block = 1;
  int64_t head_self_stride[kMaxRank] = {};  // per head dim (sliced dims)
  int32_t head_b_dim[kMaxRank] = {};        // per head dim: its dim in B, or -1
  int32_t b_rank = 0;
  int32_t n_indexed = 0;
  const void* index[kMaxRank] = {};  // per indexed dim: the index tensor (contiguous)
  bool index_i64[kMaxRank] = {};
  int64_t index_self_stride[kMaxRank] = {};
  int64_t index_self_size[kMaxRank] = {};
  int64_t index_b_strides[kMaxRank][kMaxRank] = {};  // per indexed dim, its strides over B
  int32_t elem_bytes = 4;
  int32_t* bad_index = nullptr;
};
// out (contiguous, args.result) = self[indices].
cudaError_t launch_index_gather(const IndexArgs& args, const void* self, void* out,
                                cudaStream_t stream);
// out[indices] = values (broadcast to args.result through value_strides; out already holds
// self). Elements written twice by repeated indices get one of the values, as in ATen.
cudaError_t launch_index_scatter(const IndexArgs& args, const void* values,
                                 const int64_t* value_strides, void* out, cudaStream_t stream);

struct ConvArgs {
  int64_t batch = 0, c_in = 0, h = 0, w = 0;
  int64_t c_out = 0, kh = 0, kw = 0, oh = 0, ow = 0, groups = 1;
  int64_t stride[2] = {1, 1}, pad[2] = {}, dil[2] = {1, 1};
};
// Direct convolution, one thread per output element, float accumulation; any dtype, any
// groups. bias may be null.
cudaError_t launch_conv2d_direct(const ConvArgs& g, const void* x, const void* weight,
                                 const void* bias, void* y, Elem type, cudaStream_t stream);
// col[(c*KH + i)*KW + j, oh*OW + ow] for channels [c0, c0 + channels) of image `image`
// (float32 only).
cudaError_t launch_im2col(const ConvArgs& g, const float* x, int64_t image, int64_t c0,
                          int64_t channels, float* col, cudaStream_t stream);

// C[b] = beta * bias[b] + alpha * A[b] @ B[b] for float16/bfloat16/float32 stored matrices,
// float accumulation, one rounding at the end. A is m x k with row/column strides (a_rs,
// a_cs), B is k x n likewise, bias (may be null) is read with strides (bias_rs, bias_cs) and
// bias_batch (0 where broadcast); C is contiguous m x n.
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  Elem type = Elem::kF32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_batch = 0, a_rs = 0, a_cs = 0;
  int64_t b_batch = 0, b_rs = 0, b_cs = 0;
  const void* bias = nullptr;
  int64_t bias_batch = 0, bias_rs = 0, bias_cs = 0;
  float alpha = 1, beta = 1;
  // The first row and batch of this launch (launch_gemm tiles large problems).
  int64_t row0 = 0, batch0 = 0;
};
// Any m and batch: a grid's y and z dims hold at most 65,535 blocks, so the rows (16 per
// block) and batches are covered by as many launches as needed (gemm_launches).
cudaError_t launch_gemm(const GemmArgs& args, cudaStream_t stream);

// The tile size of the fallback GEMM, and the launches covering an [batch, m] problem:
// each (row0, rows, batch0, batches) a grid of ceil(rows / kGemmTile) x batches blocks in
// y and z, both within the 65,535 limit.
inline constexpr int64_t kGemmTile = 16;
inline constexpr int64_t kMaxGridYZ = 65535;
struct GemmLaunch {
  int64_t row0, rows, batch0, batches;
};
inline std::vector<GemmLaunch> gemm_launches(int64_t m, int64_t batch) {
  std::vector<GemmLaunch> out;
  const int64_t rows_per = kMaxGridYZ * kGemmTile;
  for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridYZ) {
    for (int64_t r0 = 0; r0 < m; r0 += rows_per) {
      out.push_back(GemmLaunch{r0, m - r0 < rows_per ? m - r0 : rows_per, b0,
                               batch - b0 < kMaxGridYZ ? batch - b0 : kMaxGridYZ});
    }
  }
  return out;
}

}  // namespace etc::cuda::kernels
