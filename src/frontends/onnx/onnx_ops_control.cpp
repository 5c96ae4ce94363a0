// Control flow: If, Loop and Scan, whose bodies are subgraphs. etc programs have no control
// flow, so these are converted away at export time:
//   If    a condition known at export time takes its branch; one known only at run time
//         computes both branches and selects each output with `where` (both branches
//         must give one type and shape);
//   Loop  unrolled: the trip count and every iteration's condition must be known at export
//         time (carried values need not be);
//   Scan  unrolled over the static length of its scan inputs.
// Every iteration converts the body anew, so values known at export time stay known (a
// loop over constants becomes constants).
#include <algorithm>

#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {

namespace {

// Unrolling beyond this many body conversions is refused (as LSTM's sequence is).
constexpr int64_t kMaxIterations = 4096;

Result<ValueId> select(NodeCtx& ctx, ValueId v, int64_t dim, int64_t index) {
  return ctx.emit(OpKind::SelectInt, {{"self", v}, {"dim", dim}, {"index", index}});
}

// `parts` (one per iteration, equally typed and shaped) stacked along a new dim `axis` of
// the result (negative counts from the end); `what` names them in errors.
Result<Entry> stack_entries(NodeCtx& ctx, const std::vector<Entry>& parts, int64_t axis,
                            const std::string& what) {
  const Entry& first = parts.front();
  for (const Entry& p : parts) {
    if (!p.is_tensor()) return ctx.unsupported(what + " is a sequence or optional");
    if (p.dtype != first.dtype || p.shape != first.shape) {
      return ctx.unsupported(what + " differs between iterations (" + shape_to_string(first.shape) +
                             " and " + shape_to_string(p.shape) +
                             "); etc stacks equally shaped ones only");
    }
  }
  const int64_t rank = static_cast<int64_t>(first.shape.size()) + 1;
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, rank, what + " axis"));
  axis = ctx.wrap_axis(axis, rank);
  std::vector<ValueId> values;
  for (const Entry& p : parts) {
    ETC_ASSIGN_OR_RETURN(ValueId u,
                         ctx.emit(OpKind::Unsqueeze, {{"self", ctx.value_of(p)}, {"dim", axis}}));
    values.push_back(u);
  }
  if (values.size() == 1) return ctx.entry_of(values[0]);
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Cat, {{"tensors", values}, {"dim", axis}}));
  return ctx.entry_of(y);
}

Status check_count(NodeCtx& ctx, const std::string& body, size_t got, size_t want) {
  if (got != want) {
    return ctx.invalid("the " + body + " has " + std::to_string(got) + " outputs; " +
                       std::to_string(want) + " expected");
  }
  return Status();
}

// The scalar value of a constant condition (a bool of one element).
Result<bool> condition_value(NodeCtx& ctx, const HostTensor& t, const std::string& what) {
  if (t.numel() != 1) return ctx.invalid(what + " must hold one element");
  return t.ints()[0] != 0;
}

// What a Scan unrolls: the states and scan inputs of one batch (opset 8) or of the node.
struct ScanPlan {
  std::vector<int64_t> in_axes, in_reverse, out_axes, out_reverse;
};

