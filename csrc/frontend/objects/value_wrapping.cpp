// Turning the frame's real values into symbolic ones (VariableBuilder's job): each value read
// through a source gets the guards that make specialising on it sound.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- guards and wrapping

void Interpreter::guard(const SourcePtr& src, GuardLeaf::Kind kind, PyObject* obj, Py_ssize_t len) {
  if (!src || src->kind == Source::kConstant) return;
  const Source* root = src.get();
  while (root->parent) root = root->parent.get();
  if (root->kind == Source::kMade) {
    // Made anew for every run as the capture made it: nothing about it can differ, and no guard
    // could read it (guards run before it exists). Its identity differs on every run.
    if (kind == GuardLeaf::kId) unsupported("the identity of an object the graph's prologue makes (" + src->repr() + ")");
    return;
  }
  GuardLeaf leaf{kind};
  leaf.obj = PyRef::borrow(obj);
  leaf.length = len;
  // Identity guards do not keep their object alive (a module, a per-call object): a weak
  // reference where the type allows one. Functions, classes and modules all do.
  if (kind == GuardLeaf::kId && obj && PyType_SUPPORTS_WEAKREFS(Py_TYPE(obj))) {
    leaf.obj = PyRef::steal(PyWeakref_NewRef(obj, nullptr));
    if (leaf.obj) leaf.weak = true;
    else { PyErr_Clear(); leaf.obj = PyRef::borrow(obj); }
  }
  cap_.guards->add(src, std::move(leaf));
}

// Symbolic sizes and strides for the dimensions in `mask`: each size a symbol (shared with an
// earlier dynamic size of the same value: duck sizing), each stride that is the dense product of
// the sizes inside it that product as an expression, any other stride a constant.
void Interpreter::make_dynamic(TensorFacts& f, uint64_t mask, const std::string& source, int input,
                               std::vector<sym::Expr>& sizes, std::vector<sym::Expr>& strides) {
  sym::ShapeEnv& env = *cap_.shape_env;
  const size_t rank = f.sizes.size();
  f.size_symbol.assign(rank, -1);
  for (size_t d = 0; d < rank; ++d) {
    if (!(mask >> d & 1)) { sizes.push_back(sym::Expr::constant(f.sizes[d])); continue; }
    int s = env.symbol_with_hint(f.sizes[d]);
    if (s < 0) s = env.new_symbol(source + ".size(" + std::to_string(d) + ")", input, static_cast<int>(d), f.sizes[d]);
    f.size_symbol[d] = s;
    sizes.push_back(sym::Expr::symbol(s));
  }
  if (f.strides.size() != rank) return;
  std::vector<int> order(rank);
  for (size_t d = 0; d < rank; ++d) order[d] = static_cast<int>(rank - 1 - d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return f.strides[a] < f.strides[b]; });
  strides.assign(rank, sym::Expr());
  int64_t dense = 1;
  sym::Expr dense_expr = sym::Expr::constant(1);
  for (int d : order) {
    if (f.strides[d] == dense) {
      strides[d] = dense_expr;
    } else {
      strides[d] = sym::Expr::constant(f.strides[d]);
      dense = f.strides[d];
      dense_expr = strides[d];
    }
    dense *= f.sizes[d];
    dense_expr = dense_expr * sizes[d];
  }
  f.stride_expr = strides;
}

bool Interpreter::int_input_is_dynamic(PyObject* o, const SourcePtr& src) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (x == -1 && PyErr_Occurred())) { PyErr_Clear(); return false; }
  if (cap_.shape_env->symbols().size() >= SymbolBinding::kMax) return false;
  return choose_dynamic_int(src->repr(), x, opts_.dynamic, opts_.size_history, &cap_.dynamic_changes);
}

int Interpreter::add_input(const SourcePtr& src, PyObject* example, const std::string& meta) {
  const int node = cap_.graph->add_placeholder(src->placeholder_hint(), meta);
  cap_.inputs.push_back(src);
  cap_.example_inputs.push_back(PyRef::borrow(example));
  cap_.removable.push_back(false);
  return node;
}

