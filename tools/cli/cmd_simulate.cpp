// `headroom simulate`: the discrete-event simulator (simulator/). Two modes: one collective on a cluster
// (--collective), or one training step of a layout (--model ...), with an optional Chrome trace.
#include <cstdio>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/simulator/collectives.hpp"
#include "headroom/simulator/step.hpp"
#include "headroom/core/atomic_file.hpp"
#include "headroom/simulator/trace.hpp"

namespace headroom::cli {
namespace {

struct SimulateOptions {
  SpecOptions specs;
  LayoutOptions layout;
  std::string collective, algorithm = "ring", bytes, nodes = "1", nics, channels = "1", profile, trace;
  bool no_contention = false;
  bool json = false;
};

// What one simulation may build: every GPU and NIC is a vertex of the topology and a ring collective over n GPUs
// moves O(n²) transfers. Past these a run takes hours or exhausts memory. A step simulates only its groups'
// collectives, so it may span more GPUs than one ring; its tasks are bounded by simulate_step (kMaxStepTasks).
constexpr std::int64_t kMaxCollectiveGpus = 1024;
constexpr std::int64_t kMaxTopologyGpus = 65'536;

void check_simulated_size(const ClusterSpec& c, std::int64_t gpus, std::int64_t nics_per_node, std::int64_t max_gpus) {
  const std::string most = " (the simulator takes at most " + std::to_string(max_gpus) + ")";
  if (c.gpus_per_node > kMaxCollectiveGpus)
    throw Error("cluster " + c.name + " has " + std::to_string(c.gpus_per_node) +
                " GPUs per node (the simulator takes at most " + std::to_string(kMaxCollectiveGpus) + ")");
  if (gpus > max_gpus) throw Error(std::to_string(gpus) + " GPUs to simulate" + most);
  if (nics_per_node > kMaxCollectiveGpus)
    throw Error("--nics-per-node " + std::to_string(nics_per_node) + " (the simulator takes at most " +
                std::to_string(kMaxCollectiveGpus) + ")");
}

void run_collective(const SimulateOptions& o, std::ostream& out) {
  if (o.specs.cluster.empty()) throw Error("simulate --collective needs --cluster");
  if (o.bytes.empty()) throw Error("simulate --collective needs --bytes");
  const ClusterSpec c = o.specs.library().cluster(o.specs.cluster);
  sim::TopologyOptions t;
  t.nodes = parse_count("--nodes", o.nodes);
  if (!o.nics.empty()) t.nics_per_node = parse_count("--nics-per-node", o.nics);
  check_simulated_size(c, t.nodes > kMaxCollectiveGpus ? t.nodes : t.nodes * c.gpus_per_node, t.nics_per_node,
                       kMaxCollectiveGpus);
  const sim::Topology topo(c, t);
  const Collective op = sim::parse_collective(o.collective);
  const sim::Algorithm a = sim::parse_algorithm(o.algorithm);
  const double bytes = static_cast<double>(parse_count("--bytes", o.bytes));
  const std::int64_t channels = parse_count("--channels", o.channels);
  const sim::CollectiveResult r =
      sim::simulate_collective(topo, op, a, bytes, sim::EngineOptions{!o.no_contention}, channels);
  if (o.json) {
    print_json(out, nlohmann::json{{"collective", to_string(op)},
                                   {"algorithm", sim::to_string(a)},
                                   {"channels", channels},
                                   {"cluster", c.name},
                                   {"nodes", t.nodes},
                                   {"gpus", topo.gpus()},
                                   {"bytes", json_bytes(bytes)},
                                   {"time_s", r.time_s},
                                   {"algbw_GBps", r.algbw_bytes_per_s / 1e9},
                                   {"busbw_GBps", r.busbw_bytes_per_s / 1e9},
                                   {"transfers", r.transfers},
                                   {"events", r.events}});
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%s %s of %.0f bytes on %lld x %s (%lld GPUs, %lld NICs per node)\n",
                std::string(to_string(op)).c_str(), std::string(sim::to_string(a)).c_str(), bytes,
                static_cast<long long>(t.nodes), c.name.c_str(), static_cast<long long>(topo.gpus()),
                static_cast<long long>(topo.nics_per_node()));
  out << line;
  std::snprintf(line, sizeof line, "time_s %.6f  algbw %.2f GB/s  busbw %.2f GB/s  (%lld transfers, %lld events)\n",
                r.time_s, r.algbw_bytes_per_s / 1e9, r.busbw_bytes_per_s / 1e9, static_cast<long long>(r.transfers),
                static_cast<long long>(r.events));
  out << line;
}

void run_step(const SimulateOptions& o, std::ostream& out) {
  if (!o.layout.given(KnobId::seq)) throw Error("simulate --model needs --seq");
  const Plan r = resolve_plan(o.specs.request(o.profile));  // a calibration profile replaces its datasheet numbers
  const Layout l = o.layout.build(r);
  const PerfCoefficients& k = r.coefficients;
  if (!o.trace.empty()) (void)check_output_path(o.trace, "--trace");  // before the simulation, not after it
  sim::StepOptions so;
  so.engine.contention = !o.no_contention;
  if (!o.nics.empty()) so.nics_per_node = parse_count("--nics-per-node", o.nics);
  check_simulated_size(r.cluster, l.gpus(), so.nics_per_node, kMaxTopologyGpus);
  if (!o.trace.empty()) so.max_tasks = sim::kMaxTracedStepTasks;
  const sim::StepResult s = sim::simulate_step(r.model, r.cluster, l, k, so);
  const PerfEstimate a = estimate_perf(r.model, r.cluster, l, k);
  if (!o.trace.empty()) sim::write_chrome_trace(s, o.trace);
  if (o.json) {
    nlohmann::json stages = nlohmann::json::array();
    for (const auto& st : s.stages) {
      nlohmann::json mem = nlohmann::json::array();
      for (const auto& p : st.memory) mem.push_back({p.time_s, p.bytes / kGiB, p.microbatches});
      stages.push_back({{"stage", st.stage},
                        {"busy_s", st.busy_s},
                        {"idle_s", st.idle_s},
                        {"peak_activation_gib", st.peak_activation_bytes / kGiB},
                        {"peak_microbatches", st.peak_microbatches},
                        {"memory", {{"columns", {"time_s", "activation_gib", "microbatches"}}, {"points", mem}}}});
    }
    nlohmann::json doc = {{"model", r.model.name},
                          {"layout", layout_to_json(r.model, l)},
                          {"step_time_s", s.step_time_s},
                          {"bubble_s", s.bubble_s},
                          {"bubble_fraction", s.bubble_fraction},
                          {"analytical_step_time_s", a.step_time_s},
                          {"tasks", boost::num_vertices(s.graph)},
                          {"events", s.run.events},
                          {"trace", o.trace},
                          {"stages", stages},
                          {"memory", memory_verdict_json(r, l)}};
    add_cluster_json(doc, r.cluster);
    print_json(out, doc);
    return;
  }
  char line[256];
  out << "headroom simulate: " << r.model.name << " on " << l.gpus() << " x " << r.cluster.gpu.name << " ("
      << r.cluster.name << "), tp " << l.tp << " x cp " << l.cp << " x pp " << l.pp << stage_text(r.model, l)
      << " x dp " << l.dp << ", " << to_string(l.schedule) << (l.vpp > 1 ? " x" + std::to_string(l.vpp) : "") << ", "
      << l.microbatches() << " micro-batches\n";
  out << assumed_cluster_line(r.cluster);
  if (const std::string w = memory_warning(r, l); !w.empty()) out << w << "\n";
  std::snprintf(line, sizeof line,
                "step %.4f s simulated (analytical %.4f s, %+.1f%%); bubble %.4f s = %.3f of the busiest stage's work "
                "(1F1B theory (p-1)/m = %.3f)\n",
                s.step_time_s, a.step_time_s, 100.0 * (s.step_time_s / a.step_time_s - 1.0), s.bubble_s,
                s.bubble_fraction, static_cast<double>(l.pp - 1) / static_cast<double>(l.microbatches()));
  out << line;
  std::snprintf(line, sizeof line, "%6s %10s %10s %7s %14s %12s\n", "stage", "busy s", "idle s", "busy%",
                "peak act GiB", "peak in-flight");
  out << line;
  for (const auto& st : s.stages) {
    std::snprintf(line, sizeof line, "%6lld %10.4f %10.4f %6.1f%% %14.2f %12d\n", static_cast<long long>(st.stage),
                  st.busy_s, st.idle_s, 100.0 * st.busy_s / s.step_time_s, st.peak_activation_bytes / kGiB,
                  st.peak_microbatches);
    out << line;
  }
  out << boost::num_vertices(s.graph) << " tasks, " << s.run.events << " events";
  if (!o.trace.empty()) out << "; Chrome trace written to " << o.trace;
  out << "\n";
}

}  // namespace

// `validate`'s section: the simulator against the analytical model on a few layouts, with and without link
// sharing, so that the difference splits into schedule effects (no contention) and contention.
nlohmann::json simulator_agreement(const SpecLibrary& lib) {
  struct Case {
    const char* why;
    const char* model;
    const char* cluster;
    const char* framework;
    std::int64_t tp, pp, dp, micro, seq, nics, lora_rank;
  };
  const Case cases[] = {
      {"one node, no shared link", "llama3.1-8b", "dgx-a100-80gb", "megatron", 2, 4, 1, 32, 4096, 0, 0},
      {"1,024 GPUs, one NIC per GPU", "llama3.1-70b", "dgx-a100-80gb", "megatron", 8, 8, 16, 64, 8192, 0, 0},
      {"LUMI: 4 NICs for 8 GCDs (node source), PP sends of 2 GCDs share one", "llama3.1-8b", "lumi-mi250x", "megatron",
       8, 2, 4, 16, 4096, 4, 0},
      {"thesis: LoRA r=128, FSDP over 4 nodes, per-micro-batch gathers mostly exposed", "llama3.1-70b", "lumi-mi250x",
       "pytorch-fsdp", 1, 1, 32, 1, 10000, 0, 128},
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const Case& c : cases) {
    const ModelSpec m = lib.model(c.model);
    const ClusterSpec cl = lib.cluster(c.cluster);
    const PerfCoefficients k = default_perf_coefficients(lib, c.framework);
    Layout l = default_layout(lib.framework(c.framework));
    l.tp = c.tp, l.pp = c.pp, l.dp = c.dp, l.mbs = 1, l.gbs = c.micro * c.dp, l.seq = c.seq;
    l.lora.rank = c.lora_rank;
    sim::StepOptions so;
    so.nics_per_node = c.nics;
    const double a = estimate_perf(m, cl, l, k).step_time_s;
    const double shared = sim::simulate_step(m, cl, l, k, so).step_time_s;
    so.engine.contention = false;
    const double alone = sim::simulate_step(m, cl, l, k, so).step_time_s;
    rows.push_back({{"case", c.why},
                    {"model", c.model},
                    {"cluster", c.cluster},
                    {"framework", c.framework},
                    {"lora_rank", c.lora_rank},
                    {"tp", c.tp},
                    {"pp", c.pp},
                    {"dp", c.dp},
                    {"microbatches", c.micro},
                    {"analytical_s", a},
                    {"simulated_no_contention_s", alone},
                    {"simulated_s", shared},
                    {"schedule_diff", alone / a - 1.0},
                    {"contention_diff", shared / alone - 1.0}});
  }
  return rows;
}

void print_simulator_agreement(std::ostream& out, const nlohmann::json& rows) {
  out << "\nSimulator vs analytical step time (schedule diff: the simulated 1F1B timeline against slowest stage x m +"
         " (p-1) x mean stage; contention diff: max-min sharing of links against no sharing)\n";
  char line[320];
  std::snprintf(line, sizeof line, "%-14s %-15s %5s %12s %12s %12s %9s %10s  %s\n", "model", "cluster", "gpus",
                "analytical", "sim alone", "sim shared", "schedule", "contention", "case");
  out << line;
  for (const auto& r : rows) {
    const long long gpus = r["tp"].get<long long>() * r["pp"].get<long long>() * r["dp"].get<long long>();
    std::snprintf(line, sizeof line, "%-14s %-15s %5lld %11.3fs %11.3fs %11.3fs %+8.1f%% %+9.1f%%  %s\n",
                  r["model"].get<std::string>().c_str(), r["cluster"].get<std::string>().c_str(), gpus,
                  r["analytical_s"].get<double>(), r["simulated_no_contention_s"].get<double>(),
                  r["simulated_s"].get<double>(), 100 * r["schedule_diff"].get<double>(),
                  100 * r["contention_diff"].get<double>(), r["case"].get<std::string>().c_str());
    out << line;
  }
}

void register_simulate(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand("simulate", "discrete-event simulation of one collective or one training step");
  opts->specs.add_to(*sub, false);
  opts->layout.add_to(*sub, false);
  sub->add_option("--collective", opts->collective, "all-gather, reduce-scatter or all-reduce (collective mode)");
  sub->add_option("--algorithm", opts->algorithm, "ring, hring, horing or tree")->capture_default_str();
  sub->add_option("--bytes", opts->bytes, "collective size as nccl-tests counts it");
  sub->add_option("--nodes", opts->nodes, "nodes of the cluster (collective mode)")->capture_default_str();
  sub->add_option("--channels", opts->channels,
                  "concurrent rings for --algorithm ring, each crossing nodes through a different GPU and NIC "
                  "(NCCL's channels; 1 = PaRO's traditional Ring)")
      ->capture_default_str();
  sub->add_option("--nics-per-node", opts->nics, "NICs per node (default: one per GPU)");
  sub->add_option("--profile", opts->profile,
                  "performance coefficients JSON or a calibration profile (default data/perf/<framework>.json)");
  sub->add_option("--trace", opts->trace, "write a Chrome trace (Perfetto) of the step to this file");
  sub->add_flag("--no-contention", opts->no_contention, "every flow gets its narrowest link alone");
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, sub, &out] {
    if (!opts->collective.empty()) {
      refuse_given(*sub,
                   {"--model",
                    "--trace",
                    "--profile",
                    "--gpu",
                    "--framework",
                    "--seq",
                    "--tp",
                    "--cp",
                    "--pp",
                    "--vpp",
                    "--dp",
                    "--gpus",
                    "--mbs",
                    "--gbs",
                    "--recompute",
                    "--sharding",
                    "--schedule",
                    "--lora-rank",
                    "--lora-targets",
                    "--decoder-first-pipeline-num-layers",
                    "--decoder-last-pipeline-num-layers",
                    "--account-for-embedding-in-pipeline-split",
                    "--account-for-loss-in-pipeline-split"},
                   "with --collective (it simulates one collective; a training step takes --model)");
      if (sim::parse_algorithm(opts->algorithm) != sim::Algorithm::ring)
        refuse_given(*sub, {"--channels"},
                     "with --algorithm " + opts->algorithm + " (channels are rings of --algorithm ring)");
      run_collective(*opts, out);
    } else if (!opts->specs.model.empty()) {
      refuse_given(*sub, {"--algorithm", "--bytes", "--nodes", "--channels"},
                   "with --model (a step's collectives run NCCL's rings; those flags are for --collective)");
      run_step(*opts, out);
    } else
      throw Error("simulate needs --collective (one collective) or --model (one training step)");
  });
}

}  // namespace headroom::cli
