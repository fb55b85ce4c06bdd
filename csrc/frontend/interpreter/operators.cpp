// Python operators on symbolic values: arithmetic, comparisons, subscripts and `in`; on tensors
// they record operator.* calls into the graph, on constants they fold.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/fake_id.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- operators

static const char* nb_to_operator(const std::string& nb) {
  static const std::unordered_map<std::string, const char*> m = {
      {"NB_ADD", "add"}, {"NB_AND", "and_"}, {"NB_FLOOR_DIVIDE", "floordiv"}, {"NB_LSHIFT", "lshift"},
      {"NB_MATRIX_MULTIPLY", "matmul"}, {"NB_MULTIPLY", "mul"}, {"NB_REMAINDER", "mod"}, {"NB_OR", "or_"},
      {"NB_POWER", "pow"}, {"NB_RSHIFT", "rshift"}, {"NB_SUBTRACT", "sub"}, {"NB_TRUE_DIVIDE", "truediv"},
      {"NB_XOR", "xor"}, {"NB_INPLACE_ADD", "iadd"}, {"NB_INPLACE_AND", "iand"}, {"NB_INPLACE_FLOOR_DIVIDE", "ifloordiv"},
      {"NB_INPLACE_LSHIFT", "ilshift"}, {"NB_INPLACE_MATRIX_MULTIPLY", "imatmul"}, {"NB_INPLACE_MULTIPLY", "imul"},
      {"NB_INPLACE_REMAINDER", "imod"}, {"NB_INPLACE_OR", "ior"}, {"NB_INPLACE_POWER", "ipow"}, {"NB_INPLACE_RSHIFT", "irshift"},
      {"NB_INPLACE_SUBTRACT", "isub"}, {"NB_INPLACE_TRUE_DIVIDE", "itruediv"}, {"NB_INPLACE_XOR", "ixor"}};
  auto it = m.find(nb);
  return it == m.end() ? nullptr : it->second;
}

