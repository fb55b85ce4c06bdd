// Python's semantics of symbolic values, shared by the instructions, calls and builtins: type(),
// truth, identity (`is`), iteration and unpacking, specialising symbolic sizes, constant folding
// of a call on Python values, and a Python value made symbolic.
#include <string>
#include <vector>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

PyObject* Interpreter::python_type_of(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor: return v->obj ? v->obj.get() : g_torch.tensor_type;
    case VarKind::kConst:
    case VarKind::kObject: return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
    case VarKind::kTuple: return v->obj ? v->obj.get() : reinterpret_cast<PyObject*>(&PyTuple_Type);
    case VarKind::kList: return v->obj ? v->obj.get() : reinterpret_cast<PyObject*>(&PyList_Type);  // obj: a ModuleList slice's type, or deque
    case VarKind::kDict: return v->obj ? v->obj.get() : reinterpret_cast<PyObject*>(&PyDict_Type);  // obj: OrderedDict/defaultdict
    case VarKind::kSymInt: return reinterpret_cast<PyObject*>(v->flag ? &PyFloat_Type : &PyLong_Type);
    case VarKind::kNestedFunction: return reinterpret_cast<PyObject*>(&PyFunction_Type);
    case VarKind::kNewObject: return v->obj.get();
    case VarKind::kIterator:  // a generator function's result (clip_grad_norm_ asks isinstance(p, GeneratorType))
      if (!v->obj) unsupported("type() of an iterator");
      return v->obj.get();
    case VarKind::kNdarray: {
      PyObject* np = PyDict_GetItemString(PyImport_GetModuleDict(), "numpy");
      if (!v->flag) {
        PyRef t = PyRef::steal(PyObject_GetAttrString(np, "ndarray"));
        return t.get();  // numpy.ndarray lives as long as numpy
      }
      PyRef t = PyRef::steal(PyObject_GetAttrString(numpy_dtype_of(v), "type"));
      return t.get();
    }
    default: unsupported(std::string("type() of a ") + kind_name(v->kind));
  }
}

VarPtr Interpreter::specialize_sizes(const VarPtr& v) {
  if (v->is_symint() || v->kind == VarKind::kSymSlice) return make_const(concretize(v).get());
  if ((v->kind != VarKind::kTuple && v->kind != VarKind::kList) || v->source) return v;
  bool any = false;
  for (const auto& it : v->items) any |= it->is_symint() || it->kind == VarKind::kSymSlice;
  if (!any) return v;
  auto c = make_seq(v->kind, {});
  c->obj = v->obj;
  c->fresh = v->fresh;
  for (const auto& it : v->items) c->items.push_back(it->is_symint() || it->kind == VarKind::kSymSlice ? make_const(concretize(it).get()) : it);
  return c;
}

// bool(v) through its class's __bool__ or __len__ written in Python, inlined; null if it has neither.
VarPtr Interpreter::python_truth(const VarPtr& v, PyTypeObject* t) {
  for (const char* dunder : {"__bool__", "__len__"}) {
    PyObject* fn = _PyType_Lookup(t, PyRef::steal(PyUnicode_FromString(dunder)).get());
    if (fn && PyFunction_Check(fn)) return inline_function(fn, nullptr, {v}, {}, nullptr);
  }
  return nullptr;
}

