#include "spec/tensor_spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace aitune {
namespace {

constexpr AxisKind kS = AxisKind::kStatic;
constexpr AxisKind kB = AxisKind::kBatch;
constexpr AxisKind kD = AxisKind::kDynamic;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TensorSpec spec_of(std::initializer_list<std::pair<Shape, std::optional<int64_t>>> samples) {
  auto it = samples.begin();
  TensorSpec spec = TensorSpec::from_sample(it->first, "torch.float32", it->second);
  for (++it; it != samples.end(); ++it) {
    Status status = spec.update(it->first, it->second);
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
  return spec;
}

TEST(ShapeTest, FormatShape) {
  EXPECT_EQ(format_shape({1, 3, 224}), "[1, 3, 224]");
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(format_shape({-1}), "[-1]");
}

TEST(TensorSpecTest, FirstSampleIsStaticWithMultipliers) {
  TensorSpec spec = TensorSpec::from_sample({2, 3, 8}, "torch.float16", 2);
  EXPECT_EQ(spec.rank(), 3);
  EXPECT_EQ(spec.dtype(), "torch.float16");
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kS, kS, kS}));
  EXPECT_EQ(spec.min_shape(), (Shape{2, 3, 8}));
  EXPECT_EQ(spec.max_shape(), (Shape{2, 3, 8}));
  EXPECT_DOUBLE_EQ(spec.multiplier(0), 1.0);
  EXPECT_DOUBLE_EQ(spec.multiplier(1), 1.5);
  EXPECT_DOUBLE_EQ(spec.multiplier(2), 4.0);
  EXPECT_EQ(spec.symbolic_shape(), "[2, 3, 8]");
  EXPECT_FALSE(spec.has_dynamic_axis());
}

// docs/reference/recording.md#dynamic-axes table, row 1.
TEST(TensorSpecTest, Row1BatchAndDim) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}});
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kB, kS, kD}));
  EXPECT_EQ(spec.symbolic_shape(), "['batch0', 2, 'dim2']");
  EXPECT_EQ(spec.axis_label(0), "batch0");
  EXPECT_EQ(spec.axis_label(1), "2");
  EXPECT_EQ(spec.axis_label(2), "dim2");
  EXPECT_EQ(spec.min_shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(spec.max_shape(), (Shape{3, 2, 6}));
  EXPECT_DOUBLE_EQ(spec.multiplier(0), 1.0);
  EXPECT_TRUE(std::isnan(spec.multiplier(2)));
  EXPECT_EQ(spec.batch_multipliers(), (std::vector<std::pair<int64_t, int64_t>>{{0, 1}}));
  EXPECT_TRUE(spec.has_batch_axis());
  EXPECT_TRUE(spec.has_dynamic_axis());
}

// Row 2: row 1 then [4,2,4]@1 demotes axis 0 (multiplier 4 != 1).
TEST(TensorSpecTest, Row2BatchDemotedToDim) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}, {{4, 2, 4}, 1}});
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kD, kS, kD}));
  EXPECT_EQ(spec.symbolic_shape(), "['dim0', 2, 'dim2']");
  EXPECT_EQ(spec.min_shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(spec.max_shape(), (Shape{4, 2, 6}));
  EXPECT_TRUE(std::isnan(spec.multiplier(0)));
  EXPECT_FALSE(spec.has_batch_axis());
  EXPECT_FALSE(spec.max_batch_size().has_value());
  EXPECT_FALSE(spec.min_batch_size().has_value());
}

TEST(TensorSpecTest, DimNeverPromotedBackToBatch) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}, {{4, 2, 4}, 1}, {{2, 2, 4}, 2}, {{8, 2, 4}, 8}});
  EXPECT_EQ(spec.symbolic_shape(), "['dim0', 2, 'dim2']");
  EXPECT_EQ(spec.max_shape(), (Shape{8, 2, 6}));
}

// Row 3: stacked batch (x2, classifier-free guidance).
TEST(TensorSpecTest, Row3StackedBatch) {
  TensorSpec spec = spec_of({{{3, 2, 6}, 3}, {{5, 4, 10}, 5}});
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kB, kD, kB}));
  EXPECT_EQ(spec.symbolic_shape(), "['batch0', 'dim1', 'batch2']");
  EXPECT_EQ(spec.batch_multipliers(), (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {2, 2}}));
  EXPECT_EQ(spec.min_shape(), (Shape{3, 2, 6}));
  EXPECT_EQ(spec.max_shape(), (Shape{5, 4, 10}));
}

// Row 4: JIT mode, batch size unknown.
TEST(TensorSpecTest, Row4UnknownBatchSizeGivesDims) {
  TensorSpec spec = spec_of({{{1, 3, 224}, std::nullopt}, {{2, 3, 256}, std::nullopt}});
  EXPECT_TRUE(std::isnan(spec.multiplier(1)));
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kD, kS, kD}));
  EXPECT_EQ(spec.symbolic_shape(), "['dim0', 3, 'dim2']");
  EXPECT_EQ(spec.min_shape(), (Shape{1, 3, 224}));
  EXPECT_EQ(spec.max_shape(), (Shape{2, 3, 256}));
}

