// Symbolic ints and bools (a tensor's sizes as symbols, the arithmetic and comparisons on
// them), the run-time assertions on them, and nonzero, whose size is a symbol of its own.
//
// A program exported with dynamic sizes computes with its symbols (`_operator.mul(s0, 2)`,
// `_operator.ge(u0, 0)`). etc imports such a program once per point of its symbols' ranges
// (export.cpp, dynamic_points), so here every symbolic int and bool has a value: the
// operators are evaluated. What the program asserts about its symbols
// (aten._assert_scalar) must then hold at run time for every size, not only at the points
// imported: an assertion the symbol's range implies is dropped (nothing can break it), any
// other is refused by name (etc does not check sizes at run time beyond their bounds). The
// range of an input's symbol is the program's contract with its caller; that of a
// data-dependent symbol is what its op guarantees (nonzero: [0, numel]), not the narrower
// range torch.export records after the program's own torch._check calls.
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <variant>

#include "frontends/torch_export/torch_node.h"
#include "frontends/torch_export/torch_ops.h"
#include "support/checked_math.h"

namespace etc::torch_import {
namespace {

// sym_size.int(self, dim): the size, known at export time.
Status convert_sym_size(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(dim, n.wrap_dim(dim, static_cast<int64_t>(self->shape.size()), "dim"));
  return n.set_int_output(0, self->shape[dim]);
}

// sym_numel, sym_stride.int, sym_storage_offset: known at export time (etc's tensors are
// contiguous and start at their storage).
Status convert_sym_numel(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  int64_t numel = 1;
  for (int64_t d : self->shape)
    numel *= d;
  return n.set_int_output(0, numel);
}
// sym_is_contiguous(self): export evaluates it while tracing (the output is None and the
// program is specialised on the answer), so nothing is computed; a program that reads the
// symbolic bool later is refused.
Status convert_sym_is_contiguous(TorchNode& n) {
  ETC_RETURN_IF_ERROR(n.entry("self").status());
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (!n.output_is_none(i)) {
      return n.unsupported(
          "sym_is_contiguous's result is read (it depends on PyTorch's memory layout, which "
          "etc's contiguous tensors do not keep)");
    }
  }
  return Status();
}
Status convert_sym_stride(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(dim, n.wrap_dim(dim, static_cast<int64_t>(self->shape.size()), "dim"));
  int64_t stride = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < self->shape.size(); ++d)
    stride *= self->shape[d];
  return n.set_int_output(0, stride);
}
Status convert_sym_storage_offset(TorchNode& n) {
  return n.set_int_output(0, 0);
}

// Python's integer operators on two ints (floor division and modulo round toward -inf). A
// result past int64 is an error: the program's sizes cannot reach it.
Result<int64_t> int_operator(TorchNode& n, const std::string& op, int64_t a, int64_t b) {
  std::optional<int64_t> r;
  if (op == "add") {
    r = checked_add(a, b);
  } else if (op == "sub") {
    r = checked_sub(a, b);
  } else if (op == "mul") {
    r = checked_mul(a, b);
  } else if (op == "floordiv" || op == "mod") {
    if (b == 0) return n.invalid("integer division by zero");
    if (a == std::numeric_limits<int64_t>::min() && b == -1) {
      r = op == "mod" ? std::optional<int64_t>(0) : std::nullopt;
    } else {
      int64_t q = a / b, m = a % b;
      if (m != 0 && ((m < 0) != (b < 0))) {
        --q;
        m += b;
      }
      r = op == "floordiv" ? q : m;
    }
  } else {
    return n.unsupported("symbolic operator " + op);
  }
  if (!r) {
    return n.invalid("symbolic " + op + " of " + std::to_string(a) + " and " + std::to_string(b) +
                     " overflows int64");
  }
  return *r;
}

Converter sym_int_binary(const std::string& op) {
  return [op](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(int64_t a, n.int_arg("a"));
    ETC_ASSIGN_OR_RETURN(int64_t b, n.int_arg("b"));
    ETC_ASSIGN_OR_RETURN(int64_t v, int_operator(n, op, a, b));
    return n.set_int_output(0, v);
  };
}

