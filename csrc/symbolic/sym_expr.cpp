// Symbolic integers: canonical polynomials over size symbols, with floor division, modulo, max,
// min, comparisons and boolean connectives (see sym_expr.h for the form and why).
#include "symbolic/sym_expr.h"

#include <algorithm>
#include <climits>
#include <map>
#include <stdexcept>

namespace kiln::sym {

struct Term {
  int64_t coef = 0;
  std::vector<Expr> factors;  // atoms, sorted by key, repeated for powers
  std::string key;            // factor keys joined by "*"
};

struct Node {
  enum Kind { kPoly, kSymbol, kFloorDiv, kMod, kMax, kMin, kBool, kCmp, kAnd, kOr, kNot } kind = kPoly;
  int64_t constant = 0;        // kPoly; kBool: 0/1
  std::vector<Term> terms;     // kPoly, sorted by key
  int symbol = -1;             // kSymbol
  std::vector<Expr> args;      // atoms and connectives; kCmp: args[0] is e in "e == 0", "e != 0" or "e >= 0"
  Cmp cmp = Cmp::kEq;          // kCmp: kEq, kNe or kGe
  std::string key;
};

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) { return a - py_floordiv(a, b) * b; }

namespace {

constexpr int64_t kInf = INT64_MAX, kNegInf = INT64_MIN;

// Coefficient and constant arithmetic of the canonical form, checked: sizes near the int64 limits
// (a slice's end of INT64_MAX compared with a symbol) would overflow, which is undefined
// behaviour and would give a wrong canonical form. The caller sees std::overflow_error (shape
// propagation fails: the region runs eagerly).
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw std::overflow_error("symbolic size arithmetic overflows int64");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw std::overflow_error("symbolic size arithmetic overflows int64");
  return r;
}

using TermMap = std::map<std::string, Term>;

std::string render_term(int64_t coef, const std::string& key, bool first) {
  std::string s;
  uint64_t mag = coef < 0 ? 0 - static_cast<uint64_t>(coef) : static_cast<uint64_t>(coef);
  if (first) s = coef < 0 ? "-" : "";
  else s = coef < 0 ? " - " : " + ";
  if (key.empty()) return s + std::to_string(mag);
  if (mag != 1) s += std::to_string(mag) + "*";
  return s + key;
}

Expr make_poly(int64_t c, const TermMap& terms) {
  auto n = std::make_shared<Node>();
  n->kind = Node::kPoly;
  n->constant = c;
  for (const auto& kv : terms)
    if (kv.second.coef != 0) n->terms.push_back(kv.second);
  bool first = true;
  for (const auto& t : n->terms) {
    n->key += render_term(t.coef, t.key, first);
    first = false;
  }
  if (first) n->key = std::to_string(c);
  else if (c != 0) n->key += render_term(c, "", false);
  return Expr(n);
}

TermMap terms_of(const Expr& e) {
  TermMap m;
  for (const auto& t : e.node().terms) m[t.key] = t;
  return m;
}

void add_term(TermMap& m, const Term& t, int64_t scale) {
  auto it = m.find(t.key);
  if (it == m.end()) {
    Term c = t;
    c.coef = checked_mul(c.coef, scale);
    m.emplace(t.key, std::move(c));
  } else {
    it->second.coef = checked_add(it->second.coef, checked_mul(t.coef, scale));
  }
}

Expr atom_poly(std::shared_ptr<Node> atom) {
  Term t;
  t.coef = 1;
  t.key = atom->key;
  t.factors.push_back(Expr(std::move(atom)));
  TermMap m;
  m[t.key] = t;
  return make_poly(0, m);
}

// The single atom of an expression that is exactly 1*atom, or null.
const Node* sole_atom(const Expr& e) {
  const Node& n = e.node();
  if (n.kind != Node::kPoly || n.constant != 0 || n.terms.size() != 1) return nullptr;
  const Term& t = n.terms[0];
  if (t.coef != 1 || t.factors.size() != 1) return nullptr;
  return &t.factors[0].node();
}

std::string paren(const Expr& e) {
  const Node& n = e.node();
  bool simple = n.kind == Node::kPoly && (n.terms.empty() || (n.constant == 0 && n.terms.size() == 1 && n.terms[0].coef == 1 && n.terms[0].factors.size() == 1));
  return simple ? e.str() : "(" + e.str() + ")";
}

