#include "runtime/kernels/load_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

#include "graph/int4.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/conv_algorithm.h"
#include "runtime/kernels/fused_attention.h"
#include "runtime/kernels/weight_only.h"
#include "support/half.h"

namespace etc::rt::kernels {
namespace {

// Whether two tensors' bytes may share memory. Addresses compare as integers: a tensor the
// caller binds before execute (an unplanned input or output) has no data yet, and an offset
// from a null pointer is undefined. Such a tensor is the caller's memory, which never lies in
// a planned buffer; two of them may be the same buffer, which their equal null addresses say.
bool overlaps(const TensorView& a, const TensorView& b) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data);
  return a0 < b0 + static_cast<std::uintptr_t>(b.nbytes()) &&
         b0 < a0 + static_cast<std::uintptr_t>(a.nbytes());
}

// Whether argument v (a tensor, or each tensor of a list: cat's items, split's outs) has
// bytes in common with t.
bool arg_overlaps(const Value* v, const TensorView& t) {
  auto hit = [&t](const TensorView* u) {
    return u != nullptr && u->data != nullptr && u->nbytes() > 0 && overlaps(*u, t);
  };
  if (v->is_tensor()) return hit(&v->tensor);
  return std::any_of(v->tensors.begin(), v->tensors.end(), hit);
}

// Whether any argument of step s has bytes in common with t.
bool step_touches(const MethodStep& s, const TensorView& t) {
  return std::any_of(s.args.begin(), s.args.end(),
                     [&t](const Value* v) { return arg_overlaps(v, t); });
}

// One elementwise instruction read as an epilogue op: its operands (tensors or a scalar), its
// bounds, its out. Only float32 arithmetic with alpha 1, whose kernels round once per
// element, so that the epilogue's arithmetic is the kernel's.
struct ElementwiseStep {
  Epilogue::Op::Kind kind;
  const Value* a = nullptr;
  const Value* b = nullptr;  // null: scalar
  float scalar = 0, lo = 0, hi = 0;
  const Value* out = nullptr;
};

std::optional<ElementwiseStep> read_elementwise(const MethodStep& s) {
  using Kind = Epilogue::Op::Kind;
  const float inf = std::numeric_limits<float>::infinity();
  auto scalar = [](const Value* v) -> std::optional<float> {
    if (!v->is_scalar()) return std::nullopt;
    return static_cast<float>(v->scalar_as_double());
  };
  auto alpha_one = [](const Value* v) { return v->is_scalar() && v->scalar_as_double() == 1.0; };
  std::span<Value* const> args = s.args;
  ElementwiseStep e{Kind::kClamp};
  if (s.calls(OpKind::Relu) && args.size() >= 2) {
    e = {Kind::kClamp, args[0], nullptr, 0, 0.0f, inf, args[1]};
  } else if (s.calls(OpKind::Sigmoid) && args.size() >= 2) {
    e = {Kind::kSigmoid, args[0], nullptr, 0, 0, 0, args[1]};
  } else if (s.calls(OpKind::Gelu) && args.size() >= 3) {
    // gelu.out(self, approximate, out): the erf form only.
    if (args[1]->kind != Value::Kind::kString || args[1]->s != "none") return std::nullopt;
    e = {Kind::kGeluErf, args[0], nullptr, 0, 0, 0, args[2]};
  } else if ((s.calls(OpKind::Hardtanh) || s.calls(OpKind::Clamp)) && args.size() >= 4) {
    const bool hardtanh = s.calls(OpKind::Hardtanh);
    if (hardtanh && (args[1]->is_none() || args[2]->is_none())) return std::nullopt;
    const std::optional<float> lo = args[1]->is_none() ? -inf : scalar(args[1]);
    const std::optional<float> hi = args[2]->is_none() ? inf : scalar(args[2]);
    if (!lo || !hi) return std::nullopt;
    e = {Kind::kClamp, args[0], nullptr, 0, *lo, *hi, args[3]};
  } else {
    // The binary ops: their epilogue kind, and whether they take alpha (which must be 1).
    struct Binary {
      OpKind op;
      Kind kind;
      bool has_alpha;
    };
    static constexpr Binary kBinary[] = {
        {OpKind::AddTensor, Kind::kAdd, true},  {OpKind::SubTensor, Kind::kSub, true},
        {OpKind::MulTensor, Kind::kMul, false}, {OpKind::DivTensor, Kind::kDiv, false},
        {OpKind::AddScalar, Kind::kAdd, true},  {OpKind::SubScalar, Kind::kSub, true},
        {OpKind::MulScalar, Kind::kMul, false}, {OpKind::DivScalar, Kind::kDiv, false}};
    const Binary* it = std::find_if(std::begin(kBinary), std::end(kBinary),
                                    [&](const Binary& bin) { return s.calls(bin.op); });
    if (it == std::end(kBinary)) return std::nullopt;
    const size_t out_at = it->has_alpha ? 3 : 2;
    if (args.size() <= out_at || (it->has_alpha && !alpha_one(args[2]))) return std::nullopt;
    e = {it->kind, args[0], nullptr, 0, 0, 0, args[out_at]};
    if (args[1]->is_tensor()) {
      e.b = args[1];
    } else {
      const std::optional<float> sc = scalar(args[1]);
      if (!sc) return std::nullopt;
      e.scalar = *sc;
    }
  }
  if (!e.a->is_tensor() || !e.out->is_tensor()) return std::nullopt;
  return e;
}

// The planner over one method.
class CpuPlanner {
 public:
  explicit CpuPlanner(LoadPlanView& m) : m_(m) {}
  void run() {
    find_unread_outs();  // before plan_channels_last, which keeps pools without indices
    if (!m_.fuse) return;
    fuse_dequantized_weights();  // before fuse_epilogues: the products' epilogues after
    fuse_attention();
    fuse_epilogues();
    if (onednn_conv_enabled()) plan_channels_last();
  }

