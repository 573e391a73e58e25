// `headroom calibrate --backend cpu --ranks 4 --quick` end to end: run, fit, write, load, predict — and the
// profile changes what estimate, rank and mtsl predict. Also --ingest and the refusals.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "headroom/calibrate/profile.hpp"
#include "test_support.hpp"

namespace headroom {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

const std::vector<std::string> kEstimate = {"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--seq",
                                            "8192", "--tp", "4", "--pp", "2", "--gpus", "16", "--gbs", "256", "--json"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& extra) {
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

class CalibrateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("headroom_calibrate_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
    fs::create_directories(dir_);
    profile_ = (dir_ / "cpu.json").string();
    const auto t0 = std::chrono::steady_clock::now();
    result_ = run({"calibrate", "--backend", "cpu", "--ranks", "4", "--quick", "--out", profile_, "--model", "llama3.1-8b"});
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
  static inline std::string profile_;
  static inline Result result_;
  static inline double seconds_ = 0;
};

TEST_F(CalibrateCli, QuickCpuRunFitsAndWritesAValidProfileInUnderAMinute) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  EXPECT_LT(seconds_, 60.0);
  EXPECT_NE(result_.out.find("GEMM: efficiency"), std::string::npos) << result_.out;
  EXPECT_NE(result_.out.find("busbw"), std::string::npos);
  EXPECT_NE(result_.err.find("] "), std::string::npos) << "a progress bar on stderr";
  EXPECT_FALSE(fs::exists(profile_ + ".partial"));
  const calibrate::Profile p = calibrate::load_profile(profile_, test::library().data_dir());
  EXPECT_EQ(p.machine.backend, "cpu");
  EXPECT_EQ(p.machine.ranks, 4);
  ASSERT_TRUE(p.gemm.has_value());
  EXPECT_GE(p.gemm->r2, p.min_r2);
  EXPECT_EQ(p.attention.size(), 2u);
  EXPECT_EQ(p.collectives.size(), 2 * kCollectives.size());  // groups of 2 and 4
  for (const auto& c : p.collectives) EXPECT_EQ(c.level, "intra");
}

TEST_F(CalibrateCli, ProfileChangesEstimateRankAndMtsl) {
  ASSERT_EQ(result_.code, 0) << result_.err;
  const Result base = run(kEstimate);
  const Result prof = run(with(kEstimate, {"--profile", profile_}));
  ASSERT_EQ(base.code, 0) << base.err;
  ASSERT_EQ(prof.code, 0) << prof.err;
  const auto a = nlohmann::json::parse(base.out)["perf"], b = nlohmann::json::parse(prof.out)["perf"];
  EXPECT_NE(a["step_time_s"].get<double>(), b["step_time_s"].get<double>());
  EXPECT_NE(b["coefficients"].get<std::string>().find("profile cpu"), std::string::npos);
  // Memory does not depend on the profile.
  EXPECT_EQ(nlohmann::json::parse(base.out)["memory"], nlohmann::json::parse(prof.out)["memory"]);

  const Result rank = run({"rank", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--seq", "4096",
                           "--gbs", "64", "--top", "3", "--json", "--profile", profile_});
  ASSERT_EQ(rank.code, 0) << rank.err;
  EXPECT_NE(nlohmann::json::parse(rank.out)["coefficients"].get<std::string>().find("profile"), std::string::npos);

  const Result mtsl = run({"mtsl", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "8", "--tp", "8",
                           "--gbs", "8", "--profile", profile_});
  ASSERT_EQ(mtsl.code, 0) << mtsl.err;
  EXPECT_NE(mtsl.out.find("predicted step at MTSL"), std::string::npos) << mtsl.out;
}

TEST_F(CalibrateCli, CorruptOrPartialProfileExitsTwo) {
  const auto bad = (dir_ / "bad.json").string();
  std::ofstream(bad) << "{\"format\": \"headroom-profile\", \"version\": 1}";
  const Result r = run(with(kEstimate, {"--profile", bad}));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
  std::ofstream(bad) << "not json";
  EXPECT_EQ(run(with(kEstimate, {"--profile", bad})).code, 2);
}

TEST_F(CalibrateCli, IngestTurnsNcclTestsLogsIntoCollectives) {
  const auto out = (dir_ / "ingested.json").string();
  const fs::path logs = fs::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "nccl-tests";
  const Result r = run({"calibrate", "--ingest", (logs / "all_reduce_perf_1x8_h100.txt").string(), "--ingest",
                        (logs / "all_gather_perf_2x8_h100.txt").string(), "--out", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("algbw"), std::string::npos);
  const calibrate::Profile p = calibrate::load_profile(out, test::library().data_dir());
  ASSERT_EQ(p.collectives.size(), 2u);
  EXPECT_EQ(p.collectives[1].level, "inter");
  EXPECT_NEAR(p.collectives[0].busbw_bytes_per_s() / 1e9, 360, 15);
  // Only the links change: the estimate moves with them.
  const Result base = run(kEstimate), prof = run(with(kEstimate, {"--profile", out}));
  ASSERT_EQ(prof.code, 0) << prof.err;
  EXPECT_NE(nlohmann::json::parse(base.out)["perf"]["step_time_s"], nlohmann::json::parse(prof.out)["perf"]["step_time_s"]);
}

TEST(CalibrateCliErrors, BadOptionsExitTwo) {
  EXPECT_EQ(run({"calibrate", "--backend", "tpu", "--out", "/tmp/x.json"}).code, 2);
  EXPECT_EQ(run({"calibrate", "--backend", "cpu"}).code, 2);  // no --out
  const Result mpi = run({"calibrate", "--mpi", "--out", "/tmp/x.json"});
  EXPECT_EQ(mpi.code, 2);
  EXPECT_NE(mpi.err.find("MPI"), std::string::npos);
}

}  // namespace
}  // namespace headroom
