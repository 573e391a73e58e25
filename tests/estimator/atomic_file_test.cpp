// write_file_atomically: the target is replaced whole or not at all, and temporaries of killed writers go.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "headroom/core/atomic_file.hpp"
#include "headroom/core/error.hpp"
#include "../watchdog.hpp"

namespace headroom {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path scratch() {
  fs::path d = fs::temp_directory_path() / ("headroom_atomic_file_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The pid of a process that has exited and been reaped.
long dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(AtomicFile, ReplacesTheTargetAndLeavesNoTemporary) {
  const fs::path dir = scratch(), target = dir / "out.json";
  write_file_atomically(target, "first");
  write_file_atomically(target, "second\n");
  EXPECT_EQ(slurp(target), "second\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
  fs::remove_all(dir);
}

TEST(AtomicFile, AFailedWriteLeavesTheTargetAsItWas) {
  const fs::path dir = scratch(), target = dir / "out.json";
  write_file_atomically(target, "kept");
  fs::create_directories(dir / "sub");
  EXPECT_THROW(write_file_atomically(dir / "sub", "x"), Error);  // a directory cannot be replaced by a file
  EXPECT_THROW(write_file_atomically(dir / "missing" / "out.json", "x"), Error);
  EXPECT_EQ(slurp(target), "kept");
  EXPECT_FALSE(fs::exists(temporary_path(dir / "sub", ::getpid())));
  fs::remove_all(dir);
}

TEST(AtomicFile, TemporariesOfDeadWritersAreRemovedLiveOnesKept) {
  const fs::path dir = scratch(), target = dir / "out.json";
  const fs::path dead = temporary_path(target, dead_pid()), live = temporary_path(target, ::getppid());
  const fs::path other = temporary_path(dir / "other.json", dead_pid());
  for (const auto& p : {dead, live, other}) std::ofstream(p) << "torn";
  std::ofstream(dir / "out.json.tmp.notapid") << "x";
  EXPECT_EQ(remove_stale_temporaries(target), 1);
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));   // its writer may still be writing
  EXPECT_TRUE(fs::exists(other));  // another target's
  EXPECT_TRUE(fs::exists(dir / "out.json.tmp.notapid"));
  std::ofstream(dead) << "torn";
  write_file_atomically(target, "new");  // every write cleans up after killed predecessors
  EXPECT_FALSE(fs::exists(dead));
  fs::remove_all(dir);
}

// Run as root with --out /dev/null, a rename replaced the system's /dev/null with a regular file.
// A character device (made here, when root may) and a FIFO are written into and stay what they were.
TEST(AtomicFile, DevicesAndPipesAreWrittenIntoNeverReplaced) {
  const fs::path dir = scratch();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(check_output_path(fifo, "--trace"), OutputKind::stream);
  std::string read_back;
  std::thread reader([&] { read_back = slurp(fifo); });
  write_file_atomically(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(read_back, "through the pipe");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_FALSE(fs::exists(temporary_path(fifo, ::getpid())));
  const fs::path null = dir / "null";
  if (::geteuid() != 0 || ::mknod(null.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) {
    fs::remove_all(dir);
    GTEST_SKIP() << "not root, or mknod refused here: the character-device case needs a device node of its own";
  }
  write_file_atomically(null, "discarded");
  ASSERT_EQ(::stat(null.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "the device node was replaced";
  fs::remove_all(dir);
}

// A named pipe that no process reads would block open(2) forever: the write is refused, naming the pipe, instead.
TEST(AtomicFile, APipeNobodyReadsIsRefusedNotWaitedOnForever) {
  const fs::path dir = scratch();
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string message = test::within(30, "a write into a pipe nobody reads", [&fifo] {
    try {
      write_file_atomically(fifo, "nobody reads this");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(written)");
  });
  EXPECT_NE(message.find(fifo.string() + ": no process has the named pipe open for reading"), std::string::npos)
      << message;
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  fs::remove_all(dir);
}

TEST(AtomicFile, DirectoriesMissingDirectoriesAndDanglingLinksAreRefusedUpFront) {
  const fs::path dir = scratch();
  auto message = [](const fs::path& p) {
    try {
      (void)check_output_path(p, "--out");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message(dir), "--out " + dir.string() + " is a directory: give a file path");
  EXPECT_NE(message(dir / "no" / "x.json").find("does not exist"), std::string::npos);
  fs::create_symlink(dir / "nowhere", dir / "dangling");
  EXPECT_NE(message(dir / "dangling").find("symbolic link to nothing"), std::string::npos);
  EXPECT_EQ(message(dir / "new.json"), "(accepted)");
  // A link to a regular file: the file is replaced, the link stays a link.
  write_file_atomically(dir / "real.json", "old");
  fs::create_symlink(dir / "real.json", dir / "link.json");
  write_file_atomically(dir / "link.json", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.json"));
  EXPECT_EQ(slurp(dir / "real.json"), "new");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom
