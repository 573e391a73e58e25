// The one table of collective bus-bandwidth factors, shared by the estimator, the simulator and the
// calibration reports . Source: nccl-tests doc/PERFORMANCE.md, "Bus bandwidth": busbw =
// algbw × factor, with algbw = bytes / time and `bytes` the size nccl-tests prints (the whole buffer:
// all-gather's output, reduce-scatter's input).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace headroom {

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv };

struct CollectiveInfo {
  Collective op;
  std::string_view name;        // headroom's name, also the JSON key
  std::string_view nccl_tests;  // the nccl-tests binary that measures it
};

inline constexpr std::array<CollectiveInfo, 5> kCollectives{{
    {Collective::all_reduce, "all_reduce", "all_reduce_perf"},
    {Collective::all_gather, "all_gather", "all_gather_perf"},
    {Collective::reduce_scatter, "reduce_scatter", "reduce_scatter_perf"},
    {Collective::all_to_all, "all_to_all", "alltoall_perf"},
    {Collective::send_recv, "send_recv", "sendrecv_perf"},
}};

// nccl-tests' bus-bandwidth factor for n ranks: all-reduce 2(n − 1)/n; all-gather, reduce-scatter and
// all-to-all (n − 1)/n; send/recv 1.
[[nodiscard]] constexpr double bus_bandwidth_factor(Collective op, std::int64_t n) {
  const double r = static_cast<double>(n);
  switch (op) {
    case Collective::all_reduce: return 2.0 * (r - 1.0) / r;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return (r - 1.0) / r;
    case Collective::send_recv: return 1.0;
  }
  return 1.0;
}

[[nodiscard]] constexpr std::string_view to_string(Collective op) {
  for (const auto& c : kCollectives)
    if (c.op == op) return c.name;
  return "?";
}

// By headroom name or nccl-tests binary name ("all_reduce", "all_reduce_perf", "alltoall").
[[nodiscard]] constexpr std::optional<Collective> collective_from_name(std::string_view s) {
  for (const auto& c : kCollectives) {
    if (s == c.name || s == c.nccl_tests) return c.op;
    if (s.size() + 5 == c.nccl_tests.size() && c.nccl_tests.substr(0, s.size()) == s) return c.op;
  }
  return std::nullopt;
}

}  // namespace headroom
