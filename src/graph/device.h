// Devices a tensor can live on. DeviceType numbers are ExecuTorch's schema enum
// (program.fbs `DeviceType : byte`, CPU=0, CUDA=1) and are the wire format.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "support/status.h"

namespace etc {

enum class DeviceType : int8_t { kCPU = 0, kCUDA = 1 };

// The largest device index the .pte format can carry (`device_index: byte`).
inline constexpr int kMaxDeviceIndex = 127;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int8_t index = 0;

  bool is_cpu() const { return type == DeviceType::kCPU; }
  auto operator<=>(const Device&) const = default;
};

std::string_view device_type_name(DeviceType t);  // "cpu", "cuda"
// "cpu", "cuda:0", ...
std::string to_string(Device d);
// Parses "cpu", "cuda", "cuda:N" case-insensitively ("CUDA:1" is cuda:1). "cuda" alone
// means cuda:0. Unknown types, empty or non-numeric indices and indices over
// kMaxDeviceIndex are errors that quote the text.
Result<Device> parse_device(std::string_view text);

}  // namespace etc
