// `headroom rank`: every valid layout of a job, those that fit ranked by predicted step time, the Pareto front
// of memory vs speed, and the launch arguments of the fastest.
#include <cstdio>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/estimator/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom::cli {
namespace {

struct RankOptions {
  SpecOptions specs;
  std::string gpus, seq, gbs, top = "10";
  std::vector<std::string> constraints;
  std::string profile;
  std::string lora_rank, lora_targets;  // LoRA on frozen base weights (thesis Sec. 3.1.2); empty = full training
  bool json = false;
};

std::string layout_name(const Layout& l) {
  return "tp" + std::to_string(l.tp) + " cp" + std::to_string(l.cp) + " pp" + std::to_string(l.pp) +
         (l.vpp > 1 ? "x" + std::to_string(l.vpp) : "") + " dp" + std::to_string(l.dp) + " mbs" + std::to_string(l.mbs) +
         " " + sharding_code(l.sharding) + " rc:" + std::string(to_string(l.recompute)) +
         (l.schedule == Schedule::gpipe ? " gpipe" : "") + (l.sequence_parallel || l.tp == 1 ? "" : " no-sp");
}

// Megatron-LM (mcore) arguments. Megatron shards only the optimizer (distributed optimizer, ZeRO-1 over DP×CP):
// other sharding strategies have no Megatron flag and are reported as such.
std::string megatron_args(const ModelSpec& m, const Layout& l) {
  std::string a = "--tensor-model-parallel-size " + std::to_string(l.tp) + " --context-parallel-size " +
                  std::to_string(l.cp) + " --pipeline-model-parallel-size " + std::to_string(l.pp);
  if (l.vpp > 1) a += " --num-layers-per-virtual-pipeline-stage " + std::to_string(m.num_layers / (l.pp * l.vpp));
  a += " --micro-batch-size " + std::to_string(l.mbs) + " --global-batch-size " + std::to_string(l.gbs) +
       " --seq-length " + std::to_string(l.seq);
  if (l.sequence_parallel && l.tp > 1) a += " --sequence-parallel";
  if (l.flash_attention) a += " --use-flash-attn";
  if (l.recompute == Recompute::selective) a += " --recompute-granularity selective";
  if (l.recompute == Recompute::full)
    a += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  const StateSharding& s = l.sharding;
  if (s.optimizer == Shard::global && s.params == Shard::none && s.grads == Shard::none) a += " --use-distributed-optimizer";
  else if (!(s.optimizer == Shard::none && s.params == Shard::none && s.grads == Shard::none))
    a += "  # sharding " + sharding_code(s) + " has no Megatron-LM flag (use torchtitan/FSDP below)";
  return a;
}

// torchtitan (FSDP2 + TP + CP + PP) job-config overrides. G-sharded parameters = FSDP over the DP group;
// I = HSDP (shard inside a node, replicate across); N = plain replication (DDP).
std::string torchtitan_args(const Layout& l, std::int64_t gpus_per_node) {
  std::int64_t shard = 1, replicate = l.dp;
  if (l.sharding.params == Shard::global) { shard = l.dp; replicate = 1; }
  if (l.sharding.params == Shard::intra) {
    shard = std::max<std::int64_t>(1, std::min(l.dp, gpus_per_node / std::max<std::int64_t>(1, l.tp * l.cp)));
    while (l.dp % shard != 0) --shard;
    replicate = l.dp / shard;
  }
  std::string a = "--parallelism.tensor_parallel_degree " + std::to_string(l.tp) +
                  " --parallelism.context_parallel_degree " + std::to_string(l.cp) +
                  " --parallelism.pipeline_parallel_degree " + std::to_string(l.pp) +
                  " --parallelism.data_parallel_shard_degree " + std::to_string(shard) +
                  " --parallelism.data_parallel_replicate_degree " + std::to_string(replicate);
  if (l.pp > 1)
    a += std::string(" --parallelism.pipeline_parallel_schedule ") +
         (l.schedule == Schedule::interleaved ? "Interleaved1F1B" : l.schedule == Schedule::gpipe ? "GPipe" : "1F1B") +
         " --parallelism.pipeline_parallel_microbatch_size " + std::to_string(l.mbs);
  a += " --training.local_batch_size " + std::to_string(l.gbs / l.dp) + " --training.seq_len " + std::to_string(l.seq) +
       " --activation_checkpoint.mode " + std::string(to_string(l.recompute));
  if (l.sharding.grads != l.sharding.params || l.sharding.optimizer != l.sharding.params)
    a += "  # FSDP shards P, G and OS alike; " + sharding_code(l.sharding) + " is approximated";
  return a;
}

nlohmann::json ranked_to_json(const RankedLayout& r) {
  nlohmann::json j = layout_to_json(r.layout);
  j["sharding_code"] = sharding_code(r.layout.sharding);
  return {{"layout", j},
          {"step_time_s", r.step_time_s},
          {"tokens_per_s", r.tokens_per_s},
          {"tflops_per_gpu", r.tflops_per_gpu},
          {"mfu", r.mfu},
          {"peak_gib", r.peak_bytes / kGiB},
          {"margin_gib", r.margin_bytes() / kGiB},
          {"verdict", r.margin_bytes() >= 0 ? "fits" : "oom"}};
}

void print_rows(std::ostream& out, const std::vector<RankedLayout>& rows) {
  char line[320];
  std::snprintf(line, sizeof line, "%4s  %-48s %9s %12s %8s %6s %9s %9s\n", "#", "layout", "step s", "tokens/s",
                "TFLOP/s", "MFU", "peak GiB", "margin");
  out << line;
  int i = 0;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%4d  %-48s %9.3f %12.0f %8.1f %5.1f%% %9.2f %9.2f\n", ++i,
                  layout_name(r.layout).c_str(), r.step_time_s, r.tokens_per_s, r.tflops_per_gpu, 100 * r.mfu,
                  r.peak_bytes / kGiB, r.margin_bytes() / kGiB);
    out << line;
  }
}

