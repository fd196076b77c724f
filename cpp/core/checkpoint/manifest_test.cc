#include "checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace aitune {
namespace {

using json = nlohmann::json;

json leaf(const std::string& name, std::vector<int64_t> lo, std::vector<int64_t> hi) {
  json kinds = json::array(), shape = json::array(), mult = json::array();
  for (size_t i = 0; i < lo.size(); ++i) {
    kinds.push_back(i == 0 ? "batch" : "static");
    shape.push_back(i == 0 ? json("batch0") : json(lo[i]));
    mult.push_back(1.0);
  }
  return {{"semantic_path", {{"tuple", {name, 0}}}},
          {"access_path", name + "[0]"},
          {"name", "input_" + name},
          {"shape", shape},
          {"axis_kinds", kinds},
          {"min_shape", lo},
          {"max_shape", hi},
          {"multipliers", mult},
          {"dtype", "float32"},
          {"dtypes", {"float32"}}};
}

// One module with one AOTInductor graph, as ait.save writes it in format `version`.
json manifest(int version) {
  const std::string hash(64, 'b');
  json backend = {{"config", {{"use_cuda_graphs", true}}},
                  {"extra", json::object()},
                  {"input_order", {0}},
                  {"output_paths", {"output"}},
                  {"precision_class", "fp32"},
                  {"is_jit", false},
                  {"native", true},
                  {"profiles", json::array({json::array({json{1, 4}, json{nullptr, 4}}), nullptr})},
                  {"artifacts", {{"package", "modules/0/graphs/g/backend/model.pt2"}}},
                  {"requires", {"torch", "cuda_major"}},
                  {"device", "cuda:0"}};
  if (version == 1) {
    backend["class"] =
        "aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend";
  } else {
    backend["name"] = "torch_inductor_aot";
  }
  json inputs = {{"leaves",
                  {leaf("x", {1, 4}, {8, 4}),
                   leaf("y", {2}, {2}),
                   {{"semantic_path", "scale"}, {"access_path", "scale"}, {"value", {{"value", 2}}}}}}};
  json graph = {{"name", "g"},
                {"key_tokens", json::array()},
                {"input_spec", inputs},
                {"output_spec", {{"leaves", {leaf("out", {1}, {8})}}}},
                {"backend", backend},
                {"samples", json::array()},
                {"correctness", {{"passed", true}}}};
  json module = {{"name", "m"},
                 {"prefix", ""},
                 {"class", "__main__.Net"},
                 {"strict_mode", true},
                 {"fallback_policy", "raise"},
                 {"weights", nullptr},
                 {"forward_signature",
                  {{{"name", "x"}, {"kind", "POSITIONAL_OR_KEYWORD"}, {"has_default", false}},
                   {{"name", "y"}, {"kind", "KEYWORD_ONLY"}, {"has_default", true}}}},
                 {"graphs", {graph}}};
  return {
      {"format", "aitune.checkpoint"},
      {"format_version", version},
      {"aitune_version", "0.2.0"},
      {"created_at", "2026-12-01T00:00:00Z"},
      {"fingerprint", {{"torch", "2.11.0+cu130"}, {"gpu_sm", "9.0"}, {"tensorrt", nullptr}, {"build", 7}}},
      {"root", {{"kind", "module"}, {"class", "x.Y"}, {"weights", nullptr}}},
      {"modules", {module}},
      {"files", {{{"path", "modules/0/graphs/g/backend/model.pt2"}, {"size", 123}, {"sha256", hash}}}}};
}

TEST(Manifest, ReadsEveryFieldTheRuntimeUses) {
  auto read = read_manifest(manifest(2).dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Manifest& m = *read;
  EXPECT_EQ(m.format_version, 2);
  EXPECT_EQ(m.aitune_version, "0.2.0");
  EXPECT_EQ(m.fingerprint.at("torch"), "2.11.0+cu130");
  EXPECT_EQ(m.fingerprint.at("tensorrt"), std::nullopt);
  EXPECT_EQ(m.fingerprint.at("build"), "7");  // a number keeps its JSON text
  ASSERT_EQ(m.files.size(), 1u);
  EXPECT_EQ(m.files[0].size, 123u);
  ASSERT_EQ(m.modules.size(), 1u);
  const ManifestModule& mod = m.modules[0];
  EXPECT_EQ(mod.class_name, "__main__.Net");
  EXPECT_EQ(mod.forward_params, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(mod.graphs.size(), 1u);
  const ManifestGraph& g = mod.graphs[0];
  EXPECT_EQ(g.correctness_json, R"({"passed":true})");
  ASSERT_EQ(g.inputs.size(), 3u);
  EXPECT_EQ(g.inputs[0].semantic_path, "('x', 0)");
  EXPECT_EQ(g.inputs[0].shape, (std::vector<std::string>{"batch0", "4"}));
  EXPECT_EQ(g.inputs[0].max_shape, (std::vector<int64_t>{8, 4}));
  EXPECT_FALSE(g.inputs[2].is_tensor);
  EXPECT_EQ(g.inputs[2].value_json, R"({"value":2})");
  ASSERT_TRUE(g.inputs[2].scalar.has_value());
  EXPECT_EQ(std::get<int64_t>(*g.inputs[2].scalar), 2);
  const ManifestBackend& b = g.backend;
  EXPECT_EQ(b.name, "torch_inductor_aot");
  EXPECT_TRUE(b.class_path.empty());
  EXPECT_TRUE(b.native);
  EXPECT_TRUE(b.use_cuda_graphs);
  EXPECT_FALSE(b.has_tf32);
  EXPECT_EQ(b.device, "cuda:0");
  EXPECT_EQ(b.requires_, (std::vector<std::string>{"torch", "cuda_major"}));
  EXPECT_EQ(b.artifacts.at("package"), "modules/0/graphs/g/backend/model.pt2");
  ASSERT_EQ(b.profiles.size(), 2u);
  EXPECT_TRUE(b.profiles[0].bounded);
  EXPECT_EQ(b.profiles[0].min, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(b.profiles[0].max[0], std::nullopt);
  EXPECT_EQ(b.profiles[0].max[1], 4);
  EXPECT_FALSE(b.profiles[1].bounded);
}

TEST(Manifest, FormatOneClassPathIsMappedToItsStableName) {
  auto read = read_manifest(manifest(1).dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  const ManifestBackend& b = read->modules[0].graphs[0].backend;
  EXPECT_EQ(b.name, "torch_inductor_aot");
  EXPECT_EQ(b.class_path,
            "aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend");

  json custom = manifest(1);
  custom["modules"][0]["graphs"][0]["backend"]["class"] = "my_pkg.MyBackend";
  auto read_custom = read_manifest(custom.dump());
  ASSERT_TRUE(read_custom.ok()) << read_custom.status().message();
  EXPECT_EQ(read_custom->modules[0].graphs[0].backend.name, "custom:my_pkg.MyBackend");
}

TEST(Manifest, SchemaErrorsPassThrough) {
  json future = manifest(2);
  future["format_version"] = 3;
  auto read = read_manifest(future.dump());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kUnsupported);
  auto broken = read_manifest("{not json");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace aitune
