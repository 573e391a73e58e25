// `headroom rank`: every valid layout of a job, those that fit ranked by predicted step time, the Pareto front
// of memory vs speed, and the launch arguments of the fastest.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli_common.hpp"
#include "headroom/core/atomic_file.hpp"
#include "plan_page.hpp"
#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/launch_args.hpp"

namespace headroom::cli {
namespace {

struct RankOptions {
  SpecOptions specs;
  LayoutOptions layout;  // the job (--gpus, --seq, --gbs) and the knobs the search does not vary
  std::string top = "10";
  std::vector<std::string> constraints;
  std::string profile;
  bool all_shardings = false;
  std::string risk = "nominal";
  std::string html;         // the plan page
  bool mtsl_curve = false;  // the plan page draws each layout's MTSL curve
  bool json = false;
};

std::string supported_shardings_text(const FrameworkProfile& f) {
  std::string text;
  for (const StateSharding& s : f.supported_shardings) text += (text.empty() ? "" : ", ") + sharding_code(s);
  return text;
}

// A sharding the framework does not list (supported_shardings), searched by --all-shardings or a sharding=
// constraint: priced as PaRO describes it, but the framework does not launch it.
bool outside_framework(const FrameworkProfile& f, const Layout& l) {
  const auto& ok = launchable_shardings(f, l.megatron_fsdp.enabled);
  return !ok.empty() && std::find(ok.begin(), ok.end(), l.sharding) == ok.end();
}

nlohmann::json ranked_to_json(const ModelSpec& m, const FrameworkProfile& f, const RankedLayout& r,
                              const ErrorBand& peak_band, const PerfCoefficients& coefficients) {
  const ErrorBand& step_band = step_time_band_for(coefficients, r.layout.gpus());
  nlohmann::json j = layout_to_json(m, r.layout);
  j["sharding_code"] = sharding_code(r.layout.sharding);
  return {{"layout", j},
          {"step_time_s", r.step_time_s},
          {"tokens_per_s", r.tokens_per_s},
          {"tflops_per_gpu", r.tflops_per_gpu},
          {"mfu", r.mfu},
          {"peak_gib", r.peak_bytes / kGiB},
          {"margin_gib", r.margin_bytes() / kGiB},
          {"peak_gib_interval", interval_json(peak_band, r.peak_bytes, kGiB)},
          {"step_time_s_interval", interval_json(step_band, r.step_time_s)},
          {"verdict", to_string(memory_verdict(r.peak_bytes, r.capacity_bytes, peak_band))},
          {"outside_framework", outside_framework(f, r.layout)}};
}

void print_rows(std::ostream& out, const ModelSpec& m, const FrameworkProfile& f,
                const std::vector<RankedLayout>& rows) {
  char line[320];
  std::snprintf(line, sizeof line, "%4s  %-48s %9s %12s %8s %6s %9s %9s\n", "#", "layout", "step s", "tokens/s",
                "TFLOP/s", "MFU", "peak GiB", "margin");
  out << line;
  int i = 0;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%4d  %-48s %9.3f %12.0f %8.1f %5.1f%% %9.2f %9.2f\n", ++i,
                  (layout_name(m, r.layout) + (outside_framework(f, r.layout) ? " *" : "")).c_str(), r.step_time_s,
                  r.tokens_per_s, r.tflops_per_gpu, 100 * r.mfu, r.peak_bytes / kGiB, r.margin_bytes() / kGiB);
    out << line;
  }
}

