// `headroom calibrate --from-runs FILE`: a user's own measured runs (a CSV / JSON Lines table, or Megatron-LM
// training logs) priced by the model; the compute efficiency their step times identify is fitted, checked by
// leave-one-out against the shipped coefficients, and written as a performance coefficients file that
// `--profile` applies; with the fixed term of the memory residual that their peaks identify (`memory`), where it
// predicts the runs left out better than the shipped residual.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/calibration/fit_runs.hpp"
#include "headroom/ingest/measured_runs.hpp"
#include "headroom/calibration/profile.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom::cli {
namespace {

std::string read_text(const std::string& path) { return read_file_bounded(path, "--from-runs " + path); }

// A file of runs: a Megatron-LM log (it has the arguments block) is one run; anything else is a table.
std::vector<calibrate::MeasuredRun> read_runs(const std::string& path) {
  const std::string text = read_text(path);
  if (text.find(" arguments ---") != std::string::npos) return {calibrate::parse_megatron_log(text, path)};
  return calibrate::parse_runs_table(text, path);
}

std::string cell(const calibrate::MeasuredRun& r, const std::string& column, const std::string& fallback = "") {
  const auto it = r.layout.find(column);
  return it == r.layout.end() ? fallback : it->second;
}

struct Resolved {
  Plan specs;
  Layout layout;
};

// The row's columns as the flags of `estimate`; the command line's --model/--gpu/--cluster fill columns a
// row leaves empty, and a Megatron-LM log's arguments give the model itself.
Resolved resolve_run(const calibrate::MeasuredRun& r, const CalibrateRunsDefaults& d) {
  try {
    SpecOptions so;
    so.data_dir = d.data_dir;
    so.framework = d.framework;
    so.model = cell(r, "model", d.model);
    so.gpu = cell(r, "gpu", d.gpu);
    so.cluster = cell(r, "cluster", d.cluster);
    const auto framework = cell(r, "framework", d.framework);
    if (framework != d.framework)
      throw Error("framework '" + framework + "' while calibrating --framework " + d.framework +
                  " (coefficients are per framework: one framework per calibration)");
    if (so.model.empty() && !r.model) throw Error("no model: give a model column or --model");
    Resolved out;
    const SpecLibrary lib = so.library();
    out.specs.model = r.model ? *r.model : lib.model(so.model);
    out.specs.cluster = resolve_cluster(so.request(), lib);
    out.specs.framework = lib.framework(so.framework);
    // The row's knobs (knobs.hpp: a column per knob, under its name or an older one), by the knobs' grammar.
    const KnobSettings k = knob_settings_of(r.layout);
    if (!k.given(KnobId::seq)) throw Error("no seq column: the sequence length of the run");
    out.layout = build_layout(out.specs.model, out.specs.framework, layout_request(k, out.specs.framework));
    validate_on_cluster(out.specs.model, out.layout, out.specs.cluster);
    return out;
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind(r.source, 0) == 0 ? what : r.source + ": " + what);
  }
}

// The step time a row measured: its step time, else its tokens/s, else its TFLOP/s per GPU read in headroom's
// FLOP convention (flops.hpp; a framework that counts differently biases this row).
std::optional<double> measured_step_s(const calibrate::MeasuredRun& r, const Resolved& x, const PerfCoefficients& k) {
  if (r.step_time_s) return *r.step_time_s;
  const double tokens = static_cast<double>(x.layout.gbs * x.layout.seq);
  if (r.tokens_per_s && *r.tokens_per_s > 0) return tokens / *r.tokens_per_s;
  if (r.tflops_per_gpu && *r.tflops_per_gpu > 0) {
    const double flops = estimate_perf(x.specs.model, x.specs.cluster, x.layout, k).model_flops;
    return flops / (*r.tflops_per_gpu * 1e12 * static_cast<double>(x.layout.gpus()));
  }
  return std::nullopt;
}

