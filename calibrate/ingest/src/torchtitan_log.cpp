// torchtitan training logs with the job's TOML config.
#include "headroom/ingest/measured_runs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/layout.hpp"
#include "text.hpp"
#include "torchtitan_job.hpp"

namespace headroom::calibrate {

using text::at;
using text::lines_of;
using text::measurement_after;
using text::out_of_memory;
using text::steady_state;
using text::trim;

// ---- torchtitan -----------------------------------------------------------------------------------------

namespace {

// The subset of TOML torchtitan's job configs use: [section] headers and `key = value` lines with strings,
// numbers, booleans (and arrays, kept as text); '#' comments.
std::map<std::string, std::string> toml_values(std::string_view toml, std::string_view where) {
  std::map<std::string, std::string> out;
  std::string section;
  int lineno = 0;
  for (auto line : lines_of(toml)) {
    ++lineno;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      const auto close = line.find(']');
      if (close == std::string_view::npos) throw Error(at(where, lineno) + ": a section header without ']'");
      section = std::string(trim(line.substr(1, close - 1)));
      continue;
    }
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) throw Error(at(where, lineno) + ": expected 'key = value'");
    auto value = trim(line.substr(eq + 1));
    if (!value.empty() && value[0] == '"') {
      const auto close = value.find('"', 1);
      if (close == std::string_view::npos) throw Error(at(where, lineno) + ": a string without its closing quote");
      value = value.substr(1, close - 1);
    } else if (const auto hash = value.find('#'); hash != std::string_view::npos) {
      value = trim(value.substr(0, hash));
    }
    out[section + "." + std::string(trim(line.substr(0, eq)))] = std::string(value);
  }
  return out;
}

std::int64_t toml_int(const std::map<std::string, std::string>& t, const std::string& key, std::int64_t fallback,
                      std::string_view where) {
  const auto it = t.find(key);
  if (it == t.end()) return fallback;
  std::int64_t x = 0;
  const auto& s = it->second;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || p != s.data() + s.size() || x == 0 || x < -1)
    throw Error(std::string(where) + ": " + key + " '" + s + "' is not a positive integer (or -1)");
  return x;
}

// torchtitan model name and flavor to a shipped model: torchtitan's llama3 flavors are Llama 3.1's shapes
// (torchtitan/models/llama3/__init__.py).
std::string torchtitan_model(const std::map<std::string, std::string>& t) {
  const auto name = t.count("model.name") ? t.at("model.name") : std::string();
  auto flavor = t.count("model.flavor") ? t.at("model.flavor") : std::string();
  std::transform(flavor.begin(), flavor.end(), flavor.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name == "llama3" && (flavor == "8b" || flavor == "70b" || flavor == "405b")) return "llama3.1-" + flavor;
  return name + (flavor.empty() ? "" : "-" + flavor);
}

std::string value_or(const std::map<std::string, std::string>& t, const std::string& key, const std::string& fallback) {
  const auto it = t.find(key);
  return it == t.end() ? fallback : it->second;
}

// [activation_checkpoint] mode and selective_ac_option as headroom's recompute knobs: none, full, op for torchtitan's
// per-op selective checkpointing, or layer-selective checkpointing, a number N: every N-th block of the GPU's
// checkpointed whole (torchtitan/distributed/activation_checkpoint.py at 238fa9953e, _apply_layer_sac: a process-wide
// count of the blocks wrapped, N = 0 every block), recompute full by recompute_method every. torchtitan's defaults
// (config_manager.py): mode "selective", selective_ac_option "2".
void torchtitan_recompute(const std::map<std::string, std::string>& t, std::map<std::string, std::string>& l,
                          std::string_view where) {
  const std::string mode = value_or(t, "activation_checkpoint.mode", "selective");
  if (mode == "none" || mode == "full") {
    l["recompute"] = mode;
    return;
  }
  if (mode != "selective")
    throw Error(std::string(where) + ": activation_checkpoint.mode = " + mode.substr(0, 40) +
                " is not priced (valid: none, full, selective)");
  const std::string option = value_or(t, "activation_checkpoint.selective_ac_option", "2");
  if (option == "op") {
    l["recompute"] = "op";
    return;
  }
  if (option.empty() || option.size() > 9 || option.find_first_not_of("0123456789") != std::string::npos)
    throw Error(std::string(where) + ": activation_checkpoint.selective_ac_option = " + option.substr(0, 40) +
                " is neither op nor a block count N (every N-th block)");
  l["recompute"] = "full";
  if (const std::string every = option == "0" ? "1" : option; every != "1") {
    l["recompute_method"] = "every";
    l["recompute_num_layers"] = every;
  }
}

}  // namespace

