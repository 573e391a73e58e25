// A calibration profile: what `headroom calibrate` measured on one machine and the fits made from it
// (data/schema/profile.schema.json; README "Calibrating a cluster"). Written atomically; read back, it
// overrides the datasheet numbers of a cluster and the fitted coefficients of the throughput model.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/calibrate/fit.hpp"
#include "headroom/estimator/spec.hpp"
#include "headroom/estimator/throughput.hpp"
#include "headroom/kernels/measurement.hpp"

namespace headroom::calibrate {

inline constexpr int kProfileVersion = 1;

struct Machine {
  std::string backend;  // cpu, cuda, hip, nccl-tests
  std::string device;
  std::string host;
  int ranks = 1;
  int gpus_per_node = 1;
  int multiprocessors = 0;
  double memory_bytes = 0;
  int nodes = 1;     // nodes the ranks ran on (--mpi: from where mpirun placed them)
  bool mpi = false;  // collectives between MPI processes (--mpi) rather than threads or one process's GPUs
};

struct Profile {
  Machine machine;
  std::string date;  // ISO 8601, UTC
  bool partial = false;
  bool quick = false;
  std::vector<std::string> models;
  double peak_flops = 0;       // what efficiencies are fractions of
  std::string peak_source;     // "datasheet <gpu>" or "measured: fastest GEMM"
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
// Writes `path` atomically (write_file_atomically, estimator/atomic_file.hpp: a temporary file beside it, then rename).
void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& doc);

// The same raw measurement as JSON (units in key names) and back; nccl-tests' algbw/busbw for collectives.
[[nodiscard]] nlohmann::json measurement_to_json(const kernels::Measurement& m);
[[nodiscard]] kernels::Measurement measurement_from_json(const nlohmann::json& j, std::string_view where);

// The fits from the raw measurements (GEMM, attention per head dim and mask, collectives per op, group size
// and level); each must reach `min_r2` or an Error names the fit. Collective fits from nccl-tests are kept
// when the raw data hold no collectives.
void fit_profile(Profile& p, int gpus_per_node);

// A cluster and the model's coefficients with a profile applied.
struct Calibrated {
  ClusterSpec cluster;
  PerfCoefficients coefficients;
};

// Applies a profile to one cluster and the model's coefficients k, returning both: the profile's peak, HBM
// bandwidth and link α/β replace the datasheet's; its GEMM and attention fits replace the coefficients'
// efficiencies (per-GPU overrides dropped). `head_dim` picks the attention fit (nearest measured head dim,
// causal first).
[[nodiscard]] Calibrated apply_profile(const Profile& p, std::int64_t head_dim, ClusterSpec cluster,
                                       PerfCoefficients k);

// UTC now as 2025-01-31T12:00:00Z.
[[nodiscard]] std::string utc_now();

}  // namespace headroom::calibrate
