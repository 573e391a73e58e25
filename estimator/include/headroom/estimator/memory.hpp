// Per-GPU memory of a training job under 4D parallelism (DP × TP × PP × CP), per pipeline stage.
// Formulas follow the 4D paper ("Accelerating Large Language Model Training with 4D Parallelism and Memory Consumption
// Estimator"), equation numbers cited on each function; extensions beyond the paper (SP off, no FlashAttention,
// recompute, interleaving, sharding, GPT-2 style models) say where their terms come from. All results are bytes unless
// named _gib.
#pragma once

#include <cstdint>
#include <vector>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/core/units.hpp"

namespace headroom {

// ---- parameter counts (elements) ----
[[nodiscard]] double attention_parameters_per_layer(const ModelSpec& m);
[[nodiscard]] double ffn_parameters_per_layer(const ModelSpec& m);
[[nodiscard]] double norm_parameters_per_layer(const ModelSpec& m);
[[nodiscard]] double layer_parameters(const ModelSpec& m);
[[nodiscard]] double embedding_parameters(const ModelSpec& m);
[[nodiscard]] double parameter_count(const ModelSpec& m);  // all of them, every expert included
// Parameters one token uses: moe_router_topk of the routed experts (equal to parameter_count for a dense model).
[[nodiscard]] double active_parameter_count(const ModelSpec& m);
// One multi-token-prediction module: a decoder layer of the last layer's kind (mtp_layer_has_experts), its eh_proj
// (2h x h) and three norms (embedding, hidden and final); embedding and LM head are the main model's.
[[nodiscard]] double mtp_module_parameters(const ModelSpec& m);
// Whether a multi-token-prediction layer has routed experts: the model's last layer does (training.py
// last_layer_is_moe, theoretical_memory_usage.py mtp_layer_is_moe).
[[nodiscard]] bool mtp_layer_has_experts(const ModelSpec& m);
// The checkpoint's multi-token-prediction modules (ModelSpec::mtp_layers, HF num_nextn_predict_layers), not in
// parameter_count: trained only where the layout asks for them (Layout::mtp_layers).
[[nodiscard]] double mtp_parameters(const ModelSpec& m);
// One multi-token-prediction module's parameters one GPU holds: its layer split as the decoder's (its routed experts
// over ep and etp), eh_proj column-parallel over t, the norms whole.
[[nodiscard]] double mtp_module_parameters_per_gpu(const ModelSpec& m, const Layout& l);
// Mixture of experts: one routed expert's FFN, the shared expert, the router (and shared gate), a whole MoE layer.
[[nodiscard]] double expert_ffn_parameters(const ModelSpec& m);
[[nodiscard]] double shared_expert_parameters(const ModelSpec& m);
[[nodiscard]] double router_parameters(const ModelSpec& m);
[[nodiscard]] double moe_layer_parameters(const ModelSpec& m);
// The routed experts of one MoE layer one GPU holds (E/ep experts, each split over etp), and of stage `stage`.
[[nodiscard]] double expert_parameters_per_gpu(const ModelSpec& m, const Layout& l);
[[nodiscard]] double stage_expert_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
// Parameters one GPU of pipeline stage `stage` holds after TP sharding (elements).
[[nodiscard]] double stage_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
// Of those, the decoder layers' (all but the embedding, final norm and LM head).
[[nodiscard]] double stage_decoder_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
// What the layout's shape (t, p, v, the split, ep, etp) fixes of stage `stage`, whatever its micro-batch, schedule,
// sharding, recompute or SP: counted once per shape where a search prices many layouts of it.
struct StageCounts {
  std::int64_t stage = 0;
  std::int64_t layers = 0, moe_layers = 0;  // stage_layers, stage_moe_layers
  double params = 0;                        // stage_parameters_per_gpu
  double experts = 0;                       // stage_expert_parameters_per_gpu
  Bf16Layers bf16;                          // stage_bf16_layers
};
[[nodiscard]] StageCounts stage_counts(const ModelSpec& m, const Layout& l, std::int64_t stage);

// ---- FP8 (Layout::fp8) ----
// The weights of one decoder layer's linear layers one GPU holds (what FP8 GEMMs read): the attention projections,
// the FFN or shared expert and the GPU's routed experts; not norms, biases, router, embedding or LM head (BF16).
[[nodiscard]] double linear_weight_parameters_per_gpu(const ModelSpec& m, const Layout& l, bool experts);
// The same summed over the decoder layers of stage `stage`.
[[nodiscard]] double stage_linear_weight_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
// Transformer Engine's FP8 copy and transpose of each such weight, cached from the first micro-batch to the end of
// the step (megatron/core/extensions/transformer_engine.py passes is_first_microbatch): 2 B per weight. None with
// fp8_param_gather (the weights are FP8 then: 1 B and its transpose, the 2 B of BF16) and none under torchao
// (float8_linear.py casts each micro-batch and keeps nothing).
[[nodiscard]] double fp8_weight_copy_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage);
// Transformer Engine's per-tensor scaling state of those GEMMs: input, weight, output, output gradient and input
// gradient of each weight GEMM, each an FP32 scale, its inverse and (delayed scaling) an amax history of Megatron-LM's
// default length 1; none under torchao.
[[nodiscard]] double fp8_scaling_state_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage);

