// Readers of what users measure: runs tables, Megatron-LM and torchtitan logs, PyTorch profiler traces.
// Fixtures in tests/data/runs (SOURCES.md names where each comes from: real logs and traces from public
// repositories, and files written here in the frameworks' formats).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <regex>
#include <tuple>
#include <unistd.h>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headroom/ingest/measured_runs.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "../test_support.hpp"

namespace headroom::calibrate {
namespace {

using test::error_of;

const std::filesystem::path kRuns = std::filesystem::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "runs";

std::string slurp(const std::string& name) {
  std::ifstream in(kRuns / name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunsTable, CsvAndJsonLinesReadTheSameRuns) {
  for (const char* file : {"runs_written.csv", "runs_written.jsonl"}) {
    SCOPED_TRACE(file);
    const auto runs = parse_runs_table(slurp(file), file);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].layout.at("model"), "llama3.1-8b");
    EXPECT_EQ(runs[0].layout.at("tp"), "2");
    EXPECT_EQ(runs[0].layout.at("gpus"), "8");
    EXPECT_EQ(runs[0].outcome, RunOutcome::ok);
    EXPECT_DOUBLE_EQ(*runs[0].tflops_per_gpu, 181.5);
    EXPECT_DOUBLE_EQ(*runs[0].peak_memory_gib, 70.25);
    EXPECT_FALSE(runs[0].step_time_s);
    EXPECT_EQ(runs[1].outcome, RunOutcome::oom);
    EXPECT_EQ(runs[1].layout.at("tp"), "1");           // JSON 1.0 is the integer a flag would carry
    EXPECT_EQ(runs[1].layout.count("recompute"), 0u);  // an empty cell is a missing value
    EXPECT_NE(runs[1].source.find(":3"), std::string::npos) << runs[1].source;
  }
}

TEST(RunsTable, RefusesWhatItCannotUseNamingLineAndColumn) {
  const std::string head = "model,gpus,tp,outcome,tflops_per_gpu\n";
  EXPECT_NE(
      error_of([&] { (void)parse_runs_table(head + "x,8,2,ok,abc\n", "r.csv"); }).find("r.csv:2: tflops_per_gpu 'abc'"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table(head + "x,8,2,fine,1\n", "r.csv");
            }).find("outcome 'fine' (valid: ok, oom)"),
            std::string::npos);
  EXPECT_NE(
      error_of([&] { (void)parse_runs_table(head + "x,8,2,ok,\n", "r.csv"); }).find("needs one of tflops_per_gpu"),
      std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_runs_table("model,speed\nx,1\n", "r.csv"); }).find("unknown column 'speed'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_runs_table(head + "x,8\n", "r.csv"); }).find("2 fields where the header has 5"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_runs_table("model,model\n", "r.csv"); }).find("'model' appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table("{\"model\": \"x\", \"outcome\": \"oom\"}\n[1]\n", "r.jsonl");
            }).find("r.jsonl:2: a array"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table("{\"tp\": [2], \"outcome\": \"oom\"}\n", "r.jsonl");
            }).find("tp is a array"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table("{\"step_time_s\": \"1\"}\n", "r.jsonl");
            }).find("step_time_s is a string"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_runs_table(" \n", "r.csv"); }).find("empty"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_runs_table("model,\"gpus\n", "r.csv"); }).find("not closed"), std::string::npos);
}

// A run file is read as strictly as a spec file: a key twice in one object (by the spec reader's one check), a number
// given as a string, and a tokens/s that contradicts the step time are refused, naming the line.
TEST(RunsTable, JsonLinesAreReadAsStrictlyAsSpecFiles) {
  const std::string ok = R"("model": "x", "gpus": 8, "seq": 8192, "gbs": 64, "outcome": "ok")";
  const auto dup = error_of([&] {
    (void)parse_runs_table("{" + ok +
                               R"(, "tp": 2, "tp": 4, "step_time_s": 10})"
                               "\n",
                           "r.jsonl");
  });
  EXPECT_NE(dup.find("r.jsonl:1"), std::string::npos) << dup;
  EXPECT_NE(dup.find("the key \"tp\" appears twice in one object"), std::string::npos) << dup;
  const auto quoted = error_of([&] {
    (void)parse_runs_table("{" + ok +
                               R"(, "tp": "4", "step_time_s": 10})"
                               "\n",
                           "r.jsonl");
  });
  EXPECT_NE(quoted.find("r.jsonl:1: tp is a string \"4\" (valid: a number)"), std::string::npos) << quoted;
  const auto flag = error_of([&] {
    (void)parse_runs_table("{" + ok +
                               R"(, "sequence_parallel": "true", "step_time_s": 10})"
                               "\n",
                           "r.jsonl");
  });
  EXPECT_NE(flag.find("sequence_parallel is a string \"true\" (valid: true or false)"), std::string::npos) << flag;
  const auto name = error_of([&] {
    (void)parse_runs_table(R"({"model": 8, "outcome": "oom"})"
                           "\n",
                           "r.jsonl");
  });
  EXPECT_NE(name.find("model is a number 8 (valid: a string)"), std::string::npos) << name;
  // 64 x 8192 tokens in 10 s is 52428.8 tokens/s: 52500 is the same measurement rounded, 60000 another one.
  EXPECT_EQ(parse_runs_table("{" + ok +
                                 R"(, "step_time_s": 10, "tokens_per_s": 52500})"
                                 "\n",
                             "r.jsonl")
                .size(),
            1u);
  const auto contradicts = error_of([&] {
    (void)parse_runs_table("{" + ok +
                               R"(, "step_time_s": 10, "tokens_per_s": 60000})"
                               "\n",
                           "r.jsonl");
  });
  EXPECT_NE(contradicts.find("r.jsonl:1: tokens_per_s 60000 contradicts step_time_s 10"), std::string::npos)
      << contradicts;
  const std::string head = "model,gpus,seq,gbs,outcome,step_time_s,tokens_per_s\n";
  const auto csv = error_of([&] { (void)parse_runs_table(head + "x,8,8192,64,ok,10,60000\n", "r.csv"); });
  EXPECT_NE(csv.find("r.csv:2: tokens_per_s 60000 contradicts step_time_s 10"), std::string::npos) << csv;
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table(head + "x,8,8192,64,ok,0,\n", "r.csv");
            }).find("r.csv:2: step_time_s '0' (valid: a positive number)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_runs_table("{" + ok +
                                         R"(, "step_time_s": -1})"
                                         "\n",
                                     "r.jsonl");
            }).find("step_time_s '-1' (valid: a positive number)"),
            std::string::npos);
}

// Measurements no run can have on its GPU: refused naming the row.
TEST(RunsTable, PhysicallyImpossibleRunsAreRefusedNamingTheRow) {
  MeasuredRun r;
  r.source = "r.csv:3";
  RunBounds b{"h100-94gb", 93.13, 989.4e12, 1e18, 64 * 8192, 8};
  r.peak_memory_gib = 120;
  EXPECT_NE(
      error_of([&] { check_run_bounds(r, b); }).find("r.csv:3: peak_memory_gib 120 is more than the h100-94gb has"),
      std::string::npos);
  r.peak_memory_gib = 80;
  r.tflops_per_gpu = 1200;
  EXPECT_NE(error_of([&] {
              check_run_bounds(r, b);
            }).find("r.csv:3: tflops_per_gpu 1200 is above the h100-94gb's highest dense peak 989.4 TFLOP/s"),
            std::string::npos);
  r.tflops_per_gpu = 400;
  r.step_time_s = 100;  // 1e18 FLOPs on 8 GPUs of 989.4 TFLOP/s take at least 126.3 s
  EXPECT_NE(error_of([&] { check_run_bounds(r, b); }).find("r.csv:3: a step of 100 s is faster than"),
            std::string::npos);
  r.step_time_s = 200;
  EXPECT_EQ(error_of([&] { check_run_bounds(r, b); }), "(no error)");
  r.step_time_s.reset();
  r.tokens_per_s = 64 * 8192 / 100.0;  // the same step of 100 s, as tokens/s
  EXPECT_NE(error_of([&] { check_run_bounds(r, b); }).find("faster than"), std::string::npos);
}

