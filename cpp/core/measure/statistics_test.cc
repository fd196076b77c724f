#include "measure/statistics.h"

#include <gtest/gtest.h>

namespace aitune {
namespace {

TEST(PercentileTest, MatchesNumpyLinear) {
  // numpy.percentile([1, 2, 3, 4], [90, 99, 50]) == [3.7, 3.97, 2.5]
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 99), 3.97);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 100), 4.0);
}

TEST(PercentileTest, EdgeCases) {
  EXPECT_EQ(percentile({}, 50), 0.0);
  EXPECT_EQ(percentile({7}, 99), 7.0);
  EXPECT_EQ(percentile({1, 2}, -5), 1.0);   // clamped
  EXPECT_EQ(percentile({1, 2}, 150), 2.0);  // clamped
}

TEST(ComputeStatsTest, MatchesNumpy) {
  // x = [3, 1, 4, 1, 5, 9, 2, 6]; values from numpy (mean, median, percentile, std with ddof=0).
  const std::vector<double> x = {3, 1, 4, 1, 5, 9, 2, 6};
  const LatencyStats s = compute_stats(x);
  EXPECT_DOUBLE_EQ(s.mean, 3.875);
  EXPECT_DOUBLE_EQ(s.median, 3.5);
  EXPECT_DOUBLE_EQ(s.p90, 6.8999999999999995);
  EXPECT_DOUBLE_EQ(s.p99, 8.79);
  EXPECT_EQ(s.min, 1.0);
  EXPECT_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.std, 2.5708704751503917);
  EXPECT_DOUBLE_EQ(s.cv, 0.6634504452001011);
}

TEST(ComputeStatsTest, EmptyIsAllZero) {
  const LatencyStats s = compute_stats({});
  EXPECT_EQ(s.mean, 0.0);
  EXPECT_EQ(s.median, 0.0);
  EXPECT_EQ(s.p90, 0.0);
  EXPECT_EQ(s.p99, 0.0);
  EXPECT_EQ(s.min, 0.0);
  EXPECT_EQ(s.max, 0.0);
  EXPECT_EQ(s.std, 0.0);
  EXPECT_EQ(s.cv, 0.0);
}

TEST(ComputeStatsTest, ZeroMeanHasZeroCv) {
  const std::vector<double> x = {-1, 1};
  const LatencyStats s = compute_stats(x);
  EXPECT_EQ(s.mean, 0.0);
  EXPECT_EQ(s.std, 1.0);
  EXPECT_EQ(s.cv, 0.0);
}

TEST(ComputeStatsTest, ConstantValues) {
  const std::vector<double> x(5, 2.5);
  const LatencyStats s = compute_stats(x);
  EXPECT_EQ(s.mean, 2.5);
  EXPECT_EQ(s.p99, 2.5);
  EXPECT_EQ(s.std, 0.0);
  EXPECT_EQ(s.cv, 0.0);
}

TEST(CoefficientOfVariationTest, Alternating) {
  // 100, 120 repeated: std 10, mean 110.
  std::vector<double> x;
  for (int i = 0; i < 10; ++i) {
    x.push_back(100);
    x.push_back(120);
  }
  EXPECT_DOUBLE_EQ(coefficient_of_variation(x), 10.0 / 110.0);
}

}  // namespace
}  // namespace aitune
