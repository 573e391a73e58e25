// Prediction intervals from held-out residuals, the `uncertain` verdict and rank --risk.
#include "headroom/estimator/uncertainty.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../cli_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

TEST(Uncertainty, BandFromRatiosIsTheCentralShareWidenedToOne) {
  std::vector<double> ratios;
  for (int i = 1; i <= 100; ++i) ratios.push_back(0.8 + 0.004 * i);  // 0.804 .. 1.2
  const ErrorBand b = band_from_ratios(ratios, 0.9);
  ASSERT_TRUE(b.known);
  EXPECT_NEAR(b.low, 1.0 - 0.820, 1e-12);                          // nearest rank: the 5th of 100
  EXPECT_NEAR(b.high, 1.180 - 1.0, 1e-12);                         // the 95th
  const ErrorBand above = band_from_ratios({1.1, 1.2, 1.3}, 1.0);  // all slower than predicted
  EXPECT_DOUBLE_EQ(above.low, 0.0);
  EXPECT_NEAR(above.high, 0.3, 1e-12);
  EXPECT_FALSE(band_from_ratios({}, 0.9).known);
}

TEST(Uncertainty, BandFromVerdictsExplainsEveryHeldOutOutcome) {
  const std::vector<HeldOutVerdict> runs = {
      {90, 100, false},   // predicted 90, trained: nothing to explain
      {110, 100, false},  // predicted over capacity but trained: over-predicted by at least 1 − 100/110
      {95, 100, true},    // predicted to fit but ran out: under-predicted by at least 100/95 − 1
      {120, 100, true}};
  const ErrorBand b = band_from_verdicts(runs);
  EXPECT_NEAR(b.low, 1.0 - 100.0 / 110.0, 1e-12);
  EXPECT_NEAR(b.high, 100.0 / 95.0 - 1.0, 1e-12);
  EXPECT_EQ(memory_verdict(90, 100, b), MemoryVerdict::fits);
  EXPECT_EQ(memory_verdict(97, 100, b), MemoryVerdict::uncertain);
  EXPECT_EQ(memory_verdict(105, 100, b), MemoryVerdict::uncertain);
  EXPECT_EQ(memory_verdict(115, 100, b), MemoryVerdict::oom);
  EXPECT_EQ(memory_verdict(97, 100, ErrorBand{}), MemoryVerdict::fits);  // no band: the prediction decides
}

TEST(Uncertainty, ShippedBandsAreLoaded) {
  const SpecLibrary lib = test::library();
  EXPECT_TRUE(lib.framework("megatron").memory_band.known);
  EXPECT_FALSE(lib.framework("pytorch-fsdp").memory_band.known);  // no held-out memory verdicts for it
  EXPECT_TRUE(default_perf_coefficients(lib, "megatron").step_time_band.known);
  EXPECT_TRUE(default_perf_coefficients(lib, "pytorch-fsdp").step_time_band.known);
  EXPECT_FALSE(PerfCoefficients{}.step_time_band.known);  // datasheet defaults: nothing held out
}

