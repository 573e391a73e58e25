// The execution strategy: how one training job is laid out over the GPUs. Immutable once validated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headroom {

struct ModelSpec;
struct ClusterSpec;

// Activation recompute: none; selective, Megatron-LM's core-attention recompute (Korthikanti et al. 2023 Sec. 5); full,
// every layer from its input; op, torchtitan's per-op selective checkpointing (torchtitan/distributed/
// activation_checkpoint.py SelectiveAC: inside each checkpointed block the outputs of attention, of reduce-scatters and
// of every other matmul are saved, everything else is recomputed in backward).
enum class Recompute { none, selective, full, op };
// Which layers full recompute checkpoints: uniform, every layer, in groups of recompute_num_layers layers whose input
// alone is kept (Megatron-LM's --recompute-method uniform, megatron/core/transformer/transformer_block.py
// _checkpointed_forward); block, the first recompute_num_layers layers of each model chunk, the rest keeping all their
// activations (--recompute-method block); every, every recompute_num_layers-th decoder block of a GPU, counted in
// order over its blocks (torchtitan's layer-selective checkpointing, torchtitan/distributed/activation_checkpoint.py
// _apply_layer_sac: selective_ac_option N).
enum class RecomputeMethod { uniform, block, every };
// What Megatron-LM's selective recompute recomputes (--recompute-modules, megatron/core/transformer/
// transformer_config.py; the default core_attn): core_attn, the core attention; layernorm, the norms Transformer Engine
// does not fuse into the next linear layer (a layer with experts' pre-MLP norm, latent attention's input norm; their
// outputs discarded after forward, transformer_layer.py); mla_up_proj, latent attention's up projections and RoPE
// (their Q, K, V outputs discarded after the core attention, multi_latent_attention.py); mlp, a dense layer's MLP
// (checkpointed from its input); moe, a layer with experts' whole MoE block, router, dispatch and experts
// (moe_layer.py); shared_experts, the shared expert's MLP; moe_act, the routed experts' activation (its output
// discarded, experts.py). A bit set.
enum class RecomputeModule : std::uint8_t {
  core_attn = 1,
  layernorm = 2,
  mla_up_proj = 4,
  mlp = 8,
  moe = 16,
  shared_experts = 32,
  moe_act = 64,
};
inline constexpr std::uint8_t kDefaultRecomputeModules = static_cast<std::uint8_t>(RecomputeModule::core_attn);
enum class ExpertDispatcher { alltoall, flex };
// Pipeline schedules: 1F1B, Megatron-LM's interleaved 1F1B (vpp chunks a GPU, looped), GPipe, and torch's
// ScheduleInterleavedZeroBubble (zero_bubble): 1F1B's order over looped chunks with each backward split into its
// input-gradient (B) and weight-gradient (W) passes, the W passes filling the fill and drain (the ZB1P schedule of
// Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024; torch/distributed/pipelining/schedules.py), and torch's
// ScheduleZBVZeroBubble (zbv): two chunks a rank placed in a V, rank i holding virtual stages i and 2p − 1 − i, so
// that the first rank holds the embedding and the LM head (the paper's ZB-V, Sec. 6), and torch's ScheduleLoopedBFS
// (looped_bfs): looped chunks run breadth-first, every micro-batch's forward of a rank's first chunk, then of its next,
// then the backwards in reverse (Lamy-Poirier, Breadth-First Pipeline Parallelism, MLSys 2023; _calculate_single_rank_
// operations in torch/distributed/pipelining/schedules.py).
enum class Schedule { one_f_one_b, interleaved, gpipe, zero_bubble, zbv, looped_bfs };
// FP8 training of the decoder's linear layers (per-tensor scales; attention, embedding, router and LM head stay BF16):
// delayed scaling from an amax history (Transformer Engine's DelayedScaling, Megatron-LM's --fp8-recipe delayed) or
// current scaling from the tensor itself (TE's Float8CurrentScaling, --fp8-recipe tensorwise; torchao Float8Linear's
// tensorwise recipe). none: BF16 GEMMs.
enum class Fp8Recipe { none, delayed, tensorwise };
// The library that runs the FP8 GEMMs, which sets what is cached and saved (framework profile key "fp8.library"):
// Transformer Engine (Megatron-LM) caches each weight's FP8 copy and transpose across micro-batches and saves the
// linear layers' inputs in FP8; torchao (torchtitan, FSDP2) casts every weight each micro-batch and saves them in BF16.
enum class Fp8Library { transformer_engine, torchao };
// The attention kernels a layout is priced with (the attention_backend knob): the framework's curve, or the device's
// curve of cuDNN's fused attention or of FlashAttention-2 (kernel_curves.hpp kAttentionBackends).
enum class AttentionBackend : std::uint8_t { framework, cudnn, flash2 };
// The buffers the TP overlap communicates through (a framework's, residual.hpp tp_comm_buffer_bytes): Transformer
// Engine's userbuffers, or the symmetric-memory workspace of torch's micro-pipelined TP.
enum class TpCommBuffers : std::uint8_t { userbuffers, symmetric_memory };
// How CP's attention gets the other ranks' K and V: Transformer Engine's (Megatron-LM's cp_comm_type knob) P2P ring,
// one all-gather before attention (all_gather) or DeepSpeed-Ulysses all-to-alls of Q, K, V and the output over heads
// (a2a); or PyTorch's ring attention (torch/distributed/tensor/experimental/_attention.py, the
// context_parallel_rotate_method knob), a ring of permutes (alltoall) or one all-gather at the first step (allgather).
enum class CpExchange : std::uint8_t { p2p, all_gather, a2a, alltoall, allgather };
// Whether an exchange is PyTorch's (the rest are Transformer Engine's).
[[nodiscard]] constexpr bool torch_cp_exchange(CpExchange x) {
  return x == CpExchange::alltoall || x == CpExchange::allgather;
}
// How one of parameters, gradients or optimizer states is sharded over the data-parallel (DP×CP) group:
// not at all, inside a group of GPUs (a node), or over the whole group (PaRO's N / I / G).
enum class Shard { none, intra, global };

