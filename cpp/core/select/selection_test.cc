#include "select/selection.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace aitune {
namespace {

TEST(GateTest, FirstWinsBoundaryPasses) {
  EXPECT_TRUE(passes_first_wins_gate(1.01, 1.0));
  EXPECT_TRUE(passes_first_wins_gate(101.0 / 100.0, 1.0));
  EXPECT_TRUE(passes_first_wins_gate(1.5, 1.0));
  EXPECT_FALSE(passes_first_wins_gate(1.0099, 1.0));
  EXPECT_FALSE(passes_first_wins_gate(1.0, 1.0));
  EXPECT_TRUE(passes_first_wins_gate(1.0, 0.0));
  EXPECT_FALSE(passes_first_wins_gate(std::nan(""), 1.0));
}

TEST(GateTest, FirstWinsOverBatchSizesUsesGeomeanAndWorstSize) {
  const double two[] = {1.5, 0.98};  // geomean 1.212, worst 2 % slower: passes
  GateVerdict v = first_wins_gate(two, 1.0);
  EXPECT_TRUE(v.passed);
  EXPECT_NEAR(v.geomean_speedup, std::sqrt(1.5 * 0.98), 1e-12);
  EXPECT_EQ(v.worst_index, 1u);
  EXPECT_FALSE(v.too_slow_somewhere);
  const double slow_at_one[] = {2.0, 0.96};  // geomean 1.386 but 4 % slower at the second size
  v = first_wins_gate(slow_at_one, 1.0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(v.too_slow_somewhere);
  EXPECT_DOUBLE_EQ(v.worst_speedup, 0.96);
  const double exactly_three_percent[] = {1.2, 0.97};
  EXPECT_TRUE(first_wins_gate(exactly_three_percent, 1.0).passed);
  const double tie[] = {1.0, 1.0};  // needs 1.01 by default
  EXPECT_FALSE(first_wins_gate(tie, 1.0).passed);
  EXPECT_TRUE(first_wins_gate(tie, 0.0).passed);
  const double single[] = {1.01};
  EXPECT_TRUE(first_wins_gate(single, 1.0).passed);
  EXPECT_FALSE(first_wins_gate(std::span<const double>{}, 1.0).passed);
  const double with_nan[] = {1.5, std::nan("")};
  v = first_wins_gate(with_nan, 1.0);
  EXPECT_FALSE(v.passed);
  EXPECT_TRUE(std::isnan(v.geomean_speedup));
}

TEST(GateTest, ProfilingIsStrict) {
  EXPECT_FALSE(passes_profiling_gate(1.0, 0.0));  // tie goes to the baseline
  EXPECT_TRUE(passes_profiling_gate(1.0000001, 0.0));
  EXPECT_FALSE(passes_profiling_gate(1.05, 5.0));
  EXPECT_TRUE(passes_profiling_gate(1.06, 5.0));
  EXPECT_FALSE(passes_profiling_gate(std::nan(""), 0.0));
}

TEST(SpeedupTest, Values) {
  EXPECT_DOUBLE_EQ(speedup_throughput(300, 200), 1.5);
  EXPECT_DOUBLE_EQ(speedup_latency(2.0, 3.0), 1.5);
  EXPECT_TRUE(std::isnan(speedup_throughput(300, 0)));
  EXPECT_TRUE(std::isnan(speedup_throughput(0, 200)));
  EXPECT_TRUE(std::isnan(speedup_throughput(-1, 200)));
  EXPECT_TRUE(std::isnan(speedup_latency(0, 3.0)));
  EXPECT_TRUE(std::isnan(speedup_latency(2.0, -3.0)));
  EXPECT_TRUE(std::isnan(speedup_latency(std::nan(""), 3.0)));
}

TEST(PickBestTest, ThroughputHigherWinsFirstOfTies) {
  const std::vector<Candidate> c = {{"a", true, 100}, {"b", true, 200}, {"c", true, 200}, {"d", false, 900}};
  EXPECT_EQ(pick_best(c, MetricKind::kThroughput), 1u);
}

TEST(PickBestTest, LatencyLowerWins) {
  const std::vector<Candidate> c = {{"a", true, 3.0}, {"b", true, 2.0}, {"c", true, 2.0}, {"d", false, 0.1}};
  EXPECT_EQ(pick_best(c, MetricKind::kLatency), 1u);
}

TEST(PickBestTest, StrictlyBetterOnly) {
  const std::vector<Candidate> c = {{"a", true, 5.0}, {"b", true, 5.0}};
  EXPECT_EQ(pick_best(c, MetricKind::kThroughput), 0u);
  EXPECT_EQ(pick_best(c, MetricKind::kLatency), 0u);
}

TEST(PickBestTest, NoneUsable) {
  EXPECT_FALSE(pick_best({}, MetricKind::kThroughput).has_value());
  const std::vector<Candidate> c = {{"a", false, 5.0}, {"b", true, std::nan("")}};
  EXPECT_FALSE(pick_best(c, MetricKind::kThroughput).has_value());
  const std::vector<Candidate> d = {{"a", true, std::nan("")}, {"b", true, 1.0}};
  EXPECT_EQ(pick_best(d, MetricKind::kLatency), 1u);
}

TEST(BestWithinBudgetTest, MaxThroughputWithinBudget) {
  const std::vector<BatchPoint> points = {
      {1, 1.0, 1000}, {2, 1.5, 1333}, {4, 2.0, 2000}, {8, 10.5, 760}, {16, 30.0, 9000}};
  auto best = best_within_budget(points, 10.0);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->batch_size, 4);
  // The budget itself is within budget.
  auto at_limit = best_within_budget(points, 30.0);
  ASSERT_TRUE(at_limit.has_value());
  EXPECT_EQ(at_limit->batch_size, 16);
}

TEST(BestWithinBudgetTest, TiesKeepEarlier) {
  const std::vector<BatchPoint> points = {{1, 1.0, 1000}, {2, 2.0, 1000}};
  EXPECT_EQ(best_within_budget(points, 5.0)->batch_size, 1);
}

TEST(BestWithinBudgetTest, NoneWithinBudget) {
  const std::vector<BatchPoint> points = {{1, 12.0, 83}, {2, 20.0, 100}};
  EXPECT_FALSE(best_within_budget(points, 10.0).has_value());
  EXPECT_FALSE(best_within_budget({}, 10.0).has_value());
  EXPECT_EQ(budget_failure_message(10.0), "No backend satisfied latency budget 10.000 ms");
  EXPECT_EQ(budget_failure_message(2.5), "No backend satisfied latency budget 2.500 ms");
}

}  // namespace
}  // namespace aitune
