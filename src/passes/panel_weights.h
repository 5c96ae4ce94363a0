// panel-weights: stores the weights of the CPU's matrix products in panels of columns. A
// decode step multiplies one row by every weight, so its time is the time to read them; a
// weight stored [K, N] is read a group of columns at a time, a row of the weight apart for
// each of its K rows, which the hardware's stream prefetch does not follow (a bf16 decoder
// read its weights at 36-54% of a copy's bandwidth, where float32 weights, packed into
// panels at load, reached 85%: docs/benchmarks.md). Packing at load would double the
// resident memory of a mapped weight, so the export does it.
//
// Each 2-d constant W [K, N] of bf16 or fp16 read only as the right operand of a host mm or
// addmm (or of int8, read only by _to_copy steps whose outs are read only so: torchao's
// Int8WeightOnlyConfig; or of float32, read only by products of at most kMaxFloat32PanelRows
// rows: a decode step's, whose float32 weights the CPU runtime would otherwise pack into
// panels of its own at the first call, a resident copy), N a multiple of kWeightPanel and at
// least kMinPanelWeight elements, becomes a constant [N / P, K, P] (panel j holds columns
// j P to (j + 1) P - 1, row by row) and, before each reader, permute_copy(dims [1, 0, 2])
// and a view back to [K, N]. The program computes the same values; ExecuTorch's runtime runs
// the copy; etc's CPU load planner gives the product the panels instead and skips it
// (load_plan_dequant.cpp).
// Weights a delegate reads are left as they are.
#pragma once

#include <cstdint>

#include "passes/pass.h"

namespace etc {

// Columns per panel: a multiple of the CPU kernels' vectors (16 floats) and tiles (32).
inline constexpr int64_t kWeightPanel = 64;
// Smaller weights stay [K, N] (they fit in the caches, read from there).
inline constexpr int64_t kMinPanelWeight = int64_t{1} << 16;
// The most rows a product over float32 panels may have: the CPU kernels' in-place paths
// (one row, and the tile of up to 8); more rows would pack the panels again on every call,
// where a float32 constant [K, N] is packed once.
inline constexpr int64_t kMaxFloat32PanelRows = 8;

Result<bool> panel_weights(Graph& graph, PassContext& context);

}  // namespace etc
