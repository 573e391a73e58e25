// Runs tables of `calibrate --from-runs`: CSV (RFC 4180) or JSON Lines, a column per knob (knobs.hpp) and the
// measured columns.
#include "headroom/ingest/measured_runs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/knobs.hpp"
#include "headroom/estimator/spec.hpp"
#include "text.hpp"

namespace headroom::calibrate {

using text::at;
using text::lines_of;
using text::number;
using text::trim;

namespace {

void set_measured(MeasuredRun& run, std::string_view column, double value) {
  if (column == "tflops_per_gpu")
    run.tflops_per_gpu = value;
  else if (column == "tokens_per_s")
    run.tokens_per_s = value;
  else if (column == "step_time_s")
    run.step_time_s = value;
  else if (column == "peak_memory_gib")
    run.peak_memory_gib = value;
}

bool has_measurement(const MeasuredRun& r) {
  return r.tflops_per_gpu || r.tokens_per_s || r.step_time_s || r.peak_memory_gib;
}

std::string joined(const std::vector<std::string_view>& names) {
  std::string s;
  for (const auto n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

// One cell of a runs table into `run`. Layout cells are kept as text (checked where they are used, like
// the flags they are named after); measured cells must be numbers.
void put_cell(MeasuredRun& run, std::string_view column, std::string_view value, const std::string& here) {
  value = trim(value);
  if (value.empty()) return;  // an empty cell is a missing value
  const auto& layout = run_layout_columns();
  const auto& measured = run_measured_columns();
  if (column == "outcome") {
    if (value == "ok")
      run.outcome = RunOutcome::ok;
    else if (value == "oom")
      run.outcome = RunOutcome::oom;
    else
      throw Error(here + ": outcome '" + std::string(value) + "' (valid: ok, oom)");
  } else if (std::find(measured.begin(), measured.end(), column) != measured.end()) {
    const auto x = number(value);
    if (!x || *x <= 0)  // a step of no time, no tokens or no memory was not measured
      throw Error(here + ": " + std::string(column) + " '" + std::string(value) + "' (valid: a positive number)");
    set_measured(run, column, *x);
  } else if (std::find(layout.begin(), layout.end(), column) != layout.end() || find_knob(column) != nullptr) {
    run.layout[std::string(column)] = std::string(value);
  } else {
    throw Error(here + ": unknown column '" + std::string(column) + "' (valid: " + joined(layout) + ", outcome, " +
                joined(measured) + ")");
  }
}

// The row's integer cell `column`, where it has one that parses (a bad one is refused where the layout is read).
std::optional<double> integer_cell(const MeasuredRun& run, std::string_view column) {
  const auto it = run.layout.find(std::string(column));
  if (it == run.layout.end()) return std::nullopt;
  try {
    return static_cast<double>(parse_integer(column, it->second));
  } catch (const Error&) {
    return std::nullopt;
  }
}

void check_row(const MeasuredRun& run, const std::string& here) {
  if (run.outcome == RunOutcome::ok && !has_measurement(run))
    throw Error(here + ": a run with outcome ok needs one of " + joined(run_measured_columns()));
  const auto gbs = integer_cell(run, "gbs"), seq = integer_cell(run, "seq");
  if (run.step_time_s && run.tokens_per_s && gbs && seq)
    check_step_and_tokens(*run.step_time_s, *run.tokens_per_s, *gbs * *seq, here);
}

// RFC 4180: fields separated by commas, quoted with '"' where they hold commas, quotes ("") or newlines.
std::vector<std::vector<std::string>> csv_records(std::string_view text, std::string_view where,
                                                  std::vector<int>* first_lines) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string cell;
  bool quoted = false, field_started = false;
  int line = 1, record_line = 1;
  auto end_record = [&] {
    record.push_back(cell);
    const bool blank = record.size() == 1 && trim(record[0]).empty();
    if (!blank) {
      records.push_back(record);
      first_lines->push_back(record_line);
    }
    record.clear();
    cell.clear();
    field_started = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        cell += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cell += c, line += c == '\n';
    } else if (c == '"' && !field_started) {
      quoted = field_started = true;
    } else if (c == ',') {
      record.push_back(cell), cell.clear(), field_started = false;
    } else if (c == '\n') {
      end_record();
      record_line = ++line;
    } else if (c != '\r') {
      cell += c, field_started = true;
    }
  }
  if (quoted) throw Error(at(where, record_line) + ": a quoted field is not closed");
  end_record();
  return records;
}

std::vector<MeasuredRun> parse_csv(std::string_view text, std::string_view where) {
  std::vector<int> lines;
  const auto records = csv_records(text, where, &lines);
  if (records.empty()) throw Error(std::string(where) + ": no header row");
  std::vector<std::string> header;
  std::set<std::string> seen;
  for (const auto& h : records[0]) {
    header.emplace_back(trim(h));
    if (!seen.insert(header.back()).second)
      throw Error(at(where, lines[0]) + ": column '" + header.back() + "' appears twice");
  }
  std::vector<MeasuredRun> runs;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const auto here = at(where, lines[r]);
    if (records[r].size() != header.size())
      throw Error(here + ": " + std::to_string(records[r].size()) + " fields where the header has " +
                  std::to_string(header.size()));
    MeasuredRun run;
    run.source = here;
    for (std::size_t c = 0; c < header.size(); ++c) put_cell(run, header[c], records[r][c], here);
    check_row(run, here);
    runs.push_back(std::move(run));
  }
  return runs;
}

// A JSON value of a layout column as the text a flag would carry: integers without a decimal point.
std::string cell_text(const nlohmann::json& v, const std::string& here, const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number_float()) {
    const double x = v.get<double>();
    if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 9e15)
      return std::to_string(static_cast<std::int64_t>(x));
    return v.dump();
  }
  if (v.is_null()) return "";
  throw Error(here + ": " + key + " is a " + std::string(v.type_name()) + " (valid: a string, number or boolean)");
}

