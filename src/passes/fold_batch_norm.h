// fold-batch-norm: an inference batch norm (_native_batch_norm_legit_no_training) that reads
// only a convolution's output, with constant statistics and parameters, is folded into that
// convolution's weight and bias:
//   scale[c] = gamma[c] / sqrt(var[c] + eps)
//   W'[c]    = W[c] * scale[c]
//   b'[c]    = (b[c] - mean[c]) * scale[c] + beta[c]
// (gamma 1 and beta 0 when absent, b 0 when the convolution has no bias), computed in double
// and rounded once. The normalisation's full pass over the activation is gone; the result
// differs from running the two ops only by rounding (a few ulps). Float32 and float64 only;
// transposed convolutions, and batch norms whose mean/invstd outputs are read, stay as they
// are.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> fold_batch_norm(Graph& graph, PassContext& context);

}  // namespace etc
