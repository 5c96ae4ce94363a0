#include "runtime/kernels/load_plan.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <optional>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/fused_attention.h"
#include "runtime/kernels/load_plan_planner.h"
#include "runtime/kernels/safe_softmax.h"

namespace etc::rt::kernels {
namespace load_plan_detail {

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data);
  const auto b0 = reinterpret_cast<std::uintptr_t>(b.data);
  return a0 < b0 + static_cast<std::uintptr_t>(b.nbytes()) &&
         b0 < a0 + static_cast<std::uintptr_t>(a.nbytes());
}

bool arg_overlaps(const Value* v, const TensorView& t) {
  auto hit = [&t](const TensorView* u) {
    return u != nullptr && u->data != nullptr && u->nbytes() > 0 && overlaps(*u, t);
  };
  if (v->is_tensor()) return hit(&v->tensor);
  return std::any_of(v->tensors.begin(), v->tensors.end(), hit);
}

bool step_touches(const MethodStep& s, const TensorView& t) {
  return std::any_of(s.args.begin(), s.args.end(),
                     [&t](const Value* v) { return arg_overlaps(v, t); });
}

namespace {

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

}  // namespace

void CpuPlanner::run() {
  find_unread_outs();  // before plan_channels_last, which keeps pools without indices
  if (!m_.fuse) return;
  fuse_dequantized_weights();  // before fuse_epilogues: the products' epilogues after
  fuse_attention();
  fuse_operand_copies();  // after fuse_attention, whose first bmm reads K^T as it is
  fuse_safe_softmax();
  fuse_epilogues();
  if (onednn_conv_enabled()) plan_channels_last();
}

CpuPlanner::CpuPlanner(LoadPlanView& m) : m_(m), io_(m.values.size(), false) {
  for (size_t v : m_.inputs)
    io_[v] = true;
  for (size_t v : m_.outputs)
    io_[v] = true;
}

