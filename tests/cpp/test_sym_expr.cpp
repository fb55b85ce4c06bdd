// Symbolic integers: canonical forms, simplification, comparisons decided from the form, guard
// recording and evaluation.
#include <gtest/gtest.h>

#include <stdexcept>

#include "symbolic/shape_env.h"
#include "symbolic/sym_expr.h"

using namespace kiln::sym;

static Expr c(int64_t v) { return Expr::constant(v); }

TEST(SymExpr, CanonicalPolynomials) {
  Expr s0 = Expr::symbol(0), s1 = Expr::symbol(1);
  EXPECT_TRUE((s0 * c(64)).same(c(64) * s0));
  EXPECT_EQ((s0 * c(64) + c(1)).str(), "64*s0 + 1");
  EXPECT_EQ((s0 * s1 - s1 * s0).str(), "0");
  EXPECT_TRUE((s0 * s1 - s1 * s0).is_constant());
  EXPECT_EQ(((s0 + c(1)) * (s0 - c(1))).str(), "s0*s0 - 1");
  EXPECT_EQ((c(2) - s1 * c(3)).str(), "-3*s1 + 2");
  EXPECT_TRUE(s1.is_symbol());
  EXPECT_EQ(s1.symbol_id(), 1);
}

// A slice's end of INT64_MAX compared with a size (`t[1:]` on a symbolic dim): the canonical
// form's arithmetic would overflow (undefined behaviour, caught by UBSan in the fuzzer); it
// throws instead, and what stays in range keeps working.
TEST(SymExpr, ArithmeticNearTheInt64LimitsThrowsRatherThanOverflows) {
  Expr s0 = Expr::symbol(0);
  EXPECT_THROW(c(INT64_MAX) + c(1), std::overflow_error);
  EXPECT_THROW(s0 * c(INT64_MAX) * c(2), std::overflow_error);
  EXPECT_EQ((s0 - c(INT64_MAX)).str(), "s0 - 9223372036854775807");
  EXPECT_EQ((c(INT64_MIN) + s0).str(), "s0 - 9223372036854775808");
  // Not decided by the bounds (a product of symbols is unbounded above); `<` negates the
  // difference s0*s1 + INT64_MIN.
  EXPECT_THROW(compare(Cmp::kLt, s0 * Expr::symbol(1) - c(1), c(INT64_MAX)), std::overflow_error);
  const int64_t big[] = {INT64_MAX};
  EXPECT_THROW((s0 + c(1)).eval(big), std::overflow_error);
}

// Comparisons the operands' bounds decide never form the difference, so they cannot overflow:
// wav2vec2's `arange(n)[:, None]` with n = (s0 - 10)//5 + 1 = (s0//5) - 1 asks `n <= INT64_MAX`
// (PyTorch's full-slice check), whose difference has the constant INT64_MIN, negated by `<=`.
TEST(SymExpr, ComparisonsWithInt64LimitsDecidedByBounds) {
  Expr s0 = Expr::symbol(0);
  Expr n = floordiv(s0 - c(10), c(5)) + c(1);
  EXPECT_EQ(n.str(), "(s0//5) - 1");
  EXPECT_EQ(known(compare(Cmp::kLe, n, c(INT64_MAX))), true);
  EXPECT_EQ(known(compare(Cmp::kGe, c(INT64_MAX), n)), true);
  // PyTorch's slice decomposition asks `end == sys.maxsize` of wav2vec2's `h[:, :, :-1]`: decided
  // because symbols are at most 2^62. Undecided, the difference's constant INT64_MIN is rendered
  // on the right unsigned.
  EXPECT_EQ(known(compare(Cmp::kEq, n, c(INT64_MAX))), false);
  Expr s1 = Expr::symbol(1);
  Expr eq = compare(Cmp::kEq, s0 * s1 - c(1), c(INT64_MAX));
  EXPECT_FALSE(known(eq).has_value());
  EXPECT_EQ(eq.str(), "s0*s1 == 9223372036854775808");
  const int64_t vals[] = {100, 3};
  EXPECT_EQ(eq.eval(vals), 0);
  EXPECT_EQ(known(compare(Cmp::kEq, s0, c(INT64_MIN))), false);
  EXPECT_EQ(known(compare(Cmp::kNe, s0, c(INT64_MIN))), true);
  EXPECT_EQ(known(compare(Cmp::kEq, c(INT64_MIN) + s0, c(0))), false);
  EXPECT_EQ(known(compare(Cmp::kLe, s0, c(int64_t{1} << 62))), true);
  EXPECT_FALSE(known(compare(Cmp::kLt, s0, c(int64_t{1} << 62))).has_value());
  EXPECT_EQ(known(compare(Cmp::kLt, c(INT64_MIN), s0)), true);
  EXPECT_EQ(known(compare(Cmp::kGt, s0, c(1))), true);
}

