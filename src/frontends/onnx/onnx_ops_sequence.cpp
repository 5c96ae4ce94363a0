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