TEST(RunsTable, QuotedCsvFieldsKeepCommasAndQuotes) {
  const auto runs = parse_runs_table("model,lora_targets,outcome\r\n\"my \"\"model\"\"\",\"q,k,v\",oom\r\n", "r.csv");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].layout.at("model"), "my \"model\"");
  EXPECT_EQ(runs[0].layout.at("lora_targets"), "q,k,v");
}

// A real log (ROCm Megatron-LM on 4 MI300A) whose run died before its first iteration: its arguments block
// gives the layout and the model, but a run that neither trained nor ran out of memory is not a run.
TEST(MegatronLog, RealArgumentsBlockOfARunThatCrashed) {
  const auto text = slurp("megatron_mi300a_tp4_crashed.log");
  EXPECT_NE(
      error_of([&] { (void)parse_megatron_log(text, "crashed.log"); }).find("neither trained nor ran out of memory"),
      std::string::npos);
  // The same arguments with an out-of-memory error appended: the layout and model read from the real block.
  const auto run = parse_megatron_log(text + "\ntorch.OutOfMemoryError: HIP out of memory.\n", "crashed.log");
  EXPECT_EQ(run.outcome, RunOutcome::oom);
  const std::map<std::string, std::string> layout = {{"framework", "megatron"},
                                                     {"gpus", "4"},
                                                     {"tp", "4"},
                                                     {"pp", "1"},
                                                     {"cp", "1"},
                                                     {"mbs", "1"},
                                                     {"gbs", "512"},
                                                     {"seq", "2048"},
                                                     {"recompute", "selective"},
                                                     {"sequence_parallel", "true"},
                                                     {"sharding", "zero1"},
                                                     {"overlap_p2p_comm", "false"},  // 1F1B: arguments.py's
                                                     {"tp_comm_overlap", "false"},
                                                     // printed False: its DDP ran them after the backward
                                                     {"overlap_grad_reduce", "false"},
                                                     {"overlap_param_gather", "false"}};
  EXPECT_EQ(run.layout, layout);
  ASSERT_TRUE(run.model);
  EXPECT_EQ(run.model->hidden_size, 3072);
  EXPECT_EQ(run.model->num_layers, 28);
  EXPECT_EQ(run.model->num_heads, 24);
  EXPECT_EQ(run.model->num_kv_heads, 24);
  EXPECT_EQ(run.model->ffn_hidden_size, 10752);
  EXPECT_EQ(run.model->vocab_size, 50688);  // the tokenizer's padded size, from " > padded vocab ..."
  EXPECT_EQ(run.model->max_context, 2048);
  EXPECT_FALSE(run.model->tied_embeddings);
  EXPECT_EQ(run.model->norm, Norm::rmsnorm);
  EXPECT_EQ(run.model->mlp, Mlp::swiglu);
  EXPECT_FALSE(run.model->linear_biases);
  EXPECT_FALSE(run.model->learned_positions);
  EXPECT_FALSE(run.step_time_s);
}

// arguments.py's learned position table: there with learned_absolute positions unless --no-position-embedding
// (add_position_embedding False) drops it.
TEST(MegatronLog, NoPositionEmbeddingDropsTheLearnedTable) {
  std::string log = slurp("megatron_llama_written.log");
  const std::string rope = "  position_embedding_type ......................... rope\n";
  ASSERT_NE(log.find(rope), std::string::npos);
  log.replace(log.find(rope), rope.size(), "  position_embedding_type ......................... learned_absolute\n");
  EXPECT_TRUE(parse_megatron_log(log, "learned.log").model->learned_positions);
  log.insert(log.find("  position_embedding_type"), "  add_position_embedding .......................... False\n");
  EXPECT_FALSE(parse_megatron_log(log, "none.log").model->learned_positions);
}

// --window-size (left, right): Transformer Engine's window, the query and the `left` keys before it; every N-th layer
// attends fully under --window-attn-skip-freq N. A window ahead of the query or a list pattern is refused naming it.
TEST(MegatronLog, SlidingWindowIsReadAsTransformerEnginesWindow) {
  const std::string base = slurp("megatron_llama_written.log");
  const std::string anchor = "  position_embedding_type";
  const auto with = [&](const std::string& lines) {
    std::string log = base;
    log.insert(log.find(anchor), lines);
    return log;
  };
  const auto every =
      parse_megatron_log(with("  window_size ..................................... (4095, 0)\n"), "w.log");
  ASSERT_TRUE(every.model);
  EXPECT_EQ(every.model->sliding_window, 4096);
  EXPECT_EQ(every.model->window_skip_freq, 0);
  const auto half = parse_megatron_log(with("  window_size ..................................... (4095, 0)\n"
                                            "  window_attn_skip_freq ........................... 2\n"),
                                       "w.log");
  EXPECT_EQ(half.model->window_skip_freq, 2);
  EXPECT_EQ(parse_megatron_log(with("  window_size ..................................... (-1, 0)\n"), "w.log")
                .model->sliding_window,
            0);  // no limit: full causal attention
  EXPECT_EQ(parse_megatron_log(base, "none.log").model->sliding_window, 0);
  for (const auto& bad : std::vector<std::pair<std::string, std::string>>{
           {"  window_size ..................................... (4095, 8)\n", "keys ahead"},
           {"  window_size ..................................... (4095, 0)\n"
            "  window_attn_skip_freq ........................... [1, 1, 0]\n",
            "window_attn_skip_freq [1, 1, 0]"},
           {"  window_size ..................................... (4095)\n", "not two integers"}}) {
    const std::string log = with(bad.first);
    EXPECT_NE(error_of([&] { (void)parse_megatron_log(log, "w.log"); }).find(bad.second), std::string::npos)
        << bad.first;
  }
}

// --pipeline-model-parallel-layout as arguments.py prints it (the string as given, the virtual stages it sets): read as
// the layout knob, which sets vpp from its stages.
TEST(MegatronLog, PipelineLayoutIsRead) {
  std::string log = slurp("megatron_llama_written.log");
  const std::string per_stage = "  num_layers_per_virtual_pipeline_stage ........... 4\n";
  ASSERT_NE(log.find(per_stage), std::string::npos);
  log.replace(log.find(per_stage), per_stage.size(),
              "  num_layers_per_virtual_pipeline_stage ........... None\n"
              "  pipeline_model_parallel_layout .................. Et*3|(t*4|)*6t*5L\n");
  const auto run = parse_megatron_log(log, "layout.log");
  EXPECT_EQ(run.layout.at("pipeline_model_parallel_layout"), "Et*3|(t*4|)*6t*5L");
}

// Megatron-FSDP's settings, printed with their defaults whether it runs or not: read only with use_megatron_fsdp True,
// its strategy then the sharding (default optim_grads_params, ZeRO-3).
TEST(MegatronLog, MegatronFsdpIsReadWhereItRuns) {
  const std::string base = slurp("megatron_llama_written.log");
  const std::string anchor = "  position_embedding_type";
  const auto with = [&](const std::string& lines) {
    std::string log = base;
    log.insert(log.find(anchor), lines);
    return parse_megatron_log(log, "fsdp.log");
  };
  const std::string defaults =
      "  data_parallel_sharding_strategy ................. optim_grads\n"
      "  fsdp_double_buffer .............................. True\n"
      "  suggested_communication_unit_size ............... None\n";
  const auto off = with("  use_megatron_fsdp ............................... False\n" + defaults);
  EXPECT_FALSE(off.layout.contains("fsdp_double_buffer"));
  EXPECT_NE(off.layout.at("sharding"), "zero2");
  const auto on = with("  use_megatron_fsdp ............................... True\n" + defaults);
  EXPECT_EQ(on.layout.at("use_megatron_fsdp"), "true");
  EXPECT_EQ(on.layout.at("sharding"), "zero2");
  EXPECT_EQ(on.layout.at("fsdp_double_buffer"), "true");
  EXPECT_FALSE(on.layout.contains("suggested_communication_unit_size"));
  EXPECT_EQ(with("  use_megatron_fsdp ............................... True\n").layout.at("sharding"), "zero3");
}

