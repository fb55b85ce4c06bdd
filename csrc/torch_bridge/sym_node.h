// kiln's symbolic integers seen from C++ code that holds PyTorch SymInts (sym_node.cpp defines
// the SymNodeImpl behind them).
#pragma once
#include <c10/core/SymInt.h>

#include "symbolic/sym_expr.h"

namespace kiln::bridge {

// The kiln expression of a SymInt: a constant for a plain int; false for a SymInt of another
// kind (not made by kiln, or a float).
bool symint_expr(const c10::SymInt& s, sym::Expr* out);

// x == y (x != y) for sizes, known without a guard: from the expressions' forms, or constants.
// False where deciding it would take a guard.
inline bool provably_equal(const c10::SymInt& x, const c10::SymInt& y) {
  if (auto b = x.sym_eq(y).maybe_as_bool()) return *b;
  return false;
}
inline bool provably_unequal(const c10::SymInt& x, const c10::SymInt& y) {
  if (auto b = x.sym_ne(y).maybe_as_bool()) return *b;
  return false;
}

}  // namespace kiln::bridge