// An int argument that varies between calls: a graph input of its own, standing for a symbol.
VarPtr Interpreter::symint_input(PyObject* o, const SourcePtr& src) {
  int64_t x = PyLong_AsLongLong(o);
  int s = cap_.shape_env->symbol_with_hint(x);
  if (s < 0) s = cap_.shape_env->new_symbol(src->repr(), static_cast<int>(cap_.inputs.size()), -1, x);
  auto v = std::make_shared<Var>(VarKind::kSymInt);
  v->source = src;
  v->fake = PyRef::steal(probe_make_symint(cap_.shape_env, sym::Expr::symbol(s)));
  if (!v->fake) unsupported("cannot make a symbolic int for " + src->repr() + ": " + take_python_error());
  meta_.set_symbolic();
  v->node = add_input(src, o, "int s" + std::to_string(s));
  guard(src, GuardLeaf::kSymInt, nullptr, s);
  return v;
}

// A tensor the frame was given, as a graph input (symbolic where its dimensions are dynamic),
// guarded by its facts; with `facts` given, they are handed out instead for the caller's guard
// (a numpy array taken as torch.from_numpy of it).
VarPtr Interpreter::tensor_input(PyObject* t, const SourcePtr& src, TensorFacts* facts) {
  auto v = std::make_shared<Var>(VarKind::kTensor);
  v->source = src;
  GuardLeaf leaf{GuardLeaf::kTensor};
  probe_read(t, &leaf.tensor);
  leaf.obj = PyRef::borrow(reinterpret_cast<PyObject*>(leaf.tensor.type));  // keeps the checked type alive
  uint64_t mask = 0;
  if (src->kind != Source::kConstant && cap_.shape_env->symbols().size() + leaf.tensor.sizes.size() <= SymbolBinding::kMax)
    mask = choose_dynamic_dims(t, src->repr(), leaf.tensor.sizes, opts_.dynamic, opts_.size_history, &cap_.dynamic_changes);
  if (mask) {
    std::vector<sym::Expr> sizes, strides;
    make_dynamic(leaf.tensor, mask, src->repr(), static_cast<int>(cap_.inputs.size()), sizes, strides);
    v->fake = PyRef::steal(leaf.tensor.strides.empty() ? nullptr : probe_make_symbolic_meta(t, cap_.shape_env, sizes, strides));
    meta_.set_symbolic();
  } else {
    v->fake = PyRef::steal(probe_make_meta(t));
  }
  v->device = PyRef::steal(probe_device(t));
  if (!v->fake || !v->device) unsupported("cannot make a meta tensor for " + src->repr() + ": " + take_python_error());
  v->node = add_input(src, t, probe_describe_tensor(mask ? v->fake.get() : t));
  input_tensors_[v->node] = t;
  if (probe_is_inference(t)) {  // handed over from a torch.inference_mode block (its tensor match guards it)
    v->inference = true;
    inference_nodes_.insert(v->node);
  }
  if (facts) *facts = std::move(leaf.tensor);
  else if (src->kind != Source::kConstant) cap_.guards->add(src, std::move(leaf));
  return v;
}

// A list or dict the frame was given is mutated: allowed (and written back after the graph) when
// kiln knows where to fetch it again and it is the only path to that object in this capture.
void Interpreter::note_container_mutation(const VarPtr& c, const std::string& what) {
  if (!c->source || c->fresh) return;  // made during this call: nothing outside sees it
  const std::string kind = kind_name(c->kind);
  const InputContainer* found = nullptr;
  for (const auto& ic : input_containers_)
    if (ic.var == c) found = &ic;
  if (!found || c->source->kind == Source::kConstant) unsupported("mutation of a shared " + kind + " (" + what + ") is a side effect");
  for (const auto& ic : input_containers_)
    if (ic.var != c && ic.object.get() == found->object.get()) unsupported("mutation of a " + kind + " the frame reaches two ways (" + what + ")");
  if (input_containers_.size() > 64) unsupported("mutation of a " + kind + " among too many input containers");
  for (const auto& m : mutated_containers_)
    if (m == c) return;
  mutated_containers_.push_back(c);
}

