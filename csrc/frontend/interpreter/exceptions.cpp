// try/except/finally on the symbolic path: raising Python exceptions in the interpreted code and
// running the handlers the code's exception table names (CPython 3.11+ "zero-cost" exceptions).
//
// kiln raises only where it knows Python raises the same exception with the same message: a
// missing key of a dict it tracks, an index past a list's end, a missing attribute of an object
// made during capture, a `raise` statement, a folded builtin that raised. Every fact that decided
// it is guarded as the non-raising path would be (dict keys, list lengths, attribute lookups), so
// the handler that runs is the one eager runs. Exceptions of tensor operations are never raised
// here (a meta kernel's failure need not be eager's): they stay graph breaks.
//
// The exception is a real instance made at capture time. It may be matched, bound with
// `except E as e`, printed into a message; it may not leave the graph (returned or stored), since
// every call would then share that one object.
#include <cstring>

#include "frontend/bytecode/bytecode_assembler.h"
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"

namespace kiln::frontend {

namespace {
bool is(const Instruction& in, const char* name) { return std::strcmp(in.name, name) == 0; }
}  // namespace

void Interpreter::raise_instance(PyObject* exc) {
  PyRef s = PyRef::steal(PyObject_Str(exc));
  std::string msg = s ? py_str(s.get()) : "";
  PyErr_Clear();
  std::string reason = std::string(Py_TYPE(exc)->tp_name) + (msg.empty() ? "" : ": " + msg);
  VarPtr v = make_object(exc, nullptr);
  v->fresh = true;
  throw PyRaised(make_unsupported(reason), v);
}

void Interpreter::raise_python(PyObject* type, PyObject* args) {
  PyRef a = PyRef::steal(PyTuple_Check(args) ? Py_NewRef(args) : PyTuple_Pack(1, args));
  PyRef exc = a ? PyRef::steal(PyObject_Call(type, a.get(), nullptr)) : PyRef();
  if (!exc) unsupported("making an exception raised " + take_python_error());
  raise_instance(exc.get());
}

void Interpreter::raise_python(PyObject* type, const std::string& message) {
  PyRef m = PyRef::steal(PyUnicode_FromString(message.c_str()));
  raise_python(type, m.get());
}

// A builtin kiln ran on Python values raised: the same call raises the same exception in eager.
void Interpreter::raise_pending_python_error(const std::string& context) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyRef t = PyRef::steal(type), v = PyRef::steal(value), b = PyRef::steal(tb);
  if (!v || !PyExceptionInstance_Check(v.get())) unsupported(context + " raised an unknown error");
  // Errors that say more about the machine than the program stay breaks, and so does TypeError:
  // it is what a value of the wrong kind raises, so it may come from kiln's model of the program
  // (a value eager would never pass there) rather than from the program.
  if (PyErr_GivenExceptionMatches(v.get(), PyExc_TypeError) ||
      PyErr_GivenExceptionMatches(v.get(), PyExc_MemoryError) || PyErr_GivenExceptionMatches(v.get(), PyExc_RecursionError) ||
      PyErr_GivenExceptionMatches(v.get(), PyExc_KeyboardInterrupt) || PyErr_GivenExceptionMatches(v.get(), PyExc_SystemExit))
    unsupported(context + " raised " + Py_TYPE(v.get())->tp_name);
  PyException_SetTraceback(v.get(), Py_None);
  raise_instance(v.get());
}

// The handler covering the instruction that raised, as the exception table has it: the stack is
// cut to the handler's depth, the offset pushed where it asks for it, then the exception.
bool Interpreter::enter_handler(Frame& f, const PyRaised& raised) {
  const Instruction& in = f.dc->bc->at(f.cur);
  const int unit = in.start_offset / 2;
  PyObject* table = f.code->co_exceptiontable;
  std::vector<ExceptionEntry> entries;
  try {
    entries = parse_exception_table(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(table)), static_cast<size_t>(PyBytes_GET_SIZE(table)));
  } catch (const std::exception&) {
    return false;
  }
  for (const ExceptionEntry& e : entries) {
    if (unit < e.start || unit >= e.end) continue;
    const int h = f.dc->bc->index_of_offset(e.target * 2);
    if (h < 0 || static_cast<int>(f.stack.size()) < e.depth) return false;
    f.stack.resize(static_cast<size_t>(e.depth));
    if (e.lasti) f.stack.push_back(make_const(PyRef::steal(PyLong_FromLong(unit)).get()));
    f.stack.push_back(raised.exc);
    f.pc = h;
    f.kw_names = PyRef();
    return true;
  }
  return false;
}

