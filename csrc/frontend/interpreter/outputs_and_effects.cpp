// What a capture hands back besides the graph: how to rebuild the return value from the graph's
// outputs (OutputTemplate), and attribute assignments on existing objects to replay afterwards.
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/fake_id.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// The __exit__ of a grad-mode context entered inside the capture, as a real callable for the
// frame's stack at a graph break: called with the with-statement's three arguments, it restores
// the grad mode its `self` names (True/False; None: a context that changed nothing).
static PyObject* restore_grad_mode(PyObject* self, PyObject*) {
  if (self != Py_None) probe_set_grad_enabled(self == Py_True);
  Py_RETURN_NONE;
}
static PyMethodDef g_restore_grad_mode = {"__exit__", restore_grad_mode, METH_VARARGS, "restores the grad mode (kiln, at a graph break)"};

// The __exit__ of a torch.inference_mode block that a graph break entered for real (see
// continue_after_break): leaves it (the guard kiln pushed); `self` is the grad mode it restores.
static PyObject* exit_inference_mode(PyObject*, PyObject*) {
  if (!probe_pop_inference_mode()) {
    PyErr_SetString(PyExc_RuntimeError, "kiln: leaving an inference_mode block kiln did not enter");
    return nullptr;
  }
  Py_RETURN_FALSE;
}
static PyMethodDef g_exit_inference_mode = {"__exit__", exit_inference_mode, METH_VARARGS, "leaves torch.inference_mode (kiln, at a graph break)"};

int inference_mode_exit(PyObject* f) {
  if (!PyCFunction_Check(f) || reinterpret_cast<PyCFunctionObject*>(f)->m_ml != &g_exit_inference_mode) return -1;
  return PyCFunction_GET_SELF(f) == Py_True;
}

int grad_mode_restorer(PyObject* f) {
  if (!PyCFunction_Check(f) || reinterpret_cast<PyCFunctionObject*>(f)->m_ml != &g_restore_grad_mode) return -1;
  PyObject* self = PyCFunction_GET_SELF(f);
  return self == Py_None ? 2 : self == Py_True;
}

int Interpreter::begin_shared_template(const VarPtr& v) {
  if (!templates_in_progress_.insert(v.get()).second) return -1;
  auto it = template_ids_.find(v.get());
  if (it != template_ids_.end()) return it->second;
  template_vars_.push_back(v);
  template_ids_.emplace(v.get(), cap_.shared_objects);
  return cap_.shared_objects++;
}

static OutputTemplate make_template_of(Interpreter* self, const VarPtr& v, std::vector<graph::Arg>& outs,
                                       std::unordered_map<int, int>& out_index, const std::function<void(const std::string&)>& fail);

// Containers and objects the capture made are rebuilt once per run however many places hold
// them (OutputTemplate::shared), so `b = a` still holds after a graph break or in a result.
OutputTemplate make_template(Interpreter* self, const VarPtr& v, std::vector<graph::Arg>& outs,
                             std::unordered_map<int, int>& out_index, const std::function<void(const std::string&)>& fail) {
  if (VarPtr owner = v->owner.lock(); owner && owner->attrs_dict.get() == v.get()) {  // vars(obj): obj.__dict__
    OutputTemplate t;
    t.kind = OutputTemplate::kGetAttr;
    t.obj = PyRef::steal(PyUnicode_FromString("__dict__"));
    t.items.push_back(make_template(self, owner, outs, out_index, fail));
    return t;
  } else if (owner) {  // Interpreter::dict_contents: no object of its own to hand back
    fail("the contents of a dict subclass instance the frame was given are handed back");
    return OutputTemplate();
  }
  const bool rebuilt = (v->kind == VarKind::kList || v->kind == VarKind::kDict || v->kind == VarKind::kNewObject) &&
                       !(v->source && !v->fresh);
  if (!rebuilt) return make_template_of(self, v, outs, out_index, fail);
  const int id = self->begin_shared_template(v);
  if (id < 0) {
    fail("an object made during the capture holds itself");
    return OutputTemplate();
  }
  OutputTemplate t = make_template_of(self, v, outs, out_index, fail);
  self->end_shared_template(v.get());
  if (t.kind == OutputTemplate::kList || t.kind == OutputTemplate::kDict || t.kind == OutputTemplate::kNewObject) t.shared = id;
  return t;
}

