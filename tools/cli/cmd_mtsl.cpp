// `headroom mtsl`: the maximum trainable sequence length of a layout, curves over LoRA rank or GPU count
// (--sweep), and the inverse question (--target-seq: the smallest layouts that train s tokens).
#include <cstdio>
#include <memory>
#include <vector>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/lora.hpp"
#include "headroom/estimator/mtsl.hpp"
#include "headroom/estimator/sharding.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom::cli {
namespace {

struct MtslOptions {
  SpecOptions specs;
  LayoutOptions layout;
  std::string sweep;       // "lora-rank=128,256" or "gpus=8,16"
  std::string target_seq;  // inverse question
  std::string max_gpus = "4096";
  std::string profile;  // also predict the step time at the MTSL with these coefficients
  std::string risk = "nominal";
  bool any_layout = false;  // the longest sequence over rank's search space on --gpus
  std::vector<std::string> constraints;
  std::string top = "5";
  bool json = false;
};

struct SweepPoint {
  std::int64_t value = 0;
  Layout layout;
  MtslResult result;
  MtslInterval interval;
};

// What every MTSL of one command shares: the peak's scale under --risk and the band of the MTSL.
struct Risk {
  bool pessimistic = false;
  double peak_scale = 1.0;  // max_trainable_seq's: 1 + the band's high end under pessimistic
  ErrorBand band;           // the framework's held-out band of the peak, for the MTSL's interval
  std::string source;       // where the band comes from
};

Risk risk_of(const MtslOptions& o, const Plan& r) {
  const ErrorBand asked = risk_band(o.risk, r.framework);
  return {asked.known, asked.known ? asked.upper(1.0) : 1.0, r.framework.memory_band,
          band_source(r.framework.memory_band, "framework " + r.framework.name + "'s memory model", "MTSL")};
}

MtslResult mtsl_of(const Plan& r, const Layout& l, const Risk& k) {
  return max_trainable_seq(r.model, r.cluster, l, r.framework.residual, k.peak_scale);
}

nlohmann::json interval_to_json(const MtslInterval& i) {
  return i.known ? nlohmann::json::array({i.low, i.high}) : nlohmann::json(nullptr);
}

std::string interval_text(const MtslInterval& i) {
  return i.known ? std::to_string(i.low) + "-" + std::to_string(i.high) : "-";
}

std::string format_mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes / (1024.0 * 1024.0));
  return buf;
}

nlohmann::json result_to_json(const MtslResult& r, const MtslInterval& interval) {
  return {{"mtsl_tokens", r.tokens},
          {"mtsl_tokens_interval", interval_to_json(interval)},
          {"granularity_tokens", r.granularity},
          {"binding_stage", r.binding_stage},
          {"binding_term", r.binding_term},
          {"peak_gib", r.peak_bytes / kGiB},
          {"next_peak_gib", r.next_peak_bytes / kGiB},
          {"capacity_gib", r.capacity_bytes / kGiB},
          {"method", r.closed_form ? "closed form" : "bisection"},
          {"capped", r.capped}};
}