namespace {

// Every key of torchtitan's job config (torchtitan/config/job_config.py at 238fa9953e, the TOML era, with the older
// names [training] compile/batch_size and [float8] of 2024) that headroom reads or ignores, with why; a key not here
// is refused naming it. A prefix ending in ".*" covers its section (text::key_rule).
struct TomlKeyRule {
  std::string_view key;
  bool read;
  std::string_view why;  // what it sets (read) or why it changes neither memory nor step time (ignored)
};
constexpr TomlKeyRule kTorchtitanKeys[] = {
    {"model.name", true, "the model"},
    {"model.flavor", true, "the model"},
    {"model.converters", true, "float8 linears"},
    {"model.hf_assets_path", false, "tokenizer and checkpoint path"},
    {"model.tokenizer_path", false, "tokenizer path"},
    {"model.print_after_conversion", false, "logging"},
    {"float8.*", true, "float8 linears (before torchtitan 0.2)"},
    {"quantize.linear.float8.*", true, "float8 linears"},
    {"optimizer.name", true, "AdamW's states"},
    {"optimizer.lr", false, "learning rate"},
    {"optimizer.eps", false, "Adam's epsilon"},
    {"optimizer.weight_decay", false, "weight decay"},
    {"optimizer.implementation", false, "foreach or fused: the same states, one pass either way"},
    {"lr_scheduler.*", false, "learning-rate schedule"},
    {"training.local_batch_size", true, "sequences per DP rank"},
    {"training.batch_size", true, "sequences per DP rank (before torchtitan 0.2)"},
    {"training.global_batch_size", true, "the global batch"},
    {"training.seq_len", true, "the sequence"},
    {"training.mixed_precision_param", true, "BF16 compute"},
    {"training.mixed_precision_reduce", true, "FP32 gradient reduction"},
    {"training.compile", true, "torch.compile (before torchtitan 0.2)"},
    {"training.dtype", true, "FP32 parameters"},
    {"training.enable_cpu_offload", true, "FSDP's CPU offload"},
    {"training.max_norm", false, "gradient clipping: one pass over the gradients"},
    {"training.steps", false, "run length"},
    {"training.dataset", false, "data"},
    {"training.dataset_path", false, "data"},
    {"training.seed", false, "seed"},
    {"training.deterministic", false, "determinism"},
    {"training.gc_freq", false, "Python garbage collection"},
    {"training.gc_debug", false, "Python garbage collection"},
    {"training.dataloader.*", false, "data loading"},
    {"parallelism.data_parallel_replicate_degree", true, "HSDP replicas"},
    {"parallelism.data_parallel_shard_degree", true, "FSDP shards"},
    {"parallelism.fsdp_reshard_after_forward", true, "FSDP2 resharding"},
    {"parallelism.tensor_parallel_degree", true, "TP"},
    {"parallelism.disable_loss_parallel", true, "loss parallel"},
    {"parallelism.enable_async_tensor_parallel", true, "async TP"},
    {"parallelism.pipeline_parallel_degree", true, "PP"},
    {"parallelism.pipeline_parallel_schedule", true, "the pipeline schedule"},
    {"parallelism.pipeline_parallel_microbatch_size", true, "the micro-batch"},
    {"parallelism.pipeline_parallel_first_stage_less_layers", true, "the pipeline split"},
    {"parallelism.pipeline_parallel_last_stage_less_layers", true, "the pipeline split"},
    {"parallelism.pipeline_parallel_layers_per_stage", true, "the virtual stages a rank"},
    {"parallelism.context_parallel_degree", true, "CP"},
    {"parallelism.context_parallel_rotate_method", true, "CP's K/V exchange"},
    {"parallelism.context_parallel_load_balancer", false, "CP's causal load balance, priced as balanced"},
    {"parallelism.expert_parallel_degree", true, "experts"},
    {"parallelism.expert_tensor_parallel_degree", true, "experts"},
    {"activation_checkpoint.mode", true, "recompute"},
    {"activation_checkpoint.selective_ac_option", true, "recompute"},
    {"activation_checkpoint.preserve_rng_state", false, "RNG state: a few bytes per block"},
    {"activation_checkpoint.determinism_check", false, "checks"},
    {"activation_checkpoint.debug", false, "logging"},
    {"activation_checkpoint.early_stop", false, "the recompute stops where the saved tensors are"},
    {"compile.enable", true, "torch.compile"},
    {"compile.components", false, "the blocks are what is priced compiled"},
    {"compile.backend", true, "Inductor"},
    {"checkpoint.*", false, "checkpointing, between the measured steps"},
    {"validation.*", false, "validation, between the training steps"},
    {"job.*", false, "paths and description"},
    {"profiling.*", false, "profiling"},
    {"metrics.*", false, "logging"},
    {"comm.*", false, "timeouts and traces"},
    {"memory_estimation.*", false, "an estimate of its own"},
};

// A setting torchtitan runs that headroom does not price: refused naming the key and the value.
[[noreturn]] void refuse_key(std::string_view where, const std::string& key, const std::string& value,
                             const std::string& why) {
  throw Error(std::string(where) + ": " + key + " = " + value.substr(0, 60) + ": " + why);
}

}  // namespace