static OutputTemplate make_template_of(Interpreter* self, const VarPtr& v, std::vector<graph::Arg>& outs,
                                       std::unordered_map<int, int>& out_index, const std::function<void(const std::string&)>& fail) {
  OutputTemplate t;
  // The frame's own tensors, numpy arrays, lists and dicts are handed back as themselves (mutated in place by
  // the graph or by replayed side effects), as eager would; containers made for this call (its
  // *args/**kwargs) are rebuilt from their symbolic contents.
  if (v->source && !v->fresh && (v->kind == VarKind::kTensor || v->kind == VarKind::kNdarray || v->kind == VarKind::kList || v->kind == VarKind::kDict || v->type_guarded)) {
    t.kind = OutputTemplate::kFetch;
    t.source = v->source;
    return t;
  }
  switch (v->kind) {
    case VarKind::kTensor:
    case VarKind::kSymInt: {  // a size computed by the graph at run time, or a dynamic float
      if (v->float_tensor && v->source) {  // a float argument handed back as it came
        t.kind = OutputTemplate::kFetch;
        t.source = v->source;
        return t;
      }
      t.kind = OutputTemplate::kGraphOut;
      t.as_float = v->float_tensor;
      auto it = out_index.find(v->node);
      if (it == out_index.end()) {
        it = out_index.emplace(v->node, static_cast<int>(outs.size())).first;
        outs.push_back(graph::Arg::of_node(v->node));
      }
      t.index = it->second;
      return t;
    }
    case VarKind::kConst:
    case VarKind::kObject:
      if (v->kind == VarKind::kObject && self->is_trace_value(v->obj.get())) {
        // A set/deque/Counter... the capture built: each call gets its own copy of it.
        if (!self->claim_trace_output(v->obj.get())) fail("a container built during the capture is handed back twice");
        if (self->holds_token(v->obj.get())) fail("a set of objects or tensors made during the capture is handed back");
        if (PyDictKeys_Check(v->obj.get()) || PyDictValues_Check(v->obj.get()) || PyDictItems_Check(v->obj.get()))
          fail("a view of a container built during the capture is handed back");
        t.kind = OutputTemplate::kCopy;
        t.obj = v->obj;
        PyRef copy_mod = PyRef::steal(PyImport_ImportModule("copy"));
        if (copy_mod) t.dict_setitem = PyRef::steal(PyObject_GetAttrString(copy_mod.get(), "deepcopy"));
        if (!t.dict_setitem) fail("copy.deepcopy is unavailable: " + take_python_error());
        return t;
      }
      // A builtin method bound to a trace-time value would act on the capture's object, not on
      // the copy the caller gets.
      if (PyCFunction_Check(v->obj.get()) && PyCFunction_GET_SELF(v->obj.get()) && self->is_trace_value(PyCFunction_GET_SELF(v->obj.get())))
        fail("a method of a container built during the capture is live at the end of the graph");
      if (v->kind == VarKind::kObject && v->fresh && PyExceptionInstance_Check(v->obj.get()))
        fail("an exception object made during the capture is handed back (each call would share it)");
      if (v->kind == VarKind::kConst && holds_fake_id(v->obj.get()))
        fail("id() of a value that exists only while compiling is handed back");
      t.kind = OutputTemplate::kConst;
      t.obj = v->obj;
      return t;
    case VarKind::kTuple:
    case VarKind::kList:
      if (v->kind == VarKind::kList && v->obj) break;  // a ModuleList slice: only usable inside
      t.kind = v->kind == VarKind::kTuple ? OutputTemplate::kTuple : OutputTemplate::kList;
      if (v->kind == VarKind::kTuple) t.obj = v->obj;
      for (const auto& it : v->items) t.items.push_back(make_template(self, it, outs, out_index, fail));
      return t;
    case VarKind::kDict: {
      t.kind = OutputTemplate::kDict;
      t.obj = PyRef::steal(PyTuple_New(v->keys.size()));
      for (size_t i = 0; i < v->keys.size(); ++i) PyTuple_SET_ITEM(t.obj.get(), i, Py_NewRef(v->keys[i].get()));
      if (holds_fake_id(t.obj.get())) fail("a dict keyed by id() of values that exist only while compiling is handed back");
      for (const auto& it : v->items) t.items.push_back(make_template(self, it, outs, out_index, fail));
      t.dict_setitem = v->obj;  // an OrderedDict or defaultdict made during capture: rebuilt as one
      if (v->obj && v->self) t.names = v->self->obj;  // the defaultdict's factory
      return t;
    }
    case VarKind::kNewObject: {
      t.kind = OutputTemplate::kNewObject;
      t.obj = v->obj;
      t.names = PyRef::steal(PyTuple_New(v->keys.size()));
      for (size_t i = 0; i < v->keys.size(); ++i) PyTuple_SET_ITEM(t.names.get(), i, Py_NewRef(v->keys[i].get()));
      for (const auto& it : v->items) t.items.push_back(make_template(self, it, outs, out_index, fail));
      if (v->self) {
        t.dict_part.push_back(make_template(self, v->self, outs, out_index, fail));
        // Fill the contents through the builtin base (OrderedDict keeps its own order links).
        PyObject* mro = reinterpret_cast<PyTypeObject*>(v->obj.get())->tp_mro;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro) && !t.dict_setitem; ++i) {
          auto* base = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
          if (!(base->tp_flags & Py_TPFLAGS_HEAPTYPE)) t.dict_setitem = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(base), "__setitem__"));
        }
        if (!t.dict_setitem) fail("cannot find the dict base of a returned object");
      }
      return t;
    }
    case VarKind::kGradModeExit: {  // a with-block around a graph break
      t.kind = OutputTemplate::kConst;
      if (v->name == "inference") {
        t.obj = PyRef::steal(PyCFunction_New(&g_exit_inference_mode, v->flag ? Py_True : Py_False));
        if (!t.obj) fail("cannot rebuild an inference_mode block's __exit__");
        return t;
      }
      t.obj = PyRef::steal(PyCFunction_New(&g_restore_grad_mode, v->name == "no-op" ? Py_None : v->flag ? Py_True : Py_False));
      if (!t.obj) fail("cannot rebuild a grad-mode context's __exit__");
      return t;
    }
    case VarKind::kAutocastExit:  // a torch.autocast block around a graph break
      t.kind = OutputTemplate::kConst;
      t.obj = PyRef::steal(autocast_exit_at_break_function());
      if (!t.obj) fail("cannot make a torch.autocast block's __exit__");
      return t;
    case VarKind::kNdarray: {  // a numpy value computed in the graph: its tensor's numpy()
      t.kind = OutputTemplate::kNumpy;
      t.obj = PyRef::borrow(v->flag ? Py_True : Py_False);
      auto tensor = std::make_shared<Var>(VarKind::kTensor);
      tensor->node = v->node;
      tensor->fake = v->fake;
      tensor->device = v->device;
      t.items.push_back(make_template(self, tensor, outs, out_index, fail));
      return t;
    }
    case VarKind::kTensorMethod:  // `t.item` on the stack at a graph break
      t.kind = OutputTemplate::kGetAttr;
      t.obj = PyRef::steal(PyUnicode_FromString(v->name.c_str()));
      t.items.push_back(make_template(self, v->self, outs, out_index, fail));
      return t;
    case VarKind::kBoundMethod:
      if (!PyFunction_Check(v->obj.get())) break;
      t.kind = OutputTemplate::kMethod;
      t.obj = v->obj;
      t.items.push_back(make_template(self, v->self, outs, out_index, fail));
      return t;
    default:
      break;
  }
  fail(std::string("cannot return a ") + kind_name(v->kind) + " from a compiled function");
  return t;
}

