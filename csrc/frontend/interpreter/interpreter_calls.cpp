// Calls (inlining user functions, nn.Module calls, torch operators) and the value helpers they
// share (truth, identity, iteration, constant folding) for the symbolic interpreter.
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/fake_id.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"
#include "frontend/hook/frame_dispatch.h"

namespace kiln::frontend {

bool is_dynamo_generation_tag(PyObject* fn);

// ---------------------------------------------------------------- helpers on values

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

// ---------------------------------------------------------------- calls

// `x.addcdiv_(a, b, value=v)` / addcmul and `x.add_(y, alpha=v)` / sub (and the out-of-place
// forms) whose scalar is a graph value: a 0-d tensor (optimizers pass their step size as one under
// compilers; eager reads it with .item()) or a dynamic float (the lr a scheduler changes every
// step, which otherwise recompiled per value). The product is computed first and added, the
// arithmetic ATen does (its fused kernel may round the last place differently), without the read.
// add/sub take a dynamic float only among floating-point tensors: eager refuses a float alpha
// with integer ones.
VarPtr Interpreter::scalar_keyword_operand(const VarPtr& fn, const std::vector<VarPtr>& args,
                                           const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  const std::string& m = fn->name;
  const bool addc = m == "addcdiv" || m == "addcdiv_" || m == "addcmul" || m == "addcmul_";
  const bool add = m == "add" || m == "add_" || m == "sub" || m == "sub_";
  if ((!addc && !add) || args.size() != (addc ? 2u : 1u) || kwargs.size() != 1 || kwargs[0].first != (addc ? "value" : "alpha")) return nullptr;
  const VarPtr& v = kwargs[0].second;
  const bool inplace = m.back() == '_';
  if (add) {
    auto floating = [](const VarPtr& t) {
      if (!t->is_tensor()) return false;
      PyRef dtype = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
      PyRef fp = dtype ? PyRef::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point")) : PyRef();
      PyErr_Clear();
      return fp && fp.get() == Py_True;
    };
    if (!v->float_tensor || !floating(fn->self) || !floating(args[0])) return nullptr;
    VarPtr prod = record_op(graph::Op::kCallMethod, nullptr, "mul", {args[0], v}, {});
    return record_op(graph::Op::kCallMethod, nullptr, m.substr(0, 3) + (inplace ? "_" : ""), {fn->self, prod}, {});
  }
  if (!v->is_tensor() && !v->float_tensor) return nullptr;
  VarPtr prod = record_op(graph::Op::kCallMethod, nullptr, m.compare(0, 7, "addcdiv") == 0 ? "div" : "mul", {args[0], args[1]}, {});
  prod = record_op(graph::Op::kCallMethod, nullptr, "mul", {prod, v}, {});
  return record_op(graph::Op::kCallMethod, nullptr, inplace ? "add_" : "add", {fn->self, prod}, {});
}

VarPtr Interpreter::call(const VarPtr& fn, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  switch (fn->kind) {
    case VarKind::kTensorMethod: {
      if (fn->name == "type") return tensor_type_method(fn->self, args, kwargs);
      if (fn->name == "is_inference" && args.empty() && kwargs.empty()) return make_const(fn->self->inference ? Py_True : Py_False);
      if (fn->name == "numpy") {
        if (!args.empty() || !(kwargs.empty() || (kwargs.size() == 1 && kwargs[0].first == "force" && kwargs[0].second->is_const() &&
                                                   kwargs[0].second->obj.get() == Py_False)))
          unsupported("tensor.numpy() with arguments");
        return tensor_to_ndarray(fn->self);
      }
      if (VarPtr r = scalar_keyword_operand(fn, args, kwargs)) return r;
      std::vector<VarPtr> full{fn->self};
      full.insert(full.end(), args.begin(), args.end());
      return record_op(graph::Op::kCallMethod, nullptr, fn->name, full, kwargs);
    }
    case VarKind::kContainerMethod:
      if (fn->self && fn->self->kind == VarKind::kGenFrame) return generator_method(fn->self, fn->name, args, kwargs);
      if (fn->self && fn->self->kind == VarKind::kNdarray) return ndarray_method(fn->self, fn->name, std::move(args), std::move(kwargs));
      return call_container_method(fn, args, kwargs);
    case VarKind::kBoundMethod: {
      // os.environ lookups (`os.environ.get(k, d)`, `k in os.environ`) are read as constants, as
      // Dynamo does: Mapping.get would otherwise raise KeyError inside the capture.
      if (fn->self->kind == VarKind::kObject && fn->self->obj.get() == module_attr("os", "environ") && all_const(args) && kwargs.empty()) {
        PyRef name = PyRef::steal(PyObject_GetAttrString(fn->obj.get(), "__name__"));
        if (name && (py_str(name.get()) == "get" || py_str(name.get()) == "__contains__" || py_str(name.get()) == "__getitem__"))
          return fold(PyRef::steal(PyObject_GetAttr(fn->self->obj.get(), name.get())).get(), args, {});
        PyErr_Clear();
      }
      // Counter.most_common, Counter.update...: the stdlib's own code, run for real on a
      // trace-time value and Python values.
      if (fn->self->kind == VarKind::kObject && is_trace_value(fn->self->obj.get()) && PyFunction_Check(fn->obj.get())) {
        if (!all_python_values(args, kwargs)) unsupported(py_repr(fn->obj.get()).substr(0, 60) + " with values that are not Python constants");
        PyRef bound = PyRef::steal(PyMethod_New(fn->obj.get(), fn->self->obj.get()));
        VarPtr r = fold(bound.get(), args, kwargs);
        if (r->kind == VarKind::kObject && (PyDictKeys_Check(r->obj.get()) || PyDictValues_Check(r->obj.get()) || PyDictItems_Check(r->obj.get())))
          return trace_value(r->obj.get());
        return r;
      }
      args.insert(args.begin(), fn->self);
      if (PyFunction_Check(fn->obj.get())) {
        if (is_torch_op(fn->obj.get())) return record_op(graph::Op::kCallFunction, fn->obj.get(), "", args, kwargs);
        return inline_function(fn->obj.get(), nullptr, std::move(args), std::move(kwargs), nullptr);
      }
      unsupported("call of a bound " + py_repr(fn->obj.get()));
    }
    case VarKind::kNestedFunction: return inline_function(nullptr, fn, std::move(args), std::move(kwargs), nullptr);
    case VarKind::kPartial: {  // the bound arguments first; keywords given to the call win
      std::vector<VarPtr> full(fn->items.begin(), fn->items.begin() + static_cast<long>(fn->pos));
      full.insert(full.end(), args.begin(), args.end());
      std::vector<std::pair<std::string, VarPtr>> kw;
      for (size_t i = 0; i < fn->keys.size(); ++i) {
        std::string k = py_str(fn->keys[i].get());
        bool overridden = false;
        for (auto& kv : kwargs) overridden |= kv.first == k;
        if (!overridden) kw.emplace_back(k, fn->items[fn->pos + i]);
      }
      kw.insert(kw.end(), kwargs.begin(), kwargs.end());
      return call(fn->self, std::move(full), std::move(kw));
    }
    case VarKind::kGradModeExit: {
      if (fn->name == "inference") {
        leave_inference_mode(fn->flag);
        return make_const(Py_False);
      }
      if (fn->name != "no-op") record_grad_mode(fn->flag);
      return make_const(Py_None);
    }
    case VarKind::kAutocastExit:
      exit_autocast(fn);
      return make_const(Py_False);
    case VarKind::kGenContext: {  // tag("block"): the context, not yet entered
      if (fn->flag) unsupported("call of an entered-or-made @contextmanager context");
      auto c = std::make_shared<Var>(VarKind::kGenContext);
      c->flag = true;
      c->self = fn->self;
      c->items = std::move(args);
      for (auto& [k, v] : kwargs) {
        c->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
        c->items.push_back(v);
      }
      c->pos = c->items.size() - c->keys.size();
      return c;
    }
    case VarKind::kGenContextExit: {
      for (const auto& a : args)
        if (!a->is_const() || a->obj.get() != Py_None) unsupported("a @contextmanager's __exit__ with an exception");
      return exit_generator_context(fn);
    }
    case VarKind::kNewObject: return call_new_object(fn, std::move(args), std::move(kwargs));
    case VarKind::kConst:
    case VarKind::kObject: break;
    default: unsupported(std::string("call of a ") + kind_name(fn->kind));
  }
  PyObject* f = fn->obj.get();
  if (PyObject* inner = unwrap_compiled_function(f))  // a kiln.compile'd callable: capture through it
    return call(wrap_unguarded(inner, "compiled"), std::move(args), std::move(kwargs));
  if (f == module_attr("torch._C", "_group_tensors_by_device_and_dtype")) return group_tensors_by_device_and_dtype(args, kwargs);
  // Sizes stay symbolic into torch operators, inlined Python and builtins that only look at a
  // container's structure (`len(x.shape)`, `tuple(x.shape)`); any other callee (math, library
  // code run as is) sees the captured value, guarded.
  static const char* structural[] = {"len", "isinstance", "issubclass", "type", "tuple", "list", "callable", "hasattr", "getattr", "id"};
  bool keep_symbolic = is_torch_op(f) || PyFunction_Check(f) || PyMethod_Check(f) || is_module_instance(f);
  for (const char* n : structural) keep_symbolic |= f == builtin(n);
  if (!keep_symbolic && kwargs.empty())
    if (VarPtr r = float_math(f, args)) return r;  // math.sqrt(t), float(t) of a dynamic float
  if (!keep_symbolic) {
    for (auto& a : args) a = specialize_sizes(a);
    for (auto& kv : kwargs) kv.second = specialize_sizes(kv.second);
  }
  if (int prev_grad = inference_mode_exit(f); prev_grad >= 0) {
    // leaving an inference_mode block a graph break entered: the graph computes outside it from
    // here, and the guard that break pushed is popped after the graph (Capture::pop_inference_after)
    if (!inference_ || !initial_inference_ || cap_.pop_inference_after > 0) unsupported("leaving an inference_mode block kiln did not see entered");
    leave_inference_mode(prev_grad == 1);
    cap_.pop_inference_after++;
    return make_const(Py_False);
  }
  if (is_autocast_exit_at_break(f)) unsupported("leaving a torch.autocast block a graph break entered");
  if (f == module_attr("torch", "is_inference_mode_enabled") && args.empty() && kwargs.empty()) return make_const(inference_ ? Py_True : Py_False);
  if (int mode = grad_mode_restorer(f); mode >= 0) {  // leaving a with-block begun before a graph break
    if (mode != 2) record_grad_mode(mode == 1);
    return make_const(Py_None);
  }
  if (f == builtin("__build_class__")) return build_class(args, kwargs);
  if (f == module_attr("copy", "deepcopy") && args.size() == 1 && kwargs.empty() && args[0]->is_const()) {
    // deepcopy of an immutable atom (what dataclasses.asdict does to each field) is that very
    // object (copy's own rule); deepcopy's memo would otherwise ask for id() of the value.
    std::function<bool(PyObject*)> atomic = [&](PyObject* o) {
      if (PyTuple_CheckExact(o)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
          if (!atomic(PyTuple_GET_ITEM(o, i))) return false;
        return true;
      }
      return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
             PyComplex_CheckExact(o) || PyUnicode_CheckExact(o) || PyBytes_CheckExact(o);
    };
    if (atomic(args[0]->obj.get())) return args[0];
  }
  if (f == builtin("vars") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kNewObject)
    return new_object_attr(args[0], PyRef::steal(PyUnicode_FromString("__dict__")).get());
  if (VarPtr r = numpy_call(f, args, kwargs)) return r;
  if (VarPtr r = tensor_from_ndarray(f, args, kwargs)) return r;
  {
    bool ndarray_arg = false;
    for (const auto& a : args) ndarray_arg |= a->kind == VarKind::kNdarray;
    for (const auto& kv : kwargs) ndarray_arg |= kv.second->kind == VarKind::kNdarray;
    if (ndarray_arg) {
      if (f == builtin("abs") && args.size() == 1 && kwargs.empty()) {
        PyRef absolute = PyRef::steal(PyObject_GetAttrString(PyDict_GetItemString(PyImport_GetModuleDict(), "numpy"), "absolute"));
        if (absolute) return call(make_object(absolute.get(), nullptr), std::move(args), std::move(kwargs));
        PyErr_Clear();
      }
      if (f == builtin("float") || f == builtin("int") || f == builtin("bool") || f == builtin("complex"))
        unsupported("data-dependent: " + py_repr(f) + " of a numpy value computed from tensors");
      if (f != builtin("isinstance") && f != builtin("type"))
        unsupported("a numpy array computed from tensors passed to " + py_repr(f).substr(0, 60));
    }
  }
  if (f == module_attr("contextlib", "contextmanager") && args.size() == 1 && kwargs.empty()) return context_manager_of(args[0]);
  if (PyObject* gen = contextmanager_generator(f))  // a call of a function decorated with @contextmanager
    return call(context_manager_of(wrap_unguarded(gen, "contextmanager function")), std::move(args), std::move(kwargs));
  bool handled = false;
  VarPtr r = call_library(f, args, kwargs, &handled);
  if (handled) return r;
  r = call_builtin(f, args, kwargs, &handled);
  if (handled) return r;
  if ((Py_IS_TYPE(f, &PyWrapperDescr_Type) || Py_IS_TYPE(f, &PyMethodDescr_Type)) && !args.empty() &&
      args[0]->kind == VarKind::kNewObject) {  // e.g. object.__setattr__(self, name, value)
    PyRef nm = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
    VarPtr self = args[0];
    args.erase(args.begin());
    return call_container_method(make_container_method(self, py_str(nm.get())), args, kwargs);
  }
  if (PyObject* answer = torch_query_answer(f)) return answer == Py_Ellipsis ? fold(f, args, kwargs) : make_const(answer);
  if (f == module_attr("inspect", "signature") && args.size() == 1 && kwargs.empty()) {
    // A signature depends only on the function: of a bound method, on its __func__ (whose
    // identity the attribute lookup that produced it has guarded), whatever it is bound to.
    const VarPtr& a = args[0];
    if (a->kind == VarKind::kBoundMethod && PyFunction_Check(a->obj.get())) {
      PyRef bound = PyRef::steal(PyMethod_New(a->obj.get(), Py_True));
      PyRef sig = PyRef::steal(PyObject_CallOneArg(f, bound.get()));
      if (!sig) unsupported("inspect.signature raised " + take_python_error());
      return make_object(sig.get(), nullptr);
    }
  }
  if (is_module_instance(f)) return call_module(fn, std::move(args), std::move(kwargs));
  if (f == module_attr("torch.utils.checkpoint", "checkpoint") && !args.empty()) {
    // Activation checkpointing: the region is traced like any code; the values and gradients are
    // the function's own, and which activations the backward recomputes is the partitioner's
    // choice for the whole graph (its min-cut recomputes cheap ops anyway).
    static const char* options[] = {"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"};
    std::vector<std::pair<std::string, VarPtr>> kept;
    for (auto& kv : kwargs)
      if (std::find(std::begin(options), std::end(options), kv.first) == std::end(options)) kept.push_back(kv);
    VarPtr inner = args[0];
    args.erase(args.begin());
    return call(inner, std::move(args), std::move(kept));
  }
  if (is_torch_op(f)) return record_op(graph::Op::kCallFunction, f, "", args, kwargs);
  // Once Dynamo has run in the process, nn.Module.__init__ ends by recording the module in
  // Dynamo's GenerationTracker (bookkeeping for Dynamo's own caches). A module built during
  // capture is not one Dynamo will see: nothing to record.
  if (PyFunction_Check(f) && !args.empty() && args.back()->kind == VarKind::kNewObject && is_dynamo_generation_tag(f)) return make_const(Py_None);
  if (PyFunction_Check(f) && py_str(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(f))->co_filename).find("/torch/_dynamo/") != std::string::npos)
    unsupported("call into torch.compile'd code (" + py_repr(f).substr(0, 60) + "); it runs under PyTorch's Dynamo");
  if (PyFunction_Check(f)) {
    PyObject* disabled = PyObject_GetAttrString(f, "_kiln_disable");
    if (disabled) { Py_DECREF(disabled); unsupported("call to a function marked kiln.disable: " + py_repr(f)); }
    PyErr_Clear();
    return inline_function(f, nullptr, std::move(args), std::move(kwargs), fn->source);
  }
  if (PyMethod_Check(f)) {
    args.insert(args.begin(), wrap_unguarded(PyMethod_GET_SELF(f), "self"));
    return call(make_object(PyMethod_GET_FUNCTION(f), nullptr), std::move(args), std::move(kwargs));
  }
  if (f == module_attr("functools", "partial")) {  // partial(func, *args, **kwargs), kept symbolic
    if (args.empty()) unsupported("functools.partial() without a function");
    auto p = std::make_shared<Var>(VarKind::kPartial);
    p->self = args[0];
    p->items.assign(args.begin() + 1, args.end());
    p->pos = p->items.size();
    for (auto& [k, v] : kwargs) {
      p->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
      p->items.push_back(v);
    }
    p->fresh = true;
    return p;
  }
  if (Py_TYPE(f) == reinterpret_cast<PyTypeObject*>(module_attr("functools", "partial"))) {
    // An existing partial (its identity is guarded; its function and arguments are read-only):
    // called as the symbolic partial of its pieces.
    PyRef func = PyRef::steal(PyObject_GetAttrString(f, "func")), pargs = PyRef::steal(PyObject_GetAttrString(f, "args")),
          pkw = PyRef::steal(PyObject_GetAttrString(f, "keywords"));
    if (!func || !pargs || !pkw || !PyDict_Check(pkw.get())) unsupported("a functools.partial without func/args/keywords: " + take_python_error());
    auto p = std::make_shared<Var>(VarKind::kPartial);
    p->self = wrap_unguarded(func.get(), "partial function");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs.get()); ++i) p->items.push_back(wrap_unguarded(PyTuple_GET_ITEM(pargs.get(), i), "partial argument"));
    p->pos = p->items.size();
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(pkw.get(), &pos, &k, &v)) {
      p->keys.push_back(PyRef::borrow(k));
      p->items.push_back(wrap_unguarded(v, "partial keyword"));
    }
    return call(p, std::move(args), std::move(kwargs));
  }
  if (Py_TYPE(f) == reinterpret_cast<PyTypeObject*>(module_attr("functools", "_lru_cache_wrapper"))) {
    // On plain Python values the cached answer is the answer (an lru_cache'd function is pure by
    // its author's word); on symbolic ones, the cache only saves work: call what it wraps.
    bool plain = true;
    for (const auto& a : args) plain &= !a->is_tensor() && static_cast<bool>(as_python(a));
    for (const auto& kv : kwargs) plain &= !kv.second->is_tensor() && static_cast<bool>(as_python(kv.second));
    for (const auto& a : args) refuse_fake_ids(a, "as an lru_cache key");
    for (const auto& kv : kwargs) refuse_fake_ids(kv.second, "as an lru_cache key");
    if (plain) {
      // A cached tensor (`torch.ones(n, n).tril()` by size) is traced through the wrapped function
      // instead, as Dynamo does (it ignores the cache): its ops go into the graph.
      PyRef t = PyRef::steal(PyTuple_New(args.size()));
      for (size_t i = 0; i < args.size(); ++i) PyTuple_SET_ITEM(t.get(), i, as_python(args[i]).release());
      PyRef kw = PyRef::steal(PyDict_New());
      for (auto& [k, v] : kwargs) PyDict_SetItemString(kw.get(), k.c_str(), as_python(v).get());
      PyRef r = PyRef::steal(PyObject_Call(f, t.get(), kw.get()));
      if (!r) raise_pending_python_error("constant evaluation of " + py_repr(f).substr(0, 60));
      if (!probe_is_tensor(r.get())) return from_python_value(r.get(), Py_REFCNT(r.get()) > 1);
    }
    PyRef wrapped = PyRef::steal(PyObject_GetAttrString(f, "__wrapped__"));
    if (!wrapped) unsupported("an lru_cache wrapper without __wrapped__");
    return call(wrap_unguarded(wrapped.get(), "lru_cache'd function"), std::move(args), std::move(kwargs));
  }
  if (PyType_Check(f)) {
    if (f == module_attr("torch", "inference_mode")) {  // torch.inference_mode(mode=True)
      VarPtr mode = args.size() == 1 && kwargs.empty() ? args[0] : args.empty() && kwargs.size() == 1 && kwargs[0].first == "mode" ? kwargs[0].second : nullptr;
      if (!mode && !(args.empty() && kwargs.empty())) unsupported("torch.inference_mode() with these arguments");
      if (mode && !(mode->is_const() && PyBool_Check(mode->obj.get()))) unsupported("torch.inference_mode() with a mode that is not a constant bool");
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->name = "inference";
      v->flag = !mode || mode->obj.get() == Py_True;
      return v;
    }
    if (is_autocast_type(f) && all_python_values(args, kwargs)) {  // its settings, checked as eager does
      PyRef t = PyRef::steal(PyTuple_New(args.size()));
      for (size_t i = 0; i < args.size(); ++i) PyTuple_SET_ITEM(t.get(), i, as_python(args[i]).release());
      PyRef kw = PyRef::steal(PyDict_New());
      for (auto& [k, v] : kwargs) PyDict_SetItemString(kw.get(), k.c_str(), as_python(v).get());
      PyRef mode = PyRef::steal(PyObject_Call(f, t.get(), kw.get()));
      if (!mode) raise_pending_python_error("torch.autocast(...)");
      return make_object(mode.get(), nullptr);
    }
    if (f == g_torch.no_grad || f == g_torch.enable_grad) {
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->flag = f == g_torch.enable_grad;
      return v;
    }
    // Contexts that change nothing the graph computes: a profiler range (the optimizers' step
    // opens one) and contextlib.nullcontext(enter_result).
    bool profiler_range = f == module_attr("torch.autograd.profiler", "record_function");
    if (profiler_range || (f == module_attr("contextlib", "nullcontext") && args.size() <= 1 && kwargs.empty())) {
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->name = "no-op";
      v->self = profiler_range || args.empty() ? make_const(Py_None) : args[0];
      return v;
    }
    // Types whose instances are immutable values (torch.finfo(dtype): the dtype's constants).
    static const std::unordered_set<std::string> foldable = {"int", "float", "bool", "str", "complex", "slice", "range", "Size", "device", "dtype",
                                                             "finfo", "iinfo"};
    std::string tn = reinterpret_cast<PyTypeObject*>(f)->tp_name;
    auto dot = tn.rfind('.');
    if (foldable.count(dot == std::string::npos ? tn : tn.substr(dot + 1)) && all_python_values(args, kwargs))
      return fold(f, args, kwargs);  // immutable values from Python values (torch.Size([a, b]))
    // set(), frozenset(), deque(), Counter(), defaultdict(int), OrderedDict() of Python values:
    // built for real, as trace-time values (see Interpreter::is_trace_value).
    if (f == module_attr("collections", "deque")) return make_deque(args, kwargs);
    if (f == module_attr("collections", "OrderedDict")) {  // a symbolic dict that remembers its type
      bool handled = false;
      VarPtr d = call_builtin(builtin("dict"), args, kwargs, &handled);
      if (!handled || d->kind != VarKind::kDict) unsupported("OrderedDict() arguments");
      d->obj = PyRef::borrow(f);
      return d;
    }
    if (f == module_attr("collections", "defaultdict") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kObject &&
        (args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyList_Type) || args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyLong_Type) ||
         args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyFloat_Type))) {
      // defaultdict(list/int/float): a symbolic dict whose missing keys read as a new [] / 0 / 0.0
      auto d = std::make_shared<Var>(VarKind::kDict);
      d->fresh = true;
      d->obj = PyRef::borrow(f);
      d->self = args[0];
      return d;
    }
    static const char* collections_types[] = {"defaultdict", "Counter"};
    bool value_container = f == reinterpret_cast<PyObject*>(&PySet_Type) || f == reinterpret_cast<PyObject*>(&PyFrozenSet_Type);
    for (const char* n : collections_types) value_container |= f == module_attr("collections", n);
    value_container |= f == module_attr("itertools", "count") || f == module_attr("itertools", "repeat");  // unbounded: pulled only by zip() and next()
    if (value_container) {
      auto plain_or_factory = [&](const VarPtr& a) {  // defaultdict(int) / defaultdict(list)
        PyObject* o = a->kind == VarKind::kObject ? a->obj.get() : nullptr;
        return all_python_values({a}, {}) || (o && (o == reinterpret_cast<PyObject*>(&PyLong_Type) || o == reinterpret_cast<PyObject*>(&PyList_Type) ||
                                                    o == reinterpret_cast<PyObject*>(&PyFloat_Type) || o == reinterpret_cast<PyObject*>(&PySet_Type)));
      };
      for (auto& a : args)
        if (!plain_or_factory(a)) unsupported(std::string("a ") + tn + " of values that are not Python constants");
      if (!all_python_values({}, kwargs)) unsupported(std::string("a ") + tn + " of values that are not Python constants");
      return fold(f, args, kwargs);
    }
    if (VarPtr r = fold_numpy_scalar_call(f, args, kwargs)) return r;  // np.float32(2.5)
    return construct(f, std::move(args), std::move(kwargs));
  }
  // Methods of trace-time values run for real: only the capture holds the object.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && is_trace_value(PyCFunction_GET_SELF(f))) {
    const std::string m = reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name;
    if (PyAnySet_Check(PyCFunction_GET_SELF(f)) && args.size() == 1 && kwargs.empty() &&
        (m == "add" || m == "discard" || m == "remove" || m == "__contains__")) {
      PyRef member = set_member(args[0]);  // objects and tensors by identity
      if (!member) unsupported("set." + m + "() of a " + kind_name(args[0]->kind) + " kiln cannot hash");
      PyRef r = PyRef::steal(PyObject_CallOneArg(f, member.get()));
      if (!r) raise_pending_python_error("set." + m);
      return from_python_value(r.get(), false);
    }
    if (!all_python_values(args, kwargs)) unsupported(py_repr(f).substr(0, 60) + " with values that are not Python constants");
    VarPtr r = fold(f, args, kwargs);
    // c.items(), d.keys(): live views of a trace-time value are trace-time values too.
    if (r->kind == VarKind::kObject && (PyDictKeys_Check(r->obj.get()) || PyDictValues_Check(r->obj.get()) || PyDictItems_Check(r->obj.get())))
      return trace_value(r->obj.get());
    return r;
  }
  // Pure builtin functions on constants, and read-only methods of dicts, lists and tuples.
  if (PyCFunction_Check(f) && all_const(args)) {
    std::string m = module_of(f);
    PyObject* self = PyCFunction_GET_SELF(f);
    static const std::unordered_set<std::string> readonly = {"get", "keys", "values", "items", "__getitem__",
                                                              "__contains__", "copy", "index", "count", "__len__"};
    bool readonly_method = self && (PyDict_Check(self) || PyList_Check(self) || PyTuple_Check(self)) &&
                           readonly.count(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name);
    if (m == "math" || m == "builtins" || m == "_operator" || m == "operator" || (self && is_constant_like(self)) || readonly_method)
      return fold(f, args, kwargs);
  }
  // ",".join(str(d) for d in x.shape): the generator's (or iterator's) items, as a tuple.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && PyUnicode_CheckExact(PyCFunction_GET_SELF(f)) && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == VarKind::kGenerator || args[0]->kind == VarKind::kIterator) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name, "join") == 0)
    args[0] = make_seq(VarKind::kTuple, unpack(args[0]));
  // Methods of immutable values (", ".join(names), "{}".format(...)) on copies of Python values.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && is_constant_like(PyCFunction_GET_SELF(f)) && !PyType_Check(PyCFunction_GET_SELF(f)) &&
      all_python_values(args, kwargs))
    return fold(f, args, kwargs);
  PyObject* call_attr = _PyType_Lookup(Py_TYPE(f), PyRef::steal(PyUnicode_FromString("__call__")).get());
  if (call_attr && PyFunction_Check(call_attr)) {
    args.insert(args.begin(), fn);
    return inline_function(call_attr, nullptr, std::move(args), std::move(kwargs), nullptr);
  }
  if (VarPtr r = fold_numpy_scalar_call(f, args, kwargs)) return r;
  // A weak reference called (nn.LSTM and nn.GRU read their parameters through weakref.ref):
  // its referent, reached from the reference's own source so guards and graph inputs follow it.
  if (PyWeakref_CheckRefExact(f) && args.empty() && kwargs.empty()) {
    PyObject* referent = PyWeakref_GetObject(f);  // borrowed; None once it died
    return fn->source ? wrap(referent, weak_referent_source(fn->source)) : wrap_unguarded(referent, "weakref()");
  }
  unsupported("call to " + py_repr(f).substr(0, 80) + " is not supported");
}

