#include "headroom/estimator/memory.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/core/units.hpp"

namespace headroom {
namespace {

using units::d;

// One norm over the h-wide hidden state: RMSNorm's weight, LayerNorm's weight and bias.
double hidden_norm_parameters(const ModelSpec& m) { return (m.norm == Norm::layernorm ? 2.0 : 1.0) * d(m.hidden_size); }

// Selective recompute of the layernorm module (layout.hpp RecomputeModule): latent attention's input norm, not fused
// into a linear layer (gpt_layer_specs.py builds it as TENorm), discards its output, the down projections' input.
bool mla_input_norm_recomputed(const ModelSpec& m, const Layout& l) {
  return latent_attention(m) && recomputes(l, RecomputeModule::layernorm);
}

// 4D paper Eq. 11 in units of s·b·h: the attention input (2), Q and the attention output (2 each, a·d_h wide, h when
// d_h = h/a) and K, V (2 each, k·d_h wide): 6 + 4k/a when a·d_h = h.
// Per-head RMSNorms of q and k (Qwen3, Gemma 3) store their inputs too, 2·(a + k)·d_h/h more.
// Latent attention stores the replicated down projections' outputs and their normed copies (q_r, kv_r + d_rope,
// whole on every TP rank: × t), then Q, K (a·d_qk each), V and the output (a·d_v each), split over t.
// Selective recompute (layout.hpp RecomputeModule) of latent attention's input norm drops the attention input; of its
// up projections (mla_up_proj) keeps their inputs alone, the q and kv latents and the RoPE part of K (the checkpoint's
// inputs, multi_latent_attention.py), and of the core attention's tensors the output only.
double attention_activation_units(const ModelSpec& m, const Layout& l) {
  if (latent_attention(m)) {
    const double q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank), rope = d(m.qk_rope_head_dim);
    const bool up = recomputes(l, RecomputeModule::mla_up_proj);
    const double down = up ? q_r + kv_r + rope : 2.0 * q_r + kv_r + (kv_r + rope);
    const double heads = d(m.num_heads) * (up ? d(m.v_head_dim) : 2.0 * head_dim(m) + 2.0 * d(m.v_head_dim));
    return (mla_input_norm_recomputed(m, l) ? 0.0 : 2.0) + 2.0 * (down * d(l.tp) + heads) / d(m.hidden_size);
  }
  const double qk = (query_width(m) + kv_width(m)) / d(m.hidden_size);
  return 2.0 + 4.0 * qk + (m.qk_norm ? 2.0 * qk : 0.0);
}

// 4D paper Eq. 12: the MLP's intermediates h_ffn wide, in 2-byte units per h: gated, the gate and up outputs, the
// activation's output and the product (8); plain, the activation's input and output (4).
double mlp_intermediate_units(Mlp mlp) { return 4.0 * mlp_input_projections(mlp); }

// The inputs of the layer's norms, h wide: two (4 units), four with Gemma 2's norms after attention and MLP too; one
// with a parallel residual, whose two norms read the same tensor (modeling_gpt_neox.py GPTNeoXLayer: autograd saves
// it once).
double norm_activation_units(const ModelSpec& m) {
  if (m.parallel_residual) return 2.0;
  return m.sandwich_norms ? 8.0 : 4.0;
}

// A tensor of the residual stream in s·b·h/(t·c) units: split over the TP ranks with SP, whole on each (t) without.
double residual_copies(const Layout& l) { return l.sequence_parallel ? 1.0 : d(l.tp); }

// One dropout mask: 1 B an element of the residual stream; 0 without hidden dropout.
double dropout_mask_unit(const ModelSpec& m, const Layout& l) {
  return m.hidden_dropout > 0 ? residual_copies(l) : 0.0;
}
// Korthikanti et al. 2023 Eq. 1: the two dropout masks on the residual stream (after attention, after the MLP), where
// the layer keeps its tensors (Megatron-LM's fused bias-dropout-add saves its mask; full recompute regenerates it,
// torchtitan's per-op policy has no dropout).
double dropout_mask_units(const ModelSpec& m, const Layout& l) {
  if (l.recompute == Recompute::full || l.recompute == Recompute::op) return 0.0;
  return 2.0 * dropout_mask_unit(m, l);
}

// Korthikanti et al. 2023 Eq. 1: without FlashAttention and without recompute, the softmax output 2·a·s²·b/(t·c),
// with attention dropout also its mask (1) and output (2).
double unfused_score_bytes(const ModelSpec& m, const Layout& l) {
  const bool recomputed =
      l.recompute == Recompute::selective ? recomputes(l, RecomputeModule::core_attn) : l.recompute != Recompute::none;
  if (l.flash_attention || recomputed) return 0.0;
  const double bytes_per_score = m.attention_dropout > 0 ? 5.0 : 2.0;
  return bytes_per_score * d(m.num_heads) * d(l.seq) * d(l.seq) * d(l.mbs) / (d(l.tp) * d(l.cp));
}

// 4D paper Eq. 2: a gated FFN of `width` (gate, up, down: 3·h·width), or a plain one (up, down: 2·h·width).
double ffn_weights(const ModelSpec& m, std::int64_t width) {
  return (mlp_input_projections(m.mlp) + 1.0) * d(m.hidden_size) * d(width);
}

// s·b·h/(t·c): the unit of the 4D paper's activation terms (Eq. 17).
double sbh_per_gpu(const ModelSpec& m, const Layout& l) {
  return d(l.seq) * d(l.mbs) * d(m.hidden_size) / (d(l.tp) * d(l.cp));
}

// Whether Transformer Engine's FP8 changes what a layer stores (recompute full: it stores the BF16 input only).
bool fp8_saves_inputs(const Layout& l) {
  return l.fp8 != Fp8Recipe::none && l.fp8_library == Fp8Library::transformer_engine && l.recompute != Recompute::full;
}

// Transformer Engine saves the input of each FP8 linear layer in FP8 (1 B, transformer_engine/pytorch/module/linear.py
// and layernorm_linear.py quantize it before ctx.save_for_backward), half of what the BF16 terms above count where
// the linear layer is the input's only holder; in units of s·b·h/(t·c) bytes, the units FP8 saves. Attention: the QKV
// input (the norm's output: 1, replicated over t without SP) is saved; the output projection's input is the core
// attention's output, which FlashAttention keeps in BF16 for its backward, so the FP8 copy adds a·d_h/h. Latent
// attention: the norm's output and the normed q and kv latents (whole on every TP rank, held by the up projections
// only) are saved, the output projection's FP8 copy adds a·d_v/h. torchao keeps the BF16 input (float8_linear.py saves
// input_hp): nothing. Full recompute stores the layer input alone, in BF16.
// Recomputed norms and up projections save nothing of those inputs (their linear layers save the discarded BF16 input,
// transformer_engine.py set_save_original_input, or run inside the checkpoint).
double fp8_attention_saved_units(const ModelSpec& m, const Layout& l) {
  if (!fp8_saves_inputs(l)) return 0.0;
  const double h = d(m.hidden_size), replicated = residual_copies(l);
  if (latent_attention(m))
    return (mla_input_norm_recomputed(m, l) ? 0.0 : replicated) +
           (recomputes(l, RecomputeModule::mla_up_proj) ? 0.0 : d(l.tp) * d(m.q_lora_rank + m.kv_lora_rank) / h) -
           d(m.num_heads) * d(m.v_head_dim) / h;
  return replicated - query_width(m) / h;
}
// The FFN's: its input (1, replicated without SP) and the down projection's input (h_ffn/h); none where the MLP is
// recomputed.
double fp8_ffn_saved_units(const ModelSpec& m, const Layout& l) {
  if (!fp8_saves_inputs(l) || recomputes(l, RecomputeModule::mlp)) return 0.0;
  return residual_copies(l) + d(m.ffn_hidden_size) / d(m.hidden_size);
}

}  // namespace

// 4D paper Eq. 1: W_Q, W_O are h×h and W_K, W_V are h×(h·k/a), so 2h²(1 + k/a); with a head width d_h ≠ h/a,
// W_Q and W_O are h×(a·d_h) and W_K, W_V h×(k·d_h) (Megatron-LM's theoretical_memory_usage.py, kv_channels).
// GPT-2 adds q, k, v and o biases, Qwen2 q, k and v biases (column-parallel: split by t like the weights).
// Latent attention (theoretical_memory_usage.py, multi_latent_attention): q down h·q_r, its norm q_r, q up
// q_r·a·d_qk (h·a·d_qk directly without q_r); kv down h·(kv_r + d_rope), its norm kv_r, kv up kv_r·a·(d_nope + d_v);
// o a·d_v·h. The down projections and their norms are replicated over TP (multi_latent_attention.py builds them with
// parallel_mode 'duplicated'); mla_replicated_parameters counts them.
namespace {
double mla_replicated_parameters(const ModelSpec& m) {
  if (!latent_attention(m)) return 0.0;
  const double h = d(m.hidden_size), q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank);
  const double norm = m.norm == Norm::layernorm ? 2.0 : 1.0;
  return (q_r > 0 ? q_r * (h + norm) : 0.0) + h * (kv_r + d(m.qk_rope_head_dim)) + norm * kv_r;
}

