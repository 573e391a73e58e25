// A NeMo 1.x training config (YAML: NVIDIA/NeMo-Framework-Launcher
// launcher_scripts/conf/training/<family>/<model>.yaml, or NeMo's
// examples/nlp/language_modeling/conf/megatron_*_config.yaml) as NeMo reads it: its `model:` keys are the ones
// MegatronGPTModel hands to Megatron-core (nemo/collections/nlp/models/language_modeling/megatron_base_model.py
// build_transformer_config and megatron_gpt_model.py), its `trainer:` the world. Each key read becomes the
// Megatron-LM argument Megatron-core takes for it, and the job is read as that pretrain_gpt.py line
// (parse_megatron_command), so a NeMo job and the Megatron-LM line of the same settings are priced alike.
#include <yaml.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "headroom/ingest/tokenizer_file.hpp"
#include "megatron_args.hpp"
#include "text.hpp"

namespace headroom::calibrate {
namespace {

// One YAML document flattened to dotted keys, in the file's order: a scalar as written (a plain null, ~ or empty as
// "null", a plain boolean as "true"/"false"), a sequence or an empty mapping as its flow text ("[0.9, 0.95]", "{}").
using FlatYaml = std::vector<std::pair<std::string, std::string>>;

constexpr std::size_t kMaxYamlDepth = 64;

std::string plain_scalar(std::string s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return "null";
  if (s == "true" || s == "True" || s == "TRUE") return "true";
  if (s == "false" || s == "False" || s == "FALSE") return "false";
  return s;
}

// libyaml's parser, deleted only when it was initialised.
class YamlParser {
 public:
  YamlParser() : ok_(yaml_parser_initialize(&p_) != 0) {}
  ~YamlParser() {
    if (ok_) yaml_parser_delete(&p_);
  }
  YamlParser(const YamlParser&) = delete;
  YamlParser& operator=(const YamlParser&) = delete;
  YamlParser(YamlParser&&) = delete;
  YamlParser& operator=(YamlParser&&) = delete;
  [[nodiscard]] bool ok() const { return ok_; }
  yaml_parser_t* get() { return &p_; }

