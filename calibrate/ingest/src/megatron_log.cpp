// Megatron-LM training logs: the arguments block, the iteration lines and the memory reports.
#include "headroom/ingest/measured_runs.hpp"

#include <algorithm>
#include <iterator>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "megatron_args.hpp"
#include "text.hpp"

namespace headroom::calibrate {

using text::lines_of;
using text::lower;
using text::measurement_after;
using text::number_after;
using text::out_of_memory;
using text::steady_state;
using text::trim;

// ---- Megatron-LM ----------------------------------------------------------------------------------------

namespace {

// The arguments block of megatron/training/arguments.py (_print_args): "  name ......... value" between
// "---- arguments ----" and "---- end of arguments ----"; launchers may prefix every line ("[rank0]: ").
std::map<std::string, std::string> megatron_arguments(const std::vector<std::string_view>& lines,
                                                      std::string_view where) {
  std::map<std::string, std::string> args;
  bool inside = false, found = false;
  for (const auto line : lines) {
    if (line.find("end of arguments") != std::string_view::npos) {
      inside = false;
      continue;
    }
    if (line.find(" arguments ---") != std::string_view::npos) {
      inside = found = true;
      continue;
    }
    if (!inside) continue;
    const auto dots = line.find(" ..");
    if (dots == std::string_view::npos) continue;
    const auto head = trim(line.substr(0, dots));
    const auto name =
        head.substr(head.find_last_of(" \t]") == std::string_view::npos ? 0 : head.find_last_of(" \t]") + 1);
    auto v = dots + 1;
    while (v < line.size() && line[v] == '.') ++v;
    args[std::string(name)] = std::string(trim(line.substr(v)));
  }
  if (!found)
    throw Error(std::string(where) + ": no Megatron-LM arguments block ('---- arguments ----'): the layout is unknown");
  return args;
}

std::optional<std::string> arg(const std::map<std::string, std::string>& args, const std::string& name) {
  const auto it = args.find(name);
  if (it == args.end() || it->second == "None" || it->second.empty()) return std::nullopt;
  return it->second;
}

std::int64_t int_arg(const std::map<std::string, std::string>& args, const std::string& name, std::string_view where) {
  const auto v = arg(args, name);
  if (!v) throw Error(std::string(where) + ": the arguments block has no " + name);
  std::int64_t x = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
  if (ec != std::errc() || p != v->data() + v->size() || x <= 0)
    throw Error(std::string(where) + ": " + name + " '" + *v + "' is not a positive integer");
  return x;
}

bool flag_arg(const std::map<std::string, std::string>& args, const std::string& name) {
  const auto v = arg(args, name);
  return v && *v == "True";
}

// " > padded vocab (size: 50257) with 431 dummy tokens (new size: 50688)" (megatron/training/tokenizer).
std::optional<std::int64_t> padded_vocab(const std::vector<std::string_view>& lines) {
  for (const auto line : lines)
    if (line.find("padded vocab") != std::string_view::npos)
      if (const auto v = number_after(line, "(new size:")) return static_cast<std::int64_t>(*v);
  return std::nullopt;
}

// The experts and latent attention of a Megatron-LM run (arguments.py names; moe_ffn_hidden_size defaults to
// ffn_hidden_size there, moe_layer_freq 1 or a list of leading 0s then 1s); anything else is refused naming it.
void megatron_experts(const std::map<std::string, std::string>& args, ModelSpec& m, std::string_view where) {
  const std::string w(where);
  if (arg(args, "num_experts")) {
    m.num_experts = int_arg(args, "num_experts", where);
    m.moe_router_topk = int_arg(args, "moe_router_topk", where);
    m.moe_ffn_hidden_size =
        arg(args, "moe_ffn_hidden_size") ? int_arg(args, "moe_ffn_hidden_size", where) : m.ffn_hidden_size;
    if (arg(args, "moe_shared_expert_intermediate_size"))
      m.shared_expert_ffn_hidden_size = int_arg(args, "moe_shared_expert_intermediate_size", where);
    m.shared_expert_gate = flag_arg(args, "moe_shared_expert_gate");
    // Group-limited routing (transformer_config.py): the groups count only with a group top-k, which needs them.
    if (arg(args, "moe_router_group_topk")) {
      m.moe_router_group_topk = int_arg(args, "moe_router_group_topk", where);
      m.moe_router_num_groups = int_arg(args, "moe_router_num_groups", where);
    }
    const std::string freq = arg(args, "moe_layer_freq").value_or("1");
    if (freq != "1") {  // "[0, 0, 0, 1, 1, ...]": leading dense layers only
      std::int64_t dense = 0, moe = 0;
      bool ok = freq.size() >= 2 && freq.front() == '[' && freq.back() == ']';
      for (const char c : freq.substr(1, freq.size() - 2)) {
        if (c == '0' && moe == 0)
          ++dense;
        else if (c == '1')
          ++moe;
        else if (c != ',' && c != ' ')
          ok = false;
      }
      if (!ok || dense + moe != m.num_layers)
        throw Error(w + ": moe_layer_freq " + freq.substr(0, 60) +
                    ": only leading dense layers then experts on every layer are priced");
      m.first_dense_layers = dense;
    }
  }
  if (flag_arg(args, "multi_latent_attention")) {
    m.q_lora_rank = arg(args, "q_lora_rank") ? int_arg(args, "q_lora_rank", where) : 0;
    m.kv_lora_rank = int_arg(args, "kv_lora_rank", where);
    m.qk_nope_head_dim = int_arg(args, "qk_head_dim", where);
    m.qk_rope_head_dim = int_arg(args, "qk_pos_emb_head_dim", where);
    m.v_head_dim = int_arg(args, "v_head_dim", where);
    m.head_dim = 0;
  }
}

}  // namespace

// Sliding-window attention: --window-size (left, right) is Transformer Engine's window, a query attending to the
// `left` keys before it and itself (right 0 under the causal mask; left -1: no limit), written "4096,0" on a command
// and "(4096, 0)" in a log (arguments.py tuple_type); --window-attn-skip-freq N makes every N-th layer attend fully
// (megatron/core/transformer/utils.py is_layer_window_attention). A list pattern of full layers is refused.
void megatron_window(const std::map<std::string, std::string>& args, ModelSpec& m, std::string_view where) {
  const auto window = arg(args, "window_size");
  if (!window || *window == "None") return;
  const auto integer = [](std::string_view s) -> std::optional<std::int64_t> {
    std::int64_t x = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return x;
  };
  const std::string w(where);
  std::string sides;  // "left,right" without the parentheses and spaces of a log's tuple
  std::copy_if(window->begin(), window->end(), std::back_inserter(sides),
               [](char c) { return c != '(' && c != ')' && c != ' '; });
  const std::size_t comma = sides.find(',');
  const auto left = comma == std::string::npos ? std::nullopt : integer(std::string_view(sides).substr(0, comma));
  const auto right = comma == std::string::npos ? std::nullopt : integer(std::string_view(sides).substr(comma + 1));
  if (!left || !right || *left < -1 || *right < -1)
    throw Error(w + ": window_size " + *window + ": not two integers (left, right), each -1 or more");
  if (*right != 0)
    throw Error(w + ": window_size " + *window + ": a window reaching " + std::to_string(*right) +
                " keys ahead is not priced (valid: right 0, the causal mask's)");
  if (*left < 0) return;  // no limit to the left: full causal attention
  m.sliding_window = *left + 1;
  const std::string freq = arg(args, "window_attn_skip_freq").value_or("None");
  if (freq == "None") return;
  const auto n = integer(freq);
  if (!n || *n <= 0)
    throw Error(w + ": window_attn_skip_freq " + freq.substr(0, 60) +
                ": only every N-th layer attending fully is priced (valid: a positive integer)");
  if (*n == 1)
    m.sliding_window = 0;  // every layer attends fully
  else
    m.window_skip_freq = *n;
}

namespace {

// The model of a Megatron-LM GPT run from its arguments (megatron/training/arguments.py names).
std::optional<ModelSpec> megatron_model(const std::map<std::string, std::string>& args,
                                        const std::vector<std::string_view>& lines, std::string_view where) {
  ModelSpec m;
  m.name = "megatron-args";
  m.hidden_size = int_arg(args, "hidden_size", where);
  m.num_layers = int_arg(args, "num_layers", where);
  m.num_heads = int_arg(args, "num_attention_heads", where);
  m.num_kv_heads = flag_arg(args, "group_query_attention") ? int_arg(args, "num_query_groups", where) : m.num_heads;
  m.ffn_hidden_size = int_arg(args, "ffn_hidden_size", where);
  // arguments.py sets kv_channels to hidden_size / heads when it is not given; another value is the head width.
  if (const auto kv = arg(args, "kv_channels"); kv && *kv != "None") {
    m.head_dim = int_arg(args, "kv_channels", where);
    if (m.head_dim * m.num_heads == m.hidden_size) m.head_dim = 0;
  }
  const auto vocab = padded_vocab(lines);
  if (vocab)
    m.vocab_size = *vocab;
  else if (arg(args, "padded_vocab_size"))
    m.vocab_size = int_arg(args, "padded_vocab_size", where);
  else if (arg(args, "vocab_size"))
    m.vocab_size = int_arg(args, "vocab_size", where);
  else
    return std::nullopt;  // the tokenizer's size is not in the log: the row needs a model column
  m.max_context = arg(args, "max_position_embeddings") ? int_arg(args, "max_position_embeddings", where)
                                                       : int_arg(args, "seq_length", where);
  m.tied_embeddings = !flag_arg(args, "untie_embeddings_and_output_weights");
  m.norm = arg(args, "normalization").value_or("LayerNorm") == "RMSNorm" ? Norm::rmsnorm : Norm::layernorm;
  // argument_utils.py: --quick-geglu is a gated MLP of quick_gelu, priced as a GeGLU.
  m.mlp = flag_arg(args, "swiglu")         ? Mlp::swiglu
          : flag_arg(args, "squared_relu") ? Mlp::relu2
          : flag_arg(args, "quick_geglu")  ? Mlp::geglu
                                           : Mlp::gelu;
  m.linear_biases = arg(args, "add_bias_linear").value_or("True") == "True";
  m.qkv_bias = arg(args, "add_qkv_bias").value_or("False") == "True";
  // arguments.py: --no-position-embedding (add_position_embedding False) drops the learned table. GPTModel takes
  // learned_absolute, rope, mrope, yarn or none (gpt_model.py): the rotations have no weights and price as RoPE;
  // relative (T5's learned buckets) is not GPT's.
  const std::string positions = arg(args, "position_embedding_type").value_or("learned_absolute");
  if (positions != "learned_absolute" && positions != "rope" && positions != "mrope" && positions != "yarn" &&
      positions != "none" && positions != "alibi")
    throw Error(std::string(where) + ": position_embedding_type " + positions.substr(0, 40) +
                " is not priced (valid: learned_absolute, rope, mrope, yarn, none)");
  m.learned_positions =
      positions == "learned_absolute" && arg(args, "add_position_embedding").value_or("True") == "True";
  m.alibi = positions == "alibi";  // Megatron-DeepSpeed's BLOOM fork (megatron_deepspeed_arguments)
  m.embedding_norm = flag_arg(args, "embed_layernorm");
  m.qk_norm = arg(args, "qk_layernorm").value_or("False") == "True";
  // transformer_config.py softmax_type: vanilla; off-by-one adds 1 to each softmax's denominator (no parameters);
  // learnable adds a logit per head (gpt-oss's sinks).
  const std::string softmax = arg(args, "softmax_type").value_or("vanilla");
  if (softmax != "vanilla" && softmax != "off-by-one" && softmax != "learnable")
    throw Error(std::string(where) + ": softmax_type '" + softmax.substr(0, 40) +
                "' (valid: vanilla, off-by-one, learnable)");
  m.attention_sinks = softmax == "learnable";
  // Dropout on the attention probabilities stores its mask and output (memory.cpp); arguments.py's default is 0.1.
  if (const auto p = arg(args, "attention_dropout")) {
    const double x = std::strtod(p->c_str(), nullptr);
    if (!(x >= 0.0 && x < 1.0)) throw Error(std::string(where) + ": attention_dropout '" + *p + "' is not in [0, 1)");
    m.attention_dropout = x;
  }
  // Dropout on the residual stream and the embeddings stores a mask each (memory.cpp); arguments.py's default is 0.1.
  if (const auto p = arg(args, "hidden_dropout")) {
    const double x = std::strtod(p->c_str(), nullptr);
    if (!(x >= 0.0 && x < 1.0)) throw Error(std::string(where) + ": hidden_dropout '" + *p + "' is not in [0, 1)");
    m.hidden_dropout = x;
  }
  megatron_experts(args, m, where);
  megatron_window(args, m, where);
  check_model_shape(m, where);
  return m;
}

// Whether a knob Megatron-LM prints whatever the run does means something in this run: the experts' only with
// experts, FP8's only with an FP8 format, the optimizer offload's only with --optimizer-cpu-offload, the activation
// offload's only with --cpu-offloading, the recompute method's only with full recompute, the DDP overlaps only under
// Megatron-LM's own DDP (not DeepSpeed's engine), the parameter gather's only with the distributed optimizer, FP16's
// gradient format only with --fp16 (arguments.py prints them all, with their defaults).
bool megatron_knob_applies(KnobId id, const std::map<std::string, std::string>& args) {
  switch (id) {
    case KnobId::ep:
    case KnobId::etp:
    case KnobId::moe_token_dispatcher_type:
    case KnobId::moe_expert_capacity_factor:
    case KnobId::moe_shared_expert_overlap: return arg(args, "num_experts").has_value();
    case KnobId::fp8_recipe:
    case KnobId::fp8_param_gather:
    case KnobId::first_last_layers_bf16: return arg(args, "fp8").has_value();
    // TransformerConfig's counts (printed with their default 1) count only with --first-last-layers-bf16.
    case KnobId::num_layers_at_start_in_bf16:
    case KnobId::num_layers_at_end_in_bf16:
      return arg(args, "fp8").has_value() && flag_arg(args, "first_last_layers_bf16");
    case KnobId::optimizer_offload_fraction:
    case KnobId::overlap_cpu_optimizer_d2h_h2d: return flag_arg(args, "optimizer_cpu_offload");
    case KnobId::cpu_offloading_num_layers: return flag_arg(args, "cpu_offloading");
    case KnobId::recompute_method:
    case KnobId::recompute_num_layers:
      return arg(args, "recompute_granularity") == "full" && arg(args, "recompute_method").has_value();
    // BF16 runs print fp16 False and accumulate_allreduce_grads_in_fp32 True (arguments.py forces it): BF16's defaults.
    case KnobId::fp16:
    case KnobId::accumulate_allreduce_grads_in_fp32: return flag_arg(args, "fp16");
    case KnobId::cp_comm_type: {
      const auto cp = arg(args, "context_parallel_size");
      return cp && *cp != "1";
    }
    // transformer_layer.py reads the modules under selective recompute only; None is its default, core_attn.
    case KnobId::recompute_modules:
      return arg(args, "recompute_granularity") == "selective" && arg(args, "recompute_modules") != "None";
    // Megatron-FSDP's settings, printed with their defaults whether it runs or not.
    case KnobId::fsdp_double_buffer:
    case KnobId::suggested_communication_unit_size:
    case KnobId::megatron_fsdp_main_grads_dtype: return flag_arg(args, "use_megatron_fsdp");
    case KnobId::overlap_grad_reduce: return !flag_arg(args, "deepspeed");
    case KnobId::overlap_param_gather:
      return !flag_arg(args, "deepspeed") && flag_arg(args, "use_distributed_optimizer");
    default: return true;
  }
}

// Megatron-DeepSpeed's ZeRO stage: DeepSpeed's own print of its config ("zero_optimization_stage ....... 1",
// runtime/config.py DeepSpeedConfig.print) where the log has it, else the --zero-stage argument (its default 1.0).
std::optional<std::int64_t> zero_stage(const std::map<std::string, std::string>& args,
                                       const std::vector<std::string_view>& lines, std::string_view where) {
  for (const auto line : lines)
    if (const auto at = line.find("zero_optimization_stage "); at != std::string_view::npos) {
      auto v = line.find_first_not_of(". ", at + 24);
      if (v != std::string_view::npos && line[v] >= '0' && line[v] <= '3') return line[v] - '0';
    }
  const auto v = arg(args, "zero_stage");
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0' || !(x == 0 || x == 1 || x == 2 || x == 3))
    throw Error(std::string(where) + ": zero_stage '" + *v + "' (valid: 0, 1, 2, 3)");
  return static_cast<std::int64_t>(x);
}

// The run's knobs from the arguments block: each knob's log_key (knobs.hpp), as printed; then what arguments.py
// derives or defaults differently.
std::map<std::string, std::string> megatron_layout(const std::map<std::string, std::string>& args,
                                                   const std::vector<std::string_view>& lines, std::string_view where) {
  std::map<std::string, std::string> l;
  l["framework"] = "megatron";
  for (const Knob& k : knobs()) {
    if (k.log_key.empty() || !megatron_knob_applies(k.id, args)) continue;
    const auto v = arg(args, std::string(k.log_key));
    if (v)
      l[std::string(k.name)] =
          k.type == KnobType::flag && (*v == "True" || *v == "False") ? lower(*v) : text::dtype_name(*v);
  }
  for (const char* required : {"world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
                               "context_parallel_size", "micro_batch_size", "global_batch_size", "seq_length"})
    (void)int_arg(args, required, where);
  if (!arg(args, "virtual_pipeline_model_parallel_size") && arg(args, "num_layers_per_virtual_pipeline_stage"))
    l["vpp"] =
        std::to_string(int_arg(args, "num_layers", where) / int_arg(args, "pipeline_model_parallel_size", where) /
                       int_arg(args, "num_layers_per_virtual_pipeline_stage", where));
  // recompute_granularity None is no recompute, whatever the framework profile's default.
  if (!l.contains("recompute")) l["recompute"] = "none";
  // arguments.py's default dispatcher is allgather, which headroom does not price (the knob's check says so).
  if (arg(args, "num_experts") && !arg(args, "moe_token_dispatcher_type")) l["moe_token_dispatcher_type"] = "allgather";
  // --cp-comm-type (nargs '+', printed as a list: ['p2p']): one type for every layer is the knob's; a list of several
  // stays as printed, which the knob refuses (per-layer types are not priced).
  if (const auto c = l.find("cp_comm_type"); c != l.end() && c->second.starts_with("['") && c->second.ends_with("']") &&
                                             c->second.find(',') == std::string::npos)
    c->second = c->second.substr(2, c->second.size() - 4);
  // --recompute-modules (nargs '*', printed as a list: ['moe', 'layernorm']; a command's as its words): the knob's
  // list; an empty one recomputes nothing.
  if (const auto r = l.find("recompute_modules"); r != l.end()) {
    std::string names;
    for (const std::string& name : text::list_items(r->second)) names += (names.empty() ? "" : ",") + name;
    if (names.empty()) {
      l.erase(r);
      l["recompute"] = "none";
    } else {
      r->second = names;
    }
  }
  // --moe-layer-recompute, deprecated (transformer_config.py __post_init__): selective recompute with moe added to its
  // modules (the core attention's by default); refused with full recompute as there.
  if (flag_arg(args, "moe_layer_recompute")) {
    if (arg(args, "recompute_granularity") == "full")
      throw Error(std::string(where) +
                  ": --moe-layer-recompute with --recompute-granularity full (Megatron-LM refuses it)");
    l["recompute"] = "selective";
    const auto r = l.find("recompute_modules");
    if (r == l.end())
      l["recompute_modules"] = "core_attn,moe";
    else
      r->second += ",moe";
  }
  // --attention-backend (arguments.py AttnBackend, printed as AttnBackend.fused): fused is Transformer Engine's cuDNN
  // attention, flash the flash-attn package's; auto leaves it to the framework's curve.
  if (auto b = arg(args, "attention_backend")) {
    if (b->starts_with("AttnBackend.")) b->erase(0, 12);
    if (*b == "fused") l["attention_backend"] = "cudnn";
    if (*b == "flash") l["attention_backend"] = "flash2";
  }
  // Megatron-LM's distributed optimizer shards optimizer states over DP (ZeRO-1); without it, DDP. Its DDP overlaps
  // nothing unless told (arguments.py: --overlap-grad-reduce and --overlap-param-gather are store_true): a command
  // without them runs its reductions and gathers exposed.
  if (!flag_arg(args, "deepspeed")) {
    l["sharding"] = flag_arg(args, "use_distributed_optimizer") ? "zero1" : "ddp";
    // Megatron-FSDP's strategy (arguments.py --data-parallel-sharding-strategy, default optim_grads_params).
    if (flag_arg(args, "use_megatron_fsdp")) {
      const std::string strategy = arg(args, "data_parallel_sharding_strategy").value_or("optim_grads_params");
      l["sharding"] = megatron_fsdp_sharding(strategy, where);
    }
    for (const KnobId id : {KnobId::overlap_grad_reduce, KnobId::overlap_param_gather})
      if (megatron_knob_applies(id, args) && !arg(args, std::string(knob(id).log_key)))
        l[std::string(knob(id).name)] = "false";
  } else {
    // DeepSpeed's ZeRO stage (a launch command's comes with its config); Megatron-DeepSpeed's attention without a
    // FlashAttention flag is its unfused CoreAttention (megatron/model/transformer.py).
    l["framework"] = "deepspeed";
    if (const auto stage = zero_stage(args, lines, where)) l["sharding"] = zero_stage_sharding(*stage);
    const bool flash = flag_arg(args, "use_flash_attn_v1") || flag_arg(args, "use_flash_attn_v2") ||
                       flag_arg(args, "use_flash_attn_triton") || flag_arg(args, "use_flash_attn_builder");
    l["flash_attention"] = flash ? "true" : "false";
  }
  return l;
}

}  // namespace

std::string megatron_fsdp_sharding(const std::string& strategy, std::string_view where) {
  if (strategy == "no_shard") return "ddp";
  if (strategy == "optim") return "zero1";
  if (strategy == "optim_grads") return "zero2";
  if (strategy == "optim_grads_params") return "zero3";
  throw Error(std::string(where) + ": data_parallel_sharding_strategy '" + strategy +
              "' (valid: no_shard, optim, optim_grads, optim_grads_params)");
}

std::optional<std::int64_t> hugging_face_vocabulary(std::string_view repository) {
  struct Row {
    std::string_view repository;
    std::int64_t tokens;
  };
  // Each repository's config.json vocab_size, which its tokenizer.json fills (base vocabulary and added tokens).
  static constexpr Row kRows[] = {
      {"gpt2", kGpt2BpeVocabulary},
      {"meta-llama/Llama-2-7b-hf", 32000},  // 32,000 SentencePiece pieces
      {"meta-llama/Llama-2-13b-hf", 32000},
      {"meta-llama/Llama-2-70b-hf", 32000},
      {"meta-llama/Meta-Llama-3-8B", 128256},  // 128,000 BPE tokens and 256 reserved special ones
      {"meta-llama/Meta-Llama-3-70B", 128256},
      {"meta-llama/Meta-Llama-3.1-8B", 128256},
      {"meta-llama/Meta-Llama-3.1-70B", 128256},
      {"meta-llama/Meta-Llama-3.1-405B", 128256},
      {"meta-llama/Llama-3.1-8B", 128256},
      {"meta-llama/Llama-3.1-70B", 128256},
      {"meta-llama/Llama-3.1-405B", 128256},
      {"mistralai/Mistral-7B-v0.1", 32000},
      {"mistralai/Mixtral-8x7B-v0.1", 32000},
      {"mistralai/Mistral-Nemo-Base-2407", 131072},  // Tekken: 2^17 tokens
      {"mistralai/Mistral-Large-Instruct-2407", 32768},
      {"bigcode/starcoder2-tokenizer", 49152},
      {"tiiuae/falcon-7b", 65024},
  };
  for (const Row& r : kRows)
    if (r.repository == repository) return r.tokens;
  return std::nullopt;
}

void megatron_deepspeed_arguments(std::map<std::string, std::string>& args, std::string_view where) {
  const std::string w(where);
  args.try_emplace("context_parallel_size", "1");  // no ring attention in Megatron-DeepSpeed
  if (const auto k = arg(args, "num_key_value_heads")) {
    args["group_query_attention"] = "True";
    args["num_query_groups"] = *k;
  }
  if (const auto n = args.find("normalization"); n != args.end()) {
    if (n->second != "layernorm" && n->second != "rmsnorm")
      throw Error(w + ": normalization " + n->second + " (valid: layernorm, rmsnorm)");
    n->second = n->second == "rmsnorm" ? "RMSNorm" : "LayerNorm";
  }
  if (flag_arg(args, "use_rotary_position_embeddings"))
    args["position_embedding_type"] = "rope";  // its arguments.py: and no learned position embeddings
  // BLOOM's fork names PositionEmbeddingType's members (megatron/enums.py), its log their str().
  if (const auto p = args.find("position_embedding_type"); p != args.end()) {
    const std::string name = p->second.starts_with("PositionEmbeddingType.") ? p->second.substr(22) : p->second;
    if (name == "absolute" || name == "rotary" || name == "alibi")
      p->second = name == "absolute" ? "learned_absolute" : name == "rotary" ? "rope" : "alibi";
    else if (name != "rope")
      throw Error(w + ": position_embedding_type " + p->second.substr(0, 40) + " (valid: absolute, rotary, alibi)");
  }
  if (flag_arg(args, "checkpoint_activations")) {
    if (const auto g = arg(args, "recompute_granularity"); g && *g != "full")
      throw Error(w + ": checkpoint_activations with recompute_granularity " + *g);
    if (const auto n = arg(args, "checkpoint_num_layers"); n && *n != "1")
      throw Error(w + ": checkpoint_num_layers " + *n + ": only a checkpoint every layer (1) is priced");
    args["recompute_granularity"] = "full";
  }
  if (const auto u = arg(args, "ds_sequence_parallel_size"); u && *u != "1")
    throw Error(w + ": ds_sequence_parallel_size " + *u +
                ": DeepSpeed-Ulysses' sequence parallelism is not priced (valid: 1)");
  if (flag_arg(args, "no_pipeline_parallel") && arg(args, "pipeline_model_parallel_size").value_or("1") != "1")
    throw Error(w + ": no_pipeline_parallel with pipeline_model_parallel_size " +
                *arg(args, "pipeline_model_parallel_size"));
  if (const auto o = arg(args, "optimizer"); o && *o != "adam" && *o != "adamw")
    throw Error(w + ": optimizer " + *o + ": only Adam (AdamW) is priced");
}

std::string zero_stage_sharding(std::int64_t stage) {
  return stage == 0 ? "ddp" : stage == 1 ? "zero1" : stage == 2 ? "zero2" : "zero3";
}

MeasuredRun megatron_run_from_arguments(const std::map<std::string, std::string>& given,
                                        const std::vector<std::string_view>& lines, std::string_view where) {
  std::map<std::string, std::string> args = given;
  if (flag_arg(args, "deepspeed")) megatron_deepspeed_arguments(args, where);
  MeasuredRun run;
  run.source = std::string(where);
  run.layout = megatron_layout(args, lines, where);
  run.model = megatron_model(args, lines, where);
  return run;
}

MeasuredRun parse_megatron_log(std::string_view text, std::string_view where) {
  const auto lines = lines_of(text);
  const auto args = megatron_arguments(lines, where);
  MeasuredRun run = megatron_run_from_arguments(args, lines, where);
  std::vector<double> step_ms, tflops;
  for (const auto line : lines) {
    if (line.find(" iteration ") == std::string_view::npos && line.rfind("iteration ", 0) != 0) {
      if (line.find("memory (MB)") != std::string_view::npos)
        if (const auto mib = measurement_after(line, "max reserved:"))
          run.peak_memory_gib = std::max(run.peak_memory_gib.value_or(0.0), *mib / 1024.0);
      continue;
    }
    if (const auto ms = measurement_after(line, "elapsed time per iteration (ms):")) {
      step_ms.push_back(*ms);
      if (const auto f = measurement_after(line, "throughput per GPU (TFLOP/s/GPU):")) tflops.push_back(*f);
    }
  }
  if (out_of_memory(text))
    run.outcome = RunOutcome::oom;
  else if (step_ms.empty())
    throw Error(std::string(where) +
                ": no iteration line and no out-of-memory error: the run neither trained nor "
                "ran out of memory");
  if (!step_ms.empty() && run.outcome == RunOutcome::ok) {
    run.step_time_s = steady_state(step_ms) / 1e3;
    if (!tflops.empty()) run.tflops_per_gpu = steady_state(tflops);
    run.tokens_per_s =
        static_cast<double>(int_arg(args, "global_batch_size", where) * int_arg(args, "seq_length", where)) /
        *run.step_time_s;
    if (!std::isfinite(*run.tokens_per_s))
      throw Error(std::string(where) + ": elapsed time per iteration " + std::to_string(steady_state(step_ms)) +
                  " ms is no step time a run can take (tokens/s would be infinite)");
  }
  return run;
}

}  // namespace headroom::calibrate
