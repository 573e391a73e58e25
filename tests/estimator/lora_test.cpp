#include "headroom/estimator/lora.hpp"

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class LoraTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec m = lib.model("llama3.1-70b");  // h 8192, h_ffn 28672, a 64, k 8 → K/V 1024 wide, L 80
  ClusterSpec lumi = lib.cluster("lumi-mi250x");
  FrameworkProfile fsdp = lib.framework("pytorch-fsdp");
  Lora lora(std::int64_t r) {
    Lora l;
    l.rank = r;
    return l;
  }
};

// Hand count per layer, r·(in + out): q 16384, k 9216, v 9216, o 16384, gate 36864, up 36864, down 36864.
TEST_F(LoraTest, HandCountLlama31_70B) {
  EXPECT_DOUBLE_EQ(lora_parameters_per_layer(m, lora(1)), 161792.0);
  EXPECT_DOUBLE_EQ(lora_trainable_parameters(m, lora(128)), 161792.0 * 128 * 80);  // 1,656,750,080
  Lora attn = lora(16);
  attn.targets = parse_lora_targets("q,v");
  EXPECT_DOUBLE_EQ(lora_parameters_per_layer(m, attn), 16.0 * (16384 + 9216));
}

// Thesis Sec. 3.2: replicated = A of q,k,v,gate,up (5·8192·r) + B of o,down (2·8192·r) = 57344·r per rank;
// sharded = B of q,k,v,gate,up (8192+1024+1024+28672+28672) + A of o,down (8192+28672) = 104448·r, over t.
TEST_F(LoraTest, TensorParallelSplitFollowsTheBaseWeight) {
  for (std::int64_t t : {1, 2, 4, 8}) {
    const LoraSplit s = lora_layer_split(m, lora(1), t);
    EXPECT_DOUBLE_EQ(s.replicated, 57344.0);
    EXPECT_DOUBLE_EQ(s.sharded, 104448.0 / t);
  }
}

// Frozen base: weights only; adapters carry weights and optimizer states; FSDP shards all of it over d after TP.
// (1,8) at rank 128: 80·(57344 + 13056)·128 = 720,896,000 trainable elements per GPU. FSDP1 frees gradients
// between steps: none at the activations moment; at the gradients moment the flat parameters' gradient covers
// the frozen decoder weights too (use_orig_params) where FSDP wraps the model (a DP group > 1). TP-only is not
// wrapped: no frozen gradient, no unit buffers, no root copy.
TEST_F(LoraTest, StageMemoryFreezesTheBase) {
  Layout l = default_layout(fsdp);
  l.tp = 8, l.dp = 1, l.mbs = 1, l.gbs = 1, l.seq = 1024;
  l.lora = lora(128);
  const double trainable = 720'896'000.0;
  const StageMemory a = stage_memory_at(m, lumi, l, ResidualModel{}, 0, StepMoment::activations);
  EXPECT_DOUBLE_EQ(a.grads, 0.0);
  EXPECT_DOUBLE_EQ(a.optimizer, fsdp.precision.optimizer_bytes * trainable);
  const double base = stage_parameters_per_gpu(m, l, 0);
  EXPECT_DOUBLE_EQ(a.params, fsdp.precision.weight_bytes * (base + trainable));
  EXPECT_DOUBLE_EQ(fsdp_unit_buffer_bytes(m, l), 0.0);
  // TP alone (a DP group of one, not wrapped in FSDP): the adapters' gradients only.
  const StageMemory g = stage_memory_at(m, lumi, l, ResidualModel{}, 0, StepMoment::gradients);
  EXPECT_DOUBLE_EQ(g.grads, fsdp.precision.grad_bytes * trainable);
  EXPECT_DOUBLE_EQ(g.params, a.params);
  // (2,4): FSDP1's flat parameters give every decoder weight a gradient, sharded over 2. Decoder layer per TP rank:
  // (h² (2 + 2/8) + 3·h·h_ffn)/4 + 2h = 213,925,888 elements, 80 of them.
  l.tp = 4, l.dp = 2, l.gbs = 2;
  const double trainable_24 = lora_stage_parameters_per_rank(m, l, 0).per_rank() / 2;
  EXPECT_DOUBLE_EQ(
      stage_memory_at(m, lumi, l, ResidualModel{}, 0, StepMoment::gradients).grads,
      fsdp.precision.grad_bytes * (80.0 * 213'925'888.0 / 2 + trainable_24) + 2.0 * fsdp_unit_buffer_bytes(m, l) / 4);
  // (8,1): everything sharded over 8, no replication; the root (embedding, norm, head) whole; 4 unit buffers
  // of one decoder layer with its adapters (855,654,400 + 161,792·128 elements).
  l.tp = 1, l.dp = 8, l.gbs = 8;
  EXPECT_DOUBLE_EQ(stage_memory_at(m, lumi, l, ResidualModel{}, 0, StepMoment::activations).optimizer,
                   fsdp.precision.optimizer_bytes * 161792.0 * 128 * 80 / 8);
  EXPECT_DOUBLE_EQ(fsdp_root_unit_bytes(m, l, 0), 2.0 * (2.0 * 8192 * 128256 + 8192));
  EXPECT_DOUBLE_EQ(fsdp_unit_buffer_bytes(m, l), 4.0 * 2.0 * (855'654'400.0 + 161792.0 * 128));
}