// Instances of user-defined classes that the frame was given are often made anew by every call (a
// KV cache, a dataclass of outputs) or are one of many alike (the twelve layers of a model, each
// compiled on its own when its forward has a graph break): guarding them by identity would
// recompile each time. nn.Modules are among them: their parameters and buffers are graph inputs
// fetched from the instance, their hook dicts and forward are guarded where a call inlines them.
// Instances of built-in classes handed in the same way (an io.StringIO a resume function takes
// from the stack on its way to print()) likewise. Other callables, and objects reached from
// globals and closures (registries, sentinels), are guarded by identity, which lets the capture
// use them freely.
bool Interpreter::guard_by_type(PyObject* o, const SourcePtr& src) {
  if (PyType_Check(o) || PyModule_Check(o) ||
      (PyCallable_Check(o) && !is_module_instance(o)) || PyAnySet_Check(o))
    return false;
  const Source* root = src.get();
  while (root->parent) root = root->parent.get();
  return root->kind == Source::kLocal;
}

PyObject* Interpreter::identity(const VarPtr& v) {
  if (v->type_guarded) {
    guard(v->source, GuardLeaf::kId, v->obj.get());
    v->type_guarded = false;
  }
  return v->obj.get();
}

VarPtr Interpreter::wrap_unguarded(PyObject* o, const std::string& label) {
  if (probe_is_tensor(o)) return tensor_input(o, constant_source(o, label));
  return from_python_value(o, /*shared=*/true);
}

// Where a float that changes between calls becomes a graph input (dynamic_floats.cpp): a frame
// argument, a global, an attribute of an object (a temperature annealed on the module), an item
// of a list or dict (an optimizer's param_groups[0]['lr']) or a closure cell; not a class
// attribute or a constant held by the source.
static bool float_source_may_vary(Source::Kind k) {
  return k == Source::kLocal || k == Source::kGlobal || k == Source::kInstanceAttr || k == Source::kItem || k == Source::kDictItem ||
         k == Source::kClosureCell;
}

