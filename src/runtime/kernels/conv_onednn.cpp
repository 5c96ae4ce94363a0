// Float convolutions through oneDNN (Debian's libdnnl), where it has a JIT kernel for the
// shape on this CPU: its brgemm convolutions on channels-last data ran resnet18's 3x3 layers
// at 220-270 GFLOP/s on one Zen 5 core, against 110-190 for etc's own GEMM and Winograd paths
// (docs/benchmarks.md, "What the CPU kernels' knobs change").
//
// etc's tensors are NCHW (the .pte is ExecuTorch's): a call copies the input to NHWC, runs
// the convolution band by band (of output rows, or of output channels), and copies the output
// back to NCHW, adding the bias and running the epilogue per channel on the way. Inside a
// channels-last chain (kernels/load_plan.h) the input, the out or both are NHWC
// already: no copy on that side, the bias in the primitive, the epilogue on the NHWC out.
//
// Threads: Debian's oneDNN parallelises with OpenMP; etc keeps its own pool. Each band is its
// own oneDNN primitive (made once, at the first call) run on one thread, so oneDNN never
// starts an OpenMP team and the pool spreads the bands. The bands are fixed by the shape
// (one band when etc runs on one thread). oneDNN computes each output the same whichever band
// it falls in (its kernels accumulate over input channels and taps in an order that does not
// depend on the band's rows or channels: the tests compare one band with many, 1 thread with
// 3, bit for bit), so the result does not depend on the thread count.
#include "runtime/kernels/conv.h"

#if ETC_WITH_ONEDNN

#include <spdlog/spdlog.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_transpose.h"
#include "support/file_io.h"

// libgomp's (the OpenMP runtime Debian's libdnnl uses), declared here rather than through
// <omp.h>, which belongs to the compiler's own OpenMP runtime.
extern "C" {
int omp_get_max_threads();
void omp_set_num_threads(int n);
}

