// Calls (inlining, torch operators, builtins, modules), attribute access, operators and
// iteration for the symbolic interpreter.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter.h"
#include "frontend/interpreter_frame.h"
#include "frontend/frame_dispatch.h"
#include "frontend/tensor_probe.h"
#include "frontend/torch_types.h"

#include <structmember.h>

namespace kiln::frontend {


static PyObject* op_fn(const char* name) {  // borrowed, kept alive by the operator module
  static std::unordered_map<std::string, PyObject*> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  PyObject* f = PyObject_GetAttrString(g_torch.operator_mod, name);
  cache[name] = f;  // keep the reference
  return f;
}

static PyObject* builtin(const char* name) {
  static std::unordered_map<std::string, PyObject*> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  PyObject* f = PyObject_GetAttrString(g_torch.builtins_mod, name);
  if (!f) PyErr_Clear();
  cache[name] = f;
  return f;
}

static PyObject* sequence_iter() {
  static PyObject* f = [] {
    PyObject* m = PyImport_ImportModule("collections.abc");
    PyObject* seq = m ? PyObject_GetAttrString(m, "Sequence") : nullptr;
    PyObject* r = seq ? _PyType_Lookup(reinterpret_cast<PyTypeObject*>(seq), PyRef::steal(PyUnicode_FromString("__iter__")).get()) : nullptr;
    Py_XINCREF(r);
    Py_XDECREF(seq);
    Py_XDECREF(m);
    if (!r) PyErr_Clear();
    return r;
  }();
  return f;
}

static PyObject* islice_fn() {
  static PyObject* f = [] {
    PyObject* m = PyImport_ImportModule("itertools");
    PyObject* r = m ? PyObject_GetAttrString(m, "islice") : nullptr;
    Py_XDECREF(m);
    if (!r) PyErr_Clear();
    return r;
  }();
  return f;
}

static std::string err_text() {
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
  PyErr_NormalizeException(&t, &v, &tb);
  std::string s = t ? reinterpret_cast<PyTypeObject*>(t)->tp_name : "error";
  if (v) s += ": " + py_str(v);
  Py_XDECREF(t); Py_XDECREF(v); Py_XDECREF(tb);
  return s;
}

static std::string module_of(PyObject* fn) {
  PyRef m = PyRef::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!m || !PyUnicode_Check(m.get())) { PyErr_Clear(); return ""; }
  return py_str(m.get());
}

static bool starts_with(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

// A torch callable recorded as one graph operation rather than inlined.
static bool is_torch_op(PyObject* fn) {
  if (PyCFunction_Check(fn) || Py_IS_TYPE(fn, &PyMethodDescr_Type) || Py_IS_TYPE(fn, &PyWrapperDescr_Type)) {
    std::string m = module_of(fn);
    if (starts_with(m, "torch")) return true;
    if (PyCFunction_Check(fn)) {
      PyObject* self = PyCFunction_GET_SELF(fn);
      if (self && PyModule_Check(self) && starts_with(PyModule_GetName(self) ? PyModule_GetName(self) : "", "torch")) return true;
      if (self && PyErr_Occurred()) PyErr_Clear();
    }
    if (Py_IS_TYPE(fn, &PyMethodDescr_Type) &&
        PyType_IsSubtype(reinterpret_cast<PyMethodDescrObject*>(fn)->d_common.d_type, reinterpret_cast<PyTypeObject*>(g_torch.tensor_type)))
      return true;
    // Tensor methods looked up on torch._C.TensorBase
    return false;
  }
  if (PyFunction_Check(fn)) {
    static const std::unordered_set<std::string> op_modules = {
        "torch", "torch.functional", "torch.nn.functional", "torch._tensor", "torch.nn.init", "torch.random",
        "torch.autograd.grad_mode", "torch._jit_internal", "torch.overrides", "torch.special", "torch.linalg", "torch.fft"};
    std::string m = module_of(fn);
    return op_modules.count(m) || starts_with(m, "torch._refs") || starts_with(m, "torch._decomp") || starts_with(m, "torch._prims");
  }
  return false;
}

// State queries libraries make to pick a trace-friendly path. Under capture kiln answers like a
// tracing compiler: "compiling" is true, scripting/tracing/exporting false. Ellipsis means
// "evaluate now" (a query whose answer is guarded global state or fixed for the process).
static PyObject* torch_query_answer(PyObject* fn) {
  if (!PyFunction_Check(fn) && !PyCFunction_Check(fn)) return nullptr;
  std::string m = module_of(fn);
  if (!starts_with(m, "torch")) return nullptr;
  PyRef qn = PyRef::steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (!qn) { PyErr_Clear(); return nullptr; }
  static const std::unordered_map<std::string, PyObject*> answers = {
      {"torch.compiler.is_compiling", Py_True}, {"torch.compiler.is_dynamo_compiling", Py_True},
      {"torch._dynamo.external_utils.is_compiling", Py_True}, {"torch._utils.is_compiling", Py_True},
      {"torch.compiler.is_exporting", Py_False}, {"torch._jit_internal.is_scripting", Py_False},
      {"torch.jit._trace.is_tracing", Py_False}, {"torch._C._get_tracing_state", Py_None},
      {"torch.cuda.graphs.is_current_stream_capturing", Py_Ellipsis}, {"torch.cuda.is_available", Py_Ellipsis},
      {"torch.cuda.device_count", Py_Ellipsis}, {"torch.is_grad_enabled", Py_Ellipsis},
      {"torch.get_default_dtype", Py_Ellipsis}, {"torch.is_autocast_enabled", Py_Ellipsis},
      {"torch.are_deterministic_algorithms_enabled", Py_Ellipsis}, {"torch.is_inference_mode_enabled", Py_Ellipsis}};
  auto it = answers.find(m + "." + py_str(qn.get()));
  return it == answers.end() ? nullptr : it->second;
}

static bool is_module_instance(PyObject* o) {
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g_torch.module_type));
}

static bool dict_nonempty(PyObject* owner, const char* attr_name) {
  PyObject** dp = _PyObject_GetDictPtr(owner);
  if (!dp || !*dp) return false;
  PyObject* d = PyDict_GetItemString(*dp, attr_name);
  return d && PyDict_Check(d) && PyDict_GET_SIZE(d) > 0;
}

// ---------------------------------------------------------------- helpers on values