double mla_parameters(const ModelSpec& m) {
  const double h = d(m.hidden_size), a = d(m.num_heads), q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank);
  const double d_qk = d(m.qk_nope_head_dim + m.qk_rope_head_dim), d_v = d(m.v_head_dim);
  const double q_up = (q_r > 0 ? q_r : h) * a * d_qk;
  return mla_replicated_parameters(m) + q_up + kv_r * a * (d(m.qk_nope_head_dim) + d_v) + a * d_v * h;
}
}  // namespace

double attention_parameters_per_layer(const ModelSpec& m) {
  if (latent_attention(m)) return mla_parameters(m);
  const double h = d(m.hidden_size), q = query_width(m), kv = kv_width(m);
  const double weights = 2.0 * h * (q + kv);
  const double qkv_biases = m.linear_biases || m.qkv_bias ? q + 2.0 * kv : 0.0;
  const double o_bias = m.linear_biases ? h : 0.0;
  const double sinks = m.attention_sinks ? d(m.num_heads) : 0.0;  // gpt-oss's per-head sink logits
  return weights + qkv_biases + o_bias + sinks;
}

// 4D paper Eq. 2 (ffn_weights), with GPT's biases on the up and down projections.
double ffn_parameters_per_layer(const ModelSpec& m) {
  const double h = d(m.hidden_size), f = d(m.ffn_hidden_size);
  return ffn_weights(m, m.ffn_hidden_size) + (m.linear_biases ? mlp_input_projections(m.mlp) * f + h : 0.0);
}

// 4D paper Eq. 3, the 2h term: two RMSNorm weight vectors per layer; LayerNorm adds a bias vector each. Gemma 2/3
// normalise the attention and MLP outputs too (modeling_gemma2.py: four norms); Qwen3 and Gemma 3 normalise q and k
// per head (q_norm, k_norm: d_h each).
double norm_parameters_per_layer(const ModelSpec& m) {
  const double per_norm = m.norm == Norm::layernorm ? 2.0 : 1.0;
  return per_norm * (d(hidden_norms_per_layer(m)) * d(m.hidden_size) + (m.qk_norm ? 2.0 * head_dim(m) : 0.0));
}

double layer_parameters(const ModelSpec& m) {
  return attention_parameters_per_layer(m) + ffn_parameters_per_layer(m) + norm_parameters_per_layer(m);
}

// Megatron-LM's theoretical_memory_usage.py (routed_expert_params / E): one expert's FFN, 3·h·f_e gated, 2·h·f_e not;
// with biases on every linear layer its up (gate and up) and down biases as well (gpt-oss's gate_up_proj_bias and
// down_proj_bias, modeling_gpt_oss.py GptOssExperts).
double expert_ffn_parameters(const ModelSpec& m) {
  const double f = d(m.moe_ffn_hidden_size);
  return ffn_weights(m, m.moe_ffn_hidden_size) +
         (m.linear_biases ? mlp_input_projections(m.mlp) * f + d(m.hidden_size) : 0.0);
}

// theoretical_memory_usage.py: the shared expert (shared_expert_params, TP-split like a dense FFN).
double shared_expert_parameters(const ModelSpec& m) { return ffn_weights(m, m.shared_expert_ffn_hidden_size); }

// theoretical_memory_usage.py: router_params h·E (and its bias E with add_bias_linear) and shared_expert_gate_params
// h, replicated over TP.
double router_parameters(const ModelSpec& m) {
  return d(m.hidden_size) * (d(m.num_experts) + (m.shared_expert_gate ? 1.0 : 0.0)) +
         (m.linear_biases ? d(m.num_experts) : 0.0);
}

// A layer with routed experts, all E of them (num_parameters_in_transformer_layer_moe).
double moe_layer_parameters(const ModelSpec& m) {
  return attention_parameters_per_layer(m) + norm_parameters_per_layer(m) + shared_expert_parameters(m) +
         router_parameters(m) + d(m.num_experts) * expert_ffn_parameters(m);
}

// What the first stage holds before the decoder besides the hv/t embedding: GPT-2's learned position table and
// BLOOM's norm of the embeddings (modeling_bloom.py word_embeddings_layernorm), whole on every TP rank.
double input_embedding_extras(const ModelSpec& m) {
  return (m.learned_positions ? d(m.max_context) * d(m.hidden_size) : 0.0) +
         (m.embedding_norm ? hidden_norm_parameters(m) : 0.0);
}

// 4D paper Eq. 3, the 2hv term: input embedding and LM head (one matrix when tied), plus the input extras above and
// Phi's LM head bias.
double embedding_parameters(const ModelSpec& m) {
  const double hv = d(m.hidden_size) * d(m.vocab_size);
  return (m.tied_embeddings ? hv : 2.0 * hv) + input_embedding_extras(m) + (m.lm_head_bias ? d(m.vocab_size) : 0.0);
}

// 4D paper Eq. 3: 2hv + h + 2Lh²(1 + k/a + 3/2·h_ffn/h + 1/h), the final norm being the lone h.
double parameter_count(const ModelSpec& m) {
  const double final_norm = hidden_norm_parameters(m);
  const double moe = d(moe_layers(m));
  return embedding_parameters(m) + final_norm + (d(m.num_layers) - moe) * layer_parameters(m) +
         moe * moe_layer_parameters(m);
}

bool mtp_layer_has_experts(const ModelSpec& m) { return moe_layers(m) > 0; }

// DeepSeek-V3 technical report Sec. 2.2, Megatron-LM's multi_token_prediction.py MultiTokenPredictionLayer: a
// transformer layer (with experts where the model's last layer has them), eh_proj projecting the normed embedding and
// hidden state (2h × h, no bias) and three norms (enorm, hnorm, final_layernorm); embedding and head are shared.
double mtp_module_parameters(const ModelSpec& m) {
  const double h = d(m.hidden_size);
  const double layer = mtp_layer_has_experts(m) ? moe_layer_parameters(m) : layer_parameters(m);
  return layer + 2.0 * h * h + 3.0 * hidden_norm_parameters(m);
}

double mtp_parameters(const ModelSpec& m) { return d(m.mtp_layers) * mtp_module_parameters(m); }

// theoretical_memory_usage.py's num_active_parameters: a token uses k of the E routed experts.
double active_parameter_count(const ModelSpec& m) {
  return parameter_count(m) - d(moe_layers(m)) * d(m.num_experts - m.moe_router_topk) * expert_ffn_parameters(m);
}

// 4D paper Eq. 6–9 per stage: TP splits attention, FFN, embedding and head by t, norms stay whole;
// the first stage holds the embedding (hv/t), the last the head and final norm (hv/t + h), and with
// p = 1 the one stage holds both (Eq. 6). Row-parallel biases (o, down) are replicated across TP.
namespace {
double layer_parameters_per_gpu(const ModelSpec& m, const Layout& l) {
  const double replicated = (m.linear_biases ? 2.0 * d(m.hidden_size) : 0.0) + mla_replicated_parameters(m);
  return (layer_parameters(m) - norm_parameters_per_layer(m) - replicated) / d(l.tp) + norm_parameters_per_layer(m) +
         replicated;
}

// theoretical_memory_usage.py's split of a layer with experts: attention and shared expert over t, norms, router
// and shared gate whole; the routed experts are expert_parameters_per_gpu.
double moe_layer_dense_parameters_per_gpu(const ModelSpec& m, const Layout& l) {
  const double replicated = (m.linear_biases ? d(m.hidden_size) : 0.0) + mla_replicated_parameters(m);  // o's bias
  return (attention_parameters_per_layer(m) - replicated + shared_expert_parameters(m)) / d(l.tp) +
         norm_parameters_per_layer(m) + router_parameters(m) + replicated;
}
}  // namespace

double expert_parameters_per_gpu(const ModelSpec& m, const Layout& l) {
  return d(m.num_experts) * expert_ffn_parameters(m) / (d(l.ep) * d(l.expert_tp()));
}

