// Killing `headroom calibrate` at any moment leaves the previous profile intact and the run resumable:
// the real binary is started (fork/exec) onto the --out of an existing profile and SIGKILLed at spread-out
// moments: at start-up, at progress points through the sweep plus a random delay (fixed seed), then resumed;
// then around the final fit and write, at random delays after the sweep's last case and the moment the final
// write creates its temporary file (inotify). After every kill the profile is byte-identical (or, only when the
// run got past its final rename, a complete new profile), it loads and validates, FILE.partial loads as a
// partial, and at most the killed writer's one temporary file is left. The resumed run finishes, measures only
// what the killed runs had not, and writes a valid profile.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX kill(), which <csignal> need not declare
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "headroom/calibration/profile.hpp"
#include "headroom/core/atomic_file.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// When to kill: once the progress bar shows `progress` cases done (0: at once), then `delay_us` later, or, with
// `at_temporary`, the moment the run creates OUT.tmp.PID (inotify): inside the final write.
struct KillPoint {
  std::size_t progress = 0;
  int delay_us = 0;
  std::string what;
  std::optional<std::filesystem::path> at_temporary;  // OUT
};

struct Outcome {
  bool killed = false;       // false: the run exited on its own before the kill
  int exit_code = -1;        // when it exited on its own
  std::size_t progress = 0;  // cases done at the kill (from the progress bar)
  std::string err;           // everything it wrote on stderr
  pid_t pid = 0;
  double tail_ms = -1;  // from the progress bar's last case to the exit (fit and write), when it exited on its own
};

// The last "] k/N" of the progress bar: {k, N}.
std::pair<std::size_t, std::size_t> progress_of(const std::string& err) {
  std::pair<std::size_t, std::size_t> last{0, 0};
  // "calibrate: K/N cases, LABEL" (a line per case with --progress-interval 0: stderr is a pipe here).
  const std::string marker = "calibrate: ";
  for (std::size_t at = err.find(marker); at != std::string::npos; at = err.find(marker, at + marker.size())) {
    std::size_t i = at + marker.size();
    const auto number = [&] {
      std::size_t x = 0, start = i;
      for (; i < err.size() && err[i] >= '0' && err[i] <= '9'; ++i) x = x * 10 + static_cast<std::size_t>(err[i] - '0');
      return i > start ? std::optional<std::size_t>(x) : std::nullopt;
    };
    const auto k = number();
    if (!k || i >= err.size() || err[i] != '/') continue;
    ++i;
    if (const auto n = number()) last = {*k, *n};
  }
  return last;
}

// Runs headroom with `args`; when `kill` is set, SIGKILLs it at that point (unless it finished first).
Outcome run_headroom(const std::vector<std::string>& args, const std::optional<KillPoint>& kill) {
  int watch = -1;  // inotify on OUT's directory, set up before the child can create anything
  if (kill && kill->at_temporary) {
    watch = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (watch < 0 || ::inotify_add_watch(watch, kill->at_temporary->parent_path().c_str(), IN_CREATE) < 0)
      throw std::runtime_error("inotify");
  }
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    ::dup2(pipefd[1], 2);
    const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(devnull, 1);
    std::vector<char*> argv;
    std::string bin = HEADROOM_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(HEADROOM_BIN, argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  ::fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
  Outcome o;
  o.pid = pid;
  const std::string temporary =
      kill && kill->at_temporary ? temporary_path(*kill->at_temporary, pid).filename().string() : "";
  std::optional<Clock::time_point> fire, swept;
  bool armed = kill && kill->progress == 0;
  if (armed && !kill->at_temporary) fire = Clock::now() + std::chrono::microseconds(kill->delay_us);
  int status = 0;
  bool exited = false;
  const auto drain = [&] {
    char buf[4096];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) o.err.append(buf, static_cast<std::size_t>(n));
  };
  // Whether the child created its temporary since the last look.
  const auto created = [&] {
    alignas(inotify_event) char buf[4096];
    bool seen = false;
    for (ssize_t n; (n = ::read(watch, buf, sizeof buf)) > 0;)
      for (char* p = buf; p < buf + n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(p);
        if (e->len > 0 && temporary == e->name) seen = true;
        p += sizeof(inotify_event) + e->len;
      }
    return seen;
  };
  const auto kill_now = [&] {
    ::kill(pid, SIGKILL);
    o.killed = true;
    o.progress = progress_of(o.err).first;
    ::waitpid(pid, &status, 0);
    exited = true;
  };
  for (;;) {
    if (armed && watch >= 0 && created()) {
      kill_now();
      break;
    }
    drain();
    const auto [k, n] = progress_of(o.err);
    if (!swept && n > 0 && k == n) swept = Clock::now();
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      if (swept) o.tail_ms = std::chrono::duration<double, std::milli>(Clock::now() - *swept).count();
      break;
    }
    if (kill && !armed && k >= kill->progress) {
      armed = true;
      if (!kill->at_temporary) fire = Clock::now() + std::chrono::microseconds(kill->delay_us);
    }
    if (fire && Clock::now() >= *fire) {
      kill_now();
      break;
    }
    pollfd pfd[2] = {{pipefd[0], POLLIN, 0}, {watch, POLLIN, 0}};
    ::poll(pfd, watch >= 0 ? 2 : 1, fire ? 0 : 1);
    if (fire) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  drain();
  ::close(pipefd[0]);
  if (watch >= 0) ::close(watch);
  if (exited && !o.killed) o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (o.killed && WIFEXITED(status)) {  // it finished between our last look and the kill
    o.killed = false;
    o.exit_code = WEXITSTATUS(status);
  }
  return o;
}

