// The interpreter loop: opcode ids for a code object's instructions, running the captured frame
// and ending its capture (graph outputs, side effects to replay, identity guards, assertions,
// inference mode), and where an Unsupported points. What each instruction does is in opcodes/,
// calls are in calls/.
#include "frontend/interpreter/interpreter.h"
#include "frontend/interpreter/interpreter_frame.h"
#include "frontend/interpreter/opcodes/opcodes.h"

#include <functional>
#include <unordered_set>
#include <mutex>

#include "frontend/objects/tensor_probe.h"
#include "frontend/objects/torch_types.h"

namespace kiln::frontend {

// ---------------------------------------------------------------- opcode ids

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

}  // namespace kiln::frontend
