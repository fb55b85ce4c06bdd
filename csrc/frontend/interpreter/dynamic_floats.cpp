// Dynamic floats: a float argument whose value changes between calls (a softmax temperature, a
// learning rate, a mixing weight) recompiled the frame on every new value until the recompile
// limit, then ran it eagerly. As in torch.compile, such a float is specialised on its first
// capture and becomes a graph input once it was seen with another value (choose_dynamic_float).
//
// In the graph it is a 0-d float64 tensor, made from the float per call (Capture::float_inputs),
// so every backend, kiln's ATen tracer included, sees a tensor input rather than a constant baked
// into its trace. Python arithmetic on it (`1 - p`, `t * 2`, `x / t`'s scalar part) stays in the
// graph as float64 tensor operations, which round as Python's floats do; a pointwise tensor
// operation takes it as its scalar operand (float_tensor_operands checks that the result's dtype
// and shape are the ones a Python float gives). Python raises where a tensor would compute on
// (`1 / 0.0`, `math.sqrt(-1.0)`): those uses guard the argument itself (a kFloat guard's
// conditions) or specialise. Anything else (a branch, int(), a C function) specialises the float:
// the guard pins its value, and later captures keep it a constant (pin_float).
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/dynamic_dims.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

VarPtr Interpreter::float_input(PyObject* o, const SourcePtr& src) {
  auto v = std::make_shared<Var>(VarKind::kSymInt);
  v->flag = true;
  v->float_tensor = true;
  v->source = src;
  v->fake = PyRef::borrow(o);
  PyRef example = PyRef::steal(probe_float_tensor(o));
  if (!example) unsupported("cannot make a tensor of the float " + src->repr() + ": " + take_python_error());
  v->node = add_input(src, example.get(), "f64[] (the float " + src->repr() + ")");
  cap_.float_inputs.push_back(src);
  guard(src, GuardLeaf::kFloat);
  return v;
}

PyRef Interpreter::specialize_float_input(const VarPtr& v) {
  guard(v->source, GuardLeaf::kEquals, v->fake.get());
  pin_float(v->source->repr(), opts_.size_history);
  return v->fake;
}

// `t < 0.5` (any of Python's six comparisons, either side) of a float argument and a number: the
// answer for the captured value, guarded as that comparison's outcome rather than as the value,
// so a branch on the float does not specialise it. Null for any other comparison.
VarPtr Interpreter::compare_float_input(int op, const VarPtr& a, const VarPtr& b) {
  static const int swapped[] = {Py_GT, Py_GE, Py_EQ, Py_NE, Py_LT, Py_LE};
  const bool left = is_float_argument(a);
  const VarPtr& x = left ? a : b;
  const VarPtr& c = left ? b : a;
  if (!is_float_argument(x) || !c->is_const()) return nullptr;
  PyObject* k = c->obj.get();
  double value;
  if (PyFloat_CheckExact(k)) {
    value = PyFloat_AS_DOUBLE(k);
  } else if (PyLong_CheckExact(k)) {  // exactly a double, as Python compares ints with floats
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(k, &overflow);
    if (overflow || i > (1LL << 53) || i < -(1LL << 53)) { PyErr_Clear(); return nullptr; }
    value = static_cast<double>(i);
  } else {
    return nullptr;
  }
  const int cmp = left ? op : swapped[op];
  const bool truth = float_compare(PyFloat_AS_DOUBLE(x->fake.get()), value, cmp);
  PyRef constant = PyRef::steal(PyFloat_FromDouble(value));
  guard(x->source, GuardLeaf::kFloatCompare, constant.get(), 2 * cmp + (truth ? 1 : 0));
  return make_const(truth ? Py_True : Py_False);
}

PyObject* Interpreter::float64_meta() {
  if (!float64_meta_) float64_meta_ = PyRef::steal(probe_float64_meta());
  if (!float64_meta_) unsupported("cannot make a float64 meta tensor: " + take_python_error());
  return float64_meta_.get();
}

