// Shared by the test executables: the shipped specs, read from the source tree's data/ (cli_support.hpp adds
// the command line run in-process).
#pragma once

#include <functional>
#include <string>

#include "headroom/core/error.hpp"
#include "headroom/estimator/spec.hpp"

namespace headroom::test {

inline SpecLibrary library() { return SpecLibrary(HEADROOM_TEST_DATA_DIR); }

// The message of the Error `f` throws; "(no error)" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace headroom::test
