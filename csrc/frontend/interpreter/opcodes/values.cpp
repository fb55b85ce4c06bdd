// The instructions that move values: the stack, local variables, closure cells, globals and
// attributes, and building and unpacking containers (tuples, lists, sets, dicts, slices, strings).
// Interpreter::step runs them and hands every other instruction on to step_expressions
// (expressions.cpp), which hands its others on to step_control_flow (control_flow.cpp).
#include <utility>
#include <vector>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/interpreter/opcodes/opcodes.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// The module whose __dict__ is `globals` (sys.modules[globals['__name__']]), or null.
PyObject* Interpreter::module_of_globals(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* mod = name ? PyDict_GetItemWithError(modules, name) : nullptr;
  PyErr_Clear();
  return mod && PyModule_Check(mod) && PyModule_GetDict(mod) == globals ? mod : nullptr;
}

// The top item of a frame's stack, popped (the step functions' pop).
VarPtr Interpreter::pop_one(std::vector<VarPtr>& st) {
  if (st.empty()) unsupported("stack underflow");
  VarPtr v = std::move(st.back());
  st.pop_back();
  return v;
}

// The top n items of a frame's stack, bottom first, popped (the step functions' popn).
std::vector<VarPtr> Interpreter::pop_n(std::vector<VarPtr>& st, int n) {
  if (static_cast<int>(st.size()) < n) unsupported("stack underflow");
  std::vector<VarPtr> out(st.end() - n, st.end());
  st.resize(st.size() - n);
  return out;
}