// Routed experts of the stage's decoder layers and of its multi-token-prediction layers.
double stage_expert_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const std::int64_t mtp = mtp_layer_has_experts(m) ? stage_mtp_layers(l, stage) : 0;
  return d(stage_moe_layers(m, l, stage) + mtp) * expert_parameters_per_gpu(m, l);
}

double mtp_module_parameters_per_gpu(const ModelSpec& m, const Layout& l) {
  const double h = d(m.hidden_size);
  const double layer = mtp_layer_has_experts(m)
                           ? moe_layer_dense_parameters_per_gpu(m, l) + expert_parameters_per_gpu(m, l)
                           : layer_parameters_per_gpu(m, l);
  return layer + 2.0 * h * h / d(l.tp) + 3.0 * hidden_norm_parameters(m);
}

double stage_decoder_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const std::int64_t moe = stage_moe_layers(m, l, stage);
  double params = d(stage_layers(m, l, stage) - moe) * layer_parameters_per_gpu(m, l);
  if (moe > 0)
    params += d(moe) * moe_layer_dense_parameters_per_gpu(m, l) + stage_expert_parameters_per_gpu(m, l, stage);
  return params;
}

double stage_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const double h = d(m.hidden_size), t = d(l.tp);
  double params = stage_decoder_parameters_per_gpu(m, l, stage);
  const double hv_t = h * d(m.vocab_size) / t;
  const bool first = stage == 0, last = stage == head_stage(l);
  if (first) params += hv_t + input_embedding_extras(m);
  // Megatron keeps a copy of a tied embedding on the last stage when p > 1 (kept in sync by all-reduce).
  if (last && !(first && m.tied_embeddings)) params += hv_t;
  if (last) params += hidden_norm_parameters(m) + (m.lm_head_bias ? d(m.vocab_size) / t : 0.0);
  if (const std::int64_t mtp = stage_mtp_layers(l, stage); mtp > 0)
    params += d(mtp) * mtp_module_parameters_per_gpu(m, l);
  return params;
}

StageCounts stage_counts(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  return {stage,
          stage_layers(m, l, stage),
          stage_moe_layers(m, l, stage),
          stage_parameters_per_gpu(m, l, stage),
          stage_expert_parameters_per_gpu(m, l, stage),
          stage_bf16_layers(m, l, stage)};
}

// The linear layers' weights (no biases, norms or router): attention without its replicated latent norms, the FFN, or
// a layer with experts' shared expert and the GPU's routed experts.
double linear_weight_parameters_per_gpu(const ModelSpec& m, const Layout& l, bool experts) {
  const double h = d(m.hidden_size), t = d(l.tp), norm = m.norm == Norm::layernorm ? 2.0 : 1.0;
  double attention = 2.0 * h * (query_width(m) + kv_width(m)) / t;
  if (latent_attention(m)) {
    const double replicated = mla_replicated_parameters(m);
    const double latent_norms = norm * d(m.q_lora_rank + m.kv_lora_rank);
    attention = (mla_parameters(m) - replicated) / t + replicated - latent_norms;
  }
  if (!experts) return attention + ffn_weights(m, m.ffn_hidden_size) / t;
  return attention + shared_expert_parameters(m) / t +
         d(m.num_experts) * ffn_weights(m, m.moe_ffn_hidden_size) / (d(l.ep) * d(l.expert_tp()));
}

double stage_linear_weight_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const std::int64_t moe = stage_moe_layers(m, l, stage);
  const Bf16Layers bf16 = stage_bf16_layers(m, l, stage);  // kept in BF16: not FP8's
  // A multi-token-prediction layer's linear layers and its eh_proj run in FP8 too (multi_token_prediction.py: "MTP
  // only use global fp8 context").
  double weights = d(stage_layers(m, l, stage) - moe - bf16.dense) * linear_weight_parameters_per_gpu(m, l, false) +
                   d(moe - bf16.moe) * linear_weight_parameters_per_gpu(m, l, true);
  if (const std::int64_t mtp = stage_mtp_layers(l, stage); mtp > 0)
    weights += d(mtp) * (linear_weight_parameters_per_gpu(m, l, mtp_layer_has_experts(m)) +
                         2.0 * d(m.hidden_size) * d(m.hidden_size) / d(l.tp));
  return weights;
}

double fp8_weight_copy_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (l.fp8 == Fp8Recipe::none || l.fp8_library != Fp8Library::transformer_engine || l.fp8_param_gather) return 0.0;
  return 2.0 * stage_linear_weight_parameters_per_gpu(m, l, stage);
}

// Transformer Engine's per-module FP8 metadata; weight GEMMs of a layer: QKV (q, kv down and up with latent attention:
// 4, or 5 with a q latent), output projection, and 2 per FFN (the shared expert's and each local routed expert's).
// torchao's dynamic scales live only while a cast runs: none.
double fp8_scaling_state_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (l.fp8 == Fp8Recipe::none || l.fp8_library != Fp8Library::transformer_engine) return 0.0;
  const double attention = latent_attention(m) ? (m.q_lora_rank > 0 ? 5.0 : 4.0) : 2.0;
  const Bf16Layers bf16 = stage_bf16_layers(m, l, stage);  // run outside FP8's autocast: no metadata
  const std::int64_t moe = stage_moe_layers(m, l, stage) - bf16.moe;
  const double moe_ffn = (m.shared_expert_ffn_hidden_size > 0 ? 2.0 : 0.0) + 2.0 * d(m.num_experts) / d(l.ep);
  const double mtp = d(stage_mtp_layers(l, stage)) * (attention + (mtp_layer_has_experts(m) ? moe_ffn : 2.0) + 1.0);
  const double gemms =
      d(stage_layers(m, l, stage) - bf16.total() - moe) * (attention + 2.0) + d(moe) * (attention + moe_ffn) + mtp;
  const double floats_per_tensor = l.fp8 == Fp8Recipe::delayed ? 3.0 : 2.0;  // scale, inverse, amax history of 1
  return gemms * 5.0 * floats_per_tensor * 4.0;
}

// Megatron-LM's HybridDeviceOptimizer (megatron/core/optimizer/cpu_offloading): the offloaded share of the shard's
// states and the FP32 gradients copied to pinned host memory for the CPU step.
double host_optimizer_bytes(const Layout& l, double optimizer_shard_params) {
  return l.optimizer_offload * optimizer_shard_params * (l.precision.optimizer_bytes + 4.0);
}

// The first activation_offload_layers layers' stored activations of the micro-batch in flight (Megatron-LM offloads
// without pipeline parallelism only, one micro-batch at a time).
double offloaded_activation_bytes(const ModelSpec& m, const Layout& l) {
  const std::int64_t n = l.activation_offload_layers;
  if (n == 0) return 0.0;
  const std::int64_t dense = m.num_experts > 0 ? std::min(n, m.first_dense_layers) : n;
  return d(dense) * activation_bytes_per_layer(m, l) + d(n - dense) * moe_activation_bytes_per_layer(m, l);
}

// PaRO's N / I / G over the expert data-parallel group (Layout::expert_dp), laid out with etp·ep innermost.
double expert_shard_divisor(Shard shard, const Layout& l, std::int64_t gpus_per_node) {
  const double group = d(l.expert_dp());
  switch (shard) {
    case Shard::none: return 1.0;
    case Shard::intra: return std::clamp(d(gpus_per_node) / (d(l.expert_tp()) * d(l.ep)), 1.0, group);
    case Shard::global: return group;
  }
  return 1.0;
}

// PaRO section 3 (N / I / G): the DP×CP group is laid out with TP innermost, so a node holds
// gpus_per_node / t of its members; 'intra' shards over those, 'global' over all d·c of them.
double shard_divisor(Shard shard, const Layout& l, std::int64_t gpus_per_node) {
  const double group = d(l.dp) * d(l.cp);
  switch (shard) {
    case Shard::none: return 1.0;
    case Shard::intra: return std::clamp(d(gpus_per_node) / d(l.tp), 1.0, group);
    case Shard::global: return group;
  }
  return 1.0;
}

// torchtitan's per-op checkpointing of a Llama block (recompute_factors' op), in units of s·b·h/(t·c) bytes: the
// block's input (2; whole on every TP rank without SP) and the saved outputs: wq (2q/h) and wv (2kv/h) of the counted
// matmuls, SDPA's output (2q/h) and FP32 log-sum-exp (4a/h), w1 (2f/h; the gated MLP's gate, a plain MLP's up
// projection); under TP the reduce-scatters after wo and w2 (2 each, sequence-sharded) and w2's partial sum before its
// reduce-scatter (2t: every token, h wide, on each rank), without TP w2's output (2). Without TP a plain MLP's w2
// is the 6th matmul and recomputed.
double op_saved_units(const ModelSpec& m, const Layout& l) {
  const double h = d(m.hidden_size), t = d(l.tp), q = query_width(m);
  const double input = l.sequence_parallel ? 2.0 : 2.0 * t;
  const double attention = (2.0 * q + 2.0 * kv_width(m) + 2.0 * q + 4.0 * d(m.num_heads)) / h;
  const double w2 = gated_mlp(m) ? (l.tp > 1 ? 2.0 * t : 2.0) : 0.0;
  const double reduce_scatters = l.tp > 1 ? 4.0 : 0.0;
  return input + attention + 2.0 * d(m.ffn_hidden_size) / h + w2 + reduce_scatters;
}

