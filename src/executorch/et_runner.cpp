// etc_et_runner: runs a .pte with ExecuTorch's runtime (the wheel's libexecutorch.so:
// Program::load with full verification, Method::execute) and etc's plugin registered, as an
// ExecuTorch application would. Planned buffers are allocated per device as ExecuTorch's
// Module does: host vectors for CPU buffers, the registered DeviceAllocator for the others.
//
//   etc_et_runner [--iterations N] PROGRAM.pte OUT_DIR [INPUT.npy ...] [-- INPUT.npy ...]...
//   etc_et_runner PROGRAM.pte OUT_DIR --generate PROMPT.npy STEPS
//
// etc_et_runner_etc_kernels is the same runner linked without the wheel's kernel libraries:
// it registers etc's CPU kernels (register_kernels_with_executorch) for the program's host ops.
// Inputs separated by "--" are successive calls of the same method (inputs of other sizes, for
// a program with dynamic shapes); the outputs of call k go to OUT_DIR/call_<k>/. With
// --iterations N, the method runs N more times after the last call (inputs set again before
// each: ExecuTorch may plan other tensors over them) and the median and fastest
// Method::execute times are printed to stderr.
//
// The second form drives a decoder whose state (its KV cache) lives in the method from call
// to call: the prompt one token per call (token ids [1, 1], their position [1]), then greedy
// tokens until the prompt and STEPS tokens are covered; OUT_DIR/ids.npy gets the generated
// ids (int64), as `etc run --prompt --steps` generates them.
//
// Inputs are .npy files in the method's input order; an input the program keeps on the
// device and does not plan (`etc export --io-device device`) is uploaded through the
// registered allocator and handed over as a CUDA tensor. Outputs are written as
// OUT_DIR/output_<i>.npy (device outputs read back through the allocator). Exit codes as
// etc's: 0 ok, 1 a program or input ExecuTorch or etc refuses, 2 usage, 4 no device memory.
#include <executorch/extension/data_loader/file_data_loader.h>
#include <executorch/extension/memory_allocator/malloc_memory_allocator.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/device_memory_buffer.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "executorch/etc_executorch.h"
#include "format/pte_reader.h"
#include "graph/dtype.h"
#include "runtime/npy.h"