PyObject* Interpreter::python_type_of(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor: return v->obj ? v->obj.get() : g_torch.tensor_type;
    case VarKind::kConst:
    case VarKind::kObject: return reinterpret_cast<PyObject*>(Py_TYPE(v->obj.get()));
    case VarKind::kTuple: return v->obj ? v->obj.get() : reinterpret_cast<PyObject*>(&PyTuple_Type);
    case VarKind::kList: return reinterpret_cast<PyObject*>(&PyList_Type);
    case VarKind::kDict: return reinterpret_cast<PyObject*>(&PyDict_Type);
    case VarKind::kNestedFunction: return reinterpret_cast<PyObject*>(&PyFunction_Type);
    case VarKind::kNewObject: return v->obj.get();
    default: unsupported(std::string("type() of a ") + kind_name(v->kind));
  }
}

bool Interpreter::truthy(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kConst:
    case VarKind::kObject: {
      int r = PyObject_IsTrue(v->obj.get());
      if (r < 0) unsupported("truth value failed: " + err_text());
      return r == 1;
    }
    case VarKind::kTuple: case VarKind::kList: case VarKind::kDict: return !v->items.empty();
    case VarKind::kTensor: unsupported("data-dependent branch: the truth value of a tensor depends on its data");
    case VarKind::kNestedFunction: case VarKind::kBoundMethod: case VarKind::kTensorMethod: return true;
    case VarKind::kNewObject: {
      PyTypeObject* t = reinterpret_cast<PyTypeObject*>(v->obj.get());
      for (const char* dunder : {"__bool__", "__len__"}) {
        PyObject* fn = _PyType_Lookup(t, PyRef::steal(PyUnicode_FromString(dunder)).get());
        if (fn && PyFunction_Check(fn)) return truthy(inline_function(fn, nullptr, {v}, {}, nullptr));
      }
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
  if (a_py && b_py) return a->obj.get() == b->obj.get();
  if (a->is_tensor() && b->is_tensor()) return a->node == b->node;
  // A tensor, container or function made during capture is never a pre-existing constant.
  if (a_py || b_py) {
    const VarPtr& other = a_py ? b : a;
    if (other->kind == VarKind::kTensor || other->kind == VarKind::kTuple || other->kind == VarKind::kList ||
        other->kind == VarKind::kDict || other->kind == VarKind::kNestedFunction || other->kind == VarKind::kNewObject)
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
    case VarKind::kIterator: {
      std::vector<VarPtr> out(v->items.begin() + static_cast<long>(v->pos), v->items.end());
      v->pos = v->items.size();
      return out;
    }
    case VarKind::kConst: {
      PyRef seq = PyRef::steal(PySequence_List(v->obj.get()));
      if (!seq) unsupported("cannot iterate: " + err_text());
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
      if (PyAnySet_Check(v->obj.get())) {  // sets of constants (see BUILD_SET)
        PyRef seq = PyRef::steal(PySequence_List(v->obj.get()));
        std::vector<VarPtr> out;
        for (Py_ssize_t i = 0; seq && i < PyList_GET_SIZE(seq.get()); ++i) out.push_back(make_const(PyList_GET_ITEM(seq.get(), i)));
        return out;
      }
      PyObject* it = _PyType_Lookup(Py_TYPE(v->obj.get()), PyRef::steal(PyUnicode_FromString("__iter__")).get());
      if (it && it == sequence_iter()) return iterate_sequence(v);
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
  if (!r) unsupported("constant evaluation raised " + err_text());
  if (probe_is_tensor(r.get())) unsupported("constant evaluation produced a tensor");
  return from_python_value(r.get(), Py_REFCNT(r.get()) > 1);
}

// A Python value as a symbolic one: constants stay constants; a list or dict becomes a
// symbolic container of wrapped items (so it can be iterated, indexed and, when it is a new
// object nobody else holds, mutated); anything else is an object.
VarPtr Interpreter::from_python_value(PyObject* r, bool shared) {
  if (is_constant_like(r)) return make_const(r);
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

VarPtr Interpreter::call(const VarPtr& fn, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  switch (fn->kind) {
    case VarKind::kTensorMethod: {
      std::vector<VarPtr> full{fn->self};
      full.insert(full.end(), args.begin(), args.end());
      return record_op(graph::Op::kCallMethod, nullptr, fn->name, full, kwargs);
    }
    case VarKind::kContainerMethod: return call_container_method(fn, args, kwargs);
    case VarKind::kBoundMethod: {
      args.insert(args.begin(), fn->self);
      if (PyFunction_Check(fn->obj.get())) {
        if (is_torch_op(fn->obj.get())) return record_op(graph::Op::kCallFunction, fn->obj.get(), "", args, kwargs);
        return inline_function(fn->obj.get(), nullptr, std::move(args), std::move(kwargs), nullptr);
      }
      unsupported("call of a bound " + py_repr(fn->obj.get()));
    }
    case VarKind::kNestedFunction: return inline_function(nullptr, fn, std::move(args), std::move(kwargs), nullptr);
    case VarKind::kGradModeExit: {
      record_grad_mode(fn->flag);
      return make_const(Py_None);
    }
    case VarKind::kConst:
    case VarKind::kObject: break;
    default: unsupported(std::string("call of a ") + kind_name(fn->kind));
  }
  PyObject* f = fn->obj.get();
  if (PyObject* inner = unwrap_compiled_function(f))  // a kiln.compile'd callable: capture through it
    return call(wrap_unguarded(inner, "compiled"), std::move(args), std::move(kwargs));
  bool handled = false;
  VarPtr r = call_builtin(f, args, kwargs, &handled);
  if (handled) return r;
  if ((Py_IS_TYPE(f, &PyWrapperDescr_Type) || Py_IS_TYPE(f, &PyMethodDescr_Type)) && !args.empty() &&
      args[0]->kind == VarKind::kNewObject) {  // e.g. object.__setattr__(self, name, value)
    PyRef nm = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
    VarPtr self = args[0];
    args.erase(args.begin());
    VarPtr m = new_object_method(self, py_str(nm.get()));
    return call_container_method(m, args, kwargs);
  }
  if (PyObject* answer = torch_query_answer(f)) return answer == Py_Ellipsis ? fold(f, args, kwargs) : make_const(answer);
  if (is_module_instance(f)) return call_module(fn, std::move(args), std::move(kwargs));
  if (is_torch_op(f)) return record_op(graph::Op::kCallFunction, f, "", args, kwargs);
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
  if (PyType_Check(f)) {
    if (f == g_torch.no_grad || f == g_torch.enable_grad) {
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->flag = f == g_torch.enable_grad;
      return v;
    }
    static const std::unordered_set<std::string> foldable = {"int", "float", "bool", "str", "complex", "slice", "range", "Size", "device", "dtype"};
    std::string tn = reinterpret_cast<PyTypeObject*>(f)->tp_name;
    auto dot = tn.rfind('.');
    if (foldable.count(dot == std::string::npos ? tn : tn.substr(dot + 1)) && all_const(args)) {
      bool kw_const = true;
      for (auto& kv : kwargs) kw_const &= kv.second->is_const();
      if (kw_const) return fold(f, args, kwargs);
    }
    return construct(f, std::move(args), std::move(kwargs));
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
  PyObject* call_attr = _PyType_Lookup(Py_TYPE(f), PyRef::steal(PyUnicode_FromString("__call__")).get());
  if (call_attr && PyFunction_Check(call_attr)) {
    args.insert(args.begin(), fn);
    return inline_function(call_attr, nullptr, std::move(args), std::move(kwargs), nullptr);
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

VarPtr Interpreter::call_module(const VarPtr& mod, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  PyObject* m = mod->obj.get();
  // The forward is inlined without its hooks, so the graph is valid only while there are none:
  // guard that the module's hook dicts (and nn.Module's global ones) stay empty.
  for (const char* h : {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"}) {
    if (dict_nonempty(m, h)) unsupported(std::string("module ") + Py_TYPE(m)->tp_name + " has " + h + " (hooks are run eagerly)");
    if (mod->source) guard(attr_source(mod->source, PyRef::steal(PyUnicode_FromString(h)).get()), GuardLeaf::kLen, nullptr, 0);
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g_torch.global_hook_dicts); ++i) {
    if (PyDict_GET_SIZE(PyTuple_GET_ITEM(g_torch.global_hook_dicts, i)) > 0) unsupported("global nn.Module hooks are registered");
    guard(global_hook_source(i), GuardLeaf::kLen, nullptr, 0);
  }
  PyRef fwd = PyRef::steal(PyObject_GetAttrString(m, "forward"));
  if (!fwd) unsupported("module without forward: " + err_text());
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

VarPtr Interpreter::inline_function(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                    std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source) {
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(func ? PyFunction_GET_CODE(func) : nested->obj.get());
  if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) unsupported("coroutines are not entered");
  ++cap_.inlined_functions;
  Frame f;
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

// ---------------------------------------------------------------- builtins

VarPtr Interpreter::call_builtin(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, bool* handled) {
  *handled = true;
  auto is = [&](const char* n) { return f == builtin(n); };
  auto need = [&](size_t n) { if (args.size() != n) unsupported("unexpected argument count for " + py_repr(f)); };
  if (is("len")) {
    need(1);
    const VarPtr& v = args[0];
    if (v->is_tensor()) {
      PyRef shape = PyRef::steal(PyObject_GetAttrString(v->fake.get(), "shape"));
      if (PyTuple_GET_SIZE(shape.get()) == 0) unsupported("len() of a 0-d tensor");
      return make_const(PyTuple_GET_ITEM(shape.get(), 0));
    }
    if (v->kind == VarKind::kTuple || v->kind == VarKind::kList || v->kind == VarKind::kDict)
      return make_const(PyRef::steal(PyLong_FromSize_t(v->items.size())).get());
    if (v->kind == VarKind::kObject || v->kind == VarKind::kNewObject) {
      PyTypeObject* t = v->kind == VarKind::kObject ? Py_TYPE(v->obj.get()) : reinterpret_cast<PyTypeObject*>(v->obj.get());
      PyObject* l = _PyType_Lookup(t, PyRef::steal(PyUnicode_FromString("__len__")).get());
      if (l && PyFunction_Check(l)) return inline_function(l, nullptr, {v}, {}, nullptr);
      if (v->kind == VarKind::kNewObject && v->self) return make_const(PyRef::steal(PyLong_FromSize_t(v->self->items.size())).get());
    }
    return fold(f, args, kwargs);
  }
  if (is("isinstance") || is("issubclass")) {
    need(2);
    PyRef cls = as_python(args[1]);
    if (!cls) unsupported("isinstance() with a non-constant class");
    PyObject* t = is("isinstance") ? python_type_of(args[0]) : as_python(args[0]).get();
    if (!t) unsupported("issubclass() of a non-constant");
    int r = PyObject_IsSubclass(t, cls.get());
    if (r < 0) unsupported(err_text());
    return make_const(r ? Py_True : Py_False);
  }
  if (is("hasattr") || is("getattr")) {
    if (args.size() < 2 || !args[1]->is_const() || !PyUnicode_Check(args[1]->obj.get())) unsupported("getattr with a non-constant name");
    PyObject* name = args[1]->obj.get();
    const VarPtr& o = args[0];
    bool present = true;
    if (o->kind == VarKind::kObject || o->kind == VarKind::kConst) present = PyObject_HasAttr(o->obj.get(), name);
    else if (o->kind == VarKind::kNewObject) {
      present = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o->obj.get()), name) != nullptr;
      for (auto& k : o->keys) present |= PyUnicode_Compare(k.get(), name) == 0;
    }
    else if (o->is_tensor()) present = PyObject_HasAttr(o->fake.get(), name);
    if (is("hasattr")) {
      if (o->kind != VarKind::kObject && o->kind != VarKind::kConst && o->kind != VarKind::kNewObject && !o->is_tensor())
        unsupported("hasattr() on a " + std::string(kind_name(o->kind)));
      return make_const(present ? Py_True : Py_False);
    }
    if (!present) {
      if (args.size() == 3) return args[2];
      unsupported("getattr of a missing attribute " + py_str(name));
    }
    return get_attr(o, name);
  }
  if (is("iter")) { need(1); return make_iterator(args[0]); }
  if (is("next")) {
    VarPtr it = args.at(0);
    if (it->kind != VarKind::kIterator) it = make_iterator(it);
    if (it->pos < it->items.size()) return it->items[it->pos++];
    if (args.size() == 2) return args[1];
    unsupported("next() on an exhausted iterator (StopIteration)");
  }
  if (is("list") || is("tuple")) {
    VarKind k = is("list") ? VarKind::kList : VarKind::kTuple;
    if (args.empty()) return make_seq(k, {});
    need(1);
    return make_seq(k, unpack(args[0]));
  }
  if (is("dict")) {
    auto d = std::make_shared<Var>(VarKind::kDict);
    if (args.size() == 1) {
      if (args[0]->kind != VarKind::kDict) unsupported("dict() of a non-dict");
      d->keys = args[0]->keys;
      d->items = args[0]->items;
    } else if (!args.empty()) unsupported("dict() with several arguments");
    for (auto& [k, v] : kwargs) { d->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str()))); d->items.push_back(v); }
    return d;
  }
  if (is("enumerate")) {
    long start = 0;
    if (args.size() == 2 && args[1]->is_const()) start = PyLong_AsLong(args[1]->obj.get());
    for (auto& kv : kwargs) if (kv.first == "start" && kv.second->is_const()) start = PyLong_AsLong(kv.second->obj.get());
    auto items = unpack(args.at(0));
    std::vector<VarPtr> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(make_seq(VarKind::kTuple, {make_const(PyRef::steal(PyLong_FromLong(start + static_cast<long>(i))).get()), items[i]}));
    return make_seq(VarKind::kList, out);
  }
  if (is("zip")) {
    std::vector<std::vector<VarPtr>> cols;
    size_t n = SIZE_MAX;
    for (auto& a : args) { cols.push_back(unpack(a)); n = std::min(n, cols.back().size()); }
    if (args.empty()) n = 0;
    std::vector<VarPtr> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<VarPtr> row;
      for (auto& c : cols) row.push_back(c[i]);
      out.push_back(make_seq(VarKind::kTuple, row));
    }
    return make_seq(VarKind::kList, out);
  }
  if (f == islice_fn()) {
    if (args.size() < 2 || args.size() > 4) unsupported("islice() argument count");
    for (size_t i = 1; i < args.size(); ++i)
      if (!args[i]->is_const()) unsupported("islice() with non-constant bounds");
    auto items = unpack(args[0]);
    PyRef sl = PyRef::steal(args.size() == 2 ? PySlice_New(Py_None, args[1]->obj.get(), nullptr)
                                             : PySlice_New(args[1]->obj.get(), args[2]->obj.get(), args.size() == 4 ? args[3]->obj.get() : nullptr));
    VarPtr r = subscript(make_seq(VarKind::kList, items), make_const(sl.get()));
    return make_iterator(r);
  }
  if (is("reversed")) {
    need(1);
    auto items = unpack(args[0]);
    std::reverse(items.begin(), items.end());
    return make_seq(VarKind::kList, items);
  }
  if (is("map")) {
    if (args.size() < 2) unsupported("map() with one argument");
    std::vector<std::vector<VarPtr>> cols;
    size_t n = SIZE_MAX;
    for (size_t i = 1; i < args.size(); ++i) { cols.push_back(unpack(args[i])); n = std::min(n, cols.back().size()); }
    std::vector<VarPtr> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<VarPtr> row;
      for (auto& c : cols) row.push_back(c[i]);
      out.push_back(call(args[0], row, {}));
    }
    return make_seq(VarKind::kList, out);
  }
  if (is("type") && args.size() == 1) return make_object(python_type_of(args[0]), nullptr);
  if (is("callable") && args.size() == 1) {
    const VarPtr& v = args[0];
    if (v->kind == VarKind::kObject || v->kind == VarKind::kConst) return make_const(PyCallable_Check(v->obj.get()) ? Py_True : Py_False);
    bool c = v->kind == VarKind::kNestedFunction || v->kind == VarKind::kBoundMethod || v->kind == VarKind::kTensorMethod;
    return make_const(c ? Py_True : Py_False);
  }
  if (is("sum")) {
    auto items = unpack(args.at(0));
    VarPtr acc = args.size() > 1 ? args[1] : make_const(PyRef::steal(PyLong_FromLong(0)).get());
    for (auto& it : items) acc = binary("NB_ADD", acc, it);
    return acc;
  }
  if (is("min") || is("max") || is("any") || is("all") || is("sorted") || is("abs") || is("int") || is("float") ||
      is("bool") || is("str") || is("round") || is("divmod") || is("pow")) {
    std::vector<VarPtr> flat = args;
    if (args.size() == 1 && !args[0]->is_tensor() && !is("abs") && !is("int") && !is("float") && !is("bool") && !is("str") && !is("round"))
      flat = unpack(args[0]);
    for (auto& v : flat)
      if (v->is_tensor()) {
        if (is("abs")) return unary(op_fn("abs"), v);
        if (is("pow") && args.size() == 2) return binary("NB_POWER", args[0], args[1]);
        unsupported(py_str(PyObject_GetAttrString(f, "__name__")) + "() of a tensor depends on its data");
      }
    if (flat.size() != args.size()) return fold(f, {make_seq(VarKind::kTuple, flat)}, kwargs);
    return fold(f, args, kwargs);
  }
  if (is("print")) unsupported("print() is a side effect kiln does not replay yet");
  if (is("super")) {
    auto sup = std::make_shared<Var>(VarKind::kSuper);
    if (args.size() == 2) {
      if (!args[0]->is_const() && args[0]->kind != VarKind::kObject) unsupported("super() with a non-constant class");
      sup->obj = args[0]->obj;
      sup->self = args[1];
    } else if (args.empty()) {  // zero-argument form: the __class__ cell and the first argument
      Frame& fr = *frames_.back();
      for (int i = 0; i < fr.code->co_nlocalsplus; ++i)
        if (py_str(PyTuple_GET_ITEM(fr.code->co_localsplusnames, i)) == "__class__") {
          VarPtr cell = fr.locals[i];
          if (cell && cell->kind == VarKind::kCell && !cell->items.empty()) sup->obj = cell->items[0]->obj;
        }
      VarPtr first = fr.locals.empty() ? nullptr : fr.locals[0];
      if (first && first->kind == VarKind::kCell) first = first->items.empty() ? nullptr : first->items[0];
      if (!sup->obj || !first) unsupported("super() outside a method");
      sup->self = first;
    } else {
      unsupported("super() with one argument");
    }
    return sup;
  }
  if (is("id")) unsupported("id() of a traced value");
  if (f == op_fn("getitem")) { need(2); return subscript(args[0], args[1]); }
  // operator.* with tensors: record; otherwise fold.
  if (module_of(f) == "_operator" || module_of(f) == "operator") {
    bool any_tensor = false;
    for (auto& a : args) any_tensor |= a->is_tensor();
    if (any_tensor) return record_op(graph::Op::kCallFunction, f, "", args, kwargs);
    return fold(f, args, kwargs);
  }
  *handled = false;
  return nullptr;
}

VarPtr Interpreter::call_container_method(const VarPtr& m, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  VarPtr self = m->self;
  const std::string& name = m->name;
  if (self->kind == VarKind::kNewObject) {  // builtin methods of object / dict on a new instance
    if (name == "__setattr__") {
      if (args.size() != 2 || !args[0]->is_const()) unsupported("__setattr__ with a non-constant name");
      set_new_object_attr(self, args[0]->obj.get(), args[1]);
      return make_const(Py_None);
    }
    if (name == "__getattribute__" || name == "__getattr__") {
      if (args.size() != 1 || !args[0]->is_const()) unsupported("__getattribute__ with a non-constant name");
      return new_object_attr(self, args[0]->obj.get());
    }
    if (name == "__init__" && (args.empty() || self->self) && kwargs.empty()) {
      if (!args.empty()) {  // dict.__init__(self, mapping)
        auto upd = std::make_shared<Var>(VarKind::kContainerMethod);
        upd->self = self->self;
        upd->name = "update";
        return call_container_method(upd, args, kwargs);
      }
      return make_const(Py_None);
    }
    if (self->self) {  // dict contents
      auto dm = std::make_shared<Var>(VarKind::kContainerMethod);
      dm->self = self->self;
      dm->name = name == "__delitem__" ? "pop" : name == "__len__" ? "__len__" : name;
      if (name == "__len__") return make_const(PyRef::steal(PyLong_FromSize_t(self->self->items.size())).get());
      if (name == "__iter__") return make_iterator(self->self);
      return call_container_method(dm, args, kwargs);
    }
    unsupported(std::string(reinterpret_cast<PyTypeObject*>(self->obj.get())->tp_name) + "." + name + " on a new object");
  }
  auto key_index = [&](PyObject* key) -> int {
    for (size_t i = 0; i < self->keys.size(); ++i) {
      int r = PyObject_RichCompareBool(self->keys[i].get(), key, Py_EQ);
      if (r < 0) PyErr_Clear();
      if (r == 1) return static_cast<int>(i);
    }
    return -1;
  };
  auto mutate = [&]() { if (self->source && !self->fresh) unsupported("mutation of an input " + std::string(kind_name(self->kind)) + " (" + name + ") is a side effect"); };
  if (self->kind == VarKind::kDict) {
    if (name == "items" || name == "keys" || name == "values") {
      std::vector<VarPtr> out;
      for (size_t i = 0; i < self->keys.size(); ++i) {
        VarPtr k = make_const(self->keys[i].get());
        out.push_back(name == "items" ? make_seq(VarKind::kTuple, {k, self->items[i]}) : name == "keys" ? k : self->items[i]);
      }
      return make_seq(VarKind::kList, out);
    }
    if (name == "get" || name == "__getitem__" || name == "pop" || name == "setdefault") {
      if (args.empty() || !args[0]->is_const()) unsupported("dict." + name + " with a non-constant key");
      int i = key_index(args[0]->obj.get());
      if (name == "pop" && i >= 0) {
        mutate();
        VarPtr v = self->items[i];
        self->keys.erase(self->keys.begin() + i);
        self->items.erase(self->items.begin() + i);
        return v;
      }
      if (i >= 0) return self->items[i];
      if (name == "setdefault") {
        mutate();
        self->keys.push_back(args[0]->obj);
        self->items.push_back(args.size() > 1 ? args[1] : make_const(Py_None));
        return self->items.back();
      }
      if (args.size() > 1) return args[1];
      if (name == "get") return make_const(Py_None);
      unsupported("KeyError: " + py_repr(args[0]->obj.get()));
    }
    if (name == "__setitem__") {
      mutate();
      if (!args[0]->is_const()) unsupported("dict key is not a constant");
      int i = key_index(args[0]->obj.get());
      if (i >= 0) self->items[i] = args[1];
      else { self->keys.push_back(args[0]->obj); self->items.push_back(args[1]); }
      return make_const(Py_None);
    }
    if (name == "update") {
      mutate();
      for (auto& a : args) {
        if (a->kind != VarKind::kDict) unsupported("dict.update with a non-dict");
        for (size_t i = 0; i < a->keys.size(); ++i) {
          std::vector<VarPtr> kv{make_const(a->keys[i].get()), a->items[i]};
          auto setm = std::make_shared<Var>(VarKind::kContainerMethod);
          setm->self = self; setm->name = "__setitem__";
          std::vector<std::pair<std::string, VarPtr>> none;
          call_container_method(setm, kv, none);
        }
      }
      for (auto& [k, v] : kwargs) {
        std::vector<VarPtr> kv{make_const(PyRef::steal(PyUnicode_FromString(k.c_str())).get()), v};
        auto setm = std::make_shared<Var>(VarKind::kContainerMethod);
        setm->self = self; setm->name = "__setitem__";
        std::vector<std::pair<std::string, VarPtr>> none;
        call_container_method(setm, kv, none);
      }
      return make_const(Py_None);
    }
    if (name == "copy") { auto d = std::make_shared<Var>(VarKind::kDict); d->keys = self->keys; d->items = self->items; return d; }
    if (name == "__contains__") return make_const(key_index(args.at(0)->obj.get()) >= 0 ? Py_True : Py_False);
  }
  if (self->kind == VarKind::kList || self->kind == VarKind::kTuple) {
    if (self->kind == VarKind::kList) {
      if (name == "append") { mutate(); self->items.push_back(args.at(0)); return make_const(Py_None); }
      if (name == "extend") { mutate(); auto it = unpack(args.at(0)); self->items.insert(self->items.end(), it.begin(), it.end()); return make_const(Py_None); }
      if (name == "insert") {
        mutate();
        long i = PyLong_AsLong(args.at(0)->obj.get());
        long n = static_cast<long>(self->items.size());
        if (i < 0) i = std::max(0L, i + n);
        i = std::min(i, n);
        self->items.insert(self->items.begin() + i, args.at(1));
        return make_const(Py_None);
      }
      if (name == "pop") {
        mutate();
        if (self->items.empty()) unsupported("pop from empty list");
        long n = static_cast<long>(self->items.size());
        long i = args.empty() ? n - 1 : PyLong_AsLong(args[0]->obj.get());
        if (i < 0) i += n;
        if (i < 0 || i >= n) unsupported("pop index out of range");
        VarPtr v = self->items[i];
        self->items.erase(self->items.begin() + i);
        return v;
      }
      if (name == "reverse") { mutate(); std::reverse(self->items.begin(), self->items.end()); return make_const(Py_None); }
      if (name == "clear") { mutate(); self->items.clear(); return make_const(Py_None); }
      if (name == "copy") return make_seq(VarKind::kList, self->items);
    }
    if (name == "index" || name == "count") {
      bool known;
      long count = 0, first = -1;
      for (size_t i = 0; i < self->items.size(); ++i) {
        bool eq;
        if (self->items[i]->is_const() && args.at(0)->is_const()) {
          int r = PyObject_RichCompareBool(self->items[i]->obj.get(), args[0]->obj.get(), Py_EQ);
          if (r < 0) { PyErr_Clear(); r = 0; }
          eq = r == 1;
        } else {
          eq = same_object(self->items[i], args[0], &known);
          if (!known) unsupported("list." + name + " of a value kiln cannot compare");
        }
        if (eq) { ++count; if (first < 0) first = static_cast<long>(i); }
      }
      if (name == "count") return make_const(PyRef::steal(PyLong_FromLong(count)).get());
      if (first < 0) unsupported("ValueError: value not in list");
      return make_const(PyRef::steal(PyLong_FromLong(first)).get());
    }
  }
  unsupported(std::string(kind_name(self->kind)) + "." + name + "() is not supported");
}

// ---------------------------------------------------------------- attributes

VarPtr Interpreter::get_attr(const VarPtr& obj, PyObject* name) {
  std::string n = py_str(name);
  switch (obj->kind) {
    case VarKind::kTensor: {
      if (n == "device") return make_const(obj->device.get());
      if (n == "is_cuda" || n == "is_cpu") {
        PyRef t = PyRef::steal(PyObject_GetAttrString(obj->device.get(), "type"));
        bool cuda = std::strcmp(PyUnicode_AsUTF8(t.get()), "cuda") == 0, cpu = std::strcmp(PyUnicode_AsUTF8(t.get()), "cpu") == 0;
        return make_const((n == "is_cuda" ? cuda : cpu) ? Py_True : Py_False);
      }
      if (n == "is_meta") return make_const(Py_False);
      if (n == "grad" || n == "grad_fn" || n == "_base" || n == "_version" || n == "data_ptr" || n == "untyped_storage" || n == "is_leaf")
        unsupported("tensor." + n + " is not supported");
      if (n == "T" || n == "mT" || n == "H" || n == "mH" || n == "real" || n == "imag" || n == "data")
        return record_op(graph::Op::kCallFunction, builtin("getattr"), "", {obj, make_const(name)}, {});
      PyObject* descr = _PyType_Lookup(Py_TYPE(obj->fake.get()), name);
      if (descr && (Py_IS_TYPE(descr, &PyMethodDescr_Type) || PyFunction_Check(descr))) {
        auto m = std::make_shared<Var>(VarKind::kTensorMethod);
        m->self = obj;
        m->name = n;
        return m;
      }
      PyRef v = PyRef::steal(PyObject_GetAttr(obj->fake.get(), name));
      if (!v) unsupported("tensor attribute " + n + ": " + err_text());
      if (is_constant_like(v.get())) return make_const(v.get());
      unsupported("tensor attribute " + n + " of type " + Py_TYPE(v.get())->tp_name);
    }
    case VarKind::kTuple:
      if (obj->obj) {  // namedtuple field
        PyRef fields = PyRef::steal(PyObject_GetAttrString(obj->obj.get(), "_fields"));
        if (!fields) {  // structseq: n_fields attribute names via the type's members
          PyErr_Clear();
          PyRef probe = PyRef::steal(PyObject_GetAttr(obj->obj.get(), name));
          if (probe && Py_IS_TYPE(probe.get(), &PyMemberDescr_Type)) {
            auto* md = reinterpret_cast<PyMemberDescrObject*>(probe.get());
            Py_ssize_t off = md->d_member->offset;
            Py_ssize_t idx = (off - static_cast<Py_ssize_t>(offsetof(PyTupleObject, ob_item))) / static_cast<Py_ssize_t>(sizeof(PyObject*));
            if (idx >= 0 && idx < static_cast<Py_ssize_t>(obj->items.size())) return obj->items[idx];
          }
          PyErr_Clear();
        } else {
          for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()); ++i)
            if (PyUnicode_Compare(PyTuple_GET_ITEM(fields.get(), i), name) == 0) return obj->items.at(i);
        }
      }
      [[fallthrough]];
    case VarKind::kList:
    case VarKind::kDict: {
      auto m = std::make_shared<Var>(VarKind::kContainerMethod);
      m->self = obj;
      m->name = n;
      return m;
    }
    case VarKind::kConst: {
      PyRef v = PyRef::steal(PyObject_GetAttr(obj->obj.get(), name));
      if (!v) unsupported("attribute " + n + ": " + err_text());
      return is_constant_like(v.get()) ? make_const(v.get()) : make_object(v.get(), nullptr);
    }
    case VarKind::kObject: break;
    case VarKind::kSuper: return super_attr(obj, name);
    case VarKind::kNewObject: return new_object_attr(obj, name);
    default: unsupported("attribute " + n + " of a " + kind_name(obj->kind));
  }
  PyObject* o = obj->obj.get();
  if (VarPtr stored = stored_attr(o, name)) return stored;
  const SourcePtr& src = obj->source;
  if (PyType_Check(o)) {  // class attributes: resolved by Python; guarded where found in the MRO
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + err_text());
    if (src) guard_class_attr(type_lookup_source(src, name, true), _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o), name));
    return wrap_unguarded(v.get(), n);
  }
  PyObject* descr = _PyType_Lookup(Py_TYPE(o), name);
  if (descr && Py_TYPE(descr)->tp_descr_set) {
    if (PyObject_TypeCheck(descr, &PyProperty_Type)) {
      PyRef fget = PyRef::steal(PyObject_GetAttrString(descr, "fget"));
      if (fget && PyFunction_Check(fget.get())) return inline_function(fget.get(), nullptr, {obj}, {}, nullptr);
      PyErr_Clear();
    }
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + err_text());
    return wrap_unguarded(v.get(), n);
  }
  PyObject** dp = _PyObject_GetDictPtr(o);
  if (dp && *dp) {
    PyObject* v = PyDict_GetItemWithError(*dp, name);
    if (v) {
      if (PyModule_Check(o) && starts_with(PyModule_GetName(o) ? PyModule_GetName(o) : "", "torch")) return wrap_unguarded(v, n);
      PyErr_Clear();
      return src ? wrap(v, attr_source(src, name)) : wrap_unguarded(v, n);
    }
    PyErr_Clear();
  }
  if (descr && src && !PyModule_Check(o)) {
    // Found on the class: valid while the class still has it and the instance does not shadow it.
    guard_class_attr(type_lookup_source(src, name, false), descr);
    if (dp && *dp) guard(instance_dict_source(src), GuardLeaf::kLacksKey, name);
  }
  if (descr) {
    if (PyFunction_Check(descr)) {
      auto m = std::make_shared<Var>(VarKind::kBoundMethod);
      m->self = obj;
      m->obj = PyRef::borrow(descr);
      return m;
    }
    if (Py_IS_TYPE(descr, &PyStaticMethod_Type) || Py_IS_TYPE(descr, &PyClassMethod_Type)) {
      PyRef fn = PyRef::steal(PyObject_GetAttrString(descr, "__func__"));
      if (Py_IS_TYPE(descr, &PyStaticMethod_Type)) return wrap_unguarded(fn.get(), n);
      auto m = std::make_shared<Var>(VarKind::kBoundMethod);
      m->self = make_object(reinterpret_cast<PyObject*>(Py_TYPE(o)), nullptr);
      m->obj = fn;
      return m;
    }
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + err_text());
    return wrap_unguarded(v.get(), n);
  }
  if (is_module_instance(o) && dp && *dp) {
    for (const char* member : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = PyDict_GetItemString(*dp, member);
      PyObject* v = d && PyDict_Check(d) ? PyDict_GetItem(d, name) : nullptr;
      if (v) return src ? wrap(v, module_member_source(src, member, name)) : wrap_unguarded(v, n);
    }
  }
  PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
  if (!v) unsupported("attribute " + n + ": " + err_text());
  return wrap_unguarded(v.get(), n);
}

