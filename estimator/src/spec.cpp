#include "headroom/estimator/spec.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"
#include "headroom/core/read_file.hpp"

#ifndef HEADROOM_SOURCE_DATA_DIR
#define HEADROOM_SOURCE_DATA_DIR "data"
#endif  // HEADROOM_SOURCE_DATA_DIR

namespace headroom {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// Largest model dimension accepted, as the CLI's counts: products of two stay inside int64 (4·h of GPT-2's
// default FFN width included).
constexpr std::int64_t kMaxDimension = 1'000'000'000'000;
constexpr int kMaxJsonDepth = 64;  // the deepest shipped file (the profile schema) nests 10 levels

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string singular(std::string_view kind) {  // "models" -> "model"
  return std::string(kind.substr(0, kind.size() - 1));
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

void check_model_shape(const ModelSpec& m, std::string_view where) {
  const std::string w(where);
  const std::pair<const char*, std::int64_t> dimensions[] = {
      {"hidden_size", m.hidden_size},
      {"num_layers", m.num_layers},
      {"num_attention_heads", m.num_heads},
      {"num_kv_heads", m.num_kv_heads},
      {"ffn_hidden_size", m.ffn_hidden_size},
      {"vocab_size", m.vocab_size},
      {"max_context_tokens", m.max_context},
      {"head_dim", m.head_dim},
      {"num_experts", m.num_experts},
      {"moe_ffn_hidden_size", m.moe_ffn_hidden_size},
      {"moe_shared_expert_intermediate_size", m.shared_expert_ffn_hidden_size},
      {"q_lora_rank", m.q_lora_rank},
      {"kv_lora_rank", m.kv_lora_rank},
      {"qk_nope_head_dim", m.qk_nope_head_dim},
      {"qk_rope_head_dim", m.qk_rope_head_dim},
      {"v_head_dim", m.v_head_dim}};
  for (const auto& [key, value] : dimensions) {
    if (value > kMaxDimension) throw Error(w + ": " + key + " " + std::to_string(value) + " is larger than 10^12");
  }
  if (m.head_dim == 0 && m.hidden_size % m.num_heads != 0)
    throw Error(w + ": hidden_size " + std::to_string(m.hidden_size) + " is not a multiple of num_attention_heads " +
                std::to_string(m.num_heads) + " (give head_dim for heads of another width)");
  if (m.num_experts > 0) {
    if (m.moe_router_topk < 1 || m.moe_router_topk > m.num_experts)
      throw Error(w + ": moe_router_topk " + std::to_string(m.moe_router_topk) + " must be 1.." +
                  std::to_string(m.num_experts) + " (the experts)");
    if (m.moe_ffn_hidden_size < 1) throw Error(w + ": a model with experts needs moe_ffn_hidden_size");
    if (m.first_dense_layers >= m.num_layers)
      throw Error(w + ": first_dense_layers " + std::to_string(m.first_dense_layers) + " leaves no layer of the " +
                  std::to_string(m.num_layers) + " with experts");
    // transformer_config.py __post_init__: the groups split the experts evenly and are given with group_topk;
    // moe_utils.py group_limited_topk scores a group by its top-(k/group_topk) experts, so group_topk <= k.
    const std::int64_t groups = m.moe_router_num_groups, chosen = m.moe_router_group_topk;
    if (chosen < 0 || groups < 0 ||
        (chosen > 0 && (groups < 1 || m.num_experts % groups != 0 || chosen > groups || chosen > m.moe_router_topk)))
      throw Error(w + ": moe_router_group_topk " + std::to_string(chosen) + " of moe_router_num_groups " +
                  std::to_string(groups) + ": valid: groups dividing the " + std::to_string(m.num_experts) +
                  " experts and 1.." + std::to_string(m.moe_router_topk) + " (moe_router_topk) of them chosen");
  }
  if (latent_attention(m)) {
    if (m.qk_nope_head_dim < 1 || m.qk_rope_head_dim < 1 || m.v_head_dim < 1)
      throw Error(w + ": latent attention (kv_lora_rank " + std::to_string(m.kv_lora_rank) +
                  ") needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim");
    if (m.num_kv_heads != m.num_heads || m.qkv_bias || m.linear_biases)
      throw Error(w + ": latent attention has a key and value per head and no biases (num_kv_heads " +
                  std::to_string(m.num_kv_heads) + ", num_attention_heads " + std::to_string(m.num_heads) + ")");
  }
  if (m.alibi && latent_attention(m))
    throw Error(w + ": alibi with latent attention (kv_lora_rank " + std::to_string(m.kv_lora_rank) +
                "): no model has both, and headroom prices neither with the other");
  if (m.window_skip_freq == 1 || m.window_skip_freq > m.num_layers)
    throw Error(w + ": window_attn_skip_freq " + std::to_string(m.window_skip_freq) + " must be 0 (every layer " +
                "windowed) or 2.." + std::to_string(m.num_layers) + " (every N-th layer attends fully)");
  if (m.shared_norm && (!m.parallel_residual || m.sandwich_norms))
    throw Error(w + ": shared_norm (one norm for attention and MLP) needs parallel_residual, without sandwich_norms");
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0)
    throw Error(w + ": num_kv_heads " + std::to_string(m.num_kv_heads) + " must divide num_attention_heads " +
                std::to_string(m.num_heads));
}

namespace {

// Reads an integer field of a Hugging Face config, trying the key names that model families use.
std::int64_t hf_int(const json& j, std::initializer_list<const char*> keys, std::string_view where,
                    std::int64_t fallback = -1) {
  for (const char* key : keys) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0 || it->get<std::int64_t>() > kMaxDimension)
      throw Error(std::string(where) + ": " + key + " must be a positive integer up to 10^12 (got " + it->dump() + ")");
    return it->get<std::int64_t>();
  }
  if (fallback >= 0) return fallback;
  throw Error(std::string(where) + ": Hugging Face config is missing '" + *keys.begin() + "'");
}

// A string or boolean field of a Hugging Face config; another type is an Error naming the key and the file.
std::string hf_string(const json& j, const char* key, std::string_view where, const std::string& fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string())
    throw Error(std::string(where) + ": " + key + " is a " + it->type_name() + " (expected a string)");
  return it->get<std::string>();
}

// A probability of a Hugging Face config (dropout rates), 0 where absent; not a number in [0, 1] is an Error naming the
// key.
double hf_probability(const json& j, std::initializer_list<const char*> keys, std::string_view where) {
  for (const char* key : keys) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1)
      throw Error(std::string(where) + ": " + key + " must be a number in [0, 1] (got " + it->dump() + ")");
    return it->get<double>();
  }
  return 0.0;
}

bool hf_bool(const json& j, const char* key, std::string_view where, bool fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw Error(std::string(where) + ": " + key + " is a " + it->type_name() + " (expected true or false)");
  return it->get<bool>();
}