bool Interpreter::truthy(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kConst:
    case VarKind::kObject: {
      if (v->type_guarded) {  // the type decides, through a Python __bool__/__len__ or by having neither
        PyTypeObject* t = Py_TYPE(v->obj.get());
        if (VarPtr r = python_truth(v, t)) return truthy(r);
        bool has_c_truth = (t->tp_as_number && t->tp_as_number->nb_bool) || (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
                           (t->tp_as_sequence && t->tp_as_sequence->sq_length);
        if (!has_c_truth) return true;
      }
      int r = PyObject_IsTrue(identity(v));
      if (r < 0) unsupported("truth value failed: " + take_python_error());
      return r == 1;
    }
    case VarKind::kTuple: case VarKind::kList: case VarKind::kDict: return !v->items.empty();
    case VarKind::kDictView: return !v->self->items.empty();
    case VarKind::kTensor: unsupported("data-dependent branch: the truth value of a tensor depends on its data");
    case VarKind::kNdarray: unsupported("data-dependent branch: the truth value of a numpy value computed from tensors depends on its data");
    case VarKind::kSymInt: {
      if (v->float_tensor) {  // `if t:` of a dynamic float: t != 0.0, guarded as such
        static PyObject* zero = PyFloat_FromDouble(0.0);
        if (VarPtr r = compare_float_input(Py_NE, v, make_const(zero))) return r->obj.get() == Py_True;
      }
      return PyObject_IsTrue(concretize(v).get()) == 1;
    }
    case VarKind::kNestedFunction: case VarKind::kBoundMethod: case VarKind::kTensorMethod: case VarKind::kPartial: return true;
    case VarKind::kNewObject: {
      if (VarPtr r = python_truth(v, reinterpret_cast<PyTypeObject*>(v->obj.get()))) return truthy(r);
      return v->self ? !v->self->items.empty() : true;
    }
    default: unsupported(std::string("truth value of a ") + kind_name(v->kind));
  }
}

bool Interpreter::same_object(const VarPtr& a, const VarPtr& b, bool* known) {
  *known = true;
  if (a == b) return true;
  bool a_py = a->kind == VarKind::kConst || a->kind == VarKind::kObject;
  bool b_py = b->kind == VarKind::kConst || b->kind == VarKind::kObject;
  if (a_py && b_py) {
    // A type-guarded object is never a constant, nor an object of another type.
    if (a->is_const() != b->is_const() && (a->type_guarded || b->type_guarded)) return false;
    if (Py_TYPE(a->obj.get()) != Py_TYPE(b->obj.get()) && (a->type_guarded || b->type_guarded)) return false;
    return identity(a) == identity(b);
  }
  if (a->is_tensor() && b->is_tensor()) {
    if (a->node == b->node) return true;
    // Two tensor inputs (one tensor may be reached two ways: a parameter through its module and
    // through a list or a weak reference): the answer of the objects now, guarded to hold.
    auto a_in = input_tensors_.find(a->node), b_in = input_tensors_.find(b->node);
    if (a_in == input_tensors_.end() || b_in == input_tensors_.end() || !a->source || !b->source) return false;
    if (a_in->second == b_in->second) {
      cap_.guards->add_same(a->source, b->source);
      return true;
    }
    cap_.guards->add_distinct(a->source, {b->source}, "a tensor compared by identity");
    return false;
  }
  // A list, dict or object the capture made is one Var, shared by everything that holds it: any
  // other Var is another object (`y is not x` after copy.deepcopy).
  auto made_here = [](const VarPtr& v) {
    return (v->kind == VarKind::kList || v->kind == VarKind::kDict || v->kind == VarKind::kNewObject) && (!v->source || v->fresh);
  };
  if (made_here(a) || made_here(b)) return false;
  // A symbolic int or float (a size, a dynamic float) stands for a number: never the same object
  // as a constant that is not one (BatchNorm's `self.momentum is None` under dynamic=True).
  auto number_vs_other = [](const VarPtr& x, const VarPtr& y) {
    if (x->kind != VarKind::kSymInt || !y->is_const()) return false;
    PyObject* o = y->obj.get();
    return !PyLong_Check(o) && !PyFloat_Check(o);
  };
  if (number_vs_other(a, b) || number_vs_other(b, a)) return false;
  // A tensor, container or function made during capture is never a pre-existing constant.
  if (a_py || b_py) {
    const VarPtr& other = a_py ? b : a;
    // Nor is a method bound here (each attribute read binds a new one).
    if (other->kind == VarKind::kTensor || other->kind == VarKind::kTuple || other->kind == VarKind::kList ||
        other->kind == VarKind::kDict || other->kind == VarKind::kNestedFunction || other->kind == VarKind::kNewObject ||
        other->kind == VarKind::kBoundMethod || other->kind == VarKind::kContainerMethod || other->kind == VarKind::kTensorMethod)
      return false;
  }
  *known = false;
  return false;
}