// 4D paper Eq. 11–12, 15, 17 (one layer, one micro-batch, per GPU). With FlashAttention and SP:
// s·b·h/(t·c)·(12 + 4k/a + 8h_ffn/h): attention 6 + 4k/a (input, Q, K, V, output), FFN 2 + 8h_ffn/h
// (input; gate, up, activation and product outputs), two norm inputs 4 (norm_activation_units). A GELU MLP stores
// 2 + 4h_ffn/h. Without SP (Korthikanti et al. 2023, Sec. 4.2.2) the norm inputs and the inputs of the QKV and FFN
// projections (8 units) are replicated over TP. Without FlashAttention the softmax output 2·a·s²·b/(t·c)
// is stored as well (with attention dropout, GPT's, its mask and output too); selective recompute
// (Korthikanti Sec. 5) drops it. Selective recompute of the MLP (transformer_layer.py checkpoints it from the
// pre-MLP norm's input, which the norm terms count) drops its input and intermediates.
// Full recompute stores the layer input only (2 units, SP-sharded).
double activation_bytes_per_layer(const ModelSpec& m, const Layout& l) {
  const double sbh = sbh_per_gpu(m, l);
  if (l.recompute == Recompute::full) return 2.0 * sbh * residual_copies(l);
  if (l.recompute == Recompute::op) return sbh * op_saved_units(m, l);
  const double ffn_ratio = d(m.ffn_hidden_size) / d(m.hidden_size);
  const bool mlp_kept = !recomputes(l, RecomputeModule::mlp);
  const double mlp_units = mlp_kept ? 2.0 + mlp_intermediate_units(m.mlp) * ffn_ratio : 0.0;
  const double all_units = attention_activation_units(m, l) + mlp_units + norm_activation_units(m);
  const double inputs = (mla_input_norm_recomputed(m, l) ? 0.0 : 2.0) + (mlp_kept ? 2.0 : 0.0);
  const double replicated_units = inputs + norm_activation_units(m);
  double bytes =
      l.sequence_parallel ? sbh * all_units : sbh * ((all_units - replicated_units) + replicated_units * d(l.tp));
  bytes -= sbh * (fp8_attention_saved_units(m, l) + fp8_ffn_saved_units(m, l));
  return bytes + sbh * dropout_mask_units(m, l) + unfused_score_bytes(m, l);
}

// A layer with routed experts (SP on: Megatron-LM requires it with experts and t > 1), in units of s·b·h/(t·c) bytes
// per local token: attention and norms as a dense layer, the FFN input (2), the router's FP32 probabilities (2E/h),
// the shared expert's intermediates as a dense FFN of its width; each of the k routed copies of a token keeps its
// expert input (all-gathered over etp: 2·etp), the expert's intermediates (8f_e/h gated, 4f_e/h not, split over
// etp) and its output for the combine (2), scaled by the busiest GPU's load. Full recompute: the layer input only.
// Selective recompute (layout.hpp RecomputeModule): moe keeps the MoE block's input alone (moe_layer.py checkpoints
// it whole), shared_experts drops the shared expert's intermediates, moe_act the activation's output and the product
// (half the intermediates: the first GEMM's output stays, experts.py), layernorm the pre-MLP norm's output (the FFN
// input).
double moe_activation_bytes_per_layer(const ModelSpec& m, const Layout& l) {
  if (l.recompute == Recompute::full) return activation_bytes_per_layer(m, l);
  const double h = d(m.hidden_size), gated = mlp_intermediate_units(m.mlp);
  const bool block = !recomputes(l, RecomputeModule::moe);  // the MoE block's tensors kept
  const bool shared = block && m.shared_expert_ffn_hidden_size > 0 && !recomputes(l, RecomputeModule::shared_experts);
  const bool act = block && !recomputes(l, RecomputeModule::moe_act);  // the routed activation's outputs kept
  const bool ffn_input = !recomputes(l, RecomputeModule::layernorm);
  const double copies = d(m.moe_router_topk) * l.expert_load, f_e = d(m.moe_ffn_hidden_size) / h;
  const double f_s = d(m.shared_expert_ffn_hidden_size) / h;
  const double routed = block ? copies * (2.0 * d(l.expert_tp()) + (act ? gated : gated / 2.0) * f_e + 2.0) : 0.0;
  double units = attention_activation_units(m, l) + norm_activation_units(m) + (ffn_input ? 2.0 : 0.0) +
                 (block ? 2.0 * d(m.num_experts) / h : 0.0) + (shared ? gated * f_s : 0.0) + routed;
  // FP8 (Transformer Engine): attention as a dense layer; each routed copy's expert input (etp) and down-projection
  // input (f_e/h) in FP8; the shared expert's down-projection input (f_s/h) too, while its up projection saves an FP8
  // copy (1) of the FFN input, which the router and dispatcher keep in BF16 (the BF16 input, discarded, where the norm
  // is recomputed: moe_layer.py set_for_recompute_pre_mlp_layernorm).
  if (fp8_saves_inputs(l))
    units -= fp8_attention_saved_units(m, l) + (block ? copies * (d(l.expert_tp()) + (act ? f_e : 0.0)) : 0.0) +
             (shared ? f_s - (ffn_input ? 1.0 : 0.0) : 0.0);
  return sbh_per_gpu(m, l) * (units + dropout_mask_units(m, l)) + unfused_score_bytes(m, l);
}

namespace {
// The mean over a stage's layers, dense and with experts, an FP8 run's BF16 layers storing what a BF16 run's do.
double mean_layer_activation_bytes(const ModelSpec& m, const Layout& l, const StageCounts& n) {
  if (n.bf16.total() == 0) {
    if (n.moe_layers == 0) return activation_bytes_per_layer(m, l);
    const double share = d(n.moe_layers) / d(n.layers);
    return (1.0 - share) * activation_bytes_per_layer(m, l) + share * moe_activation_bytes_per_layer(m, l);
  }
  double bytes = d(n.layers - n.moe_layers - n.bf16.dense) * activation_bytes_per_layer(m, l) +
                 d(n.moe_layers - n.bf16.moe) * (n.moe_layers > 0 ? moe_activation_bytes_per_layer(m, l) : 0.0);
  const Layout bf16 = without_fp8(l);
  bytes += d(n.bf16.dense) * activation_bytes_per_layer(m, bf16) +
           d(n.bf16.moe) * (n.bf16.moe > 0 ? moe_activation_bytes_per_layer(m, bf16) : 0.0);
  return bytes / d(n.layers);
}

// GPipe and the breadth-first schedule run every forward of a step before its first backward.
bool forwards_before_backwards(Schedule s) { return s == Schedule::gpipe || s == Schedule::looped_bfs; }
}  // namespace

// Micro-batches whose activations stage `stage` holds at its peak. 1F1B: the first stage holds p
// (4D paper Sec. 3.2.2, Narayanan et al. 2021 Fig. 4), stage i holds p − i; GPipe and the breadth-first schedule hold
// all m.
double microbatches_in_flight(const Layout& l, std::int64_t stage) {
  const double m = d(l.microbatches());
  if (forwards_before_backwards(l.schedule)) return m;
  return std::min(m, d(l.pp - stage));
}

// Micro-batches whose LM head and loss the head stage holds at its peak: one where each forward of the last virtual
// stage is followed by its backward (1F1B, interleaved, zero-bubble, the V); all m under GPipe and the breadth-first
// schedule, whose last stage computes every micro-batch's loss before the first backward
// (torch/distributed/pipelining/schedules.py: the loss is computed with the forward).
namespace {
double head_microbatches_in_flight(const Layout& l) {
  return l.pp > 1 && forwards_before_backwards(l.schedule) ? d(l.microbatches()) : 1.0;
}
}  // namespace

