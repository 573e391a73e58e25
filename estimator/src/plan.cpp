#include "headroom/estimator/plan.hpp"

#include <cctype>
#include <cmath>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/profile.hpp"

namespace headroom {
namespace {

std::string lowered(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Interval interval(const ErrorBand& band, double value, double unit) {
  if (!band.known) return std::nullopt;
  return std::array<double, 2>{band.lower(value) / unit, band.upper(value) / unit};
}

nlohmann::json interval_json(const Interval& i) {
  return i ? nlohmann::json::array({(*i)[0], (*i)[1]}) : nlohmann::json(nullptr);
}

Interval interval_from(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  return std::array<double, 2>{j.at(0).get<double>(), j.at(1).get<double>()};
}

std::int64_t bytes(double b) { return std::llround(b); }  // byte counts are integers in the results

}  // namespace

ClusterSpec resolve_cluster(const PlanRequest& r, const SpecLibrary& lib) {
  if (r.cluster.empty() && r.gpu.empty()) {
    std::string known;
    for (const auto& n : lib.names("gpus")) known += (known.empty() ? "" : ", ") + n;
    throw Error("give " + field("gpu") + " or " + field("cluster") + " (known GPUs: " + known + ")");
  }
  if (r.cluster.empty()) return lib.cluster_for_gpu(lib.gpu(r.gpu));
  ClusterSpec c = lib.cluster(r.cluster);
  // A cluster file names its GPU; another GPU in its nodes would mix datasheets silently (H100s priced on an
  // A100 cluster's NVLink and NICs).
  if (!r.gpu.empty() && lib.gpu(r.gpu).name != c.gpu.name)
    throw Error(field("gpu") + " " + r.gpu + " is not the GPU of " + field("cluster") + " " + r.cluster + " (" +
                c.gpu.name + "): give one of them, or a cluster file with that GPU");
  return c;
}

namespace {

// A coefficients file of `calibrate --from-runs` names the GPUs and clusters of its runs ("fitted_on"): its compute
// scale and its held-out band were measured there. Applied to another GPU it would rescale that GPU's efficiencies by a
// factor measured on others and label the result with a band of runs that GPU never ran, so it is refused.
void refuse_other_gpu(const nlohmann::json& doc, const std::string& path, const ClusterSpec& cluster) {
  if (!doc.is_object() || !doc.contains("fitted_on")) return;
  const auto& on = doc.at("fitted_on");
  std::string gpus, clusters;
  bool found = false;
  for (const auto& g : on.at("gpus")) {
    gpus += (gpus.empty() ? "" : ", ") + g.get<std::string>();
    found = found || lowered(g.get<std::string>()) == lowered(cluster.gpu.name);
  }
  for (const auto& c : on.at("clusters")) clusters += (clusters.empty() ? "" : ", ") + c.get<std::string>();
  if (!found)
    throw Error(field("profile") + " " + path + " was fitted on runs of " + gpus + " (clusters " + clusters +
                "), not of " + cluster.gpu.name + ": its compute efficiencies and held-out band say nothing of " +
                cluster.gpu.name + " (valid: a cluster of " + gpus + ")");
}

}  // namespace

Plan with_profile(Plan plan, const std::string& path, const SpecLibrary& lib) {
  if (path.empty()) return plan;
  const nlohmann::json doc = read_json_file(path);
  if (doc.is_object() && doc.contains("format")) {  // a calibration profile: coefficients and the cluster's numbers
    const Profile p = profile_from_document(doc, path, lib.data_dir());
    auto [cluster, coefficients] =
        apply_profile(p, static_cast<std::int64_t>(head_dim(plan.model)), plan.cluster, plan.coefficients);
    plan.cluster = std::move(cluster);
    plan.coefficients = std::move(coefficients);
    return plan;
  }
  PerfCoefficients file = perf_coefficients_file(path, doc, perf_schema(lib));
  refuse_other_gpu(doc, path, plan.cluster);
  add_device_entries(file, plan.coefficients);  // a GPU the file has no entry for: the shipped device entries
  plan.coefficients = std::move(file);
  if (!doc.is_object() || !doc.contains("memory")) return plan;
  // A coefficients file of `calibrate --from-runs` may carry a memory fit: its fixed term replaces the framework's.
  const auto& memory = doc.at("memory");
  const std::string fitted_for = memory.at("framework").get<std::string>();
  if (lowered(fitted_for) != lowered(plan.framework.name))
    throw Error(field("profile") + " " + path + ": its memory fit is for framework " + fitted_for + ", not " +
                plan.framework.name);
  plan.framework.residual.fixed_bytes = memory.at("fixed_GiB").get<double>() * kGiB;
  plan.framework.memory_band = ErrorBand{};
  return plan;
}

Plan resolve_plan(const PlanRequest& r) {
  const SpecLibrary lib(r.data_dir.empty() ? default_data_dir() : r.data_dir);
  Plan plan;
  plan.model = r.model_spec ? *r.model_spec : lib.model(r.model);
  plan.cluster = resolve_cluster(r, lib);
  plan.framework = lib.framework(r.framework);
  plan.coefficients = default_perf_coefficients(lib, plan.framework.name);
  return with_profile(std::move(plan), r.profile, lib);
}

Layout plan_layout(const Plan& plan, const KnobSettings& k) {
  if (!k.given(KnobId::seq)) throw Error(field("seq") + " is required (tokens per sequence)");
  Layout l = build_layout(plan.model, plan.framework, layout_request(k, plan.framework));
  validate_on_cluster(plan.model, l, plan.cluster);
  return l;
}

PlanContext::PlanContext(const Plan& plan)
    : perf(plan.coefficients, plan.cluster),
      memory_interval_source(
          band_source(plan.framework.memory_band, "framework " + plan.framework.name + "'s memory model", "verdict")) {
  for (const auto& x : plan.coefficients.step_time_bands_by_gpus)
    step_sources_at.emplace_back(x.gpus, step_time_band_source(plan.coefficients, x.gpus));
  if (step_sources_at.empty()) step_source_pooled = step_time_band_source(plan.coefficients, 1);
}

std::string PlanContext::step_interval_source(const PerfCoefficients& c, std::int64_t gpus) const {
  if (step_sources_at.empty()) return step_source_pooled;  // one band for every count
  for (const auto& [n, words] : step_sources_at)
    if (n == gpus) return words;
  return step_time_band_source(c, gpus);
}

Estimate estimate(const Plan& plan, const PlanContext& ctx, const Layout& l) {
  const PerfContext& context = ctx.perf;
  const MemoryEstimate e = estimate_memory(plan.model, plan.cluster, l, plan.framework.residual);
  const PerfEstimate p = estimate_perf(plan.model, context, l);
  const ErrorBand& memory_band = plan.framework.memory_band;
  Estimate out;
  MemoryResult& m = out.memory;
  if (plan.model.num_experts == 0) m.paper_total_gib = e.paper_total_bytes / kGiB;
  m.stages.reserve(e.stages.size());
  for (const auto& s : e.stages)
    m.stages.push_back({s.stage, bytes(s.params), bytes(s.grads), bytes(s.optimizer), bytes(s.activations),
                        bytes(s.residual), bytes(s.fp8), bytes(s.host), bytes(s.total())});
  m.peak_gib = e.peak_bytes / kGiB;
  m.capacity_gib = e.capacity_bytes / kGiB;
  m.margin_gib = e.margin_bytes / kGiB;
  m.peak_stage = e.peak_stage;
  m.peak_gib_interval = interval(memory_band, e.peak_bytes, kGiB);
  m.interval_source = ctx.memory_interval_source;
  m.verdict = to_string(memory_verdict(e.peak_bytes, e.capacity_bytes, memory_band));
  PerfResult& f = out.perf;
  f.step_time_s = p.step_time_s, f.tokens_per_s = p.tokens_per_s, f.tflops_per_gpu = p.tflops_per_gpu;
  f.mfu = p.mfu, f.pts_s = p.pts_s, f.model_flops_per_step = p.model_flops;
  f.step_time_s_interval = interval(step_time_band_for(plan.coefficients, l.gpus()), p.step_time_s, 1.0);
  f.interval_source = ctx.step_interval_source(plan.coefficients, l.gpus());
  f.coefficients = plan.coefficients.name;
  f.coefficients_source = context.efficiency_source;
  f.coefficients_gpu = context.efficiency_gpu;
  f.coefficients_fitted_under = context.efficiency_fitted_under;
  f.gemm_scale = context.gemm_scale, f.attention_scale = context.attention_scale;
  f.device_kernels = context.device_kernels;
  if (l.attention_backend != AttentionBackend::framework)
    f.device_kernels +=
        "; attention at the device's " + std::string(to_string(l.attention_backend)) + " curve (attention_backend)";
  f.compute_clock_fraction = context.peak_flops / context.datasheet_peak_flops;
  f.link_coefficients_source = context.link_source;
  f.breakdown = p.breakdown;
  return out;
}

namespace {

// The breakdown's fields by JSON key, so that writing and reading share one list.
struct BreakdownField {
  const char* key;
  double StepBreakdown::*member;
};
constexpr BreakdownField kBreakdown[] = {{"gemm_s", &StepBreakdown::gemm_s},
                                         {"attention_s", &StepBreakdown::attention_s},
                                         {"elementwise_s", &StepBreakdown::elementwise_s},
                                         {"overhead_s", &StepBreakdown::overhead_s},
                                         {"tp_comm_s", &StepBreakdown::tp_comm_s},
                                         {"cp_comm_s", &StepBreakdown::cp_comm_s},
                                         {"pp_comm_s", &StepBreakdown::pp_comm_s},
                                         {"ep_comm_s", &StepBreakdown::ep_comm_s},
                                         {"dp_comm_s", &StepBreakdown::dp_comm_s},
                                         {"bubble_s", &StepBreakdown::bubble_s},
                                         {"optimizer_s", &StepBreakdown::optimizer_s},
                                         {"offload_s", &StepBreakdown::offload_s}};

}  // namespace

nlohmann::json to_json(const Estimate& e) {
  const MemoryResult& m = e.memory;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : m.stages)
    stages.push_back({{"stage", s.stage},
                      {"params", s.params},
                      {"grads", s.grads},
                      {"optimizer", s.optimizer},
                      {"activations", s.activations},
                      {"residual", s.residual},
                      {"fp8_copies_and_scales", s.fp8_copies_and_scales},
                      {"host", s.host},
                      {"total", s.total}});
  const PerfResult& p = e.perf;
  nlohmann::json breakdown = {{"compute_s", p.breakdown.compute_s()}, {"slowest_stage", p.breakdown.slowest_stage}};
  for (const auto& f : kBreakdown) breakdown[f.key] = p.breakdown.*(f.member);
  return {{"memory",
           {{"paper_total_gib", m.paper_total_gib ? nlohmann::json(*m.paper_total_gib) : nlohmann::json()},
            {"stages", stages},
            {"peak_gib", m.peak_gib},
            {"peak_stage", m.peak_stage},
            {"capacity_gib", m.capacity_gib},
            {"peak_gib_interval", interval_json(m.peak_gib_interval)},
            {"interval_source", m.interval_source},
            {"verdict", m.verdict},
            {"margin_gib", m.margin_gib},
            {"units", "stages in bytes; *_gib in GiB (2^30 bytes)"}}},
          {"perf",
           {{"step_time_s", p.step_time_s},
            {"coefficients_source", p.coefficients_source},
            {"coefficients_gpu", p.coefficients_gpu},
            {"coefficients_fitted_under", p.coefficients_fitted_under},
            {"coefficients_scale", {{"gemm", p.gemm_scale}, {"attention", p.attention_scale}}},
            {"device_kernels", p.device_kernels},
            {"compute_clock_fraction", p.compute_clock_fraction},
            {"link_coefficients_source", p.link_coefficients_source},
            {"step_time_s_interval", interval_json(p.step_time_s_interval)},
            {"interval_source", p.interval_source},
            {"tokens_per_s", p.tokens_per_s},
            {"tflops_per_gpu", p.tflops_per_gpu},
            {"mfu", p.mfu},
            {"mfu_peak", "bf16"},  // model FLOPs over the BF16 dense peak, FP8 training included
            {"pts_s", p.pts_s},
            {"model_flops_per_step", p.model_flops_per_step},
            {"coefficients", p.coefficients},
            {"breakdown", breakdown}}}};
}

Estimate estimate_from_json(const nlohmann::json& j) {
  Estimate e;
  const auto& m = j.at("memory");
  if (!m.at("paper_total_gib").is_null()) e.memory.paper_total_gib = m.at("paper_total_gib").get<double>();
  for (const auto& s : m.at("stages"))
    e.memory.stages.push_back({s.at("stage"), s.at("params"), s.at("grads"), s.at("optimizer"), s.at("activations"),
                               s.at("residual"), s.at("fp8_copies_and_scales"), s.at("host"), s.at("total")});
  e.memory.peak_gib = m.at("peak_gib");
  e.memory.peak_stage = m.at("peak_stage");
  e.memory.capacity_gib = m.at("capacity_gib");
  e.memory.margin_gib = m.at("margin_gib");
  e.memory.peak_gib_interval = interval_from(m.at("peak_gib_interval"));
  e.memory.interval_source = m.at("interval_source");
  e.memory.verdict = m.at("verdict");
  const auto& p = j.at("perf");
  PerfResult& f = e.perf;
  f.step_time_s = p.at("step_time_s"), f.tokens_per_s = p.at("tokens_per_s");
  f.tflops_per_gpu = p.at("tflops_per_gpu"), f.mfu = p.at("mfu"), f.pts_s = p.at("pts_s");
  f.model_flops_per_step = p.at("model_flops_per_step");
  f.step_time_s_interval = interval_from(p.at("step_time_s_interval"));
  f.interval_source = p.at("interval_source");
  f.coefficients = p.at("coefficients"), f.coefficients_source = p.at("coefficients_source");
  f.coefficients_gpu = p.at("coefficients_gpu"), f.coefficients_fitted_under = p.at("coefficients_fitted_under");
  f.link_coefficients_source = p.at("link_coefficients_source");
  f.gemm_scale = p.at("coefficients_scale").at("gemm"), f.attention_scale = p.at("coefficients_scale").at("attention");
  f.device_kernels = p.at("device_kernels");
  f.compute_clock_fraction = p.at("compute_clock_fraction");
  for (const auto& x : kBreakdown) f.breakdown.*(x.member) = p.at("breakdown").at(x.key).get<double>();
  f.breakdown.slowest_stage = p.at("breakdown").at("slowest_stage");
  return e;
}

}  // namespace headroom