namespace {

namespace et = ::executorch::runtime;
using et::Error;
using ::executorch::aten::SizesType;
using ::executorch::aten::TensorImpl;

int fail(const std::string& what, Error e) {
  std::fprintf(stderr, "etc_et_runner: error: %s (ExecuTorch error 0x%x)\n", what.c_str(),
               static_cast<unsigned>(e));
  if (e == Error::MemoryAllocationFailed) return 4;
  return 1;
}

// An input the runner owns: its sizes, its bytes (host) or device memory, and the TensorImpl
// ExecuTorch reads.
struct OwnedInput {
  std::vector<SizesType> sizes;
  std::string host;
  et::DeviceMemoryBuffer device;
  std::unique_ptr<TensorImpl> impl;
};

// Sets input i to a host tensor of int64 `values` with `sizes` (planned host inputs copy it).
Error set_int64_input(et::Method& method, size_t i, std::vector<int64_t>& values,
                      std::vector<SizesType>& sizes, std::unique_ptr<TensorImpl>& impl) {
  impl =
      std::make_unique<TensorImpl>(::executorch::aten::ScalarType::Long,
                                   static_cast<ssize_t>(sizes.size()), sizes.data(), values.data());
  return method.set_input(et::EValue(::executorch::aten::Tensor(impl.get())), i);
}

// Greedy generation (see the top of the file); the logits are output 0, float32, the
// vocabulary its last dim.
int generate(et::Method& method, const std::string& prompt_path, int steps,
             const std::string& out_dir) {
  etc::Result<etc::rt::NpyArray> prompt_npy = etc::rt::read_npy(prompt_path);
  if (!prompt_npy.ok() || prompt_npy->dtype != etc::DType::kInt64 || prompt_npy->data.empty()) {
    std::fprintf(stderr, "etc_et_runner: error: %s: the prompt must be a non-empty int64 .npy\n",
                 prompt_path.c_str());
    return 1;
  }
  if (method.inputs_size() != 2) {
    std::fprintf(stderr,
                 "etc_et_runner: error: --generate needs a program taking (token ids, "
                 "positions); this one takes %zu inputs\n",
                 method.inputs_size());
    return 1;
  }
  std::vector<int64_t> prompt(prompt_npy->data.size() / 8);
  std::memcpy(prompt.data(), prompt_npy->data.data(), prompt.size() * 8);
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  std::vector<int64_t> ids;
  std::vector<int64_t> token{prompt[0]}, position{0};
  std::vector<SizesType> token_sizes{1, 1}, position_sizes{1};
  std::unique_ptr<TensorImpl> token_impl, position_impl;
  for (int64_t pos = 0; pos < prompt_len + steps - 1; ++pos) {
    position[0] = pos;
    if (Error e = set_int64_input(method, 0, token, token_sizes, token_impl); e != Error::Ok)
      return fail("set_input(0) at position " + std::to_string(pos), e);
    if (Error e = set_int64_input(method, 1, position, position_sizes, position_impl);
        e != Error::Ok)
      return fail("set_input(1) at position " + std::to_string(pos), e);
    if (Error e = method.execute(); e != Error::Ok)
      return fail("Method::execute failed at position " + std::to_string(pos), e);
    const et::EValue& out = method.get_output(0);
    if (!out.isTensor() || out.toTensor().scalar_type() != ::executorch::aten::ScalarType::Float ||
        out.toTensor().dim() == 0 || out.toTensor().device_type() != et::etensor::DeviceType::CPU) {
      std::fprintf(stderr, "etc_et_runner: error: output 0 is not float32 logits on the host\n");
      return 1;
    }
    const ::executorch::aten::Tensor logits = out.toTensor();
    const int64_t vocab = logits.size(logits.dim() - 1);
    const float* row = logits.const_data_ptr<float>() + (logits.numel() - vocab);
    int64_t best = 0;
    for (int64_t k = 1; k < vocab; ++k) {
      if (row[k] > row[best]) best = k;
    }
    if (pos + 1 < prompt_len) {
      token[0] = prompt[static_cast<size_t>(pos + 1)];
    } else {
      token[0] = best;
      ids.push_back(best);
    }
  }
  etc::rt::NpyArray npy{
      etc::DType::kInt64, {static_cast<int64_t>(ids.size())}, std::string(ids.size() * 8, '\0')};
  if (!ids.empty()) std::memcpy(npy.data.data(), ids.data(), ids.size() * 8);
  etc::Status s = etc::rt::write_npy(out_dir + "/ids.npy", npy);
  if (!s.ok()) {
    std::fprintf(stderr, "etc_et_runner: error: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("generated %zu tokens after a %lld-token prompt\n", ids.size(),
              static_cast<long long>(prompt_len));
  return 0;
}

int run(int argc, char** argv) {
  long iterations = 0;
  if (argc >= 3 && std::string(argv[1]) == "--iterations") {
    char* end = nullptr;
    iterations = std::strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || iterations < 0 || iterations > 100000) {
      std::fprintf(stderr, "etc_et_runner: error: --iterations takes 0..100000, not '%s'\n",
                   argv[2]);
      return 2;
    }
    argc -= 2;
    argv += 2;
  }
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: etc_et_runner [--iterations N] PROGRAM.pte OUT_DIR [INPUT.npy ...] [-- INPUT.npy "
        "...]...\n");
    return 2;
  }
  et::runtime_init();
#ifdef ETC_ET_RUNNER_ETC_KERNELS
  size_t kernels = 0;
  if (Error e = etc::executorch_plugin::register_kernels_with_executorch(&kernels); e != Error::Ok)
    return fail("registering etc's CPU kernels with ExecuTorch", e);
  std::fprintf(stderr, "etc_et_runner: etc's CPU kernels registered (%zu)\n", kernels);
#endif
  if (Error e = etc::executorch_plugin::register_with_executorch(); e != Error::Ok)
    return fail("registering etc with ExecuTorch", e);
  std::fprintf(stderr, "etc_et_runner: etc registered (%s)\n",
               etc::executorch_plugin::registered_mode());

