// Fitting the residual model to measured outcomes (a run either trained or ran out of memory).
// Deterministic grid search over the three coefficients with physical carriers, the fixed overhead solved
// in closed form at each point; see fit_residual for the objective and the tie-break.
#pragma once

#include <span>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

struct ResidualObservation {
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  bool oom = false;
};

// The search box: physical priors on each coefficient (GiB for the per-GPU terms).
struct ResidualFitOptions {
  double logits_min = 2.0, logits_max = 6.0, logits_step = 0.25;            // B per logit: ≥ 2 beyond Eq. 14's FP32
  double optimizer_min = 0.0, optimizer_max = 4.0, optimizer_step = 0.125;  // B per shard parameter
  double cp_min_gib = 0.0, cp_max_gib = 2.0, cp_step_gib = 0.0625;          // GiB per communicator
  double fixed_min_gib = 0.5, fixed_max_gib = 3.0;                          // CUDA context + NCCL + workspaces
  double margin_gib = 0.1;  // a run counts as decided only this far from capacity
};

struct ResidualFit {
  ResidualModel model;
  bool feasible = false;    // some grid point predicts every OOM run as OOM
  int training_misses = 0;  // runs that trained but fall within the margin of, or above, capacity
};

// Minimises, lexicographically: (1) runs that trained but are predicted within `margin` of capacity,
// given that every OOM run is predicted at least `margin` over it (no false fits on the training data);
// (2) minus the total residual over the runs (prefer erring towards OOM); (3) smaller coefficients.
// The fixed term is the largest that keeps (1) unchanged.
[[nodiscard]] ResidualFit fit_residual(std::span<const ResidualObservation> runs,
                                       const ResidualFitOptions& options = {});

struct VerdictScore {
  int runs = 0, right = 0, false_fits = 0, false_ooms = 0;
  [[nodiscard]] double accuracy() const { return runs > 0 ? static_cast<double>(right) / runs : 0.0; }
  void add(bool predicted_fit, bool oom) {
    ++runs;
    right += predicted_fit != oom;
    false_fits += predicted_fit && oom;
    false_ooms += !predicted_fit && !oom;
  }
  void add(const VerdictScore& o) {
    runs += o.runs;
    right += o.right;
    false_fits += o.false_fits;
    false_ooms += o.false_ooms;
  }
};

// Predicted fit ⇔ peak (residual included) ≤ the GPU's usable memory.
[[nodiscard]] VerdictScore score_verdicts(std::span<const ResidualObservation> runs, const ResidualModel& model);

// ---- the one-parameter form: a share of capacity ----

// A run as the one-parameter form sees it: a predicted peak with no residual (Eq. 18's, or a peer formula's)
// against the GPU's usable memory.
struct PeakOutcome {
  double peak_bytes = 0;
  double capacity_bytes = 0;
  bool oom = false;
};

struct ShareFit {
  double share = 0;  // fits ⇔ peak ≤ (1 − share) · capacity
  bool feasible = false;
  int training_misses = 0;
};

// The smallest share that predicts every OOM run at least `margin_bytes` over, raised (as fit_residual raises
// its fixed term, erring towards OOM) to the largest that decides no fewer trained runs, inside
// [0, max_share]; infeasible when every share up to max_share predicts some OOM run to fit.
[[nodiscard]] ShareFit fit_capacity_share(std::span<const PeakOutcome> runs, double margin_bytes,
                                          double max_share = 0.5);
[[nodiscard]] VerdictScore score_capacity_share(std::span<const PeakOutcome> runs, double share);

}  // namespace headroom
