// FP8 training and offloading, each term against its closed form.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

class PrecisionOffloadTest : public ::testing::Test {
 protected:
  SpecLibrary lib = test::library();
  ModelSpec llama8b = lib.model("llama3.1-8b");
  ModelSpec mixtral = lib.model("mixtral-8x7b");
  ClusterSpec h100 = lib.cluster("dgx-h100");
  FrameworkProfile megatron = lib.framework("megatron");
  FrameworkProfile fsdp = lib.framework("pytorch-fsdp");
  PerfCoefficients datasheet;

  // Llama-3.1-8B's job of these tests: 8 GPUs, 8,192 tokens, 64 sequences a step.
  [[nodiscard]] static LayoutRequest job() {
    LayoutRequest r;
    r.gpus = 8, r.seq = 8192, r.gbs = 64;
    return r;
  }
  [[nodiscard]] Layout layout(const FrameworkProfile& f, Fp8Recipe fp8, std::int64_t tp = 1) const {
    LayoutRequest r = job();
    r.tp = tp;
    r.fp8 = fp8;
    return build_layout(llama8b, f, r);
  }
};

// Llama-3.1-8B: per layer W_qkv 4096×6144, W_o 4096×4096, gate/up/down 3·4096·14336.
TEST_F(PrecisionOffloadTest, LinearWeightsAreTheDecoderProjections) {
  const Layout l = layout(megatron, Fp8Recipe::delayed);
  EXPECT_DOUBLE_EQ(stage_linear_weight_parameters_per_gpu(llama8b, l, 0),
                   32.0 * (4096.0 * 6144 + 4096.0 * 4096 + 3.0 * 4096 * 14336));
  const Layout t2 = layout(megatron, Fp8Recipe::delayed, 2);
  EXPECT_DOUBLE_EQ(linear_weight_parameters_per_gpu(llama8b, t2, false),
                   linear_weight_parameters_per_gpu(llama8b, l, false) / 2.0);
}

TEST_F(PrecisionOffloadTest, TransformerEngineCachesTwoBytesPerWeightAndSavesInputsInFp8) {
  const Layout bf16 = layout(megatron, Fp8Recipe::none), fp8 = layout(megatron, Fp8Recipe::delayed);
  const StageMemory a = stage_memory(llama8b, h100, bf16, megatron.residual, 0);
  const StageMemory b = stage_memory(llama8b, h100, fp8, megatron.residual, 0);
  const double weights = stage_linear_weight_parameters_per_gpu(llama8b, fp8, 0);
  EXPECT_DOUBLE_EQ(fp8_weight_copy_bytes(llama8b, fp8, 0), 2.0 * weights);
  // 32 layers × 6 GEMMs' amax/scale state (5 tensors × 3 floats): a few KiB.
  EXPECT_DOUBLE_EQ(fp8_scaling_state_bytes(llama8b, fp8, 0), 32.0 * 4.0 * 5.0 * 3.0 * 4.0);
  EXPECT_DOUBLE_EQ(b.params - a.params, b.fp8);
  EXPECT_DOUBLE_EQ(b.fp8, 2.0 * weights + fp8_scaling_state_bytes(llama8b, fp8, 0));
  // Linear inputs saved in FP8: QKV input 1, FFN input 1, down input 14336/4096; the output projection's FP8 copy adds
  // a·d_h/h = 1, as FlashAttention keeps its BF16 output.
  const double sbh = 8192.0 * 4096.0;
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, bf16) - activation_bytes_per_layer(llama8b, fp8),
                   sbh * (1.0 - 1.0 + 1.0 + 14336.0 / 4096.0));
  EXPECT_DOUBLE_EQ(a.grads, b.grads);
  EXPECT_DOUBLE_EQ(a.optimizer, b.optimizer);
}

