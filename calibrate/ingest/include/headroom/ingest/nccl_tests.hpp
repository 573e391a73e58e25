// Reads the text nccl-tests prints (all_reduce_perf, all_gather_perf, ...: doc/PERFORMANCE.md) into
// collective measurements: the out-of-place time of each size, with the rank count from the "Using devices"
// list and the link level from how many hosts it names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "headroom/kernels/measurement.hpp"

namespace headroom::calibrate {

struct NcclTestsLog {
  Collective op = Collective::all_reduce;
  int ranks = 0;
  int nodes = 0;
  std::string device;  // from the first "Rank" line
  std::vector<kernels::Measurement> rows;
  std::vector<double> reported_busbw;  // the log's own busbw column, GB/s, for cross-checking
};

// `op_hint` names the collective when the log does not ("all_reduce" or "all_reduce_perf"); otherwise the
// collective comes from a "*_perf" word in the text or in `where` (the file name). Throws Error naming
// `where` and the line on malformed input.
[[nodiscard]] NcclTestsLog parse_nccl_tests(std::string_view text, std::string_view where,
                                            std::string_view op_hint = "");

}  // namespace headroom::calibrate
