#include "headroom/estimator/perf_coefficients.hpp"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "headroom/core/error.hpp"
#include "headroom/core/json_schema.hpp"

namespace headroom {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

// The scalar coefficients by JSON key, so that parsing, printing and fitting share one list.
struct Field {
  const char* key;
  double PerfCoefficients::*member;
};
constexpr Field kFields[] = {
    {"gemm_efficiency", &PerfCoefficients::gemm_efficiency},
    {"gemm_half_dim", &PerfCoefficients::gemm_half_dim},
    {"gemm_wave_units", &PerfCoefficients::gemm_wave_units},
    {"gemm_tile", &PerfCoefficients::gemm_tile},
    {"attention_efficiency", &PerfCoefficients::attention_efficiency},
    {"attention_half_tokens", &PerfCoefficients::attention_half_tokens},
    {"stack_gemm_fraction", &PerfCoefficients::stack_gemm_fraction},
    {"elementwise_passes", &PerfCoefficients::elementwise_passes},
    {"compiled_elementwise_passes", &PerfCoefficients::compiled_elementwise_passes},
    {"loss_passes", &PerfCoefficients::loss_passes},
    {"layer_overhead_us", nullptr},  // stored in seconds, written in µs
    {"step_overhead_ms", nullptr},
    {"intra_efficiency", &PerfCoefficients::intra_efficiency},
    {"inter_efficiency", &PerfCoefficients::inter_efficiency},
    {"cp_inter_efficiency", &PerfCoefficients::cp_inter_efficiency},
    {"tp_overlap", &PerfCoefficients::tp_overlap},
    {"cp_overlap", &PerfCoefficients::cp_overlap},
    {"pp_overlap", &PerfCoefficients::pp_overlap},
    {"dp_overlap", &PerfCoefficients::dp_overlap},
    {"host_link_efficiency", &PerfCoefficients::host_link_efficiency},
    {"host_memory_efficiency", &PerfCoefficients::host_memory_efficiency},
};

}  // namespace

