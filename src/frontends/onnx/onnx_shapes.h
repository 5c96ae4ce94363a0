// Shape rules of ONNX's view-like ops, shared by export-time evaluation and conversion.
#pragma once

#include <cstdint>
#include <vector>

#include "frontends/onnx/node_context.h"

namespace etc::onnx_import {

// The output shape of Reshape, Flatten, Squeeze or Unsqueeze (their shape/axes inputs must
// be known at export time).
Result<std::vector<int64_t>> view_shape(NodeCtx& ctx);

struct GatherPlan {
  int64_t axis = 0;
  std::vector<int64_t> indices;  // flattened, negative ones wrapped
  std::vector<int64_t> indices_shape;
  std::vector<int64_t> out_shape;
};
// Gather with indices known at export time.
Result<GatherPlan> gather_plan(NodeCtx& ctx);

struct SliceAxis {
  int64_t axis = 0;
  int64_t start = 0;  // clamped, first element taken
  int64_t step = 1;
  int64_t length = 0;  // elements taken
};
// Slice's per-axis ranges after ONNX's clamping rules (starts/ends/axes/steps known).
Result<std::vector<SliceAxis>> slice_axes(NodeCtx& ctx);

Result<std::vector<int64_t>> transpose_perm(NodeCtx& ctx);
// Expand's output shape: the input's shape broadcast with the shape input.
Result<std::vector<int64_t>> expand_shape(NodeCtx& ctx);
// The axes of Squeeze/Unsqueeze/Reduce*: from the attribute (older opsets) or input 1.
// nullopt when none are given.
Result<std::optional<std::vector<int64_t>>> axes_of(NodeCtx& ctx, int64_t input_since_opset);

}  // namespace etc::onnx_import
