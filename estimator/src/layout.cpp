#include "headroom/estimator/layout.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <numeric>
#include <string>
#include <utility>

#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom {

std::optional<Shard> shard_from_letter(char c) {
  switch (c) {
    case 'N':
    case 'n': return Shard::none;
    case 'I':
    case 'i': return Shard::intra;
    case 'G':
    case 'g': return Shard::global;
    default: return std::nullopt;
  }
}

std::optional<StateSharding> sharding_from_code(std::string_view code) {
  if (code.size() != 3) return std::nullopt;
  const auto p = shard_from_letter(code[0]), g = shard_from_letter(code[1]), o = shard_from_letter(code[2]);
  if (!p || !g || !o) return std::nullopt;
  return StateSharding{*p, *g, *o};
}
namespace {

// One of pipeline_parallel_layer_layout.py parse_str_to_list's substitutions, as re.sub makes it: each match of
// `\(([^)]+)\)\*(\d+)` (group) or `(.)\*(\d+)` (one character), left to right, replaced by n copies of what it repeats.
std::string unroll_layout(std::string_view in, bool group, const std::string& what) {
  constexpr std::size_t kMaxChars = 1'000'000;
  std::string out;
  for (std::size_t i = 0; i < in.size();) {
    std::size_t body = i, end = i + 1;  // [body, end): what repeats; a '*' follows it
    if (group) {
      end = in[i] == '(' ? in.find(')', i + 1) : std::string_view::npos;
      body = i + 1;
    }
    std::size_t digits = end == std::string_view::npos ? 0 : end + (group ? 2 : 1);
    const bool star = end != std::string_view::npos && end > body && digits <= in.size() && in[digits - 1] == '*' &&
                      (group || in[i] != '\n');
    std::size_t to = digits;
    while (star && to < in.size() && std::isdigit(static_cast<unsigned char>(in[to])) != 0) ++to;
    if (!star || to == digits) {
      out += in[i++];
      continue;
    }
    if (to - digits > 6) throw Error(what + ": a repeat count of more than 6 digits");
    const std::size_t n = std::stoul(std::string(in.substr(digits, to - digits)));
    const std::string_view repeated = in.substr(body, end - body);
    if (out.size() + repeated.size() * n > kMaxChars) throw Error(what + " unrolls past a million characters");
    for (std::size_t k = 0; k < n; ++k) out += repeated;
    i = to;
  }
  return out;
}

}  // namespace

std::string layout_named(std::string_view text) {
  const std::string shown = text.size() > 80 ? std::string(text.substr(0, 80)) + "..." : std::string(text);
  return field("pipeline_model_parallel_layout") + " \"" + shown + "\"";
}