struct StateSharding {
  Shard params = Shard::none;
  Shard grads = Shard::none;
  Shard optimizer = Shard::global;  // Megatron-LM's distributed optimizer (ZeRO-1 over DP×CP)
  bool operator==(const StateSharding&) const = default;
};

// The one parser of sharding codes (PaRO's notation): a letter N, I or G (either case) → Shard; three of them
// (params, grads, optimizer states), e.g. "NNG" → StateSharding; nullopt for anything else.
[[nodiscard]] std::optional<Shard> shard_from_letter(char c);
[[nodiscard]] std::optional<StateSharding> sharding_from_code(std::string_view code);

// The storage formats of Megatron-LM's precision-aware optimizer (megatron/training/arguments.py
// --use-precision-aware-optimizer, --main-grads-dtype fp32|bf16, --main-params-dtype fp32|fp16, --exp-avg-dtype and
// --exp-avg-sq-dtype fp32|fp16|bf16|fp8; --grad-reduce-in-bf16). The defaults are Megatron-LM's: FP32 everywhere.
enum class Dtype : std::uint8_t { fp32, bf16, fp16, fp8 };
struct OptimizerPrecision {
  bool precision_aware = false;  // --use-precision-aware-optimizer (Transformer Engine's FusedAdam)
  Dtype main_grads = Dtype::fp32;
  Dtype main_params = Dtype::fp32;
  Dtype exp_avg = Dtype::fp32;
  Dtype exp_avg_sq = Dtype::fp32;
  bool grad_reduce_in_bf16 = false;
  // --fp16: FP16 weights with loss scaling; its gradient buffer is FP16 unless --accumulate-allreduce-grads-in-fp32.
  bool fp16 = false;
  bool accumulate_allreduce_grads_in_fp32 = false;
  // A format other than Megatron-LM's defaults: FP16 or BF16 gradients, FP16 weights, or a dtype other than fp32.
  [[nodiscard]] bool formats_given() const {
    return fp16 || grad_reduce_in_bf16 || main_grads != Dtype::fp32 || main_params != Dtype::fp32 ||
           exp_avg != Dtype::fp32 || exp_avg_sq != Dtype::fp32;
  }
  [[nodiscard]] bool given() const { return precision_aware || formats_given(); }
};
[[nodiscard]] std::string_view to_string(Dtype t);
[[nodiscard]] std::optional<Dtype> dtype_from_string(std::string_view text);

// Numeric formats and optimizer of the training run, bytes per parameter.
struct Precision {
  double weight_bytes = 2;      // BF16 weights
  double grad_bytes = 4;        // FP32 gradient accumulation (Megatron main_grad)
  double optimizer_bytes = 12;  // Adam: FP32 master weight, momentum, variance
};

