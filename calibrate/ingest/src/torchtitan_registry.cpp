// A torchtitan config registry (torchtitan/models/<module>/config_registry.py: the Python configs of torchtitan's main
// branch, read here at b5bcd76c6; the functions `--module <module> --config <function>` selects,
// torchtitan/config/manager.py ConfigManager._load_config) read without running it: the function is run by the recipe
// evaluator (python_eval.hpp) as NeMo's and Megatron-Bridge's recipes are. It returns `Trainer.Config(...)`
// (torchtitan/trainer.py) built from keyword arguments, or takes another function's config and sets its fields
// (`config = llama3_8b()`, `config.parallelism.tensor_parallel_degree = 8`); the command line then
// overrides fields by their dotted paths (`--parallelism.tensor_parallel_degree 8`, tyro's `--section.no-flag` for
// False, and the activation-checkpointing subcommand `activation_checkpoint:full`). Each field is read or ignored by
// name (kRegistryKeys) and priced as the TOML job config's key of the same meaning (torchtitan_job); anything else is
// refused naming it.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "python_eval.hpp"
#include "python_source.hpp"
#include "text.hpp"
#include "torchtitan_job.hpp"

namespace headroom::calibrate {
namespace {

using python::Expr;

// Every field of torchtitan's Trainer.Config (torchtitan/trainer.py, torchtitan/config/configs.py at b5bcd76c6) that
// headroom reads or ignores, by its dotted path; a prefix ending in "*" covers what is under it. `toml`: the TOML job
// config's key of the same meaning that torchtitan_job prices, "" where the value is read here.
struct RegistryKey {
  std::string_view key, toml, why;  // why: what it sets (read) or why it changes neither memory nor time (ignored)
  bool read;
};
constexpr auto kRegistryKeys = std::to_array<RegistryKey>({
    {"model_spec", "", "the model: model_registry(flavor, attn_backend, tp_gemm_backend, converters)", true},
    {"optimizer", "", "AdamW's states: default_adamw(...)", true},
    {"optimizer.implementation", "", "the optimizer's kernels; fused_opt_states_bf16 keeps BF16 states", true},
    {"training.num_tokens_per_microbatch_per_dp_rank", "", "the micro-batch", true},
    {"training.num_tokens_per_train_step", "", "the global batch", true},
    {"training.max_context_length", "training.seq_len", "the sequence", true},
    {"training.dtype", "training.dtype", "FP32 parameters", true},
    {"training.mixed_precision_param", "training.mixed_precision_param", "BF16 compute", true},
    {"training.mixed_precision_reduce", "training.mixed_precision_reduce", "FP32 gradient reduction", true},
    {"training.enable_cpu_offload", "training.enable_cpu_offload", "FSDP's CPU offload", true},
    {"training.steps", "", "the run's length", false},
    {"training.max_norm", "", "gradient clipping: one pass over the gradients", false},
    {"training.gc_freq", "", "Python garbage collection", false},
    {"training.gc_debug", "", "Python garbage collection", false},
    {"training.disable_cuda_graphs", "", "CUDA graphs replay the launches of a step, not its work", false},
    {"parallelism.data_parallel_replicate_degree", "parallelism.data_parallel_replicate_degree", "HSDP replicas", true},
    {"parallelism.data_parallel_shard_degree", "parallelism.data_parallel_shard_degree", "FSDP shards", true},
    {"parallelism.fsdp_reshard_after_forward", "parallelism.fsdp_reshard_after_forward", "FSDP2 resharding", true},
    {"parallelism.tensor_parallel_degree", "parallelism.tensor_parallel_degree", "TP", true},
    {"parallelism.enable_sequence_parallel", "", "sequence parallelism", true},
    {"parallelism.pipeline_parallel_degree", "parallelism.pipeline_parallel_degree", "PP", true},
    {"parallelism.pipeline_parallel_schedule", "parallelism.pipeline_parallel_schedule", "the pipeline schedule", true},
    {"parallelism.num_pp_microbatches", "", "the pipeline's micro-batches", true},
    {"parallelism.pipeline_parallel_first_stage_less_layers", "parallelism.pipeline_parallel_first_stage_less_layers",
     "the pipeline split", true},
    {"parallelism.pipeline_parallel_last_stage_less_layers", "parallelism.pipeline_parallel_last_stage_less_layers",
     "the pipeline split", true},
    {"parallelism.pipeline_parallel_layers_per_stage", "parallelism.pipeline_parallel_layers_per_stage",
     "the virtual stages a rank", true},
    {"parallelism.pipeline_parallel_schedule_csv", "", "a schedule from a file (none)", true},
    {"parallelism.module_fqns_per_model_part", "", "the pipeline split by module (none)", true},
    {"parallelism.context_parallel_degree", "parallelism.context_parallel_degree", "CP", true},
    {"parallelism.expert_parallel_degree", "parallelism.expert_parallel_degree", "experts", true},
    {"parallelism.context_parallel_load_balancer", "", "CP's causal load balance, priced as balanced", false},
    {"parallelism.context_parallel_ptrr_mask_key", "", "CP's load balancer's mask", false},
    {"parallelism.spmd_backend", "", "DTensor or spmd_types: the same collectives", false},
    {"parallelism.enable_fsdp_symm_mem", "", "FSDP's collectives through symmetric memory: the same bytes", false},
    {"activation_checkpoint", "", "recompute: SelectiveAC (per op), FullAC or None", true},
    {"activation_checkpoint.force_recompute_mm_shapes_by_fqns", "", "the MoE router's shapes (none in a dense model)",
     true},
    {"activation_checkpoint.preserve_rng_state", "", "RNG state: a few bytes per block", false},
    {"activation_checkpoint.determinism_check", "", "checks", false},
    {"activation_checkpoint.debug", "", "logging", false},
    {"compile.enable", "compile.enable", "torch.compile", true},
    {"compile.enable_async_tensor_parallel", "parallelism.enable_async_tensor_parallel", "async TP", true},
    {"compile.backend", "compile.backend", "Inductor", true},
    {"compile.components", "", "the blocks are what is priced compiled", false},
    {"override.imports", "", "swapped implementations (none)", true},
    {"loss*", "", "the loss, priced with the output layer", false},
    {"hf_assets_path", "", "tokenizer and checkpoint path", false},
    {"dump_folder", "", "outputs", false},
    {"tokenizer*", "", "the tokenizer", false},
    {"dataloader*", "", "data loading", false},
    {"lr_scheduler*", "", "learning-rate schedule", false},
    {"checkpoint*", "", "checkpointing, between the measured steps", false},
    {"validator*", "", "validation, between the training steps", false},
    {"profiler*", "", "profiling", false},
    {"metrics*", "", "logging", false},
    {"comm*", "", "timeouts and traces", false},
    {"debug*", "", "seeds, determinism and logging", false},
});

// The largest count a setting may give (degrees, tokens): 10^12, so that products stay exact after the checks of
// torchtitan_job.
constexpr std::int64_t kMaxCount = 1'000'000'000'000;

// The fields of a config: dotted path -> value, where it was set.
using Fields = std::map<std::string, std::pair<Expr, std::string>>;

// A field set to a value: a config class's call (`ParallelismConfig(...)`, `SelectiveAC.Config()`, ...) replaces what
// was under the path with its keyword arguments; anything else sets the one field. A section the function's
// assignments added without a class (python_eval.hpp place: `config.checkpoint.enable = True` where the config gave no
// checkpoint) holds only the fields set.
void set(Fields& config, const std::string& path, const Expr& v, const std::string& line,
         const python::Evaluator* ev = nullptr) {
  const bool added = python::added_section(v, std::string_view(path).substr(path.rfind('.') + 1));
  const bool section = v.kind == Expr::Kind::call && v.args.empty() && v.text.ends_with("Config");
  if (v.kind == Expr::Kind::call) {
    const std::string prefix = path + ".";
    for (auto it = config.lower_bound(prefix); it != config.end() && it->first.starts_with(prefix);)
      it = config.erase(it);
  }
  if (!added) config[path] = {v, line};
  if (section || added)
    for (const Expr& kw : v.kwargs) set(config, path + "." + kw.key, kw, ev != nullptr ? ev->where(kw) : line, ev);
}

// The config the registry's function `name` returns, run by the recipe evaluator (python_eval.hpp: its own module's
// functions followed, `config = llama3_8b()` then `config.parallelism.tensor_parallel_degree = 8`), as its fields.
Fields run_config(std::string_view text, const std::string& where, const std::string& name) {
  python::Evaluator ev(text, where);
  if (!ev.main().functions.contains(name)) {
    std::string valid;
    for (const auto& [n, f] : ev.main().functions)
      if (!n.starts_with('_')) valid += (valid.empty() ? "" : ", ") + n;
    throw Error(where + ": no config function " + name + " (valid: " + valid.substr(0, 400) + ")");
  }
  const Expr out = ev.call(name, {});
  if (out.kind != Expr::Kind::call || out.text != "Trainer.Config" || !out.args.empty())
    throw Error(ev.where(out) + ": " + name + "() returns " + out.shown() + ", not a Trainer.Config(...)");
  Fields config;
  for (const Expr& kw : out.kwargs) set(config, kw.key, kw, ev.where(kw), &ev);
  return config;
}

// The model registry's call: its flavor (first argument or flavor=), attention backend and converters.
struct ModelCall {
  std::string flavor, attn_backend = "flex";
  std::vector<const Expr*> converters;
};
ModelCall model_call(const Expr& e, const std::string& line) {
  if (e.kind != Expr::Kind::call || e.text != "model_registry")
    throw Error(line + ": model_spec = " + e.shown() + ": headroom reads the module's model_registry(flavor, ...)");
  ModelCall m;
  const Expr* flavor = e.args.empty() ? e.kwarg("flavor") : &e.args.front();
  if (flavor == nullptr || flavor->kind != Expr::Kind::string)
    throw Error(line + ": model_registry(...) names no flavor as a string");
  m.flavor = flavor->text;
  for (const Expr& kw : e.kwargs) {
    if (kw.key == "flavor") continue;
    if (kw.key == "attn_backend" && kw.kind == Expr::Kind::string) {
      m.attn_backend = kw.text;
    } else if (kw.key == "tp_gemm_backend" && kw.kind == Expr::Kind::string && kw.text == "default") {
    } else if (kw.key == "tp_gemm_backend" && kw.kind == Expr::Kind::string && kw.text == "dist_gemm") {
      m.converters.push_back(&kw);  // async TP: read below
    } else if (kw.key == "converters" && kw.kind == Expr::Kind::list) {
      for (const Expr& c : kw.args) m.converters.push_back(&c);
    } else if (!(kw.key == "converters" && kw.kind == Expr::Kind::name && kw.text == "None")) {
      throw Error(line + ": model_registry(" + kw.key + "=" + kw.shown() + ") is not read");
    }
  }
  if (e.args.size() > 1) throw Error(line + ": model_registry(...) with more than the flavor positionally");
  return m;
}

// Command-line overrides as tyro reads them: `--path value`, `--path=value`, `--path` (True), `--section.no-flag`
// (False), a list as the values up to the next option, `activation_checkpoint:<policy>` subcommands; `--module` and
// `--config` select the function. Hyphens in a path are underscores.
struct CommandLine {
  std::string module, config;
  std::vector<std::pair<std::string, Expr>> overrides;
};
// A tyro subcommand, `section:choice` (names of letters, digits, '_' and '-').
bool subcommand(const std::string& a) {
  const auto colon = a.find(':');
  const auto name = [](std::string_view x) {
    return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-';
    });
  };
  return !a.starts_with("-") && colon != std::string::npos && name(std::string_view(a).substr(0, colon)) &&
         name(std::string_view(a).substr(colon + 1));
}
CommandLine command_line(const std::vector<std::string>& args) {
  CommandLine c;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (subcommand(a)) {
      const auto colon = a.find(':');
      std::string section = a.substr(0, colon), policy = a.substr(colon + 1);
      std::replace(section.begin(), section.end(), '-', '_');
      if (section != "activation_checkpoint")
        throw Error("override " + a + ": the only subcommand read is activation_checkpoint:<policy>");
      const std::map<std::string, std::string> classes = {{"selective", "SelectiveAC.Config"},
                                                          {"full", "FullAC.Config"},
                                                          {"none", "None"},
                                                          {"memory-budget", "MemoryBudgetAC.Config"},
                                                          {"memory_budget", "MemoryBudgetAC.Config"}};
      const auto it = classes.find(policy);
      if (it == classes.end()) throw Error("override " + a + ": valid policies: selective, full, none, memory-budget");
      c.overrides.emplace_back("activation_checkpoint", it->second == "None"
                                                            ? Expr{Expr::Kind::name, "None", {}, {}, 0, {}}
                                                            : Expr{Expr::Kind::call, it->second, {}, {}, 0, {}});
      continue;
    }
    if (!a.starts_with("--") || a.size() == 2)
      throw Error("override " + a + ": expected --section.field value (torchtitan's command line)");
    std::string path = a.substr(2), value;
    bool has_value = false;
    if (const auto eq = path.find('='); eq != std::string::npos) {
      value = path.substr(eq + 1), has_value = true;
      path.resize(eq);
    }
    std::replace(path.begin(), path.end(), '-', '_');
    if (path == "module" || path == "config") {
      if (!has_value && i + 1 < args.size()) value = args[++i], has_value = true;
      if (!has_value || value.empty()) throw Error("override --" + path + ": needs a value");
      (path == "module" ? c.module : c.config) = value;
      continue;
    }
    if (const auto dot = path.rfind('.');
        dot != std::string::npos && path.compare(dot + 1, 3, "no_") == 0 && !has_value) {  // tyro's --section.no-flag
      c.overrides.emplace_back(path.substr(0, dot + 1) + path.substr(dot + 4),
                               Expr{Expr::Kind::name, "False", {}, {}, 0, {}});
      continue;
    }
    if (has_value) {
      c.overrides.emplace_back(path, python::value_of(value));
      continue;
    }
    std::vector<std::string> values;
    while (i + 1 < args.size() && !args[i + 1].starts_with("--") && !subcommand(args[i + 1]))
      values.push_back(args[++i]);
    if (values.empty()) {
      c.overrides.emplace_back(path, Expr{Expr::Kind::name, "True", {}, {}, 0, {}});
    } else if (values.size() == 1) {
      c.overrides.emplace_back(path, python::value_of(values.front()));
    } else {
      Expr list{Expr::Kind::list, "[...]", {}, {}, 0, {}};
      for (const auto& v : values) list.args.push_back(python::value_of(v));
      c.overrides.emplace_back(path, list);
    }
  }
  if (c.config.empty())
    throw Error("a torchtitan config registry needs --config <function> (as torchtitan's --config names it)");
  return c;
}

