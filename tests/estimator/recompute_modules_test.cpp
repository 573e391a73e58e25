// Megatron-LM's selective recompute of named modules (--recompute-modules): what each drops from a layer's stored
// activations, what it runs again in backward, and what is refused.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "megatron_fixture.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class RecomputeModulesTest : public test::MegatronOnH100 {
 protected:
  ModelSpec lite = lib.model("deepseek-v2-lite");

  // Selective recompute of `modules` (empty: Megatron-LM's default, the core attention), t = 2 with SP.
  [[nodiscard]] Layout dense(std::string_view modules = "") const {
    LayoutRequest r;
    r.gpus = 16, r.tp = 2, r.seq = 8192, r.gbs = 64, r.recompute = Recompute::selective;
    if (!modules.empty()) r.recompute_modules = parse_recompute_modules(modules);
    return build_layout(llama8b, megatron, r);
  }
  // DeepSeek-V2-Lite on 8 GPUs, ep 8 (latent attention without a q latent, 64 routed experts and 2 shared).
  [[nodiscard]] Layout moe(std::string_view modules = "") const {
    LayoutRequest r;
    r.gpus = 8, r.ep = 8, r.seq = 4096, r.gbs = 64, r.recompute = Recompute::selective;
    if (!modules.empty()) r.recompute_modules = parse_recompute_modules(modules);
    return build_layout(lite, megatron, r);
  }
  [[nodiscard]] std::string refusal(const ModelSpec& m, const LayoutRequest& r) const {
    try {
      validate_layout(m, build_layout(m, megatron, r));
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }
  [[nodiscard]] static double sbh(const ModelSpec& m, const Layout& l) {
    return static_cast<double>(l.seq * l.mbs * m.hidden_size) / static_cast<double>(l.tp * l.cp);
  }
};

TEST_F(RecomputeModulesTest, NamesReadAndWritten) {
  EXPECT_EQ(parse_recompute_modules("core_attn"), kDefaultRecomputeModules);
  EXPECT_EQ(parse_recompute_modules("mlp moe"), parse_recompute_modules("moe,mlp"));
  EXPECT_EQ(recompute_modules_to_string(parse_recompute_modules("moe_act layernorm mla_up_proj")),
            "layernorm,mla_up_proj,moe_act");
  EXPECT_THROW((void)parse_recompute_modules("mhc"), Error);        // Megatron-LM's, a model headroom does not price
  EXPECT_THROW((void)parse_recompute_modules("attention"), Error);  // not Megatron-LM's
  EXPECT_EQ(dense("core_attn").recompute_modules, dense().recompute_modules);
}

// A checkpointed MLP keeps its input alone, which the pre-MLP norm's input term already counts: the FFN input (2) and
// its intermediates (8f/h) go. The layer-norm module changes nothing in a dense layer, whose norms Transformer Engine
// fuses into the next linear layer.
TEST_F(RecomputeModulesTest, MlpDropsTheMlpsTensors) {
  const Layout attn = dense(), mlp = dense("core_attn,mlp");
  const double f_over_h = 14336.0 / 4096.0;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, attn) - activation_bytes_per_layer(llama8b, mlp),
                   sbh(llama8b, mlp) * (2.0 + 8.0 * f_over_h));
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, dense("core_attn,layernorm")),
                   activation_bytes_per_layer(llama8b, attn));
  // The MLP's tensors come back one layer at a time in backward.
  EXPECT_DOUBLE_EQ(rematerialised_layer_bytes(llama8b, mlp, false),
                   activation_bytes_per_layer(llama8b, attn) - activation_bytes_per_layer(llama8b, mlp));
  EXPECT_EQ(rematerialised_layer_bytes(llama8b, attn, false), 0.0);
}

// Without FlashAttention the scores are kept unless core_attn is among the modules.
TEST_F(RecomputeModulesTest, UnfusedScoresKeptWithoutCoreAttention) {
  Layout with = dense("core_attn,mlp"), without = dense("mlp");
  with.flash_attention = without.flash_attention = false;
  const double scores = 2.0 * 32 * 8192.0 * 8192.0 / 2.0;  // 2 B · a · s² · b / t
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, without) - activation_bytes_per_layer(llama8b, with), scores);
}

