// Library functions interpreted on symbolic values rather than folded or broken on: sorting with
// a key, filter, setattr, dict.fromkeys, namedtuple construction, functools.reduce and itertools'
// chain, product, accumulate, combinations, permutations, zip_longest and repeat. Their results
// are symbolic containers, so tensors inside stay graph values. Also numpy on scalars (folded)
// and Tensor.type().
#include <algorithm>
#include <cstring>
#include <functional>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

namespace {

const VarPtr* kwarg(const std::vector<std::pair<std::string, VarPtr>>& kwargs, const char* name) {
  for (const auto& kv : kwargs)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

}  // namespace

// Items in the order sorted(items, key=key, reverse=reverse) gives: keys must be Python values
// (constants, or computed from them); the sort is stable in both directions, as Python's is.
std::vector<VarPtr> Interpreter::sort_by_key(std::vector<VarPtr> items, const VarPtr& key, bool reverse) {
  std::vector<PyRef> keys;
  for (const VarPtr& it : items) {
    VarPtr k = key && !(key->is_const() && key->obj.get() == Py_None) ? call(key, {it}, {}) : it;
    PyRef p = k->is_tensor() ? PyRef() : as_python(k);
    if (!p) unsupported("sorting by a key that is not a Python value");
    keys.push_back(p);
  }
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  bool failed = false;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (failed) return false;
    int r = PyObject_RichCompareBool(keys[reverse ? b : a].get(), keys[reverse ? a : b].get(), Py_LT);
    if (r < 0) { failed = true; PyErr_Clear(); return false; }
    return r == 1;
  });
  if (failed) unsupported("sort keys that do not compare");
  std::vector<VarPtr> out;
  for (size_t i : order) out.push_back(items[i]);
  return out;
}