// An integer setting, positive (or -1 where `minus_one`), at most kMaxCount.
std::int64_t count_of(const std::string& key, const Expr& e, const std::string& line, bool minus_one = false) {
  std::int64_t x = 0;
  const auto& s = e.text;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (e.kind != Expr::Kind::number || ec != std::errc() || p != s.data() + s.size() || x == 0 ||
      (x < 0 && !(minus_one && x == -1)) || x > kMaxCount)
    throw Error(line + ": " + key + " = " + e.shown().substr(0, 40) + ": expected a positive integer up to 10^12" +
                (minus_one ? " (or -1)" : ""));
  return x;
}

}  // namespace

TorchtitanJob read_torchtitan_registry(std::string_view text, std::int64_t gpus, std::string_view where,
                                       const std::vector<std::string>& args) {
  const CommandLine cli = command_line(args);
  const std::string place(where);
  // The module: --module, else the folder of torchtitan/models/<module>/config_registry.py.
  std::string module = cli.module.empty() ? std::filesystem::path(place).parent_path().filename().string() : cli.module;
  if (const auto dot = module.rfind('.'); dot != std::string::npos) module = module.substr(dot + 1);
  Fields config = run_config(text, place, cli.config);
  for (const auto& [path, value] : cli.overrides) set(config, path, value, "override --" + path);

  TorchtitanJob job;
  std::map<std::string, std::string> t;                             // the TOML job config's keys torchtitan_job prices
  std::map<std::string, std::pair<const Expr*, std::string>> read;  // the fields read here, with where
  for (const auto& [path, setting] : config) {
    const auto& [value, line] = setting;
    const RegistryKey* rule = text::key_rule(kRegistryKeys, path);
    if (rule == nullptr && path.find('.') == std::string::npos && value.kind == Expr::Kind::call &&
        value.text.ends_with("Config"))
      continue;  // a section's config class (`training=TrainingConfig(...)`): its fields are checked by name
    if (rule == nullptr)
      throw Error(line + ": " + path + " = " + value.shown().substr(0, 60) +
                  ": a field headroom does not know; it may change memory or time (valid: the fields of torchtitan's "
                  "Trainer.Config that headroom reads or ignores)");
    if (rule->key.ends_with('*') && path.find('.') != std::string::npos &&
        config.contains(path.substr(0, path.find('.'))))
      continue;  // listed with its section's config class
    const std::string shown = path + " = " + value.shown().substr(0, 80);
    (rule->read ? job.read : job.ignored).push_back(shown + (rule->read ? "" : " (" + std::string(rule->why) + ")"));
    if (!rule->read) continue;
    read[path] = {&value, line};
    if (!rule->toml.empty() && !(value.kind == Expr::Kind::name && value.text == "None")) {  // None: the default
      if (value.kind != Expr::Kind::number && value.kind != Expr::Kind::string && value.kind != Expr::Kind::name)
        throw Error(line + ": " + shown + ": expected a number, a string or True/False");
      t[std::string(rule->toml)] = python::plain_value(value);
    }
  }
  const auto read_value = [&](const std::string& path) -> const Expr* {
    const auto it = read.find(path);
    return it == read.end() ? nullptr : it->second.first;
  };
  const auto line_of = [&](const std::string& path) {
    const auto it = read.find(path);
    return it == read.end() ? place : it->second.second;
  };
  const auto refuse = [&](const std::string& path, const std::string& why) {
    throw Error(line_of(path) + ": " + path + " = " + read_value(path)->shown().substr(0, 60) + ": " + why);
  };
  const auto is = [&](const std::string& path, std::string_view name) {
    const Expr* e = read_value(path);
    return e != nullptr && e->kind == Expr::Kind::name && e->text == name;
  };

  // The model, and its converters (torchao's float8 linears; MX, NVFP4 and LoRA are not priced).
  const Expr* model = read_value("model_spec");
  if (model == nullptr) throw Error(place + ": " + cli.config + "() gives no model_spec");
  const ModelCall m = model_call(*model, line_of("model_spec"));
  t["model.name"] = module;
  t["model.flavor"] = m.flavor;
  if (m.attn_backend != "flex" && m.attn_backend != "flex_flash" && m.attn_backend != "varlen")
    refuse("model_spec", "attn_backend \"" + m.attn_backend + "\" (valid: flex, flex_flash, varlen)");
  job.notes.push_back("attention: torchtitan masks attention to each document of the packed sequence (block-causal, " +
                      m.attn_backend + "); priced as causal over the whole " +
                      "sequence, the time of one document filling it");
  for (const Expr* c : m.converters) {
    if (c->key == "tp_gemm_backend") {
      t["parallelism.enable_async_tensor_parallel"] = "true";  // dist_gemm: the TP collectives inside the GEMMs
      continue;
    }
    if (c->kind != Expr::Kind::call || c->text != "Float8LinearConverter.Config")
      refuse("model_spec", "converter " + c->shown() + " is not priced (valid: Float8LinearConverter.Config)");
    // torchao's recipe (torchtitan/components/quantization/float8.py: rowwise by default, or rowwise_with_gw_hp).
    const Expr* recipe = c->kwarg("recipe_name");
    if (recipe == nullptr || recipe->text != "tensorwise")
      refuse("model_spec", "Float8LinearConverter recipe_name " +
                               (recipe ? recipe->shown() : "\"rowwise\" (its default)") +
                               ": only the tensorwise float8 recipe is priced");
    t["model.converters"] = "[\"float8\"]";
    if (const Expr* emulate = c->kwarg("emulate"); emulate != nullptr && python::plain_value(*emulate) == "true")
      refuse("model_spec", "Float8LinearConverter emulate=True runs FP8 in software, which is not priced");
  }
  // The optimizer: default_adamw(...) (torchtitan/components/optimizer/optimizer.py, a catch-all AdamW group).
  const Expr* optimizer = read_value("optimizer");
  if (optimizer == nullptr) throw Error(place + ": " + cli.config + "() gives no optimizer");
  if (optimizer->kind != Expr::Kind::call || optimizer->text != "default_adamw")
    refuse("optimizer", "only default_adamw(...)'s AdamW is read");
  t["optimizer.name"] = "AdamW";
  if (const Expr* impl = read_value("optimizer.implementation");
      impl != nullptr && impl->text == "fused_opt_states_bf16")
    refuse("optimizer.implementation", "BF16 Adam states under torchtitan are not priced");
  // What must stay at torchtitan's default.
  if (const Expr* csv = read_value("parallelism.pipeline_parallel_schedule_csv");
      csv != nullptr && !(csv->kind == Expr::Kind::string && csv->text.empty()) &&
      !is("parallelism.pipeline_parallel_schedule_csv", "None"))
    refuse("parallelism.pipeline_parallel_schedule_csv", "a schedule from a file is not priced");
  if (read_value("parallelism.module_fqns_per_model_part") != nullptr &&
      !is("parallelism.module_fqns_per_model_part", "None"))
    refuse("parallelism.module_fqns_per_model_part", "a pipeline split by module names is not priced");
  if (const Expr* imports = read_value("override.imports");
      imports != nullptr && !(imports->kind == Expr::Kind::list && imports->args.empty()))
    refuse("override.imports", "swapped implementations are not priced");
  if (const Expr* shapes = read_value("activation_checkpoint.force_recompute_mm_shapes_by_fqns");
      shapes != nullptr &&
      !(shapes->kind == Expr::Kind::list && shapes->args.size() == 1 && shapes->args.front().text == "moe.router.gate"))
    refuse("activation_checkpoint.force_recompute_mm_shapes_by_fqns",
           "matmuls forced to recompute beyond the MoE router's are not priced");
  // Activation checkpointing (torchtitan/distributed/activation_checkpoint.py): SelectiveAC is per-op selective (its
  // save list: matmuls every other one, attention, reductions), the default.
  if (const Expr* ac = read_value("activation_checkpoint"); ac == nullptr || ac->text == "SelectiveAC.Config") {
    t["activation_checkpoint.mode"] = "selective", t["activation_checkpoint.selective_ac_option"] = "op";
  } else if (ac->text == "FullAC.Config") {
    t["activation_checkpoint.mode"] = "full";
  } else if (ac->kind == Expr::Kind::name && ac->text == "None") {
    t["activation_checkpoint.mode"] = "none";
  } else {
    refuse("activation_checkpoint", "valid: SelectiveAC.Config, FullAC.Config or None (a memory budget is not priced)");
  }
  // Tokens to sequences (torchtitan/trainer.py): a micro-batch is num_tokens_per_microbatch_per_dp_rank tokens in
  // rows of max_context_length; a DP rank runs num_pp_microbatches of them a step under PP (1 without), and the step
  // num_tokens_per_train_step in all (default: one pass over every DP rank).
  const auto count = [&](const std::string& path, std::int64_t fallback) {
    const Expr* e = read_value(path);
    return e == nullptr ? fallback : count_of(path, *e, line_of(path), path == "training.num_tokens_per_train_step");
  };
  const std::int64_t seq = count("training.max_context_length", 2048);
  const std::int64_t micro = count("training.num_tokens_per_microbatch_per_dp_rank", 16384);
  if (micro % seq != 0)
    throw Error(line_of("training.num_tokens_per_microbatch_per_dp_rank") +
                ": training.num_tokens_per_microbatch_per_dp_rank " + std::to_string(micro) +
                " is not a whole number of rows of training.max_context_length " + std::to_string(seq));
  const std::int64_t pp = count("parallelism.pipeline_parallel_degree", 1);
  const std::int64_t microbatches = pp > 1 ? count("parallelism.num_pp_microbatches", 1) : 1;
  const std::int64_t mbs = micro / seq;
  if (mbs > kMaxCount / microbatches)
    throw Error(place + ": num_pp_microbatches " + std::to_string(microbatches) + " of " + std::to_string(mbs) +
                " sequences make more than 10^12 a DP rank");
  t["training.seq_len"] = std::to_string(seq);
  t["training.local_batch_size"] = std::to_string(mbs * microbatches);
  if (pp > 1) t["parallelism.pipeline_parallel_microbatch_size"] = std::to_string(mbs);
  if (const std::int64_t step = count("training.num_tokens_per_train_step", -1); step != -1) {
    if (step % seq != 0)
      throw Error(line_of("training.num_tokens_per_train_step") + ": training.num_tokens_per_train_step " +
                  std::to_string(step) + " is not a whole number of rows of " + std::to_string(seq));
    t["training.global_batch_size"] = std::to_string(step / seq);
  }

  TorchtitanJob priced = torchtitan_job(t, gpus, where);
  priced.read = std::move(job.read), priced.ignored = std::move(job.ignored), priced.notes = std::move(job.notes);
  // Tensor parallelism without sequence parallelism (enable_sequence_parallel False): the norms and dropouts whole.
  if (is("parallelism.enable_sequence_parallel", "False")) priced.layout["sequence_parallel"] = "false";
  return priced;
}

