// Program integers, polynomial fits and templates; see size_template.h.
#include "ir/size_template.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace kiln::ir {

namespace {

// Walks every field of a program's buffers and kernels: integers that may depend on sizes go to `fields` (a '#' marks
// their place in the shape), everything else is appended to the shape.
class Walker {
 public:
  explicit Walker(ProgramInts& out) : out_(out) {}

  void program(const Program& p) {
    tag("B", p.buffers.size());
    for (const Buffer& b : p.buffers) {
      tag("b", b.kind);
      tag(",", b.index);
      tag(",", static_cast<int>(b.dtype));
      out_.shape += b.name;
      ints(b.sizes);
      ints(b.strides);
      num(b.offset);
    }
    tag("K", p.kernels.size());
    for (const Kernel& k : p.kernels) {
      out_.shape += "k" + k.name;
      ints(k.outer_sizes);
      tag("l", k.num_locals);
      tag("S", k.stages.size());
      for (const Stage& s : k.stages) stage(s);
    }
    // Steps, outputs, frees and memory reuse are left out: a program served by shared kernels
    // runs its own (runtime/compiled_graph.h), so only what the kernels compute must agree.
  }

 private:
  void tag(const char* t, int64_t v) {
    out_.shape += t;
    out_.shape += std::to_string(v);
  }
  void num(const int64_t& v) {
    out_.shape += '#';
    out_.fields.push_back({&v, false});
  }
  void ints(const std::vector<int64_t>& v) {
    tag("[", v.size());
    for (const int64_t& x : v) num(x);
  }
  void ids(const std::vector<int>& v) {
    tag("(", v.size());
    for (int x : v) tag(",", x);
  }
  void index(const Index& e) {
    tag("i", e.terms.size());
    num(e.constant);
    for (const auto& [c, a] : e.terms) {
      num(c);
      tag("a", a->kind);
      if (a->kind == Atom::kVar) {
        tag("v", a->var);
      } else {
        index(a->arg);
        num(a->divisor);
      }
    }
  }
  void expr(const ExprPtr& e) {
    tag("e", e->kind);
    tag(",", static_cast<int>(e->dtype));
    switch (e->kind) {
      case Expr::kUnary: tag("u", static_cast<int>(e->unary_op)); break;
      case Expr::kBinary: tag("o", static_cast<int>(e->binary_op)); break;
      case Expr::kLoad: tag("ld", e->buffer); index(e->index); break;
      case Expr::kIndexValue: index(e->index); break;
      case Expr::kLocal: tag("r", e->local), tag(".", e->local_part); break;
      case Expr::kConst: {
        // An integral constant may be a count of elements (a mean over a dynamic dim).
        if (e->value == static_cast<double>(static_cast<int64_t>(e->value)) && e->value < 9.0e15 && e->value > -9.0e15) {
          out_.shape += "c#";
          out_.fields.push_back({&e->value, true});
          break;
        }
        char buf[40];
        std::snprintf(buf, sizeof buf, "c%a", e->value);  // exact
        out_.shape += buf;
        break;
      }
      default: break;
    }
    tag("(", e->args.size());
    for (const auto& a : e->args) expr(a);
    tag("x", e->indirect.size());
    for (const auto& ind : e->indirect) {
      expr(ind.value);
      num(ind.stride);
      num(ind.bound);
    }
  }
  void stage(const Stage& s) {
    tag("s", s.kind);
    ints(s.inner_sizes);
    expr(s.value);
    tag("w", s.out_buffer);
    index(s.out_index);
    tag("R", static_cast<int>(s.reduce));
    tag("L", s.local);
    tag("A", static_cast<int>(s.acc_dtype));
    ids(s.store_buffers);
    tag("I", s.store_index.size());
    for (const Index& i : s.store_index) index(i);
    ints(s.reduction_numel_divisor);
  }

  ProgramInts& out_;
};

// Exponents of each symbol (0..2 each), all but the constant monomial, by total degree.
std::vector<std::vector<int>> monomials(int k) {
  std::vector<std::vector<int>> out;
  std::vector<int> e(k, 0);
  for (;;) {
    int d = 0;
    while (d < k && e[d] == 2) e[d++] = 0;
    if (d == k) break;
    ++e[d];
    out.push_back(e);
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    int da = 0, db = 0;
    for (int x : a) da += x;
    for (int x : b) db += x;
    return da < db;
  });
  return out;
}

bool mono_value(const std::vector<int>& m, const std::vector<int64_t>& s, int64_t* v) {
  int64_t r = 1;
  for (size_t i = 0; i < m.size(); ++i)
    for (int p = 0; p < m[i]; ++p)
      if (__builtin_mul_overflow(r, s[i], &r)) return false;
  *v = r;
  return true;
}

sym::Expr mono_expr(const std::vector<int>& m) {
  sym::Expr r = sym::Expr::constant(1);
  for (size_t i = 0; i < m.size(); ++i)
    for (int p = 0; p < m[i]; ++p) r = r * sym::Expr::symbol(static_cast<int>(i));
  return r;
}

}  // namespace