 private:
  std::vector<MethodStep>& steps() { return m_.steps; }
  const std::vector<MethodStep>& steps() const { return m_.steps; }
  const std::vector<Value>& values() const { return m_.values; }
  // Per value: whether it is a method input or output (the caller may rebind its memory).
  std::vector<bool> io_values() const;
  // Whether u is among the outs kernel step s writes after its reads: its return value, or a
  // tensor of a returned list (max pooling's values and indices).
  static bool writes(const MethodStep& s, const Value* u);
  // Whether no step after `after` reads bytes of `t` before a kernel writes all of them anew,
  // and no method output lies over them (jumps and moves: false). Bytes of `rewritten` (step
  // `after`'s out) count as written anew at `after`.
  bool unread_after(size_t after, const TensorView& t, const TensorView* rewritten = nullptr) const;
  // Marks the outs nothing reads (KernelContext::unread_outs).
  void find_unread_outs();
  // Gives a matrix product (mm) whose right operand the steps before it dequantize from an
  // int8 constant those steps (weight_only.h), and marks them fused.
  void fuse_dequantized_weights();
  // The step before `before` that touches t's bytes last, if it writes exactly them (t's
  // dtype, a view at most) and no step between reads or writes them otherwise.
  std::optional<size_t> last_writer(size_t before, const TensorView& t) const;
  // The step before `before` that writes t: a _to_copy of int8 values of t's shape into
  // exactly t's bytes (a float dtype), with no step between touching t. nullopt otherwise.
  std::optional<size_t> widened_int8(size_t before, const TensorView& t) const;
  // The step before `before` that writes t: an etc::unpack_int4 of a uint8 constant into
  // exactly t's bytes (int8), with no step between touching t. nullopt otherwise.
  std::optional<size_t> unpacked_int4(size_t before, const TensorView& t) const;
  // The steps before product step i that dequantize its left operand (argument ia, [rows, k])
  // from int8 rows the program quantized at run time: _to_copy of the int8 values, [sub of a
  // zero point per row], mul by a scale per row (ExecuTorch's 8da4w), each out read by the
  // next step alone, by nothing after the product and by none of the product's other
  // arguments but its weight (ib, skipped too) and out (iout); the int8 values, zero points
  // and scales left as they are until step i but for the steps in `skipped`, which will not
  // run. The steps into `chain`. With `widen_zero`, a _to_copy that widens the zero points
  // from int8 joins too.
  std::optional<DequantizedWeight::QuantizedRows> quantized_rows(size_t i, size_t ia, size_t ib,
                                                                 size_t iout,
                                                                 const std::vector<size_t>& skipped,
                                                                 bool widen_zero,
                                                                 std::vector<size_t>& chain) const;
  // Gives a bmm(Q, K^T) followed by mul.Scalar, a last-dim _softmax and bmm(., V), whose
  // scores nothing else reads, the whole attention (fused_attention.h).
  void fuse_attention();
  // Gives convolutions, matrix products (mm) and batch norms the in-place elementwise
  // instructions right after them as their epilogue; a matrix product's may add a broadcast
  // row (a bias).
  void fuse_epilogues();
  // Keeps the tensors that only convolutions running on oneDNN read (and their epilogues)
  // channels-last between those convolutions, instead of copying each to NHWC and back
  // (KernelContext::channels_last_args). After fuse_epilogues.
  void plan_channels_last();

  LoadPlanView& m_;
};

}  // namespace

std::vector<bool> CpuPlanner::io_values() const {
  std::vector<bool> io(values().size(), false);
  for (size_t v : m_.inputs)
    io[v] = true;
  for (size_t v : m_.outputs)
    io[v] = true;
  return io;
}

bool CpuPlanner::writes(const MethodStep& s, const Value* u) {
  if (s.kind != StepKind::kKernel || s.args.empty()) return false;
  const Value* ret = s.args.back();
  return u == ret ||
         std::find(ret->tensors.begin(), ret->tensors.end(), &u->tensor) != ret->tensors.end();
}

bool CpuPlanner::unread_after(size_t after, const TensorView& t,
                              const TensorView* rewritten) const {
  if (t.data == nullptr || t.nbytes() == 0) return false;
  // The bytes of t not yet written anew, as [begin, end) ranges.
  using Range = std::pair<const char*, const char*>;
  auto range = [](const TensorView& v) {
    const auto* v0 = static_cast<const char*>(v.data);
    return Range{v0, v0 + v.nbytes()};
  };
  std::vector<Range> live{range(t)};
  auto touches = [&live](const Range& r) {
    return std::any_of(live.begin(), live.end(),
                       [&r](const Range& l) { return r.first < l.second && l.first < r.second; });
  };
  auto written = [&live](const Range& r) {
    std::vector<Range> rest;
    for (const Range& l : live) {
      if (r.second <= l.first || l.second <= r.first) {
        rest.push_back(l);
        continue;
      }
      if (l.first < r.first) rest.emplace_back(l.first, r.first);
      if (r.second < l.second) rest.emplace_back(r.second, l.second);
    }
    live = std::move(rest);
  };
  if (rewritten != nullptr && rewritten->data != nullptr) written(range(*rewritten));
  if (live.empty()) return true;
  for (size_t j = after + 1; j < steps().size(); ++j) {
    const MethodStep& s = steps()[j];
    if (s.kind == StepKind::kJumpFalse || s.kind == StepKind::kMove) return false;
    // A kernel's outs: its return value, or the tensors of a returned list, written after its
    // reads. Any other argument over the live bytes (an input, a list item, a delegate's
    // argument) reads them.
    const bool kernel = s.kind == StepKind::kKernel && !s.args.empty();
    std::vector<Range> outs;
    for (const Value* u : s.args) {
      const bool outs_list = kernel && u == s.args.back() && !u->is_tensor();
      for (const TensorView* v : u->tensors) {
        if (v == nullptr || v->data == nullptr || v->nbytes() == 0) continue;
        if (outs_list) {
          outs.push_back(range(*v));
        } else if (touches(range(*v))) {
          return false;
        }
      }
      if (!u->is_tensor() || u->tensor.data == nullptr || u->tensor.nbytes() == 0) continue;
      if (writes(s, u)) {
        outs.push_back(range(u->tensor));
      } else if (touches(range(u->tensor))) {
        return false;
      }
    }
    for (const Range& r : outs)
      written(r);
    if (live.empty()) return true;
  }
  for (size_t k : m_.outputs) {
    if (values()[k].is_tensor() && values()[k].tensor.data != nullptr &&
        values()[k].tensor.nbytes() > 0 && touches(range(values()[k].tensor)))
      return false;
  }
  return true;
}

