// Test helper: graphs written as compact etc.graph JSON.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "export/export_pipeline.h"
#include "frontends/json/json_reader.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "partition/lower.h"

namespace etc::testing {

// inputs: "x:float32[2,2], y:float32[2,2]"-style shorthand is overkill here; take JSON.
inline Graph graph_from_json(const std::string& inputs, const std::string& nodes,
                             const std::string& outputs, const std::string& constants = "[]") {
  std::string text = R"({"format": "etc.graph", "version": 1, "name": "t", "inputs": )" + inputs +
                     R"(, "constants": )" + constants + R"(, "nodes": )" + nodes +
                     R"(, "outputs": )" + outputs + "}";
  Result<Graph> g = parse_graph_json(text, "test.json", ".");
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  return std::move(g).value();
}

// A float32 input declaration.
inline std::string f32(const std::string& name, const std::string& shape = "[2, 2]") {
  return R"({"name": ")" + name + R"(", "dtype": "float32", "shape": )" + shape + "}";
}

inline std::string node(const std::string& name, const std::string& op, const std::string& args,
                        const std::string& out) {
  return R"({"name": ")" + name + R"(", "op": ")" + op + R"(", "args": )" + args +
         R"(, "outputs": [")" + out + R"("]})";
}

inline std::string add(const std::string& name, const std::string& a, const std::string& b,
                       const std::string& out) {
  return node(name, "aten.add.Tensor", R"({"self": ")" + a + R"(", "other": ")" + b + R"("})", out);
}

inline std::string unary(const std::string& name, const std::string& op, const std::string& a,
                         const std::string& out) {
  return node(name, op, R"({"self": ")" + a + R"("})", out);
}

// Lowers the named nodes (each inner list one partition) to `device`, keeping the order.
inline void lower_named(Graph& g, const std::vector<std::vector<std::string>>& groups,
                        Device device, ExportReport& report) {
  PartitionPlan plan;
  plan.schedule.assign(g.order().begin(), g.order().end());
  for (const auto& group : groups) {
    std::vector<NodeId> ids;
    for (NodeId id : g.order()) {
      for (const std::string& name : group) {
        if (g.node(id).name == name) ids.push_back(id);
      }
    }
    REQUIRE(ids.size() == group.size());
    plan.partitions.push_back(ids);
  }
  Status s = lower_partitions(g, plan, device, report);
  INFO(s.to_string());
  REQUIRE(s.ok());
}

struct Counts {
  size_t h2d = 0, d2h = 0, delegates = 0;
  bool operator==(const Counts&) const = default;
};

inline Counts count_nodes(const Graph& g) {
  Counts c;
  for (NodeId id : g.order()) {
    c.h2d += g.node(id).op == OpKind::H2DCopy;
    c.d2h += g.node(id).op == OpKind::D2HCopy;
    c.delegates += g.node(id).op == OpKind::DelegateCall;
  }
  return c;
}

inline void require_valid(const Graph& g) {
  Status s = verify_graph(g);
  INFO(s.to_string() << "\n" << print_graph(g));
  REQUIRE(s.ok());
}

// Default export options, a report and the PassContext over them: what one pass is called
// with in a test.
struct PassCtx {
  ExportOptions options;
  ExportReport report;
  PassContext ctx{options, report};
};

inline ValueId value_named(const Graph& g, const std::string& name) {
  auto v = g.find_value(name);
  INFO("no value named " << name);
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace etc::testing

namespace Catch {
template <>
struct StringMaker<etc::testing::Counts> {
  static std::string convert(const etc::testing::Counts& c) {
    return "{h2d " + std::to_string(c.h2d) + ", d2h " + std::to_string(c.d2h) + ", delegates " +
           std::to_string(c.delegates) + "}";
  }
};
}  // namespace Catch
