// Matrix kernels: mm, bmm, addmm and linear, all on the packed GEMM of gemm.h, and
// linalg_det (LU with partial pivoting, in double).
//
// float16 and bfloat16 are multiplied in float32 (converted once, rounded once at the end),
// float64 in double, integers in int64; bool is rejected.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "graph/int4.h"
#include "graph/ops.h"
#include "runtime/kernels/copied_operand.h"
#include "runtime/kernels/fused_attention.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/weight_only.h"
#include "support/file_io.h"
#include "support/half.h"

namespace etc::rt::kernels {
namespace {

// Calls f.template operator()<G>() with G the GEMM compute type of `dtype`.
template <typename F>
Status visit_gemm_type(const KernelContext& ctx, DType dtype, F&& f) {
  if (dtype == DType::kBool) {
    return unsupported_dtype(ctx, "out", dtype, "a numeric dtype (not bool)");
  }
  if (dtype == DType::kFloat64) {
    f.template operator()<double>();
  } else if (dtype_is_float(dtype)) {
    f.template operator()<float>();
  } else {
    f.template operator()<int64_t>();
  }
  return Status();
}

Status check_same_dtype(const KernelContext& ctx, const char* name, const TensorView& t,
                        const char* ref_name, DType ref) {
  if (t.dtype == ref) return Status();
  return ctx.error(std::string(name) + " has dtype " + std::string(dtype_name(t.dtype)) +
                   ", expected " + std::string(dtype_name(ref)) + " (the dtype of " + ref_name +
                   ")");
}

Status check_rank(const KernelContext& ctx, const char* name, const TensorView& t, size_t rank) {
  if (t.rank() == rank) return Status();
  return ctx.error(std::string(name) + " must have rank " + std::to_string(rank) + ", got " +
                   shape_str(t.sizes));
}

Status inner_mismatch(const KernelContext& ctx, const TensorView& a, const TensorView& b) {
  return ctx.error("cannot multiply " + shape_str(a.sizes) + " by " + shape_str(b.sizes) +
                   " (inner dimensions differ)");
}

}  // namespace

// ---- Argument checks shared with the CUDA kernels -------------------------------------

Result<MatmulShape> check_mm(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  ETC_RETURN_IF_ERROR(check_rank(ctx, "self", a, 2));
  ETC_RETURN_IF_ERROR(check_rank(ctx, "mat2", b, 2));
  ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "mat2", b, "self", a.dtype));
  if (a.sizes[1] != b.sizes[0]) return inner_mismatch(ctx, a, b);
  const MatmulShape s{1, a.sizes[0], b.sizes[1], a.sizes[1]};
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 2), std::vector<int64_t>{s.m, s.n}, a.dtype));
  return s;
}

Result<MatmulShape> check_bmm(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  ETC_RETURN_IF_ERROR(check_rank(ctx, "self", a, 3));
  ETC_RETURN_IF_ERROR(check_rank(ctx, "mat2", b, 3));
  ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "mat2", b, "self", a.dtype));
  if (a.sizes[0] != b.sizes[0]) {
    return ctx.error("batch sizes differ: self " + shape_str(a.sizes) + ", mat2 " +
                     shape_str(b.sizes));
  }
  if (a.sizes[2] != b.sizes[1]) return inner_mismatch(ctx, a, b);
  const MatmulShape s{a.sizes[0], a.sizes[1], b.sizes[2], a.sizes[2]};
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out_arg(args, 2), std::vector<int64_t>{s.batch, s.m, s.n}, a.dtype));
  return s;
}

Result<MatmulShape> check_addmm(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& bias = tensor_arg(args, 0);
  const TensorView& a = tensor_arg(args, 1);
  const TensorView& b = tensor_arg(args, 2);
  TensorView& out = out_arg(args, 5);
  ETC_RETURN_IF_ERROR(check_rank(ctx, "mat1", a, 2));
  ETC_RETURN_IF_ERROR(check_rank(ctx, "mat2", b, 2));
  ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "mat2", b, "mat1", a.dtype));
  ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "self", bias, "mat1", a.dtype));
  if (a.sizes[1] != b.sizes[0]) return inner_mismatch(ctx, a, b);
  const MatmulShape s{1, a.sizes[0], b.sizes[1], a.sizes[1]};
  const std::vector<int64_t> mn{s.m, s.n};
  auto bc = broadcast_shapes(bias.sizes, mn);
  if (!bc || *bc != mn) {
    return ctx.error("self " + shape_str(bias.sizes) + " does not broadcast to " + shape_str(mn));
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, mn, a.dtype));
  if (dtype_is_integral(out.dtype) &&
      (args[3]->kind == Value::Kind::kDouble || args[4]->kind == Value::Kind::kDouble)) {
    return ctx.error("beta and alpha must be integers for an out of dtype " +
                     std::string(dtype_name(out.dtype)));
  }
  return s;
}