std::vector<SweepPoint> run_sweep(const MtslOptions& o, const Plan& r, const Layout& base, const Risk& k) {
  const auto eq = o.sweep.find('=');
  const std::string what = o.sweep.substr(0, eq);
  if (eq == std::string::npos || (what != "lora-rank" && what != "gpus"))
    throw Error("--sweep '" + o.sweep + "' is not understood (valid: lora-rank=R1,R2,... or gpus=N1,N2,...)");
  std::vector<SweepPoint> points;
  std::string rest = o.sweep.substr(eq + 1);
  std::size_t start = 0;
  while (start <= rest.size()) {
    const std::size_t comma = rest.find(',', start);
    const std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    SweepPoint p;
    p.value = parse_count("--sweep " + what, item);
    p.layout = base;
    if (what == "lora-rank") {
      p.layout.lora.rank = p.value;
    } else {
      const std::int64_t tcp = base.tp * base.cp * base.pp;
      if (p.value % tcp != 0)
        throw Error("--sweep gpus=" + item + ": t·c·p = " + std::to_string(tcp) + " does not divide " + item);
      require_whole_nodes(p.value, r.cluster);
      const std::int64_t m = base.microbatches();
      p.layout.dp = p.value / tcp;
      p.layout.gbs = m * p.layout.dp * p.layout.mbs;
    }
    p.result = mtsl_of(r, p.layout, k);
    p.interval = mtsl_interval(r.model, r.cluster, p.layout, r.framework.residual, k.band);
    points.push_back(p);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return points;
}

// The global batch of an MTSL: given, or the default (framework.hpp default_microbatches), said so.
std::string batch_text(const Layout& l, bool given, bool per_row) {
  const std::int64_t m = l.microbatches();
  std::string text = per_row ? std::to_string(m) + " micro-batch" + (m > 1 ? "es" : "") + " per pipeline"
                             : "gbs " + std::to_string(l.gbs) + " (" + std::to_string(m) + " micro-batch" +
                                   (m > 1 ? "es" : "") + " per pipeline";
  if (!given)
    text += l.pp > 1 ? ": the default with a pipeline, p of them, so that 1F1B holds p in flight; --gbs sets it"
                     : ": the default, one per DP rank; --gbs sets it";
  return text + (per_row ? "" : ")");
}

// The layout every row shares; a swept variable (--sweep gpus or lora-rank) is said to vary by row.
void print_header(std::ostream& out, const Plan& r, const Layout& l, const std::string& swept, bool gbs_given) {
  out << "headroom mtsl: " << r.model.name << " on " << r.cluster.gpu.name << " (" << r.cluster.name << "), "
      << r.framework.name << ", ";
  if (swept == "gpus")
    out << "the GPUs of each row = tp " << l.tp << " x cp " << l.cp << " x pp " << l.pp << " x the rest in dp";
  else
    out << l.gpus() << " GPUs = tp " << l.tp << " x cp " << l.cp << " x pp " << l.pp << " x dp " << l.dp;
  out << ", mbs " << l.mbs << ", " << batch_text(l, gbs_given, swept == "gpus") << ", sharding "
      << to_string(l.sharding.params) << to_string(l.sharding.grads) << to_string(l.sharding.optimizer);
  if (l.lora.enabled())
    out << ", LoRA rank " << (swept == "lora-rank" ? "of each row" : std::to_string(l.lora.rank)) << " on "
        << lora_targets_to_string(l.lora.targets);
  out << "\n" << assumed_cluster_line(r.cluster);
}

// The predicted step at the MTSL with --profile's coefficients (throughput.hpp); the layout at s = MTSL.
PerfEstimate perf_at(const Plan& r, Layout l, std::int64_t tokens) {
  l.seq = tokens;
  return estimate_perf(r.model, r.cluster, l, r.coefficients);
}

// --target-seq: the smallest layouts that train s tokens.
void run_target_seq(const MtslOptions& o, const Plan& r, const Layout& base, std::ostream& out) {
  const std::int64_t s = parse_count("--target-seq", o.target_seq);
  const std::int64_t n_max = parse_count("--max-gpus", o.max_gpus);
  const auto fits = smallest_layouts_for_seq(r.model, r.cluster, base, r.framework.residual, s, n_max);
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& f : fits)
      arr.push_back({{"layout", layout_to_json(r.model, f.layout)}, {"peak_gib", f.peak_bytes / kGiB}});
    nlohmann::json doc = {
        {"model", r.model.name}, {"gpu", r.cluster.gpu.name}, {"framework", r.framework.name},
        {"target_seq", s},       {"max_gpus", n_max},         {"gpus", fits.empty() ? 0 : fits.front().layout.gpus()},
        {"layouts", arr}};
    add_cluster_json(doc, r.cluster);
    print_json(out, doc);
    return;
  }
  out << "headroom mtsl --target-seq " << s << ": " << r.model.name << " on " << r.cluster.gpu.name << ", "
      << r.framework.name << (base.lora.enabled() ? ", LoRA rank " + std::to_string(base.lora.rank) : "") << "\n";
  if (fits.empty()) {
    out << "no layout up to " << n_max << " GPUs trains " << s << " tokens\n";
    return;
  }
  out << "smallest: " << fits.front().layout.gpus() << " GPUs, " << fits.size() << " layouts\n\n";
  char line[160];
  const bool experts = r.model.num_experts > 0;
  std::snprintf(line, sizeof line, "%4s %4s %4s %4s%s %10s %8s\n", "tp", "cp", "pp", "dp", experts ? "   ep" : "",
                "peak GiB", "of GiB");
  out << line;
  for (const auto& f : fits) {
    std::snprintf(line, sizeof line, "%4lld %4lld %4lld %4lld", static_cast<long long>(f.layout.tp),
                  static_cast<long long>(f.layout.cp), static_cast<long long>(f.layout.pp),
                  static_cast<long long>(f.layout.dp));
    out << line;
    if (experts) {
      std::snprintf(line, sizeof line, " %4lld", static_cast<long long>(f.layout.ep));
      out << line;
    }
    std::snprintf(line, sizeof line, " %10.2f %8.2f\n", f.peak_bytes / kGiB, r.cluster.gpu.usable_memory_bytes / kGiB);
    out << line;
  }
}

