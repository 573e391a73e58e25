// A DeepSpeed config (ds_config.json) as DeepSpeed reads it (deepspeed/runtime/config.py, zero/config.py,
// activation_checkpointing/config.py), applied to the Megatron-DeepSpeed launch it belongs to.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "megatron_args.hpp"
#include "text.hpp"

namespace headroom::calibrate {
namespace {

// Every key a config may hold, dotted ("zero_optimization.stage"; "section.*" for all of a section): read (no reason;
// deepspeed_settings checks its value) or ignored with why. Any other key is refused.
struct DeepspeedKey {
  std::string_view key, ignored_because;
};
constexpr std::array kDeepspeedKeys = {
    DeepspeedKey{"train_batch_size", ""},
    DeepspeedKey{"train_micro_batch_size_per_gpu", ""},
    DeepspeedKey{"gradient_accumulation_steps", ""},
    DeepspeedKey{"bf16.enabled", ""},
    DeepspeedKey{"fp16.enabled", ""},
    DeepspeedKey{"fp16.*", "FP16 loss scaling, unused with FP16 off"},
    DeepspeedKey{"zero_optimization.stage", ""},
    DeepspeedKey{"zero_optimization.overlap_comm", ""},
    DeepspeedKey{"zero_optimization.offload_optimizer.device", ""},
    DeepspeedKey{"zero_optimization.offload_param.device", ""},
    DeepspeedKey{"zero_optimization.offload_optimizer.*", "offload settings, unused without offloading"},
    DeepspeedKey{"zero_optimization.offload_param.*", "offload settings, unused without offloading"},
    DeepspeedKey{"zero_optimization.contiguous_gradients",
                 "one contiguous gradient buffer: the same bytes, defragmented"},
    DeepspeedKey{"zero_optimization.reduce_scatter", "reduce-scatter or all-reduce of the same gradient volume"},
    DeepspeedKey{"zero_optimization.allgather_partitions", "one all-gather or broadcasts of the same volume"},
    DeepspeedKey{"zero_optimization.reduce_bucket_size", ""},
    DeepspeedKey{"zero_optimization.allgather_bucket_size", "bucket buffers: within the framework's residual"},
    DeepspeedKey{"zero_optimization.round_robin_gradients", "which rank copies which gradient: the same volume"},
    DeepspeedKey{"zero_optimization.load_from_fp32_weights", "checkpoint loading"},
    DeepspeedKey{"zero_optimization.elastic_checkpoint", "checkpoint format"},
    DeepspeedKey{"zero_optimization.ignore_unused_parameters", "a check of unused parameters"},
    DeepspeedKey{"zero_optimization.sub_group_size", "the optimizer step's grouping of the same states"},
    DeepspeedKey{"zero_optimization.stage3_prefetch_bucket_size", ""},
    DeepspeedKey{"zero_optimization.stage3_max_live_parameters", ""},
    DeepspeedKey{"zero_optimization.stage3_max_reuse_distance", ""},
    DeepspeedKey{"zero_optimization.stage3_param_persistence_threshold", ""},
    DeepspeedKey{"zero_optimization.stage3_use_all_reduce_for_fetch_params", ""},
    DeepspeedKey{"zero_optimization.stage3_model_persistence_threshold",
                 "a cap on the parameters kept whole, which stage3_param_persistence_threshold bounds"},
    DeepspeedKey{"zero_optimization.stage3_module_granularity_threshold",
                 "which small modules are fetched as one: the same parameters gathered"},
    DeepspeedKey{"zero_optimization.stage3_allgather_sequential",
                 "per-parameter all-gathers without a flattening buffer: the same bytes"},
    DeepspeedKey{"zero_optimization.stage3_gather_16bit_weights_on_model_save", "checkpoint saving"},
    DeepspeedKey{"zero_optimization.zero_hpz_partition_size", ""},
    DeepspeedKey{"zero_optimization.zero_quantized_weights", ""},
    DeepspeedKey{"zero_optimization.zero_quantized_gradients", ""},
    DeepspeedKey{"activation_checkpointing.partition_activations", ""},
    DeepspeedKey{"activation_checkpointing.cpu_checkpointing", ""},
    DeepspeedKey{"activation_checkpointing.contiguous_memory_optimization",
                 "checkpoints copied into one buffer: the same bytes, defragmented"},
    DeepspeedKey{"activation_checkpointing.number_checkpoints", "the buffer's slot count for the same checkpoints"},
    DeepspeedKey{"activation_checkpointing.synchronize_checkpoint_boundary", "a device synchronisation per layer"},
    DeepspeedKey{"activation_checkpointing.profile", "profiling"},
    DeepspeedKey{"data_types.grad_accum_dtype", ""},
    DeepspeedKey{"communication_data_type", ""},
    DeepspeedKey{"optimizer.type", ""},
    DeepspeedKey{"optimizer.params.*", "optimizer hyper-parameters"},
    DeepspeedKey{"scheduler.*", "learning-rate schedule"},
    DeepspeedKey{"gradient_clipping", "gradient clipping (one norm a step)"},
    DeepspeedKey{"prescale_gradients", "the gradients' scaling before reduction: the same bytes"},
    DeepspeedKey{"gradient_predivide_factor", "the gradients' scaling before reduction: the same bytes"},
    DeepspeedKey{"zero_allow_untested_optimizer", "a permission"},
    DeepspeedKey{"steps_per_print", "logging"},
    DeepspeedKey{"wall_clock_breakdown", "logging"},
    DeepspeedKey{"memory_breakdown", "logging"},
    DeepspeedKey{"dump_state", "logging"},
    DeepspeedKey{"tensorboard.*", "logging"},
    DeepspeedKey{"wandb.*", "logging"},
    DeepspeedKey{"csv_monitor.*", "logging"},
    DeepspeedKey{"comms_logger.*", "logging"},
    DeepspeedKey{"flops_profiler.*", "profiling, on its own step"},
};

// The config's leaves, dotted.
void leaves(const nlohmann::json& j, const std::string& prefix,
            std::vector<std::pair<std::string, nlohmann::json>>& out) {
  for (const auto& [k, v] : j.items()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_object() && !v.empty())
      leaves(v, key, out);
    else
      out.emplace_back(key, v);
  }
}

std::string text_of(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

void read_deepspeed_config(std::string_view text, std::string_view where, MegatronCommand& cmd) {
  const std::string w(where);
  const nlohmann::json j = parse_json_strict(text, where);
  if (!j.is_object()) throw Error(w + ": a DeepSpeed config is a JSON object");
  std::vector<std::pair<std::string, nlohmann::json>> all;
  leaves(j, "", all);
  std::map<std::string, nlohmann::json> read;
  for (const auto& [key, value] : all) {
    const DeepspeedKey* k = text::key_rule(kDeepspeedKeys, key);
    if (k == nullptr)
      throw Error(w + ": " + key +
                  " is a DeepSpeed key headroom does not read, so it cannot tell whether it changes "
                  "memory or time");
    if (!k->ignored_because.empty())
      cmd.ignored.push_back(key + " (" + std::string(k->ignored_because) + ")");
    else
      read[key] = value;
  }
  const auto count = [&](const std::string& key) -> std::optional<std::int64_t> {
    const auto it = read.find(key);
    if (it == read.end()) return std::nullopt;
    if (!it->second.is_number_integer() || it->second.get<std::int64_t>() <= 0)
      throw Error(w + ": " + key + " " + text_of(it->second) + " is not a positive integer");
    return it->second.get<std::int64_t>();
  };
  // A count of elements or parameters, 0 allowed; DeepSpeed takes 5e8 as 500000000 (pp_int), not "auto" (which
  // Hugging Face's Trainer fills in before DeepSpeed reads the file).
  const auto elements = [&](const std::string& key) -> std::optional<std::int64_t> {
    const auto it = read.find(key);
    if (it == read.end()) return std::nullopt;
    const nlohmann::json& v = it->second;
    const double x = v.is_number() ? v.get<double>() : -1.0;
    if (!v.is_number() || !(x >= 0 && x <= 1e12) || x != std::floor(x))
      throw Error(w + ": " + key + " " + text_of(v) + " is not a whole number of elements up to 10^12" +
                  (v.is_string() ? " (\"auto\" is Hugging Face's Trainer's: give the number it resolves to)" : ""));
    return static_cast<std::int64_t>(x);
  };
  const auto flag = [&](const std::string& key) -> std::optional<bool> {
    const auto it = read.find(key);
    if (it == read.end()) return std::nullopt;
    if (!it->second.is_boolean()) throw Error(w + ": " + key + " " + text_of(it->second) + " is not true or false");
    return it->second.get<bool>();
  };
  const auto word = [&](const std::string& key) -> std::optional<std::string> {
    const auto it = read.find(key);
    if (it == read.end()) return std::nullopt;
    std::string s = text_of(it->second);
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  auto& l = cmd.run.layout;
  const auto layout_count = [&](const char* knob) { return std::stoll(l.at(knob)); };
  // The batch: DeepSpeed asserts train_batch_size = micro-batch x accumulation x DP (runtime/config.py
  // _batch_assertion); each key given must agree with the command's.
  const std::int64_t dp = layout_count("gpus") / (layout_count("tp") * layout_count("pp") * layout_count("cp"));
  const std::int64_t mbs = layout_count("mbs"), gbs = layout_count("gbs");
  const auto agree = [&](const std::string& key, std::int64_t command, const std::string& what) {
    if (const auto v = count(key); v && *v != command)
      throw Error(w + ": " + key + " " + std::to_string(*v) + " but the command's " + what + " is " +
                  std::to_string(command));
  };
  agree("train_batch_size", gbs, "--global-batch-size");
  agree("train_micro_batch_size_per_gpu", mbs, "--micro-batch-size");
  agree("gradient_accumulation_steps", gbs / (mbs * dp), "global batch / (micro-batch x DP)");
  if (!flag("bf16.enabled").value_or(false) || flag("fp16.enabled").value_or(false))
    throw Error(w + ": bf16.enabled is not true: headroom prices BF16 training; FP16 and FP32 are not priced");
  // ZeRO (zero/config.py: stage 0 by default).
  const std::int64_t stage = read.contains("zero_optimization.stage") ? [&] {
    const auto& v = read.at("zero_optimization.stage");
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 3)
      throw Error(w + ": zero_optimization.stage " + text_of(v) + " (valid: 0, 1, 2, 3)");
    return v.get<std::int64_t>();
  }() : 0;
  l["sharding"] = zero_stage_sharding(stage);
  if (!cmd.zero_stage.empty() && cmd.zero_stage != std::to_string(stage))
    throw Error(w + ": zero_optimization.stage " + std::to_string(stage) + " but the command's --zero-stage is " +
                cmd.zero_stage);
  if (stage >= 2 && cmd.pipeline_engine)
    throw Error(w + ": zero_optimization.stage " + std::to_string(stage) +
                " under DeepSpeed's pipeline engine, which asserts \"ZeRO-2 and ZeRO-3 are incompatible with "
                "pipeline parallelism\" (runtime/pipe/engine.py): add --no-pipeline-parallel with one stage");
  for (const char* offload : {"zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device"})
    if (const auto d = word(offload); d && *d != "none")
      throw Error(w + ": " + offload + " " + *d + ": ZeRO-Offload is not priced (valid: none)");
  // overlap_comm is ZeRO-2's and ZeRO-3's: stages 0 and 1 run DeepSpeed's BF16 optimizer (runtime/engine.py
  // _do_optimizer_sanity_check), which reduces after the backward whatever the key says.
  if (const auto o = flag("zero_optimization.overlap_comm"); o && stage >= 2) {
    l["overlap_comm"] = *o ? "true" : "false";
  } else if (o) {
    cmd.ignored.push_back("zero_optimization.overlap_comm " + text_of(read.at("zero_optimization.overlap_comm")) +
                          " (stages 0 and 1 run DeepSpeed's BF16 optimizer, which reduces after the backward)");
    read.erase("zero_optimization.overlap_comm");
  }
  // Buckets and ZeRO-3's fetching (zero/config.py: integers, which a JSON file may write as 5e8).
  for (const auto& [key, knob_name] :
       {std::pair{"zero_optimization.reduce_bucket_size", "reduce_bucket_size"},
        std::pair{"zero_optimization.stage3_prefetch_bucket_size", "stage3_prefetch_bucket_size"},
        std::pair{"zero_optimization.stage3_max_live_parameters", "stage3_max_live_parameters"},
        std::pair{"zero_optimization.stage3_max_reuse_distance", "stage3_max_reuse_distance"}})
    if (const auto n = elements(key)) l[knob_name] = std::to_string(*n);
  // Parameters under the persistence threshold stay whole: DeepSpeed's 1e5 keeps the norms' weights and biases so,
  // within the residual; a higher one keeps whole weights headroom prices as sharded.
  if (const auto n = elements("zero_optimization.stage3_param_persistence_threshold"); n && *n > 100000)
    throw Error(w + ": zero_optimization.stage3_param_persistence_threshold " + std::to_string(*n) +
                ": parameters kept whole above DeepSpeed's 1e5 are not priced (valid: at most 100000)");
  if (flag("zero_optimization.stage3_use_all_reduce_for_fetch_params").value_or(false))
    throw Error(w +
                ": zero_optimization.stage3_use_all_reduce_for_fetch_params true: parameters fetched by "
                "all-reduce (twice an all-gather's bytes) are not priced");
  // ZeRO++ (zero/config.py): the secondary parameter shard (hpZ) as PaRO's tables have it; its quantized collectives
  // (qwZ, qgZ) are in no table.
  if (const auto n = elements("zero_optimization.zero_hpz_partition_size")) {
    if (*n < 1) throw Error(w + ": zero_optimization.zero_hpz_partition_size 0 (valid: 1 or more)");
    l["zero_hpz_partition_size"] = std::to_string(*n);
  }
  for (const char* q : {"zero_optimization.zero_quantized_weights", "zero_optimization.zero_quantized_gradients"})
    if (flag(q).value_or(false))
      throw Error(w + ": " + q + " true: ZeRO++'s quantized collectives are not priced (valid: false)");
  for (const char* a : {"activation_checkpointing.partition_activations", "activation_checkpointing.cpu_checkpointing"})
    if (flag(a).value_or(false))
      throw Error(w + ": " + a + " true: checkpoints split over the TP group or kept on the host are not priced");
  if (const auto t = word("data_types.grad_accum_dtype"); t && *t != "fp32")
    throw Error(w + ": data_types.grad_accum_dtype " + *t + ": gradients accumulated in FP32 are priced (valid: fp32)");
  if (const auto t = word("communication_data_type"))
    throw Error(w + ": communication_data_type " + *t + ": the gradient reduction's dtype is the framework's, not set");
  if (const auto o = word("optimizer.type"); o && *o != "adam" && *o != "adamw")
    throw Error(w + ": optimizer.type " + *o + ": only Adam (AdamW) is priced");
  for (const auto& [key, value] : read) cmd.read.push_back(key + " " + text_of(value));
}

}  // namespace headroom::calibrate