std::optional<std::map<std::string, std::string>> torchtitan_main_flags(
    const std::map<std::string, std::string>& toml_flags, std::int64_t dp, bool sequence_parallel) {
  const auto get = [&](const std::string& flag) -> std::optional<std::int64_t> {
    const auto it = toml_flags.find(flag);
    std::int64_t x = 0;
    if (it == toml_flags.end()) return std::nullopt;
    const auto [p, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), x);
    if (ec != std::errc() || p != it->second.data() + it->second.size()) return std::nullopt;
    return x;
  };
  const auto seq = get("--training.seq_len"), local = get("--training.local_batch_size"),
             global = get("--training.global_batch_size"),
             micro = get("--parallelism.pipeline_parallel_microbatch_size");
  if (!seq || !local || !global) return std::nullopt;
  std::map<std::string, std::string> out;
  out["--parallelism.enable_sequence_parallel"] = sequence_parallel ? "True" : "False";
  for (const auto& [flag, value] : toml_flags) {
    if (flag.starts_with("--model.") || flag.starts_with("--quantize.") || flag.starts_with("--float8."))
      return std::nullopt;  // torchtitan main's float8 recipes are rowwise, not priced
    if (flag == "--activation_checkpoint.mode") {
      const auto option = toml_flags.find("--activation_checkpoint.selective_ac_option");
      if (value == "selective" && (option == toml_flags.end() || option->second != "op"))
        return std::nullopt;  // every N-th block: torchtitan main checkpoints per op only
      out["activation_checkpoint:"] = value;
    } else if (flag == "--parallelism.enable_async_tensor_parallel") {
      out["--compile.enable_async_tensor_parallel"] = value;
    } else if (flag == "--training.seq_len") {
      out["--training.max_context_length"] = value;
    } else if (flag == "--training.global_batch_size") {
      // Given where it is not one pass of every DP rank (num_tokens_per_train_step's default).
      if (*global != *local * dp) out["--training.num_tokens_per_train_step"] = std::to_string(*global * *seq);
    } else if (flag == "--training.local_batch_size") {
      // Without PP a micro-batch is the DP rank's batch; with it, num_pp_microbatches of them.
      const std::int64_t rows = micro ? *micro : *local;
      out["--training.num_tokens_per_microbatch_per_dp_rank"] = std::to_string(rows * *seq);
      if (micro) out["--parallelism.num_pp_microbatches"] = std::to_string(*local / *micro);
    } else if (flag != "--parallelism.pipeline_parallel_microbatch_size" &&
               flag != "--activation_checkpoint.selective_ac_option") {
      out[flag] = value;
    }
  }
  return out;
}

}  // namespace headroom::calibrate