 private:
  yaml_parser_t p_{};
  bool ok_;
};

FlatYaml flatten_yaml(std::string_view text, const std::string& where) {
  YamlParser parser;
  if (!parser.ok()) throw Error(where + ": the YAML parser could not start");
  yaml_parser_set_input_string(parser.get(), reinterpret_cast<const unsigned char*>(text.data()), text.size());
  // A mapping being read: its dotted prefix, the key awaiting its value, its keys so far. A sequence (or anything
  // inside one) is captured as flow text: `capture` holds, per open collection, whether it is a mapping and its count.
  struct Mapping {
    std::string prefix, key;
    bool have_key = false;
    std::size_t entries = 0;
  };
  std::vector<Mapping> open;
  std::vector<std::pair<bool, std::size_t>> capture;
  std::string captured;
  FlatYaml flat;
  std::set<std::string> seen;
  int documents = 0;
  bool done = false;
  const auto add = [&](const std::string& key, std::string value) {
    if (!seen.insert(key).second) throw Error(where + ": " + key + " is given twice");
    flat.emplace_back(key, std::move(value));
  };
  const auto captured_item = [&](const std::string& text_of_item, bool opens) {
    std::size_t& count = capture.back().second;
    if (count > 0) captured += capture.back().first && count % 2 == 1 ? ": " : ", ";
    captured += text_of_item;
    if (!opens) ++count;
  };
  while (!done) {
    yaml_event_t event;
    if (yaml_parser_parse(parser.get(), &event) == 0) {
      const auto line = static_cast<long long>(parser.get()->problem_mark.line) + 1;
      throw Error(where + ": line " + std::to_string(line) + ": not YAML (" +
                  (parser.get()->problem != nullptr ? std::string(parser.get()->problem) : "a syntax error") + ")");
    }
    const auto free_event = std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)>(&event, yaml_event_delete);
    const auto line = std::to_string(event.start_mark.line + 1);
    switch (event.type) {
      case YAML_STREAM_END_EVENT: done = true; break;
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) throw Error(where + ": line " + line + ": more than one YAML document");
        break;
      case YAML_ALIAS_EVENT:
        throw Error(where + ": line " + line + ": a YAML alias (*name): write the value out (aliases are not read)");
      case YAML_SCALAR_EVENT: {
        std::string value(reinterpret_cast<const char*>(event.data.scalar.value), event.data.scalar.length);
        if (event.data.scalar.style == YAML_PLAIN_SCALAR_STYLE) value = plain_scalar(std::move(value));
        if (!capture.empty()) {
          captured_item(value, false);
          break;
        }
        if (open.empty()) throw Error(where + ": line " + line + ": the document is not a mapping of keys");
        Mapping& m = open.back();
        if (!m.have_key) {
          if (value.empty() || value.find('.') != std::string::npos)
            throw Error(where + ": line " + line + ": key '" + value.substr(0, 60) + "' (valid: a name without dots)");
          m.key = value, m.have_key = true;
        } else {
          add(m.prefix + m.key, std::move(value));
          m.have_key = false, ++m.entries;
        }
        break;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        const bool mapping = event.type == YAML_MAPPING_START_EVENT;
        if (open.size() + capture.size() >= kMaxYamlDepth)
          throw Error(where + ": line " + line + ": nested deeper than " + std::to_string(kMaxYamlDepth));
        if (!capture.empty()) {
          captured_item(mapping ? "{" : "[", true);
          capture.emplace_back(mapping, 0);
        } else if (open.empty()) {
          if (!mapping) throw Error(where + ": line " + line + ": the document is not a mapping of keys");
          open.push_back({});
        } else if (!open.back().have_key) {
          throw Error(where + ": line " + line + ": a key that is not a name");
        } else if (mapping) {
          open.push_back({open.back().prefix + open.back().key + ".", "", false, 0});
        } else {
          captured = "[";
          capture.emplace_back(false, 0);
        }
        break;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        if (!capture.empty()) {
          captured += event.type == YAML_MAPPING_END_EVENT ? "}" : "]";
          capture.pop_back();
          if (!capture.empty()) {
            ++capture.back().second;
          } else {  // the sequence a key holds
            Mapping& m = open.back();
            add(m.prefix + m.key, captured);
            m.have_key = false, ++m.entries;
          }
        } else {
          const Mapping closed = open.back();
          open.pop_back();
          if (!open.empty()) {
            if (closed.entries == 0) add(closed.prefix.substr(0, closed.prefix.size() - 1), "{}");
            open.back().have_key = false, ++open.back().entries;
          }
        }
        break;
      default: break;  // stream and document ends, no event
    }
  }
  return flat;
}

// Every key a NeMo training config may hold, dotted ("section.*": all of a section): read (no reason; the
// translation below checks its value) or ignored with why. Any other key is refused.
struct NemoKey {
  std::string_view key, ignored_because;
};
constexpr std::string_view kRun = "the launcher's job, logging and checkpoint settings";
constexpr std::array kNemoKeys = {
    NemoKey{"trainer.num_nodes", ""},
    NemoKey{"trainer.devices", ""},
    NemoKey{"trainer.precision", ""},
    NemoKey{"trainer.accumulate_grad_batches", ""},
    NemoKey{"model.mcore_gpt", ""},
    NemoKey{"model.transformer_engine", ""},
    NemoKey{"model.megatron_amp_O2", ""},
    NemoKey{"model.micro_batch_size", ""},
    NemoKey{"model.global_batch_size", ""},
    NemoKey{"model.tensor_model_parallel_size", ""},
    NemoKey{"model.pipeline_model_parallel_size", ""},
    NemoKey{"model.virtual_pipeline_model_parallel_size", ""},
    NemoKey{"model.context_parallel_size", ""},
    NemoKey{"model.expert_model_parallel_size", ""},
    NemoKey{"model.precision", ""},
    // NeMo sets these on the TransformerConfig; only its Falcon layer reads them (falcon_decoder_layer.py
    // FalconTransformerLayer), which model.name's megatron_falcon_gpt picks and headroom refuses. The Mistral configs
    // carry them under the default spec, whose Megatron-core TransformerLayer never looks.
    NemoKey{"model.mcore_customization_config.new_decoder_architecture",
            "read by NeMo's Falcon layer only (model.name megatron_falcon_gpt, refused): the default layer ignores it"},
    NemoKey{"model.mcore_customization_config.parallel_attention",
            "read by NeMo's Falcon layer only (model.name megatron_falcon_gpt, refused): the default layer ignores it"},
    NemoKey{"model.window_size", ""},
    NemoKey{"model.window_attn_skip_freq", ""},
    NemoKey{"model.num_moe_experts", ""},
    NemoKey{"model.moe_router_topk", ""},
    NemoKey{"model.moe_token_dispatcher_type", ""},
    NemoKey{"model.moe_expert_capacity_factor", ""},
    NemoKey{"model.moe_pad_expert_input_to_capacity", ""},
    NemoKey{"model.moe_grouped_gemm", "the experts' GEMMs in one grouped launch or one by one: each at its own shape"},
    NemoKey{"model.moe_aux_loss_coeff", "the router's balancing loss's weight"},
    NemoKey{"model.sequence_parallel", ""},
    NemoKey{"model.encoder_seq_length", ""},
    NemoKey{"model.data.seq_length", ""},
    NemoKey{"model.max_position_embeddings", ""},
    NemoKey{"model.num_layers", ""},
    NemoKey{"model.hidden_size", ""},
    NemoKey{"model.ffn_hidden_size", ""},
    NemoKey{"model.num_attention_heads", ""},
    NemoKey{"model.num_query_groups", ""},
    NemoKey{"model.kv_channels", ""},
    NemoKey{"model.make_vocab_size_divisible_by", ""},
    NemoKey{"model.activation", ""},
    NemoKey{"model.normalization", ""},
    NemoKey{"model.bias", ""},
    NemoKey{"model.position_embedding_type", ""},
    NemoKey{"model.share_embeddings_and_output_weights", ""},
    NemoKey{"model.hidden_dropout", ""},
    NemoKey{"model.attention_dropout", ""},
    NemoKey{"model.ffn_dropout", ""},
    NemoKey{"model.attention_type", ""},
    NemoKey{"model.transformer_block_type", ""},
    NemoKey{"model.headscale", ""},
    NemoKey{"model.fp32_residual_connection", ""},
    NemoKey{"model.fp16_lm_cross_entropy", ""},
    NemoKey{"model.pre_process", ""},
    NemoKey{"model.post_process", ""},
    NemoKey{"model.use_emha", ""},
    NemoKey{"model.deterministic_mode", ""},
    NemoKey{"model.fsdp", ""},
    NemoKey{"model.sharp", ""},
    NemoKey{
        "model.use_flash_attention",
        "the legacy model's attention switch: Megatron-core's layers run Transformer Engine's attention whatever it "
        "says (megatron_gpt_model.py model_provider_func hands it to the non-mcore GPTModel only)"},
    NemoKey{"model.activations_checkpoint_granularity", ""},
    NemoKey{"model.activations_checkpoint_method", ""},
    NemoKey{"model.activations_checkpoint_num_layers", ""},
    NemoKey{"model.recompute_modules", ""},
    NemoKey{"model.num_micro_batches_with_partial_activation_checkpoints", ""},
    NemoKey{"model.activations_checkpoint_layers_per_pipeline", ""},
    NemoKey{"model.fp8", ""},
    NemoKey{"model.fp8_e4m3", ""},
    NemoKey{"model.fp8_hybrid", ""},
    NemoKey{"model.fp8_params", ""},
    NemoKey{"model.fp8_wgrad", ""},
    NemoKey{"model.ub_tp_comm_overlap", ""},
    NemoKey{"model.overlap_p2p_comm", ""},
    NemoKey{"model.optim.name", ""},
    NemoKey{"model.optim.overlap_grad_sync", ""},
    NemoKey{"model.optim.overlap_param_sync", ""},
    NemoKey{"model.optim.grad_sync_dtype", ""},
    NemoKey{"model.rampup_batch_size", ""},
    NemoKey{"defaults", "Hydra's composition list (the userbuffers tuning it may add is read as ub_tp_comm_overlap)"},
    NemoKey{"hydra.*", "Hydra's search path"},
    NemoKey{"name", kRun},
    NemoKey{"restore_from_path", "a checkpoint to start from"},
    NemoKey{"run.*", kRun},
    NemoKey{"exp_manager.*", kRun},
    NemoKey{"trainer.accelerator", "the device kind: the cluster's GPUs are --gpu/--cluster's"},
    NemoKey{"trainer.logger", kRun},
    NemoKey{"trainer.enable_checkpointing", kRun},
    NemoKey{"trainer.use_distributed_sampler", "the data sampler"},
    NemoKey{"trainer.max_epochs", "length of training"},
    NemoKey{"trainer.max_steps", "length of training"},
    NemoKey{"trainer.max_time", "length of training"},
    NemoKey{"trainer.log_every_n_steps", kRun},
    NemoKey{"trainer.val_check_interval", "validation, between training steps"},
    NemoKey{"trainer.limit_val_batches", "validation, between training steps"},
    NemoKey{"trainer.limit_test_batches", "testing, after training"},
    NemoKey{"trainer.num_sanity_val_steps", "validation before training"},
    NemoKey{"trainer.gradient_clip_val", "gradient clipping (one norm per step)"},
    NemoKey{"trainer.benchmark", "cuDNN autotuning of convolutions (none in a GPT)"},
    NemoKey{"trainer.enable_model_summary", kRun},
    NemoKey{"trainer.enable_progress_bar", kRun},
    NemoKey{"model.tokenizer.library", ""},
    NemoKey{"model.tokenizer.type", ""},
    NemoKey{"model.tokenizer.*",
            "the tokenizer: its size is --model's unless its name fixes it (Megatron's GPT-2 BPE, a known Hugging Face "
            "repository's) or its file is on this machine to count"},
    NemoKey{"model.data.*", "the dataset and its loader"},
    NemoKey{"model.nsys_profile.*", "the profiler, on its own steps only"},
    NemoKey{"model.optim.lr", "learning rate"},
    NemoKey{"model.optim.weight_decay", "optimizer hyper-parameter"},
    NemoKey{"model.optim.betas", "optimizer hyper-parameter"},
    NemoKey{"model.optim.eps", "optimizer hyper-parameter"},
    NemoKey{"model.optim.sched.*", "learning-rate schedule"},
    NemoKey{"model.optim.bucket_cap_mb", "gradient bucket size: the same volume in other pieces"},
    NemoKey{"model.optim.contiguous_grad_buffer", "one contiguous gradient buffer, as Megatron-LM's"},
    NemoKey{"model.optim.contiguous_param_buffer", "one contiguous parameter buffer, as Megatron-LM's"},
    NemoKey{"model.init_method_std", "initialisation"},
    NemoKey{"model.use_scaled_init_method", "initialisation"},
    NemoKey{"model.seed", "random seed"},
    NemoKey{"model.layernorm_epsilon", "the norms' epsilon: the same work"},
    NemoKey{"model.layernorm_zero_centered_gamma", "zero-centred norm weights: the same parameters and work"},
    NemoKey{"model.do_layer_norm_weight_decay", "optimizer hyper-parameter"},
    NemoKey{"model.apply_query_key_layer_scaling", "a scale inside the softmax: the same work"},
    NemoKey{"model.normalize_attention_scores", "the softmax's 1/sqrt(d) scale: the same work"},
    NemoKey{"model.rotary_percentage", "the rotated share of a head: no weights, the same work"},
    NemoKey{"model.rotary_base", "RoPE's frequency base: no weights, the same work"},
    NemoKey{"model.seq_len_interpolation_factor", "RoPE's positions interpolated: no weights, the same work"},
    NemoKey{"model.scale_positional_embedding", "RoPE's frequency scaling: the same work"},
    NemoKey{"model.openai_gelu", "the GELU's formula: the same work"},
    NemoKey{"model.native_amp_init_scale", "FP16 loss scaling, unused under BF16"},
    NemoKey{"model.native_amp_growth_interval", "FP16 loss scaling, unused under BF16"},
    NemoKey{"model.hysteresis", "FP16 loss scaling, unused under BF16"},
    NemoKey{"model.apex_transformer_log_level", "logging"},
    NemoKey{"model.onnx_safe", "ONNX export"},
    NemoKey{"model.resume_from_checkpoint", "a checkpoint to start from"},
    NemoKey{"model.use_cpu_initialization", "where the weights are initialised, before training"},
    NemoKey{"model.gc_interval", "Python's garbage collection on the host"},
    NemoKey{"model.sync_batch_comm", "a synchronisation of the pipeline's batched sends: the same bytes"},
    NemoKey{"model.batch_p2p_comm", "the pipeline's sends batched or not: the same bytes"},
    NemoKey{"model.grad_allreduce_chunk_size_mb", "gradient bucket size: the same volume in other pieces"},
    NemoKey{"model.gradient_as_bucket_view", "gradients as views of the buckets, as Megatron-LM's"},
    NemoKey{"model.gradient_accumulation_fusion", kWhyFused},
    NemoKey{"model.grad_div_ar_fusion", kWhyFused},
    NemoKey{"model.bias_activation_fusion", kWhyFused},
    NemoKey{"model.bias_dropout_add_fusion", kWhyFused},
    NemoKey{"model.masked_softmax_fusion", kWhyFused},
    NemoKey{"model.get_attention_mask_from_fusion", "where the fused softmax's causal mask is made: the same work"},
    NemoKey{"model.apply_rope_fusion", kWhyFused},
    NemoKey{"model.persist_layer_norm", kWhyFused},
    NemoKey{"model.cross_entropy_loss_fusion",
            "the fused loss keeps fewer FP32 logit copies: priced as the unfused loss, so the peak may be lower"},
    NemoKey{"model.fp8_margin", "FP8 delayed scaling's margin: the same work"},
    NemoKey{"model.fp8_interval", "FP8 delayed scaling's update interval: the same work"},
    NemoKey{"model.fp8_amax_history_len", "FP8 delayed scaling's amax history: a few KiB a tensor"},
    NemoKey{"model.fp8_amax_compute_algo", "FP8 delayed scaling's amax reduction"},
    NemoKey{"model.reduce_amax", "FP8 delayed scaling's amax all-reduce: a few KiB a tensor"},
    NemoKey{"model.ub_tp_comm_overlap_cfg", "userbuffers' tuning of the TP overlap ub_tp_comm_overlap prices"},
    NemoKey{"model.ub_tp_comm_overlap_cfg.*", "userbuffers' tuning of the TP overlap ub_tp_comm_overlap prices"},
    NemoKey{"model.defer_embedding_wgrad_compute",
            "the output layer's weight-gradient GEMMs moved into the pipeline flush: the same work, a bubble hidden "
            "that is not priced, so the step may be shorter"},
    NemoKey{"model.wgrad_deferral_limit", "how many micro-batches' output-layer weight gradients are deferred"},
    NemoKey{"model.fsdp_sharding_strategy", "NeMo's FSDP settings, unused with fsdp off"},
    NemoKey{"model.fsdp_grad_reduce_dtype", "NeMo's FSDP settings, unused with fsdp off"},
    NemoKey{"model.fsdp_sharded_checkpoint", "NeMo's FSDP settings, unused with fsdp off"},
    // The MLPerf GPT-3 configs' keys (launcher_scripts/conf/training/gpt3/mlperf*.yaml, 175b_mlperf.yaml).
    // model.name picks the layer spec (megatron_gpt_model.py get_specs): Transformer Engine's whole TransformerLayer
    // under autocast, or by default its per-module spec: the same GEMMs, attention and fused kernels either way.
    NemoKey{"model.name",
            "the layer spec: Transformer Engine's layers whichever of te_gpt or its whole "
            "TransformerLayer (megatron_gpt_full_te_layer_autocast), the same work"},
    NemoKey{"model.qkv_bias", ""},
    NemoKey{"model.override_vocab_size", ""},
    NemoKey{"model.optim.dtype", ""},
    NemoKey{"model.nccl_communicator_config_path", ""},
    NemoKey{"model.cpu_offloading", ""},
    NemoKey{"model.cpu_offloading_activations", "NeMo's offloading settings, unused with cpu_offloading off"},
    NemoKey{"model.cpu_offloading_weights", "NeMo's offloading settings, unused with cpu_offloading off"},
    NemoKey{"model.cpu_offloading_num_layers", "NeMo's offloading settings, unused with cpu_offloading off"},
    NemoKey{"model.enable_cuda_graph", ""},
    NemoKey{"model.optim.nccl_ub", ""},
    NemoKey{"model.tp_comm_overlap_ag", ""},
    NemoKey{"model.tp_comm_overlap_rs", ""},
    NemoKey{"model.use_tp_pp_dp_mapping", ""},
    NemoKey{"env_vars.NVTE_FUSED_ATTN", ""},
    NemoKey{"trainer.limit_train_batches", "length of training"},
    NemoKey{"model.dist_ckpt_format", "checkpoint saving and loading"},
    NemoKey{"model.dist_ckpt_load_on_device", "checkpoint saving and loading"},
    NemoKey{"model.dist_ckpt_parallel_save", "checkpoint saving and loading"},
    NemoKey{"s3_checkpointing.*", "checkpoint saving and loading"},
    NemoKey{"model.enable_megatron_timers", "Megatron's timers: logging"},
    NemoKey{"model.megatron_timer_kwargs.*", "Megatron's timers: logging"},
    NemoKey{"model.optim.lock_timeout", "a timeout of the distributed optimizer's checkpoint locks"},
    NemoKey{"model.use_te_rng_tracker", "which random-number tracker dropout draws from: the same work"},
    NemoKey{"model.validation_param_sync_overlap", "validation, between training steps"},
    NemoKey{"model.rotary_interleaved", "RoPE's pairing of dimensions: no weights, the same work"},
    NemoKey{"model.deteministic_mode", "a misspelling of deterministic_mode, which NeMo does not read"},
};

[[noreturn]] void refuse(std::string_view where, const std::string& key, const std::string& value,
                         std::string_view why) {
  throw Error(std::string(where) + ": " + key + ": " + value.substr(0, 60) + ": " + std::string(why));
}

// The end of the interpolation that opens at `open` ("${"), nested ones skipped; npos when unclosed.
std::size_t interpolation_end(const std::string& text, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < text.size(); ++i) {
    if (text.compare(i, 2, "${") == 0)
      ++depth, ++i;
    else if (text[i] == '}' && --depth == 0)
      return i;
  }
  return std::string::npos;
}

