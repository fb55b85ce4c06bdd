// numpy on tensors, traced as torch operations (what Dynamo does through torch._numpy).
//
// `t.numpy()` and numpy calls on its results are values of kind kNdarray: a graph tensor that
// holds the array's data (the tensor the array was made from, without a copy, as numpy()
// shares memory) and whether numpy would hand back a numpy scalar rather than an array (a
// reduction over every axis, a ufunc of 0-d operands). Each numpy operation becomes the torch
// operation that computes the same values, run in the dtype numpy would compute in.
//
// Soundness: numpy itself decides every result's dtype and scalar-ness. Before recording, the
// operation runs for real on stand-ins of its operands (arrays of ones of the same dtype and
// number of dimensions, numpy scalars of the same type, the Python constants as they are); the
// torch operands are cast to that dtype (numpy's promotion, NEP 50 with weak Python scalars)
// and the recorded operation's meta result must have it, or the capture stops there (a graph
// break: eager numpy runs). Anything not listed here (in-place changes of an array, item
// assignment, numpy on data kiln cannot see) is a break. Since the array shares the tensor's
// memory, a capture that has made an array records no in-place tensor operation after it.
// Arrays reach eager code (a break, the frame's result) as `tensor.numpy()` of the graph's
// output (and `[()]` of it for a numpy scalar).
//
// Arrays handed to the frame (arguments, attributes, globals) are graph inputs as Dynamo takes
// them: each call passes `torch.from_numpy(array)` (no copy) to the graph, under a guard on the
// array's buffer (element format, shape, byte strides, writable; ndarray_input).
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

namespace {

PyObject* numpy_module() {  // borrowed; numpy is imported (the capture met numpy values)
  PyObject* m = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");
  return m;
}

const char* const kDtypes[] = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "complex64", "complex128"};

bool supported_dtype_name(const std::string& n) {
  for (const char* d : kDtypes)
    if (n == d) return true;
  return false;
}

// "float32" for torch.float32 (null: a dtype numpy has no equal of, bfloat16 and such).
std::string torch_dtype_name(PyObject* torch_dtype) {
  std::string s = py_str(torch_dtype);
  if (s.rfind("torch.", 0) == 0) s = s.substr(6);
  return supported_dtype_name(s) ? s : "";
}

std::string numpy_dtype_name(PyObject* np_dtype) {
  PyRef n = PyRef::steal(PyObject_GetAttrString(np_dtype, "name"));
  if (!n) { PyErr_Clear(); return ""; }
  std::string s = py_str(n.get());
  return supported_dtype_name(s) ? s : "";
}

bool is_ufunc(PyObject* f) { return std::strcmp(Py_TYPE(f)->tp_name, "numpy.ufunc") == 0; }

}  // namespace

bool Interpreter::is_numpy_callable(PyObject* f) {
  PyObject* np = numpy_module();
  if (!np) return false;
  if (is_ufunc(f)) return true;
  PyRef name = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
  if (!name || !PyUnicode_Check(name.get())) { PyErr_Clear(); return false; }
  PyObject* same = PyObject_GetAttr(np, name.get());  // np.<name> is this very function
  if (!same) { PyErr_Clear(); return false; }
  Py_DECREF(same);
  return same == f && !PyType_Check(f);
}

PyObject* Interpreter::numpy_dtype_of(const VarPtr& nd) {
  PyRef dt = PyRef::steal(PyObject_GetAttrString(nd->fake.get(), "dtype"));
  std::string n = dt ? torch_dtype_name(dt.get()) : "";
  if (n.empty()) unsupported("a numpy array of dtype " + (dt ? py_str(dt.get()) : std::string("?")));
  PyRef r = PyRef::steal(PyObject_CallMethod(numpy_module(), "dtype", "s", n.c_str()));
  if (!r) unsupported("numpy.dtype: " + take_python_error());
  numpy_refs_.push_back(r);
  return r.get();
}

VarPtr Interpreter::as_ndarray(const VarPtr& t, bool scalar) {
  auto v = std::make_shared<Var>(VarKind::kNdarray);
  v->node = t->node;
  v->fake = t->fake;
  v->device = t->device;
  v->flag = scalar;
  ++ndarrays_made_;
  numpy_dtype_of(v);  // a dtype numpy has
  return v;
}

VarPtr Interpreter::ndarray_tensor(const VarPtr& nd) {
  auto t = std::make_shared<Var>(VarKind::kTensor);
  t->node = nd->node;
  t->fake = nd->fake;
  t->device = nd->device;
  return t;
}

