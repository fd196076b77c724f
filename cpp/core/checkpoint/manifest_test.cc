#include "checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "checkpoint/manifest_backend.h"

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
                // f(x, y) with tensors x (rank 2) and y (rank 1) and a constant (spec/graph_key.cc).
                {"key_tokens", {257, 2, 2, 11, 2, 12, 4, 2, 4, 1, 5, 13}},
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
  ASSERT_EQ(mod.forward_signature.size(), 2u);
  EXPECT_EQ(mod.forward_signature[0].name, "x");
  EXPECT_EQ(mod.forward_signature[1].name, "y");
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
  EXPECT_EQ(b.input_order, (std::vector<int>{0}));
  EXPECT_EQ(b.output_paths, (std::vector<std::string>{"output"}));
  ASSERT_TRUE(b.profiles.has_value());
  const std::vector<ManifestProfile>& profiles = *b.profiles;
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_TRUE(profiles[0].bounded);
  EXPECT_EQ(profiles[0].min, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(profiles[0].max[0], std::nullopt);
  EXPECT_EQ(profiles[0].max[1], 4);
  EXPECT_FALSE(profiles[1].bounded);
}

// What Python's ait.load, the results store and dynamo's launcher read, besides the above.
TEST(Manifest, ReadsEveryFieldPythonReads) {
  json raw = manifest(2);
  const std::string digest(128, 'c');
  raw["kind"] = "aitune.results";
  raw["results_key"] = "k123";
  raw["sha512"] = {{"modules/0/graphs/g/backend/model.pt2", digest}};
  raw["root"] = {{"kind", "pipeline"}, {"class", "p.Pipe"}, {"weights", nullptr}};
  json& mod = raw["modules"][0];
  mod["prefix"] = "encoder.0";
  mod["strict_mode"] = false;
  mod["dynamic_shapes"] = {{"x", {{"0", "batch"}}}};
  json& g = mod["graphs"][0];
  g["key_tokens"][3] = 18446744073709551615ULL;
  g["llm_phase"] = "decode";
  g["input_spec"]["leaves"][0]["multipliers"] = {nullptr, 2};
  g["input_spec"]["leaves"][0]["dtypes"] = {"float32", "float16"};
  g["input_spec"]["leaves"][2]["needs_eq"] = true;
  json& b = g["backend"];
  b["extra"] = {{"num_outputs", 1}};
  b["tf32"] = {{"matmul", true}};
  b["own_state"] = true;
  b["state"] = {{"dict", json::array()}};
  b["state_tensors"] = "modules/0/graphs/g/backend/model.pt2";

  auto read = read_manifest(raw.dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Manifest& m = *read;
  EXPECT_EQ(m.kind, "aitune.results");
  EXPECT_EQ(m.results_key, "k123");
  EXPECT_EQ(m.created_at, "2026-12-01T00:00:00Z");
  EXPECT_EQ(m.sha512.at("modules/0/graphs/g/backend/model.pt2"), digest);
  EXPECT_EQ(m.root.kind, "pipeline");
  EXPECT_EQ(m.root.class_name, "p.Pipe");
  EXPECT_EQ(m.root.weights_json, "null");
  EXPECT_EQ(m.files[0].sha256, std::string(64, 'b'));
  const ManifestModule& module = m.modules[0];
  EXPECT_EQ(module.prefix, "encoder.0");
  EXPECT_FALSE(module.strict_mode);
  EXPECT_EQ(module.fallback_policy, "raise");
  EXPECT_EQ(module.weights_json, "null");
  EXPECT_EQ(module.dynamic_shapes_json, R"({"x":{"0":"batch"}})");
  EXPECT_EQ(module.forward_signature[1].kind, "KEYWORD_ONLY");
  EXPECT_TRUE(module.forward_signature[1].has_default);
  EXPECT_FALSE(module.forward_signature[0].has_default);
  const ManifestGraph& graph = module.graphs[0];
  EXPECT_EQ(graph.key_tokens,
            (std::vector<uint64_t>{257, 2, 2, 18446744073709551615ULL, 2, 12, 4, 2, 4, 1, 5, 13}));
  EXPECT_EQ(graph.llm_phase, "decode");
  const ManifestLeaf& x = graph.inputs[0];
  EXPECT_TRUE(x.semantic_steps.is_tuple);
  ASSERT_EQ(x.semantic_steps.steps.size(), 2u);
  EXPECT_EQ(std::get<std::string>(x.semantic_steps.steps[0]), "x");
  EXPECT_EQ(std::get<int64_t>(x.semantic_steps.steps[1]), 0);
  EXPECT_EQ(x.multipliers, (std::vector<std::optional<double>>{std::nullopt, 2.0}));
  EXPECT_EQ(x.dtypes, (std::vector<std::string>{"float32", "float16"}));
  const ManifestLeaf& scale = graph.inputs[2];
  EXPECT_FALSE(scale.semantic_steps.is_tuple);
  EXPECT_EQ(std::get<std::string>(scale.semantic_steps.steps[0]), "scale");
  EXPECT_TRUE(scale.needs_eq);
  EXPECT_FALSE(graph.inputs[1].needs_eq);
  const ManifestBackend& backend = graph.backend;
  EXPECT_EQ(backend.config_json, R"({"use_cuda_graphs":true})");
  EXPECT_EQ(backend.extra_json, R"({"num_outputs":1})");
  EXPECT_TRUE(backend.has_tf32);
  EXPECT_EQ(backend.tf32_json, R"({"matmul":true})");
  EXPECT_TRUE(backend.own_state);
  EXPECT_EQ(backend.state_json, R"({"dict":[]})");
  EXPECT_EQ(backend.state_tensors, "modules/0/graphs/g/backend/model.pt2");
}

// What Python reads (`_C.ManifestBackend.<key>`) is each stored field as written, by its own name;
// a format-1 "class" reads as class_path and the stable name it maps to.
TEST(Manifest, TheBackendFieldTableGivesEveryFieldAsWritten) {
  for (int version : {1, 2}) {
    const json written = manifest(version)["modules"][0]["graphs"][0]["backend"];
    auto read = read_manifest(manifest(version).dump());
    ASSERT_TRUE(read.ok()) << read.status().message();
    const ManifestBackend& backend = read->modules[0].graphs[0].backend;
    std::map<std::string, json> fields;
    for (const BackendField& f : backend_fields()) {
      EXPECT_TRUE(fields.emplace(f.key, json::parse(f.json(backend))).second) << f.key << " is listed twice";
    }
    for (const auto& [key, value] : written.items()) {
      if (key == "class") continue;
      ASSERT_TRUE(fields.count(key)) << key;
      EXPECT_EQ(fields[key], value) << key;
    }
    EXPECT_EQ(fields["name"], "torch_inductor_aot");
    EXPECT_EQ(fields["class_path"], version == 1 ? written["class"] : json(nullptr));
    EXPECT_EQ(fields["use_cuda_graphs"], true);  // the config's switch
    EXPECT_EQ(fields["state"], nullptr);
    EXPECT_EQ(fields["state_tensors"], nullptr);
    EXPECT_EQ(fields["tf32"], nullptr);
    EXPECT_EQ(fields["has_tf32"], false);
  }
}

TEST(Manifest, AbsentAndNullFieldsReadAsTheirDefaults) {
  json raw = manifest(2);
  json& g = raw["modules"][0]["graphs"][0];
  g["input_spec"]["leaves"] = json::array({g["input_spec"]["leaves"][0]});
  g["key_tokens"] = {257, 1, 2, 11, 4, 2};
  json& b = g["backend"];
  b.erase("extra");
  b["artifacts"] = json::object();  // no package: a graph Python serves, without native order
  raw["files"] = json::array();
  b["input_order"] = nullptr;
  b["output_paths"] = nullptr;
  b["profiles"] = nullptr;
  b["device"] = nullptr;
  auto read = read_manifest(raw.dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  const Manifest& m = *read;
  EXPECT_EQ(m.kind, std::nullopt);
  EXPECT_EQ(m.results_key, std::nullopt);
  EXPECT_TRUE(m.sha512.empty());
  EXPECT_EQ(m.modules[0].dynamic_shapes_json, "null");
  EXPECT_EQ(m.modules[0].graphs[0].llm_phase, std::nullopt);
  const ManifestBackend& r = m.modules[0].graphs[0].backend;
  EXPECT_EQ(r.extra_json, "{}");
  EXPECT_EQ(r.tf32_json, "null");
  EXPECT_EQ(r.input_order, std::nullopt);
  EXPECT_EQ(r.output_paths, std::nullopt);
  EXPECT_EQ(r.profiles, std::nullopt);
  EXPECT_EQ(r.device, "");
  EXPECT_FALSE(r.own_state);
  EXPECT_EQ(r.state_json, "null");
  EXPECT_EQ(r.state_tensors, std::nullopt);
}

// One rule (manifest.h): the config's switch, which the backend is restored with; the writer's
// copy under "runtime" is not read.
TEST(Manifest, UseCudaGraphsIsTheConfigsSwitch) {
  json raw = manifest(2);
  json& b = raw["modules"][0]["graphs"][0]["backend"];
  b["runtime"] = {{"use_cuda_graphs", false}};
  auto read = read_manifest(raw.dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE(read->modules[0].graphs[0].backend.use_cuda_graphs);
  b["config"] = json::object();
  b["runtime"] = {{"use_cuda_graphs", true}};
  read = read_manifest(raw.dump());
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_FALSE(read->modules[0].graphs[0].backend.use_cuda_graphs);
}

TEST(Manifest, AGraphSpecReadsAsTheManifestsGraphDoes) {
  const json graph = manifest(2)["modules"][0]["graphs"][0];
  json spec = graph;
  spec.erase("backend");
  spec.erase("samples");
  spec.erase("correctness");
  auto alone = read_graph_spec(spec.dump());
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  auto whole = read_manifest(manifest(2).dump());
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  const ManifestGraph& in_manifest = whole->modules[0].graphs[0];
  EXPECT_EQ(alone->name, in_manifest.name);
  EXPECT_EQ(alone->key_tokens, in_manifest.key_tokens);
  ASSERT_EQ(alone->inputs.size(), in_manifest.inputs.size());
  for (size_t i = 0; i < alone->inputs.size(); ++i) {
    EXPECT_EQ(alone->inputs[i].access_path, in_manifest.inputs[i].access_path);
    EXPECT_EQ(alone->inputs[i].multipliers, in_manifest.inputs[i].multipliers);
    EXPECT_EQ(alone->inputs[i].value_json, in_manifest.inputs[i].value_json);
  }
  EXPECT_EQ(alone->outputs.size(), in_manifest.outputs.size());
  EXPECT_TRUE(alone->samples.empty());
  spec["key_tokens"] = "abc";
  EXPECT_EQ(read_graph_spec(spec.dump()).status().code(), StatusCode::kCorrupt);
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