VarPtr Interpreter::binary(const char* nb_name, const VarPtr& a, const VarPtr& b) {
  const char* opn = nb_to_operator(nb_name);
  if (!opn) unsupported(std::string("binary operator ") + nb_name);
  bool inplace = opn[0] == 'i';
  if (a->kind == VarKind::kNdarray || b->kind == VarKind::kNdarray) return ndarray_binary(opn, a, b);
  PyObject* fn = op_fn(opn);
  if ((a->is_symint() || b->is_symint()) && !a->is_tensor() && !b->is_tensor()) {
    // Arithmetic on sizes stays symbolic; anything else (`[0] * n`) specialises the size.
    if (is_numeric(a) && is_numeric(b)) return symint_op(inplace ? op_fn(opn + 1) : fn, {a, b});
    return binary(nb_name, a->is_symint() ? make_const(concretize(a).get()) : a, b->is_symint() ? make_const(concretize(b).get()) : b);
  }
  if (a->is_tensor() || b->is_tensor()) {
    if (inplace && !a->is_tensor()) fn = op_fn(opn + 1);  // `n += t` rebinds n to a new tensor
    if (a->float_tensor && !a->is_tensor() && b->is_tensor()) {
      // A dynamic float (a float64 tensor in the graph) on the left of a tensor: Python runs the
      // tensor's reflected operator, which the graph must run too, not float64_tensor.__mul__.
      // Tensor.__rmul__ / __radd__ are mul(t, s) / add(t, s): ATen's kernels take a scalar as
      // their second operand in float32 for a float16 / bfloat16 t, and round it to t's dtype
      // as the first (fuzz floats seed 14198: `s * t.half()` 1 ulp off). Tensor.__rtruediv__ is
      // t.reciprocal() * s, rounded twice (`s / t` 1 ulp off in every dtype). __rsub__,
      // __rfloordiv__, __rmod__ and __rpow__ keep the float first, as recorded.
      const std::string base_op = inplace ? opn + 1 : opn;
      if (base_op == "mul" || base_op == "add") return record_op(graph::Op::kCallFunction, fn, "", {b, a}, {});
      if (base_op == "truediv") {
        VarPtr r = record_op(graph::Op::kCallMethod, nullptr, "reciprocal", {b}, {});
        return record_op(graph::Op::kCallFunction, op_fn("mul"), "", {r, a}, {});
      }
    }
    return record_op(graph::Op::kCallFunction, fn, "", {a, b}, {});
  }
  if (is_deque(a) || is_deque(b)) unsupported(std::string("operator ") + opn + " on a deque");
  bool a_seq = a->kind == VarKind::kTuple || a->kind == VarKind::kList;
  bool b_seq = b->kind == VarKind::kTuple || b->kind == VarKind::kList;
  std::string base = inplace ? opn + 1 : opn;
  if (a_seq && (b_seq || b->is_const()) && base == "add") {
    std::vector<VarPtr> items = a->items;
    auto more = unpack(b);
    items.insert(items.end(), more.begin(), more.end());
    if (inplace && a->kind == VarKind::kList) {
      if (a->source) unsupported("in-place change of an input list");
      a->items = items;
      return a;
    }
    return make_seq(a->kind, items);
  }
  if (b_seq && a->is_const() && base == "add" && PyTuple_Check(a->obj.get())) {
    std::vector<VarPtr> items = unpack(a);
    items.insert(items.end(), b->items.begin(), b->items.end());
    return make_seq(b->kind, items);
  }
  if (a_seq && b->is_const() && base == "mul" && PyLong_Check(b->obj.get())) {
    std::vector<VarPtr> items;
    long times = PyLong_AsLong(b->obj.get());
    for (long i = 0; i < times; ++i) items.insert(items.end(), a->items.begin(), a->items.end());
    return make_seq(a->kind, items);
  }
  if (!base.empty() && base.back() == '_') base.pop_back();  // and_/or_ as iand/ior name them
  if (base == "or" && a->kind == VarKind::kDict && b->kind == VarKind::kDict) {  // {..} | {..}, d |= {..}
    VarPtr target = a;
    if (!inplace) {
      target = std::make_shared<Var>(VarKind::kDict);
      target->keys = a->keys;
      target->items = a->items;
      target->obj = a->obj;
      target->self = a->self;  // a defaultdict's factory
    }
    call_container(target, "update", {b});
    return target;
  }
  // Set algebra with a dict's keys view: the view's keys now, as a set.
  auto keys_as_set = [&](const VarPtr& v) -> VarPtr {
    if (v->kind != VarKind::kDictView || v->name != "keys") return v;
    PyRef set = PyRef::steal(PySet_New(nullptr));
    for (const auto& k : v->self->keys)
      if (PySet_Add(set.get(), k.get()) < 0) unsupported(take_python_error());
    return trace_value(set.get());
  };
  if (base == "and" || base == "or" || base == "sub" || base == "xor") {
    bool a_view = a->kind == VarKind::kDictView && a->name == "keys", b_view = b->kind == VarKind::kDictView && b->name == "keys";
    if (a_view || b_view) {
      if (inplace && a_view) unsupported("in-place set operator on a dict view");
      return binary(nb_name, keys_as_set(a), keys_as_set(b));
    }
  }
  // An in-place operator on an object kiln does not own would change it now, at capture time.
  if (inplace && a->kind == VarKind::kObject && !is_trace_value(a->obj.get()) && !is_constant_like(a->obj.get()))
    unsupported(std::string("in-place ") + opn + " on a " + Py_TYPE(a->obj.get())->tp_name + " made outside the capture");
  return fold(fn, {a, b}, {});
}

