// Index algebra: reshape round trips simplify back to plain variables; printing is C++.
#include <gtest/gtest.h>

#include "ir/index_expr.h"

using namespace kiln::ir;

TEST(IndexExpr, FloorDivAndModOfAlignedSums) {
  VarRanges r = {4, 8};  // x0 in [0,4), x1 in [0,8)
  Index flat = add(mul(Index::var(0), 8), Index::var(1));
  EXPECT_EQ(floordiv(flat, 8, r).to_string(), "x0");
  EXPECT_EQ(mod(flat, 8, r).to_string(), "x1");
  EXPECT_EQ(floordiv(flat, 16, r).to_string(), "((8*x0 + x1) / 16)");
}

TEST(IndexExpr, DivModRecombines) {
  VarRanges r = {64};
  Index x = Index::var(0);
  Index e = add(mul(floordiv(x, 8, r), 8), mod(x, 8, r));
  EXPECT_EQ(e.to_string(), "x0");
}

TEST(IndexExpr, BoundsAndSubstitution) {
  VarRanges r = {3, 5};
  Index e = add(mul(Index::var(0), 5), add(Index::var(1), Index::of(2)));
  auto [lo, hi] = bounds(e, r);
  EXPECT_EQ(lo, 2);
  EXPECT_EQ(hi, 16);
  Index s = substitute(e, {Index::var(1), Index::var(0)}, {5, 3});
  EXPECT_EQ(s.to_string(), "x0 + 5*x1 + 2");
}

TEST(IndexExpr, DivisionByAZeroSizeThrowsInsteadOfTrapping) {
  // An empty tensor's zero extent reached reshape_index once and killed the process (SIGFPE).
  VarRanges r = {4};
  EXPECT_THROW(floordiv(Index::var(0), 0, r), std::invalid_argument);
  EXPECT_THROW(mod(Index::var(0), 0, r), std::invalid_argument);
  EXPECT_THROW(mod(Index::of(3), 0, r), std::invalid_argument);
}
