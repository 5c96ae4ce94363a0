// The torch.export importer's state, shared by its driver (torch_import.cpp) and the node
// context converters see (torch_node.cpp). Internal to etc_torch_export.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>

#include "frontends/torch_export/pt2_archive.h"
#include "frontends/torch_export/torch_import.h"
#include "frontends/torch_export/torch_node.h"
#include "frontends/torch_export/torch_pickle.h"

namespace etc::torch_import {

// PyTorch's serde ScalarType enum -> etc dtype; nullopt for dtypes etc has no equivalent of.
std::optional<DType> dtype_from_torch(int64_t v);
// The dtype enum's name ("float32", "complex64", ...).
std::string torch_dtype_name(int64_t v);
// "torch.ops.aten.linear.default" -> "aten.linear.default"; other targets as written.
std::string short_target(const Json& node);
// j[key] when j is an object holding it, else nullptr (never throws, never copies).
const Json* member_or_null(const Json& j, const char* key);
// The node's first stack frame ("m.py:49: return self.fc(x)"), or empty.
std::string source_line(const Json& node);
// Row-major strides of `sizes`, in elements.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes);
// The tensor `spec` (dtype, sizes) as the view (strides, storage offset, in elements) of a
// storage of `storage_bytes` bytes (the entry `path`), read by `read`: checked to stay inside
// the storage, then shared when contiguous, gathered when strided. `fail` words an error.
Result<TensorSpec> storage_view(TensorSpec spec, const std::vector<int64_t>& strides,
                                int64_t offset, const std::string& path, uint64_t storage_bytes,
                                const std::function<Result<ConstantData>()>& read,
                                const std::function<Status(const std::string&)>& fail);

// One import: the archive, the program, and the name -> value environment nodes build.
class Importer {
 public:
  Importer(ZipArchive zip, const TorchImportOptions& options)
      : zip_(std::move(zip)), options_(options) {}

  Result<Graph> run();
  // The user inputs' symbols that options.input_shapes leaves open, with their ranges.
  Result<std::vector<TorchSymbol>> input_symbols();

  const TorchImportOptions& options() const { return options_; }

  Location at(const std::string& pointer, const std::string& node = {}) const {
    Location loc = zip_.at(model_entry_);
    loc.pointer = pointer;
    loc.node = node;
    return loc;
  }

