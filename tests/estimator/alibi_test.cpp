// ALiBi position biases and a norm of the embeddings (BLOOM, MPT): what they add to parameters, activations and
// unfused attention, each against its closed form, and where they are refused.
#include <cstdint>

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class AlibiTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec bloom = lib.model("bloom-176b");
  FrameworkProfile deepspeed = lib.framework("deepspeed");

  [[nodiscard]] Layout layout(bool sequence_parallel) const {
    LayoutRequest r;
    r.gpus = 64, r.tp = 4, r.pp = 2, r.seq = 2048, r.mbs = 2, r.sequence_parallel = sequence_parallel;
    r.flash_attention = false;
    return build_layout(bloom, deepspeed, r);
  }
};

// The shipped spec is the checkpoint: 176,247,271,424 parameters, of which the embeddings' LayerNorm is 2h on the
// first stage, whose saved input is 2 B an element of s·b·h (whole on every TP rank without SP, split with it).
TEST_F(AlibiTest, EmbeddingNormIsItsWeightsAndSavedInput) {
  EXPECT_EQ(static_cast<std::int64_t>(parameter_count(bloom)), 176'247'271'424);
  ModelSpec plain = bloom;
  plain.embedding_norm = false;
  EXPECT_DOUBLE_EQ(parameter_count(bloom) - parameter_count(plain), 2.0 * 14336);
  for (const bool sp : {false, true}) {
    const Layout l = layout(sp);
    EXPECT_DOUBLE_EQ(stage_parameters_per_gpu(bloom, l, 0) - stage_parameters_per_gpu(plain, l, 0), 2.0 * 14336);
    EXPECT_DOUBLE_EQ(stage_parameters_per_gpu(bloom, l, 1), stage_parameters_per_gpu(plain, l, 1));
    const double elements = 2048.0 * 2 * 14336 / (sp ? 4.0 : 1.0);
    EXPECT_DOUBLE_EQ(embedding_activation_bytes(bloom, l) - embedding_activation_bytes(plain, l), 2.0 * elements) << sp;
  }
}

// Unfused attention adds the bias in the score GEMM's C (torch.baddbmm with beta 1): 4 B a score more in the forward,
// nothing in the backward; fused attention adds it in registers, the same time.
TEST_F(AlibiTest, UnfusedAttentionReadsAndWritesTheBiasOnce) {
  const ClusterSpec a100 = lib.cluster("dgx-a100-80gb");
  const PerfContext p(default_perf_coefficients(lib, "deepspeed"), a100);
  Layout l = layout(false);
  ModelSpec rope = bloom;
  rope.alibi = false;
  const double scores = 2.0 * 112 / 4 * 2048.0 * 2048.0;  // b·(a/t)·s²
  EXPECT_NEAR(unfused_attention_seconds(bloom, p, l).forward - unfused_attention_seconds(rope, p, l).forward,
              4.0 * scores / p.hbm_bytes_per_s, 1e-12);
  EXPECT_DOUBLE_EQ(unfused_attention_seconds(bloom, p, l).backward, unfused_attention_seconds(rope, p, l).backward);
  l.flash_attention = true;
  EXPECT_DOUBLE_EQ(layer_compute_seconds(bloom, p, l).forward.attention,
                   layer_compute_seconds(rope, p, l).forward.attention);
}

// Megatron-LM has no ALiBi (arguments.py --position-embedding-type); Megatron-DeepSpeed adds it in its unfused
// attention only, which is its default for such a model; no framework headroom prices runs it with ring attention.
TEST_F(AlibiTest, RefusedWhereNoFrameworkRunsIt) {
  LayoutRequest r;
  r.gpus = 8, r.seq = 2048;
  EXPECT_FALSE(build_layout(bloom, deepspeed, r).flash_attention);
  EXPECT_TRUE(build_layout(lib.model("mpt-7b"), lib.framework("pytorch-fsdp"), r).flash_attention);
  r.flash_attention = true;
  EXPECT_THROW((void)build_layout(bloom, deepspeed, r), Error);
  r.flash_attention.reset();
  try {
    (void)build_layout(bloom, lib.framework("megatron"), r);
    ADD_FAILURE() << "megatron priced ALiBi";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ALiBi position biases: framework megatron"), std::string::npos) << e.what();
  }
  r.cp = 2;
  try {
    (void)build_layout(lib.model("mpt-7b"), lib.framework("pytorch-fsdp"), r);
    ADD_FAILURE() << "cp 2 priced over ALiBi";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context parallelism over the ALiBi attention of mpt-7b"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace headroom