TEST(Uncertainty, StepTimeBandByGpuCountTakesTheLargestCountNotAbove) {
  PerfCoefficients c;
  c.name = "x";
  EXPECT_FALSE(step_time_band_for(c, 64).known);
  c.step_time_band = {0.1, 0.4, true};
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 64).high, 0.4);  // no entries: the pooled band
  c.step_time_bands_by_gpus = {{4, 10, {0.2, 0.1, true}}, {64, 10, {0.15, 0.45, true}}, {256, 5, {0.05, 0.8, true}}};
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 1).high, 0.1);  // below the smallest count: its band
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 4).high, 0.1);
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 63).high, 0.1);
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 64).high, 0.45);
  EXPECT_DOUBLE_EQ(step_time_band_for(c, 16384).high, 0.8);
  EXPECT_NE(step_time_band_source(c, 16384).find("extrapolated"), std::string::npos);
  EXPECT_NE(step_time_band_source(c, 100).find("at 64 GPUs, the held-out count next below 100"), std::string::npos);
  // The file form round-trips; a count out of order or a band out of range is refused, naming the key.
  const nlohmann::json j = perf_coefficients_to_json(c);
  ASSERT_TRUE(j["uncertainty"].contains("by_gpus"));
  EXPECT_EQ(perf_coefficients_from_json(j, "t").step_time_bands_by_gpus.size(), 3U);
  for (const char* bad : {R"([{"gpus": 8, "runs": 1, "step_time_low": 0.1, "step_time_high": 0.2},
                              {"gpus": 8, "runs": 1, "step_time_low": 0.1, "step_time_high": 0.2}])",
                          R"([{"gpus": 8, "runs": 1, "step_time_low": 1.5, "step_time_high": 0.2}])",
                          R"([{"gpus": 0, "runs": 1, "step_time_low": 0.1, "step_time_high": 0.2}])",
                          R"([{"gpus": 8, "step_time_low": 0.1, "step_time_high": 0.2}])", R"({"gpus": 8})"}) {
    nlohmann::json k = j;
    k["uncertainty"]["by_gpus"] = nlohmann::json::parse(bad);
    try {
      (void)perf_coefficients_from_json(k, "t");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("uncertainty.by_gpus"), std::string::npos) << e.what();
    }
  }
}

TEST(Uncertainty, ShippedStepTimeBandWidensWithTheGpuCount) {
  // megatron's held-out residuals by GPU count (4D paper Tables 3, 4, 10): the error grows with scale.
  const PerfCoefficients c = default_perf_coefficients(test::library(), "megatron");
  ASSERT_GE(c.step_time_bands_by_gpus.size(), 2U);
  EXPECT_LT(step_time_band_for(c, 4).high, step_time_band_for(c, 256).high);
  const auto at = [](int gpus) {
    const auto r = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--seq", "8192",
                                  "--tp", "4", "--gpus", std::to_string(gpus), "--gbs", "1024", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    const auto p = nlohmann::json::parse(r.out)["perf"];
    return std::pair{p["step_time_s_interval"][1].get<double>() / p["step_time_s"].get<double>(),
                     p["interval_source"].get<std::string>()};
  };
  const auto [small, small_source] = at(8);
  const auto [large, large_source] = at(256);
  EXPECT_LT(small, large);
  EXPECT_NE(small_source.find("at 8 GPUs"), std::string::npos) << small_source;
  EXPECT_NE(large_source.find("at 256 GPUs"), std::string::npos) << large_source;
}

TEST(Uncertainty, EstimateReportsIntervalsAndAnUncertainVerdict) {
  // llama3.1-8b on 8 A100 40GB, t 4, p 2, s 8192: 32.4 GiB of 39.6, inside its band → fits.
  auto r = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--seq", "8192", "--tp",
                          "4", "--pp", "2", "--gpus", "8", "--gbs", "1024", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["memory"]["peak_gib_interval"].is_array());
  EXPECT_LT(j["memory"]["peak_gib_interval"][0].get<double>(), j["memory"]["peak_gib"].get<double>());
  EXPECT_GT(j["memory"]["peak_gib_interval"][1].get<double>(), j["memory"]["peak_gib"].get<double>());
  EXPECT_EQ(j["memory"]["verdict"], "fits");
  ASSERT_TRUE(j["perf"]["step_time_s_interval"].is_array());
  EXPECT_GT(j["perf"]["step_time_s_interval"][1].get<double>(), j["perf"]["step_time_s"].get<double>());
  // Longer sequences until the prediction is near capacity: some length is uncertain before any is OOM.
  bool uncertain = false;
  for (int seq = 8192; seq <= 16384 && !uncertain; seq += 128) {
    r = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--seq", std::to_string(seq),
                       "--tp", "4", "--pp", "2", "--gpus", "8", "--gbs", "1024", "--json"});
    ASSERT_EQ(r.code, 0) << r.err;
    j = nlohmann::json::parse(r.out);
    const std::string v = j["memory"]["verdict"];
    uncertain = v == "uncertain";
    EXPECT_NE(v, "oom") << seq;  // the band is entered before the prediction crosses capacity
  }
  EXPECT_TRUE(uncertain);
}

