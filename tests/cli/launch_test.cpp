// `headroom launch`: Megatron-LM arguments, torchtitan TOML and the PyTorch FSDP2 snippet of one layout, and the
// sharding codes a framework cannot express flagged instead of approximated.
#include <algorithm>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/launch_args.hpp"
#include "headroom/estimator/sharding.hpp"
#include "../cli_support.hpp"

namespace headroom {
namespace {

using Result = test::CliResult;
constexpr auto run = &test::run_cli;

// Llama 3.1 8B on 64 H100s of dgx-h100 (8 per node): tp 2, cp 2, pp 2 x 2 virtual stages, dp 8.
const std::vector<std::string> kLayout = {"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "16384",
                                          "--tp",   "2",       "--cp",        "2",         "--pp",     "2",     "--vpp",
                                          "2",      "--gpus",  "64",          "--gbs",     "256",      "--mbs", "1"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

nlohmann::json launch_json(const std::vector<std::string>& extra = {}) {
  const Result r = run(with(with(kLayout, extra), {"--json"}));
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

// The value after `flag` in the Megatron-LM argument list, "" when the flag is absent, "on" for a switch.
std::string megatron_value(const nlohmann::json& j, const std::string& flag) {
  const auto args = j.at("megatron").get<std::vector<std::string>>();
  const auto it = std::find(args.begin(), args.end(), flag);
  if (it == args.end()) return "";
  if (it + 1 == args.end() || (it + 1)->starts_with("--")) return "on";
  return *(it + 1);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Launch, MegatronArguments) {
  const auto j = launch_json();
  EXPECT_EQ(megatron_value(j, "--tensor-model-parallel-size"), "2");
  EXPECT_EQ(megatron_value(j, "--pipeline-model-parallel-size"), "2");
  EXPECT_EQ(megatron_value(j, "--context-parallel-size"), "2");
  EXPECT_EQ(megatron_value(j, "--num-layers-per-virtual-pipeline-stage"), "8");  // 32 layers / (2 · 2)
  EXPECT_EQ(megatron_value(j, "--sequence-parallel"), "on");
  EXPECT_EQ(megatron_value(j, "--use-distributed-optimizer"), "on");  // megatron's default NNG
  EXPECT_EQ(megatron_value(j, "--micro-batch-size"), "1");
  EXPECT_EQ(megatron_value(j, "--global-batch-size"), "256");
  EXPECT_EQ(megatron_value(j, "--seq-length"), "16384");
  EXPECT_EQ(megatron_value(j, "--bf16"), "on");
  EXPECT_EQ(megatron_value(j, "--recompute-granularity"), "");
  EXPECT_TRUE(j.at("unsupported").at("megatron").empty());
  EXPECT_EQ(j.at("torchrun").at("nnodes"), 8);
  EXPECT_EQ(j.at("torchrun").at("nproc_per_node"), 8);
  EXPECT_TRUE(contains(j.at("versions").at("megatron").get<std::string>(), "core_r0.8.0"));

  EXPECT_EQ(megatron_value(j, "--disable-bias-linear"), "on");
  EXPECT_EQ(megatron_value(j, "--add-qkv-bias"), "");
  // Qwen2's q/k/v biases (megatron/training/arguments.py of core_r0.8.0 has --add-qkv-bias).
  const Result qwen = run({"launch", "--model", "qwen2.5-72b", "--cluster", "dgx-h100", "--seq", "8192", "--tp", "8",
                           "--pp", "4", "--gpus", "64", "--json"});
  ASSERT_EQ(qwen.code, 0) << qwen.err;
  EXPECT_EQ(megatron_value(nlohmann::json::parse(qwen.out), "--add-qkv-bias"), "on");
  // Gemma 2: 128-wide heads (--kv-channels), a 4,096-token window on every other layer; its norms after attention
  // and MLP have no Megatron-LM flag, said under "unsupported".
  const Result gemma = run({"launch", "--model", "gemma-2-27b", "--cluster", "dgx-h100", "--seq", "8192", "--tp", "8",
                            "--gpus", "64", "--json"});
  ASSERT_EQ(gemma.code, 0) << gemma.err;
  const auto g = nlohmann::json::parse(gemma.out);
  EXPECT_EQ(megatron_value(g, "--kv-channels"), "128");
  EXPECT_EQ(megatron_value(g, "--window-size"), "4095,0");
  EXPECT_EQ(megatron_value(g, "--window-attn-skip-freq"), "2");
  EXPECT_EQ(megatron_value(j, "--kv-channels"), "");
  EXPECT_TRUE(contains(g.at("unsupported").at("megatron").dump(), "norms after attention and MLP"));
  // Experts: the model's experts, the split, the dispatcher headroom prices and the capacity factor.
  const Result moe = run({"launch", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--pp", "2",
                          "--gpus", "64", "--ep", "8", "--etp", "1", "--moe-expert-capacity-factor", "1.25", "--json"});
  ASSERT_EQ(moe.code, 0) << moe.err;
  const auto x = nlohmann::json::parse(moe.out);
  EXPECT_EQ(megatron_value(x, "--num-experts"), "8");
  EXPECT_EQ(megatron_value(x, "--moe-router-topk"), "2");
  EXPECT_EQ(megatron_value(x, "--moe-ffn-hidden-size"), "14336");
  EXPECT_EQ(megatron_value(x, "--expert-model-parallel-size"), "8");
  EXPECT_EQ(megatron_value(x, "--expert-tensor-parallel-size"), "1");
  EXPECT_EQ(megatron_value(x, "--moe-token-dispatcher-type"), "alltoall");
  EXPECT_EQ(megatron_value(x, "--moe-grouped-gemm"), "on");
  EXPECT_EQ(megatron_value(x, "--moe-expert-capacity-factor"), "1.25");
  EXPECT_TRUE(contains(x.at("unsupported").at("torchtitan").dump(), "expert parallelism"));

  const auto full = launch_json({"--recompute", "full", "--no-sp"});
  EXPECT_EQ(megatron_value(full, "--recompute-granularity"), "full");
  EXPECT_EQ(megatron_value(full, "--recompute-method"), "uniform");
  EXPECT_EQ(megatron_value(full, "--recompute-num-layers"), "1");
  EXPECT_EQ(megatron_value(full, "--sequence-parallel"), "");
}

// The precision-aware optimizer's flags are written as Megatron-LM spells them, and read back by estimate (the knob
// table's Megatron spellings) they give the same memory; Nemotron's plain MLP is Megatron-LM's --squared-relu with
// RoPE on half of each head.
TEST(Launch, PrecisionAwareOptimizerAndSquaredReluRoundTrip) {
  const std::vector<std::string> precision_flags = {"--use-precision-aware-optimizer",
                                                    "--main-grads-dtype",
                                                    "bf16",
                                                    "--exp-avg-dtype",
                                                    "bf16",
                                                    "--exp-avg-sq-dtype",
                                                    "fp8",
                                                    "--main-params-dtype",
                                                    "fp16"};
  const auto j = launch_json(precision_flags);
  EXPECT_EQ(megatron_value(j, "--use-precision-aware-optimizer"), "on");
  EXPECT_EQ(megatron_value(j, "--main-grads-dtype"), "bf16");
  EXPECT_EQ(megatron_value(j, "--main-params-dtype"), "fp16");
  EXPECT_EQ(megatron_value(j, "--exp-avg-dtype"), "bf16");
  EXPECT_EQ(megatron_value(j, "--exp-avg-sq-dtype"), "fp8");
  EXPECT_EQ(megatron_value(j, "--grad-reduce-in-bf16"), "");
  EXPECT_EQ(megatron_value(launch_json({"--grad-reduce-in-bf16"}), "--grad-reduce-in-bf16"), "on");
  EXPECT_EQ(megatron_value(launch_json(), "--use-precision-aware-optimizer"), "");
  // The written flags, given to estimate, price what the precision_flags priced.
  std::vector<std::string> written;
  const auto args = j.at("megatron").get<std::vector<std::string>>();
  for (auto it = args.begin(); it != args.end(); ++it)
    if (std::find(precision_flags.begin(), precision_flags.end(), *it) != precision_flags.end()) {
      written.push_back(*it);
      if (it + 1 != args.end() && !(it + 1)->starts_with("--")) written.push_back(*++it);
    }
  std::vector<std::string> estimate = kLayout;
  estimate.front() = "estimate";
  const Result a = run(with(with(estimate, precision_flags), {"--json"})),
               b = run(with(with(estimate, written), {"--json"}));
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out).at("memory"), nlohmann::json::parse(b.out).at("memory"));
  const Result no_flag = run(with(estimate, {"--exp-avg-dtype", "bf16"}));
  EXPECT_EQ(no_flag.code, 2);
  EXPECT_TRUE(contains(no_flag.err, "--exp-avg-dtype bf16 needs --use-precision-aware-optimizer")) << no_flag.err;
  EXPECT_EQ(std::count(no_flag.err.begin(), no_flag.err.end(), '\n'), 1) << no_flag.err;

  const Result nemotron =
      run({"launch", "--model", std::string(HEADROOM_TEST_SOURCE_DIR) + "/data/models/nemotron-4-340b/config.json",
           "--cluster", "dgx-h100", "--seq", "4096", "--tp", "8", "--pp", "12", "--gpus", "96", "--json"});
  ASSERT_EQ(nemotron.code, 0) << nemotron.err;
  const auto n = nlohmann::json::parse(nemotron.out);
  EXPECT_EQ(megatron_value(n, "--squared-relu"), "on");
  EXPECT_EQ(megatron_value(n, "--swiglu"), "");
  EXPECT_EQ(megatron_value(n, "--rotary-percent"), "0.5");
  EXPECT_EQ(megatron_value(n, "--normalization"), "LayerNorm");
}

// Every property of the model spec that changes the arithmetic is written as Megatron-LM's flag or said to have none
// (megatron/training/arguments.py): Llama 3.1's RoPE base and frequency scaling, the norms' epsilon, dropout;
// Gemma 2's GeGLU, (1 + w) norms, scaled embeddings, soft caps and query scale; DeepSeek-V3's latent attention and
// YaRN.
TEST(Launch, EveryArithmeticPropertyIsAFlagOrUnsupported) {
  const auto llama = launch_json();
  EXPECT_EQ(megatron_value(llama, "--rotary-base"), "500000");
  EXPECT_EQ(megatron_value(llama, "--use-rope-scaling"), "on");
  EXPECT_EQ(megatron_value(llama, "--rope-scaling-factor"), "8");
  EXPECT_EQ(megatron_value(llama, "--norm-epsilon"), "1e-05");
  EXPECT_EQ(megatron_value(llama, "--attention-dropout"), "0");
  EXPECT_EQ(megatron_value(llama, "--swiglu"), "on");
  EXPECT_EQ(megatron_value(llama, "--apply-layernorm-1p"), "");
  EXPECT_TRUE(llama.at("unsupported").at("megatron").empty()) << llama.at("unsupported");

  const std::vector<std::string> gemma_args = {"launch", "--model",  "gemma-2-27b", "--cluster", "dgx-h100",
                                               "--seq",  "8192",     "--tp",        "8",         "--gpus",
                                               "64",     "--export", "megatron"};
  const Result text = run(gemma_args);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "# UNSUPPORTED: GeGLU (gated tanh GELU)")) << text.out;
  const Result gemma = run(with(gemma_args, {"--json"}));
  ASSERT_EQ(gemma.code, 0) << gemma.err;
  const auto g = nlohmann::json::parse(gemma.out);
  EXPECT_EQ(megatron_value(g, "--swiglu"), "");  // SiLU is not Gemma's activation
  EXPECT_EQ(megatron_value(g, "--apply-layernorm-1p"), "on");
  EXPECT_EQ(megatron_value(g, "--rotary-base"), "10000");
  EXPECT_EQ(megatron_value(g, "--use-rope-scaling"), "");
  EXPECT_EQ(megatron_value(g, "--norm-epsilon"), "1e-06");
  const std::string unsupported = g.at("unsupported").at("megatron").dump();
  for (const char* what : {"GeGLU", "embeddings scaled by sqrt(hidden size)", "attention soft cap 50",
                           "final logit soft cap 30", "softmax scale 1/sqrt(144)", "norms after attention and MLP"})
    EXPECT_TRUE(contains(unsupported, what)) << what << ": " << unsupported;