// ---- offloading (Layout::optimizer_offload, Layout::activation_offload_layers) ----
// What one GPU's offloaded optimizer keeps in host memory: the states' share (optimizer_bytes per parameter) plus the
// FP32 gradient it is sent (Megatron-LM's HybridDeviceOptimizer, pinned).
[[nodiscard]] double host_optimizer_bytes(const Layout& l, double optimizer_shard_params);
// The activations of activation_offload_layers decoder layers (one micro-batch each), moved to host memory.
[[nodiscard]] double offloaded_activation_bytes(const ModelSpec& m, const Layout& l);

// ---- model states (bytes) ----
// Bytes of one element of a storage format (fp8: Transformer Engine keeps the moment in uint8 with a scale per tensor).
[[nodiscard]] double dtype_bytes(Dtype t);
// Bytes per parameter of the gradient buffer, the main gradients DP reduces (megatron/core/distributed/
// param_and_grad_buffer.py: FP32 with accumulate_allreduce_grads_in_fp32, else the weights' format; arguments.py sets
// it for BF16 weights unless --grad-reduce-in-bf16 or --main-grads-dtype bf16, and for FP16 ones when given).
[[nodiscard]] double grad_buffer_bytes(const OptimizerPrecision& o, double weight_bytes);
// Bytes per parameter of the master weights (megatron/core/optimizer/distrib_optimizer.py): --main-params-dtype's,
// or with the precision-aware optimizer on BF16 weights the 16-bit remainder of the FP32 master weight
// (store_param_remainders, Megatron-LM's default with Transformer Engine 2.1+); an FP8 recipe other than delayed
// keeps FP32 master weights outside Transformer Engine (use_precision_aware_optimizer_no_fp8_or_ds_fp8).
[[nodiscard]] double main_param_bytes(const OptimizerPrecision& o, double weight_bytes, Fp8Recipe fp8);
// Bytes per parameter of the FP32 copy of FP16 gradients the optimizer's step takes (--fp16 without
// --accumulate-allreduce-grads-in-fp32), sharded as the optimizer's states; 0 otherwise.
[[nodiscard]] double main_grad_copy_bytes(const OptimizerPrecision& o, double weight_bytes);
// Bytes per parameter of Adam's two moments, exp_avg and exp_avg_sq, in their formats.
[[nodiscard]] double adam_moment_bytes(const OptimizerPrecision& o);
// The layout's bytes per parameter of weights, gradients and optimizer states: the framework's with no
// precision-aware setting given, else the gradient buffer and master weights plus Adam's moments above.
[[nodiscard]] Precision model_state_precision(const OptimizerPrecision& o, const Precision& framework, Fp8Recipe fp8);
// Size of the group a state is sharded over, given how the DP×CP group is placed on nodes.
[[nodiscard]] double shard_divisor(Shard shard, const Layout& l, std::int64_t gpus_per_node);
// The same over the expert data-parallel group (routed experts' states).
[[nodiscard]] double expert_shard_divisor(Shard shard, const Layout& l, std::int64_t gpus_per_node);

