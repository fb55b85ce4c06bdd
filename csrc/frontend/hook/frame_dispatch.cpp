// Frame dispatch (see frame_dispatch.h).
#include "frontend/hook/frame_dispatch.h"

#include <structmember.h>

#include <algorithm>
#include <chrono>
#include <typeinfo>
#include <functional>
#include <unordered_map>
#include <mutex>
#include <cstring>
#include <string>
#include <vector>

#include "frontend/hook/code_state.h"
#include "frontend/hook/eager_graph.h"
#include "frontend/hook/entry_source.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/interpreter/graph_break.h"
#include "frontend/interpreter/interpreter.h"
#include "frontend/hook/options.h"
#include "frontend/hook/stats.h"
#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

PyObject* g_unsupported_error = nullptr;
PyObject* g_graph_declined = nullptr;
static PyObject* g_fx_compiler = nullptr;
static PyObject* g_debug_sink = nullptr;
// Ordered (path prefix, skip?) rules; the first prefix that matches a code object's file decides.
static std::vector<std::pair<std::string, bool>> g_skip_rules;
static std::mutex g_compile_mutex;

void set_fx_compiler(PyObject* fn) { Py_XINCREF(fn); Py_XSETREF(g_fx_compiler, fn); }
void set_debug_sink(PyObject* fn) { Py_XINCREF(fn); Py_XSETREF(g_debug_sink, fn); }

void set_skip_rules(PyObject* rules) {
  g_skip_rules.clear();
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(rules); ++i) {
    PyObject* r = PyList_GET_ITEM(rules, i);
    g_skip_rules.emplace_back(py_str(PyTuple_GET_ITEM(r, 0)), PyObject_IsTrue(PyTuple_GET_ITEM(r, 1)) == 1);
  }
}

// ---------------------------------------------------------------- CompiledFunction

struct CompiledFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;
  PyObject* backend;       // a callable, or None for the built-in eager runner
  PyObject* backend_name;  // str
  PyObject* dict;          // __dict__ (functools.wraps copies metadata here)
  int id;
  int fullgraph;
  int recompile_limit;
  int disable;
  int dynamic;  // DynamicPolicy
  PyObject* debug_dir;  // str: dump every capture there (kiln/_debug.py); None: off
};

static thread_local CompiledFunction* tls_ctx = nullptr;
static int g_next_context_id = 1;

static PyObject* compiled_function_call(PyObject* self_obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<CompiledFunction*>(self_obj);
  if (self->disable) return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
  CompiledFunction* prev_ctx = tls_ctx;
  int prev_mode = kiln_hook_get_mode();
  tls_ctx = self;
  kiln_hook_set_mode(1);
  kiln_hook_acquire();
  PyObject* r = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
  kiln_hook_release();
  kiln_hook_set_mode(prev_mode);
  tls_ctx = prev_ctx;
  return r;
}

static int compiled_function_init(PyObject* self_obj, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<CompiledFunction*>(self_obj);
  static const char* kw[] = {"fn", "backend", "backend_name", "fullgraph", "recompile_limit", "disable", "dynamic", "debug_dir", nullptr};
  PyObject *fn, *backend, *name, *dynamic = Py_None, *debug_dir = Py_None;
  int fullgraph = 0, limit = 8, disable = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOU|pipOO", const_cast<char**>(kw), &fn, &backend, &name, &fullgraph, &limit, &disable, &dynamic,
                                   &debug_dir))
    return -1;
  if (debug_dir != Py_None && !PyUnicode_Check(debug_dir)) { PyErr_SetString(PyExc_TypeError, "kiln: debug_dir must be a str or None"); return -1; }
  Py_INCREF(debug_dir); Py_XSETREF(self->debug_dir, debug_dir);
  int dyn = dynamic == Py_None ? -1 : PyObject_IsTrue(dynamic);
  if (dyn == -1 && dynamic != Py_None) return -1;
  self->dynamic = static_cast<int>(dyn < 0 ? DynamicPolicy::kAutomatic : dyn ? DynamicPolicy::kAll : DynamicPolicy::kStatic);
  if (!PyCallable_Check(fn)) { PyErr_SetString(PyExc_TypeError, "kiln.compile expects a callable"); return -1; }
  Py_INCREF(fn); Py_XSETREF(self->fn, fn);
  Py_INCREF(backend); Py_XSETREF(self->backend, backend);
  Py_INCREF(name); Py_XSETREF(self->backend_name, name);
  self->fullgraph = fullgraph;
  self->recompile_limit = limit;
  self->disable = disable;
  self->id = g_next_context_id++;
  self->vectorcall = compiled_function_call;
  return 0;
}

static void compiled_function_dealloc(PyObject* o) {
  auto* self = reinterpret_cast<CompiledFunction*>(o);
  PyObject_GC_UnTrack(o);
  Py_CLEAR(self->fn);
  Py_CLEAR(self->backend);
  Py_CLEAR(self->backend_name);
  Py_CLEAR(self->debug_dir);
  Py_CLEAR(self->dict);
  Py_TYPE(o)->tp_free(o);
}

