#include <cstdio>
#include <string>

#include "cli_common.hpp"
#include "headroom/estimator/memory.hpp"
#include "validate_print.hpp"

namespace headroom::cli {
namespace {

std::string_view status_name(validate::CellStatus s) {
  switch (s) {
    case validate::CellStatus::reproduced: return "reproduced";
    case validate::CellStatus::documented_typo: return "documented typo";
    case validate::CellStatus::drift: return "DRIFT";
    case validate::CellStatus::typo_not_seen: return "typo listed but reproduced";
  }
  return "?";
}

nlohmann::json score_to_json(const VerdictScore& v) {
  return {{"runs", v.runs},
          {"right", v.right},
          {"false_fits", v.false_fits},
          {"false_ooms", v.false_ooms},
          {"accuracy", v.accuracy()}};
}

nlohmann::json forms_json(const std::vector<validate::MemoryFormScore>& forms, validate::MemoryForm best,
                          validate::MemoryForm shipped) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& f : forms)
    candidates.push_back({{"form", validate::to_string(f.form)},
                          {"parameters", f.parameters},
                          {"shippable", f.shippable},
                          {"in_sample", score_to_json(f.in_sample)},
                          {"leave_one_table_out", score_to_json(f.held_out)}});
  return {{"candidates", candidates},
          {"best", validate::to_string(best)},
          {"shipped", validate::to_string(shipped)},
          {"shipped_is_best", shipped == best}};
}

void print_forms(std::ostream& out, const std::vector<validate::MemoryFormScore>& forms, validate::MemoryForm best,
                 validate::MemoryForm shipped) {
  out << "\nForm of the residual, chosen by held-out score (fitted on all tables but one, scored on it; pooled)\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-40s %6s %15s %24s\n", "form", "params", "in-sample right",
                "held-out right (false fits)");
  out << line;
  for (const auto& f : forms) {
    std::snprintf(line, sizeof line, "%-40s %6d %8d / %-4d %11d / %-4d (%d)%s\n",
                  std::string(validate::to_string(f.form)).c_str(), f.parameters, f.in_sample.right, f.in_sample.runs,
                  f.held_out.right, f.held_out.runs, f.held_out.false_fits, f.shippable ? "" : "  peer, not shipped");
    out << line;
  }
  out << "best: " << validate::to_string(best) << "; shipped: " << validate::to_string(shipped)
      << (shipped == best ? " (= best)" : " (NOT the best by held-out score)") << "\n";
}

nlohmann::json residual_to_json(const ResidualModel& r) {
  return {{"fixed_GiB", r.fixed_bytes / kGiB},
          {"logits_bytes_per_element", r.logits_bytes_per_element},
          {"optimizer_shard_bytes_per_param", r.optimizer_shard_bytes_per_param},
          {"cp_communicator_GiB", r.cp_communicator_bytes / kGiB},
          {"capacity_share", r.capacity_share}};
}

std::string describe(const ResidualModel& r) {
  char buf[256];
  if (validate::form_of(r) == validate::MemoryForm::eq18_capacity_share) {
    std::snprintf(buf, sizeof buf, "share of capacity %.4f", r.capacity_share);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "fixed %.3f GiB, logits %.3g B/elem, optimizer shard %.4g B/param, CP %.4g GiB/comm",
                r.fixed_bytes / kGiB, r.logits_bytes_per_element, r.optimizer_shard_bytes_per_param,
                r.cp_communicator_bytes / kGiB);
  return buf;
}

}  // namespace

nlohmann::json thesis_mtsl_json(const validate::ThesisMtslValidation& v) {
  nlohmann::json forms = nlohmann::json::array();
  for (const auto& f : v.forms)
    forms.push_back({{"form", f.form},
                     {"zeros_wrong", f.zeros_wrong},
                     {"mean_abs_error", f.mean_error},
                     {"worst_abs_error", f.worst_error}});
  return {{"leave_one_rank_out", forms},
          {"shipped", v.forms[v.shipped].form},
          {"refit",
           {{"fixed_GiB", v.refit.model.fixed_bytes / kGiB},
            {"logits_bytes_per_element", v.refit.model.logits_bytes_per_element},
            {"fsdp_unit_buffers", v.refit.fsdp_unit_buffers},
            {"zeros_wrong", v.refit.zero_misses},
            {"max_abs_error", v.refit.max_rel_error},
            {"mean_abs_error", v.refit.mean_rel_error}}},
          {"shipped_equals_fit", v.shipped_is_fit}};
}

