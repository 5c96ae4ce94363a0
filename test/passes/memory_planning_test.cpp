// Memory planning: the offset algorithms, the plan verifier, and the per-device pass
// (ExecuTorch's TestDeviceAwareMemoryPlanning cases translated).
#include <catch2/catch.hpp>
#include <random>

#include "passes/graph_builder.h"
#include "passes/memory_planner.h"
#include "passes/plan_memory.h"
#include "passes/propagate_devices.h"

namespace etc {
namespace {

using testing::add;
using testing::f32;
using testing::graph_from_json;
using testing::lower_named;
using testing::require_valid;
using testing::unary;
using testing::value_named;

constexpr Device kCuda0{DeviceType::kCUDA, 0};
constexpr Device kCuda1{DeviceType::kCUDA, 1};

TEST_CASE("a chain reuses memory down to the lower bound") {
  // t0 [0,1] 64 B, t1 [1,2] 32 B, t2 [2,3] 64 B: peak is 96 B.
  std::vector<PlanTensor> ts{{64, 0, 1}, {32, 1, 2}, {64, 2, 3}};
  CHECK(plan_lower_bound(ts) == 96);
  BufferPlan p = plan_greedy_by_size(ts);
  CHECK(p.size == 96);
  CHECK(verify_plan(ts, p).ok());
  CHECK(p.offsets[0] == p.offsets[2]);  // t2 reuses t0's bytes
}

TEST_CASE("later, smaller tensors fill the gaps left by dead ones") {
  // X [0,1] and Y [0,9] take 0 and 64; Z [2,9] fits where X was; W [5,5] fits the 32-byte
  // hole between Z and Y. Peak live bytes at t=5 are Y+Z+W = 128: the plan is optimal.
  std::vector<PlanTensor> ts{{64, 0, 1}, {64, 0, 9}, {32, 2, 9}, {32, 5, 5}};
  BufferPlan p = plan_greedy_by_size(ts);
  CHECK(verify_plan(ts, p).ok());
  CHECK(p.offsets == std::vector<int64_t>{0, 64, 0, 32});
  CHECK(p.size == 128);
  CHECK(plan_lower_bound(ts) == 128);
}

TEST_CASE("ExecuTorch's shared-object greedy reproduces its documented placement") {
  // Two inputs (16 B, live until their copies) and an output live at the end: the output
  // shares an input's object.
  std::vector<PlanTensor> ts{{16, 0, 1}, {16, 0, 2}, {16, 4, 5}};
  BufferPlan p = plan_shared_objects(ts);
  CHECK(p.size == 32);
  CHECK(verify_plan(ts, p).ok());
  CHECK(p.offsets[2] == 0);
}

TEST_CASE("verify_plan catches overlapping live tensors and out-of-buffer tensors") {
  std::vector<PlanTensor> ts{{32, 0, 2}, {32, 1, 3}};
  BufferPlan bad{{0, 16}, 64};
  Status s = verify_plan(ts, bad);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "memory plan: tensor 1 (bytes [16, 48), live [1, 3]) overlaps tensor 0 (bytes [0, 32), "
        "live [0, 2])");
  BufferPlan outside{{0, 40}, 64};
  CHECK(verify_plan(ts, outside).message() ==
        "memory plan: tensor 1 (bytes [40, 72), live [1, 3]) lies outside the buffer of 64 bytes");
  BufferPlan disjoint_in_time{{0, 0}, 32};
  ts[1].first = 3;
  CHECK(verify_plan(ts, disjoint_in_time).ok());
}

TEST_CASE(
    "random plans are valid, never below the lower bound, and ours is never worse on average") {
  std::mt19937 rng(1234);
  int64_t ours_total = 0, baseline_total = 0, bound_total = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<PlanTensor> ts;
    int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      int32_t first = static_cast<int32_t>(rng() % 50);
      int32_t last = first + static_cast<int32_t>(rng() % 10);
      ts.push_back({16 * static_cast<int64_t>(1 + rng() % 64), first, last});
    }
    BufferPlan ours = plan_greedy_by_size(ts);
    BufferPlan baseline = plan_shared_objects(ts);
    REQUIRE(verify_plan(ts, ours).ok());
    REQUIRE(verify_plan(ts, baseline).ok());
    int64_t bound = plan_lower_bound(ts);
    REQUIRE(ours.size >= bound);
    REQUIRE(baseline.size >= bound);
    ours_total += ours.size;
    baseline_total += baseline.size;
    bound_total += bound;
  }
  CHECK(ours_total <= baseline_total);
  CHECK(static_cast<double>(ours_total) / static_cast<double>(bound_total) < 1.10);
}