Result<MatmulShape> check_linear(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  TensorView& out = out_arg(args, 3);
  if (x.rank() < 1) return ctx.error("input must have rank 1 or more, got " + shape_str(x.sizes));
  ETC_RETURN_IF_ERROR(check_rank(ctx, "weight", w, 2));
  ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "weight", w, "input", x.dtype));
  const int64_t k = x.sizes.back();
  if (w.sizes[1] != k) {
    return ctx.error("input " + shape_str(x.sizes) + " has " + std::to_string(k) +
                     " features but weight " + shape_str(w.sizes) + " expects " +
                     std::to_string(w.sizes[1]));
  }
  const int64_t n = w.sizes[0];
  std::vector<int64_t> expected = x.sizes;
  expected.back() = n;
  if (bias != nullptr) {
    ETC_RETURN_IF_ERROR(check_same_dtype(ctx, "bias", *bias, "input", x.dtype));
    auto bc = broadcast_shapes(bias->sizes, expected);
    if (!bc || *bc != expected) {
      return ctx.error("bias " + shape_str(bias->sizes) + " does not broadcast to " +
                       shape_str(expected));
    }
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, expected, x.dtype));
  return MatmulShape{1, n == 0 ? 0 : out.numel() / n, n, k};
}

Result<WeightOnlyShape> check_weight_only_linear(const KernelContext& ctx, std::span<Value*> args) {
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView& w = a.tensor("weight");
  const TensorView& scale = a.tensor("scale");
  const TensorView* zero = a.opt_tensor("zero_point");
  const TensorView* bias = a.opt_tensor("bias");
  WeightOnlyShape s;
  if (std::optional<weight_only::Problem> p =
          weight_only::check_tensors(x, w, scale, zero, a.integer("group_size"), bias, &s.g))
    return ctx.error(std::string(p->arg) + ": " + p->message);
  std::vector<int64_t> expected = x.sizes;
  expected.back() = s.g.n;
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(), expected, x.dtype));
  s.m = s.g.n == 0 ? 0 : a.out().numel() / s.g.n;
  return s;
}

