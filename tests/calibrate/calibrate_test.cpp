// Fits recover known coefficients, poor fits are refused, profiles round-trip and validate against the
// schema, nccl-tests logs parse with nccl-tests' own busbw, sweeps resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "headroom/calibration/fit.hpp"
#include "headroom/ingest/nccl_tests.hpp"
#include "headroom/calibration/profile.hpp"
#include "headroom/calibration/sweep.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/core/json_schema.hpp"
#include "headroom/estimator/throughput.hpp"
#include "test_support.hpp"

namespace headroom::calibrate {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Fit, GemmRecoversEfficiencyAndHalfDim) {
  GemmFit truth;
  truth.efficiency = 0.8;
  truth.half_dim = 96;
  truth.wave_units = 132;
  std::vector<GemmPoint> pts;
  for (double m : {128.0, 1000.0, 4096.0})
    for (double n : {256.0, 3000.0, 8192.0})
      for (double k : {64.0, 1024.0, 8192.0})
        pts.push_back({m, n, k, 2 * m * n * k / (1e15 * truth.predict_efficiency(m, n, k))});
  const GemmFit f = fit_gemm(pts, 1e15, 132);
  EXPECT_NEAR(f.efficiency, 0.8, 1e-3);
  EXPECT_NEAR(f.half_dim, 96, 0.5);
  EXPECT_GT(f.r2, 0.9999);
  EXPECT_EQ(f.residuals.size(), pts.size());
}

TEST(Fit, WaveQuantizationIdlesThePartialWave) {
  EXPECT_DOUBLE_EQ(gemm_wave_factor(128 * 132, 128, 132, 128), 1.0);
  EXPECT_DOUBLE_EQ(gemm_wave_factor(128 * 133, 128, 132, 128), 133.0 / 264.0);
  EXPECT_DOUBLE_EQ(gemm_wave_factor(100, 100, 0, 128), 1.0);
}

TEST(Fit, AttentionRecoversSaturation) {
  std::vector<AttentionPoint> pts;
  for (double s : {512.0, 1024.0, 2048.0, 4096.0, 8192.0}) {
    const double flops = 3.5 * 4 * s * s * 128 * 16 / 2;
    pts.push_back({s, flops, flops / (1e15 * 0.6 * s / (s + 700))});
  }
  const AttentionFit f = fit_attention(pts, 1e15, 128, true);
  EXPECT_NEAR(f.efficiency, 0.6, 1e-6);
  EXPECT_NEAR(f.half_tokens, 700, 1e-3);
}

// A quick run fitted e = 1.48, s½ = 2,467 from sequences up to 512. Points that keep rising
// over the measured range do not pin an asymptote: the fit stays inside e ≤ 1 and s½ ≤ 2 × the longest sequence.
TEST(Fit, AttentionDoesNotExtrapolatePastItsPoints) {
  std::vector<AttentionPoint> pts;
  for (double s : {64.0, 128.0, 256.0, 512.0}) {
    const double flops = 3.5 * 4 * s * s * 64 * 8 / 2;
    pts.push_back({s, flops, flops / (1e12 * 1.48 * s / (s + 2467))});
  }
  const AttentionFit f = fit_attention(pts, 1e12, 64, true);
  EXPECT_LE(f.efficiency, 1.0);
  EXPECT_LE(f.half_tokens, kMaxAttentionHalfOverRange * 512);
  // An efficiency above the peak even as a constant is an error, not a profile.
  for (auto& p : pts) p.seconds /= 10;
  EXPECT_THROW((void)fit_attention(pts, 1e12, 64, true), Error);
}