void Interpreter::step(Frame& f, int op, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { return pop_one(st); };
  auto push = [&](VarPtr v) { st.push_back(std::move(v)); };
  auto popn = [&](int n) { return pop_n(st, n); };
  switch (op) {
    case OP_NOP: case OP_RESUME: case OP_CACHE: case OP_PRECALL: return;
    case OP_PUSH_NULL: push(make_null()); return;
    case OP_POP_TOP: pop(); return;
    case OP_COPY: push(st.at(st.size() - in.arg)); return;
    case OP_SWAP: std::swap(st.at(st.size() - 1), st.at(st.size() - in.arg)); return;
    case OP_LOAD_CONST: {
      PyObject* c = PyTuple_GET_ITEM(f.code->co_consts, in.arg);
      push(is_constant_like(c) ? make_const(c) : make_object(c, nullptr));
      return;
    }
    case OP_LOAD_FAST: case OP_LOAD_FAST_CHECK: {
      VarPtr v = f.locals.at(in.arg);
      if (!v || v->kind == VarKind::kNull) unsupported("read of an unbound local " + py_str(PyTuple_GET_ITEM(f.code->co_localsplusnames, in.arg)));
      if (v->kind == VarKind::kCell) unsupported("cell read through LOAD_FAST");
      push(v);
      return;
    }
    case OP_LOAD_FAST_AND_CLEAR: {
      VarPtr v = f.locals.at(in.arg);
      push(v ? v : make_null());
      f.locals[in.arg] = nullptr;
      return;
    }
    case OP_STORE_FAST: {
      VarPtr v = pop();
      f.locals.at(in.arg) = v->kind == VarKind::kNull ? nullptr : v;
      return;
    }
    case OP_DELETE_FAST: f.locals.at(in.arg) = nullptr; return;
    case OP_MAKE_CELL: {
      auto cell = std::make_shared<Var>(VarKind::kCell);
      if (f.locals.at(in.arg)) cell->items.push_back(f.locals[in.arg]);
      f.locals[in.arg] = cell;
      return;
    }
    case OP_COPY_FREE_VARS: {
      int nfree = in.arg;
      int first = static_cast<int>(f.locals.size()) - nfree;
      if (f.closure_source_func) {  // root frame: cells come from the function object
        PyObject* cl = PyFunction_GET_CLOSURE(f.closure_source_func->obj.get());
        for (int i = 0; i < nfree; ++i) {
          auto cell = std::make_shared<Var>(VarKind::kCell);
          PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(cl, i));
          std::string nm = py_str(PyTuple_GET_ITEM(f.code->co_localsplusnames, first + i));
          if (contents) cell->items.push_back(wrap(contents, closure_cell_source(f.closure_source_func->source, i, nm)));
          cell->source = closure_cell_source(f.closure_source_func->source, i, nm);
          f.locals[first + i] = cell;
        }
      }
      return;  // inlined frames get their cells at bind time
    }
    case OP_LOAD_CLOSURE: push(f.locals.at(in.arg)); return;
    case OP_LOAD_DEREF: {
      VarPtr cell = f.locals.at(in.arg);
      if (!cell || cell->kind != VarKind::kCell || cell->items.empty()) unsupported("read of an empty closure cell");
      push(cell->items[0]);
      return;
    }
    case OP_STORE_DEREF: {
      VarPtr v = pop();
      VarPtr cell = f.locals.at(in.arg);
      if (!cell || cell->kind != VarKind::kCell) unsupported("store to a non-cell");
      if (cell->source) unsupported("assignment to a closure variable of the compiled function (nonlocal side effect)");
      cell->items.assign(1, v);
      return;
    }
    case OP_LOAD_GLOBAL: {
      PyObject* name = name_at(f.code, in.arg >> 1);
      if (in.arg & 1) push(make_null());
      if (!attr_stores_.empty()) {  // a global this capture assigned (STORE_GLOBAL): its new value
        if (PyObject* mod = module_of_globals(f.globals))
          if (VarPtr stored = stored_attr(make_object(mod, nullptr), name)) { push(stored); return; }
      }
      PyObject* v = PyDict_GetItemWithError(f.globals, name);
      bool builtin = false;
      if (!v && !PyErr_Occurred()) { v = PyDict_GetItemWithError(f.builtins, name); builtin = true; }
      if (!v) { PyErr_Clear(); unsupported("name '" + py_str(name) + "' is not defined"); }
      push(wrap(v, global_source(builtin ? f.builtins : f.globals, name, builtin)));
      return;
    }
    case OP_STORE_GLOBAL: {
      // `global g; g = v`: an attribute store on the module whose namespace the code runs in,
      // replayed once after the graph, in order with the other stores (see store_attr).
      PyObject* name = name_at(f.code, in.arg);
      VarPtr value = pop();
      PyObject* mod = module_of_globals(f.globals);
      if (!mod) unsupported("STORE_GLOBAL in code whose globals are not a module's namespace");
      if (value->kind != VarKind::kTensor && value->kind != VarKind::kConst && value->kind != VarKind::kObject &&
          value->kind != VarKind::kTuple && value->kind != VarKind::kList && value->kind != VarKind::kDict)
        unsupported("assigning a " + std::string(kind_name(value->kind)) + " to a global (" + py_str(name) + ")");
      attr_stores_.push_back({make_object(mod, nullptr), PyRef::borrow(name), value});
      return;
    }
    case OP_LOAD_ATTR: case OP_LOAD_METHOD: {
      bool method = op == OP_LOAD_METHOD || (PY_MINOR_VERSION >= 12 && (in.arg & 1));
      PyObject* name = name_at(f.code, PY_MINOR_VERSION >= 12 ? in.arg >> 1 : in.arg);
      VarPtr obj = pop();
      VarPtr a = get_attr(obj, name);
      if (method) push(make_null());
      push(a);
      return;
    }
    case OP_LOAD_SUPER_ATTR: {  // 3.12: super().name / super(C, self).name in one instruction
      VarPtr self_v = pop(), cls = pop();
      VarPtr super_fn = pop();
      if (super_fn->kind != VarKind::kObject || super_fn->obj.get() != reinterpret_cast<PyObject*>(&PySuper_Type))
        unsupported("LOAD_SUPER_ATTR with a rebound `super`");
      if (!cls->is_const() && cls->kind != VarKind::kObject) unsupported("super() with a non-constant class");
      auto sup = std::make_shared<Var>(VarKind::kSuper);
      sup->obj = cls->obj;
      sup->self = self_v;
      VarPtr a = get_attr(sup, name_at(f.code, in.arg >> 2));
      if (in.arg & 1) push(make_null());
      push(a);
      return;
    }
    case OP_STORE_ATTR: {
      VarPtr owner = pop();
      VarPtr value = pop();
      store_attr(owner, name_at(f.code, in.arg), value);
      return;
    }
    case OP_DELETE_ATTR: delete_attr(pop(), name_at(f.code, in.arg)); return;
    case OP_BUILD_TUPLE: push(make_seq(VarKind::kTuple, popn(in.arg))); return;
    case OP_BUILD_LIST: push(make_seq(VarKind::kList, popn(in.arg))); return;
    // Sets hold constants only: a new Python set object built as the code runs.
    case OP_BUILD_SET: {
      auto items = popn(in.arg);
      PyRef set = PyRef::steal(PySet_New(nullptr));
      for (auto& it : items) {
        if (!it->is_const()) unsupported("a set of non-constant values");
        if (PySet_Add(set.get(), it->obj.get()) < 0) unsupported(take_python_error());
      }
      push(trace_value(set.get()));
      return;
    }
    case OP_SET_ADD: case OP_SET_UPDATE: {
      VarPtr v = pop();
      VarPtr set = st.at(st.size() - in.arg);
      if (set->kind != VarKind::kObject || !PySet_Check(set->obj.get())) unsupported("set update of a non-set");
      std::vector<VarPtr> items = op == OP_SET_ADD ? std::vector<VarPtr>{v} : unpack(v);
      for (auto& it : items) {
        if (!it->is_const()) unsupported("a set of non-constant values");
        if (PySet_Add(set->obj.get(), it->obj.get()) < 0) unsupported(take_python_error());
      }
      return;
    }
    case OP_BUILD_MAP: {
      auto kv = popn(2 * in.arg);
      auto d = std::make_shared<Var>(VarKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        if (!kv[2 * i]->is_const()) unsupported("dict key is not a constant");
        d->keys.push_back(kv[2 * i]->obj);
        d->items.push_back(kv[2 * i + 1]);
      }
      push(d);
      return;
    }
    case OP_BUILD_CONST_KEY_MAP: {
      VarPtr keys = pop();
      auto vals = popn(in.arg);
      auto d = std::make_shared<Var>(VarKind::kDict);
      for (int i = 0; i < in.arg; ++i) {
        d->keys.push_back(PyRef::borrow(PyTuple_GET_ITEM(keys->obj.get(), i)));
        d->items.push_back(vals[i]);
      }
      push(d);
      return;
    }
    case OP_BUILD_SLICE: {
      auto parts = popn(in.arg);
      bool symbolic = false;
      for (const auto& p : parts) symbolic |= p->is_symint();
      if (symbolic) {
        push(symbolic_slice(parts));
        return;
      }
      if (!all_const(parts)) unsupported("slice with non-constant bounds");
      PyRef s = PyRef::steal(PySlice_New(parts[0]->obj.get(), parts[1]->obj.get(), in.arg == 3 ? parts[2]->obj.get() : nullptr));
      push(make_const(s.get()));
      return;
    }
    case OP_BUILD_STRING: {
      auto parts = popn(in.arg);
      PyRef empty = PyRef::steal(PyUnicode_FromString(""));
      PyRef lst = PyRef::steal(PyList_New(0));
      for (auto& p : parts) {
        if (!p->is_const() || !PyUnicode_Check(p->obj.get())) unsupported("f-string of a non-constant");
        PyList_Append(lst.get(), p->obj.get());
      }
      PyRef s = PyRef::steal(PyUnicode_Join(empty.get(), lst.get()));
      push(make_const(s.get()));
      return;
    }
    case OP_FORMAT_VALUE: {
      VarPtr spec = (in.arg & 0x04) ? pop() : nullptr;
      VarPtr v = pop();
      if (!v->is_const() || (spec && !spec->is_const())) unsupported("formatting a non-constant value");
      PyRef val = v->obj;
      int conv = in.arg & 0x03;
      if (conv == 1) val = PyRef::steal(PyObject_Str(val.get()));
      else if (conv == 2) val = PyRef::steal(PyObject_Repr(val.get()));
      else if (conv == 3) val = PyRef::steal(PyObject_ASCII(val.get()));
      if (!val) unsupported("format failed: " + take_python_error());
      PyRef s = PyRef::steal(PyObject_Format(val.get(), spec ? spec->obj.get() : nullptr));
      if (!s) unsupported("format failed: " + take_python_error());
      push(make_const(s.get()));
      return;
    }
    case OP_LIST_APPEND: { VarPtr v = pop(); st.at(st.size() - in.arg)->items.push_back(v); return; }
    case OP_LIST_EXTEND: {
      VarPtr v = pop();
      auto items = unpack(v);
      auto& l = st.at(st.size() - in.arg)->items;
      l.insert(l.end(), items.begin(), items.end());
      return;
    }
    case OP_MAP_ADD: {
      VarPtr val = pop(), key = pop();
      VarPtr d = st.at(st.size() - in.arg);
      if (!key->is_const()) unsupported("dict key is not a constant");
      call_container(d, "__setitem__", {key, val});
      return;
    }
    case OP_DICT_UPDATE: case OP_DICT_MERGE: {
      VarPtr other = pop();
      VarPtr d = st.at(st.size() - in.arg);
      if (other->kind != VarKind::kDict) unsupported("** of a non-dict");
      for (size_t i = 0; i < other->keys.size(); ++i) call_container(d, "__setitem__", {make_const(other->keys[i].get()), other->items[i]});
      return;
    }
    case OP_LIST_TO_TUPLE: push(make_seq(VarKind::kTuple, pop()->items)); return;
    case OP_CALL_INTRINSIC_1:
      if (in.arg == 6) { push(make_seq(VarKind::kTuple, pop()->items)); return; }
      if (in.arg == 5) { push(unary(PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "pos"), pop())); return; }
      unsupported("intrinsic " + std::to_string(in.arg));
    case OP_UNPACK_SEQUENCE: {
      auto items = unpack(pop());
      if (static_cast<int>(items.size()) != in.arg)
        unsupported("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(in.arg));
      for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
      return;
    }
    case OP_UNPACK_EX: {
      auto items = unpack(pop());
      int before = in.arg & 0xff, after = in.arg >> 8;
      if (static_cast<int>(items.size()) < before + after) unsupported("not enough values to unpack");
      std::vector<VarPtr> mid(items.begin() + before, items.end() - after);
      for (int i = 0; i < after; ++i) push(items[items.size() - 1 - i]);
      push(make_seq(VarKind::kList, mid));
      for (int i = before - 1; i >= 0; --i) push(items[i]);
      return;
    }
    default: step_expressions(f, op, in); return;
  }
}

}  // namespace kiln::frontend
