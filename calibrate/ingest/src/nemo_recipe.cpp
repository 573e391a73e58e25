// A NeMo 2.0 pre-training recipe (NVIDIA/NeMo nemo/collections/llm/recipes/<model>.py, the factories
// `nemo llm pretrain --factory <model>` runs) read without running it: pretrain_recipe(<NeMo-Run's arguments>) is
// evaluated (python_eval.hpp), following the functions it calls in its own file and in the recipes next to it (the
// Qwen, Nemotron and long-context recipes call qwen3_trainer, nemotron_model, llama3_8b.pretrain_recipe), and the
// run.Partial it returns is read: the run.Config of nl.Trainer with its nl.MegatronStrategy and
// DistributedDataParallelConfig, the data module, the optimizer and the model's config class with the fields set on
// it. A statement or condition the evaluation does not follow is refused naming its file and line.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "megatron_args.hpp"
#include "python_eval.hpp"
#include "python_source.hpp"
#include "text.hpp"

namespace headroom::calibrate {
namespace {

using python::Expr;
using python::Function;

// The note of a call statement the evaluator passed over (python_eval.hpp passed_over).
std::string passed_over_note(const std::string& call) {
  return "passed over " + call + ": a call given nothing of the recipe's, which cannot change its configs";
}

// NeMo 2.0's model configs and the shipped model of their shape. Llama (nemo/collections/llm/gpt/model/llama.py): 3
// and 3.1 differ only in RoPE's scaling and the context the class names, neither priced (the data's sequence is).
struct RecipeModel {
  std::string_view config, model;
  bool experts = false;     // a mixture of experts (whose experts a tensor-parallel size of their own may split)
  bool vocabulary = false;  // the class sets vocab_size; else the data's tokenizer does (gpt/model/base.py)
  const char* attention_dropout = nullptr;  // where the class's differs from the shipped model's
  bool untied = false;     // the class unties the output layer the shipped model (its Hugging Face config) ties
  bool no_window = false;  // the class sets no window_size where the shipped model attends within a window
  // Settings the class (or Bridge's provider) sets by default that headroom prices: the shared expert overlapped with
  // the token dispatch, multi-token-prediction layers; the recipe's own settings win.
  bool shared_expert_overlap = false;
  std::int64_t mtp_layers = 0;
};
constexpr auto kRecipeModels = std::to_array<RecipeModel>({
    {"Llama2Config7B", "llama2-7b"},
    {"Llama2Config13B", "llama2-13b"},
    {"Llama2Config70B", "llama2-70b"},
    {"Llama3Config8B", "llama3.1-8b"},
    {"Llama3Config70B", "llama3.1-70b"},
    {"Llama31Config8B", "llama3.1-8b"},
    {"Llama31Config70B", "llama3.1-70b"},
    {"Llama31Config405B", "llama3.1-405b"},
    {"Llama32Config1B", "llama3.2-1b"},  // Llama 3.2: embeddings tied, RoPE scaled by 32
    {"Llama32Config3B", "llama3.2-3b"},
    // llama_nemotron.py: Llama 3.1 8B and 70B's shapes (kv_channels 128, their own head size).
    {"Llama31NemotronNano8BConfig", "llama3.1-8b"},
    {"Llama31Nemotron70BConfig", "llama3.1-70b"},
    // mixtral.py: Mixtral's shapes, 8 experts top-2, dropless all-to-all.
    {"MixtralConfig8x7B", "mixtral-8x7b", true},
    {"MixtralConfig8x22B", "mixtral-8x22b", true},
    // qwen3.py: Qwen3Config (q/k norms, no biases, untied 151,936) and Qwen3MoEConfig (128 experts, top 8); the
    // smaller ones tie their embeddings.
    {"Qwen3Config600M", "qwen3-0.6b", false, true},
    {"Qwen3Config1P7B", "qwen3-1.7b", false, true},
    {"Qwen3Config4B", "qwen3-4b", false, true},
    {"Qwen3Config8B", "qwen3-8b", false, true},
    {"Qwen3Config14B", "qwen3-14b", false, true},
    {"Qwen3Config32B", "qwen3-32b", false, true},
    {"Qwen3Config30B_A3B", "qwen3-30b-a3b", true, true},
    {"Qwen3Config235B_A22B", "qwen3-235b-a22b", true, true},
    // qwen2.py: Qwen 2 and 2.5 7B and 72B are one shape each (q/k/v biases, untied 152,064); only the context differs.
    // Qwen 2 and 2.5 0.5B and 1.5B: the Hugging Face models tie their embeddings, NeMo's classes do not.
    {.config = "Qwen2Config500M", .model = "qwen2.5-0.5b", .vocabulary = true, .untied = true},
    {.config = "Qwen25Config500M", .model = "qwen2.5-0.5b", .vocabulary = true, .untied = true},
    {.config = "Qwen2Config1P5B", .model = "qwen2.5-1.5b", .vocabulary = true, .untied = true},
    {.config = "Qwen25Config1P5B", .model = "qwen2.5-1.5b", .vocabulary = true, .untied = true},
    {"Qwen2Config7B", "qwen2.5-7b", false, true},
    {"Qwen25Config7B", "qwen2.5-7b", false, true},
    {"Qwen25Config14B", "qwen2.5-14b", false, true},
    {"Qwen25Config32B", "qwen2.5-32b", false, true},
    {"Qwen2Config72B", "qwen2.5-72b", false, true},
    {"Qwen25Config72B", "qwen2.5-72b", false, true},
    // gemma2.py: GeGLU, sandwich norms, a 4,096-token window every other layer, soft-capped logits, tied 256,000.
    {"Gemma2Config2B", "gemma-2-2b", false, true},
    {"Gemma2Config9B", "gemma-2-9b", false, true},
    {"Gemma2Config27B", "gemma-2-27b", false, true},
    // gemma.py: Gemma 1 (GeGLU, heads of 256, tied 256,000; the 2B one has a single KV head).
    {"GemmaConfig2B", "gemma-2b"},
    {"GemmaConfig7B", "gemma-7b"},
    {"CodeGemmaConfig2B", "gemma-2b"},
    {"CodeGemmaConfig7B", "gemma-7b"},
    // mistral.py: MistralConfig7B is Mistral 7B v0.1 (a 4,096-token window on every layer); Mistral NeMo 12B has none.
    {"MistralConfig7B", "mistral-7b-v0.1"},
    {"MistralNeMoConfig12B", "mistral-nemo-12b"},
    // phi3mini.py, baichuan.py, chatglm.py: Llama-shaped (ChatGLM: q/k/v biases, RoPE on half of each head).
    {"Phi3ConfigMini", "phi-3-mini", false, true},
    {"Baichuan2Config7B", "baichuan2-7b"},
    {"ChatGLM3Config6B", "chatglm3-6b"},
    // starcoder2.py: GELU MLP with biases, LayerNorm; the classes set no window and untie the output layer.
    {.config = "Starcoder2Config3B", .model = "starcoder2-3b", .untied = true, .no_window = true},
    {.config = "Starcoder2Config7B", .model = "starcoder2-7b", .untied = true, .no_window = true},
    {.config = "Starcoder2Config15B", .model = "starcoder2-15b", .no_window = true},
    // nemotron.py: squared-ReLU MLP, LayerNorm with zero-centred gamma, RoPE on half of each head.
    {"Nemotron3Config4B", "nemotron-3-4b"},
    {"Nemotron3Config8B", "nemotron-3-8b"},
    {"Nemotron3Config22B", "nemotron-3-22b"},
    {"Nemotron4Config15B", "nemotron-4-15b"},
    {"Nemotron4Config340B", "nemotron-4-340b"},
    // gpt/model/base.py GPTConfig175B: GPT-3 175B's shape (learned positions, tied embeddings, GELU, biases) with no
    // dropout, where gpt3-175b is Megatron-LM's (attention dropout 0.1).
    {"GPTConfig175B", "gpt3-175b", false, false, "0"},
    // deepseek.py: DeepSeekConfig's MLA and MoE (moe_shared_expert_overlap True, no MTP unless the recipe sets it; the
    // vocabulary is the tokenizer's), the V2, V2-Lite and V3 shapes.
    {.config = "DeepSeekV2Config", .model = "deepseek-v2", .experts = true, .shared_expert_overlap = true},
    {.config = "DeepSeekV2LiteConfig", .model = "deepseek-v2-lite", .experts = true, .shared_expert_overlap = true},
    {.config = "DeepSeekV3Config", .model = "deepseek-v3", .experts = true, .shared_expert_overlap = true},
    // Megatron-Bridge: AutoBridge.from_hf_pretrained(<id>).get_model_config(), the Hugging Face config's shape and
    // vocabulary (megatron/bridge/models/conversion/auto_bridge.py). Llama 3 is 3.1's shape.
    {"meta-llama/Llama-2-7b-hf", "llama2-7b", false, true},
    {"meta-llama/Meta-Llama-3-8B", "llama3.1-8b", false, true},
    {"meta-llama/Meta-Llama-3-70B", "llama3.1-70b", false, true},
    {"meta-llama/Meta-Llama-3.1-8B", "llama3.1-8b", false, true},
    {"meta-llama/Meta-Llama-3.1-70B", "llama3.1-70b", false, true},
    {"meta-llama/Meta-Llama-3.1-405B", "llama3.1-405b", false, true},
    {"meta-llama/Llama-3.2-1B", "llama3.2-1b", false, true},
    {"meta-llama/Llama-3.2-3B", "llama3.2-3b", false, true},
    {"Qwen/Qwen3-0.6B", "qwen3-0.6b", false, true},
    {"Qwen/Qwen3-1.7B", "qwen3-1.7b", false, true},
    {"Qwen/Qwen3-4B", "qwen3-4b", false, true},
    {"Qwen/Qwen3-8B", "qwen3-8b", false, true},
    {"Qwen/Qwen3-14B", "qwen3-14b", false, true},
    {"Qwen/Qwen3-32B", "qwen3-32b", false, true},
    {"Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b", true, true},
    {"Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b", true, true},
    // Qwen 2 and 2.5 of one size are one shape (the 0.5B and 1.5B tie their embeddings, as their configs say).
    {"Qwen/Qwen2-0.5B", "qwen2.5-0.5b", false, true},
    {"Qwen/Qwen2-1.5B", "qwen2.5-1.5b", false, true},
    {"Qwen/Qwen2-7B", "qwen2.5-7b", false, true},
    {"Qwen/Qwen2-72B", "qwen2.5-72b", false, true},
    {"Qwen/Qwen2.5-0.5B", "qwen2.5-0.5b", false, true},
    {"Qwen/Qwen2.5-1.5B", "qwen2.5-1.5b", false, true},
    {"Qwen/Qwen2.5-7B", "qwen2.5-7b", false, true},
    {"Qwen/Qwen2.5-14B", "qwen2.5-14b", false, true},
    {"Qwen/Qwen2.5-32B", "qwen2.5-32b", false, true},
    {"Qwen/Qwen2.5-72B", "qwen2.5-72b", false, true},
    {"google/gemma-2-2b", "gemma-2-2b", false, true},
    {"google/gemma-2-9b", "gemma-2-9b", false, true},
    {"google/gemma-2-27b", "gemma-2-27b", false, true},
    // megatron/bridge/models/deepseek/deepseek_v2_bridge.py, deepseek_v3_bridge.py: the providers overlap the shared
    // expert (moe_shared_expert_overlap True); V3's trains the config's num_nextn_predict_layers MTP layers (1).
    {.config = "deepseek-ai/DeepSeek-V2",
     .model = "deepseek-v2",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true},
    {.config = "deepseek-ai/DeepSeek-V2-Lite",
     .model = "deepseek-v2-lite",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true},
    {.config = "deepseek-ai/DeepSeek-V3",
     .model = "deepseek-v3",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true,
     .mtp_layers = 1},
    {.config = "deepseek-ai/DeepSeek-V3-Base",
     .model = "deepseek-v3",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true,
     .mtp_layers = 1},
    // megatron/bridge/models/glm/glm45_bridge.py: the provider overlaps the shared expert and trains the config's
    // num_nextn_predict_layers MTP layers (1).
    {.config = "zai-org/GLM-4.5",
     .model = "glm-4.5",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true,
     .mtp_layers = 1},
    {.config = "zai-org/GLM-4.5-Air",
     .model = "glm-4.5-air",
     .experts = true,
     .vocabulary = true,
     .shared_expert_overlap = true,
     .mtp_layers = 1},
    // megatron/bridge/models/gpt_oss/gpt_oss_bridge.py: biases on every linear layer (add_bias_linear), the learnable
    // softmax offset (the sinks), a (sliding_window − 1, 0) window on every other layer, no shared expert.
    {.config = "openai/gpt-oss-20b", .model = "gpt-oss-20b", .experts = true, .vocabulary = true},
    {.config = "openai/gpt-oss-120b", .model = "gpt-oss-120b", .experts = true, .vocabulary = true},
});

// The largest count a recipe's setting may give (nodes, devices, parallel sizes, batches, tokens): 10^9, so that
// products of two stay exact.
constexpr std::int64_t kMaxRecipeInteger = 1'000'000'000;

// What each setting of the recipe is: the layout knob it gives (knobs.hpp), or why it is ignored. A setting not here
// is refused naming it. Paths as NeMo-Run's overrides write them (`trainer.strategy.tensor_model_parallel_size=4`).
struct RecipeKey {
  std::string_view key, knob, why;
};
constexpr auto kRecipeKeys = std::to_array<RecipeKey>({
    {"trainer.strategy.tensor_model_parallel_size", "tp", ""},
    {"trainer.strategy.pipeline_model_parallel_size", "pp", ""},
    {"trainer.strategy.virtual_pipeline_model_parallel_size", "vpp", ""},
    {"trainer.strategy.context_parallel_size", "cp", ""},
    {"trainer.strategy.expert_model_parallel_size", "ep", ""},
    {"trainer.strategy.expert_tensor_parallel_size", "etp", ""},
    {"trainer.strategy.sequence_parallel", "sequence_parallel", ""},
    {"trainer.strategy.account_for_embedding_in_pipeline_split", "account_for_embedding_in_pipeline_split", ""},
    {"trainer.strategy.account_for_loss_in_pipeline_split", "account_for_loss_in_pipeline_split", ""},
    // MegatronStrategy's (and TransformerConfig's) names of Megatron-LM's --decoder-first/last-pipeline-num-layers.
    {"trainer.strategy.num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers", ""},
    {"trainer.strategy.num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers", ""},
    {"trainer.strategy.ddp.grad_reduce_in_fp32", "grad_reduce_in_bf16", ""},
    {"trainer.num_nodes", "", ""},  // the world, with trainer.devices
    {"trainer.devices", "", ""},
    {"data.seq_length", "seq", ""},
    {"data.global_batch_size", "gbs", ""},
    {"data.micro_batch_size", "mbs", ""},
    {"trainer.strategy.pipeline_dtype", "", "the dtype of the pipeline's sends, the activations' own"},
    {"trainer.strategy.gradient_as_bucket_view", "", "gradients viewed in the DDP buckets: no copy, as priced"},
    {"trainer.strategy.ckpt_*", "", "checkpointing"},
    {"trainer.strategy.save_ckpt_format", "", "checkpointing"},
    {"trainer.strategy.fsdp", "", ""},  // None: Megatron's DDP and distributed optimizer (checked below)
    {"trainer.strategy.ddp.overlap_grad_reduce", "", ""},
    {"trainer.strategy.ddp.overlap_param_gather", "", ""},
    {"trainer.strategy.ddp.check_for_nan_in_grad", "", "a check of the reduced gradients"},
    {"trainer.strategy.ddp.check_for_large_grads", "", "a check of the reduced gradients"},
    {"trainer.strategy.ddp.average_in_collective", "", "where the gradients are averaged, not how much moves"},
    // Megatron-FSDP (megatron/core/distributed/distributed_data_parallel_config.py; Megatron-Bridge's performance
    // scripts set it with utils/overrides.py _set_megatron_fsdp_overrides), read under use_megatron_fsdp only.
    {"trainer.strategy.ddp.data_parallel_sharding_strategy", "", ""},
    {"trainer.strategy.ddp.fsdp_double_buffer", "", ""},
    {"trainer.strategy.ddp.nccl_ub", "", ""},
    {"trainer.strategy.ddp.suggested_communication_unit_size", "", ""},
    {"trainer.strategy.ddp.keep_fp8_transpose_cache", "", ""},
    {"trainer.strategy.ddp.fsdp_manual_registration", "", "NCCL's registration of Megatron-FSDP's buffers, once"},
    {"model.config.init_model_with_meta_device", "", "initialisation"},
    {"trainer.accelerator", "", "GPUs"},
    {"trainer.accumulate_grad_batches", "", ""},  // 1: Megatron-core accumulates the global batch (checked below)
    {"trainer.callbacks", "", ""},                // each callback by its class (kRecipeCallbacks)
    {"trainer.limit_*", "", "evaluation"},
    {"trainer.log_every_n_steps", "", "logging"},
    {"trainer.max_steps", "", "the run's length"},
    {"trainer.enable_checkpointing", "", "checkpointing"},
    {"trainer.logger", "", "logging"},
    {"trainer.num_sanity_val_steps", "", "evaluation"},
    {"trainer.val_check_interval", "", "evaluation"},
    {"trainer.use_distributed_sampler", "", "data loading"},
    {"trainer.plugins", "", ""},  // bf16_mixed() (checked below)
    {"optim", "", ""},            // distributed_fused_adam_with_cosine_annealing (checked below)
    {"model.config", "", ""},     // the model (kRecipeModels)
    {"model.config.seq_length", "", "the model config's context; the data's sequence is the one trained"},
    {"model.config.max_position_embeddings", "",
     "the length of RoPE's table, no parameters (every model read uses RoPE)"},
    // Fields Megatron-Bridge's recipes set on the model provider (Megatron-core's TransformerConfig), checked below.
    {"model.config.transformer_impl", "", ""},
    {"model.config.cuda_graph_impl", "", ""},
    {"model.config.cuda_graph_scope", "", "CUDA graphs' scope (cuda_graph_impl is read: none)"},
    {"model.config.cuda_graph_warmup_steps", "", "CUDA graphs' warm-up (cuda_graph_impl is read: none)"},
    {"model.config.attention_backend", "", ""},
    {"model.config.cross_entropy_loss_fusion", "",
     "the fused loss keeps fewer FP32 logit copies: priced as the unfused loss, so the peak may be lower"},
    {"model.config.cross_entropy_fusion_impl", "", "which fused loss kernel"},
    // TransformerConfig's elementwise fusions (megatron/core/transformer/transformer_config.py): the same FLOPs in
    // one kernel or several. Megatron-LM fuses by default (--no-bias-swiglu-fusion, --no-rope-fusion turn it off),
    // as the coefficients were fitted; an unfused one makes a few more elementwise passes, not priced.
    {"model.config.bias_activation_fusion", "", kWhyFused},
    {"model.config.bias_dropout_fusion", "", kWhyFused},
    {"model.config.apply_rope_fusion", "", kWhyFused},
    {"model.config.gradient_accumulation_fusion", "", kWhyFused},
    {"model.config.masked_softmax_fusion", "",
     "the unfused attention path's softmax: fused attention computes its own"},
    // megatron/core/model_parallel_config.py: batch_isend_irecv or separate calls, the same bytes either way.
    {"model.config.batch_p2p_comm", "", "the pipeline's sends batched into one call or not: the same bytes"},
    // megatron/core/transformer/transformer_config.py: the kernels of the flex dispatcher (moe_token_dispatcher_type,
    // which is read); DeepEP and HybridEP both send a token once to each remote node holding one of its experts.
    {"model.config.moe_flex_dispatcher_backend", "",
     "the flex dispatcher's kernels, DeepEP or HybridEP: a token sent once to each remote node either way, as priced"},
    // The MoE settings Megatron-LM's command reader ignores too (megatron_command.cpp), for the same reasons.
    {"model.config.moe_grouped_gemm", "", kWhyGroupedGemm},
    {"model.config.moe_permute_fusion", "", kWhyPermuteFusion},
    {"model.config.moe_router_load_balancing_type", "", kWhyBalancingLoss},
    {"model.config.moe_aux_loss_coeff", "", kWhyAuxLossWeight},
    {"model.config.moe_z_loss_coeff", "", kWhyZLossWeight},
    {"model.config.moe_router_dtype", "", kWhyRouterDtype},
    {"model.config.moe_router_fusion", "", "the router's top-k and scores in one kernel or not: the same work"},
    {"model.config.mtp_loss_scaling_factor", "", "the multi-token-prediction loss's weight"},
    {"model.config.moe_router_padding_for_fp8", "",
     "each expert's tokens padded to FP8's alignment or not: at most 15 tokens an expert"},
    {"model.config.moe_hybridep_num_sms", "",
     "the SMs HybridEP's kernels take: the dispatch is priced at the links' speed and exposed, as without overlap"},
    {"model.config.moe_deepep_num_sms", "",
     "the SMs DeepEP's kernels take: the dispatch is priced at the links' speed and exposed, as without overlap"},
    {"model.config.moe_flex_dispatcher_num_sms", "",
     "the SMs the flex dispatcher's kernels take: the dispatch is priced at the links' speed and exposed"},
    {"model.config.moe_router_force_load_balancing", "",
     "uniform routing or the learned router's: dropless experts are priced at the mean load either way"},
    {"model.config.recompute_modules", "recompute_modules", ""},
    {"model.config.fine_grained_activation_offloading", "", ""},
    {"model.config.offload_modules", "", ""},
    {"model.config.pipeline_model_parallel_layout", "pipeline_model_parallel_layout", ""},
    // Megatron-Bridge's scripts/training/recipe_runner.py calls it only where an override changes pp or vp
    // (read_bridge_recipe refuses that).
    {"model.config._pipeline_model_parallel_layout_builder", "",
     "the recipe's layout builder, which run_recipe.py calls only where an override changes pp or vp"},
    {"model.config.load_weights", "", "whether to_megatron_provider() loads the checkpoint's weights"},
    // megatron/bridge/models/gpt_provider.py provide(): the vocabulary padded to a multiple of
    // make_vocab_size_divisible_by x TP (calculate_padded_vocab_size) where should_pad_vocab, as Megatron-LM does.
    {"model.config.should_pad_vocab", "", ""},
    {"model.config.make_vocab_size_divisible_by", "", ""},
    // megatron/core/transformer/transformer_config.py: which tracker's generator draws dropout's masks; Transformer
    // Engine's operation fuser (its fused grouped tensors serve MXFP8, which is refused).
    {"model.config.use_te_rng_tracker", "", "which random-number tracker draws dropout's masks: the same work"},
    {"model.config.use_transformer_engine_op_fuser", "", kWhyFused},
    // Not a field of Megatron-core's TransformerConfig (an attribute nothing reads): the expert all-to-all's overlap
    // is comm_overlap.overlap_moe_expert_parallel_comm, which is read.
    {"model.config.moe_a2a_overlap", "", "no Megatron-core setting (comm_overlap.overlap_moe_expert_parallel_comm is)"},
    {"model.config.init_method_std", "", "initialisation"},
    {"model.config.rotary_base", "", "the RoPE base: the same rotations, other frequencies"},
    {"model.config.yarn_*", "", "YaRN's RoPE scaling: the same rotations, other frequencies"},
    {"model.config.rotary_scaling_factor", "", "RoPE's frequency scaling: the same rotations, other frequencies"},
    {"model.config.calculate_per_token_loss", "", "loss normalisation"},
    {"trainer.strategy.ddp.use_distributed_optimizer", "", "the optimizer's use_distributed_optimizer, which is read"},
    {"trainer.strategy.ddp.use_megatron_fsdp", "", ""},
    {"optim.config.optimizer", "", ""},
    {"optim.config.min_lr", "", "the learning rate"},
    {"optim.config.bf16", "", "the optimizer's precision, mixed_precision's (which is read)"},
    {"optim.config.fp16", "", "the optimizer's precision, mixed_precision's (which is read)"},
    // Overrides only: Megatron-core's TransformerConfig recompute fields and the optimizer's sharding.
    {"model.config.recompute_granularity", "recompute", ""},
    {"model.config.recompute_method", "recompute_method", ""},
    {"model.config.recompute_num_layers", "recompute_num_layers", ""},
    {"model.config.moe_shared_expert_overlap", "moe_shared_expert_overlap", ""},
    {"model.config.moe_token_dispatcher_type", "moe_token_dispatcher_type", ""},
    {"model.config.moe_expert_capacity_factor", "moe_expert_capacity_factor", ""},
    {"model.config.mtp_num_layers", "mtp_num_layers", ""},
    {"model.config.cp_comm_type", "cp_comm_type", ""},
    {"optim.config.use_distributed_optimizer", "", ""},
    // Megatron-core's OptimizerConfig as pretrain_performance_optimizations and the MoE recipes set it
    // (megatron/core/optimizer/optimizer_config.py): the precision-aware optimizer and its dtypes.
    {"optim.config.use_precision_aware_optimizer", "use_precision_aware_optimizer", ""},
    {"optim.config.main_grads_dtype", "main_grads_dtype", ""},
    {"optim.config.main_params_dtype", "main_params_dtype", ""},
    {"optim.config.exp_avg_dtype", "exp_avg_dtype", ""},
    {"optim.config.exp_avg_sq_dtype", "exp_avg_sq_dtype", ""},
    {"optim.config.lr", "", "the learning rate"},
    {"optim.config.weight_decay", "", "Adam's hyper-parameters"},
    {"optim.config.adam_*", "", "Adam's hyper-parameters"},
    {"optim.config.clip_grad", "", "gradient clipping: a norm over the gradients, as priced"},
    {"optim.config.apply_wd_to_qk_layernorm", "", "Adam's hyper-parameters"},
    {"optim.config.overlap_param_gather_with_optimizer_step", "", kWhyGatherWithStep},
    // distributed_fused_adam_with_cosine_annealing's arguments (nemo/collections/llm/recipes/optim/adam.py).
    {"optim.warmup_steps", "", "the learning-rate schedule"},
    {"optim.constant_steps", "", "the learning-rate schedule"},
    {"optim.max_lr", "", "the learning-rate schedule"},
    {"optim.min_lr", "", "the learning-rate schedule"},
    {"optim.adam_beta*", "", "Adam's hyper-parameters"},
    {"optim.clip_grad", "", "gradient clipping: a norm over the gradients, as priced"},
    {"optim.lr_scheduler.*", "", "the learning-rate schedule"},
});

// The callbacks a recipe's Trainer may hold, by class: what each changes, or why it changes nothing priced. Any
// other is refused naming it.
struct RecipeCallback {
  std::string_view cls, why;  // why: "" where it is read (MegatronCommOverlapCallback)
};
constexpr auto kRecipeCallbacks = std::to_array<RecipeCallback>({
    {"TimingCallback", "step timing"},
    {"GarbageCollectionCallback", "Python's garbage collection at fixed steps"},
    {"PreemptionCallback", "a checkpoint on preemption"},
    {"ModelCheckpoint", "checkpoints saved between steps, outside the step priced"},
    // nemo/lightning/pytorch/callbacks/megatron_comm_overlap.py: TP overlap (off below TP 2 or without SP), the
    // interleaved schedule's P2P overlap, the DP overlaps.
    {"MegatronCommOverlapCallback", ""},
    // nemo/lightning/pytorch/callbacks/deepep.py: at setup, on a GPU of compute capability 8 or 9, the flex dispatcher
    // with DeepEP and the shared-expert overlap off; check applies it on the cluster's GPU (deepep_callback).
    {"DeepEPCallback", ""},
});

using Settings = std::map<std::string, std::pair<Expr, std::string>>;  // path -> value, where it was set

// An override of a field of a setting read whole (NeMo-Run's `trainer.plugins.grad_reduce_in_fp32=False`,
// run_recipe.py's `mixed_precision.first_last_layers_bf16=False`): the field set on the config that setting holds (a
// call, or a list of one: Lightning's plugins), as Python sets an attribute; `whole` the setting's path. False where
// the key is not under it; an Error where the setting holds no config to set it on.
bool override_field(Settings& settings, std::string_view whole, const std::string& key, Expr value,
                    const std::string& from) {
  if (!key.starts_with(whole) || key.size() <= whole.size() + 1 || key[whole.size()] != '.') return false;
  const std::string name = key.substr(whole.size() + 1);
  const auto it = settings.find(std::string(whole));
  Expr* config = it == settings.end() ? nullptr : &it->second.first;
  if (config != nullptr && config->kind == Expr::Kind::list && config->args.size() == 1) config = config->args.data();
  if (name.find('.') != std::string::npos)
    throw Error(from + ": " + name + " is a field of a field of " + std::string(whole) +
                ", which headroom does not set");
  if (config == nullptr || config->kind != Expr::Kind::call)
    throw Error(from + ": " + std::string(whole) + " is " + (config == nullptr ? "not set" : config->shown()) +
                ", not a config whose field " + name + " an override can set");
  value.key = name;
  const auto at =
      std::find_if(config->kwargs.begin(), config->kwargs.end(), [&](const Expr& kw) { return kw.key == name; });
  if (at != config->kwargs.end())
    *at = std::move(value);
  else
    config->kwargs.push_back(std::move(value));
  return true;
}

namespace {

// The BF16 mixed-precision recipes Megatron-core's FP8 runs by name: NeMo's (nemo/collections/llm/recipes/precision/
// mixed_precision.py) and Megatron-Bridge's (megatron/bridge/training/mixed_precision.py, registered by the same
// names): the fields each sets beyond bf16_mixed's. Delayed scaling's margin and amax history are read_precision_
// field's to ignore. MXFP8, blockwise (sub-channel) FP8 and NVFP4 are not priced.
struct PrecisionRecipe {
  std::string_view name, fp8, fp8_recipe;
  std::int64_t bf16_at_start = 0, bf16_at_end = 0;  // first_last_layers_bf16 where either is above 0
  bool fp8_param_gather = false;
};
constexpr std::array<PrecisionRecipe, 5> kPrecisionRecipes = {{
    {"bf16_mixed", "", "", 0, 0, false},
    {"bf16_with_fp8_mixed", "hybrid", "delayed", 0, 0, true},                  // NeMo's
    {"bf16_with_fp8_delayed_scaling_mixed", "hybrid", "delayed", 0, 0, true},  // Megatron-Bridge's
    {"bf16_with_fp8_current_scaling_mixed", "hybrid", "tensorwise", 1, 1, true},
    {"nemotron_h_bf16_with_fp8_current_scaling_mixed", "hybrid", "tensorwise", 2, 2, true},
}};

std::vector<Expr> precision_recipe_fields(const PrecisionRecipe& r) {
  std::vector<Expr> fields;
  const auto set = [&](std::string_view key, std::string_view v) {
    Expr e = python::value_of(v);
    e.key = std::string(key);
    fields.push_back(e);
  };
  if (r.fp8.empty()) return fields;
  set("fp8", r.fp8);
  set("fp8_recipe", r.fp8_recipe);
  set("fp8_param_gather", r.fp8_param_gather ? "true" : "false");
  if (r.bf16_at_start > 0 || r.bf16_at_end > 0) {
    set("first_last_layers_bf16", "true");
    set("num_layers_at_start_in_bf16", std::to_string(r.bf16_at_start));
    set("num_layers_at_end_in_bf16", std::to_string(r.bf16_at_end));
  }
  return fields;
}

// One field of Megatron-core's mixed precision beyond the BF16 ones (NeMo's MegatronMixedPrecision, Megatron-Bridge's
// MixedPrecisionConfig: both hand them to TransformerConfig) as the layout knob it sets; bf16_mixed's own values and
// what changes neither memory nor time are passed over (the latter listed in `ignored`); an Error names the rest.
void read_precision_field(const Expr& kw, std::map<std::string, std::string>& knobs,
                          std::vector<std::string>& ignored) {
  const std::string v = python::plain_value(kw), what = kw.key + " " + kw.shown();
  const auto is = [&](std::string_view key, std::string_view value) { return kw.key == key && v == value; };
  if (is("params_dtype", "torch.bfloat16") || is("pipeline_dtype", "torch.bfloat16") ||
      is("autocast_enabled", "false") || is("bf16", "true") || is("fp8", "None") || is("fp8_wgrad", "true") ||
      is("fp8_dot_product_attention", "false") || is("fp8_multi_head_attention", "false") ||
      is("reuse_grad_buf_for_mxfp8_param_ag", "false"))
    return;
  if (is("first_last_layers_bf16", "false")) {  // set after a recipe's true (the performance scripts turn it off)
    knobs.erase("first_last_layers_bf16");
    return;
  }
  if (kw.key == "loss_scale" || kw.key == "initial_loss_scale" || kw.key == "min_loss_scale" ||
      kw.key == "loss_scale_window" || kw.key == "hysteresis")
    return;  // FP16's loss scaling: nothing under BF16
  if (kw.key == "fp8_margin" || kw.key == "fp8_amax_history_len" || kw.key == "fp8_amax_compute_algo") {
    ignored.push_back("the precision's " + kw.key + " (delayed scaling's scale: a few KiB a tensor, the same GEMMs)");
    return;
  }
  if (kw.key == "fp8") {
    if (v != "hybrid" && v != "e4m3") throw Error("the precision's " + what + R"( (valid: "hybrid", "e4m3", None))");
    knobs["fp8_format"] = v;
  } else if (kw.key == "fp8_recipe") {
    if (v != "delayed" && v != "tensorwise")
      throw Error("the precision's " + what + R"( is not priced (valid: "delayed", "tensorwise"))");
    knobs["fp8_recipe"] = v;
  } else if (kw.key == "fp8_param_gather" || kw.key == "fp8_params") {
    if (v != "true" && v != "false" && v != "None")
      throw Error("the precision's " + what + " (expected True or False)");
    knobs["fp8_param_gather"] = v == "true" ? "true" : "false";
  } else if (kw.key == "first_last_layers_bf16" && v == "true") {
    knobs["first_last_layers_bf16"] = "true";
    knobs.try_emplace("num_layers_at_start_in_bf16", "0");  // the plugins' defaults (0, where TransformerConfig's is 1)
    knobs.try_emplace("num_layers_at_end_in_bf16", "0");
  } else if (kw.key == "num_layers_at_start_in_bf16" || kw.key == "num_layers_at_end_in_bf16") {
    if (kw.kind != Expr::Kind::number) throw Error("the precision's " + what + " (expected a count)");
    knobs[kw.key] = v;
  } else {
    throw Error("the precision's " + what + " is not priced");
  }
}

}  // namespace

// A recipe's settings under NeMo 2.0's paths (trainer.strategy.*, data.*, optim.*, model.config.*; Megatron-Bridge's
// are translated to them), each read into the command's layout, ignored with why (kRecipeKeys), or refused; the
// world is trainer.num_nodes x trainer.devices, and `world_hint` says how to give another. Returns the nodes and
// devices read.
std::pair<std::int64_t, std::int64_t> read_recipe_settings(const Settings& settings, std::int64_t gpus,
                                                           std::string_view where, std::string_view world_hint,
                                                           MegatronCommand& out,
                                                           const std::map<std::string, std::string>& shown_as = {}) {
  // Each setting read, ignored with why, or refused.
  std::map<std::string, std::string>& layout = out.run.layout;
  std::int64_t nodes = 1, devices = 8;
  std::optional<std::int64_t> expert_tp;  // Megatron-core's default (None) is the tensor-parallel size
  // MegatronCommOverlapCallback's settings (none: the callback is not there) and the plugin's gradient reduction.
  std::optional<bool> tp_overlap, p2p_overlap, plugin_fp32_reduce;
  bool overlap_callback = false, deepep_callback = false;
  std::optional<std::string> recompute_modules;  // model.config.recompute_modules' names, comma-separated
  bool pad_vocab = false;                        // model.config.should_pad_vocab (Bridge's provider: False)
  std::int64_t vocab_multiple = 128;             // model.config.make_vocab_size_divisible_by
  std::string callbacks_ignored, overlap_unpriced;
  bool experts = false;
  // The DDP overlaps as the DDP config and MegatronCommOverlapCallback set them (the callback's, written into the DDP
  // config at setup, win); knobs overlap_grad_reduce and overlap_param_gather.
  std::optional<bool> ddp_grad_overlap, ddp_param_overlap, callback_grad_overlap, callback_param_overlap;
  bool megatron_fsdp = false, fsdp_double_buffer = false;  // Megatron-FSDP's, read after the loop
  std::optional<std::string> fsdp_strategy;
  std::int64_t fsdp_unit_size = 0;
  for (const auto& setting : settings) {  // named, not bound: clang 14's lambdas cannot capture bindings
    const std::string& key = setting.first;
    const Expr& value = setting.second.first;
    const std::string& from = setting.second.second;
    const RecipeKey* rule = text::key_rule(kRecipeKeys, key);
    const std::string v = python::plain_value(value);
    const auto refuse = [&](const std::string& why) -> Error {  // named as the recipe writes it (Bridge's paths)
      const auto as = shown_as.find(key);
      return Error(from + ": " + (as == shown_as.end() ? key : as->second) + " " + value.shown() + ": " + why);
    };
    if (rule == nullptr) {
      if (key.starts_with("data.") && key != "data.seq_length") {
        out.ignored.push_back(key + " (data)");
        continue;
      }
      throw refuse("not a setting headroom reads or knows to be harmless");
    }
    if (!rule->why.empty()) {
      out.ignored.push_back(key + " (" + std::string(rule->why) + ")");
      continue;
    }
    const auto integer = [&]() -> std::int64_t {
      const auto x = text::number(v);
      if (value.kind != Expr::Kind::number || !x || *x < 1 || *x > static_cast<double>(kMaxRecipeInteger) ||
          *x != std::floor(*x))
        throw refuse("expected a positive integer (at most 10^9)");
      return static_cast<std::int64_t>(*x);
    };
    const auto boolean = [&]() {
      if (v != "true" && v != "false") throw refuse("expected True or False");
      return v == "true";
    };
    out.read.push_back(key);
    if (key == "trainer.num_nodes") {
      nodes = integer();
    } else if (key == "trainer.devices") {
      devices = integer();
    } else if (key == "trainer.strategy.virtual_pipeline_model_parallel_size") {
      layout["vpp"] = v == "None" ? "1" : std::to_string(integer());
    } else if (key == "trainer.strategy.num_layers_in_first_pipeline_stage" ||
               key == "trainer.strategy.num_layers_in_last_pipeline_stage") {
      if (v != "None") layout[std::string(rule->knob)] = std::to_string(integer());
    } else if (key == "trainer.strategy.sequence_parallel" ||
               key == "trainer.strategy.account_for_embedding_in_pipeline_split" ||
               key == "trainer.strategy.account_for_loss_in_pipeline_split" ||
               key == "model.config.moe_shared_expert_overlap") {
      layout[std::string(rule->knob)] = boolean() ? "true" : "false";
    } else if (key == "model.config.cp_comm_type") {
      // transformer_config.py: one type for all layers, or a list (one a layer, not priced); None: p2p.
      if (v != "None" && v != "p2p" && v != "all_gather" && v != "a2a")
        throw refuse(R"(not priced (valid: "p2p", "all_gather", "a2a", None))");
      if (v != "None") layout["cp_comm_type"] = v;
    } else if (key == "model.config.mtp_num_layers") {
      layout["mtp_num_layers"] = v == "None" || v == "0" ? "0" : std::to_string(integer());
    } else if (key == "model.config.moe_token_dispatcher_type") {
      // transformer_config.py: allgather, alltoall or flex; the allgather dispatcher is not priced.
      if (v != "alltoall" && v != "flex") throw refuse(R"(not priced (valid: "alltoall", "flex"))");
      layout["moe_token_dispatcher_type"] = v;
    } else if (key == "model.config.moe_expert_capacity_factor") {
      if (v != "None") {  // None: dropless
        const auto x = text::number(v);
        if (!x || !(*x >= 1.0) || *x > 1e6) throw refuse("expected None (dropless) or a number from 1 to 10^6");
        layout["moe_expert_capacity_factor"] = v;
      }
    } else if (key == "trainer.strategy.ddp.grad_reduce_in_fp32") {
      layout["grad_reduce_in_bf16"] = boolean() ? "false" : "true";
    } else if (key == "trainer.strategy.ddp.overlap_grad_reduce") {
      ddp_grad_overlap = boolean();
    } else if (key == "trainer.strategy.ddp.overlap_param_gather") {
      ddp_param_overlap = boolean();
    } else if (key == "trainer.strategy.fsdp") {
      // nemo/lightning/pytorch/strategies/megatron_strategy.py: "megatron" runs Megatron-FSDP (ddp.use_megatron_fsdp).
      if (v == "megatron") megatron_fsdp = true;
      if (v != "None" && v != "megatron") throw refuse("PyTorch FSDP under NeMo is not priced (valid: None, megatron)");
    } else if (key == "trainer.strategy.ddp.data_parallel_sharding_strategy") {
      fsdp_strategy = v;
    } else if (key == "trainer.strategy.ddp.fsdp_double_buffer" || key == "trainer.strategy.ddp.nccl_ub") {
      fsdp_double_buffer = fsdp_double_buffer || boolean();  // arguments.py: nccl_ub turns double buffers on
    } else if (key == "trainer.strategy.ddp.suggested_communication_unit_size") {
      if (v != "None") fsdp_unit_size = integer();
    } else if (key == "trainer.strategy.ddp.keep_fp8_transpose_cache") {
      if (boolean()) throw refuse("Megatron-FSDP's kept FP8 transpose cache is not priced (valid: False)");
    } else if (key == "trainer.accumulate_grad_batches") {
      if (integer() != 1) throw refuse("Megatron-core accumulates the global batch itself (valid: 1)");
    } else if (key == "trainer.plugins") {
      // Megatron-core's mixed precision (nemo/lightning/pytorch/plugins/mixed_precision.py MegatronMixedPrecision at
      // "bf16-mixed"): bf16_mixed() (recipes/precision/mixed_precision.py), its FP8 variants by name
      // (kPrecisionRecipes), or the plugin with its fields written out; grad_reduce_in_fp32 (pretrain_performance_
      // optimizations sets it False) is the DDP config's, the FP8 fields are read_precision_field's. Lightning takes
      // one plugin or a list (nemotronh_8b.py: plugins=[bf16_mixed()]).
      const Expr& plugin = value.kind == Expr::Kind::list && value.args.size() == 1 ? value.args.front() : value;
      const Expr* precision = plugin.kwarg("precision");
      const auto* named = std::find_if(kPrecisionRecipes.begin(), kPrecisionRecipes.end(),
                                       [&](const PrecisionRecipe& r) { return r.name == plugin.text; });
      const bool bf16 = plugin.kind == Expr::Kind::call &&
                        ((named != kPrecisionRecipes.end() && plugin.args.empty()) ||
                         (plugin.text == "run.Config" && plugin.args.size() == 1 &&
                          plugin.args.front().text.ends_with("MegatronMixedPrecision") && precision != nullptr &&
                          precision->kind == Expr::Kind::string && precision->text == "bf16-mixed"));
      if (!bf16)
        throw refuse(
            "headroom prices the recipes' bf16_mixed() precision and its FP8 variants (valid: bf16_mixed(), "
            "bf16_with_fp8_mixed(), bf16_with_fp8_current_scaling_mixed(), run.Config(nl.MegatronMixedPrecision, "
            "precision=\"bf16-mixed\", ...))");
      std::vector<Expr> fields =
          named != kPrecisionRecipes.end() ? precision_recipe_fields(*named) : std::vector<Expr>{};
      fields.insert(fields.end(), plugin.kwargs.begin(), plugin.kwargs.end());  // the plugin's own, set after
      std::map<std::string, std::string> fp8;
      for (const Expr& kw : fields) {
        if (kw.key == "precision") continue;
        const std::string x = python::plain_value(kw);
        if (kw.key == "grad_reduce_in_fp32" && (x == "true" || x == "false")) {
          plugin_fp32_reduce = x == "true";
          continue;
        }
        try {
          read_precision_field(kw, fp8, out.ignored);
        } catch (const Error& e) {
          throw refuse(e.what());
        }
      }
      // Without fp8 its other settings do nothing; the BF16 layers' counts nothing without first_last_layers_bf16.
      if (!fp8.contains("first_last_layers_bf16"))
        for (const char* count : {"num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"}) fp8.erase(count);
      if (fp8.contains("fp8_format")) {
        fp8.try_emplace("fp8_recipe", "delayed");  // MegatronMixedPrecision's default
        for (const auto& [k, x] : fp8) layout[k] = x;
      } else if (!fp8.empty()) {
        out.ignored.emplace_back("the precision's FP8 settings (fp8 is None: BF16 training)");
      }
    } else if (key == "trainer.callbacks") {
      if (value.kind != Expr::Kind::list && v != "None") throw refuse("expected a list of run.Config(<callback>)");
      for (const Expr& c : value.args) {
        const std::string cls = c.kind == Expr::Kind::call && c.text == "run.Config" && !c.args.empty()
                                    ? c.args.front().text.substr(c.args.front().text.rfind('.') + 1)
                                    : c.shown();
        const auto it = std::find_if(kRecipeCallbacks.begin(), kRecipeCallbacks.end(),
                                     [&](const RecipeCallback& r) { return r.cls == cls; });
        if (it == kRecipeCallbacks.end())
          throw refuse("the callback " + cls +
                       " is not read (valid: TimingCallback, GarbageCollectionCallback, "
                       "PreemptionCallback, ModelCheckpoint, MegatronCommOverlapCallback, DeepEPCallback)");
        if (cls == "DeepEPCallback") {
          if (!c.kwargs.empty() || c.args.size() != 1) throw refuse("DeepEPCallback takes no settings");
          out.arguments["deepep_callback"] = "true";
          deepep_callback = true;
          continue;
        }
        if (!it->why.empty()) {
          callbacks_ignored += (callbacks_ignored.empty() ? "" : "; ") + cls + ": " + std::string(it->why);
          continue;
        }
        overlap_callback = true;
        for (const Expr& kw : c.kwargs) {
          const std::string x = python::plain_value(kw);
          const auto flag = [&]() -> std::optional<bool> {
            if (x == "None") return std::nullopt;
            if (x != "true" && x != "false")
              throw refuse(cls + "'s " + kw.key + " " + kw.shown() + ": expected True, False or None");
            return x == "true";
          };
          if (kw.key == "tp_comm_overlap") {
            tp_overlap = flag();
          } else if (kw.key == "overlap_p2p_comm") {
            p2p_overlap = flag();
          } else if (kw.key == "overlap_grad_reduce") {
            callback_grad_overlap = flag();
          } else if (kw.key == "overlap_param_gather") {
            callback_param_overlap = flag();
          } else if (kw.key == "overlap_param_gather_with_optimizer_step") {
            if (flag() == true)
              out.ignored.push_back(cls + "'s " + kw.key + " (" + std::string(kWhyGatherWithStep) + ")");
          } else if (kw.key == "delay_wgrad_compute" || kw.key == "overlap_moe_expert_parallel_comm") {
            // megatron/bridge/training/comm_overlap.py: the weight gradients delayed behind the expert all-to-alls,
            // and those all-to-alls overlapped with the other micro-batch's compute; off (their default) as priced.
            if (flag() == true) throw refuse(cls + "'s " + kw.key + " True: not priced (valid: False, None)");
          } else if (kw.key == "tp_comm_overlap_cfg" || kw.key == "tp_comm_bootstrap_backend" ||
                     kw.key == "defer_embedding_wgrad_compute" || kw.key == "wgrad_deferral_limit" ||
                     kw.key == "align_param_gather" || kw.key == "bucket_size" || kw.key == "batch_p2p_comm") {
            overlap_unpriced += (overlap_unpriced.empty() ? "" : ", ") + kw.key;
          } else {
            throw refuse(cls + "'s " + kw.key + " is not read");
          }
        }
      }
      if (!overlap_callback && !deepep_callback) {  // none that changes the job: listed as ignored, with why
        out.read.pop_back();
        out.ignored.push_back(key + " (" + (callbacks_ignored.empty() ? std::string("none") : callbacks_ignored) + ")");
      }
    } else if (key == "optim") {
      // nemo/collections/llm/recipes/optim/adam.py: OptimizerConfig(optimizer="adam", bf16=precision ==
      // "bf16-mixed", use_distributed_optimizer=True): Megatron-core's distributed optimizer, FP32 states.
      const Expr* precision = value.kwarg("precision");
      if (value.kind != Expr::Kind::call || value.text != "distributed_fused_adam_with_cosine_annealing" ||
          (precision != nullptr && precision->text != "bf16-mixed"))
        throw refuse("headroom reads the recipes' distributed_fused_adam_with_cosine_annealing(), BF16");
      layout["sharding"] = "NNG";
    } else if (key == "model.config.transformer_impl") {
      if (v != "transformer_engine") throw refuse("only Transformer Engine's layers are priced");
    } else if (key == "model.config.cuda_graph_impl") {
      if (v != "none" && v != "None") throw refuse("CUDA graphs are not priced (valid: \"none\")");
    } else if (key == "model.config.attention_backend") {  // AttnBackend.flash, or None for auto
      const std::string b = v.substr(v.rfind('.') + 1);
      if (b != "None" && b != "auto" && b != "flash" && b != "fused")
        throw refuse("only the fused kernels (auto, flash, fused) are priced");
    } else if (key == "model.config.recompute_modules") {
      // transformer_config.py: a list of module names, or None for its default (core_attn).
      if (v != "None") {
        if (value.kind != Expr::Kind::list) throw refuse("expected a list of module names, or None");
        std::string names;
        for (const Expr& e : value.args) {
          if (e.kind != Expr::Kind::string) throw refuse("expected a list of module names");
          names += (names.empty() ? "" : ",") + e.text;
        }
        try {
          (void)parse_recompute_modules(names);
        } catch (const Error& e) {
          throw refuse(e.what());
        }
        recompute_modules = names;
      }
    } else if (key == "model.config.should_pad_vocab") {
      pad_vocab = boolean();
    } else if (key == "model.config.make_vocab_size_divisible_by") {
      vocab_multiple = integer();
    } else if (key == "model.config.fine_grained_activation_offloading") {
      if (boolean()) throw refuse("activation offloading is not priced (valid: False)");
    } else if (key == "model.config.offload_modules") {
      if (v != "None") throw refuse("not priced (valid: None)");
    } else if (key == "model.config.pipeline_model_parallel_layout") {
      // transformer_config.py: Megatron-LM's layout string, or a list of each stage's layer names; None: the split
      // options. Parsed and checked against the model where the layout is built.
      if (value.kind == Expr::Kind::string) {
        layout["pipeline_model_parallel_layout"] = value.text;
      } else if (value.kind == Expr::Kind::list) {
        std::vector<std::vector<std::string>> stages;
        for (const Expr& stage : value.args) {
          if (stage.kind != Expr::Kind::list) throw refuse("expected a list of stages, each a list of layer names");
          stages.emplace_back();
          for (const Expr& name : stage.args) {
            if (name.kind != Expr::Kind::string) throw refuse("a layer " + name.shown() + " that is not a name");
            stages.back().push_back(name.text);
          }
        }
        try {
          layout["pipeline_model_parallel_layout"] = pipeline_layout_text(stages);
        } catch (const Error& e) {
          throw refuse(e.what());
        }
      } else if (v != "None") {
        throw refuse("expected a layout string, a list of stages or None");
      }
    } else if (key == "trainer.strategy.ddp.use_megatron_fsdp") {
      megatron_fsdp = megatron_fsdp || boolean();
    } else if (key == "optim.config.optimizer") {
      if (v != "adam") throw refuse("headroom prices Adam (valid: \"adam\")");
    } else if (key == "model.config.recompute_granularity") {
      if (v != "None" && v != "full" && v != "selective") throw refuse("valid: full, selective, None");
      layout["recompute"] = v == "None" ? "none" : v;
    } else if (key == "model.config.recompute_method") {
      if (v != "None" && v != "uniform" && v != "block") throw refuse("valid: uniform, block, None");
      if (v != "None") layout["recompute_method"] = v;
    } else if (key == "model.config.recompute_num_layers") {
      if (v != "None") layout["recompute_num_layers"] = std::to_string(integer());
    } else if (key == "optim.config.use_distributed_optimizer") {
      layout["sharding"] = boolean() ? "NNG" : "NNN";
    } else if (key == "optim.config.use_precision_aware_optimizer") {
      layout["use_precision_aware_optimizer"] = boolean() ? "true" : "false";
    } else if (rule->knob.ends_with("_dtype")) {  // torch.float32, torch.bfloat16, torch.float16
      const std::string dtype = text::dtype_name(v);
      if (dtype != "fp32" && dtype != "bf16" && dtype != "fp16")
        throw refuse("valid: torch.float32, torch.bfloat16, torch.float16");
      layout[std::string(rule->knob)] = dtype;
    } else if (key == "model.config") {
      // A config class by its name; Megatron-Bridge's Hugging Face id whole.
      const std::string cls =
          value.kind == Expr::Kind::string ? value.text : value.text.substr(value.text.rfind('.') + 1);
      const auto it =
          std::find_if(kRecipeModels.begin(), kRecipeModels.end(), [&](const auto& m) { return m.config == cls; });
      if (it == kRecipeModels.end()) {  // check asks for --model
        out.model_unread =
            refuse(
                "no shipped model of this config's shape (read: NeMo's Llama 2, 3, 3.1 and 3.2, Llama 3.1 Nemotron, "
                "Mistral 7B and NeMo 12B, Mixtral, Qwen 3 and its MoE, Qwen 2 and 2.5 dense, Gemma 1 and 2, "
                "Nemotron-3 and -4, Phi-3 mini, Baichuan 2 7B, ChatGLM3 6B, StarCoder2, GPT-3 175B and DeepSeek V2, "
                "V2-Lite and V3 configs; Megatron-Bridge's Llama 2 7B, Llama 3, 3.1 and 3.2, Qwen 2, 2.5 and 3, "
                "Gemma 2 and DeepSeek V2, V2-Lite and V3 ids)")
                .what();
        continue;
      }
      layout["model"] = std::string(it->model);
      experts = it->experts;
      // Where the class differs from the shipped model, as Megatron-LM's arguments (check applies them).
      std::string differences;
      const auto say = [&](const std::string& said) { differences += (differences.empty() ? " with " : ", ") + said; };
      const auto differ = [&](const char* argument, const std::string& v, const std::string& said) {
        out.arguments[argument] = v;
        say(said);
      };
      // A class default headroom prices as a knob, unless the recipe set it.
      const auto by_default = [&](const char* knob, const std::string& v, const std::string& said) {
        if (layout.contains(knob)) return;
        layout[knob] = v;
        say(said);
      };
      if (it->attention_dropout != nullptr)
        differ("attention_dropout", it->attention_dropout, "attention dropout " + std::string(it->attention_dropout));
      if (it->untied) differ("untie_embeddings_and_output_weights", "true", "its output layer untied");
      if (it->no_window) differ("window_size", "None", "no window");
      if (it->shared_expert_overlap) by_default("moe_shared_expert_overlap", "true", "the shared expert overlapped");
      if (it->mtp_layers > 0)
        by_default("mtp_num_layers", std::to_string(it->mtp_layers),
                   std::to_string(it->mtp_layers) + " multi-token-prediction layer(s)");
      out.notes.push_back("the model is " + cls + ", " + std::string(it->model) + "'s shape" + differences);
      // GPTConfig.configure_model takes a vocabulary the class does not set from the data's tokenizer, and
      // MockDataModule with none uses GPT-2's BPE (nemo/collections/llm/gpt/data/mock.py): the recipe's mock run
      // would train 50,257 rows, a real one its model's tokenizer's.
      if (!it->vocabulary && !settings.contains("data.tokenizer"))
        out.notes.push_back(
            "the data module names no tokenizer (NeMo's mock data would use GPT-2's 50,257 tokens); "
            "priced with " +
            std::string(it->model) + "'s own vocabulary, its tokenizer's");
    } else if (key == "trainer.strategy.expert_tensor_parallel_size") {
      if (v != "None") expert_tp = integer();
    } else {
      layout[std::string(rule->knob)] = std::to_string(integer());
    }
  }
  // Megatron-LM reads the modules under selective recompute only (transformer_layer.py); an empty list recomputes
  // nothing.
  if (recompute_modules) {
    if (!layout.contains("recompute") || layout.at("recompute") != "selective")
      out.notes.emplace_back(
          "model.config.recompute_modules: Megatron-LM reads it under selective recompute only, "
          "which this recipe does not run");
    else if (recompute_modules->empty())
      layout["recompute"] = "none";
    else
      layout["recompute_modules"] = *recompute_modules;
  }
  // The callback's overlaps as it sets them (_get_model_comm_overlap_cfgs): TP overlap only at TP 2 or more with SP;
  // P2P overlap for the interleaved schedule, the only one that runs it. Without the callback Megatron-core's
  // ModelParallelConfig leaves P2P overlap off. The plugin's gradient reduction is the DDP config's.
  const std::int64_t tp = layout.contains("tp") ? std::stoll(layout.at("tp")) : 1;
  const bool sp = layout.contains("sequence_parallel") && layout.at("sequence_parallel") == "true";
  if (tp_overlap == true && (tp < 2 || !sp))
    out.notes.emplace_back("MegatronCommOverlapCallback turns its tp_comm_overlap off here (TP below 2 or no SP)");
  if (!overlap_unpriced.empty())
    out.notes.push_back("MegatronCommOverlapCallback's " + overlap_unpriced +
                        ": how the overlaps are scheduled (userbuffers' settings, deferred embedding gradients, "
                        "aligned gathers, bucket sizes), not priced");
  if (tp_overlap) layout["tp_comm_overlap"] = *tp_overlap && tp >= 2 && sp ? "true" : "false";
  if (pad_vocab) out.arguments["make_vocab_size_divisible_by"] = std::to_string(vocab_multiple);
  layout["overlap_p2p_comm"] = p2p_overlap.value_or(overlap_callback) ? "true" : "false";
  if (plugin_fp32_reduce) layout["grad_reduce_in_bf16"] = *plugin_fp32_reduce ? "false" : "true";
  // Megatron-core splits only experts by it: a dense model's (the Qwen 3 trainer's 1 for every size) changes nothing.
  // A config class of no shipped model (priced as --model) has experts where it is run with expert parallelism.
  if (!out.model_unread.empty()) experts = layout.contains("ep") && layout.at("ep") != "1";
  if (expert_tp && experts) layout["etp"] = std::to_string(*expert_tp);
  if (expert_tp && !experts)
    out.notes.push_back("trainer.strategy.expert_tensor_parallel_size " + std::to_string(*expert_tp) +
                        ": no experts to split in a dense model");
  for (const char* required : {"model.config", "data.seq_length", "data.global_batch_size", "data.micro_batch_size"})
    if (!settings.contains(required)) throw Error(std::string(where) + ": the recipe gives no " + required);
  if (!layout.contains("sharding"))
    throw Error(std::string(where) +
                ": the recipe gives no optim (headroom reads distributed_fused_adam_with_cosine_annealing)");
  // Megatron-FSDP's strategy (DistributedDataParallelConfig's default optim_grads_params) and settings; without it
  // they are kept and not read.
  if (megatron_fsdp) {
    layout["use_megatron_fsdp"] = "true";
    layout["sharding"] = megatron_fsdp_sharding(fsdp_strategy.value_or("optim_grads_params"), where);
    if (fsdp_double_buffer) layout["fsdp_double_buffer"] = "true";
    if (fsdp_unit_size > 0) layout["suggested_communication_unit_size"] = std::to_string(fsdp_unit_size);
    read_to_ignored(out, "trainer.strategy.ddp.nccl_ub",
                    "NCCL's user buffers: its double buffers are priced as fsdp_double_buffer, its collectives at "
                    "NCCL's default kernels");
  } else {
    for (const char* k :
         {"trainer.strategy.ddp.data_parallel_sharding_strategy", "trainer.strategy.ddp.fsdp_double_buffer",
          "trainer.strategy.ddp.suggested_communication_unit_size", "trainer.strategy.ddp.keep_fp8_transpose_cache"})
      read_to_ignored(out, k, "Megatron-FSDP's, which the recipe does not run");
    read_to_ignored(out, "trainer.strategy.ddp.nccl_ub",
                    "NCCL's user buffers for the data-parallel collectives: priced at NCCL's default kernels");
  }
  const std::int64_t world = nodes * devices;
  std::int64_t model_gpus = 1, rest = world;  // world divided by tp, cp and pp in turn: no product overflows
  bool divides = true;
  for (const char* k : {"tp", "cp", "pp"})
    if (layout.contains(k)) {
      const std::int64_t x = std::stoll(layout.at(k));
      divides = divides && rest % x == 0;
      rest = divides ? rest / x : rest;
      model_gpus = model_gpus <= kMaxRecipeInteger ? model_gpus * x : model_gpus;
    }
  if (!divides)
    throw Error(std::string(where) + ": trainer.num_nodes " + std::to_string(nodes) + " x trainer.devices " +
                std::to_string(devices) + " = " + std::to_string(world) +
                " GPUs, not a multiple of the strategy's tensor x context x pipeline parallel sizes (" +
                std::to_string(model_gpus) + "): " + std::string(world_hint));
  for (const auto& [name, callback, ddp] :
       {std::tuple{"overlap_grad_reduce", callback_grad_overlap, ddp_grad_overlap},
        std::tuple{"overlap_param_gather", callback_param_overlap, ddp_param_overlap}})
    if (const std::optional<bool> on = callback ? callback : ddp) layout[name] = *on ? "true" : "false";
  if (gpus > 0 && gpus != world)
    throw Error("--gpus " + std::to_string(gpus) +
                ": the recipe runs on trainer.num_nodes x trainer.devices = " + std::to_string(world) + " GPUs");
  layout["gpus"] = std::to_string(world);
  if (!layout.contains("grad_reduce_in_bf16")) layout["grad_reduce_in_bf16"] = "false";  // DDP config's default
  return {nodes, devices};
}

}  // namespace

MegatronCommand read_nemo_recipe(std::string_view text, std::int64_t gpus, std::string_view where,
                                 const std::vector<std::string>& overrides, const RecipeSibling& sibling) {
  // The recipe's siblings (`from nemo.collections.llm.recipes import llama3_8b`, `from
  // nemo.collections.llm.recipes.qwen3 import qwen3_trainer`) are followed where `sibling` gives their text; the
  // package's subfolders (optim, precision, log) are not: their calls are the values read below.
  constexpr std::string_view kPackage = "nemo.collections.llm.recipes.";
  python::Evaluator ev(text, std::string(where), [&](const std::string& module) -> std::optional<std::string> {
    const std::string name = module.starts_with(kPackage) ? module.substr(kPackage.size()) : "";
    if (!sibling || name.empty() || name.find('.') != std::string::npos) return std::nullopt;
    return sibling(name);
  });
  const auto recipe_it = ev.main().functions.find("pretrain_recipe");
  if (recipe_it == ev.main().functions.end())
    throw Error(std::string(where) +
                ": no pretrain_recipe(): a NeMo 2.0 pre-training recipe (nemo/collections/llm/recipes/<model>.py) "
                "defines the pretrain_recipe() that `nemo llm pretrain --factory <model>` runs");
  const Function& recipe = recipe_it->second;
  MegatronCommand out;

  // The factory's arguments (`num_nodes=2`) and the recipe's settings (`trainer.strategy.x=y`), NeMo-Run's overrides.
  std::vector<Expr> factory_args;
  std::map<std::string, Expr> settings_given;
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("override " + o + ": expected key=value (a pretrain_recipe argument or a setting's path)");
    const std::string key = o.substr(0, eq);
    Expr v = python::value_of(o.substr(eq + 1));
    v.file = -1;
    if (key.find('.') == std::string::npos) {
      if (recipe.param(key) == nullptr) throw Error("override " + o + ": pretrain_recipe() has no argument " + key);
      v.key = key;
      factory_args.push_back(std::move(v));
    } else {
      settings_given[key] = std::move(v);
    }
  }
  const Expr partial = ev.call("pretrain_recipe", factory_args);
  for (const std::string& m : ev.followed())
    out.notes.push_back("followed the recipe's calls into " + m.substr(m.rfind('.') + 1) + ".py, next to it");
  for (const std::string& c : ev.passed_over()) out.notes.push_back(passed_over_note(c));

