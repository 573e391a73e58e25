// The throughput model against the 4D paper's measured TFLOP/s (Tables 3, 4, 10): the pick of every
// (table, GPU count) column, the paper's own rule as the anchor, and leave-one-table-out cross-validation.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/validation/perf.hpp"

namespace headroom {
namespace {

class Paper4DThroughput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const SpecLibrary lib = test::library();
    const FrameworkProfile fw = lib.framework("megatron");
    runs_ = new std::vector<validate::PerfRun>(
        validate::perf_runs(lib, validate::read_measured(lib.data_dir() / "reference" / "4d_measured.csv"), fw));
    result_ = new validate::PerfValidation(validate::validate_perf(*runs_, default_perf_coefficients(lib, "megatron")));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete runs_;
  }
  static std::vector<validate::PerfRun>* runs_;
  static validate::PerfValidation* result_;
};
std::vector<validate::PerfRun>* Paper4DThroughput::runs_ = nullptr;
validate::PerfValidation* Paper4DThroughput::result_ = nullptr;

TEST_F(Paper4DThroughput, SixteenVisibleColumnsOf194Runs) {
  EXPECT_EQ(runs_->size(), 194u);
  EXPECT_EQ(result_->score.columns.size(), 16u);
}

// The anchor, computed here: Eq. 18 ≤ 80% of nominal memory, smallest t·c·p, largest micro-batch, ties averaged.
TEST_F(Paper4DThroughput, PaperRuleAnchorOnVisibleColumns) {
  EXPECT_NEAR(result_->score.anchor_mean_regret, 0.0351, 0.0005);
  EXPECT_NEAR(result_->score.anchor_worst_regret, 0.1058, 0.0005);
  EXPECT_DOUBLE_EQ(result_->score.anchor_top1, 4.0);
}

TEST_F(Paper4DThroughput, ShippedCoefficientsAreTheFitAndBeatTheGoals) {
  EXPECT_TRUE(result_->shipped_is_fit);
  EXPECT_LE(result_->score.mean_regret, validate::kPerfMeanRegretGoal);
  EXPECT_LE(result_->score.worst_regret, validate::kPerfWorstRegretGoal);
  EXPECT_GE(result_->score.top1, 12);
  EXPECT_LE(result_->score.mean_abs_error, 0.10);
}

TEST_F(Paper4DThroughput, LeaveOneTableOutBeatsTheGoalsAndTheAnchor) {
  ASSERT_EQ(result_->held_out.size(), 3u);
  EXPECT_LE(result_->pooled.mean_regret, validate::kPerfMeanRegretGoal);
  EXPECT_LE(result_->pooled.worst_regret, validate::kPerfWorstRegretGoal);
  EXPECT_LT(result_->pooled.mean_regret, result_->pooled.anchor_mean_regret);
  EXPECT_LE(result_->pooled.mean_abs_error, 0.15);
}

TEST_F(Paper4DThroughput, DatasheetDefaultsAloneAreWorseThanTheFit) {
  EXPECT_GT(result_->datasheet.mean_regret, result_->score.mean_regret);
}

}  // namespace
}  // namespace headroom
