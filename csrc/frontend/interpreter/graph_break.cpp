// Graph breaks: the break's state, where a frame may be split, resume functions, and running the
// instruction in between; see graph_break.h.
#include "frontend/interpreter/graph_break.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "frontend/bytecode/bytecode_assembler.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"

namespace kiln::frontend {

namespace {

bool name_is(const Instruction& in, const char* a) { return std::strcmp(in.name, a) == 0; }

bool is_branch(const Instruction& in) {
  return std::strstr(in.name, "POP_JUMP") && (std::strstr(in.name, "IF_TRUE") || std::strstr(in.name, "IF_FALSE"));
}

// While kiln runs a break's instruction and its resume function the frame hook is on: they are
// user code, whose frames kiln should see (the hook is off while kiln works).
struct HookOnScope {
  int saved = kiln_hook_get_mode();
  HookOnScope() { kiln_hook_set_mode(1); }
  ~HookOnScope() { kiln_hook_set_mode(saved); }
};

// Resume functions by (code, globals, closure, target, stack shape, unbound locals): a break
// reached again makes no new code object, so the resume frame keeps its cache entries. Each
// value holds the original code as well as the function (which holds the globals and the
// closure), so no key's address can be reused by another object. Never destroyed (it holds
// Python references and must outlive interpreter finalisation).
using ResumeKey = std::tuple<PyObject*, PyObject*, PyObject*, int, std::vector<bool>, std::vector<int>>;
struct ResumeEntry {
  PyRef original;
  PyRef function;
};
std::map<ResumeKey, ResumeEntry>& resume_functions() {
  static auto& cache = *new std::map<ResumeKey, ResumeEntry>();
  return cache;
}

// Resume code -> the code it was made from and the length of its prologue (instructions), so that
// a break in a resume function continues in a resume function of the original code (as Dynamo
// makes resume functions from the original code object): a branch on a tensor in a loop reaches
// the same resume functions on every iteration, which keep their cache entries. The codes stay
// alive in resume_functions().
struct ResumeOrigin {
  PyCodeObject* original;
  int prologue;
};
std::map<PyObject*, ResumeOrigin>& resume_origins() {
  static auto& m = *new std::map<PyObject*, ResumeOrigin>();
  return m;
}

PyRef bytes_of(const std::vector<uint8_t>& v) {
  return PyRef::steal(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(v.data()), static_cast<Py_ssize_t>(v.size())));
}

// The resume function continuing `code` at instruction `target` with the given live stack:
// its parameters are every local slot of the frame, then one carrier per non-NULL stack item.
PyObject* resume_function(PyCodeObject* code, PyObject* globals, PyObject* closure, int target, const std::vector<bool>& stack_null,
                          const std::vector<int>& unbound) {
  ResumeKey key{reinterpret_cast<PyObject*>(code), globals, closure, target, stack_null, unbound};
  auto& cache = resume_functions();
  if (auto it = cache.find(key); it != cache.end()) return it->second.function.get();
  const DecodedCode& dc = decoded_code(code);
  PyRef raw = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_code"));
  if (!raw) return nullptr;
  ResumeLayout layout;
  layout.target = target;
  layout.first_carrier = code->co_nlocals;
  layout.stack_null = stack_null;
  layout.unbound = unbound;
  layout.free_vars = code->co_nfreevars;
  ResumeCode rc;
  try {
    rc = build_resume_code(*dc.bc, reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(code->co_exceptiontable)),
                           static_cast<size_t>(PyBytes_GET_SIZE(code->co_exceptiontable)),
                           reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(code->co_linetable)),
                           static_cast<size_t>(PyBytes_GET_SIZE(code->co_linetable)), layout, PY_MAJOR_VERSION, PY_MINOR_VERSION);
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_RuntimeError, "kiln: cannot build a resume function: %s", e.what());
    return nullptr;
  }
  int carriers = 0;
  for (bool n : stack_null) carriers += !n;
  PyRef varnames = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_varnames"));
  if (!varnames) return nullptr;
  PyRef names = PyRef::steal(PyTuple_New(PyTuple_GET_SIZE(varnames.get()) + carriers));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(varnames.get()); ++i) PyTuple_SET_ITEM(names.get(), i, Py_NewRef(PyTuple_GET_ITEM(varnames.get(), i)));
  for (int i = 0; i < carriers; ++i)
    PyTuple_SET_ITEM(names.get(), PyTuple_GET_SIZE(varnames.get()) + i,  // unique: numbered by slot
                     PyUnicode_FromFormat("__kiln_stack%d", static_cast<int>(PyTuple_GET_SIZE(varnames.get())) + i));
  const int offset = dc.bc->at(target).offset;
  // Tracebacks show co_name: the user's function name, so an exception raised after a break
  // reads as in eager; kiln's own reports use the qualified name, which says where it resumed.
  PyRef name = PyRef::borrow(code->co_name);
  PyRef qualname = PyRef::steal(PyUnicode_FromFormat("%U.__resume_at_%d", code->co_qualname, offset));
  PyRef kw = PyRef::steal(PyDict_New());
  PyRef codebytes = bytes_of(rc.code), table = bytes_of(rc.exception_table), lines = bytes_of(rc.line_table);
  const int nargs = static_cast<int>(PyTuple_GET_SIZE(names.get()));
  PyRef argcount = PyRef::steal(PyLong_FromLong(nargs)), zero = PyRef::steal(PyLong_FromLong(0));
  PyRef flags = PyRef::steal(PyLong_FromLong(code->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS)));
  if (!names || !name || !qualname || !kw || !codebytes || !table || !lines || !argcount || !zero || !flags) return nullptr;
  PyDict_SetItemString(kw.get(), "co_code", codebytes.get());
  PyDict_SetItemString(kw.get(), "co_exceptiontable", table.get());
  PyDict_SetItemString(kw.get(), "co_linetable", lines.get());
  PyDict_SetItemString(kw.get(), "co_varnames", names.get());
  PyDict_SetItemString(kw.get(), "co_nlocals", argcount.get());
  PyDict_SetItemString(kw.get(), "co_argcount", argcount.get());
  PyDict_SetItemString(kw.get(), "co_posonlyargcount", zero.get());
  PyDict_SetItemString(kw.get(), "co_kwonlyargcount", zero.get());
  PyDict_SetItemString(kw.get(), "co_flags", flags.get());
  PyDict_SetItemString(kw.get(), "co_name", name.get());
  PyDict_SetItemString(kw.get(), "co_qualname", qualname.get());
  PyRef replace = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "replace"));
  PyRef empty = PyRef::steal(PyTuple_New(0));
  if (!replace || !empty) return nullptr;
  PyRef new_code = PyRef::steal(PyObject_Call(replace.get(), empty.get(), kw.get()));
  if (!new_code) return nullptr;
  PyRef fn = PyRef::steal(PyFunction_New(new_code.get(), globals));
  if (!fn || (closure && PyFunction_SetClosure(fn.get(), closure) < 0)) return nullptr;
  cache[key] = ResumeEntry{PyRef::borrow(reinterpret_cast<PyObject*>(code)), fn};
  resume_origins()[new_code.get()] = ResumeOrigin{code, rc.prologue};
  return fn.get();
}

}  // namespace