namespace {

// c (contiguous `c_sizes`, compute type G) = scale * bias broadcast to c_sizes.
template <typename G>
void init_from_bias(const TensorView& bias, G scale, G* c, std::span<const int64_t> c_sizes) {
  ReadAs<G> rb(bias);
  std::vector<int64_t> src_strides = broadcast_strides(bias.sizes, c_sizes);
  std::vector<int64_t> dst_strides = contiguous_strides(c_sizes);
  strided_copy(rb.data(), src_strides, c, dst_strides, c_sizes, sizeof(G));
  if (scale != G(1)) {
    int64_t n = 1;
    for (int64_t s : c_sizes)
      n *= s;
    for (int64_t i = 0; i < n; ++i)
      c[i] *= scale;
  }
}

// out[i] = init + alpha * A[i] @ B[i] for i < batch; A and B given by their strides into
// the (converted) tensors a and b. `bias` (may be null) is broadcast to out and scaled by
// beta; without it C starts at zero.
struct MatmulArgs {
  int64_t batch, m, n, k;
  int64_t a_batch, a_rs, a_cs;
  int64_t b_batch, b_rs, b_cs;
};

// A constant right operand's panels, packed at the first call and kept with the instruction.
struct PackedMatmulWeights final : KernelState {
  struct Key {
    const void* data;
    int64_t k, n, rs, cs;
    bool operator==(const Key&) const = default;
  };
  Key key{};
  std::shared_ptr<const PackedB> packed;
};

// The instruction's state when argument `b_arg` (a float32 matrix) is a program constant.
std::unique_ptr<KernelState>* constant_b_state(const KernelContext& ctx, size_t b_arg,
                                               const TensorView& b) {
  return ctx.state != nullptr && ctx.is_constant(b_arg) && b.dtype == DType::kFloat32 ? ctx.state
                                                                                      : nullptr;
}

// A bf16 (or, with `float16`, fp16) B whose element (k, n) is bits[k * k_stride + n *
// n_stride], widened exactly as the GEMM packs its panels.
DequantB widened_16bit(const uint16_t* bits, bool float16, int64_t k_stride, int64_t n_stride) {
  DequantB d;
  d.bits16 = bits;
  d.float16 = float16;
  d.q_k = k_stride;
  d.q_n = n_stride;
  return d;
}

// A constant float32 right operand's panels (p.b_* its strides), packed at the first call
// and kept in the instruction's state.
const PackedB& packed_weights(std::unique_ptr<KernelState>& state, const MatmulArgs& p,
                              const TensorView& b) {
  const PackedMatmulWeights& st =
      cached_kernel_state<PackedMatmulWeights>(state, {b.data, p.k, p.n, p.b_rs, p.b_cs}, [&] {
        auto fresh = std::make_unique<PackedMatmulWeights>();
        fresh->packed =
            PackedB::pack(p.k, p.n, MatrixRef<float>{b.data_as<const float>(), p.b_rs, p.b_cs});
        // The product reads the packed copy from now on: the weight's own pages (a mapped
        // program's) need not stay resident beside it.
        release_pages(b.data, b.nbytes());
        return fresh;
      });
  return *st.packed;
}

// With `tiles` (the load planner's epilogue as a TileEpilogue), the packed-weights path runs it
// on each tile of C as the GEMM finishes it, while the tile is in L1, instead of a pass over
// the whole out after: returns whether it did (the caller runs the epilogue otherwise).
template <typename G>
bool run_matmul(const MatmulArgs& p, const TensorView& a, const TensorView& b,
                const TensorView* bias, const Value* beta, const Value* alpha, TensorView& out,
                std::unique_ptr<KernelState>* state = nullptr,
                const TileEpilogue* tiles = nullptr) {
  WriteAs<G> wo(out);
  G* c = wo.data();
  const G beta_v = beta ? scalar_to<G>(*beta) : G(1);
  // beta == 0 ignores self entirely, NaN and inf included (ATen).
  const bool use_bias = bias != nullptr && beta_v != G(0);
  const G alpha_v = alpha ? scalar_to<G>(*alpha) : G(1);
  if constexpr (std::is_same_v<G, float>) {
    if (state != nullptr && p.batch == 1 && p.k > 0 && p.m > 0 && p.n > 0 &&
        b.dtype == DType::kFloat32) {
      // A constant right operand (a linear layer's weight) in panels packed once. No bias or
      // one value per column: the GEMM starts each tile of C from zero or the bias row as it
      // reaches it, instead of a pass filling C first that the products then read back (the
      // same values in the same order: the same bits). Any other bias fills C first.
      const PackedB& packed = packed_weights(*state, p, b);
      std::vector<float> cols;
      GemmInit init;
      const GemmInit* start = &init;
      if (use_bias && bias->numel() == p.n && (bias->rank() < 2 || bias->sizes[0] == 1) &&
          bias->rank() <= 2) {
        cols.resize(static_cast<size_t>(p.n));
        convert_elements(bias->data, bias->dtype, cols.data(), DType::kFloat32, p.n);
        if (beta_v != 1.0f) {
          for (float& v : cols)
            v *= beta_v;
        }
        init.cols = cols.data();
      } else if (use_bias) {
        init_from_bias<G>(*bias, beta_v, c, out.sizes);
        start = nullptr;  // accumulated into
      }
      if (start != nullptr && tiles != nullptr) tiles->run_on_tiles_of(init);
      ReadAs<G> ra(a);
      gemm_packed(p.m, alpha_v, MatrixRef<G>{ra.data(), p.a_rs, p.a_cs}, packed, c, p.n, start);
      wo.finish();
      return start != nullptr && tiles != nullptr;
    }
  }
  if (use_bias) {
    init_from_bias<G>(*bias, beta_v, c, out.sizes);
  } else {
    std::fill_n(c, out.numel(), G(0));
  }
  if (p.k > 0 && p.m > 0 && p.n > 0) {
    if constexpr (std::is_same_v<G, float>) {
      if (b.dtype == DType::kBFloat16 || b.dtype == DType::kFloat16) {
        // A 16-bit B (a bf16/fp16 model's weight) widened as its panels are packed: read in
        // its own dtype, never copied whole to float32 first. The same values and order of
        // accumulation as the copy: the same bits.
        ReadAs<G> ra(a);
        for (int64_t i = 0; i < p.batch; ++i) {
          const DequantB wide = widened_16bit(b.data_as<const uint16_t>() + i * p.b_batch,
                                              b.dtype == DType::kFloat16, p.b_rs, p.b_cs);
          MatrixRef<float> wb{nullptr, 0, 0};
          wb.dequant = &wide;
          gemm(p.m, p.n, p.k, alpha_v, MatrixRef<G>{ra.data() + i * p.a_batch, p.a_rs, p.a_cs}, wb,
               c + i * p.m * p.n, p.n);
        }
        wo.finish();
        return false;
      }
    }
    ReadAs<G> ra(a), rb(b);
    for (int64_t i = 0; i < p.batch; ++i) {
      gemm(p.m, p.n, p.k, alpha_v, MatrixRef<G>{ra.data() + i * p.a_batch, p.a_rs, p.a_cs},
           MatrixRef<G>{rb.data() + i * p.b_batch, p.b_rs, p.b_cs}, c + i * p.m * p.n, p.n);
    }
  }
  wo.finish();
  return false;
}

// The quantized weight the load planner gave this product (kernels/load_plan.h), if any.
const DequantizedWeight* dequantized_weight(const KernelContext& ctx) {
  return ctx.state != nullptr ? dynamic_cast<const DequantizedWeight*>(ctx.state->get()) : nullptr;
}

// out = beta * bias + alpha * a @ B (as run_matmul starts from the bias), where B is the
// quantized weight q describes: the skipped steps before would have dequantized it into b.
// The GEMM dequantizes it while packing its panels: the bits of the unfused steps (but for an
// 8da4w product's integer path: weight_only.h).
Status run_dequantized(const KernelContext& ctx, const DequantizedWeight& q, const TensorView& a,
                       const TensorView& b, const TensorView* bias, const Value* beta,
                       const Value* alpha, TensorView& out, const MatmulShape& s) {
  const int64_t m = s.m, k = s.k, n = s.n;
  const DType wd = q.dequant.round16 == DequantB::Round16::kNone       ? DType::kFloat32
                   : q.dequant.round16 == DequantB::Round16::kBFloat16 ? DType::kBFloat16
                                                                       : DType::kFloat16;
  if (q.b != b.data || q.k != k || q.n != n || a.dtype != wd || out.dtype != wd) {
    return internal_error(std::string(ctx.op) + ": mat2 " + b.describe() +
                          " is not the dequantized weight planned at load");
  }
  if (q.quantized_rows && q.quantized_rows->rows != m) {
    return internal_error(std::string(ctx.op) + ": the left operand " + a.describe() +
                          " is not the quantized rows planned at load");
  }
  const float beta_v = beta ? scalar_to<float>(*beta) : 1.0f;
  const float alpha_v = alpha ? scalar_to<float>(*alpha) : 1.0f;
  MatrixRef<float> weight{nullptr, 0, 0};
  weight.dequant = &q.dequant;
  // Fills C with the bias (or zeros): after every operand is read, as the out may lie over
  // the left operand's quantized rows (the program read them before it wrote the out).
  auto init = [&](float* c) {
    if (bias != nullptr && beta_v != 0.0f) {
      init_from_bias<float>(*bias, beta_v, c, out.sizes);
    } else {
      std::fill_n(c, out.numel(), 0.0f);
    }
  };
  // The left operand: the program's (a 16-bit one read in float32, the product rounded once
  // at the end, as run_matmul runs it), or, where its dequantization steps were skipped too
  // (an 8da4w product), those steps' values computed here when the integer product cannot
  // take the rows.
  std::optional<ReadAs<float>> ra;
  Buffer<float> rows;
  const float* a_data = nullptr;
  if (q.quantized_rows) {
    // The int8 rows times the 4-bit weight in integers, where the rows' zero points are
    // integers the kernel takes (choose_qparams_affine rounds them: always, in torchao's
    // programs).
    const DequantizedWeight::QuantizedRows& r = *q.quantized_rows;
    std::vector<int32_t> zero(static_cast<size_t>(m));
    std::vector<float> zero_f(static_cast<size_t>(m)), scale(static_cast<size_t>(m));
    bool integers = true;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t zi = (i / r.zero_group) * r.zero_stride;
      const float z = r.zero != nullptr      ? r.zero[zi]
                      : r.zero_i8 != nullptr ? static_cast<float>(r.zero_i8[zi])
                                             : 0.0f;
      zero_f[static_cast<size_t>(i)] = z;
      scale[static_cast<size_t>(i)] = r.scale[(i / r.scale_group) * r.scale_stride];
      integers = integers && z == std::nearbyint(z) && std::fabs(z) <= kInt8x4MaxZero;
      if (integers) zero[static_cast<size_t>(i)] = static_cast<int32_t>(z);
    }
    if (integers) {
      const Int8x4Rows arranged =
          arrange_int8_rows(m, Int8Rows{r.q, k, zero.data(), scale.data()}, *q.int4);
      WriteAs<float> wo(out);
      init(wo.data());
      gemm_int8x4(arranged, *q.int4, alpha_v, wo.data(), n);
      wo.finish();
      return Status();
    }
    // Each skipped step's rounding: the unfused bits.
    rows = Buffer<float>(m * k);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        float v = static_cast<float>(r.q[i * k + j]);
        if (r.zero != nullptr || r.zero_i8 != nullptr) v = v - zero_f[static_cast<size_t>(i)];
        rows[i * k + j] = v * scale[static_cast<size_t>(i)];
      }
    }
    a_data = rows.data();
  } else {
    a_data = ra.emplace(a).data();
  }
  WriteAs<float> wo(out);
  init(wo.data());
  gemm(m, n, k, alpha_v, MatrixRef<float>{a_data, k, 1}, weight, wo.data(), n);
  wo.finish();
  return Status();
}