VarPtr Interpreter::wrap(PyObject* o, const SourcePtr& src) {
  if (!src) return wrap_unguarded(o, "value");
  auto memo = wrapped_.find(src->repr());
  if (memo != wrapped_.end()) return memo->second;
  VarPtr v;
  if (probe_is_tensor(o)) {
    v = tensor_input(o, src);
  } else if ((v = ndarray_input(o, src))) {
  } else if ((src->kind == Source::kLocal || src->kind == Source::kInstanceAttr) && PyLong_CheckExact(o) && int_input_is_dynamic(o, src)) {
    // An int argument, or an int attribute of an object the frame reaches (a cache's length that
    // grows every call: transformers' sliding-window layers keep `cumulative_length`), is
    // symbolic once it was seen to change, as Dynamo's automatic dynamic ints.
    v = symint_input(o, src);
  } else if (PyFloat_CheckExact(o) && float_source_may_vary(src->kind) &&
             choose_dynamic_float(src->repr(), PyFloat_AS_DOUBLE(o), opts_.dynamic, opts_.size_history, &cap_.dynamic_changes)) {
    v = float_input(o, src);
  } else if (is_constant_like(o)) {
    guard(src, GuardLeaf::kEquals, o);
    v = make_const(o);
  } else if ((PyList_CheckExact(o) || PyTuple_CheckExact(o)) && PySequence_Fast_GET_SIZE(o) <= 512) {
    guard(src, GuardLeaf::kType, reinterpret_cast<PyObject*>(Py_TYPE(o)));
    guard(src, GuardLeaf::kLen, nullptr, PySequence_Fast_GET_SIZE(o));
    v = make_seq(PyList_CheckExact(o) ? VarKind::kList : VarKind::kTuple, {});
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
      v->items.push_back(wrap(PySequence_Fast_GET_ITEM(o, i), item_source(src, static_cast<int>(i))));
    if (v->kind == VarKind::kList) input_containers_.push_back({v, PyRef::borrow(o)});
  } else if (PyDict_CheckExact(o) && PyDict_GET_SIZE(o) <= 512) {
    PyRef keys = PyRef::steal(PyDict_Keys(o));
    bool const_keys = true;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i)
      const_keys &= PyUnicode_CheckExact(PyList_GET_ITEM(keys.get(), i)) || PyLong_CheckExact(PyList_GET_ITEM(keys.get(), i));
    if (const_keys) {
      PyRef kt = PyRef::steal(PyList_AsTuple(keys.get()));
      guard(src, GuardLeaf::kDictKeys, kt.get());
      v = std::make_shared<Var>(VarKind::kDict);
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(keys.get()); ++i) {
        PyObject* k = PyList_GET_ITEM(keys.get(), i);
        v->keys.push_back(PyRef::borrow(k));
        v->items.push_back(wrap(PyDict_GetItem(o, k), dict_item_source(src, k)));
      }
      input_containers_.push_back({v, PyRef::borrow(o)});
    }
  } else if (Py_IS_TYPE(o, reinterpret_cast<PyTypeObject*>(module_attr("collections", "OrderedDict"))) && PyDict_GET_SIZE(o) == 0) {
    // An empty OrderedDict (nn.Module's global registration hooks, a hook dict): read as an empty
    // dict of that type. Not an input container, so a mutation is refused rather than written
    // back past OrderedDict's own bookkeeping.
    guard(src, GuardLeaf::kType, reinterpret_cast<PyObject*>(Py_TYPE(o)));
    guard(src, GuardLeaf::kLen, nullptr, 0);
    v = std::make_shared<Var>(VarKind::kDict);
    v->obj = PyRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
  }
  if (!v && guard_by_type(o, src)) {
    guard(src, GuardLeaf::kType, reinterpret_cast<PyObject*>(Py_TYPE(o)));
    v = make_object(o, src);
    v->type_guarded = true;
  }
  if (!v) {
    guard(src, GuardLeaf::kId, o);
    v = make_object(o, src);
  }
  v->source = src;
  wrapped_[src->repr()] = v;
  return v;
}

PyRef Interpreter::call_on_python_values(PyObject* f, const std::vector<VarPtr>& args,
                                         const std::vector<std::pair<std::string, VarPtr>>& kwargs, const char* context) {
  PyRef t = PyRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; i < args.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), as_python(args[i]).release());
  PyRef kw = PyRef::steal(PyDict_New());
  for (const auto& [k, v] : kwargs) PyDict_SetItemString(kw.get(), k.c_str(), as_python(v).get());
  PyRef r = PyRef::steal(PyObject_Call(f, t.get(), kw.get()));
  if (!r) raise_pending_python_error(context ? context : "constant evaluation of " + py_repr(f).substr(0, 60));
  return r;
}

