// The "eager" backend: runs a captured graph op by op from C++, calling each recorded torch
// callable (which dispatches into ATen) with no Python bytecode in between. It is a Python
// callable taking the graph's inputs positionally and returning a tuple of its outputs.
#pragma once
#include "frontend/interpreter/interpreter.h"

namespace kiln::frontend {

// New reference to an EagerGraph object for the capture, or nullptr with an exception set.
PyObject* make_eager_graph(const Capture& cap);
bool register_eager_graph_type(PyObject* module);

}  // namespace kiln::frontend
