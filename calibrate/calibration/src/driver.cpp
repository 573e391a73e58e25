#include "headroom/calibration/driver.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>

#include "headroom/core/atomic_file.hpp"
#include "headroom/core/error.hpp"
#include "headroom/kernels/harness.hpp"

namespace headroom::calibrate {
namespace {

namespace fs = std::filesystem;

// One calibration writes an --out at a time: FILE.lock, flock()ed for the sweep (the kernel drops the lock of a
// killed run, so a stale FILE.lock never blocks) and removed at the end.
class OutputLock {
 public:
  explicit OutputLock(const std::string& out)
      : path_(out + ".lock"), fd_(::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    if (fd_ < 0) throw Error("--out " + out + ": cannot create " + path_ + ": " + std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw Error("--out " + out + " is being written by another headroom calibrate (it holds " + path_ +
                  "): wait for it, or give another --out");
    }
  }
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock() {
    ::unlink(path_.c_str());
    ::close(fd_);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The sweep's cases; every rank must measure the same cases in the same order, or their collectives would not match.
std::vector<kernels::Case> plan_everywhere(const CalibrationRequest& r, const Ranks& ranks, const Team& team) {
  SweepOptions sw;
  sw.quick = r.quick;
  sw.ranks = ranks.count;
  sw.gpus_per_node = ranks.per_node;
  sw.cpu = r.backend == "cpu";
  sw.models = r.models;
  auto plan = plan_sweep(sw);
  std::string labels;
  for (const auto& c : plan) labels += kernels::label(c) + "\n";
  if (!team.everywhere(team.share(labels) == labels))
    throw Error(
        "--mpi: the ranks were started with different sweep options (--quick, --model): give every rank the "
        "same command line");
  return plan;
}

// Rank 0 takes the --out lock, clears what killed writers left, and resumes OUT.partial (unless fresh) if it was
// measured with the same backend and ranks; every rank gets the resumed profile.
Profile resume_partial(const CalibrationRequest& r, const Ranks& ranks, const Team& team,
                       std::optional<OutputLock>& lock, const CalibrationEvents& events) {
  Profile p;
  const std::string out = r.out.string(), partial = out + ".partial";
  std::string resumed;  // rank 0's partial profile as JSON, for the other ranks
  team.on_root([&] {
    if (check_output_path(r.out, "--out") == OutputKind::stream)
      throw Error("--out " + out + " is not a regular file: a calibration keeps FILE.partial beside its profile");
    lock.emplace(out);
    // What writers killed mid-write left (PATH.tmp.PID): nothing piles up however often a run is killed.
    remove_stale_temporaries(out);
    remove_stale_temporaries(partial);
    if (r.fresh && fs::exists(partial)) {
      fs::remove(partial);
      events.note("--fresh: " + partial + " removed, measuring every case again");
    }
    if (!fs::exists(partial)) return;
    p = load_profile(partial, r.data_dir, true);
    const auto options = [](const Machine& m) {
      return "--backend " + m.backend + (m.mpi ? " --mpi with " : " --ranks ") + std::to_string(m.ranks) +
             (m.mpi ? " ranks" : "");
    };
    if (p.machine.backend != r.backend || p.machine.ranks != ranks.count || p.machine.mpi != ranks.mpi)
      throw Error(partial + ": a partial calibration of " + options(p.machine) + ", not of " +
                  options({r.backend, "", "", ranks.count, 0, 0, 0, 1, ranks.mpi}) +
                  "; rerun with those options, or with --fresh to start over");
    events.note("resuming from " + partial + " (" + std::to_string(p.raw.size()) + " measurements)");
    resumed = profile_to_json(p).dump();
  });
  resumed = team.share(resumed);
  if (!team.root() && !resumed.empty()) p = profile_from_json(nlohmann::json::parse(resumed), partial);
  return p;
}

kernels::TimingOptions sweep_timing(bool quick) {
  kernels::TimingOptions timing;
  timing.warmup = quick ? 1 : 3;
  timing.repeats = 5;
  timing.min_batch_s = quick ? 0.001 : 0.02;
  return timing;
}

// Rank 0 fits p on what was measured; a fit below min_r2 names the cases of its noisiest point, which every rank
// measures again (sweep_until_fitted).
Refit fit_or_name_noisy(Profile& p, const std::vector<kernels::Measurement>& have, int round, const Ranks& ranks,
                        const Team& team, const CalibrationEvents& events) {
  std::string cases, why;
  team.on_root([&] {
    p.raw = have;
    p.date = utc_now();
    try {
      fit_profile(p, ranks.per_node);
    } catch (const NoisyFit& e) {
      if (e.cases.empty()) throw;
      std::string names;
      for (const auto& c : e.cases) {
        cases += c + "\n";
        names += (names.empty() ? "" : ", ") + c;
      }
      why = e.what();
      if (round < kRemeasureRounds)
        events.note("calibrate: " + why + "\n  measuring " + names + " again (" + std::to_string(round + 1) + " of " +
                    std::to_string(kRemeasureRounds) + ")");
    }
  });
  Refit refit;
  std::istringstream lines(team.share(cases));
  for (std::string line; std::getline(lines, line);) refit.cases.push_back(line);
  refit.why = team.share(why);
  return refit;
}

}  // namespace

void Team::on_root(const std::function<void()>& f) const {
  if (mpi != nullptr)
    mpi->on_root(f);
  else
    f();
}

std::string Team::share(const std::string& s) const { return mpi != nullptr ? mpi->broadcast(s) : s; }

bool Team::everywhere(bool ok) const { return mpi != nullptr ? mpi->everywhere(ok) : ok; }

std::string describe(const Ranks& r) {
  if (!r.mpi) return std::to_string(r.count) + " ranks (" + std::to_string(r.per_node) + " per node)";
  if (r.nodes == 1) return std::to_string(r.count) + " MPI ranks on 1 node (every group intra-node)";
  return std::to_string(r.count) + " MPI ranks on " + std::to_string(r.nodes) + " nodes (" +
         std::to_string(r.per_node) + " on rank 0's: larger groups inter-node)";
}

CalibrationResult run_calibration(const CalibrationRequest& r, kernels::Backend& backend, const Ranks& ranks,
                                  const Team& team, const CalibrationEvents& events) {
  const auto plan = plan_everywhere(r, ranks, team);
  std::optional<OutputLock> lock;
  Profile p = resume_partial(r, ranks, team, lock, events);
  const std::string partial = r.out.string() + ".partial";
  const kernels::DeviceInfo dev = backend.device();
  p.machine = {r.backend,           dev.name,         hostname(),  ranks.count, ranks.per_node,
               dev.multiprocessors, dev.memory_bytes, ranks.nodes, ranks.mpi,   dev.software};
  p.partial = false;  // what was resumed was a partial profile; the one written at the end is not
  p.quick = r.quick;
  p.models = r.model_names;
  p.min_r2 = r.min_r2;
  if (!r.gpu_name.empty()) {
    p.peak_flops = r.gpu_peak_flops;
    p.peak_source = "datasheet " + r.gpu_name + " BF16 dense";
  }
  const auto checkpoint = [&](const std::vector<kernels::Measurement>& have) {
    team.on_root([&] {
      Profile snapshot = p;
      snapshot.partial = true;
      snapshot.date = utc_now();
      snapshot.raw = have;
      write_json_atomically(partial, profile_to_json(snapshot));
    });
  };
  const auto refit = [&](const std::vector<kernels::Measurement>& have, int round) {
    return fit_or_name_noisy(p, have, round, ranks, team, events);
  };
  std::vector<kernels::Measurement> have = std::move(p.raw);
  (void)sweep_until_fitted(backend, plan, sweep_timing(r.quick), have, events.progress, checkpoint, kRemeasureRounds,
                           refit);
  team.on_root([&] {
    write_json_atomically(r.out, profile_to_json(p));
    fs::remove(partial);
  });
  return {std::move(p), plan.size(), dev.name};
}

}  // namespace headroom::calibrate
