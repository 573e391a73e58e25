#include "headroom/calibration/fit_runs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "headroom/core/error.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom::calibrate {
namespace {

double predicted_step_s(const PricedRun& r, const PerfCoefficients& k) {
  return estimate_perf(r.model, r.cluster, r.layout, k).step_time_s;
}

// Σ (ln predicted − ln measured)² over `runs` except `skip` (npos: none), at compute scale s.
double log_loss(const std::vector<PricedRun>& runs, const PerfCoefficients& shipped, double s, std::size_t skip) {
  const PerfCoefficients k = with_compute_scale(shipped, s);
  double loss = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i == skip) continue;
    const double d = std::log(predicted_step_s(runs[i], k) / runs[i].measured_step_s);
    loss += d * d;
  }
  return loss;
}

// Golden-section search of a unimodal function on [lo, hi] in log space (the scale is a ratio).
double argmin_scale(const std::vector<PricedRun>& runs, const PerfCoefficients& shipped, std::size_t skip, double hi) {
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double a = std::log(0.05), b = std::log(hi);
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = log_loss(runs, shipped, std::exp(c), skip), fd = log_loss(runs, shipped, std::exp(d), skip);
  for (int it = 0; it < 60; ++it) {
    if (fc <= fd) {
      b = d, d = c, fd = fc;
      c = b - phi * (b - a);
      fc = log_loss(runs, shipped, std::exp(c), skip);
    } else {
      a = c, c = d, fc = fd;
      d = a + phi * (b - a);
      fd = log_loss(runs, shipped, std::exp(d), skip);
    }
  }
  return std::exp((a + b) / 2);
}

// The leave-one-out scales without refitting on n − 1 runs n times (n² predictions): the loss without run i is
// L − ℓ_i, where L, the loss over every run, is tabulated once per point of a grid in ln s that every run left out
// shares, and ℓ_i is run i's own term. Each left-out minimum is found on the grid (golden section over its indices,
// L unimodal as argmin_scale takes it) and placed between its neighbours by the parabola through them. The minima
// without one run crowd within O(1/n) of the full fit's, so L is needed at a few hundred points however many runs
// there are: about n·(points + 60) predictions.
class HeldOutScales {
 public:
  HeldOutScales(const std::vector<PricedRun>& runs, const PerfCoefficients& shipped, double hi)
      : runs_(runs),
        shipped_(shipped),
        lo_(std::log(0.05)),
        hi_(std::log(hi)),
        last_(static_cast<long>(std::ceil((hi_ - lo_) / kStep))) {}

  // The scale fitted on every run but run i.
  double without(std::size_t i) {
    const auto f = [&](long g) { return total(g) - own(i, g); };
    long a = 0, b = last_;
    while (b - a > 3) {
      const long c = a + static_cast<long>(std::floor(0.382 * static_cast<double>(b - a)));
      const long d = b - (c - a);
      if (f(c) <= f(d))
        b = d;
      else
        a = c;
    }
    long m = a;
    for (long g = a + 1; g <= b; ++g)
      if (f(g) < f(m)) m = g;
    if (m == 0 || m == last_) return std::exp(x(m));
    // The vertex of the parabola through the minimum and its neighbours, kept between them.
    const double x0 = x(m - 1), x1 = x(m), x2 = x(m + 1), f0 = f(m - 1), f1 = f(m), f2 = f(m + 1);
    const double num = (x1 - x0) * (x1 - x0) * (f1 - f2) - (x1 - x2) * (x1 - x2) * (f1 - f0);
    const double den = (x1 - x0) * (f1 - f2) - (x1 - x2) * (f1 - f0);
    const double vertex = den != 0 ? x1 - 0.5 * num / den : x1;
    return std::exp(std::clamp(vertex, x0, x2));
  }

 private:
  static constexpr double kStep = 1e-4;  // grid spacing in ln s

  [[nodiscard]] double x(long g) const { return std::min(hi_, lo_ + static_cast<double>(g) * kStep); }
  double total(long g) {
    const auto [it, fresh] = totals_.try_emplace(g, 0.0);
    if (fresh) it->second = log_loss(runs_, shipped_, std::exp(x(g)), runs_.size());
    return it->second;
  }
  double own(std::size_t i, long g) const {
    const double d =
        std::log(predicted_step_s(runs_[i], with_compute_scale(shipped_, std::exp(x(g)))) / runs_[i].measured_step_s);
    return d * d;
  }

