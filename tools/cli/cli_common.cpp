#include "cli_common.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "headroom/calibration/profile.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom::cli {

std::int64_t parse_count(std::string_view flag, std::string_view text) { return parse_integer(flag, text); }

void SpecOptions::add_to(CLI::App& app, bool need_model) {
  auto* m = app.add_option("--model", model, "model name (data/models), HF config.json or headroom model JSON");
  if (need_model) m->required();
  app.add_option("--gpu", gpu, "GPU name (data/gpus); defaults to the cluster's GPU");
  app.add_option("--cluster", cluster, "cluster name (data/clusters); defaults to one with --gpu");
  app.add_option("--framework", framework, "framework profile (data/frameworks)")->capture_default_str();
  app.add_option("--data-dir", data_dir, "directory of specs (default: $HEADROOM_DATA_DIR or the source tree)");
}

SpecLibrary SpecOptions::library() const {
  return SpecLibrary(data_dir.empty() ? default_data_dir() : std::filesystem::path(data_dir));
}

PlanRequest SpecOptions::request(const std::string& profile) const {
  return {model, gpu, cluster, framework, profile, data_dir, {}};
}

namespace {

// "--tp,--tensor-model-parallel-size" as CLI11 takes it.
std::string cli_names(std::string_view flags) { return std::string(flags); }

void add_knob(CLI::App& app, const Knob& k, LayoutOptions& o, bool required) {
  const auto i = static_cast<std::size_t>(k.id);
  if (k.type == KnobType::flag) {
    if (!k.off_flags.empty()) o.off_option[i] = app.add_flag(cli_names(k.off_flags), o.off[i], std::string(k.off_help));
    if (!k.flags.empty()) o.option[i] = app.add_flag(cli_names(k.flags), o.on[i], std::string(k.help));
    return;
  }
  CLI::Option* opt = app.add_option(cli_names(k.flags), o.text[i], std::string(k.help));
  opt->type_name(std::string(knob_metavar(k)));
  if (k.show_default) {
    o.text[i] = std::string(k.default_text);
    opt->capture_default_str();
  }
  if (required) opt->required();
  o.option[i] = opt;
}

}  // namespace

void LayoutOptions::add_to(CLI::App& app, bool need_seq) {
  for (const Knob& k : knobs()) add_knob(app, k, *this, need_seq && k.id == KnobId::seq);
  seq_optional = !need_seq;
}

void LayoutOptions::add_to(CLI::App& app, std::initializer_list<KnobId> which) {
  for (const KnobId id : which) add_knob(app, knob(id), *this, false);
}

bool LayoutOptions::given(KnobId id) const {
  const auto i = static_cast<std::size_t>(id);
  return (option[i] != nullptr && option[i]->count() > 0) || (off_option[i] != nullptr && off_option[i]->count() > 0);
}

KnobSettings LayoutOptions::settings() const {
  KnobSettings k = fallback;
  for (const Knob& x : knobs()) {
    const auto i = static_cast<std::size_t>(x.id);
    if (!given(x.id)) continue;
    if (x.type != KnobType::flag) {
      k.set(x.id, parse_knob(x, text[i]));
      continue;
    }
    if (on[i] && off[i])
      throw Error(std::string(x.off_flags.substr(0, x.off_flags.find(','))) + " and " +
                  std::string(x.flags.substr(0, x.flags.find(','))) + " contradict each other");
    k.set(x.id, on[i]);
  }
  return k;
}

Layout LayoutOptions::build(const ModelSpec& model, const FrameworkProfile& f) const {
  LayoutRequest r = layout_request(settings(), f);
  if (!given(KnobId::seq) && seq_optional) r.seq = r.cp > 1 ? 2 * r.cp : 1;
  Layout l = build_layout(model, f, r);
  // Megatron-LM overlaps pipeline sends only between virtual stages (layout.hpp overlap_p2p_comm): the switch that
  // turns it off does nothing on another schedule, or without a pipeline.
  if (given(KnobId::overlap_p2p_comm) && !has_virtual_stages(l))
    throw Error(
        std::string(knob(KnobId::overlap_p2p_comm).off_flags) +
        " does nothing without virtual stages (the interleaved, zero-bubble, zbv or looped-bfs schedule, --pp > 1 "
        "with --vpp > 1): pipeline sends overlap only between virtual stages");
  return l;
}

Layout LayoutOptions::build(const Plan& plan) const {
  Layout l = build(plan.model, plan.framework);
  validate_on_cluster(plan.model, l, plan.cluster);
  return l;
}

void refuse_given(const CLI::App& app, std::initializer_list<const char*> flags, std::string_view why) {
  for (const char* flag : flags) {
    const CLI::Option* o = app.get_option_no_throw(flag);
    if (o != nullptr && o->count() > 0) throw Error(std::string(flag) + " does nothing " + std::string(why));
  }
}