Status convert_sym_neg(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(int64_t a, n.int_arg("a"));
  if (a == std::numeric_limits<int64_t>::min()) return n.invalid("symbolic neg overflows int64");
  return n.set_int_output(0, -a);
}

Converter sym_compare(const std::string& op) {
  return [op](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(int64_t a, n.int_arg("a"));
    ETC_ASSIGN_OR_RETURN(int64_t b, n.int_arg("b"));
    const bool v = op == "eq"   ? a == b
                   : op == "ne" ? a != b
                   : op == "ge" ? a >= b
                   : op == "gt" ? a > b
                   : op == "le" ? a <= b
                                : a < b;
    return n.set_bool_output(0, v);
  };
}

Converter sym_logic(const std::string& op) {
  return [op](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(bool a, n.bool_arg("a"));
    if (op == "not_") return n.set_bool_output(0, !a);
    ETC_ASSIGN_OR_RETURN(bool b, n.bool_arg("b"));
    return n.set_bool_output(0, op == "and_" ? (a && b) : (a || b));
  };
}

// One side of a comparison as sympy writes it: Symbol('u0', integer=True), Integer(-3), or
// the bare forms u0 and -3.
struct Side {
  std::string symbol;  // empty for a number
  int64_t number = 0;
};

std::optional<Side> parse_side(const std::string& text) {
  static const std::regex kNumber(R"re(^\s*(?:Integer\((-?\d{1,18})\)|(-?\d{1,18}))\s*$)re");
  std::smatch m;
  if (std::regex_match(text, m, kNumber))
    return Side{{}, std::stoll(m[1].matched ? m[1].str() : m[2].str())};
  std::string symbol = bare_symbol(text);
  if (symbol.empty()) return std::nullopt;
  return Side{std::move(symbol), 0};
}

// A comparison of one symbol with a number: "GreaterThan(Symbol('u0', ...), Integer(0))"
// (sympy's Ge/Le/Gt/Lt; also the infix "u0 >= 0"), as (symbol, op, number) with the symbol
// on the left; nullopt for any other expression.
struct Bound {
  std::string symbol;
  std::string op;  // ">=", ">", "<=", "<"
  int64_t number = 0;
};

std::optional<Bound> parse_bound(const std::string& expr) {
  static const std::regex kCall(
      R"re(^\s*(GreaterThan|LessThan|StrictGreaterThan|StrictLessThan)\((.*)\)\s*$)re");
  static const std::regex kInfix(R"re(^\s*(.+?)\s*(>=|<=|>|<)\s*(.+?)\s*$)re");
  std::smatch m;
  std::string op, left, right;
  if (std::regex_match(expr, m, kCall)) {
    const std::string name = m[1].str(), inner = m[2].str();
    op = name == "GreaterThan"         ? ">="
         : name == "LessThan"          ? "<="
         : name == "StrictGreaterThan" ? ">"
                                       : "<";
    // The arguments: split at the comma outside parentheses.
    int depth = 0;
    size_t cut = std::string::npos;
    for (size_t i = 0; i < inner.size(); ++i) {
      if (inner[i] == '(') ++depth;
      if (inner[i] == ')') --depth;
      if (inner[i] == ',' && depth == 0) {
        if (cut != std::string::npos) return std::nullopt;
        cut = i;
      }
    }
    if (cut == std::string::npos) return std::nullopt;
    left = inner.substr(0, cut);
    right = inner.substr(cut + 1);
  } else if (std::regex_match(expr, m, kInfix)) {
    left = m[1].str();
    op = m[2].str();
    right = m[3].str();
  } else {
    return std::nullopt;
  }
  std::optional<Side> a = parse_side(left), b = parse_side(right);
  if (!a || !b || a->symbol.empty() == b->symbol.empty()) return std::nullopt;
  if (a->symbol.empty()) {  // number op symbol -> symbol op' number
    std::swap(a, b);
    op = op == ">=" ? "<=" : op == "<=" ? ">=" : op == ">" ? "<" : ">";
  }
  return Bound{a->symbol, op, b->number};
}

bool holds(const Bound& b, int64_t v) {
  if (b.op == ">=") return v >= b.number;
  if (b.op == ">") return v > b.number;
  if (b.op == "<=") return v <= b.number;
  return v < b.number;
}

