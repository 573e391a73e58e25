// headroom_kernels_selftest: every kernel of a backend (default: this build's GPU backend) on small cases,
// checked against the CPU reference, then timed once. Exit 0: all passed; 1: a check failed; 77: no device
// (CTest reports the test as skipped).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "headroom/kernels/harness.hpp"

int main(int argc, char** argv) {
  using namespace headroom::kernels;
  const std::string vendor = argc > 1 ? argv[1] : std::string(gpu_backend_built());
  std::unique_ptr<Backend> b;
  try {
    b = vendor.empty() || vendor == "cpu" ? make_cpu_backend(2) : make_gpu_backend(vendor, 1);
  } catch (const std::exception& e) {
    std::printf("SKIP: no usable %s device: %s\n", vendor.c_str(), e.what());
    return 77;
  }
  std::vector<Case> cases = {GemmCase{128, 256, 64}, GemmCase{1000, 1000, 1000}, CopyCase{1 << 24}};
  for (std::int64_t d : {64, 128})
    for (bool causal : {true, false})
      for (bool bwd : {false, true}) cases.emplace_back(AttentionCase{300, d, 2, causal, bwd});
  for (const auto& info : headroom::kCollectives)
    for (int n = 2; n <= b->ranks(); n *= 2) cases.emplace_back(CollectiveCase{info.op, 1 << 20, n});
  TimingOptions t;
  t.repeats = 1;
  int failed = 0;
  for (const auto& c : cases) {
    try {
      const Measurement m = measure(*b, c, t);
      std::printf("ok   %-40s %-22s error %.2e (tol %.2e) %10.2f us %8.3f TFLOP/s\n", label(c).c_str(),
                  m.kernel.c_str(), m.check.error, m.check.tolerance, m.seconds * 1e6, m.flops_per_s() / 1e12);
    } catch (const std::exception& e) {
      std::printf("FAIL %-40s %s\n", label(c).c_str(), e.what());
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