// LoRA (thesis Sec. 3.1.2, Eq. 3.3): adapters A (in × r) and B (r × out) on the target projections; the
// base weights are frozen. rank 0 = full training.
enum class LoraTarget : unsigned { q = 1, k = 2, v = 4, o = 8, gate = 16, up = 32, down = 64 };
inline constexpr unsigned kAllLoraTargets = 127;  // q, k, v, o, gate, up, down (the thesis's default)

struct Lora {
  std::int64_t rank = 0;
  unsigned targets = kAllLoraTargets;  // bit set of LoraTarget
  [[nodiscard]] bool enabled() const { return rank > 0; }
  [[nodiscard]] bool targets_module(LoraTarget t) const { return (targets & static_cast<unsigned>(t)) != 0; }
};

// Megatron-LM's --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py): what
// each of the p·v virtual stages holds, virtual stage a·p + b being chunk a of pipeline rank b. Its string form:
// E the embedding, t a decoder layer, m a multi-token-prediction layer, L the loss; | ends a stage; (…)*n and x*n
// repeat; commas are cosmetic ("Et*3|(tt|)*29,m|L").
struct PipelineLayerLayout {
  std::string text;                                  // as given
  std::vector<std::int64_t> decoder_layers;          // per virtual stage
  std::vector<std::int64_t> mtp_layers;              // per virtual stage
  std::int64_t embedding_stage = 0, loss_stage = 0;  // the virtual stages of E and L
  [[nodiscard]] std::int64_t stages() const { return static_cast<std::int64_t>(decoder_layers.size()); }
};
// The string form parsed as Megatron-LM's parse_str_to_list does; throws Error naming a character other than E, t, m,
// L, or a layout that unrolls past a million characters.
[[nodiscard]] PipelineLayerLayout parse_pipeline_layout(std::string_view text);
// The knob and its text as errors name them (at most 80 characters of it).
[[nodiscard]] std::string layout_named(std::string_view text);
// A layout of Megatron-LM's list form ([["embedding", "decoder"], ["decoder", "loss"]]: each stage's layer names) in
// its string form; throws Error naming a name other than embedding, decoder, mtp or loss.
[[nodiscard]] std::string pipeline_layout_text(const std::vector<std::vector<std::string>>& stages);

// How the decoder layers are split over the pipeline stages, with Megatron-LM's options
// (megatron/core/transformer/transformer_block.py, get_num_layers_to_build): all zero/false = L/p per stage.
// first/last_stage_layers: --decoder-first/last-pipeline-num-layers, the other stages share the rest evenly.
// embedding/loss_in_split: --account-for-embedding/loss-in-pipeline-split, the embedding (loss) counts as a layer,
// (L + 1 [+ 1])/p per stage, the first (last) stage building one decoder layer fewer.
struct PipelineSplit {
  std::int64_t first_stage_layers = 0;
  std::int64_t last_stage_layers = 0;
  bool embedding_in_split = false;
  bool loss_in_split = false;
  // DeepSpeed's pipeline engine: p ∤ L is no error, the first L mod p stages build one layer more
  // (deepspeed/runtime/pipe/module.py partition_method "type:transformer", Megatron-DeepSpeed's GPTModelPipe
  // default; runtime/utils.py partition_balanced). With the options above unset; see stage_layers.
  bool partition_balanced = false;
  // --pipeline-model-parallel-layout: every virtual stage's layers as given (null: the options above). Shared, not
  // copied, by the layouts that carry it.
  std::shared_ptr<const PipelineLayerLayout> layer_layout;
  [[nodiscard]] bool even() const { return !uneven() && !embedding_in_split && !loss_in_split && !layer_layout; }
  // A first or last stage count is given.
  [[nodiscard]] bool uneven() const { return first_stage_layers > 0 || last_stage_layers > 0; }
  // What the stages share when no count is given: L, plus one each for an accounted embedding and loss.
  [[nodiscard]] std::int64_t counted_layers(std::int64_t layers) const {
    return layers + (embedding_in_split ? 1 : 0) + (loss_in_split ? 1 : 0);
  }
  // The stages between given first and last counts, which share the rest evenly.
  [[nodiscard]] std::int64_t middle_stages(std::int64_t pp) const {
    return pp - (first_stage_layers > 0 ? 1 : 0) - (last_stage_layers > 0 ? 1 : 0);
  }
};

