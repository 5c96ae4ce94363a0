// The runtime's device plumbing, proven on machines without a GPU: the allocator registry,
// owning buffers, loading (missing operators, missing devices), binding rules, and a
// device-annotated program run with a mock device allocator that counts every allocation
// and copy.
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "export/emitter.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "passes/graph_builder.h"
#include "runtime/copy_kernels.h"
#include "runtime/cpu_delegate.h"
#include "runtime/method.h"

namespace etc::rt {
namespace {

using etc::testing::add;
using etc::testing::f32;
using etc::testing::graph_from_json;

constexpr Device kCuda0{DeviceType::kCUDA, 0};

// A float32-only add for the tests, registered under the names the programs use, so these
// tests do not depend on the full CPU kernel library.
Status test_add(KernelContext& ctx, std::span<Value*> args) {
  if (args.size() != 5) return ctx.error("bad arity");
  const TensorView& a = args[0]->tensor;
  const TensorView& b = args[1]->tensor;
  TensorView& out = args[3]->tensor;
  if (a.sizes != out.sizes || b.sizes != out.sizes)
    return ctx.error("test kernel: no broadcasting");
  for (int64_t i = 0; i < out.numel(); ++i) {
    out.data_as<float>()[i] =
        a.data_as<float>()[i] +
        static_cast<float>(args[2]->scalar_as_double()) * b.data_as<float>()[i];
  }
  return Status();
}

// Exports "y = a + b" (2x2 float32) with the given options and reads it back.
pte::File export_add(ExportOptions options) {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("b") + "]",
                            "[" + add("add", "a", "b", "y") + "]", R"(["y"])");
  PassRegistry r = make_pass_registry();
  ExportReport report;
  PassContext ctx{options, report};
  REQUIRE(run_pipeline(g, *parse_pipeline(kDefaultExportPipeline, r), r, ctx, {}).ok());
  Result<pte::File> emitted = emit_program(g);
  REQUIRE(emitted.ok());
  Result<pte::File> f = read_pte(make_blob(*write_pte(*emitted)), "add.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  return std::move(f).value();
}

struct MockRuntime {
  OperatorRegistry operators;
  DeviceAllocatorRegistry allocators;
  BackendRegistry backends;
  HostBackedAllocator* cuda = nullptr;
  MockRuntime() {
    REQUIRE(operators.add("aten::add.out", &test_add).ok());
    REQUIRE(operators.add("aten::add.Tensor", &test_add).ok());
    REQUIRE(register_copy_kernels(operators).ok());
    auto mock = std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, 2);
    cuda = mock.get();
    REQUIRE(allocators.add(std::move(mock)).ok());
    REQUIRE(backends.add("EtcCudaBackend", make_cpu_reference_delegate_backend()).ok());
  }
  RuntimeEnv env() const { return RuntimeEnv{&operators, &allocators, &backends}; }
};

std::vector<float> floats(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

TEST_CASE("the allocator registry refuses duplicates and explains missing devices") {
  DeviceAllocatorRegistry r;
  REQUIRE(r.add(std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, 1)).ok());
  Status dup = r.add(std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, 1));
  CHECK(dup.message() == "a device allocator for cuda is already registered");
  Result<DeviceAllocator*> missing_index = r.for_device(Device{DeviceType::kCUDA, 1});
  CHECK(missing_index.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(missing_index.status().message() ==
        "the program needs cuda:1, but only 1 cuda device(s) exist");
  DeviceAllocatorRegistry empty;
  Result<DeviceAllocator*> none = empty.for_device(kCuda0);
  CHECK(none.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(none.status().message().find("run with --device cpu") != std::string::npos);
}

TEST_CASE("device buffers are freed exactly once, also when moved and on failure") {
  DeviceAllocatorRegistry r;
  auto owned = std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, 1);
  HostBackedAllocator* mock = owned.get();
  REQUIRE(r.add(std::move(owned)).ok());
  {
    Result<DeviceBuffer> a = DeviceBuffer::allocate(r, kCuda0, 100, 256);
    REQUIRE(a.ok());
    CHECK(*mock->owns(a->data()));
    DeviceBuffer b = std::move(a).value();
    DeviceBuffer c;
    c = std::move(b);
    CHECK(mock->live_allocations() == 1);
  }
  CHECK(mock->counters().allocations == 1);
  CHECK(mock->counters().deallocations == 1);
  mock->fail_next_allocation();
  Result<DeviceBuffer> failed = DeviceBuffer::allocate(r, kCuda0, 100, 256);
  CHECK(failed.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(mock->live_allocations() == 0);
  Result<DeviceBuffer> host = DeviceBuffer::allocate(r, Device{}, 64, 64);
  REQUIRE(host.ok());
  CHECK_FALSE(*mock->owns(host->data()));
}

// Resident pages of this process, in bytes (/proc/self/statm's second field).
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

TEST_CASE("large host buffers are zero, take memory only where written, and move once") {
  // From 1 MiB the CPU's buffers are mapped pages: a planned tensor no step writes (the
  // weight copy the CPU load planner skips) costs nothing until written.
  DeviceAllocatorRegistry r;
  const int64_t before = resident_bytes();
  Result<DeviceBuffer> big = DeviceBuffer::allocate(r, Device{}, size_t{64} << 20, 256);
  REQUIRE(big.ok());
  CHECK(resident_bytes() - before < (int64_t{8} << 20));
  auto* bytes = static_cast<uint8_t*>(big->data());
  CHECK(bytes[0] == 0);
  CHECK(bytes[(size_t{64} << 20) - 1] == 0);
  Result<DeviceBuffer> a = DeviceBuffer::allocate(r, Device{}, size_t{2} << 20, 64);
  REQUIRE(a.ok());
  auto* data = static_cast<uint8_t*>(a->data());
  CHECK(std::all_of(data, data + (size_t{2} << 20), [](uint8_t b) { return b == 0; }));
  std::memset(data, 7, size_t{2} << 20);
  DeviceBuffer b = std::move(a).value();
  CHECK(b.data() == data);
  DeviceBuffer c = std::move(big).value();
  c = std::move(b);            // frees the 64 MiB buffer, takes the 2 MiB one
  CHECK(b.data() == nullptr);  // NOLINT(bugprone-use-after-move): moved from, released
  REQUIRE(c.data() == data);
  CHECK(c.size() == (size_t{2} << 20));
  CHECK(data[(size_t{2} << 20) - 1] == 7);
}

TEST_CASE("a memory budget bounds host allocations and emulated device memory") {
  DeviceAllocatorRegistry r;
  auto owned = std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, 2, 1000);
  HostBackedAllocator* mock = owned.get();
  REQUIRE(r.add(std::move(owned)).ok());
  r.set_host_allocation_limit(500);
  Result<DeviceBuffer> a = DeviceBuffer::allocate(r, kCuda0, 600, 256);
  REQUIRE(a.ok());
  // 600 of 1000 bytes in use on cuda:0: 500 more do not fit there, but do on cuda:1.
  Result<DeviceBuffer> b = DeviceBuffer::allocate(r, kCuda0, 500, 256);
  REQUIRE_FALSE(b.ok());
  CHECK(b.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(b.status().message().find("600 of 1000 bytes in use") != std::string::npos);
  CHECK(DeviceBuffer::allocate(r, Device{DeviceType::kCUDA, 1}, 500, 256).ok());
  { DeviceBuffer gone = std::move(a).value(); }
  CHECK(DeviceBuffer::allocate(r, kCuda0, 1000, 256).ok());  // freed memory counts again
  CHECK(mock->counters().allocations == 3);
  Result<DeviceBuffer> host = DeviceBuffer::allocate(r, Device{}, 501, 64);
  REQUIRE_FALSE(host.ok());
  CHECK(host.status().code() == ErrorCode::kDeviceUnavailable);
  CHECK(host.status().message().find("budget is 500 bytes") != std::string::npos);
  CHECK(DeviceBuffer::allocate(r, Device{}, 500, 64).ok());
}

TEST_CASE("loading lists every missing operator at once") {
  pte::File f = export_add(ExportOptions{.target = Device{}});
  OperatorRegistry empty;
  DeviceAllocatorRegistry allocators;
  Result<std::unique_ptr<Method>> m = Method::load(f, 0, RuntimeEnv{&empty, &allocators, nullptr});
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kUnsupported);
  CHECK(m.status().message() ==
        "plan 'forward' calls operator this runtime does not have: aten::add.out (1 call)");
}

TEST_CASE("a CUDA program without a CUDA allocator fails to load with exit-4 kind") {
  pte::File f = export_add(ExportOptions{});
  MockRuntime rt;
  DeviceAllocatorRegistry no_cuda;
  Result<std::unique_ptr<Method>> m =
      Method::load(f, 0, RuntimeEnv{&rt.operators, &no_cuda, &rt.backends});
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == ErrorCode::kDeviceUnavailable);
}

