// Recording tensor operations into the captured graph: fake arguments, the result's device, shape
// propagation on meta tensors, in-place operations, and grad-mode changes.
#include <cstring>
#include <functional>
#include <unordered_set>

#include "frontend/interpreter/autocast/autocast_dtypes.h"
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/fake_id.h"
#include "frontend/hook/options.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- graph recording

int Interpreter::handle(PyObject* o) {
  auto it = handles_.find(o);
  if (it != handles_.end()) return it->second;
  int h = static_cast<int>(cap_.objects.size());
  cap_.objects.push_back(PyRef::borrow(o));
  handles_[o] = h;
  return h;
}

// Why a call's metadata could not be computed, in the user's terms: where its meta run failed for
// want of values (pack_padded_sequence's CPU lengths, .item() inside a library, nonzero's
// count), the break is data-dependent, not a fault of the call.
static std::string propagation_failure(const std::string& name, const std::string& err) {
  if (err.find("nonzero") != std::string::npos)
    return "data-dependent output shape: " + name + " (how many elements are nonzero depends on the data)";
  for (const char* sign : {"meta tensor", " meta ", "data is not allocated", "item()"})
    if (err.find(sign) != std::string::npos)
      return "data-dependent: " + name + " reads tensor values, which capture does not have (its run on meta tensors: " + err + ")";
  return "shape propagation failed for " + name + ": " + err;
}

std::string qualified_name(PyObject* fn) {
  PyRef mod = PyRef::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!mod) PyErr_Clear();
  const std::string q = qualname_of(fn);
  if (q.empty()) return py_repr(fn);
  std::string m = (mod && PyUnicode_Check(mod.get())) ? py_str(mod.get()) : "";
  // torch.ops.aten.x and torch.ops.aten.x.default (module "torch._ops.aten"; a packet's
  // __qualname__ is its pybind class's name).
  if (m.rfind("torch._ops.", 0) == 0) {
    PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
    if (name && PyUnicode_Check(name.get())) return "torch.ops." + m.substr(11) + "." + py_str(name.get());
    PyErr_Clear();
  }
  if (m == "torch._C._VariableFunctions" || m == "torch._C") m = "torch";
  if (q.rfind("_VariableFunctionsClass.", 0) == 0) return "torch." + q.substr(24);
  if (m == "_operator") m = "operator";
  return m.empty() ? q : m + "." + q;
}

graph::Arg Interpreter::to_arg(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor:
    case VarKind::kSymInt:
    case VarKind::kSymSlice: return graph::Arg::of_node(v->node);
    case VarKind::kConst:
      refuse_fake_ids(v, "as a graph constant");
      return graph::Arg::of_const(handle(v->obj.get()), py_repr(v->obj.get()));
    case VarKind::kTuple:
    case VarKind::kList: {
      std::vector<graph::Arg> items;
      for (const auto& it : v->items) items.push_back(to_arg(it));
      return graph::Arg::of_seq(v->kind == VarKind::kTuple ? graph::Arg::kTuple : graph::Arg::kList, std::move(items));
    }
    case VarKind::kObject:
      // An object made by the capture itself (`torch.Generator().manual_seed(3)`) would be one
      // object shared by every run of the graph, where eager makes a new one each call.
      if (is_trace_value(v->obj.get()))
        unsupported(std::string("a ") + Py_TYPE(v->obj.get())->tp_name + " made during the call, passed to a tensor operation");
      identity(v);
      if (PyType_Check(v->obj.get()) || PyCallable_Check(v->obj.get()) || PyModule_Check(v->obj.get()))
        return graph::Arg::of_const(handle(v->obj.get()), qualified_name(v->obj.get()));
      return graph::Arg::of_const(handle(v->obj.get()), py_repr(v->obj.get()));
    default: unsupported(std::string("cannot pass a ") + kind_name(v->kind) + " to a tensor operation");
  }
}

PyRef Interpreter::to_fake(const VarPtr& v) {
  PyRef r = as_python(v, /*fake_tensors=*/true);
  if (!r) unsupported(std::string("cannot pass a ") + kind_name(v->kind) + " to a tensor operation");
  return r;
}

static bool is_device_like(PyObject* o) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == g_torch.device_type) return true;
  if (!PyUnicode_Check(o)) return false;
  const char* s = PyUnicode_AsUTF8(o);
  if (!s) { PyErr_Clear(); return false; }
  static const char* prefixes[] = {"cpu", "cuda", "meta", "mps", "xpu", "hpu", "privateuseone"};
  for (const char* p : prefixes)
    if (std::strncmp(s, p, std::strlen(p)) == 0) return true;
  return false;
}

static PyRef to_device_object(PyObject* o) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(o)) == g_torch.device_type) return PyRef::borrow(o);
  return PyRef::steal(PyObject_CallOneArg(g_torch.device_type, o));
}

static void collect_tensor_devices(const VarPtr& v, std::vector<PyObject*>& out) {
  if (v->is_tensor()) out.push_back(v->device.get());
  else if (v->kind == VarKind::kTuple || v->kind == VarKind::kList)
    for (const auto& it : v->items) collect_tensor_devices(it, out);
}

