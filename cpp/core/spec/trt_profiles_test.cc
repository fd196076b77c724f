#include "spec/trt_profiles.h"

#include <gtest/gtest.h>

namespace aitune {
namespace {

// An image input with a batch and two spatial dim axes, and a static-shaped mask.
std::vector<RecordedInput> recorded() {
  return {
      {"input", "'input'", {2, 3, 224, 224}, {8, 3, 448, 448}, {false, true, false, false}},
      {"inputs[\"mask\"]", "('inputs', 'mask')", {4, 4}, {4, 4}, {true, true}},
  };
}

ProfileRange range(Shape min, Shape opt, Shape max) {
  return {std::move(min), std::move(opt), std::move(max)};
}

UserProfile valid_user_profile() {
  return {{"inputs[\"mask\"]", range({4, 4}, {4, 4}, {4, 4})},
          {"input", range({1, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224})}};
}

void expect_invalid(const Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_EQ(status.message(), message);
}

TEST(TrtProfilesTest, SingleIsRecordedMinThenMaxTwice) {
  const OptimizationProfile p = single_profile(recorded());
  ASSERT_EQ(p.inputs.size(), 2u);
  EXPECT_EQ(p.inputs[0], range({2, 3, 224, 224}, {8, 3, 448, 448}, {8, 3, 448, 448}));
  EXPECT_EQ(p.inputs[1], range({4, 4}, {4, 4}, {4, 4}));
}

TEST(TrtProfilesTest, SamplesUsedIsOneStaticProfilePerDistinctShape) {
  const std::vector<std::vector<Shape>> samples = {
      {{2, 3, 224, 224}, {4, 4}}, {{8, 3, 448, 448}, {4, 4}}, {{2, 3, 224, 224}, {4, 4}}};
  auto profiles = samples_used_profiles(recorded(), samples);
  ASSERT_TRUE(profiles.ok()) << profiles.status().to_string();
  ASSERT_EQ(profiles->size(), 2u);
  EXPECT_EQ((*profiles)[0].inputs[0], range({2, 3, 224, 224}, {2, 3, 224, 224}, {2, 3, 224, 224}));
  EXPECT_EQ((*profiles)[1].inputs[0], range({8, 3, 448, 448}, {8, 3, 448, 448}, {8, 3, 448, 448}));
  EXPECT_FALSE(samples_used_profiles(recorded(), {}).ok());
  expect_invalid(samples_used_profiles(recorded(), {{{2, 3, 224, 224}}}).status(),
                 "Stored sample 0 has 1 tensor inputs, the graph has 2");
}

TEST(TrtProfilesTest, DynamicShapesUseDefinitionsAndOptDefaultsToMax) {
  const DimDef batch{"batch", true, 1, 16, 4};
  const DimDef spatial{"spatial", false, 224, 512, std::nullopt};
  const std::vector<InputShapeDef> defs = {{"'input'", {batch, int64_t{3}, spatial, spatial}}};
  const OptimizationProfile p = dynamic_shapes_profile(recorded(), defs);
  EXPECT_EQ(p.inputs[0], range({1, 3, 224, 224}, {4, 3, 512, 512}, {16, 3, 512, 512}));
  EXPECT_EQ(p.inputs[1], range({4, 4}, {4, 4}, {4, 4}));  // no definition: recorded (min, max, max)
}

TEST(TrtProfilesTest, ValidUserProfilesComeBackInRecordedOrder) {
  auto profiles = validate_user_profiles(recorded(), {valid_user_profile()});
  ASSERT_TRUE(profiles.ok()) << profiles.status().to_string();
  EXPECT_EQ((*profiles)[0].inputs[0], range({1, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224}));
  EXPECT_EQ((*profiles)[0].inputs[1], range({4, 4}, {4, 4}, {4, 4}));
}

TEST(TrtProfilesTest, UserProfileInputsMustMatchRecorded) {
  UserProfile p = {{"input", range({1, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224})},
                   {"image", range({1}, {1}, {1})}};
  expect_invalid(validate_user_profiles(recorded(), {p}).status(),
                 "TensorRT profile inputs ['input', 'image'] do not match recorded tensor inputs ['input', "
                 "'inputs[\"mask\"]'] (missing: ['inputs[\"mask\"]'], unknown: ['image']).");
}

TEST(TrtProfilesTest, UserProfileRankMustMatch) {
  UserProfile p = valid_user_profile();
  p[1].range = range({1, 3, 224}, {4, 3, 224}, {8, 3, 224});
  expect_invalid(validate_user_profiles(recorded(), {p}).status(),
                 "TensorRT profile for input 'input' has rank 3, recorded rank is 4.");
}

TEST(TrtProfilesTest, UserProfileMustBeOrderedOnEveryAxis) {
  UserProfile p = valid_user_profile();
  p[1].range = range({1, 3, 224, 224}, {16, 3, 224, 224}, {8, 3, 224, 224});
  expect_invalid(validate_user_profiles(recorded(), {p}).status(),
                 "TensorRT profile for input 'input' must satisfy min <= opt <= max on every axis, got "
                 "min=[1, 3, 224, 224], opt=[16, 3, 224, 224], max=[8, 3, 224, 224]");
}

TEST(TrtProfilesTest, UserProfileStaticAxesMustEqualRecorded) {
  UserProfile p = valid_user_profile();
  p[1].range = range({1, 1, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224});
  expect_invalid(
      validate_user_profiles(recorded(), {p}).status(),
      "TensorRT profile for input 'input' axis 1 is static (3) in the recorded graph, got min=1, max=3");
}

TEST(TrtProfilesTest, UserProfileSizesMustBeNonNegative) {
  UserProfile p = valid_user_profile();
  p[1].range = range({-1, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224});
  expect_invalid(
      validate_user_profiles(recorded(), {p}).status(),
      "TensorRT profile for input 'input' sizes must be non-negative integers, got min=[-1, 3, 224, 224], "
      "opt=[4, 3, 224, 224], max=[8, 3, 224, 224]");
  expect_invalid(validate_user_profiles(recorded(), {}).status(),
                 "TensorRT profiles list is empty: give at least one TensorRTProfile");
}

// Two profiles as in the seed guide: small (224) and large (512) images.
std::vector<OptimizationProfile> two_profiles() {
  return {{{range({1, 3, 224, 224}, {4, 3, 224, 224}, {8, 3, 224, 224})}},
          {{range({1, 3, 512, 512}, {4, 3, 512, 512}, {8, 3, 512, 512})}}};
}

TEST(TrtProfilesTest, SelectPicksFirstContainingProfile) {
  const std::vector<std::string> names = {"input"};
  auto first = select_profile(names, two_profiles(), {{4, 3, 224, 224}});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, 0u);
  auto second = select_profile(names, two_profiles(), {{8, 3, 512, 512}});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, 1u);
}

