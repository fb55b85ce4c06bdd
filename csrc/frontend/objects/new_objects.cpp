// Instances created during capture (VarKind::kNewObject): a model's output dataclass, a cache
// object, any small helper. Their attributes, and their dict contents for dict subclasses
// (transformers' ModelOutput is an OrderedDict), are tracked symbolically; methods are inlined;
// an instance that is returned is rebuilt after the graph runs from its final state, without
// running __init__ again (OutputTemplate::kNewObject).
#include <algorithm>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

static PyObject* lookup(PyObject* cls, const char* name) {
  PyRef n = PyRef::steal(PyUnicode_FromString(name));
  return _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), n.get());
}

static bool is_dict_based(PyObject* cls) { return PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), &PyDict_Type); }

VarPtr Interpreter::construct(PyObject* cls, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  auto* t = reinterpret_cast<PyTypeObject*>(cls);
  std::string tn = t->tp_name;
  if (PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(PyExc_BaseException))) return make_exception(cls, args, kwargs);
  if (cls == g_torch.parameter_type) return new_parameter(cls, args, kwargs);
  if (cls == reinterpret_cast<PyObject*>(&PyBaseObject_Type)) {  // object(): a sentinel, no attributes
    if (!args.empty() || !kwargs.empty()) unsupported("object() with arguments (TypeError)");
    auto v = std::make_shared<Var>(VarKind::kNewObject);
    v->obj = PyRef::borrow(cls);
    v->fresh = true;
    return v;
  }
  // A metaclass matters here only through __call__ (what constructing runs): one that keeps
  // type's (ABCMeta; transformers' ModelOutput metaclass, which only renames what the class
  // itself is given) constructs as type does.
  if (Py_TYPE(cls)->tp_call != PyType_Type.tp_call && (t->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(g_torch.tensor_type)))
    unsupported("constructing " + tn + ", whose metaclass " + Py_TYPE(cls)->tp_name + " defines __call__");
  VarPtr v = new_instance(cls);
  PyObject* init = lookup(cls, "__init__");
  if (init && PyFunction_Check(init)) {
    args.insert(args.begin(), v);
    inline_function(init, nullptr, std::move(args), std::move(kwargs), nullptr);
  } else if (!args.empty() || !kwargs.empty()) {
    unsupported("constructing " + tn + " with arguments but no Python __init__");
  }
  return v;
}

// A new instance of cls as its __new__ (object's, or its dict base's) makes it, before any __init__.
VarPtr Interpreter::new_instance(PyObject* cls) {
  auto* t = reinterpret_cast<PyTypeObject*>(cls);
  std::string tn = t->tp_name;
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(g_torch.tensor_type)) || PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(PyExc_BaseException)))
    unsupported(PyType_IsSubtype(t, reinterpret_cast<PyTypeObject*>(PyExc_BaseException)) ? "the function raises " + tn
                                                                                          : "constructing an object of class " + tn);
  PyObject* base = reinterpret_cast<PyObject*>(builtin_base(t));
  bool dict_based = is_dict_based(cls);
  if (base != reinterpret_cast<PyObject*>(&PyBaseObject_Type) && !dict_based) unsupported("constructing " + tn + " (a subclass of a builtin type)");
  if (t->tp_new != PyBaseObject_Type.tp_new && t->tp_new != reinterpret_cast<PyTypeObject*>(base)->tp_new)
    unsupported("constructing " + tn + ", which defines __new__");
  auto v = std::make_shared<Var>(VarKind::kNewObject);
  v->obj = PyRef::borrow(cls);
  v->fresh = true;
  if (dict_based) {
    v->self = std::make_shared<Var>(VarKind::kDict);
    v->self->fresh = true;
  }
  return v;
}

