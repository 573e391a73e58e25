#include "headroom/estimator/uncertainty.hpp"

#include <algorithm>
#include <cmath>

namespace headroom {

ErrorBand band_from_ratios(std::vector<double> ratios, double coverage) {
  std::erase_if(ratios, [](double r) { return !std::isfinite(r) || r <= 0; });
  if (ratios.empty()) return {};
  std::sort(ratios.begin(), ratios.end());
  const double tail = std::clamp((1.0 - coverage) / 2.0, 0.0, 0.5);
  const auto rank = [&](double q) {  // nearest-rank quantile
    const auto n = static_cast<double>(ratios.size());
    const auto i = static_cast<std::size_t>(std::clamp(std::ceil(q * n) - 1.0, 0.0, n - 1.0));
    return ratios[i];
  };
  return {std::max(0.0, 1.0 - rank(tail)), std::max(0.0, rank(1.0 - tail) - 1.0), true};
}

ErrorBand widened(const ErrorBand& a, const ErrorBand& b) {
  if (!a.known) return b;
  if (!b.known) return a;
  return {std::max(a.low, b.low), std::max(a.high, b.high), true};
}

std::string band_source(const ErrorBand& band, std::string_view what, std::string_view predicted,
                        std::string_view where, std::string_view origin) {
  if (!band.known)
    return "none: no held-out data behind the " + std::string(what) + " (the " + std::string(predicted) +
           " is the prediction's)";
  std::string s = "held-out residuals of the ";
  s.append(what);
  if (!where.empty()) s.append(" ").append(where);
  return s.append(" (").append(origin).append(")");
}

ErrorBand band_from_verdicts(std::span<const HeldOutVerdict> runs) {
  if (runs.empty()) return {};
  ErrorBand b{0.0, 0.0, true};
  for (const auto& r : runs) {
    if (!(r.predicted_bytes > 0)) continue;
    const double ratio = r.capacity_bytes / r.predicted_bytes;
    if (!r.oom && ratio < 1.0) b.low = std::max(b.low, 1.0 - ratio);    // trained, predicted over capacity
    if (r.oom && ratio >= 1.0) b.high = std::max(b.high, ratio - 1.0);  // out of memory, predicted to fit
  }
  return b;
}

MemoryVerdict memory_verdict(double predicted_bytes, double capacity_bytes, const ErrorBand& band) {
  if (!band.known) return predicted_bytes <= capacity_bytes ? MemoryVerdict::fits : MemoryVerdict::oom;
  if (band.upper(predicted_bytes) < capacity_bytes) return MemoryVerdict::fits;
  if (band.lower(predicted_bytes) > capacity_bytes) return MemoryVerdict::oom;
  return MemoryVerdict::uncertain;
}

std::string_view to_string(MemoryVerdict v) {
  switch (v) {
    case MemoryVerdict::fits: return "fits";
    case MemoryVerdict::oom: return "oom";
    case MemoryVerdict::uncertain: return "uncertain";
  }
  return "fits";
}

}  // namespace headroom