bool CpuPlanner::straight_line() const {
  return std::none_of(steps().begin(), steps().end(), [](const MethodStep& s) {
    return s.kind == StepKind::kJumpFalse || s.kind == StepKind::kMove;
  });
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
  for (size_t i = 0; i < steps().size(); ++i) {
    MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || !s.calls(OpKind::MaxPool2dWithIndices) ||
        s.args.size() < 8 || !s.args[7]->is_tensor())
      continue;
    const Value* indices = s.args[7];
    if (is_io(indices) || indices->tensor.data == nullptr) continue;
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

std::optional<size_t> CpuPlanner::last_writer(size_t before, const TensorView& t,
                                              const std::vector<bool>* skipped,
                                              const StateReads* state_reads) const {
  for (size_t j = before; j-- > 0;) {
    if (skipped != nullptr && (*skipped)[j]) continue;
    const MethodStep& w = steps()[j];
    if (w.kind != StepKind::kKernel || w.fused || w.args.empty()) return std::nullopt;
    const bool touched =
        step_touches(w, t) || (state_reads != nullptr &&
                               std::any_of((*state_reads)[j].begin(), (*state_reads)[j].end(),
                                           [&](const TensorView* r) { return overlaps(*r, t); }));
    if (!touched) continue;
    const Value* out = w.args.back();
    const bool writes = out->is_tensor() && out->tensor.data == t.data &&
                        out->tensor.numel() == t.numel() && out->tensor.dtype == t.dtype;
    return writes ? std::optional<size_t>(j) : std::nullopt;
  }
  return std::nullopt;
}

void CpuPlanner::fuse_attention() {
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse) return;
  }
  auto usable = [&](const Value* v, size_t rank) {
    const TensorView& t = v->tensor;
    return v->is_tensor() && t.dtype == DType::kFloat32 && t.rank() == rank && t.capacity < 0 &&
           t.data != nullptr && t.device.is_cpu() && t.numel() > 0;
  };
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
    if (is_io(s1) || is_io(s2) || is_io(p) || is_io(o) ||
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

void CpuPlanner::fuse_safe_softmax() {
  if (!straight_line()) return;
  // A planned tensor of this dtype that only the program's steps see.
  auto own = [&](const Value* v, DType dt) {
    return v->is_tensor() && v->tensor.dtype == dt && v->tensor.capacity < 0 &&
           v->tensor.data != nullptr && v->tensor.device.is_cpu() && !is_io(v);
  };
  auto last_dim = [](const Value* dim, size_t rank) {
    return dim->kind == Value::Kind::kInt &&
           (dim->i == -1 || dim->i == static_cast<int64_t>(rank) - 1);
  };
  for (size_t w = 0; w < steps().size(); ++w) {
    const MethodStep& where = steps()[w];
    // where.self_out(condition, self, other, out), its return value after.
    if (!where.calls(OpKind::WhereSelf) || where.args.size() != 5 || where.fused) continue;
    const Value *cond = where.args[0], *p = where.args[1], *other = where.args[2];
    const Value* y = where.args[3];
    if (!own(cond, DType::kBool) || !own(p, DType::kFloat32) || !other->is_tensor() ||
        ((where.constant_args >> 2) & 1) == 0 || other->tensor.dtype != DType::kFloat32 ||
        other->tensor.numel() != 1 || other->tensor.data == nullptr || !y->is_tensor() ||
        y->tensor.dtype != DType::kFloat32 || y->tensor.capacity >= 0 ||
        !y->tensor.device.is_cpu() || y->tensor.sizes != p->tensor.sizes)
      continue;
    // any.out(self, dim, keepdim, out), logical_not.out(self, out), eq.Scalar_out(self, other,
    // out), _softmax.out(self, dim, half_to_float, out): each with its return value after.
    const std::optional<size_t> any_at = last_writer(w, cond->tensor);
    if (!any_at) continue;
    const MethodStep& any = steps()[*any_at];
    if (!any.calls(OpKind::AnyDim) || any.args.size() != 5 || !own(any.args[0], DType::kBool) ||
        !last_dim(any.args[1], any.args[0]->tensor.rank()) ||
        any.args[2]->kind != Value::Kind::kBool || !any.args[2]->b)
      continue;
    const std::optional<size_t> not_at = last_writer(*any_at, any.args[0]->tensor);
    if (!not_at) continue;
    const MethodStep& logical_not = steps()[*not_at];
    if (!logical_not.calls(OpKind::LogicalNot) || logical_not.args.size() != 3 ||
        !own(logical_not.args[0], DType::kBool))
      continue;
    const std::optional<size_t> eq_at = last_writer(*not_at, logical_not.args[0]->tensor);
    if (!eq_at) continue;
    const MethodStep& eq = steps()[*eq_at];
    if (!eq.calls(OpKind::EqScalar) || eq.args.size() != 4 || !eq.args[0]->is_tensor() ||
        !eq.args[1]->is_scalar() ||
        eq.args[1]->scalar_as_double() != -std::numeric_limits<double>::infinity())
      continue;
    const std::optional<size_t> sm_at = last_writer(w, p->tensor);
    if (!sm_at) continue;
    MethodStep& softmax = steps()[*sm_at];
    if (!softmax.calls(OpKind::Softmax) || softmax.args.size() != 5 || softmax.fused ||
        softmax.state != nullptr || !softmax.args[0]->is_tensor())
      continue;
    const TensorView& x = softmax.args[0]->tensor;
    // The masks of x's shape (any's over x's rows: views share bytes without a step, and an
    // any over another shape would mix rows).
    std::vector<int64_t> rows_shape = x.sizes;
    if (!rows_shape.empty()) rows_shape.back() = 1;
    if (x.dtype != DType::kFloat32 || x.rank() == 0 || !last_dim(softmax.args[1], x.rank()) ||
        softmax.args[2]->kind != Value::Kind::kBool || softmax.args[2]->b ||
        eq.args[0]->tensor.data != x.data || eq.args[0]->tensor.sizes != x.sizes ||
        p->tensor.sizes != x.sizes || logical_not.args[0]->tensor.sizes != x.sizes ||
        any.args[0]->tensor.sizes != x.sizes || cond->tensor.sizes != rows_shape)
      continue;
    // The five steps alone, one after the other; the scores' masks and softmax read by them
    // alone; the where's out over the scores at most exactly (the softmax runs row by row).
    const size_t first = std::min(*sm_at, *eq_at);
    if (w - first != 4 || *not_at <= *eq_at || *any_at <= *not_at) continue;
    if (!unread_after(w, p->tensor, &y->tensor) || !unread_after(w, cond->tensor, &y->tensor) ||
        !unread_after(w, any.args[0]->tensor, &y->tensor) ||
        !unread_after(w, logical_not.args[0]->tensor, &y->tensor))
      continue;
    // The softmax's out not over x (eq would read the softmax's values there), the where's
    // out exactly on it at most (the fused softmax runs row by row, in place). The masks may
    // lie over x: they are written as x dies. A caller-bound x and out (no bytes yet) could
    // be bound over each other: left.
    if (overlaps(p->tensor, x) || (x.data == nullptr && y->tensor.data == nullptr) ||
        (overlaps(y->tensor, x) && y->tensor.data != x.data))
      continue;
    auto state = std::make_unique<SafeSoftmax>();
    state->out = &y->tensor;
    state->other = other->tensor.data_as<const float>()[0];
    softmax.state = std::move(state);
    for (size_t j : {*eq_at, *not_at, *any_at, w}) {
      steps()[j].fused = true;
      softmax.fused_names += " + " + steps()[j].name;
    }
  }
}

void CpuPlanner::fuse_epilogues() {
  // A jump could land between a kernel and the instructions fused into it.
  for (const MethodStep& s : steps()) {
    if (s.kind == StepKind::kJumpFalse) return;
  }
  // Method inputs and outputs may be rebound to caller memory: never part of a chain.
  // A matrix product's out is read through views of other shapes (mm's [24, 384] as [1, 24,
  // 384]): there the operands need the out's element count only (planned tensors are
  // contiguous), and a row of the out's last dim may be broadcast (the bias of a linear
  // layer). A convolution's need its shape.
  bool by_count = false;
  auto plain = [&](const Value* v, const TensorView& like) {
    const TensorView& t = v->tensor;
    return v->is_tensor() && !is_io(v) && t.dtype == DType::kFloat32 &&
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

}  // namespace load_plan_detail

void plan_cpu_method(LoadPlanView& method) {
  load_plan_detail::CpuPlanner(method).run();
}

}  // namespace etc::rt::kernels
