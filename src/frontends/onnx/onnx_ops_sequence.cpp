// Sequences and optionals, known at export time: a sequence is a list of tensor entries
// whose length the importer knows (its positions must be known too), an optional one that
// holds zero or one. Their ops rearrange entries and emit nothing; at the program's boundary
// each element is a tensor input or output of its own (see Entry).
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {

namespace {

Result<const Entry*> sequence_input(NodeCtx& ctx, int i) {
  const Entry& e = ctx.input_entry(i);
  if (e.kind != Entry::Kind::kSequence) {
    return ctx.invalid("input " + std::to_string(i) + " must be a sequence");
  }
  return &e;
}

Result<const Entry*> tensor_input(NodeCtx& ctx, int i) {
  const Entry& e = ctx.input_entry(i);
  if (!e.is_tensor()) return ctx.invalid("input " + std::to_string(i) + " must be a tensor");
  return &e;
}

// A position into a sequence of `n` (input i, known at export time), in [-n, n) or, to
// insert, [-n, n]; made non-negative.
Result<int64_t> position(NodeCtx& ctx, int i, int64_t n, bool insert) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(i, "the position"));
  if (t->numel() != 1 || dtype_is_float(t->dtype))
    return ctx.invalid("the position must be an integer scalar");
  int64_t p = t->ints()[0];
  const int64_t hi = insert ? n : n - 1;
  if (p < -n || p > hi) {
    return ctx.invalid("position " + std::to_string(p) + " is out of range for a sequence of " +
                       std::to_string(n));
  }
  return p < 0 ? p + n : p;
}

Entry sequence_of(DType dtype, std::vector<Entry> elements) {
  Entry e;
  e.kind = Entry::Kind::kSequence;
  e.dtype = dtype;
  e.elements = std::move(elements);
  return e;
}

Status check_element(NodeCtx& ctx, const Entry& seq, const Entry& t) {
  if (t.dtype != seq.dtype) {
    return ctx.invalid("a " + std::string(dtype_name(t.dtype)) + " tensor in a sequence of " +
                       std::string(dtype_name(seq.dtype)));
  }
  return Status();
}

}  // namespace

Status convert_sequence_construct(NodeCtx& ctx) {
  std::vector<Entry> elements;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ETC_ASSIGN_OR_RETURN(const Entry* t, tensor_input(ctx, i));
    if (!elements.empty() && t->dtype != elements[0].dtype)
      return ctx.invalid("the tensors must have one type");
    elements.push_back(*t);
  }
  const DType dtype = elements.empty() ? DType::kFloat32 : elements[0].dtype;
  return ctx.set_output_entry(0, sequence_of(dtype, std::move(elements)));
}

Status convert_sequence_empty(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t code, ctx.attr_int("dtype", 1));
  std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(code));
  if (!dt) return ctx.unsupported("dtype " + onnx_dtype_name(static_cast<int32_t>(code)));
  return ctx.set_output_entry(0, sequence_of(*dt, {}));
}

Status convert_sequence_insert(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* seq, sequence_input(ctx, 0));
  ETC_ASSIGN_OR_RETURN(const Entry* t, tensor_input(ctx, 1));
  const auto n = static_cast<int64_t>(seq->elements.size());
  // An empty sequence takes its type from what goes in when SequenceEmpty left the default.
  if (n > 0) ETC_RETURN_IF_ERROR(check_element(ctx, *seq, *t));
  int64_t at = n;
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(at, position(ctx, 2, n, /*insert=*/true));
  }
  Entry out = *seq;
  out.dtype = t->dtype;
  out.elements.insert(out.elements.begin() + at, *t);
  return ctx.set_output_entry(0, out);
}

Status convert_sequence_at(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* seq, sequence_input(ctx, 0));
  const auto n = static_cast<int64_t>(seq->elements.size());
  ETC_ASSIGN_OR_RETURN(int64_t at, position(ctx, 1, n, /*insert=*/false));
  return ctx.set_output_entry(0, seq->elements[static_cast<size_t>(at)]);
}

