// What the calibration harness records about the device it ran on.
#pragma once

#include <string>

namespace headroom::kernels {

struct DeviceInfo {
  std::string name;
  double memory_bytes = 0;
  int multiprocessors = 0;
};

// Throws std::runtime_error with the runtime's message when no device is usable.
DeviceInfo query_device(int index);

}  // namespace headroom::kernels
