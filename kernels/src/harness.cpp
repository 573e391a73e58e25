#include "headroom/kernels/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "headroom/core/error.hpp"

namespace headroom::kernels {

const KernelEntry& find_kernel(const Backend& b, KernelKind kind) {
  for (const auto& e : b.kernels())
    if (e.kind == kind) return e;
  throw Error("backend " + std::string(b.name()) + " has no " + std::string(to_string(kind)) + " kernel");
}

Measurement measure(Backend& b, const Case& c, const TimingOptions& t) {
  const KernelEntry& entry = find_kernel(b, kind_of(c));
  const auto kernel = entry.make(b, c);
  kernel->setup();
  Measurement m;
  m.c = c;
  m.kernel = std::string(entry.name);
  m.check = kernel->check();
  if (!m.check.passed()) {
    char buf[200];
    std::snprintf(buf, sizeof buf, ": %s %.3g exceeds the tolerance %.3g", m.check.measure.c_str(), m.check.error,
                  m.check.tolerance);
    throw Error(std::string(entry.name) + " failed its check against the CPU reference on " + label(c) + buf);
  }
  for (int i = 0; i < t.warmup; ++i) kernel->run();
  b.sync();
  // The fastest of three probe iterations sizes the batches: one probe preempted on a busy machine would leave
  // batches of a single iteration, each as slow as that probe.
  double probe = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    b.timer_start();
    kernel->run();
    probe = std::min(probe, b.timer_stop());
  }
  probe = std::max(probe, 1e-9);
  const int iters = std::clamp(static_cast<int>(std::ceil(t.min_batch_s / probe)), 1, t.max_iterations);
  m.seconds = std::numeric_limits<double>::infinity();
  for (int r = 0; r < std::max(1, t.repeats); ++r) {
    b.timer_start();
    for (int i = 0; i < iters; ++i) kernel->run();
    m.seconds = std::min(m.seconds, b.timer_stop() / iters);
  }
  m.flops = kernel->flops();
  m.bytes = kernel->bytes();
  return m;
}

}  // namespace headroom::kernels
