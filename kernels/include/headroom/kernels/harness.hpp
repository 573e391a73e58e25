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

// The backend's kernel for the case's kind; Error when it has none.
[[nodiscard]] const KernelEntry& find_kernel(const Backend& b, KernelKind kind);

// Checks, warms up and times one case. Throws Error when the check fails (numbers are never trusted unchecked).
[[nodiscard]] Measurement measure(Backend& b, const Case& c, const TimingOptions& t);

}  // namespace headroom::kernels
