#include <cstdio>
#include <string>

#include "cli_common.hpp"
#include "validate_print.hpp"

namespace headroom::cli {

namespace {

nlohmann::json perf_score_to_json(const validate::PerfScore& s) {
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& c : s.columns)
    cols.push_back({{"table", c.table},
                    {"num_gpus", c.gpus},
                    {"layouts", c.layouts},
                    {"best", c.best},
                    {"best_tflops", c.best_tflops},
                    {"ours", c.ours},
                    {"ours_tflops", c.ours_tflops},
                    {"regret", c.regret},
                    {"top1", c.top1},
                    {"anchor", c.anchor},
                    {"anchor_tflops", c.anchor_tflops},
                    {"anchor_regret", c.anchor_regret},
                    {"tflops_mean_abs_error", c.mean_abs_error},
                    {"tflops_max_abs_error", c.max_abs_error},
                    {"spearman", c.rank_correlation}});
  return {{"columns", cols},
          {"mean_regret", s.mean_regret},
          {"worst_regret", s.worst_regret},
          {"top1", s.top1},
          {"anchor_mean_regret", s.anchor_mean_regret},
          {"anchor_worst_regret", s.anchor_worst_regret},
          {"anchor_top1", s.anchor_top1},
          {"tflops_mean_abs_error", s.mean_abs_error}};
}

}  // namespace

namespace {

void print_perf_score(std::ostream& out, const validate::PerfScore& s, bool per_column) {
  char line[256];
  if (per_column) {
    std::snprintf(line, sizeof line, "%6s %5s %4s  %-11s %7s  %-11s %7s %7s  %-11s %7s  %6s %6s %6s\n", "table", "GPUs",
                  "runs", "best", "TFLOP/s", "our pick", "TFLOP/s", "regret", "paper rule", "regret", "|err|", "max",
                  "rho");
    out << line;
    for (const auto& c : s.columns) {
      std::snprintf(line, sizeof line,
                    "%6d %5lld %4d  %-11s %7.2f  %-11s %7.2f %6.2f%%  %-11s %6.2f%%  %5.1f%% %5.1f%% %6.2f\n", c.table,
                    static_cast<long long>(c.gpus), c.layouts, c.best.c_str(), c.best_tflops, c.ours.c_str(),
                    c.ours_tflops, 100 * c.regret, c.anchor.c_str(), 100 * c.anchor_regret, 100 * c.mean_abs_error,
                    100 * c.max_abs_error, c.rank_correlation);
      out << line;
    }
  }
  std::snprintf(line, sizeof line,
                "ours: mean regret %.2f%%, worst %.2f%%, top-1 %d/%zu, TFLOP/s mean |error| %.1f%%;  paper rule: mean "
                "regret %.2f%%, worst %.2f%%, top-1 %.1f/%zu\n",
                100 * s.mean_regret, 100 * s.worst_regret, s.top1, s.columns.size(), 100 * s.mean_abs_error,
                100 * s.anchor_mean_regret, 100 * s.anchor_worst_regret, s.anchor_top1, s.columns.size());
  out << line;
}

}  // namespace

// A band as validate prints it: "-3.2% / +1.5%".
std::string band_text(const ErrorBand& b) {
  if (!b.known) return "(none)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "-%.2f%% / +%.2f%%", 100.0 * b.low, 100.0 * b.high);
  return buf;
}

nlohmann::json band_json(const ErrorBand& shipped, const ErrorBand& computed) {
  return {{"low", computed.low},
          {"high", computed.high},
          {"shipped_low", shipped.low},
          {"shipped_high", shipped.high},
          {"shipped_equals_computed", validate::same_band(shipped, computed)}};
}

namespace {

void print_band(std::ostream& out, const ErrorBand& shipped, const ErrorBand& computed) {
  out << "held-out band of the step time (" << 100 * validate::kStepTimeBandCoverage
      << "% of held-out runs): " << band_text(computed)
      << (validate::same_band(shipped, computed) ? " (= shipped)"
                                                 : " (DIFFERS from shipped " + band_text(shipped) + ")")
      << "\n";
}

}  // namespace

