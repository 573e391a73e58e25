// A device's kernel curves: attention by backend and head dimension, read from a kernel-curves document and priced at
// the model's head dimension.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../test_support.hpp"
#include "headroom/core/error.hpp"
#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/kernel_curves.hpp"
#include "headroom/estimator/perf_coefficients.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {
namespace {

constexpr double kPeak = 989.4e12;

// Causal attention rows of one backend and head dimension whose forward+backward runs at `tflops` at every sequence.
nlohmann::json attention_rows(const char* backend, int head_dim, double tflops) {
  nlohmann::json rows = nlohmann::json::array();
  for (const int seq : {1024, 4096, 16384})
    rows.push_back({{"backend", backend}, {"seq", seq}, {"head_dim", head_dim}, {"fwd_bwd_tflops", tflops}});
  return rows;
}

nlohmann::json curves(nlohmann::json attention) {
  return {{"format", "headroom-kernel-curves"},
          {"kind", "measured"},
          {"gemm", {{{"m", 4096}, {"n", 4096}, {"k", 4096}, {"dtype", "bf16"}, {"tflops", 700.0}}}},
          {"attention", std::move(attention)}};
}

TEST(KernelCurves, AttentionHasACurvePerBackendAndHeadDimension) {
  nlohmann::json rows = attention_rows("flash", 64, 300.0);
  for (const auto& r : attention_rows("flash", 128, 330.0)) rows.push_back(r);
  for (const auto& r : attention_rows("cudnn", 128, 550.0)) rows.push_back(r);
  const DeviceKernels k = device_kernels_from_json(curves(rows), kPeak, 0, "test");
  ASSERT_EQ(k.attention.size(), 3u);
  // A flat curve: the fit's plateau is the rows' fraction, its half-point near the bottom of its grid.
  const auto at = [&](const char* backend, double head_dim) {
    const AttentionCurve* c = k.attention_curve(backend, head_dim);
    return c == nullptr ? 0.0 : c->efficiency;
  };
  EXPECT_NEAR(at("flash2", 64), 300e12 / kPeak, 1e-3);
  EXPECT_NEAR(at("flash2", 128), 330e12 / kPeak, 1e-3);
  EXPECT_NEAR(at("flash2", 90), 300e12 / kPeak, 1e-3);   // nearer 64 than 128 in log2
  EXPECT_NEAR(at("flash2", 256), 330e12 / kPeak, 1e-3);  // the largest measured
  EXPECT_NEAR(at("cudnn", 64), 550e12 / kPeak, 1e-3);    // cuDNN's only head dimension
  EXPECT_EQ(k.attention_curve("cudnn", 128), k.attention_curve("cudnn", 64));
}

TEST(KernelCurves, AttentionRowsNeedAHeadDimensionAndTwoSequences) {
  nlohmann::json no_head_dim = attention_rows("cudnn", 128, 500.0);
  for (auto& r : no_head_dim) r.erase("head_dim");
  EXPECT_THROW((void)device_kernels_from_json(curves(no_head_dim), kPeak, 0, "test"), Error);
  nlohmann::json one = attention_rows("cudnn", 128, 500.0);
  one.push_back({{"backend", "cudnn"}, {"seq", 2048}, {"head_dim", 64}, {"fwd_bwd_tflops", 400.0}});
  try {
    (void)device_kernels_from_json(curves(one), kPeak, 0, "test");
    ADD_FAILURE() << "one row at head_dim 64 was fitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cudnn attention at head_dim 64 has one row"), std::string::npos) << e.what();
  }
}

// A GPU spec's curves file is built once per process for each content: a file rewritten in place (here within the
// same millisecond, the same size) is built again.
TEST(KernelCurves, ACurvesFileIsReadAgainWhenItChanges) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("headroom_kernel_curves_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto write = [&](const fs::path& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); };
  nlohmann::json gpu = read_json_file(fs::path(HEADROOM_TEST_DATA_DIR) / "gpus" / "h200.json");
  gpu["kernel_curves"] = (dir / "curves.json").string();
  write(dir / "gpu.json", gpu);
  const SpecLibrary lib = test::library();
  const auto flash_at_128 = [&] {
    return lib.gpu((dir / "gpu.json").string()).kernels.attention_curve("flash2", 128)->efficiency;
  };
  write(dir / "curves.json", curves(attention_rows("flash", 128, 300.0)));
  EXPECT_NEAR(flash_at_128(), 300e12 / kPeak, 1e-3);
  EXPECT_NEAR(flash_at_128(), 300e12 / kPeak, 1e-3);  // the same content: the curves built the first time
  write(dir / "curves.json", curves(attention_rows("flash", 128, 450.0)));
  EXPECT_NEAR(flash_at_128(), 450e12 / kPeak, 1e-3);
  fs::remove_all(dir);
}

// The H200's measured curves (data/kernels/h200-measured.json) price a model's attention at its own head dimension:
// gpt-oss (64) at the 64 curve, Llama (128) at the 128 curve, each the framework's backend.
TEST(KernelCurves, AModelsAttentionIsPricedAtItsHeadDimension) {
  const SpecLibrary lib = test::library();
  const ClusterSpec h200 = lib.cluster("dgx-h200");
  const PerfCoefficients megatron = default_perf_coefficients(lib, "megatron");
  const PerfContext p(megatron, h200);
  ASSERT_TRUE(p.device_curves);
  const Layout l = build_layout(lib.model("llama3.1-8b"), lib.framework("megatron"), [] {
    LayoutRequest r;
    r.gpus = 8, r.seq = 8192, r.gbs = 8;
    return r;
  }());
  for (const double dim : {64.0, 128.0, 256.0}) {
    const AttentionCurve* c = h200.gpu.kernels.attention_curve(megatron.attention_backend, dim);
    ASSERT_NE(c, nullptr) << dim;
    EXPECT_NEAR(attention_efficiency(p, l, dim, 8192.0), c->efficiency * 8192.0 / (8192.0 + c->half_tokens), 1e-12)
        << dim;
  }
  EXPECT_NE(attention_efficiency(p, l, 64.0, 8192.0), attention_efficiency(p, l, 128.0, 8192.0));
}

}  // namespace
}  // namespace headroom