TEST(MegatronLog, SteadyStateDropsTheFirstIterationAndTakesTheMedian) {
  const auto run = parse_megatron_log(slurp("megatron_llama_written.log"), "llama.log");
  EXPECT_EQ(run.outcome, RunOutcome::ok);
  EXPECT_EQ(run.layout.at("vpp"), "4");  // 32 layers / pp 2 / 4 layers per virtual stage
  EXPECT_EQ(run.layout.at("recompute"), "none");
  ASSERT_TRUE(run.model);
  EXPECT_EQ(run.model->num_kv_heads, 8);
  EXPECT_EQ(run.model->vocab_size, 128256);
  EXPECT_DOUBLE_EQ(*run.step_time_s, (20010.0 + 20120.5) / 2 / 1e3);  // median of 20010, 20120.5, 19990.1, 25500
  EXPECT_DOUBLE_EQ(*run.tflops_per_gpu, (467.7 + 470.3) / 2);
  EXPECT_DOUBLE_EQ(*run.tokens_per_s, 128.0 * 8192 / *run.step_time_s);
  EXPECT_DOUBLE_EQ(*run.peak_memory_gib, 66560.0 / 1024);  // the larger rank's max reserved, MiB -> GiB
}

// A logged zero measures nothing: an iteration of 0 ms, 0 TFLOP/s or 0 MiB reserved is skipped like a line without
// the value, and a step too short for a finite tokens/s is refused by its value.
TEST(MegatronLog, ALoggedZeroIsNoMeasurement) {
  const auto log = slurp("megatron_llama_written.log");
  const auto run = parse_megatron_log(
      log +
          "\n iteration 99/ 100 | elapsed time per iteration (ms): 0.0 | throughput per GPU (TFLOP/s/GPU): 0\n"
          "[Rank 0] (after 99 iterations) memory (MB) | allocated: 0 | max reserved: 0\n",
      "llama.log");
  EXPECT_DOUBLE_EQ(*run.step_time_s, parse_megatron_log(log, "llama.log").step_time_s.value());
  EXPECT_DOUBLE_EQ(*run.peak_memory_gib, 66560.0 / 1024);
  const auto tiny = std::regex_replace(log, std::regex(R"(elapsed time per iteration \(ms\): [0-9.]+)"),
                                       "elapsed time per iteration (ms): 1e-320");
  EXPECT_NE(error_of([&] { (void)parse_megatron_log(tiny, "llama.log"); }).find("tokens/s would be infinite"),
            std::string::npos);
}

// A Megatron-DeepSpeed log: its arguments in Megatron-DeepSpeed's names, the ZeRO stage DeepSpeed prints of its config
// (over --zero-stage's default), framework deepspeed; FlashAttention-2 and checkpointed layers read.
TEST(MegatronLog, MegatronDeepspeedRunIsReadAsDeepspeed) {
  const std::string log = slurp("megatron_deepspeed_written.log");
  const auto run = parse_megatron_log(log, "mds.log");
  EXPECT_EQ(run.outcome, RunOutcome::ok);
  EXPECT_EQ(run.layout.at("framework"), "deepspeed");
  EXPECT_EQ(run.layout.at("sharding"), "zero1");
  EXPECT_EQ(run.layout.at("recompute"), "full");
  EXPECT_EQ(run.layout.at("flash_attention"), "true");
  EXPECT_EQ(run.layout.at("tp"), "2");
  EXPECT_EQ(run.layout.at("pp"), "2");
  EXPECT_EQ(run.layout.at("gpus"), "32");
  ASSERT_TRUE(run.model);
  EXPECT_EQ(run.model->norm, Norm::rmsnorm);
  EXPECT_EQ(run.model->num_kv_heads, 32);
  EXPECT_FALSE(run.model->learned_positions);
  EXPECT_DOUBLE_EQ(*run.step_time_s, 6.2102);  // the median after the first iteration
  // DeepSpeed's own print decides the stage; without it, --zero-stage's printed value.
  std::string stage2 = log;
  stage2.replace(stage2.find("zero_optimization_stage ...... 1"), 32, "zero_optimization_stage ...... 2");
  EXPECT_EQ(parse_megatron_log(stage2, "mds.log").layout.at("sharding"), "zero2");
  std::string stage3 = log;
  stage3.replace(stage3.find("zero_optimization_stage ...... 1"), 32, "zero_optimization_stage ...... 3");
  EXPECT_EQ(parse_megatron_log(stage3, "mds.log").layout.at("sharding"), "zero3");
  std::string ulysses = log;
  ulysses.replace(ulysses.find("ds_sequence_parallel_size ....................... 1"), 51,
                  "ds_sequence_parallel_size ....................... 4");
  EXPECT_NE(error_of([&] { (void)parse_megatron_log(ulysses, "mds.log"); }).find("DeepSpeed-Ulysses"),
            std::string::npos);
}

