#include <iostream>
#include <sstream>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Buffer stdout so that a command refused for bad input prints nothing half-written.
  std::ostringstream out;
  const int code = headroom::cli::run(args, out, std::cerr);
  if (code != 2) std::cout << out.str() << std::flush;
  return code;
}