// pipeline_parallel_layer_layout.py parse_str_to_list, and the order validate_layer_layout asks of the flattened
// layers: the embedding first, the loss last, each once, no decoder layer after a multi-token-prediction layer.
PipelineLayerLayout parse_pipeline_layout(std::string_view text) {
  const std::string what = layout_named(text);
  std::string flat;
  for (const char c : text)
    if (c != ',') flat += c;
  flat = unroll_layout(unroll_layout(flat, true, what), false, what);
  PipelineLayerLayout x;
  x.text = std::string(text);
  std::string order;  // the layers in order
  std::size_t start = 0;
  for (;;) {
    const std::size_t bar = flat.find('|', start);
    const std::string_view stage = std::string_view(flat).substr(start, bar == std::string::npos ? bar : bar - start);
    if (stage.find('E') != std::string_view::npos) x.embedding_stage = x.stages();
    if (stage.find('L') != std::string_view::npos) x.loss_stage = x.stages();
    x.decoder_layers.push_back(std::count(stage.begin(), stage.end(), 't'));
    x.mtp_layers.push_back(std::count(stage.begin(), stage.end(), 'm'));
    for (const char c : stage)
      if (std::string_view("EtmL").find(c) == std::string_view::npos)
        throw Error(what + ": '" + std::string(1, c) + "' is no layer (valid: E embedding, t decoder, m mtp, L loss)");
    order += stage;
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  if (order.empty() || order.front() != 'E' || std::count(order.begin(), order.end(), 'E') != 1)
    throw Error(what + ": the embedding (E) must come first, once");
  if (order.back() != 'L' || std::count(order.begin(), order.end(), 'L') != 1)
    throw Error(what + ": the loss (L) must come last, once");
  const std::size_t mtp = order.find('m');
  if (mtp != std::string::npos && order.find('t', mtp) != std::string::npos)
    throw Error(what + ": decoder layers (t) must come before the multi-token-prediction layers (m)");
  return x;
}

// pipeline_parallel_layer_layout.py: the list form's names (LayerType members, stripped and lower-cased); an encoder
// raises NotImplementedError there.
std::string pipeline_layout_text(const std::vector<std::vector<std::string>>& stages) {
  std::string text;
  for (const auto& stage : stages) {
    if (!text.empty()) text += '|';
    for (const std::string& name : stage) {
      const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
      const auto first = std::find_if_not(name.begin(), name.end(), space);
      const auto last = std::find_if_not(name.rbegin(), name.rend(), space).base();
      std::string n;
      for (auto c = first; c < last; ++c) n += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
      if (n == "embedding")
        text += 'E';
      else if (n == "decoder")
        text += 't';
      else if (n == "mtp")
        text += 'm';
      else if (n == "loss")
        text += 'L';
      else
        throw Error(field("pipeline_model_parallel_layout") + ": layer \"" + name +
                    "\" is not priced (valid: embedding, decoder, mtp, loss)");
    }
  }
  return text;
}

namespace {

// `what` and the field's name (field() markers): the message is built only when the value is refused.
void require_positive(std::int64_t value, const char* what, const char* name = nullptr) {
  if (value <= 0)
    throw Error(std::string(what) + (name != nullptr ? " " + field(name) : std::string()) +
                " must be a positive integer (got " + std::to_string(value) + ")");
}

std::string s(std::int64_t v) { return std::to_string(v); }

// --decoder-first/last-pipeline-num-layers as megatron/core/transformer/transformer_config.py (__post_init__,
// "Uneven PP") checks them: each > 0 and a multiple of v, the rest split evenly over the middle stages, which
// exist exactly when layers remain, each holding a multiple of v.
void validate_uneven_split(const ModelSpec& m, const Layout& l) {
  const PipelineSplit& x = l.split;
  if (x.embedding_in_split || x.loss_in_split)
    throw Error(
        "--decoder-first/last-pipeline-num-layers cannot be combined with --account-for-embedding/loss-in-"
        "pipeline-split (Megatron-LM refuses it)");
  if (l.pp < 2) throw Error("--decoder-first/last-pipeline-num-layers need " + field("pp") + " 2 or more");
  std::int64_t rest = m.num_layers, middle = l.pp;
  for (const auto& [n, name] :
       {std::pair{x.first_stage_layers, "first_stage_layers"}, std::pair{x.last_stage_layers, "last_stage_layers"}}) {
    if (n == 0) continue;
    if (l.vpp > 1 && n % l.vpp != 0)
      throw Error(field(name) + " " + s(n) + " is not a multiple of " + field("vpp") + " " + s(l.vpp));
    rest -= n;
    --middle;
  }
  if (rest < 0)
    throw Error("the first and last pipeline stages hold " + s(m.num_layers - rest) + " layers, more than the " +
                s(m.num_layers) + " of " + m.name);
  if ((rest > 0) != (middle > 0))
    throw Error(s(rest) + " layers remain for " + s(middle) + " middle pipeline stages (" + field("pp") + " " +
                s(l.pp) + "): both must be zero or both positive");
  if (middle == 0) return;
  if (rest % middle != 0)
    throw Error("the " + s(rest) + " layers left by the first and last stages do not split evenly over the " +
                s(middle) + " middle stages");
  if (l.vpp > 1 && (rest / middle) % l.vpp != 0)
    throw Error(field("vpp") + " " + s(l.vpp) + " does not divide the " + s(rest / middle) +
                " layers of a middle stage");
}

// p | L, or with --account-for-embedding/loss-in-pipeline-split p | L + 1 (+ 1) (transformer_block.py), and v
// dividing the layers per stage.
void validate_even_split(const ModelSpec& m, const Layout& l) {
  if (l.split.partition_balanced) {
    if (l.pp > m.num_layers)
      throw Error(field("pp") + " " + s(l.pp) + " leaves stages without a layer of the " + s(m.num_layers) +
                  " layers of " + m.name);
    if (l.vpp > 1) throw Error(field("vpp") + " " + s(l.vpp) + ": DeepSpeed's pipeline engine does not interleave");
    return;
  }
  const std::int64_t counted = l.split.counted_layers(m.num_layers);
  const std::string extra =
      counted == m.num_layers ? "" : " (+" + s(counted - m.num_layers) + " for the embedding/loss)";
  if (counted % l.pp != 0)
    throw Error(field("pp") + " " + s(l.pp) + " does not divide the " + s(m.num_layers) + " layers of " + m.name +
                extra + "; uneven stages: " + field("decoder_first_pipeline_num_layers") + " / " +
                field("decoder_last_pipeline_num_layers"));
  if (l.vpp > 1 && (counted / l.pp) % l.vpp != 0)
    throw Error(field("vpp") + " " + s(l.vpp) + " does not divide the " + s(counted / l.pp) + " layers per stage" +
                extra);
}

// pipeline_parallel_layer_layout.py validate_layer_layout, against the model and the layout: p·v stages, every decoder
// and multi-token-prediction layer placed; transformer_config.py refuses it with the other split options. Priced
// where the multi-token-prediction layers share the loss's stage (memory.cpp and throughput.cpp put them with the LM
// head), not in a standalone stage of their own.
void validate_layer_layout(const ModelSpec& m, const Layout& l) {
  const PipelineSplit& split = l.split;
  const PipelineLayerLayout& x = *split.layer_layout;
  const std::string what = layout_named(x.text);
  if (split.uneven() || split.embedding_in_split || split.loss_in_split)
    throw Error(
        what + " with " +
        field(split.uneven() ? "decoder_first_pipeline_num_layers" : "account_for_embedding_in_pipeline_split") +
        ": Megatron-LM takes one or the other");
  // Megatron-LM takes empty stages before the embedding's and after the loss's; headroom holds the embedding on the
  // first rank's first chunk and the LM head on the last rank's last chunk (memory.cpp, throughput.cpp).
  if (x.embedding_stage != 0 || x.loss_stage != x.stages() - 1)
    throw Error(what + ": the embedding in virtual stage " + s(x.embedding_stage) + " and the loss in " +
                s(x.loss_stage) + " of 0.." + s(x.stages() - 1) +
                ": priced with the embedding in the first and the loss in the last only");
  if (x.stages() != l.pp * l.vpp)
    throw Error(what + " has " + s(x.stages()) + " stages, not " + field("pp") + " " + s(l.pp) + " x " + field("vpp") +
                " " + s(l.vpp));
  const auto total = [](const std::vector<std::int64_t>& v) { return std::accumulate(v.begin(), v.end(), 0LL); };
  if (total(x.decoder_layers) != m.num_layers)
    throw Error(what + " places " + s(total(x.decoder_layers)) + " decoder layers, and " + m.name + " has " +
                s(m.num_layers));
  if (total(x.mtp_layers) != l.mtp_layers)
    throw Error(what + " places " + s(total(x.mtp_layers)) + " multi-token-prediction layers, and " +
                field("mtp_num_layers") + " is " + s(l.mtp_layers));
  if (l.mtp_layers > 0 && x.mtp_layers.back() != l.mtp_layers)
    throw Error(what +
                ": multi-token-prediction layers in a stage before the loss's (a standalone stage) are not "
                "priced; place them with the loss");
  if (l.schedule == Schedule::zbv)
    throw Error(what + " with " + field("schedule") + " zbv: Megatron-LM's layout, torch's schedule; not priced");
}

void validate_pipeline_split(const ModelSpec& m, const Layout& l) {
  if (l.split.layer_layout) return validate_layer_layout(m, l);
  if (l.split.first_stage_layers < 0 || l.split.last_stage_layers < 0)
    throw Error("--decoder-first/last-pipeline-num-layers must be positive (got " +
                s(std::min(l.split.first_stage_layers, l.split.last_stage_layers)) + ")");
  if (l.split.uneven())
    validate_uneven_split(m, l);
  else
    validate_even_split(m, l);
}

}  // namespace

// Ring attention passes every KV block around the ring; with a window most are masked out entirely, which
// headroom's ring model (throughput.hpp, cp_kv_bytes) does not price, and Transformer Engine refuses it
// (context_parallel.py attn_forward_func_with_cp: a window only with cp_comm_type a2a or all_gather). Under those two
// each GPU attends its share of the windowed pairs (a2a: its heads over the whole sequence; all_gather: its queries
// over the gathered keys) and moves what it moves without a window, which is priced. No framework headroom prices runs
// ring attention over ALiBi's biases (Megatron-DeepSpeed's and llm-foundry's have no context parallelism).
bool context_parallel_priced(const ModelSpec& m, const Layout& l) {
  if (m.alibi) return false;
  return m.sliding_window == 0 || l.cp_exchange == CpExchange::a2a || l.cp_exchange == CpExchange::all_gather;
}

bool op_recompute_priced(const ModelSpec& m, const Layout& l) {
  return m.num_experts == 0 && !latent_attention(m) && gated_mlp(m) && !m.parallel_residual && !l.lora.enabled() &&
         l.fp8 == Fp8Recipe::none && l.flash_attention;
}

void refuse_unpriced_op_recompute(const ModelSpec& m, const Layout& l) {
  if (l.recompute != Recompute::op || op_recompute_priced(m, l)) return;
  const auto refuse = [&](const std::string& what) {
    throw Error(field("recompute") + " op (torchtitan's per-op checkpointing) " + what +
                " is not priced: the saved outputs are counted for a Llama block's seven BF16 matmuls");
  };
  if (m.num_experts > 0) refuse("of the experts of " + m.name);
  if (latent_attention(m)) refuse("of the latent attention of " + m.name);
  if (!gated_mlp(m)) refuse("of the plain (two-matrix) MLP of " + m.name);
  if (m.parallel_residual) refuse("of the parallel attention and MLP of " + m.name);
  if (l.lora.enabled()) refuse("with LoRA adapters (" + field("lora_rank") + ")");
  // torch._scaled_mm is not aten.mm: torchtitan's policy of the end of 2024 recomputes every FP8 matmul, its later
  // one (compute-intensive ops saved) keeps them all.
  if (l.fp8 != Fp8Recipe::none) refuse("with FP8 matmuls (" + field("fp8_recipe") + "; the policy's versions differ)");
  if (!l.flash_attention) refuse("without fused attention");
}

std::int64_t recomputed_layers(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (l.recompute != Recompute::full) return 0;
  const std::int64_t k = l.recompute_num_layers;
  switch (l.recompute_method) {
    case RecomputeMethod::uniform: return stage_layers(m, l, stage);
    case RecomputeMethod::block: {  // transformer_block.py: layer_number < recompute_num_layers, in each chunk
      std::int64_t n = 0;
      for (std::int64_t chunk = 0; chunk < std::max<std::int64_t>(1, l.vpp); ++chunk)
        n += std::min(k, chunk_layers(m, l, stage, chunk));
      return n;
    }
    case RecomputeMethod::every: return stage_layers(m, l, stage) / k;  // blocks k, 2k, ... of the GPU's
  }
  return 0;
}

namespace {

// Full recompute by layers (recompute_by_layers) is priced for dense decoders without activation offloading: which of a
// stage's layers it keeps whole is counted, not which kind they are.
void refuse_unpriced_recompute_layers(const ModelSpec& m, const Layout& l) {
  if (!recompute_method_given(l)) return;
  const std::string what = field("recompute_method") + " " + std::string(to_string(l.recompute_method)) + " " +
                           field("recompute_num_layers") + " " + s(l.recompute_num_layers);
  if (l.recompute_num_layers < 1) throw Error(what + ": the layers must be at least 1");
  if (l.recompute != Recompute::full)
    throw Error(what + " needs " + field("recompute") + " full (Megatron-LM: --recompute-granularity full)");
  if (m.num_experts > 0) throw Error(what + " with the experts of " + m.name + " is not priced");
  if (l.activation_offload_layers > 0)
    throw Error(what + " with " + field("cpu_offloading_num_layers") + " is not priced");
}

}  // namespace

void validate_model_split(const ModelSpec& m, const Layout& l) {
  require_positive(l.tp, "tensor parallel size", "tp");
  require_positive(l.cp, "context parallel size", "cp");
  require_positive(l.pp, "pipeline parallel size", "pp");
  require_positive(l.vpp, "virtual pipeline stages", "vpp");
  require_positive(l.seq, "sequence length", "seq");
  if (m.num_heads % l.tp != 0)
    throw Error(field("tp") + " " + s(l.tp) + " does not divide the " + s(m.num_heads) + " attention heads of " +
                m.name);
  if (m.num_kv_heads % l.tp != 0)
    throw Error(field("tp") + " " + s(l.tp) + " does not divide the " + s(m.num_kv_heads) + " KV heads of " + m.name);
  if (l.vpp > 1 && l.pp == 1)
    throw Error(field("vpp") + " " + s(l.vpp) + " needs " + field("pp") + " > 1 (interleaving splits pipeline stages)");
  validate_pipeline_split(m, l);
  refuse_unpriced_op_recompute(m, l);
  refuse_unpriced_recompute_layers(m, l);
  if (m.alibi && l.cp > 1)  // context_parallel_priced
    throw Error(field("cp") + " " + s(l.cp) + ": context parallelism over the ALiBi attention of " + m.name +
                " is not priced (valid: cp 1)");
  if (l.cp > 1 && !context_parallel_priced(m, l))
    throw Error(field("cp") + " " + s(l.cp) + ": context parallelism over the sliding-window attention of " + m.name +
                " is priced with " + field("cp_comm_type") +
                " a2a or all_gather only (Transformer Engine's; valid: cp 1, or one of those)");
  if (latent_attention(m) && !l.flash_attention)
    throw Error("the latent attention of " + m.name +
                " is priced with FlashAttention only (Megatron-LM runs it "
                "through TransformerEngine's fused attention)");
  if (latent_attention(m) && l.lora.enabled())
    throw Error("LoRA on the latent attention of " + m.name + " is not priced (" + field("lora_rank") + ")");
  // Megatron-LM's unfused attention masks causally only.
  if (m.sliding_window > 0 && !l.flash_attention)
    throw Error("the sliding-window attention of " + m.name + " is priced with FlashAttention only");
  if (l.seq % l.cp != 0) throw Error(field("cp") + " " + s(l.cp) + " does not divide " + field("seq") + " " + s(l.seq));
  if (l.cp > 1 && l.seq % (2 * l.cp) != 0)
    throw Error(field("seq") + " " + s(l.seq) + " must be a multiple of 2·cp = " + s(2 * l.cp) +
                " (load-balanced context parallelism splits it into 2·cp chunks)");
}

// Megatron-LM's MoE parallel folding (arguments.py, parallel_state.py): ep | experts, etp·ep | t·c·d.
void refuse_unpriced_experts(const ModelSpec& m, const Layout& l) {
  if (m.num_experts == 0) return;
  if (l.lora.enabled()) throw Error("LoRA on the experts of " + m.name + " is not priced (" + field("lora_rank") + ")");
  if (l.fsdp_unit_buffers > 0)
    throw Error("the experts of " + m.name +
                " are priced with Megatron-LM's expert parallelism only, not PyTorch FSDP");
}

void refuse_unpriced_precision(const Layout& l) {
  if (l.fp8 != Fp8Recipe::none && l.lora.enabled())
    throw Error("FP8 training with LoRA adapters is not priced (" + field("fp8_recipe") + ", " + field("lora_rank") +
                ")");
  if (l.fp8_param_gather && l.fp8 == Fp8Recipe::none)
    throw Error(field("fp8_param_gather") + " needs FP8 training (" + field("fp8_recipe") + ")");
}

void validate_recompute_modules(const ModelSpec& m, const Layout& l) {
  if (!recomputes_modules(l)) return;
  const std::string what = field("recompute_modules") + " ";
  // megatron/core/transformer/transformer_config.py __post_init__, its checks of recompute_modules.
  if (recomputes(l, RecomputeModule::mla_up_proj) && !latent_attention(m))
    throw Error(what + "mla_up_proj needs latent attention, which " + m.name + " does not have");
  if (recomputes(l, RecomputeModule::shared_experts) && l.shared_expert_overlap)
    throw Error(what + "shared_experts with " + field("moe_shared_expert_overlap") +
                ": Megatron-LM refuses them together");
  if (l.fp8 == Fp8Recipe::delayed)
    for (const auto x : {RecomputeModule::layernorm, RecomputeModule::moe_act})
      if (recomputes(l, x))
        throw Error(what + recompute_modules_to_string(static_cast<std::uint8_t>(x)) + " with " + field("fp8_recipe") +
                    " delayed: Megatron-LM refuses it (delayed scaling does not support it)");
}

bool bf16_layers_priced(const ModelSpec& m, const Layout& l) {
  if (l.bf16_layers_at_start == 0 && l.bf16_layers_at_end == 0) return true;
  const std::int64_t v = std::max<std::int64_t>(1, l.vpp), most = m.num_layers / l.pp;
  return l.bf16_layers_at_start <= most && l.bf16_layers_at_end <= most &&
         l.bf16_layers_at_start <= chunk_layers(m, l, 0, 0) &&
         l.bf16_layers_at_end <= chunk_layers(m, l, head_stage(l), v - 1);
}

void validate_bf16_layers(const ModelSpec& m, const Layout& l) {
  if (l.bf16_layers_at_start == 0 && l.bf16_layers_at_end == 0) return;
  if (l.fp8 == Fp8Recipe::none) throw Error(field("first_last_layers_bf16") + " needs FP8 training");
  // megatron/core/transformer/transformer_config.py __post_init__: "Delayed scaling does not support first / last
  // layer in BF16", and each count from 0 to the layers of a pipeline stage.
  if (l.fp8 == Fp8Recipe::delayed)
    throw Error(field("first_last_layers_bf16") + " with " + field("fp8_recipe") +
                " delayed: Megatron-LM refuses it (delayed scaling does not support first / last layers in BF16)");
  if (l.fp8_library != Fp8Library::transformer_engine)
    throw Error(field("first_last_layers_bf16") + " is Megatron-LM's (Transformer Engine's FP8): --framework megatron");
  const std::int64_t most = m.num_layers / l.pp;
  for (const auto& [name, n] : {std::pair{"num_layers_at_start_in_bf16", l.bf16_layers_at_start},
                                std::pair{"num_layers_at_end_in_bf16", l.bf16_layers_at_end}})
    if (n < 0 || n > most)
      throw Error(field(name) + " " + s(n) + ": valid: 0 to the " + s(most) + " layers of a pipeline stage");
  // Priced where they sit in the first and last model chunks, whose stages the pipeline model prices apart (the middle
  // stages are alike); and by stage, where full recompute by layers would ask which of them are recomputed.
  if (!bf16_layers_priced(m, l)) {
    const std::int64_t v = std::max<std::int64_t>(1, l.vpp);
    throw Error(field("num_layers_at_start_in_bf16") + " " + s(l.bf16_layers_at_start) + " and " +
                field("num_layers_at_end_in_bf16") + " " + s(l.bf16_layers_at_end) +
                ": BF16 layers beyond the first and last model chunks (" + s(chunk_layers(m, l, 0, 0)) + " and " +
                s(chunk_layers(m, l, head_stage(l), v - 1)) + " layers) are not priced");
  }
  if (recompute_by_layers(l))
    throw Error(field("first_last_layers_bf16") + " with full recompute by layers (" + field("recompute_method") +
                ") is not priced");
}

void validate_experts(const ModelSpec& m, const Layout& l) {
  require_positive(l.ep, "expert parallel size", "ep");
  if (l.etp < 0) throw Error(field("etp") + " " + s(l.etp) + " must be positive (0: the tensor parallel size)");
  if (m.num_experts == 0) {
    if (l.ep > 1 || l.etp > 0)
      throw Error(field(l.ep > 1 ? "ep" : "etp") + " is for mixture-of-experts models; " + m.name + " is dense");
    return;
  }
  refuse_unpriced_experts(m, l);
  if (l.tp > 1 && !l.sequence_parallel)
    throw Error(field("tp") + " " + s(l.tp) + " without sequence parallelism: Megatron-LM requires it with experts");
  if (!(l.expert_load >= 1.0) || l.expert_load > 1e6)
    throw Error(field("moe_expert_capacity_factor") + " " + std::to_string(l.expert_load) +
                " must be from 1 to 10^6 (tokens per expert over the mean)");
  if (m.num_experts % l.ep != 0)
    throw Error(field("ep") + " " + s(l.ep) + " does not divide the " + s(m.num_experts) + " experts of " + m.name);
  if (m.moe_ffn_hidden_size % l.expert_tp() != 0)
    throw Error(field("etp") + " " + s(l.expert_tp()) + " does not divide the expert FFN width " +
                s(m.moe_ffn_hidden_size) + " of " + m.name);
  const std::int64_t stage_gpus = l.tp * l.cp * l.dp;
  if (stage_gpus % (l.expert_tp() * l.ep) != 0)
    throw Error("etp·ep = " + s(l.expert_tp()) + "·" + s(l.ep) + " does not divide the t·c·d = " + s(stage_gpus) +
                " GPUs of a pipeline stage (" + field("etp") + ", " + field("ep") + ")");
}

void validate_layout(const ModelSpec& m, const Layout& l) {
  validate_model_split(m, l);
  require_positive(l.dp, "data parallel size");
  require_positive(l.mbs, "micro-batch size", "mbs");
  require_positive(l.gbs, "global batch size", "gbs");
  if (l.gbs % (l.dp * l.mbs) != 0)
    throw Error(field("gbs") + " " + s(l.gbs) + " is not a multiple of dp·mbs = " + s(l.dp) + "·" + s(l.mbs) + " = " +
                s(l.dp * l.mbs));
  validate_experts(m, l);
  validate_lora_rank(m, l.lora);
  // transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py, the a2a forward: "The number of
  // attention heads needs to be divisible by CP size!" (the heads a TP rank holds, queries' and keys').
  if (l.cp > 1 && l.cp_exchange == CpExchange::a2a &&
      ((m.num_heads / l.tp) % l.cp != 0 || (m.num_kv_heads / l.tp) % l.cp != 0))
    throw Error(field("cp_comm_type") + " a2a with " + field("cp") + " " + s(l.cp) + ": the " + s(m.num_heads / l.tp) +
                " query and " + s(m.num_kv_heads / l.tp) +
                " key/value heads a TP rank holds must each be divisible by the CP size");
  refuse_unpriced_precision(l);
  validate_recompute_modules(m, l);
  validate_bf16_layers(m, l);
  // megatron/core/optimizer/__init__.py: "--use-precision-aware-optimizer only supported with distributed optimizer".
  if (l.optimizer_precision.precision_aware && l.sharding.optimizer == Shard::none)
    throw Error(field("use_precision_aware_optimizer") + " needs the distributed optimizer (" + field("sharding") +
                " with sharded optimizer states, e.g. zero1; Megatron-LM's --use-distributed-optimizer)");
  if (l.fp8_param_gather && l.sharding.optimizer == Shard::none && l.sharding.params == Shard::none)
    throw Error(field("fp8_param_gather") +
                " needs gathered parameters: the distributed optimizer or sharded weights (Megatron-LM: "
                "--use-distributed-optimizer)");
  // megatron/training/arguments.py: an offloaded optimizer updates FP8 weights under delayed scaling only.
  if (l.fp8_param_gather && l.optimizer_offload > 0 && l.fp8 != Fp8Recipe::delayed)
    throw Error(field("fp8_param_gather") + " with an offloaded optimizer needs " + field("fp8_recipe") + " delayed");
  if (!(l.optimizer_offload >= 0.0 && l.optimizer_offload <= 1.0))
    throw Error(field("optimizer_offload_fraction") + " " + std::to_string(l.optimizer_offload) +
                " must be from 0 to 1");
  // megatron/training/arguments.py: "Tensor parallel communication/GEMM overlap can happen only when sequence
  // parallelism is enabled" (and SP is off at t = 1).
  if (l.tp_comm_overlap && (l.tp < 2 || !l.sequence_parallel))
    throw Error(field("tp_comm_overlap") + " needs " + field("tp") +
                " 2 or more with sequence parallelism (Megatron-LM asserts --sequence-parallel with it)");
  if (l.overlap_offload_copies && l.optimizer_offload == 0.0)
    throw Error(field("overlap_cpu_optimizer_d2h_h2d") + " needs an offloaded optimizer (" +
                field("optimizer_offload_fraction") + " > 0)");
  // megatron/core/transformer/transformer_config.py: fewer layers than the model has, and no pipeline parallelism.
  if (l.activation_offload_layers < 0 || l.activation_offload_layers >= m.num_layers)
    throw Error(field("cpu_offloading_num_layers") + " " + s(l.activation_offload_layers) + " must be from 0 to " +
                s(m.num_layers - 1) + " (fewer than the " + s(m.num_layers) + " layers of " + m.name + ")");
  if (l.activation_offload_layers > 0 && l.pp > 1)
    throw Error(field("cpu_offloading_num_layers") + " with " + field("pp") + " " + s(l.pp) +
                ": Megatron-LM offloads activations without pipeline parallelism only");
  // The zero-bubble schedule fills the bubble with weight-gradient passes, which frozen LoRA base weights do not run.
  if (l.schedule == Schedule::zero_bubble && l.pp > 1 && l.lora.enabled())
    throw Error(field("schedule") + " zero-bubble with LoRA (" + field("lora_rank") + " " + s(l.lora.rank) +
                "): its bubble is filled with weight-gradient passes, which the frozen weights do not run; not priced");
  // The V places a rank's chunks apart: Megatron-LM's uneven first and last stages and experts' layer order are not
  // priced in it.
  if (l.schedule == Schedule::zbv && l.pp > 1) {
    if (l.vpp != 2)
      throw Error(field("schedule") + " zbv runs exactly 2 chunks a rank (" + field("vpp") + " " + s(l.vpp) +
                  "; valid: 2)");
    if (l.split.uneven())
      throw Error(field("schedule") + " zbv with uneven first/last stages (" +
                  field("decoder_first_pipeline_num_layers") + "): not priced");
    if (m.num_experts > 0) throw Error(field("schedule") + " zbv with experts (" + m.name + "): not priced");
    if (l.lora.enabled())
      throw Error(field("schedule") + " zbv with LoRA (" + field("lora_rank") + " " + s(l.lora.rank) +
                  "): frozen weights run no weight-gradient pass; not priced");
  }
  if (!interleaving_runs(l) && l.schedule == Schedule::looped_bfs)  // torch runs it; its bubble is not priced
    throw Error(field("schedule") + " looped-bfs with fewer micro-batches per pipeline (gbs/(dp·mbs) = " +
                s(l.microbatches()) + ") than pp = " + s(l.pp) +
                ": each rank's next chunk waits for the pipeline to fill again, which is not priced");
  if (!interleaving_runs(l))  // the frameworks refuse it
    throw Error("the " + std::string(to_string(l.schedule)) +
                " schedule needs the micro-batches per pipeline (gbs/(dp·mbs) = " + s(l.microbatches()) +
                ") to be a multiple of pp = " + s(l.pp) + " (Megatron-LM and PyTorch refuse it otherwise)");
}

// Layers are numbered in virtual-stage order (transformer_block.py, get_transformer_layer_offset): chunk j of stage
// i is virtual stage j·p + i, whose layers follow those of every virtual stage before it.
std::int64_t stage_moe_layers(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  if (m.num_experts == 0) return 0;
  if (m.first_dense_layers == 0) return stage_layers(m, l, stage);
  const std::int64_t v = std::max<std::int64_t>(1, l.vpp);
  std::int64_t offset = 0, moe = 0;
  for (std::int64_t u = 0; u < v * l.pp; ++u) {
    const std::int64_t n = chunk_layers(m, l, u % l.pp, u / l.pp);
    if (u % l.pp == stage) moe += n - std::clamp<std::int64_t>(m.first_dense_layers - offset, 0, n);
    offset += n;
  }
  return moe;
}

// megatron/core/fp8_utils.py is_first_last_bf16_layer: global layers [0, start) and [L − end, L); virtual stage u
// holds the layers after those of virtual stages 0..u−1, on rank u mod p (the V: rank u, then 2p − 1 − u).
Bf16Layers stage_bf16_layers(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  Bf16Layers x;
  if (l.bf16_layers_at_start == 0 && l.bf16_layers_at_end == 0) return x;
  const std::int64_t v = std::max<std::int64_t>(1, l.vpp), layers = m.num_layers;
  const std::int64_t end_from = std::max(layers - l.bf16_layers_at_end, l.bf16_layers_at_start);
  const std::int64_t dense_to = m.num_experts > 0 ? m.first_dense_layers : layers;  // layers before it are dense
  const auto overlap = [](std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
    return std::max<std::int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
  };
  std::int64_t offset = 0;
  for (std::int64_t u = 0; u < v * l.pp; ++u) {
    const std::int64_t chunk = u / l.pp;
    const std::int64_t rank = l.schedule == Schedule::zbv && chunk == 1 ? 2 * l.pp - 1 - u : u % l.pp;
    const std::int64_t n = chunk_layers(m, l, rank, chunk), to = offset + n;
    if (rank == stage) {
      const std::int64_t start = l.bf16_layers_at_start;
      const std::int64_t dense =
          overlap(offset, to, 0, std::min(start, dense_to)) + overlap(offset, to, end_from, dense_to);
      x.dense += dense;
      x.moe += overlap(offset, to, 0, start) + overlap(offset, to, end_from, layers) - dense;
    }
    offset = to;
  }
  return x;
}

// megatron/core/transformer/transformer_block.py, get_num_layers_to_build (times v chunks); a layer layout's
// (pipeline_parallel_layer_layout.py get_num_layers_to_build) summed over the stage's chunks.
std::int64_t stage_layers(const ModelSpec& m, const Layout& l, std::int64_t stage) {
  const PipelineSplit& x = l.split;
  if (x.layer_layout) {
    std::int64_t n = 0;
    for (std::int64_t chunk = 0; chunk < l.vpp; ++chunk) n += chunk_layers(m, l, stage, chunk);
    return n;
  }
  if (x.partition_balanced) return m.num_layers / l.pp + (stage < m.num_layers % l.pp ? 1 : 0);
  const bool first = stage == 0, last = stage == head_stage(l);
  if (x.uneven()) {
    if (first && x.first_stage_layers > 0) return x.first_stage_layers;
    if (last && x.last_stage_layers > 0) return x.last_stage_layers;
    return (m.num_layers - x.first_stage_layers - x.last_stage_layers) / x.middle_stages(l.pp);
  }
  const std::int64_t per = x.counted_layers(m.num_layers) / l.pp;
  return per - (first && x.embedding_in_split ? 1 : 0) - (last && x.loss_in_split ? 1 : 0);
}

std::int64_t chunk_layers(const ModelSpec& m, const Layout& l, std::int64_t stage, std::int64_t chunk) {
  const std::int64_t v = std::max<std::int64_t>(1, l.vpp);
  const PipelineSplit& x = l.split;
  if (x.layer_layout) return x.layer_layout->decoder_layers[static_cast<std::size_t>(chunk * l.pp + stage)];
  if (x.uneven() || x.partition_balanced) return stage_layers(m, l, stage) / v;
  const std::int64_t per_chunk = chunkable_layers(m, l) / v;
  const bool embedding = x.embedding_in_split && stage == 0 && chunk == 0;
  const bool loss = x.loss_in_split && stage == head_stage(l) && chunk == v - 1;
  return per_chunk - (embedding ? 1 : 0) - (loss ? 1 : 0);
}

std::int64_t chunkable_layers(const ModelSpec& m, const Layout& l) {
  const PipelineSplit& x = l.split;
  if (!x.uneven()) return x.counted_layers(m.num_layers) / l.pp;
  std::int64_t g = std::gcd(x.first_stage_layers, x.last_stage_layers);
  const std::int64_t middle = x.middle_stages(l.pp);
  if (middle > 0) g = std::gcd(g, (m.num_layers - x.first_stage_layers - x.last_stage_layers) / middle);
  return g;
}

std::optional<PipelineSplit> balanced_uneven_split(std::int64_t layers, std::int64_t pp) {
  if (pp < 2) return std::nullopt;
  const std::int64_t middle = (layers + pp - 1) / pp;
  const std::int64_t ends = layers - (pp - 2) * middle;  // ≤ 2·middle
  if (ends < 2) return std::nullopt;
  PipelineSplit x;
  x.last_stage_layers = ends / 2;
  x.first_stage_layers = ends - x.last_stage_layers;
  return x;
}

bool interleaving_runs(const Layout& l) {
  // megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving: "number of
  // microbatches (m) is not divisible by pipeline-model-parallel-size (p) when using interleaved schedule".
  // torch/distributed/pipelining/schedules.py ScheduleInterleavedZeroBubble: the same rule for its rounds of p; the
  // V's priced steady state (every rank p micro-batches deep) needs it too.
  // ScheduleLoopedBFS takes any m; its (p − 1)/(v·m) bubble holds when the m forwards of a chunk outlast the fill.
  if (l.schedule == Schedule::looped_bfs) return l.microbatches() >= l.pp;
  return !multi_chunk_schedule(l.schedule) || l.microbatches() % l.pp == 0;
}

std::string_view to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
    case Recompute::op: return "op";
  }
  return "?";
}

