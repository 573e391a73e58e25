#include "headroom/estimator/search.hpp"

#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../cli_support.hpp"
#include "cli.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom {
namespace {

class SearchTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec a100 = lib.cluster("dgx-a100-40gb");
  FrameworkProfile megatron = lib.framework("megatron");
  PerfCoefficients coef = default_perf_coefficients(lib, "megatron");

  [[nodiscard]] SearchResult rank(std::int64_t gpus, std::vector<Constraint> cs = {}) const {
    SearchOptions o;
    o.gpus = gpus;
    o.seq = 8192;
    o.gbs = 1024;
    o.top = 5;
    o.constraints = std::move(cs);
    return rank_layouts(llama8b, a100, default_layout(megatron), megatron.residual, coef, o);
  }
};

TEST_F(SearchTest, BestLayoutsFitAreSortedAndValid) {
  const SearchResult r = rank(64);
  ASSERT_EQ(r.best.size(), 5u);
  EXPECT_GE(r.evaluated, r.memory_checked);
  EXPECT_GE(r.memory_checked, r.fitting);
  for (std::size_t i = 0; i < r.best.size(); ++i) {
    const Layout& l = r.best[i].layout;
    EXPECT_NO_THROW(validate_layout(llama8b, l));
    EXPECT_EQ(l.gpus(), 64);
    EXPECT_LE(r.best[i].peak_bytes, a100.gpu.usable_memory_bytes);
    EXPECT_DOUBLE_EQ(r.best[i].peak_bytes, peak_memory_bytes(llama8b, a100, l, megatron.residual));
    if (i > 0) {
      EXPECT_LE(r.best[i - 1].step_time_s, r.best[i].step_time_s);
    }
  }
}

// Each layout is priced with its own schedule's stage counts, whatever schedule the search tried before it: under a
// framework that does not run zbv (the LM head on the first rank), the counts stay the last stage's.
TEST_F(SearchTest, PricesEachLayoutWithItsOwnStageCounts) {
  for (const char* name : {"megatron", "torchtitan"}) {
    const FrameworkProfile f = lib.framework(name);
    SearchOptions o;
    o.gpus = 64, o.seq = 8192, o.gbs = 512, o.top = 200;
    restrict_to_framework(o, f);
    const SearchResult r =
        rank_layouts(llama8b, a100, default_layout(f), f.residual, default_perf_coefficients(lib, name), o);
    ASSERT_FALSE(r.best.empty()) << name;
    for (const RankedLayout& x : r.best)
      EXPECT_DOUBLE_EQ(x.peak_bytes, peak_memory_bytes(llama8b, a100, x.layout, f.residual)) << name;
    for (const RankedLayout& x : r.pareto)
      EXPECT_DOUBLE_EQ(x.peak_bytes, peak_memory_bytes(llama8b, a100, x.layout, f.residual)) << name;
  }
}

TEST_F(SearchTest, ParetoFrontTradesMemoryForSpeed) {
  const SearchResult r = rank(64);
  ASSERT_FALSE(r.pareto.empty());
  for (std::size_t i = 1; i < r.pareto.size(); ++i) {
    EXPECT_GT(r.pareto[i].peak_bytes, r.pareto[i - 1].peak_bytes);
    EXPECT_LT(r.pareto[i].step_time_s, r.pareto[i - 1].step_time_s);
  }
  EXPECT_DOUBLE_EQ(r.pareto.back().step_time_s, r.best.front().step_time_s);
  EXPECT_LE(r.pareto.front().step_time_s,
            SearchOptions{}.pareto_slowdown * r.best.front().step_time_s);  // no degenerate points
}