// Attribute lookup through super(): the MRO of the instance's type, after the given class.
VarPtr Interpreter::super_attr(const VarPtr& sup, PyObject* name) {
  const VarPtr& inst = sup->self;
  PyObject* t = python_type_of(inst);
  PyObject* mro = reinterpret_cast<PyTypeObject*>(t)->tp_mro;
  Py_ssize_t i = 0, n = PyTuple_GET_SIZE(mro);
  while (i < n && PyTuple_GET_ITEM(mro, i) != sup->obj.get()) ++i;
  for (++i; i < n; ++i) {
    auto* klass = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    // Builtin (static) types hold only C-level attributes, resolved below; on 3.12 their
    // tp_dict is not even set (PyType_GetDict is the accessor).
    if (!(klass->tp_flags & Py_TPFLAGS_HEAPTYPE)) break;
    PyObject* attr = PyDict_GetItemWithError(klass->tp_dict, name);
    if (!attr) { PyErr_Clear(); continue; }
    if (PyFunction_Check(attr)) {
      auto m = std::make_shared<Var>(VarKind::kBoundMethod);
      m->self = inst;
      m->obj = PyRef::borrow(attr);
      return m;
    }
    if (Py_IS_TYPE(attr, &PyStaticMethod_Type)) return wrap_unguarded(PyRef::steal(PyObject_GetAttrString(attr, "__func__")).get(), "staticmethod");
    if (PyObject_TypeCheck(attr, &PyProperty_Type)) {
      PyRef fget = PyRef::steal(PyObject_GetAttrString(attr, "fget"));
      if (fget && PyFunction_Check(fget.get())) return inline_function(fget.get(), nullptr, {inst}, {}, nullptr);
      PyErr_Clear();
    }
    break;  // a C-level attribute: resolved on the real object below
  }
  if (inst->kind == VarKind::kNewObject) return new_object_method(inst, py_str(name));
  if (inst->kind != VarKind::kObject) unsupported("super()." + py_str(name) + " on a " + kind_name(inst->kind));
  PyRef real_super = PyRef::steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PySuper_Type), sup->obj.get(), inst->obj.get(), nullptr));
  PyRef v = real_super ? PyRef::steal(PyObject_GetAttr(real_super.get(), name)) : PyRef();
  if (!v) unsupported("super()." + py_str(name) + ": " + err_text());
  return wrap_unguarded(v.get(), py_str(name));
}