namespace etc::rt::kernels {
namespace {

using dnnl::memory;

// oneDNN's JIT kernels follow $ETC_MAX_ISA too (its cap must be set before its first
// primitive). $ONEDNN_MAX_CPU_ISA, read by oneDNN itself, wins when both are set.
void cap_onednn_isa() {
  const std::optional<GemmIsa> cap = env_max_isa();
  if (!cap.has_value() || *cap == GemmIsa::kAuto || std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr ||
      std::getenv("DNNL_MAX_CPU_ISA") != nullptr) {
    return;
  }
  dnnl_set_max_cpu_isa(*cap == GemmIsa::kAvx2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    cap_onednn_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

// OpenMP's thread count for the calling thread set to 1 for the scope (oneDNN then runs the
// primitive on this thread alone), and restored after.
class OneOmpThread {
 public:
  OneOmpThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneOmpThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneOmpThread(const OneOmpThread&) = delete;
  OneOmpThread& operator=(const OneOmpThread&) = delete;

 private:
  int saved_;
};

// Bands of output rows per image: enough for the pool to spread them on the cores this
// project targets and more, few enough that each band's primitive runs at full speed.
constexpr int64_t kMaxBands = 8;
// Output positions per band of rows at least (fewer bands on small planes): each band is a
// primitive call of its own, with a fixed cost.
constexpr int64_t kMinBandPositions = 1024;
// Bands of output channels (weights larger than the input): two, each with its part of the
// weights. More bands ran slower at one thread (resnet18's 512-channel 7x7 layers: 1.33 ms
// in one band, 1.35 in two, 1.41-1.6 in four, 1.46-1.55 in eight): each band's brgemm gets
// fewer output channels to reuse every input load on.
constexpr int64_t kChannelBands = 2;

memory::dims nchw_dims(int64_t n, int64_t c, int64_t h, int64_t w) {
  return {n, c, h, w};
}

}  // namespace

// The primitives for one input size.
struct OnednnConv::Impl {
  // One primitive: output rows [oh0, oh0 + rows) of output channels [oc0, oc0 + channels),
  // written channels-last with `ld` floats per position at `dst_offset` (per image) of the
  // output copy.
  struct Band {
    int64_t oh0 = 0, oh1 = 0, ih0 = 0;  // output rows [oh0, oh1), first input row read
    int64_t oc0 = 0, channels = 0, ld = 0, dst_offset = 0;
    dnnl::convolution_forward primitive;
    memory::desc src, dst;
    memory::desc scratchpad;  // oneDNN's working memory, given by the caller of each run
    size_t weights = 0;       // index into `weights`
    uint64_t id = 0;          // unique in the process: the key of a thread's BandArgs
  };
  int64_t h = 0, w = 0;
  // Written channels-last straight into the out (bands of rows only, the bias in the
  // primitive), else to the copy that goes back to NCHW.
  bool out_nhwc = false, with_bias = false;
  std::optional<OnednnConv::Clamp> clamp;  // a post-op of every band (channels-last outs only)
  std::vector<Band> bands;                 // empty: oneDNN has no JIT kernel for this size
  std::vector<memory> weights;             // reordered once; bands share one where they can
  bool by_channels = false;
  bool single = false;  // one band: made for one thread
  std::string name;     // oneDNN's name for its kernel
};

struct OnednnConv::WeightCache {
  // Each copy with the first output channel of the weights it holds (a band of channels has
  // its part).
  std::vector<std::pair<int64_t, dnnl::memory>> copies;
};

OnednnConv::OnednnConv() = default;
OnednnConv::~OnednnConv() = default;

namespace {
std::atomic<int>& onednn_switch() {  // -1: not read yet; else 0 or 1
  static std::atomic<int> state{-1};
  return state;
}
}  // namespace

bool onednn_conv_enabled() {
  int on = onednn_switch().load(std::memory_order_relaxed);
  if (on < 0) {
    const char* v = std::getenv("ETC_ONEDNN");
    on = v == nullptr || std::strcmp(v, "0") != 0 ? 1 : 0;
    onednn_switch().store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

void set_onednn_conv_enabled(bool on) {
  onednn_switch().store(on ? 1 : 0);
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

namespace {

std::atomic<uint64_t>& next_band_id() {
  static std::atomic<uint64_t> id{1};
  return id;
}

// A band's execute arguments, made once per thread and band: only their data pointers change
// from one call to the next (making the memory objects and the argument map on every call
// took 1.7-1.9 us a band, about 0.1 ms of mobilenet_v2's 2.5 ms at 2 threads). The weights
// are in the map only during a call, so that a cached entry never keeps a freed plan's
// weights alive.
struct BandArgs {
  memory src, dst, pad, bias;
  std::unordered_map<int, memory> args;
};

BandArgs& band_args(const OnednnConv::Impl::Band& band, bool with_bias) {
  // Keyed by the band's unique id (never an address a later band could reuse); bands of
  // plans since freed are dropped past kMaxCached entries.
  constexpr size_t kMaxCached = 1024;
  thread_local std::unordered_map<uint64_t, BandArgs> cache;
  auto it = cache.find(band.id);
  if (it != cache.end()) return it->second;
  if (cache.size() >= kMaxCached) cache.clear();
  BandArgs a;  // whole before it is cached (a oneDNN error leaves no half-made entry)
  a.src = memory(band.src, cpu_engine(), nullptr);
  a.dst = memory(band.dst, cpu_engine(), nullptr);
  a.pad = memory(band.scratchpad, cpu_engine(), nullptr);
  a.args = {{DNNL_ARG_SRC, a.src}, {DNNL_ARG_DST, a.dst}, {DNNL_ARG_SCRATCHPAD, a.pad}};
  if (with_bias) {
    a.bias = memory(memory::desc({band.channels}, memory::data_type::f32, memory::format_tag::x),
                    cpu_engine(), nullptr);
    a.args.emplace(DNNL_ARG_BIAS, a.bias);
  }
  return cache.emplace(band.id, std::move(a)).first->second;
}

// The bands for input size g.h x g.w: none when oneDNN has no JIT kernel for it. Weights in a
// format some earlier plan reordered them to come from `cache`.
std::unique_ptr<OnednnConv::Impl> make_plan(const float* w, const ConvGeometry& g, bool out_nhwc,
                                            bool with_bias, bool single,
                                            std::optional<OnednnConv::Clamp> clamp,
                                            OnednnConv::WeightCache& cache) {
  using Impl = OnednnConv::Impl;
  auto impl = std::make_unique<Impl>();
  impl->h = g.h;
  impl->w = g.w;
  impl->out_nhwc = out_nhwc;
  // A clamp after the bias: only where the bias is in the primitive (an NCHW out gets it on
  // the copy back).
  if (clamp.has_value() && !out_nhwc) return impl;
  impl->clamp = clamp;
  impl->single = single;
  impl->with_bias = with_bias;
  try {
    OneOmpThread one;
    const int64_t cin_g = g.c_in / g.groups, cout_g = g.c_out / g.groups;
    const int64_t taps = cin_g * g.kh * g.kw;
    // Bands of output rows, each reading its rows of the input and all the weights; or bands
    // of output channels, each with its part of the weights and all the input, where the
    // weights outweigh the input (resnet18's 7x7 and 14x14 layers: 9.4 MB of weights against
    // 100 KB of input; each weight is then read once). For an NCHW out, kMaxBands bands of
    // rows (at most one per row). For a channels-last out (a chain: small planes too), at
    // least kMinBandPositions outputs per band of rows but at least two bands where there are
    // two rows (also on small planes: bands of channels there, written apart and copied in,
    // ran mobilenet_v2 14% slower at 2 threads). Channel bands of a channels-last out are
    // written apart and copied into it. Grouped convolutions: rows only (a band of groups
    // would read a strided input).
    const int64_t positions = g.oh * g.ow;
    const int64_t most = std::min(kMaxBands, g.oh);
    // (An even count: two threads then share the bands evenly.)
    const int64_t row_bands = out_nhwc
                                  ? std::clamp<int64_t>((positions / kMinBandPositions + 1) / 2 * 2,
                                                        std::min<int64_t>(2, most), most)
                                  : most;
    impl->by_channels = g.groups == 1 && g.c_out >= 32 && g.c_out * taps >= g.c_in * g.h * g.w;
    // One thread: one band, one primitive call (the bands cost mobilenet_v2 9% at one
    // thread: a fixed cost per call, and row bands each read all the weights).
    if (single) impl->by_channels = false;
    int64_t nb = single ? 1 : row_bands;
    int64_t per_band = g.c_out;
    if (impl->by_channels) {
      per_band = (g.c_out / kChannelBands + 15) / 16 * 16;
      nb = (g.c_out + per_band - 1) / per_band;
    }
    dnnl::stream stream(cpu_engine());
    for (int64_t b = 0; b < nb; ++b) {
      Impl::Band band;
      int64_t oh1 = g.oh;
      if (impl->by_channels) {
        band.oc0 = b * per_band;
        band.channels = std::min(per_band, g.c_out - band.oc0);
        band.ld = band.channels;
        band.dst_offset = band.oc0 * g.oh * g.ow;
      } else {
        band.oh0 = g.oh * b / nb;
        oh1 = g.oh * (b + 1) / nb;
        band.channels = band.ld = g.c_out;
        band.dst_offset = band.oh0 * g.ow * g.c_out;
      }
      band.oh1 = oh1;
      // Input rows [first, last) that the band's outputs read, clipped to the input; the
      // rows clipped off become the band's own padding.
      const int64_t first = band.oh0 * g.stride[0] - g.pad[0];
      const int64_t last = (oh1 - 1) * g.stride[0] - g.pad[0] + (g.kh - 1) * g.dil[0] + 1;
      band.ih0 = std::max<int64_t>(0, first);
      const int64_t ih1 = std::min(g.h, last);
      if (ih1 <= band.ih0) {  // a band all padding (padding wider than the kernel's reach)
        impl->bands.clear();
        return impl;
      }
      const int64_t pad_top = band.ih0 - first, pad_bottom = last - ih1;
      band.src = memory::desc(nchw_dims(1, g.c_in, ih1 - band.ih0, g.w), memory::data_type::f32,
                              memory::format_tag::nhwc);
      band.dst = memory::desc(nchw_dims(1, band.channels, oh1 - band.oh0, g.ow),
                              memory::data_type::f32, memory::format_tag::nhwc);
      // [O, I, KH, KW], or [G, O/G, I/G, KH, KW] grouped (the same bytes).
      const memory::dims wdims = g.groups == 1 ? memory::dims{band.channels, g.c_in, g.kh, g.kw}
                                               : memory::dims{g.groups, cout_g, cin_g, g.kh, g.kw};
      const memory::format_tag wtag =
          g.groups == 1 ? memory::format_tag::oihw : memory::format_tag::goihw;
      const memory::desc any_w(wdims, memory::data_type::f32, memory::format_tag::any);
      const memory::desc bias_d =
          with_bias ? memory::desc({band.channels}, memory::data_type::f32, memory::format_tag::x)
                    : memory::desc();
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, band.src, any_w,
          bias_d, band.dst, {g.stride[0], g.stride[1]}, {g.dil[0] - 1, g.dil[1] - 1},
          {pad_top, g.pad[1]}, {pad_bottom, g.pad[1]});
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (clamp.has_value()) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, clamp->lo, clamp->hi);
        attr.set_post_ops(ops);
      }
      dnnl::convolution_forward::primitive_desc pd(desc, attr, cpu_engine());
      // Only oneDNN's JIT kernels: its reference and GEMM-based convolutions are slower than
      // etc's own.
      const std::string name = pd.impl_info_str();
      // (Its JIT kernels: "brgconv:...", "brgconv_1x1:...", "brdgmm_dw:...", "jit_...";
      // the others: "ref:any", "x64:gemm:jit", im2col + GEMM.)
      if (name.rfind("ref", 0) == 0 || name.find("x64:gemm") != std::string::npos ||
          name.find("gemm:jit") != std::string::npos ||
          (name.find("jit") == std::string::npos && name.find("brg") == std::string::npos &&
           name.find("brdgmm") == std::string::npos)) {
        impl->bands.clear();
        return impl;
      }
      impl->name = name;
      // Row bands share the weights where their formats agree; channel bands each have theirs.
      band.weights = impl->weights.size();
      for (size_t i = 0; !impl->by_channels && i < impl->weights.size(); ++i) {
        if (impl->weights[i].get_desc() == pd.weights_desc()) band.weights = i;
      }
      if (band.weights == impl->weights.size()) {
        // Another plan's copy of these weights in this format (the plans for either out, and
        // for other input sizes, mostly agree), or a new one.
        auto have = std::find_if(cache.copies.begin(), cache.copies.end(), [&](const auto& c) {
          return c.first == band.oc0 && c.second.get_desc() == pd.weights_desc();
        });
        if (have == cache.copies.end()) {
          memory user(memory::desc(wdims, memory::data_type::f32, wtag), cpu_engine(),
                      const_cast<float*>(w + band.oc0 * taps));
          memory reordered(pd.weights_desc(), cpu_engine());
          dnnl::reorder(user, reordered).execute(stream, user, reordered);
          stream.wait();
          // The primitives read the copy: the constant's own pages (a mapped program's) need
          // not stay resident beside it (read again from the file by a later reorder).
          release_pages(w + band.oc0 * taps,
                        static_cast<size_t>(band.channels * taps) * sizeof(float));
          have = cache.copies.insert(cache.copies.end(), {band.oc0, reordered});
        }
        impl->weights.push_back(have->second);
      }
      band.scratchpad = pd.scratchpad_desc();
      band.primitive = dnnl::convolution_forward(pd);
      band.id = next_band_id().fetch_add(1, std::memory_order_relaxed);
      impl->bands.push_back(std::move(band));
    }
  } catch (const dnnl::error& e) {
    spdlog::warn("oneDNN convolution not available for this shape ({}); using etc's kernels",
                 e.what());
    impl->bands.clear();
  }
  return impl;
}

}  // namespace

bool prepare_onednn_conv(std::span<Value* const> args, const ConvGeometry& g,
                         std::unique_ptr<KernelState>& slot) {
  const TensorView& w = args[1]->tensor;
  const OnednnConv::Key key{w.data, g.c_in, g.c_out, g.kh, g.kw, g.stride, g.pad, g.dil, g.groups};
  const auto* wf = static_cast<const float*>(w.data);
  const OnednnConv& dnn =
      cached_kernel_state<OnednnConv>(slot, key, [&] { return OnednnConv::make(wf, g, key); });
  // Both outs: a chain's convolution may write either.
  return !dnn.plan_for(g, false, false).bands.empty() &&
         !dnn.plan_for(g, true, !args[2]->is_none()).bands.empty();
}

std::unique_ptr<OnednnConv> OnednnConv::make(const float* w, const ConvGeometry& g,
                                             const Key& key) {
  auto s = std::make_unique<OnednnConv>();
  s->key = key;
  s->weights_ = w;
  s->weight_cache_ = std::make_unique<WeightCache>();
  s->plans_.push_back(
      make_plan(w, g, false, false, num_threads() == 1, std::nullopt, *s->weight_cache_));
  s->implementation = s->plans_.back()->name;
  return s;
}

const OnednnConv::Impl& OnednnConv::plan_for(const ConvGeometry& g, bool out_nhwc, bool with_bias,
                                             std::optional<Clamp> clamp) const {
  // Made at the first call for this input size and out (a program of dynamic shapes keeps the
  // last kMaxPlans; the weights are reordered per plan, as the format may differ).
  // One band on one thread, else the bands for several; where oneDNN has a JIT kernel for
  // only one of the two, that one (the same bits either way), so that a method loaded at one
  // thread count (which checked the plans it made then) runs at any other.
  const bool single = num_threads() == 1;
  auto get = [&](bool one_band) -> const Impl& {
    auto found = std::find_if(plans_.begin(), plans_.end(), [&](const auto& p) {
      return p->h == g.h && p->w == g.w && p->out_nhwc == out_nhwc && p->with_bias == with_bias &&
             p->single == one_band && p->clamp == clamp;
    });
    if (found != plans_.end()) return **found;
    if (plans_.size() == kMaxPlans) plans_.erase(plans_.begin());
    plans_.push_back(make_plan(weights_, g, out_nhwc, with_bias, one_band, clamp, *weight_cache_));
    return *plans_.back();
  };
  const Impl& preferred = get(single);
  if (!preferred.bands.empty()) return preferred;
  const Impl& other = get(!single);
  return other.bands.empty() ? get(single) : other;
}

bool OnednnConv::run(const float* x, const float* bias, const ConvGeometry& g, float* y,
                     const Epilogue* epilogue, bool in_nhwc, bool out_nhwc) const {
  // A channels-last out takes the bias in the primitive, and a clamp activation too (each
  // output clamped as it is stored, not read back from memory for it), with its results in
  // the activation's out where nothing reads the convolution's own.
  const bool with_bias = out_nhwc && bias != nullptr;
  std::optional<Clamp> clamp;
  float* target = y;  // where the primitive's results go
  if (out_nhwc && epilogue != nullptr && !epilogue->after_inputs &&
      epilogue->activation.has_value() &&
      epilogue->activation->kind == Epilogue::Activation::Kind::kClamp) {
    const Epilogue::Activation& act = *epilogue->activation;
    if (!std::isnan(act.lo) && !std::isnan(act.hi) &&
        (act.t->data == act.x->data || epilogue->out_unread)) {
      clamp = Clamp{act.lo, act.hi};
      target = static_cast<float*>(act.t->data);
    }
  }
  const Impl* chosen = &plan_for(g, out_nhwc, with_bias, clamp);
  if (clamp.has_value() && chosen->bands.empty()) {  // no JIT kernel with the post-op
    clamp.reset();
    target = y;
    chosen = &plan_for(g, out_nhwc, with_bias);
  }
  const Impl& plan = *chosen;
  if (plan.bands.empty()) return false;
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
  // The channels-last copies (where the tensors are not channels-last already), 64-byte
  // aligned (oneDNN's vector loads then never split a cache line), kept by the calling thread
  // from one call to the next.
  thread_local std::vector<float> in_copy, out_copy;
  auto aligned = [](std::vector<float>& v, int64_t n) {
    v.resize(static_cast<size_t>(n + 16));
    const auto at = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - at % 64) % 64) / sizeof(float);
  };
  const float* xin = x;
  if (!in_nhwc) {
    float* copy = aligned(in_copy, g.batch * g.c_in * in_plane);
    for (int64_t n = 0; n < g.batch; ++n)
      to_channels_last(x + n * g.c_in * in_plane, g.c_in, in_plane, copy + n * g.c_in * in_plane);
    xin = copy;
  }
  // Straight into a channels-last out by bands of rows; else into the copy (bands of
  // channels: [P, channels] blocks one after the other).
  const bool direct = out_nhwc && !plan.by_channels;
  float* const yout = direct ? target : aligned(out_copy, g.batch * g.c_out * out_plane);
  // The epilogue, where the primitive has not run it: straight into the out, on each band's
  // rows as it finishes, unless an out of the epilogue lies over the input, which other bands
  // may still read.
  const Epilogue* rest = clamp.has_value() ? nullptr : epilogue;
  const bool epilogue_by_band = direct && rest != nullptr && !rest->after_inputs;

