#include "headroom/simulator/schedules.hpp"

#include <algorithm>
#include <string>

#include "headroom/core/error.hpp"

namespace headroom::sim {

std::vector<PassOp> stage_schedule(Schedule s, std::int64_t stage, std::int64_t p, std::int64_t m, std::int64_t v) {
  std::vector<PassOp> ops;
  const auto i32 = [](std::int64_t x) { return static_cast<std::int32_t>(x); };
  if (s == Schedule::gpipe) {
    for (std::int64_t i = 0; i < m; ++i) ops.push_back({true, i32(i), 0});
    for (std::int64_t i = 0; i < m; ++i) ops.push_back({false, i32(i), 0});
    return ops;
  }
  // torch's ScheduleLoopedBFS (_calculate_single_rank_operations): every micro-batch's forward of chunk 0, then of
  // chunk 1, ...; then the backwards, the last chunk first and the micro-batches in reverse.
  if (s == Schedule::looped_bfs) {
    for (std::int64_t c = 0; c < v; ++c)
      for (std::int64_t i = 0; i < m; ++i) ops.push_back({true, i32(i), i32(c)});
    for (std::int64_t c = v - 1; c >= 0; --c)
      for (std::int64_t i = m - 1; i >= 0; --i) ops.push_back({false, i32(i), i32(c)});
    return ops;
  }
  if (s == Schedule::one_f_one_b || v <= 1) {
    const std::int64_t warm = std::min(p - stage - 1, m);
    for (std::int64_t i = 0; i < warm; ++i) ops.push_back({true, i32(i), 0});
    for (std::int64_t i = 0; i < m - warm; ++i) {
      ops.push_back({true, i32(warm + i), 0});
      ops.push_back({false, i32(i), 0});
    }
    for (std::int64_t i = m - warm; i < m; ++i) ops.push_back({false, i32(i), 0});
    return ops;
  }
  // Interleaved (Megatron-LM forward_backward_pipelining_with_interleaving): the k-th forward runs chunk
  // (k mod p·v) / p of micro-batch (k / p·v)·p + k mod p; backwards visit the chunks in reverse.
  if (m % p != 0)
    throw Error("interleaved schedule needs the micro-batch count " + std::to_string(m) + " to be a multiple of pp " +
                std::to_string(p));
  const std::int64_t total = m * v;
  const auto fwd = [&](std::int64_t k) { return PassOp{true, i32((k / (p * v)) * p + k % p), i32((k % (p * v)) / p)}; };
  const auto bwd = [&](std::int64_t k) {
    return PassOp{false, i32((k / (p * v)) * p + k % p), i32(v - 1 - (k % (p * v)) / p)};
  };
  const std::int64_t warm = std::min((p - stage - 1) * 2 + (v - 1) * p, total);
  for (std::int64_t k = 0; k < warm; ++k) ops.push_back(fwd(k));
  for (std::int64_t k = 0; k < total - warm; ++k) {
    ops.push_back(fwd(warm + k));
    ops.push_back(bwd(k));
  }
  for (std::int64_t k = total - warm; k < total; ++k) ops.push_back(bwd(k));
  return ops;
}

}  // namespace headroom::sim
