#include "frontends/onnx/host_tensor.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "support/checked_math.h"
#include "support/file_io.h"

namespace etc::onnx_import {

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> HostTensor::ints() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  const uint8_t* p = data.bytes().data();
  const int64_t es = dtype_size(dtype);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = load_as_int64(dtype, p + static_cast<int64_t>(i) * es);
  return out;
}

std::vector<double> HostTensor::doubles() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  const uint8_t* p = data.bytes().data();
  const int64_t es = dtype_size(dtype);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = dtype_is_float(dtype) ? load_as_double(dtype, p + static_cast<int64_t>(i) * es)
                                   : static_cast<double>(load_as_int64(dtype, p + i * es));
  }
  return out;
}

TensorSpec HostTensor::spec() const {
  TensorSpec s = TensorSpec::make(dtype, shape);
  s.is_const = true;
  s.constant = data;
  return s;
}

HostTensor make_host_tensor(DType dtype, std::vector<int64_t> shape, std::string bytes) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const size_t n = bytes.size();
  t.data = ConstantData{make_blob(std::move(bytes)), 0, n};
  return t;
}

HostTensor host_from_ints(DType dtype, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  const int64_t es = dtype_size(dtype);
  std::string bytes(v.size() * static_cast<size_t>(es), '\0');
  auto* p = reinterpret_cast<uint8_t*>(bytes.data());
  for (size_t i = 0; i < v.size(); ++i)
    store_int_as(dtype, v[i], p + static_cast<int64_t>(i) * es);
  return make_host_tensor(dtype, std::move(shape), std::move(bytes));
}

HostTensor host_from_doubles(DType dtype, std::vector<int64_t> shape,
                             const std::vector<double>& v) {
  const int64_t es = dtype_size(dtype);
  std::string bytes(v.size() * static_cast<size_t>(es), '\0');
  auto* p = reinterpret_cast<uint8_t*>(bytes.data());
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype_is_float(dtype)) {
      store_float_as(dtype, v[i], p + static_cast<int64_t>(i) * es);
    } else {
      double d = std::isfinite(v[i]) ? std::trunc(v[i]) : 0.0;
      store_int_as(dtype, static_cast<int64_t>(std::clamp(d, -9.2e18, 9.2e18)),
                   p + static_cast<int64_t>(i) * es);
    }
  }
  return make_host_tensor(dtype, std::move(shape), std::move(bytes));
}

std::optional<DType> dtype_from_onnx(int32_t data_type) {
  switch (data_type) {
    case onnx::TensorProto::FLOAT:
      return DType::kFloat32;
    case onnx::TensorProto::UINT8:
      return DType::kUInt8;
    case onnx::TensorProto::INT8:
      return DType::kInt8;
    case onnx::TensorProto::INT16:
      return DType::kInt16;
    case onnx::TensorProto::INT32:
      return DType::kInt32;
    case onnx::TensorProto::INT64:
      return DType::kInt64;
    case onnx::TensorProto::BOOL:
      return DType::kBool;
    case onnx::TensorProto::FLOAT16:
      return DType::kFloat16;
    case onnx::TensorProto::DOUBLE:
      return DType::kFloat64;
    case onnx::TensorProto::BFLOAT16:
      return DType::kBFloat16;
    default:
      return std::nullopt;
  }
}

std::string onnx_dtype_name(int32_t data_type) {
  if (onnx::TensorProto_DataType_IsValid(data_type)) {
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type));
  }
  return "data type " + std::to_string(data_type);
}

namespace {

Status tensor_error(const Location& where, const std::string& name, const std::string& msg) {
  return invalid_input("tensor '" + name + "': " + msg, where);
}

// External data: {location, offset, length} relative to the model's folder.
Result<ConstantData> external_data(const onnx::TensorProto& t, const std::string& base_dir,
                                   const Location& where, int64_t nbytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    auto parse = [&](int64_t* out) -> Status {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(kv.value().c_str(), &end, 10);
      if (kv.value().empty() || *end != '\0' || errno != 0 || v < 0) {
        return tensor_error(where, t.name(),
                            "external_data '" + kv.key() +
                                "' must be a non-negative integer, got '" + kv.value() + "'");
      }
      *out = v;
      return Status();
    };
    if (kv.key() == "location") {
      location = kv.value();
    } else if (kv.key() == "offset") {
      ETC_RETURN_IF_ERROR(parse(&offset));
    } else if (kv.key() == "length") {
      ETC_RETURN_IF_ERROR(parse(&length));
    }
  }
  if (location.empty()) return tensor_error(where, t.name(), "external data without a 'location'");
  std::filesystem::path rel(location);
  if (rel.is_absolute()) {
    return tensor_error(where, t.name(),
                        "external data location '" + location + "' must be relative to the model");
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return tensor_error(where, t.name(),
                          "external data location '" + location + "' leaves the model's folder");
    }
  }
  std::string path = (std::filesystem::path(base_dir) / rel).string();
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  const auto size = static_cast<int64_t>(blob->bytes().size());
  if (length < 0) length = size - std::min(offset, size);
  if (length != nbytes) {
    return tensor_error(where, t.name(),
                        "external data has " + std::to_string(length) + " bytes, expected " +
                            std::to_string(nbytes));
  }
  if (offset > size || size - offset < length) {
    return tensor_error(where, t.name(),
                        "external data [" + std::to_string(offset) + ", " +
                            std::to_string(offset + length) + ") lies outside '" + path + "' (" +
                            std::to_string(size) + " bytes)");
  }
  return ConstantData{std::move(blob), static_cast<size_t>(offset), static_cast<size_t>(length)};
}

