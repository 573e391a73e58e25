#include "headroom/estimator/framework.hpp"

#include <algorithm>
#include <bit>
#include <cctype>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {

namespace {

// Names are case-insensitive, as spec and sharding names are.
std::string lowered(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A framework file's bytes per parameter ("precision", "fsdp_mixed_precision").
Precision precision_from_json(const nlohmann::json& p) {
  return {p.at("weight_bytes").get<double>(), p.at("grad_bytes").get<double>(), p.at("optimizer_bytes").get<double>()};
}

// A model with ALiBi where the framework trains it: refused where it has none, and with FlashAttention where only its
// unfused attention adds the bias.
void require_alibi(const ModelSpec& m, const FrameworkProfile& f, const Layout& l) {
  if (!m.alibi) return;
  if (f.alibi == FrameworkProfile::Alibi::none)
    throw Error(m.name + "'s ALiBi position biases: framework " + f.name +
                " does not train them (Megatron-LM's --position-embedding-type has no alibi; Megatron-DeepSpeed's "
                "--framework deepspeed and FSDP's --framework pytorch-fsdp do)");
  if (f.alibi == FrameworkProfile::Alibi::unfused && l.flash_attention)
    throw Error(m.name + "'s ALiBi position biases with FlashAttention: framework " + f.name +
                " adds them in its unfused attention only (leave " + field("flash_attention") +
                " unset: it is off for such a model)");
}

}  // namespace

Recompute parse_recompute(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "none") return Recompute::none;
  if (name == "selective") return Recompute::selective;
  if (name == "full") return Recompute::full;
  if (name == "op") return Recompute::op;
  throw Error("unknown recompute mode '" + std::string(text) + "' (valid: none, selective, full, op)");
}

RecomputeMethod parse_recompute_method(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "uniform") return RecomputeMethod::uniform;
  if (name == "block") return RecomputeMethod::block;
  if (name == "every") return RecomputeMethod::every;
  throw Error("unknown recompute method '" + std::string(text) + "' (valid: uniform, block, every)");
}

Schedule parse_schedule(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "interleaved") return Schedule::interleaved;
  if (name == "gpipe") return Schedule::gpipe;
  if (name == "zero-bubble") return Schedule::zero_bubble;
  if (name == "zbv") return Schedule::zbv;
  if (name == "looped-bfs") return Schedule::looped_bfs;
  throw Error("unknown pipeline schedule '" + std::string(text) +
              "' (valid: 1f1b, interleaved, gpipe, zero-bubble, zbv, looped-bfs)");
}

Shard parse_shard(std::string_view text) {
  const auto s = text.size() == 1 && text[0] >= 'A' && text[0] <= 'Z' ? shard_from_letter(text[0]) : std::nullopt;
  if (!s) throw Error("unknown shard code '" + std::string(text) + "' (valid: N, I, G)");
  return *s;
}

Fp8Recipe parse_fp8_recipe(std::string_view text) {
  const std::string name = lowered(text);
  if (name == "none") return Fp8Recipe::none;
  if (name == "delayed") return Fp8Recipe::delayed;
  if (name == "tensorwise") return Fp8Recipe::tensorwise;
  throw Error("FP8 recipe '" + std::string(text) +
              "' is not priced (valid: delayed, tensorwise; mxfp8 and blockwise are not priced)");
}

