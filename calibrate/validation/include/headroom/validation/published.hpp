// Validation of the throughput model on published large-scale runs (data/reference/published_runs.csv:
// Narayanan et al. 2021 Table 1, Korthikanti et al. 2022 Table 5; GPT 1.7B–1T on up to 3,072 A100 80GB) that
// nothing is fitted on: every score here is held out. Each row is priced as Megatron-LM ran it then (FP16, no
// FlashAttention, no distributed optimizer, the row's recompute, SP and gradient overlap) and compared as
// step time; the paper's TFLOP/s (Narayanan et al. 2021 Eq. 3) is converted back to seconds. Calculon's
// predictions for the same rows (data/reference/published_runs_calculon.csv, tools/scripts/
// calculon_published_runs.py) are scored next to ours. Used by `headroom validate` and its golden test.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/validation/paper_4d.hpp"

namespace headroom::validate {

struct PublishedRun {
  std::string source;  // the citation up to its first " (", ";" or " Table": "Narayanan et al. 2021"
  std::string id;      // "N21-1.7b"
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  double measured_step_s = 0;    // 0 for a run that ran out of memory
  double calculon_step_s = 0;    // Calculon's prediction; 0 where it has none
  bool out_of_memory = false;    // the source says it ran out of memory (column outcome)
  double measured_peak_gib = 0;  // the peak the source printed (column peak_memory_gib), 0 where none
};

// Reads the runs (`runs_csv`) and Calculon's predictions (`calculon_csv`, optional: absent = none), the
// layouts from the `framework` profile's defaults overridden by each row's columns.
[[nodiscard]] std::vector<PublishedRun> published_runs(const SpecLibrary& lib, const FrameworkProfile& framework,
                                                       const std::filesystem::path& runs_csv,
                                                       const std::filesystem::path& calculon_csv);

struct PublishedSourceScore {
  std::string source;
  int runs = 0;
  double mean_abs_error = 0;  // mean |predicted − measured| / measured step time
  double mean_error = 0;      // signed: > 0 predicts slower than measured
  double worst_abs_error = 0;
  int inside_band = 0;  // runs measured inside the held-out step-time band at their GPU count (step_time_band_for)
  int banded = 0;       // runs whose coefficients have such a band (none: nothing held out behind them)
  int calculon_runs = 0;
  double calculon_mean_abs_error = 0;
};

struct PublishedRunScore {
  const PublishedRun* run = nullptr;
  double predicted_step_s = 0;
  double error = 0;  // predicted / measured − 1
  bool inside_band = false;
  bool banded = false;
};

struct PublishedValidation {
  std::vector<PublishedRunScore> runs;
  std::vector<PublishedSourceScore> sources;  // in the file's order of first appearance
  PublishedSourceScore all;                   // every run together
};

// The goal: at most 10% mean absolute error per source, held out.
inline constexpr double kPublishedMeanErrorGoal = 0.10;

[[nodiscard]] PublishedValidation validate_published(const std::vector<PublishedRun>& runs,
                                                     const PerfCoefficients& coefficients);

// The predicted peak memory of each run (estimator/memory.hpp peak_memory_bytes under the framework's residual) against
// what it did: a run that trained predicted oom, or one that ran out of memory predicted to fit, is a wrong verdict
// (uncertain is neither). Where the source printed a peak it is compared too; torchtitan prints the caching
// allocator's peak reserved bytes, which hold fragmentation but not the CUDA context, so this is information, not a
// goal.
struct PublishedMemoryScore {
  const PublishedRun* run = nullptr;
  double predicted_peak_gib = 0;
  MemoryVerdict verdict = MemoryVerdict::uncertain;
  double error = 0;  // predicted / printed peak − 1; 0 where none was printed
};
struct PublishedMemoryValidation {
  std::vector<PublishedMemoryScore> runs;
  int trained = 0, trained_predicted_oom = 0;  // runs that trained, and of them those predicted oom
  int out_of_memory = 0, oom_predicted_fits = 0;
  int printed = 0;  // runs with a printed peak
  double mean_error = 0, mean_abs_error = 0;
};
[[nodiscard]] PublishedMemoryValidation validate_published_memory(const std::vector<PublishedRun>& runs,
                                                                  const FrameworkProfile& framework);
// The framework's stack_gemm_fraction (perf_coefficients.hpp), the one coefficient between a device's isolated GEMM
// curve and the GEMMs of that framework's steps, fitted on the published runs of GPUs priced by their kernel curves:
// the value on a 0.01 grid over [0.5, 1] (half the isolated curve to all of it) with the least mean
// |log(predicted/measured)|, and each source's error with the value fitted on the others. Runs of models with
// experts are not given to it: their steps hold costs the model does not price in full (expert load imbalance), which
// a GEMM fraction fitted on them would carry to every dense model.
struct StackFractionFold {
  std::string source;
  int runs = 0;
  double fraction = 0;                 // fitted without this source
  double held_out_mean_abs_error = 0;  // this source's mean |predicted − measured| / measured at that fraction
};
struct StackFractionFit {
  std::string attention_backend;  // the attention curve the steps were priced with
  double shipped = 0, fitted = 0;
  int runs = 0;
  double mean_abs_log_error = 0;  // at the fitted value
  std::vector<StackFractionFold> leave_one_source_out;
  double held_out_mean_abs_error = 0;  // over every run, each in its source's fold
  bool shipped_is_fit = false;
};
[[nodiscard]] StackFractionFit fit_stack_gemm_fraction(const std::vector<PublishedRun>& runs,
                                                       const PerfCoefficients& shipped);
// The same fit with each run's attention priced as its software ran it (its attention_backend, else the
// framework's: attention_backend kEachRunsAttention, first), then with one curve a device can have
// (kernel_curves.hpp kAttentionBackends) for every run: the form of the attention, chosen by the held-out error
// (each run's must be the least).
inline constexpr std::string_view kEachRunsAttention = "each run's";
[[nodiscard]] std::vector<StackFractionFit> stack_fraction_by_attention_backend(const std::vector<PublishedRun>& runs,
                                                                                const PerfCoefficients& shipped);

// Published nccl-tests / rccl-tests bus bandwidths (data/reference/published_collectives.csv) against the link model
// the estimator prices collectives with (throughput.hpp ring_collective_seconds on the cluster's links at the
// Framework's efficiencies): NCCL efficiency against message size, ring size and node count.
struct PublishedCollective {
  std::string source;  // short citation
  std::string id;
  ClusterSpec cluster;
  Collective op = Collective::all_reduce;
  std::int64_t gpus = 0, gpus_per_node = 0;
  double bytes = 0;              // as nccl-tests prints the size
  double busbw_bytes_per_s = 0;  // measured
};
[[nodiscard]] std::vector<PublishedCollective> published_collectives(const SpecLibrary& lib,
                                                                     const std::filesystem::path& csv);

struct CollectiveScore {
  const PublishedCollective* row = nullptr;
  double predicted_busbw_bytes_per_s = 0;
  double error = 0;  // predicted / measured busbw − 1 (> 0: the model's link is faster)
};
struct CollectiveGroupScore {
  std::string group;  // "one node, <= 64 MiB", "one node, > 64 MiB", "across nodes"
  int rows = 0;
  double mean_abs_error = 0, mean_error = 0;
};
struct CollectiveValidation {
  std::vector<CollectiveScore> rows;
  std::vector<CollectiveGroupScore> groups;
  // The intra-node link's efficiency as these rows measure it (intra_node_busbw_fraction), and whether the shipped
  // constant (perf_coefficients.hpp kMeasuredIntraNodeEfficiency) is that value to two digits.
  double intra_node_busbw_fraction = 0;
  int intra_node_rows = 0;
  bool shipped_is_measured = false;
};
// The mean, over the one-node rows of 1 GiB and more (where busbw has stopped growing with the message), of busbw
// over the cluster's per-direction intra-node datasheet bandwidth: what NCCL's collectives reach on the node's links.
[[nodiscard]] double intra_node_busbw_fraction(const std::vector<PublishedCollective>& rows, int* used = nullptr);
[[nodiscard]] CollectiveValidation validate_collectives(const std::vector<PublishedCollective>& rows,
                                                        const PerfCoefficients& coefficients);

}  // namespace headroom::validate
