// Full recompute by layers (layout.hpp RecomputeMethod): Megatron-LM's block method, uniform groups of N layers and
// torchtitan's every N-th block, against the whole-layer recompute and no recompute they lie between.
#include <cmath>

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class RecomputeLayersTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");  // 32 layers
  ClusterSpec cluster = lib.cluster("dgx-h100");
  FrameworkProfile megatron = lib.framework("megatron");
  FrameworkProfile torchtitan = lib.framework("torchtitan");
  PerfCoefficients coefficients = default_perf_coefficients(lib, "megatron");

  [[nodiscard]] Layout layout(RecomputeMethod method, std::int64_t n, std::int64_t pp = 1, std::int64_t vpp = 1,
                              Recompute recompute = Recompute::full) const {
    LayoutRequest r;
    r.gpus = 8 * pp, r.tp = 8, r.pp = pp, r.vpp = vpp, r.seq = 8192, r.mbs = 1, r.gbs = 4 * pp;
    r.recompute = recompute, r.recompute_method = method, r.recompute_num_layers = n;
    return build_layout(llama8b, megatron, r);
  }
  [[nodiscard]] double step(const Layout& l) const {
    return estimate_perf(llama8b, cluster, l, coefficients).step_time_s;
  }
  [[nodiscard]] double layer_bytes(Recompute r) const {
    Layout l = layout(RecomputeMethod::uniform, 1);
    l.recompute = r;
    return activation_bytes_per_layer(llama8b, l);
  }
};

// Every layer of every chunk recomputed is full recompute, whichever way it is said.
TEST_F(RecomputeLayersTest, AllLayersIsFullRecompute) {
  const Layout full = layout(RecomputeMethod::uniform, 1, 4, 2);
  for (const Layout& l : {layout(RecomputeMethod::block, 4, 4, 2), layout(RecomputeMethod::block, 9, 4, 2)}) {
    for (std::int64_t stage = 0; stage < 4; ++stage) {
      EXPECT_EQ(recomputed_layers(llama8b, l, stage), 8);
      EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, l, stage), stage_activation_bytes(llama8b, full, stage));
    }
    EXPECT_DOUBLE_EQ(step(l), step(full));
  }
}

// Block k: the first k layers of each chunk keep their input, the others everything; one layer re-materialised.
// Stage 0 of 1F1B over p = 2 holds 2 micro-batches of its 16 layers.
TEST_F(RecomputeLayersTest, BlockKeepsTheOtherLayersWhole) {
  const double input = layer_bytes(Recompute::full), whole = layer_bytes(Recompute::none);
  const Layout full = layout(RecomputeMethod::uniform, 1, 2), block = layout(RecomputeMethod::block, 5, 2);
  EXPECT_EQ(recomputed_layers(llama8b, block, 0), 5);
  EXPECT_NEAR(stage_activation_bytes(llama8b, block, 0) - stage_activation_bytes(llama8b, full, 0),
              2.0 * (16 - 5) * (whole - input), 1e-6 * whole);
  // Interleaved, v = 2 chunks of 8 layers: k per chunk.
  EXPECT_EQ(recomputed_layers(llama8b, layout(RecomputeMethod::block, 5, 2, 2), 0), 10);
}

// The step time moves linearly from no recompute to full recompute with the layers recomputed.
TEST_F(RecomputeLayersTest, StepTimeIsLinearInTheLayersRecomputed) {
  const double none = step(layout(RecomputeMethod::uniform, 1, 1, 1, Recompute::none));
  const double full = step(layout(RecomputeMethod::uniform, 1));
  ASSERT_GT(full, none);
  for (const std::int64_t k : {1, 8, 20, 31})
    EXPECT_NEAR(step(layout(RecomputeMethod::block, k)), none + (full - none) * k / 32.0, 1e-9 * full) << k;
}

// Uniform groups of N: one input kept a group, the group's N layers re-materialised at once; the time is full
// recompute's.
TEST_F(RecomputeLayersTest, UniformGroupsKeepOneInputAGroup) {
  const double input = layer_bytes(Recompute::full), whole = layer_bytes(Recompute::none);
  const Layout full = layout(RecomputeMethod::uniform, 1), groups = layout(RecomputeMethod::uniform, 5);
  EXPECT_NEAR(stage_activation_bytes(llama8b, groups, 0) - stage_activation_bytes(llama8b, full, 0),
              (std::ceil(32.0 / 5.0) - 32.0) * input + (5.0 - 1.0) * whole, 1e-6 * whole);
  EXPECT_DOUBLE_EQ(step(groups), step(full));
}

// torchtitan's every N-th block: ⌊L_GPU / N⌋ of a GPU's blocks; N = 1 is full recompute.
TEST_F(RecomputeLayersTest, EveryNthBlockOfAGpu) {
  LayoutRequest r;
  r.gpus = 8, r.seq = 8192, r.mbs = 1, r.gbs = 8, r.recompute = Recompute::full;
  r.recompute_method = RecomputeMethod::every, r.recompute_num_layers = 3;
  const Layout every3 = build_layout(llama8b, torchtitan, r);
  EXPECT_EQ(recomputed_layers(llama8b, every3, 0), 10);
  r.recompute_num_layers = 1;
  const Layout every1 = build_layout(llama8b, torchtitan, r);
  r.recompute_method = RecomputeMethod::uniform;
  const Layout full = build_layout(llama8b, torchtitan, r);
  const ResidualModel& residual = torchtitan.residual;
  EXPECT_EQ(estimate_memory(llama8b, cluster, every1, residual).peak_bytes,
            estimate_memory(llama8b, cluster, full, residual).peak_bytes);
  EXPECT_LT(estimate_memory(llama8b, cluster, every3, residual).peak_bytes,
            estimate_memory(llama8b, cluster,
                            build_layout(llama8b, torchtitan,
                                         [&] {
                                           LayoutRequest n = r;
                                           n.recompute = Recompute::none;
                                           return n;
                                         }()),
                            residual)
                .peak_bytes);
}

// What is not priced is refused naming the knob: the method without full recompute, a framework that does not run
// it, experts.
TEST_F(RecomputeLayersTest, RefusesWhatItDoesNotPrice) {
  EXPECT_NE(test::error_of([&] {
              (void)layout(RecomputeMethod::block, 4, 1, 1, Recompute::selective);
            }).find("block --recompute-num-layers 4 needs --recompute full"),
            std::string::npos);
  LayoutRequest r;
  r.gpus = 8, r.seq = 8192, r.recompute = Recompute::full, r.recompute_method = RecomputeMethod::block;
  r.recompute_num_layers = 4;
  EXPECT_NE(test::error_of([&] {
              (void)build_layout(llama8b, torchtitan, r);
            }).find("framework torchtitan does not recompute by --recompute-method block"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              (void)build_layout(llama8b, lib.framework("pytorch-fsdp"), r);
            }).find("it runs every layer on its own)"),
            std::string::npos);
  r.tp = 1, r.ep = 8;
  EXPECT_NE(
      test::error_of([&] { (void)build_layout(lib.model("mixtral-8x7b"), megatron, r); }).find("with the experts of"),
      std::string::npos);
}

}  // namespace
}  // namespace headroom
