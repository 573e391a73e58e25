// Units and the one conversion the formulas share.
#pragma once

#include <cstdint>

namespace headroom {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The largest byte count headroom reports: JSON carries bytes as 64-bit integers, and a sum of a few counts of at
// most this stays below 2^63. 2^62 bytes (4 EiB) is millions of times the memory of any GPU or node.
inline constexpr double kMaxByteCount = 4611686018427387904.0;  // 2^62

namespace units {
// An integer count (layers, heads, tokens, GPUs) as a double inside a formula; `using units::d;` in a source file.
[[nodiscard]] constexpr double d(std::int64_t v) { return static_cast<double>(v); }
}  // namespace units

}  // namespace headroom
