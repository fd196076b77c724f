#include "validate/compare.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace aitune {
namespace {

at::Tensor f32(std::vector<float> v) { return at::tensor(v, at::kFloat); }

TEST(CompareTensors, IdenticalTensorsGiveZeros) {
  at::Tensor t = at::randn({4, 5});
  auto m = compare_tensors(t, t.clone(), 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->max_abs_error, 0.0);
  EXPECT_EQ(m->max_rel_error, 0.0);
  EXPECT_EQ(m->rel_l2_error, 0.0);
  EXPECT_EQ(m->mismatch_fraction, 0.0);
  EXPECT_FALSE(m->has_nan);
  EXPECT_EQ(m->numel, 20);
  EXPECT_FALSE(m->dtype_differs);
  EXPECT_EQ(m->candidate_dtype, "float32");
}

TEST(CompareTensors, HandComputedExample) {
  // diff = [0, .5, .5]; |r| = [1, 2.5, 3]; allowed = .1 + .1|r| = [.2, .35, .4].
  auto m = compare_tensors(f32({1.0f, 2.0f, 3.5f}), f32({1.0f, 2.5f, 3.0f}), 0.1, 0.1, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_NEAR(m->max_abs_error, 0.5, 1e-7);
  EXPECT_NEAR(m->max_rel_error, 0.2, 1e-7);                               // .5 / 2.5
  EXPECT_NEAR(m->rel_l2_error, std::sqrt(0.5) / std::sqrt(16.25), 1e-7);  // ||d|| / ||r||
  EXPECT_NEAR(m->mismatch_fraction, 2.0 / 3.0, 1e-12);
  EXPECT_FALSE(m->has_nan);
}

TEST(CompareTensors, AtolFloorsTheDenominators) {
  // r = 0 everywhere: max_rel uses atol, rel_l2 uses atol * sqrt(n).
  auto m = compare_tensors(f32({0.0f, 1e-3f}), f32({0.0f, 0.0f}), 1e-2, 0.0, true);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_NEAR(m->max_rel_error, 0.1, 1e-6);
  EXPECT_NEAR(m->rel_l2_error, 1e-3 / (1e-2 * std::sqrt(2.0)), 1e-6);
  EXPECT_EQ(m->mismatch_fraction, 0.0);  // 1e-3 <= 1e-2
}

TEST(CompareTensors, RmsScaleJudgesNearZeroElementsOnTheLeafsScale) {
  // r has RMS 10 (values +-10, one 0): with atol 1e-3 / rtol 1e-2 the 0.02 error on the zero
  // element mismatches; with atol_rms_scale 5e-3 the band there is 5e-3 * 10 = 0.05 and it is within.
  const at::Tensor r = f32({10.0f, -10.0f, 0.0f, 10.0f, -10.0f});
  const at::Tensor c = f32({10.0f, -10.0f, 0.02f, 10.0f, -10.0f});
  auto plain = compare_tensors(c, r, 1e-3, 1e-2, true);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_NEAR(plain->mismatch_fraction, 0.2, 1e-12);
  auto scaled = compare_tensors(c, r, 1e-3, 1e-2, true, 5e-3);
  ASSERT_TRUE(scaled.ok()) << scaled.status().to_string();
  EXPECT_EQ(scaled->mismatch_fraction, 0.0);
  EXPECT_EQ(scaled->rel_l2_error, plain->rel_l2_error);  // only the band moves
  // An error the size of the leaf's scale still mismatches.
  auto corrupt = compare_tensors(f32({10.0f, -10.0f, 5.0f, 10.0f, -10.0f}), r, 1e-3, 1e-2, true, 5e-3);
  ASSERT_TRUE(corrupt.ok());
  EXPECT_NEAR(corrupt->mismatch_fraction, 0.2, 1e-12);
  // Infinities in the reference do not make the band infinite (RMS over the finite elements).
  const float inf = std::numeric_limits<float>::infinity();
  auto with_inf = compare_tensors(f32({inf, 3.0f, 1.0f}), f32({inf, 1.0f, 1.0f}), 1e-3, 1e-2, true, 5e-3);
  ASSERT_TRUE(with_inf.ok());
  EXPECT_NEAR(with_inf->mismatch_fraction, 1.0 / 3.0, 1e-12);
  EXPECT_FALSE(compare_tensors(c, r, 1e-3, 1e-2, true, -1.0).ok());
}

TEST(CompareTensors, ZeroToleranceAndZeroReferenceStayFinite) {
  auto same = compare_tensors(f32({0.0f, 0.0f}), f32({0.0f, 0.0f}), 0.0, 0.0, false);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->max_rel_error, 0.0);
  EXPECT_EQ(same->rel_l2_error, 0.0);
  auto off = compare_tensors(f32({0.0f, 1.0f}), f32({0.0f, 0.0f}), 0.0, 0.0, false);
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(std::isinf(off->max_rel_error));
  EXPECT_TRUE(std::isinf(off->rel_l2_error));
  EXPECT_EQ(off->mismatch_fraction, 0.5);
}

TEST(CompareTensors, NanInCandidateIsReportedAndMismatches) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto m = compare_tensors(f32({nan, 1.0f}), f32({1.0f, 1.0f}), 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->has_nan);
  EXPECT_EQ(m->mismatch_fraction, 0.5);
  EXPECT_TRUE(std::isnan(m->max_abs_error));
  // A NaN only in the reference is not the candidate's NaN.
  auto ref_nan = compare_tensors(f32({1.0f}), f32({nan}), 1e-5, 1e-4, false);
  ASSERT_TRUE(ref_nan.ok());
  EXPECT_FALSE(ref_nan->has_nan);
  EXPECT_EQ(ref_nan->mismatch_fraction, 1.0);
}

