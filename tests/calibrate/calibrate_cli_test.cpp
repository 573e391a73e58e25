// `headroom calibrate --backend cpu --ranks 4 --quick` end to end: run, fit, write, load, predict — and the
// profile changes what estimate, rank and mtsl predict. Also --ingest and the refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "headroom/calibration/profile.hpp"
#include "headroom/kernels/harness.hpp"
#include "headroom/kernels/mpi.hpp"
#include "cli_support.hpp"
#include "watchdog.hpp"

// ASan: GCC defines __SANITIZE_ADDRESS__, clang (the asan preset) answers __has_feature(address_sanitizer).
#define HEADROOM_TEST_ASAN 0
#if defined(__SANITIZE_ADDRESS__)
#undef HEADROOM_TEST_ASAN
#define HEADROOM_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#undef HEADROOM_TEST_ASAN
#define HEADROOM_TEST_ASAN 1
#endif  // __has_feature(address_sanitizer)
#endif  // __SANITIZE_ADDRESS__

namespace headroom {
namespace {

namespace fs = std::filesystem;

using Result = test::CliResult;
constexpr auto run = &test::run_cli;

const std::vector<std::string> kEstimate = {"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq",
                                            "8192",     "--tp",    "4",           "--pp",      "2",        "--gpus",
                                            "16",       "--gbs",   "256",         "--json"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& extra) {
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

fs::path scratch(const std::string& name) {
  // One directory per process: concurrent runs of the suite (two build trees) must not share files.
  fs::path d = fs::temp_directory_path() / ("headroom_calibrate_cli_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// One calibration, then everything that uses it (ctest runs each TEST in its own process: one sweep, not four).
// The R² gate is off here: this test checks the pipeline (run, fit, write, load, predict), and 4 rank threads on
// 2 cores time collectives too noisily for a gate (R² 0.3 seen under load); the gate itself is tested on
// synthetic data in calibrate_test.cpp (Fit.PoorFitIsRefusedWithAClearMessage).
TEST(CalibrateCli, QuickCpuEndToEndRunFitWriteLoadPredict) {
  const fs::path dir = scratch("e2e");
  const std::string profile = (dir / "cpu.json").string();
  const auto t0 = std::chrono::steady_clock::now();
  const Result cal = run({"calibrate", "--backend", "cpu", "--ranks", "4", "--quick", "--out", profile, "--model",
                          "llama3.1-8b", "--min-r2", "0"});
  [[maybe_unused]] const double seconds =  // unchecked under ASan, which is slower
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(cal.code, 0) << cal.err;
#if !HEADROOM_TEST_ASAN
  EXPECT_LT(seconds, 60.0);  // the issue's bound for --quick on this 2-core machine (not under ASan)
#endif                       // !HEADROOM_TEST_ASAN
  EXPECT_NE(cal.out.find("GEMM: efficiency"), std::string::npos) << cal.out;
  EXPECT_NE(cal.out.find("busbw"), std::string::npos);
  // stderr is not a terminal here (a log file, as in CI): plain progress lines, no carriage return or escape.
  EXPECT_NE(cal.err.find("calibrate: 1/"), std::string::npos) << cal.err;
  EXPECT_EQ(cal.err.find('\r'), std::string::npos) << cal.err;
  EXPECT_EQ(cal.err.find('\033'), std::string::npos) << cal.err;
  EXPECT_FALSE(fs::exists(profile + ".partial"));

  const Profile p = load_profile(profile, test::library().data_dir());
  EXPECT_EQ(p.machine.backend, "cpu");
  EXPECT_EQ(p.machine.ranks, 4);
  ASSERT_TRUE(p.gemm.has_value());
  EXPECT_GE(p.gemm->r2, p.min_r2);
  EXPECT_EQ(p.attention.size(), 2u);
  EXPECT_EQ(p.collectives.size(), 2 * kCollectives.size());  // groups of 2 and 4
  for (const auto& c : p.collectives) EXPECT_EQ(c.level, "intra");

  const Result base = run(kEstimate);
  const Result prof = run(with(kEstimate, {"--profile", profile}));
  ASSERT_EQ(base.code, 0) << base.err;
  ASSERT_EQ(prof.code, 0) << prof.err;
  const auto a = nlohmann::json::parse(base.out)["perf"], b = nlohmann::json::parse(prof.out)["perf"];
  EXPECT_NE(a["step_time_s"].get<double>(), b["step_time_s"].get<double>());
  EXPECT_NE(b["coefficients"].get<std::string>().find("profile cpu"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(base.out)["memory"], nlohmann::json::parse(prof.out)["memory"]);  // memory unchanged

  const Result rank = run({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "4096",
                           "--gbs", "64", "--top", "3", "--json", "--profile", profile});
  ASSERT_EQ(rank.code, 0) << rank.err;
  EXPECT_NE(nlohmann::json::parse(rank.out)["coefficients"].get<std::string>().find("profile"), std::string::npos);

  const Result mtsl = run({"mtsl", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--tp", "8",
                           "--gbs", "8", "--profile", profile});
  ASSERT_EQ(mtsl.code, 0) << mtsl.err;
  EXPECT_NE(mtsl.out.find("predicted step at MTSL"), std::string::npos) << mtsl.out;
  fs::remove_all(dir);
}

TEST(CalibrateCli, InterruptedRunResumesFromThePartialFile) {
  const fs::path dir = scratch("resume");
  const std::string out = (dir / "p.json").string();
  // A partial file holding one measurement of the plan, as an interrupted run leaves it.
  Profile part;
  part.machine = {"cpu", "CPU", "", 2, 2, 1, 0};
  part.date = calibrate::utc_now();
  part.partial = true;
  kernels::TimingOptions t;
  t.repeats = 1;
  auto b = kernels::make_cpu_backend(2);
  part.raw.push_back(kernels::measure(*b, kernels::GemmCase{32, 32, 32}, t));
  calibrate::write_json_atomically(out + ".partial", profile_to_json(part));
  const Result r = run({"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--out", out, "--min-r2", "0"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("resuming from"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(resumed) gemm m=32 n=32 k=32"), std::string::npos);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  // A partial file of other options is refused rather than mixed in; --fresh starts over instead.
  part.machine.ranks = 3;
  calibrate::write_json_atomically(out + ".partial", profile_to_json(part));
  EXPECT_EQ(run({"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--out", out}).code, 2);
  const Result fresh = run(
      {"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--out", out, "--min-r2", "0", "--fresh", "--json"});
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  EXPECT_NE(fresh.err.find("--fresh: " + out + ".partial removed"), std::string::npos) << fresh.err;
  const auto doc = nlohmann::json::parse(fresh.out);
  EXPECT_EQ(doc["written"], out);
  EXPECT_FALSE(doc.contains("raw"));
  EXPECT_FALSE(fs::exists(out + ".lock"));
  // A second calibration onto an --out another one is writing is refused at once.
  {
    const int fd = ::open((out + ".lock").c_str(), O_RDWR | O_CREAT, 0666);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);
    const Result busy = run({"calibrate", "--backend", "cpu", "--ranks", "2", "--quick", "--out", out});
    EXPECT_EQ(busy.code, 2);
    EXPECT_NE(busy.err.find("is being written by another headroom calibrate"), std::string::npos) << busy.err;
    ::close(fd);
  }
  fs::remove_all(dir);
}

TEST(CalibrateCli, CorruptOrPartialProfileExitsTwo) {
  const auto bad = (scratch("bad") / "bad.json").string();
  std::ofstream(bad) << R"({"format": "headroom-profile", "version": 1})";
  const Result r = run(with(kEstimate, {"--profile", bad}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
  std::ofstream(bad) << "not json";
  EXPECT_EQ(run(with(kEstimate, {"--profile", bad})).code, 2);
}

TEST(CalibrateCli, IngestTurnsNcclTestsLogsIntoCollectives) {
  const auto out = (scratch("ingest") / "ingested.json").string();
  const fs::path logs = fs::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "nccl-tests";
  const Result r = run({"calibrate", "--ingest", (logs / "all_reduce_perf_1x8_h100.txt").string(), "--ingest",
                        (logs / "all_gather_perf_2x8_h100.txt").string(), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("algbw"), std::string::npos);
  const Profile p = load_profile(out, test::library().data_dir());
  ASSERT_EQ(p.collectives.size(), 2u);
  EXPECT_EQ(p.collectives[1].level, "inter");
  EXPECT_NEAR(p.collectives[0].busbw_bytes_per_s() / 1e9, 360, 15);
  // Only the links change: the estimate moves with them.
  const Result base = run(kEstimate), prof = run(with(kEstimate, {"--profile", out}));
  ASSERT_EQ(prof.code, 0) << prof.err;
  EXPECT_NE(nlohmann::json::parse(base.out)["perf"]["step_time_s"],
            nlohmann::json::parse(prof.out)["perf"]["step_time_s"]);
}

// --out naming a named pipe that no process reads is refused after a short wait, not blocked on forever.
TEST(CalibrateCliErrors, APipeNobodyReadsIsRefusedNotBlockedOn) {
  const fs::path dir = scratch("fifo");
  const std::string fifo = (dir / "profile.json").string();
  fs::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const fs::path logs = fs::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "nccl-tests";
  const Result r = test::within(60, "calibrate --ingest LOG --out FIFO", [&] {
    return run({"calibrate", "--ingest", (logs / "all_reduce_perf_1x8_h100.txt").string(), "--out", fifo});
  });
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_NE(r.err.find(fifo + ": no process has the named pipe open for reading"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(CalibrateCliErrors, BadOptionsExitTwo) {
  EXPECT_EQ(run({"calibrate", "--backend", "tpu", "--out", "/tmp/x.json"}).code, 2);
  EXPECT_EQ(run({"calibrate", "--backend", "cpu"}).code, 2);  // no --out
  // Refused before MPI starts (an in-process test must not start MPI; --mpi's own option errors are checked under
  // mpirun by tests/calibrate/mpi_calibrate_test.sh).
  EXPECT_EQ(run({"calibrate", "--mpi"}).code, 2);  // no --out
  const Result ingest_mpi = run({"calibrate", "--mpi", "--ingest", "log.txt", "--out", "/tmp/x.json"});
  EXPECT_EQ(ingest_mpi.code, 2);
  EXPECT_NE(ingest_mpi.err.find("no --mpi"), std::string::npos) << ingest_mpi.err;
  if (!kernels::mpi::built()) {  // a build without MPI says so
    const Result mpi = run({"calibrate", "--mpi", "--out", "/tmp/x.json"});
    EXPECT_EQ(mpi.code, 2);
    EXPECT_NE(mpi.err.find("no MPI support"), std::string::npos) << mpi.err;
  }
}

}  // namespace
}  // namespace headroom
