// Affine index algebra with FloorDiv/Mod; see index_expr.h.
#include "ir/index_expr.h"

#include <algorithm>
#include <stdexcept>

#include "support/str_builder.h"

namespace kiln::ir {
using support::StrBuilder;

static bool atom_equal(const Atom& a, const Atom& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Atom::kVar) return a.var == b.var;
  return a.divisor == b.divisor && a.arg == b.arg;
}

bool Index::operator==(const Index& o) const {
  if (constant != o.constant || terms.size() != o.terms.size()) return false;
  for (size_t i = 0; i < terms.size(); ++i)
    if (terms[i].first != o.terms[i].first || !atom_equal(*terms[i].second, *o.terms[i].second)) return false;
  return true;
}

Index Index::var(int id) {
  auto a = std::make_shared<Atom>();
  a->kind = Atom::kVar;
  a->var = id;
  Index e;
  e.terms.push_back({1, a});
  return e;
}

int Index::as_var() const {
  if (constant != 0 || terms.size() != 1 || terms[0].first != 1 || terms[0].second->kind != Atom::kVar) return -1;
  return terms[0].second->var;
}

int64_t Index::coefficient_of(int id) const {
  for (const auto& [c, a] : terms)
    if (a->kind == Atom::kVar && a->var == id) return c;
  return 0;
}

bool Index::uses_var(int id) const {
  for (const auto& [c, a] : terms) {
    if (a->kind == Atom::kVar ? a->var == id : a->arg.uses_var(id)) return true;
  }
  return false;
}

static std::string atom_string(const Atom& a, const IntSpelling* sp) {
  if (a.kind == Atom::kVar) return "x" + std::to_string(a.var);
  StrBuilder b;
  b << "((" << a.arg.to_string(sp) << ")" << (a.kind == Atom::kFloorDiv ? " / " : " % ");
  auto it = sp ? sp->find(&a.divisor) : IntSpelling::const_iterator();
  if (sp && it != sp->end()) b << it->second;
  else b << a.divisor;
  b << ")";
  return b.str();
}

std::string Index::to_string() const { return to_string(nullptr); }

std::string Index::to_string(const IntSpelling* sp) const {
  // A symbolic integer prints as "+ (expression)"; literals print exactly as without spelling.
  auto symbolic = [sp](const int64_t& v) -> const std::string* {
    if (!sp) return nullptr;
    auto it = sp->find(&v);
    return it == sp->end() ? nullptr : &it->second;
  };
  StrBuilder b;
  bool first = true;
  for (const auto& [c, a] : terms) {
    if (const std::string* cs = symbolic(c)) {
      b << (first ? "" : " + ") << *cs << "*" << atom_string(*a, sp);
      first = false;
      continue;
    }
    if (!first) b << (c < 0 ? " - " : " + ");
    else if (c < 0) b << "-";
    int64_t m = c < 0 ? -c : c;
    if (m != 1) b << m << "*";
    b << atom_string(*a, sp);
    first = false;
  }
  if (const std::string* cs = symbolic(constant)) b << (first ? "" : " + ") << *cs;
  else if (first) b << constant;
  else if (constant) b << (constant < 0 ? " - " : " + ") << (constant < 0 ? -constant : constant);
  return b.str();
}

// Terms are kept in a canonical order: plain variables by id first, then other atoms.
static int atom_rank(const Atom& a) { return a.kind == Atom::kVar ? a.var : 1 << 20; }

Index add(const Index& a, const Index& b) {
  Index r;
  r.constant = a.constant + b.constant;
  r.terms = a.terms;
  for (const auto& t : b.terms) {
    bool merged = false;
    for (auto& u : r.terms)
      if (atom_equal(*u.second, *t.second)) { u.first += t.first; merged = true; break; }
    if (!merged) r.terms.push_back(t);
  }
  r.terms.erase(std::remove_if(r.terms.begin(), r.terms.end(), [](const auto& t) { return t.first == 0; }), r.terms.end());
  // c*k*(e // k) + c*(e % k) == c*e
  for (size_t i = 0; i < r.terms.size(); ++i) {
    const Atom& m = *r.terms[i].second;
    if (m.kind != Atom::kMod) continue;
    for (size_t j = 0; j < r.terms.size(); ++j) {
      const Atom& f = *r.terms[j].second;
      if (f.kind != Atom::kFloorDiv || f.divisor != m.divisor || !(f.arg == m.arg) || r.terms[j].first != r.terms[i].first * m.divisor) continue;
      Index rest;
      rest.constant = r.constant;
      for (size_t t = 0; t < r.terms.size(); ++t)
        if (t != i && t != j) rest.terms.push_back(r.terms[t]);
      return add(rest, mul(m.arg, r.terms[i].first));
    }
  }
  std::stable_sort(r.terms.begin(), r.terms.end(), [](const auto& x, const auto& y) { return atom_rank(*x.second) < atom_rank(*y.second); });
  return r;
}

Index mul(const Index& a, int64_t c) {
  if (c == 0) return Index::of(0);
  Index r = a;
  r.constant *= c;
  for (auto& t : r.terms) t.first *= c;
  return r;
}