KnobSettings knob_settings_of(const std::map<std::string, std::string>& columns) {
  KnobSettings k;
  for (const auto& [column, value] : columns) {
    const Knob* x = find_knob(column);
    if (x == nullptr) continue;
    if (k.given(x->id)) throw Error("two columns give " + std::string(x->name) + " (" + column + " is another name)");
    k.set(x->id, parse_knob(*x, value));
  }
  return k;
}

Layout rank_base(const Plan& plan, const LayoutRequest& q) {
  Layout base = default_layout(plan.framework);
  if (unfused_attention_only(plan.model, plan.framework)) base.flash_attention = false;
  base.lora.rank = q.lora_rank;
  if (q.lora_targets) base.lora.targets = *q.lora_targets;
  require_fp8_recipe(plan.framework, q.fp8);
  base.fp8 = q.fp8;
  base.fp8_param_gather = q.fp8_param_gather;
  require_tp_comm_overlap(plan.framework, q.tp_comm_overlap);
  base.tp_comm_overlap = q.tp_comm_overlap;
  require_compile(plan.framework, q.compile);
  base.compile = q.compile;
  base.attention_backend = q.attention_backend;
  set_ddp_overlaps(plan.framework, q, base);
  set_expert_dispatch(plan.model, plan.framework, q, base);
  set_mtp_layers(plan.model, plan.framework, q, base);
  set_cp_exchange(plan.framework, q, base);
  set_fsdp_mixed_precision(plan.framework, q.fsdp_mixed_precision, base);
  set_optimizer_precision(plan.framework, q.optimizer_precision, base);  // after the FP8 recipe it depends on
  set_megatron_fsdp(plan.framework, q, base);  // the search sets its strategies (restrict_to_framework)
  return base;
}

ErrorBand risk_band(const std::string& risk, const FrameworkProfile& f) {
  const std::string word = lower(risk);
  if (word != "nominal" && word != "pessimistic")
    throw Error("--risk " + risk + " is not understood (valid: nominal, pessimistic)");
  if (word == "nominal") return {};
  if (!f.memory_band.known)
    throw Error("--risk pessimistic needs a held-out band of the peak, which framework " + f.name +
                " does not ship (residual.uncertainty)");
  return f.memory_band;
}

std::string recompute_text(const Layout& l) {
  std::string text(to_string(l.recompute));
  if (recompute_by_layers(l))
    text += " (" + std::string(to_string(l.recompute_method)) + " " + std::to_string(l.recompute_num_layers) + ")";
  if (recomputes_modules(l)) text += " (" + recompute_modules_to_string(l.recompute_modules) + ")";
  return text;
}

std::string layout_name(const ModelSpec& m, const Layout& l) {
  const std::string stages = stage_layers_text(m, l);
  return "tp" + std::to_string(l.tp) + " cp" + std::to_string(l.cp) + " pp" + std::to_string(l.pp) +
         (l.vpp > 1 ? "x" + std::to_string(l.vpp) : "") + (stages.empty() ? "" : "[" + stages + "]") + " dp" +
         std::to_string(l.dp) +
         (m.num_experts > 0 ? " ep" + std::to_string(l.ep) + " etp" + std::to_string(l.expert_tp()) : "") + " mbs" +
         std::to_string(l.mbs) + " " + sharding_code(l.sharding) + " rc:" + std::string(to_string(l.recompute)) +
         (recompute_by_layers(l)
              ? "-" + std::string(to_string(l.recompute_method)) + std::to_string(l.recompute_num_layers)
              : "") +
         (recomputes_modules(l) ? "(" + recompute_modules_to_string(l.recompute_modules) + ")" : "") +
         (megatron_core_schedule(l.schedule) ? "" : " " + std::string(to_string(l.schedule))) +
         (l.sequence_parallel || l.tp == 1 ? "" : " no-sp");
}

nlohmann::json interval_json(const ErrorBand& band, double value, double unit) {
  if (!band.known) return nullptr;
  return nlohmann::json::array({band.lower(value) / unit, band.upper(value) / unit});
}

nlohmann::json memory_verdict_json(const Plan& r, const Layout& l) {
  const MemoryEstimate e = estimate_memory(r.model, r.cluster, l, r.framework.residual);
  const ErrorBand& band = r.framework.memory_band;
  return {{"peak_gib", e.peak_bytes / kGiB},
          {"capacity_gib", e.capacity_bytes / kGiB},
          {"peak_gib_interval", interval_json(band, e.peak_bytes, kGiB)},
          {"verdict", to_string(memory_verdict(e.peak_bytes, e.capacity_bytes, band))}};
}