// t.numpy() / Tensor.__array__: the array shares the tensor's data. Eager refuses a tensor that
// requires grad, one off the CPU, and dtypes numpy lacks: those stay breaks (eager raises).
VarPtr Interpreter::tensor_to_ndarray(const VarPtr& t) {
  if (!numpy_module()) unsupported("numpy is not imported");
  if (t->obj) unsupported("numpy() of a tensor subclass");
  PyRef rg = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "requires_grad"));
  if (!rg || rg.get() != Py_False) unsupported("numpy() of a tensor that requires grad (RuntimeError)");
  PyRef kind = PyRef::steal(PyObject_GetAttrString(t->device.get(), "type"));
  if (!kind || py_str(kind.get()) != "cpu") unsupported("numpy() of a tensor that is not on the CPU (TypeError)");
  PyRef conj = PyRef::steal(PyObject_CallMethod(t->fake.get(), "is_conj", nullptr)), neg = PyRef::steal(PyObject_CallMethod(t->fake.get(), "is_neg", nullptr));
  if (!conj || !neg || conj.get() != Py_False || neg.get() != Py_False) { PyErr_Clear(); unsupported("numpy() of a tensor with a conjugate or negative bit"); }
  return as_ndarray(t, false);
}

// A stand-in with the same numpy type as v, on which numpy computes the result's type: ones of
// the array's dtype and number of dimensions, a numpy scalar, a Python constant as it is.
PyRef Interpreter::numpy_standin(const VarPtr& v) {
  if (v->kind == VarKind::kNdarray) {
    PyObject* dt = numpy_dtype_of(v);
    PyRef ndim = PyRef::steal(PyObject_CallMethod(v->fake.get(), "dim", nullptr));
    if (!ndim) unsupported("dim(): " + take_python_error());
    const long n = PyLong_AsLong(ndim.get());
    PyRef shape = PyRef::steal(PyTuple_New(n));
    for (long i = 0; i < n; ++i) PyTuple_SET_ITEM(shape.get(), i, PyLong_FromLong(1));
    PyRef ones = PyRef::steal(PyObject_CallMethod(numpy_module(), "ones", "OO", shape.get(), dt));
    if (!ones) unsupported("numpy.ones: " + take_python_error());
    if (!v->flag) return ones;
    PyRef empty = PyRef::steal(PyTuple_New(0));
    PyRef s = PyRef::steal(PyObject_GetItem(ones.get(), empty.get()));
    if (!s) unsupported("numpy scalar: " + take_python_error());
    return s;
  }
  if (v->is_const()) {
    PyObject* o = v->obj.get();
    if (PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) || is_numpy_scalar(o)) return v->obj;
  }
  return PyRef();
}

// What numpy's answer to `fn(standins)` is: (its dtype as a torch dtype, numpy scalar?, ndim).
Interpreter::NumpyResult Interpreter::numpy_oracle(PyObject* fn, const std::vector<PyRef>& standins, PyObject* kwargs) {
  PyRef args = PyRef::steal(PyTuple_New(standins.size()));
  for (size_t i = 0; i < standins.size(); ++i) PyTuple_SET_ITEM(args.get(), i, Py_NewRef(standins[i].get()));
  // Stand-ins are ones, but a warning may still come of their shape (a variance with ddof over
  // one element): numpy warns while kiln works out types only, so warnings are off meanwhile.
  PyRef warnings = PyRef::steal(PyImport_ImportModule("warnings"));
  PyRef ctx = warnings ? PyRef::steal(PyObject_CallMethod(warnings.get(), "catch_warnings", nullptr)) : PyRef();
  PyRef entered = ctx ? PyRef::steal(PyObject_CallMethod(ctx.get(), "__enter__", nullptr)) : PyRef();
  if (!entered) unsupported("warnings.catch_warnings: " + take_python_error());
  PyRef ignored = PyRef::steal(PyObject_CallMethod(warnings.get(), "simplefilter", "s", "ignore"));
  PyRef r = PyRef::steal(PyObject_Call(fn, args.get(), kwargs));
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  PyRef left = PyRef::steal(PyObject_CallMethod(ctx.get(), "__exit__", "OOO", Py_None, Py_None, Py_None));
  if (!left || !ignored) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  if (!r) unsupported("numpy raised " + take_python_error());
  PyObject* ndarray = PyObject_GetAttrString(numpy_module(), "ndarray");
  Py_XDECREF(ndarray);
  NumpyResult out;
  out.scalar = !PyObject_TypeCheck(r.get(), reinterpret_cast<PyTypeObject*>(ndarray));
  if (out.scalar && !is_numpy_scalar(r.get())) unsupported("a numpy call that returns a " + std::string(Py_TYPE(r.get())->tp_name));
  PyRef dt = PyRef::steal(PyObject_GetAttrString(r.get(), "dtype"));
  std::string n = dt ? numpy_dtype_name(dt.get()) : "";
  if (n.empty()) { PyErr_Clear(); unsupported("a numpy result of an unsupported dtype"); }
  out.dtype = module_attr("torch", n.c_str());
  PyRef nd = PyRef::steal(PyObject_GetAttrString(r.get(), "ndim"));
  out.ndim = nd ? PyLong_AsLong(nd.get()) : -1;
  return out;
}

