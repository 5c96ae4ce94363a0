// Device propagation: ExecuTorch's test_propagate_device_pass.py cases translated to our IR,
// plus the cases where etc does better (shared H2D copies, multi-user graph inputs, one
// --io-device switch).
#include "passes/propagate_devices.h"

#include <catch2/catch.hpp>

#include "passes/graph_builder.h"

namespace etc {
namespace {

using testing::add;
using testing::count_nodes;
using testing::Counts;
using testing::f32;
using testing::graph_from_json;
using testing::lower_named;
using testing::require_valid;
using testing::unary;
using testing::value_named;

constexpr Device kCuda0{DeviceType::kCUDA, 0};
constexpr Device kCuda1{DeviceType::kCUDA, 1};

struct Run {
  ExportOptions options;
  ExportReport report;
  Result<bool> propagate(Graph& g) {
    PassContext ctx{options, report};
    return propagate_devices(g, ctx);
  }
};

Device device_of(const Graph& g, const std::string& name) {
  return g.value(value_named(g, name)).spec.device;
}

std::vector<std::string> op_sequence(const Graph& g) {
  std::vector<std::string> ops;
  for (NodeId id : g.order())
    ops.push_back(op_info(g.node(id).op).schema.name);
  return ops;
}

TEST_CASE("add on cuda:0: two h2d before the delegate, one d2h after") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Run r;
  lower_named(g, {{"add"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{2, 1, 1});
  CHECK(op_sequence(g) ==
        std::vector<std::string>{"_h2d_copy", "_h2d_copy", "call_delegate", "_d2h_copy"});
  CHECK(device_of(g, "a") == Device{});
  CHECK(device_of(g, "a@cuda:0") == kCuda0);
  // The graph output keeps its name on the host; the delegate's tensor is y@cuda:0.
  CHECK(device_of(g, "y@cuda:0") == kCuda0);
  CHECK(device_of(g, "y") == Device{});
  CHECK(g.value(g.outputs()[0]).name == "y");
  CHECK(r.report.copies[2].source == "y@cuda:0");
  CHECK(r.report.copies[2].copy == "y");
  CHECK(r.report.count_copies("h2d") == 2);
  CHECK(r.report.count_copies("d2h") == 1);
  CHECK(r.report.copy_bytes() == 48);
  CHECK(r.report.copies[2].cause == "graph output");
}

TEST_CASE("without a device delegate nothing changes") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Run r;
  lower_named(g, {{"add"}}, Device{}, r.report);  // a CPU delegate: no tagging, no copies
  CHECK_FALSE(*r.propagate(g));
  CHECK(count_nodes(g) == Counts{0, 0, 1});
  CHECK(device_of(g, "y") == Device{});
}

TEST_CASE("chained same-device delegates exchange tensors without copies") {
  // (a + b) + c as two cuda:0 delegates: 3 h2d, 1 d2h (ExecuTorch: same after elision).
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "," + f32("c") + "]",
      "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "c", "y") + "]", R"(["y"])");
  Run r;
  lower_named(g, {{"add1"}, {"add2"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{3, 1, 2});
  CHECK(device_of(g, "t") == kCuda0);
}

TEST_CASE("cross-device edges go through the host") {
  // add1 on cuda:0, add2 on cuda:1: 4 h2d, 2 d2h (t hops cuda:0 -> cpu -> cuda:1).
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "," + f32("c") + "]",
      "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "c", "y") + "]", R"(["y"])");
  Run r;
  lower_named(g, {{"add1"}}, kCuda0, r.report);
  lower_named(g, {{"add2"}}, kCuda1, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{4, 2, 2});
  CHECK(device_of(g, "t") == kCuda0);
  CHECK(device_of(g, "t@cpu") == Device{});
  CHECK(device_of(g, "t@cpu@cuda:1") == kCuda1);
  CHECK(device_of(g, "y@cuda:1") == kCuda1);
}

TEST_CASE("a delegate output feeding several same-device delegates is not copied") {
  // ExecuTorch's 4-delegate case: t feeds two cuda:0 delegates; 4 h2d, 1 d2h.
  Graph g =
      graph_from_json("[" + f32("a") + "," + f32("b") + "," + f32("c") + "," + f32("d") + "]",
                      "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "c", "u") + "," +
                          add("add3", "t", "d", "v") + "," + add("add4", "u", "v", "y") + "]",
                      R"(["y"])");
  Run r;
  lower_named(g, {{"add1"}, {"add2"}, {"add3"}, {"add4"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{4, 1, 4});
}

TEST_CASE("a delegate output read by a host op and a delegate: one d2h for the host op") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add1", "a", "b", "t") + "," +
                                unary("relu", "aten.relu.default", "t", "r") + "," +
                                add("add2", "t", "b", "u") + "]",
                            R"(["r", "u"])");
  Run r;
  lower_named(g, {{"add1"}, {"add2"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  // h2d: a, b (b shared by both delegates); d2h: t for relu, u for the output.
  CHECK(count_nodes(g) == Counts{2, 2, 2});
  const Node& relu = g.node(g.value(value_named(g, "r")).producer);
  CHECK(g.value(std::get<ValueId>(relu.args[0])).name == "t@cpu");
  const Node& add2 = g.node(g.value(value_named(g, "u@cuda:0")).producer);
  CHECK(std::get<std::vector<ValueId>>(add2.args[0])[0] ==
        value_named(g, "t"));  // direct, on device
}

TEST_CASE("same- and cross-device consumers: exactly one round trip, to cuda:1") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add1", "a", "b", "t") + "," + add("add2", "t", "b", "u") +
                                "," + add("add3", "t", "b", "v") + "]",
                            R"(["u", "v"])");
  Run r;
  lower_named(g, {{"add1"}, {"add2"}}, kCuda0, r.report);
  lower_named(g, {{"add3"}}, kCuda1, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  size_t round_trips = 0;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    if (n.op != OpKind::H2DCopy) continue;
    const Value& src = g.value(std::get<ValueId>(n.args[0]));
    if (src.kind == ValueKind::kNodeOutput && g.node(src.producer).op == OpKind::D2HCopy) {
      ++round_trips;
      CHECK(g.value(n.outputs[0]).spec.device == kCuda1);
    }
  }
  CHECK(round_trips == 1);
}

TEST_CASE("cuda:1 delegates put their IO on device index 1") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Run r;
  lower_named(g, {{"add"}}, kCuda1, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(device_of(g, "y@cuda:1") == kCuda1);
  CHECK(device_of(g, "a@cuda:1") == kCuda1);
  const Node& call = g.node(g.value(value_named(g, "y@cuda:1")).producer);
  CHECK(call.delegate->compile_specs == std::vector<CompileSpec>{{"target_device", "cuda:1"}});
}

TEST_CASE(
    "better than ExecuTorch: a host tensor feeding several delegates is copied once per device") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "," + f32("c") + "]",
                            "[" + add("add1", "a", "b", "t") + "," +
                                unary("neg", "aten.neg.default", "t", "n") + "," +
                                add("add2", "n", "a", "y") + "]",
                            R"(["y"])");
  Run r;
  lower_named(g, {{"add1"}, {"add2"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  // a feeds both delegates: one h2d for a, one for b, one for n.
  CHECK(count_nodes(g) == Counts{3, 2, 2});
  CHECK(r.report.copies[0].source == "a");
  CHECK(r.report.copies[0].cause.find("(shared with later delegates on the same device)") !=
        std::string::npos);
}

TEST_CASE("with --io-device device: inputs and outputs stay on the device, no copies") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  Run r;
  r.options.io_device = IoDevice::kDevice;
  lower_named(g, {{"add"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{0, 0, 1});
  CHECK(device_of(g, "a") == kCuda0);
  CHECK(device_of(g, "b") == kCuda0);
  CHECK(device_of(g, "y") == kCuda0);
  CHECK(g.value(g.outputs()[0]).name == "y");
}

TEST_CASE("with --io-device device with a host op on an input: only that path is copied") {
  // neg(a) + b with neg on the host: 1 h2d (for neg's output), b on device, y on device.
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "]",
      "[" + unary("neg", "aten.neg.default", "a", "n") + "," + add("add", "n", "b", "y") + "]",
      R"(["y"])");
  Run r;
  r.options.io_device = IoDevice::kDevice;
  lower_named(g, {{"add"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{1, 0, 1});
  CHECK(device_of(g, "a") == Device{});
  CHECK(device_of(g, "b") == kCuda0);
  CHECK(device_of(g, "n@cuda:0") == kCuda0);
}

TEST_CASE("better than ExecuTorch: a graph input with host and device users") {
  // a is read by the delegate and by a host op; with --io-device device it stays on the
  // host for neg and the delegate reads a device copy (ExecuTorch rejects this).
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "]",
      "[" + add("add", "a", "b", "y") + "," + unary("neg", "aten.neg.default", "a", "n") + "]",
      R"(["y", "n"])");
  Run r;
  r.options.io_device = IoDevice::kDevice;
  lower_named(g, {{"add"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{1, 0, 1});
  CHECK(device_of(g, "a") == Device{});
  CHECK(device_of(g, "a@cuda:0") == kCuda0);
  CHECK(device_of(g, "b") == kCuda0);
}

TEST_CASE("with --io-device device: an output also read on the host gets a d2h for the host only") {
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "]",
      "[" + add("add", "a", "b", "y") + "," + unary("relu", "aten.relu.default", "y", "r") + "]",
      R"(["y", "r"])");
  Run r;
  r.options.io_device = IoDevice::kDevice;
  lower_named(g, {{"add"}}, kCuda0, r.report);
  REQUIRE(*r.propagate(g));
  require_valid(g);
  CHECK(count_nodes(g) == Counts{0, 1, 1});
  CHECK(g.value(g.outputs()[0]).name == "y");  // still the device tensor
  CHECK(device_of(g, "y") == kCuda0);
}

TEST_CASE("the verifier rejects a host op reading a device tensor") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("relu", "aten.relu.default", "a", "y") + "]", R"(["y"])");
  g.value(value_named(g, "a")).spec.device = kCuda0;
  Status s = verify_graph(g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "host op aten.relu.default reads 'a' on cuda:0; host ops need CPU tensors");
}

}  // namespace
}  // namespace etc
