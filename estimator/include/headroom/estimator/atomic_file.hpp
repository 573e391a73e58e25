// Every file headroom writes (calibration profiles and their FILE.partial, simulator traces) goes through here:
// the bytes go to a temporary file beside the target, which is then renamed over it, so that a reader,
// or a kill at any moment, finds either the old file or the new one, never a torn one.
#pragma once

#include <filesystem>
#include <string_view>

namespace headroom {

// Writes `text` to `path` atomically through PATH.tmp.PID, then removes temporaries of `path` that writers
// killed on this host left behind (remove_stale_temporaries). Throws Error naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// The temporary file write_file_atomically uses for `path` in process `pid`: PATH.tmp.PID.
[[nodiscard]] std::filesystem::path temporary_path(const std::filesystem::path& path, long pid);

// Removes PATH.tmp.PID files whose process no longer runs on this host (a writer killed mid-write); returns
// how many. Best effort: what cannot be removed stays.
int remove_stale_temporaries(const std::filesystem::path& path);

}  // namespace headroom