// Keys of current Hugging Face configs that change the arithmetic in ways headroom does not price yet: a config
// carrying one is refused, naming it, rather than priced as a dense Llama (a Mixtral-8x7B config came out as
// a 7.24B model). Sources: transformers' configuration_{mixtral,qwen2_moe,qwen3_moe,deepseek_v3,gemma2}.py.
void refuse_unpriced_hf_keys(const json& j, const std::string& type, std::string_view where) {
  // Layers that are not attention + MLP: state-space (Mamba), recurrent or linear-attention blocks, alone or mixed with
  // attention (configuration_{jamba,nemotron_h,falcon_h1,zamba2,bamba,recurrent_gemma,qwen3_next,lfm2}.py). Every
  // layer would be priced as attention + MLP.
  for (const char* hybrid :
       {"jamba", "nemotron_h", "falcon_h1", "falcon_mamba", "mamba", "mamba2", "zamba", "zamba2", "bamba",
        "granitemoehybrid", "recurrent_gemma", "qwen3_next", "lfm2", "minimax", "rwkv", "xlstm", "plamo2"})
    if (type == hybrid)
      throw Error(std::string(where) + ": model_type " + type +
                  " has state-space, recurrent or linear-attention layers, which headroom cannot price (attention + "
                  "MLP decoders only)");
  for (const char* key : {"hybrid_override_pattern", "layers_block_type", "attn_layer_period", "block_types",
                          "ssm_state_size", "mamba_d_state", "linear_num_key_heads"})
    if (j.contains(key))
      throw Error(std::string(where) + ": " + key +
                  " describes layers that are not attention + MLP (state-space, recurrent or linear-attention "
                  "blocks), which headroom cannot price");
  if (const auto it = j.find("layer_types"); it != j.end() && it->is_array())
    for (const auto& kind : *it)
      if (kind != "sliding_attention" && kind != "full_attention")
        throw Error(std::string(where) + ": layer_types entry " + kind.dump().substr(0, 40) +
                    " is not sliding_attention or full_attention: headroom prices attention + MLP decoders only");
  // Experts on some layers only (Qwen's decoder_sparse_step, mlp_only_layers; DeepSeek's moe_layer_freq): not priced.
  for (const char* key : {"decoder_sparse_step", "moe_layer_freq"}) {
    const auto it = j.find(key);
    if (it != j.end() && !it->is_null() && *it != 1)
      throw Error(std::string(where) + ": " + key + " = " + it->dump() +
                  ": experts on every N-th layer only cannot be priced by headroom yet (1 only)");
  }
  if (const auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null() && !(it->is_array() && it->empty()))
    throw Error(std::string(where) + ": mlp_only_layers = " + it->dump().substr(0, 60) +
                ": dense layers between expert layers cannot be priced by headroom yet (empty only)");
  // Llama-family configs (configuration_llama.py, _mistral, _qwen3) may put biases on the attention projections
  // or the MLP; false by default, priced nowhere yet.
  // Dropout on the residual stream (GPT-NeoX's hidden_dropout, GPT-2's and Phi's resid_pdrop) is priced with the
  // embeddings' as Megatron-LM's --hidden-dropout covers both (memory.cpp dropout_mask_units): one without the other
  // is refused.
  const char* residual_key = j.contains("hidden_dropout") ? "hidden_dropout" : "resid_pdrop";
  const double residual_dropout = hf_probability(j, {"hidden_dropout", "resid_pdrop"}, where);
  for (const char* embedding_key : {"embd_pdrop", "emb_pdrop"})  // GPT-2's, MPT's
    if (j.contains(embedding_key) && (hf_probability(j, {embedding_key}, where) > 0) != (residual_dropout > 0))
      throw Error(std::string(where) + ": " + embedding_key + " = " + j.at(embedding_key).dump() + " with " +
                  residual_key + " = " + (j.contains(residual_key) ? j.at(residual_key).dump() : std::string("0")) +
                  ": dropout on the embeddings alone, or on the residual stream alone, is not priced (both or "
                  "neither)");
  // gpt-oss's experts and router, and GPT-NeoX's MLP, always have biases (modeling_gpt_oss.py GptOssExperts,
  // GptOssTopKRouter; modeling_gpt_neox.py GPTNeoXMLP); with their attention's (attention_bias; GPT-NeoX's default
  // true) every linear layer has one, which is priced.
  const bool all_biased = type == "gpt_oss" || type == "gpt_neox";
  if (all_biased && !hf_bool(j, "attention_bias", where, type == "gpt_neox"))
    throw Error(std::string(where) + ": attention_bias = false with " + type +
                "'s biased MLP: biases on some linear layers only cannot be priced by headroom yet (true only)");
  for (const char* key : {"attention_bias", "mlp_bias"})
    if (!all_biased && hf_bool(j, key, where, false))
      throw Error(std::string(where) + ": " + key +
                  " = true: biases on these projections cannot be priced by headroom yet (Qwen2's q/k/v biases and "
                  "GPT's biases on every linear layer can)");
}

// Which layers attend within the sliding window, as Megatron-LM's --window-attn-skip-freq N (every N-th layer, counted
// from 1, attends fully; 0: every layer windowed), by transformers' configuration_<type>.py: Gemma 2 every other
// layer from the first (layer_types' default (i + 1) % 2), Gemma 3 all but every sliding_window_pattern-th (default
// 6), an explicit layer_types list where it has that form, any other type (Mistral-7B v0.1) every layer; nullopt: no
// layer is windowed (Qwen without use_sliding_window).
std::optional<std::int64_t> hf_window_skip_freq(const json& j, const std::string& type, std::int64_t layers,
                                                std::string_view where) {
  const std::string w(where);
  if (const auto it = j.find("layer_types"); it != j.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<std::int64_t>(it->size()) != layers)
      throw Error(w + ": layer_types must be a list of " + std::to_string(layers) + " layer kinds");
    std::vector<bool> windowed;
    for (const auto& kind : *it) windowed.push_back(kind == "sliding_attention");  // kinds: refuse_unpriced_hf_keys
    if (std::none_of(windowed.begin(), windowed.end(), [](bool b) { return b; })) return std::nullopt;
    // The first full layer fixes N (0 if none); every layer must then follow the pattern.
    const auto first_full = std::find(windowed.begin(), windowed.end(), false);
    const std::int64_t freq = first_full == windowed.end() ? 0 : (first_full - windowed.begin()) + 1;
    bool matches = freq != 1;
    for (std::int64_t i = 0; i < layers && matches; ++i)
      matches = windowed[static_cast<std::size_t>(i)] == (freq == 0 || (i + 1) % freq != 0);
    if (matches) return freq;
    throw Error(w +
                ": layer_types mixes windowed and full layers in a pattern headroom cannot price (every N-th "
                "layer full, or all windowed)");
  }
  if (type == "gemma2") return 2;
  if (type == "gemma3" || type == "gemma3_text") return hf_int(j, {"sliding_window_pattern"}, where, 6);
  if (type.rfind("qwen", 0) == 0) {
    if (!hf_bool(j, "use_sliding_window", where, false)) return std::nullopt;
    // transformers windows the layers from max_window_layers on: all of them, none, or a tail headroom cannot price.
    const auto it = j.find("max_window_layers");
    if (it != j.end() && !it->is_null() && (!it->is_number_integer() || it->get<std::int64_t>() < 0))
      throw Error(w + ": max_window_layers must be a non-negative integer (got " + it->dump() + ")");
    const std::int64_t full_layers = it == j.end() || it->is_null() ? layers : it->get<std::int64_t>();
    if (full_layers == 0) return 0;
    if (full_layers >= layers) return std::nullopt;
    throw Error(w + ": use_sliding_window with max_window_layers " + std::to_string(full_layers) +
                " (windows on the last layers only) cannot be priced by headroom yet");
  }
  if (!hf_bool(j, "use_sliding_window", where, true)) return std::nullopt;
  return 0;
}

// A count of a Hugging Face config that may be 0 or absent (-1); a negative or non-integer value names the key.
std::int64_t hf_count(const json& j, const char* key, std::string_view where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 0 || it->get<std::int64_t>() > kMaxDimension)
    throw Error(std::string(where) + ": " + key + " must be a non-negative integer up to 10^12 (got " + it->dump() +
                ")");
  return it->get<std::int64_t>();
}

// A positive number of a Hugging Face config, 0 where absent or null; another value is an Error naming the key.
double hf_positive(const json& j, const char* key, std::string_view where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return 0.0;
  if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
    throw Error(std::string(where) + ": " + key + " must be a positive number (got " + it->dump() + ")");
  return it->get<double>();
}

