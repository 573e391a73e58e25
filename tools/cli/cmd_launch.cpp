// `headroom launch`: the launch arguments of one layout (the flags of `estimate`) for Megatron-LM, torchtitan,
// PyTorch FSDP2, DeepSpeed and NeMo (launch_args.hpp: versions targeted, what each framework cannot express).
#include <algorithm>
#include <memory>
#include <sstream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/launch_args.hpp"

namespace headroom::cli {
namespace {

struct LaunchOptions {
  SpecOptions specs;
  LayoutOptions layout;
  std::string only;  // --export megatron|torchtitan|fsdp|deepspeed|nemo
  bool json = false;
};

void print_megatron(std::ostream& out, const LaunchExport& e) {
  out << "# " << kMegatronVersions << "\n";
  out << "# add the tokenizer and data arguments (--tokenizer-type, --tokenizer-model, --data-path)\n";
  for (const auto& i : e.megatron_issues) out << "# UNSUPPORTED: " << i << "\n";
  out << "torchrun --nnodes " << e.nodes << " --nproc-per-node " << e.gpus_per_node << " pretrain_gpt.py";
  for (const std::string& arg : e.megatron) {
    const bool flag = arg.starts_with("--");
    out << (flag ? " \\\n    " : " ") << shell_word(arg);
  }
  out << "\n";
}

// ds_config.json, then the deepspeed launcher line with Megatron-DeepSpeed's arguments.
void print_deepspeed(std::ostream& out, const LaunchExport& e) {
  out << "# " << kDeepspeedVersions << "\n# ds_config.json:\n";
  std::istringstream config(e.deepspeed_config);
  for (std::string line; std::getline(config, line);) out << "#   " << line << "\n";
  for (const auto& i : e.deepspeed_issues) out << "# UNSUPPORTED: " << i << "\n";
  out << "deepspeed --num_nodes " << e.nodes << " --num_gpus " << e.gpus_per_node << " pretrain_gpt.py";
  for (const std::string& arg : e.deepspeed) out << (arg.starts_with("--") ? " \\\n    " : " ") << shell_word(arg);
  out << "\n";
}

// NeMo-Framework-Launcher's main.py on the model's training config, with the layout as Hydra overrides.
void print_nemo(std::ostream& out, const LaunchExport& e) {
  out << "# " << kNemoVersions << "\n";
  out << "# training=<family>/<model>: the model's config in launcher_scripts/conf/training (its shape and data)\n";
  for (const auto& i : e.nemo_issues) out << "# UNSUPPORTED: " << i << "\n";
  out << "python3 launcher_scripts/main.py training=<family>/<model> stages=[training]";
  for (const std::string& o : e.nemo) out << " \\\n    " << o;
  out << "\n";
}

void run_launch(const LaunchOptions& o, std::ostream& out) {
  if (!o.only.empty() && o.only != "megatron" && o.only != "torchtitan" && o.only != "fsdp" && o.only != "deepspeed" &&
      o.only != "nemo")
    throw Error("--export '" + o.only + "' is not understood (valid: megatron, torchtitan, fsdp, deepspeed, nemo)");
  const Plan r = resolve_plan(o.specs.request());
  const Layout l = o.layout.build(r);
  const LaunchExport e = launch_export(r.model, r.cluster, l);
  if (o.json) {
    nlohmann::json doc = launch_to_json(e);
    nlohmann::json layout = layout_to_json(r.model, l);
    layout["sharding_code"] = sharding_code(l.sharding);
    doc["layout"] = layout;
    doc["model"] = r.model.name;
    add_cluster_json(doc, r.cluster);
    doc["framework"] = r.framework.name;
    doc["memory"] = memory_verdict_json(r, l);
    print_json(out, doc);
    return;
  }
  if (o.only.empty())
    out << "# headroom launch: " << r.model.name << " on " << l.gpus() << " x " << r.cluster.gpu.name << " ("
        << r.cluster.name << "), tp " << l.tp << " cp " << l.cp << " pp " << l.pp
        << (l.vpp > 1 ? "x" + std::to_string(l.vpp) : "") << stage_text(r.model, l) << " dp " << l.dp << ", mbs "
        << l.mbs << ", gbs " << l.gbs << ", seq " << l.seq << ", sharding " << sharding_code(l.sharding)
        << ", recompute " << recompute_text(l) << "\n"
        << (r.cluster.assumed ? "# " + assumed_cluster_line(r.cluster) : std::string()) << "\n";
  if (const std::string w = memory_warning(r, l); !w.empty()) out << "# " << w << "\n\n";
  if (o.only.empty() || o.only == "megatron") print_megatron(out, e);
  if (o.only.empty()) out << "\n";
  if (o.only.empty() || o.only == "torchtitan") out << e.torchtitan_toml;
  if (o.only.empty()) out << "\n";
  if (o.only.empty() || o.only == "fsdp") out << e.fsdp_python;
  if (o.only.empty()) out << "\n";
  if (o.only.empty() || o.only == "deepspeed") print_deepspeed(out, e);
  if (o.only.empty()) out << "\n";
  if (o.only.empty() || o.only == "nemo") print_nemo(out, e);
}

}  // namespace

void register_launch(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch",
      "launch arguments of one layout: Megatron-LM flags, torchtitan TOML, PyTorch FSDP2 snippet, DeepSpeed config, "
      "NeMo training-config overrides");
  opts->specs.add_to(*sub, true);
  opts->layout.add_to(*sub);
  sub->add_option("--export", opts->only, "print only one: megatron, torchtitan, fsdp, deepspeed or nemo");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_launch(*opts, out); });
}

}  // namespace headroom::cli
