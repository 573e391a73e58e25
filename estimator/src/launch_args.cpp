#include "headroom/estimator/launch_args.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "headroom/estimator/sharding.hpp"

namespace headroom {

// torch/distributed/pipelining/schedules.py's classes, less their "Schedule" prefix (torchtitan's
// pipeline_parallel_schedule values).
std::string_view torchtitan_schedule_name(Schedule s) {
  switch (s) {
    case Schedule::one_f_one_b: return "1F1B";
    case Schedule::interleaved: return "Interleaved1F1B";
    case Schedule::gpipe: return "GPipe";
    case Schedule::zero_bubble: return "InterleavedZeroBubble";
    case Schedule::zbv: return "ZBVZeroBubble";
    case Schedule::looped_bfs: return "LoopedBFS";
  }
  return "?";
}

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }
std::string decimal(double v) {  // shortest %g form: 1.25, 0.5
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// How one state is split over the DP×CP group, as data_parallel_replicate × data_parallel_shard (× cp). As in
// memory.cpp's shard_divisor, the group is laid out with TP innermost: a node holds gpus_per_node / t of its
// members, and 'intra' shards over those.
struct DpSplit {
  std::int64_t replicate = 1, shard = 1;
  std::string problem;  // non-empty: the split has no integral mesh
};

DpSplit dp_split(Shard s, const Layout& l, std::int64_t gpus_per_node) {
  if (s == Shard::none) return {l.dp, 1, ""};
  if (s == Shard::global) return {1, l.dp, ""};
  const std::int64_t group = l.dp * l.cp;
  if (gpus_per_node % l.tp != 0)
    return {0, 0, "t = " + num(l.tp) + " does not divide the " + num(gpus_per_node) + " GPUs of a node"};
  const std::int64_t ways = std::clamp<std::int64_t>(gpus_per_node / l.tp, 1, group);
  if (ways % l.cp != 0 || l.dp % (ways / l.cp) != 0)
    return {0, 0,
            "an intra-node shard of " + num(ways) + " ranks does not split dp " + num(l.dp) + " x cp " + num(l.cp)};
  return {l.dp / (ways / l.cp), ways / l.cp, ""};
}

bool uniform(const StateSharding& s) { return s.params == s.grads && s.grads == s.optimizer; }

// ---- Megatron-LM ----

// The experts as headroom prices them (transformer_config.py names): the alltoall dispatcher (the default is
// allgather) with grouped GEMMs; leading dense layers as a --moe-layer-freq pattern; a capacity factor when the
// layout bounds the busiest GPU's load.
void megatron_experts(const ModelSpec& m, const Layout& l, std::vector<std::string>& a) {
  a.insert(a.end(), {"--num-experts", num(m.num_experts), "--moe-router-topk", num(m.moe_router_topk),
                     "--moe-ffn-hidden-size", num(m.moe_ffn_hidden_size)});
  if (m.shared_expert_ffn_hidden_size > 0)
    a.insert(a.end(), {"--moe-shared-expert-intermediate-size", num(m.shared_expert_ffn_hidden_size)});
  if (m.shared_expert_gate) a.emplace_back("--moe-shared-expert-gate");
  if (group_limited_routing(m))
    a.insert(a.end(), {"--moe-router-num-groups", num(m.moe_router_num_groups), "--moe-router-group-topk",
                       num(m.moe_router_group_topk)});
  if (m.first_dense_layers > 0)
    a.insert(a.end(), {"--moe-layer-freq",
                       "([0]*" + num(m.first_dense_layers) + "+[1]*" + num(m.num_layers - m.first_dense_layers) + ")"});
  a.insert(a.end(), {"--expert-model-parallel-size", num(l.ep), "--expert-tensor-parallel-size", num(l.expert_tp()),
                     "--moe-token-dispatcher-type", std::string(to_string(l.dispatcher)), "--moe-grouped-gemm"});
  if (l.expert_load > 1.0) a.insert(a.end(), {"--moe-expert-capacity-factor", decimal(l.expert_load)});
  if (l.shared_expert_overlap) a.emplace_back("--moe-shared-expert-overlap");
}

// The model's shape, spelled alike by Megatron-LM's and Megatron-DeepSpeed's arguments.py.
std::vector<std::string> shape_flags(const ModelSpec& m) {
  return {"--num-layers",      num(m.num_layers),      "--hidden-size",         num(m.hidden_size),
          "--ffn-hidden-size", num(m.ffn_hidden_size), "--num-attention-heads", num(m.num_heads)};
}

// What changes the model's arithmetic but not its shape: every ModelSpec field of it is written as Megatron-LM's
// flag, or said to have none. Flag names, types and defaults from megatron/training/arguments.py (--rotary-base an
// int, default 10000; --use-rope-scaling and --rope-scaling-factor, Llama 3.x's frequency scaling, default factor 8;
// --attention-dropout and --hidden-dropout, default 0.1; the MLA group's --q-lora-rank, --kv-lora-rank, --qk-head-dim,
// --qk-pos-emb-head-dim, --v-head-dim) and from the TransformerConfig fields it turns into flags
// (megatron/core/transformer/transformer_config.py: layernorm_epsilon as --norm-epsilon, default 1e-5;
// layernorm_zero_centered_gamma as --apply-layernorm-1p; multi_latent_attention). arguments.py has no flag for a
// gated GELU (--swiglu is SiLU, --quick-geglu a sigmoid approximation), soft caps, embedding scaling, or the softmax
// scale (softmax_scale is excluded from its flags).
void megatron_arithmetic(const ModelSpec& m, std::vector<std::string>& a, std::vector<std::string>& issues) {
  if (latent_attention(m)) {
    a.emplace_back("--multi-latent-attention");
    if (m.q_lora_rank > 0) a.insert(a.end(), {"--q-lora-rank", num(m.q_lora_rank)});
    a.insert(a.end(), {"--kv-lora-rank", num(m.kv_lora_rank), "--qk-head-dim", num(m.qk_nope_head_dim),
                       "--qk-pos-emb-head-dim", num(m.qk_rope_head_dim), "--v-head-dim", num(m.v_head_dim)});
  }
  if (!m.learned_positions) {
    if (m.rope_theta <= 0)
      issues.emplace_back("RoPE base: the model spec gives no rope_theta; Megatron-LM's --rotary-base 10000 applies");
    else if (m.rope_theta != std::floor(m.rope_theta) || m.rope_theta > 2e9)
      issues.push_back("RoPE base " + decimal(m.rope_theta) + ": Megatron-LM's --rotary-base takes an integer");
    else
      a.insert(a.end(), {"--rotary-base", num(static_cast<std::int64_t>(m.rope_theta))});
    if (m.rope_scaling == "llama3")
      a.insert(a.end(), {"--use-rope-scaling", "--rope-scaling-factor", decimal(m.rope_scaling_factor)});
    else if (!m.rope_scaling.empty())
      issues.push_back("RoPE scaling " + m.rope_scaling + " (factor " + decimal(m.rope_scaling_factor) +
                       "): headroom writes Megatron-LM's Llama 3.x scaling (--use-rope-scaling) only");
  }
  if (m.norm_eps > 0)
    a.insert(a.end(), {"--norm-epsilon", decimal(m.norm_eps)});
  else
    issues.emplace_back("norm epsilon: the model spec gives no norm_eps; Megatron-LM's --norm-epsilon 1e-5 applies");
  if (m.norm_plus_one) a.emplace_back("--apply-layernorm-1p");
  a.insert(a.end(), {"--attention-dropout", decimal(m.attention_dropout)});
  // headroom's models keep no dropout on the residual stream (spec.cpp refuses one); arguments.py's default is 0.1,
  // whose masks are not priced: written, so that the job runs as priced.
  a.insert(a.end(), {"--hidden-dropout", "0"});
  if (m.mlp == Mlp::geglu)
    issues.emplace_back(
        "GeGLU (gated tanh GELU): Megatron-LM has --swiglu (SiLU) and --quick-geglu (sigmoid GELU), no GeGLU");
  if (m.scaled_embeddings) issues.emplace_back("embeddings scaled by sqrt(hidden size): Megatron-LM has no such flag");
  if (m.attention_softcap > 0)
    issues.push_back("attention soft cap " + decimal(m.attention_softcap) + ": Megatron-LM has no soft-capping flag");
  if (m.final_softcap > 0)
    issues.push_back("final logit soft cap " + decimal(m.final_softcap) + ": Megatron-LM has no soft-capping flag");
  if (m.query_pre_attn_scalar > 0 && static_cast<double>(m.query_pre_attn_scalar) != head_dim(m))
    issues.push_back("softmax scale 1/sqrt(" + num(m.query_pre_attn_scalar) +
                     "): Megatron-LM's softmax_scale has no flag (1/sqrt(--kv-channels) applies)");
}

void megatron(const ModelSpec& m, const ClusterSpec& c, const Layout& l, LaunchExport& e) {
  auto& a = e.megatron;
  auto& issues = e.megatron_issues;
  // The model's shape (megatron/training/arguments.py names), so that the line can be pasted as it is.
  a = shape_flags(m);
  if (m.num_kv_heads != m.num_heads)
    a.insert(a.end(), {"--group-query-attention", "--num-query-groups", num(m.num_kv_heads)});
  if (m.head_dim > 0 && m.head_dim * m.num_heads != m.hidden_size)
    a.insert(a.end(), {"--kv-channels", num(m.head_dim)});  // arguments.py: hidden_size / heads when not given
  if (m.qk_norm) a.emplace_back("--qk-layernorm");
  if (m.sliding_window > 0) {  // transformer_engine.py: (left, right) window; every N-th layer full
    a.insert(a.end(), {"--window-size", num(m.sliding_window - 1) + ",0"});
    if (m.window_skip_freq > 0) a.insert(a.end(), {"--window-attn-skip-freq", num(m.window_skip_freq)});
  }
  if (m.sandwich_norms)
    issues.emplace_back("norms after attention and MLP (Gemma 2/3): Megatron-LM's GPT layer has no such option");
  if (m.parallel_residual)
    issues.emplace_back(
        "parallel attention and MLP (GPT-NeoX, Falcon, Phi): Megatron-LM's GPT layer has no such option");
  if (m.lm_head_bias) issues.emplace_back("a bias on the LM head (Phi): Megatron-LM's output layer has none");
  a.insert(a.end(), {"--max-position-embeddings", num(m.max_context)});
  if (m.mlp == Mlp::swiglu) a.emplace_back("--swiglu");
  if (m.mlp == Mlp::relu2) a.emplace_back("--squared-relu");
  if (m.rotary_fraction < 1.0) a.insert(a.end(), {"--rotary-percent", decimal(m.rotary_fraction)});
  a.insert(a.end(), {"--normalization", m.norm == Norm::rmsnorm ? "RMSNorm" : "LayerNorm"});
  if (!m.linear_biases) a.emplace_back("--disable-bias-linear");
  if (m.qkv_bias && !m.linear_biases) a.emplace_back("--add-qkv-bias");
  if (m.attention_sinks) a.insert(a.end(), {"--softmax-type", "learnable"});
  if (!m.learned_positions) a.insert(a.end(), {"--position-embedding-type", "rope"});
  if (!m.tied_embeddings) a.emplace_back("--untie-embeddings-and-output-weights");
  megatron_arithmetic(m, a, issues);
  a.insert(a.end(), {"--tensor-model-parallel-size", num(l.tp), "--pipeline-model-parallel-size", num(l.pp),
                     "--context-parallel-size", num(l.cp)});
  if (l.cp > 1 && l.cp_exchange != CpExchange::p2p) {
    if (torch_cp_exchange(l.cp_exchange))
      issues.emplace_back("CP exchange " + std::string(to_string(l.cp_exchange)) +
                          ": PyTorch's ring attention; Megatron-LM's is Transformer Engine's (--cp-comm-type)");
    else
      a.insert(a.end(), {"--cp-comm-type", std::string(to_string(l.cp_exchange))});
  }
  if (m.num_experts > 0) megatron_experts(m, l, a);
  // Uneven stages (megatron/training/arguments.py): the virtual stage count must then be given as
  // --num-virtual-stages-per-pipeline-rank, not as layers per virtual stage.
  const PipelineSplit& x = l.split;
  if (x.first_stage_layers > 0) a.insert(a.end(), {"--decoder-first-pipeline-num-layers", num(x.first_stage_layers)});
  if (x.last_stage_layers > 0) a.insert(a.end(), {"--decoder-last-pipeline-num-layers", num(x.last_stage_layers)});
  if (x.embedding_in_split) a.emplace_back("--account-for-embedding-in-pipeline-split");
  if (x.loss_in_split) a.emplace_back("--account-for-loss-in-pipeline-split");
  // A layer layout sets the virtual stages itself: arguments.py refuses a count beside it.
  if (x.layer_layout) a.insert(a.end(), {"--pipeline-model-parallel-layout", x.layer_layout->text});
  if (l.mtp_layers > 0) a.insert(a.end(), {"--mtp-num-layers", num(l.mtp_layers)});
  if (l.vpp > 1 && x.even())
    a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage", num(m.num_layers / (l.pp * l.vpp))});
  else if (l.vpp > 1 && !x.layer_layout)
    a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", num(l.vpp)});
  if (l.tp > 1 && l.sequence_parallel) a.emplace_back("--sequence-parallel");
  a.insert(a.end(), {"--micro-batch-size", num(l.mbs), "--global-batch-size", num(l.gbs), "--seq-length", num(l.seq)});
  if (l.precision.weight_bytes == 2) a.emplace_back(l.optimizer_precision.fp16 ? "--fp16" : "--bf16");
  if (l.optimizer_precision.fp16 && l.optimizer_precision.accumulate_allreduce_grads_in_fp32)
    a.emplace_back("--accumulate-allreduce-grads-in-fp32");
  // FP8 (transformer_config.py): E4M3 forward, E5M2 gradients ("hybrid"), the recipe; FP8 weights need the
  // distributed optimizer (arguments.py).
  if (l.fp8 != Fp8Recipe::none)
    a.insert(a.end(), {"--fp8-format", "hybrid", "--fp8-recipe", std::string(to_string(l.fp8))});
  if (l.fp8_param_gather) a.emplace_back("--fp8-param-gather");
  if (l.bf16_layers_at_start > 0 || l.bf16_layers_at_end > 0)
    a.insert(a.end(), {"--first-last-layers-bf16", "--num-layers-at-start-in-bf16", num(l.bf16_layers_at_start),
                       "--num-layers-at-end-in-bf16", num(l.bf16_layers_at_end)});
  if (l.fp8 != Fp8Recipe::none && l.fp8_library == Fp8Library::torchao)
    issues.emplace_back("FP8 priced as torchao's (the framework's); Megatron-LM runs Transformer Engine's");
  // Optimizer offload (arguments.py: needs --use-precision-aware-optimizer) and activation offload.
  const OptimizerPrecision& o = l.optimizer_precision;
  if (l.optimizer_offload > 0 || o.precision_aware) a.emplace_back("--use-precision-aware-optimizer");
  for (const auto& [flag, dtype] : {std::pair{"--main-grads-dtype", o.main_grads},
                                    {"--main-params-dtype", o.main_params},
                                    {"--exp-avg-dtype", o.exp_avg},
                                    {"--exp-avg-sq-dtype", o.exp_avg_sq}})
    if (dtype != Dtype::fp32) a.insert(a.end(), {flag, std::string(to_string(dtype))});
  if (o.grad_reduce_in_bf16) a.emplace_back("--grad-reduce-in-bf16");
  if (l.optimizer_offload > 0) {
    a.emplace_back("--optimizer-cpu-offload");
    if (l.optimizer_offload != 1.0) a.insert(a.end(), {"--optimizer-offload-fraction", decimal(l.optimizer_offload)});
    if (l.overlap_offload_copies) a.emplace_back("--overlap-cpu-optimizer-d2h-h2d");
  }
  if (l.schedule == Schedule::interleaved && !l.overlap_p2p_comm) a.emplace_back("--no-overlap-p2p-communication");
  if (l.tp_comm_overlap) a.emplace_back("--tp-comm-overlap");
  if (l.activation_offload_layers > 0)
    a.insert(a.end(), {"--cpu-offloading-num-layers", num(l.activation_offload_layers)});
  if (l.flash_attention) a.emplace_back("--use-flash-attn");
  // arguments.py --attention-backend (AttnBackend): fused is Transformer Engine's cuDNN attention, flash the flash-attn
  // package's.
  if (l.attention_backend != AttentionBackend::framework)
    a.insert(a.end(), {"--attention-backend", l.attention_backend == AttentionBackend::cudnn ? "fused" : "flash"});
  if (l.recompute == Recompute::selective) a.insert(a.end(), {"--recompute-granularity", "selective"});
  if (recomputes_modules(l)) {
    a.emplace_back("--recompute-modules");
    for (const std::string_view name : recompute_module_names(l.recompute_modules)) a.emplace_back(name);
  }
  if (l.recompute == Recompute::full)
    a.insert(a.end(),
             {"--recompute-granularity", "full", "--recompute-method",
              l.recompute_method == RecomputeMethod::every ? "block" : std::string(to_string(l.recompute_method)),
              "--recompute-num-layers", num(l.recompute_num_layers)});
  if (l.recompute == Recompute::full && l.recompute_method == RecomputeMethod::every)
    issues.emplace_back(
        "recompute every N-th layer: torchtitan's layer-selective checkpointing; Megatron-LM's block "
        "method recomputes the first N of each chunk");
  if (l.recompute == Recompute::op)
    issues.emplace_back("recompute op: torchtitan's per-op checkpointing; Megatron-LM has no such setting");
  if (l.compile)
    issues.emplace_back("compile: torch.compile of the blocks is torchtitan's; Megatron-LM has no setting");
  const StateSharding& s = l.sharding;
  const std::string code = sharding_code(s);
  if (l.megatron_fsdp.enabled) {
    // arguments.py: --use-megatron-fsdp with its strategy (ZeRO's stages as no_shard, optim, optim_grads,
    // optim_grads_params), the fsdp_dtensor checkpoints it requires, and its settings where not the defaults.
    const char* strategy = megatron_fsdp_strategy(s);
    a.insert(a.end(),
             {"--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--ckpt-format", "fsdp_dtensor"});
    if (l.megatron_fsdp.double_buffer) a.emplace_back("--fsdp-double-buffer");
    if (l.megatron_fsdp.unit_size > 0)
      a.insert(a.end(), {"--suggested-communication-unit-size", num(l.megatron_fsdp.unit_size)});
    if (l.precision.grad_bytes != l.precision.weight_bytes)
      a.insert(a.end(), {"--megatron-fsdp-main-grads-dtype", megatron_fsdp_main_grads_dtype(l.precision)});
    if (l.overlap_grad_reduce) a.emplace_back("--overlap-grad-reduce");
    if (l.overlap_grad_reduce && l.overlap_param_gather) a.emplace_back("--overlap-param-gather");
  } else if (s.params == Shard::none && s.grads == Shard::none) {
    if (s.optimizer == Shard::global) a.emplace_back("--use-distributed-optimizer");
    if (s.optimizer == Shard::intra) {
      const DpSplit d = dp_split(Shard::intra, l, c.gpus_per_node);
      if (!d.problem.empty())
        issues.push_back("sharding " + code + ": " + d.problem);
      else {
        a.emplace_back("--use-distributed-optimizer");
        if (d.replicate > 1) a.insert(a.end(), {"--num-distributed-optimizer-instances", num(d.replicate)});
      }
    }
    // arguments.py: both are store_true (off by default), and --overlap-param-gather needs the distributed optimizer
    // and --overlap-grad-reduce: written as the layout was priced (layout.hpp overlap_grad_reduce).
    if (l.overlap_grad_reduce) a.emplace_back("--overlap-grad-reduce");
    if (l.overlap_grad_reduce && l.overlap_param_gather &&
        std::find(a.begin(), a.end(), "--use-distributed-optimizer") != a.end())
      a.emplace_back("--overlap-param-gather");
  } else {
    issues.push_back("sharding " + code +
                     ": Megatron-LM's distributed optimizer shards only optimizer states (NNN, NNG, NNI); sharded "
                     "parameters or gradients are Megatron-FSDP's (--use-megatron-fsdp)");
  }
  if (!megatron_core_schedule(l.schedule))
    issues.emplace_back("schedule " + std::string(to_string(l.schedule)) +
                        ": Megatron-LM has only 1F1B and interleaved 1F1B");
  if (l.lora.enabled()) issues.emplace_back("LoRA: pretrain_gpt.py has no LoRA arguments");
}

// ---- torchtitan ----

using TomlEntry = std::tuple<std::string, std::string, std::string>;  // section, key, TOML value

// torchtitan's data-parallel mesh for a sharding: FSDP2 shards P, G and OS over one mesh; reshard_after_forward =
// never keeps P unsharded from forward to the end of backward (the N of ZeRO-2's NGG at the peak); DDP (all N)
// only as 1-D parallelism. replicate = 0: no setting (the reason is in `issues`).
struct TorchtitanDp {
  std::int64_t replicate = 0, shard = 0;
  std::string reshard;
};

TorchtitanDp torchtitan_dp(const ClusterSpec& c, const Layout& l, std::vector<std::string>& issues) {
  const StateSharding& s = l.sharding;
  const std::string code = sharding_code(s);
  TorchtitanDp x;
  if (uniform(s) && s.params == Shard::none) {
    if (l.tp * l.cp * l.pp == 1) {
      x.replicate = l.dp;
      x.shard = 1;
    } else {
      issues.emplace_back(
          "sharding NNN: torchtitan applies DDP only as 1-D parallelism and FSDP-shards over CP "
          "whenever cp > 1");
    }
  } else if (s.grads == s.optimizer && s.grads != Shard::none && (s.params == s.grads || s.params == Shard::none)) {
    const DpSplit d = dp_split(s.grads, l, c.gpus_per_node);
    if (!d.problem.empty()) {
      issues.push_back("sharding " + code + ": " + d.problem);
    } else {
      x.replicate = d.replicate;
      x.shard = d.shard;
      x.reshard = s.params == Shard::none ? "never" : "always";
    }
  } else {
    issues.push_back("sharding " + code +
                     ": FSDP2 shards parameters, gradients and optimizer states over one mesh "
                     "(GGG, III; NGG, NII with fsdp_reshard_after_forward = \"never\"); " +
                     code + " has no setting");
  }
  return x;
}

// What torchtitan cannot run as headroom prices it (besides the sharding).
void torchtitan_limits(const Layout& l, std::vector<std::string>& issues) {
  if (l.recompute_method != RecomputeMethod::every && recompute_by_layers(l))
    issues.emplace_back("recompute_method " + std::string(to_string(l.recompute_method)) +
                        ": Megatron-LM's; torchtitan checkpoints every N-th block (recompute_method every)");
  if (l.recompute == Recompute::selective)
    issues.emplace_back(
        "recompute selective: Megatron-LM's core-attention recompute; torchtitan's per-op selective "
        "checkpointing is --recompute op, priced differently");
  if (l.tp > 1 && !l.sequence_parallel)
    issues.emplace_back(
        "no sequence parallelism: torchtitan's tensor parallelism always shards the norms over the "
        "sequence");
  if (!l.flash_attention) issues.emplace_back("no FlashAttention: torchtitan uses SDPA's fused kernels; no setting");
  if (l.lora.enabled()) issues.emplace_back("LoRA: torchtitan v0.2.x has no LoRA");
  if (l.ep > 1 || l.etp > 0)
    issues.emplace_back("expert parallelism: headroom writes Megatron-LM's --expert-model-parallel-size only");
  if (l.mtp_layers > 0)
    issues.emplace_back("multi-token prediction: Megatron-LM's --mtp-num-layers; the torchtitan job has no setting");
  if (l.split.uneven() || l.split.layer_layout)
    issues.emplace_back(
        "first/last stage layer counts: torchtitan sets only a layer fewer on them "
        "(pipeline_parallel_first/last_stage_less_layers); give its pipeline_parallel_layers_per_stage by hand");
  if (l.fp8 == Fp8Recipe::delayed)
    issues.emplace_back("FP8 delayed scaling: torchtitan's float8 converter scales dynamically (tensorwise)");
  if (l.tp_comm_overlap && !l.compile)
    issues.emplace_back("async TP without torch.compile: torchtitan runs it compiled only (--compile)");
  if (l.attention_backend == AttentionBackend::cudnn)
    issues.emplace_back(
        "attention_backend cudnn: torchtitan's SDPA takes PyTorch's priority (FlashAttention-2 first); "
        "no job-config key picks cuDNN");
  if (l.optimizer_offload > 0 || l.activation_offload_layers > 0)
    issues.emplace_back("offloading: torchtitan has no optimizer or activation CPU offload setting");
  if (l.optimizer_precision.given())
    issues.emplace_back(
        "optimizer-state and gradient formats: headroom writes Megatron-LM's precision-aware optimizer flags only");
  if (l.cp > 1 && (l.cp_exchange == CpExchange::all_gather || l.cp_exchange == CpExchange::a2a))
    issues.emplace_back("cp_comm_type " + std::string(to_string(l.cp_exchange)) +
                        ": Transformer Engine's; torchtitan runs PyTorch's ring attention (allgather or alltoall)");
}

// The job config's [training], [parallelism] and [activation_checkpoint] entries of a layout.
std::vector<TomlEntry> torchtitan_entries(const ModelSpec& m, const Layout& l, const TorchtitanDp& dp) {
  std::vector<TomlEntry> t;
  const bool pp = l.pp > 1;
  t.emplace_back("training", "local_batch_size", num(pp ? l.gbs / l.dp : l.mbs));
  t.emplace_back("training", "global_batch_size", num(l.gbs));
  t.emplace_back("training", "seq_len", num(l.seq));
  if (l.precision.weight_bytes == 2) t.emplace_back("training", "mixed_precision_param", "\"bfloat16\"");
  if (dp.replicate > 0) {
    t.emplace_back("parallelism", "data_parallel_replicate_degree", num(dp.replicate));
    t.emplace_back("parallelism", "data_parallel_shard_degree", num(dp.shard));
    if (!dp.reshard.empty()) t.emplace_back("parallelism", "fsdp_reshard_after_forward", "\"" + dp.reshard + "\"");
  }
  t.emplace_back("parallelism", "tensor_parallel_degree", num(l.tp));
  t.emplace_back("parallelism", "context_parallel_degree", num(l.cp));
  if (l.cp > 1 && l.cp_exchange == CpExchange::alltoall)
    t.emplace_back("parallelism", "context_parallel_rotate_method", "\"alltoall\"");
  t.emplace_back("parallelism", "pipeline_parallel_degree", num(l.pp));
  if (pp) {
    t.emplace_back("parallelism", "pipeline_parallel_schedule",
                   "\"" + std::string(torchtitan_schedule_name(l.schedule)) + "\"");
    t.emplace_back("parallelism", "pipeline_parallel_microbatch_size", num(l.mbs));
    // torchtitan 0.2 gives the first and last stages a layer fewer for the embedding and the output unless told
    // (pipeline_parallel_first/last_stage_less_layers, default 1): Megatron-LM's embedding and loss in the split.
    t.emplace_back("parallelism", "pipeline_parallel_first_stage_less_layers", l.split.embedding_in_split ? "1" : "0");
    t.emplace_back("parallelism", "pipeline_parallel_last_stage_less_layers", l.split.loss_in_split ? "1" : "0");
    // Multi-stage schedules default to 2 stages per rank; other counts need the layers per stage, which torchtitan
    // counts with the embedding and the output as the first/last_stage_less_layers (pipeline_parallel.py).
    if (l.vpp > 2) {
      const std::int64_t counted =
          m.num_layers + (l.split.embedding_in_split ? 1 : 0) + (l.split.loss_in_split ? 1 : 0);
      t.emplace_back("parallelism", "pipeline_parallel_layers_per_stage", num(counted / (l.pp * l.vpp)));
    }
  }
  if (l.tp_comm_overlap) t.emplace_back("parallelism", "enable_async_tensor_parallel", "true");  // needs compile
  // Per-op selective checkpointing is mode "selective" with selective_ac_option "op" (torchtitan's config_manager).
  // Every N-th block is mode "selective" with selective_ac_option "N" (activation_checkpoint.py _apply_layer_sac).
  const bool op = l.recompute == Recompute::op;
  const bool by_layers = recompute_by_layers(l);
  t.emplace_back("activation_checkpoint", "mode",
                 "\"" + std::string(op || by_layers ? "selective" : to_string(l.recompute)) + "\"");
  if (op) t.emplace_back("activation_checkpoint", "selective_ac_option", "\"op\"");
  if (by_layers)
    t.emplace_back("activation_checkpoint", "selective_ac_option", "\"" + num(l.recompute_num_layers) + "\"");
  // FP8 through torchao's converter (torchtitan's quantize.linear.float8; fast under torch.compile), the LM head in
  // BF16.
  if (l.fp8 != Fp8Recipe::none) {
    t.emplace_back("model", "converters", "[\"quantize.linear.float8\"]");
    t.emplace_back("quantize.linear.float8", "enable_fsdp_float8_all_gather", l.fp8_param_gather ? "true" : "false");
    t.emplace_back("quantize.linear.float8", "precompute_float8_dynamic_scale_for_fsdp",
                   l.fp8_param_gather ? "true" : "false");
    t.emplace_back("quantize.linear.float8", "filter_fqns", "[\"output\"]");
  }
  if (l.compile) t.emplace_back("compile", "enable", "true");
  return t;
}

void torchtitan(const ModelSpec& m, const ClusterSpec& c, const Layout& l, LaunchExport& e) {
  auto& issues = e.torchtitan_issues;
  const std::vector<TomlEntry> t = torchtitan_entries(m, l, torchtitan_dp(c, l, issues));
  torchtitan_limits(l, issues);
  std::ostringstream toml;
  toml << "# torchtitan job config fragment: " << kTorchtitanVersions << "\n";
  for (const auto& i : issues) toml << "# UNSUPPORTED: " << i << "\n";
  std::string section;
  for (const auto& [sec, key, value] : t) {
    if (sec != section) {
      toml << (section.empty() ? "" : "\n") << "[" << sec << "]\n";
      section = sec;
    }
    toml << key << " = " << value << "\n";
    std::string v = value;
    std::erase(v, '"');
    e.torchtitan_overrides.insert(e.torchtitan_overrides.end(), {"--" + sec + "." + key, v});
  }
  e.torchtitan_toml = toml.str();
}

// ---- PyTorch FSDP2 / DeviceMesh ----

// Which DP machinery PyTorch offers for a sharding: FSDP2 (P, G, OS together), or DDP with
// ZeroRedundancyOptimizer (ZeRO-1 at G or I); what it cannot express goes to `issues`.
struct PytorchPlan {
  enum class Kind { fsdp, ddp, unsupported } kind = Kind::unsupported;
  DpSplit split;
  std::string fsdp1, reshard = "True";  // FSDP1's ShardingStrategy; FSDP2's reshard_after_forward
};

PytorchPlan pytorch_plan(const ClusterSpec& c, const Layout& l, std::vector<std::string>& issues) {
  const StateSharding& s = l.sharding;
  const std::string code = sharding_code(s);
  PytorchPlan x;
  x.split = DpSplit{l.dp, 1, ""};
  if (s.params == Shard::none && s.grads == Shard::none) {
    x.kind = PytorchPlan::Kind::ddp;
    if (s.optimizer == Shard::intra) x.split = dp_split(Shard::intra, l, c.gpus_per_node);
    x.fsdp1 = s.optimizer == Shard::none ? "NO_SHARD" : "";
    if (l.tp > 1)
      issues.push_back(
          "sharding " + code + " with tp " + num(l.tp) +
          ": PyTorch's public API composes DTensor "
          "tensor parallelism with FSDP2 only, not with DDP (torchtitan runs DDP only as 1-D parallelism)");
  } else if (s.grads == s.optimizer && (s.params == s.grads || s.params == Shard::none)) {
    x.kind = PytorchPlan::Kind::fsdp;
    x.split = dp_split(s.grads, l, c.gpus_per_node);
    if (s.params == Shard::none) x.reshard = "False";
    x.fsdp1 = s.grads == Shard::global ? (s.params == Shard::none ? "SHARD_GRAD_OP" : "FULL_SHARD")
                                       : (s.params == Shard::none ? "_HYBRID_SHARD_ZERO2" : "HYBRID_SHARD");
  } else {
    issues.push_back("sharding " + code +
                     ": FSDP shards P, G and OS at one scope (FULL_SHARD GGG, HYBRID_SHARD III, "
                     "SHARD_GRAD_OP NGG, _HYBRID_SHARD_ZERO2 NII) and DDP + ZeroRedundancyOptimizer covers NNG/NNI; " +
                     code + " has no equivalent");
  }
  if (!x.split.problem.empty()) {
    issues.push_back("sharding " + code + ": " + x.split.problem);
    x.kind = PytorchPlan::Kind::unsupported;
  }
  return x;
}

// The comments that say how TP, CP, PP, recompute, LoRA and the batch map onto PyTorch's APIs.
void write_pytorch_parallelism(std::ostringstream& py, const Layout& l) {
  if (l.tp > 1)
    py << "# tp = " << l.tp << ": parallelize_module(block, mesh[\"tp\"], plan) for every decoder block"
       << (l.sequence_parallel ? ", SequenceParallel() on the norms" : " (no sequence parallelism)") << "\n";
  if (l.cp > 1)
    py << "# cp = " << l.cp
       << ": torch.distributed.tensor.experimental.context_parallel(mesh[\"cp\"], ...) around "
          "forward and backward\n";
  if (l.pp > 1)
    py << "# pp = " << l.pp << ": torch.distributed.pipelining stages on mesh[\"pp\"], "
       << "Schedule" << torchtitan_schedule_name(l.schedule)
       << (l.schedule == Schedule::zbv        ? std::string(" (2 stages per rank, in a V)")
           : multi_chunk_schedule(l.schedule) ? " (" + num(l.vpp) + " stages per rank)"
                                              : std::string())
       << ", n_microbatches=" << l.microbatches() << ", micro-batch " << l.mbs << "\n";
  if (l.recompute != Recompute::none)
    py << "# recompute " << to_string(l.recompute) << ": "
       << (l.recompute == Recompute::full ? "checkpoint_wrapper(block) on every decoder block"
           : l.recompute == Recompute::op
               ? "checkpoint_wrapper(block, context_fn=create_selective_checkpoint_contexts(policy)) saving SDPA, "
                 "reduce-scatter and every other mm output (torchtitan's SelectiveAC)"
               : "recompute core attention only (torch.utils.checkpoint around it)")
       << "\n";
  if (recomputes_modules(l))
    py << "# UNSUPPORTED: recompute_modules " << recompute_modules_to_string(l.recompute_modules)
       << ": Megatron-LM's; checkpoint those submodules with torch.utils.checkpoint yourself\n";
  if (l.compile) py << "# compile: torch.compile(block) on every decoder block before fully_shard\n";
  if (l.attention_backend == AttentionBackend::cudnn)
    py << "# attention: with torch.nn.attention.sdpa_kernel(SDPBackend.CUDNN_ATTENTION) around the model's forward\n";
  if (l.lora.enabled())
    py << "# LoRA rank " << l.lora.rank << ": add the adapters (e.g. peft.get_peft_model) before fully_shard\n";
  py << "# micro-batch " << l.mbs << " x seq " << l.seq << " per rank; global batch " << l.gbs
     << " sequences = " << l.microbatches() << " micro-batches x dp " << l.dp << "\n";
}

// FSDP2's fully_shard per decoder layer over the DP (x CP) mesh, HSDP where the split replicates.
void write_fsdp(std::ostringstream& py, const Layout& l, const PytorchPlan& x) {
  const bool hsdp = x.split.replicate > 1;
  if (l.cp > 1) {
    py << "mesh[(\"dp_shard\", \"cp\")]._flatten(\"dp_shard_cp\")  # FSDP shards over DP x CP\n";
    py << "dp_mesh = mesh[" << (hsdp ? R"(("dp_replicate", "dp_shard_cp"))" : R"("dp_shard_cp")") << "]\n";
  } else {
    py << "dp_mesh = mesh[" << (hsdp ? R"(("dp_replicate", "dp_shard"))" : R"("dp_shard")") << "]"
       << (hsdp ? "  # HSDP: replicate x shard" : "") << "\n";
  }
  // Optimizer states under FP32's 8 B of AdamW moments: a BF16 model throughout (pytorch-fsdp without
  // fsdp_mixed_precision); else FP32 shards computed in BF16.
  const std::string states = decimal(l.precision.weight_bytes + l.precision.grad_bytes + l.precision.optimizer_bytes);
  if (l.precision.optimizer_bytes < 8.0)
    py << "model.to(torch.bfloat16)  # BF16 throughout (parameters, gradients, AdamW moments: " << states
       << " B a parameter)\n";
  else
    py << "# the model in float32 (its shard, gradients and AdamW moments: " << states
       << " B a parameter), computed in bfloat16\n";
  py << "mp = MixedPrecisionPolicy(param_dtype=torch." << (l.precision.weight_bytes == 2 ? "bfloat16" : "float32")
     << ", reduce_dtype=torch." << (l.precision.grad_bytes == 2 ? "bfloat16" : "float32") << ")\n";
  py << "for block in model.layers:  # one FSDP unit per decoder layer\n"
     << "    fully_shard(block, mesh=dp_mesh, reshard_after_forward=" << x.reshard << ", mp_policy=mp)\n"
     << "fully_shard(model, mesh=dp_mesh, reshard_after_forward=" << x.reshard << ", mp_policy=mp)\n";
  py << "# FSDP1 equivalent: FullyShardedDataParallel(model, device_mesh=dp_mesh, use_orig_params=True,\n"
     << "#     sharding_strategy=ShardingStrategy." << x.fsdp1 << ")\n";
}

// DDP over DP x CP, with ZeroRedundancyOptimizer where the optimizer states are sharded.
void write_ddp(std::ostringstream& py, const Layout& l, const PytorchPlan& x) {
  const StateSharding& s = l.sharding;
  py << "mesh[(\"dp_replicate\", \"dp_shard\", \"cp\")]._flatten(\"dp_cp\")  # gradients are averaged over DP x CP\n";
  py << "model = DDP(model, process_group=mesh[\"dp_cp\"].get_group())\n";
  if (s.optimizer != Shard::none) {
    const bool in_node = s.optimizer == Shard::intra && x.split.replicate > 1;
    if (in_node && l.cp > 1)
      py << "mesh[(\"dp_shard\", \"cp\")]._flatten(\"dp_shard_cp\")  # optimizer states sharded inside a node\n";
    const std::string group = in_node ? (l.cp > 1 ? "dp_shard_cp" : "dp_shard") : "dp_cp";
    py << "optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,\n"
       << "                                    process_group=mesh[\"" << group << "\"].get_group())\n";
  }
  if (!x.fsdp1.empty()) py << "# FSDP1 equivalent: ShardingStrategy." << x.fsdp1 << "\n";
}

void pytorch(const ClusterSpec& c, const Layout& l, LaunchExport& e) {
  const PytorchPlan x = pytorch_plan(c, l, e.fsdp_issues);
  if (recompute_by_layers(l))
    e.fsdp_issues.emplace_back("recompute by layers: the plan wraps every decoder block in checkpoint_wrapper");
  if (l.mtp_layers > 0) e.fsdp_issues.emplace_back("multi-token prediction: the plan has no MTP module");
  using Kind = PytorchPlan::Kind;
  std::ostringstream py;
  py << "# PyTorch FSDP2 + DeviceMesh: " << kPytorchVersions
     << "; on PyTorch 2.4/2.5 import fully_shard from torch.distributed._composable.fsdp.\n";
  py << "# Launch: torchrun --nnodes " << e.nodes << " --nproc-per-node " << e.gpus_per_node << " train.py\n";
  for (const auto& i : e.fsdp_issues) py << "# UNSUPPORTED: " << i << "\n";
  py << "import torch\n"
        "from torch.distributed.device_mesh import init_device_mesh\n";
  if (x.kind == Kind::fsdp) py << "from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard\n";
  if (x.kind == Kind::ddp) {
    py << "from torch.nn.parallel import DistributedDataParallel as DDP\n";
    if (l.sharding.optimizer != Shard::none) py << "from torch.distributed.optim import ZeroRedundancyOptimizer\n";
  }
  py << "\n";
  const std::int64_t rep = x.kind == Kind::unsupported ? l.dp : x.split.replicate;
  const std::int64_t shd = x.kind == Kind::unsupported ? 1 : x.split.shard;
  py << "mesh = init_device_mesh(\"cuda\", (" << l.pp << ", " << rep << ", " << shd << ", " << l.cp << ", " << l.tp
     << "),\n                        mesh_dim_names=(\"pp\", \"dp_replicate\", \"dp_shard\", \"cp\", \"tp\"))\n";
  write_pytorch_parallelism(py, l);
  if (x.kind == Kind::fsdp) write_fsdp(py, l, x);
  if (x.kind == Kind::ddp) write_ddp(py, l, x);
  e.fsdp_python = py.str();
}

// The model in Megatron-DeepSpeed's spellings (deepspeedai/Megatron-DeepSpeed megatron/arguments.py at 4efb479d5317:
// --num-key-value-heads for GQA, --normalization layernorm|rmsnorm, --use-rotary-position-embeddings (which turns the
// learned position embeddings off) with --rotary-position-embeddings-theta, --layernorm-epsilon). It has no flag for
// a bias on QKV alone, RoPE scaling, QK norms, sliding windows, latent attention or Megatron-LM's experts.
void megatron_deepspeed_model(const ModelSpec& m, std::vector<std::string>& a, std::vector<std::string>& issues) {
  a = shape_flags(m);
  if (m.num_kv_heads != m.num_heads) a.insert(a.end(), {"--num-key-value-heads", num(m.num_kv_heads)});
  if (m.head_dim > 0 && m.head_dim * m.num_heads != m.hidden_size)
    a.insert(a.end(), {"--kv-channels", num(m.head_dim)});
  a.insert(a.end(), {"--max-position-embeddings", num(m.max_context)});
  if (m.mlp == Mlp::swiglu) a.emplace_back("--swiglu");
  if (m.mlp == Mlp::relu2) a.emplace_back("--squared-relu");
  if (m.mlp == Mlp::geglu) issues.emplace_back("GeGLU (gated tanh GELU): Megatron-DeepSpeed has --swiglu only");
  if (m.rotary_fraction < 1.0) a.insert(a.end(), {"--rotary-percent", decimal(m.rotary_fraction)});
  a.insert(a.end(), {"--normalization", m.norm == Norm::rmsnorm ? "rmsnorm" : "layernorm"});
  if (!m.linear_biases) a.emplace_back("--disable-bias-linear");
  if (m.qkv_bias && !m.linear_biases) issues.emplace_back("a bias on QKV alone: Megatron-DeepSpeed has no such flag");
  if (m.attention_sinks) issues.emplace_back("attention sinks: Megatron-DeepSpeed has no such flag");
  // BLOOM's fork's flags (bigscience-workshop/Megatron-DeepSpeed arguments.py); ALiBi replaces a learned table there.
  if (m.alibi || m.embedding_norm)
    issues.emplace_back(
        "ALiBi (--position-embedding-type alibi) and --embed-layernorm are BLOOM's fork's "
        "(bigscience-workshop/Megatron-DeepSpeed), not deepspeedai's");
  if (m.alibi) a.insert(a.end(), {"--position-embedding-type", "alibi"});
  if (m.alibi && m.learned_positions)
    issues.emplace_back("ALiBi with a learned position table: the fork has one of them");
  if (m.embedding_norm) a.emplace_back("--embed-layernorm");
  if (!m.learned_positions && !m.alibi) {
    a.emplace_back("--use-rotary-position-embeddings");
    if (m.rope_theta > 0 && m.rope_theta == std::floor(m.rope_theta) && m.rope_theta <= 2e9)
      a.insert(a.end(), {"--rotary-position-embeddings-theta", num(static_cast<std::int64_t>(m.rope_theta))});
    else
      issues.emplace_back(
          "RoPE base: not an integer the model spec gives; --rotary-position-embeddings-theta 10000 "
          "applies");
    if (!m.rope_scaling.empty()) issues.push_back("RoPE scaling " + m.rope_scaling + ": Megatron-DeepSpeed has none");
  }
  if (!m.tied_embeddings) a.emplace_back("--untie-embeddings-and-output-weights");
  if (m.norm_eps > 0) a.insert(a.end(), {"--layernorm-epsilon", decimal(m.norm_eps)});
  if (m.norm_plus_one) a.emplace_back("--apply-layernorm-1p");
  a.insert(a.end(), {"--attention-dropout", decimal(m.attention_dropout), "--hidden-dropout", "0"});
  if (m.qk_norm) issues.emplace_back("QK norms: Megatron-DeepSpeed has no such flag");
  if (m.sliding_window > 0) issues.emplace_back("sliding-window attention: Megatron-DeepSpeed has no such flag");
  if (m.sandwich_norms) issues.emplace_back("norms after attention and MLP: Megatron-DeepSpeed has no such flag");
  if (m.parallel_residual) issues.emplace_back("parallel attention and MLP: Megatron-DeepSpeed has no such flag");
  if (m.lm_head_bias) issues.emplace_back("a bias on the LM head: Megatron-DeepSpeed has no such flag");
  if (latent_attention(m)) issues.emplace_back("latent attention: Megatron-DeepSpeed has no such flag");
  if (m.num_experts > 0)
    issues.emplace_back("experts: Megatron-DeepSpeed's MoE (--num-experts, --topk) is not what headroom prices");
  if (m.scaled_embeddings || m.attention_softcap > 0 || m.final_softcap > 0)
    issues.emplace_back("Gemma's embedding scale and soft caps: Megatron-DeepSpeed has no such flags");
}

// DeepSpeed with Megatron-DeepSpeed's model: the ZeRO stage of the sharding (deepspeed/runtime/zero/config.py: 0 none,
// 1 optimizer states, 2 and gradients, 3 and parameters, each over all of DP), the ds_config.json DeepSpeed reads and
// Megatron-DeepSpeed's pretrain_gpt.py arguments: the model's, parallelism, batch and ZeRO.
void deepspeed(const ModelSpec& m, const Layout& l, LaunchExport& e) {
  auto& issues = e.deepspeed_issues;
  const StateSharding& s = l.sharding;
  const bool dp_wide = s.params != Shard::intra && s.grads != Shard::intra && s.optimizer != Shard::intra;
  const bool nested =
      (s.optimizer != Shard::none || s.grads == Shard::none) && (s.grads != Shard::none || s.params == Shard::none);
  const int stage = !dp_wide || !nested          ? -1
                    : s.params != Shard::none    ? 3
                    : s.grads != Shard::none     ? 2
                    : s.optimizer != Shard::none ? 1
                                                 : 0;
  if (stage < 0)
    issues.push_back("sharding " + sharding_code(s) +
                     ": ZeRO shards over the whole DP group, states before gradients before parameters (NNN, NNG, "
                     "NGG, GGG)");
  if (stage >= 2 && l.pp > 1)
    issues.emplace_back("ZeRO-2/3 with a pipeline: DeepSpeed's PipelineEngine asserts stage < 2");
  if (l.cp > 1)
    issues.emplace_back(
        "context parallelism: Megatron-DeepSpeed splits sequences with DeepSpeed-Ulysses "
        "(--ds-sequence-parallel-size), "
        "not the ring attention headroom prices");
  if (l.schedule != Schedule::one_f_one_b && l.pp > 1)
    issues.emplace_back("schedule " + std::string(to_string(l.schedule)) + ": DeepSpeed's pipeline engine runs 1F1B");
  if (l.split.uneven() || l.split.layer_layout)
    issues.emplace_back("first/last stage layer counts: --partition-method custom by hand");
  if (l.fp8 != Fp8Recipe::none) issues.emplace_back("FP8: not in DeepSpeed's engine as headroom prices it");
  if (l.mtp_layers > 0) issues.emplace_back("multi-token prediction: not in Megatron-DeepSpeed's pretrain_gpt.py");
  if (l.lora.enabled()) issues.emplace_back("LoRA: not in Megatron-DeepSpeed's pretrain_gpt.py");
  if (l.recompute == Recompute::op) issues.emplace_back("recompute op: torchtitan's per-op checkpointing");
  if (recompute_by_layers(l)) issues.emplace_back("recompute by layers: Megatron-LM's and torchtitan's");
  if (l.compile) issues.emplace_back("compile: torchtitan's torch.compile of the blocks");
  if (l.attention_backend == AttentionBackend::cudnn)
    issues.emplace_back("attention_backend cudnn: Megatron-DeepSpeed calls the flash-attn package");
  if (l.tp_comm_overlap)
    issues.emplace_back("TP communication overlap: Transformer Engine's userbuffers (Megatron-LM)");
  if (l.optimizer_offload > 0 || l.activation_offload_layers > 0)
    issues.emplace_back("offloading: ZeRO-Offload's settings are not written (Megatron-LM's are priced)");
  if (l.optimizer_precision.given())
    issues.emplace_back("optimizer-state and gradient formats: Megatron-LM's precision-aware optimizer flags only");
  nlohmann::json ds = {{"train_batch_size", l.gbs},
                       {"train_micro_batch_size_per_gpu", l.mbs},
                       {"gradient_accumulation_steps", l.microbatches()},
                       {"bf16", {{"enabled", l.precision.weight_bytes == 2}}},
                       {"gradient_clipping", 1.0},
                       {"steps_per_print", 10},
                       {"wall_clock_breakdown", false}};
  // The ZeRO settings priced under the deepspeed framework (Layout::zero; another framework's layout takes DeepSpeed's
  // defaults), contiguous gradient buckets; ZeRO-3's fetching at stage 3.
  if (stage >= 0) {
    nlohmann::json& z = ds["zero_optimization"];
    z = {{"stage", stage},
         {"overlap_comm", l.zero.deepspeed ? l.zero.overlap_comm : zero_overlap_comm_default(s)},
         {"contiguous_gradients", true}};
    if (l.zero.deepspeed) z["reduce_bucket_size"] = l.zero.reduce_bucket_size;
    if (l.zero.deepspeed && stage == 3) {
      z["stage3_prefetch_bucket_size"] = l.zero.prefetch_bucket_size;
      z["stage3_max_live_parameters"] = l.zero.max_live_parameters;
      z["stage3_max_reuse_distance"] = l.zero.max_reuse_distance;
      if (l.zero.hpz_partition_size > 1) z["zero_hpz_partition_size"] = l.zero.hpz_partition_size;
    }
  }
  e.deepspeed_config = ds.dump(2) + "\n";
  auto& a = e.deepspeed;
  megatron_deepspeed_model(m, a, issues);
  a.insert(a.end(), {"--tensor-model-parallel-size", num(l.tp), "--pipeline-model-parallel-size", num(l.pp)});
  // Megatron-DeepSpeed runs DeepSpeed's pipeline engine unless told not to; ZeRO-2/3 need it off.
  if (l.pp == 1) a.emplace_back("--no-pipeline-parallel");
  if (l.tp > 1 && l.sequence_parallel) a.emplace_back("--sequence-parallel");
  a.insert(a.end(), {"--micro-batch-size", num(l.mbs), "--global-batch-size", num(l.gbs), "--seq-length", num(l.seq)});
  if (l.precision.weight_bytes == 2) a.emplace_back("--bf16");
  if (l.flash_attention) a.emplace_back("--use-flash-attn-v2");
  if (l.recompute == Recompute::selective) a.insert(a.end(), {"--recompute-granularity", "selective"});
  if (recomputes_modules(l))
    issues.push_back("recompute_modules " + recompute_modules_to_string(l.recompute_modules) +
                     ": Megatron-LM's; Megatron-DeepSpeed's selective recompute is the core attention's");
  // Every layer recomputed: Megatron-DeepSpeed's --checkpoint-activations, which DeepSpeed's activation checkpointing
  // serves (megatron/model/transformer.py _checkpointed_forward, one layer a chunk by default).
  if (l.recompute == Recompute::full)
    a.insert(a.end(), {"--checkpoint-activations", "--deepspeed-activation-checkpointing"});
  a.insert(a.end(), {"--deepspeed", "--deepspeed_config", "ds_config.json"});
  if (stage >= 0) a.insert(a.end(), {"--zero-stage", std::to_string(stage)});
}

std::string joined(const std::vector<std::string>& tokens, const std::vector<std::string>& issues) {
  std::string line;
  for (const auto& t : tokens) {
    if (!line.empty()) line += ' ';
    line += shell_word(t);
  }
  for (const auto& i : issues) line += "  # UNSUPPORTED: " + i;
  return line;
}

}  // namespace

