// Calls that run Python code as part of the capture: user functions inlined (their arguments bound
// to a new frame, which the interpreter runs like the captured one) and nn.Module calls (forward
// inlined without its hooks, guarded to have none).
#include <algorithm>
#include <memory>

#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// A class attribute read during capture: the same object (functions, classes) or an equal
// constant must be found there next time.
void Interpreter::guard_class_attr(const SourcePtr& src, PyObject* found) {
  if (!found) return;
  guard(src, is_constant_like(found) ? GuardLeaf::kEquals : GuardLeaf::kId, found);
}

// nn.Module's i-th global hook dict, fetched from torch.nn.modules.module's namespace.
static SourcePtr global_hook_source(Py_ssize_t i) {
  static const char* names[] = {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                                "_global_backward_pre_hooks", "_global_forward_hooks_always_called"};
  // Never destroyed: it holds Python references and must outlive interpreter finalisation.
  static auto& sources = *new std::vector<SourcePtr>();
  if (sources.empty()) {
    PyRef mod = PyRef::steal(PyImport_ImportModule("torch.nn.modules.module"));
    for (const char* n : names) {
      PyRef key = PyRef::steal(PyUnicode_FromString(n));
      sources.push_back(mod ? global_source(PyModule_GetDict(mod.get()), key.get(), false) : nullptr);
    }
    PyErr_Clear();
  }
  return sources.at(static_cast<size_t>(i));
}

// guards that nn.Module's global hook dicts stay empty (a module call inlines forward without them).
void Interpreter::require_no_global_module_hooks() {
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(g_torch.global_hook_dicts); ++i) {
    if (PyDict_GET_SIZE(PyTuple_GET_ITEM(g_torch.global_hook_dicts, i)) > 0) unsupported("global nn.Module hooks are registered");
    guard(global_hook_source(i), GuardLeaf::kLen, nullptr, 0);
  }
}

