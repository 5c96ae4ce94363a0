#include "graph/op_schema.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace etc {

std::string_view arg_type_name(ArgType t) {
  switch (t) {
    case ArgType::kTensor:
      return "Tensor";
    case ArgType::kTensorList:
      return "Tensor[]";
    case ArgType::kOptionalTensorList:
      return "Tensor?[]";
    case ArgType::kScalar:
      return "Scalar";
    case ArgType::kInt:
      return "int";
    case ArgType::kIntList:
      return "int[]";
    case ArgType::kFloat:
      return "float";
    case ArgType::kFloatList:
      return "float[]";
    case ArgType::kBool:
      return "bool";
    case ArgType::kBoolList:
      return "bool[]";
    case ArgType::kString:
      return "str";
    case ArgType::kScalarType:
      return "ScalarType";
    case ArgType::kLayout:
      return "Layout";
    case ArgType::kDevice:
      return "Device";
    case ArgType::kMemoryFormat:
      return "MemoryFormat";
  }
  return "?";
}

double Scalar::to_double() const {
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::get<bool>(v) ? 1.0 : 0.0;
}

std::string OpSchema::qualified_name() const {
  return ns + "." + name + "." + overload;
}

const ArgSchema* OpSchema::find_arg(std::string_view n) const {
  for (const ArgSchema& a : args) {
    if (a.name == n) return &a;
  }
  return nullptr;
}

