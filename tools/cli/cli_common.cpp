#include "cli_common.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "headroom/calibrate/profile.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom::cli {

std::int64_t parse_count(std::string_view flag, std::string_view text) {
  const std::string shown = "'" + std::string(text) + "'";
  const std::string expected = " (expected a positive integer up to 10^12)";
  if (text.empty()) throw Error(std::string(flag) + " is empty" + expected);
  // One rule for every count: a decimal number equal to a positive integer, with an optional sign ("8192",
  // "+8192", "8192.0" and "8.192e3" are one value).
  const std::string_view digits = text.front() == '+' ? text.substr(1) : text;
  double value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && ptr == end && !std::isfinite(value)))
    throw Error(std::string(flag) + " " + shown + " is out of range" + expected);
  if (ec != std::errc() || ptr != end) throw Error(std::string(flag) + " " + shown + " is not a number" + expected);
  if (value <= 0) throw Error(std::string(flag) + " " + shown + " must be positive" + expected);
  if (value > static_cast<double>(kMaxCount)) throw Error(std::string(flag) + " " + shown + " is too large" + expected);
  if (std::floor(value) != value) throw Error(std::string(flag) + " " + shown + " is not an integer" + expected);
  return static_cast<std::int64_t>(value);
}

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

ClusterSpec resolve_cluster(const SpecOptions& o, const SpecLibrary& lib) {
  if (o.cluster.empty() && o.gpu.empty()) {
    std::string known;
    for (const auto& n : lib.names("gpus")) known += (known.empty() ? "" : ", ") + n;
    throw Error("give --gpu or --cluster (known GPUs: " + known + ")");
  }
  if (o.cluster.empty()) return lib.cluster_for_gpu(lib.gpu(o.gpu));
  ClusterSpec c = lib.cluster(o.cluster);
  // A cluster file names its GPU; another GPU in its nodes would mix datasheets silently (H100s priced on an
  // A100 cluster's NVLink and NICs).
  if (!o.gpu.empty() && lib.gpu(o.gpu).name != c.gpu.name)
    throw Error("--gpu " + o.gpu + " is not the GPU of --cluster " + o.cluster + " (" + c.gpu.name +
                "): give one of them, or a cluster file with that GPU");
  return c;
}

Fp8Recipe fp8_recipe_from_flags(const FrameworkProfile& f, const std::string& precision, const std::string& fp8_format,
                                const std::string& fp8_recipe, bool fp8_param_gather) {
  if (!precision.empty() && precision != "bf16" && precision != "fp8")
    throw Error("--precision '" + precision.substr(0, 40) + "' is not priced (bf16 or fp8)");
  if (!fp8_format.empty() && fp8_format != "hybrid" && fp8_format != "e4m3")
    throw Error("--fp8-format '" + fp8_format.substr(0, 40) + "' is not Megatron-LM's (e4m3 or hybrid)");
  if (precision == "bf16" && !fp8_format.empty())
    throw Error("--precision bf16 and --fp8-format contradict each other");
  const bool fp8 = precision == "fp8" || !fp8_format.empty();
  if (!fp8 && (!fp8_recipe.empty() || fp8_param_gather))
    throw Error(std::string(fp8_param_gather ? "--fp8-param-gather" : "--fp8-recipe") +
                " needs FP8 training (--precision fp8 or --fp8-format)");
  if (!fp8) return Fp8Recipe::none;
  if (fp8_recipe.empty()) return f.fp8_recipes.empty() ? Fp8Recipe::delayed : f.fp8_recipes.front();
  const Fp8Recipe r = parse_fp8_recipe(fp8_recipe);
  if (r == Fp8Recipe::none) throw Error("--fp8-recipe none: use --precision bf16");
  return r;
}

