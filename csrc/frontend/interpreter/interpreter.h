// The symbolic bytecode interpreter: Dynamo's job, in C++.
//
// It executes a frame's bytecode on symbolic values instead of real ones. Tensor operations are
// recorded into a graph (their output metadata comes from running them on meta tensors); Python
// values are specialised and guarded; user functions, closures and nn.Module.forward are
// inlined; loops unroll; branches on Python values follow the value and guard it. Anything it
// cannot model raises Unsupported, and the caller runs that frame eagerly instead.
#pragma once
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frontend/bytecode/bytecode.h"
#include "frontend/objects/dynamic_dims.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/guards/guards.h"
#include "frontend/interpreter/meta_exec.h"
#include "frontend/objects/variables.h"
#include "graph/graph.h"

namespace kiln::frontend {

// Thrown when the interpreter meets something it cannot capture; `where` is the user's
// "file:line".
struct Unsupported : std::runtime_error {
  Unsupported(const std::string& reason, std::string where_, std::string stack_ = "")
      : std::runtime_error(reason), where(std::move(where_)), stack(std::move(stack_)) {}
  std::string where;
  std::string stack;  // the chain of inlined calls leading there, outermost first
  // The instruction of the captured (outermost) frame that was running, and how many times it
  // had been reached: where a graph break can split the frame. -1 when there is none.
  int root_index = -1;
  int root_visit = 0;
};

// A Python exception the interpreted code raises where kiln knows Python would (a missing dict
// key, an index out of range, a missing attribute of an object made here, `raise`, a folded
// builtin that raised). A handler in the code's exception table, in this frame or an inlined
// caller, takes it (exceptions.cpp); uncaught, it is an Unsupported like any other, and the eager
// run of that region raises it for real.
struct PyRaised : Unsupported {
  PyRaised(const Unsupported& u, VarPtr exc_) : Unsupported(u), exc(std::move(exc_)) {}
  VarPtr exc;  // a kObject holding the exception instance
};

// How to rebuild the frame's return value from the graph's outputs.
struct OutputTemplate {
  enum Kind { kGraphOut, kConst, kTuple, kList, kDict, kNewObject, kGetAttr, kMethod, kFetch, kCopy, kNumpy } kind = kConst;
  int index = -1;       // kGraphOut
  bool as_float = false;  // kGraphOut: a 0-d tensor standing for a Python float (a dynamic float)
  PyRef obj;            // kConst: the value; kDict: tuple of keys; kTuple: namedtuple type or null;
                        // kNewObject: the class; kGetAttr: the attribute name (of items[0]);
                        // kMethod: the function bound to items[0]; kNumpy: items[0].numpy(),
                        // and [()] of it (a numpy scalar) when obj is True
  SourcePtr source;     // kFetch: a value of the frame itself (an argument or what it holds),
                        // fetched again so the caller sees the very object, mutated in place
  PyRef names;          // kNewObject: tuple of attribute names (items[i] is the value of names[i])
  // kList/kDict/kNewObject made during the capture: its number among the objects the frame's
  // results and side effects rebuild (each is built once per run and shared by every place that
  // holds it: `b = a`, an object stored in a list), or -1.
  int shared = -1;
  std::vector<OutputTemplate> items;
  std::vector<OutputTemplate> dict_part;  // kNewObject of a dict subclass: a single kDict template
  PyRef dict_setitem;                     // ... and its builtin base's __setitem__ (dict/OrderedDict);
                                          // kDict: the OrderedDict/defaultdict type when the dict is one
                                          // (names: then the defaultdict's factory), or null;
                                          // kCopy: copy.deepcopy, applied to obj (a trace-time value)
  // New reference, or nullptr with an exception set. `built` holds the shared objects made so
  // far in this run (Capture::shared_objects slots).
  PyObject* build(PyObject* const* outputs, const FrameView& frame, std::vector<PyRef>& built) const;
};

// A side effect on a pre-existing object, replayed after the graph runs: an attribute
// assignment (target.name = value, when `name` is set), or new contents for a list or dict the
// frame was given (filled with value's items). The object is `target`, or, when `source` is
// set, what the source reaches in the call's frame (fetched before any store).
struct SideEffect {
  PyRef target;
  PyRef name;
  OutputTemplate value;
  SourcePtr source;
};

// A graph break: the captured frame stops before one of its own instructions (a call kiln cannot
// trace into, a branch on a tensor's value, a subscript whose result's shape depends on data such
// as `x[mask]`); the graph computes everything before it, the instruction runs eagerly, and a
// resume function continues the frame from the next one.
struct BreakState {
  enum Kind { kCall, kJumpIfTrue, kJumpIfFalse, kStoreAttr, kSubscript } kind = kCall;
  int index = -1;                 // the instruction that runs eagerly
  int offset = 0;                 // its byte offset (names the resume functions)
  int call_args = 0;              // kCall: CALL's argument count
  PyRef kw_names;                 // kCall: the pending KW_NAMES tuple, or null
  PyRef attr_name;                // kStoreAttr: the attribute STORE_ATTR sets (`owner.name = value`)
  std::vector<bool> stack_null;   // the live stack before the instruction, bottom first
  int n_locals = 0;               // the frame's local slots, all passed to the resume function
  std::vector<int> unbound;       // ... of which these are unbound at the break
  // torch.inference_mode at the break (entered by the captured code: the break enters it for real,
  // with grad mode as it was before the with-statement, and the exit on the stack leaves it).
  bool inference_at_break = false, inference_at_start = false, inference_prev_grad = true;
  // Grad mode at the break (inside `with torch.no_grad()` it differs from the frame's start):
  // the instruction and the resume function run in it; the frame's own mode is restored if the
  // instruction raises (as leaving the with-blocks would).
  bool grad_at_break = true, grad_at_start = true;
  // The torch.autocast blocks the capture entered and the break is inside, outermost first: each
  // its torch.amp._enter_autocast arguments (the break enters them for real, see autocast_blocks.cpp).
  std::vector<PyRef> autocast_at_break;
  // The capture's output template is a tuple: the non-NULL stack items, then every local slot.
};

// Everything a capture produces: the graph, what its inputs are and where to fetch them, the
// guards under which it is valid, and how to assemble the return value.
struct Capture {
  std::shared_ptr<graph::Graph> graph = std::make_shared<graph::Graph>();
  std::vector<PyRef> objects;            // the graph's handle table (targets, constants)
  std::vector<SourcePtr> inputs;         // one per placeholder, in order
  std::vector<PyRef> example_inputs;
  std::vector<SourcePtr> made;           // Source::kMade, by index: made before every run
  std::vector<SourcePtr> numpy_inputs;   // inputs that are numpy arrays: the graph takes torch.from_numpy of each
  std::vector<SourcePtr> float_inputs;   // dynamic float arguments: the graph takes a 0-d float64 tensor of each
  int shared_objects = 0;                // OutputTemplate::shared numbers handed out
  OutputTemplate output;
  std::vector<SideEffect> side_effects;  // applied in order after the graph ran
  std::shared_ptr<GuardTree> guards = std::make_shared<GuardTree>();
  std::vector<bool> removable;           // per node: kiln-made node that may be dropped if unused
  std::string name;                      // qualified name of the captured function
  std::string where;                     // its file:line
  int inlined_functions = 0;
  std::unique_ptr<BreakState> brk;       // set when the capture stopped at a graph break
  bool mutates_inputs = false;           // an in-place op may write a tensor the frame was given
  bool enters_autocast = false;          // the graph enters torch.autocast blocks: a run that raises
                                         // inside one puts the caller's autocast state back
  // `assert t` on a one-element tensor (as Dynamo turns it into an in-graph check): the graph
  // outputs the condition, at this output index, and the call checks its truth (second: the
  // truth the assertion needs) before anything the frame could observe happens; a failed one
  // reruns the frame eagerly, so eager's AssertionError, with its message, is raised.
  std::vector<std::pair<int, bool>> assertions;
  // torch.inference_mode: 1: every tensor operation of the graph is inside an inference_mode
  // block, and the graph runs under InferenceMode (its new tensors are inference tensors, as in
  // eager); 0: the frame starts inside one but the graph computes outside it too, and runs with
  // it off (no inference tensor it made leaves it); -1: as the caller has it. Then
  // pop_inference_after with-blocks entered before the frame (at a graph break) are left.
  int inference_run = -1;
  int pop_inference_after = 0;
  // Symbolic sizes: the symbols of dynamic dimensions and the shape guards capture recorded.
  std::shared_ptr<sym::ShapeEnv> shape_env = std::make_shared<sym::ShapeEnv>();
  std::vector<std::string> dynamic_changes;  // dimensions made dynamic by this capture, and why
};

struct CaptureOptions {
  int max_inline_depth = 48;
  int max_instructions = 2000000;
  bool memoize_meta = true;
  // Stop before the outermost frame's instruction `break_at` when it is reached for the
  // `break_visit`-th time, and describe the frame's state there (see BreakState).
  int break_at = -1;
  int break_visit = 0;
  DynamicPolicy dynamic = DynamicPolicy::kAutomatic;
  SizeHistory* size_history = nullptr;  // the code object's, for automatic dynamic
};

class Interpreter {
 public:
  Interpreter(const kiln_frame& frame, CaptureOptions options);
  ~Interpreter();
  // Throws Unsupported. After a throw, capture().guards still holds the guards gathered so far.
  void run();
  Capture& capture() { return cap_; }
  bool initial_grad() const { return initial_grad_; }
  const MetaExecutor& meta() const { return meta_; }
  // Trace-time values: sets, deques, Counters, defaultdicts and OrderedDicts of Python values made
  // during the capture. They are real Python objects that only the capture holds, so their
  // methods run for real as the code runs; a returned one is copied for every call.
  bool is_trace_value(PyObject* o) const { return trace_values_.count(o) != 0; }
  // False when `o` was already handed back once (a second copy would lose their identity).
  bool claim_trace_output(PyObject* o) { return trace_outputs_.insert(o).second; }
  // OutputTemplate::shared of a list, dict or object made during the capture (one number per Var,
  // as a Var is one object); -1 while its template is being made (it refers to itself).
  int begin_shared_template(const VarPtr& v);
  void end_shared_template(const Var* v) { templates_in_progress_.erase(v); }
  // True when the trace-time set `o` holds a token standing for a symbolic value (set_member).
  bool holds_token(PyObject* o) const;

