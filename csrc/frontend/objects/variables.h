// Symbolic values of the bytecode interpreter.
//
// Each stack slot and local holds a Var: a tensor (a graph value with a meta tensor for its
// metadata), a Python constant (specialised and guarded), a container of Vars, a Python object
// (module, function, class...), or one of the interpreter's helper kinds. A Var that came from
// the frame carries the Source it can be fetched from again.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "frontend/objects/py_ref.h"
#include "frontend/guards/sources.h"

namespace kiln::frontend {

struct Var;
using VarPtr = std::shared_ptr<Var>;

enum class VarKind {
  kTensor,         // node, fake, device
  kConst,          // obj: None/bool/int/float/str/dtype/device/slice/torch.Size/tuple-of-consts...
  kTuple,          // items; obj = namedtuple type or null
  kList,           // items (mutable)
  kDict,           // keys (constants) + items; obj: OrderedDict/defaultdict made during capture (then
                   // self = the defaultdict's factory: list, int or float), else null
  kObject,         // obj: any other Python object (module, function, class, nn.Module...)
  kNull,           // the NULL a call sequence pushes
  kIterator,       // items + pos
  kCell,           // items[0] = contents (or empty)
  kBoundMethod,    // self + obj (a Python function) -> inlined with self first
  kTensorMethod,   // self (tensor) + name -> recorded as call_method
  kContainerMethod,// self (list/dict/tuple Var) + name -> interpreted
  kNestedFunction, // obj = code; items = closure cells; defaults/kwdefaults; name = qualname
  kGradMode,       // a no_grad()/enable_grad()/set_grad_enabled() context: flag; name "no-op" for
                   // contexts that change nothing traced (profiler ranges, nullcontext): self =
                   // what entering gives
  kGradModeExit,   // the bound __exit__ of an entered grad-mode context: flag = mode to restore
  kAutocastExit,   // the __exit__ of a torch.autocast block the capture entered: pos = its depth
                   // in Interpreter::autocast_blocks_ (autocast_blocks.cpp)
  kGenerator,      // a generator object from an inlined generator function: items = yields
  kSuper,          // super(obj = class, self = instance): attribute lookup starts after the class
  kNewObject,      // an instance created during capture: obj = class, keys/items = its attributes,
                   // self = its dict contents (a kDict) when the class derives from dict
  kDictView,       // d.keys()/values()/items(): self = the dict Var, name = which; live, so it
                   // reads the dict's contents whenever it is iterated, measured or searched
  kPartial,        // functools.partial made during capture: self = the function, items = its
                   // positional arguments then its keyword values, keys = the keywords' names
  kSymInt,         // a number computed from symbolic sizes: node = the graph value that holds it
                   // at run time; fake = the torch.SymInt (over kiln's expression) meta code sees,
                   // or, with flag set, a float: fake = its captured value, items = the sizes and
                   // float arguments it was computed from (what specialising it guards); a float
                   // argument itself has a source and no items. With float_tensor set, its graph
                   // value is a 0-d float64 tensor (dynamic_floats.cpp), else a Python float
  kGenContext,     // a @contextlib.contextmanager: self = the generator function (a kObject
                   // function or kNestedFunction); flag set once called: items = its arguments,
                   // then keyword values (keys = their names). Entered by a with-statement only.
  kGenContextExit, // the __exit__ of an entered one: pos = its suspended generator frame
                   // (Interpreter::suspended_)
  kGenFrame,       // a generator whose yields evaluate to what send() gives it (generator_context.cpp):
                   // pos = its suspended frame (Interpreter::suspended_), run to each yield by
                   // next()/send(); only those calls use it (anything else is a clean break)
  kNdarray,        // a numpy array computed from tensors (numpy_interop.cpp): node, fake, device of
                   // the tensor holding its data; flag: numpy hands back a numpy scalar
  kSymSlice,       // a slice with symbolic bounds (`x[:, a:t]`): node = the graph's slice value,
                   // fake = the slice of SymInts meta code sees, items = start, stop, step
};

struct Var {
  VarKind kind;
  PyRef obj;
  int node = -1;
  PyRef fake;
  PyRef device;
  std::vector<VarPtr> items;
  std::vector<PyRef> keys;
  VarPtr self;
  std::string name;
  size_t pos = 0;
  bool flag = false;
  bool inference = false;  // kTensor: an inference tensor (made under torch.inference_mode, or given as one)
  bool float_tensor = false;  // kSymInt float held by the graph as a 0-d float64 tensor
  bool fresh = false;   // a container made for this call (e.g. the frame's **kwargs): mutable
  // kObject from the frame, guarded by its type only (instances of user classes: a cache object,
  // a ModelOutput built by the caller). What the capture reads of it is guarded through its
  // source; its identity only once the capture depends on it (Interpreter::identity).
  bool type_guarded = false;
  PyRef defaults, kwdefaults;
  PyRef globals;        // kNestedFunction: the globals the code runs with
  SourcePtr source;
  // vars(obj) / obj.__dict__ of a kNewObject: the object holds its dict (kept equal to its
  // attributes as they change, so the dict is live) and the dict its object, through which it is
  // rebuilt (as that object's __dict__, so both keep their identity in the results).
  VarPtr attrs_dict;
  std::weak_ptr<Var> owner;

  explicit Var(VarKind k) : kind(k) {}
  bool is_tensor() const { return kind == VarKind::kTensor; }
  bool is_const() const { return kind == VarKind::kConst; }
  bool is_symint() const { return kind == VarKind::kSymInt; }
};

VarPtr make_const(PyObject* o);            // borrows o
VarPtr make_object(PyObject* o, SourcePtr src);
VarPtr make_null();
VarPtr make_seq(VarKind k, std::vector<VarPtr> items);
VarPtr make_container_method(VarPtr self, std::string name);  // self.<name>, interpreted

// True for immutable values kiln specialises on and bakes into graphs.
bool is_constant_like(PyObject* o);
bool is_numpy_scalar(PyObject* o);  // numpy.number / numpy.bool_ (numpy already imported)
bool is_numpy_array(PyObject* o);   // exactly numpy.ndarray (numpy already imported)
const char* kind_name(VarKind k);

}  // namespace kiln::frontend