// The elementwise instructions after a matrix product (the load planner's epilogue: float32
// only), over its finished out, rows split across threads: a bias row, a residual add, an
// activation.
void run_product_epilogue(const KernelContext& ctx, const TensorView& out, int64_t m, int64_t n) {
  if (ctx.epilogue == nullptr || out.dtype != DType::kFloat32) return;
  const Epilogue& e = *ctx.epilogue;
  parallel_for(m, std::max<int64_t>(1, 4096 / n),
               [&](int64_t r0, int64_t r1) { apply_epilogue(e, r0 * n, r1 * n); });
}

// The epilogue as tile work for the GEMM (run_matmul's `tiles`), where its chain allows.
std::optional<TileEpilogue> product_tiles(const KernelContext& ctx, const TensorView& out) {
  if (ctx.epilogue == nullptr || out.dtype != DType::kFloat32) return std::nullopt;
  return TileEpilogue::make(*ctx.epilogue);
}

Status mm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const MatmulShape s, check_mm(ctx, args));
  const int64_t m = s.m, k = s.k, n = s.n;
  if (out.numel() == 0) return Status();
  MatmulArgs p{1, m, n, k, 0, k, 1, 0, n, 1};
  const std::optional<TileEpilogue> tiles = product_tiles(ctx, out);
  bool tiled = false;
  if (const DequantizedWeight* q = dequantized_weight(ctx)) {
    ETC_RETURN_IF_ERROR(run_dequantized(ctx, *q, a, b, nullptr, nullptr, nullptr, out, s));
  } else {
    ETC_RETURN_IF_ERROR(visit_gemm_type(ctx, out.dtype, [&]<typename G>() {
      tiled = run_matmul<G>(p, a, b, nullptr, nullptr, nullptr, out, constant_b_state(ctx, 1, b),
                            tiles ? &*tiles : nullptr);
    }));
  }
  if (!tiled) run_product_epilogue(ctx, out, m, n);
  return Status();
}

