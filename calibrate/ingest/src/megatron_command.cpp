// A Megatron-LM launch command (torchrun ... pretrain_gpt.py --flags), read into the run a log of it would give:
// the flags as megatron/training/arguments.py parses them (dest names, store_true and store_false), its defaults
// where the model or the layout needs one, then the same readers as a log's arguments block.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "headroom/ingest/tokenizer_file.hpp"
#include "megatron_args.hpp"

namespace headroom::calibrate {
namespace {

enum class Arity { value, store_true, store_false, values };  // values: every token up to the next flag

struct Flag {
  std::string_view flag, dest;
  Arity arity;
  std::string_view ignored_because;  // empty: read into the model or the layout
};

// The model's flags (megatron/training/arguments.py, _add_network_size_args and the transformer config's), read by
// megatron_model, and the flags that change neither memory nor time, each with why (the check prints it).
constexpr std::array kFlags = {
    Flag{"--num-layers", "num_layers", Arity::value, ""},
    Flag{"--hidden-size", "hidden_size", Arity::value, ""},
    Flag{"--ffn-hidden-size", "ffn_hidden_size", Arity::value, ""},
    Flag{"--num-attention-heads", "num_attention_heads", Arity::value, ""},
    Flag{"--group-query-attention", "group_query_attention", Arity::store_true, ""},
    Flag{"--num-query-groups", "num_query_groups", Arity::value, ""},
    Flag{"--kv-channels", "kv_channels", Arity::value, ""},
    Flag{"--vocab-size", "vocab_size", Arity::value, ""},
    Flag{"--make-vocab-size-divisible-by", "make_vocab_size_divisible_by", Arity::value, ""},
    Flag{"--max-position-embeddings", "max_position_embeddings", Arity::value, ""},
    Flag{"--untie-embeddings-and-output-weights", "untie_embeddings_and_output_weights", Arity::store_true, ""},
    Flag{"--normalization", "normalization", Arity::value, ""},
    Flag{"--swiglu", "swiglu", Arity::store_true, ""},
    Flag{"--squared-relu", "squared_relu", Arity::store_true, ""},
    Flag{"--quick-geglu", "quick_geglu", Arity::store_true, ""},  // argument_utils.py: gated, quick_gelu
    // transformer_config.py: gpt-oss's (up + offset) and its clamp of the gated activation's inputs.
    Flag{"--glu-linear-offset", "glu_linear_offset", Arity::value,
         "the gated activation's linear offset: elementwise arithmetic on tensors priced anyway"},
    Flag{"--activation-func-clamp-value", "activation_func_clamp_value", Arity::value,
         "the gated activation's clamp: elementwise arithmetic on tensors priced anyway"},
    Flag{"--disable-bias-linear", "add_bias_linear", Arity::store_false, ""},
    Flag{"--add-qkv-bias", "add_qkv_bias", Arity::store_true, ""},
    Flag{"--position-embedding-type", "position_embedding_type", Arity::value, ""},
    Flag{"--use-rotary-position-embeddings", "use_rotary_position_embeddings", Arity::store_true, ""},
    Flag{"--qk-layernorm", "qk_layernorm", Arity::store_true, ""},
    Flag{"--softmax-type", "softmax_type", Arity::value, ""},
    Flag{"--attention-dropout", "attention_dropout", Arity::value, ""},
    Flag{"--num-experts", "num_experts", Arity::value, ""},
    Flag{"--moe-router-topk", "moe_router_topk", Arity::value, ""},
    Flag{"--moe-ffn-hidden-size", "moe_ffn_hidden_size", Arity::value, ""},
    Flag{"--moe-shared-expert-intermediate-size", "moe_shared_expert_intermediate_size", Arity::value, ""},
    Flag{"--moe-shared-expert-gate", "moe_shared_expert_gate", Arity::store_true, ""},
    Flag{"--moe-layer-freq", "moe_layer_freq", Arity::value, ""},
    Flag{"--moe-router-num-groups", "moe_router_num_groups", Arity::value, ""},
    Flag{"--moe-router-group-topk", "moe_router_group_topk", Arity::value, ""},
    // The router's balancing and the experts' kernels (arguments.py _add_moe_args): the same tokens to the same
    // experts.
    Flag{"--moe-grouped-gemm", "moe_grouped_gemm", Arity::store_true, kWhyGroupedGemm},
    Flag{"--moe-router-load-balancing-type", "moe_router_load_balancing_type", Arity::value, kWhyBalancingLoss},
    Flag{"--moe-aux-loss-coeff", "moe_aux_loss_coeff", Arity::value, kWhyAuxLossWeight},
    Flag{"--moe-z-loss-coeff", "moe_z_loss_coeff", Arity::value, kWhyZLossWeight},
    Flag{"--moe-input-jitter-eps", "moe_input_jitter_eps", Arity::value, "noise on the router's input"},
    Flag{"--moe-router-dtype", "moe_router_dtype", Arity::value, kWhyRouterDtype},
    // TransformerConfig's router fields (megatron/core/transformer/transformer_config.py), which Megatron-LM's
    // arguments take as flags.
    Flag{"--moe-router-score-function", "moe_router_score_function", Arity::value, kWhyRouterScores},
    Flag{"--moe-router-pre-softmax", "moe_router_pre_softmax", Arity::store_true, kWhyRouterScores},
    Flag{"--moe-router-topk-scaling-factor", "moe_router_topk_scaling_factor", Arity::value, kWhyRouterScores},
    Flag{"--moe-router-enable-expert-bias", "moe_router_enable_expert_bias", Arity::store_true, kWhyRouterScores},
    Flag{"--moe-router-bias-update-rate", "moe_router_bias_update_rate", Arity::value, kWhyRouterScores},
    Flag{"--moe-router-force-load-balancing", "moe_router_force_load_balancing", Arity::store_true,
         "uniform routing or the learned router's: dropless experts are priced at the mean load either way"},
    Flag{"--mtp-loss-scaling-factor", "mtp_loss_scaling_factor", Arity::value,
         "the multi-token-prediction loss's weight"},
    Flag{"--no-gradient-accumulation-fusion", "gradient_accumulation_fusion", Arity::store_false, kWhyFused},
    Flag{"--moe-token-drop-policy", "moe_token_drop_policy", Arity::value,
         "which tokens past the capacity are dropped: as many either way"},
    Flag{"--moe-pad-expert-input-to-capacity", "moe_pad_expert_input_to_capacity", Arity::store_true,
         "every expert padded to the capacity --moe-expert-capacity-factor prices for the busiest"},
    Flag{"--moe-permute-fusion", "moe_permute_fusion", Arity::store_true, kWhyPermuteFusion},
    Flag{"--moe-per-layer-logging", "moe_per_layer_logging", Arity::store_true, "logging"},
    Flag{"--multi-latent-attention", "multi_latent_attention", Arity::store_true, ""},
    Flag{"--q-lora-rank", "q_lora_rank", Arity::value, ""},
    Flag{"--kv-lora-rank", "kv_lora_rank", Arity::value, ""},
    Flag{"--qk-head-dim", "qk_head_dim", Arity::value, ""},
    Flag{"--qk-pos-emb-head-dim", "qk_pos_emb_head_dim", Arity::value, ""},
    Flag{"--v-head-dim", "v_head_dim", Arity::value, ""},
    Flag{"--window-size", "window_size", Arity::value, ""},
    Flag{"--window-attn-skip-freq", "window_attn_skip_freq", Arity::value, ""},
    Flag{"--use-distributed-optimizer", "use_distributed_optimizer", Arity::store_true, ""},
    Flag{"--recompute-method", "recompute_method", Arity::value, ""},
    Flag{"--recompute-activations", "recompute_activations", Arity::store_true, ""},
    Flag{"--moe-layer-recompute", "moe_layer_recompute", Arity::store_true, ""},
    Flag{"--recompute-num-layers", "recompute_num_layers", Arity::value, ""},
    Flag{"--bf16", "bf16", Arity::store_true, ""},
    Flag{"--hidden-dropout", "hidden_dropout", Arity::value, ""},
    // megatron/training/arguments.py _add_mixed_precision_args: FP16's loss scale, one scalar a step.
    Flag{"--loss-scale", "loss_scale", Arity::value, "FP16's static loss scale: one scalar a step"},
    Flag{"--initial-loss-scale", "initial_loss_scale", Arity::value, "FP16's dynamic loss scale: one scalar a step"},
    Flag{"--min-loss-scale", "min_loss_scale", Arity::value, "FP16's dynamic loss scale: one scalar a step"},
    Flag{"--loss-scale-window", "loss_scale_window", Arity::value, "FP16's dynamic loss scale: one scalar a step"},
    Flag{"--hysteresis", "hysteresis", Arity::value, "FP16's dynamic loss scale: one scalar a step"},
    // The data-parallel overlap the framework's coefficients assume (dp_overlap, fitted on runs that overlap).
    Flag{"--overlap-grad-reduce", "overlap_grad_reduce", Arity::store_true, ""},
    Flag{"--overlap-param-gather", "overlap_param_gather", Arity::store_true, ""},
    Flag{"--overlap-param-gather-with-optimizer-step", "overlap_param_gather_with_optimizer_step", Arity::store_true,
         kWhyGatherWithStep},
    // Megatron-FSDP (arguments.py _add_distributed_args; the knobs use_megatron_fsdp, fsdp_double_buffer,
    // suggested_communication_unit_size and megatron_fsdp_main_grads_dtype are read by their names).
    Flag{"--data-parallel-sharding-strategy", "data_parallel_sharding_strategy", Arity::value, ""},
    Flag{"--use-nccl-ub", "nccl_ub", Arity::store_true, ""},
    Flag{"--megatron-fsdp-version", "megatron_fsdp_version", Arity::value, ""},
    Flag{"--megatron-fsdp-main-params-dtype", "megatron_fsdp_main_params_dtype", Arity::value, ""},
    Flag{"--megatron-fsdp-grad-comm-dtype", "megatron_fsdp_grad_comm_dtype", Arity::value, ""},
    Flag{"--outer-dp-sharding-strategy", "outer_dp_sharding_strategy", Arity::value, ""},
    Flag{"--fsdp-manual-registration", "fsdp_manual_registration", Arity::store_true,
         "NCCL's registration of Megatron-FSDP's buffers, once after the first step"},
    Flag{"--init-model-with-meta-device", "init_model_with_meta_device", Arity::store_true, "initialisation"},
    Flag{"--attention-backend", "attention_backend", Arity::value, ""},
    Flag{"--moe-flex-dispatcher-backend", "moe_flex_dispatcher_backend", Arity::value, ""},
    Flag{"--use-flash-attn", "use_flash_attn", Arity::store_true, ""},  // FlashAttention: as priced
    Flag{"--no-masked-softmax-fusion", "masked_softmax_fusion", Arity::store_false,
         "the unfused path's masked softmax: fused attention computes its own"},
    Flag{"--attention-softmax-in-fp32", "attention_softmax_in_fp32", Arity::store_true,
         "the unfused path's softmax in FP32: fused attention computes its own"},
    Flag{"--no-position-embedding", "add_position_embedding", Arity::store_false, ""},
    Flag{"--fp8-amax-history-len", "fp8_amax_history_len", Arity::value,
         "FP8 delayed scaling's amax history: a few KiB a tensor"},
    Flag{"--fp8-amax-compute-algo", "fp8_amax_compute_algo", Arity::value, "FP8 delayed scaling's amax reduction"},
    // Optimizer hyper-parameters, schedules, data, tokenizer, checkpoints, logging: no bytes, no time per step.
    Flag{"--rotary-base", "rotary_base", Arity::value, "RoPE's frequency base: no weights, the same work"},
    Flag{"--rotary-percent", "rotary_percent", Arity::value, "the rotated share of a head: no weights, the same work"},
    Flag{"--rope-type", "rope_type", Arity::value, "rope or yarn: the rotary frequencies, the same work"},
    Flag{"--use-rope-scaling", "use_rope_scaling", Arity::store_true, "RoPE's frequency scaling: the same work"},
    Flag{"--rope-scaling-factor", "rope_scaling_factor", Arity::value, "RoPE's frequency scaling: the same work"},
    // YaRN's scaling of the rotary frequencies and the softmax (multi-latent attention's, transformer_config.py).
    Flag{"--rotary-scaling-factor", "rotary_scaling_factor", Arity::value, "RoPE's frequency scaling: the same work"},
    Flag{"--mscale", "mscale", Arity::value, "YaRN's attention scale: a scalar on the scores"},
    Flag{"--mscale-all-dim", "mscale_all_dim", Arity::value, "YaRN's attention scale: a scalar on the scores"},
    Flag{"--norm-epsilon", "norm_epsilon", Arity::value, "the norms' epsilon: the same work"},
    Flag{"--apply-layernorm-1p", "apply_layernorm_1p", Arity::store_true,
         "zero-centred norm weights: the same parameters and work"},
    Flag{"--cross-entropy-loss-fusion", "cross_entropy_loss_fusion", Arity::store_true,
         "the fused loss keeps fewer FP32 logit copies: priced as the unfused loss, so the peak may be lower"},
    Flag{"--calculate-per-token-loss", "calculate_per_token_loss", Arity::store_true, "loss normalisation"},
    Flag{"--manual-gc", "manual_gc", Arity::store_true, "Python's garbage collection on the host"},
    Flag{"--manual-gc-interval", "manual_gc_interval", Arity::value, "Python's garbage collection on the host"},
    Flag{"--no-check-for-nan-in-loss-and-grad", "check_for_nan_in_loss_and_grad", Arity::store_false,
         "the NaN check of the loss and the gradient norm: one scalar a step"},
    Flag{"--empty-unused-memory-level", "empty_unused_memory_level", Arity::value,
         "the allocator's cache emptied between steps (the residual's fragmentation is fitted without it)"},
    Flag{"--log-throughput", "log_throughput", Arity::store_true, "logging"},
    Flag{"--log-params-norm", "log_params_norm", Arity::store_true,
         "the parameters' norm for the log: one read of the parameters a step"},
    Flag{"--log-num-zeros-in-grad", "log_num_zeros_in_grad", Arity::store_true,
         "the gradient's zeros counted for the log: one read of the gradients a step"},
    Flag{"--log-timers-to-tensorboard", "log_timers_to_tensorboard", Arity::store_true, "logging"},
    Flag{"--log-memory-to-tensorboard", "log_memory_to_tensorboard", Arity::store_true, "logging"},
    Flag{"--log-validation-ppl-to-tensorboard", "log_validation_ppl_to_tensorboard", Arity::store_true, "logging"},
    Flag{"--logging-level", "logging_level", Arity::value, "logging"},
    Flag{"--profile", "profile", Arity::store_true, "the profiler, on its own steps only"},
    Flag{"--profile-step-start", "profile_step_start", Arity::value, "the profiler, on its own steps only"},
    Flag{"--profile-step-end", "profile_step_end", Arity::value, "the profiler, on its own steps only"},
    Flag{"--ckpt-format", "ckpt_format", Arity::value, "checkpoints"},
    Flag{"--auto-detect-ckpt-format", "auto_detect_ckpt_format", Arity::store_true, "checkpoints"},
    Flag{"--dist-ckpt-strictness", "dist_ckpt_strictness", Arity::value, "checkpoints"},
    Flag{"--distributed-timeout-minutes", "distributed_timeout_minutes", Arity::value, "process group timeout"},
    Flag{"--step-batch-size-schedule", "step_batch_size_schedule", Arity::value,
         "the batch ramp-up of the first steps: the steady state is --global-batch-size"},
    Flag{"--rampup-batch-size", "rampup_batch_size", Arity::values,
         "the batch ramp-up of the first steps: the steady state is --global-batch-size"},
    Flag{"--transformer-impl", "transformer_impl", Arity::value, ""},
    Flag{"--lr", "lr", Arity::value, "learning rate"},
    Flag{"--min-lr", "min_lr", Arity::value, "learning rate"},
    Flag{"--decoupled-lr", "decoupled_lr", Arity::value, "learning rate"},
    Flag{"--decoupled-min-lr", "decoupled_min_lr", Arity::value, "learning rate"},
    Flag{"--lr-decay-style", "lr_decay_style", Arity::value, "learning-rate schedule"},
    Flag{"--lr-decay-iters", "lr_decay_iters", Arity::value, "learning-rate schedule"},
    Flag{"--lr-decay-samples", "lr_decay_samples", Arity::value, "learning-rate schedule"},
    Flag{"--lr-warmup-fraction", "lr_warmup_fraction", Arity::value, "learning-rate schedule"},
    Flag{"--lr-warmup-iters", "lr_warmup_iters", Arity::value, "learning-rate schedule"},
    Flag{"--lr-warmup-samples", "lr_warmup_samples", Arity::value, "learning-rate schedule"},
    Flag{"--lr-warmup-init", "lr_warmup_init", Arity::value, "learning-rate schedule"},
    Flag{"--weight-decay", "weight_decay", Arity::value, "optimizer hyper-parameter"},
    Flag{"--adam-beta1", "adam_beta1", Arity::value, "optimizer hyper-parameter"},
    Flag{"--adam-beta2", "adam_beta2", Arity::value, "optimizer hyper-parameter"},
    Flag{"--adam-eps", "adam_eps", Arity::value, "optimizer hyper-parameter"},
    Flag{"--clip-grad", "clip_grad", Arity::value, "gradient clipping (one norm per step)"},
    Flag{"--init-method-std", "init_method_std", Arity::value, "initialisation"},
    Flag{"--seed", "seed", Arity::value, "random seed"},
    Flag{"--train-iters", "train_iters", Arity::value, "length of training"},
    Flag{"--train-samples", "train_samples", Arity::value, "length of training"},
    Flag{"--exit-duration-in-mins", "exit_duration_in_mins", Arity::value, "length of training"},
    Flag{"--exit-interval", "exit_interval", Arity::value, "length of training"},
    Flag{"--data-path", "data_path", Arity::values, "data"},
    Flag{"--split", "split", Arity::value, "data"},
    Flag{"--mock-data", "mock_data", Arity::store_true, "data"},
    Flag{"--data-cache-path", "data_cache_path", Arity::value, "data"},
    Flag{"--num-workers", "num_workers", Arity::value, "data loading on the CPU"},
    Flag{"--vocab-file", "vocab_file", Arity::value, ""},
    Flag{"--merge-file", "merge_file", Arity::value, "tokenizer"},
    Flag{"--tokenizer-type", "tokenizer_type", Arity::value, ""},
    Flag{"--tokenizer-model", "tokenizer_model", Arity::value, "tokenizer"},
    Flag{"--tiktoken-pattern", "tiktoken_pattern", Arity::value, "tokenizer"},
    Flag{"--save", "save", Arity::value, "checkpoints"},
    Flag{"--load", "load", Arity::value, "checkpoints"},
    Flag{"--no-load-optim", "load_optim", Arity::store_false, "checkpoints"},
    Flag{"--no-load-rng", "load_rng", Arity::store_false, "checkpoints"},
    Flag{"--save-interval", "save_interval", Arity::value, "checkpoints (between steps)"},
    Flag{"--log-interval", "log_interval", Arity::value, "logging"},
    Flag{"--eval-interval", "eval_interval", Arity::value, "evaluation (between steps)"},
    Flag{"--eval-iters", "eval_iters", Arity::value, "evaluation (between steps)"},
    Flag{"--tensorboard-dir", "tensorboard_dir", Arity::value, "logging"},
    Flag{"--wandb-project", "wandb_project", Arity::value, "logging"},
    Flag{"--wandb-exp-name", "wandb_exp_name", Arity::value, "logging"},
    Flag{"--use-mcore-models", "use_mcore_models", Arity::store_true, "the model code (Megatron Core, the default)"},
    Flag{"--distributed-backend", "distributed_backend", Arity::value, "process group backend (nccl)"},
    Flag{"--no-create-attention-mask-in-dataloader", "create_attention_mask_in_dataloader", Arity::store_false, "data"},
    Flag{"--no-mmap-bin-files", "mmap_bin_files", Arity::store_false, "data"},
};

// Megatron-DeepSpeed's own spellings (deepspeedai/Megatron-DeepSpeed megatron/arguments.py at 4efb479d5317, and
// DeepSpeed's add_config_arguments), read where the command launches DeepSpeed.
constexpr std::array kDeepspeedFlags = {
    Flag{"--num-key-value-heads", "num_key_value_heads", Arity::value, ""},
    Flag{"--checkpoint-activations", "checkpoint_activations", Arity::store_true, ""},
    Flag{"--checkpoint-num-layers", "checkpoint_num_layers", Arity::value, ""},
    Flag{"--use-flash-attn-v1", "use_flash_attn_v1", Arity::store_true, ""},
    Flag{"--use-flash-attn", "use_flash_attn_v1", Arity::store_true, ""},
    Flag{"--use-flash-attn-v2", "use_flash_attn_v2", Arity::store_true, ""},
    Flag{"--use-flash-attn-triton", "use_flash_attn_triton", Arity::store_true, ""},
    Flag{"--no-pipeline-parallel", "no_pipeline_parallel", Arity::store_true, ""},
    Flag{"--ds-sequence-parallel-size", "ds_sequence_parallel_size", Arity::value, ""},
    Flag{"--deepspeed", "deepspeed", Arity::store_true, ""},
    Flag{"--deepspeed_config", "deepspeed_config", Arity::value, ""},
    Flag{"--zero-stage", "zero_stage", Arity::value, ""},
    Flag{"--deepspeed-activation-checkpointing", "deepspeed_activation_checkpointing", Arity::store_true,
         "DeepSpeed's implementation of the same recompute (its partitioning and CPU options are ds_config.json's)"},
    Flag{"--rotary-position-embeddings-theta", "rope_theta", Arity::value,
         "RoPE's frequency base: no weights, the same work"},
    Flag{"--layernorm-epsilon", "layernorm_epsilon", Arity::value, "the norms' epsilon: the same work"},
    Flag{"--data-impl", "data_impl", Arity::value, "data"},
    Flag{"--no-query-key-layer-scaling", "apply_query_key_layer_scaling", Arity::store_false,
         "the attention scores' scaling by layer number (FP16 range): the same work"},
    Flag{"--optimizer", "optimizer", Arity::value, ""},
    // BLOOM's fork (bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py at 8387ae17c): absolute, rotary or
    // alibi; a norm of the embeddings.
    Flag{"--position-embedding-type", "position_embedding_type", Arity::value, ""},
    Flag{"--embed-layernorm", "embed_layernorm", Arity::store_true, ""},
};

// Megatron-LM flags that Megatron-DeepSpeed spells otherwise (or lacks): its argparse would stop on them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kNotMegatronDeepspeed = {{
    {"--group-query-attention", "--num-key-value-heads K"},
    {"--num-query-groups", "--num-key-value-heads K"},
    {"--rotary-base", "--rotary-position-embeddings-theta"},
    {"--norm-epsilon", "--layernorm-epsilon"},
    {"--context-parallel-size", "--ds-sequence-parallel-size (DeepSpeed-Ulysses, not priced)"},
    {"--use-rope-scaling", "no RoPE scaling"},
}};