void CpuPlanner::find_unread_outs() {
  // Only max_pool2d_with_indices' indices (argument 7): a program that pools for inference
  // never reads them, and they cost as much as the pooling.
  const std::vector<bool> io = io_values();
  for (size_t i = 0; i < steps().size(); ++i) {
    MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || !s.calls(OpKind::MaxPool2dWithIndices) ||
        s.args.size() < 8 || !s.args[7]->is_tensor())
      continue;
    const Value* indices = s.args[7];
    if (io[static_cast<size_t>(indices - values().data())] || indices->tensor.data == nullptr)
      continue;
    // Read: any other instruction naming it, or an int64 tensor over its bytes (a view). An
    // out another kernel writes there does not read it: the plan gives every pooling's
    // indices, dead as soon as they are written, the same bytes (googlenet's 13 pools each
    // computed indices for that alone, 40% of its time).
    bool read = false;
    for (size_t j = 0; j < steps().size() && !read; ++j) {
      if (j == i) continue;
      const MethodStep& other = steps()[j];
      for (size_t k = 0; k < other.args.size(); ++k) {
        const Value* a = other.args[k];
        const bool is_kernel = other.kind == StepKind::kKernel;
        if (is_kernel && k + 1 == other.args.size()) continue;  // the return value: its outs
        const OpSchema* schema = other.schema();
        if (is_kernel && schema != nullptr && k < schema->args.size() && schema->args[k].is_out)
          continue;  // written, not read (an input in another position is still seen)
        auto over = [&](const TensorView* t) {
          return t != nullptr && t->dtype == DType::kInt64 && t->data != nullptr &&
                 overlaps(*t, indices->tensor);
        };
        const bool same = a == indices;
        bool alias = a->is_tensor() && over(&a->tensor);
        if (!a->is_tensor()) {
          for (const TensorView* t : a->tensors)
            alias = alias || over(t);  // a list's tensors (cat of the indices)
        }
        if (same || alias) {
          read = true;
          break;
        }
      }
    }
    if (!read) s.unread_outs |= uint64_t{1} << 7;
  }
}

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

std::optional<size_t> CpuPlanner::last_writer(size_t before, const TensorView& t) const {
  for (size_t j = before; j-- > 0;) {
    const MethodStep& w = steps()[j];
    if (w.kind != StepKind::kKernel || w.fused || w.args.empty()) return std::nullopt;
    if (!step_touches(w, t)) continue;
    const Value* out = w.args.back();
    const bool writes = out->is_tensor() && out->tensor.data == t.data &&
                        out->tensor.numel() == t.numel() && out->tensor.dtype == t.dtype;
    return writes ? std::optional<size_t>(j) : std::nullopt;
  }
  return std::nullopt;
}

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

void CpuPlanner::fuse_dequantized_weights() {
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse || s.kind == StepKind::kMove) return;
  }
  const std::vector<bool> io = io_values();
  // The chain's dtype: float32, or a bf16/fp16 model's (each step rounded to it).
  DType wd = DType::kFloat32;
  auto plain = [&](const Value* v) {
    return v->is_tensor() && v->tensor.dtype == wd && v->tensor.capacity < 0 &&
           v->tensor.data != nullptr && v->tensor.device.is_cpu() &&
           !io[static_cast<size_t>(v - values().data())];
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
    const MethodStep* unpack = nullptr;  // the step that unpacked q from 4-bit values, if one
    const int8_t* zero_i8 = nullptr;     // the zero point's int8 values, widened by a step
    const uint8_t* zero_i4 = nullptr;    // or its 4-bit values, unpacked and widened by steps
    int64_t zero_i4_size = 0;
    std::vector<int64_t> shape;  // the elementwise steps' shape (q's)
    for (size_t j = i; j-- > 0 && q == nullptr;) {
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
      if (w.calls(OpKind::Permute) && w.args.size() == 4 && !transposed && zero == nullptr &&
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
        if (!constant_arg(w, 0)) {
          // Int8 values a step unpacked from a constant's nibbles: that step joins the chain,
          // and the product reads the nibbles.
          const std::optional<size_t> from = unpacked_int4(j, w.args[0]->tensor);
          if (!from || io[static_cast<size_t>(w.args[0] - values().data())]) break;
          unpack = &steps()[*from];
          chain.push_back(*from);
          written.push_back(&w.args[0]->tensor);
        }
        q = &w.args[0]->tensor;
        shape = q->sizes;
      } else {
        break;
      }
      chain.push_back(j);
      written.push_back(&out->tensor);
    }
    if (q == nullptr || q->numel() != k * n) continue;
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
    } else {
      d.q = q->data_as<const int8_t>();
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
  const std::vector<bool> io = io_values();
  auto io_value = [&](const Value* v) { return io[static_cast<size_t>(v - values().data())]; };
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
        io_value(v))
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
        if (io_value(zi)) return std::nullopt;
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
  if (io_value(qx) || qx->tensor.numel() != rows * k) return std::nullopt;
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
        io_value(o) || !unread_after(i, t, &out))
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