std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> t;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) t.push_back(e.path().filename().string());
  return t;
}

std::size_t measurements_in(const fs::path& partial) {
  return load_profile(partial, test::library().data_dir(), true).raw.size();
}

class CalibrateKill : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("headroom_kill_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    out_ = dir_ / "p.json";
    partial_ = dir_ / "p.json.partial";
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] std::vector<std::string> args() const {
    return {"calibrate", "--backend",           "cpu", "--ranks", "2",          "--quick", "--min-r2",
            "0",         "--progress-interval", "0",   "--out",   out_.string()};
  }

  // The invariants after a kill: the previous profile unchanged (or a complete new one when the run got past its
  // final rename), loading and validating; a partial file, if any, loading as one; no more than the killed run's
  // one temporary file.
  void check_after(const Outcome& o, const std::string& before, const KillPoint& k) {
    SCOPED_TRACE(k.what + " (pid " + std::to_string(o.pid) + ", killed at " + std::to_string(o.progress) + " cases)");
    const std::string now = slurp(out_);
    const bool replaced = now != before;
    if (replaced) {
      // Only a run that finished its sweep may have renamed a new profile into place, and never a torn one.
      EXPECT_EQ(o.progress, total_) << "the profile changed before the sweep had finished";
      ++renamed_;
    }
    EXPECT_NO_THROW((void)load_profile(out_, test::library().data_dir())) << "the profile no longer loads";
    if (fs::exists(partial_)) {
      EXPECT_NO_THROW((void)measurements_in(partial_)) << "the partial file does not load";
    }
    const auto tmp = temporaries(dir_);
    EXPECT_LE(tmp.size(), 1u) << "temporary files pile up";
    for (const auto& t : tmp) {
      const std::string suffix = ".tmp." + std::to_string(o.pid);
      EXPECT_TRUE(t.size() > suffix.size() && t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0)
          << t << " is not the killed run's";
      ++in_write_;
    }
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      EXPECT_TRUE(name == "p.json" || name == "p.json.partial" || name == "p.json.lock" ||
                  name.find(".tmp.") != std::string::npos)
          << "unexpected file " << name;
    }
  }

  fs::path dir_, out_, partial_;
  std::size_t total_ = 0;
  int renamed_ = 0, in_write_ = 0;
};

