#include "headroom/estimator/throughput.hpp"

#include "headroom/core/collectives.hpp"

#include <algorithm>
#include <cmath>

#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/core/units.hpp"

namespace headroom {
namespace {

using units::d;

// Bytes of a DP volume (elements summed over all N GPUs, sharding.hpp) as seconds on one GPU's links.
double volume_seconds(const Volume& v, double bytes_per_element, const CommSetup& s, const PerfContext& p) {
  const double n = d(s.gpus);
  double t = v.intra / n * bytes_per_element / p.intra.bytes_per_s;
  if (v.inter > 0) t += v.inter / n * bytes_per_element / p.inter.bytes_per_s;
  if (v.total() > 0) t += d(s.gpus - 1) * (v.inter > 0 ? p.inter.latency_s : p.intra.latency_s);
  return t;
}

// What of a collective stays exposed when it runs beside `hidden` seconds of work on another stream.
double exposed_behind(double comm, double hidden) { return std::max(0.0, comm - hidden); }

// One ring all-gather (or reduce-scatter) of a `bytes` tensor over the layout's TP group, inside a node or across the
// nodes it spans (ring_gather_across_nodes_seconds).
double tp_ring_seconds(const PerfContext& p, const Layout& l, double bytes) {
  const std::int64_t per_node = members_per_node(1, l.tp, p.gpus_per_node);
  return per_node >= l.tp ? ring_gather_seconds(bytes, l.tp, p.intra)
                          : ring_gather_across_nodes_seconds(bytes, l.tp, per_node, p.intra, p.inter);
}

}  // namespace

std::int64_t members_per_node(std::int64_t stride, std::int64_t size, std::int64_t gpus_per_node) {
  if (stride >= gpus_per_node) return 1;
  return std::min(size, gpus_per_node / stride);
}

std::int64_t sharding_group_size(std::int64_t stride, std::int64_t group, std::int64_t gpus_per_node) {
  std::int64_t m = members_per_node(stride, group, gpus_per_node);
  while (group % m != 0) --m;
  return m;
}

std::int64_t sharding_group_size(const Layout& l, std::int64_t gpus_per_node) {
  return sharding_group_size(l.tp, l.dp * l.cp, gpus_per_node);
}

bool zero_hpz_off_node(const Layout& l, std::int64_t gpus_per_node) {
  return zero_hpz(l.zero, l.sharding) && l.zero.hpz_partition_size != sharding_group_size(l, gpus_per_node);
}

double gemm_shape_factor(double m, double n, double k, double half_dim) {
  return m / (m + half_dim) * (n / (n + half_dim)) * (k / (k + half_dim));
}

double gemm_wave_factor(double m, double n, double units, double tile) {
  if (units <= 0 || tile <= 0) return 1.0;
  const double tiles = std::ceil(m / tile) * std::ceil(n / tile);
  return tiles / (std::ceil(tiles / units) * units);
}

double gemm_efficiency(const PerfContext& p, const GemmShape& g, bool fp8) {
  // The device's curve for the precision (FP8 without one: BF16's fraction of the FP8 peak) at the stack's fraction.
  if (p.device_curves)
    return p.coef.stack_gemm_fraction *
           gemm_curve_fraction(fp8 && !p.fp8_curve.empty() ? p.fp8_curve : p.bf16_curve, g.m, g.n, g.k);
  return p.gemm_efficiency * gemm_shape_factor(g.m, g.n, g.k, p.coef.gemm_half_dim) *
         gemm_wave_factor(g.m, g.n, p.coef.gemm_wave_units, p.coef.gemm_tile);
}

double attention_efficiency(const PerfContext& p, const Layout& l, double head_dim, double query_tokens) {
  double efficiency = p.attention_efficiency, half = p.attention_half_tokens;
  int backend = p.framework_attention_curve;
  if (l.attention_backend != AttentionBackend::framework)
    backend = l.attention_backend == AttentionBackend::cudnn ? 0 : 1;
  if (backend >= 0) {
    const auto& [e, h] = p.attention_curves[static_cast<std::size_t>(backend)][curve_head_dim_index(head_dim)];
    if (!(e > 0))
      throw Error(field("attention_backend") + " " + std::string(to_string(l.attention_backend)) +
                  ": this GPU's attention is not priced by kernel curves of that backend (data/kernels; valid: leave "
                  "it to the framework's)");
    efficiency = e, half = h;
  }
  return efficiency * query_tokens / (query_tokens + half);
}

// Patarasuk & Yuan 2009 ring; nccl-tests bus-bandwidth factor (n − 1)/n for all-gather / reduce-scatter.
double ring_gather_seconds(double bytes, std::int64_t n, const Link& link) {
  if (n <= 1) return 0.0;
  return d(n - 1) * link.latency_s + bytes * bus_bandwidth_factor(Collective::all_gather, n) / link.bytes_per_s;
}

// PaRO Table 3 (ZeRO-3 A-G row) ring volumes per GPU: g/n of the ring's (n − 1)/n·bytes inter-node, the rest intra.
double ring_gather_across_nodes_seconds(double bytes, std::int64_t n, std::int64_t m, const Link& intra,
                                        const Link& inter) {
  if (n <= 1) return 0.0;
  const double per_gpu = bytes * bus_bandwidth_factor(Collective::all_gather, n), crossing = 1.0 / d(m);
  return d(n - 1) * inter.latency_s + per_gpu * (1.0 - crossing) / intra.bytes_per_s +
         per_gpu * crossing / inter.bytes_per_s;
}

double ring_collective_seconds(Collective op, double bytes, std::int64_t n, std::int64_t m, const Link& intra,
                               const Link& inter) {
  if (op != Collective::all_gather && op != Collective::reduce_scatter && op != Collective::all_reduce)
    throw Error("collective " + std::string(to_string(op)) + " is not a ring (all_gather, reduce_scatter, all_reduce)");
  const double one =
      m >= n ? ring_gather_seconds(bytes, n, intra) : ring_gather_across_nodes_seconds(bytes, n, m, intra, inter);
  return op == Collective::all_reduce ? 2.0 * one : one;
}

CpExposed exposed_cp_seconds(const Layout& l, const CpTraffic& t, double attention_f, double overlap) {
  const double attention_b = kAttentionBackwardRatio * attention_f, c = d(l.cp);
  switch (l.cp_exchange) {
    case CpExchange::all_gather: return {t.kv_s, t.kv2_s};
    case CpExchange::a2a: return {t.a2a_s, t.a2a_s};
    case CpExchange::allgather:
      return {exposed_behind(t.kv_s, overlap * attention_f / c),
              exposed_behind(t.kv_s, overlap * attention_b / c) +
                  exposed_behind(t.kv2_s, overlap * attention_b * (c - 1.0) / c)};
    case CpExchange::alltoall:
      return {exposed_behind(t.kv_s, overlap * attention_f), exposed_behind(t.kv_s + t.kv2_s, overlap * attention_b)};
    case CpExchange::p2p: break;
  }
  return {exposed_behind(t.kv_s, overlap * attention_f), exposed_behind(t.kv2_s, overlap * attention_b)};
}

double tp_overlapped_comm_seconds(double comm, double gemm, std::int64_t tp) {
  if (tp <= 1) return comm;
  return std::max(0.0, comm - gemm) + std::min(comm, gemm) / d(tp);
}

// Thesis Sec. 3.1.2: LoRA freezes the base weights; its adapters are stored (and gathered) next to them.
DpParameters dp_parameters_per_gpu(const ModelSpec& m, const Layout& l, const StageCounts& n) {
  const double base = n.params;
  if (!l.lora.enabled()) return {base, base, base};
  const double adapters = lora_stage_parameters_per_rank(m, l, n.stage).per_rank();
  return {base + adapters, adapters, gradient_parameters_per_gpu(m, l, n.stage)};
}

DpParameters dp_parameters_per_gpu(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  return dp_parameters_per_gpu(m, l, stage_counts(m, l, stage));
}

namespace {

PassTimes scaled(PassTimes x, double k) {
  x.gemm *= k;
  x.attention *= k;
  x.elementwise *= k;
  x.overhead *= k;
  x.tp *= k;
  x.cp *= k;
  x.pp *= k;
  x.ep *= k;
  return x;
}

PassTimes compute_only(const LayerCompute& c) {
  PassTimes x;
  x.gemm = c.gemm;
  x.attention = c.attention;
  x.elementwise = c.elementwise;
  x.overhead = c.overhead;
  return x;
}

// In FP8 or BF16, at that precision's peak and efficiency: the device's FP8 curve where it has one, else the same
// fraction of either peak (torchao/float8/roofline_utils.py: one pct_achievable_gemm_tops for both).
double gemm_seconds(const PerfContext& p, const GemmShape& g, bool fp8) {
  return g.flops() / ((fp8 ? p.fp8_peak_flops : p.peak_flops) * gemm_efficiency(p, g, fp8));
}
double gemm_seconds(const PerfContext& p, const GemmShape& g) { return gemm_seconds(p, g, false); }

}  // namespace

AttentionSeconds unfused_attention_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  const double s = d(l.seq), d_h = head_dim(m);
  const double scores = d(l.mbs) * d(m.num_heads) / d(l.tp) * (s / d(l.cp)) * s;
  const GemmShape shape{s / d(l.cp), s, d_h};  // per head; QKᵀ's k, and the other GEMMs' m or n, is d_h
  const double gemm =
      std::max(2.0 * scores * d_h / (p.peak_flops * gemm_efficiency(p, shape)), 2.0 * scores / p.hbm_bytes_per_s);
  const bool dropout = m.attention_dropout > 0;
  // ALiBi's bias is the score GEMM's C (torch.baddbmm with beta 1: the bias expanded into the scores, then read by
  // the GEMM; bigscience-workshop/Megatron-DeepSpeed megatron/model/transformer.py ParallelAttention): 4 B a score.
  const double forward_bytes = 4.0 + (dropout ? 5.0 : 0.0) + (m.alibi ? 4.0 : 0.0),
               backward_bytes = 6.0 + (dropout ? 5.0 : 0.0);
  return {2.0 * gemm + forward_bytes * scores / p.hbm_bytes_per_s,
          4.0 * gemm + backward_bytes * scores / p.hbm_bytes_per_s};
}

