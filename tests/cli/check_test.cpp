// `headroom check`: a Megatron-LM launch command read as arguments.py reads it and priced as estimate prices the same
// job; the exit code is the verdict; every flag is read or ignored with its reason, any other refused naming it; the
// command `launch` writes reads back as the layout it was written from.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/ingest/measured_runs.hpp"

namespace headroom {
namespace {

using Result = test::CliResult;
constexpr auto run = &test::run_cli;

// Llama 3.1 8B as Megatron-LM's examples/llama script launches it (its flags, written out; BF16), without its
// tokenizer.
std::vector<std::string> llama8b_untokenized(const std::vector<std::string>& layout) {
  std::vector<std::string> c = {"torchrun",
                                "--nproc_per_node",
                                "8",
                                "--nnodes",
                                "2",
                                "pretrain_gpt.py",
                                "--use-mcore-models",
                                "--num-layers",
                                "32",
                                "--hidden-size",
                                "4096",
                                "--ffn-hidden-size",
                                "14336",
                                "--num-attention-heads",
                                "32",
                                "--group-query-attention",
                                "--num-query-groups",
                                "8",
                                "--kv-channels",
                                "128",
                                "--seq-length",
                                "8192",
                                "--max-position-embeddings",
                                "8192",
                                "--position-embedding-type",
                                "rope",
                                "--attention-dropout",
                                "0.0",
                                "--hidden-dropout",
                                "0.0",
                                "--swiglu",
                                "--normalization",
                                "RMSNorm",
                                "--untie-embeddings-and-output-weights",
                                "--disable-bias-linear",
                                "--lr",
                                "0.00015",
                                "--bf16",
                                "--use-distributed-optimizer",
                                "--overlap-grad-reduce",
                                "--overlap-param-gather",
                                "--mock-data"};
  c.insert(c.end(), layout.begin(), layout.end());
  return c;
}

// The same with the script's tokenizer (a NullTokenizer of Llama 3's 128,256 tokens).
std::vector<std::string> llama8b(const std::vector<std::string>& layout) {
  std::vector<std::string> c = llama8b_untokenized({"--tokenizer-type", "NullTokenizer", "--vocab-size", "128256"});
  c.insert(c.end(), layout.begin(), layout.end());
  return c;
}

std::vector<std::string> check(const std::vector<std::string>& flags, const std::vector<std::string>& command) {
  std::vector<std::string> args = {"check", "--cluster", "dgx-h100"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.emplace_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

TEST(Check, PricesTheCommandAsEstimatePricesTheSameJob) {
  const std::vector<std::string> layout = {"--tensor-model-parallel-size",
                                           "2",
                                           "--pipeline-model-parallel-size",
                                           "2",
                                           "--sequence-parallel",
                                           "--micro-batch-size",
                                           "1",
                                           "--global-batch-size",
                                           "64",
                                           "--recompute-granularity",
                                           "selective"};
  const Result r = run(check({"--json"}, llama8b(layout)));
  ASSERT_TRUE(r.code == 0 || r.code == 3) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const Result e = run({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192", "--tp", "2",
                        "--pp", "2", "--gpus", "16", "--gbs", "64", "--recompute", "selective", "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto est = nlohmann::json::parse(e.out);
  EXPECT_EQ(doc.at("layout").at("dp"), 4);
  EXPECT_EQ(doc.at("layout").at("gpus"), 16);
  EXPECT_EQ(doc.at("memory").at("stages"), est.at("memory").at("stages"));
  EXPECT_DOUBLE_EQ(doc.at("perf").at("step_time_s").get<double>(), est.at("perf").at("step_time_s").get<double>());
  EXPECT_EQ(doc.at("verdict"), est.at("memory").at("verdict"));
  EXPECT_EQ(r.code, est.at("memory").at("verdict") == "fits" ? 0 : 3);
  const auto& ignored = doc.at("flags_ignored");
  EXPECT_NE(std::find(ignored.begin(), ignored.end(), "--lr (learning rate)"), ignored.end()) << ignored;
}

TEST(Check, TheExitCodeIsTheVerdict) {
  // No recompute at tp 1: out of memory (exit 4), with the fastest layouts of the same job that fit.
  const Result oom = run(check({}, llama8b({"--micro-batch-size", "1", "--global-batch-size", "64"})));
  EXPECT_EQ(oom.code, 4) << oom.err << oom.out;
  EXPECT_NE(oom.out.find("memory: oom"), std::string::npos) << oom.out;
  EXPECT_NE(oom.out.find("the fastest layouts of the same job that fit:\n  "), std::string::npos) << oom.out;
  EXPECT_NE(oom.out.find(" (was 1);"), std::string::npos) << oom.out;  // each a change of the command's flags
  const Result fits = run(check(
      {}, llama8b({"--tensor-model-parallel-size", "4", "--sequence-parallel", "--recompute-granularity", "full",
                   "--recompute-method", "uniform", "--recompute-num-layers", "1", "--global-batch-size", "64"})));
  EXPECT_EQ(fits.code, 0) << fits.err << fits.out;
  EXPECT_NE(fits.out.find("memory: fits"), std::string::npos) << fits.out;
}

TEST(Check, EveryFlagIsReadOrIgnoredOrRefusedByName) {
  auto command = llama8b({"--global-batch-size", "64", "--frobnicate", "3"});
  const Result bad = run(check({}, command));
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(bad.out.empty());
  EXPECT_NE(bad.err.find("--frobnicate: a Megatron-LM flag headroom does not read"), std::string::npos) << bad.err;
  const Result ignored = run(check({"--ignore", "--frobnicate", "--json"}, command));
  ASSERT_NE(ignored.code, 2) << ignored.err;
  const auto doc = nlohmann::json::parse(ignored.out);
  const auto& list = doc.at("flags_ignored");
  EXPECT_NE(std::find(list.begin(), list.end(), "--frobnicate 3 (--ignore)"), list.end()) << list;
  for (const auto& [extra, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--recompute-granularity", "selective", "--recompute-method", "block", "--recompute-num-layers", "4"},
            "--recompute-method block needs --recompute-granularity full"},
           {{"--attention-backend", "unfused"}, "--attention-backend unfused"}}) {
    const Result r = run(check({}, llama8b(extra)));
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  // Megatron-LM's DDP overlaps nothing unless told (arguments.py: store_true): a command without the overlap flags is
  // priced as estimate prices the same job with them off.
  auto exposed = llama8b({"--tensor-model-parallel-size", "2", "--micro-batch-size", "1", "--global-batch-size", "64",
                          "--recompute-granularity", "selective"});
  std::erase(exposed, std::string("--overlap-grad-reduce"));
  std::erase(exposed, std::string("--overlap-param-gather"));
  const Result off = run(check({"--json"}, exposed));
  ASSERT_TRUE(off.code == 0 || off.code == 3) << off.err;
  const Result off_estimate =
      run({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192", "--tp", "2", "--gpus", "16",
           "--gbs", "64", "--recompute", "selective", "--no-overlap-grad-reduce", "--json"});
  ASSERT_EQ(off_estimate.code, 0) << off_estimate.err;
  const auto off_doc = nlohmann::json::parse(off.out);
  EXPECT_EQ(off_doc.at("layout").at("overlap_grad_reduce"), false);
  EXPECT_EQ(off_doc.at("layout").at("overlap_param_gather"), false);
  for (const auto& alt : off_doc.at("faster"))  // the faster layouts keep the command's DDP (cli_common rank_base)
    EXPECT_EQ(alt.at("layout").at("overlap_grad_reduce"), false) << alt.at("change");
  EXPECT_DOUBLE_EQ(off_doc.at("perf").at("step_time_s").get<double>(),
                   nlohmann::json::parse(off_estimate.out).at("perf").at("step_time_s").get<double>());
  auto fp16 = llama8b({});
  std::erase(fp16, std::string("--bf16"));
  const Result r = run(check({}, fp16));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("neither --bf16 nor --fp16"), std::string::npos) << r.err;
}

// Flags of Megatron-LM's gpt-oss example (examples/gptoss/02_train.sh at d98e8a64dd): --recompute-activations is
// --recompute-granularity selective (arguments.py validate_args), --quick-geglu a gated MLP (argument_utils.py: three
// projections), the activation's offset and clamp, the rope type and FP32 softmax of the unfused path change no cost.
TEST(Check, ReadsTheGptOssExamplesFlags) {
  const auto doc = [](const std::vector<std::string>& extra) {
    const Result r = run(check({"--json"}, llama8b(extra)));
    EXPECT_TRUE(r.code == 0 || r.code == 3) << r.err;
    return r.code == 0 || r.code == 3 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const std::vector<std::string> layout = {"--tensor-model-parallel-size", "2", "--micro-batch-size", "1",
                                           "--global-batch-size",          "64"};
  std::vector<std::string> flags = layout;
  flags.insert(flags.end(), {"--recompute-activations", "--rope-type", "rope", "--attention-softmax-in-fp32"});
  const auto read = doc(flags);
  ASSERT_FALSE(read.is_null());
  EXPECT_EQ(read.at("layout").at("recompute"), "selective");
  std::vector<std::string> selective = layout;
  selective.insert(selective.end(), {"--recompute-granularity", "selective"});
  EXPECT_EQ(read.at("memory"), doc(selective).at("memory"));
  const std::string ignored = read.at("flags_ignored").dump();
  EXPECT_NE(ignored.find("--rope-type"), std::string::npos) << ignored;
  EXPECT_NE(ignored.find("--attention-softmax-in-fp32"), std::string::npos) << ignored;
  // --quick-geglu: Llama's SwiGLU width priced as a gated GELU (the same three projections), the offset and clamp
  // ignored by name.
  std::vector<std::string> geglu = llama8b(layout);
  std::erase(geglu, std::string("--swiglu"));
  geglu.insert(geglu.end(), {"--quick-geglu", "--glu-linear-offset", "1.0", "--activation-func-clamp-value", "7.0"});
  const Result g = run(check({"--json"}, geglu));
  ASSERT_TRUE(g.code == 0 || g.code == 3) << g.err;
  const auto gd = nlohmann::json::parse(g.out);
  EXPECT_EQ(gd.at("memory").at("stages").at(0).at("params"), doc(layout).at("memory").at("stages").at(0).at("params"));
  EXPECT_NE(gd.at("flags_ignored").dump().find("--activation-func-clamp-value"), std::string::npos);
}

// What launch writes, check reads back as the layout launch was given.
TEST(Check, ReadsBackWhatLaunchWrites) {
  for (const std::vector<std::string>& recompute : std::vector<std::vector<std::string>>{
           {"--recompute", "selective"},
           {"--recompute", "full", "--recompute-method", "block", "--recompute-num-layers", "5"},
           {"--recompute", "selective", "--no-overlap-grad-reduce"},  // neither overlap flag written
           {"--recompute", "selective", "--no-overlap-param-gather"},
           {"--recompute", "selective", "--fp16"},
           {"--recompute", "selective", "--fp16", "--accumulate-allreduce-grads-in-fp32"},
           {"--recompute", "selective", "--mtp-num-layers", "1"},
           {"--recompute", "selective", "--cp", "2", "--cp-comm-type", "a2a"},
           {"--recompute", "selective", "--recompute-modules", "mlp,layernorm"},
           {"--recompute", "selective", "--precision", "fp8", "--fp8-recipe", "tensorwise", "--first-last-layers-bf16",
            "--num-layers-at-end-in-bf16", "2"},
           {"--recompute", "selective", "--pipeline-model-parallel-layout", "Et*7|t*9|(t*9|)*1t*7L"},  // quoted
           {"--recompute", "selective", "--moe-shared-expert-overlap"},  // no shared expert: not written
           {"--recompute", "selective", "--use-megatron-fsdp", "--fsdp-double-buffer"},
           {"--recompute", "full", "--use-megatron-fsdp", "--sharding", "zero2", "--megatron-fsdp-main-grads-dtype",
            "fp32", "--suggested-communication-unit-size", "300000000"}}) {
    std::vector<std::string> job = {"--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192",  "--tp",
                                    "2",       "--pp",        "2",         "--gpus",   "16",    "--gbs", "64"};
    job.insert(job.end(), recompute.begin(), recompute.end());
    std::vector<std::string> launch = {"launch"};
    launch.insert(launch.end(), job.begin(), job.end());
    const Result l = run(launch);
    ASSERT_EQ(l.code, 0) << l.err;
    const auto script = std::filesystem::temp_directory_path() / ("headroom_check_" + std::to_string(::getpid()));
    std::ofstream(script) << l.out;
    const Result c = run({"check", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--json", script.string()});
    std::filesystem::remove(script);
    ASSERT_TRUE(c.code == 0 || c.code == 3) << c.err;
    std::vector<std::string> estimate = {"estimate", "--json"};
    estimate.insert(estimate.end(), job.begin(), job.end());
    const Result e = run(estimate);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(nlohmann::json::parse(c.out).at("layout"), nlohmann::json::parse(e.out).at("layout"));
    EXPECT_EQ(nlohmann::json::parse(c.out).at("memory"), nlohmann::json::parse(e.out).at("memory"));
    // The residual stream's dropout is written off (Megatron-LM's default 0.1 would store masks not priced).
    EXPECT_EQ(nlohmann::json::parse(c.out).at("notes").dump().find("hidden dropout"), std::string::npos) << l.out;
  }
}

// A sliding window round-trips: Gemma 2's 4,096-token window on every other layer, written as Megatron-LM's
// --window-size 4095,0 --window-attn-skip-freq 2, is read back as the model's window (the command's model, with the
// written vocabulary, prices the attention as Gemma 2's).
TEST(Check, ReadsBackTheSlidingWindowLaunchWrites) {
  const std::vector<std::string> job = {"--cluster", "dgx-h100", "--seq", "8192", "--tp", "8", "--gpus", "64"};
  std::vector<std::string> launch = {"launch", "--model", "gemma-2-27b"};
  launch.insert(launch.end(), job.begin(), job.end());
  const Result l = run(launch);
  ASSERT_EQ(l.code, 0) << l.err;
  const auto script = std::filesystem::temp_directory_path() / ("headroom_window_" + std::to_string(::getpid()));
  std::ofstream(script) << l.out;
  const Result named = run({"check", "--model", "gemma-2-27b", "--cluster", "dgx-h100", "--json", script.string()});
  // The tokenizer arguments the script asks for: Gemma 2's 256,000 tokens.
  std::string sized = l.out;
  const std::string script_line = "pretrain_gpt.py \\\n";
  sized.insert(sized.find(script_line) + script_line.size(), "    --vocab-size 256000 \\\n");
  std::ofstream(script) << sized;
  const Result own = run({"check", "--cluster", "dgx-h100", "--json", script.string()});
  std::filesystem::remove(script);
  ASSERT_NE(named.code, 2) << named.err;
  ASSERT_NE(own.code, 2) << own.err;
  std::vector<std::string> estimate = {"estimate", "--json", "--model", "gemma-2-27b"};
  estimate.insert(estimate.end(), job.begin(), job.end());
  const Result e = run(estimate);
  ASSERT_EQ(e.code, 0) << e.err;
  const auto c = nlohmann::json::parse(named.out), o = nlohmann::json::parse(own.out), x = nlohmann::json::parse(e.out);
  EXPECT_EQ(c.at("layout"), x.at("layout"));
  EXPECT_EQ(c.at("perf"), x.at("perf"));
  // The command's own model has no flag for Gemma 2's extra norms, but its attention is windowed as Gemma 2's.
  EXPECT_DOUBLE_EQ(o.at("perf").at("breakdown").at("attention_s").get<double>(),
                   x.at("perf").at("breakdown").at("attention_s").get<double>());
}

// NeMo's Mistral 7B config: its window_size is Megatron-LM's --window-size (a window of 4,096 keys before the query),
// the Falcon-only mcore_customization_config keys are listed as ignored, and a --model without that window (the shipped
// Mistral 7B is v0.3, without one) is refused naming both.
TEST(Check, ReadsNemosSlidingWindow) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/mistral_7b.yaml";
  const std::string seq = "training.model.data.seq_length=4096";
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", file, seq});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_NE(doc.at("notes").at(0).get<std::string>().find("--window-size 4096,0"), std::string::npos);
  // As shipped, its 2,048-token samples are the micro-batches (one pipeline stage: encoder_seq_length's 4,096 shapes
  // no send); with two stages the sends would be 4,096 tokens long, which the samples do not fill.
  const Result shipped = run({"check", "--cluster", "dgx-h100", "--json", file});
  ASSERT_NE(shipped.code, 2) << shipped.err;
  EXPECT_EQ(nlohmann::json::parse(shipped.out).at("layout").at("seq"), 2048);
  const Result piped = run({"check", "--cluster", "dgx-h100", file, "training.model.pipeline_model_parallel_size=2"});
  EXPECT_EQ(piped.code, 2);
  EXPECT_NE(piped.err.find("model.data.seq_length: 2048: differs from model.encoder_seq_length 4096"),
            std::string::npos)
      << piped.err;
  EXPECT_NE(doc.at("flags_ignored").dump().find("model.mcore_customization_config.parallel_attention: true"),
            std::string::npos);
  const Result v3 = run({"check", "--cluster", "dgx-h100", "--model", "mistral-7b", file, seq});
  EXPECT_EQ(v3.code, 2);
  EXPECT_NE(v3.err.find("has no sliding window, the config a 4097-token window"), std::string::npos) << v3.err;
  // Falcon's layer, which does read them, is refused by its spec.
  const Result falcon = run({"check", "--cluster", "dgx-h100", file, seq, "+training.model.name=megatron_falcon_gpt"});
  EXPECT_EQ(falcon.code, 2);
  EXPECT_NE(falcon.err.find("model.name: megatron_falcon_gpt"), std::string::npos) << falcon.err;
}

// What launch writes for NeMo, Hydra overrides of the model's training config, check reads back with that config as the
// layout launch was given, for each knob NeMo's config has a key for.
TEST(Check, ReadsBackTheNemoOverridesLaunchWrites) {
  const std::string config =
      std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/llama3_1_8b.yaml";
  for (const std::vector<std::string>& layout_knobs :
       std::vector<std::vector<std::string>>{{"--tp", "2", "--pp", "2", "--vpp", "4", "--gpus", "64", "--gbs", "512",
                                              "--recompute", "full", "--no-overlap-p2p-communication"},
                                             {"--tp", "4", "--cp", "2", "--gpus", "32", "--gbs", "64", "--mbs", "2",
                                              "--recompute", "selective", "--tp-comm-overlap"},
                                             {"--tp", "2", "--gpus", "16", "--gbs", "128", "--precision", "fp8",
                                              "--fp8-recipe", "delayed", "--fp8-param-gather", "--grad-reduce-in-bf16"},
                                             {"--gpus", "8", "--gbs", "64", "--sharding", "ddp"},
                                             {"--tp", "2", "--pp", "4", "--gpus", "16", "--gbs", "64", "--recompute",
                                              "full", "--recompute-method", "block", "--recompute-num-layers", "3"},
                                             {"--tp", "2", "--gpus", "16", "--gbs", "64", "--recompute", "selective",
                                              "--recompute-modules", "core_attn,mlp"}}) {
    std::vector<std::string> launch = {"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192"};
    launch.insert(launch.end(), layout_knobs.begin(), layout_knobs.end());
    launch.emplace_back("--json");
    const Result l = run(launch);
    ASSERT_EQ(l.code, 0) << l.err;
    auto doc = nlohmann::json::parse(l.out);
    ASSERT_TRUE(doc.at("unsupported").at("nemo").empty()) << doc.at("unsupported").at("nemo");
    doc.at("layout").erase("sharding_code");  // launch's own summary of the sharding
    std::vector<std::string> check_args = {"check",    "--model", "llama3.1-8b", "--cluster",
                                           "dgx-h100", "--json",  config};
    for (const auto& o : doc.at("nemo")) check_args.push_back(o.get<std::string>());
    const Result c = run(check_args);
    ASSERT_NE(c.code, 2) << c.err;
    EXPECT_EQ(nlohmann::json::parse(c.out).at("layout"), doc.at("layout")) << layout_knobs.front();
  }
  // What NeMo's config cannot say is flagged, not approximated.
  const Result zero3 =
      run({"launch", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq", "8192", "--gpus", "16", "--gbs", "64",
           "--sharding", "zero3", "--framework", "pytorch-fsdp", "--export", "nemo"});
  ASSERT_EQ(zero3.code, 0) << zero3.err;
  EXPECT_NE(zero3.out.find("# UNSUPPORTED: sharding GGG"), std::string::npos) << zero3.out;
}

// A launch script of Megatron-LM's own examples (examples/llama/train_llama3_8b_h100_fp8.sh, its variables expanded
// with the script's defaults): read whole, every flag of it read or ignored by name, none dropped.
TEST(Check, ReadsMegatronLmsOwnLlamaExampleWhole) {
  const std::string script =
      std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/megatron_llama3_8b_h100_fp8.sh";
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", script});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& l = doc.at("layout");
  EXPECT_EQ(l.at("tp"), 1);
  EXPECT_EQ(l.at("dp"), 8);
  EXPECT_EQ(l.at("gbs"), 128);
  EXPECT_EQ(l.at("seq"), 8192);
  EXPECT_EQ(l.at("fp8_recipe"), "delayed");
  EXPECT_EQ(l.at("fp8_param_gather"), true);
  std::ifstream in(script);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string args = text.substr(text.find("pretrain_gpt.py"));
  std::string listed;
  for (const auto* key : {"flags_read", "flags_ignored"})
    for (const auto& f : doc.at(key)) {
      listed += ' ';
      listed += f.get_ref<const std::string&>();
      listed += ' ';
    }
  std::size_t flags = 0;
  for (std::size_t at = args.find(" --"); at != std::string::npos; at = args.find(" --", at + 1)) {
    const std::string flag = args.substr(at + 1, args.find_first_of(" \\\n", at + 1) - at - 1);
    ++flags;
    EXPECT_NE(listed.find(' ' + flag + ' '), std::string::npos) << flag << " neither read nor ignored";
  }
  EXPECT_GT(flags, 60u);
}

// Megatron-LM's example script as published (tests/data/launch/megatron-lm-examples), its variables, arrays and
// `if [[ "$DTYPE" == "fp8" ]]` block followed as bash runs it: the same job as the command it runs, written out.
TEST(Check, ReadsMegatronLmsExampleScriptUnchanged) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/";
  const Result as_published =
      run({"check", "--cluster", "dgx-h100", "--json", dir + "megatron-lm-examples/train_llama3_8b_h100_fp8.sh"});
  const Result expanded = run({"check", "--cluster", "dgx-h100", "--json", dir + "megatron_llama3_8b_h100_fp8.sh"});
  ASSERT_NE(as_published.code, 2) << as_published.err;
  ASSERT_EQ(as_published.code, expanded.code);
  const auto a = nlohmann::json::parse(as_published.out), b = nlohmann::json::parse(expanded.out);
  EXPECT_EQ(a.at("layout"), b.at("layout"));
  EXPECT_EQ(a.at("flags_read"), b.at("flags_read"));
  EXPECT_EQ(a.at("flags_ignored"), b.at("flags_ignored"));
}

// Megatron-LM's Megatron-FSDP example as published (examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh): its
// FSDP flags read (--use-nccl-ub turning the double buffers on, as arguments.py does) or ignored by name, and the
// job priced with the layers' states sharded over DP: less memory a GPU than the same command without Megatron-FSDP.
TEST(Check, ReadsMegatronLmsMegatronFsdpScriptUnchanged) {
  const std::string script = std::string(HEADROOM_TEST_DATA_DIR) +
                             "/../tests/data/launch/megatron-lm-examples/train_llama3_8b_fsdp_h100_fp8.sh";
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", script});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const auto& l = doc.at("layout");
  EXPECT_EQ(l.at("use_megatron_fsdp"), true);
  EXPECT_EQ(l.at("sharding"), (nlohmann::json{{"params", "G"}, {"grads", "G"}, {"optimizer", "G"}}));
  EXPECT_EQ(l.at("fsdp_double_buffer"), true);
  EXPECT_EQ(l.at("megatron_fsdp_main_grads_dtype"), "bf16");
  EXPECT_EQ(l.at("fp8_param_gather"), true);
  const std::string read = doc.at("flags_read").dump(), ignored = doc.at("flags_ignored").dump();
  EXPECT_NE(read.find("--data-parallel-sharding-strategy optim_grads_params"), std::string::npos) << read;
  for (const char* flag : {"--use-nccl-ub", "--fsdp-manual-registration", "--init-model-with-meta-device"})
    EXPECT_NE(ignored.find(flag), std::string::npos) << flag << ignored;
  const Result ddp = run({"check", "--cluster", "dgx-h100", "--json", script, "--ignore", "--use-megatron-fsdp"});
  ASSERT_NE(ddp.code, 2) << ddp.err;
  const auto without = nlohmann::json::parse(ddp.out);
  EXPECT_EQ(without.at("layout").at("use_megatron_fsdp"), false);
  EXPECT_LT(doc.at("memory").at("peak_gib").get<double>(), without.at("memory").at("peak_gib").get<double>());
}

// Megatron-LM's Mixtral 8x7B script as published, its nodes and its WandB test given as the shell would: the experts
// and their router's settings read or ignored by name, the same job as estimate's.
TEST(Check, ReadsMegatronLmsMixtralScriptUnchanged) {
  const std::string script = std::string(HEADROOM_TEST_DATA_DIR) +
                             "/../tests/data/launch/megatron-lm-examples/train_mixtral_8x7b_distributed.sh";
  // Its `if [ -n "${WANDB_API_KEY}" ]` block adds only logging flags: priced the same either way, without --set.
  const Result r =
      run({"check", script, "--cluster", "dgx-h100", "--model", "mixtral-8x7b", "--set", "SLURM_NNODES=4", "--json"});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_NE(doc.at("notes").dump().find("change only flags it ignores (--wandb-exp-name, --wandb-project)"),
            std::string::npos)
      << doc.at("notes");
  const std::string read = doc.at("flags_read").dump(), ignored = doc.at("flags_ignored").dump();
  for (const char* flag : {"--num-experts 8", "--moe-router-topk 2", "--moe-token-dispatcher-type alltoall",
                           "--expert-model-parallel-size 8"})
    EXPECT_NE(read.find(flag), std::string::npos) << flag << read;
  for (const char* flag : {"--moe-grouped-gemm", "--moe-aux-loss-coeff", "--moe-router-load-balancing-type",
                           "--no-masked-softmax-fusion", "--no-load-optim"})
    EXPECT_NE(ignored.find(flag), std::string::npos) << flag << ignored;
  const Result e =
      run({"estimate", "--cluster", "dgx-h100", "--model", "mixtral-8x7b", "--gpus", "32", "--pp", "4", "--ep", "8",
           "--seq", "4096", "--gbs", "256", "--moe-token-dispatcher-type", "alltoall", "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto est = nlohmann::json::parse(e.out);
  EXPECT_EQ(doc.at("layout"), est.at("layout"));
  EXPECT_DOUBLE_EQ(doc.at("perf").at("step_time_s").get<double>(), est.at("perf").at("step_time_s").get<double>());
}

// torchtitan's own Llama 3 job configs (tests/data/launch/torchtitan-train-configs), unchanged: priced under torchtitan
// as estimate prices the same job, every key read or ignored by name.
TEST(Check, ReadsTorchtitansJobConfigsUnchanged) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/torchtitan-train-configs/";
  struct Case {
    std::string file, gpus;
    std::vector<std::string> estimate;
  };
  for (const Case& c : std::vector<Case>{
           {"llama3_8b.toml", "8", {"--model", "llama3.1-8b", "--gpus", "8", "--mbs", "1", "--gbs", "8"}},
           {"llama3_70b.toml",
            "64",
            {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--mbs", "8", "--gbs", "64", "--recompute",
             "full"}},
           {"llama3_405b.toml",
            "128",
            {"--model", "llama3.1-405b", "--gpus", "128", "--tp", "8", "--mbs", "2", "--gbs", "32", "--recompute",
             "full", "--compile", "--tp-comm-overlap", "--precision", "fp8", "--fp8-param-gather"}}}) {
    const Result r = run({"check", "--cluster", "dgx-h100", "--gpus", c.gpus, "--json", dir + c.file});
    ASSERT_NE(r.code, 2) << c.file << ": " << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc.at("framework"), "torchtitan");
    std::vector<std::string> estimate = {"estimate",   "--cluster", "dgx-h100", "--framework",
                                         "torchtitan", "--seq",     "8192",     "--json"};
    estimate.insert(estimate.end(), c.estimate.begin(), c.estimate.end());
    const Result e = run(estimate);
    ASSERT_EQ(e.code, 0) << e.err;
    const auto est = nlohmann::json::parse(e.out);
    EXPECT_EQ(doc.at("layout"), est.at("layout")) << c.file;
    EXPECT_DOUBLE_EQ(doc.at("perf").at("step_time_s").get<double>(), est.at("perf").at("step_time_s").get<double>());
    // Every key of the file is read or ignored.
    std::ifstream in(dir + c.file);
    std::string line, section;
    std::size_t keys = 0;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (line[0] == '[') {
        section = line.substr(1, line.find(']') - 1);
        continue;
      }
      const std::string key = section + "." + line.substr(0, line.find_first_of(" ="));
      ++keys;
      const std::string listed = doc.at("flags_read").dump() + doc.at("flags_ignored").dump();
      EXPECT_NE(listed.find("\"" + key + " = "), std::string::npos) << c.file << ": " << key;
    }
    EXPECT_EQ(doc.at("flags_read").size() + doc.at("flags_ignored").size(), keys) << c.file;
  }
  // A key torchtitan has that changes the job and headroom does not price is refused naming it.
  const auto bad = std::filesystem::temp_directory_path() / ("headroom_tt_" + std::to_string(::getpid()) + ".toml");
  std::ofstream(bad) << "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[activation_checkpoint]\nmode = "
                        "\"selective\"\nselective_ac_option = \"op\"\n[parallelism]\nexpert_parallel_degree = 2\n"
                        "[experimental]\ncustom_import = \"x\"\n";
  const Result r = run({"check", "--cluster", "dgx-h100", "--gpus", "8", bad.string()});
  std::filesystem::remove(bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(r.err.find("experimental.custom_import is a key headroom does not know") != std::string::npos ||
              r.err.find("parallelism.expert_parallel_degree = 2") != std::string::npos)
      << r.err;
}

// torchtitan's job config that launch writes reads back as the layout it was written from.
TEST(Check, ReadsBackTheJobConfigLaunchWrites) {
  for (const std::vector<std::string>& job : std::vector<std::vector<std::string>>{
           {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--gbs", "64", "--recompute", "full",
            "--compile"},
           {"--model", "llama3.1-8b", "--gpus", "16", "--cp", "2", "--tp", "2", "--gbs", "8", "--precision", "fp8",
            "--recompute", "full", "--fp8-param-gather"},
           {"--model", "llama3.1-8b", "--gpus", "16", "--gbs", "32", "--mbs", "2"},
           {"--model", "llama3.1-8b", "--gpus", "16", "--cp", "4", "--gbs", "8", "--context-parallel-rotate-method",
            "alltoall"},
           {"--model", "llama3.1-8b", "--gpus", "8", "--gbs", "16", "--recompute", "full", "--recompute-method",
            "every", "--recompute-num-layers", "2"},
           {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--vpp", "2", "--schedule",
            "zero-bubble", "--gbs", "64", "--recompute", "full"},
           {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "2", "--vpp", "4", "--gbs", "64",
            "--recompute", "full"},
           {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--vpp", "2", "--schedule", "zbv",
            "--gbs", "64", "--recompute", "full"},
           {"--model", "llama3.1-70b", "--gpus", "64", "--tp", "8", "--pp", "4", "--vpp", "2", "--schedule",
            "looped-bfs", "--gbs", "32", "--recompute", "full"}}) {
    std::vector<std::string> common = {"--cluster", "dgx-h100", "--framework", "torchtitan", "--seq", "8192"};
    common.insert(common.end(), job.begin(), job.end());
    std::vector<std::string> launch = {"launch", "--export", "torchtitan"}, estimate = {"estimate", "--json"};
    launch.insert(launch.end(), common.begin(), common.end());
    estimate.insert(estimate.end(), common.begin(), common.end());
    const Result l = run(launch), e = run(estimate);
    ASSERT_EQ(l.code, 0) << l.err;
    ASSERT_EQ(e.code, 0) << e.err;
    const auto toml = std::filesystem::temp_directory_path() / ("headroom_rt_" + std::to_string(::getpid()) + ".toml");
    std::ofstream(toml) << l.out;
    const Result c =
        run({"check", "--cluster", "dgx-h100", "--model", job[1], "--gpus", job[3], "--json", toml.string()});
    std::filesystem::remove(toml);
    ASSERT_NE(c.code, 2) << c.err << l.out;
    EXPECT_EQ(nlohmann::json::parse(c.out).at("layout"), nlohmann::json::parse(e.out).at("layout")) << l.out;
  }
}

// Flags as Megatron-LM's parser takes them: the GPT-3 example splits its quoted --step-batch-size-schedule value into
// words (an unquoted ${TRAINING_ARGS[@]}), refused naming the stray word as the parser would refuse it.
TEST(Check, RefusesTheWordsBashSplitsAsMegatronWould) {
  // A flag given again with its value (a script that appends to its arguments) is the same job; another value is
  // refused, naming both.
  const std::vector<std::string> job = {"check",
                                        "--cluster",
                                        "dgx-h100",
                                        "--gpus",
                                        "8",
                                        "--",
                                        "pretrain_gpt.py",
                                        "--num-layers",
                                        "32",
                                        "--hidden-size",
                                        "4096",
                                        "--num-attention-heads",
                                        "32",
                                        "--seq-length",
                                        "4096",
                                        "--max-position-embeddings",
                                        "4096",
                                        "--vocab-size",
                                        "32000",
                                        "--bf16",
                                        "--use-distributed-optimizer"};
  std::vector<std::string> twice = job;
  twice.emplace_back("--use-distributed-optimizer");
  const Result once = run(job), again = run(twice);
  ASSERT_NE(once.code, 2) << once.err;
  EXPECT_EQ(again.out, once.out) << again.err;
  // The flex dispatcher's kernels: DeepEP and HybridEP price alike; NCCL-EP's traffic is not known.
  std::vector<std::string> flex = job;
  flex.insert(flex.end(), {"--num-experts", "8", "--moe-router-topk", "2", "--moe-token-dispatcher-type", "flex",
                           "--expert-model-parallel-size", "8", "--moe-flex-dispatcher-backend", "hybridep"});
  EXPECT_NE(run(flex).code, 2);
  // Group-limited routing is read into the model: groups that split the 8 experts, or an error naming both.
  std::vector<std::string> grouped = flex;
  grouped.insert(grouped.end(), {"--moe-router-num-groups", "4", "--moe-router-group-topk", "2"});
  grouped.insert(grouped.begin() + 1, "--json");
  const Result groups = run(grouped);
  ASSERT_NE(groups.code, 2) << groups.err;
  EXPECT_NE(nlohmann::json::parse(groups.out).at("flags_read").dump().find("--moe-router-group-topk 2"),
            std::string::npos);
  grouped[grouped.size() - 3] = "3";
  EXPECT_NE(run(grouped).err.find("moe_router_group_topk 2 of moe_router_num_groups 3"), std::string::npos);
  flex.back() = "ncclep";
  EXPECT_NE(run(flex).err.find("--moe-flex-dispatcher-backend ncclep: not priced"), std::string::npos);
  twice.insert(twice.end(), {"--num-layers", "16"});
  const Result differs = run(twice);
  EXPECT_EQ(differs.code, 2);
  EXPECT_NE(differs.err.find("--num-layers is given twice, as 32 and 16"), std::string::npos) << differs.err;

  const std::string script =
      std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/megatron-lm-examples/train_gpt3_175b_distributed.sh";
  const Result r = run({"check", "--cluster", "dgx-h100", "--gpus", "128", script});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("'2.4B:320'"), std::string::npos) << r.err;
}

// A DeepSpeed launch as launch writes it (the deepspeed line, ds_config.json beside it), read back as the layout it
// was written from: the pipeline engine with ZeRO-1 and full recompute, ZeRO-2 without it, and ZeRO-3 with its
// buckets, fetching and ZeRO++'s secondary shard set.
TEST(Check, ReadsBackTheDeepspeedLaunchLaunchWrites) {
  for (const std::vector<std::string>& job : std::vector<std::vector<std::string>>{
           {"--gpus", "64", "--tp", "8", "--pp", "4", "--gbs", "256", "--recompute", "full"},
           {"--gpus", "16", "--tp", "2", "--gbs", "64", "--mbs", "2", "--sharding", "zero2", "--sp"},
           {"--gpus", "32", "--gbs", "64", "--sharding", "zero3", "--recompute", "full", "--no-overlap-comm",
            "--reduce-bucket-size", "200000000", "--stage3-max-reuse-distance", "0", "--stage3-prefetch-bucket-size",
            "100000000", "--stage3-max-live-parameters", "300000000", "--zero-hpz-partition-size", "8"}}) {
    std::vector<std::string> common = {"--model",     "llama3.1-70b", "--cluster", "dgx-h100",
                                       "--framework", "deepspeed",    "--seq",     "4096"};
    common.insert(common.end(), job.begin(), job.end());
    std::vector<std::string> launch = {"launch", "--export", "deepspeed"}, json = {"launch", "--json"},
                             estimate = {"estimate", "--json"};
    for (auto* v : {&launch, &json, &estimate}) v->insert(v->end(), common.begin(), common.end());
    const Result l = run(launch), j = run(json), e = run(estimate);
    ASSERT_EQ(l.code, 0) << l.err;
    ASSERT_EQ(j.code, 0) << j.err;
    ASSERT_EQ(e.code, 0) << e.err;
    const auto dir = std::filesystem::temp_directory_path() / ("headroom_ds_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "run.sh") << l.out;
    std::ofstream(dir / "ds_config.json") << nlohmann::json::parse(j.out).at("deepspeed_config").dump(2);
    const Result c =
        run({"check", "--cluster", "dgx-h100", "--model", "llama3.1-70b", "--json", (dir / "run.sh").string()});
    std::filesystem::remove_all(dir);
    ASSERT_NE(c.code, 2) << c.err << l.out;
    const auto doc = nlohmann::json::parse(c.out);
    EXPECT_EQ(doc.at("framework"), "deepspeed");
    EXPECT_EQ(doc.at("layout"), nlohmann::json::parse(e.out).at("layout")) << l.out;
    // Below ZeRO-2 the BF16 optimizer reduces after the backward: overlap_comm is ignored, saying so.
    if (doc.at("layout").at("sharding").at("grads") == "N") {
      EXPECT_NE(doc.at("flags_ignored").dump().find("zero_optimization.overlap_comm false (stages 0 and 1"),
                std::string::npos)
          << doc.at("flags_ignored").dump();
    }
  }
}

// Megatron-DeepSpeed's own Llama 2 script (examples_deepspeed/pretrain_llama2_distributed.sh, unchanged): its
// numeric test followed, its DeepSpeed config read from the here-document it writes, every flag read or ignored.
TEST(Check, ReadsMegatronDeepspeedsExampleScriptUnchanged) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/megatron-deepspeed-examples/";
  const Result r = run({"check", "--cluster", "dgx-h100", "--gpus", "8", "--model", dir + "llama2-example-model.json",
                        "--json", dir + "pretrain_llama2_distributed.sh"});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("framework"), "deepspeed");
  const auto& l = doc.at("layout");
  EXPECT_EQ(l.at("tp"), 2);
  EXPECT_EQ(l.at("pp"), 2);
  EXPECT_EQ(l.at("dp"), 2);
  EXPECT_EQ(l.at("mbs"), 4);
  EXPECT_EQ(l.at("gbs"), 32);
  EXPECT_EQ(l.at("sharding"), nlohmann::json({{"params", "N"}, {"grads", "N"}, {"optimizer", "N"}}));  // ZERO_STAGE=0
  EXPECT_EQ(l.at("recompute"), "none");       // activation_checkpoint="false"
  EXPECT_EQ(l.at("flash_attention"), false);  // no --use-flash-attn-*: its CoreAttention
  const auto read = doc.at("flags_read").dump(), ignored = doc.at("flags_ignored").dump();
  EXPECT_NE(read.find("zero_optimization.stage 0"), std::string::npos) << read;
  EXPECT_NE(read.find("--num-key-value-heads 4"), std::string::npos) << read;
  EXPECT_NE(ignored.find("--no-query-key-layer-scaling"), std::string::npos) << ignored;
  EXPECT_NE(doc.at("notes").dump().find("here-document"), std::string::npos);
  // Its checkpointing branch (activation_checkpoint="true"): --recompute-granularity full --recompute-method uniform.
  std::ifstream in(dir + "pretrain_llama2_distributed.sh");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string off = "\nactivation_checkpoint=\"false\"";
  ASSERT_NE(text.find(off), std::string::npos);
  text.replace(text.find(off), off.size(), "\nactivation_checkpoint=\"true\"");
  const auto copy = std::filesystem::temp_directory_path() / ("headroom_mds_" + std::to_string(::getpid()) + ".sh");
  std::ofstream(copy) << text;
  const Result full = run({"check", "--cluster", "dgx-h100", "--gpus", "8", "--model",
                           dir + "llama2-example-model.json", "--json", copy.string()});
  std::filesystem::remove(copy);
  ASSERT_NE(full.code, 2) << full.err;
  EXPECT_EQ(nlohmann::json::parse(full.out).at("layout").at("recompute"), "full");
}

// BLOOM's fork of Megatron-DeepSpeed (bigscience-workshop/Megatron-DeepSpeed arguments.py): ALiBi and a norm of the
// embeddings read from its flags, its attention unfused (its flash-attn path adds no bias) in the layouts check
// suggests too, DeepSpeed's partition of 30 layers over 4 stages (8, 8, 7, 7); T5's relative positions refused.
TEST(Check, ReadsBloomsMegatronDeepspeedFlags) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_bloom_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "ds.json") << R"({"bf16": {"enabled": true}, "train_batch_size": 16})";
  const std::string line =
      "deepspeed --num_nodes 2 --num_gpus 8 pretrain_gpt.py --num-layers 30 --hidden-size 1024 --num-attention-heads "
      "16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 16 --bf16 "
      "--pipeline-model-parallel-size 4 --tensor-model-parallel-size 2 --vocab-file v.json --merge-file m.txt "
      "--deepspeed --deepspeed_config ds.json";
  const auto check_with = [&](const std::string& extra) {
    std::ofstream(dir / "run.sh") << line << extra << "\n";
    return run({"check", "--cluster", "dgx-a100-80gb", "--json", (dir / "run.sh").string()});
  };
  const Result alibi = check_with(" --position-embedding-type alibi --embed-layernorm");
  const Result learned = check_with(" --position-embedding-type absolute");
  const Result relative = check_with(" --position-embedding-type relative");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(alibi.code, 0) << alibi.err;
  ASSERT_EQ(learned.code, 0) << learned.err;
  const auto a = nlohmann::json::parse(alibi.out), b = nlohmann::json::parse(learned.out);
  EXPECT_EQ(a.at("layout").at("stage_layers"), nlohmann::json({8, 8, 7, 7}));
  EXPECT_EQ(a.at("layout").at("flash_attention"), false);
  EXPECT_NE(a.at("flags_read").dump().find("--embed-layernorm"), std::string::npos);
  // The bias's pass over the scores, without the learned table's weights.
  EXPECT_GT(a.at("perf").at("step_time_s").get<double>(), b.at("perf").at("step_time_s").get<double>());
  ASSERT_FALSE(a.at("faster").empty());
  for (const auto& x : a.at("faster")) {
    EXPECT_EQ(x.at("layout").at("flash_attention"), false);
    EXPECT_EQ(x.at("change").dump().find("flash"), std::string::npos) << x.at("change").dump();
  }
  EXPECT_EQ(relative.code, 2);
  EXPECT_NE(relative.err.find("position_embedding_type relative"), std::string::npos) << relative.err;
}

// What DeepSpeed would run differently from what headroom prices is refused naming the key or flag.
TEST(Check, RefusesDeepspeedSettingsItDoesNotPrice) {
  const std::string line =
      "deepspeed --num_nodes 1 --num_gpus 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 --num-attention-heads "
      "32 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16 "
      "--use-flash-attn-v2 --deepspeed --deepspeed_config ds.json";
  const std::string bf16 = R"("bf16": {"enabled": true}, "train_batch_size": 8)";
  for (const auto& [extra, config, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"", "{" + bf16 + R"(, "zero_optimization": {"stage": 3}})", "zero_optimization.stage 3"},
           {" --no-pipeline-parallel",
            "{" + bf16 + R"(, "zero_optimization": {"stage": 3, "zero_quantized_weights": true}})",
            "zero_optimization.zero_quantized_weights true"},
           {" --no-pipeline-parallel",
            "{" + bf16 + R"(, "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 1e7}})",
            "stage3_param_persistence_threshold 10000000"},
           {" --no-pipeline-parallel",
            "{" + bf16 + R"(, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": "auto"}})",
            "\"auto\" is Hugging Face's Trainer's"},
           {" --no-pipeline-parallel",
            "{" + bf16 + R"(, "zero_optimization": {"stage": 3, "stage3_use_all_reduce_for_fetch_params": true}})",
            "stage3_use_all_reduce_for_fetch_params true"},
           {"", "{" + bf16 + R"(, "zero_optimization": {"stage": 2}})", "pipeline engine"},
           {" --no-pipeline-parallel", "{" + bf16 + R"(, "frobnicate": 1})", "frobnicate is a DeepSpeed key"},
           {"", "{" + bf16 + R"(, "activation_checkpointing": {"partition_activations": true}})",
            "activation_checkpointing.partition_activations"},
           {"", R"({"bf16": {"enabled": true}, "train_batch_size": 16})", "train_batch_size 16"},
           {"", R"({"train_batch_size": 8})", "bf16.enabled"},
           {" --group-query-attention", "{" + bf16 + "}", "Megatron-DeepSpeed takes --num-key-value-heads"},
           {" --zero-stage 2 --no-pipeline-parallel", "{" + bf16 + R"(, "zero_optimization": {"stage": 1}})",
            "--zero-stage is 2"}}) {
    const auto dir = std::filesystem::temp_directory_path() / ("headroom_dsr_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "ds.json") << config;
    std::ofstream(dir / "run.sh") << line << extra << "\n";
    const Result r = run({"check", "--cluster", "dgx-h100", "--model", "llama2-7b", (dir / "run.sh").string()});
    std::filesystem::remove_all(dir);
    EXPECT_EQ(r.code, 2) << extra << config;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

// NeMo's own training configs (tests/data/launch/nemo-launcher), unchanged: read as the Megatron-LM line NeMo hands
// Megatron-core (the note that prints it), and priced exactly as that line is; every leaf key listed as read or
// ignored.
// NeMo's Qwen2 7B config names its vocabulary (override_vocab_size, the embedding's rows unpadded) and QKV biases, so
// the model is whole without --model: per GPU at TP 4, every decoder weight but the two norms split 4 ways, the
// embedding and the untied head split 4 ways, the final norm whole.
TEST(Check, ReadsNemosVocabularyOverrideAndQkvBias) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/qwen2_7b.yaml";
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", file});
  ASSERT_NE(r.code, 2) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const std::int64_t h = 4096, f = 11008, v = 151936, layers = 32, t = 4;
  EXPECT_EQ(doc.at("layout").at("tp"), t);
  const std::int64_t layer = 4 * h * h + 3 * h + 3 * h * f;  // q, k, v, o (MHA), the QKV biases, the SwiGLU MLP
  const std::int64_t per_gpu = layers * (layer / t + 2 * h) + 2 * v * h / t + h;
  EXPECT_EQ(doc.at("memory").at("stages").at(0).at("params").get<std::int64_t>(), 2 * per_gpu);
  const std::string read = doc.at("flags_read").dump();
  for (const char* key : {"\"model.override_vocab_size: 151936", "\"model.qkv_bias: true"})
    EXPECT_NE(read.find(key), std::string::npos) << key;
}

// NeMo 2.0's pre-training recipes (tests/data/launch/nemo-recipes, Python), unchanged: the layout each recipe's
// trainer() and data module give, every keyword of its strategy, DDP config and Trainer listed as read or ignored.
TEST(Check, ReadsNemo2RecipesUnchanged) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/";
  struct Case {
    std::string file, nodes, model;
    std::int64_t tp, pp, vpp, cp, seq, ep;
    bool sp;
  };
  for (const Case& c : std::vector<Case>{{"llama3_8b.py", "1", "llama3.1-8b", 1, 1, 1, 2, 8192, 1, false},
                                         {"llama3_70b.py", "4", "llama3.1-70b", 4, 4, 5, 2, 8192, 1, true},
                                         {"llama31_405b.py", "64", "llama3.1-405b", 8, 8, 2, 4, 8192, 1, true},
                                         {"llama2_7b.py", "1", "llama2-7b", 2, 1, 1, 1, 4096, 1, false},
                                         {"mixtral_8x7b.py", "8", "mixtral-8x7b", 1, 4, 8, 1, 4096, 8, false}}) {
    const Result r = run({"check", "--cluster", "dgx-h100", "--json", dir + c.file, "num_nodes=" + c.nodes});
    ASSERT_NE(r.code, 2) << c.file << ": " << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc.at("model"), c.model) << c.file;
    EXPECT_EQ(doc.at("framework"), "megatron");
    const auto& l = doc.at("layout");
    EXPECT_EQ(l.at("tp"), c.tp) << c.file;
    EXPECT_EQ(l.at("pp"), c.pp) << c.file;
    EXPECT_EQ(l.at("vpp"), c.vpp) << c.file;
    EXPECT_EQ(l.at("cp"), c.cp) << c.file;
    EXPECT_EQ(l.at("ep"), c.ep) << c.file;
    EXPECT_EQ(l.at("sequence_parallel"), c.sp) << c.file;
    EXPECT_EQ(l.at("seq"), c.seq) << c.file;
    EXPECT_EQ(l.at("mbs"), 1) << c.file;
    EXPECT_EQ(l.at("gbs"), 512) << c.file;
    EXPECT_EQ(l.at("gpus"), std::stoll(c.nodes) * 8) << c.file;
    EXPECT_EQ(l.at("sharding"), nlohmann::json({{"params", "N"}, {"grads", "N"}, {"optimizer", "G"}}))
        << c.file;  // Megatron-core's distributed optimizer
    EXPECT_EQ(l.at("grad_reduce_in_bf16"), false) << c.file;
    // Every keyword of the recipe's strategy, DDP config and Trainer, counted in its text, is read or ignored.
    std::ifstream in(dir + c.file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto block = [&](const std::string& from) {
      const auto at = text.find(from);
      return text.substr(at, text.find("\n    )", at) - at);
    };
    std::size_t keywords = 0;
    for (const std::string b : {"nl.MegatronStrategy,", "nl.Trainer,"})
      for (std::size_t at = 0; (at = block(b).find('=', at)) != std::string::npos; ++at)
        keywords += block(b)[at + 1] != '=' && block(b)[at - 1] != '=' && block(b)[at - 1] != '!';
    keywords -= 2;  // the strategy's ddp=run.Config(...) and the Trainer's strategy=strategy are read as calls
    // The precision a Trainer's plugins=run.Config(nl.MegatronMixedPrecision, precision=...) gives is the plugin's.
    keywords -= block("nl.Trainer,").find("MegatronMixedPrecision, precision=") != std::string::npos ? 1 : 0;
    const auto listed = doc.at("flags_read").dump() + doc.at("flags_ignored").dump();
    std::size_t trainer_keys = 0;
    for (const auto& k : doc.at("flags_read")) trainer_keys += k.get<std::string>().starts_with("trainer.");
    for (const auto& k : doc.at("flags_ignored")) trainer_keys += k.get<std::string>().starts_with("trainer.");
    EXPECT_EQ(trainer_keys, keywords) << c.file << ": " << listed;
  }
}

