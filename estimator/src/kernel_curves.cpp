#include "headroom/estimator/kernel_curves.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"

namespace headroom {
namespace {

using nlohmann::json;

double number_or(const json& row, const char* key, double fallback) {
  const auto it = row.find(key);
  return it != row.end() && it->is_number() ? it->get<double>() : fallback;
}

}  // namespace

// Trilinear interpolation of the table in log2 of the dimensions.
double gemm_curve_fraction(const GemmCurve& c, double m, double n, double k) {
  constexpr int side = GemmCurve::kSide;
  std::array<int, 3> i{};
  std::array<double, 3> w{};
  const std::array<double, 3> x{m, n, k};
  for (std::size_t d = 0; d < 3; ++d) {
    const double t = std::clamp(std::log2(std::max(x[d], 1.0)) - GemmCurve::kFirst, 0.0, side - 1.0);
    i[d] = std::min(static_cast<int>(t), side - 2);
    w[d] = t - i[d];
  }
  const std::vector<float>& v = *c.table;
  double f = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double weight = 1.0;
    std::size_t index = 0;
    for (std::size_t d = 0; d < 3; ++d) {
      const int bit = (corner >> d) & 1;
      weight *= bit ? w[d] : 1.0 - w[d];
      index = index * side + static_cast<std::size_t>(i[d] + bit);
    }
    f += weight * v[index];
  }
  return std::min(1.0, f);
}

GemmCurve fit_gemm_curve(const std::vector<GemmPoint>& points) {
  if (points.empty()) throw Error("kernel curve: a GEMM curve needs at least 1 row");
  std::array<double, 3> lo{1e300, 1e300, 1e300}, hi{-1e300, -1e300, -1e300};
  std::vector<std::array<double, 4>> rows;  // log2 m, n, k and the fraction
  for (const auto& p : points) {
    if (!(p.m >= 1 && p.n >= 1 && p.k >= 1 && p.fraction > 0 && p.fraction <= 1.0))
      throw Error("kernel curve: a GEMM row needs dimensions >= 1 and a fraction of peak in (0, 1]");
    const std::array<double, 4> r{std::log2(p.m), std::log2(p.n), std::log2(p.k), p.fraction};
    for (std::size_t d = 0; d < 3; ++d) lo[d] = std::min(lo[d], r[d]), hi[d] = std::max(hi[d], r[d]);
    rows.push_back(r);
  }
  constexpr int side = GemmCurve::kSide;
  auto table = std::make_shared<std::vector<float>>(static_cast<std::size_t>(side * side * side));
  for (int a = 0; a < side; ++a)
    for (int b = 0; b < side; ++b)
      for (int c = 0; c < side; ++c) {
        const std::array<double, 3> q{std::clamp(double(GemmCurve::kFirst + a), lo[0], hi[0]),
                                      std::clamp(double(GemmCurve::kFirst + b), lo[1], hi[1]),
                                      std::clamp(double(GemmCurve::kFirst + c), lo[2], hi[2])};
        double num = 0, den = 0;
        for (const auto& r : rows) {
          const double d2 = (q[0] - r[0]) * (q[0] - r[0]) + (q[1] - r[1]) * (q[1] - r[1]) + (q[2] - r[2]) * (q[2] - r[2]);
          const double w = 1.0 / ((d2 + 1e-6) * (d2 + 1e-6));
          num += w * r[3];
          den += w;
        }
        (*table)[static_cast<std::size_t>((a * side + b) * side + c)] = static_cast<float>(num / den);
      }
  GemmCurve curve;
  curve.table = std::move(table);
  curve.rows = static_cast<std::int64_t>(points.size());
  return curve;
}