// A layer with experts: moe keeps the block's input (the FFN input, 2 units) alone; shared_experts drops the shared
// expert's intermediates; moe_act half of each routed copy's; layernorm the FFN input and latent attention's input.
TEST_F(RecomputeModulesTest, ExpertModulesDropTheirTensors) {
  const Layout attn = moe();
  const double unit = sbh(lite, attn), h = 2048, copies = 6, f_e = 1408, f_s = 2816;
  const double e = moe_activation_bytes_per_layer(lite, attn);
  EXPECT_NEAR(e - moe_activation_bytes_per_layer(lite, moe("core_attn,moe")),
              unit * (2.0 * 64 / h + 8.0 * f_s / h + copies * (2.0 + 8.0 * f_e / h + 2.0)), 1e-9 * e);
  EXPECT_NEAR(e - moe_activation_bytes_per_layer(lite, moe("core_attn,shared_experts")), unit * 8.0 * f_s / h,
              1e-9 * e);
  EXPECT_NEAR(e - moe_activation_bytes_per_layer(lite, moe("core_attn,moe_act")), unit * copies * 4.0 * f_e / h,
              1e-9 * e);
  EXPECT_NEAR(e - moe_activation_bytes_per_layer(lite, moe("core_attn,layernorm")), unit * (2.0 + 2.0), 1e-9 * e);
  // Latent attention's up projections: their inputs (the kv latent, K's RoPE part, the norm's output for q) stay; the
  // kv latent's normed copy, Q, K and V go; the output stays.
  const double a = 16, d_qk = 192, d_v = 128, kv_r = 512;
  EXPECT_NEAR(e - moe_activation_bytes_per_layer(lite, moe("core_attn,mla_up_proj")),
              unit * 2.0 * (kv_r + a * (2 * d_qk + d_v)) / h, 1e-9 * e);
}

// What the modules run again: the MLP's GEMMs and its all-gather and reduce-scatter; the MoE block's GEMMs and its
// dispatch and combine; nothing more for the default.
TEST_F(RecomputeModulesTest, BackwardRunsTheModulesAgain) {
  const PerfContext p(datasheet, h100);
  const LayerPasses attn = layer_compute_seconds(llama8b, p, dense()),
                    mlp = layer_compute_seconds(llama8b, p, dense("core_attn,mlp"));
  EXPECT_DOUBLE_EQ(mlp.forward.total(), attn.forward.total());
  EXPECT_GT(mlp.backward.gemm - attn.backward.gemm, 0.3 * attn.forward.gemm);  // fc1 and fc2: most of the layer's
  EXPECT_LT(mlp.backward.gemm - attn.backward.gemm, attn.forward.gemm);
  EXPECT_GT(estimate_perf(llama8b, p, dense("core_attn,mlp")).step_time_s,
            estimate_perf(llama8b, p, dense()).step_time_s);
  // Without core_attn the attention is not run again.
  EXPECT_DOUBLE_EQ(layer_compute_seconds(llama8b, p, dense("mlp")).backward.attention,
                   attn.backward.attention - attn.forward.attention);
  const LayerPasses block = moe_layer_compute_seconds(lite, p, moe("core_attn,moe")),
                    attn_e = moe_layer_compute_seconds(lite, p, moe());
  EXPECT_GT(block.backward.gemm, attn_e.backward.gemm);
  EXPECT_GT(block.backward.elementwise, attn_e.backward.elementwise);  // the permutations and activations again
  EXPECT_GT(estimate_perf(lite, p, moe("core_attn,moe")).step_time_s, estimate_perf(lite, p, moe()).step_time_s);
}

// What Megatron-LM refuses (transformer_config.py), and the modules without selective recompute.
TEST_F(RecomputeModulesTest, RefusedWhereMegatronRefusesIt) {
  LayoutRequest r;
  r.gpus = 16, r.tp = 2, r.seq = 8192, r.gbs = 64, r.recompute = Recompute::selective;
  r.recompute_modules = parse_recompute_modules("mla_up_proj");
  EXPECT_NE(refusal(llama8b, r).find("needs latent attention"), std::string::npos);
  r.recompute_modules = parse_recompute_modules("layernorm");
  r.fp8 = Fp8Recipe::delayed;
  EXPECT_NE(refusal(llama8b, r).find("delayed"), std::string::npos);
  r.fp8 = Fp8Recipe::tensorwise;
  EXPECT_EQ(refusal(llama8b, r), "accepted");
  r.fp8 = Fp8Recipe::none;
  r.recompute = Recompute::full;
  EXPECT_NE(refusal(llama8b, r).find("needs --recompute selective"), std::string::npos);
  LayoutRequest s;
  s.gpus = 8, s.ep = 8, s.seq = 4096, s.gbs = 64, s.recompute = Recompute::selective;
  s.recompute_modules = parse_recompute_modules("shared_experts"), s.shared_expert_overlap = true;
  EXPECT_NE(refusal(lite, s).find("moe-shared-expert-overlap"), std::string::npos);
}

}  // namespace
}  // namespace headroom
