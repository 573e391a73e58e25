// A training framework's defaults (data/frameworks/*.json): what `--framework megatron` means.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "headroom/estimator/layout.hpp"
#include "headroom/estimator/residual.hpp"

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
  ResidualModel residual;
};

[[nodiscard]] FrameworkProfile framework_from_json(const nlohmann::json& j);

// A layout carrying the framework's defaults (SP, attention, schedule, recompute, precision, sharding);
// the parallel sizes, batch and sequence are left at 1 for the caller to set.
[[nodiscard]] Layout default_layout(const FrameworkProfile& f);
[[nodiscard]] Recompute parse_recompute(std::string_view text);  // throws Error listing the valid names
[[nodiscard]] Schedule parse_schedule(std::string_view text);
[[nodiscard]] Shard parse_shard(std::string_view text);

}  // namespace headroom