void print_thesis_mtsl(std::ostream& out, const validate::ThesisMtslValidation& v) {
  out << "\nThesis Table B.4 MTSL (pytorch-fsdp, LoRA ranks 128/512/1024): unit buffers derived, every count held "
         "out\n";
  char line[200];
  std::snprintf(line, sizeof line, "%-28s %12s %18s %19s\n", "form", "zeros wrong", "mean |error| held",
                "worst |error| held");
  out << line;
  for (std::size_t i = 0; i < v.forms.size(); ++i) {
    const auto& f = v.forms[i];
    std::snprintf(line, sizeof line, "%-28s %12d %17.1f%% %18.1f%%%s\n", f.form.c_str(), f.zeros_wrong,
                  100 * f.mean_error, 100 * f.worst_error, i == v.shipped ? "  <- derived (shipped)" : "");
    out << line;
  }
  std::snprintf(line, sizeof line,
                "derived form on all 12 cells: fixed %.3f GiB, logits %.2f B, unit buffers %lld; zeros wrong %d, "
                "nonzero cells mean %.1f%%, worst %.1f%%",
                v.refit.model.fixed_bytes / kGiB, v.refit.model.logits_bytes_per_element,
                static_cast<long long>(v.refit.fsdp_unit_buffers), v.refit.zero_misses, 100 * v.refit.mean_rel_error,
                100 * v.refit.max_rel_error);
  out << line << (v.shipped_is_fit ? " (= shipped)" : " (DIFFERS from shipped)") << "\n";
}

nlohmann::json estimate_json(const validate::EstimateSection& e) {
  nlohmann::json tables = nlohmann::json::array();
  for (const auto& [t, s] : e.tables)
    tables.push_back({{"table", t},
                      {"cells", s.cells},
                      {"reproduced", s.reproduced},
                      {"documented_typos", s.typos},
                      {"failures", s.failures},
                      {"max_abs_diff_gib", s.max_abs_diff}});
  nlohmann::json not_reproduced = nlohmann::json::array();
  for (const auto& c : e.not_reproduced)
    not_reproduced.push_back({{"table", c.cell.run.table},
                              {"tp", c.cell.run.tp},
                              {"cp", c.cell.run.cp},
                              {"pp", c.cell.run.pp},
                              {"mbs", c.cell.run.mbs},
                              {"num_gpus", c.cell.run.gpus},
                              {"printed_gib", c.cell.printed_gib},
                              {"ours_gib", c.ours_gib},
                              {"status", status_name(c.status)},
                              {"evidence", c.evidence}});
  return {{"tolerance_gib", validate::kCellToleranceGiB}, {"tables", tables}, {"not_reproduced", not_reproduced}};
}

void print_estimates(std::ostream& out, const validate::EstimateSection& e) {
  char line[256];
  out << "4D paper estimate tables (Eq. 18, first stage), tolerance " << validate::kCellToleranceGiB << " GiB\n";
  std::snprintf(line, sizeof line, "%6s %6s %11s %16s %9s %14s\n", "table", "cells", "reproduced", "documented typo",
                "failures", "max |diff| GiB");
  out << line;
  for (const auto& [t, s] : e.tables) {
    std::snprintf(line, sizeof line, "%6d %6d %11d %16d %9d %14.4f\n", t, s.cells, s.reproduced, s.typos, s.failures,
                  s.max_abs_diff);
    out << line;
  }
  for (const auto& c : e.not_reproduced) {
    const auto& run = c.cell.run;
    out << "  Table " << run.table << " (" << run.tp << "," << run.cp << "," << run.pp << "," << run.mbs << ") at "
        << run.gpus << " GPUs: printed " << nlohmann::json(c.cell.printed_gib) << ", Eq. 18 "
        << format_gib(c.ours_gib * kGiB) << " -> " << status_name(c.status) << ": " << c.evidence << "\n";
  }
}