// softmax(Q K^T * scale) V for q [B, L, E], kt [B, E, S] (fused_attention.h): per batch and
// block of query rows, the scores by the bmm's GEMM into the block's buffer, scaled as
// mul.Scalar does (in float), each row's softmax, then the rows' product with V by the second
// bmm's GEMM, into the out.
Status run_fused_attention(KernelContext& ctx, const FusedAttention& fa, const TensorView& q,
                           const TensorView& kt) {
  const int64_t batch = q.sizes[0], l = q.sizes[1], e = q.sizes[2], s = kt.sizes[2];
  const TensorView& v = *fa.v;
  const TensorView& o = *fa.out;
  if (q.dtype != DType::kFloat32 || kt.dtype != DType::kFloat32 || v.dtype != DType::kFloat32 ||
      o.dtype != DType::kFloat32 || v.sizes.size() != 3 || v.sizes[0] != batch || v.sizes[1] != s ||
      o.sizes != std::vector<int64_t>{batch, l, v.sizes[2]}) {
    return internal_error(std::string(ctx.op) + ": the attention planned at load does not fit " +
                          q.describe() + ", " + kt.describe() + ", " + v.describe() + " -> " +
                          o.describe());
  }
  const int64_t ev = v.sizes[2];
  const auto* qd = q.data_as<const float>();
  const auto* kd = kt.data_as<const float>();
  const auto* vd = v.data_as<const float>();
  auto* od = static_cast<float*>(o.data);
  // Each (batch, block of rows) is one task; the tasks split across threads, each with its
  // own block of scores (the GEMMs and softmax inside a task run on its thread). A thread
  // packs a batch's K^T and V into the GEMM's panels once for all its blocks of that batch
  // (per block, the packing was a tenth of the attention's time over 1500 positions): the
  // blocks, micro-kernels and order of gemm's own packing, so the same bits.
  const int64_t blocks = (l + kAttentionRows - 1) / kAttentionRows;
  parallel_for(batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> scores(static_cast<size_t>(kAttentionRows * s));
    float* sc = scores.data();
    const float scale = fa.scale;
    std::shared_ptr<const PackedB> kt_panels, v_panels;
    int64_t panels_of = -1;  // the batch whose K^T and V they hold
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, r0 = t % blocks * kAttentionRows;
      const int64_t rows = std::min(kAttentionRows, l - r0);
      if (b != panels_of) {
        kt_panels = PackedB::pack(e, s, MatrixRef<float>{kd + b * e * s, s, 1});
        v_panels = PackedB::pack(s, ev, MatrixRef<float>{vd + b * s * ev, ev, 1});
        panels_of = b;
      }
      // The scores overwritten, not zeroed and accumulated into. Where the products sum all
      // of E in one K block, the scale is the GEMM's alpha: each score is then
      // fma(scale, sum, 0), the rounding of scale * sum, which is what the bmm's 0 + sum
      // and the mul's rounding of sum * scale give (a zero sum gives +0 both ways).
      const GemmInit zero{};
      const bool scale_in_gemm = e <= kGemmKBlock;
      gemm_packed(rows, scale_in_gemm ? scale : 1.0f, MatrixRef<float>{qd + (b * l + r0) * e, e, 1},
                  *kt_panels, sc, s, &zero);
      if (!scale_in_gemm) {
        for (int64_t i = 0; i < rows * s; ++i)
          sc[i] = sc[i] * scale;
      }
      softmax_rows_in_place(sc, rows, s);
      float* ob = od + (b * l + r0) * ev;
      gemm_packed(rows, 1.0f, MatrixRef<float>{sc, s, 1}, *v_panels, ob, ev, &zero);
    }
  });
  return Status();
}