nlohmann::json perf_json(const validate::PerfValidation& v) {
  nlohmann::json cv = nlohmann::json::array();
  for (const auto& [t, s] : v.held_out) cv.push_back({{"held_out_table", t}, {"score", perf_score_to_json(s)}});
  nlohmann::json by_gpus = nlohmann::json::array();
  for (const auto& g : v.held_out_by_gpus)
    by_gpus.push_back({{"gpus", g.shipped.gpus},
                       {"runs", g.shipped.runs},
                       {"median_ratio", g.median_ratio},
                       {"low", g.runs_band.low},
                       {"high", g.runs_band.high},
                       {"shipped_form", {{"low", g.shipped.band.low}, {"high", g.shipped.band.high}}}});
  return {
      {"coefficients", perf_coefficients_to_json(v.shipped)},
      {"score", perf_score_to_json(v.score)},
      {"datasheet_score", perf_score_to_json(v.datasheet)},
      {"refit", perf_coefficients_to_json(v.refit)},
      {"shipped_equals_fit", v.shipped_is_fit},
      {"leave_one_table_out", {{"tables", cv}, {"pooled", perf_score_to_json(v.pooled)}}},
      {"step_time_band", band_json(v.shipped.step_time_band, v.held_out_band)},
      {"step_time_band_by_gpus", by_gpus},
      {"step_time_band_by_gpus_shipped_equals_computed",
       validate::same_bands_by_gpus(v.shipped.step_time_bands_by_gpus, v.held_out_by_gpus)},
      {"goals", {{"mean_regret", validate::kPerfMeanRegretGoal}, {"worst_regret", validate::kPerfWorstRegretGoal}}}};
}

void print_perf_validation(std::ostream& out, const validate::PerfValidation& v) {
  out << "\nThroughput: measured layouts of each (table, GPU count) column ranked by predicted TFLOP/s "
         "(coefficients "
      << v.shipped.name << ")\n";
  print_perf_score(out, v.score, true);
  out << "datasheet defaults (no fit): ";
  print_perf_score(out, v.datasheet, false);
  out << "refit on all visible tables " << (v.shipped_is_fit ? "(= shipped)" : "(DIFFERS from shipped)") << "\n";
  out << "\nLeave-one-table-out (fit on the other tables from the datasheet defaults, score the held-out one)\n";
  for (const auto& [t, s] : v.held_out) {
    out << "held-out Table " << t << ": ";
    print_perf_score(out, s, false);
  }
  out << "pooled: ";
  print_perf_score(out, v.pooled, false);
  print_band(out, v.shipped.step_time_band, v.held_out_band);
  out << "  by GPU count (measured / predicted step time of the held-out runs: the model grows optimistic with scale,\n"
         "  which it does not price); shipped: the pooled band widened by the count's, the band of a job of that many\n"
         "  GPUs up to the next count "
      << (validate::same_bands_by_gpus(v.shipped.step_time_bands_by_gpus, v.held_out_by_gpus)
              ? "(= shipped uncertainty.by_gpus)\n"
              : "(DIFFERS from shipped uncertainty.by_gpus)\n");
  out << "   GPUs  runs  median  90% of the runs    shipped band\n";
  for (const auto& g : v.held_out_by_gpus) {
    char line[128];
    std::snprintf(line, sizeof line, "  %5lld %5d %7.2f  [-%4.1f%%, +%5.1f%%]  [-%4.1f%%, +%5.1f%%]\n",
                  static_cast<long long>(g.shipped.gpus), g.shipped.runs, g.median_ratio, 100 * g.runs_band.low,
                  100 * g.runs_band.high, 100 * g.shipped.band.low, 100 * g.shipped.band.high);
    out << line;
  }
}

namespace {

nlohmann::json thesis_score_to_json(const validate::ThesisPerfScore& s, bool cells) {
  nlohmann::json j = {{"mean_tokens_per_s_error", s.mean_tokens_error},
                      {"max_tokens_per_s_error", s.max_tokens_error},
                      {"mean_pts_error", s.mean_pts_error},
                      {"max_pts_error", s.max_pts_error},
                      {"mean_error", s.mean_error()},
                      {"ordered_pairs", s.ordered_pairs},
                      {"concordant_pairs", s.concordant_pairs},
                      {"columns", s.columns},
                      {"top1", s.top1}};
  if (!cells) return j;
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& c : s.cells)
    cj.push_back({{"table", c.cell->table},
                  {"config", c.cell->config},
                  {"nodes", c.cell->nodes},
                  {"seq", c.cell->layout.seq},
                  {"samples_per_rank", c.cell->layout.mbs},
                  {"measured_tokens_per_s", c.cell->tokens_per_s},
                  {"predicted_tokens_per_s", c.tokens_per_s},
                  {"tokens_per_s_error", c.tokens_error},
                  {"measured_pts_s", c.cell->pts_s},
                  {"predicted_pts_s", c.pts_s},
                  {"pts_error", c.pts_error}});
  j["cells"] = cj;
  return j;
}

}  // namespace

