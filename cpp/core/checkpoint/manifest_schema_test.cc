#include "checkpoint/manifest_schema.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace aitune {
namespace {

using json = nlohmann::json;

const std::string kHash(64, 'a');

json tensor_leaf(const std::string& name, std::vector<int64_t> lo, std::vector<int64_t> hi) {
  json kinds = json::array(), shape = json::array(), mult = json::array();
  for (size_t i = 0; i < lo.size(); ++i) {
    kinds.push_back(i == 0 ? "batch" : "static");
    shape.push_back(i == 0 ? json("batch0") : json(lo[i]));
    mult.push_back(1.0);
  }
  return {{"semantic_path", name}, {"access_path", name},  {"name", "input_" + name}, {"shape", shape},
          {"axis_kinds", kinds},   {"min_shape", lo},      {"max_shape", hi},         {"multipliers", mult},
          {"dtype", "float32"},    {"dtypes", {"float32"}}};
}

// The key of a call f(x, scale) with a rank-2 tensor x and a constant scale (spec/graph_key.cc):
// the arguments container (tag 1, kind 1) with 2 children, the two parameter names (tag 2, their
// hashes), then the leaves: a tensor of rank 2 (tag 4) and a value (tag 5, its hash).
json call_key() { return {257, 2, 2, 111, 2, 18446744073709551615ULL, 4, 2, 5, 333}; }

// A manifest as ait.save writes it: an eager graph with weights and a sample, and a native
// (AOTInductor) graph with its package.
json valid() {
  json files = json::array();
  for (const char* p : {"modules/0/weights.safetensors", "modules/0/graphs/0/samples/0.safetensors",
                        "modules/0/graphs/0/samples/0.json", "modules/0/graphs/1/backend/model.pt2"}) {
    files.push_back({{"path", p}, {"size", 10}, {"sha256", kHash}});
  }
  json spec = {{"leaves",
                {tensor_leaf("x", {1, 4}, {8, 4}),
                 {{"semantic_path", "scale"},
                  {"access_path", "scale"},
                  {"value", {{"value", 2.0}}},
                  {"needs_eq", false}}}}};
  json out = {{"leaves", {tensor_leaf("y", {1, 3}, {8, 3})}}};
  json eager = {{"class", "aitune.torch.backend.torch_eager.torch_eager_backend.TorchEagerBackend"},
                {"config", {{"use_cuda_graphs", false}}},
                {"extra", json::object()},
                {"input_order", nullptr},
                {"output_paths", nullptr},
                {"precision_class", "fp32"},
                {"tf32", nullptr},
                {"is_jit", true},
                {"native", false},
                {"runtime", json::object()},
                {"profiles", nullptr},
                {"artifacts", json::object()},
                {"requires", json::array()},
                {"device", "cpu"}};
  json aot = eager;
  aot["class"] = "aitune.torch.backend.torch_inductor_aot.torch_inductor_aot_backend.TorchInductorAotBackend";
  aot["is_jit"] = false;
  aot["native"] = true;
  aot["input_order"] = {0};
  aot["output_paths"] = {"output"};
  aot["profiles"] = json::array({json::array({json{1, 4}, json{8, nullptr}})});
  aot["artifacts"] = {{"package", "modules/0/graphs/1/backend/model.pt2"}};
  aot["requires"] = {"torch"};
  aot["device"] = "cuda:0";
  json graph0 = {{"name", "0"},
                 {"llm_phase", nullptr},
                 {"key_tokens", call_key()},
                 {"input_spec", spec},
                 {"output_spec", out},
                 {"backend", eager},
                 {"samples", {"modules/0/graphs/0/samples/0"}}};
  json graph1 = graph0;
  graph1["name"] = "1";
  graph1["backend"] = aot;
  graph1["samples"] = json::array();
  json module = {
      {"name", "my-model"},
      {"prefix", ""},
      {"class", "__main__.Net"},
      {"strict_mode", true},
      {"fallback_policy", "raise"},
      {"weights",
       {{"entry", "modules/0/weights.safetensors"},
        {"aliases", json::object()},
        {"extra_state", json::object()}}},
      {"forward_signature", {{{"name", "x"}, {"kind", "POSITIONAL_OR_KEYWORD"}, {"has_default", false}}}},
      {"dynamic_shapes", nullptr},
      {"graphs", {graph0, graph1}}};
  return {{"format", "aitune.checkpoint"},
          {"format_version", 1},
          {"aitune_version", "0.1.0"},
          {"created_at", "2026-12-01T00:00:00Z"},
          {"fingerprint", {{"torch", "2.11.0"}, {"gpu_sm", nullptr}}},
          {"config", json::object()},
          {"root", {{"kind", "module"}, {"class", "x.Y"}, {"weights", nullptr}}},
          {"modules", {module}},
          {"files", files}};
}

// Applies `change` to a valid manifest and expects `code` with `fragment` in the message.
void expect_refused(const std::function<void(json&)>& change, const std::string& fragment,
                    StatusCode code = StatusCode::kCorrupt) {
  json m = valid();
  change(m);
  const Status s = validate_manifest(m);
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
}

json& graph(json& m, int i) { return m["modules"][0]["graphs"][i]; }

TEST(ManifestSchema, ValidManifestPasses) {
  const Status s = validate_manifest(valid());
  EXPECT_TRUE(s.ok()) << s.message();
  auto parsed = parse_manifest(valid().dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
}

TEST(ManifestSchema, FormatAndVersion) {
  expect_refused([](json& m) { m["format"] = "zip"; }, "not an aitune checkpoint", StatusCode::kUnsupported);
  expect_refused([](json& m) { m["format_version"] = 3; },
                 "Unsupported checkpoint format_version 3 (this aitune reads 1 and 2)",
                 StatusCode::kUnsupported);
  expect_refused([](json& m) { m["format_version"] = 0; }, "format_version 0", StatusCode::kUnsupported);
  expect_refused([](json& m) { m["format_version"] = "1"; }, "format_version \"1\"",
                 StatusCode::kUnsupported);
}

// Format 2: a backend entry names its backend by stable name instead of its class path.
json format2() {
  json m = valid();
  m["format_version"] = 2;
  for (json& g : m["modules"][0]["graphs"]) {
    const std::string cls = g["backend"]["class"].get<std::string>();
    g["backend"].erase("class");
    g["backend"]["name"] = cls.find("Eager") != std::string::npos ? "torch_eager" : "torch_inductor_aot";
  }
  return m;
}

TEST(ManifestSchema, FormatTwoNamesTheBackend) {
  EXPECT_TRUE(validate_manifest(format2()).ok()) << validate_manifest(format2()).message();
  json custom = format2();
  graph(custom, 0)["backend"]["name"] = "custom:my_pkg.backends.MyBackend";
  EXPECT_TRUE(validate_manifest(custom).ok()) << validate_manifest(custom).message();

  json no_name = format2();
  graph(no_name, 0)["backend"].erase("name");
  graph(no_name, 0)["backend"]["class"] =
      "aitune.torch.backend.torch_eager.torch_eager_backend.TorchEagerBackend";
  const Status missing = validate_manifest(no_name);  // a format-1 entry in a format-2 file
  EXPECT_EQ(missing.code(), StatusCode::kCorrupt);
  EXPECT_NE(missing.message().find("modules[0].graphs[0].backend.name is missing"), std::string::npos)
      << missing.message();
  for (const json& bad_name : {json(""), json(5), json("two words"), json(std::string(513, 'n'))}) {
    json m = format2();
    graph(m, 1)["backend"]["name"] = bad_name;
    const Status s = validate_manifest(m);
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << bad_name.dump();
    EXPECT_NE(s.message().find(bad_name.is_string() ? "backend.name must be a backend name"
                                                    : "backend.name must be a string"),
              std::string::npos)
        << s.message();
  }
}

TEST(ManifestSchema, FormatOneNeedsTheClass) {
  expect_refused([](json& m) { graph(m, 0)["backend"].erase("class"); },
                 "modules[0].graphs[0].backend.class is missing");
}

TEST(ManifestSchema, NoModulesOrGraphsIsCorrupt) {
  expect_refused([](json& m) { m["modules"] = json::array(); }, "modules is empty");
  expect_refused([](json& m) { m["modules"][0]["graphs"] = json::array(); }, "modules[0].graphs is empty");
  expect_refused([](json& m) { graph(m, 0).erase("backend"); }, "modules[0].graphs[0].backend is missing");
}

TEST(ManifestSchema, JitBackendsNeedTheWeights) {
  expect_refused([](json& m) { m["modules"][0]["weights"] = nullptr; }, "modules[0].weights is null, but");
  json store = valid();  // a tuning-results store file never holds weights
  store["kind"] = "aitune.results";
  store["modules"][0]["weights"] = nullptr;
  EXPECT_TRUE(validate_manifest(store).ok()) << validate_manifest(store).message();
  expect_refused([](json& m) { m["kind"] = "other"; }, "kind must be one of");
}

TEST(ManifestSchema, TypesAreChecked) {
  expect_refused([](json& m) { m["modules"][0]["strict_mode"] = "yes"; },
                 "modules[0].strict_mode must be true or false, got \"yes\"");
  expect_refused([](json& m) { m["files"][0]["size"] = -1; }, "files[0].size must be a size in bytes");
  expect_refused([](json& m) { m["files"][0]["sha256"] = "zz"; }, "files[0].sha256 must be 64 hex digits");
  expect_refused(
      [](json& m) {
        graph(m, 0)["input_spec"]["leaves"][0]["min_shape"] = {9, 4};
      },
      "above max_shape");
  expect_refused([](json& m) { graph(m, 0)["input_spec"]["leaves"][0]["dtype"] = "float128"; },
                 "a torch dtype name");
  expect_refused([](json& m) { graph(m, 0)["key_tokens"] = {1.5}; }, "key_tokens[] must be an integer");
  expect_refused([](json& m) { graph(m, 1)["backend"]["precision_class"] = "fp64"; },
                 "precision_class must be one of");
  expect_refused([](json& m) { graph(m, 1)["backend"]["device"] = "tpu:0"; }, "device must be");
  expect_refused(
      [](json& m) { graph(m, 0)["input_spec"]["leaves"].push_back(graph(m, 0)["input_spec"]["leaves"][0]); },
      "\"x\" appears twice");
}

TEST(ManifestSchema, NamesThatBecomePathsAreRefused) {
  for (const char* name : {"/elsewhere/x", "..", "a/b", "", "a\\b"}) {
    expect_refused([&](json& m) { m["modules"][0]["name"] = name; },
                   "must be a module name usable as a folder name");
  }
  expect_refused([](json& m) { graph(m, 0)["name"] = "../0"; },
                 "must be a graph name usable as a folder name");
  expect_refused([](json& m) { m["modules"][0]["prefix"] = "__class__"; }, "prefix must be");
  expect_refused([](json& m) { m["modules"][0]["prefix"] = "encoder.__dict__"; }, "prefix must be");
  EXPECT_TRUE(is_safe_name("torch.nn.modules.container.Sequential"));
  EXPECT_TRUE(is_safe_name("Net.encoder.0"));
}

TEST(ManifestSchema, ReferencesMustBeListedFilesInTheirOwnFolder) {
  expect_refused([](json& m) { graph(m, 1)["backend"]["artifacts"]["package"] = "/abs/x.pt2"; },
                 "names '/abs/x.pt2', which is not a listed file");
  expect_refused([](json& m) { graph(m, 1)["backend"]["artifacts"]["package"] = "../x.pt2"; },
                 "not a listed file");
  expect_refused(
      [](json& m) {
        m["files"].push_back(
            {{"path", "modules/0/graphs/0/backend/other.pt2"}, {"size", 1}, {"sha256", kHash}});
        graph(m, 1)["backend"]["artifacts"]["package"] = "modules/0/graphs/0/backend/other.pt2";
      },
      "which is outside modules/0/graphs/1/backend/");
  expect_refused([](json& m) { graph(m, 0)["samples"] = {"modules/0/graphs/0/samples/9"}; },
                 "not a listed file");
  expect_refused([](json& m) { m["modules"][0]["weights"]["entry"] = "modules/0/graphs/0/samples/0.json"; },
                 "weights.entry must be \"modules/0/weights.safetensors\"");
  expect_refused([](json& m) { m["files"].push_back(m["files"][0]); }, "is listed twice");
}

TEST(ManifestSchema, Sha512DigestsNameListedEntries) {
  const std::string digest(128, 'f');
  json m = valid();
  m["sha512"] = {{"modules/0/weights.safetensors", digest}};
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  expect_refused([&](json& v) { v["sha512"] = {{"../../etc/passwd", digest}}; }, "not a listed file");
  expect_refused(
      [&](json& v) {
        v["sha512"] = {{"modules/0/weights.safetensors", "abc"}};
      },
      "128 hex digits");
  expect_refused([](json& v) { v["sha512"] = json::array(); }, "sha512 must be an object");
}

TEST(ManifestSchema, NativeGraphsNeedConsistentOrderAndPaths) {
  expect_refused([](json& m) { graph(m, 1)["backend"]["input_order"] = {1}; },
                 "input_order must be distinct");
  expect_refused(
      [](json& m) {
        graph(m, 1)["backend"]["output_paths"] = {"a", "b"};
      },
      "one access path per output");
  expect_refused([](json& m) { graph(m, 1)["backend"]["input_order"] = nullptr; },
                 "serves a native package but has no input_order");
  expect_refused([](json& m) { graph(m, 1)["backend"]["profiles"] = json::array(); },
                 "one range per tensor input");
}

TEST(ManifestSchema, ArtifactsServedFromPythonNeedNoNativeOrder) {
  json m = valid();
  json& b = graph(m, 1)["backend"];
  m["files"].push_back(
      {{"path", "modules/0/graphs/1/backend/model_raw.onnx"}, {"size", 1}, {"sha256", kHash}});
  b["artifacts"] = {{"onnx", "modules/0/graphs/1/backend/model_raw.onnx"}};  // ONNX Runtime: Python serves it
  b["input_order"] = nullptr;
  b["output_paths"] = nullptr;
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
}

// Fields the typed manifest (manifest.h) holds as C++ types: a value outside them is refused here,
// so reading never wraps, truncates or throws.
TEST(ManifestSchema, FieldsTheTypedManifestHoldsMustFitTheirTypes) {
  expect_refused([](json& m) { graph(m, 0)["key_tokens"] = {-1}; },
                 "key_tokens[] must be an integer from 0 to 2^64-1, got -1");
  expect_refused(
      [](json& m) {
        graph(m, 0)["input_spec"]["leaves"][0]["semantic_path"] = {{"tuple", {"x", 9223372036854775808ULL}}};
      },
      "semantic_path.tuple[] must be a string or a 64-bit integer");
  expect_refused([](json& m) { m["results_key"] = 7; }, "manifest.results_key must be a string, got 7");
  expect_refused([](json& m) { graph(m, 0)["backend"]["own_state"] = "yes"; },
                 "backend.own_state must be true or false");
}

TEST(ManifestSchema, AnOwnStateBackendsTensorsAreOneOfItsListedFiles) {
  json m = valid();
  m["files"].push_back(
      {{"path", "modules/0/graphs/0/backend/state.safetensors"}, {"size", 1}, {"sha256", kHash}});
  graph(m, 0)["backend"]["own_state"] = true;
  graph(m, 0)["backend"]["state"] = {{"dict", json::array()}};
  graph(m, 0)["backend"]["state_tensors"] = "modules/0/graphs/0/backend/state.safetensors";
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  graph(m, 0)["backend"]["state_tensors"] = nullptr;
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  expect_refused([](json& v) { graph(v, 0)["backend"]["state_tensors"] = "../../etc/passwd"; },
                 "state_tensors names '../../etc/passwd', which is not a listed file");
  expect_refused(
      [](json& v) { graph(v, 1)["backend"]["state_tensors"] = "modules/0/graphs/0/samples/0.json"; },
      "which is outside modules/0/graphs/1/backend/");
}

TEST(ManifestSchema, KeyTokensMustDescribeTheGraphsInputs) {
  expect_refused(
      [](json& m) { graph(m, 0)["key_tokens"] = json::array(); },
      "key_tokens do not match the graph's input spec: it does not open with the call's arguments");
  expect_refused([](json& m) { graph(m, 0)["key_tokens"] = {257, 2, 2}; }, "an odd number of tokens (3)");
  expect_refused([](json& m) { graph(m, 0)["key_tokens"][6] = 9; }, "token 6 (9) is not a key element");
  expect_refused([](json& m) { graph(m, 0)["key_tokens"][7] = 3; },
                 "leaf 0 is a tensor of rank 3 in the key but a tensor of rank 2 in the spec");
  expect_refused([](json& m) { graph(m, 0)["key_tokens"][8] = 4; },
                 "leaf 1 is a tensor of rank 333 in the key but a constant in the spec");
  expect_refused(
      [](json& m) {
        graph(m, 0)["key_tokens"].push_back(4);
        graph(m, 0)["key_tokens"].push_back(1);
      },
      "more leaves than the input spec's 2");
  expect_refused([](json& m) { graph(m, 0)["input_spec"]["leaves"].erase(1); },
                 "more leaves than the input spec's 1");
  // An LLM graph's key is its phase alone (1: prefill, 0: decode), and says the same as llm_phase.
  json m = valid();
  graph(m, 0)["key_tokens"] = {7, 1};
  graph(m, 0)["llm_phase"] = "prefill";
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  graph(m, 0)["llm_phase"] = "decode";
  EXPECT_NE(validate_manifest(m).message().find("an LLM phase key (1) for llm_phase 'decode'"),
            std::string::npos);
  graph(m, 0)["llm_phase"] = nullptr;
  EXPECT_EQ(validate_manifest(m).code(), StatusCode::kCorrupt);
}

TEST(ManifestSchema, NamesOfTheExtractionCachesOwnFilesAreRefused) {
  for (const char* name : {".complete", ".stamps", "modules/0/graphs/1/backend/model.pt2.probed-0"}) {
    expect_refused(
        [&](json& m) {
          m["files"].push_back({{"path", name}, {"size", 1}, {"sha256", kHash}});
        },
        std::string("'") + name + "' is a name the extraction cache reserves for its own files");
  }
}

TEST(ManifestSchema, AnOwnStateBackendsArtifactsStayInItsBackendFolder) {
  auto own_state = [](json& m, const json& artifact) {
    m["files"].push_back({{"path", "modules/0/graphs/0/backend/0/model.ts"}, {"size", 1}, {"sha256", kHash}});
    graph(m, 0)["backend"]["own_state"] = true;
    graph(m, 0)["backend"]["state"] = {
        {"dict", json::array({json::array({"artifact", {{"artifact", artifact}}})})}};
  };
  json m = valid();
  own_state(m, {{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "model.ts"}});
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  m = valid();
  own_state(m, {{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "."}});  // a folder artifact
  EXPECT_TRUE(validate_manifest(m).ok()) << validate_manifest(m).message();
  const std::vector<std::pair<json, std::string>> refused = {
      {{{"folder", "/tmp/evil"}, {"relative_path", "model.ts"}}, "folder must be an entry folder under"},
      {{{"folder", "modules/0/graphs/0/backend/0/../../../../.."}, {"relative_path", "x"}},
       "folder must be an entry folder under"},
      {{{"folder", "modules/0/graphs/1/backend"}, {"relative_path", "model.pt2"}},
       "folder must be an entry folder under modules/0/graphs/0/backend/"},
      {{{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "../../../samples/0.json"}},
       "relative_path must be a relative path inside its folder"},
      {{{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "/etc/passwd"}},
       "relative_path must be a relative path inside its folder"},
      {{{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "missing.ts"}},
       "which is neither a listed file nor a folder of listed files"},
      {{{"folder", "modules/0/graphs/0/backend/0"}}, "must be {\"folder\": ..., \"relative_path\": ...}"},
      {"modules/0/graphs/0/backend/0/model.ts", "must be {\"folder\": ..., \"relative_path\": ...}"},
  };
  for (const auto& [artifact, fragment] : refused) {
    expect_refused([&](json& v) { own_state(v, artifact); }, fragment);
  }
  expect_refused(
      [&](json& v) {
        own_state(v, {{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "model.ts"}});
        graph(v, 0)["backend"]["state"] = {{"dict", json::array({json::array({"a", {{"pickle", "x"}}})})}};
      },
      "state.dict[0][1] must be a state node");
  expect_refused(
      [&](json& v) {
        own_state(v, {{"folder", "modules/0/graphs/0/backend/0"}, {"relative_path", "model.ts"}});
        graph(v, 0)["backend"].erase("state");
      },
      "backend.state is missing");
}

TEST(ManifestSchema, AGraphSpecAloneGetsTheGraphsChecks) {
  json g = valid()["modules"][0]["graphs"][0];
  g.erase("backend");
  g.erase("samples");
  auto parsed = parse_graph_spec(g.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  g["input_spec"]["leaves"][0]["dtype"] = "float128";
  parsed = parse_graph_spec(g.dump());
  ASSERT_EQ(parsed.status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(parsed.status().message().rfind("graph spec is corrupt: graph.input_spec.leaves[0].dtype", 0), 0u)
      << parsed.status().message();
  EXPECT_EQ(parse_graph_spec("[").status().code(), StatusCode::kCorrupt);
}

TEST(ManifestSchema, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  const Status s = check_json_nesting(deep);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("nests deeper than 64 levels"), std::string::npos);
  auto parsed = parse_manifest("{\"fingerprint\": " + deep + "}");
  EXPECT_EQ(parsed.status().code(), StatusCode::kCorrupt);
  // Brackets inside strings do not count; escaped quotes do not end a string.
  EXPECT_TRUE(check_json_nesting("{\"a\": \"[[[[\\\"[[[[\"}", 2).ok());
  EXPECT_FALSE(check_json_nesting("[[[]]]", 2).ok());
  EXPECT_EQ(parse_manifest("{not json").status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace aitune