TEST_F(PrecisionOffloadTest, Fp8WeightsNeedNoCopyAndTorchaoKeepsBf16Inputs) {
  LayoutRequest r = job();
  r.fp8 = Fp8Recipe::delayed, r.fp8_param_gather = true;
  const Layout gathered = build_layout(llama8b, megatron, r);
  EXPECT_DOUBLE_EQ(fp8_weight_copy_bytes(llama8b, gathered, 0), 0.0);
  const Layout torchao = layout(fsdp, Fp8Recipe::tensorwise);
  EXPECT_EQ(torchao.fp8_library, Fp8Library::torchao);
  EXPECT_DOUBLE_EQ(fp8_weight_copy_bytes(llama8b, torchao, 0), 0.0);
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(llama8b, torchao),
                   activation_bytes_per_layer(llama8b, layout(fsdp, Fp8Recipe::none)));
}

TEST_F(PrecisionOffloadTest, LinearGemmsRunAtTheFp8PeakAndCastsCostHbmTraffic) {
  // A GPU without kernel curves (the 4D paper's H100 94GB): FP8 GEMMs at the same fraction of the doubled peak.
  const PerfContext p(datasheet, lib.cluster("h100-94gb-x4"));
  ASSERT_FALSE(p.device_curves);
  const Layout bf16 = layout(megatron, Fp8Recipe::none), fp8 = layout(megatron, Fp8Recipe::delayed);
  const LayerPasses a = layer_compute_seconds(llama8b, p, bf16), b = layer_compute_seconds(llama8b, p, fp8);
  EXPECT_NEAR(b.forward.gemm, a.forward.gemm * p.peak_flops / p.fp8_peak_flops, 1e-15);
  EXPECT_DOUBLE_EQ(b.forward.attention, a.forward.attention);  // FlashAttention stays BF16
  // Delayed scaling, t = 1: the attention output (4096) and the FFN product (14336) cast at 4 B per element; the norms
  // write FP8 themselves. Backward: the four GEMMs' output gradients (6144, 4096, 2·14336, 4096) at 4 B.
  const double tokens = 8192.0;
  const Fp8CastBytes cast = fp8_cast_bytes(llama8b, fp8, false);
  EXPECT_DOUBLE_EQ(cast.forward, 4.0 * tokens * (4096.0 + 14336.0));
  EXPECT_DOUBLE_EQ(cast.backward, 4.0 * tokens * (6144.0 + 4096.0 + 2.0 * 14336.0 + 4096.0));
  EXPECT_DOUBLE_EQ(b.forward.elementwise - a.forward.elementwise, cast.forward / p.hbm_bytes_per_s);
  // Current scaling reads each tensor once more for its amax and cannot fuse the cast into the norm.
  const Fp8CastBytes current = fp8_cast_bytes(llama8b, layout(megatron, Fp8Recipe::tensorwise), false);
  EXPECT_DOUBLE_EQ(current.forward, 6.0 * tokens * (4096.0 + 4096.0 + 14336.0 + 4096.0));
  const PerfEstimate eb = estimate_perf(llama8b, p, bf16), ef = estimate_perf(llama8b, p, fp8);
  EXPECT_LT(ef.step_time_s, eb.step_time_s);
  EXPECT_GT(ef.step_time_s, 0.5 * eb.step_time_s);
  EXPECT_DOUBLE_EQ(ef.model_flops, eb.model_flops);
}

// SP's all-gathers move FP8 where the inputs are quantized before the gather (TE delayed scaling, torchao); TE's
// current scaling gathers BF16 and casts the gathered tensor (t times the elements).
TEST_F(PrecisionOffloadTest, SequenceParallelGathersFp8UnderDelayedScalingOnly) {
  const PerfContext p(datasheet, h100);
  const Layout bf16 = layout(megatron, Fp8Recipe::none, 4), delayed = layout(megatron, Fp8Recipe::delayed, 4);
  const Layout current = layout(megatron, Fp8Recipe::tensorwise, 4);
  const double tp_bf16 = estimate_perf(llama8b, p, bf16).breakdown.tp_comm_s;
  EXPECT_LT(estimate_perf(llama8b, p, delayed).breakdown.tp_comm_s, tp_bf16);
  EXPECT_GT(estimate_perf(llama8b, p, delayed).breakdown.tp_comm_s, 0.5 * tp_bf16);
  EXPECT_DOUBLE_EQ(estimate_perf(llama8b, p, current).breakdown.tp_comm_s, tp_bf16);
  const double tokens = 8192.0;
  EXPECT_DOUBLE_EQ(fp8_cast_elements(llama8b, delayed, false).inputs_after_norm, 2.0 * tokens / 4.0 * 4096.0);
  EXPECT_DOUBLE_EQ(fp8_cast_elements(llama8b, current, false).inputs_after_norm, 2.0 * tokens * 4096.0);
}

