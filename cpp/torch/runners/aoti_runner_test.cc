#include "runners/aoti_runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace aitune {
namespace {

TEST(AotiRunner, MissingPackageIsNotFound) {
  auto runner = AotiRunner::load("/nonexistent/aitune/model.pt2", -1);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kNotFound);
  EXPECT_NE(runner.status().message().find("AOTInductor package not found"), std::string::npos)
      << runner.status().to_string();
  EXPECT_NE(runner.status().message().find("/nonexistent/aitune/model.pt2"), std::string::npos);
}

TEST(AotiRunner, EmptyPathAndBadDeviceAreInvalidArguments) {
  auto empty = AotiRunner::load("", -1);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto bad_device = AotiRunner::load("/nonexistent/model.pt2", -2);
  ASSERT_FALSE(bad_device.ok());
  EXPECT_EQ(bad_device.status().code(), StatusCode::kInvalidArgument);
}

TEST(AotiRunner, CorruptPackageIsABackendErrorNotAnException) {
  const auto path = std::filesystem::temp_directory_path() / "aitune_aoti_runner_test_corrupt.pt2";
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a zip archive";
  }
  StatusOr<std::unique_ptr<AotiRunner>> runner = Status(StatusCode::kInternal, "not run");
  EXPECT_NO_THROW(runner = AotiRunner::load(path.string(), -1));
  std::filesystem::remove(path);
  ASSERT_FALSE(runner.ok());
  EXPECT_EQ(runner.status().code(), StatusCode::kBackendError) << runner.status().to_string();
  EXPECT_NE(runner.status().message().find("Failed to load AOTInductor package"), std::string::npos);
}

}  // namespace
}  // namespace aitune
