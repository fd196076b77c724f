#include "runtime/runtime.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/zip_archive.h"
#include "runners/runner.h"
#include "runtime/native_support.h"
#include "runtime/runner_registry.h"
#include "runtime/safetensors_io.h"

namespace aitune {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("aitune_rt_" + std::to_string(::getpid()) + "_" + name))
      .string();
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
  const std::string reason = native_unsupported_reason(where, "tensorrt", true, {{"plan", "p"}});
  EXPECT_EQ(reason.rfind(where + " uses tensorrt: running a TensorRT plan from C++ needs aitune built with "
                                 "TensorRT",
                         0),
            0u)
      << reason;
  EXPECT_EQ(native_unsupported_reason(where, "torch_inductor_aot", true, {{"package", "p"}}), "");
  EXPECT_NE(native_unsupported_reason(where, "torch_eager", false, {}).find("needs Python"),
            std::string::npos);
}

TEST(Runtime, AnArtifactWithoutARegisteredRunnerIsNotNative) {
  const std::string reason = native_unsupported_reason("graph '0' of module 'm'", "onnx_runtime", true,
                                                       {{"model", "m"}, {"io", "i"}});
  EXPECT_EQ(reason,
            "graph '0' of module 'm' uses onnx_runtime, whose artifact kinds io, onnx_model have no runner "
            "in this C++ runtime (runners are registered for: aoti_package)");
}

TEST(RunnerRegistry, AotInductorPackagesAreBuiltIn) {
  EXPECT_EQ(artifact_kind("package"), "aoti_package");
  EXPECT_EQ(artifact_kind("exported_model"), "torch_tensorrt_program");
  EXPECT_EQ(artifact_kind("weird"), "weird");
  const auto kinds = registered_runner_kinds();
  EXPECT_NE(std::find(kinds.begin(), kinds.end(), "aoti_package"), kinds.end());
  EXPECT_EQ(runnable_artifact({{"plan", "a"}, {"package", "b"}}), "package");
  EXPECT_EQ(runnable_artifact({{"plan", "a"}}), std::nullopt);
}

// Doubles its one input.
class DoublingRunner : public Runner {
 public:
  StatusOr<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) override {
    return std::vector<at::Tensor>{inputs.at(0) * 2};
  }
  std::string describe() const override { return "DoublingRunner"; }
};

// A checkpoint whose one graph has an artifact of kind "fake_kind" (its key), for the CPU.
std::string write_fake_kind_checkpoint(const std::string& path) {
  using json = nlohmann::json;
  auto writer = ArchiveWriter::create(path, ZipWriteOptions{});
  EXPECT_TRUE(writer.ok());
  const std::string artifact = "modules/0/graphs/g/backend/fake.bin";
  EXPECT_TRUE(writer->add_bytes(artifact, "fake runner payload").ok());
  json files = json::array();
  for (const FileRecord& f : writer->files())
    files.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  auto leaf = [](const std::string& n) {
    return json{{"semantic_path", n},
                {"access_path", n},
                {"name", "input_" + n},
                {"shape", {"batch0", 3}},
                {"axis_kinds", {"batch", "static"}},
                {"min_shape", {1, 3}},
                {"max_shape", {4, 3}},
                {"multipliers", {1, 1}},
                {"dtype", "float32"},
                {"dtypes", {"float32"}}};
  };
  json backend = {{"name", "custom:tests.FakeBackend"},
                  {"config", json::object()},
                  {"precision_class", "fp32"},
                  {"is_jit", false},
                  {"native", true},
                  {"requires", json::array()},
                  {"device", "cpu"},
                  {"artifacts", {{"fake_kind", artifact}}},
                  {"input_order", nullptr},
                  {"output_paths", {"out"}},
                  {"profiles", nullptr}};
  json graph = {{"name", "g"},
                // f(x) with a rank-2 tensor x: the arguments container, the name, the tensor.
                {"key_tokens", {257, 1, 2, 7, 4, 2}},
                {"input_spec", {{"leaves", {leaf("x")}}}},
                {"output_spec", {{"leaves", {leaf("out")}}}},
                {"backend", backend},
                {"samples", json::array()}};
  json module = {{"name", "m"},
                 {"prefix", ""},
                 {"class", "t.Net"},
                 {"strict_mode", true},
                 {"fallback_policy", "raise"},
                 {"weights", nullptr},
                 {"forward_signature", json::array()},
                 {"graphs", {graph}}};
  json manifest = {{"format", "aitune.checkpoint"},
                   {"format_version", 2},
                   {"aitune_version", "0"},
                   {"created_at", "2026-12-01T00:00:00Z"},
                   {"fingerprint", json::object()},
                   {"root", {{"kind", "module"}, {"class", "t.Net"}, {"weights", nullptr}}},
                   {"modules", {module}},
                   {"files", files}};
  EXPECT_TRUE(writer->finish(manifest.dump()).ok());
  return artifact;
}

TEST(RunnerRegistry, TheRuntimeServesARegisteredKind) {
  const std::string path = temp_path("fake_kind.ait");
  const std::string cache = temp_path("fake_kind_cache");
  const std::string artifact = write_fake_kind_checkpoint(path);
  LoadOptions options;
  options.device_index = -1;
  options.cache_dir = cache;

  // Unregistered: described, not native, and running says why (CLI exit 5).
  auto unserved = Runtime::load(path, options);
  ASSERT_TRUE(unserved.ok()) << unserved.status().to_string();
  const GraphInfo& before = (*(*unserved)->module("m"))->graphs().at(0);
  EXPECT_FALSE(before.native);
  EXPECT_EQ(before.backend_name, "custom:tests.FakeBackend");
  EXPECT_NE(before.not_native_reason.find("artifact kind fake_kind has no runner"), std::string::npos)
      << before.not_native_reason;
  auto refused = (*(*unserved)->module("m"))->run({{"x", at::ones({2, 3})}});
  EXPECT_EQ(refused.status().code(), StatusCode::kBackendUnavailable);

  std::vector<std::string> loaded_from;
  register_runner_kind("fake_kind", [&](const std::string& file, int device) -> StatusOr<LoadedRunner> {
    loaded_from.push_back(file);
    return LoadedRunner{std::make_shared<DoublingRunner>(), device};
  });
  auto rt = Runtime::load(path, options);
  unregister_runner_kind("fake_kind");
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  const ModuleHandle* m = *(*rt)->module("m");
  EXPECT_TRUE(m->graphs().at(0).native) << m->graphs().at(0).not_native_reason;
  ASSERT_EQ(loaded_from.size(), 1u);
  EXPECT_TRUE(loaded_from[0].size() > artifact.size() &&
              loaded_from[0].compare(loaded_from[0].size() - artifact.size(), artifact.size(), artifact) == 0)
      << loaded_from[0];
  auto out = m->run({{"x", at::full({2, 3}, 1.5)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_NE(out->find("out"), nullptr);
  EXPECT_TRUE(at::equal(*out->find("out"), at::full({2, 3}, 3.0)));
  // Not std::filesystem::remove_all: libtorch.so exports a broken copy that this binary binds to.
  EXPECT_EQ(std::system(("rm -rf '" + cache + "'").c_str()), 0);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace aitune
