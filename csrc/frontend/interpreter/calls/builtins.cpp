// Python builtins (len, isinstance, getattr, zip, super, ...) and methods of list, tuple and dict
// values, interpreted on symbolic values.
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/fake_id.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- builtins

VarPtr Interpreter::call_builtin(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, bool* handled) {
  *handled = true;
  auto is = [&](const char* n) { return f == builtin(n); };
  auto need = [&](size_t n) { if (args.size() != n) unsupported("unexpected argument count for " + py_repr(f)); };
  if (is("len")) {
    need(1);
    const VarPtr& v = args[0];
    if (v->is_tensor()) {
      PyRef shape = PyRef::steal(PyObject_GetAttrString(v->fake.get(), "shape"));
      if (PyTuple_GET_SIZE(shape.get()) == 0) unsupported("len() of a 0-d tensor");
      if (holds_symint(PyTuple_GET_ITEM(shape.get(), 0)))
        return record_op(graph::Op::kCallMethod, nullptr, "size", {v, make_const(PyRef::steal(PyLong_FromLong(0)).get())}, {});
      return make_const(PyTuple_GET_ITEM(shape.get(), 0));
    }
    if (v->kind == VarKind::kTuple || v->kind == VarKind::kList || v->kind == VarKind::kDict)
      return make_const(PyRef::steal(PyLong_FromSize_t(v->items.size())).get());
    if (v->kind == VarKind::kDictView) return make_const(PyRef::steal(PyLong_FromSize_t(v->self->items.size())).get());
    if (v->kind == VarKind::kObject || v->kind == VarKind::kNewObject) {
      PyTypeObject* t = v->kind == VarKind::kObject ? Py_TYPE(v->obj.get()) : reinterpret_cast<PyTypeObject*>(v->obj.get());
      PyRef len_name = PyRef::steal(PyUnicode_FromString("__len__"));
      PyObject* l = _PyType_Lookup(t, len_name.get());
      if (l && PyFunction_Check(l)) return inline_function(l, nullptr, {v}, {}, nullptr);
      if (keeps_dict_method(v, len_name.get(), l)) return make_const(PyRef::steal(PyLong_FromSize_t(dict_contents(v)->items.size())).get());
      if (v->kind == VarKind::kNewObject && v->self) return make_const(PyRef::steal(PyLong_FromSize_t(v->self->items.size())).get());
    }
    return fold(f, args, kwargs);
  }
  if (is("isinstance") || is("issubclass")) {
    need(2);
    PyRef cls = as_python(args[1]);
    if (!cls) unsupported("isinstance() with a non-constant class");
    PyRef held;  // keeps issubclass's first argument alive through the call
    PyObject* t = nullptr;
    if (is("isinstance")) {
      t = python_type_of(args[0]);
    } else {
      held = as_python(args[0]);
      t = held.get();
    }
    if (!t) unsupported("issubclass() of a non-constant");
    int r = PyObject_IsSubclass(t, cls.get());
    if (r < 0) unsupported(take_python_error());
    return make_const(r ? Py_True : Py_False);
  }
  if (is("hasattr") || is("getattr")) {
    if (args.size() < 2 || !args[1]->is_const() || !PyUnicode_Check(args[1]->obj.get())) unsupported("getattr with a non-constant name");
    PyObject* name = args[1]->obj.get();
    const VarPtr& o = args[0];
    bool present = true;
    if (o->kind == VarKind::kObject && o->type_guarded) present = has_attr_guarded(o, name);
    else if (o->kind == VarKind::kObject || o->kind == VarKind::kConst) present = PyObject_HasAttr(o->obj.get(), name);
    else if (o->kind == VarKind::kNewObject) present = new_object_hasattr(o, name);
    else if (o->is_tensor()) present = PyObject_HasAttr(o->fake.get(), name);
    if (is("hasattr")) {
      if (o->kind != VarKind::kObject && o->kind != VarKind::kConst && o->kind != VarKind::kNewObject && !o->is_tensor())
        unsupported("hasattr() on a " + std::string(kind_name(o->kind)));
      return make_const(present ? Py_True : Py_False);
    }
    if (!present) {
      if (args.size() == 3) return args[2];
      unsupported("getattr of a missing attribute " + py_str(name));
    }
    return get_attr(o, name);
  }
  if (is("iter")) { need(1); return make_iterator(args[0]); }
  if (is("next")) {
    VarPtr it = args.at(0);
    if (it->kind == VarKind::kGenFrame && args.size() <= 2 && kwargs.empty()) {
      bool done = false;
      VarPtr r = resume_generator(it, make_const(Py_None), &done);
      if (!done) return r;
      if (args.size() == 2) return args[1];
      raise_python(PyExc_StopIteration, PyRef::steal(PyTuple_New(0)).get());
    }
    if (it->kind == VarKind::kObject && is_trace_value(it->obj.get()) && PyIter_Check(it->obj.get())) {  // next(itertools.count())
      PyRef r = PyRef::steal(PyIter_Next(it->obj.get()));
      if (r) return from_python_value(r.get(), true);
      if (PyErr_Occurred()) unsupported("next() raised " + take_python_error());
      if (args.size() == 2) return args[1];
      unsupported("next() on an exhausted iterator (StopIteration)");
    }
    if (it->kind != VarKind::kIterator) it = make_iterator(it);
    if (it->pos < it->items.size()) return it->items[it->pos++];
    if (args.size() == 2) return args[1];
    unsupported("next() on an exhausted iterator (StopIteration)");
  }
  if (is("list") || is("tuple")) {
    VarKind k = is("list") ? VarKind::kList : VarKind::kTuple;
    if (args.empty()) return make_seq(k, {});
    need(1);
    return make_seq(k, unpack(args[0]));
  }
  if (is("dict")) {
    auto d = std::make_shared<Var>(VarKind::kDict);
    d->fresh = true;
    auto set = [&](PyObject* key, const VarPtr& value) {  // later keys replace earlier ones in place
      for (size_t i = 0; i < d->keys.size(); ++i) {
        int r = PyObject_RichCompareBool(d->keys[i].get(), key, Py_EQ);
        if (r < 0) PyErr_Clear();
        if (r == 1) { d->items[i] = value; return; }
      }
      d->keys.push_back(PyRef::borrow(key));
      d->items.push_back(value);
    };
    if (args.size() == 1) {
      VarPtr src = args[0];
      if (src->kind == VarKind::kNewObject && src->self) src = src->self;  // a dict subclass made here
      if (src->kind == VarKind::kDict) {
        for (size_t i = 0; i < src->keys.size(); ++i) set(src->keys[i].get(), src->items[i]);
      } else if (src->kind == VarKind::kObject && is_trace_value(src->obj.get()) && PyDict_Check(src->obj.get())) {
        Py_ssize_t pos = 0;  // dict(counter), dict(defaultdict): its items now
        PyObject *k, *val;
        while (PyDict_Next(src->obj.get(), &pos, &k, &val)) set(k, from_python_value(val, true));
      } else {  // an iterable of (key, value) pairs: items(), zip(), a list of tuples
        for (const VarPtr& pair : unpack(src)) {
          std::vector<VarPtr> kv = pair->kind == VarKind::kTuple || pair->kind == VarKind::kList ? pair->items : unpack(pair);
          if (kv.size() != 2) unsupported("dict() of an item that is not a pair");
          if (!kv[0]->is_const()) unsupported("dict() with a non-constant key");
          set(kv[0]->obj.get(), kv[1]);
        }
      }
    } else if (!args.empty()) unsupported("dict() with several arguments");
    for (auto& [k, v] : kwargs) set(PyRef::steal(PyUnicode_FromString(k.c_str())).get(), v);
    return d;
  }
  if (is("enumerate")) {
    long start = 0;
    if (args.size() == 2 && args[1]->is_const()) start = PyLong_AsLong(args[1]->obj.get());
    for (auto& kv : kwargs) if (kv.first == "start" && kv.second->is_const()) start = PyLong_AsLong(kv.second->obj.get());
    auto items = unpack(args.at(0));
    std::vector<VarPtr> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(make_seq(VarKind::kTuple, {make_const(PyRef::steal(PyLong_FromLong(start + static_cast<long>(i))).get()), items[i]}));
    return make_seq(VarKind::kList, out);
  }
  if (is("zip")) {
    // Rows as Python pulls them: each round takes from the arguments in order and stops at the
    // first one that is exhausted, so iterators (kiln's, or a trace-time itertools.count) advance
    // exactly as far as they would in Python.
    bool strict = false;
    for (auto& [k, v] : kwargs) {
      if (k != "strict") unsupported("zip() keyword " + k);
      strict = truthy(v);
    }
    struct Col { VarPtr var; std::vector<VarPtr> items; bool iter = false, lazy = false; };
    std::vector<Col> cols;
    for (auto& a : args) {
      Col c;
      c.var = a;
      if (a->kind == VarKind::kIterator) c.iter = true;
      else if (a->kind == VarKind::kObject && is_trace_value(a->obj.get()) && PyIter_Check(a->obj.get())) c.lazy = true;
      else c.items = unpack(a);
      cols.push_back(std::move(c));
    }
    std::vector<VarPtr> out;
    for (size_t i = 0; !cols.empty(); ++i) {
      if (i > 100000) unsupported("zip() too long to unroll");
      std::vector<VarPtr> row;
      size_t stopped_at = cols.size();
      for (size_t c = 0; c < cols.size() && stopped_at == cols.size(); ++c) {
        Col& col = cols[c];
        if (col.iter) {
          if (col.var->pos < col.var->items.size()) row.push_back(col.var->items[col.var->pos++]);
          else stopped_at = c;
        } else if (col.lazy) {
          PyRef r = PyRef::steal(PyIter_Next(col.var->obj.get()));
          if (!r) {
            if (PyErr_Occurred()) unsupported("zip(): an iterator raised " + take_python_error());
            stopped_at = c;
          } else {
            row.push_back(from_python_value(r.get(), true));
          }
        } else if (i < col.items.size()) {
          row.push_back(col.items[i]);
        } else {
          stopped_at = c;
        }
      }
      if (stopped_at == cols.size()) { out.push_back(make_seq(VarKind::kTuple, row)); continue; }
      if (strict) {  // every other argument must be exhausted too (ValueError otherwise)
        if (stopped_at > 0) unsupported("zip(strict=True) arguments of different lengths (ValueError)");
        for (size_t c = 1; c < cols.size(); ++c) {
          const Col& col = cols[c];
          bool more = col.iter ? col.var->pos < col.var->items.size() : col.lazy ? true : i < col.items.size();
          if (more) unsupported("zip(strict=True) arguments of different lengths (ValueError)");
        }
      }
      break;
    }
    return make_seq(VarKind::kList, out);
  }
  if (f == module_attr("itertools", "islice")) {
    if (args.size() < 2 || args.size() > 4) unsupported("islice() argument count");
    for (size_t i = 1; i < args.size(); ++i)
      if (!args[i]->is_const()) unsupported("islice() with non-constant bounds");
    auto items = unpack(args[0]);
    PyRef sl = PyRef::steal(args.size() == 2 ? PySlice_New(Py_None, args[1]->obj.get(), nullptr)
                                             : PySlice_New(args[1]->obj.get(), args[2]->obj.get(), args.size() == 4 ? args[3]->obj.get() : nullptr));
    VarPtr r = subscript(make_seq(VarKind::kList, items), make_const(sl.get()));
    return make_iterator(r);
  }
  if (is("reversed")) {
    need(1);
    auto items = unpack(args[0]);
    std::reverse(items.begin(), items.end());
    return make_seq(VarKind::kList, items);
  }
  if (is("map")) {
    if (args.size() < 2) unsupported("map() with one argument");
    std::vector<std::vector<VarPtr>> cols;
    size_t n = SIZE_MAX;
    for (size_t i = 1; i < args.size(); ++i) { cols.push_back(unpack(args[i])); n = std::min(n, cols.back().size()); }
    std::vector<VarPtr> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<VarPtr> row;
      for (auto& c : cols) row.push_back(c[i]);
      out.push_back(call(args[0], row, {}));
    }
    return make_seq(VarKind::kList, out);
  }
  if (is("type") && args.size() == 1) return make_object(python_type_of(args[0]), nullptr);
  if (is("callable") && args.size() == 1) {
    const VarPtr& v = args[0];
    if (v->kind == VarKind::kObject || v->kind == VarKind::kConst) return make_const(PyCallable_Check(v->obj.get()) ? Py_True : Py_False);
    bool c = v->kind == VarKind::kNestedFunction || v->kind == VarKind::kBoundMethod || v->kind == VarKind::kTensorMethod;
    return make_const(c ? Py_True : Py_False);
  }
  if (is("sum")) {
    VarPtr start = args.size() > 1 ? args[1] : nullptr;
    for (auto& [k, v] : kwargs) {
      if (k != "start" || start) unsupported("sum() with keyword " + k);
      start = v;
    }
    if (args.empty() || args.size() > 2) unsupported("sum() argument count");
    auto items = unpack(args[0]);
    VarPtr acc = start ? start : make_const(PyRef::steal(PyLong_FromLong(0)).get());
    for (auto& it : items) acc = binary("NB_ADD", acc, it);
    return acc;
  }
  if ((is("any") || is("all")) && args.size() == 1 && kwargs.empty() && !args[0]->is_tensor()) {
    const bool any = is("any");
    for (const VarPtr& it : unpack(args[0]))
      if (truthy(it) == any) return make_const(any ? Py_True : Py_False);
    return make_const(any ? Py_False : Py_True);
  }
  if (is("min") || is("max") || is("any") || is("all") || is("sorted") || is("abs") || is("int") || is("float") ||
      is("bool") || is("str") || is("round") || is("divmod") || is("pow")) {
    std::vector<VarPtr> flat = args;
    if (args.size() == 1 && !args[0]->is_tensor() && !is("abs") && !is("int") && !is("float") && !is("bool") && !is("str") && !is("round"))
      flat = unpack(args[0]);
    for (auto& v : flat)
      if (v->is_tensor()) {
        if (is("abs")) return unary(op_fn("abs"), v);
        if (is("pow") && args.size() == 2) return binary("NB_POWER", args[0], args[1]);
        unsupported(py_str(PyRef::steal(PyObject_GetAttrString(f, "__name__")).get()) + "() of a tensor depends on its data");
      }
    if (flat.size() != args.size()) return fold(f, {make_seq(VarKind::kTuple, flat)}, kwargs);
    return fold(f, args, kwargs);
  }
  if (is("print")) unsupported("print() is a side effect kiln does not replay yet");
  if (is("super")) {
    auto sup = std::make_shared<Var>(VarKind::kSuper);
    if (args.size() == 2) {
      if (!args[0]->is_const() && args[0]->kind != VarKind::kObject) unsupported("super() with a non-constant class");
      sup->obj = args[0]->obj;
      sup->self = args[1];
    } else if (args.empty()) {  // zero-argument form: the __class__ cell and the first argument
      Frame& fr = *frames_.back();
      for (int i = 0; i < fr.code->co_nlocalsplus; ++i)
        if (py_str(PyTuple_GET_ITEM(fr.code->co_localsplusnames, i)) == "__class__") {
          VarPtr cell = fr.locals[i];
          if (cell && cell->kind == VarKind::kCell && !cell->items.empty()) sup->obj = cell->items[0]->obj;
        }
      VarPtr first = fr.locals.empty() ? nullptr : fr.locals[0];
      if (first && first->kind == VarKind::kCell) first = first->items.empty() ? nullptr : first->items[0];
      if (!sup->obj || !first) unsupported("super() outside a method");
      sup->self = first;
    } else {
      unsupported("super() with one argument");
    }
    return sup;
  }
  if (is("id")) { need(1); return id_of(args[0]); }
  if (f == op_fn("getitem")) { need(2); return subscript(args[0], args[1]); }
  // operator.* with tensors: record; otherwise fold.
  if (module_of(f) == "_operator" || module_of(f) == "operator") {
    bool any_tensor = false;
    for (auto& a : args) any_tensor |= a->is_tensor();
    if (any_tensor) return record_op(graph::Op::kCallFunction, f, "", args, kwargs);
    return fold(f, args, kwargs);
  }
  *handled = false;
  return nullptr;
}

