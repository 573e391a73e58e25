// A NeMo 2.0 pre-training recipe (NVIDIA/NeMo nemo/collections/llm/recipes/<model>.py, the factories
// `nemo llm pretrain --factory <model>` runs) read without running it. The Llama and Mixtral recipes share one form:
// model() returns run.Config(<Model>, config=run.Config(<Config class>)); trainer(<parallelism with defaults>) builds
// run.Config(nl.MegatronStrategy, ...) with its DistributedDataParallelConfig and run.Config(nl.Trainer, ...);
// pretrain_recipe(num_nodes, num_gpus_per_node, performance_mode, ...) calls trainer(...) and sets
// data=run.Config(MockDataModule, seq_length, global_batch_size, micro_batch_size) and
// optim=distributed_fused_adam_with_cosine_annealing(...). The file's Python is tokenized and those calls are read as
// expressions (literals, names of the functions' parameters, calls); anything the recipe does that this does not
// follow (another `if`, an assignment to the recipe, a trainer from another module) is refused naming its line.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "headroom/core/error.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "python_source.hpp"
#include "text.hpp"

namespace headroom::calibrate {
namespace {

using text::at;

using python::calls_in;
using python::Expr;
using python::Function;

// The run.Config(<class>, ...) call of a class (its last dotted part), nullptr when the function has none.
const Expr* config_of(const Function& f, std::string_view cls) {
  for (const Expr* c : calls_in(f))
    if ((c->text == "run.Config" || c->text == "run.Partial") && !c->args.empty() &&
        c->args.front().kind == Expr::Kind::name &&
        (c->args.front().text == cls || c->args.front().text.ends_with("." + std::string(cls))))
      return c;
  return nullptr;
}

// NeMo 2.0's model configs and the shipped model of their shape. Llama (nemo/collections/llm/gpt/model/llama.py): 3
// and 3.1 differ only in RoPE's scaling and the context the class names, neither priced (the data's sequence is).
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kRecipeModels = {{
    {"Llama2Config7B", "llama2-7b"},
    {"Llama2Config13B", "llama2-13b"},
    {"Llama2Config70B", "llama2-70b"},
    {"Llama3Config8B", "llama3.1-8b"},
    {"Llama3Config70B", "llama3.1-70b"},
    {"Llama31Config8B", "llama3.1-8b"},
    {"Llama31Config70B", "llama3.1-70b"},
    {"Llama31Config405B", "llama3.1-405b"},
    // nemo/collections/llm/gpt/model/mixtral.py: Mixtral's shapes, 8 experts top-2, dropless all-to-all.
    {"MixtralConfig8x7B", "mixtral-8x7b"},
    {"MixtralConfig8x22B", "mixtral-8x22b"},
}};

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
    {"trainer.strategy.sequence_parallel", "sequence_parallel", ""},
    {"trainer.strategy.account_for_embedding_in_pipeline_split", "account_for_embedding_in_pipeline_split", ""},
    {"trainer.strategy.account_for_loss_in_pipeline_split", "account_for_loss_in_pipeline_split", ""},
    {"trainer.strategy.ddp.grad_reduce_in_fp32", "grad_reduce_in_bf16", ""},
    {"trainer.num_nodes", "", ""},  // the world, with trainer.devices
    {"trainer.devices", "", ""},
    {"data.seq_length", "seq", ""},
    {"data.global_batch_size", "gbs", ""},
    {"data.micro_batch_size", "mbs", ""},
    {"trainer.strategy.pipeline_dtype", "", "the dtype of the pipeline's sends, the activations' own"},
    {"trainer.strategy.gradient_as_bucket_view", "", "gradients viewed in the DDP buckets: no copy, as priced"},
    {"trainer.strategy.ckpt_*", "", "checkpointing"},
    {"trainer.strategy.fsdp", "", ""},  // None: Megatron's DDP and distributed optimizer (checked below)
    {"trainer.strategy.ddp.overlap_grad_reduce", "", ""},
    {"trainer.strategy.ddp.overlap_param_gather", "", ""},
    {"trainer.strategy.ddp.check_for_nan_in_grad", "", "a check of the reduced gradients"},
    {"trainer.strategy.ddp.average_in_collective", "", "where the gradients are averaged, not how much moves"},
    {"trainer.strategy.ddp.data_parallel_sharding_strategy", "", "Megatron-FSDP's only, and fsdp is None"},
    {"trainer.accelerator", "", "GPUs"},
    {"trainer.accumulate_grad_batches", "", ""},  // 1: Megatron-core accumulates the global batch (checked below)
    {"trainer.callbacks", "", "timing and logging callbacks"},
    {"trainer.limit_*", "", "evaluation"},
    {"trainer.log_every_n_steps", "", "logging"},
    {"trainer.max_steps", "", "the run's length"},
    {"trainer.val_check_interval", "", "evaluation"},
    {"trainer.use_distributed_sampler", "", "data loading"},
    {"trainer.plugins", "", ""},  // bf16_mixed() (checked below)
    {"optim", "", ""},            // distributed_fused_adam_with_cosine_annealing (checked below)
    {"model.config", "", ""},     // the model (kRecipeModels)
    {"model.config.seq_length", "", "the model config's context; the data's sequence is the one trained"},
    // Overrides only: Megatron-core's TransformerConfig recompute fields and the optimizer's sharding.
    {"model.config.recompute_granularity", "recompute", ""},
    {"model.config.recompute_method", "recompute_method", ""},
    {"model.config.recompute_num_layers", "recompute_num_layers", ""},
    {"optim.config.use_distributed_optimizer", "", ""},
});

}  // namespace