  const Result deepseek = run({"launch", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--seq", "4096", "--tp",
                               "8", "--ep", "64", "--gpus", "512", "--gbs", "1024", "--json"});
  ASSERT_EQ(deepseek.code, 0) << deepseek.err;
  const auto d = nlohmann::json::parse(deepseek.out);
  EXPECT_EQ(megatron_value(d, "--multi-latent-attention"), "on");
  EXPECT_EQ(megatron_value(d, "--q-lora-rank"), "1536");
  EXPECT_EQ(megatron_value(d, "--kv-lora-rank"), "512");
  EXPECT_EQ(megatron_value(d, "--qk-head-dim"), "128");
  EXPECT_EQ(megatron_value(d, "--qk-pos-emb-head-dim"), "64");
  EXPECT_EQ(megatron_value(d, "--v-head-dim"), "128");
  EXPECT_TRUE(contains(d.at("unsupported").at("megatron").dump(), "RoPE scaling yarn (factor 40)"))
      << d.at("unsupported");

  // A model whose spec leaves the epsilon out: Megatron-LM's default is said to apply, not assumed silently.
  const Result gpt =
      run({"launch", "--model", "gpt-1.7b", "--cluster", "dgx-a100-80gb", "--seq", "2048", "--gpus", "8", "--json"});
  ASSERT_EQ(gpt.code, 0) << gpt.err;
  const auto x = nlohmann::json::parse(gpt.out);
  EXPECT_EQ(megatron_value(x, "--norm-epsilon"), "");
  EXPECT_TRUE(contains(x.at("unsupported").at("megatron").dump(), "no norm_eps")) << x.at("unsupported");
  EXPECT_EQ(megatron_value(x, "--rotary-base"), "");  // learned positions
}