// DeepSpeed ZeRO's gradient bucket, parameter fetching and streams (deepspeed/runtime/zero/config.py: the deepspeed
// framework's defaults, or the overlap_comm, reduce_bucket_size and stage3_* knobs); `deepspeed` false elsewhere.
struct ZeroSettings {
  bool deepspeed = false;
  bool overlap_comm = false;              // gradients reduced on their own stream during the backward
  std::int64_t reduce_bucket_size = 0;    // elements of a gradient bucket
  std::int64_t prefetch_bucket_size = 0;  // ZeRO-3: parameters all-gathered ahead of use
  std::int64_t max_live_parameters = 0;   // ZeRO-3: gathered parameters beyond which none is prefetched
  std::int64_t max_reuse_distance = 0;    // ZeRO-3: a gathered parameter used again within this many stays
  std::int64_t hpz_partition_size = 1;    // ZeRO++ hpZ: GPUs of the secondary parameter shard (1: none)
};

// ZeRO++'s secondary shard is there: hpZ asked (zero_hpz_partition_size > 1) of parameters sharded over DP (ZeRO-3).
[[nodiscard]] inline bool zero_hpz(const ZeroSettings& z, const StateSharding& s) {
  return z.hpz_partition_size > 1 && s.params == Shard::global;
}
// deepspeed/runtime/zero/config.py overlap_comm_valid: overlap_comm is on by default at stage 3 (parameters sharded).
[[nodiscard]] inline bool zero_overlap_comm_default(const StateSharding& s) { return s.params != Shard::none; }

// Megatron-LM's Megatron-FSDP (--use-megatron-fsdp; megatron/core/distributed/fsdp/mcore_fsdp_adapter.py): each
// decoder layer an FSDP unit whose parameters are all-gathered and gradients reduce-scattered layer by layer as the
// layout's sharding says; `enabled` false elsewhere.
struct MegatronFsdpSettings {
  bool enabled = false;
  bool double_buffer = false;  // --fsdp-double-buffer (or --use-nccl-ub): two persistent units of each
  std::int64_t unit_size = 0;  // --suggested-communication-unit-size, elements; 0: Megatron-FSDP's default
};

// Megatron-FSDP's --data-parallel-sharding-strategy of a sharding: the states it shards, as ZeRO's stages
// (optim_grads_params: parameters; optim_grads: gradients; optim: optimizer states; no_shard: none).
[[nodiscard]] inline const char* megatron_fsdp_strategy(const StateSharding& s) {
  return s.params != Shard::none      ? "optim_grads_params"
         : s.grads != Shard::none     ? "optim_grads"
         : s.optimizer != Shard::none ? "optim"
                                      : "no_shard";
}
// Megatron-FSDP's --megatron-fsdp-main-grads-dtype of a layout's gradient bytes: fp32 (4 B), else bf16.
[[nodiscard]] inline const char* megatron_fsdp_main_grads_dtype(const Precision& p) {
  return p.grad_bytes == 4.0 ? "fp32" : "bf16";
}