// Whether a gated MLP's activation is a GELU (Gemma's hidden_activation "gelu_pytorch_tanh", or "gelu") rather than
// SiLU; the names of transformers' ACT2FN (activations.py).
// What changes the arithmetic but not the cost (ModelSpec): RoPE's base and scaling (rope_theta and rope_scaling, or
// transformers' newer rope_parameters), the norms' epsilon, and Gemma's (1 + w) norms, scaled embeddings, soft caps
// and query scale (modeling_gemma2.py, configuration_gemma2.py).
void read_hf_arithmetic(const json& j, const std::string& type, ModelSpec& m, std::string_view where) {
  const auto params = j.find("rope_parameters");
  const bool has_params = params != j.end() && params->is_object();
  m.rope_theta = hf_positive(has_params ? *params : j, "rope_theta", where);
  if (m.rope_theta == 0 && has_params) m.rope_theta = hf_positive(j, "rope_theta", where);
  const auto scaling = has_params ? params : j.find("rope_scaling");
  if (scaling != j.end() && scaling->is_object()) {
    std::string kind = hf_string(*scaling, "rope_type", where, hf_string(*scaling, "type", where, "default"));
    if (kind != "default") {
      m.rope_scaling = kind;
      m.rope_scaling_factor = hf_positive(*scaling, "factor", where);
    }
  }
  m.norm_eps = hf_positive(j, "rms_norm_eps", where);
  if (m.norm_eps == 0) m.norm_eps = hf_positive(j, "layer_norm_epsilon", where);
  if (m.norm_eps == 0) m.norm_eps = hf_positive(j, "layer_norm_eps", where);
  const bool gemma = type.rfind("gemma", 0) == 0;
  m.norm_plus_one = m.scaled_embeddings = gemma;
  m.attention_softcap = hf_positive(j, "attn_logit_softcapping", where);
  m.final_softcap = hf_positive(j, "final_logit_softcapping", where);
  m.query_pre_attn_scalar = gemma ? hf_count(j, "query_pre_attn_scalar", where) : 0;
  if (m.query_pre_attn_scalar < 0) m.query_pre_attn_scalar = 0;
}

// The experts of a Hugging Face MoE config (transformers' configuration_{mixtral,qwen2_moe,qwen3_moe,deepseek_v3}.py):
// num_local_experts (Mixtral, whose intermediate_size is each expert's) or num_experts / n_routed_experts with
// moe_intermediate_size; num_experts_per_tok; Qwen2-MoE's gated shared_expert_intermediate_size, DeepSeek's
// n_shared_experts of moe_intermediate_size and first_k_dense_replace. One expert or none: a dense model.
void read_hf_experts(const json& j, ModelSpec& m, std::string_view where) {
  std::int64_t experts = -1;
  const char* experts_key = nullptr;
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (experts >= 0) break;
    experts = hf_count(j, key, where);
    experts_key = key;
  }
  // Top-k routing over fewer than k experts is no model: not priced as a dense one.
  if (const std::int64_t k = hf_count(j, "num_experts_per_tok", where); experts >= 0 && k > experts)
    throw Error(std::string(where) + ": " + experts_key + " " + std::to_string(experts) +
                " is fewer than num_experts_per_tok " + std::to_string(k) + " (top-k routing needs k experts or more)");
  if (experts <= 1) return;
  m.num_experts = experts;
  m.moe_router_topk = hf_int(j, {"num_experts_per_tok"}, where);
  // gpt-oss repeats the count as experts_per_token (configuration_gpt_oss.py): the same number, or no model.
  if (const std::int64_t again = hf_count(j, "experts_per_token", where); again >= 0 && again != m.moe_router_topk)
    throw Error(std::string(where) + ": experts_per_token " + std::to_string(again) +
                " differs from num_experts_per_tok " + std::to_string(m.moe_router_topk));
  m.moe_ffn_hidden_size = hf_int(j, {"moe_intermediate_size", "intermediate_size"}, where);
  if (const std::int64_t shared = hf_count(j, "shared_expert_intermediate_size", where); shared > 0) {
    m.shared_expert_ffn_hidden_size = shared;
    m.shared_expert_gate = true;  // modeling_qwen2_moe.py: shared_expert_gate, Linear(h, 1)
  }
  if (const std::int64_t shared = hf_count(j, "n_shared_experts", where); shared > 0)
    m.shared_expert_ffn_hidden_size = shared * m.moe_ffn_hidden_size;
  m.first_dense_layers = std::max<std::int64_t>(0, hf_count(j, "first_k_dense_replace", where));
  // Group-limited routing: DeepSeek-V2's "group_limited_greedy" and V3's "noaux_tc" choose topk_group of n_group
  // groups first (modeling_deepseek.py MoEGate), "greedy" all experts; a config without topk_method (GLM-4.5's)
  // routes by its groups as V3 does (modeling_glm4_moe.py Glm4MoeTopkRouter).
  const std::string method = hf_string(j, "topk_method", where, "");
  if (!method.empty() && method != "greedy" && method != "group_limited_greedy" && method != "noaux_tc")
    throw Error(std::string(where) + ": topk_method '" + method.substr(0, 40) +
                "' is a routing headroom does not know (valid: greedy, group_limited_greedy, noaux_tc)");
  if (const std::int64_t groups = hf_count(j, "n_group", where); groups > 1 && method != "greedy") {
    m.moe_router_num_groups = groups;
    m.moe_router_group_topk = hf_int(j, {"topk_group"}, where);
  }
}

// Every top-level key of a Hugging Face config that headroom knows, the one list of them: `read` keys are priced (read
// into the model, by model_from_hf_config and the helpers above, which refuse the values they cannot price: biases,
// dropout outside attention, experts on some layers only, windows on some layers); `inert` keys change nothing
// headroom prices: token ids, dtypes and library settings, norm epsilons, RoPE's base and scaling (a rotation without
// weights, its elementwise cost inside the fitted elementwise passes), logit soft-capping and scalar multipliers
// and clamps (elementwise on tensors priced anyway), the router's scoring and loss coefficients (which experts a token
// picks, not how many; its groups are read: they bound the nodes a token reaches) and an inference checkpoint's
// quantization. Any other key is refused, naming it: headroom cannot tell whether it changes the model. Sources:
// transformers' configuration_<model_type>.py and PretrainedConfig (configuration_utils.py).
enum class HfKeyUse { read, inert };
struct HfKey {
  std::string_view name;
  HfKeyUse use;
  std::string_view owner = {};  // the model_types whose modelling reads it, by spaces (refuse_foreign_hf_keys)
};
constexpr auto R = HfKeyUse::read;
constexpr auto I = HfKeyUse::inert;
// clang-format off
constexpr std::array kHfConfigKeys = std::to_array<HfKey>({
    // the shape, the MLP and the attention (read)
    {"model_type", R}, {"hidden_size", R}, {"n_embd", R}, {"d_model", R}, {"num_hidden_layers", R}, {"n_layer", R},
    {"num_layers", R}, {"num_attention_heads", R}, {"n_head", R}, {"num_key_value_heads", R}, {"head_dim", R},
    {"vocab_size", R}, {"max_position_embeddings", R}, {"n_positions", R}, {"n_ctx", R}, {"intermediate_size", R},
    {"n_inner", R}, {"ffn_dim", R}, {"hidden_act", R}, {"hidden_activation", R}, {"activation_function", R},
    {"tie_word_embeddings", R}, {"attention_bias", R}, {"mlp_bias", R}, {"attention_dropout", R},
    {"attn_pdrop", R}, {"hidden_dropout", R}, {"resid_pdrop", R}, {"embd_pdrop", R}, {"partial_rotary_factor", R},
    {"rotary_pct", R}, {"use_parallel_residual", R, "gpt_neox"}, {"ffn_hidden_size", R}, {"activation", R},
    // Falcon's and Phi's own (configuration_falcon.py, configuration_phi.py)
    {"multi_query", R, "falcon"}, {"new_decoder_architecture", R, "falcon"}, {"parallel_attn", R, "falcon"},
    {"bias", R, "falcon"}, {"alibi", R, "falcon"}, {"num_kv_heads", R, "falcon"},
    {"num_ln_in_parallel_attn", R, "falcon"}, {"apply_residual_connection_post_layernorm", R, "falcon bloom"},
    {"qk_layernorm", R, "phi"},
    // BLOOM's (configuration_bloom.py; the Megatron-DeepSpeed export's fusion and inference switches are inert)
    {"n_embed", R, "bloom"}, {"seq_length", R, "bloom"}, {"attention_softmax_in_fp32", I},
    {"masked_softmax_fusion", I}, {"bias_dropout_fusion", I}, {"offset_alibi", I}, {"skip_bias_add", I},
    {"skip_bias_add_qkv", I}, {"slow_but_exact", I}, {"unk_token_id", I},
    // MPT's (llm-foundry's configuration_mpt.py; its attention and FFN blocks read by read_hf_mpt)
    {"n_heads", R, "mpt"}, {"n_layers", R, "mpt"}, {"expansion_ratio", R, "mpt"}, {"max_seq_len", R, "mpt"},
    {"emb_pdrop", R, "mpt"}, {"learned_pos_emb", R, "mpt"}, {"attn_config", R, "mpt"}, {"ffn_config", R, "mpt"},
    {"no_bias", R, "mpt"}, {"norm_type", R, "mpt"}, {"fc_type", R, "mpt"}, {"block_overrides", R, "mpt"},
    {"logit_scale", I}, {"embedding_fraction", I}, {"init_device", I}, {"init_config", I}, {"verbose", I},
    {"tokenizer_name", I}, {"use_pad_tok_in_ffn", I},
    // windows
    {"sliding_window", R}, {"layer_types", R}, {"sliding_window_pattern", R}, {"use_sliding_window", R},
    {"max_window_layers", R},
    // experts and latent attention
    {"num_local_experts", R}, {"num_experts", R}, {"n_routed_experts", R}, {"num_experts_per_tok", R},
    {"moe_intermediate_size", R}, {"shared_expert_intermediate_size", R}, {"n_shared_experts", R},
    {"first_k_dense_replace", R}, {"decoder_sparse_step", R}, {"moe_layer_freq", R}, {"mlp_only_layers", R},
    {"kv_lora_rank", R}, {"q_lora_rank", R}, {"qk_nope_head_dim", R}, {"qk_rope_head_dim", R}, {"v_head_dim", R},
    {"num_nextn_predict_layers", R}, {"experts_per_token", R},
    // the checkpoint and the library (inert)
    {"_name_or_path", I}, {"architectures", I}, {"auto_map", I}, {"transformers_version", I}, {"torch_dtype", I},
    {"dtype", I}, {"use_cache", I}, {"initializer_range", I}, {"bos_token_id", I}, {"eos_token_id", I},
    {"pad_token_id", I}, {"tokenizer_class", I}, {"pretraining_tp", I}, {"cache_implementation", I},
    {"quantization_config", I}, {"return_dict", I}, {"output_attentions", I}, {"output_hidden_states", I},
    {"torchscript", I}, {"attn_implementation", I}, {"_attn_implementation_autoset", I},
    // norms, positions, logits (inert)
    {"rms_norm_eps", I}, {"layer_norm_eps", I}, {"layer_norm_epsilon", I}, {"norm_eps", I}, {"rope_theta", I},
    {"rope_scaling", I}, {"rope_parameters", I}, {"rope_local_base_freq", I},
    {"original_max_position_embeddings", I}, {"attn_logit_softcapping", I}, {"final_logit_softcapping", I},
    {"query_pre_attn_scalar", I}, {"embedding_multiplier", I}, {"logits_scaling", I}, {"residual_multiplier", I},
    {"swiglu_limit", I}, {"initial_context_length", I}, {"rotary_emb_base", I}, {"classifier_dropout", I},
    {"attention_multiplier", I}, {"scale_attn_weights", I}, {"scale_attn_by_inverse_layer_idx", I},
    {"reorder_and_upcast_attn", I}, {"summary_type", I}, {"summary_use_proj", I}, {"summary_activation", I},
    {"summary_proj_to_labels", I}, {"summary_first_dropout", I}, {"task_specific_params", I},
    // the router (inert)
    {"norm_topk_prob", I}, {"scoring_func", I}, {"topk_method", R}, {"n_group", R}, {"topk_group", R},
    {"routed_scaling_factor", I}, {"output_router_logits", I}, {"router_aux_loss_coef", I}, {"aux_loss_alpha", I},
    {"seq_aux", I}, {"router_jitter_noise", I}, {"ep_size", I},
});
// clang-format on