VarPtr Interpreter::call_module(const VarPtr& mod, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs) {
  PyObject* m = mod->obj.get();
  // The forward is inlined without its hooks, so the graph is valid only while there are none:
  // guard that the module's hook dicts (and nn.Module's global ones) stay empty.
  for (const char* h : {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"}) {
    if (dict_nonempty(m, h)) unsupported(std::string("module ") + Py_TYPE(m)->tp_name + " has " + h + " (hooks are run eagerly)");
    if (mod->source) guard(attr_source(mod->source, PyRef::steal(PyUnicode_FromString(h)).get()), GuardLeaf::kLen, nullptr, 0);
  }
  require_no_global_module_hooks();
  PyRef fwd = PyRef::steal(PyObject_GetAttrString(m, "forward"));
  if (!fwd) unsupported("module without forward: " + take_python_error());
  if (mod->source) {  // the forward that was inlined: the class's, not replaced on the instance
    PyRef fname = PyRef::steal(PyUnicode_FromString("forward"));
    PyObject** dp = _PyObject_GetDictPtr(m);
    if (dp && *dp && !PyDict_Contains(*dp, fname.get())) guard(instance_dict_source(mod->source), GuardLeaf::kLacksKey, fname.get());
    guard_class_attr(type_lookup_source(mod->source, fname.get(), false), _PyType_Lookup(Py_TYPE(m), fname.get()));
  }
  if (PyMethod_Check(fwd.get()) && PyMethod_GET_SELF(fwd.get()) == m && PyFunction_Check(PyMethod_GET_FUNCTION(fwd.get()))) {
    args.insert(args.begin(), mod);
    return inline_function(PyMethod_GET_FUNCTION(fwd.get()), nullptr, std::move(args), std::move(kwargs), nullptr);
  }
  return call(wrap_unguarded(fwd.get(), "forward"), std::move(args), std::move(kwargs));
}

VarPtr Interpreter::inline_function(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                    std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source) {
  if (func == module_attr("torch.autograd", "grad") || func == module_attr("torch.autograd", "backward"))
    unsupported(qualified_name(func) + "() runs autograd's engine: the graph ends before it");
  std::unique_ptr<Frame> f = bind_frame(func, nested, std::move(args), std::move(kwargs), func_source);
  if (uses_yield_value(f->code)) return lazy_generator(std::move(f));
  return run_inlined(*f);
}

VarPtr Interpreter::run_inlined(Frame& f) {
  frames_.push_back(&f);
  VarPtr r;
  try {
    r = run_frame(f);
  } catch (...) {
    frames_.pop_back();
    throw;
  }
  frames_.pop_back();
  return r;
}

std::unique_ptr<Interpreter::Frame> Interpreter::bind_frame(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                                            std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source) {
  PyCodeObject* code = reinterpret_cast<PyCodeObject*>(func ? PyFunction_GET_CODE(func) : nested->obj.get());
  if (code->co_flags & (CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)) unsupported("coroutines are not entered");
  ++cap_.inlined_functions;
  auto owned = std::make_unique<Frame>();
  Frame& f = *owned;
  f.code = code;
  f.dc = &decoded_code(code);
  f.globals = func ? PyFunction_GET_GLOBALS(func) : nested->globals.get();
  f.builtins = frames_.front()->builtins;
  f.locals.resize(code->co_nlocalsplus);
  const int argc = code->co_argcount, kwonly = code->co_kwonlyargcount, posonly = code->co_posonlyargcount;
  const bool has_varargs = code->co_flags & CO_VARARGS, has_varkw = code->co_flags & CO_VARKEYWORDS;
  auto name_of = [&](int i) { return py_str(PyTuple_GET_ITEM(code->co_localsplusnames, i)); };
  std::string qual = py_str(code->co_qualname);
  // positional
  size_t npos = std::min(args.size(), static_cast<size_t>(argc));
  for (size_t i = 0; i < npos; ++i) f.locals[i] = args[i];
  std::vector<VarPtr> extra(args.begin() + static_cast<long>(npos), args.end());
  if (!extra.empty() && !has_varargs) unsupported(qual + "() got too many positional arguments");
  int slot = argc + kwonly;
  if (has_varargs) f.locals[slot++] = make_seq(VarKind::kTuple, extra);
  VarPtr varkw;
  if (has_varkw) { varkw = std::make_shared<Var>(VarKind::kDict); f.locals[slot] = varkw; }
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = posonly; i < argc + kwonly; ++i)
      if (name_of(i) == k) { found = i; break; }
    if (found >= 0) {
      if (f.locals[found]) unsupported(qual + "() got multiple values for argument '" + k + "'");
      f.locals[found] = v;
    } else if (varkw) {
      varkw->keys.push_back(PyRef::steal(PyUnicode_FromString(k.c_str())));
      varkw->items.push_back(v);
    } else {
      unsupported(qual + "() got an unexpected keyword argument '" + k + "'");
    }
  }
  // defaults
  std::vector<VarPtr> defaults;
  if (func) {
    PyObject* d = PyFunction_GET_DEFAULTS(func);
    if (d) for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(d); ++i) defaults.push_back(wrap_unguarded(PyTuple_GET_ITEM(d, i), "default"));
  } else if (nested->self) {
    defaults = unpack(nested->self);
  }
  PyObject* kwdefaults = func ? PyFunction_GET_KW_DEFAULTS(func) : nested->kwdefaults.get();
  for (int i = 0; i < argc; ++i) {
    if (f.locals[i]) continue;
    int di = i - (argc - static_cast<int>(defaults.size()));
    if (di < 0) unsupported(qual + "() missing required argument '" + name_of(i) + "'");
    f.locals[i] = defaults[di];
  }
  for (int i = argc; i < argc + kwonly; ++i) {
    if (f.locals[i]) continue;
    PyObject* dv = kwdefaults ? PyDict_GetItem(kwdefaults, PyTuple_GET_ITEM(code->co_localsplusnames, i)) : nullptr;
    if (!dv) unsupported(qual + "() missing keyword-only argument '" + name_of(i) + "'");
    f.locals[i] = wrap_unguarded(dv, "kwdefault");
  }
  // closure cells occupy the last co_nfreevars slots
  int nfree = code->co_nfreevars;
  int first_free = code->co_nlocalsplus - nfree;
  if (nfree) {
    if (func) {
      PyObject* cl = PyFunction_GET_CLOSURE(func);
      for (int i = 0; i < nfree; ++i) {
        auto cell = std::make_shared<Var>(VarKind::kCell);
        PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(cl, i));
        SourcePtr src = func_source ? closure_cell_source(func_source, i, name_of(first_free + i)) : nullptr;
        if (contents) cell->items.push_back(src ? wrap(contents, src) : wrap_unguarded(contents, "closure"));
        cell->source = src ? src : constant_source(PyTuple_GET_ITEM(cl, i), "cell");
        f.locals[first_free + i] = cell;
      }
    } else {
      for (int i = 0; i < nfree && i < static_cast<int>(nested->items.size()); ++i) f.locals[first_free + i] = nested->items[i];
    }
  }
  return owned;
}

}  // namespace kiln::frontend