PerfCoefficients perf_coefficients_from_json(const nlohmann::json& j, std::string_view where) {
  const std::string w(where);
  if (!j.is_object()) throw Error(w + ": performance coefficients must be a JSON object");
  PerfCoefficients c;
  for (const auto& [key, value] : j.items()) {
    if (key == "name") {
      c.name = value.get<std::string>();
      continue;
    }
    if (key == "source") {
      c.source = value.get<std::string>();
      continue;
    }
    if (key == "attention_backend") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (std::find(kAttentionBackends.begin(), kAttentionBackends.end(), v) == kAttentionBackends.end())
        throw Error(w + ": attention_backend must be cudnn or flash2 (got " + value.dump() + ")");
      c.attention_backend = v;
      continue;
    }
    if (key == "$schema" || key == "description" || key == "fit" || key == "memory" || key == "fitted_on" ||
        key == "attention_backend_reason")
      continue;  // memory, fitted_on: with_profile (plan.cpp)
    if (key == "generic_source") {
      const std::string v = value.is_string() ? value.get<std::string>() : "";
      if (v != "datasheet" && v != "fitted" && v != "measured")
        throw Error(w + ": generic_source must be datasheet, fitted or measured (got " + value.dump() + ")");
      c.generic_source = v;
      continue;
    }
    if (key == "uncertainty") {
      if (!value.is_object() || !value.contains("step_time_low") || !value.contains("step_time_high") ||
          !value.at("step_time_low").is_number() || !value.at("step_time_high").is_number())
        throw Error(w + ": uncertainty must be an object with numbers step_time_low and step_time_high");
      c.step_time_band = {value.at("step_time_low").get<double>(), value.at("step_time_high").get<double>(), true};
      if (value.contains("origin")) {
        if (!value.at("origin").is_string() || value.at("origin").get<std::string>().empty())
          throw Error(w + ": uncertainty.origin must be a non-empty string (what computed the band)");
        c.step_time_band_origin = value.at("origin").get<std::string>();
      }
      c.step_time_bands_by_gpus.clear();
      if (value.contains("by_gpus")) {
        const auto& by = value.at("by_gpus");
        const std::string what = w +
                                 ": uncertainty.by_gpus must be an array of {gpus, runs, step_time_low, "
                                 "step_time_high} in ascending gpus (a positive integer count; bands >= 0)";
        if (!by.is_array()) throw Error(what);
        for (const auto& x : by) {
          if (!x.is_object() || !x.contains("gpus") || !x.at("gpus").is_number_integer() || !x.contains("runs") ||
              !x.at("runs").is_number_integer() || !x.contains("step_time_low") || !x.at("step_time_low").is_number() ||
              !x.contains("step_time_high") || !x.at("step_time_high").is_number())
            throw Error(what);
          const auto gpus = x.at("gpus").get<std::int64_t>();
          const auto runs = x.at("runs").get<std::int64_t>();
          const double low = x.at("step_time_low").get<double>(), high = x.at("step_time_high").get<double>();
          if (gpus < 1 || runs < 1 || runs > 1'000'000'000 || !(low >= 0 && low <= 1) || !(high >= 0) ||
              (!c.step_time_bands_by_gpus.empty() && gpus <= c.step_time_bands_by_gpus.back().gpus))
            throw Error(what + " (got " + x.dump() + ")");
          c.step_time_bands_by_gpus.push_back({gpus, static_cast<int>(runs), {low, high, true}});
        }
      }
      continue;
    }
    if (key == "clusters") {
      for (const auto& x : value)
        c.clusters.push_back({x.at("cluster").get<std::string>(), x.value("intra_efficiency", 0.0),
                              x.value("inter_efficiency", 0.0), x.value("cp_inter_efficiency", 0.0),
                              x.value("cp_overlap", -1.0), x.value("dp_overlap", -1.0)});
      continue;
    }
    if (key == "gpus") {
      for (const auto& g : value)
        c.gpus.push_back({g.at("gpu").get<std::string>(), g.at("gemm_efficiency").get<double>(),
                          g.at("attention_efficiency").get<double>(), ""});
      continue;
    }
    const Field* f =
        std::find_if(std::begin(kFields), std::end(kFields), [&name = key](const Field& x) { return name == x.key; });
    if (f == std::end(kFields)) {
      std::string valid =
          "name, source, description, fit, memory, fitted_on, uncertainty, generic_source, attention_backend, "
          "attention_backend_reason, gpus, "
          "clusters";
      for (const auto& x : kFields) valid += std::string(", ") + x.key;
      throw Error(w + ": unknown key '" + key + "' (valid: " + valid + ")");
    }
    if (!value.is_number() || value.get<double>() < 0)
      throw Error(w + ": " + key + " must be a non-negative number (got " + value.dump() + ")");
    const double x = value.get<double>();
    if (key == "layer_overhead_us")
      c.layer_overhead_s = x * 1e-6;
    else if (key == "step_overhead_ms")
      c.step_overhead_s = x * 1e-3;
    else
      c.*(f->member) = x;
  }
  return c;
}

nlohmann::json perf_coefficients_to_json(const PerfCoefficients& c) {
  nlohmann::json j = {{"name", c.name},
                      {"source", c.source},
                      {"generic_source", c.generic_source},
                      {"attention_backend", c.attention_backend}};
  for (const auto& f : kFields)
    if (f.member != nullptr && c.*(f.member) >= 0) j[f.key] = c.*(f.member);  // compiled_elementwise_passes < 0: unset
  j["layer_overhead_us"] = c.layer_overhead_s * 1e6;
  j["step_overhead_ms"] = c.step_overhead_s * 1e3;
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : c.gpus)
    gpus.push_back({{"gpu", g.gpu}, {"gemm_efficiency", g.gemm}, {"attention_efficiency", g.attention}});
  j["gpus"] = gpus;
  if (!c.clusters.empty()) {
    nlohmann::json clusters = nlohmann::json::array();
    for (const auto& x : c.clusters) {
      nlohmann::json e = {{"cluster", x.cluster}};
      if (x.intra > 0) e["intra_efficiency"] = x.intra;
      if (x.inter > 0) e["inter_efficiency"] = x.inter;
      if (x.cp_inter > 0) e["cp_inter_efficiency"] = x.cp_inter;
      if (x.cp_overlap >= 0) e["cp_overlap"] = x.cp_overlap;
      if (x.dp_overlap >= 0) e["dp_overlap"] = x.dp_overlap;
      clusters.push_back(e);
    }
    j["clusters"] = clusters;
  }
  if (c.step_time_band.known) {
    j["uncertainty"] = {{"step_time_low", c.step_time_band.low}, {"step_time_high", c.step_time_band.high}};
    if (c.step_time_band_origin != PerfCoefficients{}.step_time_band_origin)
      j["uncertainty"]["origin"] = c.step_time_band_origin;
    if (!c.step_time_bands_by_gpus.empty()) {
      nlohmann::json by = nlohmann::json::array();
      for (const auto& x : c.step_time_bands_by_gpus)
        by.push_back(
            {{"gpus", x.gpus}, {"runs", x.runs}, {"step_time_low", x.band.low}, {"step_time_high", x.band.high}});
      j["uncertainty"]["by_gpus"] = by;
    }
  }
  return j;
}

