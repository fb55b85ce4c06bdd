// The interpreter loop, instruction semantics, value wrapping with guards, and recording of
// tensor operations into the graph. Calls, attributes and builtins are in interpreter_calls.cpp.
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"

#include <cstring>
#include <functional>
#include <unordered_set>
#include <mutex>

#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- opcode ids

enum OpId {
#define KILN_OPS(X) X(NOP) X(RESUME) X(CACHE) X(PUSH_NULL) X(POP_TOP) X(COPY) X(SWAP) X(LOAD_CONST) \
  X(RETURN_CONST) X(LOAD_FAST) X(LOAD_FAST_CHECK) X(LOAD_FAST_AND_CLEAR) X(STORE_FAST) X(DELETE_FAST) \
  X(LOAD_CLOSURE) X(LOAD_DEREF) X(STORE_DEREF) X(MAKE_CELL) X(COPY_FREE_VARS) X(LOAD_GLOBAL) X(LOAD_ATTR) \
  X(LOAD_METHOD) X(STORE_ATTR) X(DELETE_ATTR) X(BUILD_TUPLE) X(BUILD_LIST) X(BUILD_MAP) X(BUILD_CONST_KEY_MAP) X(BUILD_SLICE) \
  X(BUILD_STRING) X(FORMAT_VALUE) X(LIST_APPEND) X(LIST_EXTEND) X(MAP_ADD) X(DICT_UPDATE) X(DICT_MERGE) \
  X(LIST_TO_TUPLE) X(CALL_INTRINSIC_1) X(UNPACK_SEQUENCE) X(UNPACK_EX) X(BINARY_OP) X(BINARY_SUBSCR) \
  X(STORE_SUBSCR) X(DELETE_SUBSCR) X(BINARY_SLICE) X(STORE_SLICE) X(UNARY_NEGATIVE) X(UNARY_NOT) X(UNARY_INVERT) \
  X(UNARY_POSITIVE) X(COMPARE_OP) X(IS_OP) X(CONTAINS_OP) X(POP_JUMP_IF_TRUE) X(POP_JUMP_IF_FALSE) \
  X(POP_JUMP_IF_NONE) X(POP_JUMP_IF_NOT_NONE) X(POP_JUMP_FORWARD_IF_TRUE) X(POP_JUMP_FORWARD_IF_FALSE) \
  X(POP_JUMP_FORWARD_IF_NONE) X(POP_JUMP_FORWARD_IF_NOT_NONE) X(POP_JUMP_BACKWARD_IF_TRUE) \
  X(POP_JUMP_BACKWARD_IF_FALSE) X(POP_JUMP_BACKWARD_IF_NONE) X(POP_JUMP_BACKWARD_IF_NOT_NONE) \
  X(JUMP_IF_TRUE_OR_POP) X(JUMP_IF_FALSE_OR_POP) X(JUMP_FORWARD) X(JUMP_BACKWARD) \
  X(JUMP_BACKWARD_NO_INTERRUPT) X(GET_ITER) X(FOR_ITER) X(END_FOR) X(PRECALL) X(KW_NAMES) X(CALL) \
  X(CALL_FUNCTION_EX) X(MAKE_FUNCTION) X(RETURN_VALUE) X(BEFORE_WITH) X(RETURN_GENERATOR) X(YIELD_VALUE) \
  X(IMPORT_NAME) X(IMPORT_FROM) X(LOAD_ASSERTION_ERROR) X(RAISE_VARARGS) X(BUILD_SET) X(SET_ADD) X(SET_UPDATE) \
  X(LOAD_SUPER_ATTR) X(STORE_GLOBAL) X(GET_YIELD_FROM_ITER) X(SEND) X(END_SEND) \
  X(PUSH_EXC_INFO) X(POP_EXCEPT) X(CHECK_EXC_MATCH) X(RERAISE) X(WITH_EXCEPT_START) X(LOAD_BUILD_CLASS)
#define KILN_ENUM(n) OP_##n,
  KILN_OPS(KILN_ENUM)
#undef KILN_ENUM
  OP_UNKNOWN
};

static int op_id(const char* name) {
  static const std::unordered_map<std::string, int> ids = {
#define KILN_MAP(n) {#n, OP_##n},
      KILN_OPS(KILN_MAP)
#undef KILN_MAP
  };
  auto it = ids.find(name);
  return it == ids.end() ? OP_UNKNOWN : it->second;
}

