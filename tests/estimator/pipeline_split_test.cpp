// Uneven pipeline stages as Megatron-LM splits them (--decoder-first/last-pipeline-num-layers,
// --account-for-embedding/loss-in-pipeline-split), in the split rules, memory, time, rank and the CLI.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

Layout pipeline(std::int64_t pp, std::int64_t first, std::int64_t last, std::int64_t vpp = 1) {
  Layout l;
  l.tp = 8, l.pp = pp, l.vpp = vpp, l.dp = 1, l.mbs = 1, l.seq = 8192, l.gbs = 2 * pp;
  if (vpp > 1) l.schedule = Schedule::interleaved;
  l.split.first_stage_layers = first;
  l.split.last_stage_layers = last;
  return l;
}

std::vector<std::int64_t> layers_of(const ModelSpec& m, const Layout& l) {
  std::vector<std::int64_t> out;
  for (std::int64_t st = 0; st < l.pp; ++st) out.push_back(stage_layers(m, l, st));
  return out;
}

// Llama 3 trained 405B (126 layers) as PP 16 with 7 + 14×8 + 7 layers (Llama 3 paper, Sec. 3.3.2).
TEST(PipelineSplit, StageLayersAsMegatronBuildsThem) {
  const ModelSpec m = test::library().model("llama3.1-405b");
  const Layout l = pipeline(16, 7, 7);
  EXPECT_NO_THROW(validate_model_split(m, l));
  const auto layers = layers_of(m, l);
  EXPECT_EQ(layers.front(), 7);
  EXPECT_EQ(layers[1], 8);
  EXPECT_EQ(layers.back(), 7);
  std::int64_t total = 0;
  for (const auto n : layers) total += n;
  EXPECT_EQ(total, m.num_layers);
  // Only the first stage given: the other 15 share the rest, 126 − 14 = 112 does not split over 15, 126 − 6 does.
  EXPECT_THROW(validate_model_split(m, pipeline(16, 14, 0)), Error);
  EXPECT_NO_THROW(validate_model_split(m, pipeline(16, 6, 0)));  // 120 over 15 = 8
  // --account-for-embedding/loss-in-pipeline-split (transformer_block.py): (L + 2)/p, one fewer at either end.
  const ModelSpec m8 = test::library().model("llama3.1-8b");  // 32 layers
  Layout acc = pipeline(2, 0, 0);
  acc.split.embedding_in_split = acc.split.loss_in_split = true;  // 34 / 2 = 17 → 16 + 16
  EXPECT_EQ(layers_of(m8, acc), (std::vector<std::int64_t>{16, 16}));
  acc.pp = 17;  // 34 / 17 = 2 → 1 + 15×2 + 1
  EXPECT_EQ(stage_layers(m8, acc, 0), 1);
  EXPECT_EQ(stage_layers(m8, acc, 8), 2);
  EXPECT_EQ(stage_layers(m8, acc, 16), 1);
}

TEST(PipelineSplit, RefusesWhatMegatronRefuses) {
  const ModelSpec m = test::library().model("llama3.1-405b");
  const auto message = [&](const Layout& l) {
    try {
      validate_model_split(m, l);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message(pipeline(16, 0, 0)).find("does not divide the 126 layers"), std::string::npos);
  EXPECT_NE(message(pipeline(16, 0, 0)).find("--decoder-first-pipeline-num-layers"), std::string::npos);
  EXPECT_NE(message(pipeline(16, 7, 7, 2)).find("--decoder-first-pipeline-num-layers 7 is not a multiple of --vpp 2"),
            std::string::npos);
  EXPECT_NE(message(pipeline(16, 5, 5)).find("do not split evenly over the 14 middle stages"), std::string::npos);
  EXPECT_NE(message(pipeline(2, 100, 100)).find("more than the 126"), std::string::npos);
  EXPECT_NE(message(pipeline(2, 60, 60)).find("6 layers remain for 0 middle"), std::string::npos);
  EXPECT_NE(message(pipeline(1, 126, 0)).find("need --pp 2 or more"), std::string::npos);
  Layout both = pipeline(16, 7, 7);
  both.split.embedding_in_split = true;
  EXPECT_NE(message(both).find("cannot be combined"), std::string::npos);
  EXPECT_EQ(message(pipeline(16, 8, 6, 2)), "(accepted)");  // 8, 6 and the middle 8 are multiples of v = 2
  EXPECT_NE(message(pipeline(16, 8, 6, 4)).find("is not a multiple of --vpp 4"), std::string::npos);
}

TEST(PipelineSplit, BalancedUnevenSplit) {
  const auto split = balanced_uneven_split(126, 16);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->first_stage_layers, 7);
  EXPECT_EQ(split->last_stage_layers, 7);
  const auto three = balanced_uneven_split(80, 3);  // 27 + 27 + 26
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->first_stage_layers, 27);
  EXPECT_EQ(three->last_stage_layers, 26);
  EXPECT_FALSE(balanced_uneven_split(32, 30).has_value());  // 2 layers a middle stage leave none for the ends
  EXPECT_FALSE(balanced_uneven_split(32, 1).has_value());
  // Every split it proposes passes validate_model_split, with the last stage never heavier than the first.
  const ModelSpec m = test::library().model("llama3.1-405b");
  for (std::int64_t p = 2; p <= 63; ++p) {
    const auto s = balanced_uneven_split(m.num_layers, p);
    if (!s) continue;
    Layout l = pipeline(p, s->first_stage_layers, s->last_stage_layers);
    EXPECT_NO_THROW(validate_model_split(m, l)) << p;
    EXPECT_LE(s->last_stage_layers, s->first_stage_layers) << p;
    EXPECT_LE(s->first_stage_layers, stage_layers(m, l, std::min<std::int64_t>(1, p - 1))) << p;
  }
}