// A key that one model type's modelling reads (kHfConfigKeys' owner) in another type's config: that modelling does not
// read it, so it is refused rather than ignored.
void refuse_foreign_hf_keys(const json& j, const std::string& type, std::string_view where) {
  const auto owned = [&type](std::string_view owners) {
    for (std::size_t at = 0; at <= owners.size();) {
      const std::size_t end = std::min(owners.find(' ', at), owners.size());
      if (owners.substr(at, end - at) == type) return true;
      at = end + 1;
    }
    return false;
  };
  for (const HfKey& k : kHfConfigKeys)
    if (!k.owner.empty() && !owned(k.owner) && j.contains(k.name)) {
      std::string owners(k.owner);
      std::replace(owners.begin(), owners.end(), ' ', '/');
      throw Error(std::string(where) + ": " + std::string(k.name) + " is a " + owners +
                  " config's key, and model_type is " + (type.empty() ? std::string("not given") : type.substr(0, 40)) +
                  ": headroom cannot tell what it changes there");
    }
}

// A key of a Hugging Face config that kHfConfigKeys does not list: an Error naming it and its value.
void refuse_unknown_hf_keys(const json& j, std::string_view where) {
  for (const auto& [key, value] : j.items()) {
    const bool known =
        std::any_of(kHfConfigKeys.begin(), kHfConfigKeys.end(), [&key = key](const HfKey& k) { return k.name == key; });
    if (!known)
      throw Error(std::string(where) + ": " + key.substr(0, 60) + " = " + value.dump().substr(0, 40) +
                  " is a key headroom does not know, so it cannot tell whether it changes the model (known keys: "
                  "kHfConfigKeys in estimator/src/spec.cpp)");
  }
}

// The activations of a config's MLP (hidden_activation, hidden_act, activation_function or Falcon's activation;
// transformers' activations.py ACT2FN names): a gated family's (SwiGLU, Gemma's GeGLU) priced as one gated MLP, a plain
// family's GELU or squared ReLU (Nemotron's relu2) as two GEMMs. Another activation is refused, naming it.
Mlp hf_mlp(const json& j, bool gated, std::string_view where) {
  const char* key = "hidden_activation";
  for (const char* k : {"hidden_activation", "hidden_act", "activation_function", "activation"})
    if (j.contains(k) && !j.at(k).is_null()) {
      key = k;
      break;
    }
  const std::string act = hf_string(j, key, where, "");
  const bool gelu =
      act == "gelu" || act == "gelu_new" || act == "gelu_fast" || act == "gelu_pytorch_tanh" || act == "gelu_accurate";
  if (gated && (act.empty() || act == "silu" || act == "swish")) return Mlp::swiglu;
  if (gated && gelu) return Mlp::geglu;  // Gemma's GeGLU: SwiGLU's three projections, exported as itself
  if (!gated && (act.empty() || gelu)) return Mlp::gelu;
  if (!gated && act == "relu2") return Mlp::relu2;
  throw Error(std::string(where) + ": " + key + " = \"" + act.substr(0, 40) +
              "\" is not an activation headroom prices " +
              (gated ? "in a gated MLP (silu, swish, gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, gelu_accurate)"
                     : "in this MLP of up and down projections (gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, "
                       "gelu_accurate, relu2)"));
}

// The Hugging Face model types headroom models, the one list of them: Llama-shaped decoders (pre-norm attention, then
// an MLP; Qwen2's q/k/v biases, Gemma's extra norms, Qwen3's q/k norms, windows, experts and DeepSeek's latent
// attention read from their configs) and GPT-2. `gated`: the MLP has gate, up and down projections (SwiGLU; Gemma's
// GeGLU prices the same), else two matrices, by transformers' modeling_<type>.py; `layernorm`: LayerNorm (weight and
// bias; Nemotron's LayerNorm1P too), else RMSNorm; `biased`: a bias on every linear layer (Falcon's `bias` key is read
// instead; MPT's no_bias by read_hf_mpt). GPT-NeoX's, Falcon's and Phi's parallel residuals are priced. Another type or
// none is refused, naming it, not priced as a Llama.
struct HfModelType {
  std::string_view name;
  bool gated, layernorm = false, biased = false;
};
// clang-format off
constexpr std::array<HfModelType, 23> kModelledHfTypes{{
    {"llama", true}, {"mistral", true}, {"mixtral", true}, {"qwen2", true}, {"qwen2_moe", true}, {"qwen3", true},
    {"qwen3_moe", true}, {"gemma", true}, {"gemma2", true}, {"gemma3", true}, {"gemma3_text", true}, {"phi3", true},
    {"granite", true}, {"deepseek_v2", true}, {"deepseek_v3", true}, {"gpt_oss", true, false, true},
    {"gpt_neox", false, true, true}, {"falcon", false, true}, {"phi", false, true, true}, {"gpt2", false, true, true},
    {"nemotron", false, true}, {"bloom", false, true, true}, {"mpt", false, true}}};
