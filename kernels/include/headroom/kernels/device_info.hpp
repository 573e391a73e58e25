// What the calibration harness records about the device it ran on (Backend::device()).
#pragma once

#include <string>

namespace headroom::kernels {

struct DeviceInfo {
  std::string name;
  double memory_bytes = 0;
  int multiprocessors = 0;  // SMs (CUDA), CUs (HIP), hardware threads (CPU)
  // The libraries that ran the kernels, with their versions ("CUDA driver 13.0, runtime 13.0, cuBLASLt 13.0.0,
  // cuDNN 9.13.0, NCCL 2.27.3"): a measured curve belongs to them as much as to the chip.
  std::string software;
};

}  // namespace headroom::kernels
