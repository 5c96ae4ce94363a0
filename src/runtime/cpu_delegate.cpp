#include "runtime/cpu_delegate.h"

#include <map>

#include "format/pte_reader.h"
#include "runtime/method.h"

namespace etc::rt {
namespace {

class CpuDelegateHandle final : public DelegateHandle {
 public:
  CpuDelegateHandle(DelegateProgram program, std::unique_ptr<Method> method)
      : program_(std::move(program)), method_(std::move(method)) {}

  Status execute(std::span<Value*> args) override {
    ETC_RETURN_IF_ERROR(bind_delegate_args(*method_, args));
    ETC_RETURN_IF_ERROR(method_->execute());
    return publish_delegate_outputs(*method_, args);
  }

 private:
  DelegateProgram program_;  // the plan the method points into
  std::unique_ptr<Method> method_;
};

class CpuDelegateBackend final : public Backend {
 public:
  Result<std::unique_ptr<DelegateHandle>> init(std::span<const uint8_t> processed,
                                               const std::vector<pte::CompileSpec>&,
                                               const pte::File& file,
                                               const RuntimeEnv& env) override {
    ETC_ASSIGN_OR_RETURN(DelegateProgram program,
                         read_delegate_program(processed, "EtcCudaBackend blob"));
    std::map<size_t, std::string> keys;
    for (const auto& [value, key] : program.constants)
      keys[static_cast<size_t>(value)] = key;
    ConstantResolver constants =
        [&file, keys](size_t index,
                      const pte::Tensor&) -> Result<std::optional<std::span<const uint8_t>>> {
      auto it = keys.find(index);
      if (it == keys.end()) return std::optional<std::span<const uint8_t>>();
      std::optional<std::span<const uint8_t>> bytes = file.named_bytes(it->second);
      if (!bytes) {
        return invalid_input("delegate constant '" + it->second +
                             "' is missing from the program's named data");
      }
      return bytes;
    };
    auto handle_program = std::make_unique<DelegateProgram>(std::move(program));
    ETC_ASSIGN_OR_RETURN(std::unique_ptr<Method> method,
                         Method::load_plan(handle_program->plan, constants, env, nullptr));
    return std::unique_ptr<DelegateHandle>(
        std::make_unique<CpuDelegateHandle>(std::move(*handle_program), std::move(method)));
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_reference_delegate_backend() {
  return std::make_unique<CpuDelegateBackend>();
}

}  // namespace etc::rt