// operator.iadd and friends (`x += y`): they mutate a tensor left operand.
static bool is_inplace_operator(const std::string& qualname) {
  static const std::unordered_set<std::string> names = {
      "operator.iadd", "operator.iand", "operator.ifloordiv", "operator.ilshift", "operator.imatmul", "operator.imul",
      "operator.imod", "operator.ior", "operator.ipow", "operator.irshift", "operator.isub", "operator.itruediv", "operator.ixor"};
  return names.count(qualname) > 0;
}

static bool is_inplace_method(const std::string& m) {
  return m.size() > 1 && m.back() == '_' && !(m.size() > 2 && m[m.size() - 2] == '_');
}

// The out-of-place form of an in-place method or operator: `mul_` -> `mul`, operator.imul ->
// `__mul__` (a Tensor method either way); "" when there is none to ask.
static std::string out_of_place_method(const std::string& method, const std::string& qualname) {
  if (!method.empty()) return is_inplace_method(method) ? method.substr(0, method.size() - 1) : "";
  if (qualname.rfind("operator.i", 0) == 0) return "__" + qualname.substr(10) + "__";
  return "";
}

// PyTorch's meta kernels of some in-place operators skip eager's check that the result's dtype
// can be cast to the tensor written (`int_tensor.mul_(0.5)`, `int_tensor *= 0.5`,
// `bool_tensor.cumsum_(0)`, `int_tensor.addcmul_(f, f)`), and functionalization then writes the
// result cast: a value where eager raises. The out-of-place form's result dtype tells; when it
// cannot be cast to the written tensor's, the operation runs eagerly (which raises as eager does).
void Interpreter::check_inplace_cast(const std::string& name, const std::string& method, const VarPtr& self, PyObject* fargs,
                                     PyObject* fkw) {
  const std::string oop = out_of_place_method(method, name);
  if (oop.empty()) return;
  PyRef args = PyRef::steal(PySequence_List(fargs));
  if (!args) return PyErr_Clear();
  PyRef orig = to_fake(self);  // the tensor before the write (fargs holds the copy written)
  PyList_SetItem(args.get(), 0, orig.release());
  PyRef tup = PyRef::steal(PyList_AsTuple(args.get()));
  PyRef out = tup ? PyRef::steal(meta_.run(nullptr, oop, tup.get(), fkw, opts_.memoize_meta)) : PyRef();
  if (!out || !probe_is_tensor(out.get())) return PyErr_Clear();  // no such form, or not alike: nothing to compare
  PyRef from = PyRef::steal(PyObject_GetAttrString(out.get(), "dtype"));
  PyRef to = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(tup.get(), 0), "dtype"));
  if (!from || !to) return PyErr_Clear();
  PyRef ok = PyRef::steal(PyObject_CallFunctionObjArgs(module_attr("torch", "can_cast"), from.get(), to.get(), nullptr));
  if (!ok) return PyErr_Clear();
  if (ok.get() == Py_False) {
    PyRef f = PyRef::steal(PyObject_Str(from.get())), t = PyRef::steal(PyObject_Str(to.get()));
    unsupported(name + " computes " + (f ? PyUnicode_AsUTF8(f.get()) : "?") + ", which cannot be written into a tensor of " +
                (t ? PyUnicode_AsUTF8(t.get()) : "?") + " (eager raises)");
  }
}

// `operator.getitem(node, i)`: item i of a graph value that is a sequence (removable when unused).
int Interpreter::getitem_node(int node, Py_ssize_t i, const std::string& meta) {
  PyRef idx = PyRef::steal(PyLong_FromSsize_t(i));
  int n = cap_.graph->add_call(graph::Op::kCallFunction, "operator.getitem", handle(op_fn("getitem")),
                               {graph::Arg::of_node(node), graph::Arg::of_const(handle(idx.get()), std::to_string(i))}, {}, meta,
                               where());
  cap_.removable.push_back(true);
  return n;
}

VarPtr Interpreter::wrap_result(PyObject* fake, int node, PyObject* device) {
  if (probe_is_tensor(fake)) {
    auto v = std::make_shared<Var>(VarKind::kTensor);
    v->fake = PyRef::borrow(fake);
    v->node = node;
    v->device = PyRef::borrow(device);
    return v;
  }
  if (PyTuple_Check(fake) || PyList_Check(fake)) {
    bool any_tensor = false;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fake); ++i)
      any_tensor |= probe_is_tensor(PySequence_Fast_GET_ITEM(fake, i));
    if (any_tensor) {
      auto v = make_seq(PyList_Check(fake) ? VarKind::kList : VarKind::kTuple, {});
      if (PyTuple_Check(fake) && !PyTuple_CheckExact(fake)) v->obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(fake)));
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fake); ++i) {
        PyObject* item = PySequence_Fast_GET_ITEM(fake, i);
        int n = -1;
        if (probe_is_tensor(item)) {
          n = getitem_node(node, i, probe_describe_tensor(item));
        } else if (!is_constant_like(item)) {
          unsupported("operator returned a sequence holding " + std::string(Py_TYPE(item)->tp_name));
        }
        v->items.push_back(n >= 0 ? wrap_result(item, n, device) : make_const(item));
      }
      return v;
    }
  }
  if (is_constant_like(fake)) return make_const(fake);
  unsupported(std::string("operator returned an unsupported value of type ") + Py_TYPE(fake)->tp_name);
}

