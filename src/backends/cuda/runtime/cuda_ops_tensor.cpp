// CUDA op wrappers beyond elementwise maps: GEMMs (cuBLAS for float32, the tiled kernel for
// float16/bfloat16), convolution (im2col + cuBLAS for float32, a direct kernel for depthwise
// and 16-bit floats), pooling, reductions, softmax, layer/batch norm, layout ops and
// conversion (indexing and creation ops: cuda_ops_index.cpp).
// Argument checks follow the CPU reference kernels (src/runtime/kernels).
#include <algorithm>
#include <array>
#include <cmath>

#include "backends/cuda/runtime/cuda_op_util.h"
#include "graph/int4.h"

namespace etc::cuda {
namespace {

using namespace ops;  // NOLINT: the helpers of cuda_op_util.h
using rt::kernels::opt_dtype_arg;
using rt::kernels::opt_int_arg;
using rt::kernels::reduced_dims;
using rt::kernels::reduced_shape;
using rt::kernels::wrap_dim;

Status require_float(const KernelContext& ctx, const char* what, DType t) {
  if (is_float(t)) return Status();
  return unsupported_dtype(ctx, what, t, "float32, float16 or bfloat16");
}

// out (contiguous) = self read at `offset` with `strides` over out's shape.
Status copy_view(const KernelContext& ctx, const TensorView& self, int64_t offset,
                 std::span<const int64_t> strides, TensorView& out) {
  MapBuilder m(ctx, k::MapOp::kCopy, out);
  m.p.a = operand(ctx, self, strides, offset, &m.error);
  return m.run();
}

// ---- GEMM --------------------------------------------------------------------------------

// out[b] = beta * bias + alpha * A[b] @ op(B[b]); A is m x k contiguous; B is k x n
// contiguous, or (b_transposed) n x k contiguous read transposed (linear's weight).
struct Gemm {
  const TensorView* a;
  const TensorView* b;
  const TensorView* bias = nullptr;  // broadcast to out
  TensorView* out;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool b_transposed = false;
  double alpha = 1, beta = 1;
};

// float16/bfloat16 on cuBLAS: float accumulation (CUBLAS_COMPUTE_32F), one rounding of
// alpha * A @ B + beta * bias at the end, as the CPU kernels compute it. The bias is first
// copied into out (exactly: same dtype) and read back by the GEMM with beta.
Status run_gemm_ex(const KernelContext& ctx, const Gemm& g, DeviceContext* dev,
                   const CublasApi* api) {
  TensorView& out = *g.out;
  const bool use_bias = g.bias != nullptr && g.beta != 0;
  float beta = 0;
  if (use_bias) {
    MapBuilder m(ctx, k::MapOp::kCopy, out);
    m.p.a = m.broadcast(*g.bias);
    ETC_RETURN_IF_ERROR(m.run());
    beta = static_cast<float>(g.beta);
  }
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX || g.batch > INT32_MAX)
    return unsupported(std::string(ctx.op) + ": GEMM [" + std::to_string(g.batch) + ", " +
                       std::to_string(g.m) + ", " + std::to_string(g.n) + ", " +
                       std::to_string(g.k) +
                       "] (batch, m, n, k) has a size above 2^31 - 1, which cuBLAS cannot take");
  if (g.k == 0) {
    if (!use_bias) {
      ETC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(out.data, 0, static_cast<size_t>(out.nbytes()), dev->stream()));
    } else if (beta != 1) {
      MapBuilder m(ctx, k::MapOp::kMul, out);  // out = bias * beta (no product to add)
      m.p.a = m.broadcast(*g.bias);
      m.p.b_is_scalar = true;
      m.p.scalar.d = g.beta;
      ETC_RETURN_IF_ERROR(m.run());
    }
    return Status();
  }
  ETC_ASSIGN_OR_RETURN(cublasHandle_t handle, dev->cublas());
  const cudaDataType type = out.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = static_cast<float>(g.alpha);
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), kk = static_cast<int>(g.k);
  const cublasOperation_t op_b = g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = g.b_transposed ? kk : n;
  if (g.batch == 1) {
    ETC_CUBLAS_RETURN_IF_ERROR(api->gemm_ex(handle, op_b, CUBLAS_OP_N, n, m, kk, &alpha, g.b->data,
                                            type, ldb, g.a->data, type, kk, &beta, out.data, type,
                                            n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    ETC_CUBLAS_RETURN_IF_ERROR(api->gemm_strided_batched_ex(
        handle, op_b, CUBLAS_OP_N, n, m, kk, &alpha, g.b->data, type, ldb, g.k * g.n, g.a->data,
        type, kk, g.m * g.k, &beta, out.data, type, n, g.m * g.n, static_cast<int>(g.batch),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return Status();
}

Status run_gemm(const KernelContext& ctx, const Gemm& g) {
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  TensorView& out = *g.out;
  if (out.numel() == 0) return Status();
  const bool use_bias = g.bias != nullptr && g.beta != 0;
  if (out.dtype == DType::kFloat16 || out.dtype == DType::kBFloat16) {
    Result<const CublasApi*> api = cublas_api();
    if (api.ok() && (*api)->gemm_ex != nullptr && (*api)->gemm_strided_batched_ex != nullptr)
      return run_gemm_ex(ctx, g, dev, *api);
  }
  if (out.dtype != DType::kFloat32) {
    ETC_RETURN_IF_ERROR(require_float(ctx, "out", out.dtype));
    k::GemmArgs p;
    p.a = g.a->data;
    p.b = g.b->data;
    p.c = out.data;
    ETC_ASSIGN_OR_RETURN(p.type, elem_of(ctx, out.dtype, "out"));
    p.batch = g.batch;
    p.m = g.m;
    p.n = g.n;
    p.k = g.k;
    p.a_batch = g.m * g.k;
    p.a_rs = g.k;
    p.a_cs = 1;
    p.b_batch = g.k * g.n;
    p.b_rs = g.b_transposed ? 1 : g.n;
    p.b_cs = g.b_transposed ? g.k : 1;
    p.alpha = static_cast<float>(g.alpha);
    p.beta = static_cast<float>(g.beta);
    if (use_bias) {
      // The bias as a [batch, m, n] operand: its broadcast strides over out, folded.
      std::vector<int64_t> st = broadcast_strides(g.bias->sizes, out.sizes);
      const size_t r = out.rank();
      p.bias = g.bias->data;
      p.bias_cs = r >= 1 ? st[r - 1] : 0;
      bool leading_zero = true;
      for (size_t d = 0; d + 1 < r; ++d)
        leading_zero &= st[d] == 0;
      if (leading_zero) {
        p.bias_rs = 0;
      } else if (g.bias->sizes == out.sizes && g.batch == 1) {
        p.bias_rs = g.n;
      } else if (r == 3 && g.batch > 1) {
        p.bias_batch = st[0];
        p.bias_rs = st[1];
      } else {
        return unsupported(std::string(ctx.op) + ": a bias of shape " + shape_str(g.bias->sizes) +
                           " over out " + shape_str(out.sizes) +
                           " is not supported for 16-bit floats on CUDA");
      }
    }
    ETC_CUDA_RETURN_IF_ERROR(k::launch_gemm(p, dev->stream()));
    return Status();
  }
  // float32: cuBLAS. Row-major C = A @ B is column-major C^T = B^T @ A^T, so B comes first.
  float beta = 0;
  if (use_bias) {
    MapBuilder m(ctx, k::MapOp::kMul, out);  // out = bias * beta, then out += A @ B
    m.p.a = m.broadcast(*g.bias);
    m.p.b_is_scalar = true;
    m.p.scalar.d = g.beta;
    ETC_RETURN_IF_ERROR(m.run());
    beta = 1;
  }
  ETC_ASSIGN_OR_RETURN(cublasHandle_t handle, dev->cublas());
  ETC_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  const float alpha = static_cast<float>(g.alpha);
  const auto* a = static_cast<const float*>(g.a->data);
  const auto* b = static_cast<const float*>(g.b->data);
  auto* c = static_cast<float*>(out.data);
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), kk = static_cast<int>(g.k);
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX || g.batch > INT32_MAX)
    return unsupported(std::string(ctx.op) + ": GEMM [" + std::to_string(g.batch) + ", " +
                       std::to_string(g.m) + ", " + std::to_string(g.n) + ", " +
                       std::to_string(g.k) +
                       "] (batch, m, n, k) has a size above 2^31 - 1, which cuBLAS cannot take");
  const cublasOperation_t op_b = g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = g.b_transposed ? kk : n;
  if (g.k == 0) {
    if (!use_bias) {
      ETC_CUDA_RETURN_IF_ERROR(
          cudaMemsetAsync(c, 0, static_cast<size_t>(out.nbytes()), dev->stream()));
    }
    return Status();
  }
  if (g.batch == 1) {
    ETC_CUBLAS_RETURN_IF_ERROR(
        api->sgemm(handle, op_b, CUBLAS_OP_N, n, m, kk, &alpha, b, ldb, a, kk, &beta, c, n));
  } else {
    ETC_CUBLAS_RETURN_IF_ERROR(api->sgemm_strided_batched(
        handle, op_b, CUBLAS_OP_N, n, m, kk, &alpha, b, ldb, g.k * g.n, a, kk, g.m * g.k, &beta, c,
        n, g.m * g.n, static_cast<int>(g.batch)));
  }
  return Status();
}

Status mm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::MatmulShape s, rt::kernels::check_mm(ctx, args));
  return run_gemm(ctx, Gemm{&tensor_arg(args, 0), &tensor_arg(args, 1), nullptr, &out_arg(args, 2),
                            1, s.m, s.n, s.k});
}

