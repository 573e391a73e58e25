// `headroom calibrate`: the command line of a calibration (calibration/driver.hpp runs it: lock, resume, sweep,
// fit, write; this file checks the flags, shows the progress and prints the fits), or turn
// nccl-tests logs into a profile's collectives section (--ingest).
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "cli_common.hpp"
#include "commands.hpp"
#include "headroom/calibration/fit.hpp"
#include "headroom/ingest/nccl_tests.hpp"
#include "headroom/calibration/profile.hpp"
#include "headroom/calibration/driver.hpp"
#include "headroom/calibration/sweep.hpp"
#include "headroom/core/atomic_file.hpp"
#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "headroom/kernels/backend.hpp"
#include "headroom/kernels/mpi.hpp"

namespace headroom::cli {
namespace {

namespace fs = std::filesystem;

struct CalibrateOptions {
  std::string backend = "cpu";
  std::string ranks;
  std::string gpus_per_node;
  bool mpi = false;
  std::vector<std::string> models;
  std::string gpu;  // datasheet peak the efficiencies are fractions of (default: the fastest measured GEMM)
  bool quick = false;
  std::string out;
  std::vector<std::string> ingest;
  std::vector<std::string> from_runs;
  std::string cluster;
  std::string framework = "megatron";
  std::string ingest_op;
  double min_r2 = kDefaultMinR2;
  bool no_progress = false;
  bool fresh = false;  // ignore (and remove) FILE.partial: start the sweep over
  bool json = false;
  double progress_interval_s = 10;  // log files: the least time between two progress lines (0: every case)
  std::string data_dir;
};

// nccl-tests' table: size, count, type, time, algbw, busbw (GB/s = 10^9 B/s), for one op and group size.
void print_collective_table(std::ostream& out, const std::vector<kernels::Measurement>& raw, Collective op, int ranks) {
  char line[200];
  std::snprintf(line, sizeof line,
                "# %s over %d ranks\n# %10s  %12s  %8s  %10s  %8s  %8s\n# %10s  %12s  %8s  %10s  %8s  %8s\n",
                std::string(to_string(op)).c_str(), ranks, "size", "count", "type", "time", "algbw", "busbw", "(B)",
                "(elements)", "", "(us)", "(GB/s)", "(GB/s)");
  out << line;
  for (const auto& m : raw) {
    const auto* c = std::get_if<kernels::CollectiveCase>(&m.c);
    if (c == nullptr || c->op != op || c->ranks != ranks) continue;
    const auto bw = kernels::bus_bandwidth(op, ranks, m.bytes, m.seconds);
    std::snprintf(line, sizeof line, "%12.0f  %12.0f  %8s  %10.2f  %8.2f  %8.2f\n", m.bytes, m.bytes / 4, "float",
                  m.seconds * 1e6, bw.algbw / 1e9, bw.busbw / 1e9);
    out << line;
  }
}

void print_fits(std::ostream& out, const Profile& p) {
  char line[240];
  if (p.peak_flops > 0) {
    std::snprintf(line, sizeof line, "peak %.3f TFLOP/s (%s)", p.peak_flops / 1e12, p.peak_source.c_str());
    out << line;
    if (p.hbm_bytes_per_s > 0) {
      std::snprintf(line, sizeof line, ", copy %.1f GB/s", p.hbm_bytes_per_s / 1e9);
      out << line;
    }
    out << "\n";
  }
  if (p.gemm) {
    std::snprintf(
        line, sizeof line,
        "GEMM: efficiency %.3f, half dim %.1f, wave units %d (R² %.4f of log time, %.3f of efficiency, %zu points)\n",
        p.gemm->efficiency, p.gemm->half_dim, p.gemm->wave_units, p.gemm->r2, p.gemm->r2_efficiency,
        p.gemm->residuals.size());
    out << line;
  }
  for (const auto& a : p.attention) {
    std::snprintf(line, sizeof line, "attention d=%lld %s: efficiency %.3f, half tokens %.1f (R² %.4f)\n",
                  static_cast<long long>(a.head_dim), a.causal ? "causal" : "full", a.efficiency, a.half_tokens, a.r2);
    out << line;
  }
  for (const auto& c : p.collectives) {
    std::snprintf(
        line, sizeof line,
        "%-14s %3d ranks %-5s (%s): small α %.2f us, large α %.2f us, busbw %.3f GB/s, break %.0f B (R² %.4f)\n",
        std::string(to_string(c.op)).c_str(), c.ranks, c.level.c_str(), c.source.c_str(), c.small.alpha_s * 1e6,
        c.large.alpha_s * 1e6, c.busbw_bytes_per_s() / 1e9, c.breakpoint_bytes, c.r2);
    out << line;
  }
}

// --out of a calibration: a regular file (or a new one) in an existing directory, checked before measuring.
void check_sweep_output(const CalibrateOptions& o) {
  if (check_output_path(o.out, "--out") == OutputKind::stream && o.ingest.empty() && o.from_runs.empty())
    throw Error("--out " + o.out + " is not a regular file: a calibration keeps FILE.partial beside its profile");
}

// --json: the profile just written, without its raw points.
void print_profile_json(std::ostream& out, const Profile& p, const std::string& written) {
  nlohmann::json doc = profile_to_json(p);
  doc.erase("raw");
  doc["written"] = written;
  print_json(out, doc);
}

void run_ingest(const CalibrateOptions& o, const SpecLibrary& lib, std::ostream& out) {
  std::ostringstream table;  // the tables; --json prints the fits instead
  Profile p;
  // Only a regular file is a profile to add to: a stream (a pipe, /dev/null) is written into, never read.
  const bool existing = check_output_path(o.out, "--out") == OutputKind::file && fs::exists(o.out);
  if (existing) p = load_profile(o.out, lib.data_dir());
  for (const auto& file : o.ingest) {
    const calibrate::NcclTestsLog log =
        calibrate::parse_nccl_tests(read_file_bounded(file, "--ingest " + file), file, o.ingest_op);
    if (!existing && p.machine.backend.empty()) {
      p.machine = {"nccl-tests", log.device, "", log.ranks, log.ranks / log.nodes, 0, 0};
      p.date = calibrate::utc_now();
    }
    std::vector<calibrate::CollectivePoint> points;
    for (const auto& m : log.rows) points.push_back({m.bytes, m.seconds});
    CollectiveFit f = calibrate::fit_collective(points, log.op, log.ranks, log.nodes > 1 ? "inter" : "intra");
    f.source = "nccl-tests";
    calibrate::require_quality(file + ": " + std::string(to_string(log.op)) + " fit", f.r2, o.min_r2);
    std::erase_if(p.collectives,
                  [&](const auto& c) { return c.op == f.op && c.ranks == f.ranks && c.level == f.level; });
    std::erase_if(p.raw, [&](const kernels::Measurement& m) {
      const auto* c = std::get_if<kernels::CollectiveCase>(&m.c);
      return c != nullptr && m.kernel == "nccl-tests" && c->op == log.op && c->ranks == log.ranks;
    });
    p.collectives.push_back(f);
    p.raw.insert(p.raw.end(), log.rows.begin(), log.rows.end());
    const std::string src = "nccl-tests: " + fs::path(file).filename().string();
    p.collectives_source =
        p.collectives_source.empty() ? src : p.collectives_source + ", " + fs::path(file).filename().string();
    table << file << ": " << to_string(log.op) << " over " << log.ranks << " ranks on " << log.nodes << " node(s), "
          << log.rows.size() << " sizes\n";
    print_collective_table(table, log.rows, log.op, log.ranks);
  }
  p.partial = false;
  calibrate::write_json_atomically(o.out, profile_to_json(p));
  if (o.json) return print_profile_json(out, p, o.out);
  out << table.str();
  print_fits(out, p);
  out << "wrote " << o.out << "\n";
}

// The sweep's progress on rank 0's stderr. On a terminal: a bar redrawn in place, with the time left. In a log
// file (stderr not a terminal): a plain line at most every --progress-interval seconds and at the end, no carriage
// returns or escape codes.
class SweepProgress {
 public:
  SweepProgress(const CalibrateOptions& o, const calibrate::Team& team, std::ostream& err)
      : o_(o), team_(team), err_(err), terminal_(&err == &std::cerr && ::isatty(STDERR_FILENO) == 1) {}

