// Megatron-LM's --first-last-layers-bf16: an FP8 run's first and last decoder layers in BF16, where they sit, what
// they store and take, and what is refused.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "megatron_fixture.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/search.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class Bf16LayersTest : public test::MegatronOnH100 {
 protected:
  ModelSpec lite = lib.model("deepseek-v2-lite");

  // Llama 3.1 8B in FP8 with current scaling on 16 GPUs, t = 2, p = 2.
  [[nodiscard]] static LayoutRequest job(bool bf16, std::int64_t start = 1, std::int64_t end = 1) {
    LayoutRequest r;
    r.gpus = 16, r.tp = 2, r.pp = 2, r.seq = 8192, r.gbs = 64, r.fp8 = Fp8Recipe::tensorwise;
    r.first_last_layers_bf16 = bf16;
    if (bf16 || start != 1 || end != 1) r.bf16_layers_at_start = start, r.bf16_layers_at_end = end;
    return r;
  }
  [[nodiscard]] std::string refusal(const ModelSpec& m, const LayoutRequest& r) const {
    try {
      validate_layout(m, build_layout(m, megatron, r));
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }
};

// The first N layers sit on the first stage's first chunk and the last M on the last stage's last; with experts, the
// leading dense layers are counted apart.
TEST_F(Bf16LayersTest, WhereTheLayersSit) {
  const Layout l = build_layout(llama8b, megatron, job(true, 2, 1));
  EXPECT_EQ(stage_bf16_layers(llama8b, l, 0).dense, 2);
  EXPECT_EQ(stage_bf16_layers(llama8b, l, 1).dense, 1);
  EXPECT_EQ(stage_bf16_layers(llama8b, build_layout(llama8b, megatron, job(false)), 0).total(), 0);
  LayoutRequest v = job(true);
  v.pp = 2, v.vpp = 4, v.gpus = 16;
  const Layout interleaved = build_layout(llama8b, megatron, v);
  EXPECT_EQ(stage_bf16_layers(llama8b, interleaved, 0).total(), 1);  // chunk 0 of stage 0
  EXPECT_EQ(stage_bf16_layers(llama8b, interleaved, 1).total(), 1);  // chunk 3 of stage 1
  LayoutRequest e = job(true, 2, 1);
  e.tp = 1, e.pp = 1, e.gpus = 8, e.ep = 8, e.seq = 4096;
  const Layout experts = build_layout(lite, megatron, e);  // its first layer is dense
  EXPECT_EQ(stage_bf16_layers(lite, experts, 0).dense, 1);
  EXPECT_EQ(stage_bf16_layers(lite, experts, 0).moe, 2);
}

// A BF16 layer keeps no FP8 weight copy and stores its inputs in BF16; its GEMMs run at the BF16 peak.
TEST_F(Bf16LayersTest, TheLayersStoreAndTakeWhatBf16Does) {
  const Layout fp8 = build_layout(llama8b, megatron, job(false)), mixed = build_layout(llama8b, megatron, job(true));
  const double layer_weights = linear_weight_parameters_per_gpu(llama8b, fp8, false);
  EXPECT_DOUBLE_EQ(stage_linear_weight_parameters_per_gpu(llama8b, fp8, 0) -
                       stage_linear_weight_parameters_per_gpu(llama8b, mixed, 0),
                   layer_weights);
  EXPECT_GT(stage_activation_bytes(llama8b, mixed, 0), stage_activation_bytes(llama8b, fp8, 0));
  const PerfContext p(datasheet, h100);
  const MicrobatchPasses mb = microbatch_passes(llama8b, p, mixed);
  EXPECT_GT(mb.bf16_layer.forward.total(), mb.layer.forward.total());
  EXPECT_GT(estimate_perf(llama8b, p, mixed).step_time_s, estimate_perf(llama8b, p, fp8).step_time_s);
  // Every layer in BF16 at either end is a BF16 run's layer.
  EXPECT_DOUBLE_EQ(mb.bf16_layer.forward.total(),
                   microbatch_passes(llama8b, p, without_fp8(mixed)).layer.forward.total());
}

// A search from such a job walks only layouts whose BF16 layers sit in the end chunks: every one validate_layout takes.
TEST_F(Bf16LayersTest, SearchesKeepTheLayersWherePriced) {
  const Layout base = build_layout(llama8b, megatron, job(true, 4, 4));
  SearchOptions o;
  o.gpus = 16, o.seq = 8192, o.gbs = 64;
  std::size_t walked = 0, vpp = 0;
  o.on_enumerated = [&](const Layout& l) {
    ++walked;
    vpp += l.vpp > 1 ? 1 : 0;
    EXPECT_NO_THROW(validate_layout(llama8b, l)) << l.tp << " " << l.pp << " " << l.vpp;
  };
  o.enumerate_only = true;
  (void)rank_layouts(llama8b, h100, base, megatron.residual, datasheet, o);
  EXPECT_GT(walked, 0u);
  EXPECT_GT(vpp, 0u);  // interleaved layouts with chunks of 4 layers or more stay
}

TEST_F(Bf16LayersTest, RefusedWhereMegatronRefusesIt) {
  LayoutRequest bf16 = job(true);
  bf16.fp8 = Fp8Recipe::none;
  EXPECT_NE(refusal(llama8b, bf16).find("needs FP8 training"), std::string::npos);
  LayoutRequest delayed = job(true);
  delayed.fp8 = Fp8Recipe::delayed;
  EXPECT_NE(refusal(llama8b, delayed).find("delayed"), std::string::npos);
  EXPECT_NE(refusal(llama8b, job(true, 17, 1)).find("0 to the 16 layers"), std::string::npos);
  EXPECT_NE(refusal(llama8b, job(false, 2, 1)).find("needs --first-last-layers-bf16"), std::string::npos);
  LayoutRequest spill = job(true, 5, 1);
  spill.vpp = 4;  // chunks of 4 layers
  EXPECT_NE(refusal(llama8b, spill).find("beyond the first and last model chunks"), std::string::npos);
  EXPECT_EQ(refusal(llama8b, job(true)), "accepted");
}

}  // namespace
}  // namespace headroom
