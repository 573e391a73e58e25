#include "headroom/estimator/kernel_curves.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"

namespace headroom {
namespace {

using nlohmann::json;

}  // namespace

struct GemmTable {
  static constexpr std::size_t kSide = GemmCurve::kSide, kNodes = kSide * kSide * kSide;
  std::vector<std::array<double, 4>> rows;               // log2 m, n, k and the fraction
  std::array<double, 3> lo{}, hi{};                      // the rows' range of each log2 dimension
  mutable std::array<std::atomic<float>, kNodes> nodes;  // NaN: not computed yet

  GemmTable() {
    for (auto& n : nodes) n.store(std::numeric_limits<float>::quiet_NaN(), std::memory_order_relaxed);
  }

  // The node's fraction: the inverse-distance-weighted mean (weight 1/d^4 in log2 of the dimensions) of the rows,
  // at the node's dimensions clamped to the rows' range.
  [[nodiscard]] float node(std::size_t index) const {
    const float cached = nodes[index].load(std::memory_order_relaxed);
    if (!std::isnan(cached)) return cached;
    const std::array<std::size_t, 3> at{index / (kSide * kSide), index / kSide % kSide, index % kSide};
    std::array<double, 3> q{};
    for (std::size_t d = 0; d < 3; ++d)
      q[d] = std::clamp(static_cast<double>(GemmCurve::kFirst) + static_cast<double>(at[d]), lo[d], hi[d]);
    double num = 0, den = 0;
    for (const auto& r : rows) {
      const double d2 = (q[0] - r[0]) * (q[0] - r[0]) + (q[1] - r[1]) * (q[1] - r[1]) + (q[2] - r[2]) * (q[2] - r[2]);
      const double w = 1.0 / ((d2 + 1e-6) * (d2 + 1e-6));
      num += w * r[3];
      den += w;
    }
    const auto value = static_cast<float>(num / den);
    nodes[index].store(value, std::memory_order_relaxed);
    return value;
  }
};

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
  const GemmTable& v = *c.table;
  double f = 0;
  for (int corner = 0; corner < 8; ++corner) {
    double weight = 1.0;
    std::size_t index = 0;
    for (std::size_t d = 0; d < 3; ++d) {
      const int bit = (corner >> d) & 1;
      weight *= bit ? w[d] : 1.0 - w[d];
      index = index * side + static_cast<std::size_t>(i[d] + bit);
    }
    f += weight * v.node(index);
  }
  return std::min(1.0, f);
}