std::string break_refusal(PyCodeObject* code, int index) {
  if (code->co_ncellvars) return "the function has cell variables (closures over its locals)";
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) return "the function is a generator";
  const DecodedCode& dc = decoded_code(code);
  if (index < 0 || index >= dc.bc->size()) return "no instruction to break at";
  const Instruction& in = dc.bc->at(index);
  if (!name_is(in, "CALL") && !name_is(in, "STORE_ATTR") && !name_is(in, "BINARY_SUBSCR") && !is_branch(in))
    return std::string("a break at ") + in.name + " is not supported";
  // A call or an attribute store inside a loop runs the frame eagerly, as Dynamo does. A branch on a tensor inside a
  // `while` loop splits it, as Dynamo's jumps do: the resume function holds the rest of the
  // loop, so each iteration continues in it (a `for` loop's iterator on the stack is not rebuilt
  // there, so those frames still run eagerly).
  if (!is_branch(in))
    for (const Instruction& j : dc.bc->instructions())
      if (j.index > index && j.target >= 0 && j.target <= index && std::strstr(j.name, "BACKWARD"))
        return "the break is inside a loop";
  const int unit = in.start_offset / 2;
  try {
    for (const ExceptionEntry& e : parse_exception_table(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(code->co_exceptiontable)),
                                                         static_cast<size_t>(PyBytes_GET_SIZE(code->co_exceptiontable)))) {
      if (e.start > unit || unit >= e.end) continue;
      // A with-block's cleanup (PUSH_EXC_INFO; WITH_EXCEPT_START) is fine: the resume function
      // holds the rest of the block, and the context's __exit__ travels on the stack (only
      // contexts kiln can rebuild there, see capture_break_state). A try block is not: the
      // instruction run at the break would raise outside its handlers.
      const int h = dc.bc->index_of_offset(e.target * 2);
      if (h < 0 || h + 1 >= dc.bc->size() || !name_is(dc.bc->at(h), "PUSH_EXC_INFO") || !name_is(dc.bc->at(h + 1), "WITH_EXCEPT_START"))
        return "the break is inside a try block";
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

VarPtr Interpreter::capture_break_state(Frame& f) {
  const Instruction& in = f.dc->bc->at(f.cur);
  auto brk = std::make_unique<BreakState>();
  brk->index = f.cur;
  brk->offset = in.offset;
  if (name_is(in, "CALL")) {
    brk->kind = BreakState::kCall;
    brk->call_args = in.arg;
    brk->kw_names = f.kw_names;
    if (static_cast<int>(f.stack.size()) < in.arg + 2) unsupported("stack underflow at a graph break");
  } else if (name_is(in, "STORE_ATTR")) {  // `x.requires_grad = True` on a tensor, an attribute of an object kiln cannot model
    brk->kind = BreakState::kStoreAttr;
    brk->attr_name = PyRef::borrow(PyTuple_GET_ITEM(f.code->co_names, in.arg));
    if (f.stack.size() < 2) unsupported("stack underflow at a graph break");
  } else if (name_is(in, "BINARY_SUBSCR")) {  // `x[mask]`: a result whose shape depends on data
    brk->kind = BreakState::kSubscript;
    if (f.stack.size() < 2) unsupported("stack underflow at a graph break");
  } else if (is_branch(in)) {
    brk->kind = std::strstr(in.name, "IF_TRUE") ? BreakState::kJumpIfTrue : BreakState::kJumpIfFalse;
    if (f.stack.empty()) unsupported("stack underflow at a graph break");
  } else {
    unsupported(std::string("a graph break at ") + in.name + " is not supported");
  }
  brk->inference_at_break = inference_;
  brk->inference_at_start = initial_inference_;
  brk->inference_prev_grad = inference_prev_grad_;
  brk->grad_at_break = probe_grad_enabled();
  brk->grad_at_start = initial_grad_;
  for (const AutocastBlock& b : autocast_blocks_) brk->autocast_at_break.push_back(b.args);
  std::vector<VarPtr> items;
  for (const VarPtr& v : f.stack) {
    brk->stack_null.push_back(v->kind == VarKind::kNull);
    if (v->kind != VarKind::kNull) items.push_back(v);
  }
  brk->n_locals = f.code->co_nlocals;
  for (int i = 0; i < brk->n_locals; ++i) {
    const VarPtr& v = f.locals.at(i);
    if (v && v->kind == VarKind::kCell) unsupported("a graph break with a cell in the frame");
    if (!v) brk->unbound.push_back(i);
    items.push_back(v ? v : make_const(Py_None));
  }
  cap_.brk = std::move(brk);
  return make_seq(VarKind::kTuple, std::move(items));
}

PyObject* continue_after_break(const BreakState& brk, PyCodeObject* code, PyObject* globals, PyObject* func, PyObject* state) {
  // The frame's stack with its NULLs, then its locals, from the state tuple.
  std::vector<PyObject*> stack;
  Py_ssize_t k = 0;
  for (bool null : brk.stack_null) stack.push_back(null ? nullptr : PyTuple_GET_ITEM(state, k++));
  PyObject* const* locals = &PyTuple_GET_ITEM(state, k);
  const DecodedCode& dc = decoded_code(code);
  int target;
  PyRef pushed;  // the call's result
  // Each break continues in a nested call of its resume function: a branch on a tensor in a loop
  // nests one level per iteration. Past a depth, the rest of the frame runs as plain Python
  // (its loop then iterates without nesting).
  static thread_local int depth = 0;
  struct Depth {
    Depth() { ++depth; }
    ~Depth() { --depth; }
  } nested;
  HookOnScope on;
  if (depth > 48) kiln_hook_set_mode(0);
  // A torch.inference_mode block the graph entered and the break is inside: entered for real here
  // (with the grad mode it began with), left by the exit kiln put on the stack, or here if the
  // instruction raises.
  struct InferenceAtBreak {
    bool pushed = false, failed = true;
    ~InferenceAtBreak() { if (pushed && failed) probe_pop_inference_mode(); }
  } inference;
  if (brk.inference_at_break && !brk.inference_at_start) {
    probe_set_grad_enabled(brk.inference_prev_grad);
    probe_push_inference_mode(true);
    inference.pushed = true;
  }
  // The graph left grad mode as the frame found it; the instruction and the rest of the frame run
  // in the mode of the with-blocks around the break. If it raises, those blocks are left.
  struct GradAtBreak {
    bool restore_on_error, failed = true;
    explicit GradAtBreak(const BreakState& b) : restore_on_error(b.grad_at_start) { probe_set_grad_enabled(b.grad_at_break); }
    ~GradAtBreak() { if (failed) probe_set_grad_enabled(restore_on_error); }
  } grad(brk);
  // The torch.autocast blocks around the break, which the graph left: entered again for the
  // instruction and the rest of the frame, whose with-statements leave them (or here if it raises).
  struct AutocastAtBreak {
    size_t entered = 0;
    bool failed = true;
    ~AutocastAtBreak() { if (failed) leave_autocast_at_break(entered); }
  } autocast;
  if (!brk.autocast_at_break.empty()) {
    autocast.entered = enter_autocast_at_break(brk.autocast_at_break);
    if (autocast.entered < brk.autocast_at_break.size()) return nullptr;
  }
  if (brk.kind == BreakState::kCall) {
    // CALL's stack (3.11 and 3.12): [..., NULL | method, callable | self, args...].
    const int n = brk.call_args;
    const size_t base = stack.size() - static_cast<size_t>(n) - 2;
    PyObject* method = stack[base];
    std::vector<PyObject*> argv;
    PyObject* callable = method ? method : stack[base + 1];
    if (method) argv.push_back(stack[base + 1]);
    for (int i = 0; i < n; ++i) argv.push_back(stack[base + 2 + static_cast<size_t>(i)]);
    PyObject* kwnames = brk.kw_names ? brk.kw_names.get() : nullptr;
    const size_t npos = argv.size() - (kwnames ? static_cast<size_t>(PyTuple_GET_SIZE(kwnames)) : 0);
    pushed = PyRef::steal(PyObject_Vectorcall(callable, argv.data(), npos, kwnames));
    if (!pushed) return nullptr;
    stack.resize(base);
    target = brk.index + 1;
  } else if (brk.kind == BreakState::kSubscript) {
    // BINARY_SUBSCR's stack: [..., container, key].
    pushed = PyRef::steal(PyObject_GetItem(stack[stack.size() - 2], stack[stack.size() - 1]));
    if (!pushed) return nullptr;
    stack.resize(stack.size() - 2);
    target = brk.index + 1;
  } else if (brk.kind == BreakState::kStoreAttr) {
    // STORE_ATTR's stack: [..., value, owner].
    if (PyObject_SetAttr(stack[stack.size() - 1], brk.attr_name.get(), stack[stack.size() - 2]) < 0) return nullptr;
    stack.resize(stack.size() - 2);
    target = brk.index + 1;
  } else {
    const int truth = PyObject_IsTrue(stack.back());
    if (truth < 0) return nullptr;
    stack.pop_back();
    const bool jump = (truth == 1) == (brk.kind == BreakState::kJumpIfTrue);
    target = jump ? dc.bc->at(brk.index).target : brk.index + 1;
  }
  std::vector<bool> null_after;
  std::vector<PyObject*> args(locals, locals + brk.n_locals);
  for (PyObject* s : stack) {
    null_after.push_back(s == nullptr);
    if (s) args.push_back(s);
  }
  if (pushed) { null_after.push_back(false); args.push_back(pushed.get()); }
  // A break in a resume function continues in a resume function of the original code: its
  // locals are the original's (the carriers after them were consumed by the prologue).
  std::vector<int> unbound = brk.unbound;
  if (auto it = resume_origins().find(reinterpret_cast<PyObject*>(code)); it != resume_origins().end() && target >= it->second.prologue) {
    PyCodeObject* original = it->second.original;
    target -= it->second.prologue;
    args.erase(args.begin() + original->co_nlocals, args.begin() + brk.n_locals);
    unbound.erase(std::remove_if(unbound.begin(), unbound.end(), [&](int slot) { return slot >= original->co_nlocals; }), unbound.end());
    code = original;
  }
  PyObject* closure = code->co_nfreevars && func && PyFunction_Check(func) ? PyFunction_GET_CLOSURE(func) : nullptr;
  if (code->co_nfreevars && !closure) {
    PyErr_SetString(PyExc_RuntimeError, "kiln: a resume function needs the frame's closure");
    return nullptr;
  }
  PyObject* fn = resume_function(code, globals, closure, target, null_after, unbound);
  if (!fn) return nullptr;
  grad.failed = false;  // from here the resume function's own with-blocks restore the mode
  inference.failed = false;
  autocast.failed = false;
  return PyObject_Vectorcall(fn, args.data(), args.size(), nullptr);
}

}  // namespace kiln::frontend