// The recipes that call others (tests/data/launch/nemo-recipes): the long-context Llama recipe starts from
// llama3_8b.pretrain_recipe() and replaces its model, trainer and data; the Qwen 3 and Nemotron-4 recipes build their
// trainer and model with qwen3.py's and nemotron.py's functions (an if/elif chain on the version); the Qwen 3 MoE
// recipe sets recompute on the recipe it built. A recipe whose sibling is not there is refused, naming its call.
// A config class that is a shipped model's shape with a difference is priced with that difference: StarCoder2's
// classes untie the output layer the Hugging Face model ties (and drop its window, which at the recipe's 4,096 tokens
// changes nothing), so its parameters are the tied model's plus one output layer of 49,152 x 3,072 over TP 2.
TEST(Check, Nemo2RecipeConfigClassesPriceTheirDifferencesFromTheShippedModel) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/";
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", dir + "starcoder2_3b.py"});
  ASSERT_NE(r.code, 2) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("model"), "starcoder2-3b");
  EXPECT_NE(j.at("notes").dump().find("starcoder2-3b's shape with its output layer untied, no window"),
            std::string::npos)
      << j.at("notes");
  const auto& l = j.at("layout");
  ASSERT_EQ(l.at("pp"), 1);  // stage 0 holds the embedding and the output layer
  const Result tied = run({"estimate", "--model", "starcoder2-3b", "--cluster", "dgx-h100", "--json", "--gpus",
                           l.at("gpus").dump(), "--tp", l.at("tp").dump(), "--gbs", l.at("gbs").dump(), "--mbs",
                           l.at("mbs").dump(), "--seq", l.at("seq").dump()});
  ASSERT_EQ(tied.code, 0) << tied.err;
  const std::int64_t output_layer_bytes = 49152LL * 3072 / l.at("tp").get<std::int64_t>() * 2;  // BF16
  EXPECT_EQ(j.at("memory").at("stages").at(0).at("params").get<std::int64_t>(),
            nlohmann::json::parse(tied.out).at("memory").at("stages").at(0).at("params").get<std::int64_t>() +
                output_layer_bytes);
}

