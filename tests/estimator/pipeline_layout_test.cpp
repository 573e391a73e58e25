// Megatron-LM's --pipeline-model-parallel-layout (megatron/core/transformer/pipeline_parallel_layer_layout.py): its
// string form parsed as Megatron-LM parses it, checked against the model as it checks it, and priced stage by stage.
#include <gtest/gtest.h>

#include <numeric>

#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

// A Megatron layout of `pp` ranks for the model, with v set from the layout as build_layout sets it.
Layout with_layer_layout(const FrameworkProfile& f, std::int64_t pp, const std::string& text) {
  Layout l = default_layout(f);
  l.tp = 2, l.pp = pp, l.dp = 1, l.mbs = 1, l.seq = 4096, l.gbs = 4 * pp;
  set_layer_layout(f, text, l);
  if (l.vpp > 1) l.schedule = Schedule::interleaved;
  return l;
}

std::string refusal(const ModelSpec& m, const Layout& l) {
  try {
    validate_layout(m, l);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

// The docstring's example, DeepSeek-V3's 61 layers on 16 ranks of 2 chunks: Ettt|tt|...|tt|m|L.
TEST(PipelineLayout, ParsesMegatronsStringForm) {
  const PipelineLayerLayout x = parse_pipeline_layout("Et*3|(tt|)*29,m|L");
  ASSERT_EQ(x.stages(), 32);
  EXPECT_EQ(x.decoder_layers.front(), 3);
  EXPECT_EQ(x.decoder_layers[1], 2);
  EXPECT_EQ(x.decoder_layers[29], 2);
  EXPECT_EQ(x.decoder_layers[30], 0);
  EXPECT_EQ(std::accumulate(x.decoder_layers.begin(), x.decoder_layers.end(), 0LL), 61);
  EXPECT_EQ(x.mtp_layers[30], 1);
  // The list form names the same stages.
  std::vector<std::vector<std::string>> stages = {{"embedding", "decoder", "decoder", "decoder"}};
  for (int i = 0; i < 29; ++i) stages.push_back({"decoder", " Decoder "});
  stages.push_back({"mtp"});
  stages.push_back({"loss"});
  const PipelineLayerLayout y = parse_pipeline_layout(pipeline_layout_text(stages));
  EXPECT_EQ(y.decoder_layers, x.decoder_layers);
  EXPECT_EQ(y.mtp_layers, x.mtp_layers);
  EXPECT_THROW((void)pipeline_layout_text({{"embedding", "encoder", "loss"}}), Error);
}

TEST(PipelineLayout, RefusesWhatMegatronRefuses) {
  const auto message = [](const std::string& text) {
    try {
      (void)parse_pipeline_layout(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(message("Et*4|x|L").find("'x' is no layer"), std::string::npos);
  EXPECT_NE(message("tE|L").find("the embedding (E) must come first"), std::string::npos);
  EXPECT_NE(message("Et|EL").find("the embedding (E) must come first, once"), std::string::npos);
  EXPECT_NE(message("Et|Lt").find("the loss (L) must come last"), std::string::npos);
  EXPECT_NE(message("Et|mt|L").find("before the multi-token-prediction layers"), std::string::npos);
  // Repeats that would unroll without bound are refused, not expanded.
  EXPECT_NE(message("E(t|)*999999|L").find("past a million characters"), std::string::npos);
  EXPECT_NE(message("E(t|)*9999999|L").find("more than 6 digits"), std::string::npos);
  EXPECT_EQ(message("E,(t*2|)*0t|L"), "(accepted)");  // a zero repeat drops its group; commas are cosmetic

  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");  // 32 layers
  const FrameworkProfile f = lib.framework("megatron");
  EXPECT_NE(refusal(m, with_layer_layout(f, 2, "Et*16|t*15L")).find("places 31 decoder layers"), std::string::npos);
  // Empty stages before the embedding's or after the loss's (Megatron-LM takes them) would move them off the ranks
  // that are priced holding them.
  EXPECT_NE(refusal(m, with_layer_layout(f, 2, "Et*32L|")).find("the loss in 0 of 0..1"), std::string::npos);
  EXPECT_NE(refusal(m, with_layer_layout(f, 2, "|Et*32L")).find("the embedding in virtual stage 1"), std::string::npos);
  Layout both = with_layer_layout(f, 2, "Et*16|t*16L");
  both.split.first_stage_layers = 16;
  EXPECT_NE(refusal(m, both).find("Megatron-LM takes one or the other"), std::string::npos);
  Layout mtp = with_layer_layout(f, 2, "Et*16|t*16|m|L");
  mtp.mtp_layers = 1;
  EXPECT_NE(refusal(m, mtp).find("standalone"), std::string::npos);
  mtp = with_layer_layout(f, 2, "Et*16|t*16mL");
  mtp.mtp_layers = 1;
  EXPECT_EQ(refusal(m, mtp), "(accepted)");
  mtp.mtp_layers = 2;
  EXPECT_NE(refusal(m, mtp).find("places 1 multi-token-prediction layers"), std::string::npos);
  // Its stages over p set v; a v given must agree, and p must divide them.
  Layout l = default_layout(f);
  l.pp = 4, l.vpp = 3;
  EXPECT_THROW(set_layer_layout(f, "Et*4|(t*4|)*6t*4L", l), Error);
  l.pp = 3, l.vpp = 1;
  EXPECT_THROW(set_layer_layout(f, "Et*4|(t*4|)*6t*4L", l), Error);
  EXPECT_THROW(set_layer_layout(test::library().framework("torchtitan"), "Et*16|t*16L", l), Error);
}

// A layout that spells the even split (interleaved or not) prices exactly as the even split: it changes only which
// layers a stage holds.
TEST(PipelineLayout, TheEvenSplitSpelledOutPricesAsTheEvenSplit) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const FrameworkProfile f = lib.framework("megatron");
  const PerfCoefficients k = default_perf_coefficients(lib, "megatron");
  for (const auto& [text, v] : {std::pair{"Et*8|t*8|t*8|t*8L", 1}, std::pair{"Et*4|(t*4|)*6t*4L", 2}}) {
    const Layout given = with_layer_layout(f, 4, text);
    ASSERT_EQ(given.vpp, v);
    Layout even = given;
    even.split.layer_layout = nullptr;
    ASSERT_EQ(refusal(m, given), "(accepted)");
    EXPECT_DOUBLE_EQ(peak_memory_bytes(m, c, given, f.residual), peak_memory_bytes(m, c, even, f.residual)) << text;
    EXPECT_DOUBLE_EQ(estimate_perf(m, c, given, k).step_time_s, estimate_perf(m, c, even, k).step_time_s) << text;
  }
}

// Megatron-Bridge's Llama 3 70B FP8 performance recipe (perf_recipes/llama/h100/llama3.py): 40 virtual stages on 8
// ranks, one of them 3 layers (rank 3's last chunk), the loss's 1. Each rank holds its chunks' layers, any stage can
// peak, and the step waits on the heaviest.
TEST(PipelineLayout, StagesHoldTheirChunksLayers) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-70b");
  const ClusterSpec c = lib.cluster("dgx-h100");
  const FrameworkProfile f = lib.framework("megatron");
  Layout l = with_layer_layout(f, 8, "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
  l.tp = 4, l.dp = 2, l.gbs = 128, l.seq = 8192;
  ASSERT_EQ(refusal(m, l), "(accepted)");
  EXPECT_EQ(l.vpp, 5);
  std::vector<std::int64_t> layers;
  for (std::int64_t st = 0; st < l.pp; ++st) layers.push_back(stage_layers(m, l, st));
  EXPECT_EQ(layers, (std::vector<std::int64_t>{10, 10, 10, 11, 10, 10, 10, 9}));
  EXPECT_EQ(chunk_layers(m, l, 3, 4), 3);
  EXPECT_EQ(chunk_layers(m, l, 7, 4), 1);
  const MemoryEstimate e = estimate_memory(m, c, l, f.residual);
  EXPECT_DOUBLE_EQ(e.peak_bytes, peak_memory_bytes(m, c, l, f.residual));
  EXPECT_GT(e.stages[3].params, e.stages[2].params);
  EXPECT_EQ(pipeline_stage_counts(m, l).second.stage, 3);
  EXPECT_EQ(estimate_perf(m, c, l, default_perf_coefficients(lib, "megatron")).breakdown.slowest_stage, 3);
}

}  // namespace
}  // namespace headroom
