// `headroom check -- torchrun ... pretrain_gpt.py --flags` (or a script that runs it, a torchtitan job config `.toml`
// or config registry `.py` with its command line, a NeMo training config `.yaml` or a NeMo 2.0 recipe `.py`): the
// pre-flight check of a launch command as it is: the flags or keys read (and those ignored, with why), the verdict per
// stage with its band, the step time and MFU with theirs, and the faster layouts of the same job that fit, as the flags
// to change. The exit code says the verdict: 0 fits, 3 uncertain, 4 out of memory (2 refused, as every command).
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/core/atomic_file.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "plan_page.hpp"

namespace headroom::cli {
namespace {

struct CheckOptions {
  SpecOptions specs;
  std::string gpus;
  std::string profile;
  std::vector<std::string> ignore;
  std::vector<std::string> set;  // NAME=VALUE: a value a launch script reads and does not set
  std::string top = "3";
  std::string html;  // the plan page of the job, the command's layout first
  bool mtsl_curve = false;
  std::vector<std::string> command;
  bool json = false;
};

constexpr int kExitUncertain = 3, kExitOom = 4;

// A launch script's command that runs pretrain_gpt.py, as bash would give it its words: the script's variables, arrays
// and string-test if blocks followed, nothing guessed. One command for each outcome of the tests headroom cannot
// evaluate (launch_script_variants); torchtitan's run_train.sh is read as one (launch_script_command).
std::vector<calibrate::LaunchScriptVariant> script_variants(const std::string& path,
                                                            const std::vector<std::string>& set) {
  std::map<std::string, std::string> environment;
  for (const std::string& s : set) {
    const auto eq = s.find('=');
    const std::string name = s.substr(0, eq);
    const bool valid = eq != std::string::npos && !name.empty() &&
                       (std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
                        (!(name[0] >= '0' && name[0] <= '9') && std::all_of(name.begin(), name.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                        })));
    if (!valid) throw Error("--set " + s + ": not NAME=VALUE (valid: a shell variable's name or an argument's number)");
    environment[name] = s.substr(eq + 1);
  }
  // The line that runs Megatron-LM's pretrain_gpt.py, or torchtitan's `-m torchtitan.train` (its run_train.sh).
  const std::string text = read_file_bounded(path, path);
  const bool torchtitan =
      text.find("torchtitan.train") != std::string::npos && text.find("pretrain_gpt.py") == std::string::npos;
  if (!torchtitan) return calibrate::launch_script_variants(text, "pretrain_gpt.py", path, environment);
  calibrate::LaunchScriptVariant only;
  only.command = calibrate::launch_script_command(text, "torchtitan.train", path, environment, &only.files);
  return {only};
}

// --ignore FLAG: the flag and the value after it (a token not starting with --) leave the command, listed as ignored.
std::vector<std::string> without_ignored(const std::vector<std::string>& tokens, const std::vector<std::string>& ignore,
                                         std::vector<std::string>& ignored) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const std::string flag = tokens[i].substr(0, tokens[i].find('='));
    if (std::find(ignore.begin(), ignore.end(), flag) == ignore.end()) {
      out.push_back(tokens[i]);
      continue;
    }
    std::string shown = tokens[i];
    if (tokens[i].find('=') == std::string::npos && i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0)
      shown += " " + tokens[++i];
    ignored.push_back(shown + " (--ignore)");
  }
  for (const std::string& flag : ignore)
    if (std::none_of(ignored.begin(), ignored.end(), [&](const std::string& x) { return x.rfind(flag, 0) == 0; }))
      throw Error("--ignore " + flag + ": the command has no such flag");
  return out;
}

// A script whose untestable if tests (`[ -n "${WANDB_API_KEY}" ]`) change only flags headroom ignores is priced the
// same whatever their outcome: the first command (every such test true) with a note naming the tests and those flags.
// Where an outcome changes a flag read, the files written or what the command is, the script is refused naming the
// tests, as bash's outcome is the environment's.
void check_variants_price_alike(const std::vector<calibrate::LaunchScriptVariant>& variants,
                                const std::vector<std::string>& ignore, std::int64_t gpus, const std::string& where,
                                calibrate::MegatronCommand& cmd) {
  std::set<std::string> tests;
  for (const auto& v : variants)
    for (const std::string& a : v.assumed) tests.insert(a.substr(0, a.rfind(' ')));
  std::string named;
  for (const std::string& t : tests) named += (named.empty() ? "(" : ", (") + t + ")";
  std::set<std::string> differing;
  for (std::size_t i = 1; i < variants.size(); ++i) {
    const auto refuse = [&](const std::string& what) {
      return Error(where + ": the if test(s) " + named + ", which headroom cannot evaluate, change " + what +
                   ": give the variables they read (--set NAME=VALUE), or the command as it runs, after --");
    };
    calibrate::MegatronCommand other;
    try {
      std::vector<std::string> dropped;
      other = calibrate::parse_megatron_command(without_ignored(variants[i].command, ignore, dropped), gpus, where);
    } catch (const Error& e) {
      throw refuse(std::string("whether the command is read (") + e.what() + ")");
    }
    if (other.read != cmd.read) throw refuse("the flags read");
    if (other.deepspeed != cmd.deepspeed || other.deepspeed_config != cmd.deepspeed_config ||
        other.zero_stage != cmd.zero_stage || other.pipeline_engine != cmd.pipeline_engine)
      throw refuse("the DeepSpeed launch");
    if (variants[i].files != variants.front().files) throw refuse("the files the script writes");
    const std::set<std::string> a(cmd.ignored.begin(), cmd.ignored.end()),
        b(other.ignored.begin(), other.ignored.end());
    std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::inserter(differing, differing.end()));
  }
  std::string flags;
  for (const std::string& f : differing) flags += (flags.empty() ? "" : ", ") + f.substr(0, f.find(' '));
  cmd.notes.push_back("the if test(s) " + named + ", which headroom cannot evaluate, change only flags it ignores (" +
                      (flags.empty() ? std::string("none") : flags) + "): priced the same either way");
}

