// Fits of the calibration sweep: a GEMM efficiency surface over
// (m, n, k) with wave quantization, attention efficiency against sequence length per head dim, and α/β per
// collective with a small-message and a large-message regime. Least squares through Eigen. Each fit records
// its R² and residuals; require_quality() refuses a poor one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/core/collectives.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/profile.hpp"

namespace headroom::calibrate {

// ---- GEMM ----

struct GemmPoint {
  double m = 0, n = 0, k = 0;
  double seconds = 0;
};
// The GEMM surface (estimator/profile.hpp GemmFit) fitted to the points.
[[nodiscard]] GemmFit fit_gemm(const std::vector<GemmPoint>& points, double peak_flops, int wave_units, int tile = 128);

// ---- attention ----

struct AttentionPoint {
  double seq = 0;
  double flops = 0;    // forward + backward
  double seconds = 0;  // forward + backward
};
// efficiency(s) = e · s/(s + s½) (throughput.hpp's attention_efficiency), linear in 1/s: 1/eff = 1/e + (s½/e)/s.
// Bounded to what the points support: e ≤ 1 and s½ ≤ kMaxAttentionHalfOverRange × the longest sequence measured,
// else a constant efficiency; a constant above 1 is an Error.
inline constexpr double kMaxAttentionHalfOverRange = 2.0;
[[nodiscard]] AttentionFit fit_attention(const std::vector<AttentionPoint>& points, double peak_flops,
                                         std::int64_t head_dim, bool causal);

// ---- collectives ----

struct CollectivePoint {
  double bytes = 0;  // nccl-tests' size
  double seconds = 0;
};
// α/β per regime (estimator/profile.hpp CollectiveFit); the breakpoint minimises the relative squared error.
[[nodiscard]] CollectiveFit fit_collective(std::vector<CollectivePoint> points, Collective op, int ranks,
                                           std::string level);

// A fit below its R² threshold. `cases` are the labels (kernels::label) of the sweep measurements behind its
// noisiest point: a sweep re-measures them, and leaves them out of its FILE.partial when they stay noisy, so
// that the next run measures them again instead of re-fitting the same data.
class NoisyFit : public Error {
 public:
  NoisyFit(const std::string& what, std::vector<std::string> cases) : Error(what), cases(std::move(cases)) {}
  std::vector<std::string> cases;
};

// Throws NoisyFit "<what>: R² 0.42 is below the threshold 0.90, the noisiest point <noisiest> (...)" naming
// `cases` when r2 < min_r2; min_r2 = 0 accepts all.
void require_quality(std::string_view what, double r2, double min_r2, std::string_view noisiest = "",
                     std::vector<std::string> cases = {});
// "intra" when `ranks` fit in one node, else "inter": the link level a collective fit describes.
[[nodiscard]] std::string link_level(int ranks, int gpus_per_node);

// The index of the largest |residual| (the point a failed fit names).
[[nodiscard]] std::size_t noisiest(const std::vector<double>& residuals);

}  // namespace headroom::calibrate
