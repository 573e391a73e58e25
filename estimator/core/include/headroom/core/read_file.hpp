// Every file headroom reads (specs, Hugging Face configs, profiles, performance coefficients, runs tables, training
// logs, profiler traces, nccl-tests logs) is read through here: whole, but never more than a bound, so that a device
// (/dev/zero, /dev/urandom) or an endless pipe is refused instead of read until memory runs out.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace headroom {

// The most bytes headroom reads from one file: 256 MiB, far above the largest input it takes (a Megatron-LM log of a
// long run is tens of MB, a runs table of thousands of runs a few hundred kB).
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{256} << 20;

// The bytes of `path`. `name` is how an Error names the file ("--from-runs runs.csv"; empty: the path). Throws Error
// for a file that cannot be opened, a directory, and anything longer than `limit` bytes: a regular file by its size,
// before reading; a device or pipe once limit + 1 bytes have come; a named pipe no process writes to, at once.
[[nodiscard]] std::string read_file_bounded(const std::filesystem::path& path, std::string_view name = {},
                                            std::size_t limit = kMaxInputFileBytes);

}  // namespace headroom