TEST(Uncertainty, RankWithPessimisticRiskKeepsLayoutsWhoseBandFits) {
  const std::vector<std::string> base = {"rank",   "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb",
                                         "--gpus", "64",      "--seq",       "8192",      "--gbs",
                                         "1024",   "--top",   "1000",        "--json"};
  auto nominal = test::run_cli(base);
  auto args = base;
  args.insert(args.end(), {"--risk", "pessimistic"});
  auto pessimistic = test::run_cli(args);
  ASSERT_EQ(nominal.code, 0) << nominal.err;
  ASSERT_EQ(pessimistic.code, 0) << pessimistic.err;
  const auto n = nlohmann::json::parse(nominal.out), p = nlohmann::json::parse(pessimistic.out);
  EXPECT_LT(p["fitting"].get<int>(), n["fitting"].get<int>());
  for (const auto& x : p["layouts"]) EXPECT_EQ(x["verdict"], "fits");
  args = {"rank", "--model", "llama3.1-8b", "--cluster",   "dgx-a100-40gb", "--gpus", "64",         "--seq",
          "8192", "--gbs",   "1024",        "--framework", "pytorch-fsdp",  "--risk", "pessimistic"};
  const auto refused = test::run_cli(args);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("does not ship"), std::string::npos) << refused.err;
  args = {"rank",  "--model", "llama3.1-8b", "--cluster", "dgx-a100-40gb", "--gpus",  "64",
          "--seq", "8192",    "--gbs",       "1024",      "--risk",        "reckless"};
  EXPECT_EQ(test::run_cli(args).code, 2);
}

}  // namespace
}  // namespace headroom

