// The `headroom` command line, callable in-process (tests) or from main(). Returns the exit code:
// 0 success, 2 bad input (one line on `err`), 1 an internal failure.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace headroom::cli {

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace headroom::cli
