// Fetching and printing of sources. Every fetch uses C-level dict/tuple/list access only.
#include "frontend/guards/sources.h"

#include "frontend/objects/torch_types.h"

#include "graph/graph.h"

namespace kiln::frontend {

// The UTF-8 text of a new str reference (stolen), or "<?>" if making it failed.
static std::string text_of(PyObject* str) {
  PyRef r = PyRef::steal(str);
  const char* s = r ? PyUnicode_AsUTF8(r.get()) : nullptr;
  if (!s) { PyErr_Clear(); return "<?>"; }
  return s;
}

std::string py_repr(PyObject* o) { return text_of(PyObject_Repr(o)); }
std::string py_str(PyObject* o) { return text_of(PyObject_Str(o)); }

static PyObject* instance_dict(PyObject* o) {
  PyObject** dp = _PyObject_GetDictPtr(o);
  return (dp && *dp && PyDict_Check(*dp)) ? *dp : nullptr;
}

static PyObject* dict_get(PyObject* d, PyObject* key) {
  PyObject* v = PyDict_GetItemWithError(d, key);
  if (!v && PyErr_Occurred()) PyErr_Clear();
  return v;
}

PyObject* Source::root(const FrameView& f) const {
  switch (kind) {
    case kLocal: return f.locals[index];
    case kFrameFunc: return f.func;
    case kConstant: return obj.get();
    case kGlobal: return dict_get(obj.get(), key.get());
    case kMade: return f.made ? f.made[index] : nullptr;
    default: return nullptr;
  }
}

PyObject* Source::fetch(const FrameView& f) const {
  if (!parent) return root(f);
  PyObject* p = parent->fetch(f);
  return p ? step(p) : nullptr;
}

PyObject* Source::step(PyObject* p) const {
  switch (kind) {
    case kClosureCell: {
      if (!PyFunction_Check(p)) return nullptr;
      PyObject* cl = PyFunction_GET_CLOSURE(p);
      if (!cl || index >= PyTuple_GET_SIZE(cl)) return nullptr;
      return PyCell_GET(PyTuple_GET_ITEM(cl, index));
    }
    case kInstanceAttr: {
      PyObject* d = instance_dict(p);
      return d ? dict_get(d, key.get()) : nullptr;
    }
    case kModuleMember: {
      PyObject* d = instance_dict(p);
      if (!d) return nullptr;
      PyObject* m = dict_get(d, member_key.get());
      return (m && PyDict_Check(m)) ? dict_get(m, key.get()) : nullptr;
    }
    case kItem:
      if (PyList_CheckExact(p)) return index < PyList_GET_SIZE(p) ? PyList_GET_ITEM(p, index) : nullptr;
      if (PyTuple_Check(p)) return index < PyTuple_GET_SIZE(p) ? PyTuple_GET_ITEM(p, index) : nullptr;
      return nullptr;
    case kDictItem: return PyDict_Check(p) ? dict_get(p, key.get()) : nullptr;
    case kTypeLookup: {
      PyTypeObject* t = index == 1 ? (PyType_Check(p) ? reinterpret_cast<PyTypeObject*>(p) : nullptr) : Py_TYPE(p);
      return t ? _PyType_Lookup(t, key.get()) : nullptr;
    }
    case kInstanceDict: return instance_dict(p);
    case kWeakReferent: return PyWeakref_CheckRefExact(p) ? PyWeakref_GetObject(p) : nullptr;
    case kTensorGrad: {
      // A new reference to the gradient's Python object, given back at once: the tensor keeps
      // that object alive while it holds the gradient (PyTorch preserves a tensor's PyObject).
      if (!PyObject_TypeCheck(p, reinterpret_cast<PyTypeObject*>(g_torch.tensor_type))) return nullptr;
      static PyObject* grad = PyUnicode_InternFromString("grad");
      PyObject* g = PyObject_GetAttr(p, grad);
      if (!g) { PyErr_Clear(); return nullptr; }
      Py_DECREF(g);
      return g;
    }
    default: return nullptr;
  }
}

std::string Source::placeholder_hint() const {
  std::string out;
  for (const Source* s = this; s; s = s->parent.get()) {
    std::string part;
    switch (s->kind) {
      case kLocal: part = "l_" + s->name; break;
      case kGlobal: part = "g_" + py_str(s->key.get()); break;
      case kClosureCell: part = "c_" + s->name; break;
      case kInstanceAttr: case kModuleMember: case kDictItem: part = py_str(s->key.get()); break;
      case kItem: part = std::to_string(s->index); break;
      case kConstant: part = "const"; break;
      case kTypeLookup: part = "cls_" + py_str(s->key.get()); break;
      case kInstanceDict: part = "dict"; break;
      case kFrameFunc: part = "fn"; break;
      case kMade: part = "made_" + std::to_string(s->index); break;
      case kWeakReferent: part = "referent"; break;
      case kTensorGrad: part = "grad"; break;
    }
    out = out.empty() ? part : part + "_" + out;
  }
  return graph::sanitize_identifier(out) + "_";
}

static std::shared_ptr<Source> make(Source::Kind k, SourcePtr parent) {
  auto s = std::make_shared<Source>();
  s->kind = k;
  s->parent = std::move(parent);
  return s;
}

SourcePtr local_source(int index, const std::string& name) {
  auto s = make(Source::kLocal, nullptr);
  s->index = index;
  s->name = name;
  s->text = "L['" + name + "']";
  return s;
}

SourcePtr frame_func_source() {
  auto s = make(Source::kFrameFunc, nullptr);
  s->text = "FN";
  return s;
}

SourcePtr closure_cell_source(SourcePtr func, int index, const std::string& name) {
  auto s = make(Source::kClosureCell, func);
  s->index = index;
  s->name = name;
  s->text = s->parent->repr() + ".__closure__[" + std::to_string(index) + "].cell_contents";
  return s;
}

SourcePtr global_source(PyObject* dict, PyObject* name, bool builtin) {
  auto s = make(Source::kGlobal, nullptr);
  s->obj = PyRef::borrow(dict);
  s->key = PyRef::borrow(name);
  s->text = std::string(builtin ? "B['" : "G['") + py_str(name) + "']";
  return s;
}

SourcePtr attr_source(SourcePtr parent, PyObject* name) {
  auto s = make(Source::kInstanceAttr, parent);
  s->key = PyRef::borrow(name);
  s->text = parent->repr() + "." + py_str(name);
  return s;
}

SourcePtr module_member_source(SourcePtr parent, const std::string& member, PyObject* name) {
  auto s = make(Source::kModuleMember, parent);
  s->member = member;
  s->member_key = PyRef::steal(PyUnicode_InternFromString(member.c_str()));
  s->key = PyRef::borrow(name);
  s->text = parent->repr() + "." + member + "[" + py_repr(name) + "]";
  return s;
}

SourcePtr item_source(SourcePtr parent, int index) {
  auto s = make(Source::kItem, parent);
  s->index = index;
  s->text = parent->repr() + "[" + std::to_string(index) + "]";
  return s;
}

SourcePtr dict_item_source(SourcePtr parent, PyObject* key) {
  auto s = make(Source::kDictItem, parent);
  s->key = PyRef::borrow(key);
  s->text = parent->repr() + "[" + py_repr(key) + "]";
  return s;
}

SourcePtr type_lookup_source(SourcePtr parent, PyObject* name, bool parent_is_type) {
  auto s = make(Source::kTypeLookup, parent);
  s->key = PyRef::borrow(name);
  s->index = parent_is_type ? 1 : 0;
  s->text = (parent_is_type ? parent->repr() : "type(" + parent->repr() + ")") + ".__mro__lookup(" + py_repr(name) + ")";
  return s;
}

SourcePtr instance_dict_source(SourcePtr parent) {
  auto s = make(Source::kInstanceDict, parent);
  s->text = parent->repr() + ".__dict__";
  return s;
}

SourcePtr made_source(PyObject* maker, int index, const std::string& label) {
  auto s = make(Source::kMade, nullptr);
  s->obj = PyRef::borrow(maker);
  s->index = index;
  s->text = "MADE[" + std::to_string(index) + "](" + label + ")";
  return s;
}

SourcePtr weak_referent_source(SourcePtr weakref) {
  auto s = make(Source::kWeakReferent, weakref);
  s->text = weakref->repr() + "()";
  return s;
}

SourcePtr tensor_grad_source(SourcePtr tensor) {
  auto s = make(Source::kTensorGrad, tensor);
  s->text = tensor->repr() + ".grad";
  return s;
}

SourcePtr constant_source(PyObject* obj, const std::string& label) {
  auto s = make(Source::kConstant, nullptr);
  s->obj = PyRef::borrow(obj);
  s->text = "CONST(" + label + ")";
  return s;
}

}  // namespace kiln::frontend
