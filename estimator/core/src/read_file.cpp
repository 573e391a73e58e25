#include "headroom/core/read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "headroom/core/error.hpp"

namespace headroom {
namespace {

// A descriptor closed on every way out.
struct Descriptor {
  int fd;
  explicit Descriptor(int f) : fd(f) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

// "256 MiB" for a limit of whole MiB, else the bytes.
std::string limit_text(std::size_t limit) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  return limit % kMiB == 0 ? std::to_string(limit / kMiB) + " MiB" : std::to_string(limit) + " bytes";
}

}  // namespace

std::string read_file_bounded(const std::filesystem::path& path, std::string_view name, std::size_t limit) {
  const std::string named = name.empty() ? path.string() : std::string(name);
  const auto cannot_read = [&named](int err) { return Error("cannot read " + named + ": " + std::strerror(err)); };
  const auto too_large = [&] {
    return Error(named + " is larger than " + limit_text(limit) + ", the most headroom reads from one file");
  };
  // Without O_NONBLOCK, opening a named pipe waits for a writer, for ever if none comes; with it the open returns at
  // once, and the descriptor goes back to blocking reads (a pipe with a writer is read to its end).
  const Descriptor in{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (in.fd < 0) throw cannot_read(errno);
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) throw cannot_read(errno);
  if (S_ISDIR(st.st_mode)) throw Error(named + " is a directory: give a file");
  const int flags = ::fcntl(in.fd, F_GETFL);
  if (flags < 0 || ::fcntl(in.fd, F_SETFL, flags & ~O_NONBLOCK) != 0) throw cannot_read(errno);
  const bool fifo = S_ISFIFO(st.st_mode);
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<std::uintmax_t>(st.st_size) > limit) throw too_large();
  std::string text;
  if (regular) text.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    // limit + 1 bytes at most: one past the limit is enough to refuse a device or pipe that never ends.
    const ssize_t n = ::read(in.fd, buf, std::min(sizeof buf, limit + 1 - text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw cannot_read(errno);
    if (n == 0 && fifo && text.empty()) throw Error(named + " is a named pipe that no process is writing to");
    if (n == 0) return text;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > limit) throw too_large();
  }
}

}  // namespace headroom
