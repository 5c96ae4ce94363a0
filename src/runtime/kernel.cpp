#include "runtime/kernel.h"

namespace etc::rt {

Status KernelContext::error(const std::string& message) const {
  return invalid_input(std::string(op) + ": " + message);
}

Status OperatorRegistry::add(const std::string& name, KernelFn fn) {
  if (fn == nullptr) return internal_error("kernel '" + name + "' registered without a function");
  if (!kernels_.emplace(name, fn).second)
    return internal_error("kernel '" + name + "' is registered twice");
  return Status();
}

KernelFn OperatorRegistry::find(std::string_view name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : it->second;
}

std::vector<std::string> OperatorRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, fn] : kernels_)
    out.push_back(name);
  return out;
}

}  // namespace etc::rt