  et::Result<::executorch::extension::FileDataLoader> loader =
      ::executorch::extension::FileDataLoader::from(argv[1]);
  if (!loader.ok()) return fail(std::string("cannot open ") + argv[1], loader.error());
  // Through etc's loader wrapper, which tells etc's kernels (when registered) where the
  // program's constants are.
  const std::unique_ptr<et::DataLoader> tracking =
      etc::executorch_plugin::constant_tracking_loader(loader.get());
  et::Result<et::Program> program =
      et::Program::load(tracking.get(), et::Program::Verification::InternalConsistency);
  if (!program.ok()) return fail(std::string("Program::load refused ") + argv[1], program.error());
  et::Result<const char*> name = program->get_method_name(0);
  if (!name.ok()) return fail("the program has no method", name.error());
  et::Result<et::MethodMeta> meta = program->method_meta(*name);
  if (!meta.ok()) return fail("no method meta", meta.error());

  // Planned buffers, each on its device.
  std::vector<std::vector<uint8_t>> host_buffers;
  std::vector<et::DeviceMemoryBuffer> device_buffers;
  std::vector<et::Span<uint8_t>> spans;
  std::vector<et::etensor::Device> devices;
  bool any_device = false;
  for (size_t i = 0; i < meta->num_memory_planned_buffers(); ++i) {
    const size_t size = static_cast<size_t>(meta->memory_planned_buffer_size(i).get());
    et::Result<et::etensor::Device> device = meta->memory_planned_buffer_device(i);
    if (!device.ok()) return fail("planned buffer " + std::to_string(i), device.error());
    devices.push_back(*device);
    if (device->is_cpu()) {
      host_buffers.emplace_back(size);
      spans.emplace_back(host_buffers.back().data(), size);
      continue;
    }
    any_device = true;
    et::Result<et::DeviceMemoryBuffer> buffer =
        et::DeviceMemoryBuffer::create(size, device->type(), device->index());
    if (!buffer.ok()) {
      return fail("allocating planned buffer " + std::to_string(i) + " (" + std::to_string(size) +
                      " bytes) on its device",
                  buffer.error());
    }
    device_buffers.push_back(std::move(*buffer));
    spans.push_back(device_buffers.back().as_span());
    std::fprintf(stderr,
                 "etc_et_runner: planned buffer %zu: %zu bytes on cuda:%d from the registered "
                 "allocator\n",
                 i + 1, size, static_cast<int>(device->index()));
  }
  et::HierarchicalAllocator planned =
      any_device ? et::HierarchicalAllocator({spans.data(), spans.size()},
                                             {devices.data(), devices.size()})
                 : et::HierarchicalAllocator({spans.data(), spans.size()});
  ::executorch::extension::MallocMemoryAllocator method_allocator;
  ::executorch::extension::MallocMemoryAllocator temp_allocator;
  et::MemoryManager memory(&method_allocator, &planned, &temp_allocator);
  et::Result<et::Method> method = program->load_method(*name, &memory);
  if (!method.ok()) return fail(std::string("load_method(") + *name + ") failed", method.error());