// Row 5: a single batch size keeps every axis static.
TEST(TensorSpecTest, Row5SingleBatchSizeIsStatic) {
  TensorSpec spec = spec_of({{{4, 3, 224}, 4}, {{4, 3, 224}, 4}});
  EXPECT_EQ(spec.axis_kinds(), (std::vector<AxisKind>{kS, kS, kS}));
  EXPECT_EQ(spec.symbolic_shape(), "[4, 3, 224]");
  EXPECT_FALSE(spec.has_dynamic_axis());
  EXPECT_FALSE(spec.max_batch_size().has_value());
}

TEST(TensorSpecTest, BatchAxisStaysBatchWhileMultiplierHolds) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}, {{2, 2, 3}, 2}});
  EXPECT_EQ(spec.symbolic_shape(), "['batch0', 2, 'dim2']");
  EXPECT_DOUBLE_EQ(spec.multiplier(0), 1.0);
}

TEST(TensorSpecTest, UpdateRankMismatch) {
  TensorSpec spec = TensorSpec::from_sample({1, 2, 3}, "torch.float32", 1);
  Status status = spec.update({1, 2, 3, 4}, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("rank 4"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("rank 3"), std::string::npos) << status.message();
  EXPECT_EQ(spec.max_shape(), (Shape{1, 2, 3}));  // unchanged
}

TEST(TensorSpecTest, MaxAndMinBatchSize) {
  // Stacked batch: axis 0 multiplier 1, axis 2 multiplier 2; max 5 on both, min 3 on both.
  TensorSpec spec = spec_of({{{3, 2, 6}, 3}, {{5, 4, 10}, 5}});
  EXPECT_EQ(spec.max_batch_size(), 5);
  EXPECT_EQ(spec.min_batch_size(), 3);
  // Max over the batch axes: extending only axis 2 raises the max batch size to 16 / 2.
  ASSERT_TRUE(spec.extend_max({5, 4, 16}).ok());
  EXPECT_EQ(spec.max_batch_size(), 8);
  EXPECT_EQ(spec.min_batch_size(), 3);
}

TEST(TensorSpecTest, BatchedShape) {
  TensorSpec spec = spec_of({{{3, 2, 6}, 3}, {{5, 4, 10}, 5}});
  EXPECT_EQ(spec.batched_shape({1, 7, 2}, 8), (Shape{8, 7, 16}));
  TensorSpec fixed = TensorSpec::from_sample({4, 3}, "torch.float32", 4);
  EXPECT_EQ(fixed.batched_shape({4, 3}, 8), (Shape{4, 3}));
}

TEST(TensorSpecTest, Matches) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}});
  EXPECT_TRUE(spec.matches({1, 2, 3}));
  EXPECT_TRUE(spec.matches({100, 2, 1000}));  // dynamic axes may take any size here
  EXPECT_FALSE(spec.matches({1, 5, 3}));
  EXPECT_FALSE(spec.matches({1, 2}));
  EXPECT_FALSE(spec.matches({1, 2, 3, 1}));
}

TEST(TensorSpecTest, ExtendMax) {
  TensorSpec spec = spec_of({{{1, 2, 3}, 1}, {{3, 2, 6}, 3}});
  ASSERT_TRUE(spec.extend_max({8, 1, 5}).ok());
  EXPECT_EQ(spec.max_shape(), (Shape{8, 2, 6}));
  EXPECT_EQ(spec.min_shape(), (Shape{1, 2, 3}));
  Status status = spec.extend_max({8, 1});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.max_shape(), (Shape{8, 2, 6}));
}

TEST(TensorSpecTest, FromPartsRoundTrip) {
  TensorSpec original = spec_of({{{3, 2, 6}, 3}, {{5, 4, 10}, 5}});
  StatusOr<TensorSpec> rebuilt =
      TensorSpec::from_parts(original.axis_kinds(), original.min_shape(), original.max_shape(),
                             original.multipliers(), "torch.int64");
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status().to_string();
  EXPECT_EQ(rebuilt->symbolic_shape(), "['batch0', 'dim1', 'batch2']");
  EXPECT_EQ(rebuilt->batch_multipliers(), original.batch_multipliers());
  EXPECT_EQ(rebuilt->max_shape(), (Shape{5, 4, 10}));
  EXPECT_EQ(rebuilt->dtype(), "torch.int64");
}

TEST(TensorSpecTest, FromPartsErrors) {
  auto code_of = [](std::vector<AxisKind> kinds, Shape min, Shape max, std::vector<double> multipliers) {
    return TensorSpec::from_parts(std::move(kinds), std::move(min), std::move(max), std::move(multipliers),
                                  "f")
        .status()
        .code();
  };
  // Lengths differ.
  EXPECT_EQ(code_of({kS, kS}, {1, 2}, {1, 2}, {1.0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of({kS, kS}, {1}, {1, 2}, {1.0, 2.0}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of({kS}, {1}, {1, 2}, {1.0}), StatusCode::kInvalidArgument);
  // min > max.
  EXPECT_EQ(code_of({kD}, {5}, {4}, {kNaN}), StatusCode::kInvalidArgument);
  // Static axis with min != max.
  EXPECT_EQ(code_of({kS}, {1}, {4}, {1.0}), StatusCode::kInvalidArgument);
  // Batch axis without a positive integral multiplier.
  EXPECT_EQ(code_of({kB}, {1}, {4}, {kNaN}), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of({kB}, {1}, {4}, {1.5}), StatusCode::kInvalidArgument);
  // Valid.
  EXPECT_EQ(code_of({kB, kD, kS}, {1, 1, 3}, {4, 9, 3}, {1.0, kNaN, 3.0}), StatusCode::kOk);
}

}  // namespace
}  // namespace aitune
