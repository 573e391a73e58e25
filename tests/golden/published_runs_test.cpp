// Golden test: the throughput model on published large-scale runs it was never fitted on (Narayanan et al. 2021
// Table 1, Korthikanti et al. 2022 Table 5: GPT 1.7B–1T, up to 3,072 A100 80GB, Megatron-LM of 2021/2022).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>

#include <cmath>
#include <filesystem>

#include "../test_support.hpp"
#include "headroom/estimator/flops.hpp"
#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/validation/published.hpp"

namespace headroom {
namespace {

// A published row by its id: the files may gain rows without moving these.
const validate::PublishedRun& row_of(const std::vector<validate::PublishedRun>& runs, std::string_view id) {
  const auto it = std::find_if(runs.begin(), runs.end(), [&](const auto& r) { return r.id == id; });
  if (it == runs.end()) throw std::runtime_error("no row " + std::string(id));
  return *it;
}

class PublishedRuns : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const SpecLibrary lib = test::library();
    const auto ref = lib.data_dir() / "reference";
    runs_ = new std::vector<validate::PublishedRun>(validate::published_runs(
        lib, lib.framework("megatron"), ref / "published_runs.csv", ref / "published_runs_calculon.csv"));
    result_ = new validate::PublishedValidation(
        validate::validate_published(*runs_, default_perf_coefficients(lib, "megatron")));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete runs_;
  }
  static std::vector<validate::PublishedRun>* runs_;
  static validate::PublishedValidation* result_;
};
std::vector<validate::PublishedRun>* PublishedRuns::runs_ = nullptr;
validate::PublishedValidation* PublishedRuns::result_ = nullptr;

// Ten rows of Narayanan et al. Table 1 and eight of Korthikanti et al. Table 5, every one with Calculon's prediction.
TEST_F(PublishedRuns, EighteenRowsInTwoSourcesAllWithCalculon) {
  ASSERT_EQ(result_->sources.size(), 2u);
  EXPECT_EQ(result_->sources[0].source, "Narayanan et al. 2021");
  EXPECT_EQ(result_->sources[0].runs, 10);
  EXPECT_EQ(result_->sources[1].source, "Korthikanti et al. 2022");
  EXPECT_EQ(result_->sources[1].runs, 8);
  EXPECT_EQ(result_->all.calculon_runs, 18);
  for (const auto& r : *runs_) {
    EXPECT_FALSE(r.layout.flash_attention) << r.id;  // 2021/2022: Megatron-LM's unfused softmax
    EXPECT_EQ(r.layout.gpus() % 8, 0) << r.id;
  }
}

// Table 1 prints TFLOP/s by Eq. 3; the 1T row (163 TFLOP/s on 3,072 GPUs, batch 3,072) is a 102.6 s step.
TEST_F(PublishedRuns, TflopsRowsBecomeStepTimesByEquationThree) {
  const auto& one_t = *std::find_if(runs_->begin(), runs_->end(), [](const auto& r) { return r.id == "N21-1t"; });
  EXPECT_NEAR(one_t.measured_step_s * 163e12 * 3072, narayanan_recompute_flops_per_step(one_t.model, 2048, 3072.0),
              1e-9 * one_t.measured_step_s * 163e12 * 3072);
  EXPECT_NEAR(one_t.measured_step_s, 102.63, 0.01);
}

// The goal, held out: at most 10% mean absolute step-time error per source, with nothing fitted on them.
TEST_F(PublishedRuns, EverySourceWithinTenPercentHeldOut) {
  for (const auto& s : result_->sources) EXPECT_LE(s.mean_abs_error, validate::kPublishedMeanErrorGoal) << s.source;
}

// Local DDP (2021) all-reduces after the backward: the row's grad_overlap False is Megatron-LM's DDP without
// --overlap-grad-reduce, whose shares hide none of the data-parallel traffic.
TEST_F(PublishedRuns, LocalDdpHidesNoGradientTraffic) {
  PerfCoefficients c;
  c.dp_overlap = 1.0;
  int local = 0;
  for (const auto& r : *runs_) {
    const DpOverlap f = dp_overlap_shares(PerfContext(c, r.cluster), r.layout);
    const double hidden = r.layout.overlap_grad_reduce ? 1.0 : 0.0;
    EXPECT_EQ(f.reductions, hidden) << r.id;
    EXPECT_EQ(f.gathers, hidden) << r.id;
    local += r.layout.overlap_grad_reduce ? 0 : 1;
  }
  EXPECT_GT(local, 0);  // the 2021 rows
}