// An "uneven" split that happens to be L/p everywhere prices exactly as the even one: the split changes only
// which layers a stage holds.
TEST(PipelineSplit, AnUnevenSplitOfEqualStagesPricesAsTheEvenOne) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const FrameworkProfile f = lib.framework("megatron");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  for (const std::int64_t v : {1, 2}) {
    Layout even = default_layout(f);
    even.tp = 2, even.pp = 4, even.dp = 1, even.mbs = 1, even.seq = 4096, even.gbs = 16, even.vpp = v;
    if (v > 1) even.schedule = Schedule::interleaved;
    Layout same = even;
    same.split.first_stage_layers = same.split.last_stage_layers = 8;
    EXPECT_DOUBLE_EQ(peak_memory_bytes(m, c, even, f.residual), peak_memory_bytes(m, c, same, f.residual));
    EXPECT_DOUBLE_EQ(estimate_perf(m, c, even, k).step_time_s, estimate_perf(m, c, same, k).step_time_s);
  }
}

// Memory: every stage holds its own layers; the peak is the worst stage, which with lighter ends is the second
// (8 layers, p − 1 micro-batches in flight against the first stage's 7 layers and p).
TEST(PipelineSplit, MemoryAndTimeFollowTheStagesLayers) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-405b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const FrameworkProfile f = lib.framework("megatron");
  Layout l = default_layout(f);
  l.tp = 8, l.pp = 16, l.dp = 4, l.mbs = 1, l.seq = 8192, l.gbs = 256, l.recompute = Recompute::full;
  l.split.first_stage_layers = l.split.last_stage_layers = 7;
  validate_layout(m, l);
  const MemoryEstimate e = estimate_memory(m, c, l, f.residual);
  EXPECT_DOUBLE_EQ(e.peak_bytes, peak_memory_bytes(m, c, l, f.residual));
  const auto& s = e.stages;
  EXPECT_GT(s[1].params, s[0].params);  // 8 layers against 7 plus the embedding (h·v/t, less than a layer)
  EXPECT_NEAR(s[1].params / s[2].params, 1.0, 1e-12);
  // A middle stage of 8 layers against ends of 7 plus embedding or head: the 405B LM head (h·v/t) is about one
  // layer's GEMMs, so one of the three is the slowest; the step time is that stage's m passes plus the bubble.
  const PerfEstimate p = estimate_perf(m, c, l, default_perf_coefficients(lib, "megatron"));
  EXPECT_TRUE(p.breakdown.slowest_stage == 0 || p.breakdown.slowest_stage == 1 || p.breakdown.slowest_stage == 15);
  Layout heavy_last = l;  // 2 + 14×8 + 12: the last stage, with the head, is the slowest and the step longer
  heavy_last.split.first_stage_layers = 2, heavy_last.split.last_stage_layers = 12;
  validate_layout(m, heavy_last);
  EXPECT_EQ(estimate_perf(m, c, heavy_last, default_perf_coefficients(lib, "megatron")).breakdown.slowest_stage, 15);
  EXPECT_GT(estimate_perf(m, c, heavy_last, default_perf_coefficients(lib, "megatron")).step_time_s, p.step_time_s);
}