TEST(TrtProfilesTest, SelectErrorsNameTheEnvelopeOrTheProfiles) {
  const std::vector<std::string> names = {"input"};
  auto above = select_profile(names, two_profiles(), {{16, 3, 224, 224}});
  EXPECT_EQ(above.status().code(), StatusCode::kProfileShape);
  EXPECT_EQ(above.status().message(),
            "Input shape [16, 3, 224, 224] exceeds max profile shape [8, 3, 512, 512] for input 'input'");
  auto below = select_profile(names, two_profiles(), {{0, 3, 224, 224}});
  EXPECT_EQ(below.status().message(),
            "Input shape [0, 3, 224, 224] is below min profile shape [1, 3, 224, 224] for input 'input'");
  auto between = select_profile(names, two_profiles(), {{2, 3, 300, 300}});
  EXPECT_EQ(between.status().code(), StatusCode::kProfileShape);
  EXPECT_EQ(
      between.status().message(),
      "No TensorRT optimization profile matches the input shapes: {'input': [2, 3, 300, 300]}; profiles: "
      "[{'input': [[1, 3, 224, 224], [4, 3, 224, 224], [8, 3, 224, 224]]}, {'input': [[1, 3, 512, 512], "
      "[4, 3, 512, 512], [8, 3, 512, 512]]}]");
}

TEST(TrtProfilesTest, EnvelopeIsElementwiseMinAndMax) {
  const auto envelope = profile_envelope(two_profiles());
  ASSERT_EQ(envelope.size(), 1u);
  EXPECT_EQ(envelope[0].first, (Shape{1, 3, 224, 224}));
  EXPECT_EQ(envelope[0].second, (Shape{8, 3, 512, 512}));
}

}  // namespace
}  // namespace aitune