namespace {

// The shared expert's two GEMMs, one micro-batch forward: fc1 (gate and up) and fc2 (down) of a dense FFN of its
// width split over t, over the s·b/c tokens SP gathers; none without a shared expert.
struct SharedExpertGemms {
  double fc1 = 0, fc2 = 0;
};
SharedExpertGemms shared_expert_gemm_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l, bool fp8) {
  if (m.shared_expert_ffn_hidden_size <= 0) return {};
  const double h = d(m.hidden_size), t = d(l.tp), tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double f = d(m.shared_expert_ffn_hidden_size);
  return {gemm_seconds(p, {tokens, mlp_input_projections(m.mlp) * f / t, h}, fp8),
          gemm_seconds(p, {tokens, h, f / t}, fp8)};
}

// The FFN GEMMs of a layer with experts, one micro-batch forward (Megatron-LM's MoELayer with the alltoall
// dispatcher and grouped GEMM): the shared expert as a dense FFN of its width over t; the router over the s·b/(t·c)
// tokens this GPU holds (SP); the routed experts over the token copies this GPU receives, routed_copies_per_gpu,
// spread over its E/ep experts, each GEMM of an expert timed at its own shape (a grouped GEMM runs them as one
// launch, at the efficiency of the per-expert tiles).
double moe_ffn_gemm_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l, bool fp8) {
  const double h = d(m.hidden_size), t = d(l.tp), tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double gated = mlp_input_projections(m.mlp);
  const SharedExpertGemms shared = shared_expert_gemm_seconds(m, p, l, fp8);
  const double seconds = gemm_seconds(p, {tokens / t, d(m.num_experts), h}) + shared.fc1 + shared.fc2;
  const double local_experts = d(m.num_experts) / d(l.ep), e = d(l.expert_tp());
  const double per_expert = routed_copies_per_gpu(m, l) / local_experts, f = d(m.moe_ffn_hidden_size) / e;
  return seconds +
         local_experts * (gemm_seconds(p, {per_expert, gated * f, h}, fp8) + gemm_seconds(p, {per_expert, h, f}, fp8));
}

// Latent attention's GEMMs (multi_latent_attention.py): the down projections of q and kv on every TP rank over the
// s·b/c tokens SP gathers, the up projections and the output projection split over t.
double mla_gemm_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l, bool fp8) {
  const double h = d(m.hidden_size), t = d(l.tp), a = d(m.num_heads), tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank), d_v = d(m.v_head_dim);
  double seconds = gemm_seconds(p, {tokens, kv_r + d(m.qk_rope_head_dim), h}, fp8) +
                   gemm_seconds(p, {tokens, a * (d(m.qk_nope_head_dim) + d_v) / t, kv_r}, fp8) +
                   gemm_seconds(p, {tokens, h, a * d_v / t}, fp8);
  if (q_r > 0) seconds += gemm_seconds(p, {tokens, q_r, h}, fp8);
  return seconds + gemm_seconds(p, {tokens, a * head_dim(m) / t, q_r > 0 ? q_r : h}, fp8);
}

// Transformer Engine's cast of one element: read BF16, write FP8 row- and column-wise (4 B); current scaling reads it
// once more for the amax (6 B).
double te_cast_bytes_per_element(const Layout& l) { return l.fp8 == Fp8Recipe::delayed ? 4.0 : 6.0; }

