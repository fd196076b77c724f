#include "measure/call_timer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace aitune {
namespace {

TEST(TimeCall, CpuMeasuresHostTimeOnly) {
  int calls = 0;
  auto timed = time_call(
      [&] {
        ++calls;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        return Status::Ok();
      },
      std::nullopt);
  ASSERT_TRUE(timed.ok()) << timed.status().to_string();
  EXPECT_EQ(calls, 1);
  EXPECT_GE(timed->host_ns, 2e6);
  EXPECT_LT(timed->host_ns, 2e9);
  EXPECT_FALSE(timed->device_ms.has_value());
}

TEST(TimeCall, RunsUnderNoGrad) {
  ASSERT_TRUE(at::GradMode::is_enabled());
  bool grad_inside = true;
  auto timed = time_call(
      [&] {
        grad_inside = at::GradMode::is_enabled();
        return Status::Ok();
      },
      std::nullopt);
  ASSERT_TRUE(timed.ok());
  EXPECT_FALSE(grad_inside);
  EXPECT_TRUE(at::GradMode::is_enabled());
}

TEST(TimeCall, ReturnsTheCallsOwnError) {
  auto timed = time_call([] { return not_found("model is gone"); }, std::nullopt);
  ASSERT_FALSE(timed.ok());
  EXPECT_EQ(timed.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(timed.status().message(), "model is gone");
}

TEST(TimeCall, ExceptionFromTheCallBecomesAStatus) {
  auto timed = time_call([]() -> Status { throw std::runtime_error("boom"); }, std::nullopt);
  ASSERT_FALSE(timed.ok());
  EXPECT_EQ(timed.status().code(), StatusCode::kBackendError);
  EXPECT_NE(timed.status().message().find("boom"), std::string::npos);
}

TEST(TimeCall, CudaRequestedWithoutDeviceIsAnError) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present; this checks the CPU-only path";
  auto timed = time_call([] { return Status::Ok(); }, 0);
  ASSERT_FALSE(timed.ok());
  EXPECT_EQ(timed.status().code(), StatusCode::kBackendUnavailable);
}

TEST(TimeCall, CudaRecordsDeviceTime) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device available";
  at::Tensor a = at::randn({2048, 2048}, at::device(at::kCUDA));
  auto timed = time_call(
      [&] {
        at::Tensor b = at::mm(a, a);
        for (int i = 0; i < 10; ++i) b = at::mm(b, a);
        return Status::Ok();
      },
      0);
  ASSERT_TRUE(timed.ok()) << timed.status().to_string();
  ASSERT_TRUE(timed->device_ms.has_value());
  EXPECT_GT(*timed->device_ms, 0.0);
  // The host window contains the device window (modulo clock granularity).
  EXPECT_GE(timed->host_ns * 1e-6 + 0.05, *timed->device_ms);
  auto bad = time_call([] { return Status::Ok(); }, 1000);
  EXPECT_EQ(bad.status().code(), StatusCode::kBackendUnavailable);
}

}  // namespace
}  // namespace aitune