struct Layout {
  std::int64_t tp = 1;   // t
  std::int64_t cp = 1;   // c
  std::int64_t pp = 1;   // p
  std::int64_t dp = 1;   // d
  std::int64_t vpp = 1;  // virtual pipeline stages per GPU (interleaved 1F1B)
  std::int64_t mbs = 1;  // b
  std::int64_t gbs = 1;  // global batch in sequences
  std::int64_t seq = 1;  // s
  Recompute recompute = Recompute::none;
  Schedule schedule = Schedule::one_f_one_b;
  bool sequence_parallel = true;
  bool flash_attention = true;
  StateSharding sharding;
  Precision precision;
  Lora lora;
  // PyTorch FSDP keeps this many decoder layers (FSDP units) unsharded at a time: the one computing and the
  // one prefetched (FSDP paper Sec. 3.2 / fsdp-summary); 0 for frameworks without all-gathered parameters.
  std::int64_t fsdp_unit_buffers = 0;
  PipelineSplit split;  // positional initialisers of the fields above stay as they were
  // Mixture of experts (Megatron-LM's MoE parallel folding, megatron/core/parallel_state.py): the routed experts of a
  // layer are split over ep GPUs and each expert over etp (0: etp = tp, arguments.py's default); the t·c·d GPUs of
  // a stage form etp × ep × expert-DP groups, ETP innermost.
  std::int64_t ep = 1;
  std::int64_t etp = 0;
  // Megatron-LM's --moe-token-dispatcher-type: alltoall sends each of a token's k copies to its expert's GPU; flex
  // (DeepEP, HybridEP) sends a token once to each remote node holding one of its experts and fans out on NVLink.
  ExpertDispatcher dispatcher = ExpertDispatcher::alltoall;
  // Tokens the busiest expert GPU receives over the mean (Megatron-LM's --moe-expert-capacity-factor bounds it and
  // drops the rest; dropless routing is priced as balanced, 1).
  double expert_load = 1.0;
  // Megatron-LM's --moe-shared-expert-overlap: the shared expert's first GEMM (and activation) runs on a side stream
  // beside the dispatch all-to-all, its second beside the combine (megatron/core/transformer/moe/token_dispatcher.py
  // MoEAlltoAllTokenDispatcher with set_shared_experts).
  bool shared_expert_overlap = false;
  // Megatron-LM's --mtp-num-layers: D multi-token-prediction modules after the decoder, on the LM head's stage
  // (megatron/core/transformer/multi_token_prediction.py mtp_on_this_rank without a pipeline layout), each a decoder
  // layer of the last layer's kind with its own embedding and hidden norms, eh_proj (2h -> h) and final norm, and a
  // loss over the shared LM head.
  std::int64_t mtp_layers = 0;
  // FP8: the recipe, the framework's library, and whether the weights are kept in FP8 and all-gathered so
  // (Megatron-LM's --fp8-param-gather with the distributed optimizer; torchao's enable_fsdp_float8_all_gather).
  Fp8Recipe fp8 = Fp8Recipe::none;
  Fp8Library fp8_library = Fp8Library::transformer_engine;
  bool fp8_param_gather = false;
  // An FP8 run's first and last decoder layers kept in BF16 (Megatron-LM's --first-last-layers-bf16 with
  // --num-layers-at-start-in-bf16 and --num-layers-at-end-in-bf16; megatron/core/fp8_utils.py
  // is_first_last_bf16_layer, by global layer index); 0 and 0: every layer in FP8.
  std::int64_t bf16_layers_at_start = 0, bf16_layers_at_end = 0;
  // Offloading: the share of the optimizer states (and its step) held and run on the host (Megatron-LM's
  // --optimizer-cpu-offload --optimizer-offload-fraction; DeepSpeed ZeRO-Offload is 1), whether the host copies
  // overlap the CPU step (--overlap-cpu-optimizer-d2h-h2d), and decoder layers whose stored activations go to host
  // memory during forward and come back for backward (--cpu-offloading-num-layers).
  double optimizer_offload = 0.0;
  bool overlap_offload_copies = false;
  std::int64_t activation_offload_layers = 0;
  // Megatron-LM's overlap_p2p_comm (off with --no-overlap-p2p-communication); only the interleaved schedule runs it
  // (throughput.hpp pipeline_sends_overlap).
  bool overlap_p2p_comm = true;
  // Megatron-LM's DDP: the gradient reduction behind the backward (--overlap-grad-reduce) and the distributed
  // optimizer's parameter gather behind the next forward (--overlap-param-gather), as the framework's dp_overlap
  // prices them; off, each runs exposed (throughput.hpp dp_overlap_shares). Frameworks without the switches keep both.
  bool overlap_grad_reduce = true, overlap_param_gather = true;
  // Megatron-LM's --tp-comm-overlap: TransformerEngine's userbuffers pipeline each TP all-gather/reduce-scatter with
  // the GEMM it feeds or follows (needs sequence parallelism; throughput.hpp tp_overlapped_comm_seconds).
  bool tp_comm_overlap = false;
  TpCommBuffers tp_comm_buffers = TpCommBuffers::userbuffers;  // the framework's (FrameworkProfile::tp_comm_buffers)
  // torch.compile of each decoder block (torchtitan's compile.enable): elementwise ops fused by Inductor, priced with
  // the framework's compiled_elementwise_passes.
  bool compile = false;
  // Megatron-LM's precision-aware optimizer: the formats of the gradient buffer, master weights and Adam moments;
  // build_layout sets precision's grad and optimizer bytes from them (memory.hpp model_state_precision).
  OptimizerPrecision optimizer_precision;
  // FSDP1's FlatParameter (the framework's fsdp_flat_parameters): frozen and trainable weights of a unit in one flat
  // tensor, which then takes one gradient of its full size (memory.hpp frozen_weights_take_gradients).
  bool fsdp_flat_parameters = false;
  // PyTorch FSDP's MixedPrecision over an FP32 model: precision is the framework's fsdp_mixed_precision (FP32 shard,
  // BF16 gathers and reductions) instead of its BF16 model's.
  bool fsdp_mixed_precision = false;
  AttentionBackend attention_backend = AttentionBackend::framework;
  CpExchange cp_exchange = CpExchange::p2p;  // the framework's (FrameworkProfile::cp_exchange), or the knob's
  ZeroSettings zero;
  MegatronFsdpSettings megatron_fsdp;
  // Full recompute's layers (RecomputeMethod); uniform 1, every layer on its own, is recompute full's default.
  RecomputeMethod recompute_method = RecomputeMethod::uniform;
  std::int64_t recompute_num_layers = 1;
  // Selective recompute's modules (RecomputeModule bits; Megatron-LM's default, the core attention).
  std::uint8_t recompute_modules = kDefaultRecomputeModules;

