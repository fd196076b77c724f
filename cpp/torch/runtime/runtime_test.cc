#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/native_support.h"
#include "runtime/runtime.h"
#include "runtime/safetensors_io.h"

namespace aitune {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("aitune_rt_" + std::to_string(::getpid()) + "_" + name)).string();
}

TEST(SafetensorsIo, RoundTripKeepsNamesDtypesShapesAndValues) {
  NamedTensors in = {{"input_x", at::randn({2, 3})},
                     {"b", at::arange(5, at::kLong)},
                     {"m", at::ones({2, 2}, at::kBool)},
                     {"h", at::randn({4}).to(at::kHalf)},
                     {"s", at::scalar_tensor(3.5, at::kDouble)},
                     {"e", at::empty({0, 3})}};
  auto bytes = serialize_safetensors(in);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  auto out = parse_safetensors(*bytes);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].first, in[i].first);
    EXPECT_EQ((*out)[i].second.scalar_type(), in[i].second.scalar_type());
    EXPECT_EQ((*out)[i].second.sizes(), in[i].second.sizes());
    EXPECT_TRUE(at::equal((*out)[i].second, in[i].second)) << in[i].first;
  }
}

TEST(SafetensorsIo, FileRoundTripAndNonContiguousInput) {
  at::Tensor t = at::randn({3, 4}).t();  // non-contiguous
  const std::string path = temp_path("rt.safetensors");
  ASSERT_TRUE(write_safetensors_file(path, {{"t", t}}).ok());
  auto out = read_safetensors_file(path);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_TRUE(at::equal((*out)[0].second, t));
  std::remove(path.c_str());
}

TEST(SafetensorsIo, RejectsMalformedData) {
  EXPECT_EQ(parse_safetensors("abc").status().code(), StatusCode::kCorrupt);
  std::string bad(8, '\0');
  bad[0] = 100;  // header longer than the data
  EXPECT_EQ(parse_safetensors(bad).status().code(), StatusCode::kCorrupt);
  auto bytes = serialize_safetensors({{"x", at::ones({4})}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(parse_safetensors(bytes->substr(0, bytes->size() - 4)).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(serialize_safetensors({{"x", at::ones({1})}, {"x", at::ones({1})}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(read_safetensors_file(temp_path("missing.safetensors")).status().code(), StatusCode::kNotFound);
}

TEST(Runtime, MissingFileIsNotFound) {
  auto rt = Runtime::load(temp_path("missing.ait"), LoadOptions{});
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kNotFound);
  EXPECT_NE(rt.status().message().find("not found"), std::string::npos);
}

TEST(Runtime, NonZipFileIsCorrupt) {
  const std::string path = temp_path("not_a_zip.ait");
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a zip archive, just some text that is long enough to look for an end record";
  }
  auto rt = Runtime::load(path, LoadOptions{});
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), StatusCode::kCorrupt) << rt.status().to_string();
  std::remove(path.c_str());
}

TEST(Runtime, OutputsFindByAccessPath) {
  Outputs o;
  o.items.emplace_back("output[0]", at::ones({1}));
  o.items.emplace_back("output[1]", at::zeros({1}));
  ASSERT_NE(o.find("output[1]"), nullptr);
  EXPECT_TRUE(at::equal(*o.find("output[1]"), at::zeros({1})));
  EXPECT_EQ(o.find("output"), nullptr);
}

TEST(Runtime, TensorRtPlanNeedsABuildWithTensorRt) {
  const std::string where = "graph '0' of module 'm'";
  const std::string reason = native_unsupported_reason(where, "TensorRTBackend", true, false, true);
  EXPECT_EQ(reason.rfind(where + " uses TensorRTBackend: running a TensorRT plan from C++ needs aitune built with "
                         "TensorRT", 0), 0u) << reason;
  EXPECT_EQ(native_unsupported_reason(where, "TorchInductorAotBackend", true, true, false), "");
  EXPECT_NE(native_unsupported_reason(where, "TorchEagerBackend", false, false, false).find("needs Python"),
            std::string::npos);
  EXPECT_NE(native_unsupported_reason(where, "MyBackend", true, false, false).find("only AOTInductor"),
            std::string::npos);
}

}  // namespace
}  // namespace aitune
