#include "graph/device.h"

#include <catch2/catch.hpp>

namespace etc {
namespace {

TEST_CASE("parse_device accepts cpu and cuda[:N] case-insensitively") {
  CHECK(*parse_device("cpu") == Device{DeviceType::kCPU, 0});
  CHECK(*parse_device("CPU:0") == Device{DeviceType::kCPU, 0});
  CHECK(*parse_device("cuda") == Device{DeviceType::kCUDA, 0});
  CHECK(*parse_device("CUDA:1") == Device{DeviceType::kCUDA, 1});
  CHECK(*parse_device("Cuda:127") == Device{DeviceType::kCUDA, 127});
  CHECK(to_string(Device{DeviceType::kCUDA, 3}) == "cuda:3");
  CHECK(to_string(Device{}) == "cpu");
}

TEST_CASE("parse_device rejects bad types and indices with the text quoted") {
  CHECK(parse_device("tpu").status().message() ==
        "unknown device type 'tpu' (expected cpu, cuda or cuda:N)");
  CHECK(parse_device("cuda:").status().message() ==
        "bad device index in 'cuda:' (expected a number from 0 to 127)");
  CHECK(parse_device("cuda:-1").status().message() ==
        "bad device index in 'cuda:-1' (expected a number from 0 to 127)");
  CHECK(parse_device("cuda:x").status().message() ==
        "bad device index in 'cuda:x' (expected a number from 0 to 127)");
  CHECK(parse_device("cuda:128").status().message() ==
        "device index 128 in 'cuda:128' is out of range (0 to 127)");
  CHECK(parse_device("cpu:1").status().message() == "device 'cpu:1': the CPU has only index 0");
}

}  // namespace
}  // namespace etc