// Published runs of models with experts (data/reference/published_moe_priced.csv, drawn from
// published_moe_runs.csv's H100 BF16 rows that headroom can express) read with their expert split and Megatron-LM's
// distributed optimizer; the Mixtral-8x7B rows' TFLOP/s become step times by headroom's model FLOPs, which equal
// training.py's at the README's commit (k experts' FFN, attention counted non-causally). Their errors are reported by
// `headroom validate` (published_moe_runs), not held to the 10% goal here: see the README.
TEST(PublishedMoeRuns, ReadWithTheirExpertSplitAndConvertedByModelFlops) {
  const SpecLibrary lib = test::library();
  const auto ref = lib.data_dir() / "reference";
  const auto runs = validate::published_runs(lib, lib.framework("megatron"), ref / "published_moe_priced.csv", "");
  const auto& mixtral = row_of(runs, "MCORE09-mixtral-8x7b");
  EXPECT_EQ(mixtral.model.num_experts, 8);
  EXPECT_EQ(mixtral.layout.ep, 8);
  EXPECT_EQ(mixtral.layout.expert_tp(), 1);
  EXPECT_EQ(mixtral.layout.sharding.optimizer, Shard::global);
  EXPECT_NEAR(mixtral.measured_step_s * 468e12 * 64, model_flops_per_step(mixtral.model, 4096, 256.0),
              1e-9 * model_flops_per_step(mixtral.model, 4096, 256.0));
  EXPECT_EQ(row_of(runs, "MBRIDGE-qwen3-30b-a3b").measured_step_s, 24.7138);
}

// Published FP8 runs (data/reference/published_fp8_priced.csv: NeMo 24.07's and Megatron-Bridge 25.11's
// DGX-H100 tables, and NeMo 24.03's long-sequence table) read with their recipe and context parallelism;
// tokens/s per GPU become step times as gbs·seq/(tokens/s·N), NeMo's 2024 TFLOP/s (the attention not halved for
// causality) as model FLOPs/(TFLOP/s·N). Their errors are reported by `headroom validate` (published_fp8_runs), not
// held to a goal here.
TEST(PublishedFp8Runs, ReadWithTheirRecipeAndConvertedFromTokens) {
  const SpecLibrary lib = test::library();
  const auto ref = lib.data_dir() / "reference";
  const auto runs = validate::published_runs(lib, lib.framework("megatron"), ref / "published_fp8_priced.csv", "");
  const auto row = [&runs](std::string_view id) -> const validate::PublishedRun& { return row_of(runs, id); };
  EXPECT_EQ(row("NEMO2407-llama2-7b").layout.fp8, Fp8Recipe::delayed);
  EXPECT_DOUBLE_EQ(row("NEMO2407-llama2-7b").measured_step_s, 128.0 * 4096 / (16934.0 * 8));
  EXPECT_EQ(row("NEMO2407-llama3-8b").layout.cp, 2);  // Llama 3 8B with CP 2
  EXPECT_EQ(row("MBRIDGE2511-llama3-70b").layout.fp8, Fp8Recipe::tensorwise);
  // Llama 3.1 405B on PP 8: 126 layers and the embedding and loss make 16 a stage (Megatron-Bridge's recipe).
  const auto& b405 = row("MBRIDGE2511-llama3.1-405b");
  EXPECT_TRUE(b405.layout.split.embedding_in_split && b405.layout.split.loss_in_split);
  EXPECT_EQ(stage_layers(b405.model, b405.layout, 0), 15);
  // Llama 2 7B at 1M tokens on 1,024 GPUs (t 8, c 32, d 4, 4 sequences a step) at 536 TFLOP/s per GPU.
  const auto& longest = row("NEMOLS-llama2-7b-1024k");
  EXPECT_EQ(longest.layout.seq, 1048576);
  EXPECT_EQ(longest.layout.cp, 32);
  EXPECT_TRUE(longest.layout.sequence_parallel);
  // NVIDIA's performance scripts of that container reduce gradients in BF16 (grad_sync_dtype=bf16), so the
  // gradient buffer is 2 B a parameter and the 4K run on 4 GPUs is not a false oom.
  EXPECT_TRUE(longest.layout.optimizer_precision.grad_reduce_in_bf16);
  EXPECT_TRUE(row("NEMOLS-llama2-7b-4k").layout.optimizer_precision.grad_reduce_in_bf16);
  EXPECT_TRUE(row("NEMO2407-gpt3-175b").layout.optimizer_precision.grad_reduce_in_bf16);
  // Megatron-Bridge's performance configs of Llama 3 and 3.1 set ddp.grad_reduce_in_fp32 = False.
  EXPECT_TRUE(row("MBRIDGE2511-llama3.1-405b").layout.optimizer_precision.grad_reduce_in_bf16);
  EXPECT_FALSE(row("MBRIDGE2511-llama3.1-405b").layout.optimizer_precision.precision_aware);
  EXPECT_DOUBLE_EQ(longest.measured_step_s, model_flops_per_step(longest.model, 1048576, 4.0) / (536e12 * 1024));
  // Megatron-Bridge's DGX-B200 rows: a GPU priced at H100's fitted fractions of peak (b200.json kernels_as).
  EXPECT_EQ(row("MBRIDGE2511-b200-llama3-8b").cluster.gpu.name, "b200");
  EXPECT_EQ(row("MBRIDGE2511-b200-llama3-8b").cluster.gpu.kernels_as, "h100-94gb");
  EXPECT_DOUBLE_EQ(row("MBRIDGE2511-b200-llama3.1-405b").measured_step_s, 64.0 * 8192 / (661.0 * 128));
}

