// Megatron-LM's Megatron-FSDP (Layout::megatron_fsdp): its strategies as shardings, its gradient format, the decoder
// layers it holds whole, each against its closed form from Megatron-FSDP's code (megatron_fsdp.py,
// param_and_grad_buffer.py), and the settings it refuses.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/sharding.hpp"

namespace headroom {
namespace {

class MegatronFsdpTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ClusterSpec h100 = lib.cluster("dgx-h100");
  FrameworkProfile megatron = lib.framework("megatron");

  // Llama-3.1-8B on 8 GPUs, 8,192 tokens, under Megatron-FSDP with the sharding `code` (its default where null).
  [[nodiscard]] static LayoutRequest job(const char* code = nullptr) {
    LayoutRequest r;
    r.gpus = 8, r.seq = 8192, r.megatron_fsdp = true;
    if (code != nullptr) r.sharding = parse_sharding_code(code);
    return r;
  }
  [[nodiscard]] Layout layout(const LayoutRequest& r) const { return build_layout(llama8b, megatron, r); }
  // One decoder layer's parameters (the stage's mean; TP 1).
  [[nodiscard]] double unit(const Layout& l) const {
    return stage_decoder_parameters_per_gpu(llama8b, l, 0) / static_cast<double>(llama8b.num_layers);
  }
};

// arguments.py's default strategy is optim_grads_params (ZeRO-3); the main gradients are the weights' format (BF16)
// unless megatron_fsdp_main_grads_dtype says otherwise; the FP32 main weights and Adam's moments stay 12 B.
TEST_F(MegatronFsdpTest, DefaultsAreMegatronLmsArguments) {
  const Layout l = layout(job());
  EXPECT_TRUE(l.megatron_fsdp.enabled);
  EXPECT_EQ(sharding_code(l.sharding), "GGG");
  EXPECT_DOUBLE_EQ(l.precision.weight_bytes, 2.0);
  EXPECT_DOUBLE_EQ(l.precision.grad_bytes, 2.0);
  EXPECT_DOUBLE_EQ(l.precision.optimizer_bytes, 12.0);
  LayoutRequest fp32 = job();
  fp32.megatron_fsdp_main_grads = Dtype::fp32;
  EXPECT_DOUBLE_EQ(layout(fp32).precision.grad_bytes, 4.0);
  // Without Megatron-FSDP the same request is Megatron-LM's distributed optimizer with FP32 gradients.
  LayoutRequest ddp = job();
  ddp.megatron_fsdp = false;
  EXPECT_DOUBLE_EQ(layout(ddp).precision.grad_bytes, 4.0);
  EXPECT_FALSE(layout(ddp).megatron_fsdp.enabled);
}

// The communication unit C is max(10^9, 2 layers) elements under optim_grads_params: the all-gather prefetches until
// C/2 elements are in flight, ceil(C/2 / layer) layers beyond the one computing; one layer's gradient is unsharded at
// the start of the backward. Double buffers hold two of each; a given unit size replaces C; DP of one gathers nothing.
TEST_F(MegatronFsdpTest, UnitsHeldWholeFollowTheCommunicationUnit) {
  const Layout l = layout(job());
  const double layer = unit(l);
  ASSERT_LT(2.0 * layer, 1e9);  // Llama-3.1-8B's 218M-parameter layer: C is the floor, 10^9
  MegatronFsdpUnits u = megatron_fsdp_units(llama8b, l, 0);
  EXPECT_DOUBLE_EQ(u.gathered, 1.0 + std::ceil(5e8 / layer));
  EXPECT_DOUBLE_EQ(u.gradients, 1.0);
  LayoutRequest doubled = job();
  doubled.fsdp_double_buffer = true;
  u = megatron_fsdp_units(llama8b, layout(doubled), 0);
  EXPECT_DOUBLE_EQ(u.gathered, 2.0);
  EXPECT_DOUBLE_EQ(u.gradients, 2.0);
  LayoutRequest small = job();
  small.fsdp_unit_size = 100'000'000;  // C/2 = 5e7 < one layer: the next layer only
  EXPECT_DOUBLE_EQ(megatron_fsdp_units(llama8b, layout(small), 0).gathered, 2.0);
  // optim_grads gathers nothing (parameters whole) and reduce-scatters each layer's gradient; no_shard and optim
  // all-reduce a whole gradient buffer, which the model states hold already.
  u = megatron_fsdp_units(llama8b, layout(job("NGG")), 0);
  EXPECT_DOUBLE_EQ(u.gathered, 0.0);
  EXPECT_DOUBLE_EQ(u.gradients, 1.0);
  for (const char* code : {"NNG", "NNN"}) {
    u = megatron_fsdp_units(llama8b, layout(job(code)), 0);
    EXPECT_DOUBLE_EQ(u.gathered + u.gradients, 0.0) << code;
  }
  LayoutRequest alone = job();
  alone.gpus = 1;
  u = megatron_fsdp_units(llama8b, layout(alone), 0);
  EXPECT_DOUBLE_EQ(u.gathered + u.gradients, 0.0);
}

// A stage's model states under optim_grads_params: BF16 weights, BF16 gradients and the optimizer's 12 B sharded over
// DP, plus the gathered layers and the LM head in BF16 and the one gradient layer and the head's gradient in BF16.
TEST_F(MegatronFsdpTest, StageStatesAreShardedPlusTheUnits) {
  const Layout l = layout(job());
  const StageMemory s = stage_memory(llama8b, h100, l, megatron.residual, 0);
  const double params = stage_parameters_per_gpu(llama8b, l, 0), layer = unit(l);
  const double head = static_cast<double>(llama8b.hidden_size) * static_cast<double>(llama8b.vocab_size);
  const MegatronFsdpUnits u = megatron_fsdp_units(llama8b, l, 0);
  EXPECT_NEAR(s.params, 2.0 * params / 8.0 + 2.0 * (u.gathered * layer + head), 1.0);
  EXPECT_NEAR(s.grads, 2.0 * params / 8.0 + 2.0 * (u.gradients * layer + head), 1.0);
  EXPECT_NEAR(s.optimizer, 12.0 * params / 8.0, 1.0);
}

// What Megatron-FSDP does not run, or headroom does not price with it, is refused naming the field.
TEST_F(MegatronFsdpTest, RefusesWhatItDoesNotRun) {
  const auto refused = [&](const LayoutRequest& r, const FrameworkProfile& f, const char* names) {
    try {
      (void)build_layout(llama8b, f, r);
      ADD_FAILURE() << "accepted; expected an error naming " << names;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  LayoutRequest ddp = job();
  ddp.megatron_fsdp = false;
  ddp.fsdp_double_buffer = true;
  refused(ddp, megatron, "needs --use-megatron-fsdp");
  refused(job("III"), megatron, "not a Megatron-FSDP strategy");
  refused(job(), lib.framework("torchtitan"), "does not run Megatron-FSDP");
  LayoutRequest aware = job();
  aware.optimizer_precision.precision_aware = true;
  refused(aware, megatron, "precision-aware");
  // --grad-reduce-in-bf16 is the distributed optimizer's buffer, which Megatron-FSDP does not read.
  LayoutRequest bf16 = job();
  bf16.optimizer_precision.grad_reduce_in_bf16 = true;
  EXPECT_DOUBLE_EQ(layout(bf16).precision.grad_bytes, 2.0);
}

}  // namespace
}  // namespace headroom
