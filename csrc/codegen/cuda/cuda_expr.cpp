// Element types, literals, index analysis and expression emission for CUDA; see cuda_expr.h.
#include "codegen/cuda/cuda_expr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "codegen/common/op_spelling.h"

namespace kiln::codegen::cuda {

namespace {
thread_local const IntSpelling* t_spelling = nullptr;
}

SpellingScope::SpellingScope(const IntSpelling* s) { t_spelling = s; }
SpellingScope::~SpellingScope() { t_spelling = nullptr; }

std::string int_text(const int64_t& field) {
  if (t_spelling)
    if (auto it = t_spelling->find(&field); it != t_spelling->end()) return it->second;
  return std::to_string(field);
}
bool is_symbolic(const int64_t& field) { return t_spelling && t_spelling->count(&field); }
bool any_symbolic(const std::vector<int64_t>& fields) {
  for (const int64_t& f : fields)
    if (is_symbolic(f)) return true;
  return false;
}
std::string index_text(const Index& i) { return i.to_string(t_spelling); }
std::string product_text(const std::vector<int64_t>& fields) {
  std::vector<const int64_t*> f;
  for (const int64_t& x : fields) f.push_back(&x);
  return product_text(f);
}
std::string product_text(const std::vector<const int64_t*>& fields) {
  int64_t literal = 1;
  std::string symbolic;
  for (const int64_t* x : fields) {
    if (is_symbolic(*x)) symbolic += (symbolic.empty() ? "" : "*") + int_text(*x);
    else literal *= *x;
  }
  if (symbolic.empty()) return std::to_string(literal);
  return literal == 1 ? "(" + symbolic + ")" : "(" + std::to_string(literal) + "*" + symbolic + ")";
}

bool is_half(DType t) { return t == DType::kBFloat16 || t == DType::kFloat16; }
// Element types as C++ spells them (NVRTC has no <cstdint>), 16-bit floats as the prefix's.
const char* cuda_ctype(DType t) {
  switch (t) {
    case DType::kUInt8: return "unsigned char";
    case DType::kInt8: return "signed char";
    case DType::kInt16: return "short";
    case DType::kInt32: return "int";
    case DType::kInt64: return "long long";
    case DType::kFloat16: return "kiln::f16";
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kBool: return "bool";
    case DType::kBFloat16: return "kiln::bf16";
    default: return "void";
  }
}
// Temporaries hold 16-bit floats as float.
const char* temp_type(DType t) { return is_half(t) ? "float" : cuda_ctype(t); }

std::string literal(double v, DType t) {
  char buf[64];
  const std::string T = temp_type(t);
  if (t == DType::kBool) return v != 0 ? "true" : "false";
  if (!is_floating(t)) {
    std::snprintf(buf, sizeof buf, "%lldll", static_cast<long long>(v));
    return "static_cast<" + T + ">(" + buf + ")";
  }
  const bool dbl = t == DType::kFloat64;
  if (std::isnan(v)) return dbl ? "__longlong_as_double(0x7ff8000000000000ll)" : "__int_as_float(0x7fc00000)";
  if (std::isinf(v)) return std::string(v > 0 ? "" : "-") + (dbl ? "__longlong_as_double(0x7ff0000000000000ll)" : "__int_as_float(0x7f800000)");
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return "static_cast<" + T + ">(" + buf + ")";
}

// Converts a loaded element to its temporary, and a temporary to a stored element.
std::string from_storage(DType t, const std::string& v) { return is_half(t) ? "kiln::to_float(" + v + ")" : v; }
std::string to_storage(DType t, const std::string& v) {
  if (t == DType::kBFloat16) return "kiln::to_bf16(" + v + ")";
  if (t == DType::kFloat16) return "kiln::to_f16(" + v + ")";
  return v;
}

// ---- analysis ------------------------------------------------------------------------------

// Largest absolute value an index (and every subexpression of it) takes; -1 if a part
// exceeds `limit` (then 64-bit math is needed).
int64_t magnitude(const Index& e, const VarRanges& r, int64_t limit) {
  int64_t total = e.constant < 0 ? -e.constant : e.constant;
  for (const auto& [c, a] : e.terms) {
    int64_t m;
    if (a->kind == Atom::kVar) {
      m = a->var < static_cast<int>(r.size()) ? std::max<int64_t>(r[a->var] - 1, 0) : limit;
    } else {
      int64_t inner = magnitude(a->arg, r, limit);
      if (inner < 0) return -1;
      m = a->kind == Atom::kFloorDiv ? inner / a->divisor : std::min(inner, a->divisor - 1);
    }
    const int64_t ac = c < 0 ? -c : c;
    if (m && ac > limit / m) return -1;
    total += ac * m;
    if (total > limit) return -1;
  }
  return total;
}

void collect(const ExprPtr& e, const std::function<void(const Expr&)>& f, std::set<const Expr*>& seen) {
  if (!seen.insert(e.get()).second) return;
  f(*e);
  for (const auto& a : e->args) collect(a, f, seen);
  for (const auto& i : e->indirect) collect(i.value, f, seen);
}
bool same_expr(const ExprPtr& a, const ExprPtr& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype || a->args.size() != b->args.size()) return false;
  switch (a->kind) {
    case Expr::kLoad:
      if (a->buffer != b->buffer || !(a->index == b->index) || a->indirect.size() != b->indirect.size()) return false;
      for (size_t i = 0; i < a->indirect.size(); ++i)
        if (a->indirect[i].stride != b->indirect[i].stride || a->indirect[i].bound != b->indirect[i].bound ||
            !same_expr(a->indirect[i].value, b->indirect[i].value))
          return false;
      return true;
    case Expr::kConst: return std::memcmp(&a->value, &b->value, sizeof(double)) == 0;
    case Expr::kIndexValue: return a->index == b->index;
    case Expr::kLocal: return a->local == b->local && a->local_part == b->local_part;
    case Expr::kUnary: if (a->unary_op != b->unary_op) return false; break;
    case Expr::kBinary: if (a->binary_op != b->binary_op) return false; break;
    default: break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!same_expr(a->args[i], b->args[i])) return false;
  return true;
}

