// The load planner's dequantization passes (load_plan_planner.h): a matrix product whose
// right operand the steps before it dequantize from an int8 or 4-bit constant takes those
// steps (weight_only.h), and an 8da4w product also the steps that dequantize its left operand
// from int8 rows (gemm_int8x4.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "graph/int4.h"
#include "runtime/kernels/load_plan_planner.h"
#include "support/half.h"

namespace etc::rt::kernels::load_plan_detail {
namespace {

// A float operand of a dequantization step broadcast over the chain's elementwise shape,
// split at `split` into an outer index (the dims before) and an inner one (the dims from it):
// as DequantB::Operand's two terms, (outer / outer_group) * outer_stride and
// (inner / inner_group) * inner_stride. Each side may have one dim the operand varies along
// (after dims of size 1), then dims it is broadcast over; nullopt for any other layout.
struct SplitOperand {
  int64_t outer_stride = 0, outer_group = 1, inner_stride = 0, inner_group = 1;
};

std::optional<SplitOperand> split_operand(const TensorView& operand,
                                          const std::vector<int64_t>& shape, size_t split) {
  const size_t rank = shape.size();
  if (operand.rank() > rank) return std::nullopt;
  // The operand's strides over `shape` (0 where it is broadcast).
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < operand.rank(); ++i) {
    const size_t d = operand.rank() - 1 - i, at = rank - 1 - i;
    const int64_t size = operand.sizes[d];
    if (size != 1 && size != shape[at]) return std::nullopt;
    if (size != 1) strides[at] = stride;
    stride *= size;
  }
  // One side [from, to): the term (index / group) * stride.
  auto side = [&](size_t from, size_t to, int64_t& out_stride, int64_t& out_group) {
    size_t varying = to;  // the dim the operand varies along, if any
    for (size_t d = from; d < to; ++d) {
      if (strides[d] == 0) continue;
      if (varying != to) return false;  // two: not one value per group
      varying = d;
    }
    for (size_t d = from; d < varying && varying != to; ++d)
      if (shape[d] != 1) return false;  // a dim before it that it is broadcast over
    int64_t group = 1;
    for (size_t d = varying == to ? from : varying + 1; d < to; ++d)
      group *= shape[d];
    out_stride = varying == to ? 0 : strides[varying];
    out_group = varying == to ? 1 : group;
    return true;
  };
  SplitOperand s;
  if (!side(0, split, s.outer_stride, s.outer_group) ||
      !side(split, rank, s.inner_stride, s.inner_group))
    return std::nullopt;
  return s;
}

}  // namespace

std::optional<size_t> CpuPlanner::widened_int8(size_t before, const TensorView& t) const {
  const std::optional<size_t> j = dtype_is_float(t.dtype) ? last_writer(before, t) : std::nullopt;
  if (!j) return std::nullopt;
  const MethodStep& w = steps()[*j];
  const bool widens = w.calls(OpKind::ToCopy) && w.args[0]->is_tensor() &&
                      w.args[0]->tensor.dtype == DType::kInt8 &&
                      w.args[0]->tensor.data != nullptr && w.args[0]->tensor.sizes == t.sizes;
  return widens ? j : std::nullopt;
}

std::optional<size_t> CpuPlanner::unpacked_int4(size_t before, const TensorView& t) const {
  const std::optional<size_t> j = t.dtype == DType::kInt8 ? last_writer(before, t) : std::nullopt;
  if (!j) return std::nullopt;
  const MethodStep& w = steps()[*j];
  const bool unpacks = w.calls(OpKind::UnpackInt4) && w.args.size() == 4 &&
                       (w.constant_args & 1) != 0 && w.args[0]->is_tensor() &&
                       w.args[0]->tensor.dtype == DType::kUInt8 &&
                       w.args[0]->tensor.data != nullptr && w.args[1]->kind == Value::Kind::kInt;
  if (!unpacks) return std::nullopt;
  // The packed bytes hold t's values (check_unpack_int4's rule: rows of ceil(size / 2) bytes,
  // size values each): the product reads them in place of t, and no kernel checks them then.
  const TensorView& packed = w.args[0]->tensor;
  const int64_t size = w.args[1]->i;
  if (packed.rank() == 0 || size <= 0 || packed.sizes.back() != int4::row_bytes(size) ||
      packed.numel() / packed.sizes.back() * size != t.numel())
    return std::nullopt;
  return j;
}

