#include "env/environment.h"

#include <gtest/gtest.h>
#include <torch/headeronly/version.h>

#include <cstdlib>

namespace aitune {
namespace {

TEST(Environment, ReportsTheLibtorchItWasBuiltWith) {
  EnvironmentInfo info = probe_environment();
  EXPECT_EQ(info.torch_version, TORCH_VERSION);
  EXPECT_FALSE(info.aitune_version.empty());
}

TEST(Environment, DriverErrorAndGpusAreConsistent) {
  EnvironmentInfo info = probe_environment();
  if (!info.driver_error.empty()) {
    EXPECT_TRUE(info.gpus.empty());
  }
  for (const auto& gpu : info.gpus) {
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GE(gpu.sm_major, 3);
  }
}

TEST(Environment, EveryOptionalLibrarySaysHowItKnows) {
  EnvironmentInfo info = probe_environment();
  ASSERT_EQ(info.libraries.size(), 3u);
  for (const auto& lib : info.libraries) {
    EXPECT_NE(lib.how.find("dlopen("), std::string::npos) << lib.name;
  }
}

TEST(Environment, KillSwitchIsRead) {
  setenv("AITUNE_DISABLE_CUDA_GRAPHS", "1", 1);
  EXPECT_TRUE(probe_environment().cuda_graphs_disabled);
  setenv("AITUNE_DISABLE_CUDA_GRAPHS", "no", 1);
  EXPECT_FALSE(probe_environment().cuda_graphs_disabled);
  unsetenv("AITUNE_DISABLE_CUDA_GRAPHS");
}

TEST(Environment, JsonNamesEveryField) {
  std::string json = to_json(probe_environment());
  for (const char* key : {"\"torch_version\"", "\"gpus\"", "\"libraries\"", "\"driver_error\"",
                          "\"cuda_graphs_disabled\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

}  // namespace
}  // namespace aitune