int OpSchema::arg_index(std::string_view n) const {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

size_t OpSchema::num_out_args() const {
  return static_cast<size_t>(
      std::count_if(args.begin(), args.end(), [](const ArgSchema& a) { return a.is_out; }));
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// Splits on commas at bracket depth 0.
std::vector<std::string_view> split_top(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[') ++depth;
    if (s[i] == ')' || s[i] == ']') --depth;
    if (s[i] == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) parts.push_back(trim(s.substr(start)));
  return parts;
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<ArgValue> parse_default(const ArgSchema& a, std::string_view text) {
  auto bad = [&] {
    return internal_error("op schema: bad default '" + std::string(text) + "' for " + a.name);
  };
  if (text == "None") {
    if (!a.optional) return bad();
    return ArgValue(std::monostate{});
  }
  switch (a.type) {
    case ArgType::kInt:
      if (auto v = parse_int(text)) return ArgValue(*v);
      return bad();
    case ArgType::kFloat:
      if (auto v = parse_double(text)) return ArgValue(*v);
      return bad();
    case ArgType::kBool:
      if (text == "True" || text == "False") return ArgValue(text == "True");
      return bad();
    case ArgType::kScalar:
      if (auto v = parse_int(text)) return ArgValue(Scalar{*v});
      if (auto v = parse_double(text)) return ArgValue(Scalar{*v});
      if (text == "True" || text == "False") return ArgValue(Scalar{text == "True"});
      return bad();
    case ArgType::kString:
      if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
        return ArgValue(std::string(text.substr(1, text.size() - 2)));
      }
      return bad();
    case ArgType::kScalarType:
      // The dtype names native_functions.yaml uses for defaults.
      if (text == "long") return ArgValue(DType::kInt64);
      if (text == "int") return ArgValue(DType::kInt32);
      if (text == "float") return ArgValue(DType::kFloat32);
      if (text == "double") return ArgValue(DType::kFloat64);
      if (text == "bool") return ArgValue(DType::kBool);
      return bad();
    case ArgType::kIntList: {
      std::vector<int64_t> items;
      if (auto single = parse_int(text)) {
        items.assign(a.fixed_length > 0 ? a.fixed_length : 1, *single);
        return ArgValue(items);
      }
      if (text.size() < 2 || text.front() != '[' || text.back() != ']') return bad();
      for (std::string_view item : split_top(text.substr(1, text.size() - 2))) {
        auto v = parse_int(item);
        if (!v) return bad();
        items.push_back(*v);
      }
      return ArgValue(items);
    }
    default:
      return bad();
  }
}

Result<ArgSchema> parse_arg(std::string_view text, bool kwarg_only) {
  ArgSchema a;
  a.kwarg_only = kwarg_only;
  std::string_view decl = text;
  std::string_view def;
  if (size_t eq = text.find('='); eq != std::string_view::npos) {
    decl = trim(text.substr(0, eq));
    def = trim(text.substr(eq + 1));
  }
  size_t space = decl.rfind(' ');
  if (space == std::string_view::npos) {
    return internal_error("op schema: argument without a name: '" + std::string(text) + "'");
  }
  a.name = std::string(trim(decl.substr(space + 1)));
  std::string type(trim(decl.substr(0, space)));
  // Drop alias annotations: Tensor(a) / Tensor(a!); a mutable one (`!`) marks an out.
  if (size_t p = type.find('('); p != std::string::npos) {
    size_t q = type.find(')', p);
    if (q == std::string::npos)
      return internal_error("op schema: unclosed alias annotation in '" + std::string(text) + "'");
    a.is_out = type.substr(p, q - p).find('!') != std::string::npos;
    type.erase(p, q - p + 1);
  }
  if (!type.empty() && type.back() == '?') {
    a.optional = true;
    type.pop_back();
  }
  if (type == "Tensor?[]") {  // a list whose elements may be None
    a.type = ArgType::kOptionalTensorList;
    return a;
  }
  bool is_list = false;
  if (size_t b = type.find('['); b != std::string::npos) {
    is_list = true;
    std::string_view len = std::string_view(type).substr(b + 1, type.size() - b - 2);
    if (!len.empty()) a.fixed_length = static_cast<int>(parse_int(len).value_or(0));
    type.resize(b);
  }
  if (type == "Tensor") {
    a.type = is_list ? ArgType::kTensorList : ArgType::kTensor;
  } else if (type == "int" || type == "SymInt") {
    a.type = is_list ? ArgType::kIntList : ArgType::kInt;
  } else if (type == "float") {
    a.type = is_list ? ArgType::kFloatList : ArgType::kFloat;
  } else if (type == "bool") {
    a.type = is_list ? ArgType::kBoolList : ArgType::kBool;
  } else if (type == "Scalar" && !is_list) {
    a.type = ArgType::kScalar;
  } else if (type == "str" && !is_list) {
    a.type = ArgType::kString;
  } else if (type == "ScalarType" && !is_list) {
    a.type = ArgType::kScalarType;
  } else if (type == "Layout" && !is_list) {
    a.type = ArgType::kLayout;
  } else if (type == "Device" && !is_list) {
    a.type = ArgType::kDevice;
  } else if (type == "MemoryFormat" && !is_list) {
    a.type = ArgType::kMemoryFormat;
  } else {
    return internal_error("op schema: unknown argument type '" + type + "'");
  }
  if (!def.empty()) {
    ETC_ASSIGN_OR_RETURN(a.default_value, parse_default(a, def));
  }
  return a;
}

}  // namespace

Result<OpSchema> parse_op_schema(std::string_view text) {
  OpSchema s;
  size_t open = text.find('(');
  size_t arrow = text.rfind("->");
  size_t close = text.rfind(')', arrow);
  if (open == std::string_view::npos || arrow == std::string_view::npos ||
      close == std::string_view::npos || close < open) {
    return internal_error("op schema: cannot parse '" + std::string(text) + "'");
  }
  std::string_view full_name = trim(text.substr(0, open));
  if (size_t colons = full_name.find("::"); colons != std::string_view::npos) {
    s.ns = std::string(full_name.substr(0, colons));
    full_name.remove_prefix(colons + 2);
  }
  size_t dot = full_name.find('.');
  s.name = std::string(full_name.substr(0, dot));
  s.overload = dot == std::string_view::npos ? "default" : std::string(full_name.substr(dot + 1));
  bool kwarg_only = false;
  for (std::string_view part : split_top(text.substr(open + 1, close - open - 1))) {
    if (part == "*") {
      kwarg_only = true;
      continue;
    }
    ETC_ASSIGN_OR_RETURN(ArgSchema a, parse_arg(part, kwarg_only));
    s.args.push_back(std::move(a));
  }
  std::string_view ret = trim(text.substr(arrow + 2));
  if (ret == "()") {
    s.num_outputs = 0;  // an out variant that writes a list of outs and returns nothing
  } else if (ret == "Tensor[]") {
    s.num_outputs = -1;
  } else if (ret.size() >= 2 && ret.front() == '(') {
    s.num_outputs = static_cast<int>(split_top(ret.substr(1, ret.size() - 2)).size());
  } else if (ret.substr(0, 6) == "Tensor") {
    s.num_outputs = 1;
  } else {
    return internal_error("op schema: unsupported return '" + std::string(ret) + "'");
  }
  return s;
}

namespace {

struct Printer {
  std::string operator()(std::monostate) const { return "None"; }
  std::string operator()(ValueId id) const { return "%" + std::to_string(id.v); }
  std::string operator()(const std::vector<ValueId>& ids) const {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i)
      s += (i ? ", " : "") + (ids[i].valid() ? "%" + std::to_string(ids[i].v) : "None");
    return s + "]";
  }
  std::string operator()(const Scalar& sc) const {
    return std::visit([this](auto x) { return (*this)(x); }, sc.v);
  }
  std::string operator()(int64_t i) const { return std::to_string(i); }
  std::string operator()(double d) const {
    char buf[32];
    auto [p, ec] = std::to_chars(buf, buf + sizeof buf, d);
    std::string s(buf, p);
    if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // keep floats visible
    return s;
  }
  std::string operator()(bool b) const { return b ? "True" : "False"; }
  std::string operator()(const std::string& s) const { return "'" + s + "'"; }
  std::string operator()(DType t) const { return std::string(dtype_name(t)); }
  template <typename T>
  std::string operator()(const std::vector<T>& items) const {
    std::string s = "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) s += ", ";
      s += (*this)(static_cast<T>(items[i]));
    }
    return s + "]";
  }
};

}  // namespace

std::string arg_value_to_string(const ArgValue& v) {
  return std::visit(Printer{}, v);
}

}  // namespace etc