TEST_F(SearchTest, ConstraintsRestrictTheSearch) {
  const SearchResult r = rank(64, {parse_constraint("tp<=2"), parse_constraint("pp=1"),
                                   parse_constraint("recompute=none"), parse_constraint("sharding=zero1")});
  ASSERT_FALSE(r.best.empty());
  for (const auto& x : r.best) {
    EXPECT_LE(x.layout.tp, 2);
    EXPECT_EQ(x.layout.pp, 1);
    EXPECT_EQ(x.layout.recompute, Recompute::none);
    EXPECT_EQ(x.layout.sharding.optimizer, Shard::global);
    EXPECT_EQ(x.layout.sharding.params, Shard::none);
  }
  EXPECT_LT(r.evaluated, rank(64).evaluated);
}

// Rank proposes only what the framework can launch: Megatron-LM shards at most the optimizer (NNN, NNG) and
// has no GPipe; an explicit sharding constraint opens all 14 PaRO strategies again.
TEST_F(SearchTest, FrameworkProfileLimitsShardingsAndSchedules) {
  ASSERT_EQ(megatron.supported_shardings.size(), 2u);
  SearchOptions o;
  o.gpus = 64;
  o.seq = 8192;
  o.gbs = 1024;
  o.top = 50;
  restrict_to_framework(o, megatron);
  const SearchResult r = rank_layouts(llama8b, a100, default_layout(megatron), megatron.residual, coef, o);
  ASSERT_FALSE(r.best.empty());
  for (const auto& x : r.pareto) {
    EXPECT_EQ(x.layout.sharding.params, Shard::none);
    EXPECT_EQ(x.layout.sharding.grads, Shard::none);
    EXPECT_NE(x.layout.schedule, Schedule::gpipe);
  }
  EXPECT_LT(r.evaluated, rank(64).evaluated);
  SearchOptions asked;
  asked.constraints = {parse_constraint("sharding=zero3")};
  restrict_to_framework(asked, megatron);
  EXPECT_TRUE(asked.shardings.empty());  // all 14, the constraint picks

  const FrameworkProfile fsdp = lib.framework("pytorch-fsdp");
  SearchOptions f;
  restrict_to_framework(f, fsdp);
  ASSERT_EQ(f.shardings.size(), 4u);
  EXPECT_EQ(f.shardings[0].params, Shard::global);  // GGG FULL_SHARD first
  EXPECT_EQ(std::count(f.recomputes.begin(), f.recomputes.end(), Recompute::selective), 0);
}

// A layout that a twin of the same sizes and micro-batch (other SP, sharding, recompute or schedule) matches or beats
// in both step time and memory is no choice: the top list leaves it out. Without SP a layout is slower (the norms run
// on the whole sequence) and larger, so the SP-off twins of the fastest layouts are gone.
TEST_F(SearchTest, NoRankedLayoutIsDominatedByATwin) {
  SearchOptions o;
  o.gpus = 64;
  o.seq = 8192;
  o.gbs = 1024;
  o.top = 200;
  restrict_to_framework(o, megatron);
  const SearchResult r = rank_layouts(llama8b, a100, default_layout(megatron), megatron.residual, coef, o);
  ASSERT_GT(r.best.size(), 20u);
  EXPECT_GT(r.dominated, 0);
  EXPECT_LE(r.dominated, r.fitting);
  const auto twins = [](const Layout& a, const Layout& b) {
    return a.tp == b.tp && a.cp == b.cp && a.pp == b.pp && a.vpp == b.vpp && a.dp == b.dp && a.mbs == b.mbs &&
           a.ep == b.ep && a.etp == b.etp;
  };
  for (const RankedLayout& x : r.best)
    for (const RankedLayout& y : r.best) {
      if (&x == &y || !twins(x.layout, y.layout)) continue;
      EXPECT_FALSE(y.step_time_s <= x.step_time_s && y.peak_bytes <= x.peak_bytes)
          << "a twin dominates tp" << x.layout.tp << " pp" << x.layout.pp << " mbs" << x.layout.mbs;
    }
  // Every layout dropped fits: the front (memory against speed) is the same with or without the twins.
  o.top = 0;
  EXPECT_EQ(rank_layouts(llama8b, a100, default_layout(megatron), megatron.residual, coef, o).pareto.size(),
            r.pareto.size());
}

