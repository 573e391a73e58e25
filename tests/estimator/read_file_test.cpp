// read_file_bounded: every file headroom reads is read whole up to a bound, and refused past it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

#include "headroom/core/error.hpp"
#include "headroom/core/read_file.hpp"
#include "../watchdog.hpp"

namespace headroom {
namespace {

namespace fs = std::filesystem;

std::string message(const fs::path& path, std::string_view name, std::size_t limit) {
  try {
    (void)read_file_bounded(path, name, limit);
  } catch (const Error& e) {
    return e.what();
  }
  return "(read)";
}

TEST(ReadFile, ReadsAFileWholeUpToTheLimit) {
  const fs::path dir = fs::temp_directory_path() / ("headroom_read_file_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "ten.txt", std::ios::binary) << "0123456789";
  EXPECT_EQ(read_file_bounded(dir / "ten.txt", "", 10), "0123456789");
  EXPECT_EQ(message(dir / "ten.txt", "--from-runs ten.txt", 9),
            "--from-runs ten.txt is larger than 9 bytes, the most headroom reads from one file");
  EXPECT_EQ(message(dir, "", 10), dir.string() + " is a directory: give a file");
  EXPECT_NE(message(dir / "missing.json", "", 10).find("cannot read " + (dir / "missing.json").string()),
            std::string::npos);
  fs::remove_all(dir);
}

// A device or pipe that never ends (/dev/zero, /dev/urandom) is refused once one byte past the limit has come,
// instead of read until memory runs out.
TEST(ReadFile, ADeviceThatNeverEndsIsRefusedAtTheLimit) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    if (!fs::exists(device)) continue;
    const std::string m = test::within(30, device, [device] { return message(device, "", 1 << 20); });
    EXPECT_EQ(m, std::string(device) + " is larger than 1 MiB, the most headroom reads from one file");
  }
}

// A named pipe no process writes to is refused at once: opening it for reading would wait for a writer for ever.
TEST(ReadFile, ANamedPipeNoOneWritesToIsRefusedAtOnce) {
  const fs::path fifo = fs::temp_directory_path() / ("headroom_read_fifo_" + std::to_string(::getpid()));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string m = test::within(30, "fifo", [&] { return message(fifo, "--profile fifo", 1 << 20); });
  EXPECT_EQ(m, "--profile fifo is a named pipe that no process is writing to");
  fs::remove(fifo);
}

}  // namespace
}  // namespace headroom