// ---- NeMo ----

std::vector<std::pair<std::string, std::string>> nemo_layout_keys(const Layout& l) {
  const auto boolean = [](bool x) { return std::string(x ? "true" : "false"); };
  const bool full = l.recompute == Recompute::full;
  return {{"model.micro_batch_size", num(l.mbs)},
          {"model.global_batch_size", num(l.gbs)},
          {"model.tensor_model_parallel_size", num(l.tp)},
          {"model.pipeline_model_parallel_size", num(l.pp)},
          {"model.virtual_pipeline_model_parallel_size", l.vpp > 1 ? num(l.vpp) : "null"},
          {"model.context_parallel_size", num(l.cp)},
          {"model.expert_model_parallel_size", num(l.ep)},
          {"model.sequence_parallel", boolean(l.tp > 1 && l.sequence_parallel)},
          {"model.activations_checkpoint_granularity", full                                  ? "full"
                                                       : l.recompute == Recompute::selective ? "selective"
                                                                                             : "null"},
          {"model.activations_checkpoint_method",
           full ? std::string(l.recompute_method == RecomputeMethod::block ? "block" : "uniform") : "null"},
          {"model.activations_checkpoint_num_layers", full ? num(l.recompute_num_layers) : "null"},
          // Megatron-core's TransformerConfig field, which megatron_base_model.py copies from the model config.
          {"model.recompute_modules",
           recomputes_modules(l) ? "[" + recompute_modules_to_string(l.recompute_modules) + "]" : "null"},
          {"model.ub_tp_comm_overlap", boolean(l.tp_comm_overlap)},
          {"model.overlap_p2p_comm", boolean(l.overlap_p2p_comm)}};
}

