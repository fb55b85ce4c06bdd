// `with torch.autocast(...)` inside a capture (mixed-precision training steps, transformers'
// `maybe_autocast(enabled=False)` around attention scores). The block was a graph break at the
// with-statement, and a frame that began with one captured nothing.
//
// Entering records `torch.amp._enter_autocast(device, dtype, enabled, cache_enabled)` in the
// graph and leaving records `torch.amp._exit_autocast(<that node>)`, so whoever runs or traces
// the graph switches autocast exactly where eager does: the eager backend calls them, and kiln's
// ATen tracer runs them while tracing, so its trace holds the casts autocast made explicit. The
// capture enters the block for real too, so the dtypes it computes (autocast_dtypes.cpp) are the
// block's; it leaves every block it entered when it ends, however it ends.
//
// A graph break inside a block: the graph leaves the blocks it entered (autocast is then as the
// frame found it), the break enters them again for real before its instruction
// (enter_autocast_at_break), and the with-statement's exit on the resume function's stack is
// kiln's exit_autocast_at_break, which leaves them. A capture that reaches that exit breaks there
// (the block was entered by code outside the capture).
//
// A block that changes nothing (enabled=False where autocast is already off for its device) is
// no block at all, as transformers' maybe_autocast intends.
#include <vector>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

namespace {

PyObject* enter_fn() { return module_attr("torch.amp", "_enter_autocast"); }
PyObject* exit_fn() { return module_attr("torch.amp", "_exit_autocast"); }

// The autocast contexts continue_after_break entered, innermost last (each a _enter_autocast
// result); with-blocks nest, so each exit leaves the last one. Never destroyed: it outlives
// interpreter finalisation.
std::vector<PyObject*>& entered_at_breaks() {
  static thread_local auto* stack = new std::vector<PyObject*>();
  return *stack;
}

PyObject* exit_autocast_at_break(PyObject*, PyObject*) {
  auto& stack = entered_at_breaks();
  if (stack.empty()) {
    PyErr_SetString(PyExc_RuntimeError, "kiln: leaving a torch.autocast block kiln did not enter");
    return nullptr;
  }
  PyRef mode = PyRef::steal(stack.back());
  stack.pop_back();
  PyRef r = PyRef::steal(PyObject_CallOneArg(exit_fn(), mode.get()));
  if (!r) return nullptr;
  Py_RETURN_FALSE;
}
PyMethodDef g_exit_autocast_at_break = {"__exit__", exit_autocast_at_break, METH_VARARGS,
                                        "leaves a torch.autocast block a graph break entered (kiln)"};

}  // namespace

bool is_autocast_type(PyObject* type) {
  PyObject* base = module_attr("torch.amp.autocast_mode", "autocast");
  return base && PyType_Check(type) && PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(type), reinterpret_cast<PyTypeObject*>(base));
}

PyObject* autocast_exit_at_break_function() { return PyCFunction_New(&g_exit_autocast_at_break, nullptr); }

bool is_autocast_exit_at_break(PyObject* f) {
  return PyCFunction_Check(f) && reinterpret_cast<PyCFunctionObject*>(f)->m_ml == &g_exit_autocast_at_break;
}

size_t enter_autocast_at_break(const std::vector<PyRef>& blocks) {
  size_t n = 0;
  for (const PyRef& args : blocks) {
    PyObject* mode = PyObject_Call(enter_fn(), args.get(), nullptr);
    if (!mode) break;
    entered_at_breaks().push_back(mode);
    ++n;
  }
  return n;
}

void leave_autocast_at_break(size_t n) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // the instruction's error is the one that surfaces
  for (; n > 0 && !entered_at_breaks().empty(); --n) {
    PyRef r = PyRef::steal(exit_autocast_at_break(nullptr, nullptr));
    if (!r) PyErr_Clear();
  }
  PyErr_Restore(type, value, tb);
}