// bmm whose mat2 the skipped steps would have copied from co.source (copied_operand.h): each
// matrix read from the source through its offset and strides, widened as its panels are
// packed where the source is bf16/fp16. The same GEMM calls as run_matmul's on the copy, with
// the same values: the same bits.
Status run_copied_operand(const KernelContext& ctx, const CopiedOperand& co, const TensorView& a,
                          const TensorView& b, TensorView& out, const MatmulShape& s) {
  const TensorView& src = *co.source;
  if (co.b != b.data || co.batch != s.batch || co.k != s.k || co.n != s.n ||
      a.dtype != DType::kFloat32 || out.dtype != DType::kFloat32 || src.dtype != co.dtype ||
      src.numel() != co.source_numel || src.data == nullptr) {
    return internal_error(std::string(ctx.op) + ": mat2 " + b.describe() + " (from " +
                          src.describe() + ") is not the operand planned at load");
  }
  auto* c = static_cast<float*>(out.data);
  std::fill_n(c, out.numel(), 0.0f);
  if (s.m == 0 || s.n == 0 || s.k == 0) return Status();
  const auto* ad = a.data_as<const float>();
  // Heads next to each other that read the same matrix of the source (the query heads of one
  // cache head, under grouped-query attention) go as one product of their rows stacked (their
  // rows of A and of C follow one another), which reads that matrix once instead of once per
  // head, where gemm reads it in place for that many rows: K^T (its columns contiguous) for
  // up to kTransposedBRows, a 16-bit V (its rows contiguous) for up to kWide16Rows (both
  // AVX-512 only); a float32 V only one row at a time. Where a head alone has more rows than
  // that (a prefill), gemm packs the matrix's panels: once for all the heads that read it.
  // Each element of C takes the same sums whatever the rows around it: the same bits.
  const bool avx512 = gemm_float_kernel() == FloatKernel::kAvx512;
  const int64_t in_place = !avx512                                           ? 1
                           : co.k_stride == 1                                ? kTransposedBRows
                           : co.n_stride == 1 && co.dtype != DType::kFloat32 ? kWide16Rows
                                                                             : 1;
  const int64_t most = s.m > in_place ? s.batch : std::max<int64_t>(1, in_place / s.m);
  std::vector<std::pair<int64_t, int64_t>> runs;  // first head, heads
  for (int64_t i = 0; i < s.batch;) {
    int64_t j = i + 1;
    while (j < s.batch && j - i < most &&
           co.batch_offset[static_cast<size_t>(j)] == co.batch_offset[static_cast<size_t>(i)])
      ++j;
    runs.emplace_back(i, j - i);
    i = j;
  }
  auto product = [&](const std::pair<int64_t, int64_t>& run) {
    const auto [i, heads] = run;
    const MatrixRef<float> ai{ad + i * s.m * s.k, s.k, 1};
    const int64_t at = co.batch_offset[static_cast<size_t>(i)];
    if (co.dtype == DType::kFloat32) {
      gemm(heads * s.m, s.n, s.k, 1.0f, ai,
           MatrixRef<float>{src.data_as<const float>() + at, co.k_stride, co.n_stride},
           c + i * s.m * s.n, s.n);
    } else {
      const DequantB wide = widened_16bit(src.data_as<const uint16_t>() + at,
                                          co.dtype == DType::kFloat16, co.k_stride, co.n_stride);
      MatrixRef<float> wb{nullptr, 0, 0};
      wb.dequant = &wide;
      gemm(heads * s.m, s.n, s.k, 1.0f, ai, wb, c + i * s.m * s.n, s.n);
    }
  };
  // The products split across threads where there are enough of them (each then runs on its
  // thread: a decode step's are too small for gemm to split); fewer than threads (a prefill's
  // few large products), one after the other, each split by gemm. The same products either
  // way, so the same bits.
  const auto count = static_cast<int64_t>(runs.size());
  if (count >= num_threads()) {
    parallel_for(count, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        product(runs[static_cast<size_t>(r)]);
    });
  } else {
    for (const auto& run : runs)
      product(run);
  }
  return Status();
}

Status bmm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& a = tensor_arg(args, 0);
  const TensorView& b = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const MatmulShape s, check_bmm(ctx, args));
  if (const auto* fa =
          ctx.state != nullptr ? dynamic_cast<const FusedAttention*>(ctx.state->get()) : nullptr;
      fa != nullptr) {
    return run_fused_attention(ctx, *fa, a, b);  // out (the scores) is never written
  }
  if (const auto* co =
          ctx.state != nullptr ? dynamic_cast<const CopiedOperand*>(ctx.state->get()) : nullptr;
      co != nullptr) {
    return run_copied_operand(ctx, *co, a, b, out, s);
  }
  const int64_t batch = s.batch, m = s.m, k = s.k, n = s.n;
  if (out.numel() == 0) return Status();
  MatmulArgs p{batch, m, n, k, m * k, k, 1, k * n, n, 1};
  return visit_gemm_type(ctx, out.dtype, [&]<typename G>() {
    run_matmul<G>(p, a, b, nullptr, nullptr, nullptr, out);
  });
}

Status addmm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& bias = tensor_arg(args, 0);
  const TensorView& a = tensor_arg(args, 1);
  const TensorView& b = tensor_arg(args, 2);
  TensorView& out = out_arg(args, 5);
  ETC_ASSIGN_OR_RETURN(const MatmulShape s, check_addmm(ctx, args));
  const int64_t m = s.m, k = s.k, n = s.n;
  if (out.numel() == 0) return Status();
  const std::optional<TileEpilogue> tiles = product_tiles(ctx, out);
  bool tiled = false;
  if (const DequantizedWeight* q = dequantized_weight(ctx)) {
    ETC_RETURN_IF_ERROR(run_dequantized(ctx, *q, a, b, &bias, args[3], args[4], out, s));
  } else {
    MatmulArgs p{1, m, n, k, 0, k, 1, 0, n, 1};
    ETC_RETURN_IF_ERROR(visit_gemm_type(ctx, out.dtype, [&]<typename G>() {
      tiled = run_matmul<G>(p, a, b, &bias, args[3], args[4], out, constant_b_state(ctx, 2, b),
                            tiles ? &*tiles : nullptr);
    }));
  }
  if (!tiled) run_product_epilogue(ctx, out, m, n);
  return Status();
}

