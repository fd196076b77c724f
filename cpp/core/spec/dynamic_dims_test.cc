#include "spec/dynamic_dims.h"

#include <gtest/gtest.h>

namespace aitune {
namespace {

DimDef dynamic_dim(std::string name, int64_t min, int64_t max, std::optional<int64_t> opt = std::nullopt) {
  return DimDef{std::move(name), false, min, max, opt};
}

DimDef batch_dim(std::string name, int64_t min, int64_t max, std::optional<int64_t> opt = std::nullopt) {
  return DimDef{std::move(name), true, min, max, opt};
}

// The example of docs/reference/recording.md#explicit-dynamic-shapes:
// x = (BatchDim("batch", 1, 8, opt=2), 3, spatial, spatial).
std::vector<InputShapeDef> image_defs() {
  const DimDef spatial = dynamic_dim("spatial", 224, 512);
  return {
      {"'x'", {batch_dim("batch", 1, 8, 2), int64_t{3}, spatial, spatial}},
      {"'y'", {batch_dim("batch", 1, 8, 2), int64_t{3}, int64_t{7}, spatial}},
  };
}

void expect_invalid(const Status& status, const std::string& message) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_EQ(status.message(), message);
}

TEST(DimDefTest, Describe) {
  EXPECT_EQ(dynamic_dim("d", 1, 8).describe(), "DynamicDim('d', min=1, max=8)");
  EXPECT_EQ(batch_dim("b", 1, 8, 4).describe(), "BatchDim('b', min=1, max=8, opt=4)");
}

TEST(ValidateDimDefTest, Valid) {
  EXPECT_TRUE(validate_dim_def(dynamic_dim("d", 1, 8)).ok());
  EXPECT_TRUE(validate_dim_def(batch_dim("b", 1, 8, 1)).ok());
  EXPECT_TRUE(validate_dim_def(batch_dim("b", 1, 8, 8)).ok());
}

TEST(ValidateDimDefTest, Messages) {
  expect_invalid(validate_dim_def(dynamic_dim("", 1, 8)),
                 "Dynamic dimension name must be a non-empty string.");
  expect_invalid(validate_dim_def(dynamic_dim("d", 0, 8)),
                 "Dynamic dimension 'd' bounds must be positive integers, got min=0, max=8.");
  expect_invalid(validate_dim_def(dynamic_dim("d", 2, -1)),
                 "Dynamic dimension 'd' bounds must be positive integers, got min=2, max=-1.");
  expect_invalid(validate_dim_def(dynamic_dim("d", 8, 8)),
                 "Dynamic dimension 'd' must satisfy min < max, got min=8, max=8.");
  expect_invalid(validate_dim_def(dynamic_dim("d", 1, 8, 9)),
                 "Dynamic dimension 'd' must satisfy min <= opt <= max, got min=1, opt=9, max=8.");
  expect_invalid(validate_dim_def(dynamic_dim("d", 2, 8, 1)),
                 "Dynamic dimension 'd' must satisfy min <= opt <= max, got min=2, opt=1, max=8.");
}

TEST(ValidateShapeDefsTest, ValidWithSharedDim) { EXPECT_TRUE(validate_shape_defs(image_defs()).ok()); }

TEST(ValidateShapeDefsTest, NegativeStaticSize) {
  expect_invalid(validate_shape_defs({{"'x'", {int64_t{1}, int64_t{-1}}}}),
                 "Dynamic shape for input 'x' axis 1 has a negative static size -1.");
  EXPECT_TRUE(validate_shape_defs({{"'x'", {int64_t{0}, int64_t{3}}}}).ok());
}

TEST(ValidateShapeDefsTest, InvalidDimInsideDefs) {
  expect_invalid(validate_shape_defs({{"('options', 'mask')", {dynamic_dim("d", 8, 8)}}}),
                 "Dynamic dimension 'd' must satisfy min < max, got min=8, max=8.");
}

TEST(ValidateShapeDefsTest, ConflictingDefinitions) {
  expect_invalid(validate_shape_defs({{"'x'", {dynamic_dim("d", 1, 8)}}, {"'y'", {batch_dim("d", 1, 4)}}}),
                 "Dynamic dimension 'd' has conflicting definitions: DynamicDim('d', min=1, max=8) and "
                 "BatchDim('d', min=1, max=4).");
  expect_invalid(validate_shape_defs({{"'x'", {dynamic_dim("d", 1, 8), dynamic_dim("d", 1, 8, 4)}}}),
                 "Dynamic dimension 'd' has conflicting definitions: DynamicDim('d', min=1, max=8) and "
                 "DynamicDim('d', min=1, max=8, opt=4).");
}

TEST(CheckCallTest, ValidCall) {
  EXPECT_TRUE(
      check_call_against_defs("m", image_defs(), {{"'x'", {2, 3, 256, 256}}, {"'y'", {2, 3, 7, 256}}}).ok());
}

TEST(CheckCallTest, UndefinedAndAbsentInputsAreIgnored) {
  // 'y' is defined but absent; 'z' is present but not defined.
  EXPECT_TRUE(check_call_against_defs("m", image_defs(), {{"'x'", {2, 3, 256, 256}}, {"'z'", {1}}}).ok());
  EXPECT_TRUE(check_call_against_defs("m", image_defs(), {}).ok());
}

TEST(CheckCallTest, RankMismatch) {
  expect_invalid(check_call_against_defs("m", image_defs(), {{"'x'", {1, 3, 224}}}),
                 "Dynamic shape for module 'm', input 'x' expects rank 4, got shape [1, 3, 224]");
}

TEST(CheckCallTest, StaticSizeMismatch) {
  expect_invalid(
      check_call_against_defs("m", image_defs(), {{"'x'", {1, 4, 224, 224}}}),
      "Dynamic shape for module 'm', input 'x' axis 1 expects size 3, got 4 (shape [1, 4, 224, 224])");
}

TEST(CheckCallTest, DynamicSizeOutOfRange) {
  expect_invalid(
      check_call_against_defs("m", image_defs(), {{"'x'", {1, 3, 600, 600}}}),
      "Dynamic shape for module 'm', input 'x' axis 2 expects 'spatial' between 224 and 512, got 600 "
      "(shape [1, 3, 600, 600])");
  expect_invalid(
      check_call_against_defs("m", image_defs(), {{"'x'", {1, 3, 224, 100}}}),
      "Dynamic shape for module 'm', input 'x' axis 3 expects 'spatial' between 224 and 512, got 100 "
      "(shape [1, 3, 224, 100])");
}

TEST(CheckCallTest, NestedPathIsInsertedVerbatim) {
  std::vector<InputShapeDef> defs = {{"('options', 'mask')", {int64_t{1}, dynamic_dim("seq", 1, 128)}}};
  expect_invalid(check_call_against_defs("m", defs, {{"('options', 'mask')", {2, 16}}}),
                 "Dynamic shape for module 'm', input ('options', 'mask') axis 0 expects size 1, got 2 "
                 "(shape [2, 16])");
}

TEST(CheckCallTest, SharedDimAcrossInputs) {
  const DimDef spatial = dynamic_dim("spatial", 224, 512);
  std::vector<InputShapeDef> defs = {
      {"'x'", {int64_t{1}, int64_t{3}, spatial}},
      {"'y'", {int64_t{1}, int64_t{3}, int64_t{5}, spatial}},
  };
  expect_invalid(
      check_call_against_defs("m", defs, {{"'x'", {1, 3, 224}}, {"'y'", {1, 3, 5, 256}}}),
      "Dynamic dimension 'spatial' of module 'm' must have the same size across inputs, got 224 for "
      "input 'x' axis 2 and 256 for input 'y' axis 3");
  EXPECT_TRUE(check_call_against_defs("m", defs, {{"'x'", {1, 3, 300}}, {"'y'", {1, 3, 5, 300}}}).ok());
}

TEST(CheckCallTest, SharedDimWithinOneInput) {
  expect_invalid(
      check_call_against_defs("m", image_defs(), {{"'x'", {1, 3, 224, 256}}}),
      "Dynamic dimension 'spatial' of module 'm' must have the same size across inputs, got 224 for "
      "input 'x' axis 2 and 256 for input 'x' axis 3");
}

TEST(CheckDefsObservedTest, AllObserved) {
  EXPECT_TRUE(check_defs_observed("m", image_defs(), {"'y'", "'x'", "'other'"}).ok());
}

TEST(CheckDefsObservedTest, Messages) {
  std::vector<InputShapeDef> defs = {{"'x'", {int64_t{1}}}, {"'z'", {int64_t{1}}}};
  expect_invalid(check_defs_observed("m", defs, {"'x'"}),
                 "Dynamic shape paths for module 'm' did not match any recorded tensor inputs: ['z']");
  defs.insert(defs.begin(), {"('a', 'b')", {int64_t{1}}});
  expect_invalid(
      check_defs_observed("m", defs, {"'x'"}),
      "Dynamic shape paths for module 'm' did not match any recorded tensor inputs: [('a', 'b'), 'z']");
}

TEST(EffectiveShapeTest, StaticAndDims) {
  EffectiveShape shape = effective_shape(image_defs()[0]);
  EXPECT_EQ(shape.min, (Shape{1, 3, 224, 224}));
  EXPECT_EQ(shape.opt, (Shape{2, 3, 512, 512}));  // batch opt=2; spatial opt defaults to max
  EXPECT_EQ(shape.max, (Shape{8, 3, 512, 512}));
  EffectiveShape scalar = effective_shape({"'s'", {}});
  EXPECT_TRUE(scalar.min.empty() && scalar.opt.empty() && scalar.max.empty());
}

}  // namespace
}  // namespace aitune