namespace {
// Megatron-LM's module names (transformer_config.py allowed_modules), in RecomputeModule's order.
constexpr std::array<std::string_view, 7> kRecomputeModuleNames = {"core_attn", "layernorm",      "mla_up_proj", "mlp",
                                                                   "moe",       "shared_experts", "moe_act"};
}  // namespace

std::uint8_t parse_recompute_modules(std::string_view text) {
  std::uint8_t bits = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find_first_of(", ", start), text.size());
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto* it = std::find(kRecomputeModuleNames.begin(), kRecomputeModuleNames.end(), item);
    if (it != kRecomputeModuleNames.end()) {
      bits |= static_cast<std::uint8_t>(1u << (it - kRecomputeModuleNames.begin()));
      continue;
    }
    // The rest of transformer_config.py's allowed_modules recompute parts of models headroom does not price.
    const bool megatrons = item == "gdn_norm_out" || item == "gdp_in_proj" || item == "gdp_qkv" || item == "mhc";
    throw Error(field("recompute_modules") + " " + std::string(item) +
                (megatrons ? " recomputes a part of a model headroom does not price" : " is not Megatron-LM's") +
                " (valid: core_attn, layernorm, mla_up_proj, mlp, moe, shared_experts, moe_act)");
  }
  return bits;
}

