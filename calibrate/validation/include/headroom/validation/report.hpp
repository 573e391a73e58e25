// Everything `headroom validate` checks, computed once, and whether it passes: the 4D paper's estimate tables, the
// OOM verdicts of its measured runs (the residual's fit, leave-one-table-out, the held-out peak band and the form),
// its throughput columns, the thesis's MTSL and throughput, and the published held-out sources (informative: they do
// not decide `passed`). The CLI prints a Report; it decides nothing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/residual_fit.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/validation/memory_forms.hpp"
#include "headroom/validation/paper_4d.hpp"
#include "headroom/validation/perf.hpp"
#include "headroom/validation/published.hpp"
#include "headroom/validation/thesis_perf.hpp"

namespace headroom::validate {

// One estimate table: its printed cells, reproduced to kCellToleranceGiB or documented typos.
struct TableSummary {
  int cells = 0, reproduced = 0, typos = 0, failures = 0;
  double max_abs_diff = 0;  // over reproduced cells
};

struct EstimateSection {
  std::map<int, TableSummary> tables;
  std::vector<CellCheck> not_reproduced;  // the cells that are not reproduced: typos and failures
  int failures = 0;
};

// A measured run whose verdict the shipped residual gets wrong.
struct WrongVerdict {
  int table = 0;
  Layout layout;
  bool oom = false;  // measured
  double predicted_peak_gib = 0, capacity_gib = 0;
};

struct VerdictSection {
  std::map<int, VerdictScore> tables;
  std::vector<WrongVerdict> wrong;
  VerdictScore all, pooled;
  ResidualFit refit;
  std::map<int, std::pair<ResidualFit, VerdictScore>> loto;
  ErrorBand band;
  std::vector<MemoryFormScore> forms;
  MemoryForm best_form = MemoryForm::residual_terms;
  bool verdicts_ok = false, shipped_is_fit = false, band_shipped = false, form_is_best = false;
  [[nodiscard]] bool ok() const { return verdicts_ok && shipped_is_fit && band_shipped && form_is_best; }
};

struct Report {
  FrameworkProfile framework, fsdp, torchtitan, deepspeed;
  EstimateSection estimates;
  VerdictSection verdicts;
  PerfValidation perf;
  ThesisMtslValidation thesis_mtsl;
  std::unique_ptr<const ThesisPerfData> thesis_data;  // thesis's scores point into it
  ThesisPerfValidation thesis;
  // The published rows (the scores point into them: a vector's elements stay where they are when a Report moves).
  std::vector<PublishedRun> published_rows, moe_rows, fp8_rows, fsdp_rows, torchtitan_rows, bridge_rows, deepspeed_rows;
  std::vector<PublishedCollective> collective_rows;
  PublishedValidation published, moe, fp8, fsdp_runs, torchtitan_runs, bridge, deepspeed_runs;
  PublishedMemoryValidation torchtitan_memory, fp8_memory, moe_memory, bridge_memory, deepspeed_memory;
  StackFractionFit stack;  // the framework's stack_gemm_fraction, fitted on the dense FP8 rows of curve GPUs
  // The same fit with each run's attention (the first, the shipped form), then one curve for every run; each run's
  // must hold out best.
  std::vector<StackFractionFit> attention_backends;
  bool attention_backend_chosen = false;
  std::string attention_backend;  // the framework's curve, for runs whose software is not given (data/perf)
  CollectiveValidation collectives;
  // What passes: every estimate cell; the verdicts (98% right, no false fit) with the shipped residual equal to its
  // fit, band and form; the throughput's regret goals with the shipped coefficients and bands equal to their fit;
  // the thesis's MTSL and throughput fits and goal; the shipped stack_gemm_fraction equal to its fit and the shipped
  // attention curve the one with the least held-out error.
  bool perf_ok = false, thesis_ok = false, passed = false;
};

// Shipped coefficients are written with 6 significant digits; the fit must agree to that.
[[nodiscard]] bool same_coefficients(const ResidualModel& a, const ResidualModel& b);

// The framework of the runs the 4D, published, MoE and FP8 checks price (Megatron-LM ran them all); pytorch-fsdp's
// runs (the thesis, the published FSDP runs) are priced under pytorch-fsdp and torchtitan's under torchtitan in every
// validation.
inline constexpr const char* kValidatedFramework = "megatron";

// An Error, before any work, for a framework other than kValidatedFramework: its residual would price runs that
// Megatron-LM ran (Megatron-LM's experts under FSDP, say), which nothing measured.
void refuse_unvalidated_framework(const SpecLibrary& lib, const std::string& framework);

// The whole validation under `framework`'s residual model (kValidatedFramework), from lib's data/reference tables.
[[nodiscard]] Report validate_all(const SpecLibrary& lib, const std::string& framework);

}  // namespace headroom::validate
