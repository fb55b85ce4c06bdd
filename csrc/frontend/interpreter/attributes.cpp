// Attribute access on symbolic values: tensors, containers, constants, existing objects (with
// guards on where the attribute was found) and super().
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

#include <structmember.h>

namespace kiln::frontend {

// ---------------------------------------------------------------- attributes

VarPtr Interpreter::get_attr(const VarPtr& obj, PyObject* name) {
  std::string n = py_str(name);
  switch (obj->kind) {
    case VarKind::kNdarray: return ndarray_attr(obj, name);
    case VarKind::kGenFrame:
      if (n == "send" || n == "__next__" || n == "close") return make_container_method(obj, n);
      unsupported("generator attribute " + n);
    case VarKind::kTensor: {
      if (n == "device") return make_const(obj->device.get());
      if (n == "is_cuda" || n == "is_cpu") {
        PyRef t = PyRef::steal(PyObject_GetAttrString(obj->device.get(), "type"));
        bool cuda = std::strcmp(PyUnicode_AsUTF8(t.get()), "cuda") == 0, cpu = std::strcmp(PyUnicode_AsUTF8(t.get()), "cpu") == 0;
        return make_const((n == "is_cuda" ? cuda : cpu) ? Py_True : Py_False);
      }
      if (n == "is_meta") return make_const(Py_False);
      if (n == "grad_fn" || n == "is_leaf") {
        // Known without running: a tensor that does not require grad is a leaf with no grad_fn,
        // and so is a Parameter the capture made; one computed here that requires grad is not a
        // leaf (its grad_fn, an autograd node, does not exist until the graph runs).
        PyRef rg = PyRef::steal(PyObject_GetAttrString(obj->fake.get(), "requires_grad"));
        if (!rg) unsupported("tensor." + n + ": " + take_python_error());
        const bool made = obj->source && obj->source->kind == Source::kMade;
        if (rg.get() == Py_False || made) return make_const(n == "is_leaf" ? Py_True : Py_None);
        if (n == "is_leaf" && !obj->source) return make_const(Py_False);
      }
      // The gradient of a tensor the frame was given (clip_grad_norm_, an optimizer's step): an
      // input of its own, fetched through the tensor, or None. Of a tensor computed here it is
      // None until a backward the graph does not run.
      if (n == "grad" && obj->source && obj->source->kind != Source::kConstant) {
        auto in = input_tensors_.find(obj->node);
        if (in != input_tensors_.end()) {
          PyRef g = PyRef::steal(PyObject_GetAttr(in->second, name));
          if (!g) unsupported("tensor.grad: " + take_python_error());
          if (g.get() == Py_None || probe_is_tensor(g.get())) return wrap(g.get(), tensor_grad_source(obj->source));
        }
      }
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
      if (!v) unsupported("tensor attribute " + n + ": " + take_python_error());
      if (is_constant_like(v.get())) return make_const(v.get());
      if (n == "shape" && holds_symint(v.get())) return record_op(graph::Op::kCallMethod, nullptr, "size", {obj}, {});
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
          if (n == "_fields" && is_constant_like(fields.get())) return make_const(fields.get());
        }
      }
      [[fallthrough]];
    case VarKind::kList:
    case VarKind::kDict: {
      return make_container_method(obj, n);
    }
    case VarKind::kConst: {
      PyRef v = PyRef::steal(PyObject_GetAttr(obj->obj.get(), name));
      if (!v) unsupported("attribute " + n + ": " + take_python_error());
      return is_constant_like(v.get()) ? make_const(v.get()) : make_object(v.get(), nullptr);
    }
    case VarKind::kObject: break;
    case VarKind::kSuper: return super_attr(obj, name);
    case VarKind::kNewObject: return new_object_getattr(obj, name);
    default: unsupported("attribute " + n + " of a " + kind_name(obj->kind));
  }
  PyObject* o = obj->obj.get();
  if (VarPtr stored = stored_attr(obj, name)) return stored;
  const SourcePtr& src = obj->source;
  // Lookups in a dict the frame reaches keep the dict's Var (existing_dict_lookup reads one entry).
  if (src && PyDict_CheckExact(o) && (n == "get" || n == "__getitem__" || n == "__contains__")) return make_container_method(obj, n);
  // object.__reduce_ex__ stays symbolic too (reduce_ex), for copy.deepcopy.
  if (src && n == "__reduce_ex__" && !PyType_Check(o) && _PyType_Lookup(Py_TYPE(o), name) == _PyType_Lookup(&PyBaseObject_Type, name))
    return make_container_method(obj, n);
  if (PyType_Check(o)) {  // class attributes: resolved by Python; guarded where found in the MRO
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + take_python_error());
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
    identity(obj);  // a slot or C-level data descriptor: read once, from this very object
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + take_python_error());
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
    if (keeps_dict_method(obj, name, descr)) return make_container_method(dict_contents(obj), n);  // a ModelOutput passed in
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
    // A plain class attribute is what the class-attribute guard above checks; anything bound to
    // the object (a C method of a dict subclass) depends on this very object.
    if (Py_TYPE(descr)->tp_descr_get) identity(obj);
    PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
    if (!v) unsupported("attribute " + n + ": " + take_python_error());
    return wrap_unguarded(v.get(), n);
  }
  if (is_module_instance(o) && dp && *dp) {
    for (const char* member : {"_parameters", "_buffers", "_modules"}) {
      PyObject* d = PyDict_GetItemString(*dp, member);
      PyObject* v = d && PyDict_Check(d) ? PyDict_GetItem(d, name) : nullptr;
      if (v) return src ? wrap(v, module_member_source(src, member, name)) : wrap_unguarded(v, n);
    }
  }
  identity(obj);  // found by __getattr__ or some other way kiln does not follow
  PyRef v = PyRef::steal(PyObject_GetAttr(o, name));
  if (!v) unsupported("attribute " + n + ": " + take_python_error());
  return wrap_unguarded(v.get(), n);
}