  const std::vector<PricedRun>& runs_;
  const PerfCoefficients& shipped_;
  double lo_, hi_;
  long last_;
  std::unordered_map<long, double> totals_;
};

}  // namespace

PerfCoefficients with_compute_scale(const PerfCoefficients& k, double scale) {
  PerfCoefficients out = k;
  // The device entries it prices GPUs at become its own (written with it), scaled like the rest.
  out.gpus.insert(out.gpus.end(), out.device_gpus.begin(), out.device_gpus.end());
  out.device_gpus.clear();
  out.generic_source = "fitted";
  out.gemm_efficiency = std::min(1.0, k.gemm_efficiency * scale);
  out.attention_efficiency = std::min(1.0, k.attention_efficiency * scale);
  for (auto& g : out.gpus) {
    g.gemm = std::min(1.0, g.gemm * scale);
    g.attention = std::min(1.0, g.attention * scale);
  }
  return out;
}

double max_compute_scale(const PerfCoefficients& k) {
  double top = std::max(k.gemm_efficiency, k.attention_efficiency);
  for (const auto* entries : {&k.gpus, &k.device_gpus})
    for (const auto& g : *entries) top = std::max({top, g.gemm, g.attention});
  return top > 0 ? 1.0 / top : 1.0;
}

double step_time_error(const PricedRun& r, const PerfCoefficients& k) {
  return std::fabs(predicted_step_s(r, k) - r.measured_step_s) / r.measured_step_s;
}

double RunsFit::mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

RunsFit fit_compute_scale(const std::vector<PricedRun>& runs, const PerfCoefficients& shipped) {
  if (runs.size() < 2)
    throw Error("calibrating throughput needs at least two runs with a measured step time, tokens/s or TFLOP/s (" +
                std::to_string(runs.size()) + " given): one to fit and one to check it on");
  for (const auto& r : runs)
    if (!(r.measured_step_s > 0) || !std::isfinite(r.measured_step_s))
      throw Error(r.source + ": the measured step time must be positive");
  const double hi = max_compute_scale(shipped);
  RunsFit fit;
  fit.compute_scale = argmin_scale(runs, shipped, runs.size(), hi);
  fit.coefficients = with_compute_scale(shipped, fit.compute_scale);
  HeldOutScales held_out(runs, shipped, hi);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fit.shipped_errors.push_back(step_time_error(runs[i], shipped));
    fit.fitted_errors.push_back(step_time_error(runs[i], fit.coefficients));
    const PerfCoefficients left_out = with_compute_scale(shipped, held_out.without(i));
    fit.held_out_errors.push_back(step_time_error(runs[i], left_out));
    fit.held_out_ratios.push_back(runs[i].measured_step_s / predicted_step_s(runs[i], left_out));
  }
  // The fitted coefficients' band is theirs: the central 90% of the runs each left out of its own fit (the shipped
  // coefficients' band was computed for the shipped fit on other runs).
  fit.coefficients.step_time_band = band_from_ratios(fit.held_out_ratios, 0.9);
  fit.coefficients.step_time_bands_by_gpus.clear();
  fit.coefficients.step_time_band_origin =
      "calibrate --from-runs: " + std::to_string(runs.size()) + " runs, each predicted by the fit on the others";
  return fit;
}

namespace {

constexpr double kOomMarginBytes = 0.1 * kGiB;  // residual_fit.cpp's margin: an OOM run predicted this far over

double peak_with_fixed(const MemoryRun& r, const ResidualModel& shipped, double fixed_bytes) {
  ResidualModel k = shipped;
  k.fixed_bytes = fixed_bytes;
  return peak_memory_bytes(r.model, r.cluster, r.layout, k);
}

// What each run says of the fixed term, computed once: the runs' sums and orders from which the fit on every run
// but one is read in O(1) (the median of a sorted list without one entry, the bounds from the two most extreme
// values), instead of redoing the O(n) pass for each of n runs left out. The arithmetic is the pass's own.
class FixedTermBounds {
 public:
  FixedTermBounds(const std::vector<MemoryRun>& runs, const ResidualModel& shipped) {
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const MemoryRun& r = runs[i];
      const double base = peak_with_fixed(r, shipped, 0.0), capacity = r.cluster.gpu.usable_memory_bytes;
      if (r.oom) {
        ++ooms_;
        lows_.add(i, capacity - base + kOomMarginBytes);
        highs_.add(i, -capacity);
      } else {
        if (r.measured_peak_bytes > 0) offsets_.emplace_back(r.measured_peak_bytes - base, i);
        highs_.add(i, -std::min(capacity, capacity - base));
      }
    }
    std::sort(offsets_.begin(), offsets_.end());
    position_.assign(runs.size(), kNone);
    for (std::size_t k = 0; k < offsets_.size(); ++k) position_[offsets_[k].second] = k;
  }

