// What users measure, as `calibrate --from-runs` and the log readers take it: the input is read as a runs
// table (CSV / JSON Lines), a Megatron-LM log, a torchtitan log (with itself as its TOML) and a PyTorch
// profiler trace. Each either returns runs and samples that hold the readers' contract or throws Error.
#include <cmath>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

namespace {

using namespace headroom;

void check(const calibrate::MeasuredRun& r) {
  for (const auto& x : {r.tflops_per_gpu, r.tokens_per_s, r.step_time_s, r.peak_memory_gib})
    if (x) fuzz::require(fuzz::non_negative(*x), "measurements are finite and non-negative");
  if (r.outcome == calibrate::RunOutcome::ok && r.source.find(':') != std::string::npos)
    fuzz::require(r.tflops_per_gpu || r.tokens_per_s || r.step_time_s || r.peak_memory_gib,
                  "an ok row of a table has a measurement");
  if (r.model) fuzz::require(r.model->hidden_size > 0 && r.model->num_layers > 0, "a model read has a shape");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::value_or_error([&] {
    for (const auto& r : calibrate::parse_runs_table(text, "runs.csv")) check(r);
  });
  fuzz::value_or_error([&] { check(calibrate::parse_megatron_log(text, "megatron.log")); });
  fuzz::value_or_error([&] { check(calibrate::parse_torchtitan_log(text, text, 8, "torchtitan.log")); });
  fuzz::value_or_error([&] {
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) return;
    const auto k = calibrate::parse_profiler_trace(j, "trace.json");
    for (const auto& g : k.gemms)
      fuzz::require(g.m > 0 && g.n > 0 && g.k > 0 && g.seconds >= 0, "GEMM shapes positive");
    for (const auto& c : k.collectives) fuzz::require(c.seconds > 0, "collective times positive");
  });
  return 0;
}
