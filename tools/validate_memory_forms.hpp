// Which form of "what Eq. 18 leaves out" to ship, chosen by held-out score (issue 15, item 4): each candidate
// is fitted on all tables but one and scored on the one left out, the way `validate` scores the shipped one.
// A form with more terms that fits the visible tables better and decides fewer held-out runs does not ship.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual_fit.hpp"
#include "headroom/estimator/spec.hpp"
#include "validate_4d.hpp"

namespace headroom::validate {

// Megatron-LM's megatron/training/theoretical_memory_usage.py (NVIDIA/Megatron-LM d98e8a6), dense models, one
// GPU of the first stage: weights and optimizer of the most loaded shard (18 B per parameter, 6 + 12/d with the
// distributed optimizer; vocabulary padded to a multiple of 128·t) plus compute_activation_memory, its sequence-
// parallel path (Korthikanti et al. 2022 Table 2 without the attention scores: what FlashAttention stores too).
// The one change: activations are divided by t·c, not t (the formula has no context parallelism).
[[nodiscard]] double megatron_theoretical_memory_bytes(const ModelSpec& m, const Layout& l);

enum class MemoryForm {
  residual_terms,       // Eq. 18 + fixed, logits, optimizer-shard and CP-communicator terms (fit_residual)
  eq18_capacity_share,  // Eq. 18 ≤ (1 − share) · capacity
  megatron_capacity_share,  // Megatron-LM's theoretical memory ≤ (1 − share) · capacity (a peer's formula)
};
[[nodiscard]] std::string_view to_string(MemoryForm f);

struct MemoryFormScore {
  MemoryForm form = MemoryForm::residual_terms;
  int parameters = 0;
  bool shippable = true;     // headroom can price with it (the peer's formula is a yardstick only)
  VerdictScore in_sample;    // fitted and scored on every visible table
  VerdictScore held_out;     // leave-one-table-out, pooled
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

}  // namespace headroom::validate
