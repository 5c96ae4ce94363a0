// The CUDA runtime's plumbing: the allocator (alignment, copies, ownership, freeing exactly
// once, clear errors for missing devices and out of memory), the host-pointer rule of the
// CUDA delegate, a delegate on cuda:1, and the behaviour without a GPU or cuBLAS.
//
// Tests tagged [gpu] need a CUDA device: run with the tag filter "[gpu]" the binary exits 77
// (CTest: skipped) when none is visible. Tests tagged [nogpu] run everywhere: without a GPU
// they check that the runtime fails cleanly, with one that it starts.
#define CATCH_CONFIG_RUNNER
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "backends/cuda/runtime/cuda_allocator.h"
#include "backends/cuda/runtime/cuda_context.h"
#include "backends/cuda/runtime/cuda_devices.h"
#include "backends/cuda/runtime/cuda_graph_cache.h"
#include "backends/cuda/runtime/cuda_op_util.h"
#include "backends/cuda/runtime/cuda_ops.h"
#include "backends/cuda/runtime/cuda_runtime_env.h"
#include "backends/cuda/runtime/cuda_status.h"
#include "export/emitter.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "graph/ops.h"
#include "passes/graph_builder.h"
#include "runtime/export_graph.h"
#include "runtime/method.h"

namespace etc::cuda {
namespace {

using etc::testing::add;
using etc::testing::f32;
using etc::testing::graph_from_json;

int visible_devices() {
  Result<int> n = visible_device_count();
  return n.ok() ? *n : 0;
}

// Exports a graph given as etc.graph JSON (inputs, nodes, outputs) with `options` and reads
// the program back.
pte::File export_json(const std::string& inputs, const std::string& nodes,
                      const std::string& outputs, ExportOptions options = {}) {
  Graph g = graph_from_json(inputs, nodes, outputs);
  PassRegistry r = make_pass_registry();
  ExportReport report;
  PassContext ctx{options, report};
  REQUIRE(run_pipeline(g, *parse_pipeline(kDefaultExportPipeline, r), r, ctx, {}).ok());
  Result<pte::File> emitted = emit_program(g);
  REQUIRE(emitted.ok());
  Result<pte::File> f = read_pte(make_blob(*write_pte(*emitted)), "test.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  return std::move(f).value();
}

pte::File export_add(ExportOptions options) {
  return export_json("[" + f32("a") + "," + f32("b") + "]", "[" + add("add", "a", "b", "y") + "]",
                     R"(["y"])", options);
}

TEST_CASE("a failed pointer query is the CUDA error it is, never 'host memory'", "[nogpu]") {
  CHECK(*device_memory_from_query(cudaSuccess, cudaMemoryTypeDevice, "f.cpp", 1));
  CHECK(*device_memory_from_query(cudaSuccess, cudaMemoryTypeManaged, "f.cpp", 1));
  CHECK_FALSE(*device_memory_from_query(cudaSuccess, cudaMemoryTypeHost, "f.cpp", 1));
  CHECK_FALSE(*device_memory_from_query(cudaSuccess, cudaMemoryTypeUnregistered, "f.cpp", 1));
  // After an asynchronous kernel fault every call answers with the sticky error: the binding
  // check must say so, not "the source is not device memory".
  Result<bool> faulted =
      device_memory_from_query(cudaErrorIllegalAddress, cudaMemoryTypeUnregistered, "f.cpp", 7);
  REQUIRE_FALSE(faulted.ok());
  CHECK(faulted.status().code() == ErrorCode::kInternal);
  CHECK(faulted.status().to_string().find("cudaPointerGetAttributes failed at f.cpp:7: "
                                          "cudaErrorIllegalAddress") != std::string::npos);
  // Which device: the query's device for device or managed memory, -1 for host memory.
  CHECK(*memory_device_from_query(cudaSuccess, cudaMemoryTypeDevice, 1, "f.cpp", 1) == 1);
  CHECK(*memory_device_from_query(cudaSuccess, cudaMemoryTypeManaged, 0, "f.cpp", 1) == 0);
  CHECK(*memory_device_from_query(cudaSuccess, cudaMemoryTypeHost, 0, "f.cpp", 1) == -1);
  CHECK(*memory_device_from_query(cudaSuccess, cudaMemoryTypeUnregistered, -2, "f.cpp", 1) == -1);
  CHECK_FALSE(
      memory_device_from_query(cudaErrorIllegalAddress, cudaMemoryTypeDevice, 0, "f.cpp", 1).ok());
  Result<bool> invalid =
      device_memory_from_query(cudaErrorInvalidValue, cudaMemoryTypeUnregistered, "f.cpp", 8);
  REQUIRE_FALSE(invalid.ok());
  CHECK(invalid.status().to_string().find("cudaErrorInvalidValue") != std::string::npos);
}

TEST_CASE("a teardown failure is logged and leaves no error behind for the next call", "[nogpu]") {
  CHECK(teardown_ok(cudaSuccess, "cudaFree"));
  // A real failure that sets the runtime's last-error slot: freeing a pointer that was never
  // allocated (without a driver, the runtime's own initialisation error).
  cudaError_t err = cudaFree(reinterpret_cast<void*>(0x10));
  REQUIRE(err != cudaSuccess);
  CHECK_FALSE(teardown_ok(err, "cudaFree"));
  // The slot is clear, so the next unrelated check is not blamed for it. Without a driver the
  // runtime's initialisation error is permanent and cannot be cleared: this part runs on a
  // GPU machine (the device check runs the [nogpu] cases there too).
  if (visible_devices() > 0) CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("GPUs below the built architectures are refused by name, newer ones run the PTX",
          "[nogpu]") {
  const std::vector<int> built = built_architectures();
  REQUIRE_FALSE(built.empty());
  CHECK(built == std::vector<int>{80, 90});  // CMAKE_CUDA_ARCHITECTURES's default
  CHECK(check_supported(DeviceInfo{0, "NVIDIA A100", 8, 0, 0}, built).ok());
  CHECK(check_supported(DeviceInfo{0, "NVIDIA A10", 8, 6, 0}, built).ok());  // sm_80 SASS
  CHECK(check_supported(DeviceInfo{0, "NVIDIA H200", 9, 0, 0}, built).ok());
  CHECK(check_supported(DeviceInfo{1, "NVIDIA B200", 10, 0, 0}, built).ok());  // PTX JIT
  Status old = check_supported(DeviceInfo{1, "Tesla T4", 7, 5, 0}, built);
  REQUIRE_FALSE(old.ok());
  CHECK(old.code() == ErrorCode::kDeviceUnavailable);
  CHECK(old.message() ==
        "cuda:1 (Tesla T4) has compute capability 7.5; this etc was built for sm_80, sm_90 and "
        "needs 8.0 or newer (rebuild with -DCMAKE_CUDA_ARCHITECTURES=75 to run on it)");
}

TEST_CASE("the architecture parser reads every form CMAKE_CUDA_ARCHITECTURES takes", "[nogpu]") {
  CHECK(parse_architectures("80,90") == std::vector<int>{80, 90});
  CHECK(parse_architectures("80-real;90-virtual") == std::vector<int>{80, 90});
  CHECK(parse_architectures("90a-real,100a") == std::vector<int>{90, 100});
  CHECK(parse_architectures("sm_86;compute_86") == std::vector<int>{86});
  // A keyword CMake did not resolve is "not known", which refuses no GPU (the driver's
  // kernel-image check decides when the device context is made), not "built for nothing".
  for (const char* keyword : {"native", "all", "all-major", ""}) {
    INFO(keyword);
    CHECK(parse_architectures(keyword).empty());
    CHECK(
        check_supported(DeviceInfo{0, "NVIDIA H200", 9, 0, 0}, parse_architectures(keyword)).ok());
  }
  // What the build records for all / all-major: CMake's expansions with this toolkit, which
  // the parser must read as numbers (before the fix the keywords themselves were recorded,
  // and every GPU was refused).
  const std::vector<int> all = parse_architectures(ETC_TEST_ARCHS_ALL);
  const std::vector<int> major = parse_architectures(ETC_TEST_ARCHS_ALL_MAJOR);
  INFO(ETC_TEST_ARCHS_ALL << " / " << ETC_TEST_ARCHS_ALL_MAJOR);
  REQUIRE_FALSE(all.empty());
  REQUIRE_FALSE(major.empty());
  CHECK(std::find(all.begin(), all.end(), 90) != all.end());
  CHECK(check_supported(DeviceInfo{0, "NVIDIA H200", 9, 0, 0}, all).ok());
  CHECK(check_supported(DeviceInfo{0, "NVIDIA H200", 9, 0, 0}, major).ok());
}

TEST_CASE("cuBLAS handles disallow reduced-precision split-K reductions", "[nogpu]") {
  CHECK((kCublasMathMode & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) != 0);
  CHECK((kCublasMathMode & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) ==
        CUBLAS_DEFAULT_MATH);
  Result<const CublasApi*> api = cublas_api();
  if (api.ok()) CHECK((*api)->set_math_mode != nullptr);  // resolved with the others
}

TEST_CASE("without a GPU the CUDA runtime fails with exit-4 errors that say what was found",
          "[nogpu]") {
  Result<std::unique_ptr<rt::OwnedRuntime>> r = make_cuda_runtime();
  if (visible_devices() > 0) {
    INFO(r.status().to_string());
    CHECK(r.ok());
    return;
  }
  REQUIRE(!r.ok());
  CHECK(r.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(r.status().message().rfind("no CUDA device visible: ", 0) == 0);
  DeviceContexts contexts;
  Result<DeviceContext*> ctx = contexts.get(0);
  REQUIRE(!ctx.ok());
  CHECK(ctx.status().code() == ErrorCode::kDeviceUnavailable);
  // What happened and what to do, never a source file and line (that is in the debug log).
  CHECK(ctx.status().message().find(".cpp:") == std::string::npos);
  CHECK(ctx.status().message().find("(cudaError") != std::string::npos);
}

TEST_CASE("no usable driver or GPU is told in words with what to do, no source location",
          "[nogpu]") {
  for (cudaError_t err :
       {cudaErrorInsufficientDriver, cudaErrorNoDevice, cudaErrorSystemDriverMismatch,
        cudaErrorDevicesUnavailable, cudaErrorCompatNotSupportedOnDevice, cudaErrorUnknown}) {
    const std::string m = no_device_message(err);
    INFO(m);
    CHECK(m.find(std::string("(") + cudaGetErrorName(err) + ")") != std::string::npos);
    CHECK(m.find(".cpp") == std::string::npos);
    CHECK(m.find("failed at") == std::string::npos);
  }
  CHECK(no_device_message(cudaErrorInsufficientDriver) ==
        "no NVIDIA driver, or one too old for this etc's CUDA " + runtime_version_string() +
            " runtime (cudaErrorInsufficientDriver): install or update the NVIDIA driver to run "
            "on a GPU");
  if (visible_devices() == 0) {
    Result<std::vector<DeviceInfo>> listed = list_devices();
    if (!listed.ok()) CHECK(listed.status().message().find(".cpp:") == std::string::npos);
  }
}

TEST_CASE("cuBLAS is loaded lazily, or its absence is a clear exit-4 error", "[nogpu]") {
  Result<const CublasApi*> api = cublas_api();
  if (api.ok()) {
    CHECK((*api)->sgemm != nullptr);
    CHECK((*api)->sgemm_strided_batched != nullptr);
    CHECK((*api)->create != nullptr);
  } else {
    CHECK(api.status().code() == ErrorCode::kDeviceUnavailable);
    CHECK(api.status().message().rfind("cuBLAS not found: ", 0) == 0);
  }
  // The error wrapper names the call, file and line.
  Status s = status_from_cublas(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm_v2(...)", "f.cpp", 7);
  CHECK(s.message().find("cublasSgemm_v2(...) failed at f.cpp:7: ") == 0);
  CHECK(status_from_cublas(CUBLAS_STATUS_ALLOC_FAILED, "x", "f", 1).code() ==
        ErrorCode::kDeviceUnavailable);
}

TEST_CASE("scratch memory: graphs are invalidated as soon as the old buffer is freed", "[nogpu]") {
  // Stand-ins for cudaStreamSynchronize, cudaMalloc and cudaFree: host memory, and an
  // allocation that fails on request.
  std::vector<std::unique_ptr<char[]>> live;
  bool fail = false;
  int freed = 0;
  ScratchBuffer::Ops ops{[] { return Status(); },
                         [&](size_t bytes) -> Result<void*> {
                           if (fail) return Status(ErrorCode::kDeviceUnavailable, "out of memory");
                           live.push_back(std::make_unique<char[]>(bytes));
                           return static_cast<void*>(live.back().get());
                         },
                         [&](void*) { ++freed; }};
  ScratchBuffer s;
  Result<void*> first = s.get(100, ops);
  REQUIRE(first.ok());
  const uint64_t captured = s.generation();  // a graph captured now uses *first
  CHECK(*s.get(64, ops) == *first);          // no growth: same buffer, same generation
  CHECK(s.generation() == captured);
  // Another delegate on the device asks for more and the allocation fails: the old buffer is
  // gone, so a graph keyed on `captured` must not replay against it.
  fail = true;
  CHECK_FALSE(s.get(1000, ops).ok());
  CHECK(freed == 1);
  CHECK(s.data() == nullptr);
  CHECK(s.generation() != captured);
  // The next request allocates again (no stale size is remembered).
  fail = false;
  const uint64_t after_failure = s.generation();
  Result<void*> again = s.get(64, ops);
  REQUIRE(again.ok());
  CHECK(*again != nullptr);
  CHECK(s.generation() != after_failure);
  s.release(ops);
  CHECK(freed == 2);
}

TEST_CASE("the graph cache replays alternating pointer sets instead of capturing again",
          "[nogpu]") {
  // Stand-in executable graphs: distinct non-null handles, destroyed exactly once.
  std::vector<int> slots(16);
  std::vector<cudaGraphExec_t> destroyed;
  GraphCache cache([&](cudaGraphExec_t e) { destroyed.push_back(e); }, /*capacity=*/2);
  int next = 0;
  auto handle = [&] { return reinterpret_cast<cudaGraphExec_t>(&slots[next++]); };
  using A = GraphCache::Action;
  // What a delegate does with one call's key: the action taken.
  auto call = [&](const GraphCache::Key& key) {
    A a = cache.decide(key);
    if (a == A::kReplay) REQUIRE(cache.replay(key) != nullptr);
    if (a == A::kPlain) cache.ran_plainly(key);
    if (a == A::kCapture) cache.add(key, handle(), {{2, 3}});
    return a;
  };
  // The runner's token-id and position buffers (8 bytes each) come back swapped every other
  // call: keys A and B alternate. A one-slot cache captured on every call from the third on.
  const GraphCache::Key a{0x1000, 1, 1, 0x2000, 1, 1, 7}, b{0x2000, 1, 1, 0x1000, 1, 1, 7};
  std::vector<A> got;
  for (int i = 0; i < 10; ++i)
    got.push_back(call(i % 2 == 0 ? a : b));
  CHECK(got == std::vector<A>{A::kPlain, A::kPlain, A::kCapture, A::kCapture, A::kReplay,
                              A::kReplay, A::kReplay, A::kReplay, A::kReplay, A::kReplay});
  CHECK(cache.counters().captures == 2);
  CHECK(cache.counters().replays == 6);
  CHECK(cache.counters().plain == 2);
  CHECK(destroyed.empty());
  // A replay gives the outputs' sizes at capture.
  CHECK(cache.replay(a)->out_sizes == GraphCache::Sizes{{2, 3}});
  // A third key (the scratch buffer moved: generation 8) beyond capacity evicts the least
  // recently used graph (b), once.
  GraphCache::Key c = a;
  c.back() = 8;
  CHECK(call(c) == A::kPlain);
  CHECK(call(c) == A::kCapture);
  CHECK(cache.size() == 2);
  CHECK(cache.counters().evicted == 1);
  REQUIRE(destroyed.size() == 1);
  CHECK(destroyed[0] == reinterpret_cast<cudaGraphExec_t>(&slots[1]));  // b's graph
  CHECK(call(a) == A::kReplay);
  CHECK(call(b) == A::kPlain);  // forgotten: plain once more, then captured again
  cache.clear();
  CHECK(destroyed.size() == 3);  // every graph destroyed exactly once
  CHECK(cache.decide(a) == A::kPlain);
}

TEST_CASE("the fallback 16-bit GEMM tiles rows and batches within the grid limits", "[nogpu]") {
  // Rows come in tiles of 16 per block in grid.y, batches in grid.z: both at most 65,535.
  // One launch used to take ceil(m / 16) blocks in y, past the limit from m = 1,048,561.
  for (auto [m, batch] : {std::pair<int64_t, int64_t>{1, 1},
                          {16 * 65535, 1},
                          {16 * 65535 + 1, 1},
                          {3'000'000, 2},
                          {5, 65536},
                          {40, 200'000}}) {
    INFO("m " << m << ", batch " << batch);
    const std::vector<kernels::GemmLaunch> launches = kernels::gemm_launches(m, batch);
    REQUIRE_FALSE(launches.empty());
    // Every (batch, row) exactly once, each launch within the limits.
    int64_t covered = 0;
    for (const kernels::GemmLaunch& l : launches) {
      CHECK((l.rows + kernels::kGemmTile - 1) / kernels::kGemmTile <= kernels::kMaxGridYZ);
      CHECK(l.batches <= kernels::kMaxGridYZ);
      CHECK(l.rows > 0);
      CHECK(l.batches > 0);
      CHECK(l.row0 % kernels::kGemmTile == 0);  // tiles of one launch never straddle another's
      CHECK(l.row0 + l.rows <= m);
      CHECK(l.batch0 + l.batches <= batch);
      covered += l.rows * l.batches;
    }
    CHECK(covered == m * batch);
  }
  CHECK(kernels::gemm_launches(16 * 65535 + 1, 1).size() == 2);
  CHECK(kernels::gemm_launches(16 * 65535, 1).size() == 1);
}

TEST_CASE("reductions to few outputs are split by the shapes alone", "[nogpu]") {
  using kernels::kReduceChunk;
  using kernels::reduce_splits;
  // A whole-tensor sum of 10^8 elements: 6,104 blocks of partials instead of one block.
  CHECK(reduce_splits(1, 100'000'000) == (100'000'000 + kReduceChunk - 1) / kReduceChunk);
  CHECK(reduce_splits(3, 1 << 22) == (1 << 22) / kReduceChunk);
  // Small reductions and many outputs stay one block per output.
  CHECK(reduce_splits(1, 2 * kReduceChunk - 1) == 1);
  CHECK(reduce_splits(1024, 1 << 24) == 1);
  // The partials' scratch: 8 bytes each (double or int64), none without a split.
  kernels::ReduceArgs p;
  p.kept = ops::shape_of(std::vector<int64_t>{2});
  p.reduced = ops::shape_of(std::vector<int64_t>{1024, 2048});
  CHECK(kernels::reduce_scratch_bytes(p) == static_cast<size_t>(2 * reduce_splits(2, 1 << 21) * 8));
  p.reduced = ops::shape_of(std::vector<int64_t>{7});
  CHECK(kernels::reduce_scratch_bytes(p) == 0);
}

// Element offsets of every operand for every index of p's space, in row-major order (what
// map_kernel computes on the device).
std::vector<std::array<int64_t, 4>> offsets(const kernels::MapArgs& p) {
  int64_t n = 1;
  for (int d = 0; d < p.shape.rank; ++d)
    n *= p.shape.sizes[d];
  std::vector<std::array<int64_t, 4>> out;
  for (int64_t i = 0; i < n; ++i) {
    std::array<int64_t, 4> o{p.out.offset, p.a.offset, p.b.offset, p.c.offset};
    int64_t rest = i;
    for (int d = p.shape.rank - 1; d >= 0; --d) {
      const int64_t idx = rest % p.shape.sizes[d];
      rest /= p.shape.sizes[d];
      o[0] += idx * p.out.strides[d];
      o[1] += idx * p.a.strides[d];
      o[2] += idx * p.b.strides[d];
      o[3] += idx * p.c.strides[d];
    }
    out.push_back(o);
  }
  return out;
}

TEST_CASE("coalescing a map's index space keeps every operand's offsets", "[nogpu]") {
  // out [2, 1, 3, 4] contiguous; a broadcast from [3, 1]; b a permuted view; c contiguous.
  kernels::MapArgs p;
  p.shape = ops::shape_of(std::vector<int64_t>{2, 1, 3, 4});
  const int64_t out_st[] = {12, 12, 4, 1}, a_st[] = {0, 0, 1, 0}, b_st[] = {1, 0, 8, 2},
                c_st[] = {12, 12, 4, 1};
  for (int d = 0; d < 4; ++d) {
    p.out.strides[d] = out_st[d];
    p.a.strides[d] = a_st[d];
    p.b.strides[d] = b_st[d];
    p.c.strides[d] = c_st[d];
  }
  p.a.offset = 5;
  const auto before = offsets(p);
  ops::coalesce(p);
  CHECK(p.shape.rank == 3);  // the size-1 dim is gone; nothing else merges (b, a differ)
  CHECK(offsets(p) == before);

  kernels::MapArgs flat;  // all contiguous: one dim
  flat.shape = ops::shape_of(std::vector<int64_t>{3, 5, 7});
  for (kernels::Operand* o : {&flat.out, &flat.a, &flat.b}) {
    o->strides[0] = 35;
    o->strides[1] = 7;
    o->strides[2] = 1;
  }
  const auto flat_before = offsets(flat);
  ops::coalesce(flat);
  CHECK(flat.shape.rank == 1);
  CHECK(flat.shape.sizes[0] == 105);
  CHECK(offsets(flat) == flat_before);

  kernels::MapArgs one;  // every dim of size 1: rank 0, one element at the offsets
  one.shape = ops::shape_of(std::vector<int64_t>{1, 1});
  one.b.offset = 3;
  ops::coalesce(one);
  CHECK(one.shape.rank == 0);
  CHECK(offsets(one) == std::vector<std::array<int64_t, 4>>{{0, 0, 3, 0}});
}

TEST_CASE("the CUDA allocator aligns, copies, knows its memory and frees exactly once", "[gpu]") {
  DeviceContexts contexts;
  CudaAllocator a(&contexts, visible_devices());
  for (size_t alignment : {256, 512, 4096}) {
    Result<void*> p = a.allocate(1000, alignment, 0);
    REQUIRE(p.ok());
    CHECK(reinterpret_cast<uintptr_t>(*p) % alignment == 0);
    CHECK(*a.owns(*p));
    std::vector<float> in(250), out(250, -1.0f);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = static_cast<float>(i) * 0.5f;
    REQUIRE(a.copy_host_to_device(*p, in.data(), 1000, 0).ok());
    REQUIRE(a.copy_device_to_host(out.data(), *p, 1000, 0).ok());
    CHECK(out == in);
    CHECK(!a.copy_host_to_device(in.data(), out.data(), 1000, 0).ok());  // host destination
    CHECK(!a.copy_device_to_host(*p, in.data(), 1000, 0).ok());          // host source
    a.deallocate(*p, 0);
    a.deallocate(*p, 0);  // refused and logged, not a double free
  }
  CHECK(a.live_allocations() == 0);
  std::vector<float> host(4);
  CHECK(!*a.owns(host.data()));
  Result<void*> missing = a.allocate(16, 256, static_cast<int8_t>(visible_devices()));
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == ErrorCode::kDeviceUnavailable);
  Result<void*> huge = a.allocate(size_t{1} << 50, 256, 0);  // 1 PiB
  REQUIRE(!huge.ok());
  CHECK(huge.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(huge.status().message().find("out of device memory") != std::string::npos);
}

// Runs y = a + b exported with `options` on the CUDA runtime; IO on the device when asked.
void run_add(ExportOptions options) {
  pte::File f = export_add(options);
  Result<std::unique_ptr<rt::OwnedRuntime>> runtime = make_cuda_runtime();
  INFO(runtime.status().to_string());
  REQUIRE(runtime.ok());
  rt::RuntimeEnv env = (*runtime)->env();
  Result<std::unique_ptr<rt::Method>> loaded = rt::Method::load(f, 0, env);
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  rt::Method& m = **loaded;
  std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40}, y(4);
  if (options.io_device == IoDevice::kHost) {
    REQUIRE(m.set_input(0, a.data(), 16).ok());
    REQUIRE(m.set_input(1, b.data(), 16).ok());
    REQUIRE(m.execute().ok());
    std::memcpy(y.data(), m.output(0).data, 16);
    CHECK(y == std::vector<float>{11, 22, 33, 44});
    return;
  }
  const Device dev = m.input(0).device;
  rt::DeviceAllocator* alloc = *env.allocators->for_device(dev);
  // A host pointer where the delegate needs device memory is refused, never copied.
  Status wrong = m.bind_input(0, a.data());
  CHECK(wrong.message().find("was given host memory") != std::string::npos);
  std::vector<rt::DeviceBuffer> mem;
  for (int i = 0; i < 3; ++i)
    mem.push_back(std::move(rt::DeviceBuffer::allocate(*env.allocators, dev, 16, 256)).value());
  REQUIRE(alloc->copy_host_to_device(mem[0].data(), a.data(), 16, dev.index).ok());
  REQUIRE(alloc->copy_host_to_device(mem[1].data(), b.data(), 16, dev.index).ok());
  REQUIRE(m.bind_input(0, mem[0].data()).ok());
  REQUIRE(m.bind_input(1, mem[1].data()).ok());
  REQUIRE(m.bind_output(0, mem[2].data()).ok());
  Status run = m.execute();
  INFO(run.to_string());
  REQUIRE(run.ok());
  REQUIRE(alloc->copy_device_to_host(y.data(), mem[2].data(), 16, dev.index).ok());
  CHECK(y == std::vector<float>{11, 22, 33, 44});
}

TEST_CASE("a CUDA delegate runs with host IO and with device IO", "[gpu]") {
  run_add(ExportOptions{});
  run_add(ExportOptions{.io_device = IoDevice::kDevice});
}

// Loads f on the CUDA runtime.
std::pair<std::unique_ptr<rt::OwnedRuntime>, std::unique_ptr<rt::Method>> load_on_gpu(
    const pte::File& f) {
  Result<std::unique_ptr<rt::OwnedRuntime>> runtime = make_cuda_runtime();
  INFO(runtime.status().to_string());
  REQUIRE(runtime.ok());
  Result<std::unique_ptr<rt::Method>> loaded = rt::Method::load(f, 0, (*runtime)->env());
  INFO(loaded.status().to_string());
  REQUIRE(loaded.ok());
  return {std::move(runtime).value(), std::move(loaded).value()};
}

TEST_CASE("an index out of range on the GPU is reported by the next read-back", "[gpu]") {
  pte::File f = export_json(
      R"([{"name": "w", "dtype": "float32", "shape": [4, 2]},
          {"name": "i", "dtype": "int64", "shape": [3]}])",
      R"([{"name": "e", "op": "aten.embedding.default", "args": {"weight": "w", "indices": "i"},
           "outputs": ["y"]}])",
      R"(["y"])");
  auto [runtime, m] = load_on_gpu(f);
  std::vector<float> w{0, 1, 2, 3, 4, 5, 6, 7}, y(6);
  REQUIRE(m->set_input(0, w.data(), 32).ok());
  for (int64_t bad : {int64_t{4}, int64_t{-1}}) {
    std::vector<int64_t> i{1, bad, 3};
    REQUIRE(m->set_input(1, i.data(), 24).ok());
    // Reported once: by the output's copy back to the host (inside execute) or, failing
    // that, by the synchronisation.
    Status run = m->execute();
    Status sync = synchronize_devices(*runtime);
    REQUIRE(run.ok() != sync.ok());
    const Status& s = run.ok() ? sync : run;
    CHECK(s.code() == ErrorCode::kInvalidInput);
    CHECK(s.message().find("index was out of range") != std::string::npos);
    CHECK(synchronize_devices(*runtime).ok());  // reported once, then cleared
  }
  std::vector<int64_t> good{3, 0, 1};
  REQUIRE(m->set_input(1, good.data(), 24).ok());
  REQUIRE(m->execute().ok());
  REQUIRE(synchronize_devices(*runtime).ok());
  std::memcpy(y.data(), m->output(0).data, 24);
  CHECK(y == std::vector<float>{6, 7, 0, 1, 2, 3});
}

// cache [1, 2, 4, 3] (state, initial 0..23, or no initial value: zeros);
// y = 2 * index_put(cache, [None, None, pos], x), exported for cuda:0.
pte::File export_kv_cache(bool initial_value) {
  Graph g;
  ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {1, 2, 1, 3}));
  ValueId pos = g.add_input("pos", TensorSpec::make(DType::kInt64, {1}));
  std::string init(96, '\0');
  for (int i = 0; i < 24; ++i) {
    const auto v = static_cast<float>(i);
    std::memcpy(init.data() + 4 * i, &v, 4);
  }
  ValueId cache =
      g.add_state("cache", TensorSpec::make(DType::kFloat32, {1, 2, 4, 3}), "k_cache",
                  initial_value ? ConstantData{make_blob(std::move(init)), 0, 96} : ConstantData{});
  ValueId upd = etc::testing::add_op(g, OpKind::IndexPut, "upd",
                                     {{"self", cache},
                                      {"indices", std::vector<ValueId>{ValueId(), ValueId(), pos}},
                                      {"values", x}},
                                     TensorSpec::make(DType::kFloat32, {1, 2, 4, 3}));
  ValueId y2 = etc::testing::add_op(g, OpKind::AddTensor, "y", {{"self", upd}, {"other", upd}},
                                    TensorSpec::make(DType::kFloat32, {1, 2, 4, 3}));
  g.set_outputs({y2});
  g.set_state_update(cache, upd);
  ExportReport report;
  pte::File f = etc::testing::export_graph(g, "kv.pte", Device{DeviceType::kCUDA, 0}, &report);
  CHECK(report.copies.size() == 3);  // x, pos in; y out: never the cache
  return f;
}

