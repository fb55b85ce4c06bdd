// kiln's symbolic integers seen from C++ code that holds PyTorch SymInts (sym_node.cpp defines
// the SymNodeImpl behind them).
#pragma once
#include <c10/core/SymInt.h>

#include "symbolic/sym_expr.h"

namespace kiln::bridge {

// The kiln expression of a SymInt: a constant for a plain int; false for a SymInt of another
// kind (not made by kiln, or a float).
bool symint_expr(const c10::SymInt& s, sym::Expr* out);

}  // namespace kiln::bridge