// Layer-micro-batches held by `stage` (L_i of its layers, L/p when even). 1F1B: L_i·min(p − i, m), hence L on
// the first stage of an even split whatever p
// (4D paper Sec. 3.2.2). Interleaved with v chunks per GPU (Megatron's warm-up count): stage i holds
// 2(p − i − 1) + (v − 1)p + 1 chunks of L/(p·v) layers, i.e. L(1 + (p − 1)/(p·v)) on the first stage
// (Korthikanti et al. 2023, Sec. 4.2.3), at most all m·v chunks. The zero-bubble schedule holds what 1F1B (v = 1)
// or the interleaved 1F1B holds at the peak: its W passes wait with only the weight-gradient inputs, on stages past
// the first (Qi et al., ICLR 2024, Sec. 2.1: ZB-H1's peak is 1F1B's). The V-shaped schedule holds 1F1B's first-stage
// peak on every rank, min(p, m) micro-batches of its layers (the paper's Sec. 6: ZB-V's peak is 1F1B's, balanced).
// The breadth-first schedule runs all m forwards of every chunk before its first backward: m micro-batches of all
// of the stage's layers, as GPipe.
// Under a layer layout the chunks differ: the held chunks are the first W forwards of the stage, which Megatron-LM runs
// p micro-batches of a chunk at a time (schedules.py get_model_chunk_id: chunk (k mod p·v) / p).
namespace {
double held_chunk_layers(const ModelSpec& m, const Layout& l, std::int64_t stage, std::int64_t held) {
  const std::int64_t round = l.pp * l.vpp;
  double layers = 0.0;
  for (std::int64_t chunk = 0; chunk < l.vpp; ++chunk) {
    const std::int64_t forwards = held / round * l.pp + std::clamp<std::int64_t>(held % round - chunk * l.pp, 0, l.pp);
    layers += d(forwards) * d(chunk_layers(m, l, stage, chunk));
  }
  return layers;
}

double stage_layers_in_flight(const ModelSpec& m, const Layout& l, std::int64_t stage, std::int64_t layers) {
  const double layers_per_stage = d(layers);
  if (l.schedule == Schedule::zbv) return layers_per_stage * microbatches_in_flight(l, 0);
  if (!looped_chunks(l) || forwards_before_backwards(l.schedule))
    return layers_per_stage * microbatches_in_flight(l, stage);
  const double chunks =
      std::min(d(l.microbatches()) * d(l.vpp), 2.0 * d(l.pp - stage - 1) + d(l.vpp - 1) * d(l.pp) + 1.0);
  if (l.split.layer_layout) return held_chunk_layers(m, l, stage, static_cast<std::int64_t>(chunks));
  return chunks * layers_per_stage / d(l.vpp);
}
}  // namespace

double layers_in_flight(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  return stage_layers_in_flight(m, l, stage, stage_layers(m, l, stage));
}

// 4D paper Eq. 13 as printed, 8·s·b·h per micro-batch (divided by t·c as in Eq. 17): the embedding
// stage's input/output activations, held for every micro-batch in flight on the first stage.
// With hidden dropout (Megatron-LM's embedding dropout takes its probability) the output's 1-byte mask too, and with
// a norm of the embeddings its 2-byte input (bigscience-workshop/Megatron-DeepSpeed megatron/mpu/layers.py
// VocabParallelEmbedding: the norm of the first stage's reduced lookup, before the dropout), sequence parallel or whole
// on every TP rank.
double embedding_activation_bytes(const ModelSpec& m, const Layout& l) {
  const double norm_input = m.embedding_norm ? 2.0 * residual_copies(l) : 0.0;
  return (8.0 + dropout_mask_unit(m, l) + norm_input) * sbh_per_gpu(m, l);
}

// 4D paper Eq. 14: FP32 logits for the loss 4·s·b·v plus the final norm and head inputs 2sbh + 2sbh,
// divided by t·c (Eq. 17), one micro-batch on the last stage.
double lm_head_activation_bytes(const ModelSpec& m, const Layout& l) {
  return 4.0 * sbh_per_gpu(m, l) * (1.0 + d(m.vocab_size) / d(m.hidden_size));
}

// One multi-token-prediction layer, one micro-batch, what it keeps for backward beside its head's Eq. 14 terms
// (multi_token_prediction.py). Full recompute, uniform: the checkpoint of the whole module, its hidden-state and
// embedding inputs (2·2sbh; _checkpointed_forward asserts one layer a group); block: not recomputed ("not supported
// for MTP yet"), kept whole. Otherwise its layer as a decoder layer keeps it, with the embedding and hidden norms'
// inputs (2sbh each) and eh_proj's input, their 2h-wide concatenation (4sbh); all divided by t·c as Eq. 17.
double mtp_layer_activation_bytes(const ModelSpec& m, const Layout& l) {
  const double sbh = sbh_per_gpu(m, l);
  if (l.recompute == Recompute::full && l.recompute_method == RecomputeMethod::uniform) return 4.0 * sbh;
  const Layout kept = l.recompute == Recompute::full ? without_recompute(l) : l;
  const double layer =
      mtp_layer_has_experts(m) ? moe_activation_bytes_per_layer(m, kept) : activation_bytes_per_layer(m, kept);
  return layer + 8.0 * sbh;
}

// What recompute re-materialises during one layer's backward, one micro-batch at a time, beyond what the layer keeps:
// full, the whole layer (a layer with experts where the stage has one); op, the layer's tensors it did not save.
// Selective recompute of modules: their tensors (beyond the core attention's, which FlashAttention keeps either way).
double rematerialised_layer_bytes(const ModelSpec& m, const Layout& l, bool experts) {
  const auto kept = [&](const Layout& x) {
    return experts ? moe_activation_bytes_per_layer(m, x) : activation_bytes_per_layer(m, x);
  };
  if (recomputes_modules(l)) {
    Layout attention_only = l;
    attention_only.recompute_modules &= kDefaultRecomputeModules;
    return std::max(0.0, kept(attention_only) - kept(l));
  }
  if (l.recompute != Recompute::full && l.recompute != Recompute::op) return 0.0;
  const double whole = kept(without_recompute(l));
  return l.recompute == Recompute::full ? whole : std::max(0.0, whole - kept(l));
}

namespace {

// Full recompute by layers (recompute_by_layers; a dense decoder, validate_model_split), one micro-batch: the stored
// activations of a stage's mean layer. Its recomputed layers keep their input (Korthikanti et al. 2023 Sec. 5: full
// recompute stores the layer input), one input a group of N under uniform groups (transformer_block.py
// _checkpointed_forward checkpoints a group as one call); the others keep all of theirs.
double layers_by_recompute_bytes(const ModelSpec& m, const Layout& l, const StageCounts& n) {
  if (n.layers == 0) return 0.0;
  const double input = activation_bytes_per_layer(m, l), whole = activation_bytes_per_layer(m, without_recompute(l));
  if (l.recompute_method == RecomputeMethod::uniform) {
    double groups = 0.0;
    for (std::int64_t chunk = 0; chunk < std::max<std::int64_t>(1, l.vpp); ++chunk)
      groups += std::ceil(d(chunk_layers(m, l, n.stage, chunk)) / d(l.recompute_num_layers));
    return input * groups / d(n.layers);
  }
  const double recomputed = d(recomputed_layers(m, l, n.stage));
  return (recomputed * input + (d(n.layers) - recomputed) * whole) / d(n.layers);
}

// Under full recompute by layers, the layers backward re-materialises at once: a group of N under uniform groups (its
// forward runs as one call), one layer otherwise, none where it leaves the stage's all whole.
double rematerialised_layers(const ModelSpec& m, const Layout& l, const StageCounts& n) {
  if (l.recompute_method != RecomputeMethod::uniform) return recomputed_layers(m, l, n.stage) > 0 ? 1.0 : 0.0;
  std::int64_t largest = 0;
  for (std::int64_t chunk = 0; chunk < std::max<std::int64_t>(1, l.vpp); ++chunk)
    largest = std::max(largest, chunk_layers(m, l, n.stage, chunk));
  return d(std::min(l.recompute_num_layers, largest));
}

}  // namespace