Expr make_atom(Node::Kind kind, const Expr& a, const Expr& b) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->args = {a, b};
  switch (kind) {
    case Node::kFloorDiv: n->key = "(" + paren(a) + "//" + paren(b) + ")"; break;
    case Node::kMod: n->key = "(" + paren(a) + " % " + paren(b) + ")"; break;
    case Node::kMax: n->key = "max(" + a.str() + ", " + b.str() + ")"; break;
    default: n->key = "min(" + a.str() + ", " + b.str() + ")"; break;
  }
  return atom_poly(n);
}

Expr make_bool(bool b) {
  auto n = std::make_shared<Node>();
  n->kind = Node::kBool;
  n->constant = b ? 1 : 0;
  n->key = b ? "True" : "False";
  return Expr(n);
}

int64_t sat_add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return (a == kNegInf || b == kNegInf) ? 0 : kInf;
  if (a == kNegInf || b == kNegInf) return kNegInf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kInf : kNegInf;
  return r;
}

int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  bool neg = (a < 0) != (b < 0);
  if (a == kInf || a == kNegInf || b == kInf || b == kNegInf) return neg ? kNegInf : kInf;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return neg ? kNegInf : kInf;
  return r;
}

std::pair<int64_t, int64_t> atom_bounds(const Node& a) {
  switch (a.kind) {
    case Node::kSymbol: return {kMinSymbolValue, kMaxSymbolValue};
    case Node::kFloorDiv: {
      if (!a.args[1].is_constant() || a.args[1].constant_value() <= 0) break;
      int64_t c = a.args[1].constant_value();
      auto [lo, hi] = bounds(a.args[0]);
      return {lo == kNegInf ? kNegInf : py_floordiv(lo, c), hi == kInf ? kInf : py_floordiv(hi, c)};
    }
    case Node::kMod:
      if (a.args[1].is_constant() && a.args[1].constant_value() > 0) return {0, a.args[1].constant_value() - 1};
      break;
    case Node::kMax: case Node::kMin: {
      auto x = bounds(a.args[0]), y = bounds(a.args[1]);
      if (a.kind == Node::kMax) return {std::max(x.first, y.first), std::max(x.second, y.second)};
      return {std::min(x.first, y.first), std::min(x.second, y.second)};
    }
    default: break;
  }
  return {kNegInf, kInf};
}

Expr make_cmp(Cmp op, Expr e) {
  // Canonical sign for (in)equality: the first term's coefficient positive (not when negating would
  // overflow: the form is then merely not canonical).
  auto negatable = [](const Node& p) {
    if (p.constant == INT64_MIN) return false;
    for (const auto& t : p.terms) if (t.coef == INT64_MIN) return false;
    return true;
  };
  if ((op == Cmp::kEq || op == Cmp::kNe) && !e.node().terms.empty() && e.node().terms[0].coef < 0 &&
      negatable(e.node()))
    e = -e;
  if (e.is_constant()) {
    int64_t v = e.constant_value();
    return make_bool(op == Cmp::kEq ? v == 0 : op == Cmp::kNe ? v != 0 : v >= 0);
  }
  auto n = std::make_shared<Node>();
  n->kind = Node::kCmp;
  n->cmp = op;
  n->args = {e};
  // Render "lhs OP rhs" with positive terms on the left and negated negative terms on the right.
  TermMap lhs, rhs;
  for (const auto& t : e.node().terms) {
    if (t.coef > 0) lhs[t.key] = t;
    else { Term u = t; u.coef = checked_mul(t.coef, -1); rhs[u.key] = u; }
  }
  // The right side's constant is -c, which for c = INT64_MIN (`size - 1 == sys.maxsize`, asked by
  // slicing) fits only unsigned: rendered from its magnitude.
  int64_t c = e.node().constant;
  std::string l = make_poly(c > 0 ? c : 0, lhs).str(), r = make_poly(0, rhs).str();
  if (c < 0) {
    std::string mag = std::to_string(0 - static_cast<uint64_t>(c));
    r = rhs.empty() ? mag : r + " + " + mag;
  }
  n->key = l + (op == Cmp::kEq ? " == " : op == Cmp::kNe ? " != " : " >= ") + r;
  return Expr(n);
}

Expr make_connective(Node::Kind kind, std::vector<Expr> args) {
  auto n = std::make_shared<Node>();
  n->kind = kind;
  n->args = std::move(args);
  if (kind == Node::kNot) n->key = "not (" + n->args[0].str() + ")";
  else n->key = "(" + n->args[0].str() + (kind == Node::kAnd ? ") and (" : ") or (") + n->args[1].str() + ")";
  return Expr(n);
}

}  // namespace