TEST(SymExpr, FloorDivAndModSimplify) {
  Expr s0 = Expr::symbol(0), s1 = Expr::symbol(1);
  EXPECT_EQ(floordiv(s0 * c(4) + c(2), c(2)).str(), "2*s0 + 1");
  EXPECT_EQ(floordiv(s0 * c(256), c(4)).str(), "64*s0");
  EXPECT_EQ(mod(s0 * c(4) + c(6), c(4)).str(), "2");
  EXPECT_EQ(floordiv(s0 + c(1), c(2)).str(), "((s0 + 1)//2)");
  EXPECT_EQ(floordiv(s0 * c(6) + s1, c(3)).str(), "(s1//3) + 2*s0");
  EXPECT_EQ(floordiv(s0 * s1, s0 * s1).str(), "1");
  EXPECT_EQ(mod(s0 * c(8), s0 * c(2)).str(), "0");          // (8*s0) % (2*s0): view's checks
  EXPECT_EQ(floordiv(s0 * c(8) + c(1), s0 * c(2)).str(), "4");
  EXPECT_EQ(mod(c(2), s0 * c(2)).str(), "2");               // 2 < 2*s0 (s0 >= 2)
  EXPECT_EQ(floordiv(c(2), s0 * c(2)).str(), "0");
  EXPECT_THROW(floordiv(s0, c(0)), std::domain_error);
  int64_t vals[] = {-7, 5};
  EXPECT_EQ(floordiv(s0, c(2)).eval(vals), -4);  // Python semantics
  EXPECT_EQ(mod(s0, c(2)).eval(vals), 1);
  EXPECT_EQ(max(s0 + c(1), s0).str(), "s0 + 1");
  EXPECT_EQ(min(s0, s1).str(), "min(s0, s1)");
}

// Division by a monomial takes out the terms it divides; a value known to lie in [0, b) is its own
// remainder. Without these, deberta at a dynamic batch and length recorded 387 shape guards up to
// 65,000 characters long, built on (s0*s1)//s0, and evaluating them cost 4 ms per call.
TEST(SymExpr, DivisionByAMonomial) {
  Expr s0 = Expr::symbol(0), s1 = Expr::symbol(1), s2 = Expr::symbol(2);
  EXPECT_EQ(floordiv(s0 * s1, s0).str(), "s1");
  EXPECT_EQ(floordiv(c(64) * s0 * s1, c(4) * s0 * s1).str(), "16");
  EXPECT_EQ(floordiv(c(6) * s0 * s1 + c(4) * s0, c(2) * s0).str(), "3*s1 + 2");
  EXPECT_EQ(floordiv(s0 * s1 + s2, s0).str(), "(s2//s0) + s1");
  EXPECT_EQ(floordiv(s0 * s1 + c(1), s0).str(), "s1");  // 0 <= 1 < s0
  EXPECT_EQ(mod(s0 * s1 + c(1), s0).str(), "1");
  EXPECT_EQ(mod(s0 * s1, s0).str(), "0");
  EXPECT_EQ(mod(s0, s0 * s1).str(), "s0");               // 0 <= s0 < s0*s1 (s1 >= 2)
  EXPECT_EQ(floordiv(s0, s0 * s1).str(), "0");
  EXPECT_EQ(floordiv(c(3) * s0 * s1, c(2) * s0).str(), "((3*s0*s1)//(2*s0))");  // 2 does not divide 3
  EXPECT_EQ(floordiv(s1, s0).str(), "(s1//s0)");
  Expr q = floordiv(s0 * s1 + s2, s0);
  for (int64_t a : {2, 3, 7}) for (int64_t b : {2, 5}) for (int64_t d : {2, 4, 9, 100}) {
    const int64_t v[] = {a, b, d};
    EXPECT_EQ(q.eval(v), py_floordiv(a * b + d, a));
    EXPECT_EQ(mod(s0 * s1 + s2, s0).eval(v), py_mod(a * b + d, a));
  }
}

