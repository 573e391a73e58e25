// Step time of one layout: compute + exposed communication + pipeline bubble, per pipeline stage, the slowest
// stage setting the pace. Compute is FLOPs (flops.hpp) over peak × an efficiency that depends on the GEMM shape or
// attention length; communication is volume over an alpha-beta link chosen from where the group's ranks sit
// (Megatron-LM rank order: TP innermost, then CP, DP, PP); DP/FSDP traffic uses the sharding volumes of sharding.hpp
// (PaRO). The coefficients the physics does not fix, and how they are resolved for a cluster, are
// perf_coefficients.hpp's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/core/collectives.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/perf_coefficients.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/uncertainty.hpp"

namespace headroom {

// Ranks per node of a group whose members are `stride` ranks apart (TP stride 1, CP stride t, DP stride t·c,
// PP stride t·c·d) and which has `size` members: how many of them share a node.
[[nodiscard]] std::int64_t members_per_node(std::int64_t stride, std::int64_t size, std::int64_t gpus_per_node);

// PaRO's group size M for the DP×CP group (its members on one node, TP innermost), lowered until it divides
// the group: the scope of 'intra' (I) sharding and of the intra-group collective phases.
[[nodiscard]] std::int64_t sharding_group_size(const Layout& l, std::int64_t gpus_per_node);
// ZeRO++'s hpZ as PaRO prices it is a secondary shard over the DP ranks a node holds (PaRO's group): true where the
// layout asks hpZ of another size, which validate_on_cluster refuses and rank skips.
[[nodiscard]] bool zero_hpz_off_node(const Layout& l, std::int64_t gpus_per_node);
// The same for any group laid out with `stride` GPUs of other groups innermost (routed experts: etp·ep, over the
// expert data-parallel group).
[[nodiscard]] std::int64_t sharding_group_size(std::int64_t stride, std::int64_t group, std::int64_t gpus_per_node);

// Tile occupancy: each GEMM dimension d scales the efficiency by d/(d + half).
[[nodiscard]] double gemm_shape_factor(double m, double n, double k, double half_dim);
// Wave quantization (NVIDIA, "Matrix Multiplication Background", Sec. "Wave Quantization"): the
// ⌈m/tile⌉·⌈n/tile⌉ output tiles run in waves of `units` SMs or CUs and the last, partial wave idles the
// rest: tiles / (⌈tiles/units⌉·units). 1 when units ≤ 0.
[[nodiscard]] double gemm_wave_factor(double m, double n, double units, double tile);
// GEMM efficiency for a shape, in BF16 or FP8: on a GPU priced by its kernel curves, the curve's fraction at the
// shape × the stack's fraction; otherwise the large-GEMM efficiency × shape factor × wave factor (a calibration
// profile sets the wave units; the datasheet defaults leave the wave term off).
[[nodiscard]] double gemm_efficiency(const PerfContext& p, const GemmShape& g, bool fp8 = false);
// Attention efficiency at q query tokens per GPU: e·q/(q + half), from the device curve of the head dimension where
// one prices it.
[[nodiscard]] double attention_efficiency(const PerfContext& p, const Layout& l, double head_dim, double query_tokens);

// Ring all-gather or reduce-scatter of a `bytes` tensor over n ranks (Patarasuk & Yuan 2009; the nccl-tests
// bus-bandwidth factor (n − 1)/n): (n − 1)·α + bytes·(n − 1)/n / bandwidth.
[[nodiscard]] double ring_gather_seconds(double bytes, std::int64_t n, const Link& link);
// The same flat ring over n ranks on nodes of m of them (m < n, m dividing n): of a step's n transfers n/m cross
// nodes, spread over the m NICs of a node as NCCL's channels do (PaRO Table 3's ring volumes, ZeRO-3 A-G row:
// g·(n − 1)/n inter-node and (n − g)·(n − 1)/n intra, g = n/m, per n GPUs); the two parts add, as for DP.
[[nodiscard]] double ring_gather_across_nodes_seconds(double bytes, std::int64_t n, std::int64_t m, const Link& intra,
                                                      const Link& inter);
// One collective as nccl-tests sizes it (`bytes`: all-gather's output, reduce-scatter's input, all-reduce's buffer)
// over n ranks on nodes of m of them, priced as the estimator prices rings: all-gather and reduce-scatter one ring,
// all-reduce a reduce-scatter then an all-gather (Patarasuk & Yuan 2009); across nodes (m < n) the flat ring above.
// All-to-all and send/recv are not rings: Error.
[[nodiscard]] double ring_collective_seconds(Collective op, double bytes, std::int64_t n, std::int64_t m,
                                             const Link& intra, const Link& inter);

// One layer's CP traffic left exposed per pass (Layout::cp_exchange), given the layer's attention forward (its backward
// is kAttentionBackwardRatio of it), of which `overlap` can hide traffic, and the traffic's times: kv_s to pass the
// other c − 1 ranks' K and V to a GPU once (BF16), kv2_s for twice those bytes, a2a_s for the all-to-alls of a GPU's
// Q, K, V and attention output (a pass's: forward Q, K, V then the output, backward dO then dQ, dK, dV). Transformer
// Engine (Megatron-LM's cp_comm_type, transformer_config.py): p2p, K and V forward, K, V and dK, dV in BF16 backward,
// each step behind the attention block it feeds; all_gather, K and V gathered before attention, "not async, and cannot
// be overlapped", backward gathering them again and reduce- scattering dK, dV (context_parallel.py
// AttnFuncWithCPAndKVAllGather); a2a, Q, K, V to heads before attention and the output back after it, backward dO and
// dQ, dK, dV, all exposed. PyTorch (torch/distributed/tensor/experimental/ _attention.py _templated_ring_attention and
// its backward): the gradients of K and V go round in FP32
// (_cp_options.convert_to_f32; dkv_rotater is always the permute ring), and with the allgather rotater
// (_AllGatherRotater, torch's and torchtitan's default) K and V arrive in one all-gather at the first step, which only
// that step's attention (1/c of it) hides: the next step waits for it, forward and backward alike; the FP32 gradients
// then pass behind the other c − 1 steps. The backward's repeat of a recomputed forward is the caller's.
struct CpTraffic {
  double kv_s = 0, kv2_s = 0, a2a_s = 0;
};
struct CpExposed {
  double forward = 0, backward = 0;
};
[[nodiscard]] CpExposed exposed_cp_seconds(const Layout& l, const CpTraffic& t, double attention_f, double overlap);

// TP communication pipelined with its GEMMs (Megatron-LM's --tp-comm-overlap): TransformerEngine's userbuffers
// split each all-gather/reduce-scatter and its GEMM into t chunks (transformer_engine/pytorch/module/base.py
// initialize_ub: ring_exchange with num_splits = t, pipeline, bulk), so one chunk of the shorter of the two and
// whatever the longer exceeds stay exposed: max(0, comm − gemm) + min(comm, gemm)/t.
[[nodiscard]] double tp_overlapped_comm_seconds(double comm, double gemm, std::int64_t tp);

// Core attention without FlashAttention as Megatron-LM's unfused CoreAttention runs it (megatron/core/transformer/
// dot_product_attention.py: baddbmm QKᵀ, fused scale-mask-softmax, dropout, bmm with V), one micro-batch and layer,
// over this GPU's E = b·(a/t)·(s/c)·s scores: each batched GEMM (2·E·d FLOPs, d = h/a, the whole s² matrix: the
// causal mask saves nothing) at the roofline of its FLOPs and the 2·E bytes of scores it writes or reads; softmax
// and dropout as HBM passes over the scores (forward read + write 4 B, dropout 5 with its mask; backward 6 and 5).
struct AttentionSeconds {
  double forward = 0, backward = 0;
};
[[nodiscard]] AttentionSeconds unfused_attention_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);