TEST(Fit, CollectiveFindsBothRegimesAndBusbw) {
  std::vector<CollectivePoint> pts;
  for (int log2_b = 3; log2_b <= 30; ++log2_b) {
    const double b = std::ldexp(1.0, log2_b);
    const double t = b < 65536 ? 20e-6 + b / 5e9 : 30e-6 + b / 200e9;
    pts.push_back({b, t});
  }
  const CollectiveFit f = fit_collective(pts, Collective::all_reduce, 8, "intra");
  EXPECT_NEAR(f.small.alpha_s, 20e-6, 1e-7);
  EXPECT_NEAR(f.large.alpha_s, 30e-6, 1e-6);
  EXPECT_NEAR(f.busbw_bytes_per_s(), 200e9 * 14 / 8, 1e8);
  EXPECT_DOUBLE_EQ(f.breakpoint_bytes, 65536);
  EXPECT_GT(f.r2, 0.999);
}

TEST(Fit, PoorFitIsRefusedWithAClearMessage) {
  std::vector<CollectivePoint> pts;
  pts.reserve(12);
  for (int i = 0; i < 12; ++i) pts.push_back({8.0 * (i + 1), (i % 2 ? 1e-3 : 1e-6)});  // noise, no trend
  const CollectiveFit f = fit_collective(pts, Collective::all_gather, 4, "intra");
  EXPECT_LT(f.r2, 0.9);
  try {
    require_quality("all_gather fit over 4 ranks", f.r2, 0.9);
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("below the threshold 0.90"), std::string::npos) << e.what();
  }
  // The refusal names the noisiest point and what to do (a sweep re-measures it first: sweep_until_fitted).
  try {
    require_quality("all_gather fit over 4 ranks", f.r2, 0.9, "64 B (measured +900% off the fit)");
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the noisiest point 64 B"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rerun on an idle machine"), std::string::npos) << e.what();
  }
  EXPECT_EQ(noisiest({0.1, -0.5, 0.3}), 1u);
}

TEST(Ingest, NcclTestsLogParsesAndBusbwMatchesTheLog) {
  const fs::path dir = fs::path(HEADROOM_TEST_SOURCE_DIR) / "data" / "nccl-tests";
  const NcclTestsLog log = parse_nccl_tests(read(dir / "all_reduce_perf_1x8_h100.txt"), "all_reduce_perf_1x8_h100.txt");
  EXPECT_EQ(log.op, Collective::all_reduce);
  EXPECT_EQ(log.ranks, 8);
  EXPECT_EQ(log.nodes, 1);
  EXPECT_EQ(log.device, "NVIDIA H100 80GB HBM3");
  ASSERT_EQ(log.rows.size(), 31u);  // 8 B .. 8 GiB
  for (std::size_t i = 0; i < log.rows.size(); ++i) {
    const auto bw = kernels::bus_bandwidth(log.op, 8, log.rows[i].bytes, log.rows[i].seconds);
    EXPECT_NEAR(bw.busbw / 1e9, log.reported_busbw[i], 0.01 + 1e-3 * log.reported_busbw[i]) << i;
  }
  const NcclTestsLog two = parse_nccl_tests(read(dir / "all_gather_perf_2x8_h100.txt"), "all_gather_perf_2x8_h100.txt");
  EXPECT_EQ(two.op, Collective::all_gather);
  EXPECT_EQ(two.ranks, 16);
  EXPECT_EQ(two.nodes, 2);
}

TEST(Ingest, MalformedLogsAreErrors) {
  EXPECT_THROW((void)parse_nccl_tests("# nothing here\n", "x.txt"), Error);
  EXPECT_THROW((void)parse_nccl_tests("#  Rank  0 Group 0 Pid 1 on h device 0 [0] G\n       8  2 float\n",
                                      "all_reduce_perf.txt"),
               Error);
  EXPECT_THROW((void)parse_nccl_tests("x", "log.txt", "broadcast"), Error);
}