// mtsl --json: the one MTSL (with the step at it under --profile) or the sweep's points.
nlohmann::json mtsl_json(const MtslOptions& o, const Plan& r, const Layout& base, const std::vector<SweepPoint>& points,
                         const std::string& what, const Risk& k) {
  nlohmann::json doc = {{"model", r.model.name},
                        {"gpu", r.cluster.gpu.name},
                        {"framework", r.framework.name},
                        {"layout", layout_to_json(r.model, base)},
                        {"risk", k.pessimistic ? "pessimistic" : "nominal"},
                        {"interval_source", k.source}};
  add_cluster_json(doc, r.cluster);
  doc["layout"].erase("seq");
  // The batch the MTSL holds (per point under --sweep gpus): given, or default_microbatches per pipeline.
  doc["gbs"] = base.gbs;
  doc["microbatches"] = base.microbatches();
  doc["gbs_given"] = o.layout.given(KnobId::gbs);
  if (what == "lora-rank") doc["layout"]["lora"].erase("rank");  // each point's lora_rank
  if (what == "gpus") {
    for (const char* key : {"gpus", "dp", "gbs"}) doc["layout"].erase(key);  // each point's
    doc.erase("gbs");
  }
  if (o.sweep.empty()) {
    doc.update(result_to_json(points.front().result, points.front().interval));
    if (!o.profile.empty() && points.front().result.tokens > 0) {
      const PerfEstimate p = perf_at(r, base, points.front().result.tokens);
      doc["perf_at_mtsl"] = {{"step_time_s", p.step_time_s},
                             {"tokens_per_s", p.tokens_per_s},
                             {"tflops_per_gpu", p.tflops_per_gpu},
                             {"coefficients", r.coefficients.name}};
    }
    return doc;
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : points) {
    nlohmann::json e = result_to_json(p.result, p.interval);
    e[what == "gpus" ? "gpus" : "lora_rank"] = p.value;
    if (what == "gpus") e["dp"] = p.layout.dp, e["gbs"] = p.layout.gbs;
    arr.push_back(e);
  }
  doc["sweep"] = {{"variable", what}, {"points", arr}};
  return doc;
}