// What selective recompute's modules (layout.hpp RecomputeModule) run again in one layer's backward, one micro-batch:
// their forward GEMMs, each at its own shape (the layer's FFN GEMMs `ffn_f`, layer_passes': a dense layer's fc1 and
// fc2, or the MoE block's router, shared and routed experts; the shared expert's; latent attention's q and kv up
// projections), and the HBM seconds of their elementwise
// work: a norm reads and writes its h-wide tensor, an activation reads the first GEMM's output and writes its own, the
// MoE block permutes its token copies again, latent attention's RoPE reads and writes Q and K, and Transformer Engine
// casts the recomputed FP8 GEMMs' inputs again.
struct RecomputedModuleSeconds {
  double gemm = 0, elementwise = 0;
};
RecomputedModuleSeconds recomputed_module_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l,
                                                  bool experts, double ffn_f) {
  RecomputedModuleSeconds x;
  if (!recomputes_modules(l)) return x;
  const bool fp8 = l.fp8 != Fp8Recipe::none;
  const double h = d(m.hidden_size), t = d(l.tp), tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double local = l.sequence_parallel ? tokens / t : tokens, gated = mlp_input_projections(m.mlp);
  // An activation over n tokens of width w: reads the first GEMM's output (gated·w wide), writes w (BF16).
  const auto activation_bytes = [&](double n, double w) { return 2.0 * n * (gated + 1.0) * w; };
  double bytes = 0.0, cast_elements = 0.0;
  if (recomputes(l, RecomputeModule::layernorm))
    bytes += 4.0 * local * h * ((experts ? 1.0 : 0.0) + (latent_attention(m) ? 1.0 : 0.0));
  if (!experts && recomputes(l, RecomputeModule::mlp)) {
    x.gemm += ffn_f;
    bytes += activation_bytes(tokens, d(m.ffn_hidden_size) / t);
    cast_elements += tokens * (h + d(m.ffn_hidden_size) / t);
  }
  if (experts) {
    const bool block = recomputes(l, RecomputeModule::moe);
    const double copies = routed_copies_per_gpu(m, l), f_e = d(m.moe_ffn_hidden_size) / d(l.expert_tp());
    const double f_s = d(m.shared_expert_ffn_hidden_size) / t;
    if (block) {
      x.gemm += ffn_f;
      bytes += 4.0 * 2.0 * copies * h;  // the permutations, as layer_passes counts them
      cast_elements += copies * (h + f_e);
    } else if (recomputes(l, RecomputeModule::shared_experts) && f_s > 0) {
      const SharedExpertGemms shared = shared_expert_gemm_seconds(m, p, l, fp8);
      x.gemm += shared.fc1 + shared.fc2;
    }
    if (block || recomputes(l, RecomputeModule::moe_act)) bytes += activation_bytes(copies, f_e);
    if ((block || recomputes(l, RecomputeModule::shared_experts)) && f_s > 0) {
      bytes += activation_bytes(tokens, f_s);
      cast_elements += tokens * (h + f_s);
    }
  }
  if (recomputes(l, RecomputeModule::mla_up_proj)) {
    const double a = d(m.num_heads), q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank);
    x.gemm += gemm_seconds(p, {tokens, a * (d(m.qk_nope_head_dim) + d(m.v_head_dim)) / t, kv_r}, fp8) +
              gemm_seconds(p, {tokens, a * head_dim(m) / t, q_r > 0 ? q_r : h}, fp8);
    bytes += 2.0 * 2.0 * tokens * 2.0 * a * head_dim(m) / t;
    cast_elements += tokens * (q_r > 0 ? q_r + kv_r : h + kv_r);
  }
  if (fp8 && l.fp8_library == Fp8Library::transformer_engine) bytes += te_cast_bytes_per_element(l) * cast_elements;
  x.elementwise = bytes / p.hbm_bytes_per_s;
  return x;
}

LayerPasses layer_passes(const ModelSpec& m, const PerfContext& p, const Layout& l, bool experts) {
  const double s = d(l.seq), h = d(m.hidden_size);
  const LayerGemms g = layer_gemms(m, l);
  // FP8: the linear layers' GEMMs in FP8 (validate_on_cluster checks the GPU has an FP8 peak).
  const bool fp8 = l.fp8 != Fp8Recipe::none;
  const double attention_gemms =
      latent_attention(m) ? mla_gemm_seconds(m, p, l, fp8) : gemm_seconds(p, g.qkv, fp8) + gemm_seconds(p, g.proj, fp8);
  // The FFN's GEMMs: the MoE block's (router, shared and routed experts) or the dense MLP's fc1 and fc2.
  const double ffn_f =
      experts ? moe_ffn_gemm_seconds(m, p, l, fp8) : gemm_seconds(p, g.fc1, fp8) + gemm_seconds(p, g.fc2, fp8);
  const double gemm_f = attention_gemms + ffn_f;
  const AttentionSeconds unfused = l.flash_attention ? AttentionSeconds{} : unfused_attention_seconds(m, p, l);
  const double attn_f =
      l.flash_attention
          ? attention_flops_forward(m, l) /
                (p.peak_flops * attention_efficiency(p, l, core_attention_width(m) / d(m.num_heads), s / d(l.cp)))
          : unfused.forward;
  const double attn_b = l.flash_attention ? kAttentionBackwardRatio * attn_f : unfused.backward;
  // With experts, the token copies are permuted before the dispatch and back after the combine: read and write each.
  const double permute_bytes = experts ? 4.0 * 2.0 * routed_copies_per_gpu(m, l) * h : 0.0;
  const double elem_f = (elementwise_passes(p.coef, l) * activation_tensor_bytes(m, l) + permute_bytes +
                         unsplit_norm_residual_bytes(m, l)) /
                        p.hbm_bytes_per_s;
  const Fp8CastBytes cast = fp8_cast_bytes(m, l, experts);
  const double cast_f = cast.forward / p.hbm_bytes_per_s, cast_b = cast.backward / p.hbm_bytes_per_s;
  const RecomputeFactors rc = recompute_factors(m, l, experts);
  const RecomputedModuleSeconds modules = recomputed_module_seconds(m, p, l, experts, ffn_f);
  // Frozen base weights: the input gradient only, unless FSDP1's flat parameters hand autograd views that require
  // grad (torch/distributed/fsdp/_flat_param.py _use_unsharded_views: every view of a flat parameter that requires
  // grad does), which then computes the frozen weights' gradients too (frozen_weights_take_gradients). The root unit
  // (embedding, LM head) is frozen whole, so its GEMMs stay input-gradient only.
  const double base_bwd = gemm_backward_ratio(!l.lora.enabled() || frozen_weights_take_gradients(l));
  // LoRA adapters: small GEMMs (k or n = r), timed at the efficiency of an s·b/c × r × h shape.
  const double lora_f =
      l.lora.enabled() ? lora_flops_forward(m, l) / (p.peak_flops * gemm_efficiency(p, {g.qkv.m, d(l.lora.rank), h}))
                       : 0.0;
  LayerPasses out;
  out.forward = {gemm_f + lora_f, attn_f, elem_f + cast_f, p.coef.layer_overhead_s};
  out.backward = {(base_bwd + rc.gemm) * gemm_f + modules.gemm + (kGemmBackwardRatio + rc.gemm) * lora_f,
                  attn_b + rc.attention * attn_f,
                  (2.0 + rc.elementwise) * elem_f + cast_b + rc.elementwise * cast_f + modules.elementwise,
                  (1.0 + rc.elementwise) * p.coef.layer_overhead_s};
  return out;
}

}  // namespace

bool fp8_sequence_gathers(const Layout& l) {
  return l.fp8 != Fp8Recipe::none && (l.fp8_library == Fp8Library::torchao || l.fp8 == Fp8Recipe::delayed);
}

