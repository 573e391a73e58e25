#include "headroom/validation/paper_4d.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "headroom/ingest/measured_runs.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/estimator/memory.hpp"

namespace headroom::validate {
namespace {

RunConfig parse_run(const ReferenceTable& t, const std::vector<std::string>& row) {
  const auto num = [&](const char* name) { return std::stoll(t.at(row, name)); };
  RunConfig r;
  r.table = static_cast<int>(num("table"));
  r.model = t.at(row, "model");
  r.gpu = t.at(row, "gpu");
  r.seq = num("seq_len");
  r.tp = num("tp");
  r.cp = num("cp");
  r.pp = num("pp");
  r.mbs = num("mbs");
  r.gpus = num("num_gpus");
  r.gbs = num("global_batch");
  return r;
}

}  // namespace

const std::string& ReferenceTable::at(const std::vector<std::string>& row, const std::string& column) const {
  const auto it = std::find(header.begin(), header.end(), column);
  if (it == header.end()) throw Error("reference table " + path.string() + " has no column '" + column + "'");
  const auto i = static_cast<std::size_t>(it - header.begin());
  if (i >= row.size()) throw Error("reference table " + path.string() + ": a row has no '" + column + "'");
  return row[i];
}

ReferenceTable read_reference_table(const std::filesystem::path& path) {
  auto records =
      calibrate::read_csv_records(read_file_bounded(path, "reference table " + path.string()), path.string());
  if (records.empty()) throw Error("reference table " + path.string() + " is empty");
  ReferenceTable t{path, records.front(), {}};
  t.rows.assign(records.begin() + 1, records.end());
  return t;
}

std::vector<EstimateCell> read_estimates(const std::filesystem::path& csv) {
  const ReferenceTable t = read_reference_table(csv);
  std::vector<EstimateCell> cells;
  for (const auto& row : t.rows) cells.push_back({parse_run(t, row), std::stod(t.at(row, "estimated_gib"))});
  return cells;
}

std::vector<MeasuredRun> read_measured(const std::filesystem::path& csv) {
  const ReferenceTable t = read_reference_table(csv);
  std::vector<MeasuredRun> runs;
  for (const auto& row : t.rows) {
    MeasuredRun m{parse_run(t, row), t.at(row, "outcome") == "oom", 0.0};
    if (!m.oom) m.tflops = std::stod(t.at(row, "tflops"));
    runs.push_back(m);
  }
  return runs;
}

std::vector<Typo> read_typos(const std::filesystem::path& path) {
  const nlohmann::json j = read_json_file(path);
  std::vector<Typo> typos;
  for (const auto& t : j.at("cells")) {
    typos.push_back({t.at("table").get<int>(), t.at("tp").get<std::int64_t>(), t.at("cp").get<std::int64_t>(),
                     t.at("pp").get<std::int64_t>(), t.at("mbs").get<std::int64_t>(),
                     t.at("num_gpus").get<std::int64_t>(), t.at("printed_gib").get<double>(),
                     t.at("evidence").get<std::string>()});
  }
  return typos;
}

int estimate_table_for(int measured_table) {
  switch (measured_table) {
    case 3: return 2;
    case 4: return 7;
    case 10: return 8;
    default: throw Error("no estimate table is known for measured Table " + std::to_string(measured_table));
  }
}

ClusterSpec cluster_for_run(const SpecLibrary& lib, const RunConfig& run) {
  return lib.cluster_for_gpu(lib.gpu(run.gpu));
}

Layout layout_for_run(const RunConfig& r, const FrameworkProfile& f) {
  Layout l = default_layout(f);
  l.tp = r.tp;
  l.cp = r.cp;
  l.pp = r.pp;
  l.dp = r.gpus / (r.tp * r.cp * r.pp);
  l.mbs = r.mbs;
  l.gbs = r.gbs;
  l.seq = r.seq;
  return l;
}

std::vector<ResidualObservation> observations(const SpecLibrary& lib, const std::vector<MeasuredRun>& runs,
                                              const FrameworkProfile& framework, int only_table, int except_table) {
  std::vector<ResidualObservation> out;
  for (const auto& r : runs) {
    if ((only_table != 0 && r.run.table != only_table) || (except_table != 0 && r.run.table == except_table)) continue;
    out.push_back({lib.model(r.run.model), cluster_for_run(lib, r.run), layout_for_run(r.run, framework), r.oom});
  }
  return out;
}

std::vector<CellCheck> check_estimates(const SpecLibrary& lib, const std::vector<EstimateCell>& cells,
                                       const std::vector<Typo>& typos) {
  std::vector<CellCheck> checks;
  for (const auto& cell : cells) {
    const ModelSpec model = lib.model(cell.run.model);
    CellCheck check{cell, paper_total_bytes(model, layout_for_run(cell.run, FrameworkProfile{})) / kGiB,
                    CellStatus::reproduced, ""};
    const Typo* typo = nullptr;
    for (const auto& t : typos) {
      if (t.table == cell.run.table && t.tp == cell.run.tp && t.cp == cell.run.cp && t.pp == cell.run.pp &&
          t.mbs == cell.run.mbs && t.gpus == cell.run.gpus && t.printed_gib == cell.printed_gib)
        typo = &t;
    }
    const bool matches = std::abs(check.ours_gib - cell.printed_gib) <= kCellToleranceGiB;
    if (typo != nullptr) {
      check.status = matches ? CellStatus::typo_not_seen : CellStatus::documented_typo;
      check.evidence = typo->evidence;
    } else if (!matches) {
      check.status = CellStatus::drift;
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace headroom::validate