std::vector<std::string_view> recompute_module_names(std::uint8_t modules) {
  std::vector<std::string_view> names;
  for (std::size_t i = 0; i < kRecomputeModuleNames.size(); ++i)
    if ((modules & (1u << i)) != 0) names.push_back(kRecomputeModuleNames[i]);
  return names;
}

std::string recompute_modules_to_string(std::uint8_t modules) {
  std::string out;
  for (const std::string_view name : recompute_module_names(modules)) {
    if (!out.empty()) out += ',';
    out += name;
  }
  return out;
}

std::string_view to_string(RecomputeMethod r) {
  switch (r) {
    case RecomputeMethod::uniform: return "uniform";
    case RecomputeMethod::block: return "block";
    case RecomputeMethod::every: return "every";
  }
  return "?";
}

std::string_view to_string(Schedule s) {
  switch (s) {
    case Schedule::one_f_one_b: return "1f1b";
    case Schedule::interleaved: return "interleaved";
    case Schedule::gpipe: return "gpipe";
    case Schedule::zero_bubble: return "zero-bubble";
    case Schedule::zbv: return "zbv";
    case Schedule::looped_bfs: return "looped-bfs";
  }
  return "?";
}

std::string_view to_string(ExpertDispatcher d) { return d == ExpertDispatcher::flex ? "flex" : "alltoall"; }

