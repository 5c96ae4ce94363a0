// The CUDA partitioner: capability reasons, convexity, connectivity, determinism, options,
// and lowering into delegate calls.
#include "partition/partitioner.h"

#include <catch2/catch.hpp>
#include <random>
#include <set>

#include "backends/cuda/cuda_capability.h"
#include "partition/lower.h"
#include "passes/graph_builder.h"

namespace etc {
namespace {

using testing::add;
using testing::f32;
using testing::graph_from_json;
using testing::node;
using testing::require_valid;
using testing::unary;
using testing::value_named;

std::vector<std::string> names(const Graph& g, const std::vector<NodeId>& ids) {
  std::vector<std::string> out;
  for (NodeId id : ids)
    out.push_back(g.node(id).name);
  return out;
}

TEST_CASE("capability: float64, transposed convolution and half_to_float stay on the host") {
  Graph g = graph_from_json(
      R"([{"name": "d", "dtype": "float64", "shape": [2]}, )" + f32("x", "[2, 2]") + "]",
      "[" + unary("r", "aten.relu.default", "d", "y") + "," +
          node("s", "aten._softmax.default", R"({"self": "x", "dim": 1, "half_to_float": false})",
               "z") +
          "]",
      R"(["y", "z"])");
  CHECK(
      *cuda_unsupported_reason(g, g.node(g.order()[0])) ==
      "float64 tensors are not supported (needs float32, float16, bfloat16, int32, int64 or bool)");
  CHECK_FALSE(cuda_unsupported_reason(g, g.node(g.order()[1])).has_value());
}

TEST_CASE("capability: a norm with parameters of another dtype than its input stays on the host") {
  auto ln = [](const std::string& name, const std::string& weight, const std::string& y) {
    return R"({"name": ")" + name +
           R"(", "op": "aten.native_layer_norm.default", "args": {"input": "x", "normalized_shape": [3], "weight": ")" +
           weight + R"(", "bias": "b", "eps": 1e-5}, "outputs": [")" + y + R"(", ")" + y +
           R"(_mean", ")" + y + R"(_rstd"]})";
  };
  Graph g = graph_from_json(
      "[" + f32("x", "[2, 3]") + R"(, {"name": "w", "dtype": "float16", "shape": [3]}, )" +
          f32("b", "[3]") + "]",
      "[" + ln("ln", "w", "y") + "," + ln("ln2", "b", "y2") + "]", R"(["y", "y2"])");
  CHECK(
      *cuda_unsupported_reason(g, g.node(g.order()[0])) ==
      "parameters of a dtype other than the input's (float16 with float32 input) run on the host");
  CHECK_FALSE(cuda_unsupported_reason(g, g.node(g.order()[1])).has_value());
}

TEST_CASE("a path through a host op splits partitions so they stay convex") {
  // a -> b (host) -> c, and a -> c directly: {a, c} together would not be convex.
  Graph g = graph_from_json("[" + f32("x") + "]",
                            "[" + unary("a", "aten.relu.default", "x", "ta") + "," +
                                unary("b", "aten.neg.default", "ta", "tb") + "," +
                                add("c", "ta", "tb", "tc") + "]",
                            R"(["tc"])");
  PartitionOptions opts;
  opts.excluded_ops = {"aten.neg.default"};
  PartitionPlan plan = plan_partitions(g, opts);
  REQUIRE(plan.partitions.size() == 2);
  CHECK(names(g, plan.partitions[0]) == std::vector<std::string>{"a"});
  CHECK(names(g, plan.partitions[1]) == std::vector<std::string>{"c"});
  REQUIRE(plan.host_nodes.size() == 1);
  CHECK(plan.host_nodes[0].second == "excluded by --exclude-ops");
  std::vector<NodeId> both{plan.partitions[0][0], plan.partitions[1][0]};
  CHECK_FALSE(is_convex(g, both));
}

TEST_CASE("independent supported branches are scheduled together but stay separate components") {
  // Two chains that never meet: one run, two connected components, two partitions.
  Graph g = graph_from_json("[" + f32("x") + "," + f32("y") + "]",
                            "[" + unary("a1", "aten.relu.default", "x", "a") + "," +
                                unary("h", "aten.neg.default", "x", "hh") + "," +
                                unary("b1", "aten.relu.default", "y", "b") + "]",
                            R"(["a", "hh", "b"])");
  PartitionOptions opts;
  opts.excluded_ops = {"aten.neg.default"};
  PartitionPlan plan = plan_partitions(g, opts);
  REQUIRE(plan.partitions.size() == 2);
  for (const auto& p : plan.partitions) {
    CHECK(is_connected(g, p));
    CHECK(is_convex(g, p));
  }
}

TEST_CASE("the minimum partition size sends small groups back to the host with a reason") {
  Graph g = graph_from_json("[" + f32("x") + "]",
                            "[" + unary("a", "aten.relu.default", "x", "ta") + "," +
                                unary("b", "aten.neg.default", "ta", "tb") + "," +
                                unary("c", "aten.relu.default", "tb", "tc") + "," +
                                unary("d", "aten.relu.default", "tc", "td") + "]",
                            R"(["td"])");
  PartitionOptions opts;
  opts.excluded_ops = {"aten.neg.default"};
  opts.min_partition_size = 2;
  PartitionPlan plan = plan_partitions(g, opts);
  REQUIRE(plan.partitions.size() == 1);
  CHECK(names(g, plan.partitions[0]) == std::vector<std::string>{"c", "d"});
  REQUIRE(plan.host_nodes.size() == 2);
  CHECK(plan.host_nodes[0].second == "in a group of 1 node, below --min-partition-size 2");
}

