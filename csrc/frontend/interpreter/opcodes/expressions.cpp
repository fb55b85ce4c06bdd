// The instructions of Python's operators: binary and unary operators, comparisons, `is`, `in`,
// and subscripts (reading, assigning and deleting items and slices); step_expressions, handed on
// from step (values.cpp). What the operators compute on symbolic values is operators.cpp's.
#include <algorithm>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/interpreter/opcodes/opcodes.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

void Interpreter::step_expressions(Frame& f, int op, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { return pop_one(st); };
  auto push = [&](VarPtr v) { st.push_back(std::move(v)); };
  switch (op) {
    case OP_BINARY_OP: { VarPtr b = pop(), a = pop(); push(binary(f.dc->bc->binary_op_name(in.arg), a, b)); return; }
    case OP_BINARY_SUBSCR: { VarPtr idx = pop(), obj = pop(); push(subscript(obj, idx)); return; }
    case OP_BINARY_SLICE: {
      VarPtr end = pop(), start = pop(), obj = pop();
      if (!start->is_const() || !end->is_const()) unsupported("slice with non-constant bounds");
      PyRef s = PyRef::steal(PySlice_New(start->obj.get(), end->obj.get(), nullptr));
      push(subscript(obj, make_const(s.get())));
      return;
    }
    case OP_STORE_SUBSCR: case OP_STORE_SLICE: {
      VarPtr idx, obj, val;
      if (op == OP_STORE_SLICE) {
        VarPtr end = pop(), start = pop();
        obj = pop();
        val = pop();
        if (!start->is_const() || !end->is_const()) unsupported("slice with non-constant bounds");
        idx = make_const(PyRef::steal(PySlice_New(start->obj.get(), end->obj.get(), nullptr)).get());
      } else {
        idx = pop();
        obj = pop();
        val = pop();
      }
      if (obj->is_tensor()) {
        PyObject* setitem = PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), "setitem");
        record_op(graph::Op::kCallFunction, setitem, "", {obj, idx, val}, {});
        return;
      }
      if (obj->kind == VarKind::kNewObject) {
        PyObject* si = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), PyRef::steal(PyUnicode_FromString("__setitem__")).get());
        if (si && PyFunction_Check(si)) { inline_function(si, nullptr, {obj, idx, val}, {}, nullptr); return; }
        if (!obj->self) unsupported("item assignment on a new object without __setitem__");
        obj = obj->self;
      }
      if (obj->kind == VarKind::kObject && is_trace_value(obj->obj.get())) {  // counts[k] += 1
        if (!all_python_values({idx, val}, {})) unsupported("a trace-time container holding a value that is not a Python constant");
        PyRef k = as_python(idx), value = as_python(val);
        if (PyObject_SetItem(obj->obj.get(), k.get(), value.get()) < 0) unsupported("item assignment raised " + take_python_error());
        return;
      }
      if (attrs_owner(obj)) {  // vars(o)[k] = v on an object made here
        call_container(obj, "__setitem__", {idx, val});
        return;
      }
      note_container_mutation(obj, "item assignment");
      if (obj->kind == VarKind::kList && idx->is_const() && PyLong_Check(idx->obj.get())) {
        long i = PyLong_AsLong(idx->obj.get());
        if (i < 0) i += static_cast<long>(obj->items.size());
        if (i < 0 || i >= static_cast<long>(obj->items.size())) unsupported("list index out of range");
        obj->items[i] = val;
        return;
      }
      if (is_deque(obj) && !(idx->is_const() && PyLong_Check(idx->obj.get()))) unsupported("deque item assignment with a non-int index");
      if (obj->kind == VarKind::kList && idx->is_const() && PySlice_Check(idx->obj.get())) {  // ys[a:b] = [...]
        Py_ssize_t start, stop, step, n;
        if (PySlice_GetIndicesEx(idx->obj.get(), static_cast<Py_ssize_t>(obj->items.size()), &start, &stop, &step, &n) < 0)
          unsupported("slice assignment: " + take_python_error());
        std::vector<VarPtr> repl = unpack(val);
        if (step == 1) {
          stop = std::max(stop, start);
          obj->items.erase(obj->items.begin() + start, obj->items.begin() + stop);
          obj->items.insert(obj->items.begin() + start, repl.begin(), repl.end());
          return;
        }
        if (static_cast<Py_ssize_t>(repl.size()) != n) unsupported("extended slice assignment of a different length (ValueError)");
        for (Py_ssize_t k = 0; k < n; ++k) obj->items[start + k * step] = repl[k];
        return;
      }
      if (obj->kind == VarKind::kDict) {
        call_container(obj, "__setitem__", {idx, val});
        return;
      }
      unsupported(std::string("item assignment on a ") + kind_name(obj->kind));
    }
    case OP_DELETE_SUBSCR: {  // del obj[idx] on containers made during the call
      VarPtr idx = pop(), obj = pop();
      if (obj->kind == VarKind::kNewObject) {
        PyObject* di = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(obj->obj.get()), PyRef::steal(PyUnicode_FromString("__delitem__")).get());
        if (di && PyFunction_Check(di)) { inline_function(di, nullptr, {obj, idx}, {}, nullptr); return; }
        if (!obj->self) unsupported("del on a new object without __delitem__");
        obj = obj->self;
      }
      if (obj->kind == VarKind::kObject && is_trace_value(obj->obj.get())) {
        if (!all_python_values({idx}, {})) unsupported("del with a key that is not a Python constant");
        if (PyObject_DelItem(obj->obj.get(), as_python(idx).get()) < 0) unsupported("del raised " + take_python_error());
        return;
      }
      note_container_mutation(obj, "del");
      if (!idx->is_const()) unsupported("del with a non-constant index");
      if (obj->kind == VarKind::kList && PyLong_Check(idx->obj.get())) {
        long i = PyLong_AsLong(idx->obj.get());
        if (i < 0) i += static_cast<long>(obj->items.size());
        if (i < 0 || i >= static_cast<long>(obj->items.size())) unsupported("list index out of range");
        obj->items.erase(obj->items.begin() + i);
        return;
      }
      if (is_deque(obj) && !PyLong_Check(idx->obj.get())) unsupported("del on a deque with a non-int index");
      if (obj->kind == VarKind::kList && PySlice_Check(idx->obj.get())) {  // del rows[::2]
        Py_ssize_t start, stop, step, n;
        if (PySlice_GetIndicesEx(idx->obj.get(), static_cast<Py_ssize_t>(obj->items.size()), &start, &stop, &step, &n) < 0)
          unsupported("del of a slice: " + take_python_error());
        std::vector<bool> drop(obj->items.size(), false);
        for (Py_ssize_t k = 0; k < n; ++k) drop[start + k * step] = true;
        std::vector<VarPtr> kept;
        for (size_t i = 0; i < obj->items.size(); ++i)
          if (!drop[i]) kept.push_back(obj->items[i]);
        obj->items = std::move(kept);
        return;
      }
      if (obj->kind == VarKind::kDict) {
        for (size_t i = 0; i < obj->keys.size(); ++i) {
          int r = PyObject_RichCompareBool(obj->keys[i].get(), idx->obj.get(), Py_EQ);
          if (r < 0) PyErr_Clear();
          if (r == 1) {
            obj->keys.erase(obj->keys.begin() + static_cast<long>(i));
            obj->items.erase(obj->items.begin() + static_cast<long>(i));
            return;
          }
        }
        unsupported("del of a missing dict key (KeyError)");
      }
      unsupported(std::string("del on a ") + kind_name(obj->kind));
    }
    case OP_UNARY_NEGATIVE: case OP_UNARY_INVERT: case OP_UNARY_POSITIVE: {
      const char* nm = op == OP_UNARY_NEGATIVE ? "neg" : op == OP_UNARY_INVERT ? "invert" : "pos";
      PyObject* fn = PyDict_GetItemString(PyModule_GetDict(g_torch.operator_mod), nm);
      VarPtr v = pop();
      push(v->kind == VarKind::kNdarray ? ndarray_unary(nm, v) : unary(fn, v));
      return;
    }
    case OP_UNARY_NOT: push(make_const(truthy(pop()) ? Py_False : Py_True)); return;
    case OP_COMPARE_OP: { VarPtr b = pop(), a = pop(); push(compare(PY_MINOR_VERSION >= 12 ? in.arg >> 4 : in.arg, a, b)); return; }
    case OP_IS_OP: {
      VarPtr b = pop(), a = pop();
      bool known = false;
      bool same = same_object(a, b, &known);
      if (!known) unsupported("identity comparison of values kiln cannot track");
      push(make_const((same != (in.arg == 1)) ? Py_True : Py_False));
      return;
    }
    case OP_CONTAINS_OP: {
      VarPtr b = pop(), a = pop();
      VarPtr r = contains(a, b);
      if (in.arg == 1) r = make_const(truthy(r) ? Py_False : Py_True);
      push(r);
      return;
    }
    default: step_control_flow(f, op, in); return;
  }
}

}  // namespace kiln::frontend