  // The settings: the Trainer and its MegatronStrategy and DDP config, the data module, the optimizer and the model's
  // config, each keyword of the run.Config calls the recipe returns.
  Settings settings;
  const auto config_of = [](const Expr* e, std::string_view cls) {
    return e != nullptr && e->kind == Expr::Kind::call && (e->text == "run.Config" || e->text == "run.Partial") &&
           !e->args.empty() && e->args.front().kind == Expr::Kind::name &&
           (e->args.front().text == cls || e->args.front().text.ends_with("." + std::string(cls)));
  };
  const auto unread = [&](const Expr* e, const std::string& what, const std::string& form) {
    return Error(ev.where(e != nullptr ? *e : partial) + ": the recipe's " + what + " is " +
                 (e != nullptr ? e->shown() : std::string("not given")) + ", not " + form +
                 " headroom reads (a function of a module not next to the recipe is not followed)");
  };
  const auto set_from = [&](const std::string& prefix, const Expr& call, std::string_view skip) {
    for (const Expr& value : call.kwargs)
      if (value.key != skip) settings[prefix + value.key] = {value, ev.where(value)};
  };
  if (partial.kind != Expr::Kind::call || partial.text != "run.Partial")
    throw unread(&partial, "pretrain_recipe()", "the run.Partial of a training");
  const Expr* trainer = partial.kwarg("trainer");
  if (!config_of(trainer, "Trainer")) throw unread(trainer, "trainer", "run.Config(nl.Trainer, ...)");
  const Expr* strategy = trainer->kwarg("strategy");
  if (!config_of(strategy, "MegatronStrategy"))
    throw unread(strategy, "trainer's strategy", "run.Config(nl.MegatronStrategy, ...)");
  const Expr* ddp = strategy->kwarg("ddp");
  const bool ddp_config = ddp != nullptr && ddp->kind == Expr::Kind::call;
  set_from("trainer.strategy.", *strategy, ddp_config ? "ddp" : "");
  if (ddp_config) {
    if (!config_of(ddp, "DistributedDataParallelConfig"))
      throw Error(ev.where(*ddp) + ": ddp " + ddp->shown() + ": not a DistributedDataParallelConfig");
    set_from("trainer.strategy.ddp.", *ddp, "");
  }
  set_from("trainer.", *trainer, "strategy");
  const Expr* data = partial.kwarg("data");
  if (data == nullptr || data->kind != Expr::Kind::call || data->text != "run.Config")
    throw unread(data, "data", "a run.Config of a data module");
  set_from("data.", *data, "");
  // The optimizer: its factory's call, its arguments and the fields set on the config it builds (`recipe.optim.config.
  // use_precision_aware_optimizer = False`, a section the evaluation added to the call it could not follow).
  if (const Expr* optim = partial.kwarg("optim")) {
    settings["optim"] = {*optim, ev.where(*optim)};
    for (const Expr& a : optim->kwargs) {
      if (a.key == "precision") continue;  // checked with the call
      if ((a.key == "config" || a.key == "lr_scheduler") && a.kind == Expr::Kind::call && a.args.empty())
        set_from("optim." + a.key + ".", a, "");
      else
        settings["optim." + a.key] = {a, ev.where(a)};
    }
  }
  // The model: run.Config(<Model>, config=run.Config(<config class>, <fields set>)).
  const Expr* model = partial.kwarg("model");
  const Expr* config = model != nullptr && model->kind == Expr::Kind::call ? model->kwarg("config") : nullptr;
  if (config == nullptr || config->kind != Expr::Kind::call || config->text != "run.Config" || config->args.empty())
    throw unread(model, "model", "run.Config(<Model>, config=run.Config(<NeMo config class>))");
  settings["model.config"] = {config->args.front(), ev.where(*config)};
  set_from("model.config.", *config, "");
  for (auto& [key, value] : settings_given)
    if (!override_field(settings, "trainer.plugins", key, value, "override " + key))
      settings[key] = {value, "override " + key};
  const auto [nodes, devices] = read_recipe_settings(
      settings, gpus, where, "give num_nodes=N (NeMo's `--factory \"<recipe>(num_nodes=N)\"`)", out);
  out.notes.insert(out.notes.begin(), "read as NeMo 2.0 recipe settings (pretrain_recipe, trainer, model), " +
                                          std::to_string(nodes) + " node(s) x " + std::to_string(devices) + " GPUs");
  return out;
}