TEST_F(SearchTest, BadConstraintsThrow) {
  EXPECT_THROW((void)parse_constraint("tq<=2"), Error);
  EXPECT_THROW((void)parse_constraint("tp"), Error);
  EXPECT_THROW((void)parse_constraint("tp<=x"), Error);
  EXPECT_THROW((void)parse_constraint("recompute<=none"), Error);
  EXPECT_THROW((void)parse_constraint("sharding=zero9"), Error);
}

// At least 100,000 layouts for llama3.1-405b on 16,384 GPUs (speed is in tools/bench/rank_bench).
TEST_F(SearchTest, EnumeratesOver100kLayoutsFor405bOn16384Gpus) {
  SearchOptions o;
  o.gpus = 16384;
  o.seq = 8192;
  o.gbs = 2048;
  const SearchResult r = rank_layouts(lib.model("llama3.1-405b"), lib.cluster("dgx-h100"), default_layout(megatron),
                                      megatron.residual, coef, o);
  EXPECT_GE(r.evaluated, 100000);
  EXPECT_FALSE(r.best.empty());
}

// The CLI: one JSON document with the evaluated layouts and launch arguments; bad input is exit 2 with one line.
TEST(RankCli, JsonHasEvaluatedLayoutsAndLaunchArguments) {
  std::ostringstream out, err;
  const int code = cli::run({"rank", "--model", "llama3.1-8b", "--cluster", "h100-94gb-x4", "--gpus", "16", "--seq",
                             "16384", "--gbs", "1024", "--top", "3", "--json"},
                            out, err);
  ASSERT_EQ(code, 0) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_GT(j.at("evaluated").get<long long>(), 100);
  ASSERT_EQ(j.at("layouts").size(), 3u);
  for (const char* key : {"tflops_per_gpu", "tokens_per_s", "peak_gib", "verdict", "layout"})
    EXPECT_TRUE(j["layouts"][0].contains(key)) << key;
  EXPECT_NE(j.at("launch").at("megatron").get<std::string>().find("--tensor-model-parallel-size"), std::string::npos);
  EXPECT_FALSE(j.at("pareto").empty());
}

// --lora-rank reaches every ranked layout (frozen base, adapters on all projections by default).
TEST(RankCli, LoraRankIsPassedToTheSearch) {
  std::ostringstream out, err;
  const int code =
      cli::run({"rank", "--model", "llama3.1-70b", "--cluster", "lumi-mi250x", "--framework", "pytorch-fsdp", "--gpus",
                "8", "--seq", "10000", "--gbs", "8", "--lora-rank", "128", "--top", "3", "--json"},
               out, err);
  ASSERT_EQ(code, 0) << err.str();
  const auto j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j.at("lora").at("rank").get<int>(), 128);
  ASSERT_FALSE(j.at("layouts").empty());
  for (const auto& x : j.at("layouts")) {
    EXPECT_EQ(x.at("layout").at("lora").at("rank").get<int>(), 128);
    const std::string code3 = x.at("layout").at("sharding_code").get<std::string>();
    EXPECT_TRUE(code3 == "GGG" || code3 == "NGG" || code3 == "III" || code3 == "NNN") << code3;
  }
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::run({"rank", "--model", "llama3.1-70b", "--cluster", "lumi-mi250x", "--gpus", "8", "--seq", "10000",
                      "--gbs", "8", "--lora-targets", "q,v"},
                     out2, err2),
            2);
}