VarPtr Interpreter::cast_to(const VarPtr& t, PyObject* torch_dtype) {
  PyRef dt = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
  if (dt.get() == torch_dtype) return t;
  return record_op(graph::Op::kCallMethod, nullptr, "to", {t, make_const(torch_dtype)}, {});
}

// The recorded result as an array, once its meta tensor agrees with numpy's answer.
VarPtr Interpreter::numpy_result(const VarPtr& r, const NumpyResult& want, const std::string& what) {
  if (!r->is_tensor()) unsupported("numpy " + what + " gave no tensor");
  PyRef dt = PyRef::steal(PyObject_GetAttrString(r->fake.get(), "dtype"));
  PyRef nd = PyRef::steal(PyObject_CallMethod(r->fake.get(), "dim", nullptr));
  if (!dt || dt.get() != want.dtype || !nd || PyLong_AsLong(nd.get()) != want.ndim) {
    PyErr_Clear();
    unsupported("numpy " + what + ": the torch operation does not give numpy's dtype");
  }
  return as_ndarray(r, want.scalar);
}

// An operand of numpy arithmetic as a graph value (an array's tensor cast to dtype) or a
// Python number (numpy scalars as Python numbers: the tensor operand already has the dtype).
VarPtr Interpreter::numpy_operand(const VarPtr& v, PyObject* dtype) {
  if (v->kind == VarKind::kNdarray) return dtype ? cast_to(ndarray_tensor(v), dtype) : ndarray_tensor(v);
  if (v->is_const() && is_numpy_scalar(v->obj.get())) {
    PyRef item = PyRef::steal(PyObject_CallMethod(v->obj.get(), "item", nullptr));
    if (!item) unsupported("numpy scalar item(): " + take_python_error());
    return make_const(item.get());
  }
  return v;
}

bool Interpreter::numpy_operand_ok(const VarPtr& v) { return v->kind == VarKind::kNdarray || static_cast<bool>(numpy_standin(v)); }