// Sharding and schedules PyTorch runs and Megatron-LM does not (data/frameworks/pytorch-fsdp.json).
const std::vector<std::string> kFsdp = {"--framework", "pytorch-fsdp", "--recompute", "none"};

TEST(Launch, TorchtitanToml) {
  const auto j = launch_json(with(kFsdp, {"--sharding", "fsdp"}));
  const std::string toml = j.at("torchtitan_toml");
  for (const char* line :
       {"[parallelism]\n", "data_parallel_replicate_degree = 1\n", "data_parallel_shard_degree = 8\n",
        "fsdp_reshard_after_forward = \"always\"\n", "tensor_parallel_degree = 2\n", "context_parallel_degree = 2\n",
        "pipeline_parallel_degree = 2\n", "pipeline_parallel_schedule = \"Interleaved1F1B\"\n",
        "pipeline_parallel_microbatch_size = 1\n", "[training]\n", "local_batch_size = 32\n",
        "global_batch_size = 256\n", "seq_len = 16384\n", "[activation_checkpoint]\n", "mode = \"none\"\n"})
    EXPECT_TRUE(contains(toml, line)) << line << "\n" << toml;
  EXPECT_TRUE(j.at("unsupported").at("torchtitan").empty()) << j.at("unsupported");
  EXPECT_FALSE(contains(toml, "UNSUPPORTED"));
  // Megatron-LM cannot shard parameters with its distributed optimizer: flagged, not approximated.
  ASSERT_EQ(j.at("unsupported").at("megatron").size(), 1u);
  EXPECT_TRUE(contains(j.at("unsupported").at("megatron")[0], "sharding GGG"));
  EXPECT_EQ(megatron_value(j, "--use-distributed-optimizer"), "");
}