MegatronCommand read_nemo_recipe(std::string_view text, std::int64_t gpus, std::string_view where,
                                 const std::vector<std::string>& overrides) {
  const std::vector<python::Token> tokens = python::tokens(text, where);
  const std::map<std::string, Function> fns = python::top_level_functions(tokens, where);
  const auto function = [&](const std::string& name) -> const Function& {
    const auto it = fns.find(name);
    if (it == fns.end())
      throw Error(std::string(where) + ": no " + name +
                  "(): a NeMo 2.0 pre-training recipe (nemo/collections/llm/recipes/<model>.py) defines model(), "
                  "trainer() and pretrain_recipe()");
    return it->second;
  };
  const Function& recipe = function("pretrain_recipe");
  const Function& trainer_fn = function("trainer");
  const Function& model_fn = function("model");
  // trainer() and model() build their configs: assignments to names, a return, a docstring; model() may also set its
  // config's fields (`conf.seq_length = 8192`, read below). Anything else in them is refused.
  for (const auto& [fn, name] : {std::pair{&trainer_fn, "trainer"}, std::pair{&model_fn, "model"}})
    for (const auto& st : fn->body) {
      const bool plain = st.keyword == "return" ||
                         (st.keyword.empty() && st.value && st.value->kind == Expr::Kind::string) ||
                         (st.keyword == "=" && (st.target.find('.') == std::string::npos || fn == &model_fn));
      if (!plain || st.indent != fn->body.front().indent)
        throw Error(at(where, st.line) + ": " +
                    (st.keyword.empty() || st.keyword == "=" ? "a statement" : "`" + st.keyword + "`") + " in " + name +
                    "() that headroom does not follow");
    }
  MegatronCommand out;

  // The factory's arguments (`num_nodes=2`) and the recipe's settings (`trainer.strategy.x=y`), NeMo-Run's overrides.
  std::map<std::string, Expr> factory_args, settings_given;
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("override " + o + ": expected key=value (a pretrain_recipe argument or a setting's path)");
    const std::string key = o.substr(0, eq);
    if (key.find('.') == std::string::npos) {
      if (recipe.param(key) == nullptr) throw Error("override " + o + ": pretrain_recipe() has no argument " + key);
      factory_args[key] = python::value_of(o.substr(eq + 1));
    } else {
      settings_given[key] = python::value_of(o.substr(eq + 1));
    }
  }
  // A name inside pretrain_recipe: its argument as given, else its default.
  const auto recipe_value = [&](const Expr& e) -> Expr {
    if (e.kind != Expr::Kind::name) return e;
    if (const auto it = factory_args.find(e.text); it != factory_args.end()) return it->second;
    const std::optional<Expr>* fallback = recipe.param(e.text);
    return fallback != nullptr && *fallback ? **fallback : e;
  };
  if (recipe.param("performance_mode") != nullptr) {
    const Expr mode = recipe_value(Expr{Expr::Kind::name, "performance_mode", {}, {}, recipe.line, {}});
    if (python::plain_value(mode) != "false")
      throw Error(std::string(where) + ": performance_mode " + mode.shown() +
                  ": pretrain_performance_optimizations (communication-overlap and garbage-collection callbacks) is "
                  "not read; check the recipe without it");
  }
  // pretrain_recipe's statements: the run.Partial it returns and `if performance_mode:` (off); a statement that could
  // change the job otherwise is refused.
  const int body_indent = recipe.body.empty() ? 0 : recipe.body.front().indent;
  for (std::size_t i = 0; i < recipe.body.size(); ++i) {
    const auto& s = recipe.body[i];
    const auto not_followed = [&](const std::string& what) {
      return Error(at(where, s.line) + ": " + what + " in pretrain_recipe(): a statement headroom does not follow");
    };
    if (s.keyword == "if" && s.target == "performance_mode") {  // its block stays off
      while (i + 1 < recipe.body.size() && recipe.body[i + 1].indent > s.indent) ++i;
      continue;
    }
    if (s.indent != body_indent) throw not_followed("an indented block");
    if (s.keyword == "return") continue;
    if (s.keyword == "=") {
      if (s.target.find('.') != std::string::npos)
        throw Error(at(where, s.line) + ": " + s.target + " = ...: give " + s.target.substr(s.target.find('.') + 1) +
                    "=VALUE as an override instead (headroom reads the recipe's calls)");
      if (s.value && s.value->kind == Expr::Kind::call && s.value->text != "run.Partial")
        throw not_followed(s.target + " = " + s.value->shown());
      continue;
    }
    if (s.keyword.empty() && s.value && s.value->kind == Expr::Kind::string) continue;  // the docstring
    throw not_followed(s.keyword.empty() ? (s.value ? s.value->shown() : std::string("a statement"))
                                         : "`" + s.keyword + "`");
  }

  // The settings: trainer(...)'s strategy and Trainer, the data module, the optimizer and the model.
  std::map<std::string, std::pair<Expr, std::string>> settings;  // path -> value, where it was set
  const Expr* partial = nullptr;
  for (const Expr* c : calls_in(recipe))
    if (c->text == "run.Partial") partial = c;
  if (partial == nullptr) throw Error(std::string(where) + ": pretrain_recipe() builds no run.Partial");
  const Expr* trainer_call = partial->kwarg("trainer");
  if (trainer_call == nullptr || trainer_call->kind != Expr::Kind::call || trainer_call->text != "trainer")
    throw Error(at(where, partial->line) + ": the recipe's trainer is " +
                (trainer_call ? trainer_call->shown() : std::string("not given")) +
                ", not this file's trainer(): headroom reads the trainer this file defines");
  // A name inside trainer(): the argument pretrain_recipe passes it, else trainer()'s default.
  const auto trainer_value = [&](const Expr& e) -> Expr {
    if (e.kind != Expr::Kind::name) return e;
    if (const Expr* given = trainer_call->kwarg(e.text)) return recipe_value(*given);
    const std::optional<Expr>* fallback = trainer_fn.param(e.text);
    if (fallback == nullptr) return e;
    if (!*fallback) throw Error(at(where, trainer_fn.line) + ": trainer() has no default for " + e.text);
    return **fallback;
  };
  const auto set_from = [&](const std::string& prefix, const Expr& call, const auto& resolve) {
    for (const Expr& value : call.kwargs) {
      if ((value.key == "ddp" && value.kind == Expr::Kind::call) || (prefix == "trainer." && value.key == "strategy"))
        continue;  // read as their own calls
      settings[prefix + value.key] = {resolve(value), at(where, value.line)};
    }
  };
  const Expr* strategy = config_of(trainer_fn, "MegatronStrategy");
  const Expr* trainer_cfg = config_of(trainer_fn, "Trainer");
  if (strategy == nullptr || trainer_cfg == nullptr)
    throw Error(at(where, trainer_fn.line) +
                ": trainer() builds no run.Config(nl.MegatronStrategy, ...) and "
                "run.Config(nl.Trainer, ...)");
  set_from("trainer.strategy.", *strategy, trainer_value);
  if (const Expr* ddp = strategy->kwarg("ddp"); ddp != nullptr && ddp->kind == Expr::Kind::call) {
    if (ddp->args.empty() || !ddp->args.front().text.ends_with("DistributedDataParallelConfig"))
      throw Error(at(where, ddp->line) + ": ddp " + ddp->shown() + ": not a DistributedDataParallelConfig");
    set_from("trainer.strategy.ddp.", *ddp, trainer_value);
  }
  set_from("trainer.", *trainer_cfg, trainer_value);
  const Expr* data = partial->kwarg("data");
  if (data == nullptr || data->kind != Expr::Kind::call || data->text != "run.Config")
    throw Error(at(where, partial->line) + ": the recipe's data is not a run.Config of a data module");
  set_from("data.", *data, recipe_value);
  if (const Expr* optim = partial->kwarg("optim")) settings["optim"] = {*optim, at(where, optim->line)};
  // model(): run.Config(LlamaModel, config=run.Config(<class>)), or config=<name> of `<name> = run.Config(<class>)`
  // with its fields set as `<name>.field = value`.
  std::map<std::string, const Expr*> model_configs;  // a name of model() -> the run.Config it holds
  for (const auto& st : model_fn.body) {
    if (st.keyword == "=" && st.value && st.value->kind == Expr::Kind::call && st.target.find('.') == std::string::npos)
      model_configs[st.target] = &*st.value;
    if (st.keyword == "=" && st.target.find('.') != std::string::npos) {
      const std::string member = st.target.substr(st.target.find('.') + 1);
      if (!model_configs.contains(st.target.substr(0, st.target.find('.'))) || !st.value)
        throw Error(at(where, st.line) + ": " + st.target + " = ...: model() sets what headroom does not follow");
      settings["model.config." + member] = {*st.value, at(where, st.line)};
    }
  }
  for (const Expr* c : calls_in(model_fn))
    if (const Expr* config = c->kwarg("config")) {
      const Expr* cls = config;
      if (config->kind == Expr::Kind::name && model_configs.contains(config->text))
        cls = model_configs.at(config->text);
      if (cls->kind == Expr::Kind::call && !cls->args.empty())
        settings["model.config"] = {cls->args.front(), at(where, cls->line)};
    }
  for (auto& [key, value] : settings_given) settings[key] = {value, "override " + key};

  // Each setting read, ignored with why, or refused.
  std::map<std::string, std::string>& layout = out.run.layout;
  std::int64_t nodes = 1, devices = 8;
  for (const auto& setting : settings) {  // named, not bound: clang 14's lambdas cannot capture bindings
    const std::string& key = setting.first;
    const Expr& value = setting.second.first;
    const std::string& from = setting.second.second;
    const RecipeKey* rule = text::key_rule(kRecipeKeys, key);
    const std::string v = python::plain_value(value);
    const auto refuse = [&](const std::string& why) -> Error {
      return Error(from + ": " + key + " " + value.shown() + ": " + why);
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
    } else if (key == "trainer.strategy.sequence_parallel" ||
               key == "trainer.strategy.account_for_embedding_in_pipeline_split" ||
               key == "trainer.strategy.account_for_loss_in_pipeline_split") {
      layout[std::string(rule->knob)] = boolean() ? "true" : "false";
    } else if (key == "trainer.strategy.ddp.grad_reduce_in_fp32") {
      layout["grad_reduce_in_bf16"] = boolean() ? "false" : "true";
    } else if (key == "trainer.strategy.ddp.overlap_grad_reduce" ||
               key == "trainer.strategy.ddp.overlap_param_gather") {
      if (!boolean())
        throw refuse("the framework's coefficients (dp_overlap) price the reduction and gather overlapped");
    } else if (key == "trainer.strategy.fsdp") {
      if (v != "None") throw refuse("Megatron-FSDP and PyTorch FSDP under NeMo are not priced (valid: None)");
    } else if (key == "trainer.accumulate_grad_batches") {
      if (integer() != 1) throw refuse("Megatron-core accumulates the global batch itself (valid: 1)");
    } else if (key == "trainer.plugins") {
      // bf16_mixed() (nemo/collections/llm/recipes/precision/mixed_precision.py) is MegatronMixedPrecision at
      // "bf16-mixed", which the MoE recipes write out.
      const Expr* precision = value.kwarg("precision");
      const bool bf16 =
          value.kind == Expr::Kind::call &&
          ((value.text == "bf16_mixed" && value.args.empty() && value.kwargs.empty()) ||
           (value.text == "run.Config" && value.args.size() == 1 &&
            value.args.front().text.ends_with("MegatronMixedPrecision") && value.kwargs.size() == 1 &&
            precision != nullptr && precision->kind == Expr::Kind::string && precision->text == "bf16-mixed"));
      if (!bf16)
        throw refuse(
            "headroom prices the recipes' bf16_mixed() precision (valid: bf16_mixed(), "
            "run.Config(nl.MegatronMixedPrecision, precision=\"bf16-mixed\"))");
    } else if (key == "optim") {
      // nemo/collections/llm/recipes/optim/adam.py: OptimizerConfig(optimizer="adam", bf16=precision ==
      // "bf16-mixed", use_distributed_optimizer=True): Megatron-core's distributed optimizer, FP32 states.
      const Expr* precision = value.kwarg("precision");
      if (value.kind != Expr::Kind::call || value.text != "distributed_fused_adam_with_cosine_annealing" ||
          (precision != nullptr && precision->text != "bf16-mixed"))
        throw refuse("headroom reads the recipes' distributed_fused_adam_with_cosine_annealing(), BF16");
      layout["sharding"] = "NNG";
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
    } else if (key == "model.config") {
      const std::string cls = value.text.substr(value.text.rfind('.') + 1);
      const auto it =
          std::find_if(kRecipeModels.begin(), kRecipeModels.end(), [&](const auto& m) { return m.first == cls; });
      if (it == kRecipeModels.end())
        throw refuse(
            "no shipped model of this NeMo config's shape (read: the Llama 2, 3 and 3.1 and the Mixtral configs)");
      layout["model"] = std::string(it->second);
      out.notes.push_back("the model is " + cls + ", " + std::string(it->second) + "'s shape");
    } else {
      layout[std::string(rule->knob)] = std::to_string(integer());
    }
  }
  for (const char* required : {"model.config", "data.seq_length", "data.global_batch_size", "data.micro_batch_size"})
    if (!settings.contains(required)) throw Error(std::string(where) + ": the recipe gives no " + required);
  if (!layout.contains("sharding"))
    throw Error(std::string(where) +
                ": the recipe gives no optim (headroom reads distributed_fused_adam_with_cosine_annealing)");
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
                std::to_string(model_gpus) + "): give num_nodes=N (NeMo's `--factory \"<recipe>(num_nodes=N)\"`)");
  if (gpus > 0 && gpus != world)
    throw Error("--gpus " + std::to_string(gpus) +
                ": the recipe runs on trainer.num_nodes x trainer.devices = " + std::to_string(world) + " GPUs");
  layout["gpus"] = std::to_string(world);
  if (!layout.contains("grad_reduce_in_bf16")) layout["grad_reduce_in_bf16"] = "false";  // DDP config's default
  out.notes.insert(out.notes.begin(), "read as NeMo 2.0 recipe settings (pretrain_recipe, trainer, model), " +
                                          std::to_string(nodes) + " node(s) x " + std::to_string(devices) + " GPUs");
  return out;
}

// NeMo 1.x's layout keys (nemo_layout_keys) under the paths NeMo 2.0 gives the same Megatron-core settings.
constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kRecipePaths = {{
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
}};

std::vector<std::pair<std::string, std::string>> nemo_recipe_layout_keys(const Layout& l) {
  const auto python = [](const std::string& yaml) -> std::string {  // YAML's spellings as Python's
    return yaml == "null" ? "None" : yaml == "true" ? "True" : yaml == "false" ? "False" : yaml;
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : nemo_layout_keys(l))
    for (const auto& [nemo1, recipe] : kRecipePaths)
      if (key == nemo1) out.emplace_back(recipe, python(value));
  out.emplace_back("optim.config.use_distributed_optimizer", l.sharding.optimizer != Shard::none ? "True" : "False");
  return out;
}

std::vector<std::string> nemo_recipe_changes(const Layout& from, const Layout& to) {
  std::vector<std::string> out;
  const auto a = nemo_recipe_layout_keys(from), b = nemo_recipe_layout_keys(to);
  for (std::size_t i = 0; i < b.size(); ++i)
    if (a[i].second != b[i].second) out.push_back(b[i].first + "=" + b[i].second + " (was " + a[i].second + ")");
  return out;
}

}  // namespace headroom::calibrate