// The JSON type a column's value must have: numbers for the measured columns and the integer and number knobs,
// booleans for flags, strings for the rest (a quoted "4" is a string, not the number a flag would carry).
void check_json_type(std::string_view key, const nlohmann::json& value, const std::string& here) {
  if (value.is_null()) return;  // a missing value, as an empty cell
  const auto& measured = run_measured_columns();
  const Knob* k = find_knob(key);
  std::string_view valid = "a string";
  bool ok = value.is_string();
  if (std::find(measured.begin(), measured.end(), key) != measured.end()) {
    valid = "a positive number";
    ok = value.is_number();
  } else if (k != nullptr &&
             (k->type == KnobType::count || k->type == KnobType::whole || k->type == KnobType::number)) {
    valid = "a number";
    ok = value.is_number();
  } else if (k != nullptr && k->type == KnobType::flag) {
    valid = "true or false";
    ok = value.is_boolean();
  }
  if (!ok)
    throw Error(here + ": " + std::string(key) + " is a " + std::string(value.type_name()) + " " + value.dump() +
                " (valid: " + std::string(valid) + ")");
}

std::vector<MeasuredRun> parse_jsonl(std::string_view text, std::string_view where) {
  std::vector<MeasuredRun> runs;
  int lineno = 0;
  for (const auto line : lines_of(text)) {
    ++lineno;
    if (trim(line).empty()) continue;
    const auto here = at(where, lineno);
    // The spec files' strict reader: a key twice in one object is refused, not resolved by the last one.
    const auto j = parse_json_strict(line, here);
    if (!j.is_object()) throw Error(here + ": a " + std::string(j.type_name()) + " where a run object was expected");
    MeasuredRun run;
    run.source = here;
    for (const auto& [key, value] : j.items()) {
      const auto& layout = run_layout_columns();
      const auto& measured = run_measured_columns();
      if (find_knob(key) != nullptr || key == "outcome" ||
          std::find(layout.begin(), layout.end(), key) != layout.end() ||
          std::find(measured.begin(), measured.end(), key) != measured.end())
        check_json_type(key, value, here);
      put_cell(run, key, cell_text(value, here, key), here);
    }
    check_row(run, here);
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace

void check_step_and_tokens(double step_time_s, double tokens_per_s, double tokens_per_step, std::string_view where) {
  const double implied = tokens_per_step / step_time_s;  // tokens/s = gbs * seq / step time
  if (std::fabs(tokens_per_s - implied) > kMeasuredTolerance * implied) {
    char line[300];
    std::snprintf(line, sizeof line,
                  ": tokens_per_s %g contradicts step_time_s %g (gbs x seq / step_time_s = %.6g tokens/s; valid: "
                  "within %g%% of it, or only one of the two)",
                  tokens_per_s, step_time_s, implied, 100 * kMeasuredTolerance);
    throw Error(std::string(where) + line);
  }
}

void check_run_bounds(const MeasuredRun& r, const RunBounds& b) {
  char line[400];
  auto refuse = [&](const char* what) { throw Error(r.source + ": " + what); };
  if (r.peak_memory_gib && *r.peak_memory_gib > b.memory_gib) {
    std::snprintf(line, sizeof line, "peak_memory_gib %g is more than the %s has (%g GiB; valid: at most that)",
                  *r.peak_memory_gib, b.gpu.c_str(), b.memory_gib);
    refuse(line);
  }
  const double peak_tflops = b.peak_flops / 1e12;
  if (r.tflops_per_gpu && b.peak_flops > 0 && *r.tflops_per_gpu > peak_tflops) {
    std::snprintf(
        line, sizeof line,
        "tflops_per_gpu %g is above the %s's highest dense peak %g TFLOP/s (valid: at most that, MFU <= 100%%)",
        *r.tflops_per_gpu, b.gpu.c_str(), peak_tflops);
    refuse(line);
  }
  if (r.step_time_s && r.tokens_per_s)
    check_step_and_tokens(*r.step_time_s, *r.tokens_per_s, b.tokens_per_step, r.source);
  // The shortest step the GPUs' peak allows: model FLOPs / (gpus x peak).
  const double fastest = b.peak_flops > 0 && b.gpus > 0 ? b.model_flops_per_step / (b.gpus * b.peak_flops) : 0;
  const std::optional<double> step =
      r.step_time_s ? r.step_time_s
                    : (r.tokens_per_s ? std::optional<double>(b.tokens_per_step / *r.tokens_per_s) : std::nullopt);
  if (step && *step < fastest) {
    std::snprintf(
        line, sizeof line,
        "a step of %g s is faster than the %g GPUs' highest dense peak allows (%.6g s for %.4g model FLOPs on %s: MFU "
        "%.0f%%; valid: MFU <= 100%%)",
        *step, b.gpus, fastest, b.model_flops_per_step, b.gpu.c_str(), 100 * fastest / *step);
    refuse(line);
  }
}

std::vector<std::vector<std::string>> read_csv_records(std::string_view text, std::string_view where) {
  std::vector<int> lines;
  return csv_records(text, where, &lines);
}

const std::vector<std::string_view>& run_layout_columns() {
  static const std::vector<std::string_view> columns = [] {
    std::vector<std::string_view> c = {"model", "gpu", "cluster", "framework"};
    for (const Knob& k : knobs()) c.push_back(k.name);  // every knob under its name (find_knob takes older ones)
    return c;
  }();
  return columns;
}

const std::vector<std::string_view>& run_measured_columns() {
  static const std::vector<std::string_view> columns = {"tflops_per_gpu", "tokens_per_s", "step_time_s",
                                                        "peak_memory_gib"};
  return columns;
}

std::vector<MeasuredRun> parse_runs_table(std::string_view text, std::string_view where) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) throw Error(std::string(where) + ": empty (a CSV table or JSON Lines of runs)");
  auto runs = text[first] == '{' ? parse_jsonl(text, where) : parse_csv(text, where);
  if (runs.empty()) throw Error(std::string(where) + ": a header but no run");
  return runs;
}

}  // namespace headroom::calibrate