Status bmm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::MatmulShape s, rt::kernels::check_bmm(ctx, args));
  return run_gemm(ctx, Gemm{&tensor_arg(args, 0), &tensor_arg(args, 1), nullptr, &out_arg(args, 2),
                            s.batch, s.m, s.n, s.k});
}

Status addmm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::MatmulShape s, rt::kernels::check_addmm(ctx, args));
  Gemm g{&tensor_arg(args, 1),
         &tensor_arg(args, 2),
         &tensor_arg(args, 0),
         &out_arg(args, 5),
         1,
         s.m,
         s.n,
         s.k};
  g.beta = args[3]->scalar_as_double();
  g.alpha = args[4]->scalar_as_double();
  return run_gemm(ctx, g);
}

Status linear(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const rt::kernels::MatmulShape s, rt::kernels::check_linear(ctx, args));
  if (out.numel() == 0) return Status();
  Gemm g{&x, &w, bias, &out, 1, s.m, s.n, s.k};
  g.b_transposed = true;
  return run_gemm(ctx, g);
}

// The most scratch memory a weight-only product's dequantized slice takes: a language
// model's output projection (128256 x 4096 in bf16: 1 GiB) goes in slices of this size,
// not whole.
constexpr int64_t kWeightOnlySliceBytes = int64_t{64} << 20;