nlohmann::json thesis_perf_json(const validate::ThesisPerfValidation& v) {
  nlohmann::json by_config = nlohmann::json::array(), by_table = nlohmann::json::array();
  for (const auto& [k, s] : v.by_config)
    by_config.push_back({{"held_out", k}, {"score", thesis_score_to_json(s, false)}});
  for (const auto& [k, s] : v.by_table)
    by_table.push_back({{"held_out", k}, {"score", thesis_score_to_json(s, false)}});
  return {{"coefficients", perf_coefficients_to_json(v.shipped)},
          {"score", thesis_score_to_json(v.score, true)},
          {"datasheet_score", thesis_score_to_json(v.datasheet, false)},
          {"refit", perf_coefficients_to_json(v.refit)},
          {"shipped_equals_fit", v.shipped_is_fit},
          {"leave_one_configuration_out",
           {{"folds", by_config}, {"pooled", thesis_score_to_json(v.pooled_by_config, false)}}},
          {"leave_one_table_out", {{"folds", by_table}, {"pooled", thesis_score_to_json(v.pooled_by_table, false)}}},
          {"step_time_band", band_json(v.shipped.step_time_band, v.held_out_band)},
          {"goals", {{"mean_error", validate::kThesisMeanErrorGoal}, {"tie_tolerance", validate::kThesisTieTolerance}}},
          {"mean_error_goal_met", v.score.mean_error() <= validate::kThesisMeanErrorGoal},
          {"order_right", v.score.order_right()}};
}

namespace {

void print_thesis_summary(std::ostream& out, const validate::ThesisPerfScore& s) {
  char line[256];
  std::snprintf(
      line, sizeof line,
      "tokens/s mean |error| %.1f%% (max %.1f%%), PTS %.1f%% (max %.1f%%); order: %d/%d pairs, best %d/%d columns\n",
      100 * s.mean_tokens_error, 100 * s.max_tokens_error, 100 * s.mean_pts_error, 100 * s.max_pts_error,
      s.concordant_pairs, s.ordered_pairs, s.top1, s.columns);
  out << line;
}

}  // namespace

void print_thesis_perf(std::ostream& out, const validate::ThesisPerfValidation& v) {
  out << "\nThesis throughput: Llama 3.1 70B LoRA r=" << validate::kThesisLoraRank
      << ", PyTorch FSDP(+TP), lumi-mi250x; tokens/s and PTS vs context (Tables B.5/B.6, one node) and vs nodes at "
         "seq 10,000 (Tables 4.1/4.3); coefficients "
      << v.shipped.name << "\n";
  char line[256];
  std::snprintf(line, sizeof line, "%5s %-10s %5s %6s %4s %9s %9s %6s %7s %7s %6s\n", "table", "config", "nodes", "seq",
                "b", "tokens/s", "predicted", "error", "PTS s", "pred.", "error");
  out << line;
  for (const auto& c : v.score.cells) {
    std::snprintf(line, sizeof line, "%5s %-10s %5lld %6lld %4lld %9.1f %9.1f %5.1f%% %7.2f %7.2f %5.1f%%\n",
                  c.cell->table.c_str(), c.cell->config.c_str(), static_cast<long long>(c.cell->nodes),
                  static_cast<long long>(c.cell->layout.seq), static_cast<long long>(c.cell->layout.mbs),
                  c.cell->tokens_per_s, c.tokens_per_s, 100 * c.tokens_error, c.cell->pts_s, c.pts_s,
                  100 * c.pts_error);
    out << line;
  }
  out << "shipped (goal: mean error <= " << 100 * validate::kThesisMeanErrorGoal << "%, every pair apart by more than "
      << 100 * validate::kThesisTieTolerance << "% in order): ";
  print_thesis_summary(out, v.score);
  out << "datasheet defaults (no fit): ";
  print_thesis_summary(out, v.datasheet);
  out << "refit on all cells " << (v.shipped_is_fit ? "(= shipped)" : "(DIFFERS from shipped)") << "\n";
  out << "leave-one-configuration-out (fit without a configuration's cells, predict them):\n";
  for (const auto& [k, s] : v.by_config) {
    out << "  held-out " << k << ": ";
    print_thesis_summary(out, s);
  }
  out << "  pooled: ";
  print_thesis_summary(out, v.pooled_by_config);
  out << "leave-one-table-out:\n";
  for (const auto& [k, s] : v.by_table) {
    out << "  held-out Table " << k << ": ";
    print_thesis_summary(out, s);
  }
  out << "  pooled: ";
  print_thesis_summary(out, v.pooled_by_table);
  print_band(out, v.shipped.step_time_band, v.held_out_band);
}