GemmCurve fit_gemm_curve(const std::vector<GemmPoint>& points) {
  if (points.empty()) throw Error("kernel curve: a GEMM curve needs at least 1 row");
  auto table = std::make_shared<GemmTable>();
  table->lo = {1e300, 1e300, 1e300}, table->hi = {-1e300, -1e300, -1e300};
  for (const auto& p : points) {
    if (!(p.m >= 1 && p.n >= 1 && p.k >= 1 && p.fraction > 0 && p.fraction <= 1.0))
      throw Error("kernel curve: a GEMM row needs dimensions >= 1 and a fraction of peak in (0, 1]");
    const std::array<double, 4> r{std::log2(p.m), std::log2(p.n), std::log2(p.k), p.fraction};
    for (std::size_t d = 0; d < 3; ++d)
      table->lo[d] = std::min(table->lo[d], r[d]), table->hi[d] = std::max(table->hi[d], r[d]);
    table->rows.push_back(r);
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
  for (int step = 0; step <= 1400; ++step) {  // half from 1 to about 1.2e6 tokens, 1% apart
    const double half = std::exp(0.01 * step);
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

const AttentionCurve* DeviceKernels::attention_curve(std::string_view backend, double head_dim) const {
  const AttentionCurve* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const auto& a : attention) {
    const double distance = std::abs(std::log2(a.head_dim) - std::log2(head_dim));
    if (a.backend == backend && distance < best_distance) best = &a.curve, best_distance = distance;
  }
  return best;
}

namespace {

// A key's string, the fallback when absent; any other type is refused, naming the key.
std::string string_field(const json& j, const char* key, const std::string& fallback, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (!it->is_string()) throw Error(where + ": " + key + " " + it->dump() + " is not a string");
  return it->get<std::string>();
}

// A key's number; absent or not a number is refused, naming the key (nothing is read as a guessed 0).
double number_field(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) throw Error(where + ": " + key + " must be a number");
  return it->get<double>();
}

const json& array_field(const json& j, const char* key, const std::string& where) {
  static const json empty = json::array();
  const auto it = j.find(key);
  if (it == j.end()) return empty;
  if (!it->is_array()) throw Error(where + ": " + key + " must be an array of rows");
  return *it;
}

// A row's fraction of `peak`; above it is no measurement of this GPU.
double fraction_of_peak(double tflops, double peak, const std::string& where) {
  const double f = tflops * 1e12 / peak;
  if (!(f > 0.0 && f <= 1.0))
    throw Error(where + ": " + std::to_string(tflops) +
                " TFLOP/s is not a fraction of the GPU's peak in (0, 1] (peak " + std::to_string(peak / 1e12) +
                " TFLOP/s)");
  return f;
}

}  // namespace

DeviceKernels device_kernels_from_json(const json& j, double bf16_peak, double fp8_peak, std::string_view where) {
  const std::string w(where);
  if (!j.is_object() || !j.contains("format") || j.at("format") != "headroom-kernel-curves")
    throw Error(w + ": not a kernel-curves file (format headroom-kernel-curves)");
  DeviceKernels k;
  k.kind = string_field(j, "kind", "measured", w);
  if (k.kind != "measured" && k.kind != "published")
    throw Error(w + ": kind '" + k.kind + "' (valid: measured, published)");
  if (j.contains("machine")) {
    if (!j.at("machine").is_object()) throw Error(w + ": machine must be an object");
    k.machine = string_field(j.at("machine"), "gpu", string_field(j.at("machine"), "name", "", w), w);
  }
  std::vector<GemmPoint> bf16, fp8;
  const json& gemm = array_field(j, "gemm", w);
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    const json& r = gemm[i];
    const std::string row = w + ": gemm[" + std::to_string(i) + "]";
    if (!r.is_object()) throw Error(row + " must be an object");
    if (r.contains("unsupported")) continue;  // the sweep's record of a shape the library refused
    const std::string dtype = string_field(r, "dtype", "bf16", row);
    // e5m2xe4m3: the sweep's E5M2 gradient times E4M3 weight (the hybrid format's backward GEMMs)
    if (dtype != "bf16" && dtype != "e4m3" && dtype != "e5m2" && dtype != "e5m2xe4m3")
      throw Error(row + ": dtype '" + dtype + "' (valid: bf16, e4m3, e5m2, e5m2xe4m3)");
    const bool is_fp8 = dtype != "bf16";
    if (is_fp8 && !(fp8_peak > 0)) throw Error(row + ": an FP8 GEMM on a GPU with no FP8 peak (fp8_dense_TFLOPs)");
    const GemmPoint p{number_field(r, "m", row), number_field(r, "n", row), number_field(r, "k", row),
                      fraction_of_peak(number_field(r, "tflops", row), is_fp8 ? fp8_peak : bf16_peak, row)};
    if (dtype != "bf16" && dtype != "e4m3")
      continue;  // the forward's E4M3 curve prices every FP8 GEMM (E5M2 gradients run near it)
    (is_fp8 ? fp8 : bf16).push_back(p);
  }
  if (bf16.empty()) throw Error(w + ": no BF16 GEMM rows (a device's curves start with its BF16 GEMMs)");
  k.bf16 = fit_gemm_curve(bf16);
  if (!fp8.empty()) k.fp8 = fit_gemm_curve(fp8);
  // Attention: a curve for each backend and head dimension with rows (a measured profile's SDPA "flash" is
  // FlashAttention-2), the rows read once and gathered by backend in kAttentionBackends' order, then head dimension.
  const json& attention = array_field(j, "attention", w);
  std::array<std::map<double, std::vector<AttentionPoint>>, kAttentionBackends.size()> by_backend;
  for (std::size_t i = 0; i < attention.size(); ++i) {
    const json& r = attention[i];
    const std::string row = w + ": attention[" + std::to_string(i) + "]";
    if (!r.is_object()) throw Error(row + " must be an object");
    std::string named = string_field(r, "backend", "", row);
    if (named == "flash") named = "flash2";
    if (named == "math") continue;  // SDPA's unfused reference (a CPU dry run): no training runs it
    const auto b = std::find(kAttentionBackends.begin(), kAttentionBackends.end(), named);
    if (b == kAttentionBackends.end())
      throw Error(row + ": backend '" + named + "' (valid: cudnn, flash2, flash, math)");
    if (r.contains("unsupported")) continue;
    const double seq = number_field(r, "seq", row), head_dim = number_field(r, "head_dim", row);
    if (!(seq >= 1)) throw Error(row + ": seq must be at least 1");
    if (!(head_dim >= 1 && head_dim <= 1024)) throw Error(row + ": head_dim must be in [1, 1024]");
    // Published rows give fwd+bwd TFLOP/s; measured ones the seconds, counted as FlashAttention-2 does: forward
    // 2·b·a·s²·d with the causal mask, backward 2.5x.
    const double tflops = r.contains("fwd_bwd_tflops")
                              ? number_field(r, "fwd_bwd_tflops", row)
                              : 3.5 * 2.0 * number_field(r, "batch", row) * number_field(r, "heads", row) * seq * seq *
                                    number_field(r, "head_dim", row) / number_field(r, "fwd_bwd_seconds", row) / 1e12;
    by_backend[static_cast<std::size_t>(b - kAttentionBackends.begin())][head_dim].push_back(
        {seq, fraction_of_peak(tflops, bf16_peak, row)});
  }
  for (std::size_t b = 0; b < kAttentionBackends.size(); ++b)
    for (const auto& [head_dim, points] : by_backend[b]) {
      if (points.size() < 2)
        throw Error(w + ": " + std::string(kAttentionBackends[b]) + " attention at head_dim " +
                    std::to_string(static_cast<std::int64_t>(head_dim)) +
                    " has one row (a curve needs at least 2 sequences)");
      k.attention.push_back({std::string(kAttentionBackends[b]), head_dim, fit_attention_curve(points)});
    }
  return k;
}

}  // namespace headroom