void for_each_node(const ExprPtr& e, const std::function<void(const Expr&)>& f) {
  std::set<const Expr*> seen;
  collect(e, f, seen);
}

// The variables of a stage: outer ones, then its inner ones, with their extents.
VarRanges stage_ranges(const Kernel& k, const Stage& s) {
  VarRanges r(k.outer_sizes.begin(), k.outer_sizes.end());
  r.insert(r.end(), s.inner_sizes.begin(), s.inner_sizes.end());
  return r;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

bool kernel_fits_int32(const Program& p, const Kernel& k) {
  const int64_t rows = product(k.outer_sizes);
  for (const Stage& s : k.stages) {
    const VarRanges r = stage_ranges(k, s);
    const int64_t inner = product(s.inner_sizes);
    if (rows > kIndex32Limit || inner > kIndex32Limit || (inner && rows > kIndex32Limit / inner)) return false;
    bool ok = true;
    auto check = [&](const Index& i) { ok = ok && magnitude(i, r, kIndex32Limit) >= 0; };
    for_each_node(s.value, [&](const Expr& e) {
      if (e.kind == Expr::kLoad || e.kind == Expr::kIndexValue) check(e.index);
      for (const auto& ind : e.indirect)
        if (ind.bound && ind.stride > kIndex32Limit / std::max<int64_t>(ind.bound, 1)) ok = false;
    });
    if (s.out_buffer >= 0) check(s.out_index);
    for (size_t i = 0; i < s.store_buffers.size(); ++i)
      if (s.store_buffers[i] >= 0) check(s.store_index[i]);
    if (!ok) return false;
  }
  (void)p;
  return true;
}

// Whether a stage may set the error flag: an integer division by a divisor that is not a nonzero
// constant. (Indirect indices are checked by a device-side assertion, no flag.)
bool stage_checks(const Stage& s) {
  bool checks = false;
  for_each_node(s.value, [&](const Expr& e) {
    if (e.kind == Expr::kBinary && info(e.binary_op).is(kOpChecked) && !is_floating(e.dtype) &&
        !(e.args[1]->kind == Expr::kConst && e.args[1]->value != 0))
      checks = true;
  });
  return checks;
}

// Whether an access at `idx` covers V consecutive, V-aligned elements as variable `v` runs
// over a group [base, base + V) with base a multiple of V. Besides `v` itself, the step may come
// from `a % m` where `a` is such an access and m a multiple of V (a group never crosses a
// multiple of m, so the remainder runs on with it: RoPE's rotate_half reads x[..., d % 64 + 64]);
// `a / m` is then constant over the group, as every other term must be.
bool vector_access(const Index& idx, int v, int V) {
  if (idx.constant % V != 0) return false;
  int unit = 0;
  for (const auto& [c, a] : idx.terms) {
    if (a->kind == Atom::kVar && a->var == v) {
      if (c != 1) return false;
      ++unit;
      continue;
    }
    if (a->kind != Atom::kVar && a->arg.uses_var(v)) {
      if (a->divisor % V != 0 || !vector_access(a->arg, v, V)) return false;
      if (a->kind == Atom::kMod) {
        if (c != 1) return false;
        ++unit;
        continue;
      }
    }
    if (c % V != 0) return false;
  }
  return unit == 1;
}

// Whether an expression's value changes with variable v.
bool expr_uses_var(const ExprPtr& e, int v) {
  bool uses = false;
  for_each_node(e, [&](const Expr& x) {
    if ((x.kind == Expr::kLoad || x.kind == Expr::kIndexValue) && x.index.uses_var(v)) uses = true;
  });
  return uses;
}

// Whether a load can be a vector load of V elements as variable v runs over a V-aligned group.
// A load through tensor-valued indices (an embedding's row gather) qualifies when the indices
// stay put within the group and each one moves the address by a multiple of V elements.
bool vector_load(const Program& p, const Expr& e, int v, int V) {
  if (e.kind != Expr::kLoad || element_size(p.buffers[e.buffer].dtype) * V > 16 || !vector_access(e.index, v, V)) return false;
  for (const auto& ind : e.indirect)
    if (ind.stride % V != 0 || expr_uses_var(ind.value, v)) return false;
  return true;
}

// ---- expressions ---------------------------------------------------------------------------

std::string ExprEmitter::address(const Expr& e) {
  std::string idx = index_text(e.index);
  for (const auto& ind : e.indirect) {
    std::string v = emit(ind.value);
    auto ll = [](const int64_t& f) { return is_symbolic(f) ? "static_cast<long long>(" + int_text(f) + ")" : std::to_string(f) + "ll"; };
    idx = "(" + idx + ") + " + ll(ind.stride) + " * kiln::checked_index(static_cast<long long>(" + v + "), " + ll(ind.bound) + ")";
  }
  return idx;
}

std::string ExprEmitter::emit(const ExprPtr& e) {
  auto it = memo_.find(e.get());
  if (it != memo_.end()) return it->second;
  if (auto c = values.find(e.get()); c != values.end()) return c->second;
  std::string v = "t" + std::to_string(next_++);
  std::string rhs = render(e);
  out_ << indent_ << "const " << temp_type(e->dtype) << " " << v << " = " << rhs << ";\n";
  memo_[e.get()] = v;
  return v;
}

std::string ExprEmitter::render(const ExprPtr& e) {
  const DType t = e->dtype;
  switch (e->kind) {
    case Expr::kConst:
      if (t_spelling)  // an element count of runtime sizes (a mean's divisor)
        if (auto it = t_spelling->find(&e->value); it != t_spelling->end()) return std::string("static_cast<") + temp_type(t) + ">(" + it->second + ")";
      return literal(e->value, t);
    case Expr::kIndexValue: return std::string("static_cast<") + temp_type(t) + ">(" + index_text(e->index) + ")";
    case Expr::kLocal: return "r" + std::to_string(e->local) + "_" + std::to_string(e->local_part);
    case Expr::kLoad: {
      const DType bt = p_.buffers[e->buffer].dtype;
      if (auto v = vec_loads.find(e.get()); v != vec_loads.end()) return from_storage(bt, v->second + ".v[" + lane + "]");
      return from_storage(bt, "b" + std::to_string(e->buffer) + "[" + address(*e) + "]");
    }
    case Expr::kCast: {
      std::string a = emit(e->args[0]);
      if (t == DType::kBool) return "(" + a + " != 0)";
      return std::string("static_cast<") + temp_type(t) + ">(" + a + ")";
    }
    case Expr::kWhere: {
      std::string c = emit(e->args[0]), a = emit(e->args[1]), b = emit(e->args[2]);
      return "(" + c + " ? " + a + " : " + b + ")";
    }
    case Expr::kUnary: {
      std::string a = emit(e->args[0]);
      UnaryOp op = e->unary_op;
      if (info(op).is(kOpLogicalOnBool) && e->args[0]->dtype == DType::kBool) op = UnaryOp::kNot;
      return spell(info(op).cuda, a, "", temp_type(e->args[0]->dtype));
    }
    case Expr::kBinary: {
      std::string a = emit(e->args[0]), b = emit(e->args[1]);
      return spell(info(e->binary_op).cuda, a, b, temp_type(e->args[0]->dtype));
    }
  }
  return "0";
}

std::string store(const Program& p, int buf, const std::string& index, const std::string& v) {
  return "b" + std::to_string(buf) + "[" + index + "] = " + to_storage(p.buffers[buf].dtype, v) + ";";
}

}  // namespace kiln::codegen::cuda
