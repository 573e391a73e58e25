#pragma once
// A device's kernel curves: the fraction of peak its GEMMs reach by shape and its attention reaches by sequence,
// fitted to the rows of a kernel-curves file (format headroom-kernel-curves: measured by
// tools/scripts/gpu_kernel_sweep.py on the device, or published benchmarks by
// tools/scripts/published_kernel_curves.py).
#include <cstdint>
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace headroom {

// The fraction of peak by GEMM shape, as a table over log2 m, log2 n, log2 k at every power of two from 2^kFirst to
// 2^kLast, read by trilinear interpolation in log2 (dimensions outside clamp to the ends). Each node holds the
// inverse-distance-weighted mean (in log2 of the dimensions, weight 1/d^4) of the rows nearest it, its dimensions
// clamped to the range the rows span: a shape beyond the largest measured runs at the largest's fraction (the
// plateau), none is extrapolated past what was measured.
// A node is computed the first time a shape reads it (a pure function of the rows: two threads reading one node at
// once both store the same value), so a process pays only for the nodes its shapes touch.
struct GemmTable;
struct GemmCurve {
  static constexpr int kFirst = 6, kLast = 17, kSide = kLast - kFirst + 1;
  std::shared_ptr<const GemmTable> table;  // kSide^3 nodes, index (i_m·kSide + i_n)·kSide + i_k
  std::int64_t rows = 0;
  [[nodiscard]] bool empty() const { return table == nullptr; }
};

// Causal attention forward and backward together: fraction = efficiency · s/(s + half_tokens) over the sequence s
// (the form throughput.hpp's attention_efficiency prices).
struct AttentionCurve {
  double efficiency = 0, half_tokens = 0;
  std::int64_t rows = 0;
  [[nodiscard]] bool empty() const { return rows == 0; }
};

struct GemmPoint {
  double m = 0, n = 0, k = 0, fraction = 0;
};
struct AttentionPoint {
  double seq = 0, fraction = 0;
};

// The fraction of peak of an m×n×k GEMM on the curve (at most 1).
[[nodiscard]] double gemm_curve_fraction(const GemmCurve& c, double m, double n, double k);
// The table of those rows (refused: none, or a row with a dimension below 1 or a fraction outside (0, 1]).
[[nodiscard]] GemmCurve fit_gemm_curve(const std::vector<GemmPoint>& points);
// Least squares in log(fraction) over half_tokens on a log grid, efficiency in closed form for each.
[[nodiscard]] AttentionCurve fit_attention_curve(const std::vector<AttentionPoint>& points);

// One backend's causal attention curve at one head dimension.
struct HeadDimAttentionCurve {
  std::string backend;  // a name in kAttentionBackends
  double head_dim = 0;
  AttentionCurve curve;
};

// One device's curves and where they come from.
struct DeviceKernels {
  std::string file;     // the kernel-curves file
  std::string kind;     // "measured" or "published"
  std::string machine;  // the GPU the rows ran on, as the file names it
  GemmCurve bf16, fp8;
  // Causal attention forward and backward, one curve per backend (kAttentionBackends' order) and head dimension
  // (ascending) the file has rows for: a kernel's tiles, and so its efficiency, follow the head dimension.
  std::vector<HeadDimAttentionCurve> attention;
  [[nodiscard]] bool empty() const { return bf16.empty(); }
  // The backend's curve at the head dimension nearest head_dim in log2 (a tie: the smaller); null: no rows of it.
  [[nodiscard]] const AttentionCurve* attention_curve(std::string_view backend, double head_dim) const;
};

// The attention backends a curve can be for: "cudnn", cuDNN's fused attention (Transformer Engine's FusedAttention,
// PyTorch SDPA's CUDNN_ATTENTION), and "flash2", FlashAttention-2 (the flash-attn package, PyTorch SDPA's
// FLASH_ATTENTION, which a measured profile's rows call "flash").
inline constexpr std::array<std::string_view, 2> kAttentionBackends = {"cudnn", "flash2"};

// Reads a kernel-curves document; fractions are of the given peaks (FLOP/s; fp8_peak 0: FP8 rows are refused).
[[nodiscard]] DeviceKernels device_kernels_from_json(const nlohmann::json& j, double bf16_peak, double fp8_peak,
                                                     std::string_view where);

}  // namespace headroom