// What launch writes for a layout (launch_args.hpp, the one place that spells them), flag -> value ("" for a switch):
// Megatron-LM's arguments, torchtitan's command-line overrides of its job config under torchtitan, Megatron-DeepSpeed's
// under deepspeed.
std::map<std::string, std::string> launch_flags(const Plan& plan, const Layout& l) {
  const LaunchExport e = launch_export(plan.model, plan.cluster, l);
  const bool torchtitan = plan.framework.name == "torchtitan", deepspeed = plan.framework.name == "deepspeed";
  const std::vector<std::string>& argv = torchtitan ? e.torchtitan_overrides : deepspeed ? e.deepspeed : e.megatron;
  std::map<std::string, std::string> flags;
  for (std::size_t i = 0; i < argv.size(); ++i)
    if (argv[i].rfind("--", 0) == 0)
      flags[argv[i]] = i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0 ? argv[i + 1] : "";
  return flags;
}

// The flags to change from flags `a` to flags `b` (a subcommand `name:` is written name:value).
std::vector<std::string> changed_flags(const std::map<std::string, std::string>& a,
                                       const std::map<std::string, std::string>& b) {
  const auto written = [](const std::string& flag, const std::string& value) {
    return flag.ends_with(':') ? flag + value : flag + (value.empty() ? "" : " " + value);
  };
  std::vector<std::string> out;
  for (const auto& [flag, value] : b) {
    const auto it = a.find(flag);
    if (it == a.end())
      out.push_back(written(flag, value));
    else if (it->second != value)
      out.push_back(written(flag, value) + " (was " + it->second + ")");
  }
  for (const auto& [flag, value] : a)
    if (!b.contains(flag)) out.push_back("no " + flag);
  return out;
}

// The flags to change from the command's layout to `to`: what launch writes differently for the two.
std::vector<std::string> flag_changes(const Plan& plan, const Layout& from, const Layout& to) {
  return changed_flags(launch_flags(plan, from), launch_flags(plan, to));
}

enum class ConfigKind { none, torchtitan, torchtitan_registry, nemo, nemo_recipe, bridge_recipe };

// A job config given alone, by its extension: a torchtitan TOML, a torchtitan config registry (.py) with torchtitan's
// command line after it (--config NAME, --section.field value), a NeMo YAML with the Hydra overrides a launcher
// script passes after it (key=value, +key=value, ++key=value, ~key), a NeMo 2.0 recipe (.py) with NeMo-Run's
// (key=value), or a Megatron-Bridge recipe file (.py, under megatron/bridge/recipes/ or with --recipe NAME) with
// run_recipe.py's --recipe and overrides.
ConfigKind config_kind(const std::vector<std::string>& command) {
  if (command.empty()) return ConfigKind::none;
  const std::string& f = command.front();
  if (f.ends_with(".py") &&
      (f.find("megatron/bridge/recipes/") != std::string::npos ||
       std::any_of(command.begin() + 1, command.end(), [](const std::string& x) { return x.starts_with("--recipe"); })))
    return ConfigKind::bridge_recipe;
  if (command.size() == 1 && f.ends_with(".toml") && f.size() > 5) return ConfigKind::torchtitan;
  if (f.ends_with(".py") &&
      (f.ends_with("config_registry.py") ||
       std::any_of(command.begin() + 1, command.end(), [](const std::string& x) { return x.starts_with("--config"); })))
    return ConfigKind::torchtitan_registry;
  const bool overrides = std::all_of(command.begin() + 1, command.end(), [](const std::string& x) {
    return x.find('=') != std::string::npos || x.starts_with("~");
  });
  if (overrides && ((f.ends_with(".yaml") && f.size() > 5) || (f.ends_with(".yml") && f.size() > 4)))
    return ConfigKind::nemo;
  if (overrides && f.ends_with(".py") && f.size() > 3) return ConfigKind::nemo_recipe;
  return ConfigKind::none;
}