  const auto& bands = plan.bands;
  const int64_t nb = static_cast<int64_t>(bands.size());
  std::atomic<bool> failed{false};
  parallel_for(g.batch * nb, 1, [&](int64_t t0, int64_t t1) {
    OneOmpThread one;
    for (int64_t t = t0; t < t1 && !failed.load(std::memory_order_relaxed); ++t) {
      const int64_t n = t / nb;
      const Impl::Band& band = bands[static_cast<size_t>(t % nb)];
      try {
        thread_local dnnl::stream stream(cpu_engine());
        thread_local std::vector<uint8_t> scratchpad;
        scratchpad.resize(std::max<size_t>(1, band.scratchpad.get_size()));
        BandArgs& a = band_args(band, plan.with_bias);
        a.src.set_data_handle(const_cast<float*>(xin + (n * in_plane + band.ih0 * g.w) * g.c_in));
        a.dst.set_data_handle(yout + n * out_plane * g.c_out + band.dst_offset);
        a.pad.set_data_handle(scratchpad.data());
        if (plan.with_bias) a.bias.set_data_handle(const_cast<float*>(bias + band.oc0));
        a.args[DNNL_ARG_WEIGHTS] = plan.weights[band.weights];
        struct Release {
          BandArgs& a;
          ~Release() { a.args.erase(DNNL_ARG_WEIGHTS); }
        } release{a};
        band.primitive.execute(stream, a.args);
        stream.wait();
      } catch (const dnnl::error& e) {
        spdlog::warn("oneDNN convolution failed ({})", e.what());
        failed = true;
        continue;
      }
      if (epilogue_by_band) {
        const int64_t at = (n * out_plane + band.oh0 * g.ow) * g.c_out;
        apply_epilogue(*rest, at, at + (band.oh1 - band.oh0) * g.ow * g.c_out);
      }
    }
  });
  if (failed) return false;
  if (out_nhwc) {
    if (!direct) {  // the channel bands' blocks into the channels-last out, position by position
      const int64_t per_band = bands.front().channels;
      // About 16 K floats a task: a 7x7 or 14x14 plane is 49 or 196 positions, which at 256
      // positions a task was one task, on one thread.
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / g.c_out);
      parallel_for(g.batch * out_plane, grain, [&](int64_t p0, int64_t p1) {
        for (int64_t q = p0; q < p1; ++q) {
          const int64_t n = q / out_plane, p = q % out_plane;
          const float* from = yout + n * out_plane * g.c_out;
          for (int64_t oc0 = 0; oc0 < g.c_out; oc0 += per_band) {
            const int64_t width = std::min(per_band, g.c_out - oc0);
            std::memcpy(target + q * g.c_out + oc0, from + oc0 * out_plane + p * width,
                        static_cast<size_t>(width) * sizeof(float));
          }
        }
      });
    }
    if (rest != nullptr && !epilogue_by_band) {
      apply_epilogue_whole(*rest, g.batch * g.c_out * out_plane);
    }
    return true;
  }