// a <op> b with an array among them: operator names as in Python's operator module.
VarPtr Interpreter::ndarray_binary(const char* opn, const VarPtr& a, const VarPtr& b) {
  std::string op = opn;
  if (op[0] == 'i' && op != "is") unsupported(std::string("in-place ") + opn + " on a numpy array (it writes the tensor it shares memory with)");
  static const std::unordered_map<std::string, const char*> arith = {{"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"truediv", "truediv"},
                                                                    {"pow", "pow"}, {"matmul", "matmul"}};
  static const std::unordered_map<std::string, const char*> cmp = {{"lt", "lt"}, {"le", "le"}, {"eq", "eq"}, {"ne", "ne"}, {"gt", "gt"}, {"ge", "ge"}};
  const bool is_cmp = cmp.count(op) > 0;
  if (!is_cmp && !arith.count(op)) unsupported(std::string("operator ") + opn + " on a numpy array");
  if (a->is_tensor() || b->is_tensor()) unsupported(std::string("operator ") + opn + " between a tensor and a numpy array");
  if (!numpy_operand_ok(a) || !numpy_operand_ok(b)) unsupported(std::string("operator ") + opn + " between a numpy array and a " + kind_name((a->kind == VarKind::kNdarray ? b : a)->kind));
  if (op == "matmul" && (a->kind != VarKind::kNdarray || b->kind != VarKind::kNdarray)) unsupported("matmul of a numpy array and a scalar (ValueError)");
  PyObject* fn = op_fn(op.c_str());
  PyRef sa = numpy_standin(a), sb = numpy_standin(b);
  NumpyResult want = numpy_oracle(fn, {sa, sb}, nullptr);
  PyObject* compute = want.dtype;
  if (op == "pow") {
    // Integer powers: numpy raises for a negative exponent where torch computes something; only
    // a constant non-negative exponent is the same in both.
    const std::string rn = torch_dtype_name(want.dtype);
    const bool integral = rn.rfind("int", 0) == 0 || rn.rfind("uint", 0) == 0 || rn == "bool";
    if (integral && !(b->is_const() && PyLong_CheckExact(b->obj.get()) && PyLong_AsLong(b->obj.get()) >= 0))
      unsupported("numpy integer power with an exponent that is not a constant non-negative int");
  }
  if (is_cmp) {  // compared in numpy's common dtype of the operands
    PyRef common = PyRef::steal(PyObject_CallMethod(numpy_module(), "result_type", "OO", sa.get(), sb.get()));
    std::string n = common ? numpy_dtype_name(common.get()) : "";
    if (n.empty()) { PyErr_Clear(); unsupported("numpy comparison of an unsupported dtype"); }
    compute = module_attr("torch", n.c_str());
  }
  VarPtr x = numpy_operand(a, compute), y = numpy_operand(b, compute);
  if (!x->is_tensor() && !y->is_tensor()) unsupported("numpy operator on no array");
  return numpy_result(record_op(graph::Op::kCallFunction, fn, "", {x, y}, {}), want, std::string("operator ") + opn);
}

VarPtr Interpreter::ndarray_unary(const char* opn, const VarPtr& a) {
  if (std::strcmp(opn, "neg") != 0 && std::strcmp(opn, "pos") != 0) unsupported(std::string("operator ") + opn + " on a numpy array");
  PyObject* fn = op_fn(opn);
  NumpyResult want = numpy_oracle(fn, {numpy_standin(a)}, nullptr);
  return numpy_result(record_op(graph::Op::kCallFunction, fn, "", {cast_to(ndarray_tensor(a), want.dtype)}, {}), want, opn);
}

// np.<ufunc>(x): the torch function computing it, in numpy's result dtype.
static const std::unordered_map<std::string, const char*>& unary_ufuncs() {
  static const std::unordered_map<std::string, const char*> m = {
      {"sqrt", "sqrt"}, {"exp", "exp"}, {"exp2", "exp2"}, {"log", "log"}, {"log2", "log2"}, {"log10", "log10"}, {"log1p", "log1p"},
      {"expm1", "expm1"}, {"sin", "sin"}, {"cos", "cos"}, {"tan", "tan"}, {"tanh", "tanh"}, {"sinh", "sinh"}, {"cosh", "cosh"},
      {"arcsin", "asin"}, {"arccos", "acos"}, {"arctan", "atan"}, {"absolute", "abs"}, {"negative", "neg"}, {"square", "square"},
      {"floor", "floor"}, {"ceil", "ceil"}, {"trunc", "trunc"}, {"isnan", "isnan"}, {"isinf", "isinf"}, {"isfinite", "isfinite"},
      {"logical_not", "logical_not"}};
  return m;
}

VarPtr Interpreter::numpy_reduction(const std::string& name, const VarPtr& a, std::vector<VarPtr> rest,
                                    const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  // (a, axis=None, keepdims=False) and, for std/var, ddof=0; nothing else.
  VarPtr axis = make_const(Py_None), keepdims = make_const(Py_False), ddof = make_const(PyRef::steal(PyLong_FromLong(0)).get());
  if (rest.size() > 1) unsupported("numpy " + name + " with positional arguments after axis");
  if (!rest.empty()) axis = rest[0];
  for (const auto& [k, v] : kwargs) {
    if (k == "axis") axis = v;
    else if (k == "keepdims") keepdims = v;
    else if (k == "ddof" && (name == "std" || name == "var")) ddof = v;
    else unsupported("numpy " + name + " with keyword " + k);
  }
  axis = specialize_sizes(axis);
  if (!axis->is_const() || !keepdims->is_const() || !ddof->is_const() || !PyBool_Check(keepdims->obj.get()) || !PyLong_CheckExact(ddof->obj.get()))
    unsupported("numpy " + name + " with non-constant axis/keepdims/ddof");
  PyObject* ax = axis->obj.get();
  const bool all_axes = ax == Py_None;
  if (!all_axes && !PyLong_CheckExact(ax) && !(PyTuple_CheckExact(ax) && (name == "sum" || name == "mean" || name == "max" || name == "min")))
    unsupported("numpy " + name + " with this axis");
  PyRef kw = PyRef::steal(Py_BuildValue("{sOsO}", "axis", ax, "keepdims", keepdims->obj.get()));
  if (name == "std" || name == "var") PyDict_SetItemString(kw.get(), "ddof", ddof->obj.get());
  PyRef fn = PyRef::steal(PyObject_GetAttrString(numpy_module(), name.c_str()));
  NumpyResult want = numpy_oracle(fn.get(), {numpy_standin(a)}, kw.get());
  PyRef numel = PyRef::steal(PyObject_CallMethod(a->fake.get(), "numel", nullptr));
  if (!numel) unsupported("numel(): " + take_python_error());
  // A symbolic element count is a product of sizes >= 2 (0 and 1 specialise): never empty.
  if ((name == "max" || name == "min") && PyLong_CheckExact(numel.get()) && PyLong_AsLong(numel.get()) == 0)
    unsupported("numpy " + name + " of an empty array (ValueError)");
  VarPtr t = ndarray_tensor(a);
  if (name != "max" && name != "min") t = cast_to(t, want.dtype);
  PyRef ndim = PyRef::steal(PyObject_CallMethod(a->fake.get(), "dim", nullptr));
  VarPtr dims;
  if (all_axes) {
    std::vector<VarPtr> ds;
    for (long i = 0; i < PyLong_AsLong(ndim.get()); ++i) ds.push_back(make_const(PyRef::steal(PyLong_FromLong(i)).get()));
    dims = make_seq(VarKind::kList, ds);
  } else {
    dims = axis;
  }
  std::vector<std::pair<std::string, VarPtr>> tkw;
  const char* tname = name == "max" ? "amax" : name == "min" ? "amin" : name.c_str();
  VarPtr r;
  if (name == "prod") {
    if (all_axes && keepdims->obj.get() == Py_True) unsupported("numpy prod over every axis with keepdims");
    if (all_axes) r = record_op(graph::Op::kCallFunction, module_attr("torch", "prod"), "", {t}, {});
    else r = record_op(graph::Op::kCallFunction, module_attr("torch", "prod"), "", {t, axis, keepdims}, {});
  } else {
    tkw.emplace_back("dim", dims);
    tkw.emplace_back("keepdim", keepdims);
    if (name == "std" || name == "var") tkw.emplace_back("correction", ddof);
    if (all_axes && PyLong_AsLong(ndim.get()) == 0 && (name == "max" || name == "min")) r = record_op(graph::Op::kCallMethod, nullptr, "clone", {t}, {});
    else r = record_op(graph::Op::kCallFunction, module_attr("torch", tname), "", {t}, tkw);
  }
  return numpy_result(r, want, name);
}

// np.<f>(...) with an array or tensor among the arguments. Null when f is no numpy function kiln
// traces (the caller's other rules, or a break, then apply).
VarPtr Interpreter::numpy_call(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  bool any = false;
  for (const auto& a : args) {
    any |= a->kind == VarKind::kNdarray || a->is_tensor();
    if (a->kind == VarKind::kList || a->kind == VarKind::kTuple)
      for (const auto& it : a->items) any |= it->kind == VarKind::kNdarray || it->is_tensor();
  }
  for (const auto& kv : kwargs) any |= kv.second->kind == VarKind::kNdarray || kv.second->is_tensor();
  if (!any || !is_numpy_callable(f)) return nullptr;
  PyRef nm = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
  const std::string name = nm ? py_str(nm.get()) : "";
  // A tensor handed to numpy itself: what comes back follows Tensor.__array_wrap__ and the
  // tensor's own methods (np.sin(t) is a Tensor, np.sum(t) calls t.sum): a break.
  auto array_arg = [&](const VarPtr& v) {
    if (v->is_tensor()) unsupported("numpy." + name + " of a tensor (not of an array)");
    return v;
  };
  for (auto& a : args) a = array_arg(a);
  if (is_ufunc(f)) {
    if (!kwargs.empty()) unsupported("numpy ufunc " + name + " with keyword arguments");
    if (args.size() == 1 && unary_ufuncs().count(name)) {
      if (args[0]->kind != VarKind::kNdarray) return nullptr;
      NumpyResult want = numpy_oracle(f, {numpy_standin(args[0])}, nullptr);
      VarPtr t = ndarray_tensor(args[0]);
      const std::string rn = torch_dtype_name(want.dtype);
      if (rn.rfind("float", 0) == 0 || rn.rfind("complex", 0) == 0) t = cast_to(t, want.dtype);  // computed in the result's dtype
      return numpy_result(record_op(graph::Op::kCallFunction, module_attr("torch", unary_ufuncs().at(name)), "", {t}, {}), want, name);
    }
    static const std::unordered_map<std::string, const char*> binary = {
        {"add", "add"}, {"subtract", "sub"}, {"multiply", "mul"}, {"divide", "truediv"}, {"true_divide", "truediv"}, {"power", "pow"},
        {"matmul", "matmul"}, {"less", "lt"}, {"less_equal", "le"}, {"equal", "eq"}, {"not_equal", "ne"}, {"greater", "gt"},
        {"greater_equal", "ge"}};
    if (args.size() == 2 && binary.count(name)) return ndarray_binary(binary.at(name), args[0], args[1]);
    if (args.size() == 2 && (name == "maximum" || name == "minimum") && args[0]->kind == VarKind::kNdarray && args[1]->kind == VarKind::kNdarray) {
      NumpyResult want = numpy_oracle(f, {numpy_standin(args[0]), numpy_standin(args[1])}, nullptr);
      VarPtr x = numpy_operand(args[0], want.dtype), y = numpy_operand(args[1], want.dtype);
      return numpy_result(record_op(graph::Op::kCallFunction, module_attr("torch", name.c_str()), "", {x, y}, {}), want, name);
    }
    unsupported("numpy ufunc " + name + " on arrays");
  }
  static const char* reductions[] = {"sum", "mean", "max", "min", "amax", "amin", "prod", "std", "var"};
  for (const char* r : reductions)
    if (name == r && !args.empty() && args[0]->kind == VarKind::kNdarray) {
      std::string n = name == "amax" ? "max" : name == "amin" ? "min" : name;
      return numpy_reduction(n, args[0], std::vector<VarPtr>(args.begin() + 1, args.end()), kwargs);
    }
  if ((name == "asarray" || name == "array") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kNdarray) {
    if (name == "asarray") return args[0];
    if (args[0]->flag) unsupported("numpy.array of a numpy scalar");  // a 0-d array, not a scalar
    return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "clone", {ndarray_tensor(args[0])}, {}), false);
  }
  if (name == "clip" && args.size() == 3 && kwargs.empty() && args[0]->kind == VarKind::kNdarray) {
    for (int i = 1; i < 3; ++i) {
      PyObject* o = args[i]->is_const() ? args[i]->obj.get() : nullptr;
      if (!o || !(o == Py_None || PyLong_CheckExact(o) || PyFloat_CheckExact(o))) unsupported("numpy.clip with bounds that are not Python numbers");
      if (PyFloat_CheckExact(o) && std::isnan(PyFloat_AS_DOUBLE(o))) unsupported("numpy.clip with a NaN bound");
    }
    if (args[1]->obj.get() == Py_None && args[2]->obj.get() == Py_None) unsupported("numpy.clip without bounds (ValueError)");
    NumpyResult want = numpy_oracle(f, {numpy_standin(args[0]), args[1]->obj, args[2]->obj}, nullptr);
    VarPtr t = cast_to(ndarray_tensor(args[0]), want.dtype);
    return numpy_result(record_op(graph::Op::kCallFunction, module_attr("torch", "clamp"), "", {t, args[1], args[2]}, {}), want, name);
  }
  if (name == "where" && args.size() == 3 && kwargs.empty()) {
    for (const auto& a : args)
      if (!numpy_operand_ok(a)) unsupported("numpy.where of a " + std::string(kind_name(a->kind)));
    if (args[0]->kind != VarKind::kNdarray) unsupported("numpy.where with a constant condition");
    NumpyResult want = numpy_oracle(f, {numpy_standin(args[0]), numpy_standin(args[1]), numpy_standin(args[2])}, nullptr);
    VarPtr c = cast_to(ndarray_tensor(args[0]), module_attr("torch", "bool"));
    VarPtr x = numpy_operand(args[1], want.dtype), y = numpy_operand(args[2], want.dtype);
    if (!x->is_tensor() && !y->is_tensor()) unsupported("numpy.where of two scalars");
    return numpy_result(record_op(graph::Op::kCallFunction, module_attr("torch", "where"), "", {c, x, y}, {}), want, name);
  }
  if ((name == "concatenate" || name == "stack") && !args.empty() && args.size() <= 2 && (args[0]->kind == VarKind::kList || args[0]->kind == VarKind::kTuple)) {
    VarPtr axis = args.size() == 2 ? args[1] : make_const(PyRef::steal(PyLong_FromLong(0)).get());
    for (const auto& kv : kwargs) {
      if (kv.first != "axis") unsupported("numpy." + name + " with keyword " + kv.first);
      axis = kv.second;
    }
    if (!axis->is_const() || !PyLong_CheckExact(axis->obj.get())) unsupported("numpy." + name + " with a non-int axis");
    std::vector<VarPtr> parts;
    std::vector<PyRef> standins;
    for (const auto& it : args[0]->items) {
      VarPtr p = array_arg(it);
      if (p->kind != VarKind::kNdarray || p->flag) unsupported("numpy." + name + " of values that are not arrays");
      parts.push_back(p);
      standins.push_back(numpy_standin(p));
    }
    if (parts.empty()) unsupported("numpy." + name + " of nothing (ValueError)");
    PyRef seq = PyRef::steal(PyList_New(0));
    for (const auto& s : standins) PyList_Append(seq.get(), s.get());
    PyRef kw = PyRef::steal(Py_BuildValue("{sO}", "axis", axis->obj.get()));
    NumpyResult want = numpy_oracle(f, {seq}, kw.get());
    std::vector<VarPtr> ts;
    for (const auto& p : parts) ts.push_back(cast_to(ndarray_tensor(p), want.dtype));
    return numpy_result(record_op(graph::Op::kCallFunction, module_attr("torch", name == "stack" ? "stack" : "cat"), "",
                                  {make_seq(VarKind::kList, ts), axis}, {}),
                        want, name);
  }
  if (name == "transpose" && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kNdarray) return ndarray_method(args[0], "transpose", {}, {});
  if (name == "reshape" && args.size() == 2 && kwargs.empty() && args[0]->kind == VarKind::kNdarray) return ndarray_method(args[0], "reshape", {args[1]}, {});
  unsupported("numpy." + name + " on arrays is not supported");
}

