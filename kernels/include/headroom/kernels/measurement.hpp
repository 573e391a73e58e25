// What a microkernel measurement is, apart from running it: the cases (GEMM, attention, collective, copy),
// their stable labels, a check's outcome and the measurement record that calibration profiles store and fit.
// Plain data with no backend, so that fitting and reading profiles need none of the kernels.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "headroom/core/collectives.hpp"

namespace headroom::kernels {

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

}  // namespace headroom::kernels
