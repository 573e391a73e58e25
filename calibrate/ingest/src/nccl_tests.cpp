#include "headroom/ingest/nccl_tests.hpp"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "headroom/core/error.hpp"

namespace headroom::calibrate {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> t;
  for (std::string w; in >> w;) t.push_back(w);
  return t;
}

double number(const std::string& s, std::string_view where, int line) {
  double x = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
  if (ec != std::errc() || p != s.data() + s.size())
    throw Error(std::string(where) + ":" + std::to_string(line) + ": '" + s + "' is not a number");
  return x;
}

// "all_reduce_perf" or ".../alltoall_perf" anywhere in a word.
std::optional<Collective> collective_in(std::string_view text) {
  for (const auto& c : kCollectives)
    if (text.find(c.nccl_tests) != std::string_view::npos) return c.op;
  return std::nullopt;
}

// The collective a log measures: --ingest-op, else the binary's name in the text, else in the file's name.
Collective log_collective(std::string_view text, std::string_view where, std::string_view op_hint) {
  std::optional<Collective> op;
  if (!op_hint.empty()) {
    op = collective_from_name(op_hint);
    if (!op)
      throw Error("unknown collective '" + std::string(op_hint) +
                  "' (valid: all_reduce, all_gather, reduce_scatter, all_to_all, send_recv)");
  }
  if (!op) op = collective_in(text);
  if (!op) op = collective_in(where);
  if (!op)
    throw Error(std::string(where) +
                ": cannot tell which collective this nccl-tests log measures (name the file "
                "after the binary, e.g. all_reduce_perf.txt, or pass --ingest-op)");
  return *op;
}

// Where the header put the columns a result line is read from.
struct ResultColumns {
  int size = -1, time = -1, busbw = -1;
  bool wrong_count = false;  // newer nccl-tests: "#wrong" (a count) after busbw; older: "error" (a max error)
};

// A '#' line: "#  Rank N ... on HOST device ... [..] NAME" counts a rank (its host, the first device's name);
// the column header says where size, time and busbw are.
void read_comment(const std::string& line, NcclTestsLog& log, std::set<std::string>& hosts, ResultColumns& cols) {
  const auto t = split(line.substr(1));
  if (t.size() >= 2 && t[0] == "Rank") {
    ++log.ranks;
    for (std::size_t i = 0; i + 1 < t.size(); ++i) {
      if (t[i] != "on") continue;
      hosts.insert(t[i + 1]);  // the first "on HOST" only: one host per rank
      break;
    }
    if (log.device.empty()) {
      const auto close = line.find(']');
      const auto name = close == std::string::npos ? close : line.find_first_not_of(' ', close + 1);
      if (name != std::string::npos) log.device = line.substr(name);  // nothing after ']': no name
    }
  } else if (!t.empty() && (t[0] == "size" || t[0] == "bytes")) {
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] == "time" && cols.time < 0) cols.time = static_cast<int>(i);
      if (t[i] == "busbw" && cols.busbw < 0) {
        cols.busbw = static_cast<int>(i);
        cols.wrong_count = i + 1 < t.size() && t[i + 1] == "#wrong";
      }
    }
    cols.size = 0;
  }
}

// One result line (its fields t): a measurement of the log's collective, and the busbw nccl-tests reported.
void read_result(const std::vector<std::string>& t, const ResultColumns& cols, std::string_view where, int lineno,
                 NcclTestsLog& log) {
  const auto at = [&] { return std::string(where) + ":" + std::to_string(lineno) + ": "; };
  if (cols.size < 0 || cols.time < 0) throw Error(at() + "a result line before the column header");
  if (static_cast<int>(t.size()) <= std::max(cols.time, cols.busbw))
    throw Error(at() + std::to_string(t.size()) + " columns, the header promised more");
  kernels::Measurement m;
  const double bytes = number(t[0], where, lineno);
  if (bytes >= 9.2e18) throw Error(at() + "size " + t[0] + " is out of range");  // the size is an int64 below
  m.c = kernels::CollectiveCase{log.op, static_cast<std::int64_t>(bytes), 0};
  m.kernel = "nccl-tests";
  m.bytes = bytes;
  m.seconds = number(t[static_cast<std::size_t>(cols.time)], where, lineno) * 1e-6;
  if (!(m.seconds > 0 && std::isfinite(m.seconds)))  // from_chars reads "inf" and "nan" too
    throw Error(at() + "time must be a positive number");
  m.check = {0, 0, "nccl-tests #wrong"};
  if (cols.wrong_count && t.size() > static_cast<std::size_t>(cols.busbw) + 1) {
    const std::string& w = t[static_cast<std::size_t>(cols.busbw) + 1];
    if (w != "N/A" && number(w, where, lineno) > 0)
      throw Error(at() + "nccl-tests reports wrong results at size " + t[0]);
  }
  log.reported_busbw.push_back(cols.busbw >= 0 ? number(t[static_cast<std::size_t>(cols.busbw)], where, lineno) : 0.0);
  log.rows.push_back(m);
}

}  // namespace

// nccl-tests prints a "# Using devices" block ("#  Rank  0 Group  0 Pid 123 on host device 0 [..] NAME"), a
// header naming the columns ("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ..." — which
// columns exist depends on the collective and version), then one line per size: out-of-place, then in-place.
NcclTestsLog parse_nccl_tests(std::string_view text, std::string_view where, std::string_view op_hint) {
  NcclTestsLog log;
  log.op = log_collective(text, where, op_hint);
  std::set<std::string> hosts;
  ResultColumns cols;
  std::istringstream in{std::string(text)};
  int lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (line.empty()) continue;
    if (line[0] == '#') {
      read_comment(line, log, hosts, cols);
      continue;
    }
    const auto t = split(line);
    if (t.empty() || t[0].find_first_not_of("0123456789") != std::string::npos) continue;  // warnings, NCCL INFO
    read_result(t, cols, where, lineno, log);
  }
  if (log.rows.empty()) throw Error(std::string(where) + ": no nccl-tests result lines found");
  if (log.ranks == 0)
    throw Error(std::string(where) + ": no '#  Rank N ... on HOST' lines: cannot tell the rank count");
  if (log.ranks == 1)  // a profile's collective fits are of groups that use a link
    throw Error(std::string(where) +
                ": one rank: a collective over a single GPU measures no link (run nccl-tests over 2 or more)");
  log.nodes = static_cast<int>(std::max<std::size_t>(1, hosts.size()));
  for (auto& m : log.rows) std::get<kernels::CollectiveCase>(m.c).ranks = log.ranks;
  return log;
}

}  // namespace headroom::calibrate