// Megatron-Bridge's performance recipes as its benchmark scripts run them: the canonical recipe, then helpers that set
// fields on the ConfigContainer they are given (_benchmark_common's, under conditions on fields the recipe does not
// set, which run both ways where they cannot be told), a padded vocabulary.
TEST(Check, ReadsMegatronBridgePerformanceRecipes) {
  const std::string file =
      std::string(HEADROOM_TEST_DATA_DIR) +
      "/../tests/data/launch/megatron-bridge/src/megatron/bridge/perf_recipes/llama/h100/llama3.py";
  const auto checked = [&](const std::string& recipe) {
    const Result r = run({"check", "--cluster", "dgx-h100", "--json", "--", file, "--recipe", recipe});
    EXPECT_NE(r.code, 2) << recipe << ": " << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out);
  };
  const auto bf16 = checked("llama3_8b_pretrain_8gpu_h100_bf16_config");
  ASSERT_FALSE(bf16.is_null());
  const auto& l = bf16.at("layout");
  EXPECT_EQ(l.at("gpus"), 8);
  EXPECT_EQ(l.at("tp"), 1);
  EXPECT_EQ(l.at("cp"), 2);
  EXPECT_EQ(l.at("gbs"), 128);
  EXPECT_EQ(l.at("precision"), "bf16");
  EXPECT_EQ(l.at("grad_reduce_in_bf16"), true);  // _benchmark_common: grad_reduce_in_fp32 False
  EXPECT_NE(bf16.at("notes").dump().find("megatron.bridge.perf_recipes._common"), std::string::npos);
  // Set one way of `if cuda_impl is not None or scope_names` (cuda_graph_impl is the provider's default): ignored.
  EXPECT_NE(bf16.at("flags_ignored").dump().find("model.use_te_rng_tracker"), std::string::npos);
  // _perf_precision("fp8_cs"): current scaling, every layer in FP8; full recompute of 5 layers.
  const auto fp8 = checked("llama3_8b_pretrain_8gpu_h100_fp8cs_config");
  ASSERT_FALSE(fp8.is_null());
  EXPECT_EQ(fp8.at("layout").at("precision"), "fp8");
  EXPECT_EQ(fp8.at("layout").at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(fp8.at("layout").at("first_last_layers_bf16"), false);
  EXPECT_EQ(fp8.at("layout").at("recompute"), "full");
  EXPECT_EQ(fp8.at("layout").at("recompute_num_layers"), 5);
  // should_pad_vocab at TP 4: 128,256 rows padded to a multiple of 512; the gather with the optimizer step ignored.
  const auto big = checked("llama3_70b_pretrain_64gpu_h100_bf16_config");
  ASSERT_FALSE(big.is_null());
  EXPECT_EQ(big.at("layout").at("vpp"), 5);
  EXPECT_NE(big.at("notes").dump().find("the vocabulary padded to 128512 rows"), std::string::npos);
  EXPECT_NE(big.at("flags_ignored").dump().find("optimizer.overlap_param_gather_with_optimizer_step"),
            std::string::npos);
  // Its pipeline layout string (40 virtual stages on 8 ranks, rank 3's last chunk 3 layers, the loss's 1) is read:
  // the stages hold its layers, and a faster layout of other sizes drops it.
  const auto layout = checked("llama3_70b_pretrain_64gpu_h100_fp8cs_config");
  ASSERT_FALSE(layout.is_null());
  EXPECT_EQ(layout.at("layout").at("pipeline_model_parallel_layout"), "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
  EXPECT_EQ(layout.at("layout").at("vpp"), 5);
  EXPECT_EQ(layout.at("layout").at("stage_layers"), nlohmann::json::parse("[10, 10, 10, 11, 10, 10, 10, 9]"));
  for (const auto& x : layout.at("faster")) {
    if (x.at("layout").at("pp") != 8) {
      EXPECT_NE(x.at("change").dump().find("model.pipeline_model_parallel_layout=None"), std::string::npos) << x;
    }
  }
}

// A Megatron-Bridge recipe as run_recipe.py --recipe runs it: the function evaluated with the checkout's modules
// (_pretrain_common() in recipes/common.py, the optimizer and scheduler a tuple from utils/optimizer_utils.py), the
// ConfigContainer's fields read under Bridge's own paths, the world from the recipe's name unless --gpus gives one.
TEST(Check, ReadsMegatronBridgeRecipes) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) +
                           "/../tests/data/launch/megatron-bridge/src/megatron/bridge/recipes/llama/h100/llama3.py";
  const auto checked = [&](const std::vector<std::string>& args) {
    std::vector<std::string> a = {"check", "--cluster", "dgx-h100", "--json", "--", file};
    a.insert(a.end(), args.begin(), args.end());
    const Result r = run(a);
    EXPECT_NE(r.code, 2) << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out);
  };
  const auto j = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config"});
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j.at("model"), "llama3.1-8b");  // AutoBridge.from_hf_pretrained("meta-llama/Meta-Llama-3-8B")
  const auto& l = j.at("layout");
  EXPECT_EQ(l.at("gpus"), 16);    // the recipe's name
  EXPECT_EQ(l.at("seq"), 16384);  // SEQUENCE_LENGTH_16K: int = 16384, a module constant
  EXPECT_EQ(l.at("tp"), 4);
  EXPECT_EQ(l.at("pp"), 2);
  EXPECT_EQ(l.at("cp"), 2);
  EXPECT_EQ(l.at("sequence_parallel"), true);
  EXPECT_EQ(l.at("gbs"), 512);
  EXPECT_EQ(l.at("mbs"), 1);
  EXPECT_EQ(l.at("sharding").at("optimizer"), "G");  // the optimizer config the tuple's first value is
  const std::string read = j.at("flags_read").dump();
  EXPECT_NE(read.find("\"model.tensor_model_parallel_size\""), std::string::npos) << read;
  EXPECT_NE(j.at("flags_ignored").dump().find("scheduler.lr_warmup_iters"), std::string::npos);
  EXPECT_NE(j.at("notes").dump().find("megatron.bridge.recipes.utils.optimizer_utils"), std::string::npos);
  // Settings of the same work (fusions, batched sends, the flex dispatcher's kernels) are ignored, each named.
  const auto same = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "model.batch_p2p_comm=True",
                             "model.bias_activation_fusion=False", "model.moe_grouped_gemm=True"});
  ASSERT_FALSE(same.is_null());
  EXPECT_EQ(same.at("layout"), j.at("layout"));
  EXPECT_DOUBLE_EQ(same.at("perf").at("step_time_s").get<double>(), j.at("perf").at("step_time_s").get<double>());
  for (const char* key : {"model.batch_p2p_comm", "model.bias_activation_fusion", "model.moe_grouped_gemm"})
    EXPECT_NE(same.at("flags_ignored").dump().find(key), std::string::npos) << key;
  // Multi-token-prediction layers (GLM-4.5's, Qwen3-Next's recipes set 1): read and priced, on the last stage.
  const auto mtp = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "model.mtp_num_layers=1"});
  ASSERT_FALSE(mtp.is_null());
  EXPECT_EQ(mtp.at("layout").at("mtp_num_layers"), 1);
  EXPECT_EQ(j.at("layout").at("mtp_num_layers"), 0);
  EXPECT_GT(mtp.at("perf").at("step_time_s").get<double>(), j.at("perf").at("step_time_s").get<double>());
  // Megatron-FSDP as Bridge's performance scripts turn it on (utils/overrides.py _set_megatron_fsdp_overrides): the
  // recipe's no_shard strategy (unread without it) becomes the sharding, nccl_ub the double buffers.
  EXPECT_NE(j.at("flags_ignored").dump().find("ddp.data_parallel_sharding_strategy (Megatron-FSDP's"),
            std::string::npos);
  const auto fsdp = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "ddp.use_megatron_fsdp=True",
                             "ddp.data_parallel_sharding_strategy=optim_grads_params", "ddp.nccl_ub=True",
                             "ddp.keep_fp8_transpose_cache=False", "model.init_model_with_meta_device=True"});
  ASSERT_FALSE(fsdp.is_null());
  EXPECT_EQ(fsdp.at("layout").at("use_megatron_fsdp"), true);
  EXPECT_EQ(fsdp.at("layout").at("sharding").at("params"), "G");
  EXPECT_EQ(fsdp.at("layout").at("fsdp_double_buffer"), true);
  EXPECT_LT(fsdp.at("memory").at("peak_gib").get<double>(), j.at("memory").at("peak_gib").get<double>());
  // DeepSeek-V2-Lite (AutoBridge's provider overlaps the shared expert), a recipe reading provider fields it does not
  // set (`float(cfg.model.rotary_base)`) and writing `(\n True  # ...\n)`.
  const std::string deepseek = std::string(HEADROOM_TEST_DATA_DIR) +
                               "/../tests/data/launch/megatron-bridge/src/megatron/bridge/recipes/deepseek/h100/"
                               "deepseek_v2.py";
  const Result lite = run({"check", "--cluster", "dgx-h100", "--json", "--", deepseek, "--recipe",
                           "deepseek_v2_lite_pretrain_8gpu_h100_bf16_config"});
  ASSERT_NE(lite.code, 2) << lite.err;
  const auto v2 = nlohmann::json::parse(lite.out);
  EXPECT_EQ(v2.at("model"), "deepseek-v2-lite");
  EXPECT_EQ(v2.at("layout").at("ep"), 8);
  EXPECT_EQ(v2.at("layout").at("moe_shared_expert_overlap"), true);
  EXPECT_EQ(v2.at("layout").at("mtp_num_layers"), 0);
  // DeepSeek-V3 (recipes/deepseek/h100/deepseek_v3.py): its layout comes from a table in a `try` whose `except
  // ValueError: pass` the reader cannot see through, so the layout is unknown and refused where read; its module
  // offloading is refused first. Given the layout (and v), the job is priced with it; an override of p alone would make
  // run_recipe.py rebuild the layout with the recipe's builder, refused.
  const std::string v3 =
      std::string(HEADROOM_TEST_DATA_DIR) +
      "/../tests/data/launch/megatron-bridge/src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py";
  const auto v3_check = [&](const std::vector<std::string>& overrides) {
    std::vector<std::string> a = {"check", "--cluster", "dgx-h100", "--json",
                                  "--",    v3,          "--recipe", "deepseek_v3_pretrain_1024gpu_h100_bf16_config"};
    a.insert(a.end(), overrides.begin(), overrides.end());
    return run(a);
  };
  EXPECT_NE(v3_check({}).err.find("model.offload_modules"), std::string::npos);
  const Result untold = v3_check({"model.offload_modules=None"});
  EXPECT_EQ(untold.code, 2);
  EXPECT_NE(untold.err.find("`try` in set_deepseek_v3_pipeline_model_parallel_layout()"), std::string::npos)
      << untold.err;
  const Result given = v3_check({"model.offload_modules=None", "model.pipeline_model_parallel_layout=Et|(tt|)*30mL",
                                 "model.virtual_pipeline_model_parallel_size=2"});
  ASSERT_NE(given.code, 2) << given.err;
  const auto v3l = nlohmann::json::parse(given.out).at("layout");
  EXPECT_EQ(v3l.at("pipeline_model_parallel_layout"), "Et|(tt|)*30mL");
  EXPECT_EQ(v3l.at("pp"), 16);
  EXPECT_EQ(v3l.at("vpp"), 2);
  EXPECT_EQ(v3l.at("stage_layers").front(), 3);  // Et and tt
  EXPECT_EQ(v3l.at("stage_layers").back(), 2);   // tt and mL
  const Result rebuilt = v3_check({"model.offload_modules=None", "model.pipeline_model_parallel_size=8"});
  EXPECT_EQ(rebuilt.code, 2);
  EXPECT_NE(rebuilt.err.find("rebuild the recipe's pipeline layout with _get_deepseek_v3_pipeline_layout"),
            std::string::npos)
      << rebuilt.err;
  // Transformer Engine's CP exchange (Qwen3's and gpt-oss's recipes set a2a), and one it does not price.
  const auto ulysses = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "model.cp_comm_type=a2a"});
  ASSERT_FALSE(ulysses.is_null());
  EXPECT_EQ(ulysses.at("layout").at("cp_comm_type"), "a2a");
  EXPECT_EQ(j.at("layout").at("cp_comm_type"), "p2p");
  const Result hierarchical = run({"check", "--cluster", "dgx-h100", "--", file, "--recipe",
                                   "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "model.cp_comm_type=a2a+p2p"});
  EXPECT_EQ(hierarchical.code, 2);
  EXPECT_NE(hierarchical.err.find("model.cp_comm_type"), std::string::npos) << hierarchical.err;
  // TransformerConfig's names of the uneven first and last stages (GLM-4.5's recipes).
  const auto uneven =
      checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config",
               "model.num_layers_in_first_pipeline_stage=15", "model.num_layers_in_last_pipeline_stage=17"});
  ASSERT_FALSE(uneven.is_null());
  EXPECT_EQ(uneven.at("layout").at("decoder_first_pipeline_num_layers"), 15);
  EXPECT_EQ(uneven.at("layout").at("decoder_last_pipeline_num_layers"), 17);
  // --gpus and run_recipe.py's overrides; the faster layouts as its overrides.
  const auto o = checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "train.global_batch_size=256"});
  ASSERT_FALSE(o.is_null());
  EXPECT_EQ(o.at("layout").at("gbs"), 256);
  const Result text = run({"check", "--cluster", "dgx-h100", "--gpus", "32", "--", file, "--recipe",
                           "llama3_8b_pretrain_16gpu_h100_bf16_16k_config"});
  ASSERT_NE(text.code, 2) << text.err;
  EXPECT_NE(text.out.find("on 32 x h100-80gb"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("model.tensor_model_parallel_size="), std::string::npos) << text.out;
  // Refusals name what is not read.
  const auto refused = [&](const std::vector<std::string>& args, const std::string& named) {
    std::vector<std::string> a = {"check", "--cluster", "dgx-h100", "--", file};
    a.insert(a.end(), args.begin(), args.end());
    const Result r = run(a);
    EXPECT_EQ(r.code, 2) << named;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  };
  refused({}, "give --recipe NAME");
  refused({"--recipe", "nosuch_config"}, "no such function");
  refused({"--recipe", "llama3_8b_sft_2gpu_h100_bf16_config"}, "pre-training recipes");
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_fp8mx_config"}, "mixed_precision bf16_with_mxfp8_mixed(...)");
  // FP8 with current scaling, its first and last layers in BF16 (get_mixed_precision_config's
  // bf16_with_fp8_current_scaling_mixed): 8B's weights, gradients and Adam states on 2 GPUs do not fit.
  const Result cs = run({"check", "--cluster", "dgx-h100", "--json", "--", file, "--recipe",
                         "llama3_8b_pretrain_2gpu_h100_fp8cs_config"});
  EXPECT_EQ(cs.code, 4) << cs.err;
  const auto cl = nlohmann::json::parse(cs.out).at("layout");
  EXPECT_EQ(cl.at("precision"), "fp8");
  EXPECT_EQ(cl.at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(cl.at("fp8_param_gather"), true);
  EXPECT_EQ(cl.at("num_layers_at_start_in_bf16"), 1);
  EXPECT_EQ(cl.at("num_layers_at_end_in_bf16"), 1);
  // run_recipe.py's override of a field of the precision config; one of a config the recipe leaves None is refused.
  const Result overridden =
      run({"check", "--cluster", "dgx-h100", "--json", "--", file, "--recipe",
           "llama3_8b_pretrain_2gpu_h100_fp8cs_config", "mixed_precision.first_last_layers_bf16=False"});
  ASSERT_NE(overridden.code, 2) << overridden.err;
  EXPECT_EQ(nlohmann::json::parse(overridden.out).at("layout").at("num_layers_at_start_in_bf16"), 0);
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_fp8cs_config", "comm_overlap.tp_comm_overlap=True"},
          "comm_overlap is None");
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_bf16_config", "model.cuda_graph_impl=local"},
          "model.cuda_graph_impl");
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_bf16_config", "train.frobnicate=3"}, "train.frobnicate");
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_bf16_config", "model.moe_token_dispatcher_type=allgather"},
          "model.moe_token_dispatcher_type \"allgather\": not priced");
  refused({"--recipe", "llama3_8b_pretrain_2gpu_h100_bf16_config", "model.mtp_num_layers=-1"}, "mtp_num_layers");
  // Fields unpacked from a tuple (`cfg.optimizer, cfg.scheduler = f()` in Bridge's GLM-5 recipes): each set in place.
  const auto tree = std::filesystem::temp_directory_path() / ("headroom_bridge_" + std::to_string(::getpid()));
  std::filesystem::copy(std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/megatron-bridge", tree,
                        std::filesystem::copy_options::recursive);
  const auto recipe = tree / "src/megatron/bridge/recipes/llama/h100/llama3.py";
  std::ifstream in(recipe);
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const auto at = source.find("\n    return cfg\n", source.find("def llama3_8b_pretrain_16gpu_h100_bf16_16k_config"));
  ASSERT_NE(at, std::string::npos);
  source.insert(at, "\n    cfg.train.global_batch_size, cfg.train.micro_batch_size = 128, 2");
  std::ofstream(recipe) << source;
  const Result unpacked = run({"check", "--cluster", "dgx-h100", "--json", "--", recipe.string(), "--recipe",
                               "llama3_8b_pretrain_16gpu_h100_bf16_16k_config"});
  ASSERT_NE(unpacked.code, 2) << unpacked.err;
  const auto u = nlohmann::json::parse(unpacked.out).at("layout");
  EXPECT_EQ(u.at("gbs"), 128);
  EXPECT_EQ(u.at("mbs"), 2);
  // The precision as the checkout's mixed_precision.py gives it: bf16_mixed() followed to its MixedPrecisionConfig,
  // get_mixed_precision_config("bf16_mixed") with a field set on it afterwards.
  const auto with_precision = [&](const std::string& lines) {
    std::string t = source;
    t.insert(at, lines);
    std::ofstream(recipe) << t;
    return run({"check", "--cluster", "dgx-h100", "--json", "--", recipe.string(), "--recipe",
                "llama3_8b_pretrain_16gpu_h100_bf16_16k_config"});
  };
  const Result followed = with_precision("\n    cfg.mixed_precision = bf16_mixed()");
  ASSERT_NE(followed.code, 2) << followed.err;
  EXPECT_EQ(nlohmann::json::parse(followed.out).at("layout"), u);
  const Result looked_up = with_precision(
      "\n    cfg.mixed_precision = get_mixed_precision_config(\"bf16_mixed\")"
      "\n    cfg.mixed_precision.grad_reduce_in_fp32 = False");
  ASSERT_NE(looked_up.code, 2) << looked_up.err;
  EXPECT_EQ(nlohmann::json::parse(looked_up.out).at("layout").at("grad_reduce_in_bf16"), true);
  // The performance scripts' current scaling with every layer in FP8 (scripts/performance/utils/helpers.py
  // get_precision_config: first_last_layers_bf16 = False after the recipe's True).
  const Result all_fp8 = with_precision(
      "\n    cfg.mixed_precision = get_mixed_precision_config(\"bf16_with_fp8_current_scaling_mixed\")"
      "\n    cfg.mixed_precision.first_last_layers_bf16 = False");
  ASSERT_NE(all_fp8.code, 2) << all_fp8.err;
  const auto af = nlohmann::json::parse(all_fp8.out).at("layout");
  EXPECT_EQ(af.at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(af.at("first_last_layers_bf16"), false);
  EXPECT_EQ(af.at("num_layers_at_start_in_bf16"), 0);
  const Result fp16 = with_precision("\n    cfg.mixed_precision = \"fp16_mixed\"");
  EXPECT_EQ(fp16.code, 2);
  EXPECT_NE(fp16.err.find("mixed_precision \"fp16_mixed\""), std::string::npos) << fp16.err;
  // Bridge's apply_flex_dispatcher_backend(cfg.model, backend), a helper that reads the GPU: its effect on the
  // GPUs headroom ships, the flex dispatcher, applied and noted; with no backend it changes nothing.
  const Result flex = with_precision("\n    apply_flex_dispatcher_backend(cfg.model, \"deepep\")");
  ASSERT_NE(flex.code, 2) << flex.err;
  const auto fj = nlohmann::json::parse(flex.out);
  EXPECT_EQ(fj.at("layout").at("moe_token_dispatcher_type"), "flex");
  EXPECT_NE(fj.at("notes").dump().find("applied apply_flex_dispatcher_backend(...)"), std::string::npos);
  const Result none = with_precision("\n    apply_flex_dispatcher_backend(cfg.model, None)");
  ASSERT_NE(none.code, 2) << none.err;
  EXPECT_EQ(nlohmann::json::parse(none.out).at("layout").at("moe_token_dispatcher_type"), "alltoall");
  const Result fp8 =
      with_precision("\n    cfg.mixed_precision = bf16_mixed()\n    cfg.mixed_precision.fp8 = \"hybrid\"");
  ASSERT_NE(fp8.code, 2) << fp8.err;  // MixedPrecisionConfig's FP8 recipe by default: current scaling
  EXPECT_EQ(nlohmann::json::parse(fp8.out).at("layout").at("fp8_recipe"), "tensorwise");
  const Result fp8_attention = with_precision(
      "\n    cfg.mixed_precision = bf16_mixed()\n    cfg.mixed_precision.fp8 = \"hybrid\"\n"
      "    cfg.mixed_precision.fp8_dot_product_attention = True");
  EXPECT_EQ(fp8_attention.code, 2);  // a field headroom does not price, named
  EXPECT_NE(fp8_attention.err.find("fp8_dot_product_attention True is not priced"), std::string::npos)
      << fp8_attention.err;
  std::filesystem::remove_all(tree);
  // The DDP overlaps off (Bridge's ddp config, as Megatron-core runs it): the gradient reduction priced after the
  // backward, exposed, where gradients are reduced (CP 2 here); the parameter gather as the recipe sets it.
  const auto overlapped = j.at("perf").at("breakdown").at("dp_comm_s").get<double>();
  const auto off =
      checked({"--recipe", "llama3_8b_pretrain_16gpu_h100_bf16_16k_config", "ddp.overlap_grad_reduce=False"});
  ASSERT_FALSE(off.is_null());
  EXPECT_EQ(off.at("layout").at("overlap_grad_reduce"), false);
  EXPECT_EQ(off.at("layout").at("overlap_param_gather"), true);
  EXPECT_GT(off.at("perf").at("breakdown").at("dp_comm_s").get<double>(), overlapped);
  EXPECT_GT(off.at("perf").at("step_time_s").get<double>(), j.at("perf").at("step_time_s").get<double>());
}

