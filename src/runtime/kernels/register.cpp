// register_cpu_kernels: every CPU kernel, under its ExecuTorch portable out-variant name
// ("aten::add.out", used by host programs) and its IR name ("aten::add.Tensor", used inside
// CUDA delegate subgraphs run on the CPU). The kernels live in the files of this folder,
// one per concern; each has its own registration function. The registry also carries the
// kernels' load planner (kernels/load_plan.h).
#include "runtime/kernel.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/load_plan.h"

namespace etc::rt {

Status register_cpu_kernels(OperatorRegistry& registry) {
  ETC_RETURN_IF_ERROR(kernels::register_elementwise_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_matmul_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_int_mm_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_conv_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_pool_resize_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_reduce_norm_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_reduce_index_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_shape_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_creation_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_random_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_index_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_movement_kernels(registry));
  ETC_RETURN_IF_ERROR(kernels::register_data_dependent_kernels(registry));
  registry.set_load_planner(kernels::plan_cpu_method);
  return Status();
}

}  // namespace etc::rt
