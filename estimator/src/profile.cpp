#include "headroom/estimator/profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"

namespace headroom {
namespace {

using kernels::AttentionCase;
using kernels::CollectiveCase;
using kernels::CopyCase;
using kernels::GemmCase;
using kernels::Measurement;
using nlohmann::json;

constexpr const char* kFormat = "headroom-profile";

json residuals_json(const std::vector<double>& r) {
  json a = json::array();
  for (double x : r) a.push_back(std::round(x * 1e5) / 1e5);
  return a;
}

std::vector<double> doubles(const json& j) {
  std::vector<double> v;
  for (const auto& x : j) v.push_back(x.get<double>());
  return v;
}

json regime_json(const Regime& r) {
  return {{"alpha_us", r.alpha_s * 1e6},
          {"beta_us_per_MiB", r.beta_s_per_byte * 1e6 * 1048576.0},
          {"min_size_B", r.min_bytes},
          {"max_size_B", r.max_bytes}};
}

Regime regime_from(const json& j) {
  return {j.at("alpha_us").get<double>() * 1e-6, j.at("beta_us_per_MiB").get<double>() * 1e-6 / 1048576.0,
          j.at("min_size_B").get<double>(), j.at("max_size_B").get<double>()};
}

Collective collective_named(const std::string& name, std::string_view where) {
  const auto op = collective_from_name(name);
  if (!op) throw Error(std::string(where) + ": unknown collective '" + name + "'");
  return *op;
}

}  // namespace

double GemmFit::predict_efficiency(double m, double n, double k) const {
  return efficiency * gemm_shape_factor(m, n, k, half_dim) * gemm_wave_factor(m, n, wave_units, tile);
}

double CollectiveFit::predict_seconds(double bytes) const {
  const Regime& r = bytes < breakpoint_bytes ? small : large;
  return r.alpha_s + r.beta_s_per_byte * bytes;
}

double CollectiveFit::busbw_bytes_per_s() const {
  return large.beta_s_per_byte > 0 ? bus_bandwidth_factor(op, ranks) / large.beta_s_per_byte : 0.0;
}

json measurement_to_json(const Measurement& m) {
  json j = {{"case", kernels::label(m.c)},
            {"kernel", m.kernel},
            {"time_us", m.seconds * 1e6},
            {"check_error", m.check.error},
            {"check_tolerance", m.check.tolerance}};
  if (const auto* g = std::get_if<GemmCase>(&m.c)) {
    j.update({{"kind", "gemm"}, {"m", g->m}, {"n", g->n}, {"k", g->k}, {"TFLOPs", m.flops_per_s() / 1e12}});
  } else if (const auto* a = std::get_if<AttentionCase>(&m.c)) {
    j.update({{"kind", "attention"},
              {"seq", a->seq},
              {"head_dim", a->head_dim},
              {"heads", a->heads},
              {"causal", a->causal},
              {"pass", a->backward ? "bwd" : "fwd"},
              {"TFLOPs", m.flops_per_s() / 1e12}});
  } else if (const auto* c = std::get_if<CollectiveCase>(&m.c)) {
    const auto bw = kernels::bus_bandwidth(c->op, c->ranks, m.bytes, m.seconds);
    j.update({{"kind", "collective"},
              {"op", std::string(to_string(c->op))},
              {"ranks", c->ranks},
              {"size_B", m.bytes},
              {"algbw_GBps", bw.algbw / 1e9},
              {"busbw_GBps", bw.busbw / 1e9}});
  } else {
    j.update({{"kind", "copy"}, {"size_B", std::get<CopyCase>(m.c).bytes}, {"GBps", m.bytes / m.seconds / 1e9}});
  }
  return j;
}

Measurement measurement_from_json(const json& j, std::string_view where) {
  try {
    Measurement m;
    const std::string kind = j.at("kind").get<std::string>();
    m.kernel = j.at("kernel").get<std::string>();
    m.seconds = j.at("time_us").get<double>() * 1e-6;
    if (!(m.seconds > 0)) throw Error(std::string(where) + ": time_us must be positive");
    m.check = {j.at("check_error").get<double>(), j.at("check_tolerance").get<double>(), "recorded"};
    if (kind == "gemm") {
      const GemmCase g{j.at("m").get<std::int64_t>(), j.at("n").get<std::int64_t>(), j.at("k").get<std::int64_t>()};
      m.c = g;
      m.flops = 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    } else if (kind == "attention") {
      const AttentionCase a{j.at("seq").get<std::int64_t>(), j.at("head_dim").get<std::int64_t>(),
                            j.at("heads").get<std::int64_t>(), j.at("causal").get<bool>(),
                            j.at("pass").get<std::string>() == "bwd"};
      m.c = a;
      m.flops = j.at("TFLOPs").get<double>() * 1e12 * m.seconds;
    } else if (kind == "collective") {
      const CollectiveCase c{collective_named(j.at("op").get<std::string>(), where),
                             static_cast<std::int64_t>(j.at("size_B").get<double>()), j.at("ranks").get<int>()};
      m.c = c;
      m.bytes = j.at("size_B").get<double>();
    } else if (kind == "copy") {
      m.c = CopyCase{static_cast<std::int64_t>(j.at("size_B").get<double>())};
      m.bytes = 2.0 * j.at("size_B").get<double>();
    } else {
      throw Error(std::string(where) + ": unknown measurement kind '" + kind + "'");
    }
    return m;
  } catch (const json::exception& e) {
    throw Error(std::string(where) + ": malformed measurement: " + e.what());
  }
}

json profile_to_json(const Profile& p) {
  json j = {{"format", kFormat},
            {"version", kProfileVersion},
            {"date", p.date},
            {"partial", p.partial},
            {"machine",
             {{"backend", p.machine.backend},
              {"device", p.machine.device},
              {"host", p.machine.host},
              {"ranks", p.machine.ranks},
              {"gpus_per_node", p.machine.gpus_per_node},
              {"multiprocessors", p.machine.multiprocessors},
              {"memory_GiB", p.machine.memory_bytes / 1073741824.0},
              {"nodes", p.machine.nodes},
              {"mpi", p.machine.mpi}}},
            {"sweep", {{"quick", p.quick}, {"models", p.models}}},
            {"min_r2", p.min_r2}};
  if (!p.machine.software.empty()) j["machine"]["software"] = p.machine.software;
  if (p.peak_flops > 0) j["peak"] = {{"TFLOPs", p.peak_flops / 1e12}, {"source", p.peak_source}};
  if (p.hbm_bytes_per_s > 0) j["memory"] = {{"copy_GBps", p.hbm_bytes_per_s / 1e9}};
  if (p.gemm) {
    const GemmFit& g = *p.gemm;
    j["gemm"] = {{"model", "e * m/(m+h) * n/(n+h) * k/(k+h) * wave(m, n)"},
                 {"efficiency", g.efficiency},
                 {"half_dim", g.half_dim},
                 {"wave_units", g.wave_units},
                 {"tile", g.tile},
                 {"r2", g.r2},
                 {"r2_efficiency", g.r2_efficiency},
                 {"residuals", residuals_json(g.residuals)}};
  }
  if (!p.attention.empty()) {
    json fits = json::array();
    for (const auto& a : p.attention)
      fits.push_back({{"head_dim", a.head_dim},
                      {"causal", a.causal},
                      {"efficiency", a.efficiency},
                      {"half_tokens", a.half_tokens},
                      {"r2", a.r2},
                      {"residuals", residuals_json(a.residuals)}});
    j["attention"] = {{"model", "e * s/(s + s_half), forward + backward"}, {"fits", fits}};
  }
  if (!p.collectives.empty()) {
    json fits = json::array();
    for (const auto& c : p.collectives)
      fits.push_back({{"op", std::string(to_string(c.op))},
                      {"ranks", c.ranks},
                      {"level", c.level},
                      {"source", c.source},
                      {"small", regime_json(c.small)},
                      {"large", regime_json(c.large)},
                      {"breakpoint_B", c.breakpoint_bytes},
                      {"busbw_GBps", c.busbw_bytes_per_s() / 1e9},
                      {"r2", c.r2},
                      {"residuals", residuals_json(c.residuals)}});
    j["collectives"] = {{"model", "time = alpha + beta * size per regime; busbw as nccl-tests"},
                        {"source", p.collectives_source},
                        {"fits", fits}};
  }
  json raw = {
      {"gemm", json::array()}, {"attention", json::array()}, {"collectives", json::array()}, {"copy", json::array()}};
  for (const auto& m : p.raw) {
    const char* key = "copy";
    switch (kernels::kind_of(m.c)) {
      case kernels::KernelKind::gemm: key = "gemm"; break;
      case kernels::KernelKind::attention: key = "attention"; break;
      case kernels::KernelKind::collective: key = "collectives"; break;
      case kernels::KernelKind::copy: key = "copy"; break;
    }
    raw[key].push_back(measurement_to_json(m));
  }
  j["raw"] = raw;
  return j;
}

Profile profile_from_json(const json& j, std::string_view where) {
  const std::string w(where);
  try {
    if (j.value("format", "") != kFormat)
      throw Error(w + ": not a headroom profile (format must be '" + kFormat + "')");
    if (j.at("version").get<int>() != kProfileVersion)
      throw Error(w + ": profile version " + j.at("version").dump() + " is not supported (this headroom reads " +
                  std::to_string(kProfileVersion) + ")");
    Profile p;
    p.date = j.at("date").get<std::string>();
    p.partial = j.value("partial", false);
    const json& m = j.at("machine");
    p.machine = {m.at("backend").get<std::string>(),
                 m.at("device").get<std::string>(),
                 m.value("host", ""),
                 m.at("ranks").get<int>(),
                 m.at("gpus_per_node").get<int>(),
                 m.value("multiprocessors", 0),
                 m.value("memory_GiB", 0.0) * 1073741824.0};
    p.machine.nodes = m.value("nodes", 1);
    p.machine.mpi = m.value("mpi", false);
    p.machine.software = m.value("software", "");
    if (j.contains("sweep")) {
      p.quick = j["sweep"].value("quick", false);
      for (const auto& x : j["sweep"].value("models", json::array())) p.models.push_back(x.get<std::string>());
    }
    p.min_r2 = j.value("min_r2", kDefaultMinR2);
    if (j.contains("peak")) {
      p.peak_flops = j["peak"].at("TFLOPs").get<double>() * 1e12;
      p.peak_source = j["peak"].value("source", "");
    }
    if (j.contains("memory")) p.hbm_bytes_per_s = j["memory"].at("copy_GBps").get<double>() * 1e9;
    if (j.contains("gemm")) {
      const json& g = j["gemm"];
      GemmFit f;
      f.efficiency = g.at("efficiency").get<double>();
      f.half_dim = g.at("half_dim").get<double>();
      f.wave_units = g.at("wave_units").get<int>();
      f.tile = g.at("tile").get<int>();
      f.peak_flops = p.peak_flops;
      f.r2 = g.at("r2").get<double>();
      f.r2_efficiency = g.value("r2_efficiency", 0.0);
      f.residuals = doubles(g.at("residuals"));
      p.gemm = f;
    }
    if (j.contains("attention"))
      for (const auto& a : j["attention"].at("fits"))
        p.attention.push_back({a.at("head_dim").get<std::int64_t>(), a.at("causal").get<bool>(),
                               a.at("efficiency").get<double>(), a.at("half_tokens").get<double>(),
                               a.at("r2").get<double>(), doubles(a.at("residuals"))});
    if (j.contains("collectives")) {
      p.collectives_source = j["collectives"].value("source", "");
      for (const auto& c : j["collectives"].at("fits")) {
        CollectiveFit f;
        f.op = collective_named(c.at("op").get<std::string>(), where);
        f.ranks = c.at("ranks").get<int>();
        f.level = c.at("level").get<std::string>();
        f.source = c.value("source", "measured");
        f.small = regime_from(c.at("small"));
        f.large = regime_from(c.at("large"));
        f.breakpoint_bytes = c.at("breakpoint_B").get<double>();
        f.r2 = c.at("r2").get<double>();
        f.residuals = doubles(c.at("residuals"));
        p.collectives.push_back(f);
      }
    }
    for (const char* key : {"gemm", "attention", "collectives", "copy"})
      for (const auto& r : j.at("raw").at(key)) p.raw.push_back(measurement_from_json(r, w + " raw." + key));
    if ((p.gemm || !p.attention.empty()) && p.peak_flops <= 0) throw Error(w + ": fits present but no peak.TFLOPs");
    return p;
  } catch (const json::exception& e) {
    throw Error(w + ": malformed profile: " + e.what());
  }
}

Profile load_profile(const std::filesystem::path& path, const std::filesystem::path& data_dir, bool allow_partial) {
  return profile_from_document(read_json_file(path), path.string(), data_dir, allow_partial);
}

Profile profile_from_document(const json& doc, const std::string& path, const std::filesystem::path& data_dir,
                              bool allow_partial) {
  const auto schema = data_dir / "schema" / "profile.schema.json";
  // Another version gets its own message before the schema's; both fields are compared as JSON, whatever their type
  // (value() threw type_error for a non-string format, narrowed 8e18 to int, and [] read a missing version).
  if (doc.is_object() && doc.contains("format") && doc["format"] == kFormat && doc.contains("version") &&
      doc["version"] != kProfileVersion)
    throw Error(path + ": profile version " + doc["version"].dump() + " is not supported (this headroom reads " +
                std::to_string(kProfileVersion) + ")");
  validate_against_schema(doc, read_json_file(schema), path);
  Profile p = profile_from_json(doc, path);
  if (p.partial && !allow_partial)
    throw Error(path +
                ": a partial profile (calibration was interrupted): rerun headroom calibrate with the "
                "same --out to finish it");
  return p;
}

Calibrated apply_profile(const Profile& p, std::int64_t head_dim, ClusterSpec cluster, PerfCoefficients k) {
  if (p.partial) throw Error("a partial profile cannot be applied: finish the calibration first");
  if (p.peak_flops > 0) cluster.gpu.bf16_flops = p.peak_flops;
  if (p.hbm_bytes_per_s > 0) cluster.gpu.hbm_bytes_per_s = p.hbm_bytes_per_s;
  if (p.gemm) {
    k.gemm_efficiency = p.gemm->efficiency;
    k.gemm_half_dim = p.gemm->half_dim;
    k.gemm_wave_units = p.gemm->wave_units;
    k.gemm_tile = p.gemm->tile;
    k.gpus.clear();  // per-GPU datasheet efficiencies would override the measured ones
    k.generic_source = "measured";
  }
  if (!p.attention.empty()) {
    const auto score = [&](const AttentionFit& a) { return std::abs(a.head_dim - head_dim) * 2 + (a.causal ? 0 : 1); };
    const auto best = std::min_element(p.attention.begin(), p.attention.end(), [&](const auto& a, const auto& b) {
      return score(a) < score(b);  // ties: the first in the profile
    });
    k.attention_efficiency = best->efficiency;
    k.attention_half_tokens = best->half_tokens;
    k.gpus.clear();
    k.generic_source = "measured";
  }
  // Links: the largest measured group of each level; all-gather first (the ring the model times), then
  // reduce-scatter, all-reduce. The model's link bandwidth is nccl-tests' busbw; its per-step latency is the
  // small-message α spread over the ring's n − 1 steps.
  int measured_levels = 0;
  for (const char* level : {"intra", "inter"}) {
    const CollectiveFit* best = nullptr;
    for (const Collective op : {Collective::all_gather, Collective::reduce_scatter, Collective::all_reduce}) {
      for (const auto& c : p.collectives)
        if (c.op == op && c.level == level && c.ranks >= 2 &&
            (best == nullptr || (best->op == op && c.ranks > best->ranks)))
          best = &c;
      if (best != nullptr) break;
    }
    if (best == nullptr || best->busbw_bytes_per_s() <= 0) continue;
    const double per_step =
        best->small.alpha_s / (best->op == Collective::all_reduce ? 2.0 * (best->ranks - 1) : best->ranks - 1.0);
    LinkSpec& link = std::string(level) == "intra" ? cluster.intra_node : cluster.inter_node;
    link.bytes_per_s = best->busbw_bytes_per_s();
    link.latency_s = per_step;
    link.kind = "measured (" + std::string(to_string(best->op)) + ", " + std::to_string(best->ranks) + " ranks)";
    ++measured_levels;
    if (cluster.assumed) cluster.source += "; its " + std::string(level) + "-node link measured by the profile";
    // A measured link needs no efficiency: this cluster's entry runs it at 1 (the other level keeps its own).
    const bool intra = std::string(level) == "intra";
    ClusterEfficiency& entry = cluster_links(k, cluster.name);
    (intra ? entry.intra : entry.inter) = 1.0;
    entry.source = "measured";
    if (!intra) entry.cp_inter = 1.0;
  }
  // An assumed cluster (a bare GPU's) whose two links were both measured assumes nothing any more.
  if (measured_levels == 2) cluster.assumed = false;
  k.name = "profile " + p.machine.backend + " " + p.machine.device;
  k.source = "calibration profile of " + p.date;
  // The held-out band belongs to the coefficients whose fit was scored; a profile's measurements were not.
  k.step_time_band = ErrorBand{};
  k.step_time_bands_by_gpus.clear();
  return {std::move(cluster), std::move(k)};
}

}  // namespace headroom
