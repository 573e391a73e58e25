// Writing a calibration profile (estimator/profile.hpp: what one is, how it is read and applied): the fits made from
// the raw measurements, and the atomic write.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headroom/calibration/fit.hpp"
#include "headroom/estimator/profile.hpp"

namespace headroom::calibrate {

// Writes `path` atomically (write_file_atomically, core/atomic_file.hpp: a temporary file beside it, then rename).
void write_json_atomically(const std::filesystem::path& path, const nlohmann::json& doc);

// The fits from the raw measurements (GEMM, attention per head dim and mask, collectives per op, group size
// and level); each must reach `min_r2` or an Error names the fit. Collective fits from nccl-tests are kept
// when the raw data hold no collectives.
void fit_profile(Profile& p, int gpus_per_node);

// UTC now as 2025-01-31T12:00:00Z.
[[nodiscard]] std::string utc_now();

}  // namespace headroom::calibrate