// ---------------------------------------------------------------- Expr

Expr::Expr() : n_(make_poly(0, {}).n_) {}

Expr Expr::constant(int64_t v) { return make_poly(v, {}); }

Expr Expr::symbol(int id) {
  auto n = std::make_shared<Node>();
  n->kind = Node::kSymbol;
  n->symbol = id;
  n->key = "s";
  n->key += std::to_string(id);  // (not "s" + ...: GCC 12 warns falsely on that)
  return atom_poly(n);
}

Expr Expr::boolean(bool b) { return make_bool(b); }

bool Expr::is_bool() const {
  return n_->kind == Node::kBool || n_->kind == Node::kCmp || n_->kind == Node::kAnd || n_->kind == Node::kOr || n_->kind == Node::kNot;
}

bool Expr::is_constant() const { return n_->kind == Node::kBool || (n_->kind == Node::kPoly && n_->terms.empty()); }

int64_t Expr::constant_value() const { return n_->constant; }

bool Expr::is_symbol() const {
  const Node* a = sole_atom(*this);
  return a && a->kind == Node::kSymbol;
}

int Expr::symbol_id() const { return sole_atom(*this)->symbol; }

const std::string& Expr::str() const { return n_->key; }

bool Expr::same(const Expr& o) const { return n_ == o.n_ || n_->key == o.n_->key; }

int64_t Expr::eval(const int64_t* s) const {
  const Node& n = *n_;
  switch (n.kind) {
    case Node::kPoly: {
      int64_t v = n.constant;
      for (const auto& t : n.terms) {
        int64_t p = t.coef;
        for (const auto& f : t.factors) p = checked_mul(p, f.eval(s));
        v = checked_add(v, p);
      }
      return v;
    }
    case Node::kSymbol: return s[n.symbol];
    case Node::kFloorDiv: case Node::kMod: {
      int64_t a = n.args[0].eval(s), b = n.args[1].eval(s);
      if (b == 0) throw std::domain_error("integer division or modulo by zero");
      return n.kind == Node::kFloorDiv ? py_floordiv(a, b) : py_mod(a, b);
    }
    case Node::kMax: return std::max(n.args[0].eval(s), n.args[1].eval(s));
    case Node::kMin: return std::min(n.args[0].eval(s), n.args[1].eval(s));
    case Node::kBool: return n.constant;
    case Node::kCmp: {
      int64_t v = n.args[0].eval(s);
      return n.cmp == Cmp::kEq ? v == 0 : n.cmp == Cmp::kNe ? v != 0 : v >= 0;
    }
    case Node::kAnd: return n.args[0].eval(s) && n.args[1].eval(s);
    case Node::kOr: return n.args[0].eval(s) || n.args[1].eval(s);
    case Node::kNot: return !n.args[0].eval(s);
  }
  return 0;
}

void Expr::collect_symbols(std::vector<int>& out) const {
  if (n_->kind == Node::kSymbol) out.push_back(n_->symbol);
  for (const auto& t : n_->terms)
    for (const auto& f : t.factors) f.collect_symbols(out);
  for (const auto& a : n_->args) a.collect_symbols(out);
}

// ---------------------------------------------------------------- arithmetic

Expr operator+(const Expr& a, const Expr& b) {
  TermMap m = terms_of(a);
  for (const auto& t : b.node().terms) add_term(m, t, 1);
  return make_poly(checked_add(a.node().constant, b.node().constant), m);
}

Expr operator-(const Expr& a) {
  TermMap m;
  for (const auto& t : a.node().terms) add_term(m, t, -1);
  return make_poly(checked_mul(a.node().constant, -1), m);
}

Expr operator-(const Expr& a, const Expr& b) { return a + (-b); }

Expr operator*(const Expr& a, const Expr& b) {
  const Node &x = a.node(), &y = b.node();
  TermMap m;
  for (const auto& t : x.terms) add_term(m, t, y.constant);
  for (const auto& t : y.terms) add_term(m, t, x.constant);
  for (const auto& t : x.terms)
    for (const auto& u : y.terms) {
      Term p;
      p.coef = checked_mul(t.coef, u.coef);
      p.factors = t.factors;
      p.factors.insert(p.factors.end(), u.factors.begin(), u.factors.end());
      std::sort(p.factors.begin(), p.factors.end(), [](const Expr& l, const Expr& r) { return l.str() < r.str(); });
      for (const auto& f : p.factors) p.key += (p.key.empty() ? "" : "*") + f.str();
      add_term(m, p, 1);
    }
  return make_poly(checked_mul(x.constant, y.constant), m);
}

