// Validation of the throughput model against the 4D paper's measured TFLOP/s (Tables 3, 4, 10 in
// data/reference/4d_measured.csv): per (table, GPU count) column, rank the layouts that trained by predicted
// speed and score the pick (regret, top-1, TFLOP/s error) against the paper's own rule; and the fit of the
// coefficients to those tables with leave-one-table-out cross-validation. Used by `headroom validate` and by
// tests/golden/throughput_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "headroom/estimator/throughput.hpp"
#include "headroom/validation/paper_4d.hpp"

namespace headroom::validate {

// One measured run that trained, ready to predict.
struct PerfRun {
  RunConfig run;
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  double measured_tflops = 0;
};

[[nodiscard]] std::vector<PerfRun> perf_runs(const SpecLibrary& lib, const std::vector<MeasuredRun>& measured,
                                             const FrameworkProfile& framework);

// The 4D paper's rule (Sec. 4.2.1, 4.2.2): among layouts whose Eq. 18 estimate is at most 80% of the nominal
// memory, the smallest t·c·p, then the largest micro-batch. Returns the indices of the runs the rule cannot
// tell apart (ties); empty if none qualifies.
[[nodiscard]] std::vector<std::size_t> paper_rule_picks(const std::vector<PerfRun>& column);

struct ColumnScore {
  int table = 0;
  std::int64_t gpus = 0;
  int layouts = 0;
  std::string best;                                            // "(t,c,p,b)" measured fastest
  std::string ours;                                            // our pick: highest predicted TFLOP/s
  std::string anchor;                                          // the paper's rule (first of its ties)
  double best_tflops = 0, ours_tflops = 0, anchor_tflops = 0;  // measured
  double regret = 0;                                           // 1 − ours/best
  double anchor_regret = 0;                                    // mean over the rule's ties
  bool top1 = false;
  double anchor_top1 = 0;     // fraction of the rule's ties that are the best
  double mean_abs_error = 0;  // mean |pred − meas| / meas over the column's layouts
  double max_abs_error = 0;
  double rank_correlation = 0;           // Spearman's ρ between predicted and measured
  std::vector<double> step_time_ratios;  // per layout, measured / predicted step time
};

struct PerfScore {
  std::vector<ColumnScore> columns;
  double mean_regret = 0, worst_regret = 0, anchor_mean_regret = 0, anchor_worst_regret = 0;
  int top1 = 0;
  double anchor_top1 = 0;
  double mean_abs_error = 0;  // over all runs
};

// Scores the runs of the tables in `tables` (all when empty).
[[nodiscard]] PerfScore score_perf(const std::vector<PerfRun>& runs, const PerfCoefficients& coefficients,
                                   const std::vector<int>& tables = {});

// Fits the coefficients to the runs of `tables` (all when empty), starting from `start`: deterministic
// coordinate descent over a multiplicative grid, each coefficient kept inside a physical box. Objective: mean
// |log(pred/meas)| over runs plus the mean regret over columns. GPU efficiencies are fitted only for GPUs
// that appear in `tables`; others keep the start's values.
[[nodiscard]] PerfCoefficients fit_perf(const std::vector<PerfRun>& runs, const PerfCoefficients& start,
                                        const std::vector<int>& tables = {});

}  // namespace headroom::validate

namespace headroom::validate {

// The whole throughput validation as `headroom validate` reports it: shipped coefficients scored on every
// visible column, the refit on all tables (must equal the shipped ones), and leave-one-table-out: for each
// table, fit on the others (from the datasheet defaults) and score the held-out table.
struct PerfValidation {
  PerfCoefficients shipped, refit;
  bool shipped_is_fit = false;
  PerfScore score;                                  // shipped coefficients, all visible columns
  PerfScore datasheet;                              // datasheet defaults, no fit
  std::vector<std::pair<int, PerfScore>> held_out;  // table → its score under the fit without it
  PerfScore pooled;                                 // the held-out columns together
  ErrorBand held_out_band;                          // of the held-out runs' step times (kStepTimeBandCoverage of them)
  // The same by GPU count (how the error grows with scale), shipped as uncertainty.by_gpus.
  struct GpuCountResiduals {
    // What ships (uncertainty.by_gpus): the count, its runs and the pooled band widened by these runs' one. A count's
    // runs say how the error grows with scale, not that it narrows: the 18 runs at 128 and 256 GPUs are one table's
    // on one cluster, and their narrow low side misses held-out published runs that the pooled band covers.
    GpuCountBand shipped;
    double median_ratio = 0;  // measured / predicted step time
    ErrorBand runs_band;      // of these runs alone
  };
  std::vector<GpuCountResiduals> held_out_by_gpus;
};

// The share of held-out runs a shipped step-time band covers.
inline constexpr double kStepTimeBandCoverage = 0.9;
// A shipped band is the computed one to the 6 significant digits the data files keep.
[[nodiscard]] bool same_band(const ErrorBand& shipped, const ErrorBand& computed);
// The shipped bands by GPU count ("uncertainty.by_gpus") are the computed ones: the same counts, runs and bands.
[[nodiscard]] bool same_bands_by_gpus(const std::vector<GpuCountBand>& shipped,
                                      const std::vector<PerfValidation::GpuCountResiduals>& computed);

[[nodiscard]] PerfValidation validate_perf(const std::vector<PerfRun>& runs, const PerfCoefficients& shipped);

// Shipped and refitted coefficients agree to the 6 significant digits the shipped files keep.
[[nodiscard]] bool same_perf_coefficients(const PerfCoefficients& a, const PerfCoefficients& b);

// The goals: mean regret ≤ 1.5%, worst ≤ 5% (shipped coefficients, visible columns).
inline constexpr double kPerfMeanRegretGoal = 0.015;
inline constexpr double kPerfWorstRegretGoal = 0.05;

// A coefficient the fits may move, inside its physical box.
struct FitParameter {
  double* value;
  double lo, hi;
};
// Deterministic coordinate descent over a multiplicative grid (and each box's ends): each round tries every
// parameter's candidates in turn and keeps one only if it lowers the objective; stops after `rounds` or a round
// without improvement. Leaves each parameter at its best value.
void coordinate_descent(const std::vector<FitParameter>& parameters, int rounds,
                        const std::function<double()>& objective);

}  // namespace headroom::validate