static int compiled_function_traverse(PyObject* o, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<CompiledFunction*>(o);
  Py_VISIT(self->fn);
  Py_VISIT(self->backend);
  Py_VISIT(self->dict);
  return 0;
}

static PyObject* compiled_function_get(PyObject* self, PyObject* obj, PyObject*) {
  if (!obj || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);  // behaves like a function when used as a method
}

static PyMemberDef compiled_function_members[] = {
    {"_kiln_fn", T_OBJECT, offsetof(CompiledFunction, fn), READONLY, "the original callable"},
    {"backend_name", T_OBJECT, offsetof(CompiledFunction, backend_name), READONLY, "the backend"},
    {"context_id", T_INT, offsetof(CompiledFunction, id), READONLY, "cache entries made under this wrapper carry this id"},
    {nullptr}};

static PyTypeObject CompiledFunctionType = {PyVarObject_HEAD_INIT(nullptr, 0)};

bool register_compiled_function_type(PyObject* module) {
  CompiledFunctionType.tp_name = "kiln._C.CompiledFunction";
  CompiledFunctionType.tp_basicsize = sizeof(CompiledFunction);
  CompiledFunctionType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR;
  CompiledFunctionType.tp_vectorcall_offset = offsetof(CompiledFunction, vectorcall);
  CompiledFunctionType.tp_call = PyVectorcall_Call;
  CompiledFunctionType.tp_new = PyType_GenericNew;
  CompiledFunctionType.tp_init = compiled_function_init;
  CompiledFunctionType.tp_dealloc = compiled_function_dealloc;
  CompiledFunctionType.tp_traverse = compiled_function_traverse;
  CompiledFunctionType.tp_descr_get = compiled_function_get;
  CompiledFunctionType.tp_members = compiled_function_members;
  CompiledFunctionType.tp_dictoffset = offsetof(CompiledFunction, dict);
  CompiledFunctionType.tp_getattro = PyObject_GenericGetAttr;
  CompiledFunctionType.tp_setattro = PyObject_GenericSetAttr;
  CompiledFunctionType.tp_doc = "A callable compiled by kiln: calls run through kiln's frame hook and code cache.";
  if (PyType_Ready(&CompiledFunctionType) < 0) return false;
  Py_INCREF(&CompiledFunctionType);
  return PyModule_AddObject(module, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledFunctionType)) == 0;
}

PyObject* unwrap_compiled_function(PyObject* o) {
  return Py_IS_TYPE(o, &CompiledFunctionType) ? reinterpret_cast<CompiledFunction*>(o)->fn : nullptr;
}

// ---------------------------------------------------------------- frame handling

static bool decide_skip(PyCodeObject* code) {
  std::string file = py_str(code->co_filename);
  if (file.empty() || file[0] == '<') return file.rfind("<frozen", 0) == 0;
  for (const auto& [prefix, skip] : g_skip_rules)
    if (file.compare(0, prefix.size(), prefix) == 0) return skip;
  return false;
}

static bool worth_capturing(const kiln_frame* f, bool compiled_root) {
  PyCodeObject* code = f->code;
  int nargs = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
              ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  auto interesting = [](PyObject* o) {
    return probe_is_tensor(o) || PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g_torch.module_type)) || is_numpy_array(o);
  };
  for (int i = 0; i < nargs && i < f->nlocalsplus; ++i) {
    PyObject* o = f->localsplus[i];
    if (!o) continue;
    if (interesting(o)) return true;
    if (PyTuple_Check(o) || PyList_Check(o)) {
      for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(o) && j < 16; ++j)
        if (interesting(PySequence_Fast_GET_ITEM(o, j))) return true;
    } else if (PyDict_Check(o)) {
      Py_ssize_t pos = 0;
      PyObject *k, *v;
      while (PyDict_Next(o, &pos, &k, &v))
        if (interesting(v)) return true;
    }
  }
  // The function the user compiled, where its code names the torch module or one of its
  // submodules through its globals, works on tensors it reaches another way: an EMA update
  // `with torch.no_grad(): e.mul_(d).add_(p)` over models held in globals (Dynamo's
  // has_tensor_in_frame counts this too). Not for the frames it calls eagerly: an optimizer's
  // step() would then be captured with its learning rate read from param_groups as a constant,
  // where its functional update takes the rate as an argument.
  PyObject* names = code->co_names;
  for (Py_ssize_t i = 0; compiled_root && f->globals && PyDict_Check(f->globals) && i < PyTuple_GET_SIZE(names); ++i) {
    PyObject* g = PyDict_GetItem(f->globals, PyTuple_GET_ITEM(names, i));  // borrowed, no error set
    if (!g || !PyModule_Check(g)) continue;
    const char* name = PyModule_GetName(g);
    if (!name) {
      PyErr_Clear();
      continue;
    }
    if (std::strcmp(name, "torch") == 0 || std::strncmp(name, "torch.", 6) == 0) return true;
  }
  return false;
}

