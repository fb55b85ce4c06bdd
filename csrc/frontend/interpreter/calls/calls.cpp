// Calls, by what is called: tensor methods (recorded into the graph), container and bound methods,
// nested functions, partials, the exits of with-blocks, objects made during the capture, and the
// long tail of Python callables (torch operators, library functions and builtins, nn.Modules and
// user functions, types, functools, contexts). Interpreter::call dispatches; builtins.cpp and
// library_calls.cpp interpret what they know, inlining.cpp runs Python code.
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"
#include "frontend/hook/frame_dispatch.h"

namespace kiln::frontend {

// `x.addcdiv_(a, b, value=v)` / addcmul and `x.add_(y, alpha=v)` / sub (and the out-of-place
// forms) whose scalar is a graph value: a 0-d tensor (optimizers pass their step size as one under
// compilers; eager reads it with .item()) or a dynamic float (the lr a scheduler changes every
// step, which otherwise recompiled per value). The product is computed first and added, the
// arithmetic ATen does (its fused kernel may round the last place differently), without the read.
// add/sub take a dynamic float only among floating-point tensors: eager refuses a float alpha
// with integer ones.
VarPtr Interpreter::scalar_keyword_operand(const VarPtr& fn, const std::vector<VarPtr>& args,
                                           const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  const std::string& m = fn->name;
  const bool addc = m == "addcdiv" || m == "addcdiv_" || m == "addcmul" || m == "addcmul_";
  const bool add = m == "add" || m == "add_" || m == "sub" || m == "sub_";
  if ((!addc && !add) || args.size() != (addc ? 2u : 1u) || kwargs.size() != 1 || kwargs[0].first != (addc ? "value" : "alpha")) return nullptr;
  const VarPtr& v = kwargs[0].second;
  const bool inplace = m.back() == '_';
  if (add) {
    auto floating = [](const VarPtr& t) {
      if (!t->is_tensor()) return false;
      PyRef dtype = PyRef::steal(PyObject_GetAttrString(t->fake.get(), "dtype"));
      PyRef fp = dtype ? PyRef::steal(PyObject_GetAttrString(dtype.get(), "is_floating_point")) : PyRef();
      PyErr_Clear();
      return fp && fp.get() == Py_True;
    };
    if (!v->float_tensor || !floating(fn->self) || !floating(args[0])) return nullptr;
    VarPtr prod = record_op(graph::Op::kCallMethod, nullptr, "mul", {args[0], v}, {});
    return record_op(graph::Op::kCallMethod, nullptr, m.substr(0, 3) + (inplace ? "_" : ""), {fn->self, prod}, {});
  }
  if (!v->is_tensor() && !v->float_tensor) return nullptr;
  VarPtr prod = record_op(graph::Op::kCallMethod, nullptr, m.compare(0, 7, "addcdiv") == 0 ? "div" : "mul", {args[0], args[1]}, {});
  prod = record_op(graph::Op::kCallMethod, nullptr, "mul", {prod, v}, {});
  return record_op(graph::Op::kCallMethod, nullptr, inplace ? "add_" : "add", {fn->self, prod}, {});
}

bool is_dynamo_generation_tag(PyObject* fn) {
  auto* code = reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn));
  return py_str(code->co_qualname) == "GenerationTracker.tag" && py_str(code->co_filename).find("/torch/_dynamo/") != std::string::npos;
}