VarPtr Interpreter::ndarray_attr(const VarPtr& nd, PyObject* name) {
  const std::string n = py_str(name);
  if (n == "dtype") return make_object(numpy_dtype_of(nd), nullptr);
  if (n == "ndim") return make_const(PyRef::steal(PyObject_CallMethod(nd->fake.get(), "dim", nullptr)).get());
  if (n == "shape" || n == "size") {
    if (nd->flag) return make_const(n == "shape" ? PyRef::steal(PyTuple_New(0)).get() : PyRef::steal(PyLong_FromLong(1)).get());
    PyRef v = PyRef::steal(n == "shape" ? PyObject_GetAttrString(nd->fake.get(), "shape") : PyObject_CallMethod(nd->fake.get(), "numel", nullptr));
    if (!v || holds_symint(v.get()) || (n == "size" && !PyLong_CheckExact(v.get()))) { PyErr_Clear(); unsupported("numpy array " + n + " of symbolic size"); }
    if (n == "size") return make_const(v.get());
    PyRef t = PyRef::steal(PySequence_Tuple(v.get()));
    return make_const(t.get());
  }
  if (n == "T") return ndarray_method(nd, "transpose", {}, {});
  static const char* methods[] = {"sum", "mean", "max", "min", "prod", "std", "var", "astype", "reshape", "transpose", "copy", "flatten", "ravel"};
  for (const char* m : methods)
    if (n == m) return make_container_method(nd, n);
  unsupported("numpy array attribute " + n + " is not supported");
}