static std::string function_label(PyCodeObject* code) {
  return py_str(code->co_qualname) + " (" + py_str(code->co_filename) + ":" + std::to_string(code->co_firstlineno) + ")";
}

// Encodes graph arguments for the Python fx builder: ('n', index) | ('c', obj) | ('t'|'l', [..]).
static PyObject* encode_arg(const graph::Arg& a, const Capture& cap) {
  switch (a.kind) {
    case graph::Arg::kNode: return Py_BuildValue("(si)", "n", a.node);
    case graph::Arg::kConst: return Py_BuildValue("(sO)", "c", cap.objects.at(a.handle).get());
    default: {
      PyObject* items = PyList_New(0);
      for (const auto& it : a.items) {
        PyObject* e = encode_arg(it, cap);
        PyList_Append(items, e);
        Py_DECREF(e);
      }
      PyObject* r = Py_BuildValue("(sN)", a.kind == graph::Arg::kTuple ? "t" : "l", items);
      return r;
    }
  }
}

PyObject* describe_capture(const Capture& cap) {
  PyObject* nodes = PyList_New(0);
  for (const auto& n : cap.graph->nodes()) {
    PyObject* args = PyList_New(0);
    for (const auto& a : n.args) { PyObject* e = encode_arg(a, cap); PyList_Append(args, e); Py_DECREF(e); }
    PyObject* kwargs = PyDict_New();
    for (const auto& kv : n.kwargs) { PyObject* e = encode_arg(kv.second, cap); PyDict_SetItemString(kwargs, kv.first.c_str(), e); Py_DECREF(e); }
    PyObject* target = n.op == graph::Op::kCallFunction ? Py_NewRef(cap.objects.at(n.target_handle).get())
                                                        : PyUnicode_FromString(n.target.c_str());
    PyObject* t = Py_BuildValue("(ssNNN)", graph::op_name(n.op), n.name.c_str(), target, args, kwargs);
    PyList_Append(nodes, t);
    Py_DECREF(t);
  }
  return nodes;
}

static PyObject* example_inputs_list(const Capture& cap) {
  PyObject* l = PyList_New(cap.example_inputs.size());
  for (size_t i = 0; i < cap.example_inputs.size(); ++i) PyList_SET_ITEM(l, i, Py_NewRef(cap.example_inputs[i].get()));
  return l;
}

// Lays out the fetch plan of an entry (see CacheEntry::fetch_plan).
static void plan_input_fetches(CacheEntry& e) {
  std::unordered_map<const Source*, int> index;
  std::function<int(const SourcePtr&)> place = [&](const SourcePtr& s) -> int {
    auto it = index.find(s.get());
    if (it != index.end()) return it->second;
    int parent = s->parent ? place(s->parent) : -1;
    e.fetch_plan.push_back(s);
    e.fetch_parent.push_back(parent);
    return index[s.get()] = static_cast<int>(e.fetch_plan.size()) - 1;
  };
  for (const auto& in : e.inputs) e.input_slots.push_back(place(in));
}

// Hands what a capture produced to the debug sink (KILN_DEBUG_DIR): only for functions compiled
// with a debug directory, so compiling without one costs nothing. The sink's own failure is
// reported as a warning and never changes what the call does.
// Returns the dump's folder for this capture (handed to the backend), or None.
static PyRef dump_capture(CompiledFunction* ctx, const kiln_frame* frame, const std::string& label, const std::string& recompile_reason,
                          const std::string& break_reason, const std::string& break_where, const std::string& break_stack, const Capture* cap,
                          bool runs_eagerly) {
  if (ctx->debug_dir == Py_None || !g_debug_sink) return PyRef::borrow(Py_None);
  PyRef facts = PyRef::steal(PyDict_New());
  auto put = [&](const char* k, PyObject* v) {
    if (v) PyDict_SetItemString(facts.get(), k, v);
    Py_XDECREF(v);
  };
  auto str = [](const std::string& s) { return PyUnicode_FromStringAndSize(s.data(), static_cast<Py_ssize_t>(s.size())); };
  put("function", str(label));
  put("code", Py_NewRef(reinterpret_cast<PyObject*>(frame->code)));
  put("recompile_reason", str(recompile_reason));
  put("break_reason", str(break_reason));
  put("break_where", str(break_where));
  put("break_stack", str(break_stack));
  put("runs_eagerly", PyBool_FromLong(runs_eagerly));
  if (cap) {
    put("where", str(cap->where));
    put("graph", str(cap->graph->to_python()));
    put("guards", str(cap->guards->to_string()));
    put("transformed", str(entry_python(*cap, frame->code)));
    PyObject* changes = PyList_New(0);
    for (const auto& c : cap->dynamic_changes) {
      PyObject* s = str(c);
      PyList_Append(changes, s);
      Py_DECREF(s);
    }
    put("dynamic_changes", changes);
  }
  PyRef r = PyRef::steal(PyObject_CallFunctionObjArgs(g_debug_sink, ctx->debug_dir, facts.get(), nullptr));
  if (!r || !PyUnicode_Check(r.get())) {  // the sink warns about its own failures; it returns the folder
    PyErr_Clear();
    return PyRef::borrow(Py_None);
  }
  return r;
}

