// Units and the one conversion the formulas share.
#pragma once

#include <cstdint>

namespace headroom {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

namespace units {
// An integer count (layers, heads, tokens, GPUs) as a double inside a formula; `using units::d;` in a source file.
[[nodiscard]] constexpr double d(std::int64_t v) { return static_cast<double>(v); }
}  // namespace units

}  // namespace headroom
