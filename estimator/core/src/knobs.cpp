#include "headroom/core/knobs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "headroom/core/error.hpp"

namespace headroom {
namespace {

using enum KnobId;
using T = KnobType;

// Megatron-LM's argument names are megatron/training/arguments.py's; torchtitan's settings are read by their own
// reader (calibrate/ingest/src/torchtitan_log.cpp).
// One knob a row: a knob is added by adding its row (and pricing it).
// clang-format off
constexpr std::array<Knob, kKnobCount> kKnobs = {{
    {.id = tp, .name = "tp", .type = T::count, .default_text = "1", .unit = "GPUs",
     .flags = "--tp,--tensor-model-parallel-size", .help = "tensor parallel size t",
     .log_key = "tensor_model_parallel_size", .json = "layout.tp", .show_default = true},
    {.id = cp, .name = "cp", .type = T::count, .default_text = "1", .unit = "GPUs",
     .flags = "--cp,--context-parallel-size", .help = "context parallel size c", .log_key = "context_parallel_size",
     .json = "layout.cp", .show_default = true},
    {.id = pp, .name = "pp", .type = T::count, .default_text = "1", .unit = "stages",
     .flags = "--pp,--pipeline-model-parallel-size", .help = "pipeline parallel size p",
     .log_key = "pipeline_model_parallel_size", .json = "layout.pp", .show_default = true},
    {.id = vpp, .name = "vpp", .type = T::count, .default_text = "1", .unit = "virtual stages per GPU",
     .flags = "--vpp,--num-virtual-stages-per-pipeline-rank", .help = "virtual stages per GPU (interleaved 1F1B)",
     .log_key = "virtual_pipeline_model_parallel_size", .json = "layout.vpp", .show_default = true},
    {.id = decoder_first_pipeline_num_layers, .name = "decoder_first_pipeline_num_layers", .type = T::count,
     .default_text = "even split", .unit = "layers", .flags = "--decoder-first-pipeline-num-layers",
     .help = "decoder layers on the first pipeline stage (uneven stages; the middle ones share the rest)",
     .log_key = "decoder_first_pipeline_num_layers", .aliases = "first_stage_layers",
     .json = "layout.decoder_first_pipeline_num_layers"},
    {.id = decoder_last_pipeline_num_layers, .name = "decoder_last_pipeline_num_layers", .type = T::count,
     .default_text = "even split", .unit = "layers", .flags = "--decoder-last-pipeline-num-layers",
     .help = "decoder layers on the last pipeline stage (uneven stages)", .log_key = "decoder_last_pipeline_num_layers",
     .aliases = "last_stage_layers", .json = "layout.decoder_last_pipeline_num_layers"},
    {.id = account_for_embedding_in_pipeline_split, .name = "account_for_embedding_in_pipeline_split", .type = T::flag,
     .default_text = "false", .flags = "--account-for-embedding-in-pipeline-split",
     .help = "the embedding counts as a layer: (L+1)/p per stage, one decoder layer fewer on the first",
     .log_key = "account_for_embedding_in_pipeline_split", .json = "layout.account_for_embedding_in_pipeline_split"},
    {.id = account_for_loss_in_pipeline_split, .name = "account_for_loss_in_pipeline_split", .type = T::flag,
     .default_text = "false", .flags = "--account-for-loss-in-pipeline-split",
     .help = "the loss counts as a layer: one decoder layer fewer on the last stage",
     .log_key = "account_for_loss_in_pipeline_split", .json = "layout.account_for_loss_in_pipeline_split"},
    {.id = pipeline_model_parallel_layout, .name = "pipeline_model_parallel_layout", .type = T::text,
     .default_text = "the split above", .flags = "--pipeline-model-parallel-layout",
     .help = "each virtual stage's layers, Megatron-LM's string (E embedding, t decoder layer, m MTP layer, L loss; "
             "| ends a stage; (..)*n and t*n repeat): p*v stages, which set vpp",
     .log_key = "pipeline_model_parallel_layout", .json = "layout.pipeline_model_parallel_layout"},
    {.id = ep, .name = "ep", .type = T::count, .default_text = "1", .unit = "GPUs",
     .flags = "--ep,--expert-model-parallel-size", .help = "expert parallel size (models with experts)",
     .log_key = "expert_model_parallel_size", .json = "layout.ep", .show_default = true},
    {.id = etp, .name = "etp", .type = T::count, .default_text = "tp", .unit = "GPUs",
     .flags = "--etp,--expert-tensor-parallel-size", .help = "tensor parallel size of each expert (default: --tp)",
     .log_key = "expert_tensor_parallel_size", .json = "layout.etp"},
    {.id = moe_token_dispatcher_type, .name = "moe_token_dispatcher_type", .type = T::choice,
     .default_text = "alltoall", .flags = "--moe-token-dispatcher-type",
     .help = "alltoall (k copies per token) or flex (DeepEP/HybridEP: once per remote node)",
     .choices = "alltoall|flex", .log_key = "moe_token_dispatcher_type", .json = "layout.moe_token_dispatcher_type"},
    {.id = moe_expert_capacity_factor, .name = "moe_expert_capacity_factor", .type = T::number,
     .default_text = "dropless (1)", .unit = "of the mean load", .flags = "--moe-expert-capacity-factor",
     .help = "tokens an expert takes at most, over the mean (default: dropless, priced as balanced)", .min = 1,
     .max = 1e6, .log_key = "moe_expert_capacity_factor"},
    {.id = moe_shared_expert_overlap, .name = "moe_shared_expert_overlap", .type = T::flag, .default_text = "false",
     .flags = "--moe-shared-expert-overlap",
     .help = "the shared expert's GEMMs run beside the token dispatch and combine, hiding them (Megatron-LM; "
             "models with a shared expert)",
     .log_key = "moe_shared_expert_overlap", .json = "layout.moe_shared_expert_overlap"},
    {.id = mtp_num_layers, .name = "mtp_num_layers", .type = T::whole, .default_text = "0", .unit = "layers",
     .flags = "--mtp-num-layers",
     .help = "multi-token-prediction layers after the decoder, on the LM head's stage, each a decoder layer with its "
             "own projection, norms and loss over the shared head (Megatron-LM; RoPE models)",
     .log_key = "mtp_num_layers", .json = "layout.mtp_num_layers"},
    {.id = context_parallel_rotate_method, .name = "context_parallel_rotate_method", .type = T::choice,
     .default_text = "the framework's", .flags = "--context-parallel-rotate-method",
     .help = "how PyTorch's ring attention passes K and V under CP: allgather (all of them at the first step, behind "
             "its attention only; torchtitan's default) or alltoall (a ring, step by step)",
     .choices = "allgather|alltoall", .json = "layout.context_parallel_rotate_method"},
    {.id = cp_comm_type, .name = "cp_comm_type", .type = T::choice, .default_text = "p2p", .flags = "--cp-comm-type",
     .help = "how Transformer Engine's CP gets the other ranks' K and V: p2p (a ring behind attention), all_gather "
             "(before attention, exposed) or a2a (Ulysses all-to-alls of Q, K, V and the output over heads; heads "
             "divisible by t·c) (Megatron-LM)",
     .choices = "p2p|all_gather|a2a", .log_key = "cp_comm_type", .json = "layout.cp_comm_type"},
    {.id = precision, .name = "precision", .type = T::choice, .default_text = "bf16", .flags = "--precision",
     .help = "GEMM precision: bf16 (default) or fp8 (the decoder's linear layers)", .choices = "bf16|fp8",
     .json = "layout.precision"},
    {.id = fp8_format, .name = "fp8_format", .type = T::choice, .default_text = "none", .flags = "--fp8-format",
     .help = "Megatron-LM's FP8 format e4m3|hybrid (FP8 on, as --precision fp8)", .choices = "e4m3|hybrid",
     .log_key = "fp8"},
    {.id = fp8_recipe, .name = "fp8_recipe", .type = T::choice, .default_text = "the framework's first",
     .flags = "--fp8-recipe", .help = "FP8 scaling: delayed (Megatron-LM's default) or tensorwise (current)",
     .choices = "delayed|tensorwise", .log_key = "fp8_recipe", .json = "layout.fp8_recipe"},
    {.id = fp8_param_gather, .name = "fp8_param_gather", .type = T::flag, .default_text = "false",
     .flags = "--fp8-param-gather",
     .help = "weights kept in FP8 and all-gathered in FP8 (torchtitan: enable_fsdp_float8_all_gather)",
     .log_key = "fp8_param_gather", .json = "layout.fp8_param_gather"},
    {.id = first_last_layers_bf16, .name = "first_last_layers_bf16", .type = T::flag, .default_text = "false",
     .flags = "--first-last-layers-bf16",
     .help = "an FP8 run keeps its first and last decoder layers in BF16 (Megatron-LM; not with delayed scaling)",
     .log_key = "first_last_layers_bf16", .json = "layout.first_last_layers_bf16"},
    {.id = num_layers_at_start_in_bf16, .name = "num_layers_at_start_in_bf16", .type = T::whole, .default_text = "1",
     .unit = "layers", .flags = "--num-layers-at-start-in-bf16",
     .help = "the first decoder layers --first-last-layers-bf16 keeps in BF16", .log_key = "num_layers_at_start_in_bf16",
     .json = "layout.num_layers_at_start_in_bf16"},
    {.id = num_layers_at_end_in_bf16, .name = "num_layers_at_end_in_bf16", .type = T::whole, .default_text = "1",
     .unit = "layers", .flags = "--num-layers-at-end-in-bf16",
     .help = "the last decoder layers --first-last-layers-bf16 keeps in BF16", .log_key = "num_layers_at_end_in_bf16",
     .json = "layout.num_layers_at_end_in_bf16"},
    {.id = optimizer_cpu_offload, .name = "optimizer_cpu_offload", .type = T::flag, .default_text = "false",
     .flags = "--optimizer-cpu-offload", .help = "optimizer states and step on the CPU (Megatron-LM)",
     .log_key = "optimizer_cpu_offload"},
    {.id = optimizer_offload_fraction, .name = "optimizer_offload_fraction", .type = T::number,
     .default_text = "1 with optimizer_cpu_offload", .unit = "of the optimizer states",
     .flags = "--optimizer-offload-fraction",
     .help = "share of the optimizer offloaded, 0..1 (default 1 with --optimizer-cpu-offload)", .min = 0, .max = 1,
     .log_key = "optimizer_offload_fraction", .json = "layout.optimizer_offload_fraction"},
    {.id = overlap_cpu_optimizer_d2h_h2d, .name = "overlap_cpu_optimizer_d2h_h2d", .type = T::flag,
     .default_text = "false", .flags = "--overlap-cpu-optimizer-d2h-h2d",
     .help = "overlap the host copies with the CPU step", .log_key = "overlap_cpu_optimizer_d2h_h2d",
     .json = "layout.overlap_cpu_optimizer_d2h_h2d"},
    {.id = use_precision_aware_optimizer, .name = "use_precision_aware_optimizer", .type = T::flag,
     .default_text = "false", .flags = "--use-precision-aware-optimizer",
     .help = "Transformer Engine's FusedAdam keeps master weights and Adam moments in the --main-params-dtype and "
             "--exp-avg(-sq)-dtype formats (Megatron-LM; needs the distributed optimizer; with BF16 weights an FP32 "
             "master weight is kept as its 16-bit remainder)",
     .log_key = "use_precision_aware_optimizer", .json = "layout.use_precision_aware_optimizer"},
    {.id = main_grads_dtype, .name = "main_grads_dtype", .type = T::choice, .default_text = "fp32",
     .flags = "--main-grads-dtype",
     .help = "gradient buffer and DP reduction format: fp32|bf16 (bf16 needs --use-precision-aware-optimizer)",
     .choices = "fp32|bf16", .log_key = "main_grads_dtype", .json = "layout.main_grads_dtype"},
    {.id = main_params_dtype, .name = "main_params_dtype", .type = T::choice, .default_text = "fp32",
     .flags = "--main-params-dtype",
     .help = "master weight format: fp32|fp16 (fp16 needs --use-precision-aware-optimizer)", .choices = "fp32|fp16",
     .log_key = "main_params_dtype", .json = "layout.main_params_dtype"},
    {.id = exp_avg_dtype, .name = "exp_avg_dtype", .type = T::choice, .default_text = "fp32",
     .flags = "--exp-avg-dtype",
     .help = "Adam first moment format: fp32|fp16|bf16|fp8 (other than fp32 needs --use-precision-aware-optimizer)",
     .choices = "fp32|fp16|bf16|fp8", .log_key = "exp_avg_dtype", .json = "layout.exp_avg_dtype"},
    {.id = exp_avg_sq_dtype, .name = "exp_avg_sq_dtype", .type = T::choice, .default_text = "fp32",
     .flags = "--exp-avg-sq-dtype",
     .help = "Adam second moment format: fp32|fp16|bf16|fp8 (other than fp32 needs --use-precision-aware-optimizer)",
     .choices = "fp32|fp16|bf16|fp8", .log_key = "exp_avg_sq_dtype", .json = "layout.exp_avg_sq_dtype"},
    {.id = grad_reduce_in_bf16, .name = "grad_reduce_in_bf16", .type = T::flag, .default_text = "false",
     .flags = "--grad-reduce-in-bf16",
     .help = "gradients accumulated and reduced over DP in BF16 (Megatron-LM; default FP32 with BF16 weights)",
     .log_key = "grad_reduce_in_bf16", .json = "layout.grad_reduce_in_bf16"},
    {.id = fp16, .name = "fp16", .type = T::flag, .default_text = "false", .flags = "--fp16",
     .help = "FP16 weights and activations with loss scaling instead of BF16 (Megatron-LM's --fp16): FP16 gradients "
             "unless --accumulate-allreduce-grads-in-fp32, copied to FP32 for the optimizer step",
     .log_key = "fp16", .json = "layout.fp16"},
    {.id = accumulate_allreduce_grads_in_fp32, .name = "accumulate_allreduce_grads_in_fp32", .type = T::flag,
     .default_text = "false", .flags = "--accumulate-allreduce-grads-in-fp32",
     .help = "FP32 gradient buffer and DP reduction with --fp16 (Megatron-LM; always so with BF16 weights)",
     .log_key = "accumulate_allreduce_grads_in_fp32", .json = "layout.accumulate_allreduce_grads_in_fp32"},
    {.id = overlap_grad_reduce, .name = "overlap_grad_reduce", .type = T::flag, .default_text = "true",
     .flags = "--overlap-grad-reduce",
     .help = "DP gradient reduction behind the backward, bucket by bucket (Megatron-LM's DDP; what the framework's "
             "coefficients price)",
     .off_flags = "--no-overlap-grad-reduce",
     .off_help = "DP gradient reduction after the backward, exposed (Megatron-LM without --overlap-grad-reduce; NeMo's "
                 "ddp overlap_grad_reduce False)",
     .log_key = "overlap_grad_reduce", .json = "layout.overlap_grad_reduce"},
    {.id = overlap_param_gather, .name = "overlap_param_gather", .type = T::flag,
     .default_text = "overlap_grad_reduce's", .flags = "--overlap-param-gather",
     .help = "the distributed optimizer's parameter all-gather behind the next forward (Megatron-LM's; its "
             "arguments.py wants --overlap-grad-reduce with it)",
     .off_flags = "--no-overlap-param-gather",
     .off_help = "the distributed optimizer's parameter all-gather after the optimizer step, exposed",
     .log_key = "overlap_param_gather", .json = "layout.overlap_param_gather"},
    {.id = overlap_p2p_comm, .name = "overlap_p2p_comm", .type = T::flag, .default_text = "true", .flags = "",
     .help = "", .off_flags = "--no-overlap-p2p-communication",
     .off_help = "pipeline sends hold the stage (Megatron-LM overlaps them with the interleaved schedule by default)",
     .log_key = "overlap_p2p_comm", .json = "layout.overlap_p2p_comm"},
    {.id = tp_comm_overlap, .name = "tp_comm_overlap", .type = T::flag, .default_text = "false",
     .flags = "--tp-comm-overlap",
     .help = "TP all-gathers/reduce-scatters pipelined with their GEMMs (Megatron-LM, TransformerEngine " "userbuffers; needs sequence parallelism)",
     .log_key = "tp_comm_overlap", .json = "layout.tp_comm_overlap"},
    {.id = compile, .name = "compile", .type = T::flag, .default_text = "false", .flags = "--compile",
     .help = "torch.compile of each decoder block: Inductor fuses its elementwise ops (torchtitan's compile.enable; "
             "PyTorch frameworks only)",
     .log_key = "compile", .json = "layout.compile"},
    {.id = cpu_offloading_num_layers, .name = "cpu_offloading_num_layers", .type = T::whole, .default_text = "0",
     .unit = "layers", .flags = "--cpu-offloading-num-layers",
     .help = "decoder layers whose activations go to host memory (Megatron-LM; pp 1 only)",
     .log_key = "cpu_offloading_num_layers", .json = "layout.cpu_offloading_num_layers"},
    {.id = mbs, .name = "mbs", .type = T::count, .default_text = "1", .unit = "sequences",
     .flags = "--mbs,--micro-batch-size", .help = "micro-batch size b", .log_key = "micro_batch_size",
     .json = "layout.mbs", .show_default = true},
    {.id = gpus, .name = "gpus", .type = T::count, .default_text = "t·c·p·d", .unit = "GPUs",
     .flags = "--gpus,--num-gpus,--world-size", .help = "number of GPUs N (DP = N / (t·c·p))", .log_key = "world_size",
     .json = "layout.gpus"},
    {.id = dp, .name = "dp", .type = T::count, .default_text = "N / (t·c·p)", .unit = "GPUs",
     .flags = "--dp,--data-parallel-size", .help = "data parallel size d (instead of --gpus)", .json = "layout.dp"},
    {.id = gbs, .name = "gbs", .type = T::count, .default_text = "d·mbs·p", .unit = "sequences",
     .flags = "--gbs,--global-batch-size",
     .help = "global batch size in sequences (default: DP·mbs, times pp with a pipeline: pp micro-batches per "
             "pipeline, the fewest at which 1F1B holds its full p in flight)",
     .log_key = "global_batch_size", .json = "layout.gbs"},
    {.id = seq, .name = "seq", .type = T::count, .default_text = "required", .unit = "tokens",
     .flags = "--seq,--seq-length", .help = "sequence length s in tokens", .log_key = "seq_length",
     .json = "layout.seq"},
    {.id = lora_rank, .name = "lora_rank", .type = T::count, .default_text = "full training", .unit = "",
     .flags = "--lora-rank", .help = "LoRA adapters of rank r on frozen base weights (default: full training)",
     .json = "layout.lora.rank"},
    {.id = lora_targets, .name = "lora_targets", .type = T::list, .default_text = "q,k,v,o,gate,up,down",
     .flags = "--lora-targets", .help = "LoRA target projections: q,k,v,o,gate,up,down (default all)",
     .json = "layout.lora.targets"},
    {.id = recompute, .name = "recompute", .type = T::choice, .default_text = "the framework's",
     .flags = "--recompute,--recompute-granularity",
     .help = "activation recompute: none|selective|full|op (selective: Megatron-LM's, of the core attention or "
             "--recompute-modules; op: torchtitan's per-op selective checkpointing; default: the --framework profile's)",
     .choices = "none|selective|full|op", .log_key = "recompute_granularity", .json = "layout.recompute"},
    {.id = recompute_method, .name = "recompute_method", .type = T::choice, .default_text = "uniform",
     .flags = "--recompute-method",
     .help = "full recompute's layers: uniform|block|every (uniform: all, in groups of --recompute-num-layers; block: "
             "the first --recompute-num-layers of each model chunk; every: every N-th block, torchtitan's "
             "selective_ac_option N)",
     .choices = "uniform|block|every", .log_key = "recompute_method", .json = "layout.recompute_method"},
    {.id = recompute_num_layers, .name = "recompute_num_layers", .type = T::count, .default_text = "1",
     .unit = "layers", .flags = "--recompute-num-layers",
     .help = "the N of --recompute-method: layers per group (uniform), per chunk (block), or the stride (every)",
     .log_key = "recompute_num_layers", .json = "layout.recompute_num_layers"},
    {.id = recompute_modules, .name = "recompute_modules", .type = T::list, .default_text = "core_attn",
     .flags = "--recompute-modules",
     .help = "what selective recompute recomputes: core_attn,layernorm,mla_up_proj,mlp,moe,shared_experts,moe_act "
             "(Megatron-LM; needs --recompute selective)",
     .log_key = "recompute_modules", .json = "layout.recompute_modules"},
    {.id = schedule, .name = "schedule", .type = T::choice, .default_text = "the framework's", .flags = "--schedule",
     .help = "pipeline schedule: 1f1b|interleaved|gpipe|zero-bubble|zbv|looped-bfs (zero-bubble: torch's "
             "ScheduleInterleavedZeroBubble, weight-gradient passes in the fill and drain; zbv: its V-shaped "
             "ScheduleZBVZeroBubble, 2 chunks a rank; looped-bfs: its ScheduleLoopedBFS, every forward of a chunk "
             "before the next chunk's, GPipe's memory; default: the --framework profile's)",
     .choices = "1f1b|interleaved|gpipe|zero-bubble|zbv|looped-bfs", .json = "layout.schedule"},
    {.id = sequence_parallel, .name = "sequence_parallel", .type = T::flag, .default_text = "the framework's",
     .flags = "--sp,--sequence-parallel", .help = "sequence parallelism on", .off_flags = "--no-sp",
     .off_help = "sequence parallelism off", .log_key = "sequence_parallel", .aliases = "sp",
     .json = "layout.sequence_parallel"},
    {.id = flash_attention, .name = "flash_attention", .type = T::flag, .default_text = "the framework's",
     .flags = "--flash-attn,--use-flash-attn", .help = "FlashAttention on", .off_flags = "--no-flash-attn",
     .off_help = "attention without FlashAttention (stores the s² softmax)", .aliases = "flash_attn",
     .json = "layout.flash_attention"},
    {.id = attention_backend, .name = "attention_backend", .type = T::choice, .default_text = "the framework's",
     .flags = "--attention-backend",
     .help = "the attention kernels priced, by the device's curve of them: cudnn (cuDNN's fused attention: Transformer "
             "Engine's FusedAttention, Megatron-LM's --attention-backend fused) or flash2 (FlashAttention-2); default "
             "the framework's curve (data/perf attention_backend)",
     .choices = "cudnn|flash2", .json = "layout.attention_backend"},
    {.id = sharding, .name = "sharding", .type = T::text, .default_text = "the framework's", .flags = "--sharding",
     .help = "DP sharding of P/G/OS: ddp, zero1, zero2, zero3, fsdp, mics, hsdp, paro-XYZ or a code like NIG " "(default: the --framework profile's)",
     .json = "layout.sharding"},
    // Megatron-LM's Megatron-FSDP (megatron/core/distributed/fsdp; arguments.py _add_distributed_args): its sharding
    // strategy is the sharding knob (--data-parallel-sharding-strategy in a command).
    {.id = use_megatron_fsdp, .name = "use_megatron_fsdp", .type = T::flag, .default_text = "off",
     .flags = "--use-megatron-fsdp",
     .help = "Megatron-FSDP for data parallelism: parameters, gradients and optimizer states sharded per decoder layer "
             "as --sharding says (zero3 by default, Megatron-LM's optim_grads_params), gathered and reduced layer by "
             "layer (Megatron-LM)",
     .log_key = "use_megatron_fsdp", .json = "layout.use_megatron_fsdp"},
    {.id = fsdp_double_buffer, .name = "fsdp_double_buffer", .type = T::flag, .default_text = "off",
     .flags = "--fsdp-double-buffer",
     .help = "Megatron-FSDP's persistent double buffers: two layers' gathered parameters and two layers' gradients "
             "held for the whole step, no prefetch beyond the next layer (on with --use-nccl-ub)",
     .log_key = "fsdp_double_buffer", .json = "layout.fsdp_double_buffer"},
    {.id = suggested_communication_unit_size, .name = "suggested_communication_unit_size", .type = T::count,
     .default_text = "Megatron-FSDP's: 2 layers, at least 10^9", .unit = "elements",
     .flags = "--suggested-communication-unit-size",
     .help = "Megatron-FSDP's all-gather prefetch (half of it) and reduce-scatter queue (all of it), elements",
     .log_key = "suggested_communication_unit_size", .json = "layout.suggested_communication_unit_size"},
    {.id = megatron_fsdp_main_grads_dtype, .name = "megatron_fsdp_main_grads_dtype", .type = T::choice,
     .default_text = "auto", .flags = "--megatron-fsdp-main-grads-dtype",
     .help = "Megatron-FSDP's gradient buffer and reduction format: auto (the weights', BF16)|fp32|bf16",
     .choices = "auto|fp32|bf16", .log_key = "megatron_fsdp_main_grads_dtype",
     .json = "layout.megatron_fsdp_main_grads_dtype"},
    // DeepSpeed's ZeRO settings, as its ds_config.json names them (deepspeed/runtime/zero/config.py); defaults in
    // data/frameworks/deepspeed.json.
    {.id = overlap_comm, .name = "overlap_comm", .type = T::flag, .default_text = "DeepSpeed's: on at ZeRO-3",
     .flags = "--overlap-comm",
     .help = "DeepSpeed ZeRO-2/3 reduce gradients on their own stream during the backward (zero_optimization."
             "overlap_comm)",
     .off_flags = "--no-overlap-comm", .off_help = "DeepSpeed ZeRO-2/3 reduce gradients on the compute stream",
     .json = "layout.overlap_comm"},
    {.id = reduce_bucket_size, .name = "reduce_bucket_size", .type = T::whole, .default_text = "DeepSpeed's 5e8",
     .unit = "elements", .flags = "--reduce-bucket-size",
     .help = "DeepSpeed ZeRO-2/3 gradient bucket, elements (zero_optimization.reduce_bucket_size)",
     .json = "layout.reduce_bucket_size"},
    {.id = stage3_prefetch_bucket_size, .name = "stage3_prefetch_bucket_size", .type = T::whole,
     .default_text = "DeepSpeed's 5e7", .unit = "parameters", .flags = "--stage3-prefetch-bucket-size",
     .help = "DeepSpeed ZeRO-3 parameters all-gathered ahead of use (zero_optimization.stage3_prefetch_bucket_size)",
     .json = "layout.stage3_prefetch_bucket_size"},
    {.id = stage3_max_live_parameters, .name = "stage3_max_live_parameters", .type = T::whole,
     .default_text = "DeepSpeed's 1e9", .unit = "parameters", .flags = "--stage3-max-live-parameters",
     .help = "DeepSpeed ZeRO-3 gathered parameters beyond which none is prefetched "
             "(zero_optimization.stage3_max_live_parameters)",
     .json = "layout.stage3_max_live_parameters"},
    {.id = stage3_max_reuse_distance, .name = "stage3_max_reuse_distance", .type = T::whole,
     .default_text = "DeepSpeed's 1e9", .unit = "parameters", .flags = "--stage3-max-reuse-distance",
     .help = "DeepSpeed ZeRO-3 keeps a gathered parameter used again within this many parameters "
             "(zero_optimization.stage3_max_reuse_distance)",
     .json = "layout.stage3_max_reuse_distance"},
    {.id = zero_hpz_partition_size, .name = "zero_hpz_partition_size", .type = T::count, .default_text = "1 (none)",
     .unit = "GPUs", .flags = "--zero-hpz-partition-size",
     .help = "DeepSpeed ZeRO++ hpZ: a second BF16 parameter shard over the node's DP ranks, from which the backward "
             "gathers (zero_optimization.zero_hpz_partition_size; ZeRO-3)",
     .json = "layout.zero_hpz_partition_size"},
    {.id = fsdp_mixed_precision, .name = "fsdp_mixed_precision", .type = T::flag,
     .default_text = "off: a BF16 model throughout", .flags = "--fsdp-mixed-precision",
     .help = "PyTorch FSDP's MixedPrecision(param_dtype=bf16, reduce_dtype=bf16) over an FP32 model (llm-foundry, "
             "fms-fsdp, Accelerate's bf16): FP32 sharded parameters, gradients and AdamW moments, 16 B a parameter "
             "of the shard, gathered and reduced in BF16; off, the model is BF16 throughout (8 B) (pytorch-fsdp)",
     .json = "layout.fsdp_mixed_precision"},
}};
// clang-format on

constexpr bool in_id_order() {
  for (std::size_t i = 0; i < kKnobs.size(); ++i)
    if (static_cast<std::size_t>(kKnobs[i].id) != i) return false;
  return true;
}
static_assert(in_id_order(), "kKnobs lists the knobs in KnobId order");

bool listed(std::string_view list, std::string_view name, char separator) {
  while (!list.empty()) {
    const auto cut = list.find(separator);
    if (list.substr(0, cut) == name) return true;
    if (cut == std::string_view::npos) break;
    list.remove_prefix(cut + 1);
  }
  return false;
}

std::string lowered(std::string_view text) {
  std::string s(text);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A value as errors show it: quoted, and cut where it is long.
std::string shown(std::string_view text) {
  std::string out(1, '\'');
  out.append(text.substr(0, 40));
  out.append(text.size() > 40 ? "...'" : "'");
  return out;
}

std::string number_range_error(const Knob& k, const std::string& value) {
  char range[64];
  std::snprintf(range, sizeof range, " must be a number from %g to %g", k.min, k.max);
  return field(k.name) + " " + value + range + (k.unit.empty() ? "" : " (" + std::string(k.unit) + ")");
}

}  // namespace

std::int64_t parse_integer(std::string_view who, std::string_view text, std::int64_t min) {
  const std::string expected =
      min == 0 ? " (expected an integer from 0 to 10^12)" : " (expected a positive integer up to 10^12)";
  const std::string_view digits = !text.empty() && text.front() == '+' ? text.substr(1) : text;
  const bool all_digits =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (text.empty()) throw Error(std::string(who) + " is empty" + expected);
  if (!all_digits) {
    const bool negative = text.front() == '-';
    throw Error(std::string(who) + " " + shown(text) + (negative ? " must not be negative" : " is not an integer") +
                expected);
  }
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || value > kMaxInteger)
    throw Error(std::string(who) + " " + shown(text) + " is too large" + expected);
  if (value < min) throw Error(std::string(who) + " " + shown(text) + " must be positive" + expected);
  return value;
}

const std::array<Knob, kKnobCount>& knobs() { return kKnobs; }

const Knob& knob(KnobId id) { return kKnobs[static_cast<std::size_t>(id)]; }

const Knob* find_knob(std::string_view name) {
  // Every name and alias, hashed once (the Python keywords look one up per keyword per call).
  static const std::unordered_map<std::string_view, const Knob*> by_name = [] {
    std::unordered_map<std::string_view, const Knob*> m;
    for (const Knob& k : kKnobs) {
      m.emplace(k.name, &k);
      for (std::string_view rest = k.aliases; !rest.empty();) {
        const std::size_t comma = rest.find(',');
        m.emplace(rest.substr(0, comma), &k);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
    }
    return m;
  }();
  const auto it = by_name.find(name);
  return it == by_name.end() ? nullptr : it->second;
}

std::string_view knob_metavar(const Knob& k) {
  switch (k.type) {
    case KnobType::count:
    case KnobType::whole: return "INT";
    case KnobType::number: return "NUMBER";
    case KnobType::choice: return k.choices;
    case KnobType::list: return "LIST";
    case KnobType::text: return "NAME|CODE";
    case KnobType::flag: break;
  }
  return "";
}

KnobValue check_knob(const Knob& k, KnobValue v) {
  const auto name = [&k] { return field(k.name); };  // built only for an error
  switch (k.type) {
    case KnobType::count:
    case KnobType::whole: {
      const auto* i = std::get_if<std::int64_t>(&v);
      if (i == nullptr) break;
      const std::int64_t min = k.type == KnobType::whole ? 0 : 1;
      if (*i < min || *i > kMaxInteger)
        throw Error(
            name() + " " + std::to_string(*i) +
            (min == 0 ? " must be an integer from 0 to 10^12" : " must be a positive integer of at most 10^12"));
      return v;
    }
    case KnobType::flag:
      if (std::holds_alternative<bool>(v)) return v;
      break;
    case KnobType::number: {
      const auto* x = std::get_if<double>(&v);
      if (x == nullptr) break;
      if (!std::isfinite(*x) || *x < k.min || *x > k.max) {
        char text[32];
        std::snprintf(text, sizeof text, "%g", *x);
        throw Error(number_range_error(k, text));
      }
      return v;
    }
    case KnobType::choice: {
      const auto* t = std::get_if<std::string>(&v);
      if (t == nullptr) break;
      std::string low = lowered(*t);
      if (!listed(k.choices, low, '|'))
        throw Error(name() + " " + shown(*t) + " is not priced (valid: " + std::string(k.choices) + ")");
      return low;
    }
    case KnobType::list:
    case KnobType::text: {
      const auto* t = std::get_if<std::string>(&v);
      if (t == nullptr) break;
      if (t->empty()) throw Error(name() + " is empty");
      return v;
    }
  }
  throw Error(name() + " has a value of the wrong kind");
}

KnobValue parse_knob(const Knob& k, std::string_view text) {
  switch (k.type) {
    case KnobType::count:
    case KnobType::whole: return parse_integer(field(k.name), text, k.type == KnobType::whole ? 0 : 1);
    case KnobType::flag: {
      const std::string t = lowered(text);
      if (t == "true" || t == "1") return true;
      if (t == "false" || t == "0") return false;
      throw Error(field(k.name) + " " + shown(text) + " is not true or false");
    }
    case KnobType::number: {
      double value = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || ec != std::errc() || ptr != text.data() + text.size())
        throw Error(field(k.name) + " " + shown(text) + " is not a number");
      if (!std::isfinite(value) || value < k.min || value > k.max) throw Error(number_range_error(k, shown(text)));
      return value;
    }
    case KnobType::choice:
    case KnobType::list:
    case KnobType::text: return check_knob(k, std::string(text));
  }
  return std::string(text);
}

std::string knob_text(const KnobValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&v)) {
    char text[32];  // the shortest text that reads back as the same double
    const auto [end, ec] = std::to_chars(text, text + sizeof text, *d);
    return {text, end};
  }
  return std::get<std::string>(v);
}

}  // namespace headroom