// The Python frames that called `frame`, outermost first, one "  function at file:line" per
// frame (at most 16). It materialises the callers' frame objects: only for recompiles and breaks.
static std::string callers_of_frame() {
  std::vector<std::string> lines;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed: the caller (the called frame is not pushed yet)
  Py_XINCREF(f);
  for (int depth = 0; f && depth < 16; ++depth) {
    PyCodeObject* code = PyFrame_GetCode(f);
    lines.push_back("  " + py_str(code->co_qualname) + " at " + py_str(code->co_filename) + ":" + std::to_string(PyFrame_GetLineNumber(f)) + "\n");
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(f);
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  std::string out;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) out += *it;
  return out;
}

// The user's stack at a call of `frame` (outermost first, the called function last): what
// explain and the recompiles log show for a recompile.
static std::string caller_stack(const kiln_frame* frame) {
  return callers_of_frame() + "  " + py_str(frame->code->co_qualname) + " at " + py_str(frame->code->co_filename) + ":" +
         std::to_string(frame->code->co_firstlineno) + "\n";
}

// Builds the cache entry for a frame: capture, then hand the graph to the backend.
static std::shared_ptr<CacheEntry> compile_frame(CompiledFunction* ctx, const kiln_frame* frame, CodeState* st,
                                                 const std::string& recompile_reason) {
  auto entry = std::make_shared<CacheEntry>();
  entry->context_id = ctx->id;
  auto& S = stats();
  auto t0 = std::chrono::steady_clock::now();
  CaptureOptions copts;
  copts.memoize_meta = options().memoize_meta;
  copts.max_inline_depth = options().max_inline_depth;
  copts.dynamic = static_cast<DynamicPolicy>(ctx->dynamic);
  copts.size_history = &st->size_history;
  auto interp = std::make_unique<Interpreter>(*frame, copts);
  std::string label = function_label(frame->code);
  std::string break_reason, break_where, break_stack;  // for the debug dump
  try {
    interp->run();
  } catch (const std::exception& e) {
    // Unsupported: a construct kiln does not capture; anything else: a bug in kiln. Either the
    // frame splits there (a graph break with a resume function) or it runs eagerly (or
    // fullgraph raises), with the reason recorded.
    if (PyErr_Occurred()) PyErr_Clear();
    const auto* u = dynamic_cast<const Unsupported*>(&e);
    // The break's stack: the eager callers, then the compiled frame and the calls it inlined.
    std::string where = u ? u->where : "", stack = callers_of_frame() + (u ? u->stack : "");
    entry->guards = interp->capture().guards;
    std::string what = e.what();
    if (what.empty()) what = std::string("a C++ exception of type ") + typeid(e).name() + " with no message";
    entry->reason = u ? what : "internal error in kiln's frontend: " + what;
    S.graph_breaks++;
    S.breaks.push_back({label, where, entry->reason, stack});
    std::string at = where.empty() ? "" : " at " + where;
    if (ctx->fullgraph) {
      log(kLogGraphBreaks, "graph break in " + label + at + ": " + entry->reason + "\n" + stack);
      PyErr_Format(g_unsupported_error, "kiln cannot capture %s in one graph (fullgraph=True): %s%s\ninlined calls:\n%s",
                   label.c_str(), entry->reason.c_str(), at.c_str(), stack.c_str());
      return nullptr;
    }
    // Capture again up to the instruction that failed (the first run went past it), then split.
    std::string refusal = u && u->root_index >= 0 ? break_refusal(frame->code, u->root_index) : "not at an instruction of this frame";
    if (refusal.empty()) {
      copts.break_at = u->root_index;
      copts.break_visit = u->root_visit;
      interp.reset();  // restores the grad mode the first attempt may have changed
      interp = std::make_unique<Interpreter>(*frame, copts);
      try {
        interp->run();
      } catch (const std::exception& again) {
        if (PyErr_Occurred()) PyErr_Clear();
        refusal = std::string("the capture up to it failed: ") + again.what();
      }
    }
    if (!refusal.empty()) {
      log(kLogGraphBreaks, "graph break in " + label + at + ": " + entry->reason + " -- this frame runs eagerly (cannot split it: " +
                               refusal + ")\n" + stack);
      dump_capture(ctx, frame, label, recompile_reason, entry->reason + " (the frame runs eagerly: cannot split it: " + refusal + ")", where,
                   stack, nullptr, true);
      return entry;
    }
    log(kLogGraphBreaks, "graph break in " + label + at + ": " + entry->reason + " -- it runs eagerly and a resume function continues\n" + stack);
    break_reason = entry->reason;
    break_where = where;
    break_stack = stack;
    entry->reason.clear();
  }
  auto t1 = std::chrono::steady_clock::now();
  Capture& cap = interp->capture();
  for (const auto& change : cap.dynamic_changes)
    log(kLogRecompiles, "dynamic shapes: " + label + ": " + change + ", so that dimension is symbolic from now on");
  entry->guards = cap.guards;
  entry->inputs = cap.inputs;
  entry->made = cap.made;
  auto positions = [&](const std::vector<SourcePtr>& among) {  // where these sources are among the inputs
    std::vector<int> at;
    for (size_t i = 0; i < cap.inputs.size(); ++i)
      if (std::find(among.begin(), among.end(), cap.inputs[i]) != among.end()) at.push_back(static_cast<int>(i));
    return at;
  };
  entry->numpy_inputs = positions(cap.numpy_inputs);
  entry->float_inputs = positions(cap.float_inputs);
  entry->shared_objects = cap.shared_objects;
  plan_input_fetches(*entry);
  entry->output = cap.output;
  entry->side_effects = cap.side_effects;
  entry->mutates_inputs = cap.mutates_inputs;
  entry->assertions = cap.assertions;
  entry->inference_run = cap.inference_run;
  entry->pop_inference_after = cap.pop_inference_after;
  entry->grad_at_start = interp->initial_grad();
  entry->enters_autocast = cap.enters_autocast;
  PyRef dump_folder = dump_capture(ctx, frame, label, recompile_reason, break_reason, break_where, break_stack, &cap, false);
  if (cap.brk) {
    entry->brk = std::move(cap.brk);
    entry->code = frame->code;
    entry->globals = PyRef::borrow(frame->globals);
  }
  PyObject* compiled = nullptr;
  if (ctx->backend == Py_None || cap.graph->num_calls() == 0) {  // nothing to compile: run it as it is
    compiled = make_eager_graph(cap);
  } else if (g_fx_compiler) {
    PyObject* desc = describe_capture(cap);
    PyObject* ex = example_inputs_list(cap);
    compiled = desc && ex ? PyObject_CallFunction(g_fx_compiler, "OOOsO", ctx->backend, desc, ex, cap.name.c_str(), dump_folder.get()) : nullptr;
    Py_XDECREF(desc);
    Py_XDECREF(ex);
  } else {
    PyErr_SetString(PyExc_RuntimeError, "kiln: no fx compiler registered");
  }
  if (!compiled) return nullptr;  // the backend raised: surface its error
  entry->compiled = PyRef::steal(compiled);
  auto t2 = std::chrono::steady_clock::now();
  double cs = std::chrono::duration<double>(t1 - t0).count(), bs = std::chrono::duration<double>(t2 - t1).count();
  // A capture with no operator runs as the frame would (make_eager_graph): a cache entry, not a
  // graph, as Dynamo counts them (an empty frame, or the prefix of one whose first call breaks).
  if (cap.graph->num_calls() > 0) S.graphs++;
  S.capture_s += cs;
  S.backend_s += bs;
  GraphRecord rec;
  rec.function = label;
  rec.where = cap.where;
  rec.code = cap.graph->to_python();
  rec.guards = cap.guards->to_string();
  rec.backend = py_str(ctx->backend_name);
  rec.ops = cap.graph->num_calls();
  rec.inputs = static_cast<int>(cap.inputs.size());
  rec.guard_count = cap.guards->num_leaves();
  rec.inlined = cap.inlined_functions;
  rec.meta_hits = interp->meta().hits();
  rec.meta_misses = interp->meta().misses();
  rec.break_reason = break_reason;
  rec.break_where = break_where;
  rec.recompile_reason = recompile_reason;
  rec.started_s = std::chrono::duration<double>(t0.time_since_epoch()).count();
  rec.capture_s = cs;
  rec.backend_s = bs;
  S.graph_records.push_back(rec);
  log(kLogGraphCode, "captured graph for " + label + ":\n" + rec.code);
  log(kLogGuards, "guards for " + label + ":\n" + rec.guards);
  log(kLogPerf, "compile of " + label + ": capture " + std::to_string(cs * 1e3) + " ms, backend " + std::to_string(bs * 1e3) +
                    " ms, " + std::to_string(rec.ops) + " ops, shape propagation memo " + std::to_string(rec.meta_hits) + " hits / " +
                    std::to_string(rec.meta_misses) + " misses");
  return entry;
}

