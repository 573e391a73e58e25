// torchtitan as a framework: its defaults, what it refuses, and the pieces it adds (per-op checkpointing, compile,
// a cluster's power limit).
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {
namespace {

class TorchtitanTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  FrameworkProfile torchtitan = lib.framework("torchtitan");
  FrameworkProfile megatron = lib.framework("megatron");

  [[nodiscard]] static LayoutRequest job() {
    LayoutRequest r;
    r.gpus = 8, r.seq = 8192, r.gbs = 16, r.mbs = 2;
    return r;
  }
};

// The Llama 3 8B recipe as torchtitan ships it: FSDP2 of every block over all GPUs, per-op checkpointing, BF16
// compute with FP32 shards (16 B per parameter of the shard: weight 2 + gradient 4 + optimizer 10).
TEST_F(TorchtitanTest, DefaultsAreItsLlamaRecipe) {
  const Layout l = build_layout(llama8b, torchtitan, job());
  EXPECT_EQ(l.recompute, Recompute::op);
  EXPECT_EQ(sharding_code(l.sharding), "GGG");
  EXPECT_GT(l.fsdp_unit_buffers, 0);
  EXPECT_FALSE(l.compile);
  EXPECT_DOUBLE_EQ(l.precision.weight_bytes + l.precision.grad_bytes + l.precision.optimizer_bytes, 16.0);
}

TEST_F(TorchtitanTest, RefusesWhatItsPerOpCheckpointingDoesNotPrice) {
  const auto error_of = [&](const ModelSpec& m, const LayoutRequest& r, const FrameworkProfile& f) {
    try {
      (void)build_layout(m, f, r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  LayoutRequest r = job();
  r.fp8 = Fp8Recipe::tensorwise;
  EXPECT_NE(error_of(llama8b, r, torchtitan).find("recompute op (torchtitan's per-op checkpointing) with FP8"),
            std::string::npos);
  r.recompute = Recompute::full;  // FP8 with full checkpointing is priced
  EXPECT_NO_THROW((void)build_layout(llama8b, torchtitan, r));
  r = job();
  r.recompute = Recompute::selective;
  EXPECT_NE(error_of(llama8b, r, torchtitan).find("selective is Megatron-LM's core-attention recompute"),
            std::string::npos);
  r.recompute = Recompute::op;
  EXPECT_NE(error_of(llama8b, r, megatron).find("op is torchtitan's per-op checkpointing: --framework torchtitan"),
            std::string::npos);
  r = job();
  r.compile = true;
  EXPECT_NE(error_of(llama8b, r, megatron).find("does not torch.compile its blocks (--compile"), std::string::npos);
  EXPECT_TRUE(build_layout(llama8b, torchtitan, r).compile);
  r = job();
  r.lora_rank = 16;
  EXPECT_NE(error_of(llama8b, r, torchtitan).find("with LoRA adapters"), std::string::npos);
  EXPECT_FALSE(op_recompute_priced(lib.model("mixtral-8x7b"), Layout{}));
  EXPECT_FALSE(op_recompute_priced(lib.model("deepseek-v3"), Layout{}));
  // Its saved outputs are counted for a Llama block's seven matmuls: not a plain MLP's, not a parallel residual's.
  EXPECT_FALSE(op_recompute_priced(lib.model("gpt2-xl"), Layout{}));
  ModelSpec parallel = llama8b;
  parallel.parallel_residual = true;
  EXPECT_FALSE(op_recompute_priced(parallel, Layout{}));
  EXPECT_TRUE(op_recompute_priced(llama8b, Layout{}));
}

// torchtitan splits 126 layers over 8 single-stage ranks as 15, 16 × 6, 15 (pipelining_utils.py
// generate_split_points): the first and last stages' counts, the middle ones even.
TEST_F(TorchtitanTest, GeneratedPipelineSplitsAreUnevenStages) {
  LayoutRequest r;
  r.gpus = 64, r.tp = 8, r.pp = 8, r.seq = 8192, r.gbs = 64, r.recompute = Recompute::full;
  r.sharding = parse_sharding_code("NGG");
  r.split.first_stage_layers = 15, r.split.last_stage_layers = 15;
  const Layout l = build_layout(lib.model("llama3.1-405b"), torchtitan, r);
  EXPECT_EQ(stage_layers(lib.model("llama3.1-405b"), l, 0), 15);
  EXPECT_EQ(stage_layers(lib.model("llama3.1-405b"), l, 3), 16);
}

// Under a pipeline FSDP keeps each stage's weights gathered and accumulates its gradients unsharded until the last
// micro-batch's backward (torch.distributed.pipelining), in the reduce dtype (torchtitan's FP32): 2 + 4 B per parameter
// of the stage at the loss already.
TEST_F(TorchtitanTest, PipelinedFsdpAccumulatesUnshardedGradients) {
  LayoutRequest r;
  r.gpus = 16, r.pp = 2, r.seq = 8192, r.gbs = 16, r.recompute = Recompute::full;
  r.sharding = parse_sharding_code("NGG");
  const Layout l = build_layout(llama8b, torchtitan, r);
  const ClusterSpec c = lib.cluster("dgx-h100");
  const double params = stage_parameters_per_gpu(llama8b, l, 0);
  const StageMemory a = stage_memory_at(llama8b, c, l, torchtitan.residual, 0, StepMoment::activations);
  EXPECT_DOUBLE_EQ(a.grads, 4.0 * params);
  EXPECT_DOUBLE_EQ(a.params, 2.0 * params);
  const StageMemory g = stage_memory_at(llama8b, c, l, torchtitan.residual, 0, StepMoment::gradients);
  EXPECT_DOUBLE_EQ(g.grads, 4.0 * params + 4.0 * params / 8.0);  // and the FP32 shard of the last reduce-scatter
}

// A bare GPU name picks the cluster named after it where there is one (the 4D paper's h100-94gb-x4, not Grand Teton's
// hosts of the same GPU), else the first by name.
TEST_F(TorchtitanTest, AGpuPicksTheClusterNamedAfterIt) {
  EXPECT_EQ(lib.cluster_for_gpu(lib.gpu("h100-94gb")).name, "h100-94gb-x4");
  EXPECT_EQ(lib.cluster_for_gpu(lib.gpu("h100-80gb")).name, "dgx-h100");
}

}  // namespace
}  // namespace headroom
