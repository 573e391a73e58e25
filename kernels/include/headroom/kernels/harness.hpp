// The shared harness (nccl-tests' common.cu role): build the backend's kernel for a case, check it against
// the CPU reference, warm up, time, and report rates.
#pragma once

#include <cstdint>

#include "headroom/kernels/backend.hpp"
#include "headroom/kernels/microkernel.hpp"

namespace headroom::kernels {

struct TimingOptions {
  int warmup = 2;
  int repeats = 3;            // timed batches; the fastest is kept (other processes only ever add time)
  double min_batch_s = 0.01;  // iterations per batch chosen so that one batch lasts at least this long
  int max_iterations = 1000;
};

struct Measurement {
  Case c;
  std::string kernel;  // KernelEntry::name
  double seconds = 0;  // per iteration, in the fastest batch
  double flops = 0;    // per iteration
  double bytes = 0;    // per iteration
  Check check;
  [[nodiscard]] double flops_per_s() const { return flops / seconds; }
};

// nccl-tests' definitions (doc/PERFORMANCE.md): algbw = bytes / time, busbw = algbw × factor (collectives.hpp).
struct BusBandwidth {
  double algbw = 0;  // bytes/s
  double busbw = 0;  // bytes/s
};
[[nodiscard]] BusBandwidth bus_bandwidth(Collective op, int ranks, double bytes, double seconds);

// The backend's kernel for the case's kind; Error when it has none.
[[nodiscard]] const KernelEntry& find_kernel(const Backend& b, KernelKind kind);

// Checks, warms up and times one case. Throws Error when the check fails (numbers are never trusted unchecked).
[[nodiscard]] Measurement measure(Backend& b, const Case& c, const TimingOptions& t);

}  // namespace headroom::kernels