namespace {

const GpuCountBand* band_entry_for(const PerfCoefficients& c, std::int64_t gpus) {
  const auto& by = c.step_time_bands_by_gpus;
  if (by.empty()) return nullptr;
  const auto above =
      std::upper_bound(by.begin(), by.end(), gpus, [](std::int64_t n, const GpuCountBand& x) { return n < x.gpus; });
  return above == by.begin() ? &by.front() : &*(above - 1);
}

}  // namespace

const ErrorBand& step_time_band_for(const PerfCoefficients& c, std::int64_t gpus) {
  const GpuCountBand* x = band_entry_for(c, gpus);
  return x != nullptr ? x->band : c.step_time_band;
}

std::string step_time_band_source(const PerfCoefficients& c, std::int64_t gpus) {
  const std::string what = "coefficients " + c.name;
  const GpuCountBand* x = band_entry_for(c, gpus);
  if (!c.step_time_band.known || x == nullptr)
    return band_source(c.step_time_band, what, "step time", {}, c.step_time_band_origin);
  const std::string n = std::to_string(x->gpus);
  std::string where = "at " + n + " GPUs";
  if (gpus < x->gpus)
    where += ", the smallest held-out count";
  else if (gpus > c.step_time_bands_by_gpus.back().gpus)
    where += ", the largest held-out count (extrapolated)";
  else if (gpus > x->gpus)
    where += ", the held-out count next below " + std::to_string(gpus);
  return band_source(x->band, what, "step time", where + ", " + std::to_string(x->runs) + " runs",
                     c.step_time_band_origin);
}

ClusterEfficiency& cluster_links(PerfCoefficients& c, const std::string& cluster) {
  const auto it =
      std::find_if(c.clusters.begin(), c.clusters.end(), [&](const auto& x) { return x.cluster == cluster; });
  if (it != c.clusters.end()) return *it;
  return c.clusters.emplace_back(ClusterEfficiency{cluster, c.intra_efficiency, c.inter_efficiency});
}

namespace {

// One data/perf file, checked against the schema (null: none shipped); nullopt where there is no file.
std::optional<PerfCoefficients> perf_file(const SpecLibrary& lib, const std::string& name,
                                          const nlohmann::json& schema) {
  const auto path = lib.data_dir() / "perf" / (name + ".json");
  if (!std::filesystem::exists(path)) return std::nullopt;
  return perf_coefficients_file(path.string(), read_json_file(path), schema);
}

// A backend's attention rows on the device, summed over its head dimensions ("128: 32, 64: 32" as a count).
std::string attention_rows(const DeviceKernels& k, const std::string& backend) {
  std::string out;
  for (const auto& a : k.attention)
    if (a.backend == backend)
      out += (out.empty() ? "" : ", ") + std::to_string(static_cast<std::int64_t>(a.head_dim)) + ": " +
             std::to_string(a.curve.rows);
  return out;
}

}  // namespace

nlohmann::json perf_schema(const SpecLibrary& lib) {
  const auto path = lib.data_dir() / "schema" / "perf.schema.json";
  return std::filesystem::exists(path) ? read_json_file(path) : nlohmann::json();
}