TEST_F(PrecisionOffloadTest, Fp8ParameterGatherHalvesTheLinearWeightsOnTheWire) {
  const PerfContext p(datasheet, h100);
  LayoutRequest r;
  r.gpus = 8, r.seq = 8192, r.gbs = 8, r.fp8 = Fp8Recipe::delayed;
  const Layout bf16_gather = build_layout(llama8b, megatron, r);
  r.fp8_param_gather = true;
  const Layout fp8_gather = build_layout(llama8b, megatron, r);
  EXPECT_LT(estimate_perf(llama8b, p, fp8_gather).breakdown.dp_comm_s,
            estimate_perf(llama8b, p, bf16_gather).breakdown.dp_comm_s);
}

TEST_F(PrecisionOffloadTest, RefusesWhatCannotBePriced) {
  const Layout fp8 = layout(megatron, Fp8Recipe::delayed);
  EXPECT_THROW(validate_on_cluster(llama8b, fp8, lib.cluster("dgx-a100-80gb")), Error);  // no FP8 on A100
  EXPECT_NO_THROW(validate_on_cluster(llama8b, fp8, h100));
  EXPECT_THROW((void)layout(fsdp, Fp8Recipe::delayed), Error);  // torchao scales dynamically only
  LayoutRequest r = job();
  r.fp8_param_gather = true;
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);  // FP8 weights need FP8
  r.fp8_param_gather = false, r.fp8 = Fp8Recipe::delayed, r.lora_rank = 16;
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);  // FP8 LoRA
  r.lora_rank = 0, r.fp8 = Fp8Recipe::none, r.optimizer_offload = 1.0;
  EXPECT_THROW((void)build_layout(llama8b, fsdp, r), Error);  // no optimizer offload in the FSDP profile
  r.optimizer_offload = 0, r.activation_offload_layers = 32;
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);  // fewer than the 32 layers
  r.activation_offload_layers = 4, r.tp = 1, r.pp = 2;
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);  // not with pipeline parallelism
  r.pp = 1, r.optimizer_offload = 1.0, r.activation_offload_layers = 0;
  const Layout offload = build_layout(llama8b, megatron, r);
  EXPECT_THROW(validate_on_cluster(llama8b, offload, lib.cluster("lumi-mi250x")), Error);  // no host link given
}

TEST_F(PrecisionOffloadTest, OffloadedOptimizerMovesItsStatesAndPricesTheHostStep) {
  LayoutRequest r = job();
  r.optimizer_offload = 0.5;
  const Layout half = build_layout(llama8b, megatron, r);
  r.optimizer_offload = 0;
  const Layout none = build_layout(llama8b, megatron, r);
  const StageMemory a = stage_memory(llama8b, h100, none, megatron.residual, 0);
  const StageMemory b = stage_memory(llama8b, h100, half, megatron.residual, 0);
  EXPECT_DOUBLE_EQ(b.optimizer, 0.5 * a.optimizer);
  const double shard = a.optimizer / 12.0;  // parameters of the GPU's distributed-optimizer shard
  EXPECT_NEAR(b.host, 0.5 * shard * (12.0 + 4.0), 1e-3 * b.host);
  const PerfContext p(datasheet, h100);
  // 4 B of gradient down and 4 B of parameter up over 0.8 × 64 GB/s; 28 B per parameter of 8 GPUs through 0.7 × 614.4
  // GB/s of DRAM.
  const double params = 0.5 * shard, link = 0.8 * 64e9, dram = 0.7 * 614.4e9;
  const double copies = 2.0 * (10e-6 + 4.0 * params / link), cpu = 28.0 * params * 8.0 / dram;
  EXPECT_NEAR(offloaded_optimizer_seconds(p, half, shard), copies + cpu, 1e-9);
  Layout overlapped = half;
  overlapped.overlap_offload_copies = true;
  EXPECT_NEAR(offloaded_optimizer_seconds(p, overlapped, shard), std::max(copies, cpu), 1e-9);
  const PerfEstimate e = estimate_perf(llama8b, p, half);
  EXPECT_NEAR(e.breakdown.offload_s, copies + cpu, 1e-6);
  EXPECT_NEAR(e.breakdown.optimizer_s, 0.5 * estimate_perf(llama8b, p, none).breakdown.optimizer_s, 1e-12);
}

