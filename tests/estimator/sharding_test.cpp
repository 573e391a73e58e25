// The sharding model (sharding.hpp): names, principles, memory, collectives and stage rules; then the CLI
// that exposes it (`headroom comm`, `estimate --sharding`).
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {
namespace {

constexpr Shard N = Shard::none;
constexpr Shard I = Shard::intra;
constexpr Shard G = Shard::global;

CommSetup setup(std::int64_t n, std::int64_t m, std::int64_t s, double psi = 1e9, double trainable = 0) {
  CommSetup c;
  c.params = psi;
  c.trainable = trainable > 0 ? trainable : psi;
  c.gpus = n;
  c.group_size = m;
  c.accum = s;
  return c;
}

// ---- names ----

TEST(ShardingNames, AliasesMapToTheirTriples) {
  const std::pair<const char*, const char*> cases[] = {
      {"ddp", "NNN"},    {"zero1", "NNG"},    {"ZeRO-2", "NGG"},   {"zero_3", "GGG"},
      {"FSDP", "GGG"},   {"mics", "III"},     {"HSDP", "III"},     {"fsdp-hs", "III"},
      {"zero++", "GGG"}, {"paro-igg", "IGG"}, {"PaRO-IIG", "IIG"}, {"paro-nig", "NIG"},
      {"nig", "NIG"},    {"GNI", "GNI"},      {"rtp", "GGG"},      {"rtp-inplace", "GGG"}};
  for (const auto& [name, code] : cases) EXPECT_EQ(sharding_code(parse_strategy(name).sharding), code) << name;
  // The per-stage memory model has no place for ZeRO++'s secondary copy or RTP's buffer: refused there.
  for (const char* name : {"zero++", "rtp", "rtp-inplace"}) EXPECT_THROW((void)parse_sharding(name), Error) << name;
  EXPECT_EQ(sharding_code(parse_sharding("paro-igg")), "IGG");
  EXPECT_TRUE(parse_strategy("zero++").secondary_param_copy);
  EXPECT_FALSE(parse_strategy("zero3").secondary_param_copy);
  EXPECT_EQ(parse_strategy("rtp").rotation, Rotation::out_of_place);
  EXPECT_EQ(parse_strategy("rtp-in-place").rotation, Rotation::in_place);
  EXPECT_EQ(parse_strategy("zero3").collectives, Collectives::ring);
  EXPECT_EQ(parse_strategy("mics").collectives, Collectives::ring);
  EXPECT_EQ(parse_strategy("paro-ggg").collectives, Collectives::hierarchical);
  EXPECT_EQ(parse_strategy("iig").name, "PaRO-IIG");
  EXPECT_EQ(parse_strategy("GNI").name, "GNI");  // outside the PaRO set
}

TEST(ShardingNames, UnknownNamesThrowAnErrorListingTheValidOnes) {
  for (const char* bad : {"", "zero4", "NNX", "NNNN", "paro-", "paro-gni", "megatron"}) {
    try {
      (void)parse_strategy(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(bad), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  EXPECT_THROW((void)parse_sharding("zero4"), Error);
}

// ---- principles ----

TEST(ShardingPrinciples, AllTwentySevenTriplesAreRepresentableAndFourteenSatisfyPrinciple1) {
  const auto all = all_shardings();
  std::set<std::string> codes;
  int p1 = 0;
  for (const StateSharding& s : all) {
    codes.insert(sharding_code(s));
    EXPECT_EQ(sharding_code(parse_sharding(sharding_code(s))), sharding_code(s));
    if (satisfies_principle1(s)) {
      ++p1;
      ASSERT_NE(table1_row(s), nullptr) << sharding_code(s);
    } else {
      EXPECT_EQ(table1_row(s), nullptr) << sharding_code(s);
    }
  }
  EXPECT_EQ(codes.size(), 27u);
  EXPECT_EQ(p1, 14);
  for (const Table1Row& row : paro_table1()) EXPECT_TRUE(satisfies_principle1(row.sharding));
}

TEST(ShardingPrinciples, Principle2And3) {
  int p2 = 0, p3 = 0;
  for (const Table1Row& row : paro_table1()) {
    p2 += satisfies_principle2(row.sharding);
    p3 += satisfies_principle3(row.sharding);
  }
  EXPECT_EQ(p2, 10);  // NNN NNI NNG NII NIG NGG III IIG IGG GGG
  EXPECT_EQ(p3, 6);   // NNN NNI NNG INI ING GNG
  EXPECT_FALSE(satisfies_principle2({I, N, G}));
  EXPECT_TRUE(satisfies_principle2({I, G, G}));
}

TEST(ShardingPrinciples, RegimeFollowsTheTrainableFraction) {
  EXPECT_EQ(trainable_regime(1.0), TrainableRegime::full);
  EXPECT_EQ(trainable_regime(0.5), TrainableRegime::at_least_sixth);
  EXPECT_EQ(trainable_regime(1.0 / 6.0), TrainableRegime::at_least_sixth);
  EXPECT_EQ(trainable_regime(0.1), TrainableRegime::below_sixth);
  EXPECT_EQ(trainable_regime(0.005), TrainableRegime::peft);
  const Table1Row* iig = table1_row({I, I, G});
  ASSERT_NE(iig, nullptr);
  EXPECT_TRUE(iig->recommended(trainable_regime(1.0)));
  EXPECT_FALSE(iig->recommended(trainable_regime(0.1)));
  EXPECT_TRUE(table1_row({N, N, N})->recommended(TrainableRegime::peft));
}

// ---- memory ----

TEST(ShardingMemory, StatesDivideByTheirScope) {
  const CommSetup s = setup(64, 8, 8, 7e9, 1e9);
  const Strategy nig = parse_strategy("paro-nig");
  EXPECT_DOUBLE_EQ(param_bytes_per_gpu(nig, s), 2 * 7e9);
  EXPECT_DOUBLE_EQ(grad_bytes_per_gpu(nig, s), 2 * 1e9 / 8);  // Ψ' trainable
  EXPECT_DOUBLE_EQ(optimizer_bytes_per_gpu(nig, s), 12 * 1e9 / 64);
  const Strategy zpp = parse_strategy("zero++");
  EXPECT_DOUBLE_EQ(param_bytes_per_gpu(zpp, s), 2 * 7e9 / 64 + 2 * 7e9 / 8);
}

// RTP Table 1 (whole system, W = weight bytes, G = gradient bytes): RTP W + G + max(W, G), in-place W + G,
// data parallel (W + G)·N.
TEST(ShardingMemory, RtpTable1SystemTotals) {
  const CommSetup s = setup(8, 8, 1, 1e9, 2.5e8);
  const double w = 2 * s.params, g = 2 * s.trainable;
  auto system = [&](const char* name) {
    const StateMemory m = state_memory_per_gpu(parse_strategy(name), s);
    return (m.params + m.grads + m.buffers) * double(s.gpus);
  };
  EXPECT_DOUBLE_EQ(system("rtp"), w + g + std::max(w, g));
  EXPECT_DOUBLE_EQ(system("rtp-inplace"), w + g);
  EXPECT_DOUBLE_EQ(system("ddp"), (w + g) * double(s.gpus));
}

// ---- collectives ----

TEST(ShardingCollectives, RingAndHierarchicalMoveTheSameTotalButSplitItDifferently) {
  const CommSetup s = setup(64, 8, 1, 7e9);
  const Volume ring = global_collective(s.params, Collectives::ring, s);
  const Volume hier = global_collective(s.params, Collectives::hierarchical, s);
  EXPECT_DOUBLE_EQ(ring.total(), s.params * 63);
  EXPECT_NEAR(hier.total(), ring.total(), 1e-6 * ring.total());
  EXPECT_DOUBLE_EQ(ring.inter, 8 * s.params / 64 * 63);
  EXPECT_DOUBLE_EQ(hier.inter, s.params * 7);  // (g − 1)·Ψ
  EXPECT_LT(hier.inter, ring.inter);
}

TEST(ShardingCollectives, OneGroupHasNoInterGroupTrafficAndOneGpuNone) {
  const CommSetup one_node = setup(8, 8, 4);
  for (std::string_view name : named_schemes())
    EXPECT_EQ(communication_volume(parse_strategy(name), one_node).total().inter, 0.0) << name;
  const CommSetup one_gpu = setup(1, 1, 4);
  for (std::string_view name : named_schemes())
    EXPECT_EQ(communication_volume(parse_strategy(name), one_gpu).total().total(), 0.0) << name;
}

// RTP Eq. 2: a rotation is (N − 1) send/recvs of 1/N of the weights per GPU, like an all-gather.
TEST(ShardingCollectives, RtpRotationVolumeIsEq2) {
  const CommSetup s = setup(8, 8, 1, 1e9);
  const StageVolumes v = communication_volume(parse_strategy("rtp"), s);
  EXPECT_DOUBLE_EQ(v.forward_gather_params.total() / 8, 7 * 1e9 / 8);
  EXPECT_DOUBLE_EQ(v.backward_gather_params.total() / 8, 7 * 1e9 / 8);
  EXPECT_DOUBLE_EQ(v.backward_reduce_grads.total() / 8, 7 * 1e9 / 8);
}

// ---- properties over every triple and shape ----

Strategy triple(const StateSharding& sh, Collectives c) {
  Strategy st;
  st.name = sharding_code(sh);
  st.sharding = sh;
  st.collectives = c;
  return st;
}

// Volumes of different formulas that must agree: equal up to rounding (relative 1e-12, absolute for zero).
void expect_same(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-12 * std::max(std::abs(a), std::abs(b))) << what;
}
void expect_same(const Volume& a, const Volume& b, const std::string& what) {
  expect_same(a.intra, b.intra, what + " intra");
  expect_same(a.inter, b.inter, what + " inter");
}
std::vector<std::pair<std::string, Volume>> stages_of(const StageVolumes& v) {
  return {{"forward A-G(P)", v.forward_gather_params},  {"backward A-G(P)", v.backward_gather_params},
          {"backward R-S(G)", v.backward_reduce_grads}, {"update sync G", v.update_sync_grads},
          {"update A-G(P)", v.update_gather_params},    {"total", v.total()}};
}

struct Shape {
  std::int64_t n, m, s;
};
constexpr Shape kShapes[] = {{64, 8, 8}, {32, 4, 3}, {16, 16, 2}, {16, 1, 4}, {12, 3, 1}, {2, 1, 5}};

// Ring and PaRO's two-step ring are two ways of running the same collectives: every stage of every triple moves
// the same number of elements under both; only the split differs, and the two-step ring never puts more on the
// inter-group links (g(N − 1)/N ≥ g − 1 per element, equal when M = 1, when every link crosses groups).
TEST(ShardingProperties, CollectiveAlgorithmChangesTheSplitNotTheTotal) {
  for (const Shape& sh : kShapes) {
    for (double trainable : {1e9, 3e8}) {
      const CommSetup s = setup(sh.n, sh.m, sh.s, 1e9, trainable);
      for (const StateSharding& code : all_shardings()) {
        const std::string where = sharding_code(code) + " N=" + std::to_string(sh.n) + " M=" + std::to_string(sh.m);
        const auto ring = stages_of(communication_volume(triple(code, Collectives::ring), s));
        const auto hier = stages_of(communication_volume(triple(code, Collectives::hierarchical), s));
        for (std::size_t i = 0; i < ring.size(); ++i) {
          const std::string what = where + " " + ring[i].first;
          expect_same(ring[i].second.total(), hier[i].second.total(), what);
          EXPECT_LE(hier[i].second.inter, ring[i].second.inter * (1 + 1e-12)) << what;
          if (sh.m == 1) expect_same(ring[i].second, hier[i].second, what);
        }
      }
    }
  }
}

// An all-gather and a reduce-scatter of the same data over the same group move the same volume. With S_P = S_G
// the per-micro-batch reduce-scatter of Ψ' gradients is the parameter all-gather at Ψ'/Ψ of the size, and the
// backward all-gather repeats the forward one; with S_OS = G as well, the update's reduce-scatter of Ψ' down to
// OS's shards and its all-gather of the Ψ' updated parameters back to P's scope are the same collective reversed.
TEST(ShardingProperties, ReduceScatterAndAllGatherOfTheSameDataAndGroupAgree) {
  for (const Shape& sh : kShapes) {
    const CommSetup s = setup(sh.n, sh.m, sh.s, 1e9, 2.5e8);
    for (const StateSharding& code : all_shardings()) {
      for (Collectives c : {Collectives::ring, Collectives::hierarchical}) {
        const std::string where = sharding_code(code) + " " + std::string(to_string(c)) + " N=" + std::to_string(sh.n) +
                                  " M=" + std::to_string(sh.m);
        const StageVolumes v = communication_volume(triple(code, c), s);
        expect_same(v.backward_gather_params, v.forward_gather_params, where + " backward vs forward A-G(P)");
        if (code.params != code.grads) continue;
        expect_same(v.backward_reduce_grads, (s.trainable / s.params) * v.forward_gather_params,
                    where + " R-S(G) vs A-G(P)");
        if (code.optimizer == G && code.grads != G) {
          EXPECT_EQ(v.update_sync, GradSync::reduce_scatter) << where;
          expect_same(v.update_sync_grads, v.update_gather_params, where + " update R-S(G) vs A-G(P)");
          // Nothing left to reduce only when the scope the gradients still lack is one GPU (N) or one group (I).
          EXPECT_EQ(v.update_sync_grads.total() > 0, (code.grads == N ? s.gpus : s.groups()) > 1) << where;
        }
      }
    }
  }
}

// The group only labels links when no state is split by group: for the triples without I (ZeRO-1/2/3, DDP and
// the rest over {N, G}) memory and the total volume of every stage are the same for every group size M | N.
TEST(ShardingProperties, StrategiesWithoutIntraGroupShardingDoNotDependOnTheGroupSize) {
  const std::int64_t n = 24;
  for (const StateSharding& code : all_shardings()) {
    if (code.params == I || code.grads == I || code.optimizer == I) continue;
    for (Collectives c : {Collectives::ring, Collectives::hierarchical}) {
      const Strategy st = triple(code, c);
      const CommSetup flat = setup(n, 1, 4, 1e9, 4e8);
      const auto reference = stages_of(communication_volume(st, flat));
      for (std::int64_t m : {2, 3, 4, 6, 8, 12, 24}) {
        const CommSetup s = setup(n, m, 4, 1e9, 4e8);
        const std::string where = sharding_code(code) + " " + std::string(to_string(c)) + " M=" + std::to_string(m);
        EXPECT_DOUBLE_EQ(state_memory_per_gpu(st, s).total(), state_memory_per_gpu(st, flat).total()) << where;
        const auto v = stages_of(communication_volume(st, s));
        for (std::size_t i = 0; i < v.size(); ++i)
          expect_same(v[i].second.total(), reference[i].second.total(), where + " " + v[i].first);
      }
    }
  }
}

// Degenerate groups: with M = 1 a group is one GPU, so I shards like N; with M = N the group is everyone, so I
// shards like G. Every triple then has the memory and the per-stage volumes (intra and inter) of the triple
// with I replaced, under both collective algorithms.
TEST(ShardingProperties, GroupsOfOneAreNoShardingAndOneGroupIsGlobal) {
  const auto replace_intra = [](StateSharding sh, Shard by) {
    for (Shard* x : {&sh.params, &sh.grads, &sh.optimizer})
      if (*x == I) *x = by;
    return sh;
  };
  for (const std::int64_t s_accum : {1, 4}) {
    for (const auto& [m, by] : {std::pair{std::int64_t{1}, N}, std::pair{std::int64_t{16}, G}}) {
      const CommSetup s = setup(16, m, s_accum, 1e9, 3e8);
      for (const StateSharding& code : all_shardings()) {
        for (Collectives c : {Collectives::ring, Collectives::hierarchical}) {
          const Strategy with_i = triple(code, c), without_i = triple(replace_intra(code, by), c);
          const std::string where = sharding_code(code) + " as " + without_i.name + " " + std::string(to_string(c)) +
                                    " M=" + std::to_string(m);
          const StateMemory a = state_memory_per_gpu(with_i, s), b = state_memory_per_gpu(without_i, s);
          expect_same(a.params, b.params, where + " params");
          expect_same(a.grads, b.grads, where + " grads");
          expect_same(a.optimizer, b.optimizer, where + " optimizer");
          const auto va = stages_of(communication_volume(with_i, s));
          const auto vb = stages_of(communication_volume(without_i, s));
          for (std::size_t i = 0; i < va.size(); ++i)
            expect_same(va[i].second, vb[i].second, where + " " + va[i].first);
        }
      }
    }
  }
}

// Volumes are element counts: the stages that run every micro-batch scale with s, the update stages do not, so
// the total is affine in s; and every stage is linear in the data (Ψ and Ψ' together).
TEST(ShardingProperties, PerMicroBatchStagesScaleWithAccumulationAndAllWithTheModel) {
  for (const StateSharding& code : all_shardings()) {
    for (Collectives c : {Collectives::ring, Collectives::hierarchical}) {
      const Strategy st = triple(code, c);
      const StageVolumes one = communication_volume(st, setup(32, 8, 1, 1e9, 2e8));
      const StageVolumes five = communication_volume(st, setup(32, 8, 5, 1e9, 2e8));
      const StageVolumes big = communication_volume(st, setup(32, 8, 5, 3e9, 6e8));
      const std::string where = sharding_code(code) + " " + std::string(to_string(c));
      expect_same(five.forward_gather_params, 5.0 * one.forward_gather_params, where + " forward");
      expect_same(five.backward_gather_params, 5.0 * one.backward_gather_params, where + " backward A-G");
      expect_same(five.backward_reduce_grads, 5.0 * one.backward_reduce_grads, where + " backward R-S");
      expect_same(five.update_sync_grads, one.update_sync_grads, where + " update sync");
      expect_same(five.update_gather_params, one.update_gather_params, where + " update A-G");
      const auto a = stages_of(five), b = stages_of(big);
      for (std::size_t i = 0; i < a.size(); ++i) expect_same(b[i].second, 3.0 * a[i].second, where + " " + a[i].first);
    }
  }
}

// ---- stage rules ----

TEST(ShardingStages, UpdateSyncKindFollowsGradientAndOptimizerScopes) {
  EXPECT_EQ(update_grad_sync_kind({N, N, N}), GradSync::all_reduce);
  EXPECT_EQ(update_grad_sync_kind({N, N, G}), GradSync::reduce_scatter);
  EXPECT_EQ(update_grad_sync_kind({N, I, G}), GradSync::reduce_scatter);
  EXPECT_EQ(update_grad_sync_kind({I, I, I}), GradSync::all_reduce);
  EXPECT_EQ(update_grad_sync_kind({G, G, G}), GradSync::none);
  EXPECT_EQ(update_grad_sync_kind({N, G, N}), GradSync::all_gather);
  EXPECT_EQ(update_grad_sync_kind({N, I, N}), GradSync::reduce_then_all_gather);
}

// Whatever the strategy, the gradient of every trainable element must be summed over all N GPUs once per
// mini-batch: at least Ψ'(N − 1) elements move for gradients (a reduce-scatter's worth) whenever N > 1.
TEST(ShardingStages, EveryTripleSynchronisesGradientsAtLeastOnce) {
  const CommSetup s = setup(32, 4, 3, 1e9, 4e8);
  for (const StateSharding& sh : all_shardings()) {
    for (Collectives c : {Collectives::ring, Collectives::hierarchical}) {
      Strategy st;
      st.sharding = sh;
      st.collectives = c;
      const StageVolumes v = communication_volume(st, s);
      const double grads = v.backward_reduce_grads.total() + v.update_sync_grads.total();
      EXPECT_GE(grads, s.trainable * 31 * (1 - 1e-12)) << sharding_code(sh);
      // Parameters are gathered only when sharded.
      EXPECT_EQ(v.forward_gather_params.total() == 0, sh.params == N) << sharding_code(sh);
    }
  }
}

TEST(ShardingStages, PartialTrainingGathersAllParametersButReducesOnlyTrainableGradients) {
  const CommSetup s = setup(16, 8, 2, 1e9, 1e8);
  const StageVolumes v = communication_volume(parse_strategy("paro-igg"), s);
  EXPECT_DOUBLE_EQ(v.forward_gather_params.intra, 16 * 2 * (1e9 / 8) * 7);
  EXPECT_DOUBLE_EQ(v.backward_reduce_grads.intra, 16 * 2 * (1e8 / 8) * 7);
  EXPECT_DOUBLE_EQ(v.update_gather_params.inter, 16 * (1e8 / 16) * 1);
}

TEST(ShardingSetup, BadValuesThrow) {
  CommSetup s = setup(64, 8, 8);
  EXPECT_NO_THROW(validate_comm_setup(s));
  s.group_size = 7;
  EXPECT_THROW(validate_comm_setup(s), Error);
  s = setup(64, 8, 8, 1e9, 2e9);
  EXPECT_THROW(validate_comm_setup(s), Error);
  s = setup(64, 8, 0);
  EXPECT_THROW(validate_comm_setup(s), Error);
  // Model states past what a 64-bit byte count holds (kMaxByteCount) are refused naming the bytes per value.
  s = setup(64, 8, 8);
  s.optimizer_bytes = 1e300;
  try {
    validate_comm_setup(s);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--optimizer-bytes 1e+300 make more bytes of model states than"),
              std::string::npos)
        << e.what();
  }
}

// ---- the command line ----

using Result = test::CliResult;
constexpr auto run = &test::run_cli;

TEST(CommCli, JsonHasMemoryAndVolumes) {
  const Result r = run({"comm", "--strategy", "paro-iig", "--params", "7e9", "--gpus", "64", "--group-size", "8",
                        "--accum", "8", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["params"].get<double>(), 2 * 7e9 / 8);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["grads"].get<double>(), 2 * 7e9 / 8);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["optimizer"].get<double>(), 12 * 7e9 / 64);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["total"].get<double>(), 2 * 7e9 / 8 * 2 + 12 * 7e9 / 64);
  EXPECT_DOUBLE_EQ(j["volume"]["inter"].get<double>(), 14 * 7e9);
  EXPECT_DOUBLE_EQ(j["volume"]["intra"].get<double>(), 3 * 448 * 7e9);
  for (const char* k : {"forward_ag_p", "backward_ag_p", "backward_rs_g", "update_rs_or_ar_g", "update_ag_p"})
    EXPECT_TRUE(j["volume"]["stages"].contains(k)) << k;
  EXPECT_EQ(j["volume"]["stages"]["update_rs_or_ar_g"]["operation"], "reduce-scatter");
  EXPECT_EQ(j["strategy"]["code"], "IIG");
  EXPECT_TRUE(j["strategy"]["recommended"].get<bool>());
}

TEST(CommCli, TrainableAndOptimizerBytes) {
  const Result r = run({"comm", "--strategy", "zero3", "--params", "1e9", "--trainable", "1e8", "--gpus", "8",
                        "--group-size", "8", "--optimizer-bytes", "16", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["memory_bytes"]["optimizer"].get<double>(), 16 * 1e8 / 8);
  EXPECT_EQ(j["strategy"]["regime"], "psi_prime_lt_psi_over_6");
}

TEST(CommCli, ListHasTheFourteenStrategies) {
  const Result r = run({"comm", "--list", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["strategies"].size(), 14u);
  const auto& ggg = j["strategies"][13];
  EXPECT_EQ(ggg["code"], "GGG");
  EXPECT_NE(std::find(ggg["aliases"].begin(), ggg["aliases"].end(), "fsdp"), ggg["aliases"].end());
  EXPECT_TRUE(ggg["table1"]["psi_prime_eq_psi"].get<bool>());
  EXPECT_EQ(run({"comm", "--list"}).code, 0);
}

TEST(CommCli, CompareHasEveryNamedScheme) {
  const Result r =
      run({"comm", "--compare", "--params", "7e9", "--gpus", "64", "--group-size", "8", "--accum", "8", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schemes"].size(), named_schemes().size());
  const Result text = run({"comm", "--compare", "--params", "7e9", "--gpus", "64", "--group-size", "8"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("PaRO-NIG"), std::string::npos);
}

TEST(CommCli, BadInputExitsTwoWithOneLineNamingTheFlag) {
  const std::vector<std::string> base = {"comm", "--params", "7e9", "--gpus", "64", "--group-size", "8"};
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--strategy", "zero4"}, "--strategy"},
      {{"--strategy", "zero3", "--group-size", "7"}, "--group-size"},
      {{"--strategy", "zero3", "--params", "7e9x"}, "--params"},
      {{"--strategy", "zero3", "--accum", "0"}, "--accum"},
      {{"--strategy", "zero3", "--trainable", "8e9"}, "--trainable"},
      {{"--strategy", "zero3", "--optimizer-bytes", "-1"}, "--optimizer-bytes"},
      {{"--strategy", "zero3", "--collectives", "tree"}, "--collectives"},
      {{}, "--strategy"},
  };
  for (const auto& [extra, flag] : cases) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << flag;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  EXPECT_EQ(run({"comm", "--strategy", "zero3", "--gpus", "8", "--group-size", "8"}).code, 2);  // no --params
}

// The document's totals are the sums of its stages and of its memory parts, for every named scheme and every
// code under both algorithms; --compare reports the same memory and volumes as --strategy for each scheme.
TEST(CommCli, TotalsAreTheSumsOfTheStagesAndCompareAgrees) {
  const std::vector<std::string> base = {"comm", "--params",     "7e9", "--trainable", "2e9", "--gpus",
                                         "64",   "--group-size", "8",   "--accum",     "4",   "--json"};
  const auto near = [](double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); };
  std::vector<std::string> names(named_schemes().begin(), named_schemes().end());
  for (const StateSharding& code : all_shardings()) names.push_back(sharding_code(code));
  for (const std::string& name : names) {
    for (const char* collectives : {"ring", "hierarchical"}) {
      std::vector<std::string> args = base;
      args.insert(args.end(), {"--strategy", name, "--collectives", collectives});
      const Result r = run(args);
      ASSERT_EQ(r.code, 0) << name << ": " << r.err;
      const auto j = nlohmann::json::parse(r.out);
      double intra = 0, inter = 0;
      for (const auto& [stage, v] : j["volume"]["stages"].items()) {
        intra += v["intra"].get<double>();
        inter += v["inter"].get<double>();
      }
      const auto& vol = j["volume"];
      EXPECT_TRUE(near(vol["intra"].get<double>(), intra)) << name << " " << collectives;
      EXPECT_TRUE(near(vol["inter"].get<double>(), inter)) << name << " " << collectives;
      EXPECT_TRUE(near(vol["total"].get<double>(), intra + inter)) << name << " " << collectives;
      const auto& mem = j["memory_bytes"];
      EXPECT_TRUE(near(mem["total"].get<double>(), mem["params"].get<double>() + mem["grads"].get<double>() +
                                                       mem["optimizer"].get<double>() + mem["buffers"].get<double>()))
          << name;
    }
  }
  std::vector<std::string> compare = base;
  compare.emplace_back("--compare");
  const Result all = run(compare);
  ASSERT_EQ(all.code, 0) << all.err;
  const auto schemes =
      nlohmann::json::parse(all.out)["schemes"];  // a named copy: the range-for must not borrow from a temporary
  for (const auto& scheme : schemes) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--strategy", scheme["scheme"].get<std::string>()});
    const Result one = run(args);
    ASSERT_EQ(one.code, 0) << one.err;
    const auto j = nlohmann::json::parse(one.out);
    EXPECT_EQ(scheme["memory_bytes"], j["memory_bytes"]) << scheme["scheme"];
    for (const char* k : {"intra", "inter", "total"})
      EXPECT_EQ(scheme["volume"][k], j["volume"][k]) << scheme["scheme"];
  }
}

// The memory model's DP dimension: per-GPU model states follow the strategy over the DP group (d = 16 here, nodes of
// 8), whichever framework the strategy is priced under (rank --all-shardings prices all of them).
TEST(StageMemorySharding, Zero3DividesParamsGradsAndOptimizerByDp) {
  const SpecLibrary lib = test::library();
  const ModelSpec model = lib.model("llama3.1-8b");
  const ClusterSpec cluster = lib.cluster("dgx-a100-40gb");
  const FrameworkProfile megatron = lib.framework("megatron");
  LayoutRequest q;
  q.gpus = 16, q.seq = 4096;
  const auto stage0 = [&](std::string_view sharding) {
    Layout l = build_layout(model, megatron, q);
    l.sharding = parse_sharding(sharding);
    return stage_memory(model, cluster, l, megatron.residual, 0);
  };
  const StageMemory ddp = stage0("ddp"), zero3 = stage0("zero3"), mics = stage0("mics");
  for (const auto state : {&StageMemory::params, &StageMemory::grads, &StageMemory::optimizer}) {
    EXPECT_NEAR(ddp.*state / zero3.*state, 16.0, 1e-9);
    EXPECT_NEAR(ddp.*state / mics.*state, 8.0, 1e-9);  // intra = one node of 8
  }
}

// `estimate --sharding`: Megatron-LM's default stays the distributed optimizer (N, N, G) = zero1; ddp holds the
// whole optimizer on every GPU.
TEST(EstimateSharding, MegatronDefaultIsTheDistributedOptimizer) {
  auto stage0 = [](const std::string& sharding) {
    std::vector<std::string> args = {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb",
                                     "--seq",    "4096",    "--gpus",      "16",    "--json"};
    if (!sharding.empty()) args.insert(args.end(), {"--sharding", sharding});
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["memory"]["stages"][0];
  };
  const auto zero1 = stage0("zero1"), dflt = stage0(""), ddp = stage0("ddp");
  for (const char* k : {"params", "grads", "optimizer"})
    EXPECT_DOUBLE_EQ(dflt[k].get<double>(), zero1[k].get<double>());
  EXPECT_NEAR(ddp["optimizer"].get<double>() / zero1["optimizer"].get<double>(), 16.0, 1e-9);
  EXPECT_LT(zero1["total"].get<double>(), ddp["total"].get<double>());
  const Result bad = run({"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "4096", "--gpus", "16",
                          "--sharding", "zero4"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--sharding"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace headroom