PerfCoefficients perf_coefficients_file(const std::string& path, const nlohmann::json& doc,
                                        const nlohmann::json& schema) {
  if (!schema.is_null()) validate_against_schema(doc, schema, path);
  return perf_coefficients_from_json(doc, path);
}

PerfCoefficients default_perf_coefficients(const SpecLibrary& lib, std::string_view framework,
                                           const nlohmann::json& schema) {
  std::string name(framework);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return std::tolower(ch); });
  std::optional<PerfCoefficients> c = perf_file(lib, name, schema);
  if (!c) c = PerfCoefficients{};
  // The other files' fitted GPU entries, for GPUs this file has none for (the first file, by name, that has one).
  for (const auto& other : lib.names("perf")) {
    if (other == name) continue;
    if (const std::optional<PerfCoefficients> o = perf_file(lib, other, schema)) add_device_entries(*c, *o);
  }
  return *c;
}

PerfCoefficients default_perf_coefficients(const SpecLibrary& lib, std::string_view framework) {
  return default_perf_coefficients(lib, framework, perf_schema(lib));
}

void add_device_entries(PerfCoefficients& c, const PerfCoefficients& from) {
  const auto known = [&c](const std::string& gpu) {
    const auto named = [&](const GpuEfficiency& x) { return same_name(x.gpu, gpu); };
    return std::any_of(c.gpus.begin(), c.gpus.end(), named) ||
           std::any_of(c.device_gpus.begin(), c.device_gpus.end(), named);
  };
  for (const auto* entries : {&from.gpus, &from.device_gpus})
    for (GpuEfficiency g : *entries) {
      if (known(g.gpu)) continue;
      if (g.fitted_under.empty()) g.fitted_under = from.name;
      c.device_gpus.push_back(std::move(g));
    }
}