// A call of an object made during capture: an nn.Module built inside the function calls its
// forward (its hook dicts, made by its __init__, are part of the symbolic state and must be
// empty); any other class its Python __call__.
VarPtr Interpreter::call_new_object(const VarPtr& obj, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  auto* cls = reinterpret_cast<PyTypeObject*>(obj->obj.get());
  if (PyType_IsSubtype(cls, reinterpret_cast<PyTypeObject*>(g_torch.module_type))) {
    for (const char* h : {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"}) {
      VarPtr d = new_object_attr(obj, PyRef::steal(PyUnicode_FromString(h)).get());
      if (d->kind != VarKind::kDict || !d->items.empty()) unsupported(std::string("module ") + cls->tp_name + " built here has " + h);
    }
    require_no_global_module_hooks();
    return call(new_object_attr(obj, PyRef::steal(PyUnicode_FromString("forward")).get()), std::move(args), std::move(kwargs));
  }
  PyObject* call_attr = _PyType_Lookup(cls, PyRef::steal(PyUnicode_FromString("__call__")).get());
  if (!call_attr || !PyFunction_Check(call_attr)) unsupported(std::string("call of a new ") + cls->tp_name + " without a Python __call__");
  args.insert(args.begin(), obj);
  return inline_function(call_attr, nullptr, std::move(args), std::move(kwargs), nullptr);
}

// An exception instance (to be raised, or matched and printed by a handler): made for real at
// capture time from Python values, when its class constructs as the builtin exceptions do (a
// Python __init__ or __new__ could do anything). See exceptions.cpp for where it may go.
VarPtr Interpreter::make_exception(PyObject* cls, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  auto* t = reinterpret_cast<PyTypeObject*>(cls);
  auto* base = reinterpret_cast<PyTypeObject*>(PyExc_BaseException);
  if ((t->tp_flags & Py_TPFLAGS_HEAPTYPE) && (t->tp_init != base->tp_init || t->tp_new != base->tp_new))
    unsupported(std::string("the function makes a ") + t->tp_name + " (its class defines __init__ or __new__)");
  if (!kwargs.empty()) unsupported(std::string(t->tp_name) + "() with keyword arguments");
  PyRef a = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef v = args[i]->is_const() ? args[i]->obj : PyRef();
    if (!v) unsupported(std::string(t->tp_name) + "() of a value that is not a Python constant");
    PyTuple_SET_ITEM(a.get(), static_cast<Py_ssize_t>(i), v.release());
  }
  PyRef exc = PyRef::steal(PyObject_Call(cls, a.get(), nullptr));
  if (!exc) unsupported(std::string("making a ") + t->tp_name + " raised " + take_python_error());
  VarPtr v = make_object(exc.get(), nullptr);
  v->fresh = true;
  return v;
}

static bool is_attribute_error(const VarPtr& exc) {
  return exc && exc->kind == VarKind::kObject && PyErr_GivenExceptionMatches(exc->obj.get(), PyExc_AttributeError);
}

VarPtr Interpreter::new_object_getattr(const VarPtr& obj, PyObject* name) {
  PyObject* ga = lookup(obj->obj.get(), "__getattribute__");
  if (!ga || !PyFunction_Check(ga)) return new_object_attr(obj, name);
  try {
    return inline_function(ga, nullptr, {obj, make_const(name)}, {}, nullptr);
  } catch (const PyRaised& raised) {
    PyObject* getattr_hook = lookup(obj->obj.get(), "__getattr__");
    if (!getattr_hook || !PyFunction_Check(getattr_hook) || !is_attribute_error(raised.exc)) throw;
    return inline_function(getattr_hook, nullptr, {obj, make_const(name)}, {}, nullptr);
  }
}

bool Interpreter::new_object_hasattr(const VarPtr& obj, PyObject* name) {
  PyObject* ga = lookup(obj->obj.get(), "__getattribute__");
  PyObject* getattr_hook = lookup(obj->obj.get(), "__getattr__");
  if ((!ga || !PyFunction_Check(ga)) && (!getattr_hook || !PyFunction_Check(getattr_hook))) {
    bool present = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), name) != nullptr;
    for (auto& k : obj->keys) present |= PyUnicode_Compare(k.get(), name) == 0;
    return present;
  }
  try {
    new_object_getattr(obj, name);
    return true;
  } catch (const PyRaised& raised) {
    if (!is_attribute_error(raised.exc)) throw;
    return false;
  }
}