// A trained run's measurements against what its GPU and layout allow (calibrate::check_run_bounds).
void check_bounds(const calibrate::MeasuredRun& r, const Resolved& x, const PerfCoefficients& k) {
  const GpuSpec& g = x.specs.cluster.gpu;
  calibrate::RunBounds b;
  b.gpu = g.name;
  b.memory_gib = g.memory_bytes / kGiB;
  b.peak_flops = std::max({g.bf16_flops, g.fp16_flops, g.fp32_flops, g.fp8_flops});
  b.tokens_per_step = static_cast<double>(x.layout.gbs * x.layout.seq);
  b.gpus = static_cast<double>(x.layout.gpus());
  if (r.step_time_s || r.tokens_per_s)
    b.model_flops_per_step = estimate_perf(x.specs.model, x.specs.cluster, x.layout, k).model_flops;
  calibrate::check_run_bounds(r, b);
}

calibrate::MemoryRun memory_run(const calibrate::MeasuredRun& r, const Resolved& x) {
  return {x.specs.model,
          x.specs.cluster,
          x.layout,
          r.outcome != calibrate::RunOutcome::ok,
          r.peak_memory_gib && r.outcome == calibrate::RunOutcome::ok ? *r.peak_memory_gib * kGiB : 0.0,
          r.source};
}

// The memory part of the output file: the fitted fixed term, written only where it was identified, predicts the
// runs left out better than the shipped residual and predicts no run that ran out of memory to fit.
std::optional<nlohmann::json> memory_section(const calibrate::FixedMemoryFit& f, const std::string& framework,
                                             std::string& why_not) {
  const double shipped = calibrate::RunsFit::mean(f.shipped_errors),
               held_out = calibrate::RunsFit::mean(f.held_out_errors);
  if (!f.identified)
    why_not = "fewer than two trained runs report peak_memory_gib";
  else if (f.false_fits_fitted > 0)
    why_not = "it would predict a run that ran out of memory to fit";
  else if (!(held_out < shipped))
    why_not = "its leave-one-out peak error is not below the shipped residual's";
  if (!why_not.empty()) return std::nullopt;
  return nlohmann::json{{"framework", framework},
                        {"fixed_GiB", f.fixed_bytes / kGiB},
                        {"peak_error", {{"shipped", shipped}, {"held_out", held_out}}},
                        {"runs", f.shipped_errors.size()}};
}

std::string memory_text(const calibrate::FixedMemoryFit& f, const ResidualModel& shipped, const std::string& why_not) {
  char line[400];
  std::snprintf(line, sizeof line,
                "memory: verdicts %d of %d right with the shipped residual, %d of %d with the fixed term fitted "
                "(%d predicted to fit that ran out of memory)\n",
                f.verdicts_right_shipped, f.verdicts, f.verdicts_right_fitted, f.verdicts, f.false_fits_fitted);
  std::string out = line;
  if (!f.shipped_errors.empty()) {
    std::snprintf(line, sizeof line,
                  "memory fixed term %.2f GiB (shipped %.2f): mean peak error %.1f%% shipped, %.1f%% leave-one-out "
                  "over %zu runs\n",
                  f.fixed_bytes / kGiB, shipped.fixed_bytes / kGiB, 100 * calibrate::RunsFit::mean(f.shipped_errors),
                  100 * calibrate::RunsFit::mean(f.held_out_errors), f.shipped_errors.size());
    out += line;
  }
  return out + (why_not.empty() ? "memory fixed term written\n" : "memory not written: " + why_not + "\n");
}

}  // namespace

// Progress of pricing a table of runs, on stderr: a line at every tenth of the rows, redrawn in place on a terminal, a
// plain line in a log file (no carriage return or escape). Tables under kProgressRuns rows take well under a second
// and print nothing beside their result.
class RunsProgress {
 public:
  static constexpr std::size_t kProgressRuns = 100;
  RunsProgress(std::ostream* err, std::size_t total)
      : err_(total >= kProgressRuns ? err : nullptr),
        total_(total),
        terminal_(err == &std::cerr && ::isatty(STDERR_FILENO) == 1) {}

  void operator()(std::size_t done) {
    const std::size_t tenths = err_ == nullptr ? 0 : done * 10 / total_;
    if (tenths <= printed_) return;
    printed_ = tenths;
    *err_ << (terminal_ ? "\r" : "") << "calibrate --from-runs: " << done << "/" << total_ << " runs priced ("
          << 10 * tenths << "%)" << (terminal_ ? "\033[K" : "") << (!terminal_ || done == total_ ? "\n" : "")
          << std::flush;
  }

 private:
  std::ostream* err_;
  std::size_t total_;
  bool terminal_;
  std::size_t printed_ = 0;
};

