#include "runtime/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "graph/tensor_spec.h"

namespace etc::rt {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The buffer `slot` of `buffers` on `device` with at least `bytes`: the one there when it
// is on that device and large enough, else a new one (at least `capacity` bytes, a
// dynamic-bound tensor's bound, so that it does not move when the sizes change).
Result<void*> io_buffer(std::vector<DeviceBuffer>& buffers, size_t slot, const RuntimeEnv& env,
                        Device device, size_t bytes, size_t capacity) {
  if (buffers.size() <= slot) buffers.resize(slot + 1);
  DeviceBuffer& b = buffers[slot];
  if (b.data() == nullptr || b.device() != device || b.size() < bytes) {
    b = DeviceBuffer();  // freed first: the new one may take its place
    ETC_ASSIGN_OR_RETURN(
        b, DeviceBuffer::allocate(*env.allocators, device, std::max(bytes, capacity), 256));
  }
  return b.data();
}

// Inputs of one call: the tokens at positions first.., then the held inputs (`fixed`, from
// --input or seeded random data).
std::vector<HostTensor> decoder_inputs(const Method& m, std::span<const int64_t> tokens,
                                       int64_t first, const std::vector<HostTensor>& fixed) {
  const auto n = static_cast<int64_t>(tokens.size());
  const DType t = m.input(0).dtype;
  std::vector<int64_t> ids_shape = m.input_bound(0);
  ids_shape.back() = n;
  HostTensor ids{t, ids_shape, std::string(static_cast<size_t>(n * dtype_size(t)), '\0')};
  HostTensor p{DType::kInt64, {n}, std::string(static_cast<size_t>(n * 8), '\0')};
  for (int64_t k = 0; k < n; ++k) {
    const int64_t pos = first + k;
    if (t == DType::kInt64) {
      std::memcpy(ids.bytes.data() + k * 8, &tokens[static_cast<size_t>(k)], 8);
    } else {
      auto t32 = static_cast<int32_t>(tokens[static_cast<size_t>(k)]);
      std::memcpy(ids.bytes.data() + k * 4, &t32, 4);
    }
    std::memcpy(p.bytes.data() + k * 8, &pos, 8);
  }
  std::vector<HostTensor> in{std::move(ids), std::move(p)};
  in.insert(in.end(), fixed.begin() + 2, fixed.end());
  return in;
}

}  // namespace

Status set_inputs(Method& m, const RuntimeEnv& env, std::span<const InputRef> inputs, IoBuffers& io,
                  CopyCounts* counts) {
  if (inputs.size() != m.num_inputs()) {
    return invalid_input("the program takes " + std::to_string(m.num_inputs()) + " inputs, " +
                         std::to_string(inputs.size()) + " given");
  }
  CopyCounts local;
  CopyCounts& c = counts != nullptr ? *counts : local;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    const TensorView& t = m.input(i);
    const InputRef& h = inputs[i];
    if (!m.input_is_bound(i)) {
      ETC_RETURN_IF_ERROR(m.set_input(i, h.data, h.nbytes, h.shape));
      ++c.inputs_copied;
      c.input_bytes_copied += h.nbytes;
      continue;
    }
    ETC_RETURN_IF_ERROR(m.resize_input(i, h.shape));
    ETC_ASSIGN_OR_RETURN(void* b, io_buffer(io.inputs, i, env, t.device, h.nbytes,
                                            static_cast<size_t>(std::max<int64_t>(0, t.capacity))));
    if (t.device.is_cpu()) {
      if (h.nbytes != 0) std::memcpy(b, h.data, h.nbytes);
      ++c.inputs_copied;
      c.input_bytes_copied += h.nbytes;
    } else {
      ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, env.allocators->for_device(t.device));
      ETC_RETURN_IF_ERROR(a->copy_host_to_device(b, h.data, h.nbytes, t.device.index));
      ++c.inputs_uploaded;
    }
    ETC_RETURN_IF_ERROR(m.bind_input(i, b));
  }
  return Status();
}

Status bind_outputs(Method& m, const RuntimeEnv& env, IoBuffers& io) {
  for (size_t i = 0; i < m.num_outputs(); ++i) {
    if (!m.output_is_bound(i)) continue;
    const TensorView& t = m.output(i);
    ETC_ASSIGN_OR_RETURN(void* b,
                         io_buffer(io.outputs, i, env, t.device, static_cast<size_t>(t.nbytes()),
                                   static_cast<size_t>(std::max<int64_t>(0, t.capacity))));
    ETC_RETURN_IF_ERROR(m.bind_output(i, b));
  }
  return Status();
}

