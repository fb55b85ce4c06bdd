// Internal to the interpreter: decoded code objects and the per-call interpreter frame.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/interpreter/interpreter.h"

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
  VarPtr handled_exc;  // the exception an except/finally block of this frame is handling (PUSH_EXC_INFO)
  VarPtr closure_source_func;  // root only: where free variables come from
  // A @contextmanager's generator: run_frame returns at its `yield` (the value in `yielded`),
  // and runs on from there when called again (generator_context.cpp).
  bool suspend_at_yield = false;
  bool suspended = false;
  bool started = false, finished = false;  // a kGenFrame's frame: first resumed / returned
  VarPtr yielded;
};


const DecodedCode& decoded_code(PyCodeObject* code);

// Shared helpers of the interpreter's translation units.
std::string take_python_error();  // the pending Python error as "Type: message", cleared
OutputTemplate make_template(Interpreter* self, const VarPtr& v, std::vector<graph::Arg>& outs,
                             std::unordered_map<int, int>& out_index, const std::function<void(const std::string&)>& fail);
std::string qualified_name(PyObject* fn);
PyObject* op_fn(const char* name);       // operator.<name>, borrowed
PyObject* builtin(const char* name);     // builtins.<name>, borrowed
PyObject* sequence_iter();               // collections.abc.Sequence.__iter__
PyObject* module_attr(const char* module, const char* name);
// For the __exit__ kiln puts on a resume function's stack for a grad-mode with-block around a
// graph break: the mode it restores (0/1), 2 if it restores nothing; -1 for anything else.
int grad_mode_restorer(PyObject* f);
// Likewise for a torch.inference_mode block begun before a graph break: the grad mode leaving it
// restores (0/1); -1 for anything else.
int inference_mode_exit(PyObject* f);  // e.g. ("itertools", "islice"), borrowed
// torch.autocast blocks (autocast_blocks.cpp): whether `type` is torch.autocast or a subclass; the
// __exit__ kiln puts on a resume function's stack for a block around a graph break (a new
// reference) and whether `f` is one; entering the blocks a break is inside (how many it entered:
// fewer with a Python error set), and leaving the last `n` of them when the break's instruction raised.
bool is_autocast_type(PyObject* type);
PyObject* autocast_exit_at_break_function();
bool is_autocast_exit_at_break(PyObject* f);
size_t enter_autocast_at_break(const std::vector<PyRef>& blocks);
void leave_autocast_at_break(size_t n);
std::string module_of(PyObject* fn);
bool starts_with(const std::string& s, const char* prefix);
std::string qualname_of(PyObject* fn);
bool is_torch_op(PyObject* fn);
PyObject* torch_query_answer(PyObject* fn);
bool is_module_instance(PyObject* o);
// The first builtin (non-heap) class in t's MRO: the layout its instances have (object, dict, ...).
PyTypeObject* builtin_base(PyTypeObject* t);
bool dict_nonempty(PyObject* owner, const char* attr_name);

}  // namespace kiln::frontend