std::string memory_warning(const Plan& r, const Layout& l) {
  const MemoryEstimate e = estimate_memory(r.model, r.cluster, l, r.framework.residual);
  if (memory_verdict(e.peak_bytes, e.capacity_bytes, r.framework.memory_band) == MemoryVerdict::uncertain)
    return "WARNING: predicted peak " + format_gib(e.peak_bytes) + " GiB of " + format_gib(e.capacity_bytes) +
           " GiB usable is within the model's held-out error band (" +
           format_gib(r.framework.memory_band.lower(e.peak_bytes)) + "-" +
           format_gib(r.framework.memory_band.upper(e.peak_bytes)) +
           " GiB): this layout may run out of memory (headroom estimate shows where)";
  if (e.fits()) return "";
  return "WARNING: predicted peak " + format_gib(e.peak_bytes) + " GiB on stage " + std::to_string(e.peak_stage) +
         " is over the " + format_gib(e.capacity_bytes) + " GiB usable (" + format_gib(-e.margin_bytes) +
         " GiB short): this layout is predicted to run out of memory (headroom estimate shows where)";
}

void print_json(std::ostream& out, nlohmann::json doc) {
  doc["schema_version"] = kJsonSchemaVersion;
  out << doc.dump(2) << "\n";
}

std::int64_t json_bytes(double bytes) { return std::llround(bytes); }

std::string stage_layers_text(const ModelSpec& m, const Layout& l) {
  if (l.split.even() && !(l.split.partition_balanced && m.num_layers % l.pp != 0)) return "";
  std::string text;
  for (std::int64_t st = 0; st < l.pp;) {
    const std::int64_t n = stage_layers(m, l, st);
    std::int64_t run = 1;
    while (st + run < l.pp && stage_layers(m, l, st + run) == n) ++run;
    text += (text.empty() ? "" : "+") + (run > 1 ? std::to_string(run) + "x" : "") + std::to_string(n);
    st += run;
  }
  return text;
}

std::string stage_text(const ModelSpec& m, const Layout& l) {
  const std::string t = stage_layers_text(m, l);
  return t.empty() ? "" : " (layers " + t + ")";
}

