#include "headroom/calibrate/fit_runs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

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
  for (std::size_t i = 0; i < runs.size(); ++i) {
    fit.shipped_errors.push_back(step_time_error(runs[i], shipped));
    fit.fitted_errors.push_back(step_time_error(runs[i], fit.coefficients));
    const PerfCoefficients held_out = with_compute_scale(shipped, argmin_scale(runs, shipped, i, hi));
    fit.held_out_errors.push_back(step_time_error(runs[i], held_out));
    fit.held_out_ratios.push_back(runs[i].measured_step_s / predicted_step_s(runs[i], held_out));
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

// The fixed term from the runs except `skip` (npos: none); nullopt when nothing identifies it.
std::optional<double> fixed_from(const std::vector<MemoryRun>& runs, const ResidualModel& shipped, std::size_t skip) {
  std::vector<double> offsets;
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  bool bounded = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (i == skip) continue;
    const MemoryRun& r = runs[i];
    const double base = peak_with_fixed(r, shipped, 0.0), capacity = r.cluster.gpu.usable_memory_bytes;
    hi = std::min(hi, capacity);
    if (r.oom) {
      lo = std::max(lo, capacity - base + kOomMarginBytes), bounded = true;
    } else {
      if (r.measured_peak_bytes > 0) offsets.push_back(r.measured_peak_bytes - base);
      hi = std::min(hi, capacity - base);
    }
  }
  if (offsets.empty() && !bounded) return std::nullopt;
  double x = lo;
  if (!offsets.empty()) {
    std::sort(offsets.begin(), offsets.end());
    const std::size_t n = offsets.size();
    x = n % 2 == 1 ? offsets[n / 2] : 0.5 * (offsets[n / 2 - 1] + offsets[n / 2]);
  }
  x = std::max(x, lo);             // no run that ran out of memory predicted to fit
  if (x > hi && hi >= lo) x = hi;  // then no trained run predicted out of memory, where both can hold
  return std::max(0.0, x);
}

}  // namespace

FixedMemoryFit fit_fixed_memory(const std::vector<MemoryRun>& runs, const ResidualModel& shipped) {
  FixedMemoryFit fit;
  const auto all = fixed_from(runs, shipped, runs.size());
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
    if (const auto without = fixed_from(runs, shipped, i))
      fit.held_out_errors.push_back(std::fabs(peak_with_fixed(r, shipped, *without) - r.measured_peak_bytes) /
                                    r.measured_peak_bytes);
  }
  fit.identified = all.has_value() && fit.held_out_errors.size() >= 2;  // fitted, and checked on runs left out
  return fit;
}

}  // namespace headroom::calibrate