TEST(Launch, HybridShardingSplitsTheDataParallelGroupByNode) {
  // III: shard inside a node. A node holds 8 / t = 4 ranks of the DP×CP group, i.e. dp_shard 2 × cp 2.
  const auto j = launch_json(with(kFsdp, {"--sharding", "hsdp"}));
  const std::string toml = j.at("torchtitan_toml");
  EXPECT_TRUE(contains(toml, "data_parallel_replicate_degree = 4\n")) << toml;
  EXPECT_TRUE(contains(toml, "data_parallel_shard_degree = 2\n")) << toml;
  const std::string py = j.at("fsdp_python");
  EXPECT_TRUE(contains(py, "init_device_mesh(\"cuda\", (2, 4, 2, 2, 2)")) << py;
  EXPECT_TRUE(contains(py, "ShardingStrategy.HYBRID_SHARD")) << py;
  EXPECT_TRUE(contains(py, "dp_mesh = mesh[(\"dp_replicate\", \"dp_shard_cp\")]")) << py;
}

TEST(Launch, ZeroTwoIsReshardNever) {
  const auto j = launch_json(with(kFsdp, {"--sharding", "zero2"}));
  EXPECT_TRUE(contains(j.at("torchtitan_toml"), "fsdp_reshard_after_forward = \"never\"\n"));
  EXPECT_TRUE(contains(j.at("fsdp_python"), "reshard_after_forward=False"));
  EXPECT_TRUE(contains(j.at("fsdp_python"), "ShardingStrategy.SHARD_GRAD_OP"));
}