// One Scan over `states` and `scans`: the final states, then the stacked scan outputs.
Result<std::vector<Entry>> unroll_scan(NodeCtx& ctx, std::vector<Entry> states,
                                       const std::vector<Entry>& scans, const ScanPlan& plan,
                                       size_t num_body_outputs, int64_t* budget) {
  const size_t n = states.size();
  if (num_body_outputs < n) return ctx.invalid("the body has fewer outputs than states");
  const size_t k = num_body_outputs - n;
  int64_t length = -1;
  std::vector<ValueId> scan_values;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < scans.size(); ++j) {
    const int64_t rank = static_cast<int64_t>(scans[j].shape.size());
    const int64_t axis = plan.in_axes[j];
    ETC_RETURN_IF_ERROR(ctx.check_axis(axis, rank, "scan input axis"));
    axes.push_back(ctx.wrap_axis(axis, rank));
    const int64_t len = scans[j].shape[static_cast<size_t>(axes.back())];
    if (length >= 0 && len != length) {
      return ctx.invalid("scan inputs have lengths " + std::to_string(length) + " and " +
                         std::to_string(len));
    }
    length = len;
    scan_values.push_back(ctx.value_of(scans[j]));
  }
  if (length <= 0) return ctx.unsupported("a scan of length 0 (its outputs' shapes are unknown)");
  if ((*budget -= length) < 0) {
    return ctx.unsupported("more than " + std::to_string(kMaxIterations) + " iterations to unroll");
  }
  std::vector<std::vector<Entry>> steps(k);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Entry> in = states;
    for (size_t j = 0; j < scans.size(); ++j) {
      const int64_t at = plan.in_reverse[j] ? length - 1 - t : t;
      ETC_ASSIGN_OR_RETURN(ValueId v, select(ctx, scan_values[j], axes[j], at));
      in.push_back(ctx.entry_of(v));
    }
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out, ctx.subgraph("body", in));
    ETC_RETURN_IF_ERROR(check_count(ctx, "body", out.size(), num_body_outputs));
    for (size_t i = 0; i < n; ++i) {
      if (out[i].dtype != states[i].dtype || out[i].shape != states[i].shape) {
        return ctx.invalid("state " + std::to_string(i) + " changes type or shape in the body");
      }
      states[i] = out[i];
    }
    for (size_t i = 0; i < k; ++i)
      steps[i].push_back(out[n + i]);
  }
  std::vector<Entry> result = states;
  for (size_t i = 0; i < k; ++i) {
    if (plan.out_reverse[i]) std::reverse(steps[i].begin(), steps[i].end());
    ETC_ASSIGN_OR_RETURN(Entry y, stack_entries(ctx, steps[i], plan.out_axes[i],
                                                "scan output " + std::to_string(i)));
    result.push_back(y);
  }
  return result;
}

// An ints attribute of `count` entries (all `fallback` when absent).
Result<std::vector<int64_t>> per_input(NodeCtx& ctx, const std::string& name, size_t count,
                                       int64_t fallback) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> v,
                       ctx.attr_ints(name, std::vector<int64_t>(count, fallback)));
  if (v.size() != count) {
    return ctx.invalid("attribute '" + name + "' has " + std::to_string(v.size()) + " entries; " +
                       std::to_string(count) + " expected");
  }
  return v;
}

}  // namespace

Status convert_if(NodeCtx& ctx) {
  const Entry cond = ctx.input_entry(0);
  const size_t outputs = static_cast<size_t>(ctx.num_outputs());
  if (cond.constant) {
    ETC_ASSIGN_OR_RETURN(bool take, condition_value(ctx, *cond.constant, "the condition"));
    const std::string branch = take ? "then_branch" : "else_branch";
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out, ctx.subgraph(branch, {}));
    ETC_RETURN_IF_ERROR(check_count(ctx, branch, out.size(), outputs));
    for (size_t i = 0; i < outputs; ++i)
      ETC_RETURN_IF_ERROR(ctx.set_output_entry(static_cast<int>(i), out[i]));
    return Status();
  }
  // A condition known only at run time: both branches, then a selection per output.
  if (cond.dtype != DType::kBool) return ctx.invalid("the condition must be bool");
  int64_t numel = 1;
  for (int64_t d : cond.shape)
    numel *= d;
  if (numel != 1) return ctx.invalid("the condition must hold one element");
  ETC_ASSIGN_OR_RETURN(std::vector<Entry> then_out, ctx.subgraph("then_branch", {}));
  ETC_ASSIGN_OR_RETURN(std::vector<Entry> else_out, ctx.subgraph("else_branch", {}));
  ETC_RETURN_IF_ERROR(check_count(ctx, "then_branch", then_out.size(), outputs));
  ETC_RETURN_IF_ERROR(check_count(ctx, "else_branch", else_out.size(), outputs));
  ETC_ASSIGN_OR_RETURN(ValueId c, ctx.input(0));
  if (!cond.shape.empty()) {
    ETC_ASSIGN_OR_RETURN(c, reshape(ctx, c, {}));
  }
  for (size_t i = 0; i < outputs; ++i) {
    const Entry &a = then_out[i], &b = else_out[i];
    if (!a.is_tensor() || !b.is_tensor()) {
      return ctx.unsupported("output " + std::to_string(i) +
                             " is a sequence or optional: the condition must be known at "
                             "export time to choose its branch");
    }
    if (a.dtype != b.dtype || a.shape != b.shape) {
      return ctx.unsupported(
          "output " + std::to_string(i) + ": the branches give " +
          std::string(dtype_name(a.dtype)) + shape_to_string(a.shape) + " and " +
          std::string(dtype_name(b.dtype)) + shape_to_string(b.shape) +
          "; with a condition known only at run time etc computes both branches and selects, "
          "which needs one type and shape");
    }
    ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", c},
                                                                 {"self", ctx.value_of(a)},
                                                                 {"other", ctx.value_of(b)}}));
    ETC_RETURN_IF_ERROR(ctx.set_output(static_cast<int>(i), y));
  }
  return Status();
}