namespace {

// Megatron-Bridge's ConfigContainer paths (megatron/bridge/training/config.py) as NeMo 2.0's recipe paths of the same
// Megatron-core value, or why a section is ignored. The model provider's fields are TransformerConfig's, which NeMo
// keeps under model.config (its parallel sizes under the strategy); the first rule that matches applies.
struct BridgePath {
  std::string_view key, nemo, why;  // key: Bridge's path
};
constexpr auto kBridgePaths = std::to_array<BridgePath>({
    {"model.tensor_model_parallel_size", "trainer.strategy.tensor_model_parallel_size", ""},
    {"model.pipeline_model_parallel_size", "trainer.strategy.pipeline_model_parallel_size", ""},
    {"model.virtual_pipeline_model_parallel_size", "trainer.strategy.virtual_pipeline_model_parallel_size", ""},
    {"model.context_parallel_size", "trainer.strategy.context_parallel_size", ""},
    {"model.expert_model_parallel_size", "trainer.strategy.expert_model_parallel_size", ""},
    {"model.expert_tensor_parallel_size", "trainer.strategy.expert_tensor_parallel_size", ""},
    {"model.sequence_parallel", "trainer.strategy.sequence_parallel", ""},
    {"model.pipeline_dtype", "trainer.strategy.pipeline_dtype", ""},
    {"model.account_for_embedding_in_pipeline_split", "trainer.strategy.account_for_embedding_in_pipeline_split", ""},
    {"model.account_for_loss_in_pipeline_split", "trainer.strategy.account_for_loss_in_pipeline_split", ""},
    {"model.num_layers_in_first_pipeline_stage", "trainer.strategy.num_layers_in_first_pipeline_stage", ""},
    {"model.num_layers_in_last_pipeline_stage", "trainer.strategy.num_layers_in_last_pipeline_stage", ""},
    {"model.*", "model.config.*", ""},
    {"train.global_batch_size", "data.global_batch_size", ""},
    {"train.micro_batch_size", "data.micro_batch_size", ""},
    {"train.train_iters", "", "the run's length"},
    {"train.manual_gc*", "", "Python's garbage collection at fixed steps"},
    {"train.exit_*", "", "the run's length"},
    // megatron/bridge/training/config.py TrainingConfig: evaluation's settings, deprecated for ValidationConfig's.
    {"train.eval_*", "", "evaluation (between steps)"},
    {"dataset.seq_length", "data.seq_length", ""},
    {"dataset.*", "", "data"},
    {"ddp.*", "trainer.strategy.ddp.*", ""},
    {"optimizer.*", "optim.config.*", ""},
    {"scheduler.*", "", "the learning-rate schedule"},
    {"validation.*", "", "evaluation"},
    {"logger.*", "", "logging"},
    {"checkpoint.*", "", "checkpointing"},
    {"tokenizer.*", "", "the tokenizer: priced with the model's own vocabulary"},
    {"rng.*", "", "random seeds"},
    {"dist.*", "", "process-group initialisation"},
    {"env_vars", "", "the process environment"},
    {"rerun_state_machine.*", "", "checks of a step's result, between steps"},
    {"profiling.*", "", "profiling (off unless its steps are given)"},
    {"ft.*", "", "fault tolerance"},
    {"straggler.*", "", "straggler detection"},
    {"nvrx_straggler.*", "", "straggler detection"},
    {"inprocess_restart.*", "", "restarts after a failure"},
    {"mixed_precision", "trainer.plugins", ""},
    {"comm_overlap", "trainer.callbacks", ""},
});

// Bridge's mixed_precision as NeMo's plugin: a recipe of kPrecisionRecipes by its name ("bf16_mixed") or called
// (bf16_mixed(), or get_mixed_precision_config("bf16_mixed"), bridge_intrinsics), passed on by name; or what that
// function returns where the evaluator follows it into a checkout (megatron/bridge/training/mixed_precision.py):
// MixedPrecisionConfig(bf16=True, params_dtype=torch.bfloat16, ..., fp8="hybrid", ...), with any field a recipe then
// sets on it, passed on as the plugin's fields (read_precision_field reads them; MixedPrecisionConfig's fp8_recipe
// defaults to tensorwise where NeMo's plugin's is delayed).
Expr bridge_mixed_precision(const Expr& value, const std::string& where) {
  const bool call = value.kind == Expr::Kind::call && value.args.empty();
  const bool config = call && value.text.ends_with("MixedPrecisionConfig");
  const auto* recipe = std::find_if(kPrecisionRecipes.begin(), kPrecisionRecipes.end(),
                                    [&](const PrecisionRecipe& r) { return r.name == value.text; });
  const bool named = (value.kind == Expr::Kind::string || (call && !config)) && recipe != kPrecisionRecipes.end();
  if (!config && !named)
    throw Error(where + ": mixed_precision " + value.shown() +
                ": headroom prices Megatron-Bridge's bf16_mixed and its FP8 variants (valid: \"bf16_mixed\", "
                "bf16_mixed(), \"bf16_with_fp8_delayed_scaling_mixed\", \"bf16_with_fp8_current_scaling_mixed\")");
  Expr plugin{Expr::Kind::call,
              config ? "bf16_mixed" : value.text,
              {},
              call ? value.kwargs : std::vector<Expr>{},
              value.line,
              {}};
  plugin.file = value.file;
  if (config && value.kwarg("bf16") == nullptr)
    throw Error(where + ": mixed_precision " + value.shown() + " without bf16=True: headroom prices BF16 training");
  if (value.kwarg("fp8") != nullptr && value.kwarg("fp8_recipe") == nullptr && (config || recipe->fp8_recipe.empty())) {
    Expr current = python::value_of("tensorwise", value.line);
    current.key = "fp8_recipe";
    plugin.kwargs.push_back(current);
  }
  return plugin;
}

// megatron/bridge/training/mixed_precision.py get_mixed_precision_config(name): the registered function of that name
// (`-` read as `_`), called, which a lookup in MIXED_PRECISION_RECIPES inside a try block returns; a config given
// instead of a name is followed as written.
python::Evaluator::Intrinsics bridge_intrinsics() {
  return {{"get_mixed_precision_config", [](const Expr& call) -> std::optional<Expr> {
             if (call.args.size() != 1 || !call.kwargs.empty() || call.args.front().kind != Expr::Kind::string)
               return std::nullopt;
             Expr named{Expr::Kind::call, call.args.front().text, {}, {}, call.line, {}};
             std::replace(named.text.begin(), named.text.end(), '-', '_');
             named.file = call.file;
             return named;
           }}};
}

// megatron/bridge/training/flex_dispatcher_backend.py apply_flex_dispatcher_backend(model_config, backend): with
// "deepep" or "hybridep" on an NVIDIA Ampere, Hopper or Blackwell GPU (every NVIDIA GPU headroom ships; where it
// checks torch.cuda), the flex dispatcher with that backend and the shared-expert overlap off; another backend (None)
// changes nothing.
python::Evaluator::Effects bridge_effects() {
  return {{"apply_flex_dispatcher_backend", [](const Expr& call) -> std::optional<std::vector<Expr>> {
             const Expr* backend = call.kwarg("moe_flex_dispatcher_backend");
             if (backend == nullptr && call.args.size() == 2) backend = &call.args[1];
             if (backend == nullptr || call.args.size() > 2) return std::nullopt;
             if (backend->kind != Expr::Kind::string) {
               if (python::plain_value(*backend) == "None") return std::vector<Expr>{};
               return std::nullopt;
             }
             if (backend->text != "deepep" && backend->text != "hybridep") return std::vector<Expr>{};
             std::vector<Expr> fields = {python::value_of("flex"), *backend, python::value_of("false")};
             fields[0].key = "moe_token_dispatcher_type";
             fields[1].key = "moe_flex_dispatcher_backend";
             fields[2].key = "moe_shared_expert_overlap";
             return fields;
           }}};
}

}  // namespace