std::optional<int64_t> CpuPlanner::panel_source(const MethodStep& w, int64_t k, int64_t n) const {
  if (!w.calls(OpKind::Permute) || w.args.size() != 4 || (w.constant_args & 1) == 0 ||
      !w.args[0]->is_tensor() || w.args[1]->kind != Value::Kind::kIntList ||
      w.args[1]->ints != std::vector<int64_t>{1, 0, 2} || !w.args[2]->is_tensor())
    return std::nullopt;
  const TensorView& src = w.args[0]->tensor;
  const TensorView& out = w.args[2]->tensor;
  if (src.rank() != 3 || src.data == nullptr || src.dtype != out.dtype) return std::nullopt;
  const int64_t panel = src.sizes[2];
  if (panel <= 0 || panel % 16 != 0 || src.sizes[1] != k || src.sizes[0] * panel != n ||
      out.sizes != std::vector<int64_t>{k, src.sizes[0], panel})
    return std::nullopt;
  return panel;
}

void CpuPlanner::fuse_dequantized_weights() {
  if (!straight_line()) return;
  // The chain's dtype: float32, or a bf16/fp16 model's (each step rounded to it).
  DType wd = DType::kFloat32;
  auto plain = [&](const Value* v) {
    return v->is_tensor() && v->tensor.dtype == wd && v->tensor.capacity < 0 &&
           v->tensor.data != nullptr && v->tensor.device.is_cpu() && !is_io(v);
  };
  auto constant_arg = [](const MethodStep& s, size_t i) {
    return i < 64 && ((s.constant_args >> i) & 1) != 0;
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    MethodStep& mm = steps()[i];
    // mm.out(self, mat2, out) or addmm.out(bias, mat1, mat2, beta, alpha, out), each with its
    // return value after: where the left operand, the weight and the out are.
    const bool addmm = mm.calls(OpKind::Addmm) && mm.args.size() == 7;
    const size_t ia = addmm ? 1 : 0, ib = addmm ? 2 : 1, iout = addmm ? 5 : 2;
    if (!(addmm || (mm.calls(OpKind::Mm) && mm.args.size() == 4)) || mm.fused ||
        mm.state != nullptr || !mm.args[ib]->is_tensor())
      continue;
    wd = mm.args[ib]->tensor.dtype;
    if ((wd != DType::kFloat32 && wd != DType::kBFloat16 && wd != DType::kFloat16) ||
        !plain(mm.args[ib]) || !mm.args[ia]->is_tensor() || mm.args[ia]->tensor.dtype != wd ||
        mm.args[ib]->tensor.rank() != 2)
      continue;
    const TensorView& b = mm.args[ib]->tensor;
    const int64_t k = b.sizes[0], n = b.sizes[1];
    // Walk back from mat2 through the steps that wrote it: [permute_copy (a transpose)],
    // [mul by a constant scale], [sub of a constant zero point], _to_copy of an int8 constant.
    // Every tensor on the way is read by the next step alone.
    const TensorView* cur = &b;
    std::vector<size_t> chain;                   // the steps, last first
    std::vector<const TensorView*> written{&b};  // what they write
    bool transposed = false;
    const TensorView *zero = nullptr, *scale = nullptr, *q = nullptr;
    // A weight in panels (panel_source): of the chain's dtype (read in place as it is), or
    // int8 values the chain widens.
    const uint16_t* bits16 = nullptr;
    const float* f32 = nullptr;  // (a float32 weight in panels)
    int64_t panel = 0;
    const MethodStep* unpack = nullptr;  // the step that unpacked q from 4-bit values, if one
    const int8_t* zero_i8 = nullptr;     // the zero point's int8 values, widened by a step
    const uint8_t* zero_i4 = nullptr;    // or its 4-bit values, unpacked and widened by steps
    int64_t zero_i4_size = 0;
    std::vector<int64_t> shape;  // the elementwise steps' shape (q's)
    for (size_t j = i; j-- > 0 && q == nullptr && bits16 == nullptr && f32 == nullptr;) {
      if (std::find(chain.begin(), chain.end(), j) != chain.end()) continue;  // a zero's widening
      const MethodStep& w = steps()[j];
      if (w.kind != StepKind::kKernel || w.fused || w.args.empty()) break;
      const Value* out = w.args.back();
      const bool writes_cur = out->is_tensor() && out->tensor.data != nullptr &&
                              out->tensor.nbytes() > 0 && overlaps(out->tensor, *cur);
      if (!writes_cur) {
        // A step between that reads or writes the chain's bytes: leave the chain alone.
        if (std::any_of(written.begin(), written.end(),
                        [&](const TensorView* t) { return step_touches(w, *t); }))
          break;
        continue;
      }
      // Its out must be cur's bytes exactly (a view of them at most), in the chain's dtype.
      if (!plain(out) || out->tensor.data != cur->data || out->tensor.numel() != cur->numel())
        break;
      if (const std::optional<int64_t> p = panel_source(w, k, n);
          p && !transposed && zero == nullptr && scale == nullptr && chain.empty()) {
        // A weight in panels of the product's dtype, multiplied as it is.
        if (wd == DType::kFloat32) {
          f32 = w.args[0]->tensor.data_as<const float>();
        } else {
          bits16 = w.args[0]->tensor.data_as<const uint16_t>();
        }
        panel = *p;
        shape = {k, n};
      } else if (w.calls(OpKind::Permute) && w.args.size() == 4 && !transposed && zero == nullptr &&
                 scale == nullptr && w.args[1]->kind == Value::Kind::kIntList &&
                 w.args[1]->ints == std::vector<int64_t>{1, 0} && plain(w.args[0]) &&
                 w.args[0]->tensor.rank() == 2) {
        transposed = true;
        cur = &w.args[0]->tensor;
      } else if (w.calls(OpKind::MulTensor) && w.args.size() == 4 && scale == nullptr &&
                 zero == nullptr) {
        const bool first = constant_arg(w, 1) && plain(w.args[0]);
        const bool second = constant_arg(w, 0) && plain(w.args[1]);
        if (first == second || !w.args[0]->is_tensor() || !w.args[1]->is_tensor()) break;
        scale = &w.args[first ? 1 : 0]->tensor;
        cur = &w.args[first ? 0 : 1]->tensor;
        if (scale->dtype != wd || cur->sizes != out->tensor.sizes) break;
      } else if (w.calls(OpKind::SubTensor) && w.args.size() == 5 && zero == nullptr &&
                 plain(w.args[0]) && w.args[1]->is_tensor() && w.args[1]->tensor.dtype == wd &&
                 w.args[2]->is_scalar() && w.args[2]->scalar_as_double() == 1.0 &&
                 w.args[0]->tensor.sizes == out->tensor.sizes) {
        zero = &w.args[1]->tensor;
        if (!constant_arg(w, 1)) {
          // A zero point the program widens from int8 itself (too large for the export to
          // fold): its _to_copy joins the chain.
          const std::optional<size_t> widen = widened_int8(j, *zero);
          if (!widen || !plain(w.args[1])) break;
          const MethodStep& cast = steps()[*widen];
          const TensorView& values = cast.args[0]->tensor;
          if (constant_arg(cast, 0)) {
            zero_i8 = values.data_as<const int8_t>();
          } else {
            // Unpacked from 4-bit values.
            const std::optional<size_t> from = unpacked_int4(*widen, values);
            if (!from || steps()[*from].args[1]->i <= 0) break;
            zero_i4 = steps()[*from].args[0]->tensor.data_as<const uint8_t>();
            zero_i4_size = steps()[*from].args[1]->i;
            chain.push_back(*from);
            written.push_back(&values);
          }
          chain.push_back(*widen);
          written.push_back(zero);
        }
        cur = &w.args[0]->tensor;
      } else if (w.calls(OpKind::ToCopy) && w.args[0]->is_tensor() &&
                 w.args[0]->tensor.dtype == DType::kInt8 && w.args[0]->tensor.data != nullptr &&
                 w.args[0]->tensor.sizes == out->tensor.sizes) {
        const std::optional<size_t> from =
            constant_arg(w, 0) ? std::nullopt : last_writer(j, w.args[0]->tensor);
        const std::optional<int64_t> p = from ? panel_source(steps()[*from], k, n) : std::nullopt;
        if (!constant_arg(w, 0) && p) {
          // Int8 values in panels (the weight the program permutes them back from): no zero
          // point or scale between (the in-place paths' form).
          if (zero != nullptr || scale != nullptr || transposed || is_io(w.args[0])) break;
          panel = *p;
          chain.push_back(*from);
          written.push_back(&w.args[0]->tensor);
        } else if (!constant_arg(w, 0)) {
          // Int8 values a step unpacked from a constant's nibbles: that step joins the chain,
          // and the product reads the nibbles.
          const std::optional<size_t> unpacked = unpacked_int4(j, w.args[0]->tensor);
          if (!unpacked || is_io(w.args[0])) break;
          unpack = &steps()[*unpacked];
          chain.push_back(*unpacked);
          written.push_back(&w.args[0]->tensor);
        }
        q = panel > 0 ? &steps()[*from].args[0]->tensor : &w.args[0]->tensor;
        shape = w.args[0]->tensor.sizes;
      } else {
        break;
      }
      chain.push_back(j);
      written.push_back(&out->tensor);
    }
    if (bits16 == nullptr && f32 == nullptr && (q == nullptr || q->numel() != k * n)) continue;
    // The chain's elementwise values in row-major order are B (k, n) or, transposed, B^T (n, k).
    const int64_t outer = transposed ? n : k;
    size_t split = 0;
    for (int64_t p = 1; split < shape.size() && p != outer; ++split)
      p *= shape[split];
    int64_t prefix = 1;
    for (size_t d = 0; d < split; ++d)
      prefix *= shape[d];
    if (prefix != outer) continue;
    DequantB d;
    d.q_n = transposed ? k : 1;
    d.q_k = transposed ? 1 : n;
    if (unpack != nullptr) {
      // The weight's [N, K] layout only (row n of the values is B's column n), packed in rows
      // of K values, or in rows of any even length (then the values are packed end to end:
      // row n starts at byte n * K / 2 when K is even).
      const TensorView& packed = unpack->args[0]->tensor;
      const int64_t size = unpack->args[1]->i;
      if (!transposed || !(size == k || (size % 2 == 0 && k % 2 == 0))) continue;
      d.q4 = packed.data_as<const uint8_t>();
      d.q4_row = int4::row_bytes(k);
    } else if (bits16 != nullptr) {
      d.bits16 = bits16;
      d.float16 = wd == DType::kFloat16;
    } else if (f32 != nullptr) {
      d.f32 = f32;
    } else {
      d.q = q->data_as<const int8_t>();
    }
    if (panel > 0) {
      d.q_k = panel;
      d.panel = panel;
      d.panel_stride = k * panel;
    }
    auto state = std::make_unique<DequantizedWeight>();
    // A bf16/fp16 chain rounds each step's values to its dtype. The widening of int8 values
    // is exact there, and so is the subtraction of a zero point when the zero points are
    // integers of at most 128 in magnitude (|q - z| <= 256 has 8 significant bits): the
    // values need rounding after the last step only, which the packing does. A float zero
    // point of another kind leaves the chain unfused.
    // Whether every value the chain computes is finite and zero or normal (integers times
    // finite scales that are 0 or at least FLT_MIN, finite zero points), which lets the
    // packing use the CPU's bf16 conversion (DequantB::normal_values): checked below as the
    // 16-bit operands are widened.
    if (wd != DType::kFloat32) {
      d.round16 =
          wd == DType::kBFloat16 ? DequantB::Round16::kBFloat16 : DequantB::Round16::kFloat16;
      d.normal_values = true;
    }
    bool ok = true;
    d.integer_zero = true;  // int8 and 4-bit zero points, and the 16-bit chains' (checked below)
    for (auto [operand, to] : {std::pair{zero, &d.zero}, std::pair{scale, &d.scale}}) {
      if (operand == nullptr) continue;
      const std::optional<SplitOperand> so = split_operand(*operand, shape, split);
      if (!so) {
        ok = false;
        break;
      }
      if (operand == zero && zero_i8 != nullptr && operand->numel() * 8 <= k * n) {
        // Widened once (exact), where that is small beside the weight: the products read
        // float zero points a vector at a time (int8 ones a value at a time).
        state->zero_f32.assign(zero_i8, zero_i8 + operand->numel());
        to->data = state->zero_f32.data();
      } else if (operand == zero && zero_i8 != nullptr) {
        to->data_i8 = zero_i8;
      } else if (operand == zero && zero_i4 != nullptr) {
        to->data_i4 = zero_i4;
        to->i4_size = zero_i4_size;
      } else if (wd == DType::kFloat32) {
        to->data = operand->data_as<const float>();
        for (int64_t e = 0; operand == zero && e < operand->numel(); ++e) {
          const float v = to->data[e];
          d.integer_zero = d.integer_zero && v == std::nearbyint(v) && std::fabs(v) <= 1048576.0f;
        }
      } else {
        // The 16-bit constant widened once, exactly.
        std::vector<float>& wide = operand == zero ? state->zero_f32 : state->scale_f32;
        wide.resize(static_cast<size_t>(operand->numel()));
        for (int64_t e = 0; e < operand->numel(); ++e) {
          const uint16_t bits = operand->data_as<const uint16_t>()[e];
          wide[static_cast<size_t>(e)] =
              wd == DType::kBFloat16 ? bfloat16_to_float(bits) : half_to_float(bits);
          const float v = wide[static_cast<size_t>(e)];
          if (operand == zero && !(v == std::nearbyint(v) && std::fabs(v) <= 128.0f)) ok = false;
          d.normal_values =
              d.normal_values && std::isfinite(v) &&
              (operand == zero || v == 0.0f || std::fabs(v) >= std::numeric_limits<float>::min());
        }
        to->data = wide.data();
      }
      // outer: n when transposed, else k.
      to->n_stride = transposed ? so->outer_stride : so->inner_stride;
      to->n_group = transposed ? so->outer_group : so->inner_group;
      to->k_stride = transposed ? so->inner_stride : so->outer_stride;
      to->k_group = transposed ? so->inner_group : so->outer_group;
    }
    // No step between the chain's first and the product, but the chain's, touches what the
    // chain would have written; none after the product reads it (the product's own out,
    // written at i, may take some of its bytes).
    const size_t first = *std::min_element(chain.begin(), chain.end());
    for (size_t j = first; j < i && ok; ++j) {
      if (std::find(chain.begin(), chain.end(), j) != chain.end()) continue;
      for (const TensorView* t : written)
        ok = ok && !step_touches(steps()[j], *t);
    }
    for (const TensorView* t : written) {
      ok = ok && unread_after(i, *t, &mm.args[iout]->tensor);
      // Nor the product's other operands (an addmm's bias): they would read what the chain
      // no longer writes.
      for (size_t arg = 0; arg < mm.args.size(); ++arg) {
        const Value* v = mm.args[arg];
        const bool own = arg == ib || arg == iout || arg + 1 == mm.args.size();
        ok = ok && (own || !arg_overlaps(v, *t));
      }
    }
    if (!ok) continue;
    state->b = b.data;
    state->k = k;
    state->n = n;
    state->dequant = d;
    arrange_row_operands(state->dequant, k, n, state->zero_lanes, state->scale_lanes);
    if (d.q4 != nullptr && wd == DType::kFloat32) {
      // An 8da4w product: the left operand's dequantization joins too, and the product runs
      // in integers (gemm_int8x4.h), where its weight fits that kernel.
      std::vector<size_t> rows_chain;
      std::optional<DequantizedWeight::QuantizedRows> rows;
      for (const bool widen_zero : {true, false}) {
        if (rows) break;
        rows = quantized_rows(i, ia, ib, iout, chain, widen_zero, rows_chain);
      }
      std::optional<Int4Weight> int4 = rows ? prepare_int4_weight(d, k, n) : std::nullopt;
      if (int4) {
        state->quantized_rows = rows;
        state->int4 = std::move(int4);
        chain.insert(chain.end(), rows_chain.begin(), rows_chain.end());
      }
    }
    mm.state = std::move(state);
    std::sort(chain.begin(), chain.end());
    for (size_t j : chain) {
      steps()[j].fused = true;
      mm.fused_names += " + " + steps()[j].name;
    }
  }
}