namespace {

nlohmann::json published_source_json(const validate::PublishedSourceScore& s) {
  nlohmann::json j = {{"source", s.source},
                      {"runs", s.runs},
                      {"mean_abs_error", s.mean_abs_error},
                      {"mean_error", s.mean_error},
                      {"worst_abs_error", s.worst_abs_error},
                      {"inside_step_time_band", s.banded > 0 ? nlohmann::json(s.inside_band) : nlohmann::json(nullptr)},
                      {"goal_met", s.mean_abs_error <= validate::kPublishedMeanErrorGoal}};
  if (s.calculon_runs > 0) j["calculon"] = {{"runs", s.calculon_runs}, {"mean_abs_error", s.calculon_mean_abs_error}};
  return j;
}

}  // namespace

nlohmann::json published_json(const validate::PublishedValidation& v) {
  nlohmann::json sources = nlohmann::json::array(), runs = nlohmann::json::array();
  for (const auto& s : v.sources) sources.push_back(published_source_json(s));
  for (const auto& r : v.runs) {
    nlohmann::json j = {{"id", r.run->id},
                        {"source", r.run->source},
                        {"measured_step_time_s", r.run->measured_step_s},
                        {"predicted_step_time_s", r.predicted_step_s},
                        {"error", r.error},
                        {"inside_step_time_band", r.banded ? nlohmann::json(r.inside_band) : nlohmann::json(nullptr)}};
    if (r.run->calculon_step_s > 0) j["calculon_step_time_s"] = r.run->calculon_step_s;
    runs.push_back(j);
  }
  return {{"held_out", "every run: nothing is fitted on these sources"},
          {"goal_mean_abs_error", validate::kPublishedMeanErrorGoal},
          {"sources", sources},
          {"all", published_source_json(v.all)},
          {"runs", runs}};
}

namespace {

void print_published_line(std::ostream& out, const validate::PublishedSourceScore& s) {
  char line[256];
  std::snprintf(line, sizeof line, "%-26s %5d %9.1f%% %+9.1f%% %8.1f%% ", s.source.c_str(), s.runs,
                100 * s.mean_abs_error, 100 * s.mean_error, 100 * s.worst_abs_error);
  out << line;
  if (s.banded > 0)
    std::snprintf(line, sizeof line, "%4d/%-4d", s.inside_band, s.banded);
  else
    std::snprintf(line, sizeof line, "%9s", "n/a");  // coefficients without a held-out band
  out << line;
  if (s.calculon_runs > 0) {
    std::snprintf(line, sizeof line, "  %9.1f%% (%d runs)", 100 * s.calculon_mean_abs_error, s.calculon_runs);
    out << line;
  }
  out << "\n";
}

}  // namespace

void print_published(std::ostream& out, const validate::PublishedValidation& v, const std::string& what,
                     const std::string& file, const std::string& coefficients) {
  out << "\n"
      << what << " (data/reference/" << file << "), step time, " << coefficients << " coefficients;\n"
      << "held out: nothing is fitted on these sources (goal: mean |error| <= "
      << 100 * validate::kPublishedMeanErrorGoal
      << "% per source); in band: runs measured inside the held-out step-time band at their GPU count\n";
  char line[256];
  std::snprintf(line, sizeof line, "%-26s %5s %10s %10s %9s %9s  %s\n", "source", "runs", "mean|err|", "mean err",
                "worst", "in band", "Calculon mean|err|");
  out << line;
  for (const auto& s : v.sources) print_published_line(out, s);
  print_published_line(out, v.all);
  for (const auto& r : v.runs) {
    std::snprintf(line, sizeof line, "  %-16s measured %8.3f s, predicted %8.3f s (%+6.1f%%)", r.run->id.c_str(),
                  r.run->measured_step_s, r.predicted_step_s, 100 * r.error);
    out << line;
    if (r.run->calculon_step_s > 0) {
      std::snprintf(line, sizeof line, ", Calculon %8.3f s (%+6.1f%%)", r.run->calculon_step_s,
                    100 * (r.run->calculon_step_s / r.run->measured_step_s - 1));
      out << line;
    }
    out << "\n";
  }
}