// FSDP2 (torchtitan) shards per parameter: a frozen weight takes no gradient on any DP group.
TEST_F(LoraTest, PerParameterShardingGivesFrozenWeightsNoGradient) {
  const FrameworkProfile titan = lib.framework("torchtitan");
  Layout l = default_layout(titan);
  l.tp = 1, l.dp = 8, l.mbs = 1, l.gbs = 8, l.seq = 1024, l.recompute = Recompute::full;
  l.lora = lora(16);
  EXPECT_FALSE(frozen_weights_take_gradients(l));
  EXPECT_DOUBLE_EQ(stage_memory_at(m, lumi, l, ResidualModel{}, 0, StepMoment::gradients).grads,
                   titan.precision.grad_bytes * 161792.0 * 16 * 80 / 8 + 3.0 * fsdp_unit_buffer_bytes(m, l) / 5);
  Layout flat = default_layout(fsdp);
  flat.tp = 1, flat.dp = 8, flat.lora = lora(16);
  EXPECT_TRUE(frozen_weights_take_gradients(flat));
  flat.tp = 8, flat.dp = 1;
  EXPECT_FALSE(frozen_weights_take_gradients(flat));
}

// FSDP1's flat parameters in time as in memory: autograd computes the frozen decoder weights' gradients (the backward's
// GEMMs twice the forward's, as in full training) and FSDP reduce-scatters the whole flat gradient; per-parameter
// sharding (FSDP2) computes and reduces the adapters' only, and so does a model no DP group wraps (TP alone).
TEST_F(LoraTest, FlatParametersPriceTheFrozenWeightsGradientsInTime) {
  Layout flat = default_layout(fsdp);
  flat.tp = 1, flat.dp = 8, flat.mbs = 1, flat.gbs = 8, flat.seq = 1024, flat.recompute = Recompute::none;
  flat.lora = lora(16);
  Layout per_parameter = flat;
  per_parameter.fsdp_flat_parameters = false;
  EXPECT_DOUBLE_EQ(gradient_parameters_per_gpu(m, flat, 0), 80 * (855'654'400.0 + 161792.0 * 16));
  EXPECT_DOUBLE_EQ(gradient_parameters_per_gpu(m, per_parameter, 0), 80 * 161792.0 * 16);
  EXPECT_DOUBLE_EQ(dp_parameters_per_gpu(m, flat, 0).reduced, gradient_parameters_per_gpu(m, flat, 0));
  EXPECT_DOUBLE_EQ(dp_parameters_per_gpu(m, flat, 0).trainable, dp_parameters_per_gpu(m, per_parameter, 0).trainable);
  const PerfContext ctx(default_perf_coefficients(lib, fsdp.name), lumi);
  const PerfEstimate a = estimate_perf(m, ctx, flat), b = estimate_perf(m, ctx, per_parameter);
  Layout full = flat;
  full.lora = {};
  const PerfEstimate f = estimate_perf(m, ctx, full);
  // The decoder's GEMMs: forward once, backward twice under flat parameters and in full training (the adapters' small
  // GEMMs on top, the frozen LM head's weight gradient left out), once without.
  EXPECT_GT(a.breakdown.gemm_s, b.breakdown.gemm_s);
  EXPECT_NEAR(a.breakdown.gemm_s / f.breakdown.gemm_s, 1.0, 0.05);
  EXPECT_LT(b.breakdown.gemm_s / f.breakdown.gemm_s, 0.75);
  EXPECT_GT(a.breakdown.dp_comm_s, b.breakdown.dp_comm_s);
  flat.tp = 8, flat.dp = 1, per_parameter.tp = 8, per_parameter.dp = 1;
  EXPECT_DOUBLE_EQ(estimate_perf(m, ctx, flat).step_time_s, estimate_perf(m, ctx, per_parameter).step_time_s);
}

// The replicated halves make the adapters per GPU grow with t at a fixed GPU count (8): why TP-only runs out
// of memory first at large ranks.
TEST_F(LoraTest, ReplicatedHalvesGrowWithTp) {
  double previous = 0;
  for (std::int64_t t : {1, 2, 4, 8}) {
    const std::int64_t replicas = 8 / t;
    const double per_gpu = lora_layer_split(m, lora(1024), t).per_rank() / static_cast<double>(replicas);
    EXPECT_GT(per_gpu, previous);
    previous = per_gpu;
  }
}

TEST_F(LoraTest, BadTargetNamesTheValidOnes) {
  EXPECT_EQ(parse_lora_targets("all"), kAllLoraTargets);
  EXPECT_EQ(lora_targets_to_string(parse_lora_targets("attn,mlp")), "q,k,v,o,gate,up,down");
  try {
    (void)parse_lora_targets("q,wq");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'wq'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("gate"), std::string::npos);
  }
}

// The rank of A·B is at most min(in, out) of its projection: a larger rank is refused naming the value, the
// projection with the lowest bound among the targets and that bound (Llama 3.1 70B: K and V are 8192 -> 1024).
TEST_F(LoraTest, RankAboveAProjectionsDimensionsIsRefused) {
  const auto message = [this](std::int64_t r, const char* targets) {
    Lora l = lora(r);
    l.targets = parse_lora_targets(targets);
    try {
      validate_lora_rank(m, l);
    } catch (const Error& e) {
      return e.message(FieldNames::keywords);
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message(1024, "all"), "(accepted)");
  EXPECT_EQ(message(1025, "all"),
            "lora_rank 1025 is larger than the k projection of llama3.1-70b (8192 -> 1024): a LoRA rank is at most "
            "min(in, out) = 1024 of every targeted projection (lora_targets q,k,v,o,gate,up,down)");
  EXPECT_EQ(message(8192, "q,o,mlp"), "(accepted)");
  EXPECT_NE(message(100000, "q,o,mlp").find("larger than the q projection of llama3.1-70b (8192 -> 8192)"),
            std::string::npos);
  // Part of every layout's validation.
  Layout l;
  l.lora = lora(100000);
  l.seq = 4096;
  l.gbs = 1;
  EXPECT_THROW(validate_layout(m, l), Error);
}

}  // namespace
}  // namespace headroom