  if (argc >= 4 && std::string(argv[3]) == "--generate") {
    if (iterations > 0) {
      std::fprintf(stderr, "etc_et_runner: error: --iterations does not apply to --generate\n");
      return 2;
    }
    if (argc != 6) {
      std::fprintf(stderr,
                   "usage: etc_et_runner PROGRAM.pte OUT_DIR --generate PROMPT.npy STEPS\n");
      return 2;
    }
    char* end = nullptr;
    const long steps = std::strtol(argv[5], &end, 10);
    if (end == argv[5] || *end != '\0' || steps < 1 || steps > (1 << 20)) {
      std::fprintf(stderr, "etc_et_runner: error: STEPS must be a positive integer, got '%s'\n",
                   argv[5]);
      return 2;
    }
    return generate(*method, argv[4], static_cast<int>(steps), argv[2]);
  }
  // The calls: groups of inputs separated by "--", one Method::execute each.
  std::vector<std::vector<const char*>> calls(1);
  for (int a = 3; a < argc; ++a) {
    if (std::string(argv[a]) == "--") {
      calls.emplace_back();
    } else {
      calls.back().push_back(argv[a]);
    }
  }
  const size_t n_inputs = method->inputs_size();
  for (size_t c = 0; c < calls.size(); ++c) {
    if (calls[c].size() != n_inputs) {
      std::fprintf(stderr,
                   "etc_et_runner: error: the program takes %zu inputs, call %zu gives %zu\n",
                   n_inputs, c + 1, calls[c].size());
      return 1;
    }
  }
  // Where each input lives, as the program's TensorSpecs say (ExecuTorch's MethodMeta has no
  // device): read with etc's own reader of the format.
  etc::Result<etc::pte::File> file = etc::read_pte_file(argv[1]);
  if (!file.ok()) {
    std::fprintf(stderr, "etc_et_runner: error: %s\n", file.status().to_string().c_str());
    return 1;
  }
  const etc::pte::Plan& plan = file->program.plans[0];
  std::vector<OwnedInput> inputs(n_inputs);
  // Reads and sets one call's inputs; 0 or the exit code.
  auto set_inputs = [&](const std::vector<const char*>& paths) -> int {
    for (size_t i = 0; i < n_inputs; ++i) {
      etc::Result<etc::rt::NpyArray> npy = etc::rt::read_npy(paths[i]);
      if (!npy.ok()) {
        std::fprintf(stderr, "etc_et_runner: error: %s\n", npy.status().to_string().c_str());
        return 1;
      }
      const etc::pte::EValue& slot = plan.values[static_cast<size_t>(plan.inputs[i])];
      if (slot.kind != etc::pte::ValueKind::kTensor) {
        std::fprintf(stderr, "etc_et_runner: error: input %zu is not a tensor\n", i);
        return 1;
      }
      const etc::Device where = slot.tensor.device;
      OwnedInput& in = inputs[i];
      in.sizes.assign(npy->shape.begin(), npy->shape.end());
      in.host = std::move(npy->data);
      in.device = et::DeviceMemoryBuffer();
      void* data = in.host.data();
      const et::etensor::DeviceType device_type =
          where.is_cpu() ? et::etensor::DeviceType::CPU : et::etensor::DeviceType::CUDA;
      const et::etensor::DeviceIndex device_index = where.index;
      if (device_type != et::etensor::DeviceType::CPU) {
        // A device-resident input: uploaded through the registered allocator.
        et::Result<et::DeviceMemoryBuffer> buffer =
            et::DeviceMemoryBuffer::create(in.host.size(), device_type, device_index);
        if (!buffer.ok()) return fail("allocating input " + std::to_string(i), buffer.error());
        in.device = std::move(*buffer);
        et::DeviceAllocator* a = et::get_device_allocator(device_type);
        if (Error e = a->copy_host_to_device(in.device.data(), in.host.data(), in.host.size(),
                                             device_index);
            e != Error::Ok) {
          return fail("uploading input " + std::to_string(i), e);
        }
        data = in.device.data();
      }
      in.impl = std::make_unique<TensorImpl>(
          static_cast<::executorch::aten::ScalarType>(etc::dtype_to_scalar_type(npy->dtype)),
          static_cast<ssize_t>(in.sizes.size()), in.sizes.data(), data, nullptr, nullptr,
          ::executorch::aten::TensorShapeDynamism::STATIC, device_type, device_index);
      if (Error e = method->set_input(et::EValue(::executorch::aten::Tensor(in.impl.get())), i);
          e != Error::Ok) {
        return fail("set_input(" + std::to_string(i) + ")", e);
      }
    }
    return 0;
  };
  // Outputs the program does not plan (`--io-device device`): memory on the output's device,
  // handed to the method with set_output_data_ptr.
  std::vector<et::DeviceMemoryBuffer> output_device_buffers;
  std::vector<std::vector<uint8_t>> output_host_buffers;
  for (size_t i = 0; i < method->outputs_size(); ++i) {
    et::Result<et::TensorInfo> info = meta->output_tensor_meta(i);
    if (!info.ok() || info->is_memory_planned()) continue;
    const etc::pte::EValue& slot = plan.values[static_cast<size_t>(plan.outputs[i])];
    void* data = nullptr;
    if (slot.tensor.device.is_cpu()) {
      output_host_buffers.emplace_back(info->nbytes());
      data = output_host_buffers.back().data();
    } else {
      et::Result<et::DeviceMemoryBuffer> buffer = et::DeviceMemoryBuffer::create(
          info->nbytes(), et::etensor::DeviceType::CUDA, slot.tensor.device.index);
      if (!buffer.ok()) return fail("allocating output " + std::to_string(i), buffer.error());
      output_device_buffers.push_back(std::move(*buffer));
      data = output_device_buffers.back().data();
    }
    if (Error e = method->set_output_data_ptr(data, info->nbytes(), i); e != Error::Ok)
      return fail("set_output_data_ptr(" + std::to_string(i) + ")", e);
  }
  // Writes the outputs of the call just made into `dir`; 0 or the exit code.
  auto write_outputs = [&](const std::string& dir) -> int {
    for (size_t i = 0; i < method->outputs_size(); ++i) {
      const et::EValue& out = method->get_output(i);
      if (!out.isTensor()) {
        std::fprintf(stderr, "etc_et_runner: error: output %zu is not a tensor\n", i);
        return 1;
      }
      const ::executorch::aten::Tensor t = out.toTensor();
      std::optional<etc::DType> dtype =
          etc::dtype_from_scalar_type(static_cast<int>(t.scalar_type()));
      if (!dtype) {
        std::fprintf(stderr, "etc_et_runner: error: output %zu has a dtype etc does not know\n", i);
        return 1;
      }
      etc::rt::NpyArray npy{*dtype, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                            std::string(t.nbytes(), '\0')};
      if (t.device_type() == et::etensor::DeviceType::CPU) {
        if (t.nbytes() != 0) std::memcpy(npy.data.data(), t.const_data_ptr(), t.nbytes());
      } else if (t.nbytes() != 0) {
        et::DeviceAllocator* a = et::get_device_allocator(t.device_type());
        if (Error e = a->copy_device_to_host(npy.data.data(), t.const_data_ptr(), t.nbytes(),
                                             t.device_index());
            e != Error::Ok) {
          return fail("reading output " + std::to_string(i) + " from its device", e);
        }
      }
      etc::Status s = etc::rt::write_npy(dir + "/output_" + std::to_string(i) + ".npy", npy);
      if (!s.ok()) {
        std::fprintf(stderr, "etc_et_runner: error: %s\n", s.to_string().c_str());
        return 1;
      }
    }
    return 0;
  };

