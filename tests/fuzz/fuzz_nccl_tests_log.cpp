// `calibrate --ingest LOG`: nccl-tests output parsed, fitted and written into a profile as run_ingest does
// (with the R² gate off, as --min-r2 0 sets it). The profile it writes must read back: ingesting a log must
// never produce a profile that --profile then refuses.
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "headroom/calibration/fit.hpp"
#include "headroom/ingest/nccl_tests.hpp"
#include "headroom/calibration/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace headroom;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Profile p;
  try {
    // The file name names the collective when the text does not, as in tests/data/nccl-tests.
    const calibrate::NcclTestsLog log = calibrate::parse_nccl_tests(text, "all_reduce_perf.txt");
    fuzz::require(log.ranks > 0 && log.nodes > 0 && log.nodes <= log.ranks, "ranks and nodes are positive");
    fuzz::require(!log.rows.empty() && log.rows.size() == log.reported_busbw.size(), "one busbw per row");
    std::vector<calibrate::CollectivePoint> points;
    for (const auto& m : log.rows) {
      fuzz::require(m.seconds > 0 && m.bytes >= 0, "positive times, non-negative sizes");
      points.push_back({m.bytes, m.seconds});
    }
    CollectiveFit f = calibrate::fit_collective(points, log.op, log.ranks, log.nodes > 1 ? "inter" : "intra");
    f.source = "nccl-tests";
    p.machine = {"nccl-tests", log.device, "", log.ranks, log.ranks / log.nodes, 0, 0};
    p.date = "2025-01-01T00:00:00Z";
    p.min_r2 = 0;
    p.collectives.push_back(f);
    p.raw = log.rows;
    p.collectives_source = "nccl-tests: all_reduce_perf.txt";
  } catch (const Error&) {
    return 0;
  } catch (const std::exception& e) {
    fuzz::fail(std::string("exception ") + typeid(e).name() + " escaped: " + e.what());
  }
  // What was accepted is written and must load back.
  const auto path = fuzz::scratch_dir() / "ingested.json";
  try {
    calibrate::write_json_atomically(path, profile_to_json(p));
    (void)load_profile(path, fuzz::data_dir());
  } catch (const std::exception& e) {
    fuzz::fail(std::string("an ingested log gave a profile that does not load back: ") + e.what());
  }
  return 0;
}
