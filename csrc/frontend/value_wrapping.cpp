// Turning the frame's real values into symbolic ones (VariableBuilder's job): each value read
// through a source gets the guards that make specialising on it sound.
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter.h"
#include "frontend/interpreter_frame.h"
#include "frontend/tensor_probe.h"
#include "frontend/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- guards and wrapping

void Interpreter::guard(const SourcePtr& src, GuardLeaf::Kind kind, PyObject* obj, Py_ssize_t len) {
  if (!src || src->kind == Source::kConstant) return;
  GuardLeaf leaf{kind};
  leaf.obj = PyRef::borrow(obj);
  leaf.length = len;
  cap_.guards->add(src, std::move(leaf));
}

VarPtr Interpreter::tensor_input(PyObject* t, const SourcePtr& src) {
  auto v = std::make_shared<Var>(VarKind::kTensor);
  v->source = src;
  v->fake = PyRef::steal(probe_make_meta(t));
  v->device = PyRef::steal(probe_device(t));
  if (!v->fake || !v->device) unsupported("cannot make a meta tensor for " + src->repr() + ": " + take_python_error());
  v->node = cap_.graph->add_placeholder(src->placeholder_hint(), probe_describe_tensor(t));
  cap_.inputs.push_back(src);
  cap_.example_inputs.push_back(PyRef::borrow(t));
  cap_.removable.push_back(false);
  if (src->kind != Source::kConstant) {
    GuardLeaf leaf{GuardLeaf::kTensor};
    probe_read(t, &leaf.tensor);
    cap_.guards->add(src, std::move(leaf));
  }
  return v;
}

// A list or dict the frame was given is mutated: allowed (and written back after the graph) when
// kiln knows where to fetch it again and it is the only path to that object in this capture.
void Interpreter::note_container_mutation(const VarPtr& c, const std::string& what) {
  if (!c->source || c->fresh) return;  // made during this call: nothing outside sees it
  const std::string kind = kind_name(c->kind);
  const InputContainer* found = nullptr;
  for (const auto& ic : input_containers_)
    if (ic.var == c) found = &ic;
  if (!found || c->source->kind == Source::kConstant) unsupported("mutation of a shared " + kind + " (" + what + ") is a side effect");
  for (const auto& ic : input_containers_)
    if (ic.var != c && ic.object.get() == found->object.get()) unsupported("mutation of a " + kind + " the frame reaches two ways (" + what + ")");
  if (input_containers_.size() > 64) unsupported("mutation of a " + kind + " among too many input containers");
  for (const auto& m : mutated_containers_)
    if (m == c) return;
  mutated_containers_.push_back(c);
}

VarPtr Interpreter::wrap_unguarded(PyObject* o, const std::string& label) {
  if (probe_is_tensor(o)) return tensor_input(o, constant_source(o, label));
  return from_python_value(o, /*shared=*/true);
}

VarPtr Interpreter::wrap(PyObject* o, const SourcePtr& src) {
  if (!src) return wrap_unguarded(o, "value");
  auto memo = wrapped_.find(src->repr());
  if (memo != wrapped_.end()) return memo->second;
  VarPtr v;
  if (probe_is_tensor(o)) {
    v = tensor_input(o, src);
  } else if (is_constant_like(o)) {
    guard(src, GuardLeaf::kEquals, o);
    v = make_const(o);
  } else if ((PyList_CheckExact(o) || PyTuple_CheckExact(o)) && PySequence_Fast_GET_SIZE(o) <= 512) {
    guard(src, GuardLeaf::kType, reinterpret_cast<PyObject*>(Py_TYPE(o)));
    guard(src, GuardLeaf::kLen, nullptr, PySequence_Fast_GET_SIZE(o));
    v = make_seq(PyList_CheckExact(o) ? VarKind::kList : VarKind::kTuple, {});
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
      v->items.push_back(wrap(PySequence_Fast_GET_ITEM(o, i), item_source(src, static_cast<int>(i))));
    if (v->kind == VarKind::kList) input_containers_.push_back({v, PyRef::borrow(o)});
  } else if (PyDict_CheckExact(o) && PyDict_GET_SIZE(o) <= 512) {
    PyRef keys = PyRef::steal(PyDict_Keys(o));
    bool const_keys = true;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i)
      const_keys &= PyUnicode_CheckExact(PyList_GET_ITEM(keys.get(), i)) || PyLong_CheckExact(PyList_GET_ITEM(keys.get(), i));
    if (const_keys) {
      PyRef kt = PyRef::steal(PyList_AsTuple(keys.get()));
      guard(src, GuardLeaf::kDictKeys, kt.get());
      v = std::make_shared<Var>(VarKind::kDict);
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i) {
        PyObject* k = PyList_GET_ITEM(keys.get(), i);
        v->keys.push_back(PyRef::borrow(k));
        v->items.push_back(wrap(PyDict_GetItem(o, k), dict_item_source(src, k)));
      }
      input_containers_.push_back({v, PyRef::borrow(o)});
    }
  }
  if (!v) {
    guard(src, GuardLeaf::kId, o);
    v = make_object(o, src);
  }
  v->source = src;
  wrapped_[src->repr()] = v;
  return v;
}

PyRef Interpreter::as_python(const VarPtr& v, bool fake_tensors) {
  switch (v->kind) {
    case VarKind::kTensor: return fake_tensors ? v->fake : PyRef();
    case VarKind::kConst:
    case VarKind::kObject: return v->obj;
    case VarKind::kTuple:
    case VarKind::kList: {
      PyRef out = PyRef::steal(v->kind == VarKind::kTuple ? PyTuple_New(v->items.size()) : PyList_New(v->items.size()));
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i], fake_tensors);
        if (!it) return PyRef();
        if (v->kind == VarKind::kTuple) PyTuple_SET_ITEM(out.get(), i, it.release());
        else PyList_SET_ITEM(out.get(), i, it.release());
      }
      return out;
    }
    case VarKind::kDict: {
      PyRef out = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i], fake_tensors);
        if (!it) return PyRef();
        PyDict_SetItem(out.get(), v->keys[i].get(), it.get());
      }
      return out;
    }
    default: return PyRef();
  }
}

// Constants, and tuples, lists and dicts of them: values a pure function can be evaluated on now
// (objects are left out: what a function reads of them is not guarded).
static bool plain_value(const VarPtr& v, int depth = 0) {
  if (v->is_const()) return true;
  if (depth > 8 || (v->kind != VarKind::kTuple && v->kind != VarKind::kList && v->kind != VarKind::kDict)) return false;
  for (const auto& it : v->items)
    if (!plain_value(it, depth + 1)) return false;
  return true;
}

bool Interpreter::all_python_values(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  for (const auto& a : args)
    if (!plain_value(a)) return false;
  for (const auto& kv : kwargs)
    if (!plain_value(kv.second)) return false;
  return true;
}

bool Interpreter::all_const(const std::vector<VarPtr>& vs) {
  for (const auto& v : vs)
    if (!v->is_const()) return false;
  return true;
}

}  // namespace kiln::frontend
