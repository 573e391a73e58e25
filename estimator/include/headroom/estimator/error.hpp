// Typed errors of the estimator library. The library never prints; the CLI maps Error to exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace headroom {

// Bad user input (unknown name, invalid layout, malformed spec). The message is one line that names the
// bad value and says what would be valid.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace headroom
