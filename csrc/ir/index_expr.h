// Index expressions of the loop IR: integer affine sums over loop variables whose atoms may be
// floor divisions and modulos of other sums, with simplification that knows each variable's
// range. Reshapes produce `(8*x0 + x1) // 8`; the simplifier turns that back into `x0`, so
// generated loops index buffers with plain strides whenever the layout allows it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::ir {

struct Atom;
// How generated code spells integers of the IR that depend on runtime sizes (ir/size_template.h):
// C++ over the size symbols, keyed by the address of the integer field. Fields not listed print
// as literals.
using IntSpelling = std::unordered_map<const void*, std::string>;
using AtomPtr = std::shared_ptr<const Atom>;

struct Index {
  int64_t constant = 0;
  std::vector<std::pair<int64_t, AtomPtr>> terms;  // coefficient * atom, no zero coefficients

  static Index var(int id);
  static Index of(int64_t c) { Index e; e.constant = c; return e; }
  bool is_constant() const { return terms.empty(); }
  // The variable id if this is exactly 1*var, else -1.
  int as_var() const;
  // Coefficient of variable `id` among plain-variable terms (0 if absent).
  int64_t coefficient_of(int id) const;
  bool uses_var(int id) const;
  std::string to_string() const;  // C++ syntax, variables named x<id>
  std::string to_string(const IntSpelling* spelling) const;  // with symbolic integers spelled out
  bool operator==(const Index& o) const;
};

struct Atom {
  enum Kind { kVar, kFloorDiv, kMod } kind = kVar;
  int var = -1;           // kVar
  Index arg;              // kFloorDiv, kMod
  int64_t divisor = 1;    // kFloorDiv, kMod (> 0)
};

// Variable ranges: vars[id] = number of values (the variable runs over [0, n)).
using VarRanges = std::vector<int64_t>;

Index add(const Index& a, const Index& b);
Index mul(const Index& a, int64_t c);
Index floordiv(const Index& a, int64_t c, const VarRanges& ranges);
Index mod(const Index& a, int64_t c, const VarRanges& ranges);
// Substitutes variables: var id -> replacement[id] (ids beyond the vector stay).
Index substitute(const Index& e, const std::vector<Index>& replacement, const VarRanges& ranges);
// Smallest and largest value over the variables' ranges.
std::pair<int64_t, int64_t> bounds(const Index& e, const VarRanges& ranges);

}  // namespace kiln::ir
