// Facts the interpreter asks Python about callables and objects: cached builtins, whether a
// callable is a torch operator or a state query, module hooks.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

PyObject* op_fn(const char* name) { return module_attr("operator", name); }

PyObject* builtin(const char* name) { return module_attr("builtins", name); }

PyObject* sequence_iter() {
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

// A module-level object (`module.name`), imported on first use and kept for the process
// (borrowed; nullptr, with no error set, if it does not exist).
PyObject* module_attr(const char* module, const char* name) {
  static auto& cache = *new std::unordered_map<std::string, PyObject*>();  // outlives finalisation
  std::string key = std::string(module) + "." + name;
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  PyObject* m = PyImport_ImportModule(module);
  PyObject* r = m ? PyObject_GetAttrString(m, name) : nullptr;
  Py_XDECREF(m);
  if (!r) PyErr_Clear();
  return cache[key] = r;
}


std::string module_of(PyObject* fn) {
  PyRef m = PyRef::steal(PyObject_GetAttrString(fn, "__module__"));
  if (!m || !PyUnicode_Check(m.get())) { PyErr_Clear(); return ""; }
  return py_str(m.get());
}

bool starts_with(const std::string& s, const char* p) { return s.compare(0, std::strlen(p), p) == 0; }

// A callable's __qualname__; a pybind11 function's own name where pybind (2.13's torch._C) put its
// function-record class there ("pybind11_detail_function_record_v1_..._get_tracing_state").
// Empty, error cleared, where it has neither.
std::string qualname_of(PyObject* fn) {
  PyRef qn = PyRef::steal(PyObject_GetAttrString(fn, "__qualname__"));
  if (qn && PyUnicode_Check(qn.get()) && !starts_with(py_str(qn.get()), "pybind11_")) return py_str(qn.get());
  PyErr_Clear();
  PyRef name = PyRef::steal(PyObject_GetAttrString(fn, "__name__"));
  if (name && PyUnicode_Check(name.get())) return py_str(name.get());
  PyErr_Clear();
  return "";
}

// A torch callable recorded as one graph operation rather than inlined.
bool is_torch_op(PyObject* fn) {
  // torch.ops.aten.x / torch.ops.aten.x.default: recorded as themselves (inlining their __call__
  // recorded the pybind builtin behind them, which torch.fx cannot name).
  for (const char* t : {"OpOverload", "OpOverloadPacket"})
    if (PyObject* type = module_attr("torch._ops", t); type && PyType_Check(type) && PyObject_TypeCheck(fn, reinterpret_cast<PyTypeObject*>(type)))
      return true;
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
    // A private helper of torch.nn.functional (_none_or_dtype, _canonical_mask, _mha_shape_check,
    // _in_projection_packed) is not an operator: inlined, as Dynamo does. Recorded, one that
    // returns None for a None mask broke the graph, three times per nn.MultiheadAttention call.
    if (m == "torch.nn.functional" && reinterpret_cast<PyFunctionObject*>(fn)->func_name &&
        PyUnicode_Check(reinterpret_cast<PyFunctionObject*>(fn)->func_name) &&
        PyUnicode_READ_CHAR(reinterpret_cast<PyFunctionObject*>(fn)->func_name, 0) == '_')
      return false;
    return op_modules.count(m) || starts_with(m, "torch._refs") || starts_with(m, "torch._decomp") || starts_with(m, "torch._prims");
  }
  return false;
}

// State queries libraries make to pick a trace-friendly path. Under capture kiln answers like a
// tracing compiler: "compiling" is true, scripting/tracing/exporting false. Ellipsis means
// "evaluate now" (a query whose answer is guarded global state or fixed for the process).
PyObject* torch_query_answer(PyObject* fn) {
  if (!PyFunction_Check(fn) && !PyCFunction_Check(fn)) return nullptr;
  std::string m = module_of(fn);
  if (!starts_with(m, "torch")) return nullptr;
  const std::string qn = qualname_of(fn);
  if (qn.empty()) return nullptr;
  static const std::unordered_map<std::string, PyObject*> answers = {
      {"torch.compiler.is_compiling", Py_True}, {"torch.compiler.is_dynamo_compiling", Py_True},
      {"torch._dynamo.external_utils.is_compiling", Py_True}, {"torch._utils.is_compiling", Py_True},
      {"torch.compiler.is_exporting", Py_False}, {"torch._jit_internal.is_scripting", Py_False},
      {"torch.jit._trace.is_tracing", Py_False}, {"torch._C._get_tracing_state", Py_None},
      {"torch.cuda.graphs.is_current_stream_capturing", Py_Ellipsis}, {"torch.cuda.is_available", Py_Ellipsis},
      {"torch.cuda.device_count", Py_Ellipsis}, {"torch.is_grad_enabled", Py_Ellipsis},
      {"torch.get_default_dtype", Py_Ellipsis}, {"torch.is_autocast_enabled", Py_Ellipsis},
      {"torch.are_deterministic_algorithms_enabled", Py_Ellipsis}, {"torch.is_inference_mode_enabled", Py_Ellipsis},
      {"torch._C._get_privateuse1_backend_name", Py_Ellipsis}};
  auto it = answers.find(m + "." + qn);
  return it == answers.end() ? nullptr : it->second;
}

PyTypeObject* builtin_base(PyTypeObject* t) {
  PyObject* mro = t->tp_mro;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); ++i) {
    auto* b = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    if (!(b->tp_flags & Py_TPFLAGS_HEAPTYPE)) return b;
  }
  return &PyBaseObject_Type;
}

bool is_module_instance(PyObject* o) {
  return PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g_torch.module_type));
}

bool dict_nonempty(PyObject* owner, const char* attr_name) {
  PyObject** dp = _PyObject_GetDictPtr(owner);
  if (!dp || !*dp) return false;
  PyObject* d = PyDict_GetItemString(*dp, attr_name);
  return d && PyDict_Check(d) && PyDict_GET_SIZE(d) > 0;
}

}  // namespace kiln::frontend
