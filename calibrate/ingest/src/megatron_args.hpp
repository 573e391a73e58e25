// The run a Megatron-LM arguments map describes (megatron/training/arguments.py dest names and printed values): the
// layout and the model, as a log's arguments block or a launch command gives them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "headroom/ingest/measured_runs.hpp"

namespace headroom::calibrate {

// `lines`: the log's lines (its "padded vocab" line), empty for a command. Throws Error naming `where`.
[[nodiscard]] MeasuredRun megatron_run_from_arguments(const std::map<std::string, std::string>& args,
                                                      const std::vector<std::string_view>& lines,
                                                      std::string_view where);

}  // namespace headroom::calibrate
