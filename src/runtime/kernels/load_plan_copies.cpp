// The load planner's pass over copies into a bmm's right operand (load_plan_planner.h,
// copied_operand.h): expand_copy over batch dims, _to_copy from bf16/fp16 to float32 and
// transpose_copy of the last two dims, in any order, each at most once, read in place by the
// bmm instead.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "runtime/kernels/copied_operand.h"
#include "runtime/kernels/fused_attention.h"
#include "runtime/kernels/load_plan_planner.h"

namespace etc::rt::kernels::load_plan_detail {
namespace {

// Product of sizes[0, end).
int64_t product(const std::vector<int64_t>& sizes, size_t end) {
  int64_t p = 1;
  for (size_t d = 0; d < end; ++d)
    p *= sizes[d];
  return p;
}

// expand_copy from `in` to `out` repeating whole matrices (the last two dims kept): for each
// matrix of out (its dims before the last two, flattened), the matrix of in it copies.
std::optional<std::vector<int64_t>> expanded_matrices(const std::vector<int64_t>& in,
                                                      const std::vector<int64_t>& out) {
  const size_t ri = in.size(), ro = out.size();
  if (ri < 2 || ro < ri || in[ri - 1] != out[ro - 1] || in[ri - 2] != out[ro - 2])
    return std::nullopt;
  // Per leading dim of out: its size and the stride, in matrices, of in's dim it maps to (0
  // where it is broadcast or has no dim in in).
  const size_t lead = ro - 2, shift = ro - ri;
  std::vector<int64_t> stride(lead, 0);
  int64_t s = 1;
  for (size_t d = lead; d-- > shift;) {
    const int64_t size = in[d - shift];
    if (size != out[d] && size != 1) return std::nullopt;
    if (size != 1) stride[d] = s;
    s *= size;
  }
  std::vector<int64_t> map(static_cast<size_t>(product(out, lead)));
  for (size_t m = 0; m < map.size(); ++m) {
    int64_t rest = static_cast<int64_t>(m), at = 0;
    for (size_t d = lead; d-- > 0;) {
      at += (rest % out[d]) * stride[d];
      rest /= out[d];
    }
    map[m] = at;
  }
  return map;
}

// transpose_copy.int_out(self, dim0, dim1, out) of the last two dims.
bool transposes_last_two(const MethodStep& w) {
  if (!w.calls(OpKind::TransposeInt) || w.args.size() != 5 || !w.args[0]->is_tensor() ||
      w.args[1]->kind != Value::Kind::kInt || w.args[2]->kind != Value::Kind::kInt)
    return false;
  const auto rank = static_cast<int64_t>(w.args[0]->tensor.rank());
  auto wrap = [&](int64_t d) { return d < 0 ? d + rank : d; };
  const int64_t d0 = wrap(w.args[1]->i), d1 = wrap(w.args[2]->i);
  return rank >= 2 && std::min(d0, d1) == rank - 2 && std::max(d0, d1) == rank - 1;
}

}  // namespace

void CpuPlanner::fuse_operand_copies() {
  if (!straight_line()) return;
  // Tensors of fixed sizes in host memory (planned, or bound by the caller where `bound`).
  auto fixed = [&](const Value* v, bool bound) {
    return v->is_tensor() && v->tensor.capacity < 0 && v->tensor.device.is_cpu() &&
           (bound || (v->tensor.data != nullptr && !is_io(v)));
  };
  std::vector<bool> taken(steps().size(), false);  // the steps given to a bmm here
  // Tensors steps read through their state, not their arguments: a fused attention's V, a
  // bmm's source given here.
  StateReads state_reads(steps().size());
  for (size_t j = 0; j < steps().size(); ++j) {
    const MethodStep& s = steps()[j];
    if (const auto* fa =
            s.state != nullptr ? dynamic_cast<const FusedAttention*>(s.state.get()) : nullptr)
      state_reads[j].push_back(fa->v);
  }

  // The step before `before` that touches t's bytes last (but the steps taken), if it writes
  // exactly them.
  auto writer = [&](size_t before, const TensorView& t) {
    return last_writer(before, t, &taken, &state_reads);
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    MethodStep& bmm = steps()[i];
    if (!bmm.calls(OpKind::Bmm) || bmm.args.size() != 4 || bmm.fused || bmm.state != nullptr)
      continue;
    const Value* a = bmm.args[0];
    const Value* mat2 = bmm.args[1];
    const Value* out = bmm.args[2];
    if (!fixed(mat2, false) || !fixed(a, true) || !fixed(out, true) ||
        mat2->tensor.dtype != DType::kFloat32 || a->tensor.dtype != DType::kFloat32 ||
        out->tensor.dtype != DType::kFloat32 || mat2->tensor.rank() != 3 ||
        mat2->tensor.numel() == 0 || overlaps(out->tensor, mat2->tensor))
      continue;
    const int64_t batch = mat2->tensor.sizes[0], k = mat2->tensor.sizes[1],
                  n = mat2->tensor.sizes[2];
    // The current tensor's matrices (rows x cols each; mat2's matrix b is matrix src[b] of it,
    // transposed where `transposed`), walking back from mat2 through the steps that wrote it.
    // A stage per step: the step, its out and the step that reads that (the step before it
    // in the walk, or the bmm), and what mat2 is read from when the walk stops there.
    struct Stage {
      size_t step = 0, reader = 0;
      const TensorView *out = nullptr, *in = nullptr;
      int64_t rows = 0, cols = 0;
      bool transposed = false;
      std::vector<int64_t> src;
    };
    std::vector<Stage> stages;
    int64_t rows = k, cols = n;
    bool transposed = false, widened = false, expanded = false;
    std::vector<int64_t> src(static_cast<size_t>(batch));
    std::iota(src.begin(), src.end(), int64_t{0});
    const TensorView* cur = &mat2->tensor;
    for (std::optional<size_t> j = writer(i, *cur); j; j = writer(*j, *cur)) {
      const MethodStep& w = steps()[*j];
      const Value* wout = w.args.back();
      const Value* self = w.args[0];
      // Its out: planned memory of cur's matrices (a view that keeps them at most).
      const TensorView& o = wout->tensor;
      if (!fixed(wout, false) || o.rank() < 2 || o.sizes[o.rank() - 2] != rows ||
          o.sizes.back() != cols || !fixed(self, true) || self->tensor.rank() < 2)
        break;
      const TensorView& in = self->tensor;
      const int64_t in_rows = in.sizes[in.rank() - 2], in_cols = in.sizes.back();
      if (!transposed && transposes_last_two(w) && in.dtype == o.dtype && in_rows == cols &&
          in_cols == rows && in.numel() == o.numel()) {
        transposed = true;
        std::swap(rows, cols);
      } else if (!widened && w.calls(OpKind::ToCopy) && w.args.size() == 5 &&
                 o.dtype == DType::kFloat32 &&
                 (in.dtype == DType::kBFloat16 || in.dtype == DType::kFloat16) &&
                 in.sizes == o.sizes) {
        widened = true;
      } else if (!expanded && w.calls(OpKind::Expand) && w.args.size() == 5 &&
                 in.dtype == o.dtype) {
        const std::optional<std::vector<int64_t>> map = expanded_matrices(in.sizes, o.sizes);
        if (!map) break;
        for (int64_t& m : src)
          m = (*map)[static_cast<size_t>(m)];
        expanded = true;
      } else {
        break;
      }
      stages.push_back(
          {*j, stages.empty() ? i : stages.back().step, &o, &in, rows, cols, transposed, src});
      cur = &in;
    }
    // The longest run of the steps from the bmm back that may be skipped: where a copy is also
    // read elsewhere, the steps after it still join.
    auto runs = [&](size_t j, size_t taken_here) {
      if (taken[j]) return false;
      for (size_t s = 0; s < taken_here; ++s)
        if (stages[s].step == j) return false;
      return true;
    };
    auto valid = [&](size_t len) {
      const Stage& last = stages[len - 1];
      const TensorView& source = *last.in;
      // The source: planned memory (a tensor the caller binds has no bytes yet to tell a
      // write to it from others), the tensor the first step reads, not written from that
      // step to the bmm (but by the steps skipped), nor under the bmm's out (which the
      // product zeroes first).
      const Value* source_value = steps()[last.step].args[0];
      if (!fixed(source_value, false) || overlaps(out->tensor, source)) return false;
      for (size_t j = last.step + 1; j < i; ++j) {
        if (!runs(j, len)) continue;
        const MethodStep& s = steps()[j];
        if (s.kind != StepKind::kKernel) {
          if (step_touches(s, source)) return false;
          continue;
        }
        for (const Value* u : s.args) {
          if ((writes(s, u) || (u == s.args.back() && !u->is_tensor())) && arg_overlaps(u, source))
            return false;
        }
      }
      // What the steps wrote: read by the next of them alone. No step between its writer and
      // that reader touches it (writer() checked), none after the reader reads its bytes
      // before they are written anew (the steps skipped count as writing theirs: nothing reads
      // those either), nor through its state (unread_after sees arguments only), and the
      // bmm's left operand does not lie over it.
      for (size_t s = 0; s < len; ++s) {
        const Stage& st = stages[s];
        if (!unread_after(st.reader, *st.out, st.reader == i ? &out->tensor : nullptr) ||
            arg_overlaps(a, *st.out))
          return false;
        for (size_t j = st.reader + 1; j < steps().size(); ++j) {
          if (std::any_of(state_reads[j].begin(), state_reads[j].end(),
                          [&](const TensorView* r) { return overlaps(*r, *st.out); }))
            return false;
        }
      }
      return true;
    };
    size_t len = stages.size();
    while (len > 0 && !valid(len))
      --len;
    if (len == 0) continue;
    const Stage& last = stages[len - 1];
    const TensorView& source = *last.in;
    auto state = std::make_unique<CopiedOperand>();
    state->b = mat2->tensor.data;
    state->batch = batch;
    state->k = k;
    state->n = n;
    state->source = &source;
    state->dtype = source.dtype;
    state->source_numel = source.numel();
    for (int64_t m : last.src)
      state->batch_offset.push_back(m * last.rows * last.cols);
    // Element (r, c) of mat2's matrix is (r, c) of the source's, or (c, r) where transposed.
    state->k_stride = last.transposed ? 1 : last.cols;
    state->n_stride = last.transposed ? last.cols : 1;
    bmm.state = std::move(state);
    state_reads[i].push_back(&source);
    std::vector<size_t> chain;
    for (size_t s = 0; s < len; ++s)
      chain.push_back(stages[s].step);
    std::sort(chain.begin(), chain.end());
    for (size_t j : chain) {
      taken[j] = true;
      steps()[j].fused = true;
      bmm.fused_names += " + " + steps()[j].name;
    }
  }
}

}  // namespace etc::rt::kernels::load_plan_detail