bool Interpreter::has_attr_guarded(const VarPtr& o, PyObject* name) {
  PyObject* obj = o->obj.get();
  PyObject** dp = _PyObject_GetDictPtr(obj);
  PyObject* descr = _PyType_Lookup(Py_TYPE(obj), name);
  if (descr && PyObject_TypeCheck(descr, &PyProperty_Type)) {  // a property: present (its getter is inlined)
    guard_class_attr(type_lookup_source(o->source, name, false), descr);
    return true;
  }
  if (descr && Py_TYPE(descr)->tp_descr_set) return PyObject_HasAttr(identity(o), name);  // a slot may be unset
  if (dp && *dp && PyDict_Contains(*dp, name) == 1) {
    guard(instance_dict_source(o->source), GuardLeaf::kHasKey, name);
    return true;
  }
  PyErr_Clear();
  if (dp && *dp) guard(instance_dict_source(o->source), GuardLeaf::kLacksKey, name);
  guard_class_attr(type_lookup_source(o->source, name, false), descr);
  if (descr) return true;
  if (_PyType_Lookup(Py_TYPE(obj), PyRef::steal(PyUnicode_FromString("__getattr__")).get())) return PyObject_HasAttr(identity(o), name);
  return false;
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
  if (inst->kind == VarKind::kNewObject) return make_container_method(inst, py_str(name));
  if (inst->kind != VarKind::kObject) unsupported("super()." + py_str(name) + " on a " + kind_name(inst->kind));
  if (i < n && keeps_dict_method(inst, name, _PyType_Lookup(reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i)), name)))
    return make_container_method(dict_contents(inst), py_str(name));
  PyRef real_super = PyRef::steal(PyObject_CallFunctionObjArgs(reinterpret_cast<PyObject*>(&PySuper_Type), sup->obj.get(), identity(inst), nullptr));
  PyRef v = real_super ? PyRef::steal(PyObject_GetAttr(real_super.get(), name)) : PyRef();
  if (!v) unsupported("super()." + py_str(name) + ": " + take_python_error());
  return wrap_unguarded(v.get(), py_str(name));
}

}  // namespace kiln::frontend
