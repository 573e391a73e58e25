// The simulator: max-min sharing, determinism, HO-Ring against PaRO Sec. 4.4, the 1F1B bubble and the
// activation memory over time, agreement with the analytical model, the Chrome trace.
#include <algorithm>
#include <cmath>
#include <random>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/simulator/collectives.hpp"
#include "headroom/simulator/step.hpp"
#include "headroom/simulator/trace.hpp"
#include "../cli_support.hpp"
#include "../watchdog.hpp"

namespace headroom {
namespace {

constexpr double kGiBytes = 1024.0 * 1024.0 * 1024.0;

sim::CollectiveResult all_gather(const sim::Topology& t, sim::Algorithm a) {
  return sim::simulate_collective(t, Collective::all_gather, a, kGiBytes);
}

TEST(Engine, FlowsSharingALinkSplitItFairly) {
  const ClusterSpec c = test::library().cluster("dgx-a100-80gb");
  const sim::Topology topo(c, {2, 4, 1.0, 1.0});  // 4 NICs per node: GPUs 0 and 1 share NIC 0
  sim::TaskGraph g;
  sim::Task f;
  f.kind = sim::TaskKind::flow;
  f.bytes = 1e9;
  f.src_gpu = 0, f.dst_gpu = 8;
  (void)sim::add_task(g, f);
  f.src_gpu = 1, f.dst_gpu = 10;
  (void)sim::add_task(g, f);
  const sim::RunResult r = sim::run(g, topo);
  const double nic = 2 * 25e9;  // two GPUs' share of the node's NIC bandwidth
  EXPECT_NEAR(r.makespan_s, 5e-6 + 1e9 / (nic / 2), 1e-9);
  const sim::RunResult alone = sim::run(g, topo, {false});
  EXPECT_NEAR(alone.makespan_s, 5e-6 + 1e9 / nic, 1e-9);
}

TEST(Engine, RunsAreBitForBitReproducible) {
  const sim::Topology topo(test::library().cluster("dgx-a100-80gb"), {4, 0, 1.0, 1.0});
  const auto a = sim::simulate_collective(topo, Collective::all_reduce, sim::Algorithm::horing, 3e8);
  const auto b = sim::simulate_collective(topo, Collective::all_reduce, sim::Algorithm::horing, 3e8);
  EXPECT_EQ(a.time_s, b.time_s);
  EXPECT_EQ(a.events, b.events);
}

// A collective of no more bytes than GPUs moves chunks of a byte or less, which finish in less time than the clock
// resolves at their start: each finishes instead of ticking at the same instant forever.
TEST(Engine, CollectivesOfAFewBytesFinish) {
  const ClusterSpec c = test::library().cluster("dgx-h100");
  const std::vector<double> times = test::within(60, "collectives of 1 to 16 bytes", [&c] {
    std::vector<double> out;
    for (const std::int64_t nodes : {1, 2, 4}) {
      const sim::Topology topo(c, {nodes, 0, 1.0, 1.0});
      for (const Collective op : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce})
        for (const double bytes : {1.0, 8.0, 16.0})
          for (const std::int64_t channels : {1, 2})
            out.push_back(
                sim::simulate_collective(topo, op, sim::Algorithm::ring, bytes, sim::EngineOptions{}, channels).time_s);
      for (const sim::Algorithm a : {sim::Algorithm::hring, sim::Algorithm::horing, sim::Algorithm::tree})
        out.push_back(sim::simulate_collective(topo, Collective::all_reduce, a, 1.0).time_s);
    }
    return out;
  });
  for (const double t : times) EXPECT_GT(t, 0.0);
  const test::CliResult r = test::within(60, "simulate --collective all-gather --bytes 1", [] {
    return test::run_cli({"simulate", "--collective", "all-gather", "--bytes", "1", "--cluster", "dgx-h100"});
  });
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST(Collectives, RingMatchesTheAlphaBetaFormula) {
  const ClusterSpec c = test::library().cluster("dgx-a100-80gb");
  const sim::Topology topo(c, {1, 0, 1.0, 1.0});
  const auto r = sim::simulate_collective(topo, Collective::all_gather, sim::Algorithm::ring, 8e8);
  // Written out here, not the estimator's ring_gather_seconds: 7 steps, each a chunk of 1e8 B over a 300 GB/s
  // NVLink after its 3 µs latency (Patarasuk & Yuan 2009).
  EXPECT_NEAR(r.time_s, 7 * (3e-6 + 1e8 / 300e9), 1e-9);
  EXPECT_NEAR(r.busbw_bytes_per_s, 8e8 / r.time_s * 7.0 / 8.0, 1.0);
}

// PaRO Sec. 4.4: 1 GB all-gather on 16 DGX A100 nodes: Ring 288 ms, H-Ring 183 ms, HO-Ring 162 ms.
TEST(Collectives, HoRingAgainstPaRO) {
  const ClusterSpec c = test::library().cluster("dgx-a100-80gb");
  // Datasheet links: NVSwitch 300 GB/s per GPU and direction, one HDR 200 Gb/s (25 GB/s) NIC per GPU.
  const sim::Topology datasheet(c, {16, 0, 1.0, 1.0});
  const double ring = all_gather(datasheet, sim::Algorithm::ring).time_s;
  const double h = all_gather(datasheet, sim::Algorithm::hring).time_s;
  const double ho = all_gather(datasheet, sim::Algorithm::horing).time_s;
  EXPECT_GT(ring, h);
  EXPECT_GT(h, ho);
  EXPECT_NEAR((ho / h) / (162.0 / 183.0), 1.0, 0.15);
  // The flat ring is bound by one 25 GB/s NIC hop, the hierarchical ones by 8 NICs per node: on datasheet
  // links H-Ring is ~5x faster than Ring, where PaRO measured 1.57x (recorded so that drift shows).
  EXPECT_NEAR(ring, 127.0 * (kGiBytes / 128.0) / 25e9, 1e-3);
  EXPECT_NEAR(h / ring, 0.19, 0.01);
  // PaRO's three times imply intra-node transfers only ~1.6-2.1x faster per GPU than inter-node ones; with
  // 45 GB/s inside the node (0.15 of NVSwitch) all three ratios are within 15%.
  const sim::Topology slow_intra(c, {16, 0, 0.15, 1.0});
  const double r2 = all_gather(slow_intra, sim::Algorithm::ring).time_s;
  const double h2 = all_gather(slow_intra, sim::Algorithm::hring).time_s;
  const double ho2 = all_gather(slow_intra, sim::Algorithm::horing).time_s;
  EXPECT_NEAR((h2 / r2) / (183.0 / 288.0), 1.0, 0.15);
  EXPECT_NEAR((ho2 / r2) / (162.0 / 288.0), 1.0, 0.15);
  EXPECT_NEAR((ho2 / h2) / (162.0 / 183.0), 1.0, 0.15);
}

// NCCL's rings (one channel per GPU of a node, each crossing nodes through a different NIC) against PaRO's
// single traditional Ring: the node's 8 NICs instead of one, so ~8x faster, and bound by 8 x 25 GB/s per node.
TEST(Collectives, RingChannelsUseEveryNicOfTheNode) {
  const sim::Topology topo(test::library().cluster("dgx-a100-80gb"), {16, 0, 1.0, 1.0});
  const auto one =
      sim::simulate_collective(topo, Collective::all_gather, sim::Algorithm::ring, kGiBytes, sim::EngineOptions{}, 1);
  const auto eight =
      sim::simulate_collective(topo, Collective::all_gather, sim::Algorithm::ring, kGiBytes, sim::EngineOptions{}, 8);
  const double nic_bound = 127.0 * (kGiBytes / 128.0) / (8 * 25e9);
  const double latency = 127.0 * 5e-6;  // one IB hop per step
  EXPECT_NEAR(eight.time_s / (nic_bound + latency), 1.0, 0.02);
  EXPECT_GT(one.time_s / eight.time_s, 6.0);
  // On datasheet links NCCL's rings beat both hierarchical rings for an all-gather.
  EXPECT_LT(eight.time_s, all_gather(topo, sim::Algorithm::horing).time_s);
  EXPECT_THROW((void)sim::simulate_collective(topo, Collective::all_gather, sim::Algorithm::ring, kGiBytes,
                                              sim::EngineOptions{}, 9),
               Error);
}

// HO-Ring overlaps H-Ring's inter phase with the first intra ring only, which carries 1/g of the intra
// volume: whatever the link speeds, HO/H >= 1 - 1/g (0.9375 at g = 16, where PaRO measured 0.885).
TEST(Collectives, HoRingSavesAtMostOneGthOfHRing) {
  const ClusterSpec c = test::library().cluster("dgx-a100-80gb");
  for (const double intra : {0.02, 0.05, 0.15, 0.5, 1.0})
    for (const double inter : {0.25, 1.0}) {
      const sim::Topology topo(c, {16, 0, intra, inter});
      const double h = all_gather(topo, sim::Algorithm::hring).time_s;
      const double ho = all_gather(topo, sim::Algorithm::horing).time_s;
      EXPECT_GE(ho / h, 1.0 - 1.0 / 16.0 - 1e-9) << intra << " " << inter;
      EXPECT_LE(ho, h) << intra << " " << inter;
    }
}

// Groups whose GPUs reach the network through one NIC share it: two 2-GPU rings across 2 LUMI nodes on 4 NICs
// of 25 GB/s (two GCDs each) take as long together as one alone on 8 NICs of 12.5 GB/s, twice one alone on 4.
TEST(Collectives, GroupsSharingANicShareItsBandwidth) {
  const ClusterSpec c = test::library().cluster("lumi-mi250x");
  const sim::Topology four(c, {2, 4, 1.0, 1.0}), eight(c, {2, 8, 1.0, 1.0});
  const std::vector<std::int64_t> a{0, 8}, b{1, 9};
  EXPECT_EQ(four.nic_of(0), four.nic_of(1));
  EXPECT_NE(eight.nic_of(0), eight.nic_of(1));
  const double bytes = 1e9;
  const double alone4 =
      sim::simulate_collective(four, Collective::all_gather, sim::Algorithm::ring, bytes, a, 1).time_s;
  const double both4 =
      sim::simulate_concurrent_collectives(four, Collective::all_gather, sim::Algorithm::ring, bytes, {a, b}, 1).time_s;
  const double both8 =
      sim::simulate_concurrent_collectives(eight, Collective::all_gather, sim::Algorithm::ring, bytes, {a, b}, 1)
          .time_s;
  const double alone8 =
      sim::simulate_collective(eight, Collective::all_gather, sim::Algorithm::ring, bytes, a, 1).time_s;
  EXPECT_NEAR(both4 / alone4, 2.0, 0.02);
  EXPECT_NEAR(both4 / both8, 1.0, 0.01);
  EXPECT_NEAR(both8 / alone8, 1.0, 1e-9);
  EXPECT_THROW(
      (void)sim::simulate_concurrent_collectives(four, Collective::all_gather, sim::Algorithm::ring, bytes, {}, 1),
      Error);
}

TEST(Collectives, RefusesWhatItDoesNotModel) {
  const sim::Topology topo(test::library().cluster("dgx-a100-80gb"), {2, 0, 1.0, 1.0});
  EXPECT_THROW((void)sim::simulate_collective(topo, Collective::all_gather, sim::Algorithm::tree, 1e6), Error);
  EXPECT_THROW((void)sim::parse_algorithm("butterfly"), Error);
  EXPECT_THROW(sim::Topology(test::library().cluster("dgx-a100-80gb"), {2, 3, 1.0, 1.0}), Error);
}

struct StepCase {
  ModelSpec model;
  ClusterSpec cluster;
  Layout layout;
  PerfCoefficients coef;
};

StepCase step_case(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t micro,
                   Schedule s = Schedule::one_f_one_b, std::int64_t vpp = 1) {
  const SpecLibrary lib = test::library();
  StepCase c{lib.model("llama3.1-8b"), lib.cluster("dgx-a100-80gb"), default_layout(lib.framework("megatron")),
             default_perf_coefficients(lib, "megatron")};
  c.layout.tp = tp;
  c.layout.pp = pp;
  c.layout.dp = dp;
  c.layout.vpp = vpp;
  c.layout.schedule = s;
  c.layout.mbs = 1;
  c.layout.gbs = micro * dp;
  c.layout.seq = 4096;
  return c;
}

sim::StepResult simulate(const StepCase& c, bool contention = true) {
  sim::StepOptions o;
  o.engine.contention = contention;
  return sim::simulate_step(c.model, c.cluster, c.layout, c.coef, o);
}

// `framework`'s default layout with t, c, d, sequence length `seq`, micro-batch 1 and global batch `gbs`.
Layout framework_layout(const SpecLibrary& lib, const char* framework, std::int64_t tp, std::int64_t cp,
                        std::int64_t dp, std::int64_t seq, std::int64_t gbs) {
  Layout l = default_layout(lib.framework(framework));
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.seq = seq;
  l.mbs = 1;
  l.gbs = gbs;
  return l;
}

double simulated_without_contention(const ModelSpec& m, const ClusterSpec& c, const Layout& l,
                                    const PerfCoefficients& k) {
  sim::StepOptions o;
  o.engine.contention = false;
  return sim::simulate_step(m, c, l, k, o).step_time_s;
}

TEST(Step, OneFOneBBubbleIsPMinusOneOverM) {
  for (const std::int64_t m : {8, 32}) {
    const StepCase c = step_case(2, 4, 1, m);
    const sim::StepResult r = simulate(c);
    EXPECT_NEAR(r.bubble_fraction, 3.0 / static_cast<double>(m), 0.25 * 3.0 / static_cast<double>(m)) << m;
  }
  const sim::StepResult inter = simulate(step_case(2, 4, 1, 8, Schedule::interleaved, 2));
  const sim::StepResult plain = simulate(step_case(2, 4, 1, 8));
  EXPECT_LT(inter.bubble_s, 0.7 * plain.bubble_s);
}

TEST(Step, FirstStageHoldsPMicrobatchesUnder1F1B) {
  const std::int64_t p = 4, m = 16;
  const sim::StepResult r = simulate(step_case(2, p, 1, m));
  for (std::int64_t s = 0; s < p; ++s) EXPECT_EQ(r.stages[static_cast<std::size_t>(s)].peak_microbatches, p - s) << s;
  EXPECT_GT(r.stages[0].peak_activation_bytes, r.stages[1].peak_activation_bytes);
  // Rises to p, then stays there in the steady state, and falls back to 0 at the end.
  const auto& mem = r.stages[0].memory;
  EXPECT_EQ(mem.back().microbatches, 0);
  const sim::StepResult gpipe = simulate(step_case(2, p, 1, m, Schedule::gpipe));
  EXPECT_EQ(gpipe.stages[0].peak_microbatches, m);
}

// torch's ScheduleLoopedBFS runs every forward of a rank's chunks before its first backward: the first stage holds
// all m micro-batches of all its layers, as GPipe, and the fill and drain are the interleaved 1F1B's (p − 1)/(v·m);
// the analytical model prices both.
TEST(Step, LoopedBreadthFirstHoldsGPipesMemoryAtTheInterleavedBubble) {
  const std::int64_t p = 4, m = 8;
  const StepCase bfs_case = step_case(2, p, 1, m, Schedule::looped_bfs, 2);
  validate_layout(bfs_case.model, bfs_case.layout);
  const sim::StepResult bfs = simulate(bfs_case, false);
  const sim::StepResult gpipe = simulate(step_case(2, p, 1, m, Schedule::gpipe), false);
  const sim::StepResult inter = simulate(step_case(2, p, 1, m, Schedule::interleaved, 2), false);
  EXPECT_NEAR(bfs.stages[0].peak_activation_bytes / gpipe.stages[0].peak_activation_bytes, 1.0, 0.01);
  EXPECT_GT(bfs.stages[0].peak_activation_bytes, 1.3 * inter.stages[0].peak_activation_bytes);  // 8·8 vs 44 layers
  EXPECT_NEAR(bfs.bubble_s / inter.bubble_s, 1.0, 0.1);
  EXPECT_LT(bfs.bubble_s, 0.7 * gpipe.bubble_s);
  const double analytical = estimate_perf(bfs_case.model, bfs_case.cluster, bfs_case.layout, bfs_case.coef).step_time_s;
  EXPECT_NEAR(bfs.step_time_s / analytical, 1.0, 0.05);
}

TEST(Step, AgreesWithTheAnalyticalModelWithoutContention) {
  for (const auto& c : {step_case(4, 1, 2, 16), step_case(2, 4, 1, 32), step_case(8, 2, 2, 16)}) {
    const sim::StepResult r = simulate(c, false);
    const double a = estimate_perf(c.model, c.cluster, c.layout, c.coef).step_time_s;
    EXPECT_NEAR(r.step_time_s / a, 1.0, 0.05) << c.layout.tp << " " << c.layout.pp << " " << c.layout.dp;
  }
}

// Uneven stages (Megatron-LM's --decoder-first/last-pipeline-num-layers) and the embedding/loss
// counted as layers, where the first chunk of the first stage builds no decoder layer: the simulator runs each
// stage's own layers and agrees with the analytical model as for even splits.
TEST(Step, UnevenStagesAgreeWithTheAnalyticalModel) {
  StepCase lighter_ends = step_case(2, 4, 1, 16);
  lighter_ends.layout.split.first_stage_layers = lighter_ends.layout.split.last_stage_layers = 6;  // 6 + 2×10 + 6
  StepCase heavier_last = step_case(2, 4, 1, 16);
  heavier_last.layout.split.first_stage_layers = 5;                      // 5 + 3×9
  StepCase counted = step_case(2, 2, 1, 16, Schedule::interleaved, 17);  // (32 + 2)/2 = 17 a stage, 1 a chunk
  counted.layout.split.embedding_in_split = counted.layout.split.loss_in_split = true;
  for (const StepCase& c : {lighter_ends, heavier_last, counted}) {
    validate_layout(c.model, c.layout);
    const sim::StepResult r = simulate(c, false);
    const double a = estimate_perf(c.model, c.cluster, c.layout, c.coef).step_time_s;
    EXPECT_NEAR(r.step_time_s / a, 1.0, 0.05) << c.layout.split.first_stage_layers << " " << c.layout.vpp;
  }
  // The stage with more layers holds more activations at its peak.
  const sim::StepResult r = simulate(lighter_ends);
  EXPECT_GT(r.stages[1].peak_activation_bytes / 10.0, r.stages[0].peak_activation_bytes / 6.0 * 0.5);
}

// On layouts drawn at random (seeded; both Llama models, the three cluster kinds, Megatron with
// its own, ZeRO-3 and HSDP sharding, PyTorch FSDP; 1F1B, interleaved and GPipe; 1 to 32 micro-batches; every
// recompute mode), the simulated step and the analytical one agree within 5% on at least 95% and within 15% on all.
// tools/scripts/sim_vs_model_sweep.py runs the same on thousands of layouts through the CLI.
TEST(Step, AgreesWithTheAnalyticalModelOnRandomLayouts) {
  const SpecLibrary lib = test::library();
  std::mt19937 rng(20261124);
  const auto pick = [&rng](std::initializer_list<std::int64_t> xs) {
    return *(xs.begin() + std::uniform_int_distribution<std::size_t>(0, xs.size() - 1)(rng));
  };
  int ran = 0, within = 0;
  double worst = 1.0;
  std::string worst_case;
  while (ran < 60) {
    const ModelSpec m = lib.model(pick({0, 1}) == 0 ? "llama3.1-8b" : "llama3.1-70b");
    const char* clusters[] = {"dgx-a100-80gb", "h100-94gb-x4", "lumi-mi250x"};
    const ClusterSpec c = lib.cluster(clusters[pick({0, 1, 2})]);
    const bool fsdp = pick({0, 1, 2, 3}) == 0;
    const FrameworkProfile f = lib.framework(fsdp ? "pytorch-fsdp" : "megatron");
    Layout l = default_layout(f);
    if (!fsdp) {
      const std::int64_t sharding = pick({0, 1, 2});
      if (sharding == 1) l.sharding = parse_sharding("zero3");
      if (sharding == 2) l.sharding = parse_sharding("hsdp");
    }
    l.tp = pick({1, 2, 4, 8}), l.cp = pick({1, 2, 4}), l.pp = pick({1, 2, 4}), l.dp = pick({1, 2, 4});
    l.seq = 8192, l.mbs = 1, l.gbs = pick({1, 2, 4, 8, 32}) * l.dp;
    l.recompute = static_cast<Recompute>(pick({0, 1, 2}));
    const std::int64_t v = pick({1, 2, 4, 0});
    if (v == 0) l.schedule = Schedule::gpipe;
    if (v > 1) l.vpp = v, l.schedule = Schedule::interleaved;
    try {
      validate_layout(m, l);
    } catch (const Error&) {
      continue;  // heads, layers, the interleaving rule
    }
    if (l.pp == 1 && l.schedule != Schedule::one_f_one_b) continue;
    const PerfCoefficients k = default_perf_coefficients(lib, f.name);
    sim::StepOptions o;
    const double ratio = sim::simulate_step(m, c, l, k, o).step_time_s / estimate_perf(m, c, l, k).step_time_s;
    ++ran;
    within += std::abs(ratio - 1.0) <= 0.05 ? 1 : 0;
    if (std::max(ratio, 1.0 / ratio) > worst) {
      worst = std::max(ratio, 1.0 / ratio);
      worst_case = m.name + " " + c.name + " " + f.name + " " + sharding_code(l.sharding) + " t" +
                   std::to_string(l.tp) + " c" + std::to_string(l.cp) + " p" + std::to_string(l.pp) + " d" +
                   std::to_string(l.dp) + " v" + std::to_string(l.vpp) + " " + std::string(to_string(l.schedule)) +
                   " m" + std::to_string(l.microbatches()) + " " + std::string(to_string(l.recompute)) + ": " +
                   std::to_string(ratio);
    }
  }
  EXPECT_GE(within, 57) << "of 60";
  EXPECT_LE(worst, 1.15) << worst_case;
}

// A ring is symmetric, so the step simulator runs one longer than 4 nodes as its first 4 nodes with the
// whole ring's chunk and scales the time by the step counts. Against the whole ring, transfer by transfer:
TEST(Collectives, ALongRingIsItsFirstNodesScaledByTheSteps) {
  const ClusterSpec c = test::library().cluster("dgx-h100");
  const sim::Topology topo(c, sim::TopologyOptions{16, 0, 0.95, 0.95});
  std::vector<std::int64_t> all(128), first(32);
  for (std::int64_t i = 0; i < 128; ++i) all[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = 0; i < 32; ++i) first[static_cast<std::size_t>(i)] = i;
  for (const Collective op : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce}) {
    const double bytes = 4e9;
    const double whole =
        sim::simulate_concurrent_collectives(topo, op, sim::Algorithm::ring, bytes, {all}, 8, {}, 8, true).time_s;
    const double part =
        sim::simulate_concurrent_collectives(topo, op, sim::Algorithm::ring, bytes * 32 / 128, {first}, 8, {}, 8, true)
            .time_s;
    EXPECT_NEAR(part * 127.0 / 31.0 / whole, 1.0, 0.02) << to_string(op);
  }
}

// 405B on 16,384 H100s with ZeRO-3 over a DP ring of 2,048 GPUs (refused before: rings of at most 1,024): under
// a second, and the analytical step within 5%.
TEST(Step, SimulatesLlama405bOn16384Gpus) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-405b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  Layout l = framework_layout(lib, "megatron", 8, 1, 2048, 8192, 2048);
  l.sharding = parse_sharding("zero3");
  l.recompute = Recompute::full;
  validate_layout(m, l);
  ASSERT_EQ(l.gpus(), 16384);
  const sim::StepResult r = sim::simulate_step(m, c, l, k, {});
  EXPECT_NEAR(r.step_time_s / estimate_perf(m, c, l, k).step_time_s, 1.0, 0.05);
}