// Splits a into c*quotient + rest, where quotient takes every term whose coefficient c divides
// and the constant's floor part; rest keeps a constant in [0, c) (c > 0).
static void split_by(const Expr& a, int64_t c, Expr* quotient, Expr* rest) {
  TermMap q, r;
  for (const auto& t : a.node().terms) {
    if (t.coef % c == 0) { Term u = t; u.coef = t.coef / c; q[u.key] = u; }
    else r[t.key] = t;
  }
  int64_t k = a.node().constant;
  *quotient = make_poly(py_floordiv(k, c), q);
  *rest = make_poly(py_mod(k, c), r);
}

// a == k*b + r with a constant k and a constant r in [0, b) (b > 0 for every value of the
// symbols): a//b is k and a%b is r. Also k = 0 when 0 <= a < b.
static bool divides_as(const Expr& a, const Expr& b, int64_t* k, int64_t* r) {
  auto lb = bounds(b).first;
  if (lb <= 0) return false;
  auto ab = bounds(a);
  if (ab.first >= 0 && ab.second < lb) { *k = 0; *r = 0; return true; }
  if (b.node().terms.empty()) return false;
  const Term& lead = b.node().terms[0];
  for (const auto& t : a.node().terms) {
    if (t.key != lead.key) continue;
    if (t.coef % lead.coef != 0) return false;
    *k = t.coef / lead.coef;
    Expr rest = a - Expr::constant(*k) * b;
    if (!rest.is_constant() || rest.constant_value() < 0 || rest.constant_value() >= lb) return false;
    *r = rest.constant_value();
    return true;
  }
  return false;
}

// b as coef * (product of atoms) with coef > 0 and b > 0 for every value of the symbols: a single
// term, no constant. Division by it takes out whole terms (monomial_split).
static const Term* positive_monomial(const Expr& b) {
  const Node& n = b.node();
  if (n.kind != Node::kPoly || n.constant != 0 || n.terms.size() != 1 || n.terms[0].coef <= 0) return nullptr;
  return bounds(b).first > 0 ? &n.terms[0] : nullptr;
}

// Splits a into m*quotient + rest for a monomial m: the quotient takes every term whose factors
// include m's (as a multiset) and whose coefficient m's divides; rest keeps the others and the
// constant. Floor division and modulo by m then only see rest.
static void monomial_split(const Expr& a, const Term& m, Expr* quotient, Expr* rest) {
  TermMap q, r;
  int64_t qconst = 0;
  for (const auto& t : a.node().terms) {
    std::vector<Expr> left = t.factors;
    bool divides = t.coef % m.coef == 0;
    for (size_t i = 0; divides && i < m.factors.size(); ++i) {
      auto it = std::find_if(left.begin(), left.end(), [&](const Expr& f) { return f.same(m.factors[i]); });
      if (it == left.end()) divides = false;
      else left.erase(it);
    }
    if (!divides) { r[t.key] = t; continue; }
    if (left.empty()) { qconst = checked_add(qconst, t.coef / m.coef); continue; }
    Term u;
    u.coef = t.coef / m.coef;
    u.factors = std::move(left);
    for (const auto& f : u.factors) u.key += (u.key.empty() ? "" : "*") + f.str();
    add_term(q, u, 1);
  }
  *quotient = make_poly(qconst, q);
  *rest = make_poly(a.node().constant, r);
}

// 0 <= r < b for every value of the symbols.
static bool known_remainder(const Expr& r, const Expr& b) {
  try {
    auto ge0 = known(compare(Cmp::kGe, r, Expr::constant(0)));
    if (!ge0 || !*ge0) return false;
    auto lt = known(compare(Cmp::kLt, r, b));
    return lt && *lt;
  } catch (const std::overflow_error&) {  // r - b past int64: not decided, the division stays opaque
    return false;
  }
}

Expr floordiv(const Expr& a, const Expr& b) {
  if (b.is_constant()) {
    int64_t c = b.constant_value();
    if (c == 0) throw std::domain_error("integer division or modulo by zero");
    if (a.is_constant()) return Expr::constant(py_floordiv(a.constant_value(), c));
    if (c == 1) return a;
    if (c > 0) {
      Expr q, r;
      split_by(a, c, &q, &r);
      if (r.is_constant()) return q;  // 0 <= r < c
      auto rb = bounds(r);
      if (rb.first >= 0 && rb.second < c) return q;
      return q + make_atom(Node::kFloorDiv, r, b);
    }
  }
  if (const Term* m = positive_monomial(b)) {
    Expr q, r;
    monomial_split(a, *m, &q, &r);
    if (known_remainder(r, b)) return q;
    if (q.same(Expr())) return make_atom(Node::kFloorDiv, a, b);
    return q + make_atom(Node::kFloorDiv, r, b);
  }
  int64_t k, r;
  if (divides_as(a, b, &k, &r)) return Expr::constant(k);
  return make_atom(Node::kFloorDiv, a, b);
}