TorchtitanJob read_torchtitan_job(std::string_view toml, std::int64_t gpus, std::string_view where) {
  const auto t = toml_values(toml, std::string(where) + " (TOML)");
  std::vector<std::string> read, ignored;
  for (const auto& [key, value] : t) {
    const TomlKeyRule* rule = text::key_rule(kTorchtitanKeys, key);
    if (rule == nullptr)
      throw Error(std::string(where) + ": " + key +
                  " is a key headroom does not know: it may change memory or time (valid: the keys of torchtitan's "
                  "job config that headroom reads or ignores; --ignore is not offered for a job config)");
    (rule->read ? read : ignored)
        .push_back(key + " = " + value + (rule->read ? "" : " (" + std::string(rule->why) + ")"));
  }
  TorchtitanJob job = torchtitan_job(t, gpus, where);
  job.read = std::move(read), job.ignored = std::move(ignored);
  return job;
}

TorchtitanJob torchtitan_job(const std::map<std::string, std::string>& t, std::int64_t gpus, std::string_view where) {
  TorchtitanJob job;
  const auto is_true = [&](const std::string& key) { return value_or(t, key, "false") == "true"; };
  // What headroom cannot price, each naming its key.
  if (const std::string optimizer = value_or(t, "optimizer.name", "AdamW"); optimizer != "AdamW" && optimizer != "Adam")
    refuse_key(where, "optimizer.name", optimizer, "only Adam(W)'s two FP32 moments are priced");
  if (value_or(t, "training.mixed_precision_param", "bfloat16") != "bfloat16")
    refuse_key(where, "training.mixed_precision_param", t.at("training.mixed_precision_param"),
               "FP32 compute is not priced (valid: bfloat16)");
  if (value_or(t, "training.mixed_precision_reduce", "float32") != "float32")
    refuse_key(where, "training.mixed_precision_reduce", t.at("training.mixed_precision_reduce"),
               "only FP32 gradient reduction is priced (valid: float32)");
  if (value_or(t, "training.dtype", "float32") != "float32")
    refuse_key(where, "training.dtype", t.at("training.dtype"), "BF16 parameters are not priced (valid: float32)");
  if (is_true("training.enable_cpu_offload"))
    refuse_key(where, "training.enable_cpu_offload", "true", "FSDP's CPU offload is not priced");
  if (is_true("parallelism.disable_loss_parallel"))
    refuse_key(where, "parallelism.disable_loss_parallel", "true", "whole logits on every TP rank are not priced");
  if (value_or(t, "compile.backend", "inductor") != "inductor")
    refuse_key(where, "compile.backend", t.at("compile.backend"), "only Inductor's fusion is priced");
  for (const char* key : {"parallelism.expert_parallel_degree", "parallelism.expert_tensor_parallel_degree"})
    if (value_or(t, key, "1") != "1") refuse_key(where, key, t.at(key), "experts are priced under megatron only");
  // Float8 linear layers (torchtitan's model.converters "float8", later "quantize.linear.float8": torchao, dynamic
  // tensorwise scaling unless a rowwise recipe is named); MX formats are not priced.
  bool float8 = false, float8_gather = false;
  if (const auto it = t.find("model.converters"); it != t.end() && it->second.find('"') != std::string::npos) {
    const std::string& c = it->second;
    float8 = c == "[\"float8\"]" || c == "[\"quantize.linear.float8\"]";
    if (!float8)
      throw Error(std::string(where) + ": model.converters = " + c.substr(0, 80) +
                  ": only torchao's float8 converter is priced (MX and other formats are not)");
    for (const char* section : {"float8.", "quantize.linear.float8."}) {
      const auto recipe = t.find(std::string(section) + "recipe_name");
      if (recipe != t.end() && recipe->second != "tensorwise")
        throw Error(std::string(where) + ": " + section + "recipe_name = " + recipe->second.substr(0, 40) +
                    ": only the tensorwise float8 recipe is priced");
      const auto gather = t.find(std::string(section) + "enable_fsdp_float8_all_gather");
      if (gather != t.end() && gather->second == "true") float8_gather = true;
    }
  }
  const auto tp = toml_int(t, "parallelism.tensor_parallel_degree", 1, where);
  const auto pp = toml_int(t, "parallelism.pipeline_parallel_degree", 1, where);
  const auto cp = toml_int(t, "parallelism.context_parallel_degree", 1, where);
  const auto replicate = toml_int(t, "parallelism.data_parallel_replicate_degree", 1, where);
  auto shard = toml_int(t, "parallelism.data_parallel_shard_degree", -1, where);
  if (tp < 0 || pp < 0 || cp < 0 || replicate < 0)
    throw Error(std::string(where) + ": only data_parallel_shard_degree may be -1 (the rest of the GPUs)");
  // Products of the degrees stay inside int64: each at most 10^6, the world and the batch at most 10^12.
  const auto bounded = [&](const char* key, std::int64_t v) {
    if (v > 1'000'000) throw Error(std::string(where) + ": " + key + " " + std::to_string(v) + " is more than 10^6");
  };
  bounded("parallelism.tensor_parallel_degree", tp), bounded("parallelism.pipeline_parallel_degree", pp);
  bounded("parallelism.context_parallel_degree", cp), bounded("parallelism.data_parallel_replicate_degree", replicate);
  bounded("parallelism.data_parallel_shard_degree", shard);
  if (tp * pp * cp > 1'000'000'000'000 / replicate)
    throw Error(std::string(where) + ": the parallel degrees multiply to more than 10^12 GPUs");
  if (shard == -1) {
    if (gpus <= 0 || gpus % (tp * pp * cp * replicate) != 0)
      throw Error(std::string(where) + ": data_parallel_shard_degree = -1 needs the number of GPUs (a multiple of " +
                  std::to_string(tp * pp * cp * replicate) + ")");
    shard = gpus / (tp * pp * cp * replicate);
  }
  if (tp * pp * cp * replicate > 1'000'000'000'000 / shard)
    throw Error(std::string(where) + ": the parallel degrees multiply to more than 10^12 GPUs");
  const auto world = tp * pp * cp * replicate * shard;
  if (gpus > 0 && gpus != world)
    throw Error(std::string(where) + ": the TOML's degrees make " + std::to_string(world) + " GPUs, not " +
                std::to_string(gpus));
  // [training] local_batch_size (batch_size before torchtitan 0.2) sequences per DP rank and step.
  const auto local = toml_int(t, "training.local_batch_size", toml_int(t, "training.batch_size", 8, where), where);
  bounded("training.local_batch_size", local);
  const auto seq = toml_int(t, "training.seq_len", 2048, where);
  const auto dp = replicate * shard;
  auto gbs = toml_int(t, "training.global_batch_size", -1, where);
  if (gbs == -1) gbs = local * dp;
  auto& l = job.layout;
  l = {{"framework", "torchtitan"},
       {"model", torchtitan_model(t)},
       {"gpus", std::to_string(world)},
       {"tp", std::to_string(tp)},
       {"pp", std::to_string(pp)},
       {"cp", std::to_string(cp)},
       {"mbs", std::to_string(pp > 1 ? toml_int(t, "parallelism.pipeline_parallel_microbatch_size", 1, where) : local)},
       {"gbs", std::to_string(gbs)},
       {"seq", std::to_string(seq)}};
  // FSDP2 (parallelize.py apply_fsdp): "default" reshards after forward without PP and not with it.
  const std::string reshard = value_or(t, "parallelism.fsdp_reshard_after_forward", "default");
  if (reshard != "default" && reshard != "always" && reshard != "never")
    refuse_key(where, "parallelism.fsdp_reshard_after_forward", reshard, "valid: default, always, never");
  const bool resharded = reshard == "always" || (reshard == "default" && pp == 1);
  l["sharding"] = shard == 1      ? (replicate > 1 ? "NNN" : "GGG")
                  : replicate > 1 ? (resharded ? "III" : "NII")
                                  : (resharded ? "GGG" : "NGG");
  if (pp > 1) {
    const std::string schedule = value_or(t, "parallelism.pipeline_parallel_schedule", "1F1B");
    const auto* known = std::find_if(kTorchtitanSchedules.begin(), kTorchtitanSchedules.end(),
                                     [&](Schedule s) { return torchtitan_schedule_name(s) == schedule; });
    if (known == kTorchtitanSchedules.end()) {
      // DualPipeV overlaps one micro-batch's forward with another's backward.
      std::string valid;
      for (const Schedule s : kTorchtitanSchedules)
        valid += (valid.empty() ? "" : ", ") + std::string(torchtitan_schedule_name(s));
      refuse_key(where, "parallelism.pipeline_parallel_schedule", schedule, "not priced (valid: " + valid + ")");
    }
    l["schedule"] = std::string(to_string(*known));
    // Multi-stage schedules run 2 stages a rank unless the layers per stage say otherwise (the V exactly 2).
    if (multi_chunk_schedule(*known)) l["vpp"] = "2";
    // The first and last stages hold one layer fewer by default (first/last_stage_less_layers 1, for the embedding
    // and the output): Megatron-LM's embedding and loss counted in the split.
    for (const auto& [key, column] :
         {std::pair{"parallelism.pipeline_parallel_first_stage_less_layers", "account_for_embedding_in_pipeline_split"},
          std::pair{"parallelism.pipeline_parallel_last_stage_less_layers", "account_for_loss_in_pipeline_split"}}) {
      const std::string less = value_or(t, key, "1");
      if (less != "0" && less != "1") refuse_key(where, key, less, "valid: 0 or 1 (a layer's worth)");
      if (less == "1") l[column] = "true";
    }
  }
  if (pp > 1 && t.contains("parallelism.pipeline_parallel_layers_per_stage"))
    job.layers_per_stage = toml_int(t, "parallelism.pipeline_parallel_layers_per_stage", 0, where);
  if (pp > 1 && t.contains("parallelism.pipeline_parallel_layers_per_stage") && job.layers_per_stage < 1)
    refuse_key(where, "parallelism.pipeline_parallel_layers_per_stage",
               t.at("parallelism.pipeline_parallel_layers_per_stage"), "valid: a positive layer count");
  torchtitan_recompute(t, l, where);
  for (const char* key : {"compile.enable", "training.compile"})
    if (is_true(key)) l["compile"] = "true";
  if (is_true("parallelism.enable_async_tensor_parallel")) l["tp_comm_overlap"] = "true";
  if (const auto rotate = t.find("parallelism.context_parallel_rotate_method"); rotate != t.end()) {
    if (rotate->second != "allgather" && rotate->second != "alltoall")
      refuse_key(where, rotate->first, rotate->second, R"(valid: "allgather", "alltoall")");
    l["context_parallel_rotate_method"] = rotate->second;
  }
  if (float8) {
    l["precision"] = "fp8";
    l["fp8_recipe"] = "tensorwise";
    l["fp8_param_gather"] = float8_gather ? "true" : "false";
  }
  return job;
}

