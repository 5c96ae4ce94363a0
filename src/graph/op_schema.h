// Operator schemas in ATen's notation and the argument values a node carries.
//
// Each op in ops.def is declared by its ATen functional schema, e.g.
//   add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
// parse_op_schema() turns that text into an OpSchema; the JSON reader, the verifier and
// (later) the .pte emitter all work from it, so argument names, order and defaults are
// ATen's own and a node maps one-to-one onto ExecuTorch's out-variant kernel call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "graph/dtype.h"
#include "graph/ids.h"
#include "support/status.h"

namespace etc {

enum class ArgType : uint8_t {
  kTensor,
  kTensorList,          // Tensor[]
  kOptionalTensorList,  // Tensor?[]: invalid ValueIds are None
  kScalar,              // int, float or bool
  kInt,                 // int, SymInt
  kIntList,             // int[], int[N], SymInt[]
  kFloat,
  kFloatList,
  kBool,
  kBoolList,
  kString,
  kScalarType,    // a dtype
  kLayout,        // only None is supported
  kDevice,        // only None is supported
  kMemoryFormat,  // only None is supported
};

std::string_view arg_type_name(ArgType t);

// A value of one argument of a node. std::monostate is None.
struct Scalar {
  std::variant<int64_t, double, bool> v;
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  double to_double() const;
  auto operator<=>(const Scalar&) const = default;
};

using ArgValue = std::variant<std::monostate, ValueId, std::vector<ValueId>, Scalar, int64_t,
                              std::vector<int64_t>, double, std::vector<double>, bool,
                              std::vector<bool>, std::string, DType>;

struct ArgSchema {
  std::string name;
  ArgType type = ArgType::kTensor;
  bool optional = false;    // `T?`: None is allowed
  int fixed_length = 0;     // N in int[N]: a single int broadcasts to N elements; for
                            // N > 1 a list must have 1 or N elements (int[1] takes any)
  bool kwarg_only = false;  // after `*`
  bool is_out = false;      // `Tensor(a!) out`: an out-variant's mutable out tensor
  std::optional<ArgValue> default_value;  // already materialised
};

struct OpSchema {
  std::string ns = "aten";  // namespace: "aten", or "et_copy" / "executorch" for compiler ops
  std::string name;         // "add"
  std::string overload;     // "Tensor"; "default" when the schema has none
  std::vector<ArgSchema> args;
  int num_outputs = 1;  // all returns are tensors; -1: a variable number (`-> Tensor[]`);
                        // 0: none (`-> ()`)

  // The arguments an out variant writes (`Tensor(a!) out`), in order; none in a functional
  // schema.
  size_t num_out_args() const;

  // "aten.add.Tensor", the name used in graph JSON and dumps.
  std::string qualified_name() const;
  const ArgSchema* find_arg(std::string_view name) const;
  int arg_index(std::string_view name) const;  // -1 if absent
};

// Parses an ATen functional schema, optionally namespaced ("et_copy::_h2d_copy(...)").
// Supports the argument types above, `?`, `[N]`, `*` (keyword-only marker), defaults
// (ints, floats, True/False/None, 'strings', lists) and returns `Tensor`, `(Tensor, ...)`
// or `Tensor[]`. Alias annotations like Tensor(a) are skipped.
Result<OpSchema> parse_op_schema(std::string_view text);

// "None", "3", "[1, 2]", "%5", ...; value references print as %id.
std::string arg_value_to_string(const ArgValue& v);

}  // namespace etc
