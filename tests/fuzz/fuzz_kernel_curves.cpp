// A GPU spec's kernel_curves file (format headroom-kernel-curves: measured by gpu_kernel_sweep.py or published),
// read as SpecLibrary::gpu reads it, at the H100's peaks.
#include <cmath>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "headroom/estimator/kernel_curves.hpp"
#include "headroom/estimator/spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const auto path = fuzz::write_input("curves.json", data, size);
  fuzz::value_or_error([&] {
    const DeviceKernels k = device_kernels_from_json(read_json_file(path), 989.4e12, 1978.9e12, path.string());
    fuzz::require(!k.bf16.empty(), "a device's curves have a BF16 GEMM curve");
    for (const double x : {1.0, 64.0, 1000.0, 8192.0, 1e6})
      for (const GemmCurve* c : {&k.bf16, &k.fp8}) {
        if (c->empty()) continue;
        const double f = gemm_curve_fraction(*c, x, 4096.0, x);
        fuzz::require(f > 0.0 && f <= 1.0, "a GEMM curve gives a fraction of peak in (0, 1]");
      }
    for (const auto& a : k.attention)
      fuzz::require(k.attention_curve(a.backend, a.head_dim) == &a.curve && a.curve.efficiency > 0.0 &&
                        a.curve.efficiency <= 1.0 && std::isfinite(a.curve.half_tokens) && a.curve.half_tokens > 0.0,
                    "each backend's attention curve at a head dimension has an efficiency in (0, 1] and a finite "
                    "positive half");
  });
  return 0;
}