// A torchtitan job read (a TOML job config or a config registry's function) as the command of a Megatron-LM line is.
// `layers_per_stage`: its parallelism.pipeline_parallel_layers_per_stage (0 when not given), which the model's layers
// turn into stages a rank once the model is known (set_torchtitan_stages_per_rank).
calibrate::MegatronCommand torchtitan_command(calibrate::TorchtitanJob job, std::int64_t& layers_per_stage) {
  layers_per_stage = job.layers_per_stage;
  calibrate::MegatronCommand cmd;
  cmd.run.layout = std::move(job.layout);
  cmd.read = std::move(job.read);
  cmd.ignored = std::move(job.ignored);
  cmd.notes = std::move(job.notes);
  return cmd;
}

// A job config, every key read or ignored (read_torchtitan_job, read_nemo_config), as the command of a Megatron-LM
// line is (`layers_per_stage` as torchtitan_command's).
calibrate::MegatronCommand job_config_command(const CheckOptions& o, ConfigKind kind, std::int64_t gpus,
                                              std::int64_t& layers_per_stage) {
  if (!o.set.empty()) throw Error("--set " + o.set.front() + ": gives a launch script's values, not a job config's");
  if (!o.ignore.empty())
    throw Error("--ignore " + o.ignore.front() + ": a job config's keys are read or ignored by name");
  const std::string& path = o.command.front();
  const std::string text = read_file_bounded(path, path);
  if (kind == ConfigKind::nemo)
    return calibrate::read_nemo_config(text, gpus, path, {o.command.begin() + 1, o.command.end()});
  if (kind == ConfigKind::nemo_recipe) {
    // The recipes it calls into are the files of the same folder (nemo/collections/llm/recipes/<name>.py).
    const auto sibling = [&](const std::string& name) -> std::optional<std::string> {
      const std::filesystem::path file = std::filesystem::path(path).parent_path() / (name + ".py");
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
      return read_file_bounded(file.string(), file.string());
    };
    return calibrate::read_nemo_recipe(text, gpus, path, {o.command.begin() + 1, o.command.end()}, sibling);
  }
  if (kind == ConfigKind::bridge_recipe) {
    // run_recipe.py's command line: --recipe NAME (or --recipe=NAME) and section.field=value overrides. The modules it
    // calls into are the checkout's: megatron.bridge.a.b is <root>/megatron/bridge/a/b.py, the root being the folder
    // above the recipe's megatron/bridge/.
    std::string recipe;
    std::vector<std::string> overrides;
    for (auto a = o.command.begin() + 1; a != o.command.end(); ++a) {
      if (*a == "--recipe" && a + 1 != o.command.end())
        recipe = *++a;
      else if (a->starts_with("--recipe="))
        recipe = a->substr(9);
      else
        overrides.push_back(*a);
    }
    if (recipe.empty()) throw Error(path + ": a Megatron-Bridge recipe file: give --recipe NAME, the function to run");
    const std::string absolute = std::filesystem::absolute(path).lexically_normal().string();
    const auto package = absolute.rfind("/megatron/bridge/");
    const auto module = [&](const std::string& name) -> std::optional<std::string> {
      if (package == std::string::npos) return std::nullopt;
      std::string file = name;
      std::replace(file.begin(), file.end(), '.', '/');
      const std::string full = absolute.substr(0, package) + "/" + file + ".py";
      std::error_code ec;
      if (!std::filesystem::is_regular_file(full, ec)) return std::nullopt;
      return read_file_bounded(full, full);
    };
    return calibrate::read_bridge_recipe(text, recipe, gpus, path, overrides, module);
  }
  return torchtitan_command(
      kind == ConfigKind::torchtitan
          ? calibrate::read_torchtitan_job(text, gpus, path)
          : calibrate::read_torchtitan_registry(text, gpus, path, {o.command.begin() + 1, o.command.end()}),
      layers_per_stage);
}

// torchtitan's entry point in a launch command: `-m torchtitan.train` (its run_train.sh's) or a path ending in
// torchtitan/train.py; tokens.end() when the command runs neither.
std::vector<std::string>::const_iterator torchtitan_entry(const std::vector<std::string>& tokens) {
  for (auto t = tokens.begin(); t != tokens.end(); ++t)
    if ((*t == "torchtitan.train" && t != tokens.begin() && *(t - 1) == "-m") || t->ends_with("torchtitan/train.py"))
      return t;
  return tokens.end();
}

