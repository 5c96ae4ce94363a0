// libetc_executorch_autoregister.so registers etc with ExecuTorch when it loads: this test
// binary links it (and ExecuTorch's runtime) and calls no registration itself.
#include <catch2/catch.hpp>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include "executorch/etc_executorch.h"

namespace et = ::executorch::runtime;

TEST_CASE("loading the autoregister library registers etc's kernels, allocator and backend") {
  REQUIRE(etc::executorch_plugin::registered_at_load() == et::Error::Ok);
  for (const char* name : {"aten::convolution.out", "aten::mm.out", "et_copy::_h2d_copy.out"}) {
    INFO(name);
    CHECK(et::registry_has_op_function(name));
  }
  CHECK(et::get_device_allocator(et::etensor::DeviceType::CUDA) != nullptr);
  CHECK(et::get_backend_class("EtcCudaBackend") != nullptr);
  // The calls it made return their first result again.
  size_t n = 0;
  CHECK(etc::executorch_plugin::register_kernels_with_executorch(&n) == et::Error::Ok);
  CHECK(n > 150);
  CHECK(etc::executorch_plugin::registered_mode() != nullptr);
}