// Runs an entry on a frame; `effects_started` tells, on failure, whether anything the frame
// could observe had happened yet (an input written in place, side effects replayed, the break's
// instruction run).
static PyObject* run_entry(const CacheEntry& e, const FrameView& frame, bool* effects_started) {
  *effects_started = false;
  // Objects the captured code makes (a Parameter built inside forward) are made here, once per
  // run: the graph takes them as inputs and the frame's results reach them through the view.
  std::vector<PyRef> made;
  std::vector<PyObject*> made_ptrs;
  for (const auto& m : e.made) {
    made.push_back(PyRef::steal(PyObject_CallNoArgs(m->obj.get())));
    if (!made.back()) return nullptr;
    made_ptrs.push_back(made.back().get());
  }
  FrameView fv = frame;
  fv.made = made_ptrs.data();
  const size_t n = e.inputs.size(), nplan = e.fetch_plan.size();
  PyObject* small[64];
  std::vector<PyObject*> big;
  PyObject** vals = small;
  if (nplan + n > 64) { big.resize(nplan + n); vals = big.data(); }
  PyObject** argv = vals + nplan;
  for (size_t i = 0; i < nplan; ++i) {
    int p = e.fetch_parent[i];
    vals[i] = p < 0 ? e.fetch_plan[i]->root(fv) : (vals[p] ? e.fetch_plan[i]->step(vals[p]) : nullptr);
  }
  for (size_t i = 0; i < n; ++i) {
    argv[i] = vals[e.input_slots[i]];
    if (!argv[i]) {
      PyErr_Format(PyExc_RuntimeError, "kiln: input %s vanished after guards passed", e.inputs[i]->repr().c_str());
      return nullptr;
    }
  }
  // numpy arrays enter the graph as tensors sharing their memory (their guards checked the
  // buffer), dynamic floats as 0-d float64 tensors (their guards checked they are floats).
  std::vector<PyRef> converted;
  auto convert = [&](int i, PyObject* t) {
    converted.push_back(PyRef::steal(t));
    argv[i] = t;
    return t != nullptr;
  };
  for (int i : e.numpy_inputs)
    if (!convert(i, PyObject_CallOneArg(g_torch.from_numpy, argv[i]))) return nullptr;
  for (int i : e.float_inputs)
    if (!convert(i, probe_float_tensor(argv[i]))) return nullptr;
  // A graph that writes its inputs: if it raises, the frame may rerun eagerly only when no input
  // was written yet (their version counters tell; an in-place op that raised may count as a write).
  const bool watch = e.mutates_inputs;
  std::vector<uint64_t> versions;
  if (watch)
    for (size_t i = 0; i < n; ++i) versions.push_back(probe_is_tensor(argv[i]) ? probe_version(argv[i]) : 0);
  PyRef outs;
  AutocastState autocast_before;  // the with-blocks a raising graph was inside are left, as in eager
  if (e.enters_autocast) autocast_before = probe_autocast_state();
  if (e.inference_run >= 0) {  // under (or, from inside one, out of) torch.inference_mode, as captured
    probe_push_inference_mode(e.inference_run == 1);
    if (e.inference_run == 0) probe_set_grad_enabled(e.grad_at_start);  // InferenceMode(false) turned it on
    outs = PyRef::steal(PyObject_Vectorcall(e.compiled.get(), argv, n, nullptr));
    probe_pop_inference_mode();
  } else {
    outs = PyRef::steal(PyObject_Vectorcall(e.compiled.get(), argv, n, nullptr));
  }
  if (!outs) {
    // The graph's error stays pending while kiln looks: a type check with it set runs
    // __instancecheck__ under an exception (SystemError: "returned a result with an exception set").
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (e.enters_autocast) probe_restore_autocast_state(autocast_before);
    for (size_t i = 0; watch && i < n; ++i)
      if (probe_is_tensor(argv[i]) && probe_version(argv[i]) != versions[i]) *effects_started = true;
    PyErr_Restore(type, value, tb);
    return nullptr;
  }
  PyRef seq = PyTuple_CheckExact(outs.get()) ? outs : PyRef::steal(PySequence_Fast(outs.get(), "kiln: a backend's compiled callable must return a sequence"));
  if (!seq) return nullptr;
  PyObject* const* items = PySequence_Fast_ITEMS(seq.get());
  for (const auto& [index, truth] : e.assertions) {
    // An `assert` on a tensor the graph kept: a failed one is a raise before any side effect
    // (the graph writes no input when it holds one), so the frame reruns eagerly and raises.
    const int t = PyObject_IsTrue(items[index]);
    if (t < 0) return nullptr;
    if ((t == 1) != truth) {
      PyErr_SetNone(PyExc_AssertionError);
      return nullptr;
    }
  }
  // The result first: the frame's own values it hands back are fetched through the paths the
  // frame was called with, before side effects change what those paths reach.
  std::vector<PyRef> built(e.shared_objects);  // objects made by the capture, shared by result and effects
  PyRef result = PyRef::steal(e.output.build(items, fv, built));
  if (!result) return nullptr;
  std::vector<PyRef> values;  // likewise, every value to store is built before any is stored
  for (const auto& se : e.side_effects) {
    values.push_back(PyRef::steal(se.value.build(items, fv, built)));
    if (!values.back()) return nullptr;
  }
  // Owned, fetched before any store: a store may drop the last other reference to a container a
  // later write-back targets (`v = d.pop(k); v.append(x)` clears d before v is written).
  std::vector<PyRef> targets(e.side_effects.size());
  for (size_t i = 0; i < e.side_effects.size(); ++i) {
    const SideEffect& se = e.side_effects[i];
    if (!se.source) {
      targets[i] = se.target;
      continue;
    }
    targets[i] = PyRef::borrow(se.source->fetch(fv));
    if (!targets[i]) {
      PyErr_Format(PyExc_RuntimeError, "kiln: %s vanished while the frame ran", se.source->repr().c_str());
      return nullptr;
    }
  }
  *effects_started = true;
  for (size_t i = 0; i < e.side_effects.size(); ++i) {  // replay, in order
    const SideEffect& se = e.side_effects[i];
    PyObject* v = values[i].get();
    int rc;
    PyObject* target = targets[i].get();
    if (se.name) rc = PyObject_SetAttr(target, se.name.get(), v);
    else if (PyList_Check(target)) rc = PyList_SetSlice(target, 0, PY_SSIZE_T_MAX, v);
    else rc = (PyDict_Clear(target), PyDict_Update(target, v));
    if (rc < 0) return nullptr;
  }
  for (int i = 0; i < e.pop_inference_after; ++i)  // the inference_mode block a graph break entered ends here
    if (!probe_pop_inference_mode()) {
      PyErr_SetString(PyExc_RuntimeError, "kiln: leaving an inference_mode block kiln did not enter");
      return nullptr;
    }
  if (e.brk) return continue_after_break(*e.brk, e.code, e.globals.get(), fv.func, result.get());  // `result`: the state at the break
  return result.release();
}