VarPtr Interpreter::call_library(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, bool* handled) {
  *handled = true;
  const auto is = [&](const char* n) { return f == builtin(n); };
  const VarPtr* key = kwarg(kwargs, "key");
  if (is("sorted") && args.size() == 1 && key) {
    const VarPtr* rev = kwarg(kwargs, "reverse");
    return make_seq(VarKind::kList, sort_by_key(unpack(args[0]), *key, rev && truthy(*rev)));
  }
  if ((is("min") || is("max")) && key && !args.empty()) {
    std::vector<VarPtr> items = args.size() == 1 ? unpack(args[0]) : args;
    if (items.empty()) {
      if (const VarPtr* d = kwarg(kwargs, "default")) return *d;
      unsupported(std::string(is("min") ? "min" : "max") + "() of an empty sequence (ValueError)");
    }
    // The first of the least (min) or of the greatest (max) keys, as Python picks.
    std::vector<VarPtr> sorted = sort_by_key(items, *key, is("max"));
    return sorted.front();
  }
  if (is("filter") && args.size() == 2 && kwargs.empty()) {
    std::vector<VarPtr> out;
    const bool identity = args[0]->is_const() && args[0]->obj.get() == Py_None;
    for (const VarPtr& it : unpack(args[1]))
      if (truthy(identity ? it : call(args[0], {it}, {}))) out.push_back(it);
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (is("setattr") && args.size() == 3 && kwargs.empty()) {
    if (!args[1]->is_const() || !PyUnicode_Check(args[1]->obj.get())) unsupported("setattr() with a non-constant name");
    store_attr(args[0], args[1]->obj.get(), args[2]);
    return make_const(Py_None);
  }
  if (is("delattr") && args.size() == 2 && kwargs.empty()) {
    if (!args[1]->is_const() || !PyUnicode_Check(args[1]->obj.get())) unsupported("delattr() with a non-constant name");
    delete_attr(args[0], args[1]->obj.get());
    return make_const(Py_None);
  }
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) == reinterpret_cast<PyObject*>(&PyDict_Type) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name, "fromkeys") == 0 && !args.empty() && args.size() <= 2) {
    auto d = std::make_shared<Var>(VarKind::kDict);
    d->fresh = true;
    VarPtr value = args.size() == 2 ? args[1] : make_const(Py_None);
    for (const VarPtr& k : unpack(args[0])) {
      if (!k->is_const()) unsupported("dict.fromkeys with a non-constant key");
      bool seen = false;
      for (const auto& existing : d->keys) seen |= PyObject_RichCompareBool(existing.get(), k->obj.get(), Py_EQ) == 1;
      if (!seen) { d->keys.push_back(k->obj); d->items.push_back(value); }
    }
    return d;
  }
  if (f == module_attr("itertools", "chain") && kwargs.empty()) {
    std::vector<VarPtr> out;
    for (const VarPtr& a : args) {
      auto part = unpack(a);
      out.insert(out.end(), part.begin(), part.end());
    }
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (f == module_attr("functools", "reduce") && (args.size() == 2 || args.size() == 3) && kwargs.empty()) {
    std::vector<VarPtr> items = unpack(args[1]);
    VarPtr acc = args.size() == 3 ? args[2] : nullptr;
    if (!acc && items.empty()) unsupported("reduce() of an empty iterable with no initial value (TypeError)");
    for (const VarPtr& v : items) acc = !acc ? v : call(args[0], {acc, v}, {});
    return acc;
  }
  const bool combinations = f == module_attr("itertools", "combinations"), permutations = f == module_attr("itertools", "permutations");
  if ((combinations || permutations) && kwargs.empty() && !args.empty() && args.size() <= 2) {
    // Which positions each output tuple takes, from itertools itself over range(n).
    std::vector<VarPtr> pool = unpack(args[0]);
    if (args.size() == 2 && !(args[1]->is_const() && (PyLong_Check(args[1]->obj.get()) || args[1]->obj.get() == Py_None)))
      unsupported("itertools.combinations/permutations with a non-constant length");
    PyRef n = PyRef::steal(PyLong_FromSize_t(pool.size()));
    PyRef positions = PyRef::steal(PyObject_CallOneArg(reinterpret_cast<PyObject*>(&PyRange_Type), n.get()));
    PyRef it = PyRef::steal(args.size() == 2 ? PyObject_CallFunctionObjArgs(f, positions.get(), args[1]->obj.get(), nullptr)
                                             : PyObject_CallOneArg(f, positions.get()));
    PyRef rows = it ? PyRef::steal(PySequence_List(it.get())) : PyRef();
    if (!rows) unsupported("itertools raised " + take_python_error());
    if (PyList_GET_SIZE(rows.get()) > 100000) unsupported("itertools result too large to unroll");
    std::vector<VarPtr> out;
    for (Py_ssize_t r = 0; r < PyList_GET_SIZE(rows.get()); ++r) {
      PyObject* row = PyList_GET_ITEM(rows.get(), r);
      std::vector<VarPtr> tup;
      for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(row); ++j) tup.push_back(pool[PyLong_AsSize_t(PyTuple_GET_ITEM(row, j))]);
      out.push_back(make_seq(VarKind::kTuple, std::move(tup)));
    }
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (f == module_attr("itertools", "zip_longest")) {
    VarPtr fill = make_const(Py_None);
    for (const auto& kv : kwargs) {
      if (kv.first != "fillvalue") unsupported("itertools.zip_longest keyword " + kv.first);
      fill = kv.second;
    }
    std::vector<std::vector<VarPtr>> cols;
    size_t longest = 0;
    for (const VarPtr& a : args) {
      cols.push_back(unpack(a));
      longest = std::max(longest, cols.back().size());
    }
    std::vector<VarPtr> out;
    for (size_t i = 0; i < longest; ++i) {
      std::vector<VarPtr> row;
      for (const auto& c : cols) row.push_back(i < c.size() ? c[i] : fill);
      out.push_back(make_seq(VarKind::kTuple, std::move(row)));
    }
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (f == module_attr("itertools", "repeat") && kwargs.size() + args.size() == 2 && !args.empty()) {
    const VarPtr* times = args.size() == 2 ? &args[1] : kwarg(kwargs, "times");
    if (!times || !(*times)->is_const() || !PyLong_Check((*times)->obj.get())) unsupported("itertools.repeat without a constant count");
    long n = PyLong_AsLong((*times)->obj.get());
    if (n > 100000) unsupported("itertools.repeat too long to unroll");
    return make_iterator(make_seq(VarKind::kList, std::vector<VarPtr>(static_cast<size_t>(std::max(0L, n)), args[0])));
  }
  if (f == module_attr("itertools", "product")) {
    long repeat = 1;
    if (const VarPtr* r = kwarg(kwargs, "repeat")) {
      if (!(*r)->is_const()) unsupported("itertools.product with a non-constant repeat");
      repeat = PyLong_AsLong((*r)->obj.get());
    }
    std::vector<std::vector<VarPtr>> pools;
    for (long k = 0; k < repeat; ++k)
      for (const VarPtr& a : args) pools.push_back(unpack(a));
    std::vector<std::vector<VarPtr>> rows = {{}};
    for (const auto& pool : pools) {
      std::vector<std::vector<VarPtr>> next;
      for (const auto& row : rows)
        for (const VarPtr& v : pool) {
          next.push_back(row);
          next.back().push_back(v);
        }
      rows = std::move(next);
      if (rows.size() > 100000) unsupported("itertools.product too large to unroll");
    }
    std::vector<VarPtr> out;
    for (auto& row : rows) out.push_back(make_seq(VarKind::kTuple, std::move(row)));
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (f == module_attr("itertools", "accumulate") && !args.empty() && args.size() <= 2) {
    const VarPtr* fn = args.size() == 2 ? &args[1] : kwarg(kwargs, "func");
    const VarPtr* initial = kwarg(kwargs, "initial");
    std::vector<VarPtr> out;
    VarPtr acc = initial && !((*initial)->is_const() && (*initial)->obj.get() == Py_None) ? *initial : nullptr;
    if (acc) out.push_back(acc);
    for (const VarPtr& v : unpack(args[0])) {
      acc = !acc ? v : fn && !((*fn)->is_const() && (*fn)->obj.get() == Py_None) ? call(*fn, {acc, v}, {}) : binary("NB_ADD", acc, v);
      out.push_back(acc);
    }
    return make_iterator(make_seq(VarKind::kList, out));
  }
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) == reinterpret_cast<PyObject*>(&PyTuple_Type) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name, "__new__") == 0 && kwargs.empty() && args.size() <= 2 &&
      !args.empty() && args[0]->kind == VarKind::kObject && PyType_Check(args[0]->obj.get()) &&
      PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(args[0]->obj.get()), &PyTuple_Type)) {
    // tuple.__new__(cls, iterable): how a namedtuple's generated __new__ makes its instance.
    PyObject* cls = args[0]->obj.get();
    if (cls != reinterpret_cast<PyObject*>(&PyTuple_Type) && !(reinterpret_cast<PyTypeObject*>(cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
      unsupported("tuple.__new__ of a C-level tuple type");
    VarPtr t = make_seq(VarKind::kTuple, args.size() == 2 ? unpack(args[1]) : std::vector<VarPtr>{});
    if (cls != reinterpret_cast<PyObject*>(&PyTuple_Type)) t->obj = PyRef::borrow(cls);
    return t;
  }
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) == reinterpret_cast<PyObject*>(&PyBaseObject_Type) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name, "__new__") == 0 && kwargs.empty() && args.size() == 1 &&
      (args[0]->kind == VarKind::kObject || args[0]->is_const()) && PyType_Check(args[0]->obj.get()) &&
      builtin_base(reinterpret_cast<PyTypeObject*>(args[0]->obj.get())) == &PyBaseObject_Type) {
    // object.__new__(cls) (allowed where object is cls's builtin base): the instance without
    // __init__ (copyreg.__newobj__, how copy makes a copy).
    return new_instance(args[0]->obj.get());
  }
  if (PyType_Check(f) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(f), &PyTuple_Type) && f != reinterpret_cast<PyObject*>(&PyTuple_Type)) {
    // A namedtuple class: its fields from the arguments, then from keywords, then defaults.
    PyRef fields = PyRef::steal(PyObject_GetAttrString(f, "_fields"));
    if (!fields || !PyTuple_Check(fields.get())) { PyErr_Clear(); *handled = false; return nullptr; }
    PyRef defaults = PyRef::steal(PyObject_GetAttrString(f, "_field_defaults"));
    if (!defaults) PyErr_Clear();
    const Py_ssize_t n = PyTuple_GET_SIZE(fields.get());
    if (static_cast<Py_ssize_t>(args.size()) > n) unsupported("too many arguments for a namedtuple (TypeError)");
    std::vector<VarPtr> items(args.begin(), args.end());
    for (Py_ssize_t i = static_cast<Py_ssize_t>(args.size()); i < n; ++i) {
      PyObject* name = PyTuple_GET_ITEM(fields.get(), i);
      const VarPtr* given = kwarg(kwargs, PyUnicode_AsUTF8(name));
      PyObject* dflt = defaults && PyDict_Check(defaults.get()) ? PyDict_GetItem(defaults.get(), name) : nullptr;
      if (given) items.push_back(*given);
      else if (dflt) items.push_back(wrap_unguarded(dflt, "namedtuple default"));
      else unsupported("a namedtuple field without a value (TypeError)");
    }
    if (kwargs.size() + args.size() > static_cast<size_t>(n)) unsupported("unexpected namedtuple keyword (TypeError)");
    VarPtr t = make_seq(VarKind::kTuple, std::move(items));
    t->obj = PyRef::borrow(f);
    return t;
  }
  *handled = false;
  return nullptr;
}

