#include "runtime/tensor.h"

#include "graph/tensor_spec.h"

namespace etc::rt {

std::string TensorView::describe() const {
  return std::string(dtype_name(dtype)) + shape_to_string(sizes) + " " + to_string(device);
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;)
    s[i - 1] = s[i] * std::max<int64_t>(sizes[i], 1);
  return s;
}

double Value::scalar_as_double() const {
  switch (kind) {
    case Kind::kInt:
      return static_cast<double>(i);
    case Kind::kBool:
      return b ? 1.0 : 0.0;
    default:
      return d;
  }
}

int64_t Value::scalar_as_int() const {
  switch (kind) {
    case Kind::kDouble:
      return static_cast<int64_t>(d);
    case Kind::kBool:
      return b ? 1 : 0;
    default:
      return i;
  }
}

const char* value_kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kInt:
      return "Int";
    case Value::Kind::kDouble:
      return "Double";
    case Value::Kind::kBool:
      return "Bool";
    case Value::Kind::kString:
      return "String";
    case Value::Kind::kIntList:
      return "IntList";
    case Value::Kind::kDoubleList:
      return "DoubleList";
    case Value::Kind::kBoolList:
      return "BoolList";
    case Value::Kind::kTensor:
      return "Tensor";
    case Value::Kind::kTensorList:
      return "TensorList";
    case Value::Kind::kOptionalTensorList:
      return "OptionalTensorList";
  }
  return "?";
}

}  // namespace etc::rt