// t.type() and t.get_device() answer for the real device, not the meta tensor that carries the
// metadata: from the dtype and the device kiln tracks for the value.
VarPtr Interpreter::device_dependent_query(const VarPtr& t, const std::string& method) {
  PyRef kind = PyRef::steal(PyObject_GetAttrString(t->device.get(), "type"));
  const std::string k = kind ? py_str(kind.get()) : "";
  if (k != "cpu" && k != "cuda") unsupported("tensor." + method + "() on device " + k);
  if (method == "get_device") {
    PyRef index = PyRef::steal(PyObject_GetAttrString(t->device.get(), "index"));
    if (k == "cpu" || !index || index.get() == Py_None) return make_const(PyRef::steal(PyLong_FromLong(-1)).get());
    return make_const(index.get());
  }
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
  PyRef empty = PyRef::steal(PyObject_GetAttrString(g_torch.torch, "empty"));
  PyRef args = PyRef::steal(Py_BuildValue("(i)", 0)), kw = PyRef::steal(Py_BuildValue("{sO}", "dtype", dtype.get()));
  PyRef probe = empty && args && kw ? PyRef::steal(PyObject_Call(empty.get(), args.get(), kw.get())) : PyRef();
  PyRef name = probe ? PyRef::steal(PyObject_CallMethod(probe.get(), "type", nullptr)) : PyRef();
  if (!name) unsupported("tensor.type(): " + take_python_error());
  std::string s = py_str(name.get());  // "torch.FloatTensor"; on CUDA "torch.cuda.FloatTensor"
  if (k == "cuda") s.insert(6, "cuda.");
  return make_const(PyRef::steal(PyUnicode_FromString(s.c_str())).get());
}

// torch._C._group_tensors_by_device_and_dtype(tensorlistlist, with_indices) (clip_grad_norm_, the
// foreach optimizers): the grouping of tensors by their device and dtype, computed by the function
// itself on empty real stand-ins (so its keys and their order are eager's), the groups holding
// the captured tensors again.
VarPtr Interpreter::group_tensors_by_device_and_dtype(const std::vector<VarPtr>& args,
                                                       const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  if (args.empty() || args.size() > 2 || !kwargs.empty() || (args[0]->kind != VarKind::kList && args[0]->kind != VarKind::kTuple))
    unsupported("_group_tensors_by_device_and_dtype with these arguments");
  const bool with_indices = args.size() == 2 && args[1]->is_const() && args[1]->obj.get() == Py_True;
  std::unordered_map<PyObject*, VarPtr> of_stand_in;
  PyRef lists = PyRef::steal(PyList_New(0));
  PyRef empty = PyRef::steal(PyObject_GetAttrString(g_torch.torch, "empty"));
  for (const VarPtr& l : args[0]->items) {
    if (l->kind != VarKind::kList && l->kind != VarKind::kTuple) unsupported("_group_tensors_by_device_and_dtype of a non-list");
    PyRef row = PyRef::steal(PyList_New(0));
    for (const VarPtr& t : l->items) {
      if (t->is_const() && t->obj.get() == Py_None) { PyList_Append(row.get(), Py_None); continue; }
      if (!t->is_tensor()) unsupported("_group_tensors_by_device_and_dtype of a non-tensor");
      PyRef dtype = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
      PyRef zero = PyRef::steal(PyLong_FromLong(0));
      PyRef kw = PyRef::steal(Py_BuildValue("{sOsO}", "dtype", dtype.get(), "device", t->device.get()));
      PyRef a = PyRef::steal(PyTuple_Pack(1, zero.get()));
      PyRef s = dtype && kw && a ? PyRef::steal(PyObject_Call(empty.get(), a.get(), kw.get())) : PyRef();
      if (!s) unsupported("_group_tensors_by_device_and_dtype: " + take_python_error());
      of_stand_in[s.get()] = t;
      PyList_Append(row.get(), s.get());
    }
    PyList_Append(lists.get(), row.get());
  }
  PyRef grouped = PyRef::steal(PyObject_CallFunction(module_attr("torch._C", "_group_tensors_by_device_and_dtype"), "OO", lists.get(),
                                                     with_indices ? Py_True : Py_False));
  if (!grouped || !PyDict_Check(grouped.get())) unsupported("_group_tensors_by_device_and_dtype: " + take_python_error());
  auto back = [&](PyObject* o) -> VarPtr {  // a stand-in's captured tensor; other values as they are
    auto it = of_stand_in.find(o);
    return it != of_stand_in.end() ? it->second : from_python_value(o, false);
  };
  auto out = std::make_shared<Var>(VarKind::kDict);
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(grouped.get(), &pos, &key, &value)) {
    // value: (tensorlistlist, indices); with_indices, the indices are also the last list (ints)
    if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) unsupported("_group_tensors_by_device_and_dtype: an unexpected result");
    std::vector<VarPtr> rows;
    PyObject* tll = PyTuple_GET_ITEM(value, 0);
    for (Py_ssize_t i = 0; i < PySequence_Size(tll); ++i) {
      PyRef row = PyRef::steal(PySequence_GetItem(tll, i));
      std::vector<VarPtr> items;
      for (Py_ssize_t j = 0; row && j < PySequence_Size(row.get()); ++j) {
        PyRef e = PyRef::steal(PySequence_GetItem(row.get(), j));
        items.push_back(back(e.get()));
      }
      rows.push_back(make_seq(VarKind::kList, std::move(items)));
    }
    out->keys.push_back(PyRef::borrow(key));
    out->items.push_back(make_seq(VarKind::kTuple, {make_seq(VarKind::kList, std::move(rows)), from_python_value(PyTuple_GET_ITEM(value, 1), false)}));
  }
  return out;
}