// The config registry torchtitan imports for `--module M` (torchtitan/config/manager.py): M's folder under
// torchtitan/models, torchtitan/experiments or torchtitan/experiments/rl/examples, or a dotted module's own folder,
// looked for under the launch script's folder (torchtitan's run_train.sh sits at its checkout's top), then the current
// one.
std::string torchtitan_registry_file(const std::vector<std::string>& args, const std::string& script) {
  std::string module;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--module" && i + 1 < args.size()) module = args[i + 1];
    if (args[i].starts_with("--module=")) module = args[i].substr(9);
  }
  if (module.empty()) throw Error("the torchtitan command gives no --module (torchtitan needs it with --config)");
  std::vector<std::filesystem::path> roots = {"."}, tried;
  if (!script.empty()) roots.insert(roots.begin(), std::filesystem::path(script).parent_path());
  if (roots.front().empty()) roots.erase(roots.begin());  // a script in the current folder
  std::vector<std::string> dirs = {"torchtitan/models/" + module, "torchtitan/experiments/" + module,
                                   "torchtitan/experiments/rl/examples/" + module};
  if (module.find('.') != std::string::npos) {  // a module's full name: its own folder
    std::string dotted = module;
    std::replace(dotted.begin(), dotted.end(), '.', '/');
    dirs.push_back(dotted);
  }
  for (const auto& root : roots)
    for (const std::string& dir : dirs) {
      tried.push_back(root / dir / "config_registry.py");
      if (std::filesystem::is_regular_file(tried.back())) return tried.back().string();
    }
  std::string list;
  for (const auto& t : tried) list += (list.empty() ? "" : ", ") + t.string();
  throw Error("--module " + module + ": no config_registry.py at " + list +
              " (run check from torchtitan's checkout, or give the registry file itself: check -- "
              "torchtitan/models/<module>/config_registry.py --config NAME ...)");
}

// The DeepSpeed config a DeepSpeed launch names (--deepspeed_config): the text the launch script writes to that path
// with a here-document, or the file, a relative path from the script's folder when a script was given (`script`), else
// from the current one.
void apply_deepspeed_config(calibrate::MegatronCommand& cmd, const std::string& where, const std::string& script,
                            const std::map<std::string, std::string>& script_files) {
  if (const auto written = script_files.find(cmd.deepspeed_config); written != script_files.end()) {
    cmd.notes.push_back("the DeepSpeed config is the text " + where + " writes to " + cmd.deepspeed_config +
                        " (its here-document)");
    calibrate::read_deepspeed_config(written->second, where + " (" + cmd.deepspeed_config + ")", cmd);
    return;
  }
  std::filesystem::path path = cmd.deepspeed_config;
  if (path.is_relative() && !script.empty()) path = std::filesystem::path(script).parent_path() / path;
  if (!std::filesystem::is_regular_file(path))
    throw Error(where + ": --deepspeed_config " + cmd.deepspeed_config + ": no such file (" + path.string() + ")");
  calibrate::read_deepspeed_config(read_file_bounded(path.string(), path.string()), path.string(), cmd);
}

// nemo/lightning/pytorch/callbacks/deepep.py DeepEPCallback.setup: where torch.cuda.get_device_properties(0).major is 8
// or 9, moe_token_dispatcher_type "flex" with DeepEP and moe_shared_expert_overlap False, over the recipe's; elsewhere
// nothing. DeepEP is NVIDIA's only (ROCm reports major 9 on CDNA too): refused there.
void apply_deepep_callback(const GpuSpec& gpu, const std::string& where, calibrate::MegatronCommand& cmd) {
  if (gpu.vendor != "nvidia")
    throw Error(where + ": DeepEPCallback on " + gpu.name + " (" + gpu.vendor +
                "): DeepEP runs on NVIDIA GPUs; remove the callback");
  const std::int64_t major = gpu.compute_capability_major;
  if (major == 0)
    throw Error(where + ": DeepEPCallback acts on compute capability 8 and 9, and " + gpu.name +
                "'s spec states none (compute_capability_major)");
  if (major != 8 && major != 9) {
    cmd.notes.push_back("DeepEPCallback changes nothing on " + gpu.name + " (compute capability " +
                        std::to_string(major) + ")");
    return;
  }
  cmd.run.layout["moe_token_dispatcher_type"] = "flex";
  cmd.run.layout["moe_shared_expert_overlap"] = "false";
  cmd.notes.push_back("applied DeepEPCallback on " + gpu.name + " (compute capability " + std::to_string(major) +
                      "): the flex dispatcher with DeepEP, the shared-expert overlap off");
}

