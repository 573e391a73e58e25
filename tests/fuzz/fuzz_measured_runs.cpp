// What users measure, as `calibrate --from-runs` and the log readers take it: the input is read as a runs
// table (CSV / JSON Lines), a Megatron-LM log, a torchtitan log (with itself as its TOML) and a PyTorch
// profiler trace. Each either returns runs and samples that hold the readers' contract or throws Error.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.hpp"
#include "headroom/ingest/measured_runs.hpp"

namespace {

using namespace headroom;

// The integer of a layout cell, where it is one (the grammar of the knobs: digits only).
std::optional<double> integer_cell(const calibrate::MeasuredRun& r, const char* column) {
  const auto it = r.layout.find(column);
  if (it == r.layout.end() || it->second.empty() || it->second.size() > 12) return std::nullopt;
  for (const char c : it->second)
    if (c < '0' || c > '9') return std::nullopt;
  return std::stod(it->second);
}

void check(const calibrate::MeasuredRun& r) {
  for (const auto& x : {r.tflops_per_gpu, r.tokens_per_s, r.step_time_s, r.peak_memory_gib})
    if (x) fuzz::require(fuzz::positive(*x), "measurements are finite and positive");
  // A table's step time and tokens/s, both given with gbs and seq, agree: the reader refuses them otherwise.
  const auto gbs = integer_cell(r, "gbs"), seq = integer_cell(r, "seq");
  if (r.step_time_s && r.tokens_per_s && gbs && seq && *gbs > 0 && *seq > 0) {
    const double implied = *gbs * *seq / *r.step_time_s;
    fuzz::require(std::fabs(*r.tokens_per_s - implied) <= calibrate::kMeasuredTolerance * implied * (1 + 1e-12),
                  "tokens_per_s agrees with gbs x seq / step_time_s");
  }
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
  // The two table readers reached past their first line: the input as CSV rows under a header of the columns the
  // checks relate, and as the body of one JSON Lines object.
  const std::string header = "model,gpus,tp,seq,gbs,outcome,step_time_s,tokens_per_s,peak_memory_gib\n";
  fuzz::value_or_error([&] {
    for (const auto& r : calibrate::parse_runs_table(header + std::string(text), "runs.csv")) check(r);
  });
  fuzz::value_or_error([&] {
    for (const auto& r : calibrate::parse_runs_table("{" + std::string(text), "runs.jsonl")) check(r);
  });
  // The bounds of a resolved run: refuse or accept, never anything else.
  fuzz::value_or_error([&] {
    for (const auto& r : calibrate::parse_runs_table(text, "runs.csv"))
      calibrate::check_run_bounds(r, {"h100-94gb", 93.13, 989.4e12, 3e16, 64 * 8192, 8});
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
