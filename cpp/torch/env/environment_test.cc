#include "env/environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/headeronly/version.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

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

TEST(Environment, TensorRtElevenIsTriedBeforeTen) {
  const auto& names = tensorrt_sonames();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "libnvinfer.so.11");
  EXPECT_EQ(names[1], "libnvinfer.so.10");
}

TEST(Environment, DecodesTensorRtVersionsOfEachEncoding) {
  EXPECT_EQ(decode_tensorrt_version(110400), "11.4.0");
  EXPECT_EQ(decode_tensorrt_version(101501), "10.15.1");
  EXPECT_EQ(decode_tensorrt_version(101303), "10.13.3");
  EXPECT_EQ(decode_tensorrt_version(8601), "8.6.1");  // TensorRT 8: major * 1000
  EXPECT_EQ(decode_tensorrt_version(0), "");
  EXPECT_EQ(decode_tensorrt_version(-1), "");
}

TEST(Environment, ReportsWhichTensorRtItLoadedAndFromWhere) {
  LibraryProbe probe = probe_tensorrt({"libnvinfer_absent.so.99", AITUNE_FAKE_NVINFER});
  ASSERT_TRUE(probe.found) << probe.how;
  EXPECT_EQ(probe.version, "11.4.0");
  EXPECT_EQ(probe.path, AITUNE_FAKE_NVINFER);
  EXPECT_NE(probe.how.find(std::string("dlopen(") + AITUNE_FAKE_NVINFER + ") succeeded"), std::string::npos)
      << probe.how;
  EnvironmentInfo info;
  info.libraries = {probe};
  std::string json = to_json(info);
  EXPECT_NE(json.find(std::string("\"path\": \"") + AITUNE_FAKE_NVINFER + "\""), std::string::npos) << json;
}

TEST(Environment, NamesEveryTensorRtItTriedWhenNoneLoads) {
  LibraryProbe probe = probe_tensorrt({"libnvinfer_absent.so.98", "libnvinfer_absent.so.99"});
  EXPECT_FALSE(probe.found);
  EXPECT_NE(probe.how.find("dlopen(libnvinfer_absent.so.98) failed; dlopen(libnvinfer_absent.so.99) failed"),
            std::string::npos)
      << probe.how;
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
  for (const char* key : {"\"torch_version\"", "\"gpus\"", "\"libraries\"", "\"python_packages\"",
                          "\"driver_error\"", "\"cuda_graphs_disabled\""}) {
    EXPECT_NE(json.find(key), std::string::npos) << key;
  }
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(Environment, FindsAPythonPackageAndItsVersionInTheFirstSitePackagesHoldingIt) {
  namespace fs = std::filesystem;
  std::string pattern = (fs::temp_directory_path() / "aitune-site-XXXXXX").string();
  const fs::path root = ::mkdtemp(pattern.data());
  const fs::path empty = root / "empty", site = root / "site";
  fs::create_directories(empty);
  fs::create_directories(site / "torchao");
  fs::create_directories(site / "torchao-0.17.0.dist-info");
  std::ofstream(site / "torchao" / "__init__.py") << "";
  std::ofstream(site / "torchao-0.17.0.dist-info" / "METADATA")
      << "Metadata-Version: 2.1\nName: torchao\nVersion: 0.17.0\n";
  LibraryProbe found = probe_python_package("TorchAO", "torchao", "torchao", {empty.string(), site.string()});
  EXPECT_TRUE(found.found);
  EXPECT_EQ(found.version, "0.17.0");
  EXPECT_EQ(found.path, (site / "torchao").string());
  EXPECT_NE(found.how.find("runs from Python only"), std::string::npos) << found.how;
  LibraryProbe missing = probe_python_package("TorchAO", "torchao", "torchao", {empty.string()});
  EXPECT_FALSE(missing.found);
  EXPECT_NE(missing.how.find("no torchao/__init__.py in " + empty.string()), std::string::npos)
      << missing.how;
  // Not std::filesystem::remove_all: libtorch.so exports a broken copy that this binary binds to.
  EXPECT_EQ(std::system(("rm -rf '" + root.string() + "'").c_str()), 0);
}

TEST(Environment, ReportsTorchAoAmongThePythonPackages) {
  EnvironmentInfo info = probe_environment();
  ASSERT_EQ(info.python_packages.size(), 1u);
  EXPECT_EQ(info.python_packages[0].name, "TorchAO");
  EXPECT_NE(to_text(info).find("TorchAO: "), std::string::npos);
}

}  // namespace
}  // namespace aitune