// One step of export_kv_cache's program: x = value everywhere, at p; returns y.
std::vector<float> kv_step(rt::OwnedRuntime& runtime, rt::Method& m, float value, int64_t p) {
  std::vector<float> in(6, value), y(24);
  REQUIRE(m.set_input(0, in.data(), 24).ok());
  REQUIRE(m.set_input(1, &p, 8).ok());
  Status s = m.execute();
  INFO(s.to_string());
  REQUIRE(s.ok());
  REQUIRE(synchronize_devices(runtime).ok());
  std::memcpy(y.data(), m.output(0).data, 96);
  return y;
}

TEST_CASE("a KV cache in GPU memory keeps each call's write, and resets", "[gpu]") {
  pte::File f = export_kv_cache(true);
  auto [runtime, m] = load_on_gpu(f);
  std::vector<float> y = kv_step(*runtime, *m, 100, 1);
  CHECK(y[3] == 200);
  CHECK(y[6] == 12);
  y = kv_step(*runtime, *m, 50, 2);
  CHECK(y[3] == 200);
  CHECK(y[6] == 100);
  REQUIRE(m->reset_state().ok());
  y = kv_step(*runtime, *m, 7, 0);
  CHECK(y[0] == 14);
  CHECK(y[3] == 6);
}

TEST_CASE("GPU state without an initial value is zeros at load and after a reset", "[gpu]") {
  pte::File f = export_kv_cache(false);
  auto [runtime, m] = load_on_gpu(f);
  // cudaMalloc does not zero: every position but the one written must read 0.
  std::vector<float> y = kv_step(*runtime, *m, 5, 1);
  for (int i = 0; i < 24; ++i)
    CHECK(y[i] == ((i % 12) / 3 == 1 ? 10.0f : 0.0f));
  y = kv_step(*runtime, *m, 9, 2);
  CHECK(y[3] == 10);
  REQUIRE(m->reset_state().ok());
  y = kv_step(*runtime, *m, 1, 0);  // the writes before the reset are gone
  for (int i = 0; i < 24; ++i)
    CHECK(y[i] == ((i % 12) / 3 == 0 ? 2.0f : 0.0f));
}

