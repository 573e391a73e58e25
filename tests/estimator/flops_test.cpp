#include "headroom/estimator/flops.hpp"

#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom {
namespace {

class FlopsTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
};

// Megatron's Llama formula equals 6 FLOPs per non-embedding parameter and token (the input embedding is a
// lookup, the untied LM head a GEMM) plus the non-causal attention term 12·s·h·L, up to the norm weights.
TEST_F(FlopsTest, ModelFlopsAreSixPerParameterPlusAttention) {
  const double s = 8192, h = 4096, L = 32;
  const double gemm_params = parameter_count(llama8b) - h * 128256.0 - L * 2 * h - h;  // no embedding, no norms
  const double expected = 6.0 * gemm_params + 12.0 * s * h * L;
  EXPECT_NEAR(model_flops_per_token(llama8b, 8192), expected, 1e-9 * expected);
  EXPECT_DOUBLE_EQ(model_flops_per_step(llama8b, 8192, 1024), 1024 * 8192 * model_flops_per_token(llama8b, 8192));
}

// A plain MLP (Nemotron's squared ReLU: up and down) runs two of a gated MLP's three GEMMs at equal h_ffn: 2/3 of its
// FLOPs in the layer's GEMMs, and 6 FLOPs per token for each weight of the missing h × h_ffn projection in the model's.
TEST_F(FlopsTest, APlainMlpRunsTwoThirdsOfTheGatedOnesFlops) {
  ModelSpec plain = llama8b, gated = llama8b;
  plain.mlp = Mlp::relu2;
  Layout l;
  l.tp = 2;
  l.seq = 4096;
  l.mbs = 1;
  const LayerGemms p = layer_gemms(plain, l), g = layer_gemms(gated, l);
  EXPECT_DOUBLE_EQ(p.fc1.flops() + p.fc2.flops(), 2.0 / 3.0 * (g.fc1.flops() + g.fc2.flops()));
  EXPECT_DOUBLE_EQ(p.qkv.flops() + p.proj.flops(), g.qkv.flops() + g.proj.flops());
  const double weights = static_cast<double>(llama8b.num_layers * llama8b.hidden_size * llama8b.ffn_hidden_size);
  const double extra = 6.0 * 4096 * weights;  // 6 FLOPs per weight and token, 4096 tokens
  EXPECT_NEAR(model_flops_per_step(gated, 4096, 1) - model_flops_per_step(plain, 4096, 1), extra, 1e-9 * extra);
}

// The GEMMs of one layer carry 2·tokens·(layer weights)/t FLOPs forward.
TEST_F(FlopsTest, LayerGemmsMatchParameters) {
  Layout l;
  l.tp = 4;
  l.cp = 2;
  l.seq = 8192;
  l.mbs = 2;
  const double tokens = 8192.0 * 2 / 2;
  const double weights = attention_parameters_per_layer(llama8b) + ffn_parameters_per_layer(llama8b);
  EXPECT_NEAR(layer_gemms(llama8b, l).flops(), 2.0 * tokens * weights / 4, 1.0);
  EXPECT_DOUBLE_EQ(attention_flops_forward(llama8b, l), 2.0 * 8192.0 * 8192.0 * 2 * 4096 / 8);
  EXPECT_DOUBLE_EQ(lm_head_flops_forward(llama8b, l), 2.0 * tokens * 4096 * 128256 / 4);
}

// Narayanan et al. 2021 Eq. 3 counts full recompute's second forward of the layers (4/3 of their FLOPs), not of
// the LM head: for GPT it is the model FLOPs plus a third of the layers' part.
TEST_F(FlopsTest, NarayananEquationThreeAddsTheRecomputedForward) {
  const ModelSpec gpt = lib.model("gpt3-175b");
  const double s = 2048, h = 12288, L = 96, v = 51200;
  const double layers = 72.0 * s * L * h * h * (1.0 + s / (6.0 * h));
  EXPECT_NEAR(model_flops_per_step(gpt, 2048, 1.0), layers + 6.0 * s * h * v, 1e-9 * layers);
  EXPECT_NEAR(narayanan_recompute_flops_per_step(gpt, 2048, 1.0), layers * 4.0 / 3.0 + 6.0 * s * h * v, 1e-9 * layers);
}