  [[nodiscard]] std::int64_t gpus() const { return tp * cp * pp * dp; }
  [[nodiscard]] std::int64_t expert_tp() const { return etp > 0 ? etp : tp; }
  // The expert data-parallel group: the stage's t·c·d GPUs over etp·ep.
  [[nodiscard]] std::int64_t expert_dp() const { return tp * cp * dp / (expert_tp() * ep); }
  [[nodiscard]] std::int64_t microbatches() const { return gbs / (dp * mbs); }  // m, per pipeline
};

// Decoder layers on pipeline stage `stage` (0 ≤ stage < p), summed over its virtual chunks; the split is
// assumed valid (validate_model_split).
[[nodiscard]] std::int64_t stage_layers(const ModelSpec& model, const Layout& layout, std::int64_t stage);
// The decoder layers of stage `stage` that have routed experts (all of stage_layers but DeepSeek-V3's leading
// dense layers; 0 for a dense model).
[[nodiscard]] std::int64_t stage_moe_layers(const ModelSpec& model, const Layout& layout, std::int64_t stage);
// The decoder layers of stage `stage` an FP8 run keeps in BF16 (Layout::bf16_layers_at_start/end), dense and with
// experts; none without FP8.
struct Bf16Layers {
  std::int64_t dense = 0, moe = 0;
  [[nodiscard]] std::int64_t total() const { return dense + moe; }
};
[[nodiscard]] Bf16Layers stage_bf16_layers(const ModelSpec& model, const Layout& layout, std::int64_t stage);
// The layout with FP8 off: what the BF16 layers of an FP8 run store and take.
[[nodiscard]] inline Layout without_fp8(const Layout& l) {
  Layout x = l;
  x.fp8 = Fp8Recipe::none;
  x.fp8_param_gather = false;
  x.bf16_layers_at_start = x.bf16_layers_at_end = 0;
  return x;
}
// Decoder layers of virtual chunk `chunk` (0 ≤ chunk < v) of stage `stage` (transformer_block.py,
// get_num_layers_to_build): stage_layers / v, except that an accounted embedding (loss) takes one layer's place
// in the first chunk of the first stage (the last chunk of the last), which may leave it none.
[[nodiscard]] std::int64_t chunk_layers(const ModelSpec& model, const Layout& layout, std::int64_t stage,
                                        std::int64_t chunk);
// What v (virtual stages per GPU) must divide for the split to interleave: L/p for an even split (counting the
// embedding/loss when accounted), the gcd of the first, last and middle stages' layers for an uneven one.
[[nodiscard]] std::int64_t chunkable_layers(const ModelSpec& model, const Layout& layout);
// The uneven split `rank` tries where p does not divide L: middle stages ceil(L/p) layers, the first and last
// stages the rest (the last, which also holds the LM head, no more than the first), each ≥ 1 and no more than
// a middle stage; nullopt where no such split exists or p < 2. Llama 3 405B: L = 126, p = 16 → 7 + 14×8 + 7.
[[nodiscard]] std::optional<PipelineSplit> balanced_uneven_split(std::int64_t layers, std::int64_t pp);

