#include "runtime/kernel.h"

namespace etc::rt {

Status KernelContext::error(const std::string& message) const {
  return invalid_input(std::string(op) + ": " + message);
}

double kernel_flops(std::string_view op, std::span<Value* const> args) {
  auto tensor = [&](size_t i) -> const TensorView* {
    return i < args.size() && args[i] != nullptr && args[i]->is_tensor() ? &args[i]->tensor
                                                                         : nullptr;
  };
  auto starts = [&](std::string_view prefix) { return op.substr(0, prefix.size()) == prefix; };
  // 2 * (output elements) * (multiply-adds per output element).
  if (starts("aten::convolution.")) {
    const TensorView *x = tensor(0), *w = tensor(1), *out = tensor(9);
    if (x == nullptr || w == nullptr || out == nullptr || w->rank() < 1 || w->sizes[0] == 0)
      return 0;
    const bool transposed = args.size() > 6 && args[6]->kind == Value::Kind::kBool && args[6]->b;
    const double per = static_cast<double>(w->numel()) / static_cast<double>(w->sizes[0]);
    return 2.0 * per * static_cast<double>(transposed ? x->numel() : out->numel());
  }
  const TensorView* a = nullptr;
  const TensorView* out = nullptr;
  if (starts("aten::addmm.")) {
    a = tensor(1);
    out = tensor(5);
  } else if (starts("aten::mm.") || starts("aten::bmm.")) {
    a = tensor(0);
    out = tensor(2);
  } else if (starts("aten::linear.")) {
    a = tensor(0);
    out = tensor(3);
  }
  if (a == nullptr || out == nullptr || a->rank() < 1) return 0;
  return 2.0 * static_cast<double>(out->numel()) * static_cast<double>(a->sizes.back());
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