  // --- Used by TorchNode ------------------------------------------------------------------
  Graph graph_;
  std::unordered_map<std::string, Entry> env_;
  std::unordered_map<std::string, int64_t> sym_ints_;
  // Symbolic bools (_operator.ge, ...), each evaluated at this build's sizes.
  std::unordered_map<std::string, bool> sym_bools_;
  // Data-dependent symbols (nonzero's count) -> the range their op guarantees ([0, numel]),
  // which the program's range constraints may narrow by assertions.
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> data_symbols_;
  // Symbol `sym`'s range constraint [min, max]; nullopt where the program gives no bounded
  // one.
  std::optional<std::pair<int64_t, int64_t>> symbol_range(const std::string& sym) const;
  // The expression (sympy's text) the program records for symbolic bool `name`, or "".
  std::string sym_bool_expr(const std::string& name) const;
  // The sizes the program records for tensor `name` (tensor_values), each an int or a
  // symbol's name ("" for another expression); nullopt when it records none.
  std::optional<std::vector<std::variant<int64_t, std::string>>> recorded_sizes(
      const std::string& name) const;
  std::unordered_set<std::string> torch_names_;  // every tensor name the program defines
  // Every tensor name a node argument or an output reads, with how many times.
  std::unordered_map<std::string, int> read_names_;
  std::unordered_set<uint32_t> named_values_;  // IR values bound to a program name by a node
  // Constants whose values the importer computed (from known tensors, or evaluated by
  // TorchNode::emit over such constants): the values a converter may read as known.
  std::unordered_set<uint32_t> known_values_;
  // The default export's views (kViews in torch_import.cpp): each view's name -> the tensor
  // it views and the node that made it. An in-place op on a view writes through to the
  // tensors it views (TorchNode::write); a view read after a write to its root since it was
  // made is refused, since PyTorch would read the new values through it.
  struct ViewOf {
    std::string base;
    const Json* node = nullptr;
    int index = 0;
    std::string target;
  };
  std::unordered_map<std::string, ViewOf> view_of_;
  std::unordered_map<std::string, int> writes_;       // root name -> in-place writes so far
  std::unordered_map<std::string, int> view_writes_;  // view name -> its root's writes then
  std::string view_root(std::string name) const {
    for (auto it = view_of_.find(name); it != view_of_.end(); it = view_of_.find(name))
      name = it->second.base;
    return name;
  }
  // Whether `name` (or the view an in-place op's output `name` wrote) is a view read after
  // a write to its root since it was made.
  bool stale_view(const std::string& name) const {
    std::string n = name;
    if (auto r = alias_root_.find(n); r != alias_root_.end()) n = r->second;
    auto it = view_writes_.find(n);
    if (it == view_writes_.end()) return false;
    auto w = writes_.find(view_root(n));
    return it->second != (w == writes_.end() ? 0 : w->second);
  }
  std::string stale_view_message(const std::string& name) const {
    std::string n = name;
    if (auto r = alias_root_.find(n); r != alias_root_.end()) n = r->second;
    return "reads '" + name + "', a view of '" + view_root(n) +
           "' made before an in-place write to it (PyTorch reads the written values through "
           "the view); export with ep.run_decompositions() instead";
  }
  // Whether PyTorch's eager layout of tensor `name` (tensor_values) is contiguous: a reshape,
  // flatten or contiguous of it is then a view, else a copy.
  bool eager_contiguous(const std::string& name) const {
    if (tensor_values_ == nullptr || !tensor_values_->contains(name)) return false;
    const Json& meta = (*tensor_values_)[name];
    const Json& sizes = meta.value("sizes", Json::array());
    const Json& strides = meta.value("strides", Json::array());
    if (sizes.size() != strides.size()) return false;
    int64_t expect = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      const Json& s = sizes[d];
      const Json& st = strides[d];
      if (!s.is_object() || !s.contains("as_int") || !st.is_object() || !st.contains("as_int"))
        return false;  // symbolic: not known to be contiguous
      const int64_t size = s["as_int"].get<int64_t>();
      if (size != 1 && st["as_int"].get<int64_t>() != expect) return false;
      expect *= size;
    }
    return true;
  }
  // dropout(input, p, train) with train False (a view of its input; in training, a new tensor).
  static bool dropout_in_eval(const Json& node) {
    for (const Json& in : node["inputs"]) {
      if (in.is_object() && in.value("name", "") == "train" && in.contains("arg") &&
          in["arg"].is_object() && in["arg"].contains("as_bool"))
        return !in["arg"]["as_bool"].get<bool>();
    }
    return false;
  }
  const Json* tensor_values_ = nullptr;
  // In-place ops: every program name that refers to the same tensor (a placeholder and the
  // outputs of in-place ops on it) shares one root; rebinding updates the whole group.
  std::unordered_map<std::string, std::string> alias_root_;
  std::unordered_map<std::string, std::vector<std::string>> alias_group_;
  // Placeholders that are not buffers (parameters, constants, user inputs): name -> kind.
  std::unordered_map<std::string, std::string> fixed_placeholders_;
  // Buffers no op updates in place (imported as weights, not state).
  std::unordered_set<std::string> weight_buffers_;
  // Buffers the program mutates (placeholder names), found before the inputs are read.
  std::unordered_set<std::string> mutated_buffers_;
  // Weights that are tensor subclasses (torchao's Int8Tensor, stored pickled), by
  // placeholder name: the program reads their inner tensors through
  // export.access_subclass_inner_tensor, each a constant made on first read.
  struct SubclassWeight {
    std::string fqn;
    std::string class_name;  // "torchao.quantization.Int8Tensor"
    std::map<std::string, TensorSpec> inner;
    std::map<std::string, ValueId> values;
  };
  std::unordered_map<std::string, SubclassWeight> subclass_weights_;

