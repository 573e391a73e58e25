// How far a prediction can be off, from the held-out residuals of the coefficients that made it: `headroom validate`
// computes the bands from its leave-one-out folds and the data files ship them (framework "residual.uncertainty",
// performance "uncertainty"); estimate and rank apply them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

// The measured value lies within predicted × [1 − low, 1 + high]. known = false: no held-out data behind it.
struct ErrorBand {
  double low = 0, high = 0;
  bool known = false;
  [[nodiscard]] double lower(double predicted) const { return predicted * (1.0 - low); }
  [[nodiscard]] double upper(double predicted) const { return predicted * (1.0 + high); }
};

// A band computed from the held-out runs of one GPU count.
struct GpuCountBand {
  std::int64_t gpus = 0;
  int runs = 0;
  ErrorBand band;
};

// From measured / predicted ratios of held-out runs: the central `coverage` of them (nearest-rank quantiles),
// widened to include 1. Unknown when `ratios` is empty.
[[nodiscard]] ErrorBand band_from_ratios(std::vector<double> ratios, double coverage);

// The narrowest band containing both.
[[nodiscard]] ErrorBand widened(const ErrorBand& a, const ErrorBand& b);

// Where a band comes from, for an estimate's interval_source: the held-out residuals of `what` (at `where`, e.g. a
// GPU count's runs, when given) computed by `origin`, or none, in which case `predicted` (the verdict, the step time)
// is the prediction's.
[[nodiscard]] std::string band_source(const ErrorBand& band, std::string_view what, std::string_view predicted,
                                      std::string_view where = {}, std::string_view origin = "headroom validate");

// A held-out run seen only as trained or out of memory, with the peak the fit without it predicted.
struct HeldOutVerdict {
  double predicted_bytes = 0;
  double capacity_bytes = 0;
  bool oom = false;
};
// The narrowest band that explains every held-out outcome: a run that trained though predicted over capacity
// needs low ≥ 1 − capacity/predicted, one that ran out of memory though predicted under it needs
// high ≥ capacity/predicted − 1. Unknown when `runs` is empty.
[[nodiscard]] ErrorBand band_from_verdicts(std::span<const HeldOutVerdict> runs);

enum class MemoryVerdict { fits, oom, uncertain };
// fits: even the band's upper end is within capacity; oom: even its lower end is over; else uncertain. An unknown
// band decides on the prediction alone.
[[nodiscard]] MemoryVerdict memory_verdict(double predicted_bytes, double capacity_bytes, const ErrorBand& band);
[[nodiscard]] std::string_view to_string(MemoryVerdict v);

}  // namespace headroom