// A dynamic float, or a list or tuple holding one (`torch.tensor([p, -p])`: a list of float64
// tensors makes a float64 tensor where a list of Python floats makes the default dtype's).
static bool holds_float_tensor(const VarPtr& v) {
  if (v->float_tensor) return true;
  if (v->kind == VarKind::kList || v->kind == VarKind::kTuple)
    for (const auto& item : v->items)
      if (holds_float_tensor(item)) return true;
  return false;
}

bool Interpreter::has_float_tensor(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  for (const auto& a : args)
    if (holds_float_tensor(a)) return true;
  for (const auto& kv : kwargs)
    if (holds_float_tensor(kv.second)) return true;
  return false;
}

// Where `v` may stand where Python would raise for some values: a float argument guarded to
// exclude them, a nonzero constant, or a size symbol itself (symbols are >= 2; an expression of
// them, `n - 4`, may be 0). Derived floats cannot be guarded: false.
bool Interpreter::excludes_by_guard(const VarPtr& v, Py_ssize_t condition) {
  if (v->is_const()) {
    PyObject* o = v->obj.get();
    const double x = PyFloat_Check(o) ? PyFloat_AsDouble(o) : PyLong_Check(o) ? PyLong_AsDouble(o) : -1.0;
    if (PyErr_Occurred()) { PyErr_Clear(); return false; }
    return condition == GuardLeaf::kFloatNonZero ? x != 0.0 : condition == GuardLeaf::kFloatPositive ? x > 0.0 : x >= 0.0;
  }
  if (v->is_symint() && !v->flag) {
    sym::Expr e;
    return probe_symbolic_value(v->fake.get(), &e) && e.is_symbol();
  }
  if (is_float_argument(v)) {
    guard(v->source, GuardLeaf::kFloat, nullptr, condition);
    return true;
  }
  return false;
}

// A graph node computing `fn(args)` on float64 tensors, standing for the Python float `hint`.
VarPtr Interpreter::float_result(PyObject* fn, const std::vector<VarPtr>& args, PyObject* hint) {
  auto v = std::make_shared<Var>(VarKind::kSymInt);
  v->flag = true;
  v->float_tensor = true;
  v->fake = PyRef::borrow(hint);
  std::vector<graph::Arg> gargs;
  for (const auto& a : args) {
    gargs.push_back(to_arg(a));
    if (is_float_argument(a)) v->items.push_back(a);   // a float argument
    else if (is_float_scalar(a)) v->items.insert(v->items.end(), a->items.begin(), a->items.end());
    else if (a->is_symint()) v->items.push_back(a);
  }
  v->node = cap_.graph->add_call(graph::Op::kCallFunction, qualified_name(fn), handle(fn), std::move(gargs), {}, "f64[]", where());
  cap_.removable.push_back(true);
  return v;
}