Status read_output(const Method& m, const RuntimeEnv& env, size_t i, void* dst,
                   CopyCounts* counts) {
  const TensorView& t = m.output(i);
  const auto n = static_cast<size_t>(t.nbytes());
  if (n != 0) {
    if (t.device.is_cpu()) {
      std::memcpy(dst, t.data, n);
    } else {
      ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, env.allocators->for_device(t.device));
      ETC_RETURN_IF_ERROR(a->copy_device_to_host(dst, t.data, n, t.device.index));
    }
  }
  if (counts != nullptr) {
    ++counts->outputs_copied;
    counts->output_bytes_copied += n;
  }
  return Status();
}

Status check_input(const Method& m, size_t i, DType dtype, std::span<const int64_t> shape,
                   const std::string& name) {
  const TensorView& want = m.input(i);
  const std::vector<int64_t>& bound = m.input_bound(i);
  bool fits = std::equal(shape.begin(), shape.end(), bound.begin(), bound.end());
  if (m.input_is_dynamic(i) && shape.size() == bound.size()) {
    fits = true;  // dynamic-bound: each dim at most its bound
    for (size_t d = 0; d < bound.size(); ++d)
      fits = fits && shape[d] >= 0 && shape[d] <= bound[d];
  }
  if (dtype == want.dtype && fits) return Status();
  return invalid_input(name + " must be " + std::string(dtype_name(want.dtype)) +
                       shape_to_string(bound) +
                       (m.input_is_dynamic(i) ? " or smaller (dynamic-bound)" : "") + ", got " +
                       std::string(dtype_name(dtype)) +
                       shape_to_string(std::vector<int64_t>(shape.begin(), shape.end())));
}

Result<std::vector<HostTensor>> run_method(Method& m, const RuntimeEnv& env,
                                           const std::vector<HostTensor>& inputs, int warmup,
                                           int iterations, Timings* timings,
                                           const std::function<Status()>& sync, bool keep_state,
                                           IoBuffers* io) {
  IoBuffers local;  // memory for unplanned inputs/outputs when the caller keeps none
  IoBuffers& bound = io != nullptr ? *io : local;
  std::vector<InputRef> refs;
  refs.reserve(inputs.size());
  for (const HostTensor& h : inputs)
    refs.push_back(InputRef{h.dtype, h.shape, h.bytes.data(), h.bytes.size()});
  for (int iter = 0; iter < warmup + iterations; ++iter) {
    if (!keep_state) ETC_RETURN_IF_ERROR(m.reset_state());
    auto t0 = Clock::now();
    ETC_RETURN_IF_ERROR(set_inputs(m, env, refs, bound));
    ETC_RETURN_IF_ERROR(bind_outputs(m, env, bound));
    if (sync) ETC_RETURN_IF_ERROR(sync());
    auto t1 = Clock::now();
    ETC_RETURN_IF_ERROR(m.execute());
    if (sync) ETC_RETURN_IF_ERROR(sync());
    auto t2 = Clock::now();
    std::vector<HostTensor> outs;
    for (size_t i = 0; i < m.num_outputs(); ++i) {
      const TensorView& t = m.output(i);
      HostTensor h{t.dtype, t.sizes, std::string(static_cast<size_t>(t.nbytes()), '\0')};
      ETC_RETURN_IF_ERROR(read_output(m, env, i, h.bytes.data()));
      outs.push_back(std::move(h));
    }
    if (iter >= warmup && timings != nullptr) {
      timings->h2d.push_back(std::chrono::duration<double>(t1 - t0).count());
      timings->compute.push_back(std::chrono::duration<double>(t2 - t1).count());
      timings->d2h.push_back(seconds_since(t2));
    }
    if (iter == warmup + iterations - 1) return outs;
  }
  return std::vector<HostTensor>{};
}