TEST_CASE("a device-annotated program runs with exactly the planned allocations and copies") {
  pte::File f = export_add(ExportOptions{});  // cuda:0, IO on the host
  MockRuntime rt;
  {
    Result<std::unique_ptr<Method>> loaded = Method::load(f, 0, rt.env());
    INFO(loaded.status().to_string());
    REQUIRE(loaded.ok());
    Method& m = **loaded;
    // One CUDA buffer (two device inputs + the delegate output, 48 bytes), allocated once.
    CHECK(rt.cuda->counters().allocations == 1);
    CHECK(rt.cuda->counters().bytes_allocated == 48);
    std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40};
    Status never = m.execute();
    CHECK(never.message() ==
          "input 0 (float32[2, 2] cpu) was never set: call set_input before executing");
    // Host buffer: a and b (16 bytes each); the d2h output reuses an input's slot once the
    // h2d copies have read it, as ExecuTorch plans it ([0, 32, 48]).
    CHECK((m.input_is_consumed(0) || m.input_is_consumed(1)));
    for (int run = 0; run < 3; ++run) {
      REQUIRE(m.set_input(0, a.data(), 16).ok());
      REQUIRE(m.set_input(1, b.data(), 16).ok());
      Status s = m.execute();
      INFO(s.to_string());
      REQUIRE(s.ok());
      CHECK(floats(m.output(0)) == std::vector<float>{a[0] + 10, 22, 33, 44});
      a[0] += 1;  // each run sees its own inputs
    }
    size_t consumed = m.input_is_consumed(0) ? 0 : 1;
    Status again = m.execute();
    CHECK(again.message().find("input " + std::to_string(consumed) +
                               " (float32[2, 2] cpu) must be set again before each execution") !=
          std::string::npos);
    CHECK(rt.cuda->counters().h2d_copies == 6);  // 2 per run
    CHECK(rt.cuda->counters().d2h_copies == 3);  // 1 per run
    CHECK(rt.cuda->counters().h2d_bytes == 96);
    CHECK(rt.cuda->counters().allocations == 1);  // nothing allocated per run
  }
  CHECK(rt.cuda->counters().deallocations == 1);  // freed exactly once with the method
  CHECK(rt.cuda->live_allocations() == 0);
}