void Interpreter::exception_step(Frame& f, int, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { return pop_one(st); };
  if (is(in, "PUSH_EXC_INFO")) {  // the exception handled before this one goes under it
    VarPtr exc = pop();
    st.push_back(f.handled_exc ? f.handled_exc : make_const(Py_None));
    f.handled_exc = exc;
    st.push_back(exc);
    return;
  }
  if (is(in, "POP_EXCEPT")) {
    VarPtr prev = pop();
    f.handled_exc = prev->is_const() && prev->obj.get() == Py_None ? nullptr : prev;
    return;
  }
  if (is(in, "CHECK_EXC_MATCH")) {  // `except E:` (E a class or a tuple of classes)
    VarPtr types = pop();
    const VarPtr& exc = st.back();
    PyRef t = as_python(types);
    if (!t || exc->kind != VarKind::kObject) unsupported("an except clause over values kiln does not know");
    int r = PyErr_GivenExceptionMatches(exc->obj.get(), t.get());
    st.push_back(make_const(r ? Py_True : Py_False));
    return;
  }
  if (is(in, "RERAISE")) {
    VarPtr exc = pop();
    if (exc->kind != VarKind::kObject || !PyExceptionInstance_Check(exc->obj.get())) unsupported("RERAISE of something other than an exception");
    raise_instance(exc->obj.get());
  }
  if (is(in, "WITH_EXCEPT_START")) {
    // The exception leaves a `with` block: its __exit__(type, value, traceback) runs. Grad-mode
    // contexts (and the no-op ones) restore the mode and never swallow the exception.
    // Stack (3.11/3.12): exit function, lasti, previous exception, the exception.
    if (st.size() < 4) unsupported("stack underflow");
    const VarPtr exit = st[st.size() - 4];
    if (exit->kind == VarKind::kBoundMethod) {  // a Python __exit__: it decides whether to swallow it
      VarPtr exc = st.back();
      if (exc->kind != VarKind::kObject || !PyExceptionInstance_Check(exc->obj.get())) unsupported("WITH_EXCEPT_START without an exception");
      VarPtr type = make_object(reinterpret_cast<PyObject*>(Py_TYPE(exc->obj.get())), nullptr);
      st.push_back(call(exit, {type, exc, make_const(Py_None)}, {}));
      return;
    }
    if (exit->kind == VarKind::kAutocastExit) {
      exit_autocast(exit);
      st.push_back(make_const(Py_False));
      return;
    }
    if (exit->kind != VarKind::kGradModeExit) unsupported("an exception leaves a with-block over a context kiln cannot exit");
    if (exit->name == "inference") leave_inference_mode(exit->flag);
    else if (exit->name != "no-op") record_grad_mode(exit->flag);
    st.push_back(make_const(Py_False));
    return;
  }
  if (is(in, "RAISE_VARARGS")) {
    if (in.arg == 0) {
      if (!f.handled_exc) unsupported("a bare raise with no exception being handled");
      raise_instance(f.handled_exc->obj.get());
    }
    VarPtr cause = in.arg == 2 ? pop() : nullptr;
    VarPtr exc = pop();
    PyRef obj = exc->kind == VarKind::kObject || exc->is_const() ? exc->obj : PyRef();
    if (!obj) unsupported("raise of a " + std::string(kind_name(exc->kind)));
    if (PyExceptionClass_Check(obj.get())) {
      // `raise E`: made with no arguments. A class with its own Python __init__ or __new__ might
      // do anything on construction: made for real only for the builtin ones' behaviour.
      auto* t = reinterpret_cast<PyTypeObject*>(obj.get());
      if ((t->tp_flags & Py_TPFLAGS_HEAPTYPE) && (t->tp_init != reinterpret_cast<PyTypeObject*>(PyExc_BaseException)->tp_init ||
                                                  t->tp_new != reinterpret_cast<PyTypeObject*>(PyExc_BaseException)->tp_new))
        unsupported(std::string("the function raises ") + t->tp_name + " (its class defines __init__ or __new__)");
      obj = PyRef::steal(PyObject_CallNoArgs(obj.get()));
      if (!obj) unsupported("making an exception raised " + take_python_error());
    } else if (!PyExceptionInstance_Check(obj.get())) {
      unsupported("raise of something other than an exception (TypeError)");
    }
    if (cause) {
      PyRef c = cause->is_const() || cause->kind == VarKind::kObject ? cause->obj : PyRef();
      if (!c || !(c.get() == Py_None || PyExceptionInstance_Check(c.get()))) unsupported("raise ... from a value kiln does not know");
      PyException_SetCause(obj.get(), c.get() == Py_None ? nullptr : Py_NewRef(c.get()));
      if (c.get() == Py_None) reinterpret_cast<PyBaseExceptionObject*>(obj.get())->suppress_context = 1;
    }
    raise_instance(obj.get());
  }
  unsupported(std::string("bytecode ") + in.name + " is not supported");
}

}  // namespace kiln::frontend