namespace {

// The layout as overrides of the model's NeMo training config, which holds the model's shape (the keys
// calibrate/ingest's NeMo reader reads). NeMo runs Megatron-core: what Megatron-LM's arguments cannot express of a
// layout NeMo cannot either, and the settings NeMo's config has no key for are issues too.
void nemo(const Layout& l, LaunchExport& e) {
  auto& issues = e.nemo_issues;
  if (l.recompute == Recompute::op) issues.emplace_back("recompute op: torchtitan's per-op checkpointing");
  if (l.recompute == Recompute::full && l.recompute_method == RecomputeMethod::every)
    issues.emplace_back("recompute every N-th layer: torchtitan's layer-selective checkpointing");
  if (l.compile) issues.emplace_back("compile: torch.compile of the blocks is torchtitan's");
  if (!megatron_core_schedule(l.schedule))
    issues.emplace_back("schedule " + std::string(to_string(l.schedule)) +
                        ": Megatron-core has 1F1B and interleaved 1F1B");
  if (l.lora.enabled()) issues.emplace_back("LoRA: a NeMo pre-training config has no adapters");
  if (l.optimizer_precision.fp16)
    issues.emplace_back("FP16 (--fp16): check reads NeMo 1.x's trainer.precision bf16 only; written as BF16");
  if (l.fp8 != Fp8Recipe::none && l.fp8_library == Fp8Library::torchao)
    issues.emplace_back("FP8 priced as torchao's (the framework's); NeMo runs Transformer Engine's");
  std::vector<std::pair<std::string, std::string>> keys = {{"trainer.num_nodes", num(e.nodes)},
                                                           {"trainer.devices", num(e.gpus_per_node)},
                                                           {"model.encoder_seq_length", num(l.seq)},
                                                           {"model.data.seq_length", num(l.seq)}};
  if (e.nodes * e.gpus_per_node != l.gpus())
    issues.push_back(num(l.gpus()) + " GPUs are not trainer.num_nodes x trainer.devices of whole nodes");
  const auto layout = nemo_layout_keys(l);
  keys.insert(keys.end(), layout.begin(), layout.end());
  keys.emplace_back("model.fp8", l.fp8 != Fp8Recipe::none ? "true" : "false");
  if (l.fp8 != Fp8Recipe::none) {
    keys.insert(keys.end(), {{"model.fp8_e4m3", "false"}, {"model.fp8_hybrid", "true"}});
    if (l.fp8 != Fp8Recipe::delayed)
      issues.push_back("FP8 recipe " + std::string(to_string(l.fp8)) + ": NeMo 1.x's fp8 keys set delayed scaling");
  }
  keys.emplace_back("model.fp8_params", l.fp8_param_gather ? "true" : "false");
  const StateSharding& s = l.sharding;
  const bool distributed = s.params == Shard::none && s.grads == Shard::none && s.optimizer == Shard::global;
  if (!distributed && !(uniform(s) && s.params == Shard::none))
    issues.push_back("sharding " + sharding_code(s) +
                     ": NeMo's optimizers shard the optimizer states over the whole DP group (mcore_distributed_optim, "
                     "NNG) or nothing (fused_adam, NNN)");
  keys.emplace_back("model.optim.name", distributed ? "mcore_distributed_optim" : "fused_adam");
  const OptimizerPrecision& o = l.optimizer_precision;
  if (distributed) keys.emplace_back("model.optim.grad_sync_dtype", o.grad_reduce_in_bf16 ? "bf16" : "fp32");
  if (o.precision_aware || o.main_params != Dtype::fp32 || o.exp_avg != Dtype::fp32 || o.exp_avg_sq != Dtype::fp32 ||
      o.main_grads != Dtype::fp32)
    issues.emplace_back(
        "the precision-aware optimizer's formats: NeMo 1.x's config sets them only through Apex's "
        "distributed_fused_adam (16-bit master remainders), not this combination");
  if (!l.split.even())
    issues.emplace_back("uneven pipeline stages: NeMo 1.x's training config has no first/last stage layer counts");
  if (l.optimizer_offload > 0 || l.activation_offload_layers > 0)
    issues.emplace_back("offloading: NeMo 1.x's training config has no optimizer or activation offload key");
  if (l.attention_backend != AttentionBackend::framework)
    issues.emplace_back("attention_backend: NeMo 1.x's training config has no attention backend key");
  if (!l.flash_attention) issues.emplace_back("no FlashAttention: check reads only use_flash_attention true");
  if (l.etp > 0 && l.etp != l.tp)
    issues.emplace_back("expert tensor parallelism apart from TP: NeMo 1.x's training config has no key for it");
  if (l.dispatcher != ExpertDispatcher::alltoall || l.expert_load != 1.0 || l.shared_expert_overlap)
    issues.emplace_back(
        "the expert dispatcher, capacity factor or shared-expert overlap: written for Megatron-LM only");
  if (l.mtp_layers > 0) issues.emplace_back("multi-token prediction: written for Megatron-LM only");
  for (const auto& [key, value] : keys) e.nemo.push_back("++training." + key + "=" + value);
}

}  // namespace

