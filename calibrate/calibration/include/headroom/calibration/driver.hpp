// A microkernel calibration from start to written profile: one --out at a time (FILE.lock), resumed from
// FILE.partial (checkpointed after every case), the sweep, the fit (re-measuring the noisiest point of a fit below
// its R² threshold), and the profile written atomically. Under MPI every rank runs the same sweep in step and rank 0
// alone touches files. The library never prints: progress and messages go to the caller's callbacks.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "headroom/calibration/profile.hpp"
#include "headroom/calibration/sweep.hpp"
#include "headroom/kernels/backend.hpp"
#include "headroom/kernels/mpi.hpp"

namespace headroom::calibrate {

// Who measures and who touches files. Without MPI: this process, alone. Under MPI: every rank runs the same sweep in
// step, only rank 0 reads and writes files, and what it does is broadcast: its failures stop every rank at the same
// point, with the same message.
struct Team {
  const kernels::mpi::Session* mpi = nullptr;
  [[nodiscard]] bool root() const { return mpi == nullptr || mpi->root(); }
  void on_root(const std::function<void()>& f) const;
  [[nodiscard]] std::string share(const std::string& s) const;
  [[nodiscard]] bool everywhere(bool ok) const;
};

// Where the ranks ran, for the profile and the report.
struct Ranks {
  int count = 1;
  int per_node = 1;  // groups up to this size are intra-node
  int nodes = 1;
  bool mpi = false;
};
[[nodiscard]] std::string describe(const Ranks& r);

struct CalibrationRequest {
  std::string backend = "cpu";    // cpu, cuda, hip
  std::vector<ModelSpec> models;  // also their layer GEMMs
  std::vector<std::string> model_names;
  std::string gpu_name;  // efficiencies against this GPU's datasheet peak ("": the fastest compute kernel measured)
  double gpu_peak_flops = 0;
  bool quick = false;
  bool fresh = false;  // start over: remove FILE.partial instead of resuming from it
  double min_r2 = kDefaultMinR2;
  std::filesystem::path out, data_dir;
};

// How often a sweep measures the cases of a fit's noisiest point again before giving up on them.
inline constexpr int kRemeasureRounds = 2;

// What the calibration tells its caller as it goes: progress after each case, and lines worth a human's eye (a
// resumed partial profile, cases measured again).
struct CalibrationEvents {
  std::function<void(const Progress&)> progress;
  std::function<void(const std::string&)> note;
};

struct CalibrationResult {
  Profile profile;
  std::size_t cases = 0;
  std::string device;
};

// Runs it (the root's result is the written profile; other ranks return theirs, unwritten). Error for a locked or
// unusable --out, a partial profile of other options, a fit that stays below min_r2.
[[nodiscard]] CalibrationResult run_calibration(const CalibrationRequest& r, kernels::Backend& backend,
                                                const Ranks& ranks, const Team& team, const CalibrationEvents& events);

}  // namespace headroom::calibrate