double stage_activation_bytes(const ModelSpec& m, const Layout& l, const StageCounts& n) {
  const double per_layer =
      recompute_by_layers(l) ? layers_by_recompute_bytes(m, l, n) : mean_layer_activation_bytes(m, l, n);
  double bytes = stage_layers_in_flight(m, l, n.stage, n.layers) * per_layer;
  // Recompute re-materialises one layer of one micro-batch at a time during backward (a layer with experts where the
  // stage has one; a group of layers, rematerialised_layers).
  double layer = rematerialised_layer_bytes(m, l, n.moe_layers > 0);
  if (n.bf16.total() > 0) layer = std::max(layer, rematerialised_layer_bytes(m, without_fp8(l), n.bf16.moe > 0));
  bytes += recompute_by_layers(l) ? layer * rematerialised_layers(m, l, n) : layer;
  // Transformer Engine's all_gather CP, one layer at a time: K and V gathered over the whole sequence and, in backward,
  // dK and dV as long beside them before their reduce-scatter (context_parallel.py AttnFuncWithCPAndKVAllGather):
  // (2c − 1) times a GPU's own K and V.
  if (l.cp > 1 && l.cp_exchange == CpExchange::all_gather) bytes += (2.0 * d(l.cp) - 1.0) * cp_kv_bytes(m, l);
  if (n.stage == 0) bytes += embedding_activation_bytes(m, l) * microbatches_in_flight(l, 0);
  if (n.stage == head_stage(l)) {
    double head = lm_head_activation_bytes(m, l);
    if (l.mtp_layers > 0) head += d(l.mtp_layers) * (mtp_layer_activation_bytes(m, l) + lm_head_activation_bytes(m, l));
    bytes += head * head_microbatches_in_flight(l);
  }
  return bytes;
}

double stage_activation_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  return stage_activation_bytes(m, l, stage_counts(m, l, stage));
}

// 4D paper Eq. 18, first stage: (6 + 12/(d·c))·params + s·b·h/(t·c)·((12 + 4k/a + 8h_ffn/h)L + 8p +
// δ_{p,1}·4(1 + v/h)); with p = 1 the parameter term holds embedding and head, 2hv/t + h (Eq. 6).
double paper_total_bytes(const ModelSpec& m, const Layout& l) {
  const double h = d(m.hidden_size), t = d(l.tp), p = d(l.pp);
  const double states_per_param = 6.0 + 12.0 / (d(l.dp) * d(l.cp));
  const double attention = (query_width(m) + kv_width(m)) / h;  // 1 + k/a when a·d_h = h
  const double layer_part =
      2.0 * (d(m.num_layers) / p) * h * h * ((attention + 1.5 * d(m.ffn_hidden_size) / h) / t + 1.0 / h);
  const double embed_part = (l.pp == 1 ? 2.0 : 1.0) * h * d(m.vocab_size) / t + (l.pp == 1 ? h : 0.0);
  const double per_layer_units =
      attention_activation_units(m, l) + 2.0 + 8.0 * d(m.ffn_hidden_size) / h + norm_activation_units(m);
  const double head_units = l.pp == 1 ? 4.0 * (1.0 + d(m.vocab_size) / h) : 0.0;
  const double activations = sbh_per_gpu(m, l) * (per_layer_units * d(m.num_layers) + 8.0 * p + head_units);
  return states_per_param * (embed_part + layer_part) + activations;
}

bool fsdp_step_model(const Layout& l) { return l.fsdp_unit_buffers > 0; }

// FSDP1 switches FULL_SHARD to NO_SHARD when its process group has one rank: nothing is all-gathered then.
bool fsdp_gathers(const Layout& l) { return fsdp_step_model(l) && l.sharding.params != Shard::none && l.dp * l.cp > 1; }

// FSDP1 builds a unit's FlatParameter with requires_grad if any weight in it requires it
// (torch/distributed/fsdp/_flat_param.py _validate_tensors_to_flatten) and forward uses views of it, so autograd
// gives the unit one gradient of its full size, frozen weights included (PyTorch FSDP docs: "equivalent to not
// freezing those parameters"). FSDP2 shards per parameter: a frozen weight takes none. Neither does a model that a
// DP group of one leaves unwrapped: the thesis's TP-only runs trained at LoRA rank 768 (Sec. 5.1), where Llama 3.1
// 70B's full-size BF16 gradients beside its weights and the adapters' states would already fill the 64 GiB GCD.
bool frozen_weights_take_gradients(const Layout& l) {
  return l.lora.enabled() && l.fsdp_flat_parameters && l.dp * l.cp > 1;
}

double gradient_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (!l.lora.enabled()) return stage_parameters_per_gpu(m, l, stage);
  const double adapters = lora_stage_parameters_per_rank(m, l, stage).per_rank();
  return frozen_weights_take_gradients(l) ? d(stage_layers(m, l, stage)) * layer_parameters_per_gpu(m, l) + adapters
                                          : adapters;
}

// FSDP (fsdp-summary; thesis Sec. 3.1.3): a sharded unit is all-gathered to its TP-sharded size, adapters included.
// With FP8 all-gather (torchao's enable_fsdp_float8_all_gather) the linear weights arrive in FP8, 1 B each.
double fsdp_unit_bytes(const ModelSpec& m, const Layout& l) {
  const double bytes =
      (layer_parameters_per_gpu(m, l) + lora_layer_split(m, l.lora, l.tp).per_rank()) * l.precision.weight_bytes;
  if (!l.fp8_param_gather) return bytes;
  return bytes - (l.precision.weight_bytes - 1.0) * linear_weight_parameters_per_gpu(m, l, false);
}

double fsdp_unit_buffer_bytes(const ModelSpec& m, const Layout& l) {
  return fsdp_gathers(l) ? d(l.fsdp_unit_buffers) * fsdp_unit_bytes(m, l) : 0.0;
}

// FSDP1 _post_forward_reshard: the root's flat parameter is not freed after forward (it is used first in
// backward); with a frozen root (LoRA) nothing reshards it before the end of backward.
double fsdp_root_unit_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (!fsdp_gathers(l)) return 0.0;
  const double decoder = d(stage_layers(m, l, stage)) * layer_parameters_per_gpu(m, l);
  return (stage_parameters_per_gpu(m, l, stage) - decoder) * l.precision.weight_bytes;
}

// DeepSpeed's BF16 weights' dtype buckets: stage_1_and_2.py setup_buckets allocates one of reduce_bucket_size elements
// (two with overlap_comm, double-buffered), stage3.py one per communication dtype; stages 0 and 1 run the BF16
// optimizer, which has none.
double zero_gradient_bucket_bytes(const Layout& l) {
  if (!l.zero.deepspeed || l.sharding.grads == Shard::none) return 0.0;
  const double buckets = l.sharding.params == Shard::none && l.zero.overlap_comm ? 2.0 : 1.0;
  return buckets * d(l.zero.reduce_bucket_size) * l.precision.weight_bytes;
}

// PaRO Table 2's ZeRO++ row: Ψ/M more, the secondary shard over the node's M DP ranks (zero_hpz_partition_size).
double zero_hpz_secondary_parameters(const ClusterSpec& c, const Layout& l, double stage_params) {
  if (!zero_hpz(l.zero, l.sharding)) return 0.0;
  return stage_params / d(sharding_group_size(l, c.gpus_per_node));
}

// deepspeed/runtime/zero/partitioned_param_coordinator.py: a module's parameters are released after use unless the
// trace uses them again within stage3_max_reuse_distance parameters (__params_to_release), and up to
// stage3_prefetch_bucket_size more are all-gathered ahead while fewer than stage3_max_live_parameters are gathered.
// From the k-th last decoder layer's forward to its backward the trace passes the k layers after it and the LM head
// twice, so the layer stays gathered when 2·k·P_layer + 2·P_head < the distance; the head, used again at once, stays.
double zero3_gathered_parameters(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (!l.zero.deepspeed || l.sharding.params == Shard::none) return 0.0;
  const std::int64_t layers = stage_layers(m, l, stage);
  const double per_layer = layers > 0 ? stage_decoder_parameters_per_gpu(m, l, stage) / d(layers) : 0.0;
  const double head = stage == head_stage(l) ? d(m.hidden_size) * d(m.vocab_size) / d(l.tp) : 0.0;
  const double distance = d(l.zero.max_reuse_distance);
  double kept_layers = 0.0;
  if (per_layer > 0 && distance > 2.0 * head)
    kept_layers = std::min(d(layers), std::ceil((distance - 2.0 * head) / (2.0 * per_layer)));
  const double kept = kept_layers * per_layer + (distance > 0 ? head : 0.0);
  const double prefetched = std::clamp(std::min(d(l.zero.prefetch_bucket_size), d(l.zero.max_live_parameters) - kept),
                                       0.0, (d(layers) - kept_layers) * per_layer);
  return kept + prefetched;
}