struct Pipeline {
  ExportOptions options;
  ExportReport report;
  void propagate_and_plan(Graph& g) {
    PassContext ctx{options, report};
    REQUIRE(propagate_devices(g, ctx).ok());
    Result<bool> r = plan_memory(g, ctx);
    INFO(r.status().to_string());
    REQUIRE(r.ok());
    require_valid(g);
  }
};

TEST_CASE("a CPU-only graph gets one CPU buffer and no device entries") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Pipeline p;
  p.propagate_and_plan(g);
  REQUIRE(g.planned_buffers.size() == 1);
  CHECK(g.planned_buffers[0].device == Device{});
  CHECK(g.planned_buffers[0].size == 48);  // a, b and y are all live at the add
  CHECK(*g.value(value_named(g, "y")).spec.mem_id == 1);
}

TEST_CASE("the a+b CUDA fixture plans [0, 32, 48] as ExecuTorch does") {
  // ExecuTorch plans [0, 32, 48]: the d2h output reuses an input slot once the h2d copies
  // have read it. etc plans input lifetimes the same way.
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Pipeline p;
  lower_named(g, {{"add"}}, kCuda0, p.report);
  p.propagate_and_plan(g);
  REQUIRE(g.planned_buffers.size() == 2);
  CHECK(g.planned_buffers[0] == PlannedBuffer{Device{}, 32});
  CHECK(g.planned_buffers[1] == PlannedBuffer{kCuda0, 48});
  CHECK(*g.value(value_named(g, "a@cuda:0")).spec.mem_id == 2);
  CHECK(*g.value(value_named(g, "y")).spec.mem_id == 1);
  REQUIRE(p.report.memory.size() == 2);
  CHECK(p.report.memory[1].lower_bound_bytes == 48);
  CHECK(p.report.memory[1].planned_bytes == 48);
}

TEST_CASE("with --io-device device an all-CUDA graph has a single CUDA buffer and unplanned IO") {
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "]",
      "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "b", "y") + "]", R"(["y"])");
  Pipeline p;
  p.options.io_device = IoDevice::kDevice;
  lower_named(g, {{"add1"}, {"add2"}}, kCuda0, p.report);
  p.propagate_and_plan(g);
  REQUIRE(g.planned_buffers.size() == 1);
  CHECK(g.planned_buffers[0] == PlannedBuffer{kCuda0, 16});  // only t is planned
  CHECK_FALSE(g.value(value_named(g, "a")).spec.mem_id.has_value());
  CHECK_FALSE(g.value(value_named(g, "y")).spec.mem_id.has_value());
  CHECK(*g.value(value_named(g, "t")).spec.mem_id == 1);
}

TEST_CASE("cuda:0 and cuda:1 delegates give CPU, cuda:0 and cuda:1 buffers in that order") {
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "," + f32("c") + "]",
      "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "c", "y") + "]", R"(["y"])");
  Pipeline p;
  lower_named(g, {{"add2"}}, kCuda1, p.report);
  lower_named(g, {{"add1"}}, kCuda0, p.report);
  p.propagate_and_plan(g);
  REQUIRE(g.planned_buffers.size() == 3);
  CHECK(g.planned_buffers[0].device == Device{});
  CHECK(g.planned_buffers[1].device == kCuda0);
  CHECK(g.planned_buffers[2].device == kCuda1);
  // Every planned tensor sits in a buffer of its own device (the verifier checks it too).
  for (size_t i = 0; i < g.value_slots(); ++i) {
    const Value& v = g.value(ValueId(static_cast<uint32_t>(i)));
    if (v.erased || !v.spec.mem_id) continue;
    CHECK(g.planned_buffers[*v.spec.mem_id - 1].device == v.spec.device);
  }
}