VarPtr Interpreter::record_op(graph::Op op, PyObject* target, const std::string& method, const std::vector<VarPtr>& args,
                              const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  // Device of the result: an explicit device argument, else the first non-CPU tensor input,
  // else the first tensor input, else the default device (factories).
  if (op == graph::Op::kCallMethod && args.size() == 1 && kwargs.empty() && args[0]->is_tensor() &&
      (method == "type" || method == "get_device"))
    return device_dependent_query(args[0], method);
  PyRef device;
  bool rewrite_devices = method == "to" || method == "type" || method == "new_tensor";
  std::vector<PyObject*> devs;
  for (const auto& a : args) collect_tensor_devices(a, devs);
  for (const auto& kv : kwargs) collect_tensor_devices(kv.second, devs);

  const std::string name = op == graph::Op::kCallMethod ? method : qualified_name(target);
  // A tensor's value read back into Python: the graph breaks here, said plainly (shape propagation
  // on a meta or size-probing tensor would fail with a message about that tensor instead).
  if (op == graph::Op::kCallMethod && !args.empty() && args[0]->is_tensor() && (method == "item" || method == "tolist"))
    unsupported("Tensor." + method + "() reads a tensor's value into Python (data-dependent)");
  // A new autograd leaf made inside the graph (`t.detach().requires_grad_()`): what reads it records
  // autograd, which a compiled graph called without gradients would not; it runs eagerly.
  if (name == "requires_grad_" && !(args.size() > 1 && args[1]->is_const() && args[1]->obj.get() == Py_False) &&
      !(kwargs.size() == 1 && kwargs[0].second->is_const() && kwargs[0].second->obj.get() == Py_False))
    unsupported("requires_grad_() makes a new autograd leaf inside the graph");
  // Differentiation runs autograd's engine over tensors the graph has not made yet: the graph
  // ends before it, as Dynamo's does (shape propagation cannot differentiate meta tensors).
  // (torch.autograd.grad and .backward: Interpreter::inline_function.)
  if (op == graph::Op::kCallMethod && name == "backward") unsupported("Tensor.backward() runs autograd's engine: the graph ends before it");
  // The call as a graph node (its arguments as graph values; a dynamic float's may be replaced
  // below by a cast of it, or by its value).
  std::vector<VarPtr> node_args = args;
  std::vector<std::pair<std::string, VarPtr>> node_kwargs = kwargs;
  auto add_node = [&](const std::string& meta, bool removable) {
    std::vector<graph::Arg> gargs;
    for (const auto& a : node_args) gargs.push_back(to_arg(a));
    std::vector<std::pair<std::string, graph::Arg>> gkw;
    for (const auto& kv : node_kwargs) gkw.emplace_back(kv.first, to_arg(kv.second));
    int node = cap_.graph->add_call(op, name, op == graph::Op::kCallFunction ? handle(target) : -1, std::move(gargs), std::move(gkw),
                                    meta, where());
    cap_.removable.push_back(removable);
    return node;
  };
  const bool scalar_sizes = scalar_operands(name);
  PyRef fargs = PyRef::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef f = scalar_sizes && args[i]->is_symint() ? symint_hint(args[i]) : to_fake(args[i]);
    if (rewrite_devices && i > 0 && is_device_like(f.get())) {
      device = to_device_object(f.get());
      if (!device) unsupported("bad device argument: " + take_python_error());
      f = PyRef::borrow(g_torch.meta_device);
    }
    if (rewrite_devices && i > 0 && probe_is_tensor(f.get())) device = args[i]->device;
    PyTuple_SET_ITEM(fargs.get(), i, f.release());
  }
  PyRef fkw;
  for (const auto& kv : kwargs) {
    if (!fkw) fkw = PyRef::steal(PyDict_New());
    PyRef f = to_fake(kv.second);
    if (kv.first == "device") {
      // device=None is the default device (nn.Transformer.generate_square_subsequent_mask passes
      // it): the meta run still gets meta, or a symbolic size reaches a real factory and fails.
      if (f.get() != Py_None) {
        device = to_device_object(f.get());
        if (!device) unsupported("bad device argument: " + take_python_error());
      }
      f = PyRef::borrow(g_torch.meta_device);
    }
    PyDict_SetItemString(fkw.get(), kv.first.c_str(), f.get());
  }
  if (method == "cuda" || method == "cpu") {
    // The meta result is the input's metadata; only the device changes.
    PyRef dev = PyRef::steal(method == "cpu" ? PyObject_CallFunction(g_torch.device_type, "s", "cpu")
                                             : PyObject_CallFunction(g_torch.device_type, "s", "cuda"));
    device = dev;
  }
  if (!device) {
    for (PyObject* d : devs) {
      PyRef s = PyRef::steal(PyObject_GetAttrString(d, "type"));
      if (s && PyUnicode_Check(s.get()) && std::strcmp(PyUnicode_AsUTF8(s.get()), "cpu") != 0) { device = PyRef::borrow(d); break; }
      PyErr_Clear();
    }
    if (!device && !devs.empty()) device = PyRef::borrow(devs[0]);
  }
  bool factory = devs.empty();
  if (factory && !device) {
    if (!default_device_) default_device_ = PyRef::steal(PyObject_CallNoArgs(g_torch.get_default_device));
    if (!default_device_) unsupported("torch.get_default_device failed: " + take_python_error());
    device = default_device_;
  }
  if (factory && op == graph::Op::kCallFunction && !(fkw && PyDict_GetItemString(fkw.get(), "device"))) {
    if (!fkw) fkw = PyRef::steal(PyDict_New());
    PyDict_SetItemString(fkw.get(), "device", g_torch.meta_device);
  }

  const bool is_setitem = target && target == PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "setitem");
  const bool inplace = !args.empty() && args[0]->is_tensor() &&
                       (is_inplace_method(method) || is_setitem ||
                        (op == graph::Op::kCallFunction && target && is_inplace_operator(name)));
  note_inference(args, kwargs, inplace);
  if (ndarrays_made_)
    for (const auto& kv : kwargs)
      if (kv.first == "out") unsupported(name + " writes an out= tensor after a numpy array shared a tensor's memory");
  if (inplace && ndarrays_made_)
    unsupported(name + " writes a tensor in place after a numpy array shared a tensor's memory");
  if (inplace) {
    // Mutate a private copy of the metadata: meta tensors may be shared through the memo.
    PyRef copy = PyRef::steal(probe_make_meta(args[0]->fake.get()));
    PyTuple_SetItem(fargs.get(), 0, copy.release());
  }
  const size_t shape_guards = cap_.shape_env->guards().size();
  PyRef result;
  if (method == "cuda" || method == "cpu") {
    result = to_fake(args[0]);
  } else {
    result = PyRef::steal(meta_.run(target, op == graph::Op::kCallMethod ? method : "", fargs.get(), fkw.get(),
                                    opts_.memoize_meta && !inplace));
    if (!result && factory && fkw && PyErr_ExceptionMatches(PyExc_TypeError)) {
      // The callable takes no `device`: run it as is (it makes no tensors from nothing).
      PyErr_Clear();
      PyDict_DelItemString(fkw.get(), "device");
      result = PyRef::steal(meta_.run(target, op == graph::Op::kCallMethod ? method : "", fargs.get(), fkw.get(), false));
    }
  }
  note_shape_guards(shape_guards, name);
  if (!result && !inplace && !factory) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const std::string m = op == graph::Op::kCallMethod ? method : "";
    result = PyRef::steal(autocast_meta_result(target, m, fargs.get(), fkw.get(), device.get(),
                                               [&](PyObject* a, PyObject* kw) { return meta_.run(target, m, a, kw, false); }));
    if (result) {
      Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    } else {
      PyErr_Restore(type, value, tb);
    }
  }
  if (!result) unsupported(propagation_failure(name, take_python_error()));
  if (inplace && !is_setitem) check_inplace_cast(name, op == graph::Op::kCallMethod ? method : "", args[0], fargs.get(), fkw.get());
  if (probe_is_tensor(result.get())) {
    // Results that are real tensors (a callable that ignored `device`) become meta too.
    PyRef dev = PyRef::steal(probe_device(result.get()));
    PyRef t = PyRef::steal(PyObject_GetAttrString(dev.get(), "type"));
    if (t && std::strcmp(PyUnicode_AsUTF8(t.get()), "meta") != 0) {
      if (!device) device = dev;
      result = PyRef::steal(probe_make_meta(result.get()));
    }
    PyErr_Clear();
  }
  if (!inplace && !factory && method != "cuda" && method != "cpu") {
    std::string why;
    result = PyRef::steal(autocast_result(result.get(), target, op == graph::Op::kCallMethod ? method : "", fargs.get(), fkw.get(),
                                          device.get(), &why));
    if (!result) unsupported("under autocast, the dtypes of " + name + "'s results: " + why);
  }
  PyRef result_cast;  // the dtype a dynamic float's operation is cast back to (float_tensor_operands)
  if (has_float_tensor(args, kwargs))
    result_cast = float_tensor_operands(scalar_sizes, result.get(), target, op == graph::Op::kCallMethod ? method : "", node_args, node_kwargs,
                                        fargs.get(), fkw.get());
  if (inplace) {
    cap_.mutates_inputs = true;  // maybe an input, or a view of one: their version counters will tell
    add_node(probe_describe_tensor(PyTuple_GET_ITEM(fargs.get(), 0)), false);
    if (is_setitem) return make_const(Py_None);
    // The mutated tensor keeps its identity; only its metadata may change (e.g. unsqueeze_).
    args[0]->fake = PyRef::borrow(PyTuple_GET_ITEM(fargs.get(), 0));
    return args[0];
  }
  // Values that hold no tensor (sizes, flags, dtypes) are metadata: constants, no node.
  bool has_tensor = probe_is_tensor(result.get());
  if (!has_tensor && (PyTuple_Check(result.get()) || PyList_Check(result.get())))
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(result.get()); ++i)
      has_tensor |= probe_is_tensor(PySequence_Fast_GET_ITEM(result.get(), i));
  if (!has_tensor) {
    // A string made from a meta tensor (its repr, a format) would describe the meta tensor.
    if (PyUnicode_Check(result.get())) unsupported(name + " of a tensor depends on its data or device");
    if (holds_symint(result.get())) return wrap_symbolic(result.get(), add_node("", true));  // sizes, read at run time
    if (!is_constant_like(result.get()) && !is_symbolic_scalar(result.get()))
      unsupported(name + " returned a non-tensor value of type " + Py_TYPE(result.get())->tp_name);
    // A tensor operation that returns nothing exists for its side effect (`loss.backward()`,
    // `t.retain_grad()`): it must run, so it cannot be folded away as metadata.
    // (PyTorch's usage telemetry logs once per process, and nn.Module's constructor calls it:
    // nothing to replay.)
    // (Compared by identity: pybind11 names the module of C functions differently across
    // PyTorch versions, "torch._C" or "torch.pybind11_detail_function_record_...".)
    const bool telemetry = target && (target == module_attr("torch._C", "_log_api_usage_once") || name == "torch._log_api_usage_once");
    if (result.get() == Py_None && name != "torch._assert" && !telemetry)
      unsupported(name + " returns None: its effect (autograd, hooks) happens outside the graph");
    return wrap_symbolic(result.get(), -1);
  }
  int node = add_node(probe_is_tensor(result.get()) ? probe_describe_tensor(result.get()) : "", false);
  if (result_cast) node = record_cast(graph::Arg::of_node(node), result_cast.get(), probe_describe_tensor(result.get()), false);
  VarPtr out = wrap_result(result.get(), node, device.get());
  if (inference_ || !inference_nodes_.empty()) {
    bool marked = false;
    std::function<void(const VarPtr&)> scan = [&](const VarPtr& v) {
      if (v->is_tensor()) marked |= v->inference;
      else if (v->kind == VarKind::kTuple || v->kind == VarKind::kList)
        for (const auto& it : v->items) scan(it);
    };
    for (const auto& a : args) scan(a);
    for (const auto& kv : kwargs) scan(kv.second);
    mark_inference_result(out, marked);
  }
  return out;
}

