// Estimates per second of the memory model: the allocation-free peak (what a layout search calls) and the
// full per-stage report (what `estimate` prints).
#include <benchmark/benchmark.h>

#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/plan.hpp"
#include "headroom/estimator/throughput.hpp"

namespace {

using namespace headroom;

struct Fixture {
  SpecLibrary lib{HEADROOM_BENCH_DATA_DIR};
  ModelSpec model = lib.model("llama3.1-70b");
  ClusterSpec cluster = lib.cluster("dgx-h100");
  FrameworkProfile framework = lib.framework("megatron");
  std::vector<Layout> layouts;

  Fixture() {
    for (std::int64_t t : {1, 2, 4, 8})
      for (std::int64_t c : {1, 2, 4})
        for (std::int64_t p : {1, 2, 4, 8, 16})
          for (std::int64_t b : {1, 2, 4}) {
            Layout l = default_layout(framework);
            l.tp = t;
            l.cp = c;
            l.pp = p;
            l.mbs = b;
            l.seq = 8192;
            l.gbs = 2048;
            l.dp = 1024 / (t * c * p);
            layouts.push_back(l);
          }
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void BM_PeakMemory(benchmark::State& state) {
  const Fixture& f = fixture();
  std::size_t i = 0;
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(peak_memory_bytes(f.model, f.cluster, f.layouts[i], f.framework.residual));
    i = (i + 1) % f.layouts.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("estimates");
}
BENCHMARK(BM_PeakMemory);

void BM_EstimateAllStages(benchmark::State& state) {
  const Fixture& f = fixture();
  std::size_t i = 0;
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(estimate_memory(f.model, f.cluster, f.layouts[i], f.framework.residual));
    i = (i + 1) % f.layouts.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("estimates");
}
BENCHMARK(BM_EstimateAllStages);

// The step time of one layout with the coefficients resolved once (what rank and Planner.estimate_many call).
void BM_EstimatePerf(benchmark::State& state) {
  const Fixture& f = fixture();
  const PerfCoefficients k = default_perf_coefficients(f.lib, f.framework.name);
  const PerfContext ctx(k, f.cluster);
  std::size_t i = 0;
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(estimate_perf(f.model, ctx, f.layouts[i]));
    i = (i + 1) % f.layouts.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("estimates");
}
BENCHMARK(BM_EstimatePerf);

// A layout from what a user asks for, checked (build_layout: defaults, cross-field checks, validate_layout).
void BM_BuildLayout(benchmark::State& state) {
  const Fixture& f = fixture();
  std::size_t i = 0;
  for ([[maybe_unused]] auto _ : state) {
    const Layout& l = f.layouts[i];
    LayoutRequest r;
    r.tp = l.tp, r.cp = l.cp, r.pp = l.pp, r.mbs = 1, r.seq = l.seq, r.gbs = 8192, r.dp = l.dp;
    benchmark::DoNotOptimize(build_layout(f.model, f.framework, r));
    i = (i + 1) % f.layouts.size();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("layouts");
}
BENCHMARK(BM_BuildLayout);

// What headroom.Planner.estimate does below Python: the knobs of one Llama 3.1 8B layout on H100s into a checked
// layout (plan_layout), then its memory and time as the one result type (estimate), the plan resolved once.
void BM_PlanEstimate(benchmark::State& state) {
  PlanRequest request;
  request.model = "llama3.1-8b", request.gpu = "h100-94gb", request.data_dir = HEADROOM_BENCH_DATA_DIR;
  const Plan plan = resolve_plan(request);
  const PlanContext context(plan);
  for ([[maybe_unused]] auto _ : state) {
    KnobSettings k;
    k.set(KnobId::seq, std::int64_t{8192}), k.set(KnobId::tp, std::int64_t{2});
    k.set(KnobId::gpus, std::int64_t{8}), k.set(KnobId::gbs, std::int64_t{1024});
    benchmark::DoNotOptimize(estimate(plan, context, plan_layout(plan, k)));
  }
  state.SetItemsProcessed(state.iterations());
  state.SetLabel("estimates");
}
BENCHMARK(BM_PlanEstimate);

}  // namespace

BENCHMARK_MAIN();
