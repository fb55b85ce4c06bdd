// kiln's symbolic integers as PyTorch SymInts: a c10::SymNodeImpl over sym::Expr, so ATen's own
// meta functions (and its CompositeImplicit decompositions) compute symbolic output sizes for
// meta tensors whose sizes are kiln symbols, and every question they ask about a size (a
// broadcast check, a contiguity test) lands in the capture's ShapeEnv as a guard.
//
// Integers and booleans stay symbolic. Floats made from sizes (`d ** -0.5`, `t / 2`, the 1/n of
// a mean) are their value under the hints plus the sizes they came from: turning one into an
// int or a bool, or reading it outside meta execution, guards those sizes (so the expression
// type stays integer-only and nothing is ever wrong); meta code reading it as a scalar does not.
#include <ATen/ATen.h>
#include <c10/core/SymNodeImpl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/python_symnode.h>

#include <cmath>
#include <stdexcept>

#include "frontend/objects/tensor_probe.h"
#include "symbolic/shape_env.h"
#include "torch_bridge/autograd_node.h"
#include "torch_bridge/sym_node.h"

namespace kiln::frontend {
static thread_local bool tls_meta_mode = false;
void probe_set_meta_mode(bool on) { tls_meta_mode = on; }
bool probe_meta_mode() { return tls_meta_mode; }
}  // namespace kiln::frontend

namespace kiln::bridge {

using sym::Expr;

class KilnSymNode : public c10::SymNodeImpl {
 public:
  enum Type { kInt, kBool, kFloat };
  KilnSymNode(std::shared_ptr<sym::ShapeEnv> env, Expr e, Type t, double f = 0, std::vector<Expr> deps = {})
      : env_(std::move(env)), e_(std::move(e)), type_(t), f_(f), deps_(std::move(deps)) {}

  const Expr& expr() const { return e_; }
  int64_t hint() const { return env_->hint(e_); }  // its value under the hints, guarding nothing
  Type type() const { return type_; }

  bool is_int() override { return type_ == kInt; }
  bool is_bool() override { return type_ == kBool; }
  bool is_float() override { return type_ == kFloat; }

  c10::SymNode wrap_int(int64_t v) override { return make(Expr::constant(v), kInt); }
  c10::SymNode wrap_bool(bool v) override { return make(Expr::boolean(v), kBool); }
  c10::SymNode wrap_float(double v) override { return make(Expr(), kFloat, v); }
  c10::SymNode clone() override { return c10::make_intrusive<KilnSymNode>(env_, e_, type_, f_, deps_); }

  c10::SymNode add(const c10::SymNode& o) override { return arith(o, '+'); }
  c10::SymNode sub(const c10::SymNode& o) override { return arith(o, '-'); }
  c10::SymNode mul(const c10::SymNode& o) override { return arith(o, '*'); }
  c10::SymNode floordiv(const c10::SymNode& o) override { return arith(o, '/'); }
  c10::SymNode int_floordiv(const c10::SymNode& o) override { return arith(o, '/'); }
  c10::SymNode mod(const c10::SymNode& o) override { return arith(o, '%'); }
  c10::SymNode sym_max(const c10::SymNode& o) override { return arith(o, 'M'); }
  c10::SymNode sym_min(const c10::SymNode& o) override { return arith(o, 'm'); }
  c10::SymNode neg() override { return type_ == kFloat ? make_float(-f_, deps_) : make(-e_, kInt); }

  c10::SymNode truediv(const c10::SymNode& o) override { return floating(o, '/'); }
  c10::SymNode float_truediv(const c10::SymNode& o) override { return floating(o, '/'); }
  c10::SymNode int_truediv(const c10::SymNode& o) override { return floating(o, '/'); }
  c10::SymNode pow(const c10::SymNode& o) override { return power(o); }
  c10::SymNode float_pow(const c10::SymNode& o) override { return floating(o, '^'); }
  c10::SymNode pow_by_natural(const c10::SymNode& o) override { return power(o); }
  c10::SymNode sym_float() override { return make_float(hint_double(), deps()); }
  c10::SymNode ceil() override { return make(Expr::constant(static_cast<int64_t>(std::ceil(fixed_double()))), kInt); }
  c10::SymNode floor() override { return make(Expr::constant(static_cast<int64_t>(std::floor(fixed_double()))), kInt); }