// ---------------------------------------------------------------- symbolic ints

// Pointwise arithmetic whose result's shape and dtype do not depend on a scalar operand's value:
// a size used as that scalar (`x * (t // 2)`) runs through meta code as its captured value, so it
// is not guarded; the graph still reads the size at run time.
bool Interpreter::scalar_operands(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "operator.add", "operator.sub", "operator.mul", "operator.truediv", "operator.floordiv", "operator.mod", "operator.pow",
      "torch.add", "torch.sub", "torch.mul", "torch.div", "torch.true_divide", "torch.floor_divide", "torch.remainder", "torch.pow",
      "torch.clamp", "torch.clip", "torch.where", "torch.full_like", "torch.masked_fill",
      "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "pow", "clamp", "clip", "masked_fill", "fill_",
      "add_", "sub_", "mul_", "div_", "clamp_", "masked_fill_", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__",
      "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__pow__", "__rpow__"};
  return names.count(name) > 0;
}

PyRef Interpreter::symint_hint(const VarPtr& v) {
  if (v->flag) return v->fake;
  sym::Expr e;
  if (!probe_symbolic_value(v->fake.get(), &e)) return to_fake(v);
  return PyRef::steal(PyLong_FromLongLong(cap_.shape_env->hint(e)));
}

bool Interpreter::is_symbolic_scalar(PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == module_attr("torch", "SymInt") || t == module_attr("torch", "SymBool") || t == module_attr("torch", "SymFloat");
}

