#include "frontends/torch_export/known_tensor.h"

#include <cmath>
#include <cstring>

#include "graph/ops.h"

namespace etc::torch_import {

namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

// Calls f(out_index, in_index) for every element of `out_shape`, where the input (of
// `in_shape`, right-aligned, broadcast) index follows the output's.
template <typename F>
void for_each_broadcast(const std::vector<int64_t>& out_shape, const std::vector<int64_t>& in_shape,
                        F&& f) {
  size_t rank = out_shape.size();
  std::vector<int64_t> in_strides(rank, 0);
  std::vector<int64_t> dense = strides_of(in_shape);
  for (size_t i = 0; i < in_shape.size(); ++i) {
    size_t o = rank - in_shape.size() + i;
    in_strides[o] = in_shape[i] == 1 ? 0 : dense[i];
  }
  int64_t n = 1;
  for (int64_t d : out_shape)
    n *= d;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t in = 0;
    for (size_t d = 0; d < rank; ++d)
      in += idx[d] * in_strides[d];
    f(k, in);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < out_shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

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

KnownTensor known_full(DType dtype, std::vector<int64_t> shape, double value) {
  KnownTensor t{dtype, std::move(shape), {}};
  t.v.assign(static_cast<size_t>(*known_numel(t.shape)), round_to(dtype, value));
  return t;
}

std::optional<KnownTensor> known_binary(const KnownTensor& a, const KnownTensor& b, DType out,
                                        const std::function<double(double, double)>& f) {
  auto shape = broadcast_shapes(a.shape, b.shape);
  if (!shape || !known_numel(*shape)) return std::nullopt;
  KnownTensor r{out, *shape, std::vector<double>(static_cast<size_t>(*known_numel(*shape)))};
  std::vector<int64_t> ia(r.v.size()), ib(r.v.size());
  for_each_broadcast(r.shape, a.shape, [&](int64_t k, int64_t i) { ia[k] = i; });
  for_each_broadcast(r.shape, b.shape, [&](int64_t k, int64_t i) { ib[k] = i; });
  for (size_t k = 0; k < r.v.size(); ++k)
    r.v[k] = round_to(out, f(a.v[ia[k]], b.v[ib[k]]));
  return r;
}

KnownTensor known_unary(const KnownTensor& a, DType out, const std::function<double(double)>& f) {
  KnownTensor r{out, a.shape, a.v};
  for (double& x : r.v)
    x = round_to(out, f(x));
  return r;
}

std::optional<KnownTensor> known_where(const KnownTensor& c, const KnownTensor& a,
                                       const KnownTensor& b, DType out) {
  auto ab = broadcast_shapes(a.shape, b.shape);
  if (!ab) return std::nullopt;
  auto shape = broadcast_shapes(c.shape, *ab);
  if (!shape || !known_numel(*shape)) return std::nullopt;
  KnownTensor r{out, *shape, std::vector<double>(static_cast<size_t>(*known_numel(*shape)))};
  std::vector<int64_t> ic(r.v.size()), ia(r.v.size()), ib(r.v.size());
  for_each_broadcast(r.shape, c.shape, [&](int64_t k, int64_t i) { ic[k] = i; });
  for_each_broadcast(r.shape, a.shape, [&](int64_t k, int64_t i) { ia[k] = i; });
  for_each_broadcast(r.shape, b.shape, [&](int64_t k, int64_t i) { ib[k] = i; });
  for (size_t k = 0; k < r.v.size(); ++k)
    r.v[k] = round_to(out, c.v[ic[k]] != 0.0 ? a.v[ia[k]] : b.v[ib[k]]);
  return r;
}

KnownTensor known_reshape(const KnownTensor& a, std::vector<int64_t> shape) {
  return KnownTensor{a.dtype, std::move(shape), a.v};
}

KnownTensor known_permute(const KnownTensor& a, const std::vector<int64_t>& dims) {
  std::vector<int64_t> shape(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    shape[i] = a.shape[dims[i]];
  std::vector<int64_t> in_strides = strides_of(a.shape);
  KnownTensor r{a.dtype, shape, std::vector<double>(a.v.size())};
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t k = 0; k < r.v.size(); ++k) {
    int64_t in = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      in += idx[d] * in_strides[dims[d]];
    r.v[k] = a.v[in];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return r;
}

KnownTensor known_expand(const KnownTensor& a, const std::vector<int64_t>& shape) {
  KnownTensor r{a.dtype, shape, std::vector<double>(static_cast<size_t>(*known_numel(shape)))};
  for_each_broadcast(r.shape, a.shape, [&](int64_t k, int64_t i) { r.v[k] = a.v[i]; });
  return r;
}

KnownTensor known_slice(const KnownTensor& a, int64_t dim, int64_t start, int64_t end,
                        int64_t step) {
  std::vector<int64_t> shape = a.shape;
  shape[dim] = end > start ? (end - start + step - 1) / step : 0;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= a.shape[d];
  for (size_t d = dim + 1; d < a.shape.size(); ++d)
    inner *= a.shape[d];
  KnownTensor r{a.dtype, shape, {}};
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < shape[dim]; ++j) {
      for (int64_t i = 0; i < inner; ++i)
        r.v.push_back(a.v[(o * a.shape[dim] + start + j * step) * inner + i]);
    }
  }
  return r;
}

KnownTensor known_cat(const std::vector<const KnownTensor*>& parts, int64_t dim) {
  std::vector<int64_t> shape = parts[0]->shape;
  shape[dim] = 0;
  for (const KnownTensor* p : parts)
    shape[dim] += p->shape[dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  KnownTensor r{parts[0]->dtype, shape, {}};
  for (int64_t o = 0; o < outer; ++o) {
    for (const KnownTensor* p : parts) {
      int64_t n = p->shape[dim] * inner;
      r.v.insert(r.v.end(), p->v.begin() + o * n, p->v.begin() + (o + 1) * n);
    }
  }
  return r;
}

}  // namespace etc::torch_import