// Tensor.type(): without arguments the legacy type name ('torch.FloatTensor'), a constant of the
// (guarded) dtype and device; with a dtype or such a name, the conversion `to(dtype)` does.
VarPtr Interpreter::tensor_type_method(const VarPtr& t, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  PyRef dev_type = PyRef::steal(PyObject_GetAttrString(t->device.get(), "type"));
  const bool cuda = dev_type && py_str(dev_type.get()) == "cuda";
  PyErr_Clear();
  // The legacy name of a dtype on the CPU, from a real empty tensor of it.
  auto cpu_name = [](PyObject* dtype) -> std::string {
    PyRef empty = PyRef::steal(PyObject_GetAttrString(g_torch.torch, "empty"));
    PyRef a = PyRef::steal(Py_BuildValue("(i)", 0));
    PyRef kw = PyRef::steal(Py_BuildValue("{s:O}", "dtype", dtype));
    PyRef e = empty && a && kw ? PyRef::steal(PyObject_Call(empty.get(), a.get(), kw.get())) : PyRef();
    PyRef n = e ? PyRef::steal(PyObject_CallMethod(e.get(), "type", nullptr)) : PyRef();
    if (!n) { PyErr_Clear(); return ""; }
    return py_str(n.get());
  };
  auto with_device = [&](const std::string& cpu) { return cuda ? "torch.cuda." + cpu.substr(6) : cpu; };
  if (args.empty() && kwargs.empty()) {
    PyRef dt = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
    std::string name = dt ? cpu_name(dt.get()) : "";
    if (name.empty()) unsupported("tensor.type() of this dtype");
    return make_const(PyRef::steal(PyUnicode_FromString(with_device(name).c_str())).get());
  }
  if (args.size() != 1 || !kwargs.empty() || !args[0]->is_const()) unsupported("tensor.type() with these arguments");
  PyObject* want = args[0]->obj.get();
  PyObject* dtype = nullptr;
  if (PyObject_TypeCheck(want, reinterpret_cast<PyTypeObject*>(g_torch.dtype_type))) {
    dtype = want;
  } else if (PyUnicode_Check(want)) {
    static const char* names[] = {"float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64", "complex128"};
    for (const char* n : names) {
      PyObject* d = module_attr("torch", n);
      if (d && with_device(cpu_name(d)) == py_str(want)) dtype = d;
    }
    if (!dtype) unsupported("tensor.type(" + py_str(want) + ") names another device or no tensor type");
  } else {
    unsupported("tensor.type() with an argument that is not a dtype or a type name");
  }
  return record_op(graph::Op::kCallMethod, nullptr, "to", {t, make_const(dtype)}, {});
}

