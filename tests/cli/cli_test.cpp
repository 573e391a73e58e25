// The command line in-process: exit codes, one-line errors, JSON shape.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "headroom/core/read_file.hpp"
#include "../cli_support.hpp"
#include "../watchdog.hpp"

namespace headroom {
namespace {

using Result = test::CliResult;
constexpr auto run = &test::run_cli;

const std::vector<std::string> kEstimate = {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb",
                                            "--seq",    "8192",    "--tp",        "4",     "--pp",
                                            "2",        "--gpus",  "8",           "--gbs", "1024"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// --attention-backend picks one of the device's attention curves (data/kernels): cuDNN's fused attention runs faster
// than FlashAttention-2 on the H100's published curves; a GPU priced without curves refuses it; launch writes it as
// Megatron-LM's --attention-backend and check reads that back.
TEST(Cli, AttentionBackendPicksTheDevicesCurve) {
  const std::vector<std::string> job = {"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus",
                                        "8",        "--seq",   "8192",        "--gbs",     "64",       "--json"};
  const auto attention = [&](const std::vector<std::string>& extra) {
    const Result r = run(with(job, extra));
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("perf").at("breakdown").at("attention_s").get<double>();
  };
  const double framework = attention({}), cudnn = attention({"--attention-backend", "cudnn"}),
               flash2 = attention({"--attention-backend", "flash2"});
  EXPECT_DOUBLE_EQ(framework, cudnn);  // megatron's curve (data/perf/megatron.json attention_backend)
  EXPECT_LT(cudnn, 0.8 * flash2);
  const Result fitted = run({"estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "8192",
                             "--attention-backend", "cudnn"});
  EXPECT_EQ(fitted.code, 2);
  EXPECT_NE(fitted.err.find("--attention-backend cudnn"), std::string::npos) << fitted.err;
  const Result launch = run({"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq",
                             "8192", "--attention-backend", "cudnn", "--export", "megatron"});
  ASSERT_EQ(launch.code, 0) << launch.err;
  EXPECT_NE(launch.out.find("--attention-backend fused"), std::string::npos) << launch.out;
}

TEST(Cli, EstimateJsonHasTheDocumentedFields) {
  const Result r = run(with(kEstimate, {"--json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["memory"]["paper_total_gib"].get<double>(), 27.2, 0.01);
  ASSERT_EQ(j["memory"]["stages"].size(), 2u);
  for (const char* key : {"params", "grads", "optimizer", "activations", "residual", "total"})
    EXPECT_TRUE(j["memory"]["stages"][0].contains(key)) << key;
  for (const char* key : {"peak_gib", "capacity_gib", "verdict", "margin_gib"})
    EXPECT_TRUE(j["memory"].contains(key)) << key;
  EXPECT_EQ(j["layout"]["dp"], 1);
  // Counts are integers; a dense model's parameters are all active.
  EXPECT_TRUE(j["model"]["parameters"].is_number_integer());
  EXPECT_EQ(j["model"]["parameters"].get<std::int64_t>(), 8'030'261'248);
  EXPECT_EQ(j["model"]["active_parameters"], j["model"]["parameters"]);
}

TEST(Cli, MegatronAliases) {
  const Result a = run(with(kEstimate, {"--json"}));
  const Result b = run({"estimate",    "--model",
                        "llama3.1-8b", "--gpu",
                        "a100-40gb",   "--seq-length",
                        "8192",        "--tensor-model-parallel-size",
                        "4",           "--pipeline-model-parallel-size",
                        "2",           "--context-parallel-size",
                        "1",           "--micro-batch-size",
                        "1",           "--global-batch-size",
                        "1024",        "--gpus",
                        "8",           "--json"});
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(Cli, TableByDefault) {
  const Result r = run(kEstimate);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("4D paper Eq. 18 (first stage): 27.20 GiB"), std::string::npos) << r.out;
}

struct BadCase {
  const char* name;
  std::vector<std::string> args;
  const char* expected;  // a fragment of the one-line message
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, ExitTwoWithOneLine) {
  const Result r = run(GetParam().args);
  EXPECT_LE(r.err.size(), 700u) << "a value echoed whole";
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "not one line: " << r.err;
  EXPECT_NE(r.err.find(GetParam().expected), std::string::npos) << r.err;
}

std::vector<std::string> replace(const std::string& flag, const std::string& value) {
  std::vector<std::string> args = kEstimate;
  for (std::size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) args[i + 1] = value;
  return args;
}

const BadCase kBadCases[] = {
    {"unknown_model", replace("--model", "llama9"), "unknown model 'llama9'"},
    {"unknown_gpu", replace("--gpu", "v100"), "unknown gpu 'v100'"},
    {"unknown_cluster", with(kEstimate, {"--cluster", "nowhere"}), "unknown cluster 'nowhere'"},
    {"unknown_framework", with(kEstimate, {"--framework", "jax"}), "unknown framework 'jax'"},
    {"tp_not_dividing_heads", replace("--tp", "3"), "--tp 3 does not divide the 32 attention heads"},
    {"tp_not_dividing_kv_heads",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "8192", "--tp", "16", "--gpus", "16"},
     "does not divide the 8 KV heads"},
    {"pp_not_dividing_layers", replace("--pp", "3"), "does not divide"},
    {"tcp_not_dividing_gpus", replace("--gpus", "12"), "does not divide --gpus 12"},
    {"gbs_not_multiple", with(replace("--gbs", "1001"), {"--mbs", "2"}), "--gbs 1001 is not a multiple of dp·mbs"},
    {"zero_tp", replace("--tp", "0"), "--tp '0' must be positive"},
    {"negative_seq", replace("--seq", "-8192"), "--seq '-8192' must not be negative"},
    {"non_numeric_seq", replace("--seq", "long"), "--seq 'long' is not an integer"},
    {"fractional_mbs",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "8192", "--mbs", "1.5", "--gpus", "8"},
     "--mbs '1.5' is not an integer"},
    {"overflowing_gpus", replace("--gpus", "99999999999999999999999"), "--gpus '99999999999999999999999' is too large"},
    {"huge_exponent", replace("--gbs", "1e999"), "--gbs '1e999' is not an integer"},
    {"empty_number", replace("--seq", ""), "--seq is empty"},
    {"missing_seq", {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--gpus", "8"}, "--seq"},
    {"missing_model", {"estimate", "--gpu", "a100-40gb", "--seq", "8", "--gpus", "8"}, "--model"},
    {"missing_gpu", {"estimate", "--model", "llama3.1-8b", "--seq", "8", "--gpus", "8"}, "give --gpu or --cluster"},
    {"gpus_and_dp_disagree", with(kEstimate, {"--dp", "2"}), "--gpus 8 is not t·c·p = 4·1·2 = 8 times --dp 2"},
    {"neither_gpus_nor_dp",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "8192"},
     "give --gpus"},
    {"bad_recompute", with(kEstimate, {"--recompute", "most"}),
     "--recompute 'most' is not priced (valid: none|selective|full|op)"},
    {"vpp_without_pp",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "8192", "--vpp", "2", "--gpus", "8"},
     "--vpp 2 needs --pp > 1"},
    {"cp_not_dividing_seq",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-40gb", "--seq", "8191", "--cp", "2", "--gpus", "16"},
     "--cp 2 does not divide --seq 8191"},
    {"contradicting_flags", with(kEstimate, {"--no-sp", "--sequence-parallel"}), "contradict"},
    {"unknown_flag", with(kEstimate, {"--tensor-parallel", "4"}), "--tensor-parallel"},
    {"no_subcommand", {}, "subcommand"},
    {"missing_model_file", replace("--model", "/nonexistent/config.json"), "unknown model '/nonexistent/config.json'"},
    // Found by fuzz_cli (tests/fuzz): the simulator built 8·10^12 GPUs or 10^9 micro-batches and never returned.
    {"simulate_too_many_gpus",
     {"simulate", "--collective", "all-reduce", "--cluster", "dgx-h100", "--bytes", "1", "--nodes", "1000000000000"},
     "the simulator takes at most 1024"},
    // Contract breaks and flags accepted without a word.
    {"mistyped_subcommand",
     {"estimat", "--model", "llama3.1-8b"},
     "unknown command 'estimat' (did you mean 'estimate'?)"},
    {"mistyped_flag", with(kEstimate, {"--tpp", "2"}),
     "error: --tpp is not a flag of estimate (did you mean --tp?); headroom estimate --help lists them\n"},
    {"mistyped_flag_with_value", with(kEstimate, {"--sequence-paralel"}), "(did you mean --sequence-parallel?)"},
    {"negative_progress_interval",
     {"calibrate", "--backend", "cpu", "--quick", "--progress-interval", "-1"},
     "error: --progress-interval -1 is out of range (valid: a number >= 0)\n"},
    {"sweep_lora_rank_with_lora_rank",
     {"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--sweep", "lora-rank=8", "--lora-rank",
      "16"},
     "error: --lora-rank does nothing with --sweep lora-rank (the sweep sets the rank of every row)\n"},
    {"no_overlap_p2p_without_interleaving", with(kEstimate, {"--no-overlap-p2p-communication"}),
     "error: --no-overlap-p2p-communication does nothing without virtual stages"},
    {"no_overlap_p2p_without_a_pipeline",
     {"simulate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8",
      "--no-overlap-p2p-communication"},
     "error: --no-overlap-p2p-communication does nothing without virtual stages"},
    {"simulate_zero_bubble",
     {"simulate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--framework", "torchtitan", "--seq", "4096",
      "--gpus", "8", "--pp", "4", "--vpp", "2", "--gbs", "8", "--schedule", "zero-bubble"},
     "error: simulate: --schedule zero-bubble"},
    {"gpu_not_of_the_cluster",
     {"estimate", "--model", "llama3.1-8b", "--gpu", "h100-80gb", "--cluster", "dgx-a100-40gb", "--seq", "8192",
      "--gpus", "8"},
     "--gpu h100-80gb is not the GPU of --cluster dgx-a100-40gb (a100-40gb)"},
    {"huge_top",
     {"rank", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "8192", "--gbs", "64", "--top",
      "1000000000"},
     "--top 1000000000 is more than 100000 layouts"},
    {"mtsl_curve_without_a_page",
     {"rank", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "8192", "--gbs", "64",
      "--mtsl-curve"},
     "--mtsl-curve draws on the plan page: give --html FILE with it"},
    {"vpp_with_1f1b", with(kEstimate, {"--vpp", "4", "--schedule", "1f1b"}),
     "needs the interleaved, zero-bubble, zbv or looped-bfs schedule"},
    {"empty_profile", with(kEstimate, {"--profile", ""}), "--profile is empty"},
    {"empty_profile_equals", with(kEstimate, {"--profile="}), "--profile is empty"},
    {"newline_and_escape_in_value", replace("--model", "a\nb\x1b[31m"), "unknown model 'a\\nb\\x1b[31m'"},
    {"trace_with_collective",
     {"simulate", "--collective", "all-reduce", "--cluster", "dgx-h100", "--bytes", "1", "--trace", "t.json"},
     "--trace does nothing with --collective"},
    {"model_with_collective",
     {"simulate", "--collective", "all-reduce", "--cluster", "dgx-h100", "--bytes", "1", "--model", "gpt2"},
     "--model does nothing with --collective"},
    {"channels_with_horing",
     {"simulate", "--collective", "all-gather", "--cluster", "dgx-h100", "--bytes", "1", "--algorithm", "horing",
      "--channels", "4"},
     "--channels does nothing with --algorithm horing"},
    {"params_with_list", {"comm", "--list", "--params", "7e9"}, "--params does nothing with --list"},
    {"mtsl_seq",
     {"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "4096"},
     "--seq does nothing in mtsl"},
    {"target_seq_with_gpus",
     {"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--tp", "2", "--target-seq", "65536"},
     "does nothing with --target-seq"},
    {"ep_on_a_dense_model", with(kEstimate, {"--ep", "2"}), "--ep is for mixture-of-experts models"},
    {"ep_not_dividing_experts",
     {"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "16", "--ep", "16"},
     "--ep 16 does not divide the 8 experts of mixtral-8x7b"},
    {"etp_ep_not_dividing_stage",
     {"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8", "--tp", "2",
      "--ep", "8"},
     "etp·ep = 2·8 does not divide the t·c·d = 8 GPUs"},
    {"capacity_factor_below_one",
     {"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8", "--ep", "8",
      "--moe-expert-capacity-factor", "0.5"},
     "--moe-expert-capacity-factor '0.5' must be a number from 1"},
    {"experts_on_fsdp",
     {"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8", "--framework",
      "pytorch-fsdp"},
     "priced with Megatron-LM's expert parallelism only"},
    {"simulate_experts",
     {"simulate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--seq", "4096", "--gpus", "8", "--ep", "8"},
     "the event simulator does not schedule yet"},
    {"comm_bytes_past_int64",
     {"comm", "--strategy", "zero3", "--params", "7e9", "--gpus", "8", "--group-size", "8", "--optimizer-bytes",
      "1e300", "--json"},
     "--optimizer-bytes 1e+300 make more bytes of model states than"},
    {"estimate_bytes_past_int64",
     {"estimate", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "1000000000000",
      "--json"},
     "llama3.1-405b at --seq 1000000000000, --mbs 1: a GPU of stage 0 would hold more bytes than"},
    {"lora_rank_above_the_projections", with(kEstimate, {"--lora-rank", "100000"}),
     "--lora-rank 100000 is larger than the k projection of llama3.1-8b (4096 -> 1024): a LoRA rank is at most "
     "min(in, out) = 1024"},
    {"max_gpus_past_the_search",
     {"mtsl", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--target-seq", "4096", "--max-gpus", "1000000000000"},
     "--max-gpus 1000000000000 is not from 1 to 1000000 (the largest GPU count the search considers)"},
    {"ddp_overlap_off_under_fsdp", with(kEstimate, {"--framework", "pytorch-fsdp", "--no-overlap-grad-reduce"}),
     "framework pytorch-fsdp always overlaps its data-parallel collectives (--overlap-grad-reduce off is "
     "Megatron-LM's: --framework megatron)"},
    {"simulate_ddp_overlaps_apart",
     {"simulate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192", "--gpus", "16", "--tp", "2",
      "--gbs", "64", "--no-overlap-param-gather"},
     "simulate: --overlap-grad-reduce on with --overlap-param-gather off is not scheduled by the event simulator"},
    {"simulate_too_many_microbatches",
     {"simulate", "--model", "gpt2", "--cluster", "dgx-h100", "--seq", "1024", "--gpus", "8", "--gbs", "1000000000"},
     "simulate: --gbs 1000000000 makes 125000000 micro-batches a pipeline (pp·vpp = 1): a step of up to"},
};

// A model with experts is priced with its experts (estimate --json: total and active parameters,
// the EP all-to-alls), and the expert split matters where it should: a capacity factor (the busiest GPU's load) costs
// memory and time, and EP8 x TP1 beats EP4 x TP2 for Mixtral-8x7B as Megatron-Core's MoE guide says
// (megatron/core/transformer/moe/README.md, "Best Practices").
TEST(Cli, ExpertModelsArePricedWithTheirExperts) {
  const auto estimate = [](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"estimate", "--model", "mixtral-8x7b", "--cluster", "dgx-h100",
                                     "--seq",    "4096",    "--gbs",        "512",       "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto ep8 = estimate({"--gpus", "64", "--pp", "2", "--ep", "8", "--etp", "1"});
  EXPECT_EQ(ep8.at("model").at("parameters"), 46'702'792'704);
  EXPECT_EQ(ep8.at("model").at("active_parameters"), 12'879'925'248);
  EXPECT_EQ(ep8.at("layout").at("ep"), 8);
  EXPECT_TRUE(ep8.at("memory").at("paper_total_gib").is_null());  // Eq. 18 is for dense models
  const double ep_s = ep8.at("perf").at("breakdown").at("ep_comm_s").get<double>();
  EXPECT_GT(ep_s, 0.0);
  const auto loaded =
      estimate({"--gpus", "64", "--pp", "2", "--ep", "8", "--etp", "1", "--moe-expert-capacity-factor", "1.5"});
  EXPECT_GT(loaded.at("memory").at("peak_gib").get<double>(), ep8.at("memory").at("peak_gib").get<double>());
  EXPECT_GT(loaded.at("perf").at("step_time_s").get<double>(), ep8.at("perf").at("step_time_s").get<double>());
  const auto ep4_tp2 = estimate({"--gpus", "64", "--pp", "2", "--tp", "2", "--ep", "4", "--etp", "2"});
  EXPECT_LT(ep8.at("perf").at("step_time_s").get<double>(), ep4_tp2.at("perf").at("step_time_s").get<double>());
}

// Megatron-LM's --no-overlap-p2p-communication: read, reported (the overlap is the interleaved schedule's only), priced
// and passed on in the launch line.
TEST(Cli, PipelineSendOverlapFollowsMegatronLm) {
  const std::vector<std::string> base = {"--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "32",    "--tp",
                                         "2",       "--pp",        "4",         "--seq",    "8192",   "--gbs", "64"};
  const auto json = [&base](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"estimate"};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), extra.begin(), extra.end());
    args.emplace_back("--json");
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  EXPECT_FALSE(json({}).at("layout").at("overlap_p2p_comm").get<bool>());  // 1F1B: Megatron-LM turns it off
  const auto overlapped = json({"--vpp", "2"});
  const auto held = json({"--vpp", "2", "--no-overlap-p2p-communication"});
  EXPECT_TRUE(overlapped.at("layout").at("overlap_p2p_comm").get<bool>());
  EXPECT_FALSE(held.at("layout").at("overlap_p2p_comm").get<bool>());
  EXPECT_LT(overlapped.at("perf").at("breakdown").at("pp_comm_s").get<double>(),
            held.at("perf").at("breakdown").at("pp_comm_s").get<double>());
  std::vector<std::string> launch = {"launch"};
  launch.insert(launch.end(), base.begin(), base.end());
  launch.insert(launch.end(), {"--vpp", "2", "--no-overlap-p2p-communication"});
  const Result line = run(launch);
  ASSERT_EQ(line.code, 0) << line.err;
  EXPECT_NE(line.out.find("--no-overlap-p2p-communication"), std::string::npos) << line.out;
}

// Megatron-LM's --tp-comm-overlap: priced (TP time, userbuffers in memory), reported, launched, and refused where
// Megatron-LM refuses it (no sequence parallelism) or where the framework has no such overlap.
TEST(Cli, TpCommOverlapIsPricedReportedAndLaunched) {
  const std::vector<std::string> base = {"--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "32",    "--tp",
                                         "4",       "--pp",         "4",         "--seq",    "8192",   "--gbs", "64"};
  const auto estimate = [&base](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"estimate"};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const Result held = estimate({"--json"}), overlapped = estimate({"--tp-comm-overlap", "--json"});
  ASSERT_EQ(overlapped.code, 0) << overlapped.err;
  const auto a = nlohmann::json::parse(held.out), b = nlohmann::json::parse(overlapped.out);
  EXPECT_FALSE(a.at("layout").at("tp_comm_overlap").get<bool>());
  EXPECT_TRUE(b.at("layout").at("tp_comm_overlap").get<bool>());
  EXPECT_LT(b.at("perf").at("breakdown").at("tp_comm_s").get<double>(),
            a.at("perf").at("breakdown").at("tp_comm_s").get<double>());
  EXPECT_GT(b.at("memory").at("peak_gib").get<double>(), a.at("memory").at("peak_gib").get<double>());  // userbuffers
  const Result no_sp = estimate({"--tp-comm-overlap", "--no-sp"});
  EXPECT_EQ(no_sp.code, 2);
  EXPECT_NE(no_sp.err.find("--tp-comm-overlap"), std::string::npos) << no_sp.err;
  std::vector<std::string> fsdp = {"estimate", "--framework", "pytorch-fsdp", "--tp-comm-overlap"};
  fsdp.insert(fsdp.end(), base.begin(), base.end());
  EXPECT_EQ(run(fsdp).code, 2);
  std::vector<std::string> launch = {"launch", "--tp-comm-overlap"};
  launch.insert(launch.end(), base.begin(), base.end());
  const Result line = run(launch);
  ASSERT_EQ(line.code, 0) << line.err;
  EXPECT_NE(line.out.find("--tp-comm-overlap"), std::string::npos) << line.out;
}

// The layouts of `rank --json` on 64 H100s with these flags, the five fastest.
nlohmann::json ranked_layouts(const std::vector<std::string>& flags) {
  const Result r = run(with({"rank", "--cluster", "dgx-h100", "--gpus", "64", "--top", "5", "--json"}, flags));
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out).at("layouts") : nlohmann::json::array();
}

// rank searches with the job's DDP overlaps and 16-bit format: every layout it returns carries them.
TEST(Cli, RankKeepsTheJobsDdpOverlapsAndFormat) {
  const auto layouts =
      ranked_layouts({"--model", "llama3.1-8b", "--seq", "8192", "--gbs", "512", "--no-overlap-grad-reduce", "--fp16"});
  ASSERT_FALSE(layouts.empty());
  for (const auto& x : layouts) {
    EXPECT_FALSE(x.at("layout").at("overlap_grad_reduce").get<bool>());
    EXPECT_TRUE(x.at("layout").at("fp16").get<bool>());
  }
}

// rank searches with the job's token dispatcher too (the layouts check offers as faster keep it).
TEST(Cli, RankKeepsTheJobsTokenDispatcher) {
  const auto layouts = ranked_layouts(
      {"--model", "mixtral-8x7b", "--seq", "4096", "--gbs", "256", "--moe-token-dispatcher-type", "flex"});
  ASSERT_FALSE(layouts.empty());
  for (const auto& x : layouts) EXPECT_EQ(x.at("layout").at("moe_token_dispatcher_type"), "flex");
}

// rank --tp-comm-overlap: priced on every layout Megatron-LM runs it on (t >= 2 with SP), passed on in the launch line.
TEST(Cli, RankWithTpCommOverlap) {
  const std::vector<std::string> base = {"rank",   "--model",      "llama3.1-70b", "--cluster", "dgx-h100",
                                         "--gpus", "64",           "--seq",        "8192",      "--gbs",
                                         "128",    "--constraint", "tp>=4",        "--json"};
  const auto best = [&base](const std::vector<std::string>& extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto held = best({}), overlapped = best({"--tp-comm-overlap"});
  EXPECT_TRUE(overlapped.at("tp_comm_overlap").get<bool>());
  EXPECT_LT(overlapped.at("layouts").at(0).at("step_time_s").get<double>(),
            held.at("layouts").at(0).at("step_time_s").get<double>());
  EXPECT_NE(overlapped.dump().find("--tp-comm-overlap"), std::string::npos);  // the best layout's launch line
  std::vector<std::string> fsdp = base;
  fsdp.insert(fsdp.end(), {"--framework", "pytorch-fsdp", "--tp-comm-overlap"});
  EXPECT_EQ(run(fsdp).code, 2);
}

TEST(Cli, Fp8AndOffloadingArePricedAndLaunched) {
  const std::vector<std::string> base = {"--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus",
                                         "8",       "--seq",       "8192",      "--gbs",    "64"};
  const auto run_with = [&base](std::string command, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {std::move(command)};
    args.insert(args.end(), base.begin(), base.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  };
  const Result fp8 = run_with("estimate", {"--precision", "fp8", "--json"});
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  const auto j = nlohmann::json::parse(fp8.out);
  EXPECT_EQ(j.at("layout").at("precision"), "fp8");
  EXPECT_EQ(j.at("layout").at("fp8_recipe"), "delayed");  // Megatron-LM's default
  EXPECT_GT(j.at("memory").at("stages").at(0).at("fp8_copies_and_scales").get<std::int64_t>(), 0);
  const Result megatron_names =
      run_with("estimate", {"--fp8-format", "hybrid", "--fp8-recipe", "tensorwise", "--json"});
  ASSERT_EQ(megatron_names.code, 0) << megatron_names.err;
  EXPECT_EQ(nlohmann::json::parse(megatron_names.out).at("layout").at("fp8_recipe"), "tensorwise");
  const Result launch = run_with("launch", {"--precision", "fp8", "--fp8-param-gather", "--optimizer-cpu-offload"});
  ASSERT_EQ(launch.code, 0) << launch.err;
  for (const char* arg : {"--fp8-format hybrid", "--fp8-recipe delayed", "--fp8-param-gather",
                          "--optimizer-cpu-offload", "--use-precision-aware-optimizer"})
    EXPECT_NE(launch.out.find(arg), std::string::npos) << arg;
  const Result offload =
      run_with("estimate", {"--optimizer-cpu-offload", "--cpu-offloading-num-layers", "4", "--json"});
  ASSERT_EQ(offload.code, 0) << offload.err;
  const auto o = nlohmann::json::parse(offload.out);
  EXPECT_GT(o.at("memory").at("stages").at(0).at("host").get<std::int64_t>(), 0);
  EXPECT_GT(o.at("perf").at("breakdown").at("offload_s").get<double>(), 0.0);
  const Result rank = run({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16", "--seq", "8192",
                           "--gbs", "64", "--precision", "fp8", "--json"});
  EXPECT_EQ(rank.code, 0) << rank.err;
  // Refused with one line and exit 2: no FP8 on an A100; a recipe the framework does not run; no host link on LUMI.
  const Result a100 = run({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--seq",
                           "8192", "--precision", "fp8"});
  EXPECT_EQ(a100.code, 2);
  EXPECT_NE(a100.err.find("no FP8"), std::string::npos) << a100.err;
  EXPECT_EQ(run_with("estimate", {"--precision", "fp8", "--fp8-recipe", "mxfp8"}).code, 2);
  EXPECT_EQ(run_with("estimate", {"--fp8-recipe", "delayed"}).code, 2);  // needs --precision fp8
  EXPECT_EQ(run_with("estimate", {"--framework", "pytorch-fsdp", "--precision", "fp8", "--fp8-recipe", "delayed"}).code,
            2);
  EXPECT_EQ(run({"estimate", "--model", "llama3.1-8b", "--cluster", "lumi-mi250x", "--gpus", "8", "--seq", "8192",
                 "--optimizer-cpu-offload"})
                .code,
            2);
  EXPECT_EQ(run_with("simulate", {"--precision", "fp8"}).code, 2);
}

TEST(Cli, AHugeValueIsNotEchoedWhole) {
  const Result r = run(replace("--model", std::string(100'000, 'x')));
  EXPECT_EQ(r.code, 2);
  EXPECT_LT(r.err.size(), 700u);
  EXPECT_NE(r.err.find("characters in all"), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Cli, BadInput, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Found by fuzz_profile (tests/fuzz): a --profile of performance coefficients was not checked against its schema,
// so a wrong type escaped as an internal error (exit 1) and values beyond its bounds were used; a GEMM or attention
// efficiency of 0, or a wave-quantization tile below one element, gave an infinite or NaN step time.
TEST(Cli, ProfileOfPerfCoefficientsIsCheckedAgainstTheSchema) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("headroom_cli_perf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const char* doc :
       {R"({"name": 5})", R"({"name": "x", "gpus": [{"gpu": "h100-80gb"}]})", R"({"name": "x", "gemm_efficiency": 2})",
        R"({"name": "x", "gemm_efficiency": 0})", R"({"name": "x", "attention_efficiency": 0})",
        R"({"name": "x", "gemm_wave_units": 1, "gemm_tile": 1e-300})"}) {
    const auto path = dir / "perf.json";
    std::ofstream(path) << doc;
    for (const char* cmd : {"estimate", "simulate"}) {
      const Result r = run(with({cmd, "--model", "gpt2", "--gpu", "a100-40gb", "--seq", "1024", "--gpus", "8"},
                                {"--profile", path.string()}));
      EXPECT_EQ(r.code, 2) << cmd << " " << doc << ": " << r.err;
      EXPECT_EQ(r.err.rfind("error: " + path.string() + ": ", 0), 0u) << r.err;
    }
  }
  fs::remove_all(dir);
}

TEST(Cli, ValidatePasses) {
  const Result r = run({"validate", "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["passed"].get<bool>());
}

// The checks price Megatron-LM's runs; another framework is refused before any of them runs (it failed after
// seconds on the first run that framework cannot price, the experts of Mixtral under FSDP).
TEST(Cli, ValidateUnderAnotherFrameworkIsRefusedAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  const Result r = run({"validate", "--framework", "pytorch-fsdp"});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--framework pytorch-fsdp: validate prices"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(valid: megatron)"), std::string::npos) << r.err;
  EXPECT_EQ(run({"validate", "--framework", "no-such"}).code, 2);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// An output path that is a directory fails before any work (calibrate measured its whole sweep
// first and left DIR.partial), with one line naming the flag and the path.
// "nothing falls back silently": a GPU no shipped cluster has is priced on an assumed cluster, which every
// output says (text and JSON), and the simulator runs on the same links as the model.
TEST(Cli, AGpuWithoutAClusterIsPricedOnAnAssumedOneThatTheOutputsName) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_cli_gpu_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string gpu = (dir / "l40s-like.json").string();
  std::ofstream(gpu) << R"({"name": "l40s-like", "vendor": "nvidia", "memory_GiB": 48, "usable_memory_GiB": 47,
    "bf16_dense_TFLOPs": 362, "fp16_dense_TFLOPs": 362, "fp32_TFLOPs": 91.6, "hbm_bandwidth_GBps": 864})";
  const std::vector<std::string> job = {"--model", "llama3.1-8b", "--gpu", gpu,    "--gpus", "16",
                                        "--tp",    "2",           "--seq", "4096", "--gbs",  "64"};
  const Result table = run(with({"estimate"}, job));
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("cluster l40s-like-node assumed: no cluster in data/clusters has GPU l40s-like"),
            std::string::npos)
      << table.out;
  const Result estimate = run(with(with({"estimate"}, job), {"--json"}));
  ASSERT_EQ(estimate.code, 0) << estimate.err;
  const auto e = nlohmann::json::parse(estimate.out);
  EXPECT_EQ(e["cluster"], "l40s-like-node");
  EXPECT_EQ(e["cluster_assumed"], true);
  EXPECT_NE(e["cluster_source"].get<std::string>().find("150 GB/s"), std::string::npos);
  const Result simulate = run(with(with({"simulate"}, job), {"--json"}));
  ASSERT_EQ(simulate.code, 0) << simulate.err;  // it refused a cluster without links before
  const auto s = nlohmann::json::parse(simulate.out);
  EXPECT_EQ(s["cluster_assumed"], true);
  EXPECT_NEAR(s["analytical_step_time_s"].get<double>(), e["perf"]["step_time_s"].get<double>(), 1e-9);
  const auto shipped = nlohmann::json::parse(run(with(kEstimate, {"--json"})).out);
  EXPECT_EQ(shipped["cluster_assumed"], false);
  EXPECT_NE(shipped["cluster_source"].get<std::string>().find("DGX A100"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A recompute the framework does not run is refused as rank already leaves it out: Megatron-LM's selective recompute
// is not PyTorch FSDP's, and torchtitan's op-level selective checkpointing is priced by nothing here.
TEST(Cli, ARecomputeTheFrameworkDoesNotRunIsRefused) {
  const std::vector<std::string> fsdp = {"estimate", "--model",     "llama3.1-8b", "--cluster", "dgx-h100",
                                         "--gpus",   "8",           "--seq",       "8192",      "--gbs",
                                         "8",        "--framework", "pytorch-fsdp"};
  const Result selective = run(with(fsdp, {"--recompute", "selective"}));
  EXPECT_EQ(selective.code, 2);
  EXPECT_EQ(selective.err,
            "error: framework pytorch-fsdp does not recompute selective (--recompute; it runs: none, full; selective "
            "is Megatron-LM's core-attention recompute: --framework megatron)\n");
  EXPECT_EQ(selective.out, "");
  EXPECT_EQ(run(with(fsdp, {"--recompute", "full"})).code, 0);
  EXPECT_EQ(run(with(kEstimate, {"--recompute", "selective"})).code, 0);  // megatron runs it
}

// One rule for the framework's supported_shardings, supported_schedules and supported_recompute: what it does not run
// is refused, one line naming the knob and what it runs, for every command that builds a layout.
TEST(Cli, AShardingOrScheduleTheFrameworkDoesNotRunIsRefused) {
  const std::vector<std::string> job = {"--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus",
                                        "16",      "--seq",       "8192",      "--gbs",    "16"};
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"--sharding", "ggn"},
       "error: framework megatron does not run the sharding GGN (--sharding; it runs: NNN, NNG)\n"},
      {{"--sharding", "zero3"},
       "error: framework megatron does not run the sharding GGG (--sharding; it runs: NNN, NNG)\n"},
      {{"--pp", "2", "--schedule", "gpipe"},
       "error: framework megatron does not run the pipeline schedule gpipe (--schedule; it runs: 1f1b, "
       "interleaved)\n"},
      {{"--framework", "pytorch-fsdp", "--sharding", "zero1"},
       "error: framework pytorch-fsdp does not run the sharding NNG (--sharding; it runs: GGG, NGG, III, NNN)\n"}};
  for (const std::string command : {"estimate", "launch", "simulate", "mtsl"})
    for (const Case& c : cases) {
      std::vector<std::string> args = with({command}, job);
      if (command == "mtsl") args.erase(std::find(args.begin(), args.end(), "--seq"), args.end() - 2);  // it searches s
      const Result r = run(with(args, c.args));
      EXPECT_EQ(r.code, 2) << command;
      EXPECT_EQ(r.err, c.err) << command;
      EXPECT_EQ(r.out, "") << command;
    }
  // What each framework lists is priced.
  EXPECT_EQ(run(with(with({"estimate"}, job), {"--sharding", "ddp"})).code, 0);
  EXPECT_EQ(run(with(with({"estimate"}, job), {"--framework", "pytorch-fsdp", "--sharding", "zero2"})).code, 0);
  EXPECT_EQ(
      run(with(with({"estimate"}, job), {"--framework", "pytorch-fsdp", "--pp", "2", "--schedule", "gpipe"})).code, 0);
}

// MFU is model FLOPs over the BF16 dense peak, FP8 training included (where FP8 GEMMs can take it high): the text says
// so where the precision is FP8, the JSON always.
TEST(Cli, TheMfuOfAnFp8RunSaysItIsAgainstTheBf16Peak) {
  const std::vector<std::string> job = {"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192",
                                        "--gpus",   "8",       "--tp",        "2",         "--gbs",    "64"};
  const Result fp8 = run(with(job, {"--precision", "fp8"}));
  ASSERT_EQ(fp8.code, 0) << fp8.err;
  EXPECT_NE(fp8.out.find("% of the BF16 peak)"), std::string::npos) << fp8.out;
  const Result bf16 = run(job);
  ASSERT_EQ(bf16.code, 0) << bf16.err;
  EXPECT_EQ(bf16.out.find("BF16 peak"), std::string::npos) << bf16.out;
  for (const auto& args : {with(job, {"--precision", "fp8", "--json"}), with(job, {"--json"})})
    EXPECT_EQ(nlohmann::json::parse(run(args).out).at("perf").at("mfu_peak"), "bf16");
}

// A sweep's header names what every row shares, not the swept variable of one row; --lora-targets applies to every
// rank of a LoRA sweep.
TEST(Cli, AnMtslSweepHeaderLeavesTheSweptVariableToItsRows) {
  const std::vector<std::string> job = {"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8"};
  const Result ranks = run(with(job, {"--tp", "2", "--sweep", "lora-rank=8,64", "--lora-targets", "q,v"}));
  ASSERT_EQ(ranks.code, 0) << ranks.err;
  EXPECT_NE(ranks.out.find(", LoRA rank of each row on q,v\n"), std::string::npos) << ranks.out;
  const Result gpus = run(with(job, {"--sweep", "gpus=8,16", "--json"}));
  ASSERT_EQ(gpus.code, 0) << gpus.err;
  const auto j = nlohmann::json::parse(gpus.out);
  EXPECT_FALSE(j.at("layout").contains("gpus"));
  for (const auto& p : j.at("sweep").at("points"))
    EXPECT_EQ(p.at("dp").get<std::int64_t>() * 1, p.at("gpus").get<std::int64_t>());  // tp = cp = pp = 1
}

// mtsl holds a batch: a batch not given is p micro-batches per pipeline (1F1B's first stage then holds p in flight, as
// any run with m >= p does), so the MTSL is that of a run, and the header and JSON say which batch it is.
TEST(Cli, MtslSaysWhichBatchItHoldsAndTheDefaultFillsThePipeline) {
  const std::vector<std::string> job = {"mtsl", "--model", "llama3.1-70b", "--lora-rank", "16",        "--tp",    "8",
                                        "--pp", "2",       "--gpus",       "16",          "--cluster", "dgx-h100"};
  const auto doc = [&](const std::vector<std::string>& extra) {
    const Result r = run(with(with(job, extra), {"--json"}));
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto dflt = doc({}), given = doc({"--gbs", "64"});
  EXPECT_FALSE(dflt.at("gbs_given").get<bool>());
  EXPECT_TRUE(given.at("gbs_given").get<bool>());
  EXPECT_EQ(dflt.at("microbatches"), dflt.at("layout").at("pp"));
  EXPECT_EQ(dflt.at("gbs").get<std::int64_t>(), dflt.at("layout").at("dp").get<std::int64_t>() *
                                                    dflt.at("layout").at("mbs").get<std::int64_t>() *
                                                    dflt.at("layout").at("pp").get<std::int64_t>());
  EXPECT_EQ(dflt.at("mtsl_tokens"), given.at("mtsl_tokens"));
  const Result text = run(job);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("gbs 2 (2 micro-batches per pipeline: the default with a pipeline"), std::string::npos)
      << text.out;
  const Result text_given = run(with(job, {"--gbs", "64"}));
  EXPECT_NE(text_given.out.find("gbs 64 (64 micro-batches per pipeline)"), std::string::npos) << text_given.out;
}

// The MTSL carries the band of the peak it was found under: nominal inside it, --risk pessimistic at its low end (the
// longest sequence at which the band's upper end of the peak fits), as estimate's verdict reads the same band.
TEST(Cli, MtslHasABandAndAPessimisticReading) {
  const std::vector<std::string> job = {"mtsl", "--model", "llama3.1-70b", "--lora-rank", "16",        "--tp",    "8",
                                        "--pp", "2",       "--gpus",       "16",          "--cluster", "dgx-h100"};
  const auto doc = [&](const std::vector<std::string>& extra) {
    const Result r = run(with(with(job, extra), {"--json"}));
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto nominal = doc({}), pessimistic = doc({"--risk", "pessimistic"});
  const auto low = nominal.at("mtsl_tokens_interval").at(0).get<std::int64_t>();
  const auto high = nominal.at("mtsl_tokens_interval").at(1).get<std::int64_t>();
  const auto tokens = nominal.at("mtsl_tokens").get<std::int64_t>();
  EXPECT_LT(low, tokens);
  EXPECT_GT(high, tokens);
  EXPECT_EQ(pessimistic.at("mtsl_tokens").get<std::int64_t>(), low);
  EXPECT_EQ(pessimistic.at("risk"), "pessimistic");
  EXPECT_EQ(nominal.at("interval_source"), pessimistic.at("interval_source"));
  // estimate at the pessimistic MTSL: the band's upper end of the peak fits, so the verdict is not uncertain; one
  // granule more and it is.
  const auto verdict = [&](std::int64_t seq) {
    const Result r = run({"estimate", "--model", "llama3.1-70b", "--lora-rank", "16", "--tp", "8", "--pp", "2",
                          "--gpus", "16", "--cluster", "dgx-h100", "--seq", std::to_string(seq), "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out).at("memory").at("verdict").get<std::string>();
  };
  EXPECT_EQ(verdict(low), "fits");
  EXPECT_EQ(verdict(low + 1), "uncertain");
  EXPECT_EQ(verdict(tokens), "uncertain");
  const Result text = run(with(job, {"--risk", "pessimistic"}));
  EXPECT_NE(text.out.find("MTSL: " + std::to_string(low) + " tokens (--risk pessimistic"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("band: " + std::to_string(low) + " to " + std::to_string(high)), std::string::npos);
  const Result fsdp = run(with(job, {"--framework", "pytorch-fsdp", "--risk", "pessimistic"}));
  EXPECT_EQ(fsdp.code, 2);
  EXPECT_NE(fsdp.err.find("--risk pessimistic needs a held-out band"), std::string::npos) << fsdp.err;
}

// "The longest sequence Llama 3.1 70B with LoRA trains on 16 H100s, any layout": --any-layout searches rank's space;
// its winner is as long as any layout given by hand, and the winner given by hand has the MTSL the search found.
TEST(Cli, MtslOverEveryLayoutFindsTheLongest) {
  const std::vector<std::string> job = {"mtsl",   "--model", "llama3.1-70b", "--lora-rank", "16",
                                        "--gpus", "16",      "--cluster",    "dgx-h100",    "--json"};
  const Result r = run(with(job, {"--any-layout", "--top", "3"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc.at("layouts").size(), 3u);
  EXPECT_GT(doc.at("searched").get<std::int64_t>(), 100);
  const auto& best = doc.at("layouts").at(0);
  const auto longest = best.at("mtsl_tokens").get<std::int64_t>();
  EXPECT_GE(longest, doc.at("layouts").at(1).at("mtsl_tokens").get<std::int64_t>());
  const auto by_hand = [&](const std::vector<std::string>& layout) {
    const Result h = run(with(job, layout));
    EXPECT_EQ(h.code, 0) << h.err;
    return nlohmann::json::parse(h.out).at("mtsl_tokens").get<std::int64_t>();
  };
  for (const auto& layout : std::vector<std::vector<std::string>>{
           {"--tp", "8", "--pp", "2"}, {"--tp", "8", "--cp", "2"}, {"--tp", "4", "--cp", "4", "--recompute", "full"}})
    EXPECT_LE(by_hand(layout), longest);
  const auto& l = best.at("layout");
  EXPECT_EQ(by_hand({"--tp", std::to_string(l.at("tp").get<int>()), "--cp", std::to_string(l.at("cp").get<int>()),
                     "--pp", std::to_string(l.at("pp").get<int>()), "--recompute", l.at("recompute").get<std::string>(),
                     "--sharding", l.at("sharding_code").get<std::string>()}),
            longest);
  const Result constrained = run(with(job, {"--any-layout", "--constraint", "cp=1", "--top", "1"}));
  ASSERT_EQ(constrained.code, 0) << constrained.err;
  EXPECT_EQ(nlohmann::json::parse(constrained.out).at("layouts").at(0).at("layout").at("cp"), 1);
  for (const auto& [extra, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--any-layout", "--tp", "8"}, "--tp does nothing with --any-layout"},
           {{"--top", "3"}, "--top does nothing without --any-layout"}}) {
    const Result bad = run(with(job, extra));
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find(message), std::string::npos) << bad.err;
    EXPECT_TRUE(bad.out.empty());
  }
  const Result no_gpus = run({"mtsl", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--any-layout"});
  EXPECT_EQ(no_gpus.code, 2);
  EXPECT_NE(no_gpus.err.find("give --gpus"), std::string::npos) << no_gpus.err;
}

TEST(CliOutputs, DirectoryOutputsAreRefusedBeforeAnyWork) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_cli_outdir_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto r = test::run_cli({"calibrate", "--backend", "cpu", "--quick", "--out", dir.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --out " + dir.string() + " is a directory: give a file path\n");
  EXPECT_FALSE(std::filesystem::exists(dir.string() + ".partial"));
  r = test::run_cli({"simulate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-80gb", "--gpus", "8", "--tp", "8",
                     "--seq", "4096", "--trace", dir.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --trace " + dir.string() + " is a directory: give a file path\n");
  r = test::run_cli({"calibrate", "--backend", "cpu", "--quick", "--out", (dir / "no" / "p.json").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// Past one node a job is whole nodes of its cluster (schedulers allocate nodes, launchers start the same ranks on
// each): 16 GPUs on nodes of 3 are refused by every command that takes a GPU count; a job within one node, or of
// whole nodes, runs; mtsl --target-seq searches whole-node counts only.
TEST(CliRules, APartialNodeIsRefusedAJobWithinOneNodeIsNot) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_cli_nodes_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::json c;
  std::ifstream(std::filesystem::path(HEADROOM_TEST_DATA_DIR) / "clusters" / "dgx-h100.json") >> c;
  c["name"] = "three-a-node";
  c["gpus_per_node"] = 3;
  const std::string cluster = (dir / "three.json").string();
  std::ofstream(cluster) << c.dump();
  const auto estimate = [&cluster](const char* gpus) {
    return run({"estimate", "--model", "llama3.1-8b", "--cluster", cluster, "--seq", "4096", "--gpus", gpus});
  };
  const std::string partial =
      "--gpus 16 is not whole nodes of cluster three-a-node (3 GPUs a node): give a multiple "
      "of 3, or at most 3\n";
  for (const Result& r : {estimate("16"), run({"rank", "--model", "llama3.1-8b", "--cluster", cluster, "--gpus", "16",
                                               "--seq", "4096", "--gbs", "48"})}) {
    EXPECT_EQ(r.code, 2);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err, "error: " + partial);
  }
  for (const char* gpus : {"1", "2", "3", "6", "12"}) EXPECT_EQ(estimate(gpus).code, 0) << gpus;
  const Result search = run(
      {"mtsl", "--model", "llama3.1-8b", "--cluster", cluster, "--target-seq", "131072", "--max-gpus", "64", "--json"});
  ASSERT_EQ(search.code, 0) << search.err;
  const auto gpus = nlohmann::json::parse(search.out).at("gpus").get<std::int64_t>();
  EXPECT_TRUE(gpus <= 3 || gpus % 3 == 0) << gpus;
  std::filesystem::remove_all(dir);
}

// A traced step is bounded lower than an untraced one (the trace's JSON document costs more than the step): GPT-2
// with 30,000 micro-batches is bounded at about a million tasks, refused with --trace before anything is simulated.
TEST(CliOutputs, ATraceOfAStepPastItsBoundIsRefusedBeforeSimulating) {
  const auto trace = std::filesystem::temp_directory_path() / ("headroom_cli_trace_" + std::to_string(::getpid()));
  const Result r = test::within(60, "simulate --trace of a long step", [&trace] {
    return run({"simulate", "--model", "gpt2", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "1024", "--gbs",
                "240000", "--trace", trace.string()});
  });
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("more than the 1e+06 the simulator builds with a trace"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(trace));
  std::filesystem::remove(trace);
}

// A file past the bound of the shared reader (read_file_bounded) is refused by its size, unread, naming the flag, the
// file and the bound (a device that never ends: tests/estimator/read_file_test.cpp).
TEST(CliInputs, AFileLargerThanTheReaderTakesIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_cli_large_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string big = (dir / "big.json").string();
  std::ofstream(big).close();
  std::filesystem::resize_file(big, kMaxInputFileBytes + 1);  // sparse: no disk, no memory
  const std::string limit = " is larger than 256 MiB, the most headroom reads from one file";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {with(kEstimate, {"--profile", big}), big + limit},
      {{"calibrate", "--from-runs", big, "--out", (dir / "p.json").string()}, "--from-runs " + big + limit},
      {{"calibrate", "--ingest", big, "--out", (dir / "q.json").string()}, "--ingest " + big + limit}};
  for (const auto& c : cases) {
    const Result r = test::within(60, "a command reading a file past the bound", [&c] { return run(c.first); });
    EXPECT_EQ(r.code, 2) << c.first[1];
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err, "error: " + c.second + "\n");
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "p.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "q.json"));
  std::filesystem::remove_all(dir);
}

// A --trace naming a named pipe that no process reads is refused after a short wait, not blocked on forever.
TEST(CliOutputs, APipeNobodyReadsIsRefusedNotBlockedOn) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_cli_fifo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "trace").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Result r = test::within(60, "simulate --trace FIFO", [&fifo] {
    return run(
        {"simulate", "--model", "gpt2", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "1024", "--trace", fifo});
  });
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(fifo + ": no process has the named pipe open for reading"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Every JSON document carries schema_version, and byte counts are integers.
TEST(CliJson, EveryDocumentHasASchemaVersionAndIntegerBytes) {
  const std::vector<std::vector<std::string>> commands = {
      {"estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--seq", "8192", "--tp", "2", "--gpus", "8",
       "--json"},
      {"rank", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "4096", "--gbs", "64", "--top",
       "2", "--json"},
      {"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--json"},
      {"comm", "--strategy", "zero3", "--params", "7e9", "--gpus", "16", "--group-size", "8", "--json"},
      {"comm", "--list", "--json"},
      {"simulate", "--collective", "all-gather", "--cluster", "dgx-h100", "--bytes", "1048576", "--json"},
      {"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192", "--tp", "2", "--gpus", "16",
       "--json"}};
  for (const auto& args : commands) {
    const auto r = test::run_cli(args);
    ASSERT_EQ(r.code, 0) << args[0] << ": " << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc.value("schema_version", 0), 2) << args[0];
  }
  const auto est = nlohmann::json::parse(test::run_cli(commands[0]).out);
  for (const auto& stage : est["memory"]["stages"])
    for (const char* k : {"params", "grads", "optimizer", "activations", "residual", "total"})
      EXPECT_TRUE(stage[k].is_number_integer()) << k << " " << stage[k];
  const auto comm = nlohmann::json::parse(test::run_cli(commands[3]).out);
  EXPECT_TRUE(comm["memory_bytes"]["total"].is_number_integer()) << comm["memory_bytes"];
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Numbers are not typed TEXT in --help, framework-profile defaults are said, and each command has
// examples; no CLI11 artefact such as --no-progress{false}.
TEST(CliHelp, TypedMetavarsDefaultsAndExamples) {
  for (const char* command : {"estimate", "rank", "mtsl", "comm", "launch", "simulate", "calibrate", "validate"}) {
    const auto r = test::run_cli({command, "--help"});
    ASSERT_EQ(r.code, 0) << command;
    EXPECT_NE(r.out.find("Examples:\n  headroom "), std::string::npos) << command;
    EXPECT_EQ(r.out.find("{false}"), std::string::npos) << command;
    for (const char* numeric : {"--tp,--tensor-model-parallel-size TEXT", "--seq,--seq-length TEXT", "--top TEXT",
                                "--gpus,--num-gpus,--world-size TEXT", "--bytes TEXT"})
      EXPECT_EQ(r.out.find(numeric), std::string::npos) << command << ": " << numeric;
  }
  const auto r = test::run_cli({"estimate", "--help"});
  EXPECT_NE(r.out.find("--seq,--seq-length INT REQUIRED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(default: the --framework profile's)"), std::string::npos);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// When nothing fits, rank says what bound the layouts and what would lift it.
TEST(CliRank, NothingFitsSaysWhatBoundAndWhatWouldLiftIt) {
  auto r = test::run_cli({"rank", "--model", "llama3.1-405b", "--cluster", "dgx-a100-40gb", "--gpus", "8", "--seq",
                          "8192", "--gbs", "64"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("The model states alone do not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--all-shardings"), std::string::npos);
  r = test::run_cli(
      {"rank", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--gpus", "8", "--seq", "262144", "--gbs", "8"});
  EXPECT_NE(r.out.find("Activations are what is left"), std::string::npos) << r.out;
  r = test::run_cli({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--gpus", "8", "--seq", "8192",
                     "--gbs", "8", "--constraint", "tp=3"});
  EXPECT_NE(r.out.find("passes the split rules"), std::string::npos) << r.out;
  // The table explains its notation.
  r = test::run_cli({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--gpus", "8", "--seq", "8192",
                     "--gbs", "64", "--top", "3"});
  EXPECT_NE(r.out.find("GGG ZeRO-3/FSDP"), std::string::npos) << r.out;
}

// launch and simulate say when the layout they run is predicted not to fit; launch's line carries the model shape.
TEST(CliLaunch, WarnsOverMemoryAndCarriesTheModelShape) {
  auto r = test::run_cli({"launch", "--model", "llama3.1-70b", "--cluster", "dgx-a100-40gb", "--seq", "8192", "--gpus",
                          "8", "--export", "megatron"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# WARNING: predicted peak", 0), 0u) << r.out;
  for (const char* flag :
       {"--num-layers 80", "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64",
        "--num-query-groups 8", "--swiglu", "--untie-embeddings-and-output-weights"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  r = test::run_cli(
      {"launch", "--model", "llama3.1-70b", "--cluster", "dgx-a100-40gb", "--seq", "8192", "--gpus", "8", "--json"});
  EXPECT_EQ(nlohmann::json::parse(r.out)["memory"]["verdict"], "oom");
  r = test::run_cli({"simulate", "--model", "llama3.1-70b", "--cluster", "dgx-a100-40gb", "--seq", "8192", "--gpus",
                     "8", "--tp", "8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("WARNING: predicted peak"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// One rule for counts and for names; a calibration profile where simulate takes coefficients; the
// table says the sharding; an MTSL past the trained context is noted.
TEST(CliRules, CountsNamesProfilesAndNotes) {
  const std::vector<std::string> base = {"estimate",  "--model", "llama3.1-8b", "--gpu",
                                         "h100-94gb", "--gpus",  "8",           "--json"};
  const auto plain = test::run_cli(with(base, {"--seq", "8192", "--recompute", "full", "--schedule", "1f1b"}));
  ASSERT_EQ(plain.code, 0) << plain.err;
  const auto same = test::run_cli(with(base, {"--seq", "+8192", "--recompute", "FULL", "--schedule", "1F1B"}));
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_EQ(same.out, plain.out);
  // One integer grammar for every count: digits, no fraction or exponent, even where the value is whole.
  for (const auto& seq : {"8192.0", "8.192e3", "8192.0000000000001", "0x2000"}) {
    const auto r = test::run_cli(with(base, {"--seq", seq}));
    EXPECT_EQ(r.code, 2) << seq;
    EXPECT_NE(r.err.find("--seq '" + std::string(seq) + "' is not an integer"), std::string::npos) << r.err;
  }
  const auto sim = test::run_cli({"simulate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-80gb", "--gpus", "8",
                                  "--tp", "8", "--seq", "4096", "--profile",
                                  std::string(HEADROOM_TEST_DATA_DIR) + "/profiles/cpu-example-quick.json"});
  EXPECT_EQ(sim.code, 0) << sim.err;
  const auto table =
      test::run_cli({"estimate", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--gpus", "8", "--seq", "8192"});
  EXPECT_NE(table.out.find(", sharding NNG ("), std::string::npos) << table.out;
  const auto m =
      test::run_cli({"mtsl", "--model", "llama3.1-8b", "--gpu", "h100-94gb", "--tp", "8", "--cp", "8", "--gpus", "64"});
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("is beyond the 131072 tokens llama3.1-8b was trained with"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("MiB to spare"), std::string::npos) << m.out;
}

}  // namespace
}  // namespace headroom