VarPtr Interpreter::ndarray_method(const VarPtr& nd, const std::string& name, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  static const char* reductions[] = {"sum", "mean", "max", "min", "prod", "std", "var"};
  for (const char* r : reductions)
    if (name == r) return numpy_reduction(name, nd, std::move(args), kwargs);
  if (nd->flag && name != "astype" && name != "copy") unsupported("numpy scalar method " + name);
  VarPtr t = ndarray_tensor(nd);
  if (name == "copy" || name == "flatten" || name == "ravel") {
    if (!args.empty() || !kwargs.empty()) unsupported("numpy " + name + " with arguments");
    if (name == "copy") return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "clone", {t}, {}), nd->flag);
    return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "reshape", {t, make_const(PyRef::steal(PyLong_FromLong(-1)).get())}, {}), false);
  }
  if (name == "astype") {
    if (args.size() != 1 || !kwargs.empty()) unsupported("numpy astype with these arguments");
    PyRef want = as_python(args[0]);
    PyRef dt = want ? PyRef::steal(PyObject_CallMethod(numpy_module(), "dtype", "O", want.get())) : PyRef();
    std::string dn = dt ? numpy_dtype_name(dt.get()) : "";
    if (dn.empty()) { PyErr_Clear(); unsupported("numpy astype to an unsupported dtype"); }
    const std::string from = torch_dtype_name(PyRef::steal(PyObject_GetAttrString(nd->fake.get(), "dtype")).get());
    const bool from_float = from.rfind("float", 0) == 0 || from.rfind("complex", 0) == 0;
    const bool to_int = dn.rfind("int", 0) == 0 || dn.rfind("uint", 0) == 0;
    // Out-of-range and NaN conversions to integers are implementation-defined in both.
    if (from_float && to_int) unsupported("numpy astype from a floating dtype to an integer one");
    if (from.rfind("complex", 0) == 0 && dn.rfind("complex", 0) != 0) unsupported("numpy astype from complex");
    std::vector<std::pair<std::string, VarPtr>> kw{{"copy", make_const(Py_True)}};
    return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "to", {t, make_const(module_attr("torch", dn.c_str()))}, kw), nd->flag);
  }
  if (name == "reshape") {
    if (!kwargs.empty() || args.empty()) unsupported("numpy reshape with these arguments");
    VarPtr shape = args.size() == 1 ? args[0] : make_seq(VarKind::kTuple, args);
    if (shape->is_const() && PyLong_CheckExact(shape->obj.get())) shape = make_seq(VarKind::kTuple, {shape});
    shape = specialize_sizes(shape);
    PyRef s = as_python(shape);
    if (!s || !PyTuple_Check(s.get())) unsupported("numpy reshape to a shape that is not a tuple of ints");
    return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "reshape", {t, shape}, {}), false);
  }
  if (name == "transpose") {
    if (!kwargs.empty() || !args.empty()) unsupported("numpy transpose with axes");
    PyRef ndim = PyRef::steal(PyObject_CallMethod(nd->fake.get(), "dim", nullptr));
    std::vector<VarPtr> perm;
    for (long i = PyLong_AsLong(ndim.get()) - 1; i >= 0; --i) perm.push_back(make_const(PyRef::steal(PyLong_FromLong(i)).get()));
    return as_ndarray(record_op(graph::Op::kCallMethod, nullptr, "permute", {t, make_seq(VarKind::kTuple, perm)}, {}), false);
  }
  unsupported("numpy array method " + name + " is not supported");
}