MegatronCommand read_bridge_recipe(std::string_view text, const std::string& recipe, std::int64_t gpus,
                                   std::string_view where, const std::vector<std::string>& overrides,
                                   const BridgeModule& module) {
  constexpr std::string_view kPackage = "megatron.bridge.";
  python::Evaluator ev(
      text, std::string(where),
      [&](const std::string& name) -> std::optional<std::string> {
        if (!module || !name.starts_with(kPackage)) return std::nullopt;
        return module(name);
      },
      bridge_intrinsics(), bridge_effects());
  if (!ev.main().functions.contains(recipe)) {
    std::string names;
    for (const auto& [name, fn] : ev.main().functions)
      if (name.find("pretrain") != std::string::npos && name.ends_with("_config"))
        names += (names.empty() ? "" : ", ") + name;
    throw Error("--recipe " + recipe + ": no such function in " + std::string(where) +
                (names.empty() ? std::string() : " (its pre-training recipes: " + names + ")"));
  }
  if (recipe.find("pretrain") == std::string::npos)
    throw Error("--recipe " + recipe + ": headroom reads Megatron-Bridge's pre-training recipes (*_pretrain_*_config)");
  MegatronCommand out;
  // The world: --gpus, else the recipe's name's (llama3_8b_pretrain_2gpu_h100_bf16_config: 2).
  if (gpus <= 0) {
    const auto at = recipe.find("gpu_");
    std::size_t digits = at;
    while (digits != std::string::npos && digits > 0 && std::isdigit(static_cast<unsigned char>(recipe[digits - 1])))
      --digits;
    if (at == std::string::npos || digits == at || digits == 0 || recipe[digits - 1] != '_' || at - digits > 6)
      throw Error("--recipe " + recipe + ": its name gives no GPU count (_<N>gpu_): give --gpus");
    gpus = std::stoll(recipe.substr(digits, at - digits));
    if (gpus < 1) throw Error("--recipe " + recipe + ": its name's GPU count is not positive: give --gpus");
    out.notes.push_back("the world is the recipe's name's: " + std::to_string(gpus) + " GPUs (--gpus gives another)");
  }
  const Expr container = ev.call(recipe, {});
  for (const std::string& m : ev.followed()) out.notes.push_back("followed the recipe's calls into " + m);
  for (const std::string& c : ev.passed_over()) out.notes.push_back(passed_over_note(c));
  for (const std::string& c : ev.effects_applied())
    out.notes.push_back("applied " + c + " as on an NVIDIA Ampere, Hopper or Blackwell GPU, where it runs");
  if (container.kind != Expr::Kind::call || !container.text.ends_with("ConfigContainer"))
    throw Error(ev.where(container) + ": " + recipe + "() returns " + container.shown() +
                ", not the ConfigContainer(...) headroom reads");

  // The ConfigContainer's sections as Bridge's paths: each config's fields (model: the Hugging Face id too).
  Settings bridge;
  for (const Expr& section : container.kwargs) {
    const std::string& name = section.key;
    if (name == "model") {  // the Hugging Face id, then the fields set on the provider
      const Expr* receiver =
          section.kind == Expr::Kind::call && !section.args.empty() && section.args.front().key == python::kReceiver
              ? &section.args.front()
              : nullptr;
      if (receiver == nullptr ||
          (!section.text.ends_with(".get_model_config") && !section.text.ends_with(".to_megatron_provider")) ||
          receiver->text != "AutoBridge.from_hf_pretrained" || receiver->args.empty() ||
          receiver->args.front().kind != Expr::Kind::string)
        throw Error(ev.where(section) + ": model " + section.shown() +
                    ": headroom reads AutoBridge.from_hf_pretrained(\"<Hugging Face id>\").get_model_config() or "
                    ".to_megatron_provider()");
      bridge["model"] = {receiver->args.front(), ev.where(section)};
    }
    const bool whole = name == "mixed_precision" || name == "comm_overlap";  // read whole (None: no overlap)
    if (!whole && section.kind == Expr::Kind::call) {
      for (const Expr& set : section.kwargs) bridge[name + "." + set.key] = {set, ev.where(set)};
    } else if (!whole && python::plain_value(section) == "None") {
      out.ignored.push_back(name + " (None: not used)");  // ft, peft, tensor_inspect, ...
    } else {
      bridge[name] = {section, ev.where(section)};
    }
  }
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0 || o.find('.') > eq)
      throw Error("override " + o + ": expected section.field=value (run_recipe.py's)");
    Expr v = python::value_of(o.substr(eq + 1));
    v.file = -1;
    const std::string key = o.substr(0, eq), from = "override " + key;
    if (!override_field(bridge, "mixed_precision", key, v, from) &&
        !override_field(bridge, "comm_overlap", key, v, from))
      bridge[key] = {v, from};
  }

  // scripts/training/recipe_runner.py: an override of pp or vp without one of the layout rebuilds a recipe's layout
  // with its _pipeline_model_parallel_layout_builder, Python headroom does not run.
  const auto overridden = [&](const char* key) {
    const auto it = bridge.find(key);
    return it != bridge.end() && it->second.second.starts_with("override ");
  };
  if (const auto builder = bridge.find("model._pipeline_model_parallel_layout_builder");
      builder != bridge.end() && python::plain_value(builder->second.first) != "None" &&
      (overridden("model.pipeline_model_parallel_size") || overridden("model.virtual_pipeline_model_parallel_size")) &&
      !overridden("model.pipeline_model_parallel_layout"))
    throw Error(std::string(where) + ": " + recipe +
                "(): an override of pp or vp makes run_recipe.py rebuild the recipe's pipeline layout with " +
                builder->second.first.shown() +
                " (recipe_runner.py), which headroom does not run: give model.pipeline_model_parallel_layout=... with "
                "it");

  // Translated to NeMo 2.0's paths, or ignored with why; what was read is named by Bridge's path.
  Settings settings;
  std::map<std::string, std::string> bridge_path;  // NeMo's path -> Bridge's
  for (const auto& [key, entry] : bridge) {
    const Expr& value = entry.first;
    if (key == "model") {
      settings["model.config"] = entry;
      bridge_path["model.config"] = "model";
      continue;
    }
    const BridgePath* rule = text::key_rule(kBridgePaths, key);
    if (rule == nullptr)
      throw Error(entry.second + ": " + key + " " + value.shown() + ": not a setting headroom reads");
    if (!rule->why.empty()) {
      out.ignored.push_back(key + " (" + std::string(rule->why) + ")");
      continue;
    }
    std::string nemo(rule->nemo);
    if (nemo.ends_with('*')) {  // the rest of Bridge's path under NeMo's section
      nemo.pop_back();
      nemo += key.substr(rule->key.size() - 1);
    }
    bridge_path[nemo] = key;
    if (key == "mixed_precision") {
      settings[nemo] = {bridge_mixed_precision(value, entry.second), entry.second};
    } else if (key == "comm_overlap") {
      // CommOverlapConfig (megatron/bridge/training/comm_overlap.py) is NeMo's MegatronCommOverlapCallback's settings.
      Expr callbacks{Expr::Kind::list, "[...]", {}, {}, value.line, {}};
      if (value.kind == Expr::Kind::call && value.text.ends_with("CommOverlapConfig")) {
        Expr callback = value;
        callback.text = "run.Config";
        callback.args = {Expr{Expr::Kind::name, "MegatronCommOverlapCallback", {}, {}, value.line, {}}};
        callbacks.args.push_back(std::move(callback));
      } else if (python::plain_value(value) != "None") {
        throw Error(entry.second + ": comm_overlap " + value.shown() + ": headroom reads CommOverlapConfig(...)");
      }
      settings[nemo] = {callbacks, entry.second};
    } else {
      settings[nemo] = entry;
    }
  }
  // The world: --gpus, as nodes of 8 where it divides.
  const std::int64_t devices = gpus % 8 == 0 ? 8 : gpus, nodes = gpus / devices;
  settings["trainer.num_nodes"] = {python::value_of(std::to_string(nodes)), "--gpus"};
  settings["trainer.devices"] = {python::value_of(std::to_string(devices)), "--gpus"};
  (void)read_recipe_settings(settings, gpus, where, "give --gpus N", out, bridge_path);
  std::erase_if(out.read, [](const std::string& k) { return k == "trainer.num_nodes" || k == "trainer.devices"; });
  for (std::string& k : out.read)
    if (const auto it = bridge_path.find(k); it != bridge_path.end()) k = it->second;
  for (std::string& k : out.ignored)
    if (const auto it = bridge_path.find(k.substr(0, k.find(' '))); it != bridge_path.end())
      k = it->second + k.substr(k.find(' '));
  std::sort(out.read.begin(), out.read.end());
  std::sort(out.ignored.begin(), out.ignored.end());
  out.notes.insert(out.notes.begin(), "read as Megatron-Bridge recipe " + recipe + "() (its ConfigContainer), on " +
                                          std::to_string(gpus) + " GPUs (--gpus)");
  return out;
}