VarPtr Interpreter::compare(int op, const VarPtr& a, const VarPtr& b) {
  static const char* names[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  if (op < 0 || op > 5) unsupported("comparison operator " + std::to_string(op));
  if (a->kind == VarKind::kNdarray || b->kind == VarKind::kNdarray) return ndarray_binary(names[op], a, b);
  PyObject* fn = op_fn(names[op]);
  if (a->is_tensor() || b->is_tensor()) return record_op(graph::Op::kCallFunction, fn, "", {a, b}, {});
  if (VarPtr r = compare_float_input(op, a, b)) return r;  // `if t > 0.5:` on a dynamic float
  if (a->is_symint() || b->is_symint()) {
    // A branch on sizes: the answer under the captured sizes, guarded (a shape guard).
    // Two numbers compare symbolically (the SymBool guards itself); anything else sees values.
    const bool numeric = is_numeric(a) && is_numeric(b);
    auto operand = [&](const VarPtr& v) { return numeric && v->is_symint() && !v->flag ? v->fake : concretize(v); };
    PyRef pa = operand(a), pb = operand(b);
    if (!pa || !pb) unsupported("comparison of a " + std::string(kind_name(a->kind)) + " and a " + kind_name(b->kind));
    PyRef r = PyRef::steal(PyObject_RichCompare(pa.get(), pb.get(), op));
    if (!r) unsupported("comparison raised " + take_python_error());
    return wrap_symbolic(r.get(), -1);
  }
  if (op != 2 && op != 3) {  // ids only compare equal or not
    refuse_fake_ids(a, "in an ordering comparison");
    refuse_fake_ids(b, "in an ordering comparison");
  }
  PyRef pa = as_python(a), pb = as_python(b);
  if (!pa || !pb) {
    if (op == 2 || op == 3) {  // == / != on values kiln tracks by identity
      bool known;
      bool same = same_object(a, b, &known);
      if (known && same) return make_const(op == 2 ? Py_True : Py_False);
    }
    unsupported("comparison of a " + std::string(kind_name(a->kind)) + " and a " + kind_name(b->kind));
  }
  PyRef r = PyRef::steal(PyObject_RichCompare(pa.get(), pb.get(), op));
  if (!r) unsupported("comparison raised " + take_python_error());
  if (probe_is_tensor(r.get())) unsupported("comparison produced a tensor");
  return is_constant_like(r.get()) ? make_const(r.get()) : make_object(r.get(), nullptr);
}

VarPtr Interpreter::unary(PyObject* fn, const VarPtr& v) {
  if (v->is_tensor()) return record_op(graph::Op::kCallFunction, fn, "", {v}, {});
  if (v->is_symint()) return symint_op(fn, {v});
  return fold(fn, {v}, {});
}

// `layers[:n]` on an nn.ModuleList builds a new ModuleList in eager; here it is the list of
// those submodules (each read through the module's _modules), typed as a ModuleList for
// isinstance and never returned from the graph as one.
VarPtr Interpreter::module_list_slice(const VarPtr& obj, PyObject* slice) {
  PyObject** dp = _PyObject_GetDictPtr(obj->obj.get());
  PyObject* modules = dp && *dp ? PyDict_GetItemString(*dp, "_modules") : nullptr;
  if (!modules || !PyDict_Check(modules)) unsupported("a ModuleList without _modules");
  PyRef keys = PyRef::steal(PyDict_Keys(modules));
  Py_ssize_t start, stop, step, len;
  if (PySlice_GetIndicesEx(slice, PyList_GET_SIZE(keys.get()), &start, &stop, &step, &len) < 0) unsupported(take_python_error());
  PyRef key_tuple = PyRef::steal(PyList_AsTuple(keys.get()));
  guard(attr_source(obj->source, PyRef::steal(PyUnicode_FromString("_modules")).get()), GuardLeaf::kDictKeys, key_tuple.get());
  std::vector<VarPtr> out;
  for (Py_ssize_t k = 0, p = start; k < len; ++k, p += step) {
    PyObject* key = PyList_GET_ITEM(keys.get(), p);
    out.push_back(wrap(PyDict_GetItem(modules, key), module_member_source(obj->source, "_modules", key)));
  }
  VarPtr r = make_seq(VarKind::kList, std::move(out));
  r->obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(obj->obj.get())));
  r->fresh = true;
  return r;
}