bool Interpreter::holds_symint(PyObject* o) {
  sym::Expr e;
  if (probe_symbolic_value(o, &e)) return !e.is_bool() && !e.is_constant();
  if (PyTuple_Check(o) || PyList_Check(o))
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
      if (holds_symint(PySequence_Fast_GET_ITEM(o, i))) return true;
  return false;
}

// The concrete value of a SymInt/SymBool/SymFloat: asking for it guards the shape env on it.
static PyRef concrete_scalar(PyObject* o) {
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (t == module_attr("torch", "SymBool")) {
    int r = PyObject_IsTrue(o);
    return r < 0 ? PyRef() : PyRef::borrow(r ? Py_True : Py_False);
  }
  if (t == module_attr("torch", "SymFloat")) return PyRef::steal(PyNumber_Float(o));
  return PyRef::steal(PyNumber_Index(o));
}

VarPtr Interpreter::wrap_symbolic(PyObject* o, int node) {
  if (node >= 0 && Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(module_attr("torch", "SymInt")) && holds_symint(o)) {
    auto v = std::make_shared<Var>(VarKind::kSymInt);
    v->node = node;
    v->fake = PyRef::borrow(o);
    return v;
  }
  if (is_symbolic_scalar(o)) {
    PyRef c = concrete_scalar(o);
    if (!c) unsupported("a symbolic size could not be specialised: " + take_python_error());
    return make_const(c.get());
  }
  if (node >= 0 && (PyTuple_Check(o) || PyList_Check(o)) && holds_symint(o)) {
    auto v = make_seq(PyList_Check(o) ? VarKind::kList : VarKind::kTuple, {});
    // x.shape with a dynamic dimension: a torch.Size, also when handed back at a graph break
    if (PyTuple_Check(o) && !PyTuple_CheckExact(o)) v->obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(o, i);
      v->items.push_back(wrap_symbolic(item, holds_symint(item) ? getitem_node(node, i, "") : -1));
    }
    return v;
  }
  return make_const(o);
}