void LayoutOptions::add_to(CLI::App& app, bool need_seq) {
  app.add_option("--tp,--tensor-model-parallel-size", tp, "tensor parallel size t")->capture_default_str();
  app.add_option("--cp,--context-parallel-size", cp, "context parallel size c")->capture_default_str();
  app.add_option("--pp,--pipeline-model-parallel-size", pp, "pipeline parallel size p")->capture_default_str();
  app.add_option("--vpp,--num-virtual-stages-per-pipeline-rank", vpp, "virtual stages per GPU (interleaved 1F1B)")
      ->capture_default_str();
  app.add_option("--decoder-first-pipeline-num-layers", first_stage_layers,
                 "decoder layers on the first pipeline stage (uneven stages; the middle ones share the rest)");
  app.add_option("--decoder-last-pipeline-num-layers", last_stage_layers,
                 "decoder layers on the last pipeline stage (uneven stages)");
  app.add_flag("--account-for-embedding-in-pipeline-split", embedding_in_split,
               "the embedding counts as a layer: (L+1)/p per stage, one decoder layer fewer on the first");
  app.add_flag("--account-for-loss-in-pipeline-split", loss_in_split,
               "the loss counts as a layer: one decoder layer fewer on the last stage");
  app.add_option("--ep,--expert-model-parallel-size", ep, "expert parallel size (models with experts)")
      ->capture_default_str();
  app.add_option("--etp,--expert-tensor-parallel-size", etp, "tensor parallel size of each expert (default: --tp)");
  app.add_option("--moe-token-dispatcher-type", dispatcher,
                 "alltoall (k copies per token) or flex (DeepEP/HybridEP: once per remote node)");
  app.add_option("--moe-expert-capacity-factor", capacity_factor,
                 "tokens an expert takes at most, over the mean (default: dropless, priced as balanced)");
  app.add_option("--precision", precision, "GEMM precision: bf16 (default) or fp8 (the decoder's linear layers)");
  app.add_option("--fp8-format", fp8_format, "Megatron-LM's FP8 format e4m3|hybrid (FP8 on, as --precision fp8)");
  app.add_option("--fp8-recipe", fp8_recipe, "FP8 scaling: delayed (Megatron-LM's default) or tensorwise (current)");
  app.add_flag("--fp8-param-gather", fp8_param_gather,
               "weights kept in FP8 and all-gathered in FP8 (torchtitan: enable_fsdp_float8_all_gather)");
  app.add_flag("--optimizer-cpu-offload", optimizer_cpu_offload, "optimizer states and step on the CPU (Megatron-LM)");
  app.add_option("--optimizer-offload-fraction", offload_fraction,
                 "share of the optimizer offloaded, 0..1 (default 1 with --optimizer-cpu-offload)");
  app.add_flag("--overlap-cpu-optimizer-d2h-h2d", overlap_offload, "overlap the host copies with the CPU step");
  app.add_flag("--no-overlap-p2p-communication", no_overlap_p2p,
               "pipeline sends hold the stage (Megatron-LM overlaps them with the interleaved schedule by default)");
  app.add_flag("--tp-comm-overlap", tp_comm_overlap,
               "TP all-gathers/reduce-scatters pipelined with their GEMMs (Megatron-LM, TransformerEngine userbuffers; "
               "needs sequence parallelism)");
  app.add_option("--cpu-offloading-num-layers", offload_layers,
                 "decoder layers whose activations go to host memory (Megatron-LM; pp 1 only)");
  app.add_option("--mbs,--micro-batch-size", mbs, "micro-batch size b")->capture_default_str();
  app.add_option("--gpus,--num-gpus,--world-size", gpus, "number of GPUs N (DP = N / (t·c·p))");
  app.add_option("--dp,--data-parallel-size", dp, "data parallel size d (instead of --gpus)");
  app.add_option("--gbs,--global-batch-size", gbs, "global batch size in sequences (default: DP·mbs)");
  auto* seq_opt = app.add_option("--seq,--seq-length", seq, "sequence length s in tokens");
  if (need_seq) seq_opt->required();
  seq_optional = !need_seq;
  app.add_option("--lora-rank", lora_rank, "LoRA adapters of rank r on frozen base weights (default: full training)");
  app.add_option("--lora-targets", lora_targets, "LoRA target projections: q,k,v,o,gate,up,down (default all)");
  app.add_option("--recompute,--recompute-granularity", recompute, "activation recompute: none|selective|full");
  app.add_option("--schedule", schedule, "pipeline schedule: 1f1b|interleaved|gpipe");
  app.add_flag("--no-sp", no_sp, "sequence parallelism off");
  app.add_flag("--sp,--sequence-parallel", sp, "sequence parallelism on");
  app.add_flag("--no-flash-attn", no_flash, "attention without FlashAttention (stores the s² softmax)");
  app.add_flag("--flash-attn,--use-flash-attn", flash, "FlashAttention on");
  app.add_option("--sharding", sharding,
                 "DP sharding of P/G/OS: ddp, zero1, zero2, zero3, fsdp, mics, hsdp, paro-XYZ or a code like NIG");
}

