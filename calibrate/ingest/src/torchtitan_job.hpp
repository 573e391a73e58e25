// torchtitan's settings priced as a layout, shared by the readers of its TOML job configs (torchtitan_log.cpp) and of
// its Python config registries (torchtitan_registry.cpp) (internal to ingest/).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "headroom/ingest/measured_runs.hpp"

namespace headroom::calibrate {

// The layout of torchtitan's settings `t` under the TOML job config's keys (section.key -> value as TOML writes it;
// a key not given takes torchtitan's default), every setting that is not priced an Error naming its key. The keys are
// checked by the caller: job.read and job.ignored are left empty.
[[nodiscard]] TorchtitanJob torchtitan_job(const std::map<std::string, std::string>& t, std::int64_t gpus,
                                           std::string_view where);

}  // namespace headroom::calibrate
