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
// Which files kiln never captures: library code (skip prefixes), except allowed prefixes such
// as torch/nn/modules (built-in modules' forward), and always-skipped files (module.py).
void set_skip_rules(PyObject* skip_prefixes, PyObject* allow_prefixes, PyObject* skip_files);
extern PyObject* g_unsupported_error;

}  // namespace kiln::frontend
