#include "runtime/cpu_delegate.h"

#include <map>

#include "runtime/method.h"
#include "serialize/pte_reader.h"

namespace etc::rt {
namespace {

class CpuDelegateHandle final : public DelegateHandle {
 public:
  CpuDelegateHandle(DelegateProgram program, std::unique_ptr<Method> method)
      : program_(std::move(program)), method_(std::move(method)) {}

  Status execute(std::span<Value*> args) override {
    size_t n_in = method_->num_inputs(), n_out = method_->num_outputs();
    if (args.size() != n_in + n_out) {
      return invalid_input("delegate takes " + std::to_string(n_in) + " inputs and " +
                           std::to_string(n_out) + " outputs, the call passes " +
                           std::to_string(args.size()) + " values");
    }
    for (size_t i = 0; i < n_in + n_out; ++i) {
      const Value& v = *args[i];
      const TensorView& want = i < n_in ? method_->input(i) : method_->output(i - n_in);
      if (!v.is_tensor() || v.tensor.dtype != want.dtype || v.tensor.sizes != want.sizes) {
        return invalid_input(
            "delegate " + std::string(i < n_in ? "input " : "output ") +
            std::to_string(i < n_in ? i : i - n_in) + " should be " + want.describe() + ", got " +
            (v.is_tensor() ? v.tensor.describe() : std::string(value_kind_name(v.kind))));
      }
      Status s = i < n_in ? method_->bind_input(i, v.tensor.data)
                          : method_->bind_output(i - n_in, v.tensor.data);
      if (!s.ok()) return s;
    }
    return method_->execute();
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
      if (!bytes)
        return invalid_input("delegate constant '" + it->second +
                             "' is missing from the program's named data");
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