void CpuPlanner::fuse_attention() {
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse) return;
  }
  const std::vector<bool> io = io_values();
  auto usable = [&](const Value* v, size_t rank) {
    const TensorView& t = v->tensor;
    return v->is_tensor() && t.dtype == DType::kFloat32 && t.rank() == rank && t.capacity < 0 &&
           t.data != nullptr && t.device.is_cpu() && t.numel() > 0;
  };
  auto io_value = [&](const Value* v) { return io[static_cast<size_t>(v - values().data())]; };
  // The same bytes read as another view (the scores [B, L, S] as [b, h, L, S]).
  auto same = [](const Value* a, const Value* b) {
    return a->tensor.data == b->tensor.data && a->tensor.numel() == b->tensor.numel();
  };
  for (size_t i = 0; i + 3 < steps().size(); ++i) {
    MethodStep& qk = steps()[i];
    const MethodStep& scale = steps()[i + 1];
    const MethodStep& softmax = steps()[i + 2];
    const MethodStep& pv = steps()[i + 3];
    // bmm.out(self, mat2, out), mul.Scalar_out(self, other, out), _softmax.out(self, dim,
    // half_to_float, out), bmm.out(self, mat2, out); each with its return value after.
    if (!qk.calls(OpKind::Bmm) || !scale.calls(OpKind::MulScalar) ||
        !softmax.calls(OpKind::Softmax) || !pv.calls(OpKind::Bmm) || qk.args.size() < 3 ||
        scale.args.size() < 3 || softmax.args.size() < 4 || pv.args.size() < 3 || qk.fused ||
        qk.state != nullptr || scale.fused || softmax.fused || pv.fused || pv.state != nullptr)
      continue;
    const Value *q = qk.args[0], *kt = qk.args[1], *s1 = qk.args[2];
    const Value *s2 = scale.args[2], *p = softmax.args[3], *v = pv.args[1], *o = pv.args[2];
    if (!usable(q, 3) || !usable(kt, 3) || !usable(s1, 3) || !usable(v, 3) || !usable(o, 3) ||
        !usable(pv.args[0], 3) || !scale.args[0]->is_tensor() || !s2->is_tensor() ||
        !softmax.args[0]->is_tensor() || !p->is_tensor() || !same(scale.args[0], s1) ||
        !same(softmax.args[0], s2) || !same(pv.args[0], p) || s2->tensor.dtype != DType::kFloat32 ||
        p->tensor.dtype != DType::kFloat32)
      continue;
    const Value* factor = scale.args[1];
    const Value* dim = softmax.args[1];
    const Value* half_to_float = softmax.args[2];
    const TensorView& sm_in = softmax.args[0]->tensor;
    const int64_t rank = static_cast<int64_t>(sm_in.rank());
    if (!factor->is_scalar() || dim->kind != Value::Kind::kInt ||
        (dim->i != -1 && dim->i != rank - 1) || half_to_float->kind != Value::Kind::kBool ||
        half_to_float->b || rank < 1)
      continue;
    const int64_t batch = q->tensor.sizes[0], l = q->tensor.sizes[1], e = q->tensor.sizes[2];
    const int64_t len = kt->tensor.sizes[2];
    if (kt->tensor.sizes != std::vector<int64_t>{batch, e, len} || sm_in.sizes.back() != len ||
        pv.args[0]->tensor.sizes != std::vector<int64_t>{batch, l, len} ||
        v->tensor.sizes[0] != batch || v->tensor.sizes[1] != len ||
        o->tensor.sizes != std::vector<int64_t>{batch, l, v->tensor.sizes[2]})
      continue;
    // The scores are the kernel's alone: no method input or output, nothing reads them after.
    if (io_value(s1) || io_value(s2) || io_value(p) || io_value(o) ||
        !unread_after(i + 3, s1->tensor, &o->tensor) ||
        !unread_after(i + 3, s2->tensor, &o->tensor) || !unread_after(i + 3, p->tensor, &o->tensor))
      continue;
    // The out is written block by block while Q, K^T and V are still read.
    if (overlaps(o->tensor, q->tensor) || overlaps(o->tensor, kt->tensor) ||
        overlaps(o->tensor, v->tensor))
      continue;
    auto state = std::make_unique<FusedAttention>();
    state->scale = static_cast<float>(factor->scalar_as_double());
    state->v = &v->tensor;
    state->out = &o->tensor;
    qk.state = std::move(state);
    for (size_t j = i + 1; j <= i + 3; ++j) {
      steps()[j].fused = true;
      qk.fused_names += " + " + steps()[j].name;
    }
    i += 3;
  }
}

