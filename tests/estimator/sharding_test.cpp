// The sharding model (sharding.hpp): names, principles, memory, collectives and stage rules; then the CLI
// that exposes it (`headroom comm`, `estimate --sharding`).
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "../test_support.hpp"
#include "headroom/estimator/error.hpp"
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
      {"ddp", "NNN"},  {"zero1", "NNG"},  {"ZeRO-2", "NGG"},   {"zero_3", "GGG"},    {"FSDP", "GGG"},
      {"mics", "III"}, {"HSDP", "III"},   {"fsdp-hs", "III"},  {"zero++", "GGG"},    {"paro-igg", "IGG"},
      {"PaRO-IIG", "IIG"}, {"paro-nig", "NIG"}, {"nig", "NIG"}, {"GNI", "GNI"}, {"rtp", "GGG"}, {"rtp-inplace", "GGG"}};
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
  const Result r = run({"comm", "--compare", "--params", "7e9", "--gpus", "64", "--group-size", "8", "--accum", "8",
                        "--json"});
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

// `estimate --sharding`: per-GPU model states follow the strategy over the DP group (d = 16 here, nodes of 8).
TEST(EstimateSharding, Zero3DividesParamsGradsAndOptimizerByDp) {
  auto stage0 = [](const std::string& sharding) {
    std::vector<std::string> args = {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "4096",
                                     "--gpus", "16", "--json"};
    if (!sharding.empty()) args.insert(args.end(), {"--sharding", sharding});
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["memory"]["stages"][0];
  };
  const auto ddp = stage0("ddp"), zero3 = stage0("zero3"), mics = stage0("mics"), dflt = stage0("");
  for (const char* k : {"params", "grads", "optimizer"}) {
    EXPECT_NEAR(ddp[k].get<double>() / zero3[k].get<double>(), 16.0, 1e-9) << k;
    EXPECT_NEAR(ddp[k].get<double>() / mics[k].get<double>(), 8.0, 1e-9) << k;  // intra = one node of 8
  }
  // Megatron's default stays the distributed optimizer (N, N, G) = zero1.
  const auto zero1 = stage0("zero1");
  for (const char* k : {"params", "grads", "optimizer"}) EXPECT_DOUBLE_EQ(dflt[k].get<double>(), zero1[k].get<double>());
  EXPECT_LT(zero3["total"].get<double>(), dflt["total"].get<double>());
  const Result bad = run({"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "4096", "--gpus", "16",
                          "--sharding", "zero4"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--sharding"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace headroom