// The block's arguments as autocast.__init__ settled them (a CUDA block without CUDA is disabled).
VarPtr Interpreter::enter_autocast(const VarPtr& ctx) {
  if (!enter_fn() || !exit_fn()) unsupported("torch.autocast inside the function (this PyTorch has no torch.amp._enter_autocast)");
  if (ctx->kind != VarKind::kObject || !ctx->obj) unsupported("a with-statement over a torch.autocast kiln did not construct");
  PyObject* mode = ctx->obj.get();
  PyRef device = PyRef::steal(PyObject_GetAttrString(mode, "device"));
  PyRef dtype = PyRef::steal(PyObject_GetAttrString(mode, "fast_dtype"));
  PyRef enabled = PyRef::steal(PyObject_GetAttrString(mode, "_enabled"));
  PyRef cache = PyRef::steal(PyObject_GetAttrString(mode, "_cache_enabled"));
  if (!device || !dtype || !enabled || !cache || !PyUnicode_Check(device.get()) || !PyBool_Check(enabled.get()) || !PyBool_Check(cache.get())) {
    PyErr_Clear();
    unsupported("a torch.autocast whose settings kiln cannot read");
  }
  const std::string type = py_str(device.get());
  if (type != "cpu" && type != "cuda") unsupported("torch.autocast for device type '" + type + "' inside the function");
  PyRef on = PyRef::steal(PyObject_CallMethod(g_torch.torch, "is_autocast_enabled", "s", type.c_str()));
  if (!on) unsupported("torch.is_autocast_enabled: " + take_python_error());
  if (enabled.get() == Py_False && on.get() == Py_False) {  // changes nothing: no block
    auto exit = std::make_shared<Var>(VarKind::kGradModeExit);
    exit->name = "no-op";
    return exit;
  }
  PyRef args = PyRef::steal(PyTuple_Pack(4, device.get(), dtype.get(), enabled.get(), cache.get()));
  PyRef entered = PyRef::steal(PyObject_Call(enter_fn(), args.get(), nullptr));
  if (!entered) unsupported("entering torch.autocast: " + take_python_error());
  std::vector<graph::Arg> gargs;
  for (PyObject* a : {device.get(), dtype.get(), enabled.get(), cache.get()}) gargs.push_back(graph::Arg::of_const(handle(a), py_repr(a)));
  const int node = cap_.graph->add_call(graph::Op::kCallFunction, "torch.amp._enter_autocast", handle(enter_fn()), std::move(gargs), {}, "", where());
  cap_.removable.push_back(false);
  cap_.enters_autocast = true;
  autocast_blocks_.push_back({args, entered, node});
  auto exit = std::make_shared<Var>(VarKind::kAutocastExit);
  exit->pos = autocast_blocks_.size() - 1;
  return exit;
}

void Interpreter::exit_autocast(const VarPtr& exit) {
  if (exit->pos + 1 != autocast_blocks_.size()) unsupported("leaving a torch.autocast block that is not the innermost one open");
  AutocastBlock block = autocast_blocks_.back();
  autocast_blocks_.pop_back();
  cap_.graph->add_call(graph::Op::kCallFunction, "torch.amp._exit_autocast", handle(exit_fn()), {graph::Arg::of_node(block.node)}, {}, "", where());
  cap_.removable.push_back(false);
  PyRef r = PyRef::steal(PyObject_CallOneArg(exit_fn(), block.entered.get()));
  if (!r) unsupported("leaving torch.autocast: " + take_python_error());
}

void Interpreter::close_autocast_blocks() {
  while (!autocast_blocks_.empty()) {
    auto exit = std::make_shared<Var>(VarKind::kAutocastExit);
    exit->pos = autocast_blocks_.size() - 1;
    exit_autocast(exit);
  }
}

// When the capture fails: the blocks still open are left for real (the graph is dropped).
void Interpreter::abandon_autocast_blocks() noexcept {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  for (auto it = autocast_blocks_.rbegin(); it != autocast_blocks_.rend(); ++it) {
    PyRef r = PyRef::steal(PyObject_CallOneArg(exit_fn(), it->entered.get()));
    if (!r) PyErr_Clear();
  }
  autocast_blocks_.clear();
  PyErr_Restore(type, value, tb);
}

}  // namespace kiln::frontend
