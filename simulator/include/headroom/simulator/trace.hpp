// Chrome trace (the JSON Trace Event Format that Perfetto and chrome://tracing open): one process per
// pipeline stage, threads for compute, TP/CP collectives, PP sends and DP collectives, complete ("X")
// events in microseconds, and a counter ("C") of activation memory per stage.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

#include "headroom/simulator/step.hpp"

namespace headroom::sim {

[[nodiscard]] nlohmann::json chrome_trace(const StepResult& r);
// Writes the trace to `path` atomically: a temporary file beside it, then a rename. Throws Error.
void write_chrome_trace(const StepResult& r, const std::filesystem::path& path);

}  // namespace headroom::sim
