// A training framework's defaults (data/frameworks/*.json): what `--framework megatron` means.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/core/knobs.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/uncertainty.hpp"

namespace headroom {

struct FrameworkProfile {
  std::string name;
  bool sequence_parallel = true;
  bool flash_attention = true;
  Schedule schedule = Schedule::one_f_one_b;
  Recompute recompute = Recompute::none;
  Precision precision;
  // PyTorch FSDP's MixedPrecision over an FP32 model (optional key "fsdp_mixed_precision": its bytes per parameter of
  // the shard); absent: the knob is refused.
  std::optional<Precision> fsdp_mixed_precision;
  StateSharding sharding;
  std::int64_t fsdp_unit_buffers = 0;  // PyTorch FSDP: decoder layers held unsharded at a time (optional key)
  // FSDP1's FlatParameter: one flat tensor per unit, frozen and trainable weights together (optional key
  // "fsdp_flat_parameters", default false: FSDP2's per-parameter sharding).
  bool fsdp_flat_parameters = false;
  // What the framework can launch (optional keys; empty = not stated, anything goes): `rank` proposes only
  // these. Sharding codes P,G,OS as in "NNG"; recompute and schedule names as in the "recompute"/"schedule" keys
  // (no "interleaved" = no virtual pipeline stages).
  std::vector<StateSharding> supported_shardings;
  std::vector<Recompute> supported_recompute;
  std::vector<Schedule> supported_schedules;
  // Full recompute by layers the framework runs (optional key "supported_recompute_methods"; absent: none, every
  // layer checkpointed on its own): "uniform" groups of N layers (uniform_recompute_groups), "block" or "every".
  std::vector<RecomputeMethod> supported_recompute_methods;
  bool uniform_recompute_groups = false;
  // Ring-attention context parallelism (optional key "context_parallel", default true), and how its ring passes K and
  // V (optional key "context_parallel_rotate_method": PyTorch's "allgather" or "alltoall", the knob's default and
  // the ones it takes; absent: Transformer Engine's P2P ring, the knob refused).
  bool context_parallel = true;
  std::optional<CpExchange> cp_exchange;
  // Of those shardings, the ones it runs with a pipeline (optional key "pipeline_shardings"; empty: all).
  std::vector<StateSharding> pipeline_shardings;
  // Pipeline stages of unequal layer counts (Megatron-LM's --decoder-first/last-pipeline-num-layers); optional
  // key, absent = no: `rank` then keeps to p | L.
  bool uneven_pipeline_stages = false;
  // Each virtual stage's layers given (optional key "pipeline_layer_layout": Megatron-LM's
  // --pipeline-model-parallel-layout); without it the knob is refused.
  bool pipeline_layer_layout = false;
  // Data-parallel overlaps the launch turns on or off (optional key "ddp_overlap_switches": Megatron-LM's
  // --overlap-grad-reduce and --overlap-param-gather); without it they always run as the coefficients price them.
  bool ddp_overlap_switches = false;
  // The shared expert's GEMMs overlapped with the token dispatch (optional key "moe_shared_expert_overlap":
  // Megatron-LM's --moe-shared-expert-overlap); without it the knob is refused.
  bool shared_expert_overlap = false;
  // Multi-token-prediction layers (optional key "multi_token_prediction": Megatron-LM's --mtp-num-layers); without it
  // the knob is refused.
  bool multi_token_prediction = false;
  // Models with ALiBi position biases (optional key "alibi"): "unfused" where only the unfused attention adds the bias
  // (bigscience-workshop/Megatron-DeepSpeed's --position-embedding-type alibi: transformer.py's baddbmm), "any" where
  // the fused kernels do too (llm-foundry's MPT under FSDP: flash-attn's alibi_slopes); without it such a model is
  // refused.
  enum class Alibi { none, unfused, any };
  Alibi alibi = Alibi::none;
  // DeepSpeed's pipeline partition (optional key "balanced_pipeline_partition"; PipelineSplit::partition_balanced): any
  // p up to L, the first L mod p stages one layer more; without it p must divide L unless the stages are given.
  bool balanced_pipeline_partition = false;
  // FP8 (optional key "fp8": {"library", "recipes"}): the library running the FP8 GEMMs and the recipes the framework
  // launches; no recipes: FP8 is refused.
  Fp8Library fp8_library = Fp8Library::transformer_engine;
  std::vector<Fp8Recipe> fp8_recipes;
  // Offloading the framework can launch (optional key "offload": {"optimizer": bool, "activations": bool}).
  bool optimizer_offload = false;
  bool activation_offload = false;
  // TP collectives pipelined with their GEMMs (optional key "tp_comm_overlap": {"supported": bool, "buffers":
  // "userbuffers" (default) or "symmetric_memory"}).
  bool tp_comm_overlap = false;
  TpCommBuffers tp_comm_buffers = TpCommBuffers::userbuffers;
  // torch.compile of the decoder blocks (optional key "compile": {"supported": bool}).
  bool compile = false;
  // Megatron-LM's precision-aware optimizer and gradient formats (optional key "precision_aware_optimizer":
  // {"supported": bool}); without it the formats are the "precision" key's.
  bool precision_aware_optimizer = false;
  // DeepSpeed's ZeRO buffers and streams (optional key "zero": DeepSpeed's defaults of reduce_bucket_size and the
  // stage3_* settings); absent: the zero knobs are refused.
  std::optional<ZeroSettings> zero;
  // Megatron-LM's Megatron-FSDP (optional key "megatron_fsdp": {"shardings": the codes of its
  // --data-parallel-sharding-strategy choices}); absent: use_megatron_fsdp is refused.
  std::vector<StateSharding> megatron_fsdp_shardings;
  ResidualModel residual;
  ErrorBand memory_band;  // held-out band of the predicted peak ("residual.uncertainty"; unknown when absent)
};

[[nodiscard]] FrameworkProfile framework_from_json(const nlohmann::json& j);

// A layout carrying the framework's defaults (SP, attention, schedule, recompute, precision, sharding);
// the parallel sizes, batch and sequence are left at 1 for the caller to set.
[[nodiscard]] Layout default_layout(const FrameworkProfile& f);
// Throws Error unless the framework trains with the FP8 recipe (none always passes), naming the ones it runs.
void require_fp8_recipe(const FrameworkProfile& f, Fp8Recipe recipe);
// Error when the TP overlap is asked of a framework that does not run it.
void require_tp_comm_overlap(const FrameworkProfile& f, bool wanted);
// Error when torch.compile is asked of a framework that does not compile its blocks.
void require_compile(const FrameworkProfile& f, bool wanted);
// Sets the layout's optimizer-state and gradient formats and its bytes per parameter (memory.hpp
// model_state_precision) after its offload and FP8 recipe: refused where the framework does not run Megatron-LM's
// precision-aware optimizer, and formats other than fp32 with an offloaded optimizer (not priced).
void set_optimizer_precision(const FrameworkProfile& f, const OptimizerPrecision& o, Layout& l);
// The request's FSDP mixed precision (Layout::fsdp_mixed_precision): refused where the framework has none
// (FrameworkProfile::fsdp_mixed_precision) and with LoRA. Call before set_optimizer_precision.
void set_fsdp_mixed_precision(const FrameworkProfile& f, bool on, Layout& l);
struct LayoutRequest;
// Sets the layout's DDP overlaps from the request (Layout::overlap_grad_reduce; the gather's defaults to the
// reduction's): either off is refused where the framework has no such switch (FrameworkProfile::ddp_overlap_switches).
void set_ddp_overlaps(const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// The request's token dispatcher, capacity factor and shared-expert overlap (Layout::dispatcher, expert_load,
// shared_expert_overlap), the last refused where the framework does not run it and off without a shared expert.
void set_expert_dispatch(const ModelSpec& m, const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// The request's multi-token-prediction layers (Layout::mtp_layers): refused where the framework does not train them,
// past the decoder's layer count, with learned positions or LoRA, and under full uniform recompute of groups of
// more than one layer (Megatron-LM asserts it).
void set_mtp_layers(const ModelSpec& m, const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// The request's CP exchange (Layout::cp_exchange), or the framework's: PyTorch's rotations where the framework's CP is
// PyTorch's ring attention, Transformer Engine's where it is not; the other refused.
void set_cp_exchange(const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// Whether the framework runs the model's attention unfused whatever the layout says (an ALiBi model where only the
// unfused attention adds the bias: FrameworkProfile::Alibi::unfused).
[[nodiscard]] bool unfused_attention_only(const ModelSpec& m, const FrameworkProfile& f);
// The layout's pipeline layer layout (PipelineSplit::layer_layout) from its text, with v set from its stages over p;
// refused where the framework takes none, its stages are not a multiple of p, or a v given disagrees.
void set_layer_layout(const FrameworkProfile& f, const std::string& text, Layout& l);
// The request's BF16 layers of an FP8 run (Layout::bf16_layers_at_start/end, validate_bf16_layers checks them); their
// counts refused without first_last_layers_bf16.
void set_bf16_layers(const LayoutRequest& r, Layout& l);
// Errors when a recompute mode, a sharding or a pipeline schedule is not one the framework runs (its
// supported_recompute, supported_shardings, supported_schedules; an empty list allows all), naming the ones it does:
// one rule for estimate, launch, simulate, mtsl and the Python Planner (build_layout), as for rank's proposals.
void require_recompute(const FrameworkProfile& f, Recompute r);
// Errors when the layout's recompute method (recompute_method_given) is not one the framework runs.
void require_recompute_method(const FrameworkProfile& f, const Layout& l);
void require_sharding(const FrameworkProfile& f, const StateSharding& s);
// The shardings the framework launches (supported_shardings), or under Megatron-FSDP its strategies
// (megatron_fsdp_shardings); empty: all.
[[nodiscard]] inline const std::vector<StateSharding>& launchable_shardings(const FrameworkProfile& f,
                                                                            bool megatron_fsdp) {
  return megatron_fsdp ? f.megatron_fsdp_shardings : f.supported_shardings;
}
// Errors when the framework does not run the sharding with a pipeline (pipeline_shardings; pp > 1 only).
void require_pipeline_sharding(const FrameworkProfile& f, const StateSharding& s, std::int64_t pp);
void require_schedule(const FrameworkProfile& f, Schedule s);

// What a user asks for, typed (the CLI's layout flags, the Python Planner's keywords): 0 / nullopt = not given.
struct LayoutRequest {
  std::int64_t tp = 1, cp = 1, pp = 1, vpp = 1, mbs = 1;
  std::int64_t seq = 0;
  std::int64_t gpus = 0, dp = 0, gbs = 0;  // DP from gpus / (t·c·p) unless dp is given; gbs default
                                           // dp·mbs·default_microbatches(pp)
  std::optional<Recompute> recompute;
  RecomputeMethod recompute_method = RecomputeMethod::uniform;  // Layout::recompute_method
  std::int64_t recompute_num_layers = 1;                        // Layout::recompute_num_layers
  std::optional<std::uint8_t> recompute_modules;                // Layout::recompute_modules; needs selective
  std::optional<Schedule> schedule;                             // default: the framework's, interleaved when vpp > 1
  std::optional<std::string> pipeline_layout;                   // PipelineSplit::layer_layout's text; sets vpp
  std::optional<StateSharding> sharding;
  std::optional<bool> sequence_parallel, flash_attention;
  std::int64_t lora_rank = 0;
  std::optional<unsigned> lora_targets;  // LoraTarget bits; needs lora_rank
  PipelineSplit split;
  std::int64_t ep = 1, etp = 0;  // experts: Layout::ep, Layout::etp (0: tp)
  double expert_load = 1.0;      // Layout::expert_load
  ExpertDispatcher dispatcher = ExpertDispatcher::alltoall;
  bool shared_expert_overlap = false;  // Layout::shared_expert_overlap; needs FrameworkProfile::shared_expert_overlap
  std::int64_t mtp_layers = 0;         // Layout::mtp_layers; needs FrameworkProfile::multi_token_prediction
  Fp8Recipe fp8 = Fp8Recipe::none;     // Layout::fp8; needs a framework recipe
  bool fp8_param_gather = false;       // Layout::fp8_param_gather
  // Layout::bf16_layers_at_start/end where first_last_layers_bf16 (-1: not given, Megatron-LM's 1); needs FP8.
  bool first_last_layers_bf16 = false;
  std::int64_t bf16_layers_at_start = -1, bf16_layers_at_end = -1;
  double optimizer_offload = 0.0;              // Layout::optimizer_offload, 0..1
  bool overlap_offload_copies = false;         // Layout::overlap_offload_copies
  std::int64_t activation_offload_layers = 0;  // Layout::activation_offload_layers
  bool overlap_p2p_comm = true;                // Layout::overlap_p2p_comm
  bool tp_comm_overlap = false;                // Layout::tp_comm_overlap; needs a framework that runs it
  bool overlap_grad_reduce = true;             // Layout::overlap_grad_reduce; off needs a framework with the switch
  std::optional<bool> overlap_param_gather;    // Layout::overlap_param_gather; default overlap_grad_reduce's
  bool compile = false;                        // Layout::compile; needs a framework that compiles
  AttentionBackend attention_backend = AttentionBackend::framework;  // Layout::attention_backend
  std::optional<CpExchange> cp_exchange;   // Layout::cp_exchange; needs a framework with PyTorch's CP (default its)
  OptimizerPrecision optimizer_precision;  // Layout::optimizer_precision; needs a framework that runs it
  bool fsdp_mixed_precision = false;       // Layout::fsdp_mixed_precision; needs FrameworkProfile::fsdp_mixed_precision
  // Layout::zero's settings given (overlap_comm, reduce_bucket_size, stage3_*); needs a framework with "zero".
  std::optional<bool> overlap_comm;
  std::int64_t reduce_bucket_size = -1, prefetch_bucket_size = -1, max_live_parameters = -1,
               max_reuse_distance = -1;  // -1: not given
  std::int64_t hpz_partition_size = 0;   // 0: not given
  // Layout::megatron_fsdp's settings (use_megatron_fsdp, fsdp_double_buffer, suggested_communication_unit_size) and
  // megatron_fsdp_main_grads_dtype (nullopt: auto, the weights' format); the last three need the first.
  bool megatron_fsdp = false, fsdp_double_buffer = false;
  std::int64_t fsdp_unit_size = 0;  // 0: not given
  std::optional<Dtype> megatron_fsdp_main_grads;
};
// The micro-batches per pipeline of a global batch not given: p with a pipeline, the fewest at which 1F1B's first stage
// holds p micro-batches in flight as every run with m >= p does (Narayanan et al. 2021 Sec. 2.2.1, 4D paper Sec.
// 3.2.2), and a multiple of p as the interleaved schedule needs; 1 without one.
[[nodiscard]] constexpr std::int64_t default_microbatches(std::int64_t pp) { return pp > 1 ? pp : 1; }

// The request of the knobs a user gave (knobs.hpp: the CLI's flags, the Python keywords, a run file's columns), with
// the rules that join knobs: fp8_format turns FP8 on and contradicts precision bf16; fp8_recipe and fp8_param_gather
// need FP8, whose recipe defaults to the framework's first; optimizer_offload_fraction and the copies' overlap need
// optimizer_cpu_offload, which offloads all of the optimizer unless a fraction is given (Megatron-LM's arguments.py
// defaults); cpu_offloading_num_layers 0 is none. Errors name the knobs as fields.
[[nodiscard]] LayoutRequest layout_request(const KnobSettings& k, const FrameworkProfile& f);
// The request's field of an integer knob (count or whole: tp, gpus, cpu_offloading_num_layers, ...), for callers
// that vary it row by row; nullptr for another knob.
[[nodiscard]] std::int64_t* integer_field(LayoutRequest& r, KnobId id);
// The framework's defaults, then the request; every size checked (each at most 10^12 and their products too),
// then validate_model_split and validate_layout. Errors carry the fields they name (error.hpp field()).
[[nodiscard]] Layout build_layout(const ModelSpec& model, const FrameworkProfile& framework, const LayoutRequest& r);
// Layout::zero: the framework's DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py), then the request's
// settings, over the layout's sharding; an Error where the framework runs no ZeRO and a setting is given.
void set_zero_settings(const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// Layout::megatron_fsdp from the request, with its sharding (Megatron-LM's default optim_grads_params, ZeRO-3, where
// none is given) and gradient format (megatron_fsdp_main_grads_dtype; auto: the weights'); an Error where the
// framework has no Megatron-FSDP, a setting of it is given without use_megatron_fsdp, or the sharding is not one of
// its strategies. Call after set_optimizer_precision.
void set_megatron_fsdp(const FrameworkProfile& f, const LayoutRequest& r, Layout& l);
// Largest count accepted (sizes, batch, sequence): keeps every product of two counts inside int64.
inline constexpr std::int64_t kMaxCount = kMaxInteger;           // 10^12 (knobs.hpp)
[[nodiscard]] Recompute parse_recompute(std::string_view text);  // throws Error listing the valid names
[[nodiscard]] RecomputeMethod parse_recompute_method(std::string_view text);
[[nodiscard]] Schedule parse_schedule(std::string_view text);
[[nodiscard]] Shard parse_shard(std::string_view text);
[[nodiscard]] Fp8Recipe parse_fp8_recipe(std::string_view text);  // delayed | tensorwise (none: BF16)
// "NNG" → {N, N, G} (P, G, OS); throws Error naming the code.
[[nodiscard]] StateSharding parse_sharding_code(std::string_view code);

}  // namespace headroom
