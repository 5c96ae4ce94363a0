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

OpSchema functional_call_schema(const OpSchema& functional) {
  OpSchema s = functional;
  const int n = functional.num_outputs;
  for (int i = 0; i < n; ++i) {
    ArgSchema out;
    out.name = n == 1 ? "out" : "out" + std::to_string(i);
    out.type = ArgType::kTensor;
    out.kwarg_only = true;
    out.is_out = true;
    s.args.push_back(std::move(out));
  }
  return s;
}

namespace {

bool same_inputs(const OpSchema& out_variant, const OpSchema& functional) {
  size_t i = 0;
  for (const ArgSchema& a : out_variant.args) {
    if (a.is_out) continue;
    if (i >= functional.args.size() || functional.args[i].name != a.name ||
        functional.args[i].type != a.type)
      return false;
    ++i;
  }
  return i == functional.args.size();
}

}  // namespace

Status OperatorRegistry::insert(RegisteredKernel k) {
  if (k.fn == nullptr)
    return internal_error("kernel '" + k.name + "' registered without a function");
  std::string name = k.name;
  if (!kernels_.emplace(name, std::move(k)).second)
    return internal_error("kernel '" + name + "' is registered twice");
  return Status();
}

Status OperatorRegistry::add(OpKind op, KernelFn fn, KernelForms forms) {
  const OpInfo& info = op_info(op);
  const bool out = (static_cast<int>(forms) & static_cast<int>(KernelForms::kOut)) != 0;
  const bool functional =
      (static_cast<int>(forms) & static_cast<int>(KernelForms::kFunctional)) != 0;
  if (info.schema.num_outputs < 0)
    return internal_error(info.name + " has no kernel form (a variable number of results)");
  if (forms == KernelForms::kOut && !info.out_schema)
    return internal_error(info.name + " has no out variant to register a kernel for");
  if (out && info.out_schema) {
    if (functional && !same_inputs(*info.out_schema, info.schema)) {
      return internal_error(info.out_kernel_name + " and " + info.kernel_name +
                            " take different arguments: register a kernel for each");
    }
    ETC_RETURN_IF_ERROR(
        insert(RegisteredKernel{info.out_kernel_name, fn, info.out_schema, op, true}));
  }
  if (functional) {
    ETC_RETURN_IF_ERROR(insert(
        RegisteredKernel{info.kernel_name, fn, functional_call_schema(info.schema), op, false}));
  }
  return Status();
}

Status OperatorRegistry::add(const std::string& name, std::string_view schema, KernelFn fn) {
  ETC_ASSIGN_OR_RETURN(OpSchema s, parse_op_schema(schema));
  return insert(RegisteredKernel{name, fn, std::move(s), std::nullopt, false});
}

Status OperatorRegistry::add(const std::string& name, KernelFn fn) {
  return insert(RegisteredKernel{name, fn, std::nullopt, std::nullopt, false});
}

const RegisteredKernel* OperatorRegistry::find(std::string_view name) const {
  auto it = kernels_.find(name);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::vector<std::string> OperatorRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, k] : kernels_)
    out.push_back(name);
  return out;
}

}  // namespace etc::rt