std::vector<VarPtr> Interpreter::unpack(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTuple: case VarKind::kList: case VarKind::kGenerator: return v->items;
    case VarKind::kDict: {
      std::vector<VarPtr> out;
      for (auto& k : v->keys) out.push_back(make_const(k.get()));
      return out;
    }
    case VarKind::kDictView: {  // the dict's contents now, not when the view was made
      const Var& d = *v->self;
      std::vector<VarPtr> out;
      for (size_t i = 0; i < d.keys.size(); ++i) {
        VarPtr k = make_const(d.keys[i].get());
        out.push_back(v->name == "items" ? make_seq(VarKind::kTuple, {k, d.items[i]}) : v->name == "keys" ? k : d.items[i]);
      }
      return out;
    }
    case VarKind::kIterator: {
      std::vector<VarPtr> out(v->items.begin() + static_cast<long>(v->pos), v->items.end());
      v->pos = v->items.size();
      return out;
    }
    case VarKind::kConst: {
      PyRef seq = PyRef::steal(PySequence_List(v->obj.get()));
      if (!seq) unsupported("cannot iterate: " + take_python_error());
      std::vector<VarPtr> out;
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq.get()); ++i) out.push_back(make_const(PyList_GET_ITEM(seq.get(), i)));
      return out;
    }
    case VarKind::kTensor: {
      PyRef shape = PyRef::steal(PyObject_GetAttrString(v->fake.get(), "shape"));
      if (PyTuple_GET_SIZE(shape.get()) == 0) unsupported("iteration over a 0-d tensor");
      VarPtr r = record_op(graph::Op::kCallMethod, nullptr, "unbind", {v, make_const(PyRef::steal(PyLong_FromLong(0)).get())}, {});
      return r->items;
    }
    case VarKind::kNewObject: {
      PyObject* it = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(v->obj.get()), PyRef::steal(PyUnicode_FromString("__iter__")).get());
      if (it && it == sequence_iter()) return iterate_sequence(v);
      if (it && PyFunction_Check(it)) return unpack(inline_function(it, nullptr, {v}, {}, nullptr));
      if (v->self) return unpack(v->self);
      unsupported(std::string("iteration over ") + reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_name);
    }
    case VarKind::kObject: {
      if (is_trace_value(v->obj.get()) && PyIter_Check(v->obj.get())) unsupported(std::string("iteration over an unbounded ") + Py_TYPE(v->obj.get())->tp_name);
      if (PyAnySet_Check(v->obj.get()) || is_trace_value(v->obj.get())) {  // sets of constants (see BUILD_SET), trace-time values
        PyRef seq = PyRef::steal(PySequence_List(v->obj.get()));
        std::vector<VarPtr> out;
        if (!seq) unsupported("cannot iterate: " + take_python_error());
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(seq.get()); ++i) out.push_back(from_python_value(PyList_GET_ITEM(seq.get(), i), true));
        return out;
      }
      PyRef iter_name = PyRef::steal(PyUnicode_FromString("__iter__"));
      PyObject* it = _PyType_Lookup(Py_TYPE(v->obj.get()), iter_name.get());
      if (it && it == sequence_iter()) return iterate_sequence(v);
      if (keeps_dict_method(v, iter_name.get(), it)) return unpack(dict_contents(v));
      // A namedtuple the frame was given: its items, as v[i] (guarded through its source).
      if (v->source && PyTuple_Check(v->obj.get()) && it == _PyType_Lookup(&PyTuple_Type, PyRef::steal(PyUnicode_FromString("__iter__")).get())) {
        const Py_ssize_t n = PyTuple_GET_SIZE(v->obj.get());
        guard(v->source, GuardLeaf::kLen, nullptr, n);
        std::vector<VarPtr> out;
        for (Py_ssize_t i = 0; i < n; ++i) out.push_back(wrap(PyTuple_GET_ITEM(v->obj.get(), i), item_source(v->source, static_cast<int>(i))));
        return out;
      }
      if (it && PyFunction_Check(it)) {
        VarPtr r = inline_function(it, nullptr, {v}, {}, nullptr);
        return unpack(r);
      }
      unsupported(std::string("iteration over ") + Py_TYPE(v->obj.get())->tp_name);
    }
    default: unsupported(std::string("iteration over a ") + kind_name(v->kind));
  }
}