// _assert_scalar(self, assert_msg): see the file's comment.
Status convert_assert_scalar(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(bool value, n.bool_arg("self"));
  ETC_ASSIGN_OR_RETURN(std::string message, n.string_arg("assert_msg", std::string()));
  const std::string name = n.sym_bool_name("self");
  const std::string expr = name.empty() ? std::string() : n.sym_bool_expr(name);
  // Sizes vary at run time only in a bounded dynamic export (else they are all fixed and the
  // value holds for every run).
  const bool symbolic = n.dynamic_build();
  if (!value) {
    return n.invalid("the program's assertion fails at " +
                     std::string(n.dynamic_build() ? "these sizes" : "its sizes") + ": " + message);
  }
  if (!symbolic) return Status();
  // Holds at both ends of the symbol's range -> everywhere in it (the comparison is monotonic).
  std::optional<Bound> b = parse_bound(expr);
  std::optional<std::pair<int64_t, int64_t>> range;
  if (b) {
    range = n.symbol_range(b->symbol);
    if (range && holds(*b, range->first) && holds(*b, range->second)) return Status();
  }
  const std::string what = b ? b->symbol + " " + b->op + " " + std::to_string(b->number)
                             : (expr.empty() ? message : expr);
  const std::string given = b && range
                                ? ", which " + b->symbol + " in [" + std::to_string(range->first) +
                                      ", " + std::to_string(range->second) + "] does not imply"
                                : "";
  return n.unsupported("the program asserts " + what + given +
                       "; etc checks sizes at run time only against their bounds. Drop the "
                       "torch._check, or fix the sizes with --input-shape");
}

// nonzero(self) -> [count, rank] int64. The program sizes the output by a symbol of its own
// (u0, in [0, numel]); this build takes that symbol's value at its point (the upper bound
// by default), marks the output dynamic-bound, and the kernel resizes it to the count.
Status convert_nonzero(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId y, n.emit(OpKind::Nonzero, {{"self", x}}));
  const std::vector<int64_t> bound = n.sizes(y);  // [numel, rank]
  std::optional<std::string> name = n.output_name(0);
  auto recorded = name ? n.recorded_sizes(*name) : std::nullopt;
  int64_t count = bound[0];
  if (recorded && !recorded->empty()) {
    if (const auto* c = std::get_if<int64_t>(&recorded->front())) {
      // Known at export only for an empty input.
      if (*c == 0 && bound[0] == 0) return n.set_output(0, y);
      return n.unsupported("the program records nonzero's count as the constant " +
                           std::to_string(*c) + " for an input of " + std::to_string(bound[0]) +
                           " elements");
    }
    const std::string& sym = std::get<std::string>(recorded->front());
    if (sym.empty())
      return n.unsupported("nonzero's count is recorded as an expression, not a symbol");
    count = std::min(n.symbol_value(sym).value_or(bound[0]), bound[0]);
    n.set_data_symbol(sym, 0, bound[0]);
  }
  n.set_data_bound(y, {count, bound[1]});
  return n.set_output(0, y);
}

}  // namespace

void add_symbolic_converters(std::map<std::string, Converter>& t) {
  for (const char* op : {"add", "sub", "mul", "floordiv", "mod"})
    t[std::string("_operator.") + op] = sym_int_binary(op);
  t["aten.sym_size.int"] = convert_sym_size;
  t["aten.sym_numel.default"] = convert_sym_numel;
  t["aten.sym_is_contiguous.default"] = convert_sym_is_contiguous;
  t["aten.sym_stride.int"] = convert_sym_stride;
  t["aten.sym_storage_offset.default"] = convert_sym_storage_offset;
  t["_operator.neg"] = convert_sym_neg;
  for (const char* op : {"eq", "ne", "ge", "gt", "le", "lt"})
    t[std::string("_operator.") + op] = sym_compare(op);
  for (const char* op : {"and_", "or_", "not_"})
    t[std::string("_operator.") + op] = sym_logic(op);
  t["aten._assert_scalar.default"] = convert_assert_scalar;
  t["aten.nonzero.default"] = convert_nonzero;
}

}  // namespace etc::torch_import
