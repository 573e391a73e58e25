// Golden tests against the 4D paper's published tables (data/reference/4d_*.csv).
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/estimator/memory.hpp"
#include "validate_4d.hpp"

namespace headroom {
namespace {

const std::vector<validate::CellCheck>& checks() {
  static const auto all = [] {
    const SpecLibrary lib = test::library();
    const auto ref = lib.data_dir() / "reference";
    return validate::check_estimates(lib, validate::read_estimates(ref / "4d_estimates.csv"),
                                     validate::read_typos(ref / "4d_estimates_typos.json"));
  }();
  return all;
}

class EstimateCell : public ::testing::TestWithParam<std::size_t> {};

// Every printed cell of Tables 2, 7 and 8 within 0.01 GiB, or a documented typo with its evidence.
TEST_P(EstimateCell, ReproducesPrintedValue) {
  const auto& c = checks().at(GetParam());
  const auto& r = c.cell.run;
  SCOPED_TRACE("Table " + std::to_string(r.table) + " (" + std::to_string(r.tp) + "," + std::to_string(r.cp) + "," +
               std::to_string(r.pp) + "," + std::to_string(r.mbs) + ") at " + std::to_string(r.gpus) + " GPUs");
  switch (c.status) {
    case validate::CellStatus::reproduced:
      EXPECT_NEAR(c.ours_gib, c.cell.printed_gib, validate::kCellToleranceGiB);
      break;
    case validate::CellStatus::documented_typo:
      EXPECT_FALSE(c.evidence.empty());
      EXPECT_GT(std::abs(c.ours_gib - c.cell.printed_gib), validate::kCellToleranceGiB);
      break;
    default:
      ADD_FAILURE() << "printed " << c.cell.printed_gib << " GiB, Eq. 18 gives " << c.ours_gib
                    << (c.status == validate::CellStatus::drift ? " (drift)" : " (listed as typo but reproduced)");
  }
}

INSTANTIATE_TEST_SUITE_P(Paper4D, EstimateCell, ::testing::Range<std::size_t>(0, checks().size()));

TEST(Paper4DTables, AllVisibleCellsPresent) {
  EXPECT_EQ(checks().size(), 147u + 85u + 106u);
  int typos = 0;
  for (const auto& c : checks()) typos += c.status == validate::CellStatus::documented_typo;
  EXPECT_EQ(typos, 3);  // Table 7, (1,2,1,1) at 16/32/64 GPUs: shifted column
}

}  // namespace
}  // namespace headroom