Layout LayoutOptions::build(const ModelSpec& model, const FrameworkProfile& f) const {
  LayoutRequest r;
  if (!lora_rank.empty()) r.lora_rank = parse_count("--lora-rank", lora_rank);
  if (!lora_targets.empty()) {
    if (lora_rank.empty()) throw Error("--lora-targets needs --lora-rank");
    r.lora_targets = parse_lora_targets(lora_targets);
  }
  if (!sharding.empty()) {
    try {
      r.sharding = parse_sharding(sharding);
    } catch (const Error& e) {
      throw Error(std::string("--sharding: ") + e.what());
    }
  }
  if (no_sp && sp) throw Error("--no-sp and --sequence-parallel contradict each other");
  if (no_flash && flash) throw Error("--no-flash-attn and --use-flash-attn contradict each other");
  if (no_sp || sp) r.sequence_parallel = sp;
  if (no_flash || flash) r.flash_attention = flash;
  if (!recompute.empty()) r.recompute = parse_recompute(recompute);
  r.tp = parse_count("--tp", tp);
  r.cp = parse_count("--cp", cp);
  r.pp = parse_count("--pp", pp);
  r.vpp = parse_count("--vpp", vpp);
  if (!first_stage_layers.empty())
    r.split.first_stage_layers = parse_count("--decoder-first-pipeline-num-layers", first_stage_layers);
  if (!last_stage_layers.empty())
    r.split.last_stage_layers = parse_count("--decoder-last-pipeline-num-layers", last_stage_layers);
  r.split.embedding_in_split = embedding_in_split;
  r.split.loss_in_split = loss_in_split;
  r.ep = parse_count("--ep", ep);
  if (!etp.empty()) r.etp = parse_count("--etp", etp);
  if (!capacity_factor.empty()) {
    const std::string shown = "--moe-expert-capacity-factor '" + capacity_factor + "'";
    double value = 0;
    const char* end = capacity_factor.data() + capacity_factor.size();
    const auto [ptr, ec] = std::from_chars(capacity_factor.data(), end, value);
    if (ec != std::errc() || ptr != end || !(value >= 1.0) || value > 1e6)
      throw Error(shown + " must be a number from 1 to 10^6 (tokens per expert over the mean)");
    r.expert_load = value;
  }
  if (!dispatcher.empty()) {
    if (dispatcher != "alltoall" && dispatcher != "flex")
      throw Error("--moe-token-dispatcher-type '" + dispatcher.substr(0, 40) +
                  "' is not priced (alltoall or flex; allgather is not)");
    r.dispatcher = dispatcher == "flex" ? ExpertDispatcher::flex : ExpertDispatcher::alltoall;
  }
  r.fp8 = fp8_recipe_from_flags(f, precision, fp8_format, fp8_recipe, fp8_param_gather);
  r.fp8_param_gather = fp8_param_gather;
  if (!offload_fraction.empty()) {
    double value = -1;
    const char* end = offload_fraction.data() + offload_fraction.size();
    const auto [ptr, ec] = std::from_chars(offload_fraction.data(), end, value);
    if (ec != std::errc() || ptr != end || !(value >= 0.0 && value <= 1.0))
      throw Error("--optimizer-offload-fraction '" + offload_fraction.substr(0, 40) + "' must be a number from 0 to 1");
    if (!optimizer_cpu_offload) throw Error("--optimizer-offload-fraction needs --optimizer-cpu-offload");
    r.optimizer_offload = value;
  } else if (optimizer_cpu_offload) {
    r.optimizer_offload = 1.0;  // megatron/training/arguments.py's default
  }
  r.overlap_offload_copies = overlap_offload;
  r.overlap_p2p_comm = !no_overlap_p2p;
  r.tp_comm_overlap = tp_comm_overlap;
  if (!offload_layers.empty()) {
    r.activation_offload_layers =
        offload_layers == "0" ? 0 : parse_count("--cpu-offloading-num-layers", offload_layers);
  }
  r.mbs = parse_count("--mbs", mbs);
  r.seq = seq.empty() && seq_optional ? (r.cp > 1 ? 2 * r.cp : 1) : parse_count("--seq", seq);
  if (!schedule.empty()) r.schedule = parse_schedule(schedule);
  if (!dp.empty()) r.dp = parse_count("--dp", dp);
  if (!gpus.empty()) r.gpus = parse_count("--gpus", gpus);
  if (!gbs.empty()) r.gbs = parse_count("--gbs", gbs);
  return build_layout(model, f, r);
}

Layout LayoutOptions::build(const ResolvedSpecs& specs) const {
  Layout l = build(specs.model, specs.framework);
  validate_precision_and_offload(l, specs.cluster);
  return l;
}

void refuse_given(const CLI::App& app, std::initializer_list<const char*> flags, std::string_view why) {
  for (const char* flag : flags) {
    const CLI::Option* o = app.get_option_no_throw(flag);
    if (o != nullptr && o->count() > 0) throw Error(std::string(flag) + " does nothing " + std::string(why));
  }
}

nlohmann::json interval_json(const ErrorBand& band, double value, double unit) {
  if (!band.known) return nullptr;
  return nlohmann::json::array({band.lower(value) / unit, band.upper(value) / unit});
}

