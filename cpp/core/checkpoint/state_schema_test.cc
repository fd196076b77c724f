#include "checkpoint/state_schema.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace aitune {
namespace {

using json = nlohmann::json;

const std::string kHash(64, 'a');

// A state dict as LocalTorchStorage.save writes it: a tensor, an artifact file and an artifact
// folder, a path, a device and a dtype.
json valid() {
  json files = json::array();
  for (const char* p : {"state/0/engine/model.plan", "state/1/folder/a.bin", "state/1/folder/b.bin",
                        "state/state.safetensors"}) {
    files.push_back({{"path", p}, {"size", 10}, {"sha256", kHash}});
  }
  auto pair = [](const char* key, json node) { return json::array({key, std::move(node)}); };
  json state = {
      {"dict",
       json::array(
           {pair("weight", {{"tensor", "0"}}),
            pair("engine", {{"artifact", {{"folder", "state/0"}, {"relative_path", "engine/model.plan"}}}}),
            pair("folder", {{"artifact", {{"folder", "state/1"}, {"relative_path", "folder"}}}}),
            pair("where", {{"path", "/opt/models"}}), pair("device", {{"device", "cuda:0"}}),
            pair("dtype", {{"dtype", "float16"}}),
            pair("nested",
                 {{"tuple", json::array({{{"value", 1}}, {{"float", "nan"}}, {{"list", json::array()}}})}}),
            pair("point", {{"namedtuple", "m:P"}, {"items", json::array({{{"value", 1}}})}}),
            pair("od", {{"mapping", "collections:OrderedDict"},
                        {"items", json::array({pair("k", {{"value", nullptr}})})}}),
            pair("cfg", {{"dataclass", "m:C"}, {"fields", {{"x", {{"value", "s"}}}}}})})}};
  return {{"format", "aitune.state_dict"},
          {"format_version", 1},
          {"sha_type", "256"},
          {"state", state},
          {"state_tensors", "state/state.safetensors"},
          {"artifacts",
           {{"state/0/engine/model.plan", "state/0/engine/model.plan"},
            {"state/1/folder/a.bin", "state/1/folder/a.bin"}}},
          {"sha512", nullptr},
          {"files", files}};
}

json& item(json& m, size_t i) { return m["state"]["dict"][i][1]; }

void expect_refused(const std::function<void(json&)>& change, const std::string& fragment,
                    StatusCode code = StatusCode::kCorrupt) {
  json m = valid();
  change(m);
  const Status s = validate_state_manifest(m);
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << "message: " << s.message();
}

TEST(StateSchema, AStateDictAsSavedPasses) {
  const Status s = validate_state_manifest(valid());
  EXPECT_TRUE(s.ok()) << s.message();
  auto parsed = parse_state_manifest(valid().dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
}

TEST(StateSchema, OtherFormatsAndVersionsAreUnsupported) {
  expect_refused([](json& m) { m["format"] = "aitune.checkpoint"; },
                 "This is not a state dict saved by LocalTorchStorage.save (format \"aitune.checkpoint\")",
                 StatusCode::kUnsupported);
  expect_refused([](json& m) { m["format_version"] = 2; }, "Unsupported state dict format_version 2",
                 StatusCode::kUnsupported);
  EXPECT_EQ(parse_state_manifest("{").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(parse_state_manifest(std::string(100, '[') + std::string(100, ']')).status().code(),
            StatusCode::kCorrupt);
}

// Every field that names a file: it must stay inside state/ and be listed.
TEST(StateSchema, EveryPathStaysInsideTheArchive) {
  expect_refused([](json& m) { m["state_tensors"] = "/tmp/evil.safetensors"; },
                 "state_tensors names '/tmp/evil.safetensors', which is not a listed file");
  expect_refused(
      [](json& m) {
        m["files"].push_back({{"path", "other/x.safetensors"}, {"size", 1}, {"sha256", kHash}});
        m["state_tensors"] = "other/x.safetensors";
      },
      "which is outside state/");
  expect_refused([](json& m) { item(m, 1)["artifact"]["folder"] = "/etc"; },
                 "state.dict[1][1].artifact.folder must be an entry folder under state/");
  expect_refused([](json& m) { item(m, 1)["artifact"]["folder"] = "state/0/../../.."; },
                 "artifact.folder must be an entry folder under state/");
  expect_refused([](json& m) { item(m, 1)["artifact"]["relative_path"] = "../../etc/passwd"; },
                 "artifact.relative_path must be a relative path inside its folder");
  expect_refused(
      [](json& m) { item(m, 1)["artifact"]["relative_path"] = "engine/missing.plan"; },
      "names 'state/0/engine/missing.plan', which is neither a listed file nor a folder of listed files");
  expect_refused([](json& m) { m["artifacts"]["x"] = "state/missing"; },
                 "artifacts[\"x\"] names 'state/missing'");
  expect_refused([](json& m) { m["files"][0]["path"] = "../x"; },
                 "files[0].path must be a relative entry path");
  expect_refused([](json& m) { m["files"][0]["path"] = ".complete"; },
                 "'.complete' is a name the extraction cache reserves for its own files");
}

TEST(StateSchema, NodesHaveOneOfTheWrittenForms) {
  expect_refused([](json& m) { item(m, 0) = {{"pickle", "x"}}; }, "state.dict[0][1] must be a state node");
  expect_refused([](json& m) { item(m, 0) = {{"tensor", "0"}, {"value", 1}}; }, "must be a state node");
  expect_refused([](json& m) { item(m, 0) = 5; }, "must be a state node");
  expect_refused([](json& m) { item(m, 0) = {{"tensor", 0}}; }, "state.dict[0][1].tensor must be a string");
  expect_refused([](json& m) { item(m, 0) = {{"value", {1}}}; }, "value must be null, true, false");
  expect_refused([](json& m) { m["state"]["dict"][0] = json::array({"a"}); },
                 "state.dict[0] must be a [str or int key, node]");
  expect_refused([](json& m) { item(m, 7)["items"] = json::array({5}); },
                 "state.dict[7][1].items[0] must be a state node");
  expect_refused([](json& m) { item(m, 9)["fields"] = json::array(); },
                 "fields must be an object of field nodes");
}

TEST(StateSchema, Sha512CoversEveryFileWhenAsked) {
  json m = valid();
  m["sha_type"] = "512";
  m["sha512"] = json::object();
  for (const auto& f : m["files"]) m["sha512"][f["path"].get<std::string>()] = std::string(128, 'c');
  EXPECT_TRUE(validate_state_manifest(m).ok()) << validate_state_manifest(m).message();
  m["sha512"].erase("state/state.safetensors");
  EXPECT_NE(validate_state_manifest(m).message().find("has no digest of 'state/state.safetensors'"),
            std::string::npos);
  expect_refused([](json& v) { v["sha_type"] = "1"; }, "sha_type must be one of \"256\", \"512\"");
  expect_refused(
      [](json& v) {
        v["sha512"] = {{"elsewhere", std::string(128, 'c')}};
      },
      "sha512 names 'elsewhere', which is not a listed file");
}

}  // namespace
}  // namespace aitune
