// `headroom validate`: reproduces the published tables (validation/report.hpp decides what passes) and prints the
// agreement. Exits 1 when a check fails.
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "validate_print.hpp"

namespace headroom::cli {
namespace {

struct ValidateOptions {
  std::string data_dir;
  std::string framework = "megatron";
  bool json = false;
};

void run_validate(const ValidateOptions& o, std::ostream& out) {
  const SpecLibrary lib(o.data_dir.empty() ? default_data_dir() : std::filesystem::path(o.data_dir));
  const validate::Report r = validate::validate_all(lib, o.framework);
  const nlohmann::json simulator = simulator_agreement(lib);  // informative: not part of `passed`
  if (o.json) {
    print_json(out, {{"estimates", estimate_json(r.estimates)},
                     {"verdicts", verdict_json(r.verdicts, r.framework)},
                     {"throughput", perf_json(r.perf)},
                     {"simulator", simulator},
                     {"thesis_mtsl", thesis_mtsl_json(r.thesis_mtsl)},
                     {"thesis_throughput", thesis_perf_json(r.thesis)},
                     {"published_runs", published_json(r.published)},
                     {"published_moe_runs", published_json(r.moe)},
                     {"published_fp8_runs", published_json(r.fp8)},
                     {"published_fp8_memory", published_memory_json(r.fp8_memory)},
                     {"published_moe_memory", published_memory_json(r.moe_memory)},
                     {"published_bridge_runs", published_json(r.bridge)},
                     {"published_bridge_memory", published_memory_json(r.bridge_memory)},
                     {"stack_gemm_fraction", stack_fraction_json(r.stack)},
                     {"attention_backends",
                      [&] {
                        nlohmann::json a = nlohmann::json::array();
                        for (const auto& f : r.attention_backends) a.push_back(stack_fraction_json(f));
                        return a;
                      }()},
                     {"published_fsdp_runs", published_json(r.fsdp_runs)},
                     {"published_torchtitan_runs", published_json(r.torchtitan_runs)},
                     {"published_torchtitan_memory", published_memory_json(r.torchtitan_memory)},
                     {"published_deepspeed_runs", published_json(r.deepspeed_runs)},
                     {"published_deepspeed_memory", published_memory_json(r.deepspeed_memory)},
                     {"published_collectives", collectives_json(r.collectives)},
                     {"passed", r.passed}});
  } else {
    print_estimates(out, r.estimates);
    print_verdicts(out, r.verdicts, r.framework);
    print_perf_validation(out, r.perf);
    print_simulator_agreement(out, simulator);
    print_thesis_mtsl(out, r.thesis_mtsl);
    print_thesis_perf(out, r.thesis);
    print_published(out, r.published, "Published large-scale runs", "published_runs.csv");
    print_published(out, r.moe, "Published runs of models with experts", "published_moe_priced.csv");
    print_published_memory(out, r.moe_memory);
    print_published(out, r.fp8, "Published FP8 runs", "published_fp8_priced.csv");
    print_published_memory(out, r.fp8_memory);
    print_published(out, r.bridge, "Megatron-Bridge's verification runs", "published_bridge_runs.csv");
    print_published_memory(out, r.bridge_memory);
    print_stack_fraction(out, r.stack, r.framework.name);
    print_attention_backends(out, r.attention_backends, r.stack.attention_backend, r.attention_backend);
    print_published(out, r.fsdp_runs, "Published PyTorch FSDP runs", "published_fsdp_runs.csv", r.fsdp.name);
    print_published(out, r.torchtitan_runs, "Published torchtitan runs", "published_torchtitan_priced.csv",
                    r.torchtitan.name);
    print_published_memory(out, r.torchtitan_memory);
    print_published(out, r.deepspeed_runs, "Published DeepSpeed runs", "published_deepspeed_runs.csv",
                    r.deepspeed.name);
    print_published_memory(out, r.deepspeed_memory);
    print_collectives(out, r.collectives);
    out << "\n" << (r.passed ? "validation passed" : "VALIDATION FAILED") << "\n";
  }
  if (!r.passed) throw CheckFailed("validation failed: see the tables above");
}

}  // namespace

void register_validate(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand("validate", "reproduce the published tables and print the agreement");
  sub->add_option("--data-dir", opts->data_dir, "directory of specs and reference tables");
  sub->add_option("--framework", opts->framework,
                  "framework of the Megatron-LM runs checked (megatron only; pytorch-fsdp's runs are always checked)")
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_validate(*opts, out); });
}

}  // namespace headroom::cli
