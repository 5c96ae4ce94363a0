#include "backends/cuda/runtime/cuda_delegate.h"

#include <spdlog/spdlog.h>
#include <cstdint>

#include <map>

#include "backends/cuda/runtime/cuda_graph_cache.h"
#include "backends/cuda/runtime/cuda_ops.h"
#include "backends/cuda/runtime/cuda_status.h"
#include "format/pte_reader.h"
#include "graph/graph.h"
#include "runtime/device_allocator.h"
#include "runtime/method.h"

namespace etc::cuda {
namespace {

class CudaDelegateHandle final : public rt::DelegateHandle {
 public:
  Status execute(std::span<rt::Value*> args) override {
    ETC_RETURN_IF_ERROR_CTX(rt::bind_delegate_args(*method_, args),
                            "binding the CUDA delegate's arguments");
    ETC_RETURN_IF_ERROR(device_->activate());
    bool replayed = false;
    ETC_RETURN_IF_ERROR(graphs ? execute_graph(args, &replayed) : method_->execute());
    // A replay queues the kernels captured for these sizes: execute_graph gave the outputs
    // the sizes computed at capture.
    if (!replayed) return rt::publish_delegate_outputs(*method_, args);
    return Status();
  }

  DelegateProgram program;                  // the plan the method points into
  std::vector<rt::DeviceBuffer> constants;  // uploaded once, at init
  DeviceContext* device_ = nullptr;
  std::unique_ptr<rt::Method> method_;
  bool graphs = false;

 private:
  // Replays the graph captured for where, and of what sizes, the tensors are; otherwise
  // runs plainly once for them (that run may grow scratch memory or create cuBLAS state,
  // which a capture must not do), and captures on the next such call. Graphs for several
  // sets of pointers stay cached (cuda_graph_cache.h).
  Status execute_graph(std::span<rt::Value*> args, bool* replayed) {
    // The call's tensors and the device's scratch buffer (another delegate may have grown,
    // and so moved, it since the capture).
    // Inputs by pointer and sizes; outputs by pointer and rank (their sizes follow from the
    // inputs', and before the call they hold the previous call's).
    GraphCache::Key where;
    const size_t n_in = method_->num_inputs();
    for (size_t i = 0; i < args.size(); ++i) {
      const rt::TensorView& t = args[i]->tensor;
      where.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data)));
      where.push_back(static_cast<int64_t>(t.sizes.size()));
      if (i < n_in) where.insert(where.end(), t.sizes.begin(), t.sizes.end());
    }
    where.push_back(static_cast<int64_t>(device_->scratch_generation()));
    GraphCounts& counts = device_->graph_counts();
    switch (cache_.decide(where)) {
      case GraphCache::Action::kReplay: {
        const GraphCache::Entry* e = cache_.replay(where);
        ETC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(e->exec, device_->stream()));
        ++counts.replays;
        const size_t n_out = method_->num_outputs();
        for (size_t k = 0; k < n_out && k < e->out_sizes.size(); ++k)
          args[n_in + k]->tensor.sizes = e->out_sizes[k];
        *replayed = true;
        return Status();
      }
      case GraphCache::Action::kPlain:
        // Remembered only after a run that completed (it grew scratch memory and made cuBLAS
        // state for these sizes; a failed one may not have).
        ETC_RETURN_IF_ERROR(method_->execute());
        cache_.ran_plainly(where);
        ++counts.plain;
        return Status();
      case GraphCache::Action::kCapture:
        break;
    }
    cudaStream_t stream = device_->stream();
    ETC_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    Status run = method_->execute();
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaErrorUnknown;
    if (run.ok() && end == cudaSuccess) inst = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) teardown_ok(cudaGraphDestroy(graph), "cudaGraphDestroy");
    if (!run.ok() || end != cudaSuccess || inst != cudaSuccess) {
      spdlog::warn("CUDA graph capture of the delegate failed ({}); running it without graphs",
                   !run.ok()            ? run.to_string()
                   : end != cudaSuccess ? cudaGetErrorName(end)
                                        : cudaGetErrorName(inst));
      (void)cudaGetLastError();
      cache_.clear();
      graphs = false;
      ++counts.failed;
      ++counts.plain;
      return method_->execute();
    }
    GraphCache::Sizes out_sizes;
    for (size_t k = 0; k < method_->num_outputs(); ++k)
      out_sizes.push_back(method_->output(k).sizes);
    cache_.add(std::move(where), exec, std::move(out_sizes));
    ++counts.captures;
    // The capture queued nothing: the first launch computes this call's outputs.
    ETC_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec, stream));
    return Status();
  }

  GraphCache cache_{
      [](cudaGraphExec_t e) { teardown_ok(cudaGraphExecDestroy(e), "cudaGraphExecDestroy"); }};
};

bool needs_cublas(const pte::Plan& plan) {
  for (const pte::Operator& o : plan.operators) {
    if (o.name == "aten::mm" || o.name == "aten::bmm" || o.name == "aten::addmm" ||
        o.name == "aten::linear" || o.name == "aten::convolution" ||
        o.name == "etc::weight_only_linear")
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