// Megatron-LM's fp8 argument is the format (None without FP8): the run is read as FP8 with its recipe, FP8 weights and
// Offloading, never as BF16.
TEST(MegatronLog, Fp8AndOffloadingAreRead) {
  std::string log = slurp("megatron_llama_written.log");
  const std::string bf16 = "  bf16 ............................................ True\n";
  ASSERT_NE(log.find(bf16), std::string::npos);
  log.insert(log.find(bf16) + bf16.size(),
             "  fp8 ............................................. hybrid\n"
             "  fp8_recipe ...................................... tensorwise\n"
             "  fp8_param_gather ................................ True\n"
             "  optimizer_cpu_offload ........................... True\n"
             "  optimizer_offload_fraction ...................... 0.5\n"
             "  overlap_p2p_comm ................................ False\n"
             "  tp_comm_overlap ................................. True\n");
  const auto run = parse_megatron_log(log, "fp8.log");
  EXPECT_EQ(run.layout.at("overlap_p2p_comm"), "false");  // --no-overlap-p2p-communication
  EXPECT_EQ(run.layout.at("tp_comm_overlap"), "true");    // --tp-comm-overlap
  EXPECT_EQ(run.layout.at("fp8_format"), "hybrid");       // FP8 on (knobs.hpp fp8_format)
  EXPECT_EQ(run.layout.at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(run.layout.at("fp8_param_gather"), "true");
  EXPECT_EQ(run.layout.at("optimizer_cpu_offload"), "true");
  EXPECT_EQ(run.layout.at("optimizer_offload_fraction"), "0.5");
  const auto bf16_run = parse_megatron_log(slurp("megatron_llama_written.log"), "bf16.log");
  EXPECT_EQ(bf16_run.layout.count("fp8_format"), 0U);
  EXPECT_EQ(bf16_run.layout.count("fp8_recipe"), 0U);  // printed, but meaningless without FP8
}

// Every knob with a Megatron-LM argument name (knobs.hpp log_key) is read from the arguments block under the knob's
// name: the reader's mapping is the knob table.
TEST(MegatronLog, EveryKnobWithALogKeyIsRead) {
  std::string block;
  for (const Knob& k : knobs()) {
    if (k.log_key.empty()) continue;
    const std::string choice(k.choices.substr(0, k.choices.find('|')));
    const std::string value = k.type == KnobType::flag     ? "True"
                              : k.id == KnobId::recompute  ? "full"  // gives the recompute method a meaning
                              : k.type == KnobType::choice ? choice
                              : k.type == KnobType::number ? "1.0"
                                                           : "2";
    block += "  " + std::string(k.log_key) + " .......... " + value + "\n";
  }
  // The settings that give the experts', FP8's and offloading's knobs a meaning.
  block +=
      "  num_experts .......... 8\n  moe_router_topk .......... 2\n  cpu_offloading .......... True\n"
      "  optimizer_cpu_offload .......... True\n";
  std::string log = slurp("megatron_llama_written.log");
  const std::string end = "---- end of arguments ----";
  ASSERT_NE(log.find(end), std::string::npos);
  log.insert(log.rfind('\n', log.find(end)) + 1, block);
  const auto run = parse_megatron_log(log, "all.log");
  for (const Knob& k : knobs()) {
    // Megatron-LM reads the modules under selective recompute only, and this block's is full (below).
    if (!k.log_key.empty() && k.id != KnobId::recompute_modules) {
      EXPECT_TRUE(run.layout.contains(std::string(k.name))) << k.name << " from " << k.log_key;
    }
  }
}

// --recompute-modules, printed as a Python list, under selective recompute: the knob's names; an empty list recomputes
// nothing; None (arguments.py's default) is the core attention, the knob's default.
TEST(MegatronLog, RecomputeModulesAreReadUnderSelectiveRecompute) {
  const std::string log = slurp("megatron_llama_written.log");
  const std::string end = "---- end of arguments ----";
  ASSERT_NE(log.find(end), std::string::npos);
  const std::string none = "recompute_granularity ........................... None";
  ASSERT_NE(log.find(none), std::string::npos);
  const auto with = [&](const std::string& granularity, const std::string& modules) {
    std::string x = log;
    x.replace(x.find(none), none.size(), "recompute_granularity .......... " + granularity);
    x.insert(x.rfind('\n', x.find(end)) + 1, "  recompute_modules .......... " + modules + "\n");
    return parse_megatron_log(x, "modules.log").layout;
  };
  EXPECT_EQ(with("selective", "['moe_act', 'layernorm']").at("recompute_modules"), "moe_act,layernorm");
  EXPECT_EQ(with("selective", "[]").at("recompute"), "none");
  EXPECT_FALSE(with("selective", "None").contains("recompute_modules"));
  EXPECT_FALSE(with("full", "['mlp']").contains("recompute_modules"));
  // --moe-layer-recompute, deprecated: selective recompute of the MoE block beside the modules' default.
  std::string moe = log;
  moe.insert(moe.rfind('\n', moe.find(end)) + 1, "  moe_layer_recompute .......... True\n");
  const auto m = parse_megatron_log(moe, "moe.log").layout;
  EXPECT_EQ(m.at("recompute"), "selective");
  EXPECT_EQ(parse_recompute_modules(m.at("recompute_modules")), parse_recompute_modules("core_attn,moe"));
}

// arguments.py prints the optimizer's formats as torch dtypes (fp8 as torch.uint8): read as the knobs' names.
TEST(MegatronLog, OptimizerFormatsAreReadFromTheirTorchDtypes) {
  std::string log = slurp("megatron_llama_written.log");
  const std::string end = "---- end of arguments ----";
  ASSERT_NE(log.find(end), std::string::npos);
  log.insert(log.rfind('\n', log.find(end)) + 1,
             "  use_precision_aware_optimizer .......... True\n  main_grads_dtype .......... torch.bfloat16\n"
             "  main_params_dtype .......... torch.float16\n  exp_avg_dtype .......... torch.uint8\n"
             "  exp_avg_sq_dtype .......... torch.float32\n");
  const auto run = parse_megatron_log(log, "formats.log");
  EXPECT_EQ(run.layout.at("use_precision_aware_optimizer"), "true");
  EXPECT_EQ(run.layout.at("main_grads_dtype"), "bf16");
  EXPECT_EQ(run.layout.at("main_params_dtype"), "fp16");
  EXPECT_EQ(run.layout.at("exp_avg_dtype"), "fp8");
  EXPECT_EQ(run.layout.at("exp_avg_sq_dtype"), "fp32");
}

TEST(MegatronLog, OutOfMemoryAndWhatCannotBePriced) {
  const auto oom = parse_megatron_log(slurp("megatron_oom_written.log"), "oom.log");
  EXPECT_EQ(oom.outcome, RunOutcome::oom);
  EXPECT_EQ(oom.layout.at("seq"), "32768");
  // A run with experts reads with them: 8 of 14,336 (moe_ffn_hidden_size None: ffn_hidden_size), top 2,
  // two leading dense layers, EP 2, ETP 1, the alltoall dispatcher; an unpriced layer pattern is refused naming it.
  const auto moe = parse_megatron_log(slurp("megatron_moe_written.log"), "moe.log");
  ASSERT_TRUE(moe.model);
  EXPECT_EQ(moe.model->num_experts, 8);
  EXPECT_EQ(moe.model->moe_router_topk, 2);
  EXPECT_EQ(moe.model->moe_ffn_hidden_size, 14336);
  EXPECT_EQ(moe.model->first_dense_layers, 2);
  EXPECT_EQ(moe.layout.at("ep"), "2");
  EXPECT_EQ(moe.layout.at("etp"), "1");
  EXPECT_EQ(moe.layout.at("moe_token_dispatcher_type"), "alltoall");
  std::string every_other = slurp("megatron_moe_written.log");
  every_other.replace(every_other.find("[0, 0, 1"), 8, "[0, 1, 0");
  EXPECT_NE(error_of([&] { (void)parse_megatron_log(every_other, "moe.log"); }).find("moe_layer_freq [0, 1, 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)parse_megatron_log("iteration 1/ 2 | elapsed time per iteration (ms): 5.0\n", "x.log");
            }).find("no Megatron-LM arguments block"),
            std::string::npos);
}

TEST(TorchtitanLog, RealPresetWithItsLog) {
  const auto run =
      parse_torchtitan_log(slurp("torchtitan_llama3_8b_written.log"), slurp("torchtitan_llama3_8b.toml"), 64, "tt.log");
  EXPECT_EQ(run.layout.at("model"), "llama3.1-8b");
  EXPECT_EQ(run.layout.at("gpus"), "64");
  EXPECT_EQ(run.layout.at("sharding"), "GGG");  // data_parallel_shard_degree = -1: all 64 GPUs, resharded
  EXPECT_EQ(run.layout.at("gbs"), "64");        // local_batch_size 1 × DP 64
  EXPECT_EQ(run.layout.at("seq"), "8192");
  EXPECT_EQ(run.layout.at("framework"), "torchtitan");
  EXPECT_EQ(run.layout.at("recompute"), "op");       // mode "selective", selective_ac_option "op"
  EXPECT_EQ(run.layout.count("compile"), 0u);        // [compile] enable=false
  EXPECT_DOUBLE_EQ(*run.tokens_per_s, 3954.0 * 64);  // tps is per GPU: median of the steps after the first
  EXPECT_DOUBLE_EQ(*run.step_time_s, 64.0 * 8192 / (3954.0 * 64));
  EXPECT_DOUBLE_EQ(*run.tflops_per_gpu, 191.5);
  EXPECT_DOUBLE_EQ(*run.peak_memory_gib, 63.90);
  const auto zero = parse_torchtitan_log(slurp("torchtitan_llama3_8b_written.log") +
                                             "\nstep: 99  loss:  3.1  memory:  0.00GiB(0.00%)  tps: 0  tflops: 0.00\n",
                                         slurp("torchtitan_llama3_8b.toml"), 64, "tt.log");
  EXPECT_DOUBLE_EQ(*zero.tokens_per_s, *run.tokens_per_s);  // a step that moved no tokens measures nothing
  EXPECT_DOUBLE_EQ(*zero.peak_memory_gib, 63.90);
}

