// The three immutable inputs of every estimate: the model (application), the GPU and cluster (system).
// Parsed and validated once from data/ JSON (units in key names), converted to SI units on load.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/kernel_curves.hpp"

namespace headroom {

enum class Norm { rmsnorm, layernorm };
// The MLP: gated (gate, up and down projections) with SiLU (SwiGLU) or GELU (GeGLU, Gemma's tanh GELU), both priced
// the same and exported as themselves; or plain (up and down only) with a GELU or a squared ReLU (Nemotron's relu2,
// Megatron-LM's --squared-relu).
enum class Mlp { swiglu, gelu, relu2, geglu };

// The projections an MLP's input passes through before its activation: 2 gated (gate and up, fused into one fc1 of
// width 2·h_ffn), 1 plain (Megatron-LM's mlp.py: fc1 is 2·ffn_hidden_size wide with gated_linear_unit).
[[nodiscard]] constexpr double mlp_input_projections(Mlp mlp) {
  return mlp == Mlp::swiglu || mlp == Mlp::geglu ? 2.0 : 1.0;
}

// A decoder-only transformer. Variables as in the 4D paper, Table 1.
struct ModelSpec {
  std::string name;
  std::int64_t hidden_size = 0;      // h
  std::int64_t num_layers = 0;       // L
  std::int64_t num_heads = 0;        // a
  std::int64_t num_kv_heads = 0;     // k
  std::int64_t head_dim = 0;         // d_h (HF head_dim, Megatron-LM's --kv-channels); 0: h/a
  std::int64_t ffn_hidden_size = 0;  // h_ffn
  std::int64_t vocab_size = 0;       // v
  std::int64_t max_context = 0;      // tokens
  bool tied_embeddings = false;
  Norm norm = Norm::rmsnorm;
  Mlp mlp = Mlp::swiglu;
  bool linear_biases = false;  // GPT-2 style biases on every linear layer (with experts: theirs and the router's)
  // A learnable logit per head that joins each softmax's denominator (gpt-oss's attention sinks, Megatron-LM's
  // --softmax-type learnable): a parameters a layer, split over TP with the heads; the same work.
  bool attention_sinks = false;
  bool qkv_bias = false;           // biases on the Q, K and V projections only (Qwen2; Megatron-LM's --add-qkv-bias)
  bool learned_positions = false;  // GPT-2 style position-embedding table of max_context × h
  // ALiBi (Press et al. 2022; BLOOM, MPT): a fixed per-head bias, linear in the key's distance, added to the attention
  // scores; no weights. Fused kernels add it in registers (flash-attn's alibi_slopes), the same work; unfused attention
  // adds it in one more pass over the scores (throughput.cpp unfused_attention_seconds).
  bool alibi = false;
  // A norm on the embeddings' output (BLOOM's word_embeddings_layernorm; Megatron-DeepSpeed's --embed-layernorm): its
  // weights and its saved input on the first stage.
  bool embedding_norm = false;
  bool sandwich_norms = false;  // norms after attention and MLP as well as before (Gemma 2/3: four per layer)
  // Attention and MLP both read the layer's input through their own norms and add to it together (GPT-J, GPT-NeoX's
  // use_parallel_residual): the same weights and work, one input saved for the two norms.
  bool parallel_residual = false;
  // Of a parallel residual, the attention and MLP reading one norm's output (GPT-J, Phi, Falcon-7B's
  // input_layernorm): one norm a layer, not two.
  bool shared_norm = false;
  // A bias on the LM head, v wide (Phi's and GPT-J's lm_head; column-parallel: split by t).
  bool lm_head_bias = false;
  bool qk_norm = false;          // RMSNorm of each head's q and k (Qwen3, Gemma 3; d_h weights each)
  double attention_dropout = 0;  // dropout probability on the attention probabilities (GPT: 0.1, Llama: 0)
  // Dropout on the residual stream, after attention and after the MLP, and on the embeddings' output (Megatron-LM's
  // --hidden-dropout, which covers both; GPT: 0.1, Llama: 0): a 1-byte mask each (memory.cpp dropout_mask_units).
  double hidden_dropout = 0;
  // Sliding-window attention: a query attends to at most this many tokens (itself included); 0: full causal
  // attention. Every window_skip_freq-th layer, counted from 1, attends fully (Megatron-LM's --window-attn-skip-freq;
  // Gemma 2: 2); 0: every layer windowed (Mistral-7B v0.1).
  std::int64_t sliding_window = 0;
  std::int64_t window_skip_freq = 0;
  // Mixture of experts (Megatron-LM's names, megatron/training/arguments.py): num_experts routed experts with an
  // FFN of moe_ffn_hidden_size each, moe_router_topk of them per token, a router (h × E), a shared expert of
  // shared_expert_ffn_hidden_size (0: none; Qwen2-MoE's with a sigmoid gate of h weights) on every layer but the
  // first first_dense_layers (DeepSeek-V3's first_k_dense_replace; those have an FFN of ffn_hidden_size).
  // num_experts 0: a dense model.
  std::int64_t num_experts = 0;
  std::int64_t moe_router_topk = 0;
  std::int64_t moe_ffn_hidden_size = 0;
  std::int64_t shared_expert_ffn_hidden_size = 0;
  bool shared_expert_gate = false;
  std::int64_t first_dense_layers = 0;
  // Group-limited routing (Megatron-LM's --moe-router-num-groups and --moe-router-group-topk, Hugging Face's n_group
  // and topk_group; megatron/core/transformer/moe/moe_utils.py group_limited_topk): the experts in num_groups equal
  // groups of consecutive experts, each token choosing group_topk groups by their top-(k/group_topk) scores and its k
  // experts inside them. group_topk 0: every token chooses among all experts (Megatron-LM ignores the groups then).
  std::int64_t moe_router_num_groups = 0;
  std::int64_t moe_router_group_topk = 0;
  // Multi-head latent attention (DeepSeek-V2/V3; Hugging Face's and Megatron-LM's names): q projected down to
  // q_lora_rank (0: projected directly) and k, v to kv_lora_rank (plus a shared RoPE key of qk_rope_head_dim), then
  // up per head to qk_nope_head_dim + qk_rope_head_dim (q, k) and v_head_dim (v). kv_lora_rank 0: ordinary attention.
  std::int64_t q_lora_rank = 0;
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  // What changes a model's arithmetic but not its cost, written into launch arguments as the framework's flags (or
  // said to have none): RoPE's base θ (0: not given), its frequency scaling ("llama3": Llama 3.1's, "yarn": YaRN;
  // "": none) and factor, the norms' ε (0: not given) and Gemma's specifics: RMSNorm scaling by (1 + w), embeddings
  // multiplied by sqrt(h), tanh soft caps c·tanh(x/c) on the attention scores and the final logits (0: none), and a
  // softmax scale of 1/sqrt(query_pre_attn_scalar) (0: 1/sqrt(d_h)).
  double rope_theta = 0;
  std::string rope_scaling;
  double rope_scaling_factor = 0;
  double norm_eps = 0;
  bool norm_plus_one = false;
  bool scaled_embeddings = false;
  double attention_softcap = 0;
  double final_softcap = 0;
  std::int64_t query_pre_attn_scalar = 0;
  // Multi-token-prediction layers of the checkpoint (DeepSeek-V3's num_nextn_predict_layers): counted apart
  // (mtp_parameters), not trained in what headroom prices.
  std::int64_t mtp_layers = 0;
  // Share of each head's width that RoPE rotates (Hugging Face's partial_rotary_factor, Megatron-LM's
  // --rotary-percent; Nemotron: 0.5). RoPE is a rotation without weights whose elementwise cost is inside the fitted
  // elementwise passes, so it changes no price; launch writes it.
  double rotary_fraction = 1.0;
};

[[nodiscard]] inline bool latent_attention(const ModelSpec& m) { return m.kv_lora_rank > 0; }

// The h-wide norms of a decoder layer: before attention and before the MLP (2), after them too (Gemma 2/3's
// sandwich: 4), or one that a parallel residual's attention and MLP share (modeling_phi.py PhiDecoderLayer: 1).
[[nodiscard]] inline std::int64_t hidden_norms_per_layer(const ModelSpec& m) {
  return m.sandwich_norms ? 4 : m.shared_norm ? 1 : 2;
}

// Gate, up and down projections (SwiGLU, GeGLU): three h × h_ffn matrices, not two.
[[nodiscard]] inline bool gated_mlp(const ModelSpec& m) { return mlp_input_projections(m.mlp) == 2.0; }

// Whether a token's experts are limited to moe_router_group_topk of the moe_router_num_groups groups.
[[nodiscard]] inline bool group_limited_routing(const ModelSpec& m) {
  return m.num_experts > 0 && m.moe_router_group_topk > 0;
}

// Layers with routed experts: all but the first dense ones, none in a dense model.
[[nodiscard]] inline std::int64_t moe_layers(const ModelSpec& m) {
  return m.num_experts > 0 ? m.num_layers - m.first_dense_layers : 0;
}

// Layers attending within the sliding window (megatron/core/transformer/utils.py, is_layer_window_attention).
[[nodiscard]] inline std::int64_t window_layers(const ModelSpec& m) {
  if (m.sliding_window <= 0) return 0;
  return m.window_skip_freq > 0 ? m.num_layers - m.num_layers / m.window_skip_freq : m.num_layers;
}

// a·d_h: the width of Q and of the attention output, h for a model without head_dim (Megatron-LM's
// query_projection_size, megatron/training/theoretical_memory_usage.py).
[[nodiscard]] inline double query_width(const ModelSpec& m) {
  return m.head_dim > 0 ? static_cast<double>(m.num_heads * m.head_dim) : static_cast<double>(m.hidden_size);
}
// k·d_h: the width of K and of V (GQA: k KV heads), h·k/a without head_dim; with latent attention the mean of
// the per-head K (a·(d_nope + d_rope)) and V (a·d_v), whose sum a context-parallel ring passes.
[[nodiscard]] inline double kv_width(const ModelSpec& m) {
  if (latent_attention(m))
    return static_cast<double>(m.num_heads) *
           static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) / 2.0;
  return m.head_dim > 0 ? static_cast<double>(m.num_kv_heads * m.head_dim)
                        : static_cast<double>(m.hidden_size) * static_cast<double>(m.num_kv_heads) /
                              static_cast<double>(m.num_heads);
}