TEST_F(CalibrateKill, KilledAtAnyMomentThePreviousProfileSurvivesAndTheRunResumes) {
  const auto t0 = Clock::now();
  // The profile to protect, from a complete run.
  const Outcome first = run_headroom(args(), std::nullopt);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  total_ = progress_of(first.err).second;
  ASSERT_GT(total_, 50u) << first.err;
  std::string before = slurp(out_);
  const double sweep_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // Kill points through one sweep: each run resumes from what the killed ones checkpointed. A random delay (fixed
  // seed) after each progress point lands the kill anywhere in measuring the next case or writing the checkpoint.
  std::mt19937 rng(20240917);
  std::uniform_int_distribution<int> jitter(0, 25000);
  std::vector<KillPoint> points = {{0, 0, "at once (before exec)", std::nullopt},
                                   {0, 3000, "3 ms: start-up", std::nullopt},
                                   {0, 40000, "40 ms: loading specs", std::nullopt}};
  for (const double f : {0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9})
    points.push_back({std::max<std::size_t>(1, static_cast<std::size_t>(f * static_cast<double>(total_))), jitter(rng),
                      "mid-sweep", std::nullopt});
  std::printf("%-28s %13s %8s %10s %s\n", "kill point", "trigger", "killed@", "partial", "temporaries");
  for (auto& k : points) {
    const Outcome o = run_headroom(args(), k);
    ASSERT_TRUE(o.killed) << k.what << ": the run finished before the kill\n" << o.err;
    check_after(o, before, k);
    const std::size_t have = fs::exists(partial_) ? measurements_in(partial_) : 0;
    std::printf("%-28s %3zu+%6.2f ms %8zu %10zu %zu\n", k.what.c_str(), k.progress, k.delay_us / 1e3, o.progress, have,
                temporaries(dir_).size());
    ASSERT_EQ(slurp(out_), before) << "a kill mid-sweep changed the profile";
  }

  // Resume: the run finishes, reuses every checkpointed measurement and measures only the rest.
  ASSERT_TRUE(fs::exists(partial_));
  const std::size_t had = measurements_in(partial_);
  ASSERT_GT(had, 0u);
  const Outcome resumed = run_headroom(args(), std::nullopt);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming from " + partial_.string() + " (" + std::to_string(had) + " measurements)"),
            std::string::npos)
      << resumed.err;
  std::size_t reused = 0;
  for (std::size_t at = resumed.err.find("(resumed)"); at != std::string::npos;
       at = resumed.err.find("(resumed)", at + 1))
    ++reused;
  EXPECT_EQ(reused, had);
  std::printf("resumed: %zu of %zu cases reused, %zu measured anew\n", reused, total_, total_ - reused);
  EXPECT_LT(total_ - reused, total_);
  const Profile done = load_profile(out_, test::library().data_dir());
  EXPECT_FALSE(done.partial);
  EXPECT_EQ(done.raw.size(), total_);
  EXPECT_FALSE(fs::exists(partial_));
  EXPECT_TRUE(temporaries(dir_).empty());

  // Around the final fit and write: a run whose sweep is complete (the partial holds every measurement, as a run
  // that measured everything leaves it) goes straight to fitting and writing the profile; kills at random delays
  // after its "N/N" land in the fit, inside write_file_atomically, after the rename or not at all.
  const auto complete_partial = [&] {
    nlohmann::json j = nlohmann::json::parse(slurp(out_));
    j["partial"] = true;
    std::ofstream(partial_) << j.dump(2) << "\n";
  };
  complete_partial();
  const int sweep_in_write = in_write_;
  in_write_ = 0;
  const Outcome timed = run_headroom(args(), std::nullopt);  // how long the fit and write take
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  ASSERT_GE(timed.tail_ms, 0) << timed.err;
  const int window_us = std::max(2000, static_cast<int>(timed.tail_ms * 1e3));
  before = slurp(out_);
  // Even runs: a random delay (fixed seed) after the sweep's last case; odd runs: the moment the final write
  // creates its temporary file.
  std::uniform_int_distribution<int> late(0, window_us);
  int finished = 0;
  for (int i = 0; i < 16; ++i) {
    if (!fs::exists(partial_)) complete_partial();
    KillPoint k{total_, 0, "final write (tmp created)", out_};
    if (i % 2 == 0) k = {total_, i == 0 ? 0 : late(rng), "final fit/write (random)", std::nullopt};
    const Outcome o = run_headroom(args(), k);
    const int write_before = in_write_;
    if (o.killed) {
      check_after(o, before, k);
    } else {
      ASSERT_EQ(o.exit_code, 0) << o.err;
      ++finished;
    }
    std::printf("%-28s %3zu+%6.2f ms %8s %10s %s\n", k.what.c_str(), k.progress, k.delay_us / 1e3,
                o.killed ? std::to_string(o.progress).c_str() : "finished", fs::exists(partial_) ? "complete" : "-",
                in_write_ > write_before ? "1 (killed inside the write)" : "0");
    EXPECT_NO_THROW((void)load_profile(out_, test::library().data_dir()));
    before = slurp(out_);
  }
  // The last word: resume whatever was left and finish cleanly.
  const Outcome last = run_headroom(args(), std::nullopt);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_FALSE(fs::exists(partial_));
  EXPECT_TRUE(temporaries(dir_).empty());
  EXPECT_NO_THROW((void)load_profile(out_, test::library().data_dir()));
  std::printf(
      "one sweep %.1f s; %zu mid-sweep kills, %d of them inside a checkpoint write; fit+write window %.1f ms: "
      "16 runs, %d killed inside the final write, %d killed after its rename, %d finished first; total %.1f s\n",
      sweep_s, points.size(), sweep_in_write, window_us / 1e3, in_write_, renamed_, finished,
      std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace
}  // namespace headroom
