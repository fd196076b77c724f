#include "common/status.h"

#include <gtest/gtest.h>

#include <iterator>
#include <memory>
#include <set>
#include <string>

namespace aitune {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kOk);
  EXPECT_EQ(status.to_string(), "Ok");
}

TEST(StatusTest, ToStringHasCodeNameAndMessage) {
  const Status status = invalid_argument("bad shape");
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "bad shape");
  EXPECT_EQ(status.to_string(), "InvalidArgument: bad shape");
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  const StatusCode codes[] = {
      StatusCode::kOk,
      StatusCode::kInvalidArgument,
      StatusCode::kNotFound,
      StatusCode::kGraphNotFound,
      StatusCode::kProfileShape,
      StatusCode::kCorrupt,
      StatusCode::kUnsupported,
      StatusCode::kIncompatible,
      StatusCode::kBackendUnavailable,
      StatusCode::kBackendError,
      StatusCode::kCudaError,
      StatusCode::kInternal,
  };
  std::set<std::string> names;
  for (StatusCode code : codes) {
    const std::string name = status_code_name(code);
    EXPECT_NE(name, "Unknown");
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size(codes));
  EXPECT_STREQ(status_code_name(StatusCode::kGraphNotFound), "GraphNotFound");
  EXPECT_STREQ(status_code_name(StatusCode::kProfileShape), "ProfileShape");
}

TEST(StatusTest, HelpersSetTheirCodes) {
  EXPECT_EQ(not_found("x").code(), StatusCode::kNotFound);
  EXPECT_EQ(graph_not_found("x").code(), StatusCode::kGraphNotFound);
  EXPECT_EQ(profile_shape_error("x").code(), StatusCode::kProfileShape);
  EXPECT_EQ(internal_error("x").code(), StatusCode::kInternal);
  EXPECT_EQ(unsupported("x").code(), StatusCode::kUnsupported);
}

TEST(StatusOrTest, HoldsValue) {
  StatusOr<std::string> result = std::string("hello");
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result.status().ok());
  EXPECT_EQ(*result, "hello");
  EXPECT_EQ(result->size(), 5u);
}

TEST(StatusOrTest, HoldsError) {
  StatusOr<int> result = not_found("missing");
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(result.status().message(), "missing");
}

TEST(StatusOrTest, OkStatusWithoutValueBecomesInternal) {
  StatusOr<int> result = Status::Ok();
  EXPECT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInternal);
}

TEST(StatusOrTest, MovesOutMoveOnlyValue) {
  StatusOr<std::unique_ptr<int>> result = std::make_unique<int>(7);
  ASSERT_TRUE(result.ok());
  std::unique_ptr<int> value = std::move(result).value();
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, 7);
}

Status fail_if(bool fail) { return fail ? invalid_argument("failed") : Status::Ok(); }

Status chain(bool fail, int* reached) {
  AITUNE_RETURN_IF_ERROR(fail_if(fail));
  *reached = 1;
  return Status::Ok();
}

StatusOr<int> half(int value) {
  AITUNE_CHECK_ARG(value % 2 == 0, "odd value " + std::to_string(value));
  return value / 2;
}

StatusOr<int> quarter(int value) {
  AITUNE_ASSIGN_OR_RETURN(int h, half(value));
  AITUNE_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(StatusMacrosTest, ReturnIfErrorStopsOnError) {
  int reached = 0;
  EXPECT_EQ(chain(true, &reached).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(chain(false, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, AssignOrReturnAndCheckArg) {
  StatusOr<int> ok = quarter(8);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  StatusOr<int> failed = quarter(6);  // 6 -> 3, then 3 is odd
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "odd value 3");
}

}  // namespace
}  // namespace aitune
