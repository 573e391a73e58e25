#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "headroom/kernels/device_info.hpp"

namespace headroom::kernels {

DeviceInfo query_device(int index) {
  cudaDeviceProp prop{};
  if (const cudaError_t err = cudaGetDeviceProperties(&prop, index); err != cudaSuccess)
    throw std::runtime_error(std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err));
  return {prop.name, static_cast<double>(prop.totalGlobalMem), prop.multiProcessorCount};
}

}  // namespace headroom::kernels