// ---------------------------------------------------------------- operators

static const char* nb_to_operator(const std::string& nb) {
  static const std::unordered_map<std::string, const char*> m = {
      {"NB_ADD", "add"}, {"NB_AND", "and_"}, {"NB_FLOOR_DIVIDE", "floordiv"}, {"NB_LSHIFT", "lshift"},
      {"NB_MATRIX_MULTIPLY", "matmul"}, {"NB_MULTIPLY", "mul"}, {"NB_REMAINDER", "mod"}, {"NB_OR", "or_"},
      {"NB_POWER", "pow"}, {"NB_RSHIFT", "rshift"}, {"NB_SUBTRACT", "sub"}, {"NB_TRUE_DIVIDE", "truediv"},
      {"NB_XOR", "xor"}, {"NB_INPLACE_ADD", "iadd"}, {"NB_INPLACE_AND", "iand"}, {"NB_INPLACE_FLOOR_DIVIDE", "ifloordiv"},
      {"NB_INPLACE_LSHIFT", "ilshift"}, {"NB_INPLACE_MATRIX_MULTIPLY", "imatmul"}, {"NB_INPLACE_MULTIPLY", "imul"},
      {"NB_INPLACE_REMAINDER", "imod"}, {"NB_INPLACE_OR", "ior"}, {"NB_INPLACE_POWER", "ipow"}, {"NB_INPLACE_RSHIFT", "irshift"},
      {"NB_INPLACE_SUBTRACT", "isub"}, {"NB_INPLACE_TRUE_DIVIDE", "itruediv"}, {"NB_INPLACE_XOR", "ixor"}};
  auto it = m.find(nb);
  return it == m.end() ? nullptr : it->second;
}

