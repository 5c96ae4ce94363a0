// Test helper: runs one op's shape/dtype inference on made-up input types.
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/verifier.h"

namespace etc::testing {

class OpTester {
 public:
  ValueId in(DType t, std::vector<int64_t> sizes) {
    return g_.add_input("v" + std::to_string(g_.value_slots()),
                        TensorSpec::make(t, std::move(sizes)));
  }

  Result<std::vector<TensorType>> infer(
      OpKind op, std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
    ETC_ASSIGN_OR_RETURN(std::vector<ArgValue> args, bind_args(op, named));
    const OpSchema& schema = op_info(op).schema;
    for (size_t i = 0; i < args.size(); ++i) {
      if (std::string err = check_arg_kind(schema.args[i], args[i]); !err.empty()) {
        return invalid_input("argument '" + schema.args[i].name + "': " + err);
      }
    }
    std::vector<TensorType> out;
    auto type_of = [this](ValueId id) -> const TensorSpec& { return g_.value(id).spec; };
    ETC_RETURN_IF_ERROR(
        infer_types(op, args, type_of, Location{.pointer = "/nodes/0", .node = "n"}, &out));
    return out;
  }

  // The single (first) output type; fails the test on an error.
  TensorType one(OpKind op, std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
    Result<std::vector<TensorType>> r = infer(op, named);
    INFO(r.status().to_string());
    REQUIRE(r.ok());
    return r->at(0);
  }

  // The error text; fails the test if inference succeeds.
  std::string error(OpKind op, std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
    Result<std::vector<TensorType>> r = infer(op, named);
    REQUIRE_FALSE(r.ok());
    return r.status().to_string();
  }

 private:
  Graph g_;
};

inline TensorType T(DType d, std::vector<int64_t> s) {
  return TensorType{d, std::move(s)};
}
inline ArgValue ints(std::vector<int64_t> v) {
  return ArgValue(std::move(v));
}
inline ArgValue i64(int64_t v) {
  return ArgValue(v);
}
inline ArgValue none() {
  return ArgValue(std::monostate{});
}

}  // namespace etc::testing