Status convert_loop(NodeCtx& ctx) {
  std::optional<int64_t> trip_count;
  if (ctx.has_input(0)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* m, ctx.require_constant(0, "the trip count M"));
    if (m->numel() != 1) return ctx.invalid("the trip count must hold one element");
    trip_count = m->ints()[0];
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* c, ctx.require_constant(1, "the condition"));
    ETC_ASSIGN_OR_RETURN(cond, condition_value(ctx, *c, "the condition"));
  }
  std::vector<Entry> carried;
  for (int i = 2; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.unsupported("an omitted loop-carried value");
    carried.push_back(ctx.input_entry(i));
  }
  const size_t n = carried.size();
  const size_t outputs = static_cast<size_t>(ctx.num_outputs());
  if (outputs < n) return ctx.invalid("fewer outputs than loop-carried values");
  const size_t k = outputs - n;
  std::vector<std::vector<Entry>> steps(k);
  int64_t i = 0;
  for (; (!trip_count || i < *trip_count) && cond; ++i) {
    if (i >= kMaxIterations) {
      return ctx.unsupported("more than " + std::to_string(kMaxIterations) +
                             " iterations to unroll");
    }
    std::vector<Entry> in;
    HostTensor iteration = host_from_ints(DType::kInt64, {}, {i});
    in.push_back(Entry{std::nullopt, iteration, DType::kInt64, {}});
    HostTensor c = host_from_ints(DType::kBool, {}, {1});
    in.push_back(Entry{std::nullopt, c, DType::kBool, {}});
    in.insert(in.end(), carried.begin(), carried.end());
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out, ctx.subgraph("body", in));
    ETC_RETURN_IF_ERROR(check_count(ctx, "body", out.size(), 1 + outputs));
    if (!out[0].constant) {
      return ctx.unsupported(
          "the condition the body computes (its output 0) must be known at export time to "
          "unroll the loop");
    }
    ETC_ASSIGN_OR_RETURN(cond, condition_value(ctx, *out[0].constant, "the body's condition"));
    for (size_t j = 0; j < n; ++j)
      carried[j] = out[1 + j];
    for (size_t j = 0; j < k; ++j)
      steps[j].push_back(out[1 + n + j]);
  }
  for (size_t j = 0; j < n; ++j)
    ETC_RETURN_IF_ERROR(ctx.set_output_entry(static_cast<int>(j), carried[j]));
  for (size_t j = 0; j < k; ++j) {
    if (!ctx.has_output(static_cast<int>(n + j))) continue;
    if (steps[j].empty()) {
      return ctx.unsupported("a loop that runs no iteration: its scan outputs' shapes are unknown");
    }
    ETC_ASSIGN_OR_RETURN(Entry y,
                         stack_entries(ctx, steps[j], 0, "scan output " + std::to_string(j)));
    ETC_RETURN_IF_ERROR(ctx.set_output_entry(static_cast<int>(n + j), y));
  }
  return Status();
}