Expr mod(const Expr& a, const Expr& b) {
  if (b.is_constant()) {
    int64_t c = b.constant_value();
    if (c == 0) throw std::domain_error("integer division or modulo by zero");
    if (a.is_constant()) return Expr::constant(py_mod(a.constant_value(), c));
    if (c == 1 || c == -1) return Expr::constant(0);
    if (c > 0) {
      Expr q, r;
      split_by(a, c, &q, &r);
      if (r.is_constant()) return r;
      auto rb = bounds(r);
      if (rb.first >= 0 && rb.second < c) return r;
      return make_atom(Node::kMod, r, b);
    }
  }
  if (const Term* m = positive_monomial(b)) {
    Expr q, r;
    monomial_split(a, *m, &q, &r);
    if (known_remainder(r, b)) return r;
    return make_atom(Node::kMod, r, b);
  }
  int64_t k, r;
  if (divides_as(a, b, &k, &r)) return k == 0 ? a : Expr::constant(r);
  return make_atom(Node::kMod, a, b);
}

Expr max(const Expr& a, const Expr& b) {
  if (auto k = known(compare(Cmp::kGe, a, b))) return *k ? a : b;
  return a.str() < b.str() ? make_atom(Node::kMax, a, b) : make_atom(Node::kMax, b, a);
}

Expr min(const Expr& a, const Expr& b) {
  if (auto k = known(compare(Cmp::kLe, a, b))) return *k ? a : b;
  return a.str() < b.str() ? make_atom(Node::kMin, a, b) : make_atom(Node::kMin, b, a);
}

// ---------------------------------------------------------------- booleans

// The comparison's truth when the operands' bounds alone decide it. Every value is an int64, so an
// unbounded side's sentinel (INT64_MIN / INT64_MAX) is still a true bound.
static std::optional<bool> decided_by_bounds(Cmp op, const Expr& a, const Expr& b) {
  auto [alo, ahi] = bounds(a);
  auto [blo, bhi] = bounds(b);
  switch (op) {
    case Cmp::kLe: if (ahi <= blo) return true; if (alo > bhi) return false; break;
    case Cmp::kLt: if (ahi < blo) return true; if (alo >= bhi) return false; break;
    case Cmp::kGe: if (alo >= bhi) return true; if (ahi < blo) return false; break;
    case Cmp::kGt: if (alo > bhi) return true; if (ahi <= blo) return false; break;
    case Cmp::kEq: case Cmp::kNe:
      if (ahi < blo || alo > bhi) return op == Cmp::kNe;
      break;
  }
  return std::nullopt;
}

Expr compare(Cmp op, const Expr& a, const Expr& b) {
  if (a.is_bool() || b.is_bool()) {
    if (op != Cmp::kEq && op != Cmp::kNe) throw std::invalid_argument("ordering comparison of booleans");
    Expr eq = logical_or(logical_and(a, b), logical_and(logical_not(a), logical_not(b)));
    return op == Cmp::kEq ? eq : logical_not(eq);
  }
  // First from the bounds: a slice's end of INT64_MAX against a size `s0//5 - 1` is decided there,
  // where forming the difference (constant INT64_MIN, then negated) would overflow.
  if (auto known_answer = decided_by_bounds(op, a, b)) return make_bool(*known_answer);
  Expr d = a - b;
  switch (op) {
    case Cmp::kEq: case Cmp::kNe: case Cmp::kGe: return make_cmp(op, d);
    case Cmp::kGt: return make_cmp(Cmp::kGe, d - Expr::constant(1));   // d > 0  <=>  d - 1 >= 0
    case Cmp::kLe: return make_cmp(Cmp::kGe, -d);                       // d <= 0 <=>  -d >= 0
    case Cmp::kLt: return make_cmp(Cmp::kGe, -d - Expr::constant(1));  // d < 0  <=>  -d - 1 >= 0
  }
  return make_bool(false);
}