TEST_CASE("a delegate with target_device cuda:1 allocates and runs on device 1", "[gpu]") {
  if (visible_devices() < 2) {
    WARN("one GPU visible: cuda:1 not tested");
    return;
  }
  run_add(ExportOptions{.target = Device{DeviceType::kCUDA, 1}, .io_device = IoDevice::kDevice});
}

TEST_CASE("a cuda:0 delegate refuses memory of cuda:1, naming both devices", "[gpu]") {
  if (visible_devices() < 2) {
    WARN("SKIPPED: one GPU visible, no second device to bind from");
    return;
  }
  auto [runtime, m] = load_on_gpu(export_add(ExportOptions{.io_device = IoDevice::kDevice}));
  Result<rt::DeviceBuffer> other =
      rt::DeviceBuffer::allocate((*runtime).allocators, Device{DeviceType::kCUDA, 1}, 16, 256);
  REQUIRE(other.ok());
  Status s = m->bind_input(0, other->data());
  CHECK(s.message() ==
        "input 0 is a cuda:0 tensor but was given memory of cuda:1; copy it to cuda:0 first "
        "(never copied implicitly)");
}

}  // namespace
}  // namespace etc::cuda

int main(int argc, char** argv) {
  bool wants_gpu = false;
  for (int i = 1; i < argc; ++i)
    wants_gpu |= std::string(argv[i]).find("[gpu]") != std::string::npos;
  if (wants_gpu && etc::cuda::visible_devices() == 0) {
    std::printf("SKIP: no CUDA device visible\n");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