// ---- PyTorch FSDP (FSDP1 flat parameters; Layout::fsdp_unit_buffers > 0) ----
// The step of an FSDP run peaks at one of two moments (zero_grad(set_to_none) frees gradients between steps):
// `activations`: the loss, every checkpoint stored, no gradient yet; `gradients`: the last decoder unit's
// backward, every sharded gradient allocated, checkpoints freed, the unit buffers of fsdp_unit_buffers live.
// Frameworks without all-gathered parameters (Megatron) have one moment: the 4D paper's Eq. 18.
enum class StepMoment { activations, gradients };
[[nodiscard]] bool fsdp_step_model(const Layout& l);  // fsdp_unit_buffers > 0
// FSDP actually all-gathers: parameters sharded and a DP×CP group > 1 (FSDP1 runs NO_SHARD on one rank).
[[nodiscard]] bool fsdp_gathers(const Layout& l);
// Whether LoRA's frozen decoder weights hold gradients at the end of backward: only under FSDP1's flat parameters on a
// DP×CP group > 1 (see memory.cpp).
[[nodiscard]] bool frozen_weights_take_gradients(const Layout& l);
// The parameters of a stage whose gradients a GPU computes and reduces over DP (its TP share, before DP sharding): all
// of them in full training; under LoRA the adapters, and the decoder layers' whole flat parameters besides where frozen
// weights take gradients (the root unit, frozen, takes none).
[[nodiscard]] double gradient_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
// One decoder layer as FSDP unshards it (TP-sharded, adapters included), bytes.
[[nodiscard]] double fsdp_unit_bytes(const ModelSpec& m, const Layout& l);
// The unit-sized buffers live at the gradients moment: Layout::fsdp_unit_buffers × fsdp_unit_bytes, or 0 when
// FSDP does not all-gather. (FSDP1: the computing and prefetched units' parameters, the computing unit's
// unsharded gradient and the per-weight gradients it is gathered from; fitted, see mtsl.hpp.)
[[nodiscard]] double fsdp_unit_buffer_bytes(const ModelSpec& m, const Layout& l);
// The root unit (the stage's parameters outside the decoder layers: embedding, final norm, LM head), whole:
// FSDP1 does not reshard the root after forward, so it stays unsharded through backward. 0 when not gathering.
[[nodiscard]] double fsdp_root_unit_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage);

// ---- DeepSpeed ZeRO (Layout::zero.deepspeed) ----
// The gradient buckets of ZeRO-2 and ZeRO-3, bytes per GPU (0 for stages 0 and 1 and other frameworks).
[[nodiscard]] double zero_gradient_bucket_bytes(const Layout& l);
// ZeRO++'s secondary shard (hpZ) of a stage's parameters per GPU: the stage's over the node's DP ranks; 0 without.
[[nodiscard]] double zero_hpz_secondary_parameters(const ClusterSpec& c, const Layout& l, double stage_params);
// ZeRO-3's parameters gathered when the forward turns to the backward (the stage's peak): the trailing layers and LM
// head that stage3_max_reuse_distance keeps and what is prefetched; parameters per GPU, 0 below stage 3.
[[nodiscard]] double zero3_gathered_parameters(const ModelSpec& m, const Layout& l, std::int64_t stage);

// ---- Megatron-FSDP (Layout::megatron_fsdp) ----
// Decoder-layer units held whole at the start of the backward, the stage's peak (every activation still stored):
// the gathered units (the one computing and those prefetched; the sharding's parameters sharded) and the units'
// unsharded gradients (its gradients sharded), in units of the stage's mean decoder layer. 0 and 0 without
// Megatron-FSDP or on a DP×CP group of one.
struct MegatronFsdpUnits {
  double gathered = 0, gradients = 0;
  double layer = 0;         // the stage's mean decoder layer, parameters per GPU (0 where nothing is held)
  std::int64_t layers = 0;  // the stage's decoder layers (0 where nothing is held)
};
[[nodiscard]] MegatronFsdpUnits megatron_fsdp_units(const ModelSpec& m, const Layout& l, std::int64_t stage);
// Those units in bytes, with the LM head on its stage (no unit: gathered for the loss, its gradient the backward's
// first): gathered in the weights' format (FP8 linear weights with fp8_param_gather), gradients in the gradients'.
struct MegatronFsdpBufferBytes {
  double params = 0, grads = 0;
};
[[nodiscard]] MegatronFsdpBufferBytes megatron_fsdp_buffer_bytes(const ModelSpec& m, const Layout& l,
                                                                 std::int64_t stage);

