// A restricted reader for the torch.save archives torch.export stores weights in when they
// are tensor subclasses (`use_pickle: true` in the weights config): a zip holding
// <top>/data.pkl and the storages <top>/data/<key>. The pickle is interpreted, never
// executed: its globals must be on an allow-list (torch's tensor rebuild functions, dtypes
// and storage types, OrderedDict, torchao's Int8Tensor), and the rebuild calls are
// evaluated symbolically into the tensors they describe. Anything else is refused with the
// file, the byte offset and what was found. Every read is bounds-checked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "frontends/torch_export/pt2_archive.h"
#include "graph/dtype.h"
#include "support/status.h"

namespace etc::torch_import {

// A tensor the pickle rebuilds (torch._utils._rebuild_tensor_v2): a view of a storage.
struct PickledTensor {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes, strides;
  int64_t storage_offset = 0;  // elements
  std::string storage_key;     // <top>/data/<key>
  int64_t storage_numel = 0;   // the storage's elements
};

// The torchao release whose op schemas (torchao.choose_qparams_affine, quantize_affine,
// dequantize_affine) and tensor subclasses etc's importer was written and tested against:
// scripts/python/constraints.txt pins it, and a test checks that the two agree.
inline constexpr const char* kTorchaoTested = "0.18.0";

// What a saved weight rebuilds to: a plain tensor (class_name empty, one tensor named "")
// or a tensor subclass (torch._utils._rebuild_wrapper_subclass) with its dtype and sizes
// as the program sees them, its inner tensors and its other attributes.
struct PickledWeight {
  std::string class_name;  // "torchao.quantization.Int8Tensor"
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  std::vector<std::pair<std::string, PickledTensor>> tensors;  // in the pickle's order
  // The other entries of the subclass's state, as text ("block_size" -> "[1, 64]",
  // "act_quant_kwargs" -> "None").
  std::vector<std::pair<std::string, std::string>> attributes;

  const PickledTensor* tensor(const std::string& name) const {
    for (const auto& [n, t] : tensors)
      if (n == name) return &t;
    return nullptr;
  }
  const std::string* attribute(const std::string& name) const {
    for (const auto& [n, v] : attributes)
      if (n == name) return &v;
    return nullptr;
  }
};

// Interprets a torch.save pickle (`file` names it in errors).
Result<PickledWeight> parse_weight_pickle(std::span<const uint8_t> pickle, const std::string& file);

// A torch.save archive: the weight its pickle describes, and the zip its storages are in.
struct TorchSaveArchive {
  ZipArchive zip;
  std::string prefix;  // "archive/"
  PickledWeight weight;
  // The bytes of a tensor's storage, checked to hold storage_numel elements.
  Result<ConstantData> storage(const PickledTensor& t) const;
};

// Opens the torch.save archive held in `bytes` (an entry of the .pt2, shared, not copied)
// and reads its pickle. `file` names it in errors ("m.pt2!m/data/weights/weight_0").
Result<TorchSaveArchive> read_torch_save(const ConstantData& bytes, const std::string& file);

}  // namespace etc::torch_import