// The flag of `name`: a row of kFlags, or a knob's Megatron-LM spelling (knobs.hpp log_key, the flag arguments.py
// takes for it), read into the layout; under DeepSpeed a row of kDeepspeedFlags first.
std::optional<Flag> flag_of(std::string_view name, bool deepspeed, std::string_view where) {
  if (deepspeed) {
    for (const Flag& f : kDeepspeedFlags)
      if (f.flag == name) return f;
    for (const auto& [flag, instead] : kNotMegatronDeepspeed)
      if (flag == name)
        throw Error(std::string(where) + ": " + std::string(name) + " is Megatron-LM's; Megatron-DeepSpeed takes " +
                    std::string(instead));
  }
  for (const Flag& f : kFlags)
    if (f.flag == name) return f;
  // Spellings whose dest is not the flag's words (arguments.py).
  if (name == "--fp8-format") return Flag{name, "fp8", Arity::value, ""};
  if (name == "--num-virtual-stages-per-pipeline-rank")
    return Flag{name, "virtual_pipeline_model_parallel_size", Arity::value, ""};
  if (name == "--num-layers-per-virtual-pipeline-stage")
    return Flag{name, "num_layers_per_virtual_pipeline_stage", Arity::value, ""};
  if (name == "--no-overlap-p2p-communication") return Flag{name, "overlap_p2p_comm", Arity::store_false, ""};
  if (name == "--cpu-offloading") return Flag{name, "cpu_offloading", Arity::store_true, ""};
  for (const Knob& k : knobs()) {
    if (k.log_key.empty()) continue;
    std::string flag = "--" + std::string(k.log_key);
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (flag == name)
      return Flag{name, k.log_key,
                  k.type == KnobType::flag   ? Arity::store_true
                  : k.type == KnobType::list ? Arity::values  // nargs='*' (--recompute-modules mlp moe)
                                             : Arity::value,
                  ""};
  }
  return std::nullopt;
}