TEST(SymExpr, ComparisonsKnownFromForm) {
  Expr s0 = Expr::symbol(0), s1 = Expr::symbol(1);
  EXPECT_EQ(known(compare(Cmp::kGt, s0 + c(1), s0)), true);
  EXPECT_EQ(known(compare(Cmp::kGe, s0, c(2))), true);    // symbols are sizes >= 2
  EXPECT_EQ(known(compare(Cmp::kEq, s0, c(1))), false);
  EXPECT_EQ(known(compare(Cmp::kEq, s0 * c(64), c(64) * s0)), true);
  EXPECT_EQ(known(compare(Cmp::kLt, s0 * s1, c(4))), false);
  EXPECT_FALSE(known(compare(Cmp::kEq, s0, s1)).has_value());
  EXPECT_FALSE(known(compare(Cmp::kGt, s0, c(8))).has_value());
  EXPECT_EQ(known(compare(Cmp::kGe, s0 * s0, s0 + c(1))), true);    // SDPA asks this: s0^2 - s0 - 1 >= 1
  EXPECT_EQ(known(compare(Cmp::kNe, s0, s0 * s0)), true);
  EXPECT_EQ(known(compare(Cmp::kGe, s0 * s1 - s0 - s1, c(0))), true);  // (2+a)(2+b) - 4 - a - b >= 0
  EXPECT_FALSE(known(compare(Cmp::kGe, s0 * s0 - c(5) * s0, c(0))).has_value());  // 4 - 10 < 0 <= 36 - 30
  EXPECT_EQ(compare(Cmp::kEq, s1, s0).str(), compare(Cmp::kEq, s0, s1).str());
  EXPECT_EQ(compare(Cmp::kLe, s0, c(8)).str(), "8 >= s0");
  EXPECT_EQ(logical_not(compare(Cmp::kGt, s0, c(8))).str(), "8 >= s0");
  int64_t vals[] = {9, 3};
  EXPECT_EQ(compare(Cmp::kGt, s0, c(8)).eval(vals), 1);
  EXPECT_EQ(logical_and(compare(Cmp::kGt, s0, c(8)), compare(Cmp::kEq, s1, c(4))).eval(vals), 0);
}

TEST(ShapeEnv, GuardsOnlyWhatTheFormDoesNotDecide) {
  ShapeEnv env;
  Expr s0 = Expr::symbol(env.new_symbol("L['x'].size(1)", 0, 1, 16));
  Expr s1 = Expr::symbol(env.new_symbol("L['y'].size(0)", 1, 0, 16));
  EXPECT_TRUE(env.guard_bool(compare(Cmp::kGt, s0 + c(1), s0)));
  EXPECT_TRUE(env.guard_bool(compare(Cmp::kEq, s0, s1)));
  EXPECT_FALSE(env.guard_bool(compare(Cmp::kGt, s0, c(100))));
  EXPECT_EQ(env.guard_int(floordiv(s0, c(4))), 4);
  ASSERT_EQ(env.guards().size(), 3u);
  EXPECT_EQ(env.guards()[0].str(), "s0 == s1");
  EXPECT_EQ(env.guards()[1].str(), "100 >= s0");
  ShapeGuards g{env.guards(), 2};
  int64_t same[] = {16, 16}, other[] = {20, 20}, split[] = {16, 20};
  EXPECT_TRUE(g.check(same));
  EXPECT_FALSE(g.check(other));  // (s0//4) == 4 no longer holds
  EXPECT_FALSE(g.check(split));
  EXPECT_EQ(g.first_failure(split), "s0 == s1 (s0 = 16, s1 = 20)");
}
