// A calibration profile: what `headroom calibrate` measured on one machine and the fits made from it
// (data/schema/profile.schema.json). Read back, it replaces the datasheet numbers of a cluster and the fitted
// coefficients of the throughput model (apply_profile). calibrate/ measures and fits; this is what a profile is.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/core/collectives.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/kernels/measurement.hpp"

namespace headroom {

// Fits below this R² (of log time, see below) are refused unless the caller lowers it (--min-r2).
inline constexpr double kDefaultMinR2 = 0.9;

// ---- the fits (calibrate/fit.hpp makes them) ----

// efficiency(m, n, k) = e · m/(m + h) · n/(n + h) · k/(k + h) · wave(m, n): the throughput model's own form
// (throughput.hpp: gemm_shape_factor × gemm_wave_factor, the wave term on when `wave_units` > 0), so that
// applying the profile (apply_profile) predicts exactly what was fitted.
struct GemmFit {
  double efficiency = 0;  // e, of `peak_flops`
  double half_dim = 0;    // h
  int wave_units = 0;     // 0: no wave term (CPU)
  int tile = 128;
  double peak_flops = 0;
  double r2 = 0;                  // of log time (what the throughput model predicts)
  double r2_efficiency = 0;       // of efficiency itself (small when the surface is flat)
  std::vector<double> residuals;  // measured / predicted time − 1, per point
  [[nodiscard]] double predict_efficiency(double m, double n, double k) const;
};
struct AttentionFit {
  std::int64_t head_dim = 0;
  bool causal = true;
  double efficiency = 0;
  double half_tokens = 0;
  double r2 = 0;  // of log time
  std::vector<double> residuals;
};
// time = α + β·bytes in each regime (β in s/byte); the breakpoint minimises the relative squared error.
struct Regime {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double min_bytes = 0, max_bytes = 0;
};
struct CollectiveFit {
  Collective op = Collective::all_reduce;
  int ranks = 0;
  std::string level;                // "intra" or "inter"
  std::string source = "measured";  // or "nccl-tests"
  Regime small, large;
  double breakpoint_bytes = 0;  // first size of the large regime
  double r2 = 0;                // of log time over both regimes
  std::vector<double> residuals;
  [[nodiscard]] double predict_seconds(double bytes) const;
  // nccl-tests' busbw of the large regime: factor / β.
  [[nodiscard]] double busbw_bytes_per_s() const;
};
inline constexpr int kProfileVersion = 1;

struct Machine {
  std::string backend;  // cpu, cuda, hip, nccl-tests
  std::string device;
  std::string host;
  int ranks = 1;
  int gpus_per_node = 1;
  int multiprocessors = 0;
  double memory_bytes = 0;
  int nodes = 1;           // nodes the ranks ran on (--mpi: from where mpirun placed them)
  bool mpi = false;        // collectives between MPI processes (--mpi) rather than threads or one process's GPUs
  std::string software{};  // the libraries that ran the kernels, with versions (kernels::DeviceInfo::software)
};

struct Profile {
  Machine machine;
  std::string date;  // ISO 8601, UTC
  bool partial = false;
  bool quick = false;
  std::vector<std::string> models;
  double peak_flops = 0;       // what efficiencies are fractions of
  std::string peak_source;     // "datasheet <gpu>" or "measured: the fastest GEMM or attention pass"
  double hbm_bytes_per_s = 0;  // from the copy sweep (read + write traffic); 0 = not measured
  double min_r2 = kDefaultMinR2;
  std::optional<GemmFit> gemm;
  std::vector<AttentionFit> attention;
  std::string collectives_source;  // "measured" or "nccl-tests: <files>"
  std::vector<CollectiveFit> collectives;
  std::vector<kernels::Measurement> raw;  // every measurement (ingested collectives included)
};

[[nodiscard]] nlohmann::json profile_to_json(const Profile& p);
// Throws Error naming `where` and the bad field. The schema is checked by load_profile.
[[nodiscard]] Profile profile_from_json(const nlohmann::json& j, std::string_view where);
// Reads, validates against data_dir/schema/profile.schema.json and parses; a corrupt, partial or
// incompatible (other version) profile is an Error.
[[nodiscard]] Profile load_profile(const std::filesystem::path& path, const std::filesystem::path& data_dir,
                                   bool allow_partial = false);
// The same for a document already read from `path`.
[[nodiscard]] Profile profile_from_document(const nlohmann::json& doc, const std::string& path,
                                            const std::filesystem::path& data_dir, bool allow_partial = false);
// The same raw measurement as JSON (units in key names) and back; nccl-tests' algbw/busbw for collectives.
[[nodiscard]] nlohmann::json measurement_to_json(const kernels::Measurement& m);
[[nodiscard]] kernels::Measurement measurement_from_json(const nlohmann::json& j, std::string_view where);

// A cluster and the model's coefficients with a profile applied.
struct Calibrated {
  ClusterSpec cluster;
  PerfCoefficients coefficients;
};

// Applies a profile to one cluster and the model's coefficients k, returning both: the profile's peak, HBM
// bandwidth and link α/β replace the datasheet's; its GEMM and attention fits replace the coefficients'
// efficiencies (per-GPU overrides dropped). The coefficients' held-out step-time band is dropped: it describes the
// fit it was computed for, not the profile's measurements. `head_dim` picks the attention fit (nearest measured head
// dim, causal first).
[[nodiscard]] Calibrated apply_profile(const Profile& p, std::int64_t head_dim, ClusterSpec cluster,
                                       PerfCoefficients k);

}  // namespace headroom