// No framework profile runs IIG, so estimate and launch refuse it; `rank --all-shardings` can still pick it as its
// fastest and prints its launch lines: flagged there, never approximated.
TEST(Launch, CodesWithoutAnEquivalentAreFlagged) {
  const Result refused = run(with(kLayout, {"--sharding", "IIG"}));
  EXPECT_EQ(refused.code, 2);
  EXPECT_TRUE(refused.out.empty());
  EXPECT_TRUE(contains(refused.err, "does not run the sharding IIG (--sharding; it runs: NNN, NNG)")) << refused.err;

  const SpecLibrary lib = test::library();
  const ModelSpec model = lib.model("llama3.1-8b");
  const ClusterSpec cluster = lib.cluster("dgx-h100");
  LayoutRequest q;
  q.tp = 2, q.cp = 2, q.pp = 2, q.vpp = 2, q.gpus = 64, q.gbs = 256, q.seq = 16384;
  Layout l = build_layout(model, lib.framework("megatron"), q);
  l.sharding = *sharding_from_code("IIG");
  const nlohmann::json j = launch_to_json(launch_export(model, cluster, l));
  EXPECT_FALSE(j.at("unsupported").at("megatron").empty());
  EXPECT_FALSE(j.at("unsupported").at("torchtitan").empty());
  EXPECT_FALSE(j.at("unsupported").at("fsdp").empty());
  const std::string toml = j.at("torchtitan_toml");
  EXPECT_TRUE(contains(toml, "# UNSUPPORTED: sharding IIG")) << toml;
  EXPECT_FALSE(contains(toml, "data_parallel_shard_degree")) << toml;  // no guessed degrees
  EXPECT_TRUE(contains(j.at("fsdp_python"), "# UNSUPPORTED: sharding IIG"));
  EXPECT_FALSE(contains(j.at("fsdp_python"), "fully_shard("));
}

TEST(Launch, ZeroOneInPytorchIsDdpWithZeroRedundancyOptimizer) {
  const Result r = run({"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8",
                        "--sharding", "zero1", "--export", "fsdp"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "ZeroRedundancyOptimizer(")) << r.out;
  EXPECT_TRUE(contains(r.out, "DDP(model")) << r.out;
  EXPECT_FALSE(contains(r.out, "UNSUPPORTED")) << r.out;
}

TEST(Launch, TextPrintsAllThreeOrOne) {
  const Result all = run(kLayout);
  ASSERT_EQ(all.code, 0) << all.err;
  for (const char* part :
       {"torchrun --nnodes 8 --nproc-per-node 8 pretrain_gpt.py", "--tensor-model-parallel-size 2", "[parallelism]",
        "init_device_mesh", "core_r0.8.0", "torchtitan v0.1.0", "PyTorch 2.6+",
        "launcher_scripts/main.py training=<family>/<model>", "++training.model.tensor_model_parallel_size=2"})
    EXPECT_TRUE(contains(all.out, part)) << part << "\n" << all.out;
  const Result megatron = run(with(kLayout, {"--export", "megatron"}));
  ASSERT_EQ(megatron.code, 0) << megatron.err;
  EXPECT_FALSE(contains(megatron.out, "[parallelism]"));
  const Result bad = run(with(kLayout, {"--export", "colossalai"}));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err, "--export 'colossalai'")) << bad.err;
}