nlohmann::json published_memory_json(const validate::PublishedMemoryValidation& v) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : v.runs)
    runs.push_back({{"id", r.run->id},
                    {"outcome", r.run->out_of_memory ? "oom" : "ok"},
                    {"predicted_peak_GiB", r.predicted_peak_gib},
                    {"verdict", to_string(r.verdict)},
                    {"printed_peak_GiB", r.run->measured_peak_gib > 0 ? nlohmann::json(r.run->measured_peak_gib)
                                                                      : nlohmann::json(nullptr)}});
  return {{"trained", v.trained},
          {"trained_predicted_oom", v.trained_predicted_oom},
          {"out_of_memory", v.out_of_memory},
          {"out_of_memory_predicted_fits", v.oom_predicted_fits},
          {"printed_peaks", v.printed},
          {"peak_mean_error", v.mean_error},
          {"peak_mean_abs_error", v.mean_abs_error},
          {"runs", runs}};
}

void print_published_memory(std::ostream& out, const validate::PublishedMemoryValidation& v) {
  char line[256];
  std::snprintf(line, sizeof line,
                "memory: %d of %d runs that trained predicted oom, %d of %d that ran out of memory predicted to fit",
                v.trained_predicted_oom, v.trained, v.oom_predicted_fits, v.out_of_memory);
  out << line;
  if (v.printed > 0) {
    std::snprintf(line, sizeof line,
                  "; against the %d printed peaks (the allocator's peak reserved) predicted %+.1f%% on average (mean "
                  "|error| %.1f%%)",
                  v.printed, 100 * v.mean_error, 100 * v.mean_abs_error);
    out << line;
  }
  out << "\n";
  for (const auto& r : v.runs) {
    std::snprintf(line, sizeof line, "  %-16s %-4s predicted %6.1f GiB, %-9s", r.run->id.c_str(),
                  r.run->out_of_memory ? "oom" : "ok", r.predicted_peak_gib, std::string(to_string(r.verdict)).c_str());
    out << line;
    if (r.run->measured_peak_gib > 0) {
      std::snprintf(line, sizeof line, " printed %6.1f GiB (%+6.1f%%)", r.run->measured_peak_gib, 100 * r.error);
      out << line;
    }
    out << "\n";
  }
}

nlohmann::json stack_fraction_json(const validate::StackFractionFit& f) {
  nlohmann::json folds = nlohmann::json::array();
  for (const auto& x : f.leave_one_source_out)
    folds.push_back({{"source", x.source},
                     {"runs", x.runs},
                     {"fraction", x.fraction},
                     {"held_out_mean_abs_error", x.held_out_mean_abs_error}});
  return {{"attention_backend", f.attention_backend},
          {"shipped", f.shipped},
          {"fitted", f.fitted},
          {"runs", f.runs},
          {"mean_abs_log_error", f.mean_abs_log_error},
          {"leave_one_source_out", folds},
          {"held_out_mean_abs_error", f.held_out_mean_abs_error},
          {"shipped_equals_fit", f.shipped_is_fit}};
}

void print_attention_backends(std::ostream& out, const std::vector<validate::StackFractionFit>& fits,
                              const std::string& shipped, const std::string& default_backend) {
  out << "the attention curve that prices its steps, chosen by that held-out error (the fraction refitted under each; "
         "every run in its source's fold): each run's (its software's kernels, the attention_backend column; "
         "else the framework's "
      << default_backend << "), or one curve for every run:\n";
  char line[200];
  for (const auto& f : fits) {
    std::snprintf(line, sizeof line, "  %-10s fraction %.2f  in-sample mean |log error| %.3f  held out %5.1f%%%s\n",
                  f.attention_backend.c_str(), f.fitted, f.mean_abs_log_error, 100 * f.held_out_mean_abs_error,
                  f.attention_backend == shipped ? "  <- shipped" : "");
    out << line;
  }
}

