#include <gtest/gtest.h>

#include "gw_status.h"

namespace gw {
namespace {

TEST(Status, OkHoldsNothing) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.to_string(), "OK");
  EXPECT_TRUE(s.message().empty());
}

TEST(Status, ErrorKeepsCodeMessageAndErrno) {
  Status s(Code::kSystemError, "connect to 10.0.0.1:5", ECONNREFUSED);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kSystemError);
  EXPECT_EQ(s.sys_errno(), ECONNREFUSED);
  EXPECT_NE(s.message().find("connect to 10.0.0.1:5: "), std::string_view::npos);
  EXPECT_NE(s.to_string().find("SystemError: "), std::string::npos);
}

TEST(Status, OkCodeWithMessageIsOk) { EXPECT_TRUE(Status(Code::kOk, "ignored").ok()); }

TEST(Status, ContextIsPrepended) {
  Status s = Status(Code::kTimeout, "no reply").with_context("rank 3");
  EXPECT_EQ(s.message(), "rank 3: no reply");
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_TRUE(Status().with_context("x").ok());
}

TEST(Status, CopiesShareTheSameError) {
  Status a(Code::kRemoteError, "peer rank 1 closed");
  Status b = a;
  EXPECT_EQ(a.message().data(), b.message().data());
}

TEST(Status, RankIsKeptByContext) {
  Status a(Code::kRemoteError, "rank 2 failed");
  EXPECT_EQ(a.rank(), -1);
  Status b = a.with_rank(2).with_context("coll");
  EXPECT_EQ(b.rank(), 2);
  EXPECT_EQ(b.code(), Code::kRemoteError);
  EXPECT_EQ(b.message(), "coll: rank 2 failed");
  EXPECT_TRUE(Status().with_rank(3).ok());
}

TEST(Status, AllCodesHaveNames) {
  for (int c = 0; c <= static_cast<int>(Code::kAborted); ++c)
    EXPECT_STRNE(code_name(static_cast<Code>(c)), "Unknown");
}

Result<int> half(int x) {
  if (x % 2) return Status(Code::kInvalidArgument, "odd");
  return x / 2;
}

Result<int> quarter(int x) {
  GW_ASSIGN_OR_RETURN(int h, half(x));
  GW_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Result, ValueOrStatusPropagates) {
  auto r = quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  auto e = quarter(6);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kInvalidArgument);
}

TEST(Result, OkStatusIsNotAValue) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace gw