void run_check(const CheckOptions& o, std::ostream& out) {
  if (o.command.empty())
    throw Error(
        "give the launch command after -- (or a script that runs pretrain_gpt.py, a torchtitan .toml, a NeMo "
        ".yaml, a NeMo 2.0 recipe .py, or a Megatron-Bridge recipe .py and --recipe NAME)");
  const std::int64_t gpus = o.gpus.empty() ? 0 : parse_count("--gpus", o.gpus);
  PlanRequest req = o.specs.request(o.profile);
  calibrate::MegatronCommand cmd;
  std::string where = "the command";
  ConfigKind kind = config_kind(o.command);
  std::int64_t layers_per_stage = 0;
  if (kind != ConfigKind::none) {
    where = o.command.front();
    if (!std::filesystem::is_regular_file(where)) throw Error(where + ": no such job config file");
    const bool recipe = kind == ConfigKind::nemo_recipe || kind == ConfigKind::bridge_recipe;
    if ((kind == ConfigKind::nemo || recipe) && o.specs.framework != "megatron")
      throw Error("--framework " + o.specs.framework +
                  ": a NeMo config is priced under megatron (NeMo runs Megatron-core)");
    cmd = job_config_command(o, kind, gpus, layers_per_stage);
    if (recipe && !cmd.model_unread.empty()) {
      // A config class of no shipped model's shape: priced as --model, whose shape is the user's to vouch for.
      if (o.specs.model.empty())
        throw Error(cmd.model_unread + ": give --model, a shipped name or a config.json of the class's shape");
      cmd.notes.push_back("the recipe's config class has no shipped model: priced as --model " + o.specs.model);
    } else if (recipe) {
      if (o.specs.model.empty()) req.model = cmd.run.layout.at("model");
      // The config class is the shipped model's shape with what the reader says differs (GPTConfig175B's attention
      // dropout 0, the small Qwen 2 classes' untied output layer, StarCoder2's classes without a window, a Bridge
      // provider's vocabulary padded as Megatron-LM pads it).
      const auto& args = cmd.arguments;
      if (args.contains("attention_dropout") || args.contains("untie_embeddings_and_output_weights") ||
          args.contains("window_size") || args.contains("make_vocab_size_divisible_by")) {
        req.model_spec = o.specs.library().model(cmd.run.layout.at("model"));
        if (args.contains("attention_dropout"))
          req.model_spec->attention_dropout = std::stod(args.at("attention_dropout"));
        if (args.contains("untie_embeddings_and_output_weights")) req.model_spec->tied_embeddings = false;
        if (args.contains("window_size")) req.model_spec->sliding_window = 0;
        if (args.contains("make_vocab_size_divisible_by")) {  // megatron/training/vocab_utils.py
          const auto& layout = cmd.run.layout;
          const std::int64_t divisible_by = std::stoll(args.at("make_vocab_size_divisible_by")),
                             tp = layout.contains("tp") ? std::stoll(layout.at("tp")) : 1,
                             padded = padded_vocab_size(req.model_spec->vocab_size, divisible_by, tp);
          if (padded != req.model_spec->vocab_size)
            cmd.notes.push_back("the vocabulary padded to " + std::to_string(padded) + " rows (should_pad_vocab: a " +
                                "multiple of " + std::to_string(divisible_by * tp) + ")");
          req.model_spec->vocab_size = padded;
        }
      }
      if (!o.specs.model.empty() && o.specs.model != cmd.run.layout.at("model"))
        throw Error("--model " + o.specs.model + ": the recipe's model is " + cmd.run.layout.at("model") +
                    " (its config class); give no --model, or that one");
    }
  } else {
    std::vector<std::string> tokens = o.command;
    std::map<std::string, std::string> script_files;  // what the script writes with here-documents
    std::string script;
    std::vector<calibrate::LaunchScriptVariant> variants;
    if (tokens.size() == 1 && std::filesystem::is_regular_file(tokens.front())) {
      where = script = tokens.front();
      variants = script_variants(tokens.front(), o.set);
      tokens = variants.front().command;
      script_files = variants.front().files;
    } else if (!o.set.empty()) {
      throw Error("--set " + o.set.front() + ": gives a launch script's values, and the command is not a script");
    }
    std::vector<std::string> ignored;
    tokens = without_ignored(tokens, o.ignore, ignored);
    if (const auto entry = torchtitan_entry(tokens); entry != tokens.end()) {
      // torchtitan main's launch (torchrun ... -m torchtitan.train --module M --config NAME --section.field value):
      // its config registry read with the command line, as a registry file given with it is.
      const std::int64_t world = calibrate::launcher_world({tokens.cbegin(), entry}, gpus, where);
      const std::vector<std::string> args(entry + 1, tokens.cend());
      const std::string registry = torchtitan_registry_file(args, script);
      cmd = torchtitan_command(
          calibrate::read_torchtitan_registry(read_file_bounded(registry, registry), world, registry, args),
          layers_per_stage);
      cmd.notes.insert(cmd.notes.begin(), "torchtitan's config registry: " + registry);
      kind = ConfigKind::torchtitan_registry;
    } else {
      cmd = calibrate::parse_megatron_command(tokens, gpus, where);
      if (variants.size() > 1) check_variants_price_alike(variants, o.ignore, gpus, where, cmd);
    }
    cmd.ignored.insert(cmd.ignored.begin(), ignored.begin(), ignored.end());
    if (cmd.deepspeed) {
      if (o.specs.framework != "megatron" && o.specs.framework != "deepspeed")
        throw Error("--framework " + o.specs.framework + ": a DeepSpeed launch is priced under deepspeed");
      req.framework = "deepspeed";
      apply_deepspeed_config(cmd, where, script, script_files);
    }
  }
  // A torchtitan job (its TOML, its config registry, or its launch of one): priced under torchtitan, as the model its
  // module and flavor name where that is a shipped model, else as --model.
  const bool torchtitan_job = kind == ConfigKind::torchtitan || kind == ConfigKind::torchtitan_registry;
  bool flavor_shipped = false;
  if (torchtitan_job) {
    if (o.specs.framework != "megatron" && o.specs.framework != "torchtitan")
      throw Error("--framework " + o.specs.framework + ": a torchtitan job is priced under torchtitan");
    req.framework = "torchtitan";
    const std::vector<std::string> shipped = o.specs.library().names("models");
    flavor_shipped = std::find(shipped.begin(), shipped.end(), cmd.run.layout.at("model")) != shipped.end();
    if (o.specs.model.empty() && !flavor_shipped)
      throw Error(where + ": the job's model, " + cmd.run.layout.at("model") +
                  " (torchtitan's module and flavor), is no shipped model: give --model, a shipped name or a "
                  "config.json of its shape");
    if (o.specs.model.empty()) req.model = cmd.run.layout.at("model");
  }
  if (o.specs.model.empty() && req.model.empty()) {
    if (!cmd.run.model)
      throw Error(where +
                  (kind == ConfigKind::nemo ? ": a NeMo config names its tokenizer, not its vocabulary size"
                                            : ": no --vocab-size in the command") +
                  ", and no tokenizer file it names is on this machine to count, so the model is not whole: give "
                  "--model (a shipped name or a config.json)");
    req.model_spec = *cmd.run.model;
    req.model_spec->name = "the command's model";
  }
  Plan plan = resolve_plan(req);
  // The command's dropout on the residual stream (Megatron-LM's --hidden-dropout, its default 0.1 where the command
  // leaves it) is the job's, whatever --model's spec says: a setting of the run, not of the model's shape.
  if (kind != ConfigKind::nemo_recipe && kind != ConfigKind::bridge_recipe && !torchtitan_job &&
      cmd.arguments.contains("hidden_dropout"))
    plan.model.hidden_dropout = std::stod(cmd.arguments.at("hidden_dropout"));
  if (cmd.arguments.contains("deepep_callback")) apply_deepep_callback(plan.cluster.gpu, where, cmd);
  // A torchtitan job whose flavor is a shipped model, priced as --model: the two must be one shape (a config.json of
  // the same model passes; another model is refused, naming both).
  if (flavor_shipped && !o.specs.model.empty()) {
    const std::string& flavor = cmd.run.layout.at("model");
    const ModelSpec a = o.specs.library().model(flavor), &b = plan.model;
    if (a.hidden_size != b.hidden_size || a.num_layers != b.num_layers || a.num_heads != b.num_heads ||
        a.num_kv_heads != b.num_kv_heads || a.ffn_hidden_size != b.ffn_hidden_size || a.vocab_size != b.vocab_size ||
        a.num_experts != b.num_experts)
      throw Error("--model " + o.specs.model + ": the job's model is " + flavor +
                  " (its flavor), of another shape; give no --model, or one of that shape");
  }
  if (!o.specs.model.empty() && (cmd.run.model || cmd.arguments.contains("hidden_size"))) {
    // --model given too: it must be the command's model (a command without a vocabulary, as a NeMo config, still
    // gives every other dimension; megatron_model checked them as integers).
    const ModelSpec& b = plan.model;
    const bool gqa = cmd.arguments.contains("group_query_attention");
    const auto dim = [&](std::int64_t ModelSpec::*field, const char* argument) {
      return cmd.run.model ? (*cmd.run.model).*field : std::stoll(cmd.arguments.at(argument));
    };
    const std::array<std::tuple<const char*, std::int64_t, std::int64_t>, 5> dims = {{
        {"hidden size", dim(&ModelSpec::hidden_size, "hidden_size"), b.hidden_size},
        {"layers", dim(&ModelSpec::num_layers, "num_layers"), b.num_layers},
        {"attention heads", dim(&ModelSpec::num_heads, "num_attention_heads"), b.num_heads},
        {"KV heads", dim(&ModelSpec::num_kv_heads, gqa ? "num_query_groups" : "num_attention_heads"), b.num_kv_heads},
        {"FFN width", dim(&ModelSpec::ffn_hidden_size, "ffn_hidden_size"), b.ffn_hidden_size},
    }};
    const std::string given = kind == ConfigKind::nemo ? "config " : "command ";
    for (const auto& [what, x, y] : dims)
      if (x != y)
        throw Error("--model " + b.name + " has " + what + " " + std::to_string(y) + ", the " + given +
                    std::to_string(x));
    // The attention window: Hugging Face's sliding_window counts the query (as ModelSpec does), Megatron-LM's
    // --window-size left does not (left + 1 here), and Mistral's configs give 4,096 in both conventions: windows one
    // token apart are the same model's.
    const auto window = [](std::int64_t w, std::int64_t skip) {
      return w == 0 ? std::string("no sliding window")
                    : "a " + std::to_string(w) + "-token window" +
                          (skip > 0 ? " (full attention every " + std::to_string(skip) + " layers)" : "");
    };
    if ((cmd.sliding_window == 0) != (b.sliding_window == 0) || std::abs(cmd.sliding_window - b.sliding_window) > 1 ||
        cmd.window_skip_freq != b.window_skip_freq)
      throw Error("--model " + b.name + " has " + window(b.sliding_window, b.window_skip_freq) + ", the " + given +
                  window(cmd.sliding_window, cmd.window_skip_freq));
  }
  if (o.mtsl_curve && o.html.empty()) throw Error("--mtsl-curve draws on the plan page: give --html FILE with it");
  if (!o.html.empty()) (void)check_output_path(o.html, "--html");
  if (layers_per_stage > 0)
    calibrate::set_torchtitan_stages_per_rank(cmd.run.layout, layers_per_stage, plan.model.num_layers, where);
  KnobSettings k = knob_settings_of(cmd.run.layout);
  const Layout layout = plan_layout(plan, k);
  const Estimate e = estimate(plan, PlanContext(plan), layout);
  // The faster layouts of the same job (its GPUs, sequence and batch) that fit, as rank searches them.
  SearchOptions so;
  so.gpus = layout.gpus(), so.seq = layout.seq, so.gbs = layout.gbs;
  so.top = 64;
  restrict_to_framework(so, plan.framework, layout.megatron_fsdp.enabled);
  // From the command's sequence parallelism, which a layout keeps where TP is 1 (rank tries the other where it is not),
  // and its P2P overlap of the interleaved schedule.
  Layout base = rank_base(plan, layout_request(k, plan.framework));
  base.sequence_parallel = layout.sequence_parallel;
  base.overlap_p2p_comm = layout.overlap_p2p_comm;
  const SearchResult res = rank_layouts(plan.model, plan.cluster, base, plan.framework.residual, plan.coefficients, so);
  if (!o.html.empty()) {
    SearchResult page = res;
    page.best.insert(page.best.begin(),
                     RankedLayout{layout, e.perf.step_time_s, e.perf.tokens_per_s, e.perf.tflops_per_gpu, e.perf.mfu,
                                  e.memory.peak_gib * kGiB, e.memory.capacity_gib * kGiB});
    nlohmann::json doc = plan_page_json(plan, base, so, page, o.mtsl_curve);
    doc["layouts"][0]["label"] = "the command";
    write_file_atomically(o.html, plan_page_html(doc));
  }
  const std::size_t top = static_cast<std::size_t>(parse_count("--top", o.top));
  // Where the command fits: the faster layouts; where it may not: the fastest that fit.
  const bool fits = e.memory.verdict == "fits";
  // torchtitan main's command line for a layout, nullopt where it has no spelling for it.
  const auto main_flags = [&](const Layout& l) {
    return calibrate::torchtitan_main_flags(launch_flags(plan, l), l.dp, l.sequence_parallel);
  };
  const auto registry_flags = kind == ConfigKind::torchtitan_registry ? main_flags(layout) : std::nullopt;
  // A change as the user writes it: a NeMo config's keys, torchtitan main's command line for its config registry,
  // else the command's flags (a change no NeMo key says stays in Megatron-LM's flags).
  const auto changes = [&](const Layout& to) {
    if (registry_flags) {
      const auto b = main_flags(to);
      return b ? changed_flags(*registry_flags, *b) : std::vector<std::string>{};
    }
    std::vector<std::string> c = kind == ConfigKind::nemo            ? calibrate::nemo_config_changes(layout, to)
                                 : kind == ConfigKind::nemo_recipe   ? calibrate::nemo_recipe_changes(layout, to)
                                 : kind == ConfigKind::bridge_recipe ? calibrate::bridge_recipe_changes(layout, to)
                                                                     : std::vector<std::string>{};
    if (c.empty()) c = flag_changes(plan, layout, to);
    return c;
  };
  std::vector<const RankedLayout*> faster;
  for (const RankedLayout& x : res.best)
    if ((!fits || x.step_time_s < e.perf.step_time_s) && faster.size() < top && !changes(x.layout).empty())
      faster.push_back(&x);
  const std::string& verdict = e.memory.verdict;
  if (o.json) {
    nlohmann::json alts = nlohmann::json::array();
    for (const RankedLayout* x : faster) {
      alts.push_back({{"layout", layout_to_json(plan.model, x->layout)},
                      {"step_time_s", x->step_time_s},
                      {"peak_gib", x->peak_bytes / kGiB},
                      {"change", changes(x->layout)}});
    }
    nlohmann::json doc = {{"source", where},
                          {"flags_read", cmd.read},
                          {"flags_ignored", cmd.ignored},
                          {"notes", cmd.notes},
                          {"model", plan.model.name},
                          {"framework", plan.framework.name},
                          {"layout", layout_to_json(plan.model, layout)},
                          {"verdict", verdict},
                          {"faster", alts}};
    add_cluster_json(doc, plan.cluster);
    doc.update(to_json(e));
    print_json(out, doc);
  } else {
    out << "headroom check: " << where << ": " << plan.model.name << " on " << layout.gpus() << " x "
        << plan.cluster.gpu.name << " (" << plan.cluster.name << "), " << plan.framework.name << "\n"
        << assumed_cluster_line(plan.cluster);
    out << "read (" << cmd.read.size() << "):";
    for (const auto& f : cmd.read) out << " " << f << ";";
    out << "\nignored (" << cmd.ignored.size() << "):";
    for (const auto& f : cmd.ignored) out << " " << f << ";";
    out << "\n";
    for (const auto& n : cmd.notes) out << "note: " << n << "\n";
    out << "layout: " << layout_name(plan.model, layout) << ", gbs " << layout.gbs << ", seq " << layout.seq << "\n";
    char line[320];
    for (const auto& s : e.memory.stages) {
      std::snprintf(line, sizeof line, "  stage %-3lld %8.2f GiB of %.2f\n", static_cast<long long>(s.stage),
                    static_cast<double>(s.total) / kGiB, e.memory.capacity_gib);
      out << line;
    }
    std::snprintf(line, sizeof line, "memory: %s, peak %.2f GiB (stage %lld) of %.2f GiB", verdict.c_str(),
                  e.memory.peak_gib, static_cast<long long>(e.memory.peak_stage), e.memory.capacity_gib);
    out << line;
    if (e.memory.peak_gib_interval)
      out << ", band " << format_gib((*e.memory.peak_gib_interval)[0] * kGiB) << "-"
          << format_gib((*e.memory.peak_gib_interval)[1] * kGiB) << " GiB";
    out << "\n";
    std::snprintf(line, sizeof line, "step: %.3f s, %.0f tokens/s, MFU %.1f%%", e.perf.step_time_s, e.perf.tokens_per_s,
                  100 * e.perf.mfu);
    out << line;
    if (e.perf.step_time_s_interval) {
      std::snprintf(line, sizeof line, ", band %.3f-%.3f s", (*e.perf.step_time_s_interval)[0],
                    (*e.perf.step_time_s_interval)[1]);
      out << line;
    }
    out << " (coefficients " << e.perf.coefficients << ")\n";
    if (faster.empty()) {
      out << "no " << (fits ? "faster " : "") << "layout of these " << layout.gpus() << " GPUs fits\n";
    } else {
      out << (fits ? "faster layouts of the same job that fit:\n" : "the fastest layouts of the same job that fit:\n");
      for (const RankedLayout* x : faster) {
        std::snprintf(line, sizeof line, "  %.3f s (%.0f%% of the step), peak %.2f GiB:", x->step_time_s,
                      100 * x->step_time_s / e.perf.step_time_s, x->peak_bytes / kGiB);
        out << line;
        for (const auto& c : changes(x->layout)) out << " " << c << ";";
        out << "\n";
      }
    }
  }
  out.flush();
  if (verdict == "oom") throw QuietExit(kExitOom);
  if (verdict == "uncertain") throw QuietExit(kExitUncertain);
}

}  // namespace