VarPtr Interpreter::binary(const char* nb_name, const VarPtr& a, const VarPtr& b) {
  const char* opn = nb_to_operator(nb_name);
  if (!opn) unsupported(std::string("binary operator ") + nb_name);
  bool inplace = opn[0] == 'i';
  PyObject* fn = op_fn(opn);
  if (a->is_tensor() || b->is_tensor()) {
    if (inplace && !a->is_tensor()) fn = op_fn(opn + 1);  // `n += t` rebinds n to a new tensor
    return record_op(graph::Op::kCallFunction, fn, "", {a, b}, {});
  }
  bool a_seq = a->kind == VarKind::kTuple || a->kind == VarKind::kList;
  bool b_seq = b->kind == VarKind::kTuple || b->kind == VarKind::kList;
  std::string base = inplace ? opn + 1 : opn;
  if (a_seq && (b_seq || b->is_const()) && base == "add") {
    std::vector<VarPtr> items = a->items;
    auto more = unpack(b);
    items.insert(items.end(), more.begin(), more.end());
    if (inplace && a->kind == VarKind::kList) {
      if (a->source) unsupported("in-place change of an input list");
      a->items = items;
      return a;
    }
    return make_seq(a->kind, items);
  }
  if (b_seq && a->is_const() && base == "add" && PyTuple_Check(a->obj.get())) {
    std::vector<VarPtr> items = unpack(a);
    items.insert(items.end(), b->items.begin(), b->items.end());
    return make_seq(b->kind, items);
  }
  if (a_seq && b->is_const() && base == "mul" && PyLong_Check(b->obj.get())) {
    std::vector<VarPtr> items;
    long times = PyLong_AsLong(b->obj.get());
    for (long i = 0; i < times; ++i) items.insert(items.end(), a->items.begin(), a->items.end());
    return make_seq(a->kind, items);
  }
  return fold(fn, {a, b}, {});
}