// NeMo 1.x's layout keys (nemo_layout_keys) under the paths NeMo 2.0 gives the same Megatron-core settings.
constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kRecipePaths = {{
    {"model.micro_batch_size", "data.micro_batch_size"},
    {"model.global_batch_size", "data.global_batch_size"},
    {"model.tensor_model_parallel_size", "trainer.strategy.tensor_model_parallel_size"},
    {"model.pipeline_model_parallel_size", "trainer.strategy.pipeline_model_parallel_size"},
    {"model.virtual_pipeline_model_parallel_size", "trainer.strategy.virtual_pipeline_model_parallel_size"},
    {"model.context_parallel_size", "trainer.strategy.context_parallel_size"},
    {"model.expert_model_parallel_size", "trainer.strategy.expert_model_parallel_size"},
    {"model.sequence_parallel", "trainer.strategy.sequence_parallel"},
    {"model.activations_checkpoint_granularity", "model.config.recompute_granularity"},
    {"model.activations_checkpoint_method", "model.config.recompute_method"},
    {"model.activations_checkpoint_num_layers", "model.config.recompute_num_layers"},
    {"model.recompute_modules", "model.config.recompute_modules"},
}};

std::vector<std::pair<std::string, std::string>> nemo_recipe_layout_keys(const Layout& l) {
  const auto python = [](const std::string& yaml) -> std::string {  // YAML's spellings as Python's
    if (yaml.starts_with('[')) {                                    // a flow sequence of names: a list of strings
      std::string list = "[\"";
      for (const char c : yaml.substr(1, yaml.size() - 2)) list += c == ',' ? std::string("\", \"") : std::string(1, c);
      return list + "\"]";
    }
    return yaml == "null" ? "None" : yaml == "true" ? "True" : yaml == "false" ? "False" : yaml;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : nemo_layout_keys(l))
    for (const auto& [nemo1, recipe] : kRecipePaths)
      if (key == nemo1) out.emplace_back(recipe, python(value));
  out.emplace_back("optim.config.use_distributed_optimizer", l.sharding.optimizer != Shard::none ? "True" : "False");
  // Megatron-FSDP's strategy (DistributedDataParallelConfig.data_parallel_sharding_strategy), read under it only.
  out.emplace_back(
      "trainer.strategy.ddp.data_parallel_sharding_strategy",
      "\"" + std::string(l.megatron_fsdp.enabled ? megatron_fsdp_strategy(l.sharding) : "optim_grads_params") + "\"");
  // The pipeline split, which NeMo 1.x's config has no keys for: MegatronStrategy's first/last stage counts and the
  // model config's layer layout.
  const PipelineSplit& x = l.split;
  const auto count = [](std::int64_t n) { return n > 0 ? std::to_string(n) : std::string("None"); };
  out.emplace_back("trainer.strategy.num_layers_in_first_pipeline_stage", count(x.first_stage_layers));
  out.emplace_back("trainer.strategy.num_layers_in_last_pipeline_stage", count(x.last_stage_layers));
  out.emplace_back("model.config.pipeline_model_parallel_layout",
                   x.layer_layout ? "\"" + x.layer_layout->text + "\"" : std::string("None"));
  return out;
}