// Megatron-FSDP (megatron/core/distributed/fsdp/src/megatron_fsdp): megatron_fsdp.py sets the communication unit C
// to --suggested-communication-unit-size or, unset, to twice the mean FSDP unit under optim_grads_params (else 10^9)
// raised to at least 10^9 elements; the all-gather prefetches (param_and_grad_buffer.py AllGatherPipeline) the next
// units until C/2 elements are in flight, the reduce-scatter queue (GradReducePipeline) holds up to C. With
// --fsdp-double-buffer (FixedPoolAllocator) two units of each are allocated for the whole step and the prefetch stops
// at the second. At the start of the backward the last unit computes its gradient while the ones before it are
// gathered; the queue fills later, as each unit's backward frees its activations.
MegatronFsdpUnits megatron_fsdp_units(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const MegatronFsdpSettings& f = l.megatron_fsdp;
  const bool gathers = l.sharding.params != Shard::none, reduces = l.sharding.grads != Shard::none;
  if (!f.enabled || !(gathers || reduces) || l.dp * l.cp <= 1) return {};  // every layout's stages pass here
  const std::int64_t layers = stage_layers(m, l, stage);
  if (layers == 0) return {};
  const double unit = stage_decoder_parameters_per_gpu(m, l, stage) / d(layers);
  const double c = f.unit_size > 0 ? d(f.unit_size) : std::max(1e9, gathers ? 2.0 * unit : 0.0);
  MegatronFsdpUnits u;
  u.layer = unit;
  u.layers = layers;
  if (gathers && unit > 0)
    u.gathered = 1.0 + std::min(d(layers - 1), f.double_buffer ? 1.0 : std::ceil(std::floor(c / 2.0) / unit));
  if (reduces) u.gradients = f.double_buffer ? std::min(2.0, d(layers)) : 1.0;
  return u;
}

MegatronFsdpBufferBytes megatron_fsdp_buffer_bytes(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const MegatronFsdpUnits u = megatron_fsdp_units(m, l, stage);
  if (u.gathered == 0 && u.gradients == 0) return {};
  const double unit = u.layer;
  // --fp8-param-gather: the linear weights are kept and gathered in FP8, 1 B (the norms in the weights' format).
  const double fp8_saving = l.fp8_param_gather ? (l.precision.weight_bytes - 1.0) *
                                                     stage_linear_weight_parameters_per_gpu(m, l, stage) / d(u.layers)
                                               : 0.0;
  // The LM head is no FSDP unit: gathered for the loss and its own backward, which starts the backward with its
  // unsharded gradient (megatron_fsdp.py gathers and reduces every module's parameters, units or not).
  const double head = stage == head_stage(l) ? d(m.hidden_size) * d(m.vocab_size) / d(l.tp) : 0.0;
  return {u.gathered * (unit * l.precision.weight_bytes - fp8_saving) +
              (u.gathered > 0 ? head * l.precision.weight_bytes : 0.0),
          u.gradients * unit * l.precision.grad_bytes + (u.gradients > 0 ? head * l.precision.grad_bytes : 0.0)};
}

namespace {

// 4D paper Eq. 10 / PaRO section 3 (Megatron and any framework without all-gathered units): weights, gradients
// and optimizer states whole for the step, activations at their peak.
StageMemory eq18_stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                              const StageCounts& n) {
  const std::int64_t stage = n.stage;
  const double params = n.params;
  // Thesis Sec. 3.1.2: with LoRA the base weights are frozen (weights only) and the adapters train.
  const double trainable = l.lora.enabled() ? lora_stage_parameters_per_rank(m, l, stage).per_rank() : params;
  const double stored = l.lora.enabled() ? params + trainable : params;
  // Routed experts are sharded over the expert data-parallel group instead (theoretical_memory_usage.py,
  // num_bytes_per_parameter(expert_data_parallel_size)); LoRA on a model with experts is refused (build_layout).
  const double experts = n.experts;
  const auto sharded = [&](double dense_params, Shard shard) {
    return (dense_params - experts) / shard_divisor(shard, l, c.gpus_per_node) +
           (experts > 0 ? experts / expert_shard_divisor(shard, l, c.gpus_per_node) : 0.0);
  };
  const Precision& prec = l.precision;
  StageMemory s;
  s.stage = stage;
  // 4D paper Eq. 10: BF16 weights and FP32 gradients whole, 12 bytes of Adam state over d·c; PaRO
  // section 3 generalises each of the three to N / I / G sharding.
  s.fp8 = fp8_weight_copy_bytes(m, l, stage) + fp8_scaling_state_bytes(m, l, stage);
  const MegatronFsdpBufferBytes units = megatron_fsdp_buffer_bytes(m, l, stage);
  s.params = prec.weight_bytes * (sharded(stored, l.sharding.params) + zero_hpz_secondary_parameters(c, l, stored) +
                                  zero3_gathered_parameters(m, l, stage)) +
             units.params + s.fp8;
  s.grads = prec.grad_bytes * sharded(trainable, l.sharding.grads) + zero_gradient_bucket_bytes(l) + units.grads;
  const double optimizer_shard_params = sharded(trainable, l.sharding.optimizer);
  // An offloaded optimizer keeps (1 − fraction) of its states on the GPU.
  s.optimizer = (1.0 - l.optimizer_offload) * prec.optimizer_bytes * optimizer_shard_params;
  const double offloaded = offloaded_activation_bytes(m, l);
  s.activations = stage_activation_bytes(m, l, n) - offloaded;
  s.host = host_optimizer_bytes(l, optimizer_shard_params) + offloaded;
  s.residual =
      residual_bytes(m, l, r, stage, (1.0 - l.optimizer_offload) * optimizer_shard_params, c.gpu.usable_memory_bytes);
  return s;
}

// PyTorch FSDP1 (use_orig_params, PEFT LoRA, HF Llama), one moment of the step; see StepMoment.
StageMemory fsdp_stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                              const StageCounts& n, StepMoment moment) {
  const std::int64_t stage = n.stage;
  const double params = n.params;
  const double trainable = l.lora.enabled() ? lora_stage_parameters_per_rank(m, l, stage).per_rank() : params;
  const double stored = l.lora.enabled() ? params + trainable : params;
  const Precision& prec = l.precision;
  const double optimizer_shard_params = trainable / shard_divisor(l.sharding.optimizer, l, c.gpus_per_node);
  StageMemory s;
  s.stage = stage;
  s.moment = moment;
  // Sharded weights (frozen base BF16 + adapters), the root unit whole, the adapters' AdamW m and v (torch keeps
  // them in the parameter dtype: BF16 → optimizer_bytes 4).
  s.fp8 = fp8_scaling_state_bytes(m, l, stage);
  // Under a pipeline schedule FSDP neither reshards after backward nor reduce-scatters until the last micro-batch's
  // backward (torch/distributed/pipelining/stage.py backward_maybe_with_nosync sets reshard_after_backward and
  // requires_gradient_sync False before it): the stage's weights stay gathered and its gradients accumulate unsharded
  // from the first backward to the last, beside the sharded gradient the last one produces, in the reduce dtype (the
  // gradient bytes): FSDP2 casts a BF16 gradient it does not reduce to the reduce dtype and accumulates there
  // (torch/distributed/fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed).
  const bool pipelined = l.pp > 1;
  s.params = (pipelined ? prec.weight_bytes * stored
                        : prec.weight_bytes * stored / shard_divisor(l.sharding.params, l, c.gpus_per_node) +
                              fsdp_root_unit_bytes(m, l, stage)) +
             s.fp8;
  s.optimizer = prec.optimizer_bytes * optimizer_shard_params;
  const double accumulated_grads = pipelined ? prec.grad_bytes * trainable : 0.0;
  const double logits = logits_elements(m, l, stage);
  const bool by_layers = recompute_by_layers(l);
  const double layer_bytes = by_layers ? layers_by_recompute_bytes(m, l, n) : activation_bytes_per_layer(m, l);
  if (moment == StepMoment::activations) {
    s.grads = accumulated_grads;
    // At the loss: every layer's checkpoint (layer input; SP-sharded or not), the head's Eq. 14 terms and, under
    // TP, loss_parallel's decomposed log_softmax (torch.distributed.tensor.parallel.loss._log_softmax keeps
    // `shifted` and exp(shifted) in FP32 next to its result: 8 B per local logit). No gradient exists yet but, under a
    // pipeline, the earlier micro-batches' accumulated ones.
    s.activations = layers_in_flight(m, l, stage) * layer_bytes;
    if (stage == head_stage(l))
      s.activations +=
          lm_head_activation_bytes(m, l) * head_microbatches_in_flight(l) + (l.tp > 1 ? 8.0 * logits : 0.0);
    s.residual = residual_bytes(m, l, r, stage, optimizer_shard_params, c.gpu.usable_memory_bytes);
    return s;
  }
  // Last decoder unit's backward: every gradient a GPU holds, sharded (gradient_parameters_per_gpu). The unit buffers:
  // 2 unsharded parameter sets, the rest unsharded gradients. Activations: the layer re-materialised and its input.
  const double grad_params = gradient_parameters_per_gpu(m, l, stage);
  const double units = d(l.fsdp_unit_buffers), unit_param_share = std::min(units, 2.0) / std::max(units, 1.0);
  const double unit_buffers = pipelined ? 0.0 : fsdp_unit_buffer_bytes(m, l);
  s.params += unit_param_share * unit_buffers;
  s.grads = prec.grad_bytes * grad_params / shard_divisor(l.sharding.grads, l, c.gpus_per_node) +
            (1.0 - unit_param_share) * unit_buffers + accumulated_grads;
  s.activations =
      layer_bytes + rematerialised_layer_bytes(m, l, false) * (by_layers ? rematerialised_layers(m, l, n) : 1.0);
  s.residual = residual_bytes(m, l, r, stage, optimizer_shard_params, c.gpu.usable_memory_bytes, false);
  return s;
}

}  // namespace

