// Fits of the calibration sweep (DESIGN.md, "Kernels and calibration"): a GEMM efficiency surface over
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

namespace headroom::calibrate {

// Fits below this R² (of log time, see below) are refused unless the caller lowers it (--min-r2).
inline constexpr double kDefaultMinR2 = 0.9;

// ---- GEMM ----

struct GemmPoint {
  double m = 0, n = 0, k = 0;
  double seconds = 0;
};
// efficiency(m, n, k) = e · m/(m + h) · n/(n + h) · k/(k + h) · wave(m, n): the throughput model's own form
// (throughput.hpp: gemm_shape_factor × gemm_wave_factor, the wave term on when `wave_units` > 0), so that
// applying the profile (apply_profile) predicts exactly what was fitted.
struct GemmFit {
  double efficiency = 0;  // e, of `peak_flops`
  double half_dim = 0;    // h
  int wave_units = 0;     // 0: no wave term (CPU)
  int tile = 128;
  double peak_flops = 0;
  double r2 = 0;                  // of log time (what the throughput model predicts)
  double r2_efficiency = 0;       // of efficiency itself (small when the surface is flat)
  std::vector<double> residuals;  // measured / predicted time − 1, per point
  [[nodiscard]] double predict_efficiency(double m, double n, double k) const;
};
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
struct AttentionFit {
  std::int64_t head_dim = 0;
  bool causal = true;
  double efficiency = 0;
  double half_tokens = 0;
  double r2 = 0;  // of log time
  std::vector<double> residuals;
};
[[nodiscard]] AttentionFit fit_attention(const std::vector<AttentionPoint>& points, double peak_flops,
                                         std::int64_t head_dim, bool causal);

// ---- collectives ----

struct CollectivePoint {
  double bytes = 0;  // nccl-tests' size
  double seconds = 0;
};
// time = α + β·bytes in each regime (β in s/byte); the breakpoint minimises the relative squared error.
struct Regime {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double min_bytes = 0, max_bytes = 0;
};
struct CollectiveFit {
  Collective op = Collective::all_reduce;
  int ranks = 0;
  std::string level;                // "intra" or "inter"
  std::string source = "measured";  // or "nccl-tests"
  Regime small, large;
  double breakpoint_bytes = 0;  // first size of the large regime
  double r2 = 0;                // of log time over both regimes
  std::vector<double> residuals;
  [[nodiscard]] double predict_seconds(double bytes) const;
  // nccl-tests' busbw of the large regime: factor / β.
  [[nodiscard]] double busbw_bytes_per_s() const;
};
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