// Per GPU, T = s·b/c tokens: row-parallel inputs are cast on T tokens of width/t; column-parallel inputs (h wide) on
// the GPU's T/t tokens where SP gathers them in FP8 (fp8_sequence_gathers), on all T where it gathers BF16 first or
// there is no SP; the output gradients of row-parallel GEMMs (h wide), which SP gathers in backward, likewise. Latent
// attention's down projections read the norm's output in separate GEMMs (not fused), its up projections the latents
// whole.
Fp8CastElements fp8_cast_elements(const ModelSpec& m, const Layout& l, bool experts) {
  Fp8CastElements x;
  if (l.fp8 == Fp8Recipe::none) return x;
  const double h = d(m.hidden_size), t = d(l.tp), tokens = d(l.seq) * d(l.mbs) / d(l.cp);
  const double local = l.sequence_parallel && fp8_sequence_gathers(l) ? tokens / t : tokens;  // h-wide casts
  const double gated = mlp_input_projections(m.mlp);
  if (latent_attention(m)) {
    const double q_r = d(m.q_lora_rank), kv_r = d(m.kv_lora_rank), a = d(m.num_heads), d_v = d(m.v_head_dim);
    x.inputs += local * h * (q_r > 0 ? 2.0 : 1.0) + tokens * (q_r + kv_r) + tokens * a * d_v / t;
    x.grad_outputs += tokens * (q_r + kv_r + d(m.qk_rope_head_dim)) +
                      tokens * a * (head_dim(m) + d(m.qk_nope_head_dim) + d_v) / t + local * h;
  } else {
    const double q = query_width(m), kv = kv_width(m);
    x.inputs_after_norm += local * h;
    x.inputs += tokens * q / t;
    x.grad_outputs += tokens * (q + 2.0 * kv) / t + local * h;
  }
  const auto ffn = [&](double token_count, double width, double in_tokens) {  // up and down projections
    x.inputs += token_count * width;
    x.grad_outputs += token_count * gated * width + in_tokens * h;
  };
  if (!experts) {
    x.inputs_after_norm += local * h;
    ffn(tokens, d(m.ffn_hidden_size) / t, local);
  } else {
    if (m.shared_expert_ffn_hidden_size > 0) {
      x.inputs += local * h;
      ffn(tokens, d(m.shared_expert_ffn_hidden_size) / t, local);
    }
    const double copies = routed_copies_per_gpu(m, l);
    x.inputs += copies * h;
    ffn(copies, d(m.moe_ffn_hidden_size) / d(l.expert_tp()), copies);
  }
  x.weights = linear_weight_parameters_per_gpu(m, l, experts);
  return x;
}

Fp8CastBytes fp8_cast_bytes(const ModelSpec& m, const Layout& l, bool experts) {
  const Fp8CastElements x = fp8_cast_elements(m, l, experts);
  Fp8CastBytes b;
  if (l.fp8 == Fp8Recipe::none) return b;
  if (l.fp8_library == Fp8Library::torchao) {
    // With FP8 all-gather the weight is cast on the GPU's shard before the gather.
    const double weights = l.fp8_param_gather ? x.weights / (d(l.dp) * d(l.cp)) : x.weights;
    b.forward = 4.0 * (x.inputs_after_norm + x.inputs) + 6.0 * weights;
    b.backward = 4.0 * x.grad_outputs + 6.0 * weights + 6.0 * (x.inputs_after_norm + x.inputs);
    return b;
  }
  const double per_element = te_cast_bytes_per_element(l);
  b.forward = per_element * x.inputs + (l.fp8 == Fp8Recipe::delayed ? 0.0 : per_element) * x.inputs_after_norm;
  b.backward = per_element * x.grad_outputs;
  return b;
}

double fp8_weight_cast_bytes_per_step(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (l.fp8 == Fp8Recipe::none || l.fp8_library != Fp8Library::transformer_engine || l.fp8_param_gather) return 0.0;
  return te_cast_bytes_per_element(l) * stage_linear_weight_parameters_per_gpu(m, l, stage);
}

LayerPasses layer_compute_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  return layer_passes(m, p, l, false);
}

LayerPasses moe_layer_compute_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  return layer_passes(m, p, l, true);
}

// Each of the s·b/(t·c) tokens of a GPU goes to k experts; ETP all-gathers the copies of its etp ranks; the busiest
// GPU takes expert_load times the mean.
double routed_copies_per_gpu(const ModelSpec& m, const Layout& l) {
  return d(m.moe_router_topk) * d(l.seq) * d(l.mbs) / (d(l.tp) * d(l.cp)) * d(l.expert_tp()) * l.expert_load;
}

double none_drawn(double total, double there, double draws) {
  const double others = total - there;
  if (draws > others) return 0.0;
  if (draws <= 64.0 && draws == std::floor(draws)) {
    double none = 1.0;
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(draws); ++i) none *= (others - d(i)) / (total - d(i));
    return none;
  }
  // The same through log-gamma, without a loop over the draws (and for a fractional count of them).
  return std::exp(std::lgamma(others + 1.0) - std::lgamma(others - draws + 1.0) - std::lgamma(total + 1.0) +
                  std::lgamma(total - draws + 1.0));
}

double expert_nodes(const Layout& l, std::int64_t gpus_per_node) {
  return d(l.ep) / d(members_per_node(l.expert_tp(), l.ep, gpus_per_node));
}

bool group_routing_priced(const ModelSpec& m, double nodes) {
  if (!group_limited_routing(m) || nodes <= 1.0) return true;
  if (nodes != std::floor(nodes)) return false;
  const auto n = static_cast<std::int64_t>(nodes), groups = m.moe_router_num_groups;
  return groups % n == 0 || n % groups == 0;
}

double expected_remote_nodes(const ModelSpec& m, double nodes) {
  const double experts = d(m.num_experts), k = d(m.moe_router_topk);
  if (!group_limited_routing(m) || nodes <= 1.0) return (nodes - 1.0) * (1.0 - none_drawn(experts, experts / nodes, k));
  if (!group_routing_priced(m, nodes))
    throw Error("group-limited routing: " + std::to_string(m.moe_router_num_groups) + " groups over " +
                std::to_string(nodes) + " nodes, neither dividing the other, is not priced");
  const double groups = d(m.moe_router_num_groups), chosen = d(m.moe_router_group_topk);
  // A node of whole groups is reached unless none of its groups is chosen; a node holding part of a group, when its
  // group is chosen and one of the group's k/M experts of the token sits there.
  const double reached = m.moe_router_num_groups % static_cast<std::int64_t>(nodes) == 0
                             ? 1.0 - none_drawn(groups, groups / nodes, chosen)
                             : chosen / groups * (1.0 - none_drawn(experts / groups, experts / nodes, k / chosen));
  return (nodes - 1.0) * reached;
}

