#include "executorch/etc_executorch.h"

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "executorch/et_tensors.h"
#include "format/backend_ids.h"
#include "format/pte_reader.h"
#include "runtime/backend.h"
#include "runtime/device_allocator.h"
#include "runtime/runtime_env.h"
#include "support/file_io.h"

#ifdef ETC_WITH_CUDA
#include "backends/cuda/runtime/cuda_runtime_env.h"
#endif

namespace etc::executorch_plugin {
namespace {

namespace et = ::executorch::runtime;
using et::Error;
using et_interop::resize_to_view;
using et_interop::TensorBounds;
using et_interop::view_of;

// etc's registries behind the plugin: its allocators and delegate backends. Static lifetime,
// as ExecuTorch's registries hold raw pointers for the life of the process.
struct PluginState {
  std::unique_ptr<rt::OwnedRuntime> runtime;
  const char* mode = nullptr;
};

PluginState& plugin_state() {
  static PluginState* state = new PluginState();  // never destroyed: registered for good
  return *state;
}

// etc's error, logged where an ExecuTorch user looks (ExecuTorch's log), as the code
// ExecuTorch's callers act on.
Error to_error(const Status& s, const char* what) {
  ET_LOG(Error, "etc: %s: %s", what, s.to_string().c_str());
  switch (s.code()) {
    case ErrorCode::kInvalidInput:
      return Error::InvalidProgram;
    case ErrorCode::kUnsupported:
      return Error::NotSupported;
    case ErrorCode::kNotFound:
      return Error::NotFound;
    case ErrorCode::kDeviceUnavailable:
      return Error::MemoryAllocationFailed;
    case ErrorCode::kUsage:
      return Error::InvalidArgument;
    default:
      return Error::Internal;
  }
}

// ExecuTorch's DeviceAllocator over etc's allocator for CUDA memory.
class CudaDeviceAllocator final : public et::DeviceAllocator {
 public:
  explicit CudaDeviceAllocator(rt::DeviceAllocator* etc_allocator) : a_(etc_allocator) {}

  et::Result<void*> allocate(size_t nbytes, et::etensor::DeviceIndex index,
                             size_t alignment) override {
    Result<void*> p = a_->allocate(nbytes, std::max<size_t>(alignment, 64), device_index(index));
    if (!p.ok()) return to_error(p.status(), "allocating CUDA memory");
    // Zeroed: ExecuTorch keeps no initial value for state that starts as zeros (a KV cache)
    // and never clears planned memory, and cudaMalloc does not zero.
    if (Status s = a_->zero(*p, nbytes, device_index(index)); !s.ok()) {
      a_->deallocate(*p, device_index(index));
      return to_error(s, "zeroing CUDA memory");
    }
    return *p;
  }
  void deallocate(void* ptr, et::etensor::DeviceIndex index) override {
    if (ptr != nullptr) a_->deallocate(ptr, device_index(index));
  }
  Error copy_host_to_device(void* dst, const void* src, size_t nbytes,
                            et::etensor::DeviceIndex index) override {
    if (dst == nullptr || src == nullptr) return Error::InvalidArgument;
    Status s = a_->copy_host_to_device(dst, src, nbytes, device_index(index));
    return s.ok() ? Error::Ok : to_error(s, "copying to CUDA memory");
  }
  Error copy_device_to_host(void* dst, const void* src, size_t nbytes,
                            et::etensor::DeviceIndex index) override {
    if (dst == nullptr || src == nullptr) return Error::InvalidArgument;
    Status s = a_->copy_device_to_host(dst, src, nbytes, device_index(index));
    return s.ok() ? Error::Ok : to_error(s, "copying from CUDA memory");
  }
  et::etensor::DeviceType device_type() const override { return et::etensor::DeviceType::CUDA; }

 private:
  // ExecuTorch's -1 means the current device; etc's programs name theirs, 0 by default.
  static int8_t device_index(et::etensor::DeviceIndex index) {
    return index < 0 ? int8_t{0} : static_cast<int8_t>(index);
  }
  rt::DeviceAllocator* a_;
};

// Bytes of one named-data entry, kept alive with the delegate that reads them.
class FreeableBlob final : public Blob {
 public:
  explicit FreeableBlob(et::FreeableBuffer buffer) : buffer_(std::move(buffer)) {}
  std::span<const uint8_t> bytes() const override {
    return {static_cast<const uint8_t*>(buffer_.data()), buffer_.size()};
  }