void run_rank(const RankOptions& o, std::ostream& out) {
  ResolvedSpecs r = resolve(o.specs);  // a calibration profile replaces its datasheet numbers
  SearchOptions so;
  so.gpus = parse_count("--gpus", o.gpus);
  so.seq = parse_count("--seq", o.seq);
  so.gbs = parse_count("--gbs", o.gbs);
  so.top = static_cast<std::size_t>(parse_count("--top", o.top));
  for (const auto& c : o.constraints) so.constraints.push_back(parse_constraint(c));
  restrict_to_framework(so, r.framework);
  const PerfCoefficients coefficients = perf_coefficients_for(o.profile, o.specs, r);
  Layout base = default_layout(r.framework);
  if (!o.lora_rank.empty()) base.lora.rank = parse_count("--lora-rank", o.lora_rank);
  if (!o.lora_targets.empty()) {
    if (o.lora_rank.empty()) throw Error("--lora-targets needs --lora-rank");
    base.lora.targets = parse_lora_targets(o.lora_targets);
  }
  const SearchResult res = rank_layouts(r.model, r.cluster, base, r.framework.residual, coefficients, so);
  if (o.json) {
    nlohmann::json layouts = nlohmann::json::array(), pareto = nlohmann::json::array();
    for (const auto& x : res.best) layouts.push_back(ranked_to_json(x));
    for (const auto& x : res.pareto) pareto.push_back(ranked_to_json(x));
    nlohmann::json doc = {{"model", r.model.name},      {"gpu", r.cluster.gpu.name},
                          {"cluster", r.cluster.name},  {"framework", r.framework.name},
                          {"coefficients", coefficients.name},
                          {"gpus", so.gpus},            {"seq", so.seq},
                          {"gbs", so.gbs},              {"evaluated", res.evaluated},
                          {"lora", base.lora.enabled() ? nlohmann::json{{"rank", base.lora.rank},
                                                                        {"targets", lora_targets_to_string(base.lora.targets)}}
                                                       : nlohmann::json(nullptr)},
                          {"memory_checked", res.memory_checked}, {"fitting", res.fitting},
                          {"layouts", layouts},         {"pareto", pareto}};
    if (!res.best.empty())
      doc["launch"] = {{"megatron", megatron_args(r.model, res.best.front().layout)},
                       {"torchtitan", torchtitan_args(res.best.front().layout, r.cluster.gpus_per_node)}};
    out << doc.dump(2) << "\n";
    return;
  }
  out << "headroom rank: " << r.model.name << " on " << so.gpus << " x " << r.cluster.gpu.name << " (" << r.cluster.name
      << "), seq " << so.seq << ", gbs " << so.gbs << ", " << r.framework.name << " (coefficients " << coefficients.name
      << ")";
  if (base.lora.enabled())
    out << ", LoRA rank " << base.lora.rank << " on " << lora_targets_to_string(base.lora.targets);
  out << "\n";
  out << res.evaluated << " layouts evaluated, " << res.memory_checked << " memory-checked (larger micro-batches pruned), "
      << res.fitting << " fit in " << format_gib(r.cluster.gpu.usable_memory_bytes) << " GiB\n\n";
  if (res.best.empty()) {
    out << "no layout fits: try more GPUs, a shorter --seq or fewer --constraint\n";
    return;
  }
  print_rows(out, res.best);
  out << "\nPareto front (less memory, or faster; memory ascending)\n";
  print_rows(out, res.pareto);
  const Layout& top = res.best.front().layout;
  out << "\nlaunch the fastest:\n  Megatron-LM: " << megatron_args(r.model, top)
      << "\n  torchtitan:  " << torchtitan_args(top, r.cluster.gpus_per_node) << "\n";
}

}  // namespace

void register_rank(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<RankOptions>();
  CLI::App* sub = app.add_subcommand("rank", "rank every layout that fits by predicted step time");
  opts->specs.add_to(*sub, true);
  sub->add_option("--gpus,--num-gpus,--world-size", opts->gpus, "number of GPUs N")->required();
  sub->add_option("--seq,--seq-length", opts->seq, "sequence length s in tokens")->required();
  sub->add_option("--gbs,--global-batch-size", opts->gbs, "global batch size in sequences")->required();
  sub->add_option("--top", opts->top, "how many of the fastest layouts to print")->capture_default_str();
  sub->add_option("--constraint", opts->constraints,
                  "restrict the search, repeatable: tp<=8, pp=1, mbs>=2, recompute=none, sharding=zero1 (any PaRO "
                  "strategy, also those the framework profile does not list), schedule=1f1b");
  sub->add_option("--lora-rank", opts->lora_rank, "LoRA adapters of rank r on frozen base weights (default: full training)");
  sub->add_option("--lora-targets", opts->lora_targets, "LoRA target projections: q,k,v,o,gate,up,down (default all)");
  sub->add_option("--profile", opts->profile, "performance coefficients JSON or a calibration profile (headroom calibrate); default data/perf/<framework>.json");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_rank(*opts, out); });
}

}  // namespace headroom::cli
