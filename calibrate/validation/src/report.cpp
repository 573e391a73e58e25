#include "headroom/validation/report.hpp"

#include <algorithm>
#include <cmath>

#include "headroom/core/error.hpp"
#include "headroom/core/units.hpp"
#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::validate {
namespace {

EstimateSection estimate_section(const SpecLibrary& lib, const std::filesystem::path& ref) {
  EstimateSection e;
  const auto checks =
      check_estimates(lib, read_estimates(ref / "4d_estimates.csv"), read_typos(ref / "4d_estimates_typos.json"));
  for (const auto& c : checks) {
    TableSummary& t = e.tables[c.cell.run.table];
    ++t.cells;
    switch (c.status) {
      case CellStatus::reproduced:
        ++t.reproduced;
        t.max_abs_diff = std::max(t.max_abs_diff, std::abs(c.ours_gib - c.cell.printed_gib));
        break;
      case CellStatus::documented_typo: ++t.typos; break;
      default:
        ++t.failures;
        ++e.failures;
        break;
    }
    if (c.status != CellStatus::reproduced) e.not_reproduced.push_back(c);
  }
  return e;
}

// OOM verdicts of the measured 4D runs under the shipped residual, its refit, leave-one-table-out, the held-out
// peak band and the choice of its form.
VerdictSection verdict_section(const SpecLibrary& lib, const std::vector<MeasuredRun>& measured,
                               const FrameworkProfile& fw) {
  VerdictSection v;
  for (const auto& m : measured) v.tables.emplace(m.run.table, VerdictScore{});
  for (auto& [table, score] : v.tables) {
    const auto obs = observations(lib, measured, fw, table);
    score = score_verdicts(obs, fw.residual);
    v.all.add(score);
    for (const auto& ob : obs) {
      const double peak = peak_memory_bytes(ob.model, ob.cluster, ob.layout, fw.residual);
      if ((peak <= ob.cluster.gpu.usable_memory_bytes) == !ob.oom) continue;
      v.wrong.push_back({table, ob.layout, ob.oom, peak / kGiB, ob.cluster.gpu.usable_memory_bytes / kGiB});
    }
  }
  v.verdicts_ok = v.all.accuracy() >= 0.98 && v.all.false_fits == 0;
  // The shipped coefficients must be what the fit gives on all visible tables; then hold out one at a time.
  v.refit = fit_residual(observations(lib, measured, fw));
  v.shipped_is_fit = v.refit.feasible && same_coefficients(v.refit.model, fw.residual);
  std::vector<HeldOutVerdict> held_out_peaks;  // the predicted peaks of held-out runs → the shipped memory band
  for (const auto& [table, unused] : v.tables) {
    const ResidualFit f = fit_residual(observations(lib, measured, fw, 0, table));
    const auto held_out = observations(lib, measured, fw, table);
    const VerdictScore score = score_verdicts(held_out, f.model);
    v.loto[table] = {f, score};
    v.pooled.add(score);
    for (const auto& r : held_out)
      held_out_peaks.push_back(
          {peak_memory_bytes(r.model, r.cluster, r.layout, f.model), r.cluster.gpu.usable_memory_bytes, r.oom});
  }
  v.band = band_from_verdicts(held_out_peaks);
  v.band_shipped = same_band(fw.memory_band, v.band);
  // The form of the residual: the candidates by held-out score; the shipped one must be the best.
  v.forms = compare_memory_forms(lib, measured, fw);
  v.best_form = best_memory_form(v.forms).form;
  v.form_is_best = form_of(fw.residual) == v.best_form;
  return v;
}

}  // namespace

bool same_coefficients(const ResidualModel& a, const ResidualModel& b) {
  const auto close = [](double x, double y) { return std::abs(x - y) <= 1e-5 * std::max(1.0, std::abs(y)); };
  return close(a.fixed_bytes / kGiB, b.fixed_bytes / kGiB) &&
         close(a.logits_bytes_per_element, b.logits_bytes_per_element) &&
         close(a.optimizer_shard_bytes_per_param, b.optimizer_shard_bytes_per_param) &&
         close(a.cp_communicator_bytes / kGiB, b.cp_communicator_bytes / kGiB) &&
         close(a.capacity_share, b.capacity_share);
}

void refuse_unvalidated_framework(const SpecLibrary& lib, const std::string& framework) {
  const std::string name = lib.framework(framework).name;
  if (name != kValidatedFramework)
    throw Error("--framework " + framework +
                ": validate prices the 4D paper's and the published Megatron-LM runs "
                "under the framework that ran them, " +
                std::string(kValidatedFramework) + "; " + name +
                "'s own runs (the thesis's MTSL and throughput, the published FSDP runs) are checked by every "
                "headroom validate (valid: " +
                std::string(kValidatedFramework) + ")");
}