// One all-to-all of the alltoall dispatcher (token_dispatcher.py), per GPU: its k·s·b/(t·c) BF16 token copies of h,
// (ep − 1)/ep of them to other GPUs of the EP group (stride etp, Megatron's rank order tp-ep-dp); the part to other
// nodes on the NIC, the rest on NVLink, concurrently. The flex dispatcher (DeepEP, HybridEP) sends a token across to
// each remote node holding one of its k experts once (DeepSeek-V3 report Sec. 3.2.2) and fans it out there on NVLink:
// expected_remote_nodes tokens on the NIC instead of k·(ep − local)/ep copies. With etp > 1 the copies are also
// all-gathered (dispatch) or reduce-scattered (combine) over the etp ranks, which sit in one node when etp divides it.
double expert_dispatch_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  const double token_bytes = 2.0 * d(l.seq) * d(l.mbs) / (d(l.tp) * d(l.cp)) * d(m.hidden_size) * l.expert_load;
  const double bytes = d(m.moe_router_topk) * token_bytes;
  double seconds = 0.0;
  if (l.ep > 1) {
    const double ep = d(l.ep), local = d(members_per_node(l.expert_tp(), l.ep, p.gpus_per_node));
    const double intra = bytes * (local - 1.0) / ep;
    const double inter = l.dispatcher == ExpertDispatcher::flex
                             ? token_bytes * expected_remote_nodes(m, expert_nodes(l, p.gpus_per_node))
                             : bytes * (ep - local) / ep;
    seconds = std::max(intra > 0 ? p.intra.seconds(intra) : 0.0, inter > 0 ? p.inter.seconds(inter) : 0.0);
  }
  if (l.expert_tp() > 1) {
    const std::int64_t per_node = members_per_node(1, l.expert_tp(), p.gpus_per_node);
    const double gathered = bytes * d(l.expert_tp());
    seconds += per_node >= l.expert_tp()
                   ? ring_gather_seconds(gathered, l.expert_tp(), p.intra)
                   : ring_gather_across_nodes_seconds(gathered, l.expert_tp(), per_node, p.intra, p.inter);
  }
  return seconds;
}

PipelineEnds pipeline_end_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  const double s = d(l.seq), b = d(l.mbs), h = d(m.hidden_size), t = d(l.tp), cp = d(l.cp);
  const double head = gemm_seconds(p, GemmShape{s * b / cp, d(m.vocab_size) / t, h});
  const double logits_bytes = 4.0 * s * b * d(m.vocab_size) / (t * cp);
  PipelineEnds e;
  e.embedding_s = 2.0 * activation_tensor_bytes(m, l) / p.hbm_bytes_per_s;
  e.head_forward_s = head;
  e.head_backward_s = gemm_backward_ratio(!l.lora.enabled()) * head;  // the LM head is frozen under LoRA too
  e.loss_s = p.coef.loss_passes * logits_bytes / p.hbm_bytes_per_s * 0.5;
  if (l.mtp_layers > 0) {
    // multi_token_prediction.py _concat_embeddings: enorm and hnorm, eh_proj over the 2h-wide concatenation
    // (column-parallel, its output gathered over TP and scattered back to the sequence), then final_layernorm.
    e.mtp_proj_gemm_s = gemm_seconds(p, {s * b / cp, h / t, 2.0 * h}, l.fp8 != Fp8Recipe::none);
    e.mtp_norms_s = 3.0 * 2.0 * activation_tensor_bytes(m, l) / p.hbm_bytes_per_s;
    if (l.tp > 1) {
      // With SP: the 2h input all-gathered and the h output gathered, backward their reduce-scatter and the
      // scatter's all-gather (3 h-wide tensors each way); without: the output gathered, backward the input gradient
      // all-reduced (1 and 4).
      const double one = tp_ring_seconds(p, l, activation_tensor_bytes(m, l) * t);
      e.mtp_proj_tp_forward_s = (l.sequence_parallel ? 3.0 : 1.0) * one;
      e.mtp_proj_tp_backward_s = (l.sequence_parallel ? 3.0 : 4.0) * one;
    }
  }
  return e;
}

double activation_tensor_bytes(const ModelSpec& m, const Layout& l) {
  return 2.0 * d(l.seq) * d(l.mbs) * d(m.hidden_size) / (d(l.tp) * d(l.cp));
}

double norm_residual_passes(const ModelSpec& m) { return 2.0 * d(hidden_norms_per_layer(m)) + 3.0 * 2.0; }

double unsplit_norm_residual_bytes(const ModelSpec& m, const Layout& l) {
  if (l.sequence_parallel || l.tp <= 1) return 0.0;
  return norm_residual_passes(m) * activation_tensor_bytes(m, l) * (d(l.tp) - 1.0);
}

double cp_kv_bytes(const ModelSpec& m, const Layout& l) {
  return 2.0 * (d(l.seq) / d(l.cp)) * d(l.mbs) * kv_width(m) * 2.0 / d(l.tp);
}

double optimizer_step_seconds(const PerfContext& p, const Layout& l, double shard_params) {
  const Precision& x = l.precision;
  return shard_params * (2.0 * x.optimizer_bytes + x.grad_bytes + x.weight_bytes) / p.hbm_bytes_per_s;
}

double offloaded_optimizer_seconds(const PerfContext& p, const Layout& l, double shard_params) {
  if (l.optimizer_offload <= 0.0) return 0.0;
  const double params = l.optimizer_offload * shard_params;
  const double copies = 2.0 * p.host.seconds(4.0 * params);
  const double cpu = 28.0 * params * d(p.gpus_per_node) / p.host_memory_bytes_per_s;
  return l.overlap_offload_copies ? std::max(copies, cpu) : copies + cpu;
}

double pipeline_send_seconds(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  if (l.pp <= 1) return 0.0;
  const double act_bytes = activation_tensor_bytes(m, l);
  // Every boundary inside a node, or the crossing one (on the slowest stage's path) sets it.
  const bool inside = members_per_node(l.tp * l.cp * l.dp, l.pp, p.gpus_per_node) >= l.pp;
  return (inside ? p.intra : p.inter).seconds(act_bytes) * (1.0 - p.coef.pp_overlap);
}

bool pipeline_sends_overlap(const Layout& l) { return has_virtual_stages(l) && l.overlap_p2p_comm; }

DpOverlap dp_overlap_shares(const PerfContext& p, const Layout& l) {
  // Megatron-LM's DDP: each overlapped unless its switch is off (layout.hpp overlap_grad_reduce), then exposed.
  if (!l.zero.deepspeed)
    return {l.overlap_param_gather ? p.dp_overlap : 0.0, l.overlap_grad_reduce ? p.dp_overlap : 0.0};
  // DeepSpeed: ZeRO-3 prefetches its gathers on their own stream (partitioned_param_coordinator.py); stages 1 and 2
  // gather the updated weights inside the optimizer step. Gradients are reduced behind the backward with overlap_comm
  // only (stage_1_and_2.py, stage3.py: the reduction stream); the pipeline engine reduces after the flush.
  return {l.sharding.params != Shard::none ? p.dp_overlap : 0.0, l.zero.overlap_comm ? p.dp_overlap : 0.0};
}