// Python arithmetic on a dynamic float (symint_op found one among `args`; `hint` is the float
// the captured values give): the same operation on the graph's float64 tensors, or null where
// the float must be specialised (an operation a tensor would not compute as Python does).
VarPtr Interpreter::float_tensor_op(PyObject* fn, const std::vector<VarPtr>& args, PyObject* hint) {
  if (!PyFloat_CheckExact(hint)) return nullptr;
  auto is = [&](const char* n) { return fn == op_fn(n); };
  if (is("add") || is("sub") || is("mul") || is("neg") || is("pos") || fn == builtin("abs"))
    return float_result(fn, args, hint);
  if ((is("truediv") || is("floordiv") || is("mod")) && args.size() == 2) {
    if (!excludes_by_guard(args[1], GuardLeaf::kFloatNonZero)) return nullptr;  // 1.0 / 0.0 raises
    VarPtr r = float_result(fn, args, hint);
    // Python's float % gives a zero the divisor's sign (-3.0 % 1.0 is 0.0), torch.remainder the
    // dividend's; a nonzero remainder has the divisor's sign in both, so copysign fixes the zero.
    if (is("mod")) r = float_result(module_attr("torch", "copysign"), {r, args[1]}, hint);
    return r;
  }
  if (is("pow") && args.size() == 2 && args[1]->is_const() && PyLong_CheckExact(args[1]->obj.get())) {
    // A whole non-negative exponent: no negative base to a fraction (complex in Python), no 0.0
    // to a negative power (ZeroDivisionError). From the square on, a finite base can overflow,
    // where Python raises OverflowError and the float64 tensor gives inf (fuzz seed 16308:
    // `(-7 // s) ** 3` with s = 1e-300): a float argument is guarded to a value whose power is
    // finite; a float computed from one cannot be, and is specialised.
    const long e = PyLong_AsLong(args[1]->obj.get());
    if (PyErr_Occurred()) { PyErr_Clear(); return nullptr; }
    if (e < 0 || e > 64) return nullptr;
    if (e >= 2) {
      if (!is_float_argument(args[0])) return nullptr;
      guard(args[0]->source, GuardLeaf::kFloat, args[1]->obj.get(), GuardLeaf::kFloatPowerFinite);
    }
    return float_result(fn, args, hint);
  }
  return nullptr;
}

// math.sqrt / math.log of a float argument (guarded to their domain), float() and abs() of a
// dynamic float; null for any other call, which then specialises its arguments.
VarPtr Interpreter::float_math(PyObject* fn, const std::vector<VarPtr>& args) {
  if (args.size() != 1 || !args[0]->float_tensor) return nullptr;
  const VarPtr& x = args[0];
  if (fn == reinterpret_cast<PyObject*>(&PyFloat_Type)) return x;
  if (fn == builtin("abs")) return float_tensor_op(fn, args, PyRef::steal(PyNumber_Absolute(x->fake.get())).get());
  const bool sqrt = fn == module_attr("math", "sqrt"), log = fn == module_attr("math", "log");
  if (!sqrt && !log) return nullptr;
  if (!excludes_by_guard(x, sqrt ? GuardLeaf::kFloatNonNegative : GuardLeaf::kFloatPositive)) return nullptr;
  PyRef hint = PyRef::steal(PyObject_CallOneArg(fn, x->fake.get()));
  if (!hint) unsupported("math on a float argument raised " + take_python_error());
  // torch.sqrt / torch.log in the graph: math's would read the tensor back as a Python number.
  return float_result(module_attr("torch", sqrt ? "sqrt" : "log"), args, hint.get());
}

// The kFloatFits* bit of the dtype eager converts a Python float operand of `target` / `method`
// to with an overflow check, when its result has `dtype`; 0 where it converts unchecked (a
// wrapped scalar: add, mul, comparisons, ...). A power checks its exponent only, in float16 and
// bfloat16 only: then kPowerExponent is set too.
Py_ssize_t Interpreter::checked_conversion(PyObject* target, const std::string& method, PyObject* dtype) {
  auto fn = [&](const char* n) { return method.empty() && target == module_attr("torch", n); };
  const bool power = method.empty() ? target == op_fn("pow") || fn("pow") : method == "pow" || method == "__pow__";
  const bool checked = power || fn("masked_fill") || fn("where") || fn("clamp") || fn("clip") || fn("full_like") ||
                       method == "masked_fill" || method == "masked_fill_" || method == "fill_" || method == "clamp" ||
                       method == "clamp_" || method == "clip";
  if (!checked) return 0;
  for (const FloatFits& f : kFloatFits)
    if (dtype == module_attr("torch", f.name)) {
      if (!power) return f.bit;
      return f.bit == GuardLeaf::kFloatFitsFloat16 || f.bit == GuardLeaf::kFloatFitsBFloat16 ? f.bit | kPowerExponent : 0;
    }
  return 0;  // float64 (no overflow), bool (any value converts), other dtypes
}