// Why nothing fits, and what would lift it: the layout that needs the least memory (the same search with
// unbounded memory) says whether weights and optimizer states alone are too large (shard them, another
// framework, more GPUs, LoRA) or activations are (shorter sequences, recompute, more CP or TP).
std::string no_fit_advice(const Plan& r, const Layout& base, const PerfCoefficients& k, SearchOptions so,
                          const SearchResult& res) {
  if (res.memory_checked == 0)
    return "no layout of " + std::to_string(so.gpus) +
           " GPUs passes the split rules (t divides the heads and KV "
           "heads, p the layers or the framework splits them unevenly, 2c the sequence, d·mbs the global batch) and "
           "the --constraint flags: nothing was "
           "memory-checked; change --gpus, --gbs or the constraints";
  ClusterSpec unbounded = r.cluster;
  unbounded.gpu.usable_memory_bytes = 1e300;
  so.top = 1;
  so.pareto_slowdown = 1e300;
  const SearchResult all = rank_layouts(r.model, unbounded, base, r.framework.residual, k, so);
  if (all.pareto.empty()) return "no layout fits";
  const Layout& least = all.pareto.front().layout;
  const MemoryEstimate e = estimate_memory(r.model, r.cluster, least, r.framework.residual);
  const StageMemory& s = e.stages[static_cast<std::size_t>(e.peak_stage)];
  const double states = s.params + s.grads + s.optimizer;
  std::string why = "no layout fits in " + format_gib(e.capacity_bytes) + " GiB: the one needing least memory (" +
                    layout_name(r.model, least) + ") peaks at " + format_gib(e.peak_bytes) +
                    " GiB, of which weights, "
                    "gradients and optimizer states " +
                    format_gib(states) + " GiB, activations " + format_gib(s.activations) +
                    " GiB and runtime buffers " + format_gib(s.residual) + " GiB. ";
  if (states >= e.capacity_bytes)
    return why +
           "The model states alone do not fit: shard them (--all-shardings tries ZeRO-3/FSDP and the PaRO "
           "strategies, or --framework pytorch-fsdp), add GPUs, or train LoRA adapters (--lora-rank)";
  return why +
         "Activations are what is left: a shorter --seq, more GPUs for context parallelism, or a framework "
         "that recomputes (--framework, --all-shardings, fewer --constraint)";
}

// The search asked for by rank's flags: sizes, constraints, the framework's choices, the risk.
SearchOptions search_options(const RankOptions& o, const KnobSettings& k, const Plan& r) {
  SearchOptions so;
  so.gpus = k.integer(KnobId::gpus, 0);
  so.seq = k.integer(KnobId::seq, 0);
  so.gbs = k.integer(KnobId::gbs, 0);
  so.top = static_cast<std::size_t>(parse_count("--top", o.top));
  // The kept layouts are a sorted list (insertion is linear in its length): a top of 10^9 asked for 10^9 slots.
  constexpr std::size_t kMaxTop = 100'000;
  if (so.top > kMaxTop) throw Error("--top " + o.top + " is more than " + std::to_string(kMaxTop) + " layouts");
  for (const auto& c : o.constraints) so.constraints.push_back(parse_constraint(c));
  restrict_to_framework(so, r.framework, k.flag(KnobId::use_megatron_fsdp, false));
  if (o.all_shardings) so.shardings.clear();  // every PaRO strategy, launchable by the framework or not
  so.peak_band = risk_band(o.risk, r.framework);
  return so;
}

nlohmann::json rank_json(const Plan& r, const Layout& base, const SearchOptions& so, const SearchResult& res) {
  const PerfCoefficients& coefficients = r.coefficients;
  nlohmann::json layouts = nlohmann::json::array(), pareto = nlohmann::json::array();
  for (const auto& x : res.best)
    layouts.push_back(ranked_to_json(r.model, r.framework, x, r.framework.memory_band, coefficients));
  for (const auto& x : res.pareto)
    pareto.push_back(ranked_to_json(r.model, r.framework, x, r.framework.memory_band, coefficients));
  nlohmann::json doc = {
      {"model", r.model.name},
      {"gpu", r.cluster.gpu.name},
      {"cluster", r.cluster.name},
      {"framework", r.framework.name},
      {"coefficients", coefficients.name},
      {"gpus", so.gpus},
      {"seq", so.seq},
      {"gbs", so.gbs},
      {"evaluated", res.evaluated},
      {"lora", base.lora.enabled()
                   ? nlohmann::json{{"rank", base.lora.rank}, {"targets", lora_targets_to_string(base.lora.targets)}}
                   : nlohmann::json(nullptr)},
      {"precision", base.fp8 == Fp8Recipe::none ? "bf16" : "fp8"},
      {"fp8_recipe", base.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(to_string(base.fp8))},
      {"tp_comm_overlap", base.tp_comm_overlap},
      {"compile", base.compile},
      {"memory_checked", res.memory_checked},
      {"fitting", res.fitting},
      {"dominated", res.dominated},
      {"layouts", layouts},
      {"pareto", pareto}};
  add_cluster_json(doc, r.cluster);
  if (!res.best.empty()) {
    const LaunchExport e = launch_export(r.model, r.cluster, res.best.front().layout);
    doc["launch"] = {
        {"megatron", megatron_line(e)}, {"torchtitan", torchtitan_line(e)}, {"deepspeed", deepspeed_line(e)}};
  }
  return doc;
}

