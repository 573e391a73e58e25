// Relations the model must keep between layouts, whatever its coefficients: the same job spelled two ways prices the
// same, and twice the data-parallel GPUs at a fixed global batch halves each GPU's compute and leaves the model's
// FLOPs as they were.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli_support.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/plan.hpp"

namespace headroom {
namespace {

const Plan& plan() {
  static const Plan p = resolve_plan({"llama3.1-8b", "", "dgx-h100", "megatron", "", test::library().data_dir(), {}});
  return p;
}

KnobSettings knobs_of(std::initializer_list<std::pair<KnobId, KnobValue>> values) {
  KnobSettings k;
  for (const auto& [id, v] : values) k.set(id, v);
  return k;
}

Estimate priced(const KnobSettings& k) {
  static const PlanContext context(plan());
  return estimate(plan(), context, plan_layout(plan(), k));
}

using I = std::int64_t;

// Doubling d at a fixed global batch halves the micro-batches of each pipeline: each GPU computes half as much, the
// step does the same FLOPs, and what is not sharded over DP stays per GPU as it was (ZeRO-1: the optimizer halves).
TEST(Metamorphic, TwiceTheDataParallelGpusAtFixedWork) {
  for (const I pp : {I{1}, I{2}}) {
    const auto at = [pp](I gpus) {
      return priced(knobs_of(
          {{KnobId::tp, I{2}}, {KnobId::pp, pp}, {KnobId::gpus, gpus}, {KnobId::seq, I{8192}}, {KnobId::gbs, I{64}}}));
    };
    const Estimate one = at(16), two = at(32);
    EXPECT_DOUBLE_EQ(two.perf.model_flops_per_step, one.perf.model_flops_per_step) << pp;
    EXPECT_NEAR(two.perf.breakdown.compute_s(), one.perf.breakdown.compute_s() / 2, 1e-9 * one.perf.step_time_s) << pp;
    EXPECT_EQ(two.memory.stages[0].params, one.memory.stages[0].params) << pp;
    EXPECT_EQ(two.memory.stages[0].grads, one.memory.stages[0].grads) << pp;
    EXPECT_NEAR(static_cast<double>(two.memory.stages[0].optimizer), one.memory.stages[0].optimizer / 2.0, 1.0) << pp;
    EXPECT_LT(two.perf.step_time_s, one.perf.step_time_s) << pp;
  }
}

// The same layout spelled another way: --gpus or --dp, SP on or off where there is no TP to shard over, the
// schedule named or not where there is no pipeline, the framework's default recompute named or left out.
TEST(Metamorphic, EquivalentSpellingsPriceTheSame) {
  const auto same = [](const KnobSettings& a, const KnobSettings& b, const char* what) {
    EXPECT_EQ(to_json(priced(a)), to_json(priced(b))) << what;
  };
  same(knobs_of({{KnobId::tp, I{2}}, {KnobId::gpus, I{16}}, {KnobId::seq, I{8192}}}),
       knobs_of({{KnobId::tp, I{2}}, {KnobId::dp, I{8}}, {KnobId::seq, I{8192}}}), "gpus or dp");
  same(knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}, {KnobId::sequence_parallel, true}}),
       knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}, {KnobId::sequence_parallel, false}}), "SP at t = 1");
  same(knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}, {KnobId::schedule, std::string("1f1b")}}),
       knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}}), "the default schedule at p = 1");
  same(knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}, {KnobId::recompute, std::string("none")}}),
       knobs_of({{KnobId::gpus, I{8}}, {KnobId::seq, I{8192}}}), "the default recompute");
}

// The command line's flags in any order, under their Megatron-LM spellings or headroom's, give one document.
TEST(Metamorphic, FlagOrderAndSpellingDoNotMatter) {
  const std::vector<std::vector<std::string>> pairs = {{"--tp", "2"},
                                                       {"--pp", "2"},
                                                       {"--gpus", "16"},
                                                       {"--seq", "4096"},
                                                       {"--gbs", "64"},
                                                       {"--mbs", "2"},
                                                       {"--recompute", "selective"}};
  const std::vector<std::string> megatron = {"--tensor-model-parallel-size",
                                             "--pipeline-model-parallel-size",
                                             "--world-size",
                                             "--seq-length",
                                             "--global-batch-size",
                                             "--micro-batch-size",
                                             "--recompute-granularity"};
  const auto run = [](const std::vector<std::vector<std::string>>& flags) {
    std::vector<std::string> args = {"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--json"};
    for (const auto& f : flags) args.insert(args.end(), f.begin(), f.end());
    return test::run_cli(args);
  };
  const auto first = run(pairs);
  ASSERT_EQ(first.code, 0) << first.err;
  std::mt19937 rng(7);
  for (int i = 0; i < 5; ++i) {
    auto shuffled = pairs;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(run(shuffled).out, first.out);
  }
  auto aliased = pairs;
  for (std::size_t i = 0; i < aliased.size(); ++i) aliased[i][0] = megatron[i];
  EXPECT_EQ(run(aliased).out, first.out);
}

}  // namespace
}  // namespace headroom