// OmegaConf's interpolations as NeMo's training configs use them, for the value of `key`: the whole value one
// ${path} (absolute, the launcher's "training." prefix dropped, or ${.name} beside the key) or ${multiply:a, b} (the
// launcher's resolver, launcher_scripts/main.py: x * y, here of whole numbers). Anything else with "${" is refused.
std::string interpolated(const std::string& key, const std::string& text, const std::map<std::string, std::string>& v,
                         std::string_view where, int depth) {
  if (text.find("${") == std::string::npos) return text;
  const auto cannot = [&] { refuse(where, key, text, "an interpolation headroom cannot resolve (write the value)"); };
  if (depth > 8 || !text.starts_with("${") || interpolation_end(text, 0) != text.size() - 1) cannot();
  const std::string inner = text.substr(2, text.size() - 3);
  if (inner.starts_with("multiply:")) {
    std::vector<std::string> args;
    std::size_t from = 9;
    for (std::size_t i = from; i <= inner.size(); ++i) {
      if (i < inner.size() && inner.compare(i, 2, "${") == 0) {
        const std::size_t end = interpolation_end(inner, i);
        if (end == std::string::npos) cannot();
        i = end;
      } else if (i == inner.size() || inner[i] == ',') {
        std::string arg = inner.substr(from, i - from);
        arg.erase(0, arg.find_first_not_of(' '));
        arg.erase(arg.find_last_not_of(' ') + 1);
        args.push_back(interpolated(key, arg, v, where, depth + 1));
        from = i + 1;
      }
    }
    std::int64_t product = 1;
    for (const std::string& a : args) {
      if (args.size() != 2 || a.empty() || a.size() > 7 ||
          !std::all_of(a.begin(), a.end(), [](char c) { return c >= '0' && c <= '9'; }))
        cannot();
      product *= std::stoll(a);
    }
    return std::to_string(product);
  }
  std::string path = inner;
  if (path.starts_with(".")) {
    const auto dot = key.rfind('.');
    path = (dot == std::string::npos ? "" : key.substr(0, dot + 1)) + path.substr(1);
  } else if (path.starts_with("training.")) {
    path.erase(0, 9);
  }
  const auto it = v.find(path);
  if (it == v.end()) cannot();
  return interpolated(path, it->second, v, where, depth + 1);
}