// One layer's compute for one micro-batch and one pass (communication is added by the caller, per level).
struct LayerCompute {
  double gemm = 0;         // weight GEMMs (LoRA adapters included), recompute included in the backward
  double attention = 0;    // core attention
  double elementwise = 0;  // HBM passes: norms, activation, RoPE, residual adds
  double overhead = 0;     // fixed per-layer cost (launches, synchronisation)
  [[nodiscard]] double total() const { return gemm + attention + elementwise + overhead; }
};
struct LayerPasses {
  LayerCompute forward, backward;
};
// Whether sequence parallelism all-gathers the linear layers' inputs (forward) and output gradients (backward) in
// FP8: Transformer Engine quantizes before the gather with delayed scaling (transformer_engine/pytorch/distributed.py
// gather_along_first_dim: Float8Quantizer), not with current scaling, which needs the gathered tensor's amax;
// torchtitan's Float8ColwiseParallel gathers FP8 (torchtitan docs/float8.md).
[[nodiscard]] bool fp8_sequence_gathers(const Layout& l);
// FP8 casts of one layer and micro-batch on one GPU (elements): the linear layers' inputs (those a norm feeds, whose
// cast Transformer Engine fuses into the norm with delayed scaling, and the others), their output gradients, and
// the weights read.
struct Fp8CastElements {
  double inputs_after_norm = 0, inputs = 0, grad_outputs = 0, weights = 0;
};
[[nodiscard]] Fp8CastElements fp8_cast_elements(const ModelSpec& m, const Layout& l, bool experts);
// HBM bytes those casts move per micro-batch (forward, backward); fp8_weight_cast_bytes_per_step adds the weight
// casts Transformer Engine caches from the first micro-batch. Each cast reads BF16 (2 B) and writes FP8 row- and
// column-wise (2 B); current (tensorwise) scaling reads it once more for the amax (2 B) unless it is fused with the op
// before (torchao/float8/roofline_utils.py's traffic model). Transformer Engine, delayed: a norm writes its output in
// FP8 itself (0), other inputs and output gradients 4 B, weights 4 B per step; tensorwise: 6 B for all of them. torchao
// (float8_linear.py: casts the BF16 input and weight it saved again in backward): forward inputs 4 B and weights 6 B,
// backward output gradients 4 B, weights 6 B and inputs 6 B, every micro-batch.
struct Fp8CastBytes {
  double forward = 0, backward = 0;
};
[[nodiscard]] Fp8CastBytes fp8_cast_bytes(const ModelSpec& m, const Layout& l, bool experts);
// Transformer Engine's once-a-step casts of stage `stage`'s linear weights (none with FP8 weights, which the optimizer
// writes, and none under torchao, which casts them every micro-batch in fp8_cast_bytes).
[[nodiscard]] double fp8_weight_cast_bytes_per_step(const ModelSpec& m, const Layout& l, std::int64_t stage);