template <typename Field, typename Store>
Status typed_values(const Field& field, int64_t numel, const std::string& field_name,
                    const onnx::TensorProto& t, const Location& where, Store store) {
  if (static_cast<int64_t>(field.size()) != numel) {
    return tensor_error(
        where, t.name(),
        field_name + " has " + std::to_string(field.size()) + " values, shape " +
            shape_to_string(std::vector<int64_t>(t.dims().begin(), t.dims().end())) + " needs " +
            std::to_string(numel));
  }
  for (int i = 0; i < field.size(); ++i)
    store(static_cast<size_t>(i), field.Get(i));
  return Status();
}

}  // namespace

Result<HostTensor> decode_tensor(onnx::TensorProto& t, const std::string& base_dir,
                                 const Location& where) {
  std::optional<DType> dtype = dtype_from_onnx(t.data_type());
  if (!dtype) {
    return unsupported("tensor '" + t.name() + "' has type " + onnx_dtype_name(t.data_type()) +
                           ", which etc does not support",
                       where);
  }
  std::vector<int64_t> shape;
  for (int64_t d : t.dims()) {
    if (d < 0) return tensor_error(where, t.name(), "negative dim " + std::to_string(d));
    shape.push_back(d);
  }
  std::optional<int64_t> numel = checked_numel(shape);
  const int64_t es = dtype_size(*dtype);
  if (!numel || !checked_mul(*numel, es) || *numel * es > (int64_t{1} << 40)) {
    return tensor_error(where, t.name(), "shape " + shape_to_string(shape) + " is too large");
  }
  const int64_t nbytes = *numel * es;
  HostTensor out;
  out.dtype = *dtype;
  out.shape = shape;
  if (t.has_data_location() && t.data_location() == onnx::TensorProto::EXTERNAL) {
    ETC_ASSIGN_OR_RETURN(out.data, external_data(t, base_dir, where, nbytes));
    return out;
  }
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != nbytes) {
      return tensor_error(where, t.name(),
                          "raw_data has " + std::to_string(t.raw_data().size()) + " bytes, " +
                              std::string(dtype_name(*dtype)) + shape_to_string(shape) + " needs " +
                              std::to_string(nbytes));
    }
    std::string bytes = std::move(*t.mutable_raw_data());
    return make_host_tensor(*dtype, std::move(shape), std::move(bytes));
  }
  std::string bytes(static_cast<size_t>(nbytes), '\0');
  auto* p = reinterpret_cast<uint8_t*>(bytes.data());
  Status s;
  switch (*dtype) {
    case DType::kFloat32:
      s = typed_values(t.float_data(), *numel, "float_data", t, where,
                       [&](size_t i, float v) { std::memcpy(p + i * 4, &v, 4); });
      break;
    case DType::kFloat64:
      s = typed_values(t.double_data(), *numel, "double_data", t, where,
                       [&](size_t i, double v) { std::memcpy(p + i * 8, &v, 8); });
      break;
    case DType::kInt64:
      s = typed_values(t.int64_data(), *numel, "int64_data", t, where,
                       [&](size_t i, int64_t v) { std::memcpy(p + i * 8, &v, 8); });
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      // Stored as the 16-bit patterns in int32_data.
      s = typed_values(t.int32_data(), *numel, "int32_data", t, where, [&](size_t i, int32_t v) {
        auto bits = static_cast<uint16_t>(v);
        std::memcpy(p + i * 2, &bits, 2);
      });
      break;
    default:
      s = typed_values(t.int32_data(), *numel, "int32_data", t, where,
                       [&](size_t i, int32_t v) { store_int_as(*dtype, v, p + i * es); });
      break;
  }
  ETC_RETURN_IF_ERROR(s);
  return make_host_tensor(*dtype, std::move(shape), std::move(bytes));
}

}  // namespace etc::onnx_import