// A user's runs, priced: those that trained with a measured step (for the compute fit) and every run with its
// outcome and peak (for the memory fit).
struct UserRuns {
  std::vector<calibrate::PricedRun> priced;
  std::vector<calibrate::MemoryRun> memory;
  int rows = 0;
};

UserRuns read_user_runs(const std::vector<std::string>& files, const CalibrateRunsDefaults& d,
                        const PerfCoefficients& shipped, std::ostream* progress) {
  UserRuns u;
  std::vector<calibrate::MeasuredRun> rows;
  for (const auto& file : files)
    for (auto& r : read_runs(file)) rows.push_back(std::move(r));
  // Rows of the same columns resolve alike: each distinct one is resolved (its spec files read) once.
  std::map<std::map<std::string, std::string>, Resolved> resolved;
  RunsProgress report(progress, rows.size());
  for (const auto& r : rows) {
    ++u.rows;
    const auto cached = r.model ? resolved.end() : resolved.find(r.layout);
    const Resolved x = cached != resolved.end() ? cached->second : resolve_run(r, d);
    if (!r.model && cached == resolved.end()) resolved.emplace(r.layout, x);
    u.memory.push_back(memory_run(r, x));
    report(static_cast<std::size_t>(u.rows));
    if (r.outcome != calibrate::RunOutcome::ok) continue;
    check_bounds(r, x, shipped);
    if (const auto step = measured_step_s(r, x, shipped))
      u.priced.push_back({x.specs.model, x.specs.cluster, x.layout, *step, r.source});
  }
  if (u.priced.size() < 2)
    throw Error("--from-runs: " + std::to_string(u.priced.size()) + " of " + std::to_string(u.rows) +
                " runs trained with a measured step time, tokens/s or TFLOP/s: at least two are needed to fit the "
                "compute efficiency and check it on a run it was not fitted on");
  return u;
}

// The GPUs and clusters of the runs (sorted, once each): --profile refuses the file on another GPU.
nlohmann::json fitted_on(const UserRuns& u) {
  std::set<std::string> gpus, clusters;
  for (const auto& r : u.memory) gpus.insert(r.cluster.gpu.name), clusters.insert(r.cluster.name);
  return {{"gpus", gpus}, {"clusters", clusters}};
}

// The mean step-time errors of a compute fit: the shipped coefficients', the fit's, and held out.
struct MeanErrors {
  double shipped, fitted, held_out;
  explicit MeanErrors(const calibrate::RunsFit& fit)
      : shipped(calibrate::RunsFit::mean(fit.shipped_errors)),
        fitted(calibrate::RunsFit::mean(fit.fitted_errors)),
        held_out(calibrate::RunsFit::mean(fit.held_out_errors)) {}
};

// Each run's measured step, the shipped and fitted predictions and the held-out error; then the fit's line.
std::string compute_fit_text(const std::vector<calibrate::PricedRun>& priced, const calibrate::RunsFit& fit,
                             const MeanErrors& mean, const PerfCoefficients& shipped) {
  std::ostringstream out;
  char line[400];
  std::snprintf(line, sizeof line, "%-40s %10s %10s %7s %10s %7s %9s\n", "run", "measured s", "shipped s", "error",
                "fitted s", "error", "held out");
  out << line;
  for (std::size_t i = 0; i < priced.size(); ++i) {
    const auto& p = priced[i];
    std::snprintf(line, sizeof line, "%-40.40s %10.3f %10.3f %6.1f%% %10.3f %6.1f%% %8.1f%%\n", p.source.c_str(),
                  p.measured_step_s, estimate_perf(p.model, p.cluster, p.layout, shipped).step_time_s,
                  100 * fit.shipped_errors[i],
                  estimate_perf(p.model, p.cluster, p.layout, fit.coefficients).step_time_s, 100 * fit.fitted_errors[i],
                  100 * fit.held_out_errors[i]);
    out << line;
  }
  std::snprintf(line, sizeof line,
                "compute efficiency x%.3f (GEMM %.3f, attention %.3f): mean step-time error %.1f%% shipped, %.1f%% "
                "fitted, %.1f%% leave-one-out over %zu runs\n",
                fit.compute_scale, fit.coefficients.gemm_efficiency, fit.coefficients.attention_efficiency,
                100 * mean.shipped, 100 * mean.fitted, 100 * mean.held_out, priced.size());
  out << line;
  return out.str();
}

