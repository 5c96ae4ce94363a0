// The symbols of a torch.export program: those its user inputs' dims are exported with
// (dynamic_shapes) and those its ops make from the data (nonzero's count), with the ranges the
// program gives them, for a bounded dynamic export to import it at several points; and what
// the converters ask about symbols while importing (their ranges, the expressions the program
// records for symbolic bools and for tensor sizes). The program is read in place: no part of
// it is copied, and no malformed entry throws.
#include <algorithm>
#include <regex>
#include <set>

#include "frontends/torch_export/importer.h"
#include "support/checked_math.h"
#include "support/file_io.h"

namespace etc {
namespace torch_import {

std::string bare_symbol(const std::string& expr) {
  static const std::regex sym(
      R"re(^\s*(?:Symbol\('([A-Za-z_][A-Za-z0-9_]*)'.*\)|([A-Za-z_][A-Za-z0-9_]*))\s*$)re");
  std::smatch m;
  if (!std::regex_match(expr, m, sym)) return {};
  return m[1].matched ? m[1].str() : m[2].str();
}

const Json* member_or_null(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

namespace {

// What a missing list reads as (an lvalue: `cond ? *list : kNone` copies nothing).
const Json kNone = Json::array();

// j[i] when j is an array that long, else nullptr.
const Json* element_or_null(const Json* j, size_t i) {
  return j != nullptr && j->is_array() && i < j->size() ? &(*j)[i] : nullptr;
}

// The string at j, or "".
std::string string_or_empty(const Json* j) {
  return j != nullptr && j->is_string() ? j->get<std::string>() : std::string();
}

// The name of the tensor an argument or output names ({"as_tensor": {"name": ...}}), or "".
std::string tensor_name_of(const Json* j) {
  const Json* t = j ? member_or_null(*j, "as_tensor") : nullptr;
  return string_or_empty(t ? member_or_null(*t, "name") : nullptr);
}

// The symbol a size entry ({"as_expr": {"expr_str": ...}}) is, or "" (an int, another
// expression).
std::string size_symbol(const Json& d) {
  const Json* e = member_or_null(d, "as_expr");
  return bare_symbol(string_or_empty(e ? member_or_null(*e, "expr_str") : nullptr));
}

}  // namespace

std::optional<std::pair<int64_t, int64_t>> Importer::symbol_range(const std::string& sym) const {
  const Json* ranges = member_or_null(program_, "range_constraints");
  const Json* r = ranges ? member_or_null(*ranges, sym.c_str()) : nullptr;
  const Json* lo = r ? member_or_null(*r, "min_val") : nullptr;
  const Json* hi = r ? member_or_null(*r, "max_val") : nullptr;
  if (!lo || !hi || !lo->is_number_integer() || !hi->is_number_integer()) return std::nullopt;
  return std::pair{lo->get<int64_t>(), hi->get<int64_t>()};
}

std::string Importer::sym_bool_expr(const std::string& name) const {
  const Json* gm = member_or_null(program_, "graph_module");
  const Json* graph = gm ? member_or_null(*gm, "graph") : nullptr;
  const Json* values = graph ? member_or_null(*graph, "sym_bool_values") : nullptr;
  const Json* v = values ? member_or_null(*values, name.c_str()) : nullptr;
  const Json* e = v ? member_or_null(*v, "as_expr") : nullptr;
  return string_or_empty(e ? member_or_null(*e, "expr_str") : nullptr);
}

std::optional<std::vector<std::variant<int64_t, std::string>>> Importer::recorded_sizes(
    const std::string& name) const {
  const Json* meta = tensor_values_ ? member_or_null(*tensor_values_, name.c_str()) : nullptr;
  const Json* sizes = meta ? member_or_null(*meta, "sizes") : nullptr;
  if (!sizes || !sizes->is_array()) return std::nullopt;
  std::vector<std::variant<int64_t, std::string>> out;
  for (const Json& d : *sizes) {
    const Json* i = member_or_null(d, "as_int");
    if (i && i->is_number_integer()) {
      out.emplace_back(i->get<int64_t>());
    } else {
      out.emplace_back(size_symbol(d));
    }
  }
  return out;
}

Result<std::vector<TorchSymbol>> Importer::input_symbols() {
  ETC_RETURN_IF_ERROR(find_layout());
  ETC_RETURN_IF_ERROR(check_versions());
  ETC_RETURN_IF_ERROR(read_program());
  std::vector<TorchSymbol> out;
  const Json* gm = member_or_null(program_, "graph_module");
  const Json* graph = gm ? member_or_null(*gm, "graph") : nullptr;
  const Json* sig = gm ? member_or_null(*gm, "signature") : nullptr;
  const Json* specs = sig ? member_or_null(*sig, "input_specs") : nullptr;
  const Json* inputs = graph ? member_or_null(*graph, "inputs") : nullptr;
  const Json* values = graph ? member_or_null(*graph, "tensor_values") : nullptr;
  if (specs == nullptr || inputs == nullptr || values == nullptr || !specs->is_array() ||
      !inputs->is_array() || graph == nullptr)
    return out;  // run() says what is wrong
  // The size entries the program records for tensor `name` (null when none).
  auto sizes_of = [&](const std::string& name) -> const Json* {
    const Json* meta = member_or_null(*values, name.c_str());
    const Json* sizes = meta ? member_or_null(*meta, "sizes") : nullptr;
    return sizes != nullptr && sizes->is_array() ? sizes : nullptr;
  };
  // A symbol's entry, made on first sight with the program's range constraint (min 0 and no
  // upper bound where it gives none).
  auto symbol = [&](const std::string& name, const std::string& what) -> TorchSymbol& {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const TorchSymbol& s) { return s.name == name; });
    if (it == out.end()) {
      TorchSymbol s{name, 0, -1, {}};
      const Json* ranges = member_or_null(program_, "range_constraints");
      const Json* r = ranges ? member_or_null(*ranges, name.c_str()) : nullptr;
      const Json* lo = r ? member_or_null(*r, "min_val") : nullptr;
      const Json* hi = r ? member_or_null(*r, "max_val") : nullptr;
      if (lo && lo->is_number_integer()) s.min = lo->get<int64_t>();
      if (hi && hi->is_number_integer()) s.max = hi->get<int64_t>();
      out.push_back(std::move(s));
      it = out.end() - 1;
    }
    if (std::find(it->inputs.begin(), it->inputs.end(), what) == it->inputs.end())
      it->inputs.push_back(what);
    return *it;
  };
  const size_t n = std::min(specs->size(), inputs->size());
  // A symbol an --input-shape fixes (on any input it sizes) is not open: read_inputs checks
  // it.
  std::set<std::string> fixed;
  for (size_t i = 0; i < n; ++i) {
    const std::string name = tensor_name_of(element_or_null(inputs, i));
    const Json* sizes = options_.input_shapes.count(name) ? sizes_of(name) : nullptr;
    for (const Json& d : sizes ? *sizes : kNone)
      fixed.insert(size_symbol(d));
  }
  for (size_t i = 0; i < n; ++i) {
    if (member_or_null((*specs)[i], "user_input") == nullptr) continue;
    const std::string name = tensor_name_of(element_or_null(inputs, i));
    const Json* sizes = options_.input_shapes.count(name) ? nullptr : sizes_of(name);
    for (const Json& d : sizes ? *sizes : kNone) {
      const std::string sym = size_symbol(d);
      if (!sym.empty() && !fixed.count(sym)) symbol(sym, name);
    }
  }
  // Data-dependent symbols: nonzero's count (u0), in [0 or more, the input's numel].
  const Json* nodes = member_or_null(*graph, "nodes");  // graph checked above
  for (const Json& node : nodes != nullptr && nodes->is_array() ? *nodes : kNone) {
    if (short_target(node) != "aten.nonzero.default") continue;
    const std::string name = tensor_name_of(element_or_null(member_or_null(node, "outputs"), 0));
    const Json* arg = element_or_null(member_or_null(node, "inputs"), 0);
    const std::string input = tensor_name_of(arg ? member_or_null(*arg, "arg") : nullptr);
    const Json* sizes = sizes_of(name);
    const std::string sym = sizes && !sizes->empty() ? size_symbol((*sizes)[0]) : std::string();
    // No symbol: a count known at export (an empty input), or a node the import refuses.
    if (sym.empty() ||
        std::any_of(out.begin(), out.end(), [&](const TorchSymbol& t) { return t.name == sym; }))
      continue;
    TorchSymbol& t = symbol(sym, "the count of nonzero '" + name + "'");
    t.min = std::max<int64_t>(0, t.min);
    // The input's numel bounds the count when its sizes are static.
    std::optional<int64_t> numel = 1;
    const Json* in_sizes = sizes_of(input);
    for (const Json& d : in_sizes ? *in_sizes : kNone) {
      const Json* v = member_or_null(d, "as_int");
      numel = v && v->is_number_integer() && numel ? checked_mul(*numel, v->get<int64_t>())
                                                   : std::nullopt;
    }
    if (in_sizes != nullptr && numel && (t.max < 0 || *numel < t.max)) t.max = *numel;
  }
  return out;
}

}  // namespace torch_import

Result<std::vector<TorchSymbol>> torch_export_input_symbols(const std::string& path,
                                                            const TorchImportOptions& options) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  if (!torch_import::looks_like_zip(blob->bytes())) return std::vector<TorchSymbol>();
  ETC_ASSIGN_OR_RETURN(torch_import::ZipArchive zip,
                       torch_import::ZipArchive::open(std::move(blob), path));
  torch_import::Importer importer(std::move(zip), options);
  return importer.input_symbols();
}

}  // namespace etc