VarPtr Interpreter::new_object_attr(const VarPtr& obj, PyObject* name) {
  std::string n = py_str(name);
  for (size_t i = 0; i < obj->keys.size(); ++i)
    if (PyUnicode_Compare(obj->keys[i].get(), name) == 0) return obj->items[i];
  if (n == "__class__") return make_object(obj->obj.get(), nullptr);
  if (n == "__dict__") {  // the attributes, live (see Var::attrs_dict); writing through it is refused
    if (obj->obj.get() == reinterpret_cast<PyObject*>(&PyBaseObject_Type))
      raise_python(PyExc_AttributeError, "'object' object has no attribute '__dict__'");
    if (obj->attrs_dict) return obj->attrs_dict;
    auto d = std::make_shared<Var>(VarKind::kDict);
    d->keys = obj->keys;
    d->items = obj->items;
    d->source = constant_source(Py_None, "__dict__ of an object made during the capture");  // mutating it is refused
    d->owner = obj;
    obj->attrs_dict = d;
    return d;
  }
  PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), name);
  if (!attr) {
    PyObject* ga = lookup(obj->obj.get(), "__getattr__");
    if (ga && PyFunction_Check(ga)) return inline_function(ga, nullptr, {obj, make_const(name)}, {}, nullptr);
    raise_python(PyExc_AttributeError, "'" + std::string(reinterpret_cast<PyTypeObject*>(obj->obj.get())->tp_name) + "' object has no attribute '" + n + "'");
  }
  if (PyFunction_Check(attr)) {
    auto m = std::make_shared<Var>(VarKind::kBoundMethod);
    m->self = obj;
    m->obj = PyRef::borrow(attr);
    return m;
  }
  if (PyObject_TypeCheck(attr, &PyProperty_Type)) {
    PyRef fget = PyRef::steal(PyObject_GetAttrString(attr, "fget"));
    if (fget && PyFunction_Check(fget.get())) return inline_function(fget.get(), nullptr, {obj}, {}, nullptr);
    PyErr_Clear();
    unsupported("property " + n + " without a Python getter");
  }
  if (Py_IS_TYPE(attr, &PyStaticMethod_Type)) return wrap_unguarded(PyRef::steal(PyObject_GetAttrString(attr, "__func__")).get(), n);
  if (Py_IS_TYPE(attr, &PyClassMethod_Type)) {
    auto m = std::make_shared<Var>(VarKind::kBoundMethod);
    m->self = make_object(obj->obj.get(), nullptr);
    m->obj = PyRef::steal(PyObject_GetAttrString(attr, "__func__"));
    return m;
  }
  if (Py_IS_TYPE(attr, &PyMethodDescr_Type) || Py_IS_TYPE(attr, &PyWrapperDescr_Type) || Py_IS_TYPE(attr, &PyClassMethodDescr_Type))
    return make_container_method(obj, n);  // a builtin method of object/dict: interpreted on the symbolic state
  if (Py_TYPE(attr)->tp_descr_get) {
    // A non-data descriptor written in Python (torch.distributions' lazy_property): its __get__
    // inlined. The instance's own attributes, looked up above, win over it, as in Python.
    PyObject* get = _PyType_Lookup(Py_TYPE(attr), PyRef::steal(PyUnicode_FromString("__get__")).get());
    PyObject* set = _PyType_Lookup(Py_TYPE(attr), PyRef::steal(PyUnicode_FromString("__set__")).get());
    PyObject* del = _PyType_Lookup(Py_TYPE(attr), PyRef::steal(PyUnicode_FromString("__delete__")).get());
    if (get && PyFunction_Check(get) && !set && !del)
      return inline_function(get, nullptr, {wrap_unguarded(attr, n), obj, make_object(obj->obj.get(), nullptr)}, {}, nullptr);
    unsupported("descriptor " + n + " on a new object");
  }
  return wrap_unguarded(attr, n);  // a plain class attribute
}

VarPtr Interpreter::attrs_owner(const VarPtr& d) {
  if (d->kind != VarKind::kDict) return nullptr;
  VarPtr owner = d->owner.lock();
  return owner && owner->attrs_dict.get() == d.get() ? owner : nullptr;
}