// id(v), as Dynamo answers it: an object the capture specialises on by identity (guarded by
// identity here) and the singletons have their real id; a value that exists only while capturing
// (a tensor the graph computes, a list or object the code made, a trace-time value) or a constant
// (which object CPython hands out for an equal value is its own business) gets a fake id.
VarPtr Interpreter::id_of(const VarPtr& v) {
  PyObject* real = nullptr;
  if (v->kind == VarKind::kObject && !v->fresh && !is_trace_value(v->obj.get())) real = identity(v);
  PyObject* o = v->obj.get();
  if (v->is_const() && (o == Py_None || o == Py_True || o == Py_False || o == Py_Ellipsis || o == Py_NotImplemented)) real = o;
  if (real) return make_const(PyRef::steal(PyLong_FromVoidPtr(real)).get());
  std::pair<int, const void*> key{2, v.get()};
  if (v->kind == VarKind::kConst || v->kind == VarKind::kObject) key = {0, o};
  else if (v->is_tensor()) key = {1, reinterpret_cast<const void*>(static_cast<intptr_t>(v->node))};
  auto it = fake_ids_.find(key);
  if (it == fake_ids_.end()) {
    PyRef token = PyRef::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
    PyRef fake = PyRef::steal(token ? new_fake_id(token.get()) : nullptr);
    if (!fake) unsupported("id(): cannot make a fake id: " + take_python_error());
    fake_id_holds_.push_back(token);
    if (key.first == 0) fake_id_holds_.push_back(v->obj);
    if (key.first == 2) fake_id_vars_.push_back(v);
    it = fake_ids_.emplace(key, fake).first;
  }
  return make_const(it->second.get());
}

