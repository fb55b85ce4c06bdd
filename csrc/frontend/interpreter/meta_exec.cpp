// Meta execution with memoisation (see meta_exec.h).
#include "frontend/interpreter/meta_exec.h"

#include <cstring>

#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

namespace {
void put(std::string& key, uint64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
}  // namespace

bool MetaExecutor::encode(PyObject* o, std::string& key, int depth) {
  if (depth > 4) return false;
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  put(key, reinterpret_cast<uintptr_t>(t));
  if (probe_is_tensor(o)) return probe_meta_key(o, key);
  if (o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || t == g_torch.dtype_type || t == g_torch.layout_type ||
      t == g_torch.memory_format_type) {
    put(key, reinterpret_cast<uintptr_t>(o));  // singletons
    return true;
  }
  if (PyLong_CheckExact(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return false; }
    put(key, static_cast<uint64_t>(v));
    return true;
  }
  if (PyFloat_CheckExact(o)) {  // the bits: -0.0 and 0.0 differ, every nan is itself
    double d = PyFloat_AS_DOUBLE(o);
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    put(key, bits);
    return true;
  }
  if (PyUnicode_CheckExact(o) || t == g_torch.device_type) {
    PyRef s = PyUnicode_CheckExact(o) ? PyRef::borrow(o) : PyRef::steal(PyObject_Str(o));
    Py_ssize_t n = 0;
    const char* c = s ? PyUnicode_AsUTF8AndSize(s.get(), &n) : nullptr;
    if (!c) { PyErr_Clear(); return false; }
    put(key, static_cast<uint64_t>(n));
    key.append(c, static_cast<size_t>(n));
    return true;
  }
  if (PyTuple_Check(o) || PyList_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    put(key, static_cast<uint64_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!encode(PySequence_Fast_GET_ITEM(o, i), key, depth + 1)) return false;
    return true;
  }
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    return encode(s->start, key, depth + 1) && encode(s->stop, key, depth + 1) && encode(s->step, key, depth + 1);
  }
  return false;
}

PyObject* MetaExecutor::run(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, bool memoize) {
  std::string key;
  bool cacheable = memoize;
  if (cacheable) {
    put(key, reinterpret_cast<uintptr_t>(target));
    put(key, method.size());
    key += method;
    put(key, probe_grad_enabled());
    cacheable = encode(args, key);
    if (cacheable && kwargs) {
      put(key, static_cast<uint64_t>(PyDict_GET_SIZE(kwargs)));
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (cacheable && PyDict_Next(kwargs, &pos, &k, &v)) {
        cacheable = encode(k, key) && encode(v, key);
      }
    }
    if (cacheable) {
      auto it = memo_.find(key);
      if (it != memo_.end()) {
        ++hits_;
        return Py_NewRef(it->second.get());
      }
    }
  }
  ++misses_;
  // Symbolic sizes: some ATen meta kernels take only concrete sizes (view, matmul) or specialise
  // the ones they get (slice of a static tensor); PyTorch's Python dispatcher routes those ops
  // to its SymInt-aware meta functions and decompositions, as its fake tensors do.
  PyRef python_dispatcher;
  if (symbolic_) {
    static PyObject* enable = nullptr;
    if (!enable) {
      PyRef C = PyRef::steal(PyImport_ImportModule("torch._C"));
      enable = C ? PyObject_GetAttrString(C.get(), "_EnablePythonDispatcher") : nullptr;
      if (!enable) return nullptr;
    }
    python_dispatcher = PyRef::steal(PyObject_CallNoArgs(enable));
    if (!python_dispatcher) return nullptr;
  }
  PyObject* result = call(target, method, args, kwargs);
  if (result && cacheable) memo_.emplace(std::move(key), PyRef::borrow(result));
  return result;
}

PyObject* MetaExecutor::call(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs) {
  if (!symbolic_) {  // common elementwise operators without PyTorch's Python meta kernels
    if (PyObject* r = probe_fast_meta(target, method, args, kwargs)) return r;
  } else if (PyObject* r = probe_symbolic_meta(target, method, args, kwargs)) {  // C++ shape functions with SymInts
    return r;
  }
  MetaModeScope meta_mode;  // floats that meta code computes from sizes are values, not sizes
  if (method.empty()) return PyObject_Call(target, args, kwargs);
  PyRef fn = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(args, 0), method.c_str()));
  if (!fn) return nullptr;
  PyRef rest = PyRef::steal(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
  return PyObject_Call(fn.get(), rest.get(), kwargs);
}

}  // namespace kiln::frontend