const DecodedCode& decoded_code(PyCodeObject* code) {
  // Never destroyed: it holds Python references and must outlive interpreter finalisation.
  static auto& cache = *new std::unordered_map<PyCodeObject*, std::pair<PyRef, std::unique_ptr<DecodedCode>>>();
  auto it = cache.find(code);
  if (it != cache.end()) return *it->second.second;
  PyRef raw = PyRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "co_code"));
  if (!raw) { PyErr_Clear(); throw std::runtime_error("cannot read co_code"); }
  auto d = std::make_unique<DecodedCode>();
  d->bc = std::make_unique<Bytecode>(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(raw.get())),
                                     static_cast<size_t>(PyBytes_GET_SIZE(raw.get())), PY_MAJOR_VERSION, PY_MINOR_VERSION);
  for (const auto& in : d->bc->instructions()) d->ops.push_back(op_id(in.name));
  auto& slot = cache[code];
  slot.first = PyRef::borrow(reinterpret_cast<PyObject*>(code));
  slot.second = std::move(d);
  return *slot.second;
}


// file:line of an instruction; an instruction with no line of its own (a resume function's
// prologue) takes the line of the first instruction after it that has one.
static std::string code_location(PyCodeObject* code, int offset) {
  int line = PyCode_Addr2Line(code, offset);
  const int size = static_cast<int>(Py_SIZE(code)) * 2;
  for (int at = offset + 2; line < 0 && at < size; at += 2) line = PyCode_Addr2Line(code, at);
  return py_str(code->co_filename) + ":" + std::to_string(line);
}

Interpreter::Interpreter(const kiln_frame& frame, CaptureOptions options) : root_(frame), opts_(options) {
  initial_grad_ = probe_grad_enabled();
  initial_inference_ = inference_ = probe_inference_enabled();
  cap_.guards->set_shape_env(cap_.shape_env);
}

Interpreter::~Interpreter() {
  abandon_autocast_blocks();
  probe_set_grad_enabled(initial_grad_);
}

std::string Interpreter::where() const {
  if (frames_.empty()) return "";
  const Frame* f = frames_.back();
  return code_location(f->code, f->dc->bc->at(f->cur).offset);
}

std::string Interpreter::inline_stack() const {
  std::string out;
  for (const Frame* f : frames_)
    out += "  " + py_str(f->code->co_qualname) + " at " + code_location(f->code, f->dc->bc->at(f->cur).offset) + "\n";
  return out;
}

Unsupported Interpreter::make_unsupported(const std::string& reason) const {
  Unsupported u(reason, where(), inline_stack());
  if (!frames_.empty()) {
    u.root_index = frames_.front()->cur;
    u.root_visit = root_visits_.at(u.root_index);
  }
  return u;
}

void Interpreter::unsupported(const std::string& reason) { throw make_unsupported(reason); }

// Fetches and clears the pending Python error as "Type: message".
std::string take_python_error() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string msg = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value) msg += ": " + py_str(value);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg;
}

// ---------------------------------------------------------------- running frames

