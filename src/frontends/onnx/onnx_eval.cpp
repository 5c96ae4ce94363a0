// Export-time evaluation of ONNX nodes whose inputs are all known: the shape computations
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ...) that exporters emit, and small
// arithmetic on constants. Integers are computed exactly in int64, floats in double and
// rounded once to the output type.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_shapes.h"

namespace etc::onnx_import {

namespace {

// Larger constant computations are left to the graph (and the fold-constants pass).
constexpr int64_t kMaxEvalElements = int64_t{1} << 20;

// For each element of `out_shape`, the flat index of the broadcast element of `in_shape`.
std::vector<int64_t> broadcast_index(const std::vector<int64_t>& in_shape,
                                     const std::vector<int64_t>& out_shape) {
  const size_t r = out_shape.size();
  std::vector<int64_t> in_strides(r, 0);
  int64_t s = 1;
  for (size_t k = 0; k < in_shape.size(); ++k) {
    size_t i = in_shape.size() - 1 - k;
    size_t o = r - 1 - k;
    in_strides[o] = in_shape[i] == 1 ? 0 : s;
    s *= in_shape[i];
  }
  int64_t n = 1;
  for (int64_t d : out_shape)
    n *= d;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> pos(r, 0);
  int64_t cur = 0;
  for (int64_t e = 0; e < n; ++e) {
    idx[static_cast<size_t>(e)] = cur;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < out_shape[d]) {
        cur += in_strides[d];
        break;
      }
      cur -= in_strides[d] * (out_shape[d] - 1);
      pos[d] = 0;
    }
  }
  return idx;
}

// Copies the elements of `t` at `index` (flat input indices) into a new tensor.
HostTensor gather_elements(const HostTensor& t, std::vector<int64_t> shape,
                           const std::vector<int64_t>& index) {
  const int64_t es = dtype_size(t.dtype);
  std::string bytes(index.size() * static_cast<size_t>(es), '\0');
  const uint8_t* src = t.data.bytes().data();
  for (size_t i = 0; i < index.size(); ++i)
    std::memcpy(bytes.data() + i * es, src + index[i] * es, static_cast<size_t>(es));
  return make_host_tensor(t.dtype, std::move(shape), std::move(bytes));
}

