// Running a loaded method from host data: inputs bound or uploaded to their devices, the
// method executed, outputs read back; and greedy generation for decoders whose state (a KV
// cache) carries a sequence from call to call. What `etc run` does, as a library any front
// end can call (a Python package, a server).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "runtime/backend.h"
#include "runtime/device_allocator.h"
#include "runtime/method.h"
#include "support/status.h"

namespace etc::rt {

// Host bytes of one tensor, with its metadata.
struct HostTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Seconds per run: host-to-device (inputs), compute, device-to-host (outputs); `load` is the
// caller's.
struct Timings {
  double load = 0;
  std::vector<double> h2d, compute, d2h;
};

// Memory for a method's bound (unplanned) inputs and outputs, kept across iterations and
// calls: the same pointers every time, so that a CUDA delegate capturing graphs replays its
// graph. (Freed and allocated again each call, cudaMalloc may hand the buffers back in
// another order, and every new set of pointers is a new graph to capture.)
struct IoBuffers {
  std::vector<DeviceBuffer> inputs, outputs;
};

// One input as the caller holds it: host memory it keeps alive until the run returns.
struct InputRef {
  DType dtype = DType::kFloat32;
  std::span<const int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// What crossed between the caller's memory and the method's, for front ends that promise
// no needless copy (the Python package reports these).
struct CopyCounts {
  uint64_t inputs_copied = 0;  // inputs copied into planned host memory or a bound buffer
  uint64_t input_bytes_copied = 0;
  uint64_t inputs_uploaded = 0;  // inputs copied to a device
  uint64_t outputs_copied = 0;   // outputs copied to caller memory (host or from a device)
  uint64_t output_bytes_copied = 0;
};

// Gives `m` its inputs: a planned input is copied into its planned memory, a bound one into
// the buffer `io` keeps for it (host) or uploaded (device); dynamic-bound inputs take their
// shape. The caller checked dtypes and shapes (check_input says what is wrong).
Status set_inputs(Method& m, const RuntimeEnv& env, std::span<const InputRef> inputs, IoBuffers& io,
                  CopyCounts* counts = nullptr);
// Points every bound output at a buffer `io` keeps for it.
Status bind_outputs(Method& m, const RuntimeEnv& env, IoBuffers& io);
// Copies output i (after execute) into `dst`, which holds m.output(i).nbytes() bytes.
Status read_output(const Method& m, const RuntimeEnv& env, size_t i, void* dst,
                   CopyCounts* counts = nullptr);

// Whether `dtype`/`shape` fit input i: its dtype, and its bound (each dim at most the bound
// for a dynamic-bound input). The error names the input as `name` ("input 1 (pos)").
Status check_input(const Method& m, size_t i, DType dtype, std::span<const int64_t> shape,
                   const std::string& name);

// Runs `m` with `inputs`: binds (uploading device-resident inputs), executes `warmup` +
// `iterations` times, and returns the outputs of the last run as host tensors. Bound inputs
// and outputs use `io` (kept by the caller across calls) or, without it, buffers kept across
// the iterations. `sync` waits for queued device work, so that compute time is not counted
// as d2h. A program with state starts every run from its initial state unless `keep_state`
// (generation feeds one call's state into the next).
Result<std::vector<HostTensor>> run_method(Method& m, const RuntimeEnv& env,
                                           const std::vector<HostTensor>& inputs, int warmup,
                                           int iterations, Timings* timings,
                                           const std::function<Status()>& sync = nullptr,
                                           bool keep_state = false, IoBuffers* io = nullptr);

// Greedy decoding. The program takes token ids [1, 1] (or [1], or [1, n] dynamic-bound) and
// their positions [1] (or [n]), then any inputs held for every call (an encoder's output),
// and returns logits whose last dim is the vocabulary as output 0.
struct Generation {
  std::vector<int64_t> ids;   // generated
  std::vector<float> logits;  // one row of `vocab` per position
  int64_t vocab = 0;
  std::vector<double> prefill, decode;  // seconds per call
  std::vector<HostTensor> last;         // every output of the last call
};

// Whether `m` is such a decoder with state; the error says what it takes instead.
Status check_decoder_signature(const Method& m);

// The last `n` rows of output 0's last dim (the vocabulary) as floats, appended to `rows`;
// returns the argmax of the last row (the first maximum).
int64_t last_rows(const HostTensor& logits, int64_t n, std::vector<float>* rows);

// Prefill, then `steps` greedy tokens. The prompt goes in one call per token, or, when the
// program's token input is dynamic-bound, in calls of up to its bound. `fixed` holds every
// input (its first two, the tokens and positions, are replaced each call). `reference`, when
// given, runs the same calls in lockstep (the CPU reference), and its logits rows go to
// `ref_logits`.
Result<Generation> generate(Method& m, const RuntimeEnv& env, const std::vector<int64_t>& prompt,
                            int steps, const std::vector<HostTensor>& fixed,
                            const std::function<Status()>& sync = nullptr,
                            Method* reference = nullptr, const RuntimeEnv* ref_env = nullptr,
                            std::vector<float>* ref_logits = nullptr);

}  // namespace etc::rt
