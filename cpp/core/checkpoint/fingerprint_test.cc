#include "checkpoint/fingerprint.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

namespace aitune {
namespace {

const Fingerprint kH200 = {{"torch", "2.11.0+cu130"}, {"cuda_runtime", "13.0"},
                           {"gpu_sm", "9.0"},         {"gpu_name", "NVIDIA H200"},
                           {"tensorrt", "10.13.0"},   {"onnxruntime", std::nullopt}};

TEST(FingerprintTest, EqualEnvironmentsHaveNoMismatch) {
  EXPECT_TRUE(fingerprint_mismatches(kH200, kH200, {"torch", "cuda_major", "gpu_sm", "tensorrt"}).empty());
}

TEST(FingerprintTest, OnlyRequiredFieldsAreCompared) {
  Fingerprint other = kH200;
  other["gpu_name"] = "NVIDIA L40S";
  other["gpu_sm"] = "8.9";
  EXPECT_TRUE(fingerprint_mismatches(kH200, other, {"torch"}).empty());
  const auto found = fingerprint_mismatches(kH200, other, {"torch", "gpu_sm"});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].field, "gpu_sm");
  EXPECT_EQ(found[0].saved, "9.0");
  EXPECT_EQ(found[0].current, "8.9");
}

TEST(FingerprintTest, TorchIgnoresTheLocalSuffixButReportsIt) {
  Fingerprint libtorch = kH200;
  libtorch["torch"] = "2.11.0";  // libtorch reports no local suffix
  EXPECT_TRUE(fingerprint_mismatches(kH200, libtorch, {"torch"}).empty());
  libtorch["torch"] = "2.10.0+cu130";
  const auto found = fingerprint_mismatches(kH200, libtorch, {"torch"});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].saved, "2.11.0+cu130");
  EXPECT_EQ(found[0].current, "2.10.0+cu130");
}

TEST(FingerprintTest, CudaMajorComparesOnlyTheMajor) {
  Fingerprint other = kH200;
  other["cuda_runtime"] = "13.1";
  EXPECT_TRUE(fingerprint_mismatches(kH200, other, {"cuda_major"}).empty());
  other["cuda_runtime"] = std::nullopt;  // a CPU build of torch
  const auto found = fingerprint_mismatches(kH200, other, {"cuda_major"});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].field, "cuda_major");
  EXPECT_EQ(found[0].saved, "13");
  EXPECT_EQ(found[0].current, std::nullopt);
  EXPECT_EQ(fingerprint_value_text(found[0].current), "None");
}

TEST(FingerprintTest, AmperePlusAcceptsAnySm8OnBothSides) {
  Fingerprint ada = kH200;
  ada["gpu_sm"] = "8.9";
  EXPECT_TRUE(fingerprint_mismatches(kH200, ada, {"gpu_sm_ampere_plus"}).empty());
  Fingerprint turing = kH200;
  turing["gpu_sm"] = "7.5";
  const auto found = fingerprint_mismatches(kH200, turing, {"gpu_sm_ampere_plus"});
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].field, "gpu_sm");  // reported under the field the user knows
  EXPECT_EQ(found[0].current, "7.5");
  Fingerprint no_gpu = kH200;
  no_gpu.erase("gpu_sm");
  EXPECT_EQ(fingerprint_mismatches(kH200, no_gpu, {"gpu_sm_ampere_plus"}).size(), 1u);
}

TEST(FingerprintTest, AbsentEqualsAbsentAndDiffersFromAValue) {
  const Fingerprint empty;
  EXPECT_TRUE(fingerprint_mismatches(empty, Fingerprint{{"tensorrt", std::nullopt}}, {"tensorrt"}).empty());
  const auto found = fingerprint_mismatches(kH200, empty, {"tensorrt", "onnxruntime"});
  ASSERT_EQ(found.size(), 1u);  // onnxruntime: None on both sides
  EXPECT_EQ(found[0].field, "tensorrt");
  EXPECT_EQ(found[0].saved, "10.13.0");
}

TEST(FingerprintTest, MismatchesKeepTheOrderOfRequires) {
  const Fingerprint other = {{"torch", "2.9.0"}, {"cuda_runtime", "12.8"}, {"gpu_sm", "8.0"}};
  const auto found = fingerprint_mismatches(kH200, other, {"gpu_sm", "torch", "cuda_major"});
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].field, "gpu_sm");
  EXPECT_EQ(found[1].field, "torch");
  EXPECT_EQ(found[2].field, "cuda_major");
}

TEST(FingerprintTest, TheBuilderSavesEveryFieldInOrderEmptyAsAbsent) {
  FingerprintSources s;
  s.torch = "2.11.0+cu130";
  s.cuda_runtime = "13.0";
  s.gpu_name = "NVIDIA H200";
  s.gpu_sm = "9.0";
  s.platform = "linux-x86_64";
  s.has_packages = true;
  s.tensorrt = "10.13.0";
  const FingerprintFields fields = build_fingerprint(s);
  const FingerprintFields expected = {{"gpu_name", "NVIDIA H200"},      {"gpu_sm", "9.0"},
                                      {"driver_version", std::nullopt}, {"cuda_runtime", "13.0"},
                                      {"torch", "2.11.0+cu130"},        {"tensorrt", "10.13.0"},
                                      {"torch_tensorrt", std::nullopt}, {"onnxruntime", std::nullopt},
                                      {"platform", "linux-x86_64"}};
  EXPECT_EQ(fields, expected);
}

TEST(FingerprintTest, WithoutPythonPackagesTheirFieldsAreLeftOut) {
  FingerprintSources s;
  s.torch = "2.11.0";
  s.platform = host_platform();
  const FingerprintFields fields = build_fingerprint(s);
  std::vector<std::string> names;
  for (const auto& [name, value] : fields) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu_name", "gpu_sm", "driver_version", "cuda_runtime", "torch",
                                             "platform"}));
  // A package a backend requires is absent on both sides' terms: saved "10.13.0" differs from it.
  const Fingerprint current(fields.begin(), fields.end());
  EXPECT_EQ(fingerprint_mismatches(kH200, current, {"tensorrt"}).size(), 1u);
}

TEST(FingerprintTest, HostPlatformIsSystemAndMachineInLowerCase) {
  const std::string p = host_platform();
  ASSERT_NE(p.find('-'), std::string::npos) << p;
  for (char c : p.substr(0, p.find('-'))) EXPECT_FALSE(std::isupper(static_cast<unsigned char>(c))) << p;
}

}  // namespace
}  // namespace aitune