TEST_CASE("device index 3 reaches the buffer") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("relu", "aten.relu.default", "a", "y") + "]", R"(["y"])");
  Pipeline p;
  lower_named(g, {{"relu"}}, Device{DeviceType::kCUDA, 3}, p.report);
  p.propagate_and_plan(g);
  CHECK(g.planned_buffers.back().device == Device{DeviceType::kCUDA, 3});
}

TEST_CASE("lifetimes follow the final schedule") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("r1", "aten.relu.default", "a", "t") + "," +
                                unary("r2", "aten.neg.default", "t", "u") + "," +
                                unary("r3", "aten.relu.default", "u", "y") + "]",
                            R"(["y"])");
  Pipeline p;
  p.propagate_and_plan(g);
  CHECK(g.value(value_named(g, "a")).spec.lifetime.first == 0);
  CHECK(g.value(value_named(g, "a")).spec.lifetime.last == 1);  // inputs end at their last use
  CHECK(g.value(value_named(g, "t")).spec.lifetime.first == 1);
  CHECK(g.value(value_named(g, "t")).spec.lifetime.last == 2);
  CHECK(g.value(value_named(g, "y")).spec.lifetime.last == 4);  // outputs live to the end
  CHECK(g.planned_buffers[0].size == 32);  // never more than two 16-byte tensors live
}

TEST_CASE(
    "a host view shares its input's storage and runs no kernel, as ExecuTorch's memory.view") {
  // a -> relu -> t [2,2] -> view [4] -> v -> neg -> u; and v.unsqueeze(0) -> w is an output.
  auto view = [](const std::string& name, const std::string& x, const std::string& out) {
    return testing::node(name, "aten.view.default", R"({"self": ")" + x + R"(", "size": [4]})",
                         out);
  };
  auto unsqueeze = [](const std::string& name, const std::string& x, const std::string& out) {
    return testing::node(name, "aten.unsqueeze.default", R"({"self": ")" + x + R"(", "dim": 0})",
                         out);
  };
  Graph g = graph_from_json(
      "[" + f32("a") + "]",
      "[" + unary("r", "aten.relu.default", "a", "t") + "," + view("v1", "t", "v") + "," +
          unary("n", "aten.neg.default", "v", "u") + "," + unsqueeze("v2", "v", "w") + "]",
      R"(["u", "w"])");
  Pipeline p;
  p.propagate_and_plan(g);
  const TensorSpec& t = g.value(value_named(g, "t")).spec;
  for (const char* name : {"v", "w"}) {
    INFO(name);
    const TensorSpec& s = g.value(value_named(g, name)).spec;
    CHECK(s.mem_id == t.mem_id);
    CHECK(s.mem_offset == t.mem_offset);
    CHECK(s.lifetime.last == 5);  // the group lives until w, a graph output, is read
  }
  CHECK(g.value(value_named(g, "t")).spec.lifetime.first == 1);
  int aliases = 0;
  for (NodeId id : g.order())
    aliases += g.node(id).storage_alias ? 1 : 0;
  CHECK(aliases == 2);
  // a (dead after r), the t/v/w group and u: a's slot is free again when u is defined.
  CHECK(g.planned_buffers[0].size == 32);
  CHECK(p.report.memory[0].lower_bound_bytes == 32);
}