TEST(CompareTensors, EqualInfinitiesAreZeroError) {
  const float inf = std::numeric_limits<float>::infinity();
  auto m = compare_tensors(f32({inf, -inf, 2.0f}), f32({inf, -inf, 2.0f}), 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->max_abs_error, 0.0);
  EXPECT_EQ(m->mismatch_fraction, 0.0);
}

TEST(CompareTensors, IntegerLeavesCountUnequalElements) {
  at::Tensor c = at::tensor({1, 2, 3, 4}, at::kLong);
  at::Tensor r = at::tensor({1, 2, 5, 4}, at::kInt);
  // A large atol would accept |3 - 5| under the float rule; integers must be equal.
  auto m = compare_tensors(c, r, 10.0, 10.0, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->mismatch_fraction, 0.25);
  EXPECT_EQ(m->max_abs_error, 2.0);
  EXPECT_NEAR(m->max_rel_error, 2.0 / 10.0, 1e-7);  // max(|r|, atol) = 10
  EXPECT_FALSE(m->has_nan);
  EXPECT_TRUE(m->dtype_differs);
  EXPECT_EQ(m->candidate_dtype, "int64");
  EXPECT_EQ(m->reference_dtype, "int32");
}

TEST(CompareTensors, BoolLeaves) {
  at::Tensor c = at::tensor({1, 0, 1, 1}, at::kInt).to(at::kBool);
  at::Tensor r = at::ones({4}, at::kBool);
  auto m = compare_tensors(c, r, 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->mismatch_fraction, 0.25);
  EXPECT_EQ(m->max_abs_error, 1.0);
}

TEST(CompareTensors, Fp64PathKeepsDifferencesFloat32Loses) {
  at::Tensor r = at::ones({8}, at::kDouble);
  at::Tensor c = r + 1e-12;
  auto in_fp32 = compare_tensors(c, r, 0.0, 0.0, false);
  auto in_fp64 = compare_tensors(c, r, 0.0, 0.0, true);
  ASSERT_TRUE(in_fp32.ok() && in_fp64.ok());
  EXPECT_EQ(in_fp32->max_abs_error, 0.0);  // both round to 1.0f
  EXPECT_NEAR(in_fp64->max_abs_error, 1e-12, 1e-15);
  EXPECT_EQ(in_fp64->mismatch_fraction, 1.0);  // zero tolerance
}

TEST(CompareTensors, HalfCandidateAgainstFloatReference) {
  at::Tensor r = at::linspace(-2, 2, 101);
  auto m = compare_tensors(r.to(at::kHalf), r, 1e-2, 1e-2, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->dtype_differs);
  EXPECT_EQ(m->candidate_dtype, "float16");
  EXPECT_GT(m->max_abs_error, 0.0);
  EXPECT_LT(m->max_abs_error, 1e-3);  // fp16 spacing near 2 is ~2e-3; rounding error is half of it
  EXPECT_EQ(m->mismatch_fraction, 0.0);
}

TEST(CompareTensors, ComplexLeavesUseMagnitudes) {
  at::Tensor r = at::complex(at::tensor({1.0f, 0.0f}), at::tensor({0.0f, 1.0f}));
  at::Tensor c = at::complex(at::tensor({1.0f, 0.0f}), at::tensor({0.0f, 2.0f}));
  auto m = compare_tensors(c, r, 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_NEAR(m->max_abs_error, 1.0, 1e-7);
  EXPECT_EQ(m->mismatch_fraction, 0.5);
}

TEST(CompareTensors, ShapeMismatchNamesBothShapes) {
  auto m = compare_tensors(at::zeros({2, 3}), at::zeros({3, 2}), 1e-5, 1e-4, false);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("[3, 2]"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("[2, 3]"), std::string::npos) << m.status().message();
}

TEST(CompareTensors, EmptyTensorsAreAllZero) {
  auto m = compare_tensors(at::zeros({0, 4}), at::zeros({0, 4}), 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->numel, 0);
  EXPECT_EQ(m->max_abs_error, 0.0);
  EXPECT_EQ(m->rel_l2_error, 0.0);
  EXPECT_EQ(m->mismatch_fraction, 0.0);
}

TEST(CompareTensors, RejectsUndefinedAndNegativeTolerance) {
  EXPECT_EQ(compare_tensors(at::Tensor(), at::zeros({1}), 1e-5, 1e-4, false).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(compare_tensors(at::zeros({1}), at::zeros({1}), -1.0, 1e-4, false).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CompareTensors, ReferenceOnGpuIsMovedToCandidateDevice) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device: cross-device comparison needs one";
  at::Tensor r = at::randn({16});
  auto m = compare_tensors(r.cuda(), r, 1e-5, 1e-4, false);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->max_abs_error, 0.0);
}

}  // namespace
}  // namespace aitune
