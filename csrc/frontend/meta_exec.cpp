// Meta execution with memoisation (see meta_exec.h).
#include "frontend/meta_exec.h"

#include "frontend/tensor_probe.h"
#include "frontend/torch_types.h"

namespace kiln::frontend {

static inline void mix(uint64_t& h, uint64_t v) { h = (h ^ v) * 1099511628211ull; }

bool MetaExecutor::hash_value(PyObject* o, uint64_t& h, int depth) {
  if (depth > 4) return false;
  mix(h, reinterpret_cast<uintptr_t>(Py_TYPE(o)));
  if (probe_is_tensor(o)) { mix(h, probe_meta_hash(o)); return true; }
  if (o == Py_None || o == Py_Ellipsis || PyBool_Check(o)) { mix(h, reinterpret_cast<uintptr_t>(o)); return true; }
  if (PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyUnicode_CheckExact(o) ||
      reinterpret_cast<PyObject*>(Py_TYPE(o)) == g_torch.device_type) {
    Py_hash_t x = PyObject_Hash(o);
    if (x == -1) { PyErr_Clear(); return false; }
    mix(h, static_cast<uint64_t>(x));
    if (PyFloat_CheckExact(o)) {  // -0.0 == 0.0 and nan: hash the bits too
      double d = PyFloat_AS_DOUBLE(o);
      uint64_t bits;
      memcpy(&bits, &d, sizeof bits);
      mix(h, bits);
    }
    return true;
  }
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  if (t == g_torch.dtype_type || t == g_torch.layout_type || t == g_torch.memory_format_type) {
    mix(h, reinterpret_cast<uintptr_t>(o));  // singletons
    return true;
  }
  if (PyTuple_Check(o) || PyList_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    mix(h, static_cast<uint64_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!hash_value(PySequence_Fast_GET_ITEM(o, i), h, depth + 1)) return false;
    return true;
  }
  if (PySlice_Check(o)) {
    auto* s = reinterpret_cast<PySliceObject*>(o);
    return hash_value(s->start, h, depth + 1) && hash_value(s->stop, h, depth + 1) && hash_value(s->step, h, depth + 1);
  }
  return false;
}

PyObject* MetaExecutor::run(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, bool memoize) {
  uint64_t key = 1469598103934665603ull;
  bool cacheable = memoize;
  if (cacheable) {
    mix(key, reinterpret_cast<uintptr_t>(target));
    for (char c : method) mix(key, static_cast<uint64_t>(c));
    mix(key, probe_grad_enabled());
    cacheable = hash_value(args, key);
    if (cacheable && kwargs) {
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (cacheable && PyDict_Next(kwargs, &pos, &k, &v)) {
        cacheable = hash_value(k, key) && hash_value(v, key);
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
  PyObject* result;
  if (method.empty()) {
    result = PyObject_Call(target, args, kwargs);
  } else {
    PyRef fn = PyRef::steal(PyObject_GetAttrString(PyTuple_GET_ITEM(args, 0), method.c_str()));
    if (!fn) return nullptr;
    PyRef rest = PyRef::steal(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
    result = PyObject_Call(fn.get(), rest.get(), kwargs);
  }
  if (result && cacheable) memo_.emplace(key, PyRef::borrow(result));
  return result;
}

}  // namespace kiln::frontend