// `y.__dict__.update(state)` (how copy fills a copy), `vars(obj)[k] = v`: the change is made on a
// copy of the dict's contents by the dict method itself, then becomes the object's attributes.
VarPtr Interpreter::mutate_attrs_dict(const VarPtr& d, const std::string& name, std::vector<VarPtr>& args,
                                      std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  VarPtr owner = attrs_owner(d);
  auto work = std::make_shared<Var>(VarKind::kDict);
  work->fresh = true;
  work->keys = d->keys;
  work->items = d->items;
  VarPtr r = call_container_method(make_container_method(work, name), args, kwargs);
  for (const auto& k : work->keys)
    if (!PyUnicode_Check(k.get())) unsupported("a non-string key in an object's __dict__");
  owner->keys = d->keys = work->keys;
  owner->items = d->items = work->items;
  return r;
}

void Interpreter::set_new_object_attr(const VarPtr& obj, PyObject* name, const VarPtr& value) {
  if (obj->obj.get() == reinterpret_cast<PyObject*>(&PyBaseObject_Type))  // object() has no __dict__
    raise_python(PyExc_AttributeError, "'object' object has no attribute '" + py_str(name) + "'");
  bool found = false;
  for (size_t i = 0; i < obj->keys.size() && !found; ++i)
    if (PyUnicode_Compare(obj->keys[i].get(), name) == 0) { obj->items[i] = value; found = true; }
  if (!found) {
    obj->keys.push_back(PyRef::borrow(name));
    obj->items.push_back(value);
  }
  if (obj->attrs_dict) {
    obj->attrs_dict->keys = obj->keys;
    obj->attrs_dict->items = obj->items;
  }
}

void Interpreter::del_new_object_attr(const VarPtr& obj, PyObject* name) {
  auto* t = reinterpret_cast<PyTypeObject*>(obj->obj.get());
  PyObject* descr = _PyType_Lookup(t, name);
  if (descr && Py_TYPE(descr)->tp_descr_set) unsupported("deleting " + py_str(name) + ", a descriptor of " + t->tp_name);
  for (size_t i = 0; i < obj->keys.size(); ++i)
    if (PyUnicode_Compare(obj->keys[i].get(), name) == 0) {
      obj->keys.erase(obj->keys.begin() + static_cast<long>(i));
      obj->items.erase(obj->items.begin() + static_cast<long>(i));
      if (obj->attrs_dict) {
        obj->attrs_dict->keys = obj->keys;
        obj->attrs_dict->items = obj->items;
      }
      return;
    }
  raise_python(PyExc_AttributeError, "'" + std::string(t->tp_name) + "' object has no attribute '" + py_str(name) + "'");
}

VarPtr Interpreter::call_container(const VarPtr& self, const std::string& name, std::vector<VarPtr> args) {
  std::vector<std::pair<std::string, VarPtr>> no_kwargs;
  return call_container_method(make_container_method(self, name), args, no_kwargs);
}

// ---------------------------------------------------------------- collections.deque

bool Interpreter::is_deque(const VarPtr& v) {
  return v->kind == VarKind::kList && v->obj && v->obj.get() == module_attr("collections", "deque");
}

VarPtr Interpreter::make_deque(std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  VarPtr iterable = args.empty() ? nullptr : args[0], maxlen = args.size() > 1 ? args[1] : nullptr;
  if (args.size() > 2) unsupported("deque() with too many arguments (TypeError)");
  for (auto& [k, v] : kwargs) {
    if (k == "iterable") iterable = v;
    else if (k == "maxlen") maxlen = v;
    else unsupported("deque() keyword " + k);
  }
  auto d = make_seq(VarKind::kList, iterable ? unpack(iterable) : std::vector<VarPtr>{});
  d->obj = PyRef::borrow(module_attr("collections", "deque"));
  d->fresh = true;
  if (maxlen && !(maxlen->is_const() && maxlen->obj.get() == Py_None)) {
    if (!maxlen->is_const() || !PyLong_Check(maxlen->obj.get())) unsupported("deque maxlen that is not a constant int");
    long m = PyLong_AsLong(maxlen->obj.get());
    if (m < 0) unsupported("deque maxlen must be non-negative (ValueError)");
    d->pos = static_cast<size_t>(m) + 1;
    if (d->items.size() > static_cast<size_t>(m)) d->items.erase(d->items.begin(), d->items.end() - m);
  }
  return d;
}