// The step's work is bounded from the layout before anything is built: step_task_bound is at least the tasks the graph
// gets (and within twice them), and a layout past StepOptions::max_tasks is refused at once, naming the global batch.
TEST(Step, WorkPastTheBoundIsRefusedBeforeBuilding) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  const auto layout = [&lib](const char* framework, std::int64_t tp, std::int64_t cp, std::int64_t pp, std::int64_t vpp,
                             std::int64_t dp, std::int64_t micro) {
    Layout l = framework_layout(lib, framework, tp, cp, dp, 4096, micro * dp);
    l.pp = pp;
    l.vpp = vpp;
    if (vpp > 1) l.schedule = Schedule::interleaved;
    return l;
  };
  for (const Layout& l : {layout("megatron", 1, 1, 1, 1, 8, 4), layout("megatron", 2, 1, 2, 1, 4, 8),
                          layout("megatron", 2, 2, 4, 2, 1, 8), layout("pytorch-fsdp", 1, 1, 1, 1, 8, 3)}) {
    const auto tasks = static_cast<double>(boost::num_vertices(sim::simulate_step(m, c, l, k, {}).graph));
    const double bound = sim::step_task_bound(m, l);
    EXPECT_GE(bound, tasks) << l.tp << " " << l.cp << " " << l.pp << " " << l.vpp << " " << l.dp;
    EXPECT_LE(bound, 2.0 * tasks) << l.tp << " " << l.cp << " " << l.pp << " " << l.vpp << " " << l.dp;
  }
  // tp 2, pp 2, dp 4 with 8 micro-batches: about 1,300 tasks, past a bound of 1,000.
  sim::StepOptions small;
  small.max_tasks = 1000;
  const Layout l = layout("megatron", 2, 1, 2, 1, 4, 8);
  const std::string message = test::within(30, "a step past its task bound", [&] {
    try {
      (void)sim::simulate_step(m, c, l, k, small);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(simulated)");
  });
  EXPECT_NE(message.find("simulate: --gbs 32 makes 8 micro-batches a pipeline (pp·vpp = 2): a step of up to"),
            std::string::npos)
      << message;
}