// Narayanan et al. 2021 Sec. 3.2 (backward = 2× forward GEMM FLOPs; recompute repeats the forward), Dao 2023
// (attention backward 2.5× forward), over the efficiencies above; frozen LoRA base weights skip dW (thesis Sec. 3.1.2).
[[nodiscard]] LayerPasses layer_compute_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);
// The same for a layer with routed experts: its FFN is the router, the shared expert and the grouped expert GEMMs
// over routed_copies_per_gpu token copies, plus permuting them (HBM); the all-to-alls are expert_dispatch_seconds.
[[nodiscard]] LayerPasses moe_layer_compute_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);
// Token copies the busiest GPU's experts process per micro-batch and layer: k·s·b/(t·c)·etp·expert_load.
[[nodiscard]] double routed_copies_per_gpu(const ModelSpec& m, const Layout& l);
// C(total − there, draws)/C(total, draws): the chance that `draws` items drawn without replacement from `total` miss
// `there` given ones (the hypergeometric zero; a fractional count of draws through log-gamma).
[[nodiscard]] double none_drawn(double total, double there, double draws);
// The nodes the layout's EP group spans (its etp-strided members, members_per_node of them in a node).
[[nodiscard]] double expert_nodes(const Layout& l, std::int64_t gpus_per_node);
// Whether expected_remote_nodes prices the model's routing over `nodes` nodes: without group-limited routing always;
// with it where the groups and the nodes divide one another (groups of whole nodes, or nodes of whole groups).
[[nodiscard]] bool group_routing_priced(const ModelSpec& m, double nodes);
// The expected other nodes a token's k experts sit on, E/n experts on each of n nodes in order. Experts chosen
// uniformly: (n − 1)·(1 − C(E − E/n, k)/C(E, k)). Group-limited routing (DeepSeek-V3 report Sec. 2.1.2: a token sent
// to at most M nodes), each of the M chosen groups taken uniformly of the G and holding k/M of the token's experts: a
// node of G/n whole groups is reached unless none is chosen, 1 − C(G − G/n, M)/C(G, M); a node holding E/n experts of
// a group spread over several is reached with its group (M/G) and one of the group's k/M there,
// 1 − C(E/G − E/n, k/M)/C(E/G, k/M). An Error where group_routing_priced is false.
[[nodiscard]] double expected_remote_nodes(const ModelSpec& m, double nodes);
// One all-to-all (dispatch or combine) of a layer with experts, one micro-batch and pass, on one GPU's links.
[[nodiscard]] double expert_dispatch_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);

