#include "cuda_runtime/cuda_delegate.h"

#include <spdlog/spdlog.h>
#include <cstdint>

#include <map>

#include "cuda_runtime/cuda_ops.h"
#include "cuda_runtime/cuda_status.h"
#include "graph/graph.h"
#include "runtime/device_allocator.h"
#include "runtime/method.h"
#include "serialize/pte_reader.h"

namespace etc::cuda {
namespace {

class CudaDelegateHandle final : public rt::DelegateHandle {
 public:
  Status execute(std::span<rt::Value*> args) override {
    size_t n_in = method_->num_inputs(), n_out = method_->num_outputs();
    if (args.size() != n_in + n_out) {
      return invalid_input("delegate takes " + std::to_string(n_in) + " inputs and " +
                           std::to_string(n_out) + " outputs, the call passes " +
                           std::to_string(args.size()) + " values");
    }
    for (size_t i = 0; i < n_in + n_out; ++i) {
      const rt::Value& v = *args[i];
      const bool input = i < n_in;
      const rt::TensorView& want = input ? method_->input(i) : method_->output(i - n_in);
      if (!v.is_tensor() || v.tensor.dtype != want.dtype || v.tensor.sizes != want.sizes) {
        return invalid_input(
            "delegate " + std::string(input ? "input " : "output ") +
            std::to_string(input ? i : i - n_in) + " should be " + want.describe() + ", got " +
            (v.is_tensor() ? v.tensor.describe() : std::string(rt::value_kind_name(v.kind))));
      }
      // bind_* reject host memory for device tensors (the allocator's owns()).
      Status s = input ? method_->bind_input(i, v.tensor.data)
                       : method_->bind_output(i - n_in, v.tensor.data);
      if (!s.ok()) return std::move(s).add_context("binding the CUDA delegate's arguments");
    }
    ETC_RETURN_IF_ERROR(device_->activate());
    if (!graphs) return method_->execute();
    return execute_graph(args);
  }

  ~CudaDelegateHandle() override { drop_graph(); }

  DelegateProgram program;                  // the plan the method points into
  std::vector<rt::DeviceBuffer> constants;  // uploaded once, at init
  DeviceContext* device_ = nullptr;
  std::unique_ptr<rt::Method> method_;
  bool graphs = false;

 private:
  // Replays the captured graph when the tensors are where they were at capture; otherwise
  // runs plainly once (the first run sizes scratch memory and creates cuBLAS state, which a
  // capture must not do), then captures and launches.
  Status execute_graph(std::span<rt::Value*> args) {
    // The call's tensors and the device's scratch buffer (another delegate may have grown,
    // and so moved, it since the capture).
    std::vector<void*> where;
    for (const rt::Value* v : args)
      where.push_back(v->tensor.data);
    where.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(device_->scratch_generation())));
    if (exec_ != nullptr && where == captured_at_) {
      ETC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, device_->stream()));
      return Status();
    }
    if (!warmed_up_) {
      warmed_up_ = true;
      return method_->execute();
    }
    drop_graph();
    cudaStream_t stream = device_->stream();
    ETC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status run = method_->execute();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    cudaError_t inst = cudaErrorUnknown;
    if (run.ok() && end == cudaSuccess) inst = cudaGraphInstantiate(&exec_, graph, 0);
    if (graph != nullptr) teardown_ok(cudaGraphDestroy(graph), "cudaGraphDestroy");
    if (!run.ok() || end != cudaSuccess || inst != cudaSuccess) {
      spdlog::warn("CUDA graph capture of the delegate failed ({}); running it without graphs",
                   !run.ok()            ? run.to_string()
                   : end != cudaSuccess ? cudaGetErrorName(end)
                                        : cudaGetErrorName(inst));
      (void)cudaGetLastError();
      exec_ = nullptr;
      graphs = false;
      return method_->execute();
    }
    captured_at_ = std::move(where);
    ETC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream));
    return Status();
  }

  void drop_graph() {
    if (exec_ != nullptr) teardown_ok(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
    exec_ = nullptr;
    captured_at_.clear();
  }

  bool warmed_up_ = false;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<void*> captured_at_;  // the call's tensor pointers when exec_ was captured
};

