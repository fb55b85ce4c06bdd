// The instructions that move control: branches (`assert` on a tensor kept in the graph), for-loops,
// calls and making functions, with-statements, generators (`yield`, `yield from`), imports, and
// exceptions (exceptions.cpp); step_control_flow, the last of the step functions, handed on from
// step_expressions (expressions.cpp): an instruction none of them runs is Unsupported.
#include <cstring>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/interpreter/opcodes/opcodes.h"
#include "frontend/objects/tensor_probe.h"

namespace kiln::frontend {

// Whether the instructions from `k` up to `end` raise whatever happens: straight-line code (no
// jump, return or yield) reaching `raise X(...)`.
static bool raises_unconditionally(const std::vector<Instruction>& all, size_t k, int end) {
  for (; k < all.size() && static_cast<int>(k) < end; ++k) {
    const Instruction& i = all[k];
    if (std::strcmp(i.name, "RAISE_VARARGS") == 0) return i.arg >= 1;
    if (i.target >= 0 || std::strncmp(i.name, "RETURN", 6) == 0 || std::strncmp(i.name, "YIELD", 5) == 0 ||
        std::strcmp(i.name, "RERAISE") == 0 || std::strcmp(i.name, "SEND") == 0)
      return false;
  }
  return false;
}

// `assert t, msg` with a tensor t (POP_JUMP_IF_TRUE over LOAD_ASSERTION_ERROR; `assert not t`
// jumps if false), and `if not t: raise ValueError(...)` (a branch over code that only raises:
// torch.distributions' argument validation): like Dynamo's asserts, kept in the graph rather than
// broken on. The condition becomes a graph output whose truth the call checks
// (Capture::assertions); where it fails, the frame reruns eagerly and raises eager's exception
// with its message. Only one-element tensors of a static size: bool() of any other raises in
// eager, which the break keeps.
bool Interpreter::tensor_assertion(Frame& f, const Instruction& in, const VarPtr& cond, bool truth) {
  const auto& all = f.dc->bc->instructions();
  size_t k = static_cast<size_t>(f.cur) + 1;
  while (k < all.size() && (std::strcmp(all[k].name, "CACHE") == 0 || std::strcmp(all[k].name, "NOP") == 0)) ++k;
  if (k >= all.size() || in.target <= f.cur) return false;
  if (std::strcmp(all[k].name, "LOAD_ASSERTION_ERROR") != 0 && !raises_unconditionally(all, k, in.target)) return false;
  PyRef numel = PyRef::steal(PyObject_CallMethod(cond->fake.get(), "numel", nullptr));
  if (!numel) { PyErr_Clear(); return false; }
  if (!PyLong_CheckExact(numel.get()) || PyLong_AsLong(numel.get()) != 1) return false;
  if (assertions_.empty()) {
    first_assert_index_ = frames_.front()->cur;
    first_assert_visit_ = root_visits_.at(first_assert_index_);
    first_assert_where_ = where();
  }
  assertions_.push_back({cond, truth});
  return true;
}

void Interpreter::step_control_flow(Frame& f, int op, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { return pop_one(st); };
  auto push = [&](VarPtr v) { st.push_back(std::move(v)); };
  auto popn = [&](int n) { return pop_n(st, n); };
  auto jump = [&](int target) { f.pc = target; };
  switch (op) {
    case OP_POP_JUMP_IF_TRUE: case OP_POP_JUMP_FORWARD_IF_TRUE: case OP_POP_JUMP_BACKWARD_IF_TRUE: {
      VarPtr v = pop();
      if (v->is_tensor() && tensor_assertion(f, in, v, true)) { jump(in.target); return; }
      if (truthy(v)) jump(in.target);
      return;
    }
    case OP_POP_JUMP_IF_FALSE: case OP_POP_JUMP_FORWARD_IF_FALSE: case OP_POP_JUMP_BACKWARD_IF_FALSE: {
      VarPtr v = pop();
      if (v->is_tensor() && tensor_assertion(f, in, v, false)) { jump(in.target); return; }
      if (!truthy(v)) jump(in.target);
      return;
    }
    case OP_POP_JUMP_IF_NONE: case OP_POP_JUMP_FORWARD_IF_NONE: case OP_POP_JUMP_BACKWARD_IF_NONE:
    case OP_POP_JUMP_IF_NOT_NONE: case OP_POP_JUMP_FORWARD_IF_NOT_NONE: case OP_POP_JUMP_BACKWARD_IF_NOT_NONE: {
      VarPtr v = pop();
      bool known = false;
      bool is_none = same_object(v, make_const(Py_None), &known);
      if (!known) unsupported("None check of a value kiln cannot track");
      bool want_none = op == OP_POP_JUMP_IF_NONE || op == OP_POP_JUMP_FORWARD_IF_NONE || op == OP_POP_JUMP_BACKWARD_IF_NONE;
      if (is_none == want_none) jump(in.target);
      return;
    }
    case OP_JUMP_IF_TRUE_OR_POP: case OP_JUMP_IF_FALSE_OR_POP: {
      bool t = truthy(st.back());
      if (t == (op == OP_JUMP_IF_TRUE_OR_POP)) jump(in.target);
      else pop();
      return;
    }
    case OP_JUMP_FORWARD: case OP_JUMP_BACKWARD: case OP_JUMP_BACKWARD_NO_INTERRUPT: jump(in.target); return;
    case OP_GET_ITER: push(make_iterator(pop())); return;
    case OP_FOR_ITER: {
      VarPtr it = st.back();
      if (it->kind != VarKind::kIterator) unsupported("FOR_ITER over a non-iterator");
      if (it->pos < it->items.size()) {
        push(it->items[it->pos++]);
        return;
      }
      pop();
      int target = in.target;
      if (std::strcmp(f.dc->bc->at(target).name, "END_FOR") == 0) ++target;
      jump(target);
      return;
    }
    case OP_END_FOR: pop(); pop(); return;
    case OP_KW_NAMES: f.kw_names = PyRef::borrow(PyTuple_GET_ITEM(f.code->co_consts, in.arg)); return;
    case OP_CALL: {
      auto args = popn(in.arg);
      VarPtr callable = pop();
      VarPtr method = pop();
      if (method->kind != VarKind::kNull) {
        args.insert(args.begin(), callable);
        callable = method;
      }
      std::vector<std::pair<std::string, VarPtr>> kwargs;
      if (f.kw_names) {
        Py_ssize_t nk = PyTuple_GET_SIZE(f.kw_names.get());
        for (Py_ssize_t i = 0; i < nk; ++i)
          kwargs.emplace_back(py_str(PyTuple_GET_ITEM(f.kw_names.get(), i)), args[args.size() - nk + i]);
        args.resize(args.size() - nk);
        f.kw_names = PyRef();
      }
      push(call(callable, std::move(args), std::move(kwargs)));
      return;
    }
    case OP_CALL_FUNCTION_EX: {
      VarPtr kw = (in.arg & 1) ? pop() : nullptr;
      VarPtr args = pop();
      VarPtr fn = pop();
      VarPtr null_slot = pop();
      if (null_slot->kind != VarKind::kNull) unsupported("unexpected stack layout for CALL_FUNCTION_EX");
      std::vector<std::pair<std::string, VarPtr>> kwargs;
      if (kw) {
        if (kw->kind != VarKind::kDict) unsupported("**kwargs of a non-dict");
        for (size_t i = 0; i < kw->keys.size(); ++i) kwargs.emplace_back(py_str(kw->keys[i].get()), kw->items[i]);
      }
      push(call(fn, unpack(args), std::move(kwargs)));
      return;
    }
    case OP_LOAD_BUILD_CLASS:  // a class statement: the call is build_class (new_objects.cpp)
      push(make_object(builtin("__build_class__"), nullptr));
      return;
    case OP_MAKE_FUNCTION: {
      VarPtr code = pop();
      auto fn = std::make_shared<Var>(VarKind::kNestedFunction);
      fn->obj = code->obj;
      fn->globals = PyRef::borrow(f.globals);
      if (in.arg & 0x08) fn->items = pop()->items;
      if (in.arg & 0x04) pop();
      if (in.arg & 0x02) {
        VarPtr kwd = pop();
        PyRef d = as_python(kwd);
        if (!d) unsupported("non-constant keyword defaults of a nested function");
        fn->kwdefaults = d;
      }
      if (in.arg & 0x01) {
        VarPtr dv = pop();
        fn->self = dv;  // defaults as Vars
      }
      fn->name = py_str(reinterpret_cast<PyCodeObject*>(code->obj.get())->co_qualname);
      push(fn);
      return;
    }
    case OP_BEFORE_WITH: {
      VarPtr ctx = pop();
      if (ctx->kind == VarKind::kGenContext) {
        auto [exit, entered] = enter_generator_context(ctx);
        push(exit);
        push(entered);
        return;
      }
      if (ctx->kind == VarKind::kObject && is_autocast_type(python_type_of(ctx))) {
        push(enter_autocast(ctx));
        push(ctx);  // autocast.__enter__ gives the context itself
        return;
      }
      if (ctx->kind == VarKind::kNewObject || ctx->kind == VarKind::kObject) {
        // A context manager class of the program's own (Python __enter__ and __exit__): both are
        // inlined, the exit by the with-statement's own call (or WITH_EXCEPT_START).
        PyObject* type = python_type_of(ctx);
        // PyTorch's own context managers (inference_mode, autocast, profiler ranges) change
        // global state through C calls that must happen at run time, not while capturing.
        const std::string mod = module_of(type);
        if (mod.rfind("torch", 0) == 0 || mod.rfind("contextlib", 0) == 0)
          unsupported(std::string("with-statement over ") + mod + "." + reinterpret_cast<PyTypeObject*>(type)->tp_name);
        for (const char* m : {"__enter__", "__exit__"}) {
          PyObject* fn = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(type), PyRef::steal(PyUnicode_FromString(m)).get());
          if (!fn || !PyFunction_Check(fn))
            unsupported(std::string("with-statement over a ") + reinterpret_cast<PyTypeObject*>(type)->tp_name + " (its " + m + " is not a Python function)");
        }
        VarPtr exit = get_attr(ctx, PyRef::steal(PyUnicode_FromString("__exit__")).get());
        VarPtr entered = call(get_attr(ctx, PyRef::steal(PyUnicode_FromString("__enter__")).get()), {}, {});
        push(exit);
        push(entered);
        return;
      }
      if (ctx->kind != VarKind::kGradMode) unsupported(std::string("with-statement over a ") + kind_name(ctx->kind) + " (only grad-mode contexts are supported)");
      if (ctx->name == "inference") {
        push(enter_inference_mode(ctx));
        push(make_const(Py_None));
        return;
      }
      auto exit = std::make_shared<Var>(VarKind::kGradModeExit);
      exit->flag = probe_grad_enabled();
      exit->name = ctx->name;
      if (ctx->name == "no-op") {
        push(exit);
        push(ctx->self);
        return;
      }
      record_grad_mode(ctx->flag);
      push(exit);
      push(make_const(Py_None));
      return;
    }
    case OP_RETURN_GENERATOR: push(make_const(Py_None)); return;
    case OP_YIELD_VALUE: {
      if (f.suspend_at_yield) {  // resumed by exit_generator_context, which pushes the sent None
        f.yielded = pop();
        f.suspended = true;
        return;
      }
      // An inlined generator runs to completion, so every `yield` evaluates to None, as under
      // next() and for-loops. Code that uses the value (`v = yield x`, fed by send()) would
      // compute with a None it never sees in eager: refused.
      const auto& all = f.dc->bc->instructions();
      size_t k = static_cast<size_t>(f.cur) + 1;
      while (k < all.size() && (std::strcmp(all[k].name, "RESUME") == 0 || std::strcmp(all[k].name, "CACHE") == 0 || std::strcmp(all[k].name, "NOP") == 0)) ++k;
      if (k >= all.size() || std::strcmp(all[k].name, "POP_TOP") != 0) unsupported("the value of a yield expression is used (generator.send)");
      f.yields.push_back(pop());
      push(make_const(Py_None));
      return;
    }
    // `yield from it` in an inlined generator (which runs to completion, collecting its yields):
    // every remaining item of `it` is yielded at once. What the delegation evaluates to (a
    // sub-generator's return value) is not tracked, so it must be discarded.
    case OP_GET_YIELD_FROM_ITER:
      if (!(f.code->co_flags & CO_GENERATOR)) unsupported("GET_YIELD_FROM_ITER outside a generator");
      push(make_iterator(pop()));
      return;
    case OP_SEND: {
      VarPtr v = pop();
      VarPtr it = st.back();
      if (it->kind != VarKind::kIterator || !v->is_const() || v->obj.get() != Py_None) unsupported("send() into a delegated iterator");
      const auto& all = f.dc->bc->instructions();
      const int t = in.target;
      const bool discarded = PY_MINOR_VERSION >= 12
                                 ? t >= 0 && t + 1 < static_cast<int>(all.size()) && std::strcmp(all[t].name, "END_SEND") == 0 && std::strcmp(all[t + 1].name, "POP_TOP") == 0
                                 : t >= 0 && t < static_cast<int>(all.size()) && std::strcmp(all[t].name, "POP_TOP") == 0;
      if (!discarded) unsupported("the value of a `yield from` is used");
      for (; it->pos < it->items.size(); ++it->pos) f.yields.push_back(it->items[it->pos]);
      if (PY_MINOR_VERSION < 12) pop();  // 3.11 pops the iterator with the value; 3.12 leaves it for END_SEND
      push(make_const(Py_None));
      jump(t);
      return;
    }
    case OP_END_SEND: {
      VarPtr v = pop();
      pop();
      push(v);
      return;
    }
    case OP_IMPORT_NAME: {
      VarPtr fromlist = pop(), level = pop();
      PyRef fl = as_python(fromlist);
      PyRef mod = PyRef::steal(PyImport_ImportModuleLevelObject(name_at(f.code, in.arg), f.globals, nullptr, fl.get(),
                                                                 static_cast<int>(PyLong_AsLong(level->obj.get()))));
      if (!mod) unsupported("import failed: " + take_python_error());
      push(make_object(mod.get(), nullptr));
      return;
    }
    case OP_IMPORT_FROM: {
      VarPtr mod = st.back();
      PyRef a = PyRef::steal(PyObject_GetAttr(mod->obj.get(), name_at(f.code, in.arg)));
      if (!a) unsupported("import failed: " + take_python_error());
      push(wrap_unguarded(a.get(), "import"));
      return;
    }
    case OP_LOAD_ASSERTION_ERROR: push(make_object(PyExc_AssertionError, nullptr)); return;
    case OP_RAISE_VARARGS: case OP_PUSH_EXC_INFO: case OP_POP_EXCEPT: case OP_CHECK_EXC_MATCH: case OP_RERAISE:
    case OP_WITH_EXCEPT_START:
      exception_step(f, op, in);
      return;
    default: unsupported(std::string("bytecode ") + in.name + " is not supported");
  }
}

}  // namespace kiln::frontend