// The ends of the pipeline per micro-batch: embedding lookup on the first stage (each pass); LM head GEMM and
// the FP32 loss over s·b·v/(t·c) logits on the last (loss split evenly between the passes).
struct PipelineEnds {
  double embedding_s = 0;  // per pass
  double head_forward_s = 0;
  double head_backward_s = 0;
  double loss_s = 0;  // per pass
  // One multi-token-prediction module beside its decoder layer (Layout::mtp_layers; 0 without): eh_proj's forward
  // GEMM, its three norms' forward HBM passes, and its TP traffic forward and backward.
  double mtp_proj_gemm_s = 0, mtp_norms_s = 0, mtp_proj_tp_forward_s = 0, mtp_proj_tp_backward_s = 0;
};
[[nodiscard]] PipelineEnds pipeline_end_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);
// One BF16 s·b·h activation tensor per GPU, SP- and CP-sharded: 2·s·b·h/(t·c) bytes (Korthikanti et al. 2023,
// Sec. 4.2.2); what crosses a pipeline boundary and what an elementwise pass reads.
[[nodiscard]] double activation_tensor_bytes(const ModelSpec& m, const Layout& l);
// The ops sequence parallelism splits along the sequence (Korthikanti et al. 2023 Sec. 4.2.2: the norms and the
// residual adds with their dropouts), as forward HBM passes over the layer's h-wide BF16 activation: each norm reads
// its input and writes its output (2), each of the two residual adds reads two tensors and writes one (3); 10 a
// layer, 14 with Gemma 2's four norms.
[[nodiscard]] double norm_residual_passes(const ModelSpec& m);
// Without SP (t > 1) every TP rank runs those ops on all s·b/c tokens, not s·b/(t·c): the forward bytes they move
// beyond what SP leaves a GPU, norm_residual_passes × 2·s·b·h/c × (t − 1)/t; 0 with SP or t = 1. Backward moves
// twice the forward's, as every elementwise pass (the norm's backward reads x and dy and writes dx, the residual's
// gradient is added to the branch's).
[[nodiscard]] double unsplit_norm_residual_bytes(const ModelSpec& m, const Layout& l);
// The K and V one context-parallel ring step passes on (forward): 2·(s/c)·b·h·(k/a) BF16 values, heads split over
// t (Liu et al. 2023 ring attention; backward passes K, V, dK and dV, twice this).
[[nodiscard]] double cp_kv_bytes(const ModelSpec& m, const Layout& l);
// Adam's step over `shard_params` parameters, HBM-bound: read the gradient, master weight, m and v, write the
// master weight, m, v and the BF16 weight (Precision's byte counts).
[[nodiscard]] double optimizer_step_seconds(const PerfContext& p, const Layout& l, double shard_params);
// The offloaded share of that step (Layout::optimizer_offload; Megatron-LM's HybridDeviceOptimizer): the FP32
// gradients to the host and the updated FP32 parameters back over the GPU's host link (4 B each), and a CPU Adam step
// streaming 28 B per parameter (gradient, parameter, m, v read; parameter, m, v written) through the node's DRAM for
// all of its GPUs; the copies and the CPU step add, or overlap (--overlap-cpu-optimizer-d2h-h2d).
[[nodiscard]] double offloaded_optimizer_seconds(const PerfContext& p, const Layout& l, double shard_params);
// Exposed seconds of one pipeline send of a chunk's s·b·h/(t·c) BF16 activations (or their gradient) per micro-batch
// and pass (Narayanan et al. 2021 Sec. 4.1, scatter/gather), on NVLink when two adjacent stages share a node,
// else the network, less the pp_overlap the framework hides; 0 with p = 1.
[[nodiscard]] double pipeline_send_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l);
// Whether a stage's pipeline sends run behind its next pass instead of holding it: Megatron-LM overlaps P2P with the
// interleaved schedule's chunks (overlap_p2p_comm, on unless --no-overlap-p2p-communication) and forces it off
// otherwise (megatron/training/arguments.py, "non-interleaved schedule does not support overlapping p2p
// communication"); Layout::overlap_p2p_comm. The zero-bubble schedule's looped chunks are priced alike (torch's
// pipelining runs it and the interleaved 1F1B on one runtime). Overlapped, a chunk's send is exposed only by what it
// takes beyond a chunk's pass.
[[nodiscard]] bool pipeline_sends_overlap(const Layout& l);
// The shares of a pass that hide the DP parameter gathers and the gradient reductions: the framework's dp_overlap for
// both, except where DeepSpeed runs one of them on the compute stream (Layout::zero) or Megatron-LM's switch of it is
// off (Layout::overlap_grad_reduce, overlap_param_gather): 0 for it.
struct DpOverlap {
  double gathers = 0, reductions = 0;
};
[[nodiscard]] DpOverlap dp_overlap_shares(const PerfContext& p, const Layout& l);

