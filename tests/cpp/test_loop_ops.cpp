// The loop-IR operator table (ir/loop_ops.h): names read back, every row renders its operands,
// and the textual IR prints the table's names.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "codegen/common/op_spelling.h"
#include "ir/loop_ir.h"

using namespace kiln;
using namespace kiln::ir;

TEST(LoopOps, NamesAreUniqueAndReadBack) {
  std::set<std::string> seen;
  for (int i = 0; i <= static_cast<int>(UnaryOp::kRoundF16); ++i) {
    UnaryOp op = static_cast<UnaryOp>(i), back;
    ASSERT_TRUE(seen.insert(std::string("u:") + op_name(op)).second) << op_name(op);
    ASSERT_TRUE(unary_op_named(op_name(op), &back));
    EXPECT_EQ(back, op);
    EXPECT_NE(std::string(info(op).cpp).find("$0"), std::string::npos) << op_name(op);
    EXPECT_NE(std::string(info(op).cuda).find("$0"), std::string::npos) << op_name(op);
  }
  for (int i = 0; i <= static_cast<int>(BinaryOp::kClampHi); ++i) {
    BinaryOp op = static_cast<BinaryOp>(i), back;
    ASSERT_TRUE(seen.insert(std::string("b:") + op_name(op)).second) << op_name(op);
    ASSERT_TRUE(binary_op_named(op_name(op), &back));
    EXPECT_EQ(back, op);
    for (const char* s : {info(op).cpp, info(op).cuda}) {
      EXPECT_NE(std::string(s).find("$0"), std::string::npos) << op_name(op);
      EXPECT_NE(std::string(s).find("$1"), std::string::npos) << op_name(op);
    }
  }
  ReduceOp r;
  EXPECT_TRUE(reduce_op_named("welford", &r));
  EXPECT_EQ(r, ReduceOp::kWelford);
  EXPECT_EQ(info(ReduceOp::kArgMax).parts, 2);
  EXPECT_FALSE(unary_op_named("no_such_op", nullptr));
}

TEST(LoopOps, SpellingAndTextualForm) {
  EXPECT_EQ(codegen::spell(info(UnaryOp::kRsqrt).cpp, "t0", "", "float"), "(float(1) / kiln::m::sqrt(t0))");
  EXPECT_EQ(codegen::spell(info(BinaryOp::kFloorDiv).cuda, "a", "b"), "kiln::floordiv(a, b, kiln_err)");
  EXPECT_TRUE(info(BinaryOp::kLt).is(kOpPredicate));
  EXPECT_FALSE(info(BinaryOp::kAdd).is(kOpPredicate));
  ExprPtr x = load(0, DType::kFloat32, Index::var(0));
  ExprPtr e = binary(BinaryOp::kLt, unary(UnaryOp::kExp, x, DType::kFloat32), constant(1, DType::kFloat32), DType::kBool);
  EXPECT_EQ(expr_string(e), "lt:b8(exp(buf0[x0]), f32(1))");
}