VarPtr Interpreter::compare(int op, const VarPtr& a, const VarPtr& b) {
  static const char* names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  if (op < 0 || op > 5) unsupported("comparison operator " + std::to_string(op));
  PyObject* fn = op_fn(names[op]);
  if (a->is_tensor() || b->is_tensor()) return record_op(graph::Op::kCallFunction, fn, "", {a, b}, {});
  PyRef pa = as_python(a), pb = as_python(b);
  if (!pa || !pb) {
    if (op == 2 || op == 3) {  // == / != on values kiln tracks by identity
      bool known;
      bool same = same_object(a, b, &known);
      if (known && same) return make_const(op == 2 ? Py_True : Py_False);
    }
    unsupported("comparison of a " + std::string(kind_name(a->kind)) + " and a " + kind_name(b->kind));
  }
  PyRef r = PyRef::steal(PyObject_RichCompare(pa.get(), pb.get(), op));
  if (!r) unsupported("comparison raised " + err_text());
  if (probe_is_tensor(r.get())) unsupported("comparison produced a tensor");
  return is_constant_like(r.get()) ? make_const(r.get()) : make_object(r.get(), nullptr);
}

VarPtr Interpreter::unary(PyObject* fn, const VarPtr& v) {
  if (v->is_tensor()) return record_op(graph::Op::kCallFunction, fn, "", {v}, {});
  return fold(fn, {v}, {});
}

