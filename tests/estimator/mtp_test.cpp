// Megatron-LM's multi-token prediction (--mtp-num-layers): where its layers sit, what they hold and cost, and what is
// refused.
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

class MtpTest : public test::MegatronOnH100 {
 protected:
  ModelSpec deepseek = lib.model("deepseek-v3");

  // Llama-3.1-8B on 32 GPUs: t = 2, p = 2, 8,192 tokens, 1F1B.
  [[nodiscard]] static LayoutRequest job(std::int64_t mtp) {
    LayoutRequest r;
    r.gpus = 32, r.tp = 2, r.pp = 2, r.seq = 8192, r.gbs = 256, r.mtp_layers = mtp;
    return r;
  }
  [[nodiscard]] std::string refusal(const ModelSpec& m, const FrameworkProfile& f, const LayoutRequest& r) const {
    try {
      (void)build_layout(m, f, r);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  }
};

// The module sits on the LM head's stage: a decoder layer split as the others, eh_proj (2h × h) over t, three
// RMSNorms whole; the first stage is as before.
TEST_F(MtpTest, ParametersOfTheModuleSitOnTheHeadStage) {
  const Layout without = build_layout(llama8b, megatron, job(0)), with = build_layout(llama8b, megatron, job(1));
  const double h = 4096, t = 2, norms = norm_parameters_per_layer(llama8b);
  EXPECT_DOUBLE_EQ(stage_parameters_per_gpu(llama8b, with, 0), stage_parameters_per_gpu(llama8b, without, 0));
  EXPECT_DOUBLE_EQ(stage_parameters_per_gpu(llama8b, with, 1) - stage_parameters_per_gpu(llama8b, without, 1),
                   (layer_parameters(llama8b) - norms) / t + norms + 2 * h * h / t + 3 * h);
  EXPECT_DOUBLE_EQ(mtp_module_parameters(llama8b), layer_parameters(llama8b) + 2 * h * h + 3 * h);
  // DeepSeek-V3's module has routed experts, as its last layer: sharded over the expert groups like theirs.
  LayoutRequest r = job(1);
  r.gpus = 256, r.tp = 2, r.pp = 2, r.ep = 64, r.seq = 4096, r.gbs = 512;
  r.split.first_stage_layers = 31, r.split.last_stage_layers = 30;
  const Layout v3 = build_layout(deepseek, megatron, r);
  r.mtp_layers = 0;
  const Layout v3_without = build_layout(deepseek, megatron, r);
  EXPECT_TRUE(mtp_layer_has_experts(deepseek));
  EXPECT_DOUBLE_EQ(
      stage_expert_parameters_per_gpu(deepseek, v3, 1) - stage_expert_parameters_per_gpu(deepseek, v3_without, 1),
      expert_parameters_per_gpu(deepseek, v3));
  EXPECT_DOUBLE_EQ(stage_expert_parameters_per_gpu(deepseek, v3, 0),
                   stage_expert_parameters_per_gpu(deepseek, v3_without, 0));
}

// Under 1F1B the head's stage holds one micro-batch of the module: its layer's activations, its norms' and eh_proj's
// inputs, and its own head's logits; full recompute (uniform, one layer) keeps only its two inputs.
TEST_F(MtpTest, ActivationsOfOneMicrobatchOnTheHeadStage) {
  const Layout without = build_layout(llama8b, megatron, job(0)), with = build_layout(llama8b, megatron, job(1));
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, with, 0), stage_activation_bytes(llama8b, without, 0));
  EXPECT_DOUBLE_EQ(stage_activation_bytes(llama8b, with, 1) - stage_activation_bytes(llama8b, without, 1),
                   mtp_layer_activation_bytes(llama8b, with) + lm_head_activation_bytes(llama8b, with));
  const double sbh = 8192.0 * 4096 / 2;  // SP: s·b·h/t elements
  EXPECT_DOUBLE_EQ(mtp_layer_activation_bytes(llama8b, with), activation_bytes_per_layer(llama8b, with) + 8 * sbh);
  LayoutRequest full = job(1);
  full.recompute = Recompute::full;
  EXPECT_DOUBLE_EQ(mtp_layer_activation_bytes(llama8b, build_layout(llama8b, megatron, full)), 2 * 2 * sbh);
}

