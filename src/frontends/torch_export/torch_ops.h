// Internal to the torch.export op table (torch_ops*.cpp).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontends/torch_export/torch_node.h"

namespace etc::torch_import {

// A constant int64 tensor of `shape` holding `values` (index positions known at import).
ValueId index_constant(TorchNode& n, std::vector<int64_t> shape,
                       const std::vector<int64_t>& values);

// Unsupported when a tensor of `shape` computed at export time would be too large.
Status check_known_size(TorchNode& n, const std::vector<int64_t>& shape);

// The node's output: argument "self" in dtype `to` (itself when it has that dtype, a known
// value converted, or a _to_copy).
Status cast_to(TorchNode& n, DType to);

// For gather and scatter: index tensors that address self at every position of `shape`,
// `index` at dim and the position itself elsewhere (torch_ops_movement.cpp).
std::vector<ValueId> positions_with(TorchNode& n, const std::vector<int64_t>& shape, int64_t dim,
                                    ValueId index);

// scatter_reduce.two's result: `x` with the elements `positions` address (index_put's index
// tensors, one per dim, broadcasting to values' shape) reduced with `values` by `reduce`
// ("sum", "prod", "mean", "amax", "amin"), x's own element included when include_self
// (torch_ops_segment.cpp).
Result<ValueId> emit_scatter_reduce(TorchNode& n, ValueId x, const std::vector<ValueId>& positions,
                                    ValueId values, const std::string& reduce, bool include_self);

// Batch norm in training mode, the forms that update the running statistics in place
// (_native_batch_norm_legit, batch_norm with training=True) (torch_ops_reduce.cpp).
Status convert_batch_norm_training(TorchNode& n, bool functional);
// Adds PT2E's quantize and dequantize ops, per tensor and per channel
// (quantized_decomposed.*, torch_ops_quantized.cpp).
void add_quantized_converters(std::map<std::string, Converter>& table);
// Adds embedding_bag (torch_ops_segment.cpp).
void add_segment_converters(std::map<std::string, Converter>& table);
// Adds the attention, indexing and state-write converters to the table.
void add_attention_converters(std::map<std::string, Converter>& table);
// torch_ops_nn.cpp: matrix products, convolutions, pooling, resizing, reductions, softmax,
// normalisation.
void add_nn_converters(std::map<std::string, Converter>& table);
// Adds sym_size and its kin, the symbolic int and bool operators, _assert_scalar and nonzero
// (torch_ops_symbolic.cpp).
void add_symbolic_converters(std::map<std::string, Converter>& table);
// Adds the data-movement decompositions (torch_ops_movement.cpp) to the table.
void add_movement_converters(std::map<std::string, Converter>& table);
// Adds the reductions, index reductions, scans, sorts and batch-statistics norms
// (torch_ops_reduce.cpp) to the table.
void add_reduce_converters(std::map<std::string, Converter>& table);
// A 3-D convolution (x [N, C, D, H, W], w [O, C / groups, kd, kh, kw], bias [O] or none) as
// kd 2-D convolutions of the depth slices each kernel plane meets, the depth folded into the
// batch, summed (torch_ops_volume.cpp). stride, padding and dilation have 3 values.
Result<ValueId> emit_conv3d(TorchNode& n, ValueId x, ValueId w, std::optional<ValueId> bias,
                            const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                            const std::vector<int64_t>& dilation, int64_t groups);

// A transposed 3-D convolution as kd transposed 2-D convolutions of the input's depth
// slices, each added (an accumulating index_put) at the output depths its kernel plane
// reaches, the padding cut off (torch_ops_volume.cpp).
Result<ValueId> emit_conv_transpose3d(TorchNode& n, ValueId x, ValueId w,
                                      std::optional<ValueId> bias,
                                      const std::vector<int64_t>& stride,
                                      const std::vector<int64_t>& padding,
                                      const std::vector<int64_t>& dilation,
                                      const std::vector<int64_t>& output_padding, int64_t groups);

// Adds avg_pool3d and adaptive_avg_pool3d (torch_ops_volume.cpp).
void add_volume_converters(std::map<std::string, Converter>& table);
// Adds im2col/col2im, cdist/pdist and masked_scatter (torch_ops_positions.cpp).
void add_position_converters(std::map<std::string, Converter>& table);
// Adds the default export's composite ops and aliases (torch_ops_composite.cpp); after the
// others, as the aliases copy their entries.
void add_composite_converters(std::map<std::string, Converter>& table);

}  // namespace etc::torch_import