// `x[:, a:t, i]` with symbolic bounds or indices, as the aten.slice / select / unsqueeze calls
// basic indexing is (Python's tensor indexing would specialise the sizes); null when the index
// has tensors or anything else basic indexing does not cover.
VarPtr Interpreter::symbolic_basic_index(const VarPtr& x, const VarPtr& idx) {
  std::vector<VarPtr> items = idx->kind == VarKind::kTuple ? idx->items : std::vector<VarPtr>{idx};
  bool symbolic = false;
  int consumes = 0;
  for (const auto& it : items) {
    symbolic |= it->kind == VarKind::kSymSlice || (it->is_symint() && !it->flag);
    if (it->kind == VarKind::kSymSlice || it->is_symint()) { ++consumes; continue; }
    if (!it->is_const()) return nullptr;
    PyObject* o = it->obj.get();
    if (PySlice_Check(o) || (PyLong_Check(o) && !PyBool_Check(o))) ++consumes;
    else if (o != Py_None && o != Py_Ellipsis) return nullptr;
  }
  if (!symbolic) return nullptr;
  static PyObject* slice_op = nullptr;
  if (!slice_op) {
    PyRef aten = PyRef::steal(PyObject_GetAttrString(PyRef::steal(PyObject_GetAttrString(g_torch.torch, "ops")).get(), "aten"));
    PyRef sl = aten ? PyRef::steal(PyObject_GetAttrString(aten.get(), "slice")) : PyRef();
    slice_op = sl ? PyObject_GetAttrString(sl.get(), "Tensor") : nullptr;
    if (!slice_op) unsupported("torch.ops.aten.slice.Tensor: " + take_python_error());
  }
  auto num = [](long v) { return make_const(PyRef::steal(PyLong_FromLong(v)).get()); };
  VarPtr cur = x;
  long dim = 0;
  PyRef ndim_obj = PyRef::steal(PyObject_GetAttrString(x->fake.get(), "ndim"));
  long ndim = ndim_obj ? PyLong_AsLong(ndim_obj.get()) : -1;
  if (ndim < 0) unsupported("tensor.ndim: " + take_python_error());
  for (const auto& it : items) {
    PyObject* o = it->is_const() ? it->obj.get() : nullptr;
    if (o == Py_None) {
      cur = record_op(graph::Op::kCallMethod, nullptr, "unsqueeze", {cur, num(dim)}, {});
      ++dim;
    } else if (o == Py_Ellipsis) {
      dim += ndim - consumes;  // the dimensions no item consumes
    } else if (it->is_symint() || (o && PyLong_Check(o))) {
      cur = record_op(graph::Op::kCallFunction, module_attr("torch", "select"), "", {cur, num(dim), it}, {});
    } else {
      VarPtr start = make_const(Py_None), stop = make_const(Py_None), step = make_const(Py_None);
      if (it->kind == VarKind::kSymSlice) {
        start = it->items[0]; stop = it->items[1]; step = it->items[2];
      } else {
        auto* s = reinterpret_cast<PySliceObject*>(o);
        start = make_const(s->start); stop = make_const(s->stop); step = make_const(s->step);
      }
      bool whole = start->is_const() && start->obj.get() == Py_None && stop->is_const() && stop->obj.get() == Py_None &&
                   step->is_const() && step->obj.get() == Py_None;
      if (!whole) {
        if (step->is_const() && step->obj.get() == Py_None) step = num(1);
        if (start->is_const() && start->obj.get() == Py_None) start = num(0);
        if (stop->is_const() && stop->obj.get() == Py_None) stop = make_const(PyRef::steal(PyLong_FromLongLong(INT64_MAX)).get());
        cur = record_op(graph::Op::kCallFunction, slice_op, "", {cur, num(dim), start, stop, step}, {});
      }
      ++dim;
    }
  }
  return cur;
}

