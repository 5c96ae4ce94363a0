// The CPU kernels' load planner (runtime/load_plan.h), which register_cpu_kernels installs on
// its registry. For every method it loads with these kernels:
// - marks the outs nothing reads (max_pool2d_with_indices' indices, most of the time), which
//   the kernel then leaves unwritten (KernelContext::unread_outs);
// - gives a matrix product (mm, addmm) whose right operand the steps before it dequantize
//   from an int8 or 4-bit constant (a weight-only quantized layer: weight_only.h) those steps,
//   which the product then runs as it packs the weight, marking them fused; and, where the
//   weight is 4-bit, the steps that dequantize its left operand from int8 rows the program
//   quantized (ExecuTorch's 8da4w), the product then multiplying in integers
//   (gemm_int8x4.h);
// - gives convolutions, matrix products (mm) and inference batch norms the in-place
//   elementwise steps right after them as their epilogue (Epilogue; a matrix product's may
//   add a broadcast row, its bias), marking those steps fused;
// - keeps the tensors that only convolutions running on oneDNN or etc's NHWC kernels (and max
//   poolings, batch norms, average poolings, cats along the channels, products by one value
//   per channel, sums, permutes to and from [N, H, W, C], slices along the channels and
//   channel shuffles, through the views between them) read and write channels-last between
//   them, instead of copying each to NHWC and back (KernelContext::channels_last_args),
//   making each such convolution's oneDNN state ahead of its first call.
// All but the first only where the method asks for fusion (LoadPlanView::fuse); the same bits
// either way, but for the 8da4w products' integer sums (within float rounding of the steps').
#pragma once

#include "runtime/load_plan.h"

namespace etc::rt::kernels {

void plan_cpu_method(LoadPlanView& method);

}  // namespace etc::rt::kernels