TEST(TorchtitanLog, RefusesWhatItCannotTell) {
  const auto toml = slurp("torchtitan_llama3_8b.toml");
  const auto log = slurp("torchtitan_llama3_8b_written.log");
  EXPECT_NE(error_of([&] { (void)parse_torchtitan_log(log, toml, 0, "tt.log"); }).find("needs the number of GPUs"),
            std::string::npos);
  // torchao's float8 converter is read as FP8 (tensorwise, FP8 all-gather when enabled); MX formats are refused.
  const auto fp8 = parse_torchtitan_log(log,
                                        toml +
                                            "\n[model]\nconverters = [\"quantize.linear.float8\"]\n"
                                            "[quantize.linear.float8]\nenable_fsdp_float8_all_gather = true\n",
                                        64, "tt.log");
  EXPECT_EQ(fp8.layout.at("precision"), "fp8");
  EXPECT_EQ(fp8.layout.at("fp8_recipe"), "tensorwise");
  EXPECT_EQ(fp8.layout.at("fp8_param_gather"), "true");
  EXPECT_NE(error_of([&] {
              (void)parse_torchtitan_log(log, toml + "\n[model]\nconverters = [\"quantize.linear.mx\"]\n", 64,
                                         "tt.log");
            }).find("only torchao's float8"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)parse_torchtitan_log("nothing\n", toml, 64, "tt.log"); }).find("neither trained"),
            std::string::npos);
  // torch.compile and async TP are read; layer-selective checkpointing (every N-th block, torchtitan's default "2")
  // and other modes are refused naming the key.
  std::string compiled = toml;
  compiled.replace(compiled.find("enable=false"), 12, "enable=true");
  const auto c =
      parse_torchtitan_log(log, compiled + "\n[parallelism]\nenable_async_tensor_parallel = true\n", 64, "t");
  EXPECT_EQ(c.layout.at("compile"), "true");
  EXPECT_EQ(c.layout.at("tp_comm_overlap"), "true");
  const auto refusal = [&](const std::string& line, const std::string& replacement) {
    std::string changed = toml;
    changed.replace(changed.find(line), line.size(), replacement);
    return error_of([&] { (void)parse_torchtitan_log(log, changed, 64, "tt.log"); });
  };
  EXPECT_NE(refusal("selective_ac_option = \"op\"", "selective_ac_option = \"x2\"")
                .find("selective_ac_option = x2 is neither op nor a block count N"),
            std::string::npos);
  // Layer-selective checkpointing: every N-th block, whole (N = 0 or 1: every block).
  for (const auto& [option, method, layers] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"2", "every", "2"}, {"3", "every", "3"}, {"1", "", ""}, {"0", "", ""}}) {
    const std::string op = "selective_ac_option = \"op\"";
    std::string changed = toml;
    changed.replace(changed.find(op), op.size(), "selective_ac_option = \"" + option + "\"");
    const auto r = parse_torchtitan_log(log, changed, 64, "t");
    EXPECT_EQ(r.layout.at("recompute"), "full") << option;
    EXPECT_EQ(r.layout.contains("recompute_method") ? r.layout.at("recompute_method") : "", method) << option;
    EXPECT_EQ(r.layout.contains("recompute_num_layers") ? r.layout.at("recompute_num_layers") : "", layers) << option;
  }
  EXPECT_NE(refusal("mode = \"selective\"", "mode = \"memory_budget\"")
                .find("activation_checkpoint.mode = memory_budget is not priced"),
            std::string::npos);
  const auto oom = parse_torchtitan_log("torch.OutOfMemoryError: CUDA out of memory.\n", toml, 64, "tt.log");
  EXPECT_EQ(oom.outcome, RunOutcome::oom);
  EXPECT_NE(error_of([&] {
              (void)parse_torchtitan_log(log, "[parallelism]\ndata_parallel_shard_degree = 4\n", 64, "tt.log");
            }).find("make 4 GPUs, not 64"),
            std::string::npos);
}

// pipeline_parallel_layers_per_stage: the stages a rank follow from the model's layers with the first/last stage's
// layer fewer counted as layers (torchtitan/distributed/pipeline_parallel.py), and the schedule's and split's rules.
TEST(TorchtitanJob, LayersPerStageGiveTheStagesARank) {
  const auto job = [](const std::string& schedule, const std::string& less) {
    return read_torchtitan_job("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"" +
                                   schedule + "\"\npipeline_parallel_first_stage_less_layers = " + less +
                                   "\npipeline_parallel_last_stage_less_layers = " + less +
                                   "\npipeline_parallel_layers_per_stage = 10\n",
                               8, "j.toml");
  };
  auto looped = job("Interleaved1F1B", "0");
  EXPECT_EQ(looped.layers_per_stage, 10);
  EXPECT_EQ(looped.layout.at("vpp"), "2");  // the default until the model's layers are known
  set_torchtitan_stages_per_rank(looped.layout, looped.layers_per_stage, 80, "j.toml");
  EXPECT_EQ(looped.layout.at("vpp"), "4");  // 80 layers, 8 stages of 10
  auto counted = job("InterleavedZeroBubble", "1");
  set_torchtitan_stages_per_rank(counted.layout, counted.layers_per_stage, 78, "j.toml");
  EXPECT_EQ(counted.layout.at("vpp"), "4");  // 78 + 2 counted layers
  EXPECT_EQ(counted.layout.at("schedule"), "zero-bubble");
  auto breadth_first = job("LoopedBFS", "0");  // torch's ScheduleLoopedBFS, a multi-stage schedule
  EXPECT_EQ(breadth_first.layout.at("schedule"), "looped-bfs");
  set_torchtitan_stages_per_rank(breadth_first.layout, breadth_first.layers_per_stage, 40, "j.toml");
  EXPECT_EQ(breadth_first.layout.at("vpp"), "2");  // 40 layers, 4 stages of 10
  const auto refused = [&](const std::string& schedule, std::int64_t layers) {
    auto j = job(schedule, "0");
    return error_of([&] { set_torchtitan_stages_per_rank(j.layout, j.layers_per_stage, layers, "j.toml"); });
  };
  EXPECT_NE(refused("Interleaved1F1B", 30).find("3 stages of the 30 layers"), std::string::npos);  // not pp's
  EXPECT_NE(refused("1F1B", 80).find("give 4 a rank; the schedule runs exactly 1"), std::string::npos);
  EXPECT_NE(refused("Interleaved1F1B", 20).find("give 1 a rank; the schedule runs at least 2"), std::string::npos);
  EXPECT_NE(refused("Interleaved1F1B", 78).find("split unevenly"), std::string::npos);  // 8 stages of 78
  EXPECT_NE(refused("ZBVZeroBubble", 120).find("give 6 a rank; the schedule runs exactly 2"), std::string::npos);
  EXPECT_NE(
      error_of([&] { (void)job("DualPipeV", "0"); })
          .find("DualPipeV: not priced (valid: 1F1B, Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble, GPipe, "
                "LoopedBFS)"),
      std::string::npos);
}

TEST(ProfilerTrace, RealA100TraceCollectives) {
  const auto trace = nlohmann::json::parse(slurp("hta_nccl_a100.json"));
  const auto k = parse_profiler_trace(trace, "hta_nccl_a100.json");
  EXPECT_EQ(k.device, "NVIDIA A100-PG509-200");
  ASSERT_EQ(k.collectives.size(), 21u);
  int allreduce = 0;
  for (const auto& c : k.collectives) {
    EXPECT_EQ(c.group_size, 2);
    EXPECT_GT(c.seconds, 0);
    if (c.collective == "allreduce") {
      ++allreduce;
      EXPECT_EQ(c.in_elements, c.out_elements);
    }
  }
  EXPECT_GT(allreduce, 0);
}