// The one MTSL as text: tokens, the peak there, what binds, and the step at it under --profile.
void print_mtsl(const MtslOptions& o, const Plan& r, const Layout& base, const SweepPoint& point, const Risk& k,
                std::ostream& out) {
  const MtslResult& m = point.result;
  out << "MTSL: " << m.tokens << " tokens" << (m.capped ? " (capped: memory barely grows with s)" : "")
      << (m.granularity > 1 ? " (multiples of " + std::to_string(m.granularity) + ")" : "")
      << (k.pessimistic ? " (--risk pessimistic: the upper end of the peak's band fits)" : "") << "\n";
  if (point.interval.known)
    out << "band: " << point.interval.low << " to " << point.interval.high
        << " tokens, where the upper and the lower end of the peak's band fit (" << k.source << ")\n";
  else
    out << "band: " << k.source << "\n";
  // Under --risk pessimistic the peak is read at the band's upper end: the scaled peak is what meets capacity.
  const double peak = k.peak_scale * m.peak_bytes, next = k.peak_scale * m.next_peak_bytes;
  out << "peak at MTSL: " << format_gib(peak, 3) << " GiB" << (k.pessimistic ? " at the band's upper end" : "")
      << " of " << format_gib(m.capacity_bytes, 3) << " GiB usable (" << format_mib(m.capacity_bytes - peak)
      << " MiB to spare); " << m.granularity << " more token" << (m.granularity > 1 ? "s" : "") << " would need "
      << format_mib(next - m.capacity_bytes) << " MiB more than there is\n";
  if (m.tokens > r.model.max_context)
    out << "note: " << m.tokens << " tokens is beyond the " << r.model.max_context << " tokens " << r.model.name
        << " was trained with (max_context): memory allows it, the model's position encoding may not\n";
  out << "binding: stage " << m.binding_stage << ", " << m.binding_term << " ("
      << (m.closed_form ? "closed form, linear in s" : "bisection") << ")\n";
  if (!o.profile.empty() && m.tokens > 0) {
    const PerfEstimate p = perf_at(r, base, m.tokens);
    char line[200];
    std::snprintf(line, sizeof line,
                  "predicted step at MTSL: %.3f s, %.0f tokens/s, %.1f TFLOP/s per GPU (coefficients: %s)\n",
                  p.step_time_s, p.tokens_per_s, p.tflops_per_gpu, r.coefficients.name.c_str());
    out << line;
  }
}

void print_sweep(const std::vector<SweepPoint>& points, const std::string& what, const Risk& k, std::ostream& out) {
  char line[240];
  std::snprintf(line, sizeof line, "%10s %12s %17s %6s %12s %14s\n", what.c_str(), "MTSL tokens", "band tokens",
                "stage", "binding", "peak@MTSL GiB");
  out << line;
  for (const auto& p : points) {
    std::snprintf(line, sizeof line, "%10lld %12lld %17s %6lld %12s %14.2f\n", static_cast<long long>(p.value),
                  static_cast<long long>(p.result.tokens), interval_text(p.interval).c_str(),
                  static_cast<long long>(p.result.binding_stage), std::string(p.result.binding_term).c_str(),
                  k.peak_scale * p.result.peak_bytes / kGiB);
    out << line;
  }
  out << "band: " << k.source << (k.pessimistic ? "; MTSL at --risk pessimistic, the peak at the band's upper end" : "")
      << "\n";
}