// Context parallelism across nodes: ring attention's P2P steps cross each node boundary through one NIC at the
// coefficients' cp_inter_efficiency, as the analytical model has them (an NCCL-style 8-channel all-gather at
// inter_efficiency made the simulated step 34% faster on 16 LUMI nodes). The clusters are the 4D paper's, whose fitted
// CP efficiency and overlap (`clusters` entries) leave the ring exposed; elsewhere it hides behind the attention.
TEST(Step, ContextParallelRingAcrossNodesAgreesWithTheAnalyticalModel) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  for (const char* cluster : {"h100-94gb-x4", "dgx-a100-40gb"})
    for (const std::int64_t tp : {1, 2}) {
      const ClusterSpec c = lib.cluster(cluster);
      const Layout l = framework_layout(lib, "megatron", tp, 16, 1, 131072, 1);  // c = 16: 2 or 4 nodes
      const double r = simulated_without_contention(m, c, l, k);
      const PerfEstimate a = estimate_perf(m, c, l, k);
      EXPECT_GT(a.breakdown.cp_comm_s, 0.1 * a.step_time_s) << cluster << " " << tp;  // the CP ring is exposed
      EXPECT_NEAR(r / a.step_time_s, 1.0, 0.05) << cluster << " " << tp;
    }
}