  // Back to NCHW by blocks of 16 channels, plus the bias, then the epilogue on each finished
  // block while it is in cache (the input was read whole above, so the epilogue's outs may
  // lie over it). Channel c of image n is at yout[n * P * C + base + p * ld + c - oc0] for the
  // band (group of channels) holding it.
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (g.c_out + kBlock - 1) / kBlock;
  const int64_t group = plan.by_channels ? bands.front().channels : g.c_out;
  const FloatKernel isa = gemm_float_kernel();
  parallel_for(g.batch * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / blocks, c0 = (t % blocks) * kBlock;
      const int64_t c1 = std::min(g.c_out, c0 + kBlock);
      float* dst = y + n * g.c_out * out_plane;
      // Bands of channels are multiples of 16 wide: a block lies in one band.
      const int64_t oc0 = c0 / group * group, ld = std::min(group, g.c_out - oc0);
      const float* src = yout + n * out_plane * g.c_out + oc0 * out_plane + (c0 - oc0);
      // 16 x 16 tiles through registers, plus the bias: each source line (16 channels of one
      // position) is read once.
      for (int64_t p0 = 0; p0 < out_plane; p0 += kBlock) {
        transpose_tile(isa, src + p0 * ld, ld, std::min(kBlock, out_plane - p0), c1 - c0,
                       dst + c0 * out_plane + p0, out_plane, bias != nullptr ? bias + c0 : nullptr);
      }
      // The block's channels are one range of the out: one call (per channel, a 7x7 plane's
      // 49 floats paid the call for each of mobilenet_v3's 576 channels).
      if (epilogue != nullptr) {
        const int64_t at = (n * g.c_out + c0) * out_plane;
        apply_epilogue(*epilogue, at, at + (c1 - c0) * out_plane);
      }
    }
  });
  return true;
}

}  // namespace etc::rt::kernels

#else  // !ETC_WITH_ONEDNN

namespace etc::rt::kernels {
bool onednn_conv_enabled() {
  return false;
}
void set_onednn_conv_enabled(bool) {}
std::string onednn_version() {
  return "";
}
bool prepare_onednn_conv(std::span<Value* const>, const ConvGeometry&,
                         std::unique_ptr<KernelState>&) {
  return false;
}
}  // namespace etc::rt::kernels

#endif  // ETC_WITH_ONEDNN