// Hydra's command-line overrides of the config, as NeMo-Framework-Launcher's scripts pass them to main.py
// (hydra/core/override_parser: `key=value` changes a key the config has, `+key=value` adds one it has not,
// `++key=value` does either, `~key` deletes one). The launcher's own keys name the training config's under `training.`;
// that prefix is dropped. A value is a YAML scalar (True, null, 'quoted').
// NeMo-Framework-Launcher's own top-level keys (launcher_scripts/conf/config.yaml), not the training config's.
constexpr std::array<std::string_view, 10> kLauncherKeys = {
    "training",  "stages",   "data_dir", "launcher_scripts_path", "base_results_dir", "cluster", "cluster_type",
    "container", "env_vars", "hydra"};

void apply_hydra_overrides(FlatYaml& flat, const std::vector<std::string>& overrides, const std::string& where) {
  for (const std::string& o : overrides) {
    std::string_view s = o;
    const bool remove = s.starts_with("~"), upsert = s.starts_with("++"), add = !upsert && s.starts_with("+");
    s.remove_prefix(remove || add ? 1 : upsert ? 2 : 0);
    const std::size_t eq = s.find('=');
    if (!remove && (eq == std::string_view::npos || eq == 0))
      throw Error(where + ": override '" + o + "' is not key=value (valid: key=value, +key=value, ++key=value, ~key)");
    std::string key(s.substr(0, eq));
    if (key.starts_with("training.")) {
      key.erase(0, 9);
    } else if (std::find(kLauncherKeys.begin(), kLauncherKeys.end(), key.substr(0, key.find('.'))) !=
               kLauncherKeys.end()) {
      throw Error(where + ": override '" + o +
                  "' is NeMo-Framework-Launcher's, not the training config's (valid: the training.* overrides; the "
                  "config that training= names is the file given)");
    }
    std::string value = remove ? "" : std::string(s.substr(eq + 1));
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    else
      value = plain_scalar(std::move(value));
    const auto it = std::find_if(flat.begin(), flat.end(), [&](const auto& kv) { return kv.first == key; });
    if (remove) {
      if (it == flat.end()) throw Error(where + ": override '" + o + "': the config has no " + key + " to delete");
      flat.erase(it);
    } else if (it != flat.end()) {
      if (add)
        throw Error(where + ": override '" + o + "': the config already has " + key +
                    " (Hydra refuses to add it: write " + key + "=" + value + ")");
      it->second = value;
    } else {
      if (!add && !upsert)
        throw Error(where + ": override '" + o + "': the config has no " + key + " (Hydra refuses to change it: +" +
                    key + "=" + value + " adds it)");
      flat.emplace_back(key, value);
    }
  }
}

}  // namespace