// The vocabulary Megatron-LM trains: padded to a multiple of make_vocab_size_divisible_by x TP
// (megatron/training/vocab_utils.py calculate_padded_vocab_size).
[[nodiscard]] constexpr std::int64_t padded_vocab_size(std::int64_t vocab, std::int64_t divisible_by, std::int64_t tp) {
  const std::int64_t multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

// d_h: the width of one attention head, h/a unless the model gives it (Gemma, Qwen3: a·d_h ≠ h); with latent
// attention the width of q and k, qk_nope_head_dim + qk_rope_head_dim.
[[nodiscard]] inline double head_dim(const ModelSpec& m) {
  if (latent_attention(m)) return static_cast<double>(m.qk_nope_head_dim + m.qk_rope_head_dim);
  return m.head_dim > 0 ? static_cast<double>(m.head_dim)
                        : static_cast<double>(m.hidden_size) / static_cast<double>(m.num_heads);
}
// The mean width of the q·k and p·v products, a·(d_qk + d_v)/2 with latent attention, a·d_h otherwise (h without
// head_dim): core attention's FLOPs scale with it.
[[nodiscard]] inline double core_attention_width(const ModelSpec& m) {
  return latent_attention(m) ? kv_width(m) : query_width(m);
}

struct GpuSpec {
  std::string name;
  std::string vendor;
  double memory_bytes = 0;         // nominal HBM, as marketed ("40GB" is 40 GiB on an A100)
  double usable_memory_bytes = 0;  // what the runtime lets a process allocate
  double bf16_flops = 0;           // dense peak, FLOP/s
  double fp16_flops = 0;
  double fp32_flops = 0;
  double fp8_flops = 0;  // dense FP8 tensor-core peak, FLOP/s; 0: no FP8 (A100, MI250X)
  double hbm_bytes_per_s = 0;
  double tdp_watts = 0;  // the board power its datasheet clocks are given at ("tdp_W"; 0: not stated)
  // torch.cuda.get_device_properties(0).major ("compute_capability_major": 8 Ampere, 9 Hopper, 10 Blackwell; ROCm's
  // gfx major, 9 on CDNA 2 and 3; 0: not stated).
  std::int64_t compute_capability_major = 0;
  // A GPU of the same die, clocks and power (a memory variant) whose fitted or measured GEMM and attention
  // efficiencies apply to this one where none names it ("kernels_as"; empty: none).
  std::string kernels_as;
  // A different die computes at these multiples of kernels_as's fractions of peak ("kernels_scale": {"gemm",
  // "attention"}): the ratio of the two GPUs' published kernel benchmarks (fraction of peak over fraction of peak).
  double kernels_gemm_scale = 1.0;
  double kernels_attention_scale = 1.0;
  // The device's own kernel curves ("kernel_curves": a kernel-curves file in data/kernels/, measured on it or
  // published for it); empty: none, its efficiencies come from a fitted entry (its own or kernels_as's) or the generic.
  DeviceKernels kernels;
};

struct LinkSpec {
  std::string kind;
  double bytes_per_s = 0;  // unidirectional, per GPU
  double latency_s = 0;
};

struct ClusterSpec {
  std::string name;
  std::string source;    // the spec's "source"; for an assumed cluster, what was assumed
  bool assumed = false;  // made up around a bare GPU (SpecLibrary::cluster_for_gpu): its links are not measured
  GpuSpec gpu;
  std::int64_t gpus_per_node = 0;
  LinkSpec intra_node;
  LinkSpec inter_node;  // NIC bandwidth available to one GPU
  std::string topology;
  // The host side, for offloading (optional "host" key): one GPU's link to host memory (PCIe), unidirectional, and the
  // node's CPU memory bandwidth, all sockets together; bytes_per_s 0 when the spec does not give them.
  LinkSpec host_link;
  double host_memory_bytes_per_s = 0;
  // A board power limit below the GPU's TDP that the cluster runs its GPUs at ("gpu_power_limit_W"; 0: the TDP).
  double gpu_power_limit_watts = 0;
};

// The tensor-core clock a power limit leaves, as a fraction of the clock at TDP: dynamic power grows with f·V² and
// the voltage with the clock over the DVFS range, so P ∝ f³ and f ∝ (limit/TDP)^(1/3) (0.89 at 500 of 700 W); 1 without
// a limit. Scales the compute peaks (PerfContext), not the HBM bandwidth.
[[nodiscard]] double power_limited_clock_fraction(const ClusterSpec& c);

// Finds and parses specs. Names are case-insensitive; an argument that names an existing file is read
// as a headroom spec or (models only) a Hugging Face config.json.
class SpecLibrary {
 public:
  explicit SpecLibrary(std::filesystem::path data_dir);

  [[nodiscard]] ModelSpec model(std::string_view name_or_path) const;
  [[nodiscard]] GpuSpec gpu(std::string_view name_or_path) const;
  [[nodiscard]] ClusterSpec cluster(std::string_view name_or_path) const;
  // A shipped cluster whose GPU is `gpu` (the one named after it, "h100-94gb-x4" for h100-94gb, where there is one;
  // else the first by name), else an assumed one (`assumed`, `source` says what): nodes of 8 such GPUs with
  // NVLink-class links inside (150 GB/s per GPU) and a 25 GB/s NIC per GPU between nodes.
  [[nodiscard]] ClusterSpec cluster_for_gpu(const GpuSpec& gpu) const;
  [[nodiscard]] FrameworkProfile framework(std::string_view name_or_path) const;

  [[nodiscard]] std::vector<std::string> names(std::string_view kind) const;  // "models", "gpus", ...
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_dir_; }

 private:
  [[nodiscard]] nlohmann::json load_validated(std::string_view kind, std::string_view name_or_path,
                                              std::filesystem::path* resolved) const;
  // A cluster document read from `path`, checked and parsed; its GPU is `known_gpu` where the caller has read it.
  [[nodiscard]] ClusterSpec cluster_from_document(const nlohmann::json& j, const std::filesystem::path& path,
                                                  const GpuSpec* known_gpu) const;
  std::filesystem::path data_dir_;
};

