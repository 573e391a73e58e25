// Reproduction of the 4D paper's published tables (data/reference/4d_*.csv): estimate cells and
// measured OOM outcomes. Used by `headroom validate` and by the golden tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/residual_fit.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom::validate {

struct RunConfig {
  int table = 0;
  std::string model;
  std::string gpu;
  std::int64_t seq = 0, tp = 0, cp = 0, pp = 0, mbs = 0, gpus = 0, gbs = 0;
};

struct EstimateCell {
  RunConfig run;
  double printed_gib = 0;
};

struct MeasuredRun {
  RunConfig run;
  bool oom = false;
  double tflops = 0;  // 0 when OOM
};

struct Typo {
  int table = 0;
  std::int64_t tp = 0, cp = 0, pp = 0, mbs = 0, gpus = 0;
  double printed_gib = 0;
  std::string evidence;
};

// A reference table (RFC 4180 CSV: quoted fields may hold commas) with its columns looked up by header name, so
// the files can gain columns without breaking their readers. Shared by the 4D and published-runs readers.
struct ReferenceTable {
  std::filesystem::path path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // without the header
  // The cell of `row` under `column`; an Error naming the file when there is no such column or cell.
  [[nodiscard]] const std::string& at(const std::vector<std::string>& row, const std::string& column) const;
};
[[nodiscard]] ReferenceTable read_reference_table(const std::filesystem::path& path);

std::vector<EstimateCell> read_estimates(const std::filesystem::path& csv);
std::vector<MeasuredRun> read_measured(const std::filesystem::path& csv);
std::vector<Typo> read_typos(const std::filesystem::path& path);

// The estimate table each measured table was predicted by (Table 3 ↔ 2, 4 ↔ 7, 10 ↔ 8).
int estimate_table_for(int measured_table);

enum class CellStatus { reproduced, documented_typo, drift, typo_not_seen };

struct CellCheck {
  EstimateCell cell;
  double ours_gib = 0;
  CellStatus status = CellStatus::reproduced;
  std::string evidence;
};

inline constexpr double kCellToleranceGiB = 0.01;

// Eq. 18 for every printed cell; a cell differing by more than 0.01 GiB must be a documented typo.
std::vector<CellCheck> check_estimates(const SpecLibrary& lib, const std::vector<EstimateCell>& cells,
                                       const std::vector<Typo>& typos);

// The cluster a 4D-paper run used: A100 40GB → dgx-a100-40gb, H100 94GB → h100-94gb-x4.
ClusterSpec cluster_for_run(const SpecLibrary& lib, const RunConfig& run);

// The run's layout under a framework profile's defaults (the paper's runs: `megatron`).
Layout layout_for_run(const RunConfig& run, const FrameworkProfile& framework);

// Measured runs as observations for the residual fit, optionally only those of one table or all but one.
std::vector<ResidualObservation> observations(const SpecLibrary& lib, const std::vector<MeasuredRun>& runs,
                                              const FrameworkProfile& framework, int only_table = 0,
                                              int except_table = 0);

}  // namespace headroom::validate
