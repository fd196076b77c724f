#include "measure/stop_rules.h"

#include <gtest/gtest.h>

#include <vector>

namespace aitune {
namespace {

// Feeds `series` one call at a time and returns the first non-continue decision and how many
// calls it took; calls == series.size() + 1 when the rule never decided.
std::pair<StopDecision, size_t> run(const MeasureStopRule& rule, const std::vector<double>& series) {
  std::vector<double> so_far;
  for (double v : series) {
    so_far.push_back(v);
    StopDecision d = decide_stop(rule, so_far);
    if (d.kind != StopDecision::kContinue) return {d, so_far.size()};
  }
  return {StopDecision{}, series.size() + 1};
}

TEST(FixedStepsRuleTest, DefaultsStopAfterThirtyCalls) {
  const auto [d, calls] = run(FixedStepsRule{}, std::vector<double>(100, 1.0));
  EXPECT_EQ(d.kind, StopDecision::kStop);
  EXPECT_EQ(calls, 30u);
  EXPECT_EQ(d.measured_begin, 10u);
  EXPECT_EQ(d.measured_end, 30u);
}

TEST(FixedStepsRuleTest, CustomCounts) {
  const auto [d, calls] = run(FixedStepsRule{5, 2}, std::vector<double>(100, 1.0));
  EXPECT_EQ(calls, 7u);
  EXPECT_EQ(d.measured_begin, 2u);
  EXPECT_EQ(d.measured_end, 7u);
}

TEST(StableWindowRuleTest, StopsAsSoonAsStable) {
  // Warmup 10, window 20: the first decision point is call 30; constant times are stable.
  const auto [d, calls] = run(StableWindowRule{}, std::vector<double>(200, 5.0));
  EXPECT_EQ(d.kind, StopDecision::kStop);
  EXPECT_EQ(calls, 30u);
  EXPECT_EQ(d.measured_begin, 10u);
  EXPECT_EQ(d.measured_end, 30u);
}

TEST(StableWindowRuleTest, StopsOnceNoisyPrefixLeavesWindow) {
  // 10 warmup, 5 wild measured calls, then constant: the window [15, 35) is the first stable one.
  std::vector<double> series(10, 1000.0);
  for (int i = 0; i < 5; ++i) series.push_back(i % 2 ? 10.0 : 1000.0);
  series.resize(200, 100.0);
  const auto [d, calls] = run(StableWindowRule{}, series);
  EXPECT_EQ(d.kind, StopDecision::kStop);
  EXPECT_EQ(calls, 35u);
  EXPECT_EQ(d.measured_begin, 15u);
  EXPECT_EQ(d.measured_end, 35u);
}

TEST(StableWindowRuleTest, BoundaryCvIsStable) {
  // Alternating 100/120 has CV 1/11 ~ 9.09% <= 10%.
  std::vector<double> series;
  for (int i = 0; i < 200; ++i) series.push_back(i % 2 ? 120.0 : 100.0);
  EXPECT_EQ(run(StableWindowRule{}, series).first.kind, StopDecision::kStop);
}

TEST(StableWindowRuleTest, FailsWithExactMessage) {
  // Alternating 100/130: mean 115, population std 15, CV 13.04%.
  std::vector<double> series;
  for (int i = 0; i < 500; ++i) series.push_back(i % 2 ? 130.0 : 100.0);
  const auto [d, calls] = run(StableWindowRule{}, series);
  EXPECT_EQ(d.kind, StopDecision::kFail);
  EXPECT_EQ(calls, 110u);  // 10 warmup + 100 measured
  EXPECT_EQ(d.measured_begin, 90u);
  EXPECT_EQ(d.measured_end, 110u);
  EXPECT_EQ(d.message,
            "Unable to collect stable results. Current CV of last window: 13.04%. Expected max CV: 10.00%.");
}

TEST(StableWindowRuleTest, FailMessageUsesConfiguredMaxCv) {
  std::vector<double> series;
  for (int i = 0; i < 100; ++i) series.push_back(i % 2 ? 130.0 : 100.0);
  const auto [d, calls] = run(StableWindowRule{4, 0.025, 1, 6}, series);
  EXPECT_EQ(d.kind, StopDecision::kFail);
  EXPECT_EQ(calls, 7u);
  EXPECT_EQ(d.message,
            "Unable to collect stable results. Current CV of last window: 13.04%. Expected max CV: 2.50%.");
}

TEST(ValidateStopRuleTest, Defaults) {
  EXPECT_TRUE(validate_stop_rule(FixedStepsRule{}).ok());
  EXPECT_TRUE(validate_stop_rule(StableWindowRule{}).ok());
}

TEST(ValidateStopRuleTest, Messages) {
  auto expect = [](const MeasureStopRule& rule, const std::string& message) {
    const Status s = validate_stop_rule(rule);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), message);
  };
  expect(FixedStepsRule{0, 10}, "FixedStepsRule: num_steps must be positive, got 0");
  expect(FixedStepsRule{20, -1}, "FixedStepsRule: warmup_samples must be positive, got -1");
  expect(StableWindowRule{0, 0.1, 10, 100}, "StableWindowRule: window_size must be positive, got 0");
  expect(StableWindowRule{20, 0.0, 10, 100}, "StableWindowRule: max_cv_ratio must be positive, got 0");
  expect(StableWindowRule{20, 0.1, 0, 100}, "StableWindowRule: warmup_samples must be positive, got 0");
  expect(StableWindowRule{20, 0.1, 10, 0}, "StableWindowRule: max_samples must be positive, got 0");
  expect(StableWindowRule{20, 0.1, 10, 10},
         "StableWindowRule: max_samples must be >= window_size, got max_samples=10, window_size=20");
}

}  // namespace
}  // namespace aitune
