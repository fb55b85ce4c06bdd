// Internal to the interpreter: decoded code objects and the per-call interpreter frame.
#pragma once
#include <memory>
#include <vector>

#include "frontend/interpreter.h"

namespace kiln::frontend {

// Decoded bytecode per code object, shared by every capture (guarded by the GIL).
struct DecodedCode {
  std::unique_ptr<Bytecode> bc;
  std::vector<int> ops;
};


struct Interpreter::Frame {
  PyCodeObject* code = nullptr;
  const DecodedCode* dc = nullptr;
  std::vector<VarPtr> locals;
  std::vector<VarPtr> stack;
  PyObject* globals = nullptr;
  PyObject* builtins = nullptr;
  int pc = 0;
  int cur = 0;
  PyRef kw_names;
  std::vector<VarPtr> yields;
  VarPtr closure_source_func;  // root only: where free variables come from
};


const DecodedCode& decoded_code(PyCodeObject* code);

}  // namespace kiln::frontend