TEST(ProfilerTrace, RealMi250TraceGemmShapesAndTimes) {
  const auto trace = nlohmann::json::parse(slurp("hta_mi250_minitoy.json"));
  const auto k = parse_profiler_trace(trace, "hta_mi250_minitoy.json");
  ASSERT_EQ(k.gemms.size(), 2u);
  // aten::addmm(bias [128], x [5, 128], W [128, 128]) then aten::mm([128, 5], [5, 128]), each timed by the
  // kernels launched under its External id (addmm: the hipBLASLt GEMM and an elementwise kernel).
  EXPECT_EQ(k.gemms[0].m, 5);
  EXPECT_EQ(k.gemms[0].k, 128);
  EXPECT_EQ(k.gemms[0].n, 128);
  EXPECT_NEAR(k.gemms[0].seconds, (6.88 + 17.6) * 1e-6, 1e-12);
  EXPECT_EQ(k.gemms[1].m, 128);
  EXPECT_EQ(k.gemms[1].k, 5);
  EXPECT_EQ(k.gemms[1].n, 128);
  EXPECT_NEAR(k.gemms[1].seconds, 12.64e-6, 1e-12);
  EXPECT_DOUBLE_EQ(k.gemms[1].flops(), 2.0 * 128 * 128 * 5);
  EXPECT_EQ(k.gemms[0].dtype, "float");
}

TEST(ProfilerTrace, AttentionOpsAndMalformedTraces) {
  const auto trace = nlohmann::json::parse(R"({"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_dot_product_flash_attention", "args": {"External id": 7,
     "Input Dims": [[2, 32, 4096, 128], [2, 8, 4096, 128], [2, 8, 4096, 128]]}},
    {"ph": "X", "cat": "kernel", "name": "flash_fwd_kernel", "dur": 1500.0, "args": {"External id": 7}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {"External id": 8, "Input Dims": [[2, 3], [4, 5]]}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "dur": 1.0, "args": {"External id": 8}},
    {"ph": "X", "cat": "kernel", "name": "orphan", "dur": 1.0, "args": {"External id": 99}},
    17, {"cat": "kernel"}]})");
  const auto k = parse_profiler_trace(trace, "t.json");
  ASSERT_EQ(k.attention.size(), 1u);
  EXPECT_EQ(k.attention[0].batch, 2);
  EXPECT_EQ(k.attention[0].heads, 32);
  EXPECT_EQ(k.attention[0].seq_q, 4096);
  EXPECT_EQ(k.attention[0].head_dim, 128);
  EXPECT_FALSE(k.attention[0].backward);
  EXPECT_DOUBLE_EQ(k.attention[0].seconds, 1.5e-3);
  EXPECT_TRUE(k.gemms.empty());  // [2, 3] · [4, 5] do not multiply: no sample rather than a wrong one
  EXPECT_NE(error_of([] { (void)parse_profiler_trace(nlohmann::json::object(), "t.json"); }).find("no traceEvents"),
            std::string::npos);
}

}  // namespace
}  // namespace headroom::calibrate

// ---- calibrate --from-runs ------------------------------------------------------------------------------

#include "headroom/calibration/fit_runs.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "cli_support.hpp"
#include "watchdog.hpp"

namespace headroom::calibrate {
namespace {

// Runs whose "measured" step times are the model's own at a known compute scale: the fit must find it, and
// its leave-one-out error must beat the shipped coefficients'.
std::vector<PricedRun> runs_at_scale(const PerfCoefficients& shipped, double scale) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("h100-94gb-x4");
  std::vector<PricedRun> runs;
  for (const auto& [tp, gpus, seq] :
       std::vector<std::tuple<int, int, int>>{{2, 8, 8192}, {4, 16, 16384}, {1, 8, 4096}, {2, 32, 8192}}) {
    Layout l;
    l.tp = tp;
    l.dp = gpus / tp;
    l.seq = seq;
    l.gbs = 256;
    runs.push_back({m, c, l, estimate_perf(m, c, l, with_compute_scale(shipped, scale)).step_time_s,
                    "run-" + std::to_string(runs.size())});
  }
  return runs;
}

TEST(FitRuns, RecoversAKnownComputeScaleAndHeldOutBeatsShipped) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  const auto fit = fit_compute_scale(runs_at_scale(shipped, 0.8), shipped);
  EXPECT_NEAR(fit.compute_scale, 0.8, 1e-4);
  EXPECT_LT(RunsFit::mean(fit.held_out_errors), 1e-3);
  EXPECT_GT(RunsFit::mean(fit.shipped_errors), 0.05);  // the shipped model is 25% fast on every GEMM
  EXPECT_NEAR(fit.coefficients.gemm_efficiency, shipped.gemm_efficiency * 0.8, 1e-4);
}

// The written coefficients carry the band of their own held-out runs, said to come from them, never the shipped
// coefficients' band (computed for another fit on other runs).
TEST(FitRuns, TheBandIsTheRunsOwnHeldOutOne) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  ASSERT_TRUE(shipped.step_time_band.known);
  auto runs = runs_at_scale(shipped, 0.8);
  runs[0].measured_step_s *= 1.3;  // one run slower than the others say
  const auto fit = fit_compute_scale(runs, shipped);
  ASSERT_EQ(fit.held_out_ratios.size(), runs.size());
  const ErrorBand expected = band_from_ratios(fit.held_out_ratios, 0.9);
  EXPECT_TRUE(fit.coefficients.step_time_band.known);
  EXPECT_DOUBLE_EQ(fit.coefficients.step_time_band.high, expected.high);
  EXPECT_DOUBLE_EQ(fit.coefficients.step_time_band.low, expected.low);
  EXPECT_TRUE(fit.coefficients.step_time_bands_by_gpus.empty());
  const PerfCoefficients loaded = perf_coefficients_from_json(perf_coefficients_to_json(fit.coefficients), "written");
  EXPECT_NE(step_time_band_source(loaded, 8).find("calibrate --from-runs"), std::string::npos)
      << step_time_band_source(loaded, 8);
}

// pytorch-fsdp prices the H100 at megatron's fitted entry (a device entry): the fit scales it too, and the written
// coefficients carry it as their own, so that loading them gives the same step times.
TEST(FitRuns, ScalesTheDeviceEntryItPricesAGpuAtAndWritesItAsItsOwn) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "pytorch-fsdp");
  ASSERT_FALSE(shipped.device_gpus.empty());
  const auto fit = fit_compute_scale(runs_at_scale(shipped, 0.8), shipped);
  EXPECT_NEAR(fit.compute_scale, 0.8, 1e-4);
  EXPECT_TRUE(fit.coefficients.device_gpus.empty());
  const PerfCoefficients loaded = perf_coefficients_from_json(perf_coefficients_to_json(fit.coefficients), "written");
  const auto run = runs_at_scale(shipped, 0.8).front();
  EXPECT_NEAR(estimate_perf(run.model, run.cluster, run.layout, loaded).step_time_s, run.measured_step_s,
              1e-9 * run.measured_step_s);
}

TEST(FitRuns, EfficienciesStayPhysicalAndOneRunIsNotEnough) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  // Step times no efficiency ≤ 1 reaches: the scale stops where the fastest efficiency hits the peak.
  auto runs = runs_at_scale(shipped, 1.0);
  for (auto& r : runs) r.measured_step_s *= 0.2;
  const auto fit = fit_compute_scale(runs, shipped);
  EXPECT_LE(fit.coefficients.gemm_efficiency, 1.0);
  EXPECT_LE(fit.coefficients.attention_efficiency, 1.0);
  EXPECT_NEAR(fit.compute_scale, max_compute_scale(shipped), 1e-3 * max_compute_scale(shipped));
  runs.resize(1);
  try {
    (void)fit_compute_scale(runs, shipped);
    FAIL() << "one run fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least two runs"), std::string::npos) << e.what();
  }
}