static std::pair<int64_t, int64_t> atom_bounds(const Atom& a, const VarRanges& ranges) {
  if (a.kind == Atom::kVar) {
    int64_t n = a.var < static_cast<int>(ranges.size()) ? ranges[a.var] : 1;
    return {0, std::max<int64_t>(n - 1, 0)};
  }
  auto [lo, hi] = bounds(a.arg, ranges);
  auto fdiv = [](int64_t x, int64_t d) { return x >= 0 ? x / d : -((-x + d - 1) / d); };
  if (a.kind == Atom::kFloorDiv) return {fdiv(lo, a.divisor), fdiv(hi, a.divisor)};
  if (lo >= 0 && hi < a.divisor) return {lo, hi};
  return {0, a.divisor - 1};
}

std::pair<int64_t, int64_t> bounds(const Index& e, const VarRanges& ranges) {
  int64_t lo = e.constant, hi = e.constant;
  for (const auto& [c, a] : e.terms) {
    auto [alo, ahi] = atom_bounds(*a, ranges);
    if (c >= 0) { lo += c * alo; hi += c * ahi; }
    else { lo += c * ahi; hi += c * alo; }
  }
  return {lo, hi};
}

// Splits e into (part whose coefficients and constant are multiples of c, the rest).
static std::pair<Index, Index> split_multiples(const Index& e, int64_t c) {
  Index q, r;
  q.constant = (e.constant / c) * c;
  r.constant = e.constant - q.constant;
  for (const auto& t : e.terms) (t.first % c == 0 ? q : r).terms.push_back(t);
  return {q, r};
}

// e as g*high + low with 0 <= low < g over the ranges, for the largest g among e's coefficients
// that divides c (g > 1): then e // c == high // (c/g) and e % c == g*(high % (c/g)) + low, since
// low never carries past a multiple of g. A head split of a flattened row, (4096*x0 + 64*x1 + x2)
// // 16384 with 64*x1 + x2 < 4096, is x0 // 4: no division per element.
struct LowSplit {
  int64_t g = 0;
  Index high, low;
};
static bool split_low(const Index& e, int64_t c, const VarRanges& ranges, LowSplit* out) {
  for (const auto& t : e.terms) {
    const int64_t g = t.first < 0 ? -t.first : t.first;
    if (g <= 1 || g >= c || c % g != 0 || g <= out->g) continue;
    LowSplit s;
    s.g = g;
    s.high.constant = e.constant >= 0 ? e.constant / g : -((-e.constant + g - 1) / g);
    s.low.constant = e.constant - s.high.constant * g;
    for (const auto& u : e.terms) {
      if (u.first % g == 0) s.high.terms.push_back({u.first / g, u.second});
      else s.low.terms.push_back(u);
    }
    auto [lo, hi] = bounds(s.low, ranges);
    if (lo >= 0 && hi < g) *out = std::move(s);
  }
  return out->g > 0;
}

static Index make_atom(Atom::Kind kind, const Index& arg, int64_t c) {
  auto a = std::make_shared<Atom>();
  a->kind = kind;
  a->arg = arg;
  a->divisor = c;
  Index e;
  e.terms.push_back({1, a});
  return e;
}

Index floordiv(const Index& e, int64_t c, const VarRanges& ranges) {
  if (c <= 0) throw std::invalid_argument("index floordiv by a non-positive size");
  if (c == 1) return e;
  auto [q, r] = split_multiples(e, c);
  auto [lo, hi] = bounds(r, ranges);
  Index qd;  // q / c exactly
  qd.constant = q.constant / c;
  for (const auto& t : q.terms) qd.terms.push_back({t.first / c, t.second});
  if (lo >= 0 && hi < c) return qd;                 // the remainder never carries
  if (e.is_constant()) {
    int64_t v = e.constant;
    return Index::of(v >= 0 ? v / c : -((-v + c - 1) / c));
  }
  if (LowSplit s; split_low(e, c, ranges, &s)) return floordiv(s.high, c / s.g, ranges);
  if (lo >= 0 && r.terms.size() == e.terms.size()) return make_atom(Atom::kFloorDiv, e, c);
  if (lo >= 0) return add(qd, make_atom(Atom::kFloorDiv, r, c));
  return make_atom(Atom::kFloorDiv, e, c);
}

Index mod(const Index& e, int64_t c, const VarRanges& ranges) {
  if (c <= 0) throw std::invalid_argument("index mod by a non-positive size");
  if (c == 1) return Index::of(0);
  auto [q, r] = split_multiples(e, c);
  auto [lo, hi] = bounds(r, ranges);
  if (lo >= 0 && hi < c) return r;
  if (e.is_constant()) return Index::of(((e.constant % c) + c) % c);
  if (LowSplit s; split_low(e, c, ranges, &s)) return add(mul(mod(s.high, c / s.g, ranges), s.g), s.low);
  if (lo >= 0) return make_atom(Atom::kMod, r, c);
  return make_atom(Atom::kMod, e, c);
}

Index substitute(const Index& e, const std::vector<Index>& rep, const VarRanges& ranges) {
  Index r = Index::of(e.constant);
  for (const auto& [c, a] : e.terms) {
    Index t;
    if (a->kind == Atom::kVar) {
      t = a->var < static_cast<int>(rep.size()) ? rep[a->var] : Index::var(a->var);
    } else {
      Index arg = substitute(a->arg, rep, ranges);
      t = a->kind == Atom::kFloorDiv ? floordiv(arg, a->divisor, ranges) : mod(arg, a->divisor, ranges);
    }
    r = add(r, mul(t, c));
  }
  return r;
}

}  // namespace kiln::ir