void set_torchtitan_stages_per_rank(std::map<std::string, std::string>& layout, std::int64_t layers_per_stage,
                                    std::int64_t num_layers, std::string_view where) {
  const std::int64_t pp = std::stoll(layout.at("pp"));
  const std::int64_t effective = num_layers + (layout.contains("account_for_embedding_in_pipeline_split") ? 1 : 0) +
                                 (layout.contains("account_for_loss_in_pipeline_split") ? 1 : 0);
  const std::int64_t stages = effective / layers_per_stage + (effective % layers_per_stage != 0 ? 1 : 0);
  const std::int64_t per_rank = stages / pp;
  const std::string key = "parallelism.pipeline_parallel_layers_per_stage", value = std::to_string(layers_per_stage);
  const auto counted = [&] {
    return std::to_string(stages) + " stages of the " + std::to_string(effective) +
           " layers (the decoder's and the first/last_stage_less_layers)";
  };
  if (stages % pp != 0) refuse_key(where, key, value, counted() + " are not a multiple of pp " + std::to_string(pp));
  const Schedule schedule = parse_schedule(layout.at("schedule"));
  const std::int64_t runs = schedule == Schedule::zbv ? 2 : multi_chunk_schedule(schedule) ? 0 : 1;  // 0: at least 2
  if (runs == 0 ? per_rank < 2 : per_rank != runs)
    refuse_key(where, key, value,
               counted() + " give " + std::to_string(per_rank) + " a rank; the schedule runs " +
                   (runs == 0 ? std::string("at least 2") : "exactly " + std::to_string(runs)));
  if (effective % stages != 0)
    refuse_key(where, key, value, counted() + " split unevenly, which headroom does not price");
  layout["vpp"] = std::to_string(per_rank);
}