 private:
  et::FreeableBuffer buffer_;
};

// One delegate: the named data its constants come from (as etc's program file would hold
// them) and etc's handle.
struct Handle {
  std::unique_ptr<pte::File> file;
  std::unique_ptr<rt::DelegateHandle> delegate;
  TensorBounds bounds;  // of its dynamic-bound arguments
};

class EtcCudaBackend final : public et::BackendInterface {
 public:
  bool is_available() const override { return plugin_state().runtime != nullptr; }

  et::Result<et::DelegateHandle*> init(et::BackendInitContext& context,
                                       et::FreeableBuffer* processed,
                                       et::ArrayRef<et::CompileSpec> compile_specs) const override {
    PluginState& state = plugin_state();
    if (state.runtime == nullptr) return Error::InvalidState;
    std::span<const uint8_t> blob(static_cast<const uint8_t*>(processed->data()),
                                  processed->size());
    Result<DelegateProgram> program = read_delegate_program(blob, "EtcCudaBackend blob");
    if (!program.ok()) return to_error(program.status(), "reading the delegate");
    // The delegate's constants, from the program's named data as ExecuTorch loaded it.
    auto file = std::make_unique<pte::File>();
    const et::NamedDataMap* named = context.get_named_data_map();
    for (const auto& [value, key] : program->constants) {
      if (named == nullptr) {
        return to_error(invalid_input("the delegate's constant '" + key +
                                      "' needs the program's named data, which the runtime "
                                      "did not provide"),
                        "loading the delegate");
      }
      et::Result<et::FreeableBuffer> data = named->get_data(key.c_str());
      if (!data.ok()) {
        ET_LOG(Error, "etc: the delegate's constant '%s' is missing from the named data",
               key.c_str());
        return data.error();
      }
      const size_t size = data->size();
      file->segment_data.push_back(
          ConstantData{std::make_shared<FreeableBlob>(std::move(*data)), 0, size});
      file->program.named_data.push_back(
          {key, static_cast<uint32_t>(file->segment_data.size() - 1)});
    }
    std::vector<pte::CompileSpec> specs;
    for (const et::CompileSpec& s : compile_specs) {
      specs.push_back(
          {s.key, std::string(static_cast<const char*>(s.value.buffer), s.value.nbytes)});
    }
    rt::Backend* backend = state.runtime->backends.find(kCudaBackendId);
    if (backend == nullptr) return Error::NotFound;
    Result<std::unique_ptr<rt::DelegateHandle>> delegate =
        backend->init(blob, specs, *file, state.runtime->env());
    if (!delegate.ok()) return to_error(delegate.status(), "loading the delegate");
    // etc's handle keeps what it needs of the blob (read_delegate_program copies the plan).
    auto* handle = new Handle{std::move(file), std::move(delegate).value()};
    return reinterpret_cast<et::DelegateHandle*>(handle);
  }