TEST_CASE("an activation or residual add whose input dies there is planned in place") {
  auto same_storage = [](const Graph& g, const char* a, const char* b) {
    const TensorSpec& x = g.value(value_named(g, a)).spec;
    const TensorSpec& y = g.value(value_named(g, b)).spec;
    return x.mem_id == y.mem_id && x.mem_offset == y.mem_offset;
  };
  SECTION("relu over a dying intermediate") {
    Graph g = graph_from_json("[" + f32("a") + "]",
                              "[" + unary("n1", "aten.neg.default", "a", "t") + "," +
                                  unary("r", "aten.relu.default", "t", "u") + "," +
                                  unary("n2", "aten.neg.default", "u", "y") + "]",
                              R"(["y"])");
    Pipeline p;
    p.propagate_and_plan(g);
    CHECK(same_storage(g, "t", "u"));
    CHECK_FALSE(same_storage(g, "u", "y"));                       // neg is not planned in place
    CHECK(g.value(value_named(g, "t")).spec.lifetime.last == 3);  // the group lives to n2
  }
  SECTION("not when the input is read again later, is a graph input or the out an output") {
    Graph g = graph_from_json("[" + f32("a") + "]",
                              "[" + unary("r0", "aten.relu.default", "a", "s") + "," +
                                  unary("n1", "aten.neg.default", "s", "t") + "," +
                                  unary("r", "aten.relu.default", "t", "u") + "," +
                                  add("ad", "u", "t", "v") + "," +
                                  unary("r2", "aten.relu.default", "v", "y") + "]",
                              R"(["y"])");
    Pipeline p;
    p.propagate_and_plan(g);
    CHECK_FALSE(same_storage(g, "a", "s"));  // a is a graph input
    CHECK_FALSE(same_storage(g, "t", "u"));  // t is read by ad after r
    CHECK(same_storage(g, "u", "v"));        // u dies at ad (t is read there too)
    CHECK_FALSE(same_storage(g, "v", "y"));  // y is a graph output
  }
  SECTION("a residual add takes the operand computed last, then its relu follows") {
    Graph g = graph_from_json(
        "[" + f32("a") + "," + f32("b") + "]",
        "[" + unary("n1", "aten.neg.default", "a", "t") + "," +
            unary("n2", "aten.neg.default", "b", "s") + "," + add("ad", "b", "t", "u") + "," +
            unary("r", "aten.relu.default", "u", "v") + "," + add("ad2", "v", "s", "y") + "]",
        R"(["y"])");
    Pipeline p;
    p.propagate_and_plan(g);
    CHECK_FALSE(same_storage(g, "b", "u"));  // b is a graph input
    CHECK(same_storage(g, "t", "u"));
    CHECK(same_storage(g, "u", "v"));
    CHECK_FALSE(same_storage(g, "s", "u"));  // s is still read by ad2
  }
  SECTION("of two dying operands, the add takes the one computed right before it") {
    Graph g = graph_from_json("[" + f32("a") + "]",
                              "[" + unary("n1", "aten.neg.default", "a", "s") + "," +
                                  unary("n2", "aten.neg.default", "a", "t") + "," +
                                  add("ad", "s", "t", "u") + "," +
                                  unary("n3", "aten.neg.default", "u", "y") + "]",
                              R"(["y"])");
    Pipeline p;
    p.propagate_and_plan(g);
    CHECK(same_storage(g, "t", "u"));
    CHECK_FALSE(same_storage(g, "s", "u"));
  }
  SECTION("not when both operands share the storage, nor across shapes") {
    Graph g = graph_from_json(
        "[" + f32("a") + "," + f32("b", "[2]") + "]",
        "[" + unary("n1", "aten.neg.default", "a", "t") + "," + add("ad", "t", "t", "u") + "," +
            unary("n2", "aten.neg.default", "b", "c") + "," + add("ad2", "c", "u", "v") + "," +
            unary("n3", "aten.neg.default", "v", "y") + "]",
        R"(["y"])");
    Pipeline p;
    p.propagate_and_plan(g);
    CHECK_FALSE(same_storage(g, "t", "u"));
    CHECK_FALSE(same_storage(g, "c", "v"));  // c [2] broadcasts against u [2, 2]
    CHECK(same_storage(g, "u", "v"));
  }
}

TEST_CASE("a non-power-of-two alignment is a usage error") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("r", "aten.relu.default", "a", "y") + "]", R"(["y"])");
  ExportOptions o;
  o.memory.alignment = 24;
  ExportReport report;
  PassContext ctx{o, report};
  Result<bool> r = plan_memory(g, ctx);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kUsage);
}

}  // namespace
}  // namespace etc
