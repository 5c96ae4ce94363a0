// What an ONNX op converter sees: the node, its inputs (IR values and/or values known at
// export time), its attributes, and ways to emit IR nodes and define its outputs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontends/onnx/host_tensor.h"
#include "graph/graph.h"
#include "onnx.pb.h"

namespace etc::onnx_import {

// One ONNX name during import: a tensor (an IR value, a value known at export time, or
// both), or a sequence or optional whose elements are tensor entries. Sequences and
// optionals exist only during import: their length (or presence) is known at export time,
// and at the program's boundary each element is a tensor input or output of its own.
struct Entry {
  enum class Kind { kTensor, kSequence, kOptional };
  std::optional<ValueId> value;
  std::optional<HostTensor> constant;
  DType dtype = DType::kFloat32;  // a sequence's or optional's: its elements'
  std::vector<int64_t> shape;
  Kind kind = Kind::kTensor;
  std::vector<Entry> elements;  // a sequence's; an optional's (none, or its value)

  bool is_tensor() const { return kind == Kind::kTensor; }
};

class Importer;

class NodeCtx {
 public:
  NodeCtx(Importer& importer, const onnx::NodeProto& node, int index, int64_t opset);

  const onnx::NodeProto& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type(); }
  int64_t opset() const { return opset_; }
  Location location() const;

  // --- Inputs -------------------------------------------------------------------------
  int num_inputs() const { return node_.input_size(); }
  bool has_input(int i) const { return i < node_.input_size() && !node_.input(i).empty(); }
  DType dtype(int i) const;
  const std::vector<int64_t>& shape(int i) const;
  int64_t rank(int i) const { return static_cast<int64_t>(shape(i).size()); }
  // The IR value of input i (a known constant becomes an IR constant on first use).
  Result<ValueId> input(int i);
  // Input i's value if it is known at export time, else nullptr.
  const HostTensor* constant(int i) const;
  // Input i's value, or an error saying it must be known at export time.
  Result<const HostTensor*> require_constant(int i, const std::string& what);
  bool all_inputs_constant() const;

  // --- Attributes ---------------------------------------------------------------------
  const onnx::AttributeProto* attr(const std::string& name) const;
  Result<int64_t> attr_int(const std::string& name, std::optional<int64_t> fallback) const;
  Result<float> attr_float(const std::string& name, std::optional<float> fallback) const;
  Result<std::string> attr_string(const std::string& name,
                                  std::optional<std::string> fallback) const;
  Result<std::vector<int64_t>> attr_ints(const std::string& name,
                                         std::optional<std::vector<int64_t>> fallback) const;
  Result<std::vector<float>> attr_floats(const std::string& name) const;
  Result<std::vector<std::string>> attr_strings(const std::string& name) const;  // [] if absent
  Result<HostTensor> attr_tensor(const std::string& name) const;

  // --- Outputs ------------------------------------------------------------------------
  int num_outputs() const { return node_.output_size(); }
  bool has_output(int i) const { return i < node_.output_size() && !node_.output(i).empty(); }
  Status set_output(int i, ValueId value);
  Status set_output_constant(int i, HostTensor value);
  // Fails when optional output i (which etc does not compute) is requested.
  Status require_no_output(int i, const std::string& what) const;

  // --- Emitting IR ----------------------------------------------------------------------
  // Adds an IR node with named arguments (defaults filled from the schema), infers its
  // output types, and returns its first output.
  Result<ValueId> emit(OpKind op,
                       std::initializer_list<std::pair<std::string_view, ArgValue>> args);
  // Every output of the node emit() added last.
  const std::vector<ValueId>& last_outputs() const { return last_outputs_; }
  // Values known at export time: emit() evaluates a node whose tensor arguments are all
  // constants of at most this many elements (and whose result is no larger) with its CPU
  // kernel (consteval/evaluate.h) instead of adding it; its outputs are known constants.
  static constexpr int64_t kMaxEvalElements = int64_t{1} << 20;
  // A new IR constant.
  ValueId add_constant(const HostTensor& value);
  // Marks `v` (emitted by this node, its shape an upper bound) dynamic-bound: its size is
  // known only at run time, when its kernel resizes it. The importer lets such a value be
  // a graph output only.
  void mark_dynamic_bound(ValueId v);
  // Shape of an IR value emitted or read by this node.
  const std::vector<int64_t>& sizes_of(ValueId v) const;

  // --- Subgraphs (If, Loop, Scan) -------------------------------------------------------
  // Input i as the importer holds it (an IR value and/or a constant).
  const Entry& input_entry(int i) const { return entry(i); }
  // An entry for an IR value.
  Entry entry_of(ValueId v) const;
  // The IR value of an entry (a constant becomes a new IR constant).
  ValueId value_of(const Entry& e);
  // Sets output i to an entry (an IR value or a constant).
  Status set_output_entry(int i, const Entry& e);
  // Converts the graph attribute `name` with its inputs bound to `inputs`, in order (the
  // outer scope's tensors visible), and returns its outputs. Each call converts it anew:
  // Loop and Scan unroll by calling it once per iteration.
  Result<std::vector<Entry>> subgraph(const std::string& name, const std::vector<Entry>& inputs);

  // --- Errors -------------------------------------------------------------------------
  Status invalid(const std::string& message) const;
  Status unsupported(const std::string& message) const;
  // The first read of an input the node does not have (an error; ok if none): dtype(),
  // shape() and rank() of a missing input return an empty float32 placeholder and record
  // it here, and the importer reports it in place of whatever the converter returned.
  const Status& missing_input() const { return missing_; }
  // "input i is required, but the node has N input(s) [and input i is empty]", located.
  Status missing_input_error(int i) const;

  int64_t wrap_axis(int64_t axis, int64_t rank) const;
  Status check_axis(int64_t axis, int64_t rank, const std::string& what) const;

 private:
  const Entry& entry(int i) const;
  // emit()'s evaluation: true when the node's outputs became known constants (last_outputs_).
  Result<bool> fold(OpKind op, const std::vector<ArgValue>& args,
                    const std::vector<std::string>& names, const std::vector<TensorSpec>& specs);
  mutable Status missing_;
  Importer& im_;
  const onnx::NodeProto& node_;
  int index_;
  std::string pointer_;  // "/graph/node/N", or within a subgraph ".../then_branch/node/N"
  int64_t opset_;
  int emitted_ = 0;
  std::vector<ValueId> last_outputs_;
};

using Converter = std::function<Status(NodeCtx&)>;
// The node's op type, prefixed "domain::" unless it is of the default ONNX domain.
std::string qualified_op_type(const onnx::NodeProto& node);
// Qualified op type -> converter: the default ONNX domain's ops and those of
// ai.onnx.preview.training (onnx_ops_training.cpp).
const std::map<std::string, Converter>& converters();
// How many leading inputs ONNX requires of `op_type` (1 for ops not listed specially).
int required_inputs(const std::string& op_type);
// Whether `op_type` of opsets 1-6 means what it means at opset 7, apart from the
// `consumed_inputs` hint (the converters read it as at opset 7).
bool same_since_opset1(const std::string& op_type);
// Before opset 7: whether the node means what the converters read it as (an op of
// same_since_opset1(), one whose version in the model's opset already has opset 7's
// meaning, or a legacy `broadcast` that numpy broadcasting reproduces); an unsupported
// error saying why not otherwise.
Status check_before_opset7(NodeCtx& ctx);
// Evaluates the node at export time when all its inputs are known and small. Returns true
// when it did (and set every output), false when the op is not evaluable here.
Result<bool> try_evaluate(NodeCtx& ctx);

}  // namespace etc::onnx_import