// linear(input[..., in], weight[out, in], bias?) = input @ weight^T + bias: an IR op
// (ExecuTorch's exporter decomposes it into permute_copy + addmm for host programs).
Status linear_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView& w = tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const MatmulShape s, check_linear(ctx, args));
  if (out.numel() == 0) return Status();
  const int64_t m = s.m, n = s.n, k = s.k;
  // B[k, j] = weight[j, k]: the transpose is read through strides.
  MatmulArgs p{1, m, n, k, 0, k, 1, 0, 1, k};
  return visit_gemm_type(ctx, out.dtype, [&]<typename G>() {
    run_matmul<G>(p, x, w, bias, nullptr, nullptr, out, constant_b_state(ctx, 1, w));
  });
}

// The dequantized weight w [n, k] of graph/weight_only.h's rule, each step rounded to the
// model's dtype (scale's) as the elementwise kernels round it; the values, exact in float32,
// stored as float32. q: the weight's bytes (int8, or 4-bit rows); scale and zero point
// [n, groups].
void dequantize_weight_only(const weight_only::Geometry& g, const void* q, const TensorView& scale,
                            const TensorView* zero, float* w) {
  const DType t = scale.dtype;
  auto round = [t](float v) {
    if (t == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(v));
    if (t == DType::kFloat16) return half_to_float(float_to_half(v));
    return v;
  };
  auto read = [t](const void* data, int64_t i) {
    if (t == DType::kBFloat16) return bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    if (t == DType::kFloat16) return half_to_float(static_cast<const uint16_t*>(data)[i]);
    return static_cast<const float*>(data)[i];
  };
  const int64_t n = g.n, k = g.k, row_bytes = int4::row_bytes(k);
  parallel_for(
      n, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const auto* q8 = static_cast<const int8_t*>(q) + r * k;
          const auto* q4 = static_cast<const uint8_t*>(q) + r * row_bytes;
          for (int64_t c = 0; c < k; ++c) {
            const int64_t group = r * g.groups + c / g.group_size;
            float v = static_cast<float>(g.int4 ? int4::at(q4, c) : q8[c]);  // exact in any dtype
            if (zero != nullptr) {
              const float z = zero->dtype == DType::kInt8
                                  ? static_cast<float>(zero->data_as<const int8_t>()[group])
                                  : read(zero->data, group);
              v = round(v - z);
            }
            w[r * k + c] = round(v * read(scale.data, group));
          }
        }
      });
}

// The op's weight as the GEMM's DequantB, in the form the load planner gives the same chain
// of a host program (load_plan_dequant.cpp): the GEMM dequantizes it as it packs its panels,
// or in registers for a few rows. False where that cannot give the chain's values: a 16-bit
// model's zero points that are not integers of at most 128 in magnitude (q - z would round
// before the multiplication, which the GEMM rounds after).
bool weight_only_dequant(const weight_only::Geometry& g, const TensorView& w,
                         const TensorView& scale, const TensorView* zero, DequantizedWeight& st) {
  DequantB& d = st.dequant;
  const DType wd = scale.dtype;
  d.q_n = g.k;
  d.q_k = 1;
  if (g.int4) {
    d.q4 = w.data_as<const uint8_t>();
    d.q4_row = int4::row_bytes(g.k);
  } else {
    d.q = w.data_as<const int8_t>();
  }
  if (wd != DType::kFloat32) {
    d.round16 = wd == DType::kBFloat16 ? DequantB::Round16::kBFloat16 : DequantB::Round16::kFloat16;
    d.normal_values = true;
  }
  d.integer_zero = true;
  // Element (k, n) of B is w[n, k]: its group's operand value at n * groups + k / group_size.
  auto place = [&](DequantB::Operand& o) {
    o.n_stride = g.groups;
    o.n_group = 1;
    o.k_stride = 1;
    o.k_group = g.group_size;
  };
  auto widen16 = [wd](uint16_t bits) {
    return wd == DType::kBFloat16 ? bfloat16_to_float(bits) : half_to_float(bits);
  };
  const int64_t count = g.n * g.groups;
  if (zero != nullptr) {
    if (zero->dtype == DType::kInt8) {  // widened exactly; |q - z| <= 255 is exact in 16 bits
      st.zero_f32.assign(zero->data_as<const int8_t>(), zero->data_as<const int8_t>() + count);
      d.zero.data = st.zero_f32.data();
    } else if (wd == DType::kFloat32) {
      d.zero.data = zero->data_as<const float>();
      for (int64_t e = 0; e < count; ++e) {
        const float v = d.zero.data[e];
        d.integer_zero = d.integer_zero && v == std::nearbyint(v) && std::fabs(v) <= 1048576.0f;
      }
    } else {
      st.zero_f32.resize(static_cast<size_t>(count));
      for (int64_t e = 0; e < count; ++e) {
        const float v = widen16(zero->data_as<const uint16_t>()[e]);
        if (!(v == std::nearbyint(v) && std::fabs(v) <= 128.0f)) return false;
        st.zero_f32[static_cast<size_t>(e)] = v;
      }
      d.zero.data = st.zero_f32.data();
    }
    place(d.zero);
  }
  if (wd == DType::kFloat32) {
    d.scale.data = scale.data_as<const float>();
  } else {
    st.scale_f32.resize(static_cast<size_t>(count));
    for (int64_t e = 0; e < count; ++e) {
      const float v = widen16(scale.data_as<const uint16_t>()[e]);
      st.scale_f32[static_cast<size_t>(e)] = v;
      d.normal_values = d.normal_values && std::isfinite(v) &&
                        (v == 0.0f || std::fabs(v) >= std::numeric_limits<float>::min());
    }
    d.scale.data = st.scale_f32.data();
  }
  place(d.scale);
  st.k = g.k;
  st.n = g.n;
  arrange_row_operands(d, g.k, g.n, st.zero_lanes, st.scale_lanes);
  return true;
}