// DP/FSDP traffic of one pipeline stage per GPU, after TP and before DP sharding: the parameter all-gathers
// move every stored weight (frozen base and LoRA adapters alike), the gradient reductions only what trains
// (the adapters under LoRA, everything otherwise). Thesis Sec. 3.1.2–3.3; PaRO Sec. 3.1 (Ψ and Ψ').
struct DpParameters {
  double gathered = 0;   // Ψ: all-gathered by P-sharding strategies (FSDP), before forward and backward
  double trainable = 0;  // Ψ': the optimizer's parameters, all-gathered after its step where it is sharded wider
  double reduced = 0;    // the gradients reduce-scattered / all-reduced (memory.hpp gradient_parameters_per_gpu): Ψ',
                         // or under FSDP1's flat parameters with LoRA the decoder's whole flat parameters besides
};
[[nodiscard]] DpParameters dp_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage);
[[nodiscard]] DpParameters dp_parameters_per_gpu(const ModelSpec& m, const Layout& l, const StageCounts& n);

// One step, broken down. Times in seconds over the whole step, as seen by the slowest stage.
struct StepBreakdown {
  double gemm_s = 0;         // weight GEMMs, recompute included
  double attention_s = 0;    // core attention, recompute included
  double elementwise_s = 0;  // norms, activation, residual adds, embedding, loss
  double overhead_s = 0;     // fixed per-layer and per-step costs
  double tp_comm_s = 0;      // exposed TP/SP collectives
  double cp_comm_s = 0;      // exposed CP ring P2P
  double pp_comm_s = 0;      // exposed PP send/recv
  double ep_comm_s = 0;      // exposed expert-parallel all-to-alls (and ETP gathers)
  double dp_comm_s = 0;      // exposed DP/FSDP collectives
  double bubble_s = 0;       // pipeline fill and drain
  double optimizer_s = 0;    // optimizer step (HBM-bound)
  double offload_s = 0;      // exposed host copies and CPU optimizer step of offloading
  std::int64_t slowest_stage = 0;
  [[nodiscard]] double compute_s() const { return gemm_s + attention_s + elementwise_s; }
  [[nodiscard]] double total_s() const {
    return compute_s() + overhead_s + tp_comm_s + cp_comm_s + pp_comm_s + ep_comm_s + dp_comm_s + bubble_s +
           optimizer_s + offload_s;
  }
};