StateSharding parse_sharding_code(std::string_view code) {
  const bool upper = std::all_of(code.begin(), code.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  const auto s = upper ? sharding_from_code(code) : std::nullopt;
  if (!s)
    throw Error("sharding code '" + std::string(code) + "' must be three letters of N, I, G (P, G, OS), e.g. NNG");
  return *s;
}

bool unfused_attention_only(const ModelSpec& m, const FrameworkProfile& f) {
  return m.alibi && f.alibi == FrameworkProfile::Alibi::unfused;
}

Layout default_layout(const FrameworkProfile& f) {
  Layout l;
  l.sequence_parallel = f.sequence_parallel;
  l.flash_attention = f.flash_attention;
  l.split.partition_balanced = f.balanced_pipeline_partition;
  l.schedule = f.schedule;
  l.recompute = f.recompute;
  l.precision = f.precision;
  l.sharding = f.sharding;
  l.fsdp_unit_buffers = f.fsdp_unit_buffers;
  l.fsdp_flat_parameters = f.fsdp_flat_parameters;
  l.fp8_library = f.fp8_library;
  l.tp_comm_buffers = f.tp_comm_buffers;
  l.cp_exchange = f.cp_exchange.value_or(CpExchange::p2p);
  return l;
}

void set_optimizer_precision(const FrameworkProfile& f, const OptimizerPrecision& o, Layout& l) {
  if (o.given() && !f.precision_aware_optimizer)
    throw Error("framework " + f.name + " does not set optimizer-state or gradient formats (" +
                field("use_precision_aware_optimizer") + ", " + field("grad_reduce_in_bf16") + ", " + field("fp16") +
                ": Megatron-LM's, --framework megatron)");
  if (l.optimizer_offload > 0 && o.formats_given())
    throw Error("optimizer-state and gradient formats other than fp32 with an offloaded optimizer are not priced (" +
                field("optimizer_offload_fraction") + ")");
  if (o.fp16 && (o.precision_aware || o.grad_reduce_in_bf16))
    throw Error(field("fp16") + " with " +
                field(o.precision_aware ? "use_precision_aware_optimizer" : "grad_reduce_in_bf16") +
                " is not priced (FP16 weights are priced with Megatron-LM's mixed-precision optimizer: FP32 master "
                "weights and Adam moments, FP16 or FP32 gradients)");
  if (o.fp16 && l.fp8 != Fp8Recipe::none)
    throw Error(field("fp16") + " with FP8 is not priced (FP8 GEMMs are priced on BF16 weights: " + field("precision") +
                " fp8 without " + field("fp16") + ")");
  l.optimizer_precision = o;
  // The offloaded optimizer (HybridDeviceOptimizer, which Megatron-LM runs under the precision-aware flag) keeps its
  // FP32 states as priced before: the flag changes no format there.
  OptimizerPrecision priced = o;
  if (l.optimizer_offload > 0) priced.precision_aware = false;
  l.precision = model_state_precision(priced, l.fsdp_mixed_precision ? *f.fsdp_mixed_precision : f.precision, l.fp8);
}

void set_fsdp_mixed_precision(const FrameworkProfile& f, bool on, Layout& l) {
  l.fsdp_mixed_precision = on;
  if (!on) return;
  if (!f.fsdp_mixed_precision)
    throw Error("framework " + f.name + " sets its formats itself (" + field("fsdp_mixed_precision") +
                " is PyTorch FSDP1's MixedPrecision: --framework pytorch-fsdp)");
  if (l.lora.enabled())
    throw Error(field("fsdp_mixed_precision") + " with " + field("lora_rank") +
                ": LoRA over an FP32 base is not priced (the frozen base is priced in BF16)");
}

void set_zero_settings(const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  const bool given = r.overlap_comm || r.reduce_bucket_size >= 0 || r.prefetch_bucket_size >= 0 ||
                     r.max_live_parameters >= 0 || r.max_reuse_distance >= 0 || r.hpz_partition_size > 0;
  if (!f.zero) {
    if (given)
      throw Error("framework " + f.name + " does not run DeepSpeed's ZeRO (" + field("overlap_comm") + ", " +
                  field("reduce_bucket_size") + ", " + field("stage3_max_live_parameters") +
                  ", ...: --framework deepspeed)");
    return;
  }
  ZeroSettings& z = l.zero;
  z = *f.zero;
  z.deepspeed = true;
  for (const auto& [given_value, to] : {std::pair{r.reduce_bucket_size, &z.reduce_bucket_size},
                                        std::pair{r.prefetch_bucket_size, &z.prefetch_bucket_size},
                                        std::pair{r.max_live_parameters, &z.max_live_parameters},
                                        std::pair{r.max_reuse_distance, &z.max_reuse_distance}})
    if (given_value >= 0) *to = given_value;
  if (r.hpz_partition_size > 1 && l.sharding.params != Shard::global)
    throw Error(field("zero_hpz_partition_size") + " " + std::to_string(r.hpz_partition_size) +
                " needs ZeRO-3 (its secondary shard is of sharded parameters; " + field("sharding") + " " +
                sharding_code(l.sharding) + ")");
  if (r.hpz_partition_size > 0) z.hpz_partition_size = r.hpz_partition_size;
  // Stages 0 and 1 (BF16 weights, FP32 accumulation) run DeepSpeed's BF16_Optimizer (runtime/engine.py
  // _do_optimizer_sanity_check), which reduces after the backward whatever overlap_comm says.
  z.overlap_comm = r.overlap_comm.value_or(zero_overlap_comm_default(l.sharding));
  if (z.overlap_comm && l.sharding.grads == Shard::none)
    throw Error(field("overlap_comm") + " at ZeRO stage 0 or 1 (" + field("sharding") + " " +
                sharding_code(l.sharding) +
                "): DeepSpeed's BF16 optimizer reduces gradients after the backward (valid: ZeRO-2 or ZeRO-3)");
}

void set_megatron_fsdp(const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  if (!r.megatron_fsdp) {
    const char* given = r.fsdp_double_buffer         ? "fsdp_double_buffer"
                        : r.fsdp_unit_size != 0      ? "suggested_communication_unit_size"
                        : r.megatron_fsdp_main_grads ? "megatron_fsdp_main_grads_dtype"
                                                     : nullptr;
    if (given != nullptr) throw Error(field(given) + " needs " + field("use_megatron_fsdp"));
    return;
  }
  if (f.megatron_fsdp_shardings.empty())
    throw Error("framework " + f.name + " does not run Megatron-FSDP (" + field("use_megatron_fsdp") +
                " is Megatron-LM's: --framework megatron)");
  const std::vector<StateSharding>& strategies = launchable_shardings(f, true);
  if (std::find(strategies.begin(), strategies.end(), l.sharding) == strategies.end()) {
    std::string valid;
    for (const StateSharding& s : strategies) valid += (valid.empty() ? "" : ", ") + sharding_code(s);
    throw Error(field("sharding") + " " + sharding_code(l.sharding) +
                " is not a Megatron-FSDP strategy (--data-parallel-sharding-strategy no_shard, optim, optim_grads, "
                "optim_grads_params: " +
                valid + ")");
  }
  // megatron/training/arguments.py: Megatron-FSDP keeps formats of its own (--megatron-fsdp-main-params-dtype fp32,
  // --megatron-fsdp-main-grads-dtype) in place of the precision-aware optimizer's; --grad-reduce-in-bf16 is the
  // distributed optimizer's buffer, which Megatron-FSDP does not read (mcore_fsdp_adapter.py).
  OptimizerPrecision others = l.optimizer_precision;
  others.grad_reduce_in_bf16 = false;
  if (others.given())
    throw Error(field("use_megatron_fsdp") + " with the precision-aware optimizer's formats (" +
                field("use_precision_aware_optimizer") + ", " + field("main_grads_dtype") + ", " + field("fp16") +
                ", ...) is not priced: Megatron-FSDP keeps its own (" + field("megatron_fsdp_main_grads_dtype") + ")");
  if (l.optimizer_offload > 0)
    throw Error(field("use_megatron_fsdp") + " with " + field("optimizer_cpu_offload") + " is not priced");
  if (r.fsdp_unit_size < 0 || r.fsdp_unit_size > kMaxCount)
    throw Error(field("suggested_communication_unit_size") + " " + std::to_string(r.fsdp_unit_size) +
                " must be a positive integer of at most 10^12");
  l.megatron_fsdp = {true, r.fsdp_double_buffer, r.fsdp_unit_size};
  // param_and_grad_buffer.py _resolve_group_grad_dtype: the main gradients in megatron_fsdp_main_grads_dtype, or the
  // parameters' own format (BF16 weights: BF16 gradients); the FP32 main weights and Adam's moments are the
  // optimizer's 12 B.
  l.precision.grad_bytes =
      r.megatron_fsdp_main_grads ? dtype_bytes(*r.megatron_fsdp_main_grads) : l.precision.weight_bytes;
}

void require_compile(const FrameworkProfile& f, bool wanted) {
  if (wanted && !f.compile)
    throw Error("framework " + f.name + " does not torch.compile its blocks (" + field("compile") +
                "; torchtitan's compile.enable: --framework torchtitan)");
}

void require_tp_comm_overlap(const FrameworkProfile& f, bool wanted) {
  if (wanted && !f.tp_comm_overlap)
    throw Error("framework " + f.name + " does not overlap TP communication with GEMMs (" + field("tp_comm_overlap") +
                "; Megatron-LM's --tp-comm-overlap: --framework megatron)");
}

namespace {

// The names of a framework's list, comma-separated.
template <class T, class Name>
std::string listed(const std::vector<T>& ok, Name name) {
  std::string text;
  for (const T& x : ok) text += (text.empty() ? "" : ", ") + std::string(name(x));
  return text;
}

// The one rule of the framework's supported_* lists (data/frameworks/*.json; empty: not stated, anything goes): a
// value the framework does not run is refused, naming the knob and what the framework runs, as `rank` proposes only
// those.
template <class T, class Name>
void require_listed(const FrameworkProfile& f, const std::vector<T>& ok, const T& x, const char* knob,
                    std::string_view verb, Name name, std::string_view hint = "") {
  if (ok.empty() || std::find(ok.begin(), ok.end(), x) != ok.end()) return;
  throw Error("framework " + f.name + " does not " + std::string(verb) + " " + std::string(name(x)) + " (" +
              field(knob) + "; it runs: " + listed(ok, name) + std::string(hint) + ")");
}

}  // namespace

// Megatron-LM's selective recompute (core attention only) is not PyTorch FSDP's, and torchtitan's op-level selective
// checkpointing is priced by nothing here.
void require_recompute(const FrameworkProfile& f, Recompute r) {
  require_listed(
      f, f.supported_recompute, r, "recompute", "recompute", [](Recompute x) { return to_string(x); },
      r == Recompute::selective ? "; selective is Megatron-LM's core-attention recompute: --framework megatron"
      : r == Recompute::op      ? "; op is torchtitan's per-op checkpointing: --framework torchtitan"
                                : "");
}

// Every framework recomputes each layer on its own (uniform, 1); the others are the profile's
// supported_recompute_methods.
void require_recompute_method(const FrameworkProfile& f, const Layout& l) {
  if (!recompute_method_given(l)) return;
  const auto& ok = f.supported_recompute_methods;
  if (l.recompute_method == RecomputeMethod::uniform ? f.uniform_recompute_groups
                                                     : std::find(ok.begin(), ok.end(), l.recompute_method) != ok.end())
    return;
  std::string runs = f.uniform_recompute_groups ? "uniform groups" : "";
  for (const RecomputeMethod x : ok) runs += (runs.empty() ? "" : ", ") + std::string(to_string(x));
  throw Error("framework " + f.name + " does not recompute by " + field("recompute_method") + " " +
              std::string(to_string(l.recompute_method)) + " " + field("recompute_num_layers") + " " +
              std::to_string(l.recompute_num_layers) + " (it runs every layer on its own" +
              (runs.empty() ? "" : "; and " + runs) + ")");
}

void require_sharding(const FrameworkProfile& f, const StateSharding& s) {
  require_listed(f, f.supported_shardings, s, "sharding", "run the sharding",
                 [](const StateSharding& x) { return sharding_code(x); });
}

void require_pipeline_sharding(const FrameworkProfile& f, const StateSharding& s, std::int64_t pp) {
  if (pp <= 1 || f.pipeline_shardings.empty() ||
      std::find(f.pipeline_shardings.begin(), f.pipeline_shardings.end(), s) != f.pipeline_shardings.end())
    return;
  std::string ok;
  for (const auto& x : f.pipeline_shardings) ok += (ok.empty() ? "" : ", ") + sharding_code(x);
  throw Error("framework " + f.name + " does not run the sharding " + sharding_code(s) + " with a pipeline (" +
              field("sharding") + ", " + field("pp") + " " + std::to_string(pp) + "; with pp > 1 it runs: " + ok + ")");
}

void require_schedule(const FrameworkProfile& f, Schedule s) {
  require_listed(f, f.supported_schedules, s, "schedule", "run the pipeline schedule",
                 [](Schedule x) { return to_string(x); });
}

void require_fp8_recipe(const FrameworkProfile& f, Fp8Recipe recipe) {
  if (recipe == Fp8Recipe::none || std::find(f.fp8_recipes.begin(), f.fp8_recipes.end(), recipe) != f.fp8_recipes.end())
    return;
  std::string valid;
  for (const Fp8Recipe x : f.fp8_recipes) valid += (valid.empty() ? "" : ", ") + std::string(to_string(x));
  throw Error("framework " + f.name + " does not train with the FP8 recipe " + std::string(to_string(recipe)) + " (" +
              field("fp8_recipe") + "; " + (valid.empty() ? "it has no FP8" : "it runs: " + valid) + ")");
}

namespace {

// The FP8 recipe of precision, fp8_format and fp8_recipe; Fp8Recipe::none for BF16.
Fp8Recipe fp8_recipe_of(const KnobSettings& k, const FrameworkProfile& f) {
  using enum KnobId;
  const std::string* precision_name = k.text(precision);
  const bool bf16 = precision_name != nullptr && *precision_name == "bf16";
  if (bf16 && k.given(fp8_format))
    throw Error(field("precision") + " bf16 and " + field("fp8_format") + " contradict each other");
  const bool fp8 = (precision_name != nullptr && *precision_name == "fp8") || k.given(fp8_format);
  if (!fp8 && (k.given(fp8_recipe) || k.flag(fp8_param_gather, false)))
    throw Error(field(k.flag(fp8_param_gather, false) ? "fp8_param_gather" : "fp8_recipe") + " needs FP8 training (" +
                field("precision") + " fp8 or " + field("fp8_format") + ")");
  if (!fp8) return Fp8Recipe::none;
  if (const std::string* recipe = k.text(fp8_recipe)) return parse_fp8_recipe(*recipe);
  return f.fp8_recipes.empty() ? Fp8Recipe::delayed : f.fp8_recipes.front();
}

}  // namespace

std::int64_t* integer_field(LayoutRequest& r, KnobId id) {
  switch (id) {
    case KnobId::tp: return &r.tp;
    case KnobId::cp: return &r.cp;
    case KnobId::pp: return &r.pp;
    case KnobId::vpp: return &r.vpp;
    case KnobId::decoder_first_pipeline_num_layers: return &r.split.first_stage_layers;
    case KnobId::decoder_last_pipeline_num_layers: return &r.split.last_stage_layers;
    case KnobId::ep: return &r.ep;
    case KnobId::etp: return &r.etp;
    case KnobId::mtp_num_layers: return &r.mtp_layers;
    case KnobId::num_layers_at_start_in_bf16: return &r.bf16_layers_at_start;
    case KnobId::num_layers_at_end_in_bf16: return &r.bf16_layers_at_end;
    case KnobId::cpu_offloading_num_layers: return &r.activation_offload_layers;
    case KnobId::recompute_num_layers: return &r.recompute_num_layers;
    case KnobId::mbs: return &r.mbs;
    case KnobId::gpus: return &r.gpus;
    case KnobId::dp: return &r.dp;
    case KnobId::gbs: return &r.gbs;
    case KnobId::seq: return &r.seq;
    case KnobId::lora_rank: return &r.lora_rank;
    case KnobId::reduce_bucket_size: return &r.reduce_bucket_size;
    case KnobId::stage3_prefetch_bucket_size: return &r.prefetch_bucket_size;
    case KnobId::stage3_max_live_parameters: return &r.max_live_parameters;
    case KnobId::stage3_max_reuse_distance: return &r.max_reuse_distance;
    case KnobId::zero_hpz_partition_size: return &r.hpz_partition_size;
    case KnobId::suggested_communication_unit_size: return &r.fsdp_unit_size;
    default: return nullptr;
  }
}

void set_expert_dispatch(const ModelSpec& m, const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  l.expert_load = r.expert_load;
  l.dispatcher = r.dispatcher;
  if (r.shared_expert_overlap && !f.shared_expert_overlap)
    throw Error("framework " + f.name + " does not overlap the shared expert with the token dispatch (" +
                field("moe_shared_expert_overlap") + " is Megatron-LM's: --framework megatron)");
  // transformer_config.py: "Only effective when moe-shared-expert-intermediate-size is set".
  l.shared_expert_overlap = r.shared_expert_overlap && m.shared_expert_ffn_hidden_size > 0;
}

void set_mtp_layers(const ModelSpec& m, const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  l.mtp_layers = 0;
  if (r.mtp_layers == 0) return;
  const std::string what = field("mtp_num_layers") + " " + std::to_string(r.mtp_layers);
  if (!f.multi_token_prediction)
    throw Error("framework " + f.name + " does not train multi-token-prediction layers (" + what +
                " is Megatron-LM's: --framework megatron)");
  if (r.mtp_layers < 0 || r.mtp_layers > m.num_layers)
    throw Error(what + ": valid: 0 to the decoder's " + std::to_string(m.num_layers) + " layers");
  // megatron/training/arguments.py: "Multi-Token Prediction (MTP) is not supported with" learned absolute positions.
  if (m.learned_positions)
    throw Error(what + ": Megatron-LM's multi-token prediction needs rotary or no position embeddings, and " + m.name +
                " learns absolute positions");
  if (l.lora.enabled()) throw Error(what + " with " + field("lora_rank") + ": not priced (no LoRA run trains them)");
  // multi_token_prediction.py _checkpointed_forward: "recompute_num_layers must be 1 for MTP recompute" (uniform).
  if (l.recompute == Recompute::full && l.recompute_method == RecomputeMethod::uniform && l.recompute_num_layers != 1)
    throw Error(what + " under full recompute (uniform) needs " + field("recompute_num_layers") +
                " 1 (Megatron-LM's multi-token-prediction layer asserts it), not " +
                std::to_string(l.recompute_num_layers));
  l.mtp_layers = r.mtp_layers;
}

// --pipeline-model-parallel-layout, parsed; its stages over p set v (transformer_config.py: a v given must agree).
void set_layer_layout(const FrameworkProfile& f, const std::string& text, Layout& l) {
  if (!f.pipeline_layer_layout)
    throw Error("framework " + f.name + " takes no pipeline layer layout (" + field("pipeline_model_parallel_layout") +
                " is Megatron-LM's: --framework megatron)");
  auto x = std::make_shared<const PipelineLayerLayout>(parse_pipeline_layout(text));
  const std::string what = layout_named(text);
  if (x->stages() % l.pp != 0)
    throw Error(what + " has " + std::to_string(x->stages()) + (x->stages() == 1 ? " stage" : " stages") +
                ", not a multiple of " + field("pp") + " " + std::to_string(l.pp));
  const std::int64_t v = x->stages() / l.pp;
  if (l.vpp > 1 && l.vpp != v)
    throw Error(what + " makes " + std::to_string(v) + (v == 1 ? " virtual stage" : " virtual stages") +
                " a rank over " + field("pp") + " " + std::to_string(l.pp) + ", and " + field("vpp") + " is " +
                std::to_string(l.vpp));
  l.vpp = v;
  l.split.layer_layout = std::move(x);
}

void set_bf16_layers(const LayoutRequest& r, Layout& l) {
  if (!r.first_last_layers_bf16) {
    if (r.bf16_layers_at_start >= 0 || r.bf16_layers_at_end >= 0)
      throw Error(field(r.bf16_layers_at_start >= 0 ? "num_layers_at_start_in_bf16" : "num_layers_at_end_in_bf16") +
                  " needs " + field("first_last_layers_bf16"));
    return;
  }
  // TransformerConfig's default where not given; validate_bf16_layers checks them.
  l.bf16_layers_at_start = r.bf16_layers_at_start < 0 ? 1 : r.bf16_layers_at_start;
  l.bf16_layers_at_end = r.bf16_layers_at_end < 0 ? 1 : r.bf16_layers_at_end;
}

void set_cp_exchange(const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  const bool torch = f.cp_exchange.has_value();  // the framework's CP is PyTorch's ring attention
  if (r.cp_exchange && torch_cp_exchange(*r.cp_exchange) != torch)
    throw Error(field(torch ? "cp_comm_type" : "context_parallel_rotate_method") + " " +
                std::string(to_string(*r.cp_exchange)) + ": framework " + f.name + "'s context parallelism is " +
                (torch ? "PyTorch's ring attention (its knob: " + field("context_parallel_rotate_method") + ")"
                       : "Transformer Engine's (its knob: " + field("cp_comm_type") + ")"));
  l.cp_exchange = r.cp_exchange ? *r.cp_exchange : f.cp_exchange.value_or(CpExchange::p2p);
}

void set_ddp_overlaps(const FrameworkProfile& f, const LayoutRequest& r, Layout& l) {
  // Megatron-core runs each alone (distributed_data_parallel.py); Megatron-LM's arguments.py asks for the gather's
  // with the reduction's, which launch writes so.
  l.overlap_grad_reduce = r.overlap_grad_reduce;
  l.overlap_param_gather = r.overlap_param_gather.value_or(r.overlap_grad_reduce);
  if (!(l.overlap_grad_reduce && l.overlap_param_gather) && !f.ddp_overlap_switches)
    throw Error("framework " + f.name + " always overlaps its data-parallel collectives (" +
                field(l.overlap_grad_reduce ? "overlap_param_gather" : "overlap_grad_reduce") +
                " off is Megatron-LM's: --framework megatron" +
                (f.zero ? "; DeepSpeed's own switch is " + field("overlap_comm") : std::string()) + ")");
}

LayoutRequest layout_request(const KnobSettings& k, const FrameworkProfile& f) {
  using enum KnobId;
  LayoutRequest r;
  for (std::size_t w = 0; w < k.given_bits().size(); ++w)  // the knobs given, lowest first
    for (std::uint64_t given = k.given_bits()[w]; given != 0; given &= given - 1) {
      const auto id = static_cast<KnobId>(64 * w + static_cast<std::size_t>(std::countr_zero(given)));
      if (std::int64_t* to = integer_field(r, id)) *to = k.integer(id, 0);
    }
  if (const std::string* x = k.text(recompute)) r.recompute = parse_recompute(*x);
  if (const std::string* x = k.text(recompute_method)) r.recompute_method = parse_recompute_method(*x);
  if (const std::string* x = k.text(recompute_modules)) r.recompute_modules = parse_recompute_modules(*x);
  if (const std::string* x = k.text(schedule)) r.schedule = parse_schedule(*x);
  if (const std::string* x = k.text(pipeline_model_parallel_layout)) r.pipeline_layout = *x;
  if (const std::string* x = k.text(sharding)) {
    try {
      r.sharding = parse_sharding(*x);
    } catch (const Error& e) {
      throw Error(field("sharding") + ": " + e.what());
    }
  }
  r.sequence_parallel = k.flag(sequence_parallel);
  r.flash_attention = k.flag(flash_attention);
  if (const std::string* x = k.text(lora_targets)) {
    if (!k.given(lora_rank)) throw Error(field("lora_targets") + " needs " + field("lora_rank"));
    r.lora_targets = parse_lora_targets(*x);
  }
  r.split.embedding_in_split = k.flag(account_for_embedding_in_pipeline_split, false);
  r.split.loss_in_split = k.flag(account_for_loss_in_pipeline_split, false);
  r.expert_load = k.number(moe_expert_capacity_factor, 1.0);
  r.shared_expert_overlap = k.flag(moe_shared_expert_overlap, false);
  if (const std::string* x = k.text(moe_token_dispatcher_type))
    r.dispatcher = *x == "flex" ? ExpertDispatcher::flex : ExpertDispatcher::alltoall;
  r.fp8 = fp8_recipe_of(k, f);
  r.fp8_param_gather = k.flag(fp8_param_gather, false);
  r.first_last_layers_bf16 = k.flag(first_last_layers_bf16, false);
  const bool offload = k.flag(optimizer_cpu_offload, false);
  r.overlap_offload_copies = k.flag(overlap_cpu_optimizer_d2h_h2d, false);
  if (!offload && (k.given(optimizer_offload_fraction) || r.overlap_offload_copies))
    throw Error(
        field(k.given(optimizer_offload_fraction) ? "optimizer_offload_fraction" : "overlap_cpu_optimizer_d2h_h2d") +
        " needs " + field("optimizer_cpu_offload"));
  if (offload) r.optimizer_offload = k.number(optimizer_offload_fraction, 1.0);  // arguments.py's default
  r.overlap_p2p_comm = k.flag(overlap_p2p_comm, true);
  r.tp_comm_overlap = k.flag(tp_comm_overlap, false);
  r.overlap_grad_reduce = k.flag(overlap_grad_reduce, true);
  r.overlap_param_gather = k.flag(overlap_param_gather);
  r.compile = k.flag(compile, false);
  if (const std::string* x = k.text(attention_backend))
    r.attention_backend = attention_backend_from_string(*x).value_or(AttentionBackend::framework);  // the choices
  if (const std::string* x = k.text(context_parallel_rotate_method)) r.cp_exchange = parse_cp_exchange(*x);
  if (const std::string* x = k.text(cp_comm_type)) {
    if (r.cp_exchange)
      throw Error(field("cp_comm_type") + " with " + field("context_parallel_rotate_method") +
                  ": one is Transformer Engine's, the other PyTorch's; give the framework's");
    r.cp_exchange = parse_cp_exchange(*x);
  }
  r.overlap_comm = k.flag(overlap_comm);
  r.megatron_fsdp = k.flag(use_megatron_fsdp, false);
  r.fsdp_double_buffer = k.flag(fsdp_double_buffer, false);
  r.fsdp_mixed_precision = k.flag(fsdp_mixed_precision, false);
  if (const std::string* x = k.text(megatron_fsdp_main_grads_dtype); x != nullptr && *x != "auto")
    r.megatron_fsdp_main_grads = dtype_from_string(*x);  // the knob's choices are dtypes
  OptimizerPrecision& o = r.optimizer_precision;
  o.precision_aware = k.flag(use_precision_aware_optimizer, false);
  o.grad_reduce_in_bf16 = k.flag(grad_reduce_in_bf16, false);
  o.fp16 = k.flag(fp16, false);
  o.accumulate_allreduce_grads_in_fp32 = k.flag(accumulate_allreduce_grads_in_fp32, false);
  for (const auto& [id, to] : {std::pair{main_grads_dtype, &o.main_grads}, std::pair{main_params_dtype, &o.main_params},
                               std::pair{exp_avg_dtype, &o.exp_avg}, std::pair{exp_avg_sq_dtype, &o.exp_avg_sq}}) {
    const std::string* x = k.text(id);
    if (x == nullptr) continue;
    *to = dtype_from_string(*x).value_or(Dtype::fp32);  // the knob's choices are dtypes
    // megatron/core/optimizer/optimizer_config.py: "<dtype> can only be fp32 when not using precision-aware
    // optimizer".
    if (*to != Dtype::fp32 && !o.precision_aware)
      throw Error(field(knob(id).name) + " " + *x + " needs " + field("use_precision_aware_optimizer") +
                  " (Megatron-LM keeps every optimizer state in fp32 without it)");
  }
  // megatron/training/arguments.py: --main-grads-dtype must be fp32 with --accumulate-allreduce-grads-in-fp32.
  if (o.accumulate_allreduce_grads_in_fp32 && o.main_grads != Dtype::fp32)
    throw Error(field("accumulate_allreduce_grads_in_fp32") + " needs " + field("main_grads_dtype") + " fp32");
  return r;
}

Layout build_layout(const ModelSpec& model, const FrameworkProfile& f, const LayoutRequest& r) {
  Layout l = default_layout(f);
  const auto positive = [](const char* name, std::int64_t v) {
    if (v < 1 || v > kMaxCount)
      throw Error(field(name) + " " + std::to_string(v) + " must be a positive integer of at most 10^12");
    return v;
  };
  if (r.lora_rank != 0) l.lora.rank = positive("lora_rank", r.lora_rank);
  if (r.lora_targets) {
    if (r.lora_rank == 0) throw Error(field("lora_targets") + " needs " + field("lora_rank"));
    l.lora.targets = *r.lora_targets;
  }
  // Megatron-FSDP's strategies are its own (set_megatron_fsdp checks them); optim_grads_params is its default.
  if (r.megatron_fsdp) l.sharding = {Shard::global, Shard::global, Shard::global};
  if (r.sharding) l.sharding = *r.sharding;
  if (!r.megatron_fsdp) require_sharding(f, l.sharding);
  if (r.sequence_parallel) l.sequence_parallel = *r.sequence_parallel;
  if (r.flash_attention)
    l.flash_attention = *r.flash_attention;
  else if (unfused_attention_only(model, f))
    l.flash_attention = false;
  if (r.recompute) {
    require_recompute(f, *r.recompute);
    l.recompute = *r.recompute;
  }
  l.recompute_method = r.recompute_method;
  l.recompute_num_layers = r.recompute_num_layers;
  if (r.recompute_modules) {
    // Megatron-LM reads --recompute-modules under --recompute-granularity selective only (transformer_layer.py).
    if (l.recompute != Recompute::selective)
      throw Error(field("recompute_modules") + " needs " + field("recompute") + " selective, not " +
                  std::string(to_string(l.recompute)));
    l.recompute_modules = *r.recompute_modules;
  }
  require_recompute_method(f, l);
  l.tp = positive("tp", r.tp);
  l.cp = positive("cp", r.cp);
  l.pp = positive("pp", r.pp);
  l.vpp = positive("vpp", r.vpp);
  l.split = r.split;
  l.split.partition_balanced = f.balanced_pipeline_partition;
  if (!l.split.even() && !f.uneven_pipeline_stages)
    throw Error("framework " + f.name + " does not split pipeline stages unevenly (--decoder-first/last-pipeline-" +
                "num-layers, --account-for-*-in-pipeline-split are Megatron-LM's: --framework megatron)");
  if (r.pipeline_layout) set_layer_layout(f, *r.pipeline_layout, l);
  l.ep = positive("ep", r.ep);
  if (r.etp != 0) l.etp = positive("etp", r.etp);
  set_expert_dispatch(model, f, r, l);
  set_mtp_layers(model, f, r, l);
  require_alibi(model, f, l);
  set_cp_exchange(f, r, l);
  require_fp8_recipe(f, r.fp8);
  l.fp8 = r.fp8;
  l.fp8_param_gather = r.fp8_param_gather;
  set_bf16_layers(r, l);
  if ((r.optimizer_offload > 0 || r.overlap_offload_copies) && !f.optimizer_offload)
    throw Error("framework " + f.name + " does not offload the optimizer (" + field("optimizer_offload_fraction") +
                "; Megatron-LM's --optimizer-cpu-offload: --framework megatron)");
  if (r.activation_offload_layers != 0 && !f.activation_offload)
    throw Error("framework " + f.name + " does not offload activations (" + field("cpu_offloading_num_layers") +
                "; Megatron-LM's: --framework megatron)");
  l.optimizer_offload = r.optimizer_offload;
  l.overlap_offload_copies = r.overlap_offload_copies;
  l.activation_offload_layers = r.activation_offload_layers;
  l.overlap_p2p_comm = r.overlap_p2p_comm;
  require_tp_comm_overlap(f, r.tp_comm_overlap);
  set_ddp_overlaps(f, r, l);
  l.tp_comm_overlap = r.tp_comm_overlap;
  require_compile(f, r.compile);
  l.compile = r.compile;
  l.attention_backend = r.attention_backend;
  set_fsdp_mixed_precision(f, r.fsdp_mixed_precision, l);
  set_optimizer_precision(f, r.optimizer_precision, l);
  set_zero_settings(f, r, l);
  set_megatron_fsdp(f, r, l);
  l.mbs = positive("mbs", r.mbs);
  l.seq = positive("seq", r.seq);
  if (r.schedule) l.schedule = *r.schedule;
  if (l.vpp > 1 && r.schedule && !has_virtual_stages(l))
    throw Error(field("vpp") + " " + std::to_string(l.vpp) +
                " (virtual stages) needs the interleaved, zero-bubble, zbv or looped-bfs schedule, not " +
                field("schedule") + " " + std::string(to_string(l.schedule)));
  if (l.vpp > 1 && !r.schedule) l.schedule = Schedule::interleaved;
  if (l.schedule == Schedule::interleaved && l.vpp == 1)
    throw Error(field("schedule") + " interleaved needs " + field("vpp") + " > 1 (virtual stages per GPU)");
  // torchtitan/distributed/pipeline_parallel.py: a multi-stage schedule runs at least 2 stages per rank.
  if (multi_chunk_schedule(l.schedule) && l.pp > 1 && l.vpp == 1)
    throw Error(field("schedule") + " " + std::string(to_string(l.schedule)) + " needs " + field("vpp") +
                " > 1 (torch runs it over virtual stages, torchtitan at least 2 a rank; zbv exactly 2)");
  require_schedule(f, l.schedule);
  require_pipeline_sharding(f, l.sharding, l.pp);
  if (l.cp > 1 && !f.context_parallel)
    throw Error("framework " + f.name + " does not run ring-attention context parallelism (" + field("cp") + " " +
                std::to_string(l.cp) + "; valid: 1)");
  if (r.gpus == 0 && r.dp == 0) throw Error("give " + field("gpus") + " (DP derived as N / (t·c·p)) or " + field("dp"));
  validate_model_split(model, l);
  const std::int64_t model_parallel = l.tp * l.cp;  // each ≤ 10^12 only if checked: keep products bounded
  if (model_parallel / l.cp != l.tp || model_parallel > kMaxCount || model_parallel * l.pp > kMaxCount)
    throw Error("t·c·p is too large (the product must stay at most 10^12)");
  const std::int64_t tcp = model_parallel * l.pp;
  if (r.dp != 0) {
    l.dp = positive("dp", r.dp);
    if (l.dp > kMaxCount / tcp) throw Error(field("dp") + " " + std::to_string(l.dp) + " makes more than 10^12 GPUs");
  }
  if (r.gpus != 0) {
    const std::int64_t n = positive("gpus", r.gpus);
    const auto tcp_text = [&] {  // built only for an error
      return "t·c·p = " + std::to_string(l.tp) + "·" + std::to_string(l.cp) + "·" + std::to_string(l.pp) + " = " +
             std::to_string(tcp);
    };
    if (n % tcp != 0) throw Error(tcp_text() + " does not divide " + field("gpus") + " " + std::to_string(n));
    if (r.dp != 0 && n != tcp * l.dp)
      throw Error(field("gpus") + " " + std::to_string(n) + " is not " + tcp_text() + " times " + field("dp") + " " +
                  std::to_string(l.dp));
    l.dp = n / tcp;
  }
  if (l.mbs > kMaxCount / l.dp) throw Error("dp·mbs is larger than 10^12 sequences");
  const std::int64_t m = default_microbatches(l.pp);
  if (r.gbs == 0 && l.dp * l.mbs > kMaxCount / m) throw Error("dp·mbs·pp is larger than 10^12 sequences");
  l.gbs = r.gbs == 0 ? l.dp * l.mbs * m : positive("gbs", r.gbs);
  validate_layout(model, l);
  return l;
}

FrameworkProfile framework_from_json(const nlohmann::json& j) {
  FrameworkProfile f;
  f.name = j.at("name").get<std::string>();
  f.sequence_parallel = j.at("sequence_parallel").get<bool>();
  f.flash_attention = j.at("flash_attention").get<bool>();
  f.schedule = parse_schedule(j.at("schedule").get<std::string>());
  f.recompute = parse_recompute(j.at("recompute").get<std::string>());
  f.precision = precision_from_json(j.at("precision"));
  const auto& s = j.at("sharding");
  f.sharding = {parse_shard(s.at("params").get<std::string>()), parse_shard(s.at("grads").get<std::string>()),
                parse_shard(s.at("optimizer").get<std::string>())};
  f.fsdp_unit_buffers = j.value("fsdp_unit_buffers", std::int64_t{0});
  f.fsdp_flat_parameters = j.value("fsdp_flat_parameters", false);
  if (j.contains("supported_shardings"))
    for (const auto& code : j.at("supported_shardings"))
      f.supported_shardings.push_back(parse_sharding_code(code.get<std::string>()));
  if (j.contains("context_parallel")) f.context_parallel = j.at("context_parallel").get<bool>();
  if (j.contains("context_parallel_rotate_method"))  // "allgather" or "alltoall" (framework.schema.json)
    f.cp_exchange = parse_cp_exchange(j.at("context_parallel_rotate_method").get<std::string>());
  if (j.contains("pipeline_shardings"))
    for (const auto& code : j.at("pipeline_shardings"))
      f.pipeline_shardings.push_back(parse_sharding_code(code.get<std::string>()));
  if (j.contains("supported_recompute"))
    for (const auto& r : j.at("supported_recompute"))
      f.supported_recompute.push_back(parse_recompute(r.get<std::string>()));
  if (j.contains("supported_recompute_methods"))
    for (const auto& x : j.at("supported_recompute_methods")) {
      const auto method = parse_recompute_method(x.get<std::string>());
      if (method == RecomputeMethod::uniform)
        f.uniform_recompute_groups = true;
      else
        f.supported_recompute_methods.push_back(method);
    }
  if (j.contains("supported_schedules"))
    for (const auto& x : j.at("supported_schedules"))
      f.supported_schedules.push_back(parse_schedule(x.get<std::string>()));
  f.uneven_pipeline_stages = j.value("uneven_pipeline_stages", false);
  f.pipeline_layer_layout = j.value("pipeline_layer_layout", false);
  f.ddp_overlap_switches = j.value("ddp_overlap_switches", false);
  f.shared_expert_overlap = j.value("moe_shared_expert_overlap", false);
  f.multi_token_prediction = j.value("multi_token_prediction", false);
  if (const std::string a = j.value("alibi", std::string()); !a.empty())
    f.alibi = a == "any" ? FrameworkProfile::Alibi::any : FrameworkProfile::Alibi::unfused;
  f.balanced_pipeline_partition = j.value("balanced_pipeline_partition", false);
  if (const auto it = j.find("fsdp_mixed_precision"); it != j.end()) f.fsdp_mixed_precision = precision_from_json(*it);
  if (j.contains("fp8")) {
    const auto& x = j.at("fp8");
    f.fp8_library =
        x.at("library").get<std::string>() == "torchao" ? Fp8Library::torchao : Fp8Library::transformer_engine;
    for (const auto& r : x.at("recipes")) f.fp8_recipes.push_back(parse_fp8_recipe(r.get<std::string>()));
  }
  if (j.contains("offload")) {
    f.optimizer_offload = j.at("offload").value("optimizer", false);
    f.activation_offload = j.at("offload").value("activations", false);
  }
  if (j.contains("tp_comm_overlap")) {
    f.tp_comm_overlap = j.at("tp_comm_overlap").at("supported").get<bool>();
    if (j.at("tp_comm_overlap").value("buffers", "userbuffers") == "symmetric_memory")
      f.tp_comm_buffers = TpCommBuffers::symmetric_memory;  // the schema allows these two
  }
  if (j.contains("compile")) f.compile = j.at("compile").at("supported").get<bool>();
  if (j.contains("precision_aware_optimizer"))
    f.precision_aware_optimizer = j.at("precision_aware_optimizer").at("supported").get<bool>();
  if (j.contains("megatron_fsdp"))
    for (const auto& code : j.at("megatron_fsdp").at("shardings"))
      f.megatron_fsdp_shardings.push_back(parse_sharding_code(code.get<std::string>()));
  if (j.contains("zero")) {
    const auto& z = j.at("zero");
    f.zero = ZeroSettings{};
    f.zero->reduce_bucket_size = z.at("reduce_bucket_size").get<std::int64_t>();
    f.zero->prefetch_bucket_size = z.at("stage3_prefetch_bucket_size").get<std::int64_t>();
    f.zero->max_live_parameters = z.at("stage3_max_live_parameters").get<std::int64_t>();
    f.zero->max_reuse_distance = z.at("stage3_max_reuse_distance").get<std::int64_t>();
  }
  const auto& r = j.at("residual");
  f.residual.name = f.name;
  f.residual.fixed_bytes = r.at("fixed_GiB").get<double>() * kGiB;
  f.residual.logits_bytes_per_element = r.at("logits_bytes_per_element").get<double>();
  f.residual.optimizer_shard_bytes_per_param = r.at("optimizer_shard_bytes_per_param").get<double>();
  f.residual.cp_communicator_bytes = r.at("cp_communicator_GiB").get<double>() * kGiB;
  f.residual.capacity_share = r.value("capacity_share", 0.0);
  if (r.contains("uncertainty"))
    f.memory_band = {r.at("uncertainty").at("peak_low").get<double>(),
                     r.at("uncertainty").at("peak_high").get<double>(), true};
  return f;
}

}  // namespace headroom