Expr logical_and(const Expr& a, const Expr& b) {
  if (a.is_constant()) return a.constant_value() ? b : make_bool(false);
  if (b.is_constant()) return b.constant_value() ? a : make_bool(false);
  return make_connective(Node::kAnd, {a, b});
}

Expr logical_or(const Expr& a, const Expr& b) {
  if (a.is_constant()) return a.constant_value() ? make_bool(true) : b;
  if (b.is_constant()) return b.constant_value() ? make_bool(true) : a;
  return make_connective(Node::kOr, {a, b});
}

Expr logical_not(const Expr& a) {
  if (a.is_constant()) return make_bool(!a.constant_value());
  const Node& n = a.node();
  if (n.kind == Node::kNot) return n.args[0];
  if (n.kind == Node::kCmp && n.cmp != Cmp::kGe) return make_cmp(n.cmp == Cmp::kEq ? Cmp::kNe : Cmp::kEq, n.args[0]);
  if (n.kind == Node::kCmp) return make_cmp(Cmp::kGe, -n.args[0] - Expr::constant(1));  // !(e >= 0) <=> -e - 1 >= 0
  return make_connective(Node::kNot, {a});
}

// Term-wise bounds cannot see that s0*s0 - s0 - 1 >= 1 for s0 >= 2. For a small polynomial in
// plain symbols, substitute s = 2 + t (t >= 0) and expand: if every non-constant coefficient is
// >= 0, the constant is a lower bound; if every one is <= 0, an upper bound.
static void shifted_bounds(const Node& n, int64_t& lo, int64_t& hi) {
  constexpr int kShift = 1 << 20;  // the t symbols' ids, clear of real symbols
  if (n.terms.size() > 8) return;
  Expr shifted = Expr::constant(n.constant);
  for (const auto& t : n.terms) {
    if (t.factors.size() > 4) return;
    Expr term = Expr::constant(t.coef);
    for (const auto& f : t.factors) {
      if (f.node().kind != Node::kSymbol || f.node().symbol >= kShift) return;
      term = term * (Expr::constant(2) + Expr::symbol(f.node().symbol + kShift));
    }
    shifted = shifted + term;
  }
  bool all_pos = true, all_neg = true;
  for (const auto& t : shifted.node().terms) {
    all_pos &= t.coef >= 0;
    all_neg &= t.coef <= 0;
  }
  if (all_pos) lo = std::max(lo, shifted.node().constant);
  if (all_neg) hi = std::min(hi, shifted.node().constant);
}

std::pair<int64_t, int64_t> bounds(const Expr& e) {
  const Node& n = e.node();
  if (n.kind != Node::kPoly) return {kNegInf, kInf};
  int64_t lo = n.constant, hi = n.constant;
  for (const auto& t : n.terms) {
    int64_t mlo = 1, mhi = 1;
    for (const auto& f : t.factors) {
      auto [flo, fhi] = atom_bounds(f.node());
      if (flo < 0) { mlo = kNegInf; mhi = kInf; break; }
      mlo = sat_mul(mlo, flo);
      mhi = sat_mul(mhi, fhi);
    }
    int64_t a = sat_mul(t.coef, mlo), b = sat_mul(t.coef, mhi);
    if (mlo == kNegInf) { a = kNegInf; b = kInf; }
    lo = sat_add(lo, std::min(a, b));
    hi = sat_add(hi, std::max(a, b));
  }
  if (lo == kNegInf || hi == kInf) shifted_bounds(n, lo, hi);
  return {lo, hi};
}

std::optional<bool> known(const Expr& b) {
  const Node& n = b.node();
  switch (n.kind) {
    case Node::kBool: return n.constant != 0;
    case Node::kCmp: {
      auto [lo, hi] = bounds(n.args[0]);
      if (n.cmp == Cmp::kGe) {
        if (lo >= 0) return true;
        if (hi < 0) return false;
      } else if (lo > 0 || hi < 0) {
        return n.cmp == Cmp::kNe;
      }
      return std::nullopt;
    }
    case Node::kAnd: {
      auto x = known(n.args[0]), y = known(n.args[1]);
      if ((x && !*x) || (y && !*y)) return false;
      if (x && y) return true;
      return std::nullopt;
    }
    case Node::kOr: {
      auto x = known(n.args[0]), y = known(n.args[1]);
      if ((x && *x) || (y && *y)) return true;
      if (x && y) return false;
      return std::nullopt;
    }
    case Node::kNot: {
      auto x = known(n.args[0]);
      if (x) return !*x;
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

}  // namespace kiln::sym