std::string_view to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::none: return "none";
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::tensorwise: return "tensorwise";
  }
  return "?";
}

std::string_view to_string(Dtype t) {
  switch (t) {
    case Dtype::fp32: return "fp32";
    case Dtype::bf16: return "bf16";
    case Dtype::fp16: return "fp16";
    case Dtype::fp8: return "fp8";
  }
  return "fp32";
}

std::optional<Dtype> dtype_from_string(std::string_view text) {
  for (const Dtype t : {Dtype::fp32, Dtype::bf16, Dtype::fp16, Dtype::fp8})
    if (to_string(t) == text) return t;
  return std::nullopt;
}

std::string_view to_string(Fp8Library x) { return x == Fp8Library::torchao ? "torchao" : "transformer_engine"; }
std::string_view to_string(CpExchange x) {
  switch (x) {
    case CpExchange::all_gather: return "all_gather";
    case CpExchange::a2a: return "a2a";
    case CpExchange::alltoall: return "alltoall";
    case CpExchange::allgather: return "allgather";
    case CpExchange::p2p: break;
  }
  return "p2p";
}
std::optional<CpExchange> parse_cp_exchange(std::string_view name) {
  for (const CpExchange x :
       {CpExchange::p2p, CpExchange::all_gather, CpExchange::a2a, CpExchange::alltoall, CpExchange::allgather})
    if (to_string(x) == name) return x;
  return std::nullopt;
}
std::string_view to_string(AttentionBackend x) {
  return x == AttentionBackend::cudnn ? "cudnn" : x == AttentionBackend::flash2 ? "flash2" : "framework";
}
std::optional<AttentionBackend> attention_backend_from_string(std::string_view name) {
  for (const AttentionBackend x : {AttentionBackend::cudnn, AttentionBackend::flash2})
    if (to_string(x) == name) return x;
  return std::nullopt;
}