// Inputs fuzz_nccl_tests_log (tests/fuzz) found: each must be an Error (or parse), never an exception of another
// type, undefined behaviour, or a profile that --profile then refuses.
TEST(Ingest, FuzzFoundLogs) {
  const std::string ranks =
      "#  Rank  0 Group  0 Pid 1 on node1 device  0 [0000:18:00] GPU X\n"
      "#  Rank  1 Group  0 Pid 2 on node1 device  1 [0000:2a:00] GPU X\n";
  const std::string header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n";
  const std::string rows =
      "8 2 float sum -1 24.07 0.00 0.00 0\n1024 256 float sum -1 24.34 0.04 0.07 0\n"
      "1048576 262144 float sum -1 29.29 35.80 62.65 0\n";
  const auto parse = [](const std::string& text) { return parse_nccl_tests(text, "all_reduce_perf.txt"); };
  EXPECT_EQ(parse(ranks + header + rows).ranks, 2);
  // Nothing after the device's ']': substr(npos) threw std::out_of_range.
  EXPECT_EQ(parse("#  Rank  0 Group 0 Pid 1 on node1 device 0 [0000:18:00]\n"
                  "#  Rank  1 Group 0 Pid 2 on node1 device 1 [0000:2a:00]\n" +
                  header + rows)
                .device,
            "");
  // A size past int64 (the cast was undefined behaviour); times of inf or nan (from_chars reads them; the fit
  // then wrote an R² of NaN as null, which the profile schema refuses).
  EXPECT_THROW((void)parse(ranks + header + rows + "99999999999999999999999 2 float sum -1 24.07 0 0 0\n"), Error);
  EXPECT_THROW((void)parse(ranks + header + "8 2 float sum -1 inf 0 0 0\n" + rows), Error);
  EXPECT_THROW((void)parse(ranks + header + "8 2 float sum -1 nan 0 0 0\n" + rows), Error);
  // One rank measures no link: its profile would not load (collective fits are of 2 or more ranks).
  EXPECT_THROW((void)parse(ranks.substr(0, ranks.find('\n') + 1) + header + rows), Error);
  // Only the first "on HOST" of a Rank line names a host: 2 ranks on 3 "hosts" gave 0 GPUs per node.
  EXPECT_EQ(parse("#  Rank  0 Group 0 Pid 1 on node1 device 0 [0] on x\n"
                  "#  Rank  1 Group 0 Pid 2 on node1 device 1 [1] on y\n" +
                  header + rows)
                .nodes,
            1);
}

// A device name that is not UTF-8 (from a log) is written replaced, and the profile loads back.
TEST(Ingest, NonUtf8DeviceNameIsWrittenAndLoadsBack) {
  const std::string header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong\n";
  const NcclTestsLog log = parse_nccl_tests(
      "#  Rank  0 Group 0 Pid 1 on n device 0 [0] GPU \xff\n"
      "#  Rank  1 Group 0 Pid 2 on n device 1 [1] GPU \xff\n" +
          header +
          "8 2 float sum -1 24 0 0 0\n1024 256 float sum -1 25 0 0 0\n"
          "1048576 262144 float sum -1 30 0 0 0\n",
      "all_reduce_perf.txt");
  Profile p;
  p.machine = {"nccl-tests", log.device, "", log.ranks, log.ranks / log.nodes, 0, 0};
  p.date = "2025-01-01T00:00:00Z";
  std::vector<CollectivePoint> points;
  for (const auto& m : log.rows) points.push_back({m.bytes, m.seconds});
  p.collectives.push_back(fit_collective(points, log.op, log.ranks, "intra"));
  p.raw = log.rows;
  const fs::path path = fs::temp_directory_path() / ("headroom_utf8_test_" + std::to_string(::getpid()) + ".json");
  ASSERT_NO_THROW(write_json_atomically(path, profile_to_json(p)));
  EXPECT_EQ(load_profile(path, test::library().data_dir()).machine.device, "GPU \xef\xbf\xbd");  // U+FFFD
  fs::remove(path);
}

