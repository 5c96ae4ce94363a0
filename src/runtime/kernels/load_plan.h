// The CPU kernels' load planner (runtime/load_plan.h), which register_cpu_kernels installs on
// its registry. For every method it loads with these kernels:
// - marks the outs nothing reads (max_pool2d_with_indices' indices, most of the time), which
//   the kernel then leaves unwritten (KernelContext::unread_outs);
// - gives a matrix product (mm) whose right operand the steps before it dequantize from an
//   int8 constant (a weight-only quantized layer: weight_only.h) those steps, which the
//   product then runs as it packs the weight, marking them fused;
// - gives convolutions, matrix products (mm) and inference batch norms the in-place
//   elementwise steps right after them as their epilogue (Epilogue; a matrix product's may
//   add a broadcast row, its bias), marking those steps fused;
// - keeps the tensors that only convolutions running on oneDNN (and max poolings, and cats
//   along the channels) read and write channels-last between them, instead of copying each to NHWC
//   and back (KernelContext::channels_last_args), making each such convolution's oneDNN state ahead
//   of its first call.
// All but the first only where the method asks for fusion (LoadPlanView::fuse); the same bits
// either way.
#pragma once

#include "runtime/load_plan.h"

namespace etc::rt::kernels {

void plan_cpu_method(LoadPlanView& method);

}  // namespace etc::rt::kernels