  std::string fresh_value_name(const std::string& base) const {
    if (!torch_names_.count(base) && !graph_.find_value(base)) return base;
    for (int k = 1;; ++k) {
      std::string n = base + "." + std::to_string(k);
      if (!torch_names_.count(n) && !graph_.find_value(n)) return n;
    }
  }
  ValueId materialize(const std::string& name, Entry& e) {
    if (!e.value) {
      std::string bytes = e.known->bytes();
      TensorSpec spec = TensorSpec::make(e.known->dtype, e.known->shape);
      spec.is_const = true;
      auto blob = make_blob(std::move(bytes));
      size_t n = blob->bytes().size();
      spec.constant = ConstantData{std::move(blob), 0, n};
      // The program's own name for the value, unless the graph has it already.
      e.value = graph_.add_constant(graph_.find_value(name) ? fresh_value_name(name) : name,
                                    std::move(spec));
      known_values_.insert(e.value->v);
    }
    return *e.value;
  }

 private:
  Status find_layout();
  Status check_versions();
  Status read_program();
  Status read_weight_configs();
  Result<TensorSpec> tensor_meta(const Json& meta, const std::string& where) const;
  // A weight's type and bytes (as a constant's spec).
  Result<TensorSpec> read_weight(const std::string& fqn, const std::string& pointer);
  Result<ValueId> add_weight(const std::string& graph_name, const std::string& fqn,
                             const std::string& pointer);
  // Whether weight `fqn` is stored pickled (use_pickle: true).
  bool is_pickled(const std::string& fqn) const;
  // A pickled weight (torch_pickle.h): a torchao subclass becomes a SubclassWeight, a plain
  // tensor a constant.
  // Opens pickled weight `fqn`'s torch.save archive; `file` names its entry.
  Result<TorchSaveArchive> open_pickled(const std::string& fqn, std::string* file) const;
  // Every pickled weight is a plain tensor or a tensor subclass etc imports.
  Status check_pickled_weights();
  Status read_pickled_weight(const std::string& graph_name, const std::string& fqn,
                             const std::string& pointer);
  Status find_mutated_buffers(const Json& nodes);
  Status read_inputs();
  Status read_state_updates();
  Status report_unsupported();
  Status convert_nodes();
  Status check_output_types(const Json& node, int index, const std::string& node_name);
  Status read_outputs();
  // Every tensor name read by a node argument or a signature output.
  void collect_reads(const Json& nodes, const Json& graph_module) {
    // Arguments nest a few levels deep; a deeper document is not walked past 16 levels (a
    // damaged file must not exhaust the stack).
    std::function<void(const Json&, int)> walk = [&](const Json& j, int depth) {
      if (depth > 16) return;
      if (j.is_object()) {
        if (j.contains("name") && j["name"].is_string() && j.size() == 1) {
          ++read_names_[j["name"].get<std::string>()];
        }
        for (const auto& [k, v] : j.items())
          walk(v, depth + 1);
      } else if (j.is_array()) {
        for (const Json& v : j)
          walk(v, depth + 1);
      }
    };
    for (const Json& n : nodes) {
      if (n.is_object() && n.contains("inputs")) walk(n["inputs"], 0);
    }
    if (graph_module.contains("signature") && graph_module["signature"].is_object() &&
        graph_module["signature"].contains("output_specs")) {
      walk(graph_module["signature"]["output_specs"], 0);
    }
  }

  Result<const Json*> member(const Json& obj, const char* key, const std::string& pointer,
                             Json::value_t type, const std::string& type_name) const {
    if (!obj.is_object()) return invalid_input("expected an object", at(pointer));
    auto it = obj.find(key);
    if (it == obj.end()) return invalid_input(std::string("'") + key + "' is missing", at(pointer));
    bool ok =
        it->type() == type || (type == Json::value_t::number_integer && it->is_number_unsigned());
    if (!ok) {
      return invalid_input(
          std::string("'") + key + "' must be " + type_name + ", got " + it->type_name(),
          at(pointer + "/" + key));
    }
    return &*it;
  }

  ZipArchive zip_;
  const TorchImportOptions& options_;
  std::string prefix_;       // "model/" — the archive's top folder
  std::string model_name_;   // "model" (models/model.json)
  std::string model_entry_;  // "model/models/model.json"
  Json program_;
  Json weights_config_;    // fqn -> {path_name, tensor_meta, ...}
  Json constants_config_;  // fqn -> {...}
  std::string weights_entry_, constants_entry_;
};

}  // namespace etc::torch_import
