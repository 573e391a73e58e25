// Shared by the fuzz targets. The contract each parser of outside input keeps: on any bytes it returns a valid
// value or throws headroom::Error (what the CLI turns into one line and exit code 2). Any other exception, a
// sanitizer report, an abort or a timeout is a bug; so is a value that breaks the invariants the parser
// promises (checked with `require`).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "headroom/core/error.hpp"

namespace headroom::fuzz {

// The source tree's data/, compiled in, so that a spec naming a shipped GPU resolves as it does for users.
inline std::filesystem::path data_dir() { return HEADROOM_FUZZ_DATA_DIR; }

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz contract broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

inline void require(bool ok, const char* what) {
  if (!ok) fail(std::string("invariant: ") + what);
}

inline bool positive(double x) { return std::isfinite(x) && x > 0; }
inline bool non_negative(double x) { return std::isfinite(x) && x >= 0; }

// A config reader's input with the overrides its launcher gives: the lines after a line "#overrides", one override
// each, taken off `text`.
inline std::vector<std::string> take_overrides(std::string& text) {
  std::vector<std::string> overrides;
  if (const auto at = text.find("\n#overrides\n"); at != std::string::npos) {
    std::istringstream lines(text.substr(at + 12));
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
    text.resize(at + 1);
  }
  return overrides;
}

// Runs `parse`; headroom::Error is the clean refusal of bad input, anything else escaping is a bug.
template <class F>
void value_or_error(F&& parse) {
  try {
    parse();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    fail(std::string("exception ") + typeid(e).name() + " escaped: " + e.what());
  }
}

// A directory of this process's own (in /dev/shm when there is one: the file APIs are fed through it on every
// input), removed when the fuzzer exits.
class ScratchDir {
 public:
  ScratchDir() {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    std::string tmpl = (base / "headroom-fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) fail("cannot create a scratch directory in " + base.string());
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& scratch_dir() {
  static const ScratchDir dir;
  return dir.path();
}

// Writes the input to `name` in the scratch directory and returns its path.
inline std::filesystem::path write_input(const char* name, const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) fail("cannot write " + path.string());
  return path;
}

}  // namespace headroom::fuzz
