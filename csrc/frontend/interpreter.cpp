// The interpreter loop, instruction semantics, value wrapping with guards, and recording of
// tensor operations into the graph. Calls, attributes and builtins are in interpreter_calls.cpp.
#include "frontend/interpreter.h"
#include "frontend/interpreter_frame.h"

#include <cstring>
#include <functional>
#include <unordered_set>
#include <mutex>

#include "frontend/tensor_probe.h"
#include "frontend/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- opcode ids

enum OpId {
#define KILN_OPS(X) X(NOP) X(RESUME) X(CACHE) X(PUSH_NULL) X(POP_TOP) X(COPY) X(SWAP) X(LOAD_CONST) \
  X(RETURN_CONST) X(LOAD_FAST) X(LOAD_FAST_CHECK) X(LOAD_FAST_AND_CLEAR) X(STORE_FAST) X(DELETE_FAST) \
  X(LOAD_CLOSURE) X(LOAD_DEREF) X(STORE_DEREF) X(MAKE_CELL) X(COPY_FREE_VARS) X(LOAD_GLOBAL) X(LOAD_ATTR) \
  X(LOAD_METHOD) X(STORE_ATTR) X(BUILD_TUPLE) X(BUILD_LIST) X(BUILD_MAP) X(BUILD_CONST_KEY_MAP) X(BUILD_SLICE) \
  X(BUILD_STRING) X(FORMAT_VALUE) X(LIST_APPEND) X(LIST_EXTEND) X(MAP_ADD) X(DICT_UPDATE) X(DICT_MERGE) \
  X(LIST_TO_TUPLE) X(CALL_INTRINSIC_1) X(UNPACK_SEQUENCE) X(UNPACK_EX) X(BINARY_OP) X(BINARY_SUBSCR) \
  X(STORE_SUBSCR) X(BINARY_SLICE) X(STORE_SLICE) X(UNARY_NEGATIVE) X(UNARY_NOT) X(UNARY_INVERT) \
  X(UNARY_POSITIVE) X(COMPARE_OP) X(IS_OP) X(CONTAINS_OP) X(POP_JUMP_IF_TRUE) X(POP_JUMP_IF_FALSE) \
  X(POP_JUMP_IF_NONE) X(POP_JUMP_IF_NOT_NONE) X(POP_JUMP_FORWARD_IF_TRUE) X(POP_JUMP_FORWARD_IF_FALSE) \
  X(POP_JUMP_FORWARD_IF_NONE) X(POP_JUMP_FORWARD_IF_NOT_NONE) X(POP_JUMP_BACKWARD_IF_TRUE) \
  X(POP_JUMP_BACKWARD_IF_FALSE) X(POP_JUMP_BACKWARD_IF_NONE) X(POP_JUMP_BACKWARD_IF_NOT_NONE) \
  X(JUMP_IF_TRUE_OR_POP) X(JUMP_IF_FALSE_OR_POP) X(JUMP_FORWARD) X(JUMP_BACKWARD) \
  X(JUMP_BACKWARD_NO_INTERRUPT) X(GET_ITER) X(FOR_ITER) X(END_FOR) X(PRECALL) X(KW_NAMES) X(CALL) \
  X(CALL_FUNCTION_EX) X(MAKE_FUNCTION) X(RETURN_VALUE) X(BEFORE_WITH) X(RETURN_GENERATOR) X(YIELD_VALUE) \
  X(IMPORT_NAME) X(IMPORT_FROM) X(LOAD_ASSERTION_ERROR) X(RAISE_VARARGS) X(BUILD_SET) X(SET_ADD) X(SET_UPDATE) \
  X(LOAD_SUPER_ATTR)
#define KILN_ENUM(n) OP_##n,
  KILN_OPS(KILN_ENUM)
#undef KILN_ENUM
  OP_UNKNOWN
};

static int op_id(const char* name) {
  static const std::unordered_map<std::string, int> ids = {
#define KILN_MAP(n) {#n, OP_##n},
      KILN_OPS(KILN_MAP)
#undef KILN_MAP
  };
  auto it = ids.find(name);
  return it == ids.end() ? OP_UNKNOWN : it->second;
}

const DecodedCode& decoded_code(PyCodeObject* code) {
  // Never destroyed: it holds Python references and must outlive interpreter finalisation.
  static auto& cache = *new std::unordered_map<PyCodeObject*, std::pair<PyRef, std::unique_ptr<DecodedCode>>>();
  auto it = cache.find(code);
  if (it != cache.end()) return *it->second.second;
  PyRef raw = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_code"));
  if (!raw) { PyErr_Clear(); throw std::runtime_error("cannot read co_code"); }
  auto d = std::make_unique<DecodedCode>();
  d->bc = std::make_unique<Bytecode>(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(raw.get())),
                                     static_cast<size_t>(PyBytes_GET_SIZE(raw.get())), PY_MAJOR_VERSION, PY_MINOR_VERSION);
  for (const auto& in : d->bc->instructions()) d->ops.push_back(op_id(in.name));
  auto& slot = cache[code];
  slot.first = PyRef::borrow(reinterpret_cast<PyObject*>(code));
  slot.second = std::move(d);
  return *slot.second;
}


static std::string code_location(PyCodeObject* code, int offset) {
  int line = PyCode_Addr2Line(code, offset);
  return py_str(code->co_filename) + ":" + std::to_string(line);
}

Interpreter::Interpreter(const kiln_frame& frame, CaptureOptions options) : root_(frame), opts_(options) {
  initial_grad_ = probe_grad_enabled();
}

