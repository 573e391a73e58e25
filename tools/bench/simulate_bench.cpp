// Events per second of `headroom simulate`: a 1F1B step of llama3.1-70b on 1,024 A100s (dgx-a100-80gb),
// t = 8, p = 8, d = 16, 64 micro-batches per pipeline, seq 8192; and llama3.1-405b on 16,384 H100s (dgx-h100)
// two ways: ZeRO-3 over a DP ring of 2,048 (t = 8, one micro-batch) and Llama 3's own layout, t = 8,
// p = 16 with 7 + 14x8 + 7 layers, d = 128, 8 micro-batches per pipeline.
#include <benchmark/benchmark.h>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/simulator/step.hpp"

namespace {

using namespace headroom;

// Simulates `l` of `model` on `cluster` (megatron coefficients) once per iteration; reports events and tasks.
void simulate(benchmark::State& state, const char* model_name, const char* cluster_name, const Layout& l) {
  const SpecLibrary lib{HEADROOM_BENCH_DATA_DIR};
  const ModelSpec model = lib.model(model_name);
  const ClusterSpec cluster = lib.cluster(cluster_name);
  const PerfCoefficients coefficients = default_perf_coefficients(lib, "megatron");
  std::int64_t events = 0, tasks = 0;
  for ([[maybe_unused]] auto _ : state) {
    const sim::StepResult r = sim::simulate_step(model, cluster, l, coefficients);
    events += r.run.events;
    tasks = static_cast<std::int64_t>(boost::num_vertices(r.graph));
    benchmark::DoNotOptimize(r.step_time_s);
  }
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["events"] = static_cast<double>(events) / static_cast<double>(state.iterations());
  state.counters["tasks"] = static_cast<double>(tasks);
  state.counters["gpus"] = static_cast<double>(l.gpus());
}

Layout megatron_layout() { return default_layout(SpecLibrary{HEADROOM_BENCH_DATA_DIR}.framework("megatron")); }

void BM_Step70bOn1024(benchmark::State& state) {
  Layout l = megatron_layout();
  l.tp = 8;
  l.pp = 8;
  l.dp = 16;
  l.mbs = 1;
  l.gbs = 64 * l.dp;
  l.seq = 8192;
  l.recompute = Recompute::selective;
  simulate(state, "llama3.1-70b", "dgx-a100-80gb", l);
}
BENCHMARK(BM_Step70bOn1024)->Unit(benchmark::kMillisecond);

void BM_Step405bOn16384(benchmark::State& state) {
  Layout l = megatron_layout();
  l.tp = 8;
  l.seq = 8192;
  l.mbs = 1;
  l.recompute = Recompute::full;
  if (state.range(0) == 0) {  // ZeRO-3 over 2,048
    l.dp = 2048;
    l.sharding = {Shard::global, Shard::global, Shard::global};
    l.gbs = 2048;
  } else {  // Llama 3: PP 16, uneven ends
    l.pp = 16;
    l.dp = 128;
    l.split.first_stage_layers = l.split.last_stage_layers = 7;
    l.gbs = 8 * l.dp;
  }
  simulate(state, "llama3.1-405b", "dgx-h100", l);
}
BENCHMARK(BM_Step405bOn16384)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