// slice(start, stop, step) with a symbolic bound: a graph value, so `x[:, a:t]` stays symbolic.
VarPtr Interpreter::symbolic_slice(const std::vector<VarPtr>& parts) {
  std::vector<VarPtr> p = parts;
  while (p.size() < 3) p.push_back(make_const(Py_None));
  PyRef f[3];
  std::vector<graph::Arg> gargs;
  for (int i = 0; i < 3; ++i) {
    if (is_float_scalar(p[i]) || !(p[i]->is_symint() || p[i]->is_const())) p[i] = make_const(concretize(p[i]).get());
    f[i] = p[i]->is_symint() ? p[i]->fake : p[i]->obj;
    gargs.push_back(to_arg(p[i]));
  }
  auto v = std::make_shared<Var>(VarKind::kSymSlice);
  v->items = p;
  v->fake = PyRef::steal(PySlice_New(f[0].get(), f[1].get(), f[2].get()));
  v->node = cap_.graph->add_call(graph::Op::kCallFunction, "builtins.slice", handle(reinterpret_cast<PyObject*>(&PySlice_Type)),
                                 std::move(gargs), {}, "", where());
  cap_.removable.push_back(true);
  return v;
}

// Logs (channel "dynamic") the shape guards added since `before`: which code specialised or
// constrained a size, and where.
void Interpreter::note_shape_guards(size_t before, const std::string& by) {
  const auto& g = cap_.shape_env->guards();
  if (g.size() <= before || !(options().log_mask & kLogDynamic)) return;
  for (size_t i = before; i < g.size(); ++i) log(kLogDynamic, "shape guard " + g[i].str() + " added by " + by + " at " + where());
}

PyRef Interpreter::concretize(const VarPtr& v) {
  const size_t before = cap_.shape_env->guards().size();
  PyRef r = concretize_value(v);
  note_shape_guards(before, "using a size as a Python value");
  return r;
}

PyRef Interpreter::concretize_value(const VarPtr& v) {
  if (v->kind == VarKind::kSymSlice) {
    PyRef a = concretize(v->items[0]), b = concretize(v->items[1]), c = concretize(v->items[2]);
    return PyRef::steal(PySlice_New(a.get(), b.get(), c.get()));
  }
  if (!v->is_symint()) return as_python(v);
  if (v->flag) {  // a float from sizes or float arguments: fixing those fixes it
    if (is_float_argument(v)) return specialize_float_input(v);
    for (const auto& dep : v->items) concretize(dep);
    return v->fake;
  }
  PyRef c = concrete_scalar(v->fake.get());
  if (!c) unsupported("a symbolic size could not be specialised: " + take_python_error());
  return c;
}

// Arithmetic on symbolic sizes, recorded so the graph computes it from the sizes at run time.
// Integer results stay symbolic expressions; float results (`t / 2`, `d ** -0.5`) are runtime
// scalars: their captured value serves meta code, and specialising one guards the sizes it came from.
VarPtr Interpreter::symint_op(PyObject* fn, const std::vector<VarPtr>& args) {
  bool floaty = fn == op_fn("truediv") || fn == op_fn("pow");
  for (const auto& a : args) floaty |= is_float_scalar(a) || (a->is_const() && PyFloat_Check(a->obj.get()));
  if (floaty) {
    PyRef hints = PyRef::steal(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      PyRef h = args[i]->is_symint() ? symint_hint(args[i]) : as_python(args[i]);
      if (!h) unsupported("arithmetic on a " + std::string(kind_name(args[i]->kind)));
      PyTuple_SET_ITEM(hints.get(), i, h.release());
    }
    PyRef r = PyRef::steal(PyObject_Call(fn, hints.get(), nullptr));
    if (!r) unsupported(qualified_name(fn) + " on symbolic sizes raised " + take_python_error());
    if (has_float_tensor(args, {})) {
      if (VarPtr t = float_tensor_op(fn, args, r.get())) return t;
      std::vector<VarPtr> fixed;
      bool symbolic = false;
      for (const auto& b : args) {
        fixed.push_back(b->float_tensor ? make_const(concretize(b).get()) : b);
        symbolic |= fixed.back()->is_symint();
      }
      return symbolic ? symint_op(fn, fixed) : fold(fn, fixed, {});
    }
    if (PyFloat_CheckExact(r.get())) {
      auto v = std::make_shared<Var>(VarKind::kSymInt);
      v->flag = true;
      v->fake = r;
      std::vector<graph::Arg> gargs;
      for (const auto& a : args) {
        gargs.push_back(to_arg(a));
        if (is_float_scalar(a)) v->items.insert(v->items.end(), a->items.begin(), a->items.end());
        else if (a->is_symint()) v->items.push_back(a);
      }
      v->node = cap_.graph->add_call(graph::Op::kCallFunction, qualified_name(fn), handle(fn), std::move(gargs), {}, "", where());
      cap_.removable.push_back(true);
      return v;
    }
    // An integer after all (`t ** 2`): exact integer arithmetic below, or a constant from floats.
    for (const auto& a : args)
      if (is_float_scalar(a) || (a->is_const() && PyFloat_Check(a->obj.get()))) {
        std::vector<VarPtr> fixed;
        for (const auto& b : args) fixed.push_back(b->is_symint() ? make_const(concretize(b).get()) : b);
        return fold(fn, fixed, {});
      }
  }
  PyRef fargs = PyRef::steal(PyTuple_New(args.size()));
  std::vector<graph::Arg> gargs;
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef f = args[i]->is_symint() ? args[i]->fake : as_python(args[i]);
    if (!f) unsupported("int arithmetic on a " + std::string(kind_name(args[i]->kind)));
    PyTuple_SET_ITEM(fargs.get(), i, f.release());
    gargs.push_back(to_arg(args[i]));
  }
  PyRef r = PyRef::steal(PyObject_Call(fn, fargs.get(), nullptr));
  if (!r) unsupported(qualified_name(fn) + " on symbolic sizes raised " + take_python_error());
  if (!holds_symint(r.get())) return wrap_symbolic(r.get(), -1);
  int node = cap_.graph->add_call(graph::Op::kCallFunction, qualified_name(fn), handle(fn), std::move(gargs), {}, "", where());
  cap_.removable.push_back(true);
  return wrap_symbolic(r.get(), node);
}