// TP across nodes (t = 8 on the 4-GPU H100 nodes): both models cross the nodes through all four NICs, and both
// add a ring step's intra- and inter-node parts (the simulated channels send one after the other;
// with the sends at once the simulator is 6.2% faster; with one NIC's rate in the analytical model, 54% faster).
TEST(Step, TensorParallelAcrossNodesAgreesWithTheAnalyticalModel) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-70b");
  const ClusterSpec c = lib.cluster("h100-94gb-x4");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  const Layout l = framework_layout(lib, "megatron", 8, 1, 1, 8192, 1);
  const double r = simulated_without_contention(m, c, l, k);
  const PerfEstimate a = estimate_perf(m, c, l, k);
  EXPECT_GT(a.breakdown.tp_comm_s, 0.2 * a.step_time_s);
  EXPECT_NEAR(r / a.step_time_s, 1.0, 0.05);
}

// LoRA under FSDP with per-micro-batch parameter gathers and gradient reduce-scatters (the thesis's setting,
// pytorch-fsdp coefficients, which leave most of that traffic exposed), across 1-4 nodes.
TEST(Step, AgreesWithTheAnalyticalModelUnderFsdpAndLora) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-70b");
  const ClusterSpec c = lib.cluster("lumi-mi250x");
  const PerfCoefficients k = default_perf_coefficients(lib, "pytorch-fsdp");
  for (const auto& [tp, gpus] : {std::pair<std::int64_t, std::int64_t>{8, 16}, {4, 16}, {2, 32}, {1, 32}, {1, 8}}) {
    Layout l = framework_layout(lib, "pytorch-fsdp", tp, 1, gpus / tp, 10000, gpus / tp);
    l.lora.rank = 128;
    const double r = simulated_without_contention(m, c, l, k);
    const double a = estimate_perf(m, c, l, k).step_time_s;
    EXPECT_NEAR(r / a, 1.0, 0.05) << tp << " " << gpus;
    EXPECT_GT(r, 0.0);
  }
}

