// Layout search: enumerate every valid layout of a job — t, c, p,
// virtual stages, DP, micro-batch, sharding strategy, recompute — drop those predicted not to fit, rank the
// rest by predicted step time, leaving out a layout a twin of the same shape dominates, and keep the Pareto front of
// memory vs speed. Closed forms only; the inner loop allocates nothing (fixed-capacity top-K and front, and the
// fitting layouts of one shape, reserved up front).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/estimator/framework.hpp"
#include "headroom/estimator/throughput.hpp"

namespace headroom {

// A bound on one layout field: "tp<=8", "pp=1", "mbs>=2", "cp<4", or an equality on a named choice:
// "recompute=none", "sharding=zero1" (any sharding.hpp name), "schedule=1f1b".
struct Constraint {
  enum class Field { tp, cp, pp, dp, vpp, mbs, recompute, sharding, schedule };
  enum class Op { eq, le, ge, lt, gt };
  Field field = Field::tp;
  Op op = Op::eq;
  std::int64_t value = 0;
  Recompute recompute = Recompute::none;
  StateSharding sharding;
  Schedule schedule = Schedule::one_f_one_b;
};
// Throws Error naming the text and the valid fields and operators.
[[nodiscard]] Constraint parse_constraint(std::string_view text);
[[nodiscard]] bool satisfies(const Layout& l, const Constraint& c);

struct SearchOptions {
  std::int64_t gpus = 0;
  std::int64_t seq = 0;
  std::int64_t gbs = 0;
  std::size_t top = 10;
  std::vector<Constraint> constraints;
  // Sharding strategies to try; empty = the 14 PaRO strategies that satisfy Principle 1 (DDP, ZeRO-1/2/3,
  // MiCS, ... all included).
  std::vector<StateSharding> shardings;
  std::vector<Recompute> recomputes{Recompute::none, Recompute::selective, Recompute::full, Recompute::op};
  std::vector<Schedule> schedules;                // pipeline schedules to try; empty = 1F1B, interleaved and GPipe
  std::vector<StateSharding> pipeline_shardings;  // of the shardings, those tried with p > 1; empty = all
  bool context_parallel = true;                   // c > 1 tried
  bool try_without_sp =
      true;  // with t > 1, also the other sequence parallelism (off, or on where the framework has it off)
  std::int64_t max_vpp = 0;  // virtual stages per GPU tried: divisors of L/p up to this; 0 = all
  // Where p does not divide L, also try layout.hpp's balanced_uneven_split (Megatron-LM's
  // --decoder-first/last-pipeline-num-layers); restrict_to_framework sets it from the framework profile.
  bool uneven_stages = true;
  double pareto_slowdown = 2.0;  // the front keeps points at most this many times the fastest step
  // `rank --risk pessimistic`: a layout fits only if the upper end of this held-out band of its peak does
  // (FrameworkProfile::memory_band); unknown = the prediction alone.
  ErrorBand peak_band;
  // Called with every layout enumerated (constraints met), before its memory is checked: the whole space the search
  // walks, for listings and for tests that check it against validate_layout.
  std::function<void(const Layout&)> on_enumerated;
  bool enumerate_only = false;  // walk the space for on_enumerated without pricing it (mtsl.hpp's longest layouts)
};

// Restricts `o` to what the framework can launch (FrameworkProfile's supported_* lists, where given):
// its sharding strategies unless a `sharding=` constraint asks for one explicitly (then all 14 PaRO
// strategies are enumerated and the constraint picks), its recompute modes and its pipeline schedules. Under
// Megatron-FSDP (`megatron_fsdp`) the strategies are its own (FrameworkProfile::megatron_fsdp_shardings).
void restrict_to_framework(SearchOptions& o, const FrameworkProfile& f, bool megatron_fsdp = false);

struct RankedLayout {
  Layout layout;
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double peak_bytes = 0;
  double capacity_bytes = 0;
  [[nodiscard]] double margin_bytes() const { return capacity_bytes - peak_bytes; }
};

struct SearchResult {
  std::int64_t evaluated = 0;        // layouts enumerated (valid splits × batch × sharding × recompute × schedule)
  std::int64_t memory_checked = 0;   // of those, peak memory computed (the rest pruned: memory grows with b)
  std::int64_t fitting = 0;          // predicted to fit; each had its step time computed
  std::int64_t dominated = 0;        // of those, left out of `best`: a twin of the same shape and micro-batch (other
                                     // SP, sharding, recompute or schedule) is no slower and needs no more memory
  std::vector<RankedLayout> best;    // fastest first, at most `top`, none dominated by a twin
  std::vector<RankedLayout> pareto;  // memory ascending, each faster than every layout using less memory, and at
                                     // most SearchOptions::pareto_slowdown times the fastest step
};

// `base` carries the framework's defaults (precision, SP, FlashAttention); its parallel sizes are ignored.
// Throws Error when gpus, seq or gbs is not positive.
[[nodiscard]] SearchResult rank_layouts(const ModelSpec& m, const ClusterSpec& c, const Layout& base,
                                        const ResidualModel& residual, const PerfCoefficients& coefficients,
                                        const SearchOptions& options);

}  // namespace headroom