// etc::weight_only_linear (graph/weight_only.h): how the CPU runs a CUDA program's node (no
// GPU, or --device cpu), and the reference the CUDA kernel is checked against. The GEMM reads
// the packed weight and dequantizes it as it goes (weight_only_dequant), as the CPU runs the
// same chain in a host program; where that cannot give the chain's values, the weight is
// dequantized into a temporary, each step rounded as the elementwise kernels round it, and
// multiplied as linear multiplies. Either way the values of the chain of steps the export
// fused (passes/fuse_weight_only.h), summed as the CPU sums the chain's product.
Status weight_only_linear_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const WeightOnlyShape s, check_weight_only_linear(ctx, args));
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* bias = a.opt_tensor("bias");
  TensorView& out = a.out();
  if (out.numel() == 0) return Status();
  const int64_t m = s.m, n = s.g.n, k = s.g.k;
  DequantizedWeight planned;
  if (k > 0 && weight_only_dequant(s.g, a.tensor("weight"), a.tensor("scale"),
                                   a.opt_tensor("zero_point"), planned)) {
    ReadAs<float> ra(x);
    WriteAs<float> wo(out);
    if (bias != nullptr) {
      init_from_bias<float>(*bias, 1.0f, wo.data(), out.sizes);
    } else {
      std::fill_n(wo.data(), out.numel(), 0.0f);
    }
    MatrixRef<float> weight{nullptr, 0, 0};
    weight.dequant = &planned.dequant;
    gemm(m, n, k, 1.0f, MatrixRef<float>{ra.data(), k, 1}, weight, wo.data(), n);
    wo.finish();
    return Status();
  }
  // float32 whatever the input's dtype: each value is one of that dtype's, read exactly.
  std::vector<float> values(static_cast<size_t>(n * k));
  dequantize_weight_only(s.g, a.tensor("weight").data, a.tensor("scale"),
                         a.opt_tensor("zero_point"), values.data());
  const TensorView w{values.data(), DType::kFloat32, {n, k}, x.device};
  MatmulArgs p{1, m, n, k, 0, k, 1, 0, 1, k};  // B[k, j] = w[j, k]
  return visit_gemm_type(
      ctx, out.dtype, [&]<typename G>() { run_matmul<G>(p, x, w, bias, nullptr, nullptr, out); });
}

// The determinant of each [n, n] matrix of A: Gaussian elimination with partial
// pivoting in double (a zero pivot column makes it 0).
Status linalg_det_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& m = a.tensor("A");
  TensorView& out = a.out();
  if (!dtype_is_float(m.dtype))
    return unsupported_dtype(ctx, "A", m.dtype, "a floating-point dtype");
  if (m.rank() < 2 || m.sizes[m.rank() - 1] != m.sizes[m.rank() - 2]) {
    return ctx.error("A must hold square matrices [..., n, n], got " + shape_str(m.sizes));
  }
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, std::vector<int64_t>(m.sizes.begin(), m.sizes.end() - 2), m.dtype));
  const int64_t n = m.sizes.back(), count = out.numel();
  std::vector<double> lu(static_cast<size_t>(n * n)), det(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    convert_elements(static_cast<const char*>(m.data) + b * n * n * dtype_size(m.dtype), m.dtype,
                     lu.data(), DType::kFloat64, n * n);
    double d = 1;
    for (int64_t k = 0; k < n && d != 0; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < n; ++i) {
        if (std::fabs(lu[i * n + k]) > std::fabs(lu[p * n + k])) p = i;
      }
      if (lu[p * n + k] == 0) {
        d = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < n; ++j)
          std::swap(lu[k * n + j], lu[p * n + j]);
        d = -d;
      }
      d *= lu[k * n + k];
      for (int64_t i = k + 1; i < n; ++i) {
        const double f = lu[i * n + k] / lu[k * n + k];
        for (int64_t j = k + 1; j < n; ++j)
          lu[i * n + j] -= f * lu[k * n + j];
      }
    }
    det[static_cast<size_t>(b)] = d;
  }
  convert_elements(det.data(), DType::kFloat64, out.data, out.dtype, count);
  return Status();
}

}  // namespace

Status register_matmul_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::LinalgDet, linalg_det_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Mm, mm_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Bmm, bmm_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Addmm, addmm_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Linear, linear_kernel, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::WeightOnlyLinear, weight_only_linear_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