// Random DAGs over relu/neg/add where neg is excluded: every partition must be convex,
// connected, disjoint from the others, cover exactly the supported nodes, and lowering must
// give a valid graph. The same graph always gives the same plan.
TEST_CASE("random DAGs: partitions are convex, connected, complete and deterministic") {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 60; ++trial) {
    int n = 2 + static_cast<int>(rng() % 40);
    std::string nodes = "[";
    std::vector<std::string> values{"x"};
    for (int i = 0; i < n; ++i) {
      std::string out = "v" + std::to_string(i);
      std::string a = values[rng() % values.size()];
      std::string b = values[rng() % values.size()];
      int kind = static_cast<int>(rng() % 3);
      if (i > 0) nodes += ",";
      if (kind == 0) {
        nodes += add("n" + std::to_string(i), a, b, out);
      } else {
        nodes += unary("n" + std::to_string(i),
                       kind == 1 ? "aten.relu.default" : "aten.neg.default", a, out);
      }
      values.push_back(out);
    }
    nodes += "]";
    Graph g = graph_from_json("[" + f32("x") + "]", nodes, "[\"" + values.back() + "\"]");
    PartitionOptions opts;
    opts.excluded_ops = {"aten.neg.default"};
    PartitionPlan plan = plan_partitions(g, opts);
    PartitionPlan again = plan_partitions(g, opts);
    CHECK(plan.partitions == again.partitions);
    CHECK(plan.schedule == again.schedule);
    std::set<uint32_t> covered;
    for (const auto& p : plan.partitions) {
      REQUIRE(is_convex(g, p));
      REQUIRE(is_connected(g, p));
      for (NodeId id : p) {
        REQUIRE(covered.insert(id.v).second);
        REQUIRE(g.node(id).op != OpKind::Neg);
      }
    }
    for (const auto& [id, why] : plan.host_nodes)
      REQUIRE(g.node(id).op == OpKind::Neg);
    REQUIRE(covered.size() + plan.host_nodes.size() == g.order().size());
    ExportReport report;
    REQUIRE(lower_partitions(g, plan, Device{DeviceType::kCUDA, 0}, report).ok());
    require_valid(g);
  }
}

TEST_CASE("lowering builds a delegate with its subgraph, constants and compile specs") {
  Graph g = graph_from_json(
      "[" + f32("x", "[2, 3]") + "]",
      "[" + node("fc", "aten.linear.default", R"({"input": "x", "weight": "w"})", "h") + "," +
          unary("act", "aten.relu.default", "h", "y") + "," +
          unary("host", "aten.neg.default", "h", "z") + "]",
      R"(["y", "z"])",
      R"([{"name": "w", "dtype": "float32", "shape": [4, 3], "values": [1,2,3,4,5,6,7,8,9,10,11,12]}])");
  ExportOptions o;
  o.partition.excluded_ops = {"aten.neg.default"};
  ExportReport report;
  PassContext ctx{o, report};
  REQUIRE(*partition_pass(g, ctx));
  require_valid(g);
  REQUIRE(g.order().size() == 2);
  const Node& call = g.node(g.order()[0]);
  REQUIRE(call.op == OpKind::DelegateCall);
  CHECK(call.name == "delegate_0");
  CHECK(call.delegate->backend_id == "EtcCudaBackend");
  CHECK(call.delegate->compile_specs == std::vector<CompileSpec>{{"target_device", "cuda:0"}});
  const Graph& sub = *call.delegate->graph;
  CHECK(sub.inputs().size() == 1);
  CHECK(sub.constants().size() == 1);
  CHECK(sub.order().size() == 2);
  // Both h (read by the host op) and y (a graph output) leave the delegate, with their names.
  REQUIRE(call.outputs.size() == 2);
  CHECK(g.value(call.outputs[0]).name == "h");
  CHECK(g.value(call.outputs[1]).name == "y");
  CHECK(report.total_ops == 3);
  CHECK(report.delegated_ops == 2);
  REQUIRE(report.partitions.size() == 1);
  CHECK(report.partitions[0].nodes == std::vector<std::string>{"fc", "act"});
  CHECK(report.host_ops.size() == 1);
}

TEST_CASE("with --target cpu delegates nothing and says why") {
  Graph g = graph_from_json("[" + f32("x") + "]",
                            "[" + unary("a", "aten.relu.default", "x", "y") + "]", R"(["y"])");
  ExportOptions o;
  o.target = Device{};
  ExportReport report;
  PassContext ctx{o, report};
  CHECK_FALSE(*partition_pass(g, ctx));
  REQUIRE(report.host_ops.size() == 1);
  CHECK(report.host_ops[0].reason == "--target cpu");
}

}  // namespace
}  // namespace etc