  Error execute(et::BackendExecutionContext&, et::DelegateHandle* opaque,
                et::Span<et::EValue*> args) const override {
    auto* handle = reinterpret_cast<Handle*>(opaque);
    std::vector<rt::Value> values(args.size());
    std::vector<rt::Value*> pointers;
    for (size_t i = 0; i < args.size(); ++i) {
      const et::EValue& e = *args[i];
      rt::Value& v = values[i];
      if (e.isTensor()) {
        v.kind = rt::Value::Kind::kTensor;
        if (std::string why = view_of(e.toTensor(), handle->bounds, false, v.tensor);
            !why.empty()) {
          return to_error(invalid_input(why), ("delegate argument " + std::to_string(i)).c_str());
        }
      } else if (e.isInt()) {
        v.kind = rt::Value::Kind::kInt;
        v.i = e.toInt();
      } else if (e.isDouble()) {
        v.kind = rt::Value::Kind::kDouble;
        v.d = e.toDouble();
      } else if (e.isBool()) {
        v.kind = rt::Value::Kind::kBool;
        v.b = e.toBool();
      } else if (!e.isNone()) {
        ET_LOG(Error, "etc: delegate argument %zu is of a kind etc's delegate does not take", i);
        return Error::NotSupported;
      }
      pointers.push_back(&v);
    }
    Status s = handle->delegate->execute(pointers);
    if (!s.ok()) return to_error(s, "running the delegate");
    // Outputs whose sizes the delegate set (dynamic-bound tensors) take them.
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i]->isTensor()) continue;
      if (Error e = resize_to_view(args[i]->toTensor(), values[i].tensor); e != Error::Ok) {
        ET_LOG(Error, "etc: delegate output %zu cannot take the sizes the delegate computed", i);
        return e;
      }
    }
    return Error::Ok;
  }

  void destroy(et::DelegateHandle* opaque) const override {
    delete reinterpret_cast<Handle*>(opaque);
  }
};

// The runtime behind the plugin: etc's CUDA runtime when a GPU is usable (or demanded),
// otherwise the CPU runtime, whose CUDA memory is host memory and whose delegate backend is
// the CPU reference.
Result<std::unique_ptr<rt::OwnedRuntime>> make_runtime(const char** mode) {
  const char* env = std::getenv("ETC_EXECUTORCH_DEVICE");
  const std::string want = env != nullptr ? env : "auto";
  if (want != "auto" && want != "host" && want != "cuda") {
    return Status(ErrorCode::kUsage,
                  "ETC_EXECUTORCH_DEVICE must be auto, host or cuda, got '" + want + "'");
  }
#ifdef ETC_WITH_CUDA
  if (want != "host") {
    Result<std::unique_ptr<rt::OwnedRuntime>> cuda = cuda::make_cuda_runtime();
    if (cuda.ok()) {
      *mode = "cuda";
      return cuda;
    }
    if (want == "cuda") return std::move(cuda).take_status();
    ET_LOG(Info, "etc: no usable GPU (%s); CUDA buffers in host memory, the delegate on the CPU",
           cuda.status().message().c_str());
  }
#else
  if (want == "cuda") {
    return Status(ErrorCode::kDeviceUnavailable,
                  "ETC_EXECUTORCH_DEVICE=cuda, but this etc was built without CUDA support");
  }
#endif
  *mode = "host";
  return rt::make_cpu_runtime();
}

Error register_once() {
  PluginState& state = plugin_state();
  const char* mode = nullptr;
  Result<std::unique_ptr<rt::OwnedRuntime>> runtime = make_runtime(&mode);
  if (!runtime.ok()) return to_error(runtime.status(), "registering with ExecuTorch");
  Result<rt::DeviceAllocator*> allocator =
      (*runtime)->allocators.for_device(Device{DeviceType::kCUDA, 0});
  if (!allocator.ok()) return to_error(allocator.status(), "registering with ExecuTorch");
  if (et::get_device_allocator(et::etensor::DeviceType::CUDA) != nullptr) {
    // ExecuTorch aborts on a second allocator for a device type; say so instead.
    ET_LOG(Error, "etc: another CUDA DeviceAllocator is already registered with ExecuTorch");
    return Error::InvalidState;
  }
  state.runtime = std::move(runtime).value();
  static CudaDeviceAllocator* device_allocator = new CudaDeviceAllocator(*allocator);
  et::register_device_allocator(device_allocator);
  static EtcCudaBackend* backend = new EtcCudaBackend();
  Error e = et::register_backend({kCudaBackendId, backend});
  if (e != Error::Ok) {
    ET_LOG(Error, "etc: registering the backend %s failed", kCudaBackendId);
    return e;
  }
  state.mode = mode;
  return Error::Ok;
}

}  // namespace

Error register_with_executorch() {
  static std::once_flag once;
  static Error result = Error::Ok;
  std::call_once(once, [] { result = register_once(); });
  return result;
}

const char* registered_mode() {
  return plugin_state().mode;
}

}  // namespace etc::executorch_plugin