TEST_CASE("with --io-device device, inputs must be device memory and no copies happen") {
  pte::File f = export_add(ExportOptions{.io_device = IoDevice::kDevice});
  MockRuntime rt;
  Result<std::unique_ptr<Method>> loaded = Method::load(f, 0, rt.env());
  REQUIRE(loaded.ok());
  Method& m = **loaded;
  REQUIRE(m.input_is_bound(0));
  REQUIRE(m.output_is_bound(0));
  std::vector<float> host(4, 1.0f);
  Status wrong = m.bind_input(0, host.data());
  CHECK(wrong.message() ==
        "input 0 is a cuda:0 tensor but was given host memory; upload it to the device first "
        "(never copied implicitly)");
  CHECK(m.set_input(0, host.data(), 16).message().find("is not planned") != std::string::npos);
  Status unbound = m.execute();
  CHECK(unbound.message() == "input 0 is not bound");
  std::vector<DeviceBuffer> mem;
  for (int i = 0; i < 3; ++i)
    mem.push_back(std::move(DeviceBuffer::allocate(rt.allocators, kCuda0, 16, 256)).value());
  std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  REQUIRE(rt.cuda->copy_host_to_device(mem[0].data(), a.data(), 16, 0).ok());
  REQUIRE(rt.cuda->copy_host_to_device(mem[1].data(), b.data(), 16, 0).ok());
  REQUIRE(m.bind_input(0, mem[0].data()).ok());
  REQUIRE(m.bind_input(1, mem[1].data()).ok());
  REQUIRE(m.bind_output(0, mem[2].data()).ok());
  size_t copies_before = rt.cuda->counters().h2d_copies + rt.cuda->counters().d2h_copies;
  REQUIRE(m.execute().ok());
  CHECK(rt.cuda->counters().h2d_copies + rt.cuda->counters().d2h_copies ==
        copies_before);  // none by the program
  std::vector<float> y(4);
  REQUIRE(rt.cuda->copy_device_to_host(y.data(), mem[2].data(), 16, 0).ok());
  CHECK(y == std::vector<float>{6, 8, 10, 12});
}

