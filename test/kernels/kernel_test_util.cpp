#include "kernels/kernel_test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "support/half.h"

namespace etc::rt::test {

const OperatorRegistry& cpu_registry() {
  static const OperatorRegistry registry = [] {
    OperatorRegistry r;
    Status s = register_cpu_kernels(r);
    if (!s.ok()) FAIL("register_cpu_kernels: " << s.to_string());
    return r;
  }();
  return registry;
}

Value* Call::add(Value v) {
  values_.push_back(std::move(v));
  return &values_.back();
}

namespace {

void store(DType dtype, void* p, int64_t i, double v) {
  switch (dtype) {
    case DType::kUInt8:
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(cast_to(dtype, v));
      break;
    case DType::kInt8:
      static_cast<int8_t*>(p)[i] = static_cast<int8_t>(cast_to(dtype, v));
      break;
    case DType::kInt16:
      static_cast<int16_t*>(p)[i] = static_cast<int16_t>(cast_to(dtype, v));
      break;
    case DType::kInt32:
      static_cast<int32_t*>(p)[i] = static_cast<int32_t>(cast_to(dtype, v));
      break;
    case DType::kInt64:
      static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DType::kFloat16:
      static_cast<uint16_t*>(p)[i] = float_to_half(static_cast<float>(v));
      break;
    case DType::kFloat32:
      static_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DType::kFloat64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::kBool:
      static_cast<bool*>(p)[i] = v != 0;
      break;
    case DType::kBFloat16:
      static_cast<uint16_t*>(p)[i] = float_to_bfloat16(static_cast<float>(v));
      break;
  }
}

double load(DType dtype, const void* p, int64_t i) {
  switch (dtype) {
    case DType::kUInt8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::kInt8:
      return static_cast<const int8_t*>(p)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(p)[i];
    case DType::kInt32:
      return static_cast<const int32_t*>(p)[i];
    case DType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DType::kFloat16:
      return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kFloat32:
      return static_cast<const float*>(p)[i];
    case DType::kFloat64:
      return static_cast<const double*>(p)[i];
    case DType::kBool:
      return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0 : 0.0;
    case DType::kBFloat16:
      return bfloat16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}

Value tensor_value(DType dtype, const Sizes& sizes, void* data) {
  Value v;
  v.kind = Value::Kind::kTensor;
  v.tensor.dtype = dtype;
  v.tensor.sizes = sizes;
  v.tensor.data = data;
  return v;
}

}  // namespace

Value* Call::tensor(DType dtype, const Sizes& sizes, const std::vector<double>& data) {
  REQUIRE(static_cast<int64_t>(data.size()) == numel(sizes));
  const int64_t bytes = numel(sizes) * dtype_size(dtype);
  storage_.emplace_back(static_cast<size_t>(bytes + 7) / 8 + 1);
  void* p = storage_.back().data();
  for (size_t i = 0; i < data.size(); ++i)
    store(dtype, p, static_cast<int64_t>(i), data[i]);
  return add(tensor_value(dtype, sizes, p));
}

Value* Call::random(DType dtype, const Sizes& sizes, uint32_t seed, double lo, double hi) {
  std::vector<double> v = random_values(static_cast<size_t>(numel(sizes)), seed, lo, hi);
  if (!dtype_is_float(dtype)) {
    for (double& x : v)
      x = dtype == DType::kBool ? (x > (lo + hi) / 2 ? 1 : 0) : std::round(x);
  }
  return tensor(dtype, sizes, v);
}

Value* Call::out(DType dtype, const Sizes& sizes) {
  const int64_t bytes = numel(sizes) * dtype_size(dtype);
  storage_.emplace_back(static_cast<size_t>(bytes + 7) / 8 + 1, 0x7ff4a5a5a5a5a5a5ull);
  // For bool, a garbage byte would be undefined behaviour to read: use 0x01 there.
  if (dtype == DType::kBool) std::memset(storage_.back().data(), 1, static_cast<size_t>(bytes));
  return add(tensor_value(dtype, sizes, storage_.back().data()));
}

Value* Call::i(int64_t v) {
  Value x;
  x.kind = Value::Kind::kInt;
  x.i = v;
  return add(std::move(x));
}
Value* Call::d(double v) {
  Value x;
  x.kind = Value::Kind::kDouble;
  x.d = v;
  return add(std::move(x));
}
Value* Call::b(bool v) {
  Value x;
  x.kind = Value::Kind::kBool;
  x.b = v;
  return add(std::move(x));
}
Value* Call::none() {
  return add(Value{});
}
Value* Call::ints(const std::vector<int64_t>& v) {
  Value x;
  x.kind = Value::Kind::kIntList;
  x.ints = v;
  return add(std::move(x));
}
Value* Call::doubles(const std::vector<double>& v) {
  Value x;
  x.kind = Value::Kind::kDoubleList;
  x.doubles = v;
  return add(std::move(x));
}
Value* Call::str(const std::string& s) {
  Value x;
  x.kind = Value::Kind::kString;
  x.s = s;
  return add(std::move(x));
}
Value* Call::dtype(DType t) {
  return i(dtype_to_scalar_type(t));
}
Value* Call::list(std::initializer_list<Value*> tensors) {
  Value x;
  x.kind = Value::Kind::kTensorList;
  for (Value* t : tensors)
    x.tensors.push_back(&t->tensor);
  return add(std::move(x));
}

Value* Call::opt_list(std::initializer_list<Value*> tensors) {
  Value x;
  x.kind = Value::Kind::kOptionalTensorList;
  for (Value* t : tensors)
    x.tensors.push_back(t == nullptr ? nullptr : &t->tensor);
  return add(std::move(x));
}

Status Call::run(std::initializer_list<Value*> inputs, std::initializer_list<Value*> outs) {
  return run(std::vector<Value*>(inputs), outs);
}

Status Call::run(const std::vector<Value*>& inputs, std::initializer_list<Value*> outs) {
  std::vector<Value*> args(inputs);
  args.insert(args.end(), outs.begin(), outs.end());
  if (outs.size() == 1) {
    args.push_back(*outs.begin());
  } else {
    Value ret;
    ret.kind = Value::Kind::kTensorList;
    for (Value* o : outs)
      ret.tensors.push_back(&o->tensor);
    args.push_back(add(std::move(ret)));
  }
  return run_raw(std::move(args));
}

Status Call::run_raw(std::vector<Value*> args) {
  const RegisteredKernel* kernel = cpu_registry().find(op_);
  INFO("op " << op_);
  REQUIRE(kernel != nullptr);
  KernelFn fn = kernel->fn;
  KernelContext ctx{op_};
  ctx.schema = kernel->call_schema();
  ctx.epilogue = epilogue_;
  ctx.channels_last_args = channels_last_args_;
  ctx.instruction = instruction_;
  if (keep_state_) {
    ctx.state = &state_;
    ctx.constant_args = constant_args_;
  }
  return fn(ctx, args);
}

std::vector<double> read(const Value* v) {
  const TensorView& t = v->tensor;
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = load(t.dtype, t.data, static_cast<int64_t>(i));
  return out;
}

int64_t numel(const Sizes& s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

Sizes unravel(int64_t flat, const Sizes& sizes) {
  Sizes idx(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    idx[d] = flat % sizes[d];
    flat /= sizes[d];
  }
  return idx;
}

int64_t broadcast_index(const Sizes& index, const Sizes& in_sizes) {
  const size_t lead = index.size() - in_sizes.size();
  int64_t flat = 0;
  for (size_t d = 0; d < in_sizes.size(); ++d) {
    flat = flat * in_sizes[d] + (in_sizes[d] == 1 ? 0 : index[lead + d]);
  }
  return flat;
}

double cast_to(DType dtype, double v) {
  if (dtype == DType::kFloat16) return half_to_float(float_to_half(static_cast<float>(v)));
  if (dtype == DType::kBFloat16) return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
  if (dtype == DType::kFloat32) return static_cast<float>(v);
  if (dtype_is_float(dtype)) return v;
  if (dtype == DType::kBool) return v != 0 ? 1 : 0;
  if (std::isnan(v)) return 0;
  auto t = static_cast<int64_t>(v);  // truncation toward zero
  switch (dtype) {
    case DType::kUInt8:
      return static_cast<uint8_t>(t);
    case DType::kInt8:
      return static_cast<int8_t>(t);
    case DType::kInt16:
      return static_cast<int16_t>(t);
    case DType::kInt32:
      return static_cast<int32_t>(t);
    default:
      return static_cast<double>(t);
  }
}

std::vector<double> random_values(size_t n, uint32_t seed, double lo, double hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v)
    x = dist(gen);
  return v;
}

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {2e-6, 1e-6};
    case DType::kFloat64:
      return {1e-12, 1e-12};
    case DType::kFloat16:
      return {1e-3, 1e-4};
    case DType::kBFloat16:
      return {8e-3, 1e-3};
    default:
      return {0, 0};
  }
}

bool same_bits(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) {
    UNSCOPED_INFO("sizes " << got.size() << " and " << want.size());
    return false;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::memcmp(&got[i], &want[i], sizeof(double)) != 0) {
      UNSCOPED_INFO("first difference at " << i << ": " << got[i] << " and " << want[i]);
      return false;
    }
  }
  return true;
}

void require_close(const std::vector<double>& got, const std::vector<double>& want, Tolerance tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w) || std::isnan(g)) {
      ok = std::isnan(w) && std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      ok = g == w;
    } else {
      ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
    }
    if (!ok) {
      std::ostringstream msg;
      msg << "element " << i << " of " << got.size() << ": got " << g << ", want " << w << " (rtol "
          << tol.rtol << ", atol " << tol.atol << ")";
      FAIL(msg.str());
    }
  }
}

}  // namespace etc::rt::test