void register_check(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<CheckOptions>();
  CLI::App* sub =
      app.add_subcommand("check",
                         "pre-flight check of a Megatron-LM launch command, a torchtitan or NeMo job config as it is "
                         "(exit 0 fits, 3 uncertain, 4 out of memory)");
  opts->specs.add_to(*sub, false);
  sub->add_option("--gpus", opts->gpus, "the world size, when the command has no torchrun --nproc-per-node");
  sub->add_option("--profile", opts->profile, "performance coefficients JSON or a calibration profile");
  sub->add_option("--ignore", opts->ignore, "price the job without this flag of the command (repeatable)");
  sub->add_option("--set", opts->set,
                  "NAME=VALUE: a value the launch script reads and does not set (an argument's number, an environment "
                  "variable; repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--top", opts->top, "how many faster layouts to show")->capture_default_str();
  sub->add_option("--html", opts->html,
                  "also write the plan page of the job, the command's layout first (rank --html)");
  sub->add_flag("--mtsl-curve", opts->mtsl_curve,
                "with --html: the page also draws each layout's peak memory against sequence length, with its MTSL");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->add_option("command", opts->command,
                  "the launch command after -- (torchrun ... pretrain_gpt.py ...), a script whose line runs "
                  "pretrain_gpt.py, a torchtitan job config (.toml; --gpus where its shard degree is -1) or config "
                  "registry (torchtitan/models/<module>/config_registry.py) and torchtitan's command line (--config "
                  "llama3_8b --parallelism.tensor_parallel_degree 2 activation_checkpoint:full ...), or a NeMo "
                  "training config (.yaml) and the Hydra overrides its launcher script gives main.py "
                  "(training.model.tensor_model_parallel_size=4 +training.model.optim.grad_sync_dtype=bf16 ...), or a "
                  "NeMo 2.0 pre-training recipe (nemo/collections/llm/recipes/<model>.py) and NeMo-Run's overrides "
                  "(num_nodes=2 trainer.strategy.tensor_model_parallel_size=4 ...), or a Megatron-Bridge recipe file "
                  "(src/megatron/bridge/recipes/<family>/<gpu>/<model>.py) with run_recipe.py's --recipe NAME and "
                  "overrides (model.tensor_model_parallel_size=4 train.global_batch_size=256 ...)");
  sub->callback([opts, &out] { run_check(*opts, out); });
}

}  // namespace headroom::cli