PyRef Interpreter::as_python(const VarPtr& v, bool fake_tensors) {
  switch (v->kind) {
    case VarKind::kTensor: return fake_tensors ? v->fake : PyRef();
    case VarKind::kSymInt: return fake_tensors && !v->flag ? v->fake : concretize(v);
    case VarKind::kSymSlice: return fake_tensors ? v->fake : concretize(v);
    case VarKind::kConst: return v->obj;
    case VarKind::kObject: return PyRef::borrow(identity(v));
    case VarKind::kTuple:
    case VarKind::kList: {
      if (is_deque(v)) return PyRef();  // a plain list does not stand for a deque
      PyRef out = PyRef::steal(v->kind == VarKind::kTuple ? PyTuple_New(v->items.size()) : PyList_New(v->items.size()));
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i], fake_tensors);
        if (!it) return PyRef();
        if (v->kind == VarKind::kTuple) PyTuple_SET_ITEM(out.get(), i, it.release());
        else PyList_SET_ITEM(out.get(), i, it.release());
      }
      if (v->kind == VarKind::kTuple && v->obj && v->obj.get() == module_attr("torch", "Size"))
        return PyRef::steal(PyObject_CallOneArg(v->obj.get(), out.get()));
      return out;
    }
    case VarKind::kDict: {
      PyRef out = PyRef::steal(PyDict_New());
      for (size_t i = 0; i < v->items.size(); ++i) {
        PyRef it = as_python(v->items[i], fake_tensors);
        if (!it) return PyRef();
        PyDict_SetItem(out.get(), v->keys[i].get(), it.get());
      }
      if (v->obj && v->self) return PyRef::steal(PyObject_CallFunctionObjArgs(v->obj.get(), v->self->obj.get(), out.get(), nullptr));  // defaultdict
      if (v->obj) return PyRef::steal(PyObject_CallOneArg(v->obj.get(), out.get()));  // an OrderedDict made here
      return out;
    }
    default: return PyRef();
  }
}

// ---------------------------------------------------------------- dict-subclass instances

// The builtin class (dict or OrderedDict) a heap dict subclass is laid out as, or null.
static PyTypeObject* dict_base(PyTypeObject* t) {
  PyTypeObject* b = builtin_base(t);
  return b == &PyDict_Type || b == &PyODict_Type ? b : nullptr;
}

bool Interpreter::keeps_dict_method(const VarPtr& obj, PyObject* name, PyObject* found) {
  if (obj->kind != VarKind::kObject || !obj->source || obj->fresh || !PyDict_Check(obj->obj.get()) || PyDict_CheckExact(obj->obj.get()))
    return false;
  static const char* reads[] = {"keys", "items", "values", "get", "__getitem__", "__contains__", "__len__", "__iter__"};
  bool read = false;
  for (const char* r : reads) read |= PyUnicode_CompareWithASCIIString(name, r) == 0;
  PyTypeObject* base = dict_base(Py_TYPE(obj->obj.get()));
  return read && base && found && found == _PyType_Lookup(base, name);
}

VarPtr Interpreter::dict_contents(const VarPtr& obj) {
  auto memo = dict_contents_.find(obj.get());
  if (memo != dict_contents_.end()) return memo->second.second;
  PyObject* o = obj->obj.get();
  PyTypeObject* base = dict_base(Py_TYPE(o));
  if (!base) unsupported(std::string("the contents of a ") + Py_TYPE(o)->tp_name);
  // Keys in the builtin's own order (an OrderedDict's links), as its keys() gives them.
  PyRef it = PyRef::steal(base->tp_iter(o));
  PyRef keys = PyRef::steal(it ? PySequence_Tuple(it.get()) : nullptr);
  if (!keys) unsupported(std::string("the keys of a ") + Py_TYPE(o)->tp_name + ": " + take_python_error());
  auto d = std::make_shared<Var>(VarKind::kDict);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys.get()); ++i) {
    PyObject* k = PyTuple_GET_ITEM(keys.get(), i);
    if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k)) unsupported(std::string("a ") + Py_TYPE(o)->tp_name + " with a key that is not a str or int");
    PyObject* v = PyDict_GetItemWithError(o, k);
    if (!v) unsupported(std::string("the contents of a ") + Py_TYPE(o)->tp_name + ": " + take_python_error());
    d->keys.push_back(PyRef::borrow(k));
    d->items.push_back(wrap(v, dict_item_source(obj->source, k)));
  }
  guard(obj->source, GuardLeaf::kDictKeys, keys.get());
  // Read-only: a mutation is refused (it is no container kiln writes back), and handing it back
  // as itself is refused too (make_template, through its owner).
  d->source = constant_source(Py_None, std::string("contents of a ") + Py_TYPE(o)->tp_name + " the frame was given");
  d->owner = obj;
  dict_contents_[obj.get()] = {obj, d};
  return d;
}

