// Symbolic integers: the one expression type for sizes that are not known until a call, shared
// by the frontend (shape guards), the torch bridge (symbolic meta tensors) and, later, lowering
// and codegen. No Python, no PyTorch.
//
// An integer expression is kept as a canonical polynomial: a constant plus coefficient * product
// of atoms, where an atom is a size symbol (s0, s1...) or an opaque floor division, modulo, max or
// min of other expressions. Canonical form makes `64*s0 == s0*64` structural, folds
// `(4*s0 + 2)//2` to `2*s0 + 1`, and lets comparisons that follow from symbols being sizes
// (every symbol is in [2, 2^62]: sizes 0 and 1 are specialised, and a bound far below INT64_MAX lets
// comparisons with slicing's INT64_MAX ends be decided) be decided without a guard.
// Boolean expressions (comparisons, and, or, not) are used for guards.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::sym {

struct Node;

// The values a size symbol may stand for; a call whose size or int lies outside fails the guard
// binding it (and runs a specialised entry instead).
constexpr int64_t kMinSymbolValue = 2;
constexpr int64_t kMaxSymbolValue = int64_t{1} << 62;
inline bool in_symbol_range(int64_t v) { return v >= kMinSymbolValue && v <= kMaxSymbolValue; }

class Expr {
 public:
  Expr();  // the constant 0
  static Expr constant(int64_t v);
  static Expr symbol(int id);
  static Expr boolean(bool b);

  bool is_bool() const;
  bool is_constant() const;           // an integer or boolean constant
  int64_t constant_value() const;     // only when is_constant() (booleans as 0/1)
  bool is_symbol() const;             // exactly one symbol
  int symbol_id() const;              // only when is_symbol()
  // Python-syntax rendering, e.g. "64*s0 + 1", "(s0 + 1)//2", "s0 >= 2"; also the canonical key.
  const std::string& str() const;
  // Value with symbol i set to symbols[i]. Floor division and modulo follow Python; a division
  // or modulo by zero throws std::domain_error.
  int64_t eval(const int64_t* symbols) const;
  void collect_symbols(std::vector<int>& out) const;  // appends ids (may repeat)
  bool same(const Expr& o) const;    // structural equality of canonical forms
  const Node& node() const { return *n_; }

  explicit Expr(std::shared_ptr<const Node> n) : n_(std::move(n)) {}

 private:
  std::shared_ptr<const Node> n_;
};

Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
Expr floordiv(const Expr& a, const Expr& b);  // throws std::domain_error on a constant 0 divisor
Expr mod(const Expr& a, const Expr& b);
Expr max(const Expr& a, const Expr& b);
Expr min(const Expr& a, const Expr& b);

enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };
Expr compare(Cmp op, const Expr& a, const Expr& b);
Expr logical_and(const Expr& a, const Expr& b);
Expr logical_or(const Expr& a, const Expr& b);
Expr logical_not(const Expr& a);

// The truth of a boolean expression when it follows from its form and every symbol being in
// [kMinSymbolValue, kMaxSymbolValue], with no symbol's value needed; nullopt when it depends on the values.
std::optional<bool> known(const Expr& b);
// Inclusive bounds of an integer expression over symbols in that range (INT64_MIN / INT64_MAX: unbounded).
std::pair<int64_t, int64_t> bounds(const Expr& e);

// Python floor division and modulo on int64 (divisor != 0).
int64_t py_floordiv(int64_t a, int64_t b);
int64_t py_mod(int64_t a, int64_t b);

}  // namespace kiln::sym
