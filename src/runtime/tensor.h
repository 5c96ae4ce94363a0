// Runtime tensors and values: non-owning views over memory the runtime manages (planned
// arenas, constants in the mapped file, caller-bound inputs). Kernels read and write
// through them; they never allocate or free.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/device.h"
#include "graph/dtype.h"

namespace etc::rt {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  Device device;
  // A dynamic-bound tensor (ExecuTorch's DYNAMIC_BOUND): the bytes its memory holds, up to
  // which a kernel may resize it (same rank, any sizes). -1: static, its sizes are fixed.
  int64_t capacity = -1;

  size_t rank() const { return sizes.size(); }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes)
      n *= s;
    return n;
  }
  int64_t nbytes() const { return numel() * dtype_size(dtype); }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }
  // "float32[2, 3] cpu"
  std::string describe() const;
};

// Contiguous (row-major) strides in elements.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> sizes);

// One entry of a method's value table, as ExecuTorch's EValue. Lists of tensors point at
// other entries of the same table.
struct Value {
  enum class Kind : uint8_t {
    kNone,
    kInt,
    kDouble,
    kBool,
    kString,
    kIntList,
    kDoubleList,
    kBoolList,
    kTensor,
    kTensorList,
    kOptionalTensorList,
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> doubles;
  std::vector<bool> bools;
  TensorView tensor;
  std::vector<TensorView*> tensors;  // kTensorList; kOptionalTensorList uses nullptr for None

  bool is_tensor() const { return kind == Kind::kTensor; }
  bool is_none() const { return kind == Kind::kNone; }
  // A Scalar argument (Int, Double or Bool) as double / as int64.
  double scalar_as_double() const;
  int64_t scalar_as_int() const;
  bool is_scalar() const {
    return kind == Kind::kInt || kind == Kind::kDouble || kind == Kind::kBool;
  }
};

const char* value_kind_name(Value::Kind k);

}  // namespace etc::rt
