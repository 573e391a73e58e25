// `headroom validate`: reproduces the published tables and prints the agreement. Exits 1 when a check fails.
#include <cstdio>
#include <map>
#include <memory>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/estimator/memory.hpp"
#include "validate_4d.hpp"

namespace headroom::cli {
namespace {

struct ValidateOptions {
  std::string data_dir;
  std::string framework = "megatron";
  bool json = false;
};

std::string_view status_name(validate::CellStatus s) {
  switch (s) {
    case validate::CellStatus::reproduced: return "reproduced";
    case validate::CellStatus::documented_typo: return "documented typo";
    case validate::CellStatus::drift: return "DRIFT";
    case validate::CellStatus::typo_not_seen: return "typo listed but reproduced";
  }
  return "?";
}

struct TableSummary {
  int cells = 0, reproduced = 0, typos = 0, failures = 0;
  double max_abs_diff = 0;  // over reproduced cells
};

struct VerdictSummary {
  int runs = 0, right = 0, false_fits = 0, false_ooms = 0;
};

void run_validate(const ValidateOptions& o, std::ostream& out) {
  const SpecLibrary lib(o.data_dir.empty() ? default_data_dir() : std::filesystem::path(o.data_dir));
  const auto ref = lib.data_dir() / "reference";
  const auto checks = validate::check_estimates(lib, validate::read_estimates(ref / "4d_estimates.csv"),
                                                validate::read_typos(ref / "4d_estimates_typos.json"));
  std::map<int, TableSummary> tables;
  nlohmann::json cells_json = nlohmann::json::array();
  int failures = 0;
  for (const auto& c : checks) {
    TableSummary& t = tables[c.cell.run.table];
    ++t.cells;
    const double diff = std::abs(c.ours_gib - c.cell.printed_gib);
    switch (c.status) {
      case validate::CellStatus::reproduced:
        ++t.reproduced;
        t.max_abs_diff = std::max(t.max_abs_diff, diff);
        break;
      case validate::CellStatus::documented_typo: ++t.typos; break;
      default: ++t.failures; ++failures; break;
    }
    if (c.status != validate::CellStatus::reproduced) {
      cells_json.push_back({{"table", c.cell.run.table}, {"tp", c.cell.run.tp}, {"cp", c.cell.run.cp},
                            {"pp", c.cell.run.pp}, {"mbs", c.cell.run.mbs}, {"num_gpus", c.cell.run.gpus},
                            {"printed_gib", c.cell.printed_gib}, {"ours_gib", c.ours_gib},
                            {"status", status_name(c.status)}, {"evidence", c.evidence}});
    }
  }

  const FrameworkProfile fw = lib.framework(o.framework);
  std::map<int, VerdictSummary> verdicts;
  nlohmann::json wrong_json = nlohmann::json::array();
  for (const auto& run : validate::read_measured(ref / "4d_measured.csv")) {
    const ModelSpec model = lib.model(run.run.model);
    const ClusterSpec cluster = validate::cluster_for_run(lib, run.run);
    Layout l;
    l.tp = run.run.tp; l.cp = run.run.cp; l.pp = run.run.pp; l.mbs = run.run.mbs; l.gbs = run.run.gbs;
    l.seq = run.run.seq; l.dp = run.run.gpus / (l.tp * l.cp * l.pp);
    l.precision = fw.precision; l.sharding = fw.sharding;
    const double peak = peak_memory_bytes(model, cluster, l, fw.residual);
    const bool predicted_fit = peak <= cluster.gpu.usable_memory_bytes;
    VerdictSummary& v = verdicts[run.run.table];
    ++v.runs;
    if (predicted_fit != run.oom) {
      ++v.right;
    } else {
      (predicted_fit ? v.false_fits : v.false_ooms)++;
      wrong_json.push_back({{"table", run.run.table}, {"tp", l.tp}, {"cp", l.cp}, {"pp", l.pp}, {"mbs", l.mbs},
                            {"num_gpus", run.run.gpus}, {"measured", run.oom ? "oom" : "ok"},
                            {"predicted_peak_gib", peak / kGiB},
                            {"capacity_gib", cluster.gpu.usable_memory_bytes / kGiB}});
    }
  }
  VerdictSummary all;
  for (const auto& [t, v] : verdicts) {
    all.runs += v.runs; all.right += v.right; all.false_fits += v.false_fits; all.false_ooms += v.false_ooms;
  }
  const double accuracy = all.runs > 0 ? static_cast<double>(all.right) / all.runs : 0.0;
  const bool verdict_ok = accuracy >= 0.98 && all.false_fits == 0;

  if (o.json) {
    nlohmann::json tj = nlohmann::json::array(), vj = nlohmann::json::array();
    for (const auto& [t, s] : tables)
      tj.push_back({{"table", t}, {"cells", s.cells}, {"reproduced", s.reproduced}, {"documented_typos", s.typos},
                    {"failures", s.failures}, {"max_abs_diff_gib", s.max_abs_diff}});
    for (const auto& [t, v] : verdicts)
      vj.push_back({{"table", t}, {"runs", v.runs}, {"right", v.right}, {"false_fits", v.false_fits},
                    {"false_ooms", v.false_ooms}});
    const nlohmann::json doc = {
        {"estimates", {{"tolerance_gib", validate::kCellToleranceGiB}, {"tables", tj}, {"not_reproduced", cells_json}}},
        {"verdicts", {{"framework", fw.name}, {"tables", vj}, {"accuracy", accuracy}, {"false_fits", all.false_fits},
                      {"false_ooms", all.false_ooms}, {"wrong", wrong_json}}},
        {"passed", failures == 0 && verdict_ok}};
    out << doc.dump(2) << "\n";
  } else {
    char line[256];
    out << "4D paper estimate tables (Eq. 18, first stage), tolerance " << validate::kCellToleranceGiB << " GiB\n";
    std::snprintf(line, sizeof line, "%6s %6s %11s %16s %9s %14s\n", "table", "cells", "reproduced",
                  "documented typo", "failures", "max |diff| GiB");
    out << line;
    for (const auto& [t, s] : tables) {
      std::snprintf(line, sizeof line, "%6d %6d %11d %16d %9d %14.4f\n", t, s.cells, s.reproduced, s.typos,
                    s.failures, s.max_abs_diff);
      out << line;
    }
    for (const auto& c : cells_json) {
      out << "  Table " << c["table"] << " (" << c["tp"] << "," << c["cp"] << "," << c["pp"] << "," << c["mbs"]
          << ") at " << c["num_gpus"] << " GPUs: printed " << c["printed_gib"].get<double>() << ", Eq. 18 "
          << format_gib(c["ours_gib"].get<double>() * kGiB) << " -> " << c["status"].get<std::string>() << ": "
          << c["evidence"].get<std::string>() << "\n";
    }
    out << "\nOOM verdicts against measured runs (framework " << fw.name << ", residual model)\n";
    std::snprintf(line, sizeof line, "%6s %6s %7s %11s %11s %9s\n", "table", "runs", "right", "false fits",
                  "false OOMs", "accuracy");
    out << line;
    for (const auto& [t, v] : verdicts) {
      std::snprintf(line, sizeof line, "%6d %6d %7d %11d %11d %8.1f%%\n", t, v.runs, v.right, v.false_fits,
                    v.false_ooms, 100.0 * v.right / v.runs);
      out << line;
    }
    std::snprintf(line, sizeof line, "%6s %6d %7d %11d %11d %8.1f%%\n", "all", all.runs, all.right, all.false_fits,
                  all.false_ooms, 100.0 * accuracy);
    out << line;
    out << "\n" << (failures == 0 && verdict_ok ? "validation passed" : "VALIDATION FAILED") << "\n";
  }
  if (failures != 0 || !verdict_ok) throw CheckFailed("validation failed: see the tables above");
}

}  // namespace

void register_validate(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<ValidateOptions>();
  CLI::App* sub = app.add_subcommand("validate", "reproduce the published tables and print the agreement");
  sub->add_option("--data-dir", opts->data_dir, "directory of specs and reference tables");
  sub->add_option("--framework", opts->framework, "framework profile whose residual model decides verdicts")
      ->capture_default_str();
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, &out] { run_validate(*opts, out); });
}

}  // namespace headroom::cli
