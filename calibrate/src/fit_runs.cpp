#include "headroom/calibrate/fit_runs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "headroom/estimator/error.hpp"

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
  for (const auto& g : k.gpus) top = std::max({top, g.gemm, g.attention});
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
    const double held_out_scale = argmin_scale(runs, shipped, i, hi);
    fit.held_out_errors.push_back(step_time_error(runs[i], with_compute_scale(shipped, held_out_scale)));
  }
  return fit;
}

}  // namespace headroom::calibrate