// Published PyTorch FSDP runs (data/reference/published_fsdp_runs.csv: the fms-fsdp README's Llama 2 7B
// HSDP rows on A100 and H100) read under pytorch-fsdp with their sharding code and the framework's precision, the
// clusters as the README states their networks. Their errors are reported by `headroom validate`
// (published_fsdp_runs), not held to a goal here.
TEST(PublishedFsdpRuns, ReadWithTheirShardingUnderPytorchFsdp) {
  const SpecLibrary lib = test::library();
  const FrameworkProfile fsdp = lib.framework("pytorch-fsdp");
  const auto runs = validate::published_runs(lib, fsdp, lib.data_dir() / "reference" / "published_fsdp_runs.csv", "");
  ASSERT_FALSE(runs.empty());
  for (const auto& r : runs) {
    EXPECT_EQ(sharding_code(r.layout.sharding), "III") << r.id;  // HSDP
    EXPECT_EQ(r.layout.precision.optimizer_bytes, fsdp.precision.optimizer_bytes) << r.id;
    EXPECT_EQ(r.layout.recompute, Recompute::none) << r.id;
    EXPECT_DOUBLE_EQ(r.measured_step_s, 2.0 * 4096 / (r.id == "FMS-7b-a100" ? 4550.0 : 9600.0)) << r.id;
  }
  EXPECT_EQ(row_of(runs, "FMS-7b-a100").cluster.inter_node.bytes_per_s, 6.25e9);  // 400 Gb/s per node of 8 GPUs
  // The README's clusters do not become a bare GPU's default: --gpu a100-80gb still means a DGX A100.
  EXPECT_EQ(lib.cluster_for_gpu(lib.gpu("a100-80gb")).name, "dgx-a100-80gb");
  EXPECT_EQ(lib.cluster_for_gpu(lib.gpu("h100-80gb")).name, "dgx-h100");
}

// Published DeepSpeed runs (data/reference/published_deepspeed_runs.csv: Narayanan et al. 2021 Table 2, ZeRO-3
// without model parallelism on DGX A100) read under deepspeed with ZeRO-3's sharding and DeepSpeed's stage-3 defaults,
// one micro-batch per GPU, and converted from the paper's Eq. 3 TFLOP/s. Their errors are reported by `headroom
// validate` (published_deepspeed_runs), not held to a goal here.
TEST(PublishedDeepSpeedRuns, ReadAsZero3UnderDeepSpeed) {
  const SpecLibrary lib = test::library();
  const FrameworkProfile deepspeed = lib.framework("deepspeed");
  const auto runs =
      validate::published_runs(lib, deepspeed, lib.data_dir() / "reference" / "published_deepspeed_runs.csv", "");
  ASSERT_FALSE(runs.empty());
  for (const auto& r : runs) {
    EXPECT_EQ(sharding_code(r.layout.sharding), "GGG") << r.id;
    EXPECT_TRUE(r.layout.zero.deepspeed && r.layout.zero.overlap_comm) << r.id;  // stage 3's default
    EXPECT_EQ(r.layout.tp * r.layout.pp, 1) << r.id;
    EXPECT_EQ(r.layout.microbatches(), 1) << r.id;
    EXPECT_EQ(r.layout.recompute, Recompute::full) << r.id;
  }
  const auto& z = row_of(runs, "N21Z3-175b-1536");
  EXPECT_DOUBLE_EQ(z.measured_step_s, narayanan_recompute_flops_per_step(z.model, 2048, 1536.0) / (44e12 * 1536));
}

// The intra-node link efficiency every shipped framework prices collectives with (where no `clusters` entry names
// the cluster) is what nccl-tests measure on NVSwitch nodes of three GPU generations, not a fitted value.
TEST(PublishedCollectives, EveryFrameworksIntraNodeLinkIsWhatNcclTestsMeasure) {
  const SpecLibrary lib = test::library();
  const auto rows = validate::published_collectives(lib, lib.data_dir() / "reference" / "published_collectives.csv");
  int used = 0;
  const double measured = validate::intra_node_busbw_fraction(rows, &used);
  EXPECT_GE(used, 9);  // A100, H200 and B200 nodes
  EXPECT_NEAR(kMeasuredIntraNodeEfficiency, measured, 0.005);
  for (const char* f : {"megatron", "torchtitan", "deepspeed", "pytorch-fsdp"})
    EXPECT_EQ(default_perf_coefficients(lib, f).intra_efficiency, kMeasuredIntraNodeEfficiency) << f;
}

}  // namespace
}  // namespace headroom
