// Validation of the throughput model against the FSDP+TP+LoRA thesis (the FSDP+TP+LoRA thesis,
// data/reference/thesis.json): tokens/s and processing time per sample (PTS) vs context length on one node
// (Tables B.5, B.6) and vs node count at sequence 10,000 (Tables 4.1, 4.3); Llama 3.1 70B, LoRA, PyTorch
// FSDP(+TP), lumi-mi250x. The coefficients of data/perf/pytorch-fsdp.json are fitted to these cells only,
// with leave-one-configuration-out and leave-one-table-out cross-validation. Used by `headroom validate` and
// tests/golden/thesis_perf_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::validate {

// The LoRA rank of the throughput runs. The thesis does not print it next to Tables B.5/4.1; its Table B.1
// (maximum tokens per node, which sets their batch sizes) equals the rank-128 row of Table B.4 times the FSDP
// size (88,000 ≈ 8 × 11,500; 80,000 = 4 × 20,000; 82,000 = 2 × 41,000; 65,000 = 1 × 65,000), and Sec. 4.2.1
// quotes rank 128. Adapters on q, k, v, o, gate, up, down (the profile's assumption).
inline constexpr std::int64_t kThesisLoraRank = 128;

// Measured pairs whose values differ by less than this are ties: no order to get right (Table B.2 prints
// FSDP-TP (2,4) vs (1,8) differences of 0.05–1.9% as the same performance).
inline constexpr double kThesisTieTolerance = 0.02;
inline constexpr double kThesisMeanErrorGoal = 0.15;

struct ThesisPerfCell {
  std::string table;   // "B.5" (one node, by context length) or "4.1" (by node count, seq 10,000)
  std::string config;  // the single-node shape as the thesis names it, "fsdp4_tp2"
  std::int64_t fsdp = 1, tp = 1, nodes = 1;
  Layout layout;            // tp, dp = fsdp × nodes, mbs = samples per FSDP rank, gbs = mbs × dp, LoRA rank 128
  double tokens_per_s = 0;  // measured, whole job (Table B.5 / 4.1)
  double pts_s = 0;         // measured (Table B.6 / 4.3)
  [[nodiscard]] std::int64_t column() const { return table == "B.5" ? layout.seq : nodes; }
};

struct ThesisPerfData {
  ModelSpec model;
  ClusterSpec cluster;
  std::vector<ThesisPerfCell> cells;
};

// Weak scaling (thesis Sec. 4.2.2, 4.3): every node processes about Table B.1's maximum tokens, one micro-batch
// per step; samples per FSDP rank = max(1, ⌊max tokens per node / (seq · FSDP size per node)⌋) (never above
// the maximum, which the runs could not exceed without OOM).
[[nodiscard]] std::int64_t thesis_samples_per_rank(std::int64_t max_tokens_per_node, std::int64_t seq,
                                                   std::int64_t fsdp_per_node);

// The 38 cells of Tables B.5/B.6 and 4.1/4.3 (PTS read from the matching cell), layouts from `framework`.
[[nodiscard]] ThesisPerfData thesis_perf_data(const SpecLibrary& lib, const FrameworkProfile& framework);

struct ThesisCellScore {
  const ThesisPerfCell* cell = nullptr;
  double tokens_per_s = 0, pts_s = 0;      // predicted
  double tokens_error = 0, pts_error = 0;  // |pred − meas| / meas
};

struct ThesisPerfScore {
  std::vector<ThesisCellScore> cells;
  double mean_tokens_error = 0, max_tokens_error = 0, mean_pts_error = 0, max_pts_error = 0;
  int ordered_pairs = 0, concordant_pairs = 0;  // same column, measured apart by more than the tie tolerance
  int columns = 0, top1 = 0;                    // columns whose predicted best is (a tie of) the measured best
  [[nodiscard]] double mean_error() const { return 0.5 * (mean_tokens_error + mean_pts_error); }
  [[nodiscard]] bool order_right() const { return concordant_pairs == ordered_pairs && top1 == columns; }
};

// Scores the cells that `keep` accepts (all when `held_out` is empty; else only config == held_out, or only
// table == held_out when `by_table`).
[[nodiscard]] ThesisPerfScore score_thesis_perf(const ThesisPerfData& data, const PerfCoefficients& c,
                                                const std::string& held_out = {}, bool by_table = false);

// Deterministic coordinate descent (as validate_perf.hpp's fit_perf) from `start` over the coefficients the
// thesis's runs exercise, each inside a physical box; objective = mean |log(pred/meas tokens/s)| over the
// cells + the fraction of discordant ordered pairs. `excluded`: a config (or a table when `by_table`) left out.
[[nodiscard]] PerfCoefficients fit_thesis_perf(const ThesisPerfData& data, const PerfCoefficients& start,
                                               const std::string& excluded = {}, bool by_table = false);

struct ThesisPerfValidation {
  PerfCoefficients shipped, refit;
  bool shipped_is_fit = false;
  ThesisPerfScore score;                                           // shipped coefficients, every cell
  ThesisPerfScore datasheet;                                       // datasheet defaults, no fit
  std::vector<std::pair<std::string, ThesisPerfScore>> by_config;  // held-out config → its cells
  ThesisPerfScore pooled_by_config;
  std::vector<std::pair<std::string, ThesisPerfScore>> by_table;  // held-out table → its cells
  ThesisPerfScore pooled_by_table;
  ErrorBand held_out_band;  // step time, over the leave-one-configuration-out cells (validate_perf.hpp coverage)
  [[nodiscard]] bool passed() const {
    return shipped_is_fit && score.mean_error() <= kThesisMeanErrorGoal && score.order_right();
  }
};

// The scores point into `data`: keep it alive as long as the result.
[[nodiscard]] ThesisPerfValidation validate_thesis_perf(const ThesisPerfData& data, const PerfCoefficients& shipped);

}  // namespace headroom::validate
