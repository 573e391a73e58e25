// A training framework's defaults (data/frameworks/*.json): what `--framework megatron` means.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"
#include "headroom/estimator/uncertainty.hpp"

namespace headroom {

struct FrameworkProfile {
  std::string name;
  bool sequence_parallel = true;
  bool flash_attention = true;
  Schedule schedule = Schedule::one_f_one_b;
  Recompute recompute = Recompute::none;
  Precision precision;
  StateSharding sharding;
  std::int64_t fsdp_unit_buffers = 0;  // PyTorch FSDP: decoder layers held unsharded at a time (optional key)
  // What the framework can launch (optional keys; empty = not stated, anything goes): `rank` proposes only
  // these. Sharding codes P,G,OS as in "NNG"; recompute and schedule names as in the "recompute"/"schedule" keys
  // (no "interleaved" = no virtual pipeline stages).
  std::vector<StateSharding> supported_shardings;
  std::vector<Recompute> supported_recompute;
  std::vector<Schedule> supported_schedules;
  // Pipeline stages of unequal layer counts (Megatron-LM's --decoder-first/last-pipeline-num-layers); optional
  // key, absent = no: `rank` then keeps to p | L.
  bool uneven_pipeline_stages = false;
  ResidualModel residual;
  ErrorBand memory_band;  // held-out band of the predicted peak ("residual.uncertainty"; unknown when absent)
};

[[nodiscard]] FrameworkProfile framework_from_json(const nlohmann::json& j);

// A layout carrying the framework's defaults (SP, attention, schedule, recompute, precision, sharding);
// the parallel sizes, batch and sequence are left at 1 for the caller to set.
[[nodiscard]] Layout default_layout(const FrameworkProfile& f);
[[nodiscard]] Recompute parse_recompute(std::string_view text);  // throws Error listing the valid names
[[nodiscard]] Schedule parse_schedule(std::string_view text);
[[nodiscard]] Shard parse_shard(std::string_view text);
// "NNG" → {N, N, G} (P, G, OS); throws Error naming the code.
[[nodiscard]] StateSharding parse_sharding_code(std::string_view code);

}  // namespace headroom
