// Converters and helpers shared by the files of the ONNX op table (onnx_ops.cpp holds the
// table, onnx_ops_spatial.cpp the spatial ops).
#pragma once

#include <vector>

#include "graph/onnx/node_context.h"

namespace etc::onnx_import {

// An IR reshape of `v` to `shape`.
Result<ValueId> reshape(NodeCtx& ctx, ValueId v, std::vector<int64_t> shape);

// Conv (transposed: ConvTranspose), with ONNX's auto_pad and asymmetric pads.
Status convert_conv(NodeCtx& ctx, bool transposed);
// MaxPool (is_max) or AveragePool.
Status convert_pool(NodeCtx& ctx, bool is_max);
// GlobalMaxPool (is_max) or GlobalAveragePool.
Converter global_pool(bool is_max);
// Resize and Upsample (nearest and linear).
Status convert_resize(NodeCtx& ctx);
// LSTM, unrolled over its static sequence.
Status convert_lstm(NodeCtx& ctx);

}  // namespace etc::onnx_import
