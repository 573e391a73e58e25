// Layouts per second of `headroom rank`: llama3.1-405b on 16,384 H100s (dgx-h100), seq 8192, gbs 2048, and
// DeepSeek-V3 on 2,048 H800s — every t, c, p, virtual stages, micro-batch, PaRO sharding, recompute and SP choice
// (and expert split), pruned by memory.
#include <benchmark/benchmark.h>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/search.hpp"

namespace {

using namespace headroom;

// `as_cli`: the framework's shardings, recompute modes and schedules only, as `headroom rank` searches (the 405B
// benchmark keeps every PaRO sharding, as it was first measured).
void rank(benchmark::State& state, const char* model_name, const char* cluster_name, std::int64_t gpus,
          std::int64_t seq, std::int64_t gbs, bool as_cli) {
  const SpecLibrary lib{HEADROOM_BENCH_DATA_DIR};
  const ModelSpec model = lib.model(model_name);
  const ClusterSpec cluster = lib.cluster(cluster_name);
  const FrameworkProfile framework = lib.framework("megatron");
  const PerfCoefficients coefficients = default_perf_coefficients(lib, "megatron");
  SearchOptions o;
  o.gpus = gpus;
  o.seq = seq;
  o.gbs = gbs;
  if (as_cli) restrict_to_framework(o, framework);
  std::int64_t evaluated = 0;
  for ([[maybe_unused]] auto _ : state) {
    const SearchResult r = rank_layouts(model, cluster, default_layout(framework), framework.residual, coefficients, o);
    evaluated += r.evaluated;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
  state.counters["layouts"] = static_cast<double>(evaluated) / static_cast<double>(state.iterations());
}
void BM_Rank405bOn16384(benchmark::State& state) { rank(state, "llama3.1-405b", "dgx-h100", 16384, 8192, 2048, false); }
BENCHMARK(BM_Rank405bOn16384)->Unit(benchmark::kMillisecond);

// DeepSeek-V3 on 2,048 H800 (h800-ib) as `headroom rank` searches it, the expert split (ep, etp) too.
void BM_RankDeepSeekV3On2048(benchmark::State& state) {
  rank(state, "deepseek-v3", "h800-ib", 2048, 4096, 15360, true);
}
BENCHMARK(BM_RankDeepSeekV3On2048)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