// Whether selective recompute recomputes module x.
[[nodiscard]] inline bool recomputes(const Layout& l, RecomputeModule x) {
  return l.recompute == Recompute::selective && (l.recompute_modules & static_cast<std::uint8_t>(x)) != 0;
}
// Selective recompute of more than the core attention.
[[nodiscard]] inline bool recomputes_modules(const Layout& l) {
  return l.recompute == Recompute::selective && (l.recompute_modules & ~kDefaultRecomputeModules) != 0;
}
// The modules of a --recompute-modules list (comma- or space-separated Megatron-LM names; throws Error naming one that
// is not priced), and back: their names in RecomputeModule's order, or comma-separated.
[[nodiscard]] std::uint8_t parse_recompute_modules(std::string_view text);
[[nodiscard]] std::vector<std::string_view> recompute_module_names(std::uint8_t modules);
[[nodiscard]] std::string recompute_modules_to_string(std::uint8_t modules);
// Whether recompute_method / recompute_num_layers say anything but every layer on its own (uniform, 1).
[[nodiscard]] inline bool recompute_method_given(const Layout& l) {
  return l.recompute_method != RecomputeMethod::uniform || l.recompute_num_layers != 1;
}
// Full recompute by layers: some of a stage's layers recomputed and the others' activations kept whole (block, every
// N-th layer), or groups of layers checkpointed together (uniform N > 1).
[[nodiscard]] inline bool recompute_by_layers(const Layout& l) {
  return l.recompute == Recompute::full && recompute_method_given(l);
}
// The layout with every layer's activations kept (recompute none): what a recomputed layer re-materialises, and the
// layers full recompute by layers leaves whole.
[[nodiscard]] inline Layout without_recompute(const Layout& l) {
  Layout x = l;
  x.recompute = Recompute::none;
  return x;
}
// The decoder layers of stage `stage` that full recompute checkpoints: all of them (uniform), the first
// recompute_num_layers of each of its model chunks (block, chunk_layers), or ⌊stage_layers / N⌋ (every); 0 without
// full recompute.
[[nodiscard]] std::int64_t recomputed_layers(const ModelSpec& model, const Layout& layout, std::int64_t stage);
// Whether context parallelism (cp > 1) can be priced for the model under the layout's exchange: over sliding-window
// attention only with cp_comm_type a2a or all_gather (Transformer Engine's only ones there).
[[nodiscard]] bool context_parallel_priced(const ModelSpec& model, const Layout& layout);
// torchtitan's per-op checkpointing is priced for the blocks its matmul count was read on (recompute_factors): a
// Llama-style block in BF16 with separate q, k, v projections, a dense MLP and fused attention, without LoRA.
[[nodiscard]] bool op_recompute_priced(const ModelSpec& m, const Layout& l);
// Throws Error naming the first violated constraint of how the model is split: sizes positive, t | a,
// t | k, the pipeline split as Megatron-LM checks it (p | L when even), v | the layers of every stage, 2c | s, and
// recompute op only where op_recompute_priced. Needs no DP size or batch.
void validate_model_split(const ModelSpec& model, const Layout& layout);
// validate_model_split, then the batch: d > 0, gbs a multiple of d·b, interleaving_runs, and the experts' split
// (ep | E, etp | the expert FFN, etp·ep | t·c·d; ep and etp only for a model with experts).
void validate_layout(const ModelSpec& model, const Layout& layout);
// The experts' split and what headroom prices with experts (Megatron-LM's expert parallelism, SP with t > 1, no LoRA,
// no FSDP); ep and etp are refused on a dense model. Part of validate_layout.
void validate_experts(const ModelSpec& model, const Layout& layout);
// The part of validate_experts that no expert split changes (LoRA, FSDP), for searches that vary the split.
void refuse_unpriced_experts(const ModelSpec& model, const Layout& layout);
// What Megatron-LM refuses of selective recompute's modules: mla_up_proj without latent attention, shared_experts with
// the shared expert's overlap, layernorm and moe_act under delayed FP8 scaling. Part of validate_layout.
void validate_recompute_modules(const ModelSpec& model, const Layout& layout);
// Whether an FP8 run's BF16 layers are where they are priced: each count at most a pipeline stage's layers, and within
// the first and last model chunks (validate_bf16_layers' rules, for searches that vary the split); true without them.
[[nodiscard]] bool bf16_layers_priced(const ModelSpec& model, const Layout& layout);
// An FP8 run's BF16 layers (Layout::bf16_layers_at_start/end): FP8 on and not delayed scaling (Transformer Engine's),
// each count at most a pipeline stage's layers, within the first and last model chunks, and not with full recompute by
// layers. Part of validate_layout.
void validate_bf16_layers(const ModelSpec& model, const Layout& layout);
// The part of validate_layout about precision that no split or sharding changes (FP8 with LoRA, FP8 weights without
// FP8), for searches that vary the rest.
void refuse_unpriced_precision(const Layout& layout);
// Whether the framework runs the layout's pipeline schedule: the interleaved 1F1B and the zero-bubble schedules need m
// to be a multiple of p (so m ≥ p, where the (p − 1)/(v·m) bubble holds); the breadth-first one is priced at m ≥ p
// (with fewer, a rank's next chunk waits for the pipeline to fill again, which is not priced).
[[nodiscard]] bool interleaving_runs(const Layout& layout);
// Whether each GPU runs vpp > 1 looped model chunks (chunk j of stage i is virtual stage j·p + i): the interleaved
// 1F1B, the zero-bubble and the breadth-first schedule.
[[nodiscard]] inline bool looped_chunks(const Layout& l) {
  return l.vpp > 1 && (l.schedule == Schedule::interleaved || l.schedule == Schedule::zero_bubble ||
                       l.schedule == Schedule::looped_bfs);
}
// Whether Megatron-core runs the schedule (megatron/core/pipeline_parallel/schedules.py: 1F1B and interleaved 1F1B,
// which vpp names); the others are torch's.
[[nodiscard]] constexpr bool megatron_core_schedule(Schedule s) {
  return s == Schedule::one_f_one_b || s == Schedule::interleaved;
}
// Whether the schedule runs more than one model chunk a rank, looped or in a V (Megatron-LM's interleaved 1F1B, torch's
// zero-bubble and breadth-first schedules).
[[nodiscard]] constexpr bool multi_chunk_schedule(Schedule s) {
  return s == Schedule::interleaved || s == Schedule::zero_bubble || s == Schedule::zbv || s == Schedule::looped_bfs;
}
// Whether the schedule splits each backward into its input-gradient and weight-gradient passes (Qi et al. 2024's
// zero-bubble schedules: torch's ScheduleInterleavedZeroBubble and ScheduleZBVZeroBubble).
[[nodiscard]] constexpr bool splits_backward(Schedule s) { return s == Schedule::zero_bubble || s == Schedule::zbv; }
// Whether each GPU runs more than one model chunk, looped or in a V: a chunk's pipeline sends can overlap the next.
[[nodiscard]] inline bool has_virtual_stages(const Layout& l) {
  return looped_chunks(l) || l.schedule == Schedule::zbv;
}
// The pipeline stage holding the LM head and the loss: the last, or the first under the V-shaped schedule.
[[nodiscard]] inline std::int64_t head_stage(const Layout& l) { return l.schedule == Schedule::zbv ? 0 : l.pp - 1; }
// Multi-token-prediction layers on stage `stage`: all of Layout::mtp_layers on the head's stage, which computes their
// losses over the shared LM head (multi_token_prediction.py mtp_on_this_rank: the last stage without a layout).
[[nodiscard]] inline std::int64_t stage_mtp_layers(const Layout& l, std::int64_t stage) {
  return stage == head_stage(l) ? l.mtp_layers : 0;
}