// out [m, n] = input @ w^T + bias on cuBLAS, w dequantized a slice of output features at a
// time into scratch memory (kWeightOnlySliceBytes at most), each slice multiplied into its
// columns of out (float32 accumulation, each element rounded once, as run_gemm).
Status weight_only_by_slices(const KernelContext& ctx, DeviceContext* dev,
                             const k::WeightOnlyArgs& p, const TensorView* bias, TensorView& out) {
  if (p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX)
    return unsupported(std::string(ctx.op) + ": a product of [" + std::to_string(p.m) + ", " +
                       std::to_string(p.k) + "] by [" + std::to_string(p.n) + ", " +
                       std::to_string(p.k) +
                       "] has a size above 2^31 - 1, which cuBLAS cannot take");
  ETC_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  const bool f32 = out.dtype == DType::kFloat32;
  if (!f32 && api->gemm_ex == nullptr)
    return unsupported(std::string(ctx.op) + ": the loaded cuBLAS lacks cublasGemmEx");
  ETC_ASSIGN_OR_RETURN(cublasHandle_t handle, dev->cublas());
  float beta = 0;
  if (bias != nullptr) {  // out = bias, then each slice's product added
    MapBuilder m(ctx, k::MapOp::kCopy, out);
    m.p.a = m.broadcast(*bias);
    ETC_RETURN_IF_ERROR(m.run());
    beta = 1;
  } else if (p.k == 0) {
    ETC_CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(out.data, 0, static_cast<size_t>(out.nbytes()), dev->stream()));
  }
  if (p.k == 0) return Status();
  const int64_t elem = dtype_size(out.dtype);
  const int64_t rows = std::clamp<int64_t>(kWeightOnlySliceBytes / (p.k * elem), 1, p.n);
  ETC_ASSIGN_OR_RETURN(void* w, dev->scratch(static_cast<size_t>(rows * p.k * elem)));
  const int64_t row_bytes = p.int4 ? int4::row_bytes(p.k) : p.k;
  const int64_t groups = p.k / p.group_size;
  const int64_t zero_elem = p.zero_type == k::Elem::kI8 ? 1 : elem;
  const cudaDataType type = out.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  const float alpha = 1;
  const int m = static_cast<int>(p.m), kk = static_cast<int>(p.k), ldc = static_cast<int>(p.n);
  for (int64_t n0 = 0; n0 < p.n; n0 += rows) {
    k::WeightOnlyArgs slice = p;
    slice.n = std::min(rows, p.n - n0);
    slice.weight = static_cast<const uint8_t*>(p.weight) + n0 * row_bytes;
    slice.scale = static_cast<const uint8_t*>(p.scale) + n0 * groups * elem;
    if (p.zero != nullptr)
      slice.zero = static_cast<const uint8_t*>(p.zero) + n0 * groups * zero_elem;
    ETC_CUDA_RETURN_IF_ERROR(k::launch_weight_only_dequantize(slice, w, dev->stream()));
    // Row-major out[:, n0 : n0 + ns] is the column-major block of out^T at row n0:
    // w_slice (column-major [k, ns], transposed) times input^T ([k, m]).
    const int ns = static_cast<int>(slice.n);
    void* c = static_cast<uint8_t*>(out.data) + n0 * elem;
    if (f32) {
      ETC_CUBLAS_RETURN_IF_ERROR(api->sgemm(
          handle, CUBLAS_OP_T, CUBLAS_OP_N, ns, m, kk, &alpha, static_cast<const float*>(w), kk,
          static_cast<const float*>(p.input), kk, &beta, static_cast<float*>(c), ldc));
    } else {
      ETC_CUBLAS_RETURN_IF_ERROR(api->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, ns, m, kk, &alpha,
                                              w, type, kk, p.input, type, kk, &beta, c, type, ldc,
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }
  return Status();
}

// etc::weight_only_linear (graph/weight_only.h). Up to kWeightOnlyGemvRows rows (a decode
// step, a short prompt) run on the kernel that reads the packed weight as it multiplies:
// the weight crosses memory once, at its packed size. More rows dequantize the weight, a
// slice at a time, into scratch memory and multiply on cuBLAS (weight_only_by_slices): there
// the weight is read once for all the rows, and the product's arithmetic, not the weight's
// bytes, sets the time.
Status weight_only_linear(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::WeightOnlyShape s,
                       rt::kernels::check_weight_only_linear(ctx, args));
  const rt::kernels::Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* zero = a.opt_tensor("zero_point");
  const TensorView* bias = a.opt_tensor("bias");
  TensorView& out = a.out();
  if (out.numel() == 0) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  k::WeightOnlyArgs p;
  p.input = x.data;
  p.weight = a.tensor("weight").data;
  p.scale = a.tensor("scale").data;
  p.zero = zero != nullptr ? zero->data : nullptr;
  p.bias = bias != nullptr ? bias->data : nullptr;
  p.out = out.data;
  ETC_ASSIGN_OR_RETURN(p.type, elem_of(ctx, x.dtype, "input"));
  if (zero != nullptr) {
    ETC_ASSIGN_OR_RETURN(p.zero_type, elem_of(ctx, zero->dtype, "zero_point"));
  }
  p.m = s.m;
  p.n = s.g.n;
  p.k = s.g.k;
  p.group_size = s.g.group_size;
  p.int4 = s.g.int4;
  if (s.m <= k::kWeightOnlyGemvRows) {
    ETC_CUDA_RETURN_IF_ERROR(k::launch_weight_only_gemv(p, dev->stream()));
    return Status();
  }
  return weight_only_by_slices(ctx, dev, p, bias, out);
}

