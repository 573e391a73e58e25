// Maximum trainable sequence length (MTSL): the largest s whose predicted peak memory (memory.hpp's
// peak_memory_bytes, residual included) fits the GPU's usable memory, exact to one token, and the inverse
// question (the smallest layouts that train a given s). Source of the question: the FSDP+TP+LoRA thesis
// Sec. 4.2.1 and Table B.4. Memory is monotone in s; the search needs no allocation.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/uncertainty.hpp"

namespace headroom {

// Longest sequence the search considers; beyond it MTSL is reported as capped (memory barely grows with s).
inline constexpr std::int64_t kMaxMtslTokens = std::int64_t{1} << 32;

struct MtslResult {
  std::int64_t tokens = 0;         // the MTSL; 0 when even the shortest valid sequence does not fit
  std::int64_t granularity = 1;    // valid s are multiples of this: 2c when c > 1 (load-balanced CP), else 1
  std::int64_t binding_stage = 0;  // the stage whose peak crosses capacity first
  std::string_view binding_term;   // what grows past capacity: "activations" or "residual"; when tokens = 0
                                   // the largest term at the shortest s ("params", "grads", "optimizer", ...)
  double peak_bytes = 0;           // predicted peak at s = tokens (at the shortest s when tokens = 0)
  double next_peak_bytes = 0;      // at s = tokens + granularity: over capacity unless capped
  double capacity_bytes = 0;
  StepMoment binding_moment = StepMoment::activations;  // FSDP: the moment of the step that crosses capacity
  bool closed_form = false;  // linear in s (FlashAttention): solved in closed form; else bisection
  bool capped = false;       // fits at kMaxMtslTokens
};

// Valid sequence lengths of a layout step by this many tokens (layout.cpp: c | s, and 2c | s when c > 1).
[[nodiscard]] std::int64_t sequence_granularity(const Layout& l);

// The MTSL of `layout` (its seq is ignored; its batch is kept). Linear in s at every moment of the step →
// closed form per stage and moment (the smallest wins), checked on both sides; otherwise bisection over
// multiples of the granularity. A sequence fits when peak_scale × its predicted peak does: 1 is the prediction,
// 1 + an error band's high end its pessimistic reading (the band's upper end fits).
[[nodiscard]] MtslResult max_trainable_seq(const ModelSpec& m, const ClusterSpec& c, const Layout& layout,
                                           const ResidualModel& r, double peak_scale = 1.0);

// The MTSLs at the two ends of the held-out band of the peak (uncertainty.hpp): `low` where the band's upper end
// fits (a run that long fits however the peak errs within the band), `high` where its lower end does. Unknown
// without a band.
struct MtslInterval {
  std::int64_t low = 0, high = 0;
  bool known = false;
};
[[nodiscard]] MtslInterval mtsl_interval(const ModelSpec& m, const ClusterSpec& c, const Layout& layout,
                                         const ResidualModel& r, const ErrorBand& peak_band);

// One layout of the search for the longest sequence: its MTSL (at the search's peak_scale), the MTSL's band and the
// predicted step at the MTSL (0 when nothing fits).
struct LongestLayout {
  Layout layout;  // seq = the MTSL
  MtslResult result;
  MtslInterval interval;
  double step_time_s = 0;
};

// The longest sequence over every layout the framework runs on o.gpus GPUs: rank's search space (search.hpp, with
// its constraints, shardings, recompute modes and schedules; o.seq is ignored and every CP size admitted) at the
// micro-batch size of `base`, each layout's MTSL found, longest first and, among equals, fastest at that length.
// Without o.gbs each layout holds the default batch (framework.hpp default_microbatches per pipeline).
[[nodiscard]] std::vector<LongestLayout> longest_sequence_layouts(const ModelSpec& m, const ClusterSpec& c,
                                                                  const Layout& base, const ResidualModel& r,
                                                                  const PerfCoefficients& coefficients, SearchOptions o,
                                                                  double peak_scale, const ErrorBand& peak_band);

struct LayoutFit {
  Layout layout;  // seq = the target
  double peak_bytes = 0;
};

// The largest GPU count the inverse search takes: beyond the largest clusters built (10^6 GPUs).
inline constexpr std::int64_t kMaxSearchGpus = 1'000'000;

// The inverse question: the layouts with the fewest GPUs (at most max_gpus, whole nodes past one: whole_nodes) that
// train `seq` tokens, every split t | gcd(a, k), p | L, c with 2c | s, d = N/(t·c·p) (and, with experts, every ep
// dividing E and t·c·d, etp 1), each fitting at s; ordered by peak memory. Each split's smallest d is bisected (memory
// does not grow with d), so the search costs splits × log(max_gpus), not max_gpus².
// `base` supplies the framework settings, micro-batch size, LoRA and sharding; it keeps its micro-batches
// per pipeline, at least default_microbatches(p) of each split (gbs = m·d·b). Empty when no layout up to max_gpus fits.
// Throws Error for max_gpus outside 1..kMaxSearchGpus.
[[nodiscard]] std::vector<LayoutFit> smallest_layouts_for_seq(const ModelSpec& m, const ClusterSpec& c,
                                                              const Layout& base, const ResidualModel& r,
                                                              std::int64_t seq, std::int64_t max_gpus);

// ---- fitting the pytorch-fsdp profile to the thesis's Table B.4 ----

// One measured MTSL (thesis Table B.4): the layout (seq ignored) and the printed value (0 = OOM at once).
struct MtslObservation {
  Layout layout;
  std::int64_t measured_tokens = 0;
};

// The fitted coefficients: the residual's fixed term (context, communicators, allocator fragmentation), its
// logits term (HF Llama's loss path beyond Eq. 14's 4 B per logit) and Layout::fsdp_unit_buffers (unit-sized
// buffers live at the gradients moment). The residual's optimizer and CP terms are kept from `base`.
struct MtslFitOptions {
  double fixed_min_gib = 0.0, fixed_max_gib = 10.0, fixed_step_gib = 0.125;
  double logits_min = 0.0, logits_max = 24.0, logits_step = 0.5;  // B per s·b·v/(t·c) logit
  // FSDP1 at the last unit's backward: computing + prefetched parameters (2), the unsharded gradient and the
  // per-weight gradients gathered into it (2), one gradient awaiting its reduce-scatter, one more all-gather the
  // rate limiter allows (6). The shipped pytorch-fsdp profile fixes it at 4, the candidate with the best
  // leave-one-rank-out score (calibrate/include/headroom/validation/memory_forms.hpp compare_mtsl_forms).
  std::int64_t unit_buffers_min = 2, unit_buffers_max = 6;
};

struct MtslFit {
  ResidualModel model;
  std::int64_t fsdp_unit_buffers = 0;
  int zero_misses = 0;       // printed 0 cells predicted > 0
  double max_rel_error = 0;  // over the nonzero cells
  double mean_rel_error = 0;
};

// Relative error of a predicted MTSL against a printed nonzero one: |pred − meas| / meas.
[[nodiscard]] double mtsl_relative_error(std::int64_t predicted, std::int64_t measured);

// Deterministic grid search (unit buffers outermost, then fixed, then logits, each ascending); objective,
// lexicographic: the fewest printed zeros predicted nonzero, then the smallest maximum relative error over the
// nonzero cells (the goal is per cell), then the smallest mean; ties go to the first grid point.
// `base` supplies the name and the optimizer and CP terms (kept); the cells' layouts supply everything else.
[[nodiscard]] MtslFit fit_residual_to_mtsl(const ModelSpec& m, const ClusterSpec& c,
                                           std::span<const MtslObservation> cells, const ResidualModel& base,
                                           const MtslFitOptions& options = {});

}  // namespace headroom