// Megatron-LM's precision-aware optimizer: BF16 main gradients (the gradient buffer, whole on every GPU under the
// distributed optimizer), the 16-bit remainder of the FP32 master weight beside the BF16 weight, and BF16 Adam moments,
// sharded over d·c. Bytes derived from the GPU's parameters: 2 B of gradient, 2 + 2 + 2 B of optimizer state.
TEST_F(PrecisionOffloadTest, PrecisionAwareOptimizerStatesAreStoredInTheirFormats) {
  LayoutRequest r = job();
  const Layout fp32 = build_layout(llama8b, megatron, r);
  r.optimizer_precision.precision_aware = true;
  r.optimizer_precision.main_grads = r.optimizer_precision.exp_avg = r.optimizer_precision.exp_avg_sq = Dtype::bf16;
  const Layout bf16 = build_layout(llama8b, megatron, r);
  const double params = stage_parameters_per_gpu(llama8b, bf16, 0), dc = static_cast<double>(bf16.dp * bf16.cp);
  const StageMemory a = stage_memory(llama8b, h100, fp32, megatron.residual, 0);
  const StageMemory b = stage_memory(llama8b, h100, bf16, megatron.residual, 0);
  EXPECT_DOUBLE_EQ(a.grads, 4.0 * params);
  EXPECT_DOUBLE_EQ(a.optimizer, (4.0 + 4.0 + 4.0) * params / dc);
  EXPECT_DOUBLE_EQ(b.grads, 2.0 * params);
  EXPECT_DOUBLE_EQ(b.optimizer, (2.0 + 2.0 + 2.0) * params / dc);
  EXPECT_DOUBLE_EQ(b.params, a.params);
  // FP8 moments are 1 B each; FP16 master weights 2 B; the precision-aware flag alone stores the remainder only.
  r.optimizer_precision.exp_avg = r.optimizer_precision.exp_avg_sq = Dtype::fp8;
  r.optimizer_precision.main_params = Dtype::fp16;
  EXPECT_DOUBLE_EQ(build_layout(llama8b, megatron, r).precision.optimizer_bytes, 2.0 + 1.0 + 1.0);
  LayoutRequest flag_only = job();
  flag_only.optimizer_precision.precision_aware = true;
  const Layout remainder = build_layout(llama8b, megatron, flag_only);
  EXPECT_DOUBLE_EQ(remainder.precision.optimizer_bytes, 2.0 + 4.0 + 4.0);
  EXPECT_DOUBLE_EQ(remainder.precision.grad_bytes, 4.0);
  // Under an FP8 recipe other than delayed, Megatron-LM keeps the FP32 master weights itself.
  flag_only.fp8 = Fp8Recipe::tensorwise;
  EXPECT_DOUBLE_EQ(build_layout(llama8b, megatron, flag_only).precision.optimizer_bytes, 4.0 + 4.0 + 4.0);
}

// --grad-reduce-in-bf16 accumulates and reduces gradients in BF16: half the gradient buffer and less DP traffic, and
// the optimizer step reads 2 B of gradient per parameter instead of 4.
TEST_F(PrecisionOffloadTest, GradientsReducedInBf16HalveTheBufferAndTheTraffic) {
  LayoutRequest r = job();
  const Layout fp32 = build_layout(llama8b, megatron, r);
  r.optimizer_precision.grad_reduce_in_bf16 = true;
  const Layout bf16 = build_layout(llama8b, megatron, r);
  EXPECT_DOUBLE_EQ(bf16.precision.grad_bytes, 2.0);
  EXPECT_DOUBLE_EQ(bf16.precision.optimizer_bytes, fp32.precision.optimizer_bytes);
  PerfCoefficients exposed = datasheet;
  exposed.dp_overlap = 0.0;  // every DP collective exposed
  const PerfContext p(exposed, h100);
  EXPECT_LT(estimate_perf(llama8b, p, bf16).breakdown.dp_comm_s, estimate_perf(llama8b, p, fp32).breakdown.dp_comm_s);
  const double shard = 1e9;
  const double saved = shard * (4.0 - 2.0) / p.hbm_bytes_per_s;
  EXPECT_NEAR(optimizer_step_seconds(p, fp32, shard) - optimizer_step_seconds(p, bf16, shard), saved, 1e-9 * saved);
}