VarPtr Interpreter::subscript(const VarPtr& obj, const VarPtr& idx) {
  if (obj->is_tensor()) {
    if (VarPtr r = symbolic_basic_index(obj, idx)) return r;
    if (idx->kind == VarKind::kTuple || idx->kind == VarKind::kSymSlice || idx->is_symint())
      return record_op(graph::Op::kCallFunction, op_fn("getitem"), "", {obj, specialize_sizes(idx)}, {});
    return record_op(graph::Op::kCallFunction, op_fn("getitem"), "", {obj, idx}, {});
  }
  if (obj->kind == VarKind::kObject && obj->source && PyTuple_Check(obj->obj.get()) && !PyTuple_CheckExact(obj->obj.get()) && idx->is_const() &&
      PyLong_Check(idx->obj.get())) {  // p[0] on a namedtuple the frame was given: that item, by its source
    Py_ssize_t n = PyTuple_GET_SIZE(obj->obj.get()), i = PyLong_AsSsize_t(idx->obj.get());
    if (i < 0) i += n;
    guard(obj->source, GuardLeaf::kLen, nullptr, n);
    if (i < 0 || i >= n) unsupported("tuple index out of range (IndexError)");
    return wrap(PyTuple_GET_ITEM(obj->obj.get(), i), item_source(obj->source, static_cast<int>(i)));
  }
  if (is_deque(obj) && !(idx->is_const() && PyLong_Check(idx->obj.get()))) unsupported("a deque indexed by something other than an int");
  if ((obj->kind == VarKind::kTuple || obj->kind == VarKind::kList) && (idx->is_symint() || idx->kind == VarKind::kSymSlice))
    return subscript(obj, make_const(concretize(idx).get()));  // which items: a size decides, guarded
  if (obj->kind == VarKind::kTuple || obj->kind == VarKind::kList) {
    if (!idx->is_const()) unsupported("indexing a " + std::string(kind_name(obj->kind)) + " with a non-constant");
    PyObject* i = idx->obj.get();
    Py_ssize_t n = static_cast<Py_ssize_t>(obj->items.size());
    if (PyLong_Check(i)) {
      Py_ssize_t k = PyLong_AsSsize_t(i);
      if (k < 0) k += n;
      if (k < 0 || k >= n) raise_python(PyExc_IndexError, obj->kind == VarKind::kList ? "list index out of range" : "tuple index out of range");
      return obj->items[k];
    }
    if (PySlice_Check(i)) {
      Py_ssize_t start, stop, step, len;
      if (PySlice_GetIndicesEx(i, n, &start, &stop, &step, &len) < 0) unsupported(take_python_error());
      std::vector<VarPtr> out;
      for (Py_ssize_t k = 0, p = start; k < len; ++k, p += step) out.push_back(obj->items[p]);
      VarPtr r = make_seq(obj->kind == VarKind::kTuple ? VarKind::kTuple : VarKind::kList, out);
      if (obj->kind == VarKind::kTuple && obj->obj && obj->obj.get() == module_attr("torch", "Size"))
        r->obj = obj->obj;  // a slice of a torch.Size is a torch.Size (of a namedtuple, a tuple)
      return r;
    }
    unsupported("index of type " + std::string(Py_TYPE(i)->tp_name));
  }
  if (obj->kind == VarKind::kDict) {
    return call_container(obj, "__getitem__", {idx});
  }
  if (VarPtr r = existing_dict_lookup(obj, "__getitem__", {idx})) return r;
  if (obj->kind == VarKind::kObject && obj->source && idx->is_const() && PySlice_Check(idx->obj.get()) &&
      PyObject_TypeCheck(obj->obj.get(), reinterpret_cast<PyTypeObject*>(g_torch.module_list_type)))
    return module_list_slice(obj, idx->obj.get());
  if (obj->kind == VarKind::kObject || obj->kind == VarKind::kNewObject) {
    PyTypeObject* t = obj->kind == VarKind::kObject ? Py_TYPE(obj->obj.get()) : reinterpret_cast<PyTypeObject*>(obj->obj.get());
    PyRef gi_name = PyRef::steal(PyUnicode_FromString("__getitem__"));
    PyObject* gi = _PyType_Lookup(t, gi_name.get());
    if (gi && PyFunction_Check(gi)) return inline_function(gi, nullptr, {obj, idx}, {}, nullptr);
    if (keeps_dict_method(obj, gi_name.get(), gi)) return subscript(dict_contents(obj), idx);
    if (obj->kind == VarKind::kNewObject && obj->self) return subscript(obj->self, idx);
  }
  if (obj->is_const() || obj->kind == VarKind::kObject) return fold(op_fn("getitem"), {obj, idx}, {});
  unsupported(std::string("indexing a ") + kind_name(obj->kind));
}

// d.get(k[, default]), d[k] and `k in d` on a dict the frame reaches (a module's table keyed by
// class, as copy's and copyreg's dispatch tables are), with a key hashed by value (a constant) or
// by identity (a class, a plain object): only that entry is read, guarded through its source (its
// value, or its absence), so the answer holds while the entry does. Null for other dicts, keys
// and calls: the caller goes on as before.
VarPtr Interpreter::existing_dict_lookup(const VarPtr& d, const std::string& name, const std::vector<VarPtr>& args) {
  if (d->kind != VarKind::kObject || !d->source || !PyDict_CheckExact(d->obj.get()) || is_trace_value(d->obj.get())) return nullptr;
  if (!(name == "get" && (args.size() == 1 || args.size() == 2)) && !((name == "__getitem__" || name == "__contains__") && args.size() == 1))
    return nullptr;
  const VarPtr& k = args[0];
  PyObject* key = nullptr;
  if (k->is_const()) {
    refuse_fake_ids(k, "as a key of an existing dict");
    key = k->obj.get();
  } else if (k->kind == VarKind::kObject && !k->fresh) {
    PyTypeObject* t = Py_TYPE(k->obj.get());
    const bool identity_hashed = t == &PyType_Type || (t->tp_hash == PyBaseObject_Type.tp_hash && t->tp_richcompare == PyBaseObject_Type.tp_richcompare);
    if (!identity_hashed) return nullptr;
    key = identity(k);
  } else {
    return nullptr;
  }
  PyObject* v = PyDict_GetItemWithError(d->obj.get(), key);
  if (!v && PyErr_Occurred()) unsupported("dict lookup raised " + take_python_error());
  if (name == "__contains__") {
    guard(d->source, v ? GuardLeaf::kHasKey : GuardLeaf::kLacksKey, key);
    return make_const(v ? Py_True : Py_False);
  }
  if (v) return wrap(v, dict_item_source(d->source, key));
  guard(d->source, GuardLeaf::kLacksKey, key);
  if (name == "get") return args.size() == 2 ? args[1] : make_const(Py_None);
  raise_python(PyExc_KeyError, key);
}

