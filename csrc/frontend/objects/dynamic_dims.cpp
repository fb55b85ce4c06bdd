// Choosing symbolic dimensions (see dynamic_dims.h).
#include "frontend/objects/dynamic_dims.h"

#include <cstring>
#include <string>

#include "symbolic/sym_expr.h"

namespace kiln::frontend {

// The dimensions named by a tensor attribute holding a set/list of ints (mark_dynamic's format).
static uint64_t marked(PyObject* t, const char* attr, size_t rank) {
  PyObject* s = PyObject_GetAttrString(t, attr);
  if (!s) { PyErr_Clear(); return 0; }
  uint64_t mask = 0;
  PyObject* it = PyObject_GetIter(s);
  if (it) {
    while (PyObject* d = PyIter_Next(it)) {
      long v = PyLong_AsLong(d);
      if (v < 0 && !PyErr_Occurred()) v += static_cast<long>(rank);
      if (PyErr_Occurred()) PyErr_Clear();
      else if (v >= 0 && v < static_cast<long>(rank) && v < 64) mask |= uint64_t{1} << v;
      Py_DECREF(d);
    }
    Py_DECREF(it);
  }
  PyErr_Clear();
  Py_DECREF(s);
  return mask;
}

uint64_t choose_dynamic_dims(PyObject* t, const std::string& source, const std::vector<int64_t>& sizes,
                             DynamicPolicy policy, SizeHistory* history, std::vector<std::string>* changes) {
  const size_t rank = sizes.size();
  if (rank == 0 || rank > 63) return 0;
  // Parameters and buffers of modules keep static shapes (as in Dynamo): they do not change
  // between calls, and other modules' weights reach the same code through the same source.
  if (source.find("._parameters[") != std::string::npos || source.find("._buffers[") != std::string::npos) return 0;
  uint64_t mask = 0;
  if (policy == DynamicPolicy::kAll) mask = (uint64_t{1} << rank) - 1;
  if (policy == DynamicPolicy::kAutomatic && history) {
    auto& e = history->by_source[source];
    if (e.sizes.size() == rank) {
      for (size_t d = 0; d < rank; ++d)
        if (e.sizes[d] != sizes[d] && !(e.dynamic >> d & 1)) {
          e.dynamic |= uint64_t{1} << d;
          if (changes) changes->push_back(source + " dim " + std::to_string(d) + ": " + std::to_string(e.sizes[d]) + " -> " + std::to_string(sizes[d]));
        }
    }
    e.sizes = sizes;
    mask = e.dynamic;
  }
  mask |= marked(t, "_dynamo_dynamic_indices", rank);
  mask &= ~marked(t, "_dynamo_static_indices", rank);
  for (size_t d = 0; d < rank; ++d)
    if (!sym::in_symbol_range(sizes[d])) mask &= ~(uint64_t{1} << d);
  return mask;
}

bool choose_dynamic_int(const std::string& source, int64_t value, DynamicPolicy policy, SizeHistory* history,
                        std::vector<std::string>* changes) {
  if (policy == DynamicPolicy::kStatic) return false;
  if (policy == DynamicPolicy::kAll) return sym::in_symbol_range(value);
  if (!history) return false;
  // 0 and 1 are recorded too: a counter that goes 0, 1, 2 (a loop variable handed to a resume
  // function) is dynamic from 2 on, its first value past the specialised ones, not from 3.
  auto& e = history->by_source[source];
  if (e.sizes.size() == 1 && e.sizes[0] != value && !(e.dynamic & 1)) {
    e.dynamic = 1;
    if (changes) changes->push_back(source + " (an int): " + std::to_string(e.sizes[0]) + " -> " + std::to_string(value));
  }
  e.sizes = {value};
  return sym::in_symbol_range(value) && (e.dynamic & 1);
}

// The value's bits are kept as the entry's one "size": a float compares by its exact value.
bool choose_dynamic_float(const std::string& source, double value, DynamicPolicy policy, SizeHistory* history,
                          std::vector<std::string>* changes) {
  if (policy == DynamicPolicy::kStatic || !history) return false;
  auto& e = history->by_source[source];
  if (e.pinned) return false;
  if (policy == DynamicPolicy::kAll) return true;
  int64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (e.sizes.size() == 1 && e.sizes[0] != bits && !(e.dynamic & 1)) {
    e.dynamic = 1;
    if (changes) {
      double was;
      std::memcpy(&was, &e.sizes[0], sizeof was);
      changes->push_back(source + " (a float): " + std::to_string(was) + " -> " + std::to_string(value));
    }
  }
  e.sizes = {bits};
  return e.dynamic & 1;
}

void pin_float(const std::string& source, SizeHistory* history) {
  if (history) history->by_source[source].pinned = true;
}

}  // namespace kiln::frontend
