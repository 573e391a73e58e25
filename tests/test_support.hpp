// Shared by the test executables: the shipped specs, read from the source tree's data/, and the command line
// run in-process.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom::test {

inline SpecLibrary library() { return SpecLibrary(HEADROOM_TEST_DATA_DIR); }

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace headroom::test
