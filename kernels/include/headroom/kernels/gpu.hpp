// The one include of the GPU sources: the vendor's names (CUDA as is, HIP through aliases) and GPU_CHECK.
#pragma once

#include <string>

#include "headroom/core/error.hpp"

#if defined(HEADROOM_HIP)
#include "headroom/kernels/vendor_hip.hpp"
#else  // !HEADROOM_HIP
#include "headroom/kernels/vendor_cuda.hpp"
#endif  // HEADROOM_HIP

namespace headroom::kernels {

// A failed runtime call: the statement, where, and the runtime's message.
[[noreturn]] inline void gpu_failure(const char* statement, const char* file, int line, const char* message) {
  throw Error(std::string(statement) + " failed at " + file + ":" + std::to_string(line) + ": " + message);
}

}  // namespace headroom::kernels

#define GPU_CHECK(statement)                                                                                \
  do {                                                                                                      \
    const cudaError_t gpu_check_err_ = (statement);                                                         \
    if (gpu_check_err_ != cudaSuccess)                                                                      \
      ::headroom::kernels::gpu_failure(#statement, __FILE__, __LINE__, cudaGetErrorString(gpu_check_err_)); \
  } while (false)