void print_rank(std::ostream& out, const Plan& r, const Layout& base, const SearchOptions& so,
                const SearchResult& res) {
  out << "headroom rank: " << r.model.name << " on " << so.gpus << " x " << r.cluster.gpu.name << " (" << r.cluster.name
      << "), seq " << so.seq << ", gbs " << so.gbs << ", " << r.framework.name << " (coefficients "
      << r.coefficients.name << ")";
  if (base.lora.enabled())
    out << ", LoRA rank " << base.lora.rank << " on " << lora_targets_to_string(base.lora.targets);
  if (base.fp8 != Fp8Recipe::none)
    out << ", FP8 " << to_string(base.fp8) << (base.fp8_param_gather ? " with FP8 weights" : "");
  if (so.peak_band.known)
    out << ", risk pessimistic (a layout fits if its peak + " << format_gib(100.0 * so.peak_band.high * kGiB, 2)
        << "% of held-out error does)";
  out << "\n" << assumed_cluster_line(r.cluster);
  out << res.evaluated << " layouts evaluated, " << res.memory_checked
      << " memory-checked (larger micro-batches pruned), " << res.fitting << " fit in "
      << format_gib(r.cluster.gpu.usable_memory_bytes) << " GiB, " << res.dominated
      << " of them left out as dominated by a twin (same sizes and micro-batch, no faster, no less memory)\n\n";
  if (res.best.empty()) {
    out << no_fit_advice(r, base, r.coefficients, so, res) << "\n";
    return;
  }
  print_rows(out, r.model, r.framework, res.best);
  out << "(layout: tp/cp/pp/dp sizes, ppPxV = V virtual stages per GPU (interleaved 1F1B or zero-bubble), [7+14x8+7] = "
         "decoder "
         "layers per stage where uneven, mbs = micro-batch; "
         "sharding of parameters/gradients/optimizer states: N none, I within a node, G over the DP group "
         "(NNN DDP, NNG ZeRO-1, NGG ZeRO-2, GGG ZeRO-3/FSDP, III HSDP); rc: activation recompute)\n";
  const auto marked = [&](const RankedLayout& x) { return outside_framework(r.framework, x.layout); };
  if (std::any_of(res.best.begin(), res.best.end(), marked) ||
      std::any_of(res.pareto.begin(), res.pareto.end(), marked))
    out << "* a sharding outside the framework: " << r.framework.name << " runs "
        << supported_shardings_text(r.framework) << " only; the rows marked * are priced as PaRO describes them and "
        << "need another framework to launch\n";
  out << "\nPareto front (less memory, or faster; memory ascending; within " << so.pareto_slowdown
      << "x of the fastest step)\n";
  print_rows(out, r.model, r.framework, res.pareto);
  const LaunchExport e = launch_export(r.model, r.cluster, res.best.front().layout);
  out << "\nlaunch the fastest (headroom launch for TOML and FSDP):\n  Megatron-LM: " << megatron_line(e)
      << "\n  torchtitan:  " << torchtitan_line(e) << "\n";
  // DeepSpeed's line where it is the framework (its ds_config.json: headroom launch --export deepspeed).
  if (r.framework.name == "deepspeed") out << "  DeepSpeed:   " << deepspeed_line(e) << "\n";
}

void run_rank(const RankOptions& o, std::ostream& out) {
  const Plan r = resolve_plan(o.specs.request(o.profile));  // a calibration profile replaces its datasheet numbers
  const KnobSettings k = o.layout.settings();
  const SearchOptions so = search_options(o, k, r);
  const Layout base = rank_base(r, layout_request(k, r.framework));
  if (o.mtsl_curve && o.html.empty()) throw Error("--mtsl-curve draws on the plan page: give --html FILE with it");
  if (!o.html.empty()) (void)check_output_path(o.html, "--html");  // before the search
  const SearchResult res = rank_layouts(r.model, r.cluster, base, r.framework.residual, r.coefficients, so);
  if (!o.html.empty()) write_file_atomically(o.html, plan_page_html(plan_page_json(r, base, so, res, o.mtsl_curve)));
  if (o.json)
    print_json(out, rank_json(r, base, so, res));
  else
    print_rank(out, r, base, so, res);
}

}  // namespace