// Peaks measured on a cluster whose stack holds 5 GiB more than the shipped fixed term per GPU (say a
// bigger NCCL buffer pool): the fit finds the fixed term from the runs, its leave-one-out error beats the shipped
// residual's, and a run that ran out of memory bounds it from below.
std::vector<MemoryRun> memory_runs(double fixed_bytes) {
  const SpecLibrary lib = test::library();
  const ModelSpec m = lib.model("llama3.1-8b");
  const ClusterSpec c = lib.cluster("h100-94gb-x4");
  ResidualModel truth = lib.framework("megatron").residual;
  truth.fixed_bytes = fixed_bytes;
  std::vector<MemoryRun> runs;
  for (const auto& [tp, gpus, seq] :
       std::vector<std::tuple<int, int, int>>{{2, 8, 8192}, {4, 16, 16384}, {1, 8, 4096}, {2, 32, 8192}}) {
    Layout l = default_layout(lib.framework("megatron"));
    l.tp = tp;
    l.dp = gpus / tp;
    l.seq = seq;
    l.gbs = 256;
    runs.push_back({m, c, l, false, peak_memory_bytes(m, c, l, truth), "run-" + std::to_string(runs.size())});
  }
  return runs;
}

TEST(FitRuns, RecoversTheFixedMemoryTermFromMeasuredPeaks) {
  const ResidualModel shipped = test::library().framework("megatron").residual;
  const double truth = shipped.fixed_bytes + 5 * kGiB;
  const FixedMemoryFit fit = fit_fixed_memory(memory_runs(truth), shipped);
  EXPECT_TRUE(fit.identified);
  EXPECT_NEAR(fit.fixed_bytes, truth, 1e-6 * truth);
  ASSERT_EQ(fit.held_out_errors.size(), 4u);
  EXPECT_LT(RunsFit::mean(fit.held_out_errors), 1e-6);
  EXPECT_GT(RunsFit::mean(fit.shipped_errors), 0.05);
  // A run that ran out of memory, which the median would predict to fit, moves the fixed term up to explain it.
  auto runs = memory_runs(truth);
  MemoryRun oom = runs.front();
  oom.oom = true;
  oom.measured_peak_bytes = 0;
  oom.layout.mbs = 2;  // more activations than run-0, still under capacity at the true fixed term
  const double base = peak_memory_bytes(oom.model, oom.cluster, oom.layout, [&] {
    ResidualModel r = shipped;
    r.fixed_bytes = 0;
    return r;
  }());
  runs.push_back(oom);
  const FixedMemoryFit bounded = fit_fixed_memory(runs, shipped);
  EXPECT_GE(bounded.fixed_bytes + base, oom.cluster.gpu.usable_memory_bytes);
  EXPECT_EQ(bounded.false_fits_fitted, 0);
  // One peak is not enough to fit and check.
  runs.resize(1);
  EXPECT_FALSE(fit_fixed_memory(runs, shipped).identified);
}

// The leave-one-out errors are those of refitting on every run but one: the compute scale (found on a grid shared by
// the runs left out, to within 1e-6 of the step-time error) and the memory fixed term (exactly).
TEST(FitRuns, LeaveOneOutIsRefittingWithoutEachRun) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  auto runs = runs_at_scale(shipped, 0.8);
  const auto more = runs_at_scale(shipped, 0.7);
  runs.insert(runs.end(), more.begin(), more.end());
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].measured_step_s *= 1.0 + 0.03 * static_cast<double>(i % 3);
  const RunsFit fit = fit_compute_scale(runs, shipped);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    auto others = runs;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    const double refit = fit_compute_scale(others, shipped).compute_scale;
    EXPECT_NEAR(fit.held_out_errors[i], step_time_error(runs[i], with_compute_scale(shipped, refit)), 1e-6) << i;
  }
  const ResidualModel residual = test::library().framework("megatron").residual;
  auto peaks = memory_runs(residual.fixed_bytes + 5 * kGiB);
  for (std::size_t i = 0; i < peaks.size(); ++i) peaks[i].measured_peak_bytes += static_cast<double>(i) * kGiB;
  MemoryRun oom = peaks.front();  // bounds the fixed term from below, in every fit but its own
  oom.oom = true;
  oom.measured_peak_bytes = 0;
  oom.layout.mbs = 4;
  peaks.push_back(oom);
  const FixedMemoryFit memory = fit_fixed_memory(peaks, residual);
  ASSERT_EQ(memory.held_out_errors.size(), peaks.size() - 1);
  for (std::size_t i = 0; i + 1 < peaks.size(); ++i) {
    auto others = peaks;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    ResidualModel refit = residual;
    refit.fixed_bytes = fit_fixed_memory(others, residual).fixed_bytes;
    const MemoryRun& r = peaks[i];
    EXPECT_EQ(memory.held_out_errors[i],
              std::fabs(peak_memory_bytes(r.model, r.cluster, r.layout, refit) - r.measured_peak_bytes) /
                  r.measured_peak_bytes)
        << i;
  }
}

// Thousands of runs are priced and fitted in time about linear in their number (the leave-one-out fits share their
// work), with a progress line at every tenth of them on stderr, plain lines in a log file.
TEST(FromRunsCli, ThousandsOfRunsAreFittedInLinearTimeWithProgress) {
  std::ifstream in(kRuns / "runs_written.csv");
  std::string header, trained, oom;
  std::getline(in, header), std::getline(in, trained), std::getline(in, oom);
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_from_runs_many_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir / "runs.csv");
    csv << header << "\n";
    for (int i = 0; i < 2000; ++i) csv << (i % 2 == 0 ? trained : oom) << "\n";
  }
  const std::string out = (dir / "fitted.json").string();
  const test::CliResult r = test::within(60, "calibrate --from-runs of 2,000 runs", [&] {
    return test::run_cli({"calibrate", "--from-runs", (dir / "runs.csv").string(), "--out", out});
  });
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("leave-one-out over 1000 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("calibrate --from-runs: 200/2000 runs priced (10%)\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("calibrate --from-runs: 2000/2000 runs priced (100%)\n"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 10) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(FromRunsCli, WritesCoefficientsThatProfileApplies) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  const auto runs = runs_at_scale(shipped, 0.8);
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_from_runs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir / "runs.csv");
    csv << "model,cluster,gpus,tp,seq,gbs,outcome,step_time_s,peak_memory_gib\n";
    for (const auto& r : runs)
      csv << "llama3.1-8b,h100-94gb-x4," << r.layout.gpus() << "," << r.layout.tp << "," << r.layout.seq << ",256,ok,"
          << std::setprecision(17) << r.measured_step_s << ",60\n";
    csv << "llama3.1-8b,h100-94gb-x4,4,1,131072,256,oom,,\n";
  }
  const auto out = dir / "fitted.json";
  auto res = test::run_cli({"calibrate", "--from-runs", (dir / "runs.csv").string(), "--out", out.string()});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_NE(res.out.find("compute efficiency x0.800"), std::string::npos) << res.out;
  EXPECT_NE(res.out.find("verdicts 5 of 5 right"), std::string::npos) << res.out;
  // The written coefficients predict the "measured" step time through --profile.
  res = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "h100-94gb-x4", "--gpus", "8", "--tp", "2",
                       "--seq", "8192", "--gbs", "256", "--profile", out.string(), "--json"});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_NEAR(nlohmann::json::parse(res.out)["perf"]["step_time_s"].get<double>(), runs[0].measured_step_s,
              1e-3 * runs[0].measured_step_s);
  // Refusals: nothing to fit; a framework that is not the one calibrated; a bad cell names file, line and column.
  {
    std::ofstream csv(dir / "bad.csv");
    csv << "model,cluster,gpus,seq,outcome\nllama3.1-8b,h100-94gb-x4,8,8192,oom\n";
  }
  std::filesystem::remove(out);
  res = test::run_cli({"calibrate", "--from-runs", (dir / "bad.csv").string(), "--out", out.string()});
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find("at least two are needed"), std::string::npos) << res.err;
  EXPECT_FALSE(std::filesystem::exists(out));
  {
    std::ofstream csv(dir / "bad.csv");
    csv << "model,cluster,gpus,seq,tp,framework,outcome\nllama3.1-8b,h100-94gb-x4,8,8192,3,megatron,oom\n"
        << "llama3.1-8b,h100-94gb-x4,8,8192,1,pytorch-fsdp,oom\n";
  }
  res = test::run_cli({"calibrate", "--from-runs", (dir / "bad.csv").string(), "--out", out.string()});
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find("bad.csv:2: "), std::string::npos) << res.err;
  EXPECT_NE(res.err.find("--tp"), std::string::npos) << res.err;
  std::filesystem::remove_all(dir);
}