// Polyfill for collections.abc.Sequence.__iter__, which stops on IndexError: the same items, as
// self[i] for i in range(len(self)).
std::vector<VarPtr> Interpreter::iterate_sequence(const VarPtr& v) {
  std::vector<VarPtr> a{v};
  std::vector<std::pair<std::string, VarPtr>> none;
  bool handled;
  VarPtr n = call_builtin(builtin("len"), a, none, &handled);
  if (!n->is_const() || !PyLong_Check(n->obj.get())) unsupported("len() of a sequence is not a constant");
  std::vector<VarPtr> out;
  for (long i = 0; i < PyLong_AsLong(n->obj.get()); ++i) out.push_back(subscript(v, make_const(PyRef::steal(PyLong_FromLong(i)).get())));
  return out;
}

VarPtr Interpreter::make_iterator(const VarPtr& v) {
  if (v->kind == VarKind::kIterator) return v;
  auto it = std::make_shared<Var>(VarKind::kIterator);
  it->items = unpack(v);
  return it;
}

VarPtr Interpreter::fold(PyObject* fn, const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  for (const auto& a : args) refuse_fake_ids(a, "in a Python computation");
  for (const auto& kv : kwargs) refuse_fake_ids(kv.second, "in a Python computation");
  PyRef t = PyRef::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef a = as_python(args[i]);
    if (!a) unsupported("cannot evaluate " + py_repr(fn) + " on symbolic values");
    PyTuple_SET_ITEM(t.get(), i, a.release());
  }
  PyRef kw;
  if (!kwargs.empty()) {
    kw = PyRef::steal(PyDict_New());
    for (auto& [k, v] : kwargs) {
      PyRef a = as_python(v);
      if (!a) unsupported("cannot evaluate " + py_repr(fn) + " on symbolic values");
      PyDict_SetItemString(kw.get(), k.c_str(), a.get());
    }
  }
  PyRef r = PyRef::steal(PyObject_Call(fn, t.get(), kw.get()));
  if (!r) raise_pending_python_error("constant evaluation of " + py_repr(fn).substr(0, 60));
  if (probe_is_tensor(r.get())) unsupported("constant evaluation produced a tensor");
  return from_python_value(r.get(), Py_REFCNT(r.get()) > 1);
}

// A Python value as a symbolic one: constants stay constants; a list or dict becomes a
// symbolic container of wrapped items (so it can be iterated, indexed and, when it is a new
// object nobody else holds, mutated); anything else is an object.
VarPtr Interpreter::from_python_value(PyObject* r, bool shared) {
  if (is_constant_like(r)) return make_const(r);
  // A set/deque/Counter... nobody else holds (a new one, or one the capture made already).
  if (is_trace_value(r) || (!shared && trace_value_type(r))) return trace_value(r);
  VarPtr v;
  if (PyList_CheckExact(r) && PyList_GET_SIZE(r) <= 512) {
    v = make_seq(VarKind::kList, {});
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(r); ++i) v->items.push_back(wrap_unguarded(PyList_GET_ITEM(r, i), "item"));
  } else if (PyDict_CheckExact(r) && PyDict_GET_SIZE(r) <= 512) {
    v = std::make_shared<Var>(VarKind::kDict);
    Py_ssize_t pos = 0;
    PyObject *k, *val;
    while (PyDict_Next(r, &pos, &k, &val)) {
      if (!is_constant_like(k)) return make_object(r, nullptr);
      v->keys.push_back(PyRef::borrow(k));
      v->items.push_back(wrap_unguarded(val, "value"));
    }
  } else {
    return make_object(r, nullptr);
  }
  if (shared) v->source = constant_source(r, "container");  // kiln cannot replay its mutation
  return v;
}

}  // namespace kiln::frontend