// ---- activations (bytes) ----
[[nodiscard]] double activation_bytes_per_layer(const ModelSpec& m, const Layout& l);
[[nodiscard]] double moe_activation_bytes_per_layer(const ModelSpec& m, const Layout& l);  // a layer with experts
// torchtitan's per-op checkpointing: what a Llama block keeps, in units of s·b·h/(t·c) bytes (memory.cpp).
[[nodiscard]] double op_saved_units(const ModelSpec& m, const Layout& l);
// Bytes a recomputed layer adds while its backward runs (full: the whole layer; op: what it did not keep; else 0).
[[nodiscard]] double rematerialised_layer_bytes(const ModelSpec& m, const Layout& l, bool experts);
[[nodiscard]] double layers_in_flight(const ModelSpec& m, const Layout& l,
                                      std::int64_t stage);  // layer-micro-batches held
[[nodiscard]] double microbatches_in_flight(const Layout& l, std::int64_t stage);
[[nodiscard]] double embedding_activation_bytes(const ModelSpec& m, const Layout& l);  // per micro-batch
[[nodiscard]] double lm_head_activation_bytes(const ModelSpec& m, const Layout& l);    // per micro-batch
// One multi-token-prediction layer's stored activations per micro-batch, without its head's (memory.cpp).
[[nodiscard]] double mtp_layer_activation_bytes(const ModelSpec& m, const Layout& l);
[[nodiscard]] double stage_activation_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage);
[[nodiscard]] double stage_activation_bytes(const ModelSpec& m, const Layout& l, const StageCounts& n);

// ---- the paper's headline number ----
// Eq. 18 for the first pipeline stage; with p = 1 the one stage holds the embedding and the LM head.
[[nodiscard]] double paper_total_bytes(const ModelSpec& m, const Layout& l);

struct StageMemory {
  std::int64_t stage = 0;
  StepMoment moment = StepMoment::activations;  // FSDP: the moment this breakdown is taken at
  double params = 0;                            // with LoRA: frozen base + adapters; plus FSDP's unsharded-unit buffers
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double residual = 0;
  double fp8 = 0;   // FP8 weight copies and scaling state (Transformer Engine), included in params
  double host = 0;  // host memory the stage's GPU uses for offloaded states and activations (not in total)
  [[nodiscard]] double total() const { return params + grads + optimizer + activations + residual; }
};

// The larger of the moments (FSDP), else the one breakdown.
[[nodiscard]] StageMemory stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                       const ResidualModel& r, std::int64_t stage);
[[nodiscard]] StageMemory stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                       const ResidualModel& r, const StageCounts& n);
// One moment; for frameworks with one moment both give stage_memory's breakdown.
[[nodiscard]] StageMemory stage_memory_at(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                          const ResidualModel& r, std::int64_t stage, StepMoment moment);

struct MemoryEstimate {
  std::vector<StageMemory> stages;
  double paper_total_bytes = 0;
  std::int64_t peak_stage = 0;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  double margin_bytes = 0;  // capacity - peak; negative when it does not fit
  [[nodiscard]] bool fits() const { return margin_bytes >= 0; }
};

// Every stage, the paper's number, the peak and the verdict against the GPU's usable memory. Throws Error when a
// stage holds more than kMaxByteCount bytes (units.hpp), which no output could report.
[[nodiscard]] MemoryEstimate estimate_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                             const ResidualModel& r);

// The peak alone, without allocating: the first or the last stage always binds (middle stages hold
// fewer micro-batches than the first and neither embedding nor head).
[[nodiscard]] double peak_memory_bytes(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                       const ResidualModel& r);
// The stages a pipeline's peak memory and step time depend on, the middle ones being alike: the first, the second
// (stage min(1, p − 1)) and the last, counted once for every layout of a shape. Under a layer layout the middle stages
// differ: `second` is the one with the most decoder layers, and the peak is taken over every stage.
struct PipelineStageCounts {
  StageCounts first, second, last;
};
[[nodiscard]] PipelineStageCounts pipeline_stage_counts(const ModelSpec& m, const Layout& l);
[[nodiscard]] double peak_memory_bytes(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                       const ResidualModel& r, const PipelineStageCounts& n);

}  // namespace headroom