TEST(Check, ReadsNemo2RecipesThatCallOtherRecipes) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/";
  const auto checked = [&](const std::string& file) {
    const Result r = run({"check", "--cluster", "dgx-h100", "--json", dir + file});
    EXPECT_NE(r.code, 2) << file << ": " << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out);
  };
  const auto long_context = checked("llama3_8b_16k.py");
  ASSERT_FALSE(long_context.is_null());
  EXPECT_EQ(long_context.at("model"), "llama3.1-8b");
  const auto& l = long_context.at("layout");
  EXPECT_EQ(l.at("seq"), 16384);  // recipe.data = run.Config(MockDataModule, seq_length=16384, ...)
  EXPECT_EQ(l.at("tp"), 4);       // its own trainer(): llama3_8b.trainer(tensor_parallelism=4, ...)
  EXPECT_EQ(l.at("pp"), 2);
  EXPECT_EQ(l.at("cp"), 2);
  EXPECT_EQ(l.at("gpus"), 16);  // num_nodes=2 by default
  EXPECT_NE(long_context.at("notes").dump().find("llama3_8b.py"), std::string::npos);

  const auto moe = checked("qwen3_30b_a3b.py");
  ASSERT_FALSE(moe.is_null());
  EXPECT_EQ(moe.at("model"), "qwen3-30b-a3b");  // qwen3_model(version=NAME)'s branch
  const auto& m = moe.at("layout");
  EXPECT_EQ(m.at("tp"), 4);
  EXPECT_EQ(m.at("pp"), 2);
  EXPECT_EQ(m.at("ep"), 4);
  EXPECT_EQ(m.at("etp"), 1);             // qwen3_trainer's expert_tensor_parallel_size
  EXPECT_EQ(m.at("recompute"), "full");  // recipe.model.config.recompute_granularity = "full"
  EXPECT_EQ(m.at("sequence_parallel"), true);
  EXPECT_EQ(m.at("gbs"), 32);
  EXPECT_EQ(m.at("mbs"), 2);

  const auto nemotron = checked("nemotron4_340b.py");
  ASSERT_FALSE(nemotron.is_null());
  EXPECT_EQ(nemotron.at("model"), "nemotron-4-340b");
  const auto& n = nemotron.at("layout");
  EXPECT_EQ(n.at("tp"), 8);
  EXPECT_EQ(n.at("pp"), 12);
  EXPECT_EQ(n.at("vpp"), 8);
  EXPECT_EQ(n.at("cp"), 2);
  EXPECT_EQ(n.at("gbs"), 2304);
  EXPECT_EQ(n.at("gpus"), 6144);  // nemotron4_340b's num_nodes=768 by default

  // DeepSeek-V2-Lite: DeepSeekConfig overlaps the shared expert; DeepEPCallback turns the flex dispatcher on and the
  // overlap off where the GPU's compute capability is 8 or 9, changes nothing on a Blackwell, and is refused on AMD.
  const auto deepseek = checked("deepseek_v2_lite.py");
  ASSERT_FALSE(deepseek.is_null());
  EXPECT_EQ(deepseek.at("model"), "deepseek-v2-lite");
  EXPECT_EQ(deepseek.at("layout").at("ep"), 8);
  EXPECT_EQ(deepseek.at("layout").at("moe_token_dispatcher_type"), "flex");
  EXPECT_EQ(deepseek.at("layout").at("moe_shared_expert_overlap"), false);
  const Result blackwell = run({"check", "--cluster", "dgx-b200", "--json", dir + "deepseek_v2_lite.py"});
  ASSERT_NE(blackwell.code, 2) << blackwell.err;
  const auto b = nlohmann::json::parse(blackwell.out);
  EXPECT_EQ(b.at("layout").at("moe_token_dispatcher_type"), "alltoall");
  EXPECT_EQ(b.at("layout").at("moe_shared_expert_overlap"), true);
  const Result amd = run({"check", "--cluster", "mi300x-x8", dir + "deepseek_v2_lite.py"});
  EXPECT_EQ(amd.code, 2);
  EXPECT_NE(amd.err.find("DeepEP runs on NVIDIA GPUs"), std::string::npos) << amd.err;
  // DeepSeek-V3: selective recompute of latent attention's up projections and of the norms (model.config.
  // recompute_modules), as the recipe sets them.
  const auto v3 = checked("deepseek_v3.py");
  ASSERT_FALSE(v3.is_null());
  EXPECT_EQ(v3.at("model"), "deepseek-v3");
  EXPECT_EQ(v3.at("layout").at("recompute"), "selective");
  EXPECT_EQ(v3.at("layout").at("recompute_modules"), nlohmann::json({"layernorm", "mla_up_proj"}));
  EXPECT_EQ(v3.at("layout").at("mtp_num_layers"), 1);

  // GPTConfig175B is gpt3-175b's shape without its attention dropout: priced as NeMo builds it.
  std::ifstream in(dir + "llama3_8b.py");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // NeMo's FP8 precision plugins (recipes/precision/mixed_precision.py) as the performance scripts set them: delayed
  // scaling with FP8 weights, or current scaling with the first and last layers in BF16.
  for (const auto& [plugin, recipe, bf16_layers] :
       {std::tuple{"bf16_with_fp8_mixed", "delayed", 0},
        std::tuple{"bf16_with_fp8_current_scaling_mixed", "tensorwise", 1}}) {
    std::string fp8 = text;
    fp8.replace(fp8.find("plugins=bf16_mixed()"), 20, std::string("plugins=") + plugin + "()");
    fp8.replace(fp8.find("import bf16_mixed"), 17, std::string("import bf16_mixed, ") + plugin);
    const auto path = std::filesystem::temp_directory_path() / ("headroom_fp8_" + std::to_string(::getpid()) + ".py");
    std::ofstream(path) << fp8;
    const Result r = run({"check", "--cluster", "dgx-h100", "--json", path.string()});
    std::filesystem::remove(path);
    ASSERT_NE(r.code, 2) << r.err;
    const auto fl = nlohmann::json::parse(r.out).at("layout");
    EXPECT_EQ(fl.at("precision"), "fp8") << plugin;
    EXPECT_EQ(fl.at("fp8_recipe"), recipe) << plugin;
    EXPECT_EQ(fl.at("fp8_param_gather"), true) << plugin;
    EXPECT_EQ(fl.at("num_layers_at_start_in_bf16"), bf16_layers) << plugin;
    EXPECT_EQ(fl.at("num_layers_at_end_in_bf16"), bf16_layers) << plugin;
  }
  // NeMo-Run's override of a field of the precision plugin, set on the plugin as on the config it is.
  const Result plain = run({"check", "--cluster", "dgx-h100", "--json", dir + "llama3_8b.py"});
  const Result reduced = run(
      {"check", "--cluster", "dgx-h100", "--json", dir + "llama3_8b.py", "trainer.plugins.grad_reduce_in_fp32=False"});
  ASSERT_NE(reduced.code, 2) << reduced.err;
  EXPECT_EQ(nlohmann::json::parse(plain.out).at("layout").at("grad_reduce_in_bf16"), false);
  EXPECT_EQ(nlohmann::json::parse(reduced.out).at("layout").at("grad_reduce_in_bf16"), true);
  text.replace(text.find("run.Config(Llama3Config8B)"), 26, "run.Config(GPTConfig175B)");
  const auto gpt = std::filesystem::temp_directory_path() / ("headroom_gpt_" + std::to_string(::getpid()) + ".py");
  std::ofstream(gpt) << text;
  const Result g = run({"check", "--cluster", "dgx-h100", "--json", gpt.string()});
  std::filesystem::remove(gpt);
  ASSERT_NE(g.code, 2) << g.err;
  const auto gd = nlohmann::json::parse(g.out);
  EXPECT_EQ(gd.at("model"), "gpt3-175b");
  EXPECT_NE(gd.at("notes").dump().find("with attention dropout 0"), std::string::npos) << gd.at("notes");

  // Alone, the Qwen recipe's trainer is a call headroom cannot follow.
  const auto alone = std::filesystem::temp_directory_path() / ("headroom_qwen_" + std::to_string(::getpid()));
  std::filesystem::create_directories(alone);
  std::filesystem::copy_file(dir + "qwen3_30b_a3b.py", alone / "qwen3_30b_a3b.py");
  const Result r = run({"check", "--cluster", "dgx-h100", (alone / "qwen3_30b_a3b.py").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("the recipe's trainer is qwen3_trainer(...)"), std::string::npos) << r.err;
  std::filesystem::remove_all(alone);
}