// Schedulers allocate whole nodes and torchrun/Megatron-LM start the same number of ranks on each, while the models
// here fill nodes in rank order: a job past one node is whole nodes; one within a node may use part of it.
bool whole_nodes(std::int64_t gpus, const ClusterSpec& c) {
  return c.assumed || c.gpus_per_node < 1 || gpus <= c.gpus_per_node || gpus % c.gpus_per_node == 0;
}

void require_whole_nodes(std::int64_t gpus, const ClusterSpec& c) {
  if (whole_nodes(gpus, c)) return;
  const std::string n = std::to_string(c.gpus_per_node);
  throw Error(field("gpus") + " " + std::to_string(gpus) + " is not whole nodes of cluster " + c.name + " (" + n +
              " GPUs a node): give a multiple of " + n + ", or at most " + n);
}

void validate_on_cluster(const ModelSpec& m, const Layout& l, const ClusterSpec& c) {
  require_whole_nodes(l.gpus(), c);
  if (l.fp8 != Fp8Recipe::none && !(c.gpu.fp8_flops > 0))
    throw Error("GPU " + c.gpu.name + " has no FP8 tensor cores (no fp8_dense_TFLOPs in its spec): " +
                field("fp8_recipe") + " " + std::string(to_string(l.fp8)) + " cannot run there");
  // The kernel curves and fractions are BF16's; FP16 GEMMs run on the same tensor cores at the same rate where the
  // datasheet says so (A100, H100, H200, B200, MI250X, MI300X).
  if (l.optimizer_precision.fp16 && c.gpu.fp16_flops != c.gpu.bf16_flops)
    throw Error("GPU " + c.gpu.name + "'s FP16 peak differs from its BF16 one (fp16_dense_TFLOPs): " + field("fp16") +
                " is priced only where the two are equal");
  if ((l.optimizer_offload > 0 || l.activation_offload_layers > 0) &&
      !(c.host_link.bytes_per_s > 0 && c.host_memory_bytes_per_s > 0))
    throw Error("cluster " + c.name + " gives no host link (its spec's \"host\" key): offloading (" +
                field(l.optimizer_offload > 0 ? "optimizer_offload_fraction" : "cpu_offloading_num_layers") +
                ") cannot be priced there");
  if (zero_hpz_off_node(l, c.gpus_per_node))
    throw Error(field("zero_hpz_partition_size") + " " + std::to_string(l.zero.hpz_partition_size) + " on " + c.name +
                ": priced where the secondary shard is the DP ranks of a node (valid: " +
                std::to_string(sharding_group_size(l, c.gpus_per_node)) + ")");
  if (l.dispatcher == ExpertDispatcher::flex && !group_routing_priced(m, expert_nodes(l, c.gpus_per_node)))
    throw Error(field("ep") + " " + std::to_string(l.ep) + " spans " +
                std::to_string(expert_nodes(l, c.gpus_per_node)) + " nodes of " + c.name + ", which " + m.name + "'s " +
                std::to_string(m.moe_router_num_groups) +
                " routing groups (moe_router_num_groups) neither divide nor are divided by: the flex dispatcher's "
                "traffic under group-limited routing is priced where they do");
}

std::string_view to_string(Shard s) {
  switch (s) {
    case Shard::none: return "N";
    case Shard::intra: return "I";
    case Shard::global: return "G";
  }
  return "?";
}

}  // namespace headroom
