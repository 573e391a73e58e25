// The command line run in-process, for the tests of commands (links headroom_cli).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "test_support.hpp"

namespace headroom::test {

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