bool needs_cublas(const pte::Plan& plan) {
  for (const pte::Operator& o : plan.operators) {
    if (o.name == "aten::mm" || o.name == "aten::bmm" || o.name == "aten::addmm" ||
        o.name == "aten::linear" || o.name == "aten::convolution")
      return true;
  }
  return false;
}

class CudaDelegateBackend final : public rt::Backend {
 public:
  CudaDelegateBackend(DeviceContexts* contexts, bool graphs)
      : contexts_(contexts), graphs_(graphs) {
    registered_ = register_cuda_kernels(kernels_);
  }

  Result<std::unique_ptr<rt::DelegateHandle>> init(
      std::span<const uint8_t> processed, const std::vector<pte::CompileSpec>& compile_specs,
      const pte::File& file, const rt::RuntimeEnv& env) override {
    ETC_RETURN_IF_ERROR(registered_);
    Device device{DeviceType::kCUDA, 0};
    for (const pte::CompileSpec& spec : compile_specs) {
      if (spec.key != kTargetDeviceSpec) continue;
      Result<Device> d = parse_device(spec.value);
      if (!d.ok() || d->type != DeviceType::kCUDA)
        return invalid_input("the CUDA delegate's target_device '" + spec.value +
                             "' is not a CUDA device");
      device = *d;
    }
    ETC_ASSIGN_OR_RETURN(DeviceContext * ctx, contexts_->get(device.index));
    ETC_RETURN_IF_ERROR(ctx->activate());
    ETC_ASSIGN_OR_RETURN(rt::DeviceAllocator * allocator, env.allocators->for_device(device));

    auto handle = std::make_unique<CudaDelegateHandle>();
    handle->device_ = ctx;
    handle->graphs = graphs_;
    ETC_ASSIGN_OR_RETURN(handle->program, read_delegate_program(processed, "EtcCudaBackend blob"));
    if (needs_cublas(handle->program.plan)) {
      ETC_RETURN_IF_ERROR(ctx->cublas().take_status());  // fail at load, not mid-run
    }
    std::map<size_t, std::string> keys;
    for (const auto& [value, key] : handle->program.constants)
      keys[static_cast<size_t>(value)] = key;
    std::map<std::string, const void*> uploaded;  // key -> device copy
    CudaDelegateHandle* h = handle.get();
    rt::ConstantResolver constants =
        [&](size_t index, const pte::Tensor&) -> Result<std::optional<std::span<const uint8_t>>> {
      auto it = keys.find(index);
      if (it == keys.end()) return std::optional<std::span<const uint8_t>>();
      std::optional<std::span<const uint8_t>> bytes = file.named_bytes(it->second);
      if (!bytes)
        return invalid_input("delegate constant '" + it->second +
                             "' is missing from the program's named data");
      auto done = uploaded.find(it->second);
      if (done == uploaded.end()) {
        ETC_ASSIGN_OR_RETURN(rt::DeviceBuffer b, rt::DeviceBuffer::allocate(*env.allocators, device,
                                                                            bytes->size(), 256));
        ETC_RETURN_IF_ERROR(
            allocator->copy_host_to_device(b.data(), bytes->data(), bytes->size(), device.index));
        done = uploaded.emplace(it->second, b.data()).first;
        h->constants.push_back(std::move(b));
      }
      return std::optional<std::span<const uint8_t>>(
          std::span<const uint8_t>(static_cast<const uint8_t*>(done->second), bytes->size()));
    };
    rt::RuntimeEnv delegate_env{&kernels_, env.allocators, nullptr, ctx};
    ETC_ASSIGN_OR_RETURN(handle->method_, rt::Method::load_plan(handle->program.plan, constants,
                                                                delegate_env, nullptr));
    return std::unique_ptr<rt::DelegateHandle>(std::move(handle));
  }

 private:
  DeviceContexts* contexts_;
  bool graphs_;
  rt::OperatorRegistry kernels_;
  Status registered_;
};

}  // namespace

std::unique_ptr<rt::Backend> make_cuda_delegate_backend(DeviceContexts* contexts, bool graphs) {
  return std::make_unique<CudaDelegateBackend>(contexts, graphs);
}

}  // namespace etc::cuda
