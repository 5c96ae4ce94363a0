#include "graph/device.h"

#include <cctype>

namespace etc {

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda";
  }
  return "unknown";
}

std::string to_string(Device d) {
  if (d.is_cpu() && d.index == 0) return "cpu";
  return std::string(device_type_name(d.type)) + ":" + std::to_string(d.index);
}

Result<Device> parse_device(std::string_view text) {
  std::string lower;
  for (char c : text)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view type = lower;
  std::string_view index;
  bool has_index = false;
  if (size_t colon = lower.find(':'); colon != std::string::npos) {
    type = std::string_view(lower).substr(0, colon);
    index = std::string_view(lower).substr(colon + 1);
    has_index = true;
  }
  Device d;
  if (type == "cpu") {
    d.type = DeviceType::kCPU;
  } else if (type == "cuda") {
    d.type = DeviceType::kCUDA;
  } else {
    return invalid_input("unknown device type '" + std::string(text) +
                         "' (expected cpu, cuda or cuda:N)");
  }
  if (!has_index) return d;
  if (index.empty() || index.size() > 3) {
    return invalid_input("bad device index in '" + std::string(text) +
                         "' (expected a number from 0 to " + std::to_string(kMaxDeviceIndex) + ")");
  }
  int value = 0;
  for (char c : index) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return invalid_input("bad device index in '" + std::string(text) +
                           "' (expected a number from 0 to " + std::to_string(kMaxDeviceIndex) +
                           ")");
    }
    value = value * 10 + (c - '0');
  }
  if (value > kMaxDeviceIndex) {
    return invalid_input("device index " + std::to_string(value) + " in '" + std::string(text) +
                         "' is out of range (0 to " + std::to_string(kMaxDeviceIndex) + ")");
  }
  if (d.type == DeviceType::kCPU && value != 0) {
    return invalid_input("device '" + std::string(text) + "': the CPU has only index 0");
  }
  d.index = static_cast<int8_t>(value);
  return d;
}

}  // namespace etc