Status convert_sequence_erase(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* seq, sequence_input(ctx, 0));
  const auto n = static_cast<int64_t>(seq->elements.size());
  if (n == 0) return ctx.invalid("erasing from an empty sequence");
  int64_t at = n - 1;
  if (ctx.has_input(1)) {
    ETC_ASSIGN_OR_RETURN(at, position(ctx, 1, n, /*insert=*/false));
  }
  Entry out = *seq;
  out.elements.erase(out.elements.begin() + at);
  return ctx.set_output_entry(0, out);
}

Status convert_sequence_length(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* seq, sequence_input(ctx, 0));
  return ctx.set_output_constant(
      0, host_from_ints(DType::kInt64, {}, {static_cast<int64_t>(seq->elements.size())}));
}

// SequenceMap(sequence, more sequences or tensors...; body): the body once per position,
// given the sequences' elements there and the tensors as they are; each body output
// becomes a sequence.
Status convert_sequence_map(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* first, sequence_input(ctx, 0));
  const size_t n = first->elements.size();
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const Entry& e = ctx.input_entry(i);
    if (e.kind == Entry::Kind::kOptional) return ctx.invalid("an optional input");
    if (e.kind == Entry::Kind::kSequence && e.elements.size() != n) {
      return ctx.invalid("sequences of lengths " + std::to_string(n) + " and " +
                         std::to_string(e.elements.size()));
    }
  }
  const size_t outputs = static_cast<size_t>(ctx.num_outputs());
  std::vector<std::vector<Entry>> results(outputs);
  for (size_t k = 0; k < n; ++k) {
    std::vector<Entry> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Entry& e = ctx.input_entry(i);
      in.push_back(e.is_tensor() ? e : e.elements[k]);
    }
    ETC_ASSIGN_OR_RETURN(std::vector<Entry> out, ctx.subgraph("body", in));
    if (out.size() != outputs) return ctx.invalid("the body's outputs do not match the node's");
    for (size_t j = 0; j < outputs; ++j) {
      if (!out[j].is_tensor()) return ctx.unsupported("a body output that is not a tensor");
      results[j].push_back(out[j]);
    }
  }
  for (size_t j = 0; j < outputs; ++j) {
    // An empty result takes the type the body declares for the output.
    DType dtype = results[j].empty() ? DType::kFloat32 : results[j][0].dtype;
    if (results[j].empty()) {
      const onnx::AttributeProto* body = ctx.attr("body");
      if (body && static_cast<int>(j) < body->g().output_size()) {
        const auto& t = body->g().output(static_cast<int>(j)).type();
        if (t.has_tensor_type()) {
          if (auto dt = dtype_from_onnx(t.tensor_type().elem_type())) dtype = *dt;
        }
      }
    }
    ETC_RETURN_IF_ERROR(
        ctx.set_output_entry(static_cast<int>(j), sequence_of(dtype, std::move(results[j]))));
  }
  return Status();
}

// ConcatFromSequence(sequence; axis, new_axis): cat of the elements along axis, or with
// new_axis 1 stacked along a new one.
Status convert_concat_from_sequence(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* seq, sequence_input(ctx, 0));
  if (seq->elements.empty()) return ctx.invalid("concatenating an empty sequence");
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", std::nullopt));
  ETC_ASSIGN_OR_RETURN(int64_t new_axis, ctx.attr_int("new_axis", 0));
  const std::vector<int64_t>& first = seq->elements[0].shape;
  const auto rank = static_cast<int64_t>(first.size()) + (new_axis != 0 ? 1 : 0);
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, rank, "axis"));
  axis = ctx.wrap_axis(axis, rank);
  std::vector<ValueId> parts;
  for (const Entry& e : seq->elements) {
    if (e.shape.size() != first.size()) return ctx.invalid("the tensors differ in rank");
    for (size_t d = 0; d < first.size(); ++d) {
      if ((new_axis != 0 || static_cast<int64_t>(d) != axis) && e.shape[d] != first[d]) {
        return ctx.invalid("tensors " + shape_to_string(first) + " and " +
                           shape_to_string(e.shape) + " do not concatenate");
      }
    }
    ValueId v = ctx.value_of(e);
    if (new_axis != 0) {
      ETC_ASSIGN_OR_RETURN(v, ctx.emit(OpKind::Unsqueeze, {{"self", v}, {"dim", axis}}));
    }
    parts.push_back(v);
  }
  if (parts.size() == 1) return ctx.set_output(0, parts[0]);
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Cat, {{"tensors", parts}, {"dim", axis}}));
  return ctx.set_output(0, y);
}

