// Shape propagation: runs an operator on meta tensors to learn its output's metadata, with a
// memo keyed by the operator and its arguments' metadata, so that unrolled loops and repeated
// layers pay for each distinct operator signature once.
#pragma once
#include <string>
#include <unordered_map>

#include "frontend/objects/py_ref.h"

namespace kiln::frontend {

class MetaExecutor {
 public:
  // Calls `target(*args, **kwargs)` (or `args[0].<method>(*args[1:], **kwargs)` when method is
  // not empty) on fake arguments. New reference, or nullptr with a Python exception set.
  PyObject* run(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs, bool memoize);
  int hits() const { return hits_; }
  // Set once the capture has tensors with symbolic sizes: operators then run under PyTorch's
  // Python dispatcher (see run).
  void set_symbolic() { symbolic_ = true; }
  int misses() const { return misses_; }

 private:
  PyObject* call(PyObject* target, const std::string& method, PyObject* args, PyObject* kwargs);
  // Appends an exact encoding of `o` to a memo key (no hashes: two signatures share a key only
  // if they are equal); false for values it cannot encode, which are never memoised.
  bool encode(PyObject* o, std::string& key, int depth = 0);
  std::unordered_map<std::string, PyRef> memo_;
  int hits_ = 0, misses_ = 0;
  bool symbolic_ = false;
};

}  // namespace kiln::frontend