std::optional<DequantizedWeight::QuantizedRows> CpuPlanner::quantized_rows(
    size_t i, size_t ia, size_t ib, size_t iout, const std::vector<size_t>& skipped,
    bool widen_zero, std::vector<size_t>& chain) const {
  const MethodStep& product = steps()[i];
  const TensorView& a = product.args[ia]->tensor;
  const TensorView& out = product.args[iout]->tensor;
  if (a.dtype != DType::kFloat32 || a.rank() != 2) return std::nullopt;
  const int64_t rows = a.sizes[0], k = a.sizes[1];
  // mul: the chain's values times a scale per row.
  const std::optional<size_t> mul_at = last_writer(i, a);
  if (!mul_at) return std::nullopt;
  const MethodStep& mul = steps()[*mul_at];
  if (!mul.calls(OpKind::MulTensor) || mul.args.size() != 4 || !mul.args[0]->is_tensor() ||
      !mul.args[1]->is_tensor())
    return std::nullopt;
  const std::vector<int64_t>& shape = mul.args[3]->tensor.sizes;
  if (shape.empty() || shape.back() != k || mul.args[3]->tensor.numel() != rows * k)
    return std::nullopt;
  const size_t side = mul.args[0]->tensor.sizes == shape ? 0 : 1;
  if (mul.args[side]->tensor.sizes != shape) return std::nullopt;  // an outer product
  // A per-row operand: one value per row (or one for all), the same along k.
  auto per_row = [&](const Value* v, int64_t& stride, int64_t& group) {
    if (!v->is_tensor() || v->tensor.dtype != DType::kFloat32 || v->tensor.data == nullptr ||
        is_io(v))
      return false;
    const std::optional<SplitOperand> so = split_operand(v->tensor, shape, shape.size() - 1);
    if (!so || so->inner_stride != 0) return false;
    stride = so->outer_stride;
    group = so->outer_group;
    return true;
  };
  DequantizedWeight::QuantizedRows q;
  q.rows = rows;
  const Value* sx = mul.args[1 - side];
  if (!per_row(sx, q.scale_stride, q.scale_group)) return std::nullopt;
  q.scale = sx->tensor.data_as<const float>();
  // Each value the chain reads, with the step that reads it; each out it writes.
  std::vector<std::pair<const Value*, size_t>> inputs{{sx, *mul_at}};
  std::vector<const Value*> outs{mul.args[3]};
  chain.assign({*mul_at});
  const TensorView* cur = &mul.args[side]->tensor;
  size_t at = *mul_at;
  // [sub: the values less a zero point per row]
  if (const std::optional<size_t> sub_at = last_writer(at, *cur)) {
    const MethodStep& sub = steps()[*sub_at];
    if (sub.calls(OpKind::SubTensor) && sub.args.size() == 5 && sub.args[0]->is_tensor() &&
        sub.args[0]->tensor.sizes == shape && sub.args[2]->is_scalar() &&
        sub.args[2]->scalar_as_double() == 1.0) {
      const Value* zx = sub.args[1];
      if (!per_row(zx, q.zero_stride, q.zero_group)) return std::nullopt;
      q.zero = zx->tensor.data_as<const float>();
      inputs.emplace_back(zx, *sub_at);
      outs.push_back(sub.args[4]);
      chain.push_back(*sub_at);
      // The zero points the program widens from int8 itself (its _to_copy's out may lie
      // over the int8 rows, dead in the program by then): that step joins too, and the
      // product reads the int8 values.
      const std::optional<size_t> widen =
          widen_zero ? widened_int8(*sub_at, zx->tensor) : std::nullopt;
      if (widen) {
        const Value* zi = steps()[*widen].args[0];
        if (is_io(zi)) return std::nullopt;
        q.zero = nullptr;
        q.zero_i8 = zi->tensor.data_as<const int8_t>();
        inputs.back() = {zi, *widen};
        outs.push_back(zx);
        chain.push_back(*widen);
      }
      cur = &sub.args[0]->tensor;
      at = *sub_at;
    }
  }
  // _to_copy: the int8 rows widened.
  const std::optional<size_t> cast_at = widened_int8(at, *cur);
  if (!cast_at) return std::nullopt;
  const MethodStep& cast = steps()[*cast_at];
  const Value* qx = cast.args[0];
  if (is_io(qx) || qx->tensor.numel() != rows * k) return std::nullopt;
  q.q = qx->tensor.data_as<const int8_t>();
  inputs.emplace_back(qx, *cast_at);
  outs.push_back(cast.args.back());
  chain.push_back(*cast_at);
  auto runs = [&](size_t j) {
    return std::find(chain.begin(), chain.end(), j) == chain.end() &&
           std::find(skipped.begin(), skipped.end(), j) == skipped.end();
  };
  // The outs: float32 planned memory, no step but the chain's between touching them, nothing
  // after the product reading them, nor the product's other operands (an addmm's bias: the
  // weight's chain is skipped too, its out not read).
  for (const Value* o : outs) {
    const TensorView& t = o->tensor;
    if (t.dtype != DType::kFloat32 || t.capacity >= 0 || t.data == nullptr || !t.device.is_cpu() ||
        is_io(o) || !unread_after(i, t, &out))
      return std::nullopt;
    for (size_t j = *cast_at; j < i; ++j) {
      if (runs(j) && step_touches(steps()[j], t)) return std::nullopt;
    }
    for (size_t arg = 0; arg < product.args.size(); ++arg) {
      const bool own = arg == ia || arg == ib || arg == iout || arg + 1 == product.args.size();
      if (!own && arg_overlaps(product.args[arg], t)) return std::nullopt;
    }
  }
  // The inputs: left as they are from their reader to the product (which reads them all
  // before it writes its out, which may lie over them).
  for (const auto& [v, reader] : inputs) {
    for (size_t j = reader + 1; j < i; ++j) {
      if (runs(j) && step_touches(steps()[j], v->tensor)) return std::nullopt;
    }
  }
  return q;
}

}  // namespace etc::rt::kernels::load_plan_detail
