#include "headroom/core/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX kill(), which <csignal> need not declare
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "headroom/core/error.hpp"

namespace headroom {
namespace fs = std::filesystem;

fs::path temporary_path(const fs::path& path, long pid) { return path.string() + ".tmp." + std::to_string(pid); }

OutputKind check_output_path(const fs::path& path, std::string_view flag) {
  const std::string named = (flag.empty() ? std::string() : std::string(flag) + " ") + path.string();
  if (path.empty()) throw Error(named + "is empty: give a file path");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {  // follows links: what a write would reach
    if (S_ISREG(st.st_mode)) return OutputKind::file;
    if (S_ISDIR(st.st_mode)) throw Error(named + " is a directory: give a file path");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) return OutputKind::stream;
    throw Error(named + " is neither a regular file nor a stream (device, pipe): not written");
  }
  if (errno != ENOENT) throw Error("cannot write " + named + ": " + std::strerror(errno));
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0) throw Error(named + " is a symbolic link to nothing: not followed");
  const fs::path dir = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(named + ": the directory " + dir.string() + " does not exist");
  return OutputKind::file;
}

namespace {

// How long a write into a named pipe waits for a process to open it for reading: a reader started beside the
// writer (a shell's `cat PIPE &`) has it open by then; with none, open(2) would block forever.
constexpr auto kPipeReaderWait = std::chrono::seconds(2);

// Opens a stream to write. A named pipe is opened without blocking, retried until a reader has it open or
// kPipeReaderWait has passed, then switched back to blocking writes (a full pipe waits for its reader).
int open_stream(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISFIFO(st.st_mode)) return ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  const auto deadline = std::chrono::steady_clock::now() + kPipeReaderWait;
  for (;;) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      if (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) return fd;
      const int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    if (errno != ENXIO) return -1;
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error("cannot write " + path.string() + ": no process has the named pipe open for reading (waited " +
                  std::to_string(kPipeReaderWait.count()) + " s)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A stream is written into as it is: no temporary, no rename (renaming over /dev/null would replace it).
void write_stream(const fs::path& path, std::string_view text) {
  const int fd = open_stream(path);
  if (fd < 0) throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      throw Error("cannot write " + path.string() + ": " + std::strerror(err));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

}  // namespace

void write_file_atomically(const fs::path& path, std::string_view text) {
  if (check_output_path(path, "") == OutputKind::stream) return write_stream(path, text);
  // A link is followed: the file it names is replaced, the link stays.
  std::error_code ec;
  const fs::path target = fs::is_symlink(path, ec) ? fs::canonical(path) : path;
  const fs::path tmp = temporary_path(target, static_cast<long>(::getpid()));
  // On failure: the temporary goes, the target stays as it was.
  const auto fail = [&](const std::string& what, int err) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw Error("cannot " + what + ": " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail("write " + tmp.string(), errno);
  const auto close_and_fail = [&](int err) {
    ::close(fd);
    fail("write " + tmp.string(), err);
  };
  for (std::size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) close_and_fail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
  // No fsync: a killed process cannot tear the file either way, and ext4 (data=ordered, auto_da_alloc) writes
  // a file renamed over another before the rename. fsync would cost ~6 ms a write here, a quarter of a --quick
  // calibration's time, since every case is checkpointed.
  if (::close(fd) != 0) fail("write " + tmp.string(), errno);
  if (::rename(tmp.c_str(), target.c_str()) != 0) fail("rename " + tmp.string() + " to " + target.string(), errno);
  remove_stale_temporaries(target);
}

int remove_stale_temporaries(const fs::path& path) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::string prefix = path.filename().string() + ".tmp.";
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    std::error_code rm;
    if (fs::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace headroom