// DeepSpeed (data/frameworks/deepspeed.json): the ZeRO stage of the sharding in ds_config.json and on the line, the
// pipeline engine off without a pipeline, what DeepSpeed cannot run with a pipeline or at all flagged.
TEST(Launch, DeepspeedConfigAndLine) {
  const std::vector<std::string> job = {"launch",      "--model",   "llama3.1-70b", "--cluster", "dgx-h100",
                                        "--framework", "deepspeed", "--gpus",       "64",        "--tp",
                                        "8",           "--seq",     "4096",         "--gbs",     "256"};
  const Result zero2 = run(with(job, {"--sharding", "zero2", "--json"}));
  ASSERT_EQ(zero2.code, 0) << zero2.err;
  const auto j = nlohmann::json::parse(zero2.out);
  const auto& ds = j.at("deepspeed_config");
  EXPECT_EQ(ds.at("zero_optimization").at("stage"), 2);
  EXPECT_EQ(ds.at("train_batch_size"), 256);
  EXPECT_EQ(ds.at("train_micro_batch_size_per_gpu"), 1);
  EXPECT_EQ(ds.at("gradient_accumulation_steps"), 32);  // 256 / (dp 8 x mbs 1)
  EXPECT_TRUE(ds.at("bf16").at("enabled").get<bool>());
  const auto args = j.at("deepspeed").get<std::vector<std::string>>();
  for (const char* flag : {"--no-pipeline-parallel", "--deepspeed", "--use-flash-attn-v2"})
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  // Megatron-DeepSpeed has no RoPE scaling flag: Llama 3.1's is the one thing it cannot write.
  EXPECT_EQ(j.at("unsupported").at("deepspeed"),
            nlohmann::json::array({"RoPE scaling llama3: Megatron-DeepSpeed has none"}));
  for (const char* flag : {"--num-key-value-heads", "--use-rotary-position-embeddings", "--normalization"})
    EXPECT_NE(std::find(args.begin(), args.end(), flag), args.end()) << flag;
  EXPECT_NE(std::find(args.begin(), args.end(), "rmsnorm"), args.end());
  const Result text = run(with(job, {"--sharding", "zero2", "--export", "deepspeed"}));
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "deepspeed --num_nodes 8 --num_gpus 8 pretrain_gpt.py")) << text.out;
  EXPECT_TRUE(contains(text.out, "--zero-stage 2")) << text.out;
  EXPECT_EQ(ds.at("zero_optimization").at("overlap_comm"), false);  // DeepSpeed's default below stage 3
  EXPECT_EQ(ds.at("zero_optimization").at("reduce_bucket_size"), 500000000);
  // ZeRO-3: DeepSpeed's defaults of its fetching written, overlap_comm on; a setting given is written as given.
  const Result zero3 = run(with(job, {"--sharding", "zero3", "--stage3-max-reuse-distance", "0", "--json"}));
  ASSERT_EQ(zero3.code, 0) << zero3.err;
  const auto z = nlohmann::json::parse(zero3.out).at("deepspeed_config").at("zero_optimization");
  EXPECT_EQ(z.at("stage"), 3);
  EXPECT_EQ(z.at("overlap_comm"), true);
  EXPECT_EQ(z.at("stage3_prefetch_bucket_size"), 50000000);
  EXPECT_EQ(z.at("stage3_max_live_parameters"), 1000000000);
  EXPECT_EQ(z.at("stage3_max_reuse_distance"), 0);
  // ZeRO-2 with a pipeline is refused as DeepSpeed refuses it; ring-attention CP is not DeepSpeed's.
  const Result piped = run(with(job, {"--sharding", "zero2", "--pp", "2"}));
  EXPECT_EQ(piped.code, 2);
  EXPECT_TRUE(contains(piped.err, "does not run the sharding NGG with a pipeline")) << piped.err;
  const Result cp = run(with(job, {"--cp", "2"}));
  EXPECT_EQ(cp.code, 2);
  EXPECT_TRUE(contains(cp.err, "does not run ring-attention context parallelism")) << cp.err;
  // Another framework's layout exported for DeepSpeed says what it cannot run.
  const auto other = launch_json();
  EXPECT_FALSE(other.at("unsupported").at("deepspeed").empty());
}

TEST(Launch, GpipeAndLoraAreFlaggedForMegatron) {
  std::vector<std::string> args = kLayout;
  args.erase(std::find(args.begin(), args.end(), "--vpp"), std::find(args.begin(), args.end(), "--vpp") + 2);
  // GPipe: PyTorch's pipelining runs it (pytorch-fsdp lists it), Megatron-LM does not (flagged).
  const Result r =
      run(with(args, {"--framework", "pytorch-fsdp", "--schedule", "gpipe", "--lora-rank", "16", "--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::string issues;
  for (const auto& i : j.at("unsupported").at("megatron")) issues += i.get<std::string>() + "\n";
  EXPECT_TRUE(contains(issues, "gpipe")) << issues;
  EXPECT_TRUE(contains(issues, "LoRA")) << issues;
  EXPECT_TRUE(contains(j.at("torchtitan_toml"), "pipeline_parallel_schedule = \"GPipe\""));
}

}  // namespace
}  // namespace headroom