// --fp16 (Megatron-LM's mixed precision with FP16 weights): FP16 gradients that the step copies to FP32, beside FP32
// master weights and moments, Megatron-LM's table of 20 B a parameter, 4 + 16/d with the distributed optimizer
// (docs/user-guide/features/dist_optimizer.md); FP32 gradients with --accumulate-allreduce-grads-in-fp32, 18 and
// 6 + 12/d as BF16's. GEMMs run at BF16's rate, which the datasheets give FP16 too.
TEST_F(PrecisionOffloadTest, Fp16KeepsMegatronsMixedPrecisionBytes) {
  LayoutRequest r = job();
  const Layout bf16 = build_layout(llama8b, megatron, r);
  r.optimizer_precision.fp16 = true;
  const Layout fp16 = build_layout(llama8b, megatron, r);
  const double params = stage_parameters_per_gpu(llama8b, fp16, 0), d = static_cast<double>(fp16.dp * fp16.cp);
  const StageMemory m = stage_memory(llama8b, h100, fp16, megatron.residual, 0);
  EXPECT_DOUBLE_EQ(m.params + m.grads + m.optimizer, (4.0 + 16.0 / d) * params);
  r.sharding = StateSharding{Shard::none, Shard::none, Shard::none};
  const Layout ddp = build_layout(llama8b, megatron, r);
  const StageMemory n = stage_memory(llama8b, h100, ddp, megatron.residual, 0);
  EXPECT_DOUBLE_EQ(n.params + n.grads + n.optimizer, 20.0 * params);
  r.optimizer_precision.accumulate_allreduce_grads_in_fp32 = true;
  const Layout fp32_grads = build_layout(llama8b, megatron, r);
  EXPECT_DOUBLE_EQ(fp32_grads.precision.grad_bytes + fp32_grads.precision.optimizer_bytes, 4.0 + 12.0);
  // The compute is BF16's; FP16 gradients halve the DP traffic.
  PerfCoefficients exposed = datasheet;
  exposed.dp_overlap = 0.0;
  const PerfContext p(exposed, h100);
  const auto a = estimate_perf(llama8b, p, bf16).breakdown, b = estimate_perf(llama8b, p, fp16).breakdown;
  EXPECT_DOUBLE_EQ(b.compute_s(), a.compute_s());
  EXPECT_LT(b.dp_comm_s, a.dp_comm_s);
}

// --moe-shared-expert-overlap is Megatron-LM's: refused under another framework, naming it.
TEST_F(PrecisionOffloadTest, SharedExpertOverlapIsMegatronsOnly) {
  LayoutRequest r = job();
  r.shared_expert_overlap = true;
  EXPECT_TRUE(build_layout(lib.model("deepseek-v3"), megatron, r).shared_expert_overlap);
  EXPECT_FALSE(build_layout(llama8b, megatron, r).shared_expert_overlap);  // no shared expert: no effect
  try {
    (void)build_layout(llama8b, fsdp, r);
    ADD_FAILURE() << "moe_shared_expert_overlap accepted under pytorch-fsdp";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("moe-shared-expert-overlap"), std::string::npos) << e.what();
  }
}

