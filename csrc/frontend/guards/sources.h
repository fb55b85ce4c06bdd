// Sources: how to fetch a value again from a new call's frame, without running Python code.
//
// Every input the capture read (a tensor argument, a module parameter, a global, a closure
// cell) has a source. Guards are attached to sources, and a cache hit gathers the graph's
// inputs through them. Sources form chains: `L['self']._modules['fc']._parameters['weight']`.
#pragma once
#include <memory>
#include <string>

#include "frontend/objects/py_ref.h"

namespace kiln::frontend {

// The frame being checked: argument slots and the running function.
struct FrameView {
  PyObject** locals = nullptr;
  PyObject* func = nullptr;
  // The objects the entry's prologue made for this run (Source::kMade), in order; null when the
  // view serves a guard check (made objects are never guarded).
  PyObject* const* made = nullptr;
};

struct Source;
using SourcePtr = std::shared_ptr<const Source>;

struct Source {
  enum Kind {
    kLocal,         // frame argument slot `index`
    kFrameFunc,     // the function being called (closure cells hang off it)
    kClosureCell,   // contents of closure cell `index` of the parent function
    kGlobal,        // dict `obj`[key] (a function's globals or the builtins)
    kInstanceAttr,  // parent.__dict__[key]
    kModuleMember,  // parent.__dict__[member][key], e.g. _parameters['weight']
    kItem,          // parent[index] for an exact list or tuple
    kDictItem,      // parent[key] for an exact dict
    kConstant,      // a fixed object held by the source itself (no re-fetch)
    kTypeLookup,    // the class attribute `key` as attribute lookup finds it on type(parent)
                    // (index 0) or on parent itself when parent is a class (index 1)
    kInstanceDict,  // parent.__dict__ itself
    kMade,          // made anew for every run, before the graph, by calling `obj()` (a
                    // Parameter built inside the captured code): FrameView::made[index]
    kWeakReferent,  // parent(), the object a weak reference (exactly weakref.ref) refers to;
                    // None once it died
    kTensorGrad,    // parent.grad of a tensor: its gradient, or None
  };
  Kind kind;
  SourcePtr parent;
  int index = -1;
  PyRef key;          // attribute/global name or dict key
  PyRef obj;          // kGlobal: the dict; kConstant: the object
  std::string member; // kModuleMember: "_parameters", "_buffers" or "_modules"
  PyRef member_key;   // ... as an interned Python string
  std::string name;   // kLocal: the argument's name
  std::string text;   // cached repr()

  // Borrowed reference to the value in `frame`, or nullptr (no exception set) if absent.
  PyObject* fetch(const FrameView& frame) const;
  // The last step alone: from the parent's value (sources with a parent), or from the frame
  // (sources without one). The guard tree walks a path once this way.
  PyObject* step(PyObject* parent_value) const;
  PyObject* root(const FrameView& frame) const;
  const std::string& repr() const { return text; }
  // A short identifier-friendly name for graph placeholders, e.g. "l_self_fc_weight".
  std::string placeholder_hint() const;
};

SourcePtr local_source(int index, const std::string& name);
SourcePtr frame_func_source();
SourcePtr closure_cell_source(SourcePtr func, int index, const std::string& name);
SourcePtr global_source(PyObject* dict, PyObject* name, bool builtin);
SourcePtr attr_source(SourcePtr parent, PyObject* name);
SourcePtr module_member_source(SourcePtr parent, const std::string& member, PyObject* name);
SourcePtr item_source(SourcePtr parent, int index);
SourcePtr dict_item_source(SourcePtr parent, PyObject* key);
SourcePtr constant_source(PyObject* obj, const std::string& label);
SourcePtr type_lookup_source(SourcePtr parent, PyObject* name, bool parent_is_type);
SourcePtr instance_dict_source(SourcePtr parent);
SourcePtr made_source(PyObject* maker, int index, const std::string& label);
SourcePtr weak_referent_source(SourcePtr weakref);
SourcePtr tensor_grad_source(SourcePtr tensor);

std::string py_repr(PyObject* o);
std::string py_str(PyObject* o);

}  // namespace kiln::frontend