VarPtr Interpreter::call_deque_method(const VarPtr& self, const std::string& name, std::vector<VarPtr>& args) {
  auto& items = self->items;
  const size_t maxlen = self->pos;  // maxlen + 1, 0 when unbounded
  auto trim = [&](bool from_left) {
    while (maxlen && items.size() > maxlen - 1) {
      if (from_left) items.erase(items.begin());
      else items.pop_back();
    }
  };
  const VarPtr none = make_const(Py_None);
  if (name == "append" && args.size() == 1) { items.push_back(args[0]); trim(true); return none; }
  if (name == "appendleft" && args.size() == 1) { items.insert(items.begin(), args[0]); trim(false); return none; }
  if (name == "extend" && args.size() == 1) {
    for (const VarPtr& v : unpack(args[0])) { items.push_back(v); trim(true); }
    return none;
  }
  if (name == "extendleft" && args.size() == 1) {
    for (const VarPtr& v : unpack(args[0])) { items.insert(items.begin(), v); trim(false); }
    return none;
  }
  if ((name == "pop" || name == "popleft") && args.empty()) {
    if (items.empty()) unsupported("pop from an empty deque (IndexError)");
    VarPtr v = name == "pop" ? items.back() : items.front();
    if (name == "pop") items.pop_back();
    else items.erase(items.begin());
    return v;
  }
  if (name == "rotate" && args.size() <= 1) {
    long n = args.empty() ? 1 : list_index(args[0], "deque.rotate");
    if (!items.empty()) {
      long len = static_cast<long>(items.size());
      long k = ((n % len) + len) % len;  // right by k
      std::rotate(items.begin(), items.begin() + (len - k), items.end());
    }
    return none;
  }
  if (name == "clear" && args.empty()) { items.clear(); return none; }
  if (name == "reverse" && args.empty()) { std::reverse(items.begin(), items.end()); return none; }
  unsupported("deque." + name + "() is not supported");
}

// A class statement (`class Scale(nn.Module): ...` inside a function). Its body runs once, for
// real, when the capture reaches it, when all it does is bind names to constants and functions:
// then nothing it does differs between calls. The class object is the capture's (each eager call
// would make an equal but distinct one); instances are new objects as usual.
VarPtr Interpreter::build_class(std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  if (args.size() < 2 || args[0]->kind != VarKind::kNestedFunction || !args[1]->is_const()) unsupported("__build_class__ with unusual arguments");
  const VarPtr& body = args[0];
  if (!body->items.empty() || body->self || body->kwdefaults) unsupported("a class body that reads the enclosing function's variables");
  auto* code = reinterpret_cast<PyCodeObject*>(body->obj.get());
  static const std::unordered_set<std::string> plain = {
      "RESUME", "NOP", "CACHE", "LOAD_NAME", "STORE_NAME", "LOAD_CONST", "MAKE_FUNCTION", "LOAD_CLOSURE", "BUILD_TUPLE",
      "STORE_DEREF", "RETURN_VALUE", "RETURN_CONST", "COPY_FREE_VARS", "MAKE_CELL", "COPY", "SETUP_ANNOTATIONS", "STORE_SUBSCR"};
  for (const auto& in : decoded_code(code).bc->instructions())
    if (!plain.count(in.name)) unsupported(std::string("a class body with ") + in.name + " (it may do more than define names)");
  PyRef fn = PyRef::steal(PyFunction_New(body->obj.get(), body->globals.get()));
  std::vector<VarPtr> rest(args.begin() + 1, args.end());
  rest.insert(rest.begin(), make_const(fn.get()));
  VarPtr cls = fold(builtin("__build_class__"), rest, kwargs);
  if (cls->kind != VarKind::kObject || !PyType_Check(cls->obj.get())) unsupported("__build_class__ made something other than a class");
  owned_classes_.push_back(cls->obj);
  return cls;
}

}  // namespace kiln::frontend
