// What the ONNX importer makes at export time without an IR op: the values of Shape, Size,
// Constant and ConstantOfShape (from static shapes and attributes), Range, the window
// functions and MelWeightMatrix. Every other op whose inputs are known is evaluated by the
// CPU kernel of the IR op its converter emits (NodeCtx::emit, consteval/evaluate.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_shapes.h"

namespace etc::onnx_import {

namespace {

constexpr int64_t kMaxEvalElements = NodeCtx::kMaxEvalElements;

HostTensor gather_elements(const HostTensor& t, std::vector<int64_t> shape,
                           const std::vector<int64_t>& index) {
  const int64_t es = dtype_size(t.dtype);
  std::string bytes(index.size() * static_cast<size_t>(es), '\0');
  const uint8_t* src = t.data.bytes().data();
  for (size_t i = 0; i < index.size(); ++i)
    std::memcpy(bytes.data() + i * es, src + index[i] * es, static_cast<size_t>(es));
  return make_host_tensor(t.dtype, std::move(shape), std::move(bytes));
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// The output type a window function or MelWeightMatrix names (float32 by default).
Result<DType> output_datatype(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t code, ctx.attr_int("output_datatype", 1));
  std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(code));
  if (!dt) return ctx.unsupported("output_datatype " + onnx_dtype_name(static_cast<int32_t>(code)));
  return *dt;
}

// HannWindow, HammingWindow and BlackmanWindow (opset 17): the generalized cosine window
// a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N'), N' = size (periodic) or size - 1.
Result<bool> eval_window(NodeCtx& ctx, const std::string& op) {
  const HostTensor& size_t_ = *ctx.constant(0);
  if (size_t_.numel() != 1 || dtype_is_float(size_t_.dtype)) {
    return ctx.invalid("size must be an integer scalar");
  }
  const int64_t n = size_t_.ints()[0];
  if (n < 0) return ctx.invalid("size " + std::to_string(n) + " is negative");
  if (n > kMaxEvalElements) return false;
  ETC_ASSIGN_OR_RETURN(int64_t periodic, ctx.attr_int("periodic", 1));
  ETC_ASSIGN_OR_RETURN(DType dt, output_datatype(ctx));
  double a0 = 0.5, a1 = 0.5, a2 = 0.0;
  if (op == "HammingWindow") {
    a0 = 25.0 / 46.0;
    a1 = 1.0 - a0;
  } else if (op == "BlackmanWindow") {
    a0 = 0.42;
    a2 = 0.08;
  }
  const double denom = static_cast<double>(periodic != 0 ? n : n - 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double t = 2.0 * M_PI * static_cast<double>(i) / denom;
    v[static_cast<size_t>(i)] = a0 - a1 * std::cos(t) + a2 * std::cos(2.0 * t);
  }
  ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_doubles(dt, {n}, v)));
  return true;
}