PerfContext::PerfContext(const PerfCoefficients& c, const ClusterSpec& cluster)
    : coef(c),
      peak_flops(cluster.gpu.bf16_flops * power_limited_clock_fraction(cluster)),
      fp8_peak_flops(cluster.gpu.fp8_flops * power_limited_clock_fraction(cluster)),
      datasheet_peak_flops(cluster.gpu.bf16_flops),
      hbm_bytes_per_s(cluster.gpu.hbm_bytes_per_s),
      host{cluster.host_link.bytes_per_s * c.host_link_efficiency, cluster.host_link.latency_s},
      host_memory_bytes_per_s(cluster.host_memory_bytes_per_s * c.host_memory_efficiency),
      gemm_efficiency(c.gemm_efficiency),
      attention_efficiency(c.attention_efficiency),
      attention_half_tokens(c.attention_half_tokens),
      gpus_per_node(std::max<std::int64_t>(1, cluster.gpus_per_node)),
      efficiency_source(c.generic_source) {
  // The GPU's own entry, else one of the GPU its spec computes as (kernels_as: the same fractions of peak); in these
  // coefficients' entries first, then in the other coefficients' (device_gpus: the device's, fitted elsewhere).
  const GpuEfficiency* g = nullptr;
  bool own = false;
  for (const auto* entries : {&c.gpus, &c.device_gpus}) {
    const auto entry_for = [entries](const std::string& name) -> const GpuEfficiency* {
      const auto it = std::find_if(entries->begin(), entries->end(),
                                   [&](const GpuEfficiency& x) { return same_name(x.gpu, name); });
      return it == entries->end() ? nullptr : &*it;
    };
    g = entry_for(cluster.gpu.name);
    own = g != nullptr;
    if (!own && !cluster.gpu.kernels_as.empty()) g = entry_for(cluster.gpu.kernels_as);
    if (g != nullptr) break;
  }
  // The device's own curves come before another die's entry (kernels_as) and datasheet-level generic values; a fit of
  // these coefficients on this very GPU (its own entry) and generic values measured or fitted on the user's cluster
  // (a calibration profile, calibrate --from-runs) come first.
  const DeviceKernels& k = cluster.gpu.kernels;
  if (!own && !k.empty() && c.generic_source == "datasheet") {
    g = nullptr;
    device_curves = true;
    bf16_curve = k.bf16;
    fp8_curve = k.fp8;
    for (std::size_t b = 0; b < kAttentionBackends.size(); ++b)
      for (std::size_t i = 0; i < kCurveHeadDims.size(); ++i)
        if (const AttentionCurve* a = k.attention_curve(kAttentionBackends[b], kCurveHeadDims[i]))
          attention_curves[b][i] = {a->efficiency, a->half_tokens};
    // The framework's backend, where the device has rows of it (a backend with rows fills every head-dimension slot).
    const auto backend = std::find(kAttentionBackends.begin(), kAttentionBackends.end(), c.attention_backend);
    const auto b = static_cast<std::size_t>(backend - kAttentionBackends.begin());
    if (backend != kAttentionBackends.end() && attention_curves[b][0].first > 0)
      framework_attention_curve = static_cast<int>(b);
    efficiency_source = "device curves";
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.3g", c.stack_gemm_fraction);
    device_kernels =
        k.file + " (" + (k.machine.empty() ? k.kind : k.kind + " on " + k.machine) + "; GEMM rows: BF16 " +
        std::to_string(k.bf16.rows) + ", FP8 " + std::to_string(k.fp8.rows) + "; attention: " +
        (framework_attention_curve < 0 ? "no " + c.attention_backend + " rows, the coefficients' own"
                                       : c.attention_backend + " (" + c.name + "'s), " + "rows by head dimension " +
                                             attention_rows(k, c.attention_backend)) +
        "), GEMMs at " + c.name + "'s stack_gemm_fraction " + fraction;
    efficiency_gpu = cluster.gpu.name;
  }
  if (g != nullptr) {
    // Another die's entry at the multiples of its fractions of peak that the published kernel benchmarks give.
    gemm_scale = own ? 1.0 : cluster.gpu.kernels_gemm_scale;
    attention_scale = own ? 1.0 : cluster.gpu.kernels_attention_scale;
    gemm_efficiency = g->gemm * gemm_scale;
    attention_efficiency = g->attention * attention_scale;
    efficiency_source = "fitted";
    efficiency_gpu = g->gpu;
    efficiency_fitted_under = g->fitted_under.empty() ? c.name : g->fitted_under;
  }
  if (peak_flops <= 0) throw Error("GPU " + cluster.gpu.name + " has no BF16 peak (bf16_dense_TFLOPs)");
  if (hbm_bytes_per_s <= 0) throw Error("GPU " + cluster.gpu.name + " has no HBM bandwidth (hbm_bandwidth_GBps)");
  const double intra_bw = cluster.intra_node.bytes_per_s, inter_bw = cluster.inter_node.bytes_per_s;
  if (intra_bw <= 0 || inter_bw <= 0)
    throw Error("cluster " + cluster.name + " names no intra_node/inter_node bandwidth");
  intra_efficiency = c.intra_efficiency;
  inter_efficiency = c.inter_efficiency;
  cp_inter_efficiency = c.cp_inter_efficiency;
  cp_overlap = c.cp_overlap;
  dp_overlap = c.dp_overlap;
  link_source = "generic";
  for (const auto& x : c.clusters) {
    if (!same_name(x.cluster, cluster.name)) continue;
    if (x.intra > 0) intra_efficiency = x.intra;
    if (x.inter > 0) inter_efficiency = x.inter;
    if (x.cp_inter > 0) cp_inter_efficiency = x.cp_inter;
    if (x.cp_overlap >= 0) cp_overlap = x.cp_overlap;
    if (x.dp_overlap >= 0) dp_overlap = x.dp_overlap;
    link_source = x.source + " on " + x.cluster;
  }
  intra = {intra_bw * intra_efficiency, cluster.intra_node.latency_s};
  inter = {inter_bw * inter_efficiency, cluster.inter_node.latency_s};
  cp_inter = {inter_bw * cp_inter_efficiency, cluster.inter_node.latency_s};
  if (intra.bytes_per_s <= 0 || inter.bytes_per_s <= 0 || cp_inter.bytes_per_s <= 0)
    throw Error("performance coefficients " + c.name + ": link efficiencies must be positive");
}

}  // namespace headroom
