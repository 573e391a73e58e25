// Which form of "what Eq. 18 leaves out" to ship, chosen by held-out score: each candidate
// is fitted on all tables but one and scored on the one left out, the way `validate` scores the shipped one.
// A form with more terms that fits the visible tables better and decides fewer held-out runs does not ship.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/mtsl.hpp"
#include "headroom/estimator/residual_fit.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/validation/paper_4d.hpp"

namespace headroom::validate {

// Megatron-LM's megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a6), dense models, one
// GPU of the first stage: weights and optimizer of the most loaded shard (18 B per parameter, 6 + 12/d with the
// distributed optimizer; vocabulary padded to a multiple of 128·t) plus compute_activation_memory, its sequence-
// parallel path (Korthikanti et al. 2022 Table 2 without the attention scores: what FlashAttention stores too).
// The one change: activations are divided by t·c, not t (the formula has no context parallelism).
[[nodiscard]] double megatron_theoretical_memory_bytes(const ModelSpec& m, const Layout& l);

enum class MemoryForm {
  residual_terms,           // Eq. 18 + fixed, logits, optimizer-shard and CP-communicator terms (fit_residual)
  eq18_capacity_share,      // Eq. 18 ≤ (1 − share) · capacity
  megatron_capacity_share,  // Megatron-LM's theoretical memory ≤ (1 − share) · capacity (a peer's formula)
};
[[nodiscard]] std::string_view to_string(MemoryForm f);

struct MemoryFormScore {
  MemoryForm form = MemoryForm::residual_terms;
  int parameters = 0;
  bool shippable = true;   // headroom can price with it (the peer's formula is a yardstick only)
  VerdictScore in_sample;  // fitted and scored on every visible table
  VerdictScore held_out;   // leave-one-table-out, pooled
};

// Every candidate, fitted and scored on the measured runs under `framework`'s layout defaults.
[[nodiscard]] std::vector<MemoryFormScore> compare_memory_forms(const SpecLibrary& lib,
                                                                const std::vector<MeasuredRun>& measured,
                                                                const FrameworkProfile& framework);
// The shippable form with the most held-out runs right, then the fewest held-out false fits, then the fewest
// parameters.
[[nodiscard]] const MemoryFormScore& best_memory_form(const std::vector<MemoryFormScore>& scores);
// The form a shipped residual model is written in: a capacity share alone, or the residual terms.
[[nodiscard]] MemoryForm form_of(const ResidualModel& r);

// ---- FSDP1 with LoRA: the MTSL form (thesis Table B.4) ----

// A visible cell of Table B.4: LoRA rank, the layout (FSDP × TP on 8 GCDs, one sample per FSDP rank) and the
// printed MTSL (0: out of memory at any length).
struct ThesisMtslCell {
  std::int64_t rank = 0;
  MtslObservation observation;
};
[[nodiscard]] std::vector<ThesisMtslCell> thesis_mtsl_cells(const SpecLibrary& lib, const FrameworkProfile& fsdp);

struct MtslFormScore {
  std::string form;        // "unit buffers fitted (2-6)" or "unit buffers = N"
  MtslFitOptions options;  // the grid: unit buffers fixed (min = max) or searched
  int zeros_wrong = 0;     // held-out printed zeros predicted > 0
  double mean_error = 0;   // held-out nonzero cells, mean |relative error|
  double worst_error = 0;
};
// Leave one LoRA rank out: each candidate grid is fitted (fit_residual_to_mtsl) on the cells of the other
// ranks and scores the held-out rank's cells. Candidates: the unit-buffer count searched over 2..6 with the
// other coefficients, or fixed at each of 2..6 (the other two fitted).
[[nodiscard]] std::vector<MtslFormScore> compare_mtsl_forms(const ModelSpec& m, const ClusterSpec& c,
                                                            const std::vector<ThesisMtslCell>& cells,
                                                            const ResidualModel& base);

// Table B.4 under `fsdp`: the candidate forms held out, the framework's unit-buffer count (derived from FSDP1's
// backward, not chosen among the candidates) with the other two coefficients fitted on every visible cell (the
// shipped coefficients must be this fit) and its in-sample errors.
struct ThesisMtslValidation {
  std::vector<MtslFormScore> forms;
  std::size_t shipped = 0;  // index into forms: "unit buffers = " the framework's fsdp_unit_buffers
  MtslFit refit;            // that form's grid on all visible cells
  bool shipped_is_fit = false;
};
[[nodiscard]] ThesisMtslValidation validate_thesis_mtsl(const SpecLibrary& lib, const FrameworkProfile& fsdp);

}  // namespace headroom::validate
