#include "headroom/estimator/flops.hpp"

#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/core/units.hpp"

namespace headroom {
namespace {

using units::d;

// Narayanan et al. 2021 Appendix counts 2 GEMMs of h·h_ffn per MLP; a gated one has 3 (gate, up, down).
double gated_multiplier(const ModelSpec& m) { return (mlp_input_projections(m.mlp) + 1.0) / 2.0; }

// A layer's attention in units of 12·B·s·h² (model_flops_per_step's bracket).
double attention_flops_units(const ModelSpec& m, std::int64_t seq) {
  const double h = d(m.hidden_size), s = d(seq);
  // QKV+O GEMMs and s² terms, scaled by a·d_h/h (Megatron-LM's training.py, query_projection_to_hidden_size_ratio)
  // Latent attention: its projections' weights (6 FLOPs per weight and token) and the q·k, p·v products of widths
  // a·d_qk and a·d_v (training.py's multi_latent_attention branch, without its causal halving).
  return latent_attention(m) ? attention_parameters_per_layer(m) / (2.0 * h * h) +
                                   causal_attention_share(m, seq) * s * core_attention_width(m) / (h * h)
                             : (1.0 + d(m.num_kv_heads) / d(m.num_heads) + causal_attention_share(m, seq) * s / h) *
                                   (query_width(m) / h);
}

// A layer's FFN in the same units: a dense one, or k routed experts and the shared one (training.py, moe_layer_flops).
double mlp_flops_units(const ModelSpec& m, bool experts) {
  const double f = experts ? d(m.moe_router_topk) * d(m.moe_ffn_hidden_size) + d(m.shared_expert_ffn_hidden_size)
                           : d(m.ffn_hidden_size);
  return gated_multiplier(m) * f / d(m.hidden_size);
}

}  // namespace

double causal_attention_share(const ModelSpec& m, std::int64_t seq) {
  if (m.sliding_window <= 0 || seq <= m.sliding_window) return 1.0;
  const double s = d(seq), w = d(m.sliding_window);
  const double windowed = (s * w - w * w / 2.0) / (s * s / 2.0);
  const double share = d(window_layers(m)) / d(m.num_layers);
  return 1.0 - share * (1.0 - windowed);
}

// Narayanan et al. 2021 Appendix, in Megatron-LM's Llama form (see the header): 12·B·s·L·h²·[...].
double model_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences) {
  const double h = d(m.hidden_size), s = d(seq), L = d(m.num_layers);
  const double moe = d(moe_layers(m)) / L;
  const double mlp = (1.0 - moe) * mlp_flops_units(m, false) + moe * mlp_flops_units(m, true);
  const double logits = d(m.vocab_size) / (2.0 * L * h);
  return 12.0 * sequences * s * L * h * h * (attention_flops_units(m, seq) + mlp + logits);
}

// Megatron-LM's training.py num_floating_point_operations with mtp_num_layers: each is one more layer of the last
// layer's kind, its norms and eh_proj (3h + 2h² per token, times 6), and one more logit GEMM (6·h·V per token).
double mtp_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences, std::int64_t mtp_layers) {
  if (mtp_layers <= 0) return 0.0;
  const double h = d(m.hidden_size), tokens = sequences * d(seq);
  const double layer =
      12.0 * tokens * h * h * (attention_flops_units(m, seq) + mlp_flops_units(m, mtp_layer_has_experts(m)));
  return d(mtp_layers) * (layer + 6.0 * tokens * (3.0 * h + 2.0 * h * h + h * d(m.vocab_size)));
}

// Narayanan et al. 2021 Eq. 3.
double narayanan_recompute_flops_per_step(const ModelSpec& m, std::int64_t seq, double sequences) {
  const double h = d(m.hidden_size), s = d(seq), l = d(m.num_layers), V = d(m.vocab_size);
  return 96.0 * sequences * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double model_flops_per_token(const ModelSpec& m, std::int64_t seq) {
  return model_flops_per_step(m, seq, 1.0) / d(seq);
}

// Shoeybi et al. 2019 Sec. 3 (column-parallel QKV and fc1, row-parallel proj and fc2).
LayerGemms layer_gemms(const ModelSpec& m, const Layout& l) {
  const double h = d(m.hidden_size), f = d(m.ffn_hidden_size), t = d(l.tp);
  const double tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double fc1_out = mlp_input_projections(m.mlp) * f;  // gate and up fused
  LayerGemms g;
  g.qkv = {tokens, (query_width(m) + 2.0 * kv_width(m)) / t, h};
  g.proj = {tokens, h, query_width(m) / t};
  g.fc1 = {tokens, fc1_out / t, h};
  g.fc2 = {tokens, h, f / t};
  return g;
}

// Dao 2023 Sec. 4: 4·s²·a·d_h (4·s²·h when a·d_h = h) per sequence and layer non-causal, halved by the causal mask.
double attention_flops_forward(const ModelSpec& m, const Layout& l) {
  const double s = d(l.seq);
  return 2.0 * s * s * causal_attention_share(m, l.seq) * d(l.mbs) * core_attention_width(m) / (d(l.tp) * d(l.cp));
}

double lm_head_flops_forward(const ModelSpec& m, const Layout& l) {
  return 2.0 * d(l.seq) * d(l.mbs) * d(m.hidden_size) * d(m.vocab_size) / (d(l.tp) * d(l.cp));
}

// Thesis Eq. 3.3 per TP rank (Sec. 3.2 split): 2 FLOPs per token and adapter element.
double lora_flops_forward(const ModelSpec& m, const Layout& l) {
  return 2.0 * d(l.seq) * d(l.mbs) / d(l.cp) * lora_layer_split(m, l.lora, l.tp).per_rank();
}

double op_recomputed_gemm_share(const ModelSpec& m) {
  const double h = d(m.hidden_size), q = query_width(m), kv = kv_width(m), f = d(m.ffn_hidden_size);
  const double gated = mlp_input_projections(m.mlp);
  const double all = h * (q + 2.0 * kv) + q * h + (gated + 1.0) * h * f;
  const double recomputed = h * kv + q * h + h * f;  // wk, wo and w3 (gated) or w2 (plain): each h·f
  return recomputed / all;
}

// Korthikanti et al. 2023 Sec. 5 (selective, full); torchtitan's SelectiveAC policy (op); Megatron-LM's
// --recompute-modules (transformer_layer.py, moe_layer.py: a checkpointed MLP or MoE block runs its forward again,
// collectives included).
RecomputeFactors recompute_factors(const ModelSpec& m, const Layout& l, bool experts) {
  switch (l.recompute) {
    case Recompute::none: return {};
    case Recompute::selective: {
      const bool ffn = experts ? recomputes(l, RecomputeModule::moe) : recomputes(l, RecomputeModule::mlp);
      return {0.0, recomputes(l, RecomputeModule::core_attn) ? 1.0 : 0.0, 0.0, ffn ? 0.5 : 0.0,
              experts && ffn ? 1.0 : 0.0};
    }
    case Recompute::full: return {1.0, 1.0, 1.0, 1.0, 1.0};
    case Recompute::op: return {op_recomputed_gemm_share(m), 0.0, 1.0, 0.5, 0.0};
  }
  return {};
}

}  // namespace headroom