// ---------------------------------------------------------------- side effects

void Interpreter::store_attr(const VarPtr& obj, PyObject* name, const VarPtr& value) {
  std::string n = py_str(name);
  if (obj->kind == VarKind::kNewObject) {
    PyObject* setter = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), PyRef::steal(PyUnicode_FromString("__setattr__")).get());
    if (setter && PyFunction_Check(setter)) inline_function(setter, nullptr, {obj, make_const(name), value}, {}, nullptr);
    else set_new_object_attr(obj, name, value);
    return;
  }
  if (obj->kind != VarKind::kObject) unsupported("attribute assignment (" + n + ") on a " + kind_name(obj->kind));
  PyTypeObject* t = Py_TYPE(obj->obj.get());
  // Replay goes through setattr(), so only types whose assignment kiln can mirror: plain
  // instance attributes (object.__setattr__) and nn.Module's own __setattr__.
  PyObject* setter = _PyType_Lookup(t, PyRef::steal(PyUnicode_FromString("__setattr__")).get());
  PyObject* object_setter = _PyType_Lookup(&PyBaseObject_Type, PyRef::steal(PyUnicode_FromString("__setattr__")).get());
  PyObject* module_setter = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(g_torch.module_type), PyRef::steal(PyUnicode_FromString("__setattr__")).get());
  if (setter != object_setter && setter != module_setter) unsupported("attribute assignment (" + n + ") on " + t->tp_name + ", which defines __setattr__");
  if (PyType_Check(obj->obj.get()) || PyModule_Check(obj->obj.get())) unsupported("assignment to a class or module attribute (" + n + ")");
  // A number computed from sizes or dynamic floats (`self.seen += self.tau`) is stored as the
  // graph computes it, as a function returns one.
  if (value->kind != VarKind::kTensor && value->kind != VarKind::kConst && value->kind != VarKind::kObject &&
      value->kind != VarKind::kTuple && value->kind != VarKind::kList && value->kind != VarKind::kDict && value->kind != VarKind::kSymInt)
    unsupported("assigning a " + std::string(kind_name(value->kind)) + " to an attribute (" + n + ")");
  attr_stores_.push_back({obj, PyRef::borrow(name), value});
}