void Interpreter::run() {
  PyCodeObject* code = root_.code;
  Frame f;
  f.code = code;
  f.dc = &decoded_code(code);
  f.globals = root_.globals;
  f.builtins = root_.builtins;
  f.locals.resize(root_.nlocalsplus);
  cap_.name = py_str(code->co_qualname);
  cap_.where = code_location(code, 0);
  cap_.guards->set_global_state(probe_global_state());
  int nargs = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
              ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  for (int i = 0; i < nargs && i < root_.nlocalsplus; ++i) {
    PyObject* name = PyTuple_GET_ITEM(code->co_localsplusnames, i);
    if (root_.localsplus[i]) f.locals[i] = wrap(root_.localsplus[i], local_source(i, py_str(name)));
  }
  // *args and **kwargs are built anew for each call: nothing outside sees their mutation.
  int slot = code->co_argcount + code->co_kwonlyargcount;
  if (code->co_flags & CO_VARARGS) {
    if (f.locals[slot]) f.locals[slot]->fresh = true;
    ++slot;
  }
  if ((code->co_flags & CO_VARKEYWORDS) && f.locals[slot]) f.locals[slot]->fresh = true;
  f.closure_source_func = make_object(root_.func, frame_func_source());
  root_visits_.assign(f.dc->bc->size(), 0);
  frames_.push_back(&f);
  VarPtr result;
  try {
    result = run_frame(f);
    // At a graph break the "result" is the frame's state there (BreakState): the graph outputs
    // it, and attribute stores made so far replay before the break's instruction runs.
    if (stopped_) result = capture_break_state(f);
  } catch (...) {
    frames_.pop_back();
    throw;
  }
  // At a graph break the graph leaves grad mode as it found it (the break sets the mode of the
  // with-blocks around it, see continue_after_break); a frame that returns leaves it as its code
  // did (a resume function ends the with-block its frame began, `torch.set_grad_enabled(False)`).
  if (stopped_ && probe_grad_enabled() != initial_grad_) record_grad_mode(initial_grad_);
  if (stopped_) close_autocast_blocks();  // likewise autocast (the break enters its blocks again)
  std::vector<graph::Arg> outs;
  std::unordered_map<int, int> out_index;
  auto fail = [&](const std::string& r) { unsupported(r); };
  cap_.output = make_template(this, result, outs, out_index, fail);
  for (size_t i = 0; i < attr_stores_.size(); ++i) {
    const AttrStore& st = attr_stores_[i];
    bool superseded = false;  // only the last store to an (object, name) is replayed
    for (size_t j = i + 1; j < attr_stores_.size() && !superseded; ++j)
      superseded = attr_stores_[j].target->obj.get() == st.target->obj.get() &&
                   PyUnicode_Compare(attr_stores_[j].name.get(), st.name.get()) == 0;
    if (superseded) continue;
    // A type-guarded object is this call's object only through its source: fetched at run time.
    if (st.target->type_guarded) cap_.side_effects.push_back({PyRef(), st.name, make_template(this, st.value, outs, out_index, fail), st.target->source});
    else cap_.side_effects.push_back({st.target->obj, st.name, make_template(this, st.value, outs, out_index, fail), nullptr});
  }
  for (const VarPtr& c : mutated_containers_) {  // their final contents, written into the originals
    auto contents = std::make_shared<Var>(*c);
    contents->source = nullptr;
    cap_.side_effects.push_back({PyRef(), PyRef(), make_template(this, contents, outs, out_index, fail), c->source});
  }
  for (const VarPtr& c : mutated_containers_) {
    std::vector<SourcePtr> others;
    for (const auto& ic : input_containers_)
      if (ic.var != c) others.push_back(ic.var->source);
    if (!others.empty()) cap_.guards->add_distinct(c->source, std::move(others), "a container the frame mutates");
  }
  if (!member_sources_.empty()) {  // tensor inputs whose identity set membership answered
    std::vector<SourcePtr> one_each;
    for (const auto& [object, sources] : member_sources_) {
      for (size_t k = 1; k < sources.size(); ++k) cap_.guards->add_same(sources[0], sources[k]);
      one_each.push_back(sources[0]);
    }
    if (one_each.size() > 1) cap_.guards->add_all_distinct(std::move(one_each));
  }
  if (!assertions_.empty() && cap_.mutates_inputs) {
    // A failed assertion reruns the frame eagerly, which a graph that already wrote its inputs
    // cannot do: the frame splits at the first assertion instead (a branch on the tensor).
    Unsupported u("data-dependent branch: the truth value of a tensor depends on its data (an assert in a graph that writes its inputs)",
                  first_assert_where_);
    u.root_index = first_assert_index_;
    u.root_visit = first_assert_visit_;
    frames_.pop_back();
    throw u;
  }
  // torch.inference_mode: a graph all of whose operations ran inside a block runs under
  // InferenceMode; any other graph must hand back no inference tensor it made (their
  // inference-ness would be lost), and runs with it off when the frame starts inside one.
  if (ops_outside_inference_ == 0 && ops_in_inference_ > 0) {
    cap_.inference_run = 1;
  } else {
    if (initial_inference_) cap_.inference_run = 0;
    for (const graph::Arg& o : outs)
      if (o.kind == graph::Arg::kNode && inference_nodes_.count(o.node)) {
        frames_.pop_back();
        unsupported("a tensor made under torch.inference_mode leaves a graph that also computes outside the block");
      }
  }
  for (const Assertion& a : assertions_) {
    cap_.assertions.emplace_back(static_cast<int>(outs.size()), a.truth);
    outs.push_back(graph::Arg::of_node(a.cond->node));
  }
  frames_.pop_back();
  cap_.graph->set_output(std::move(outs));
  cap_.graph->eliminate_dead_code(cap_.removable);  // only kiln-made getitem nodes may go
  // Tensors the frame holds but the graph never reads (a resume function's live locals) are not
  // inputs: nothing to fetch or pass per call, and no autograd edge from a training graph to them.
  // Their guards stay (what the capture assumed of them still holds).
  std::vector<bool> kept = cap_.graph->remove_unused_placeholders();
  size_t k = 0;
  for (size_t i = 0; i < kept.size(); ++i)
    if (kept[i]) {
      cap_.inputs[k] = cap_.inputs[i];
      cap_.example_inputs[k] = cap_.example_inputs[i];
      ++k;
    }
  cap_.inputs.resize(k);
  cap_.example_inputs.resize(k);
}