Profile sample_profile() {
  Profile p;
  auto b = kernels::make_cpu_backend(2);
  p.machine = {"cpu", "test CPU", "host", 2, 2, 4, 0};
  p.machine.software = b->device().software;  // round-tripped with the rest of the machine
  p.date = "2025-01-01T00:00:00Z";
  p.quick = true;
  kernels::TimingOptions t;
  t.warmup = 0;
  t.repeats = 1;
  t.min_batch_s = 0;
  SweepOptions so;
  so.quick = true;
  so.ranks = 2;
  so.gpus_per_node = 2;
  std::vector<kernels::Measurement> have;
  std::vector<kernels::Case> plan;
  for (const auto& c : plan_sweep(so))
    if (kernels::kind_of(c) != kernels::KernelKind::attention || std::get<kernels::AttentionCase>(c).seq <= 256)
      plan.push_back(c);
  run_sweep(*b, plan, t, have, nullptr, nullptr);
  p.raw = have;
  p.min_r2 = 0;  // a zero-repeat sweep on a busy machine: the numbers are for the format, not the fit
  fit_profile(p, 2);
  return p;
}

// GEMM measurements exactly on a roofline at 1 TFLOP/s, one of them (m = n = k = 256) 100× too slow.
std::vector<kernels::Measurement> gemms_with_one_outlier() {
  std::vector<kernels::Measurement> raw;
  for (std::int64_t m : {64, 128, 256, 512})
    for (std::int64_t k : {64, 256, 1024}) {
      kernels::Measurement x;
      x.c = kernels::GemmCase{m, m, k};
      x.flops = 2.0 * static_cast<double>(m * m * k);
      x.seconds = x.flops / 1e12 * (m == 256 && k == 256 ? 100.0 : 1.0);
      raw.push_back(x);
    }
  return raw;
}

TEST(Profile, ANoisyFitNamesTheMeasurementsOfItsWorstPoint) {
  Profile p;
  p.machine = {"cpu", "test CPU", "host", 2, 2, 4, 0};
  p.peak_flops = 1e12;
  p.raw = gemms_with_one_outlier();
  p.min_r2 = 0.9;
  try {
    fit_profile(p, 2);
    FAIL() << "a fit with a 100x outlier passed R² 0.9";
  } catch (const NoisyFit& e) {
    EXPECT_EQ(e.cases, std::vector<std::string>{"gemm m=256 n=256 k=256"});
    EXPECT_NE(std::string(e.what()).find("m=256 n=256 k=256"), std::string::npos) << e.what();
  }
}

// A measured peak is the fastest compute kernel of the sweep: attention passes timed faster than every GEMM (as a
// busy CPU run can) raise it, and the fit does not put an efficiency above 1 or refuse the run.
TEST(Profile, AMeasuredPeakIsTheFastestComputeKernelOfTheSweep) {
  Profile p;
  p.machine = {"cpu", "test CPU", "host", 2, 2, 4, 0};
  p.raw = gemms_with_one_outlier();
  for (const std::int64_t s : {128, 256, 512})
    for (const bool backward : {false, true}) {
      kernels::Measurement x;
      x.c = kernels::AttentionCase{s, 64, 2, true, backward};
      x.flops = (backward ? 2.5 : 1.0) * 2.0 * 2.0 * static_cast<double>(s * s * 64 * 2) / 2;
      x.seconds = x.flops / 1.5e12;
      p.raw.push_back(x);
    }
  p.min_r2 = 0;
  ASSERT_NO_THROW(fit_profile(p, 2));
  EXPECT_DOUBLE_EQ(p.peak_flops, 1.5e12);
  EXPECT_NE(p.peak_source.find("attention"), std::string::npos) << p.peak_source;
  ASSERT_EQ(p.attention.size(), 1u);
  EXPECT_NEAR(p.attention[0].efficiency, 1.0, 1e-9);
  ASSERT_TRUE(p.gemm.has_value());
  EXPECT_LT(p.gemm->efficiency, 1.0);
}