VarPtr Interpreter::contains(const VarPtr& item, const VarPtr& container) {
  if (VarPtr r = existing_dict_lookup(container, "__contains__", {item})) return r;
  if (container->kind == VarKind::kObject) {
    PyRef contains_name = PyRef::steal(PyUnicode_FromString("__contains__"));
    if (keeps_dict_method(container, contains_name.get(), _PyType_Lookup(Py_TYPE(container->obj.get()), contains_name.get())))
      return contains(item, dict_contents(container));
  }
  if (container->kind == VarKind::kObject && is_trace_value(container->obj.get()) && PyAnySet_Check(container->obj.get())) {
    PyRef member = set_member(item);  // set membership hashes objects and tensors by identity
    if (!member) unsupported(std::string("`in` of a ") + kind_name(item->kind) + " in a set");
    int r = PySequence_Contains(container->obj.get(), member.get());
    if (r < 0) raise_pending_python_error("`in` a set");
    return make_const(r ? Py_True : Py_False);
  }
  if (container->is_tensor() || item->is_tensor()) unsupported("`in` with a tensor depends on its data");
  if (container->kind == VarKind::kNewObject) {
    PyObject* c = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(container->obj.get()), PyRef::steal(PyUnicode_FromString("__contains__")).get());
    if (c && PyFunction_Check(c)) return inline_function(c, nullptr, {container, item}, {}, nullptr);
    if (container->self) return contains(item, container->self);
    unsupported("`in` on a new object");
  }
  if (container->kind == VarKind::kDictView) {
    if (container->name == "keys") return contains(item, container->self);
    if (container->name == "items") {  // (key, value) in d.items(): the key is there and its value equals
      std::vector<VarPtr> kv;
      if (item->is_const() && PyTuple_Check(item->obj.get()) && PyTuple_GET_SIZE(item->obj.get()) == 2)
        kv = {make_const(PyTuple_GET_ITEM(item->obj.get(), 0)), make_const(PyTuple_GET_ITEM(item->obj.get(), 1))};
      else if (item->kind == VarKind::kTuple && item->items.size() == 2)
        kv = item->items;
      else
        return make_const(Py_False);
      if (!truthy(contains(kv[0], container->self))) return make_const(Py_False);
      return compare(Py_EQ, call_container(container->self, "__getitem__", {kv[0]}), kv[1]);
    }
    return contains(item, make_seq(VarKind::kList, unpack(container)));
  }
  if (container->kind == VarKind::kDict) {
    if (!item->is_const()) unsupported("`in` of a non-constant key");
    for (auto& k : container->keys) {
      int r = PyObject_RichCompareBool(k.get(), item->obj.get(), Py_EQ);
      if (r < 0) PyErr_Clear();
      if (r == 1) return make_const(Py_True);
    }
    return make_const(Py_False);
  }
  if (container->kind == VarKind::kTuple || container->kind == VarKind::kList) {
    for (auto& it : container->items) {
      bool eq;
      if (it->is_const() && item->is_const()) {
        int r = PyObject_RichCompareBool(it->obj.get(), item->obj.get(), Py_EQ);
        if (r < 0) PyErr_Clear();
        eq = r == 1;
      } else {
        bool known;
        eq = same_object(it, item, &known);
        if (!known) unsupported("`in` over values kiln cannot compare");
      }
      if (eq) return make_const(Py_True);
    }
    return make_const(Py_False);
  }
  return fold(op_fn("contains"), {container, item}, {});
}

}  // namespace kiln::frontend