// The node's network bandwidth is the cluster file's per-GPU figure times its GPUs however many NICs carry it:
// with the other TP rank's FSDP groups sharing the NICs, a step on 1, 2 or 4 NICs per node takes as long as on
// 8. The step is bound by the per-micro-batch gathers (busy under half of it), so a NIC given to one group
// alone shows: simulated that way, 1-4 NICs gave 14.2 s against 24.5 s.
TEST(Step, FewerSharedNicsLeaveTheStepTimeUnchanged) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("lumi-mi250x");
  const PerfCoefficients k = default_perf_coefficients(lib, "pytorch-fsdp");
  // t = 2, d = 16: 32 GCDs on 4 nodes, each DP group with 4 members per node.
  const Layout l = framework_layout(lib, "pytorch-fsdp", 2, 1, 16, 4096, 32);
  const auto step = [&](std::int64_t nics) {
    sim::StepOptions o;
    o.nics_per_node = nics;
    return sim::simulate_step(m, c, l, k, o);
  };
  const sim::StepResult eight = step(8);
  EXPECT_LT(eight.stages[0].busy_s, 0.5 * eight.step_time_s);
  for (const std::int64_t nics : {1, 2, 4}) EXPECT_NEAR(step(nics).step_time_s / eight.step_time_s, 1.0, 0.02) << nics;
}