// --any-layout: the longest sequence over every layout the framework runs on --gpus (rank's search space).
void run_any_layout(const MtslOptions& o, const Plan& r, const Layout& base, const Risk& k, std::ostream& out) {
  if (!o.layout.given(KnobId::gpus)) throw Error("--any-layout needs --gpus (the GPUs the layouts use)");
  SearchOptions so;
  so.gpus = base.gpus();
  so.gbs = o.layout.given(KnobId::gbs) ? base.gbs : 0;
  for (const auto& c : o.constraints) so.constraints.push_back(parse_constraint(c));
  restrict_to_framework(so, r.framework);
  const std::size_t top = static_cast<std::size_t>(parse_count("--top", o.top));
  const auto rows = longest_sequence_layouts(r.model, r.cluster, base, r.framework.residual, r.coefficients, so,
                                             k.peak_scale, k.band);
  const std::size_t shown = std::min(top, rows.size());
  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (std::size_t i = 0; i < shown; ++i) {
      const LongestLayout& x = rows[i];
      nlohmann::json e = result_to_json(x.result, x.interval);
      e["layout"] = layout_to_json(r.model, x.layout);
      e["layout"]["sharding_code"] = sharding_code(x.layout.sharding);
      e["step_time_s_at_mtsl"] = x.step_time_s;
      arr.push_back(e);
    }
    nlohmann::json doc = {{"model", r.model.name},
                          {"gpu", r.cluster.gpu.name},
                          {"framework", r.framework.name},
                          {"gpus", so.gpus},
                          {"gbs_given", o.layout.given(KnobId::gbs)},
                          {"risk", k.pessimistic ? "pessimistic" : "nominal"},
                          {"interval_source", k.source},
                          {"searched", rows.size()},
                          {"layouts", arr}};
    add_cluster_json(doc, r.cluster);
    print_json(out, doc);
    return;
  }
  out << "headroom mtsl --any-layout: " << r.model.name << " on " << so.gpus << " x " << r.cluster.gpu.name << " ("
      << r.cluster.name << "), " << r.framework.name << ", mbs " << base.mbs << ", "
      << (o.layout.given(KnobId::gbs) ? "gbs " + std::to_string(base.gbs)
                                      : "each layout's default batch (p micro-batches per pipeline; --gbs sets it)");
  if (base.lora.enabled())
    out << ", LoRA rank " << base.lora.rank << " on " << lora_targets_to_string(base.lora.targets);
  out << "\n" << assumed_cluster_line(r.cluster);
  out << rows.size() << " layouts searched (rank's space: the framework's shardings, recompute modes and schedules"
      << (o.constraints.empty() ? "" : ", the constraints") << "); longest first, then fastest at that length"
      << (k.pessimistic ? "; --risk pessimistic: the upper end of the peak's band fits" : "") << "\n";
  if (shown == 0 || rows.front().result.tokens == 0) {
    out << "no layout trains even the shortest sequence\n";
    return;
  }
  char line[320];
  std::snprintf(line, sizeof line, "%4s  %-48s %12s %17s %10s %9s\n", "#", "layout", "MTSL tokens", "band tokens",
                "peak GiB", "step s");
  out << line;
  for (std::size_t i = 0; i < shown; ++i) {
    const LongestLayout& x = rows[i];
    std::snprintf(line, sizeof line, "%4zu  %-48s %12lld %17s %10.2f %9.3f\n", i + 1,
                  layout_name(r.model, x.layout).c_str(), static_cast<long long>(x.result.tokens),
                  interval_text(x.interval).c_str(), k.peak_scale * x.result.peak_bytes / kGiB, x.step_time_s);
    out << line;
  }
  out << "(peak and step at each layout's MTSL; band: " << k.source << ")\n";
  if (rows.front().result.tokens > r.model.max_context)
    out << "note: " << rows.front().result.tokens << " tokens is beyond the " << r.model.max_context << " tokens "
        << r.model.name << " was trained with (max_context): memory allows it, the model's position encoding may not\n";
}

void run_mtsl(const MtslOptions& o, std::ostream& out) {
  const Plan r = resolve_plan(o.specs.request(o.profile));
  const Layout base = o.layout.build(r);
  const Risk k = risk_of(o, r);
  if (!o.sweep.empty() && !o.target_seq.empty()) throw Error("give at most one of --sweep and --target-seq");
  if (o.any_layout) {
    run_any_layout(o, r, base, k, out);
    return;
  }
  if (!o.target_seq.empty()) {
    run_target_seq(o, r, base, out);
    return;
  }
  std::vector<SweepPoint> points;
  if (o.sweep.empty())
    points.push_back(
        {0, base, mtsl_of(r, base, k), mtsl_interval(r.model, r.cluster, base, r.framework.residual, k.band)});
  else
    points = run_sweep(o, r, base, k);
  const std::string what = o.sweep.substr(0, o.sweep.find('='));
  if (o.json) {
    print_json(out, mtsl_json(o, r, base, points, what, k));
    return;
  }
  print_header(out, r, base, what, o.layout.given(KnobId::gbs));
  if (o.sweep.empty())
    print_mtsl(o, r, base, points.front(), k, out);
  else
    print_sweep(points, what, k, out);
}

}  // namespace