TEST_F(FlopsTest, RecomputeFactorsPerMode) {
  const auto factors = [&](Recompute r, bool experts = false, std::uint8_t modules = kDefaultRecomputeModules) {
    Layout l;
    l.recompute = r;
    l.recompute_modules = modules;
    return recompute_factors(llama8b, l, experts);
  };
  EXPECT_EQ(factors(Recompute::none).gemm, 0.0);
  EXPECT_EQ(factors(Recompute::selective).attention, 1.0);
  EXPECT_EQ(factors(Recompute::selective).gemm, 0.0);
  EXPECT_EQ(factors(Recompute::selective).elementwise, 0.0);
  EXPECT_EQ(factors(Recompute::selective).tp_collectives, 0.0);
  EXPECT_EQ(factors(Recompute::full).gemm, 1.0);
  EXPECT_EQ(factors(Recompute::full).tp_collectives, 1.0);
  EXPECT_EQ(factors(Recompute::full, true).ep, 1.0);
  // torchtitan's per-op checkpointing: attention saved, every elementwise op and the two all-gathers redone.
  const RecomputeFactors op = factors(Recompute::op);
  EXPECT_EQ(op.attention, 0.0);
  EXPECT_EQ(op.elementwise, 1.0);
  EXPECT_EQ(op.tp_collectives, 0.5);
  EXPECT_EQ(op.gemm, op_recomputed_gemm_share(llama8b));
  // Megatron-LM's modules: a checkpointed MLP or MoE block gathers and reduce-scatters again, the block dispatches and
  // combines again; without core_attn the attention is not redone. Their GEMMs are priced at their shapes elsewhere.
  const auto bits = [](std::string_view names) { return parse_recompute_modules(names); };
  EXPECT_EQ(factors(Recompute::selective, false, bits("mlp")).tp_collectives, 0.5);
  EXPECT_EQ(factors(Recompute::selective, false, bits("mlp")).attention, 0.0);
  EXPECT_EQ(factors(Recompute::selective, false, bits("mlp")).gemm, 0.0);
  EXPECT_EQ(factors(Recompute::selective, true, bits("mlp")).tp_collectives, 0.0);  // a dense layer's MLP only
  EXPECT_EQ(factors(Recompute::selective, true, bits("moe,core_attn")).ep, 1.0);
  EXPECT_EQ(factors(Recompute::selective, true, bits("moe,core_attn")).attention, 1.0);
  EXPECT_EQ(factors(Recompute::selective, true, bits("moe_act,layernorm")).ep, 0.0);
}

// The matmuls of a Llama 3.1 8B block in forward order with their weights' sizes (torchtitan models/llama/model.py:
// wq h×h, wk and wv h×kv, wo h×h, w1 and w3 h×f, w2 f×h); the policy recomputes the 2nd, 4th and 6th.
TEST_F(FlopsTest, PerOpCheckpointingRecomputesEverySecondMatmul) {
  const double h = 4096, kv = 1024, f = 14336;
  const double weights[] = {h * h, h * kv, h * kv, h * h, h * f, h * f, f * h};
  double all = 0, recomputed = 0;
  for (int i = 0; i < 7; ++i) {
    all += weights[i];
    if ((i + 1) % 2 == 0) recomputed += weights[i];
  }
  EXPECT_DOUBLE_EQ(op_recomputed_gemm_share(llama8b), recomputed / all);
  EXPECT_NEAR(op_recomputed_gemm_share(llama8b), 0.365, 0.001);
}

// A sliding window of w tokens leaves s·w − w²/2 of the s²/2 causal pairs where s > w, on the
// layers that have it; heads of width d_h scale the attention by a·d_h/h (Megatron-LM's training.py).
TEST_F(FlopsTest, SlidingWindowsAndHeadWidthScaleTheAttention) {
  ModelSpec m = llama8b;
  m.sliding_window = 4096;
  EXPECT_DOUBLE_EQ(causal_attention_share(m, 4096), 1.0);
  EXPECT_DOUBLE_EQ(causal_attention_share(m, 8192), (8192.0 * 4096 - 4096.0 * 4096 / 2) / (8192.0 * 8192 / 2));
  m.window_skip_freq = 2;  // 16 of 32 layers windowed
  EXPECT_DOUBLE_EQ(causal_attention_share(m, 8192), 1.0 - 0.5 * 0.25);
  Layout l;
  l.seq = 8192;
  EXPECT_DOUBLE_EQ(attention_flops_forward(m, l), 0.875 * attention_flops_forward(llama8b, l));
  const double s = 8192, h = 4096, L = 32;
  EXPECT_NEAR(model_flops_per_token(llama8b, 8192) - model_flops_per_token(m, 8192), 0.125 * 12.0 * s * h * L, 1.0);
  ModelSpec wide = llama8b;
  wide.head_dim = 256;  // a·d_h = 8192 = 2h, k·d_h = 2048
  EXPECT_DOUBLE_EQ(attention_flops_forward(wide, l), 2.0 * attention_flops_forward(llama8b, l));
  const LayerGemms g = layer_gemms(wide, l);
  EXPECT_DOUBLE_EQ(g.qkv.n, 8192.0 + 2 * 2048.0);
  EXPECT_DOUBLE_EQ(g.proj.k, 8192.0);
  EXPECT_NEAR(layer_gemms(wide, l).flops(),
              2.0 * 8192 * (attention_parameters_per_layer(wide) + ffn_parameters_per_layer(wide)), 1.0);
}

}  // namespace
}  // namespace headroom
