// Floating-point operations of one training step: the reported "model FLOPs" (the convention the 4D paper's
// measured TFLOP/s use) and the FLOPs one GPU actually executes per micro-batch, split by kernel kind so that
// each kind can be timed with its own efficiency (throughput.hpp). Closed forms; nothing here allocates.
#pragma once

#include <cstdint>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

// ---- model FLOPs (reporting convention) ----

// The share of a full causal attention's s²/2 query-key pairs that the model computes, averaged over its layers:
// 1 without a sliding window; a window of w tokens leaves s·w − w²/2 pairs where s > w (each query sees at most w
// keys; Beltagy et al. 2020, Longformer Sec. 3.1), on the layers that have it.
[[nodiscard]] double causal_attention_share(const ModelSpec& m, std::int64_t seq);

// Narayanan et al. 2021 (Megatron-LM, "Efficient Large-Scale Language Model Training...", Appendix: FLOPs
// 72·B·s·l·h²(1 + s/6h + V/12lh) without recompute), adapted to Llama as Megatron-LM's
// num_floating_point_operations does (GQA, SwiGLU, untied LM head):
//   F = 12·B·s·L·h²·[(1 + k/a + s/h) + g·h_ffn/h + v/(2·L·h)],  g = 3/2 for SwiGLU, 1 for a GELU MLP.
// Forward + backward (×3) of every GEMM, non-causal attention (s/h term: QKᵀ and AV over the full s×s; a sliding
// window scales it by causal_attention_share), the LM head (v term); no recompute, no embedding lookup, no norms.
// With a head width d_h ≠ h/a the attention term scales by a·d_h/h (Megatron-LM's training.py). `sequences` = B.
[[nodiscard]] double model_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences);
// What `mtp_layers` multi-token-prediction layers add to it (Layout::mtp_layers; 0 without them), as Megatron-LM's
// training.py counts them.
[[nodiscard]] double mtp_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences,
                                        std::int64_t mtp_layers);
// Narayanan et al. 2021 Eq. 3, the FLOPs its Table 1 counts per step with full recompute (a second forward):
// 96·B·s·l·h²·(1 + s/6h + V/16lh); GPT only (MHA, a 4h GELU MLP).
[[nodiscard]] double narayanan_recompute_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences);
// The same per token of a sequence of length `seq`: F / (B·s).
[[nodiscard]] double model_flops_per_token(const ModelSpec& m, std::int64_t seq);

// ---- executed FLOPs per GPU and micro-batch (forward pass) ----

// One GEMM of a layer as one GPU sees it: C[m×n] = A[m×k]·B[k×n], FLOPs 2·m·n·k.
struct GemmShape {
  double m = 0, n = 0, k = 0;
  [[nodiscard]] double flops() const { return 2.0 * m * n * k; }
};

// The four weight GEMMs of a Llama layer under TP (Megatron column/row parallel, Shoeybi et al. 2019 Sec. 3):
// QKV (n = h(1 + 2k/a)/t), output projection (k = h/t), gate+up fused (n = 2h_ffn/t; up only for GELU), down
// (k = h_ffn/t); m = s·b/c tokens (SP gathers the sequence before each GEMM). Biases ignored.
struct LayerGemms {
  GemmShape qkv, proj, fc1, fc2;
  [[nodiscard]] double flops() const { return qkv.flops() + proj.flops() + fc1.flops() + fc2.flops(); }
};
[[nodiscard]] LayerGemms layer_gemms(const ModelSpec& m, const Layout& l);

// Dao 2023 (FlashAttention-2) Sec. 4 FLOP count with a causal mask: QKᵀ and AV are 4·s²·h non-causal, half
// of it causal; per GPU the heads split over t and (load-balanced ring attention) the work over c:
// 2·s²·b·h/(t·c) (a·d_h for h where the heads are another width, times causal_attention_share under a sliding
// window). Without causal masking it would be twice this.
[[nodiscard]] double attention_flops_forward(const ModelSpec& m, const Layout& l);

// LM head GEMM on the last stage: 2·s·b·h·v/(t·c) (vocabulary-parallel over t, tokens over c).
[[nodiscard]] double lm_head_flops_forward(const ModelSpec& m, const Layout& l);

// Backward/forward FLOP ratios: a GEMM's backward computes the input and the weight gradient (2×,
// Narayanan et al. 2021 Sec. 3.1); FlashAttention-2's backward recomputes QKᵀ and runs 4 more matmuls
// against the forward's 2 (Dao 2023 Sec. 3.1.2), 2.5×.
inline constexpr double kGemmBackwardRatio = 2.0;
inline constexpr double kAttentionBackwardRatio = 2.5;

// ---- LoRA (thesis Sec. 3.1.2, Eq. 3.3: y = xW + xAB, W frozen) ----

// Backward/forward FLOP ratio of a weight GEMM: 2 when the weight trains (input and weight gradient), 1 when
// it is frozen (LoRA base weights: only the input gradient dL/dx = dL/dy·Wᵀ, no dL/dW).
[[nodiscard]] constexpr double gemm_backward_ratio(bool weight_trains) { return weight_trains ? 2.0 : 1.0; }

// Adapter forward FLOPs of one layer and micro-batch on one GPU: x·A then (xA)·B on (s·b/c) tokens, 2 FLOPs
// per adapter element and token, over the elements this TP rank holds (lora.hpp's split: the TP-replicated
// half is computed redundantly on every rank). 0 without LoRA. Backward: kGemmBackwardRatio (adapters train).
[[nodiscard]] double lora_flops_forward(const ModelSpec& m, const Layout& l);

// Extra forward work that activation recompute adds during backward to one layer (with routed experts or not), as a
// fraction of the layer's forward: GEMM and attention FLOPs (Korthikanti et al. 2023, Sec. 5), elementwise passes with
// the layer's fixed per-pass cost, the TP/SP collectives and the experts' dispatch and combine. full recomputes the
// whole layer (1, 1, 1, 1, 1); op (torchtitan's per-op checkpointing) the matmuls it does not save
// (op_recomputed_gemm_share), every elementwise op, no attention (saved) and the two all-gathers of the four
// collectives (the reduce-scatters are saved): (share, 0, 1, 0.5, 0); selective the core attention where it is one of
// its modules, and the MLP's all-gather and reduce-scatter (0.5) and the dispatch and combine where it recomputes the
// dense MLP or the MoE block (layout.hpp RecomputeModule; the modules' own GEMMs and elementwise work are priced at
// their shapes, throughput.cpp recomputed_module_seconds); none (0, 0, 0, 0, 0).
struct RecomputeFactors {
  double gemm = 0, attention = 0, elementwise = 0, tp_collectives = 0, ep = 0;
};
[[nodiscard]] RecomputeFactors recompute_factors(const ModelSpec& m, const Layout& l, bool experts);

// torchtitan's per-op checkpointing (torchtitan/distributed/activation_checkpoint.py SelectiveAC, the same policy as
// parallelisms/parallelize_llama.py _save_list at the end of 2024) counts the matmuls of a block in forward order and
// recomputes every second one: of a Llama block's wq, wk, wv, wo, w1, w3, w2 it recomputes wk, wo and w3 (a plain
// MLP's w1, w2: wk, wo and w2). Their share of the block's GEMM FLOPs.
[[nodiscard]] double op_recomputed_gemm_share(const ModelSpec& m);

}  // namespace headroom
