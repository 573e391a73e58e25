// Every file headroom writes (calibration profiles and their FILE.partial, simulator traces) goes through here:
// the bytes go to a temporary file beside the target, which is then renamed over it, so that a reader,
// or a kill at any moment, finds either the old file or the new one, never a torn one.
#pragma once

#include <filesystem>
#include <string_view>

namespace headroom {

// What writing to `path` means, decided before any work (a calibration checks --out before it measures):
// a regular file or a new name in an existing directory is replaced atomically; a character device, FIFO or
// socket (/dev/stdout, /dev/null, a pipe) is written into, never replaced; a symbolic link is followed to its
// target. A directory, a missing parent directory or a dangling link is an Error naming `flag` and the path.
enum class OutputKind { file, stream };
[[nodiscard]] OutputKind check_output_path(const std::filesystem::path& path, std::string_view flag);

// Writes `text` to `path` atomically through PATH.tmp.PID, then removes temporaries of `path` that writers
// killed on this host left behind (remove_stale_temporaries); a stream (check_output_path) is written into, a named
// pipe only once a process has it open for reading (an Error if none has within 2 s, instead of blocking forever).
// Never replaces anything that is not a regular file. Throws Error naming the path.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

// The temporary file write_file_atomically uses for `path` in process `pid`: PATH.tmp.PID.
[[nodiscard]] std::filesystem::path temporary_path(const std::filesystem::path& path, long pid);

// Removes PATH.tmp.PID files whose process no longer runs on this host (a writer killed mid-write); returns
// how many. Best effort: what cannot be removed stays.
int remove_stale_temporaries(const std::filesystem::path& path);

}  // namespace headroom