// SplitToSequence(input, split?; axis, keepdims): the input's parts along axis as a
// sequence: pieces of 1 (without the axis unless keepdims), of the size a scalar split
// gives (the last one shorter), or of the sizes a 1-d split lists (known at export time).
Status convert_split_to_sequence(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const Entry* x, tensor_input(ctx, 0));
  const auto rank = static_cast<int64_t>(x->shape.size());
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, rank, "axis"));
  axis = ctx.wrap_axis(axis, rank);
  ETC_ASSIGN_OR_RETURN(int64_t keepdims, ctx.attr_int("keepdims", 1));
  const int64_t length = x->shape[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  bool drop_axis = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(length), 1);
    drop_axis = keepdims == 0;
  } else {
    ETC_ASSIGN_OR_RETURN(const HostTensor* split, ctx.require_constant(1, "split"));
    std::vector<int64_t> v = split->ints();
    if (split->shape.empty()) {
      if (v[0] <= 0) return ctx.invalid("split must be positive");
      for (int64_t at = 0; at < length; at += v[0])
        sizes.push_back(std::min(v[0], length - at));
    } else {
      sizes = v;
      int64_t total = 0;
      for (int64_t n : sizes) {
        if (n < 0) return ctx.invalid("split sizes must not be negative");
        total += n;
      }
      if (total != length) {
        return ctx.invalid("split sizes add up to " + std::to_string(total) + ", not " +
                           std::to_string(length));
      }
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId xv, ctx.input(0));
  std::vector<Entry> parts;
  int64_t at = 0;
  for (int64_t n : sizes) {
    ValueId part;
    if (drop_axis) {
      ETC_ASSIGN_OR_RETURN(
          part, ctx.emit(OpKind::SelectInt, {{"self", xv}, {"dim", axis}, {"index", at}}));
    } else {
      ETC_ASSIGN_OR_RETURN(
          part,
          ctx.emit(
              OpKind::SliceTensor,
              {{"self", xv}, {"dim", axis}, {"start", at}, {"end", at + n}, {"step", int64_t{1}}}));
    }
    parts.push_back(ctx.entry_of(part));
    at += n;
  }
  return ctx.set_output_entry(0, sequence_of(x->dtype, std::move(parts)));
}

// Optional(input?; type): the input wrapped, or an empty optional of `type`.
Status convert_optional(NodeCtx& ctx) {
  Entry out;
  out.kind = Entry::Kind::kOptional;
  if (ctx.has_input(0)) {
    out.dtype = ctx.input_entry(0).dtype;
    out.elements.push_back(ctx.input_entry(0));
    return ctx.set_output_entry(0, out);
  }
  const onnx::AttributeProto* type = ctx.attr("type");
  if (type == nullptr) return ctx.invalid("an empty Optional needs its 'type' attribute");
  const onnx::TypeProto& t = type->tp();
  const onnx::TypeProto* tensor = t.has_tensor_type()     ? &t
                                  : t.has_sequence_type() ? &t.sequence_type().elem_type()
                                                          : nullptr;
  if (tensor && tensor->has_tensor_type()) {
    if (auto dt = dtype_from_onnx(tensor->tensor_type().elem_type())) out.dtype = *dt;
  }
  return ctx.set_output_entry(0, out);
}

// OptionalHasElement(input?): whether the optional holds a value (known at export time);
// a tensor or sequence holds itself (opset 18).
Status convert_optional_has_element(NodeCtx& ctx) {
  bool has = false;
  if (ctx.has_input(0)) {
    const Entry& e = ctx.input_entry(0);
    has = e.kind != Entry::Kind::kOptional || !e.elements.empty();
  }
  return ctx.set_output_constant(0, host_from_ints(DType::kBool, {}, {has ? 1 : 0}));
}

Status convert_optional_get_element(NodeCtx& ctx) {
  const Entry& e = ctx.input_entry(0);
  if (e.kind != Entry::Kind::kOptional) return ctx.set_output_entry(0, e);
  if (e.elements.empty()) return ctx.invalid("the optional holds no value");
  return ctx.set_output_entry(0, e.elements[0]);
}

}  // namespace etc::onnx_import