  void operator()(const calibrate::Progress& pr) {
    if (o_.no_progress || !team_.root()) return;
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - started_).count();
    if (pr.resumed) resumed_cases_ = pr.done;
    const std::size_t fresh = pr.done > resumed_cases_ ? pr.done - resumed_cases_ : 0;
    const std::string eta = fresh == 0 || pr.done >= pr.total
                                ? std::string()
                                : ", about " +
                                      std::to_string(std::llround(elapsed * static_cast<double>(pr.total - pr.done) /
                                                                  static_cast<double>(fresh))) +
                                      " s left";
    const bool last = pr.done == pr.total;
    if (terminal_) {
      constexpr std::size_t width = 30;
      const std::size_t filled = pr.total == 0 ? width : pr.done * width / pr.total;
      err_ << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] " << pr.done << "/"
           << pr.total << (pr.resumed ? " (resumed) " : " ") << pr.label << eta << "\033[K" << (last ? "\n" : "")
           << std::flush;
    } else if (last || std::chrono::duration<double>(now - last_line_).count() >= o_.progress_interval_s) {
      last_line_ = now;
      err_ << "calibrate: " << pr.done << "/" << pr.total << " cases" << (pr.resumed ? " (resumed) " : ", ") << pr.label
           << eta << "\n"
           << std::flush;
    }
  }