// Under megatron, p must divide 126 layers and t·c·p the 16,384 GPUs, so nothing fitted; with uneven
// stages rank finds layouts, every one of which Megatron-LM accepts.
TEST(PipelineSplit, RankFindsLlama405bOn16384GpusUnderMegatron) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-405b");
  // rank's search under `framework`: 16,384 H100s, seq 8192, gbs 2048; whether the framework has uneven stages.
  const auto rank = [&](const char* framework, bool& uneven_stages) {
    const FrameworkProfile f = lib.framework(framework);
    SearchOptions o;
    o.gpus = 16384, o.seq = 8192, o.gbs = 2048, o.top = 1000;
    restrict_to_framework(o, f);
    uneven_stages = o.uneven_stages;
    return rank_layouts(m, lib.cluster("dgx-h100"), default_layout(f), f.residual,
                        default_perf_coefficients(lib, framework), o);
  };
  bool searched = false;
  const SearchResult r = rank("megatron", searched);
  EXPECT_TRUE(searched);
  ASSERT_FALSE(r.best.empty());
  int uneven = 0;
  for (const auto& x : r.best) {
    EXPECT_NO_THROW(validate_layout(m, x.layout));
    uneven += x.layout.split.even() ? 0 : 1;
  }
  EXPECT_GT(uneven, 0);
  // A framework without uneven stages (pytorch-fsdp) keeps to p | L.
  const SearchResult fr = rank("pytorch-fsdp", searched);
  EXPECT_FALSE(searched);
  for (const auto& x : fr.best) EXPECT_TRUE(x.layout.split.even());
}

TEST(PipelineSplit, CliTakesMegatronsFlagsAndExportsThem) {
  const std::vector<std::string> base = {"--model",
                                         "llama3.1-405b",
                                         "--cluster",
                                         "dgx-h100",
                                         "--seq",
                                         "8192",
                                         "--tp",
                                         "8",
                                         "--pp",
                                         "16",
                                         "--gpus",
                                         "512",
                                         "--gbs",
                                         "512",
                                         "--recompute",
                                         "full",
                                         "--decoder-first-pipeline-num-layers",
                                         "7",
                                         "--decoder-last-pipeline-num-layers",
                                         "7"};
  std::vector<std::string> args = {"estimate"};
  args.insert(args.end(), base.begin(), base.end());
  args.emplace_back("--json");
  const auto r = test::run_cli(args);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["layout"]["stage_layers"].size(), 16u);
  EXPECT_EQ(j["layout"]["stage_layers"][0], 7);
  EXPECT_EQ(j["layout"]["stage_layers"][1], 8);
  EXPECT_EQ(j["layout"]["decoder_first_pipeline_num_layers"], 7);
  args = {"estimate"};
  args.insert(args.end(), base.begin(), base.end());
  const auto text = test::run_cli(args);
  EXPECT_NE(text.out.find("pp 16 (layers 7+14x8+7)"), std::string::npos) << text.out;
  args = {"launch", "--export", "megatron"};
  args.insert(args.end(), base.begin(), base.end());
  const auto launch = test::run_cli(args);
  ASSERT_EQ(launch.code, 0) << launch.err;
  EXPECT_NE(launch.out.find("--decoder-first-pipeline-num-layers 7"), std::string::npos) << launch.out;
  EXPECT_NE(launch.out.find("--decoder-last-pipeline-num-layers 7"), std::string::npos) << launch.out;
  // Without the flags, p ∤ L is refused naming them; a framework without uneven stages refuses the flags.
  args = {"estimate"};
  args.insert(args.end(), base.begin(), base.end() - 4);
  const auto refused = test::run_cli(args);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("--decoder-first-pipeline-num-layers"), std::string::npos) << refused.err;
  args = {"estimate", "--framework", "pytorch-fsdp"};
  args.insert(args.end(), base.begin(), base.end());
  const auto fsdp = test::run_cli(args);
  EXPECT_EQ(fsdp.code, 2);
  EXPECT_NE(fsdp.err.find("does not split pipeline stages unevenly"), std::string::npos) << fsdp.err;
}

}  // namespace
}  // namespace headroom
