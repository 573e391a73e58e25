// What the calibration harness records about the device it ran on (Backend::device()).
#pragma once

#include <string>

namespace headroom::kernels {

struct DeviceInfo {
  std::string name;
  double memory_bytes = 0;
  int multiprocessors = 0;  // SMs (CUDA), CUs (HIP), hardware threads (CPU)
};

}  // namespace headroom::kernels
