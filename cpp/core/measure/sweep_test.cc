#include "measure/sweep.h"

#include <gtest/gtest.h>

#include <vector>

namespace aitune {
namespace {

// Feeds throughputs for batch sizes 1, 2, 4, ... and returns how many were added when the
// sweep asked to stop (0 when it never did).
size_t stop_after(SweepState& state, const std::vector<double>& throughputs) {
  int64_t bs = 1;
  for (size_t i = 0; i < throughputs.size(); ++i, bs *= 2) {
    if (state.add(bs, throughputs[i])) return i + 1;
  }
  return 0;
}

TEST(DefaultBatchSizesTest, Uncapped) {
  const auto sizes = default_batch_sizes(0);
  ASSERT_EQ(sizes.size(), 21u);
  EXPECT_EQ(sizes.front(), 1);
  EXPECT_EQ(sizes[3], 8);
  EXPECT_EQ(sizes.back(), int64_t{1} << 20);
  EXPECT_EQ(default_batch_sizes(-1), sizes);
}

TEST(DefaultBatchSizesTest, Capped) {
  EXPECT_EQ(default_batch_sizes(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(default_batch_sizes(6), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(default_batch_sizes(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(default_batch_sizes(int64_t{1} << 30).size(), 21u);
}

TEST(SweepStateTest, SaturatedBackoffTwoStopsAtThirdSaturated) {
  SweepState state(ThroughputSaturatedRule{0.05, 2});
  EXPECT_EQ(stop_after(state, {100, 200, 300, 290, 280, 270, 260}), 6u);
  EXPECT_EQ(state.best_batch_size(), 4);
  EXPECT_EQ(state.best_throughput(), 300);
  EXPECT_TRUE(state.add(64, 1000));  // stays stopped
}

TEST(SweepStateTest, SaturatedBackoffZeroStopsAtFirstSaturated) {
  SweepState state(ThroughputSaturatedRule{0.05, 0});
  EXPECT_EQ(stop_after(state, {100, 200, 300, 290, 280, 270}), 4u);
}

TEST(SweepStateTest, UnsaturatedSizeResetsBackoff) {
  // 300 -> 290 (sat 1) -> 280 (sat 2) -> 400 (reset) -> 390, 380, 370 (sat 1..3: stop at 7).
  SweepState state(ThroughputSaturatedRule{0.05, 2});
  EXPECT_EQ(stop_after(state, {300, 290, 280, 400, 390, 380, 370, 360}), 7u);
  EXPECT_EQ(state.best_batch_size(), 8);
}

TEST(SweepStateTest, SmallGainCountsAsSaturated) {
  // 104 * 0.95 = 98.8 < 100: saturated although it is a new highest throughput.
  SweepState state(ThroughputSaturatedRule{0.05, 0});
  EXPECT_FALSE(state.add(1, 100));
  EXPECT_TRUE(state.add(2, 104));
  EXPECT_EQ(state.best_batch_size(), 2);  // best tracks the highest seen
  EXPECT_EQ(state.best_throughput(), 104);
}

TEST(SweepStateTest, GainBoundaryIsUnsaturated) {
  // 200 * 0.5 == 100 is not below 100.
  SweepState state(ThroughputSaturatedRule{0.5, 0});
  EXPECT_FALSE(state.add(1, 100));
  EXPECT_FALSE(state.add(2, 200));
  EXPECT_TRUE(state.add(4, 399));
}

TEST(SweepStateTest, AllSamplesNeverStops) {
  SweepState state(AllSamplesRule{});
  EXPECT_EQ(stop_after(state, {100, 200, 300, 290, 280, 270, 10, 5, 1}), 0u);
  EXPECT_EQ(state.best_batch_size(), 4);
}

TEST(SweepStateTest, TiesKeepEarlier) {
  SweepState state(AllSamplesRule{});
  EXPECT_FALSE(state.best_batch_size().has_value());
  EXPECT_EQ(state.best_throughput(), 0.0);
  state.add(1, 50);
  state.add(2, 50);
  EXPECT_EQ(state.best_batch_size(), 1);
}

TEST(ValidateSweepRuleTest, Messages) {
  EXPECT_TRUE(validate_sweep_rule(ThroughputSaturatedRule{}).ok());
  EXPECT_TRUE(validate_sweep_rule(AllSamplesRule{}).ok());
  const Status gain = validate_sweep_rule(ThroughputSaturatedRule{1.0, 2});
  EXPECT_EQ(gain.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gain.message(), "ThroughputSaturatedRule: min_throughput_gain_ratio must be in [0, 1), got 1");
  const Status backoff = validate_sweep_rule(ThroughputSaturatedRule{0.05, -1});
  EXPECT_EQ(backoff.message(), "ThroughputSaturatedRule: throughput_backoff_limit must be >= 0, got -1");
}

}  // namespace
}  // namespace aitune