std::vector<std::string> nemo_recipe_changes(const Layout& from, const Layout& to) {
  std::vector<std::string> out;
  const auto a = nemo_recipe_layout_keys(from), b = nemo_recipe_layout_keys(to);
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i].second != b[i].second) out.push_back(b[i].first + "=" + b[i].second + " (was " + a[i].second + ")");
  return out;
}

std::vector<std::string> bridge_recipe_changes(const Layout& from, const Layout& to) {
  std::vector<std::string> out;
  for (const std::string& change : nemo_recipe_changes(from, to)) {
    const std::string nemo = change.substr(0, change.find('='));
    // The Bridge path whose rule gives this NeMo path: an exact one first, then a section's (model.config.* is
    // model.*, optim.config.* optimizer.*).
    std::string bridge;
    for (const BridgePath& r : kBridgePaths)
      if (r.nemo == nemo) bridge = std::string(r.key);
    for (const BridgePath& r : kBridgePaths)
      if (bridge.empty() && r.nemo.ends_with('*') && nemo.starts_with(r.nemo.substr(0, r.nemo.size() - 1)))
        bridge = std::string(r.key.substr(0, r.key.size() - 1)) + nemo.substr(r.nemo.size() - 1);
    out.push_back((bridge.empty() ? nemo : bridge) + change.substr(nemo.size()));
  }
  return out;
}

}  // namespace headroom::calibrate