  // The fixed term from the runs except `skip` (npos: none); nullopt when nothing identifies it.
  [[nodiscard]] std::optional<double> without(std::size_t skip) const {
    const bool skip_oom = ooms_ > 0 && lows_.holds(skip);
    const bool bounded = ooms_ - (skip_oom ? 1 : 0) > 0;
    const double lo = std::max(0.0, lows_.top(skip, 0.0));
    const double hi = -highs_.top(skip, -std::numeric_limits<double>::infinity());
    // The sorted offsets without the skipped run's.
    const std::size_t p = skip < position_.size() ? position_[skip] : kNone;
    const std::size_t n = offsets_.size() - (p != kNone ? 1 : 0);
    const auto at = [&](std::size_t k) { return offsets_[p != kNone && k >= p ? k + 1 : k].first; };
    if (n == 0 && !bounded) return std::nullopt;
    double x = lo;
    if (n > 0) x = n % 2 == 1 ? at(n / 2) : 0.5 * (at(n / 2 - 1) + at(n / 2));
    x = std::max(x, lo);             // no run that ran out of memory predicted to fit
    if (x > hi && hi >= lo) x = hi;  // then no trained run predicted out of memory, where both can hold
    return std::max(0.0, x);
  }

 private:
  // The largest value over the runs, and without any one of them: the two largest with their runs.
  struct Top2 {
    double first = -std::numeric_limits<double>::infinity(), second = first;
    std::size_t first_run = std::numeric_limits<std::size_t>::max();
    std::vector<bool> has;
    void add(std::size_t run, double v) {
      if (has.size() <= run) has.resize(run + 1, false);
      has[run] = true;
      if (v > first) {
        second = first;
        first = v, first_run = run;
      } else if (v > second) {
        second = v;
      }
    }
    [[nodiscard]] bool holds(std::size_t run) const { return run < has.size() && has[run]; }
    [[nodiscard]] double top(std::size_t skip, double none) const {
      const double v = skip == first_run ? second : first;
      return std::isinf(v) && v < 0 ? none : std::max(none, v);
    }
  };

  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  Top2 lows_, highs_;                                    // highs_ holds the upper bounds negated
  std::vector<std::pair<double, std::size_t>> offsets_;  // measured − predicted without it, and the run; sorted
  std::vector<std::size_t> position_;                    // each run's place in offsets_ (kNone: reports no peak)
  std::size_t ooms_ = 0;
};

}  // namespace

FixedMemoryFit fit_fixed_memory(const std::vector<MemoryRun>& runs, const ResidualModel& shipped) {
  FixedMemoryFit fit;
  const FixedTermBounds fixed_from(runs, shipped);
  const auto all = fixed_from.without(runs.size());
  fit.fixed_bytes = all.value_or(shipped.fixed_bytes);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const MemoryRun& r = runs[i];
    const double capacity = r.cluster.gpu.usable_memory_bytes;
    const double shipped_peak = peak_memory_bytes(r.model, r.cluster, r.layout, shipped);
    const double fitted_peak = peak_with_fixed(r, shipped, fit.fixed_bytes);
    ++fit.verdicts;
    fit.verdicts_right_shipped += (shipped_peak <= capacity) == !r.oom;
    fit.verdicts_right_fitted += (fitted_peak <= capacity) == !r.oom;
    fit.false_fits_fitted += r.oom && fitted_peak <= capacity;
    if (r.oom || !(r.measured_peak_bytes > 0)) continue;
    fit.shipped_errors.push_back(std::fabs(shipped_peak - r.measured_peak_bytes) / r.measured_peak_bytes);
    if (const auto without = fixed_from.without(i))
      fit.held_out_errors.push_back(std::fabs(peak_with_fixed(r, shipped, *without) - r.measured_peak_bytes) /
                                    r.measured_peak_bytes);
  }
  fit.identified = all.has_value() && fit.held_out_errors.size() >= 2;  // fitted, and checked on runs left out
  return fit;
}

}  // namespace headroom::calibrate