void register_mtsl(CLI::App& app, std::ostream& out) {
  auto opts = std::make_shared<MtslOptions>();
  CLI::App* sub = app.add_subcommand("mtsl", "maximum trainable sequence length, sweeps and the inverse question");
  opts->specs.add_to(*sub, true);
  opts->layout.add_to(*sub, false);
  sub->add_option("--sweep", opts->sweep, "curve over lora-rank=R1,R2,... or gpus=N1,N2,...");
  sub->add_option("--target-seq", opts->target_seq, "inverse: the smallest layouts that train this many tokens");
  sub->add_option("--profile", opts->profile,
                  "also predict the step time at the MTSL: performance coefficients or a calibration profile");
  sub->add_option("--max-gpus", opts->max_gpus, "largest GPU count --target-seq considers (at most 10^6)")
      ->capture_default_str();
  sub->add_option("--risk", opts->risk, std::string(kRiskHelp) + "; the MTSL's band is printed either way")
      ->capture_default_str();
  sub->add_flag("--any-layout", opts->any_layout,
                "the longest sequence over every layout the framework runs on --gpus (rank's search space), the "
                "longest first");
  sub->add_option("--constraint", opts->constraints, "with --any-layout: restrict the search as rank's --constraint");
  sub->add_option("--top", opts->top, "with --any-layout: how many layouts to print")->capture_default_str();
  sub->add_flag("--json", opts->json, "print one JSON document");
  sub->callback([opts, sub, &out] {
    refuse_given(*sub, {"--seq"}, "in mtsl (it searches the sequence length; --target-seq asks the inverse)");
    if (opts->any_layout)
      refuse_given(*sub,
                   {"--tp", "--cp", "--pp", "--vpp", "--dp", "--ep", "--etp", "--sharding", "--recompute", "--schedule",
                    "--sp", "--no-sp", "--sweep", "--target-seq", "--decoder-first-pipeline-num-layers",
                    "--decoder-last-pipeline-num-layers", "--account-for-embedding-in-pipeline-split",
                    "--account-for-loss-in-pipeline-split"},
                   "with --any-layout (the search sets it; --constraint restricts it)");
    else
      refuse_given(*sub, {"--constraint", "--top"}, "without --any-layout");
    if (!opts->target_seq.empty()) {
      refuse_given(*sub,
                   {"--tp", "--cp", "--pp", "--vpp", "--dp", "--gpus", "--gbs", "--sweep",
                    "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                    "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"},
                   "with --target-seq (it searches the layouts up to --max-gpus)");
      opts->layout.fallback.set(KnobId::gpus, std::int64_t{1});  // the search sets t, c, p and d
    } else {
      refuse_given(*sub, {"--max-gpus"}, "without --target-seq");
    }
    // The swept variable is set row by row: a flag giving it too would be overridden (the rank of every row).
    if (opts->sweep.rfind("lora-rank=", 0) == 0) {
      refuse_given(*sub, {"--lora-rank"}, "with --sweep lora-rank (the sweep sets the rank of every row)");
      const std::string first = opts->sweep.substr(10, opts->sweep.find(',') - 10);
      opts->layout.fallback.set(KnobId::lora_rank, parse_count("--sweep lora-rank", first));  // for --lora-targets
    }
    run_mtsl(*opts, out);
  });
}

}  // namespace headroom::cli