nlohmann::json layout_to_json(const ModelSpec& m, const Layout& l) {
  nlohmann::json stages = nlohmann::json::array();
  for (std::int64_t st = 0; st < l.pp; ++st) stages.push_back(stage_layers(m, l, st));
  const auto optional_count = [](std::int64_t n) { return n > 0 ? nlohmann::json(n) : nlohmann::json(nullptr); };
  // DeepSpeed's ZeRO settings (Layout::zero): null under other frameworks.
  const auto deepspeed_only = [&l](auto v) { return l.zero.deepspeed ? nlohmann::json(v) : nlohmann::json(nullptr); };
  // Megatron-FSDP's settings (Layout::megatron_fsdp): null without it.
  const auto mfsdp_only = [&l](auto v) {
    return l.megatron_fsdp.enabled ? nlohmann::json(v) : nlohmann::json(nullptr);
  };
  return {
      {"tp", l.tp},
      {"cp", l.cp},
      {"pp", l.pp},
      {"stage_layers", stages},
      {"decoder_first_pipeline_num_layers", optional_count(l.split.first_stage_layers)},
      {"decoder_last_pipeline_num_layers", optional_count(l.split.last_stage_layers)},
      {"account_for_embedding_in_pipeline_split", l.split.embedding_in_split},
      {"account_for_loss_in_pipeline_split", l.split.loss_in_split},
      {"pipeline_model_parallel_layout",
       l.split.layer_layout ? nlohmann::json(l.split.layer_layout->text) : nlohmann::json(nullptr)},
      {"dp", l.dp},
      {"ep", l.ep},
      {"etp", l.expert_tp()},
      {"moe_token_dispatcher_type", to_string(l.dispatcher)},
      {"moe_shared_expert_overlap", l.shared_expert_overlap},
      {"mtp_num_layers", l.mtp_layers},
      {"context_parallel_rotate_method",
       torch_cp_exchange(l.cp_exchange) ? nlohmann::json(to_string(l.cp_exchange)) : nlohmann::json(nullptr)},
      {"cp_comm_type",
       torch_cp_exchange(l.cp_exchange) ? nlohmann::json(nullptr) : nlohmann::json(to_string(l.cp_exchange))},
      {"precision", l.fp8 == Fp8Recipe::none ? "bf16" : "fp8"},
      {"fp8_recipe", l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(to_string(l.fp8))},
      {"fp8_library", l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(to_string(l.fp8_library))},
      {"fp8_param_gather", l.fp8_param_gather},
      // An FP8 run's BF16 layers at either end (Layout::bf16_layers_at_start/end); null without FP8.
      {"first_last_layers_bf16", l.fp8 == Fp8Recipe::none
                                     ? nlohmann::json(nullptr)
                                     : nlohmann::json(l.bf16_layers_at_start > 0 || l.bf16_layers_at_end > 0)},
      {"num_layers_at_start_in_bf16",
       l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(l.bf16_layers_at_start)},
      {"num_layers_at_end_in_bf16",
       l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(l.bf16_layers_at_end)},
      {"optimizer_offload_fraction", l.optimizer_offload},
      {"overlap_cpu_optimizer_d2h_h2d", l.overlap_offload_copies},
      {"cpu_offloading_num_layers", l.activation_offload_layers},
      {"overlap_p2p_comm", pipeline_sends_overlap(l)},
      {"tp_comm_overlap", l.tp_comm_overlap},
      {"compile", l.compile},
      {"attention_backend", l.attention_backend == AttentionBackend::framework
                                ? nlohmann::json(nullptr)
                                : nlohmann::json(to_string(l.attention_backend))},
      {"use_precision_aware_optimizer", l.optimizer_precision.precision_aware || l.optimizer_offload > 0},
      {"main_grads_dtype", to_string(l.optimizer_precision.main_grads)},
      {"main_params_dtype", to_string(l.optimizer_precision.main_params)},
      {"exp_avg_dtype", to_string(l.optimizer_precision.exp_avg)},
      {"exp_avg_sq_dtype", to_string(l.optimizer_precision.exp_avg_sq)},
      {"grad_reduce_in_bf16", l.optimizer_precision.grad_reduce_in_bf16},
      {"fp16", l.optimizer_precision.fp16},
      {"accumulate_allreduce_grads_in_fp32", l.optimizer_precision.accumulate_allreduce_grads_in_fp32},
      {"overlap_grad_reduce", l.overlap_grad_reduce},
      {"overlap_param_gather", l.overlap_param_gather},
      {"overlap_comm", deepspeed_only(l.zero.overlap_comm)},
      {"reduce_bucket_size", deepspeed_only(l.zero.reduce_bucket_size)},
      {"stage3_prefetch_bucket_size", deepspeed_only(l.zero.prefetch_bucket_size)},
      {"stage3_max_live_parameters", deepspeed_only(l.zero.max_live_parameters)},
      {"stage3_max_reuse_distance", deepspeed_only(l.zero.max_reuse_distance)},
      {"zero_hpz_partition_size", deepspeed_only(l.zero.hpz_partition_size)},
      {"use_megatron_fsdp", l.megatron_fsdp.enabled},
      {"fsdp_double_buffer", mfsdp_only(l.megatron_fsdp.double_buffer)},
      {"fsdp_mixed_precision", l.fsdp_mixed_precision},
      {"suggested_communication_unit_size", l.megatron_fsdp.enabled && l.megatron_fsdp.unit_size > 0
                                                ? nlohmann::json(l.megatron_fsdp.unit_size)
                                                : nlohmann::json(nullptr)},
      {"megatron_fsdp_main_grads_dtype", mfsdp_only(megatron_fsdp_main_grads_dtype(l.precision))},
      {"vpp", l.vpp},
      {"gpus", l.gpus()},
      {"mbs", l.mbs},
      {"gbs", l.gbs},
      {"seq", l.seq},
      {"microbatches", l.microbatches()},
      {"recompute", to_string(l.recompute)},
      // Full recompute's layers (Layout::recompute_method); null without full recompute.
      {"recompute_method",
       l.recompute == Recompute::full ? nlohmann::json(to_string(l.recompute_method)) : nlohmann::json(nullptr)},
      {"recompute_num_layers",
       l.recompute == Recompute::full ? nlohmann::json(l.recompute_num_layers) : nlohmann::json(nullptr)},
      // Selective recompute's modules (Layout::recompute_modules); null without selective recompute.
      {"recompute_modules", l.recompute == Recompute::selective
                                ? nlohmann::json(recompute_module_names(l.recompute_modules))
                                : nlohmann::json(nullptr)},
      {"schedule", to_string(l.schedule)},
      {"sequence_parallel", l.sequence_parallel},
      {"flash_attention", l.flash_attention},
      {"lora", l.lora.enabled()
                   ? nlohmann::json{{"rank", l.lora.rank}, {"targets", lora_targets_to_string(l.lora.targets)}}
                   : nlohmann::json(nullptr)},
      {"sharding",
       {{"params", to_string(l.sharding.params)},
        {"grads", to_string(l.sharding.grads)},
        {"optimizer", to_string(l.sharding.optimizer)}}}};
}

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string format_gib(double bytes, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, bytes / kGiB);
  return buf;
}

void add_cluster_json(nlohmann::json& doc, const ClusterSpec& c) {
  doc["cluster"] = c.name;
  doc["cluster_assumed"] = c.assumed;
  doc["cluster_source"] = c.source;
}

std::string assumed_cluster_line(const ClusterSpec& c) {
  return c.assumed ? "cluster " + c.name + " " + c.source + "\n" : std::string();
}

}  // namespace headroom::cli
