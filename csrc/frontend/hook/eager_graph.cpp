// EagerGraph: steps built once from the graph (callable, argument templates, keyword names),
// then executed per call with vectorcall into a flat value table.
#include "frontend/hook/eager_graph.h"

#include "frontend/objects/tensor_probe.h"

namespace kiln::frontend {

namespace {

struct ArgT {
  enum Kind { kSlot, kConst, kTuple, kList } kind = kConst;
  int slot = -1;
  PyObject* obj = nullptr;  // borrowed from the graph's object table
  std::vector<ArgT> items;
};

struct Step {
  PyObject* callable = nullptr;    // call_function
  PyRef method;                    // call_method: name
  std::vector<ArgT> args;          // positional then keyword values
  PyRef kwnames;
  int out = -1;
};

struct EagerGraphObject {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  int num_inputs;
  int num_values;
  std::vector<Step>* steps;
  std::vector<int>* outputs;
  std::vector<PyRef>* objects;
  std::string* code;
};

PyObject* materialize(const ArgT& a, PyObject** vals) {
  switch (a.kind) {
    case ArgT::kSlot: return Py_NewRef(vals[a.slot]);
    case ArgT::kConst: return Py_NewRef(a.obj);
    case ArgT::kTuple:
    case ArgT::kList: {
      PyObject* seq = a.kind == ArgT::kTuple ? PyTuple_New(a.items.size()) : PyList_New(a.items.size());
      for (size_t i = 0; i < a.items.size(); ++i) {
        PyObject* it = materialize(a.items[i], vals);
        if (a.kind == ArgT::kTuple) PyTuple_SET_ITEM(seq, i, it);
        else PyList_SET_ITEM(seq, i, it);
      }
      return seq;
    }
  }
  return nullptr;
}

PyObject* eager_graph_call(PyObject* self_obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<EagerGraphObject*>(self_obj);
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n != self->num_inputs || kwnames) {
    PyErr_Format(PyExc_TypeError, "compiled graph takes %d positional inputs, got %zd", self->num_inputs, n);
    return nullptr;
  }
  const int nv = self->num_values;
  PyObject* small[64];
  std::vector<PyObject*> big;
  PyObject** vals = small;
  if (nv > 64) { big.assign(nv, nullptr); vals = big.data(); }
  else for (int i = 0; i < nv; ++i) vals[i] = nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) vals[i] = Py_NewRef(args[i]);
  bool grad = probe_grad_enabled();
  PyObject* result = nullptr;
  PyObject* argv_small[17];
  for (const Step& s : *self->steps) {
    size_t na = s.args.size();
    std::vector<PyObject*> argv_big;
    PyObject** argv = argv_small + 1;
    if (na > 16) { argv_big.assign(na + 1, nullptr); argv = argv_big.data() + 1; }
    for (size_t i = 0; i < na; ++i) argv[i] = materialize(s.args[i], vals);
    size_t npos = na - (s.kwnames ? PyTuple_GET_SIZE(s.kwnames.get()) : 0);
    PyObject* r;
    if (s.method) {
      argv[-1] = nullptr;
      r = PyObject_VectorcallMethod(s.method.get(), argv, npos | PY_VECTORCALL_ARGUMENTS_OFFSET, s.kwnames.get());
    } else {
      r = PyObject_Vectorcall(s.callable, argv, npos | PY_VECTORCALL_ARGUMENTS_OFFSET, s.kwnames.get());
    }
    for (size_t i = 0; i < na; ++i) Py_DECREF(argv[i]);
    if (!r) goto done;
    Py_XSETREF(vals[s.out], r);
  }
  result = PyTuple_New(self->outputs->size());
  for (size_t i = 0; i < self->outputs->size(); ++i) PyTuple_SET_ITEM(result, i, Py_NewRef(vals[(*self->outputs)[i]]));
done:
  if (!result && probe_grad_enabled() != grad) probe_set_grad_enabled(grad);
  for (int i = 0; i < nv; ++i) Py_XDECREF(vals[i]);
  return result;
}