namespace headroom {
namespace {

// Every estimate says where its GPU's GEMM and attention efficiencies come from.
TEST(CoefficientsSource, EstimateSaysFittedDatasheetOrMeasured) {
  const auto perf = [](const char* gpu, const char* framework) {
    const auto r = test::run_cli({"estimate", "--model", "llama3.1-8b", "--gpu", gpu, "--framework", framework, "--seq",
                                  "4096", "--tp", "8", "--gpus", "8", "--json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["perf"];
  };
  const auto source = [&perf](const char* gpu, const char* framework = "megatron") {
    return perf(gpu, framework)["coefficients_source"].get<std::string>();
  };
  EXPECT_EQ(source("h100-94gb"), "fitted");  // a gpus entry of data/perf/megatron.json
  // h100-80gb has kernel curves (the H200's measured ones, the same die): they price it, not the 4D paper's H100
  // 94GB entry.
  EXPECT_EQ(source("h100-80gb"), "device curves");
  const auto curves = test::run_cli(
      {"estimate", "--model", "llama3.1-8b", "--gpu", "h100-80gb", "--seq", "4096", "--tp", "8", "--gpus", "8"});
  EXPECT_NE(curves.out.find("kernel curves h200-measured.json (measured on NVIDIA H200"), std::string::npos)
      << curves.out;
  EXPECT_NE(curves.out.find("GEMMs at megatron's stack_gemm_fraction"), std::string::npos) << curves.out;
  // pytorch-fsdp has no entry for mi300x nor for h100-94gb: the device's, fitted under megatron (device_gpus).
  const auto shared = perf("mi300x", "pytorch-fsdp");
  EXPECT_EQ(shared["coefficients_source"], "fitted");
  EXPECT_EQ(shared["coefficients_gpu"], "h100-94gb");
  EXPECT_EQ(shared["coefficients_fitted_under"], "megatron");
  EXPECT_EQ(perf("h100-94gb", "megatron")["coefficients_fitted_under"], "megatron");
  EXPECT_EQ(perf("mi250x-gcd", "pytorch-fsdp")["coefficients_fitted_under"], "pytorch-fsdp");
  // A different die: h100-94gb's entry times the published kernel benchmarks' ratio (mi300x.json kernels_scale).
  const auto mi300x = perf("mi300x", "megatron");
  EXPECT_EQ(mi300x["coefficients_source"], "fitted");
  EXPECT_EQ(mi300x["coefficients_gpu"], "h100-94gb");
  EXPECT_DOUBLE_EQ(mi300x["coefficients_scale"]["gemm"].get<double>(), 0.69);
  EXPECT_EQ(perf("h100-80gb", "megatron")["coefficients_scale"]["gemm"].get<double>(), 1.0);
  EXPECT_EQ(source("a100-80gb"), "fitted");  // a100-40gb's entry: the spec's kernels_as (same die and clocks)
  const auto a100 = test::run_cli(
      {"estimate", "--model", "llama3.1-8b", "--gpu", "a100-80gb", "--seq", "4096", "--tp", "8", "--gpus", "8"});
  EXPECT_NE(a100.out.find("fitted for a100-40gb, which a100-80gb computes as"), std::string::npos) << a100.out;
  const auto text = test::run_cli(
      {"estimate", "--model", "llama3.1-8b", "--gpu", "mi300x", "--seq", "4096", "--tp", "8", "--gpus", "8"});
  EXPECT_NE(text.out.find("fitted for h100-94gb, scaled for mi300x by its published kernel benchmarks (GEMM x0.69, "
                          "attention x0.76"),
            std::string::npos)
      << text.out;
  const auto fsdp = test::run_cli({"estimate", "--model", "llama3.1-8b", "--gpu", "mi300x", "--framework",
                                   "pytorch-fsdp", "--seq", "4096", "--tp", "8", "--gpus", "8"});
  EXPECT_NE(fsdp.out.find("fitted for h100-94gb under the megatron coefficients (the device's, shared), scaled for "
                          "mi300x"),
            std::string::npos)
      << fsdp.out;
  // Nothing fitted anywhere for the GPU: its kernel curves where it has them, else the datasheet defaults, said.
  EXPECT_EQ(PerfContext(PerfCoefficients{}, test::library().cluster("dgx-h100")).efficiency_source, "device curves");
  EXPECT_EQ(PerfContext(PerfCoefficients{}, test::library().cluster("dgx-a100-80gb")).efficiency_source, "datasheet");
  // A calibration profile measured on the user's cluster comes before the device's published curves.
  PerfCoefficients measured;
  measured.generic_source = "measured";
  EXPECT_EQ(PerfContext(measured, test::library().cluster("dgx-h100")).efficiency_source, "measured");
}

// Pytorch-fsdp's link efficiencies fitted on LUMI (its RCCL over Slingshot: 4.4% of the NIC) stay on
// LUMI; an H100 cluster gets the generic ones, and the estimate says which.
TEST(CoefficientsSource, LinkEfficienciesFittedOnOneClusterStayThere) {
  const SpecLibrary lib = test::library();
  const PerfCoefficients fsdp = default_perf_coefficients(lib, "pytorch-fsdp");
  const ClusterSpec lumi = lib.cluster("lumi-mi250x"), h100 = lib.cluster("dgx-h100");
  const PerfContext on_lumi(fsdp, lumi), on_h100(fsdp, h100);
  ASSERT_EQ(fsdp.clusters.size(), 1u);
  EXPECT_EQ(on_lumi.link_source, "fitted on lumi-mi250x");
  EXPECT_DOUBLE_EQ(on_lumi.inter.bytes_per_s, lumi.inter_node.bytes_per_s * fsdp.clusters[0].inter);
  EXPECT_EQ(on_h100.link_source, "generic");
  EXPECT_DOUBLE_EQ(on_h100.inter.bytes_per_s, h100.inter_node.bytes_per_s * fsdp.inter_efficiency);
  const auto r = test::run_cli({"estimate", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "16",
                                "--framework", "pytorch-fsdp", "--seq", "8192", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["perf"]["link_coefficients_source"], "generic");
  const PerfCoefficients back = perf_coefficients_from_json(perf_coefficients_to_json(fsdp), "round trip");
  ASSERT_EQ(back.clusters.size(), 1u);
  EXPECT_EQ(back.clusters[0].cluster, "lumi-mi250x");
  EXPECT_DOUBLE_EQ(back.clusters[0].inter, fsdp.clusters[0].inter);
  // The overlap of FSDP's collectives with the passes too: LUMI's fitted share there, FSDP's design (all of the pass)
  // elsewhere.
  EXPECT_DOUBLE_EQ(on_lumi.dp_overlap, fsdp.clusters[0].dp_overlap);
  EXPECT_LT(on_lumi.dp_overlap, 0.5);
  EXPECT_DOUBLE_EQ(on_h100.dp_overlap, 1.0);
  EXPECT_DOUBLE_EQ(back.clusters[0].dp_overlap, fsdp.clusters[0].dp_overlap);
}

// The same for megatron's intra-node link and CP ring: the efficiencies and overlap fitted on the 4D paper's clusters
// (entries that name only them) stay there; the inter-node link there and every link elsewhere are the generic ones:
// the intra-node link's what nccl-tests measure on NVSwitch (kMeasuredIntraNodeEfficiency), the CP ring's the
// measured NIC default and Transformer Engine's overlap (PerfCoefficients::cp_inter_efficiency, cp_overlap).
TEST(CoefficientsSource, LinksFittedOnTheFourDClustersStayThere) {
  const SpecLibrary lib = test::library();
  const PerfCoefficients megatron = default_perf_coefficients(lib, "megatron");
  const PerfContext on_4d(megatron, lib.cluster("h100-94gb-x4")), on_dgx(megatron, lib.cluster("dgx-h100"));
  ASSERT_EQ(megatron.clusters.size(), 2u);
  EXPECT_LT(on_4d.cp_inter_efficiency, 0.5);
  EXPECT_LT(on_4d.cp_overlap, 0.5);  // the 4D paper's cross-node CP at 16K is not hidden there
  EXPECT_DOUBLE_EQ(on_dgx.cp_overlap, 1.0);
  EXPECT_GT(on_4d.intra_efficiency, on_dgx.intra_efficiency);  // the fit's, above what nccl-tests measure
  EXPECT_DOUBLE_EQ(on_dgx.intra_efficiency, kMeasuredIntraNodeEfficiency);
  EXPECT_DOUBLE_EQ(on_4d.inter_efficiency, megatron.inter_efficiency);  // not named by the entry: generic
  EXPECT_EQ(on_4d.link_source, "fitted on h100-94gb-x4");
  EXPECT_DOUBLE_EQ(on_dgx.cp_inter_efficiency, PerfCoefficients{}.cp_inter_efficiency);
  EXPECT_EQ(on_dgx.link_source, "generic");
  const PerfCoefficients back = perf_coefficients_from_json(perf_coefficients_to_json(megatron), "round trip");
  ASSERT_EQ(back.clusters.size(), 2u);
  EXPECT_DOUBLE_EQ(back.clusters[1].intra, megatron.clusters[1].intra);
  EXPECT_EQ(back.clusters[1].inter, 0.0);
  EXPECT_DOUBLE_EQ(back.clusters[1].cp_inter, megatron.clusters[1].cp_inter);
  EXPECT_DOUBLE_EQ(back.clusters[1].cp_overlap, megatron.clusters[1].cp_overlap);
}

}  // namespace
}  // namespace headroom