void print_stack_fraction(std::ostream& out, const validate::StackFractionFit& f, const std::string& coefficients) {
  char line[256];
  std::snprintf(line, sizeof line,
                "\n%s's stack_gemm_fraction (its GEMMs against the device's kernel curves), fitted on the %d runs "
                "above of GPUs with curves: %.2f, mean |log error| %.3f (%s shipped %.2f)\n",
                coefficients.c_str(), f.runs, f.fitted, f.mean_abs_log_error, f.shipped_is_fit ? "=" : "DIFFERS from",
                f.shipped);
  out << line << "leave one source out (fitted on the others, this source held out):\n";
  for (const auto& x : f.leave_one_source_out) {
    std::snprintf(line, sizeof line, "  %-50.50s %2d runs  fraction %.2f  mean |error| %5.1f%%\n", x.source.c_str(),
                  x.runs, x.fraction, 100 * x.held_out_mean_abs_error);
    out << line;
  }
}

nlohmann::json collectives_json(const validate::CollectiveValidation& v) {
  nlohmann::json groups = nlohmann::json::array(), rows = nlohmann::json::array();
  for (const auto& g : v.groups)
    groups.push_back(
        {{"group", g.group}, {"rows", g.rows}, {"mean_abs_error", g.mean_abs_error}, {"mean_error", g.mean_error}});
  for (const auto& r : v.rows)
    rows.push_back({{"id", r.row->id},
                    {"source", r.row->source},
                    {"cluster", r.row->cluster.name},
                    {"collective", to_string(r.row->op)},
                    {"gpus", r.row->gpus},
                    {"bytes", static_cast<std::int64_t>(r.row->bytes)},
                    {"measured_busbw_GBps", r.row->busbw_bytes_per_s / 1e9},
                    {"predicted_busbw_GBps", r.predicted_busbw_bytes_per_s / 1e9},
                    {"error", r.error}});
  return {{"held_out",
           "every row but the one-node rows of 1 GiB and more, whose mean busbw fraction is the intra-node link "
           "efficiency"},
          {"intra_node_busbw_fraction", v.intra_node_busbw_fraction},
          {"intra_node_rows", v.intra_node_rows},
          {"intra_efficiency_shipped_equals_measured", v.shipped_is_measured},
          {"groups", groups},
          {"rows", rows}};
}

void print_collectives(std::ostream& out, const validate::CollectiveValidation& v) {
  out << "\nPublished collective bandwidths (data/reference/published_collectives.csv): nccl-tests busbw against the\n"
      << "link model (ring_collective_seconds on the cluster's links, megatron coefficients)\n";
  char line[256];
  std::snprintf(line, sizeof line,
                "the intra-node link's efficiency: busbw / datasheet over the %d one-node rows of 1 GiB and more "
                ": %.3f (%s %.2f); the other rows held out\n",
                v.intra_node_rows, v.intra_node_busbw_fraction,
                v.shipped_is_measured ? "= shipped" : "DIFFERS from shipped", kMeasuredIntraNodeEfficiency);
  out << line;
  std::snprintf(line, sizeof line, "%-24s %5s %10s %10s\n", "group", "rows", "mean|err|", "mean err");
  out << line;
  for (const auto& g : v.groups) {
    std::snprintf(line, sizeof line, "%-24s %5d %9.1f%% %+9.1f%%\n", g.group.c_str(), g.rows, 100 * g.mean_abs_error,
                  100 * g.mean_error);
    out << line;
  }
  for (const auto& r : v.rows) {
    std::snprintf(line, sizeof line,
                  "  %-26s %-14s %3lld GPUs %9.4g MiB: measured %6.1f GB/s, predicted %6.1f (%+6.1f%%)\n",
                  r.row->id.c_str(), std::string(to_string(r.row->op)).c_str(), static_cast<long long>(r.row->gpus),
                  r.row->bytes / (1024.0 * 1024.0), r.row->busbw_bytes_per_s / 1e9, r.predicted_busbw_bytes_per_s / 1e9,
                  100 * r.error);
    out << line;
  }
}

}  // namespace headroom::cli