VarPtr Interpreter::subscript(const VarPtr& obj, const VarPtr& idx) {
  if (obj->is_tensor()) return record_op(graph::Op::kCallFunction, op_fn("getitem"), "", {obj, idx}, {});
  if (obj->kind == VarKind::kTuple || obj->kind == VarKind::kList) {
    if (!idx->is_const()) unsupported("indexing a " + std::string(kind_name(obj->kind)) + " with a non-constant");
    PyObject* i = idx->obj.get();
    Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (PyLong_Check(i)) {
      Py_ssize_t k = PyLong_AsSsize_t(i);
      if (k < 0) k += n;
      if (k < 0 || k >= n) unsupported("IndexError: index out of range");
      return obj->items[k];
    }
    if (PySlice_Check(i)) {
      Py_ssize_t start, stop, step, len;
      if (PySlice_GetIndicesEx(i, n, &start, &stop, &step, &len) < 0) unsupported(err_text());
      std::vector<VarPtr> out;
      for (Py_ssize_t k = 0, p = start; k < len; ++k, p += step) out.push_back(obj->items[p]);
      return make_seq(obj->kind == VarKind::kTuple ? VarKind::kTuple : VarKind::kList, out);
    }
    unsupported("index of type " + std::string(Py_TYPE(i)->tp_name));
  }
  if (obj->kind == VarKind::kDict) {
    auto m = std::make_shared<Var>(VarKind::kContainerMethod);
    m->self = obj;
    m->name = "__getitem__";
    std::vector<VarPtr> args{idx};
    std::vector<std::pair<std::string, VarPtr>> kw;
    return call_container_method(m, args, kw);
  }
  if (obj->kind == VarKind::kObject || obj->kind == VarKind::kNewObject) {
    PyTypeObject* t = obj->kind == VarKind::kObject ? Py_TYPE(obj->obj.get()) : reinterpret_cast<PyTypeObject*>(obj->obj.get());
    PyObject* gi = _PyType_Lookup(t, PyRef::steal(PyUnicode_FromString("__getitem__")).get());
    if (gi && PyFunction_Check(gi)) return inline_function(gi, nullptr, {obj, idx}, {}, nullptr);
    if (obj->kind == VarKind::kNewObject && obj->self) return subscript(obj->self, idx);
  }
  if (obj->is_const() || obj->kind == VarKind::kObject) return fold(op_fn("getitem"), {obj, idx}, {});
  unsupported(std::string("indexing a ") + kind_name(obj->kind));
}