namespace {

// One decoder layer, one micro-batch: compute, with its exposed TP/SP, CP and (a layer with experts) EP traffic.
LayerPassTimes layer_pass_times(const ModelSpec& m, const PerfContext& p, const Layout& l, bool experts) {
  const PerfCoefficients& c = p.coef;
  const LayerPasses lc = layer_passes(m, p, l, experts);
  const double attn_f = lc.forward.attention;
  const RecomputeFactors rc = recompute_factors(m, l, experts);
  LayerPassTimes x{compute_only(lc.forward), compute_only(lc.backward)};
  // TP/SP (Korthikanti et al. 2023 Sec. 4.2.2): 2 all-gathers + 2 reduce-scatters of s·b·h/c per pass (the same
  // bytes as 2 all-reduces without SP); recompute repeats its share of the forward ones (recompute_factors).
  if (l.tp > 1) {
    const double bytes = activation_tensor_bytes(m, l) * d(l.tp);  // the whole s·b·h/c tensor the SP ring assembles
    const auto ring = [&](double b) { return tp_ring_seconds(p, l, b); };
    const double gather = ring(bytes);
    // With SP the two all-gathers of a pass move FP8 (1 B) where the inputs are quantized before the gather.
    const double all_gathers = l.sequence_parallel && fp8_sequence_gathers(l) ? 2.0 * ring(0.5 * bytes) : 2.0 * gather;
    const double one = (all_gathers + 2.0 * gather) * (1.0 - c.tp_overlap);
    x.forward.tp = one;
    x.backward.tp = (1.0 + rc.tp_collectives) * one;
    if (l.tp_comm_overlap) {
      x.forward.tp = tp_overlapped_comm_seconds(x.forward.tp, x.forward.gemm, l.tp);
      x.backward.tp = tp_overlapped_comm_seconds(x.backward.tp, x.backward.gemm, l.tp);
    }
  }
  // CP (Liu et al. 2023 ring attention; TransformerEngine's load-balanced variant): c − 1 ring steps pass the
  // local K and V (2·(s/c)·b·h·k/a BF16, heads split over t); exposed_cp_seconds says what the attention hides.
  if (l.cp > 1) {
    const bool inside = members_per_node(l.tp, l.cp, p.gpus_per_node) >= l.cp;
    const Link& link = inside ? p.intra : p.cp_inter;
    const double kv = cp_kv_bytes(m, l);
    const double steps = d(l.cp) - 1.0;
    // Ulysses: each all-to-all keeps 1/c of a GPU's Q, K, V (or output) and sends the rest.
    double a2a = 0.0;
    if (l.cp_exchange == CpExchange::a2a) {
      const double q = 2.0 * (d(l.seq) / d(l.cp)) * d(l.mbs) * query_width(m) / d(l.tp);
      a2a = link.seconds(steps / d(l.cp) * (kv + 2.0 * q));
    }
    const CpExposed cp =
        exposed_cp_seconds(l, {steps * link.seconds(kv), steps * link.seconds(2.0 * kv), a2a}, attn_f, p.cp_overlap);
    x.forward.cp = cp.forward;
    x.backward.cp = cp.backward + rc.attention * cp.forward;
  }
  // EP: dispatch and combine each pass (the backward's carry the gradients), exposed: Megatron-LM overlaps them with
  // the layer's other work only with --overlap-moe-expert-parallel-comm, which headroom does not price; full recompute
  // repeats the forward's. With --moe-shared-expert-overlap the dispatch hides behind the shared expert's fc1 and the
  // combine behind its fc2 (token_dispatcher.py); backward, behind those GEMMs' gradients, run on the same side stream.
  if (experts) {
    const double one = expert_dispatch_seconds(m, p, l);
    const SharedExpertGemms shared =
        l.shared_expert_overlap ? shared_expert_gemm_seconds(m, p, l, l.fp8 != Fp8Recipe::none) : SharedExpertGemms{};
    const double back = gemm_backward_ratio(!l.lora.enabled());
    x.forward.ep = exposed_behind(one, shared.fc1) + exposed_behind(one, shared.fc2);
    x.backward.ep =
        exposed_behind(one, back * shared.fc2) + exposed_behind(one, back * shared.fc1) + rc.ep * x.forward.ep;
  }
  return x;
}

// One micro-batch through the first, a middle and the last pipeline stage, forward and backward.
struct StagePasses {
  PassTimes first_f, first_b, body_f, body_b, last_f, last_b;
  std::int64_t middle_stage = 0;
};

// The weight-gradient (W) pass of one micro-batch, the mean over the stages: one GEMM per weight GEMM of the forward
// (dW = dYᵀ·X has the forward's FLOPs; Qi et al., ICLR 2024, Sec. 2: T_W), the LM head's on its stage.
double mean_weight_gradient_seconds(const Layout& l, const StagePasses& x) {
  if (l.pp == 1) return x.last_f.gemm;
  return (x.first_f.gemm + x.last_f.gemm + d(l.pp - 2) * x.body_f.gemm) / d(l.pp);
}

// Pipeline fill and drain, from the mean stage time of one micro-batch (forward and backward) and its W part:
// (p − 1)/v stage-times (Narayanan et al. 2021 Sec. 2.2: bubble (p − 1)/m of the ideal time, (p − 1)/(v·m)
// interleaved; GPipe's is the same as 1F1B, and the breadth-first schedule's the interleaved one's: a rank's v·m
// forwards start p − 1 chunk-times late on the last rank and its backwards drain p − 1 to the first). The zero-bubble
// schedule (ZB1P) fills it with W passes: ZB-H1's (p − 1)(T_F + T_B − T_W), T_B the input-gradient pass (Qi et al.,
// ICLR 2024, Sec. 2.1), i.e. the stage time less 2·T_W, over the v looped chunks as the interleaved 1F1B's. The
// V-shaped schedule (the paper's ZB-V, Sec. 6: no bubble when T_F = T_B = T_W, at 1F1B's memory) is priced as ZB-H2's
// (p − 1)(T_F + T_B − 2T_W) of its half-stage chunks: the stage time less 3·T_W, over 2.
double pipeline_bubble_seconds(const Layout& l, double mean_stage_s, double mean_weight_gradient_s) {
  const double fill = d(l.pp - 1) / d(std::max<std::int64_t>(1, l.vpp));
  if (l.schedule == Schedule::zbv) return fill * std::max(0.0, mean_stage_s - 3.0 * mean_weight_gradient_s);
  if (l.schedule != Schedule::zero_bubble) return fill * mean_stage_s;
  return fill * std::max(0.0, mean_stage_s - 2.0 * mean_weight_gradient_s);
}

// A stage's pass with its BF16 layers of an FP8 run (stage_bf16_layers) taking a BF16 layer's times in place of the
// FP8 ones `x` counted them at.
[[gnu::cold, gnu::noinline]] void add_bf16_layers(PassTimes& x, const PassTimes& layer, const PassTimes& moe_layer,
                                                  const MicrobatchPasses& mb, const Bf16Layers& n, bool backward) {
  const PassTimes& bf16_layer = backward ? mb.bf16_layer.backward : mb.bf16_layer.forward;
  const PassTimes& bf16_moe_layer = backward ? mb.bf16_moe_layer.backward : mb.bf16_moe_layer.forward;
  x += scaled(bf16_layer, d(n.dense));
  x += scaled(layer, -d(n.dense));
  if (n.moe == 0) return;
  x += scaled(bf16_moe_layer, d(n.moe));
  x += scaled(moe_layer, -d(n.moe));
}

StagePasses stage_pass_times(const ModelSpec& m, const PerfContext& p, const Layout& l, const MicrobatchPasses& mb) {
  const LayerPassTimes &layer = mb.layer, &moe_layer = mb.moe_layer;
  // PP: each micro-batch sends its activations forward and their gradient backward across every stage boundary,
  // v times with interleaving, behind the next chunk's pass where the sends overlap.
  const double v_chunks = d(std::max<std::int64_t>(1, l.vpp));
  const double send = pipeline_send_seconds(m, p, l);
  // One micro-batch through the decoder layers of a stage (layout.hpp's stage_layers: L/p, or Megatron-LM's
  // uneven first/last stages), with its boundary traffic; the middle stages are all alike.
  // Layers with experts (stage_moe_layers) take the MoE layer's times, an FP8 run's BF16 layers (stage_bf16_layers)
  // those without FP8.
  // Full recompute by layers (a dense decoder): only the recomputed layers' backward repeats their forward; the
  // layers kept whole take a layer's backward without recompute.
  const bool by_layers = recompute_by_layers(l), sends_overlap = pipeline_sends_overlap(l);
  const auto stage_pass = [&](const PassTimes& one_layer, const PassTimes& one_moe_layer, const StageCounts& n,
                              bool backward) {
    const std::int64_t kept = backward && by_layers ? n.layers - recomputed_layers(m, l, n.stage) : 0;
    PassTimes x = scaled(one_layer, d(n.layers - n.moe_layers - kept));
    if (kept > 0) x += scaled(mb.kept_layer.backward, d(kept));
    if (n.moe_layers > 0) x += scaled(one_moe_layer, d(n.moe_layers));
    if (n.bf16.total() > 0) [[unlikely]]
      add_bf16_layers(x, one_layer, one_moe_layer, mb, n.bf16, backward);
    x.pp = sends_overlap ? v_chunks * std::max(0.0, send - x.total() / v_chunks) : v_chunks * send;
    return x;
  };
  const auto forward = [&](const StageCounts& n) { return stage_pass(layer.forward, moe_layer.forward, n, false); };
  const auto backward = [&](const StageCounts& n) { return stage_pass(layer.backward, moe_layer.backward, n, true); };
  StagePasses x;
  const PipelineStageCounts& n = mb.stages;
  x.middle_stage = n.second.stage;
  x.body_f = forward(n.second), x.body_b = backward(n.second);
  // First stage: embedding lookup (elementwise). Last stage: LM head GEMM and the FP32 loss.
  x.first_f = forward(n.first), x.first_b = backward(n.first);
  x.last_f = forward(n.last), x.last_b = backward(n.last);
  const PipelineEnds& ends = mb.ends;
  x.first_f.elementwise += ends.embedding_s;
  x.first_b.elementwise += ends.embedding_s;
  // The LM head and the loss: on the last stage, or the first under the V-shaped schedule (layout.hpp head_stage).
  // Each multi-token-prediction module there adds its decoder layer (of the last layer's kind; kept whole under full
  // recompute by blocks, which Megatron-LM does not apply to it), eh_proj with its norms and TP traffic (recomputed
  // with its layer under full recompute), and one more LM head GEMM and loss.
  const auto add_head = [&](PassTimes& f, PassTimes& b) {
    const double heads = 1.0 + d(l.mtp_layers);
    f.gemm += heads * ends.head_forward_s, b.gemm += heads * ends.head_backward_s;
    f.elementwise += heads * ends.loss_s, b.elementwise += heads * ends.loss_s;
    if (l.mtp_layers == 0) return;
    const double mtp = d(l.mtp_layers);
    const LayerPassTimes& one = mtp_layer_has_experts(m) ? moe_layer : layer;
    const bool kept = by_layers && l.recompute_method == RecomputeMethod::block;
    const RecomputeFactors rc = recompute_factors(m, kept ? without_recompute(l) : l, mtp_layer_has_experts(m));
    f += scaled(one.forward, mtp);
    b += scaled(kept ? mb.kept_layer.backward : one.backward, mtp);
    f.gemm += mtp * ends.mtp_proj_gemm_s;
    b.gemm += mtp * (kGemmBackwardRatio + rc.gemm) * ends.mtp_proj_gemm_s;
    f.elementwise += mtp * ends.mtp_norms_s;
    b.elementwise += mtp * (2.0 + rc.elementwise) * ends.mtp_norms_s;
    f.tp += mtp * ends.mtp_proj_tp_forward_s;
    b.tp += mtp * (ends.mtp_proj_tp_backward_s + rc.tp_collectives * ends.mtp_proj_tp_forward_s);
  };
  if (head_stage(l) == 0)
    add_head(x.first_f, x.first_b);
  else
    add_head(x.last_f, x.last_b);
  if (l.pp == 1) {
    x.last_f += x.first_f;
    x.last_f += scaled(x.body_f, -1.0);
    x.last_b += x.first_b;
    x.last_b += scaled(x.body_b, -1.0);
  }
  return x;
}

// DP over the DP×CP group (Megatron's distributed optimizer shards over both): PaRO volumes for the layout's
// sharding, flat NCCL rings. Per-micro-batch gathers hide behind that micro-batch's pass (forward_s, backward_s);
// the once-per-step gradient sync behind the last backward and the parameter gather behind the first forward.
// Routed experts sync over the expert data-parallel group instead (`group`, with `group_size` GPUs of it per node).
double exposed_dp_seconds(const PerfContext& p, const Layout& l, const DpParameters& stage_params, std::int64_t group,
                          std::int64_t group_size, double forward_s, double backward_s, double gather_bytes) {
  if (group <= 1 || stage_params.trainable <= 0) return 0.0;
  CommSetup cs;
  cs.params = stage_params.gathered;
  cs.trainable = stage_params.trainable;
  cs.gpus = group;
  cs.group_size = group_size;
  cs.weight_bytes = gather_bytes;
  cs.grad_bytes = l.precision.grad_bytes > 0 ? l.precision.grad_bytes : l.precision.weight_bytes;
  cs.optimizer_bytes = l.precision.optimizer_bytes;
  Strategy st;
  st.sharding = l.sharding;
  st.collectives = Collectives::ring;
  st.secondary_param_copy = zero_hpz(l.zero, l.sharding);  // ZeRO++: the backward gathers in the node
  const StageVolumes vol = communication_volume(st, cs);
  // PaRO's gradient terms over the gradients the GPUs hold (Ψ' unless FSDP1's flat parameters hold more).
  CommSetup grads = cs;
  grads.trainable = stage_params.reduced;
  const StageVolumes grad_vol = stage_params.reduced == stage_params.trainable ? vol : communication_volume(st, grads);
  const DpOverlap f = dp_overlap_shares(p, l);
  const double mb_f = volume_seconds(vol.forward_gather_params, cs.weight_bytes, cs, p);
  const double mb_b_gather = volume_seconds(vol.backward_gather_params, cs.weight_bytes, cs, p);
  const double mb_b_reduce = volume_seconds(grad_vol.backward_reduce_grads, cs.grad_bytes, cs, p);
  const double sync = volume_seconds(grad_vol.update_sync_grads, cs.grad_bytes, cs, p);
  const double gather = volume_seconds(vol.update_gather_params, cs.weight_bytes, cs, p);
  // The backward's gathers and reductions overlap it together where both run on their own streams, else each alone.
  const double mb_b = f.gathers == f.reductions ? std::max(0.0, mb_b_gather + mb_b_reduce - f.gathers * backward_s)
                                                : std::max(0.0, mb_b_gather - f.gathers * backward_s) +
                                                      std::max(0.0, mb_b_reduce - f.reductions * backward_s);
  return d(l.microbatches()) * (std::max(0.0, mb_f - f.gathers * forward_s) + mb_b) +
         std::max(0.0, sync - f.reductions * backward_s) + std::max(0.0, gather - f.gathers * forward_s);
}

}  // namespace