// clang-format on

// The entry of a config's model_type; an Error naming the type (or its absence) and the modelled ones otherwise.
const HfModelType& modelled_hf_type(const std::string& type, std::string_view where) {
  for (const HfModelType& t : kModelledHfTypes)
    if (t.name == type) return t;
  std::string known;
  for (const HfModelType& t : kModelledHfTypes) known += (known.empty() ? "" : ", ") + std::string(t.name);
  throw Error(std::string(where) + ": " +
              (type.empty() ? std::string("no model_type") : "model_type " + type.substr(0, 40) + " is not modelled") +
              " (headroom prices the Hugging Face model types " + known +
              "; another model takes a headroom model spec, data/schema/model.schema.json)");
}

}  // namespace

json parse_json_strict(std::string_view text, std::string_view where) {
  // Deeper nesting than any spec has is refused while parsing: nlohmann's dump() and the schema checker recurse,
  // and a file of nested brackets would overflow the stack. nlohmann keeps the last of two equal keys in an object; a
  // spec with "hidden_size" twice is ambiguous, so the keys of every open object are tracked in the same pass.
  const std::string who(where);
  std::vector<std::set<std::string, std::less<>>> open;
  const json::parser_callback_t check = [&who, &open](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth)
      throw Error("malformed JSON in " + who + ": nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    if (event == json::parse_event_t::object_start) open.emplace_back();
    if (event == json::parse_event_t::object_end) open.pop_back();
    if (event == json::parse_event_t::key && !open.back().insert(parsed.get<std::string>()).second)
      throw Error("malformed JSON in " + who + ": the key \"" + parsed.get<std::string>() +
                  "\" appears twice in one object");
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number beyond a double ("1e400"). nlohmann's message is
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..."
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    throw Error("malformed JSON in " + who + ": " + what);
  }
}

json read_json_file(const fs::path& path) { return parse_json_strict(read_file_bounded(path), path.string()); }

