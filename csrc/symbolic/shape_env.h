// The shape environment of one capture: the size symbols it introduced (where each comes from and
// the value it had when captured, its "hint"), and the shape guards recorded whenever captured
// code needed a fact about symbols (a branch on a size, a broadcast check, an int() of a size).
//
// Capture evaluates every question on the hints and records the answer as a guard unless the
// answer follows from the expression alone (`s0 + 1 > s0`, `s0 >= 2`). A call may use the
// capture's graph only when all guards hold for its sizes (ShapeGuards::check).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "symbolic/sym_expr.h"

namespace kiln::sym {

struct SymbolInfo {
  std::string source;  // e.g. "L['x'].size(1)"
  int input = -1;      // which tensor input (capture order) and dimension defines it
  int dim = -1;
  int64_t hint = 0;
};

class ShapeEnv {
 public:
  int new_symbol(std::string source, int input, int dim, int64_t hint);
  // Duck sizing: the symbol already standing for a dynamic size with this hint, or -1.
  int symbol_with_hint(int64_t hint) const;
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  const std::vector<int64_t>& hints() const { return hints_; }

  int64_t hint(const Expr& e) const { return e.eval(hints_.data()); }
  // Concretise: the value under the hints, guarding on it unless it is known from the form.
  bool guard_bool(const Expr& b);
  int64_t guard_int(const Expr& e);
  // The boolean's value under the hints without recording anything (statically_known_true).
  const std::vector<Expr>& guards() const { return guards_; }
  // One guard a line, with the symbols' sources: "s0 == s1  # s0 = L['k'].size(2) ..."
  std::string to_string() const;

 private:
  void add_guard(const Expr& b);
  std::vector<SymbolInfo> symbols_;
  std::vector<int64_t> hints_;
  std::vector<Expr> guards_;
};

// Checked at call time after the tensor guards bound each symbol to its size.
struct ShapeGuards {
  std::vector<Expr> guards;
  int num_symbols = 0;
  // False if a guard fails or cannot be evaluated (a division by zero).
  bool check(const int64_t* symbols) const;
  // The first failing guard with the symbols' values, or "".
  std::string first_failure(const int64_t* symbols) const;
};

}  // namespace kiln::sym