MegatronCommand read_nemo_config(std::string_view text, std::int64_t gpus, std::string_view where,
                                 const std::vector<std::string>& overrides) {
  const std::string w(where);
  FlatYaml flat = flatten_yaml(text, w);
  apply_hydra_overrides(flat, overrides, w);
  std::map<std::string, std::string> v;
  for (const auto& [key, value] : flat) v[key] = value;
  MegatronCommand out;
  for (const auto& [key, value] : flat) {
    const NemoKey* rule = text::key_rule(kNemoKeys, key);
    if (rule == nullptr)
      throw Error(w + ": " + key +
                  " is a key headroom does not know: it may change memory or time (valid: the keys of NeMo's "
                  "training config that headroom reads or ignores)");
    (rule->ignored_because.empty() ? out.read : out.ignored)
        .push_back(key + ": " + value.substr(0, 80) +
                   (rule->ignored_because.empty() ? "" : " (" + std::string(rule->ignored_because) + ")"));
  }
  // A read key's value, its interpolation resolved (interpolated).
  const auto value = [&](const std::string& key, const std::string& fallback) -> std::string {
    const auto it = v.find(key);
    return it == v.end() ? fallback : interpolated(key, it->second, v, where, 0);
  };
  const auto is = [&](const std::string& key, const std::string& fallback) { return value(key, fallback) == "true"; };
  // Values that must be as priced, each naming its key.
  const auto require = [&](const std::string& key, const std::string& fallback,
                           std::initializer_list<std::string_view> valid, std::string_view why) {
    const std::string x = value(key, fallback);
    if (std::find(valid.begin(), valid.end(), x) == valid.end()) refuse(where, key, x, why);
  };
  require("model.mcore_gpt", "false", {"true"}, "only Megatron-core's GPT (mcore_gpt: true) is priced");
  require("model.transformer_engine", "false", {"true"}, "only Transformer Engine's layers are priced");
  require("model.megatron_amp_O2", "false", {"true"},
          "without O2 the weights stay FP32 under autocast, which is not priced (valid: true, BF16 weights)");
  require("trainer.precision", "32", {"bf16", "bf16-mixed"},
          "headroom prices BF16 training, and FP8 on top of it (valid: bf16, bf16-mixed)");
  require("model.precision", "bf16", {"bf16", "bf16-mixed"}, "the model's precision must be trainer.precision's BF16");
  require("trainer.accumulate_grad_batches", "1", {"1"}, "NeMo accumulates through global_batch_size (valid: 1)");
  require("model.attention_type", "multihead", {"multihead"}, "only causal multi-head attention is priced");
  require("model.transformer_block_type", "pre_ln", {"pre_ln"}, "only pre-norm blocks are priced");
  require("model.headscale", "false", {"false"}, "NormFormer's head scaling is not priced");
  require("model.fp32_residual_connection", "false", {"false"}, "an FP32 residual stream is not priced");
  require("model.fp16_lm_cross_entropy", "false", {"false"}, "the loss over 16-bit logits is not priced");
  require("model.pre_process", "true", {"true"}, "a model without its embedding is not priced");
  require("model.post_process", "true", {"true"}, "a model without its output layer is not priced");
  require("model.use_emha", "false", {"false"}, "Apex's fused multi-head attention is not priced");
  require("model.deterministic_mode", "false", {"false"}, "deterministic kernels are slower and not priced");
  require("model.fsdp", "false", {"false"}, "NeMo's FSDP is not priced (PyTorch FSDP jobs: --framework pytorch-fsdp)");
  require("model.sharp", "false", {"false"}, "SHARP's in-switch reductions are not priced");
  require("model.ffn_dropout", "0.0", {"0.0", "0"}, "dropout inside the MLP is not priced");
  require("model.rampup_batch_size", "null", {"null"},
          "a batch ramp-up: give the steady-state global_batch_size and no ramp-up");
  require("model.name", "", {"", "te_gpt", "megatron_gpt_full_te_layer_autocast"},
          "only Transformer Engine's GPT layer is priced (valid: te_gpt, megatron_gpt_full_te_layer_autocast)");
  require("model.nccl_communicator_config_path", "null", {"null", "None", "~"},
          "NCCL's per-communicator tuning is not priced");
  require("model.cpu_offloading", "false", {"false"}, "NeMo's activation and weight offloading is not priced");
  require("model.enable_cuda_graph", "false", {"false"}, "CUDA graphs (no kernel launch overhead) are not priced");
  require("model.optim.nccl_ub", "false", {"false"}, "NCCL's user-buffer registration is not priced");
  require("model.use_tp_pp_dp_mapping", "false", {"false"},
          "ranks ordered TP, PP, DP put other groups inside a node than Megatron-core's default order headroom prices");
  // Transformer Engine's own default (1): its fused attention where cuDNN has it, the attention priced.
  require("env_vars.NVTE_FUSED_ATTN", "1", {"1"}, "only Transformer Engine's default attention choice is priced");
  // Userbuffers overlap both the all-gather and the reduce-scatter (megatron_base_model.py tp_comm_overlap_ag/_rs,
  // on unless set); one of them alone is not priced.
  if (is("model.ub_tp_comm_overlap", "false"))
    for (const char* key : {"model.tp_comm_overlap_ag", "model.tp_comm_overlap_rs"})
      require(key, "true", {"true"}, "only both TP collectives overlapped is priced");
  // What NeMo's model keys are in Megatron-LM's arguments.
  std::vector<std::string> t = {"pretrain_gpt.py", "--bf16"};
  const auto flag = [&](const std::string& key, const char* megatron) {
    const std::string x = value(key, "null");
    if (x != "null") t.insert(t.end(), {megatron, x});
  };
  const auto flag_if = [&](const std::string& key, const char* megatron, bool fallback) {
    if (is(key, fallback ? "true" : "false")) t.emplace_back(megatron);
  };
  flag("model.tensor_model_parallel_size", "--tensor-model-parallel-size");
  flag("model.pipeline_model_parallel_size", "--pipeline-model-parallel-size");
  flag("model.context_parallel_size", "--context-parallel-size");
  flag("model.expert_model_parallel_size", "--expert-model-parallel-size");
  // Experts (megatron_base_model.py build_transformer_config hands these to Megatron-core's TransformerConfig under
  // the same names): num_moe_experts is --num-experts.
  flag("model.num_moe_experts", "--num-experts");
  flag("model.moe_router_topk", "--moe-router-topk");
  flag("model.moe_token_dispatcher_type", "--moe-token-dispatcher-type");
  flag("model.moe_expert_capacity_factor", "--moe-expert-capacity-factor");
  flag_if("model.moe_pad_expert_input_to_capacity", "--moe-pad-expert-input-to-capacity", false);
  // NeMo's virtual_pipeline_model_parallel_size is Megatron-core's: model chunks per pipeline rank.
  flag("model.virtual_pipeline_model_parallel_size", "--num-virtual-stages-per-pipeline-rank");
  flag("model.micro_batch_size", "--micro-batch-size");
  flag("model.global_batch_size", "--global-batch-size");
  const std::string seq = value("model.encoder_seq_length", "null");
  if (seq == "null") throw Error(w + ": no model.encoder_seq_length: the sequence length is required");
  // The micro-batches are the dataset's samples, data.seq_length tokens (megatron_gpt_model.py
  // build_train_valid_test_datasets); encoder_seq_length shapes only the pipeline's sends (fwd_bwd_step hands it to the
  // schedule as seq_length), so with more than one stage the two must agree.
  const std::string data = value("model.data.seq_length", seq);
  if (data != seq && value("model.pipeline_model_parallel_size", "1") != "1")
    refuse(where, "model.data.seq_length", data,
           "differs from model.encoder_seq_length " + seq +
               ", which shapes the pipeline's sends (valid: equal under pipeline_model_parallel_size > 1)");
  const std::string seq_note =
      data == seq ? ""
                  : "model.data.seq_length " + data + " is the micro-batches' length (the dataset's samples); " +
                        "encoder_seq_length " + seq + " would shape only a pipeline's sends, and there is one stage";
  t.insert(t.end(), {"--seq-length", data});
  flag("model.max_position_embeddings", "--max-position-embeddings");
  flag("model.num_layers", "--num-layers");
  flag("model.hidden_size", "--hidden-size");
  flag("model.ffn_hidden_size", "--ffn-hidden-size");
  flag("model.num_attention_heads", "--num-attention-heads");
  flag("model.kv_channels", "--kv-channels");
  // TransformerConfig.window_size, a YAML list [left, right], as Megatron-LM's --window-size left,right.
  if (std::string window = value("model.window_size", "null"); window != "null") {
    std::erase_if(window, [](char c) { return c == '[' || c == ']' || c == ' '; });
    t.insert(t.end(), {"--window-size", window});
  }
  flag("model.window_attn_skip_freq", "--window-attn-skip-freq");
  // override_vocab_size is the embedding's row count as it is, unpadded (megatron_gpt_model.py model_provider_func:
  // vocab_size=cfg.get('override_vocab_size', padded_vocab_size)): Megatron-LM's --vocab-size padded to a multiple of
  // 1 (x tp, which NeMo's vocabulary-parallel embedding needs to divide it anyway).
  if (const std::string vocab = value("model.override_vocab_size", "null"); vocab != "null") {
    t.insert(t.end(), {"--vocab-size", vocab, "--make-vocab-size-divisible-by", "1"});
  } else {
    flag("model.make_vocab_size_divisible_by", "--make-vocab-size-divisible-by");
    // Megatron's own GPT-2 BPE tokenizer fixes the vocabulary, and so does a Hugging Face tokenizer loaded as its
    // repository has it (get_nmt_tokenizer with no vocabulary or merges file of the config's), padded as Megatron-LM
    // pads it (megatron_base_model.py _vocab_size_with_padding); any other tokenizer's size is --model's.
    const std::string library = value("model.tokenizer.library", "null"), type = value("model.tokenizer.type", "null");
    const auto given = [&](const std::string& key) {  // set at all (an interpolated path need not resolve)
      const auto it = v.find(key);
      return it != v.end() && it->second != "null";
    };
    const bool own_files = given("model.tokenizer.vocab_file") || given("model.tokenizer.merge_file");
    // A path whose interpolation the config cannot resolve (${data_dir} of the launcher) is not on this machine.
    const auto local_path = [&](const std::string& key) -> std::string {
      try {
        return value(key, "");
      } catch (const Error&) {
        return "";
      }
    };
    if (library == "megatron" && type == "GPT2BPETokenizer")
      t.insert(t.end(), {"--vocab-size", std::to_string(kGpt2BpeVocabulary)});
    else if (const auto tokens = hugging_face_vocabulary(type); library == "huggingface" && !own_files && tokens)
      t.insert(t.end(), {"--vocab-size", std::to_string(*tokens)});
    // A SentencePiece model (tokenizer.model) or a local Hugging Face tokenizer (tokenizer.type a directory), read
    // where check runs when the file is there; special tokens the config adds would count on top and are left to
    // --model (nemo/collections/nlp/modules/common/tokenizer_utils.py get_nmt_tokenizer).
    else if (const bool sentencepiece = library == "sentencepiece";
             !own_files && !given("model.tokenizer.special_tokens") && (sentencepiece || library == "huggingface"))
      if (const auto size = tokenizer_file_vocabulary(
              local_path(sentencepiece ? "model.tokenizer.model" : "model.tokenizer.type"),
              sentencepiece ? TokenizerLibrary::sentencepiece : TokenizerLibrary::huggingface))
        t.insert(t.end(), {"--vocab-size", std::to_string(*size)});
  }
  flag("model.hidden_dropout", "--hidden-dropout");
  flag("model.attention_dropout", "--attention-dropout");
  if (const std::string g = value("model.num_query_groups", "null");
      g != "null" && g != value("model.num_attention_heads", "null"))
    t.insert(t.end(), {"--group-query-attention", "--num-query-groups", g});
  // megatron_base_model.py: activation (fast-)swiglu is a gated SiLU MLP, (fast-)gelu the plain GELU one.
  if (const std::string a = value("model.activation", "gelu"); a == "swiglu" || a == "fast-swiglu")
    t.emplace_back("--swiglu");
  else if (a == "squared-relu")
    t.emplace_back("--squared-relu");
  else if (a != "gelu" && a != "fast-gelu")
    refuse(where, "model.activation", a, "not priced (valid: gelu, fast-gelu, swiglu, fast-swiglu, squared-relu)");
  if (const std::string n = value("model.normalization", "layernorm"); n == "rmsnorm")
    t.insert(t.end(), {"--normalization", "RMSNorm"});
  else if (n == "layernorm" || n == "layernorm1p")
    t.insert(t.end(), {"--normalization", "LayerNorm"});
  else
    refuse(where, "model.normalization", n, "not priced (valid: layernorm, layernorm1p, rmsnorm)");
  if (!is("model.bias", "true")) t.emplace_back("--disable-bias-linear");
  flag_if("model.qkv_bias", "--add-qkv-bias", false);  // megatron_base_model.py: add_qkv_bias = cfg.qkv_bias
  if (const std::string p = value("model.position_embedding_type", "learned_absolute"); p == "rope")
    t.insert(t.end(), {"--position-embedding-type", "rope"});
  else if (p != "learned_absolute")
    refuse(where, "model.position_embedding_type", p, "not priced (valid: learned_absolute, rope)");
  if (!is("model.share_embeddings_and_output_weights", "true")) t.emplace_back("--untie-embeddings-and-output-weights");
  flag_if("model.sequence_parallel", "--sequence-parallel", false);
  flag_if("model.ub_tp_comm_overlap", "--tp-comm-overlap", false);
  if (!is("model.overlap_p2p_comm", "true")) t.emplace_back("--no-overlap-p2p-communication");
  // Activation checkpointing (megatron_base_model.py: granularity full with method uniform|block and a layer count,
  // or selective); only every layer recomputed is priced for full.
  // megatron_base_model.py build_transformer_config copies the model config's TransformerConfig fields,
  // recompute_modules among them (a sequence of names; an empty one recomputes nothing).
  const std::string listed = value("model.recompute_modules", "null");
  const std::vector<std::string> modules = listed == "null" ? std::vector<std::string>{} : text::list_items(listed);
  if (const std::string g = value("model.activations_checkpoint_granularity", "null"); g == "selective") {
    if (listed == "null" || !modules.empty()) t.insert(t.end(), {"--recompute-granularity", "selective"});
    if (!modules.empty()) {
      t.emplace_back("--recompute-modules");
      t.insert(t.end(), modules.begin(), modules.end());
    }
  } else if (g == "full") {
    // megatron_base_model.py hands both to Megatron-core's TransformerConfig (recompute_method, recompute_num_layers).
    const std::string method = value("model.activations_checkpoint_method", "null");
    const std::string layers = value("model.activations_checkpoint_num_layers", "null");
    if (method != "uniform" && method != "block")
      refuse(where, "model.activations_checkpoint_method", method, "not priced (valid: uniform, block)");
    if (layers == "null")
      refuse(where, "model.activations_checkpoint_num_layers", layers, "full recompute needs its layers (1 or more)");
    t.insert(t.end(),
             {"--recompute-granularity", "full", "--recompute-method", method, "--recompute-num-layers", layers});
  } else if (g != "null") {
    refuse(where, "model.activations_checkpoint_granularity", g, "not priced (valid: null, selective, full)");
  }
  for (const char* key : {"model.num_micro_batches_with_partial_activation_checkpoints",
                          "model.activations_checkpoint_layers_per_pipeline"})
    if (const std::string x = value(key, "null"); x != "null" && x != "0")
      refuse(where, key, x, "partial activation checkpointing is not priced");
  // FP8 (megatron_base_model.py: fp8_e4m3 is E4M3 throughout, fp8_hybrid E4M3 forward and E5M2 gradients), with
  // Transformer Engine's delayed scaling, NeMo 1.x's only recipe.
  if (is("model.fp8", "false")) {
    const bool e4m3 = is("model.fp8_e4m3", "false"), hybrid = is("model.fp8_hybrid", "false");
    if (e4m3 == hybrid)
      refuse(where, "model.fp8", "true", "give exactly one of fp8_e4m3 and fp8_hybrid (NeMo needs one format)");
    t.insert(t.end(), {"--fp8-format", hybrid ? "hybrid" : "e4m3", "--fp8-recipe", "delayed"});
    flag_if("model.fp8_params", "--fp8-param-gather", false);
    require("model.fp8_wgrad", "true", {"true"}, "weight-gradient GEMMs in BF16 under FP8 are not priced");
  } else if (is("model.fp8_params", "false")) {
    refuse(where, "model.fp8_params", "true", "FP8 weights need fp8: true");
  }
  // The optimizer (NeMo's optimizer names): Megatron-core's distributed optimizer (ZeRO-1 over DP); Apex's distributed
  // Adam, which shards the same way and keeps the FP32 master weight as a 16-bit remainder beside the BF16 weight
  // (apex/contrib/optimizers/distributed_fused_adam.py store_param_remainders); or Adam without sharding.
  const std::string optimizer = value("model.optim.name", "fused_adam");
  if (optimizer == "mcore_distributed_optim" || optimizer == "distributed_fused_adam") {
    t.emplace_back("--use-distributed-optimizer");
    flag_if("model.optim.overlap_param_sync", "--overlap-param-gather", false);
  } else if (optimizer != "fused_adam" && optimizer != "adam" && optimizer != "adamw") {
    refuse(where, "model.optim.name", optimizer,
           "only Adam is priced (valid: mcore_distributed_optim, distributed_fused_adam, fused_adam, adam, adamw)");
  }
  if (optimizer == "distributed_fused_adam") t.emplace_back("--use-precision-aware-optimizer");
  // optim.dtype: Apex's state dtype (megatron_base_model.py setup_optimization). FP32 keeps the master weight as the
  // 16-bit remainder priced above; BF16, the model's dtype, keeps no master copy (store_params off), which is not
  // priced. Megatron-core's optimizer is built from lr, weight decay, betas, clipping and overlap only
  // (modelPT.py setup_megatron_optimization): its states stay FP32 whatever dtype says.
  if (const std::string d = value("model.optim.dtype", "fp32"); d != "fp32" && d != "32") {
    if (optimizer == "mcore_distributed_optim") {
      std::erase_if(out.read, [](const std::string& x) { return x.starts_with("model.optim.dtype: "); });
      out.ignored.push_back("model.optim.dtype: " + d +
                            " (Megatron-core's optimizer is not handed it: its states stay FP32)");
    } else if (optimizer == "distributed_fused_adam")
      refuse(where, "model.optim.dtype", d,
             "Apex's states in the weights' dtype with no master copy are not priced (valid: fp32)");
    else
      refuse(where, "model.optim.dtype", d, "applies to the distributed optimizers only (valid: fp32)");
  }
  // grad_sync_dtype: Apex's reduction dtype, and under Megatron-core's optimizer its DDP's grad_reduce_in_fp32 =
  // (grad_sync_dtype == 'fp32') (NeMo megatron_gpt_model.py setup_mcore_distributed_parallel).
  if (const std::string d = value("model.optim.grad_sync_dtype", "fp32"); d == "bf16") {
    if (optimizer != "distributed_fused_adam" && optimizer != "mcore_distributed_optim")
      refuse(where, "model.optim.grad_sync_dtype", d,
             "applies to the distributed optimizers only (mcore_distributed_optim, distributed_fused_adam)");
    t.emplace_back("--grad-reduce-in-bf16");
  } else if (d != "fp32" && (d != "32" || optimizer == "mcore_distributed_optim")) {
    refuse(where, "model.optim.grad_sync_dtype", d, "not priced (valid: fp32, bf16)");
  }
  flag_if("model.optim.overlap_grad_sync", "--overlap-grad-reduce", false);
  // The world: trainer.num_nodes x trainer.devices.
  const std::string nodes = value("trainer.num_nodes", "1"), devices = value("trainer.devices", "null");
  const auto whole = [&](const char* key, const std::string& x) {
    const bool digits =
        !x.empty() && x.size() <= 7 && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoll(x) < 1) refuse(where, key, x, "not a positive whole number of at most 7 digits");
    return std::stoll(x);
  };
  if (devices != "null" || gpus <= 0) {
    const std::int64_t world = whole("trainer.num_nodes", nodes) * whole("trainer.devices", devices);
    if (gpus > 0 && gpus != world)
      throw Error(w + ": --gpus " + std::to_string(gpus) + " but the config starts " + std::to_string(world) +
                  " GPUs (trainer.num_nodes x trainer.devices)");
    gpus = world;
  }
  MegatronCommand read = parse_megatron_command(t, gpus, w);
  out.run = std::move(read.run);
  out.arguments = std::move(read.arguments);
  out.sliding_window = read.sliding_window;
  out.window_skip_freq = read.window_skip_freq;
  std::string line;
  for (std::size_t i = 1; i < t.size(); ++i) line += (i > 1 ? " " : "") + t[i];
  out.notes.push_back("read as the Megatron-LM arguments NeMo hands to Megatron-core: " + line);
  if (!seq_note.empty()) out.notes.push_back(seq_note);
  out.notes.insert(out.notes.end(), read.notes.begin(), read.notes.end());
  return out;
}

std::vector<std::string> nemo_config_changes(const Layout& from, const Layout& to) {
  std::vector<std::string> out;
  const auto a = nemo_layout_keys(from), b = nemo_layout_keys(to);
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i].second != b[i].second) out.push_back(b[i].first + ": " + b[i].second + " (was " + a[i].second + ")");
  return out;
}

}  // namespace headroom::calibrate