fs::path default_data_dir() {
  if (const char* env = std::getenv("HEADROOM_DATA_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  if (fs::is_directory(HEADROOM_SOURCE_DATA_DIR, ec)) return HEADROOM_SOURCE_DATA_DIR;
  // An installed binary (cmake --install): PREFIX/bin/headroom finds PREFIX/share/headroom/data.
  fs::path installed =
      fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "share" / "headroom" / "data";
  if (!ec && fs::is_directory(installed, ec)) return installed;
  return HEADROOM_SOURCE_DATA_DIR;
}

ModelSpec model_from_json(const json& j, std::string_view where) {
  ModelSpec m;
  m.name = j.at("name").get<std::string>();
  m.hidden_size = j.at("hidden_size").get<std::int64_t>();
  m.num_layers = j.at("num_layers").get<std::int64_t>();
  m.num_heads = j.at("num_attention_heads").get<std::int64_t>();
  m.num_kv_heads = j.at("num_kv_heads").get<std::int64_t>();
  m.head_dim = j.value("head_dim", std::int64_t{0});
  m.ffn_hidden_size = j.at("ffn_hidden_size").get<std::int64_t>();
  m.vocab_size = j.at("vocab_size").get<std::int64_t>();
  m.max_context = j.at("max_context_tokens").get<std::int64_t>();
  m.tied_embeddings = j.at("tie_word_embeddings").get<bool>();
  m.norm = j.at("norm").get<std::string>() == "layernorm" ? Norm::layernorm : Norm::rmsnorm;
  const std::string activation = j.at("activation").get<std::string>();
  m.mlp = activation == "gelu"    ? Mlp::gelu
          : activation == "relu2" ? Mlp::relu2
          : activation == "geglu" ? Mlp::geglu
                                  : Mlp::swiglu;
  m.linear_biases = j.value("linear_biases", false);
  m.qkv_bias = j.value("qkv_bias", false);
  m.attention_sinks = j.value("attention_sinks", false);
  m.learned_positions = j.value("learned_position_embeddings", false);
  m.alibi = j.value("alibi", false);
  m.embedding_norm = j.value("embedding_norm", false);
  m.attention_dropout = j.value("attention_dropout", 0.0);
  m.hidden_dropout = j.value("hidden_dropout", 0.0);
  m.sandwich_norms = j.value("sandwich_norms", false);
  m.parallel_residual = j.value("parallel_residual", false);
  m.shared_norm = j.value("shared_norm", false);
  m.lm_head_bias = j.value("lm_head_bias", false);
  m.qk_norm = j.value("qk_norm", false);
  m.sliding_window = j.value("sliding_window", std::int64_t{0});
  m.window_skip_freq = j.value("window_attn_skip_freq", std::int64_t{0});
  m.num_experts = j.value("num_experts", std::int64_t{0});
  m.moe_router_topk = j.value("moe_router_topk", std::int64_t{0});
  m.moe_ffn_hidden_size = j.value("moe_ffn_hidden_size", std::int64_t{0});
  m.shared_expert_ffn_hidden_size = j.value("moe_shared_expert_intermediate_size", std::int64_t{0});
  m.shared_expert_gate = j.value("moe_shared_expert_gate", false);
  m.first_dense_layers = j.value("first_dense_layers", std::int64_t{0});
  m.moe_router_num_groups = j.value("moe_router_num_groups", std::int64_t{0});
  m.moe_router_group_topk = j.value("moe_router_group_topk", std::int64_t{0});
  m.q_lora_rank = j.value("q_lora_rank", std::int64_t{0});
  m.kv_lora_rank = j.value("kv_lora_rank", std::int64_t{0});
  m.qk_nope_head_dim = j.value("qk_nope_head_dim", std::int64_t{0});
  m.qk_rope_head_dim = j.value("qk_rope_head_dim", std::int64_t{0});
  m.v_head_dim = j.value("v_head_dim", std::int64_t{0});
  m.mtp_layers = j.value("mtp_layers", std::int64_t{0});
  m.rope_theta = j.value("rope_theta", 0.0);
  if (const auto it = j.find("rope_scaling"); it != j.end()) {
    m.rope_scaling = it->at("type").get<std::string>();
    m.rope_scaling_factor = it->at("factor").get<double>();
  }
  m.norm_eps = j.value("norm_eps", 0.0);
  m.norm_plus_one = j.value("norm_plus_one", false);
  m.scaled_embeddings = j.value("scaled_embeddings", false);
  m.attention_softcap = j.value("attention_softcap", 0.0);
  m.final_softcap = j.value("final_softcap", 0.0);
  m.query_pre_attn_scalar = j.value("query_pre_attn_scalar", std::int64_t{0});
  check_model_shape(m, where);
  return m;
}

namespace {
// Falcon (configuration_falcon.py, modeling_falcon.py FalconAttention and FalconDecoderLayer): biases on every linear
// layer or none (bias); attention and MLP in parallel (parallel_attn) off one input_layernorm, or off ln_attn and
// ln_mlp where num_ln_in_parallel_attn is 2 (the new decoder architecture's default); K and V with num_kv_heads heads
// under the new architecture, one head with multi_query, else a head each; ALiBi instead of RoPE with alibi.
void read_hf_falcon(const json& j, ModelSpec& m, std::string_view where) {
  const std::string w(where);
  m.alibi = hf_bool(j, "alibi", where, false);
  const bool new_arch = hf_bool(j, "new_decoder_architecture", where, false);
  m.linear_biases = hf_bool(j, "bias", where, false);
  m.parallel_residual = hf_bool(j, "parallel_attn", where, true);
  const std::int64_t norms = hf_int(j, {"num_ln_in_parallel_attn"}, where, new_arch ? 2 : 1);
  if (norms > 2) throw Error(w + ": num_ln_in_parallel_attn " + std::to_string(norms) + ": valid: 1 or 2");
  m.shared_norm = m.parallel_residual && norms == 1;
  m.num_kv_heads = new_arch                                 ? hf_int(j, {"num_kv_heads"}, where, m.num_heads)
                   : hf_bool(j, "multi_query", where, true) ? 1
                                                            : m.num_heads;
}

// A block of an MPT config (attn_config, ffn_config): an object (absent or null: {}), each key of which is `read` or
// `inert`; another key is refused, naming it.
json hf_block(const json& j, const char* block, std::initializer_list<std::string_view> read,
              std::initializer_list<std::string_view> inert, std::string_view where) {
  const auto it = j.find(block);
  if (it == j.end() || it->is_null()) return json::object();
  if (!it->is_object()) throw Error(std::string(where) + ": " + block + " is a " + it->type_name() + " (an object)");
  for (const auto& [key, value] : it->items()) {
    const auto is = [&key = key](std::string_view k) { return k == key; };
    if (std::none_of(read.begin(), read.end(), is) && std::none_of(inert.begin(), inert.end(), is))
      throw Error(std::string(where) + ": " + block + "." + key.substr(0, 60) + " = " + value.dump().substr(0, 40) +
                  " is a key headroom does not know, so it cannot tell whether it changes the model");
  }
  return *it;
}

// MPT as llm-foundry trains it (llm-foundry/models/mpt/configuration_mpt.py and modeling_mpt.py; transformers'
// configuration_mpt.py has the same keys): pre-norm blocks of attention (Wqkv, out_proj; kv_n_heads K and V heads for
// grouped-query attention, one for multi-query) and an FFN of expansion_ratio·d_model (mptmlp: up, GELU, down;
// mptglu: gated), no biases anywhere with no_bias (the norms' too: their h-wide biases are priced, h a norm), ALiBi or
// RoPE in attn_config, a learned position table only without either (MPTConfig turns learned_pos_emb off with them),
// tied embeddings by default. What changes the attention beyond that (q/k norms, a prefix-LM mask, attention within
// each packed sequence), another FFN type (experts, Transformer Engine's fused LayerNormMLP) or another linear layer
// is refused, naming the key.
void read_hf_mpt(const json& j, ModelSpec& m, std::string_view where) {
  const std::string w(where);
  const json attn = hf_block(j, "attn_config",
                             {"attn_type", "attn_pdrop", "alibi", "rope", "kv_n_heads", "qk_ln", "qk_gn", "prefix_lm",
                              "attn_uses_sequence_id", "sliding_window_size"},
                             {"attn_impl", "clip_qkv", "softmax_scale", "alibi_bias_max", "rope_theta", "rope_impl",
                              "rope_dail_config", "rope_hf_config", "attn_logit_softcapping", "fused_qkv"},
                             where);
  const json ffn = hf_block(j, "ffn_config", {"ffn_type", "ffn_act_fn", "ffn_hidden_size"}, {"fc_type"}, where);
  for (const char* key : {"qk_ln", "qk_gn", "prefix_lm", "attn_uses_sequence_id"})
    if (hf_bool(attn, key, where, false))
      throw Error(w + ": attn_config." + key + " = true: not priced (q/k norms over the whole width, a prefix-LM " +
                  "mask, and attention within each packed sequence change the attention's work)");
  const std::string type = hf_string(attn, "attn_type", where, "multihead_attention");
  if (type == "multiquery_attention")
    m.num_kv_heads = 1;
  else if (type == "grouped_query_attention")
    m.num_kv_heads = hf_int(attn, {"kv_n_heads"}, where);
  else if (type != "multihead_attention")
    throw Error(w + ": attn_config.attn_type '" + type.substr(0, 40) +
                "' (valid: multihead_attention, multiquery_attention, grouped_query_attention)");
  m.attention_dropout = hf_probability(attn, {"attn_pdrop"}, where);
  m.alibi = hf_bool(attn, "alibi", where, false);
  const bool rope = hf_bool(attn, "rope", where, false);
  if (m.alibi && rope) throw Error(w + ": attn_config has both alibi and rope: one position scheme, not two");
  m.learned_positions = hf_bool(j, "learned_pos_emb", where, true) && !m.alibi && !rope;
  if (const auto window = attn.find("sliding_window_size"); window != attn.end() && *window != -1)
    m.sliding_window = hf_int(attn, {"sliding_window_size"}, where);
  m.linear_biases = !hf_bool(j, "no_bias", where, false);
  const std::string norm = hf_string(j, "norm_type", where, "low_precision_layernorm");
  if (norm == "layernorm" || norm == "low_precision_layernorm")
    m.norm = Norm::layernorm;
  else if (norm == "rmsnorm" || norm == "low_precision_rmsnorm" || norm == "triton_rmsnorm")
    m.norm = Norm::rmsnorm;
  else
    throw Error(w + ": norm_type '" + norm.substr(0, 40) +
                "' (valid: layernorm, low_precision_layernorm, rmsnorm, low_precision_rmsnorm, triton_rmsnorm)");
  for (const json* block : {&j, &ffn})
    if (const auto fc = block->find("fc_type"); fc != block->end() && !fc->is_null()) {
      const json name = fc->is_object() ? fc->value("name", json()) : *fc;
      if (name != "torch")
        throw Error(w + ": fc_type " + fc->dump().substr(0, 40) + ": linear layers other than torch's (valid: torch)");
    }
  const std::string ffn_type = hf_string(ffn, "ffn_type", where, "mptmlp");
  if (ffn_type != "mptmlp" && ffn_type != "mptglu")
    throw Error(w + ": ffn_config.ffn_type '" + ffn_type.substr(0, 40) + "' (valid: mptmlp, mptglu)");
  std::string act = "gelu";  // llm-foundry's ffn.py: GELU (approximate 'none') unless ffn_act_fn names another
  if (const auto f = ffn.find("ffn_act_fn"); f != ffn.end() && !f->is_null()) {
    if (!f->is_object() || !f->contains("name") || !f->at("name").is_string())
      throw Error(w + ": ffn_config.ffn_act_fn " + f->dump().substr(0, 40) + " (an object with a name)");
    act = f->at("name").get<std::string>();
  }
  if (act != "gelu" && !(ffn_type == "mptglu" && (act == "silu" || act == "swish")))
    throw Error(w + ": ffn_config.ffn_act_fn '" + act.substr(0, 40) + "' is not an activation headroom prices (" +
                "gelu; silu in mptglu)");
  m.mlp = ffn_type == "mptmlp" ? Mlp::gelu : act == "gelu" ? Mlp::geglu : Mlp::swiglu;
  m.ffn_hidden_size = ffn.contains("ffn_hidden_size") && !ffn.at("ffn_hidden_size").is_null()
                          ? hf_int(ffn, {"ffn_hidden_size"}, where)
                          : hf_int(j, {"expansion_ratio"}, where, 4) * m.hidden_size;
  if (const auto it = j.find("block_overrides"); it != j.end() && !it->is_null() && !it->empty())
    throw Error(w + ": block_overrides: layers unlike the others are not priced");
}
}  // namespace

ModelSpec model_from_hf_config(const json& j, std::string_view name, std::string_view where) {
  if (!j.is_object()) throw Error(std::string(where) + ": a Hugging Face config must be a JSON object");
  // What is not modelled is refused first, by its keys (hybrid layers, ...) or by its type, before its shape is read.
  const std::string type = lower(hf_string(j, "model_type", where, ""));
  refuse_unpriced_hf_keys(j, type, where);
  const HfModelType& family = modelled_hf_type(type, where);
  refuse_foreign_hf_keys(j, type, where);
  refuse_unknown_hf_keys(j, where);
  ModelSpec m;
  m.name = std::string(name);
  m.hidden_size = hf_int(j, {"hidden_size", "n_embd", "d_model", "n_embed"}, where);
  m.num_layers = hf_int(j, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"}, where);
  m.num_heads = hf_int(j, {"num_attention_heads", "n_head", "n_heads"}, where);
  m.num_kv_heads = hf_int(j, {"num_key_value_heads"}, where, m.num_heads);
  m.vocab_size = hf_int(j, {"vocab_size"}, where);
  m.max_context =
      hf_int(j, {"max_position_embeddings", "n_positions", "n_ctx", "max_seq_len", "seq_length"}, where, 2048);
  // Falcon's and BLOOM's residual taken after the norm (apply_residual_connection_post_layernorm) is not priced.
  if (hf_bool(j, "apply_residual_connection_post_layernorm", where, false))
    throw Error(std::string(where) +
                ": apply_residual_connection_post_layernorm = true: a residual taken after the norm is not priced");
  // Gemma (256 = 3072/16 for 7B, 128 for Gemma-2-27B's 4608/32) and Qwen3 set the head width apart from h/a.
  m.head_dim = hf_int(j, {"head_dim"}, where, 0);
  if (m.head_dim * m.num_heads == m.hidden_size) m.head_dim = 0;  // h/a, as given: one spelling of one model
  const bool gpt2 = type == "gpt2";
  m.mlp = hf_mlp(j, family.gated, where);
  // GPT-NeoX: LayerNorm, biases on every linear layer (attention_bias, default true), attention and MLP in parallel
  // by default (configuration_gpt_neox.py use_parallel_residual), RoPE on rotary_pct of each head.
  // Phi (modeling_phi.py PhiDecoderLayer, PhiForCausalLM): LayerNorm, biases on every linear layer and the LM head,
  // attention and MLP in parallel off one input_layernorm, q and k LayerNorms with qk_layernorm.
  const bool neox = type == "gpt_neox", phi = type == "phi";
  m.norm = family.layernorm ? Norm::layernorm : Norm::rmsnorm;
  m.linear_biases = family.biased;
  m.parallel_residual = phi || (neox && hf_bool(j, "use_parallel_residual", where, true));
  m.shared_norm = m.lm_head_bias = phi;
  if (type == "falcon") read_hf_falcon(j, m, where);
  // BLOOM (modeling_bloom.py BloomModel): ALiBi, and a LayerNorm on the embeddings (word_embeddings_layernorm).
  m.alibi = m.alibi || type == "bloom";
  m.embedding_norm = type == "bloom";
  m.attention_sinks = type == "gpt_oss";  // modeling_gpt_oss.py GptOssAttention.sinks: one logit per head
  // Qwen2's attention has biases on q, k and v, hard-wired in transformers' modeling_qwen2.py (no config key).
  m.qkv_bias = type == "qwen2" || type == "qwen2_moe";
  m.learned_positions = gpt2;
  m.attention_dropout = hf_probability(j, {"attention_dropout", "attn_pdrop"}, where);
  m.hidden_dropout = hf_probability(j, {"hidden_dropout", "resid_pdrop"}, where);
  m.ffn_hidden_size = hf_int(j, {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"}, where,
                             m.mlp != Mlp::swiglu ? 4 * m.hidden_size : -1);
  read_hf_experts(j, m, where);
  // DeepSeek-V2/V3's latent attention (configuration_deepseek_v3.py); q_lora_rank null: q projected directly.
  if (const std::int64_t kv_r = hf_count(j, "kv_lora_rank", where); kv_r > 0) {
    m.kv_lora_rank = kv_r;
    m.q_lora_rank = std::max<std::int64_t>(0, hf_count(j, "q_lora_rank", where));
    m.qk_nope_head_dim = hf_int(j, {"qk_nope_head_dim"}, where);
    m.qk_rope_head_dim = hf_int(j, {"qk_rope_head_dim"}, where);
    m.v_head_dim = hf_int(j, {"v_head_dim"}, where);
    m.head_dim = 0;  // the heads' widths are the three above
  }
  m.mtp_layers = std::max<std::int64_t>(0, hf_count(j, "num_nextn_predict_layers", where));
  for (const char* key : {"partial_rotary_factor", "rotary_pct"})  // GPT-NeoX calls it rotary_pct
    if (const auto it = j.find(key); it != j.end() && !it->is_null()) {
      if (!it->is_number() || !(it->get<double>() > 0.0 && it->get<double>() <= 1.0))
        throw Error(std::string(where) + ": " + key + " must be a number in (0, 1] (got " + it->dump() + ")");
      m.rotary_fraction = it->get<double>();
    }
  // Gemma 2/3 normalise attention and MLP outputs too; Qwen3 and Gemma 3 normalise q and k per head
  // (modeling_gemma2.py, modeling_gemma3.py, modeling_qwen3.py).
  m.sandwich_norms = type.rfind("gemma2", 0) == 0 || type.rfind("gemma3", 0) == 0;
  m.qk_norm =
      type.rfind("gemma3", 0) == 0 || type.rfind("qwen3", 0) == 0 || (phi && hf_bool(j, "qk_layernorm", where, false));
  m.sliding_window = hf_int(j, {"sliding_window"}, where, 0);
  const auto skip_freq = m.sliding_window > 0 ? hf_window_skip_freq(j, type, m.num_layers, where) : std::nullopt;
  m.window_skip_freq = skip_freq.value_or(0);
  if (!skip_freq || m.sliding_window >= m.max_context) m.sliding_window = m.window_skip_freq = 0;
  if (type == "mpt") read_hf_mpt(j, m, where);
  read_hf_arithmetic(j, type, m, where);
  // The default of tie_word_embeddings where a config leaves it out: True in transformers' GPT-2 and Gemma
  // configs (configuration_gemma.py) and PretrainedConfig's for Falcon, False in Llama's, Mistral's, Qwen's and Phi's.
  // BLOOM's and MPT's too (PretrainedConfig's; llm-foundry's MPTConfig).
  m.tied_embeddings =
      hf_bool(j, "tie_word_embeddings", where,
              gpt2 || type == "falcon" || type == "bloom" || type == "mpt" || type.rfind("gemma", 0) == 0);
  check_model_shape(m, where);
  return m;
}

namespace {
// A spec's number in SI units (key's unit × scale), which must stay finite: 1e305 GB/s is refused, not infinity.
double si_number(const json& j, const char* key, double scale, std::string_view where) {
  const double v = j.at(key).get<double>() * scale;
  if (!std::isfinite(v)) throw Error(std::string(where) + ": " + key + " " + j.at(key).dump() + " is too large");
  return v;
}
}  // namespace

GpuSpec gpu_from_json(const json& j, std::string_view where) {
  GpuSpec g;
  g.name = j.at("name").get<std::string>();
  g.vendor = j.at("vendor").get<std::string>();
  g.memory_bytes = si_number(j, "memory_GiB", kGiB, where);
  g.usable_memory_bytes = si_number(j, "usable_memory_GiB", kGiB, where);
  g.bf16_flops = si_number(j, "bf16_dense_TFLOPs", 1e12, where);
  g.fp16_flops = si_number(j, "fp16_dense_TFLOPs", 1e12, where);
  g.fp32_flops = si_number(j, "fp32_TFLOPs", 1e12, where);
  g.hbm_bytes_per_s = si_number(j, "hbm_bandwidth_GBps", 1e9, where);
  if (j.contains("fp8_dense_TFLOPs")) g.fp8_flops = si_number(j, "fp8_dense_TFLOPs", 1e12, where);
  if (j.contains("tdp_W")) g.tdp_watts = si_number(j, "tdp_W", 1.0, where);
  g.compute_capability_major = j.value("compute_capability_major", std::int64_t{0});  // 1..99 (gpu.schema.json)
  g.kernels_as = j.value("kernels_as", std::string());
  if (j.contains("kernels_scale")) {
    const json& s = j.at("kernels_scale");
    const std::string w = std::string(where) + " kernels_scale";
    if (g.kernels_as.empty()) throw Error(w + ": scales kernels_as's fractions of peak, and kernels_as is not given");
    g.kernels_gemm_scale = si_number(s, "gemm", 1.0, w);
    g.kernels_attention_scale = si_number(s, "attention", 1.0, w);
    for (const double x : {g.kernels_gemm_scale, g.kernels_attention_scale})
      if (!(x > 0.0 && x <= 2.0)) throw Error(w + ": each scale must be in (0, 2]");
  }
  return g;
}

SpecLibrary::SpecLibrary(fs::path data_dir) : data_dir_(std::move(data_dir)) {}

std::vector<std::string> SpecLibrary::names(std::string_view kind) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(data_dir_ / kind, ec)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json SpecLibrary::load_validated(std::string_view kind, std::string_view name_or_path, fs::path* resolved) const {
  const std::string what = singular(kind);
  const auto known = [&] {  // the names of the data folder's specs of this kind, or that it has none
    const std::vector<std::string> all = names(kind);
    return all.empty() ? "none in " + (data_dir_ / kind).string() : join(all);
  };
  if (name_or_path.empty()) throw Error("empty " + what + " name (known: " + known() + ")");
  fs::path path(name_or_path);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    path = data_dir_ / kind / (lower(name_or_path) + ".json");
    if (!fs::is_regular_file(path, ec)) {
      throw Error("unknown " + what + " '" + std::string(name_or_path) + "' (known: " + known() +
                  "; or a path to a JSON file)");
    }
  }
  if (resolved != nullptr) *resolved = path;
  return read_json_file(path);
}

ModelSpec SpecLibrary::model(std::string_view name_or_path) const {
  fs::path path;
  const json j = load_validated("models", name_or_path, &path);
  const std::string where = "model " + path.string();
  // A Hugging Face config.json has no "name" but has its own key names; a headroom spec follows the schema.
  const bool is_hf = j.is_object() && !j.contains("num_layers") &&
                     (j.contains("num_hidden_layers") || j.contains("n_layer") || j.contains("model_type"));
  if (is_hf) {
    std::string name = hf_string(j, "_name_or_path", where, "");
    if (name.empty()) name = path.parent_path().filename().string();
    if (name.empty() || name == ".") name = path.stem().string();
    return model_from_hf_config(j, name, where);
  }
  validate_against_schema(j, read_json_file(data_dir_ / "schema" / "model.schema.json"), where);
  return model_from_json(j, where);
}

namespace {

// A kernel-curves file's curves at the given peaks, built once per process for each content (the file is read, its
// text hashed): every GPU spec that names one (h100-80gb, h200 and h800 name the same measured file; validate reads a
// cluster per published run) takes the tables built the first time without parsing the file again, and a file that
// changed is built again.
DeviceKernels device_kernels_file(const fs::path& path, double bf16_peak, double fp8_peak) {
  static std::mutex mutex;
  static std::map<std::string, DeviceKernels> built;
  const std::string text = read_file_bounded(path);
  const std::string key = std::to_string(std::hash<std::string>{}(text)) + " " + std::to_string(text.size()) + " " +
                          std::to_string(bf16_peak) + " " + std::to_string(fp8_peak) + " " + path.filename().string();
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const auto it = built.find(key); it != built.end()) return it->second;
  }
  DeviceKernels k =
      device_kernels_from_json(parse_json_strict(text, path.string()), bf16_peak, fp8_peak, path.string());
  k.file = path.filename().string();
  const std::lock_guard<std::mutex> lock(mutex);
  if (built.size() >= 16) built.clear();  // a bounded cache: a process reads a handful of devices
  built.emplace(key, k);
  return k;
}

}  // namespace

GpuSpec SpecLibrary::gpu(std::string_view name_or_path) const {
  fs::path path;
  const json j = load_validated("gpus", name_or_path, &path);
  const std::string where = "gpu " + path.string();
  validate_against_schema(j, read_json_file(data_dir_ / "schema" / "gpu.schema.json"), where);
  GpuSpec g = gpu_from_json(j, where);
  if (g.usable_memory_bytes > g.memory_bytes) throw Error(where + ": usable_memory_GiB must not exceed memory_GiB");
  if (j.contains("kernel_curves")) {
    const std::string name = j.at("kernel_curves").get<std::string>();
    fs::path curves(name);
    std::error_code ec;
    if (!fs::is_regular_file(curves, ec)) curves = data_dir_ / "kernels" / name;
    if (!fs::is_regular_file(curves, ec))
      throw Error(where + ": kernel_curves '" + name + "' is no file (a name in " + (data_dir_ / "kernels").string() +
                  " or a path)");
    g.kernels = device_kernels_file(curves, g.bf16_flops, g.fp8_flops);
  }
  // kernels_as lends this GPU another's fitted efficiencies: a name that is no GPU would leave it on datasheet
  // defaults without a word.
  if (!g.kernels_as.empty()) {
    const std::vector<std::string> known = names("gpus");
    if (std::find(known.begin(), known.end(), lower(g.kernels_as)) == known.end())
      throw Error(where + ": kernels_as '" + g.kernels_as + "' names no GPU (known: " + join(known) + ")");
  }
  return g;
}

ClusterSpec SpecLibrary::cluster(std::string_view name_or_path) const {
  fs::path path;
  const json j = load_validated("clusters", name_or_path, &path);
  return cluster_from_document(j, path, nullptr);
}

ClusterSpec SpecLibrary::cluster_from_document(const json& j, const fs::path& path, const GpuSpec* known_gpu) const {
  const std::string where = "cluster " + path.string();
  validate_against_schema(j, read_json_file(data_dir_ / "schema" / "cluster.schema.json"), where);
  ClusterSpec c;
  c.name = j.at("name").get<std::string>();
  c.source = j.value("source", std::string());
  c.gpu = known_gpu != nullptr ? *known_gpu : gpu(j.at("gpu").get<std::string>());
  c.gpus_per_node = j.at("gpus_per_node").get<std::int64_t>();
  c.topology = j.at("topology").get<std::string>();
  const json& intra = j.at("intra_node");
  c.intra_node = {intra.at("kind").get<std::string>(), si_number(intra, "bandwidth_GBps", 1e9, where),
                  si_number(intra, "latency_us", 1e-6, where)};
  const json& inter = j.at("inter_node");
  c.inter_node = {inter.at("kind").get<std::string>(), si_number(inter, "bandwidth_GBps_per_gpu", 1e9, where),
                  si_number(inter, "latency_us", 1e-6, where)};
  if (j.contains("gpu_power_limit_W")) {
    c.gpu_power_limit_watts = si_number(j, "gpu_power_limit_W", 1.0, where);
    if (!(c.gpu.tdp_watts > 0))
      throw Error(where + ": gpu_power_limit_W needs the GPU's tdp_W (" + c.gpu.name + " states none)");
    if (c.gpu_power_limit_watts > c.gpu.tdp_watts)
      throw Error(where + ": gpu_power_limit_W " + std::to_string(c.gpu_power_limit_watts) + " is above " + c.gpu.name +
                  "'s tdp_W (valid: at most " + std::to_string(c.gpu.tdp_watts) + ")");
  }
  if (j.contains("host")) {
    const json& host = j.at("host");
    c.host_link = {host.at("kind").get<std::string>(), si_number(host, "bandwidth_GBps_per_gpu", 1e9, where),
                   si_number(host, "latency_us", 1e-6, where)};
    c.host_memory_bytes_per_s = si_number(host, "memory_bandwidth_GBps", 1e9, where);
  }
  return c;
}

double power_limited_clock_fraction(const ClusterSpec& c) {
  if (!(c.gpu_power_limit_watts > 0) || !(c.gpu.tdp_watts > c.gpu_power_limit_watts)) return 1.0;
  return std::cbrt(c.gpu_power_limit_watts / c.gpu.tdp_watts);
}

ClusterSpec SpecLibrary::cluster_for_gpu(const GpuSpec& g) const {
  std::optional<fs::path> first;
  for (const auto& name : names("clusters")) {
    const fs::path path = data_dir_ / "clusters" / (name + ".json");
    const json j = read_json_file(path);
    if (!j.is_object() || j.value("gpu", std::string()) != g.name) continue;
    if (name.rfind(g.name, 0) == 0) return cluster_from_document(j, path, &g);
    if (!first) first = path;
  }
  if (first) return cluster_from_document(read_json_file(*first), *first, &g);
  ClusterSpec c;
  c.name = g.name + "-node";
  c.gpu = g;
  c.gpus_per_node = 8;
  c.topology = "nvswitch";
  c.intra_node = {"assumed", 150e9, 3e-6};
  c.inter_node = {"assumed", 25e9, 5e-6};
  c.assumed = true;
  c.source = "assumed: no cluster in data/clusters has GPU " + g.name +
             ", so nodes of 8 with 150 GB/s per GPU inside and a 25 GB/s NIC per GPU between them (--cluster FILE "
             "names your network)";
  return c;
}

FrameworkProfile SpecLibrary::framework(std::string_view name_or_path) const {
  fs::path path;
  const json j = load_validated("frameworks", name_or_path, &path);
  validate_against_schema(j, read_json_file(data_dir_ / "schema" / "framework.schema.json"),
                          "framework " + path.string());
  return framework_from_json(j);
}

}  // namespace headroom