Interpreter::~Interpreter() { probe_set_grad_enabled(initial_grad_); }

std::string Interpreter::where() const {
  if (frames_.empty()) return "";
  const Frame* f = frames_.back();
  return code_location(f->code, f->dc->bc->at(f->cur).offset);
}

std::string Interpreter::inline_stack() const {
  std::string out;
  for (const Frame* f : frames_)
    out += "  " + py_str(f->code->co_qualname) + " at " + code_location(f->code, f->dc->bc->at(f->cur).offset) + "\n";
  return out;
}

void Interpreter::unsupported(const std::string& reason) { throw Unsupported(reason, where(), inline_stack()); }

// Fetches and clears the pending Python error as "Type: message".
static std::string take_python_error() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string msg = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value) msg += ": " + py_str(value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg;
}

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

PyRef Interpreter::as_python(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kConst:
    case VarKind::kObject: return v->obj;
    case VarKind::kTuple:
    case VarKind::kList: {
      PyRef out = PyRef::steal(v->kind == VarKind::kTuple ? PyTuple_New(v->items.size()) : PyList_New(v->items.size()));
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i]);
        if (!it) return PyRef();
        if (v->kind == VarKind::kTuple) PyTuple_SET_ITEM(out.get(), i, it.release());
        else PyList_SET_ITEM(out.get(), i, it.release());
      }
      return out;
    }
    case VarKind::kDict: {
      PyRef out = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i]);
        if (!it) return PyRef();
        PyDict_SetItem(out.get(), v->keys[i].get(), it.get());
      }
      return out;
    }
    default: return PyRef();
  }
}

bool Interpreter::all_const(const std::vector<VarPtr>& vs) {
  for (const auto& v : vs)
    if (!v->is_const()) return false;
  return true;
}

// ---------------------------------------------------------------- graph recording

int Interpreter::handle(PyObject* o) {
  auto it = handles_.find(o);
  if (it != handles_.end()) return it->second;
  int h = static_cast<int>(cap_.objects.size());
  cap_.objects.push_back(PyRef::borrow(o));
  handles_[o] = h;
  return h;
}

static std::string qualified_name(PyObject* fn) {
  PyRef mod = PyRef::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!mod) PyErr_Clear();
  PyRef qn = PyRef::steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (!qn) { PyErr_Clear(); qn = PyRef::steal(PyObject_GetAttrString(fn, "__name__")); }
  if (!qn) { PyErr_Clear(); return py_repr(fn); }
  std::string m = (mod && PyUnicode_Check(mod.get())) ? py_str(mod.get()) : "";
  if (m == "torch._C._VariableFunctions" || m == "torch._C") m = "torch";
  std::string q = py_str(qn.get());
  if (q.rfind("_VariableFunctionsClass.", 0) == 0) return "torch." + q.substr(24);
  if (m == "torch._C._nn") m = "torch._C._nn";
  if (m == "_operator") m = "operator";
  return m.empty() ? py_str(qn.get()) : m + "." + py_str(qn.get());
}

graph::Arg Interpreter::to_arg(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor: return graph::Arg::of_node(v->node);
    case VarKind::kConst: return graph::Arg::of_const(handle(v->obj.get()), py_repr(v->obj.get()));
    case VarKind::kTuple:
    case VarKind::kList: {
      std::vector<graph::Arg> items;
      for (const auto& it : v->items) items.push_back(to_arg(it));
      return graph::Arg::of_seq(v->kind == VarKind::kTuple ? graph::Arg::kTuple : graph::Arg::kList, std::move(items));
    }
    case VarKind::kObject:
      if (PyType_Check(v->obj.get()) || PyCallable_Check(v->obj.get()) || PyModule_Check(v->obj.get()))
        return graph::Arg::of_const(handle(v->obj.get()), qualified_name(v->obj.get()));
      return graph::Arg::of_const(handle(v->obj.get()), py_repr(v->obj.get()));
    default: unsupported(std::string("cannot pass a ") + kind_name(v->kind) + " to a tensor operation");
  }
}

PyRef Interpreter::to_fake(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::kTensor: return v->fake;
    case VarKind::kConst:
    case VarKind::kObject: return v->obj;
    case VarKind::kTuple:
    case VarKind::kList: {
      PyRef out = PyRef::steal(v->kind == VarKind::kTuple ? PyTuple_New(v->items.size()) : PyList_New(v->items.size()));
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = to_fake(v->items[i]);
        if (v->kind == VarKind::kTuple) PyTuple_SET_ITEM(out.get(), i, it.release());
        else PyList_SET_ITEM(out.get(), i, it.release());
      }
      return out;
    }
    default: unsupported(std::string("cannot pass a ") + kind_name(v->kind) + " to a tensor operation");
  }
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
        PyRef idx = PyRef::steal(PyLong_FromSsize_t(i));
        int n = -1;
        if (probe_is_tensor(item)) {
          n = cap_.graph->add_call(graph::Op::kCallFunction, "operator.getitem",
                                   handle(PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "getitem")),
                                   {graph::Arg::of_node(node), graph::Arg::of_const(handle(idx.get()), std::to_string(i))}, {},
                                   probe_describe_tensor(item), where());
          cap_.removable.push_back(true);
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