nlohmann::json memory_verdict_json(const ResolvedSpecs& r, const Layout& l) {
  const MemoryEstimate e = estimate_memory(r.model, r.cluster, l, r.framework.residual);
  const ErrorBand& band = r.framework.memory_band;
  return {{"peak_gib", e.peak_bytes / kGiB},
          {"capacity_gib", e.capacity_bytes / kGiB},
          {"peak_gib_interval", interval_json(band, e.peak_bytes, kGiB)},
          {"verdict", to_string(memory_verdict(e.peak_bytes, e.capacity_bytes, band))}};
}

std::string memory_warning(const ResolvedSpecs& r, const Layout& l) {
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
  if (l.split.even()) return "";
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
  return {
      {"tp", l.tp},
      {"cp", l.cp},
      {"pp", l.pp},
      {"stage_layers", stages},
      {"decoder_first_pipeline_num_layers", optional_count(l.split.first_stage_layers)},
      {"decoder_last_pipeline_num_layers", optional_count(l.split.last_stage_layers)},
      {"account_for_embedding_in_pipeline_split", l.split.embedding_in_split},
      {"account_for_loss_in_pipeline_split", l.split.loss_in_split},
      {"dp", l.dp},
      {"ep", l.ep},
      {"etp", l.expert_tp()},
      {"moe_token_dispatcher_type", to_string(l.dispatcher)},
      {"precision", l.fp8 == Fp8Recipe::none ? "bf16" : "fp8"},
      {"fp8_recipe", l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(to_string(l.fp8))},
      {"fp8_library", l.fp8 == Fp8Recipe::none ? nlohmann::json(nullptr) : nlohmann::json(to_string(l.fp8_library))},
      {"fp8_param_gather", l.fp8_param_gather},
      {"optimizer_offload_fraction", l.optimizer_offload},
      {"overlap_cpu_optimizer_d2h_h2d", l.overlap_offload_copies},
      {"cpu_offloading_num_layers", l.activation_offload_layers},
      {"overlap_p2p_comm", pipeline_sends_overlap(l)},
      {"tp_comm_overlap", l.tp_comm_overlap},
      {"vpp", l.vpp},
      {"gpus", l.gpus()},
      {"mbs", l.mbs},
      {"gbs", l.gbs},
      {"seq", l.seq},
      {"microbatches", l.microbatches()},
      {"recompute", to_string(l.recompute)},
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

PerfCoefficients perf_coefficients_file(const std::string& path, const nlohmann::json& doc, const SpecLibrary& lib) {
  validate_against_schema(doc, read_json_file(lib.data_dir() / "schema" / "perf.schema.json"), path);
  return perf_coefficients_from_json(doc, path);
}

ResolvedSpecs with_profile(ResolvedSpecs r, const std::string& profile, const SpecLibrary& lib) {
  if (profile.empty()) return r;
  const nlohmann::json doc = read_json_file(profile);
  if (doc.is_object() && doc.contains("format")) {  // a calibration profile: coefficients and the cluster's numbers
    const calibrate::Profile p = calibrate::load_profile(profile, lib.data_dir());
    auto [cluster, coefficients] =
        calibrate::apply_profile(p, static_cast<std::int64_t>(head_dim(r.model)), r.cluster, r.coefficients);
    r.cluster = std::move(cluster);
    r.coefficients = std::move(coefficients);
    return r;
  }
  PerfCoefficients file = perf_coefficients_file(profile, doc, lib);
  add_device_entries(file, r.coefficients);  // a GPU the file has no entry for: the shipped device entries
  r.coefficients = std::move(file);
  if (!doc.is_object() || !doc.contains("memory")) return r;
  // A coefficients file of `calibrate --from-runs` may carry a memory fit: its fixed term replaces the framework's.
  const auto& memory = doc.at("memory");
  const std::string fitted_for = memory.at("framework").get<std::string>();
  if (lower(fitted_for) != lower(r.framework.name))
    throw Error("--profile " + profile + ": its memory fit is for framework " + fitted_for + ", not " +
                r.framework.name);
  r.framework.residual.fixed_bytes = memory.at("fixed_GiB").get<double>() * kGiB;
  r.framework.memory_band = ErrorBand{};
  return r;
}

ResolvedSpecs resolve(const SpecOptions& o, const std::string& profile) {
  const SpecLibrary lib = o.library();
  ResolvedSpecs r;
  r.model = lib.model(o.model);
  r.cluster = resolve_cluster(o, lib);
  r.framework = lib.framework(o.framework);
  r.coefficients = default_perf_coefficients(lib, r.framework.name);
  return with_profile(std::move(r), profile, lib);
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