// A tensor operation with a dynamic float among its operands: `hint_result` is its meta result
// with the captured float there. Only pointwise operations (Interpreter::scalar_operands) take
// the float's tensor, as a positional operand; any other use specialises it. With the float64 tensor there instead, the
// result must have the same dtype and shape (a 0-d float64 operand promotes where a Python float
// does not: with integer tensors, or with only 0-d ones); where it does not, the tensor is cast to
// the result's dtype first (float32 for a 0-d float16/bfloat16 operand of mul/div, whose result
// the caller casts back: the dtype returned); where that does not match either, the float is
// specialised.
PyRef Interpreter::float_tensor_operands(bool pointwise, PyObject* hint_result, PyObject* target, const std::string& method,
                                         std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs,
                                         PyObject* fargs, PyObject* fkw) {
  std::function<VarPtr(const VarPtr&)> specialised = [&](const VarPtr& v) -> VarPtr {
    if (v->float_tensor) return make_const(concretize(v).get());
    if (!holds_float_tensor(v)) return v;
    std::vector<VarPtr> items;
    for (const auto& item : v->items) items.push_back(specialised(item));
    VarPtr seq = make_seq(v->kind, std::move(items));
    seq->obj = v->obj;  // a namedtuple's type
    return seq;
  };
  auto specialise_all = [&] {
    for (auto& a : args) a = specialised(a);
    for (auto& kv : kwargs) kv.second = specialised(kv.second);
    return PyRef();  // no cast of the result
  };
  if (!pointwise || !probe_is_tensor(hint_result)) return specialise_all();
  for (const auto& kv : kwargs)
    if (holds_float_tensor(kv.second)) return specialise_all();  // positional operands only
  for (const auto& a : args)
    if (!a->float_tensor && holds_float_tensor(a)) return specialise_all();  // not inside a list
  // An in-place operation returns the tensor it wrote, of that tensor's dtype whatever its
  // operands: its out-of-place form tells the dtype it computes in (`t.div_(p)` on a 0-d float32
  // `t` computes in float32 with a Python float, in float64 with the float64 tensor, and a tiny p
  // is zero in float32 only). Without an out-of-place form (fill_) the written dtype is all there is.
  PyRef oop_hint;
  const std::string inplace_of = method.size() > 1 && method.back() == '_' && method[method.size() - 2] != '_'
                                     ? method.substr(0, method.size() - 1) : "";
  if (!inplace_of.empty()) {
    PyRef form = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(PyTuple_GET_ITEM(fargs, 0)), inplace_of.c_str()));
    PyErr_Clear();
    if (form) {
      oop_hint = PyRef::steal(meta_.run(target, inplace_of, fargs, fkw, false));
      if (!oop_hint || !probe_is_tensor(oop_hint.get())) { PyErr_Clear(); return specialise_all(); }
      hint_result = oop_hint.get();
    }
  }
  const std::string& form_method = oop_hint ? inplace_of : method;
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(hint_result, "dtype"));
  PyRef shape = PyRef::steal(PyObject_GetAttrString(hint_result, "shape"));
  if (!dtype || !shape) { PyErr_Clear(); return specialise_all(); }
  // Some operators convert a Python float operand to the result's dtype with an overflow check
  // (c10::checked_convert): masked_fill's and fill_'s value, where's scalar, clamp's bounds, a
  // float16 / bfloat16 tensor's exponent. inf or nan into an integer tensor, 1e300 into a float32
  // one, raise "value cannot be converted to type int without overflow" there, where the float64
  // tensor standing for the float converts unchecked (fuzz seed 10866: masked_fill of an int
  // tensor with inf, after the float had become a graph input). A float argument is guarded to
  // convert (a value that does not fails the guard, and the capture for it specialises the float,
  // whose meta call raises as eager does); a float computed from one cannot be guarded and is
  // specialised.
  if (const Py_ssize_t fits = checked_conversion(target, form_method, dtype.get())) {
    const bool power = fits & kPowerExponent;
    for (size_t i = 0; i < args.size(); ++i) {
      const VarPtr& a = args[i];
      if (!a->float_tensor || (power && i != 1)) continue;  // a float base of a power converts unchecked
      const double x = PyFloat_AsDouble(a->fake.get());
      if (PyErr_Occurred()) { PyErr_Clear(); return specialise_all(); }
      if (!is_float_argument(a) || !float_fits(x, fits & ~kPowerExponent)) return specialise_all();
      guard(a->source, GuardLeaf::kFloat, nullptr, fits & ~kPowerExponent);
    }
  }
  auto same_result = [&](PyObject* operand, PyObject* want) {
    const Py_ssize_t n = PyTuple_GET_SIZE(fargs);
    PyRef trial = PyRef::steal(PyTuple_New(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      PyTuple_SET_ITEM(trial.get(), i, Py_NewRef(static_cast<size_t>(i) < args.size() && args[i]->float_tensor ? operand : PyTuple_GET_ITEM(fargs, i)));
    PyRef r = PyRef::steal(meta_.run(target, form_method, trial.get(), fkw, false));
    if (!r || !probe_is_tensor(r.get())) { PyErr_Clear(); return false; }
    PyRef d = PyRef::steal(PyObject_GetAttrString(r.get(), "dtype"));
    PyRef s = PyRef::steal(PyObject_GetAttrString(r.get(), "shape"));
    const bool same = d && s && d.get() == want && PyObject_RichCompareBool(s.get(), shape.get(), Py_EQ) == 1;
    PyErr_Clear();
    return same;
  };
  if (same_result(float64_meta(), dtype.get())) return PyRef();
  // A 0-d float16/bfloat16 operand times or divided by the float: eager computes in float32 with
  // the float unrounded and rounds the result once, so the float goes in as float32 and the
  // float32 result is cast back (the caller adds that cast). Other operators (add/sub, which
  // round the scalar to the operand's dtype first, as the cast below does) take the cast path.
  PyObject* f32 = module_attr("torch", "float32");
  const bool reduced = dtype.get() == module_attr("torch", "float16") || dtype.get() == module_attr("torch", "bfloat16");
  const bool mul = method.empty() ? target == op_fn("mul") || target == module_attr("torch", "mul") : form_method == "mul";
  const bool div = method.empty() ? target == op_fn("truediv") || target == module_attr("torch", "div") : form_method == "div";
  const bool mul_div = mul || (div && args.size() == 2 && !args[0]->float_tensor && args[1]->float_tensor && (!fkw || PyDict_GET_SIZE(fkw) == 0));
  PyObject* cast_to = dtype.get();
  PyRef result_cast;
  if (reduced && mul_div && f32) {
    PyRef as_f32 = PyRef::steal(PyObject_CallMethod(float64_meta(), "to", "O", f32));
    if (as_f32 && same_result(as_f32.get(), f32)) {
      cast_to = f32;
      result_cast = dtype;
    }
    PyErr_Clear();
  }
  if (!result_cast) {
    PyRef cast_meta = PyRef::steal(PyObject_CallMethod(float64_meta(), "to", "O", dtype.get()));
    if (!cast_meta || !same_result(cast_meta.get(), dtype.get())) { PyErr_Clear(); return specialise_all(); }
  }
  for (auto& a : args) {
    if (!a->float_tensor) continue;
    auto c = std::make_shared<Var>(*a);
    c->node = record_cast(to_arg(a), cast_to, "", true);
    if (is_float_argument(a)) {  // the cast stands for a derived value now
      c->source = nullptr;
      c->items = {a};
    }
    a = c;
  }
  return result_cast;
}

}  // namespace kiln::frontend