nlohmann::json plan_page_json(const Plan& r, const Layout& base, const SearchOptions& so, const SearchResult& res,
                              bool mtsl_curve) {
  nlohmann::json doc = rank_json(r, base, so, res);
  const PlanContext context(r);
  nlohmann::json details = nlohmann::json::array();
  for (const auto& x : res.best) {
    nlohmann::json d = {{"estimate", to_json(estimate(r, context, x.layout))},
                        {"launch", megatron_line(launch_export(r.model, r.cluster, x.layout))}};
    if (mtsl_curve) d["mtsl"] = mtsl_curve_json(r, x.layout);
    details.push_back(std::move(d));
  }
  doc["details"] = details;
  return doc;
}

void register_rank(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<RankOptions>();
  CLI::App* sub = app.add_subcommand("rank", "rank every layout that fits by predicted step time");
  opts->specs.add_to(*sub, true);
  opts->layout.add_to(*sub, {KnobId::gpus, KnobId::seq, KnobId::gbs});
  for (const KnobId id : {KnobId::gpus, KnobId::seq, KnobId::gbs})
    opts->layout.option[static_cast<std::size_t>(id)]->required();
  sub->add_option("--top", opts->top, "how many of the fastest layouts to print")->capture_default_str();
  sub->add_option("--constraint", opts->constraints,
                  "restrict the search, repeatable: tp<=8, pp=1, mbs>=2, recompute=none, sharding=zero1 (any PaRO "
                  "strategy, also those the framework profile does not list), schedule=1f1b");
  // The knobs every ranked layout shares (--tp-comm-overlap: on every layout with tp >= 2 and SP).
  opts->layout.add_to(*sub, {KnobId::precision,
                             KnobId::fp8_format,
                             KnobId::fp8_recipe,
                             KnobId::fp8_param_gather,
                             KnobId::tp_comm_overlap,
                             KnobId::compile,
                             KnobId::attention_backend,
                             KnobId::lora_rank,
                             KnobId::lora_targets,
                             KnobId::use_precision_aware_optimizer,
                             KnobId::main_grads_dtype,
                             KnobId::main_params_dtype,
                             KnobId::exp_avg_dtype,
                             KnobId::exp_avg_sq_dtype,
                             KnobId::grad_reduce_in_bf16,
                             KnobId::fp16,
                             KnobId::accumulate_allreduce_grads_in_fp32,
                             KnobId::overlap_grad_reduce,
                             KnobId::overlap_param_gather,
                             KnobId::moe_token_dispatcher_type,
                             KnobId::moe_expert_capacity_factor,
                             KnobId::moe_shared_expert_overlap,
                             KnobId::mtp_num_layers,
                             KnobId::use_megatron_fsdp,
                             KnobId::fsdp_double_buffer,
                             KnobId::suggested_communication_unit_size,
                             KnobId::megatron_fsdp_main_grads_dtype});
  sub->add_option("--profile", opts->profile,
                  "performance coefficients JSON or a calibration profile (headroom calibrate); default "
                  "data/perf/<framework>.json");
  sub->add_flag("--all-shardings", opts->all_shardings,
                "search all 14 PaRO strategies, not only those the framework can launch (rows outside the framework "
                "are marked *; estimate, launch and mtsl refuse them under that framework)");
  sub->add_option("--risk", opts->risk,
                  std::string(kRiskHelp) + " (the step-time band is one factor for all layouts, so the order stays)")
      ->capture_default_str();
  sub->add_option("--html", opts->html,
                  "also write the plan page: one self-contained HTML file (sortable layouts, Pareto front, memory "
                  "and step breakdown of a clicked layout, its launch command)");
  sub->add_flag("--mtsl-curve", opts->mtsl_curve,
                "with --html: the page also draws the clicked layout's peak memory against sequence length, with its "
                "MTSL and band");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_rank(*opts, out); });
}

}  // namespace headroom::cli