 private:
  const CalibrateOptions& o_;
  const calibrate::Team& team_;
  std::ostream& err_;
  bool terminal_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_line_ = started_ - std::chrono::hours(1);
  std::size_t resumed_cases_ = 0;  // cases a resumed run found measured: not part of this run's pace
};

void sweep_fit_write(const CalibrateOptions& o, const SpecLibrary& lib, const calibrate::Ranks& ranks,
                     kernels::Backend& backend, const calibrate::Team& team, std::ostream& out, std::ostream& err) {
  calibrate::CalibrationRequest r;
  r.backend = o.backend;
  for (const auto& m : o.models) r.models.push_back(lib.model(m));
  r.model_names = o.models;
  if (!o.gpu.empty()) {
    const GpuSpec g = lib.gpu(o.gpu);
    r.gpu_name = g.name;
    r.gpu_peak_flops = g.bf16_flops;
  }
  r.quick = o.quick;
  r.fresh = o.fresh;
  r.min_r2 = o.min_r2;
  r.out = o.out;
  r.data_dir = lib.data_dir();
  SweepProgress progress(o, team, err);
  const calibrate::CalibrationEvents events{std::ref(progress), [&](const std::string& line) {
                                              err << line << "\n" << std::flush;
                                            }};
  const calibrate::CalibrationResult result = calibrate::run_calibration(r, backend, ranks, team, events);
  if (!team.root()) return;
  if (o.json) return print_profile_json(out, result.profile, o.out);
  out << "headroom calibrate: " << o.backend << " backend, " << result.device << ", " << calibrate::describe(ranks)
      << ", " << result.cases << " cases" << (o.quick ? " (quick)" : "") << "\n";
  print_fits(out, result.profile);
  out << "\n";
  print_collective_table(out, result.profile.raw, Collective::all_reduce, ranks.count);
  out << "wrote " << o.out << "\n";
}

