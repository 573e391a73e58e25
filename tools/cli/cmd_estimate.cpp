// `headroom estimate`: memory per pipeline stage, the paper's Eq. 18, the predicted peak and the verdict.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::cli {
namespace {

struct EstimateOptions {
  SpecOptions specs;
  LayoutOptions layout;
  std::string profile;  // performance coefficients JSON (data/perf format); default: data/perf/<framework>.json
  bool json = false;
};

std::string gib(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  return buf;
}

// The knobs the answer depends on that the user left to a default, said as such.
std::string defaults_line(const LayoutOptions& o, const Plan& r, const Layout& l) {
  std::string text;
  const auto add = [&](KnobId id, const std::string& what) {
    if (!o.given(id)) text += (text.empty() ? "" : ", ") + what;
  };
  add(KnobId::gbs, "gbs (dp x mbs, times pp with a pipeline)");
  add(KnobId::mbs, "mbs 1");
  add(KnobId::recompute, "recompute (" + r.framework.name + "'s)");
  add(KnobId::sharding, l.megatron_fsdp.enabled ? std::string("sharding (Megatron-FSDP's optim_grads_params)")
                                                : "sharding (" + r.framework.name + "'s)");
  return text.empty() ? "" : "defaults taken: " + text + "\n";
}

void print_table(std::ostream& out, const Plan& r, const Layout& l, const MemoryResult& e) {
  char line[256];
  out << "headroom estimate: " << r.model.name << " on " << r.cluster.gpu.name << " (" << r.cluster.name << "), "
      << l.gpus() << " GPUs = tp " << l.tp << " x cp " << l.cp << " x pp " << l.pp << stage_text(r.model, l) << " x dp "
      << l.dp << "\n";
  out << assumed_cluster_line(r.cluster);
  out << "seq " << l.seq << ", mbs " << l.mbs << ", gbs " << l.gbs << " (" << l.microbatches()
      << (l.microbatches() == 1 ? " micro-batch" : " micro-batches") << " per pipeline), " << r.framework.name
      << ": SP " << (l.sequence_parallel ? "on" : "off") << ", "
      << (l.flash_attention ? "FlashAttention" : "no FlashAttention") << ", " << to_string(l.schedule)
      << (l.vpp > 1 ? " x" + std::to_string(l.vpp) : "") << ", recompute " << recompute_text(l) << ", sharding "
      << sharding_code(l.sharding) << (l.megatron_fsdp.enabled ? " under Megatron-FSDP" : "")
      << " (parameters/gradients/optimizer states: N none, I in a node, G over DP)\n\n";
  std::snprintf(line, sizeof line, "%6s %9s %9s %10s %12s %9s %9s\n", "stage", "params", "grads", "optimizer",
                "activations", "residual", "total");
  out << line;
  const auto in_gib = [](std::int64_t bytes) { return static_cast<double>(bytes) / kGiB; };
  for (const auto& s : e.stages) {
    std::snprintf(line, sizeof line, "%6lld %9.2f %9.2f %10.2f %12.2f %9.2f %9.2f\n", static_cast<long long>(s.stage),
                  in_gib(s.params), in_gib(s.grads), in_gib(s.optimizer), in_gib(s.activations), in_gib(s.residual),
                  in_gib(s.total));
    out << line;
  }
  out << "(GiB per GPU)\n";
  if (l.fp8 != Fp8Recipe::none)
    out << "FP8 (" << to_string(l.fp8) << " scaling, " << to_string(l.fp8_library)
        << (l.fp8_param_gather ? ", FP8 weights and gather" : "")
        << "): linear-layer GEMMs at the FP8 peak; weight copies and scales "
        << gib(in_gib(e.stages[0].fp8_copies_and_scales)) << " GiB on stage 0 (in params)\n";
  if (e.stages[0].host > 0)
    out << "offloaded to host memory: " << gib(in_gib(e.stages[0].host))
        << " GiB per GPU of stage 0 (not in the total)\n";
  out << "\n";
  if (e.paper_total_gib)  // the paper's formula is for dense models
    out << "4D paper Eq. 18 (first stage): " << gib(*e.paper_total_gib) << " GiB\n";
  out << "predicted peak: " << gib(e.peak_gib) << " GiB on stage " << e.peak_stage << " of " << gib(e.capacity_gib)
      << " GiB usable -> " << e.verdict << ", margin " << gib(e.margin_gib) << " GiB";
  if (e.peak_gib_interval)
    out << " (held-out band " << gib((*e.peak_gib_interval)[0]) << "-" << gib((*e.peak_gib_interval)[1]) << " GiB)";
  out << "\n";
}

// Performance part: step time, throughput and where the time goes (throughput.hpp).
// Where the GPU's GEMM and attention efficiencies come from, in words (nothing falls back silently).
std::string efficiency_text(const PerfResult& p, const std::string& gpu) {
  // Another coefficients' fit: the device's efficiencies, shared across frameworks (throughput.hpp device_gpus).
  const std::string under = p.coefficients_fitted_under == p.coefficients
                                ? ""
                                : " under the " + p.coefficients_fitted_under + " coefficients (the device's, shared)";
  if (p.coefficients_source == "fitted" && p.coefficients_gpu != gpu) {
    const std::string fitted =
        "GEMM/attention efficiencies (fractions of peak) fitted for " + p.coefficients_gpu + under;
    if (p.gemm_scale == 1.0 && p.attention_scale == 1.0)
      return fitted + ", which " + gpu + " computes as (its spec's kernels_as and kernels_as_reason)";
    char scales[64];
    std::snprintf(scales, sizeof scales, "GEMM x%.3g, attention x%.3g", p.gemm_scale, p.attention_scale);
    return fitted + ", scaled for " + gpu + " by its published kernel benchmarks (" + scales +
           "; its spec's kernels_scale and kernels_as_reason)";
  }
  if (p.coefficients_source == "fitted") return "GEMM/attention efficiencies fitted for " + gpu + under;
  if (p.coefficients_source == "device curves")
    return "GEMM/attention efficiencies from " + gpu + "'s kernel curves " + p.device_kernels;
  if (p.coefficients_source == "measured") return "GEMM/attention efficiencies measured (calibration profile)";
  return "GEMM/attention efficiencies: datasheet defaults, nothing fitted or measured for " + gpu +
         " (headroom calibrate, or calibrate --from-runs)";
}

// fp8: the MFU is against the BF16 dense peak (model FLOPs over it, README "Model FLOPs"), which FP8 GEMMs can
// exceed: said where it applies.
void print_perf(std::ostream& out, const PerfResult& p, const std::string& gpu, bool fp8) {
  const StepBreakdown& b = p.breakdown;
  char line[320];
  std::snprintf(line, sizeof line,
                "\npredicted step %.3f s: %.0f tokens/s, %.1f TFLOP/s per GPU (MFU %.1f%%%s), %.3f s per sample "
                "(coefficients: %s)\n",
                p.step_time_s, p.tokens_per_s, p.tflops_per_gpu, 100.0 * p.mfu, fp8 ? " of the BF16 peak" : "", p.pts_s,
                p.coefficients.c_str());
  out << line << "  " << efficiency_text(p, gpu) << "; link efficiencies "
      << (p.link_coefficients_source == "generic" ? "the framework's generic ones (none fitted for this cluster)"
                                                  : p.link_coefficients_source)
      << "\n";
  if (p.compute_clock_fraction < 1.0) {
    std::snprintf(line, sizeof line,
                  "  compute at %.3f of the datasheet clock: the cluster's GPU power limit (gpu_power_limit_W; clock "
                  "as the cube root of the power)\n",
                  p.compute_clock_fraction);
    out << line;
  }
  if (p.step_time_s_interval) {
    std::snprintf(line, sizeof line, "  held-out band of the step time: %.3f-%.3f s (", (*p.step_time_s_interval)[0],
                  (*p.step_time_s_interval)[1]);
    out << line << p.interval_source << ")\n";
  }
  std::snprintf(line, sizeof line,
                "  compute %.3f s (GEMM %.3f, attention %.3f, elementwise %.3f), overhead %.3f, exposed comm: "
                "TP %.3f, CP %.3f, PP %.3f, DP %.3f; bubble %.3f; optimizer %.3f (slowest stage %lld)\n",
                b.compute_s(), b.gemm_s, b.attention_s, b.elementwise_s, b.overhead_s, b.tp_comm_s, b.cp_comm_s,
                b.pp_comm_s, b.dp_comm_s, b.bubble_s, b.optimizer_s, static_cast<long long>(b.slowest_stage));
  out << line;
  if (b.ep_comm_s > 0) {
    std::snprintf(line, sizeof line, "  exposed expert all-to-alls (EP, ETP) %.3f s\n", b.ep_comm_s);
    out << line;
  }
  if (b.offload_s > 0) {
    std::snprintf(line, sizeof line, "  offloading (host copies and CPU optimizer step, exposed) %.3f s\n",
                  b.offload_s);
    out << line;
  }
}

// A model with experts: what it counts and how the layout splits and loads them; multi-token prediction, priced
// where the layout trains it.
void print_experts(std::ostream& out, const ModelSpec& m, const Layout& l) {
  char line[320];
  if (l.mtp_layers > 0) {
    std::snprintf(line, sizeof line,
                  "multi-token prediction: %lld layer(s) on stage %lld, %.2fB parameters, priced (--mtp-num-layers)\n",
                  static_cast<long long>(l.mtp_layers), static_cast<long long>(head_stage(l)),
                  static_cast<double>(l.mtp_layers) * mtp_module_parameters(m) / 1e9);
    out << line;
  } else if (m.mtp_layers > 0) {
    std::snprintf(line, sizeof line,
                  "multi-token prediction: %lld layer(s), %.2fB parameters in the checkpoint, not trained: priced "
                  "without them (--mtp-num-layers %lld trains them)\n",
                  static_cast<long long>(m.mtp_layers), mtp_parameters(m) / 1e9, static_cast<long long>(m.mtp_layers));
    out << line;
  }
  if (m.num_experts == 0) return;
  std::snprintf(
      line, sizeof line,
      "experts: %lld per layer on %lld of %lld layers, top %lld; %.2fB parameters, %.2fB active; ep %lld, "
      "etp %lld, expert DP %lld; busiest expert GPU at %.2fx the mean load%s\n",
      static_cast<long long>(m.num_experts), static_cast<long long>(moe_layers(m)),
      static_cast<long long>(m.num_layers), static_cast<long long>(m.moe_router_topk), parameter_count(m) / 1e9,
      active_parameter_count(m) / 1e9, static_cast<long long>(l.ep), static_cast<long long>(l.expert_tp()),
      static_cast<long long>(l.expert_dp()), l.expert_load,
      l.expert_load == 1.0 ? " (dropless routing priced as balanced; --moe-expert-capacity-factor bounds it)" : "");
  out << line;
}

void run_estimate(const EstimateOptions& o, std::ostream& out) {
  const Plan r = resolve_plan(o.specs.request(o.profile));  // a calibration profile replaces its datasheet numbers
  const Layout l = o.layout.build(r);
  const Estimate x = estimate(r, PlanContext(r), l);
  if (!o.json) {
    print_table(out, r, l, x.memory);
    out << defaults_line(o.layout, r, l);
    print_experts(out, r.model, l);
    print_perf(out, x.perf, r.cluster.gpu.name, l.fp8 != Fp8Recipe::none);
    return;
  }
  nlohmann::json doc = {{"model",
                         {{"name", r.model.name},
                          {"parameters", std::llround(parameter_count(r.model))},
                          {"active_parameters", std::llround(active_parameter_count(r.model))},
                          {"mtp_parameters", std::llround(mtp_parameters(r.model))},
                          {"experts", r.model.num_experts},
                          {"moe_router_topk", r.model.moe_router_topk},
                          {"head_dim", std::llround(head_dim(r.model))},
                          {"sliding_window", r.model.sliding_window},
                          {"window_layers", window_layers(r.model)}}},
                        {"gpu", r.cluster.gpu.name},
                        {"cluster", r.cluster.name},
                        {"framework", r.framework.name},
                        {"layout", layout_to_json(r.model, l)}};
  doc.update(to_json(x));
  add_cluster_json(doc, r.cluster);
  print_json(out, doc);
}

}  // namespace

void register_estimate(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<EstimateOptions>();
  CLI::App* sub = app.add_subcommand("estimate", "memory (per stage, peak, verdict) and predicted speed of one layout");
  opts->specs.add_to(*sub, true);
  opts->layout.add_to(*sub);
  sub->add_option("--profile", opts->profile,
                  "performance coefficients JSON (data/perf format) or a calibration profile (headroom calibrate); "
                  "default data/perf/<framework>.json");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_estimate(*opts, out); });
}

}  // namespace headroom::cli