Report validate_all(const SpecLibrary& lib, const std::string& framework) {
  refuse_unvalidated_framework(lib, framework);
  Report r;
  const auto ref = lib.data_dir() / "reference";
  r.estimates = estimate_section(lib, ref);
  r.framework = lib.framework(framework);
  const FrameworkProfile& fw = r.framework;
  const auto measured = read_measured(ref / "4d_measured.csv");
  r.verdicts = verdict_section(lib, measured, fw);
  // Throughput: rank the measured layouts of every (table, GPU count) column by predicted speed.
  const PerfCoefficients coefficients = default_perf_coefficients(lib, fw.name);
  r.perf = validate_perf(perf_runs(lib, measured, fw), coefficients);
  r.perf_ok = r.perf.shipped_is_fit && r.perf.score.mean_regret <= kPerfMeanRegretGoal &&
              r.perf.score.worst_regret <= kPerfWorstRegretGoal &&
              same_band(r.perf.shipped.step_time_band, r.perf.held_out_band) &&
              same_bands_by_gpus(r.perf.shipped.step_time_bands_by_gpus, r.perf.held_out_by_gpus);
  // The thesis under pytorch-fsdp: MTSL (its form by leave-one-rank-out) and throughput (its own coefficients).
  r.fsdp = lib.framework("pytorch-fsdp");
  r.thesis_mtsl = validate_thesis_mtsl(lib, r.fsdp);
  const PerfCoefficients fsdp_coefficients = default_perf_coefficients(lib, r.fsdp.name);
  r.thesis_data = std::make_unique<const ThesisPerfData>(thesis_perf_data(lib, r.fsdp));
  r.thesis = validate_thesis_perf(*r.thesis_data, fsdp_coefficients);
  r.thesis_ok = r.thesis_mtsl.shipped_is_fit && r.thesis.shipped_is_fit &&
                r.thesis.score.mean_error() <= kThesisMeanErrorGoal &&
                same_band(r.thesis.shipped.step_time_band, r.thesis.held_out_band);
  // Published sources, held out and informative (not part of `passed`: the 10% goal is not yet met everywhere):
  // large-scale GPT runs with Calculon's predictions beside them, runs of models with experts, FP8 runs, PyTorch FSDP
  // runs on NVIDIA GPUs under pytorch-fsdp's coefficients (a check: read while its shared device entries were made),
  // and nccl-tests bandwidths against the link model.
  r.published_rows = published_runs(lib, fw, ref / "published_runs.csv", ref / "published_runs_calculon.csv");
  r.published = validate_published(r.published_rows, coefficients);
  r.moe_rows = published_runs(lib, fw, ref / "published_moe_priced.csv", "");
  r.moe = validate_published(r.moe_rows, coefficients);
  r.fp8_rows = published_runs(lib, fw, ref / "published_fp8_priced.csv", "");
  r.fp8 = validate_published(r.fp8_rows, coefficients);
  // The fit with each run's attention, the shipped form and the stack fraction's fit (computed once), then with one
  // curve for every run.
  r.attention_backends = stack_fraction_by_attention_backend(r.fp8_rows, coefficients);
  r.stack = r.attention_backends.front();
  r.attention_backend = coefficients.attention_backend;
  r.attention_backend_chosen =
      std::none_of(r.attention_backends.begin(), r.attention_backends.end(),
                   [&](const auto& f) { return f.held_out_mean_abs_error < r.stack.held_out_mean_abs_error; });
  r.fp8_memory = validate_published_memory(r.fp8_rows, fw);
  // Megatron-Bridge's model verification cards (its recipes on H100s, Megatron-core underneath): fitted on nothing.
  r.bridge_rows = published_runs(lib, fw, ref / "published_bridge_runs.csv", "");
  r.bridge = validate_published(r.bridge_rows, coefficients);
  r.bridge_memory = validate_published_memory(r.bridge_rows, fw);
  r.moe_memory = validate_published_memory(r.moe_rows, fw);
  r.fsdp_rows = published_runs(lib, r.fsdp, ref / "published_fsdp_runs.csv", "");
  r.fsdp_runs = validate_published(r.fsdp_rows, fsdp_coefficients);
  // torchtitan's published runs under its own coefficients, derived from Megatron-LM's (nothing fitted on them).
  r.torchtitan = lib.framework("torchtitan");
  r.torchtitan_rows = published_runs(lib, r.torchtitan, ref / "published_torchtitan_priced.csv", "");
  r.torchtitan_runs = validate_published(r.torchtitan_rows, default_perf_coefficients(lib, r.torchtitan.name));
  r.torchtitan_memory = validate_published_memory(r.torchtitan_rows, r.torchtitan);
  // DeepSpeed's published runs under its own coefficients, derived from Megatron-LM's (nothing fitted on them).
  r.deepspeed = lib.framework("deepspeed");
  r.deepspeed_rows = published_runs(lib, r.deepspeed, ref / "published_deepspeed_runs.csv", "");
  r.deepspeed_runs = validate_published(r.deepspeed_rows, default_perf_coefficients(lib, r.deepspeed.name));
  r.deepspeed_memory = validate_published_memory(r.deepspeed_rows, r.deepspeed);
  r.collective_rows = published_collectives(lib, ref / "published_collectives.csv");
  r.collectives = validate_collectives(r.collective_rows, coefficients);
  r.passed = r.estimates.failures == 0 && r.verdicts.ok() && r.perf_ok && r.thesis_ok && r.stack.shipped_is_fit &&
             r.attention_backend_chosen && r.collectives.shipped_is_measured;
  return r;
}

}  // namespace headroom::validate
