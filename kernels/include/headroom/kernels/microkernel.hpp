// One microkernel = one case of one operation on one backend: set up, checked against the CPU reference
// (reference.hpp) with a stated tolerance, then run for timing (STYLE.md lesson 6; nccl-tests' per-collective
// table of functions). Backends list their kernels in an explicit KernelEntry table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "headroom/estimator/collectives.hpp"

namespace headroom::kernels {

class Backend;

// C[m×n] = A[m×k]·B[k×n].
struct GemmCase {
  std::int64_t m = 0, n = 0, k = 0;
};
// Scaled dot-product attention over batch·heads independent (seq × head_dim) problems.
struct AttentionCase {
  std::int64_t seq = 0, head_dim = 0, heads = 1;
  bool causal = true;
  bool backward = false;  // time the backward pass (dQ, dK, dV) instead of the forward
};
// `bytes` as nccl-tests prints it (the whole buffer), over `ranks` devices.
struct CollectiveCase {
  Collective op = Collective::all_reduce;
  std::int64_t bytes = 0;
  int ranks = 2;
};
// Device-to-device copy of `bytes`.
struct CopyCase {
  std::int64_t bytes = 0;
};
using Case = std::variant<GemmCase, AttentionCase, CollectiveCase, CopyCase>;

enum class KernelKind { gemm, attention, collective, copy };
[[nodiscard]] KernelKind kind_of(const Case& c);
[[nodiscard]] std::string_view to_string(KernelKind k);
// A stable key such as "gemm m=256 n=512 k=1024" (resuming matches measurements by it).
[[nodiscard]] std::string label(const Case& c);

// A check's outcome: the error measure is defined by the kernel (normalised max error for GEMM/attention,
// exact mismatch count for collectives and copies) and must not exceed `tolerance`.
struct Check {
  double error = 0;
  double tolerance = 0;
  std::string measure;  // what `error` is, for messages
  [[nodiscard]] bool passed() const { return error <= tolerance; }
};

class Microkernel {
 public:
  virtual ~Microkernel() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  virtual void setup() = 0;            // allocate and fill inputs (deterministic)
  [[nodiscard]] virtual Check check() = 0;  // run once and compare with the CPU reference
  virtual void run() = 0;              // one iteration, issued on the backend (timed by the harness)
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