// ---------------------------------------------------------------- trace-time values

bool Interpreter::trace_value_type(PyObject* o) {
  if (PySet_CheckExact(o)) return true;
  PyObject* t = reinterpret_cast<PyObject*>(Py_TYPE(o));
  return t == module_attr("collections", "deque") || t == module_attr("collections", "defaultdict") ||
         t == module_attr("collections", "OrderedDict") || t == module_attr("collections", "Counter") ||
         t == module_attr("itertools", "count") || t == module_attr("itertools", "repeat");
}

VarPtr Interpreter::trace_value(PyObject* o) {
  if (trace_values_.insert(o).second) trace_owned_.push_back(PyRef::borrow(o));
  VarPtr v = make_object(o, nullptr);
  v->fresh = true;
  return v;
}

// Constants, and tuples, lists and dicts of them: values a pure function can be evaluated on now
// (objects are left out: what a function reads of them is not guarded).
static bool plain_value(const VarPtr& v, int depth = 0) {
  if (v->is_const() || v->is_symint() || v->kind == VarKind::kSymSlice) return true;
  if (v->kind == VarKind::kObject && v->fresh && !v->source) return true;  // a trace-time value
  if (depth > 8 || (v->kind != VarKind::kTuple && v->kind != VarKind::kList && v->kind != VarKind::kDict)) return false;
  for (const auto& it : v->items)
    if (!plain_value(it, depth + 1)) return false;
  return true;
}

PyRef Interpreter::set_member(const VarPtr& v) {
  refuse_fake_ids(v, "as a member of a set");
  if (plain_value(v)) return as_python(v);
  if (v->kind == VarKind::kObject) return PyRef::borrow(identity(v));
  if (v->is_tensor() && v->source && v->source->kind != Source::kMade) {  // an input: by its object
    auto in = input_tensors_.find(v->node);
    if (in == input_tensors_.end()) return PyRef();
    auto& sources = member_sources_[in->second];
    if (std::none_of(sources.begin(), sources.end(), [&](const SourcePtr& s) { return s->repr() == v->source->repr(); }))
      sources.push_back(v->source);
    PyRef& token = input_tokens_[in->second];
    if (!token) token = PyRef::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
    return token;
  }
  bool by_identity = v->is_tensor() && (!v->source || v->source->kind == Source::kMade);
  if (v->kind == VarKind::kNewObject) {
    auto* t = reinterpret_cast<PyTypeObject*>(v->obj.get());
    by_identity = t->tp_hash == PyBaseObject_Type.tp_hash && t->tp_richcompare == PyBaseObject_Type.tp_richcompare;
  }
  if (!by_identity) return PyRef();
  auto it = tokens_.find(v.get());
  if (it != tokens_.end()) return it->second;
  PyRef token = PyRef::steal(PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type)));
  tokens_[v.get()] = token;
  token_vars_[token.get()] = v;
  return token;
}

bool Interpreter::holds_token(PyObject* o) const {
  if (token_vars_.empty() || !PyAnySet_Check(o)) return false;
  for (const auto& [token, var] : token_vars_)
    if (PySet_Contains(o, token) == 1) return true;
  return false;
}

bool Interpreter::all_python_values(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  for (const auto& a : args)
    if (!plain_value(a)) return false;
  for (const auto& kv : kwargs)
    if (!plain_value(kv.second)) return false;
  return true;
}

bool Interpreter::all_const(const std::vector<VarPtr>& vs) {
  for (const auto& v : vs)
    if (!v->is_const()) return false;
  return true;
}

}  // namespace kiln::frontend
