#include "bridge/tensor_bridge.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace aitune {
namespace {

TEST(TensorBridge, ShapeOfMatchesSizes) {
  at::Tensor t = at::zeros({2, 3, 5});
  EXPECT_EQ(shape_of(t), (Shape{2, 3, 5}));
  EXPECT_EQ(shape_of(at::scalar_tensor(1.0)), Shape{});
}

TEST(TensorBridge, DtypeNamesReadLikeTorch) {
  EXPECT_EQ(dtype_name(c10::ScalarType::Float), "float32");
  EXPECT_EQ(dtype_name(c10::ScalarType::Half), "float16");
  EXPECT_EQ(dtype_name(c10::ScalarType::BFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(c10::ScalarType::Long), "int64");
  EXPECT_EQ(dtype_name(c10::ScalarType::Bool), "bool");
}

TEST(TensorBridge, DtypeNameRoundTrips) {
  for (auto type :
       {c10::ScalarType::Float, c10::ScalarType::Double, c10::ScalarType::Half, c10::ScalarType::BFloat16,
        c10::ScalarType::Char, c10::ScalarType::Long, c10::ScalarType::Bool}) {
    auto parsed = dtype_from_name(dtype_name(type));
    ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
    EXPECT_EQ(*parsed, type);
  }
  auto prefixed = dtype_from_name("torch.float16");
  ASSERT_TRUE(prefixed.ok());
  EXPECT_EQ(*prefixed, c10::ScalarType::Half);
}

TEST(TensorBridge, UnknownDtypeNameIsAnError) {
  auto parsed = dtype_from_name("float33");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("float33"), std::string::npos);
}

TEST(TensorBridge, SpecFromTensorsFollowsTheLattice) {
  TensorSpec spec = spec_from_tensor(at::zeros({1, 2, 3}), 1);
  ASSERT_TRUE(spec.update(shape_of(at::zeros({3, 2, 6})), 3).ok());
  EXPECT_EQ(spec.symbolic_shape(), "['batch0', 2, 'dim2']");
  EXPECT_EQ(spec.dtype(), "float32");
  EXPECT_EQ(spec.max_shape(), (Shape{3, 2, 6}));
}

}  // namespace
}  // namespace aitune