std::int64_t positive(const std::string& text, std::string_view what, std::string_view where) {
  std::int64_t x = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (ec != std::errc() || p != text.data() + text.size() || x <= 0)
    throw Error(std::string(where) + ": " + std::string(what) + " '" + text + "' is not a positive integer");
  return x;
}

std::string get(const std::map<std::string, std::string>& a, const std::string& key, const std::string& fallback) {
  const auto it = a.find(key);
  return it == a.end() ? fallback : it->second;
}

// What arguments.py's validate_args does with Megatron-FSDP's flags, and what headroom does not price of them.
void megatron_fsdp_arguments(std::map<std::string, std::string>& args, MegatronCommand& out, std::string_view where) {
  const std::string w(where);
  // Megatron-FSDP v1 runs with the distributed optimizer (arguments.py sets it); v2 is another code path.
  if (const std::string v = get(args, "megatron_fsdp_version", "1"); v != "1")
    throw Error(w + ": --megatron-fsdp-version " + v + ": only Megatron-FSDP v1 (the default) is priced");
  args["use_distributed_optimizer"] = "True";
  // arguments.py: --use-nccl-ub turns on --fsdp-double-buffer (user buffers need persistent ones).
  if (args.contains("nccl_ub")) {
    args["fsdp_double_buffer"] = "True";
    read_to_ignored(out, "--use-nccl-ub",
                    "NCCL's user buffers: its double buffers are priced as --fsdp-double-buffer, its collectives at "
                    "NCCL's default kernels");
  }
  if (const std::string v = get(args, "megatron_fsdp_main_params_dtype", "fp32"); v != "fp32")
    throw Error(w + ": --megatron-fsdp-main-params-dtype " + v + ": not priced (valid: fp32, the default)");
  if (const std::string v = get(args, "megatron_fsdp_grad_comm_dtype", "auto");
      v != "auto" && v != get(args, "megatron_fsdp_main_grads_dtype", "auto"))
    throw Error(w + ": --megatron-fsdp-grad-comm-dtype " + v +
                ": not priced (valid: auto or the gradients' own format, --megatron-fsdp-main-grads-dtype's)");
  // The outer data-parallel group's strategy is read only under hybrid sharding, which is not priced.
  read_to_ignored(out, "--outer-dp-sharding-strategy", "Megatron-FSDP's outer group, read under hybrid sharding only");
}

}  // namespace