static int count_entries(const CodeState* st, int ctx_id) {
  int n = 0;
  for (const auto& e : st->entries) n += e->context_id == ctx_id;
  return n;
}

static std::shared_ptr<CacheEntry> lookup(CodeState* st, int ctx_id, const FrameView& fv) {
  for (auto it = st->entries.begin(); it != st->entries.end(); ++it) {
    if ((*it)->context_id != ctx_id) continue;
    if ((*it)->guards->check(fv)) {
      auto e = *it;
      if (it != st->entries.begin()) st->entries.splice(st->entries.begin(), st->entries, it);
      return e;
    }
  }
  return nullptr;
}

static PyObject* run_or_pass(const std::shared_ptr<CacheEntry>& e, const FrameView& fv, int* handled) {
  if (!e->compiled) {
    stats().eager_runs++;
    *handled = 0;  // run the frame's own bytecode; nested frames are still offered
    return nullptr;
  }
  bool effects_started = false;
  PyObject* r = run_entry(*e, fv, &effects_started);
  if (!r && PyErr_ExceptionMatches(g_graph_declined)) {
    // The backend cannot take this call's inputs (sizes it has no kernels for): the frame runs
    // eagerly this once, and so do its callees (captured on their own, each would recompile).
    PyErr_Clear();
    stats().eager_runs++;
    *handled = KILN_RUN_UNCAPTURED;
    return nullptr;
  }
  if (!r && !effects_started && PyErr_ExceptionMatches(PyExc_Exception)) {
    // The graph raised before anything the frame could observe happened (its list, dict and
    // attribute updates are replayed only after it): the frame's own bytecode runs instead, so
    // the exception arrives after exactly the side effects eager makes before it.
    PyErr_Clear();
    stats().eager_runs++;
    *handled = 0;
    return nullptr;
  }
  *handled = 1;
  return r;
}

}  // namespace kiln::frontend