Status convert_scan(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t m, ctx.attr_int("num_scan_inputs", std::nullopt));
  const bool batched = ctx.opset() < 9;  // Scan-8: a batch dim first, sequence_lens input 0
  const int first = batched ? 1 : 0;
  const int64_t n = ctx.num_inputs() - first - m;
  if (m < 1 || n < 0) return ctx.invalid("num_scan_inputs does not fit the inputs");
  const int64_t k = ctx.num_outputs() - n;
  if (k < 0) return ctx.invalid("fewer outputs than states");
  std::vector<Entry> states, scans;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.missing_input_error(i);
    (i < first + n ? states : scans).push_back(ctx.input_entry(i));
  }
  ScanPlan plan;
  int64_t budget = kMaxIterations;
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(plan.in_axes, per_input(ctx, "scan_input_axes", scans.size(), 0));
    ETC_ASSIGN_OR_RETURN(plan.in_reverse, per_input(ctx, "scan_input_directions", scans.size(), 0));
    ETC_ASSIGN_OR_RETURN(plan.out_axes, per_input(ctx, "scan_output_axes", k, 0));
    ETC_ASSIGN_OR_RETURN(plan.out_reverse, per_input(ctx, "scan_output_directions", k, 0));
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out,
                         unroll_scan(ctx, states, scans, plan, n + k, &budget));
    for (size_t i = 0; i < out.size(); ++i)
      ETC_RETURN_IF_ERROR(ctx.set_output_entry(static_cast<int>(i), out[i]));
    return Status();
  }
  // Scan-8: every tensor is [batch, ...], the scan inputs [batch, sequence, ...]; each batch
  // is its own scan.
  ETC_ASSIGN_OR_RETURN(plan.in_reverse, per_input(ctx, "directions", scans.size(), 0));
  plan.in_axes.assign(scans.size(), 0);
  plan.out_axes.assign(static_cast<size_t>(k), 0);
  plan.out_reverse.assign(static_cast<size_t>(k), 0);
  int64_t batch = -1;
  for (const Entry& e : states) {
    if (e.shape.empty()) return ctx.invalid("a state has no batch dim");
    batch = e.shape[0];
  }
  for (const Entry& e : scans) {
    if (e.shape.size() < 2) return ctx.invalid("a scan input has no batch and sequence dims");
    if (batch >= 0 && e.shape[0] != batch) return ctx.invalid("batch sizes differ");
    batch = e.shape[0];
  }
  if (ctx.has_input(0)) {
    const HostTensor* lens = ctx.constant(0);
    const int64_t length = scans[0].shape[1];
    bool full = lens != nullptr;
    if (lens) {
      for (int64_t l : lens->ints())
        full = full && l == length;
    }
    if (!full) {
      return ctx.unsupported("sequence_lens other than the full sequence (" +
                             std::to_string(length) + " steps, known at export time)");
    }
  }
  std::vector<std::vector<Entry>> per_batch(static_cast<size_t>(n + k));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Entry> s, x;
    for (const Entry& e : states) {
      ETC_ASSIGN_OR_RETURN(ValueId v, select(ctx, ctx.value_of(e), 0, b));
      s.push_back(ctx.entry_of(v));
    }
    for (const Entry& e : scans) {
      ETC_ASSIGN_OR_RETURN(ValueId v, select(ctx, ctx.value_of(e), 0, b));
      x.push_back(ctx.entry_of(v));
    }
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out,
                         unroll_scan(ctx, s, x, plan, static_cast<size_t>(n + k), &budget));
    for (size_t i = 0; i < out.size(); ++i)
      per_batch[i].push_back(out[i]);
  }
  if (batch <= 0) return ctx.unsupported("a batch of 0");
  for (size_t i = 0; i < per_batch.size(); ++i) {
    ETC_ASSIGN_OR_RETURN(Entry y,
                         stack_entries(ctx, per_batch[i], 0, "output " + std::to_string(i)));
    ETC_RETURN_IF_ERROR(ctx.set_output_entry(static_cast<int>(i), y));
  }
  return Status();
}

}  // namespace etc::onnx_import