// A class attribute read during capture: the same object (functions, classes) or an equal
// constant must be found there next time.
void Interpreter::guard_class_attr(const SourcePtr& src, PyObject* found) {
  if (!found) return;
  guard(src, is_constant_like(found) ? GuardLeaf::kEquals : GuardLeaf::kId, found);
}

// nn.Module's i-th global hook dict, fetched from torch.nn.modules.module's namespace.
static SourcePtr global_hook_source(Py_ssize_t i) {
  static const char* names[] = {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                                "_global_backward_pre_hooks", "_global_forward_hooks_always_called"};
  // Never destroyed: it holds Python references and must outlive interpreter finalisation.
  static auto& sources = *new std::vector<SourcePtr>();
  if (sources.empty()) {
    PyRef mod = PyRef::steal(PyImport_ImportModule("torch.nn.modules.module"));
    for (const char* n : names) {
      PyRef key = PyRef::steal(PyUnicode_FromString(n));
      sources.push_back(mod ? global_source(PyModule_GetDict(mod.get()), key.get(), false) : nullptr);
    }
    PyErr_Clear();
  }
  return sources.at(static_cast<size_t>(i));
}

// guards that nn.Module's global hook dicts stay empty (a module call inlines forward without them).
void Interpreter::require_no_global_module_hooks() {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g_torch.global_hook_dicts); ++i) {
    if (PyDict_GET_SIZE(PyTuple_GET_ITEM(g_torch.global_hook_dicts, i)) > 0) unsupported("global nn.Module hooks are registered");
    guard(global_hook_source(i), GuardLeaf::kLen, nullptr, 0);
  }
}