// performance_mode=True is followed as NeMo runs it: pretrain_performance_optimizations adds the communication-overlap
// callback (TP overlap where TP >= 2 with SP, the interleaved schedule's P2P overlap) and reduces gradients in BF16
// (the precision plugin's grad_reduce_in_fp32 False); without it P2P overlap stays off, as Megatron-core leaves it.
TEST(Check, ReadsNemo2RecipesPerformanceMode) {
  const std::string recipe = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/llama3_70b.py";
  const auto layout = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"check", "--cluster", "dgx-h100", "--json", recipe, "num_nodes=4"};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_NE(r.code, 2) << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out);
  };
  const auto plain = layout({}), fast = layout({"performance_mode=True"});
  ASSERT_FALSE(plain.is_null());
  ASSERT_FALSE(fast.is_null());
  EXPECT_EQ(plain.at("layout").at("tp_comm_overlap"), false);
  EXPECT_EQ(plain.at("layout").at("overlap_p2p_comm"), false);
  EXPECT_EQ(plain.at("layout").at("grad_reduce_in_bf16"), false);
  EXPECT_EQ(fast.at("layout").at("tp_comm_overlap"), true);   // TP 4 with SP
  EXPECT_EQ(fast.at("layout").at("overlap_p2p_comm"), true);  // 5 virtual stages
  EXPECT_EQ(fast.at("layout").at("grad_reduce_in_bf16"), true);
  EXPECT_EQ(fast.at("layout").at("vpp"), plain.at("layout").at("vpp"));
  EXPECT_NE(fast.at("notes").dump().find("tp_comm_overlap_cfg"), std::string::npos);
  // At TP 1 the callback's TP overlap is off, as NeMo's callback turns it off.
  const Result eight = run({"check", "--cluster", "dgx-h100", "--json",
                            std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/llama3_8b.py",
                            "performance_mode=True"});
  ASSERT_NE(eight.code, 2) << eight.err;
  EXPECT_EQ(nlohmann::json::parse(eight.out).at("layout").at("tp_comm_overlap"), false);
}

// The faster layouts check proposes for a recipe are NeMo-Run overrides; given back, they are that layout exactly.
TEST(Check, Nemo2RecipeChangesAreOverridesThatRoundTrip) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/";
  for (const auto& [recipe, nodes] : {std::pair{"llama3_70b.py", "num_nodes=4"},
                                      {"mixtral_8x7b.py", "num_nodes=8"},
                                      {"qwen3_30b_a3b.py", "num_nodes=4"}}) {
    const std::vector<std::string> base = {"check", "--cluster", "dgx-h100", "--json", dir + recipe, nodes};
    const Result r = run(base);
    ASSERT_NE(r.code, 2) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_FALSE(doc.at("faster").empty()) << recipe;
    for (const auto& alt : doc.at("faster")) {
      std::vector<std::string> args = base;
      for (const auto& change : alt.at("change")) {
        const std::string c = change.get<std::string>();
        ASSERT_NE(c.find('='), std::string::npos) << c;  // path=value (was old)
        args.push_back(c.substr(0, c.find(" (was ")));
      }
      const Result again = run(args);
      ASSERT_NE(again.code, 2) << again.err;
      EXPECT_EQ(nlohmann::json::parse(again.out).at("layout"), alt.at("layout")) << recipe << alt.at("change");
    }
  }
}