AttentionCurve fit_attention_curve(const std::vector<AttentionPoint>& points) {
  if (points.size() < 2) throw Error("kernel curve fit: an attention curve needs at least 2 rows");
  for (const auto& p : points)
    if (!(p.seq >= 1 && p.fraction > 0 && p.fraction <= 1.0))
      throw Error("kernel curve fit: an attention row needs a sequence >= 1 and a fraction of peak in (0, 1]");
  AttentionCurve best;
  double best_err = std::numeric_limits<double>::infinity();
  for (double log_half = 0.0; log_half <= std::log(1e6); log_half += 0.01) {
    const double half = std::exp(log_half);
    double mean = 0;
    for (const auto& p : points) mean += std::log(p.fraction) - std::log(p.seq / (p.seq + half));
    mean /= static_cast<double>(points.size());
    double err = 0;
    for (const auto& p : points) {
      const double r = std::log(p.fraction) - std::log(p.seq / (p.seq + half)) - mean;
      err += r * r;
    }
    if (err < best_err) best_err = err, best = {std::min(1.0, std::exp(mean)), half, 0};
  }
  best.rows = static_cast<std::int64_t>(points.size());
  return best;
}

DeviceKernels device_kernels_from_json(const json& j, double bf16_peak, double fp8_peak, std::string_view where) {
  const std::string w(where);
  if (!j.is_object() || j.value("format", std::string()) != "headroom-kernel-curves")
    throw Error(w + ": not a kernel-curves file (format headroom-kernel-curves)");
  DeviceKernels k;
  k.kind = j.value("kind", std::string("measured"));
  if (j.contains("machine") && j.at("machine").is_object()) {
    const json& m = j.at("machine");
    k.machine = m.contains("gpu") && m.at("gpu").is_string() ? m.at("gpu").get<std::string>()
                : m.contains("name") && m.at("name").is_string() ? m.at("name").get<std::string>()
                                                                   : std::string();
  }
  std::vector<GemmPoint> bf16, fp8;
  for (const json& r : j.value("gemm", json::array())) {
    if (!r.is_object() || r.contains("unsupported") || !r.contains("tflops") || !r.at("tflops").is_number()) continue;
    const std::string dtype = r.value("dtype", std::string("bf16"));
    const bool is_fp8 = dtype == "e4m3" || dtype == "e5m2";
    if (!is_fp8 && dtype != "bf16") continue;
    if (is_fp8 && !(fp8_peak > 0)) throw Error(w + ": FP8 GEMM rows for a GPU with no FP8 peak (fp8_dense_TFLOPs)");
    if (dtype == "e5m2") continue;  // the forward's E4M3 curve prices every FP8 GEMM (E5M2 gradients run near it)
    const double peak = is_fp8 ? fp8_peak : bf16_peak;
    (is_fp8 ? fp8 : bf16)
        .push_back({number_or(r, "m", 0), number_or(r, "n", 0), number_or(r, "k", 0),
                    std::min(1.0, r.at("tflops").get<double>() * 1e12 / peak)});
  }
  if (bf16.empty()) throw Error(w + ": no BF16 GEMM rows (a device's curves start with its BF16 GEMMs)");
  k.bf16 = fit_gemm_curve(bf16);
  if (!fp8.empty()) k.fp8 = fit_gemm_curve(fp8);
  // Attention: the first backend among these that the file has rows for (what TE and SDPA pick on the device).
  std::vector<AttentionPoint> att;
  for (const char* backend : {"cudnn", "flash2", "flash"}) {
    for (const json& r : j.value("attention", json::array())) {
      if (!r.is_object() || r.value("backend", std::string()) != backend || r.contains("unsupported")) continue;
      const double seq = number_or(r, "seq", 0);
      double tflops = number_or(r, "fwd_bwd_tflops", 0);
      const double secs = number_or(r, "fwd_bwd_seconds", 0);
      if (tflops <= 0 && secs > 0)  // forward 2·b·a·s²·d causal, backward 2.5x (FlashAttention-2's count)
        tflops = 3.5 * 2.0 * number_or(r, "batch", 0) * number_or(r, "heads", 0) * seq * seq *
                 number_or(r, "head_dim", 0) / secs / 1e12;
      if (seq >= 1 && tflops > 0) att.push_back({seq, std::min(1.0, tflops * 1e12 / bf16_peak)});
    }
    if (!att.empty()) {
      k.attention_backend = backend;
      break;
    }
  }
  if (att.size() >= 2) k.attention = fit_attention_curve(att);
  return k;
}

}  // namespace headroom
