// State (mutable buffers) end to end on small graphs built with the Graph API: the verifier's
// rules, memory planning's in-place KV-cache write and its limits, what the emitter writes
// (ExecuTorch's mutable data segment, index_put_ or copy_), a damaged file, and the runtime
// keeping state across executions and resetting it.
#include <catch2/catch.hpp>

#include <cstring>
#include <optional>

#include "export/emitter.h"
#include "export/export_pipeline.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "graph/verifier.h"
#include "runtime/export_graph.h"
#include "runtime/method.h"
#include "runtime/runtime_env.h"

namespace etc {
namespace {

TensorSpec spec(DType t, std::vector<int64_t> sizes) {
  return TensorSpec::make(t, std::move(sizes));
}

ConstantData bytes_of(const std::vector<float>& v) {
  std::string b(v.size() * 4, '\0');
  std::memcpy(b.data(), v.data(), b.size());
  return ConstantData{make_blob(std::move(b)), 0, v.size() * 4};
}

ValueId node(Graph& g, OpKind op, const std::string& name,
             std::initializer_list<std::pair<std::string_view, ArgValue>> args, TensorSpec out) {
  return testing::add_op(g, op, name, args, std::move(out));
}

// A KV-cache step: cache [1, 2, 4, 3] (state, initial 0..23), x [1, 2, 1, 3], pos [1];
// upd = index_put(cache, [None, None, pos], x); y = upd + read, where `read` is upd (nothing
// reads the old cache after the write) or the cache itself (the old value, read after it).
Graph kv_step(bool read_old_cache_after) {
  Graph g;
  ValueId x = g.add_input("x", spec(DType::kFloat32, {1, 2, 1, 3}));
  ValueId pos = g.add_input("pos", spec(DType::kInt64, {1}));
  std::vector<float> init(24);
  for (size_t i = 0; i < init.size(); ++i)
    init[i] = static_cast<float>(i);
  ValueId cache =
      g.add_state("cache", spec(DType::kFloat32, {1, 2, 4, 3}), "layer.k_cache", bytes_of(init));
  ValueId upd = node(g, OpKind::IndexPut, "upd",
                     {{"self", cache},
                      {"indices", std::vector<ValueId>{ValueId(), ValueId(), pos}},
                      {"values", x}},
                     spec(DType::kFloat32, {1, 2, 4, 3}));
  ValueId y = node(g, OpKind::AddTensor, "y",
                   {{"self", upd}, {"other", read_old_cache_after ? cache : upd}},
                   spec(DType::kFloat32, {1, 2, 4, 3}));
  g.set_outputs({y});
  g.set_state_update(cache, upd);
  return g;
}

// A call counter: n = counter + 1 (int64 scalar, from `initial`), returned and written back.
// Without `initial` the state has no initial value (graph.h: it starts as zeros).
Graph counter(std::optional<int64_t> initial = 0) {
  Graph g;
  ValueId dummy = g.add_input("dummy", spec(DType::kFloat32, {1}));
  std::string bytes(8, '\0');
  if (initial) std::memcpy(bytes.data(), &*initial, 8);
  ValueId c = g.add_state("calls", spec(DType::kInt64, {}), "calls",
                          initial ? ConstantData{make_blob(bytes), 0, 8} : ConstantData{});
  ValueId n = node(g, OpKind::AddScalar, "n", {{"self", c}, {"other", Scalar{int64_t{1}}}},
                   spec(DType::kInt64, {}));
  ValueId y = node(g, OpKind::MulTensor, "y", {{"self", dummy}, {"other", dummy}},
                   spec(DType::kFloat32, {1}));
  g.set_outputs({n, y});
  g.set_state_update(c, n);
  return g;
}

pte::File export_graph(Graph& g) {
  return testing::export_graph(g, "state.pte");
}

std::vector<std::string> operators(const pte::File& f) {
  std::vector<std::string> out;
  for (const pte::Operator& op : f.program.plans[0].operators)
    out.push_back(op.name + (op.overload.empty() ? "" : "." + op.overload));
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

struct Loaded {
  std::unique_ptr<rt::OwnedRuntime> runtime;
  std::unique_ptr<rt::Method> method;
};

Loaded load(const pte::File& f) {
  Loaded l;
  l.runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, l.runtime->env());
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  l.method = std::move(m).value();
  return l;
}

std::vector<float> floats(const rt::TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

// One KV step: x = value everywhere, at `p`; returns y.
std::vector<float> step(rt::Method& m, float value, int64_t p) {
  std::vector<float> x(6, value);
  REQUIRE(m.set_input(0, x.data(), 24).ok());
  REQUIRE(m.set_input(1, &p, 8).ok());
  Status s = m.execute();
  INFO(s.to_string());
  REQUIRE(s.ok());
  return floats(m.output(0));
}

// One call of the counter program: the count it returns.
int64_t count_call(rt::Method& m) {
  float one = 1;
  REQUIRE(m.set_input(0, &one, 4).ok());
  REQUIRE(m.execute().ok());
  int64_t n = 0;
  std::memcpy(&n, m.output(0).data, 8);
  return n;
}

TEST_CASE(
    "a KV-cache write the state is not read after runs in place, as ExecuTorch's index_put_") {
  Graph g = kv_step(false);
  pte::File f = export_graph(g);
  std::vector<std::string> ops = operators(f);
  CHECK(has(ops, "aten::index_put_"));
  CHECK_FALSE(has(ops, "aten::copy_"));
  CHECK_FALSE(has(ops, "aten::index_put.out"));
  // The state: planned, with its initial value in the mutable data segment (entry 1).
  REQUIRE(f.program.mutable_data_segments.size() == 1);
  CHECK(f.program.mutable_data_segments[0].offsets == std::vector<uint64_t>{0, 0});
  int states = 0;
  for (const pte::EValue& v : f.program.plans[0].values) {
    if (v.kind == pte::ValueKind::kTensor && v.tensor.data_buffer_idx > 0 && v.tensor.allocation) {
      ++states;
      CHECK(f.mutable_bytes(v.tensor.data_buffer_idx).size() == 96);
    }
  }
  CHECK(states == 1);

  Loaded l = load(f);
  REQUIRE(l.method->num_states() == 1);
  // y = 2 * cache after the write; every call sees the previous calls' writes.
  std::vector<float> y = step(*l.method, 100, 1);
  CHECK(y[3] == 200);  // head 0, position 1
  CHECK(y[6] == 12);   // head 0, position 2: the initial 6, doubled
  y = step(*l.method, 50, 2);
  CHECK(y[3] == 200);  // still there
  CHECK(y[6] == 100);
  REQUIRE(l.method->reset_state().ok());
  y = step(*l.method, 7, 0);
  CHECK(y[0] == 14);
  CHECK(y[3] == 6);  // the initial 3 again
}

// The state's tensor in the program (the one planned with an initial value).
const pte::Tensor* state_tensor(const pte::File& f) {
  for (const pte::EValue& v : f.program.plans[0].values) {
    // State: planned, with initial bytes or named (no initial value: zeros).
    if (v.kind == pte::ValueKind::kTensor && v.tensor.allocation &&
        (v.tensor.data_buffer_idx > 0 || !v.tensor.fully_qualified_name.empty()))
      return &v.tensor;
  }
  return nullptr;
}

TEST_CASE("a KV cache a CUDA delegate writes in place lives on the device, never copied") {
  Graph g = kv_step(false);
  ExportReport report;
  const Device cuda{DeviceType::kCUDA, 0};
  pte::File f = testing::export_graph(g, "state.pte", cuda, &report);
  REQUIRE(report.partitions.size() == 1);
  // Only x and pos go to the device, only y comes back: the cache crosses no boundary.
  for (const ExportReport::Copy& c : report.copies)
    CHECK((c.source == "x" || c.source == "pos" || c.copy == "y"));
  CHECK(report.copies.size() == 3);
  const pte::Tensor* state = state_tensor(f);
  REQUIRE(state != nullptr);
  CHECK(state->device == cuda);
  CHECK(f.program.plans[0].buffer_device(state->allocation->memory_id) == cuda);
  CHECK_FALSE(has(operators(f), "aten::copy_"));  // the delegate wrote the state's storage

  // The CPU runtime (host memory standing in for the device's, the reference delegate): the
  // state starts from its initial value, keeps each call's write, and resets.
  Loaded l = load(f);
  REQUIRE(l.method->num_states() == 1);
  std::vector<float> y = step(*l.method, 100, 1);
  CHECK(y[3] == 200);
  CHECK(y[6] == 12);
  y = step(*l.method, 50, 2);
  CHECK(y[3] == 200);
  CHECK(y[6] == 100);
  REQUIRE(l.method->reset_state().ok());
  y = step(*l.method, 7, 0);
  CHECK(y[0] == 14);
  CHECK(y[3] == 6);
}

TEST_CASE("state a delegate cannot update in place stays on the host") {
  SECTION("the old cache is read after the write") {
    Graph g = kv_step(true);
    pte::File f = testing::export_graph(g, "state.pte", Device{DeviceType::kCUDA, 0});
    const pte::Tensor* state = state_tensor(f);
    REQUIRE(state != nullptr);
    CHECK(state->device.is_cpu());
    CHECK(has(operators(f), "aten::copy_"));
    Loaded l = load(f);
    CHECK(step(*l.method, 100, 1)[3] == 103);
    CHECK(step(*l.method, 100, 1)[3] == 200);
  }
  SECTION("a host op reads the state too") {
    Graph g = kv_step(false);
    // A float64 read of the cache: float64 has no CUDA kernels, so the cast runs on the host.
    ValueId cache = g.states()[0].value;
    ValueId wide = node(g, OpKind::ToCopy, "wide", {{"self", cache}, {"dtype", DType::kFloat64}},
                        spec(DType::kFloat64, {1, 2, 4, 3}));
    std::vector<ValueId> outs(g.outputs().begin(), g.outputs().end());
    outs.push_back(wide);
    g.set_outputs(std::move(outs));
    pte::File f = testing::export_graph(g, "state.pte", Device{DeviceType::kCUDA, 0});
    const pte::Tensor* state = state_tensor(f);
    REQUIRE(state != nullptr);
    CHECK(state->device.is_cpu());
  }
}

TEST_CASE("a step counter a CUDA delegate increments lives on the device") {
  Graph g = counter();
  ExportReport report;
  pte::File f = testing::export_graph(g, "state.pte", Device{DeviceType::kCUDA, 0}, &report);
  const pte::Tensor* state = state_tensor(f);
  REQUIRE(state != nullptr);
  CHECK_FALSE(state->device.is_cpu());
  CHECK_FALSE(has(operators(f), "aten::copy_"));
  for (const ExportReport::Copy& c : report.copies) {  // the counter never crosses
    CHECK(c.source != "calls");
    CHECK(c.cause.find("state") == std::string::npos);
  }
  Loaded l = load(f);
  for (int64_t want = 1; want <= 3; ++want)
    CHECK(count_call(*l.method) == want);
  // Named zero state on the device: zeroed through the device's allocator at reset.
  CHECK(state->fully_qualified_name == "calls");
  REQUIRE(l.method->reset_state().ok());
  CHECK(count_call(*l.method) == 1);
}

TEST_CASE("a state read after its update is written back by copy_ at the end") {
  Graph g = kv_step(true);
  pte::File f = export_graph(g);
  std::vector<std::string> ops = operators(f);
  CHECK(has(ops, "aten::index_put.out"));
  CHECK(has(ops, "aten::copy_"));
  CHECK_FALSE(has(ops, "aten::index_put_"));
  const pte::Chain& chain = f.program.plans[0].chains[0];
  const pte::Instruction& last = chain.instructions.back();
  CHECK(f.program.plans[0].operators[static_cast<size_t>(last.index)].name == "aten::copy_");
  CHECK(last.args.size() == 4);
  CHECK(last.args[0] == last.args[3]);

  Loaded l = load(f);
  // y = new + old: position 1 of head 0 is 100 + 3 on the first call, 100 + 100 on the next.
  CHECK(step(*l.method, 100, 1)[3] == 103);
  CHECK(step(*l.method, 100, 1)[3] == 200);
}

TEST_CASE("a call counter in state counts calls, from its initial value after a reset") {
  Graph g = counter();
  pte::File f = export_graph(g);
  CHECK(has(operators(f), "aten::copy_"));
  Loaded l = load(f);
  for (int64_t want = 1; want <= 3; ++want)
    CHECK(count_call(*l.method) == want);
  REQUIRE(l.method->reset_state().ok());
  CHECK(count_call(*l.method) == 1);
}

TEST_CASE("an initial value of zeros is not written: the state is named, as without one") {
  Graph zero_graph = counter(0);
  pte::File zeros = export_graph(zero_graph);
  const pte::Tensor* state = state_tensor(zeros);
  REQUIRE(state != nullptr);
  CHECK(state->data_buffer_idx == 0);
  CHECK(state->fully_qualified_name == "calls");
  CHECK(zeros.program.mutable_data_segments.empty());
  // Any other value is written and restored from the file.
  Graph g = counter(41);
  pte::File f = export_graph(g);
  state = state_tensor(f);
  REQUIRE(state != nullptr);
  CHECK(state->data_buffer_idx > 0);
  CHECK(state->fully_qualified_name.empty());
  Loaded l = load(f);
  CHECK(count_call(*l.method) == 42);
  CHECK(count_call(*l.method) == 43);
  REQUIRE(l.method->reset_state().ok());
  CHECK(count_call(*l.method) == 42);
}

TEST_CASE("state without an initial value starts as zeros and resets to zeros") {
  Graph g = counter(std::nullopt);
  pte::File f = export_graph(g);
  // Named in ExtraTensorInfo, with no bytes in the file (a KV cache would grow the program
  // by its size): the runtime zeroes it at load and reset on any device (device memory is
  // not zeroed when allocated).
  const pte::Tensor* state = state_tensor(f);
  REQUIRE(state != nullptr);
  CHECK(state->data_buffer_idx == 0);
  REQUIRE(state->allocation.has_value());
  CHECK(state->has_extra);
  CHECK(state->fully_qualified_name == "calls");
  CHECK(f.program.mutable_data_segments.empty());
  Loaded l = load(f);
  // Planned memory the previous user left dirty is zeroed at load too.
  CHECK(l.method->num_states() == 1);
  for (int64_t want = 1; want <= 3; ++want)
    CHECK(count_call(*l.method) == want);
  REQUIRE(l.method->reset_state().ok());
  CHECK(count_call(*l.method) == 1);  // was 4: planned memory is not cleared at reset
}

TEST_CASE("a damaged initial-state segment is a located error, never a read past the file") {
  Graph g = counter(41);  // a value other than zeros: written to the mutable segment
  pte::File f = export_graph(g);
  SECTION("an offset past the segment") {
    f.program.mutable_data_segments[0].offsets[1] = 1 << 20;
  }
  SECTION("a state tensor larger than its initial value") {
    for (pte::EValue& v : f.program.plans[0].values) {
      if (v.kind == pte::ValueKind::kTensor && v.tensor.data_buffer_idx > 0 && v.tensor.allocation)
        v.tensor.sizes = {4};
    }
  }
  Result<std::string> bytes = write_pte(f);
  REQUIRE(bytes.ok());
  Result<pte::File> back = read_pte(make_blob(*bytes), "damaged.pte");
  REQUIRE_FALSE(back.ok());
  CHECK(back.status().code() == ErrorCode::kInvalidInput);
  CHECK(back.status().to_string().find("initial state 1") != std::string::npos);
}

TEST_CASE("the verifier checks each state's type, update, device and initial bytes") {
  Graph g;
  ValueId a = g.add_input("a", spec(DType::kFloat32, {3}));
  ValueId s = g.add_state("s", spec(DType::kFloat32, {2}), "s", bytes_of({1, 2, 3}));
  g.set_outputs({a});
  g.set_state_update(s, a);
  Status v = verify_graph(g);
  REQUIRE_FALSE(v.ok());
  CHECK(v.to_string().find("has 12 bytes of initial value, its type needs 8") != std::string::npos);
  CHECK(v.to_string().find("(float32[2]) is updated with 'a' (float32[3])") != std::string::npos);
}

TEST_CASE("dead-code elimination keeps the nodes computing a state's update") {
  Graph g = counter();
  PassRegistry r = make_pass_registry();
  ExportOptions options;
  ExportReport report;
  PassContext ctx{options, report};
  g.set_outputs({g.outputs()[1]});  // the counter is no longer returned, only written back
  REQUIRE(run_pipeline(g, *parse_pipeline("dce", r), r, ctx, {}).ok());
  int adds = 0;
  for (NodeId id : g.order())
    adds += g.node(id).op == OpKind::AddScalar;
  CHECK(adds == 1);
}

}  // namespace
}  // namespace etc
