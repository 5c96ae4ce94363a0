// Converters and helpers shared by the files of the ONNX op table (onnx_ops.cpp holds the
// table; onnx_ops_spatial.cpp the spatial ops, onnx_ops_indexing.cpp the gathers, scatters
// and index-built layouts, onnx_ops_activation.cpp the activations and normalisations
// composed of IR ops, onnx_ops_loss.cpp the losses).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontends/onnx/node_context.h"

namespace etc::onnx_import {

// An IR reshape of `v` to `shape`.
Result<ValueId> reshape(NodeCtx& ctx, ValueId v, std::vector<int64_t> shape);

// An IR permute of `v`.
Result<ValueId> permute(NodeCtx& ctx, ValueId v, std::vector<int64_t> dims);
// `v` as a number of `dtype` (bool: non-zero; integers truncated).
Scalar scalar_of(DType dtype, double v);
// `v` reversed along `axis` (index.Tensor with a constant reversed index).
Result<ValueId> flip(NodeCtx& ctx, ValueId v, int64_t axis, int64_t size);
// A constant int64 0, 1, ..., n - 1 shaped to broadcast along `axis` of a rank-`rank`
// tensor (size 1 in every other dim).
ValueId arange_along(NodeCtx& ctx, int64_t n, int64_t axis, int64_t rank);
// A constant 0-d tensor of `dtype` holding `v`.
ValueId scalar_constant(NodeCtx& ctx, DType dtype, double v);

// Conv (transposed: ConvTranspose), with ONNX's auto_pad and asymmetric pads.
Status convert_conv(NodeCtx& ctx, bool transposed);
// The convolution of `x` by `w` (plus `bias`) as the node's attributes say (Conv's:
// kernel_shape, strides, pads, dilations, group, auto_pad; ConvTranspose's too).
Result<ValueId> convolve(NodeCtx& ctx, ValueId x, ValueId w, std::optional<ValueId> bias,
                         bool transposed);
// ONNX's MatMul of `a` (shape sa) by `b` (shape sb), with numpy's broadcasting.
Result<ValueId> matmul(NodeCtx& ctx, ValueId a, std::vector<int64_t> sa, ValueId b,
                       std::vector<int64_t> sb);
// MaxPool (is_max) or AveragePool.
Status convert_pool(NodeCtx& ctx, bool is_max);
// GlobalMaxPool (is_max) or GlobalAveragePool.
Converter global_pool(bool is_max);
// MaxUnpool: MaxPool's values put back at its Indices.
Status convert_max_unpool(NodeCtx& ctx);
// GridSample as ATen's grid_sampler_2d.
Status convert_grid_sample(NodeCtx& ctx);
// RoiAlign: per-region bilinear sampling as two matrix products.
Status convert_roi_align(NodeCtx& ctx);
// Resize and Upsample (every mode; PyTorch's NCHW cases as ATen's upsample ops).
Status convert_resize(NodeCtx& ctx);
// LSTM, unrolled over its static sequence.
Status convert_lstm(NodeCtx& ctx);
// GRU and RNN, unrolled likewise.
Status convert_gru_rnn(NodeCtx& ctx);

// onnx_ops_indexing.cpp
Status convert_gather_elements(NodeCtx& ctx);
Status convert_gather_nd(NodeCtx& ctx);
Status convert_scatter_elements(NodeCtx& ctx);  // and Scatter (opset < 11)
Status convert_scatter_nd(NodeCtx& ctx);
Status convert_one_hot(NodeCtx& ctx);
Status convert_trilu(NodeCtx& ctx);
Status convert_eye_like(NodeCtx& ctx);
Status convert_tile(NodeCtx& ctx);
Status convert_depth_to_space(NodeCtx& ctx);
Status convert_space_to_depth(NodeCtx& ctx);
Status convert_hardmax(NodeCtx& ctx);
Status convert_compress(NodeCtx& ctx);
Status convert_reverse_sequence(NodeCtx& ctx);
Status convert_einsum(NodeCtx& ctx);

// onnx_ops_activation.cpp
Status convert_elu(NodeCtx& ctx);  // Elu, Celu and Selu
Status convert_softplus(NodeCtx& ctx);
Status convert_softsign(NodeCtx& ctx);
Status convert_thresholded_relu(NodeCtx& ctx);
Status convert_shrink(NodeCtx& ctx);
Status convert_is_inf(NodeCtx& ctx);
Status convert_cast_like(NodeCtx& ctx);
Status convert_instance_norm(NodeCtx& ctx);
Status convert_mean_variance_norm(NodeCtx& ctx);
Status convert_lrn(NodeCtx& ctx);

// onnx_ops_quantize.cpp
Status convert_quantize_linear(NodeCtx& ctx);
Status convert_dequantize_linear(NodeCtx& ctx);
Status convert_dynamic_quantize_linear(NodeCtx& ctx);
Status convert_matmul_integer(NodeCtx& ctx);
Status convert_conv_integer(NodeCtx& ctx);
Status convert_qlinear_matmul(NodeCtx& ctx);
Status convert_qlinear_conv(NodeCtx& ctx);

// onnx_ops_layout.cpp: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice,
// Gather, Expand, Pad.
void add_layout_converters(std::map<std::string, Converter>& table);

// onnx_ops_norm_reduce.cpp: BatchNormalization, LayerNormalization, Softmax, LogSoftmax,
// the Reduce* ops, ArgMax, ArgMin, CumSum, TopK.
void add_norm_reduce_converters(std::map<std::string, Converter>& table);

// onnx_ops_training.cpp: Adagrad, Adam and Momentum of ai.onnx.preview.training, under
// their qualified op types.
void add_training_converters(std::map<std::string, Converter>& table);

// onnx_ops_signal.cpp
Status convert_dft(NodeCtx& ctx);
Status convert_stft(NodeCtx& ctx);

// onnx_ops_text.cpp
Status convert_tfidf_vectorizer(NodeCtx& ctx);

// onnx_ops_select.cpp: outputs whose sizes depend on the data
Status convert_non_zero(NodeCtx& ctx);
Status convert_non_max_suppression(NodeCtx& ctx);
Status convert_unique(NodeCtx& ctx);

// onnx_ops_control.cpp: subgraphs converted away (If selects, Loop and Scan unroll)
Status convert_if(NodeCtx& ctx);
Status convert_loop(NodeCtx& ctx);
Status convert_scan(NodeCtx& ctx);

// onnx_ops_sequence.cpp: sequences and optionals, as lists known at export time
Status convert_sequence_construct(NodeCtx& ctx);
Status convert_sequence_empty(NodeCtx& ctx);
Status convert_sequence_insert(NodeCtx& ctx);
Status convert_sequence_at(NodeCtx& ctx);
Status convert_sequence_erase(NodeCtx& ctx);
Status convert_sequence_length(NodeCtx& ctx);
Status convert_sequence_map(NodeCtx& ctx);
Status convert_concat_from_sequence(NodeCtx& ctx);
Status convert_split_to_sequence(NodeCtx& ctx);
Status convert_optional(NodeCtx& ctx);
Status convert_optional_has_element(NodeCtx& ctx);
Status convert_optional_get_element(NodeCtx& ctx);

// onnx_ops_loss.cpp
Status convert_nll_loss(NodeCtx& ctx);
Status convert_softmax_cross_entropy(NodeCtx& ctx);

}  // namespace etc::onnx_import