TEST(Sweep, ANoisyCaseIsMeasuredAgainAndDroppedFromThePartialWhenItStaysNoisy) {
  auto b = kernels::make_cpu_backend(2);
  kernels::TimingOptions t;
  t.warmup = 0;
  t.repeats = 1;
  t.min_batch_s = 0;
  const std::vector<kernels::Case> plan{kernels::GemmCase{32, 32, 32}, kernels::GemmCase{64, 64, 64}};
  const std::string noisy = "gemm m=64 n=64 k=64";
  const auto stored = [&](const std::vector<kernels::Measurement>& have) {
    return std::count_if(have.begin(), have.end(), [&](const auto& m) { return kernels::label(m.c) == noisy; });
  };
  // A stored measurement far off (as a busy machine leaves one in FILE.partial): measured again, then fitted.
  std::vector<kernels::Measurement> have;
  run_sweep(*b, plan, t, have, nullptr, nullptr);
  have.back().seconds = 1e3;
  const auto off_until_remeasured = [&](const std::vector<kernels::Measurement>& h, int) {
    for (const auto& m : h)
      if (kernels::label(m.c) == noisy && m.seconds > 1) return Refit{{noisy}, "GEMM efficiency fit: R² below"};
    return Refit{};
  };
  EXPECT_EQ(sweep_until_fitted(*b, plan, t, have, nullptr, nullptr, 2, off_until_remeasured), 1);
  ASSERT_EQ(have.size(), 2u);
  EXPECT_EQ(stored(have), 1);
  EXPECT_LT(have.back().seconds, 1.0);
  // A case that stays off the fit: measured 1 + 2 times, then left out of the checkpoint and named.
  int refits = 0;
  std::vector<kernels::Measurement> saved = have;
  const auto always_off = [&](const std::vector<kernels::Measurement>&, int) {
    ++refits;
    return Refit{{noisy}, "GEMM efficiency fit: R² below"};
  };
  try {
    (void)sweep_until_fitted(
        *b, plan, t, have, nullptr, [&](const auto& h) { saved = h; }, 2, always_off);
    FAIL() << "a case that stays noisy was accepted";
  } catch (const NoisyFit& e) {
    EXPECT_EQ(e.cases, std::vector<std::string>{noisy});
    EXPECT_NE(std::string(e.what()).find("measured 3 times and still off the fit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(refits, 3);
  EXPECT_EQ(stored(saved), 0);
  EXPECT_EQ(saved.size(), 1u);
}

TEST(Profile, RoundTripsAndValidatesAgainstTheSchema) {
  const Profile p = sample_profile();
  const nlohmann::json j = profile_to_json(p);
  const auto schema = read_json_file(test::library().data_dir() / "schema" / "profile.schema.json");
  EXPECT_NO_THROW(validate_against_schema(j, schema, "sample"));
  const Profile q = profile_from_json(j, "sample");
  EXPECT_EQ(profile_to_json(q)["machine"], j["machine"]);
  EXPECT_EQ(q.raw.size(), p.raw.size());
  EXPECT_DOUBLE_EQ(q.gemm->efficiency, p.gemm->efficiency);
  ASSERT_EQ(q.collectives.size(), p.collectives.size());
  for (std::size_t i = 0; i < p.collectives.size(); ++i)  // stored in µs and µs/MiB: equal to rounding
    EXPECT_NEAR(q.collectives[i].busbw_bytes_per_s(), p.collectives[i].busbw_bytes_per_s(),
                1e-9 * std::abs(p.collectives[i].busbw_bytes_per_s()));
  ASSERT_TRUE(q.gemm.has_value());
  EXPECT_EQ(q.attention.size(), 2u);                     // head dims 64 and 128, causal
  EXPECT_EQ(q.collectives.size(), kCollectives.size());  // one group size (2)
}

TEST(Profile, EveryShippedProfileValidates) {
  const auto dir = test::library().data_dir() / "profiles";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    EXPECT_NO_THROW((void)load_profile(e.path(), test::library().data_dir()));
    ++n;
  }
  EXPECT_GE(n, 1);
}

TEST(Profile, CorruptPartialAndIncompatibleProfilesAreErrors) {
  const fs::path dir = fs::temp_directory_path() / "headroom_profile_test";
  fs::create_directories(dir);
  const auto data = test::library().data_dir();
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  EXPECT_THROW((void)load_profile(write("trunc.json", "{\"format\": \"headroom-profile\", "), data), Error);
  nlohmann::json j = profile_to_json(sample_profile());
  j["version"] = 99;
  try {
    (void)load_profile(write("v99.json", j.dump()), data);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version 99 is not supported"), std::string::npos) << e.what();
  }
  j["version"] = 1;
  j["partial"] = true;
  EXPECT_THROW((void)load_profile(write("partial.json", j.dump()), data), Error);
  EXPECT_NO_THROW((void)load_profile(dir / "partial.json", data, true));
  j["partial"] = false;
  j["gemm"]["efficency"] = 1;  // typo: unknown key
  EXPECT_THROW((void)load_profile(write("typo.json", j.dump()), data), Error);
  fs::remove_all(dir);
}

// Profiles that escaped as json::type_error, read integers out of int's range (undefined for 8e18, wrapped for
// 2^32 + 2) or read a missing version through const operator[] (undefined); found replaying inputs through
// fuzz_profile (tests/fuzz). Each is an Error.
TEST(Profile, FuzzFoundProfilesAreErrors) {
  const fs::path dir = fs::temp_directory_path() / ("headroom_profile_fuzz_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto data = test::library().data_dir();
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  EXPECT_THROW((void)load_profile(write("format.json", R"({"format": 5})"), data), Error);
  EXPECT_THROW((void)load_profile(write("no_version.json", R"({"format": "headroom-profile"})"), data), Error);
  EXPECT_THROW((void)load_profile(write("version.json", R"({"format": "headroom-profile", "version": 8e18})"), data),
               Error);
  nlohmann::json j = profile_to_json(sample_profile());
  for (const nlohmann::json& ranks : {nlohmann::json(8e18), nlohmann::json(4294967298LL)}) {
    j["machine"]["ranks"] = ranks;
    EXPECT_THROW((void)load_profile(write("ranks.json", j.dump()), data), Error) << ranks;
  }
  fs::remove_all(dir);
}

TEST(Profile, WrittenAtomically) {
  const fs::path dir = fs::temp_directory_path() / "headroom_atomic_test";
  fs::create_directories(dir);
  write_json_atomically(dir / "p.json", {{"a", 1}});
  write_json_atomically(dir / "p.json", {{"a", 2}});
  EXPECT_EQ(read_json_file(dir / "p.json")["a"], 2);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1) << "no temporary file left behind";
  fs::remove_all(dir);
}

TEST(Sweep, ResumesWithoutRemeasuring) {
  auto b = kernels::make_cpu_backend(2);
  kernels::TimingOptions t;
  t.repeats = 1;
  t.min_batch_s = 0;
  const std::vector<kernels::Case> plan = {kernels::GemmCase{16, 16, 16}, kernels::CopyCase{1024},
                                           kernels::CollectiveCase{Collective::all_gather, 64, 2}};
  std::vector<kernels::Measurement> have;
  run_sweep(*b, {plan[0]}, t, have, nullptr, nullptr);
  const double first = have[0].seconds;
  int measured = 0, resumed = 0, checkpoints = 0;
  run_sweep(
      *b, plan, t, have, [&](const Progress& p) { (p.resumed ? resumed : measured)++; },
      [&](const std::vector<kernels::Measurement>&) { ++checkpoints; });
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(measured, 2);
  EXPECT_EQ(checkpoints, 2);
  EXPECT_EQ(have.size(), 3u);
  EXPECT_EQ(have[0].seconds, first);
}

TEST(Apply, ProfileReplacesDatasheetNumbers) {
  Profile p = sample_profile();
  // A one-repeat sweep on a loaded machine can fit a link with β ≤ 0, which apply_profile rightly skips; the link
  // here comes from exact α + bytes/bw timings, so that what is tested does not depend on the machine's load.
  std::vector<CollectivePoint> exact;
  for (int log2_b = 3; log2_b <= 24; ++log2_b)
    exact.push_back({std::ldexp(1.0, log2_b), 5e-6 + std::ldexp(1.0, log2_b) / 20e9});
  p.collectives = {fit_collective(exact, Collective::all_gather, 2, "intra")};
  const ClusterSpec datasheet = test::library().cluster("dgx-h100");
  const auto [c, k] = apply_profile(p, 128, datasheet, PerfCoefficients{});
  EXPECT_NE(c.gpu.bf16_flops, datasheet.gpu.bf16_flops);
  EXPECT_DOUBLE_EQ(c.gpu.bf16_flops, p.peak_flops);
  EXPECT_DOUBLE_EQ(k.gemm_efficiency, p.gemm->efficiency);
  const PerfContext ctx(k, c);
  EXPECT_DOUBLE_EQ(ctx.intra_efficiency, 1.0);  // the measured link at its own bandwidth
  EXPECT_DOUBLE_EQ(ctx.inter_efficiency, k.inter_efficiency);
  EXPECT_EQ(ctx.link_source, "measured on dgx-h100");
  EXPECT_NE(c.intra_node.kind.find("measured"), std::string::npos);
  EXPECT_TRUE(k.gpus.empty());
}

// An assumed cluster (a GPU no shipped cluster has) says which of its links a profile measured, and stops being
// assumed once both are.
TEST(Apply, AnAssumedClusterSaysWhichLinksAProfileMeasured) {
  std::vector<CollectivePoint> exact;
  for (int log2_b = 3; log2_b <= 24; ++log2_b)
    exact.push_back({std::ldexp(1.0, log2_b), 5e-6 + std::ldexp(1.0, log2_b) / 20e9});
  Profile p = sample_profile();
  p.collectives = {fit_collective(exact, Collective::all_gather, 2, "intra")};
  GpuSpec bare = test::library().gpu("h100-80gb");
  bare.name = "bare";
  const ClusterSpec assumed = test::library().cluster_for_gpu(bare);
  ASSERT_TRUE(assumed.assumed);
  const ClusterSpec one = apply_profile(p, 128, assumed, PerfCoefficients{}).cluster;
  EXPECT_TRUE(one.assumed);
  EXPECT_NE(one.source.find("its intra-node link measured by the profile"), std::string::npos) << one.source;
  p.collectives.push_back(fit_collective(exact, Collective::all_gather, 2, "inter"));
  const ClusterSpec both = apply_profile(p, 128, assumed, PerfCoefficients{}).cluster;
  EXPECT_FALSE(both.assumed);
  EXPECT_NE(both.source.find("its inter-node link measured by the profile"), std::string::npos) << both.source;
}

// A GPU profile's wave term reaches the throughput model: a GEMM whose output tiles spill one tile into a
// second wave of 132 SMs runs at about half the efficiency, and the step time of a layout moves with it.
TEST(Apply, WaveUnitsReachTheThroughputModel) {
  Profile p = sample_profile();
  p.gemm->wave_units = 132;
  p.gemm->tile = 128;
  const auto [c, k] = apply_profile(p, 128, test::library().cluster("dgx-h100"), PerfCoefficients{});
  EXPECT_DOUBLE_EQ(k.gemm_wave_units, 132.0);
  const PerfContext with(k, c);
  PerfCoefficients off = k;
  off.gemm_wave_units = 0;
  const PerfContext without(off, c);
  const GemmShape full{128.0 * 132, 128, 4096}, spill{128.0 * 133, 128, 4096};
  EXPECT_DOUBLE_EQ(gemm_efficiency(with, full), gemm_efficiency(without, full));
  EXPECT_NEAR(gemm_efficiency(with, spill) / gemm_efficiency(without, spill), 133.0 / 264.0, 1e-12);
  const SpecLibrary lib = test::library();
  Layout l = default_layout(lib.framework("megatron"));
  l.tp = 8;
  l.dp = 1;
  l.seq = 4096;
  l.gbs = 8;
  const ModelSpec m = lib.model("llama3.1-8b");
  EXPECT_NE(estimate_perf(m, with, l).step_time_s, estimate_perf(m, without, l).step_time_s);
}

}  // namespace
}  // namespace headroom::calibrate