MicrobatchPasses microbatch_passes(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  MicrobatchPasses x{layer_pass_times(m, p, l, false),
                     m.num_experts > 0 ? layer_pass_times(m, p, l, true) : LayerPassTimes{},
                     pipeline_end_seconds(m, p, l),
                     pipeline_stage_counts(m, l),
                     {},
                     {},
                     {}};
  if (recompute_by_layers(l)) x.kept_layer = layer_pass_times(m, p, without_recompute(l), false);
  if (l.bf16_layers_at_start > 0 || l.bf16_layers_at_end > 0) {
    const Layout bf16 = without_fp8(l);
    x.bf16_layer = layer_pass_times(m, p, bf16, false);
    if (m.num_experts > 0) x.bf16_moe_layer = layer_pass_times(m, p, bf16, true);
  }
  return x;
}

PerfEstimate estimate_perf(const ModelSpec& m, const PerfContext& p, const Layout& l) {
  return estimate_perf(m, p, l, microbatch_passes(m, p, l));
}

PerfEstimate estimate_perf(const ModelSpec& m, const PerfContext& p, const Layout& l, const MicrobatchPasses& mb) {
  if ((l.fp8 != Fp8Recipe::none && !(p.fp8_peak_flops > 0)) ||
      ((l.optimizer_offload > 0 || l.activation_offload_layers > 0) &&
       !(p.host.bytes_per_s > 0 && p.host_memory_bytes_per_s > 0)))
    throw Error("the layout's FP8 or offloading cannot be priced on this cluster (validate_on_cluster)");
  const double pp = d(l.pp);
  const double micro = d(l.microbatches());
  const StagePasses x = stage_pass_times(m, p, l, mb);

  // The slowest stage sets the 1F1B steady state; fill and drain cost pipeline_bubble_seconds.
  // An even split's middle stages are never the slowest (the first has the same layers and the embedding); an
  // uneven one's can be.
  const double first = x.first_f.total() + x.first_b.total();
  const double last = x.last_f.total() + x.last_b.total();
  const double middle = x.body_f.total() + x.body_b.total();
  std::int64_t slowest = l.pp == 1 || last >= first ? l.pp - 1 : 0;
  if (l.pp > 2 && middle > std::max(first, last)) slowest = x.middle_stage;
  const PassTimes& sf = slowest == l.pp - 1 ? x.last_f : slowest == 0 ? x.first_f : x.body_f;
  const PassTimes& sb = slowest == l.pp - 1 ? x.last_b : slowest == 0 ? x.first_b : x.body_b;
  const double mean = l.pp == 1 ? last : (first + last + (pp - 2.0) * middle) / pp;

  PerfEstimate e;
  StepBreakdown& br = e.breakdown;
  br.slowest_stage = slowest;
  PassTimes all = scaled(sf, micro);
  all += scaled(sb, micro);
  br.gemm_s = all.gemm;
  br.attention_s = all.attention;
  br.elementwise_s = all.elementwise;
  br.overhead_s = all.overhead + p.coef.step_overhead_s;
  br.tp_comm_s = all.tp;
  br.cp_comm_s = all.cp;
  br.pp_comm_s = all.pp;
  br.ep_comm_s = all.ep;
  br.bubble_s =
      pipeline_bubble_seconds(l, mean, splits_backward(l.schedule) ? mean_weight_gradient_seconds(l, x) : 0.0);
  const StageCounts& slowest_counts = slowest == l.pp - 1 ? mb.stages.last
                                      : slowest == 0      ? mb.stages.first
                                                          : mb.stages.second;
  DpParameters dense = dp_parameters_per_gpu(m, l, slowest_counts);
  const double experts = slowest_counts.experts;
  dense.gathered -= experts, dense.trainable -= experts, dense.reduced -= experts;
  // FP8 parameter gather: the linear layers' weights travel in FP8 (1 B), the rest (embedding, norms) in BF16.
  const double weight_bytes = l.precision.weight_bytes;
  double dense_gather_bytes = weight_bytes, expert_gather_bytes = weight_bytes;
  if (l.fp8_param_gather) {
    const double fp8_dense = stage_linear_weight_parameters_per_gpu(m, l, br.slowest_stage) - experts;
    dense_gather_bytes = weight_bytes - (weight_bytes - 1.0) * fp8_dense / dense.gathered;
    expert_gather_bytes = 1.0;
  }
  br.dp_comm_s = exposed_dp_seconds(p, l, dense, l.dp * l.cp, sharding_group_size(l, p.gpus_per_node), sf.total(),
                                    sb.total(), dense_gather_bytes);
  if (experts > 0) {
    const std::int64_t per_node = sharding_group_size(l.expert_tp() * l.ep, l.expert_dp(), p.gpus_per_node);
    br.dp_comm_s += exposed_dp_seconds(p, l, {experts, experts, experts}, l.expert_dp(), per_node, sf.total(),
                                       sb.total(), expert_gather_bytes);
  }
  const double shard_params =
      dense.trainable / shard_divisor(l.sharding.optimizer, l, p.gpus_per_node) +
      (experts > 0 ? experts / expert_shard_divisor(l.sharding.optimizer, l, p.gpus_per_node) : 0.0);
  br.optimizer_s = (1.0 - l.optimizer_offload) * optimizer_step_seconds(p, l, shard_params);
  br.offload_s = offloaded_optimizer_seconds(p, l, shard_params);
  // FP8 weights Transformer Engine casts once per step (the first micro-batch), on the slowest stage.
  br.elementwise_s += fp8_weight_cast_bytes_per_step(m, l, br.slowest_stage) / p.hbm_bytes_per_s;
  // Activation offload (p = 1): each offloaded layer's stored activations go to the host during forward and come back
  // during backward, behind the next layer's compute of that pass; what the copy takes beyond it is exposed.
  if (l.activation_offload_layers > 0) {
    const double bytes = offloaded_activation_bytes(m, l) / d(l.activation_offload_layers);
    const LayerPasses one = m.num_experts > 0 && l.activation_offload_layers > m.first_dense_layers
                                ? moe_layer_compute_seconds(m, p, l)
                                : layer_compute_seconds(m, p, l);
    const double copy = p.host.seconds(bytes);
    br.offload_s += micro * d(l.activation_offload_layers) *
                    (std::max(0.0, copy - one.forward.total()) + std::max(0.0, copy - one.backward.total()));
  }

  e.step_time_s = br.total_s();
  const double sequences = d(l.gbs);
  e.model_flops = model_flops_per_step(m, l.seq, sequences) + mtp_flops_per_step(m, l.seq, sequences, l.mtp_layers);
  e.tokens_per_s = sequences * d(l.seq) / e.step_time_s;
  const double gpus = d(l.gpus());
  e.tflops_per_gpu = e.model_flops / (e.step_time_s * gpus) / 1e12;
  // MFU against the datasheet peak, as torchtitan and Megatron-LM report it (not the power-limited one).
  e.mfu = e.model_flops / (e.step_time_s * gpus * p.datasheet_peak_flops);
  e.pts_s = e.step_time_s / sequences;
  return e;
}

PerfEstimate estimate_perf(const ModelSpec& m, const ClusterSpec& c, const Layout& l, const PerfCoefficients& k) {
  return estimate_perf(m, PerfContext(k, c), l);
}

}  // namespace headroom