// The module whose __dict__ is `globals` (sys.modules[globals['__name__']]), or null.
PyObject* Interpreter::module_of_globals(PyObject* globals) {
  PyObject* name = PyDict_GetItemString(globals, "__name__");
  PyObject* modules = PyImport_GetModuleDict();
  PyObject* mod = name ? PyDict_GetItemWithError(modules, name) : nullptr;
  PyErr_Clear();
  return mod && PyModule_Check(mod) && PyModule_GetDict(mod) == globals ? mod : nullptr;
}

// `assert t, msg` with a tensor t (POP_JUMP_IF_TRUE over LOAD_ASSERTION_ERROR; `assert not t`
// jumps if false): like Dynamo, kept in the graph rather than broken on. The condition becomes a
// graph output whose truth the call checks (Capture::assertions). Only one-element tensors of a
// static size: bool() of any other raises in eager, which the break keeps.
bool Interpreter::tensor_assertion(Frame& f, const Instruction& in, const VarPtr& cond, bool truth) {
  const auto& all = f.dc->bc->instructions();
  size_t k = static_cast<size_t>(f.cur) + 1;
  while (k < all.size() && (std::strcmp(all[k].name, "CACHE") == 0 || std::strcmp(all[k].name, "NOP") == 0)) ++k;
  if (k >= all.size() || std::strcmp(all[k].name, "LOAD_ASSERTION_ERROR") != 0 || in.target <= f.cur) return false;
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

VarPtr Interpreter::run_frame(Frame& f) {
  if (static_cast<int>(frames_.size()) > opts_.max_inline_depth) unsupported("inlining too deep (recursion?)");
  const auto& instrs = f.dc->bc->instructions();
  while (true) {
    if (f.pc < 0 || f.pc >= static_cast<int>(instrs.size())) unsupported("ran off the end of the bytecode");
    if (++instructions_ > opts_.max_instructions) unsupported("capture exceeded the instruction budget");
    f.cur = f.pc++;
    if (frames_.size() == 1 && ++root_visits_[f.cur] == opts_.break_visit && f.cur == opts_.break_at) {
      stopped_ = true;
      return nullptr;
    }
    int op = f.dc->ops[f.cur];
    const Instruction& in = instrs[f.cur];
    if (op == OP_RETURN_VALUE || op == OP_RETURN_CONST) {
      VarPtr r;
      if (op == OP_RETURN_VALUE) { r = f.stack.back(); f.stack.pop_back(); }
      else r = make_const(PyTuple_GET_ITEM(f.code->co_consts, in.arg));
      if (f.code->co_flags & CO_GENERATOR) {
        // A generator is its own iterator: next() and for-loops consume the same items.
        auto g = std::make_shared<Var>(VarKind::kIterator);
        g->items = f.yields;
        g->obj = PyRef::borrow(reinterpret_cast<PyObject*>(&PyGen_Type));  // its type(), for isinstance
        return g;
      }
      return r;
    }
    try {
      step(f, op, in);
    } catch (const PyRaised& raised) {
      if (!enter_handler(f, raised)) throw;
    }
    if (f.suspended) return f.yielded;  // a @contextmanager's generator at its yield
  }
}

static PyObject* name_at(PyCodeObject* code, int i) { return PyTuple_GET_ITEM(code->co_names, i); }

void Interpreter::step(Frame& f, int op, const Instruction& in) {
  auto& st = f.stack;
  auto pop = [&]() { if (st.empty()) unsupported("stack underflow"); VarPtr v = st.back(); st.pop_back(); return v; };
  auto push = [&](VarPtr v) { st.push_back(std::move(v)); };
  auto popn = [&](int n) {
    if (static_cast<int>(st.size()) < n) unsupported("stack underflow");
    std::vector<VarPtr> out(st.end() - n, st.end());
    st.resize(st.size() - n);
    return out;
  };
  auto jump = [&](int target) { f.pc = target; };
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