  c10::SymNode eq(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kEq); }
  c10::SymNode ne(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kNe); }
  c10::SymNode lt(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kLt); }
  c10::SymNode le(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kLe); }
  c10::SymNode gt(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kGt); }
  c10::SymNode ge(const c10::SymNode& o) override { return cmp(o, sym::Cmp::kGe); }
  c10::SymNode sym_and(const c10::SymNode& o) override { return make(sym::logical_and(e_, expr_of(o)), kBool); }
  c10::SymNode sym_or(const c10::SymNode& o) override { return make(sym::logical_or(e_, expr_of(o)), kBool); }
  c10::SymNode sym_not() override { return make(sym::logical_not(e_), kBool); }
  c10::SymNode sym_ite(const c10::SymNode& a, const c10::SymNode& b) override {
    return env_->guard_bool(e_) ? a : b;
  }

  int64_t guard_int(const char*, int64_t) override { return int_(); }
  bool guard_bool(const char*, int64_t) override { return bool_(); }
  double guard_float(const char*, int64_t) override { return frontend::probe_meta_mode() ? hint_double() : fixed_double(); }
  bool guard_size_oblivious(const char*, int64_t) override { return bool_(); }
  bool guard_or_false(const char*, int64_t) override { return bool_(); }
  bool guard_or_true(const char*, int64_t) override { return bool_(); }
  bool expect_true(const char*, int64_t) override { return bool_(); }
  bool statically_known_true(const char*, int64_t) override {
    auto k = sym::known(e_);
    return k && *k;
  }
  int64_t int_() override {
    if (type_ == kFloat) return static_cast<int64_t>(fixed_double());
    return env_->guard_int(e_);
  }
  bool bool_() override {
    if (type_ == kFloat) return fixed_double() != 0;
    return type_ == kBool ? env_->guard_bool(e_) : env_->guard_int(e_) != 0;
  }
  bool has_hint() override { return true; }
  std::string str() override { return type_ == kFloat ? std::to_string(f_) : e_.str(); }
  std::string _graph_repr() override { return str(); }
  std::optional<int64_t> constant_int() override {
    if (type_ == kInt && e_.is_constant()) return e_.constant_value();
    return std::nullopt;
  }
  std::optional<bool> constant_bool() override {
    if (type_ == kBool && e_.is_constant()) return e_.constant_value() != 0;
    return std::nullopt;
  }
  std::optional<int64_t> maybe_as_int() override { return constant_int(); }
  // A float (a size's quotient, say) is not a constant: it carries the sizes it came from, fixed
  // by guards only where a value is read (guard_float). Reported constant, PyTorch's magic
  // methods would unwrap it and fail (torch 2.13's get_constant takes no SymFloat: a training
  // batch norm's `input.numel() / input.shape[1]` at a dynamic batch size).
  bool is_constant() override { return type_ != kFloat && e_.is_constant(); }
  bool is_symbolic() override { return !is_constant(); }

  // Layout questions: decided through guarded comparisons (almost always known from the form).
  c10::SymNode is_contiguous(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    std::vector<int> order;
    for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) order.push_back(d);
    return wrap_bool(dense_in_order(sizes, strides, order));
  }
  c10::SymNode is_channels_last_contiguous_2d(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    return wrap_bool(sizes.size() == 4 && dense_in_order(sizes, strides, {1, 3, 2, 0}));
  }
  c10::SymNode is_channels_last_contiguous_3d(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    return wrap_bool(sizes.size() == 5 && dense_in_order(sizes, strides, {1, 4, 3, 2, 0}));
  }
  c10::SymNode is_channels_last_strides_2d(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    auto [sz, st] = hints_of(sizes, strides);
    return wrap_bool(sz.size() == 4 && c10::is_channels_last_strides_2d<int64_t>(sz, st));
  }
  c10::SymNode is_channels_last_strides_3d(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    auto [sz, st] = hints_of(sizes, strides);
    return wrap_bool(sz.size() == 5 && c10::is_channels_last_strides_3d<int64_t>(sz, st));
  }
  c10::SymNode is_non_overlapping_and_dense(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) override {
    // Dense in some dimension order: sort by stride (hints), then check that order with guards.
    auto [sz, st] = hints_of(sizes, strides);
    std::vector<int> order(sz.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return st[a] < st[b]; });
    return wrap_bool(dense_in_order(sizes, strides, order));
  }

 private:
  c10::SymNode make(Expr e, Type t, double f = 0) { return c10::make_intrusive<KilnSymNode>(env_, std::move(e), t, f); }

  static const KilnSymNode* as_kiln(const c10::SymNode& o) { return dynamic_cast<const KilnSymNode*>(o.get()); }

  Expr expr_of(const c10::SymNode& o) {
    if (auto* k = as_kiln(o)) {
      if (k->type_ == kFloat) throw std::runtime_error("kiln: a float where a symbolic integer was expected");
      return k->e_;
    }
    if (auto v = o->constant_int()) return Expr::constant(*v);
    if (auto b = o->constant_bool()) return Expr::boolean(*b);
    if (auto v = o->maybe_as_int()) return Expr::constant(*v);
    throw std::runtime_error("kiln: a symbolic value from another shape system");
  }

  c10::SymNode make_float(double v, std::vector<Expr> deps) {
    return c10::make_intrusive<KilnSymNode>(env_, Expr(), kFloat, v, std::move(deps));
  }

  // The sizes this value was computed from.
  std::vector<Expr> deps() const {
    if (type_ == kFloat) return deps_;
    if (e_.is_constant()) return {};
    return {e_};
  }
  static std::vector<Expr> deps_of(const c10::SymNode& o) {
    if (auto* k = as_kiln(o)) return k->deps();
    return {};
  }

  // The value under the hints, guarding nothing.
  double hint_double() const { return type_ == kFloat ? f_ : static_cast<double>(env_->hint(e_)); }
  static double hint_of(const c10::SymNode& o) {
    if (auto* k = as_kiln(o)) return k->hint_double();
    if (o->is_float()) return o->guard_float("", 0);
    return static_cast<double>(o->guard_int("", 0));
  }

  // The value, with the sizes it came from guarded equal to their hints.
  double fixed_double() {
    for (const auto& d : deps()) {
      if (d.is_bool()) env_->guard_bool(d);
      else env_->guard_int(d);
    }
    return hint_double();
  }

  bool involves_float(const c10::SymNode& o) const {
    auto* k = as_kiln(o);
    return type_ == kFloat || (k ? k->type_ == kFloat : o->is_float());
  }

  c10::SymNode arith(const c10::SymNode& o, char op) {
    if (involves_float(o)) return floating(o, op);
    Expr a = e_, b = expr_of(o);
    switch (op) {
      case '+': return make(a + b, kInt);
      case '-': return make(a - b, kInt);
      case '*': return make(a * b, kInt);
      case 'M': return make(sym::max(a, b), kInt);
      case 'm': return make(sym::min(a, b), kInt);
      default: break;
    }
    if (!b.is_constant() && env_->guard_bool(sym::compare(sym::Cmp::kEq, b, Expr::constant(0))))
      throw std::domain_error("integer division or modulo by zero");
    return make(op == '/' ? sym::floordiv(a, b) : sym::mod(a, b), kInt);
  }

  c10::SymNode floating(const c10::SymNode& o, char op) {
    double a = hint_double(), b = hint_of(o), r = 0;
    switch (op) {
      case '+': r = a + b; break;
      case '-': r = a - b; break;
      case '*': r = a * b; break;
      case '/': r = a / b; break;
      case '%': r = a - std::floor(a / b) * b; break;
      case 'M': r = std::max(a, b); break;
      case 'm': r = std::min(a, b); break;
      case '^': r = std::pow(a, b); break;
      default: r = std::floor(a / b); break;
    }
    std::vector<Expr> d = deps(), od = deps_of(o);
    d.insert(d.end(), od.begin(), od.end());
    return make_float(r, std::move(d));
  }

  c10::SymNode power(const c10::SymNode& o) {
    if (involves_float(o)) return floating(o, '^');
    Expr b = expr_of(o);
    if (!b.is_constant() || b.constant_value() < 0 || b.constant_value() > 8) return floating(o, '^');
    Expr r = Expr::constant(1);
    for (int64_t i = 0; i < b.constant_value(); ++i) r = r * e_;
    return make(r, kInt);
  }

  c10::SymNode cmp(const c10::SymNode& o, sym::Cmp op) {
    if (involves_float(o)) {  // a decision: fixes the sizes both sides came from
      double a = fixed_double(), b = hint_of(o);
      if (auto* k = as_kiln(o)) const_cast<KilnSymNode*>(k)->fixed_double();
      bool r = op == sym::Cmp::kEq ? a == b : op == sym::Cmp::kNe ? a != b : op == sym::Cmp::kLt ? a < b
             : op == sym::Cmp::kLe ? a <= b : op == sym::Cmp::kGt ? a > b : a >= b;
      return make(Expr::boolean(r), kBool);
    }
    return make(sym::compare(op, e_, expr_of(o)), kBool);
  }

  std::pair<std::vector<int64_t>, std::vector<int64_t>> hints_of(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides) {
    std::vector<int64_t> sz, st;
    for (const auto& s : sizes) sz.push_back(env_->hint(expr_of(s)));
    for (const auto& s : strides) st.push_back(env_->hint(expr_of(s)));
    return {sz, st};
  }

  // Dense when walking dimensions in `order` (innermost first): each stride is the product of
  // the sizes before it (size-1 dimensions skipped; an empty tensor is dense).
  bool dense_in_order(c10::ArrayRef<c10::SymNode> sizes, c10::ArrayRef<c10::SymNode> strides, const std::vector<int>& order) {
    for (const auto& s : sizes)
      if (env_->guard_bool(sym::compare(sym::Cmp::kEq, expr_of(s), Expr::constant(0)))) return true;
    Expr expected = Expr::constant(1);
    for (int d : order) {
      Expr size = expr_of(sizes[d]);
      if (env_->guard_bool(sym::compare(sym::Cmp::kEq, size, Expr::constant(1)))) continue;
      if (!env_->guard_bool(sym::compare(sym::Cmp::kEq, expr_of(strides[d]), expected))) return false;
      expected = expected * size;
    }
    return true;
  }

  std::shared_ptr<sym::ShapeEnv> env_;
  Expr e_;
  Type type_;
  double f_;
  std::vector<Expr> deps_;  // kFloat: the sizes it was computed from
};

