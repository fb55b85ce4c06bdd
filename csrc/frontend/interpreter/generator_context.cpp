// @contextlib.contextmanager: a generator function whose code before its `yield` is the
// with-block's __enter__ and whose code after it is the __exit__. contextlib's own classes would
// run the generator through next(), which kiln's inlined generators cannot do (they run to
// completion at once, which would put the exit's side effects before the block's). Here the
// generator's frame is bound at the call, run to its yield by the with-statement, kept suspended
// while the block runs, and run on to its end by the with-statement's exit. An exception leaving
// the block, a second yield, or a graph break inside the block make the capture stop (the frame
// then runs eagerly or breaks before the with-statement), never a different order of effects.
#include <cstring>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"

namespace kiln::frontend {

// contextlib.contextmanager(f) is a function `helper(*args, **kwds)` closing over f: its code is
// the same for every decorated function.
PyObject* Interpreter::contextmanager_generator(PyObject* f) {
  static PyObject* helper_code = [] {
    PyObject* cm = module_attr("contextlib", "contextmanager");
    PyObject* code = nullptr;
    if (cm) {
      PyRef probe = PyRef::steal(PyObject_CallOneArg(cm, cm));  // any callable will do
      if (probe && PyFunction_Check(probe.get())) code = Py_NewRef(PyFunction_GET_CODE(probe.get()));
    }
    PyErr_Clear();
    return code;
  }();
  if (!helper_code || !PyFunction_Check(f) || PyFunction_GET_CODE(f) != helper_code) return nullptr;
  PyObject* closure = PyFunction_GET_CLOSURE(f);
  if (!closure || PyTuple_GET_SIZE(closure) != 1) return nullptr;
  PyObject* gen = PyCell_GET(PyTuple_GET_ITEM(closure, 0));
  return gen && PyFunction_Check(gen) ? gen : nullptr;
}

VarPtr Interpreter::context_manager_of(const VarPtr& fn) {
  PyCodeObject* code = nullptr;
  if (fn->kind == VarKind::kNestedFunction) code = reinterpret_cast<PyCodeObject*>(fn->obj.get());
  else if (fn->kind == VarKind::kObject && PyFunction_Check(fn->obj.get())) code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn->obj.get()));
  if (!code || !(code->co_flags & CO_GENERATOR)) unsupported("contextlib.contextmanager of something other than a generator function");
  auto c = std::make_shared<Var>(VarKind::kGenContext);
  c->self = fn;
  return c;
}

std::pair<VarPtr, VarPtr> Interpreter::enter_generator_context(const VarPtr& ctx) {
  if (!ctx->flag) unsupported("with-statement over a @contextmanager function that was not called");
  std::vector<VarPtr> args(ctx->items.begin(), ctx->items.begin() + static_cast<long>(ctx->pos));
  std::vector<std::pair<std::string, VarPtr>> kwargs;
  for (size_t i = 0; i < ctx->keys.size(); ++i) kwargs.emplace_back(py_str(ctx->keys[i].get()), ctx->items[ctx->pos + i]);
  const VarPtr& fn = ctx->self;
  std::unique_ptr<Frame> f = fn->kind == VarKind::kNestedFunction ? bind_frame(nullptr, fn, std::move(args), std::move(kwargs), nullptr)
                                                                    : bind_frame(fn->obj.get(), nullptr, std::move(args), std::move(kwargs), fn->source);
  f->suspend_at_yield = true;
  VarPtr entered = run_inlined(*f);
  if (!f->suspended) unsupported("a @contextmanager generator that does not yield");  // contextlib raises RuntimeError
  auto exit = std::make_shared<Var>(VarKind::kGenContextExit);
  exit->pos = suspended_.size();
  suspended_.push_back(std::move(f));
  return {exit, entered};
}

