// One request's walk, down the floors once: the specs (model, cluster, framework) read once, the coefficients with
// their provenance (the framework's data/perf file, or a profile), the layout of the knobs a user gave, and one
// layout's memory and time as one result, which the CLI prints (estimate --json's "memory" and "perf") and the Python
// API returns.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/core/knobs.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {

// What a request names: specs by name or file, and an optional profile (empty: none; data_dir empty: the default).
struct PlanRequest {
  std::string model, gpu, cluster, framework = "megatron", profile;
  std::filesystem::path data_dir;
  std::optional<ModelSpec> model_spec;  // a model read elsewhere (a launch command's flags), instead of `model`
};

// The specs and coefficients a request prices with, resolved once: nothing changes them afterwards.
struct Plan {
  ModelSpec model;
  ClusterSpec cluster;
  FrameworkProfile framework;
  PerfCoefficients coefficients;  // the framework's data/perf/<framework>.json, or the profile's
};

// The cluster of a request: its cluster (whose GPU the gpu, when also given, must be), or a shipped cluster of its
// gpu (an assumed one where none has it); an Error naming both when neither is given.
[[nodiscard]] ClusterSpec resolve_cluster(const PlanRequest& r, const SpecLibrary& lib);
// The request's specs, the framework's coefficients, and the request's profile applied (with_profile).
[[nodiscard]] Plan resolve_plan(const PlanRequest& r);
// `plan` with the profile at `path` applied, the file read once:
//  - a calibration profile (profile.hpp) replaces the coefficients' efficiencies and the cluster's datasheet peak,
//    HBM and link numbers (apply_profile), and drops the step-time band (its measurements were not scored);
//  - a data/perf coefficients file replaces the coefficients (the device entries of GPUs it does not name stay);
//    its memory section (`calibrate --from-runs`), if any, replaces the framework's fixed residual term, whose
//    held-out band was computed for the shipped residual and is dropped (a section fitted for another framework is
//    an Error naming both).
[[nodiscard]] Plan with_profile(Plan plan, const std::string& path, const SpecLibrary& lib);

// The layout of the knobs: the framework's defaults, then the knobs (layout_request, build_layout), then what the
// precision and offloading need of the cluster (validate_on_cluster). seq is required.
[[nodiscard]] Layout plan_layout(const Plan& plan, const KnobSettings& k);

// ---- one layout's result (field names are estimate --json's) ----

using Interval = std::optional<std::array<double, 2>>;

// One pipeline stage's memory per GPU, bytes (integers, as in the JSON).
struct StageResult {
  std::int64_t stage = 0, params = 0, grads = 0, optimizer = 0, activations = 0, residual = 0,
               fp8_copies_and_scales = 0, host = 0, total = 0;
};

struct MemoryResult {
  std::optional<double> paper_total_gib;  // the 4D paper's Eq. 18 for the first stage; none for a model with experts
  std::vector<StageResult> stages;
  double peak_gib = 0, capacity_gib = 0, margin_gib = 0;
  std::int64_t peak_stage = 0;
  Interval peak_gib_interval;  // the framework's held-out band around the peak, or none
  std::string interval_source;
  std::string verdict;  // fits, oom or uncertain
};

struct PerfResult {
  double step_time_s = 0, tokens_per_s = 0, tflops_per_gpu = 0, mfu = 0, pts_s = 0, model_flops_per_step = 0;
  Interval step_time_s_interval;  // the coefficients' held-out band at the job's GPU count, or none
  std::string interval_source;
  // Provenance of the coefficients: their name, where the GPU's GEMM/attention efficiencies come from (fitted,
  // measured or datasheet), the GPU whose entry it is, the coefficients whose fit gave it, the kernels_scale applied,
  // and where the link efficiencies come from.
  std::string coefficients, coefficients_source, coefficients_gpu, coefficients_fitted_under, link_coefficients_source;
  double gemm_scale = 1, attention_scale = 1;
  std::string device_kernels;  // coefficients_source "device curves": the curves' file and rows, the stack's fraction
  // The compute clock the cluster's GPU power limit leaves (spec.hpp power_limited_clock_fraction; 1: none).
  double compute_clock_fraction = 1;
  StepBreakdown breakdown;
};

struct Estimate {
  MemoryResult memory;
  PerfResult perf;
};

// What every estimate of a plan shares, resolved once: the coefficients against the cluster, and the words of the
// memory band's source.
struct PlanContext {
  explicit PlanContext(const Plan& plan);
  PerfContext perf;
  std::string memory_interval_source;
  // step_time_band_source of a job at exactly each held-out GPU count (uncertainty.by_gpus), in their order, and of
  // one without a by-count band: the words most estimates take, formatted once.
  std::vector<std::pair<std::int64_t, std::string>> step_sources_at;
  std::string step_source_pooled;
  [[nodiscard]] std::string step_interval_source(const PerfCoefficients& c, std::int64_t gpus) const;
};

// One layout (valid: plan_layout) priced with the plan and its context.
[[nodiscard]] Estimate estimate(const Plan& plan, const PlanContext& ctx, const Layout& l);
// {"memory": ..., "perf": ...} as estimate --json prints them, and back (for pickling).
[[nodiscard]] nlohmann::json to_json(const Estimate& e);
[[nodiscard]] Estimate estimate_from_json(const nlohmann::json& j);

}  // namespace headroom