VarPtr Interpreter::record_op(graph::Op op, PyObject* target, const std::string& method, const std::vector<VarPtr>& args,
                              const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  // Device of the result: an explicit device argument, else the first non-CPU tensor input,
  // else the first tensor input, else the default device (factories).
  PyRef device;
  bool rewrite_devices = method == "to" || method == "type" || method == "new_tensor";
  std::vector<PyObject*> devs;
  for (const auto& a : args) collect_tensor_devices(a, devs);
  for (const auto& kv : kwargs) collect_tensor_devices(kv.second, devs);

  PyRef fargs = PyRef::steal(PyTuple_New(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    PyRef f = to_fake(args[i]);
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
    if (kv.first == "device" && f.get() != Py_None) {
      device = to_device_object(f.get());
      if (!device) unsupported("bad device argument: " + take_python_error());
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
                        (op == graph::Op::kCallFunction && target && is_inplace_operator(qualified_name(target))));
  if (inplace) {
    // Mutate a private copy of the metadata: meta tensors may be shared through the memo.
    PyRef copy = PyRef::steal(probe_make_meta(args[0]->fake.get()));
    PyTuple_SetItem(fargs.get(), 0, copy.release());
  }
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
  std::string name = op == graph::Op::kCallMethod ? method : qualified_name(target);
  if (!result) unsupported("shape propagation failed for " + name + ": " + take_python_error());
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
  if (inplace) {
    std::vector<graph::Arg> gargs;
    for (const auto& a : args) gargs.push_back(to_arg(a));
    std::vector<std::pair<std::string, graph::Arg>> gkw;
    for (const auto& kv : kwargs) gkw.emplace_back(kv.first, to_arg(kv.second));
    cap_.graph->add_call(op, name, op == graph::Op::kCallFunction ? handle(target) : -1, std::move(gargs), std::move(gkw),
                         probe_describe_tensor(PyTuple_GET_ITEM(fargs.get(), 0)), where());
    cap_.removable.push_back(false);
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
    if (!is_constant_like(result.get()))
      unsupported(name + " returned a non-tensor value of type " + Py_TYPE(result.get())->tp_name);
    return make_const(result.get());
  }
  std::vector<graph::Arg> gargs;
  for (const auto& a : args) gargs.push_back(to_arg(a));
  std::vector<std::pair<std::string, graph::Arg>> gkw;
  for (const auto& kv : kwargs) gkw.emplace_back(kv.first, to_arg(kv.second));
  std::string meta = probe_is_tensor(result.get()) ? probe_describe_tensor(result.get()) : "";
  int node = cap_.graph->add_call(op, name, op == graph::Op::kCallFunction ? handle(target) : -1, std::move(gargs),
                                  std::move(gkw), meta, where());
  cap_.removable.push_back(false);
  return wrap_result(result.get(), node, device.get());
}

VarPtr Interpreter::record_grad_mode(bool enabled) {
  PyObject* flag = enabled ? Py_True : Py_False;
  cap_.graph->add_call(graph::Op::kCallFunction, "torch._C._set_grad_enabled", handle(g_torch.set_grad_enabled_fn),
                       {graph::Arg::of_const(handle(flag), enabled ? "True" : "False")}, {}, "", where());
  cap_.removable.push_back(false);
  probe_set_grad_enabled(enabled);
  return make_const(Py_None);
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
  if (value->kind != VarKind::kTensor && value->kind != VarKind::kConst && value->kind != VarKind::kObject &&
      value->kind != VarKind::kTuple && value->kind != VarKind::kList && value->kind != VarKind::kDict)
    unsupported("assigning a " + std::string(kind_name(value->kind)) + " to an attribute (" + n + ")");
  attr_stores_.push_back({obj, PyRef::borrow(name), value});
}

VarPtr Interpreter::stored_attr(PyObject* obj, PyObject* name) {
  for (auto it = attr_stores_.rbegin(); it != attr_stores_.rend(); ++it)
    if (it->target->obj.get() == obj && PyUnicode_Compare(it->name.get(), name) == 0) return it->value;
  return nullptr;
}

// ---------------------------------------------------------------- output template

PyObject* OutputTemplate::build(PyObject* const* outs) const {
  switch (kind) {
    case kGraphOut: return Py_NewRef(outs[index]);
    case kConst: return Py_NewRef(obj.get());
    case kTuple:
    case kList: {
      PyObject* seq = kind == kList ? PyList_New(items.size()) : PyTuple_New(items.size());
      if (!seq) return nullptr;
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* it = items[i].build(outs);
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
      PyObject* inst = PyObject_CallMethod(obj.get(), "__new__", "O", obj.get());
      if (!inst) return nullptr;
      if (!dict_part.empty()) {
        PyObject* d = dict_part[0].build(outs);
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
        PyObject* it = items[i].build(outs);
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
      PyObject* d = PyDict_New();
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* it = items[i].build(outs);
        if (!it) { Py_DECREF(d); return nullptr; }
        PyDict_SetItem(d, PyTuple_GET_ITEM(obj.get(), i), it);
        Py_DECREF(it);
      }
      return d;
    }
  }
  return nullptr;
}

// ---------------------------------------------------------------- running frames

static OutputTemplate make_template(Interpreter* self, const VarPtr& v, std::vector<graph::Arg>& outs,
                                    std::unordered_map<int, int>& out_index, const std::function<void(const std::string&)>& fail) {
  OutputTemplate t;
  switch (v->kind) {
    case VarKind::kTensor: {
      t.kind = OutputTemplate::kGraphOut;
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
      t.kind = OutputTemplate::kConst;
      t.obj = v->obj;
      return t;
    case VarKind::kTuple:
    case VarKind::kList:
      t.kind = v->kind == VarKind::kTuple ? OutputTemplate::kTuple : OutputTemplate::kList;
      if (v->kind == VarKind::kTuple) t.obj = v->obj;
      for (const auto& it : v->items) t.items.push_back(make_template(self, it, outs, out_index, fail));
      return t;
    case VarKind::kDict: {
      t.kind = OutputTemplate::kDict;
      t.obj = PyRef::steal(PyTuple_New(v->keys.size()));
      for (size_t i = 0; i < v->keys.size(); ++i) PyTuple_SET_ITEM(t.obj.get(), i, Py_NewRef(v->keys[i].get()));
      for (const auto& it : v->items) t.items.push_back(make_template(self, it, outs, out_index, fail));
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
    default:
      fail(std::string("cannot return a ") + kind_name(v->kind) + " from a compiled function");
      return t;
  }
}

void Interpreter::run() {
  PyCodeObject* code = root_.code;
  Frame f;
  f.code = code;
  f.dc = &decoded_code(code);
  f.globals = root_.globals;
  f.builtins = root_.builtins;
  f.locals.resize(root_.nlocalsplus);
  cap_.name = py_str(code->co_qualname);
  cap_.where = code_location(code, 0);
  cap_.guards->set_global_state(probe_global_state());
  int nargs = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
              ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  for (int i = 0; i < nargs && i < root_.nlocalsplus; ++i) {
    PyObject* name = PyTuple_GET_ITEM(code->co_localsplusnames, i);
    if (root_.localsplus[i]) f.locals[i] = wrap(root_.localsplus[i], local_source(i, py_str(name)));
  }
  // *args and **kwargs are built anew for each call: nothing outside sees their mutation.
  int slot = code->co_argcount + code->co_kwonlyargcount;
  if (code->co_flags & CO_VARARGS) {
    if (f.locals[slot]) f.locals[slot]->fresh = true;
    ++slot;
  }
  if ((code->co_flags & CO_VARKEYWORDS) && f.locals[slot]) f.locals[slot]->fresh = true;
  f.closure_source_func = make_object(root_.func, frame_func_source());
  frames_.push_back(&f);
  VarPtr result;
  try {
    result = run_frame(f);
  } catch (...) {
    frames_.pop_back();
    throw;
  }
  // The graph must leave grad mode as it found it.
  if (probe_grad_enabled() != initial_grad_) record_grad_mode(initial_grad_);
  std::vector<graph::Arg> outs;
  std::unordered_map<int, int> out_index;
  auto fail = [&](const std::string& r) { unsupported(r); };
  cap_.output = make_template(this, result, outs, out_index, fail);
  for (size_t i = 0; i < attr_stores_.size(); ++i) {
    const AttrStore& st = attr_stores_[i];
    bool superseded = false;  // only the last store to an (object, name) is replayed
    for (size_t j = i + 1; j < attr_stores_.size() && !superseded; ++j)
      superseded = attr_stores_[j].target->obj.get() == st.target->obj.get() &&
                   PyUnicode_Compare(attr_stores_[j].name.get(), st.name.get()) == 0;
    if (!superseded) cap_.side_effects.push_back({st.target->obj, st.name, make_template(this, st.value, outs, out_index, fail)});
  }
  frames_.pop_back();
  cap_.graph->set_output(std::move(outs));
  cap_.graph->eliminate_dead_code(cap_.removable);  // only kiln-made getitem nodes may go
}

VarPtr Interpreter::run_frame(Frame& f) {
  if (static_cast<int>(frames_.size()) > opts_.max_inline_depth) unsupported("inlining too deep (recursion?)");
  const auto& instrs = f.dc->bc->instructions();
  while (true) {
    if (f.pc < 0 || f.pc >= static_cast<int>(instrs.size())) unsupported("ran off the end of the bytecode");
    if (++instructions_ > opts_.max_instructions) unsupported("capture exceeded the instruction budget");
    f.cur = f.pc++;
    int op = f.dc->ops[f.cur];
    const Instruction& in = instrs[f.cur];
    if (op == OP_RETURN_VALUE || op == OP_RETURN_CONST) {
      VarPtr r;
      if (op == OP_RETURN_VALUE) { r = f.stack.back(); f.stack.pop_back(); }
      else r = make_const(PyTuple_GET_ITEM(f.code->co_consts, in.arg));
      if (f.code->co_flags & CO_GENERATOR) {
        auto g = make_seq(VarKind::kGenerator, f.yields);
        return g;
      }
      return r;
    }
    step(f, op, in);
  }
}

static PyObject* name_at(PyCodeObject* code, int i) { return PyTuple_GET_ITEM(code->co_names, i); }

void Interpreter::step(Frame& f, int op, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { if (st.empty()) unsupported("stack underflow"); VarPtr v = st.back(); st.pop_back(); return v; };
  auto push = [&](VarPtr v) { st.push_back(std::move(v)); };
  auto popn = [&](int n) {
    if (static_cast<int>(st.size()) < n) unsupported("stack underflow");
    std::vector<VarPtr> out(st.end() - n, st.end());
    st.resize(st.size() - n);
    return out;
  };
  auto jump = [&](int target) { f.pc = target; };
  switch (op) {
    case OP_NOP: case OP_RESUME: case OP_CACHE: case OP_PRECALL: return;
    case OP_PUSH_NULL: push(make_null()); return;
    case OP_POP_TOP: pop(); return;
    case OP_COPY: push(st.at(st.size() - in.arg)); return;
    case OP_SWAP: std::swap(st.at(st.size() - 1), st.at(st.size() - in.arg)); return;
    case OP_LOAD_CONST: {
      PyObject* c = PyTuple_GET_ITEM(f.code->co_consts, in.arg);
      push(is_constant_like(c) ? make_const(c) : make_object(c, nullptr));
      return;
    }
    case OP_LOAD_FAST: case OP_LOAD_FAST_CHECK: {
      VarPtr v = f.locals.at(in.arg);
      if (!v || v->kind == VarKind::kNull) unsupported("read of an unbound local " + py_str(PyTuple_GET_ITEM(f.code->co_localsplusnames, in.arg)));
      if (v->kind == VarKind::kCell) unsupported("cell read through LOAD_FAST");
      push(v);
      return;
    }
    case OP_LOAD_FAST_AND_CLEAR: {
      VarPtr v = f.locals.at(in.arg);
      push(v ? v : make_null());
      f.locals[in.arg] = nullptr;
      return;
    }
    case OP_STORE_FAST: {
      VarPtr v = pop();
      f.locals.at(in.arg) = v->kind == VarKind::kNull ? nullptr : v;
      return;
    }
    case OP_DELETE_FAST: f.locals.at(in.arg) = nullptr; return;
    case OP_MAKE_CELL: {
      auto cell = std::make_shared<Var>(VarKind::kCell);
      if (f.locals.at(in.arg)) cell->items.push_back(f.locals[in.arg]);
      f.locals[in.arg] = cell;
      return;
    }
    case OP_COPY_FREE_VARS: {
      int nfree = in.arg;
      int first = static_cast<int>(f.locals.size()) - nfree;
      if (f.closure_source_func) {  // root frame: cells come from the function object
        PyObject* cl = PyFunction_GET_CLOSURE(f.closure_source_func->obj.get());
        for (int i = 0; i < nfree; ++i) {
          auto cell = std::make_shared<Var>(VarKind::kCell);
          PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(cl, i));
          std::string nm = py_str(PyTuple_GET_ITEM(f.code->co_localsplusnames, first + i));
          if (contents) cell->items.push_back(wrap(contents, closure_cell_source(f.closure_source_func->source, i, nm)));
          cell->source = closure_cell_source(f.closure_source_func->source, i, nm);
          f.locals[first + i] = cell;
        }
      }
      return;  // inlined frames get their cells at bind time
    }
    case OP_LOAD_CLOSURE: push(f.locals.at(in.arg)); return;
    case OP_LOAD_DEREF: {
      VarPtr cell = f.locals.at(in.arg);
      if (!cell || cell->kind != VarKind::kCell || cell->items.empty()) unsupported("read of an empty closure cell");
      push(cell->items[0]);
      return;
    }
    case OP_STORE_DEREF: {
      VarPtr v = pop();
      VarPtr cell = f.locals.at(in.arg);
      if (!cell || cell->kind != VarKind::kCell) unsupported("store to a non-cell");
      if (cell->source) unsupported("assignment to a closure variable of the compiled function (nonlocal side effect)");
      cell->items.assign(1, v);
      return;
    }
    case OP_LOAD_GLOBAL: {
      PyObject* name = name_at(f.code, in.arg >> 1);
      if (in.arg & 1) push(make_null());
      PyObject* v = PyDict_GetItemWithError(f.globals, name);
      bool builtin = false;
      if (!v && !PyErr_Occurred()) { v = PyDict_GetItemWithError(f.builtins, name); builtin = true; }
      if (!v) { PyErr_Clear(); unsupported("name '" + py_str(name) + "' is not defined"); }
      push(wrap(v, global_source(builtin ? f.builtins : f.globals, name, builtin)));
      return;
    }
    case OP_LOAD_ATTR: case OP_LOAD_METHOD: {
      bool method = op == OP_LOAD_METHOD || (PY_MINOR_VERSION >= 12 && (in.arg & 1));
      PyObject* name = name_at(f.code, PY_MINOR_VERSION >= 12 ? in.arg >> 1 : in.arg);
      VarPtr obj = pop();
      VarPtr a = get_attr(obj, name);
      if (method) push(make_null());
      push(a);
      return;
    }
    case OP_LOAD_SUPER_ATTR: {  // 3.12: super().name / super(C, self).name in one instruction
      VarPtr self_v = pop(), cls = pop();
      VarPtr super_fn = pop();
      if (super_fn->kind != VarKind::kObject || super_fn->obj.get() != reinterpret_cast<PyObject*>(&PySuper_Type))
        unsupported("LOAD_SUPER_ATTR with a rebound `super`");
      if (!cls->is_const() && cls->kind != VarKind::kObject) unsupported("super() with a non-constant class");
      auto sup = std::make_shared<Var>(VarKind::kSuper);
      sup->obj = cls->obj;
      sup->self = self_v;
      VarPtr a = get_attr(sup, name_at(f.code, in.arg >> 2));
      if (in.arg & 1) push(make_null());
      push(a);
      return;
    }
    case OP_STORE_ATTR: {
      VarPtr owner = pop();
      VarPtr value = pop();
      store_attr(owner, name_at(f.code, in.arg), value);
      return;
    }
    case OP_BUILD_TUPLE: push(make_seq(VarKind::kTuple, popn(in.arg))); return;
    case OP_BUILD_LIST: push(make_seq(VarKind::kList, popn(in.arg))); return;
    // Sets hold constants only: a new Python set object built as the code runs.
    case OP_BUILD_SET: {
      auto items = popn(in.arg);
      PyRef set = PyRef::steal(PySet_New(nullptr));
      for (auto& it : items) {
        if (!it->is_const()) unsupported("a set of non-constant values");
        if (PySet_Add(set.get(), it->obj.get()) < 0) unsupported(take_python_error());
      }
      push(make_object(set.get(), nullptr));
      return;
    }
    case OP_SET_ADD: case OP_SET_UPDATE: {
      VarPtr v = pop();
      VarPtr set = st.at(st.size() - in.arg);
      if (set->kind != VarKind::kObject || !PySet_Check(set->obj.get())) unsupported("set update of a non-set");
      std::vector<VarPtr> items = op == OP_SET_ADD ? std::vector<VarPtr>{v} : unpack(v);
      for (auto& it : items) {
        if (!it->is_const()) unsupported("a set of non-constant values");
        if (PySet_Add(set->obj.get(), it->obj.get()) < 0) unsupported(take_python_error());
      }
      return;
    }
    case OP_BUILD_MAP: {
      auto kv = popn(2 * in.arg);
      auto d = std::make_shared<Var>(VarKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        if (!kv[2 * i]->is_const()) unsupported("dict key is not a constant");
        d->keys.push_back(kv[2 * i]->obj);
        d->items.push_back(kv[2 * i + 1]);
      }
      push(d);
      return;
    }
    case OP_BUILD_CONST_KEY_MAP: {
      VarPtr keys = pop();
      auto vals = popn(in.arg);
      auto d = std::make_shared<Var>(VarKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        d->keys.push_back(PyRef::borrow(PyTuple_GET_ITEM(keys->obj.get(), i)));
        d->items.push_back(vals[i]);
      }
      push(d);
      return;
    }
    case OP_BUILD_SLICE: {
      auto parts = popn(in.arg);
      if (!all_const(parts)) unsupported("slice with non-constant bounds");
      PyRef s = PyRef::steal(PySlice_New(parts[0]->obj.get(), parts[1]->obj.get(), in.arg == 3 ? parts[2]->obj.get() : nullptr));
      push(make_const(s.get()));
      return;
    }
    case OP_BUILD_STRING: {
      auto parts = popn(in.arg);
      PyRef empty = PyRef::steal(PyUnicode_FromString(""));
      PyRef lst = PyRef::steal(PyList_New(0));
      for (auto& p : parts) {
        if (!p->is_const() || !PyUnicode_Check(p->obj.get())) unsupported("f-string of a non-constant");
        PyList_Append(lst.get(), p->obj.get());
      }
      PyRef s = PyRef::steal(PyUnicode_Join(empty.get(), lst.get()));
      push(make_const(s.get()));
      return;
    }
    case OP_FORMAT_VALUE: {
      VarPtr spec = (in.arg & 0x04) ? pop() : nullptr;
      VarPtr v = pop();
      if (!v->is_const() || (spec && !spec->is_const())) unsupported("formatting a non-constant value");
      PyRef val = v->obj;
      int conv = in.arg & 0x03;
      if (conv == 1) val = PyRef::steal(PyObject_Str(val.get()));
      else if (conv == 2) val = PyRef::steal(PyObject_Repr(val.get()));
      else if (conv == 3) val = PyRef::steal(PyObject_ASCII(val.get()));
      PyRef s = PyRef::steal(PyObject_Format(val.get(), spec ? spec->obj.get() : nullptr));
      if (!s) unsupported("format failed: " + take_python_error());
      push(make_const(s.get()));
      return;
    }
    case OP_LIST_APPEND: { VarPtr v = pop(); st.at(st.size() - in.arg)->items.push_back(v); return; }
    case OP_LIST_EXTEND: {
      VarPtr v = pop();
      auto items = unpack(v);
      auto& l = st.at(st.size() - in.arg)->items;
      l.insert(l.end(), items.begin(), items.end());
      return;
    }
    case OP_MAP_ADD: {
      VarPtr val = pop(), key = pop();
      VarPtr d = st.at(st.size() - in.arg);
      if (!key->is_const()) unsupported("dict key is not a constant");
      std::vector<VarPtr> args{key, val};
      std::vector<std::pair<std::string, VarPtr>> kw;
      auto m = std::make_shared<Var>(VarKind::kContainerMethod);
      m->self = d;
      m->name = "__setitem__";
      call_container_method(m, args, kw);
      return;
    }
    case OP_DICT_UPDATE: case OP_DICT_MERGE: {
      VarPtr other = pop();
      VarPtr d = st.at(st.size() - in.arg);
      if (other->kind != VarKind::kDict) unsupported("** of a non-dict");
      for (size_t i = 0; i < other->keys.size(); ++i) {
        std::vector<VarPtr> args{make_const(other->keys[i].get()), other->items[i]};
        std::vector<std::pair<std::string, VarPtr>> kw;
        auto m = std::make_shared<Var>(VarKind::kContainerMethod);
        m->self = d;
        m->name = "__setitem__";
        call_container_method(m, args, kw);
      }
      return;
    }
    case OP_LIST_TO_TUPLE: push(make_seq(VarKind::kTuple, pop()->items)); return;
    case OP_CALL_INTRINSIC_1:
      if (in.arg == 6) { push(make_seq(VarKind::kTuple, pop()->items)); return; }
      if (in.arg == 5) { push(unary(PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "pos"), pop())); return; }
      unsupported("intrinsic " + std::to_string(in.arg));
    case OP_UNPACK_SEQUENCE: {
      auto items = unpack(pop());
      if (static_cast<int>(items.size()) != in.arg)
        unsupported("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(in.arg));
      for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
      return;
    }
    case OP_UNPACK_EX: {
      auto items = unpack(pop());
      int before = in.arg & 0xff, after = in.arg >> 8;
      if (static_cast<int>(items.size()) < before + after) unsupported("not enough values to unpack");
      std::vector<VarPtr> mid(items.begin() + before, items.end() - after);
      for (int i = 0; i < after; ++i) push(items[items.size() - 1 - i]);
      push(make_seq(VarKind::kList, mid));
      for (int i = before - 1; i >= 0; --i) push(items[i]);
      return;
    }
    case OP_BINARY_OP: { VarPtr b = pop(), a = pop(); push(binary(f.dc->bc->binary_op_name(in.arg), a, b)); return; }
    case OP_BINARY_SUBSCR: { VarPtr idx = pop(), obj = pop(); push(subscript(obj, idx)); return; }
    case OP_BINARY_SLICE: {
      VarPtr end = pop(), start = pop(), obj = pop();
      if (!start->is_const() || !end->is_const()) unsupported("slice with non-constant bounds");
      PyRef s = PyRef::steal(PySlice_New(start->obj.get(), end->obj.get(), nullptr));
      push(subscript(obj, make_const(s.get())));
      return;
    }
    case OP_STORE_SUBSCR: case OP_STORE_SLICE: {
      VarPtr idx, obj, val;
      if (op == OP_STORE_SLICE) {
        VarPtr end = pop(), start = pop();
        obj = pop();
        val = pop();
        if (!start->is_const() || !end->is_const()) unsupported("slice with non-constant bounds");
        idx = make_const(PyRef::steal(PySlice_New(start->obj.get(), end->obj.get(), nullptr)).get());
      } else {
        idx = pop();
        obj = pop();
        val = pop();
      }
      if (obj->is_tensor()) {
        PyObject* setitem = PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "setitem");
        record_op(graph::Op::kCallFunction, setitem, "", {obj, idx, val}, {});
        return;
      }
      if (obj->kind == VarKind::kNewObject) {
        PyObject* si = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), PyRef::steal(PyUnicode_FromString("__setitem__")).get());
        if (si && PyFunction_Check(si)) { inline_function(si, nullptr, {obj, idx, val}, {}, nullptr); return; }
        if (!obj->self) unsupported("item assignment on a new object without __setitem__");
        obj = obj->self;
      }
      if (obj->source && !obj->fresh) unsupported("item assignment on an input container (side effect)");
      if (obj->kind == VarKind::kList && idx->is_const() && PyLong_Check(idx->obj.get())) {
        long i = PyLong_AsLong(idx->obj.get());
        if (i < 0) i += static_cast<long>(obj->items.size());
        if (i < 0 || i >= static_cast<long>(obj->items.size())) unsupported("list index out of range");
        obj->items[i] = val;
        return;
      }
      if (obj->kind == VarKind::kDict) {
        std::vector<VarPtr> args{idx, val};
        std::vector<std::pair<std::string, VarPtr>> kw;
        auto m = std::make_shared<Var>(VarKind::kContainerMethod);
        m->self = obj;
        m->name = "__setitem__";
        call_container_method(m, args, kw);
        return;
      }
      unsupported(std::string("item assignment on a ") + kind_name(obj->kind));
    }
    case OP_UNARY_NEGATIVE: case OP_UNARY_INVERT: case OP_UNARY_POSITIVE: {
      const char* nm = op == OP_UNARY_NEGATIVE ? "neg" : op == OP_UNARY_INVERT ? "invert" : "pos";
      PyObject* fn = PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), nm);
      push(unary(fn, pop()));
      return;
    }
    case OP_UNARY_NOT: push(make_const(truthy(pop()) ? Py_False : Py_True)); return;
    case OP_COMPARE_OP: { VarPtr b = pop(), a = pop(); push(compare(PY_MINOR_VERSION >= 12 ? in.arg >> 4 : in.arg, a, b)); return; }
    case OP_IS_OP: {
      VarPtr b = pop(), a = pop();
      bool known = false;
      bool same = same_object(a, b, &known);
      if (!known) unsupported("identity comparison of values kiln cannot track");
      push(make_const((same != (in.arg == 1)) ? Py_True : Py_False));
      return;
    }
    case OP_CONTAINS_OP: {
      VarPtr b = pop(), a = pop();
      VarPtr r = contains(a, b);
      if (in.arg == 1) r = make_const(truthy(r) ? Py_False : Py_True);
      push(r);
      return;
    }
    case OP_POP_JUMP_IF_TRUE: case OP_POP_JUMP_FORWARD_IF_TRUE: case OP_POP_JUMP_BACKWARD_IF_TRUE:
      if (truthy(pop())) jump(in.target);
      return;
    case OP_POP_JUMP_IF_FALSE: case OP_POP_JUMP_FORWARD_IF_FALSE: case OP_POP_JUMP_BACKWARD_IF_FALSE:
      if (!truthy(pop())) jump(in.target);
      return;
    case OP_POP_JUMP_IF_NONE: case OP_POP_JUMP_FORWARD_IF_NONE: case OP_POP_JUMP_BACKWARD_IF_NONE:
    case OP_POP_JUMP_IF_NOT_NONE: case OP_POP_JUMP_FORWARD_IF_NOT_NONE: case OP_POP_JUMP_BACKWARD_IF_NOT_NONE: {
      VarPtr v = pop();
      bool known = false;
      bool is_none = same_object(v, make_const(Py_None), &known);
      if (!known) unsupported("None check of a value kiln cannot track");
      bool want_none = op == OP_POP_JUMP_IF_NONE || op == OP_POP_JUMP_FORWARD_IF_NONE || op == OP_POP_JUMP_BACKWARD_IF_NONE;
      if (is_none == want_none) jump(in.target);
      return;
    }
    case OP_JUMP_IF_TRUE_OR_POP: case OP_JUMP_IF_FALSE_OR_POP: {
      bool t = truthy(st.back());
      if (t == (op == OP_JUMP_IF_TRUE_OR_POP)) jump(in.target);
      else pop();
      return;
    }
    case OP_JUMP_FORWARD: case OP_JUMP_BACKWARD: case OP_JUMP_BACKWARD_NO_INTERRUPT: jump(in.target); return;
    case OP_GET_ITER: push(make_iterator(pop())); return;
    case OP_FOR_ITER: {
      VarPtr it = st.back();
      if (it->kind != VarKind::kIterator) unsupported("FOR_ITER over a non-iterator");
      if (it->pos < it->items.size()) {
        push(it->items[it->pos++]);
        return;
      }
      pop();
      int target = in.target;
      if (std::strcmp(f.dc->bc->at(target).name, "END_FOR") == 0) ++target;
      jump(target);
      return;
    }
    case OP_END_FOR: pop(); pop(); return;
    case OP_KW_NAMES: f.kw_names = PyRef::borrow(PyTuple_GET_ITEM(f.code->co_consts, in.arg)); return;
    case OP_CALL: {
      auto args = popn(in.arg);
      VarPtr callable = pop();
      VarPtr method = pop();
      if (method->kind != VarKind::kNull) {
        args.insert(args.begin(), callable);
        callable = method;
      }
      std::vector<std::pair<std::string, VarPtr>> kwargs;
      if (f.kw_names) {
        Py_ssize_t nk = PyTuple_GET_SIZE(f.kw_names.get());
        for (Py_ssize_t i = 0; i < nk; ++i)
          kwargs.emplace_back(py_str(PyTuple_GET_ITEM(f.kw_names.get(), i)), args[args.size() - nk + i]);
        args.resize(args.size() - nk);
        f.kw_names = PyRef();
      }
      push(call(callable, std::move(args), std::move(kwargs)));
      return;
    }
    case OP_CALL_FUNCTION_EX: {
      VarPtr kw = (in.arg & 1) ? pop() : nullptr;
      VarPtr args = pop();
      VarPtr fn = pop();
      VarPtr null_slot = pop();
      if (null_slot->kind != VarKind::kNull) unsupported("unexpected stack layout for CALL_FUNCTION_EX");
      std::vector<std::pair<std::string, VarPtr>> kwargs;
      if (kw) {
        if (kw->kind != VarKind::kDict) unsupported("**kwargs of a non-dict");
        for (size_t i = 0; i < kw->keys.size(); ++i) kwargs.emplace_back(py_str(kw->keys[i].get()), kw->items[i]);
      }
      push(call(fn, unpack(args), std::move(kwargs)));
      return;
    }
    case OP_MAKE_FUNCTION: {
      VarPtr code = pop();
      auto fn = std::make_shared<Var>(VarKind::kNestedFunction);
      fn->obj = code->obj;
      fn->globals = PyRef::borrow(f.globals);
      if (in.arg & 0x08) fn->items = pop()->items;
      if (in.arg & 0x04) pop();
      if (in.arg & 0x02) {
        VarPtr kwd = pop();
        PyRef d = as_python(kwd);
        if (!d) unsupported("non-constant keyword defaults of a nested function");
        fn->kwdefaults = d;
      }
      if (in.arg & 0x01) {
        VarPtr dv = pop();
        fn->self = dv;  // defaults as Vars
      }
      fn->name = py_str(reinterpret_cast<PyCodeObject*>(code->obj.get())->co_qualname);
      push(fn);
      return;
    }
    case OP_BEFORE_WITH: {
      VarPtr ctx = pop();
      if (ctx->kind != VarKind::kGradMode) unsupported(std::string("with-statement over a ") + kind_name(ctx->kind) + " (only grad-mode contexts are supported)");
      auto exit = std::make_shared<Var>(VarKind::kGradModeExit);
      exit->flag = probe_grad_enabled();
      record_grad_mode(ctx->flag);
      push(exit);
      push(make_const(Py_None));
      return;
    }
    case OP_RETURN_GENERATOR: push(make_const(Py_None)); return;
    case OP_YIELD_VALUE: f.yields.push_back(pop()); push(make_const(Py_None)); return;
    case OP_IMPORT_NAME: {
      VarPtr fromlist = pop(), level = pop();
      PyRef fl = as_python(fromlist);
      PyRef mod = PyRef::steal(PyImport_ImportModuleLevelObject(name_at(f.code, in.arg), f.globals, nullptr, fl.get(),
                                                                 static_cast<int>(PyLong_AsLong(level->obj.get()))));
      if (!mod) unsupported("import failed: " + take_python_error());
      push(make_object(mod.get(), nullptr));
      return;
    }
    case OP_IMPORT_FROM: {
      VarPtr mod = st.back();
      PyRef a = PyRef::steal(PyObject_GetAttr(mod->obj.get(), name_at(f.code, in.arg)));
      if (!a) unsupported("import failed: " + take_python_error());
      push(wrap_unguarded(a.get(), "import"));
      return;
    }
    case OP_LOAD_ASSERTION_ERROR: push(make_object(PyExc_AssertionError, nullptr)); return;
    case OP_RAISE_VARARGS: unsupported("the function raises an exception");
    default: unsupported(std::string("bytecode ") + in.name + " is not supported");
  }
}

}  // namespace kiln::frontend