bool Interpreter::is_numeric(const VarPtr& v) {
  if (v->is_symint()) return true;
  if (!v->is_const()) return false;
  PyObject* o = v->obj.get();
  return PyLong_Check(o) || PyFloat_Check(o);
}

// ---------------------------------------------------------------- torch.inference_mode

// `with torch.inference_mode():` inside the capture: grad mode off for the graph (what the block
// computes is the same values), and the tensors it makes marked as inference tensors, which
// decides how the graph runs (Capture::inference_run). Nested blocks and inference_mode(False)
// are breaks.
VarPtr Interpreter::enter_inference_mode(const VarPtr& ctx) {
  if (!ctx->flag) unsupported("torch.inference_mode(False)");
  if (inference_) unsupported("torch.inference_mode nested in another");
  auto exit = std::make_shared<Var>(VarKind::kGradModeExit);
  exit->name = "inference";
  exit->flag = probe_grad_enabled();  // what leaving the block restores
  inference_prev_grad_ = exit->flag;
  inference_ = true;
  record_grad_mode(false);
  return exit;
}

void Interpreter::leave_inference_mode(bool prev_grad) {
  if (!inference_) unsupported("leaving a torch.inference_mode block that is not open");
  inference_ = false;
  record_grad_mode(prev_grad);
}

// Before an operation: where it runs (for inference_run), and what eager refuses of inference
// tensors outside a block (writing one in place; one an autograd-recording op would save).
void Interpreter::note_inference(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs, bool inplace) {
  (inference_ ? ops_in_inference_ : ops_outside_inference_)++;
  if (inference_ || inference_nodes_.empty()) return;
  bool marked = false, requires_grad = false;
  std::function<void(const VarPtr&)> scan = [&](const VarPtr& v) {
    if (v->is_tensor()) {
      marked |= v->inference;
      PyRef rg = PyRef::steal(PyObject_GetAttrString(v->fake.get(), "requires_grad"));
      requires_grad |= rg && rg.get() == Py_True;
      PyErr_Clear();
    } else if (v->kind == VarKind::kTuple || v->kind == VarKind::kList) {
      for (const auto& it : v->items) scan(it);
    }
  };
  for (const auto& a : args) scan(a);
  for (const auto& kv : kwargs) scan(kv.second);
  if (!marked) return;
  if (inplace && !args.empty() && args[0]->is_tensor() && args[0]->inference)
    unsupported("an in-place write of an inference tensor outside torch.inference_mode (RuntimeError)");
  if (requires_grad && probe_grad_enabled()) unsupported("an inference tensor in an operation autograd records (RuntimeError)");
}

// Which results are inference tensors: inside a block everything new and views of inference
// tensors; outside one, views of inference tensors.
void Interpreter::mark_inference_result(const VarPtr& r, bool any_input_marked) {
  if (r->is_tensor()) {
    PyRef view = PyRef::steal(PyObject_CallMethod(r->fake.get(), "_is_view", nullptr));
    const bool is_view = view && view.get() == Py_True;
    PyErr_Clear();
    const bool marked = inference_ ? (!is_view || any_input_marked) : (is_view && any_input_marked);
    if (marked) {
      r->inference = true;
      inference_nodes_.insert(r->node);
    }
  } else if (r->kind == VarKind::kTuple || r->kind == VarKind::kList) {
    for (const auto& it : r->items) mark_inference_result(it, any_input_marked);
  }
}

int Interpreter::record_cast(const graph::Arg& value, PyObject* dtype, const std::string& meta, bool removable) {
  const int node = cap_.graph->add_call(graph::Op::kCallMethod, "to", -1, {value, graph::Arg::of_const(handle(dtype), py_repr(dtype))}, {}, meta, where());
  cap_.removable.push_back(removable);
  return node;
}

VarPtr Interpreter::record_grad_mode(bool enabled) {
  PyObject* flag = enabled ? Py_True : Py_False;
  cap_.graph->add_call(graph::Op::kCallFunction, "torch._C._set_grad_enabled", handle(g_torch.set_grad_enabled_fn),
                       {graph::Arg::of_const(handle(flag), enabled ? "True" : "False")}, {}, "", where());
  cap_.removable.push_back(false);
  probe_set_grad_enabled(enabled);
  return make_const(Py_None);
}

}  // namespace kiln::frontend
