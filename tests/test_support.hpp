// Shared by the test executables: the shipped specs, read from the source tree's data/ (cli_support.hpp adds
// the command line run in-process).
#pragma once

#include "headroom/estimator/spec.hpp"

namespace headroom::test {

inline SpecLibrary library() { return SpecLibrary(HEADROOM_TEST_DATA_DIR); }

}  // namespace headroom::test
