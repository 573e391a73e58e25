// One register function per subcommand; each adds its flags and a callback that does the work.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "headroom/estimator/spec.hpp"

namespace headroom::cli {

// A check that ran and failed (e.g. `validate` found drift): exit code 1, the output is still printed.
class CheckFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Ends the command with `code` and prints nothing: a rank other than 0 of `calibrate --mpi`, whose error rank 0
// reports.
class QuietExit : public std::runtime_error {
 public:
  explicit QuietExit(int code) : std::runtime_error("quiet exit"), code_(code) {}
  [[nodiscard]] int code() const { return code_; }

 private:
  int code_;
};

void register_calibrate(CLI::App& app, std::ostream& out, std::ostream& err);  // progress bar on err
// `calibrate --from-runs` (cmd_calibrate_runs.cpp): what a row leaves out comes from these flags.
struct CalibrateRunsDefaults {
  std::string model, gpu, cluster, framework = "megatron", data_dir;
};
// `progress`: where a line at every tenth of a large table's rows goes (nullptr: nowhere).
void run_from_runs(const std::vector<std::string>& files, const CalibrateRunsDefaults& defaults,
                   const std::string& out_path, bool json, std::ostream& out, std::ostream* progress);
void register_check(CLI::App& app, std::ostream& out);
void register_comm(CLI::App& app, std::ostream& out);
void register_estimate(CLI::App& app, std::ostream& out);
void register_launch(CLI::App& app, std::ostream& out);
void register_rank(CLI::App& app, std::ostream& out);
void register_mtsl(CLI::App& app, std::ostream& out);
void register_simulate(CLI::App& app, std::ostream& out);
// `validate`'s simulator section (cmd_simulate.cpp): simulated vs analytical step times, and printing them.
nlohmann::json simulator_agreement(const SpecLibrary& lib);
void print_simulator_agreement(std::ostream& out, const nlohmann::json& rows);
void register_validate(CLI::App& app, std::ostream& out);

}  // namespace headroom::cli
