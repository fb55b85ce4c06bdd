// Index algebra: reshape round trips simplify back to plain variables; printing is C++.
#include <gtest/gtest.h>

#include "ir/index_expr.h"

using namespace kiln::ir;

TEST(IndexExpr, FloorDivAndModOfAlignedSums) {
  VarRanges r = {4, 8};  // x0 in [0,4), x1 in [0,8)
  Index flat = add(mul(Index::var(0), 8), Index::var(1));
  EXPECT_EQ(floordiv(flat, 8, r).to_string(), "x0");
  EXPECT_EQ(mod(flat, 8, r).to_string(), "x1");
  // x1 < 8 never carries into x0's multiples of 8: (8*x0 + x1) // 16 is x0 // 2.
  EXPECT_EQ(floordiv(flat, 16, r).to_string(), "((x0) / 2)");
  EXPECT_EQ(mod(flat, 16, r).to_string(), "x1 + 8*((x0) % 2)");
}

TEST(IndexExpr, LowPartThatNeverCarriesLeavesTheDivision) {
  // q of a fused QKV projection split into heads: row 4096*x0 + 64*x1 + x2 of [8, 64, 64], the
  // batch is (row // 16384). The division was rendered per element (an integer divide in the
  // innermost loop; with runtime sizes a true 64-bit division, 20x slower than the copy).
  VarRanges r = {8, 64, 64};
  Index row = add(add(mul(Index::var(0), 4096), mul(Index::var(1), 64)), Index::var(2));
  EXPECT_EQ(floordiv(row, 16384, r).to_string(), "((x0) / 4)");
  EXPECT_EQ(mod(row, 16384, r).to_string(), "64*x1 + x2 + 4096*((x0) % 4)");
  // When 64*x1 + x2 can reach 4096, only x2 (< 64) splits off; the division stays, off x2.
  VarRanges wide = {8, 65, 64};
  EXPECT_EQ(floordiv(row, 16384, wide).to_string(), "((64*x0 + x1) / 256)");
  VarRanges odd = {8, 64, 65};
  EXPECT_EQ(floordiv(row, 16384, odd).to_string(), "((4096*x0 + 64*x1 + x2) / 16384)");
  // Constants split too, and the identity holds at every point.
  Index e = add(row, Index::of(4100));
  for (int64_t x0 = 0; x0 < 8; ++x0)
    for (int64_t x1 = 0; x1 < 64; x1 += 7)
      for (int64_t x2 = 0; x2 < 64; x2 += 5) {
        const int64_t v = 4096 * x0 + 64 * x1 + x2 + 4100;
        std::vector<Index> at = {Index::of(x0), Index::of(x1), Index::of(x2)};
        EXPECT_EQ(substitute(floordiv(e, 16384, r), at, r).constant, v / 16384);
        EXPECT_EQ(substitute(mod(e, 16384, r), at, r).constant, v % 16384);
      }
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