// torchtitan main's config registry (Python functions, not TOML) is read as torchtitan's --config runs it: the
// function's Trainer.Config, the configs it starts from, and torchtitan's command-line overrides.
TEST(Check, ReadsTorchtitansConfigRegistryUnchanged) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) +
                           "/../tests/data/launch/torchtitan-registry/torchtitan/models/llama3/config_registry.py";
  const auto layout = [&](const std::vector<std::string>& extra, const std::string& gpus) {
    std::vector<std::string> args = {"check", "--cluster", "dgx-h100", "--gpus", gpus, "--json", "--", file};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_NE(r.code, 2) << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out);
  };
  const auto eight = layout({"--config", "llama3_8b"}, "8");
  ASSERT_FALSE(eight.is_null());
  EXPECT_EQ(eight.at("model"), "llama3.1-8b");
  EXPECT_EQ(eight.at("framework"), "torchtitan");
  const auto& l = eight.at("layout");
  EXPECT_EQ(l.at("tp"), 1);
  EXPECT_EQ(l.at("dp"), 8);
  EXPECT_EQ(l.at("seq"), 8192);
  EXPECT_EQ(l.at("mbs"), 1);  // num_tokens_per_microbatch_per_dp_rank 1 * 8192
  EXPECT_EQ(l.at("gbs"), 8);
  EXPECT_EQ(l.at("recompute"), "op");  // SelectiveAC: per op
  const std::string read = eight.at("flags_read").dump(), ignored = eight.at("flags_ignored").dump();
  EXPECT_NE(read.find("training.num_tokens_per_microbatch_per_dp_rank = 8192"), std::string::npos) << read;
  EXPECT_NE(ignored.find("validator = Validator.Config(...)"), std::string::npos) << ignored;
  EXPECT_NE(eight.at("notes").dump().find("block-causal"), std::string::npos);

  const auto seventy = layout({"--config", "llama3_70b"}, "64");
  ASSERT_FALSE(seventy.is_null());
  EXPECT_EQ(seventy.at("layout").at("tp"), 8);
  EXPECT_EQ(seventy.at("layout").at("mbs"), 8);  // 8 * 8192 tokens
  EXPECT_EQ(seventy.at("layout").at("gbs"), 64);
  EXPECT_EQ(seventy.at("layout").at("recompute"), "full");

  // Overrides as torchtitan's command line writes them, a subcommand for the checkpointing policy.
  const auto over = layout({"--module", "llama3", "--config=llama3_8b", "--parallelism.tensor_parallel_degree", "2",
                            "--parallelism.pipeline_parallel_degree=2", "--parallelism.num_pp_microbatches", "4",
                            "activation_checkpoint:full", "--compile.enable", "--compile.enable-async-tensor-parallel",
                            "--training.num_tokens_per_train_step", "131072"},
                           "8");
  ASSERT_FALSE(over.is_null());
  const auto& o = over.at("layout");
  EXPECT_EQ(o.at("tp"), 2);
  EXPECT_EQ(o.at("pp"), 2);
  EXPECT_EQ(o.at("dp"), 2);
  EXPECT_EQ(o.at("mbs"), 1);
  EXPECT_EQ(o.at("gbs"), 16);  // 131072 tokens of 8192
  EXPECT_EQ(o.at("recompute"), "full");
  EXPECT_EQ(o.at("compile"), true);
  EXPECT_EQ(o.at("tp_comm_overlap"), true);

  // A config that starts from another and sets its fields; the debug model is no shipped model, so it is priced as
  // the one --model names.
  const Result dbg = run({"check", "--cluster", "dgx-h100", "--gpus", "8", "--model", "llama3.1-8b", "--json", "--",
                          file, "--config", "llama3_debugmodel_varlen_attn"});
  ASSERT_NE(dbg.code, 2) << dbg.err;
  const auto d = nlohmann::json::parse(dbg.out);
  EXPECT_EQ(d.at("layout").at("seq"), 2048);
  EXPECT_EQ(d.at("layout").at("mbs"), 8);  // 8 * 2048 tokens
  EXPECT_NE(d.at("flags_ignored").dump().find("training.disable_cuda_graphs = True"), std::string::npos);
  EXPECT_NE(d.at("notes").dump().find("varlen"), std::string::npos);
  // A flavor that is a shipped model is priced as --model only where the two are one shape.
  const Result other = run(
      {"check", "--cluster", "dgx-h100", "--gpus", "8", "--model", "llama2-7b", "--", file, "--config", "llama3_8b"});
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("the job's model is llama3.1-8b (its flavor)"), std::string::npos) << other.err;
}

// torchtitan main's launch as its users write it: its run_train.sh (MODULE, CONFIG, NGPU and the arguments it passes
// on), or the torchrun line, whose --module names the registry under torchtitan's checkout.
TEST(Check, ReadsTorchtitansLaunchOfItsConfigRegistry) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/torchtitan-registry/";
  const Result script =
      run({"check", "--cluster", "dgx-h100", "--json", "--set", "CONFIG=llama3_70b", "--set", "NGPU=16", "--set",
           "1=--parallelism.tensor_parallel_degree", "--set", "2=4", dir + "run_train.sh"});
  ASSERT_NE(script.code, 2) << script.err;
  const Result file = run({"check", "--cluster", "dgx-h100", "--gpus", "16", "--json", "--",
                           dir + "torchtitan/models/llama3/config_registry.py", "--config", "llama3_70b",
                           "--parallelism.tensor_parallel_degree", "4"});
  ASSERT_NE(file.code, 2) << file.err;
  const auto a = nlohmann::json::parse(script.out), b = nlohmann::json::parse(file.out);
  EXPECT_EQ(a.at("layout"), b.at("layout"));
  EXPECT_EQ(a.at("layout").at("gpus"), 16);
  EXPECT_EQ(a.at("layout").at("tp"), 4);
  EXPECT_EQ(a.at("flags_read"), b.at("flags_read"));
  // Its default config is the debug model, no shipped model.
  const Result debug = run({"check", "--cluster", "dgx-h100", dir + "run_train.sh"});
  EXPECT_EQ(debug.code, 2);
  EXPECT_NE(debug.err.find("llama3-debugmodel"), std::string::npos) << debug.err;
  // The torchrun line outside torchtitan's checkout: where the registry was looked for.
  const Result away = run({"check", "--cluster", "dgx-h100", "--", "torchrun", "--nproc-per-node", "8", "-m",
                           "torchtitan.train", "--module", "llama3", "--config", "llama3_8b"});
  EXPECT_EQ(away.code, 2);
  EXPECT_NE(away.err.find("no config_registry.py at ./torchtitan/models/llama3/config_registry.py"), std::string::npos)
      << away.err;
}

// The faster layouts check proposes for a registry config are torchtitan main's overrides; given back, they are that
// layout exactly.
TEST(Check, TorchtitanRegistryChangesAreOverridesThatRoundTrip) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) +
                           "/../tests/data/launch/torchtitan-registry/torchtitan/models/llama3/config_registry.py";
  // As the config is, and with sequence parallelism off (which the suggestions turn back on).
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--parallelism.enable_sequence_parallel", "False"}}) {
    std::vector<std::string> base = {"check",  "--cluster", "dgx-h100", "--gpus",   "64",
                                     "--json", "--",        file,       "--config", "llama3_70b"};
    base.insert(base.end(), extra.begin(), extra.end());
    const Result r = run(base);
    ASSERT_NE(r.code, 2) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_FALSE(doc.at("faster").empty());
    for (const auto& alt : doc.at("faster")) {
      std::vector<std::string> args = base;
      for (const auto& change : alt.at("change")) {
        std::string c = change.get<std::string>();
        c.resize(std::min(c.size(), c.find(" (was ")));
        ASSERT_FALSE(c.starts_with("no ")) << c;
        if (const auto space = c.find(' '); space != std::string::npos) {
          args.push_back(c.substr(0, space));
          args.push_back(c.substr(space + 1));
        } else {
          args.push_back(c);
        }
      }
      const Result again = run(args);
      ASSERT_NE(again.code, 2) << again.err;
      EXPECT_EQ(nlohmann::json::parse(again.out).at("layout"), alt.at("layout")) << alt.at("change");
    }
  }
}

// What the registry reader does not follow is refused, naming it.
TEST(Check, TorchtitanRegistryRefusalsNameWhatIsNotRead) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) +
                           "/../tests/data/launch/torchtitan-registry/torchtitan/models/llama3/config_registry.py";
  const auto refused = [&](const std::vector<std::string>& extra, const std::string& named) {
    std::vector<std::string> args = {"check", "--cluster", "dgx-h100", "--gpus", "64", "--", file};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << named;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  };
  refused({}, "needs --config");
  refused({"--config", "llama3_nosuch"}, "no config function llama3_nosuch");
  refused({"--config", "llama3_405b"}, "recipe_name");  // torchao's rowwise float8, its default
  refused({"--config", "llama3_8b_mxfp8"}, "MXFP8LinearConverter");
  refused({"--config", "sft_debugmodel"}, "`def process_sample` in sft_debugmodel()");
  refused({"--config", "llama3_8b", "--frobnicate.experts", "3"}, "frobnicate.experts");
  refused({"--config", "llama3_8b", "activation_checkpoint:memory-budget"}, "a memory budget is not priced");
  refused({"--config", "llama3_8b", "--optimizer.implementation", "fused_opt_states_bf16"}, "BF16 Adam states");
  refused({"--config", "llama3_8b", "--training.max_context_length", "3000"}, "not a whole number of rows");
  refused({"--config", "llama3_8b", "--parallelism.tensor_parallel_degree", "3"}, "(a multiple of 3)");
}

// A line of one function the parser cannot read (an annotated nested function's call-like header, an operator it
// does not know) is refused where that function runs, naming the line; the file's other configs stay readable, as
// kimi_k2_7/config_registry.py's nested `def compute_shardings_for_layer(layer_id: int) -> dict[...]` needs.
TEST(Check, TorchtitanRegistryLineItCannotReadBlocksOnlyItsFunction) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) +
                           "/../tests/data/launch/torchtitan-registry/torchtitan/models/llama3/config_registry.py";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_registry_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "torchtitan/models/llama3");
  const std::string edited = (dir / "torchtitan/models/llama3/config_registry.py").string();
  std::ofstream(edited) << text
                        << "\n\ndef llama3_unreadable() -> Trainer.Config:\n"
                           "    def shardings_for_layer(\n        layer_id: int,\n    ) -> dict[str, int]:\n"
                           "        return {}\n"
                           "    return llama3_8b()\n";
  const Result other = run({"check", "--cluster", "dgx-h100", "--gpus", "64", "--", edited, "--config", "llama3_8b"});
  EXPECT_NE(other.code, 2) << other.err;
  const Result nested =
      run({"check", "--cluster", "dgx-h100", "--gpus", "64", "--", edited, "--config", "llama3_unreadable"});
  EXPECT_EQ(nested.code, 2);
  EXPECT_NE(nested.err.find("`def shardings_for_layer` in llama3_unreadable(): a statement headroom does not follow"),
            std::string::npos)
      << nested.err;
  std::ofstream(edited) << text
                        << "\n\ndef llama3_unreadable() -> Trainer.Config:\n"
                           "    shards = dict(layer: 1)\n"
                           "    return llama3_8b()\n";
  const Result line =
      run({"check", "--cluster", "dgx-h100", "--gpus", "64", "--", edited, "--config", "llama3_unreadable"});
  EXPECT_EQ(line.code, 2);
  EXPECT_NE(line.err.find("a line headroom cannot read"), std::string::npos) << line.err;
  std::filesystem::remove_all(dir);
}

// What the recipe reader does not follow is refused, naming it: a callback it does not read, an unknown argument or
// setting, a statement or condition it does not evaluate, a model config with no shipped model, a world the strategy
// does not divide.
TEST(Check, Nemo2RecipeRefusalsNameWhatIsNotRead) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/";
  const auto refused = [](const std::vector<std::string>& extra, const std::string& file, const std::string& named) {
    std::vector<std::string> args = {"check", "--cluster", "dgx-h100", file};
    args.insert(args.end(), extra.begin(), extra.end());
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << named;
    EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
  };
  refused({"frobnicate=3"}, dir + "llama3_8b.py", "frobnicate");
  refused({"trainer.strategy.frobnicate=3"}, dir + "llama3_8b.py", "trainer.strategy.frobnicate");
  refused({"trainer.plugins=fp16_mixed"}, dir + "llama3_8b.py", "trainer.plugins");
  refused({}, dir + "llama3_70b.py", "give num_nodes=N");
  refused({"--model", "llama2-70b"}, dir + "llama3_8b.py", "the recipe's model is llama3.1-8b");
  std::ifstream in(dir + "llama3_8b.py");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto edited = [&](const std::string& from, const std::string& to) {
    const auto path =
        std::filesystem::temp_directory_path() / ("headroom_recipe_" + std::to_string(::getpid()) + ".py");
    std::string t = text;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    std::ofstream(path) << t;
    return path.string();
  };
  // A statement that changes a config other than by setting its fields, and a condition of another form.
  const std::string clear = edited("\n    return trainer\n", "\n    trainer.callbacks.clear()\n    return trainer\n");
  refused({}, clear, "trainer.callbacks.clear(...) in trainer(): a statement headroom does not follow");
  std::filesystem::remove(clear);
  // A call given a config of the function's may change it: refused; one given nothing of it (a warning with a string)
  // cannot: passed over, and noted.
  const std::string reaching =
      edited("\n    return trainer\n", "\n    warn_about(trainer.strategy)\n    return trainer\n");
  refused({}, reaching, "warn_about(...) in trainer(): a statement headroom does not follow");
  std::filesystem::remove(reaching);
  const std::string warning =
      edited("\n    return trainer\n", "\n    warn_about(\"trainer\", stacklevel=2)\n    return trainer\n");
  const Result warned = run({"check", "--cluster", "dgx-h100", "--json", warning});
  std::filesystem::remove(warning);
  ASSERT_NE(warned.code, 2) << warned.err;
  EXPECT_NE(nlohmann::json::parse(warned.out).at("notes").dump().find("passed over warn_about(...) at "),
            std::string::npos)
      << warned.out;
  // A condition it cannot tell runs both ways; a setting one way changes is refused where it is read, naming the
  // condition.
  const std::string condition = edited("    if performance_mode:", "    if num_nodes > 2:");
  refused({}, condition,
          "recipe.optim.config.use_precision_aware_optimizer (set one way of `if num_nodes > 2` in pretrain_recipe(): "
          "a condition headroom cannot tell): expected True or False");
  std::filesystem::remove(condition);
  // A builtin's value other than isinstance's of a literal (callable, hasattr of a field not set, ...) is not an
  // object that is always true: its truth is unknown.
  const std::string builtin = edited("    if performance_mode:", "    if callable(num_nodes):");
  refused({}, builtin, "`if callable(num_nodes)` in pretrain_recipe(): a condition headroom cannot tell");
  std::filesystem::remove(builtin);
  const std::string callback = edited("\n    return trainer\n",
                                      "\n    trainer.callbacks.append(run.Config(MegatronTokenDropCallback))\n"
                                      "    return trainer\n");
  refused({}, callback, "the callback MegatronTokenDropCallback is not read");
  std::filesystem::remove(callback);
  // Names unpacked from a value that is not a tuple of as many are refused.
  const std::string unpacked = edited("\n    return trainer\n", "\n    a, b = 1, 2, 3\n    return trainer\n");
  refused({}, unpacked, "2 names unpacked from (...) in trainer()");
  std::filesystem::remove(unpacked);
  const std::string raise = edited("\n    return trainer\n", "\n    raise ValueError(\"no trainer\")\n");
  refused({}, raise, "`raise` ValueError(\"no trainer\") in trainer()");
  std::filesystem::remove(raise);
  const std::string other = edited("run.Config(Llama3Config8B)", "run.Config(Gemma3Config1B)");
  refused({}, other, "Gemma3Config1B");
  // Given --model, a config class of no shipped model's shape is priced as that model, saying so.
  const Result given = run({"check", "--cluster", "dgx-h100", "--json", "--model", "llama3.2-1b", other});
  ASSERT_NE(given.code, 2) << given.err;
  EXPECT_EQ(nlohmann::json::parse(given.out).at("model"), "llama3.2-1b");
  EXPECT_NE(given.out.find("priced as --model llama3.2-1b"), std::string::npos);
  std::filesystem::remove(other);
}

