// DeepSpeed's ZeRO (data/frameworks/deepspeed.json, Layout::zero): its gradient buckets, ZeRO-3's gathered parameters
// and which collectives hide behind the passes, each against its closed form from DeepSpeed's code.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class DeepspeedTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec a100 = lib.cluster("dgx-a100-80gb");
  FrameworkProfile deepspeed = lib.framework("deepspeed");
  FrameworkProfile megatron = lib.framework("megatron");

  // Llama-3.1-8B on 64 GPUs, 4,096 tokens, full recompute, under the sharding `code`.
  [[nodiscard]] static LayoutRequest job(const char* code) {
    LayoutRequest r;
    r.gpus = 64, r.seq = 4096, r.recompute = Recompute::full;
    r.sharding = parse_sharding_code(code);
    return r;
  }
  [[nodiscard]] Layout layout(const LayoutRequest& r) const { return build_layout(llama8b, deepspeed, r); }
};

// DeepSpeed's defaults (zero/config.py): reduce_bucket_size 5e8 elements in BF16, one bucket at stage 3 and at stage 2
// without overlap_comm, two with it (stage_1_and_2.py's double buffering), none under the BF16 optimizer of stage 1.
TEST_F(DeepspeedTest, GradientBucketsAreDeepspeedsBuffers) {
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(layout(job("NNG"))), 0.0);
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(layout(job("NGG"))), 5e8 * 2.0);
  LayoutRequest overlapped = job("NGG");
  overlapped.overlap_comm = true;
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(layout(overlapped)), 2.0 * 5e8 * 2.0);
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(layout(job("GGG"))), 5e8 * 2.0);
  LayoutRequest small = job("GGG");
  small.reduce_bucket_size = 1000;
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(layout(small)), 1000 * 2.0);
  // Another framework has none.
  LayoutRequest r = job("NGG");
  r.sharding.reset();
  EXPECT_DOUBLE_EQ(zero_gradient_bucket_bytes(build_layout(llama8b, megatron, r)), 0.0);
}

// Llama-3.1-8B: LM head h·v = 4096·128256 = 525,336,576 parameters, a layer 218,112,000 (q,k,v,o 41,943,040, SwiGLU
// 176,160,768, two norms 8,192). With DeepSpeed's distance of 1e9 the head's two passes (1,050,673,152) already exceed
// it: only the head stays, and 5e7 more are prefetched (below max_live 1e9).
TEST_F(DeepspeedTest, Zero3KeepsWhatTheReuseDistanceReaches) {
  const double head = 4096.0 * 128256.0, layer = 218112000.0;
  ASSERT_DOUBLE_EQ(stage_decoder_parameters_per_gpu(llama8b, layout(job("GGG")), 0), 32.0 * layer);
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(job("GGG")), 0), head + 5e7);
  // A distance of 2e9 keeps the k-th last layer while 2·k·layer + 2·head < 2e9: k = 0, 1, 2 (3 layers); the 1.18e9
  // gathered then exceed max_live 1e9, so nothing is prefetched.
  LayoutRequest far = job("GGG");
  far.max_reuse_distance = 2'000'000'000;
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(far), 0), 3.0 * layer + head);
  far.max_live_parameters = 2'000'000'000;  // room left: the prefetch bucket again
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(far), 0), 3.0 * layer + head + 5e7);
  // Distance 0 releases everything after use: the prefetch alone; no prefetch either: nothing gathered at the turn.
  LayoutRequest none = job("GGG");
  none.max_reuse_distance = 0;
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(none), 0), 5e7);
  none.prefetch_bucket_size = 0;
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(none), 0), 0.0);
  // A distance past the whole model keeps every layer; the prefetch has nothing left to fetch.
  LayoutRequest all = job("GGG");
  all.max_reuse_distance = 100'000'000'000;
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(all), 0), 32.0 * layer + head);
  EXPECT_DOUBLE_EQ(zero3_gathered_parameters(llama8b, layout(job("NGG")), 0), 0.0);
  // In the stage's memory: BF16 weights of the shard and of what is gathered.
  const Layout l = layout(job("GGG"));
  const StageMemory s = stage_memory(llama8b, a100, l, deepspeed.residual, 0);
  EXPECT_DOUBLE_EQ(s.params, 2.0 * (stage_parameters_per_gpu(llama8b, l, 0) / 64.0 + head + 5e7));
}

// ZeRO-3 prefetches on its own stream; reductions hide behind the backward with overlap_comm only (DeepSpeed's default
// at stage 3); stages 1 and 2 gather the updated weights in the optimizer step, exposed.
TEST_F(DeepspeedTest, OnlyWhatRunsOnItsOwnStreamOverlaps) {
  const PerfContext p(default_perf_coefficients(lib, "deepspeed"), a100);
  ASSERT_DOUBLE_EQ(p.dp_overlap, 1.0);
  const auto shares = [&](const LayoutRequest& r) { return dp_overlap_shares(p, layout(r)); };
  EXPECT_DOUBLE_EQ(shares(job("GGG")).gathers, 1.0);
  EXPECT_DOUBLE_EQ(shares(job("GGG")).reductions, 1.0);
  LayoutRequest exposed = job("GGG");
  exposed.overlap_comm = false;
  EXPECT_DOUBLE_EQ(shares(exposed).gathers, 1.0);
  EXPECT_DOUBLE_EQ(shares(exposed).reductions, 0.0);
  EXPECT_DOUBLE_EQ(shares(job("NGG")).gathers, 0.0);
  EXPECT_DOUBLE_EQ(shares(job("NGG")).reductions, 0.0);
  LayoutRequest overlapped = job("NGG");
  overlapped.overlap_comm = true;
  EXPECT_DOUBLE_EQ(shares(overlapped).reductions, 1.0);
  EXPECT_DOUBLE_EQ(shares(job("NNG")).reductions, 0.0);
  // Exposed reductions lengthen the step by at most what they take.
  const double hidden = estimate_perf(llama8b, p, layout(job("GGG"))).step_time_s;
  const double shown = estimate_perf(llama8b, p, layout(exposed)).step_time_s;
  EXPECT_GT(shown, hidden);
  // Other frameworks: their one share for both.
  LayoutRequest r = job("NNG");
  r.sharding.reset();
  const PerfContext mp(default_perf_coefficients(lib, "megatron"), a100);
  const DpOverlap m = dp_overlap_shares(mp, build_layout(llama8b, megatron, r));
  EXPECT_DOUBLE_EQ(m.gathers, mp.dp_overlap);
  EXPECT_DOUBLE_EQ(m.reductions, mp.dp_overlap);
}