[[nodiscard]] std::string_view to_string(Recompute r);
[[nodiscard]] std::string_view to_string(RecomputeMethod r);
[[nodiscard]] std::string_view to_string(Schedule s);
[[nodiscard]] std::string_view to_string(Shard s);
[[nodiscard]] std::string_view to_string(ExpertDispatcher d);
[[nodiscard]] std::string_view to_string(Fp8Recipe r);         // "none", "delayed", "tensorwise"
[[nodiscard]] std::string_view to_string(Fp8Library x);        // "transformer_engine", "torchao"
[[nodiscard]] std::string_view to_string(AttentionBackend x);  // "framework", "cudnn", "flash2"
// A device curve's backend by its name ("cudnn", "flash2"); nullopt for any other.
[[nodiscard]] std::optional<AttentionBackend> attention_backend_from_string(std::string_view name);
// "p2p", "all_gather", "a2a" (Transformer Engine's names), "alltoall", "allgather" (PyTorch's); parse_cp_exchange is
// its inverse (nullopt for another name).
[[nodiscard]] std::string_view to_string(CpExchange x);
[[nodiscard]] std::optional<CpExchange> parse_cp_exchange(std::string_view name);
// Whether `gpus` is whole nodes of the cluster: at most one node, or a multiple of gpus_per_node (schedulers allocate
// whole nodes, launchers start the same ranks on each). An assumed cluster's nodes are a guess: any count passes.
[[nodiscard]] bool whole_nodes(std::int64_t gpus, const ClusterSpec& cluster);
// Throws Error naming the count, the cluster and what would be whole nodes.
void require_whole_nodes(std::int64_t gpus, const ClusterSpec& cluster);
// What the layout needs of the cluster beyond validate_layout: whole nodes (require_whole_nodes), an FP8 peak on the
// GPU (A100 and MI250X have none), host links on the cluster for offloading, ZeRO++'s secondary shard over a node's
// DP ranks, and under the flex dispatcher an EP group whose nodes the model's routing groups divide or are divided by
// (throughput.hpp group_routing_priced); throws Error naming what is missing.
// Part of every priced estimate.
void validate_on_cluster(const ModelSpec& model, const Layout& layout, const ClusterSpec& cluster);

}  // namespace headroom