// aten::_int_mm: uint8 or int8 [m, k] by int8 [k, n], exact int32 sums (check_int_mm, as the
// CPU kernel).
Status int_mm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::MatmulShape s, rt::kernels::check_int_mm(ctx, args));
  const rt::kernels::Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  if (out.numel() == 0) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_int_mm(self.data, self.dtype == DType::kInt8,
                                            a.tensor("mat2").data_as<const int8_t>(),
                                            out.data_as<int32_t>(), s.m, s.k, s.n, dev->stream()));
  return Status();
}

// ---- Convolution ---------------------------------------------------------------------------

Status convolution(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  TensorView& out = out_arg(args, 9);
  // What the CUDA kernels lack (2-d, not transposed, 16- and 32-bit floats) first; then the
  // CPU kernel's checks of the call itself.
  if (args[6]->b) return unsupported(std::string(ctx.op) + ": transposed convolution on CUDA");
  if (x.rank() != 4 || w.rank() != 4) return ctx.error("only 2-d convolution is supported");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x.dtype));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::ConvGeometry geo,
                       rt::kernels::check_convolution(ctx, args));
  const int64_t groups = geo.groups;
  k::ConvArgs g;
  g.batch = geo.batch;
  g.c_in = geo.c_in;
  g.h = geo.h;
  g.w = geo.w;
  g.c_out = geo.c_out;
  g.kh = geo.kh;
  g.kw = geo.kw;
  g.groups = groups;
  for (int i = 0; i < 2; ++i) {
    g.stride[i] = geo.stride[i];
    g.pad[i] = geo.pad[i];
    g.dil[i] = geo.dil[i];
  }
  g.oh = geo.oh;
  g.ow = geo.ow;
  if (out.numel() == 0) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, x.dtype, "input"));
  const int64_t cin_g = g.c_in / groups, cout_g = g.c_out / groups;
  const bool depthwise = cin_g == 1 && groups > 1;
  // cuBLAS takes int dimensions: an output plane, im2col column or group's channel count
  // above 2^31 - 1 goes to the direct kernel (int64 indexing), never a truncated GEMM.
  const int64_t kdim = cin_g * g.kh * g.kw, plane = g.oh * g.ow;
  const bool gemm_fits = plane <= INT32_MAX && kdim <= INT32_MAX && cout_g <= INT32_MAX;
  if (x.dtype != DType::kFloat32 || depthwise || !gemm_fits) {
    ETC_CUDA_RETURN_IF_ERROR(k::launch_conv2d_direct(g, x.data, w.data, bias ? bias->data : nullptr,
                                                     out.data, type, dev->stream()));
    return Status();
  }
  // im2col + cuBLAS per (image, group): out_g[Cout_g, P] = W_g[Cout_g, K] @ col[K, P].
  float beta = 0;
  if (bias != nullptr) {
    MapBuilder m(ctx, k::MapOp::kCopy, out);
    const std::vector<int64_t> st{0, 1, 0, 0};
    m.p.a = operand(ctx, *bias, st, 0, &m.error);
    ETC_RETURN_IF_ERROR(m.run());
    beta = 1;
  }
  const bool pointwise = g.kh == 1 && g.kw == 1 && g.stride[0] == 1 && g.stride[1] == 1 &&
                         g.pad[0] == 0 && g.pad[1] == 0;
  float* col = nullptr;
  if (!pointwise) {
    ETC_ASSIGN_OR_RETURN(void* s, dev->scratch(static_cast<size_t>(kdim * plane) * sizeof(float)));
    col = static_cast<float*>(s);
  }
  ETC_ASSIGN_OR_RETURN(cublasHandle_t handle, dev->cublas());
  ETC_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  const float alpha = 1;
  const auto* xp = static_cast<const float*>(x.data);
  const auto* wp = static_cast<const float*>(w.data);
  auto* yp = static_cast<float*>(out.data);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* bmat = xp + (n * g.c_in + gi * cin_g) * plane;
      if (!pointwise) {
        ETC_CUDA_RETURN_IF_ERROR(k::launch_im2col(g, xp, n, gi * cin_g, cin_g, col, dev->stream()));
        bmat = col;
      }
      ETC_CUBLAS_RETURN_IF_ERROR(
          api->sgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(plane),
                     static_cast<int>(cout_g), static_cast<int>(kdim), &alpha, bmat,
                     static_cast<int>(plane), wp + gi * cout_g * kdim, static_cast<int>(kdim),
                     &beta, yp + (n * g.c_out + gi * cout_g) * plane, static_cast<int>(plane)));
    }
  }
  return Status();
}

