// `--gpu FILE`: a GPU spec, read as SpecLibrary::gpu reads it (JSON, schema, units converted).
#include <cstdint>

#include "fuzz_support.hpp"
#include "headroom/estimator/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  static const SpecLibrary lib(fuzz::data_dir());
  const auto path = fuzz::write_input("gpu.json", data, size);
  fuzz::value_or_error([&] {
    const GpuSpec g = lib.gpu(path.string());
    fuzz::require(!g.name.empty() && !g.vendor.empty(), "a GPU has a name and a vendor");
    fuzz::require(fuzz::positive(g.memory_bytes) && fuzz::positive(g.usable_memory_bytes) &&
                      g.usable_memory_bytes <= g.memory_bytes,
                  "finite positive memory, usable at most nominal");
    fuzz::require(fuzz::positive(g.bf16_flops) && fuzz::positive(g.fp16_flops) && fuzz::positive(g.fp32_flops) &&
                      fuzz::positive(g.hbm_bytes_per_s),
                  "finite positive peaks and HBM bandwidth");
    fuzz::require(fuzz::non_negative(g.fp8_flops), "an FP8 peak is finite, 0 when the GPU has none");
  });
  return 0;
}