VarPtr Interpreter::contains(const VarPtr& item, const VarPtr& container) {
  if (container->is_tensor() || item->is_tensor()) unsupported("`in` with a tensor depends on its data");
  if (container->kind == VarKind::kNewObject) {
    PyObject* c = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(container->obj.get()), PyRef::steal(PyUnicode_FromString("__contains__")).get());
    if (c && PyFunction_Check(c)) return inline_function(c, nullptr, {container, item}, {}, nullptr);
    if (container->self) return contains(item, container->self);
    unsupported("`in` on a new object");
  }
  if (container->kind == VarKind::kDict) {
    if (!item->is_const()) unsupported("`in` of a non-constant key");
    for (auto& k : container->keys) {
      int r = PyObject_RichCompareBool(k.get(), item->obj.get(), Py_EQ);
      if (r < 0) PyErr_Clear();
      if (r == 1) return make_const(Py_True);
    }
    return make_const(Py_False);
  }
  if (container->kind == VarKind::kTuple || container->kind == VarKind::kList) {
    for (auto& it : container->items) {
      bool eq;
      if (it->is_const() && item->is_const()) {
        int r = PyObject_RichCompareBool(it->obj.get(), item->obj.get(), Py_EQ);
        if (r < 0) PyErr_Clear();
        eq = r == 1;
      } else {
        bool known;
        eq = same_object(it, item, &known);
        if (!known) unsupported("`in` over values kiln cannot compare");
      }
      if (eq) return make_const(Py_True);
    }
    return make_const(Py_False);
  }
  return fold(op_fn("contains"), {container, item}, {});
}

}  // namespace kiln::frontend
