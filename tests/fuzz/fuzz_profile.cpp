// `--profile FILE` of estimate, rank and mtsl: performance coefficients (data/perf format) or a calibration
// profile (data/schema/profile.schema.json), read by the request pipeline's with_profile (plan.hpp), then used for
// one estimate as the CLI would: what the file sets must give a finite, positive step time (and a step-time band at
// the layout's GPU count) or an Error.
#include <cstdint>

#include "fuzz_support.hpp"
#include "headroom/estimator/plan.hpp"
#include "headroom/estimator/throughput.hpp"

namespace {

using namespace headroom;

const SpecLibrary& library() {
  static const SpecLibrary lib(fuzz::data_dir());
  return lib;
}

const Plan& resolved() {
  static const Plan p = resolve_plan({"llama3.1-8b", "", "dgx-h100", "megatron", "", fuzz::data_dir(), {}});
  return p;
}

// Two nodes: TP inside a node, DP across both, so that intra- and inter-node links are both timed.
const Layout& layout() {
  static const Layout l = [] {
    KnobSettings k;
    k.set(KnobId::tp, std::int64_t{2});
    k.set(KnobId::gpus, std::int64_t{16});
    k.set(KnobId::seq, std::int64_t{4096});
    return plan_layout(resolved(), k);
  }();
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz::write_input("profile.json", data, size);
  fuzz::value_or_error([&] {
    const Plan r = with_profile(resolved(), path.string(), library());
    const PerfEstimate e = estimate_perf(r.model, r.cluster, layout(), r.coefficients);
    fuzz::require(fuzz::positive(e.step_time_s), "a finite, positive step time");
    // The held-out band at this GPU count (uncertainty.by_gpus or the pooled one), as estimate --json reports it.
    const ErrorBand& band = step_time_band_for(r.coefficients, layout().gpus());
    fuzz::require(!band.known || (band.lower(e.step_time_s) >= 0 && band.upper(e.step_time_s) >= e.step_time_s),
                  "a step-time band around the step time, from at least 0");
    fuzz::require(!step_time_band_source(r.coefficients, layout().gpus()).empty(), "a named band source");
  });
  return 0;
}