// Python as recipes write it, run as Python runs it: a chained assignment sets every target; a helper given a config
// sets fields on the caller's (Python passes objects) unless it binds its parameter to another value first;
// isinstance of a literal is told; a condition that cannot be told runs both ways, and what both ways set alike is
// known.
TEST(Check, RecipesRunAsPythonRunsThem) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-recipes/llama3_8b.py";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The recipe's layout with each (from, to) edit made.
  const auto layout = [&](const std::vector<std::pair<std::string, std::string>>& edits) {
    std::string t = text;
    for (const auto& [from, to] : edits) {
      const auto at = t.find(from);
      EXPECT_NE(at, std::string::npos) << from;
      if (at != std::string::npos) t.replace(at, from.size(), to);
    }
    const auto path =
        std::filesystem::temp_directory_path() / ("headroom_python_" + std::to_string(::getpid()) + ".py");
    std::ofstream(path) << t;
    const Result r = run({"check", "--cluster", "dgx-h100", "--json", path.string()});
    std::filesystem::remove(path);
    EXPECT_NE(r.code, 2) << edits.back().second << ": " << r.err;
    return r.code == 2 ? nlohmann::json() : nlohmann::json::parse(r.out).at("layout");
  };
  const std::string end = "\n    return trainer\n";
  const auto before_return = [&](const std::string& lines) { return std::pair{end, "\n" + lines + end}; };
  const auto base = layout({});
  ASSERT_FALSE(base.is_null());
  EXPECT_EQ(base.at("tp"), 1);
  EXPECT_EQ(base.at("pp"), 1);
  const auto chained =
      layout({before_return("    a = trainer.strategy.tensor_model_parallel_size = 2\n"
                            "    trainer.strategy.pipeline_model_parallel_size = a")});
  EXPECT_EQ(chained.at("tp"), 2);
  EXPECT_EQ(chained.at("pp"), 2);
  // A module function called as a statement, and one that binds its parameter anew (Python: the caller's is kept).
  const std::pair<std::string, std::string> helpers = {
      "\n\ndef trainer(",
      "\n\ndef _tune(trainer, tp=1):\n    trainer.strategy.tensor_model_parallel_size = tp\n\n\n"
      "def _rebind(trainer):\n    trainer = run.Config(nl.Trainer)\n    trainer.strategy = None\n\n\n"
      "def trainer("};
  EXPECT_EQ(layout({helpers}), base);
  EXPECT_EQ(layout({helpers, before_return("    _tune(trainer, tp=4)")}).at("tp"), 4);
  EXPECT_EQ(layout({helpers, before_return("    _rebind(trainer)")}), base);
  // isinstance of a literal is told (num_nodes is 1, not a string: performance_mode's way is not taken).
  EXPECT_EQ(layout({{"    if performance_mode:", "    if isinstance(num_nodes, str):"}}), base);
  // Both ways of an untold condition set the same value: known.
  const auto alike =
      layout({before_return("    if callable(num_nodes):\n"
                            "        trainer.strategy.tensor_model_parallel_size = 2\n"
                            "    else:\n"
                            "        trainer.strategy.tensor_model_parallel_size = 2")});
  EXPECT_EQ(alike.at("tp"), 2);
  // Each condition it cannot tell copies what the function holds twice: a module of many over a large config stops
  // at the bound on values evaluated, naming the condition.
  std::string hostile = "def pretrain_recipe(num_nodes: int = 1):\n    cfg = run.Config(A";
  for (int i = 0; i < 3000; ++i) hostile += ", f" + std::to_string(i) + "=" + std::to_string(i);
  hostile += ")\n";
  for (int i = 0; i < 200; ++i)
    hostile += "    if num_nodes < " + std::to_string(i) + ":\n        cfg.f" + std::to_string(i) + " = 2\n";
  hostile += "    return cfg\n";
  const auto path = std::filesystem::temp_directory_path() / ("headroom_hostile_" + std::to_string(::getpid()) + ".py");
  std::ofstream(path) << hostile;
  const Result bounded = run({"check", "--cluster", "dgx-h100", path.string()});
  std::filesystem::remove(path);
  EXPECT_EQ(bounded.code, 2);
  EXPECT_NE(bounded.err.find("a condition headroom cannot tell, and running both ways takes more than 10^5 values"),
            std::string::npos)
      << bounded.err;
}

TEST(Check, ReadsNemosTrainingConfigsUnchanged) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  // The file's leaf keys, counted by its lines: "key: value", or "key:" over a block sequence ("- item" lines).
  const auto leaf_keys = [](const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
      if (const auto comment = line.find(" #"); comment != std::string::npos) line.resize(comment);
      const auto first = line.find_first_not_of(' ');
      if (first != std::string::npos && line[first] != '#') lines.push_back(line.substr(first));
    }
    std::size_t n = 0;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      const auto colon = l.find(':');
      if (l[0] == '-' || colon == std::string::npos) continue;
      const bool value = l.find_first_not_of(' ', colon + 1) != std::string::npos;
      if (value || (i + 1 < lines.size() && lines[i + 1][0] == '-')) ++n;
    }
    return n;
  };
  for (const auto& [file, model] :
       std::vector<std::pair<std::string, std::string>>{{"llama3_1_8b.yaml", "llama3.1-8b"},
                                                        {"llama2_70b.yaml", "llama2-70b"},
                                                        {"175b.yaml", "gpt3-175b"},
                                                        {"mixtral_8x7b.yaml", "mixtral-8x7b"},
                                                        {"mlperf-24n.yaml", "gpt3-175b"}}) {
    const std::size_t keys = leaf_keys(dir + file);
    const Result r = run({"check", "--cluster", "dgx-h100", "--model", model, "--json", dir + file});
    ASSERT_NE(r.code, 2) << file << ": " << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc.at("framework"), "megatron");
    EXPECT_EQ(doc.at("flags_read").size() + doc.at("flags_ignored").size(), keys) << file;
    const std::string listed = doc.at("flags_read").dump() + doc.at("flags_ignored").dump();
    for (const char* key : {"\"trainer.num_nodes: ", "\"model.tensor_model_parallel_size: ", "\"model.optim.name: ",
                            "\"exp_manager.name: ", "\"model.data."})
      EXPECT_NE(listed.find(key), std::string::npos) << file << ": " << key;
    // The Megatron-LM line of the note, launched on the config's nodes, is the same job.
    const std::string prefix = "read as the Megatron-LM arguments NeMo hands to Megatron-core: ";
    const std::string note = doc.at("notes").at(0).get<std::string>();
    ASSERT_EQ(note.rfind(prefix, 0), 0u) << note;
    std::vector<std::string> line = {"check",
                                     "--cluster",
                                     "dgx-h100",
                                     "--model",
                                     model,
                                     "--json",
                                     "--",
                                     "torchrun",
                                     "--nproc-per-node",
                                     "8",
                                     "--nnodes",
                                     std::to_string(doc.at("layout").at("gpus").get<std::int64_t>() / 8),
                                     "pretrain_gpt.py"};
    for (std::size_t at = prefix.size(); at < note.size();) {
      const std::size_t end = std::min(note.find(' ', at), note.size());
      line.push_back(note.substr(at, end - at));
      at = end + 1;
    }
    const Result m = run(line);
    ASSERT_EQ(m.code, r.code) << m.err;
    const auto megatron = nlohmann::json::parse(m.out);
    EXPECT_EQ(doc.at("layout"), megatron.at("layout")) << file;
    EXPECT_EQ(doc.at("memory"), megatron.at("memory")) << file;
    EXPECT_DOUBLE_EQ(doc.at("perf").at("step_time_s").get<double>(),
                     megatron.at("perf").at("step_time_s").get<double>());
    // Faster layouts are given in the config's keys.
    for (const auto& alt : doc.at("faster"))
      for (const auto& change : alt.at("change")) EXPECT_EQ(change.get<std::string>().rfind("model.", 0), 0u) << change;
  }
  // Llama 2 70B as the launcher sets it: TP 4 with sequence parallelism and userbuffers, 4 stages of 5 virtual ones,
  // Megatron-core's distributed optimizer, on 128 nodes.
  const Result r = run({"check", "--cluster", "dgx-h100", "--model", "llama2-70b", "--json", dir + "llama2_70b.yaml"});
  const Result e = run({"estimate", "--cluster", "dgx-h100", "--model", "llama2-70b", "--gpus", "1024", "--tp", "4",
                        "--pp", "4", "--vpp", "5", "--seq", "4096", "--gbs", "2048", "--tp-comm-overlap", "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto doc = nlohmann::json::parse(r.out), est = nlohmann::json::parse(e.out);
  EXPECT_EQ(doc.at("layout"), est.at("layout"));
  EXPECT_DOUBLE_EQ(doc.at("perf").at("step_time_s").get<double>(), est.at("perf").at("step_time_s").get<double>());
}

// A NeMo-Framework-Launcher script runs main.py on a config (training=gpt3/175b) with Hydra overrides: check takes the
// script's training.* overrides after that config, as main.py applies them, and prices the job they make.
TEST(Check, ReadsTheHydraOverridesOfNemosLauncherScripts) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  std::vector<std::string> overrides;  // the script's lines "training.x=y \\" and "+training.x=y \\"
  std::ifstream script(dir + "175b_bf16_16node.sh");
  for (std::string line; std::getline(script, line);)
    if (line.starts_with("training.") || line.starts_with("+training."))
      overrides.push_back(line.substr(0, line.find(" \\")));
  ASSERT_EQ(overrides.size(), 9u);
  std::vector<std::string> args = {"check",     "--cluster", "dgx-h100",       "--model",
                                   "gpt3-175b", "--json",    dir + "175b.yaml"};
  args.insert(args.end(), overrides.begin(), overrides.end());
  const Result r = run(args);
  ASSERT_NE(r.code, 2) << r.err;
  const auto layout = nlohmann::json::parse(r.out).at("layout");
  // Its last override, grad_sync_dtype bf16 under Megatron-core's optimizer, is NeMo's grad_reduce_in_fp32 false.
  EXPECT_EQ(layout.at("grad_reduce_in_bf16"), true);
  EXPECT_EQ(layout.at("sharding").at("optimizer"), "G");
  EXPECT_EQ(layout.at("gpus"), 128);  // trainer.num_nodes=16 of 8 devices
  EXPECT_EQ(layout.at("tp"), 4);
  EXPECT_EQ(layout.at("pp"), 8);
  EXPECT_EQ(layout.at("vpp"), 12);
  EXPECT_EQ(layout.at("gbs"), 256);
  EXPECT_EQ(layout.at("mbs"), 1);
  // Hydra's rules: a key the config lacks needs +, one it has takes no +; ~ deletes; the launcher's own keys are not
  // the training config's.
  for (const auto& [override, says] : std::vector<std::pair<std::string, std::string>>{
           {"training.model.frobnicate=1", "the config has no model.frobnicate (Hydra refuses to change it"},
           {"+training.model.fp8=true", "the config already has model.fp8"},
           {"~training.model.frobnicate", "the config has no model.frobnicate to delete"},
           {"training=gpt3/175b", "is NeMo-Framework-Launcher's, not the training config's"},
           {"stages=[training]", "is NeMo-Framework-Launcher's"}}) {
    const Result bad = run({"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", dir + "175b.yaml", override});
    EXPECT_EQ(bad.code, 2) << override;
    EXPECT_NE(bad.err.find(says), std::string::npos) << override << ": " << bad.err;
  }
  const Result as_script = run({"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", dir + "175b_bf16_16node.sh"});
  EXPECT_EQ(as_script.code, 2);
  EXPECT_NE(as_script.err.find("give the training config its training= names"), std::string::npos) << as_script.err;
  const Result fp8 = run({"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", "--json", dir + "175b.yaml",
                          "training.model.fp8=True", "++model.fp8_hybrid=true"});
  ASSERT_NE(fp8.code, 2) << fp8.err;
  EXPECT_EQ(nlohmann::json::parse(fp8.out).at("layout").at("precision"), "fp8");
}

// What a NeMo config sets that headroom does not price, or cannot read, is refused naming the key; --model must be the
// config's model.
TEST(Check, RefusesNemoSettingsItDoesNotPrice) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  const Result gqa = run({"check", "--cluster", "dgx-h100", "--model", "llama3.1-405b", dir + "llama3_1_405b.yaml"});
  EXPECT_EQ(gqa.code, 2);
  EXPECT_NE(gqa.err.find("has KV heads 8, the config 16"), std::string::npos) << gqa.err;
  const Result no_model = run({"check", "--cluster", "dgx-h100", dir + "llama2_70b.yaml"});  // a SentencePiece path
  EXPECT_EQ(no_model.code, 2);
  EXPECT_NE(no_model.err.find("names its tokenizer"), std::string::npos) << no_model.err;
  std::ifstream in(dir + "llama3_1_8b.yaml");
  const std::string base((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    const auto at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? t : t.replace(at, from.size(), to);
  };
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {replaced("  mcore_gpt: true", "  mcore_gpt: true\n  fsdp: true"), "model.fsdp: true"},
           {replaced("  mcore_gpt: true", "  mcore_gpt: true\n  frobnicate: 1"), "model.frobnicate is a key"},
           {replaced("activations_checkpoint_granularity: null", "activations_checkpoint_granularity: full")
                .replace(base.find("activations_checkpoint_method: null"), 35, "activations_checkpoint_method: block"),
            "model.activations_checkpoint_num_layers: null"},
           {replaced("precision: bf16", "precision: 16-mixed"), "trainer.precision: 16-mixed"},
           {replaced("fp8: False", "fp8: True"), "give exactly one of fp8_e4m3 and fp8_hybrid"},
           {replaced("  num_layers: 32", "  num_layers: ${.hidden_layers}"), "model.num_layers: ${.hidden_layers}"},
           {replaced("  num_layers: 32", "  num_layers: *layers"), "a YAML alias"},
           {replaced("  num_layers: 32", "  num_layers: 32\n  num_layers: 33"), "model.num_layers is given twice"},
           {replaced("  num_layers: 32", "  num_layers: [32"), "not YAML"},
           {base + "---\na: 1\n", "more than one YAML document"},
           {replaced("name: mcore_distributed_optim", "name: sgd"), "model.optim.name: sgd"}}) {
    const auto file =
        std::filesystem::temp_directory_path() / ("headroom_nemo_" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(file) << text;
    const Result r = run({"check", "--cluster", "dgx-h100", "--model", "llama3.1-8b", file.string()});
    std::filesystem::remove(file);
    EXPECT_EQ(r.code, 2) << says;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty());
  }
}

// pretrain_gpt.py's default tokenizer is GPT-2's BPE (args_defaults), built from --vocab-file: its 50,257 tokens make a
// command's model whole without --vocab-size. Without the vocabulary file, or with another tokenizer, it is not; NeMo's
// configs that name Megatron's GPT2BPETokenizer are whole the same way.
TEST(Check, KnowsTheGpt2TokenizersVocabulary) {
  const std::vector<std::string> job = {"check",
                                        "--cluster",
                                        "dgx-h100",
                                        "--json",
                                        "--",
                                        "torchrun",
                                        "--nproc-per-node",
                                        "8",
                                        "pretrain_gpt.py",
                                        "--num-layers",
                                        "24",
                                        "--hidden-size",
                                        "2048",
                                        "--num-attention-heads",
                                        "16",
                                        "--seq-length",
                                        "2048",
                                        "--micro-batch-size",
                                        "4",
                                        "--bf16"};
  const auto with = [&](std::initializer_list<std::string> more) {
    std::vector<std::string> v = job;
    v.insert(v.end(), more);
    return run(v);
  };
  const Result sized = with({"--vocab-size", "50257"});
  ASSERT_NE(sized.code, 2) << sized.err;
  for (const Result& r : {with({"--vocab-file", "gpt2-vocab.json", "--merge-file", "gpt2-merges.txt"}),
                          with({"--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "gpt2-vocab.json"})}) {
    ASSERT_NE(r.code, 2) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("memory"), nlohmann::json::parse(sized.out).at("memory"));
  }
  for (const Result& r : {run(job), with({"--tokenizer-type", "HuggingFaceTokenizer", "--vocab-file", "v.json"})}) {
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("no --vocab-size"), std::string::npos) << r.err;
  }
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  const Result n = run({"check", "--cluster", "dgx-h100", "--json", dir + "175b.yaml"});
  ASSERT_NE(n.code, 2) << n.err;
  EXPECT_NE(nlohmann::json::parse(n.out).at("notes").at(0).get<std::string>().find("--vocab-size 50257"),
            std::string::npos);
}

// A Hugging Face tokenizer named by a repository whose tokenizer fills its config's vocabulary makes the model whole:
// NeMo's Llama 3.1 and Mixtral configs, and a Megatron-LM command's --tokenizer-model, price as with --model.
TEST(Check, KnowsHuggingFaceTokenizersVocabularies) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  for (const auto& [file, model] : std::vector<std::pair<std::string, std::string>>{
           {"llama3_1_8b.yaml", "llama3.1-8b"}, {"mixtral_8x7b.yaml", "mixtral-8x7b"}}) {
    const Result alone = run({"check", "--cluster", "dgx-h100", "--json", dir + file});
    const Result named = run({"check", "--cluster", "dgx-h100", "--json", "--model", model, dir + file});
    ASSERT_NE(alone.code, 2) << file << ": " << alone.err;
    ASSERT_NE(named.code, 2) << file << ": " << named.err;
    const auto a = nlohmann::json::parse(alone.out), b = nlohmann::json::parse(named.out);
    EXPECT_EQ(a.at("memory"), b.at("memory")) << file;
    EXPECT_EQ(a.at("perf"), b.at("perf")) << file;
  }
  // A config that brings its own vocabulary file is not the repository's tokenizer.
  const Result own = run({"check", "--cluster", "dgx-h100", dir + "llama3_1_8b.yaml",
                          "+training.model.tokenizer.vocab_file=/data/vocab.json"});
  EXPECT_EQ(own.code, 2);
  EXPECT_NE(own.err.find("names its tokenizer"), std::string::npos) << own.err;
  const auto with = [&](const std::vector<std::string>& tokenizer) {
    std::vector<std::string> flags = {"--micro-batch-size", "1", "--tokenizer-type", "HuggingFaceTokenizer"};
    flags.insert(flags.end(), tokenizer.begin(), tokenizer.end());
    return run(check({"--json"}, llama8b_untokenized(flags)));
  };
  const Result sized = with({"--tokenizer-model", "/models/llama3-tokenizer", "--vocab-size", "128256"});
  const Result repo = with({"--tokenizer-model", "meta-llama/Meta-Llama-3-8B"});
  ASSERT_NE(sized.code, 2) << sized.err;
  ASSERT_NE(repo.code, 2) << repo.err;
  EXPECT_EQ(nlohmann::json::parse(repo.out).at("memory"), nlohmann::json::parse(sized.out).at("memory"));
  const Result path = with({"--tokenizer-model", "/models/llama3-tokenizer"});
  EXPECT_EQ(path.code, 2);
  EXPECT_NE(path.err.find("no --vocab-size"), std::string::npos) << path.err;
}