// ---- Pooling -------------------------------------------------------------------------------

// The pooling window of the CPU kernel's checks, for the launch.
Result<k::PoolArgs> pool_args(const KernelContext& ctx, const TensorView& self,
                              const rt::kernels::PoolGeometry& geo) {
  k::PoolArgs p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = geo.kernel[i];
    p.stride[i] = geo.stride[i];
    p.pad[i] = geo.pad[i];
    p.dil[i] = geo.dil[i];
  }
  p.in_h = geo.in_h;
  p.in_w = geo.in_w;
  p.out_h = geo.out_h;
  p.out_w = geo.out_w;
  p.planes = geo.planes;
  p.in = self.data;
  ETC_ASSIGN_OR_RETURN(p.type, elem_of(ctx, self.dtype, "self"));
  return p;
}

Status max_pool2d(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 6);
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self.dtype));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::PoolGeometry geo,
                       rt::kernels::check_max_pool2d(ctx, args, false));
  ETC_ASSIGN_OR_RETURN(k::PoolArgs p, pool_args(ctx, self, geo));
  p.out = out.data;
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_max_pool2d(p, dev->stream()));
  return Status();
}

Status avg_pool2d(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self.dtype));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::PoolGeometry geo,
                       rt::kernels::check_avg_pool2d(ctx, args));
  const std::optional<int64_t> divisor = opt_int_arg(args, 6);
  ETC_ASSIGN_OR_RETURN(k::PoolArgs p, pool_args(ctx, self, geo));
  p.out = out.data;
  p.count_include_pad = args[5]->b;
  p.divisor = divisor.value_or(0);
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_avg_pool2d(p, dev->stream()));
  return Status();
}

Status adaptive_avg_pool2d(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self.dtype));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::PoolGeometry geo,
                       rt::kernels::check_adaptive_avg_pool2d(ctx, args));
  ETC_ASSIGN_OR_RETURN(k::PoolArgs p, pool_args(ctx, self, geo));
  p.out = out.data;
  // The CPU kernel averages an empty window to NaN; this kernel does not take one.
  if (p.in_h * p.in_w == 0) return ctx.error("self has an empty plane");
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_adaptive_avg_pool2d(p, dev->stream()));
  return Status();
}

// upsample_nearest2d.vec / upsample_bilinear2d.vec: the CPU kernel's checks, then one thread
// per output element.
Status upsample2d(KernelContext& ctx, std::span<Value*> args, bool bilinear) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::UpsampleShape shape,
                       rt::kernels::check_upsample2d(ctx, args, bilinear));
  const TensorView& x = tensor_arg(args, 0);
  TensorView& out = out_arg(args, bilinear ? 4 : 3);
  if (out.numel() == 0) return Status();
  k::UpsampleArgs p;
  p.in_h = shape.in[0];
  p.in_w = shape.in[1];
  p.out_h = shape.out[0];
  p.out_w = shape.out[1];
  p.scale_h = shape.scale[0].value_or(0.0);
  p.scale_w = shape.scale[1].value_or(0.0);
  p.in = x.data;
  p.out = out.data;
  ETC_ASSIGN_OR_RETURN(p.type, elem_of(ctx, x.dtype, "input"));
  p.planes = x.sizes[0] * x.sizes[1];
  p.bilinear = bilinear;
  p.align_corners = shape.align_corners;
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_upsample2d(p, dev->stream()));
  return Status();
}

// ---- Reductions and normalisation ----------------------------------------------------------

// The kernels' description of reducing contiguous `self` over its `reduced` dims into `out`.
Result<k::ReduceArgs> reduce_args(const KernelContext& ctx, const TensorView& self,
                                  const std::vector<bool>& reduced, TensorView& out) {
  ETC_RETURN_IF_ERROR(check_rank(ctx, self));
  k::ReduceArgs p;
  p.in = self.data;
  p.out = out.data;
  ETC_ASSIGN_OR_RETURN(p.in_type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(p.out_type, elem_of(ctx, out.dtype, "out"));
  const std::vector<int64_t> st = rt::contiguous_strides(self.sizes);
  for (size_t d = 0; d < self.rank(); ++d) {
    k::Shape& s = reduced[d] ? p.reduced : p.kept;
    int64_t* strides = reduced[d] ? p.reduced_strides : p.kept_strides;
    s.sizes[s.rank] = self.sizes[d];
    strides[s.rank] = st[d];
    ++s.rank;
  }
  return p;
}

Status run_reduce(const KernelContext& ctx, k::ReduceOp op, const TensorView& self,
                  const std::vector<bool>& reduced, TensorView& out, bool integer) {
  ETC_ASSIGN_OR_RETURN(k::ReduceArgs p, reduce_args(ctx, self, reduced, out));
  p.op = op;
  p.integer = integer;
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  // A split reduction's partials (k::launch_reduce) live in the device's scratch memory.
  void* partials = nullptr;
  if (const size_t bytes = k::reduce_scratch_bytes(p); bytes > 0) {
    ETC_ASSIGN_OR_RETURN(partials, dev->scratch(bytes));
  }
  ETC_CUDA_RETURN_IF_ERROR(k::launch_reduce(p, partials, dev->stream()));
  return Status();
}

template <bool kMax>
Status amax(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                       reduced_dims(ctx, &args[1]->ints, static_cast<int64_t>(self.rank())));
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), self.dtype));
  if (out.numel() == 0) return Status();
  if (self.numel() == 0)
    return ctx.error(kMax ? "amax of an empty tensor" : "amin of an empty tensor");
  return run_reduce(ctx, kMax ? k::ReduceOp::kAmax : k::ReduceOp::kAmin, self, reduced, out,
                    !is_float(self.dtype));
}

