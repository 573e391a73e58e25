// Calibration from a user's own runs (`calibrate --from-runs`): the throughput coefficients that a handful of
// measured step times can pin down, chosen and checked by leave-one-out error against the shipped ones.
#pragma once

#include <string>
#include <vector>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::calibrate {

// A measured run resolved into what the model prices.
struct PricedRun {
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  double measured_step_s = 0;
  std::string source;
};

// The compute efficiencies (large-GEMM and attention, generic and per GPU) scaled by one factor: the one
// coefficient step times of whole runs identify without kernel timings. Efficiencies are capped at 1.
[[nodiscard]] PerfCoefficients with_compute_scale(const PerfCoefficients& k, double scale);
// The largest scale that keeps every compute efficiency of `k` at or below 1 (a GEMM cannot beat the peak).
[[nodiscard]] double max_compute_scale(const PerfCoefficients& k);

// |predicted − measured| / measured of one run's step time.
[[nodiscard]] double step_time_error(const PricedRun& r, const PerfCoefficients& k);

struct RunsFit {
  double compute_scale = 1;
  PerfCoefficients coefficients;  // the shipped ones with the scale applied; their step-time band from held_out_ratios
  std::vector<double> shipped_errors;   // per run, shipped coefficients
  std::vector<double> fitted_errors;    // per run, in sample
  std::vector<double> held_out_errors;  // per run, fitted on the others (leave-one-out)
  std::vector<double> held_out_ratios;  // the same as measured / predicted step time
  [[nodiscard]] static double mean(const std::vector<double>& v);
};

// Least squares in log step time over the scale, inside (0, max_compute_scale]; then leave-one-out. Needs at
// least two runs (one to fit, one to hold out): fewer is an Error saying so.
[[nodiscard]] RunsFit fit_compute_scale(const std::vector<PricedRun>& runs, const PerfCoefficients& shipped);

// ---- memory ----

// A run's memory outcome: trained (with the framework's max reserved when reported) or out of memory.
struct MemoryRun {
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  bool oom = false;
  double measured_peak_bytes = 0;  // 0: not reported
  std::string source;
};

// The fixed term of the residual (per GPU: context, communicators, workspaces, what the allocator holds beyond
// the tensors): the one memory coefficient a handful of a cluster's runs identify; the other terms stay the
// framework's. Fitted as the median of measured − predicted-without-it over the runs that report a peak, then
// moved into the range the verdicts allow (every out-of-memory run predicted at least 0.1 GiB over capacity,
// then every trained run under it), inside [0, capacity].
struct FixedMemoryFit {
  bool identified = false;  // at least two runs report a peak: each is predicted by a fit on the others
  double fixed_bytes = 0;
  std::vector<double> shipped_errors;   // |predicted − measured| / measured peak, per run with a peak, shipped
  std::vector<double> held_out_errors;  // the same, the fixed term fitted without that run
  int verdicts = 0, verdicts_right_shipped = 0, verdicts_right_fitted = 0, false_fits_fitted = 0;
};
[[nodiscard]] FixedMemoryFit fit_fixed_memory(const std::vector<MemoryRun>& runs, const ResidualModel& shipped);

}  // namespace headroom::calibrate
