#include "measure/measure_loop.h"

#include <gtest/gtest.h>

#include <vector>

namespace aitune {
namespace {

TEST(MeasureBatchTest, FixedTimings) {
  // Warmup calls are slow (must be excluded); measured calls alternate 2 ms / 4 ms host time.
  size_t calls = 0;
  auto call = [&](size_t i) -> StatusOr<CallTiming> {
    ++calls;
    if (i < 3) return CallTiming{50e6, 40.0};
    return CallTiming{i % 2 ? 2e6 : 4e6, i % 2 ? 1.0 : 3.0};
  };
  auto result = measure_batch(8, FixedStepsRule{4, 3}, call);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(calls, 7u);
  EXPECT_EQ(result->batch_size, 8);
  EXPECT_EQ(result->num_warmup_calls, 3);
  EXPECT_EQ(result->num_measured_calls, 4);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.mean, 3.0);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.min, 2.0);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.max, 4.0);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.std, 1.0);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.cv, 1.0 / 3.0);
  ASSERT_TRUE(result->device_time_ms.has_value());
  EXPECT_DOUBLE_EQ(result->device_time_ms->mean, 2.0);
  // 8 samples * 1e9 / 3e6 ns.
  EXPECT_DOUBLE_EQ(result->throughput_per_s, 8 * 1e9 / 3e6);
}

TEST(MeasureBatchTest, DeviceStatsNeedEveryMeasuredCall) {
  auto call = [](size_t i) -> StatusOr<CallTiming> {
    // Warmup has no device time (does not matter); one measured call lacks it.
    if (i == 5) return CallTiming{1e6, std::nullopt};
    return CallTiming{1e6, i < 2 ? std::nullopt : std::optional<double>(0.5)};
  };
  auto result = measure_batch(1, FixedStepsRule{4, 2}, call);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(result->device_time_ms.has_value());

  auto warmup_only_missing = measure_batch(1, FixedStepsRule{3, 2}, [](size_t i) -> StatusOr<CallTiming> {
    return CallTiming{1e6, i < 2 ? std::nullopt : std::optional<double>(0.5)};
  });
  ASSERT_TRUE(warmup_only_missing.ok());
  ASSERT_TRUE(warmup_only_missing->device_time_ms.has_value());
  EXPECT_DOUBLE_EQ(warmup_only_missing->device_time_ms->mean, 0.5);
  EXPECT_DOUBLE_EQ(warmup_only_missing->throughput_per_s, 1000.0);
}

TEST(MeasureBatchTest, StableWindowCountsExcludedCallsAsWarmup) {
  auto call = [](size_t i) -> StatusOr<CallTiming> {
    if (i >= 10 && i < 15) return CallTiming{i % 2 ? 1e5 : 1e7, std::nullopt};
    return CallTiming{1e6, std::nullopt};
  };
  auto result = measure_batch(2, StableWindowRule{}, call);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->num_warmup_calls, 15);
  EXPECT_EQ(result->num_measured_calls, 20);
  EXPECT_DOUBLE_EQ(result->host_latency_ms.mean, 1.0);
  EXPECT_DOUBLE_EQ(result->throughput_per_s, 2000.0);
}

TEST(MeasureBatchTest, UnstableIsBackendError) {
  auto call = [](size_t i) -> StatusOr<CallTiming> {
    return CallTiming{i % 2 ? 130.0 : 100.0, std::nullopt};
  };
  auto result = measure_batch(1, StableWindowRule{}, call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kBackendError);
  EXPECT_EQ(result.status().message(),
            "Unable to collect stable results. Current CV of last window: 13.04%. Expected max CV: 10.00%.");
}

TEST(MeasureBatchTest, CallErrorPropagatesAsIs) {
  size_t calls = 0;
  auto call = [&](size_t i) -> StatusOr<CallTiming> {
    ++calls;
    if (i == 4) return Status(StatusCode::kCudaError, "out of memory");
    return CallTiming{1e6, std::nullopt};
  };
  auto result = measure_batch(1, FixedStepsRule{}, call);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCudaError);
  EXPECT_EQ(result.status().message(), "out of memory");
  EXPECT_EQ(calls, 5u);
}

TEST(MeasureBatchTest, InvalidArguments) {
  auto call = [](size_t) -> StatusOr<CallTiming> { return CallTiming{1e6, std::nullopt}; };
  EXPECT_EQ(measure_batch(0, FixedStepsRule{}, call).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(measure_batch(1, FixedStepsRule{0, 1}, call).status().code(), StatusCode::kInvalidArgument);
  auto negative = measure_batch(1, FixedStepsRule{}, [](size_t) -> StatusOr<CallTiming> {
    return CallTiming{-1.0, std::nullopt};
  });
  EXPECT_EQ(negative.status().code(), StatusCode::kInternal);
  auto zero = measure_batch(1, FixedStepsRule{}, [](size_t) -> StatusOr<CallTiming> {
    return CallTiming{0.0, std::nullopt};
  });
  EXPECT_EQ(zero.status().code(), StatusCode::kInternal);
}

TEST(BatchResultJsonTest, FieldNamesAndNulls) {
  BatchResult r;
  r.batch_size = 4;
  r.num_warmup_calls = 10;
  r.num_measured_calls = 20;
  r.host_latency_ms = {1.5, 1.25, 2, 2.5, 1, 3, 0.5, 0.25};
  r.throughput_per_s = 2666.6666666666665;
  EXPECT_EQ(
      to_json(r),
      "{\"batch_size\": 4, \"num_warmup_calls\": 10, \"num_measured_calls\": 20, "
      "\"host_latency_ms_mean\": 1.5, \"host_latency_ms_median\": 1.25, \"host_latency_ms_p90\": 2, "
      "\"host_latency_ms_p99\": 2.5, \"host_latency_ms_min\": 1, \"host_latency_ms_max\": 3, "
      "\"host_latency_ms_std\": 0.5, \"host_latency_cv\": 0.25, "
      "\"device_time_ms_mean\": null, \"device_time_ms_median\": null, \"device_time_ms_p90\": null, "
      "\"device_time_ms_p99\": null, \"device_time_ms_min\": null, \"device_time_ms_max\": null, "
      "\"device_time_ms_std\": null, \"device_time_cv\": null, \"throughput_per_s\": 2666.6666666666665}");
  r.device_time_ms = LatencyStats{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0, 0};
  const std::string json = to_json(r);
  EXPECT_NE(json.find("\"device_time_ms_mean\": 0.1,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"device_time_cv\": 0,"), std::string::npos) << json;
}

}  // namespace
}  // namespace aitune
