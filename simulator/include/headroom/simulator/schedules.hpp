// The order in which one pipeline stage runs its forward and backward passes (Narayanan et al. 2021,
// Sec. 2.2; Megatron-LM's schedules.py): GPipe (all forwards, then all backwards), 1F1B (p − s − 1 warm-up
// forwards, then one forward / one backward, then the remaining backwards), interleaved 1F1B over v
// model chunks per stage, and torch's breadth-first ScheduleLoopedBFS over v chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "headroom/estimator/layout.hpp"

namespace headroom::sim {

struct PassOp {
  bool forward = true;
  std::int32_t microbatch = 0;
  std::int32_t chunk = 0;  // model chunk on this stage; virtual stage = chunk · p + stage
};

// The passes of `stage` out of p stages, for m micro-batches and v model chunks per stage. Throws Error when
// interleaving is asked for with m not a multiple of p (Megatron-LM's requirement).
[[nodiscard]] std::vector<PassOp> stage_schedule(Schedule s, std::int64_t stage, std::int64_t p, std::int64_t m,
                                                 std::int64_t v);

}  // namespace headroom::sim