// torch.from_numpy / as_tensor / asarray / tensor of an array.
// A numpy array the frame was given, as an input of kind kNdarray; null (nothing recorded) for
// arrays torch.from_numpy refuses or that export no writable buffer (read-only, byte-swapped,
// dtypes torch lacks): those stay Python objects, guarded by identity.
VarPtr Interpreter::ndarray_input(PyObject* o, const SourcePtr& src) {
  if (src->kind == Source::kConstant || !is_numpy_array(o)) return nullptr;
  GuardLeaf leaf{GuardLeaf::kNdarray};
  leaf.obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
  BufferLayout buffer;
  PyRef dt = PyRef::steal(PyObject_GetAttrString(o, "dtype"));
  if (!dt || numpy_dtype_name(dt.get()).empty() || !buffer.read(o)) { PyErr_Clear(); return nullptr; }
  leaf.array = {buffer.format, buffer.itemsize};
  PyRef t = PyRef::steal(PyObject_CallOneArg(g_torch.from_numpy, o));
  if (!t) { PyErr_Clear(); return nullptr; }
  // Its sizes and strides follow the tensor's (automatic dynamic included): the guard checks the
  // array's buffer against the same facts.
  VarPtr v = tensor_input(t.get(), src, &leaf.tensor);
  cap_.numpy_inputs.push_back(src);
  cap_.guards->add(src, std::move(leaf));
  return as_ndarray(v, false);
}

VarPtr Interpreter::tensor_from_ndarray(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  bool any = false;
  for (const auto& a : args) any |= a->kind == VarKind::kNdarray;
  for (const auto& kv : kwargs) any |= kv.second->kind == VarKind::kNdarray;
  if (!any || !is_torch_op(f)) return nullptr;
  const bool from_numpy = f == module_attr("torch", "from_numpy"), as_tensor = f == module_attr("torch", "as_tensor") || f == module_attr("torch", "asarray");
  const bool copy = f == module_attr("torch", "tensor");
  if ((!from_numpy && !as_tensor && !copy) || args.size() != 1 || !kwargs.empty() || args[0]->kind != VarKind::kNdarray)
    unsupported("a numpy array passed to " + py_repr(f).substr(0, 60));
  if (from_numpy && args[0]->flag) unsupported("torch.from_numpy of a numpy scalar (TypeError)");
  VarPtr t = ndarray_tensor(args[0]);
  if (copy) return record_op(graph::Op::kCallMethod, nullptr, "clone", {t}, {});
  // A new tensor object sharing the array's memory, as eager's is (not the tensor the array came from).
  return record_op(graph::Op::kCallMethod, nullptr, "view_as", {t, t}, {});
}

}  // namespace kiln::frontend