// del obj.name / delattr(obj, name) on an object made during the capture (its class's Python
// __delattr__ inlined when it has one). On an existing object it would be a side effect kiln does
// not replay.
void Interpreter::delete_attr(const VarPtr& obj, PyObject* name) {
  if (obj->kind != VarKind::kNewObject) unsupported("deleting attribute " + py_str(name) + " of a " + kind_name(obj->kind));
  PyObject* deleter = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), PyRef::steal(PyUnicode_FromString("__delattr__")).get());
  if (deleter && PyFunction_Check(deleter)) inline_function(deleter, nullptr, {obj, make_const(name)}, {}, nullptr);
  else del_new_object_attr(obj, name);
}

VarPtr Interpreter::stored_attr(const VarPtr& obj, PyObject* name) {
  for (auto it = attr_stores_.rbegin(); it != attr_stores_.rend(); ++it)
    if (it->target->obj.get() == obj->obj.get() && PyUnicode_Compare(it->name.get(), name) == 0) {
      // Stored through another path to the same object (`a.x = 1; return b.x` with a is b): the
      // answer holds only while they are the same object.
      if (it->target != obj) {
        identity(it->target);
        identity(obj);
      }
      return it->value;
    }
  return nullptr;
}

// ---------------------------------------------------------------- output template

