// One microkernel = one case of one operation on one backend: set up, checked against the CPU reference
// (reference.hpp) with a stated tolerance, then run for timing (nccl-tests' per-collective
// table of functions). Backends list their kernels in an explicit KernelEntry table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "headroom/kernels/measurement.hpp"

namespace headroom::kernels {

class Backend;

class Microkernel {
 public:
  virtual ~Microkernel() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  virtual void setup() = 0;                        // allocate and fill inputs (deterministic)
  [[nodiscard]] virtual Check check() = 0;         // run once and compare with the CPU reference
  virtual void run() = 0;                          // one iteration, issued on the backend (timed by the harness)
  [[nodiscard]] virtual double flops() const = 0;  // per run()
  [[nodiscard]] virtual double bytes() const = 0;  // per run(): memory traffic, or the collective's size
};

using KernelFactory = std::unique_ptr<Microkernel> (*)(Backend&, const Case&);

struct KernelEntry {
  std::string_view name;  // "gemm/eigen", "attention/blocked", "collective/threads", "copy/memcpy", ...
  KernelKind kind;
  KernelFactory make;
};

}  // namespace headroom::kernels