struct PerfEstimate {
  StepBreakdown breakdown;
  double step_time_s = 0;
  double model_flops = 0;     // per step, flops.hpp's convention
  double tokens_per_s = 0;    // whole job
  double tflops_per_gpu = 0;  // model FLOPs / step time / GPUs, in 10^12
  double mfu = 0;             // model FLOPs utilisation against the BF16 dense peak (with FP8 too, as NVIDIA reports)
  double pts_s = 0;           // processing time per sample: step time / sequences per step (thesis Sec. 4.2.3)
};

// Per micro-batch, one decoder layer or pipeline stage: forward or backward seconds by kind.
struct PassTimes {
  double gemm = 0, attention = 0, elementwise = 0, overhead = 0, tp = 0, cp = 0, pp = 0, ep = 0;
  [[nodiscard]] double total() const { return gemm + attention + elementwise + overhead + tp + cp + pp + ep; }
  PassTimes& operator+=(const PassTimes& o) {
    gemm += o.gemm;
    attention += o.attention;
    elementwise += o.elementwise;
    overhead += o.overhead;
    tp += o.tp;
    cp += o.cp;
    pp += o.pp;
    ep += o.ep;
    return *this;
  }
};
struct LayerPassTimes {
  PassTimes forward, backward;
};
// What estimate_perf prices per micro-batch: a decoder layer's passes with their exposed TP, CP and EP traffic (and a
// layer with experts', where the model has them), the pipeline's ends and the counts of the stages a micro-batch
// passes (the first, a middle one and the last: their layers scale the layer's passes, the slowest one's parameters
// set the DP traffic). They follow from the micro-batch's shape (t, c, p, v, s, b, SP, recompute, the precision and the
// expert split over t·c·d GPUs), not from the pipeline schedule, the state sharding or ZeRO's settings: rank prices
// them once for all of those (search.cpp).
struct MicrobatchPasses {
  LayerPassTimes layer, moe_layer;
  PipelineEnds ends;
  PipelineStageCounts stages;  // memory.hpp pipeline_stage_counts
  // Under full recompute by layers (layout.hpp recompute_by_layers): a layer's passes without recompute, for the
  // layers a stage keeps whole (layout.hpp recomputed_layers counts the others).
  LayerPassTimes kept_layer;
  // An FP8 run's BF16 layers (layout.hpp stage_bf16_layers): a layer's and a layer with experts' passes without FP8.
  LayerPassTimes bf16_layer, bf16_moe_layer;
};
[[nodiscard]] MicrobatchPasses microbatch_passes(const ModelSpec& m, const PerfContext& p, const Layout& l);

// The layout must be valid (validate_layout). Allocation-free.
[[nodiscard]] PerfEstimate estimate_perf(const ModelSpec& m, const PerfContext& p, const Layout& l);
// The same with the layout's micro-batch passes `mb` given (microbatch_passes of a layout of the same micro-batch
// shape).
[[nodiscard]] PerfEstimate estimate_perf(const ModelSpec& m, const PerfContext& p, const Layout& l,
                                         const MicrobatchPasses& mb);
[[nodiscard]] PerfEstimate estimate_perf(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                         const PerfCoefficients& k);

}  // namespace headroom