TEST_CASE("memory of another device of the same type is refused, naming both devices") {
  pte::File f = export_add(ExportOptions{.io_device = IoDevice::kDevice});  // on cuda:0
  MockRuntime rt;  // two emulated CUDA devices
  Result<std::unique_ptr<Method>> loaded = Method::load(f, 0, rt.env());
  REQUIRE(loaded.ok());
  Result<DeviceBuffer> other =
      DeviceBuffer::allocate(rt.allocators, Device{DeviceType::kCUDA, 1}, 16, 256);
  REQUIRE(other.ok());
  // Without peer access a cuda:0 kernel would fault on cuda:1 memory: refused at binding.
  CHECK((*loaded)->bind_input(0, other->data()).message() ==
        "input 0 is a cuda:0 tensor but was given memory of cuda:1; copy it to cuda:0 first "
        "(never copied implicitly)");
  CHECK((*loaded)->bind_output(0, other->data()).message().find("given memory of cuda:1") !=
        std::string::npos);
  Result<DeviceBuffer> same = DeviceBuffer::allocate(rt.allocators, kCuda0, 16, 256);
  REQUIRE(same.ok());
  CHECK((*loaded)->bind_input(0, same->data()).ok());
}

TEST_CASE("a device pointer bound to a CPU tensor is refused") {
  pte::File f = export_add(ExportOptions{.target = Device{}});
  MockRuntime rt;
  Result<std::unique_ptr<Method>> loaded = Method::load(f, 0, rt.env());
  REQUIRE(loaded.ok());
  Result<DeviceBuffer> dev = DeviceBuffer::allocate(rt.allocators, kCuda0, 16, 256);
  REQUIRE(dev.ok());
  // Planned inputs are copied, not bound.
  CHECK((*loaded)->bind_input(0, dev->data()).message() == "input 0 is planned: use set_input");
  CHECK((*loaded)->set_input(0, nullptr, 3).message() ==
        "input 0 (float32[2, 2] cpu) needs 16 bytes, got 3");
}

TEST_CASE("copy kernels reject wrong directions and shapes") {
  MockRuntime rt;
  KernelContext ctx{"et_copy::_h2d_copy.out", &rt.allocators};
  std::vector<float> host(4);
  Value src, dst;
  src.kind = dst.kind = Value::Kind::kTensor;
  src.tensor = TensorView{host.data(), DType::kFloat32, {4}, Device{}};
  dst.tensor = TensorView{host.data(), DType::kFloat32, {2}, kCuda0};
  std::vector<Value*> args{&src, &dst, &dst};
  const RegisteredKernel* kernel = rt.operators.find("et_copy::_h2d_copy.out");
  REQUIRE(kernel != nullptr);
  KernelFn h2d = kernel->fn;
  CHECK(h2d(ctx, args).message() ==
        "et_copy::_h2d_copy.out: source float32[4] cpu and destination float32[2] cuda:0 differ");
  dst.tensor.sizes = {4};
  // The destination is host memory labelled cuda:0: the mock allocator notices.
  CHECK(h2d(ctx, args).message() == "host-to-device copy: the destination is not device memory");
}

}  // namespace
}  // namespace etc::rt