// prod.dim_int: as the CPU kernel, in double for floats and int64 for integers.
Status prod(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced, rt::kernels::check_prod(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = rt::kernels::Args(ctx, args).out();
  if (out.numel() == 0) return Status();
  return run_reduce(ctx, k::ReduceOp::kProd, self, reduced, out, !dtype_is_float(out.dtype));
}

Status any_dim(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  std::vector<int64_t> dims{args[1]->i};
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                       reduced_dims(ctx, &dims, static_cast<int64_t>(self.rank())));
  const DType out_dtype = self.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool;
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), out_dtype));
  if (out.numel() == 0) return Status();
  return run_reduce(ctx, k::ReduceOp::kAny, self, reduced, out, !is_float(self.dtype));
}

// var.correction: one block per output, the mean and then the squared deviations in double,
// as the CPU kernel's two passes (check_var).
Status var(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::VarReduction v, rt::kernels::check_var(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = rt::kernels::Args(ctx, args).out();
  if (out.numel() == 0) return Status();
  ETC_ASSIGN_OR_RETURN(k::ReduceArgs p, reduce_args(ctx, self, v.reduced, out));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_var(p, v.correction, dev->stream()));
  return Status();
}

Status sum_mean(KernelContext& ctx, std::span<Value*> args, bool mean) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 4);
  ETC_ASSIGN_OR_RETURN(
      std::vector<bool> reduced,
      reduced_dims(ctx, rt::kernels::opt_int_list_arg(args, 1), static_cast<int64_t>(self.rank())));
  std::optional<DType> dtype = opt_dtype_arg(args, 3);
  DType want = dtype.value_or(mean || dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  if (mean && !dtype_is_float(want)) return ctx.error("mean needs a floating-point dtype");
  ETC_RETURN_IF_ERROR(check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), want));
  if (out.numel() == 0) return Status();
  return run_reduce(ctx, mean ? k::ReduceOp::kMean : k::ReduceOp::kSum, self, reduced, out,
                    !dtype_is_float(want));
}
Status sum_dim(KernelContext& ctx, std::span<Value*> args) {
  return sum_mean(ctx, args, false);
}
Status mean_dim(KernelContext& ctx, std::span<Value*> args) {
  return sum_mean(ctx, args, true);
}

Status softmax_common(KernelContext& ctx, std::span<Value*> args, bool log) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self.dtype));
  if (args[2]->b) return unsupported(std::string(ctx.op) + ": half_to_float=True on CUDA");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(self.rank())));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  if (out.numel() == 0) return Status();
  int64_t outer = 1, inner = 1;
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  for (int64_t d = 0; d < dim; ++d)
    outer *= self.sizes[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < self.rank(); ++d)
    inner *= self.sizes[d];
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(
      k::launch_softmax(self.data, out.data, type, outer, len, inner, log, dev->stream()));
  return Status();
}
Status softmax(KernelContext& ctx, std::span<Value*> args) {
  return softmax_common(ctx, args, false);
}
Status log_softmax(KernelContext& ctx, std::span<Value*> args) {
  return softmax_common(ctx, args, true);
}

Status layer_norm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView* weight = opt_tensor_arg(args, 2);
  const TensorView* bias = opt_tensor_arg(args, 3);
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x.dtype));
  ETC_ASSIGN_OR_RETURN(const rt::kernels::LayerNormDims dims,
                       rt::kernels::check_layer_norm(ctx, args));
  const int64_t rows = dims.rows, cols = dims.cols;
  // The CUDA kernel reads weight and bias in the input's dtype.
  for (const TensorView* t : {weight, bias}) {
    if (t != nullptr && t->dtype != x.dtype)
      return ctx.error("weight and bias must have the input's dtype");
  }
  TensorView& out = out_arg(args, 5);
  TensorView& mean = out_arg(args, 6);
  TensorView& rstd = out_arg(args, 7);
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, x.dtype, "input"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_layer_norm(
      x.data, weight ? weight->data : nullptr, bias ? bias->data : nullptr, out.data, mean.data,
      rstd.data, type, rows, cols, rt::kernels::float_arg(args, 4), dev->stream()));
  return Status();
}