// --all-shardings searches the strategies the framework does not run (estimate refuses them under it): each such row is
// marked, in the text and in the JSON, as outside the framework.
TEST(RankCli, AllShardingsMarksTheLayoutsOutsideTheFramework) {
  const std::vector<std::string> args = {
      "rank",  "--model", "llama3.1-8b",  "--cluster", "dgx-h100",     "--gpus",       "16",    "--seq", "8192",
      "--gbs", "64",      "--constraint", "pp=1",      "--constraint", "sharding=GGG", "--top", "3"};
  std::ostringstream out, err;
  ASSERT_EQ(cli::run(args, out, err), 0) << err.str();
  EXPECT_NE(out.str().find(" GGG rc:none *"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("* a sharding outside the framework: megatron runs NNN, NNG only"), std::string::npos);
  std::vector<std::string> json = args;
  json.emplace_back("--json");
  std::ostringstream jout, jerr;
  ASSERT_EQ(cli::run(json, jout, jerr), 0) << jerr.str();
  const auto j = nlohmann::json::parse(jout.str());
  ASSERT_FALSE(j.at("layouts").empty());
  for (const auto& x : j.at("layouts")) EXPECT_TRUE(x.at("outside_framework").get<bool>());
  std::ostringstream fout, ferr;  // the framework's own: nothing marked
  ASSERT_EQ(cli::run({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq", "8192",
                      "--gbs", "64", "--top", "3", "--json"},
                     fout, ferr),
            0);
  const auto own = nlohmann::json::parse(fout.str());  // kept alive: a loop over parse(...).at(...) dangles
  for (const auto& x : own.at("layouts")) EXPECT_FALSE(x.at("outside_framework").get<bool>());
}

TEST(RankCli, BadInputExitsTwo) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "0", "--seq",
                                 "8192", "--gbs", "8"},
        std::vector<std::string>{"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq",
                                 "8192", "--gbs", "8", "--constraint", "warp<=2"}}) {
    std::ostringstream out, err;
    EXPECT_EQ(cli::run(args, out, err), 2);
    const std::string message = err.str();
    EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
  }
}

// estimate --json carries the perf block.
TEST(EstimateCli, JsonHasPerf) {
  std::ostringstream out, err;
  ASSERT_EQ(cli::run({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--tp", "4", "--gpus", "8",
                      "--seq", "8192", "--gbs", "1024", "--json"},
                     out, err),
            0)
      << err.str();
  const auto perf = nlohmann::json::parse(out.str()).at("perf");
  for (const char* key : {"step_time_s", "tokens_per_s", "tflops_per_gpu", "mfu", "pts_s", "breakdown"})
    EXPECT_TRUE(perf.contains(key)) << key;
  EXPECT_NEAR(perf["tflops_per_gpu"].get<double>(), 194.25, 0.1 * 194.25);  // Table 3, (4,1,1,1) at 8 GPUs
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// The interleaved schedule runs only with m a multiple of p (Megatron-LM's
// schedules.py refuses the rest): estimate refuses such a layout and rank never proposes one.
TEST(Search, InterleavedLayoutsHaveMicroBatchesAMultipleOfTheStages) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  Layout l;
  l.pp = 4, l.vpp = 2, l.schedule = Schedule::interleaved, l.dp = 2, l.mbs = 1, l.seq = 4096;
  l.gbs = 12;  // dp 2 × m = 6 micro-batches per pipeline, not a multiple of p = 4
  EXPECT_THROW(validate_layout(m, l), Error);
  l.gbs = 16;
  EXPECT_NO_THROW(validate_layout(m, l));
  const ClusterSpec c = lib.cluster("dgx-h100");
  const FrameworkProfile f = lib.framework("megatron");
  SearchOptions o;
  o.gpus = 64, o.seq = 4096, o.gbs = 96, o.top = 100000;
  restrict_to_framework(o, f);
  const SearchResult r =
      rank_layouts(m, c, default_layout(f), f.residual, default_perf_coefficients(lib, "megatron"), o);
  int interleaved = 0;
  for (const auto& x : r.best) {
    if (x.layout.schedule != Schedule::interleaved) continue;
    ++interleaved;
    EXPECT_EQ(x.layout.microbatches() % x.layout.pp, 0) << x.layout.pp << " " << x.layout.microbatches();
  }
  EXPECT_GT(interleaved, 0);
}

}  // namespace
}  // namespace headroom
