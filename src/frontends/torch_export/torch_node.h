// What a torch.export op converter sees: one node of the serialized graph, its arguments by
// schema name (tensors as IR values or as values known at export time), and ways to emit
// IR nodes and define the node's outputs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/torch_export/known_tensor.h"
#include "graph/graph.h"

namespace etc::torch_import {

using Json = nlohmann::json;

// One tensor name of the program: an IR value, a value known at export time, or both.
struct Entry {
  std::optional<ValueId> value;
  std::optional<KnownTensor> known;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
};

class Importer;

class TorchNode {
 public:
  TorchNode(Importer& importer, const Json& node, int index, std::string target);

  const std::string& target() const { return target_; }  // "aten.linear.default"
  const std::string& name() const { return name_; }
  Location location() const;

  // --- Arguments (by schema name) ---------------------------------------------------------
  // Present and not None.
  bool has(std::string_view arg) const;
  // Whether the argument is a tensor (an `as_tensor`), not a number.
  bool is_tensor(std::string_view arg) const;
  Result<const Entry*> entry(std::string_view arg) const;
  Result<ValueId> tensor(std::string_view arg);
  Result<std::optional<ValueId>> optional_tensor(std::string_view arg);
  Result<std::vector<ValueId>> tensors(std::string_view arg);
  // A Tensor?[] (`as_optional_tensors`, or `as_tensors` when none is None): invalid ids for
  // the Nones.
  Result<std::vector<ValueId>> optional_tensors(std::string_view arg);
  Result<std::vector<const Entry*>> tensor_entries(std::string_view arg) const;
  // The elements of tensor argument `arg` when they are known at export time (made from
  // numbers, or computed by emit()'s evaluation), read on demand; nullopt otherwise.
  std::optional<KnownTensor> known_value(std::string_view arg) const;
  Result<int64_t> int_arg(std::string_view arg,
                          std::optional<int64_t> fallback = std::nullopt) const;
  Result<std::optional<int64_t>> optional_int(std::string_view arg) const;
  Result<std::vector<int64_t>> ints(
      std::string_view arg, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  // The layout PyTorch gave tensor argument `arg` in eager mode (the graph's tensor_values):
  // strides and storage offset in elements. etc's values are contiguous whatever these say;
  // ops that read storage (as_strided) need them to know where each element was.
  struct EagerLayout {
    std::vector<int64_t> strides;
    int64_t storage_offset = 0;
  };
  Result<EagerLayout> eager_layout(std::string_view arg) const;
  // A float[]? (`as_floats`); nullopt for None or an absent argument.
  Result<std::optional<std::vector<double>>> optional_floats(std::string_view arg) const;
  Result<double> float_arg(std::string_view arg,
                           std::optional<double> fallback = std::nullopt) const;
  // A bool, or a symbolic bool (`as_sym_bool`) evaluated at this build's sizes.
  Result<bool> bool_arg(std::string_view arg, std::optional<bool> fallback = std::nullopt) const;
  // The name of the symbolic bool argument `arg` names, or "" when it is not one.
  std::string sym_bool_name(std::string_view arg) const;
  Result<Scalar> scalar(std::string_view arg, std::optional<Scalar> fallback = std::nullopt) const;
  Result<std::optional<Scalar>> optional_scalar(std::string_view arg) const;
  Result<std::optional<DType>> dtype_arg(std::string_view arg) const;
  Result<std::string> string_arg(std::string_view arg, std::optional<std::string> fallback) const;

  // --- IR values ------------------------------------------------------------------------
  const TensorSpec& spec(ValueId v) const;
  // A copy: emitting a node may move the graph's values, and with them a reference.
  std::vector<int64_t> sizes(ValueId v) const { return spec(v).sizes; }
  DType dtype(ValueId v) const { return spec(v).dtype; }
  // export.access_subclass_inner_tensor: inner tensor `attr` of the tensor-subclass weight
  // argument `arg` names (a constant, made on its first read).
  Result<ValueId> subclass_inner_tensor(std::string_view arg, const std::string& attr);
  // An IR value for a known tensor (a new constant).
  ValueId constant(const KnownTensor& t);

  // --- Emitting -------------------------------------------------------------------------
  Result<ValueId> emit(OpKind op,
                       std::initializer_list<std::pair<std::string_view, ArgValue>> args);
  const std::vector<ValueId>& last_outputs() const { return last_outputs_; }

  // --- Outputs --------------------------------------------------------------------------
  int num_outputs() const;
  // The tensors the node returns: its list's length for an op that returns Tensor[] (one
  // `as_tensors` output), else num_outputs().
  int num_tensor_outputs() const;
  // Whether a later node or the program's outputs read tensor output i.
  bool output_used(int i) const;
  // Whether output i is recorded as None (a value export evaluated while tracing).
  bool output_is_none(int i) const;
  // Whether the tensor argument `arg` names is read other than by this node's arguments
  // (by another node or the program's outputs).
  bool read_elsewhere(std::string_view arg) const;
  // Whether argument `arg` names a program input, parameter, constant or a buffer no op
  // updates in place (which etc cannot update).
  bool is_placeholder(std::string_view arg) const;
  Status set_output(int i, ValueId v);
  Status set_known_output(int i, KnownTensor t);
  Status set_int_output(int i, int64_t v);  // an `as_sym_int` output
  Status set_bool_output(int i, bool v);    // an `as_sym_bool` output
  // The program's name for tensor output i; nullopt when it is not a tensor.
  std::optional<std::string> output_name(int i) const;
  // A data-dependent output (nonzero's): `v` sized by this build's value of its symbol (at
  // most the bound inference gave) and marked dynamic-bound. Before set_output.
  void set_data_bound(ValueId v, std::vector<int64_t> sizes);
  // For an in-place op (relu_, add_): later reads of argument `arg` see `v`. When `arg` is a
  // view of another tensor (the default export's slice, select, view, permute, ...), the
  // tensors it views are updated through it, as PyTorch's storage sharing does.
  Status rebind(std::string_view arg, ValueId v);
  // The value bound to output i by set_output or set_known_output (a known one as a constant).
  Result<ValueId> output_value(int i);

  // Whether this import is one build of a bounded dynamic export (options.symbol_values).
  bool dynamic_build() const;
  // --- Symbols --------------------------------------------------------------------------
  // This build's value of symbol `sym` (a point of a bounded dynamic export), if it has one.
  std::optional<int64_t> symbol_value(const std::string& sym) const;
  // The range symbol `sym` keeps at run time: a data-dependent symbol's (set_data_symbol),
  // else the program's range constraint [min, max] (an input's sizes, which the caller
  // must respect); nullopt when unbounded or absent.
  std::optional<std::pair<int64_t, int64_t>> symbol_range(const std::string& sym) const;
  // `sym` is decided by the data, within [lo, hi] whatever the program asserts.
  void set_data_symbol(const std::string& sym, int64_t lo, int64_t hi);
  // The expression (sympy's text) the program records for symbolic bool `name`, or "".
  std::string sym_bool_expr(const std::string& name) const;
  // The sizes the program records for tensor `name`: each an int or a symbol's name ("" for
  // another expression); nullopt when it records none.
  std::optional<std::vector<std::variant<int64_t, std::string>>> recorded_sizes(
      const std::string& name) const;

  // --- Errors ---------------------------------------------------------------------------
  Status invalid(const std::string& message) const;
  Status unsupported(const std::string& message) const;
  Result<int64_t> wrap_dim(int64_t dim, int64_t rank, std::string_view what) const;

 private:
  Result<const Json*> arg_json(std::string_view arg) const;
  // Program name `name` now holds v (rebind's work; views written through to their bases).
  Status write(const std::string& name, ValueId v);
  // Evaluates a node about to be emitted when every tensor argument is known (consteval):
  // its outputs become known constants (last_outputs_) instead of a node. False when it
  // cannot be evaluated now; an error when the kernel rejects the known arguments.
  Result<bool> fold(OpKind op, const std::vector<ArgValue>& args,
                    const std::vector<std::string>& names, const std::vector<TensorSpec>& specs);
  // `base` with the view `view` made of it replaced by `value`.
  Result<ValueId> write_back(const std::string& view, ValueId base, ValueId value);
  // An error when `name` is a view read after a write to its root since it was made.
  Status check_fresh(const std::string& name) const;
  Result<int64_t> sym_int(const Json& j, std::string_view arg) const;
  Location arg_location(std::string_view arg) const;

  Importer& im_;
  std::string torchao_note() const;
  const Json& node_;
  int index_;
  std::string target_;
  std::string name_;
  std::map<std::string, const Json*, std::less<>> args_;
  int emitted_ = 0;
  std::vector<ValueId> last_outputs_;
};

// "Symbol('s11', positive=True, integer=True)" or "s11" -> "s11" (sympy's text of one
// symbol); other expressions: empty (torch_symbols.cpp).
std::string bare_symbol(const std::string& expr);

using Converter = std::function<Status(TorchNode&)>;
// target ("aten.linear.default") -> converter.
const std::map<std::string, Converter>& torch_converters();
// Why etc refuses op `target` by design (said with the op in the import's error); nullopt
// for an op it merely lacks.
std::optional<std::string> torch_refusal(const std::string& target);

}  // namespace etc::torch_import