// A SentencePiece model or a local Hugging Face tokenizer the launch names is counted when the file is on this
// machine (tests/data/tokenizers: 300 pieces; 201 tokens), as if the command gave that --vocab-size; a path that is
// not here leaves the model to --model, and a file that is no such tokenizer is refused naming it.
TEST(Check, CountsTheTokenizerFileItNames) {
  const std::string tokenizers = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/tokenizers/";
  const auto with = [](const std::vector<std::string>& tokenizer) {
    std::vector<std::string> flags = {"--micro-batch-size", "1"};
    flags.insert(flags.end(), tokenizer.begin(), tokenizer.end());
    return run(check({"--json"}, llama8b_untokenized(flags)));
  };
  for (const auto& [type, file, size] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"Llama2Tokenizer", "sentencepiece-bpe-300.model", "300"},
           {"GPTSentencePieceTokenizer", "sentencepiece-bpe-300.model", "300"},
           {"HuggingFaceTokenizer", "hf-bpe-201", "201"}}) {
    const Result counted = with({"--tokenizer-type", type, "--tokenizer-model", tokenizers + file});
    const Result sized = with({"--tokenizer-type", "NullTokenizer", "--vocab-size", size});
    ASSERT_NE(counted.code, 2) << type << ": " << counted.err;
    ASSERT_NE(sized.code, 2) << sized.err;
    const auto doc = nlohmann::json::parse(counted.out);
    EXPECT_EQ(doc.at("memory"), nlohmann::json::parse(sized.out).at("memory")) << type;
    EXPECT_NE(doc.at("notes").dump().find(size + " tokens, read from the file"), std::string::npos) << doc.at("notes");
  }
  const Result absent = with({"--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", "/data/tokenizer.model"});
  EXPECT_EQ(absent.code, 2);
  EXPECT_NE(absent.err.find("no tokenizer file it names is on this machine"), std::string::npos) << absent.err;
  const Result wrong = with({"--tokenizer-type", "Llama2Tokenizer", "--tokenizer-model", tokenizers + "README.md"});
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.err.find("README.md is not a SentencePiece model"), std::string::npos) << wrong.err;
  // NeMo's Llama 2 config names its SentencePiece model under ${data_dir}; pointed at one that is here, it is counted.
  const std::string nemo = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/llama2_70b.yaml";
  const Result unresolved = run({"check", "--cluster", "dgx-h100", "--json", nemo});
  EXPECT_EQ(unresolved.code, 2);
  EXPECT_NE(unresolved.err.find("names its tokenizer"), std::string::npos) << unresolved.err;
  const Result here = run({"check", "--cluster", "dgx-h100", "--json", nemo,
                           "training.model.tokenizer.model=" + tokenizers + "sentencepiece-bpe-300.model"});
  ASSERT_NE(here.code, 2) << here.err;
  EXPECT_NE(nlohmann::json::parse(here.out).at("notes").at(0).get<std::string>().find("--vocab-size 300"),
            std::string::npos);
}

// The MLPerf config's switches headroom does not price are refused when on, naming the key (Hydra overrides of the
// unchanged file); an optimizer dtype Megatron-core's optimizer is never handed is listed as ignored.
TEST(Check, RefusesTheMlperfSwitchesItDoesNotPrice) {
  const std::string file = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/mlperf-24n.yaml";
  for (const auto& [override, says] : std::vector<std::pair<std::string, std::string>>{
           {"training.model.cpu_offloading=True", "model.cpu_offloading: true"},
           {"training.model.enable_cuda_graph=True", "model.enable_cuda_graph: true"},
           {"training.model.name=megatron_falcon_gpt", "model.name: megatron_falcon_gpt"},
           {"training.model.optim.nccl_ub=True", "model.optim.nccl_ub: true"},
           {"training.model.use_tp_pp_dp_mapping=True", "model.use_tp_pp_dp_mapping: true"},
           {"training.model.tp_comm_overlap_rs=False", "model.tp_comm_overlap_rs: false"},
           {"training.model.nccl_communicator_config_path=/x.yaml", "model.nccl_communicator_config_path: /x.yaml"},
           {"+training.env_vars.NVTE_FUSED_ATTN=0", "env_vars.NVTE_FUSED_ATTN: 0"}}) {
    const Result r = run({"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", file, override});
    EXPECT_EQ(r.code, 2) << override;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  }
  const Result apex = run({"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", file,
                           "training.model.optim.name=distributed_fused_adam", "+training.model.optim.dtype=bf16"});
  EXPECT_EQ(apex.code, 2);
  EXPECT_NE(apex.err.find("model.optim.dtype: bf16"), std::string::npos) << apex.err;
  const Result mcore = run(
      {"check", "--cluster", "dgx-h100", "--model", "gpt3-175b", "--json", file, "+training.model.optim.dtype=bf16"});
  ASSERT_NE(mcore.code, 2) << mcore.err;
  const auto doc = nlohmann::json::parse(mcore.out);
  EXPECT_NE(doc.at("flags_ignored").dump().find("model.optim.dtype: bf16"), std::string::npos);
  EXPECT_EQ(doc.at("flags_read").dump().find("model.optim.dtype"), std::string::npos);
}

// NeMo 1.x's Apex distributed Adam: sharded as Megatron-core's distributed optimizer, the FP32 master weight kept as
// the 16-bit remainder of the BF16 weight (the precision-aware optimizer), gradients reduced in grad_sync_dtype. Adam
// without sharding has no reduction dtype to set.
TEST(Check, ReadsNemosApexDistributedAdam) {
  const std::string dir = std::string(HEADROOM_TEST_DATA_DIR) + "/../tests/data/launch/nemo-launcher/";
  std::ifstream in(dir + "llama3_1_8b.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.replace(text.find("name: mcore_distributed_optim"), 29,
               "name: distributed_fused_adam\n    grad_sync_dtype: bf16");
  const auto file = std::filesystem::temp_directory_path() / ("headroom_apex_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(file) << text;
  const Result r = run({"check", "--cluster", "dgx-h100", "--model", "llama3.1-8b", "--json", file.string()});
  std::filesystem::remove(file);
  ASSERT_NE(r.code, 2) << r.err;
  const auto layout = nlohmann::json::parse(r.out).at("layout");
  EXPECT_EQ(layout.at("use_precision_aware_optimizer"), true);
  EXPECT_EQ(layout.at("grad_reduce_in_bf16"), true);
  EXPECT_EQ(layout.at("sharding").at("optimizer"), "G");
  const Result adam = run({"check", "--cluster", "dgx-h100", "--model", "llama3.1-8b", dir + "llama3_1_8b.yaml",
                           "training.model.optim.name=fused_adam", "+training.model.optim.grad_sync_dtype=bf16"});
  EXPECT_EQ(adam.code, 2);
  EXPECT_NE(adam.err.find("applies to the distributed optimizers only"), std::string::npos) << adam.err;
}

std::vector<std::string> words_of(const std::string& script) {
  return calibrate::launch_script_command(script, "pretrain_gpt.py", "test.sh");
}

TEST(LaunchScript, FollowsAssignmentsArraysAndStringTests) {
  EXPECT_EQ(
      words_of("N=2\nA=(--tp $N # comment\n  \"--x y\")\nA+=(--z)\n"
               "if [[ \"$N\" == 2 ]] && [ -n \"$N\" ]; then B=(--two); elif [ -z \"$N\" ]; then B=(--none); else B=();"
               " fi\ncd /x && torchrun --nproc_per_node $((N*4)) pretrain_gpt.py ${A[@]} \"${B[@]}\" "
               "--p ${P:-7} > log 2>&1\n"),
      (std::vector<std::string>{"torchrun", "--nproc_per_node", "8", "pretrain_gpt.py", "--tp", "2", "--x", "y", "--z",
                                "--two", "--p", "7"}));
  EXPECT_EQ(words_of("A=(x y)\npython pretrain_gpt.py ${A[1]} ${A} ${A[5]}\n"),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "y", "x"}));
  // A value the script does not set reaches the command named, not guessed.
  EXPECT_EQ(words_of("python pretrain_gpt.py --save $1\n").back(), "${1}(not-set-by-the-script)");
}

// A value the script leaves to its caller, given with --set; a { } group run after || is a block of unknown outcome.
TEST(LaunchScript, TakesTheCallersValuesAndFollowsGroups) {
  const std::string script =
      "if [ -n \"$KEY\" ]; then A=(--k); fi\nmkdir -p x || {\n  B=1\n}\n"
      "python pretrain_gpt.py ${A[@]} --tp $1\n";
  EXPECT_THROW((void)words_of(script), Error);  // $A hangs on $KEY, which the script does not set
  EXPECT_EQ(calibrate::launch_script_command(script, "pretrain_gpt.py", "t.sh", {{"KEY", "x"}, {"1", "4"}}),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "--k", "--tp", "4"}));
  try {
    (void)words_of(script + "python pretrain_gpt.py $B\n");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$A is set in a block whose test"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)calibrate::launch_script_command("mkdir -p x || {\n  B=1\n}\npython pretrain_gpt.py --tp $B\n",
                                                      "pretrain_gpt.py", "t.sh"),
               Error);  // B is set only if mkdir fails
  const Result r = run({"check", "--cluster", "dgx-h100", "--set", "not a name=1", "--", "python", "pretrain_gpt.py"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--set"), std::string::npos) << r.err;
}

// Integer tests, and the files a script writes with here-documents (expanded unless the delimiter is quoted).
TEST(LaunchScript, FollowsIntegerTestsAndHereDocuments) {
  const std::string script =
      "N=2\nCFG=./c.json\nif [ $N -eq 2 ] && [ $N -lt 3 ]; then A=(--two); fi\n"
      "cat <<EOT > $CFG\n{\"n\": $N, \"s\": \"x y\"}\nEOT\ncat > raw.txt <<'END'\n$N\nEND\n"
      "python pretrain_gpt.py ${A[@]} --deepspeed_config $CFG\n";
  std::map<std::string, std::string> files;
  EXPECT_EQ(calibrate::launch_script_command(script, "pretrain_gpt.py", "t.sh", {}, &files),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "--two", "--deepspeed_config", "./c.json"}));
  EXPECT_EQ(files["./c.json"], "{\"n\": 2, \"s\": \"x y\"}\n");
  EXPECT_EQ(files["raw.txt"], "$N\n");
  // Unquoted, a backslash-newline joins the lines (`srun \` over several, as SLURM scripts write), where an escaped
  // backslash ends its line.
  std::map<std::string, std::string> joined;
  (void)calibrate::launch_script_command(
      "N=2\ncat <<EOT > run.sh\nsrun \\\n  python x.py $N\necho a \\\\\nEOT\npython pretrain_gpt.py\n",
      "pretrain_gpt.py", "t.sh", {}, &joined);
  EXPECT_EQ(joined["run.sh"], "srun   python x.py 2\necho a \\\n");
  EXPECT_THROW((void)words_of("cat <<EOT > x\nno end\npython pretrain_gpt.py\n"), Error);
  // Not integers: the machine's to answer (bash would fail the test), so the block's values are unknown.
  EXPECT_THROW((void)words_of("if [ a -eq 1 ]; then T=1; fi\npython pretrain_gpt.py $T\n"), Error);
}

// What a script runs as a script: sbatch's here-document (SLURM's batch script on its standard input) and `bash -c
// "<commands>"` under srun, read as the commands that run there; a string that runs itself stops at 16.
TEST(LaunchScript, FollowsSbatchHereDocumentsAndBashDashC) {
  const std::string script =
      "ARGS=(--num-layers 2)\nCMD=\"\ncd /x;\npython pretrain_gpt.py ${ARGS[@]}\"\nsbatch <<EOF\n#!/bin/bash\n"
      "#SBATCH --nodes=2\nsrun \\\n  --mpi=pmix \\\n  bash -x -c \"${CMD}\" 2>&1 | tee "
      "log/\\${SLURM_JOB_ID}.log\nEOF\n";
  EXPECT_EQ(calibrate::launch_script_command(script, "pretrain_gpt.py", "t.sh", {}, nullptr),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "--num-layers", "2"}));
  EXPECT_EQ(calibrate::launch_script_command("srun bash -lxc 'python pretrain_gpt.py --num-layers 4'\n",
                                             "pretrain_gpt.py", "t.sh", {}, nullptr),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "--num-layers", "4"}));
  try {
    (void)calibrate::launch_script_command("C='bash -c \"$C\" # pretrain_gpt.py'\nbash -c \"$C\"\n", "pretrain_gpt.py",
                                           "t.sh", {}, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than 16 scripts run from the script"), std::string::npos) << e.what();
  }
}

// The outcomes of the tests headroom cannot evaluate, one command each; a test met only on one branch only there.
TEST(LaunchScript, FollowsEachOutcomeOfTestsItCannotEvaluate) {
  const std::string script =
      "A=(--a)\nif [ -n \"$KEY\" ]; then A+=(--k)\n  if [ -f /x ]; then A+=(--f); fi\nfi\n"
      "python pretrain_gpt.py ${A[@]}\n";
  const auto variants = calibrate::launch_script_variants(script, "pretrain_gpt.py", "t.sh");
  std::set<std::vector<std::string>> commands;
  for (const auto& v : variants) commands.insert(v.command);
  EXPECT_EQ(commands, (std::set<std::vector<std::string>>{{"python", "pretrain_gpt.py", "--a", "--k", "--f"},
                                                          {"python", "pretrain_gpt.py", "--a", "--k"},
                                                          {"python", "pretrain_gpt.py", "--a"}}));
  EXPECT_EQ(variants.front().assumed, (std::vector<std::string>{"[ -n \"$KEY\" ] true", "[ -f /x ] true"}));
  // Evaluated tests give one; so does a script with more outcomes than are followed, read as launch_script_command.
  EXPECT_EQ(calibrate::launch_script_variants(script, "pretrain_gpt.py", "t.sh", {{"KEY", ""}}).size(), 1U);
  std::string many;
  for (int i = 0; i < 5; ++i) many += "if [ -f /x" + std::to_string(i) + " ]; then :; fi\n";
  EXPECT_EQ(calibrate::launch_script_variants(many + "python pretrain_gpt.py\n", "pretrain_gpt.py", "t.sh").size(), 1U);
  // An outcome under which no command runs: read as one, whose refusal names the block.
  try {
    (void)calibrate::launch_script_variants("if [ -f /x ]; then\n python pretrain_gpt.py\nfi\n", "pretrain_gpt.py",
                                            "t.sh");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is in a block whose test ([ -f /x ])"), std::string::npos) << e.what();
  }
}

// check prices a script whose untestable tests change only ignored flags (Megatron-LM's examples/mixtral: --wandb-*
// when WANDB_API_KEY is set), saying so, and refuses one where they change a flag it reads, naming the test.
TEST(Check, ScriptTestsThatChangeOnlyIgnoredFlagsPriceTheSame) {
  const auto path = std::filesystem::temp_directory_path() / ("headroom_wandb_" + std::to_string(::getpid()) + ".sh");
  const std::string head =
      "ARGS=(--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
      "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000)\n"
      "if [ -n \"${WANDB_API_KEY}\" ]; then\n  ARGS+=(";
  const std::string tail = ")\nfi\ntorchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]}\n";
  std::ofstream(path) << head << "--wandb-project p --wandb-exp-name e" << tail;
  const Result r = run({"check", "--cluster", "dgx-h100", "--json", path.string()});
  ASSERT_NE(r.code, 2) << r.err;
  EXPECT_NE(r.out.find("change only flags it ignores (--wandb-exp-name, --wandb-project): priced the same either way"),
            std::string::npos)
      << r.out;
  std::ofstream(path) << head << "--tensor-model-parallel-size 2" << tail;
  const Result t = run({"check", "--cluster", "dgx-h100", path.string()});
  EXPECT_EQ(t.code, 2);
  EXPECT_NE(t.err.find("the if test(s) ([ -n \"${WANDB_API_KEY}\" ]), which headroom cannot evaluate, change the "
                       "flags read"),
            std::string::npos)
      << t.err;
  std::filesystem::remove(path);
}

// An argument-parsing loop (Megatron-LM's examples/gptoss/02_train.sh: while [[ $# -gt 0 ]]; do case $1 in ...) runs
// nothing in a script run without arguments ($# is 0): its defaults stand; a loop whose test holds stays unknown.
TEST(LaunchScript, AnArgumentLoopOfAScriptRunWithoutArgumentsRunsNothing) {
  const std::string loop =
      "TP=1\nwhile [[ $# -gt 0 ]]; do\n  case $1 in\n    --tp) TP=\"$2\"; shift 2 ;;\n    *) exit 1 ;;\n  esac\n"
      "done\npython pretrain_gpt.py --tp $TP --n $#\n";
  EXPECT_EQ(words_of(loop), (std::vector<std::string>{"python", "pretrain_gpt.py", "--tp", "1", "--n", "0"}));
  EXPECT_EQ(words_of("until [ 1 -eq 1 ]; do TP=2; done\npython pretrain_gpt.py --tp ${TP:-1}\n"),
            (std::vector<std::string>{"python", "pretrain_gpt.py", "--tp", "1"}));
  EXPECT_THROW((void)words_of("TP=1\nwhile [[ 0 -eq 0 ]]; do TP=2; done\npython pretrain_gpt.py --tp $TP\n"), Error);
}

TEST(LaunchScript, RefusesWhatDependsOnTheMachine) {
  // A block whose test is the machine's (a file test): its assignment is unknown where the command uses it.
  try {
    (void)words_of("if [ -f /etc/x ]; then TP=2; else TP=4; fi\npython pretrain_gpt.py --tp $TP\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("$TP is set in a block whose test ([ -f /etc/x ])"), std::string::npos)
        << e.what();
  }
  // The training command itself in a loop.
  EXPECT_THROW((void)words_of("for i in 1 2; do\n python pretrain_gpt.py\ndone\n"), Error);
  // Unclosed arrays and quotes, and no training command at all.
  EXPECT_THROW((void)words_of("A=(--x\npython pretrain_gpt.py\n"), Error);
  EXPECT_THROW((void)words_of("python pretrain_gpt.py \"--x\n"), Error);
  EXPECT_THROW((void)words_of("echo hi\n"), Error);
}

}  // namespace
}  // namespace headroom