// What headroom does not price with --fp16 is refused: FP8 on top, the precision-aware optimizer, BF16 reduction,
// another framework, a GPU whose FP16 peak is not its BF16 one.
TEST_F(PrecisionOffloadTest, Fp16RefusesWhatItDoesNotPrice) {
  LayoutRequest r = job();
  r.optimizer_precision.fp16 = true;
  EXPECT_THROW((void)build_layout(llama8b, fsdp, r), Error);
  ClusterSpec other = h100;
  other.gpu.fp16_flops = 2.0 * other.gpu.bf16_flops;
  const Layout fp16 = build_layout(llama8b, megatron, r);
  EXPECT_NO_THROW(validate_on_cluster(llama8b, fp16, h100));
  EXPECT_THROW(validate_on_cluster(llama8b, fp16, other), Error);
  LayoutRequest fp8 = r, bf16_reduction = r, precision_aware = r;
  fp8.fp8 = Fp8Recipe::delayed;
  bf16_reduction.optimizer_precision.grad_reduce_in_bf16 = true;
  precision_aware.optimizer_precision.precision_aware = true;
  for (const LayoutRequest& bad : {fp8, bf16_reduction, precision_aware})
    EXPECT_THROW((void)build_layout(llama8b, megatron, bad), Error);
}

// What Megatron-LM refuses is refused: formats other than fp32 without the precision-aware optimizer
// (optimizer_config.py), the precision-aware optimizer without the distributed optimizer (optimizer/__init__.py); and
// what headroom does not price: these formats under another framework or with an offloaded optimizer.
TEST_F(PrecisionOffloadTest, PrecisionAwareOptimizerRefusesWhatMegatronRefuses) {
  KnobSettings k;
  k.set(KnobId::exp_avg_dtype, std::string("bf16"));
  try {
    (void)layout_request(k, megatron);
    ADD_FAILURE() << "exp_avg_dtype bf16 accepted without use_precision_aware_optimizer";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exp-avg-dtype bf16 needs"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use-precision-aware-optimizer"), std::string::npos) << e.what();
  }
  k.set(KnobId::use_precision_aware_optimizer, true);
  EXPECT_EQ(layout_request(k, megatron).optimizer_precision.exp_avg, Dtype::bf16);
  LayoutRequest r = job();
  r.optimizer_precision.precision_aware = true;
  r.sharding = StateSharding{Shard::none, Shard::none, Shard::none};
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);  // DDP: no distributed optimizer
  r.sharding.reset();
  EXPECT_THROW((void)build_layout(llama8b, fsdp, r), Error);
  r.optimizer_offload = 1.0;
  EXPECT_NO_THROW((void)build_layout(llama8b, megatron, r));  // Megatron-LM needs the flag with the offload
  r.optimizer_precision.exp_avg = Dtype::bf16;
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);
}

TEST_F(PrecisionOffloadTest, OffloadedActivationsLeaveTheGpuAndCostExposedCopies) {
  LayoutRequest r = job();
  r.activation_offload_layers = 8;
  const Layout off = build_layout(llama8b, megatron, r);
  r.activation_offload_layers = 0;
  const Layout none = build_layout(llama8b, megatron, r);
  const StageMemory a = stage_memory(llama8b, h100, none, megatron.residual, 0);
  const StageMemory b = stage_memory(llama8b, h100, off, megatron.residual, 0);
  EXPECT_DOUBLE_EQ(offloaded_activation_bytes(llama8b, off), 8.0 * activation_bytes_per_layer(llama8b, off));
  EXPECT_DOUBLE_EQ(a.activations - b.activations, offloaded_activation_bytes(llama8b, off));
  EXPECT_DOUBLE_EQ(b.host, offloaded_activation_bytes(llama8b, off));
  const PerfContext p(datasheet, h100);
  const LayerPasses one = layer_compute_seconds(llama8b, p, off);
  const double copy = p.host.seconds(activation_bytes_per_layer(llama8b, off));
  const double exposed = 8.0 * 8.0 *
                         (std::max(0.0, copy - one.forward.total()) +
                          std::max(0.0, copy - one.backward.total()));  // 8 micro-batches, 8 layers
  EXPECT_NEAR(estimate_perf(llama8b, p, off).breakdown.offload_s, exposed, 1e-9);
}