std::vector<int64_t> ProgramInts::values() const {
  std::vector<int64_t> v;
  v.reserve(fields.size());
  for (const IntField& f : fields) v.push_back(f.value());
  return v;
}

ProgramInts program_ints(const Program& p) {
  ProgramInts r;
  Walker(r).program(p);
  return r;
}

sym::Expr PolyFit::expr() const {
  if (c == 0) return sym::Expr::constant(d);
  return sym::Expr::constant(c) * mono_expr(exps) + sym::Expr::constant(d);
}

std::optional<sym::Expr> fit_polynomial(const std::vector<std::vector<int64_t>>& symbols, const std::vector<int64_t>& values) {
  auto f = fit_poly(symbols, values);
  if (!f) return std::nullopt;
  return f->expr();
}

std::optional<PolyFit> fit_poly(const std::vector<std::vector<int64_t>>& symbols, const std::vector<int64_t>& values) {
  const size_t n = values.size();
  if (n == 0 || symbols.size() != n) return std::nullopt;
  bool constant = true;
  for (int64_t v : values) constant = constant && v == values[0];
  if (constant) return PolyFit{0, values[0], {}};
  const int k = static_cast<int>(symbols[0].size());
  const auto monos = monomials(k);
  std::vector<int64_t> mv(n);
  // c*m, then c*m + d: the fewest parameters that explain every sample.
  for (int with_constant = 0; with_constant < 2; ++with_constant)
    for (const auto& m : monos) {
      bool ok = true;
      for (size_t j = 0; j < n && ok; ++j) ok = mono_value(m, symbols[j], &mv[j]);
      if (!ok) continue;
      int64_t c = 0, d = 0;
      if (!with_constant) {
        if (mv[0] == 0 || values[0] % mv[0]) continue;
        c = values[0] / mv[0];
      } else {
        size_t b = 1;
        while (b < n && mv[b] == mv[0]) ++b;
        if (b == n) continue;
        int64_t dv = values[b] - values[0], dm = mv[b] - mv[0];
        if (dv % dm) continue;
        c = dv / dm;
        d = values[0] - c * mv[0];
      }
      for (size_t j = 0; j < n && ok; ++j) ok = c * mv[j] + d == values[j];
      if (ok) return PolyFit{c, d, m};
    }
  return std::nullopt;
}

std::vector<int> symbol_positions(const std::vector<const std::vector<int64_t>*>& dims, bool* enough) {
  std::vector<int> pos;
  *enough = true;
  if (dims.empty()) return pos;
  std::set<std::vector<int64_t>> columns;
  for (size_t p = 0; p < dims[0]->size(); ++p) {
    std::vector<int64_t> col;
    for (const auto* d : dims) col.push_back(d->at(p));
    std::set<int64_t> distinct(col.begin(), col.end());
    if (distinct.size() < 2 || !columns.insert(col).second) continue;
    pos.push_back(static_cast<int>(p));
    *enough = *enough && distinct.size() >= 3;
  }
  return pos;
}

std::vector<int64_t> symbol_values(const std::vector<int>& pos, const std::vector<int64_t>& dims) {
  std::vector<int64_t> s;
  s.reserve(pos.size());
  for (int p : pos) s.push_back(dims.at(p));
  return s;
}

int fewest_twos(const std::vector<int64_t>& symbols) {
  int least = 64;
  for (int64_t v : symbols) least = std::min(least, v > 0 ? __builtin_ctzll(static_cast<unsigned long long>(v)) : 64);
  return least;
}

std::string symbols_note(size_t ndims, const std::vector<int>& pos) {
  std::string s = "dims " + std::to_string(ndims) + " symbols";
  for (int p : pos) s += " " + std::to_string(p);
  return s;
}

bool parse_symbols_note(const std::string& s, std::vector<int>* pos, size_t* ndims) {
  const char* p = s.c_str();
  if (s.compare(0, 5, "dims ") != 0) return false;
  char* end = nullptr;
  long n = std::strtol(p + 5, &end, 10);
  if (end == p + 5 || n < 0 || std::string(end).compare(0, 8, " symbols") != 0) return false;
  *ndims = static_cast<size_t>(n);
  p = end + 8;
  while (*p == ' ') {
    long v = std::strtol(p + 1, &end, 10);
    if (end == p + 1 || v < 0 || v >= n) return false;
    pos->push_back(static_cast<int>(v));
    p = end;
  }
  return *p == 0 && !pos->empty();
}

