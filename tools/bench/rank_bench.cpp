// Layouts per second of `headroom rank`: llama3.1-405b on 16,384 H100s (dgx-h100), seq 8192, gbs 2048 — every
// t, c, p, virtual stages, micro-batch, PaRO sharding, recompute and SP choice, pruned by memory.
#include <benchmark/benchmark.h>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/search.hpp"

namespace {

using namespace headroom;

void BM_Rank405bOn16384(benchmark::State& state) {
  const SpecLibrary lib{HEADROOM_BENCH_DATA_DIR};
  const ModelSpec model = lib.model("llama3.1-405b");
  const ClusterSpec cluster = lib.cluster("dgx-h100");
  const FrameworkProfile framework = lib.framework("megatron");
  const PerfCoefficients coefficients = default_perf_coefficients(lib, "megatron");
  SearchOptions o;
  o.gpus = 16384;
  o.seq = 8192;
  o.gbs = 2048;
  std::int64_t evaluated = 0;
  for ([[maybe_unused]] auto _ : state) {
    const SearchResult r = rank_layouts(model, cluster, default_layout(framework), framework.residual, coefficients, o);
    evaluated += r.evaluated;
    benchmark::DoNotOptimize(r.best.data());
  }
  state.counters["layouts_per_s"] = benchmark::Counter(static_cast<double>(evaluated), benchmark::Counter::kIsRate);
  state.counters["layouts"] = static_cast<double>(evaluated) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_Rank405bOn16384)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