TEST(Step, ChromeTraceOf16GpusIsValid) {
  const StepCase c = step_case(4, 4, 1, 8);  // 16 GPUs on 2 nodes
  const sim::StepResult r = simulate(c);
  const auto path = std::filesystem::temp_directory_path() / "headroom_sim_trace_test.json";
  sim::write_chrome_trace(r, path);
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
  std::ifstream f(path);
  const auto j = nlohmann::json::parse(f);
  ASSERT_TRUE(j.at("traceEvents").is_array());
  int complete = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.at("name").is_string());
    ASSERT_TRUE(e.at("pid").is_number_integer());
    ASSERT_TRUE(e.at("tid").is_number_integer());
    const std::string ph = e.at("ph");
    ASSERT_TRUE(ph == "X" || ph == "C" || ph == "M") << ph;
    if (ph == "X") {
      ++complete;
      EXPECT_GE(e.at("dur").get<double>(), 0.0);
      EXPECT_GE(e.at("ts").get<double>(), 0.0);
      EXPECT_LE(e.at("ts").get<double>() + e.at("dur").get<double>(), r.step_time_s * 1e6 + 1e-3);
    }
    if (ph == "C") ++counters;
  }
  EXPECT_GT(complete, 4 * 8 * 2);
  EXPECT_GT(counters, 4 * 8);
  std::filesystem::remove(path);
}

TEST(Cli, SimulateCollectiveJson) {
  std::ostringstream out, err;
  const int code = cli::run({"simulate", "--collective", "all-gather", "--algorithm", "horing", "--bytes", "1073741824",
                             "--cluster", "dgx-a100-80gb", "--nodes", "2", "--json"},
                            out, err);
  ASSERT_EQ(code, 0) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_GT(j.at("time_s").get<double>(), 0.0);
  EXPECT_NEAR(j.at("busbw_GBps").get<double>(), j.at("algbw_GBps").get<double>() * 15.0 / 16.0, 1e-9);
  std::ostringstream o2, e2;
  EXPECT_EQ(cli::run({"simulate", "--collective", "all-gather", "--algorithm", "nope", "--bytes", "100", "--cluster",
                      "dgx-a100-80gb"},
                     o2, e2),
            2);
}

}  // namespace
}  // namespace headroom