void Interpreter::refuse_fake_ids(const VarPtr& v, const char* use) {
  if (fake_ids_.empty()) return;
  std::function<bool(const VarPtr&, int)> holds = [&](const VarPtr& x, int depth) {
    if (x->is_const()) return holds_fake_id(x->obj.get());
    if (depth > 8 || (x->kind != VarKind::kTuple && x->kind != VarKind::kList && x->kind != VarKind::kDict)) return false;
    for (const auto& k : x->keys)
      if (holds_fake_id(k.get())) return true;
    for (const auto& it : x->items)
      if (holds(it, depth + 1)) return true;
    return false;
  };
  if (holds(v, 0)) unsupported(std::string("id() of a value that exists only while compiling, used ") + use);
}

// A list position given to insert/pop: a constant int, or a size (specialised, guarded).
long Interpreter::list_index(const VarPtr& v, const char* what) {
  PyRef i = v->is_symint() ? concretize(v) : (v->is_const() ? v->obj : PyRef());
  if (!i || !PyLong_Check(i.get())) unsupported(std::string(what) + " with a non-constant index");
  long r = PyLong_AsLong(i.get());
  if (r == -1 && PyErr_Occurred()) unsupported(std::string(what) + ": " + take_python_error());
  return r;
}

VarPtr Interpreter::call_container_method(const VarPtr& m, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  VarPtr self = m->self;
  const std::string& name = m->name;
  if (self->kind == VarKind::kObject) {  // a lookup in an existing dict, or __reduce_ex__ (see get_attr)
    if (kwargs.empty())
      if (VarPtr r = name == "__reduce_ex__" ? reduce_ex(self, args) : existing_dict_lookup(self, name, args)) return r;
    PyRef bound = PyRef::steal(PyObject_GetAttrString(self->obj.get(), name.c_str()));
    if (!bound) unsupported(std::string(Py_TYPE(self->obj.get())->tp_name) + "." + name + ": " + take_python_error());
    return call(wrap_unguarded(bound.get(), name), std::move(args), std::move(kwargs));
  }
  if (self->kind == VarKind::kNewObject) {  // builtin methods of object / dict on a new instance
    if (name == "__reduce_ex__" && kwargs.empty())
      if (VarPtr r = reduce_ex(self, args)) return r;
    if (name == "__setattr__") {
      if (args.size() != 2 || !args[0]->is_const()) unsupported("__setattr__ with a non-constant name");
      set_new_object_attr(self, args[0]->obj.get(), args[1]);
      return make_const(Py_None);
    }
    if (name == "__delattr__") {
      if (args.size() != 1 || !args[0]->is_const() || !PyUnicode_Check(args[0]->obj.get())) unsupported("__delattr__ with a non-constant name");
      del_new_object_attr(self, args[0]->obj.get());
      return make_const(Py_None);
    }
    if (name == "__getattribute__" || name == "__getattr__") {
      if (args.size() != 1 || !args[0]->is_const()) unsupported("__getattribute__ with a non-constant name");
      return new_object_attr(self, args[0]->obj.get());
    }
    if (name == "__init__" && (args.empty() || self->self) && kwargs.empty()) {
      if (!args.empty()) return call_container(self->self, "update", args);  // dict.__init__(self, mapping)
      return make_const(Py_None);
    }
    if (self->self) {  // dict contents
      if (name == "__len__") return make_const(PyRef::steal(PyLong_FromSize_t(self->self->items.size())).get());
      if (name == "__iter__") return make_iterator(self->self);
      return call_container_method(make_container_method(self->self, name == "__delitem__" ? "pop" : name), args, kwargs);
    }
    unsupported(std::string(reinterpret_cast<PyTypeObject*>(self->obj.get())->tp_name) + "." + name + " on a new object");
  }
  auto key_index = [&](PyObject* key) -> int {
    for (size_t i = 0; i < self->keys.size(); ++i) {
      int r = PyObject_RichCompareBool(self->keys[i].get(), key, Py_EQ);
      if (r < 0) PyErr_Clear();
      if (r == 1) return static_cast<int>(i);
    }
    return -1;
  };
  auto mutate = [&]() { note_container_mutation(self, name); };
  static const std::unordered_set<std::string> dict_mutators = {"update", "__setitem__", "setdefault", "pop", "popitem", "clear", "__delitem__"};
  if (dict_mutators.count(name) && attrs_owner(self)) return mutate_attrs_dict(self, name, args, kwargs);
  if (self->kind == VarKind::kDict) {
    if (name == "items" || name == "keys" || name == "values") {
      if (!args.empty() || !kwargs.empty()) unsupported("dict." + name + " with arguments");
      auto view = std::make_shared<Var>(VarKind::kDictView);
      view->self = self;
      view->name = name;
      return view;
    }
    if (name == "get" || name == "__getitem__" || name == "pop" || name == "setdefault") {
      if (args.empty() || !args[0]->is_const()) unsupported("dict." + name + " with a non-constant key");
      int i = key_index(args[0]->obj.get());
      if (name == "pop" && i >= 0) {
        mutate();
        VarPtr v = self->items[i];
        self->keys.erase(self->keys.begin() + i);
        self->items.erase(self->items.begin() + i);
        return v;
      }
      if (i >= 0) return self->items[i];
      if (name == "setdefault") {
        mutate();
        self->keys.push_back(args[0]->obj);
        self->items.push_back(args.size() > 1 ? args[1] : make_const(Py_None));
        return self->items.back();
      }
      if (args.size() > 1) return args[1];
      if (name == "get") return make_const(Py_None);
      if (name == "__getitem__" && self->obj && self->self) {  // a defaultdict made here: the factory's value, stored
        PyObject* factory = self->self->obj.get();
        VarPtr v = factory == reinterpret_cast<PyObject*>(&PyList_Type) ? make_seq(VarKind::kList, {})
                                                                         : make_const(PyRef::steal(PyObject_CallNoArgs(factory)).get());
        mutate();
        self->keys.push_back(args[0]->obj);
        self->items.push_back(v);
        return v;
      }
      raise_python(PyExc_KeyError, args[0]->obj.get());
    }
    if (name == "__setitem__") {
      mutate();
      if (!args[0]->is_const()) unsupported("dict key is not a constant");
      int i = key_index(args[0]->obj.get());
      if (i >= 0) self->items[i] = args[1];
      else { self->keys.push_back(args[0]->obj); self->items.push_back(args[1]); }
      return make_const(Py_None);
    }
    if (name == "update") {
      mutate();
      for (auto& a : args) {
        if (a->kind != VarKind::kDict) unsupported("dict.update with a non-dict");
        for (size_t i = 0; i < a->keys.size(); ++i) call_container(self, "__setitem__", {make_const(a->keys[i].get()), a->items[i]});
      }
      for (auto& [k, v] : kwargs)
        call_container(self, "__setitem__", {make_const(PyRef::steal(PyUnicode_FromString(k.c_str())).get()), v});
      return make_const(Py_None);
    }
    if (name == "copy") { auto d = std::make_shared<Var>(VarKind::kDict); d->keys = self->keys; d->items = self->items; d->obj = self->obj; d->self = self->self; return d; }
    if (name == "popitem" && args.size() <= 1) {  // dict: the last; OrderedDict(last=False): the first
      bool last = true;
      if (!args.empty()) last = truthy(args[0]);
      for (auto& [k, v] : kwargs) {
        if (k != "last" || !self->obj) unsupported("popitem() keyword " + k);
        last = truthy(v);
      }
      if (!last && !self->obj) unsupported("dict.popitem() takes no arguments (TypeError)");
      if (self->keys.empty()) unsupported("popitem(): dictionary is empty (KeyError)");
      mutate();
      size_t i = last ? self->keys.size() - 1 : 0;
      VarPtr r = make_seq(VarKind::kTuple, {make_const(self->keys[i].get()), self->items[i]});
      self->keys.erase(self->keys.begin() + static_cast<long>(i));
      self->items.erase(self->items.begin() + static_cast<long>(i));
      return r;
    }
    if (name == "move_to_end" && self->obj && !args.empty() && args.size() <= 2 && args[0]->is_const()) {
      bool last = args.size() < 2 || truthy(args[1]);
      for (auto& [k, v] : kwargs) {
        if (k != "last") unsupported("move_to_end() keyword " + k);
        last = truthy(v);
      }
      int i = key_index(args[0]->obj.get());
      if (i < 0) unsupported("move_to_end of a missing key (KeyError)");
      mutate();
      PyRef k = self->keys[i];
      VarPtr v = self->items[i];
      self->keys.erase(self->keys.begin() + i);
      self->items.erase(self->items.begin() + i);
      self->keys.insert(last ? self->keys.end() : self->keys.begin(), k);
      self->items.insert(last ? self->items.end() : self->items.begin(), v);
      return make_const(Py_None);
    }
    if (name == "__contains__") return make_const(key_index(args.at(0)->obj.get()) >= 0 ? Py_True : Py_False);
  }
  if (is_deque(self)) {
    if (!kwargs.empty()) unsupported("deque." + name + "() with keywords");
    return call_deque_method(self, name, args);
  }
  if (self->kind == VarKind::kTuple && self->obj && name == "_replace" && args.empty()) {  // namedtuple._replace(f=v)
    PyRef fields = PyRef::steal(PyObject_GetAttrString(self->obj.get(), "_fields"));
    if (!fields || !PyTuple_Check(fields.get()) || PyTuple_GET_SIZE(fields.get()) != static_cast<Py_ssize_t>(self->items.size()))
      unsupported("_replace on a tuple type without matching _fields");
    VarPtr t = make_seq(VarKind::kTuple, self->items);
    t->obj = self->obj;
    for (const auto& [k, v] : kwargs) {
      bool found = false;
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields.get()) && !found; ++i)
        if (py_str(PyTuple_GET_ITEM(fields.get(), i)) == k) { t->items[i] = v; found = true; }
      if (!found) unsupported("_replace with an unknown field " + k + " (ValueError)");
    }
    return t;
  }
  if (self->kind == VarKind::kList || self->kind == VarKind::kTuple) {
    if (self->kind == VarKind::kList) {
      if (name == "append") { mutate(); self->items.push_back(args.at(0)); return make_const(Py_None); }
      if (name == "extend") { mutate(); auto it = unpack(args.at(0)); self->items.insert(self->items.end(), it.begin(), it.end()); return make_const(Py_None); }
      if (name == "insert") {
        mutate();
        long i = list_index(args.at(0), "list.insert");
        long n = static_cast<long>(self->items.size());
        if (i < 0) i = std::max(0L, i + n);
        i = std::min(i, n);
        self->items.insert(self->items.begin() + i, args.at(1));
        return make_const(Py_None);
      }
      if (name == "pop") {
        mutate();
        if (self->items.empty()) unsupported("pop from empty list");
        long n = static_cast<long>(self->items.size());
        long i = args.empty() ? n - 1 : list_index(args[0], "list.pop");
        if (i < 0) i += n;
        if (i < 0 || i >= n) unsupported("pop index out of range");
        VarPtr v = self->items[i];
        self->items.erase(self->items.begin() + i);
        return v;
      }
      if (name == "reverse") { mutate(); std::reverse(self->items.begin(), self->items.end()); return make_const(Py_None); }
      if (name == "sort" && args.empty()) {
        VarPtr key, rev;
        for (auto& [k, v] : kwargs) {
          if (k == "key") key = v;
          else if (k == "reverse") rev = v;
          else unsupported("list.sort() keyword " + k);
        }
        std::vector<VarPtr> sorted = sort_by_key(self->items, key, rev && truthy(rev));
        mutate();
        self->items = std::move(sorted);
        return make_const(Py_None);
      }
      if (name == "clear") { mutate(); self->items.clear(); return make_const(Py_None); }
      if (name == "copy") return make_seq(VarKind::kList, self->items);
    }
    if (name == "index" || name == "count") {
      bool known;
      long count = 0, first = -1;
      for (size_t i = 0; i < self->items.size(); ++i) {
        bool eq;
        if (self->items[i]->is_const() && args.at(0)->is_const()) {
          int r = PyObject_RichCompareBool(self->items[i]->obj.get(), args[0]->obj.get(), Py_EQ);
          if (r < 0) { PyErr_Clear(); r = 0; }
          eq = r == 1;
        } else {
          eq = same_object(self->items[i], args[0], &known);
          if (!known) unsupported("list." + name + " of a value kiln cannot compare");
        }
        if (eq) { ++count; if (first < 0) first = static_cast<long>(i); }
      }
      if (name == "count") return make_const(PyRef::steal(PyLong_FromLong(count)).get());
      if (first < 0) unsupported("ValueError: value not in list");
      return make_const(PyRef::steal(PyLong_FromLong(first)).get());
    }
  }
  unsupported(std::string(kind_name(self->kind)) + "." + name + "() is not supported");
}

}  // namespace kiln::frontend
