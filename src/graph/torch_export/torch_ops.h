// Internal to the torch.export op table (torch_ops.cpp and torch_ops_attention.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/torch_export/torch_node.h"

namespace etc::torch_import {

// Unsupported when a tensor of `shape` computed at export time would be too large.
Status check_known_size(TorchNode& n, const std::vector<int64_t>& shape);

// Adds the attention, indexing and state-write converters to the table.
void add_attention_converters(std::map<std::string, Converter>& table);

}  // namespace etc::torch_import