// --mpi: this process is one rank of an mpirun job. Every rank runs the sweep; rank 0 alone prints and writes.
// MPI starts before the options are checked, so that an error in them is reported as every other one:
// errors every rank meets at the same point (bad options, a failed check, rank 0's file or fit errors, which
// on_root broadcasts) are printed once, by rank 0, before any rank exits (mpirun kills the rest of the job when
// one rank exits with an error), and every rank exits with code 2; an error on one rank alone is printed by that
// rank, which then aborts the job with code 2 (MPI_Abort) rather than leave the others waiting in a collective.
void run_calibrate_mpi(const CalibrateOptions& o, std::ostream& out, std::ostream& err) {
  const kernels::mpi::Session mpi;  // MPI_Init here, MPI_Finalize when this function returns or throws
  const kernels::mpi::Placement& where = mpi.placement();
  std::ostringstream silent;
  try {
    SpecOptions so;
    so.data_dir = o.data_dir;
    const SpecLibrary lib = so.library();
    if (!(o.min_r2 >= 0 && o.min_r2 <= 1)) throw Error("--min-r2 must be between 0 and 1");
    if (o.backend != "cpu")
      throw Error(
          "--mpi runs the CPU backend across MPI ranks (--backend cpu); GPU clusters: run nccl-tests under "
          "mpirun and read its logs with --ingest");
    if (where.size < 2)
      throw Error("--mpi: " + std::to_string(where.size) +
                  " MPI rank; start headroom under mpirun with two or more "
                  "(mpirun -np 2 headroom calibrate --mpi ...)");
    if (!o.ranks.empty() && parse_count("--ranks", o.ranks) != where.size)
      throw Error("--ranks " + o.ranks + " but mpirun started " + std::to_string(where.size) +
                  " ranks: under --mpi the ranks are mpirun's (leave --ranks out)");
    if (!o.gpus_per_node.empty() && parse_count("--gpus-per-node", o.gpus_per_node) != where.ranks_on_first_node)
      throw Error("--gpus-per-node " + o.gpus_per_node + " but mpirun placed " +
                  std::to_string(where.ranks_on_first_node) +
                  " ranks on rank 0's node: under --mpi the placement "
                  "decides what is intra-node (leave --gpus-per-node out)");
    const auto backend = mpi.cpu_backend();
    const calibrate::Ranks ranks{where.size, where.ranks_on_first_node, where.nodes, true};
    std::ostream& my_out = mpi.root() ? out : silent;
    std::ostream& my_err = mpi.root() ? err : silent;
    sweep_fit_write(o, lib, ranks, *backend, calibrate::Team{&mpi}, my_out, my_err);
  } catch (const Error& e) {
    if (mpi.all_failed(5.0)) {
      if (mpi.root()) err << "error: " << e.what() << "\n" << std::flush;
      throw QuietExit(2);
    }
    err << "error: rank " << where.rank << ": " << e.what() << "\n" << std::flush;
    mpi.abort(2);
  } catch (const std::exception& e) {
    err << "internal error: rank " << where.rank << ": " << e.what() << "\n" << std::flush;
    mpi.abort(1);
  }
}

// Flags that set what the other modes do, given to --from-runs or --ingest (or a sweep's --from-runs flags to a sweep):
// refused, as every inert flag is (refuse_given), rather than run the mode as if they were not there.
void refuse_inert_calibrate_flags(const CLI::App& app, const CalibrateOptions& o) {
  if (!o.from_runs.empty())
    refuse_given(app,
                 {"--backend", "--ranks", "--gpus-per-node", "--quick", "--fresh", "--ingest-op", "--min-r2",
                  "--progress-interval"},
                 "with --from-runs: it fits the compute efficiency to measured runs and measures nothing (valid with "
                 "--from-runs: --model, --gpu, --cluster, --framework, --out, --json, --no-progress, --data-dir)");
  else if (!o.ingest.empty())
    refuse_given(app,
                 {"--backend", "--ranks", "--gpus-per-node", "--model", "--gpu", "--quick", "--fresh", "--cluster",
                  "--framework", "--no-progress", "--progress-interval"},
                 "with --ingest: it fits nccl-tests logs and measures nothing (valid with --ingest: --ingest-op, "
                 "--min-r2, --out, --json, --data-dir)");
  else
    refuse_given(app, {"--ingest-op", "--cluster", "--framework"},
                 "without --ingest or --from-runs: a sweep measures this machine's kernels (valid: --ingest-op with "
                 "--ingest, --cluster and --framework with --from-runs)");
}

