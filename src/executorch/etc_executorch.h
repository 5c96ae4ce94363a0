// etc inside ExecuTorch's runtime: etc's pieces registered with the runtime of the ExecuTorch
// wheel (libexecutorch.so), so that an ExecuTorch application loads etc's `--target cuda:N`
// programs with its own Program::load and Method::execute.
//
//   #include "executorch/etc_executorch.h"
//   if (etc::executorch_plugin::register_with_executorch() != executorch::runtime::Error::Ok)
//     ...;  // the reason is logged through ExecuTorch's log
//
// What it registers (once; later calls return the first call's result):
//   - a DeviceAllocator for DeviceType::CUDA, through register_device_allocator: etc's CUDA
//     allocator on a machine with a usable GPU, otherwise host memory standing in for device
//     memory (as ExecuTorch's own device tests use a mock), so the whole path runs anywhere;
//   - the backend "EtcCudaBackend", through register_backend: etc's CUDA delegate on a GPU,
//     otherwise etc's CPU reference implementation of the same delegate.
// The host ops of etc's programs (the et_copy copies, ATen out variants) run on the kernel
// library the application links: ExecuTorch's portable or optimized kernels, or etc's CPU
// kernels through register_kernels_with_executorch below.
//
// ETC_EXECUTORCH_DEVICE=host forces the host stand-in; =cuda refuses to register without a GPU.
#pragma once

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/error.h>

#include <cstddef>
#include <memory>

namespace etc::executorch_plugin {

::executorch::runtime::Error register_with_executorch();

// etc's CPU kernels as an ExecuTorch kernel library: every kernel an ExecuTorch program may
// call by name (the ATen out variants, in-place forms) registered through register_kernels
// under that name, for all dtypes, skipping the names some kernel already registered
// (ExecuTorch stops the process on a second registration of a name). An application that
// wants etc's kernels throughout links no other kernel library (not the wheel's
// kernels_optimized) and calls this after runtime_init, before loading a method; one that
// links another gets etc's kernels for the operators the other lacks. Arguments are used in
// place (no copies); tensors must be contiguous host tensors, else the call fails with
// NotSupported and the reason in ExecuTorch's log. Once per process; later calls return the
// first call's result. `registered`, if set, receives how many kernels were registered.
::executorch::runtime::Error register_kernels_with_executorch(size_t* registered = nullptr);

// libetc_executorch_autoregister.so calls register_kernels_with_executorch and
// register_with_executorch when it loads (link it with -Wl,--no-as-needed, as ExecuTorch's
// own registration-only libraries); this is what they returned. Link it with no other kernel
// library: one whose registrations run after it (a static library's, or a shared library
// loaded later) would register names etc took, and ExecuTorch stops the process on that.
// With another kernel library, call register_kernels_with_executorch after it has loaded.
::executorch::runtime::Error registered_at_load();

// A DataLoader that loads through `inner` (which must outlive it) and tells etc's kernels
// where the program's constants are: the constant segments ExecuTorch loads through it, for
// as long as ExecuTorch holds them. Given to Program::load, it lets a kernel whose weight is a
// constant pack it once per instruction (a convolution on oneDNN, a matrix product's packed
// right operand) instead of at every call; without it every weight is packed at every call.
// Releasing a constant segment drops every packed weight (its memory may be reused).
std::unique_ptr<::executorch::runtime::DataLoader> constant_tracking_loader(
    ::executorch::runtime::DataLoader& inner);

// After registration: "cuda" (a GPU: etc's CUDA allocator and delegate) or "host" (host memory
// for CUDA buffers, the CPU reference delegate); nullptr before or after a failed registration.
const char* registered_mode();

}  // namespace etc::executorch_plugin