PyObject* OutputTemplate::build(PyObject* const* outs, const FrameView& frame, std::vector<PyRef>& built) const {
  if (shared >= 0) {
    if (static_cast<size_t>(shared) >= built.size()) built.resize(shared + 1);
    if (built[shared]) return Py_NewRef(built[shared].get());
  }
  // Shared containers and objects are recorded as soon as they exist, before their contents.
  auto made = [&](PyObject* o) {
    if (o && shared >= 0) built[shared] = PyRef::borrow(o);
    return o;
  };
  switch (kind) {
    case kGraphOut: return as_float ? PyNumber_Float(outs[index]) : Py_NewRef(outs[index]);
    case kFetch: {
      PyObject* v = source->fetch(frame);
      if (!v) PyErr_Format(PyExc_RuntimeError, "kiln: %s vanished while the frame ran", source->repr().c_str());
      return Py_XNewRef(v);
    }
    case kGetAttr:
    case kMethod: {
      PyRef self = PyRef::steal(items[0].build(outs, frame, built));
      if (!self) return nullptr;
      return kind == kGetAttr ? PyObject_GetAttr(self.get(), obj.get()) : PyMethod_New(obj.get(), self.get());
    }
    case kConst: return Py_NewRef(obj.get());
    case kNumpy: {
      PyRef t = PyRef::steal(items[0].build(outs, frame, built));
      if (!t) return nullptr;
      PyObject* a = PyObject_CallMethod(t.get(), "numpy", nullptr);
      if (!a || obj.get() != Py_True) return a;
      PyRef empty = PyRef::steal(PyTuple_New(0));
      PyObject* s = PyObject_GetItem(a, empty.get());
      Py_DECREF(a);
      return s;
    }
    case kCopy: return PyObject_CallOneArg(dict_setitem.get(), obj.get());
    case kTuple:
    case kList: {
      PyObject* seq = kind == kList ? made(PyList_New(items.size())) : PyTuple_New(items.size());
      if (!seq) return nullptr;
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* it = items[i].build(outs, frame, built);
        if (!it) { Py_DECREF(seq); return nullptr; }
        if (kind == kList) PyList_SET_ITEM(seq, i, it);
        else PyTuple_SET_ITEM(seq, i, it);
      }
      if (kind == kTuple && obj) {  // a namedtuple / structseq type
        PyObject* r = PyObject_Call(obj.get(), seq, nullptr);
        if (!r) {  // structseq types take one sequence
          PyErr_Clear();
          r = PyObject_CallOneArg(obj.get(), seq);
        }
        Py_DECREF(seq);
        return r;
      }
      return seq;
    }
    case kNewObject: {
      // Rebuild from the final state: allocate without __init__, then fill dict contents and
      // attributes directly (bypassing overridden __setitem__/__setattr__).
      PyObject* inst = made(PyObject_CallMethod(obj.get(), "__new__", "O", obj.get()));
      if (!inst) return nullptr;
      if (!dict_part.empty()) {
        PyObject* d = dict_part[0].build(outs, frame, built);
        if (!d) { Py_DECREF(inst); return nullptr; }
        Py_ssize_t pos = 0;
        PyObject *k, *val;
        while (PyDict_Next(d, &pos, &k, &val)) {
          PyObject* r = PyObject_CallFunctionObjArgs(dict_setitem.get(), inst, k, val, nullptr);
          if (!r) { Py_DECREF(d); Py_DECREF(inst); return nullptr; }
          Py_DECREF(r);
        }
        Py_DECREF(d);
      }
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* it = items[i].build(outs, frame, built);
        if (!it || PyObject_GenericSetAttr(inst, PyTuple_GET_ITEM(names.get(), i), it) < 0) {
          Py_XDECREF(it);
          Py_DECREF(inst);
          return nullptr;
        }
        Py_DECREF(it);
      }
      return inst;
    }
    case kDict: {
      // An OrderedDict / defaultdict(factory) made empty, then filled in order.
      PyObject* d = made(!dict_setitem ? PyDict_New()
                                       : names ? PyObject_CallOneArg(dict_setitem.get(), names.get()) : PyObject_CallNoArgs(dict_setitem.get()));
      if (!d) return nullptr;
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* it = items[i].build(outs, frame, built);
        if (!it || PyObject_SetItem(d, PyTuple_GET_ITEM(obj.get(), i), it) < 0) {
          Py_XDECREF(it);
          Py_DECREF(d);
          return nullptr;
        }
        Py_DECREF(it);
      }
      return d;
    }
  }
  return nullptr;
}

}  // namespace kiln::frontend
