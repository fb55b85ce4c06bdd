// Index algebra: reshape round trips simplify back to plain variables; printing is C++.
#include <gtest/gtest.h>

#include "ir/index_expr.h"

#include <random>

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

TEST(IndexExpr, FloorDivAndModAgreeWithArithmeticOnRandomSums) {
  // Random affine sums of three variables (coefficients often multiples of one another, as
  // strides are), divided by random divisors: the simplified forms must give exactly floor
  // division and modulo at every point of the ranges.
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    VarRanges r = {pick(1, 5), pick(1, 6), pick(1, 7)};
    int64_t c2 = pick(1, 3), c1 = c2 * r[2] * pick(1, 2) + pick(0, 1), c0 = c1 * r[1] * pick(1, 3);
    int64_t k = pick(-20, 40);
    Index e = add(add(add(mul(Index::var(0), c0), mul(Index::var(1), c1)), mul(Index::var(2), c2)), Index::of(k));
    const int64_t divisors[] = {pick(1, 4) * c1, pick(1, 5) * c0, pick(2, 64), c2 * r[2]};
    for (int64_t d : divisors) {
      if (d <= 0) continue;
      Index q = floordiv(e, d, r), m = mod(e, d, r);
      for (int64_t a = 0; a < r[0]; ++a)
        for (int64_t b = 0; b < r[1]; ++b)
          for (int64_t c = 0; c < r[2]; ++c) {
            const int64_t v = c0 * a + c1 * b + c2 * c + k;
            const int64_t fq = v >= 0 ? v / d : -((-v + d - 1) / d);
            std::vector<Index> at = {Index::of(a), Index::of(b), Index::of(c)};
            ASSERT_EQ(substitute(q, at, r).constant, fq) << e.to_string() << " // " << d << " -> " << q.to_string();
            ASSERT_EQ(substitute(m, at, r).constant, v - fq * d) << e.to_string() << " % " << d << " -> " << m.to_string();
          }
    }
  }
}