VarPtr Interpreter::call_module(const VarPtr& mod, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  PyObject* m = mod->obj.get();
  // The forward is inlined without its hooks, so the graph is valid only while there are none:
  // guard that the module's hook dicts (and nn.Module's global ones) stay empty.
  for (const char* h : {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"}) {
    if (dict_nonempty(m, h)) unsupported(std::string("module ") + Py_TYPE(m)->tp_name + " has " + h + " (hooks are run eagerly)");
    if (mod->source) guard(attr_source(mod->source, PyRef::steal(PyUnicode_FromString(h)).get()), GuardLeaf::kLen, nullptr, 0);
  }
  require_no_global_module_hooks();
  PyRef fwd = PyRef::steal(PyObject_GetAttrString(m, "forward"));
  if (!fwd) unsupported("module without forward: " + take_python_error());
  if (mod->source) {  // the forward that was inlined: the class's, not replaced on the instance
    PyRef fname = PyRef::steal(PyUnicode_FromString("forward"));
    PyObject** dp = _PyObject_GetDictPtr(m);
    if (dp && *dp && !PyDict_Contains(*dp, fname.get())) guard(instance_dict_source(mod->source), GuardLeaf::kLacksKey, fname.get());
    guard_class_attr(type_lookup_source(mod->source, fname.get(), false), _PyType_Lookup(Py_TYPE(m), fname.get()));
  }
  if (PyMethod_Check(fwd.get()) && PyMethod_GET_SELF(fwd.get()) == m && PyFunction_Check(PyMethod_GET_FUNCTION(fwd.get()))) {
    args.insert(args.begin(), mod);
    return inline_function(PyMethod_GET_FUNCTION(fwd.get()), nullptr, std::move(args), std::move(kwargs), nullptr);
  }
  return call(wrap_unguarded(fwd.get(), "forward"), std::move(args), std::move(kwargs));
}

bool is_dynamo_generation_tag(PyObject* fn) {
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  return py_str(code->co_qualname) == "GenerationTracker.tag" && py_str(code->co_filename).find("/torch/_dynamo/") != std::string::npos;
}

VarPtr Interpreter::inline_function(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                    std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source) {
  if (func == module_attr("torch.autograd", "grad") || func == module_attr("torch.autograd", "backward"))
    unsupported(qualified_name(func) + "() runs autograd's engine: the graph ends before it");
  std::unique_ptr<Frame> f = bind_frame(func, nested, std::move(args), std::move(kwargs), func_source);
  if (uses_yield_value(f->code)) return lazy_generator(std::move(f));
  return run_inlined(*f);
}

VarPtr Interpreter::run_inlined(Frame& f) {
  frames_.push_back(&f);
  VarPtr r;
  try {
    r = run_frame(f);
  } catch (...) {
    frames_.pop_back();
    throw;
  }
  frames_.pop_back();
  return r;
}

std::unique_ptr<Interpreter::Frame> Interpreter::bind_frame(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                                            std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source) {
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(func ? PyFunction_GET_CODE(func) : nested->obj.get());
  if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) unsupported("coroutines are not entered");
  ++cap_.inlined_functions;
  auto owned = std::make_unique<Frame>();
  Frame& f = *owned;
  f.code = code;
  f.dc = &decoded_code(code);
  f.globals = func ? PyFunction_GET_GLOBALS(func) : nested->globals.get();
  f.builtins = frames_.front()->builtins;
  f.locals.resize(code->co_nlocalsplus);
  const int argc = code->co_argcount, kwonly = code->co_kwonlyargcount, posonly = code->co_posonlyargcount;
  const bool has_varargs = code->co_flags & CO_VARARGS, has_varkw = code->co_flags & CO_VARKEYWORDS;
  auto name_of = [&](int i) { return py_str(PyTuple_GET_ITEM(code->co_localsplusnames, i)); };
  std::string qual = py_str(code->co_qualname);
  // positional
  size_t npos = std::min(args.size(), static_cast<size_t>(argc));
  for (size_t i = 0; i < npos; ++i) f.locals[i] = args[i];
  std::vector<VarPtr> extra(args.begin() + static_cast<long>(npos), args.end());
  if (!extra.empty() && !has_varargs) unsupported(qual + "() got too many positional arguments");
  int slot = argc + kwonly;
  if (has_varargs) f.locals[slot++] = make_seq(VarKind::kTuple, extra);
  VarPtr varkw;
  if (has_varkw) { varkw = std::make_shared<Var>(VarKind::kDict); f.locals[slot] = varkw; }
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = posonly; i < argc + kwonly; ++i)
      if (name_of(i) == k) { found = i; break; }
    if (found >= 0) {
      if (f.locals[found]) unsupported(qual + "() got multiple values for argument '" + k + "'");
      f.locals[found] = v;
    } else if (varkw) {
      varkw->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
      varkw->items.push_back(v);
    } else {
      unsupported(qual + "() got an unexpected keyword argument '" + k + "'");
    }
  }
  // defaults
  std::vector<VarPtr> defaults;
  if (func) {
    PyObject* d = PyFunction_GET_DEFAULTS(func);
    if (d) for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d); ++i) defaults.push_back(wrap_unguarded(PyTuple_GET_ITEM(d, i), "default"));
  } else if (nested->self) {
    defaults = unpack(nested->self);
  }
  PyObject* kwdefaults = func ? PyFunction_GET_KW_DEFAULTS(func) : nested->kwdefaults.get();
  for (int i = 0; i < argc; ++i) {
    if (f.locals[i]) continue;
    int di = i - (argc - static_cast<int>(defaults.size()));
    if (di < 0) unsupported(qual + "() missing required argument '" + name_of(i) + "'");
    f.locals[i] = defaults[di];
  }
  for (int i = argc; i < argc + kwonly; ++i) {
    if (f.locals[i]) continue;
    PyObject* dv = kwdefaults ? PyDict_GetItem(kwdefaults, PyTuple_GET_ITEM(code->co_localsplusnames, i)) : nullptr;
    if (!dv) unsupported(qual + "() missing keyword-only argument '" + name_of(i) + "'");
    f.locals[i] = wrap_unguarded(dv, "kwdefault");
  }
  // closure cells occupy the last co_nfreevars slots
  int nfree = code->co_nfreevars;
  int first_free = code->co_nlocalsplus - nfree;
  if (nfree) {
    if (func) {
      PyObject* cl = PyFunction_GET_CLOSURE(func);
      for (int i = 0; i < nfree; ++i) {
        auto cell = std::make_shared<Var>(VarKind::kCell);
        PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(cl, i));
        SourcePtr src = func_source ? closure_cell_source(func_source, i, name_of(first_free + i)) : nullptr;
        if (contents) cell->items.push_back(src ? wrap(contents, src) : wrap_unguarded(contents, "closure"));
        cell->source = src ? src : constant_source(PyTuple_GET_ITEM(cl, i), "cell");
        f.locals[first_free + i] = cell;
      }
    } else {
      for (int i = 0; i < nfree && i < static_cast<int>(nested->items.size()); ++i) f.locals[first_free + i] = nested->items[i];
    }
  }
  return owned;
}

}  // namespace kiln::frontend