// Refused as DeepSpeed would not run it, or as headroom does not price it, naming the knob.
TEST_F(DeepspeedTest, RefusesWhatDeepspeedDoesNotRun) {
  LayoutRequest stage1 = job("NNG");
  stage1.overlap_comm = true;
  EXPECT_NE(test::error_of([&] { (void)layout(stage1); }).find("--overlap-comm"), std::string::npos);
  LayoutRequest piped = job("GGG");
  piped.pp = 2;
  EXPECT_NE(test::error_of([&] { (void)layout(piped); }).find("with a pipeline"), std::string::npos);
  LayoutRequest other = job("NNG");
  other.sharding.reset();
  other.max_reuse_distance = 0;
  EXPECT_NE(test::error_of([&] { (void)build_layout(llama8b, megatron, other); }).find("DeepSpeed's ZeRO"),
            std::string::npos);
}

// ZeRO++'s hpZ as PaRO's ZeRO++ row: a second BF16 shard over the node's DP ranks (Ψ/M more), the backward's gather
// inside the node (PaRO Table 3: no inter-node volume), refused where the shard is not the node's ranks.
TEST_F(DeepspeedTest, HpzIsPaRosZeroPlusPlus) {
  LayoutRequest hpz = job("GGG");
  hpz.hpz_partition_size = 8;
  const Layout l = layout(hpz), plain = layout(job("GGG"));
  EXPECT_NO_THROW(validate_on_cluster(llama8b, l, a100));
  const double stage = stage_parameters_per_gpu(llama8b, l, 0);
  EXPECT_DOUBLE_EQ(zero_hpz_secondary_parameters(a100, l, stage), stage / 8.0);
  EXPECT_DOUBLE_EQ(stage_memory(llama8b, a100, l, deepspeed.residual, 0).params -
                       stage_memory(llama8b, a100, plain, deepspeed.residual, 0).params,
                   2.0 * stage / 8.0);
  // Without overlap the gathers show: the backward's, now on NVLink, take less.
  hpz.overlap_comm = false;
  LayoutRequest flat = job("GGG");
  flat.overlap_comm = false;
  const PerfContext p(default_perf_coefficients(lib, "deepspeed"), a100);
  PerfContext exposed = p;
  exposed.dp_overlap = 0;  // every collective shown
  EXPECT_LT(estimate_perf(llama8b, exposed, layout(hpz)).breakdown.dp_comm_s,
            estimate_perf(llama8b, exposed, layout(flat)).breakdown.dp_comm_s);
  hpz.hpz_partition_size = 4;
  EXPECT_NE(test::error_of([&] { validate_on_cluster(llama8b, layout(hpz), a100); }).find("(valid: 8)"),
            std::string::npos);
  LayoutRequest stage2 = job("NGG");
  stage2.hpz_partition_size = 8;
  EXPECT_NE(test::error_of([&] { (void)layout(stage2); }).find("needs ZeRO-3"), std::string::npos);
  // A layout that carries hpZ to unsharded parameters (a search's other shardings) has no secondary shard.
  Layout zero2 = layout(job("NGG"));
  zero2.zero.hpz_partition_size = 8;
  EXPECT_DOUBLE_EQ(zero_hpz_secondary_parameters(a100, zero2, stage), 0.0);
}

// DeepSpeed's pipeline engine partitions the decoder layers itself (pipe/module.py partition_method type:transformer,
// runtime/utils.py partition_balanced): any p up to L, the first L mod p stages one layer more, where Megatron-LM
// needs p | L or its first/last stage counts.
TEST_F(DeepspeedTest, PipelineStagesAreDeepspeedsBalancedPartition) {
  LayoutRequest r = job("NNG");
  r.gpus = 48, r.pp = 6;  // 32 layers: 6, 6, 5, 5, 5, 5
  const Layout l = layout(r);
  EXPECT_TRUE(l.split.partition_balanced);
  validate_layout(llama8b, l);
  std::int64_t total = 0;
  for (std::int64_t stage = 0; stage < l.pp; ++stage) {
    EXPECT_EQ(stage_layers(llama8b, l, stage), stage < 2 ? 6 : 5) << stage;
    EXPECT_EQ(chunk_layers(llama8b, l, stage, 0), stage_layers(llama8b, l, stage)) << stage;
    total += stage_layers(llama8b, l, stage);
  }
  EXPECT_EQ(total, 32);
  Layout wide = l;
  wide.pp = 33;
  EXPECT_THROW(validate_layout(llama8b, wide), Error);
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);
}

}  // namespace
}  // namespace headroom