void run_calibrate(const CalibrateOptions& o, const CLI::App& app, std::ostream& out, std::ostream& err) {
  // Checked before --mpi starts MPI (so that the in-process fuzzer, which never passes --out, never starts it).
  if (o.out.empty()) throw Error("--out FILE is required: where to write the profile");
  // Before any measuring: a directory or a missing one fails now, not after the sweep. A sweep keeps
  // FILE.partial beside its profile to resume from, which a device or pipe cannot have.
  // (Under --mpi rank 0 alone checks, in sweep_fit_write, so that one line reports it.)
  if (!o.mpi) check_sweep_output(o);
  if (o.mpi && !o.ingest.empty()) throw Error("--ingest reads nccl-tests logs: it takes no --mpi");
  if (o.mpi && !o.from_runs.empty()) throw Error("--from-runs reads measured runs: it takes no --mpi");
  if (!o.ingest.empty() && !o.from_runs.empty())
    throw Error("--ingest and --from-runs write different profiles: give one");
  refuse_inert_calibrate_flags(app, o);
  if (o.mpi) return run_calibrate_mpi(o, out, err);
  SpecOptions so;
  so.data_dir = o.data_dir;
  const SpecLibrary lib = so.library();
  if (!(o.min_r2 >= 0 && o.min_r2 <= 1)) throw Error("--min-r2 must be between 0 and 1");
  if (!o.ingest.empty()) return run_ingest(o, lib, out);
  if (!o.from_runs.empty()) {
    if (o.models.size() > 1) throw Error("--from-runs takes one --model: the model of rows that name none");
    return run_from_runs(o.from_runs, {o.models.empty() ? "" : o.models[0], o.gpu, o.cluster, o.framework, o.data_dir},
                         o.out, o.json, out, o.no_progress ? nullptr : &err);
  }
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "hip")
    throw Error("--backend '" + o.backend + "' is not one of cpu, cuda, hip");
  const int count =
      static_cast<int>(o.ranks.empty() ? (o.gpus_per_node.empty() ? (o.backend == "cpu" ? 2 : 1)
                                                                  : parse_count("--gpus-per-node", o.gpus_per_node))
                                       : parse_count("--ranks", o.ranks));
  if (count > 1024) throw Error("--ranks " + std::to_string(count) + " is more than 1024");
  const int gpn = o.gpus_per_node.empty() ? count : static_cast<int>(parse_count("--gpus-per-node", o.gpus_per_node));
  auto backend = o.backend == "cpu" ? kernels::make_cpu_backend(count) : kernels::make_gpu_backend(o.backend, count);
  const calibrate::Ranks ranks{count, gpn, (count + gpn - 1) / gpn, false};
  sweep_fit_write(o, lib, ranks, *backend, calibrate::Team{}, out, err);
}

}  // namespace

void register_calibrate(CLI::App& app, std::ostream& out, std::ostream& err) {
  auto opts = std::make_shared<CalibrateOptions>();
  CLI::App* sub = app.add_subcommand("calibrate", "measure GEMM, attention and collectives; fit and write a profile");
  sub->add_option("--backend", opts->backend, "cpu, cuda or hip")->capture_default_str();
  sub->add_option("--ranks", opts->ranks, "devices (CPU: threads) the collectives span; default --gpus-per-node");
  sub->add_option("--gpus-per-node", opts->gpus_per_node, "group sizes up to this are intra-node; default --ranks");
  sub->add_flag("--mpi", opts->mpi, "run as one rank of mpirun: collectives between MPI ranks, intra- and inter-node");
  sub->add_option("--model", opts->models, "also sweep this model's layer GEMMs (repeatable)");
  sub->add_option("--gpu", opts->gpu, "express efficiencies against this GPU's datasheet peak");
  sub->add_flag("--quick", opts->quick, "a short sweep (CPU: under a minute)");
  sub->add_option("--out", opts->out, "profile JSON to write (atomically; FILE.partial while running)");
  sub->add_option("--ingest", opts->ingest, "nccl-tests output to turn into the collectives section (repeatable)");
  sub->add_option("--ingest-op", opts->ingest_op, "the collective of --ingest logs that do not say");
  sub->add_option("--from-runs", opts->from_runs,
                  "measured runs (CSV or JSON Lines with estimate's flags as columns plus outcome, step_time_s, "
                  "tokens_per_s, tflops_per_gpu, peak_memory_gib; or Megatron-LM logs): fit the compute efficiency "
                  "they identify and write performance coefficients for --profile (repeatable)");
  sub->add_option("--cluster", opts->cluster, "--from-runs: the cluster of rows that name none");
  sub->add_option("--framework", opts->framework, "--from-runs: the framework whose coefficients are calibrated")
      ->capture_default_str();
  sub->add_option("--min-r2", opts->min_r2, "refuse fits whose R² (of log time) is below this; 0 accepts every fit")
      ->capture_default_str();
  sub->add_flag("--fresh", opts->fresh, "start over: remove FILE.partial instead of resuming from it");
  sub->add_flag("--json", opts->json, "print the fits as one JSON document (the profile without its raw points)");
  sub->add_flag("--no-progress", opts->no_progress, "no progress on stderr (a bar on a terminal, lines in a log)");
  sub->add_option("--progress-interval", opts->progress_interval_s,
                  "when stderr is not a terminal: seconds between two progress lines (0: a line per case)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--data-dir", opts->data_dir,
                  "specs directory (default $HEADROOM_DATA_DIR or the source tree's data/)");
  sub->callback([opts, sub, &out, &err] { run_calibrate(*opts, *sub, out, err); });
}

}  // namespace headroom::cli