// cumsum: one thread a lane, in order, as the CPU kernel (double for floats, int64 else).
Status cumsum(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(int64_t dim, rt::kernels::check_cumsum(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = rt::kernels::Args(ctx, args).out();
  if (out.numel() == 0) return Status();
  int64_t outer = 1, len = 1, inner = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(self.rank()); ++d) {
    const int64_t s = self.sizes[static_cast<size_t>(d)];
    (d < dim ? outer : d == dim ? len : inner) *= s;
  }
  ETC_ASSIGN_OR_RETURN(k::Elem in_type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(k::Elem out_type, elem_of(ctx, out.dtype, "out"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_cumsum(self.data, in_type, out.data, out_type, outer, len,
                                            inner, !dtype_is_float(out.dtype), dev->stream()));
  return Status();
}

// native_group_norm: layer norm over each (sample, group) row of C / group * HxW elements
// (no affine), then the per-channel weight and bias.
Status group_norm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(rt::kernels::check_group_norm(ctx, args));
  const rt::kernels::Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* weight = a.opt_tensor("weight");
  const TensorView* bias = a.opt_tensor("bias");
  for (const TensorView* t : {weight, bias}) {
    if (t != nullptr && t->dtype != x.dtype) {
      return ctx.error("weight and bias must have the input's dtype");
    }
  }
  const int64_t n = a.integer("N"), c = a.integer("C"), hw = a.integer("HxW");
  const int64_t group = a.integer("group");
  TensorView& out = a.out(0);
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, x.dtype, "input"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_layer_norm(x.data, nullptr, nullptr, out.data, a.out(1).data,
                                                a.out(2).data, type, n * group, c / group * hw,
                                                a.real("eps"), dev->stream()));
  if (weight != nullptr || bias != nullptr) {
    ETC_CUDA_RETURN_IF_ERROR(k::launch_channel_affine(out.data, weight ? weight->data : nullptr,
                                                      bias ? bias->data : nullptr, type, n, c, hw,
                                                      dev->stream()));
  }
  return Status();
}

Status batch_norm(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView* weight = opt_tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  const TensorView& rm = tensor_arg(args, 3);
  const TensorView& rv = tensor_arg(args, 4);
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x.dtype));
  if (x.rank() < 2) return ctx.error("input must have rank 2 or more");
  const int64_t c = x.sizes[1];
  for (const TensorView* t : {weight, bias, &rm, &rv}) {
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c || t->dtype != rm.dtype))
      return ctx.error("parameters must have shape [" + std::to_string(c) + "] and one dtype");
  }
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, x.sizes, x.dtype, "out0"));
  if (out.numel() == 0) return Status();
  const int64_t n = x.sizes[0], inner = x.numel() / (n * c);
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, x.dtype, "input"));
  ETC_ASSIGN_OR_RETURN(k::Elem ptype, elem_of(ctx, rm.dtype, "running_mean"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_batch_norm(
      x.data, weight ? weight->data : nullptr, bias ? bias->data : nullptr, rm.data, rv.data, ptype,
      out.data, type, n, c, inner, rt::kernels::float_arg(args, 6), dev->stream()));
  return Status();
}

// ---- Layout ----------------------------------------------------------------------------------

Status cat(KernelContext& ctx, std::span<Value*> args) {
  // Every shape is checked before anything is queued: a mismatch is an error, never a write
  // past `out` on the device.
  ETC_ASSIGN_OR_RETURN(rt::kernels::CatShape shape, rt::kernels::check_cat(ctx, args));
  const std::vector<TensorView*>& ts = args[0]->tensors;
  TensorView& out = out_arg(args, 2);
  if (shape.first == nullptr || out.numel() == 0) return Status();
  const int64_t dim = shape.dim;
  const std::vector<int64_t> out_strides = rt::contiguous_strides(out.sizes);
  int64_t at = 0;
  for (const TensorView* t : ts) {
    if (rt::kernels::cat_skips(*t)) continue;
    k::MapArgs p;
    p.op = k::MapOp::kCopy;
    p.shape = shape_of(t->sizes);
    Status error;
    p.out = operand(ctx, out, out_strides, at * out_strides[static_cast<size_t>(dim)], &error);
    p.a = operand(ctx, *t, rt::contiguous_strides(t->sizes), 0, &error);
    ETC_RETURN_IF_ERROR(error);
    ETC_RETURN_IF_ERROR(check_rank(ctx, *t));
    ETC_RETURN_IF_ERROR(run_map(ctx, p));
    at += t->sizes[static_cast<size_t>(dim)];
  }
  return Status();
}

// clone, view, reshape, squeeze, unsqueeze: the same elements in the same order, at the
// sizes the op gives for self's actual sizes (the CPU kernels' shape functions).
enum class SameElements { kClone, kView, kReshape, kSqueezeDim, kSqueezeDims, kUnsqueeze };

template <SameElements kOp>
Status same_elements(KernelContext& ctx, std::span<Value*> args) {
  std::vector<int64_t> sizes;
  if constexpr (kOp == SameElements::kClone) {
    ETC_RETURN_IF_ERROR(check_args(ctx, args));
    sizes = tensor_arg(args, 0).sizes;
  } else if constexpr (kOp == SameElements::kView || kOp == SameElements::kReshape) {
    const char* arg = kOp == SameElements::kView ? "size" : "shape";
    ETC_RETURN_IF_ERROR(check_args(ctx, args));
    ETC_ASSIGN_OR_RETURN(sizes,
                         rt::kernels::view_sizes(ctx, tensor_arg(args, 0), args[1]->ints, arg));
  } else if constexpr (kOp == SameElements::kSqueezeDims) {
    ETC_RETURN_IF_ERROR(check_args(ctx, args));
    ETC_ASSIGN_OR_RETURN(sizes,
                         rt::kernels::squeeze_dims_sizes(ctx, tensor_arg(args, 0), args[1]->ints));
  } else {
    ETC_RETURN_IF_ERROR(check_args(ctx, args));
    ETC_ASSIGN_OR_RETURN(sizes,
                         kOp == SameElements::kSqueezeDim
                             ? rt::kernels::squeeze_dim_sizes(ctx, tensor_arg(args, 0), args[1]->i)
                             : rt::kernels::unsqueeze_sizes(ctx, tensor_arg(args, 0), args[1]->i));
  }
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  return copy_d2d(ctx, self, out);
}

