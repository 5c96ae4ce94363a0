#include "frontends/torch_export/known_tensor.h"

#include <cmath>
#include <cstring>

#include "graph/ops.h"

namespace etc::torch_import {

double round_to(DType dtype, double x) {
  switch (dtype) {
    case DType::kBool:
      return x != 0.0 ? 1.0 : 0.0;
    case DType::kFloat64:
      return x;
    case DType::kFloat32:
      return static_cast<double>(static_cast<float>(x));
    case DType::kFloat16:
    case DType::kBFloat16: {
      uint8_t buf[2];
      store_float_as(dtype, x, buf);
      return load_as_double(dtype, buf);
    }
    default: {
      if (!std::isfinite(x)) return 0.0;
      const double t = std::trunc(x);
      if (t >= 9.2e18 || t <= -9.2e18) return 0.0;
      uint8_t buf[8];  // the integer wrapped to the dtype as a cast would
      store_int_as(dtype, static_cast<int64_t>(t), buf);
      return static_cast<double>(load_as_int64(dtype, buf));
    }
  }
}

std::optional<int64_t> known_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > kMaxKnownElements / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string KnownTensor::bytes() const {
  int64_t es = dtype_size(dtype);
  std::string out(v.size() * static_cast<size_t>(es), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    void* p = out.data() + i * es;
    const double x = round_to(dtype, v[i]);
    if (dtype_is_float(dtype)) {
      store_float_as(dtype, x, p);
    } else {
      store_int_as(dtype, static_cast<int64_t>(x), p);  // exact: round_to made it an integer
    }
  }
  return out;
}

KnownTensor known_from_constant(const TensorSpec& spec) {
  KnownTensor t{spec.dtype, spec.sizes, {}};
  const std::span<const uint8_t> bytes = spec.constant.bytes();
  const auto size = static_cast<size_t>(dtype_size(spec.dtype));
  t.v.reserve(bytes.size() / size);
  for (size_t at = 0; at + size <= bytes.size(); at += size) {
    t.v.push_back(dtype_is_float(spec.dtype)
                      ? load_as_double(spec.dtype, bytes.data() + at)
                      : static_cast<double>(load_as_int64(spec.dtype, bytes.data() + at)));
  }
  return t;
}

KnownTensor known_full(DType dtype, std::vector<int64_t> shape, double value) {
  KnownTensor t{dtype, std::move(shape), {}};
  t.v.assign(static_cast<size_t>(*known_numel(t.shape)), round_to(dtype, value));
  return t;
}

}  // namespace etc::torch_import