nlohmann::json from_runs_json(const std::vector<calibrate::PricedRun>& priced, const calibrate::RunsFit& fit,
                              const MeanErrors& mean, const PerfCoefficients& k,
                              const calibrate::FixedMemoryFit& memory, bool memory_written,
                              const std::string& memory_not_written, const std::string& out_path) {
  nlohmann::json runs = nlohmann::json::array();
  for (std::size_t i = 0; i < priced.size(); ++i)
    runs.push_back({{"source", priced[i].source},
                    {"measured_step_s", priced[i].measured_step_s},
                    {"shipped_error", fit.shipped_errors[i]},
                    {"fitted_error", fit.fitted_errors[i]},
                    {"held_out_error", fit.held_out_errors[i]}});
  return {{"compute_scale", fit.compute_scale},
          {"coefficients", perf_coefficients_to_json(k)},
          {"mean_error", {{"shipped", mean.shipped}, {"fitted", mean.fitted}, {"held_out", mean.held_out}}},
          {"memory",
           {{"verdicts", memory.verdicts},
            {"verdicts_right", memory.verdicts_right_shipped},
            {"verdicts_right_fitted", memory.verdicts_right_fitted},
            {"false_fits_fitted", memory.false_fits_fitted},
            {"fixed_gib", memory.fixed_bytes / kGiB},
            {"written", memory_written},
            {"not_written_because", memory_not_written}}},
          {"runs", runs},
          {"written", out_path}};
}

void run_from_runs(const std::vector<std::string>& files, const CalibrateRunsDefaults& d, const std::string& out_path,
                   bool json, std::ostream& out_stream, std::ostream* progress) {
  const SpecLibrary lib = [&] {
    SpecOptions so;
    so.data_dir = d.data_dir;
    return so.library();
  }();
  const PerfCoefficients shipped = default_perf_coefficients(lib, d.framework);
  const ResidualModel residual = lib.framework(d.framework).residual;
  const UserRuns runs = read_user_runs(files, d, shipped, progress);
  const calibrate::RunsFit fit = calibrate::fit_compute_scale(runs.priced, shipped);
  const MeanErrors mean(fit);
  std::string text = compute_fit_text(runs.priced, fit, mean, shipped);  // the table; --json prints a document instead
  const calibrate::FixedMemoryFit memory = calibrate::fit_fixed_memory(runs.memory, residual);
  std::string memory_not_written;
  const auto memory_json = memory_section(memory, d.framework, memory_not_written);
  text += memory_text(memory, residual, memory_not_written);
  const double shipped_err = mean.shipped, held_out_err = mean.held_out;
  if (!(held_out_err < shipped_err))
    throw Error("--from-runs: the fit's leave-one-out error (" + std::to_string(100 * held_out_err).substr(0, 5) +
                "%) is not below the shipped coefficients' (" + std::to_string(100 * shipped_err).substr(0, 5) +
                "%): nothing written");
  PerfCoefficients k = fit.coefficients;
  k.name = d.framework + "-from-runs";
  k.source = "calibrate --from-runs: " + shipped.name + " with compute efficiencies x" +
             std::to_string(fit.compute_scale) + ", fitted on " + std::to_string(runs.priced.size()) +
             " runs (leave-one-out step-time error " + std::to_string(100 * held_out_err).substr(0, 4) + "%, shipped " +
             std::to_string(100 * shipped_err).substr(0, 4) + "%)";
  nlohmann::json doc = perf_coefficients_to_json(k);
  if (memory_json) doc["memory"] = *memory_json;
  doc["fitted_on"] = fitted_on(runs);
  calibrate::write_json_atomically(out_path, doc);
  if (json) {
    nlohmann::json j =
        from_runs_json(runs.priced, fit, mean, k, memory, memory_json.has_value(), memory_not_written, out_path);
    j["fitted_on"] = doc["fitted_on"];
    print_json(out_stream, j);
  } else {
    std::string gpus;
    for (const auto& g : doc["fitted_on"]["gpus"]) gpus += (gpus.empty() ? "" : ", ") + g.get<std::string>();
    out_stream << text << "wrote " << out_path << " (use it with --profile on " << gpus
               << ", the GPUs of these runs; another GPU is refused)\n";
  }
}

}  // namespace headroom::cli