LaunchExport launch_export(const ModelSpec& model, const ClusterSpec& cluster, const Layout& layout) {
  LaunchExport e;
  e.gpus_per_node = std::max<std::int64_t>(1, std::min(cluster.gpus_per_node, layout.gpus()));
  e.nodes = (layout.gpus() + e.gpus_per_node - 1) / e.gpus_per_node;
  megatron(model, cluster, layout, e);
  torchtitan(model, cluster, layout, e);
  pytorch(cluster, layout, e);
  deepspeed(model, layout, e);
  nemo(layout, e);
  return e;
}

std::string shell_word(std::string_view token) {
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
           std::string_view("-_./:=,+@%").find(c) != std::string_view::npos;
  };
  if (!token.empty() && std::all_of(token.begin(), token.end(), plain)) return std::string(token);
  std::string word = "'";
  for (const char c : token) {
    if (c == '\'')
      word += "'\\''";  // close, an escaped quote, reopen
    else
      word += c;
  }
  return word + "'";
}

std::string megatron_line(const LaunchExport& e) { return joined(e.megatron, e.megatron_issues); }
std::string torchtitan_line(const LaunchExport& e) { return joined(e.torchtitan_overrides, e.torchtitan_issues); }
std::string deepspeed_line(const LaunchExport& e) { return joined(e.deepspeed, e.deepspeed_issues); }

nlohmann::json launch_to_json(const LaunchExport& e) {
  return {{"megatron", e.megatron},
          {"torchtitan_toml", e.torchtitan_toml},
          {"fsdp_python", e.fsdp_python},
          {"deepspeed", e.deepspeed},
          {"deepspeed_config", nlohmann::json::parse(e.deepspeed_config)},
          {"nemo", e.nemo},
          {"torchrun", {{"nnodes", e.nodes}, {"nproc_per_node", e.gpus_per_node}}},
          {"unsupported",
           {{"megatron", e.megatron_issues},
            {"torchtitan", e.torchtitan_issues},
            {"fsdp", e.fsdp_issues},
            {"deepspeed", e.deepspeed_issues},
            {"nemo", e.nemo_issues}}},
          {"versions",
           {{"megatron", kMegatronVersions},
            {"torchtitan", kTorchtitanVersions},
            {"fsdp", kPytorchVersions},
            {"deepspeed", kDeepspeedVersions},
            {"nemo", kNemoVersions}}}};
}

}  // namespace headroom