StageMemory stage_memory_at(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                            std::int64_t stage, StepMoment moment) {
  const StageCounts n = stage_counts(m, l, stage);
  if (!fsdp_step_model(l)) return eq18_stage_memory(m, c, l, r, n);
  return fsdp_stage_memory(m, c, l, r, n, moment);
}

StageMemory stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                         const StageCounts& n) {
  if (!fsdp_step_model(l)) return eq18_stage_memory(m, c, l, r, n);
  const StageMemory a = fsdp_stage_memory(m, c, l, r, n, StepMoment::activations);
  const StageMemory g = fsdp_stage_memory(m, c, l, r, n, StepMoment::gradients);
  return g.total() > a.total() ? g : a;
}

StageMemory stage_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                         std::int64_t stage) {
  return stage_memory(m, c, l, r, stage_counts(m, l, stage));
}

namespace {

// A stage's bytes (on the GPU and on the host) stay countable: every output reports them as 64-bit integers
// (kMaxByteCount); past it the layout is refused, naming the sequence and micro-batch that drive activations.
void require_countable_bytes(const ModelSpec& m, const Layout& l, const StageMemory& s) {
  const double bytes = s.total() + s.host;
  if (bytes <= kMaxByteCount) return;
  char text[160];
  std::snprintf(text, sizeof text, ": a GPU of stage %lld would hold more bytes than the %.4g (2^62) headroom counts",
                static_cast<long long>(s.stage), kMaxByteCount);
  throw Error(m.name + " at " + field("seq") + " " + std::to_string(l.seq) + ", " + field("mbs") + " " +
              std::to_string(l.mbs) + text);
}

}  // namespace

MemoryEstimate estimate_memory(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r) {
  MemoryEstimate e;
  e.stages.reserve(static_cast<std::size_t>(l.pp));
  for (std::int64_t i = 0; i < l.pp; ++i) {
    e.stages.push_back(stage_memory(m, c, l, r, i));
    require_countable_bytes(m, l, e.stages.back());
    if (e.stages.back().total() > e.peak_bytes) {
      e.peak_bytes = e.stages.back().total();
      e.peak_stage = i;
    }
  }
  e.paper_total_bytes = paper_total_bytes(m, l);
  e.capacity_bytes = c.gpu.usable_memory_bytes;
  e.margin_bytes = e.capacity_bytes - e.peak_bytes;
  return e;
}

namespace {
// Even split: the middle stages hold the first stage's layers with fewer micro-batches in flight. Uneven: the second
// stage, with more layers than the first and one micro-batch fewer, can be the peak (Llama 3's 7 + 8).
bool second_stage_can_peak(const Layout& l) { return !l.split.even() && l.pp > 2; }

// A layer layout's middle stage with the most decoder layers (the first of them), which the step's pipeline waits on.
std::int64_t heaviest_middle_stage(const ModelSpec& m, const Layout& l) {
  std::int64_t best = 1, most = stage_layers(m, l, 1);
  for (std::int64_t stage = 2; stage < l.pp - 1; ++stage)
    if (const std::int64_t n = stage_layers(m, l, stage); n > most) best = stage, most = n;
  return best;
}
}  // namespace

PipelineStageCounts pipeline_stage_counts(const ModelSpec& m, const Layout& l) {
  const StageCounts first = stage_counts(m, l, 0);  // one pipeline stage: first = second = last, counted once
  if (l.pp == 1) return {first, first, first};
  const StageCounts last = stage_counts(m, l, l.pp - 1);
  if (l.pp == 2) return {first, last, last};
  return {first, stage_counts(m, l, l.split.layer_layout ? heaviest_middle_stage(m, l) : 1), last};
}

double peak_memory_bytes(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r,
                         const PipelineStageCounts& n) {
  const double first = stage_memory(m, c, l, r, n.first).total();
  if (l.pp == 1) return first;
  if (l.split.layer_layout) {  // any stage may peak: each priced
    double peak = first;
    for (std::int64_t stage = 1; stage < l.pp; ++stage)
      peak = std::max(peak, stage_memory(m, c, l, r, stage_counts(m, l, stage)).total());
    return peak;
  }
  const double ends = std::max(first, stage_memory(m, c, l, r, n.last).total());
  if (!second_stage_can_peak(l)) return ends;
  return std::max(ends, stage_memory(m, c, l, r, n.second).total());
}

double peak_memory_bytes(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const ResidualModel& r) {
  return peak_memory_bytes(m, c, l, r, pipeline_stage_counts(m, l));
}

// megatron/training/arguments.py dtype_map: fp32 4 B, bf16 and fp16 2 B, fp8 1 B (torch.uint8).
double dtype_bytes(Dtype t) {
  switch (t) {
    case Dtype::fp32: return 4.0;
    case Dtype::bf16:
    case Dtype::fp16: return 2.0;
    case Dtype::fp8: return 1.0;
  }
  return 4.0;
}

// megatron/training/arguments.py (accumulate_allreduce_grads_in_fp32: forced with BF16 weights, given with --fp16)
// and param_and_grad_buffer.py (grad_dtype).
double grad_buffer_bytes(const OptimizerPrecision& o, double weight_bytes) {
  const bool fp32_buffer =
      o.fp16 ? o.accumulate_allreduce_grads_in_fp32 : o.main_grads == Dtype::fp32 && !o.grad_reduce_in_bf16;
  return fp32_buffer ? dtype_bytes(Dtype::fp32) : weight_bytes;
}

// megatron/core/optimizer/optimizer.py and distrib_optimizer.py _copy_model_grads_to_main_grads: the step takes
// main_grad.float(), an FP32 copy of FP16 gradients beside the master weights (docs/user-guide/features/
// dist_optimizer.md: FP16 parameters and gradients 20 B a parameter, 4 + 16/d distributed). Counted with the
// optimizer's states, as that table counts it; it lives from the step to the next zero_grad.
double main_grad_copy_bytes(const OptimizerPrecision& o, double weight_bytes) {
  return o.fp16 && grad_buffer_bytes(o, weight_bytes) < dtype_bytes(Dtype::fp32) ? dtype_bytes(Dtype::fp32) : 0.0;
}

// megatron/core/optimizer/distrib_optimizer.py (master_param int16 with store_param_remainders and bf16) and
// optimizer_config.py (use_precision_aware_optimizer_no_fp8_or_ds_fp8).
double main_param_bytes(const OptimizerPrecision& o, double weight_bytes, Fp8Recipe fp8) {
  const bool in_te =
      o.precision_aware && (o.main_params != Dtype::fp32 || fp8 == Fp8Recipe::none || fp8 == Fp8Recipe::delayed);
  if (!in_te) return dtype_bytes(Dtype::fp32);
  if (o.main_params == Dtype::fp32 && weight_bytes == 2.0) return 2.0;  // the remainder beside the BF16 weight
  return dtype_bytes(o.main_params);
}

// megatron/core/optimizer/__init__.py: Transformer Engine's FusedAdam with exp_avg_dtype and exp_avg_sq_dtype.
double adam_moment_bytes(const OptimizerPrecision& o) { return dtype_bytes(o.exp_avg) + dtype_bytes(o.exp_avg_sq); }

// 4D paper Eq. 10's 4 B of gradients and 12 B of Adam state per parameter, in the formats given.
Precision model_state_precision(const OptimizerPrecision& o, const Precision& framework, Fp8Recipe fp8) {
  if (!o.given()) return framework;
  Precision p = framework;
  p.grad_bytes = grad_buffer_bytes(o, framework.weight_bytes);
  p.optimizer_bytes = main_param_bytes(o, framework.weight_bytes, fp8) + adam_moment_bytes(o) +
                      main_grad_copy_bytes(o, framework.weight_bytes);
  return p;
}

}  // namespace headroom
