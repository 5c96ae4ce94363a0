// TensorSpec: everything the compiler knows about one tensor value — element type, shape,
// layout, constness and constant bytes, the device it lives on, and where memory planning
// put it. The fields mirror ExecuTorch's exir TensorSpec and map one-to-one onto the .pte
// schema's Tensor table (see docs/pte-format.md when the serializer lands).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/device.h"
#include "graph/dtype.h"
#include "support/file_io.h"

namespace etc {

// ExecuTorch's TensorShapeDynamism (program.fbs); the numbers are the wire format.
enum class ShapeDynamism : uint8_t { kStatic = 0, kDynamicBound = 1, kDynamicUnbound = 2 };

// Bytes of a constant: a window into a shared Blob (an mmapped weight file or bytes decoded
// from JSON). Copying a ConstantData never copies the bytes.
struct ConstantData {
  std::shared_ptr<const Blob> blob;
  size_t offset = 0;
  size_t size = 0;

  bool empty() const { return blob == nullptr; }
  std::span<const uint8_t> bytes() const {
    return blob ? blob->bytes().subspan(offset, size) : std::span<const uint8_t>();
  }
};

// Inclusive range of positions in the node order during which a tensor is live.
struct Lifetime {
  int32_t first = -1;
  int32_t last = -1;
  bool valid() const { return first >= 0 && last >= first; }
};

struct TensorSpec {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  // Permutation of 0..rank-1, outermost dimension first; contiguous = 0,1,...,rank-1.
  std::vector<uint8_t> dim_order;
  ShapeDynamism dynamism = ShapeDynamism::kStatic;

  // A constant (a weight): its bytes are known at compile time and never written.
  bool is_const = false;
  ConstantData constant;

  // Where the tensor lives. CPU unless device propagation moved it.
  Device device;

  // Memory planning: set by the planner, unset before.
  Lifetime lifetime;
  std::optional<uint32_t> mem_id;  // 1-based planned buffer id; 0 is reserved
  std::optional<uint64_t> mem_offset;

  // A spec with contiguous dim order.
  static TensorSpec make(DType dtype, std::vector<int64_t> sizes);

  size_t rank() const { return sizes.size(); }
  int64_t numel() const;   // callers guarantee no overflow (the verifier checks it)
  int64_t nbytes() const;  // numel * element size
  bool is_planned() const { return mem_id.has_value(); }

  // "float32[2, 3]" — dtype and shape only.
  std::string type_string() const;
};

std::vector<uint8_t> contiguous_dim_order(size_t rank);
// "[2, 3]"
std::string shape_to_string(std::span<const int64_t> sizes);

}  // namespace etc