// Runs of h100-94gb-x4 at a known compute scale as a CSV in `dir`; `extra` appended as rows.
std::filesystem::path runs_csv(const std::filesystem::path& dir, const std::string& extra = "") {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  std::filesystem::create_directories(dir);
  std::ofstream csv(dir / "runs.csv");
  csv << "model,cluster,gpus,tp,seq,gbs,outcome,step_time_s,peak_memory_gib\n";
  for (const auto& r : runs_at_scale(shipped, 0.8))
    csv << "llama3.1-8b,h100-94gb-x4," << r.layout.gpus() << "," << r.layout.tp << "," << r.layout.seq << ",256,ok,"
        << std::setprecision(17) << r.measured_step_s << ",60\n";
  csv << extra;
  return dir / "runs.csv";
}

// The coefficients of --from-runs name the GPUs and clusters they were fitted on; --profile on another GPU is refused
// (its scale and held-out band were measured on these GPUs only), on theirs it applies.
TEST(FromRunsCli, TheProfileNamesItsGpusAndAnotherGpuIsRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_from_runs_gpus_" + std::to_string(::getpid()));
  const auto out = dir / "fitted.json";
  auto res = test::run_cli({"calibrate", "--from-runs", runs_csv(dir).string(), "--out", out.string()});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_NE(res.out.find("use it with --profile on h100-94gb, the GPUs of these runs"), std::string::npos) << res.out;
  std::ifstream in(out);
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["fitted_on"], (nlohmann::json{{"gpus", {"h100-94gb"}}, {"clusters", {"h100-94gb-x4"}}}));
  const std::vector<std::string> estimate = {"estimate", "--model",   "llama3.1-8b", "--gpus", "8",
                                             "--tp",     "2",         "--seq",       "8192",   "--gbs",
                                             "256",      "--profile", out.string()};
  auto on = estimate;
  on.insert(on.end(), {"--cluster", "h100-94gb-x4"});
  EXPECT_EQ(test::run_cli(on).code, 0);
  auto other = estimate;
  other.insert(other.end(), {"--cluster", "dgx-a100-80gb"});
  res = test::run_cli(other);
  EXPECT_EQ(res.code, 2);
  EXPECT_TRUE(res.out.empty()) << res.out;
  EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
  EXPECT_NE(res.err.find("was fitted on runs of h100-94gb (clusters h100-94gb-x4), not of a100-80gb"),
            std::string::npos)
      << res.err;
  std::filesystem::remove_all(dir);
}

// A run its GPU cannot have run, and flags --from-runs and --ingest do not use: refused in one line, nothing written.
TEST(FromRunsCli, ImpossibleRunsAndInertFlagsAreRefusedAndNothingWritten) {
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_from_runs_bad_" + std::to_string(::getpid()));
  const auto out = dir / "fitted.json";
  const auto refused = [&](const std::vector<std::string>& args, const std::string& what) {
    const auto res = test::run_cli(args);
    EXPECT_EQ(res.code, 2) << what;
    EXPECT_TRUE(res.out.empty()) << res.out;
    EXPECT_EQ(std::count(res.err.begin(), res.err.end(), '\n'), 1) << res.err;
    EXPECT_NE(res.err.find(what), std::string::npos) << res.err;
    EXPECT_FALSE(std::filesystem::exists(out));
  };
  const auto big = runs_csv(dir, "llama3.1-8b,h100-94gb-x4,8,2,8192,256,ok,,200\n").string();
  refused({"calibrate", "--from-runs", big, "--out", out.string()},
          big + ":6: peak_memory_gib 200 is more than the h100-94gb has");
  const auto good = runs_csv(dir).string();
  refused({"calibrate", "--from-runs", good, "--backend", "cuda", "--out", out.string()},
          "--backend does nothing with --from-runs");
  refused({"calibrate", "--from-runs", good, "--quick", "--out", out.string()},
          "--quick does nothing with --from-runs");
  refused({"calibrate", "--ingest", good, "--model", "llama3.1-8b", "--out", out.string()},
          "--model does nothing with --ingest");
  refused({"calibrate", "--ingest", good, "--backend", "cpu", "--out", out.string()},
          "--backend does nothing with --ingest");
  refused({"calibrate", "--cluster", "dgx-h100", "--out", out.string()},
          "--cluster does nothing without --ingest or --from-runs");
  std::filesystem::remove_all(dir);
}

// The memory section: written when the peaks identify the fixed term and it predicts the runs left out better;
// `--profile` then prices memory with it (estimate's peak is the measured one), and refuses another framework.
TEST(FromRunsCli, WritesTheFixedMemoryTermThatProfileApplies) {
  const PerfCoefficients shipped = default_perf_coefficients(test::library(), "megatron");
  const auto steps = runs_at_scale(shipped, 0.8);
  const auto peaks = memory_runs(test::library().framework("megatron").residual.fixed_bytes + 5 * kGiB);
  const auto dir = std::filesystem::temp_directory_path() / ("headroom_from_runs_memory_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream csv(dir / "runs.csv");
    csv << "model,cluster,gpus,tp,seq,gbs,outcome,step_time_s,peak_memory_gib\n" << std::setprecision(17);
    for (std::size_t i = 0; i < steps.size(); ++i)
      csv << "llama3.1-8b,h100-94gb-x4," << steps[i].layout.gpus() << "," << steps[i].layout.tp << ","
          << steps[i].layout.seq << ",256,ok," << steps[i].measured_step_s << "," << peaks[i].measured_peak_bytes / kGiB
          << "\n";
  }
  const auto out = dir / "fitted.json";
  auto res = test::run_cli({"calibrate", "--from-runs", (dir / "runs.csv").string(), "--out", out.string()});
  ASSERT_EQ(res.code, 0) << res.err;
  EXPECT_NE(res.out.find("memory fixed term written"), std::string::npos) << res.out;
  res = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "h100-94gb-x4", "--gpus", "16", "--tp", "4",
                       "--seq", "16384", "--gbs", "256", "--profile", out.string(), "--json"});
  ASSERT_EQ(res.code, 0) << res.err;
  const double peak = nlohmann::json::parse(res.out)["memory"]["peak_gib"].get<double>();
  EXPECT_NEAR(peak, peaks[1].measured_peak_bytes / kGiB, 1e-6 * peak);
  res = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "h100-94gb-x4", "--gpus", "16", "--tp", "4",
                       "--seq", "16384", "--framework", "pytorch-fsdp", "--profile", out.string()});
  EXPECT_EQ(res.code, 2);
  EXPECT_NE(res.err.find("memory fit is for framework megatron, not pytorch-fsdp"), std::string::npos) << res.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace headroom::calibrate
