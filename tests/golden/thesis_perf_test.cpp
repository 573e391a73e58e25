// Golden test: the throughput model against the thesis's measured tokens/s and PTS (Tables B.5, B.6 vs context
// length on one node; Tables 4.1, 4.3 vs node count at seq 10,000), Llama 3.1 70B LoRA r = 128, PyTorch
// FSDP(+TP) on lumi-mi250x, coefficients data/perf/pytorch-fsdp.json fitted to these cells only.
#include <gtest/gtest.h>

#include "../test_support.hpp"
#include "headroom/validation/thesis_perf.hpp"

namespace headroom {
namespace {

class ThesisThroughput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const SpecLibrary lib = test::library();
    data_ = new validate::ThesisPerfData(validate::thesis_perf_data(lib, lib.framework("pytorch-fsdp")));
    result_ = new validate::ThesisPerfValidation(
        validate::validate_thesis_perf(*data_, default_perf_coefficients(lib, "pytorch-fsdp")));
  }
  static void TearDownTestSuite() {
    delete result_;
    delete data_;
  }
  static validate::ThesisPerfData* data_;
  static validate::ThesisPerfValidation* result_;
};
validate::ThesisPerfData* ThesisThroughput::data_ = nullptr;
validate::ThesisPerfValidation* ThesisThroughput::result_ = nullptr;

// 22 printed cells in Table B.5 (the rest are '-'), 16 in Table 4.1; PTS from the matching B.6 / 4.3 cell.
TEST_F(ThesisThroughput, ThirtyEightVisibleCells) {
  EXPECT_EQ(data_->cells.size(), 38u);
  for (const auto& c : data_->cells) {
    EXPECT_EQ(c.layout.lora.rank, validate::kThesisLoraRank);
    EXPECT_EQ(c.layout.dp, c.fsdp * c.nodes);
    EXPECT_NEAR(c.pts_s, static_cast<double>(c.layout.seq) / c.tokens_per_s, 0.01 * c.pts_s);  // PTS = s / (tokens/s)
  }
}

// Weak scaling by Table B.1: (8,1) at 2,200 tokens runs 5 samples per GPU (88,000 / 17,600); never below 1.
TEST_F(ThesisThroughput, SamplesPerRankFollowTableB1) {
  EXPECT_EQ(validate::thesis_samples_per_rank(88000, 2200, 8), 5);
  EXPECT_EQ(validate::thesis_samples_per_rank(88000, 11496, 8), 1);
  EXPECT_EQ(validate::thesis_samples_per_rank(65000, 10000, 1), 6);
}

TEST_F(ThesisThroughput, ShippedCoefficientsAreTheFitAndMeetTheErrorGoal) {
  EXPECT_TRUE(result_->shipped_is_fit);
  EXPECT_LE(result_->score.mean_error(), validate::kThesisMeanErrorGoal);
  EXPECT_LE(result_->score.mean_tokens_error, 0.10);
  EXPECT_LE(result_->score.mean_pts_error, 0.10);
  EXPECT_LT(result_->score.mean_error(), result_->datasheet.mean_error());
}

// Order: every single-node context length ranks the configurations right ((8,1) > (4,2) > (2,4) ≈ (1,8));
// across nodes the known misses are (4,2) vs (2,4) at 2 and 3 nodes and (1,8) vs (8,1) at 4 (see README), so at
// least 36 of the 39 ordered pairs.
TEST_F(ThesisThroughput, OrderOfLayouts) {
  EXPECT_EQ(result_->score.ordered_pairs, 39);
  EXPECT_GE(result_->score.concordant_pairs, 36);
  EXPECT_GE(result_->score.top1, 7);
  int single_node_pairs = 0, single_node_right = 0;
  const auto one_node = [](const validate::ThesisCellScore& c) { return c.cell->nodes == 1; };
  for (const auto& a : result_->score.cells)
    for (const auto& b : result_->score.cells) {
      if (&a >= &b || !one_node(a) || !one_node(b) || a.cell->table != b.cell->table ||
          a.cell->column() != b.cell->column())
        continue;
      const double ma = a.cell->tokens_per_s, mb = b.cell->tokens_per_s;
      if (std::abs(ma - mb) <= validate::kThesisTieTolerance * std::max(ma, mb)) continue;
      ++single_node_pairs;
      if ((ma > mb) == (a.tokens_per_s > b.tokens_per_s)) ++single_node_right;
    }
  EXPECT_GT(single_node_pairs, 0);
  EXPECT_EQ(single_node_right, single_node_pairs);
}

TEST_F(ThesisThroughput, CrossValidation) {
  ASSERT_EQ(result_->by_config.size(), 4u);
  ASSERT_EQ(result_->by_table.size(), 2u);
  EXPECT_EQ(result_->pooled_by_config.cells.size(), 38u);
  EXPECT_LE(result_->pooled_by_config.mean_error(), 0.25);
}

}  // namespace
}  // namespace headroom