bool read_to_ignored(MegatronCommand& out, std::string_view entry, std::string_view why) {
  const auto is_entry = [entry](const std::string& r) {
    return r == entry || (r.starts_with(entry) && r.size() > entry.size() && r[entry.size()] == ' ');
  };
  if (std::erase_if(out.read, is_entry) == 0) return false;
  out.ignored.push_back(std::string(entry) + " (" + std::string(why) + ")");
  return true;
}

std::int64_t launcher_world(const std::vector<std::string>& launcher, std::int64_t gpus, std::string_view where) {
  const std::string w(where);
  // torchrun's world: --nproc-per-node × --nnodes (torch/distributed/run.py; both spellings); DeepSpeed's launcher's:
  // --num_gpus (or --num_accelerators) × --num_nodes (deepspeed/launcher/runner.py).
  std::int64_t per_node = 0, nodes = 1;
  for (auto t = launcher.begin(); t != launcher.end(); ++t) {
    const auto value = [&](std::string_view flag) -> std::optional<std::string> {
      if (*t == flag) {
        if (t + 1 == launcher.end()) throw Error(w + ": " + std::string(flag) + " has no value");
        return *(t + 1);
      }
      if (t->rfind(std::string(flag) + "=", 0) == 0) return t->substr(flag.size() + 1);
      return std::nullopt;
    };
    for (const char* f : {"--nproc_per_node", "--nproc-per-node", "--num_gpus", "--num_accelerators"})
      if (const auto v = value(f)) per_node = positive(*v, f, where);
    for (const char* f : {"--nnodes", "--num_nodes"})
      if (const auto v = value(f)) nodes = positive(*v, f, where);
  }
  if (per_node > 0) {
    if (gpus > 0 && gpus != per_node * nodes)
      throw Error(w + ": --gpus " + std::to_string(gpus) + " but the launcher starts " +
                  std::to_string(per_node * nodes) + " processes (--nproc-per-node x --nnodes)");
    gpus = per_node * nodes;
  }
  if (gpus <= 0)
    throw Error(w +
                ": the world size is unknown: launch with torchrun --nproc-per-node N [--nnodes M], or give --gpus");
  return gpus;
}

