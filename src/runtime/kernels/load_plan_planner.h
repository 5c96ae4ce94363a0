// The CPU load planner's shared part (load_plan.h): the planner over one method, whose passes
// live by concern in load_plan.cpp (unread outs, attention, epilogues), load_plan_dequant.cpp
// (weight-only and 8da4w dequantization chains given to the products), load_plan_copies.cpp
// (copies into a bmm's right operand read in place) and
// load_plan_channels_last.cpp (the channels-last chains between oneDNN convolutions), and the
// byte-overlap tests they share. Internal to those files.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "runtime/kernels/load_plan.h"
#include "runtime/kernels/weight_only.h"

namespace etc::rt::kernels::load_plan_detail {

// Whether two tensors' bytes may share memory. Addresses compare as integers: a tensor the
// caller binds before execute (an unplanned input or output) has no data yet, and an offset
// from a null pointer is undefined. Such a tensor is the caller's memory, which never lies in
// a planned buffer; two of them may be the same buffer, which their equal null addresses say.
bool overlaps(const TensorView& a, const TensorView& b);
// Whether argument v (a tensor, or each tensor of a list: cat's items, split's outs) has
// bytes in common with t.
bool arg_overlaps(const Value* v, const TensorView& t);
// Whether any argument of step s has bytes in common with t.
bool step_touches(const MethodStep& s, const TensorView& t);

// The planner over one method.
class CpuPlanner {
 public:
  explicit CpuPlanner(LoadPlanView& m);
  // Every pass, in order.
  void run();

 private:
  std::vector<MethodStep>& steps() { return m_.steps; }
  const std::vector<MethodStep>& steps() const { return m_.steps; }
  const std::vector<Value>& values() const { return m_.values; }
  // Whether v is a method input or output (the caller may rebind its memory).
  bool is_io(const Value* v) const { return io_[static_cast<size_t>(v - values().data())]; }
  // Whether the steps run in order, each once, and none rebinds a value to another's bytes (no
  // jump, no move): what the passes that follow bytes from step to step assume.
  bool straight_line() const;
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
  // Per step, the tensors it reads through its state rather than its arguments (a fused
  // attention's V, a bmm's copied operand).
  using StateReads = std::vector<std::vector<const TensorView*>>;
  // The step before `before` that touches t's bytes last, if it writes exactly them (t's
  // dtype, a view at most) and no step between reads or writes them otherwise. Steps marked in
  // `skipped` (which will not run) are passed over; a step reads what `state_reads` lists for
  // it too.
  std::optional<size_t> last_writer(size_t before, const TensorView& t,
                                    const std::vector<bool>* skipped = nullptr,
                                    const StateReads* state_reads = nullptr) const;
  // The step before `before` that writes t: a _to_copy of int8 values of t's shape into
  // exactly t's bytes (a float dtype), with no step between touching t. nullopt otherwise.
  std::optional<size_t> widened_int8(size_t before, const TensorView& t) const;
  // The step before `before` that writes t: an etc::unpack_int4 of a uint8 constant into
  // exactly t's bytes (int8), with no step between touching t. nullopt otherwise.
  std::optional<size_t> unpacked_int4(size_t before, const TensorView& t) const;
  // Whether step w writes a k x n matrix's values as a permute_copy (dims [1, 0, 2]) of a
  // constant in panels ([n / P, k, P], of the out's dtype; P a multiple of 16): the layout
  // etc's CPU export gives a decode step's weights (passes/panel_weights.h). P if so.
  std::optional<int64_t> panel_source(const MethodStep& w, int64_t k, int64_t n) const;
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
  // Gives a bmm the steps before it that only copy its right operand from another tensor
  // (expand_copy of batch dims, _to_copy widening bf16/fp16, transpose_copy of the last two
  // dims: a decoder's K^T and V from its KV cache), which it then reads in place
  // (copied_operand.h), and marks them fused. After fuse_attention.
  void fuse_operand_copies();
  // Gives a last-dim float32 _softmax the four steps of PyTorch's safe softmax after it (eq
  // with -inf, logical_not, any, where(any, softmax, other)): it writes the where's out
  // (safe_softmax.h).
  void fuse_safe_softmax();
  // Gives convolutions, matrix products (mm) and batch norms the in-place elementwise
  // instructions right after them as their epilogue; a matrix product's may add a broadcast
  // row (a bias).
  void fuse_epilogues();
  // Keeps the tensors that only convolutions running on oneDNN read (and their epilogues)
  // channels-last between those convolutions, instead of copying each to NHWC and back
  // (KernelContext::channels_last_args). After fuse_epilogues.
  void plan_channels_last();

  LoadPlanView& m_;
  std::vector<bool> io_;  // per value: is_io
};

}  // namespace etc::rt::kernels::load_plan_detail
