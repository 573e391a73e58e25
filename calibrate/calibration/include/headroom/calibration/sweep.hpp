// What to measure (the plan) and measuring it through a backend with resume and progress callbacks.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "headroom/estimator/spec.hpp"
#include "headroom/kernels/harness.hpp"

namespace headroom::calibrate {

struct SweepOptions {
  bool quick = false;
  int ranks = 1;                  // collectives over group sizes 2, 4, ... up to this
  int gpus_per_node = 1;          // groups up to this size are "intra", larger ones "inter"
  bool cpu = true;                // CPU backends get smaller shapes and message sizes (memory, time)
  std::vector<ModelSpec> models;  // GEMM shapes of their layers (flops.hpp layer_gemms) for TP 1..gpus_per_node
};

// The GEMM grid (and the models' layer GEMMs), attention over sequence lengths × head dims 64/128 × causal
// (non-causal too unless quick), forward and backward, collectives over sizes from 8 B up (1 GiB on GPUs)
// and group sizes, and copies. Deterministic order: GEMM, attention, copy, collectives.
[[nodiscard]] std::vector<kernels::Case> plan_sweep(const SweepOptions& o);

struct Progress {
  std::size_t done = 0, total = 0;
  std::string label;  // the case just measured, or being resumed
  bool resumed = false;
};

// Measures every case of `plan` not already in `have` (matched by kernels::label), appending to it; calls
// `progress` after each case and `checkpoint` with everything so far (so that the caller can save it).
void run_sweep(kernels::Backend& b, const std::vector<kernels::Case>& plan, const kernels::TimingOptions& timing,
               std::vector<kernels::Measurement>& have, const std::function<void(const Progress&)>& progress,
               const std::function<void(const std::vector<kernels::Measurement>&)>& checkpoint);

// What fitting the measurements concluded: nothing (fitted), or the cases (kernels::label) behind the noisiest
// point of a fit below its R² threshold, with the fit's message.
struct Refit {
  std::vector<std::string> cases;
  std::string why;
};

// run_sweep, then `refit(have, round)`. While it names cases, they are measured again (their measurements
// replaced) and refitted, at most `rounds` times; then they are removed from `have`, `checkpoint` is called
// without them (so that a resumed run measures them afresh instead of re-fitting the same data) and NoisyFit
// is thrown naming them. Returns the rounds of re-measuring used.
int sweep_until_fitted(kernels::Backend& b, const std::vector<kernels::Case>& plan,
                       const kernels::TimingOptions& timing, std::vector<kernels::Measurement>& have,
                       const std::function<void(const Progress&)>& progress,
                       const std::function<void(const std::vector<kernels::Measurement>&)>& checkpoint, int rounds,
                       const std::function<Refit(const std::vector<kernels::Measurement>&, int round)>& refit);

}  // namespace headroom::calibrate