// numpy on Python and numpy scalars (`np.sqrt(d)`, `np.float32(2.5)`, `np.log(2.0)`,
// `np.prod(x.shape)`): pure, so evaluated now when the result is a scalar too; sizes among the
// arguments are specialised (guarded). numpy on tensors or arrays, and numpy.random, are not.
VarPtr Interpreter::fold_numpy_scalar_call(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  std::string mod = PyType_Check(f) ? std::string(reinterpret_cast<PyTypeObject*>(f)->tp_name) : module_of(f);
  const bool numpy_fn = mod.rfind("numpy", 0) == 0 && mod.rfind("numpy.random", 0) != 0;
  const bool ufunc = std::strcmp(Py_TYPE(f)->tp_name, "numpy.ufunc") == 0;
  if (!numpy_fn && !ufunc) return nullptr;
  std::function<bool(PyObject*)> scalar_tree = [&](PyObject* o) {
    if (PyTuple_Check(o) || PyList_Check(o)) {
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
        if (!scalar_tree(PySequence_Fast_GET_ITEM(o, i))) return false;
      return true;
    }
    return o == Py_None || PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyUnicode_Check(o) || is_numpy_scalar(o) ||
           PyObject_TypeCheck(o, &PyType_Type);
  };
  for (auto& a : args) {
    a = specialize_sizes(a);
    PyRef p = as_python(a);
    if (!p || !scalar_tree(p.get())) return nullptr;
  }
  for (auto& kv : kwargs) {
    kv.second = specialize_sizes(kv.second);
    PyRef p = as_python(kv.second);
    if (!p || !scalar_tree(p.get())) return nullptr;
  }
  // An array from Python values (`np.array([1.0, 2.0], dtype=np.float32)`): made in the graph from
  // the values numpy computed (a fresh array each call, as in eager).
  PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");
  PyRef ndarray = np ? PyRef::steal(PyObject_GetAttrString(np, "ndarray")) : PyRef();
  PyErr_Clear();
  VarPtr r;
  {
    PyRef out = call_on_python_values(f, args, kwargs);
    if (probe_is_tensor(out.get())) unsupported("constant evaluation produced a tensor");
    if (ndarray && PyObject_TypeCheck(out.get(), reinterpret_cast<PyTypeObject*>(ndarray.get()))) {
      PyRef size = PyRef::steal(PyObject_GetAttrString(out.get(), "size"));
      PyRef dt = PyRef::steal(PyObject_GetAttrString(out.get(), "dtype"));
      PyRef dn = dt ? PyRef::steal(PyObject_GetAttrString(dt.get(), "name")) : PyRef();
      PyRef nd = PyRef::steal(PyObject_GetAttrString(out.get(), "ndim"));
      static const char* ok[] = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"};
      bool supported = false;
      for (const char* n : ok) supported |= dn && py_str(dn.get()) == n;
      if (!size || !nd || !supported || PyLong_AsLong(size.get()) > 4096 || PyLong_AsLong(nd.get()) == 0)
        unsupported("numpy call " + py_repr(f).substr(0, 60) + " made an array kiln does not rebuild");
      PyRef values = PyRef::steal(PyObject_CallMethod(out.get(), "tolist", nullptr));
      if (!values) unsupported("ndarray.tolist: " + take_python_error());
      VarPtr list = from_python_value(values.get(), false);
      PyRef cpu = PyRef::steal(PyObject_CallFunction(g_torch.device_type, "s", "cpu"));  // arrays live on the CPU
      std::vector<std::pair<std::string, VarPtr>> tkw{{"dtype", make_const(module_attr("torch", py_str(dn.get()).c_str()))},
                                                      {"device", make_const(cpu.get())}};
      std::vector<VarPtr> targs{list};
      return as_ndarray(record_op(graph::Op::kCallFunction, module_attr("torch", "tensor"), "", targs, tkw), false);
    }
    r = from_python_value(out.get(), Py_REFCNT(out.get()) > 1);
  }
  if (!r->is_const()) unsupported("numpy call " + py_repr(f).substr(0, 60) + " gave something other than a scalar");
  return r;
}

}  // namespace kiln::frontend