VarPtr Interpreter::exit_generator_context(const VarPtr& exit) {
  if (exit->pos >= suspended_.size() || !suspended_[exit->pos] || !suspended_[exit->pos]->suspended)
    unsupported("a @contextmanager context left twice");
  Frame& f = *suspended_[exit->pos];
  f.suspended = false;
  f.stack.push_back(make_const(Py_None));  // what next() sends
  run_inlined(f);
  if (f.suspended) unsupported("a @contextmanager generator that yields twice");  // contextlib raises RuntimeError
  return make_const(Py_False);
}

// ---------------------------------------------------------------- generators fed by send()

// A generator whose code uses what a `yield` evaluates to (anything but POP_TOP after it): under
// send() that is the sent value, so its frame cannot run to completion at the call as kiln's
// other inlined generators do (each yield would evaluate to None).
bool Interpreter::uses_yield_value(PyCodeObject* code) {
  if (!(code->co_flags & CO_GENERATOR)) return false;
  const auto& all = decoded_code(code).bc->instructions();
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::strcmp(all[i].name, "YIELD_VALUE") != 0) continue;
    size_t k = i + 1;
    while (k < all.size() && (std::strcmp(all[k].name, "RESUME") == 0 || std::strcmp(all[k].name, "CACHE") == 0 || std::strcmp(all[k].name, "NOP") == 0)) ++k;
    // (`yield from` loops back to its SEND: kiln's other generators delegate all at once.)
    if (k >= all.size() || (std::strcmp(all[k].name, "POP_TOP") != 0 && std::strcmp(all[k].name, "JUMP_BACKWARD_NO_INTERRUPT") != 0)) return true;
  }
  return false;
}

VarPtr Interpreter::lazy_generator(std::unique_ptr<Frame> f) {
  f->suspend_at_yield = true;
  auto g = std::make_shared<Var>(VarKind::kGenFrame);
  g->pos = suspended_.size();
  suspended_.push_back(std::move(f));
  return g;
}

// Runs the generator to its next yield (the yielded value) or its end (*done; the value it
// returned). `sent` is what the pending yield evaluates to.
VarPtr Interpreter::resume_generator(const VarPtr& g, const VarPtr& sent, bool* done) {
  *done = false;
  if (g->pos >= suspended_.size() || !suspended_[g->pos]) unsupported("a generator kiln lost");
  Frame& f = *suspended_[g->pos];
  if (f.finished) { *done = true; return make_const(Py_None); }
  if (!f.started) {
    if (!(sent->is_const() && sent->obj.get() == Py_None)) raise_python(PyExc_TypeError, "can't send non-None value to a just-started generator");
    f.started = true;
  } else {
    if (!f.suspended) unsupported("a generator resumed while it runs (ValueError)");
    f.suspended = false;
    f.stack.push_back(sent);
  }
  VarPtr r;
  try {
    r = run_inlined(f);
  } catch (...) {
    f.finished = true;  // an exception leaving a generator ends it
    throw;
  }
  if (f.suspended) return f.yielded;
  f.finished = true;
  *done = true;
  return r;
}

VarPtr Interpreter::generator_method(const VarPtr& g, const std::string& name, std::vector<VarPtr>& args,
                                     std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  if (!kwargs.empty()) unsupported("generator." + name + " with keyword arguments");
  bool done = false;
  if ((name == "send" && args.size() == 1) || (name == "__next__" && args.empty())) {
    VarPtr r = resume_generator(g, name == "send" ? args[0] : make_const(Py_None), &done);
    if (done) raise_python(PyExc_StopIteration, PyRef::steal(PyTuple_New(0)).get());
    return r;
  }
  if (name == "close" && args.empty()) {
    Frame& f = *suspended_.at(g->pos);
    // Closing a generator paused at a yield throws GeneratorExit into it (its finally blocks run).
    if (f.started && !f.finished) unsupported("close() of a running generator (GeneratorExit runs its cleanup)");
    f.finished = true;
    return make_const(Py_None);
  }
  unsupported("generator." + name + " is not supported");
}

}  // namespace kiln::frontend