MeasuredRun parse_torchtitan_log(std::string_view log, std::string_view toml, std::int64_t gpus,
                                 std::string_view where) {
  MeasuredRun run;
  run.source = std::string(where);
  const TorchtitanJob job = read_torchtitan_job(toml, gpus, std::string(where) + " (TOML)");
  if (job.layers_per_stage > 0)
    refuse_key(std::string(where) + " (TOML)", "parallelism.pipeline_parallel_layers_per_stage",
               std::to_string(job.layers_per_stage),
               "the stages a rank follow from the model's layers, which a run's log does not give (headroom check "
               "reads the job config with its model)");
  run.layout = job.layout;
  const std::int64_t world = std::stoll(run.layout.at("gpus"));
  const std::int64_t gbs = std::stoll(run.layout.at("gbs")), seq = std::stoll(run.layout.at("seq"));
  std::vector<double> tps, tflops, mem;
  for (const auto line : lines_of(log)) {
    if (line.find("step:") == std::string_view::npos || line.find("tps:") == std::string_view::npos) continue;
    const auto x = measurement_after(line, "tps:");
    if (!x) continue;
    tps.push_back(*x);
    if (const auto f = measurement_after(line, "tflops:")) tflops.push_back(*f);
    if (const auto m = measurement_after(line, "memory:")) mem.push_back(*m);
  }
  if (!mem.empty()) run.peak_memory_gib = *std::max_element(mem.begin(), mem.end());
  if (out_of_memory(log))
    run.outcome = RunOutcome::oom;
  else if (tps.empty())
    throw Error(std::string(where) +
                ": no 'step: ... tps:' line and no out-of-memory error: the run neither trained "
                "nor ran out of memory");
  if (!tps.empty() && run.outcome == RunOutcome::ok) {
    run.tokens_per_s = steady_state(tps) * static_cast<double>(world);  // tps is per GPU
    if (!std::isfinite(*run.tokens_per_s))
      throw Error(std::string(where) + ": tps " + std::to_string(steady_state(tps)) +
                  " per GPU is no throughput a run can reach");
    run.step_time_s = static_cast<double>(gbs) * static_cast<double>(seq) / *run.tokens_per_s;
    if (!tflops.empty()) run.tflops_per_gpu = steady_state(tflops);
  }
  return run;
}

}  // namespace headroom::calibrate