std::optional<SizeTemplate> fit_template(const std::vector<std::vector<int64_t>>& symbols, const std::vector<ProgramInts>& ints,
                                         std::string* why) {
  if (ints.empty() || symbols.size() != ints.size()) {
    *why = "no samples";
    return std::nullopt;
  }
  SizeTemplate t;
  t.shape = ints[0].shape;
  t.num_symbols = static_cast<int>(symbols[0].size());
  for (const ProgramInts& p : ints)
    if (p.shape != t.shape || p.fields.size() != ints[0].fields.size()) {
      *why = "lowering differs between sizes (other fusion, loop order, simplification or memory reuse)";
      return std::nullopt;
    }
  std::vector<std::vector<int64_t>> values;
  for (const ProgramInts& p : ints) values.push_back(p.values());
  std::vector<int64_t> at(ints.size());
  for (size_t i = 0; i < ints[0].fields.size(); ++i) {
    for (size_t j = 0; j < ints.size(); ++j) at[j] = values[j][i];
    auto f = fit_poly(symbols, at);
    if (!f) {
      std::string vs;
      for (int64_t v : at) vs += (vs.empty() ? "" : ", ") + std::to_string(v);
      *why = "integer " + std::to_string(i) + " of the program is no polynomial of the sizes (" + vs + ")";
      return std::nullopt;
    }
    t.ints.push_back(f->expr());
    t.num_symbolic += !t.ints.back().is_constant();
    t.fits.push_back(std::move(*f));
  }
  return t;
}

// Text: "kiln-sizes 1 <symbols> <integers>\n", one line "c d e0 e1 ..." per integer, then the shape.
std::string template_text(const SizeTemplate& t) {
  std::string s = "kiln-sizes 1 " + std::to_string(t.num_symbols) + " " + std::to_string(t.fits.size()) + "\n";
  for (const PolyFit& f : t.fits) {
    s += std::to_string(f.c) + " " + std::to_string(f.d);
    for (int i = 0; i < t.num_symbols; ++i) s += " " + std::to_string(f.c == 0 || i >= static_cast<int>(f.exps.size()) ? 0 : f.exps[i]);
    s += "\n";
  }
  return s + t.shape;
}

std::optional<SizeTemplate> parse_template(const std::string& text) {
  const char* p = text.c_str();
  const char* end = p + text.size();
  auto number = [&](int64_t* v) {
    while (p < end && *p == ' ') ++p;
    char* stop = nullptr;
    errno = 0;
    long long x = std::strtoll(p, &stop, 10);
    if (stop == p || errno) return false;
    p = stop;
    *v = x;
    return true;
  };
  if (text.compare(0, 13, "kiln-sizes 1 ") != 0) return std::nullopt;
  p += 13;
  int64_t k = 0, n = 0;
  if (!number(&k) || !number(&n) || k < 0 || k > 16 || n < 0 || *p != '\n') return std::nullopt;
  ++p;
  SizeTemplate t;
  t.num_symbols = static_cast<int>(k);
  for (int64_t i = 0; i < n; ++i) {
    PolyFit f;
    if (!number(&f.c) || !number(&f.d)) return std::nullopt;
    f.exps.assign(k, 0);
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = 0;
      if (!number(&e) || e < 0 || e > 2) return std::nullopt;
      f.exps[j] = static_cast<int>(e);
    }
    if (p >= end || *p != '\n') return std::nullopt;
    ++p;
    if (f.c == 0) f.exps.clear();
    t.ints.push_back(f.expr());
    t.num_symbolic += !t.ints.back().is_constant();
    t.fits.push_back(std::move(f));
  }
  t.shape.assign(p, end);
  return t;
}

bool matches(const SizeTemplate& t, const ProgramInts& p, const std::vector<int64_t>& symbols, std::string* why) {
  if (p.shape != t.shape || p.fields.size() != t.ints.size()) {
    size_t at = 0;
    while (at < p.shape.size() && at < t.shape.size() && p.shape[at] == t.shape[at]) ++at;
    const size_t from = at > 24 ? at - 24 : 0;
    *why = "lowering at this size differs from the template's: ..." + p.shape.substr(from, 48) + " vs ..." + t.shape.substr(from, 48);
    return false;
  }
  if (static_cast<int>(symbols.size()) != t.num_symbols) {
    *why = "wrong number of symbols";
    return false;
  }
  for (size_t i = 0; i < t.ints.size(); ++i) {
    int64_t v;
    try {
      v = t.ints[i].eval(symbols.data());
    } catch (const std::exception&) {
      *why = "a size expression cannot be evaluated";
      return false;
    }
    if (v != p.fields[i].value()) {
      *why = "integer " + std::to_string(i) + " is " + std::to_string(p.fields[i].value()) + ", the template says " + t.ints[i].str() + " = " +
             std::to_string(v);
      return false;
    }
  }
  return true;
}

std::optional<IntSpelling> spell_ints(const SizeTemplate& t, const ProgramInts& p, std::string* why) {
  IntSpelling s;
  std::unordered_map<const void*, std::string> seen;  // every field, symbolic or not
  for (size_t i = 0; i < t.ints.size() && i < p.fields.size(); ++i) {
    const std::string key = t.ints[i].str();
    auto [it, fresh] = seen.emplace(p.fields[i].at, key);
    if (!fresh && it->second != key) {
      *why = "one integer of the program stands for two size expressions";
      return std::nullopt;
    }
    if (!t.ints[i].is_constant()) s[p.fields[i].at] = "(" + key + ")";
  }
  return s;
}

}  // namespace kiln::ir