// Model FLOPs as Megatron-LM's training.py counts them: one more decoder layer (the counts of a model one layer
// deeper, whose logits are the same), and 6·(3h + 2h² + h·V) a token for the norms, eh_proj and the extra logits.
TEST_F(MtpTest, ModelFlopsCountTheModuleAsMegatronDoes) {
  ModelSpec deeper = llama8b;
  deeper.num_layers += 1;
  const double tokens = 256.0 * 8192, h = 4096, v = static_cast<double>(llama8b.vocab_size);
  const double layer = model_flops_per_step(deeper, 8192, 256) - model_flops_per_step(llama8b, 8192, 256);
  EXPECT_NEAR(mtp_flops_per_step(llama8b, 8192, 256, 2), 2 * (layer + 6 * tokens * (3 * h + 2 * h * h + h * v)),
              1e-9 * layer);
  EXPECT_EQ(mtp_flops_per_step(llama8b, 8192, 256, 0), 0.0);
  const PerfContext p(datasheet, h100);
  const PerfEstimate a = estimate_perf(llama8b, p, build_layout(llama8b, megatron, job(0)));
  const PerfEstimate b = estimate_perf(llama8b, p, build_layout(llama8b, megatron, job(1)));
  EXPECT_DOUBLE_EQ(b.model_flops - a.model_flops, mtp_flops_per_step(llama8b, 8192, 256, 1));
  EXPECT_GT(b.step_time_s, a.step_time_s);
  EXPECT_EQ(b.breakdown.slowest_stage, 1);  // the head's stage carries the module
}

// The last stage runs one more decoder layer, eh_proj with its norms, and one more LM head and loss per pass.
TEST_F(MtpTest, HeadStagePassGrowsByTheModule) {
  LayoutRequest r = job(1);
  r.tp = 1, r.pp = 1, r.gpus = 8;
  const Layout with = build_layout(llama8b, megatron, r);
  r.mtp_layers = 0;
  const Layout without = build_layout(llama8b, megatron, r);
  PerfCoefficients exposed = datasheet;
  exposed.dp_overlap = 0.0;
  const PerfContext p(exposed, h100);
  const MicrobatchPasses mb = microbatch_passes(llama8b, p, with);
  const double module_f = mb.layer.forward.total() + mb.ends.mtp_proj_gemm_s + mb.ends.mtp_norms_s +
                          mb.ends.head_forward_s + mb.ends.loss_s;
  const double module_b = mb.layer.backward.total() + kGemmBackwardRatio * mb.ends.mtp_proj_gemm_s +
                          2 * mb.ends.mtp_norms_s + mb.ends.head_backward_s + mb.ends.loss_s;
  const StepBreakdown a = estimate_perf(llama8b, p, without).breakdown, b = estimate_perf(llama8b, p, with).breakdown;
  const double micro = static_cast<double>(with.microbatches());
  EXPECT_NEAR(b.compute_s() + b.overhead_s - (a.compute_s() + a.overhead_s), micro * (module_f + module_b),
              1e-9 * a.compute_s());
  EXPECT_EQ(mb.ends.mtp_proj_tp_forward_s, 0.0);  // t = 1
}

TEST_F(MtpTest, RefusedWhereMegatronWouldNotRunIt) {
  EXPECT_NE(refusal(llama8b, lib.framework("pytorch-fsdp"), job(1)).find("does not train multi-token-prediction"),
            std::string::npos);
  EXPECT_NE(refusal(lib.model("gpt3-175b"), megatron, job(1)).find("learns absolute positions"), std::string::npos);
  EXPECT_NE(refusal(llama8b, megatron, job(33)).find("valid: 0 to the decoder's 32 layers"), std::string::npos);
  LayoutRequest groups = job(1);
  groups.recompute = Recompute::full;
  groups.recompute_num_layers = 2;
  EXPECT_NE(refusal(llama8b, megatron, groups).find("1 (Megatron-LM's multi-token-prediction layer asserts it)"),
            std::string::npos);
  groups.recompute_method = RecomputeMethod::block;  // Megatron-LM keeps the module whole then
  EXPECT_EQ(refusal(llama8b, megatron, groups), "accepted");
  LayoutRequest lora = job(1);
  lora.lora_rank = 16;
  EXPECT_NE(refusal(llama8b, megatron, lora).find("not priced"), std::string::npos);
}

}  // namespace
}  // namespace headroom