  struct Frame;

 private:
  // --- execution
  VarPtr run_frame(Frame& f);
  VarPtr capture_break_state(Frame& f);
  // What one instruction does (opcodes/): step runs those that move values (stack, locals, names,
  // attributes, containers) and hands the others on to step_expressions (operators, subscripts),
  // which hands its others on to step_control_flow (branches, loops, calls, with, generators,
  // imports, exceptions).
  void step(Frame& f, int op, const Instruction& in);
  void step_expressions(Frame& f, int op, const Instruction& in);
  void step_control_flow(Frame& f, int op, const Instruction& in);
  VarPtr pop_one(std::vector<VarPtr>& stack);                    // the top item
  std::vector<VarPtr> pop_n(std::vector<VarPtr>& stack, int n);  // the top n items, bottom first
  [[noreturn]] void unsupported(const std::string& reason);
  Unsupported make_unsupported(const std::string& reason) const;
  // Raises `type(*args)` (args: a tuple, or one object) / an exception instance in the
  // interpreted code (exceptions.cpp).
  [[noreturn]] void raise_python(PyObject* type, PyObject* args);
  [[noreturn]] void raise_python(PyObject* type, const std::string& message);
  [[noreturn]] void raise_instance(PyObject* exc);
  VarPtr make_exception(PyObject* cls, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  [[noreturn]] void raise_pending_python_error(const std::string& context);
  bool enter_handler(Frame& f, const PyRaised& raised);
  void exception_step(Frame& f, int op, const Instruction& in);
  std::string where() const;
  std::string inline_stack() const;

  // --- values
  VarPtr wrap(PyObject* o, const SourcePtr& src);
  VarPtr wrap_unguarded(PyObject* o, const std::string& label);
  static bool guard_by_type(PyObject* o, const SourcePtr& src);
  // The object a kObject holds, for a use that depends on which object it is (folding a call on
  // it, `is`, passing it to an operator): a type-guarded one gets its identity guard now.
  PyObject* identity(const VarPtr& v);
  VarPtr tensor_input(PyObject* t, const SourcePtr& src, TensorFacts* facts = nullptr);
  // A graph placeholder for `src` (`example` its value now, `meta` its description); the node.
  int add_input(const SourcePtr& src, PyObject* example, const std::string& meta);
  bool int_input_is_dynamic(PyObject* o, const SourcePtr& src);
  VarPtr symint_input(PyObject* o, const SourcePtr& src);
  // Dynamic floats (dynamic_floats.cpp): a float argument that varies between calls is a graph
  // input (a 0-d float64 tensor); arithmetic on it stays in the graph; a tensor operation takes it
  // as its scalar operand; any other use specialises it.
  VarPtr float_input(PyObject* o, const SourcePtr& src);
  VarPtr float_tensor_op(PyObject* fn, const std::vector<VarPtr>& args, PyObject* hint);
  VarPtr float_math(PyObject* fn, const std::vector<VarPtr>& args);
  bool has_float_tensor(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs);
  PyRef float_tensor_operands(bool pointwise, PyObject* hint_result, PyObject* target, const std::string& method,
                             std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, PyObject* fargs, PyObject* fkw);
  PyRef specialize_float_input(const VarPtr& v);
  VarPtr compare_float_input(int op, const VarPtr& a, const VarPtr& b);
  bool excludes_by_guard(const VarPtr& v, Py_ssize_t condition);
  // checked_conversion: the kFloatFits* bit eager's overflow check of a float operand asks for
  // (dynamic_floats.cpp), with kPowerExponent for a power (only its exponent is checked).
  Py_ssize_t checked_conversion(PyObject* target, const std::string& method, PyObject* dtype);
  static constexpr Py_ssize_t kPowerExponent = Py_ssize_t{1} << 20;
  VarPtr float_result(PyObject* fn, const std::vector<VarPtr>& args, PyObject* hint);
  PyObject* float64_meta();
  void make_dynamic(TensorFacts& f, uint64_t mask, const std::string& source, int input,
                    std::vector<sym::Expr>& sizes, std::vector<sym::Expr>& strides);
  // A value from meta code that may hold kiln SymInts: SymInts become kSymInt Vars read at run
  // time through `node` (getitem nodes for the items of a sequence); SymBools and SymFloats are
  // concretised (guarded); anything else goes to make_const.
  VarPtr wrap_symbolic(PyObject* value, int node);
  int getitem_node(int node, Py_ssize_t i, const std::string& meta);
  // An in-place call whose result eager cannot cast to the written tensor's dtype: unsupported.
  void check_inplace_cast(const std::string& name, const std::string& method, const VarPtr& self, PyObject* fargs, PyObject* fkw);
  bool holds_symint(PyObject* value);
  // The concrete Python value of a symbolic int (guarding the shape env on it).
  PyRef concretize(const VarPtr& v);
  long list_index(const VarPtr& v, const char* what);
  PyRef concretize_value(const VarPtr& v);
  void note_shape_guards(size_t before, const std::string& by);
  VarPtr symbolic_slice(const std::vector<VarPtr>& parts);
  VarPtr symbolic_basic_index(const VarPtr& x, const VarPtr& idx);
  bool is_symbolic_scalar(PyObject* o);
  static bool scalar_operands(const std::string& op_name);
  PyRef symint_hint(const VarPtr& v);  // the captured value of a symbolic int, unguarded
  VarPtr symint_op(PyObject* fn, const std::vector<VarPtr>& args);
  bool is_numeric(const VarPtr& v);  // an int/float constant or a symbolic int
  static bool is_float_scalar(const VarPtr& v) { return v->is_symint() && v->flag; }
  // A dynamic float argument itself (not a value computed from one): what guards can constrain.
  static bool is_float_argument(const VarPtr& v) { return v->float_tensor && v->items.empty() && v->source; }
  // v with its symbolic ints (top level, or items of a tuple/list made in the capture) specialised.
  VarPtr specialize_sizes(const VarPtr& v);
  void guard(const SourcePtr& src, GuardLeaf::Kind kind, PyObject* obj = nullptr, Py_ssize_t len = 0);
  void guard_class_attr(const SourcePtr& src, PyObject* found);
  PyObject* python_type_of(const VarPtr& v);
  bool truthy(const VarPtr& v);
  VarPtr python_truth(const VarPtr& v, PyTypeObject* t);
  // hasattr() on a type-guarded object, guarded by where the answer came from.
  bool has_attr_guarded(const VarPtr& o, PyObject* name);
  bool same_object(const VarPtr& a, const VarPtr& b, bool* known);
  std::vector<VarPtr> unpack(const VarPtr& v);
  VarPtr make_iterator(const VarPtr& v);
  std::vector<VarPtr> iterate_sequence(const VarPtr& v);
  // The real Python value of a constant, object or container of them (null if there is none);
  // with fake_tensors, tensors become their meta tensors (arguments for shape propagation).
  PyRef as_python(const VarPtr& v, bool fake_tensors = false);
  // f(*args, **kwargs) on the arguments' Python values (all_python_values holds), run now; a
  // Python error it raises is raised as the user's, named `context` (by default "constant
  // evaluation of f", spelled only then).
  PyRef call_on_python_values(PyObject* f, const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs,
                              const char* context = nullptr);
  bool all_const(const std::vector<VarPtr>& vs);
  bool all_python_values(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs);

  // --- graph recording
  int handle(PyObject* o);
  graph::Arg to_arg(const VarPtr& v);
  PyRef to_fake(const VarPtr& v);
  VarPtr record_op(graph::Op op, PyObject* target, const std::string& method, const std::vector<VarPtr>& args,
                   const std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr wrap_result(PyObject* fake, int node, PyObject* device);
  VarPtr record_grad_mode(bool enabled);
  // `value.to(dtype)` in the graph; its node.
  int record_cast(const graph::Arg& value, PyObject* dtype, const std::string& meta, bool removable);
  VarPtr device_dependent_query(const VarPtr& t, const std::string& method);
  VarPtr group_tensors_by_device_and_dtype(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs);

  // --- operations
  VarPtr scalar_keyword_operand(const VarPtr& fn, const std::vector<VarPtr>& args,
                                const std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr call(const VarPtr& fn, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs);
  VarPtr call_builtin(PyObject* fn, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, bool* handled);
  VarPtr call_library(PyObject* fn, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs, bool* handled);
  std::vector<VarPtr> sort_by_key(std::vector<VarPtr> items, const VarPtr& key, bool reverse);
  VarPtr call_container_method(const VarPtr& m, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr inline_function(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                         std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source);
  VarPtr call_module(const VarPtr& mod, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs);
  VarPtr call_new_object(const VarPtr& obj, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs);
  void require_no_global_module_hooks();
  // numpy on tensors (numpy_interop.cpp).
  struct NumpyResult {
    PyObject* dtype = nullptr;  // torch dtype, borrowed
    bool scalar = false;
    long ndim = 0;
  };
  static bool is_numpy_callable(PyObject* f);
  PyObject* numpy_dtype_of(const VarPtr& nd);
  VarPtr as_ndarray(const VarPtr& t, bool scalar);
  VarPtr ndarray_tensor(const VarPtr& nd);
  VarPtr tensor_to_ndarray(const VarPtr& t);
  VarPtr ndarray_input(PyObject* o, const SourcePtr& src);
  PyRef numpy_standin(const VarPtr& v);
  NumpyResult numpy_oracle(PyObject* fn, const std::vector<PyRef>& standins, PyObject* kwargs);
  VarPtr cast_to(const VarPtr& t, PyObject* torch_dtype);
  VarPtr numpy_result(const VarPtr& r, const NumpyResult& want, const std::string& what);
  VarPtr numpy_operand(const VarPtr& v, PyObject* dtype);
  bool numpy_operand_ok(const VarPtr& v);
  VarPtr ndarray_binary(const char* opn, const VarPtr& a, const VarPtr& b);
  VarPtr ndarray_unary(const char* opn, const VarPtr& a);
  VarPtr numpy_reduction(const std::string& name, const VarPtr& a, std::vector<VarPtr> rest,
                         const std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr numpy_call(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr ndarray_attr(const VarPtr& nd, PyObject* name);
  VarPtr ndarray_method(const VarPtr& nd, const std::string& name, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs);
  VarPtr tensor_from_ndarray(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  int ndarrays_made_ = 0;              // arrays share their tensor's memory: no in-place op after one
  std::vector<PyRef> numpy_refs_;      // numpy dtypes handed out as objects
  VarPtr fold_numpy_scalar_call(PyObject* f, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr tensor_type_method(const VarPtr& t, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr get_attr(const VarPtr& obj, PyObject* name);
  VarPtr super_attr(const VarPtr& sup, PyObject* name);
  // Instances created during capture (see VarKind::kNewObject).
  VarPtr construct(PyObject* cls, std::vector<VarPtr> args, std::vector<std::pair<std::string, VarPtr>> kwargs);
  VarPtr new_instance(PyObject* cls);  // cls.__new__(cls): the instance before __init__
  // @contextlib.contextmanager (generator_context.cpp): the factory, a call of it, and entering
  // and leaving its with-block, the generator suspended at its yield in between.
  VarPtr context_manager_of(const VarPtr& generator_function);
  static PyObject* contextmanager_generator(PyObject* f);  // the generator a decorated function wraps, or null
  std::pair<VarPtr, VarPtr> enter_generator_context(const VarPtr& ctx);  // (its exit, what `as` binds)
  VarPtr exit_generator_context(const VarPtr& exit);
  // Generators fed by send() (`v = yield x`): bound at the call, run to each yield when resumed.
  static bool uses_yield_value(PyCodeObject* code);
  VarPtr lazy_generator(std::unique_ptr<Frame> f);
  VarPtr resume_generator(const VarPtr& g, const VarPtr& sent, bool* done);
  VarPtr generator_method(const VarPtr& g, const std::string& name, std::vector<VarPtr>& args,
                          std::vector<std::pair<std::string, VarPtr>>& kwargs);
  std::vector<std::unique_ptr<Frame>> suspended_;
  // The frame of a call of a Python function (or nested function) with its arguments bound, not
  // yet run; run_inlined runs it as an inlined call.
  std::unique_ptr<Frame> bind_frame(PyObject* func, const VarPtr& nested, std::vector<VarPtr> args,
                                    std::vector<std::pair<std::string, VarPtr>> kwargs, const SourcePtr& func_source);
  VarPtr run_inlined(Frame& f);
  // A class statement inside captured code whose body only defines names (new_objects.cpp).
  VarPtr build_class(std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  // nn.Parameter(data, requires_grad) of a tensor the capture computed (new_parameter.cpp).
  VarPtr new_parameter(PyObject* cls, std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  VarPtr new_object_attr(const VarPtr& obj, PyObject* name);  // object.__getattribute__ (then __getattr__)
  // obj.name on a new object as Python looks it up: its class's Python __getattribute__ when it
  // has one (PreTrainedConfig's maps names through attribute_map), with __getattr__ after an
  // AttributeError; else new_object_attr. hasattr(): whether that raises AttributeError.
  VarPtr new_object_getattr(const VarPtr& obj, PyObject* name);
  bool new_object_hasattr(const VarPtr& obj, PyObject* name);
  // The contents of a dict-subclass instance the frame reaches (a ModelOutput passed in), read
  // through its builtin dict/OrderedDict methods: a read-only symbolic dict whose keys (in order)
  // are guarded and each value read through its source (value_wrapping.cpp). Null when obj is not
  // one, or `name` is not a builtin read method its class keeps.
  VarPtr dict_contents(const VarPtr& obj);
  bool keeps_dict_method(const VarPtr& obj, PyObject* name, PyObject* found);
  std::unordered_map<const Var*, std::pair<VarPtr, VarPtr>> dict_contents_;  // object -> (object, contents)
  // The object whose __dict__ `d` is (Var::attrs_dict), or null.
  static VarPtr attrs_owner(const VarPtr& d);
  // A mutating dict method on such a __dict__: applied to the dict and to the object's attributes.
  VarPtr mutate_attrs_dict(const VarPtr& d, const std::string& name, std::vector<VarPtr>& args,
                           std::vector<std::pair<std::string, VarPtr>>& kwargs);
  void set_new_object_attr(const VarPtr& obj, PyObject* name, const VarPtr& value);
  void del_new_object_attr(const VarPtr& obj, PyObject* name);  // object.__delattr__ on it
  void delete_attr(const VarPtr& obj, PyObject* name);          // del obj.name / delattr()
  // Calls a builtin method of a symbolic list, tuple, dict or new object: self.<name>(*args).
  VarPtr call_container(const VarPtr& self, const std::string& name, std::vector<VarPtr> args);
  VarPtr binary(const char* nb_name, const VarPtr& a, const VarPtr& b);
  VarPtr compare(int op, const VarPtr& a, const VarPtr& b);
  VarPtr subscript(const VarPtr& obj, const VarPtr& idx);
  VarPtr module_list_slice(const VarPtr& obj, PyObject* slice);
  VarPtr unary(PyObject* op_fn, const VarPtr& v);
  VarPtr contains(const VarPtr& item, const VarPtr& container);
  // d.get(k[, default]) / d[k] / k in d on an existing dict (operators.cpp), null when kiln does
  // not read it entry by entry.
  VarPtr existing_dict_lookup(const VarPtr& d, const std::string& name, const std::vector<VarPtr>& args);
  // obj.__reduce_ex__(protocol) as object's own answers it, for copy.deepcopy (copy_protocol.cpp);
  // null when obj's class customises pickling.
  VarPtr reduce_ex(const VarPtr& obj, const std::vector<VarPtr>& args);
  VarPtr from_python_value(PyObject* r, bool shared);
  VarPtr fold(PyObject* fn, const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs);

  // Attribute stores on existing objects: later reads see them; the last per (object, name)
  // is replayed after the graph runs.
  struct AttrStore {
    VarPtr target;
    PyRef name;
    VarPtr value;
  };
  void store_attr(const VarPtr& obj, PyObject* name, const VarPtr& value);
  VarPtr stored_attr(const VarPtr& obj, PyObject* name);
  static PyObject* module_of_globals(PyObject* globals);  // borrowed, or null
  std::vector<AttrStore> attr_stores_;
  // Lists and dicts the frame was given, as wrapped (see wrap()), and those the capture mutated:
  // their new contents are written back after the graph, once, under a guard that no two of
  // them are the same object.
  struct InputContainer {
    VarPtr var;
    PyRef object;  // owned: capture may run Python code that drops the frame's references
  };
  std::vector<InputContainer> input_containers_;
  std::vector<VarPtr> mutated_containers_;
  void note_container_mutation(const VarPtr& container, const std::string& what);
  // Tensor conditions of `assert` statements (see Capture::assertions), and where the first one
  // is in the outermost frame (the graph breaks there instead when the graph also writes inputs).
  struct Assertion {
    VarPtr cond;
    bool truth;
  };
  std::vector<Assertion> assertions_;
  // torch.inference_mode (see Capture::inference_run).
  bool inference_ = false, initial_inference_ = false, inference_prev_grad_ = true;
  int ops_in_inference_ = 0, ops_outside_inference_ = 0;
  std::unordered_set<int> inference_nodes_;  // graph values that are inference tensors
  void note_inference(const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs, bool inplace);
  void mark_inference_result(const VarPtr& r, bool any_input_marked);
  VarPtr enter_inference_mode(const VarPtr& ctx);
  void leave_inference_mode(bool prev_grad);
  // torch.autocast blocks the capture entered, outermost first (autocast_blocks.cpp): the
  // _enter_autocast arguments, the context entered for real while capturing, its graph node.
  struct AutocastBlock {
    PyRef args, entered;
    int node;
  };
  std::vector<AutocastBlock> autocast_blocks_;
  VarPtr enter_autocast(const VarPtr& ctx);
  void exit_autocast(const VarPtr& exit);
  void close_autocast_blocks();
  void abandon_autocast_blocks() noexcept;
  int first_assert_index_ = -1, first_assert_visit_ = 0;
  std::string first_assert_where_;
  bool tensor_assertion(Frame& f, const Instruction& in, const VarPtr& cond, bool truth);

  const kiln_frame& root_;
  CaptureOptions opts_;
  Capture cap_;
  MetaExecutor meta_;
  std::vector<Frame*> frames_;
  std::unordered_map<std::string, VarPtr> wrapped_;   // source repr -> Var
  std::unordered_map<int, PyObject*> input_tensors_;  // a tensor input's node -> its object
                                                      // (cap_.example_inputs keeps it alive)
  std::vector<VarPtr> made_parameters_;               // nn.Parameters the capture made
  std::vector<PyRef> owned_classes_;                  // classes made by class statements
  std::unordered_map<PyObject*, int> handles_;
  bool initial_grad_ = true;
  int instructions_ = 0;
  std::vector<int> root_visits_;  // per instruction of the outermost frame: times reached
  bool stopped_ = false;          // the capture reached CaptureOptions::break_at
  PyRef default_device_;
  PyRef float64_meta_;  // a 0-d float64 meta tensor: a dynamic float in a tensor operation's meta run
  // collections.deque(iterable, maxlen) made during capture: a kList whose obj is the deque type
  // and pos its maxlen + 1 (0: unbounded); see is_deque. It is never handed back (a clean break).
  VarPtr make_deque(std::vector<VarPtr>& args, std::vector<std::pair<std::string, VarPtr>>& kwargs);
  static bool is_deque(const VarPtr& v);
  VarPtr call_deque_method(const VarPtr& self, const std::string& name, std::vector<VarPtr>& args);
  // Trace-time values (see is_trace_value): owned here, so their addresses stay theirs.
  VarPtr trace_value(PyObject* o);
  static bool trace_value_type(PyObject* o);
  std::vector<PyRef> trace_owned_;
  std::unordered_set<PyObject*> trace_values_, trace_outputs_;
  // A value as a member of a trace-time set (set.add, `in`, discard): Python values as
  // themselves, an existing object as itself (guarded by identity), and an object made during the
  // capture or a tensor it computed as a token object that stands for it: both hash by identity,
  // and the Var is that identity. Null when the value cannot be a member.
  PyRef set_member(const VarPtr& v);
  std::unordered_map<const Var*, int> template_ids_;
  std::vector<VarPtr> template_vars_;  // keeps those Vars (and so their addresses) alive
  std::unordered_set<const Var*> templates_in_progress_;
  std::unordered_map<const Var*, PyRef> tokens_;
  std::unordered_map<PyObject*, VarPtr> token_vars_;
  // Tensor inputs used as set members: one token per object (two sources may reach one tensor),
  // and the sources that reached it; their identities are guarded when the capture ends.
  std::unordered_map<PyObject*, PyRef> input_tokens_;
  std::unordered_map<PyObject*, std::vector<SourcePtr>> member_sources_;
  // id(v) (builtins.cpp): the real id of an object whose identity the capture specialises on, or
  // a fake id (fake_id.h), one per value: keyed by the constant or trace-time object, the tensor's
  // graph value, or else the Var, each kept alive (with its token) for the whole capture.
  VarPtr id_of(const VarPtr& v);
  void refuse_fake_ids(const VarPtr& v, const char* use);
  std::map<std::pair<int, const void*>, PyRef> fake_ids_;
  std::vector<PyRef> fake_id_holds_;
  std::vector<VarPtr> fake_id_vars_;
};

}  // namespace kiln::frontend