// The checks every model passes, however it was read (a model file, a Hugging Face config, a Megatron-LM command or
// log): positive sizes up to 10^12, heads that split the width, experts and their routing, latent attention's widths;
// throws Error naming the field and `where`.
void check_model_shape(const ModelSpec& m, std::string_view where);

// Parsing from already-loaded JSON; `where` names the source in error messages.
[[nodiscard]] ModelSpec model_from_json(const nlohmann::json& j, std::string_view where);
[[nodiscard]] ModelSpec model_from_hf_config(const nlohmann::json& j, std::string_view name, std::string_view where);
[[nodiscard]] GpuSpec gpu_from_json(const nlohmann::json& j, std::string_view where);

// One JSON document, parsed strictly: bad syntax, nesting deeper than any spec, or a key twice in one object
// (nlohmann would keep the last silently) is an Error "malformed JSON in <where>: ...". The one JSON reader of
// spec files (read_json_file) and of the run files of `calibrate --from-runs`.
[[nodiscard]] nlohmann::json parse_json_strict(std::string_view text, std::string_view where);

// Reads a whole JSON file (read_file_bounded: at most 256 MiB); malformed JSON, an unreadable file or one past the
// bound is an Error naming the file.
[[nodiscard]] nlohmann::json read_json_file(const std::filesystem::path& path);

// Default data directory: $HEADROOM_DATA_DIR, else the source tree's data/ compiled in.
[[nodiscard]] std::filesystem::path default_data_dir();

}  // namespace headroom