MegatronCommand parse_megatron_command(const std::vector<std::string>& tokens, std::int64_t gpus,
                                       std::string_view where) {
  const std::string w(where);
  const auto script = std::find_if(tokens.begin(), tokens.end(), [](const std::string& t) {
    return t.size() > 3 && t.compare(t.size() - 3, 3, ".py") == 0;
  });
  if (script == tokens.end())
    throw Error(w + ": no training script (pretrain_gpt.py) in the command: give the line that launches it");
  const std::string name = script->substr(script->find_last_of('/') + 1);
  if (name != "pretrain_gpt.py")
    throw Error(w + ": " + name + " is not Megatron-LM's pretrain_gpt.py (the one training script check reads)");
  MegatronCommand out;
  // DeepSpeed's launcher, or Megatron-DeepSpeed's --deepspeed under another launcher.
  out.deepspeed = std::find(script + 1, tokens.end(), "--deepspeed") != tokens.end() ||
                  std::any_of(tokens.begin(), script, [](const std::string& t) {
                    return t == "deepspeed" || (t.size() > 10 && t.ends_with("/deepspeed"));
                  });
  std::map<std::string, std::string> args;
  for (auto t = script + 1; t != tokens.end(); ++t) {
    std::string flag = *t, inline_value;
    if (flag.rfind("--", 0) != 0) throw Error(w + ": '" + flag + "' follows no flag");
    const auto eq = flag.find('=');
    const bool has_inline = eq != std::string::npos;
    if (has_inline) inline_value = flag.substr(eq + 1), flag.resize(eq);
    const std::optional<Flag> known = flag_of(flag, out.deepspeed, where);
    if (!known)
      throw Error(w + ": " + flag + ": a " + (out.deepspeed ? "Megatron-DeepSpeed" : "Megatron-LM") +
                  " flag headroom does not read, so it cannot tell whether it changes memory or time "
                  "(check --ignore " +
                  flag + " prices the job without it)");
    const Arity arity = known->arity;
    const std::string dest(known->dest);
    std::string value;
    if (arity == Arity::store_true || arity == Arity::store_false) {
      if (has_inline) throw Error(w + ": " + flag + " takes no value");
      value = arity == Arity::store_true ? "True" : "False";
    } else if (has_inline) {
      value = inline_value;
    } else {
      if (t + 1 == tokens.end() || (t + 1)->rfind("--", 0) == 0) throw Error(w + ": " + flag + " has no value");
      value = *++t;
      while (arity == Arity::values && t + 1 != tokens.end() && (t + 1)->rfind("--", 0) != 0) value += " " + *++t;
    }
    // Given again (a script that appends to its arguments): the same value is the same job; another is refused,
    // where argparse would silently take the last.
    if (const auto again = args.find(dest); again != args.end() && arity != Arity::values) {
      if (again->second == value) continue;
      throw Error(w + ": " + flag + " is given twice, as " + again->second + " and " + value +
                  " (Megatron-LM's parser takes the last): give it once");
    }
    args[dest] = value;
    if (!known->ignored_because.empty())
      out.ignored.push_back(flag + " (" + std::string(known->ignored_because) + ")");
    else
      out.read.push_back(flag + (arity == Arity::store_true || arity == Arity::store_false ? "" : " " + value));
  }
  // What arguments.py would print for the rest: its defaults, and what it derives.
  gpus = launcher_world({tokens.begin(), script}, gpus, where);
  args["world_size"] = std::to_string(gpus);
  for (const char* key : {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"})
    if (!args.contains(key)) args[key] = "1";
  args.try_emplace("micro_batch_size", "1");  // arguments.py's default
  const std::int64_t t = positive(args["tensor_model_parallel_size"], "--tensor-model-parallel-size", where);
  const std::int64_t model_gpus =
      t * positive(args["pipeline_model_parallel_size"], "--pipeline-model-parallel-size", where) *
      positive(args["context_parallel_size"], "--context-parallel-size", where);
  if (gpus % model_gpus != 0)
    throw Error(w + ": " + std::to_string(gpus) +
                " GPUs are not a multiple of tp x pp x cp = " + std::to_string(model_gpus));
  // arguments.py: the global batch defaults to micro-batch x data-parallel size.
  if (!args.contains("global_batch_size"))
    args["global_batch_size"] =
        std::to_string(positive(args["micro_batch_size"], "--micro-batch-size", where) * (gpus / model_gpus));
  if (!args.contains("seq_length")) throw Error(w + ": no --seq-length: the sequence length is required");
  // arguments.py: ffn_hidden_size defaults to 4h, or int(4h·2/3 / 64)·64 = ⌊h/24⌋·64 with --swiglu.
  if (!args.contains("ffn_hidden_size") && args.contains("hidden_size")) {
    const std::int64_t h = positive(args["hidden_size"], "--hidden-size", where);
    args["ffn_hidden_size"] = std::to_string(args.contains("swiglu") ? h / 24 * 64 : 4 * h);
  }
  if (args.contains("use_rotary_position_embeddings")) args["position_embedding_type"] = "rope";
  // GPT-2's BPE tokenizer, pretrain_gpt.py's default (args_defaults={'tokenizer_type': 'GPT2BPETokenizer'}), built
  // from --vocab-file: the one tokenizer whose size the command itself fixes.
  if (get(args, "tokenizer_type", "GPT2BPETokenizer") == "GPT2BPETokenizer" && args.contains("vocab_file") &&
      args.try_emplace("vocab_size", std::to_string(kGpt2BpeVocabulary)).second)
    out.notes.emplace_back("GPT2BPETokenizer: GPT-2's BPE vocabulary, " + std::to_string(kGpt2BpeVocabulary) +
                           " tokens");
  // A Hugging Face tokenizer named by its repository, loaded as it is (no vocabulary or merges file of the run's).
  if (get(args, "tokenizer_type", "") == "HuggingFaceTokenizer" && !args.contains("vocab_file") &&
      !args.contains("merge_file"))
    if (const auto size = hugging_face_vocabulary(get(args, "tokenizer_model", ""));
        size && args.try_emplace("vocab_size", std::to_string(*size)).second)
      out.notes.emplace_back("HuggingFaceTokenizer " + args["tokenizer_model"] + ": " + std::to_string(*size) +
                             " tokens");
  // A SentencePiece model or a local Hugging Face tokenizer, read where the command runs when the file is there
  // (megatron/core/tokenizers/utils/build_tokenizer.py: SP_TOKENIZERS and HuggingFaceTokenizer load --tokenizer-model).
  if (const std::string type = get(args, "tokenizer_type", "");
      args.contains("tokenizer_model") && !args.contains("vocab_size") && !args.contains("vocab_file") &&
      !args.contains("merge_file")) {
    const bool sentencepiece =
        type == "SentencePieceTokenizer" || type == "GPTSentencePieceTokenizer" || type == "Llama2Tokenizer";
    if (sentencepiece || type == "HuggingFaceTokenizer")
      if (const auto size =
              tokenizer_file_vocabulary(args["tokenizer_model"], sentencepiece ? TokenizerLibrary::sentencepiece
                                                                               : TokenizerLibrary::huggingface)) {
        args["vocab_size"] = std::to_string(*size);
        out.notes.emplace_back(type + " " + args["tokenizer_model"] + ": " + std::to_string(*size) +
                               " tokens, read from the file");
      }
  }
  // The padded vocabulary (padded_vocab_size), make_vocab_size_divisible_by 128 by default.
  if (args.contains("vocab_size")) {
    const std::int64_t v = positive(args["vocab_size"], "--vocab-size", where);
    const std::int64_t divisible_by =
        positive(get(args, "make_vocab_size_divisible_by", "128"), "--make-vocab-size-divisible-by", where);
    args["padded_vocab_size"] = std::to_string(padded_vocab_size(v, divisible_by, t));
  }
  if (!args.contains("attention_dropout")) args["attention_dropout"] = "0.1";  // arguments.py's default
  if (out.deepspeed) {
    if (!args.contains("deepspeed_config"))
      throw Error(w + ": no --deepspeed_config: the ZeRO stage and the batch are in the DeepSpeed config");
    out.deepspeed_config = args["deepspeed_config"];
    out.zero_stage = get(args, "zero_stage", "");
    out.pipeline_engine = !args.contains("no_pipeline_parallel");
    args["deepspeed"] = "True";  // under torchrun with --deepspeed, or the deepspeed launcher
  }
  const std::string hidden_dropout = get(args, "hidden_dropout", "0.1");
  char* end = nullptr;
  const double p = std::strtod(hidden_dropout.c_str(), &end);
  if (end == hidden_dropout.c_str() || *end != '\0' || !(p >= 0.0 && p < 1.0))
    throw Error(w + ": --hidden-dropout '" + hidden_dropout + "' is not a probability in [0, 1)");
  if (p > 0)
    out.notes.push_back("hidden dropout " + hidden_dropout +
                        (args.contains("hidden_dropout") ? "" : " (Megatron-LM's default)") +
                        ": its masks priced, one byte a hidden element twice a layer and once at the embeddings");
  args.try_emplace("hidden_dropout", hidden_dropout);  // arguments.py's default, which the model reads
  // arguments.py validate_args: --recompute-activations sets --recompute-granularity selective.
  if (args.erase("recompute_activations") > 0) args["recompute_granularity"] = "selective";
  if (args.contains("recompute_method")) {
    const std::string method = args["recompute_method"];
    if (get(args, "recompute_granularity", "") != "full")
      throw Error(w + ": --recompute-method " + method + " needs --recompute-granularity full");
    if (method != "uniform" && method != "block")
      throw Error(w + ": --recompute-method " + method + " is not Megatron-LM's (valid: uniform, block)");
    // transformer_config.py requires --recompute-num-layers with full recompute; 1 where a script leaves it out.
    args.try_emplace("recompute_num_layers", "1");
    (void)positive(args["recompute_num_layers"], "--recompute-num-layers", where);
  }
  // transformer_layer.py reads --recompute-modules under selective recompute only (megatron_log.cpp does not read it
  // otherwise).
  if (args.contains("recompute_modules") && get(args, "recompute_granularity", "") != "selective")
    read_to_ignored(out, "--recompute-modules", "Megatron-LM reads it under --recompute-granularity selective only");
  // Megatron-LM's attention backends: auto, flash and fused (cuDNN) run fused kernels, as priced; unfused and local
  // materialise the s x s scores, which only --no-flash-attn prices (not a Megatron-LM flag).
  // Transformer Engine's layers (the default) are what the coefficients were fitted on; Megatron-LM's local ones
  // differ.
  if (const std::string impl = get(args, "transformer_impl", "transformer_engine"); impl != "transformer_engine")
    throw Error(w + ": --transformer-impl " + impl + ": only Transformer Engine's layers (the default) are priced");
  if (const std::string b = get(args, "attention_backend", "auto"); b != "auto" && b != "flash" && b != "fused")
    throw Error(w + ": --attention-backend " + b + ": only the fused kernels (auto, flash, fused) are priced");
  // transformer_config.py moe_flex_dispatcher_backend, the flex dispatcher's kernels: DeepEP and HybridEP send a token
  // once to each remote node holding one of its experts, as the flex dispatcher is priced; NCCL-EP's traffic is not
  // known to headroom. Another dispatcher does not use it.
  if (const std::string b = get(args, "moe_flex_dispatcher_backend", "deepep");
      get(args, "moe_token_dispatcher_type", "") == "flex" && b != "deepep" && b != "hybridep")
    throw Error(w + ": --moe-flex-dispatcher-backend " + b + ": not priced (valid: deepep, hybridep)");
  // arguments.py asserts that --fp16 and --bf16 are not both given; with neither the weights are FP32.
  if (args.contains("bf16") == args.contains("fp16"))
    throw Error(w + (args.contains("bf16") ? ": --bf16 and --fp16 together (Megatron-LM takes one)"
                                           : ": neither --bf16 nor --fp16: FP32 training is not priced"));
  if (args.contains("use_megatron_fsdp")) {
    megatron_fsdp_arguments(args, out, where);
  } else {
    // Megatron-FSDP's flags without it: arguments.py keeps them, nothing reads them.
    for (const char* flag :
         {"--data-parallel-sharding-strategy", "--megatron-fsdp-version", "--megatron-fsdp-main-params-dtype",
          "--megatron-fsdp-grad-comm-dtype", "--megatron-fsdp-main-grads-dtype", "--outer-dp-sharding-strategy",
          "--fsdp-double-buffer", "--suggested-communication-unit-size"})
      read_to_ignored(out, flag, "Megatron-FSDP's, which the command does not run: --use-megatron-fsdp");
    read_to_ignored(out, "--use-nccl-ub",
                    "NCCL's user buffers for the data-parallel collectives: priced at NCCL's default kernels");
  }
  out.run = megatron_run_from_arguments(args, {}, where);
  ModelSpec window;
  megatron_window(args, window, where);
  out.sliding_window = window.sliding_window;
  out.window_skip_freq = window.window_skip_freq;
  if (out.deepspeed) megatron_deepspeed_arguments(args, where);  // in Megatron-LM's dests, as the run was read
  out.arguments = std::move(args);
  return out;
}

}  // namespace headroom::calibrate