bool symint_expr(const c10::SymInt& s, sym::Expr* out) {
  if (!s.is_heap_allocated()) {
    *out = Expr::constant(s.as_int_unchecked());
    return true;
  }
  auto* k = dynamic_cast<KilnSymNode*>(s.toSymNodeImplUnowned());
  if (!k || k->type() != KilnSymNode::kInt) return false;
  *out = k->expr();
  return true;
}

}  // namespace kiln::bridge

namespace kiln::frontend {

using bridge::KilnSymNode;

static c10::SymInt sym_int(const std::shared_ptr<sym::ShapeEnv>& env, const sym::Expr& e) {
  if (e.is_constant()) return c10::SymInt(e.constant_value());
  return c10::SymInt(c10::SymNode(c10::make_intrusive<KilnSymNode>(env, e, KilnSymNode::kInt)));
}

PyObject* probe_make_symbolic_meta(PyObject* o, const std::shared_ptr<sym::ShapeEnv>& env,
                                   const std::vector<sym::Expr>& sizes, const std::vector<sym::Expr>& strides) {
  try {
    const at::Tensor& t = THPVariable_Unpack(o);
    std::vector<c10::SymInt> sz, st;
    for (const auto& e : sizes) sz.push_back(sym_int(env, e));
    for (const auto& e : strides) st.push_back(sym_int(env, e));
    at::Tensor m;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      m = at::empty_strided_symint(sz, st, t.options().device(at::kMeta).requires_grad(false));
    }
    kiln::bridge::requires_grad_like(m, t);
    return THPVariable_Wrap(m);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* probe_make_symint(const std::shared_ptr<sym::ShapeEnv>& env, const sym::Expr& e) {
  try {
    return py::cast(sym_int(env, e)).release().ptr();
  } catch (const std::exception& ex) {
    PyErr_SetString(PyExc_RuntimeError, ex.what());
    return nullptr;
  }
}

bool probe_symbolic_value(PyObject* o, sym::Expr* out) {
  if (!torch::is_symint(o) && !torch::is_symbool(o)) return false;
  PyObject* node = PyObject_GetAttrString(o, "node");
  if (!node) { PyErr_Clear(); return false; }
  bool ok = false;
  try {
    auto n = py::handle(node).cast<c10::SymNode>();
    if (auto* k = dynamic_cast<KilnSymNode*>(n.get())) {
      if (k->type() != KilnSymNode::kFloat) { *out = k->expr(); ok = true; }
    }
  } catch (const std::exception&) {
    PyErr_Clear();
  }
  Py_DECREF(node);
  return ok;
}

bool probe_symbolic_hint(PyObject* o, int64_t* out) {
  if (!torch::is_symint(o)) return false;
  PyObject* node = PyObject_GetAttrString(o, "node");
  if (!node) { PyErr_Clear(); return false; }
  bool ok = false;
  try {
    auto n = py::handle(node).cast<c10::SymNode>();
    if (auto* k = dynamic_cast<KilnSymNode*>(n.get()); k && k->type() == KilnSymNode::kInt) {
      *out = k->hint();
      ok = true;
    }
  } catch (const std::exception&) {
    PyErr_Clear();
  }
  Py_DECREF(node);
  return ok;
}

bool probe_is_symbolic_tensor(PyObject* o) {
  if (!THPVariable_Check(o)) return false;
  const at::Tensor& t = THPVariable_Unpack(o);
  for (const auto& s : t.sym_sizes())
    if (s.is_heap_allocated()) return true;
  if (t.layout() == at::kStrided)
    for (const auto& s : t.sym_strides())
      if (s.is_heap_allocated()) return true;
  return t.sym_storage_offset().is_heap_allocated();
}

std::vector<std::string> probe_symbolic_sizes(PyObject* o) {
  std::vector<std::string> out;
  const at::Tensor& t = THPVariable_Unpack(o);
  for (const auto& s : t.sym_sizes()) out.push_back(s.is_heap_allocated() ? s.toSymNodeImplUnowned()->str() : std::to_string(s.as_int_unchecked()));
  return out;
}

}  // namespace kiln::frontend
