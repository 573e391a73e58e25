#include "headroom/estimator/throughput.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "headroom/estimator/error.hpp"

namespace headroom {
namespace {

class ThroughputTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec a100 = lib.cluster("dgx-a100-40gb");
  PerfCoefficients datasheet;

  Layout layout(std::int64_t t, std::int64_t c, std::int64_t p, std::int64_t b, std::int64_t gpus) const {
    Layout l;
    l.tp = t; l.cp = c; l.pp = p; l.mbs = b; l.dp = gpus / (t * c * p); l.seq = 8192; l.gbs = 1024;
    return l;
  }
};

TEST_F(ThroughputTest, ReportedNumbersAreConsistent) {
  const Layout l = layout(4, 1, 2, 1, 32);
  const PerfEstimate e = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_GT(e.step_time_s, 0);
  EXPECT_DOUBLE_EQ(e.step_time_s, e.breakdown.total_s());
  EXPECT_DOUBLE_EQ(e.tokens_per_s, 1024.0 * 8192 / e.step_time_s);
  EXPECT_DOUBLE_EQ(e.tflops_per_gpu, e.model_flops / e.step_time_s / 32 / 1e12);
  EXPECT_DOUBLE_EQ(e.mfu, e.tflops_per_gpu * 1e12 / a100.gpu.bf16_flops);
  EXPECT_DOUBLE_EQ(e.pts_s, e.step_time_s / 1024);
  EXPECT_GT(e.mfu, 0.2);
  EXPECT_LT(e.mfu, 0.9);
}

// 1F1B bubble (p − 1)/m of a stage time; interleaving divides it by v.
TEST_F(ThroughputTest, BubbleShrinksWithMicrobatchesAndInterleaving) {
  Layout l = layout(2, 1, 4, 1, 64);  // d = 8, m = 128
  const PerfEstimate base = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_GT(base.breakdown.bubble_s, 0);
  l.vpp = 2;
  l.schedule = Schedule::interleaved;
  const PerfEstimate inter = estimate_perf(llama8b, a100, l, datasheet);
  EXPECT_NEAR(inter.breakdown.bubble_s, base.breakdown.bubble_s / 2, 0.05 * base.breakdown.bubble_s);
  Layout single = layout(2, 1, 1, 1, 64);
  EXPECT_EQ(estimate_perf(llama8b, a100, single, datasheet).breakdown.bubble_s, 0.0);
}

TEST_F(ThroughputTest, RecomputeAddsComputeTime) {
  Layout l = layout(4, 1, 1, 1, 8);
  const double none = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  l.recompute = Recompute::selective;
  const double selective = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  l.recompute = Recompute::full;
  const double full = estimate_perf(llama8b, a100, l, datasheet).breakdown.compute_s();
  EXPECT_LT(none, selective);
  EXPECT_LT(selective, full);
  EXPECT_NEAR(full / none, 4.0 / 3.0, 0.1);  // one more forward of three passes
}

// TP beyond a node pays the NIC; CP across nodes likewise.
TEST_F(ThroughputTest, CommunicationLevelFollowsRankPlacement) {
  EXPECT_EQ(members_per_node(1, 8, 8), 8);
  EXPECT_EQ(members_per_node(1, 16, 8), 8);
  EXPECT_EQ(members_per_node(4, 4, 8), 2);
  EXPECT_EQ(members_per_node(8, 4, 8), 1);
  const PerfEstimate in_node = estimate_perf(llama8b, a100, layout(8, 1, 1, 1, 16), datasheet);
  ClusterSpec small = a100;
  small.gpus_per_node = 4;
  const PerfEstimate across = estimate_perf(llama8b, small, layout(8, 1, 1, 1, 16), datasheet);
  EXPECT_GT(across.breakdown.tp_comm_s, 3 * in_node.breakdown.tp_comm_s);
}

TEST_F(ThroughputTest, FullyShardedDataParallelCostsMoreCommunication) {
  Layout l = layout(1, 1, 1, 1, 64);
  l.seq = 2048;
  l.gbs = 512;
  const double zero1 = estimate_perf(llama8b, a100, l, datasheet).breakdown.dp_comm_s;
  l.sharding = {Shard::global, Shard::global, Shard::global};
  const double zero3 = estimate_perf(llama8b, a100, l, datasheet).breakdown.dp_comm_s;
  EXPECT_GT(zero3, zero1);
}

TEST_F(ThroughputTest, CoefficientsRoundTripAndRejectUnknownKeys) {
  PerfCoefficients c;
  c.name = "x";
  c.gemm_efficiency = 0.61;
  c.layer_overhead_s = 25e-6;
  c.gpus.push_back({"a100-40gb", 0.8, 0.4});
  const PerfCoefficients back = perf_coefficients_from_json(perf_coefficients_to_json(c), "test");
  EXPECT_EQ(back.name, "x");
  EXPECT_DOUBLE_EQ(back.gemm_efficiency, 0.61);
  EXPECT_NEAR(back.layer_overhead_s, 25e-6, 1e-15);
  ASSERT_EQ(back.gpus.size(), 1u);
  EXPECT_EQ(PerfContext(back, a100).gemm_efficiency, 0.8);
  EXPECT_THROW((void)perf_coefficients_from_json(nlohmann::json{{"gemm_eficiency", 0.5}}, "test"), Error);
  EXPECT_THROW((void)perf_coefficients_from_json(nlohmann::json{{"dp_overlap", -1}}, "test"), Error);
}

TEST_F(ThroughputTest, ShippedCoefficientsLoad) {
  const PerfCoefficients c = default_perf_coefficients(lib, "megatron");
  EXPECT_GT(c.gemm_efficiency, 0);
  EXPECT_EQ(default_perf_coefficients(lib, "no-such-framework").name, "datasheet");
}

}  // namespace
}  // namespace headroom