using namespace kiln::frontend;

static PyObject* on_frame(kiln_frame* frame, int* handled);

// The C hook calls this: no C++ exception may cross into C (it would terminate the process).
// An internal failure is reported as a RuntimeError from the call, never a crash.
extern "C" PyObject* kiln_on_frame(kiln_frame* frame, int* handled) {
  try {
    return on_frame(frame, handled);
  } catch (const std::exception& e) {
    *handled = 1;
    if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "kiln internal error: %s", e.what());
    return nullptr;
  } catch (...) {
    *handled = 1;
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "kiln internal error");
    return nullptr;
  }
}

// While kiln decides about a frame, compiles it or runs its entry, the hook is off for this
// thread: kiln's own work may run Python (an __instancecheck__, a property, a backend) and must
// not be intercepted. Frames kiln hands back for normal evaluation see the hook on again.
struct HookOffScope {
  HookOffScope() { kiln_hook_set_mode(0); }
  ~HookOffScope() { kiln_hook_set_mode(1); }
};

static PyObject* on_frame(kiln_frame* frame, int* handled) {
  HookOffScope off;
  *handled = 0;
  CompiledFunction* ctx = tls_ctx;
  if (!ctx) return nullptr;
  CodeState* st = code_state(frame->code);
  if (!st) return nullptr;
  if (!st->skip_decided) {
    st->skip = decide_skip(frame->code);
    st->skip_decided = true;
  }
  if (st->skip) return nullptr;
  // Under saved-tensor hooks (activation checkpointing, offloading) a frame that records autograd
  // runs as written: the hooks count, pack and recompute what its operators save, and checkpoint
  // stops its recomputation midway by raising; a compiled graph would change all of that.
  if (probe_saved_tensor_hooks_active() && probe_grad_enabled()) return nullptr;
  FrameView fv{frame->localsplus, frame->func};
  if (auto e = lookup(st, ctx->id, fv)) {
    stats().cache_hits++;
    return run_or_pass(e, fv, handled);
  }
  if (st->hit_limit(ctx->id)) {
    stats().guard_failures++;
    stats().recompile_limit_hits++;
    stats().eager_runs++;
    return nullptr;
  }
  if (!worth_capturing(frame, frame->func == ctx->fn)) {
    stats().skipped_frames++;
    return nullptr;
  }
  stats().cache_misses++;
  // Serialise compilation; wait for the lock without holding the GIL.
  if (!g_compile_mutex.try_lock()) {
    Py_BEGIN_ALLOW_THREADS
    g_compile_mutex.lock();
    Py_END_ALLOW_THREADS
  }
  std::unique_lock<std::mutex> lock(g_compile_mutex, std::adopt_lock);
  PyObject* result = nullptr;
  if (auto e = lookup(st, ctx->id, fv)) {  // another thread compiled it meanwhile
    lock.unlock();
    return run_or_pass(e, fv, handled);
  }
  int existing = count_entries(st, ctx->id);
  std::string label = function_label(frame->code);
  std::string recompile_reason;
  if (existing > 0) {
    std::string& reason = recompile_reason;
    int kind = -1;
    // The reason is the most recently used entry's first failing guard; the log names every
    // entry's (which one nearly matched is what a user needs to see, as Dynamo lists them).
    std::string others;
    int index = 0;
    for (const auto& e : st->entries) {
      if (e->context_id != ctx->id) continue;
      if (index++ == 0) reason = e->guards->first_failure(fv, &kind);
      else if (options().log_mask & kLogRecompiles) others += "\n    entry " + std::to_string(index - 1) + ": " + e->guards->first_failure(fv);
    }
    stats().guard_failures++;
    // Sizes and per-call objects keep changing (without dynamic shapes, each is a new graph):
    // after kVolatileRecompiles of those, the frame stops recompiling.
    constexpr int kVolatileRecompiles = 2;
    // With dynamic shapes on, a size change recompiles that dimension as symbolic: not churn.
    const bool volatile_kind = kind == GuardLeaf::kId || (kind == GuardLeaf::kTensor && ctx->dynamic == static_cast<int>(DynamicPolicy::kStatic));
    const bool churn = volatile_kind && st->count_volatile(ctx->id) > kVolatileRecompiles;
    if (existing >= ctx->recompile_limit || churn) {
      stats().recompile_limit_hits++;
      st->limit_hit.push_back(ctx->id);
      lock.unlock();
      if (existing < ctx->recompile_limit) {
        log(kLogRecompiles, "not recompiling " + label + " again: " + reason + " -- it keeps changing between calls, so the frame runs eagerly from now on");
      } else if (!st->limit_warned) {
        st->limit_warned = true;
        std::string msg = "kiln: " + label + " hit the recompile limit (" + std::to_string(ctx->recompile_limit) +
                          "); it now runs eagerly when no cached entry matches. Last failing guard: " + reason;
        if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) < 0) { *handled = 1; return nullptr; }
      }
      stats().eager_runs++;
      return nullptr;
    }
    stats().recompiles++;
    stats().recompile_reasons.push_back(label + ": " + reason);
    stats().recompile_stacks.push_back(caller_stack(frame));
    log(kLogRecompiles, "recompiling " + label + " because guard failed: " + reason +
                            (others.empty() ? "" : "\n  the other entries failed at:" + others) + "\n" + stats().recompile_stacks.back());
  }
  stats().frames_compiled++;
  auto entry = compile_frame(ctx, frame, st, recompile_reason);
  lock.unlock();
  if (!entry) {  // fullgraph error or a backend error: raise it from the call
    *handled = 1;
    return nullptr;
  }
  st->entries.push_front(entry);
  result = run_or_pass(entry, fv, handled);
  return result;
}
