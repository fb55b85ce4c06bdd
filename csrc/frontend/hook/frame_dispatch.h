// What happens when the hook offers a frame: cache lookup, capture on a miss, running an entry.
// Also the CompiledFunction type that kiln.compile returns for functions: calling it activates
// the hook for this thread (with its compile context) for the duration of the call.
#pragma once
#include <Python.h>

namespace kiln::frontend {

bool register_compiled_function_type(PyObject* module);
// If `o` is a CompiledFunction, its wrapped callable (borrowed); else nullptr.
PyObject* unwrap_compiled_function(PyObject* o);
void set_fx_compiler(PyObject* fn);
// Called with (debug_dir, facts dict) for every captured frame of a function compiled with a
// debug directory (kiln/_debug.py writes the dump); never called otherwise.
void set_debug_sink(PyObject* fn);
// Which files kiln never captures: a list of (path prefix, skip) tuples, first match wins
// (e.g. skip torch/nn/modules/module.py, capture torch/nn/modules/, skip torch/, capture
// site-packages/, skip the standard library). Files no rule matches are captured.
void set_skip_rules(PyObject* rules);
extern PyObject* g_unsupported_error;
// Raised by a backend's compiled graph (kiln's code generator under kiln's frontend) that declines
// a call with its inputs untouched: the frontend runs the frame's own bytecode instead.
extern PyObject* g_graph_declined;

}  // namespace kiln::frontend
