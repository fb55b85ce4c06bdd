// Binding a Python call's arguments to parameter names, for the C++ shape functions that answer
// some calls without running them (fast_meta.cpp, symbolic_meta.cpp).
#pragma once
#include <Python.h>

#include <cstring>
#include <vector>

namespace kiln::frontend {

// Binds `args` and `kwargs` to `names` (by position for the first `positional` of them, by
// keyword from `positional_only` on) into out[i] (borrowed; nullptr where not given). False where
// Python would raise (too many, unknown or repeated arguments, a required one missing) or the
// signature has more than 10 names.
inline bool bind_call(const std::vector<const char*>& names, int required, int positional, int positional_only, PyObject* args,
                      PyObject* kwargs, PyObject* out[10]) {
  const Py_ssize_t n = PyTuple_GET_SIZE(args);
  const auto count = static_cast<Py_ssize_t>(names.size());
  if (n > count || n > positional || count > 10) return false;
  for (Py_ssize_t i = 0; i < count; ++i) out[i] = i < n ? PyTuple_GET_ITEM(args, i) : nullptr;
  if (kwargs) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(kwargs, &pos, &k, &v)) {
      const char* key = PyUnicode_Check(k) ? PyUnicode_AsUTF8(k) : nullptr;
      if (!key) { PyErr_Clear(); return false; }
      Py_ssize_t j = positional_only;
      while (j < count && std::strcmp(names[j], key) != 0) ++j;
      if (j == count || out[j]) return false;  // unknown or given twice: Python raises
      out[j] = v;
    }
  }
  for (int i = 0; i < required; ++i)
    if (!out[i]) return false;
  return true;
}

// An optional argument not given, or given as None.
inline bool absent(PyObject* o) { return !o || o == Py_None; }

}  // namespace kiln::frontend
