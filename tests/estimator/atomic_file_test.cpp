// write_file_atomically: the target is replaced whole or not at all, and temporaries of killed writers go.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "headroom/estimator/atomic_file.hpp"
#include "headroom/estimator/error.hpp"

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
  EXPECT_TRUE(fs::exists(live));    // its writer may still be writing
  EXPECT_TRUE(fs::exists(other));   // another target's
  EXPECT_TRUE(fs::exists(dir / "out.json.tmp.notapid"));
  std::ofstream(dead) << "torn";
  write_file_atomically(target, "new");  // every write cleans up after killed predecessors
  EXPECT_FALSE(fs::exists(dead));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace headroom