void eager_graph_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<EagerGraphObject*>(o);
  delete self->steps;
  delete self->outputs;
  delete self->objects;
  delete self->code;
  Py_TYPE(o)->tp_free(o);
}

PyObject* eager_graph_repr(PyObject* o) {
  auto* self = reinterpret_cast<EagerGraphObject*>(o);
  return PyUnicode_FromString(self->code->c_str());
}

PyTypeObject EagerGraphType = {PyVarObject_HEAD_INIT(nullptr, 0)};

ArgT build_arg(const graph::Arg& a, const std::vector<int>& slot_of, const Capture& cap) {
  ArgT t;
  switch (a.kind) {
    case graph::Arg::kNode: t.kind = ArgT::kSlot; t.slot = slot_of.at(a.node); break;
    case graph::Arg::kConst: t.kind = ArgT::kConst; t.obj = cap.objects.at(a.handle).get(); break;
    case graph::Arg::kTuple:
    case graph::Arg::kList:
      t.kind = a.kind == graph::Arg::kTuple ? ArgT::kTuple : ArgT::kList;
      for (const auto& it : a.items) t.items.push_back(build_arg(it, slot_of, cap));
      break;
  }
  return t;
}

}  // namespace

bool register_eager_graph_type(PyObject* module) {
  EagerGraphType.tp_name = "kiln._C.EagerGraph";
  EagerGraphType.tp_basicsize = sizeof(EagerGraphObject);
  EagerGraphType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  EagerGraphType.tp_vectorcall_offset = offsetof(EagerGraphObject, vectorcall);
  EagerGraphType.tp_call = PyVectorcall_Call;
  EagerGraphType.tp_dealloc = eager_graph_dealloc;
  EagerGraphType.tp_repr = eager_graph_repr;
  EagerGraphType.tp_doc = "A captured graph run op by op from C++ (the 'eager' backend).";
  if (PyType_Ready(&EagerGraphType) < 0) return false;
  Py_INCREF(&EagerGraphType);
  return PyModule_AddObject(module, "EagerGraph", reinterpret_cast<PyObject*>(&EagerGraphType)) == 0;
}

PyObject* make_eager_graph(const Capture& cap) {
  auto* self = PyObject_New(EagerGraphObject, &EagerGraphType);
  if (!self) return nullptr;
  self->vectorcall = eager_graph_call;
  self->steps = new std::vector<Step>();
  self->outputs = new std::vector<int>();
  self->objects = new std::vector<PyRef>(cap.objects);
  self->code = new std::string(cap.graph->to_python());
  const auto& nodes = cap.graph->nodes();
  std::vector<int> slot_of(nodes.size(), -1);
  int slots = 0;
  for (const auto& n : nodes)
    if (n.op == graph::Op::kPlaceholder) slot_of[n.id] = slots++;
  self->num_inputs = slots;
  for (const auto& n : nodes) {
    if (n.op == graph::Op::kPlaceholder) continue;
    if (n.op == graph::Op::kOutput) {
      for (const auto& a : n.args[0].items) self->outputs->push_back(slot_of.at(a.node));
      continue;
    }
    Step s;
    if (n.op == graph::Op::kCallMethod) s.method = PyRef::steal(PyUnicode_InternFromString(n.target.c_str()));
    else s.callable = cap.objects.at(n.target_handle).get();
    for (const auto& a : n.args) s.args.push_back(build_arg(a, slot_of, cap));
    if (!n.kwargs.empty()) {
      s.kwnames = PyRef::steal(PyTuple_New(n.kwargs.size()));
      for (size_t i = 0; i < n.kwargs.size(); ++i) {
        PyTuple_SET_ITEM(s.kwnames.get(), i, PyUnicode_InternFromString(n.kwargs[i].first.c_str()));
        s.args.push_back(build_arg(n.kwargs[i].second, slot_of, cap));
      }
    }
    s.out = slot_of[n.id] = slots++;
    self->steps->push_back(std::move(s));
  }
  self->num_values = slots;
  return reinterpret_cast<PyObject*>(self);
}

}  // namespace kiln::frontend
