#include "graph/dtype.h"

#include <cmath>
#include <cstdint>
#include <optional>

#include <cstring>
#include <string>

#include "support/half.h"

namespace etc {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  int8_t scalar_type;
  int64_t size;
  DTypeKind kind;
  std::string_view safetensors;
};

constexpr std::string_view safetensors_name(DType t) {
  switch (t) {
    case DType::kUInt8:
      return "U8";
    case DType::kInt8:
      return "I8";
    case DType::kInt16:
      return "I16";
    case DType::kInt32:
      return "I32";
    case DType::kInt64:
      return "I64";
    case DType::kFloat16:
      return "F16";
    case DType::kFloat32:
      return "F32";
    case DType::kFloat64:
      return "F64";
    case DType::kBool:
      return "BOOL";
    case DType::kBFloat16:
      return "BF16";
  }
  return "";
}

constexpr DTypeInfo kInfos[] = {
#define ETC_DTYPE(e, name, st, bytes, kind) \
  {DType::e, name, st, bytes, DTypeKind::kind, safetensors_name(DType::e)},
#include "graph/dtypes.def"
#undef ETC_DTYPE
};

const DTypeInfo& info(DType t) {
  return kInfos[static_cast<size_t>(t)];
}

// Integer rank for promotion among integers: the result of promoting two integer types
// is computed from (signedness, width).
bool is_unsigned(DType t) {
  return t == DType::kUInt8;
}

}  // namespace

std::string_view dtype_name(DType t) {
  return info(t).name;
}
int64_t dtype_size(DType t) {
  return info(t).size;
}
DTypeKind dtype_kind(DType t) {
  return info(t).kind;
}
int8_t dtype_to_scalar_type(DType t) {
  return info(t).scalar_type;
}
std::string_view dtype_safetensors_name(DType t) {
  return info(t).safetensors;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const DTypeInfo& i : kInfos) {
    if (i.name == name) return i.dtype;
  }
  return std::nullopt;
}

std::string_view dtype_names() {
  static const std::string kNames = [] {
    std::string s;
    for (const DTypeInfo& i : kInfos) {
      if (!s.empty()) s += ", ";
      s += i.name;
    }
    return s;
  }();
  return kNames;
}

std::optional<DType> dtype_from_scalar_type(int scalar_type) {
  for (const DTypeInfo& i : kInfos) {
    if (i.scalar_type == scalar_type) return i.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const DTypeInfo& i : kInfos) {
    if (i.safetensors == name) return i.dtype;
  }
  return std::nullopt;
}

namespace {

// One element of type T at p (any alignment).
template <typename T>
T load_raw(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

double load_as_double(DType t, const void* p) {
  auto load = [p](auto zero) { return load_raw<decltype(zero)>(p); };
  switch (t) {
    case DType::kUInt8:
      return load(uint8_t{});
    case DType::kInt8:
      return load(int8_t{});
    case DType::kInt16:
      return load(int16_t{});
    case DType::kInt32:
      return load(int32_t{});
    case DType::kInt64:
      return static_cast<double>(load(int64_t{}));
    case DType::kFloat16:
      return half_to_float(load(uint16_t{}));
    case DType::kFloat32:
      return load(float{});
    case DType::kFloat64:
      return load(double{});
    case DType::kBool:
      return load(uint8_t{}) != 0 ? 1.0 : 0.0;
    case DType::kBFloat16:
      return bfloat16_to_float(load(uint16_t{}));
  }
  return 0;
}

void store_float_as(DType t, double v, void* p) {
  switch (t) {
    case DType::kFloat16: {
      uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kBFloat16: {
      uint16_t h = float_to_bfloat16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kFloat32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    default:
      std::memcpy(p, &v, 8);
  }
}

int64_t load_as_int64(DType t, const void* p) {
  auto load = [p](auto zero) { return static_cast<int64_t>(load_raw<decltype(zero)>(p)); };
  switch (t) {
    case DType::kUInt8:
      return load(uint8_t{});
    case DType::kInt8:
      return load(int8_t{});
    case DType::kInt16:
      return load(int16_t{});
    case DType::kInt32:
      return load(int32_t{});
    case DType::kInt64:
      return load(int64_t{});
    case DType::kBool:
      return load(uint8_t{}) != 0 ? 1 : 0;
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      break;
  }
  const double d = load_as_double(t, p);
  if (!std::isfinite(d)) return 0;
  if (d >= 9.2e18) return INT64_MAX;
  if (d <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(d);
}

void store_int_as(DType t, int64_t v, void* p) {
  auto store = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DType::kUInt8:
      return store(static_cast<uint8_t>(v));
    case DType::kInt8:
      return store(static_cast<int8_t>(v));
    case DType::kInt16:
      return store(static_cast<int16_t>(v));
    case DType::kInt32:
      return store(static_cast<int32_t>(v));
    case DType::kInt64:
      return store(v);
    case DType::kBool:
      return store(static_cast<uint8_t>(v != 0 ? 1 : 0));
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      break;
  }
  store_float_as(t, static_cast<double>(v), p);
}

void convert_element(DType from, const void* in, DType to, void* out) {
  if (!dtype_is_float(from)) {
    const int64_t v = load_as_int64(from, in);
    if (dtype_is_float(to)) {
      store_float_as(to, static_cast<double>(v), out);
    } else {
      store_int_as(to, v, out);
    }
    return;
  }
  const double v = load_as_double(from, in);
  if (dtype_is_float(to)) {
    store_float_as(to, v, out);
  } else if (to == DType::kBool) {
    store_int_as(to, v != 0 ? 1 : 0, out);
  } else if (std::isnan(v)) {
    store_int_as(to, 0, out);
  } else {
    // Beyond int64: x86's "integer indefinite", what the cast compiles to there (a C++ cast
    // would be undefined).
    const double t = std::trunc(v);
    store_int_as(to,
                 t >= -9223372036854775808.0 && t < 9223372036854775808.0 ? static_cast<int64_t>(t)
                                                                          : INT64_MIN,
                 out);
  }
}

namespace {

// ATen's combine_categories: how a lower-priority operand group (zero-dim tensors, then
// numbers) can still change the result type of the higher-priority one.
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (dtype_is_float(*higher)) return higher;
  if (*higher == DType::kBool || dtype_is_float(*lower)) return promote_types(*higher, *lower);
  return higher;
}

}  // namespace

DType result_type(std::span<const TypeOperand> operands) {
  std::optional<DType> group[3];
  for (const TypeOperand& o : operands) {
    std::optional<DType>& g = group[static_cast<size_t>(o.rank)];
    g = g ? promote_types(*g, o.dtype) : o.dtype;
  }
  return combine_categories(group[0], combine_categories(group[1], group[2]))
      .value_or(DType::kFloat32);
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  DTypeKind ka = dtype_kind(a), kb = dtype_kind(b);
  if (ka != kb) return ka > kb ? a : b;  // bool < int < float
  if (ka == DTypeKind::kFloat) {
    bool half_pair = (a == DType::kFloat16 && b == DType::kBFloat16) ||
                     (a == DType::kBFloat16 && b == DType::kFloat16);
    if (half_pair) return DType::kFloat32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // Integers: mixing uint8 with a signed type needs a signed type wider than 8 bits.
  if (is_unsigned(a) || is_unsigned(b)) {
    DType s = is_unsigned(a) ? b : a;
    return dtype_size(s) > 1 ? s : DType::kInt16;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

}  // namespace etc