TEST_F(PrecisionOffloadTest, ExpertLayersSaveTheirRoutedInputsInFp8) {
  LayoutRequest r;
  r.tp = 1, r.ep = 8, r.gpus = 8, r.seq = 4096, r.gbs = 64;
  const Layout bf16 = build_layout(mixtral, megatron, r);
  r.fp8 = Fp8Recipe::delayed;
  const Layout fp8 = build_layout(mixtral, megatron, r);
  // Attention (1 − 1) and, for each of the 2 routed copies, the expert input (etp 1) and down input (14336/4096).
  EXPECT_DOUBLE_EQ(moe_activation_bytes_per_layer(mixtral, bf16) - moe_activation_bytes_per_layer(mixtral, fp8),
                   4096.0 * 4096.0 * (0.0 + 2.0 * (1.0 + 14336.0 / 4096.0)));
  // The GPU's one expert of each layer is an FP8 weight; the router is not.
  EXPECT_DOUBLE_EQ(linear_weight_parameters_per_gpu(mixtral, fp8, true),
                   2.0 * 4096.0 * (4096.0 + 1024.0) + 3.0 * 4096.0 * 14336.0);
  const PerfContext p(datasheet, h100);
  EXPECT_LT(estimate_perf(mixtral, p, fp8).step_time_s, estimate_perf(mixtral, p, bf16).step_time_s);
}

// A GPU with kernel curves (h100-80gb: the H200's measured data/kernels/h200-measured.json) prices FP8 GEMMs on its
// own FP8 curve, not BF16's fraction of the FP8 peak: cuBLASLt's FP8 reached 0.61 of its peak at 4096x4608x4096 where
// BF16 reached 0.70.
TEST_F(PrecisionOffloadTest, DeviceCurvesPriceFp8GemmsOnTheirOwnCurve) {
  const PerfContext p(datasheet, h100);
  ASSERT_TRUE(p.device_curves);
  const GemmShape g{4096, 4096, 4096};
  EXPECT_NEAR(gemm_efficiency(p, g, false), gemm_curve_fraction(h100.gpu.kernels.bf16, 4096, 4096, 4096), 1e-12);
  EXPECT_NEAR(gemm_efficiency(p, g, true), gemm_curve_fraction(h100.gpu.kernels.fp8, 4096, 4096, 4096), 1e-12);
  EXPECT_LT(gemm_efficiency(p, g, true), gemm_efficiency(p, g, false));
  PerfCoefficients stack = datasheet;
  stack.stack_gemm_fraction = 0.5;
  EXPECT_NEAR(gemm_efficiency(PerfContext(stack, h100), g, true), 0.5 * gemm_efficiency(p, g, true), 1e-12);
}

// PyTorch FSDP's MixedPrecision over an FP32 model keeps FP32 shards of the parameters and gradients and FP32 AdamW
// moments, 16 B a parameter, where the framework's BF16 model keeps 8; the gathers and reductions move BF16 either way.
// Other frameworks set their formats themselves, and LoRA's frozen base is priced in BF16 only.
TEST_F(PrecisionOffloadTest, FsdpMixedPrecisionKeepsFp32Shards) {
  LayoutRequest r;
  r.gpus = 8, r.seq = 4096;
  const Layout bf16 = build_layout(llama8b, fsdp, r);
  r.fsdp_mixed_precision = true;
  const Layout mixed = build_layout(llama8b, fsdp, r);
  const auto state_bytes = [](const Precision& p) { return p.weight_bytes + p.grad_bytes + p.optimizer_bytes; };
  EXPECT_DOUBLE_EQ(state_bytes(bf16.precision), 8.0);
  EXPECT_DOUBLE_EQ(state_bytes(mixed.precision), 16.0);
  EXPECT_DOUBLE_EQ(mixed.precision.weight_bytes, bf16.precision.weight_bytes);
  EXPECT_DOUBLE_EQ(mixed.precision.grad_bytes, bf16.precision.grad_bytes);
  EXPECT_TRUE(mixed.fsdp_mixed_precision);
  EXPECT_THROW((void)build_layout(llama8b, megatron, r), Error);
  r.lora_rank = 16;
  EXPECT_THROW((void)build_layout(llama8b, fsdp, r), Error);
}

}  // namespace
}  // namespace headroom
