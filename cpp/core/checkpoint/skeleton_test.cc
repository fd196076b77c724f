#include "checkpoint/skeleton.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/semantic_path.h"

namespace aitune {
namespace {

using json = nlohmann::json;

std::vector<std::pair<std::string, std::string>> shown(const std::vector<SkeletonTensor>& found) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const SkeletonTensor& t : found) out.emplace_back(semantic_display(t.path), t.key);
  return out;
}

// f(x, (a, b), opts={"mask": m}, point=Point(y=t)) as checkpoint/structure.py writes a sample.
TEST(Skeleton, SampleInputsAreFoundWithTheirSemanticPaths) {
  const json skeleton = json::parse(R"({
    "args": {"tuple": [{"tensor": "0"}, {"list": [{"tensor": "1"}, {"value": 3}, {"tensor": "2"}]}]},
    "kwargs": {"dict": [["opts", {"mapping": "m:M", "items": [["mask", {"tensor": "3"}]]}],
                        ["point", {"dataclass": "m:Point", "fields": {"y": {"tensor": "4"}}}],
                        ["pair", {"namedtuple": "m:P", "items": [{"tensor": "5"}]}]]},
    "batch_size": 2})");
  const auto found = sample_input_tensors(skeleton, {"x", "ab"});
  EXPECT_EQ(shown(found), (std::vector<std::pair<std::string, std::string>>{{"x", "0"},
                                                                            {"('ab', 0)", "1"},
                                                                            {"('ab', 2)", "2"},
                                                                            {"('opts', 'mask')", "3"},
                                                                            {"('point', 'y')", "4"},
                                                                            {"('pair', 0)", "5"}}));
}

TEST(Skeleton, APositionalArgumentBeyondTheSignatureIsNamedByItsIndex) {
  const json skeleton = json::parse(R"({"args": {"tuple": [{"tensor": "0"}, {"tensor": "1"}]}})");
  const auto found = sample_input_tensors(skeleton, {"x"});
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[1].path, json(1));
}

TEST(Skeleton, TheReferenceOutputIsFoundFromItsRoot) {
  const json skeleton = json::parse(
      R"({"reference_output": {"tuple": [{"tensor": "7"}, {"dict": [["logits", {"tensor": "8"}]]}]}})");
  const auto outs = sample_output_tensors(skeleton);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].path, json(0));
  EXPECT_EQ(outs[1].path, (json{{"tuple", {1, "logits"}}}));
  EXPECT_EQ(outs[1].key, "8");
  EXPECT_TRUE(sample_output_tensors(json::object()).empty());
  const auto root = sample_output_tensors(json::parse(R"({"reference_output": {"tensor": "9"}})"));
  ASSERT_EQ(root.size(), 1u);
  EXPECT_EQ(root[0].path, (json{{"tuple", json::array()}}));
}

}  // namespace
}  // namespace aitune