void CpuPlanner::fuse_epilogues() {
  // A jump could land between a kernel and the instructions fused into it.
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse) return;
  }
  // Method inputs and outputs may be rebound to caller memory: never part of a chain.
  const std::vector<bool> io = io_values();
  // A matrix product's out is read through views of other shapes (mm's [24, 384] as [1, 24,
  // 384]): there the operands need the out's element count only (planned tensors are
  // contiguous), and a row of the out's last dim may be broadcast (the bias of a linear
  // layer). A convolution's need its shape.
  bool by_count = false;
  auto plain = [&](const Value* v, const TensorView& like) {
    const TensorView& t = v->tensor;
    return v->is_tensor() && !io[static_cast<size_t>(v - values().data())] &&
           t.dtype == DType::kFloat32 &&
           (by_count ? t.numel() == like.numel() : t.sizes == like.sizes) && t.capacity < 0 &&
           t.data != nullptr && t.device.is_cpu();
  };
  // A row broadcast along like's last dim: its period, else 0.
  auto row_of = [&](const Value* v, const TensorView& like) -> int64_t {
    const TensorView& t = v->tensor;
    if (!by_count || !v->is_tensor() || t.rank() != 1 || like.rank() < 2 ||
        t.sizes[0] != like.sizes.back() || t.sizes[0] <= 0 || t.dtype != DType::kFloat32 ||
        t.capacity >= 0 || t.data == nullptr || !t.device.is_cpu())
      return 0;
    return t.sizes[0];
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    MethodStep& s = steps()[i];
    // convolution.out: 9 arguments, the out, the return value; mm.out: 2, the out, the return
    // value.
    if (s.kind != StepKind::kKernel) continue;
    size_t out_at = 0;
    if (s.calls(OpKind::Convolution) && s.args.size() >= 10) {
      out_at = 9;
    } else if (s.calls(OpKind::Mm) && s.args.size() >= 3) {
      out_at = 2;
    } else if (s.calls(OpKind::Addmm) && s.args.size() >= 6) {
      out_at = 5;  // a linear layer with a bias (its bias row is in the out already)
    } else if (s.calls(OpKind::NativeBatchNormNoTraining) && s.args.size() >= 11) {
      out_at = 7;  // out0; a batch norm before a convolution (densenet's) and its relu
    } else {
      continue;
    }
    by_count = out_at == 2 || out_at == 5;
    if (!plain(s.args[out_at], s.args[out_at]->tensor)) continue;
    const TensorView& y = s.args[out_at]->tensor;
    std::vector<const TensorView*> chain{&y};  // memory the chain writes
    std::vector<const TensorView*> external;   // operands from outside the chain
    auto in_chain = [&](const TensorView& t) {
      return std::any_of(chain.begin(), chain.end(),
                         [&](const TensorView* c) { return c->data == t.data; });
    };
    auto overlaps_any = [&](const TensorView& t, const std::vector<const TensorView*>& set) {
      return std::any_of(set.begin(), set.end(),
                         [&](const TensorView* c) { return overlaps(*c, t); });
    };
    auto epilogue = std::make_unique<Epilogue>();
    size_t last = i;  // the chain's last step
    for (size_t j = i + 1; j < steps().size() && steps()[j].kind == StepKind::kKernel; ++j) {
      const std::optional<ElementwiseStep> e = read_elementwise(steps()[j]);
      if (!e || !plain(e->out, y)) break;
      // Each operand the out's shape, or (a matrix product's) a broadcast row.
      const int64_t a_period = plain(e->a, y) ? 0 : row_of(e->a, y);
      const int64_t b_period = e->b == nullptr || plain(e->b, y) ? 0 : row_of(e->b, y);
      if ((a_period == 0 && !plain(e->a, y)) ||
          (e->b != nullptr && b_period == 0 && !plain(e->b, y)))
        break;
      // Operands: chain memory, or memory the chain never writes (a broadcast row is never
      // the chain's).
      bool reads_chain = false, ok = true;
      std::vector<const TensorView*> fresh;
      for (const Value* operand : {e->a, e->b}) {
        if (operand == nullptr) continue;
        const bool row = operand == e->a ? a_period > 0 : b_period > 0;
        if (!row && in_chain(operand->tensor)) {
          reads_chain = true;
        } else if (overlaps_any(operand->tensor, chain)) {
          ok = false;
        } else {
          fresh.push_back(&operand->tensor);
        }
      }
      // The out: chain memory, or memory that no operand so far overlaps. Over one of the
      // kernel's inputs, the chain waits until the kernel has read them.
      const TensorView& out = e->out->tensor;
      bool after_inputs = false;
      if (!in_chain(out)) {
        ok = ok && !overlaps_any(out, chain) && !overlaps_any(out, external) &&
             !overlaps_any(out, fresh);
        for (size_t a = 0; a < out_at; ++a) {
          after_inputs =
              after_inputs || (s.args[a]->is_tensor() && overlaps(s.args[a]->tensor, out));
        }
      }
      if (!ok || !reads_chain) break;
      epilogue->ops.push_back(Epilogue::Op{e->kind, &e->a->tensor,
                                           e->b != nullptr ? &e->b->tensor : nullptr, e->scalar,
                                           e->lo, e->hi, &out, a_period, b_period});
      epilogue->after_inputs = epilogue->after_inputs || after_inputs;
      external.insert(external.end(), fresh.begin(), fresh.end());
      if (!in_chain(out)) chain.push_back(&out);
      steps()[j].fused = true;
      s.fused_names += " + " + steps()[j].name;
      last = j;
    }
    if (!epilogue->ops.empty()) {
      epilogue->activation = kernels::match_activation(*epilogue, y);
      epilogue->out_unread =
          epilogue->activation && epilogue->activation->t->data != y.data && unread_after(last, y);
      s.epilogue = std::move(epilogue);
    }
  }
}

