// What copy.deepcopy needs beyond id() (builtins.cpp) and dict lookups (operators.cpp) to run
// inlined, as Dynamo runs it: object.__reduce_ex__ of an instance whose class keeps object's
// pickling protocol, and object.__new__(cls) for copyreg.__newobj__ to make the copy (then filled
// through its __dict__).
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"

namespace kiln::frontend {

static PyObject* type_attr(PyTypeObject* t, const char* name) {
  PyRef n = PyRef::steal(PyUnicode_FromString(name));
  return _PyType_Lookup(t, n.get());
}

// True when object.__reduce_ex__(protocol >= 2) of an instance of t returns
// (copyreg.__newobj__, (t,), its __dict__ or None, None, None): a Python class over object with an
// instance dict, no __slots__, object's __new__ and none of the pickling hooks overridden.
static bool reduces_as_plain_object(PyTypeObject* t) {
  if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || t->tp_itemsize || !t->tp_dictoffset || t->tp_new != PyBaseObject_Type.tp_new) return false;
  for (const char* hook : {"__reduce_ex__", "__reduce__", "__getstate__"})
    if (type_attr(t, hook) != type_attr(&PyBaseObject_Type, hook)) return false;
  for (const char* hook : {"__getnewargs_ex__", "__getnewargs__"})
    if (type_attr(t, hook)) return false;
  if (builtin_base(t) != &PyBaseObject_Type) return false;  // a builtin base (dict, list ...) reduces its own way
  PyRef slots = PyRef::steal(PyUnicode_FromString("__slots__"));
  PyObject* mro = t->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (base != &PyBaseObject_Type && PyDict_Contains(base->tp_dict, slots.get()) != 0) { PyErr_Clear(); return false; }
  }
  return true;
}

VarPtr Interpreter::reduce_ex(const VarPtr& obj, const std::vector<VarPtr>& args) {
  if (args.size() != 1 || !args[0]->is_const() || !PyLong_CheckExact(args[0]->obj.get()) || PyLong_AsLong(args[0]->obj.get()) < 2) return nullptr;
  const bool existing = obj->kind == VarKind::kObject && obj->source && !obj->fresh && !PyType_Check(obj->obj.get());
  if (!existing && !(obj->kind == VarKind::kNewObject && !obj->self)) return nullptr;
  PyObject* cls = existing ? reinterpret_cast<PyObject*>(Py_TYPE(obj->obj.get())) : obj->obj.get();
  auto* t = reinterpret_cast<PyTypeObject*>(cls);
  if (cls == reinterpret_cast<PyObject*>(&PyBaseObject_Type) || !reduces_as_plain_object(t)) return nullptr;
  VarPtr state;
  if (existing) {
    // The class's hooks, as found now, are part of the answer (its type is guarded already).
    for (const char* hook : {"__reduce_ex__", "__reduce__", "__getstate__"}) {
      PyRef n = PyRef::steal(PyUnicode_FromString(hook));
      guard_class_attr(type_lookup_source(obj->source, n.get(), false), type_attr(t, hook));
    }
    PyObject** dp = _PyObject_GetDictPtr(obj->obj.get());
    PyObject* d = dp ? *dp : nullptr;
    if (!d || PyDict_GET_SIZE(d) == 0) {
      if (d) guard(instance_dict_source(obj->source), GuardLeaf::kLen, nullptr, 0);
      state = make_const(Py_None);
    } else {
      state = wrap(d, instance_dict_source(obj->source));  // its keys and every value read, guarded
      if (state->kind != VarKind::kDict) return nullptr;    // keys that are not all strings
    }
  } else {
    state = obj->keys.empty() ? make_const(Py_None) : new_object_attr(obj, PyRef::steal(PyUnicode_FromString("__dict__")).get());
  }
  PyObject* newobj = module_attr("copyreg", "__newobj__");
  if (!newobj) unsupported("copyreg.__newobj__ is unavailable");
  VarPtr none = make_const(Py_None);
  return make_seq(VarKind::kTuple, {make_object(newobj, nullptr), make_seq(VarKind::kTuple, {make_object(cls, nullptr)}), state, none, none});
}

}  // namespace kiln::frontend
