// Built when neither HEADROOM_ENABLE_CUDA nor HEADROOM_ENABLE_HIP is on: asking for a GPU is a clear error.
#include <string>

#include "headroom/core/error.hpp"
#include "headroom/kernels/backend.hpp"

namespace headroom::kernels {

std::string_view gpu_backend_built() { return ""; }

std::unique_ptr<Backend> make_gpu_backend(std::string_view vendor, int) {
  const std::string v(vendor);
  throw Error("--backend " + v + ": this build has no GPU backend (configure with -DHEADROOM_ENABLE_" +
              (v == "hip" ? std::string("HIP") : std::string("CUDA")) + "=ON)");
}

}  // namespace headroom::kernels