// MelWeightMatrix (opset 17): triangular filters on the mel scale, as ONNX's reference
// implementation computes them ([dft_length / 2 + 1, num_mel_bins]).
Result<bool> eval_mel_weight_matrix(NodeCtx& ctx) {
  for (int i = 0; i < 5; ++i) {
    if (ctx.constant(i)->numel() != 1)
      return ctx.invalid("input " + std::to_string(i) + " must be a scalar");
  }
  const int64_t bins = ctx.constant(0)->ints()[0];
  const int64_t dft_length = ctx.constant(1)->ints()[0];
  const int64_t sample_rate = ctx.constant(2)->ints()[0];
  const double lower = ctx.constant(3)->doubles()[0];
  const double upper = ctx.constant(4)->doubles()[0];
  if (bins <= 0 || dft_length <= 0 || sample_rate <= 0) {
    return ctx.invalid("num_mel_bins, dft_length and sample_rate must be positive");
  }
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  if (spectrogram_bins * bins > kMaxEvalElements) return false;
  ETC_ASSIGN_OR_RETURN(DType dt, output_datatype(ctx));
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low_mel = to_mel(lower);
  const double mel_step = (to_mel(upper) - low_mel) / static_cast<double>(bins + 2);
  // The filters' edges as spectrogram bins.
  std::vector<int64_t> edge(static_cast<size_t>(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz =
        700.0 * std::expm1((static_cast<double>(i) * mel_step + low_mel) / 2595.0 * std::log(10.0));
    edge[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  std::vector<double> out(static_cast<size_t>(spectrogram_bins * bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double* {
    if (j < 0 || j >= spectrogram_bins) return nullptr;
    return &out[static_cast<size_t>(j * bins + i)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t left = edge[i], center = edge[i + 1], right = edge[i + 2];
    if (center == left) {
      if (double* p = at(center, i)) *p = 1.0;
    } else {
      for (int64_t j = left; j <= center; ++j) {
        if (double* p = at(j, i))
          *p = static_cast<double>(j - left) / static_cast<double>(center - left);
      }
    }
    for (int64_t j = center; j < right; ++j) {
      if (double* p = at(j, i))
        *p = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
  }
  ETC_RETURN_IF_ERROR(
      ctx.set_output_constant(0, host_from_doubles(dt, {spectrogram_bins, bins}, out)));
  return true;
}

}  // namespace

Result<bool> try_evaluate(NodeCtx& ctx) {
  if (qualified_op_type(ctx.node()) != ctx.op_type()) return false;  // another domain's op
  const std::string& op = ctx.op_type();
  // Ops whose result needs only static shapes.
  if (op == "Shape") {
    if (!ctx.has_input(0)) return ctx.invalid("input 0 is required");
    const std::vector<int64_t>& s = ctx.shape(0);
    int64_t r = static_cast<int64_t>(s.size());
    ETC_ASSIGN_OR_RETURN(int64_t start, ctx.attr_int("start", 0));
    ETC_ASSIGN_OR_RETURN(int64_t end, ctx.attr_int("end", r));
    start = std::clamp(start < 0 ? start + r : start, int64_t{0}, r);
    end = std::clamp(end < 0 ? end + r : end, int64_t{0}, r);
    std::vector<int64_t> dims(s.begin() + start, s.begin() + std::max(start, end));
    int64_t n = static_cast<int64_t>(dims.size());
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_ints(DType::kInt64, {n}, dims)));
    return true;
  }
  if (op == "Size") {
    if (!ctx.has_input(0)) return ctx.invalid("input 0 is required");
    ETC_RETURN_IF_ERROR(
        ctx.set_output_constant(0, host_from_ints(DType::kInt64, {}, {numel_of(ctx.shape(0))})));
    return true;
  }
  if (op == "Constant") {
    static const char* kKinds[] = {"value",      "value_float",  "value_floats",  "value_int",
                                   "value_ints", "value_string", "value_strings", "sparse_value"};
    const onnx::AttributeProto* found = nullptr;
    for (const char* k : kKinds) {
      if (const onnx::AttributeProto* a = ctx.attr(k)) {
        if (found) return ctx.invalid("exactly one value attribute is allowed");
        found = a;
      }
    }
    if (found == nullptr) return ctx.invalid("a Constant needs a value attribute");
    const std::string& k = found->name();
    HostTensor t;
    if (k == "value") {
      ETC_ASSIGN_OR_RETURN(t, ctx.attr_tensor("value"));
    } else if (k == "value_float") {
      ETC_ASSIGN_OR_RETURN(float f, ctx.attr_float(k, std::nullopt));
      t = host_from_doubles(DType::kFloat32, {}, {f});
    } else if (k == "value_floats") {
      ETC_ASSIGN_OR_RETURN(std::vector<float> f, ctx.attr_floats(k));
      t = host_from_doubles(DType::kFloat32, {static_cast<int64_t>(f.size())},
                            std::vector<double>(f.begin(), f.end()));
    } else if (k == "value_int") {
      ETC_ASSIGN_OR_RETURN(int64_t i, ctx.attr_int(k, std::nullopt));
      t = host_from_ints(DType::kInt64, {}, {i});
    } else if (k == "value_ints") {
      ETC_ASSIGN_OR_RETURN(std::vector<int64_t> i, ctx.attr_ints(k, std::nullopt));
      t = host_from_ints(DType::kInt64, {static_cast<int64_t>(i.size())}, i);
    } else {
      return ctx.unsupported("'" + k + "' constants are not supported (string and sparse tensors)");
    }
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, std::move(t)));
    return true;
  }
  if (op == "ConstantOfShape") {
    const HostTensor* shape_t = ctx.constant(0);
    if (shape_t == nullptr) return false;
    std::vector<int64_t> shape = shape_t->ints();
    for (int64_t d : shape) {
      if (d < 0) return ctx.invalid("negative dim in shape " + shape_to_string(shape));
    }
    HostTensor value = host_from_doubles(DType::kFloat32, {1}, {0.0});
    if (ctx.attr("value")) {
      ETC_ASSIGN_OR_RETURN(value, ctx.attr_tensor("value"));
      if (value.numel() != 1) return ctx.invalid("'value' must hold exactly one element");
    }
    if (numel_of(shape) > kMaxEvalElements) return false;
    std::vector<int64_t> index(static_cast<size_t>(numel_of(shape)), 0);
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, gather_elements(value, shape, index)));
    return true;
  }

  // The ops that only evaluate (no IR op computes them at run time) need every input known;
  // every other op over known inputs is evaluated by the CPU kernels when its converter
  // emits it (NodeCtx::emit, consteval/evaluate.h).
  if (ctx.num_inputs() == 0 || !ctx.all_inputs_constant()) return false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.constant(i)->numel() > kMaxEvalElements) return false;
  }
  if (op == "HannWindow" || op == "HammingWindow" || op == "BlackmanWindow") {
    return eval_window(ctx, op);
  }
  if (op == "MelWeightMatrix") return eval_mel_weight_matrix(ctx);
  if (op == "Range") {
    const HostTensor &s = *ctx.constant(0), &l = *ctx.constant(1), &d = *ctx.constant(2);
    if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) {
      return ctx.invalid("start, limit and delta must be scalars");
    }
    if (dtype_is_float(s.dtype)) {
      double a = s.doubles()[0], b = l.doubles()[0], c = d.doubles()[0];
      if (c == 0) return ctx.invalid("delta must not be zero");
      double n = std::max(std::ceil((b - a) / c), 0.0);
      if (n > static_cast<double>(kMaxEvalElements)) return false;
      std::vector<double> v(static_cast<size_t>(n));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = a + static_cast<double>(i) * c;
      ETC_RETURN_IF_ERROR(ctx.set_output_constant(
          0, host_from_doubles(s.dtype, {static_cast<int64_t>(v.size())}, v)));
      return true;
    }
    int64_t a = s.ints()[0], b = l.ints()[0], c = d.ints()[0];
    if (c == 0) return ctx.invalid("delta must not be zero");
    double n = std::max(
        std::ceil((static_cast<double>(b) - static_cast<double>(a)) / static_cast<double>(c)), 0.0);
    if (n > static_cast<double>(kMaxEvalElements)) return false;
    std::vector<int64_t> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = a + static_cast<int64_t>(i) * c;
    ETC_RETURN_IF_ERROR(
        ctx.set_output_constant(0, host_from_ints(s.dtype, {static_cast<int64_t>(v.size())}, v)));
    return true;
  }
  return false;
}

}  // namespace etc::onnx_import
