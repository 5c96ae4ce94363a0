// The op table (graph/ops.def) and everything derived from it agree: every op has the
// kernels its declaration promises (CPU out variant and functional form, CUDA where the
// capability column can delegate it), the CUDA op cases cover every op the delegate takes,
// and the torch.export importer takes every ATen op of the table by its own name.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "backends/cuda/cuda_capability.h"
#include "frontends/torch_export/torch_import.h"
#include "graph/ops.h"
#include "kernels/kernel_test_util.h"
#include "runtime/copy_kernels.h"
#include "runtime/method.h"

#ifdef ETC_WITH_CUDA
#include "backends/cuda/runtime/cuda_ops.h"
#endif

namespace etc::rt::test {
namespace {

// What the host runtime registers: the CPU kernels and the device copies.
const OperatorRegistry& host_registry() {
  static const OperatorRegistry registry = [] {
    OperatorRegistry r;
    Status s = register_cpu_kernels(r);
    if (s.ok()) s = register_copy_kernels(r);
    if (!s.ok()) FAIL("registering the host kernels: " << s.to_string());
    return r;
  }();
  return registry;
}

// The ops of the table that programs can contain (not the compiler's own).
bool user_op(const OpInfo& info) {
  return info.kind != OpKind::H2DCopy && info.kind != OpKind::D2HCopy &&
         info.kind != OpKind::DelegateCall;
}

TEST_CASE("every op's out variant has a CPU kernel under its schema") {
  size_t checked = 0;
  for (const OpInfo& info : all_ops()) {
    if (!info.out_schema) continue;
    INFO(info.out_kernel_name);
    const RegisteredKernel* k = host_registry().find(info.out_kernel_name);
    REQUIRE(k != nullptr);
    CHECK(k->op == info.kind);
    CHECK(k->out_variant);
    REQUIRE(k->call_schema() != nullptr);
    CHECK(k->call_schema()->num_out_args() == static_cast<size_t>(info.schema.num_outputs));
    ++checked;
  }
  CHECK(checked >= 60);
}

TEST_CASE("every op a delegate can hold has a CPU kernel for its functional form") {
  // Delegate subgraphs call the functional form; `etc run --device cpu` runs them on the CPU.
  for (const OpInfo& info : all_ops()) {
    if (!user_op(info)) continue;
    INFO(info.kernel_name);
    const RegisteredKernel* k = host_registry().find(info.kernel_name);
    REQUIRE(k != nullptr);
    CHECK(k->op == info.kind);
    CHECK_FALSE(k->out_variant);
    // The schema a functional kernel is checked against: the op's, then one out per result.
    REQUIRE(k->call_schema() != nullptr);
    CHECK(k->call_schema()->args.size() ==
          info.schema.args.size() + static_cast<size_t>(info.schema.num_outputs));
  }
}

TEST_CASE("every op decomposed on the host has no out variant, and every other one has") {
  for (const OpInfo& info : all_ops()) {
    INFO(info.name);
    CHECK(info.out_schema.has_value() == (info.host_form == HostForm::kOutVariant));
    CHECK(info.out_kernel_name.empty() == !info.out_schema.has_value());
    if (info.out_schema) {
      CHECK(op_from_kernel_name(info.out_kernel_name)->op == info.kind);
      CHECK(op_from_kernel_name(info.out_kernel_name)->out_variant);
    }
    CHECK(op_from_kernel_name(info.kernel_name)->op == info.kind);
  }
  CHECK_FALSE(op_from_kernel_name("aten::add").has_value());
  CHECK_FALSE(op_from_kernel_name("aten::copy_").has_value());
}

TEST_CASE("the registry refuses forms an op does not have and kBoth over different arguments") {
  OperatorRegistry r;
  auto fn = [](KernelContext&, std::span<Value*>) { return Status(); };
  Status none = r.add(OpKind::Linear, fn, KernelForms::kOut);
  REQUIRE_FALSE(none.ok());
  CHECK(none.message() == "aten.linear.default has no out variant to register a kernel for");
  Status differ = r.add(OpKind::ToCopy, fn);
  REQUIRE_FALSE(differ.ok());
  CHECK(differ.message() ==
        "aten::_to_copy.out and aten::_to_copy.default take different arguments: register a "
        "kernel for each");
  Status bad_schema = r.add("aten::x_", "x_(Tensor(a!) self", fn);
  CHECK_FALSE(bad_schema.ok());
  Status delegate = r.add(OpKind::DelegateCall, fn);
  CHECK_FALSE(delegate.ok());
}

#ifdef ETC_WITH_CUDA
TEST_CASE("every op the CUDA capability can delegate has a CUDA kernel") {
  OperatorRegistry registry;
  REQUIRE(cuda::register_cuda_kernels(registry).ok());
  size_t delegable = 0;
  for (const OpInfo& info : all_ops()) {
    if (!cuda_may_delegate(info.kind)) continue;
    INFO(info.kernel_name);
    const RegisteredKernel* k = registry.find(info.kernel_name);
    REQUIRE(k != nullptr);
    CHECK(k->op == info.kind);
    ++delegable;
  }
  // And nothing more: a CUDA kernel the capability never delegates to is dead code.
  for (const std::string& name : registry.names()) {
    INFO(name);
    const RegisteredKernel* k = registry.find(name);
    if (k->op) CHECK(cuda_may_delegate(*k->op));
  }
  CHECK(delegable >= 60);
}
#endif

TEST_CASE("the CUDA op cases cover every op the CUDA delegate takes") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("etc_op_cases_" + std::to_string(::getpid()));
  const std::string cmd =
      "python3 " ETC_SOURCE_DIR "/test/cuda/op_cases.py " + dir.string() + " --no-big > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::set<std::string> covered;
  std::ifstream cases(dir / "cases.txt");
  for (std::string line; std::getline(cases, line);) {
    const size_t a = line.find('|');
    const size_t b = line.find('|', a + 1);
    if (a != std::string::npos && b != std::string::npos)
      covered.insert(line.substr(a + 1, b - a - 1));
  }
  fs::remove_all(dir);
  REQUIRE_FALSE(covered.empty());
  for (const OpInfo& info : all_ops()) {
    if (!cuda_may_delegate(info.kind)) continue;
    INFO(info.name);
    CHECK(covered.count(info.name) == 1);
  }
}

TEST_CASE("the torch.export importer takes every ATen op of the table by its name") {
  const std::vector<std::string> supported = supported_torch_ops();
  const std::set<std::string> targets(supported.begin(), supported.end());
  for (const OpInfo& info : all_ops()) {
    if (!user_op(info) || info.schema.ns != "aten") continue;
    INFO(info.name);
    CHECK(targets.count(info.name) == 1);
  }
}

}  // namespace
}  // namespace etc::rt::test