  for (size_t c = 0; c < calls.size(); ++c) {
    if (int rc = set_inputs(calls[c]); rc != 0) return rc;
    if (Error e = method->execute(); e != Error::Ok) return fail("Method::execute failed", e);
    // One call: OUT_DIR/output_<i>.npy; several: OUT_DIR/call_<k>/output_<i>.npy.
    std::string dir = argv[2];
    if (calls.size() > 1) {
      dir += "/call_" + std::to_string(c + 1);
      if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "etc_et_runner: error: cannot create %s: %s\n", dir.c_str(),
                     std::strerror(errno));
        return 1;
      }
    }
    if (int rc = write_outputs(dir); rc != 0) return rc;
  }
  if (iterations > 0) {  // the last call's inputs, again and again
    std::vector<double> ms;
    for (long it = 0; it < iterations; ++it) {
      for (size_t i = 0; i < n_inputs; ++i) {
        if (Error e =
                method->set_input(et::EValue(::executorch::aten::Tensor(inputs[i].impl.get())), i);
            e != Error::Ok) {
          return fail("set_input(" + std::to_string(i) + ")", e);
        }
      }
      const auto start = std::chrono::steady_clock::now();
      if (Error e = method->execute(); e != Error::Ok) return fail("Method::execute failed", e);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::sort(ms.begin(), ms.end());
    std::fprintf(stderr, "etc_et_runner: execute: median %.4f ms, fastest %.4f ms over %ld calls\n",
                 ms[ms.size() / 2], ms.front(), iterations);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return run(argc, argv);
}