VarPtr Interpreter::call(const VarPtr& fn, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  switch (fn->kind) {
    case VarKind::kTensorMethod: {
      if (fn->name == "type") return tensor_type_method(fn->self, args, kwargs);
      if (fn->name == "is_inference" && args.empty() && kwargs.empty()) return make_const(fn->self->inference ? Py_True : Py_False);
      if (fn->name == "numpy") {
        if (!args.empty() || !(kwargs.empty() || (kwargs.size() == 1 && kwargs[0].first == "force" && kwargs[0].second->is_const() &&
                                                   kwargs[0].second->obj.get() == Py_False)))
          unsupported("tensor.numpy() with arguments");
        return tensor_to_ndarray(fn->self);
      }
      if (VarPtr r = scalar_keyword_operand(fn, args, kwargs)) return r;
      std::vector<VarPtr> full{fn->self};
      full.insert(full.end(), args.begin(), args.end());
      return record_op(graph::Op::kCallMethod, nullptr, fn->name, full, kwargs);
    }
    case VarKind::kContainerMethod:
      if (fn->self && fn->self->kind == VarKind::kGenFrame) return generator_method(fn->self, fn->name, args, kwargs);
      if (fn->self && fn->self->kind == VarKind::kNdarray) return ndarray_method(fn->self, fn->name, std::move(args), std::move(kwargs));
      return call_container_method(fn, args, kwargs);
    case VarKind::kBoundMethod: {
      // os.environ lookups (`os.environ.get(k, d)`, `k in os.environ`) are read as constants, as
      // Dynamo does: Mapping.get would otherwise raise KeyError inside the capture.
      if (fn->self->kind == VarKind::kObject && fn->self->obj.get() == module_attr("os", "environ") && all_const(args) && kwargs.empty()) {
        PyRef name = PyRef::steal(PyObject_GetAttrString(fn->obj.get(), "__name__"));
        if (name && (py_str(name.get()) == "get" || py_str(name.get()) == "__contains__" || py_str(name.get()) == "__getitem__"))
          return fold(PyRef::steal(PyObject_GetAttr(fn->self->obj.get(), name.get())).get(), args, {});
        PyErr_Clear();
      }
      // Counter.most_common, Counter.update...: the stdlib's own code, run for real on a
      // trace-time value and Python values.
      if (fn->self->kind == VarKind::kObject && is_trace_value(fn->self->obj.get()) && PyFunction_Check(fn->obj.get())) {
        if (!all_python_values(args, kwargs)) unsupported(py_repr(fn->obj.get()).substr(0, 60) + " with values that are not Python constants");
        PyRef bound = PyRef::steal(PyMethod_New(fn->obj.get(), fn->self->obj.get()));
        VarPtr r = fold(bound.get(), args, kwargs);
        if (r->kind == VarKind::kObject && (PyDictKeys_Check(r->obj.get()) || PyDictValues_Check(r->obj.get()) || PyDictItems_Check(r->obj.get())))
          return trace_value(r->obj.get());
        return r;
      }
      args.insert(args.begin(), fn->self);
      if (PyFunction_Check(fn->obj.get())) {
        if (is_torch_op(fn->obj.get())) return record_op(graph::Op::kCallFunction, fn->obj.get(), "", args, kwargs);
        return inline_function(fn->obj.get(), nullptr, std::move(args), std::move(kwargs), nullptr);
      }
      unsupported("call of a bound " + py_repr(fn->obj.get()));
    }
    case VarKind::kNestedFunction: return inline_function(nullptr, fn, std::move(args), std::move(kwargs), nullptr);
    case VarKind::kPartial: {  // the bound arguments first; keywords given to the call win
      std::vector<VarPtr> full(fn->items.begin(), fn->items.begin() + static_cast<long>(fn->pos));
      full.insert(full.end(), args.begin(), args.end());
      std::vector<std::pair<std::string, VarPtr>> kw;
      for (size_t i = 0; i < fn->keys.size(); ++i) {
        std::string k = py_str(fn->keys[i].get());
        bool overridden = false;
        for (auto& kv : kwargs) overridden |= kv.first == k;
        if (!overridden) kw.emplace_back(k, fn->items[fn->pos + i]);
      }
      kw.insert(kw.end(), kwargs.begin(), kwargs.end());
      return call(fn->self, std::move(full), std::move(kw));
    }
    case VarKind::kGradModeExit: {
      if (fn->name == "inference") {
        leave_inference_mode(fn->flag);
        return make_const(Py_False);
      }
      if (fn->name != "no-op") record_grad_mode(fn->flag);
      return make_const(Py_None);
    }
    case VarKind::kAutocastExit:
      exit_autocast(fn);
      return make_const(Py_False);
    case VarKind::kGenContext: {  // tag("block"): the context, not yet entered
      if (fn->flag) unsupported("call of an entered-or-made @contextmanager context");
      auto c = std::make_shared<Var>(VarKind::kGenContext);
      c->flag = true;
      c->self = fn->self;
      c->items = std::move(args);
      for (auto& [k, v] : kwargs) {
        c->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
        c->items.push_back(v);
      }
      c->pos = c->items.size() - c->keys.size();
      return c;
    }
    case VarKind::kGenContextExit: {
      for (const auto& a : args)
        if (!a->is_const() || a->obj.get() != Py_None) unsupported("a @contextmanager's __exit__ with an exception");
      return exit_generator_context(fn);
    }
    case VarKind::kNewObject: return call_new_object(fn, std::move(args), std::move(kwargs));
    case VarKind::kConst:
    case VarKind::kObject: break;
    default: unsupported(std::string("call of a ") + kind_name(fn->kind));
  }
  PyObject* f = fn->obj.get();
  if (PyObject* inner = unwrap_compiled_function(f))  // a kiln.compile'd callable: capture through it
    return call(wrap_unguarded(inner, "compiled"), std::move(args), std::move(kwargs));
  if (f == module_attr("torch._C", "_group_tensors_by_device_and_dtype")) return group_tensors_by_device_and_dtype(args, kwargs);
  // Sizes stay symbolic into torch operators, inlined Python and builtins that only look at a
  // container's structure (`len(x.shape)`, `tuple(x.shape)`); any other callee (math, library
  // code run as is) sees the captured value, guarded.
  static const char* structural[] = {"len", "isinstance", "issubclass", "type", "tuple", "list", "callable", "hasattr", "getattr", "id"};
  bool keep_symbolic = is_torch_op(f) || PyFunction_Check(f) || PyMethod_Check(f) || is_module_instance(f);
  for (const char* n : structural) keep_symbolic |= f == builtin(n);
  if ((f == builtin("min") || f == builtin("max")) && kwargs.empty() && args.size() >= 2 &&
      std::any_of(args.begin(), args.end(), [](const VarPtr& a) { return a->is_symint(); }) &&
      std::all_of(args.begin(), args.end(), [&](const VarPtr& a) { return is_numeric(a); })) {
    // min/max of numbers, a symbolic size among them (max(cache_len - window, 0)): each
    // comparison a shape guard on how the sizes relate, so the graph serves every size on the
    // same side; specialising the sizes below instead cost a recompile per length. Python's
    // pick: the first of equals.
    VarPtr best = args[0];
    for (size_t i = 1; i < args.size(); ++i)
      if (truthy(compare(f == builtin("max") ? Py_GT : Py_LT, args[i], best))) best = args[i];
    return best;
  }
  if (!keep_symbolic && kwargs.empty())
    if (VarPtr r = float_math(f, args)) return r;  // math.sqrt(t), float(t) of a dynamic float
  if (!keep_symbolic) {
    for (auto& a : args) a = specialize_sizes(a);
    for (auto& kv : kwargs) kv.second = specialize_sizes(kv.second);
  }
  if (int prev_grad = inference_mode_exit(f); prev_grad >= 0) {
    // leaving an inference_mode block a graph break entered: the graph computes outside it from
    // here, and the guard that break pushed is popped after the graph (Capture::pop_inference_after)
    if (!inference_ || !initial_inference_ || cap_.pop_inference_after > 0) unsupported("leaving an inference_mode block kiln did not see entered");
    leave_inference_mode(prev_grad == 1);
    cap_.pop_inference_after++;
    return make_const(Py_False);
  }
  if (is_autocast_exit_at_break(f)) unsupported("leaving a torch.autocast block a graph break entered");
  if (f == module_attr("torch", "is_inference_mode_enabled") && args.empty() && kwargs.empty()) return make_const(inference_ ? Py_True : Py_False);
  if (int mode = grad_mode_restorer(f); mode >= 0) {  // leaving a with-block begun before a graph break
    if (mode != 2) record_grad_mode(mode == 1);
    return make_const(Py_None);
  }
  if (f == builtin("__build_class__")) return build_class(args, kwargs);
  if (f == module_attr("copy", "deepcopy") && args.size() == 1 && kwargs.empty() && args[0]->is_const()) {
    // deepcopy of an immutable atom (what dataclasses.asdict does to each field) is that very
    // object (copy's own rule); deepcopy's memo would otherwise ask for id() of the value.
    std::function<bool(PyObject*)> atomic = [&](PyObject* o) {
      if (PyTuple_CheckExact(o)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
          if (!atomic(PyTuple_GET_ITEM(o, i))) return false;
        return true;
      }
      return o == Py_None || o == Py_Ellipsis || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
             PyComplex_CheckExact(o) || PyUnicode_CheckExact(o) || PyBytes_CheckExact(o);
    };
    if (atomic(args[0]->obj.get())) return args[0];
  }
  if (f == builtin("vars") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kNewObject)
    return new_object_attr(args[0], PyRef::steal(PyUnicode_FromString("__dict__")).get());
  if (VarPtr r = numpy_call(f, args, kwargs)) return r;
  if (VarPtr r = tensor_from_ndarray(f, args, kwargs)) return r;
  {
    bool ndarray_arg = false;
    for (const auto& a : args) ndarray_arg |= a->kind == VarKind::kNdarray;
    for (const auto& kv : kwargs) ndarray_arg |= kv.second->kind == VarKind::kNdarray;
    if (ndarray_arg) {
      if (f == builtin("abs") && args.size() == 1 && kwargs.empty()) {
        PyRef absolute = PyRef::steal(PyObject_GetAttrString(PyDict_GetItemString(PyImport_GetModuleDict(), "numpy"), "absolute"));
        if (absolute) return call(make_object(absolute.get(), nullptr), std::move(args), std::move(kwargs));
        PyErr_Clear();
      }
      if (f == builtin("float") || f == builtin("int") || f == builtin("bool") || f == builtin("complex"))
        unsupported("data-dependent: " + py_repr(f) + " of a numpy value computed from tensors");
      if (f != builtin("isinstance") && f != builtin("type"))
        unsupported("a numpy array computed from tensors passed to " + py_repr(f).substr(0, 60));
    }
  }
  if (f == module_attr("contextlib", "contextmanager") && args.size() == 1 && kwargs.empty()) return context_manager_of(args[0]);
  if (PyObject* gen = contextmanager_generator(f))  // a call of a function decorated with @contextmanager
    return call(context_manager_of(wrap_unguarded(gen, "contextmanager function")), std::move(args), std::move(kwargs));
  bool handled = false;
  VarPtr r = call_library(f, args, kwargs, &handled);
  if (handled) return r;
  r = call_builtin(f, args, kwargs, &handled);
  if (handled) return r;
  if ((Py_IS_TYPE(f, &PyWrapperDescr_Type) || Py_IS_TYPE(f, &PyMethodDescr_Type)) && !args.empty() &&
      args[0]->kind == VarKind::kNewObject) {  // e.g. object.__setattr__(self, name, value)
    PyRef nm = PyRef::steal(PyObject_GetAttrString(f, "__name__"));
    VarPtr self = args[0];
    args.erase(args.begin());
    return call_container_method(make_container_method(self, py_str(nm.get())), args, kwargs);
  }
  if (PyObject* answer = torch_query_answer(f)) return answer == Py_Ellipsis ? fold(f, args, kwargs) : make_const(answer);
  if (f == module_attr("inspect", "signature") && args.size() == 1 && kwargs.empty()) {
    // A signature depends only on the function: of a bound method, on its __func__ (whose
    // identity the attribute lookup that produced it has guarded), whatever it is bound to.
    const VarPtr& a = args[0];
    if (a->kind == VarKind::kBoundMethod && PyFunction_Check(a->obj.get())) {
      PyRef bound = PyRef::steal(PyMethod_New(a->obj.get(), Py_True));
      PyRef sig = PyRef::steal(PyObject_CallOneArg(f, bound.get()));
      if (!sig) unsupported("inspect.signature raised " + take_python_error());
      return make_object(sig.get(), nullptr);
    }
  }
  if (is_module_instance(f)) return call_module(fn, std::move(args), std::move(kwargs));
  if (f == module_attr("torch.utils.checkpoint", "checkpoint") && !args.empty()) {
    // Activation checkpointing: the region is traced like any code; the values and gradients are
    // the function's own, and which activations the backward recomputes is the partitioner's
    // choice for the whole graph (its min-cut recomputes cheap ops anyway).
    static const char* options[] = {"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug"};
    std::vector<std::pair<std::string, VarPtr>> kept;
    for (auto& kv : kwargs)
      if (std::find(std::begin(options), std::end(options), kv.first) == std::end(options)) kept.push_back(kv);
    VarPtr inner = args[0];
    args.erase(args.begin());
    return call(inner, std::move(args), std::move(kept));
  }
  if (is_torch_op(f)) return record_op(graph::Op::kCallFunction, f, "", args, kwargs);
  // Once Dynamo has run in the process, nn.Module.__init__ ends by recording the module in
  // Dynamo's GenerationTracker (bookkeeping for Dynamo's own caches). A module built during
  // capture is not one Dynamo will see: nothing to record.
  if (PyFunction_Check(f) && !args.empty() && args.back()->kind == VarKind::kNewObject && is_dynamo_generation_tag(f)) return make_const(Py_None);
  if (PyFunction_Check(f) && py_str(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(f))->co_filename).find("/torch/_dynamo/") != std::string::npos) {
    // torch._disable_dynamo's wrapper (Optimizer.zero_grad, hooks PyTorch keeps out of graphs)
    // calls torch._dynamo.disable, then the function it made (DisableContext's _fn): nothing the
    // user compiled with torch.compile.
    if (f == module_attr("torch._dynamo", "disable") || qualname_of(f).find("DisableContext.") == 0)
      unsupported("call to a function PyTorch marks not to be compiled (torch._disable_dynamo, as it marks Optimizer.zero_grad); it runs eagerly");
    unsupported("call into torch.compile'd code (" + py_repr(f).substr(0, 60) + "); it runs under PyTorch's Dynamo");
  }
  if (PyFunction_Check(f)) {
    PyObject* disabled = PyObject_GetAttrString(f, "_kiln_disable");
    if (disabled) { Py_DECREF(disabled); unsupported("call to a function marked kiln.disable: " + py_repr(f)); }
    PyErr_Clear();
    return inline_function(f, nullptr, std::move(args), std::move(kwargs), fn->source);
  }
  if (PyMethod_Check(f)) {
    args.insert(args.begin(), wrap_unguarded(PyMethod_GET_SELF(f), "self"));
    return call(make_object(PyMethod_GET_FUNCTION(f), nullptr), std::move(args), std::move(kwargs));
  }
  if (f == module_attr("functools", "partial")) {  // partial(func, *args, **kwargs), kept symbolic
    if (args.empty()) unsupported("functools.partial() without a function");
    auto p = std::make_shared<Var>(VarKind::kPartial);
    p->self = args[0];
    p->items.assign(args.begin() + 1, args.end());
    p->pos = p->items.size();
    for (auto& [k, v] : kwargs) {
      p->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
      p->items.push_back(v);
    }
    p->fresh = true;
    return p;
  }
  if (Py_TYPE(f) == reinterpret_cast<PyTypeObject*>(module_attr("functools", "partial"))) {
    // An existing partial (its identity is guarded; its function and arguments are read-only):
    // called as the symbolic partial of its pieces.
    PyRef func = PyRef::steal(PyObject_GetAttrString(f, "func")), pargs = PyRef::steal(PyObject_GetAttrString(f, "args")),
          pkw = PyRef::steal(PyObject_GetAttrString(f, "keywords"));
    if (!func || !pargs || !pkw || !PyDict_Check(pkw.get())) unsupported("a functools.partial without func/args/keywords: " + take_python_error());
    auto p = std::make_shared<Var>(VarKind::kPartial);
    p->self = wrap_unguarded(func.get(), "partial function");
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs.get()); ++i) p->items.push_back(wrap_unguarded(PyTuple_GET_ITEM(pargs.get(), i), "partial argument"));
    p->pos = p->items.size();
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(pkw.get(), &pos, &k, &v)) {
      p->keys.push_back(PyRef::borrow(k));
      p->items.push_back(wrap_unguarded(v, "partial keyword"));
    }
    return call(p, std::move(args), std::move(kwargs));
  }
  if (Py_TYPE(f) == reinterpret_cast<PyTypeObject*>(module_attr("functools", "_lru_cache_wrapper"))) {
    // On plain Python values the cached answer is the answer (an lru_cache'd function is pure by
    // its author's word); on symbolic ones, the cache only saves work: call what it wraps.
    bool plain = true;
    for (const auto& a : args) plain &= !a->is_tensor() && static_cast<bool>(as_python(a));
    for (const auto& kv : kwargs) plain &= !kv.second->is_tensor() && static_cast<bool>(as_python(kv.second));
    for (const auto& a : args) refuse_fake_ids(a, "as an lru_cache key");
    for (const auto& kv : kwargs) refuse_fake_ids(kv.second, "as an lru_cache key");
    if (plain) {
      // A cached tensor (`torch.ones(n, n).tril()` by size) is traced through the wrapped function
      // instead, as Dynamo does (it ignores the cache): its ops go into the graph.
      PyRef r = call_on_python_values(f, args, kwargs);
      if (!probe_is_tensor(r.get())) return from_python_value(r.get(), Py_REFCNT(r.get()) > 1);
    }
    PyRef wrapped = PyRef::steal(PyObject_GetAttrString(f, "__wrapped__"));
    if (!wrapped) unsupported("an lru_cache wrapper without __wrapped__");
    return call(wrap_unguarded(wrapped.get(), "lru_cache'd function"), std::move(args), std::move(kwargs));
  }
  if (PyType_Check(f)) {
    if (f == module_attr("torch", "inference_mode")) {  // torch.inference_mode(mode=True)
      VarPtr mode = args.size() == 1 && kwargs.empty() ? args[0] : args.empty() && kwargs.size() == 1 && kwargs[0].first == "mode" ? kwargs[0].second : nullptr;
      if (!mode && !(args.empty() && kwargs.empty())) unsupported("torch.inference_mode() with these arguments");
      if (mode && !(mode->is_const() && PyBool_Check(mode->obj.get()))) unsupported("torch.inference_mode() with a mode that is not a constant bool");
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->name = "inference";
      v->flag = !mode || mode->obj.get() == Py_True;
      return v;
    }
    if (is_autocast_type(f) && all_python_values(args, kwargs)) {  // its settings, checked as eager does
      PyRef mode = call_on_python_values(f, args, kwargs, "torch.autocast(...)");
      return make_object(mode.get(), nullptr);
    }
    if (f == g_torch.no_grad || f == g_torch.enable_grad) {
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->flag = f == g_torch.enable_grad;
      return v;
    }
    // Contexts that change nothing the graph computes: a profiler range (the optimizers' step
    // opens one) and contextlib.nullcontext(enter_result).
    bool profiler_range = f == module_attr("torch.autograd.profiler", "record_function");
    if (profiler_range || (f == module_attr("contextlib", "nullcontext") && args.size() <= 1 && kwargs.empty())) {
      auto v = std::make_shared<Var>(VarKind::kGradMode);
      v->name = "no-op";
      v->self = profiler_range || args.empty() ? make_const(Py_None) : args[0];
      return v;
    }
    // Types whose instances are immutable values (torch.finfo(dtype): the dtype's constants).
    static const std::unordered_set<std::string> foldable = {"int", "float", "bool", "str", "complex", "slice", "range", "Size", "device", "dtype",
                                                             "finfo", "iinfo"};
    std::string tn = reinterpret_cast<PyTypeObject*>(f)->tp_name;
    auto dot = tn.rfind('.');
    if (foldable.count(dot == std::string::npos ? tn : tn.substr(dot + 1)) && all_python_values(args, kwargs))
      return fold(f, args, kwargs);  // immutable values from Python values (torch.Size([a, b]))
    // set(), frozenset(), deque(), Counter(), defaultdict(int), OrderedDict() of Python values:
    // built for real, as trace-time values (see Interpreter::is_trace_value).
    if (f == module_attr("collections", "deque")) return make_deque(args, kwargs);
    if (f == module_attr("collections", "OrderedDict")) {  // a symbolic dict that remembers its type
      bool handled = false;
      VarPtr d = call_builtin(builtin("dict"), args, kwargs, &handled);
      if (!handled || d->kind != VarKind::kDict) unsupported("OrderedDict() arguments");
      d->obj = PyRef::borrow(f);
      return d;
    }
    if (f == module_attr("collections", "defaultdict") && args.size() == 1 && kwargs.empty() && args[0]->kind == VarKind::kObject &&
        (args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyList_Type) || args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyLong_Type) ||
         args[0]->obj.get() == reinterpret_cast<PyObject*>(&PyFloat_Type))) {
      // defaultdict(list/int/float): a symbolic dict whose missing keys read as a new [] / 0 / 0.0
      auto d = std::make_shared<Var>(VarKind::kDict);
      d->fresh = true;
      d->obj = PyRef::borrow(f);
      d->self = args[0];
      return d;
    }
    static const char* collections_types[] = {"defaultdict", "Counter"};
    bool value_container = f == reinterpret_cast<PyObject*>(&PySet_Type) || f == reinterpret_cast<PyObject*>(&PyFrozenSet_Type);
    for (const char* n : collections_types) value_container |= f == module_attr("collections", n);
    value_container |= f == module_attr("itertools", "count") || f == module_attr("itertools", "repeat");  // unbounded: pulled only by zip() and next()
    if (value_container) {
      auto plain_or_factory = [&](const VarPtr& a) {  // defaultdict(int) / defaultdict(list)
        PyObject* o = a->kind == VarKind::kObject ? a->obj.get() : nullptr;
        return all_python_values({a}, {}) || (o && (o == reinterpret_cast<PyObject*>(&PyLong_Type) || o == reinterpret_cast<PyObject*>(&PyList_Type) ||
                                                    o == reinterpret_cast<PyObject*>(&PyFloat_Type) || o == reinterpret_cast<PyObject*>(&PySet_Type)));
      };
      for (auto& a : args)
        if (!plain_or_factory(a)) unsupported(std::string("a ") + tn + " of values that are not Python constants");
      if (!all_python_values({}, kwargs)) unsupported(std::string("a ") + tn + " of values that are not Python constants");
      return fold(f, args, kwargs);
    }
    if (VarPtr r = fold_numpy_scalar_call(f, args, kwargs)) return r;  // np.float32(2.5)
    return construct(f, std::move(args), std::move(kwargs));
  }
  // Methods of trace-time values run for real: only the capture holds the object.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && is_trace_value(PyCFunction_GET_SELF(f))) {
    const std::string m = reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name;
    if (PyAnySet_Check(PyCFunction_GET_SELF(f)) && args.size() == 1 && kwargs.empty() &&
        (m == "add" || m == "discard" || m == "remove" || m == "__contains__")) {
      PyRef member = set_member(args[0]);  // objects and tensors by identity
      if (!member) unsupported("set." + m + "() of a " + kind_name(args[0]->kind) + " kiln cannot hash");
      PyRef r = PyRef::steal(PyObject_CallOneArg(f, member.get()));
      if (!r) raise_pending_python_error("set." + m);
      return from_python_value(r.get(), false);
    }
    if (!all_python_values(args, kwargs)) unsupported(py_repr(f).substr(0, 60) + " with values that are not Python constants");
    VarPtr r = fold(f, args, kwargs);
    // c.items(), d.keys(): live views of a trace-time value are trace-time values too.
    if (r->kind == VarKind::kObject && (PyDictKeys_Check(r->obj.get()) || PyDictValues_Check(r->obj.get()) || PyDictItems_Check(r->obj.get())))
      return trace_value(r->obj.get());
    return r;
  }
  // Pure builtin functions on constants, and read-only methods of dicts, lists and tuples.
  if (PyCFunction_Check(f) && all_const(args)) {
    std::string m = module_of(f);
    PyObject* self = PyCFunction_GET_SELF(f);
    static const std::unordered_set<std::string> readonly = {"get", "keys", "values", "items", "__getitem__",
                                                              "__contains__", "copy", "index", "count", "__len__"};
    bool readonly_method = self && (PyDict_Check(self) || PyList_Check(self) || PyTuple_Check(self)) &&
                           readonly.count(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name);
    if (m == "math" || m == "builtins" || m == "_operator" || m == "operator" || (self && is_constant_like(self)) || readonly_method)
      return fold(f, args, kwargs);
  }
  // ",".join(str(d) for d in x.shape): the generator's (or iterator's) items, as a tuple.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && PyUnicode_CheckExact(PyCFunction_GET_SELF(f)) && args.size() == 1 && kwargs.empty() &&
      (args[0]->kind == VarKind::kGenerator || args[0]->kind == VarKind::kIterator) &&
      std::strcmp(reinterpret_cast<PyCFunctionObject*>(f)->m_ml->ml_name, "join") == 0)
    args[0] = make_seq(VarKind::kTuple, unpack(args[0]));
  // Methods of immutable values (", ".join(names), "{}".format(...)) on copies of Python values.
  if (PyCFunction_Check(f) && PyCFunction_GET_SELF(f) && is_constant_like(PyCFunction_GET_SELF(f)) && !PyType_Check(PyCFunction_GET_SELF(f)) &&
      all_python_values(args, kwargs))
    return fold(f, args, kwargs);
  PyObject* call_attr = _PyType_Lookup(Py_TYPE(f), PyRef::steal(PyUnicode_FromString("__call__")).get());
  if (call_attr && PyFunction_Check(call_attr)) {
    args.insert(args.begin(), fn);
    return inline_function(call_attr, nullptr, std::move(args), std::move(kwargs), nullptr);
  }
  if (VarPtr r = fold_numpy_scalar_call(f, args, kwargs)) return r;
  // A weak reference called (nn.LSTM and nn.GRU read their parameters through weakref.ref):
  // its referent, reached from the reference's own source so guards and graph inputs follow it.
  if (PyWeakref_CheckRefExact(f) && args.empty() && kwargs.empty()) {
    PyObject* referent = PyWeakref_GetObject(f);  // borrowed; None once it died
    return fn->source ? wrap(referent, weak_referent_source(fn->source)) : wrap_unguarded(referent, "weakref()");
  }
  unsupported("call to " + py_repr(f).substr(0, 80) + " is not supported");
}

}  // namespace kiln::frontend