Status expand(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size,
                       rt::kernels::expand_sizes(ctx, self, args[1]->ints));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, size, self.dtype));
  return copy_view(ctx, self, 0, broadcast_strides(self.sizes, size), out);
}

Status permute(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const rt::kernels::StridedView v, rt::kernels::check_permute(ctx, args));
  return copy_view(ctx, self, v.offset, v.strides, out);
}

Status transpose(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  const auto rank = static_cast<int64_t>(self.rank());
  ETC_ASSIGN_OR_RETURN(int64_t d0, wrap_dim(ctx, "dim0", args[1]->i, rank));
  ETC_ASSIGN_OR_RETURN(int64_t d1, wrap_dim(ctx, "dim1", args[2]->i, rank));
  std::vector<int64_t> sizes = self.sizes;
  std::vector<int64_t> strides = rt::contiguous_strides(self.sizes);
  if (rank > 0) {
    std::swap(sizes[static_cast<size_t>(d0)], sizes[static_cast<size_t>(d1)]);
    std::swap(strides[static_cast<size_t>(d0)], strides[static_cast<size_t>(d1)]);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  return copy_view(ctx, self, 0, strides, out);
}

Status select(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const rt::kernels::StridedView v, rt::kernels::check_select(ctx, args));
  return copy_view(ctx, self, v.offset, v.strides, out);
}

Status slice(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 5);
  ETC_ASSIGN_OR_RETURN(const rt::kernels::StridedView v, rt::kernels::check_slice(ctx, args));
  return copy_view(ctx, self, v.offset, v.strides, out);
}

Status constant_pad_nd(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const rt::kernels::PadCopy c, rt::kernels::check_constant_pad_nd(ctx, args));
  if (out.numel() == 0) return Status();
  MapBuilder fill(ctx, k::MapOp::kFill, out);
  fill.p.scalar = scalar_of(*args[2], out.dtype);
  ETC_RETURN_IF_ERROR(fill.run());
  if (c.region.empty() && self.rank() > 0) return Status();  // nothing of self remains
  k::MapArgs p;
  p.op = k::MapOp::kCopy;
  p.shape = shape_of(c.region);
  Status error;
  p.out = operand(ctx, out, c.out_strides, c.out_offset, &error);
  p.a = operand(ctx, self, c.in_strides, c.in_offset, &error);
  ETC_RETURN_IF_ERROR(error);
  ETC_RETURN_IF_ERROR(check_rank(ctx, self));
  return run_map(ctx, p);
}

// ---- Conversion ------------------------------------------------------------------------------

Status to_copy(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, opt_dtype_arg(args, 1).value_or(self.dtype)));
  if (out.dtype == self.dtype) return copy_d2d(ctx, self, out);
  MapBuilder m(ctx, k::MapOp::kCopy, out);
  m.p.a = m.broadcast(self);
  return m.run();
}

}  // namespace

Status register_cuda_tensor_kernels(rt::OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Mm, mm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Bmm, bmm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Addmm, addmm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Linear, linear, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::WeightOnlyLinear, weight_only_linear, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::IntMm, int_mm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Convolution, convolution, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MaxPool2d, max_pool2d, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AvgPool2d, avg_pool2d, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::AdaptiveAvgPool2d, adaptive_avg_pool2d, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(
      OpKind::UpsampleNearest2d,
      [](KernelContext& c, std::span<Value*> a) { return upsample2d(c, a, false); },
      KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(
      OpKind::UpsampleBilinear2d,
      [](KernelContext& c, std::span<Value*> a) { return upsample2d(c, a, true); },
      KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Amax, amax<true>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Amin, amax<false>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ProdDimInt, prod, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::VarCorrection, var, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AnyDim, any_dim, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MeanDim, mean_dim, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SumDimIntList, sum_dim, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Softmax, softmax, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::LogSoftmax, log_softmax, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::NativeLayerNorm, layer_norm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::NativeGroupNorm, group_norm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Cumsum, cumsum, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::NativeBatchNormNoTraining, batch_norm, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Cat, cat, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Clone, same_elements<SameElements::kClone>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::View, same_elements<SameElements::kView>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Reshape, same_elements<SameElements::kReshape>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SqueezeDim, same_elements<SameElements::kSqueezeDim>,
                            KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SqueezeDims, same_elements<SameElements::kSqueezeDims>,
                            KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Unsqueeze, same_elements<SameElements::kUnsqueeze>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ConstantPadNd, constant_pad_nd, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Expand, expand, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Permute, permute, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SelectInt, select, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SliceTensor, slice, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::TransposeInt, transpose, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ToCopy, to_copy, KernelForms::kFunctional));
  return Status();
}

}  // namespace etc::cuda