void CpuPlanner::plan_channels_last() {
  // Without jumps the steps run in order: a tensor lives from the step that writes it until
  // a step writes its bytes anew.
  // A move rebinds a value to another's bytes, which no step names: none of that either.
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse || s.kind == StepKind::kMove) return;
  }
  const std::vector<bool> io = io_values();
  auto index_of = [&](const Value* v) { return static_cast<size_t>(v - values().data()); };
  std::map<const TensorView*, const Value*> by_tensor;
  for (const Value& v : values())
    by_tensor[&v.tensor] = &v;
  // A convolution that can run on oneDNN with channels-last tensors, and what it writes (its
  // out, its epilogue's outs) and reads through its epilogue (operands from outside).
  struct Group {
    size_t step = 0;
    std::vector<const Value*> writes, operands;
    bool channels_last = true;
    // Not a convolution (its out at argument 9) but a step that reads its input (argument 0)
    // in its out's layout: a max pooling (out at 6), a batch norm or an average pooling (7).
    bool same_in = false;
    // Its kernel returns a list of its outs (batch norm's three, max pooling's two).
    bool returns_list = false;
    // A cat along the channels (its out at argument 2): its items and its out share a layout.
    bool cat = false;
    // A product by one value per channel (its out at argument 2): its argument `scaled` and
    // its out share a layout; the other, [N, C, 1, 1], has the same bytes in either.
    bool scale = false;
    size_t scaled = 0;
    size_t out_arg = 9;
    // The argument the step reads in the group's layout, if any (a convolution reads either;
    // a cat's items are a list).
    std::optional<size_t> tied_arg() const {
      if (same_in) return 0;
      if (scale) return scaled;
      return std::nullopt;
    }
    bool convolution() const { return !same_in && !cat && !scale; }
  };
  std::vector<Group> groups;
  std::map<const Value*, size_t> writer;  // value -> its group
  std::vector<int64_t> group_of_step(steps().size(), -1);
  auto usable = [&](const Value* v) {
    return v->is_tensor() && !io[index_of(v)] && v->tensor.capacity < 0 &&
           v->tensor.data != nullptr && v->tensor.device.is_cpu();
  };
  // Takes a step's group (its out at group.out_arg) with its epilogue: the epilogue's outs
  // are the group's too, and its operands from outside must be chain tensors. False where an
  // out is not plain planned memory or another group writes it.
  auto adopt = [&](Group group) {
    const MethodStep& s = steps()[group.step];
    group.writes.push_back(s.args[group.out_arg]);
    bool ok = true;
    if (s.epilogue != nullptr) {
      auto add = [&](std::vector<const Value*>& to, const TensorView* t) {
        auto it = by_tensor.find(t);
        if (it == by_tensor.end() || !usable(it->second)) {
          ok = false;
          return;
        }
        if (std::find(to.begin(), to.end(), it->second) == to.end()) to.push_back(it->second);
      };
      for (const Epilogue::Op& op : s.epilogue->ops)
        add(group.writes, op.out);
      for (const Epilogue::Op& op : s.epilogue->ops) {
        for (const TensorView* t : {op.a, op.b}) {
          if (t == nullptr) continue;
          auto it = by_tensor.find(t);
          if (it != by_tensor.end() &&
              std::find(group.writes.begin(), group.writes.end(), it->second) != group.writes.end())
            continue;
          add(group.operands, t);
        }
      }
    }
    for (const Value* v : group.writes) {
      if (writer.count(v) != 0) ok = false;  // written by two steps: leave both
    }
    if (!ok) return false;
    group_of_step[group.step] = static_cast<int64_t>(groups.size());
    for (const Value* v : group.writes)
      writer[v] = groups.size();
    groups.push_back(std::move(group));
    return true;
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::Convolution) ||
        ((s.constant_args >> 1) & 1) == 0)
      continue;
    const std::optional<kernels::ConvGeometry> g = kernels::float_conv2d_geometry(s.args);
    // The convolutions oneDNN runs on channels-last tensors (their weights are constants,
    // checked above); choose_conv_algorithm has the thresholds.
    // A first layer reading a method input (NCHW, never in a chain) runs etc's direct loop
    // into a channels-last out (channels_last_convolution): no oneDNN state to make for it.
    const ConvCall chain{false, DType::kFloat32, true, true, true};
    if (!g || !usable(s.args[9]) || s.args[0]->tensor.capacity >= 0 ||
        choose_conv_algorithm(*g, chain) != ConvAlgorithm::kOnednn)
      continue;
    const bool direct_first_layer = io[index_of(s.args[0])] && kernels::few_input_channels_conv(*g);
    if (!direct_first_layer && !kernels::prepare_onednn_conv(s.args, *g, steps()[i].state))
      continue;
    Group group;
    group.step = i;
    adopt(std::move(group));
  }
  // Max poolings whose indices nothing reads, of 4-d float tensors (resnet18's pooling between
  // its first convolution and its first stage): channels-last where their input is (the
  // kernel takes 16 channels of a pixel per vector: no stride-2 shuffles).
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::MaxPool2dWithIndices) ||
        s.args.size() != 9 || ((s.unread_outs >> 7) & 1) == 0 || !usable(s.args[0]) ||
        !usable(s.args[6]) || s.args[0]->tensor.dtype != DType::kFloat32 ||
        s.args[0]->tensor.rank() != 4 || s.args[6]->tensor.dtype != DType::kFloat32 ||
        writer.count(s.args[6]) != 0)
      continue;
    Group group;
    group.step = i;
    group.same_in = true;
    group.returns_list = true;
    group.out_arg = 6;
    adopt(std::move(group));
  }
  // Inference batch norms (with their epilogue: densenet's relu) and average poolings of 4-d
  // float tensors (densenet's layers and transitions, between its convolutions): each
  // position's channels scaled and shifted, or averaged over the window, channels-last where
  // their input is.
  auto float4d_out = [&](const Value* v) {
    return usable(v) && v->tensor.dtype == DType::kFloat32 && v->tensor.rank() == 4;
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || s.args.empty() || !s.args[0]->is_tensor() ||
        s.args[0]->tensor.dtype != DType::kFloat32 || s.args[0]->tensor.rank() != 4)
      continue;
    Group group;
    group.step = i;
    group.same_in = true;
    if (s.calls(OpKind::NativeBatchNormNoTraining) && s.args.size() >= 11 &&
        float4d_out(s.args[7])) {
      group.out_arg = 7;
      group.returns_list = true;
      adopt(std::move(group));
    } else if (s.calls(OpKind::AvgPool2d) && s.args.size() >= 8 && float4d_out(s.args[7]) &&
               s.epilogue == nullptr) {
      group.out_arg = 7;
      adopt(std::move(group));
    }
  }
  // Cats of 4-d float tensors along their channels (squeezenet's and googlenet's blocks join
  // convolutions' outs for the next convolutions; each of densenet's layers joins all the
  // outs before it): channels-last where every item is, each position's channels copied
  // item by item, so the chain goes on through them.
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::Cat) || s.args.size() < 3 ||
        s.args[0]->is_tensor() || s.args[1]->kind != Value::Kind::kInt || !usable(s.args[2]) ||
        s.args[2]->tensor.dtype != DType::kFloat32 || s.args[2]->tensor.rank() != 4 ||
        (s.args[1]->i != 1 && s.args[1]->i != -3) || writer.count(s.args[2]) != 0)
      continue;
    bool ok = !s.args[0]->tensors.empty();
    std::vector<const Value*> items;
    for (const TensorView* t : s.args[0]->tensors) {
      auto it = t == nullptr ? by_tensor.end() : by_tensor.find(t);
      if (it == by_tensor.end() || !usable(it->second) || t->dtype != DType::kFloat32 ||
          t->rank() != 4 || t->numel() == 0 ||
          std::find(items.begin(), items.end(), it->second) != items.end()) {
        ok = false;
        break;
      }
      items.push_back(it->second);
    }
    if (!ok) continue;
    Group group;
    group.step = i;
    group.cat = true;
    group.out_arg = 2;
    group.operands = items;  // read in the group's layout: each must be a group's out
    adopt(std::move(group));
  }
  // Squeeze-and-excitation blocks (efficientnet's, mobilenet_v3's): a global mean of a
  // chain tensor (adaptive average pooling to 1x1, or mean over H and W), whose out has the
  // same bytes in either layout, and the product of the tensor by the [N, C, 1, 1] result,
  // channels-last with it, so that the chain goes on to the next convolution.
  auto float4d = [](const Value* v) {
    return v->is_tensor() && v->tensor.dtype == DType::kFloat32 && v->tensor.rank() == 4;
  };
  auto per_channel = [](const TensorView& s, const TensorView& x) {
    return s.rank() == 4 && (s.sizes[0] == x.sizes[0] || s.sizes[0] == 1) &&
           s.sizes[1] == x.sizes[1] && s.sizes[2] == 1 && s.sizes[3] == 1;
  };
  std::vector<bool> reads_either(steps().size(), false);  // a global mean: argument 0
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused) continue;
    if (s.calls(OpKind::AdaptiveAvgPool2d) && s.args.size() >= 3 && float4d(s.args[0]) &&
        s.args[1]->ints == std::vector<int64_t>{1, 1} && float4d(s.args[2])) {
      reads_either[i] = true;
    } else if (s.calls(OpKind::MeanDim) && s.args.size() >= 5 && float4d(s.args[0]) &&
               s.args[4]->is_tensor() && s.args[4]->tensor.dtype == DType::kFloat32 &&
               s.args[1]->ints.size() == 2) {
      std::vector<int64_t> dims = s.args[1]->ints;
      for (int64_t& d : dims)
        d = d < 0 ? d + 4 : d;
      std::sort(dims.begin(), dims.end());
      reads_either[i] = dims == std::vector<int64_t>{2, 3};
    } else if (s.calls(OpKind::MulTensor) && s.args.size() >= 3 && float4d(s.args[0]) &&
               float4d(s.args[1]) && usable(s.args[2]) && float4d(s.args[2]) &&
               writer.count(s.args[2]) == 0) {
      const TensorView& a = s.args[0]->tensor;
      const TensorView& b = s.args[1]->tensor;
      const size_t scaled = per_channel(b, a) ? 0 : per_channel(a, b) ? 1 : 2;
      if (scaled == 2 || s.args[2]->tensor.sizes != s.args[scaled]->tensor.sizes ||
          s.args[2]->tensor.sizes[2] * s.args[2]->tensor.sizes[3] == 1)
        continue;
      Group group;
      group.step = i;
      group.scale = true;
      group.scaled = scaled;
      group.out_arg = 2;
      adopt(std::move(group));
    }
  }
  if (groups.empty()) return;

  // Who reads each written tensor. The convolutions of groups may read one as their input
  // (argument 0); an epilogue may read one as an operand if its own group agrees on the
  // layout; anything else (another kernel, a delegate, an alias of its memory while it
  // lives) keeps the tensor NCHW.
  std::vector<std::pair<size_t, size_t>> agree;  // groups that must share a layout
  size_t owner = 0;                              // the kernel whose epilogue a fused step is
  for (size_t j = 0; j < steps().size(); ++j) {
    const MethodStep& s = steps()[j];
    if (!s.fused) owner = j;
    const int64_t own = group_of_step[owner];
    for (size_t a = 0; a < s.args.size(); ++a) {
      // A list of tensors (cat, stack, index) reads its items as NCHW; a kernel's returned
      // list is its outs (a group's own pooling out among them).
      const bool outs_list = !s.fused && s.kind == StepKind::kKernel && a + 1 == s.args.size() &&
                             !s.args[a]->is_tensor() && own >= 0 &&
                             static_cast<size_t>(own) < groups.size() &&
                             groups[static_cast<size_t>(own)].returns_list;
      // A cat group's items: read in its layout.
      const bool cat_list = !s.fused && a == 0 && own >= 0 &&
                            static_cast<size_t>(own) < groups.size() &&
                            groups[static_cast<size_t>(own)].cat;
      for (const TensorView* t : outs_list ? std::vector<TensorView*>{} : s.args[a]->tensors) {
        auto item = t == nullptr ? by_tensor.end() : by_tensor.find(t);
        if (item == by_tensor.end()) continue;
        auto w = writer.find(item->second);
        if (w == writer.end()) continue;
        if (cat_list) {
          agree.emplace_back(w->second, static_cast<size_t>(own));
        } else {
          groups[w->second].channels_last = false;
        }
      }
      auto it = writer.find(s.args[a]);
      if (it == writer.end()) continue;
      Group& g = groups[it->second];
      if (own == static_cast<int64_t>(it->second)) {
        // Its own convolution names it as its out (and return value), its epilogue as operand
        // or out.
        if (!s.fused && a < g.out_arg) g.channels_last = false;  // also its input: in place
        continue;
      }
      const Group* by = own >= 0 ? &groups[static_cast<size_t>(own)] : nullptr;
      // The input of a pooling or a channel scaling, whose out then takes its layout, or an
      // operand of an epilogue.
      const bool tied = by != nullptr && (s.fused || by->tied_arg() == a);
      // The input of another oneDNN convolution, or of a global mean: either layout.
      const bool either =
          !s.fused && a == 0 && ((by != nullptr && by->convolution()) || reads_either[j]);
      if (tied) {
        agree.emplace_back(it->second, static_cast<size_t>(own));
      } else if (!either) {
        g.channels_last = false;
      }
    }
  }
  // Other values over a written tensor's memory (views the program reads it through, which
  // assume NCHW), from the group's step until a kernel writes that memory anew (its out, the
  // last argument: the planner reuses the bytes for another tensor).
  // And a method output over it that no kernel writes anew after it (a caller reads it as
  // NCHW).
  for (Group& g : groups) {
    for (const Value* v : g.writes) {
      bool reused = false;
      for (size_t j = g.step + 1; j < steps().size() && !reused && g.channels_last; ++j) {
        const MethodStep& s = steps()[j];
        // A kernel's outs: its return value, or the tensors of a returned list (max
        // pooling's values and indices), written after its reads.
        const bool kernel = s.kind == StepKind::kKernel && !s.fused;
        for (const Value* u : s.args) {
          const bool outs_list = kernel && u == s.args.back() && !u->is_tensor();
          for (const TensorView* t : u->tensors) {  // list items over it: read as NCHW
            // A cat group reading one of the group's tensors as an item (the loop above tied
            // their layouts).
            if (u == s.args[0] && group_of_step[j] >= 0 &&
                groups[static_cast<size_t>(group_of_step[j])].cat) {
              auto item = by_tensor.find(t);
              if (item != by_tensor.end() &&
                  std::find(g.writes.begin(), g.writes.end(), item->second) != g.writes.end())
                continue;
            }
            if (t != nullptr && t->data != nullptr && t->nbytes() > 0 && overlaps(*t, v->tensor)) {
              if (outs_list) {
                reused = true;
              } else {
                g.channels_last = false;
              }
            }
          }
          if (!u->is_tensor() || u->tensor.data == nullptr || u->tensor.nbytes() == 0 ||
              std::find(g.writes.begin(), g.writes.end(), u) != g.writes.end() ||
              !overlaps(u->tensor, v->tensor))
            continue;
          // A kernel's out, or an epilogue's (a fused step writes its out as its kernel
          // runs, and the method reads v's bytes no more once anything is planned over them).
          if (s.kind == StepKind::kKernel && writes(s, u)) {
            reused = true;  // after this step's reads, checked in this loop too
          } else {
            g.channels_last = false;
          }
        }
      }
      for (size_t k : m_.outputs) {
        const Value& o = values()[k];
        if (!reused && o.is_tensor() && o.tensor.data != nullptr && o.tensor.nbytes() > 0 &&
            overlaps(o.tensor, v->tensor))
          g.channels_last = false;
      }
    }
    // An epilogue operand (or a cat's item) from outside every group is NCHW: the group's
    // layout must be too.
    for (const Value* v : g.operands) {
      if (writer.count(v) == 0) g.channels_last = false;
    }
    // So is a pooling's (a batch norm's, a channel scaling's) input that no group writes.
    if (const std::optional<size_t> in = g.tied_arg();
        in && writer.count(steps()[g.step].args[*in]) == 0)
      g.channels_last = false;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [a, b] : agree) {
      if (groups[a].channels_last != groups[b].channels_last) {
        groups[a].channels_last = groups[b].channels_last = false;
        changed = true;
      }
    }
  }
  auto channels_last_in = [&](const MethodStep& s) {
    auto in = writer.find(s.args[0]);
    return in != writer.end() && groups[in->second].channels_last;
  };
  for (const Group& g : groups) {
    MethodStep& s = steps()[g.step];
    if (g.channels_last) s.channels_last_args |= uint64_t{1} << g.out_arg;
    // The input a step reads in its out's layout (agreed above), or a convolution's input.
    if (const std::optional<size_t> in = g.tied_arg(); in && g.channels_last)
      s.channels_last_args |= uint64_t{1} << *in;
    if (g.convolution() && channels_last_in(s)) s.channels_last_args |= uint64_t{1} << 0;
  }
  for (size_t i = 0; i < steps().size(); ++i) {
    if (reads_either[i] && channels_last_in(steps()[i])) steps()[i].channels_last_args |= 1;
  }
}

void plan_cpu_method(LoadPlanView& method) {
  CpuPlanner(method).run();
}

}  // namespace etc::rt::kernels