nlohmann::json verdict_json(const validate::VerdictSection& v, const FrameworkProfile& fw) {
  nlohmann::json tables = nlohmann::json::array(), cv = nlohmann::json::array();
  for (const auto& [t, score] : v.tables) {
    nlohmann::json entry = score_to_json(score);
    entry["table"] = t;
    tables.push_back(entry);
  }
  nlohmann::json wrong = nlohmann::json::array();
  for (const auto& w : v.wrong)
    wrong.push_back({{"table", w.table},
                     {"tp", w.layout.tp},
                     {"cp", w.layout.cp},
                     {"pp", w.layout.pp},
                     {"mbs", w.layout.mbs},
                     {"num_gpus", w.layout.gpus()},
                     {"seq", w.layout.seq},
                     {"measured", w.oom ? "oom" : "ok"},
                     {"predicted_peak_gib", w.predicted_peak_gib},
                     {"capacity_gib", w.capacity_gib}});
  for (const auto& [t, fv] : v.loto)
    cv.push_back(
        {{"held_out_table", t}, {"fitted", residual_to_json(fv.first.model)}, {"score", score_to_json(fv.second)}});
  return {{"framework", fw.name},
          {"residual", residual_to_json(fw.residual)},
          {"tables", tables},
          {"all", score_to_json(v.all)},
          {"wrong", wrong},
          {"refit", residual_to_json(v.refit.model)},
          {"shipped_equals_fit", v.shipped_is_fit},
          {"leave_one_table_out", {{"tables", cv}, {"pooled", score_to_json(v.pooled)}}},
          {"peak_band", band_json(fw.memory_band, v.band)},
          {"forms", forms_json(v.forms, v.best_form, validate::form_of(fw.residual))}};
}

void print_score_row(std::ostream& out, const char* label_format, const std::string& label, const VerdictScore& v) {
  char line[256];
  std::snprintf(line, sizeof line, label_format, label.c_str());
  out << line;
  std::snprintf(line, sizeof line, " %6d %7d %11d %11d %8.1f%%", v.runs, v.right, v.false_fits, v.false_ooms,
                100.0 * v.accuracy());
  out << line;
}

void print_verdicts(std::ostream& out, const validate::VerdictSection& v, const FrameworkProfile& fw) {
  char line[256];
  out << "\nOOM verdicts against measured runs (framework " << fw.name << ", residual model)\n";
  std::snprintf(line, sizeof line, "%6s %6s %7s %11s %11s %9s\n", "table", "runs", "right", "false fits", "false OOMs",
                "accuracy");
  out << line;
  for (const auto& [t, score] : v.tables) {
    print_score_row(out, "%6s", std::to_string(t), score);
    out << "\n";
  }
  print_score_row(out, "%6s", "all", v.all);
  out << "\n";
  for (const auto& w : v.wrong) {
    out << "  Table " << w.table << " (" << w.layout.tp << "," << w.layout.cp << "," << w.layout.pp << ","
        << w.layout.mbs << ") at " << w.layout.gpus() << " GPUs: measured " << (w.oom ? "oom" : "ok")
        << ", predicted peak " << format_gib(w.predicted_peak_gib * kGiB) << " of " << format_gib(w.capacity_gib * kGiB)
        << " GiB\n";
  }
  out << "residual " << describe(fw.residual) << "\n";
  out << "refit on all visible tables: " << describe(v.refit.model)
      << (v.shipped_is_fit ? " (= shipped)" : " (DIFFERS from shipped)") << "\n";
  out << "\nLeave-one-table-out cross-validation (fit on the other tables, score the held-out one)\n";
  std::snprintf(line, sizeof line, "%9s %6s %7s %11s %11s %9s  %s\n", "held out", "runs", "right", "false fits",
                "false OOMs", "accuracy", "fitted residual");
  out << line;
  for (const auto& [t, fv] : v.loto) {
    print_score_row(out, "%9s", std::to_string(t), fv.second);
    out << "  " << describe(fv.first.model) << "\n";
  }
  print_score_row(out, "%9s", "pooled", v.pooled);
  out << "\n";
  out << "held-out band of the predicted peak " << band_text(v.band)
      << (v.band_shipped ? " (= shipped)" : " (DIFFERS from shipped " + band_text(fw.memory_band) + ")") << "\n";
  print_forms(out, v.forms, v.best_form, validate::form_of(fw.residual));
}

}  // namespace headroom::cli