Status check_decoder_signature(const Method& m) {
  auto describe = [&m] {
    std::string s;
    for (size_t i = 0; i < m.num_inputs(); ++i) {
      s += (i ? ", " : "") + std::string(dtype_name(m.input(i).dtype)) +
           shape_to_string(m.input(i).sizes);
    }
    return s;
  };
  // Token ids [1, n] (or [n]) and positions [n]: n is 1, or dynamic-bound (a prompt is then
  // one call).
  auto tokens = [&m](size_t i, bool ids) {
    const TensorView& t = m.input(i);
    const std::vector<int64_t>& b = m.input_bound(i);
    const bool dtype_ok =
        ids ? (t.dtype == DType::kInt64 || t.dtype == DType::kInt32) : t.dtype == DType::kInt64;
    // ids: [n] or [1, n]; positions: [n].
    const bool shape_ok = b.size() == 1 || (ids && b.size() == 2 && b[0] == 1);
    return dtype_ok && shape_ok && (t.numel() == 1 || m.input_is_dynamic(i));
  };
  // The ids and their positions are dynamic together (one symbol) or both one token.
  if (m.num_inputs() < 2 || !tokens(0, true) || !tokens(1, false) || m.input_bound(1).size() != 1 ||
      m.input_is_dynamic(0) != m.input_is_dynamic(1) || m.num_outputs() < 1 ||
      m.output(0).rank() < 1 || m.output(0).sizes.back() < 1 ||
      !dtype_is_float(m.output(0).dtype)) {
    return invalid_input(
        "--prompt/--steps need a decoder program: inputs (token ids int64[1, 1], positions "
        "int64[1], then any inputs held for every call) and logits as output 0; this program "
        "takes (" +
        describe() + ")");
  }
  if (!m.writes_state()) {
    return invalid_input(
        "--prompt/--steps need a program with state (a KV cache held in registered buffers); "
        "this program has none, so no call would see the tokens before it");
  }
  return Status();
}

int64_t last_rows(const HostTensor& logits, int64_t n, std::vector<float>* rows) {
  const int64_t vocab = logits.shape.back();
  const int64_t total = static_cast<int64_t>(logits.bytes.size()) / dtype_size(logits.dtype);
  const int64_t begin = std::max<int64_t>(0, total - n * vocab);
  int64_t best = 0;
  double best_v = 0;
  for (int64_t k = begin; k < total; ++k) {
    const double v =
        load_as_double(logits.dtype, logits.bytes.data() + k * dtype_size(logits.dtype));
    rows->push_back(static_cast<float>(v));
    const int64_t col = (k - begin) % vocab;
    if (k >= total - vocab && (col == 0 || v > best_v)) {
      best = col;
      best_v = v;
    }
  }
  return best;
}

Result<Generation> generate(Method& m, const RuntimeEnv& env, const std::vector<int64_t>& prompt,
                            int steps, const std::vector<HostTensor>& fixed,
                            const std::function<Status()>& sync, Method* reference,
                            const RuntimeEnv* ref_env, std::vector<float>* ref_logits) {
  Generation g;
  ETC_RETURN_IF_ERROR(m.reset_state());
  if (reference != nullptr) ETC_RETURN_IF_ERROR(reference->reset_state());
  const int64_t chunk =
      m.input_is_dynamic(0) ? std::min(m.input_bound(0).back(), m.input_bound(1).back()) : 1;
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  std::vector<int64_t> tokens;
  int64_t pos = 0;
  IoBuffers io, ref_io;  // the same IO pointers every step (graphs replay)
  while (pos < prompt_len + steps - 1) {
    const bool prefill = pos < prompt_len;
    if (prefill) {
      const int64_t n = std::min(chunk, prompt_len - pos);
      tokens.assign(prompt.begin() + pos, prompt.begin() + pos + n);
    } else {
      tokens = {g.ids.back()};
    }
    const auto n = static_cast<int64_t>(tokens.size());
    std::vector<HostTensor> in = decoder_inputs(m, tokens, pos, fixed);
    Timings t;
    Result<std::vector<HostTensor>> out = run_method(m, env, in, 0, 1, &t, sync, true, &io);
    if (!out.ok()) {
      return std::move(out).take_status().add_context(
          "at position " + std::to_string(pos) +
          (n == 1 ? " (token " + std::to_string(tokens[0]) + ")"
                  : " (" + std::to_string(n) + " prompt tokens)"));
    }
    const int64_t next = last_rows((*out)[0], n, &g.logits);
    g.vocab = (*out)[0].shape.back();
    g.last = *out;
    (prefill ? g.prefill : g.decode).push_back(t.compute.front());
    if (reference != nullptr) {
      ETC_ASSIGN_OR_RETURN(std::vector<HostTensor> r, run_method(*reference, *ref_env, in, 0, 1,
                                                                 nullptr, nullptr, true, &ref_io));
      last_rows(r[0], n, ref_logits);
    }
    pos += n;
    if (pos >= prompt_len) g.ids.push_back(next);
  }
  return g;
}

}  // namespace etc::rt