HostTensor with_shape(const HostTensor& t, std::vector<int64_t> shape) {
  HostTensor r = t;
  r.shape = std::move(shape);
  return r;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

enum class Arith {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kEqual,
  kLess,
  kGreater,
  kLessEq,
  kGreaterEq,
  kMin,
  kMax,
  kAnd,
  kOr,
  kXor,
  kMod
};

Result<bool> eval_binary(NodeCtx& ctx, Arith op, bool variadic = false) {
  if (variadic && ctx.num_inputs() != 2) return false;
  const HostTensor& a = *ctx.constant(0);
  const HostTensor& b = *ctx.constant(1);
  std::optional<std::vector<int64_t>> shape = broadcast_shapes(a.shape, b.shape);
  if (!shape) {
    return ctx.invalid("shapes " + shape_to_string(a.shape) + " and " + shape_to_string(b.shape) +
                       " do not broadcast");
  }
  if (numel_of(*shape) > kMaxEvalElements) return false;
  if (a.dtype != b.dtype) {
    return ctx.invalid("inputs have different types (" + std::string(dtype_name(a.dtype)) +
                       " and " + std::string(dtype_name(b.dtype)) + ")");
  }
  std::vector<int64_t> ia = broadcast_index(a.shape, *shape), ib = broadcast_index(b.shape, *shape);
  const bool compare = op == Arith::kEqual || op == Arith::kLess || op == Arith::kGreater ||
                       op == Arith::kLessEq || op == Arith::kGreaterEq;
  const DType out_type = compare ? DType::kBool : a.dtype;
  if (dtype_is_float(a.dtype)) {
    std::vector<double> x = a.doubles(), y = b.doubles(), r(ia.size());
    for (size_t i = 0; i < r.size(); ++i) {
      double p = x[ia[i]], q = y[ib[i]];
      switch (op) {
        case Arith::kAdd:
          r[i] = p + q;
          break;
        case Arith::kSub:
          r[i] = p - q;
          break;
        case Arith::kMul:
          r[i] = p * q;
          break;
        case Arith::kDiv:
          r[i] = p / q;
          break;
        case Arith::kEqual:
          r[i] = p == q;
          break;
        case Arith::kLess:
          r[i] = p < q;
          break;
        case Arith::kGreater:
          r[i] = p > q;
          break;
        case Arith::kLessEq:
          r[i] = p <= q;
          break;
        case Arith::kGreaterEq:
          r[i] = p >= q;
          break;
        case Arith::kMin:
          r[i] = std::isnan(p) || std::isnan(q) ? NAN : std::min(p, q);
          break;
        case Arith::kMax:
          r[i] = std::isnan(p) || std::isnan(q) ? NAN : std::max(p, q);
          break;
        case Arith::kMod:
          r[i] = std::fmod(p, q);
          break;
        default:
          return false;
      }
      // Round each result to the tensor's type as ONNX Runtime would compute it.
      if (!compare && a.dtype == DType::kFloat32) r[i] = static_cast<float>(r[i]);
    }
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_doubles(out_type, *shape, r)));
    return true;
  }
  std::vector<int64_t> x = a.ints(), y = b.ints(), r(ia.size());
  for (size_t i = 0; i < r.size(); ++i) {
    int64_t p = x[ia[i]], q = y[ib[i]];
    switch (op) {
      case Arith::kAdd:
        r[i] = static_cast<int64_t>(static_cast<uint64_t>(p) + static_cast<uint64_t>(q));
        break;
      case Arith::kSub:
        r[i] = static_cast<int64_t>(static_cast<uint64_t>(p) - static_cast<uint64_t>(q));
        break;
      case Arith::kMul:
        r[i] = static_cast<int64_t>(static_cast<uint64_t>(p) * static_cast<uint64_t>(q));
        break;
      case Arith::kDiv:
        if (q == 0) return ctx.invalid("integer division by zero at export time");
        if (p == INT64_MIN && q == -1) return false;
        r[i] = p / q;
        break;
      case Arith::kMod: {
        // ONNX Mod with fmod=0 on integers takes the divisor's sign (like Python).
        if (q == 0) return ctx.invalid("integer modulo by zero at export time");
        if (p == INT64_MIN && q == -1) return false;
        int64_t m = p % q;
        if (m != 0 && ((m < 0) != (q < 0))) m += q;
        r[i] = m;
        break;
      }
      case Arith::kEqual:
        r[i] = p == q;
        break;
      case Arith::kLess:
        r[i] = p < q;
        break;
      case Arith::kGreater:
        r[i] = p > q;
        break;
      case Arith::kLessEq:
        r[i] = p <= q;
        break;
      case Arith::kGreaterEq:
        r[i] = p >= q;
        break;
      case Arith::kMin:
        r[i] = std::min(p, q);
        break;
      case Arith::kMax:
        r[i] = std::max(p, q);
        break;
      case Arith::kAnd:
        r[i] = (p != 0) && (q != 0);
        break;
      case Arith::kOr:
        r[i] = (p != 0) || (q != 0);
        break;
      case Arith::kXor:
        r[i] = (p != 0) != (q != 0);
        break;
    }
  }
  ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_ints(out_type, *shape, r)));
  return true;
}

Result<bool> eval_unary(NodeCtx& ctx, double (*fd)(double), int64_t (*fi)(int64_t)) {
  const HostTensor& a = *ctx.constant(0);
  if (dtype_is_float(a.dtype)) {
    std::vector<double> v = a.doubles();
    for (double& x : v)
      x = fd(x);
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_doubles(a.dtype, a.shape, v)));
    return true;
  }
  if (fi == nullptr) return false;
  std::vector<int64_t> v = a.ints();
  for (int64_t& x : v)
    x = fi(x);
  ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, host_from_ints(a.dtype, a.shape, v)));
  return true;
}

// Element index of a transpose: output element i reads input element idx[i].
std::vector<int64_t> transpose_index(const std::vector<int64_t>& shape,
                                     const std::vector<int64_t>& perm) {
  const size_t r = shape.size();
  std::vector<int64_t> in_strides(r, 1);
  for (size_t d = r; d-- > 1;)
    in_strides[d - 1] = in_strides[d] * shape[d];
  std::vector<int64_t> out_shape(r), strides(r);
  for (size_t d = 0; d < r; ++d) {
    out_shape[d] = shape[static_cast<size_t>(perm[d])];
    strides[d] = in_strides[static_cast<size_t>(perm[d])];
  }
  std::vector<int64_t> idx(static_cast<size_t>(numel_of(out_shape)));
  std::vector<int64_t> pos(r, 0);
  int64_t cur = 0;
  for (auto& e : idx) {
    e = cur;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < out_shape[d]) {
        cur += strides[d];
        break;
      }
      cur -= strides[d] * (out_shape[d] - 1);
      pos[d] = 0;
    }
  }
  return idx;
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

  // Everything else needs every input known.
  if (ctx.num_inputs() == 0 || !ctx.all_inputs_constant()) return false;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.constant(i)->numel() > kMaxEvalElements) return false;
  }
  if (op == "Identity" || (op == "Dropout" && !ctx.has_output(1))) {
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, *ctx.constant(0)));
    return true;
  }
  if (op == "Add") return eval_binary(ctx, Arith::kAdd);
  if (op == "Sub") return eval_binary(ctx, Arith::kSub);
  if (op == "Mul") return eval_binary(ctx, Arith::kMul);
  if (op == "Div") return eval_binary(ctx, Arith::kDiv);
  if (op == "Equal") return eval_binary(ctx, Arith::kEqual);
  if (op == "Less") return eval_binary(ctx, Arith::kLess);
  if (op == "Greater") return eval_binary(ctx, Arith::kGreater);
  if (op == "LessOrEqual") return eval_binary(ctx, Arith::kLessEq);
  if (op == "GreaterOrEqual") return eval_binary(ctx, Arith::kGreaterEq);
  if (op == "And") return eval_binary(ctx, Arith::kAnd);
  if (op == "Or") return eval_binary(ctx, Arith::kOr);
  if (op == "Xor") return eval_binary(ctx, Arith::kXor);
  if (op == "Min") return eval_binary(ctx, Arith::kMin, /*variadic=*/true);
  if (op == "Max") return eval_binary(ctx, Arith::kMax, /*variadic=*/true);
  if (op == "Mod") {
    ETC_ASSIGN_OR_RETURN(int64_t fmod, ctx.attr_int("fmod", 0));
    if (fmod == 0 && dtype_is_float(ctx.dtype(0))) return false;
    return eval_binary(ctx, Arith::kMod);
  }
  if (op == "Neg") {
    return eval_unary(
        ctx, [](double x) { return -x; }, [](int64_t x) { return -x; });
  }
  if (op == "Abs") {
    return eval_unary(
        ctx, [](double x) { return std::fabs(x); }, [](int64_t x) { return x < 0 ? -x : x; });
  }
  if (op == "Relu") {
    return eval_unary(
        ctx, [](double x) { return std::isnan(x) || x > 0 ? x : 0.0; },
        [](int64_t x) { return x > 0 ? x : int64_t{0}; });
  }
  if (op == "Floor") {
    return eval_unary(
        ctx, [](double x) { return std::floor(x); }, nullptr);
  }
  if (op == "Ceil") {
    return eval_unary(
        ctx, [](double x) { return std::ceil(x); }, nullptr);
  }
  if (op == "Not") {
    std::vector<int64_t> v = ctx.constant(0)->ints();
    for (int64_t& x : v)
      x = x == 0;
    ETC_RETURN_IF_ERROR(
        ctx.set_output_constant(0, host_from_ints(DType::kBool, ctx.constant(0)->shape, v)));
    return true;
  }
  if (op == "Cast") {
    ETC_ASSIGN_OR_RETURN(int64_t to, ctx.attr_int("to", std::nullopt));
    std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt) return ctx.unsupported("cast to " + onnx_dtype_name(static_cast<int32_t>(to)));
    const HostTensor& a = *ctx.constant(0);
    // Through double when either side is floating-point (float to int truncates), else exact.
    HostTensor r = dtype_is_float(*dt) || dtype_is_float(a.dtype)
                       ? host_from_doubles(*dt, a.shape, a.doubles())
                       : host_from_ints(*dt, a.shape, a.ints());
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, std::move(r)));
    return true;
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, view_shape(ctx));
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, with_shape(*ctx.constant(0), shape)));
    return true;
  }
  if (op == "Gather") {
    const HostTensor& data = *ctx.constant(0);
    ETC_ASSIGN_OR_RETURN(GatherPlan plan, gather_plan(ctx));
    const int64_t r = static_cast<int64_t>(data.shape.size());
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < plan.axis; ++d)
      outer *= data.shape[d];
    for (int64_t d = plan.axis + 1; d < r; ++d)
      inner *= data.shape[d];
    const int64_t axis_len = data.shape[plan.axis];
    std::vector<int64_t> index;
    index.reserve(static_cast<size_t>(outer * static_cast<int64_t>(plan.indices.size()) * inner));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k : plan.indices) {
        for (int64_t i = 0; i < inner; ++i)
          index.push_back((o * axis_len + k) * inner + i);
      }
    }
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, gather_elements(data, plan.out_shape, index)));
    return true;
  }
  if (op == "Concat") {
    ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", std::nullopt));
    std::vector<const HostTensor*> parts;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i)) parts.push_back(ctx.constant(i));
    }
    if (parts.empty()) return ctx.invalid("needs at least one input");
    const int64_t r = static_cast<int64_t>(parts[0]->shape.size());
    ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
    axis = ctx.wrap_axis(axis, r);
    std::vector<int64_t> shape = parts[0]->shape;
    shape[axis] = 0;
    for (const HostTensor* p : parts) {
      if (p->dtype != parts[0]->dtype || p->shape.size() != parts[0]->shape.size()) {
        return ctx.invalid("inputs must have one type and rank");
      }
      for (int64_t d = 0; d < r; ++d) {
        if (d != axis && p->shape[d] != parts[0]->shape[d]) {
          return ctx.invalid("input shapes " + shape_to_string(parts[0]->shape) + " and " +
                             shape_to_string(p->shape) + " differ outside axis " +
                             std::to_string(axis));
        }
      }
      shape[axis] += p->shape[axis];
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= shape[d];
    const int64_t es = dtype_size(parts[0]->dtype);
    std::string bytes;
    bytes.reserve(static_cast<size_t>(numel_of(shape) * es));
    for (int64_t o = 0; o < outer; ++o) {
      for (const HostTensor* p : parts) {
        int64_t chunk = p->numel() / std::max<int64_t>(outer, 1) * es;
        if (outer == 0) break;
        const auto* src = reinterpret_cast<const char*>(p->data.bytes().data());
        bytes.append(src + o * chunk, static_cast<size_t>(chunk));
      }
    }
    ETC_RETURN_IF_ERROR(
        ctx.set_output_constant(0, make_host_tensor(parts[0]->dtype, shape, std::move(bytes))));
    return true;
  }
  if (op == "Slice") {
    const HostTensor& data = *ctx.constant(0);
    ETC_ASSIGN_OR_RETURN(std::vector<SliceAxis> axes, slice_axes(ctx));
    std::vector<int64_t> shape = data.shape;
    const size_t r = shape.size();
    std::vector<int64_t> start(r, 0), step(r, 1);
    for (const SliceAxis& s : axes) {
      start[s.axis] = s.start;
      step[s.axis] = s.step;
      shape[s.axis] = s.length;
    }
    std::vector<int64_t> strides(r, 1);
    for (size_t d = r; d-- > 1;)
      strides[d - 1] = strides[d] * data.shape[d];
    std::vector<int64_t> index(static_cast<size_t>(numel_of(shape)));
    std::vector<int64_t> pos(r, 0);
    for (auto& e : index) {
      int64_t flat = 0;
      for (size_t d = 0; d < r; ++d)
        flat += (start[d] + pos[d] * step[d]) * strides[d];
      e = flat;
      for (size_t d = r; d-- > 0;) {
        if (++pos[d] < shape[d]) break;
        pos[d] = 0;
      }
    }
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(0, gather_elements(data, shape, index)));
    return true;
  }
  if (op == "Transpose") {
    const HostTensor& data = *ctx.constant(0);
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> perm, transpose_perm(ctx));
    std::vector<int64_t> shape(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      shape[d] = data.shape[static_cast<size_t>(perm[d])];
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(
        0, gather_elements(data, shape, transpose_index(data.shape, perm))));
    return true;
  }
  if (op == "Expand") {
    const HostTensor& data = *ctx.constant(0);
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, expand_shape(ctx));
    if (numel_of(shape) > kMaxEvalElements) return false;
    ETC_RETURN_IF_ERROR(ctx.set_output_constant(
        0, gather_elements(data, shape, broadcast_index(data.shape, shape))));
    return true;
  }
  if (op == "Where") {
    const HostTensor& c = *ctx.constant(0);
    const HostTensor& x = *ctx.constant(1);
    const HostTensor& y = *ctx.constant(2);
    auto s1 = broadcast_shapes(c.shape, x.shape);
    auto shape = s1 ? broadcast_shapes(*s1, y.shape) : std::nullopt;
    if (!shape) return ctx.invalid("input shapes do not broadcast");
    if (x.dtype != y.dtype) return ctx.invalid("X and Y must have one type");
    if (numel_of(*shape) > kMaxEvalElements) return false;
    std::vector<int64_t> ic = broadcast_index(c.shape, *shape),
                         ix = broadcast_index(x.shape, *shape),
                         iy = broadcast_index(y.shape, *shape);
    std::vector<int64_t> cond = c.ints();
    const int64_t es = dtype_size(x.dtype);
    std::string bytes(ic.size() * static_cast<size_t>(es), '\0');
    for (size_t i = 0; i < ic.size(); ++i) {
      const HostTensor& src = cond[ic[i]] ? x : y;
      int64_t at = cond[ic[i]] ? ix[i] : iy[i];
      std::memcpy(bytes.data() + i * es, src.data.bytes().data() + at * es,
                  static_cast<size_t>(es));
    }
    ETC_RETURN_IF_ERROR(
        ctx.set_output_constant(0, make_host_tensor(x.dtype, *shape, std::move(bytes))));
    return true;
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
